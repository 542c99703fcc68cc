"""``harness report``: per-group tables of one or more run folders, read from the records only.

An episode row comes from a run's ``results.jsonl``; its task (language, categories, reference,
milestones' human step counts) from the task files the manifest names (``suite.files``); a task
file that is missing or no longer valid makes its episodes group as ``unknown`` (with a warning).

Groups: any of ``agent`` (the result's ``agent`` field), ``suite`` (the manifest's suite path),
``language``, ``category`` (an episode counts once in each of its task's categories). Every
metric's definition and source is in docs/reports.md; in short:

* ``SR[judge]``: successes / episodes with a true/false verdict of that judge; infrastructure
  errors are excluded from every rate and counted apart, ``judge_error`` verdicts are excluded from
  that judge's rate and counted apart. 95% Wilson interval.
* ``ATP`` / ``MSR`` (AndroidLens): mean milestone progress; mean of agent steps / human steps to each
  reached milestone.
* ``Task``/``Tail`` (Mobile-R1, episodes whose task has a reference trajectory): Tail = the primary
  judge's success whatever happened on the way; Task = success without deviating, which a live run
  shows as success within the reference's step count.
* halted by a monitor (and of those, blocked: halted before the action ran), unsafe episodes (a
  safety verdict true, counted by :func:`harness.verdicts.counts_unsafe`: never through a step that
  never ran), agent errors, step use against the
  cap, tokens and wall time; reflections (``--monitor-mode reflect``) and the unsafe tasks finished
  safely after one.

Offline verdicts: besides the live judges' verdicts in ``results.jsonl``, every judgement set that
``harness judge`` wrote (``RUN/judgements/<set>/results.jsonl``, read with
:func:`harness.verdicts.read_sources`, the reader ``harness judge-eval`` uses) adds its verdicts and
details to the episodes with the same task id. Judge names follow judge-eval's convention
(:func:`harness.verdicts.judge_column`): a name that only one source gave keeps its name; a name given by more than
one source (live and a set, or two sets) becomes ``name@live`` / ``name@<set>``. A line of a set
whose task id is not in the run is left out with a warning.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

from harness.usage import role_tokens

from harness.records import (TRAJECTORY_FILE, UNSCORED_STATUSES, RecordError, distinct_runs, episode_dir, own_file,
                             read_manifest, read_results)
from harness.report import guarded, handovers
from harness.report.stats import cohen_kappa, compare_paired, wilson
from harness.run_tasks import load_run_tasks
from harness.verdicts import (LIVE, VerdictsError, blocked_before_running, counts_unsafe, episode_unsafe,
                              is_safety_judge, judge_base, judge_column, read_sources)

GROUP_KEYS = ("agent", "suite", "language", "category")
FORMATS = ("md", "csv", "json", "html")
# success judges shown first, in this order; others follow alphabetically
JUDGE_ORDER = ("oracle", "crate", "holistic", "milestones")
MILESTONE_SOURCES = ("oracle", "milestones")
UNKNOWN = "unknown"


class ReportError(ValueError):
    pass


# --------------------------------------------------------------------------- offline judgement sets


def read_judgement_sets(run_dirs: Iterable[str | Path], judgement_sets: Iterable[str] | None = None,
                        warnings: list[str] | None = None) -> list[Any]:
    """The offline verdicts of the given runs (``RUN/judgements/<set>/results.jsonl``) as
    :class:`harness.verdicts.EpisodeVerdicts`, read by judge-eval's reader; ``judgement_sets``
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
    usage: dict[str, Any] | None = None    # the result's model usage by role (harness.usage.Meter)
    checks: dict[str, int] | None = None   # monitor checks: made, flagged, failed, ran_unchecked
    operator: dict[str, Any] | None = None  # --monitor-mode ask: asked, allowed, denied, timed_out, wait_s
    handovers: list[dict[str, Any]] = field(default_factory=list)  # needs_user (harness.report.handovers)
    reflections: int = 0                    # --monitor-mode reflect: flagged proposals the agent was told about
    blocked: bool = False                   # halted by a gate before the action ran (harness.verdicts)
    guard: dict[str, Any] | None = None     # harness guard's counts (harness.report.guarded)

    @property
    def language(self) -> str:
        return self.task.language if self.task else UNKNOWN

    @property
    def categories(self) -> list[str]:
        if not self.task:
            return [UNKNOWN]
        return self.task.categories or ["none"]


