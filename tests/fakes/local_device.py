"""A test double: the Device interface over an in-process SimPhone, no adb in between.

Runner logic (stop reasons, caps, monitors, observers, records) is tested against this in
milliseconds; the same paths are tested over real adb in tests/test_runner_adb.py.
"""

from __future__ import annotations

import hashlib
from typing import Any

from harness.core.actions import Action
from harness.device.base import ActionTiming, DeviceDescription, InfraError
from harness.sim import local
from harness.sim.phone import SimPhone


class LocalSimDevice:
    def __init__(self, phone: SimPhone | None = None, serial: str = "local-sim"):
        self.phone = phone or SimPhone()
        self.serial = serial
        self.dead_after_actions: int | None = None  # simulate a disconnect after N actions
        self.actions = 0

    def _alive(self) -> None:
        if self.dead_after_actions is not None and self.actions >= self.dead_after_actions:
            raise InfraError(f"{self.serial}: device offline (test double)")

    def describe(self) -> DeviceDescription:
        return DeviceDescription(serial=self.serial, model="local", size=self.phone.size, healthy=True, simulated=True)

    def screen_size(self) -> tuple[int, int]:
        return self.phone.size

    def screenshot(self) -> bytes:
        self._alive()
        return self.phone.screencap_png()

    def hierarchy(self) -> str:
        self._alive()
        return self.phone.hierarchy_xml()

    def execute(self, action: Action) -> None:
        self._alive()
        self.actions += 1
        local.execute(self.phone, action)

    def settle(self, previous: bytes | None = None, on_frame: Any = None,
               on_pixels: Any = None) -> tuple[bytes, ActionTiming]:  # a PNG source: no pixels first
        shot = self.screenshot()
        if on_frame is not None:
            on_frame(shot)
        return shot, ActionTiming(settle=0.0, extra={"sha": hashlib.sha1(shot).hexdigest()[:8]})

    def current_app(self) -> tuple[str, str]:
        return self.phone.current_focus()

    def reset(self, setup: Any, language: str) -> None:
        self._alive()
        if setup.sim is not None:
            cfg = {"preset": setup.sim.preset, "locale": setup.sim.locale or language,
                   "anomalies": list(setup.sim.anomalies), "seed": setup.sim.seed, "state": setup.sim.state}
            self.phone.reset(**cfg)

    def state(self) -> dict[str, Any] | None:
        self._alive()
        return self.phone.state_json()

    def reconnect(self, timeout: float = 0) -> bool:
        return self.dead_after_actions is None

    def close(self) -> None:
        pass
