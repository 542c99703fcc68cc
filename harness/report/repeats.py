"""``harness report`` on repeated episodes (``harness run --repeats N``, or several runs of one
agent): per agent, the suite's success rate by repeat (mean and standard deviation over repeats),
a bootstrap interval that resamples tasks and repeats, pass@k and pass^k for k up to n, the flip
rate and the flaky tasks with their outcomes in order; per task, successes out of n; what differed
between a task's repeats (seed, sampling, the model's system_fingerprint, device, profile, build,
start screen); and the paired comparison of two agents over every repeat. The formulas and their
sources are in :mod:`harness.report.repeat_stats`.

The outcome of an episode is the primary judge's verdict, counted as the main table counts it
(an episode that ended ``needs_user`` is never a success); infrastructure and task errors and a
judge's ``judge_error`` are no outcome (``-``), left out of n. Episodes of one agent on one task
are its repeats, ordered by run (as given) then repeat; a task run once counts as one repeat. A
report whose every (agent, task) has one episode has no repeats section: it reads as before.
"""

from __future__ import annotations

import json
from itertools import combinations
from typing import Any, Callable

from harness.records import UNSCORED_STATUSES
from harness.report.episodes import Episode
from harness.report.repeat_stats import (bootstrap_paired, bootstrap_sr, mean_sd, min_detectable, pass_at_k,
                                         pass_hat_k, sign_flip_p)
from harness.report.stats import mcnemar_exact

# what could make repeats differ, in the order shown: (name, how it is read from an episode)
CONDITIONS: list[tuple[str, Callable[[Episode], Any]]] = [
    ("seed", lambda e: e.seed),
    ("sampling", lambda e: (e.conditions or {}).get("sampling")),
    ("system_fingerprint", lambda e: (e.conditions or {}).get("system_fingerprints") or None),
    ("device", lambda e: (e.conditions or {}).get("device")),
    ("profile", lambda e: (e.conditions or {}).get("profile")),
    ("build", lambda e: (e.conditions or {}).get("build")),
    ("start screen", lambda e: ((e.conditions or {}).get("start_screen") or {}).get("dhash")),
]
GROUP_KEYS = ("suite",)  # besides the agent: language and category are the task's, the same for every repeat


def outcome(e: Episode, judge: str) -> bool | None:
    """The episode's success by ``judge`` as the main table counts it; None: no outcome."""
    v = e.verdicts.get(judge)
    if e.status in UNSCORED_STATUSES or not isinstance(v, bool):
        return None
    return False if e.status == "needs_user" else v


def has_repeats(episodes: list[Episode]) -> bool:
    """Some agent ran some task more than once (in one run or over several)."""
    seen: set[tuple[str, str, str]] = set()
    for e in episodes:
        key = (e.agent, e.suite, e.task_key)
        if key in seen:
            return True
        seen.add(key)
    return False


def _series(episodes: list[Episode], by: list[str]) -> dict[tuple[tuple[str, ...], str], dict[str, list[Episode]]]:
    """(group, agent) -> task -> its episodes in order (run as given, then repeat)."""
    keys = [k for k in by if k in GROUP_KEYS]
    runs: dict[str, int] = {}
    for e in episodes:
        runs.setdefault(e.run, len(runs))
    out: dict[tuple[tuple[str, ...], str], dict[str, list[Episode]]] = {}
    for e in sorted(episodes, key=lambda e: (runs[e.run], e.repeat or 1)):
        group = tuple(getattr(e, k) for k in keys)
        out.setdefault((group, e.agent), {}).setdefault(e.task_key, []).append(e)
    return dict(sorted(out.items()))


def _letters(values: list[Any]) -> str:
    """Each repeat's value as a letter, A for the first value seen, B for the next, ...; ``?``
    where it was not recorded."""
    names: dict[str, str] = {}
    out = []
    for v in values:
        if v is None:
            out.append("?")
            continue
        key = json.dumps(v, sort_keys=True, default=str)
        names.setdefault(key, chr(ord("A") + min(len(names), 25)))
        out.append(names[key])
    return " ".join(out)


def _differs(eps: list[Episode]) -> dict[str, str]:
    """Each condition whose recorded values differ between these repeats: the repeats as letters."""
    out = {}
    for name, read in CONDITIONS:
        values = [read(e) for e in eps]
        known = {json.dumps(v, sort_keys=True, default=str) for v in values if v is not None}
        if len(known) > 1:
            out[name] = _letters(values)
    return out


