"""The monitors' decision the runner and the guard share (harness/run/gate.py), on its own, with
scripted monitors and no phone: every check bounded by its monitor's timeout_s and failing closed
(raised, no answer in time, no verdict at all), the counts the run's result reports
(monitor_checks: made, flagged, failed, ran_unchecked), gates asked in turn until one halts, async
checks waited for with the first halting one winning, and what a flagged verdict becomes in modes
ask and reflect (the operator's answer counted; feedback up to the reflect_max-th flag in a row).
Written for mutmut's survivors on gate.py (issue 40, item 3): the runner's tests go through it with
one monitor each and read the episode, not these counts and orders."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.client import transport
from harness.core.actions import Click
from harness.core.episode import Decision, MonitorVerdict, ProposedStep
from harness.run.gate import MONITOR_TIMEOUT_S, Checks, Flagged, Interrupted, check_by, timeout_of

STEP = ProposedStep(3, b"png", Click(x=5, y=6), "click(5, 6)", "pay the rent", "en")


@dataclass
class Scripted:
    """A monitor whose check returns (or raises) what it is given, after ``delay`` seconds."""

    name: str
    answer: Any
    mode: str = "gate"
    timeout_s: float | None = 5.0
    on_error: str = "halt"
    reflect_max: int | None = None
    delay: float = 0.0
    seen: list[int] = field(default_factory=list)

    def check(self, step: ProposedStep) -> Any:
        self.seen.append(step.index)
        if self.delay:
            time.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def verdict(halt: bool, risky: bool | None = None, monitor: str = "", **kw: Any) -> MonitorVerdict:
    return MonitorVerdict(halt=halt, risky=halt if risky is None else risky, monitor=monitor, **kw)


def no_flag(m, step, v):  # a gate in mode gate never asks
    raise AssertionError("flagged called for a gate in mode gate")


def test_a_check_that_raises_returns_no_verdict_or_does_not_answer_fails_closed():
    cases = [(Scripted("raises", RuntimeError("boom")), "RuntimeError: boom"),
             (Scripted("word", "not risky"), "check returned str, not a verdict"),
             (Scripted("slow", verdict(False), timeout_s=0.2, delay=2.0), "no answer within 0.2s")]
    for m, error in cases:
        checks = Checks([m])
        v, halted = checks.gate(STEP, no_flag)
        assert halted is True and v.halt is True and v.category == "monitor_error" and v.error == error, (m.name, v)
        assert v.monitor == m.name and v.risky is None
        assert checks.stats() == {"made": 1, "flagged": 0, "failed": 1, "ran_unchecked": 0}
        checks.close()


def test_on_error_allow_lets_a_failed_check_run_and_counts_it():
    checks = Checks([Scripted("m", RuntimeError("down"), on_error="allow")])
    v, halted = checks.gate(STEP, no_flag)
    assert halted is False and v.halt is False and v.failed and v.risky is None
    assert checks.stats() == {"made": 1, "flagged": 0, "failed": 1, "ran_unchecked": 1}


def test_gates_are_asked_in_turn_until_one_halts_and_each_verdict_is_seen():
    a = Scripted("a", verdict(False, monitor="a"))
    b = Scripted("b", verdict(True, category="Financial Loss"))   # no monitor name of its own: b's
    c = Scripted("c", verdict(False, monitor="c"))
    checks = Checks([a, b, c])
    seen: list[MonitorVerdict] = []
    v, halted = checks.gate(STEP, no_flag, seen=seen.append)
    assert halted is True and v.monitor == "b" and v.latency_s > 0
    assert [x.monitor for x in seen] == ["a", "b"] and c.seen == []
    assert checks.stats() == {"made": 2, "flagged": 1, "failed": 0, "ran_unchecked": 0}
    v, halted = Checks([a, c]).gate(STEP, no_flag)
    assert halted is False and v.monitor == "c"  # nothing halted: the last gate's verdict is recorded
    assert Checks([]).gate(STEP, no_flag) == (None, False)


def test_a_verdicts_own_latency_and_name_are_kept():
    m = Scripted("m", verdict(False, monitor="crate-s", latency_s=7.5))
    v, _ = Checks([m]).gate(STEP, no_flag)
    assert v.monitor == "crate-s" and v.latency_s == 7.5


def test_only_gate_modes_are_asked_before_the_action():
    gate, ask, reflect, both = (Scripted(n, verdict(False), mode=n) for n in ("gate", "ask", "reflect", "reflect,ask"))
    background = Scripted("async", verdict(False), mode="async")
    checks = Checks([gate, ask, reflect, both, background])
    assert checks.gates == [gate, ask, reflect, both] and checks.background == [background]


def test_async_checks_are_waited_for_and_the_first_halting_one_wins():
    quiet, loud, later = Scripted("q", verdict(False)), Scripted("l", verdict(True)), Scripted("t", verdict(True))
    checks = Checks([quiet, loud, later])
    checks.background = [quiet]
    assert checks.wait() is None  # nothing pending
    checks.start(STEP)
    assert checks.wait()[0] == 3 and checks.pending == []   # nothing halted: the last one's verdict
    checks.background = [quiet, loud, later]
    checks.start(STEP)
    checks.start(ProposedStep(4, b"png", Click(x=1, y=1), None, "i", "en"))
    idx, v = checks.wait()
    assert (idx, v.monitor, v.halt) == (3, "l", True) and checks.pending == []
    assert checks.stats()["made"] == 7 and checks.stats()["flagged"] == 4


def test_timeout_of_a_monitor_that_states_none_is_two_minutes():
    assert MONITOR_TIMEOUT_S == 120.0
    assert timeout_of(Scripted("m", None, timeout_s=None)) == 120.0
    assert timeout_of(Scripted("m", None, timeout_s=0.5)) == 0.5


def test_every_model_call_of_a_check_ends_by_the_monitors_deadline():
    got: list[float | None] = []

    class Reads:
        name, mode, timeout_s = "m", "gate", 5.0

        def check(self, step):
            got.append(transport.outer_deadline())
            return verdict(False)

    at = time.monotonic() + 5
    check_by(Reads(), STEP, at)
    assert got == [at] and transport.outer_deadline() is None
    t0 = time.monotonic()
    Checks([Reads()]).gate(STEP, no_flag)
    assert t0 + 4.5 < got[1] <= time.monotonic() + 5


# --- Flagged: mode ask and reflect ------------------------------------------------------------------------
class Person:
    def __init__(self, *decisions: Decision):
        self.decisions = list(decisions)
        self.asked: list[Any] = []

    def ask(self, question, live, should_stop=lambda: False):
        self.asked.append(question)
        return self.decisions.pop(0)


def flagged(operator=None) -> Flagged:
    return Flagged(operator, None, lambda: False, lambda m, step, v: ("question", m.name, step.index, v.category))


def test_ask_counts_the_operators_answers_and_their_wait():
    person = Person(Decision("allow", "page", 1.5), Decision("deny", "timeout", 2.0), Decision("deny", "terminal", 0.25))
    f = flagged(person)
    m = Scripted("m", None, mode="ask")
    risky = verdict(True, category="Destructive Actions", monitor="m")
    allowed = f(m, STEP, risky)
    assert allowed.halt is False and allowed.operator["decision"] == "allow" and allowed.category == "Destructive Actions"
    assert f(m, STEP, risky).halt is True and f(m, STEP, risky).halt is True
    assert person.asked[0] == ("question", "m", 3, "Destructive Actions")
    assert f.asked == {"asked": 3, "allowed": 1, "denied": 2, "timed_out": 1, "wait_s": 3.75}
    assert f.step_wait == [3.75]


def test_ask_with_nobody_to_ask_denies_and_a_stopping_run_is_interrupted():
    f = flagged(None)
    v = f(Scripted("m", None, mode="ask"), STEP, verdict(True))
    assert v.halt is True and v.operator["by"] == "nobody" and f.asked["denied"] == 1

    class Stopping:
        def ask(self, question, live, should_stop):
            return None

    g = flagged(Stopping())
    with pytest.raises(Interrupted):
        g(Scripted("m", None, mode="ask"), STEP, verdict(True))
    assert g.stopped is True and g.asked["asked"] == 0


@pytest.mark.parametrize("limit", [None, 1, 3])
def test_reflect_gives_feedback_until_the_limit_in_a_row_then_halts(limit):
    m = Scripted("crate-s", None, mode="reflect", reflect_max=limit)
    f = flagged(Person())
    want = limit or 2  # REFLECT_MAX for a monitor that states none
    v = verdict(True, category="Over-Automation", reason="sends it all", monitor="crate-s", score=0.9)
    for n in range(1, want):
        got = f(m, STEP, v)
        assert got.halt is True and got.feedback == {"step": 3, "action": STEP.action.describe(), "monitor": "crate-s",
                                                     "category": "Over-Automation", "reason": "sends it all",
                                                     "score": 0.9, "in_row": n, "limit": want}
        f.in_row[0] += 1  # the caller counts a reflected proposal
    last = f(m, STEP, v)
    assert last.halt is True and not last.feedback and last.operator is None


def test_reflect_never_reflects_a_failed_check_and_reflect_ask_asks_at_the_limit():
    failed = MonitorVerdict.check_failed(Scripted("m", None), "down")
    f = flagged(Person(Decision("allow", "page", 0.1)))
    assert not f(Scripted("m", None, mode="reflect", reflect_max=3), STEP, failed).feedback
    both = Scripted("m", None, mode="reflect,ask", reflect_max=1)
    v = f(both, STEP, verdict(True))
    assert v.halt is False and v.operator["decision"] == "allow" and f.asked["asked"] == 1


def test_checks_run_beside_each_other_on_their_own_threads():
    gate = threading.Event()

    class Blocks:
        name, mode, timeout_s, on_error = "b", "async", 5.0, "halt"

        def check(self, step):
            gate.wait(5)
            return verdict(False)

    checks = Checks([Blocks(), Blocks()])
    t0 = time.monotonic()
    checks.start(STEP)
    assert time.monotonic() - t0 < 1 and len(checks.pending) == 2  # started, not waited for
    gate.set()
    assert checks.wait()[1].halt is False
    checks.close()


# --- what mutmut's survivors on harness/run/gate.py showed no test read (issue 40 item 3) ---

def test_on_error_allow_lets_a_check_that_times_out_or_returns_no_verdict_run():
    for m in (Scripted("slow", verdict(False), timeout_s=0.2, delay=2.0, on_error="allow"),
              Scripted("word", "not risky", on_error="allow")):
        checks = Checks([m])
        v, halted = checks.gate(STEP, no_flag)
        assert halted is False and v.halt is False and v.failed and v.extras == {"on_error": "allow"}, (m.name, v)
        assert checks.stats()["ran_unchecked"] == 1
        checks.close()


def test_a_verdicts_latency_is_the_time_its_check_took():
    v, _ = Checks([Scripted("m", verdict(False), delay=0.05)]).gate(STEP, no_flag)
    assert 0.05 <= v.latency_s < MONITOR_TIMEOUT_S  # measured from when it was asked, not a clock reading


def test_every_monitor_gets_a_thread_of_its_own():
    entered, release = threading.Semaphore(0), threading.Event()

    class Blocks:
        name, mode, timeout_s, on_error = "b", "async", 10.0, "halt"

        def check(self, step):
            entered.release()
            release.wait(10)
            return verdict(False)

    checks = Checks([Blocks(), Blocks(), Blocks()])
    checks.start(STEP)
    try:
        assert all(entered.acquire(timeout=5) for _ in range(3)), "a check waited for another's thread"
    finally:
        release.set()
    assert checks.wait()[1].halt is False
    checks.close()


def test_closing_neither_waits_for_a_stuck_check_nor_starts_a_queued_one():
    release = threading.Event()
    started: list[int] = []

    class Stuck:
        name, mode, timeout_s, on_error = "s", "async", 30.0, "halt"

        def check(self, step):
            started.append(step.index)
            release.wait(30)
            return verdict(False)

    checks = Checks([Stuck()])  # two threads: the third check waits in the queue
    checks.start(STEP)
    checks.start(STEP)
    queued = checks.pool.submit(lambda: started.append(-1))
    closing = threading.Thread(target=checks.close, daemon=True)
    closing.start()
    closing.join(5)
    try:
        assert not closing.is_alive(), "close() waited for a check that does not end"
        assert queued.cancelled() and -1 not in started
    finally:
        release.set()


def test_reflect_feedback_names_the_monitor_when_its_verdict_does_not_and_a_new_flagged_has_not_stopped():
    f = flagged(Person())
    assert f.stopped is False
    got = f(Scripted("crate-s", None, mode="reflect", reflect_max=3), STEP, verdict(True, category="Over-Automation"))
    assert got.feedback["monitor"] == "crate-s"
