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
from agents.parsing import PARSERS, ParseError, Parsed
from harness.actions import CoordSpace, action_to_json, check_on_screen, from_device
from harness.hierarchy import Element
from harness.sim.phone import SimPhone

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "outputs.jsonl").read_text("utf-8").splitlines()
            if line.strip()]
REFERENCE = ROOT.parent / "shared" / "reference" / "model_outputs.jsonl"

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
    return PARSERS[case["agent"]].parse(case["text"], size, **opts)


def test_fixture_file_covers_every_protocol_and_shape() -> None:
    by_agent = collections.Counter(c["agent"] for c in FIXTURES)
    assert set(by_agent) == {"uitars", "uitars-v1", "qwen", "m3a", "vlm"}
    shapes = " ".join(c["shape"] for c in FIXTURES)
    for shape in ("missing Action line", "beyond", "box instead of a point", "Chinese app name",
                  "escaped quotes in type content", "two actions", "<|box_start|>", "full-width", "<think>",
                  "missing </tool_call>", "truncated", "fractions"):
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
    assert [action_to_json(a) for a in parsed.actions] == case["expect"]
    for a in parsed.actions:
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

    def tc(p: tuple[float, float]) -> str:
        return ('<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [%d, %d]}}'
                '</tool_call>' % r(p))

    return [
        ("uitars", ur, lambda x, y: (uitars.parse_output, tars(from_device(x, y, CoordSpace.RESIZED, size, ur)), {})),
        ("uitars-v1", (1000, 1000), lambda x, y: (uitars.parse_output, tars(from_device(x, y, CoordSpace.THOUSAND, size)),
                                          {"coords": "thousand"})),
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
def _grid_elements(n: int = 60) -> list[Element]:
    """A stand-in element list for index-based outputs (their real screens are not published)."""
    out = []
    for i in range(n):
        x, y = (i % 6) * 180, 100 + (i // 6) * 200
        out.append(Element(index=i, text=f"e{i}", desc="", rid="", cls="android.widget.TextView", package="p",
                           bounds=(x, y, x + 180, y + 200), clickable=True, long_clickable=False, scrollable=False,
                           checkable=False, checked=False, focused=False, enabled=True, selected=False, depth=1))
    return out


def parse_reference(row: dict[str, Any]) -> Parsed:
    size = (1080, 2400)
    fam, notes = row["family"], row.get("notes", "")
    if fam == "uitars":  # v1 and Doubao use 0-1000; UI-TARS-1.5 resized pixels (the notes say which)
        coords = "thousand" if re.search(r"\bv1\b|doubao|0-1000", notes, re.I) else "resized"
        return uitars.parse_detailed(row["text"], size, coords=coords)
    if fam == "qwen_mobile_use":
        return qwen.parse_detailed(row["text"], size, version="3" if "Qwen3" in notes else "2.5")
    if fam == "m3a":
        return m3a.parse_detailed(row["text"], size, elements=_grid_elements())
    raise AssertionError(f"unknown family {fam}")


# The lines that are expected to be refused, with why (line numbers, 0-based, in the 98-line file).
EXPECTED_ERRORS = {
    1: "start_box='=' holds no coordinates",
    7: "a bare <bbox> fragment, no action at all",
    9: "desktop pixels beyond a phone's resized width",
    16: "desktop pixels beyond a phone's resized width",
    18: "desktop pixels beyond the 0-1000 grid",
    20: "prose, no tool call",
    21: "prose with a coordinate in text, no tool call",
    34: "placeholder N instead of an index",
    35: "placeholder N instead of an index",
    46: "double_tap is outside the phone action space",
    61: "UI-TARS call (without arguments) instead of M3A JSON",
    62: "UI-TARS call instead of M3A JSON",
    63: "UI-TARS call instead of M3A JSON",
    69: "0-1 fractions where 0-1000 is expected",
}


def _reference_rows() -> list[dict[str, Any]]:
    if not REFERENCE.is_file():
        pytest.skip(f"{REFERENCE} is not present (the shared reference outputs live next to the repo)")
    return [json.loads(line) for line in REFERENCE.read_text("utf-8").splitlines() if line.strip()]


def test_every_published_output_gives_an_action_or_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _reference_rows()
    tally: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    errors: dict[int, str] = {}
    for i, row in enumerate(rows):
        try:
            parsed = parse_reference(row)
        except ParseError as e:
            msg = str(e)
            assert len(msg) > 15 and "\n" not in msg, (i, msg)  # one clear line
            errors[i] = msg
            tally[row["family"]]["error"] += 1
            continue
        assert parsed.actions, i
        for a in parsed.actions:
            check_on_screen(a, 1080, 2400)
        tally[row["family"]]["parsed"] += 1
    with capsys.disabled():
        print("\nmodel_outputs.jsonl: " + ", ".join(f"{f} {c['parsed']} parsed / {c['error']} clear errors"
                                                     for f, c in sorted(tally.items())))
    if len(rows) != 98:
        pytest.skip(f"the reference file has {len(rows)} lines, not the 98 the expected-error list was made for")
    assert set(errors) == set(EXPECTED_ERRORS), {i: errors.get(i) for i in set(errors) ^ set(EXPECTED_ERRORS)}


# --- the command line ------------------------------------------------------------------------------
def _cli(argv: list[str], stdin: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[Any], str]:
    from harness.cli import main

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
    assert "needs the screen's element list" in out[0]["error"]
    rc, out, err = _cli(["agents", "parse", "--agent", "qwen", "--size", "1080x2400", "--opt", "coords=thousand"], "",
                        monkeypatch, capsys)
    assert rc == 2 and "no parse option coords" in err
    rc, out, err = _cli(["agents", "parse", "--agent", "replay", "--size", "1080x2400"], "", monkeypatch, capsys)
    assert rc == 2 and "no output parser for agent 'replay'" in err


def test_cli_parse_reads_the_reference_file(capsys: pytest.CaptureFixture[str]) -> None:
    """Objects with a "text" field (the reference file's own lines) are accepted too."""
    from harness.cli import main

    if not REFERENCE.is_file():
        pytest.skip(f"{REFERENCE} is not present")
    rc = main(["agents", "parse", "--agent", "m3a", "--size", "1080x2400", str(REFERENCE)])
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rc == 0 and len(out) == len(_reference_rows())
    assert sum(isinstance(o, dict) and "error" in o for o in out) < len(out)


def test_agents_listing_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    assert main(["agents"]) == 0
    text = capsys.readouterr().out
    for name in ("uitars:", "uitars-v1:", "m3a:", "qwen:", "vlm:", "replay:"):
        assert name in text
    assert main(["agents", "--json"]) == 0
    names = {a["name"] for a in json.loads(capsys.readouterr().out)}
    assert {"uitars", "uitars-v1", "m3a", "qwen", "vlm"} <= names