def _marks(outs: list[bool | None]) -> str:
    return " ".join("-" if o is None else "S" if o else "F" for o in outs)


def _task_row(group: dict[str, str], agent: str, task: str, eps: list[Episode], judge: str) -> dict[str, Any]:
    outs = [outcome(e, judge) for e in eps]
    scored = [o for o in outs if o is not None]
    n, c = len(scored), sum(scored)
    return {"group": group, "agent": agent, "task": task, "episodes": len(eps), "n": n, "successes": c,
            "outcomes": _marks(outs), "rate": c / n if n else None,
            "pass_at": [pass_at_k(n, c, k) for k in range(1, n + 1)],
            "pass_hat": [pass_hat_k(n, c, k) for k in range(1, n + 1)],
            "flaky": 0 < c < n, "differs": _differs(eps)}


def _agent_row(group: dict[str, str], agent: str, rows: list[dict[str, Any]], by_task: dict[str, list[Episode]],
               judge: str, resamples: int, seed: int) -> dict[str, Any]:
    scored = [r for r in rows if r["n"]]
    n_max = max((r["n"] for r in scored), default=0)
    # the suite's rate in each repeat position (the r-th scored episode of every task that has one)
    by_pos: list[list[bool]] = [[] for _ in range(n_max)]
    for t, eps in by_task.items():
        for i, o in enumerate(o for o in (outcome(e, judge) for e in eps) if o is not None):
            by_pos[i].append(o)
    sr_by_repeat = [sum(p) / len(p) for p in by_pos if p]
    mean, sd = mean_sd(sr_by_repeat)
    boot = bootstrap_sr([(r["n"], r["successes"]) for r in scored], resamples=resamples, seed=seed)
    multi = [r for r in scored if r["n"] >= 2]
    pass_at, pass_hat, pass_tasks = [], [], []
    for k in range(1, n_max + 1):
        have = [r for r in scored if r["n"] >= k]
        pass_tasks.append(len(have))
        pass_at.append(sum(r["pass_at"][k - 1] for r in have) / len(have))
        pass_hat.append(sum(r["pass_hat"][k - 1] for r in have) / len(have))
    differ: dict[str, int] = {}
    for r in rows:
        for name in r["differs"]:
            differ[name] = differ.get(name, 0) + 1
    return {"group": group, "agent": agent, "tasks": len(scored), "repeats": n_max,
            "repeats_min": min((r["n"] for r in scored), default=0),
            "episodes": sum(r["episodes"] for r in rows), "no_outcome": sum(r["episodes"] - r["n"] for r in rows),
            "sr_by_repeat": sr_by_repeat, "sr_mean": mean, "sr_sd": sd,
            "boot_low": boot[0] if boot else None, "boot_high": boot[1] if boot else None,
            "pass_at": pass_at, "pass_hat": pass_hat, "pass_tasks": pass_tasks,
            "flipped": sum(1 for r in multi if r["flaky"]), "flip_tasks": len(multi),
            "flip_rate": (sum(1 for r in multi if r["flaky"]) / len(multi)) if multi else None,
            "flaky": [r["task"] for r in rows if r["flaky"]], "differs": differ}


def paired_rates(group: dict[str, str], a: str, b: str, ra: dict[str, dict[str, Any]], rb: dict[str, dict[str, Any]],
            judge: str, resamples: int, seed: int) -> dict[str, Any] | None:
    common = sorted(t for t in set(ra) & set(rb) if ra[t]["n"] and rb[t]["n"])
    if not common:
        return None
    pa = [ra[t]["rate"] for t in common]
    pb = [rb[t]["rate"] for t in common]
    diffs = [x - y for x, y in zip(pa, pb)]
    # McNemar on each task's majority outcome; a task whose rate is exactly 1/2 has no majority
    major = [(x > 0.5, y > 0.5) for x, y in zip(pa, pb) if x != 0.5 and y != 0.5]
    only_a = sum(1 for x, y in major if x and not y)
    only_b = sum(1 for x, y in major if y and not x)
    boot = bootstrap_paired([(ra[t]["n"], ra[t]["successes"]) for t in common],
                            [(rb[t]["n"], rb[t]["successes"]) for t in common], resamples=resamples, seed=seed)
    return {"group": group, "agent_a": a, "agent_b": b, "judge": judge, "tasks": len(common),
            "sr_a": sum(pa) / len(pa), "sr_b": sum(pb) / len(pb), "diff": sum(diffs) / len(diffs),
            "majority_tasks": len(major), "majority_ties": len(common) - len(major),
            "only_a": only_a, "only_b": only_b, "mcnemar_p": mcnemar_exact(only_a, only_b),
            "sign_flip_p": sign_flip_p(diffs, resamples=resamples, seed=seed),
            "boot_low": boot[0] if boot else None, "boot_high": boot[1] if boot else None,
            "min_detectable": min_detectable(diffs)}


