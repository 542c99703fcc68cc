"""One run per phone (harness/device/phone_lock.py) and journals that lose no entry
(harness/device/prepare.py): a second command on a phone in use is refused naming the holder's pid
and command, with nothing changed on the phone; a lock left by a killed holder is taken over with a
note; two processes writing one phone's journal at once keep every entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.device.phone_lock import PhoneBusy, children_env, hold, lock_key
from harness.device.prepare import Journal
from harness.device.text_input import ADB_IME
from harness.sim.phone import LATIN_IME
from tests.fakes.held_commands import HeldCommands
from tests.run.test_real_phone_runs import CONTACTS_TASK, PREPARED, _done, _globals, _harness, _suite

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def own_state(tmp_path, monkeypatch):
    """Journals and locks of this test only (subprocesses inherit them)."""
    monkeypatch.setenv("CRATE_HARNESS_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("CRATE_HARNESS_LOCKS", str(tmp_path / "locks"))


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_held_phone_is_refused_naming_the_holder_and_free_again_once_released():
    first = hold("SER1", "127.0.0.1", 5037, command="harness run --out runs/a")
    assert first.note is None
    with pytest.raises(PhoneBusy) as e:  # another open of the lock, even in this process, is another holder
        hold("SER1", "127.0.0.1", 5037)
    msg = str(e.value)
    assert f"pid {os.getpid()}" in msg and "`harness run --out runs/a`" in msg and f"kill {os.getpid()}" in msg
    assert "Nothing was changed on the phone" in msg and e.value.holder["pid"] == os.getpid()
    other = hold("SER1", "127.0.0.1", 5038)  # the same serial on another adb server is another phone
    other.release()
    first.release()
    again = hold("SER1", "127.0.0.1", 5037)
    assert again.note is None  # let go of properly: nothing to take over
    again.release()


def test_a_lock_left_by_a_killed_holder_is_taken_over_with_a_note(tmp_path):
    from harness.device.phone_lock import _file

    path = _file(lock_key("SER2", "127.0.0.1", 5037))
    path.parent.mkdir(parents=True, exist_ok=True)
    pid = _dead_pid()
    path.write_text(json.dumps({"pid": pid, "command": "harness run --out runs/killed", "since": "2026-01-01"}))
    lock = hold("SER2", "127.0.0.1", 5037)
    try:
        assert lock.note and f"pid {pid}" in lock.note and "runs/killed" in lock.note and "no longer running" in lock.note
        assert json.loads(path.read_text())["pid"] == os.getpid()  # the file names the new holder
    finally:
        lock.release()
    assert path.read_text() == ""  # let go of: nothing for the next one to take over


def test_a_child_of_the_holder_goes_on_under_its_lock_and_no_one_else_does(tmp_path):
    lock = hold("SER3", "127.0.0.1", 5037, command="harness tasks check")
    code = ("from harness.device.phone_lock import hold\n"
            "l = hold('SER3', '127.0.0.1', 5037)\nprint('shared' if l.shared else 'own')")
    try:
        child = subprocess.run([sys.executable, "-c", code], env=children_env([lock]), capture_output=True, text=True,
                               cwd=ROOT, timeout=60)
        assert child.returncode == 0 and child.stdout.strip() == "shared", child.stderr
        stranger = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert stranger.returncode != 0 and "is in use by another harness command" in stranger.stderr
    finally:
        lock.release()


WRITER = """
import sys
from harness.device.prepare import Change, Journal
j = Journal.open("phone-1", {"host": "127.0.0.1", "port": 5037})
name, n = sys.argv[1], int(sys.argv[2])
if sys.argv[3] == "add":
    for i in range(n):
        j.remember(Change("setting", "orig", "7", namespace="global", key=f"{name}_{i}"))
else:
    for c in [c for c in Journal.open("phone-1").changes if c.key.startswith(name + "_")]:
        j.forget(c)
