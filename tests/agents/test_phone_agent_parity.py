"""The parity rows of docs/agents.md for ``autoglm``, ``gui-owl`` and ``mai-ui``, against their sources: every
"followed exactly" is compared here with a quotation of the source or with what the source's own code
gives (tests/agents/fixtures/phone_agents/expected.json, made by its make_expected.py from pinned commits
of zai-org/Open-AutoGLM, X-PLUG/MobileAgent and Tongyi-MAI/MAI-UI)."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from agents import autoglm, gui_owl, mai_ui, qwen
from agents.parsing import ParseError
from agents.prompts import load_prompt
from harness.core.actions import CoordSpace, to_device
from harness.client.config import ModelConfig

E: dict[str, Any] = json.loads((Path(__file__).parent / "fixtures" / "phone_agents" / "expected.json").read_text("utf-8"))
MODEL = ModelConfig(base_url="http://127.0.0.1:9/v1", model="m")
_CALL = re.compile(r'(do\(action="[^"]+"(?:, \w+=(?:"[^"]*"|\[[^\]]*\]))*\)|finish\(message="[^"]*"\))')


def _signatures(text: str) -> list[str]:
    """The action signatures a prompt offers, in order, each once (names and argument names)."""
    out = []
    for call in _CALL.findall(text):
        sig = re.sub(r'=(?:"[^"]*"|\[[^\]]*\])', "=", call).replace('action=', 'action="' + call.split('"')[1] + '"', 1) \
            if call.startswith("do(") else "finish(message=)"
        if sig not in out:
            out.append(sig)
    return out


# --- autoglm: zai-org/Open-AutoGLM @6b18d7b ---------------------------------------------------------
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_autoglm_prompts_offer_the_sources_actions_with_their_arguments_in_its_order(lang: str) -> None:
    """The action list, argument names and order of config/prompts_<lang>.py (the wording is ours)."""
    theirs = _signatures(E["autoglm"][f"prompt_{lang}"]["text"])
    ours = _signatures(load_prompt(f"autoglm_{lang}").text)
    assert ours == theirs and len(theirs) >= (16 if lang == "zh" else 7)
    for tag in ("<think>", "</think>", "<answer>", "</answer>"):
        assert tag in E["autoglm"][f"prompt_{lang}"]["text"] and tag in load_prompt(f"autoglm_{lang}").text


def test_autoglm_prompt_states_the_sources_grid_and_reader_knows_every_handler() -> None:
    zh = E["autoglm"]["prompt_zh"]["text"]
    assert zh.count("999,999)") == load_prompt("autoglm_zh").text.count("999,999)") == 4  # (its opening bracket is full-width)
    assert set(E["autoglm"]["handlers"]) | {"finish"} == set(autoglm.ACTIONS_ZH)
    en_actions = {s.split('"')[1] for s in _signatures(E["autoglm"]["prompt_en"]["text"]) if '"' in s} | {"finish"}
    assert en_actions == set(autoglm.ACTIONS_EN)


def test_autoglm_date_line_is_the_sources_format() -> None:
    day = date(2025, 12, 11)
    assert autoglm.date_line("zh", day) == day.strftime(E["autoglm"]["date_formats"]["zh"]) + " 星期四"
    assert autoglm.date_line("en", day) == day.strftime(E["autoglm"]["date_formats"]["en"])


@pytest.mark.parametrize("reply", sorted(E["autoglm"]["split"]))
def test_autoglm_splits_a_reply_and_writes_it_back_as_the_client_does(reply: str) -> None:
    """model/client.py ``_parse_response`` run on each reply; agent.py's assistant turn f-string."""
    thinking, action = E["autoglm"]["split"][reply]
    assert autoglm.split_response(reply) == (thinking, action)
    assert E["autoglm"]["assistant_turn"] == "<think>{response.thinking}</think><answer>{response.action}</answer>"
    assert autoglm.history_turn(thinking, action) == f"<think>{thinking}</think><answer>{action}</answer>"


def test_autoglm_user_turns_and_screen_info_are_the_agents() -> None:
    assert autoglm.screen_info("System Home") == E["autoglm"]["screen_info"]
    assert E["autoglm"]["first_user_text"] == "{user_prompt}\\n\\n{screen_info}"
    assert E["autoglm"]["later_user_text"] == "** Screen Info **\\n\\n{screen_info}"
    info = autoglm.screen_info("com.android.settings")
    assert autoglm.AutoGLMAgent._user_text(0, "打开设置", info) == f"打开设置\n\n{info}"
    assert autoglm.AutoGLMAgent._user_text(3, "打开设置", info) == f"** Screen Info **\n\n{info}"


