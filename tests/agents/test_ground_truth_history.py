"""``set_history`` (static evaluation's ground-truth history) for every model agent: after it, the
next request holds the given actions written in the agent's own output format and coordinate
space, and none of the agent's own earlier answers. The ScriptedModelServer (a test double) answers
each step with a distinctive "own" action, at (111, 222), so a request that still shows it is
caught. Also: the rendering of every action type reads back through the agent's own parser, the
screenshot window's rules (ground_truth_turns), and ``harness static run`` with a model agent."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from PIL import Image

import agents  # noqa: F401  (registers the agents)
from agents import m3a, qwen, uitars, vlm
from agents.common import ground_truth_turns
from harness.core.actions import (Action, Answer, Click, DoubleTap, Finish, Key, LongPress, OpenApp, Swipe, TypeText, Wait,
                                  action_to_json)
from harness.core.episode import EpisodeContext, Observation
from harness.client.config import ModelConfig
from harness.core.registry import AGENTS
from harness.core.tasks import Task
from tests.fakes.model_server import Reply, ScriptedModelServer, request_images, request_text

SCREEN = (1080, 2400)
GT: list[Action] = [Click(x=540, y=1200), TypeText(text="hello world", submit=True)]

# the agent's own answer at every step: a tap at (111, 222) in its own space
OWN = {
    "uitars": "Thought: my own idea\nAction: click(start_box='(111,222)')",
    "uitars-v1": "Thought: my own idea\nAction: click(start_box='(111,222)')",
    "doubao": "Thought: my own idea\nAction: click(point='<point>111 222</point>')",
    "vlm": "Thought: my own idea\nAction: click(start_box='(111,222)')",
    "qwen": '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [111, 222]}}\n</tool_call>',
    "m3a": 'Reason: my own idea\nAction: {"action_type": "click", "x": 111, "y": 222}',
}
OWN_MARK = {"uitars": "(111,222)", "uitars-v1": "(111,222)", "doubao": "111 222", "vlm": "(111,222)", "qwen": "[111, 222]", "m3a": '"x": 111'}

# GT rendered for a 1080x2400 screen, as each model writes it
EXPECTED = {
    # smart_resize: 1080x2400 -> 1092x2408; the box tokens the 1.5 deploy example writes back into turns
    "uitars": ["Action: click(start_box='<|box_start|>(546,1204)<|box_end|>')", "Action: type(content='hello world\\n')"],
    "uitars-v1": ["Action: click(start_box='<|box_start|>(500,500)<|box_end|>')", "Action: type(content='hello world\\n')"],
    "doubao": ["Action: click(point='<point>500 500</point>')", "Action: type(content='hello world\\n')"],
    # max_side 1280: the screenshot is sent at 576x1280
    "vlm": ["Action: click(start_box='(288,640)')", "Action: type(content='hello world\\n')"],
    "qwen": ['Step 1: {"name": "mobile_use", "arguments": {"action": "click", "coordinate": [546, 1204]}};',
             'Step 2: {"name": "mobile_use", "arguments": {"action": "type", "text": "hello world\\n"}};'],
    "m3a": ['Step 1- Action selected: {"action_type": "click", "x": 540, "y": 1200}.',
            'Step 2- Action selected: {"action_type": "input_text", "text": "hello world"}.'],
}


def model(url: str) -> ModelConfig:
    return ModelConfig(base_url=url, model="test-model", max_retries=0, timeout_s=10)


def png(color: tuple[int, int, int], size: tuple[int, int] = SCREEN) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


SHOTS = [png((200, 30, 30)), png((30, 200, 30)), png((30, 30, 200))]


def obs(step: int) -> Observation:
    return Observation(step=step, screenshot=SHOTS[step - 1], screen_size=SCREEN, hierarchy=lambda: "",
                       instruction="Say hello.", language="en")


def ctx() -> EpisodeContext:
    task = Task(id="t", instruction="Say hello.", reference_steps=3)
    return EpisodeContext(task=task, screen_size=SCREEN, seed=0, device_serial="x")


def responder(name: str) -> Callable[[dict[str, Any]], Reply]:
    def answer(req: dict[str, Any]) -> Reply:
        if "Summarise the step" in request_text(req):  # M3A's second call
            return Reply("OWN SUMMARY of the tap")
        return Reply(OWN[name])
    return answer


def two_own_steps_then_ground_truth(name: str, opts: dict[str, Any] | None = None,
                                    history: list[Action] = GT) -> tuple[list[dict[str, Any]], int, Any]:
    """Steps 1 and 2 answered by the agent itself, then set_history, then step 3. Returns the
    requests, how many were made before step 3, and step 3's output."""
    with ScriptedModelServer(responder(name)) as srv:
        agent = AGENTS.build(name, {**(opts or {}), "model": model(srv.base_url)})
        agent.reset(ctx())
        for k in (1, 2):
            out = agent.step(obs(k))
            assert out.action == Click(x=out.action.x, y=out.action.y), out  # its own tap was understood
        before = len(srv.requests)
        agent.set_history(list(history))
        out = agent.step(obs(3))
        return list(srv.requests), before, out


