"""Labelled step scores from recorded runs: what ``harness judge-eval --calibrate crate-s`` rests on.

**Where a step's score comes from.** Every complete episode (a line in ``RUN/results.jsonl``) of
every run given. For each of its steps the sources are tried in this order, and the first that
holds a score for the step gives it:

1. ``monitor``: the live ``crate-s`` monitor's verdict on that step (``trajectory.jsonl``, the
   step's ``monitor`` field, its ``score``; the score of the proposed action, judged on the screen
   before it, as a gate sees it);
2. ``live``: the live ``crate-s`` judge's step findings (``results.jsonl``,
   ``judge_details["crate-s"]["evidence"]``);
3. each ``harness judge`` set holding ``crate-s`` findings (``RUN/judgements/<set>/``), in name
   order.

``--offline-only`` leaves out 1 and 2; ``--judgements SET`` keeps only the sets named. The monitor
and the judge ask the same step question (same prompt, drawing and image policy), so their scores
are of one kind; which model, prompt and image policy gave each score is read from the run's
manifest (``monitors`` / ``judges``) or the set's (``specs``), and the step's prompt id from the
step itself. A step scored by more than one source counts once (the first), and the count of such
steps is reported.

**What is not a score** (counted, by reason, never used): a reply without a ``score``; a check
that failed (``monitor_error``, a step call that failed: ``risky`` is null); the agent's finish
and waits (the monitor does not check them); a note written instead of a model call (an invalid
output, an action blocked or refused: ``synthetic``); an async halt's boundary step, whose
``monitor`` field repeats the verdict of the step it stopped after (``halted_step``); a source
whose manifest names no ``crate-s`` spec (who gave the score is unknown).

**How a step is matched to its label.** An episode's label is found by ``(run folder name,
task_id)`` when the label names its ``run``, else by ``task_id`` (:class:`judges.agreement.
LabelIndex`, as ``judge-eval`` does). The step's label is :meth:`judges.agreement.Label.step_label`:
all steps of a safe episode are safe; with ``risky_steps`` those are risky and the rest safe; else
step t* (``first_unsafe_step``) is risky, the steps before it safe, those after it unlabelled.

This module reads records only; it never calls a model or touches a device.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.records import (RESULTS_FILE, TRAJECTORY_FILE, RecordError, check_inside, episode_dir, file_sha256,
                             iter_steps, own_file)
from harness.core.verdicts import JUDGEMENTS_DIR, LIVE, EpisodeVerdicts, VerdictsError, read_sources
from judges.agreement import Label, LabelIndex
from judges.calibration import CalibrationError, prompt_language, scorer_key, scorer_of

MONITOR_SOURCE = "monitor"
NO_SCORE = "no score in the reply"
CHECK_FAILED = "the check failed (no verdict)"
NOT_CHECKED = "not checked (the agent's finish or wait)"
NOTE = "a note, not a model call (invalid, blocked or refused action)"
REPEATED = "repeats another step's verdict (async halt boundary)"
NO_SPEC = "no crate-s spec in the manifest (who scored it is unknown)"
NO_LABEL = "the episode has no label"
NOT_SCORED = "no source scored it"


@dataclass
class ScoredStep:
    run: str
    task_id: str
    step: int
    score: float
    risky: bool
    source: str       # monitor, live, or the judgement set's name
    scorer: str       # scorer_key of who gave it
    prompt: str       # the step prompt's id


@dataclass
class StepScores:
    steps: list[ScoredStep] = field(default_factory=list)
    # reason -> {"risky": n, "safe": n, "unlabelled": n}: labelled steps without a usable score, and
    # scored steps without a label (the reason is then the label's)
    left_out: dict[str, dict[str, int]] = field(default_factory=dict)
    scorers: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> {"scorer", "sources"}
    runs: list[dict[str, Any]] = field(default_factory=list)
    scored_twice: int = 0
    scored_twice_differently: int = 0
    notes: list[str] = field(default_factory=list)

    def leave_out(self, reason: str, label: bool | None) -> None:
        row = self.left_out.setdefault(reason, {"risky": 0, "safe": 0, "unlabelled": 0})
        row["risky" if label is True else "safe" if label is False else "unlabelled"] += 1


@dataclass
class _Candidate:
    """One source's word on one step: a score, or why it gives none."""

    source: str
    score: float | None
    reason: str = ""
    scorer: str = ""
    prompt: str = ""


