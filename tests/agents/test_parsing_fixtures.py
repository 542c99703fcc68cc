"""Output parsing per protocol: our fixtures (realistic outputs and the known failure shapes, each with
its expected unified action or error), the 98 real published outputs in
../shared/reference/model_outputs.jsonl (each must give an action or a clear error), coordinate
round trips at several screen sizes, and ``harness agents parse``."""

from __future__ import annotations

import collections
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

import agents  # noqa: F401  (registers the parsers)
from agents import m3a, qwen, uitars, vlm
from agents.parsing import PARSERS, ElementAction, ParseError, Parsed, with_tool_calls
from harness.core.actions import CoordSpace, action_to_json, check_on_screen, from_device
from harness.core.hierarchy import Element
from harness.sim.phone import SimPhone
from tests.shared_data import reference

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "outputs.jsonl").read_text("utf-8").splitlines()
            if line.strip()]

_launchers: dict[tuple[int, int], str] = {}


def launcher_xml(size: tuple[int, int]) -> str:
    if size not in _launchers:
        phone = SimPhone(*size)
        phone.reset()
        _launchers[size] = phone.hierarchy_xml()
    return _launchers[size]


def parse_case(case: dict[str, Any]) -> Parsed:
    size = tuple(case["size"])
    opts = dict(case.get("opts") or {})
    if case.get("hierarchy") == "launcher":
        opts["hierarchy_xml"] = launcher_xml(size)
    return PARSERS[case["agent"]].parse(with_tool_calls(case["text"], case.get("tool_calls")), size, **opts)


def test_fixture_file_covers_every_protocol_and_shape() -> None:
    by_agent = collections.Counter(c["agent"] for c in FIXTURES)
    assert set(by_agent) == {"uitars", "uitars-v1", "doubao", "qwen", "m3a", "vlm"}
    shapes = " ".join(c["shape"] for c in FIXTURES)
    for shape in ("missing Action line", "beyond", "box instead of a point", "Chinese app name",
                  "escaped quotes in type content", "two actions", "<|box_start|>", "full-width", "<think>",
                  "missing </tool_call>", "truncated", "fractions", "v1 scroll(start_box, end_box)",
                  "Doubao click(point=", "Qwen2.5-VL cookbook output", "Qwen3-VL cookbook output", "OpenAI tool_calls",
                  "AndroidWorld double_tap", "index without a hierarchy"):
        assert shape in shapes, shape
    assert len({c["id"] for c in FIXTURES}) == len(FIXTURES)
    assert sum("error" in c for c in FIXTURES) >= 20 and sum("expect" in c for c in FIXTURES) >= 60