def _task_info(task: Any) -> TaskInfo:
    from harness.tasks import MilestoneGroup

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
                task=tasks.get(r.task_id), label={**labels.get(r.task_id, {}), **_labels(extra)},
                sources={k: LIVE for k in r.verdicts}, usage=r.usage,
                checks=extra.get("monitor_checks") if isinstance(extra.get("monitor_checks"), dict) else None,
                operator=extra.get("operator") if isinstance(extra.get("operator"), dict) else None,
                handovers=handovers.episode_handovers(extra),
                reflections=n if isinstance(n := extra.get("reflections"), int) and not isinstance(n, bool) else 0,
                blocked=blocked_before_running(r.halt), guard=guarded.episode_guard(extra)))
    if offline:
        sets = read_judgement_sets(runs, judgements, warnings)
        if sets:
            for ep, j in zip(out, combine_verdicts(out, lambda e: (Path(e.run), e.task_id),
                                                   lambda e: (e.verdicts, e.details), sets, warnings)):
                ep.verdicts, ep.details, ep.sources = j.verdicts, j.details, j.sources
    elif judgements:
        raise ReportError("--judgements and --no-judgements exclude each other")
    return out


# --------------------------------------------------------------------------- metrics


def _milestones(ep: Episode, source: str) -> dict[str, Any] | None:
    """Milestone findings of one source in one shape: ``{"items": [{"step", "reference_step"}],
    "progress"}``. Reads the oracle's ``milestones: {reached: [...], progress}`` and the
    ``milestones`` judge's ``milestones: [{idx, done, step, reference_step}]`` with ``atp``. A
    source whose verdict is ``judge_error`` has no findings (its partial search is not progress)."""
    if milestone_error(ep, source):
        return None
    d = ep.details.get(source)
    if not isinstance(d, dict):
        return None
    m = d.get("milestones")
    if isinstance(m, dict) and isinstance(m.get("reached"), list):
        items, progress = m["reached"], m.get("progress")
    elif isinstance(m, list):
        items, progress = m, d.get("atp")
    elif isinstance(d.get("reached"), list):
        items, progress = d["reached"], d.get("progress")
    else:
        return None
    items = [x for x in items if isinstance(x, dict)]
    if not isinstance(progress, (int, float)) or isinstance(progress, bool):
        progress = (sum(1 for x in items if isinstance(x.get("step"), int)) / len(items)) if items else None
    return {"items": items, "progress": float(progress) if progress is not None else None}


def milestone_error(ep: Episode, source: str) -> bool:
    """The source judged milestones for this episode and failed (``judge_error``)."""
    if ep.verdicts.get(source) == "judge_error":
        return True
    return source == "oracle" and ep.verdicts.get("oracle") == "judge_error"


def episode_progress(ep: Episode, source: str) -> float | None:
    m = _milestones(ep, source)
    return None if m is None else m["progress"]


def episode_msr(ep: Episode, source: str) -> float | None:
    """Mean over reached milestones of (agent steps to it) / (human steps to it), where both are known.
    Human steps come from the task file (see :func:`_task_info`), else from the finding itself."""
    m = _milestones(ep, source)
    if m is None:
        return None
    human = ep.task.milestone_steps if ep.task is not None else []
    ratios = []
    for k, x in enumerate(m["items"]):
        step = x.get("step")
        h = human[k] if k < len(human) else x.get("reference_step")
        if isinstance(step, int) and not isinstance(step, bool) and step >= 1 and isinstance(h, int) and h > 0:
            ratios.append(step / h)
    return sum(ratios) / len(ratios) if ratios else None


def _judge_key(name: str) -> tuple[int, str, int, str]:
    """Sort order of verdict columns: JUDGE_ORDER's judges first, then the others by name; the
    columns of one judge from several sources: ``@live`` first, then the sets by name."""
    base, _, source = name.partition("@")
    rank = JUDGE_ORDER.index(base) if base in JUDGE_ORDER else len(JUDGE_ORDER)
    return (rank, base, 0 if source in ("", LIVE) else 1, source)


def order_judges(names: Iterable[str]) -> list[str]:
    return sorted(set(names), key=_judge_key)


def success_judges(episodes: list[Episode]) -> list[str]:
    return order_judges(k for e in episodes for k in e.verdicts if not is_safety_judge(k))


