"""`harness run` end to end over real adb: parallel episodes over two simulated phones in their own
processes, the 2c+1 cap, SIGKILL halfway (phones served in the test's process hold the runner at
a known point) then --resume giving the same results as an uninterrupted run, and clear errors for
bad command lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.records import read_manifest, read_results
from tests.fakes.held_commands import HeldCommands

ROOT = Path(__file__).resolve().parents[2]
SUITE = str(ROOT / "tasks" / "sim")


def _ids(n: int, skip: int = 0, safe_only: bool = False) -> list[str]:
    from harness.core.tasks import load_suite

    tasks = [t for t in load_suite(SUITE).tasks if t.reference_steps <= 10]
    if safe_only:
        tasks = [t for t in tasks if t.safety.label == "safe"]
    return [t.id for t in tasks[skip:skip + n]]


def _harness(args: list[str], adb_port: int) -> subprocess.Popen:
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(adb_port))
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _table(run: Path) -> dict:
    rows = read_results(run)
    ids = [r.task_id for r in rows]
    assert len(ids) == len(set(ids))
    return {r.task_id: (r.status, r.steps, r.verdicts.get("oracle"), r.verdicts.get("oracle_unsafe")) for r in rows}


@pytest.mark.slow
def test_parallel_replay_cap_and_kill_resume(adb, sim_process, serve_sim, tmp_path):
    a, b = sim_process(), sim_process()
    # 1) a clean replay over two phones: every episode finishes and the oracle agrees
    ids = _ids(6, safe_only=True)
    p = _harness(["run", "--suite", SUITE, "--tasks", ",".join(ids), "--devices", f"{a},{b}", "--agent", "replay",
                  "--judge", "oracle", "--out", str(tmp_path / "r1"), "--adb-port", str(adb.port)], adb.port)
    out, _ = p.communicate(timeout=400)
    assert p.returncode == 0, out
    t1 = _table(tmp_path / "r1")
    assert set(t1) == set(ids)
    assert all(v[0] == "finished" and v[2] is True for v in t1.values()), t1
    assert {r.device for r in read_results(tmp_path / "r1")} == {a, b}  # both phones worked
    m = read_manifest(tmp_path / "r1")
    assert m["agent"]["name"] == "replay" and m["suite"]["files"] and m["environment"]["packages"]["adbutils"]

    # 2) the random agent never finishes: it stops at exactly 2c+1
    rid = _ids(2, skip=6)
    p = _harness(["run", "--suite", SUITE, "--tasks", ",".join(rid), "--devices", f"{a},{b}", "--agent", "random",
                  "--seed", "7", "--out", str(tmp_path / "r2"), "--adb-port", str(adb.port)], adb.port)
    out, _ = p.communicate(timeout=400)
    assert p.returncode == 0, out
    from harness.core.tasks import load_suite
    caps = {t.id: t.cap for t in load_suite(SUITE).tasks}
    for r in read_results(tmp_path / "r2"):
        assert r.cap == caps[r.task_id] and r.proposed_steps == r.cap and r.status == "step_limit"

    # 3) SIGKILL halfway, then --resume: the same results as an uninterrupted run. The kill lands
    # while the runner waits on the reset of the fifth of eight episodes (phones in this process
    # hold that command), so the run is mid-way however fast the machine is.
    phones = [serve_sim(width=540, height=1200), serve_sim(width=540, height=1200)]
    hold = HeldCommands(phones)
    kid = _ids(8, skip=2)
    base = ["run", "--suite", SUITE, "--tasks", ",".join(kid), "--devices", ",".join(x.serial for x in phones),
            "--agent", "replay", "--agent-opt", "perturb=0.3", "--seed", "11", "--judge", "oracle",
            "--adb-port", str(adb.port)]
    p = _harness([*base, "--out", str(tmp_path / "full")], adb.port)
    out, _ = p.communicate(timeout=400)
    assert p.returncode == 0, out
    hold.arm("reset", len(kid) // 2 + 1)
    p = _harness([*base, "--out", str(tmp_path / "cut")], adb.port)
    try:
        assert hold.reached.wait(300), f"the run never reached its fifth reset ({hold.counts})"
        p.send_signal(signal.SIGKILL)
        p.wait()
    finally:
        hold.release_all()
    done = len(read_results(tmp_path / "cut"))
    assert 0 < done < len(kid), done  # at least one phone finished an episode; the held one did not
    p = _harness([*base, "--out", str(tmp_path / "cut"), "--resume"], adb.port)
    out, _ = p.communicate(timeout=400)
    assert p.returncode == 0, out
    assert _table(tmp_path / "cut") == _table(tmp_path / "full")


def test_run_errors_are_one_line(capsys, tmp_path):
    assert main(["run", "--suite", SUITE, "--agent", "nope", "--device", "x", "--out", str(tmp_path / "r")]) == 2
    assert "unknown agent 'nope'" in capsys.readouterr().err
    assert main(["run", "--suite", SUITE, "--tasks", "no_such_task", "--agent", "replay", "--device", "x",
                 "--out", str(tmp_path / "r")]) == 2
    assert "unknown task id" in capsys.readouterr().err
    assert main(["run", "--suite", SUITE, "--agent", "replay", "--agent-opt", "perturb=2", "--device", "x",
                 "--out", str(tmp_path / "r")]) == 2
    assert "perturb" in capsys.readouterr().err
    assert main(["run", "--suite", SUITE, "--agent", "replay", "--agent-opt", "bogus=1", "--device", "x",
                 "--out", str(tmp_path / "r")]) == 2
    assert "no option 'bogus'" in capsys.readouterr().err
