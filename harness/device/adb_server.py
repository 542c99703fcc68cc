"""Finding the adb binary and running a private adb server.

adb comes from PATH, or else from the adbutils wheel, which ships adb 36 at
``adbutils/binaries/adb`` (FIELD_NOTES section 8). A private server on its own port
(``adb -P PORT``) keeps parallel runs and tests from disturbing each other or a user's server.

Which server: :func:`adb_endpoint` picks host and port the way the adb client itself does
(``client/main.cpp`` of AOSP's adb): ``-H``/``-P`` first, then ``ADB_SERVER_SOCKET``
(``tcp:HOST:PORT``, only when neither flag is given), then ``ANDROID_ADB_SERVER_ADDRESS`` and
``ANDROID_ADB_SERVER_PORT``, then localhost:5037. Every adb subprocess and adbutils client of the
harness is given that one endpoint explicitly, so none of them can reach another server.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# free_port and wait_port live in harness.core.ports (the simulated phone uses them too); importable from here as before
from harness.core.ports import START_TRIES, StartError, free_port, listener_pid, wait_port  # noqa: F401

log = logging.getLogger(__name__)

DEFAULT_PORT = 5037
DEFAULT_HOST = "127.0.0.1"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# what adb reads, and what a subprocess must not inherit once we have chosen the server for it
_SERVER_ENV = ("ADB_SERVER_SOCKET", "ANDROID_ADB_SERVER_ADDRESS", "ANDROID_ADB_SERVER_PORT")
_restart_lock = threading.Lock()


class AdbNotFound(StartError):
    """No adb binary to run (a StartError: commands print it as one line)."""


def adb_path() -> str:
    found = shutil.which("adb")
    if found:
        return found
    try:
        import adbutils
    except ImportError:  # pragma: no cover
        raise AdbNotFound("adb is not on PATH and adbutils is not installed") from None
    p = Path(adbutils.__file__).parent / "binaries" / "adb"
    if p.exists():
        if not os.access(p, os.X_OK):
            p.chmod(0o755)
        return str(p)
    raise AdbNotFound("adb is not on PATH and the adbutils wheel has no adb binary")


class AdbEndpointError(ValueError):
    """An adb server address that cannot be used (a bad port in the environment, say)."""


@dataclass(frozen=True)
class AdbEndpoint:
    """Where an adb server listens."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT

    @property
    def local(self) -> bool:
        """On this machine: adb starts a missing server only for a local one (``-H`` anything
        makes it say "cannot start server on remote host")."""
        return self.host in LOCAL_HOSTS

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def _port(text: str, where: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise AdbEndpointError(f"{where} must be a TCP port (1-65535), got {text!r}")
    return port


def adb_endpoint(host: str | None = None, port: int | None = None,
                 env: dict[str, str] | os._Environ | None = None) -> AdbEndpoint:
    """The adb server to talk to, chosen as the adb client chooses it: the given ``host``/``port``
    (``--adb-host``/``--adb-port``, adb's ``-H``/``-P``) first; when neither is given,
    ``ADB_SERVER_SOCKET=tcp:[HOST:]PORT``; then ``ANDROID_ADB_SERVER_ADDRESS`` and
    ``ANDROID_ADB_SERVER_PORT`` fill in what is missing; then localhost:5037."""
    env = os.environ if env is None else env
    if host is None and port is None:
        sock = (env.get("ADB_SERVER_SOCKET") or "").strip()
        if sock.startswith("tcp:"):
            h, _, p = sock[4:].rpartition(":")
            return AdbEndpoint(h or DEFAULT_HOST, _port(p, "ADB_SERVER_SOCKET's port"))
    host = host or (env.get("ANDROID_ADB_SERVER_ADDRESS") or "").strip() or DEFAULT_HOST
    if port is None:
        raw = (env.get("ANDROID_ADB_SERVER_PORT") or "").strip()
        port = _port(raw, "ANDROID_ADB_SERVER_PORT") if raw else DEFAULT_PORT
    return AdbEndpoint(host, port)


def server_port() -> int:
    """The adb server port this process talks to by default (see :func:`adb_endpoint`)."""
    try:
        return adb_endpoint().port
    except AdbEndpointError:
        return DEFAULT_PORT


def adb_argv(args: list[str], port: int | None = None, host: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The adb command line and environment that reach exactly the chosen server: ``-H`` for a
    remote host (a local one is left out so adb may start a missing server), ``-P`` always, and
    none of adb's server variables inherited."""
    ep = adb_endpoint(host, port)
    env = {k: v for k, v in os.environ.items() if k not in _SERVER_ENV}
    env["ANDROID_ADB_SERVER_PORT"] = str(ep.port)
    head = [adb_path()] + ([] if ep.local else ["-H", ep.host]) + ["-P", str(ep.port)]
    return head + list(args), env


def run_adb(args: list[str], port: int | None = None, timeout: float = 20.0,
            host: str | None = None) -> subprocess.CompletedProcess:
    argv, env = adb_argv(args, port, host)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


def server_answers(port: int, host: str = "127.0.0.1", timeout: float = 3.0) -> bool:
    """Whether an adb server answers ``host:version`` on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"000chost:version")
            return s.recv(4) == b"OKAY"
    except OSError:
        return False


def ensure_server(port: int, host: str = "127.0.0.1") -> bool:
    """Make sure an adb server answers on host:port, starting one if it is gone: once, however many
    threads find it gone at the same moment (they wait for the first one's start), and quietly
    (adb's "* daemon started successfully" lines are captured, not printed). A server on another
    machine cannot be started from here: False when it does not answer."""
    if server_answers(port, host):
        return True
    with _restart_lock:
        if server_answers(port, host):  # another thread started it while we waited
            return True
        if host not in LOCAL_HOSTS:
            return False
        try:
            run_adb(["start-server"], port, timeout=30, host=host)
        except (subprocess.TimeoutExpired, OSError):
            return False
        return server_answers(port, host)


def adb_client(host: str | None = None, port: int | None = None, socket_timeout: float | None = None) -> Any:
    """An ``adbutils.AdbClient`` whose connections restart a dead local server through
    :func:`ensure_server` (adbutils' own fallback runs ``adb start-server`` on the default port,
    printing its start-up lines, from every thread that hits the dead server at once)."""
    import adbutils
    from adbutils._adb import AdbConnection
    from adbutils.errors import AdbConnectionError, AdbTimeout

    class QuietConnection(AdbConnection):
        def __init__(self, host: str, port: int):
            self._where = (host, port)
            super().__init__(host, port)

        def _safe_connect(self) -> Any:
            try:
                return self._create_socket()
            except (AdbTimeout, AdbConnectionError):
                pass
            ensure_server(self._where[1], self._where[0])
            return self._create_socket()

    class QuietClient(adbutils.AdbClient):
        def make_connection(self, timeout: float | None = None) -> Any:
            timeout = timeout or socket_timeout
            try:
                conn = QuietConnection(self.host, self.port)
                if timeout:
                    conn.conn.settimeout(timeout)
                return conn
            except TimeoutError:
                raise AdbTimeout("connect to adb server timeout") from None

    ep = adb_endpoint(host, port)
    return QuietClient(host=ep.host, port=ep.port, socket_timeout=socket_timeout)


STARTED = "daemon started successfully"  # what adb prints when it started the server itself (adb 1.0.41)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


@dataclass
class AdbServer:
    """A private adb server: ``start()`` on a free port, ``stop()`` kills it.

    The port is chosen free, closed, then given to adb, so another program may take it meanwhile:
    a chosen port that turns out taken is replaced by another (``START_TRIES`` in all, each retry
    logged), and the server on it is checked to be the one this call started (adb says it started
    it, and on Linux the listener is a process of our adb binary), never a stranger's that happened
    to answer there. ``pid`` is that process; ``stop()`` kills only it."""

    port: int = 0
    host: str = DEFAULT_HOST
    pid: int | None = None

    def start(self) -> "AdbServer":
        """Start the server (raises :class:`StartError`, one line, when no try worked). A port
        given by the caller is tried alone, and a server already answering there is used as it is."""
        chosen = not self.port
        tried: list[str] = []
        for attempt in range(START_TRIES if chosen else 1):
            port = free_port() if chosen else self.port
            problem = self._start_on(port, chosen)
            if problem is None:
                self.port = port
                return self
            tried.append(f"{port} ({problem})")
            if attempt + 1 < START_TRIES and chosen:
                log.warning("adb server: cannot start on port %d (%s); trying another port", port, problem)
        if chosen:
            advice = ("Another program on this machine took each port as it was chosen: run the command again, "
                      "and see what listens there with `ss -ltnp`")
        else:
            advice = "See what listens there with `ss -ltnp`, or give another port"
        raise StartError(f"could not start a private adb server ({adb_path()}): tried "
                         f"{'free ports' if chosen else 'port'} {'; '.join(tried)}. {advice}")

    def _start_on(self, port: int, chosen: bool) -> str | None:
        """Start adb's server on ``port``: None when it runs and is ours, else what went wrong."""
        try:
            r = run_adb(["start-server"], port, timeout=30, host=self.host)
        except subprocess.TimeoutExpired:
            return "adb start-server did not finish within 30 s"
        except OSError as e:  # the binary itself cannot run: no other port helps
            raise StartError(f"cannot run adb ({adb_path()}): {e.strerror or e}") from None
        if r.returncode != 0:
            return _last_line(r.stderr) or f"adb start-server exited with {r.returncode}"
        if STARTED not in r.stderr:  # a server was there already
            if chosen:
                return "an adb server that is not ours already listens there"
            return None
        pid = listener_pid(port, adb_path()) if self.host in LOCAL_HOSTS else None
        if pid is None and listener_pid(port) is not None:
            return "the listener there is not our adb binary"
        self.pid = pid
        return None

    def ours(self) -> bool:
        """Whether the server on our port is still the one we started (True where it cannot be told)."""
        if self.pid is None:
            return True
        return listener_pid(self.port) in (None, self.pid)

    def connect(self, address: str, timeout: float = 15.0) -> str:
        """``adb connect HOST:PORT`` and wait until it is listed as ``device``; returns the serial."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            r = run_adb(["connect", address], self.port, host=self.host)
            last = (r.stdout + r.stderr).strip()
            devs = run_adb(["devices"], self.port, host=self.host).stdout
            for line in devs.splitlines()[1:]:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == address and parts[1] == "device":
                    return address
            time.sleep(0.2)
        said = " / ".join(ln.strip() for ln in last.splitlines() if ln.strip()) or "nothing"
        raise StartError(f"adb could not connect to {address} within {timeout:g} s (adb said: {said}); "
                         f"is the device listening there?")

    def disconnect(self, address: str) -> None:
        run_adb(["disconnect", address], self.port, host=self.host)

    def stop(self) -> None:
        if self.port and not self.ours():  # ours died and another program's took the port: leave it
            log.warning("adb server: port %d is now another program's; not stopping it", self.port)
            return
        if self.port:
            try:
                run_adb(["kill-server"], self.port, timeout=10, host=self.host)
            except (subprocess.TimeoutExpired, OSError):
                pass

    def env(self) -> dict[str, str]:
        return {"ANDROID_ADB_SERVER_PORT": str(self.port)}

    def __enter__(self) -> "AdbServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
