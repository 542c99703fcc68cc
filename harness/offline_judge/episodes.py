"""Judging one recorded episode: its steps read from disk one at a time and fed to a worker's
judges (kept from episode to episode), its verdicts and usage as one judgement line."""

from __future__ import annotations

import contextlib
import json
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from harness.core.actions import ActionError, Finish, parse_action
from harness.core.episode import EpisodeContext, EpisodeEnd, StepEvent
from harness.offline_judge.sets import JudgementSet
from harness.offline_judge.targets import PackedEpisode
from harness.records import (RecordError, check_relative_path, episode_dir, iter_steps, now_iso, resolve_screen,
                             to_jsonable)
from harness.run.runner import finish_all
from harness.core.usage import Meter


def line_usage(meter: Meter) -> dict[str, Any]:
    """A judgement line's (and a pass's) ``usage``: successful calls, failed calls, tokens and model
    seconds, from the meter every judge call of the episode (or the pass) reported to; and
    ``structured``, what structured output those calls used (``{mode: calls}``; absent with none)."""
    u = meter.to_json()
    out = {"calls": u["calls"] - u["failed"], "failed_calls": u["failed"], "prompt_tokens": u["prompt_tokens"],
           "completion_tokens": u["completion_tokens"], "total_tokens": u["total_tokens"],
           "model_s": round(sum(r["model_s"] for r in u["by_role"].values()), 4)}
    structured: dict[str, int] = {}  # what structured output the judges' calls used: {mode: calls}
    for row in u["by_role"].values():
        for mode, n in (row.get("structured") or {}).items():
            structured[mode] = structured.get(mode, 0) + n
    if structured:
        out["structured"] = structured
    return out


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
class Job:
    seq: int
    run_dir: Path
    episode: PackedEpisode
    out: JudgementSet

    @property
    def task_id(self) -> str:
        return self.episode.task_id


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


def judge_episode(job: Job, names: list[str], slot: JudgeSlot, meter: Meter, workers: Any = None) -> dict[str, Any]:
    """Feed one recorded episode to the slot's judges (started afresh); return its judgement line.
    The judges' calls report to ``meter`` and go to ``workers`` (the pass's shared threads), both
    carried to them by the episode's context."""
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
    result, task = job.episode.unpack()
    try:
        ep_dir = episode_dir(job.run_dir, result.task_id)  # refuses a folder that leads out of RUN/episodes
        if task is None:
            raise _EpisodeProblem(job.episode.task_problem or "the episode's task is unknown")
        screens = _ScreenReader(ep_dir)
        first_bytes = screens.load("screens/000.png") if (ep_dir / "screens" / "000.png").is_file() else None
        size = png_size(first_bytes) if first_bytes else None
        extra = result.model_extra or {}
        if size is None and isinstance(extra.get("screen_size"), list) and len(extra["screen_size"]) == 2:
            size = tuple(extra["screen_size"])  # type: ignore[assignment]
        seed = result.seed if isinstance(result.seed, int) else 0
        ctx = EpisodeContext(task=task, screen_size=size or (0, 0), seed=seed,
                             device_serial=result.device or "offline", query_state=lambda: None,
                             cap=result.cap, episode_dir=str(ep_dir), live=False, meter=meter, workers=workers)
        for n, j in judges:
            try:
                j.start(ctx)
            except Exception as e:
                failed[n] = f"start failed: {type(e).__name__}: {e}"
        final: bytes | None = first_bytes
        last_action = None
        ran: set[int] = set()
        operator_steps: set[int] = set()  # a person's steps during hand-overs (by: operator)
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
                              thought=step.thought, monitor=step.monitor, executed=step.ran and action is not None,
                              by="operator" if step.by_operator else "agent")
            if step.by_operator:
                operator_steps.add(step.index)
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
        end = EpisodeEnd(status=result.status, steps=steps_fed, final_screenshot=final,
                         answer=extra.get("answer") if isinstance(extra.get("answer"), str) else None,
                         agent_finished=isinstance(last_action, Finish), executed=frozenset(ran),
                         by_operator=frozenset(operator_steps))
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
    return {"task_id": result.task_id,
            "verdicts": {k: v for k, (v, _) in verdicts.items()},
            "details": _jsonable({k: d for k, (_, d) in verdicts.items()}),
            "usage": line_usage(meter), "steps": steps_fed, "status": result.status,
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
