"""M3A against AndroidWorld's own code: what ``tests/agents/fixtures/android_world/make_expected.py``
got by running android_world's functions (commit d9c569f) is compared byte for byte with what
``agents/m3a.py`` makes of the same input: the element lines (an authored dump with every edge case,
and real devices' dumps from ../shared/reference), the history line and its action JSON, the
prompt's action list, what each action does on the phone (the scroll geometry among them), and the
shape of the requests (``Gpt4Wrapper.predict_mm``, quoted)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agents import m3a
from agents.prompts import load_prompt
from harness.core import hierarchy
from harness.core.actions import Swipe
from tests.shared_data import reference

FIXTURES = Path(__file__).parent / "fixtures" / "android_world"
EXPECTED: dict[str, Any] = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
SCREEN = tuple(EXPECTED["screen"])


def _dump(name: str) -> str:
    if name == "elements.xml":
        return (FIXTURES / name).read_text(encoding="utf-8")
    return reference(*name.split("/")).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(EXPECTED["element_lines"]))
def test_each_element_line_is_the_one_androidworld_writes(name: str) -> None:
    """Every node of the dump, described by us and by AndroidWorld's ``_generate_ui_element_description``
    (strings pasted as they are, hint_text, is_focusable, no is_enabled / is_focused)."""
    expected = EXPECTED["element_lines"][name]
    elements = hierarchy.parse(_dump(name))
    assert len(elements) == len(expected)
    for e in elements:
        assert m3a.describe_element(e.index, e) == expected[str(e.index)], e


def test_the_edge_cases_the_authored_dump_holds_are_there() -> None:
    """The authored dump is only worth its comparison if it holds each case the line form has."""
    lines = "\n".join(EXPECTED["element_lines"]["elements.xml"].values())
    for needle in ('"text": "Say "hi" \\ to {everyone}"', '"text": "two\nlines\tand a tab"', '"hint_text": "Password"',
                   '"is_focusable": True', '"is_scrollable": True', '"is_selected": True', '"is_checked": True',
                   '"is_editable": True', '"is_long_clickable": True', "你好", "✉️"):
        assert needle in lines, needle
    assert "is_enabled" not in lines and "is_focused" not in lines and "tooltip" not in lines
    real = "\n".join(EXPECTED["element_lines"]["real_device/uiautomator/u2_facebook_drawing_order_hint.xml"].values())
    assert '"is_focusable": True' in real


def test_the_selected_elements_are_listed_with_androidworld_lines() -> None:
    """The prompt's list: the marked elements, numbered 0..n-1, each line AndroidWorld's for it."""
    xml = _dump("elements.xml")
    by_bounds = {e.bounds: e for e in hierarchy.parse(xml)}
    picked = m3a.elements_from_xml(xml, SCREEN)
    assert len(picked) >= 10
    # AndroidWorld's line for each node, under the number the element has in our list
    want = [re.sub(r"^UI element \d+: \{\"index\": \d+", f'UI element {i}: {{"index": {i}',
                   EXPECTED["element_lines"]["elements.xml"][str(by_bounds[e.bounds].index)])
            for i, e in enumerate(picked)]
    assert m3a.describe_elements(picked) == "\n".join(want)


@pytest.mark.parametrize("row", EXPECTED["history"], ids=lambda r: r["output"][:24])
def test_the_history_line_and_its_action_are_androidworlds(row: dict[str, str]) -> None:
    """``Step N- Action selected: <json.dumps of the action>. <summary>`` as M3A writes it (non-ASCII
    as \\u escapes, AndroidWorld's default json.dumps), for the model's own output."""
    parsed = m3a.parse_detailed(row["output"], SCREEN, elements=_elements(4))
    action = m3a.history_action(parsed.raw)
    assert action == row["action"]
    assert m3a.history_line(1, action, row["summary"]) == row["line"]
    assert parsed.thought == row["reason"]


def test_a_ground_truth_action_is_written_as_the_models_own() -> None:
    """A static run's ground-truth line holds the same json.dumps form (ASCII escapes)."""
    from harness.core.actions import TypeText
    from harness.client.config import ModelConfig

    agent = m3a.M3AAgent(m3a.M3AConfig(model=ModelConfig(base_url="http://127.0.0.1:9/v1", model="m")))

    assert agent.history_text(TypeText(text="你好", submit=True), SCREEN) == \
        '{"action_type": "input_text", "text": "\\u4f60\\u597d"}'


def test_the_prompt_lists_androidworlds_actions_with_their_keys() -> None:
    """The action JSON forms of our m3a_en prompt: the same action types, each with the same keys,
    in the same order within each form as AndroidWorld's PROMPT_PREFIX (the wording around them, and
    the order of the list, are ours)."""
    ours = [(m.group(1), re.findall(r'"(\w+)":', m.group(0))) for m in
            re.finditer(r'\{"action_type": "(\w+)"[^}]*\}', load_prompt("m3a_en").text)]
    theirs = [(a["action_type"], a["keys"]) for a in EXPECTED["prompt_actions"]]
    assert sorted(ours) == sorted(theirs) and len(ours) == 12


def _elements(n: int, bounds: tuple[int, int, int, int] = (0, 0, 100, 100)) -> list[hierarchy.Element]:
    return [hierarchy.Element(index=i, text="", desc="", rid="", cls="android.widget.EditText", package="p",
                              bounds=bounds, clickable=True, long_clickable=False, scrollable=True, checkable=False,
                              checked=False, focused=False, enabled=True, selected=False, depth=1) for i in range(n)]


@pytest.mark.parametrize("row", EXPECTED["scrolls"], ids=lambda r: f"{r['bounds']}-{r['direction']}")
def test_scroll_moves_the_finger_as_androidworlds_actuation(row: dict[str, Any]) -> None:
    """From the element's (or the screen's) centre to its edge, AndroidWorld's points exactly; an end
    on the screen's far edge, which AndroidWorld sends one pixel off the screen, is its last pixel."""
    w, h = SCREEN
    if row["bounds"] is None:
        text, elements = f'Action: {{"action_type": "scroll", "direction": "{row["direction"]}"}}', None
    else:
        text = f'Action: {{"action_type": "scroll", "direction": "{row["direction"]}", "index": 1}}'
        elements = _elements(2, tuple(row["bounds"]))
    act = m3a.parse_detailed(text, SCREEN, elements=elements or [])
    assert isinstance(act.action, Swipe)
    ex, ey = row["end"]
    assert list(act.action.start) == row["start"]
    assert list(act.action.end) == [min(ex, w - 1), min(ey, h - 1)]


def test_each_request_is_the_payload_androidworlds_gpt4wrapper_builds() -> None:
    """``Gpt4Wrapper.predict_mm`` (infer.py, quoted in the fixture): one user message, its text
    first, then one ``data:image/jpeg;base64`` image per screenshot; M3A's action call passes the
    plain screenshot then the Set-of-Mark one, its summary call the marked before and after screens
    (m3a.py's two ``predict_mm`` calls). Two steps over a simulated phone: the requests have that
    shape, and the action call's first image is the screenshot saved as ``image_to_jpeg_bytes`` does."""
    import base64

    from PIL import Image

    from harness.core.episode import EpisodeContext, Observation
    from harness.client.config import ModelConfig
    from harness.sim.phone import SimPhone
    from harness.core.tasks import Task
    from tests.fakes.model_server import Reply, ScriptedModelServer

    quoted = EXPECTED["quotations"]["infer.py Gpt4Wrapper.predict_mm (request parts)"]
    for fact in ("'role': 'user'", "{'type': 'text', 'text': text_prompt}", "for image in images:",
                 "'type': 'image_url'", "f'data:image/jpeg;base64,{self.encode_image(image)}'"):
        assert fact in quoted, fact
    assert "'role': 'system'" not in quoted
    screen = (540, 1200)
    phone = SimPhone(*screen)
    phone.reset()
    replies = [Reply('Reason: go home.\nAction: {"action_type": "navigate_home"}'), Reply("Went home."),
               Reply('Reason: done.\nAction: {"action_type": "status", "goal_status": "complete"}')]
    with ScriptedModelServer(replies) as srv:
        agent = m3a.M3AAgent(m3a.M3AConfig(model=ModelConfig(base_url=srv.base_url, model="m", max_retries=0)))
        agent.reset(EpisodeContext(task=Task(id="t", instruction="Go home.", reference_steps=1), screen_size=screen,
                                   seed=0, device_serial="x"))
        shots = []
        for step in (1, 2):
            png = phone.screencap_png()
            shots.append(png)
            agent.step(Observation(step=step, screenshot=png, screen_size=screen, hierarchy=phone.hierarchy_xml,
                                   instruction="Go home.", language="en"))
            phone.keyevent("HOME")
        requests = [r["messages"] for r in srv.requests]
    assert len(requests) == 3  # action, summary of step 1, action
    for messages in requests:
        assert len(messages) == 1 and messages[0]["role"] == "user"
        content = messages[0]["content"]
        assert [p["type"] for p in content] == ["text", "image_url", "image_url"]
        assert all(p["image_url"]["url"].startswith("data:image/jpeg;base64,") for p in content[1:])
    assert "Go home." in requests[0][0]["content"][0]["text"]
    assert '"action_type": "navigate_home"' in requests[1][0]["content"][0]["text"]  # the summary prompt
    theirs = io.BytesIO()
    Image.open(io.BytesIO(shots[0])).convert("RGB").save(theirs, format="JPEG")
    first = requests[0][0]["content"]
    assert base64.b64decode(first[1]["image_url"]["url"].split(",", 1)[1]) == theirs.getvalue()
    assert first[2]["image_url"]["url"] != first[1]["image_url"]["url"]  # the marked copy


def _as_androidworld_calls(actions: list[Any]) -> list[list[Any]]:
    """Our unified actions written as the adb helpers AndroidWorld's actuation calls for them; a field
    cleared first is one ``clear`` (AndroidWorld: Ctrl+A then Delete; ours: the device's typer)."""
    from harness.core.actions import Click, DoubleTap, Key, LongPress, TypeText

    out: list[list[Any]] = []
    for a in actions:
        if isinstance(a, (Click, LongPress, DoubleTap)):
            out.append([{Click: "tap_screen", LongPress: "long_press", DoubleTap: "double_tap"}[type(a)], a.x, a.y])
        elif isinstance(a, TypeText):
            out += [["clear"]] * a.clear + [["type_text", a.text]] + [["press_enter_button"]] * a.submit
        elif isinstance(a, Key):
            out.append([f"press_{a.key}_button"])
        else:
            raise AssertionError(f"no AndroidWorld helper for {a!r}")
    return out


@pytest.mark.parametrize("row", EXPECTED["actuations"], ids=lambda r: json.dumps(r["action"], ensure_ascii=False))
def test_each_action_does_what_androidworlds_actuation_does(row: dict[str, Any]) -> None:
    """``execute_adb_action``'s helper calls, in order (fixture), against our actions for the same
    JSON: a tap, long press or double tap on the element's centre (``int`` of its bounds' centre) or
    at x, y; ``input_text`` = a tap on the element, the field cleared when ``clear_text``, the text,
    then Enter; the keys. An element partly off the screen is tapped at the centre of its visible
    part (AndroidWorld taps its bounds' centre, which can be off the screen: the table says so)."""
    bounds = row["bounds"]
    elements = _elements(2, tuple(bounds)) if bounds is not None else []
    parsed = m3a.parse_detailed(f"Reason: r\nAction: {json.dumps(row['action'], ensure_ascii=False)}", SCREEN,
                                elements=elements)
    theirs = [["clear"] if c[:4] == ["request", "shell", "input", "keycombination"] else c for c in row["calls"]]
    ours = _as_androidworld_calls(parsed.actions)
    w, h = SCREEN
    if bounds is not None and (bounds[0] < 0 or bounds[1] < 0 or bounds[2] > w or bounds[3] > h):
        x1, y1, x2, y2 = max(bounds[0], 0), max(bounds[1], 0), min(bounds[2], w), min(bounds[3], h)
        assert theirs == [["tap_screen", int((bounds[0] + bounds[2]) / 2), int((bounds[1] + bounds[3]) / 2)]]
        assert ours == [["tap_screen", (x1 + x2) // 2, (y1 + y2) // 2]]
    else:
        assert ours == theirs
