"""Benchmark: what harness guard costs an agent that brings its own loop.

On a simulated phone (1080x2400) behind a private adb server, with `harness guard` in this process:
- traffic it does not gate: ``exec-out screencap -p`` through the guard over direct, as agents
  send it (the adb binary: mobile-mcp, autoglm-gui) and as adbutils sends it (one process, no spawn),
  the median of ``--repeat`` runs of each, interleaved; target <= 1.05;
- a gated action without a model (no monitor: the command read, the screen before it, the step
  recorded), in an agent's step as agents take it, a screenshot then a tap: the tap through the
  guard minus direct, in ms, medians, the adb binary and adbutils; target <= 20 ms. The guard judges
  the tap on the screenshot the agent just took; when the agent took none through the guard since
  its last action the guard takes the screen itself, which costs the phone's screencap (a row of its
  own, no target);
- the monitor's call, the only other cost: the same tap with the crate-s gate on a scripted
  endpoint that answers at once (a test double), minus the tap without a monitor: the check's own
  cost (its prompt, the screenshot's encoding, the HTTP round trip) without model time.
Writes bench/guard.json (or guard.json in $CRATE_BENCH_DIR, as every bench): ``{"rows": [{"name", "value", "target", "holds"}], "detail": {...}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.device.adb_server import AdbServer, adb_path  # noqa: E402
from harness.core.ports import START_TRIES, free_port  # noqa: E402
from bench_rows import bench_dir, row, write_rows  # noqa: E402  (scripts/, beside this file)


def _median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def _adb(port: int, *args: str) -> bytes:
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(port)}
    r = subprocess.run([adb_path(), *args], env=env, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"adb {' '.join(args)}: {r.stderr.decode()[-300:]}")
    return r.stdout


def _guard(serial: str, adb_port: int, out: Path, *extra: str):
    from harness.cli.main import build_parser
    from harness.cli.guard_setup import open_session

    argv = ["guard", "--device", serial, "--port", str(free_port()), "--out", str(out), "--instruction", "bench",
            "--adb-port", str(adb_port), *extra]
    g = open_session(build_parser().parse_args(argv), argv=argv)
    g.session.say = lambda text: None
    return g


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=40, help="runs of each measurement (medians)")
    args = ap.parse_args()
    import adbutils

    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve
    from tests.fakes.model_server import Reply, ScriptedModelServer

    n = args.repeat
    rows, detail = [], {}
    with AdbServer() as server, tempfile.TemporaryDirectory() as tmp:
        handle = serve(SimPhone(1080, 2400), free_port(), port_tries=START_TRIES)
        serial = server.connect(f"127.0.0.1:{handle.port}")
        try:
            g = _guard(serial, server.port, Path(tmp) / "plain")
            direct_dev = adbutils.AdbClient(host="127.0.0.1", port=server.port).device(serial)
            guard_dev = adbutils.AdbClient(host="127.0.0.1", port=g.server.port).device(serial)
            for dev in (direct_dev, guard_dev):  # warm: the first frame is rendered once
                dev.shell("screencap -p", encoding=None)
            # --- traffic it does not gate ------------------------------------------------------
            # measured in pairs, back to back, the order alternating (a busy machine's drift falls on
            # both sides alike): the median through the guard over the median direct
            forms = {"adb binary": (lambda: _adb(server.port, "-s", serial, "exec-out", "screencap", "-p"),
                                    lambda: _adb(g.server.port, "-s", serial, "exec-out", "screencap", "-p")),
                     "adbutils": (lambda: direct_dev.shell("screencap -p", encoding=None),
                                  lambda: guard_dev.shell("screencap -p", encoding=None))}
            detail["screencap_ms"] = {}
            for form, (direct, guarded) in forms.items():
                pairs = []
                for k in range(n):
                    if k % 2:
                        gt, dt = _median_ms(guarded, 1), _median_ms(direct, 1)
                    else:
                        dt, gt = _median_ms(direct, 1), _median_ms(guarded, 1)
                    pairs.append((dt, gt))
                dm, gm_ = statistics.median(d for d, _ in pairs), statistics.median(t for _, t in pairs)
                detail["screencap_ms"][form] = {"direct": round(dm, 3), "guard": round(gm_, 3),
                                                "guard - direct, median of pairs": round(
                                                    statistics.median(t - d for d, t in pairs), 3)}
                rows.append(row(f"screencap -p through the guard / direct ({form})", gm_ / dm, "<= 1.05"))
            # --- a gated action without a model ------------------------------------------------
            # an agent's step: its screenshot (through the guard, or direct), then its tap; the tap's
            # time is measured. The guard judges the tap on the screenshot the agent just took (as the
            # runner's monitors judge the agent's own), so it takes none of its own.
            taps = {"adb binary direct": [], "adb binary guard": [], "adbutils direct": [], "adbutils guard": []}
            for k in range(n):
                x, y = str(100 + k % 5), str(1500 + k % 3)  # the launcher's empty middle: the screen stays
                for key, port, dev in (("adb binary direct", server.port, None), ("adb binary guard", g.server.port, None),
                                       ("adbutils direct", None, direct_dev), ("adbutils guard", None, guard_dev)):
                    if dev is None:
                        _adb(port, "-s", serial, "exec-out", "screencap", "-p")
                        taps[key].append(_median_ms(lambda: _adb(port, "-s", serial, "shell", "input", "tap", x, y), 1))
                    else:
                        dev.shell("screencap -p", encoding=None)
                        taps[key].append(_median_ms(lambda: dev.shell(["input", "tap", x, y]), 1))
            med_t = {k: statistics.median(v) for k, v in taps.items()}
            detail["tap_ms"] = {k: round(v, 3) for k, v in med_t.items()}
            rows.append(row("gated tap without a model, over direct (adb binary), ms",
                            med_t["adb binary guard"] - med_t["adb binary direct"], "<= 20"))
            rows.append(row("gated tap without a model, over direct (adbutils), ms",
                            med_t["adbutils guard"] - med_t["adbutils direct"], "<= 20"))
            # an agent that takes no screenshot through the guard: the guard takes the screen itself
            own = [_median_ms(lambda: guard_dev.shell(["input", "tap", "105", str(1600 + k % 3)]), 1) for k in range(n)]
            detail["tap_ms"]["adbutils guard, no agent screenshot (the guard's own screencap)"] = round(
                statistics.median(own), 3)
            rows.append(row("gated tap, no screenshot of the agent's: the guard's own screencap, over direct, ms",
                            statistics.median(own) - med_t["adbutils direct"]))
            g.close("end")
            # --- the monitor's call ------------------------------------------------------------
            safe = json.dumps({"reason": "navigation", "category": None, "risky": False, "score": 0.0})
            with ScriptedModelServer(lambda req: Reply(safe)) as model:
                gm = _guard(serial, server.port, Path(tmp) / "monitored", "--monitor", "crate-s",
                            "--judge-base-url", model.base_url, "--judge-model", "test-model")
                mon_dev = adbutils.AdbClient(host="127.0.0.1", port=gm.server.port).device(serial)
                checked = []
                for k in range(n):
                    mon_dev.shell("screencap -p", encoding=None)
                    checked.append(_median_ms(lambda: mon_dev.shell(["input", "tap", str(200 + k % 7), "1500"]), 1))
                gm.close("end")
                steps = [json.loads(x) for x in (gm.episode.path / "trajectory.jsonl").read_text().splitlines()]
            detail["tap_ms"]["adbutils guard + crate-s gate (instant endpoint)"] = round(statistics.median(checked), 3)
            # the check's own time as recorded (its prompt, the screenshot's encoding, the HTTP round
            # trip to an endpoint that answers at once): what a model's latency adds to
            rows.append(row("the crate-s gate's check per action, without model time (instant endpoint), ms",
                            1000 * statistics.median(st["timings"]["monitors"] for st in steps)))
        finally:
            handle.stop()
    out = bench_dir() / "guard.json"  # bench/, or the quick run's own folder (CRATE_BENCH_DIR)
    out.parent.mkdir(exist_ok=True)
    write_rows(out, rows, f"harness guard ({n} runs each, medians)")
    data = json.loads(out.read_text())
    data["detail"] = detail
    out.write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
