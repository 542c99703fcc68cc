"""The one device interface the runner uses, whatever is behind it (USB phone, emulator, the
simulated phone): observe, act, reset, and ask for state where the device can tell it.

Implementations: ``harness.device.adb.AdbDevice`` (adbutils) and, layered on it for hierarchy and
text entry, ``harness.device.u2.U2Device`` (uiautomator2). They are chosen by a
:class:`harness.device.config.DeviceConfig`, never by branching on names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from harness.core.actions import Action

# What a device is, for what the harness may do to it (harness.device.safeguards): the simulated
# phone and emulators are test devices; anything else is somebody's phone.
DeviceKind = Literal["simulated", "emulator", "phone"]


class DeviceError(RuntimeError):
    """The device could not do what was asked; the episode can go on (e.g. an app is missing)."""


class TaskUnavailable(DeviceError):
    """The task cannot start on this device as it is: an app its setup names is not installed, or
    it needs another kind of device (the simulated phone, an emulator). Neither the agent's failure
    nor an infrastructure fault: the episode ends ``task_error``, is not retried and not judged."""


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
    kind: str = ""                     # a DeviceKind once known

    def to_json(self) -> dict[str, Any]:
        return {"serial": self.serial, "state": self.state, "model": self.model,
                "size": list(self.size) if self.size else None, "density": self.density, "sdk": self.sdk,
                "healthy": self.healthy, "problem": self.problem, "simulated": self.simulated, "kind": self.kind}


@dataclass(frozen=True)
class ScreenState:
    """Screen and lock screen as the device reports them (None: the device did not say)."""

    awake: bool | None = None          # dumpsys power: mWakefulness=Awake
    keyguard: bool | None = None       # the lock screen is showing
    secure: bool | None = None         # the lock needs a PIN, pattern or password
    trusted: bool | None = None        # Smart Lock (trust agents) keeps a secure lock open

    def to_json(self) -> dict[str, Any]:
        return {"awake": self.awake, "keyguard": self.keyguard, "secure": self.secure, "trusted": self.trusted}


@dataclass(frozen=True)
class InputMethods:
    current: str | None                # secure default_input_method
    enabled: list[str]                 # ime list -s
    installed: list[str]               # ime list -a -s


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

    def settle(self, previous: bytes | None = None, on_frame: Callable[[bytes], None] | None = None,
               on_pixels: Callable[[Any], None] | None = None) -> tuple[bytes, ActionTiming]:
        """Wait (bounded) until the screen stops changing; return the settled screenshot.
        ``on_frame`` is called with each candidate observation as soon as it is ready (the one
        returned is the last of them), so that work on it can start while settling confirms it;
        ``on_pixels`` earlier with a candidate's pixels (a PIL image) when they come before its PNG
        (raw frames), the same image object the observation then carries."""

    def current_app(self) -> tuple[str, str]: ...

    def reset(self, setup: Any, language: str) -> None:
        """Force-stop (and, where allowed, clear) the task's apps, go home, apply its setup; verify
        it worked. What it did is left in ``last_reset`` (a dict), also when it failed midway."""

    def state(self) -> dict[str, Any] | None:
        """The simulated phone's state JSON, or None on a real phone (it cannot tell)."""

    def reconnect(self, timeout: float) -> bool: ...

    def close(self) -> None: ...


@runtime_checkable
class PreparableDevice(Device, Protocol):
    """What ``harness.device.prepare`` needs to prepare a phone for a run and put it back: read and
    write settings, input methods, the screen and lock state. Every change a run makes goes
    through these, and is first recorded in ``journal`` when one is attached."""

    journal: Any

    def kind(self) -> DeviceKind: ...

    def get_setting(self, namespace: str, key: str) -> str | None:
        """``settings get``; None when unset (Android prints ``null``)."""

    def put_setting(self, namespace: str, key: str, value: str | None) -> None:
        """``settings put``, or ``settings delete`` for None."""

    def input_methods(self) -> InputMethods: ...

    def set_input_method(self, ime_id: str) -> None:
        """Enable ``ime_id`` and make it the default input method."""

    def disable_input_method(self, ime_id: str) -> None: ...

    def use_input_method(self, ime_id: str) -> None:
        """Switch to ``ime_id`` for typing, recording the original first when a journal is attached."""

    def screen_state(self) -> ScreenState: ...

    def wake(self) -> None: ...

    def dismiss_keyguard(self) -> None:
        """Open a lock screen that needs no secret (swipe, or kept open by Smart Lock)."""
