"""Fixtures of the fault-injection suite, and the scripted agent (``Says``) some of them run; the other
helpers live in tests/faults/helpers.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from harness.device.adb_server import AdbServer
from harness.core.episode import AgentOutput
from tests.faults.helpers import SMALL_SIZE, SimProc
from tests.fakes.agents import Says


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


@pytest.fixture
def says() -> type[Says]:
    """The :class:`Says` agent class, for tests that build (or subclass) it themselves."""
    return Says


@dataclass
class SaysPhone:
    """A served 540x1200 phone, its device (10 s command timeout) and a run folder, where ``play``
    runs one episode of the :class:`Says` agent."""

    sim: Any
    device: Any
    run: Path

    def play(self, task: Any, outputs: list[AgentOutput], cap: int) -> tuple[Any, Any, Any]:
        """Run ``task`` with an agent proposing ``outputs``; returns (outcome, episode writer, run
        writer), the run writer left open for the test to add to and close."""
        from harness.records import RunWriter
        from harness.run.runner import run_episode

        w = RunWriter(self.run, fsync=False)
        ep = w.start_episode(task.id)
        return run_episode(task, Says(outputs), self.device, ep, cap=cap), ep, w


@pytest.fixture
def says_phone(serve_sim: Callable[..., Any], tmp_path: Path) -> Callable[..., SaysPhone]:
    """``says_phone(adbkeyboard=True)`` -> a :class:`SaysPhone` writing to ``tmp_path / "run"``."""

    def make(adbkeyboard: bool = True) -> SaysPhone:
        s = serve_sim(width=540, height=1200, adbkeyboard=adbkeyboard)
        return SaysPhone(s, s.device(command_timeout=10), tmp_path / "run")

    return make
