"""A hand-over whose touches cannot be read (issue 40): on a phone whose ``getevent`` lists no
touchscreen, a person who unlocks the app through ``input`` (as scrcpy or a hardware keyboard
would) is still the one who did it. The trajectory holds a step ``by: operator`` saying that the
person's actions could not be read, the milestone they reached is theirs, and the oracle says
``assisted`` and credits the agent with nothing the person did."""

from __future__ import annotations

import threading

import pytest

import agents  # noqa: F401  (registers the agents)
from agents.uitars import resized_size
from harness import hierarchy
from harness.live.handover import waiting_handover
from harness.live.operator import Operator
from harness.live.records import EpisodeLive, claim_decision
from harness.records import RunWriter, iter_steps
from harness.runner import run_episode
from harness.sim.phone_api import DeviceInfo
from judges.oracle import OracleConfig, OracleJudge
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.live.test_handover import CALL_USER, _agent, pin_task  # noqa: F401  (fixture)


def _centre(device, rid: str) -> tuple[int, int]:
    (el,) = [e for e in hierarchy.parse(device.hierarchy()) if e.short_rid == rid]
    return el.center


def _person_through_input(run_dir, device, box: dict) -> threading.Thread:
    """A person who unlocks the app with ``input`` commands (no touchscreen events at all), then
    hands the phone back from the terminal."""
    def run():
        try:
            ep, ask = waiting_handover(run_dir, device.serial, 60)
            box["asked"] = ask
            x, y = _centre(device, "pin")
            device.shell(["input", "tap", str(x), str(y)])
            device.shell(["input", "text", "2580"])
            x, y = _centre(device, "unlock")
            device.shell(["input", "tap", str(x), str(y)])
            box["answer"], _ = claim_decision(ep, ask["id"], "hand_back", "terminal")
        except BaseException as e:  # handed to the test
            box["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.slow
def test_a_hand_over_whose_touches_cannot_be_read_credits_the_agent_nothing(tmp_path, serve_sim, pin_task):
    phone = serve_sim(1080, 2400, info=DeviceInfo(touchscreen=False))
    device = phone.device()
    state = {"n": 0}

    def responder(req):
        state["n"] += 1
        if state["n"] == 1:
            return Reply(CALL_USER)
        if state["n"] == 2:
            rw, rh = resized_size((1080, 2400), max_pixels=1_000_000)
            x, y = _centre(device, "action_card")
            return Reply(f"Thought: Unlocked. The Card tile.\nAction: click(start_box='({round(x * rw / 1080)},"
                         f"{round(y * rh / 2400)})')")
        return Reply("Thought: The card page is open.\nAction: finished(content='')")

    run_dir = tmp_path / "run"
    w = RunWriter(run_dir)
    ep = w.start_episode(pin_task.id)
    box: dict = {}
    person = _person_through_input(run_dir, phone.device(), box)
    with ScriptedModelServer(responder) as srv:
        out = run_episode(pin_task, _agent(srv.base_url), device, ep, observers=[OracleJudge(OracleConfig())],
                          operator=Operator(30, page=True, handover_timeout_s=60), live=EpisodeLive(ep.path))
    person.join(30)
    w.close()
    assert "error" not in box, box.get("error")
    steps = list(iter_steps(ep.path))
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
