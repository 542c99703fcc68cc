"""harness guard under faults: the client killed mid-command and while its action is being decided,
the real adb server restarted, the phone unplugged, two guards on two phones at once, garbage and a
megabyte on the wire, another phone's serial asked for. Nothing recorded is lost, every refusal
has a clear reason, and the guard goes on serving."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time

import pytest

from harness.device.adb_server import AdbServer, adb_path
from harness.guard import wire

pytestmark = pytest.mark.faults


def _adb_popen(port: int, *args: str) -> subprocess.Popen:
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(port)}
    return subprocess.Popen([adb_path(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_client_killed_mid_command_or_while_its_action_is_decided(guard, risky, monitor):
    risky()
    g = guard()
    p = _adb_popen(g.port, "-s", g.serial, "shell", "input", "swipe", "500", "1500", "500", "500", "2000")
    time.sleep(1.0)
    p.kill()  # mid-command: the phone already has it
    p.wait(10)
    # killed while the monitor decides: its action is never relayed
    hold = threading.Event()
    original = monitor.respond

    def slow(req):
        hold.wait(10)
        return original(req)

    monitor.server.set(slow)
    try:
        p = _adb_popen(g.port, "-s", g.serial, "shell", "input", "tap", "640", "640")
        time.sleep(1.5)
        p.kill()
        p.wait(10)
        hold.set()
        time.sleep(0.5)
    finally:
        monitor.server.set(original)
    assert g.adb("-s", g.serial, "shell", "input", "tap", "10", "20").returncode == 0  # the guard goes on
    g.end()
    steps = g.steps()
    assert [s["action"]["type"] for s in steps] == ["swipe", "click", "click"]
    assert steps[0]["executed"] is True
    assert steps[1]["executed"] is False and "went away" in steps[1]["invalid"]
    assert ["input", "tap", "640", "640"] not in g.ran() and ["input", "tap", "10", "20"] in g.ran()


def test_the_real_adb_server_restarted_and_the_phone_unplugged(serve_sim, guard, risky, tmp_path):
    risky()
    own = AdbServer().start()  # a server of this test's own: it is killed and restarted
    try:
        sim = serve_sim(command_log=tmp_path / "own.jsonl")
        own.connect(sim.serial)
        g = guard("--adb-port", str(own.port), sim=sim)
        g.log = tmp_path / "own.jsonl"
        assert g.adb("-s", g.serial, "shell", "input", "tap", "100", "100").returncode == 0
        own.stop()
        r = g.adb("-s", g.serial, "shell", "input", "tap", "200", "200")
        assert r.returncode != 0 and b"cannot reach the adb server" in r.stderr
        port = own.port
        own = AdbServer(port=port).start()
        own.connect(sim.serial)
        assert g.adb("-s", g.serial, "shell", "input", "tap", "300", "300").returncode == 0  # back, by itself
        own.disconnect(sim.serial)  # unplugged
        r = g.adb("-s", g.serial, "shell", "input", "tap", "400", "400")
        assert r.returncode != 0 and b"not found" in r.stderr
        result = g.end()  # the final screen cannot be taken: every step is written all the same
    finally:
        own.stop()
    ran = g.ran()
    assert ["input", "tap", "100", "100"] in ran and ["input", "tap", "300", "300"] in ran
    assert ["input", "tap", "200", "200"] not in ran and ["input", "tap", "400", "400"] not in ran
    assert [(s["action"]["x"], s["executed"]) for s in g.steps()] == [(100, True), (300, True)]
    reasons = [e["reason"] for e in g.events() if e["event"] == "refused"]
    assert any("cannot reach the adb server" in r for r in reasons)
    assert result.proposed_steps == 2 and (g.out / "results.jsonl").exists()


def test_two_guards_on_two_phones_at_once(guard, risky):
    risky(r"x=900, y=2000")
    a, b = guard(), guard()
    for g, other in ((a, b), (b, a)):
        listed = g.adb("devices").stdout.decode()
        assert g.serial in listed and other.serial not in listed
        r = g.adb("-s", other.serial, "shell", "input", "tap", "5", "5")
        assert r.returncode != 0 and b"not found" in r.stderr
    threads = [threading.Thread(target=g.adb, args=("-s", g.serial, "shell", "input", "tap", str(x), str(x)))
               for g, x in ((a, 111), (b, 222))]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert b.adb("-s", b.serial, "shell", "input", "tap", "900", "2000").returncode == 1
    a.end(), b.end()
    assert ["input", "tap", "111", "111"] in a.ran() and ["input", "tap", "222", "222"] not in a.ran()
    assert ["input", "tap", "222", "222"] in b.ran() and ["input", "tap", "900", "2000"] not in b.ran()
    assert [s["executed"] for s in b.steps()] == [True, False]


def test_garbage_and_a_megabyte_request_are_refused_and_the_guard_goes_on(guard, risky):
    risky()
    g = guard()
    for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"zzzz", b"ffff" + b"A" * (1 << 20), os.urandom(4096),
                 wire.request("host:transport:" + "x" * 60000)):
        with socket.create_connection(("127.0.0.1", g.port), timeout=10) as s:
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                reply = s.recv(4096)
            except OSError:
                reply = b""
        assert reply == b"" or reply.startswith(b"FAIL"), junk[:20]
    assert g.adb("-s", g.serial, "shell", "input", "tap", "7", "8").returncode == 0
    g.end()
    assert ["input", "tap", "7", "8"] in g.ran()
    assert [s["action"] for s in g.steps()] == [{"type": "click", "x": 7, "y": 8}]
    assert len([e for e in g.events() if e["event"] == "refused"]) >= 4
