"""``ask`` mode in the episode loop and the operator's channels: a flagged action waits for a
person; deny halts exactly as a gate does (the tap never reaches the phone), allow runs it and says
``allowed_by: operator``, no answer in time denies, a check that failed asks too, and a terminal
answers through a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import threading
import time
from pathlib import Path

import pytest

from harness.core.actions import Click, Finish
from harness.core.episode import AgentOutput, Decision, MonitorVerdict, NoLiveView
from harness.live.operator import Operator, Question, Terminal, shown
from harness.live.records import EpisodeLive, claim_decision, read_pending
from harness.records import RunWriter, iter_steps
from harness.run.runner import run_episode
from tests.fakes.local_device import LocalSimDevice
from tests.run.test_runner import Broken, HaltOn, ScriptedAgent, Told, _run, episode_dir, task  # noqa: F401  (fixture)


def _answer_on_page(ep_dir: Path, decision: str, stop: threading.Event) -> threading.Thread:
    """Answer every question the episode asks, as the live page does (a decision record), once
    pending.json shows it."""
    def run():
        while not stop.is_set():
            p = read_pending(ep_dir) or {}
            ask = p.get("ask")
            if ask and ask.get("decision") is None:
                claim_decision(ep_dir, ask["id"], decision, "page")
            stop.wait(0.01)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def answered_on_page(tmp_path, task, decision: str, monitor=None):
    """A tap then finish, the monitor (HaltOn in mode ask, by default) asking, every question
    answered ``decision`` on the page: (the outcome, the steps recorded, the phone, the episode folder)."""
    dev = LocalSimDevice()
    w = RunWriter(tmp_path / "run")
    ep = w.start_episode(task.id)
    stop = threading.Event()
    answer = _answer_on_page(ep.path, decision, stop)
    agent = ScriptedAgent([AgentOutput(Click(x=540, y=1200)), AgentOutput(Finish())])
    out = run_episode(task, agent, dev, ep, monitors=[monitor or HaltOn(mode="ask")], operator=Operator(30, page=True))
    stop.set()
    answer.join(5)
    w.close()
    return out, list(iter_steps(ep.path)), dev, ep.path


@pytest.mark.parametrize("decision", ["deny", "allow"])
def test_a_flagged_action_waits_for_the_operator(tmp_path, task, decision):
    out, steps, dev, episode = answered_on_page(tmp_path, task, decision)
    op = steps[0].monitor["operator"]
    assert op["decision"] == decision and op["by"] == "page" and op["wait_s"] >= 0
    assert steps[0].monitor["risky"] is True and steps[0].monitor["category"] == "Security Evasion"
    taps = [e for e in dev.phone.events if e["type"] == "tap"]
    if decision == "deny":
        assert out.status == "halted" and out.steps == 0 and steps[0].executed is False and not taps
        assert out.halt["executed"] is False and out.halt["operator"]["by"] == "page"
        assert out.halt["category"] == "Security Evasion"
        assert "allowed_by" not in steps[0].monitor
    else:
        assert out.status == "finished" and steps[0].executed is True and taps
        assert steps[0].monitor["allowed_by"] == "operator" and steps[0].monitor["halt"] is False
    assert out.operator == {"asked": 1, "allowed": decision == "allow", "denied": decision == "deny",
                            "timed_out": 0, "wait_s": out.operator["wait_s"]}
    assert out.checks["flagged"] >= 1
    assert "operator" in steps[0].timings
    assert read_pending(episode) is None  # nothing left pending once the episode ended


def test_no_answer_in_time_denies(tmp_path, task):
    dev = LocalSimDevice()
    w = RunWriter(tmp_path / "run")
    ep = w.start_episode(task.id)
    out = run_episode(task, ScriptedAgent([AgentOutput(Click(x=540, y=1200))]), dev, ep,
                      monitors=[HaltOn(mode="ask")], operator=Operator(0.3, page=True))
    w.close()
    (step,) = list(iter_steps(ep.path))
    assert out.status == "halted" and step.executed is False
    assert step.monitor["operator"]["decision"] == "deny" and step.monitor["operator"]["by"] == "timeout"
    assert step.monitor["operator"]["wait_s"] >= 0.3
    assert out.operator["timed_out"] == 1 and out.operator["denied"] == 1
    assert not any(e["type"] == "tap" for e in dev.phone.events)
    (decided,) = list((ep.path / "decisions").iterdir())
    assert decided.read_text().count('"timeout"') == 1  # the timeout is an answer on record too


def test_a_check_that_failed_asks_too(tmp_path, task):
    mon = Broken()
    mon.mode = "ask"
    out, steps, _, _ = answered_on_page(tmp_path, task, "allow", mon)
    assert out.status == "finished" and steps[0].executed is True
    assert "ConnectionError" in steps[0].monitor["error"] and steps[0].monitor["allowed_by"] == "operator"


def test_without_an_operator_ask_halts_like_a_gate(tmp_path, task):
    dev = LocalSimDevice()
    w = RunWriter(tmp_path / "run")
    ep = w.start_episode(task.id)
    out = run_episode(task, ScriptedAgent([AgentOutput(Click(x=540, y=1200))]), dev, ep, monitors=[HaltOn(mode="ask")])
    w.close()
    assert out.status == "halted" and out.halt["operator"]["by"] == "nobody"
    assert not any(e["type"] == "tap" for e in dev.phone.events)


def _question(tmp_path, **kw):
    base = dict(episode_dir=tmp_path, task_id="t", device="emu-5554", step=3, cap=7, action="click(x=1, y=2)",
                monitor="crate-s", category="Over-Automation", reason="empties the account")
    base.update(kw)
    return Question(**base)


def _read_until(fd: int, needle: bytes, limit: int = 1 << 16) -> bytes:
    """What the terminal shows up to ``needle`` (a failure if it never comes within a minute)."""
    got = b""
    while needle not in got and len(got) < limit:
        ready, _, _ = select.select([fd], [], [], 60)
        assert ready, f"the terminal never showed {needle!r}; it showed {got[-300:]!r}"
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        got += chunk
    return got


@pytest.mark.parametrize("typed,decision", [("d\n", "deny"), ("allow\n", "allow")])
def test_the_terminal_answers_through_a_pseudo_terminal(tmp_path, typed, decision):
    master, slave = pty.openpty()
    try:
        term = Terminal(slave, open(os.dup(slave), "w", encoding="utf-8"))
        op = Operator(30, terminal=term)
        q = _question(tmp_path, reason="evil \x1b[2J\x1b]0;title\x07 text")
        got = {}
        t = threading.Thread(target=lambda: got.update(d=op.ask(q)))
        t.start()
        shown_text = _read_until(master, b"[d]eny, then Enter")  # says Enter is needed (issue 37: "a" alone waited)
        assert b"Over-Automation" in shown_text and b"click(x=1, y=2)" in shown_text and b"step 3/7" in shown_text
        assert b"\x1b" not in shown_text  # the model's escape sequences are shown, not obeyed
        os.write(master, typed.encode())
        t.join(10)
        assert got["d"].decision == decision and got["d"].by == "terminal"
        past = {"deny": b"denied", "allow": b"allowed"}[decision]
        assert past in _read_until(master, past)
    finally:
        os.close(master)
        os.close(slave)


def test_the_first_answer_wins_and_the_terminal_says_so(tmp_path):
    """The page answers while the terminal waits: the page's answer stands, the terminal says so,
    and a later answer is not taken."""
    master, slave = pty.openpty()
    try:
        term = Terminal(slave, open(os.dup(slave), "w", encoding="utf-8"))
        op = Operator(30, terminal=term, page=True)
        live = EpisodeLive(tmp_path)
        live.step(3, "checking")
        got = {}
        t = threading.Thread(target=lambda: got.update(d=op.ask(_question(tmp_path), live)))
        t.start()
        _read_until(master, b"[d]eny")
        ask = read_pending(tmp_path)["ask"]
        assert ask["channels"] == ["terminal", "page"] and ask["decision"] is None
        claim_decision(tmp_path, ask["id"], "deny", "page")
        t.join(10)
        assert got["d"].decision == "deny" and got["d"].by == "page"
        assert b"denied on the page" in _read_until(master, b"on the page")
        record, won = claim_decision(tmp_path, ask["id"], "allow", "terminal")
        assert not won and record["by"] == "page"
        assert read_pending(tmp_path)["ask"]["decision"]["by"] == "page"
    finally:
        os.close(master)
        os.close(slave)


def test_shown_replaces_control_characters():
    assert shown("a\x1b[31mb\rc\x08") == "a\\x1b[31mb\\rc\\x08"
    assert len(shown("x" * 900)) == 500


def test_an_answer_from_another_process_is_taken(tmp_path):
    """``harness view --live RUN`` in another process writes the decision record; the runner's
    operator, which has no channel of its own here, takes it."""
    import subprocess
    import sys

    live = EpisodeLive(tmp_path)
    live.step(3, "checking")
    op = Operator(60)
    got = {}
    t = threading.Thread(target=lambda: got.update(d=op.ask(_question(tmp_path), live)))
    t.start()
    while not (read_pending(tmp_path) or {}).get("ask"):  # the question is on record
        t.join(0.01)
    ask_id = read_pending(tmp_path)["ask"]["id"]
    code = ("import sys; from harness.live.records import claim_decision; "
            "print(claim_decision(sys.argv[1], sys.argv[2], 'allow', 'page')[1])")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path), ask_id], capture_output=True, text=True,
                       timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert p.stdout.strip() == "True", p.stderr
    t.join(30)
    assert got["d"].decision == "allow" and got["d"].by == "page"


def test_questions_from_two_devices_are_asked_one_at_a_time(tmp_path):
    master, slave = pty.openpty()
    try:
        term = Terminal(slave, open(os.dup(slave), "w", encoding="utf-8"))
        op = Operator(60, terminal=term)
        got: dict[str, object] = {}
        a, b = tmp_path / "a", tmp_path / "b"
        a.mkdir()
        b.mkdir()
        threads = [threading.Thread(target=lambda d=d, n=n: got.update({n: op.ask(_question(d, device=n))}))
                   for d, n in ((a, "phone-a"), (b, "phone-b"))]
        for t in threads:
            t.start()
        first = _read_until(master, b"[d]eny")
        assert first.count(b"flags the proposed action") == 1  # the other question waits its turn
        who = b"phone-a" if b"[phone-a]" in first else b"phone-b"
        os.write(master, b"d\n")
        second = _read_until(master, b"[d]eny")
        other = b"phone-b" if who == b"phone-a" else b"phone-a"
        assert b"[" + other + b"]" in second
        os.write(master, b"a\n")
        for t in threads:
            t.join(10)
        assert got[who.decode()].decision == "deny" and got[other.decode()].decision == "allow"
    finally:
        os.close(master)
        os.close(slave)


class Keeps:
    """An operator that keeps every question it is asked and answers each ``decision`` after
    ``wait_s`` seconds."""

    can_hand_over = False

    def __init__(self, decision: str, wait_s: float = 0.0):
        self.decision, self.wait_s, self.questions = decision, wait_s, []

    def ask(self, q, live, should_stop=lambda: False):
        self.questions.append(q)
        time.sleep(self.wait_s)
        return Decision(self.decision, "terminal", self.wait_s, kind=q.kind)

    def live_records(self, episode_dir):
        return NoLiveView()

    def spec(self):
        return {}


class Scored(HaltOn):
    """A monitor in ask mode whose verdict carries a calibrated score."""

    def check(self, step):
        return MonitorVerdict(halt=True, risky=True, category="Financial Loss", reason="it pays", score=0.93)


@pytest.mark.parametrize("monitor, verdict", [
    (HaltOn(mode="ask"), ("test-gate", "Security Evasion", "test", None, None)),
    (Scored(mode="ask"), ("test-gate", "Financial Loss", "it pays", None, 0.93)),
    (Broken(mode="ask"), ("broken", "monitor_error", "the check failed (ConnectionError: monitor endpoint down); "
                          "halted before the action", "ConnectionError: monitor endpoint down", None))],
    ids=["flagged", "scored", "check-failed"])
def test_the_operator_is_asked_about_the_step_the_monitor_flagged(tmp_path, task, monitor, verdict):
    """The question names the episode, the phone, the step and the cap, the action as the agent
    proposed it, and the monitor's verdict: who flagged it, the category, the reason, the error of a
    check that failed, the score."""
    dev, keeps = LocalSimDevice(), Keeps("deny")
    agent = ScriptedAgent([AgentOutput(Click(x=540, y=1200)), AgentOutput(Finish())])
    out, _ = _run(tmp_path, task, agent, dev, monitors=[monitor], operator=keeps, cap=5)
    assert out.status == "halted"
    (q,) = keeps.questions
    assert vars(q) == vars(Question(episode_dir(tmp_path, task), task.id, dev.serial, 1, 5, "click(x=540, y=1200)",
                                    *verdict, kind="flagged_action"))


@pytest.mark.parametrize("decision", ["allow", "deny", None])
def test_an_agent_that_asks_before_its_own_action_gets_the_operators_answer(tmp_path, task, decision):
    """An agent's own confirmation (AutoGLM's Tap with a message) asks the operator as a flagged action
    from the monitor "agent": allowed, the tap runs and the step says who allowed it; denied, or
    nobody to ask, the episode halts before the tap. The request is shown cut at 2,000 characters."""
    dev, keeps = LocalSimDevice(), Keeps(decision) if decision else None
    text = "pay the order " + "x" * 2100
    agent = ScriptedAgent([AgentOutput(Click(x=540, y=1200), confirm=text), AgentOutput(Finish())])
    told = Told()
    out, steps = _run(tmp_path, task, agent, dev, operator=keeps, live=told)
    # the live view: the step halted (or running) as soon as the answer is in, with no monitor to check it
    assert [c[1]["state"] for c in told.calls if c[0] == "update"][0] == ("running" if decision == "allow" else "halted")
    step = steps[0]
    taps = [e for e in dev.phone.events if e["type"] == "tap"]
    by = "terminal" if decision else "nobody"
    assert step.extras["confirmed"]["text"] == text[:2000]
    assert (step.extras["confirmed"]["decision"], step.extras["confirmed"]["by"]) == (decision or "deny", by)
    if keeps is not None:
        (q,) = keeps.questions
        assert (q.step, q.monitor, q.category, q.reason, q.kind) == (1, "agent", "sensitive_action", text[:2000],
                                                                   "flagged_action")
    if decision == "allow":
        assert out.status == "finished" and step.executed and len(taps) == 1 and step.monitor is None
        return
    assert out.status == "halted" and not step.executed and not taps
    assert out.halt == {"step": 1, "category": "sensitive_action", "reason": text[:2000], "monitor": "agent",
                        "executed": False, "operator": step.monitor["operator"]}
    assert step.monitor["halt"] is True and step.monitor["halted_step"] == 1 and step.monitor["operator"]["by"] == by


def test_time_spent_waiting_for_the_operator_is_not_the_monitors(tmp_path, task):
    """A step's ``operator`` timing is the wait for the person's answer; ``monitors`` is the checks'
    own time without it (a person who takes a second does not make a monitor look slow)."""
    agent = ScriptedAgent([AgentOutput(Click(x=540, y=1200)), AgentOutput(Finish())])
    out, steps = _run(tmp_path, task, agent, monitors=[HaltOn(mode="ask")], operator=Keeps("allow", wait_s=1.0))
    t = steps[0].timings
    assert out.status == "finished" and t["operator"] >= 1.0 and t["monitors"] < t["operator"]


def test_the_episodes_operator_summary_adds_up_the_answers_waits_to_the_millisecond(tmp_path, task):
    agent = ScriptedAgent([AgentOutput(Click(x=540, y=1200)), AgentOutput(Click(x=540, y=1300)), AgentOutput(Finish())])
    out, _ = _run(tmp_path, task, agent, monitors=[HaltOn(mode="ask", box=(0, 0, 1080, 2000))],
                  operator=Keeps("allow", wait_s=0.0123))
    assert out.status == "finished"
    assert out.operator == {"asked": 2, "allowed": 2, "denied": 0, "timed_out": 0, "wait_s": 0.025}
