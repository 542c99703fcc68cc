"""Device faults over the real adb server: a simulated phone dies mid-episode (and comes back on its
own, mid-run and right before --resume: it is waited for), the adb server is killed mid-run (and
restarted once, quietly, however many threads find it gone), a device answers `unauthorized`,
screencap returns garbage, an action hangs past its timeout. Afterwards: nothing recorded is lost, device failures end as `infra_error` (retried
on a healthy device, never counted against the agent), the cause is reported, and the run resumes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from agents.replay import ReplayAgent, ReplayConfig
from harness.device.adb_server import free_port, run_adb
from harness.device.base import InfraError
from harness.records import RunWriter, iter_steps, read_manifest, read_results
from harness.run.suite import Plugins, SuiteConfig, run_suite
from harness.core.tasks import load_suite
from judges.oracle import OracleConfig, OracleJudge
from tests.faults.helpers import (SHORT, adb_devices, check_run_consistent, harness_popen, harness_run,
                                  results_table, wait_for, write_suite)

pytestmark = pytest.mark.faults


def _episodes_underway(run: Path) -> bool:
    eps = run / "episodes"
    if not eps.is_dir():
        return False
    return any((e / "trajectory.jsonl").is_file() and (e / "trajectory.jsonl").stat().st_size > 0 for e in eps.iterdir())


def _replay_args(suite: Path, serials: list[str], adb_port: int, out: Path) -> list[str]:
    return ["run", "--suite", str(suite), "--devices", ",".join(serials), "--agent", "replay", "--judge", "oracle",
            "--adb-port", str(adb_port), "--out", str(out)]


def _all_clean_successes(run: Path, ids: list[str]) -> list:
    """A clean replay of these tasks succeeds everywhere; a device fault must not change that."""
    rows = read_results(run)
    assert sorted(r.task_id for r in rows) == sorted(ids)
    bad = [(r.task_id, r.status, r.verdicts, r.error) for r in rows
           if r.status != "finished" or r.verdicts.get("oracle") is not True]
    assert not bad, bad
    return rows


# --- the simulated phone dies mid-episode ----------------------------------------------------------
@pytest.mark.slow
def test_sim_dies_mid_episode_retried_on_the_other_phone(adb, sims, tmp_path):
    a, b = sims(adb), sims(adb)
    suite = write_suite(tmp_path / "suite.yaml", SHORT)
    run = tmp_path / "run"
    p = harness_popen(_replay_args(suite, [a.serial, b.serial], adb.port, run), adb.port)
    assert wait_for(lambda: _episodes_underway(run), 60), "no episode started"
    a.kill()  # mid-episode: both phones are busy while tasks remain
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, err
    rows = _all_clean_successes(run, SHORT)
    retried = [r for r in rows if r.attempt == 2]
    assert retried and all(r.device == b.serial for r in retried), rows
    assert all(r.device == b.serial for r in rows if r.device != a.serial)
    # the cause is reported: which device, what failed, that it was retried and the device is gone
    assert f"[{a.serial}]" in err and "infra error, retrying elsewhere" in err and "device lost" in err, err
    m = read_manifest(run)
    assert m["dead_devices"] == [a.serial] and m["not_run"] == []
    check_run_consistent(run)
    # nothing left to do: --resume is accepted and changes nothing
    before = results_table(run)
    r = harness_run([*_replay_args(suite, [b.serial], adb.port, run), "--resume"], adb.port)
    assert r.returncode == 0, r.stderr
    assert results_table(run) == before


@pytest.mark.slow
def test_only_phone_dies_leaves_a_resumable_run(adb, sims, tmp_path):
    """With no healthy phone left, the unfinished tasks are not run (not counted as failures), the
    run says so, and --resume on a new phone finishes them."""
    a = sims(adb)
    ids = SHORT[:3]
    suite = write_suite(tmp_path / "suite.yaml", ids)
    run = tmp_path / "run"
    p = harness_popen([*_replay_args(suite, [a.serial], adb.port, run), "--reconnect-timeout", "2"], adb.port)
    assert wait_for(lambda: _episodes_underway(run), 60), "no episode started"
    t_kill = time.monotonic()
    a.kill()
    out, err = p.communicate(timeout=120)
    assert "device lost" in err and "continue with --resume" in out, (out, err)
    assert p.returncode == 3, (p.returncode, err)  # tasks left unrun: not a clean exit for CI users
    assert time.monotonic() - t_kill < 15  # gave up on the dead phone after --reconnect-timeout, not 15 s
    rows = read_results(run)
    assert all(r.status == "finished" for r in rows) and len(rows) < len(ids)  # nothing miscounted
    m = read_manifest(run)
    assert m["dead_devices"] == [a.serial] and len(m["not_run"]) == len(ids) - len(rows)
    assert m["device_config"]["reconnect_timeout"] == 2
    check_run_consistent(run)
    b = sims(adb)
    r = harness_run([*_replay_args(suite, [b.serial], adb.port, run), "--resume"], adb.port)
    assert r.returncode == 0, r.stderr
    _all_clean_successes(run, ids)
    check_run_consistent(run)


# --- the adb server is killed mid-run ----------------------------------------------------------
@pytest.mark.slow
def test_adb_server_killed_mid_run_is_restarted_and_episodes_retried(own_adb, sims, tmp_path):
    a, b = sims(own_adb), sims(own_adb)
    suite = write_suite(tmp_path / "suite.yaml", SHORT)
    run = tmp_path / "run"
    p = harness_popen(_replay_args(suite, [a.serial, b.serial], own_adb.port, run), own_adb.port)
    assert wait_for(lambda: _episodes_underway(run), 60), "no episode started"
    r = run_adb(["kill-server"], own_adb.port)
    assert r.returncode == 0, r.stderr
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, err
    rows = _all_clean_successes(run, SHORT)  # the interrupted episodes were redone, none miscounted
    assert any(r.attempt == 2 for r in rows), rows
    assert "infra error, retrying elsewhere" in err, err
    assert "daemon" not in err + out, err  # adb's "* daemon started successfully" is not ours to print
    assert read_manifest(run)["dead_devices"] == []  # the harness restarted the server and reconnected
    assert adb_devices(own_adb.port).get(a.serial) == "device"
    check_run_consistent(run)


def test_threads_that_find_the_adb_server_gone_restart_it_once_and_quietly(own_adb, sims, monkeypatch, capfd):
    """Four devices' threads all hit a killed adb server at once: one `adb start-server` (on the
    server's own port, not adb's default), its start-up lines never printed, every command answered."""
    import harness.device.adb_server as adb_server
    from harness.device.adb import AdbDevice

    phones = [sims(own_adb) for _ in range(2)]
    devs = [AdbDevice(p.serial, port=own_adb.port, command_timeout=20) for p in phones for _ in range(2)]
    starts = []
    real = adb_server.run_adb

    def counting(args, port=None, timeout=20.0, **kw):
        if args[:1] == ["start-server"]:
            starts.append(port)
        return real(args, port, timeout, **kw)

    monkeypatch.setattr(adb_server, "run_adb", counting)
    assert real(["kill-server"], own_adb.port).returncode == 0
    capfd.readouterr()
    go = threading.Barrier(len(devs))
    answers: list[object] = [None] * len(devs)

    def work(i: int) -> None:
        go.wait()
        dev = devs[i]
        try:
            if not dev.reconnect(30):
                answers[i] = "no reconnect"
                return
            answers[i] = dev.shell(["echo", f"ok{i}"])
        except Exception as e:  # a failure is an answer the assertion below shows
            answers[i] = e

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(devs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert answers == [f"ok{i}" for i in range(len(devs))], answers
    assert starts == [own_adb.port], starts
    out, err = capfd.readouterr()
    assert "daemon" not in out + err, (out, err)


@pytest.mark.slow
def test_a_phone_that_restarts_is_waited_for_mid_run_and_on_resume(adb, sims, tmp_path):
    """The only phone dies mid-episode and comes back on its own (no one reconnects adb for the
    harness): the episode is retried on it ("retrying once the phone is back", not "elsewhere").
    Then it restarts again just before --resume: the harness waits for it instead of refusing
    "offline"."""
    a = sims(adb)
    ids = SHORT[:2]
    suite = write_suite(tmp_path / "suite.yaml", ids)
    run = tmp_path / "run"
    args = [*_replay_args(suite, [a.serial], adb.port, run), "--reconnect-timeout", "90"]
    p = harness_popen(args, adb.port)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, "")), daemon=True)
    reader.start()
    assert wait_for(lambda: _episodes_underway(run), 60), "no episode started"
    a.kill()
    assert wait_for(lambda: any("infra error" in x for x in lines), 90), lines
    retry = next(x for x in lines if "infra error" in x)
    assert "retrying once the phone is back" in retry and "elsewhere" not in retry, retry
    a.start(connect=False)
    p.wait(timeout=180)
    reader.join(10)
    assert p.returncode == 0, "".join(lines)
    rows = _all_clean_successes(run, ids)
    assert any(r.attempt == 2 and r.device == a.serial for r in rows), rows
    # the phone restarts right before --resume: adb lists it offline for a while
    before = results_table(run)
    a.kill()
    assert wait_for(lambda: adb_devices(adb.port).get(a.serial) == "offline", 60), adb_devices(adb.port)
    p = harness_popen([*args, "--resume"], adb.port)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, "")), daemon=True)
    reader.start()
    assert wait_for(lambda: any("waiting up to 90 s for" in x for x in lines), 60), lines
    assert p.poll() is None  # waiting, not refused
    a.start(connect=False)
    p.wait(timeout=120)
    reader.join(10)
    assert p.returncode == 0, "".join(lines)
    assert results_table(run) == before
    check_run_consistent(run)


# --- a device that answers `unauthorized` ----------------------------------------------------------
def test_unauthorized_device_is_refused_with_the_cause(adb, tmp_path, capsys):
    from harness.cli.main import main
    from harness.device.adb import AdbDevice
    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve

    handle = serve(SimPhone(540, 1200), free_port(), mode="unauthorized")
    serial = f"127.0.0.1:{handle.port}"
    try:
        run_adb(["connect", serial], adb.port)
        assert wait_for(lambda: adb_devices(adb.port).get(serial) == "unauthorized", 15), adb_devices(adb.port)
        d = AdbDevice(serial, port=adb.port, command_timeout=5).describe()
        assert not d.healthy and d.state == "unauthorized" and "accept the USB debugging prompt" in d.problem
        suite = write_suite(tmp_path / "suite.yaml", SHORT[:1])
        out = tmp_path / "run"
        rc = main(["run", "--suite", str(suite), "--device", serial, "--agent", "replay", "--adb-port", str(adb.port),
                   "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2 and f"device {serial} is not usable: unauthorized" in err, err
        assert not out.exists()  # nothing was started, nothing to miscount
        assert main(["devices", "--adb-port", str(adb.port), "--json"]) == 0
        rows = {r["serial"]: r for r in json.loads(capsys.readouterr().out)}
        assert rows[serial]["healthy"] is False and rows[serial]["state"] == "unauthorized"
    finally:
        run_adb(["disconnect", serial], adb.port)
        handle.stop()


# --- screencap returns garbage ----------------------------------------------------------------------
def _patch_command(served, name: str, fn) -> None:
    """Replace one shell command of an in-process served phone (the adb path stays real)."""
    served.handle.device.shell._commands[name] = fn


def _run_suite_on(device, tasks, run: Path, agent=None, resume: bool = False):
    plugins = Plugins(agent=agent or (lambda: ReplayAgent(ReplayConfig())),
                      observers=lambda: [OracleJudge(OracleConfig())])
    with RunWriter(run, resume=resume, fsync=False) as w:
        return run_suite(tasks, [device], plugins, w, SuiteConfig(agent_name="replay", reconnect_timeout=5))


GARBAGE = {
    "not-png": b"\x00\x01garbage, not an image\n" * 50,
    "empty": b"",
    "truncated-png": None,  # a real PNG cut in half: the signature is right, the image is not
    "error-text": b"Error: failed to take screenshot (SurfaceFlinger died)\n",
}


@pytest.mark.parametrize("kind", list(GARBAGE))
def test_screencap_garbage_is_an_infra_error_with_the_cause(serve_sim, tmp_path, kind):
    s = serve_sim(width=540, height=1200)
    phone = s.phone
    calls = {"n": 0}
    good_for = 3  # the first screenshots are fine: the fault comes mid-episode

    def screencap(c):
        calls["n"] += 1
        if calls["n"] <= good_for:
            c.write(phone.screencap_png())
            return 0
        data = GARBAGE[kind]
        if data is None:
            png = phone.screencap_png()
            data = png[: len(png) // 2]
        c.write(data)
        return 0

    _patch_command(s, "screencap", screencap)
    tasks = load_suite(write_suite(tmp_path / "suite.yaml", ["settings_wifi_off"])).tasks
    dev = s.device(command_timeout=5)
    rep = _run_suite_on(dev, tasks, tmp_path / "run")
    rows = read_results(tmp_path / "run")
    assert len(rows) == 1
    r = rows[0]
    assert r.status == "infra_error" and r.attempt == 2, r  # retried once, then recorded as the device's fault
    assert r.verdicts == {}  # never judged: not counted against the agent
    assert "PNG" in r.error and s.serial in r.error, r.error
    assert not rep.error
    check_run_consistent(tmp_path / "run")
    for st in iter_steps(tmp_path / "run" / "episodes" / "settings_wifi_off"):
        assert (tmp_path / "run" / "episodes" / "settings_wifi_off" / st.screen_before).read_bytes().endswith(
            b"IEND\xaeB`\x82")  # whatever was recorded is a whole PNG
    # the health check sees it too, so `harness run` refuses the device up front
    d = dev.describe()
    assert not d.healthy and "PNG" in d.problem
    # resume: the episode is complete (with its infra_error), nothing is redone or duplicated
    rep2 = _run_suite_on(dev, tasks, tmp_path / "run", resume=True)
    assert rep2.skipped == ["settings_wifi_off"] and len(read_results(tmp_path / "run")) == 1


# --- an action hangs past its timeout -------------------------------------------------------------
@pytest.mark.slow
def test_hanging_action_times_out_as_infra_error(serve_sim, tmp_path):
    s = serve_sim(width=540, height=1200)
    real_input = s.handle.device.shell._commands["input"]
    hung = []

    def input_cmd(c):
        if len(c.argv) > 1 and c.argv[1] == "tap":
            hung.append(time.monotonic())
            c.cancel.wait(60)  # never answers (until adb gives up on the stream)
            return 0
        return real_input(c)

    _patch_command(s, "input", input_cmd)
    tasks = load_suite(write_suite(tmp_path / "suite.yaml", ["settings_wifi_off"])).tasks
    dev = s.device(command_timeout=1.5)
    t0 = time.monotonic()
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("rep", _run_suite_on(dev, tasks, tmp_path / "run")), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the run hung on a hanging action"
    elapsed = time.monotonic() - t0
    assert len(hung) == 2 and elapsed < 30, (hung, elapsed)  # two attempts, each cut off at the timeout
    r = read_results(tmp_path / "run")[0]
    assert r.status == "infra_error" and r.attempt == 2 and r.verdicts == {}
    assert r.error == f"{s.serial}: shell input failed: TimeoutError: timed out", r.error  # the phone, the command, why
    check_run_consistent(tmp_path / "run")


def test_device_errors_are_infra_errors_not_crashes(serve_sim):
    """Every device call on a phone that went away raises InfraError (which the runner records as
    infra_error), never a raw socket or adbutils exception."""
    s = serve_sim(width=540, height=1200)
    dev = s.device(command_timeout=3)
    dev.screen_size()
    s.stop()
    from harness.core.actions import Click, Key

    for call in (dev.screenshot, dev.hierarchy, lambda: dev.execute(Click(x=1, y=1)),
                 lambda: dev.execute(Key(key="back")), dev.state, lambda: dev.settle(None)):
        with pytest.raises(InfraError):
            call()


# --- a reset the device refuses ---------------------------------------------------------------------
class _RefusesReset:
    """A device double whose reset fails as a real phone's does when an app is missing."""

    def __new__(cls, serial: str):
        from harness.device.base import DeviceError
        from harness.sim.phone import SimPhone
        from tests.fakes.local_device import LocalSimDevice

        class Refusing(LocalSimDevice):
            def reset(self, setup, language):
                raise DeviceError(f"{self.serial}: pm clear com.missing.app failed: Error")

        return Refusing(SimPhone(540, 1200), serial=serial)


