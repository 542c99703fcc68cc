"""Local TCP ports for the servers the harness starts itself (a private adb server, simulated
phones), and the one error a start that failed for good raises.

A free port is found by binding port 0 and closing the socket, then given to the server, which
binds it again: between the two another program may take it (on a busy machine it happens: the
demo once met a stranger on its adb port, and adb reported ``error: protocol fault (status 30 30
30 63?!)``, the first four bytes of its own ``000chost:version`` request echoed back). So every
starter here tries another port when its chosen one turns out taken, logs each retry, and when the
last try fails too raises :class:`StartError`, whose message is one line: what was tried, and what
to do. Commands print it as it is, never as a traceback.
"""

from __future__ import annotations

import socket
import time

EMULATOR_PORTS = range(5550, 5591)  # adb probes the odd ports 5555-5585 for emulators (FIELD_NOTES section 8)
START_TRIES = 3  # ports a starter tries before it gives up


class StartError(RuntimeError):
    """A local server could not be started: the message says what was tried and what to do."""


def free_port(avoid_emulator_range: bool = True) -> int:
    """A free TCP port on loopback; optionally outside adb's emulator scan range (odd 5555-5585)."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if not avoid_emulator_range or port not in EMULATOR_PORTS:
            return port


def wait_port(port: int, timeout: float, host: str = "127.0.0.1") -> bool:
    """True once something accepts TCP connections on host:port (within ``timeout`` seconds).
    Something: not necessarily the server meant to be there (see :func:`listener_pid`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes of TCP listeners on ``port`` (any address), from /proc/net/tcp and tcp6."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "0A" and int(parts[1].rpartition(":")[2], 16) == port:  # 0A: LISTEN
                inodes.add(parts[9])
    return inodes


def listener_pid(port: int, exe: str | None = None) -> int | None:
    """The process that listens on ``port`` (Linux: read from /proc), looked for among the
    processes running ``exe`` when given; None where it cannot be told (another OS, another user's
    process, or no listener)."""
    import os

    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{i}]" for i in inodes}
    real_exe = os.path.realpath(exe) if exe else None
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if real_exe is not None and os.readlink(f"/proc/{entry.name}/exe") != real_exe:
                continue
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                if os.readlink(fd.path) in wanted:
                    return int(entry.name)
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return None