@pytest.mark.parametrize("case", FIXTURES, ids=[c["id"] for c in FIXTURES])
def test_fixture(case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(ParseError) as e:
            parse_case(case)
        assert case["error"] in str(e.value), str(e.value)
        return
    parsed = parse_case(case)
    assert [a.to_json() for a in parsed.actions] == case["expect"]
    for a in parsed.actions:
        if not isinstance(a, ElementAction):  # an unresolved element action has no point yet
            check_on_screen(a, *case["size"])
    for note in case.get("notes", []):
        assert any(note in n for n in parsed.notes), (note, parsed.notes)
    assert parsed.raw  # the model's own action, before conversion, is kept for the record
    json.dumps(parsed.to_json())


def test_parse_output_is_the_first_action() -> None:
    text = "Thought: done\nAction: finished(content='06:15')"
    assert uitars.parse_output(text, (1080, 2400)).to_json() == {"type": "answer", "text": "06:15"}
    assert vlm.parse_output(text, (1080, 2400)).to_json() == {"type": "answer", "text": "06:15"}
    with pytest.raises(ValueError):  # ParseError is a ValueError
        qwen.parse_output("no call here", (1080, 2400))
    for bad in (None, "", "   ", 42):
        with pytest.raises(ParseError):
            m3a.parse_output(bad, (1080, 2400))  # type: ignore[arg-type]


# --- scroll semantics, stated once and checked for every family ----------------------------------
@pytest.mark.parametrize("family", ["uitars", "vlm", "m3a", "qwen"])
def test_scroll_direction_semantics(family: str) -> None:
    """UI-TARS, vlm and M3A ``scroll(down)`` = show what is below (the finger moves UP); M3A
    ``swipe(down)`` and Qwen ``swipe`` = the finger's own path."""
    size = (1080, 2400)
    if family == "uitars":
        down = uitars.parse_output("Action: scroll(direction='down')", size)
        right = uitars.parse_output("Action: scroll(start_box='(546,1204)', direction='right')", size)
    elif family == "vlm":
        down = vlm.parse_output("Action: scroll(direction='down')", size)
        right = vlm.parse_output("Action: scroll(start_box='(540,1200)', direction='right')", size)
    elif family == "m3a":
        down = m3a.parse_output('{"action_type": "scroll", "direction": "down"}', size)
        right = m3a.parse_output('{"action_type": "scroll", "direction": "right"}', size)
        finger = m3a.parse_output('{"action_type": "swipe", "direction": "down"}', size)
        assert finger.end[1] > finger.start[1]  # swipe down: the finger moves down
    else:
        up = qwen.parse_output('<tool_call>{"name": "mobile_use", "arguments": {"action": "swipe", '
                               '"coordinate": [546, 1806], "coordinate2": [546, 602]}}</tool_call>', size)
        assert up.end[1] < up.start[1]  # the finger moves up: the list scrolls towards its end
        return
    assert down.end[1] < down.start[1] and down.end[0] == down.start[0]   # finger up
    assert right.end[0] < right.start[0] and right.end[1] == right.start[1]  # finger left


# --- coordinates: taps land where the model pointed, at every size and in every space -------------
SIZES = [(1080, 2400), (1440, 3120), (720, 1600), (1080, 1920), (800, 1280), (1600, 2560)]


def _spaces(size: tuple[int, int]) -> list[tuple[str, tuple[float, float], Any]]:
    """(label, the model's (width, height) in its own units, device point -> (parser, output text,
    options)) for each protocol."""
    ur = uitars.resized_size(size)
    qr = qwen.resized_size(size, "2.5")
    small = (round(size[0] * 1280 / max(size)), round(size[1] * 1280 / max(size)))

    def r(p: tuple[float, float]) -> tuple[int, int]:
        return round(p[0]), round(p[1])

    def tars(p: tuple[float, float]) -> str:
        return "Action: click(start_box='(%d,%d)')" % r(p)

    def doubao(p: tuple[float, float]) -> str:
        return "Action: click(point='<point>%d %d</point>')" % r(p)

    def tc(p: tuple[float, float]) -> str:
        return ('<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [%d, %d]}}'
                '</tool_call>' % r(p))

    return [
        ("uitars", ur, lambda x, y: (uitars.parse_output, tars(from_device(x, y, CoordSpace.RESIZED, size, ur)), {})),
        ("uitars-v1", (1000, 1000), lambda x, y: (uitars.parse_output, tars(from_device(x, y, CoordSpace.THOUSAND, size)),
                                          {"variant": "uitars-v1"})),
        ("doubao", (1000, 1000), lambda x, y: (uitars.parse_output, doubao(from_device(x, y, CoordSpace.THOUSAND, size)),
                                       {"variant": "doubao"})),
        ("qwen2.5", qr, lambda x, y: (qwen.parse_output, tc(from_device(x, y, CoordSpace.RESIZED, size, qr)), {})),
        ("qwen3", (999, 999), lambda x, y: (qwen.parse_output, tc(from_device(x, y, CoordSpace.GRID_999, size)), {"version": "3"})),
        ("vlm-pixels", small, lambda x, y: (vlm.parse_output, tars(from_device(x, y, CoordSpace.RESIZED, size, small)),
                                               {"image_size": small})),
        ("vlm-thousand", (1000, 1000), lambda x, y: (vlm.parse_output, tars(from_device(x, y, CoordSpace.THOUSAND, size)),
                                             {"coords": "thousand"})),
    ]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_taps_land_on_every_launcher_element(size: tuple[int, int]) -> None:
    """A correct model points at an element's centre in its own space; after rounding to integers
    (and smart_resize's rounding to multiples of 28) the tap still lands inside the element."""
    els = m3a.elements_from_xml(launcher_xml(size), size)
    assert len(els) >= 8
    for label, _, make in _spaces(size):
        for e in els:
            x1, y1, x2, y2 = m3a.visible_bounds(e, size)
            if (x2 - x1) < 12 or (y2 - y1) < 12:
                continue  # slivers narrower than one model unit cannot be hit reliably by any protocol
            fn, text, opts = make(*e.center)
            a = fn(text, size, **opts)
            assert x1 <= a.x < x2 and y1 <= a.y < y2, (label, e.label, e.bounds, a)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_edges_round_trip(size: tuple[int, int]) -> None:
    """Corners and the centre survive the round trip within one model unit, always on the screen."""
    w, h = size
    for label, (uw, uh), make in _spaces(size):
        tx, ty = math.ceil(w / uw), math.ceil(h / uh)
        for x, y in ((0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1), (w // 2, h // 2)):
            fn, text, opts = make(x, y)
            a = fn(text, size, **opts)
            assert 0 <= a.x < w and 0 <= a.y < h
            assert abs(a.x - x) <= tx and abs(a.y - y) <= ty, (label, (x, y), a)


def test_smart_resize_edge_values() -> None:
    """The resized image's far edge is accepted (the last pixel), one more is refused."""
    for size in SIZES:
        rw, rh = uitars.resized_size(size)
        a = uitars.parse_output(f"Action: click(start_box='({rw},{rh})')", size)
        assert (a.x, a.y) == (size[0] - 1, size[1] - 1)
        with pytest.raises(ParseError, match="out of range"):
            uitars.parse_output(f"Action: click(start_box='({rw + 1},{rh})')", size)
        qw, qh = qwen.resized_size(size)
        a = qwen.parse_output('<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [%d, %d]}}</tool_call>' % (qw, qh), size)
        assert (a.x, a.y) == (size[0] - 1, size[1] - 1)
    assert uitars.resized_size((1080, 2400)) == (1092, 2408) and uitars.resized_size((1440, 3120)) == (1428, 3108)
    assert uitars.resized_size((720, 1600)) == (728, 1596)


# --- the published outputs -------------------------------------------------------------------------
# ../shared/reference/model_outputs.jsonl: 98 real outputs (line numbers below are 0-based). Each is
# read as the release that wrote it (its notes say which); desktop and web outputs on a desktop screen.
PHONE, DESKTOP = (1080, 2400), (1920, 1080)
HEMA = (720, 1280)  # the Qwen2.5-VL cookbook's zh screenshot: its prompt states 728x1288 = smart_resize(720x1280)
UITARS_LINES: dict[int, tuple[str, tuple[int, int]]] = {
    0: ("doubao", DESKTOP), 1: ("uitars-v1", DESKTOP), 2: ("uitars", PHONE), 3: ("uitars-v1", DESKTOP),
    4: ("doubao", PHONE), 5: ("doubao", PHONE), 6: ("doubao", PHONE), 7: ("doubao", PHONE),
    8: ("uitars-v1", DESKTOP), 9: ("uitars", DESKTOP), 10: ("uitars", DESKTOP), 15: ("uitars", DESKTOP),
    16: ("uitars", DESKTOP), 17: ("uitars-v1", DESKTOP), 18: ("uitars", DESKTOP),
    **{i: ("uitars-v1", PHONE) for i in range(64, 75)}, 92: ("uitars", PHONE),
}
QWEN_LINES: dict[int, tuple[str, tuple[int, int]]] = {
    11: ("2.5", PHONE), 12: ("2.5", HEMA), 13: ("2.5", HEMA), 14: ("3", PHONE), 19: ("2.5", DESKTOP),
    20: ("2.5", DESKTOP), 21: ("2.5", DESKTOP), **{i: ("2.5", PHONE) for i in range(93, 98)},
}


def _click(x: int, y: int) -> dict[str, Any]:
    return {"type": "click", "x": x, "y": y}


def _swipe(a: tuple[int, int], b: tuple[int, int], ms: int) -> dict[str, Any]:
    return {"type": "swipe", "start": list(a), "end": list(b), "duration_ms": ms}


# what a person reading each well-formed output expects, in device pixels of the line's screen
# (UI-TARS-1.5 / Qwen2.5: pixels of the smart_resize'd image; v1 / Doubao 0-1000; Qwen3 the 999 grid)
EXPECTED_ACTIONS: dict[int, list[dict[str, Any]]] = {
    0: [_click(367, 23)], 2: [_swipe((252, 688), (232, 142), 600)], 3: [_click(1327, 92)], 4: [_click(963, 842)],
    5: [_click(486, 1356)], 6: [_click(486, 1356)], 8: [_click(1365, 539)], 9: [_click(1092, 63)],
    10: [_click(656, 1047)], 15: [_click(176, 543)], 16: [_click(1152, 698)], 17: [_click(58, 940)],
    18: [_click(1319, 855)], 64: [{"type": "open_app", "app": "Audio Recorder"}], 65: [_click(540, 2138)],
    66: [{"type": "open_app", "app": "chrome"}], 67: [_swipe((540, 1200), (1079, 1200), 400)], 68: [_click(540, 624)],
    70: [_click(957, 2198)], 71: [_click(957, 2198)], 72: [_click(552, 2167)],
    73: [{"type": "open_app", "app": "Simple Calendar Pro"}], 74: [_click(540, 1267)], 92: [_click(473, 1334)],
    11: [_click(925, 405)], 12: [_click(632, 1088)], 13: [_click(638, 1086)], 14: [_click(483, 195)],
    19: [{"type": "type", "text": "mPLUG-Owl3", "submit": False}], 93: [_click(938, 1502)], 94: [_click(554, 1710)],
    95: [_swipe((561, 1475), (561, 553), 400)], 96: [_click(946, 1503)], 97: [_click(957, 1502)],
    # M3A without the element lists (not published): index actions stay unresolved element actions
    22: [{"type": "open_app", "app": "Files"}], 23: [{"type": "click", "index": 8, "resolved": False}],
    24: [{"type": "click", "index": 5, "resolved": False}, {"type": "type", "text": "Movie Night", "submit": True}],
    25: [{"type": "key", "key": "enter"}], 26: [{"type": "long_press", "index": 23, "resolved": False}],
    27: [{"type": "key", "key": "back"}], 28: [{"type": "key", "key": "home"}],
    29: [_swipe((540, 1200), (1079, 1200), 400)], 31: [_swipe((540, 1200), (0, 1200), 400)],
    32: [{"type": "finish", "status": "complete"}], 33: [{"type": "wait", "seconds": 1.0}],
    40: [{"type": "finish", "status": "infeasible"}], 46: [{"type": "double_tap", "index": 11, "resolved": False}],
    49: [{"type": "swipe", "index": 1, "finger": "left", "resolved": False}],
    62: [{"type": "open_app", "app": "Recorder"}], 63: [{"type": "open_app", "app": "Recorder"}],
    75: [_click(998, 209)], 77: [_click(1004, 522)], 79: [_click(859, 219)],
    80: [_swipe((540, 1200), (540, 2399), 400)], 84: [{"type": "open_app", "app": "SmartNews"}],
    87: [{"type": "finish", "status": "infeasible"}], 90: [{"type": "open_app", "app": "Moonly"}],
}
# the outputs that hold no usable action, and why (every other line must parse)
EXPECTED_ERRORS = {
    1: "start_box='=' holds no coordinates",
    7: "a bare <bbox> fragment, no action at all",
    20: "prose, no tool call",
    21: "prose with a coordinate in text, no tool call",
    34: "placeholder N instead of an index",
    35: "placeholder N instead of an index",
    61: "open_app() without an app name",
    69: "0-1 fractions where UI-TARS v1's 0-1000 grid is expected",
}


def _reference_rows() -> list[dict[str, Any]]:
    """The shared corpus, ../shared/reference/model_outputs.jsonl beside the repository as CI lays it
    out; where it is absent the test skips saying so, and scripts/test counts such skips."""
    path = reference("model_outputs.jsonl")
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def parse_reference(i: int, row: dict[str, Any]) -> Parsed:
    fam = row["family"]
    if fam == "uitars":
        variant, size = UITARS_LINES[i]
        return uitars.parse_detailed(row["text"], size, variant)
    if fam == "qwen_mobile_use":
        version, size = QWEN_LINES[i]
        return qwen.parse_detailed(row["text"], size, version=version)
    if fam == "m3a":  # as `harness agents parse --agent m3a` reads it, without a hierarchy
        return PARSERS["m3a"].parse(row["text"], PHONE)
    raise AssertionError(f"unknown family {fam}")


def test_every_published_output_parses_to_the_expected_action_or_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _reference_rows()
    assert len(rows) == 98, f"the expected actions were written for the 98-line file, not {len(rows)} lines"
    assert set(UITARS_LINES) | set(QWEN_LINES) == {i for i, r in enumerate(rows) if r["family"] != "m3a"}
    tally: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    errors: dict[int, str] = {}
    for i, row in enumerate(rows):
        try:
            parsed = parse_reference(i, row)
        except ParseError as e:
            msg = str(e)
            assert len(msg) > 15 and "\n" not in msg, (i, msg)  # one clear line
            errors[i] = msg
            tally[row["family"]]["error"] += 1
            continue
        assert parsed.actions, i
        if i in EXPECTED_ACTIONS:
            assert [a.to_json() for a in parsed.actions] == EXPECTED_ACTIONS[i], (i, row["text"][-120:])
        tally[row["family"]]["parsed"] += 1
    with capsys.disabled():
        print("\nmodel_outputs.jsonl: " + ", ".join(f"{f} {c['parsed']}/{c['parsed'] + c['error']} parsed"
                                                     for f, c in sorted(tally.items())))
    assert set(errors) == set(EXPECTED_ERRORS), {i: errors.get(i) for i in set(errors) ^ set(EXPECTED_ERRORS)}
    m3a_rows = sum(1 for r in rows if r["family"] == "m3a")
    assert tally["m3a"]["parsed"] >= 0.9 * m3a_rows  # the bar: at least 90 % of the M3A outputs
    # every UI-TARS and Qwen output is either named above with its action or a listed malformed one
    named = {i for i in EXPECTED_ACTIONS if rows[i]["family"] != "m3a"}
    assert named | {i for i in EXPECTED_ERRORS if rows[i]["family"] != "m3a"} == set(UITARS_LINES) | set(QWEN_LINES)


def test_the_notes_on_published_outputs_are_kept():
    """What was repaired in a real output is said (the record's parse_notes)."""
    rows = _reference_rows()
    notes = {i: parse_reference(i, rows[i]).notes for i in (0, 3, 8, 17, 62, 94, 96)}
    assert any("full-width colon" in n for n in notes[0]) and any("used its centre" in n for n in notes[0])
    assert any("special tokens" in n for n in notes[3])
    assert any("took the first of 2 actions" in n for n in notes[8]) and any("<|im_end|>" in n for n in notes[8])
    assert any("used its centre" in n for n in notes[17])
    assert any("a function call where M3A's JSON was asked for" in n for n in notes[62])
    assert any("missing </tool_call>" in n for n in notes[94])
    assert any("took the first of 2 tool calls" in n for n in notes[96])


# --- the command line ------------------------------------------------------------------------------
def _cli(argv: list[str], stdin: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[Any], str]:
    from harness.cli.main import main

    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, [json.loads(line) for line in cap.out.splitlines() if line.strip()], cap.err


def test_cli_parse_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [json.dumps("Thought: tap\nAction: click(start_box='(546,1204)')"),
             json.dumps("nothing useful"),
             "not json at all",
             json.dumps({"text": "Action: finished(content='06:15')"}),
             json.dumps(["a list"])]
    rc, out, err = _cli(["agents", "parse", "--agent", "uitars", "--size", "1080x2400"], "\n".join(lines) + "\n",
                        monkeypatch, capsys)
    assert rc == 0
    assert out[0] == {"type": "click", "x": 540, "y": 1200}
    assert out[1] == {"error": "no 'Action:' line in the output"}
    assert "not JSON" in out[2]["error"]
    assert out[3] == [{"type": "answer", "text": "06:15"}, {"type": "finish", "status": "complete"}]
    assert "expected a JSON string" in out[4]["error"]


def test_a_value_an_action_refuses_is_a_parse_error_not_a_crash(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """An answer over MAX_TEXT is the model's mistake: read_reply (what every agent parses through)
    and `harness agents parse` give the ParseError naming the field, as for any unusable output (a
    pydantic ValidationError ended the episode with 'step N: ValidationError')."""
    from agents.parsing import read_reply
    from harness.core.actions import MAX_TEXT

    long = "a" * (MAX_TEXT + 1)
    parsed, err = read_reply(lambda t: uitars.parse_detailed(t, (1080, 2400)), f"Action: finished(content='{long}')")
    assert parsed is None and isinstance(err, ParseError)
    assert str(err) == f"answer: text: String should have at most {MAX_TEXT} characters"
    parsed, err = read_reply(lambda t: uitars.parse_detailed(t, (1080, 2400)), "Action: finished(content='ok')")
    assert err is None and parsed.actions[0].text == "ok"
    line = json.dumps(f"Action: finished(content='{long}')")
    rc, out, _ = _cli(["agents", "parse", "--agent", "uitars", "--size", "1080x2400"], line + "\n", monkeypatch, capsys)
    assert rc == 0 and out == [{"error": f"answer: text: String should have at most {MAX_TEXT} characters"}]


def test_cli_parse_options_details_and_hierarchy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    q3 = json.dumps('<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [500, 500]}}</tool_call>')
    rc, out, _ = _cli(["agents", "parse", "--agent", "qwen", "--size", "1080x2400", "--opt", "version=3", "--details"],
                      q3 + "\n", monkeypatch, capsys)
    assert rc == 0 and out[0]["actions"] == [{"type": "click", "x": 541, "y": 1201}]
    assert out[0]["raw"]["coordinate_space"] == "grid999"
    xml = tmp_path / "launcher.xml"
    xml.write_text(launcher_xml((1080, 2400)), encoding="utf-8")
    line = json.dumps('Reason: open Settings\nAction: {"action_type": "click", "index": 0}')
    rc, out, _ = _cli(["agents", "parse", "--agent", "m3a", "--size", "1080x2400", "--hierarchy", str(xml)],
                      line + "\n", monkeypatch, capsys)
    assert out == [{"type": "click", "x": 135, "y": 300}]
    rc, out, _ = _cli(["agents", "parse", "--agent", "m3a", "--size", "1080x2400"], line + "\n", monkeypatch, capsys)
    assert out == [{"type": "click", "index": 0, "resolved": False}]  # without the dump: the element action
    rc, out, err = _cli(["agents", "parse", "--agent", "qwen", "--size", "1080x2400", "--opt", "coords=thousand"], "",
                        monkeypatch, capsys)
    assert rc == 2 and "no parse option coords" in err
    rc, out, err = _cli(["agents", "parse", "--agent", "replay", "--size", "1080x2400"], "", monkeypatch, capsys)
    assert rc == 2 and "no output parser for agent 'replay'" in err


def test_cli_parse_reads_openai_messages_and_each_uitars_release(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    msg = {"role": "assistant", "content": "Thought: tap.\nAction: \"I tap it.\"",
           "tool_calls": [{"id": "c1", "type": "function",
                           "function": {"name": "mobile_use", "arguments": '{"action": "click", "coordinate": [500, 500]}'}}]}
    rc, out, _ = _cli(["agents", "parse", "--agent", "qwen", "--size", "1080x2400", "--opt", "version=3"],
                      json.dumps(msg) + "\n" + json.dumps({"tool_calls": "nope"}) + "\n", monkeypatch, capsys)
    assert rc == 0 and out[0] == {"type": "click", "x": 541, "y": 1201} and "tool_calls must be a list" in out[1]["error"]
    line = json.dumps("Action: click(point='<point>500 500</point>')")
    for agent, want in (("doubao", {"type": "click", "x": 540, "y": 1200}),
                        ("uitars-v1", {"type": "click", "x": 540, "y": 1200})):
        rc, out, _ = _cli(["agents", "parse", "--agent", agent, "--size", "1080x2400"], line + "\n", monkeypatch, capsys)
        assert out == [want], agent
    rc, out, _ = _cli(["agents", "parse", "--agent", "uitars", "--size", "1080x2400"], line + "\n", monkeypatch, capsys)
    assert "--agent doubao" in out[0]["error"]  # Doubao's 0-1000 point is not read as 1.5 pixels
    rc, out, err = _cli(["agents", "parse", "--agent", "uitars", "--size", "1080x2400", "--opt", "coords=thousand"], "",
                        monkeypatch, capsys)
    assert rc == 2 and "no parse option coords" in err  # the space follows from the release, not an option


def test_cli_parse_reads_the_reference_file(capsys: pytest.CaptureFixture[str]) -> None:
    """Objects with a "text" field (the reference file's own lines) are accepted too."""
    from harness.cli.main import main

    rows = _reference_rows()
    rc = main(["agents", "parse", "--agent", "m3a", "--size", "1080x2400", str(reference("model_outputs.jsonl"))])
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rc == 0 and len(out) == len(rows)
    m3a_out = [o for o, r in zip(out, rows) if r["family"] == "m3a"]
    ok = [o for o in m3a_out if not (isinstance(o, dict) and "error" in o)]
    assert len(ok) >= 0.9 * len(m3a_out)
    assert out[23] == {"type": "click", "index": 8, "resolved": False}  # the example, printed as is


def test_agents_listing_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.main import main

    assert main(["agents"]) == 0
    text = capsys.readouterr().out
    for name in ("uitars:", "uitars-v1:", "m3a:", "qwen:", "vlm:", "replay:"):
        assert name in text
    assert main(["agents", "--json"]) == 0
    names = {a["name"] for a in json.loads(capsys.readouterr().out)}
    assert {"uitars", "uitars-v1", "m3a", "qwen", "vlm"} <= names
