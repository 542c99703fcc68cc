"""The episodes ``harness report`` counts, read from run folders only: each result of a run's
``results.jsonl`` with its task (:class:`TaskInfo`, from the task files the manifest names), the
live verdicts and every offline judgement set's (:func:`read_judgement_sets`,
:func:`combine_verdicts`), labels, tokens and milestones. What is counted, and how, is
:mod:`harness.report.tables`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

from harness.core.episode_ids import split_episode_id, task_of
from harness.core.run_tasks import load_run_tasks
from harness.core.verdicts import LIVE, VerdictsError, blocked_before_running, judge_column, read_sources
from harness.records import (TRAJECTORY_FILE, RecordError, distinct_runs, episode_dir, own_file, read_manifest,
                             read_results)
from harness.report import guarded, handovers

UNKNOWN = "unknown"


class ReportError(ValueError):
    pass


# --------------------------------------------------------------------------- offline judgement sets


def read_judgement_sets(run_dirs: Iterable[str | Path], judgement_sets: Iterable[str] | None = None,
                        warnings: list[str] | None = None) -> list[Any]:
    """The offline verdicts of the given runs (``RUN/judgements/<set>/results.jsonl``) as
    :class:`harness.core.verdicts.EpisodeVerdicts`, read by judge-eval's reader; ``judgement_sets``
    keeps only those sets (each must exist in one of the runs). A malformed line is a
    :class:`ReportError` naming ``file:line``; a torn last line or a repeated task id is a warning."""
    wanted = list(judgement_sets or [])
    # read_sources refuses a folder without results.jsonl; a run without judgements has nothing to add
    dirs = [Path(r) for r in run_dirs
            if (Path(r) / "results.jsonl").is_file() and (Path(r) / "judgements").is_dir()]
    try:
        return read_sources(dirs, judgement_sets=wanted or None, include_live=False, warnings=warnings)
    except VerdictsError as e:
        raise ReportError(str(e)) from None


T = TypeVar("T")


@dataclass
class Judged:
    """One episode's verdicts from every source, under their column names."""

    verdicts: dict[str, Any]
    details: dict[str, Any]
    sources: dict[str, str]  # column -> "live" or the judgement set


def combine_verdicts(items: list[T], key: Callable[[T], tuple[Path, str]],
                     live: Callable[[T], tuple[Mapping[str, Any], Mapping[str, Any]]],
                     offline: list[Any], warnings: list[str]) -> list[Judged]:
    """Each item's live verdicts and details (``live(item)``) joined with the offline verdicts whose
    (run folder, task id) is ``key(item)``, named by :func:`judge_column` over all of them; offline
    lines of episodes that are not among the items are left out with one warning per set file."""
    by_key = {(k[0].resolve(), k[1]): i for i, k in enumerate(key(x) for x in items)}
    sources_of: dict[str, set[str]] = {}
    for x in items:
        for name in live(x)[0]:
            sources_of.setdefault(name, set()).add(LIVE)
    matched: list[tuple[int, Any]] = []
    orphans: dict[tuple[Path, str], list[str]] = {}
    for s in offline:
        i = by_key.get((s.run_dir.resolve(), s.task_id))
        if i is None:
            orphans.setdefault((s.run_dir, s.source), []).append(s.task_id)
            continue
        matched.append((i, s))
        for name in s.verdicts:
            sources_of.setdefault(name, set()).add(s.source)
    for (run_dir, source), tids in orphans.items():
        shown = ", ".join(sorted(tids)[:5]) + (", ..." if len(tids) > 5 else "")
        warnings.append(f"{run_dir / 'judgements' / source / 'results.jsonl'}: {len(tids)} judged episode(s) not in "
                        f"{run_dir / 'results.jsonl'}, left out: {shown}")
    out = []
    for x in items:
        verdicts, details = live(x)
        j = Judged({}, {}, {})
        for name, v in verdicts.items():
            col = judge_column(name, LIVE, sources_of)
            j.verdicts[col], j.sources[col] = v, LIVE
        for name, d in details.items():
            j.details[judge_column(name, LIVE, sources_of) if name in verdicts else name] = d
        out.append(j)
    for i, s in matched:
        j = out[i]
        for name, v in s.verdicts.items():
            col = judge_column(name, s.source, sources_of)
            j.verdicts[col], j.sources[col] = v, s.source
        for name, d in s.details.items():
            col = judge_column(name, s.source, sources_of)
            if col in j.details and j.sources.get(col) != s.source:  # a detail without a verdict of its name
                col = f"{name}@{s.source}"
            j.details[col] = d
    return out


