"""``harness report``: per-group tables of one or more run folders, read from the records only.
The episodes are read by :mod:`harness.report.episodes`, counted here (:func:`build_report`), and
written out by :mod:`harness.report.table_formats`.

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
  safety verdict true, counted by :func:`harness.core.verdicts.counts_unsafe`: never through a step that
  never ran), agent errors, step use against the
  cap, tokens and wall time; reflections (``--monitor-mode reflect``) and the unsafe tasks finished
  safely after one.

Offline verdicts: besides the live judges' verdicts in ``results.jsonl``, every judgement set that
``harness judge`` wrote (``RUN/judgements/<set>/results.jsonl``, read with
:func:`harness.core.verdicts.read_sources`, the reader ``harness judge-eval`` uses) adds its verdicts and
details to the episodes with the same task id. Judge names follow judge-eval's convention
(:func:`harness.core.verdicts.judge_column`): a name that only one source gave keeps its name; a name given by more than
one source (live and a set, or two sets) becomes ``name@live`` / ``name@<set>``. A line of a set
whose task id is not in the run is left out with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Iterable

from harness.core.usage import role_tokens
from harness.core.verdicts import LIVE, episode_unsafe, is_safety_judge, judge_base
from harness.records import UNSCORED_STATUSES, distinct_runs
from harness.report import guarded, handovers
from harness.report.episodes import Episode, ReportError, load_episodes
from harness.report.errors import any_judged, model_error_reasons, safety_tally
from harness.report.repeats import build_repeats, has_repeats
from harness.report.stats import cohen_kappa, compare_paired, wilson

GROUP_KEYS = ("agent", "suite", "language", "category")
# success judges shown first, in this order; others follow alphabetically
JUDGE_ORDER = ("oracle", "crate", "holistic", "milestones")
MILESTONE_SOURCES = ("oracle", "milestones")


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
    # what a safety judge could not judge is counted beside what it found (harness.report.errors):
    # a judge that judged nothing has no unsafe count (None, shown as —), never 0
    tally = safety_tally(((e.verdicts, e.details) for e in scored), safety)
    out["unsafe"] = sum(1 for e in scored if episode_unsafe(e.verdicts, e.details, safety)) \
        if any_judged(tally) or not safety else None
    out["unsafe_by_judge"] = {s: t["unsafe"] for s, t in tally.items()}
    out["unsafe_judged_by_judge"] = {s: t["judged"] for s, t in tally.items()}
    out["unsafe_errors_by_judge"] = {s: t["judge_errors"] for s, t in tally.items()}
    out["agent_errors"] = sum(1 for e in scored if e.status == "agent_error")
    out["model_errors"] = sum(1 for e in rows if e.status == "model_error")  # the endpoint failed: not scored
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
    (:func:`harness.core.verdicts.episode_unsafe`)."""
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
    repeats: dict[str, Any] | None = None  # repeated episodes (harness.report.repeats); None: each task once
    model_errors: list[dict[str, Any]] = field(default_factory=list)  # episodes the agent's model could not play

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "by": self.by, "judges": self.judges, "safety_judges": self.safety,
                "primary_judge": self.primary, "judgement_sets": self.judgement_sets,
                "judge_sources": self.judge_sources, "groups": self.groups, "paired": self.paired,
                "agreement": self.agreement, "warnings": self.warnings, "model_errors": self.model_errors,
                **({"repeats": self.repeats} if self.repeats is not None else {})}


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
    # with repeats, the paired comparison uses every repeat (harness.report.repeats), not the first
    repeated = has_repeats(episodes)
    paired = paired_comparisons(episodes, by, primary, resamples=resamples, seed=seed, warnings=warnings) \
        if "agent" in by and not repeated else []
    judge_sources = {col: src for e in episodes for col, src in e.sources.items()}  # one source per column
    sets = sorted(set(judge_sources.values()) - {LIVE})
    return Report([str(r) for r in runs], by, judges, safety, primary, groups, paired,
                  agreement(episodes, judges, safety), warnings, dict(sorted(judge_sources.items())), sets, ms,
                  build_repeats(episodes, by, primary, resamples=resamples, seed=seed) if repeated else None,
                  [x for e in episodes for x in model_error_reasons([e], e.run)])
