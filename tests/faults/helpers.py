"""Helpers for the fault-injection suite (``pytest -m faults``): simulated phones in their own
processes that a test can kill, a private adb server a test may kill, small suites cut from
tasks/sim, `harness run` as a subprocess, and the checks every faulted run must pass afterwards
(nothing recorded is lost, no duplicate or miscounted episode, every episode folder consistent)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.device.adb_server import AdbServer, run_adb
from harness.records import iter_steps, read_results, resolve_screen

ROOT = Path(__file__).resolve().parents[2]
SIM_SUITE = ROOT / "tasks" / "sim"
# short tasks (2-3 reference steps), English and Chinese, different apps
SHORT = ["messages_open_mom_c2", "clock_earliest_alarm", "settings_wifi_off", "wallet_balance_zh",
         "clock_turn_off_work_alarm"]
SMALL_SIZE = "540x1200"  # a quarter of the default pixels: PNG encoding dominates a sim step


def write_suite(path: Path, ids: list[str], patch: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """A suite file holding the tasks ``ids`` copied from tasks/sim (a small file loads in ms;
    the whole simulated suite takes seconds to parse)."""
    found: dict[str, dict[str, Any]] = {}
    for f in sorted(SIM_SUITE.rglob("*.yaml")):
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        for t in data["tasks"] if isinstance(data, dict) else data:
            if t["id"] in ids:
                found[t["id"]] = t
    missing = [i for i in ids if i not in found]
    assert not missing, f"tasks not in tasks/sim: {missing}"
    tasks = [found[i] for i in ids]
    if patch is not None:
        for t in tasks:
            patch(t)
    path.write_text(yaml.safe_dump(tasks, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


@dataclass
class SimProc:
    """``harness sim serve`` in its own process, connected to an adb server."""

    adb: AdbServer
    log_dir: Path
    size: str = SMALL_SIZE
    extra: tuple[str, ...] = ()
    port: int = 0
    proc: subprocess.Popen | None = None
    serial: str = ""
    _log: Path | None = None

    def start(self, connect: bool = True) -> "SimProc":
        """Start the phone (again, on the same port, after ``kill``); ``connect=False`` leaves it to
        the harness to bring adb's connection back (a phone that restarted on its own). The first
        start takes a free port (another if it was taken meanwhile: harness.sim.process)."""
        from harness.sim.process import start_sim_process

        log = self._log or self.log_dir / f"sim-{id(self):x}.log"
        self._log = log
        started = start_sim_process(["--size", self.size, *self.extra], log, port=self.port or None, cwd=ROOT)
        self.port, self.proc = started.port, started.proc
        if connect:
            self.serial = self.adb.connect(f"127.0.0.1:{self.port}")
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.serial:  # leave no offline entry behind in a shared adb server
            try:
                run_adb(["disconnect", self.serial], self.adb.port, timeout=10)
            except (subprocess.TimeoutExpired, OSError):
                pass
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def harness_popen(args: list[str], adb_port: int, env: dict[str, str] | None = None, *, quiet: bool = False,
                  log: Path | None = None) -> subprocess.Popen:
    """`harness ARGS` in its own process on the adb server ``adb_port`` (output piped, dropped with
    ``quiet``, or written to the file ``log``)."""
    e = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(adb_port), **(env or {}))
    if log is not None:
        with open(log, "wb") as f:  # the child keeps its own copy of the descriptor
            return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], env=e, cwd=ROOT, stdout=f,
                                    stderr=subprocess.STDOUT, text=True)
    out = subprocess.DEVNULL if quiet else subprocess.PIPE
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], env=e, cwd=ROOT, stdout=out, stderr=out,
                            text=True)


def run_cli(args: list[str], capsys: Any) -> tuple[int, str, str]:
    """``harness ARGS`` in this process (seconds faster than a subprocess): exit code, stdout, stderr."""
    from harness.cli.main import main

    rc = main(args)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def harness_run(args: list[str], adb_port: int, timeout: float = 180, env: dict[str, str] | None = None
                ) -> subprocess.CompletedProcess:
    p = harness_popen(args, adb_port, env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"harness {' '.join(args)} hung for {timeout}s\nstdout:\n{out}\nstderr:\n{err}")
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def results_table(run: Path) -> dict[str, tuple]:
    """task_id -> (status, steps, verdicts); asserts there is exactly one line per task."""
    raw = [json.loads(line) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines() if line]
    ids = [r["task_id"] for r in raw]
    assert len(ids) == len(set(ids)), f"duplicate result lines in {run}: {ids}"
    rows = read_results(run)
    assert [r.task_id for r in rows] == ids
    return {r.task_id: (r.status, r.steps, dict(sorted(r.verdicts.items()))) for r in rows}


def check_run_consistent(run: Path) -> None:
    """Every completed episode's folder agrees with its result line: one trajectory line per
    recorded step (indices 1..n), each step's screens present, a summary equal to the result, no
    temporary files left behind."""
    for r in read_results(run):
        ep = run / "episodes" / r.task_id
        assert ep.is_dir(), f"{r.task_id}: result without an episode folder"
        steps = list(iter_steps(ep))
        recorded = r.steps if r.proposed_steps is None else r.proposed_steps
        assert [s.index for s in steps] == list(range(1, recorded + 1)), \
            f"{r.task_id}: {len(steps)} trajectory lines for {recorded} recorded steps"
        assert sum(1 for s in steps if s.ran) == r.steps, f"{r.task_id}: steps must count the executed ones"
        if r.status != "infra_error" or steps:
            assert (ep / "screens" / "000.png").is_file(), f"{r.task_id}: no initial screen"
        for s in steps:
            assert resolve_screen(ep, s.screen_before).is_file(), f"{r.task_id} step {s.index}: {s.screen_before} missing"
            if s.screen_after is not None:
                assert resolve_screen(ep, s.screen_after).is_file(), f"{r.task_id} step {s.index}: {s.screen_after} missing"
        leftovers = [p.name for p in ep.rglob("*") if p.name.endswith(".tmp")]
        assert not leftovers, f"{r.task_id}: temporary files left in a completed episode: {leftovers}"
        summary = json.loads((ep / "episode.json").read_text(encoding="utf-8"))
        assert (summary["status"], summary["steps"]) == (r.status, r.steps)


def wait_for(cond: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return False


def adb_devices(port: int) -> dict[str, str]:
    out = run_adb(["devices"], port).stdout
    rows = {}
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2:
            rows[parts[0]] = parts[1]
    return rows
