"""The runner's side of a hand-over, with an operator that plays the person in process (no touch
reading): a person's steps never count against the agent's 2c+1 cap, and a touch of theirs that
could not be placed is a step of theirs that says so (issue 40); what the runner asks, records,
shows and gives the judges of a hand-over, and why one that was not handed back ended."""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.actions import Click, Finish, Key, NeedsUser, OpenApp
from harness.core.episode import AgentOutput, Decision, NoLiveView, OperatorStep, Question
from judges.oracle import OracleConfig, OracleJudge
from tests.fakes.local_device import LocalSimDevice
from tests.run.test_runner import FlagsAll, Prepares, ScriptedAgent, Seen, Told, _run, episode_dir, task  # noqa: F401  (task: the fixture)


class Hands:
    """An operator the phone is handed to: it does ``touches`` on the device (None: a touch that
    could not be placed), gives each to the runner as the touch reader would, and hands back."""

    can_hand_over = True

    def __init__(self, touches: list[Any]):
        self.touches = touches

    def hand_over(self, question, device, live, on_step, should_stop=lambda: False):
        for action in self.touches:
            before = device.screenshot()
            if action is None:
                on_step(OperatorStep(None, before, device.screenshot(), unread="the touch could not be placed"))
                continue
            device.execute(action)
            on_step(OperatorStep(action, before, device.screenshot()))
        return Decision("hand_back", "terminal", 0.01, kind="needs_user")

    def ask(self, question, live, should_stop=lambda: False):
        raise AssertionError("nothing is asked here")

    def live_records(self, episode_dir):
        return NoLiveView()

    def spec(self):
        return {}


def _episode(tmp_path, task, outputs, touches, **kw):
    return _run(tmp_path, task, ScriptedAgent(outputs), operator=Hands(touches),
                observers=[OracleJudge(OracleConfig())], **kw)


def test_a_persons_steps_never_count_against_the_cap(tmp_path, task):
    """The agent hands over at its first step, the person makes three touches, and the agent still
    gets every one of its 2c+1 steps (a tap on a dead spot each, until the cap)."""
    cap = task.cap
    out, steps = _episode(tmp_path, task, [AgentOutput(NeedsUser(text="unlock it for me")),
                                           AgentOutput(Click(x=540, y=1300))],
                          [Key(key="home"), Click(x=540, y=1300), Click(x=540, y=1350)])
    by = [s.by or "agent" for s in steps]
    assert out.status == "step_limit" and out.steps == cap and out.operator_steps == 3
    assert by == ["agent"] + ["operator"] * 3 + ["agent"] * (cap - 1), by
    assert out.proposed_steps == cap + 3 and out.cap == cap


def test_a_touch_that_could_not_be_placed_is_the_persons_step_saying_so(tmp_path, task):
    out, steps = _episode(tmp_path, task, [AgentOutput(NeedsUser(text="unlock it for me")),
                                           AgentOutput(Click(x=540, y=1300))], [None, Key(key="home")], cap=2)
    unplaced = steps[1]
    assert unplaced.by == "operator" and unplaced.action is None and unplaced.executed is True
    assert unplaced.invalid == "the person's actions could not be read: the touch could not be placed"
    assert steps[2].by == "operator" and steps[2].action == {"type": "key", "key": "home"}
    assert out.judge_details["oracle"]["operator_unread"] == [2] and out.judge_details["oracle"]["assisted"] is True


class Scripted(Hands):
    """An operator whose person's steps are made by ``makers`` (each given the device, returning the
    OperatorStep the touch reader would give), answering with ``decision``; it keeps the question,
    the live view and the stop it was given."""

    def __init__(self, makers, decision: Decision):
        super().__init__([])
        self.makers, self.decision = makers, decision

    def hand_over(self, question, device, live, on_step, should_stop=lambda: False):
        self.question, self.should_stop, self.live = question, should_stop, live
        for make in self.makers:
            on_step(make(device))
        return self.decision


AT = "2026-12-07T10:00:00.000+00:00"


def home(device) -> OperatorStep:
    before = device.screenshot()
    device.execute(Key(key="home"))
    return OperatorStep(Key(key="home"), before, device.screenshot(), {"gesture": {"kind": "hardware_key"}}, at=AT)