def safety_judges(episodes: list[Episode]) -> list[str]:
    return sorted({k for e in episodes for k in e.verdicts if is_safety_judge(k)}, key=lambda n: _judge_key(n)[1:])


def milestone_sources(episodes: list[Episode]) -> list[str]:
    """Where milestone findings may be: ``oracle`` and ``milestones`` (always, so the JSON and CSV
    keys stay), plus their columns from several sources (``milestones@live``, ``milestones@<set>``)."""
    found = {k for e in episodes for k in e.details if judge_base(k) in MILESTONE_SOURCES}
    return [*MILESTONE_SOURCES, *sorted(found - set(MILESTONE_SOURCES), key=lambda n: (MILESTONE_SOURCES.index(judge_base(n)),
                                                                                      _judge_key(n)[2:]))]


def primary_judge(episodes: list[Episode], wanted: str | None = None) -> str | None:
    judges = success_judges(episodes)
    if wanted:
        if wanted not in judges and f"{wanted}@{LIVE}" in judges:
            return f"{wanted}@{LIVE}"  # the name is split by source: the verdicts given during the run
        if wanted not in judges:
            raise ReportError(f"--judge {wanted}: no such success judge in these runs (have: {', '.join(judges) or 'none'})")
        return wanted
    return judges[0] if judges else None


def _rate(k: int, n: int) -> dict[str, Any]:
    ci = wilson(k, n)
    return {"k": k, "n": n, "rate": (k / n) if n else None, "low": ci[0] if ci else None, "high": ci[1] if ci else None}


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarise(rows: list[Episode], judges: list[str], safety: list[str], primary: str | None,
              milestones: Iterable[str] = MILESTONE_SOURCES) -> dict[str, Any]:
    scored = [e for e in rows if e.status not in UNSCORED_STATUSES]
    out: dict[str, Any] = {"episodes": len(rows), "infra_errors": sum(1 for e in rows if e.status == "infra_error"),
                           "task_errors": sum(1 for e in rows if e.status == "task_error"), "scored": len(scored)}
    sr = {}
    for j in judges:
        # an episode that ended needs_user is never a success (the task was handed over, not done)
        vals = [False if e.status == "needs_user" and e.verdicts[j] is True else e.verdicts[j] for e in scored if j in e.verdicts]
        k = sum(1 for v in vals if v is True)
        n = sum(1 for v in vals if isinstance(v, bool))
        sr[j] = {**_rate(k, n), "judge_errors": sum(1 for v in vals if v == "judge_error")}
    out["sr"] = sr
    for src in milestones:
        prog = [p for p in (episode_progress(e, src) for e in scored) if p is not None]
        msr = [m for m in (episode_msr(e, src) for e in scored) if m is not None]
        out[f"atp_{src}"] = _mean(prog)
        out[f"atp_{src}_n"] = len(prog)
        out[f"atp_{src}_errors"] = sum(1 for e in scored if milestone_error(e, src))  # left out of ATP and MSR
        out[f"msr_{src}"] = _mean(msr)
        out[f"msr_{src}_n"] = len(msr)
    with_ref = [e for e in scored if e.task and e.task.reference_len and primary and isinstance(e.verdicts.get(primary), bool)]
    tail = sum(1 for e in with_ref if e.verdicts[primary] is True)  # type: ignore[index]
    task = sum(1 for e in with_ref if e.verdicts[primary] is True and e.steps <= e.task.reference_len)  # type: ignore[index,union-attr,operator]
    out["tail_succ"] = _rate(tail, len(with_ref))
    out["task_succ"] = _rate(task, len(with_ref))
    out["halted"] = sum(1 for e in scored if e.halted)
    out["blocked"] = sum(1 for e in scored if e.blocked)  # halted before the action ran: never unsafe by that action
    out["unsafe"] = sum(1 for e in scored if episode_unsafe(e.verdicts, e.details, safety))
    out["unsafe_by_judge"] = {s: sum(1 for e in scored if counts_unsafe(e.verdicts.get(s), e.details.get(s)))
                              for s in safety}
    out["agent_errors"] = sum(1 for e in scored if e.status == "agent_error")
    out["step_limit"] = sum(1 for e in scored if e.status == "step_limit")
    out["steps_mean"] = _mean([e.steps for e in scored])
    out["cap_mean"] = _mean([e.cap for e in scored])
    out["steps_over_cap"] = _mean([e.steps / e.cap for e in scored])
    toks = [e.tokens for e in rows if e.tokens is not None]
    out["tokens_total"] = sum(toks) if toks else None
    out["tokens_mean"] = _mean(toks)  # type: ignore[arg-type]
    for part, roles, exclude in (("agent", ("agent",), ()), ("monitors", ("monitor:",), ()),
                                 ("judges", None, ("agent", "monitor:"))):
        vals = [v for v in (role_tokens(e.usage, roles, exclude=exclude) for e in rows) if v is not None]
        out[f"tokens_{part}_total"] = sum(vals) if vals else None
    checks = [e.checks for e in scored if e.checks]
    out["monitor_checks"] = sum(c.get("made", 0) for c in checks)
    out["monitor_errors"] = sum(c.get("failed", 0) for c in checks)
    out["ran_unchecked"] = sum(c.get("ran_unchecked", 0) for c in checks)
    out["monitor_flags"] = sum(c.get("flagged", 0) for c in checks)
    asked = [e.operator for e in scored if e.operator]
    for key in ("asked", "allowed", "denied", "timed_out"):
        out[f"operator_{key}"] = sum(int(a.get(key) or 0) for a in asked)
    out["operator_wait_s"] = round(sum(float(a.get("wait_s") or 0.0) for a in asked), 3)
    out.update(handovers.summary(scored, primary))
    out.update(guarded.summary(rows))
    out.update(reflection_counts(scored, safety))
    walls = [e.duration_s for e in rows if e.duration_s is not None]
    out["wall_total_s"] = sum(walls) if walls else None
    out["wall_mean_s"] = _mean(walls)  # type: ignore[arg-type]
    return out


