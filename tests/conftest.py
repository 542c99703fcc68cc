"""Shared fixtures: a private adb server (the adb binary from the adbutils wheel, on a free port,
killed at the end) and simulated phones served in this process and connected to it."""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `tests.fakes` imports work however pytest is started
    sys.path.insert(0, str(ROOT))

from harness.device.adb_server import AdbServer  # noqa: E402
from harness.core.ports import START_TRIES, free_port  # noqa: E402

# A suite started in the background by a shell without job control (`nohup scripts/test &`, a
# script's `cmd &`) inherits SIGINT ignored, and an ignored signal stays ignored across exec: every
# harness the tests start would then be deaf to the Ctrl-C they send it (7 tests failed so). The
# tests stand for a user at a terminal, so each test process takes Ctrl-C back as Python's default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def harness_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Device journals (harness.device.prepare) go to a folder of this test session, never to the
    user's ~/.local/state; subprocesses inherit it."""
    import os

    folder = tmp_path_factory.mktemp("harness-state")
    # and the phones' locks (harness.device.phone_lock) to one of its own: phones of different
    # adb servers never share a lock, so the tests' servers keep their phones apart as on a host
    saved = {k: os.environ.get(k) for k in ("CRATE_HARNESS_STATE", "CRATE_HARNESS_LOCKS")}
    os.environ["CRATE_HARNESS_STATE"] = str(folder)
    os.environ["CRATE_HARNESS_LOCKS"] = str(tmp_path_factory.mktemp("phone-locks"))
    try:
        yield folder
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def adb() -> Iterator[AdbServer]:
    server = AdbServer().start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class ServedSim:
    phone: Any
    handle: Any
    serial: str
    adb: AdbServer

    def device(self, **kw: Any):
        from harness.device.adb import AdbDevice
        return AdbDevice(self.serial, port=self.adb.port, **kw)

    def stop(self) -> None:
        self.handle.stop()


@pytest.fixture
def serve_sim(adb: AdbServer) -> Iterator[Callable[..., ServedSim]]:
    """``serve_sim(width=1080, height=2400, locale='en', adbkeyboard=True, as_phone=False, lock='none',
    command_log=None, info=None, profile=None)`` -> a connected phone (``as_phone``: retail-looking; ``command_log``:
    a file receiving every shell command line as JSON; ``info``: its DeviceInfo, e.g.
    ``DeviceInfo(touchscreen=False)``; ``profile``: a ``harness.sim.profile.Profile`` it answers in)."""
    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve

    served: list[ServedSim] = []

    def make(width: int = 1080, height: int = 2400, locale: str = "en", adbkeyboard: bool = True,
             as_phone: bool = False, lock: str = "none", command_log: str | Path | None = None,
             info: Any = None, profile: Any = None) -> ServedSim:
        phone = SimPhone(width, height, locale=locale, adbkeyboard=adbkeyboard, as_phone=as_phone, lock=lock, info=info,
                         profile=profile)
        handle = serve(phone, free_port(), command_log=str(command_log) if command_log else None,
                       port_tries=START_TRIES)  # another free port if this one was taken meanwhile
        serial = adb.connect(f"127.0.0.1:{handle.port}")
        s = ServedSim(phone, handle, serial, adb)
        served.append(s)
        return s

    yield make
    for s in served:
        try:
            adb.disconnect(s.serial)
        finally:
            s.stop()


