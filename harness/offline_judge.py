"""``harness judge``: judge recorded episodes after the fact, with any registered judge.

The judges are the same :class:`~harness.episode.StepObserver` objects the live runner feeds; here
the step stream comes from disk instead of a phone. For every complete episode of every run folder
given (``results.jsonl`` has its line), a set of judges (built from the registry; see
``fresh_judges`` below) gets ``start`` with the episode's task, one ``on_step`` per recorded step
(screens read from disk one step at a time, with the checks of
:func:`harness.records.resolve_screen`) and ``finish``; the verdicts go to

    RUN/judgements/<judge-set-id>/results.jsonl    one line per episode, appended crash-safely
    RUN/judgements/<judge-set-id>/manifest.json    judge specs, command, passes with their cost

The original ``RUN/results.jsonl`` is never rewritten. A pass is resumable: episodes that already
have a line are skipped (``--retry-errors`` judges again those with a ``judge_error``). Two
processes cannot write one judgement set (a lock is held).

Failure behaviour: a judge that raises, or whose model fails after the client's retries, gives
``judge_error`` with the reason for that episode; the pass goes on. Episodes that ended in
``infra_error`` are not judged (the live runner does not judge them either) and are counted.

Concurrency: ``concurrency`` K is the most model calls in flight at once. It is enforced by the
model client's per-endpoint semaphore (the judges' ``ModelConfig.concurrency`` is set to K); several
episodes are judged at once (``episodes_in_flight``, 2K by default) so that judges that call the
model one step after another still keep K calls busy. Each worker thread keeps its judge objects and
``start``s them again for its next episode (``fresh_judges`` builds new ones every episode instead).

Cost accounting: each episode's judges get a :class:`harness.usage.Meter` of its own in their
:class:`~harness.episode.EpisodeContext` (reporting into the pass's meter), and pass it to every
model call they make, as they do in a live run: every call (calls, failures, prompt and completion
tokens, model seconds) counts for its episode and for the pass, whichever thread makes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import json
import math
import os
import queue
import re
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from harness.actions import ActionError, Finish, parse_action
from harness.episode import EpisodeContext, EpisodeEnd, StepEvent
from harness.runner import finish_all
from harness.records import (EPISODES_DIR, RESULTS_FILE, TRAJECTORY_FILE, EpisodeResult, RecordError,
                             atomic_write_bytes, atomic_write_json, build_environment_info, check_relative_path, dumps,
                             episode_dir, iter_steps, now_iso, read_manifest, read_results, redact, resolve_screen,
                             to_jsonable)
from harness.run_tasks import load_run_tasks
from harness.tasks import Task
from harness.usage import Meter
from harness.verdicts import JUDGEMENTS_DIR

try:
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

_SET_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+@=-]{0,127}")
# ModelConfig / judge-spec keys that do not change what a judge answers: they may differ between
# the passes of one judgement set (another port, more concurrency, a cache file elsewhere)
_NEUTRAL_KEYS = frozenset({"base_url", "api_key_env", "timeout_s", "max_retries", "backoff_s", "max_backoff_s", "max_wait_s",
                           "concurrency", "cache", "cache_path", "cache_file", "evidence_cache", "cache_dir"})


class OfflineJudgeError(Exception):
    """A problem with the command's inputs, as one line (printed without a traceback)."""


# --------------------------------------------------------------------------- usage


def line_usage(meter: Meter) -> dict[str, Any]:
    """A judgement line's (and a pass's) ``usage``: successful calls, failed calls, tokens and model
    seconds, from the meter every judge call of the episode (or the pass) reported to."""
    u = meter.to_json()
    return {"calls": u["calls"] - u["failed"], "failed_calls": u["failed"], "prompt_tokens": u["prompt_tokens"],
            "completion_tokens": u["completion_tokens"], "total_tokens": u["total_tokens"],
            "model_s": round(sum(r["model_s"] for r in u["by_role"].values()), 4)}


# --------------------------------------------------------------------------- inputs


