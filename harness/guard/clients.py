"""Which program sent a request: the process holding the client's end of a loopback connection,
found as ``ss -p`` finds it (Linux: the socket's inode in ``/proc/net/tcp``, then the process whose
``/proc/PID/fd`` holds ``socket:[INODE]``), with its parent (``adb`` run by ``node`` for
mobile-mcp, by ``python`` for a framework's device layer). Its command line is redacted like a
manifest (an ``--api-key`` on it is never recorded). Elsewhere than Linux, or when the process is
gone, only the peer address is known."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from harness.records import redact

ClientInfo = dict[str, Any]


def _inode(peer_port: int, server_port: int) -> str | None:
    """The inode of the client's socket: local port ``peer_port``, remote port ``server_port``."""
    want_local, want_remote = f"{peer_port:04X}", f"{server_port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    parts = line.split()
                    if len(parts) > 9 and parts[1].rsplit(":", 1)[-1] == want_local \
                            and parts[2].rsplit(":", 1)[-1] == want_remote:
                        return parts[9] if parts[9] != "0" else None
        except OSError:
            continue
    return None


_recent: list[int] = []  # the processes that sent the last requests: looked at first


def _pid_of(inode: str) -> int | None:
    target = f"socket:[{inode}]"
    try:
        # the same client again, else the newest processes first (an adb run for this one command)
        pids = [str(p) for p in _recent] + sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int, reverse=True)
    except OSError:
        return None
    for p in pids:
        try:
            for fd in os.listdir(f"/proc/{p}/fd"):
                try:
                    if os.readlink(f"/proc/{p}/fd/{fd}") == target:
                        if int(p) in _recent:
                            _recent.remove(int(p))
                        _recent.insert(0, int(p))
                        del _recent[8:]
                        return int(p)
                except OSError:
                    continue
        except OSError:
            continue
    return None


@dataclass
class _Proc:
    pid: int
    cmdline: list[str] = field(default_factory=list)
    ppid: int | None = None

    @classmethod
    def read(cls, pid: int) -> "_Proc | None":
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        return cls(pid, argv, ppid)


def _short(argv: list[str], keep: int = 12) -> list[str]:
    out = [a if len(a) <= 200 else a[:200] + "…" for a in argv[:keep]]
    return out + (["…"] if len(argv) > keep else [])


def client_info(peer: Any, server_port: int) -> ClientInfo:
    """``{"peer": "127.0.0.1:PORT", "pid", "program", "argv", "parent": {"pid", "program", "argv"}}``,
    as much of it as can be found."""
    host, port = (peer[0], peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else (str(peer), 0)
    info: ClientInfo = {"peer": f"{host}:{port}"}
    inode = _inode(int(port), server_port) if port else None
    pid = _pid_of(inode) if inode else None
    proc = _Proc.read(pid) if pid else None
    if proc is None:
        return info
    info.update(pid=proc.pid, program=os.path.basename(proc.cmdline[0]) if proc.cmdline else None,
                argv=redact(_short(proc.cmdline)))
    parent = _Proc.read(proc.ppid) if proc.ppid else None
    if parent is not None and parent.cmdline:
        info["parent"] = {"pid": parent.pid, "program": os.path.basename(parent.cmdline[0]),
                          "argv": redact(_short(parent.cmdline))}
    return info


def describe(info: ClientInfo) -> str:
    """``adb (pid 123, run by node)`` or the peer address."""
    if info.get("program"):
        by = f", run by {info['parent']['program']}" if info.get("parent") else ""
        return f"{info['program']} (pid {info['pid']}{by})"
    return str(info.get("peer"))
