"""The simulated phone's ADB transport and services against the real adb server (adb 36 from the
adbutils wheel) and adbutils 2.12."""

from __future__ import annotations

import concurrent.futures
import os
import socket
import struct
import time
from pathlib import Path

import adbutils
import pytest

from fake_phone import FakePhone
from harness.sim.adb import packets as P


# --- connection states ---------------------------------------------------------------------------
def test_devices_lists_sim_as_device(sim, adb_server) -> None:
    assert adb_server.state(sim.serial) == "device"
    r = sim.run("shell", "getprop", "ro.product.model")
    assert r.stdout == b"CrateFake\n"
    feats = sim.run("features").stdout.decode()
    assert "shell_v2" in feats and "stat_v2" in feats


def test_unauthorized_mode(connect_phone, adb_server) -> None:
    sim = connect_phone(FakePhone(), mode="unauthorized")
    assert adb_server.state(sim.serial) == "unauthorized"
    r = sim.run("shell", "echo", "hi", timeout=15)
    assert r.returncode != 0 and b"unauthorized" in r.stderr
    assert not sim.server.device.opened  # nothing got through


# --- shell ---------------------------------------------------------------------------------------
def test_exec_out_screencap_is_exact(sim) -> None:
    r = sim.run("exec-out", "screencap -p")
    assert r.returncode == 0 and r.stdout == sim.phone._png


def test_shell_basics(sim) -> None:
    assert sim.run("shell", "wm size").stdout == b"Physical size: 1080x2400\n"
    assert sim.run("shell", "input tap 10 20").returncode == 0
    assert sim.phone.events[-1] == ("tap", 10, 20)
    assert sim.run("shell", "echo hi; false; echo $?").stdout == b"hi\n1\n"
    assert sim.run("shell", "ls /sdcard").stdout.decode().split() == [
        "Android", "DCIM", "Documents", "Download", "Movies", "Music", "Pictures"]


def test_shell_v2_exit_codes_and_streams(sim) -> None:
    assert sim.run("shell", "exit 3").returncode == 3
    assert sim.run("shell", "false").returncode == 1
    assert sim.run("shell", "no_such_tool").returncode == 127
    r = sim.run("shell", "echo out; echo err >&2")
    assert (r.stdout, r.stderr, r.returncode) == (b"out\n", b"err\n", 0)
    assert any(name.startswith("shell,v2,") for name in sim.server.device.opened)
    # stdin reaches the command, close-stdin ends it
    r = sim.run("shell", "cat > /sdcard/in.txt; wc -c /sdcard/in.txt", input=b"from host stdin")
    assert r.stdout.strip().startswith(b"15") and sim.phone.fs.read("/sdcard/in.txt") == b"from host stdin"


def test_legacy_shell_mode(connect_phone) -> None:
    sim = connect_phone(FakePhone(), mode="shell_v1_only")
    assert "shell_v2" not in sim.run("features").stdout.decode()
    r = sim.run("shell", "echo out; echo err >&2; exit 3")
    assert r.stdout == b"out\nerr\n"  # merged, in order
    assert r.returncode == 0  # the legacy protocol carries no exit status
    assert sim.run("shell", "input tap 1 2").returncode == 0
    assert sim.phone.events[-1] == ("tap", 1, 2)
    assert all(not n.startswith("shell,v2") for n in sim.server.device.opened)
    assert sim.run("exec-out", "screencap -p").stdout == sim.phone._png


# --- sync ----------------------------------------------------------------------------------------
def test_push_pull_roundtrip(sim, tmp_path: Path) -> None:
    data = os.urandom(300 * 1024)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    r = sim.run("push", str(src), "/sdcard/Download/big.bin")
    assert r.returncode == 0, r.stderr
    assert sim.phone.fs.read("/sdcard/Download/big.bin") == data
    dst = tmp_path / "back.bin"
    r = sim.run("pull", "/sdcard/Download/big.bin", str(dst))
    assert r.returncode == 0, r.stderr
    assert dst.read_bytes() == data
    # push into a directory and into missing parents (fixed_push_mkdir)
    assert sim.run("push", str(src), "/sdcard/Download/").returncode == 0
    assert sim.phone.fs.read("/sdcard/Download/big.bin") == data
    assert sim.run("push", str(src), "/sdcard/new/deep/x.bin").returncode == 0
    assert sim.phone.fs.read("/sdcard/new/deep/x.bin") == data
    # the shell user cannot write the system partition
    r = sim.run("push", str(src), "/system/x.bin")
    assert r.returncode != 0 and b"Read-only file system" in r.stderr
    r = sim.run("pull", "/sdcard/missing.bin", str(tmp_path / "m"))
    assert r.returncode != 0 and b"No such file or directory" in r.stderr


