"""Benchmark: how long the live judges make you wait, in units of one model call.

A scripted OpenAI-compatible server (the tests' double) answers every call after a fixed delay L.
An agent that "thinks" for A (default 2 L) per step replays a simulated task's reference (default
wallet_pay_rent_safe: N = 10 actions, then the agent's finish) on the in-process simulated phone.
Measured, as medians over --repeat episodes:

  verdict wait   wall time from the last step to the last verdict, / L: every judge's finish()
                 runs at once, so the wait is the slowest judge's. CRATE's step calls and the
                 milestone search run while the agent works, so about one call is left (1 L), where
                 the same judges finished one after another wait the sum of theirs.
  per action     time the runner spends on monitors per checked action (its own "monitors" and
                 "monitor_wait" timings) / L: the CRATE-S gate checks each action before it runs
                 (about 1 L); async mode checks beside it and the agent's next call (about 0).
                 Under load (two slots, evidence calls of 3 L in flight, an agent that answers at
                 once) the gate keeps about 1 L because gate checks go first and the evidence calls
                 leave a slot free; in one FIFO line with them it waits for them (the comparison row).
  calls          model calls per episode (CRATE: N step calls + 1 aggregation; with the gate on,
                 the CRATE-S judge reuses the gate's step calls through the evidence cache).
  async, agent as fast as the check: the async monitor's check starts as the action runs and
                 is waited for before the next one, so with the default agent (2 L) it hides in the
                 agent's spare L and in the simulated phone's device time (rendering a 1080x2400
                 screen: about a second a step on a loaded machine, several L): near 0 by
                 construction. These rows take both away: an agent that thinks L, as long as the
                 check, on "quick frames" (the phone's screen rendered once, each screenshot a
                 distinct file of it: device time next to nothing, reported), so what the monitor
                 costs beyond its model call shows (target <= 0.2 L). With an agent of L/2, about
                 0.5 L per step is the check's own wait: reported, no target; it shows that the
                 rows can see a wait (async cannot hide a check longer than a step).

Targets (issue 16): verdict wait with crate, crate-s, holistic and milestones <= 1.3 L; gate
latency per action with evidence calls in flight <= 1.1 L; async latency added per step <= 0.2 L,
with the default agent and with one as fast as the check (issue 31).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_rows import bench_dir  # noqa: E402  (scripts/, beside this file)

from agents.replay import ReplayAgent, ReplayConfig  # noqa: E402
from harness.live.records import EpisodeLive  # noqa: E402
from harness.client.config import ModelConfig  # noqa: E402
from harness.client.slots import Priority  # noqa: E402
from harness.records import RunWriter  # noqa: E402
from harness.run.runner import run_episode  # noqa: E402
from harness.core.tasks import load_suite  # noqa: E402
from judges.crate import CRATE, CRATE_S, CrateConfig, CrateJudge  # noqa: E402
from judges.holistic import HolisticConfig, HolisticJudge  # noqa: E402
from judges.milestones import MilestoneJudge, MilestonesConfig, flatten  # noqa: E402
from judges.monitor import CrateSMonitor, CrateSMonitorConfig  # noqa: E402
from tests.fakes.distinct_png import tagged  # noqa: E402
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


class QuickFrames(LocalSimDevice):
    """The in-process phone with its screen rendered once: every screenshot is that frame as a
    file of its own (a tag added: no cache keyed on bytes serves it), so a step's device time is
    next to nothing and an async check has only the agent's think to hide in."""

    def __init__(self):
        super().__init__()
        self.frame, self.shots = None, 0

    def screenshot(self):
        if self.frame is None:
            self.frame = self.phone.screencap_png()
        self.shots += 1
        return tagged(self.frame, f"frame {self.shots}")


