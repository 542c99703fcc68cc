"""What the live page shows, read from the run folder as the runner writes it.

:class:`RunState` reads ``RUN/episodes/*``: each episode's ``started.json`` (which device, the
cap), its recorded steps (``trajectory.jsonl``), the step being decided (``pending.json``), the
judges' step evidence (``evidence.jsonl``) and, once it ended, ``episode.json``. An episode's view
is rebuilt only when one of its files changed (size and modification time), so a page polling a
run of many episodes costs a ``stat`` per file. Everything it returns is data (strings, numbers);
the page puts it in the document as text, never as markup.

An episode whose ``started.json`` names a process on this host that is gone, and that has no
``episode.json``, is ``stopped``: the runner was interrupted and ``--resume`` redoes it (its folder
is then removed and written anew, which the page follows).
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

from harness.live.records import EVIDENCE_FILE, PENDING_FILE, STARTED_FILE, read_evidence, read_pending, read_started
from harness.records import (EPISODES_DIR, SUMMARY_FILE, TRAJECTORY_FILE, RecordError, iter_steps, list_episodes,
                             read_summary)
from harness.report.page_parts import describe_action

TEXT_LIMIT = 4000      # a thought or reason longer than this is cut on the page (the records hold it whole)
EVIDENCE_SHOWN = 200   # the latest findings of an episode


def _cut(text: Any, limit: int = TEXT_LIMIT) -> Any:
    if isinstance(text, str) and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def _alive(info: dict[str, Any]) -> bool:
    """Whether the process that started the episode still runs (True when it cannot be told)."""
    pid = info.get("pid")
    if not isinstance(pid, int) or info.get("host") != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _stamp(folder: Path) -> tuple[Any, ...]:
    out = []
    for name in (STARTED_FILE, TRAJECTORY_FILE, PENDING_FILE, EVIDENCE_FILE, SUMMARY_FILE):
        try:
            st = os.stat(folder / name)
            out.append((st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def _monitor(m: dict[str, Any] | None) -> dict[str, Any] | None:
    if not m:
        return None
    keep = ("monitor", "halt", "risky", "category", "reason", "error", "score", "latency_s", "operator",
            "allowed_by", "halted_step", "reflected")
    return {k: _cut(m[k]) for k in keep if k in m}


def _step(s: Any) -> dict[str, Any]:
    return {"index": s.index, "action": s.action, "action_text": describe_action(s.action) if s.action else None,
            "executed": s.ran, "invalid": _cut(s.invalid), "thought": _cut(s.thought),
            "screen_before": s.screen_before, "screen_after": s.screen_after, "monitor": _monitor(s.monitor),
            "operator_s": s.timings.get("operator"),
            "feedback": _cut((s.reflection or {}).get("feedback") or (s.reflection or {}).get("error"))}


def read_episode(run_dir: Path, task_id: str) -> dict[str, Any]:
    """One episode's view: what started it, its steps, the step being decided, evidence, the end."""
    folder = run_dir / EPISODES_DIR / task_id
    warnings: list[str] = []
    started = read_started(folder) or {}
    steps: list[dict[str, Any]] = []
    try:
        stream = iter_steps(folder)
        steps = [_step(s) for s in stream]
        warnings.extend(getattr(stream, "warnings", []) or [])
    except (OSError, RecordError) as e:
        warnings.append(str(e))
    pending = read_pending(folder)
    if pending is not None:
        pending = {**pending, "thought": _cut(pending.get("thought")),
                   "monitors": [_monitor(m) for m in pending.get("monitors") or [] if isinstance(m, dict)]}
        if pending.get("step") is not None and any(s["index"] == pending.get("step") for s in steps):
            pending = None  # recorded meanwhile (the file goes right after the step line is written)
    evidence = read_evidence(folder, warnings)
    result = None
    try:
        summary = read_summary(folder)
    except (OSError, RecordError) as e:
        summary, result = None, {"error": str(e)}
    if summary is not None:
        extra = summary.model_extra or {}
        result = {"status": summary.status, "verdicts": summary.verdicts, "steps": summary.steps,
                  "proposed_steps": summary.proposed_steps, "cap": summary.cap, "error": _cut(summary.error),
                  "halt": summary.halt.model_dump() if summary.halt else None,
                  "operator": extra.get("operator"), "monitor_checks": extra.get("monitor_checks"),
                  "ended_at": summary.ended_at,
                  # why each judge_error is one (its judge's words): shown beside it, not a bare "judge_error"
                  "judge_errors": {k: _cut(str(((summary.judge_details or {}).get(k) or {}).get("error")
                                               or "no reason recorded"), 1000)
                                   for k, v in summary.verdicts.items() if v == "judge_error"}}
    if summary is not None:
        state = summary.status
    elif pending is not None:
        state = pending.get("state") or "running"
    elif started:
        state = "running"
    else:
        state = "waiting"
    if summary is None and started and not _alive(started):
        state = "stopped"
    cap = (summary.cap if summary is not None else None) or started.get("cap")
    return {"task_id": task_id, "device": (summary.device if summary is not None else None) or started.get("device"),
            "cap": cap, "instruction": _cut(started.get("instruction")), "started_at": started.get("started_at"),
            "state": state, "steps": steps, "executed": sum(1 for s in steps if s["executed"]),
            "pending": pending, "evidence": [{k: _cut(v, 1000) for k, v in e.items()} for e in evidence[-EVIDENCE_SHOWN:]],
            "result": result, "warnings": warnings[:20]}


class RunState:
    """The live state of one run folder, cached per episode (see the module's docstring)."""

    def __init__(self, run_dir: str | os.PathLike[str]):
        self.run_dir = Path(run_dir)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}

    def episode(self, task_id: str) -> dict[str, Any]:
        """One episode's view (of a folder ``list_episodes`` names), from the cache when unchanged."""
        folder = self.run_dir / EPISODES_DIR / task_id
        stamp = _stamp(folder)
        with self._lock:
            hit = self._cache.get(task_id)
        if hit is not None and hit[0][0] == stamp and hit[1]["result"] is not None:
            return hit[1]  # ended: nothing more changes
        key = (stamp, _alive(read_started(folder) or {}))
        if hit is not None and hit[0] == key:
            return hit[1]
        view = read_episode(self.run_dir, task_id)
        with self._lock:
            self._cache[task_id] = (key, view)
        return view

    def snapshot(self) -> dict[str, Any]:
        """Every device's latest episode and the list of all episodes."""
        episodes = [self.episode(t) for t in list_episodes(self.run_dir)]
        with self._lock:
            for gone in set(self._cache) - {e["task_id"] for e in episodes}:
                del self._cache[gone]
        devices: dict[str, dict[str, Any]] = {}
        for e in episodes:
            dev = e.get("device") or "?"
            cur = devices.get(dev)
            if cur is None or (e.get("started_at") or "") >= (cur.get("started_at") or ""):
                devices[dev] = e
        done = {dev: sum(1 for e in episodes if e.get("device") == dev and e["result"] is not None) for dev in devices}
        return {"run": self.run_dir.name,
                "devices": [{"device": dev, "episodes_done": done[dev], "episode": devices[dev]}
                            for dev in sorted(devices)],
                "episodes": [{"task_id": e["task_id"], "device": e.get("device"), "state": e["state"],
                              "verdicts": (e["result"] or {}).get("verdicts")} for e in episodes]}