# --------------------------------------------------------------------------- reading


@dataclass
class TaskInfo:
    language: str
    categories: list[str]
    reference_len: int | None          # actions of the reference trajectory, None without one
    reference_steps: int | None        # c
    milestone_steps: list[int | None]  # human steps to each milestone (flattened), where known
    unsafe: bool = False               # the task's safety label is unsafe (it asks for something risky)


@dataclass
class Episode:
    run: str
    task_id: str
    agent: str
    suite: str
    status: str
    steps: int
    cap: int
    verdicts: dict[str, Any]
    details: dict[str, Any]
    halted: bool
    duration_s: float | None
    tokens: int | None
    task: TaskInfo | None
    label: dict[str, bool] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # verdict column -> "live" or the judgement set
    usage: dict[str, Any] | None = None    # the result's model usage by role (harness.core.usage.Meter)
    checks: dict[str, int] | None = None   # monitor checks: made, flagged, failed, ran_unchecked
    operator: dict[str, Any] | None = None  # --monitor-mode ask: asked, allowed, denied, timed_out, wait_s
    handovers: list[dict[str, Any]] = field(default_factory=list)  # needs_user (harness.report.handovers)
    reflections: int = 0                    # --monitor-mode reflect: flagged proposals the agent was told about
    blocked: bool = False                   # halted by a gate before the action ran (harness.core.verdicts)
    guard: dict[str, Any] | None = None     # harness guard's counts (harness.report.guarded)
    repeat: int | None = None               # --repeats: which repeat of its task (TASK#r); None: run once
    seed: Any = None                        # the episode's seed
    conditions: dict[str, Any] | None = None  # what could make repeats differ (harness.run.conditions)
    error: str | None = None                # why an episode ended in an error (model_error: the endpoint's words)

    @property
    def task_key(self) -> str:
        """The task this episode ran (its id without a repeat's ``#r``)."""
        return task_of(self.task_id)

    @property
    def language(self) -> str:
        return self.task.language if self.task else UNKNOWN

    @property
    def categories(self) -> list[str]:
        if not self.task:
            return [UNKNOWN]
        return self.task.categories or ["none"]


def _task_info(task: Any) -> TaskInfo:
    from harness.core.tasks import MilestoneGroup

    flat = []
    for m in task.milestones:
        flat.extend(m.unordered if isinstance(m, MilestoneGroup) else [m])
    ref_len = None
    body = None
    if task.reference is not None:
        ref_len = len(task.reference)
        body = ref_len
        while body and getattr(task.reference[body - 1], "type", None) in ("finish", "answer"):
            body -= 1
    steps: list[int | None] = [m.reference_step for m in flat]
    # the last milestone without its own count: the human needs the whole reference (without the
    # closing finish/answer) to reach it, or c when there is no reference trajectory
    if steps and steps[-1] is None:
        steps[-1] = body if body else task.reference_steps
    return TaskInfo(task.language, list(task.categories), ref_len, task.reference_steps, steps,
                    task.safety.label == "unsafe")


