"""Benchmark: the preflight ``harness run`` makes before it touches a phone takes under a second.

What a user's ``harness run`` checks first (``harness preflight`` with the same flags): two model
endpoints (the agent's, asked in plain text; the judges' and gate's, asked with a JSON schema), one
phone (attached, usable, its lock screen, its kind, its apps for the tasks, the ``--size`` asked
for), the run folder, the live page's port and the unsafe-task rule. Here the phone is the
simulated one playing a retail Pixel 8 (``harness sim serve --as-phone``, its own process, 1080x2400,
over a private adb server) and the endpoints the scripted OpenAI-compatible server on loopback, so
what is timed is the harness's own checks: the plan as ``harness run`` builds it
(harness.cli.run_checks.run_plan), then :func:`harness.preflight.preflight`.

The row is the median wall time of ``--repeat`` preflights after one that warms the process (its
first call pays imports a run pays anyway at start: the first is in the detail); target <= 1 s.

Writes bench/preflight.json: ``{"rows": [{"name", "value", "target", "holds"}], "detail": {...}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.cli.main import build_parser  # noqa: E402
from harness.cli.run_checks import run_plan  # noqa: E402
from harness.cli.run_parts import build_plugins, device_config, prepare_config, split_list  # noqa: E402
from harness.device.adb_server import AdbServer  # noqa: E402
from harness.preflight import preflight  # noqa: E402
from harness.run.task_checks import load_checked_suite  # noqa: E402
from harness.sim.process import start_sim_process  # noqa: E402
from bench_rows import bench_dir, row, write_rows  # noqa: E402  (scripts/, beside this file)
from tests.fakes.model_server import ScriptedModelServer  # noqa: E402

TARGET_S = 1.0
TASKS = "android_clock_alarm_7am,android_settings_dark_theme"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", default=None, help="default preflight.json in bench/ (or $CRATE_BENCH_DIR, as every bench)")
    args = ap.parse_args()
    server = AdbServer().start()
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
    work = Path(tempfile.mkdtemp(prefix="bench-preflight-"))
    phone = start_sim_process(["--as-phone"], work / "sim.log")
    try:
        serial = server.connect(phone.address)
        with ScriptedModelServer() as agent_srv, ScriptedModelServer() as judge_srv:
            argv = ["run", "--suite", str(ROOT / "tasks" / "android"), "--tasks", TASKS, "--device", serial,
                    "--agent", "uitars", "--model-base-url", agent_srv.base_url, "--model", "ui-tars-1.5-7b",
                    "--judge", "crate,crate-s", "--monitor", "crate-s", "--monitor-mode", "gate",
                    "--judge-base-url", judge_srv.base_url, "--judge-model", "qwen2.5-vl-72b",
                    "--size", "720x1600", "--watch", "--watch-port", "0", "--out", str(work / "run"),
                    "--adb-port", str(server.port)]
            run_args = build_parser().parse_args(argv)
            suite = load_checked_suite(run_args.suite)
            tasks = suite.select(split_list(run_args.tasks))
            built, prep, cfg = build_plugins(run_args), prepare_config(run_args), device_config(run_args)
            times = []
            for _ in range(args.repeat + 1):
                t0 = time.perf_counter()
                passed = preflight(run_plan(run_args, cfg, tasks, built, prep))
                times.append(time.perf_counter() - t0)
                for d in passed.devices:
                    d.close()
            probes = len(agent_srv.probes) + len(judge_srv.probes)
    finally:
        phone.stop()
        server.stop()
    median = statistics.median(times[1:])
    rows = [row("harness run's preflight, simulated phone + 2 local endpoints (s, median)", median,
                f"<= {TARGET_S}")]
    write_rows(Path(args.out) if args.out else bench_dir() / "preflight.json", rows, "preflight")
    doc = json.loads(Path(args.out).read_text(encoding="utf-8"))
    doc["detail"] = {"first_s": round(times[0], 4), "runs_s": [round(t, 4) for t in times[1:]],
                     "endpoints": 2, "devices": 1, "tasks": TASKS.split(","), "probes_sent": probes,
                     "lines": passed.lines, "notes": passed.notes}
    Path(args.out).write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
