"""The devices a command will use, checked before any of them is prepared, reset or locked:
attached (a wrong serial lists the attached ones), usable (adb says ``device`` and a screenshot is
a PNG), unlocked or unlockable (a PIN, pattern or password lock is the owner's to open), of a kind
every judge can judge (the oracle reads the simulated phone's state), with the apps the tasks
need, and able to take the ``--size`` asked for."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.preflight.problems import Problem

TRANSIENT_STATES = ("offline",)  # adb still lists it: a phone restarting, a dropped connection
# Android's window manager keeps a forced size's each side between 200 px and twice the display's own
# (DisplayContent.setForcedSize: Math.min(Math.max(width, 200), mInitialDisplayWidth * 2)) and
# quietly clamps anything else: a run would play another size than the one asked for
MIN_SIDE = 200
MAX_FACTOR = 2


@dataclass
class DeviceNeeds:
    """What the command will ask of every device: ``simulated`` names the plugins that need the
    simulated phone (``judge 'oracle'``), ``prepare`` is the run's PrepareConfig (None:
    ``--no-prepare``, so a lock screen stays as it is), ``tasks`` the tasks to start there."""

    simulated: list[str] = field(default_factory=list)
    prepare: Any = None
    prepared: bool = True
    tasks: list[Any] = field(default_factory=list)


@dataclass
class DeviceFindings:
    serial: str
    device: Any = None
    description: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)


def describe_attached(states: dict[str, str]) -> str:
    return ", ".join(f"{s} ({st})" for s, st in sorted(states.items())) or "none"


def attached_states(cfg: Any) -> tuple[dict[str, str] | None, Problem | None]:
    """Serial -> adb's state of every device the run's adb server lists (or the problem reaching it)."""
    import adbutils

    from harness.device.adb_server import adb_client

    ep = cfg.endpoint()
    try:
        return {d.serial: d.state for d in adb_client(host=ep.host, port=ep.port).list()}, None
    except (adbutils.AdbError, OSError) as e:
        return None, Problem("device", f"cannot reach the adb server at {ep}: {e}; start it (`harness adb start-server`) "
                                       "or point --adb-host/--adb-port at the one your phones are on")


def check_attached(serials: list[str], states: dict[str, str]) -> list[Problem]:
    """A serial adb does not list: named, with the devices it does list."""
    return [Problem("device", f"device {s} is not attached to this adb server (attached: {describe_attached(states)}); "
                              "connect it (`harness adb connect HOST:PORT` for a network device) or pick one of these")
            for s in serials if s not in states]


def wait_until_usable(dev: Any, timeout: float, say: Callable[[str], None] | None = None) -> Any:
    """The device's description, after waiting up to ``timeout`` s for one that adb lists as
    offline (a phone restarting, a dropped connection) to come back, as a device that drops off
    mid-run is waited for. An unauthorized or broken device, or one this adb server does not know
    (another server's, a typo), is not waited for."""
    desc = dev.describe()
    if desc.healthy or desc.state not in TRANSIENT_STATES or timeout <= 0:
        return desc
    (say or (lambda text: print(text, file=sys.stderr, flush=True)))(
        f"waiting up to {timeout:g} s for {desc.serial} ({desc.problem or desc.state}) to come back (--reconnect-timeout)")
    return dev.describe() if dev.reconnect(timeout) else desc


def check_size(serial: str, physical: tuple[int, int] | None, size: tuple[int, int] | None) -> Problem | None:
    """``--size WxH`` against what the device's window manager takes (see MIN_SIDE)."""
    if size is None or physical is None:
        return None
    (w, h), (pw, ph) = size, physical
    if MIN_SIDE <= w <= MAX_FACTOR * pw and MIN_SIDE <= h <= MAX_FACTOR * ph:
        return None
    return Problem("size", f"--size {w}x{h} is not a size {serial} can take: Android keeps each side between "
                           f"{MIN_SIDE} px and twice the screen's own ({pw}x{ph}: at most {MAX_FACTOR * pw}x"
                           f"{MAX_FACTOR * ph}) and would quietly clamp anything else; pick a size in that range")


def check_lock(serial: str, state: Any, prepared: bool) -> Problem | None:
    """A lock screen that needs a secret stops the run (prepare never enters one); without prepare
    (``--no-prepare``) any lock screen showing would be what the agent sees."""
    if not state.keyguard:
        return None
    if state.secure and not state.trusted:
        return Problem("device", f"{serial} is locked with a PIN, pattern or password: unlock the phone and start "
                                 "again (the harness never enters a lock-screen secret)")
    if not prepared:
        return Problem("device", f"{serial} shows its lock screen and --no-prepare leaves it there: unlock the phone, "
                                 "or let the run prepare it (it opens a swipe lock)")
    return None


def check_kind(serial: str, desc: Any, needs: DeviceNeeds) -> list[Problem]:
    """Plugins that need the simulated phone, on a device that is not one."""
    if desc.simulated or not needs.simulated:
        return []
    kind = desc.kind or "device"
    return [Problem("device", f"{who} reads the simulated phone's own state, and {serial} is a {kind} "
                              f"({desc.model or 'a real device'}): every verdict of it would be judge_error; run it on "
                              "the simulated phone, or judge this device with a model judge (crate, crate-s)")
            for who in needs.simulated]


def unavailable_tasks(dev: Any, tasks: list[Any]) -> dict[str, str]:
    """Task id -> why it cannot start on this device (an app its setup names is not installed, a
    simulated-phone preset on a real device...), read once now."""
    check = getattr(dev, "cannot_run", None)
    if check is None or not tasks:
        return {}
    dev.installed_packages(refresh=True)  # what the phone has at the start
    return {t.id: why for t in tasks if (why := check(t.setup, reread=False))}


def check_device(dev: Any, needs: DeviceNeeds, reconnect_timeout: float) -> DeviceFindings:
    """Every check of one opened device; a device that is not usable is checked no further."""
    from harness.device.base import DeviceError, InfraError

    found = DeviceFindings(dev.serial, dev)
    desc = wait_until_usable(dev, reconnect_timeout)
    found.description = desc.to_json()
    if not desc.healthy:
        found.problems.append(Problem("device", f"device {dev.serial} is not usable: {desc.problem or desc.state}"))
        return found
    try:
        problem = check_lock(dev.serial, dev.screen_state(), needs.prepared)
        if problem is not None:
            found.problems.append(problem)
        physical = getattr(dev, "physical_size", None)
        size = getattr(needs.prepare, "size", None)
        if size is not None and physical is not None and (problem := check_size(dev.serial, physical(), size)):
            found.problems.append(problem)
        found.unavailable = unavailable_tasks(dev, needs.tasks)
    except (DeviceError, InfraError) as e:
        found.problems.append(Problem("device", f"device {dev.serial} did not answer its checks: {e}"))
        return found
    found.problems.extend(check_kind(dev.serial, desc, needs))
    w, h = desc.size or (0, 0)
    found.lines.append(f"device {dev.serial}: {desc.kind or 'device'}, {desc.model or '?'}, {w}x{h}, usable"
                       + (f", {len(found.unavailable)} task(s) it cannot start" if found.unavailable else ""))
    return found
