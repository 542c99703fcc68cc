"""The guarded session's trajectory: screens and step lines written as an ordinary episode is.

The loop belongs to the agent, so the screen after a step is the screen the agent acts on next:
when the next action arrives its screen (taken over the guard's own connection to the phone) is the
step's ``screen_after`` and the next step's ``screen_before``, as in the runner's trajectories; at
the end of the session it is the final screen. A step that did not run is written at once (no screen
after it); one that ran is written when its screen after is known, and when an async check of it is
still out, once its verdict is in. Screens are written once each: an unchanged screen keeps its
file. Judges (observers) get each step as its line is written; the live view is told the same.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.core.episode import LiveRecorder, StepEvent, StepObserver
from harness.records import EpisodeWriter, StepRecord

log = logging.getLogger("harness.guard")


@dataclass
class Pending:
    record: StepRecord
    event: StepEvent
    wants_verdict: bool = False   # an async check of it has not answered yet


@dataclass
class Steps:
    writer: EpisodeWriter
    screenshot: Callable[[], bytes]
    observers: list[StepObserver]
    live: LiveRecorder
    index: int = 0                        # steps recorded or pending
    executed: set[int] = field(default_factory=set)
    shot: bytes | None = None             # the last screen written, and its path
    path: str | None = None
    pending: list[Pending] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def screen(self, shot: bytes | None = None) -> tuple[bytes, str]:
        """The phone's screen now (or ``shot``, the agent's own screenshot since the last action),
        written when it changed (as the screen after the last step)."""
        t0 = time.monotonic()
        shot = shot if shot is not None else self.screenshot()
        self.timings["screenshot"] = self.timings.get("screenshot", 0.0) + time.monotonic() - t0
        if self.path is None or shot != self.shot:
            self.path = self.writer.write_screen(self.index, shot)
            self.shot = shot
        for p in self.pending:
            if p.record.executed and p.record.screen_after is None:
                p.record = p.record.model_copy(update={"screen_after": self.path})
                p.event.screenshot_after, p.event.screen_after_path = shot, self.path
        return shot, self.path  # type: ignore[return-value]

    def next_index(self) -> int:
        self.index += 1
        return self.index

    def add(self, record: StepRecord, event: StepEvent, wants_verdict: bool = False) -> None:
        """A step, written now unless it ran (its screen after comes with the next action) or an
        earlier one is still waiting."""
        if record.executed:
            self.executed.add(record.index)
        self.pending.append(Pending(record, event, wants_verdict))
        self.write_ready()

    def verdict(self, index: int, monitor: dict[str, Any] | None) -> None:
        """The async check of step ``index`` answered."""
        for p in self.pending:
            if p.record.index == index:
                p.record = p.record.model_copy(update={"monitor": monitor})
                p.event.monitor = monitor
                p.wants_verdict = False

    def write_ready(self, final: bool = False) -> None:
        while self.pending:
            p = self.pending[0]
            if p.wants_verdict or (p.record.executed and p.record.screen_after is None and not final):
                return
            self.pending.pop(0)
            self.writer.append_step(p.record)
            self.live.recorded(p.record.index)
            for o in self.observers:
                try:
                    o.on_step(p.event)
                except Exception:  # a judge's failure shows in its verdict, never stops the guard
                    log.debug("observer %s on_step failed: %s", getattr(o, "name", o), traceback.format_exc())

    def finish(self) -> bytes | None:
        """The final screen, the steps still waiting for it written: the screen the episode ends on."""
        shot: bytes | None = None
        try:
            shot, _ = self.screen()
        except Exception as e:  # the phone is gone: the steps are written without their screen after
            log.warning("guard: no final screen: %s", e)
        self.write_ready(final=True)
        return shot
