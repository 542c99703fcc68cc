"""A hand-over whose touches cannot be read (issue 40): on a phone whose ``getevent`` lists no
touchscreen, a person who unlocks the app through ``input`` (as scrcpy or a hardware keyboard
would) is still the one who did it. The trajectory holds a step ``by: operator`` saying that the
person's actions could not be read, the milestone they reached is theirs, and the oracle says
``assisted`` and credits the agent with nothing the person did."""

from __future__ import annotations

import threading

import pytest

from harness.core import hierarchy
from harness.live.handover import waiting_handover
from harness.live.records import claim_decision
from harness.sim.phone_api import DeviceInfo
from tests.live.test_handover import handed_over, person_thread, pin_task  # noqa: F401  (fixture)


def _centre(device, rid: str) -> tuple[int, int]:
    (el,) = [e for e in hierarchy.parse(device.hierarchy()) if e.short_rid == rid]
    return el.center


def _person_through_input(run_dir, device, box: dict) -> threading.Thread:
    """A person who unlocks the app with ``input`` commands (no touchscreen events at all), then
    hands the phone back from the terminal."""
    def act():
        ep, ask = waiting_handover(run_dir, device.serial, 60)
        box["asked"] = ask
        x, y = _centre(device, "pin")
        device.shell(["input", "tap", str(x), str(y)])
        device.shell(["input", "text", "2580"])
        x, y = _centre(device, "unlock")
        device.shell(["input", "tap", str(x), str(y)])
        box["answer"], _ = claim_decision(ep, ask["id"], "hand_back", "terminal")
    return person_thread(box, act)


@pytest.mark.slow
def test_a_hand_over_whose_touches_cannot_be_read_credits_the_agent_nothing(tmp_path, serve_sim, pin_task):
    phone = serve_sim(1080, 2400, info=DeviceInfo(touchscreen=False))
    out, steps, _ = handed_over(tmp_path, phone, pin_task, _person_through_input)
    by = [s.by or "agent" for s in steps]
    # the person's part is one step of theirs that says it could not be read
    assert by == ["agent", "operator", "agent", "agent"], by
    unread = steps[1]
    assert unread.action is None and unread.executed is True and "could not be read" in unread.invalid
    assert "touchscreen" in unread.invalid and unread.screen_after and unread.extras["handover_step"] == 1
    (h,) = out.handovers
    assert h["outcome"] == "handed_back" and h["operator_steps"] == [2] and "touchscreen" in h["unread"]
    # the agent goes on from the screen the person left (unlocked), and is credited with none of it
    assert out.status == "finished" and out.steps == 3 and out.operator_steps == 1
    oracle = out.judge_details["oracle"]
    ms = oracle["milestones"]
    assert ms["reached"][0]["step"] == 2 and ms["reached"][0]["by"] == "operator", ms
    assert ms["done"] == 0 and ms["done_by_operator"] == 1 and ms["progress"] == 0.0
    assert oracle["assisted"] is True and oracle["operator_unread"] == [2]
