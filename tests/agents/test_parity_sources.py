"""The parity table of docs/agents.md, row by row, against its sources: every "followed exactly" of
the table is compared here with the source's text or with what the source's own code gives
(tests/agents/fixtures/sources/expected.json, made by make_expected.py beside it from pinned commits
of bytedance/UI-TARS, QwenLM/Qwen2.5-VL and QwenLM/Qwen3-VL, and AndroidLens's appendix E.1), or
with the ``ui-tars`` package's own constants. M3A's rows are tests/agents/test_m3a_parity.py."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from agents import qwen, uitars, vlm
from harness.core.actions import CoordSpace, OpenApp, to_device
from harness.client.config import ModelConfig

E: dict[str, Any] = json.loads((Path(__file__).parent / "fixtures" / "sources" / "expected.json").read_text("utf-8"))
MODEL = ModelConfig(base_url="http://127.0.0.1:9/v1", model="m")


def _size(key: str) -> tuple[int, int]:
    w, h = key.split("x")
    return int(w), int(h)


# --- UI-TARS-1.5 (uitars), v1, Doubao ---------------------------------------------------------------
def test_uitars_15_prompt_is_the_released_text_byte_for_byte() -> None:
    """Built from the package's MOBILE_USE_DOUBAO by the notation swap; equal to codes/prompts.py
    MOBILE_USE at 6b315cc itself (not only its hash)."""
    assert uitars.PROMPTS["uitars"].text == E["ui_tars"]["mobile_use_15"]


def test_uitars_resize_constants_are_the_packages_and_the_readmes() -> None:
    from ui_tars import action_parser

    ours = {"IMAGE_FACTOR": uitars.FACTOR, "MIN_PIXELS": uitars.MIN_PIXELS, "MAX_PIXELS": uitars.MAX_PIXELS}
    assert ours == E["ui_tars"]["constants"] == {k: getattr(action_parser, k) for k in ours}


@pytest.mark.parametrize("size", sorted(E["ui_tars"]["smart_resize"]))
def test_uitars_sees_the_size_readme_coordinates_smart_resize_gives(size: str) -> None:
    """README_coordinates.md's smart_resize, run on each size: the size the 1.5 model points in."""
    assert list(uitars.resized_size(_size(size))) == E["ui_tars"]["smart_resize"][size]


def test_uitars_15_points_are_pixels_of_the_resized_screenshot_as_readme_coordinates_maps_them() -> None:
    """README_coordinates.md maps a point back with ``x / new_width * width``; it truncates with
    ``int()``, we take the nearest pixel (the table says so): at most one pixel apart, never more."""
    w, h = 1080, 2400
    rw, rh = E["ui_tars"]["smart_resize"]["1080x2400"]
    for x, y in ((197, 525), (546, 1204), (0, 0), (1000, 2000), (1091, 2407)):
        act = uitars.parse_output(f"Action: click(start_box='({x},{y})')", (w, h), variant="uitars")
        assert (act.x, act.y) == (min(round(x / rw * w), w - 1), min(round(y / rh * h), h - 1))
        assert abs(act.x - int(x / rw * w)) <= 1 and abs(act.y - int(y / rh * h)) <= 1


def test_uitars_system_turn_is_the_training_examples() -> None:
    assert uitars.VARIANTS["uitars"].system == E["ui_tars"]["system_turn"] == "You are a helpful assistant."
    assert uitars.VARIANTS["uitars-v1"].system is None and uitars.VARIANTS["doubao"].system is None


@pytest.mark.parametrize("turn", sorted(E["ui_tars"]["box_token_turns"]))
def test_earlier_turns_get_box_tokens_as_readme_deploys_add_box_token_puts_them(turn: str) -> None:
    assert uitars.VARIANTS["uitars"].history_turn(turn) == E["ui_tars"]["box_token_turns"][turn]
    assert uitars.VARIANTS["uitars-v1"].history_turn(turn) == E["ui_tars"]["box_token_turns"][turn]
    assert uitars.VARIANTS["doubao"].history_turn(turn) == turn  # Doubao's turns: as written


def test_uitars_v1_action_space_is_readme_v1s_mobile_template() -> None:
    """The signatures, line by line; the finished() comment is ours (the table says so)."""
    text = uitars.PROMPTS["uitars-v1"].text
    ours = text[text.index("## Action Space\n\n") + len("## Action Space\n\n"):text.index("\n\n\n## Note")].split("\n")
    theirs = E["ui_tars"]["v1_mobile_action_space"]
    assert ours[:-1] == theirs[:-1]
    assert ours[-1].split(" #")[0] == theirs[-1].split(" #")[0] == "finished(content='')"