def _spec_named(specs: Any, name: str) -> dict[str, Any] | None:
    for s in specs if isinstance(specs, list) else []:
        if isinstance(s, dict) and s.get("name") == name:
            return s
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CalibrationError(f"{path}: unreadable ({e})") from None
    return data if isinstance(data, dict) else {}


class _Scorers:
    """The spec of the monitor or judge that gave each source's scores, read once per run or set."""

    def __init__(self, monitor: str, out: StepScores):
        self.monitor, self.out = monitor, out
        self.cache: dict[tuple[str, str], tuple[str, dict[str, Any]] | None] = {}

    def of(self, run_dir: Path, source: str) -> str | None:
        key = (str(run_dir), source)
        if key not in self.cache:
            self.cache[key] = self._read(run_dir, source)
        found = self.cache[key]
        if found is None:
            return None
        k, scorer = found
        entry = self.out.scorers.setdefault(k, {"scorer": scorer, "sources": set()})
        entry["sources"].add(f"{run_dir.name}:{source}")
        return k

    def _read(self, run_dir: Path, source: str) -> tuple[str, dict[str, Any]] | None:
        if source in (MONITOR_SOURCE, LIVE):
            manifest = _read_json(check_inside(run_dir, run_dir / "manifest.json"))
            spec = _spec_named(manifest.get("monitors" if source == MONITOR_SOURCE else "judges"), self.monitor)
        else:
            set_manifest = check_inside(run_dir, run_dir / JUDGEMENTS_DIR / source / "manifest.json")
            spec = _spec_named(_read_json(set_manifest).get("specs"), self.monitor)
        if spec is None:
            return None
        scorer = scorer_of(spec)
        return scorer_key(scorer), scorer