def build_repeats(episodes: list[Episode], by: list[str], judge: str | None, *, resamples: int = 2000,
                  seed: int = 0) -> dict[str, Any] | None:
    """The repeats section's data (JSON-ready), or None when no agent ran a task twice."""
    if judge is None or not has_repeats(episodes):
        return None
    keys = [k for k in by if k in GROUP_KEYS]
    agents, tasks, by_agent = [], [], {}
    for (group_key, agent), by_task in _series(episodes, by).items():
        group = dict(zip(keys, group_key))
        rows = [_task_row(group, agent, t, eps, judge) for t, eps in sorted(by_task.items())]
        tasks += rows
        agents.append(_agent_row(group, agent, rows, by_task, judge, resamples, seed))
        by_agent.setdefault(group_key, {})[agent] = {r["task"]: r for r in rows}
    paired = []
    if "agent" in by:
        for group_key, per in by_agent.items():
            for a, b in combinations(sorted(per), 2):
                p = paired_rates(dict(zip(keys, group_key)), a, b, per[a], per[b], judge, resamples, seed)
                if p is not None:
                    paired.append(p)
    return {"judge": judge, "group_keys": keys, "agents": agents, "tasks": tasks, "paired": paired}


# --------------------------------------------------------------------------- written out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _pp(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}"


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def _at_k(a: dict[str, Any], key: str, k: int) -> str:
    """An agent's pass@k or pass^k, with the number of tasks it is over when some had fewer than k."""
    if k > a["repeats"]:
        return "-"
    fewer = f" ({a['pass_tasks'][k - 1]} tasks)" if a["pass_tasks"][k - 1] < a["tasks"] else ""
    return _pct(a[key][k - 1]) + fewer


def _differs_text(d: dict[str, str]) -> str:
    return "; ".join(f"{k}: {v}" for k, v in d.items() if k != "seed") or "-"