def test_uitars_v1_points_map_as_readme_v1s_coordinate_mapping() -> None:
    """README_v1: relative 0-1000 values, ``round(width * x / 1000)``; its worked example, and the
    rule on points across the grid (1000 itself is the last pixel here, one off the screen there)."""
    text = E["ui_tars"]["v1_coordinate_mapping"]
    (w, x, ax), (h, y, ay) = [tuple(map(int, m)) for m in re.findall(r"round\((\d+)\*(\d+)/1000\)=(\d+)", text)]
    act = uitars.parse_output(f"Action: click(start_box='({x},{y})')", (w, h), variant="uitars-v1")
    assert (act.x, act.y) == (ax, ay) == (451, 553)
    for x, y in ((0, 0), (1, 999), (333, 667), (500, 500), (1000, 1000)):
        act = uitars.parse_output(f"Action: click(start_box='({x},{y})')", (1080, 2400), variant="uitars-v1")
        assert (act.x, act.y) == (min(round(1080 * x / 1000), 1079), min(round(2400 * y / 1000), 2399)), (x, y)


@pytest.mark.parametrize("point", [(892, 351), (0, 0), (500, 500), (1000, 1000), (123, 987)])
def test_a_doubao_point_lands_where_the_packages_doubao_reading_puts_it(point: tuple[int, int]) -> None:
    """The package README's reading (``model_type="doubao"``, factor 1000, the original screenshot's
    size): its 0-1 fractions times the screen, to the nearest pixel (the far edge: the last pixel)."""
    from ui_tars.action_parser import parse_action_to_structure_output

    w, h = 1080, 2400
    x, y = point
    text = f"Thought: t\nAction: click(point='<point>{x} {y}</point>')"
    theirs = parse_action_to_structure_output(text, factor=1000, origin_resized_height=h, origin_resized_width=w,
                                              model_type="doubao")
    fx, fy = json.loads(theirs[0]["action_inputs"]["start_box"])[:2]
    act = uitars.parse_output(text, (w, h), variant="doubao")
    assert (act.x, act.y) == (min(round(fx * w), w - 1), min(round(fy * h), h - 1))


