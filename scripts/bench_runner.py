"""Benchmark: what the live runner adds per step on top of the device.

Measured in one run against one simulated phone (its own process) on a private adb server:
  raw       adbutils `exec-out screencap -p` + `input tap`, the floor of one observe+act step
  harness   `run_episode` with a scripted agent tapping a dead spot, no judges: per-step wall time,
            split by the runner's own timings (agent, monitors, action, settle, write)
  overhead  per-step wall time minus agent and device time (action + settle), i.e. the runner's
            bookkeeping: records, screenshots written, hashing, plumbing
Ratios: overhead / raw and harness / raw (the latter includes settling, which takes a second
screenshot to confirm the screen is still).
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
from bench_rows import bench_dir  # noqa: E402  (scripts/, beside this file)

from harness.core.actions import Click  # noqa: E402
from harness.device.adb import AdbDevice  # noqa: E402
from harness.device.adb_server import AdbServer  # noqa: E402
from harness.core.episode import AgentOutput  # noqa: E402
from harness.live.records import EpisodeLive  # noqa: E402
from harness.records import RunWriter  # noqa: E402
from harness.run.runner import run_episode  # noqa: E402
from harness.sim.process import start_sim_process  # noqa: E402
from harness.core.tasks import parse_task  # noqa: E402


class DeadSpotTapper:
    name = "bench"

    def spec(self):
        return {"name": self.name}

    def reset(self, ctx):
        pass

    def step(self, obs):
        return AgentOutput(Click(x=obs.screen_size[0] // 2, y=obs.screen_size[1] // 2))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    server = AdbServer().start()
    log = Path(tempfile.mkdtemp(prefix="crate-bench-runner-")) / "sim.log"
    phone = start_sim_process([], log, cwd=ROOT)
    try:
        serial = server.connect(phone.address)
        dev = AdbDevice(serial, port=server.port)
        # the launcher's empty lower half: a tap there changes nothing, so every frame is cached
        # on the phone and the raw and harness paths measure the same device work
        dev.screenshot()
        raw = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            dev.exec_out("screencap -p")
            dev.shell(["input", "tap", "540", "1200"])
            raw.append(time.perf_counter() - t0)
        task = parse_task({"id": "bench", "instruction": "bench", "reference_steps": args.steps,
                           "setup": {"sim": {"preset": "default"}}})
        with tempfile.TemporaryDirectory() as tmp:
            w = RunWriter(Path(tmp) / "run")
            ep = w.start_episode("bench")
            t0 = time.perf_counter()
            out = run_episode(task, DeadSpotTapper(), dev, ep, cap=args.steps, live=EpisodeLive(ep.path))  # as harness run
            wall = time.perf_counter() - t0
            from harness.records import iter_steps
            steps = list(iter_steps(ep.path))
            w.close()
        per = [sum(s.timings.values()) for s in steps]
        agent = statistics.mean(s.timings.get("agent", 0) for s in steps)
        device = statistics.mean(s.timings.get("action", 0) + s.timings.get("settle", 0) for s in steps)
        write = statistics.mean(s.timings.get("write", 0) for s in steps)
        step_wall = wall / len(steps)
        overhead = step_wall - agent - device
        raw_m = statistics.median(raw)
        rows = [
            {"name": "raw adb screenshot+tap (ms)", "value": round(raw_m * 1000, 2)},
            {"name": "harness step wall (ms)", "value": round(step_wall * 1000, 2)},
            {"name": "  agent (ms)", "value": round(agent * 1000, 2)},
            {"name": "  device: action+settle (ms)", "value": round(device * 1000, 2)},
            {"name": "  record write (ms)", "value": round(write * 1000, 2)},
            {"name": "harness overhead outside agent and device (ms)", "value": round(overhead * 1000, 2)},
            {"name": "overhead / raw", "value": round(overhead / raw_m, 3)},
            {"name": "harness step / raw", "value": round(step_wall / raw_m, 3)},
        ]
        print(f"runner benchmark: {len(steps)} steps ({out.status}), settle frames per step = 2")
        for r in rows:
            print(f"  {r['name']:<50} {r['value']:>10}")
        (bench_dir() / "runner.json").write_text(json.dumps(rows, indent=1))
        _ = per
        return 0
    finally:
        phone.stop()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
