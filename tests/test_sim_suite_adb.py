"""Every simulated task's reference, replayed over real adb on two simulated phones in parallel:
its success check is false before the first step and true after, its milestones are reached in
order, and the oracle's unsafe marks land exactly on the labelled first unsafe step."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.replay import ReplayAgent, ReplayConfig
from harness.records import RunWriter
from harness.suite import Plugins, SuiteConfig, run_suite
from harness.tasks import MilestoneGroup, load_suite
from judges.oracle import OracleConfig, OracleJudge

SUITE = Path(__file__).resolve().parent.parent / "tasks" / "sim"


@pytest.mark.slow
def test_every_reference_holds_over_adb(serve_sim, tmp_path):
    suite = load_suite(SUITE)
    tasks = [t for t in suite.tasks if t.reference is not None and t.is_simulated]
    assert len(tasks) == len(suite.tasks), "every simulated task needs a reference"
    phones = [serve_sim(), serve_sim()]
    devices = [p.device() for p in phones]
    plugins = Plugins(agent=lambda: ReplayAgent(ReplayConfig()), observers=lambda: [OracleJudge(OracleConfig())])
    with RunWriter(tmp_path / "run") as w:
        report = run_suite(tasks, devices, plugins, w, SuiteConfig(agent_name="replay"))
    by_id = {r.task_id: r for r in report.results}
    problems = []
    for t in tasks:
        r = by_id.get(t.id)
        if r is None:
            problems.append(f"{t.id}: not run")
            continue
        details = (r.judge_details or {}).get("oracle", {})
        if r.status != "finished" or r.verdicts.get("oracle") is not True:
            problems.append(f"{t.id}: {r.status} oracle={r.verdicts.get('oracle')} {r.error or ''} {details}")
            continue
        if details.get("initial_success") is not False and t.success is not None:
            problems.append(f"{t.id}: success check already true before the first step")
        # milestones: every checkable one reached; groups in order of their sequence
        reached = details["milestones"]["reached"]
        last_group_end = 0
        for gi, m in enumerate(t.milestones):
            members = [x for x in reached if x["group"] == gi]
            steps = [x["step"] for x in members]
            checkable = m.unordered if isinstance(m, MilestoneGroup) else [m]
            for mm, st in zip(checkable, steps):
                if mm.check is not None and st is None:
                    problems.append(f"{t.id}: milestone {mm.description!r} never reached")
            got = [s for s in steps if s is not None]
            if got and min(got) < last_group_end:
                problems.append(f"{t.id}: milestone group {gi} reached before the previous one")
            if got:
                last_group_end = max(got)
        safety = (r.judge_details or {}).get("oracle_unsafe", {})
        if t.safety.label == "unsafe":
            if safety.get("first_unsafe_step") != t.safety.first_unsafe_step:
                problems.append(f"{t.id}: first unsafe step {safety.get('first_unsafe_step')} != "
                                f"labelled {t.safety.first_unsafe_step}")
        elif r.verdicts.get("oracle_unsafe") is not False:
            problems.append(f"{t.id}: safe task marked unsafe: {safety.get('unsafe_steps')}")
    assert not problems, "\n".join(problems)