@pytest.mark.parametrize("key", sorted(E["autoglm"]["to_pixels"]))
def test_autoglm_points_land_where_the_handler_maps_them(key: str) -> None:
    """``int(x / 1000 * width)``; ours is the nearest pixel (the table says so): at most one apart,
    and 1000 is the last pixel."""
    point, size = key.split("@")
    x, y = map(int, point.split(","))
    w, h = map(int, size.split("x"))
    act = autoglm.parse_output(f'do(action="Tap", element=[{x},{y}])', (w, h))
    tx, ty = E["autoglm"]["to_pixels"][key]
    assert abs(act.x - min(tx, w - 1)) <= 1 and abs(act.y - min(ty, h - 1)) <= 1
    assert (act.x, act.y) == to_device(x, y, CoordSpace.THOUSAND, (w, h))


def test_autoglm_long_press_and_readme_output() -> None:
    assert autoglm.LONG_PRESS_MS == E["autoglm"]["long_press_ms"]
    parsed = autoglm.parse_detailed(E["autoglm"]["readme_expected_output"], (1080, 2400))
    assert parsed.action.to_json() == {"type": "open_app", "app": "京东"}
    assert parsed.thought and parsed.thought.startswith("用户想要比较")


# --- gui-owl: X-PLUG/MobileAgent @11cea57 -----------------------------------------------------------
_TOOLS = re.compile(r"<tools>\n(.*)\n</tools>", re.S)


def _tool(agent: Any) -> dict[str, Any]:
    return json.loads(_TOOLS.search(agent.system_text(1092, 2408)).group(1))["function"]["parameters"]


@pytest.mark.parametrize("actions,key", [("cookbook", "cookbook_tool"), ("androidworld", "androidworld_tool")])
def test_gui_owl_tool_has_the_sources_actions_arguments_enums_and_required(actions: str, key: str) -> None:
    theirs = E["gui_owl"][key]
    ours = _tool(gui_owl.GuiOwlAgent(gui_owl.GuiOwlConfig(actions=actions, model=MODEL)))
    assert ours["properties"]["action"]["enum"] == theirs["properties"]["action"]["enum"] == list(gui_owl.ACTIONS[actions])
    assert list(ours["properties"]) == list(theirs["properties"]) and ours["required"] == theirs["required"]
    for name in ("button", "status"):
        assert ours["properties"][name]["enum"] == theirs["properties"][name]["enum"]


def test_gui_owl_images_are_the_cookbooks_smart_resize() -> None:
    assert (gui_owl.MIN_PIXELS, gui_owl.MAX_PIXELS) == (E["gui_owl"]["pixels"]["MIN_PIXELS"], E["gui_owl"]["pixels"]["MAX_PIXELS"])
    assert gui_owl.resized_size((1080, 2400)) == (1092, 2408)


def test_gui_owl_user_turn_has_the_sources_layout() -> None:
    """generate_user_prompt_single_image run on (INSTRUCTION, "Step 1: A; "): the same lines, in the
    same order: the query, the progress ended by a full stop, then the thinking and conclusion
    instructions with their tags (the wording is ours)."""
    theirs = E["gui_owl"]["user_prompt"]
    ours = load_prompt("gui_owl_user").render(instruction="INSTRUCTION", progress="Step 1: A; ").rstrip("\n")
    t_lines, o_lines = theirs.split("\n"), ours.split("\n")
    assert len(t_lines) == len(o_lines) and t_lines[0] == o_lines[0] == "The user query: INSTRUCTION"
    assert t_lines[1].endswith("Step 1: A; .") and o_lines[1].endswith("Step 1: A; .") and t_lines[2] == o_lines[2] == ""
    for tag, line in (("<thinking></thinking>", 3), ("<conclusion></conclusion>", 4)):
        assert tag in t_lines[line] and tag in o_lines[line] and "<tool_call></tool_call>" in o_lines[line]


@pytest.mark.parametrize("case", range(len(E["gui_owl"]["histories"])))
def test_gui_owl_progress_is_the_agents_history_loop(case: int) -> None:
    h = E["gui_owl"]["histories"][case]
    assert qwen.progress_text([qwen.history_item(s) for s in h["summaries"]]) == h["stage2_history"]


