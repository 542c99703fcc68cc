"""``harness compare RUN_A RUN_B [RUN_C...]``: runs (or bundles) of different agents side by side.

Each run is one column (A, B, C... in the order given), named by its agent. On the tasks every run
holds, each task's outcome in a run is its success rate over that run's repeats (one episode: 0 or
1), by the primary judge (``--judge``, else the first of oracle, crate, holistic, milestones), as
``harness report`` counts it (harness.report.repeats.outcome). Against run A, each other run gets:

* the **outcome matrix** with repeats as rates: per task, both succeed ``a*b``, both fail
  ``(1-a)(1-b)``, only A ``a(1-b)``, only B ``(1-a)b``, summed over tasks (with one episode per
  task, the counts of McNemar's 2x2 table);
* **McNemar's exact test** on each task's majority outcome (a task at exactly 1/2 has none), the
  sign-flip test on per-task rates, the **bootstrap interval** of SR(A) - SR(B) (tasks resampled,
  then each run's repeats) and the difference detectable at 80% power
  (:mod:`harness.report.repeat_stats`).

The terminal gets the table; the page (:mod:`harness.report.compare_page`) adds filters and, for
each task, the trajectories side by side step by step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.run_tasks import load_run_tasks
from harness.report.episodes import Episode, ReportError, load_episodes
from harness.report.repeats import outcome, paired_rates
from harness.report.tables import primary_judge


@dataclass
class RunColumn:
    letter: str
    name: str                 # as given (a folder or a bundle)
    path: Path                # the folder read
    agent: str
    episodes: dict[str, list[Episode]] = field(default_factory=dict)  # task -> its episodes, by repeat
    tasks: dict[str, Any] = field(default_factory=dict)  # task id -> Task, from the run's task files

    def rate(self, task: str, judge: str) -> tuple[int, int]:
        """(n scored repeats, successes) of ``task``."""
        outs = [o for o in (outcome(e, judge) for e in self.episodes.get(task, [])) if o is not None]
        return len(outs), sum(outs)


@dataclass
class Comparison:
    judge: str
    runs: list[RunColumn]
    tasks: list[str]                         # every run holds them
    info: dict[str, dict[str, Any]]          # task -> app, language, instruction
    pairs: list[dict[str, Any]]              # A against each other run
    warnings: list[str]

    def sr(self, col: RunColumn) -> float | None:
        """The run's SR: the mean over the tasks of each one's rate over its repeats."""
        rates = [c / n for n, c in (col.rate(t, self.judge) for t in self.tasks) if n]
        return sum(rates) / len(rates) if rates else None

    def classify(self, task: str, other: int = 1) -> str:
        """The task's outcome class for A against run ``other``: both, neither, only A, only B, mixed."""
        (na, ca), (nb, cb) = self.runs[0].rate(task, self.judge), self.runs[other].rate(task, self.judge)
        if not na or not nb:
            return "no outcome"
        a, b = ca / na, cb / nb
        if a in (0, 1) and b in (0, 1):
            return {(1, 1): "both succeed", (0, 0): "both fail", (1, 0): "only A", (0, 1): "only B"}[(int(a), int(b))]
        return "mixed"


def compare_runs(sources: list[tuple[str, Path]], *, judge: str | None = None, resamples: int = 2000,
                 seed: int = 0) -> Comparison:
    """Read each (name, folder) and compare them on the tasks they share."""
    if len(sources) < 2:
        raise ReportError("harness compare needs two runs or more")
    warnings: list[str] = []
    cols: list[RunColumn] = []
    every: list[Episode] = []
    for i, (name, path) in enumerate(sources):
        eps = load_episodes([path], warnings)
        if not eps:
            raise ReportError(f"{name}: no finished episode to compare")
        agents = sorted({e.agent for e in eps})
        col = RunColumn(chr(ord("A") + i) if i < 26 else f"R{i + 1}", name, path, ", ".join(agents),
                        tasks=load_run_tasks(path, warnings=[]))  # load_episodes warned of what is missing
        for e in sorted(eps, key=lambda e: e.repeat or 1):
            col.episodes.setdefault(e.task_key, []).append(e)
        cols.append(col)
        every += eps
    primary = primary_judge(every, judge)
    if primary is None:
        raise ReportError("no success verdicts in these runs (run them with --judge oracle, or judge them: harness judge)")
    common = sorted(set.intersection(*(set(c.episodes) for c in cols)))
    if not common:
        raise ReportError("these runs have no task in common")
    for c in cols:
        extra = set(c.episodes) - set(common)
        if extra:
            warnings.append(f"{c.name}: {len(extra)} task(s) not in every run, left out")
    info = {}
    for t in common:
        task = next((e.task for c in cols for e in c.episodes[t] if e.task is not None), None)
        info[t] = {"language": task.language if task else "unknown", "app": _app(cols, t)}
    pairs = []
    for other in cols[1:]:
        a = {t: _row(cols[0], t, primary) for t in common}
        b = {t: _row(other, t, primary) for t in common}
        test = paired_rates({}, cols[0].letter, other.letter, a, b, primary, resamples, seed)
        matrix = {"both succeed": 0.0, "both fail": 0.0, "only A": 0.0, "only B": 0.0}
        for t in common:
            if a[t]["n"] and b[t]["n"]:
                x, y = a[t]["rate"], b[t]["rate"]
                matrix["both succeed"] += x * y
                matrix["both fail"] += (1 - x) * (1 - y)
                matrix["only A"] += x * (1 - y)
                matrix["only B"] += (1 - x) * y
        pairs.append({"a": cols[0].letter, "b": other.letter, "matrix": matrix, **(test or {})})
    return Comparison(primary, cols, common, info, pairs, warnings)


def _row(col: RunColumn, task: str, judge: str) -> dict[str, Any]:
    n, c = col.rate(task, judge)
    return {"n": n, "successes": c, "rate": c / n if n else None}


def _app(cols: list[RunColumn], task: str) -> str:
    """The task's first app, from the task file (``apps``) when a run has it."""
    for c in cols:
        t = c.tasks.get(task)
        if t is not None and t.apps:
            return str(t.apps[0])
    return "unknown"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def terminal_rows(cmp: Comparison) -> tuple[list[str], list[list[str]]]:
    """The table ``harness compare`` prints: one row per run against A."""
    head = ["run", "agent", "tasks", "SR %", "both succeed", "both fail", "only A", "only B", "A-B (pp)",
            "McNemar p (majority)", "sign-flip p", "bootstrap 95% CI of A-B (pp)", "detectable at 80% power (pp)"]
    a = cmp.runs[0]
    sr = cmp.sr
    rows = [[f"A: {a.name}", a.agent, str(len(cmp.tasks)), _pct(sr(a)), *["-"] * 9]]
    for c, p in zip(cmp.runs[1:], cmp.pairs):
        m = p["matrix"]
        rows.append([f"{c.letter}: {c.name}", c.agent, str(len(cmp.tasks)), _pct(sr(c)),
                     *[f"{m[k]:.1f}".rstrip("0").rstrip(".") for k in ("both succeed", "both fail", "only A", "only B")],
                     f"{100 * p['diff']:+.1f}" if p.get("diff") is not None else "-",
                     f"{p['mcnemar_p']:.4f}" if "mcnemar_p" in p else "-",
                     f"{p['sign_flip_p']:.4f}" if "sign_flip_p" in p else "-",
                     f"[{100 * p['boot_low']:+.1f}, {100 * p['boot_high']:+.1f}]" if p.get("boot_low") is not None else "-",
                     _pct(p.get("min_detectable"))])
    return head, rows
