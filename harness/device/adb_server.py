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

import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PORT = 5037
DEFAULT_HOST = "127.0.0.1"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# what adb reads, and what a subprocess must not inherit once we have chosen the server for it
_SERVER_ENV = ("ADB_SERVER_SOCKET", "ANDROID_ADB_SERVER_ADDRESS", "ANDROID_ADB_SERVER_PORT")
_restart_lock = threading.Lock()


class AdbNotFound(RuntimeError):
    pass


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


def free_port(avoid_emulator_range: bool = True) -> int:
    """A free TCP port on loopback; optionally outside adb's emulator scan range (odd 5555-5585)."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if not avoid_emulator_range or not (5550 <= port <= 5590):
            return port


def wait_port(port: int, timeout: float, host: str = "127.0.0.1") -> bool:
    """True once something accepts TCP connections on host:port (within ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


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


@dataclass
class AdbServer:
    """A private adb server: ``start()`` on a free port, ``stop()`` kills it."""

    port: int = 0
    host: str = DEFAULT_HOST

    def start(self) -> "AdbServer":
        if not self.port:
            self.port = free_port()
        r = run_adb(["start-server"], self.port, timeout=30, host=self.host)
        if r.returncode != 0:
            raise RuntimeError(f"adb server on port {self.port} did not start: {r.stderr.strip()}")
        return self

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
        raise RuntimeError(f"adb could not connect to {address}: {last}")

    def disconnect(self, address: str) -> None:
        run_adb(["disconnect", address], self.port, host=self.host)

    def stop(self) -> None:
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
