"""One run per phone: a lock on this host for each phone, by adb server and serial.

Two commands driving one phone at once tap over each other, and the one that ends first puts the
phone's settings back under the other (prepare's journal, harness/device/prepare.py). So every
command that drives or changes a phone holds its lock while it does: ``harness run`` (from before
prepare until after restore), ``harness record``, ``harness devices prepare`` and ``restore``,
``harness tasks check --device`` (its trial runs are covered by it), and a farm's device actor on
its node. A second one is refused at once, naming the holder (its pid and command line) and what
to do; it changes nothing on the phone.

The lock is an exclusive ``flock(2)`` on a file of this host's lock folder (``$CRATE_HARNESS_LOCKS``,
else ``$XDG_RUNTIME_DIR/crate-harness/phones``, else ``crate-harness-UID/phones`` in the temporary
folder), one file per adb server and serial. The kernel lets go of a ``flock`` when its holder's
process ends however it ends (SIGKILL, a crash), so a dead holder never blocks anyone; the holder's
description it left in the file is how the next one can say that it takes over from a run that
ended without letting go. The file is emptied on release and never removed (removing it would let
a process that opened it before the removal lock a file nobody else sees).

A command that runs harness commands for a phone it holds (``tasks check``'s trial runs) names the
phones in ``CRATE_HARNESS_HELD_PHONES`` for its children: a child whose parent holds the lock goes
on under it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

LOCKS_ENV = "CRATE_HARNESS_LOCKS"
HELD_ENV = "CRATE_HARNESS_HELD_PHONES"
POLL_S = 0.2


class PhoneBusy(RuntimeError):
    """Another process holds the phone; the message names it and says what to do."""

    def __init__(self, message: str, holder: dict[str, Any]):
        super().__init__(message)
        self.holder = holder


def locks_dir() -> Path:
    """This host's folder of phone locks (see the module docstring)."""
    env = os.environ.get(LOCKS_ENV)
    if env:
        return Path(env)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "crate-harness" / "phones"
    return Path(tempfile.gettempdir()) / f"crate-harness-{os.getuid()}" / "phones"


def lock_key(serial: str, host: str, port: int) -> str:
    """The one name of a phone on this host: its adb server and its serial."""
    return f"{host}:{port}/{serial}"


def _file(key: str) -> Path:
    return locks_dir() / (re.sub(r"[^A-Za-z0-9_.-]", "_", key) + ".lock")


def command_line(argv: list[str] | None = None) -> str:
    """This process's command line as a person would type it (``harness run ...``)."""
    argv = list(sys.argv if argv is None else argv)
    if argv and (Path(argv[0]).name == "harness" or
                 argv[0].endswith(("harness/cli/__main__.py", "harness/cli/main.py", "harness/__main__.py"))):
        argv[0] = "harness"
    return shlex.join(argv) if argv else "(unknown)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _read(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 1 << 16, 0)
        data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _holder_text(h: dict[str, Any]) -> str:
    return f"pid {h.get('pid', '?')}, `{h.get('command') or '(unknown command)'}`" + \
        (f", since {h['since']}" if h.get("since") else "")


@dataclass
class PhoneLock:
    """A phone held by this process (``release`` lets go). ``note``: said once, when the lock was
    taken over from a holder that ended without letting go; ``shared``: held by the parent."""

    serial: str
    key: str
    path: Path
    fd: int | None
    note: str | None = None
    shared: bool = False
    holder: dict[str, Any] = field(default_factory=dict)

    def release(self) -> None:
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing the file lets go of the flock

    def __enter__(self) -> "PhoneLock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def flock_within(fd: int, seconds: float, poll_s: float = POLL_S) -> bool:
    """An exclusive ``flock`` of ``fd``, waited for up to ``seconds``; False when another holds it."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)


def _held_by_parent(key: str, path: Path) -> bool:
    if key not in (os.environ.get(HELD_ENV) or "").split("\n"):
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return _read(fd).get("pid") == os.getppid()
    finally:
        os.close(fd)


def hold(serial: str, host: str, port: int, *, command: str | None = None, wait_s: float = 0.0) -> PhoneLock:
    """Hold the phone ``serial`` of the adb server ``host:port``, or :class:`PhoneBusy` naming the
    holder. ``wait_s``: how long a held lock is waited for first (a farm actor waits for the actor of
    a run that is ending; a person's command is refused at once)."""
    key = lock_key(serial, host, port)
    path = _file(key)
    if _held_by_parent(key, path):
        return PhoneLock(serial, key, path, None, shared=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise PhoneBusy(f"{serial}: cannot make its lock {path} ({e.strerror or e}): set {LOCKS_ENV} to a writable "
                        "folder", {}) from None
    try:
        got = flock_within(fd, wait_s)
    except OSError as e:
        os.close(fd)
        raise PhoneBusy(f"{serial}: cannot lock {path} ({e.strerror or e})", {}) from None
    if not got:
        holder = _read(fd)
        os.close(fd)
        pid = holder.get("pid")
        stop = f"stop it (kill {pid})" if isinstance(pid, int) else "stop it"
        raise PhoneBusy(
            f"{serial} (adb server {host}:{port}) is in use by another harness command: {_holder_text(holder)}. "
            f"One phone takes one run at a time: wait for that one to end, or {stop}, then start again. "
            "Nothing was changed on the phone", holder)
    left = _read(fd)
    note = None
    if left.get("pid") and left.get("pid") != os.getpid():
        gone = "is no longer running" if not _alive(int(left["pid"])) else "let go of it without saying so"
        note = (f"{serial}: taking the phone over from {_holder_text(left)}, which {gone} (killed or crashed): "
                "whatever it changed and did not put back is in the phone's journal and is put back at the end")
    me = {"pid": os.getpid(), "command": command or command_line(), "since": _now(), "serial": serial,
          "adb": f"{host}:{port}"}
    data = json.dumps(me, ensure_ascii=False).encode("utf-8")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        pass  # the lock holds without its description; a refusal then names no holder
    return PhoneLock(serial, key, path, fd, note=note, holder=me)


def holder_of(serial: str, host: str, port: int) -> dict[str, Any] | None:
    """Who holds the phone now (pid, command, since), read without taking its lock, or None: the
    lock file names its holder while it is held (a holder that ended leaves it empty, or names a
    process that is gone)."""
    path = _file(lock_key(serial, host, port))
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        h = _read(fd)
    finally:
        os.close(fd)
    pid = h.get("pid")
    return h if isinstance(pid, int) and pid != os.getpid() and _alive(pid) else None


def holder_text(h: dict[str, Any]) -> str:
    return _holder_text(h)


def _now() -> str:
    from harness.records import now_iso
    return now_iso()


def hold_devices(devices: Iterable[Any], *, command: str | None = None, wait_s: float = 0.0) -> list[PhoneLock]:
    """Hold every device (``serial``, ``host`` and ``port`` of its adb server), all or none."""
    held: list[PhoneLock] = []
    try:
        for d in devices:
            held.append(hold(d.serial, d.host, d.port, command=command, wait_s=wait_s))
    except BaseException:
        release_all(held)
        raise
    return held


def release_all(locks: Iterable[PhoneLock]) -> None:
    for lock in locks:
        lock.release()


def children_env(locks: Iterable[PhoneLock], env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) for a child that works on these phones under our locks."""
    out = dict(os.environ if env is None else env)
    keys = [k for k in (out.get(HELD_ENV) or "").split("\n") if k] + [lock.key for lock in locks]
    out[HELD_ENV] = "\n".join(dict.fromkeys(keys))
    return out
