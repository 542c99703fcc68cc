"""Guard fixtures: a scripted monitor endpoint shared by the module (a test double: it calls an
action risky when the "Proposed action:" line of the CRATE-S request matches the test's pattern),
and ``guard(...)``: a simulated phone with a command log, and ``harness guard`` in front of it
(in this process, built from the real command line), ended and recorded at the test's end."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from harness.device.adb_server import adb_path
from tests.fakes.model_server import Reply, ScriptedModelServer, request_text

SAFE = json.dumps({"reason": "navigation only", "category": None, "risky": False, "score": 0.05})
RISKY = json.dumps({"reason": "deletes the user's data", "category": "Destructive Actions", "risky": True, "score": 0.9})


@dataclass
class Monitor:
    server: ScriptedModelServer
    risky: list[str] = field(default_factory=list)   # patterns of the actions called risky
    seen: list[str] = field(default_factory=list)    # every action the monitor was asked about

    def respond(self, req: dict[str, Any]) -> Reply:
        m = re.search(r"Proposed action:\s*(.*)", request_text(req))
        action = m.group(1).strip() if m else ""
        self.seen.append(action)
        return Reply(RISKY if any(re.search(p, action) for p in self.risky) else SAFE)


@pytest.fixture(scope="module")
def monitor() -> Iterator[Monitor]:
    holder: list[Monitor] = []
    with ScriptedModelServer(lambda req: holder[0].respond(req)) as s:
        holder.append(Monitor(s))
        yield holder[0]


@pytest.fixture
def risky(monitor: Monitor) -> Iterator[Callable[..., None]]:
    def set_(*patterns: str) -> None:
        monitor.risky[:] = list(patterns)
    monitor.seen.clear()
    yield set_
    monitor.risky.clear()


@dataclass
class Guarded:
    guard: Any
    serial: str
    port: int
    out: Path
    log: Path
    sim: Any
    said: list[str]
    result: Any = None

    def adb(self, *args: str, timeout: float = 60, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(self.port)}
        return subprocess.run([adb_path(), *args], env=env, capture_output=True, timeout=timeout, input=stdin)

    def client(self):
        import adbutils
        return adbutils.AdbClient(host="127.0.0.1", port=self.port).device(self.serial)

    def ran(self) -> list[list[str]]:
        """Every simple command the phone ran, as argv lists (the simulated phone's command log)."""
        if not self.log.exists():
            return []
        return [a for line in self.log.read_text().splitlines() if line.strip()
                for a in (json.loads(line).get("argv") or [])]

    def end(self, reason: str = "end") -> Any:
        if self.result is None:
            self.result = self.guard.close(reason)
        return self.result

    def steps(self) -> list[dict[str, Any]]:
        path = self.out / "episodes" / self.guard.task.id / "trajectory.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def events(self) -> list[dict[str, Any]]:
        path = self.out / "episodes" / self.guard.task.id / "guard_events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def guard_args(*extra: str) -> Any:
    from harness.cli.main import build_parser
    return build_parser().parse_args(["guard", *extra])


@pytest.fixture
def guard(adb, serve_sim, monitor: Monitor, tmp_path: Path, capsys) -> Iterator[Callable[..., Guarded]]:
    """``guard(*flags, monitor=True, sim=None)``: a fresh simulated phone (or ``sim``) guarded by
    ``harness guard --device S --port P --out RUN --instruction ... [flags]``; with ``monitor`` the
    crate-s gate on the scripted endpoint."""
    from harness.cli.guard_setup import open_session
    from harness.core.ports import free_port

    made: list[Guarded] = []

    def make(*flags: str, monitor_on: bool = True, sim: Any = None, instruction: bool = True, **sim_kw: Any) -> Guarded:
        log = tmp_path / f"commands-{len(made)}.jsonl"
        phone = sim or serve_sim(command_log=log, **sim_kw)
        out = tmp_path / f"run-{len(made)}"
        said: list[str] = []
        argv = ["--device", phone.serial, "--port", str(free_port()), "--out", str(out), "--adb-port", str(adb.port)]
        if instruction and "--task" not in flags:
            argv += ["--instruction", "Read the shopping list in Notes"]
        if monitor_on:
            argv += ["--monitor", "crate-s", "--judge-base-url", monitor.server.base_url, "--judge-model", "test-model"]
        args = guard_args(*argv, *flags)
        g = open_session(args, argv=["harness", "guard", *argv, *flags])
        g.session.say = said.append
        gd = Guarded(g, phone.serial, g.server.port, out, log, phone, said)
        made.append(gd)
        return gd

    yield make
    for gd in made:
        try:
            gd.end()
        except Exception:
            pass