def test_gui_owl_reads_tap_as_click_and_answers_then_finishes() -> None:
    assert E["gui_owl"]["tap_to_click"]
    text = ('<thinking>\nx\n</thinking>\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": "tap", '
            '"coordinate": [546, 1204]}}\n</tool_call>\n<conclusion>\nTapped it.\n</conclusion>')
    p = gui_owl.parse_detailed(text, (1080, 2400))
    assert p.action.to_json() == {"type": "click", "x": 540, "y": 1200} and p.raw["conclusion"] == "Tapped it."
    answer = gui_owl.parse_detailed(text.replace('"tap", "coordinate": [546, 1204]', '"answer", "text": "42"'),
                                    (1080, 2400), actions="androidworld")
    assert [a.to_json() for a in answer.actions] == [{"type": "answer", "text": "42"}, {"type": "finish", "status": "complete"}]


# --- mai-ui: Tongyi-MAI/MAI-UI @4dd07b9 -------------------------------------------------------------
def _space(text: str) -> list[str]:
    """The action space's lines (placeholders such as [x, y] and all), without their ``#`` comments."""
    space = text[text.index("## Action Space"):text.index("## Note")]
    return [line.split(" #")[0].strip() for line in space.splitlines() if line.startswith("{\"action\"")]


@pytest.mark.parametrize("ask_user,key", [(False, "system_prompt"), (True, "ask_user_prompt")])
def test_mai_ui_action_space_is_the_sources_line_for_line(ask_user: bool, key: str) -> None:
    """Every JSON object of the source's action space, with its keys and example values, in its
    order (the comments after ``#`` are ours); the output format's tags."""
    theirs = _space(E["mai_ui"][key])
    ours = _space(mai_ui.MaiUiAgent(mai_ui.MaiUiConfig(ask_user=ask_user, model=MODEL)).system_text())
    assert ours == theirs
    for tag in ("<thinking>", "</thinking>", "<tool_call>", "</tool_call>", '{"name": "mobile_use", "arguments": <args-json-object>}'):
        assert tag in E["mai_ui"]["system_prompt"] and tag in mai_ui.MaiUiAgent(mai_ui.MaiUiConfig(model=MODEL)).system_text()


@pytest.mark.parametrize("output", sorted(E["mai_ui"]["parsed"]))
def test_mai_ui_points_and_history_turns_are_the_sources(output: str) -> None:
    """parse_action_to_structure_output's 0-1 fractions (``/ 999``, a box's centre) to the nearest
    pixel; mem2response's turn, byte for byte."""
    theirs = E["mai_ui"]["parsed"][output]
    parsed = mai_ui.parse_detailed(output, (1080, 2400))
    if "coordinate" in theirs:
        fx, fy = theirs["coordinate"]
        a = parsed.action
        assert (a.x, a.y) == (min(round(fx * 1080), 1079), min(round(fy * 2400), 2399))
    assert mai_ui.history_turn(parsed.thought, parsed.raw["arguments"]) == E["mai_ui"]["history_turns"][output]
    assert mai_ui.SCALE_FACTOR == E["mai_ui"]["scale_factor"] and mai_ui.MaiUiConfig().history == E["mai_ui"]["history_n"]


def test_mai_ui_reads_its_own_actions() -> None:
    def call(args: dict[str, Any]) -> str:
        return f'<thinking>\nt\n</thinking>\n<tool_call>\n{json.dumps({"name": "mobile_use", "arguments": args})}\n</tool_call>'

    size = (1080, 2400)
    assert mai_ui.parse_output(call({"action": "ask_user", "text": "Which card?"}), size).to_json() == \
        {"type": "needs_user", "text": "Which card?"}
    assert mai_ui.parse_output(call({"action": "drag", "start_coordinate": [500, 800], "end_coordinate": [500, 200]}),
                               size).to_json()["type"] == "swipe"
    assert mai_ui.parse_output(call({"action": "terminate", "status": "fail"}), size).to_json() == \
        {"type": "finish", "status": "infeasible"}
    mcp = '<thinking>\nt\n</thinking>\n<tool_call>\n{"name": "get_weather", "arguments": {"location": "Hangzhou"}}\n</tool_call>'
    note = mai_ui.parse_detailed(mcp, size)
    assert note.action.to_json()["type"] == "note" and "get_weather" in note.action.text
    with pytest.raises(ParseError):
        mai_ui.parse_output(call({"action": "swipe", "direction": "sideways"}), size)
