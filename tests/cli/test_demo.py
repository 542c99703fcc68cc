"""`harness demo`: which runs it makes from its flags, and the judged run end to end against the
scripted model server: crate and crate-s verdicts for every episode and the gate halting the unsafe
tasks before their first action runs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.demo import demo_runs, online_judging_hint, pick_tasks
from harness.records import iter_steps, read_results
from harness.core.tasks import load_suite
from tests.fakes.model_server import Reply, ScriptedModelServer, request_text
from tests.judges.helpers import good_reply, kind_of

ROOT = Path(__file__).resolve().parents[2]


def _args(**kw):
    base = dict(judge_base_url=None, judge_model=None, model_base_url=None, model_name=None, agent="uitars")
    return argparse.Namespace(**{**base, **kw})


def test_runs_follow_the_flags():
    clean, perturbed = pick_tasks(load_suite(ROOT / "tasks" / "sim").tasks)
    assert [n for n, _, _ in demo_runs(_args(), clean, perturbed)] == ["clean", "perturbed"]
    assert "--judge-base-url URL --judge-model NAME" in online_judging_hint(_args())
    judged = demo_runs(_args(judge_base_url="http://j/v1", judge_model="J"), clean, perturbed)
    name, tasks, argv = judged[-1]
    assert name == "judged" and tasks == clean and "--monitor-mode" in argv and argv[argv.index("--judge") + 1] == \
        "oracle,crate,crate-s" and argv[argv.index("--agent") + 1] == "replay"
    assert online_judging_hint(_args(judge_base_url="http://j/v1", judge_model="J")) is None
    both = demo_runs(_args(judge_base_url="http://j/v1", judge_model="J", model_base_url="http://m/v1",
                           model_name="M", agent="qwen"), clean, perturbed)[-1][2]
    assert both[both.index("--agent") + 1] == "qwen" and both[both.index("--model") + 1] == "M"
    assert demo_runs(_args(model_base_url="http://m/v1", model_name="M"), clean, perturbed)[-1][0] == "model"
    with pytest.raises(SystemExit, match="go together"):
        demo_runs(_args(judge_base_url="http://j/v1"), clean, perturbed)


@pytest.mark.slow
def test_demo_with_a_judge_endpoint_judges_online_and_gates(tmp_path):
    suite = load_suite(ROOT / "tasks" / "sim")
    unsafe = {t.instruction for t in suite.tasks if t.safety.label == "unsafe"}

    def responder(req):
        if kind_of(req) == "crate_s_step" and any(u in request_text(req) for u in unsafe):
            return Reply(json.dumps({"reason": "acts on an unsafe request", "category": "Over-Automation",
                                     "risky": True, "score": 0.9}))
        return Reply(good_reply(req))

    out = tmp_path / "demo"
    with ScriptedModelServer(responder) as s:
        p = subprocess.run([sys.executable, "-m", "harness.cli", "demo", "--phones", "1", "--out", str(out),
                            "--judge-base-url", s.base_url, "--judge-model", "judge-m"],
                           cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env={k: v for k, v in os.environ.items() if k != "ANDROID_ADB_SERVER_PORT"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "demo: judged run of" in p.stdout and "to see online judging" not in p.stdout
    assert "model usage:" in p.stdout and "monitors" in p.stdout.split("model usage:")[-1].splitlines()[0]
    rows = read_results(out / "judged")
    assert rows and all(set(r.verdicts) >= {"oracle", "crate", "crate-s"} for r in rows)
    halted = [r for r in rows if r.status == "halted"]
    assert {r.task_id for r in halted} == {t.id for t in suite.tasks if t.instruction in unsafe and t.id in
                                           {x.task_id for x in rows}}
    for r in halted:
        assert r.halt.step == 1 and r.steps == 0 and r.verdicts["oracle_unsafe"] is False  # nothing unsafe ran
        assert f"halted: {r.task_id} at step 1 (blocked before it ran) by crate-s" in p.stdout
        assert [st.executed for st in iter_steps(out / "judged" / "episodes" / r.task_id)] == [False]
