"""Probe: `harness run` against the hostile model endpoints of issue 28, measured in one go.

Starts a private adb server, one simulated phone (its own process) and the scripted test server
(tests/fakes/model_server.py), then runs `harness run` as a subprocess for each probe:

  agent trickle   the agent's endpoint sends its headers, then a byte every 2 s; --model-timeout 10
                  --model-retries 0: seconds from the reply's first byte to the episode's result
                  line (agent_error), or "no end" when the run is still going after --cap seconds
  gate trickle    the same for the CRATE-S gate's endpoint on the transfer step of an unsafe task
                  (--judge-timeout 5 --judge-retries 0): seconds from the first byte to the halted
                  episode's result line, and whether the transfer ran
  ctrl-c monitor  SIGINT while a gate check reads a trickling reply (--judge-timeout 60): seconds
                  from SIGINT to the process's exit (killed after --cap)
  ctrl-c agent    the same with the agent's call stuck (--model-timeout 60)
  50 MB reply     one agent step whose reply is 50 MB: trajectory.jsonl bytes, then `harness view
                  --no-serve`: its pages' bytes and its peak RSS

The same script runs against another checkout's harness (``--harness-root DIR``: e.g. a copy of
main, to measure "before"): the phone, the server and this script stay this checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.device.adb_server import AdbServer, free_port, wait_port  # noqa: E402
from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.judges.helpers import good_reply, kind_of  # noqa: E402

WAIT = "Thought: nothing to do yet\nAction: wait()"


class Probe:
    def __init__(self, args: argparse.Namespace, adb: AdbServer, serial: str, work: Path):
        self.args, self.adb, self.serial, self.work = args, adb, serial, work
        self.harness_root = Path(args.harness_root).resolve()
        self.n = 0

    def popen(self, extra: list[str], task: str, out: Path) -> subprocess.Popen:
        env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(self.adb.port), PYTHONPATH=str(self.harness_root))
        cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", str(self.harness_root / "tasks" / "sim"),
               "--tasks", task, "--device", self.serial, "--judge", "oracle", "--adb-port", str(self.adb.port),
               "--out", str(out), "--quiet", *extra]
        return subprocess.Popen(cmd, env=env, cwd=self.harness_root, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def out(self, name: str) -> Path:
        self.n += 1
        return self.work / f"{self.n:02d}-{name}"

    def until(self, p: subprocess.Popen, cond, cap: float) -> float | None:
        end = time.monotonic() + cap
        while time.monotonic() < end:
            if cond():
                return time.monotonic()
            if p.poll() is not None:
                return time.monotonic() if cond() else None
            time.sleep(0.05)
        return None

    def stop(self, p: subprocess.Popen) -> None:
        if p.poll() is None:
            p.kill()
            p.wait(30)


def _result_written(run: Path):
    return lambda: (run / "results.jsonl").is_file() and (run / "results.jsonl").stat().st_size > 0


def agent_trickle(pr: Probe) -> dict:
    run = pr.out("agent-trickle")
    with ScriptedModelServer(lambda req: Reply(WAIT, trickle_s=2.0)) as s:
        p = pr.popen(["--agent", "uitars", "--model-base-url", s.base_url, "--model", "m", "--model-timeout", "10",
                      "--model-retries", "0"], "settings_wifi_off", run)
        t = pr.until(p, _result_written(run), pr.args.cap)
        first = s.trickle_started[0] if s.trickle_started else None
        pr.stop(p)
    row = json.loads((run / "results.jsonl").read_text().splitlines()[0]) if t else None
    return {"probe": "agent trickle (--model-timeout 10)",
            "seconds": round(t - first, 2) if t and first else None,
            "outcome": f"{row['status']}: {row.get('error', '')[:90]}" if row else f"no end after {pr.args.cap:g}s"}


def gate_trickle(pr: Probe) -> dict:
    run = pr.out("gate-trickle")
    checks = []

    def answer(req):
        if kind_of(req) == "crate_s_step":
            checks.append(1)
            if len(checks) == 8:  # wallet_pay_landlord_unsafe's 8th step: the transfer
                return Reply(json.dumps({"risky": True, "category": "Over-Automation", "reason": "sends it all",
                                         "score": 0.9}), trickle_s=2.0)
        return Reply(good_reply(req))

    with ScriptedModelServer(answer) as s:
        p = pr.popen(["--agent", "replay", "--monitor", "crate-s", "--monitor-mode", "gate", "--judge-base-url",
                      s.base_url, "--judge-model", "j", "--judge-timeout", "5", "--judge-retries", "0"],
                     "wallet_pay_landlord_unsafe", run)
        t = pr.until(p, _result_written(run), pr.args.cap)
        first = s.trickle_started[0] if s.trickle_started else None
        pr.stop(p)
    row = json.loads((run / "results.jsonl").read_text().splitlines()[0]) if t else None
    if row:
        halt = row.get("halt") or {}
        outcome = (f"{row['status']} at step {halt.get('step')} ({halt.get('category')}), transfer ran: "
                   f"{row['verdicts'].get('oracle_unsafe')}")
    else:
        outcome = f"no end after {pr.args.cap:g}s"
    return {"probe": "gate trickle (--judge-timeout 5 --judge-retries 0)",
            "seconds": round(t - first, 2) if t and first else None, "outcome": outcome}


def ctrl_c(pr: Probe, stuck: str) -> dict:
    run = pr.out(f"ctrl-c-{stuck}")
    with ScriptedModelServer(lambda req: Reply(WAIT if stuck == "agent" else good_reply(req), trickle_s=1.0)) as s:
        if stuck == "monitor":
            extra = ["--agent", "replay", "--monitor", "crate-s", "--monitor-mode", "gate", "--judge-base-url",
                     s.base_url, "--judge-model", "j", "--judge-timeout", "60", "--judge-retries", "0"]
        else:
            extra = ["--agent", "uitars", "--model-base-url", s.base_url, "--model", "m", "--model-timeout", "60",
                     "--model-retries", "0"]
        p = pr.popen(extra, "settings_wifi_off", run)
        if pr.until(p, lambda: bool(s.trickle_started), 120) is None:
            pr.stop(p)
            return {"probe": f"Ctrl-C, stuck {stuck}", "seconds": None, "outcome": "no model call reached"}
        time.sleep(1.0)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        t = pr.until(p, lambda: p.poll() is not None, pr.args.cap)
        pr.stop(p)
    return {"probe": f"Ctrl-C, stuck {stuck} thread", "seconds": round(t - t0, 2) if t else None,
            "outcome": f"exit {p.returncode}" if t else f"still running {pr.args.cap:g}s after SIGINT (killed)"}


def huge_reply(pr: Probe) -> dict:
    run = pr.out("huge")
    big = "Thought: " + "t" * pr.args.reply_mb * 1_000_000 + "\nAction: wait()"
    with ScriptedModelServer([Reply(big)]) as s:
        p = pr.popen(["--agent", "uitars", "--model-base-url", s.base_url, "--model", "m", "--max-steps", "1"],
                     "settings_wifi_off", run)
        t = pr.until(p, _result_written(run), pr.args.cap)
        p.wait(pr.args.cap)
    del big
    traj = run / "episodes" / "settings_wifi_off" / "trajectory.jsonl"
    size = traj.stat().st_size if t and traj.is_file() else None
    env = dict(os.environ, PYTHONPATH=str(pr.harness_root))
    code = ("import resource, sys; from harness.cli.main import main; rc = main(sys.argv[1:]); "
            "print('peak-rss-kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(rc)")
    v = subprocess.run([sys.executable, "-c", code, "view", str(run), "--no-serve"], env=env, cwd=pr.harness_root,
                       capture_output=True, text=True, timeout=600)
    rss = next((int(line.split()[1]) for line in v.stderr.splitlines() if line.startswith("peak-rss-kib")), 0)
    pages = sum(f.stat().st_size for f in run.rglob("*.html"))
    return {"probe": f"{pr.args.reply_mb} MB reply",
            "seconds": None,
            "outcome": (f"trajectory.jsonl {size / 1e6:.1f} MB; harness view (exit {v.returncode}): pages "
                        f"{pages / 1e6:.2f} MB, peak RSS {rss / 1024:.0f} MB") if size else "no record"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harness-root", default=str(ROOT), help="the checkout whose `harness run` is probed")
    ap.add_argument("--cap", type=float, default=120.0, help="longest wait for one probe (s)")
    ap.add_argument("--reply-mb", type=int, default=50)
    ap.add_argument("--only", default="", help="comma-separated: agent,gate,ctrl-c,huge")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    # a process started in the background (`nohup ... &`, a script's `&`) inherits SIGINT ignored,
    # and so would every `harness run` it starts: the Ctrl-C probes would measure a run that cannot
    # hear Ctrl-C. A handler of our own is reset to the default in each child at exec.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    adb = AdbServer().start()
    port = free_port()
    sim = subprocess.Popen([sys.executable, "-m", "harness.cli", "sim", "serve", "--port", str(port), "--size",
                            "540x1200"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = []
    try:
        assert wait_port(port, 30), "the simulated phone did not start"
        serial = adb.connect(f"127.0.0.1:{port}")
        with tempfile.TemporaryDirectory(prefix="probe-hostile-") as work:
            pr = Probe(args, adb, serial, Path(work))
            if not only or "huge" in only:
                rows.append(huge_reply(pr))
            if not only or "agent" in only:
                rows.append(agent_trickle(pr))
            if not only or "gate" in only:
                rows.append(gate_trickle(pr))
            if not only or "ctrl-c" in only:
                rows.append(ctrl_c(pr, "monitor"))
                rows.append(ctrl_c(pr, "agent"))
    finally:
        sim.terminate()
        sim.wait(10)
        adb.stop()
    print(f"harness probed: {Path(args.harness_root).resolve()}")
    w = max(len(r["probe"]) for r in rows)
    for r in rows:
        secs = f"{r['seconds']:.2f} s" if r["seconds"] is not None else "-"
        print(f"{r['probe']:<{w}}  {secs:>9}  {r['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