def test_pull_uiautomator_dump(sim, tmp_path: Path) -> None:
    r = sim.run("shell", "uiautomator dump")
    assert r.stdout == b"UI hierchary dumped to: /sdcard/window_dump.xml\n"
    assert sim.run("pull", "/sdcard/window_dump.xml", str(tmp_path / "d.xml")).returncode == 0
    assert (tmp_path / "d.xml").read_text().startswith("<?xml")


def test_pull_directory(sim, tmp_path: Path) -> None:
    sim.phone.fs.write("/sdcard/DCIM/a.jpg", b"aaa")
    sim.phone.fs.mkdir("/sdcard/DCIM/sub")
    sim.phone.fs.write("/sdcard/DCIM/sub/b.jpg", b"bbbb")
    assert sim.run("pull", "/sdcard/DCIM", str(tmp_path)).returncode == 0
    assert (tmp_path / "DCIM" / "a.jpg").read_bytes() == b"aaa"
    assert (tmp_path / "DCIM" / "sub" / "b.jpg").read_bytes() == b"bbbb"


# --- adbutils ------------------------------------------------------------------------------------
def test_adbutils_api(sim, adb_server, tmp_path: Path) -> None:
    client = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port)
    d = client.device(sim.serial)
    phone = sim.phone
    assert d.shell("echo hi") == "hi"
    r = d.shell2("sh -c 'echo a; exit 5'")
    assert (r.returncode, r.output) == (5, "a\n")
    r = d.shell2("echo b >&2; exit 4", v2=True)
    assert (r.returncode, r.stderr) == (4, "b\n")
    img = d.screenshot()
    assert img.size == (1080, 2400) and img.getpixel((800, 2150)) == (0, 120, 215)
    assert tuple(d.window_size()) == (1080, 2400)
    assert d.rotation() == 0
    d.click(100, 200)
    d.swipe(10, 20, 300, 400, 0.5)
    d.keyevent("BACK")
    d.send_keys("hello world")
    assert phone.events[-4:] == [("tap", 100, 200), ("swipe", 10, 20, 300, 400, 500), ("keyevent", "BACK"), ("input_text", "hello world")]
    d.app_start("com.example.notes", "com.example.notes.EditActivity")
    assert d.app_current().package == "com.example.notes"
    assert d.app_current().activity == "com.example.notes.EditActivity"
    d.app_start("com.example.shop")  # monkey
    assert d.app_current().package == "com.example.shop"
    d.app_stop("com.example.shop")
    assert phone.events[-1] == ("force_stop", "com.example.shop")
    d.app_clear("com.example.notes")
    assert phone.events[-1] == ("clear_data", "com.example.notes")
    assert d.app_info("com.example.notes").version_name == "1.0"
    assert "com.example.notes" in d.list_packages()
    xml = d.dump_hierarchy()
    assert xml.startswith("<?xml") and 'text="Save"' in xml
    payload = os.urandom(100_000)
    d.sync.push(payload, "/sdcard/Download/p.bin")
    assert phone.fs.read("/sdcard/Download/p.bin") == payload
    assert d.sync.read_bytes("/sdcard/Download/p.bin") == payload
    assert d.sync.stat("/sdcard/Download/p.bin").size == len(payload)
    assert {f.path for f in d.sync.list("/sdcard")} >= {"Download", "DCIM"}
    d.sync.pull("/sdcard/Download/p.bin", str(tmp_path / "p.bin"))
    assert (tmp_path / "p.bin").read_bytes() == payload
    fb = d.framebuffer()
    assert fb.size == (1080, 2400) and fb.mode == "RGBA" and fb.getpixel((800, 2150)) == (0, 120, 215, 255)
    assert d.getprop("ro.product.name") == "crate_fake"
    assert d.prop.model == "CrateFake"