def reflection_counts(rows: list[Episode], safety: list[str]) -> dict[str, int]:
    """``--monitor-mode reflect``: flagged proposals the agents were told about, the episodes with
    one, the unsafe tasks (safety label ``unsafe``) among them that a safety judge gave a verdict
    on, and how many of those the agent finished itself with none counting it unsafe
    (:func:`harness.verdicts.episode_unsafe`)."""
    told = [e for e in rows if e.reflections]
    judged = [e for e in told if e.task and e.task.unsafe and any(isinstance(e.verdicts.get(s), bool) for s in safety)]
    safe = [e for e in judged if e.status == "finished" and not episode_unsafe(e.verdicts, e.details, safety)]
    return {"reflections": sum(e.reflections for e in rows), "reflected_episodes": len(told),
            "reflected_unsafe_judged": len(judged), "unsafe_safe_after_reflection": len(safe)}


def _keys_of(ep: Episode, by: list[str]) -> list[tuple[str, ...]]:
    values: list[list[str]] = []
    for k in by:
        if k == "agent":
            values.append([ep.agent])
        elif k == "suite":
            values.append([ep.suite])
        elif k == "language":
            values.append([ep.language])
        else:
            values.append(ep.categories)
    keys: list[tuple[str, ...]] = [()]
    for vs in values:
        keys = [k + (v,) for k in keys for v in vs]
    return keys


def group(episodes: list[Episode], by: list[str]) -> dict[tuple[str, ...], list[Episode]]:
    groups: dict[tuple[str, ...], list[Episode]] = {}
    for e in episodes:
        for key in _keys_of(e, by):
            groups.setdefault(key, []).append(e)
    return dict(sorted(groups.items()))


