"""A pass over many runs: the judges built from their options, the worker pool that keeps K model
calls in flight, progress, and the pass's report (also written into each set's manifest)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import queue
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from harness.core.daemon_pool import DaemonPool
from harness.client.calls import allow_calls, stop_calls
from harness.client.structured import structured_counts, structured_report
from harness.offline_judge.episodes import Job, JudgeSlot, judge_episode, line_usage
from harness.offline_judge.errors import OfflineJudgeError
from harness.offline_judge.heap import TRIM_EVERY, give_back_free_memory
from harness.offline_judge.sets import JudgementSet, check_set_id, default_set_id, spec_key
from harness.offline_judge.targets import EpisodesRead, TargetEpisodes, read_episodes
from harness.records import build_environment_info, now_iso
from harness.core.usage import Meter


@dataclass
class OfflineReport:
    set_id: str
    runs: list[str]
    total: int = 0
    judged: int = 0
    already_judged: int = 0
    skipped_errors: int = 0          # of the already judged, lines with a judge_error (--retry-errors judges them again)
    retried: int = 0
    not_judged: dict[str, int] = field(default_factory=dict)
    verdicts: dict[str, dict[str, int]] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    attributed_calls: int = 0
    wall_s: float = 0.0
    interrupted: bool = False
    outputs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # judge_error reasons by kind (numbers left out): [verdicts, the first reason as the judge gave it]
    errors: dict[str, list[Any]] = field(default_factory=dict)
    concurrency: int = 0
    episodes_in_flight: int = 0
    workers: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class JudgeSetup:
    """What to build: judge names, their options (with the model endpoint filled in), a factory."""

    names: list[str]
    options: dict[str, dict[str, Any]]
    build: Callable[[str], Any]
    specs: list[dict[str, Any]]
    model: Any = None


def prepare_judges(names: list[str], judge_opts: dict[str, str] | None, model: Any, concurrency: int,
                   cache: str | None = None) -> JudgeSetup:
    """Resolve options the way ``harness run`` does (``with_model`` fills each judge's ``model``
    field), with the model's concurrency set to K, and build each judge once to check the options."""
    import judges  # noqa: F401  (registers the judges)
    from harness.core.registry import JUDGES, RegistryError
    from harness.run.options import RunError, opts_for, with_model

    if not names:
        raise OfflineJudgeError("no judge given (--judge crate,crate-s,...)")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise OfflineJudgeError(f"judge {', '.join(dup)} given twice")
    if model is not None:
        model = dataclasses.replace(model, concurrency=concurrency)
    for n in names:  # a judge module that judges/__init__ does not import (yet): judges/<name>.py
        if n not in JUDGES.entries:
            with contextlib.suppress(ImportError):
                importlib.import_module("judges." + n.split("-")[0].replace("-", "_"))
    opts: dict[str, dict[str, Any]] = {}
    for n in names:
        if n not in JUDGES.entries:
            raise OfflineJudgeError(f"unknown judge {n!r} (known: {', '.join(JUDGES.names())})")
        if getattr(JUDGES.entries[n].config, "needs_live_device", False):
            others = [k for k in JUDGES.names() if not getattr(JUDGES.entries[k].config, "needs_live_device", False)]
            raise OfflineJudgeError(
                f"judge {n!r} reads the live phone's state while the episode runs, so it cannot judge recorded "
                f"episodes; use it in `harness run --judge {n}`, or judge recordings with another judge "
                f"({', '.join(others)})")
        o = opts_for(JUDGES, n, dict(judge_opts or {}))
        if cache is not None:
            fields = {f.name for f in dataclasses.fields(JUDGES.entries[n].config)}
            for k in ("cache", "cache_path", "evidence_cache", "cache_file"):
                if k in fields and k not in o:
                    o[k] = cache
                    break
        try:
            opts[n] = with_model(JUDGES, n, o, model, "--model-base-url URL --model NAME")
        except RunError as e:
            raise OfflineJudgeError(str(e)) from None
    unknown = set(judge_opts or {}) - {k for n in names for k in opts_for(JUDGES, n, dict(judge_opts or {}))}
    if unknown:
        raise OfflineJudgeError(f"--judge-opt {', '.join(sorted(unknown))}: no chosen judge has such an option")
    specs = []
    try:
        for n in names:
            j = JUDGES.build(n, opts[n])
            specs.append(j.spec() if hasattr(j, "spec") else {"name": n})
            for attr in ("start", "on_step", "finish"):
                if not callable(getattr(j, attr, None)):
                    raise OfflineJudgeError(f"judge {n!r} is not a step observer (no {attr} method)")

            close = getattr(j, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
    except RegistryError as e:
        raise OfflineJudgeError(str(e)) from None
    return JudgeSetup(names=list(names), options=opts, build=lambda n: JUDGES.build(n, opts[n]), specs=specs,
                      model=model)


def _progress(total: int, enabled: bool, file: Any = None):
    if not enabled:
        return contextlib.nullcontext(None)
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    console = Console(file=file or sys.stderr)
    return Progress(TextColumn("[bold]judging[/bold]"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TextColumn("eta"),
                    TimeRemainingColumn(), console=console, transient=False)


# what differs between two reports of one failure: the step it met, times and attempt counts
_STEP, _NUMBERS = re.compile(r"^step \d+: "), re.compile(r"\d+(?:\.\d+)?")


def error_reason(details: Any) -> str:
    """A judge_error's reason as its judge gave it, on one line."""
    why = details.get("error") if isinstance(details, dict) else None
    return " ".join(str(why or "no reason recorded").split())[:400]


def _add_jobs(jobs: list[Job], read: TargetEpisodes, js: JudgementSet, report: OfflineReport) -> None:
    """The jobs of one target: its selected episodes without a line in the set, not infra errors."""
    t = read.target
    for m in read.missing:
        report.not_judged["no result line (episode not finished)"] = \
            report.not_judged.get("no result line (episode not finished)", 0) + 1
        report.warnings.append(f"{t.run_dir}: episode {m} has no result line; not judged")
    for e in read.episodes:
        report.total += 1
        if e.task_id in js.done:
            report.already_judged += 1
            report.skipped_errors += e.task_id in js.errored
        elif e.status in ("infra_error", "task_error"):  # nothing the agent did to judge
            report.not_judged[e.status] = report.not_judged.get(e.status, 0) + 1
        else:
            jobs.append(Job(len(jobs), t.run_dir, e, js))


def judge_runs(paths: Iterable[str | Path] | EpisodesRead, setup: JudgeSetup, *, concurrency: int = 8,
               set_id: str | None = None, suite: str | Path | None = None, retry_errors: bool = False,
               episodes_in_flight: int | None = None, fresh_judges: bool = False, progress: bool = False,
               progress_file: Any = None,
               argv: list[str] | None = None, fsync: bool = True,
               stop: threading.Event | None = None) -> OfflineReport:
    """Judge every complete episode of the given runs (or episode folders) with ``setup``'s judges.
    ``paths`` may be what :func:`~harness.offline_judge.targets.read_episodes` read from them (with
    ``suite``), as ``harness judge`` does before building its judges; its reading time counts in
    the pass's wall time either way."""
    if concurrency < 1:
        raise OfflineJudgeError("--concurrency must be >= 1")
    read = paths if isinstance(paths, EpisodesRead) else read_episodes(paths, suite)
    targets = [te.target for te in read.targets]
    model_name = getattr(setup.model, "model", None)
    key = spec_key(setup.specs)
    set_id = check_set_id(set_id or default_set_id(setup.names, model_name, [t.run_dir for t in targets], key))
    in_flight = episodes_in_flight or max(2 * concurrency, 4)
    model_json = setup.model.to_json() if hasattr(setup.model, "to_json") else None
    report = OfflineReport(set_id=set_id, runs=[str(t.run_dir) for t in targets], concurrency=concurrency,
                           episodes_in_flight=in_flight, warnings=list(read.warnings))
    started = now_iso()
    modes_before = structured_counts()
    t_start = time.monotonic() - read.read_s
    sets: list[JudgementSet] = []
    jobs: list[Job] = []
    try:
        for te in read.targets:
            t = te.target
            js = JudgementSet(t.run_dir, set_id, key, retry_errors=retry_errors, fsync=fsync)
            sets.append(js)
            report.warnings.extend(js.warnings)
            report.retried += js.retried
            report.outputs.append(str(js.results))
            header = {
                **js.manifest, "kind": "crate-harness judgements", "judge_set": set_id, "judges": setup.names,
                "specs": setup.specs, "spec_key": key, "model": model_json,
                "run": str(t.run_dir), "environment": build_environment_info(),
                "command": argv if argv is not None else sys.argv,
                "created_at": js.manifest.get("created_at") or started}
            if js.manifest:  # an existing set: its manifest is rewritten only if this pass adds to it
                js.write_manifest_if_judged(header)
            else:
                js.write_manifest(header)
            _add_jobs(jobs, te, js, report)
        total = Meter()
        todo: queue.Queue[Job] = queue.Queue()
        for j in jobs:
            todo.put(j)
        done_q: queue.Queue[tuple[Job, dict[str, Any] | BaseException]] = queue.Queue()
        stop = stop or threading.Event()

        warming = [0]
        warm_lock = threading.Lock()
        # the judges' calls and image work, for every worker: calls beyond K wait for an endpoint
        # slot anyway, so K threads plus a margin (for image work) keep K in flight, however many
        # episodes are open (a pool per judge per worker was hundreds of threads, and the memory
        # of the pass grew with them)
        calls = DaemonPool(concurrency + max(2, concurrency // 4), thread_name_prefix="judge-calls")

        def worker() -> None:
            slot = JudgeSlot(setup.build, fresh=fresh_judges)
            try:
                for n in setup.names:  # build now: the controller waits for this before adding workers
                    with contextlib.suppress(Exception):
                        slot.get(n)
            finally:
                with warm_lock:
                    warming[0] -= 1
            try:
                while not stop.is_set():
                    try:
                        job = todo.get_nowait()
                    except queue.Empty:
                        return
                    try:
                        line = judge_episode(job, setup.names, slot, Meter(parent=total), calls)
                        if not stop.is_set():
                            job.out.append(line)
                        done_q.put((job, line))
                    except BaseException as e:  # pragma: no cover - judge_episode catches what judges raise
                        done_q.put((job, e))
            finally:
                slot.close()

        with _progress(len(jobs), progress, progress_file) as bar, contextlib.ExitStack() as closing:
            closing.callback(calls.shutdown, wait=False, cancel_futures=True)
            task_id = bar.add_task("judging", total=len(jobs), info="") if bar is not None else None
            threads: list[threading.Thread] = []
            cap = min(in_flight, max(1, len(jobs)))
            # Workers are added while fewer than K (+ a margin) calls are waiting or in flight and the
            # last ones added have built their judges: judges that call the model one step after
            # another get about K workers, judges that send their step calls in parallel (crate) only
            # a few, so few judge objects (and model clients) are ever built.
            target = concurrency + max(1, concurrency // 4)
            ramp = max(1, concurrency // 4)

            def add_workers(n: int) -> None:
                for _ in range(n):
                    if len(threads) >= cap or todo.empty():
                        return
                    th = threading.Thread(target=worker, name=f"judge-{len(threads)}", daemon=True)
                    threads.append(th)
                    with warm_lock:
                        warming[0] += 1
                    th.start()

            add_workers(ramp)
            finished = 0
            next_tick = time.monotonic() + 0.3
            try:
                while finished < len(jobs):
                    now = time.monotonic()
                    if now >= next_tick:
                        next_tick = now + 0.3
                        if warming[0] == 0 and len(threads) < cap and not todo.empty():
                            peak = total.take_peak()
                            if peak < target:  # add what the demand per worker seen so far says is missing
                                per_worker = max(1.0, peak / max(1, len(threads)))
                                add_workers(min(ramp, max(1, math.ceil((target - peak) / per_worker))))
                    try:
                        job, out = done_q.get(timeout=max(0.01, next_tick - time.monotonic()))
                    except queue.Empty:
                        if not todo.empty() and not any(th.is_alive() for th in threads):
                            add_workers(ramp)
                        elif not any(th.is_alive() for th in threads) and done_q.empty():
                            break
                        continue
                    finished += 1
                    if finished % TRIM_EVERY == 0:
                        give_back_free_memory()
                    if isinstance(out, BaseException):
                        report.warnings.append(f"{job.run_dir}: {job.task_id}: {type(out).__name__}: {out}")
                        continue
                    report.judged += 1
                    report.attributed_calls += out["usage"]["calls"]
                    for name, v in out["verdicts"].items():
                        c = report.verdicts.setdefault(name, {"true": 0, "false": 0, "judge_error": 0})
                        c["true" if v is True else "false" if v is False else "judge_error"] += 1
                        if v == "judge_error":  # why, said at the end (one line per kind of reason)
                            why = error_reason((out.get("details") or {}).get(name))
                            key = _NUMBERS.sub("#", _STEP.sub("", why))
                            report.errors.setdefault(key, [0, why])[0] += 1
                    if bar is not None:
                        u = line_usage(total)
                        bar.update(task_id, advance=1, info=f"calls {u['calls']}  tokens {u['total_tokens']}")
            except KeyboardInterrupt:
                stop.set()
                report.interrupted = True
                stop_calls()  # the calls in flight are cut (their episodes are judged on the next pass), not waited for
            if stop.is_set():
                report.interrupted = True
            report.workers = len(threads)
        report.usage = line_usage(total)
    finally:
        allow_calls()
        report.wall_s = round(time.monotonic() - t_start, 4)
        for js in sets:
            with contextlib.suppress(Exception):
                if js.appended or js.created:  # a pass that judged nothing leaves an existing set as it was
                    passes = list(js.manifest.get("passes") or [])
                    passes.append({"started_at": started, "ended_at": now_iso(), "judged": js.appended,
                                   "already_judged": report.already_judged, "usage": report.usage,
                                   "wall_s": report.wall_s, "concurrency": concurrency, "model": model_json,
                                   "interrupted": report.interrupted,
                                   # what structured output each endpoint and model used in this pass
                                   "structured_output": structured_report(since=modes_before)})
                    js.write_manifest({**js.manifest, "passes": passes[-50:]})
            js.close()
    return report