def reply(req, truth=None):
    """A valid answer for every judge call; milestone k holds at step ``truth[k]`` (a spread over
    the run), so the milestone search advances as the steps arrive."""
    text = request_text(req)
    if '"milestones"' in text:
        m = re.search(r"Steps (\d+) to (\d+)", text)
        first, last = (int(x) for x in m.groups()) if m else (1, 1)
        items = [json.loads(x) for x in re.findall(r'^\{"idx".*\}$', text, flags=re.M)]
        out = []
        for it in items:
            at = (truth or {}).get(it["sub-target"])
            done = at is not None and first <= at <= last
            out.append({"idx": it["idx"], "evidence": "seen" if done else "not yet", "last_step": at if done else None,
                        "done": done})
        return json.dumps({"milestones": out})
    if '"clues"' in text:
        return json.dumps({"clues": "launcher home", "effect": "nothing happens"})
    if '"risky"' in text:
        return json.dumps({"reason": "harmless tap", "category": None, "risky": False, "score": 0.01})
    if '"conditions"' in text:
        return json.dumps({"conditions": [], "reason": "nothing was done", "success": False})
    if '"unsafe"' in text:
        return json.dumps({"reason": "harmless", "first_unsafe_step": None, "category": None, "unsafe": False})
    return json.dumps({"reason": "nothing was done", "result": 0})


class FifoGate(CrateSMonitor):
    """The gate as it was before priorities: its checks wait in the same line as the judges'."""

    def start(self, ctx):
        super().start(ctx)
        self.asker = dataclasses.replace(self.asker, priority=Priority.LIVE)


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


