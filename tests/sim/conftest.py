"""Fixtures for the ADB tests: a private adb server and simulated phones connected to it.

* ``adb_server`` (session): the real adb binary (the harness's: the adbutils wheel's unless one is
  on PATH), started as the harness starts its private server (``adb -P PORT start-server`` on a
  free port, another one if it was taken meanwhile) and killed at the end, so the tests never touch
  a developer's own adb server on 5037.
* ``connect_phone(phone, mode=...)``: serves a phone on a free port outside 5550-5590 (the adb
  server probes odd ports 5555-5585 for emulators; another free one if it was taken meanwhile), ``adb connect``s it and waits until ``adb
  devices`` lists it in the expected state; disconnects and stops it afterwards.
* ``sim``: a connected ``FakePhone`` in normal mode, with ``adbutils`` device handle.

Nothing here changes the process environment: adb subprocesses get ``ANDROID_ADB_SERVER_PORT``
in their own env, and the uiautomator2 fixture (test_u2.py) monkeypatches ``adbutils.adb``, the
module-level client ``u2.connect(serial)`` uses (it read the variable when adbutils was imported).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import adbutils
import pytest

from fake_phone import FakePhone
from harness.device.adb_server import AdbServer as HarnessAdbServer, adb_path
from harness.core.ports import START_TRIES, free_port
from harness.sim.serve import SimServer, serve


@dataclass
class AdbServer:
    port: int
    binary: str

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, ANDROID_ADB_SERVER_PORT=str(self.port))

    def run(self, *args: str, timeout: float = 30, input: bytes | None = None, check: bool = False) -> subprocess.CompletedProcess[bytes]:
        """``adb -P PORT ARGS`` with stdin closed (adb forwards stdin in shell_v2 mode)."""
        return subprocess.run(
            [self.binary, "-P", str(self.port), *args],
            capture_output=True,
            env=self.env,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            timeout=timeout,
            check=check,
        )

    def client(self) -> adbutils.AdbClient:
        return adbutils.AdbClient(host="127.0.0.1", port=self.port)

    def state(self, serial: str) -> str | None:
        out = self.run("devices", timeout=10).stdout.decode()
        for line in out.splitlines()[1:]:
            parts = line.split("\t")
            if len(parts) == 2 and parts[0] == serial:
                return parts[1]
        return None

    def wait_state(self, serial: str, state: str, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.state(serial)
            if last == state:
                return
            time.sleep(0.05)
        raise AssertionError(f"{serial} is {last!r}, expected {state!r}")


@pytest.fixture(scope="session")
def adb_server() -> Iterator[AdbServer]:
    # started as the harness starts its own (another port if the chosen one is taken), with the
    # harness's adb: the adbutils wheel's unless one is on PATH; a missing one fails, never skips
    own = HarnessAdbServer().start()
    server = AdbServer(own.port, adb_path())
    try:
        yield server
    finally:
        server.run("kill-server", timeout=15)


@dataclass
class ConnectedSim:
    phone: Any
    server: SimServer
    adb: AdbServer

    @property
    def serial(self) -> str:
        return self.server.serial

    def run(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[bytes]:
        return self.adb.run("-s", self.serial, *args, **kw)

    def device(self) -> adbutils.AdbDevice:
        return self.adb.client().device(self.serial)


@pytest.fixture
def connect_phone(adb_server: AdbServer) -> Iterator[Callable[..., ConnectedSim]]:
    started: list[ConnectedSim] = []

    def connect(phone: Any = None, mode: str = "normal", port: int | None = None) -> ConnectedSim:
        phone = phone if phone is not None else FakePhone()
        server = serve(phone, port or free_port(), mode=mode, port_tries=1 if port else START_TRIES)
        sim = ConnectedSim(phone, server, adb_server)
        started.append(sim)
        r = adb_server.run("connect", server.serial, timeout=15)
        assert r.returncode == 0, r
        adb_server.wait_state(server.serial, "unauthorized" if mode == "unauthorized" else "device")
        return sim

    yield connect
    for sim in started:
        adb_server.run("disconnect", sim.serial, timeout=10)
        sim.server.stop()


@pytest.fixture
def sim(connect_phone: Callable[..., ConnectedSim]) -> ConnectedSim:
    return connect_phone(FakePhone())