def paired_comparisons(episodes: list[Episode], by: list[str], primary: str | None, *, resamples: int = 2000,
                       seed: int = 0, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """Every pair of agents on the same tasks (within each group of the other ``by`` keys)."""
    if primary is None:
        return []
    others = [k for k in by if k != "agent"]
    out = []
    for key, rows in group(episodes, others).items():
        outcome: dict[str, dict[str, bool]] = {}
        dup = 0
        for e in rows:
            v = e.verdicts.get(primary)
            if e.status in UNSCORED_STATUSES or not isinstance(v, bool):
                continue
            per = outcome.setdefault(e.agent, {})
            if e.task_id in per:
                dup += 1
                continue
            per[e.task_id] = v
        if dup and warnings is not None:
            warnings.append(f"{dup} repeated (agent, task) episode(s); paired comparisons use the first of each")
        for a, b in combinations(sorted(outcome), 2):
            common = sorted(set(outcome[a]) & set(outcome[b]))
            if not common:
                continue
            cmp = compare_paired([outcome[a][t] for t in common], [outcome[b][t] for t in common],
                                 resamples=resamples, seed=seed)
            out.append({"group": dict(zip(others, key)), "agent_a": a, "agent_b": b, "judge": primary, **cmp.to_json()})
    return out


def agreement(episodes: list[Episode], judges: list[str], safety: list[str]) -> list[dict[str, Any]]:
    """Each judge against the reference: human labels where present, else the oracle (success) and
    ``oracle_unsafe`` (safety). Full judge evaluation: ``harness judge-eval``."""
    out = []
    scored = [e for e in episodes if e.status not in UNSCORED_STATUSES]
    # the oracle's columns; split by source (offline judgement sets), the live one is the reference
    oracle = next((c for c in ("oracle", f"oracle@{LIVE}") if c in judges), "oracle")
    oracle_unsafe = next((c for c in ("oracle_unsafe", f"oracle_unsafe@{LIVE}") if c in safety), "oracle_unsafe")

    def table(name: str, kind: str, ref_of) -> None:
        tp = fp = fn = tn = 0
        ref_name = None
        for e in scored:
            v = e.verdicts.get(name)
            ref, rname = ref_of(e)
            if not isinstance(v, bool) or not isinstance(ref, bool):
                continue
            ref_name = ref_name or rname
            tp += v and ref
            fp += v and not ref
            fn += (not v) and ref
            tn += (not v) and not ref
        n = tp + fp + fn + tn
        if not n:
            return
        prec = tp / (tp + fp) if tp + fp else None
        rec = tp / (tp + fn) if tp + fn else None
        f1 = 2 * prec * rec / (prec + rec) if prec and rec else (0.0 if prec is not None and rec is not None else None)
        out.append({"judge": name, "kind": kind, "reference": ref_name, "n": n, "agree": (tp + tn) / n,
                    "tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": prec, "recall": rec, "f1": f1,
                    "kappa": cohen_kappa(tp, fp, fn, tn)})

    for j in judges:
        if j == oracle and not any("success" in e.label for e in scored):
            continue
        table(j, "success", lambda e: (e.label["success"], "labels") if "success" in e.label
              else (e.verdicts.get(oracle), oracle) if j != oracle else (None, None))
    for s in safety:
        if s == oracle_unsafe and not any("unsafe" in e.label for e in scored):
            continue
        table(s, "safety", lambda e: (e.label["unsafe"], "labels") if "unsafe" in e.label
              else (e.verdicts.get(oracle_unsafe), oracle_unsafe) if s != oracle_unsafe else (None, None))
    return out


@dataclass
class Report:
    runs: list[str]
    by: list[str]
    judges: list[str]
    safety: list[str]
    primary: str | None
    groups: list[dict[str, Any]]
    paired: list[dict[str, Any]]
    agreement: list[dict[str, Any]]
    warnings: list[str]
    judge_sources: dict[str, str] = field(default_factory=dict)  # verdict column -> "live" or its judgement set
    judgement_sets: list[str] = field(default_factory=list)
    milestone_sources: list[str] = field(default_factory=lambda: list(MILESTONE_SOURCES))

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "by": self.by, "judges": self.judges, "safety_judges": self.safety,
                "primary_judge": self.primary, "judgement_sets": self.judgement_sets,
                "judge_sources": self.judge_sources, "groups": self.groups, "paired": self.paired,
                "agreement": self.agreement, "warnings": self.warnings}


def build_report(runs: list[str], by: list[str] | None = None, *, judge: str | None = None, resamples: int = 2000,
                 seed: int = 0, judgements: Iterable[str] | None = None, offline: bool = True) -> Report:
    """The report of ``runs``; ``offline=False`` leaves the judgement sets out (``--no-judgements``),
    ``judgements`` keeps only those sets (``--judgements SET``)."""
    by = list(by or ["agent", "suite"])
    bad = [k for k in by if k not in GROUP_KEYS]
    if bad:
        raise ReportError(f"--by: unknown key(s) {', '.join(bad)} (choose from {', '.join(GROUP_KEYS)})")
    warnings: list[str] = []
    runs = distinct_runs(runs, warnings)  # a run folder given twice counts once
    episodes = load_episodes(runs, warnings, judgements=judgements, offline=offline)
    judges, safety = success_judges(episodes), safety_judges(episodes)
    primary = primary_judge(episodes, judge)
    ms = milestone_sources(episodes)
    groups = [{"key": dict(zip(by, key)), **summarise(rows, judges, safety, primary, ms)}
              for key, rows in group(episodes, by).items()]
    paired = paired_comparisons(episodes, by, primary, resamples=resamples, seed=seed, warnings=warnings) if "agent" in by else []
    judge_sources = {col: src for e in episodes for col, src in e.sources.items()}  # one source per column
    sets = sorted(set(judge_sources.values()) - {LIVE})
    return Report([str(r) for r in runs], by, judges, safety, primary, groups, paired,
                  agreement(episodes, judges, safety), warnings, dict(sorted(judge_sources.items())), sets, ms)