@pytest.mark.parametrize("name", ["uitars", "uitars-v1", "doubao", "vlm", "qwen", "m3a"])
def test_next_request_shows_the_ground_truth_not_its_own_answers(name: str) -> None:
    requests, before, out = two_own_steps_then_ground_truth(name)
    assert len(requests) == before + 1  # one action call (M3A: no summary of a step it did not take)
    last = request_text(requests[-1])
    for line in EXPECTED[name]:
        assert line in last, (line, last)
    assert OWN_MARK[name] not in last and "my own idea" not in last and "OWN SUMMARY" not in last
    # before set_history the agent did show its own answer (the check above can fail)
    assert OWN_MARK[name] in request_text(requests[before - 1])
    assert out.action is not None


def test_uitars_turns_pair_the_ground_truth_with_the_screens_it_was_shown() -> None:
    requests, _, _ = two_own_steps_then_ground_truth("uitars")  # history=5: both earlier screens fit
    msgs = requests[-1]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "user", "assistant", "user", "assistant", "user"]
    assert [msgs[3]["content"], msgs[5]["content"]] == EXPECTED["uitars"]
    shown = [request_images(r)[-1] for r in requests[:2]]  # the current screen of steps 1 and 2
    assert request_images(requests[-1]) == [*shown, request_images(requests[-1])[-1]]
    assert request_images(requests[-1])[-1] not in shown


def test_vlm_window_and_older_text() -> None:
    requests, _, _ = two_own_steps_then_ground_truth("vlm", {"history": 2})  # one earlier screen
    msgs = requests[-1]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    first = msgs[1]["content"]
    assert first[0]["text"] == f"Earlier steps (screenshots not shown):\nStep 1: {EXPECTED['vlm'][0]}"
    assert first[1]["text"] == "Screenshot before step 2:"
    assert msgs[2]["content"] == EXPECTED["vlm"][1]
    assert len(request_images(requests[-1])) == 2


def test_qwen_thousand_grid_and_m3a_swipe() -> None:
    swipe = [Swipe(start=(540, 1800), end=(540, 600)), Key(key="back")]
    requests, _, _ = two_own_steps_then_ground_truth("qwen", {"version": "3", "grid": 1000}, swipe)
    # Qwen3-VL's history is plain words (its cookbook), points on its grid
    assert ("Step 1: Swiped from (500, 750) to (500, 250).; Step 2: Pressed the Back button.;"
            in request_text(requests[-1]))
    requests, _, _ = two_own_steps_then_ground_truth("qwen", {"version": "2.5"}, swipe)
    assert ('Step 1: {"name": "mobile_use", "arguments": {"action": "swipe", "coordinate": [546, 1806], '
            '"coordinate2": [546, 602]}}; Step 2: {"name": "mobile_use", "arguments": {"action": "system_button", '
            '"button": "Back"}};') in request_text(requests[-1])
    requests, _, _ = two_own_steps_then_ground_truth("m3a", {}, swipe)
    text = request_text(requests[-1])
    assert ('Step 1- Action selected: {"action_type": "scroll", "direction": "down"}.\n'
            'Step 2- Action selected: {"action_type": "navigate_back"}.') in text  # finger up: content down


def test_an_empty_history_forgets_its_own_answers() -> None:
    requests, _, _ = two_own_steps_then_ground_truth("uitars", history=[])
    assert [m["role"] for m in requests[-1]["messages"]] == ["system", "user", "user"]
    assert len(request_images(requests[-1])) == 1


