"""The one device interface the runner uses, whatever is behind it (USB phone, emulator, the
simulated phone): observe, act, reset, and ask for state where the device can tell it.

Implementations: ``harness.device.adb.AdbDevice`` (adbutils) and, layered on it for hierarchy and
text entry, ``harness.device.u2.U2Device`` (uiautomator2). They are chosen by a
:class:`harness.device.config.DeviceConfig`, never by branching on names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from harness.actions import Action


class DeviceError(RuntimeError):
    """The device could not do what was asked; the episode can go on (e.g. an app is missing)."""


class InfraError(RuntimeError):
    """The device or its connection failed (offline, adb server gone, timeouts): the episode ends
    as ``infra_error`` and never counts against the agent."""


@dataclass
class DeviceDescription:
    serial: str
    state: str = "device"              # adb's word: device, offline, unauthorized, ...
    model: str = ""
    size: tuple[int, int] | None = None
    density: int | None = None
    sdk: str = ""
    healthy: bool = False
    problem: str = ""
    simulated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"serial": self.serial, "state": self.state, "model": self.model,
                "size": list(self.size) if self.size else None, "density": self.density, "sdk": self.sdk,
                "healthy": self.healthy, "problem": self.problem, "simulated": self.simulated}


@dataclass
class ActionTiming:
    """What executing one action cost, split as the run record wants it."""

    action: float = 0.0
    settle: float = 0.0
    screenshot: float = 0.0
    settled: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Device(Protocol):
    serial: str

    def describe(self) -> DeviceDescription: ...

    def screen_size(self) -> tuple[int, int]: ...

    def screenshot(self) -> bytes:
        """The current screen as PNG bytes."""

    def hierarchy(self) -> str:
        """The uiautomator dump XML of the current screen."""

    def execute(self, action: Action) -> None:
        """Perform one action. Raises ActionError for an action this device cannot do (an unknown
        app, text it cannot type) and InfraError when the device is gone."""

    def settle(self, previous: bytes | None = None) -> tuple[bytes, ActionTiming]:
        """Wait (bounded) until the screen stops changing; return the settled screenshot."""

    def current_app(self) -> tuple[str, str]: ...

    def reset(self, setup: Any, language: str) -> None:
        """Force-stop and clear the task's apps, go home, apply its setup; verify it worked."""

    def state(self) -> dict[str, Any] | None:
        """The simulated phone's state JSON, or None on a real phone (it cannot tell)."""

    def reconnect(self, timeout: float) -> bool: ...

    def close(self) -> None: ...