def _is_score(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0


def _monitor_candidate(rec: Any, monitor: str, scorers: _Scorers, run_dir: Path) -> _Candidate | None:
    m = rec.monitor
    if not isinstance(m, dict) or m.get("monitor") != monitor:
        return None
    extras = m.get("extras") if isinstance(m.get("extras"), dict) else {}
    if m.get("halted_step") not in (None, rec.index):
        return _Candidate(MONITOR_SOURCE, None, REPEATED)
    if extras.get("skipped"):
        return _Candidate(MONITOR_SOURCE, None, NOT_CHECKED)
    if m.get("error") or m.get("risky") is None:
        return _Candidate(MONITOR_SOURCE, None, CHECK_FAILED)
    scorer = scorers.of(run_dir, MONITOR_SOURCE)
    if scorer is None:
        return _Candidate(MONITOR_SOURCE, None, NO_SPEC)
    if not _is_score(m.get("score")):
        return _Candidate(MONITOR_SOURCE, None, NO_SCORE)
    return _Candidate(MONITOR_SOURCE, float(m["score"]), scorer=scorer, prompt=str(extras.get("prompt") or ""))


def _evidence_candidates(ev: EpisodeVerdicts, monitor: str, scorers: _Scorers) -> dict[int, _Candidate]:
    """A judge's step findings on one episode (``details[monitor]["evidence"]``)."""
    d = ev.details.get(monitor)
    if not isinstance(d, dict) or not isinstance(d.get("evidence"), list):
        return {}
    prompts = d.get("prompts") if isinstance(d.get("prompts"), list) else []
    prompt = str(prompts[0]) if prompts else ""
    scorer = scorers.of(ev.run_dir, ev.source)
    out: dict[int, _Candidate] = {}
    for e in d["evidence"]:
        if not isinstance(e, dict) or not isinstance(e.get("step"), int) or isinstance(e.get("step"), bool):
            continue
        i, src = e["step"], ev.source
        if e.get("synthetic"):
            out[i] = _Candidate(src, None, NOTE)
        elif e.get("error") or e.get("risky") is None:
            out[i] = _Candidate(src, None, CHECK_FAILED)
        elif scorer is None:
            out[i] = _Candidate(src, None, NO_SPEC)
        elif not _is_score(e.get("score")):
            out[i] = _Candidate(src, None, NO_SCORE)
        else:
            out[i] = _Candidate(src, float(e["score"]), scorer=scorer, prompt=prompt)
    return out


def collect(run_dirs: Iterable[str | Path], labels: list[Label], *, monitor: str = "crate-s",
            judgement_sets: Iterable[str] | None = None, include_live: bool = True,
            warnings: list[str] | None = None) -> StepScores:
    """Every step of the runs' complete episodes with its label and its score (module docstring)."""
    warnings = warnings if warnings is not None else []
    out = StepScores()
    index = LabelIndex(labels)
    out.notes.extend(index.notes())
    wanted = list(judgement_sets) if judgement_sets else None
    try:
        # every episode's live entry (one per results.jsonl line: the complete episodes) and the sets' lines
        sources = read_sources(run_dirs, wanted, True, warnings)
    except VerdictsError as e:
        raise CalibrationError(str(e)) from None
    by_episode: dict[tuple[str, str], list[EpisodeVerdicts]] = {}
    order: list[tuple[str, str]] = []
    for s in sources:
        key = (s.run, s.task_id)
        if key not in by_episode:
            by_episode[key] = []
            order.append(key)
        by_episode[key].append(s)
    scorers = _Scorers(monitor, out)
    per_run: dict[str, dict[str, Any]] = {}
    for key in order:
        items = by_episode[key]
        live = next((s for s in items if s.source == LIVE), None)
        if live is None:  # a set's line for an episode the run no longer lists: not a complete episode
            continue
        run_name, task_id = key
        if run_name not in per_run:
            per_run[run_name] = {"run": run_name, "path": str(live.run_dir),
                                 "results_sha256": file_sha256(own_file(live.run_dir, RESULTS_FILE)),
                                 "episodes": 0, "steps": 0, "used": {}}
        info = per_run[run_name]
        info["episodes"] += 1
        steps: dict[int, list[_Candidate]] = {}
        executed: dict[int, bool] = {}
        try:
            ep_dir = episode_dir(live.run_dir, task_id)
            if (ep_dir / TRAJECTORY_FILE).is_file():
                for rec in iter_steps(ep_dir):
                    steps.setdefault(rec.index, [])
                    executed[rec.index] = rec.ran
                    c = _monitor_candidate(rec, monitor, scorers, live.run_dir) if include_live else None
                    if c is not None:
                        steps[rec.index].append(c)
            else:
                warnings.append(f"{ep_dir}: no {TRAJECTORY_FILE}; only judges' findings are read")
        except RecordError as e:  # a malformed step line: FILE:LINE: field: problem
            raise CalibrationError(str(e)) from None
        judged = [s for s in items if s.source == LIVE and include_live] + sorted(
            (s for s in items if s.source != LIVE), key=lambda s: s.source)
        for s in judged:
            for i, c in _evidence_candidates(s, monitor, scorers).items():
                steps.setdefault(i, []).append(c)
        _settle(out, info, run_name, task_id, index.get(run_name, task_id), steps, executed)
    out.runs = list(per_run.values())
    return out


def _settle(out: StepScores, info: dict[str, Any], run: str, task_id: str, label: Label | None,
            steps: dict[int, list[_Candidate]], executed: dict[int, bool]) -> None:
    """Each step once: its label, and the first score a source gave it (or why none is used)."""
    for i in sorted(steps):
        info["steps"] += 1
        cands = steps[i]
        truth, why = label.step_label(i, executed.get(i, True)) if label is not None else (None, NO_LABEL)
        scored = [c for c in cands if c.score is not None]
        if not scored:
            out.leave_out(cands[0].reason if cands else NOT_SCORED, truth)
            continue
        first = scored[0]
        if len(scored) > 1:
            out.scored_twice += 1
            if any(c.score != first.score for c in scored[1:]):
                out.scored_twice_differently += 1
        if truth is None:
            out.leave_out(why, None)
            continue
        out.steps.append(ScoredStep(run, task_id, i, first.score, truth, first.source, first.scorer, first.prompt))
        info["used"][first.source] = info["used"].get(first.source, 0) + 1


def prompts_by_language(steps: Iterable[ScoredStep]) -> dict[str, set[str]]:
    """The step prompt ids the scores were made with, per language."""
    out: dict[str, set[str]] = {}
    for s in steps:
        out.setdefault(prompt_language(s.prompt) or "unknown", set()).add(s.prompt)
    return out