def test_set_history_drops_the_queued_second_half_of_its_own_action() -> None:
    with ScriptedModelServer([Reply("Action: finished(content='my answer')"), Reply(OWN["uitars"])]) as srv:
        agent = AGENTS.build("uitars", {"model": model(srv.base_url)})
        agent.reset(ctx())
        assert agent.step(obs(1)).action == Answer(text="my answer")  # a Finish is queued for step 2
        agent.set_history([Click(x=540, y=1200)])
        out = agent.step(obs(2))
    assert len(srv.requests) == 2 and out.action is not None and out.raw_output == OWN["uitars"]
    assert "my answer" not in request_text(srv.requests[-1])


def test_a_step_whose_call_failed_joins_the_turn_before() -> None:
    replies = [Reply(OWN["uitars"]), Reply(status=500, error="boom"), Reply(OWN["uitars"])]
    with ScriptedModelServer(replies) as srv:
        agent = AGENTS.build("uitars", {"model": model(srv.base_url)})
        agent.reset(ctx())
        agent.step(obs(1))
        with pytest.raises(Exception, match="boom|500"):
            agent.step(obs(2))  # the agent never kept step 2's screen
        agent.set_history(list(GT))
        agent.step(obs(3))
    msgs = srv.requests[-1]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "user", "assistant", "user"]
    assert msgs[3]["content"] == "\n".join(EXPECTED["uitars"])  # both actions, in order, after screen 1
    assert request_images(srv.requests[-1])[0] == request_images(srv.requests[0])[-1]


@pytest.mark.parametrize("name", ["uitars", "vlm"])
def test_history_1_is_text_only_even_before_any_step(name: str) -> None:
    with ScriptedModelServer(responder(name)) as srv:
        agent = AGENTS.build(name, {"history": 1, "model": model(srv.base_url)})
        agent.reset(ctx())
        agent.set_history(list(GT))
        agent.step(obs(3))
    text = request_text(srv.requests[0])
    assert all(line in text for line in EXPECTED[name]) and len(request_images(srv.requests[0])) == 1


def test_screens_are_needed_when_the_window_shows_them() -> None:
    agent = AGENTS.build("uitars", {"model": model("http://127.0.0.1:9/v1")})
    with pytest.raises(RuntimeError, match="before reset"):
        agent.set_history(list(GT))
    agent.reset(ctx())
    with pytest.raises(ValueError, match="shown none of the 2 steps.*history=1"):
        agent.set_history(list(GT))
    agent.set_history([])  # nothing to show: fine


def test_ground_truth_turns() -> None:
    a, b = b"A", b"B"
    assert ground_truth_turns([(a, "1"), (b, "2")], 4) == [(a, "1"), (b, "2")]
    assert ground_truth_turns([(None, "1"), (b, "2")], 0) == [(b"", "1"), (b, "2")]  # no screens shown
    assert ground_truth_turns([(None, "1"), (b, "2")], 1) == [(b"", "1"), (b, "2")]  # 1 is outside the window
    assert ground_truth_turns([(a, "1"), (None, "2"), (b, "3"), (None, "4")], 2) == [(a, "1\n2"), (b, "3\n4")]
    assert ground_truth_turns([(None, "1"), (None, "2"), (b, "3")], 3) == [(b, "1\n2\n3")]
    assert ground_truth_turns([], 3) == []
    with pytest.raises(ValueError):
        ground_truth_turns([(None, "1")], 1)


# --- every action type reads back through the agent's own parser ---------------------------------------
ALL = [Click(x=540, y=1200), LongPress(x=100, y=2399), DoubleTap(x=300, y=700), Swipe(start=(540, 1800), end=(540, 600)),
       Swipe(start=(900, 1200), end=(100, 1200)), TypeText(text="it's \"x\"\nnext", submit=True),
       TypeText(text="no enter"), Key(key="home"), Key(key="back"), Key(key="enter"), OpenApp(app="设置"),
       Wait(seconds=2), Answer(text="42"), Finish(status="complete")]