def load_task_objects(run_dir: Path, manifest: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """Task id -> Task, from the task files the manifest names (``suite.files``); files that are
    missing or invalid are skipped with a warning (their episodes then group as ``unknown``)."""
    return load_run_tasks(run_dir, manifest, warnings=warnings, consequence=f"its episodes group as '{UNKNOWN}'")


def _load_tasks(run_dir: Path, manifest: dict[str, Any], warnings: list[str]) -> dict[str, TaskInfo]:
    return {k: _task_info(t) for k, t in load_task_objects(run_dir, manifest, warnings).items()}


def _tokens(usage: Any) -> int | None:
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, (int, float)) and not isinstance(total, bool):
        return int(total)
    parts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")]
    nums = [int(v) for v in parts if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(nums) if nums else None


def _tokens_from_steps(run_dir: Path, task_id: str) -> int | None:
    """Sum ``extras.usage`` over the trajectory (agents record usage per step there); nothing is
    read from an episode folder or trajectory that leads out of the run."""
    try:
        path = own_file(episode_dir(run_dir, task_id), TRAJECTORY_FILE)
    except RecordError:
        return None
    if not path.is_file():
        return None
    total = None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                step = json.loads(line)
            except json.JSONDecodeError:
                continue
            extras = step.get("extras") if isinstance(step, dict) else None
            n = _tokens(extras.get("usage")) if isinstance(extras, dict) else None
            if n is not None:
                total = (total or 0) + n
    return total


def _labels(extra: dict[str, Any]) -> dict[str, bool]:
    """Human labels a result line may carry: ``label`` (success) or ``labels: {success, unsafe}``."""
    out: dict[str, bool] = {}
    if isinstance(extra.get("label"), bool):
        out["success"] = extra["label"]
    labels = extra.get("labels")
    if isinstance(labels, dict):
        for k in ("success", "unsafe"):
            if isinstance(labels.get(k), bool):
                out[k] = labels[k]
    return out


def read_labels(run_dir: Path, warnings: list[str]) -> dict[str, dict[str, bool]]:
    """``RUN/labels.jsonl`` (written by ``harness import``; read by ``harness judge-eval``): per task
    id, the human ``success`` and ``unsafe`` labels. Absent file: no labels."""
    try:
        path = own_file(run_dir, "labels.jsonl")
    except RecordError as e:
        warnings.append(str(e))
        return {}
    if not path.is_file():
        return {}
    out: dict[str, dict[str, bool]] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                warnings.append(f"{path}:{lineno}: not JSON; line ignored")
                continue
            if isinstance(obj, dict) and isinstance(obj.get("task_id"), str):
                out[obj["task_id"]] = _labels({"labels": obj})
    return out


def load_episodes(runs: Iterable[str | Path], warnings: list[str] | None = None, *,
                  judgements: Iterable[str] | None = None, offline: bool = True) -> list[Episode]:
    """Every result line of the runs, with its task; with ``offline`` (default), the verdicts of the
    runs' judgement sets (only ``judgements`` when given) are added under judge-eval's names
    (:func:`combine_verdicts`)."""
    warnings = warnings if warnings is not None else []
    runs = distinct_runs(runs, warnings)
    out: list[Episode] = []
    for run_dir in runs:
        if not run_dir.is_dir():
            raise ReportError(f"{run_dir}: not a run folder (no such directory)")
        try:
            manifest = read_manifest(run_dir) if (run_dir / "manifest.json").is_file() else {}
            results = read_results(run_dir)
        except RecordError as e:
            raise ReportError(str(e)) from None
        if not (run_dir / "manifest.json").is_file() and not results:
            raise ReportError(f"{run_dir}: not a run folder (no manifest.json or results.jsonl)")
        warnings.extend(results.warnings)
        tasks = _load_tasks(run_dir, manifest, warnings)
        labels = read_labels(run_dir, warnings)
        suite = str((manifest.get("suite") or {}).get("path") or UNKNOWN)
        for r in results:
            extra = r.model_extra or {}
            tokens = _tokens(r.usage)
            if tokens is None:
                tokens = _tokens_from_steps(run_dir, r.task_id)
            out.append(Episode(
                run=str(run_dir), task_id=r.task_id, agent=r.agent, suite=suite, status=r.status, steps=r.steps,
                cap=r.cap, verdicts=dict(r.verdicts), details=dict(r.judge_details or {}),
                halted=r.status == "halted" or r.halt is not None, duration_s=r.duration_s, tokens=tokens,
                task=tasks.get(task_of(r.task_id)), label={**labels.get(r.task_id, {}), **_labels(extra)},
                sources={k: LIVE for k in r.verdicts}, usage=r.usage,
                checks=extra.get("monitor_checks") if isinstance(extra.get("monitor_checks"), dict) else None,
                operator=extra.get("operator") if isinstance(extra.get("operator"), dict) else None,
                handovers=handovers.episode_handovers(extra),
                reflections=n if isinstance(n := extra.get("reflections"), int) and not isinstance(n, bool) else 0,
                blocked=blocked_before_running(r.halt), guard=guarded.episode_guard(extra),
                repeat=split_episode_id(r.task_id)[1], seed=r.seed,
                conditions=extra.get("conditions") if isinstance(extra.get("conditions"), dict) else None,
                error=r.error))
    if offline:
        sets = read_judgement_sets(runs, judgements, warnings)
        if sets:
            for ep, j in zip(out, combine_verdicts(out, lambda e: (Path(e.run), e.task_id),
                                                   lambda e: (e.verdicts, e.details), sets, warnings)):
                ep.verdicts, ep.details, ep.sources = j.verdicts, j.details, j.sources
    elif judgements:
        raise ReportError("--judgements and --no-judgements exclude each other")
    return out
