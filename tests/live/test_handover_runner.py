"""The runner's side of a hand-over, with an operator that plays the person in process (no touch
reading): a person's steps never count against the agent's 2c+1 cap, and a touch of theirs that
could not be placed is a step of theirs that says so (issue 40)."""

from __future__ import annotations

from typing import Any

from harness.core.actions import Click, Key, NeedsUser
from harness.core.episode import AgentOutput, Decision, NoLiveView, OperatorStep
from harness.records import RunWriter, iter_steps
from harness.run.runner import run_episode
from judges.oracle import OracleConfig, OracleJudge
from tests.fakes.local_device import LocalSimDevice
from tests.run.test_runner import ScriptedAgent, task  # noqa: F401  (fixture)


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
    w = RunWriter(tmp_path / "run")
    ep = w.start_episode(task.id)
    out = run_episode(task, ScriptedAgent(outputs), LocalSimDevice(), ep, operator=Hands(touches),
                      observers=[OracleJudge(OracleConfig())], **kw)
    w.close()
    return out, list(iter_steps(ep.path))


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