def test_unknown_services_are_refused(sim) -> None:
    d = sim.device()
    for service in ("reboot:", "tcp:9008", "localabstract:foo", "remount:", "jdwp:1"):
        c = d.open_transport()
        c.send_command(service)
        with pytest.raises(adbutils.AdbError):
            c.check_okay()
        c.close()
    c = d.open_transport()
    c.send_command("root:")
    c.check_okay()
    assert c.read_until_close() == "adbd cannot run as root in production builds\n"
    assert d.shell("echo still alive") == "still alive"


# --- robustness ----------------------------------------------------------------------------------
def test_host_closing_mid_stream(sim) -> None:
    d = sim.device()
    conn = d.shell("echo started; sleep 30; echo never", stream=True)
    assert conn.conn.recv(100).startswith(b"started")  # the device is inside the command
    conn.close()
    big = os.urandom(4 << 20)
    sim.phone.fs.write("/sdcard/big.bin", big)
    conn = d.shell("cat /sdcard/big.bin", stream=True)
    assert len(conn.conn.recv(1000)) > 0
    conn.close()  # while megabytes are still queued on the device side
    assert d.shell("echo ok") == "ok"
    assert sim.run("shell", "echo ok2").stdout == b"ok2\n"


def test_parallel_shells(sim) -> None:
    def one(i: int) -> bytes:
        return sim.run("shell", f"echo start {i}; sleep 0.2; echo end {i}").stdout

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        results = list(pool.map(one, range(10)))
    assert results == [f"start {i}\nend {i}\n".encode() for i in range(10)]
    assert time.monotonic() - t0 < 5  # they ran concurrently, not one after another


def test_megabyte_stdout(sim) -> None:
    blob = os.urandom(1 << 20)
    sim.phone.fs.write("/sdcard/blob.bin", blob)
    assert sim.run("exec-out", "cat /sdcard/blob.bin").stdout == blob
    assert sim.run("shell", "cat /sdcard/blob.bin").stdout == blob
    d = sim.device()
    assert d.shell("cat /sdcard/blob.bin", encoding=None) == blob
    raw = d.shell("screencap", encoding=None)
    assert len(raw) == 16 + 1080 * 2400 * 4