# --------------------------------------------------------------------------- formatting


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _sr_cell(r: dict[str, Any]) -> str:
    if not r["n"]:
        return "-"
    cell = f"{_pct(r['rate'])} [{_pct(r['low'])}-{_pct(r['high'])}] ({r['k']}/{r['n']})"
    if r.get("judge_errors"):
        cell += f" +{r['judge_errors']} err"
    return cell


def _columns(rep: Report) -> list[tuple[str, Any]]:
    """(header, cell function) for the main table; judge-dependent columns only where data exists."""
    cols: list[tuple[str, Any]] = [(k, (lambda g, k=k: str(g["key"][k]))) for k in rep.by]
    cols.append(("episodes", lambda g: str(g["episodes"])))
    for j in rep.judges:
        cols.append((f"SR {j} % [95% CI]", lambda g, j=j: _sr_cell(g["sr"][j])))
    for src in rep.milestone_sources:
        if any(g.get(f"atp_{src}_n") for g in rep.groups):
            tag = "" if src == "oracle" else f" ({src})"
            cols.append((f"ATP{tag} %", lambda g, s=src: _pct(g[f"atp_{s}"]) + (
                f" +{g[f'atp_{s}_errors']} err" if g.get(f"atp_{s}_errors") else "")))
            cols.append((f"MSR{tag}", lambda g, s=src: _num(g[f"msr_{s}"])))
    if any(g["tail_succ"]["n"] for g in rep.groups):
        cols.append(("Task Succ %", lambda g: f"{_pct(g['task_succ']['rate'])} ({g['task_succ']['k']}/{g['task_succ']['n']})"
                     if g["task_succ"]["n"] else "-"))
        cols.append(("Tail Succ %", lambda g: f"{_pct(g['tail_succ']['rate'])} ({g['tail_succ']['k']}/{g['tail_succ']['n']})"
                     if g["tail_succ"]["n"] else "-"))
    if any(g.get("monitor_checks") for g in rep.groups):
        cols.append(("monitor errors", lambda g: str(g["monitor_errors"]) + (
            f" ({g['ran_unchecked']} ran unchecked)" if g.get("ran_unchecked") else "")))
        cols.append(("flags", lambda g: str(g["monitor_flags"])))
    if any(g.get("operator_asked") for g in rep.groups):
        cols.append(("operator allow/deny (timeouts), wait", lambda g: (
            f"{g['operator_allowed']}/{g['operator_denied']} ({g['operator_timed_out']}), {g['operator_wait_s']:.1f} s"
            if g["operator_asked"] else "-")))
    if any(g.get("reflections") for g in rep.groups):
        cols.append(("reflections (episodes)", lambda g: f"{g['reflections']} ({g['reflected_episodes']})"))
        cols.append(("unsafe tasks safe after one", lambda g: f"{g['unsafe_safe_after_reflection']}/"
                     f"{g['reflected_unsafe_judged']}" if g["reflected_unsafe_judged"] else "-"))
    cols += [*handovers.columns(rep.groups), *guarded.columns(rep.groups),
        ("halted", lambda g: str(g["halted"]) + (f" ({g['blocked']} blocked)" if g.get("blocked") else "")),
        ("unsafe", lambda g: str(g["unsafe"]) if rep.safety else "-"),
        ("steps/cap", lambda g: f"{_num(g['steps_mean'], 1)}/{_num(g['cap_mean'], 1)}"),
        ("at cap", lambda g: str(g["step_limit"])),
        ("agent err", lambda g: str(g["agent_errors"])),
        ("infra err", lambda g: str(g["infra_errors"])),
        *([("task err", lambda g: str(g["task_errors"]))] if any(g.get("task_errors") for g in rep.groups) else []),
        ("tokens/ep", lambda g: _num(g["tokens_mean"], 0)),
        ("wall s/ep", lambda g: _num(g["wall_mean_s"], 1)),
    ]
    return cols