def settings(device) -> OperatorStep:  # the screen changes; the reader did not take the screen before it
    device.execute(OpenApp(app="Settings"))
    return OperatorStep(OpenApp(app="Settings"), b"", device.screenshot(), at=AT)


def unplaced(device) -> OperatorStep:  # a touch seen and not placed, its after-screen not taken
    return OperatorStep(None, b"not-a-screen", None, at=AT, unread="the touch could not be placed")


def test_a_hand_over_is_recorded_shown_and_given_to_the_judges_as_the_persons(tmp_path, task):
    """What the runner does with a hand-over, field by field (scripts/mutmut --only runner left each of
    these alive): the question the operator gets, the live view told the step is handed over, each
    person's step recorded with the screen it started from, its time and the hand-over it belongs to,
    a step saying the rest could not be read, what the judges receive, and the result line's entry."""
    decision = Decision("hand_back", "page", 1.5, ask_id="a1", asked_at=AT, answered_at=AT, kind="needs_user",
                        unread="the touchscreen stopped answering")
    hands, live, seen, stop = Scripted([home, settings, unplaced], decision), Told(), Seen(), (lambda: False)
    device, ep = LocalSimDevice(), episode_dir(tmp_path, task)
    out, steps = _run(tmp_path, task, ScriptedAgent([AgentOutput(NeedsUser(text="unlock it")), AgentOutput(Finish())]),
                      device, operator=hands, observers=[seen], live=live, should_stop=stop)
    assert out.status == "finished" and [s.by or "agent" for s in steps] == ["agent"] + ["operator"] * 4 + ["agent"]
    # the request as its step records it (an outcome there would say nobody could take the phone)
    assert steps[0].handover == {"text": "unlock it", "asked_at": steps[0].handover["asked_at"]}
    assert vars(hands.question) == vars(Question(ep, task.id, device.serial, 1, task.cap,
                                                 "needs_user(text='unlock it')", "agent", None, "unlock it",
                                                 kind="needs_user"))
    assert hands.should_stop is stop and hands.live is live  # the person's page shows the episode's live view
    assert ("step", 1, "handed_over", {"screen_before": steps[0].screen_before,
                                       "action": {"type": "needs_user", "text": "unlock it"},
                                       "action_text": "needs_user(text='unlock it')"}) in live.calls
    first, opened, lost, rest, back = steps[1:]
    assert (first.action, first.invalid, first.raw_output, first.executed) == ({"type": "key", "key": "home"}, None, None, True)
    assert first.screen_before == steps[0].screen_before and first.screen_after
    assert first.extras == {"gesture": {"kind": "hardware_key"}, "at": AT, "handover_step": 1}
    assert opened.screen_before == first.screen_after and opened.screen_after != first.screen_after
    assert (lost.action, lost.invalid) == (None, "the person's actions could not be read: the touch could not be placed")
    assert lost.screen_before == opened.screen_after and lost.screen_after is None
    assert lost.extras == {"at": AT, "handover_step": 1}
    assert (rest.action, rest.invalid) == (None, "the person's actions could not be read: the touchscreen stopped answering")
    assert rest.screen_before == opened.screen_after and rest.screen_after  # the last screen that was taken
    assert rest.extras["unread"] == "the touchscreen stopped answering" and rest.extras["handover_step"] == 1
    assert back.screen_before == rest.screen_after  # the agent goes on from the screen handed back
    ev = {e.index: e for e in seen.events}
    for rec in (first, opened, lost, rest):
        e = ev[rec.index]
        assert (e.by, e.invalid, e.action is None) == ("operator", rec.invalid, rec.action is None)
        assert (e.screen_before_path, e.screen_after_path) == (rec.screen_before, rec.screen_after)
        assert (e.screenshot_after is None) == (rec.screen_after is None)
    assert ev[first.index].screenshot_after == (ep / first.screen_after).read_bytes()
    assert ev[lost.index].screenshot_before == b"not-a-screen"
    # a step whose screen before was not taken starts from what the phone last showed
    assert ev[opened.index].screenshot_before == ev[first.index].screenshot_after != ev[opened.index].screenshot_after
    assert ev[rest.index].screenshot_before == ev[opened.index].screenshot_after  # what the phone last showed
    assert out.handovers == [{"step": 1, "outcome": "handed_back", "text": "unlock it", **decision.to_json(),
                              "operator_steps": [2, 3, 4, 5]}]
    assert out.operator_steps == 4 and out.steps == 2


