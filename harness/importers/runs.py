"""The imported episode every importer builds (:class:`ImportedEpisode` of :class:`ImportedStep`)
and the run folder written from them (:func:`write_run`): exactly what ``harness run`` writes, plus
``tasks.yaml`` (one minimal task per episode) and ``labels.jsonl`` (the human labels, never in the
tasks, so a judge cannot read them)."""


from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from harness.core.actions import MAX_COORD, ActionError, action_to_json, parse_action
from harness.importers.files import TrajectoryImportError, png_bytes, safe_task_id
from harness.records import RecordError, RunWriter, build_environment_info, file_sha256, now_iso


# --------------------------------------------------------------------------- the common episode model


@dataclass
class ImportedStep:
    action: dict[str, Any] | None
    invalid: str | None = None
    raw_output: str | None = None
    thought: str | None = None
    before: int = 0                # index into ImportedEpisode.screens
    after: int | None = None
    extras: dict[str, Any] | None = None


@dataclass
class ImportedEpisode:
    task_id: str
    instruction: str
    language: str
    apps: list[str]
    screens: list[Path]
    steps: list[ImportedStep]
    label: dict[str, Any]
    source: str
    answer: str | None = None
    screen_size: tuple[int, int] | None = None


@dataclass
class ImportReport:
    out: Path
    episodes: int = 0
    steps: int = 0
    unmapped: int = 0
    labels: int = 0
    warnings: list[str] = field(default_factory=list)


def point(value: Any, size: tuple[int, int] | None, where: str, space: str = "pixels") -> tuple[int, int] | None:
    """``[x, y]`` (or ``"x,y"``) -> device pixels, or None if it is not a point."""
    if isinstance(value, str):
        nums = re.findall(r"-?\d+(?:\.\d+)?", value)
        value = [float(n) for n in nums] if len(nums) == 2 else None
    if isinstance(value, dict):
        value = [value.get("x"), value.get("y")]
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return None
    x, y = float(value[0]), float(value[1])
    if space != "pixels":
        from harness.core.actions import to_device
        if size is None:
            return None
        return to_device(x, y, space, size)
    xi, yi = int(round(x)), int(round(y))
    if size is not None:  # an edge-to-edge gesture may name the pixel just past the edge
        xi, yi = min(max(xi, 0), size[0] - 1), min(max(yi, 0), size[1] - 1)
    if not (0 <= xi <= MAX_COORD and 0 <= yi <= MAX_COORD):
        return None
    return xi, yi


def validated(action: dict[str, Any]) -> dict[str, Any]:
    """The unified action JSON after validation (raises ActionError)."""
    return action_to_json(parse_action(action))


def make_step(raw_action: Any, mapped: dict[str, Any] | None, why: str | None, *, thought: str | None = None,
              response: str | None = None) -> ImportedStep:
    """A step from a source action: the unified action if it maps, else action null, ``invalid``
    ``unmapped action: ...`` and the original action text as ``raw_output``. A model response
    recorded by the source is the raw output of a mapped step (kept under extras otherwise)."""
    raw_text = raw_action if isinstance(raw_action, str) else json.dumps(raw_action, ensure_ascii=False)
    if mapped is not None:
        try:
            return ImportedStep(action=validated(mapped), raw_output=response or raw_text, thought=thought,
                                extras={"source_action": raw_action} if response else None)
        except ActionError as e:
            why = str(e)
    return ImportedStep(action=None, invalid=f"unmapped action: {why or 'unknown action'}", raw_output=raw_text,
                        thought=thought, extras={"response": response} if response else None)


# --------------------------------------------------------------------------- writing the run


