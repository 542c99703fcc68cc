"""Fixtures of the fault-injection suite; the helpers live in tests/faults/helpers.py."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from harness.device.adb_server import AdbServer
from tests.faults.helpers import SMALL_SIZE, SimProc


@pytest.fixture
def own_adb() -> Iterator[AdbServer]:
    """A private adb server for tests that kill it (the session's server is shared)."""
    server = AdbServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sims(tmp_path: Path) -> Iterator[Callable[..., SimProc]]:
    """``sims(adb, size=..., extra=(...))`` -> a started SimProc, stopped at the end."""
    started: list[SimProc] = []

    def make(adb: AdbServer, size: str = SMALL_SIZE, extra: tuple[str, ...] = ()) -> SimProc:
        s = SimProc(adb, tmp_path, size=size, extra=extra).start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()