@pytest.mark.parametrize("decision, outcome", [(Decision("give_up", "page", 2.0, kind="needs_user"), "gave_up"),
                                               (Decision("give_up", "timeout", 60.0, kind="needs_user"), "timeout")])
def test_a_hand_over_not_handed_back_says_why(tmp_path, task, decision, outcome):
    agent = ScriptedAgent([AgentOutput(NeedsUser(text="unlock it")), AgentOutput(Finish())])
    out, _ = _run(tmp_path, task, agent, operator=Scripted([home], decision))
    assert out.status == "needs_user" and agent.i == 1
    assert [(h["outcome"], h["by"], h["operator_steps"]) for h in out.handovers] == [(outcome, decision.by, [2])]


def test_an_operator_that_cannot_take_the_phone_is_nobody_to_hand_it_to(tmp_path, task):
    class Watching(Scripted):  # answers questions, never takes the phone (as a run without the page)
        can_hand_over = False

    hands = Watching([home], Decision("hand_back", "page", 1.0, kind="needs_user"))
    out, (step,) = _run(tmp_path, task, ScriptedAgent([AgentOutput(NeedsUser(text="unlock it"))]), operator=hands)
    asked = step.handover["asked_at"]
    assert out.status == "needs_user" and not hasattr(hands, "question") and out.proposed_steps == 1
    assert step.handover == {"text": "unlock it", "asked_at": asked, "outcome": "nobody"}
    assert out.handovers == [{"step": 1, "outcome": "nobody", "text": "unlock it", "asked_at": asked, "wait_s": 0.0,
                              "operator_steps": []}]


def test_a_hand_over_whose_touches_could_none_be_read_starts_from_the_screen_handed_over(tmp_path, task):
    decision = Decision("hand_back", "page", 1.0, kind="needs_user", unread="no touchscreen in getevent's list")
    seen = Seen()
    _, (asked, unread, _) = _run(tmp_path, task, ScriptedAgent([AgentOutput(NeedsUser(text="unlock it")),
                                                                AgentOutput(Finish())]),
                                 operator=Scripted([], decision), observers=[seen])
    assert unread.by == "operator" and unread.screen_before == asked.screen_before
    assert unread.invalid == "the person's actions could not be read: no touchscreen in getevent's list"
    ev = next(e for e in seen.events if e.index == unread.index)
    assert ev.screenshot_before == (episode_dir(tmp_path, task) / asked.screen_before).read_bytes()


def test_a_flag_on_the_hand_over_request_is_heard_before_the_phone_is_handed_over(tmp_path, task):
    """An async check of the needs_user step is waited for before the hand-over: a flag halts the
    episode there, and the person is never given the phone."""
    dev = LocalSimDevice()
    out, steps = _run(tmp_path, task, ScriptedAgent([AgentOutput(NeedsUser(text="unlock it for me"))]), dev,
                      operator=Hands([Key(key="home")]), monitors=[FlagsAll(mode="async")])
    assert out.status == "halted" and out.halt == {"step": 1, "category": "unspecified", "reason": "flagged",
                                                   "monitor": "flags-all", "executed": True}
    assert out.handovers == [] and out.operator_steps == 0 and [s.by or "agent" for s in steps] == ["agent"]
    assert not any(e["type"] == "key" for e in dev.phone.events)


def test_the_agent_is_given_the_screen_handed_back_to_prepare_its_next_step(tmp_path, task):
    """After the person's two steps (2 and 3), the agent prepares step 4 on the screen handed back,
    the very screen it is then shown."""
    agent = Prepares([AgentOutput(NeedsUser(text="unlock it for me")), AgentOutput(Finish())])
    out, steps = _run(tmp_path, task, agent, operator=Hands([Key(key="home"), OpenApp(app="Settings")]))
    assert out.status == "finished" and [s.index for s in steps] == [1, 2, 3, 4]
    assert [k for k, _ in agent.prepared] == [1, 4] and [o.step for o in agent.observed] == [1, 4]
    assert agent.prepared[1][1] == agent.observed[1].screenshot
    assert agent.observed[1].screenshot == (episode_dir(tmp_path, task) / steps[2].screen_after).read_bytes()