def test_a_refused_reset_is_recorded_and_retried_never_a_stuck_run(tmp_path):
    """Regression: an episode that ended at its reset (or at the agent's reset) left ended_at empty,
    so its result line failed validation and the worker thread died: with a second phone the run
    then waited forever for the lost episode."""
    from harness.sim.phone import SimPhone
    from tests.fakes.local_device import LocalSimDevice

    tasks = load_suite(write_suite(tmp_path / "suite.yaml", SHORT[:3])).tasks
    good = LocalSimDevice(SimPhone(540, 1200), serial="good")
    box: dict = {}
    plugins = Plugins(agent=lambda: ReplayAgent(ReplayConfig()), observers=lambda: [OracleJudge(OracleConfig())])

    def go():
        with RunWriter(tmp_path / "run", fsync=False) as w:
            box["rep"] = run_suite(tasks, [_RefusesReset("bad"), good], plugins, w,
                                   SuiteConfig(agent_name="replay", reconnect_timeout=0.1))

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the run hung after a refused reset"
    assert not box["rep"].error, box["rep"].error
    rows = read_results(tmp_path / "run")
    assert sorted(r.task_id for r in rows) == sorted(SHORT[:3])
    assert all(r.status == "finished" and r.device == "good" and r.ended_at for r in rows), rows
    # alone, the refusing phone records the failure with its cause, attempt 2, and the run ends
    with RunWriter(tmp_path / "alone", fsync=False) as w:
        rep = run_suite(tasks[:1], [_RefusesReset("bad")], plugins, w,
                        SuiteConfig(agent_name="replay", reconnect_timeout=0.1))
    r = read_results(tmp_path / "alone")[0]
    assert not rep.error and r.status == "infra_error" and r.attempt == 2 and r.verdicts == {}
    assert "reset failed" in r.error and "pm clear" in r.error and r.ended_at and r.duration_s is not None
    check_run_consistent(tmp_path / "alone")
