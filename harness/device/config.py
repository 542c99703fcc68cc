"""Typed configuration that picks and tunes the device backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

Backend = Literal["adb", "uiautomator2"]


@dataclass(frozen=True)
class SettleConfig:
    """How long to wait after an action for the screen to stop changing.

    ``stable_frames`` identical screenshots in a row count as settled (M3A waits for an unchanged
    element list three times, FIELD_NOTES section 7; a frame hash is cheaper and sees animations);
    ``max_s`` bounds the wait so an endless animation cannot stall an episode. ``interval_s`` is 0
    by default: a screencap itself takes long enough on a phone (tens to hundreds of ms) to space
    the frames, and an idle simulated phone settles in two back-to-back frames."""

    min_s: float = 0.0
    interval_s: float = 0.0
    stable_frames: int = 2
    max_s: float = 3.0

    def to_json(self) -> dict[str, Any]:
        return {"min_s": self.min_s, "interval_s": self.interval_s, "stable_frames": self.stable_frames,
                "max_s": self.max_s}


@dataclass(frozen=True)
class DeviceConfig:
    backend: Backend = "adb"
    adb_host: str = "127.0.0.1"
    adb_port: int | None = None
    settle: SettleConfig = field(default_factory=SettleConfig)
    command_timeout: float = 30.0
    reconnect_timeout: float = 15.0
    app_labels: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "adb_host": self.adb_host, "adb_port": self.adb_port,
                "settle": self.settle.to_json(), "command_timeout": self.command_timeout,
                "reconnect_timeout": self.reconnect_timeout, "app_labels": dict(self.app_labels)}

    def open(self, serial: str):
        """Build the device for ``serial`` with the configured backend."""
        return BACKENDS[self.backend](serial, self)


def _adb(serial: str, cfg: DeviceConfig):
    from harness.device.adb import AdbDevice
    return AdbDevice(serial, host=cfg.adb_host, port=cfg.adb_port, settle=cfg.settle,
                     command_timeout=cfg.command_timeout, app_labels=cfg.app_labels)


def _u2(serial: str, cfg: DeviceConfig):
    from harness.device.u2 import U2Device
    return U2Device(serial, host=cfg.adb_host, port=cfg.adb_port, settle=cfg.settle,
                    command_timeout=cfg.command_timeout, app_labels=cfg.app_labels)


BACKENDS: dict[str, Callable[[str, DeviceConfig], Any]] = {"adb": _adb, "uiautomator2": _u2}