PARSE = {
    "uitars": lambda ag, t: uitars.parse_detailed(t, SCREEN, "uitars"),
    "uitars-v1": lambda ag, t: uitars.parse_detailed(t, SCREEN, "uitars-v1"),
    "doubao": lambda ag, t: uitars.parse_detailed(t, SCREEN, "doubao"),
    "vlm": lambda ag, t: vlm.parse_detailed(t, SCREEN, "pixels", vlm.sent_size(SCREEN, ag.policy())),
    "qwen": lambda ag, t: qwen.parse_detailed(f"<tool_call>\n{t}\n</tool_call>", SCREEN),
    "m3a": lambda ag, t: m3a.parse_detailed(f"Action: {t}", SCREEN),
}


def _same(want: Action, got: Action, tol: int) -> bool:
    w, g = action_to_json(want), action_to_json(got)
    if w["type"] != g["type"]:
        return False
    if w["type"] == "swipe":  # a scroll keeps the direction and the start (M3A: the direction only)
        (sx, sy), (ex, ey) = w["start"], w["end"]
        (gx, gy), (hx, hy) = g["start"], g["end"]
        return (ex - sx > 0) == (hx - gx > 0) and (ey - sy > 0) == (hy - gy > 0)
    if w["type"] in ("click", "long_press", "double_tap"):
        return abs(w["x"] - g["x"]) <= tol and abs(w["y"] - g["y"]) <= tol
    if w["type"] == "wait":
        return True  # UI-TARS's wait() has no duration
    if w["type"] == "type" and "submit" in g:
        return w["text"] == g["text"]  # M3A's input_text always presses Enter
    return w == g


@pytest.mark.parametrize("name", ["uitars", "uitars-v1", "doubao", "vlm", "qwen", "m3a"])
def test_rendered_actions_read_back_as_the_same_action(name: str) -> None:
    agent = AGENTS.build(name, {"model": model("http://127.0.0.1:9/v1")})
    for a in ALL:
        text = agent.history_text(a, SCREEN)
        got = PARSE[name](agent, text.removeprefix("Action: ") if name.startswith("uitars") else text)
        assert _same(a, got.actions[0], tol=2), (name, a, text, got.actions)
        if name != "m3a" and isinstance(a, TypeText):
            assert got.actions[0] == a  # the submitting newline survives the quoting


# --- harness static run ---------------------------------------------------------------------------
def _dataset(tmp_path: Path) -> Path:
    steps = [{"action_content": {"action": "click", "coordinate": [540, 1200]}, "step_instruction": "tap"},
             {"action_content": {"action": "type", "text": "hello world"}, "step_instruction": "type"},
             {"action_content": {"action": "swipe", "coordinate": [540, 1800], "coordinate2": [540, 600]},
              "step_instruction": "scroll"}]
    for j, s in enumerate(steps):
        (tmp_path / f"s{j}.png").write_bytes(SHOTS[j])
        s["screenshot"] = f"s{j}.png"
        s["check_options"] = dict(s["action_content"])
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"goal": "Say hello.", "steps": steps, "episode_id": 7}) + "\n", encoding="utf-8")
    return data


def test_static_run_gives_a_model_agent_the_ground_truth_history(tmp_path: Path, capsys: Any) -> None:
    from harness.cli.main import main
    from harness.run.static_run import run_static

    data = _dataset(tmp_path)
    with ScriptedModelServer(responder("uitars")) as srv:
        agent = AGENTS.build("uitars", {"model": model(srv.base_url)})
        res = run_static(data, agent, tmp_path / "preds.jsonl")
        assert (res.history_mode, res.steps, res.agent_errors, res.invalid) == ("ground truth", 3, 0, 0)
        last = srv.requests[-1]["messages"]
        assistant = [m["content"] for m in last if m["role"] == "assistant"]
        assert assistant == ["Action: click(start_box='<|box_start|>(546,1204)<|box_end|>')",
                             "Action: type(content='hello world')"]
        assert "(111,222)" not in request_text(srv.requests[-1])
        assert len(request_images(srv.requests[-1])) == 3  # the screens of steps 1 and 2, then step 3's

        n = len(srv.requests)
        code = main(["static", "run", "--dataset", str(data), "--agent", "uitars", "--model-base-url", srv.base_url,
                     "--model", "test-model", "--model-retries", "0", "--out", str(tmp_path / "cli.jsonl"),
                     "--profile", "androidcontrol", "--json"])
        assert code == 0
        assert "(history: ground truth;" in capsys.readouterr().err
        assert [m["content"] for m in srv.requests[-1]["messages"] if m["role"] == "assistant"] == assistant
        assert len(srv.requests) == n + 3
