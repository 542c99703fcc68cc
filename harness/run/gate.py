"""The monitors' decision on a proposed action, shared by everything that runs actions past them:
the runner's own loop (harness.run.runner) and the guard in front of an agent that brings its own loop
(harness.guard). There is one copy of it, here.

:class:`Checks` asks each monitor about a :class:`harness.core.episode.ProposedStep`, bounded by the
monitor's ``timeout_s``, and fails closed: a check that raises or does not answer in time gives
:meth:`MonitorVerdict.check_failed`, which halts unless the monitor says ``on_error=allow``.
:class:`Flagged` turns the halting verdict of a gate in mode ``ask`` or ``reflect`` into the verdict
that stands: the operator's decision (``ask``), or feedback for the agent (``reflect``), up to the
monitor's ``reflect_max``-th flagged proposal in a row.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import time
from typing import Any, Callable

from harness.client import transport as model_transport
from harness.core.daemon_pool import DaemonPool
from harness.core.episode import (REFLECT_MAX, REFLECT_MODES, Feedback, LiveRecorder, Monitor, MonitorVerdict, Operator,
                                  ProposedStep, Question, nobody_to_ask)


class Interrupted(Exception):
    """The run is being stopped (Ctrl-C): the episode is abandoned unrecorded, to be redone on --resume."""


MONITOR_TIMEOUT_S = 120.0  # a monitor that states no timeout_s
GATE_MODES = ("gate", "ask", *REFLECT_MODES)  # checked before the action runs


class Checks:
    """Monitors' checks, each on a worker thread and bounded by its monitor's ``timeout_s``. A
    check that raises or does not answer in time gives :meth:`MonitorVerdict.check_failed`.

    Gate monitors (and ``ask`` ones) are asked and waited for before the action runs. Async monitors
    are asked as the action starts and waited for at the next step boundary, before the next action
    can run; the step's record is held until then so that it carries its own check's verdict.
    ``flagged`` counts verdicts that found the action risky."""

    def __init__(self, monitors: list[Monitor]):
        self.gates = [m for m in monitors if m.mode in GATE_MODES]
        self.background = [m for m in monitors if m.mode not in GATE_MODES]
        self.pool = DaemonPool(max(2, 2 * len(monitors)), thread_name_prefix="monitor") if monitors else None
        self.pending: list[tuple[int, Monitor, cf.Future, float]] = []
        self.made = self.flagged = self.failed = self.ran_unchecked = 0

    def _submit(self, m: Monitor, step: ProposedStep) -> tuple[cf.Future, float]:
        assert self.pool is not None
        started = time.monotonic()
        return self.pool.submit(check_by, m, step, started + timeout_of(m)), started

    def _result(self, m: Monitor, fut: cf.Future, started: float) -> MonitorVerdict:
        timeout = timeout_of(m)
        try:
            v = fut.result(timeout=max(0.0, started + timeout - time.monotonic()))
        except cf.TimeoutError:
            v = MonitorVerdict.check_failed(m, f"no answer within {timeout:g}s")
        except Exception as e:  # a broken monitor must not take the episode down: it fails closed
            v = MonitorVerdict.check_failed(m, f"{type(e).__name__}: {e}")
        if not isinstance(v, MonitorVerdict):
            v = MonitorVerdict.check_failed(m, f"check returned {type(v).__name__}, not a verdict")
        v.monitor = v.monitor or m.name
        v.latency_s = v.latency_s or (time.monotonic() - started)
        self.made += 1
        if v.risky is True:
            self.flagged += 1
        if v.failed:
            self.failed += 1
            if not v.halt:
                self.ran_unchecked += 1
        return v

    def gate(self, step: ProposedStep, flagged: Callable[[Monitor, ProposedStep, MonitorVerdict], MonitorVerdict],
             seen: Callable[[MonitorVerdict], None] = lambda v: None) -> tuple[MonitorVerdict | None, bool]:
        """Every gate's verdict on ``step`` in turn until one halts: (the verdict to record, halted).
        Each verdict goes to ``seen`` as it arrives; the halting verdict of a gate in another mode
        than ``gate`` goes to ``flagged``, whose answer stands instead (an ``ask`` gate's: with the
        operator's decision; a ``reflect`` gate's: with the feedback for the agent, still halting
        the action)."""
        last = None
        for m in self.gates:
            v = self._result(m, *self._submit(m, step))
            seen(v)
            if v.halt and m.mode != "gate":
                v = flagged(m, step, v)
            last = v
            if v.halt:
                return v, True
        return last, False

    def start(self, step: ProposedStep) -> None:
        for m in self.background:
            self.pending.append((step.index, m, *self._submit(m, step)))

    def wait(self) -> tuple[int, MonitorVerdict] | None:
        """Wait for every pending async check: (step, verdict) of the first that halts, else of
        the last one, else None when nothing was pending."""
        found = last = None
        for idx, m, fut, started in self.pending:
            v = self._result(m, fut, started)
            last = (idx, v)
            if v.halt and found is None:
                found = (idx, v)
        self.pending = []
        return found or last

    def stats(self) -> dict[str, int]:
        return {"made": self.made, "flagged": self.flagged, "failed": self.failed, "ran_unchecked": self.ran_unchecked}

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


def timeout_of(m: Monitor) -> float:
    return getattr(m, "timeout_s", None) or MONITOR_TIMEOUT_S


def check_by(m: Monitor, step: ProposedStep, deadline: float) -> MonitorVerdict:
    """``m.check(step)`` with every model call it makes ending by ``deadline`` (the monitor's own)."""
    with model_transport.deadline(deadline):
        return m.check(step)


class Flagged:
    """What the halting verdict of a gate in mode ``ask`` or ``reflect`` becomes (called by
    :meth:`Checks.gate` as its ``flagged``). ``ask``: the operator's decision on ``question(m, step,
    v)`` (no operator: denied); ``reflect``: the verdict with feedback for the agent, unless it is the
    monitor's ``reflect_max``-th flagged proposal in a row or a check that failed (then it halts, or
    asks in ``reflect,ask``). ``asked`` counts the questions and answers, ``step_wait[0]`` the current
    step's wait for the operator, ``in_row[0]`` the flagged proposals reflected on since an action
    last ran (the caller resets both). The run stopping while the operator is asked raises
    :class:`Interrupted` and sets ``stopped``."""

    def __init__(self, operator: Operator | None, live: LiveRecorder, should_stop: Callable[[], bool],
                 question: Callable[[Monitor, ProposedStep, MonitorVerdict], Question]):
        self.operator, self.live, self.should_stop, self.question = operator, live, should_stop, question
        self.asked: dict[str, Any] = {"asked": 0, "allowed": 0, "denied": 0, "timed_out": 0, "wait_s": 0.0}
        self.step_wait = [0.0]
        self.in_row = [0]
        self.stopped = False

    def ask(self, m: Monitor, step: ProposedStep, v: MonitorVerdict) -> MonitorVerdict:
        """The operator's decision on a flagged action (``ask`` mode): the verdict with it."""
        q = self.question(m, step, v)
        d = self.operator.ask(q, self.live, self.should_stop) if self.operator is not None else nobody_to_ask()
        if d is None:  # the run is stopping: the episode is redone on --resume
            self.stopped = True
            raise Interrupted()
        self.asked["asked"] += 1
        self.asked["allowed" if d.allowed else "denied"] += 1
        self.asked["timed_out"] += d.by == "timeout"
        self.asked["wait_s"] += d.wait_s
        self.step_wait[0] += d.wait_s
        return dataclasses.replace(v, halt=not d.allowed, operator=d.to_json())

    def __call__(self, m: Monitor, step: ProposedStep, v: MonitorVerdict) -> MonitorVerdict:
        """A halting verdict of a gate in mode ask or reflect: the verdict that stands (reflect: with
        the feedback for the agent, unless it is the monitor's limit or a check that failed)."""
        if m.mode in REFLECT_MODES:
            limit = getattr(m, "reflect_max", None) or REFLECT_MAX
            if not v.failed and self.in_row[0] + 1 < limit:
                fb = Feedback(step.index, step.action.describe(), v.monitor or m.name, v.category, v.reason,
                              self.in_row[0] + 1, limit, v.score)
                return dataclasses.replace(v, feedback=fb.to_json())
            if m.mode != "reflect,ask":
                return v
        return self.ask(m, step, v)
