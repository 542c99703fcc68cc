"""The servers the harness starts itself survive a busy machine: a port chosen free and taken by
another program before the server bound it (tests/fakes/port_squatter.py answers as the stranger
on the demo's adb port did) is replaced by another, each retry logged; the adb server used is the
one started (never a stranger's that answered); and a start that fails every time ends with one
line saying what was tried and what to do, never a traceback."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness.device.adb_server as adb_server
import harness.sim.process as sim_process
from harness.device.adb_server import AdbServer, adb_path, run_adb
from harness.core.ports import START_TRIES, StartError, free_port, listener_pid
from tests.fakes.port_squatter import PortSquatter

ROOT = Path(__file__).resolve().parents[2]
FAULT = "error: protocol fault (status 30 30 30 63?!)"


@pytest.fixture
def squatter():
    with PortSquatter() as sq:
        yield sq


def first_then_free(monkeypatch, module, port: int) -> list[int]:
    """``module.free_port`` hands out ``port`` first, then really free ones; returns what it gave."""
    given: list[int] = []

    def pick(*a, **kw) -> int:
        given.append(port if not given else free_port(*a, **kw))
        return given[-1]

    monkeypatch.setattr(module, "free_port", pick)
    return given


def test_the_squatter_answers_adb_as_the_stranger_did(squatter):
    """The double is faithful: adb's own client, asked to start a server on its port, says exactly
    what the failed demo said, and exits non-zero."""
    r = run_adb(["start-server"], squatter.port, timeout=30)
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1] == FAULT, r.stderr
    assert squatter.connections >= 1


def test_a_taken_adb_port_is_replaced_by_another(squatter, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="harness.device.adb_server")
    given = first_then_free(monkeypatch, adb_server, squatter.port)
    server = AdbServer().start()
    try:
        assert given[0] == squatter.port and server.port == given[1] != squatter.port
        warned = [r.getMessage() for r in caplog.records]
        assert warned == [f"adb server: cannot start on port {squatter.port} ({FAULT}); trying another port"]
        # the server talked to is the one started: a process of our adb binary listens on its port
        assert server.pid is not None and server.pid == listener_pid(server.port, adb_path())
        assert os.path.realpath(f"/proc/{server.pid}/exe") == os.path.realpath(adb_path())
        assert run_adb(["devices"], server.port).returncode == 0
    finally:
        server.stop()
    assert squatter.sock.fileno() != -1  # the stranger was left alone


def test_an_adb_server_already_on_the_chosen_port_is_not_taken_for_ours(monkeypatch, caplog):
    """Another program's adb server on the chosen port answers adb perfectly well; it is still not
    ours (adb did not start it), so another port is taken, and ours alone is stopped."""
    theirs = AdbServer().start()  # given its own port: the one "another program" runs
    try:
        given = first_then_free(monkeypatch, adb_server, theirs.port)
        caplog.set_level(logging.WARNING, logger="harness.device.adb_server")
        ours = AdbServer().start()
        try:
            assert given[0] == theirs.port and ours.port not in (theirs.port, 0)
            assert ours.pid != theirs.pid
            assert "an adb server that is not ours already listens there" in caplog.text
        finally:
            ours.stop()
        assert run_adb(["devices"], theirs.port).returncode == 0  # theirs still runs
    finally:
        theirs.stop()


def test_stop_leaves_a_server_that_is_no_longer_ours(monkeypatch):
    server = AdbServer().start()
    try:
        monkeypatch.setattr(server, "pid", server.pid + 1_000_000)  # as if ours had died and another took the port
        server.stop()
        assert run_adb(["devices"], server.port).returncode == 0  # not killed
    finally:
        monkeypatch.undo()
        server.stop()
    deadline = time.monotonic() + 10  # killed now: its listening socket goes with the process
    while listener_pid(server.port) is not None:
        assert time.monotonic() < deadline, "our adb server still listens after stop()"
        time.sleep(0.05)


def test_an_adb_start_that_fails_every_time_says_what_was_tried(monkeypatch, squatter):
    monkeypatch.setattr(adb_server, "free_port", lambda *a, **kw: squatter.port)
    with pytest.raises(StartError) as e:
        AdbServer().start()
    msg = str(e.value)
    assert "\n" not in msg and msg.count(f"{squatter.port} ({FAULT})") == START_TRIES, msg
    assert "run the command again" in msg and "ss -ltnp" in msg


def test_a_simulated_phone_whose_port_was_taken_starts_on_another(squatter, monkeypatch, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="harness.sim.process")
    given = first_then_free(monkeypatch, sim_process, squatter.port)
    phone = sim_process.start_sim_process(["--size", "540x1200"], tmp_path / "sim.log", cwd=ROOT)
    try:
        assert given[0] == squatter.port and phone.port == given[1]
        assert "address already in use" in (tmp_path / "sim.log").read_text()  # the first process said why it left
        assert [r.getMessage() for r in caplog.records] == [
            f"simulated phone: port {squatter.port} was taken before it could listen there; trying another"]
        assert listener_pid(phone.port) == phone.proc.pid  # its own process listens there, not a stranger
    finally:
        phone.stop()


def test_a_simulated_phone_that_cannot_start_says_why_in_one_line(monkeypatch, squatter, tmp_path):
    monkeypatch.setattr(sim_process, "free_port", lambda *a, **kw: squatter.port)
    with pytest.raises(StartError) as e:
        sim_process.start_sim_process([], tmp_path / "sim.log", cwd=ROOT)
    msg = str(e.value)
    assert "\n" not in msg and msg.count(f"{squatter.port} (harness: ") == START_TRIES and "address already in use" in msg
    assert str(tmp_path / "sim.log") in msg and "run the command again" in msg
    with pytest.raises(StartError, match=r"tried port \d+ \(harness: error: screen size 0x0 is outside .*See the log"):
        sim_process.start_sim_process(["--size", "0x0"], tmp_path / "bad.log", cwd=ROOT)  # not the port: no retry


def test_an_in_process_phone_whose_port_was_taken_listens_on_another(squatter, caplog):
    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve

    caplog.set_level(logging.WARNING, logger="harness.sim.serve")
    with pytest.raises(OSError):
        serve(SimPhone(540, 1200), squatter.port).stop()  # a port given by the user: no other is taken
    handle = serve(SimPhone(540, 1200), squatter.port, port_tries=START_TRIES)
    try:
        assert handle.port not in (squatter.port, 0) and handle.running
        assert f"simulated phone: port {squatter.port} is taken" in caplog.text
    finally:
        handle.stop()


def test_the_demo_startup_survives_a_stranger_on_its_ports(squatter, monkeypatch, tmp_path):
    """The demo's own startup path (harness.cli.demo.start_phones) with the stranger on the first port
    handed to the adb server and on the first handed to the phone: both move on, the phone answers."""
    from harness.cli.demo import start_phones

    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT", raising=False)
    adb_given = first_then_free(monkeypatch, adb_server, squatter.port)
    sim_given = first_then_free(monkeypatch, sim_process, squatter.port)
    phones: list = []
    server, serials = start_phones(1, tmp_path, phones)
    try:
        assert adb_given[0] == sim_given[0] == squatter.port
        assert server.port != squatter.port and phones[0].port != squatter.port
        r = run_adb(["-s", serials[0], "shell", "echo", "alive"], server.port)
        assert r.returncode == 0 and r.stdout.strip() == "alive", r
    finally:
        for p in phones:
            p.stop()
        server.stop()


def _failing_adb(folder: Path) -> Path:
    """An ``adb`` that fails as adb fails against the stranger, on every port (first on PATH)."""
    folder.mkdir()
    fake = folder / "adb"
    fake.write_text(f"#!/bin/sh\necho '* daemon not running; starting now' >&2\necho '{FAULT}' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return folder


def test_a_demo_that_cannot_start_prints_one_line_and_no_traceback(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if k != "ANDROID_ADB_SERVER_PORT"},
           "PATH": f"{_failing_adb(tmp_path / 'bin')}{os.pathsep}{os.environ.get('PATH', '')}"}
    p = subprocess.run([sys.executable, "-m", "harness.cli", "demo", "--phones", "1", "--out", str(tmp_path / "demo")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    lines = p.stderr.strip().splitlines()
    retries = [ln for ln in lines if ln.startswith("adb server: cannot start on port ")]
    assert len(retries) == START_TRIES - 1 and all(ln.endswith(f"({FAULT}); trying another port") for ln in retries)
    (last,) = [ln for ln in lines if ln not in retries]  # one line says it failed, what was tried, what to do
    assert last.startswith("harness demo: could not start a private adb server (") and last.count(FAULT) == START_TRIES
    assert "run the command again" in last
    assert "demo finished" not in p.stdout and not list((tmp_path / "demo").rglob("*.jsonl"))