"""


def test_two_processes_writing_one_phones_journal_lose_no_entry():
    def both(action: str) -> None:
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, name, "40", action], cwd=ROOT,
                                  stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
        for p in procs:
            assert p.wait(120) == 0, p.stderr.read()

    both("add")
    (journal,) = Journal.pending()
    assert sorted(c.key for c in journal.changes) == sorted(f"{n}_{i}" for n in "ab" for i in range(40))
    assert all(c.before == "orig" for c in journal.changes)
    both("forget")  # each restoring its own while the other does: nothing left, the file gone
    assert not Journal.pending() and not journal.path.exists()


def test_a_second_run_on_a_phone_in_use_is_refused_naming_the_first_whose_settings_stay(adb, serve_sim, tmp_path):
    sim = serve_sim(as_phone=True)
    originals = _globals(sim)
    hold_cmd = HeldCommands([sim])
    base = ["run", "--suite", str(_suite(tmp_path, [CONTACTS_TASK])), "--device", sim.serial, "--agent", "random",
            "--max-steps", "2", "--quiet"]
    hold_cmd.arm("input", 1)  # run A's first reset goes home, and waits there
    a = _harness([*base, "--out", str(tmp_path / "a")], adb.port)
    try:
        assert hold_cmd.reached.wait(120), "run A did not reach its reset"
        rc, out, err = _done(_harness([*base, "--out", str(tmp_path / "b")], adb.port))
        assert rc == 2, out + err
        assert f"pid {a.pid}" in err and "`harness run --suite" in err and str(tmp_path / "a") in err, err
        assert "is in use by another harness command" in err and "Nothing was changed on the phone" in err
        assert not (tmp_path / "b").exists()  # refused before its run folder was made
        for cmd in (["devices", "restore", sim.serial], ["devices", "prepare", sim.serial], ["devices", "restore"]):
            rc, out, err = _done(_harness(cmd, adb.port))
            assert rc == 2 and f"pid {a.pid}" in err, (cmd, out, err)
        assert _globals(sim) == PREPARED and sim.phone.ime == ADB_IME  # A's preparation is untouched
    finally:
        hold_cmd.release_all()
    rc, out, err = _done(a)
    assert rc == 0, out + err
    assert _globals(sim) == originals and sim.phone.ime == LATIN_IME and not Journal.pending()
    rc, out, err = _done(_harness([*base, "--out", str(tmp_path / "b")], adb.port))  # free again
    assert rc == 0 and "taking the phone over" not in err, out + err


def test_tasks_check_on_a_phone_in_use_is_refused_and_its_own_trial_runs_go_on_under_its_lock(serve_sim, tmp_path):
    import yaml

    from harness.run.task_checks import load_checked_suite
    from harness.run.task_trials import TrialError, run_trials
    from tests.run.test_tasks_check_live import WIFI

    sim = serve_sim(720, 1280)
    suite_file = tmp_path / "t.yaml"
    suite_file.write_text(yaml.safe_dump([WIFI]), encoding="utf-8")
    suite = load_checked_suite(suite_file)
    other = hold(sim.serial, "127.0.0.1", sim.adb.port, command="harness record --device X")
    try:
        with pytest.raises(TrialError, match="in use by another harness command: pid .*harness record"):
            run_trials(str(suite_file), suite, suite.tasks, devices=[sim.serial], sizes=[], adb_port=sim.adb.port, out=None)
    finally:
        other.release()
    report = run_trials(str(suite_file), suite, suite.tasks, devices=[sim.serial], sizes=[], adb_port=sim.adb.port,
                        out=str(tmp_path / "runs"))
    assert not report.problems, report.problems  # its `harness run` children were not refused by its own lock
    assert hold(sim.serial, "127.0.0.1", sim.adb.port).release() is None  # and it let go at the end


def test_record_on_a_phone_in_use_is_refused(adb, serve_sim, tmp_path):
    sim = serve_sim(as_phone=True)
    other = hold(sim.serial, "127.0.0.1", adb.port, command="harness run --out runs/busy")
    try:
        rc, out, err = _done(_harness(["record", "--device", sim.serial, "--id", "t", "--instruction", "Do it.",
                                       "--out", str(tmp_path / "t.yaml"), "--until-idle", "1"], adb.port))
    finally:
        other.release()
    assert rc == 2 and "`harness run --out runs/busy`" in err and not (tmp_path / "t.yaml").exists(), out + err


def test_a_journal_held_too_long_by_another_writer_is_a_clear_error_and_no_change(monkeypatch):
    import fcntl

    from harness.device import prepare as prep
    from harness.device.base import DeviceError
    from harness.device.prepare import Change

    journal = Journal.open("phone-2", {"host": "127.0.0.1", "port": 5037})
    lock_path = journal.path.with_name("phone-2.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another writer, as the kernel sees it (another open file)
    monkeypatch.setattr(prep, "JOURNAL_LOCK_S", 0.3)
    try:
        with pytest.raises(DeviceError, match=r"another harness process has been writing .* nothing was changed"):
            journal.remember(Change("setting", "1.0", "0", namespace="global", key="window_animation_scale"))
    finally:
        os.close(fd)
    assert not journal.changes and not journal.path.exists()  # not recorded, so never made (change_setting)
    journal.remember(Change("setting", "1.0", "0", namespace="global", key="window_animation_scale"))
    assert [c.key for c in Journal.pending()[0].changes] == ["window_animation_scale"]