@dataclass
class ProfiledPhone(ServedSim):
    """The one phone of a test session serving a shipped profile (as a retail phone); ``fresh``
    puts it back as it started and gives it a command log of the test's own."""

    profile: Any = None
    start: dict[str, Any] | None = None

    def fresh(self, command_log: str | Path | None = None) -> "ProfiledPhone":
        from harness.sim.command_log import CommandLog
        from harness.sim.evdev import InputSubsystem

        phone, shell = self.phone, self.handle.shell
        # the kernel's devices as listed (slots, keys held), as after a boot
        shell.evdev = InputSubsystem(phone, touchscreen=phone.info.touchscreen, on_gesture=shell.touch.gesture,
                                     devices=self.profile.input_devices())
        phone.reset()
        phone.set_lock("none")
        st = self.start or {}
        phone.imes, phone.enabled_imes, phone.ime = list(st["imes"]), list(st["enabled"]), st["ime"]
        for ns, values in st["settings"].items():
            shell.settings[ns].clear()
            shell.settings[ns].update(values)
        shell.props.clear()
        old, shell.command_log = shell.command_log, CommandLog(command_log) if command_log else None
        if old is not None:
            old.close()
        return self


@pytest.fixture(scope="session")
def profile_phone(adb: AdbServer) -> Iterator[Callable[[str], ProfiledPhone]]:
    """``profile_phone(name)`` -> the phone serving the shipped profile ``name`` (``harness sim serve
    --as-phone --profile NAME``), one per profile in a test session, started when first asked for
    and shared by every test that asks (call ``.fresh(log)`` at the start of a test)."""
    import copy

    from harness.sim.phone import SimPhone
    from harness.sim.profile import load
    from harness.sim.serve import serve

    phones: dict[str, ProfiledPhone] = {}

    def get(name: str) -> ProfiledPhone:
        if name not in phones:
            profile = load(name)
            phone = SimPhone(as_phone=True, profile=profile)
            phone.reset()
            handle = serve(phone, free_port(), port_tries=START_TRIES)
            serial = adb.connect(f"127.0.0.1:{handle.port}")
            phones[name] = ProfiledPhone(phone, handle, serial, adb, profile, {
                "imes": list(phone.imes), "enabled": list(phone.enabled_imes), "ime": phone.ime,
                "settings": copy.deepcopy(handle.shell.settings)})
        return phones[name]

    yield get
    for p in phones.values():
        try:
            adb.disconnect(p.serial)
        finally:
            p.stop()


@pytest.fixture
def sim_process(adb: AdbServer, tmp_path: Path) -> Iterator[Callable[..., str]]:
    """``sim_process(*extra_args)`` -> the serial of a ``harness sim serve`` process connected to
    the private adb server (stopped at the end); started as the demo starts its phones
    (harness.sim.process: ready once it says it listens, another port if its port was taken)."""
    from harness.sim.process import SimProcess, start_sim_process

    procs: list[SimProcess] = []

    def start(*extra: str) -> str:
        phone = start_sim_process(list(extra), tmp_path / f"sim-{len(procs)}.log")
        procs.append(phone)
        return adb.connect(phone.address)

    yield start
    for phone in procs:
        phone.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say how many tests were skipped because ../shared/reference is not beside the repository
    (tests/shared_data.py: one rule for missing shared data), so a missing folder is never silent."""
    from tests.shared_data import SKIP_REASON

    n = 0
    for rep in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(rep, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        if SKIP_REASON in reason:
            n += 1
    if n:
        terminalreporter.write_line(f"{n} test(s) skipped: {SKIP_REASON} (lay ../shared out beside the repository, "
                                    "as CI does, to run them)", yellow=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a parallel run (pytest-xdist workers), the end-to-end cases marked ``slow`` go first, each
    file's order otherwise kept. A handful of them take minutes each (the farm's cluster, the SIGKILL
    trials, every task recorded, the suite at four sizes); left where they are collected they start
    late and one worker runs them alone while the others sit idle at the end. Started first, and
    handed out a test or two at a time (scripts/test: --maxschedchunk), the short tests fill in around
    them. Every worker sorts the same collection the same way, as xdist requires. One full run's
    per-test times replayed through xdist's load scheduling on 3 workers: 1,341 s as collected,
    1,175 s slow first two at a time (its sum over 3 workers: 1,165 s)."""
    import os

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the collected order keeps module fixtures set up once
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: slow first, else as collected
