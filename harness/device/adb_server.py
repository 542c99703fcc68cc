"""Finding the adb binary and running a private adb server.

adb comes from PATH, or else from the adbutils wheel, which ships adb 36 at
``adbutils/binaries/adb`` (FIELD_NOTES section 8). A private server on its own port
(``adb -P PORT``) keeps parallel runs and tests from disturbing each other or a user's server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PORT = 5037


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


def server_port() -> int:
    """The adb server port this process talks to (ANDROID_ADB_SERVER_PORT or 5037)."""
    try:
        return int(os.environ.get("ANDROID_ADB_SERVER_PORT", DEFAULT_PORT))
    except ValueError:
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


def run_adb(args: list[str], port: int | None = None, timeout: float = 20.0) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if port is not None:
        env["ANDROID_ADB_SERVER_PORT"] = str(port)
    return subprocess.run([adb_path(), *args], capture_output=True, text=True, timeout=timeout, env=env)


@dataclass
class AdbServer:
    """A private adb server: ``start()`` on a free port, ``stop()`` kills it."""

    port: int = 0

    def start(self) -> "AdbServer":
        if not self.port:
            self.port = free_port()
        r = run_adb(["start-server"], self.port, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"adb server on port {self.port} did not start: {r.stderr.strip()}")
        return self

    def connect(self, address: str, timeout: float = 15.0) -> str:
        """``adb connect HOST:PORT`` and wait until it is listed as ``device``; returns the serial."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            r = run_adb(["connect", address], self.port)
            last = (r.stdout + r.stderr).strip()
            devs = run_adb(["devices"], self.port).stdout
            for line in devs.splitlines()[1:]:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == address and parts[1] == "device":
                    return address
            time.sleep(0.2)
        raise RuntimeError(f"adb could not connect to {address}: {last}")

    def disconnect(self, address: str) -> None:
        run_adb(["disconnect", address], self.port)

    def stop(self) -> None:
        if self.port:
            try:
                run_adb(["kill-server"], self.port, timeout=10)
            except (subprocess.TimeoutExpired, OSError):
                pass

    def env(self) -> dict[str, str]:
        return {"ANDROID_ADB_SERVER_PORT": str(self.port)}

    def __enter__(self) -> "AdbServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