def episode(task, delay, observers=(), monitors=(), device=LocalSimDevice):
    with tempfile.TemporaryDirectory() as tmp:
        w = RunWriter(Path(tmp) / "run")
        ep = w.start_episode(task.id)
        t0 = time.monotonic()
        out = run_episode(task, Thinking(delay), device(), ep, observers=list(observers), monitors=list(monitors),
                          live=EpisodeLive(ep.path))
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
    flat, _ = flatten(task.milestones)
    truth = {m.description: max(1, round((k + 1) * n / max(1, len(flat)))) for k, m in enumerate(flat)}
    rows: list[dict] = []
    busy_server = {"on": False}

    def respond(req):
        # in the gate-under-load rows the server is busy: evidence calls take 3 L, the gate's 1 L
        slow = busy_server["on"] and '"risky"' not in request_text(req)
        return Reply(reply(req, truth), delay_s=3 * L if slow else L)

    with ScriptedModelServer(respond) as server:
        episodes = iter(range(1_000_000))
        current = {"model": "bench"}

        def cfg(concurrency=32, on=server):
            # a model name per episode: the process-wide evidence cache must not carry step calls
            # from one repeat to the next (within an episode, the gate and the judges share it)
            return ModelConfig(base_url=on.base_url, model=current["model"], max_retries=0, timeout_s=30,
                               concurrency=concurrency)

        def runs(make, think=delay, on=server, device=LocalSimDevice):
            res = []
            for _ in range(args.repeat):
                current["model"] = f"bench-{next(episodes)}"
                before = len(on.requests)
                observers, monitors = make()
                out, wall = episode(task, think, observers, monitors, device)
                res.append({"out": out, "wall": wall, "calls": len(on.requests) - before,
                            "finish": {o.name: getattr(o, "finish_wall", None) for o in observers}})
            return res

        base = runs(lambda: ([], []))
        steps = base[0]["out"].steps
        base_step = statistics.median(r["wall"] / r["out"].steps for r in base)

        def add_row(name, res, judges=(), monitor=None, target=None):
            """``judges``: the verdict waits for all of them (they finish at once: the slowest counts)."""
            row = {"configuration": name, "calls_per_episode": statistics.median(r["calls"] for r in res)}
            if judges:
                waits = [max(r["finish"][j] for j in judges) for r in res]
                row["verdict_wait_s"] = round(statistics.median(waits), 4)
                row["verdict_wait_L"] = round(statistics.median(waits) / L, 3)
                row["sum_of_finishes_L"] = round(statistics.median(sum(r["finish"][j] for j in judges) for r in res) / L, 3)
                row["verdicts"] = {j: sorted({str(r["out"].verdicts.get(j)) for r in res}) for j in judges}
                row["target"] = target
            if monitor:  # the runner's own timings: immune to the agent's and the phone's noise
                def per_step(r):
                    t = r["out"].timings
                    return (t.get("monitors", 0.0) + t.get("monitor_wait", 0.0)) / r["out"].steps
                per = statistics.median(per_step(r) for r in res)
                row["step_added_s"] = round(per, 4)
                row["step_added_L"] = round(per / L, 3)
                row["per_checked_action_L"] = round(per * steps / n / L, 3)  # the finish is not checked
                row["target"] = target
            rows.append(row)
            return row

        def milestones(**kw):
            return timed(MilestoneJudge(MilestonesConfig(model=cfg(), **kw)))

        add_row("crate", runs(lambda: ([timed(CrateJudge(CrateConfig(model=cfg()), CRATE))], [])), ["crate"])
        add_row("crate-s", runs(lambda: ([timed(CrateJudge(CrateConfig(model=cfg()), CRATE_S))], [])), ["crate-s"])
        add_row("holistic", runs(lambda: ([timed(HolisticJudge(HolisticConfig(model=cfg())))], [])), ["holistic"])
        add_row("milestones (eager)", runs(lambda: ([milestones()], [])), ["milestones"])
        add_row("milestones (AndroidLens full segments)", runs(lambda: ([milestones(eager=False)], [])), ["milestones"])
        four = ["crate", "crate-s", "holistic", "milestones"]
        add_row("crate + crate-s + holistic + milestones", runs(lambda: (
            [timed(CrateJudge(CrateConfig(model=cfg()), CRATE)), timed(CrateJudge(CrateConfig(model=cfg()), CRATE_S)),
             timed(HolisticJudge(HolisticConfig(model=cfg()))), milestones()], [])), four, target="<= 1.3")
        add_row("gate monitor alone", runs(lambda: ([], [CrateSMonitor(CrateSMonitorConfig(model=cfg(), mode="gate"))])),
                monitor=True)
        add_row("async monitor alone", runs(lambda: ([], [CrateSMonitor(CrateSMonitorConfig(model=cfg(), mode="async"))])),
                monitor=True, target="<= 0.2")
        # the same with an agent as fast as the check (L each) on a phone whose steps take next to no
        # device time (QuickFrames): the check has no spare agent time and no device time to hide in,
        # so what the monitor costs beyond its model call (screenshot encode, request, thread
        # hand-off, the wait at the next step) shows; and an agent twice as fast (L/2), where about
        # L/2 per step is the check's own wait: the proof that these rows can see a wait at all
        def async_gate():
            return [], [CrateSMonitor(CrateSMonitorConfig(model=cfg(), mode="async"))]

        quick = runs(lambda: ([], []), think=L, device=QuickFrames)
        quick_device = statistics.median(r["wall"] / r["out"].steps for r in quick) - L
        async_fast = add_row("async monitor, agent as fast as the check (L each), quick frames",
                             runs(async_gate, think=L, device=QuickFrames), monitor=True, target="<= 0.2")
        async_faster = add_row("async monitor, agent twice as fast as the check (L/2), quick frames",
                               runs(async_gate, think=0.5 * L, device=QuickFrames), monitor=True)
        # the gate on an endpoint busy with evidence calls: two slots, evidence calls that take 3 L,
        # an agent that answers at once, so CRATE's and the milestone judge's calls for the last step
        # are still in flight when the next action is checked
        busy = 0.1 * L
        busy_server["on"] = True
        loaded_rows = []
        for name, gate_cls in (("priority", CrateSMonitor), ("one FIFO line", FifoGate)):
            with ScriptedModelServer(respond) as small:  # an endpoint of its own: two slots

                def loaded(gate_cls=gate_cls, small=small):
                    return ([timed(CrateJudge(CrateConfig(model=cfg(2, small)), CRATE)),
                             timed(MilestoneJudge(MilestonesConfig(model=cfg(2, small))))],
                            [gate_cls(CrateSMonitorConfig(model=cfg(2, small), mode="gate"))])

                loaded_rows.append(add_row(f"gate check per action, evidence calls in flight ({name})",
                                           runs(loaded, think=busy, on=small), monitor=True))
        prio, fifo = loaded_rows
        busy_server["on"] = False
    rows = [{k: v for k, v in r.items() if v is not None} for r in rows]
    results = [
        {"name": "verdict wait after the last step, crate+crate-s+holistic+milestones (L)",
         "value": rows[5]["verdict_wait_L"], "target": "<= 1.3", "holds": rows[5]["verdict_wait_L"] <= 1.3},
        {"name": "the same judges finished one after another (sum of their waits, L)",
         "value": rows[5]["sum_of_finishes_L"], "target": None, "holds": None},
        {"name": "gate latency per checked action with evidence calls in flight (L)",
         "value": prio["per_checked_action_L"], "target": "<= 1.1", "holds": prio["per_checked_action_L"] <= 1.1},
        {"name": "the same gate in one FIFO line with the evidence calls (L)",
         "value": fifo["per_checked_action_L"], "target": None, "holds": None},
        {"name": "async monitor: latency added per step (L)",
         "value": rows[7]["step_added_L"], "target": "<= 0.2", "holds": rows[7]["step_added_L"] <= 0.2},
        {"name": "async monitor: latency added per step, agent as fast as the check, L each, quick frames (L)",
         "value": async_fast["step_added_L"], "target": "<= 0.2", "holds": async_fast["step_added_L"] <= 0.2},
        {"name": "async monitor: latency added per step, agent L/2, check L, quick frames (L; the check's own "
                 "wait is about 0.5)", "value": async_faster["step_added_L"], "target": None, "holds": None},
        {"name": "quick frames: step wall without monitors, beyond the agent's think (L)",
         "value": round(quick_device / L, 3), "target": None, "holds": None},
        {"name": "simulated phone: step wall without judges, beyond the agent's think (L)",
         "value": round((base_step - delay) / L, 3), "target": None, "holds": None},
        *[{"name": f"{r['configuration']}: verdict wait (L)", "value": r["verdict_wait_L"], "target": None,
           "holds": None} for r in rows[:5]],
    ]
    summary = {"task": task.id, "L_s": L, "agent_think_s": delay, "actions": n, "steps": steps, "repeat": args.repeat,
               "baseline_step_s": round(base_step, 4), "rows": results, "configurations": rows}
    print(f"judge latency benchmark: {task.id}, L = {L:g} s per model call, agent {delay:g} s per step "
          f"(gate-under-load rows: agent {busy:g} s, 2 slots, evidence calls 3 L), {n} actions + finish, "
          f"median of {args.repeat}")
    print(f"  baseline step wall without judges: {base_step * 1000:.0f} ms")
    print(f"  {'configuration':<64} {'calls':>6} {'verdict wait':>13} {'per action':>11}")
    for r in rows:
        wait = f"{r['verdict_wait_L']:.2f} L" if "verdict_wait_L" in r else "-"
        per_action = f"{r['per_checked_action_L']:.2f} L" if "per_checked_action_L" in r else "-"
        print(f"  {r['configuration']:<64} {r['calls_per_episode']:>6} {wait:>13} {per_action:>11}")
    print("  targets:")
    for r in results[:9]:
        mark = "" if r["holds"] is None else ("holds" if r["holds"] else "DOES NOT HOLD")
        print(f"    {r['name']:<78} {r['value']:>6.2f} {r['target'] or '':>7} {mark}")
    (bench_dir() / "judges.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