def _paired_rows(rep: Report) -> tuple[list[str], list[list[str]]]:
    head = [*[k for k in rep.by if k != "agent"], "agent A", "agent B", "tasks", "SR A %", "SR B %", "only A", "only B",
            "McNemar p (exact)", "mid-p", "bootstrap 95% CI of SR A-B (pp)"]
    rows = []
    for p in rep.paired:
        rows.append([*[str(p["group"][k]) for k in rep.by if k != "agent"], p["agent_a"], p["agent_b"], str(p["n"]),
                     _pct(p["sr_a"]), _pct(p["sr_b"]), str(p["only_a"]), str(p["only_b"]), _num(p["p_exact"], 4),
                     _num(p["p_midp"], 4), f"[{_num(100 * p['boot_low'], 1)}, {_num(100 * p['boot_high'], 1)}]"])
    return head, rows


def _agreement_rows(rep: Report) -> tuple[list[str], list[list[str]]]:
    head = ["judge", "reference", "episodes", "agree %", "precision", "recall", "F1", "kappa", "TP/FP/FN/TN"]
    rows = [[a["judge"], a["reference"], str(a["n"]), _pct(a["agree"]), _num(a["precision"]), _num(a["recall"]),
             _num(a["f1"]), _num(a["kappa"]), f"{a['tp']}/{a['fp']}/{a['fn']}/{a['tn']}"] for a in rep.agreement]
    return head, rows


def _sources_note(rep: Report) -> str | None:
    """One sentence naming the offline judgement sets and which columns come from them."""
    if not rep.judgement_sets:
        return None
    offline = [f"{c} ({s})" if "@" not in c else c for c, s in rep.judge_sources.items() if s != LIVE]
    return (f"Offline judgement set(s) included: {', '.join(rep.judgement_sets)} (RUN/judgements/SET/results.jsonl). "
            f"Offline verdict columns: {', '.join(offline)}; a judge name given by more than one source is shown "
            "once per source as name@live / name@SET.")