def _raw_connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(P.encode(P.cnxn(0x01000001, 1 << 20, "host::features=shell_v2")))
    header = _recv_exactly(s, 24)
    cmd, arg0, arg1, length, _, _ = struct.unpack("<6I", header)
    banner = _recv_exactly(s, length)
    assert cmd == P.A_CNXN and arg0 == 0x01000001 and banner.startswith(b"device::")
    return s


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``s``. MSG_WAITALL is no help here: a socket with a timeout is
    non-blocking underneath, so one recv may return part of a large WRTE under load."""
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def _recv_msg(s: socket.socket) -> P.Message:
    header = _recv_exactly(s, 24)
    cmd, a0, a1, n, _, _ = struct.unpack("<6I", header)
    data = _recv_exactly(s, n) if n else b""
    return P.Message(cmd, a0, a1, data)


def test_raw_protocol_and_bogus_length(sim) -> None:
    port = sim.server.port
    s = _raw_connect(port)
    # a raw stream: OPEN, OKAY, WRTE, host OKAY, CLSE
    s.sendall(P.encode(P.Message(P.A_OPEN, 7, 0, b"shell:echo raw\0"), with_checksum=False))
    m = _recv_msg(s)
    assert m.command == P.A_OKAY and m.arg1 == 7
    local = m.arg0
    m = _recv_msg(s)
    assert m.command == P.A_WRTE and m.data == b"raw\n" and (m.arg0, m.arg1) == (local, 7)
    s.sendall(P.encode(P.okay(7, local)))
    m = _recv_msg(s)
    assert m.command == P.A_CLSE and (m.arg0, m.arg1) == (local, 7)
    # a refused service
    s.sendall(P.encode(P.Message(P.A_OPEN, 8, 0, b"tcp:9008\0")))
    m = _recv_msg(s)
    assert (m.command, m.arg0, m.arg1) == (P.A_CLSE, 0, 8)
    # a huge bogus payload length: the connection is dropped...
    s.sendall(struct.pack("<6I", P.A_WRTE, 7, local, 0x7FFFFFF0, 0, P.A_WRTE ^ 0xFFFFFFFF))
    s.settimeout(5)
    assert s.recv(100) == b""
    s.close()
    # ... and garbage too, but never the server
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert s.recv(100) == b""
    s.close()
    assert sim.run("shell", "echo fine").stdout == b"fine\n"


def test_stop_and_restart_server(connect_phone, adb_server) -> None:
    sim = connect_phone(FakePhone())
    port = sim.server.port
    sim.server.stop()
    deadline = time.monotonic() + 10
    while adb_server.state(sim.serial) == "device" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert adb_server.state(sim.serial) != "device"
    sim.server.start()
    assert sim.server.port == port
    adb_server.run("connect", sim.serial)
    adb_server.wait_state(sim.serial, "device")
    assert sim.run("shell", "echo back").stdout == b"back\n"


def test_sync_is_a_byte_stream(sim) -> None:
    """SEND header, DATA and DONE arrive split at arbitrary points and packed together."""
    s = _raw_connect(sim.server.port)
    s.sendall(P.encode(P.Message(P.A_OPEN, 21, 0, b"sync:\0")))
    m = _recv_msg(s)
    assert m.command == P.A_OKAY
    local = m.arg0
    path = b"/sdcard/Download/odd.bin,33188"
    content = os.urandom(70_000)
    blob = b"SEND" + struct.pack("<I", len(path)) + path
    blob += b"DATA" + struct.pack("<I", 65536) + content[:65536]
    blob += b"DATA" + struct.pack("<I", len(content) - 65536) + content[65536:]
    blob += b"DONE" + struct.pack("<I", 1700000000)
    cuts = [3, 9, 41, 5000, 65600, len(blob)]  # mid-id, mid-length, mid-path, mid-data...
    start = 0
    for cut in cuts:
        s.sendall(P.encode(P.wrte(21, local, blob[start:cut])))
        ack = _recv_msg(s)
        assert ack.command == P.A_OKAY and (ack.arg0, ack.arg1) == (local, 21)
        start = cut
    m = _recv_msg(s)
    assert m.command == P.A_WRTE and m.data == b"OKAY\0\0\0\0"
    assert sim.phone.fs.read("/sdcard/Download/odd.bin") == content
    assert sim.phone.fs.stat("/sdcard/Download/odd.bin")[2] == 1700000000
    s.sendall(P.encode(P.okay(21, local)))
    # STAT + RECV + QUIT packed into one WRTE
    req = b"STAT" + struct.pack("<I", 24) + b"/sdcard/Download/odd.bin"
    req += b"RECV" + struct.pack("<I", 24) + b"/sdcard/Download/odd.bin" + b"QUIT" + b"\0" * 4
    s.sendall(P.encode(P.wrte(21, local, req)))
    got = bytearray()
    while True:
        m = _recv_msg(s)
        if m.command == P.A_OKAY:
            continue
        if m.command == P.A_CLSE:
            break
        got += m.data
        s.sendall(P.encode(P.okay(21, local)))
    assert got[:4] == b"STAT"
    mode, size, mtime = struct.unpack("<III", got[4:16])
    assert size == len(content) and mtime == 1700000000
    body = bytes(got[16:])
    out = bytearray()
    while body[:4] == b"DATA":
        n = struct.unpack("<I", body[4:8])[0]
        out += body[8 : 8 + n]
        body = body[8 + n :]
    assert body == b"DONE\0\0\0\0" and bytes(out) == content
    s.close()


def test_serve_blocking_mode(adb_server) -> None:
    import threading

    from harness.sim.serve import SimServer

    server = SimServer(FakePhone(), port=0)  # a kernel-chosen ephemeral port (>= 32768 on Linux)
    t = threading.Thread(target=server.serve_forever)
    t.start()
    deadline = time.monotonic() + 5
    while not server.running and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert adb_server.run("connect", server.serial).returncode == 0
        adb_server.wait_state(server.serial, "device")
        assert adb_server.run("-s", server.serial, "shell", "echo blocking").stdout == b"blocking\n"
    finally:
        adb_server.run("disconnect", server.serial)
        server.stop()
        t.join(5)
    assert not t.is_alive() and server.wait(1)
