"""A person's touches during a hand-over (an agent's ``needs_user``), read as ``harness record``
reads them: ``getevent -lt`` over adb turned into gestures (``harness.recorder.evdev``), the screen
captured around each one, and the gestures made into actions (``harness.recorder.steps``: taps,
long presses, swipes, keyboard typing as one ``type``, Back/Home), the same code the recorder runs
(``harness.recorder.session.follow``). Each finished step goes to the runner as an
:class:`harness.core.episode.OperatorStep`, with its screens, as soon as it is read; what is still
being typed when the phone is handed back is finished then.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable

from harness.device.base import DeviceError, InfraError
from harness.core.episode import OperatorStep
from harness.recorder.session import (GeteventStream, capture, density_of, follow, ime_packages, touching,
                                      touchscreen_of)
from harness.recorder.steps import Step, StepBuilder
from harness.sim.keyboard import PKG as SIM_KEYBOARD

log = logging.getLogger(__name__)

QUIET_S = 0.6        # at hand-back: the touch stream quiet this long means every touch has arrived
SETTLE_MAX_S = 5.0   # ... waited for at most this long


class HandoverError(RuntimeError):
    """The person's touches cannot be read on this phone (no touchscreen, no getevent)."""


class OperatorTouches:
    """Reads the touches on ``device`` (an ``harness.device.adb.AdbDevice``) from :meth:`start`
    to :meth:`stop`, giving each step read to ``on_step``."""

    def __init__(self, device: Any, on_step: Callable[[OperatorStep], None], warn: Callable[[str], None] | None = None,
                 ready: Callable[[int], None] = lambda gestures: None):
        self.device = device
        self.on_step = on_step
        self.ready = ready  # the recorder's [ready] cue: every gesture so far (their count) is read
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
        # the keyboard a person types on: the phone's input method, and the simulated phone's own
        # keyboard (a run selects ADBKeyboard for the agent's typing; the sim still shows its keyboard)
        self.builder = StepBuilder(ime_packages(device) | {SIM_KEYBOARD}, density_of(device), device.screen_size())
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
                    self.on_step(OperatorStep(s.action, s.before.png, s.after.png if s.after else None, extras,
                                              unread="; ".join(s.warnings) if s.action is None else None))
                except Exception:  # the runner's records failing is the runner's to report: stop reading
                    log.exception("an operator step could not be recorded")
                    self.stop_event.set()
                    raise

    def start(self) -> None:
        try:
            self.stream.start()
            self.builder.start(self._look(False))
            self.ready(self.stream.counts()[1])
        except Exception as e:
            self.stream.stop()
            raise HandoverError(f"cannot read the touches on {self.device.serial}: {e}") from None
        self._thread = threading.Thread(target=self._run, name=f"handover-{self.device.serial}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.lost = follow(self.stream, self.builder, self._look, self.stop_event, self._emit,
                               lambda: self.ready(self.stream.counts()[1]))
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


# --------------------------------------------------------------------------- the stand-in person


class StandInError(ValueError):
    """A ``--do`` that is not an action, or a hand-over that never came."""


def parse_do(text: str) -> Any:
    """One ``harness sim human --do`` action, in a person's words: ``tap X Y``, ``tap-on LABEL``
    (the element showing that text or description), ``long-press X Y``, ``swipe X1 Y1 X2 Y2``,
    ``type TEXT``, ``key back|home|enter|delete``, ``wait S``. Points are screen pixels."""
    from harness.core.actions import ActionError, Click, Key, LongPress, Swipe, TypeText, Wait

    verb, _, rest = text.strip().partition(" ")
    verb = verb.lower().replace("_", "-")
    try:
        if verb == "type":
            if not rest:
                raise StandInError(f"--do {text!r}: type what? (type TEXT)")
            return TypeText(text=rest)
        if verb == "tap-on":
            if not rest.strip():
                raise StandInError(f"--do {text!r}: tap-on what? (tap-on LABEL)")
            return ("tap-on", rest.strip())
        nums = [int(v) for v in rest.split()] if verb in ("tap", "long-press", "swipe") else []
        if verb == "tap" and len(nums) == 2:
            return Click(x=nums[0], y=nums[1])
        if verb == "long-press" and len(nums) == 2:
            return LongPress(x=nums[0], y=nums[1])
        if verb == "swipe" and len(nums) == 4:
            return Swipe(start=(nums[0], nums[1]), end=(nums[2], nums[3]))
        if verb == "key" and rest.strip():
            return Key(key=rest.strip())
        if verb == "wait":
            return Wait(seconds=float(rest or 1))
    except (ValueError, ActionError) as e:
        if isinstance(e, StandInError):
            raise
        raise StandInError(f"--do {text!r}: {e}") from None
    raise StandInError(f"--do {text!r}: not an action (tap X Y, tap-on LABEL, long-press X Y, swipe X1 Y1 X2 Y2, "
                       "type TEXT, key NAME, wait S)")


def waiting_handover(run_dir: str | Path, serial: str | None, timeout: float, poll: float = 0.1,
                     stop: Callable[[], bool] = lambda: False) -> tuple[Path, dict[str, Any]]:
    """The episode of ``run_dir`` (on the phone ``serial``, any when None) whose agent has handed
    the phone over and awaits it back, and the open question (``pending.json``'s ``ask``): waits
    up to ``timeout`` seconds for one."""
    from harness.live.records import read_pending, read_started

    episodes = Path(run_dir) / "episodes"
    deadline = time.monotonic() + timeout
    while True:
        for ep in sorted(episodes.iterdir()) if episodes.is_dir() else []:
            ask = (read_pending(ep) or {}).get("ask") or {}
            if ask.get("kind") != "needs_user" or ask.get("decision") is not None:
                continue
            if serial is None or (read_started(ep) or {}).get("device") == serial:
                return ep, ask
        if time.monotonic() >= deadline or stop():
            raise StandInError(f"{run_dir}: no episode handed the phone over"
                               + (f" on {serial}" if serial else "") + f" within {timeout:g} s")
        time.sleep(poll)


def wait_ready(episode_dir: str | Path, ask_id: str, touches: int, timeout: float = 30.0) -> None:
    """Wait until the hand-over ``ask_id`` has read ``touches`` touches (its ``ready`` cue, as
    ``harness record`` prints ``[ready] gestures=N``): a person looks at what they did before the
    next thing they do."""
    from harness.live.records import read_pending

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ask = (read_pending(episode_dir) or {}).get("ask") or {}
        if ask.get("id") != ask_id or ask.get("decision") is not None:
            raise StandInError(f"{episode_dir}: the hand-over {ask_id} is over")
        if int(ask.get("ready") or 0) >= touches:
            return
        time.sleep(0.05)
    raise StandInError(f"{episode_dir}: the hand-over read no more than {ask.get('ready')} of {touches} touch(es) "
                       f"within {timeout:g} s")


def answer_handover(episode_dir: str | Path, ask_id: str, decision: str = "hand_back") -> dict[str, Any]:
    """Hand the phone back (or give up) as the live page's button does, recorded ``by: stand_in``
    (a program played the person: the record never says a person answered on the page): the
    answer that stands."""
    from harness.live.records import claim_decision

    record, _ = claim_decision(episode_dir, ask_id, decision, "stand_in")
    return record