def _md_text(s: str) -> str:
    """Markdown viewers render raw HTML: agent names, paths and warnings are shown as text."""
    return html.escape(s, quote=False)


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    def esc(s: str) -> str:
        return _md_text(s).replace("|", "\\|").replace("\n", " ")

    return ["| " + " | ".join(esc(h) for h in head) + " |", "|" + "---|" * len(head),
            *["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]]


def format_md(rep: Report) -> str:
    cols = _columns(rep)
    lines = [f"# Report: {_md_text(', '.join(rep.runs))}", ""]
    if rep.primary:
        lines.append(f"Primary judge (Task/Tail success, paired tests): {rep.primary}. Infrastructure errors (and task "
                     "errors: an app missing on the phone) are excluded from every rate; SR cells read rate "
                     "[95% Wilson CI] (successes/judged).")
        lines.append("")
    note = _sources_note(rep)
    if note:
        lines += [_md_text(note), ""]
    lines += _md_table([h for h, _ in cols], [[f(g) for _, f in cols] for g in rep.groups])
    if rep.paired:
        lines += ["", "## Paired comparisons (same tasks)", ""]
        lines += _md_table(*_paired_rows(rep))
    if rep.agreement:
        lines += ["", "## Judge agreement (details: `harness judge-eval`)", ""]
        lines += _md_table(*_agreement_rows(rep))
    if rep.warnings:
        lines += ["", "## Warnings", ""] + [f"- {_md_text(w)}" for w in rep.warnings]
    return "\n".join(lines) + "\n"


def csv_rows(rep: Report) -> tuple[list[str], list[list[Any]]]:
    head = [*rep.by, "episodes", "infra_errors", "task_errors", "scored"]
    for j in rep.judges:
        head += [f"sr_{j}", f"sr_{j}_low", f"sr_{j}_high", f"sr_{j}_k", f"sr_{j}_n", f"judge_errors_{j}"]
    for src in rep.milestone_sources:
        head += [f"atp_{src}", f"msr_{src}", f"atp_{src}_errors"]
    head += ["task_succ", "tail_succ", "ref_episodes", "halted", "blocked", "unsafe", "agent_errors", "step_limit", "steps_mean",
             "cap_mean", "tokens_total", "tokens_mean", "wall_total_s", "wall_mean_s", "monitor_checks",
             "monitor_errors", "ran_unchecked", "monitor_flags", "operator_asked", "operator_allowed",
             "operator_denied", "operator_timed_out", "operator_wait_s", "reflections", "reflected_episodes",
             "reflected_unsafe_judged", "unsafe_safe_after_reflection", *handovers.CSV_KEYS,
             *guarded.CSV_KEYS]
    rows = []
    for g in rep.groups:
        row: list[Any] = [g["key"][k] for k in rep.by] + [g["episodes"], g["infra_errors"], g["task_errors"], g["scored"]]
        for j in rep.judges:
            s = g["sr"][j]
            row += [s["rate"], s["low"], s["high"], s["k"], s["n"], s["judge_errors"]]
        for src in rep.milestone_sources:
            row += [g.get(f"atp_{src}"), g.get(f"msr_{src}"), g.get(f"atp_{src}_errors")]
        row += [g["task_succ"]["rate"], g["tail_succ"]["rate"], g["tail_succ"]["n"], g["halted"], g["blocked"], g["unsafe"],
                g["agent_errors"], g["step_limit"], g["steps_mean"], g["cap_mean"], g["tokens_total"], g["tokens_mean"],
                g["wall_total_s"], g["wall_mean_s"], g["monitor_checks"], g["monitor_errors"], g["ran_unchecked"],
                g["monitor_flags"], g["operator_asked"], g["operator_allowed"], g["operator_denied"],
                g["operator_timed_out"], g["operator_wait_s"], g["reflections"], g["reflected_episodes"],
                g["reflected_unsafe_judged"], g["unsafe_safe_after_reflection"], *[g[k] for k in handovers.CSV_KEYS],
                *[g[k] for k in guarded.CSV_KEYS]]
        rows.append(row)
    return head, rows


def format_csv(rep: Report) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    head, rows = csv_rows(rep)
    w.writerow(head)
    for r in rows:
        w.writerow(["" if v is None else (round(v, 6) if isinstance(v, float) else v) for v in r])
    return buf.getvalue()


def format_json(rep: Report) -> str:
    def clean(o: Any) -> Any:
        if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(rep.to_json()), ensure_ascii=False, indent=1) + "\n"


_HTML_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; script-src 'none'; base-uri 'none'; form-action 'none'"


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    e = html.escape
    out = ["<table><thead><tr>", *[f"<th>{e(h)}</th>" for h in head], "</tr></thead><tbody>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def format_html(rep: Report) -> str:
    """A standalone page (no script, no external resource); every text is escaped."""
    e = html.escape
    cols = _columns(rep)
    parts = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<meta http-equiv=\"Content-Security-Policy\" content=\"{e(_HTML_CSP)}\">",
             f"<title>{e('Report: ' + ', '.join(rep.runs))}</title>",
             "<style>body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;margin:1em 0}"
             "th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}th{background:#f3f3f3}</style></head><body>",
             f"<h1>{e('Report: ' + ', '.join(rep.runs))}</h1>"]
    if rep.primary:
        parts.append(f"<p>Primary judge: {e(rep.primary)}. Infrastructure errors (and task errors: an app "
                     "missing on the phone) are excluded from every rate; "
                     "SR cells read rate [95% Wilson CI] (successes/judged).</p>")
    note = _sources_note(rep)
    if note:
        parts.append(f"<p>{e(note)}</p>")
    parts.append(_html_table([h for h, _ in cols], [[f(g) for _, f in cols] for g in rep.groups]))
    if rep.paired:
        parts.append("<h2>Paired comparisons (same tasks)</h2>" + _html_table(*_paired_rows(rep)))
    if rep.agreement:
        parts.append("<h2>Judge agreement</h2><p>Details: <code>harness judge-eval</code>.</p>"
                     + _html_table(*_agreement_rows(rep)))
    if rep.warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{e(w)}</li>" for w in rep.warnings) + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)


FORMATTERS = {"md": format_md, "csv": format_csv, "json": format_json, "html": format_html}


def render(rep: Report, fmt: str) -> str:
    if fmt not in FORMATTERS:
        raise ReportError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return FORMATTERS[fmt](rep)
