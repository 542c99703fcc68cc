"""Typed configuration that picks and tunes the device backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

Backend = Literal["adb", "uiautomator2"]
FramesChoice = Literal["auto", "png", "raw", "u2"]
FRAMES_CHOICES = ("auto", "png", "raw", "u2")


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
    # where the frames come from (harness.device.frame_sources): auto measures the device's sources
    # when it is first used and takes the cheapest per step; png, raw or u2 (uiautomator2 backend) force one
    frames: FramesChoice = "auto"

    def __post_init__(self) -> None:
        if self.frames not in FRAMES_CHOICES:
            raise ValueError(f"settle frames must be one of {', '.join(FRAMES_CHOICES)}, got {self.frames!r}")

    def to_json(self) -> dict[str, Any]:
        return {"min_s": self.min_s, "interval_s": self.interval_s, "stable_frames": self.stable_frames,
                "max_s": self.max_s, "frames": self.frames}


@dataclass(frozen=True)
class DeviceConfig:
    """``adb_host``/``adb_port``: the adb server (None: as adb picks it, see
    :func:`harness.device.adb_server.adb_endpoint`). ``allow_clear``: ``setup.clear`` may run
    ``pm clear`` on a phone that is neither an emulator nor the simulated phone."""

    backend: Backend = "adb"
    adb_host: str | None = None
    adb_port: int | None = None
    settle: SettleConfig = field(default_factory=SettleConfig)
    command_timeout: float = 30.0
    reconnect_timeout: float = 15.0
    app_labels: dict[str, str] = field(default_factory=dict)
    allow_clear: bool = False

    def __post_init__(self) -> None:
        if self.settle.frames == "u2" and self.backend != "uiautomator2":
            raise ValueError("settle frames u2 (uiautomator2's screenshot) need the uiautomator2 backend")

    def endpoint(self):
        from harness.device.adb_server import adb_endpoint
        return adb_endpoint(self.adb_host, self.adb_port)

    def to_json(self) -> dict[str, Any]:
        ep = self.endpoint()
        return {"backend": self.backend, "adb_host": ep.host, "adb_port": ep.port,
                "settle": self.settle.to_json(), "command_timeout": self.command_timeout,
                "reconnect_timeout": self.reconnect_timeout, "app_labels": dict(self.app_labels),
                "allow_clear": self.allow_clear}

    def open(self, serial: str):
        """Build the device for ``serial`` with the configured backend."""
        return BACKENDS[self.backend](serial, self)


def _backend(module: str, name: str) -> Callable[[str, DeviceConfig], Any]:
    """A factory for one backend class, imported when first used (uiautomator2 is heavy)."""
    def make(serial: str, cfg: DeviceConfig) -> Any:
        import importlib

        cls = getattr(importlib.import_module(module), name)
        return cls(serial, host=cfg.adb_host, port=cfg.adb_port, settle=cfg.settle,
                   command_timeout=cfg.command_timeout, app_labels=cfg.app_labels, allow_clear=cfg.allow_clear)
    return make


BACKENDS: dict[str, Callable[[str, DeviceConfig], Any]] = {
    "adb": _backend("harness.device.adb", "AdbDevice"),
    "uiautomator2": _backend("harness.device.u2", "U2Device"),
}
