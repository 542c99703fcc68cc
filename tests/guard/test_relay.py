"""The guard's endpoint as an adb server: the adb binary and adbutils, pointed at it, see the guarded
phone and only it; device services reach the phone byte for byte (a gatekeeper that passes
everything stands in for the session here); what reaches beyond the phone is refused, saying why."""

from __future__ import annotations

import os
import socket
import subprocess

import adbutils
import pytest

from harness.device.adb_server import adb_path
from harness.guard import wire
from harness.guard.relay import GuardServer, Upstream


class PassAll:
    def __init__(self):
        self.services, self.forwards, self.refusals, self.open = [], [], [], 0

    def service(self, call):
        self.services.append(call.service)
        call.relay()

    def forward(self, req, peer):
        self.forwards.append(req)
        return None

    def refused(self, req, reason, peer):
        self.refusals.append((req, reason))

    def connected(self, d):
        self.open += d

    def control(self, req, answer):
        return False


@pytest.fixture(scope="module")
def two_phones(adb):
    from harness.core.ports import START_TRIES, free_port
    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve

    handles = [serve(SimPhone(w, h), free_port(), port_tries=START_TRIES) for w, h in ((1080, 2400), (720, 1280))]
    serials = [adb.connect(f"127.0.0.1:{h.port}") for h in handles]
    yield serials
    for s, h in zip(serials, handles):
        adb.disconnect(s)
        h.stop()


@pytest.fixture
def relay(adb, two_phones):
    keeper = PassAll()
    g = GuardServer(two_phones[0], Upstream("127.0.0.1", adb.port), keeper).start()
    yield g, keeper, two_phones
    g.stop()


def _adb(port, *args, timeout=30):
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(port)}
    return subprocess.run([adb_path(), *args], env=env, capture_output=True, timeout=timeout)


def test_the_adb_binary_sees_the_guarded_phone_only(relay):
    g, keeper, (ours, other) = relay
    r = _adb(g.port, "devices", "-l")
    assert r.returncode == 0
    assert ours in r.stdout.decode() and other not in r.stdout.decode()
    r = _adb(g.port, "-s", ours, "shell", "echo", "hi", "there")
    assert (r.returncode, r.stdout) == (0, b"hi there\n")
    r = _adb(g.port, "shell", "getprop", "ro.product.model")  # no -s: the only device there is
    assert r.returncode == 0 and r.stdout.strip()
    r = _adb(g.port, "-s", other, "shell", "echo", "x")
    assert r.returncode != 0 and b"not found" in r.stderr and ours.encode() in r.stderr
    assert keeper.services[:2] == ["shell,v2,TERM=xterm,raw:echo hi there", "shell,v2,TERM=xterm,raw:getprop ro.product.model"] \
        or all(s.startswith("shell,v2") for s in keeper.services[:2])
    assert any(other in req for req, _ in keeper.refusals)


def test_screencap_and_file_transfers_pass_byte_for_byte(relay, adb, tmp_path):
    g, keeper, (ours, _) = relay
    direct = _adb(adb.port, "-s", ours, "exec-out", "screencap", "-p").stdout
    through = _adb(g.port, "-s", ours, "exec-out", "screencap", "-p").stdout
    assert through[:8] == b"\x89PNG\r\n\x1a\n" and through == direct
    src = tmp_path / "blob.bin"
    src.write_bytes(os.urandom(300_000))
    assert _adb(g.port, "-s", ours, "push", str(src), "/sdcard/blob.bin").returncode == 0
    assert _adb(g.port, "-s", ours, "pull", "/sdcard/blob.bin", str(tmp_path / "back.bin")).returncode == 0
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    assert keeper.services.count("sync:") == 2


def test_adbutils_through_the_guard(relay):
    g, keeper, (ours, other) = relay
    c = adbutils.AdbClient(host="127.0.0.1", port=g.port)
    assert [d.serial for d in c.device_list()] == [ours]
    d = c.device(ours)
    r = d.shell2("echo out; echo err >&2; false")
    assert r.returncode == 1 and "out" in r.output
    assert d.shell("wm size").startswith("Physical size: 1080x2400")
    with pytest.raises(adbutils.AdbError):
        c.device(other).shell("echo x")


def test_forwards_are_told_to_the_gatekeeper_and_listed_for_this_phone_only(relay, adb):
    g, keeper, (ours, other) = relay
    direct = adbutils.AdbClient(host="127.0.0.1", port=adb.port)
    direct.device(other).forward("tcp:0", "tcp:9009")  # another phone's forward: never listed here
    r = _adb(g.port, "-s", ours, "forward", "tcp:0", "tcp:9008")
    assert r.returncode == 0 and r.stdout.strip().isdigit()
    assert keeper.forwards == ["forward:tcp:0;tcp:9008"]
    listed = _adb(g.port, "forward", "--list").stdout.decode()
    assert ours in listed and other not in listed
    direct.device(other).forward_remove_all() if hasattr(direct.device(other), "forward_remove_all") else None


@pytest.mark.parametrize("text,why", [
    ("host:kill", "reaches beyond"), ("host:connect:127.0.0.1:9", "reaches beyond"),
    ("host:disconnect:", "reaches beyond"), ("host:transport:emulator-5554", "not found"),
    ("host:nonsense", "not relayed"), ("host-serial:emulator-5554:features", "not found"),
    ("host-transport-id:987654:features", "not found"), ("host:killforward-all", "not relayed"),
])
def test_requests_beyond_the_phone_are_refused_saying_why(relay, text, why):
    g, keeper, _ = relay
    with socket.create_connection(("127.0.0.1", g.port), timeout=10) as s:
        s.sendall(wire.request(text))
        msg = wire.read_status(s)
    assert msg is not None and why in msg
    assert keeper.refusals and keeper.refusals[-1][0] == text


def test_track_devices_streams_the_guarded_phone_only(relay):
    g, keeper, (ours, other) = relay
    with socket.create_connection(("127.0.0.1", g.port), timeout=10) as s:
        s.sendall(wire.request("host:track-devices"))
        assert wire.read_status(s) is None
        first = wire.read_counted(s).decode()
    assert ours in first and other not in first


def test_transport_ids_reach_the_guarded_phone_only(relay):
    g, keeper, (ours, _) = relay
    tid = g.transport_id(refresh=True)
    assert tid is not None
    c = adbutils.AdbClient(host="127.0.0.1", port=g.port)
    assert c.device(transport_id=tid).shell("echo by-id").strip() == "by-id"