def minimal_task(result: EpisodeResult) -> Task | None:
    """A Task from what an imported episode's result line carries (instruction, language, app)."""
    extra = result.model_extra or {}
    instruction = extra.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        return None
    language = extra.get("language") if extra.get("language") in ("en", "zh") else "en"
    app = extra.get("app")
    apps = [a for a in (app.split("+") if isinstance(app, str) else app or []) if a]
    return Task(id=result.task_id, instruction=instruction, language=language, apps=apps,
                reference_steps=max(1, (result.cap - 1) // 2))


def png_size(data: bytes) -> tuple[int, int] | None:
    if len(data) >= 24 and data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    try:
        import io

        from PIL import Image
        with Image.open(io.BytesIO(data)) as im:
            return im.size
    except Exception:
        return None


@dataclass
class Target:
    """A run folder and, optionally, the only episodes of it to judge."""

    run_dir: Path
    only: set[str] | None = None


def check_writable(run_dir: Path) -> None:
    """Refuse, in one line, a run whose ``judgements/`` folder cannot be written (a read-only copy,
    a mount without write access): verdicts are only ever written there."""
    d = run_dir / JUDGEMENTS_DIR
    where = d if d.is_dir() else run_dir
    if not os.access(where, os.W_OK | os.X_OK):
        raise OfflineJudgeError(f"{where}: cannot write here (read-only); harness judge writes its verdicts to "
                                f"{d}, so copy the run to a writable folder and judge the copy")


def resolve_targets(paths: Iterable[str | Path], warnings: list[str] | None = None) -> list[Target]:
    """Run folders (``RUN`` holding results.jsonl) or episode folders (``RUN/episodes/<id>``); a run
    folder given twice (or through a symlink) is judged once, with a warning."""
    targets: dict[Path, Target] = {}
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise OfflineJudgeError(f"{p}: no such folder")
        if (p / RESULTS_FILE).is_file():
            if p.resolve() in targets and targets[p.resolve()].only is None and warnings is not None:
                warnings.append(f"{p}: the same run folder as {targets[p.resolve()].run_dir} (given twice); "
                                "it is judged once")
            t = targets.setdefault(p.resolve(), Target(p))
            t.only = None
            continue
        in_run = p.parent.name == EPISODES_DIR and (p.parent.parent / RESULTS_FILE).is_file()
        if (p / TRAJECTORY_FILE).is_file() and in_run:
            run = p.parent.parent
            t = targets.setdefault(run.resolve(), Target(run, set()))
            if t.only is not None:
                t.only.add(p.name)
            continue
        hint = ""
        if (p / "trajectory.json").is_file() or any(p.glob("*/trajectory.json")):
            hint = "; it looks like MobileRisk data: run `harness import mobilerisk DIR --out RUN` first"
        elif any(p.glob("*.pkl*")) or any(p.glob("*/log.json")) or any(p.glob("*/actions.json")):
            hint = "; import it first with `harness import trajectories DIR --format androidworld|spa-bench --out RUN`"
        raise OfflineJudgeError(f"{p}: not a run folder (no results.jsonl) nor an episode folder of one{hint}")
    return list(targets.values())


# --------------------------------------------------------------------------- judgement sets


def _neutral(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _neutral(v) for k, v in sorted(obj.items()) if k not in _NEUTRAL_KEYS}
    if isinstance(obj, list):
        return [_neutral(v) for v in obj]
    return obj


def spec_key(specs: list[dict[str, Any]]) -> str:
    """A hash of what shapes the judges' answers (endpoint, timeouts, concurrency and cache left out)."""
    text = json.dumps(_neutral(to_jsonable(specs)), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def default_set_id(names: list[str], model_name: str | None, run_dirs: Iterable[Path] = (),
                   key: str | None = None) -> str:
    """The judgement set's name when ``--judge-set`` is not given: the judge model's name (its last
    path component: ``Qwen/Qwen2.5-VL-72B-Instruct`` -> ``Qwen2.5-VL-72B-Instruct``), or the judges'
    names when they use no model. Report and viewer columns read ``crate@<set>``, so the name stays
    short. When a run already has a set of that name made with other judge settings (spec ``key``),
    the next free ``NAME-2``, ``NAME-3``... is taken; one made with the same settings is reused, so
    running the same command again resumes it."""
    base = model_name.rstrip("/").rsplit("/", 1)[-1] if model_name else "+".join(names)
    base = (re.sub(r"[^A-Za-z0-9_.+@=-]+", "_", base).strip("._-+@=") or "judges")[:120]
    for n in range(1, 1000):
        cand = base if n == 1 else f"{base}-{n}"
        if all(_set_key(Path(r), cand) in (None, key) for r in run_dirs):
            return cand
    raise OfflineJudgeError(f"no free judgement set name {base}-N; pass --judge-set NAME")


def _set_key(run_dir: Path, set_id: str) -> str | None:
    """The spec key of ``RUN/judgements/<set_id>`` (None if there is no such set; ``"?"`` if its
    manifest cannot be read, so the name is not taken over)."""
    d = run_dir / JUDGEMENTS_DIR / set_id
    if not d.exists():
        return None
    try:
        data = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "?"
    return data.get("spec_key") if isinstance(data, dict) and isinstance(data.get("spec_key"), str) else "?"


def check_set_id(set_id: str) -> str:
    if not _SET_ID_RE.fullmatch(set_id) or set_id in (".", ".."):
        raise OfflineJudgeError(f"--judge-set {set_id!r}: use 1-128 characters from A-Z a-z 0-9 _ . + @ = -")
    return set_id


class JudgementSet:
    """``RUN/judgements/<id>/``: its results file (appends of whole lines), manifest and lock."""

    def __init__(self, run_dir: Path, set_id: str, key: str, *, retry_errors: bool = False, fsync: bool = True):
        self.run_dir = run_dir
        self.dir = run_dir / JUDGEMENTS_DIR / set_id
        self.results = self.dir / "results.jsonl"
        self.manifest_path = self.dir / "manifest.json"
        self.fsync = fsync
        self.warnings: list[str] = []
        self._lock = threading.Lock()
        self._closed = False
        self._lock_fd: int | None = None
        self.dir.mkdir(parents=True, exist_ok=True)
        self._acquire()
        try:
            self.manifest: dict[str, Any] = {}
            if self.manifest_path.is_file():
                try:
                    self.manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
                except (OSError, ValueError) as e:
                    raise OfflineJudgeError(f"{self.manifest_path}: unreadable ({e})") from None
                old = self.manifest.get("spec_key")
                if old and old != key:
                    raise OfflineJudgeError(
                        f"{self.dir}: this judgement set was made with other judge settings (spec {old}, now {key}); "
                        "pass --judge-set NEW_NAME to keep both, or remove the folder to start over")
            self.done: dict[str, dict[str, Any]] = self._read()
            if retry_errors:
                keep = {k: v for k, v in self.done.items()
                        if not any(x == "judge_error" for x in (v.get("verdicts") or {}).values())}
                if len(keep) != len(self.done):
                    body = b"".join((dumps(v) + "\n").encode("utf-8") for v in keep.values())
                    atomic_write_bytes(self.results, body, fsync=fsync)
                    self.retried = len(self.done) - len(keep)
                    self.done = keep
            self.retried = getattr(self, "retried", 0)
        except BaseException:
            self.close()
            raise

    def _acquire(self) -> None:
        if fcntl is None:  # pragma: no cover
            return
        fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OfflineJudgeError(f"{self.dir}: another `harness judge` is writing this judgement set; "
                                    "wait for it or pass --judge-set NEW_NAME") from None
        self._lock_fd = fd

    def _read(self) -> dict[str, dict[str, Any]]:
        """Lines by task id; a torn last line (interrupted append) is dropped or completed."""
        out: dict[str, dict[str, Any]] = {}
        if not self.results.exists():
            return out
        data = self.results.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            try:
                obj = json.loads(tail.decode("utf-8"))
                ok = isinstance(obj, dict) and isinstance(obj.get("task_id"), str)
            except (UnicodeDecodeError, ValueError):
                ok = False
            with open(self.results, "r+b") as f:
                if ok:
                    f.seek(len(data))
                    f.write(b"\n")
                    data += b"\n"
                    self.warnings.append(f"{self.results}: last line had no newline; it is complete, newline added")
                else:
                    f.truncate(cut)
                    data = data[:cut]
                    self.warnings.append(f"{self.results}: removed a partial last line ({len(tail)} bytes) "
                                         "left by an interrupted pass")
        for lineno, line in enumerate(data.split(b"\n")[:-1], 1):
            try:
                obj = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise OfflineJudgeError(f"{self.results}:{lineno}: not a valid JSON line; fix or remove it") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("task_id"), str) \
                    or not isinstance(obj.get("verdicts"), dict):
                raise OfflineJudgeError(f"{self.results}:{lineno}: expected an object with task_id and verdicts")
            if obj["task_id"] in out:
                raise OfflineJudgeError(f"{self.results}:{lineno}: second line for task {obj['task_id']!r}")
            out[obj["task_id"]] = obj
        return out

    def append(self, line: dict[str, Any]) -> bool:
        """Append one complete line (one write, O_APPEND, fsync); False if the set is closed or the
        task already has a line."""
        try:
            body = (dumps(line) + "\n").encode("utf-8")
        except RecordError:
            body = (json.dumps(json.loads(json.dumps(line, default=str)), ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            if self._closed or line["task_id"] in self.done:
                return False
            fd = os.open(self.results, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                view = memoryview(body)
                while view:
                    view = view[os.write(fd, view):]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self.done[line["task_id"]] = line
            return True

    def write_manifest(self, data: dict[str, Any]) -> None:
        self.manifest = redact(to_jsonable(data))
        atomic_write_json(self.manifest_path, self.manifest, fsync=self.fsync)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


# --------------------------------------------------------------------------- judging one episode


@dataclass
class Job:
    seq: int
    run_dir: Path
    result: EpisodeResult
    task: Task | None
    task_problem: str | None
    out: JudgementSet


Verdicts = dict[str, tuple[Any, dict[str, Any]]]


def _valid_verdict(v: Any) -> bool:
    return v is True or v is False or (isinstance(v, str) and v == "judge_error")


def _jsonable(obj: Any) -> Any:
    try:
        return to_jsonable(obj)
    except RecordError:
        return json.loads(json.dumps(obj, default=str, ensure_ascii=False))


def _close(judge: Any) -> None:
    close = getattr(judge, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):
            close()


class JudgeSlot:
    """The judge objects one worker thread uses, episode after episode.

    A judge's ``start(ctx)`` begins a new episode (the StepObserver contract), so a worker keeps its
    judges and starts them again for its next episode, unless ``fresh`` asks for new objects every
    episode. A judge that raised is always replaced. Reuse matters offline: building a judge builds
    its model client, and a new HTTPS-capable client loads the CA bundle (~0.1 s of CPU), which for
    thousands of episodes would cost minutes of GIL time that a live run hides behind the phone."""

    def __init__(self, build: Callable[[str], Any], fresh: bool = False):
        self.build = build
        self.fresh = fresh
        self.judges: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        j = self.judges.get(name)
        if j is None:
            j = self.judges[name] = self.build(name)
        return j

    def episode_done(self, broken: Iterable[str]) -> None:
        for n in list(self.judges) if self.fresh else list(broken):
            j = self.judges.pop(n, None)
            if j is not None:
                _close(j)

    def close(self) -> None:
        self.episode_done(list(self.judges))
        self.judges.clear()


def judge_episode(job: Job, names: list[str], slot: JudgeSlot, meter: Meter) -> dict[str, Any]:
    """Feed one recorded episode to the slot's judges (started afresh); return its judgement line.
    The judges' calls report to ``meter`` (the episode's context carries it to them)."""
    t0 = time.monotonic()
    verdicts: Verdicts = {}
    judges: list[tuple[str, Any]] = []
    failed: dict[str, str] = {}
    broken: set[str] = set()
    for n in names:
        try:
            judges.append((n, slot.get(n)))
        except Exception as e:  # an option that only fails at build time, a missing endpoint...
            failed[n] = f"could not build the judge: {type(e).__name__}: {e}"
    steps_fed = 0
    try:
        ep_dir = episode_dir(job.run_dir, job.result.task_id)  # refuses a folder that leads out of RUN/episodes
        if job.task is None:
            raise _EpisodeProblem(job.task_problem or "the episode's task is unknown")
        screens = _ScreenReader(ep_dir)
        first_bytes = screens.load("screens/000.png") if (ep_dir / "screens" / "000.png").is_file() else None
        size = png_size(first_bytes) if first_bytes else None
        extra = job.result.model_extra or {}
        if size is None and isinstance(extra.get("screen_size"), list) and len(extra["screen_size"]) == 2:
            size = tuple(extra["screen_size"])  # type: ignore[assignment]
        seed = job.result.seed if isinstance(job.result.seed, int) else 0
        ctx = EpisodeContext(task=job.task, screen_size=size or (0, 0), seed=seed,
                             device_serial=job.result.device or "offline", query_state=lambda: None,
                             cap=job.result.cap, episode_dir=str(ep_dir), live=False, meter=meter)
        for n, j in judges:
            try:
                j.start(ctx)
            except Exception as e:
                failed[n] = f"start failed: {type(e).__name__}: {e}"
        final: bytes | None = first_bytes
        last_action = None
        ran: set[int] = set()
        for step in iter_steps(ep_dir):  # one step (and at most two screens) in memory at a time
            before = screens.load(step.screen_before)
            after = screens.load(step.screen_after)
            action, invalid = None, step.invalid
            if step.action is not None:
                try:
                    action = parse_action(step.action)
                except ActionError as e:
                    invalid = invalid or f"recorded action is not a valid action: {e}"
            event = StepEvent(index=step.index, action=action, raw_output=step.raw_output, invalid=invalid,
                              screenshot_before=before or b"", screenshot_after=after,
                              screen_before_path=step.screen_before, screen_after_path=step.screen_after,
                              thought=step.thought, monitor=step.monitor, executed=step.ran and action is not None)
            for n, j in judges:
                if n in failed:
                    continue
                try:
                    j.on_step(event)
                except Exception as e:
                    failed[n] = f"on_step failed at step {step.index}: {type(e).__name__}: {e}"
            final = after if after is not None else before
            if event.executed:
                ran.add(step.index)
                last_action = action
            steps_fed += 1
        end = EpisodeEnd(status=job.result.status, steps=steps_fed, final_screenshot=final,
                         answer=extra.get("answer") if isinstance(extra.get("answer"), str) else None,
                         agent_finished=isinstance(last_action, Finish), executed=frozenset(ran))
        live = [(n, j) for n, j in judges if n not in failed]
        for (n, _), (_, out) in zip(live, finish_all([j for _, j in live], end)):
            if isinstance(out, Exception):  # a judge failure is a judge_error verdict, never a crash
                failed[n] = f"{type(out).__name__}: {out}"
                continue
            if not isinstance(out, dict):
                failed[n] = f"finish returned {type(out).__name__}, not {{name: (verdict, details)}}"
                continue
            for vname, pair in out.items():
                try:
                    verdict, details = pair
                except (TypeError, ValueError):
                    verdict, details = "judge_error", {"error": f"not a (verdict, details) pair: {pair!r:.80}"}
                if not _valid_verdict(verdict):
                    details = {"error": f"the judge answered {verdict!r:.60}, not true, false or judge_error",
                               "details": details}
                    verdict = "judge_error"
                verdicts[str(vname)] = (verdict, details if isinstance(details, dict) else {"details": details})
    except (_EpisodeProblem, RecordError, OSError) as e:
        reason = str(e) if isinstance(e, _EpisodeProblem) else f"cannot read the episode: {e}"
        broken.update(failed)  # judges that had already raised; the others did nothing wrong
        for n in names:
            if n not in failed:
                failed[n] = reason
        judges = [(n, j) for n, j in judges if n in broken]
    finally:
        broken.update(n for n, _ in judges if n in failed)
        slot.episode_done(broken)
    for n, reason in failed.items():
        if n not in verdicts:
            verdicts[n] = ("judge_error", {"error": reason})
    return {"task_id": job.result.task_id,
            "verdicts": {k: v for k, (v, _) in verdicts.items()},
            "details": _jsonable({k: d for k, (_, d) in verdicts.items()}),
            "usage": line_usage(meter), "steps": steps_fed, "status": job.result.status,
            "judged_at": now_iso(), "duration_s": round(time.monotonic() - t0, 4)}


class _EpisodeProblem(Exception):
    pass


class _ScreenReader:
    """Reads a step's screens from disk when asked, never outside the episode folder; the screen
    after step i is usually the one before step i+1, and is read once.

    A path is checked as :func:`harness.records.resolve_screen` checks it (relative, no ``..``, no
    symlink leading out): the string rules first, then, if no component below the episode folder
    is a symlink, the path cannot leave it (two ``lstat`` calls instead of resolving both paths
    from the root for every screen); any symlink goes through ``resolve_screen`` itself."""

    def __init__(self, ep_dir: Path):
        self.ep_dir = ep_dir
        self.last: tuple[str | None, bytes | None] = (None, None)

    def path(self, rel: str) -> Path:
        try:
            check_relative_path(rel)
        except ValueError as e:
            raise RecordError(str(e), path=self.ep_dir) from None
        cur = self.ep_dir
        for part in re.split(r"[\\/]", rel):
            if part in ("", "."):
                continue
            cur = cur / part
            if cur.is_symlink():
                return resolve_screen(self.ep_dir, rel)
        return self.ep_dir / rel

    def load(self, rel: str | None) -> bytes | None:
        if rel is None:
            return None
        if rel == self.last[0]:
            return self.last[1]
        data = self.path(rel).read_bytes()
        self.last = (rel, data)
        return data


# --------------------------------------------------------------------------- a pass over many runs


@dataclass
class OfflineReport:
    set_id: str
    runs: list[str]
    total: int = 0
    judged: int = 0
    already_judged: int = 0
    retried: int = 0
    not_judged: dict[str, int] = field(default_factory=dict)
    verdicts: dict[str, dict[str, int]] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    attributed_calls: int = 0
    wall_s: float = 0.0
    interrupted: bool = False
    outputs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
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
    from harness.registry import JUDGES, RegistryError
    from harness.run_command import RunError, _opts_for, with_model

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
        o = _opts_for(JUDGES, n, dict(judge_opts or {}))
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
    unknown = set(judge_opts or {}) - {k for n in names for k in _opts_for(JUDGES, n, dict(judge_opts or {}))}
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


def judge_runs(paths: Iterable[str | Path], setup: JudgeSetup, *, concurrency: int = 8,
               set_id: str | None = None, suite: str | Path | None = None, retry_errors: bool = False,
               episodes_in_flight: int | None = None, fresh_judges: bool = False, progress: bool = False,
               progress_file: Any = None,
               argv: list[str] | None = None, fsync: bool = True,
               stop: threading.Event | None = None) -> OfflineReport:
    """Judge every complete episode of the given runs (or episode folders) with ``setup``'s judges."""
    if concurrency < 1:
        raise OfflineJudgeError("--concurrency must be >= 1")
    target_warnings: list[str] = []
    targets = resolve_targets(paths, target_warnings)
    model_name = getattr(setup.model, "model", None)
    key = spec_key(setup.specs)
    set_id = check_set_id(set_id or default_set_id(setup.names, model_name, [t.run_dir for t in targets], key))
    in_flight = episodes_in_flight or max(2 * concurrency, 4)
    report = OfflineReport(set_id=set_id, runs=[str(t.run_dir) for t in targets], concurrency=concurrency,
                           episodes_in_flight=in_flight, warnings=target_warnings)
    started = now_iso()
    t_start = time.monotonic()
    sets: list[JudgementSet] = []
    jobs: list[Job] = []
    try:
        for t in targets:
            try:
                results = read_results(t.run_dir)
                manifest = read_manifest(t.run_dir) if (t.run_dir / "manifest.json").is_file() else {}
            except RecordError as e:
                raise OfflineJudgeError(str(e)) from None
            report.warnings.extend(results.warnings)
            tasks = load_run_tasks(t.run_dir, manifest, suite, report.warnings)
            js = JudgementSet(t.run_dir, set_id, key, retry_errors=retry_errors, fsync=fsync)
            sets.append(js)
            report.warnings.extend(js.warnings)
            report.retried += js.retried
            report.outputs.append(str(js.results))
            js.write_manifest({
                **js.manifest, "kind": "crate-harness judgements", "judge_set": set_id, "judges": setup.names,
                "specs": setup.specs, "spec_key": key,
                "model": setup.model.to_json() if hasattr(setup.model, "to_json") else None,
                "run": str(t.run_dir), "environment": build_environment_info(),
                "command": argv if argv is not None else sys.argv,
                "created_at": js.manifest.get("created_at") or started})
            selected = [r for r in results if t.only is None or r.task_id in t.only]
            if t.only:
                missing = sorted(t.only - {r.task_id for r in results})
                for m in missing:
                    report.not_judged["no result line (episode not finished)"] = \
                        report.not_judged.get("no result line (episode not finished)", 0) + 1
                    report.warnings.append(f"{t.run_dir}: episode {m} has no result line; not judged")
            for r in selected:
                report.total += 1
                if r.task_id in js.done:
                    report.already_judged += 1
                    continue
                if r.status == "infra_error":
                    report.not_judged["infra_error"] = report.not_judged.get("infra_error", 0) + 1
                    continue
                task = tasks.get(r.task_id)
                problem = None
                if task is None:
                    try:
                        task = minimal_task(r)
                    except Exception as e:
                        problem = f"cannot rebuild the task: {e}"
                    if task is None and problem is None:
                        problem = (f"task {r.task_id!r} is not in the run's suite files and its result line has no "
                                   "instruction; pass --suite with the task file")
                jobs.append(Job(len(jobs), t.run_dir, r, task, problem, js))
        total = Meter()
        todo: queue.Queue[Job] = queue.Queue()
        for j in jobs:
            todo.put(j)
        done_q: queue.Queue[tuple[Job, dict[str, Any] | BaseException]] = queue.Queue()
        stop = stop or threading.Event()

        warming = [0]
        warm_lock = threading.Lock()

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
                        line = judge_episode(job, setup.names, slot, Meter(parent=total))
                        if not stop.is_set():
                            job.out.append(line)
                        done_q.put((job, line))
                    except BaseException as e:  # pragma: no cover - judge_episode catches what judges raise
                        done_q.put((job, e))
            finally:
                slot.close()

        with _progress(len(jobs), progress, progress_file) as bar:
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
                    if isinstance(out, BaseException):
                        report.warnings.append(f"{job.run_dir}: {job.result.task_id}: {type(out).__name__}: {out}")
                        continue
                    report.judged += 1
                    report.attributed_calls += out["usage"]["calls"]
                    for name, v in out["verdicts"].items():
                        c = report.verdicts.setdefault(name, {"true": 0, "false": 0, "judge_error": 0})
                        c["true" if v is True else "false" if v is False else "judge_error"] += 1
                    if bar is not None:
                        u = line_usage(total)
                        bar.update(task_id, advance=1, info=f"calls {u['calls']}  tokens {u['total_tokens']}")
            except KeyboardInterrupt:
                stop.set()
                report.interrupted = True
            if stop.is_set():
                report.interrupted = True
            report.workers = len(threads)
        report.usage = line_usage(total)
    finally:
        report.wall_s = round(time.monotonic() - t_start, 4)
        for js in sets:
            with contextlib.suppress(Exception):
                passes = list(js.manifest.get("passes") or [])
                passes.append({"started_at": started, "ended_at": now_iso(), "judged": report.judged,
                               "already_judged": report.already_judged, "usage": report.usage,
                               "wall_s": report.wall_s, "concurrency": concurrency,
                               "interrupted": report.interrupted})
                js.write_manifest({**js.manifest, "passes": passes[-50:]})
            js.close()
    return report


# --------------------------------------------------------------------------- the summary


def print_summary(report: OfflineReport, file: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=140)
    console.print(f"judgement set [bold]{report.set_id}[/bold]: {report.judged} episode(s) judged in this pass")
    table = Table()
    for col in ("judge", "true", "false", "judge_error"):
        table.add_column(col, justify="left" if col == "judge" else "right")
    for name in sorted(report.verdicts):
        c = report.verdicts[name]
        table.add_row(name, str(c["true"]), str(c["false"]), str(c["judge_error"]))
    if report.verdicts:
        console.print(table)
    u = report.usage or {}
    calls = u.get("calls", 0)
    rate = f", {calls / report.wall_s:.1f} calls/s" if report.wall_s > 0 and calls else ""
    console.print(f"episodes: {report.total} selected, {report.judged} judged, {report.already_judged} already judged "
                  f"(skipped){', ' + str(report.retried) + ' with judge_error judged again' if report.retried else ''}"
                  + "".join(f", {n} not judged ({why})" for why, n in report.not_judged.items()))
    console.print(f"cost: {calls} model call(s) ({u.get('failed_calls', 0)} failed), "
                  f"{u.get('prompt_tokens', 0)} prompt + {u.get('completion_tokens', 0)} completion tokens, "
                  f"wall time {report.wall_s:.1f}s{rate}, concurrency {report.concurrency}")
    for w in report.warnings[:10]:
        console.print(f"[yellow]warning: {w}[/yellow]")
    if len(report.warnings) > 10:
        console.print(f"[yellow]... and {len(report.warnings) - 10} more warning(s)[/yellow]")
    if report.interrupted:
        console.print("[yellow]interrupted: run the same command again to judge the rest[/yellow]")
    for o in report.outputs:
        console.print(f"verdicts: {o}")


# --------------------------------------------------------------------------- command line


def add_judge_arguments(p: Any) -> None:
    """Flags of ``harness judge`` (the endpoint flags also answer to their ``--judge-*`` names)."""
    p.add_argument("paths", nargs="+", metavar="RUN_OR_EPISODE", help="run folders, or episode folders RUN/episodes/ID")
    p.add_argument("--judge", action="append", required=True, metavar="NAMES",
                   help="judges, comma-separated or repeated (e.g. crate,crate-s,holistic,milestones)")
    p.add_argument("--judge-opt", action="append", metavar="KEY=VALUE", help="judge option (repeatable)")
    p.add_argument("--concurrency", type=int, default=8, metavar="K",
                   help="most model calls in flight at once (default 8)")
    p.add_argument("--episodes-in-flight", type=int, default=None, metavar="N",
                   help="episodes judged at once (default 2 x concurrency)")
    p.add_argument("--fresh-judges", action="store_true",
                   help="build new judge objects for every episode (default: each worker starts its judges again)")
    p.add_argument("--judge-set", default=None, metavar="NAME",
                   help="name of the judgement set (default: the judge model's name, MODEL-2... when a set of "
                   "that name holds other judge settings); "
                   "verdicts go to RUN/judgements/NAME/results.jsonl")
    p.add_argument("--suite", default=None, metavar="PATH",
                   help="task file or folder to take tasks from (default: the run's own)")
    p.add_argument("--cache", default=None, metavar="PATH", help="step-evidence cache file for judges that have one "
                   "(default RUN/judgements/evidence-cache.jsonl of the first run)")
    p.add_argument("--no-cache", action="store_true", help="do not give judges a step-evidence cache file")
    p.add_argument("--retry-errors", action="store_true", help="judge again episodes whose line has a judge_error")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    g = p.add_argument_group("judge model endpoint (OpenAI-compatible: vLLM, SGLang, OpenAI, DashScope)")
    g.add_argument("--model-base-url", "--judge-base-url", dest="judge_base_url", metavar="URL",
                   help="e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", "--judge-model", dest="judge_model", metavar="NAME",
                   help="model name as the server knows it")
    g.add_argument("--api-key-env", "--judge-api-key-env", dest="judge_api_key_env", default=None,
                   metavar="VAR",
                   help="environment variable holding this endpoint's API key (default: OPENAI_API_KEY only for "
                        "api.openai.com, DASHSCOPE_API_KEY only for DashScope, no key for any other endpoint)")
    g.add_argument("--temperature", "--judge-temperature", dest="judge_temperature", type=float, default=0.0,
                   metavar="T")
    g.add_argument("--max-tokens", "--judge-max-tokens", dest="judge_max_tokens", type=int, default=1024, metavar="N")
    g.add_argument("--timeout", "--judge-timeout", dest="judge_timeout", type=float, default=120.0, metavar="S",
                   help="seconds per model call")
    g.add_argument("--retries", "--judge-retries", dest="judge_retries", type=int, default=4, metavar="N",
                   help="retries of a failed call (429, 5xx, timeouts)")
    g.add_argument("--max-wait", "--judge-max-wait", dest="judge_max_wait", type=float, default=300.0, metavar="S",
                   help="longest Retry-After wait honoured (s); a server asking for more fails the call")


def run_judge_command(args: Any, argv: list[str] | None = None) -> OfflineReport:
    """``harness judge``: build the judges from the flags, judge, print the summary."""
    from harness.registry import RegistryError, parse_options
    from harness.run_command import RunError, model_configs, split_list

    if args.concurrency < 1:
        raise OfflineJudgeError("--concurrency must be >= 1")
    args.judge_concurrency = args.concurrency
    try:
        model = model_configs(args)["judge"]
        opts = parse_options(args.judge_opt, "--judge-opt")
    except (RunError, RegistryError) as e:
        raise OfflineJudgeError(str(e)) from None
    names = split_list(args.judge)
    targets = resolve_targets(args.paths)
    for t in targets:  # before any judge is built or model called: the verdicts must have somewhere to go
        check_writable(t.run_dir)
    cache = None
    if not args.no_cache:
        if args.cache:
            cache = args.cache
        else:
            cache = str(targets[0].run_dir / JUDGEMENTS_DIR / "evidence-cache.jsonl")
    setup = prepare_judges(names, opts, model, args.concurrency, cache=cache)
    report = judge_runs(args.paths, setup, concurrency=args.concurrency, set_id=args.judge_set, suite=args.suite,
                        retry_errors=args.retry_errors, episodes_in_flight=args.episodes_in_flight,
                        fresh_judges=args.fresh_judges,
                        progress=not args.no_progress and not args.json, argv=argv)
    if args.json:
        print(json.dumps(report.to_json(), indent=1, ensure_ascii=False))
    else:
        print_summary(report)
    return report
