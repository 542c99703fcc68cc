"""A person's touches during a hand-over (an agent's ``needs_user``), read as ``harness record``
reads them: ``getevent -lt`` over adb turned into gestures (``harness.recorder.evdev``), the screen
captured around each one, and the gestures made into actions (``harness.recorder.steps``: taps,
long presses, swipes, keyboard typing as one ``type``, Back/Home), the same code the recorder runs
(``harness.recorder.session.follow``). Each finished step goes to the runner as an
:class:`harness.episode.OperatorStep`, with its screens, as soon as it is read; what is still
being typed when the phone is handed back is finished then.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Callable

from harness.device.base import DeviceError, InfraError
from harness.episode import OperatorStep
from harness.recorder.session import (GeteventStream, capture, density_of, follow, ime_packages, touching,
                                      touchscreen_of)
from harness.recorder.steps import Step, StepBuilder

log = logging.getLogger(__name__)

QUIET_S = 0.6        # at hand-back: the touch stream quiet this long means every touch has arrived
SETTLE_MAX_S = 5.0   # ... waited for at most this long


class HandoverError(RuntimeError):
    """The person's touches cannot be read on this phone (no touchscreen, no getevent)."""


class OperatorTouches:
    """Reads the touches on ``device`` (an ``harness.device.adb.AdbDevice``) from :meth:`start`
    to :meth:`stop`, giving each step read to ``on_step``."""

    def __init__(self, device: Any, on_step: Callable[[OperatorStep], None], warn: Callable[[str], None] | None = None):
        self.device = device
        self.on_step = on_step
        self.warnings: list[str] = []
        self._warn_out = warn or (lambda m: log.info("%s", m))
        self.stop_event = threading.Event()
        self.lost: str | None = None
        self.simulated = bool(getattr(device, "is_simulated", lambda: False)())
        try:
            screen, n_devices = touchscreen_of(device)
        except Exception as e:  # RecordError, adb errors: this phone's touches cannot be read
            raise HandoverError(f"cannot read the touches on {getattr(device, 'serial', '?')}: {e}") from None
        self.screen = screen
        self.builder = StepBuilder(ime_packages(device), density_of(device), device.screen_size())
        self.stream = GeteventStream(device, screen, n_devices, self._warn)
        self._thread: threading.Thread | None = None
        self._emit_lock = threading.Lock()
        self.count = 0

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        self._warn_out(message)

    def _look(self, light: bool):
        return capture(self.device, self.stream, self.simulated, light)

    def _emit(self, steps: list[Step]) -> None:
        with self._emit_lock:
            for s in steps:
                extras: dict[str, Any] = {"gesture": s.gesture, "page_before": s.before.page,
                                          "page_after": s.after.page if s.after else None}
                if s.warnings:
                    extras["warnings"] = list(s.warnings)
                self.count += 1
                try:
                    self.on_step(OperatorStep(s.action, s.before.png, s.after.png if s.after else None, extras))
                except Exception:  # the runner's records failing is the runner's to report: stop reading
                    log.exception("an operator step could not be recorded")
                    self.stop_event.set()
                    raise

    def start(self) -> None:
        try:
            self.stream.start()
            self.builder.start(self._look(False))
        except Exception as e:
            self.stream.stop()
            raise HandoverError(f"cannot read the touches on {self.device.serial}: {e}") from None
        self._thread = threading.Thread(target=self._run, name=f"handover-{self.device.serial}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.lost = follow(self.stream, self.builder, self._look, self.stop_event, self._emit)
        except Exception as e:
            self.lost = f"{type(e).__name__}: {e}"

    def stop(self) -> None:
        """The phone is handed back: read what is left, finish the step being made, stop reading."""
        # touches still on their way from the phone are the person's too: wait until the stream
        # has been quiet for QUIET_S (and no finger is down), at most SETTLE_MAX_S
        seen, quiet_since, t0 = self.stream.counts(), time.monotonic(), time.monotonic()
        while time.monotonic() - t0 < SETTLE_MAX_S and not self.stream.ended.is_set():
            time.sleep(0.05)
            now = self.stream.counts()
            if now != seen or touching(self.stream):
                seen, quiet_since = now, time.monotonic()
            elif time.monotonic() - quiet_since >= QUIET_S and self.stream.gestures.empty():
                break
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        while True:  # gestures the loop had no time to take
            try:
                self.builder.gesture(self.stream.gestures.get_nowait())
            except queue.Empty:
                break
        final = None
        if self.lost is None:
            try:
                final = self._look(False)
            except (InfraError, DeviceError) as e:
                self.lost = f"the phone stopped answering: {e}"
        self.stream.stop()
        self._emit(self.builder.finish(final))
