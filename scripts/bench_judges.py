"""Benchmark: how long the live judges make you wait, in units of one model call.

A scripted OpenAI-compatible server (the tests' double) answers every call after a fixed delay L.
An agent that "thinks" for A (default 2 L) per step replays a simulated task's reference (default
wallet_pay_rent_safe: N = 10 actions, then the agent's finish) on the in-process simulated phone.
Measured, as medians over --repeat episodes:

  verdict wait   wall time of a judge's finish() after the last step, / L. CRATE's step calls run
                 while the agent works, so only the aggregation call is left: about 1 L, where
                 judging the whole trajectory after the episode step by step would take N + 1 L
                 (or 2 L with every step call in parallel).
  step added     time the runner spends in the monitor phase per step (its own "monitors" timing)
                 / L: the CRATE-S gate checks each action before it runs (about 1 L per step; the
                 agent's finish is not checked); async mode checks beside it (about 0).
  calls          model calls per episode (CRATE: N step calls + 1 aggregation; with the gate on,
                 the CRATE-S judge reuses the gate's step calls through the evidence cache).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.replay import ReplayAgent, ReplayConfig  # noqa: E402
from harness.model import ModelConfig  # noqa: E402
from harness.records import RunWriter  # noqa: E402
from harness.runner import run_episode  # noqa: E402
from harness.tasks import load_suite  # noqa: E402
from judges.crate import CRATE, CRATE_S, CrateConfig, CrateJudge  # noqa: E402
from judges.holistic import HolisticConfig, HolisticJudge  # noqa: E402
from judges.monitor import CrateSMonitor, CrateSMonitorConfig  # noqa: E402
from tests.fakes.local_device import LocalSimDevice  # noqa: E402
from tests.fakes.model_server import Reply, ScriptedModelServer, request_text  # noqa: E402


class Thinking:
    """The reference replay of a task, thinking for ``delay`` seconds before each step."""

    name = "bench-replay"

    def __init__(self, delay: float):
        self.inner, self.delay = ReplayAgent(ReplayConfig()), delay

    def spec(self):
        return {"name": self.name}

    def reset(self, ctx):
        self.inner.reset(ctx)

    def step(self, obs):
        time.sleep(self.delay)
        return self.inner.step(obs)


def reply(req):
    text = request_text(req)
    if '"clues"' in text:
        return json.dumps({"clues": "launcher home", "effect": "nothing happens"})
    if '"risky"' in text:
        return json.dumps({"risky": False, "category": None, "reason": "harmless tap", "score": 0.01})
    if '"conditions"' in text:
        return json.dumps({"conditions": [], "success": False, "reason": "nothing was done"})
    if '"unsafe"' in text:
        return json.dumps({"unsafe": False, "first_unsafe_step": None, "category": None, "reason": "harmless"})
    return json.dumps({"reason": "nothing was done", "result": 0})


def timed(judge):
    """Wrap a judge so its finish() wall time is measured from outside."""
    inner = judge.finish

    def finish(end):
        t0 = time.monotonic()
        out = inner(end)
        judge.finish_wall = time.monotonic() - t0
        return out

    judge.finish = finish
    return judge


def episode(task, delay, observers=(), monitors=()):
    with tempfile.TemporaryDirectory() as tmp:
        w = RunWriter(Path(tmp) / "run")
        ep = w.start_episode(task.id)
        t0 = time.monotonic()
        out = run_episode(task, Thinking(delay), LocalSimDevice(), ep, observers=list(observers), monitors=list(monitors))
        wall = time.monotonic() - t0
        w.close()
    return out, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--L", type=float, default=0.25, help="seconds per model call (default 0.25)")
    ap.add_argument("--agent", type=float, default=2.0, help="agent think time per step, in units of L (default 2)")
    ap.add_argument("--task", default="wallet_pay_rent_safe", help="simulated task whose reference is replayed")
    ap.add_argument("--repeat", type=int, default=3, help="episodes per configuration (median reported)")
    args = ap.parse_args()
    L = args.L
    delay = args.agent * L
    task = load_suite(ROOT / "tasks" / "sim").by_id()[args.task]
    n = sum(1 for r in task.reference or [] if r.type != "finish")
    rows: list[dict] = []
    with ScriptedModelServer(lambda req: Reply(reply(req), delay_s=L)) as server:
        episodes = iter(range(1_000_000))
        current = {"model": "bench"}

        def cfg():
            # a model name per episode: the process-wide evidence cache must not carry step calls
            # from one repeat to the next (within an episode, the gate and the judges share it)
            return ModelConfig(base_url=server.base_url, model=current["model"], max_retries=0, timeout_s=30,
                               concurrency=32)

        def runs(make):
            res = []
            for _ in range(args.repeat):
                current["model"] = f"bench-{next(episodes)}"
                before = len(server.requests)
                observers, monitors = make()
                out, wall = episode(task, delay, observers, monitors)
                res.append({"out": out, "wall": wall, "calls": len(server.requests) - before,
                            "finish": {o.name: getattr(o, "finish_wall", None) for o in observers}})
            return res

        base = runs(lambda: ([], []))
        steps = base[0]["out"].steps
        base_step = statistics.median(r["wall"] / r["out"].steps for r in base)

        def add_row(name, res, judge=None, monitor=False):
            row = {"configuration": name, "calls_per_episode": statistics.median(r["calls"] for r in res)}
            if judge:
                waits = [r["finish"][judge] for r in res]
                row["verdict_wait_s"] = round(statistics.median(waits), 4)
                row["verdict_wait_L"] = round(statistics.median(waits) / L, 3)
                row["verdicts"] = sorted({str(r["out"].verdicts.get(judge)) for r in res})
            if monitor:  # the runner's own timing of the monitor phase: immune to the agent's and the phone's noise
                per = statistics.median(r["out"].timings.get("monitors", 0.0) / r["out"].steps for r in res)
                row["step_added_s"] = round(per, 4)
                row["step_added_L"] = round(per / L, 3)
                row["per_checked_action_L"] = round(per * steps / n / L, 3)  # the finish is not checked
            rows.append(row)

        add_row("crate", runs(lambda: ([timed(CrateJudge(CrateConfig(model=cfg()), CRATE))], [])), judge="crate")
        add_row("crate-s", runs(lambda: ([timed(CrateJudge(CrateConfig(model=cfg()), CRATE_S))], [])), judge="crate-s")
        add_row("holistic", runs(lambda: ([timed(HolisticJudge(HolisticConfig(model=cfg())))], [])), judge="holistic")
        add_row("crate + crate-s + gate monitor",
                runs(lambda: ([timed(CrateJudge(CrateConfig(model=cfg()), CRATE)),
                               timed(CrateJudge(CrateConfig(model=cfg()), CRATE_S))],
                              [CrateSMonitor(CrateSMonitorConfig(model=cfg(), mode="gate"))])),
                judge="crate", monitor=True)
        add_row("gate monitor alone", runs(lambda: ([], [CrateSMonitor(CrateSMonitorConfig(model=cfg(), mode="gate"))])),
                monitor=True)
        add_row("async monitor alone", runs(lambda: ([], [CrateSMonitor(CrateSMonitorConfig(model=cfg(), mode="async"))])),
                monitor=True)
    rows = [{k: v for k, v in r.items() if v is not None} for r in rows]
    summary = {"task": task.id, "L_s": L, "agent_think_s": delay, "actions": n, "steps": steps, "repeat": args.repeat,
               "baseline_step_s": round(base_step, 4),
               "sequential_after_episode_L": n + 1, "parallel_after_episode_L": 2, "rows": rows}
    print(f"judge latency benchmark: {task.id}, L = {L:g} s per model call, agent {delay:g} s per step, "
          f"{n} actions + finish, median of {args.repeat}")
    print(f"  baseline step wall without judges: {base_step * 1000:.0f} ms")
    print(f"  {'configuration':<34} {'calls':>6} {'verdict wait':>14} {'step added':>12} {'per action':>12}")
    for r in rows:
        wait = f"{r['verdict_wait_L']:.2f} L" if "verdict_wait_L" in r else "-"
        added = f"{r['step_added_L']:.2f} L" if "step_added_L" in r else "-"
        per_action = f"{r['per_checked_action_L']:.2f} L" if "per_checked_action_L" in r else "-"
        print(f"  {r['configuration']:<34} {r['calls_per_episode']:>6} {wait:>14} {added:>12} {per_action:>12}")
    print(f"  (judging after the episode instead: {n + 1} L one call at a time, 2 L with all step calls in parallel)")
    (ROOT / "bench").mkdir(exist_ok=True)
    (ROOT / "bench" / "judges.json").write_text(json.dumps(summary, indent=1))
    crate = next(r for r in rows if r["configuration"] == "crate")
    if crate["verdict_wait_L"] > 1.3:
        print(f"  NOTE: CRATE verdict wait {crate['verdict_wait_L']:.2f} L is above the 1.3 L target "
              "(a loaded machine, or an agent faster than one model call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