def _unique(ids: Iterable[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for i in ids:
        n = seen.get(i, 0)
        seen[i] = n + 1
        out.append(i if n == 0 else safe_task_id(f"{i[:120]}-{n + 1}"))
    return out


def write_run(episodes: list[ImportedEpisode], out: str | Path, *, kind: str, source: str | Path,
              argv: list[str] | None = None, warnings: list[str] | None = None) -> ImportReport:
    """Write imported episodes as a run folder (refuses a folder that already holds a run)."""
    out = Path(out)
    report = ImportReport(out=out, warnings=list(warnings or []))
    if not episodes:
        raise TrajectoryImportError(f"{source}: no episodes found")
    ids = _unique(e.task_id for e in episodes)
    for e, i in zip(episodes, ids):
        e.task_id = i
    created = not out.exists()
    try:
        writer = RunWriter(out, resume=False)
    except RecordError as e:
        raise TrajectoryImportError(str(e)) from None
    ok = False
    try:
        tasks = []
        for e in episodes:
            t: dict[str, Any] = {"id": e.task_id, "instruction": e.instruction, "language": e.language,
                                 "reference_steps": max(1, len(e.steps)), "source": f"{kind}: {e.source}"}
            if e.apps:
                t["apps"] = e.apps
            tasks.append(t)
        tasks_path = out / "tasks.yaml"
        header = (f"# Imported by `harness import {kind}` from {source}.\n"
                  "# Minimal tasks for offline judging: reference_steps is the recorded step count, not a human\n"
                  "# reference. The labels are in labels.jsonl, not here, so judges cannot see them.\n")
        tasks_path.write_text(header + yaml.safe_dump(tasks, allow_unicode=True, sort_keys=False, width=120),
                              encoding="utf-8")
        writer.write_manifest({
            "kind": f"crate-harness import ({kind})",
            "command": argv if argv is not None else sys.argv,
            "environment": build_environment_info(),
            "source": {"format": kind, "path": str(source)},
            "agent": {"name": "imported", "label": f"imported:{kind}"},
            "judges": [],
            "suite": {"path": "tasks.yaml", "files": {"tasks.yaml": file_sha256(tasks_path)}},
            "tasks": [e.task_id for e in episodes],
            "started_at": now_iso(),
        })
        labels_lines = []
        for e in episodes:
            ep = writer.start_episode(e.task_id)
            rels: list[str] = []
            size = None
            for i, src in enumerate(e.screens):
                data, sz = png_bytes(src)
                size = size or sz
                rels.append(ep.write_screen(i, data))
            last_action = None
            answered = None
            for n, s in enumerate(e.steps, 1):
                ep.append_step({"index": n, "action": s.action, "invalid": s.invalid, "raw_output": s.raw_output,
                                "thought": s.thought, "screen_before": rels[s.before],
                                "screen_after": rels[s.after] if s.after is not None else None,
                                "extras": s.extras})
                report.steps += 1
                report.unmapped += s.action is None
                last_action = s.action
                if s.action is not None and s.action.get("type") == "answer":
                    answered = s.action.get("text")
            finished = last_action is not None and last_action.get("type") in ("finish", "answer")
            answer = e.answer if e.answer is not None else answered
            result = {"task_id": e.task_id, "agent": f"imported:{kind}",
                      "status": "finished" if finished else "step_limit",
                      "steps": len(e.steps), "cap": 2 * max(1, len(e.steps)) + 1, "verdicts": {},
                      "instruction": e.instruction, "language": e.language, "app": "+".join(e.apps) or None,
                      "answer": answer, "imported_from": e.source, "screen_size": list(size) if size else None}
            writer.append_result(result)
            label = {"task_id": e.task_id, **{k: v for k, v in e.label.items() if v is not None},
                     "language": e.language}
            if e.apps:
                label.setdefault("app", "+".join(e.apps))
            labels_lines.append(label)
            report.episodes += 1
        with open(out / "labels.jsonl", "w", encoding="utf-8") as f:
            for line in labels_lines:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
        report.labels = sum(1 for lab in labels_lines if any(k in lab for k in ("success", "unsafe")))
        writer.update_manifest(ended_at=now_iso(), import_warnings=report.warnings[:50])
        ok = True
    finally:
        writer.close()
        if not ok and created:  # do not leave half an import behind in a folder we made
            shutil.rmtree(out, ignore_errors=True)
    return report