def tables(rep: dict[str, Any]) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(title, explanation, header, rows) of each table of the section, for every format."""
    keys = rep["group_keys"]
    n = max((a["repeats"] for a in rep["agents"]), default=0)
    ks = range(1, n + 1)
    head = [*keys, "agent", "tasks", "repeats", "SR % by repeat", "SR % mean ± sd", "bootstrap 95% CI",
            *[f"pass@{k} %" for k in ks], *[f"pass^{k} %" for k in ks], "flip rate % (flipped/tasks)", "flaky"]
    rows = []
    for a in rep["agents"]:
        reps = f"{a['repeats']}" + (f" (min {a['repeats_min']})" if a["repeats_min"] != a["repeats"] else "")
        rows.append([*[str(a["group"][k]) for k in keys], a["agent"], str(a["tasks"]), reps,
                     " ".join(_pct(x) for x in a["sr_by_repeat"]),
                     f"{_pct(a['sr_mean'])} ± {_pct(a['sr_sd'])}", f"[{_pct(a['boot_low'])}-{_pct(a['boot_high'])}]",
                     *[_at_k(a, "pass_at", k) for k in ks], *[_at_k(a, "pass_hat", k) for k in ks],
                     f"{_pct(a['flip_rate'])} ({a['flipped']}/{a['flip_tasks']})", str(len(a["flaky"]))])
    out = [("Repeats (judge: " + rep["judge"] + ")",
            "Every repeat of a task is an episode of the table above (its Wilson interval treats them as "
            "independent); here they are counted as repeats. SR by repeat: the suite's rate in each repeat; mean "
            "and standard deviation over repeats; the bootstrap interval resamples tasks, then each task's repeats "
            "(n: the scored repeats; infrastructure, task and judge errors are no outcome). pass@k: unbiased estimator of Chen et al. 2021, 1 - C(n-c,k)/C(n,k); pass^k: tau-bench "
            "(Yao et al. 2024), C(c,k)/C(n,k); both averaged over the tasks with at least k repeats. Flip rate: "
            "tasks whose repeats disagree, of the tasks with two or more.", head, rows)]
    flaky = [t for t in rep["tasks"] if t["flaky"]]
    out.append(("Flaky tasks (successes between 0 and n, not either)",
                "Outcomes in order (S success, F failure, - no outcome); what else differed between the repeats, "
                "each repeat as a letter (A: the first value seen). Every repeat has its own seed, derived from "
                "the run's --seed.",
                [*keys, "agent", "task", "successes/n", "outcomes", "differs in"],
                [[*[str(t["group"][k]) for k in keys], t["agent"], t["task"], f"{t['successes']}/{t['n']}",
                  t["outcomes"], _differs_text(t["differs"])] for t in flaky]))
    varied = [a for a in rep["agents"] if any(k != "seed" for k in a["differs"])]
    out.append(("What differed between repeats",
                "Tasks whose repeats differed in each recorded condition (besides the seed): a flake on another "
                "phone, build or start screen is not a flake of the agent alone.",
                [*keys, "agent", *[name for name, _ in CONDITIONS if name != "seed"]],
                [[*[str(a["group"][k]) for k in keys], a["agent"],
                  *[str(a["differs"].get(name, 0)) for name, _ in CONDITIONS if name != "seed"]] for a in varied]))
    out.append(("Per task", "Successes out of n scored repeats, outcomes in order, pass@k and pass^k.",
                [*keys, "agent", "task", "successes/n", "outcomes", *[f"pass@{k}" for k in ks],
                 *[f"pass^{k}" for k in ks]],
                [[*[str(t["group"][k]) for k in keys], t["agent"], t["task"], f"{t['successes']}/{t['n']}",
                  t["outcomes"], *[f"{t['pass_at'][k - 1]:.2f}" if k <= t["n"] else "-" for k in ks],
                  *[f"{t['pass_hat'][k - 1]:.2f}" if k <= t["n"] else "-" for k in ks]] for t in rep["tasks"]]))
    if rep["paired"]:
        out.append(("Paired comparisons over repeats",
                    "Every repeat counts: each task's success rate over its repeats. Test: the paired sign-flip "
                    "(randomisation) test of the mean per-task difference of rates; McNemar's exact test on each "
                    "task's majority outcome is shown beside it (tasks at exactly 1/2 have no majority and are "
                    "left out of it). Bootstrap: tasks resampled, then each agent's repeats. Detectable: the "
                    "smallest difference this design (these tasks, this spread) finds with 80% power at "
                    "two-sided 0.05, (1.96 + 0.84) sd(d) / sqrt(tasks).",
                    [*keys, "agent A", "agent B", "tasks", "SR A %", "SR B %", "A-B (pp)", "sign-flip p",
                     "majority only A/only B", "McNemar p (majority)", "bootstrap 95% CI of A-B (pp)",
                     "detectable at 80% power (pp)"],
                    [[*[str(p["group"][k]) for k in keys], p["agent_a"], p["agent_b"], str(p["tasks"]),
                      _pct(p["sr_a"]), _pct(p["sr_b"]), _pp(p["diff"]), _p(p["sign_flip_p"]),
                      f"{p['only_a']}/{p['only_b']}" + (f" ({p['majority_ties']} ties)" if p["majority_ties"] else ""),
                      _p(p["mcnemar_p"]), f"[{_pp(p['boot_low'])}, {_pp(p['boot_high'])}]",
                      _pct(p["min_detectable"])] for p in rep["paired"]]))
    return out


def section_md(rep: dict[str, Any], md_table: Callable[[list[str], list[list[str]]], list[str]],
               md_text: Callable[[str], str]) -> list[str]:
    lines: list[str] = []
    for i, (title, note, head, rows) in enumerate(tables(rep)):
        if not rows and i:
            continue
        lines += ["", ("## " if i == 0 else "### ") + md_text(title), "", md_text(note), ""]
        lines += md_table(head, rows)
    return lines


def section_html(rep: dict[str, Any], html_table: Callable[[list[str], list[list[str]]], str],
                 esc: Callable[[str], str]) -> str:
    parts = []
    for i, (title, note, head, rows) in enumerate(tables(rep)):
        if not rows and i:
            continue
        tag = "h2" if i == 0 else "h3"
        parts.append(f"<{tag}>{esc(title)}</{tag}><p>{esc(note)}</p>" + html_table(head, rows))
    return "".join(parts)