@pytest.mark.parametrize("variant,model_type,text", [
    ("uitars", "qwen25vl", "Action: click(start_box='<|box_start|>(546,1204)<|box_end|>')"),
    ("uitars", "qwen25vl", "Action: drag(start_box='(10,20)', end_box='(1000,2000)')"),
    ("uitars-v1", "qwen2vl", "Action: click(start_box='(500,500)')"),
    ("uitars-v1", "qwen2vl", "Action: scroll(start_box='(500,800)', end_box='(500,200)')"),
    ("doubao", "qwen2vl", "Action: click(point='<point>892 351</point>')"),
])
def test_uitars_family_points_are_the_ui_tars_parsers(variant: str, model_type: str, text: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """"The package's parser (called)": every variant hands its call to the installed package's
    ``parse_action_to_structure_output`` (factor 1000, the screenshot's size, the variant's
    ``model_type``), and the points it lands on are that function's 0-1 fractions of the screen."""
    from ui_tars import action_parser

    seen: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []

    def spy(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        out = action_parser.parse_action_to_structure_output(*args, **kwargs)
        seen.append((kwargs, out))
        return out

    monkeypatch.setattr(uitars, "parse_action_to_structure_output", spy)
    w, h = 1080, 2400
    parsed = uitars.parse_detailed(text, (w, h), variant=variant)
    (kwargs, out), = seen
    assert (kwargs["factor"], kwargs["origin_resized_width"], kwargs["origin_resized_height"], kwargs["model_type"]) \
        == (1000, w, h, model_type)
    inputs = out[0]["action_inputs"]
    act = parsed.action
    start = act.start if hasattr(act, "start") else (act.x, act.y)
    fx, fy = json.loads(inputs["start_box"])[:2]
    assert tuple(start) == (min(round(fx * w), w - 1), min(round(fy * h), h - 1))
    if "end_box" in inputs:
        ex, ey = json.loads(inputs["end_box"])[:2]
        assert tuple(act.end) == (min(round(ex * w), w - 1), min(round(ey * h), h - 1))


def test_doubao_prompt_is_the_packages_constant() -> None:
    from ui_tars.prompt import MOBILE_USE_DOUBAO

    assert uitars.PROMPTS["doubao"].text == MOBILE_USE_DOUBAO


# --- Qwen2.5-VL and Qwen3-VL ------------------------------------------------------------------------
_TOOLS = re.compile(r"<tools>\n(.*)\n</tools>", re.S)


def _shape(obj: Any) -> Any:
    """A tool definition with its descriptions' wording left out (ours), everything else kept: the
    keys and their order, names, types, enums, required."""
    if isinstance(obj, dict):
        return [(k, "<description>" if k == "description" else _shape(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [_shape(v) for v in obj]
    return obj


def _split(system: str) -> tuple[str, dict[str, Any], str]:
    m = _TOOLS.search(system)
    return system[:m.start(1)], json.loads(m.group(1)), system[m.end(1):]


def _system(version: str, width: int, height: int) -> str:
    return qwen.QwenAgent(qwen.QwenConfig(version=version, model=MODEL)).system_text(width, height)


@pytest.mark.parametrize("screen", sorted(E["qwen2.5"]["printed"]))
def test_qwen25_system_turn_is_the_cookbooks_frame_and_tool_shape_with_its_stated_resolution(screen: str) -> None:
    """The cookbook's printed system turn for its screenshot: the same frame outside the tool, byte for
    byte; the same tool structure (Nous form, every key, name, type, enum); the same resolution
    statement, which is smart_resize's size of that screenshot."""
    printed = E["qwen2.5"]["printed"][screen]
    rw, rh = qwen.resized_size(_size(screen), "2.5")
    assert f"{rw}x{rh}" == printed["stated_resolution"]
    head, tool, tail = _split(_system("2.5", rw, rh))
    their_head, their_tool, their_tail = _split(printed["system"])
    assert (head, tail) == (their_head, their_tail)
    assert _shape(tool) == _shape(their_tool)
    assert f"The screen's resolution is {rw}x{rh}." in tool["function"]["description"]


def test_qwen3_system_turn_is_the_cookbooks_frame_and_tool_shape_at_999() -> None:
    ours, theirs = _system("3", 999, 999), E["qwen3"]["system_prompt"]
    head, tool, tail = _split(ours)
    their_head, their_tool, their_tail = _split(theirs)
    assert head == their_head and _shape(tool) == _shape(their_tool)
    assert "The screen's resolution is 999x999." in tool["function"]["description"]
    # the tool-call instructions after the tools, as the cookbook has them; its response format's
    # wording is ours, its structure the cookbook's: Thought, Action, one <tool_call>, in that order
    fmt = "\n\n# Response format\n\n"
    assert tail.split(fmt)[0] == their_tail.split(fmt)[0]
    ours_fmt, their_fmt = tail.split(fmt)[1], their_tail.split(fmt)[1]
    for text in (ours_fmt, their_fmt):
        steps = [text.index(s) for s in ("1) Thought:", "2) Action:", "3) ", "<tool_call>...</tool_call>")]
        assert steps == sorted(steps) and "action=terminate" in text


@pytest.mark.parametrize("version", ["2.5", "3"])
def test_qwen_action_lists_and_argument_names_are_the_cookbooks(version: str) -> None:
    theirs = E["qwen2.5"]["printed"]["1080x2400"]["system"] if version == "2.5" else E["qwen3"]["system_prompt"]
    params = _split(theirs)[1]["function"]["parameters"]
    assert list(qwen.ACTIONS[version]) == params["properties"]["action"]["enum"]
    assert list(_split(_system(version, 999, 999))[1]["function"]["parameters"]["properties"]) == \
        list(params["properties"])


@pytest.mark.parametrize("version", ["2.5", "3"])
def test_qwen_images_are_qwen_vl_utils_smart_resize_of_the_version(version: str) -> None:
    """qwen-vl-utils' smart_resize of each version's repository, run on each size, with its default
    limits (2.5: MIN_PIXELS, MAX_PIXELS; 3: 4 and 16384 tokens of 32x32 pixels)."""
    ref = E["qwen2.5" if version == "2.5" else "qwen3"]["smart_resize"]
    assert qwen.FACTOR[version] == ref["factor"]
    assert qwen.pixel_limits(version) == (ref["min_pixels"], ref["max_pixels"])
    for size, want in ref["sizes"].items():
        assert list(qwen.resized_size(_size(size), version)) == want, size


def test_qwen25_history_is_the_cookbooks_json_call_progress() -> None:
    """The cookbook's user turn holds ``Step 1: {"name": "mobile_use", "arguments": {...}}; ``; a
    ground-truth open of File Manager is written the same way."""
    agent = qwen.QwenAgent(qwen.QwenConfig(version="2.5", model=MODEL))
    entry = agent.history_text(OpenApp(app="File Manager"), (1080, 2400))
    user = E["qwen2.5"]["printed"]["1080x2400"]["user"]
    assert user.endswith("): " + qwen.progress_text([entry]))


@pytest.mark.parametrize("case", range(len(E["qwen3"]["histories"])))
def test_qwen3_progress_is_the_cookbooks_history_string(case: int) -> None:
    h = E["qwen3"]["histories"][case]
    assert qwen.progress_text([qwen.history_item(x) for x in h["history"]]) == h["stage2_history"]


def test_qwen3_history_entry_is_the_action_line_the_cookbook_keeps() -> None:
    """The cookbook's printed output writes ``Action: "I tapped ..."``; its history lists such lines
    without double quotes (``his.replace('"', '')``)."""
    line = qwen.action_line(E["qwen3"]["printed_output"])
    assert qwen.history_item(line) == "I tapped on the search bar to begin searching for Musk."
    act = qwen.parse_output(E["qwen3"]["printed_output"], (1440, 3120), version="3")
    assert (act.x, act.y) == tuple(E["qwen3"]["rescale"]["447,81@1440x3120"])


@pytest.mark.parametrize("key", sorted(E["qwen3"]["rescale"]))
def test_qwen3_grid_point_lands_where_the_cookbooks_rescale_puts_it(key: str) -> None:
    """``round(x / 999 * width)``; the far edge (999), which that puts one pixel off the screen, is
    the last pixel here."""
    point, size = key.split("@")
    x, y = map(int, point.split(","))
    w, h = _size(size)
    ex, ey = E["qwen3"]["rescale"][key]
    assert to_device(x, y, CoordSpace.GRID_999, (w, h)) == (min(ex, w - 1), min(ey, h - 1))


# --- vlm: AndroidLens's prompt for general models -------------------------------------------------------
def _calls(text: str) -> dict[str, list[str]]:
    text = text.replace("‘", "'").replace("’", "'").replace("<|box_ end|>", "<|box_end|>")
    space = text[text.index("Action Space") + len("Action Space"):]
    space = space[:space.index("## Note")] if "## Note" in space else space[:space.index("## Coordinates")]
    return {m.group(1): re.findall(r"(\w+)=", m.group(2)) for m in re.finditer(r"\b([a-z_]+)\(([^()]*(?:\([^()]*\)[^()]*)*)\)", space)}


def test_vlm_prompt_has_androidlens_actions_and_arguments_plus_what_the_table_names() -> None:
    """AndroidLens E.1: Thought/Action, click/long_press/type/scroll/press_back/press_home/wait/finished
    with their argument names; ours adds open_app, drag and finished's content (the table says so)."""
    theirs = _calls(E["androidlens"]["prompt"])
    ours = _calls(vlm.load_prompt("vlm_en").text.replace("## Actions", "Action Space"))
    assert set(ours) - set(theirs) == {"open_app", "drag"}
    for name, args in theirs.items():
        assert ours[name] == args or (name == "finished" and ours[name] == ["content"] and args == []), name
    for label in ("Thought:", "Action:"):
        assert label in E["androidlens"]["prompt"] and label in vlm.load_prompt("vlm_en").text
    assert "{language}" in E["androidlens"]["prompt"] and "{instruction}" in E["androidlens"]["prompt"]
    assert {"language", "instruction"} <= vlm.load_prompt("vlm_en").placeholders()


def test_vlm_coordinates_are_androidlens_choice_per_model_family() -> None:
    """GPT-4o and Claude absolute pixels (of the screenshot as sent), Gemini 0-1000."""
    text = E["androidlens"]["coordinates"]
    assert re.search(r"GPT-4o and Claude\S* use absolute coordinates", text)
    assert re.search(r"Gemini.* relative coordinates in the range 0.1000", text)
    screen = (1080, 2400)
    pixels = vlm.parse_output("Action: click(start_box='(288,640)')", screen, coords="pixels", image_size=(576, 1280))
    thousand = vlm.parse_output("Action: click(start_box='(500,500)')", screen, coords="thousand")
    assert (pixels.x, pixels.y) == (thousand.x, thousand.y) == (540, 1200)


# --- M3A's encoding (the rest of M3A: test_m3a_parity.py) ----------------------------------------------
def test_m3a_sends_jpeg_as_androidworlds_image_to_jpeg_bytes_saves_it() -> None:
    """infer.py saves ``format='JPEG'`` with no options: Pillow's defaults. Ours, at the default
    config, is the same bytes for the same screenshot, at full size."""
    from agents import m3a
    from harness.client.images import encode_pixels

    aw = json.loads((Path(__file__).parent / "fixtures" / "android_world" / "expected.json").read_text("utf-8"))
    assert "image.save(in_mem_file, format='JPEG')" in aw["quotations"]["infer.py image_to_jpeg_bytes"]
    img = Image.radial_gradient("L").convert("RGB").resize((540, 1200))
    theirs = io.BytesIO()
    img.save(theirs, format="JPEG")
    agent = m3a.M3AAgent(m3a.M3AConfig(model=MODEL))
    enc = encode_pixels(img, agent.policy())
    assert enc.data_url == "data:image/jpeg;base64," + __import__("base64").b64encode(theirs.getvalue()).decode()
