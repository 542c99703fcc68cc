"""Tests for harness.core.actions: the unified action space, parsing, and coordinate conversions."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from harness.core.actions import (
                                  ACTION_TYPES,
                                  MAX_COORD,
                                  MAX_KEYCODE,
                                  NeedsUser,
                                  MAX_TEXT,
                                  ActionError,
                                  Answer,
                                  Click,
                                  CoordSpace,
                                  DoubleTap,
                                  Finish,
                                  Key,
                                  LongPress,
                                  OpenApp,
                                  Swipe,
                                  TypeText,
                                  Wait,
                                  action_to_json,
                                  check_on_screen,
                                  from_device,
                                  is_terminal,
                                  parse_action,
                                  to_device,
                                  )

SCREEN = (1080, 2400)

# One valid JSON example per action type, with the class it must become.
EXAMPLES = [
    ({"type": "click", "x": 540, "y": 1200}, Click),
    ({"type": "long_press", "x": 540, "y": 1200, "duration_ms": 1500}, LongPress),
    ({"type": "double_tap", "x": 540, "y": 1200}, DoubleTap),
    ({"type": "swipe", "start": [540, 1800], "end": [540, 600], "duration_ms": 300}, Swipe),
    ({"type": "type", "text": "hello 你好", "submit": True}, TypeText),
    ({"type": "key", "key": "back"}, Key),
    ({"type": "open_app", "app": "Settings"}, OpenApp),
    ({"type": "wait", "seconds": 2.5}, Wait),
    ({"type": "answer", "text": "42"}, Answer),
    ({"type": "finish", "status": "infeasible"}, Finish),
    ({"type": "needs_user", "text": "Please enter the card PIN"}, NeedsUser),
]


# --- parsing -------------------------------------------------------------------------------------
@pytest.mark.parametrize("data,cls", EXAMPLES, ids=[e[0]["type"] for e in EXAMPLES])
def test_parse_each_type_and_round_trip(data, cls):
    a = parse_action(data)
    assert isinstance(a, cls)
    j = action_to_json(a)
    assert j == a.to_json()
    assert j["type"] == data["type"]
    # JSON-serialisable and parses back to an equal action
    assert parse_action(json.loads(json.dumps(j))) == a


def test_examples_cover_every_action_type():
    assert sorted(e[0]["type"] for e in EXAMPLES) == sorted(ACTION_TYPES)


def test_defaults():
    assert parse_action({"type": "long_press", "x": 1, "y": 2}).duration_ms == 1000
    assert parse_action({"type": "swipe", "start": [0, 0], "end": [1, 1]}).duration_ms == 300
    assert parse_action({"type": "type", "text": "a"}).submit is False
    assert parse_action({"type": "wait"}).seconds == 1.0
    assert parse_action({"type": "finish"}).status == "complete"


def test_swipe_points_are_tuples_and_serialise_as_lists():
    s = parse_action({"type": "swipe", "start": [10, 20], "end": [30, 40]})
    assert s.start == (10, 20) and s.end == (30, 40)
    assert s.to_json()["start"] == [10, 20]


@pytest.mark.parametrize("bad", [None, [], "click", 5])
def test_non_object_is_refused(bad):
    with pytest.raises(ActionError, match="JSON object"):
        parse_action(bad)


@pytest.mark.parametrize("kind", [None, "tap", "CLICK", ""])
def test_unknown_type_is_refused_naming_type(kind):
    data = {"x": 1, "y": 2} if kind is None else {"type": kind, "x": 1, "y": 2}
    with pytest.raises(ActionError) as ei:
        parse_action(data)
    assert str(ei.value).startswith("type:")
    assert "click" in str(ei.value)  # lists what is allowed


@pytest.mark.parametrize(
    "data,field",
    [
        ({"type": "click", "x": 1}, "y"),
        ({"type": "click", "x": -1, "y": 2}, "x"),
        ({"type": "click", "x": MAX_COORD + 1, "y": 2}, "x"),
        ({"type": "click", "x": 1.5, "y": 2}, "x"),
        ({"type": "click", "x": 1, "y": 2, "z": 3}, "z"),
        ({"type": "long_press", "x": 1, "y": 2, "duration_ms": 0}, "duration_ms"),
        ({"type": "long_press", "x": 1, "y": 2, "duration_ms": 60_001}, "duration_ms"),
        ({"type": "swipe", "start": [1, 2, 3], "end": [1, 2]}, "start"),
        ({"type": "swipe", "start": [1, 2]}, "end"),
        ({"type": "type", "text": "x" * (MAX_TEXT + 1)}, "text"),
        ({"type": "type"}, "text"),
        ({"type": "key", "key": "volume_up"}, "key"),
        ({"type": "key", "key": MAX_KEYCODE + 1}, "key"),
        ({"type": "key", "key": -1}, "key"),
        ({"type": "open_app", "app": ""}, "app"),
        ({"type": "wait", "seconds": 61}, "seconds"),
        ({"type": "wait", "seconds": -0.5}, "seconds"),
        ({"type": "finish", "status": "done"}, "status"),
        ({"type": "answer"}, "text"),
    ],
)
def test_bad_field_is_named(data, field):
    with pytest.raises(ActionError) as ei:
        parse_action(data)
    msg = str(ei.value)
    assert msg.startswith(data["type"] + ":")
    assert field in msg


def test_coordinate_bounds_are_inclusive():
    assert parse_action({"type": "click", "x": 0, "y": MAX_COORD}).y == MAX_COORD


@pytest.mark.parametrize(
    "given,expected",
    [
        ("back", "back"),
        ("BACK", "back"),
        (" Home ", "home"),
        ("KEYCODE_ENTER", "enter"),
        ("keycode_del", "delete"),
        ("backspace", "delete"),
        ("return", "enter"),
        ("recent", "app_switch"),
        ("recents", "app_switch"),
        ("app_switch", "app_switch"),
        ("66", 66),
        ("KEYCODE_4", 4),
        (24, 24),
    ],
)
def test_key_normalisation(given, expected):
    assert parse_action({"type": "key", "key": given}).key == expected


def test_boolean_is_not_a_keycode_or_coordinate():
    with pytest.raises(ActionError):
        parse_action({"type": "key", "key": True})
    with pytest.raises(ActionError):
        parse_action({"type": "click", "x": True, "y": 5})


def test_actions_are_frozen_and_hashable():
    c = Click(x=1, y=2)
    with pytest.raises(ValidationError):
        c.x = 5  # type: ignore[misc]
    assert hash(c) == hash(Click(x=1, y=2))


def test_describe_mentions_kind_and_values():
    d = Click(x=540, y=1200).describe()
    assert d.startswith("click(") and "540" in d and "1200" in d
    assert "type" not in d
    assert TypeText(text="hi").describe().startswith("type(")


def test_is_terminal_only_for_finish():
    assert is_terminal(Finish())
    assert is_terminal(Finish(status="infeasible"))
    for data, cls in EXAMPLES:
        if cls is not Finish:
            assert not is_terminal(parse_action(data))


# --- on screen -----------------------------------------------------------------------------------
def test_check_on_screen_accepts_inside_points_and_edges():
    check_on_screen(Click(x=0, y=0), *SCREEN)
    check_on_screen(Click(x=1079, y=2399), *SCREEN)
    check_on_screen(Swipe(start=(0, 2399), end=(1079, 0)), *SCREEN)
    # actions without points are always fine
    check_on_screen(Key(key="back"), 1, 1)
    check_on_screen(TypeText(text="x"), 1, 1)


@pytest.mark.parametrize(
    "action",
    [
        Click(x=1080, y=5),
        Click(x=5, y=2400),
        LongPress(x=2000, y=5),
        Swipe(start=(10, 10), end=(10, 2400)),
        Swipe(start=(1080, 10), end=(10, 10)),
    ],
)
def test_check_on_screen_refuses_outside_points(action):
    with pytest.raises(ActionError) as ei:
        check_on_screen(action, *SCREEN)
    assert "1080x2400" in str(ei.value)
    assert str(ei.value).startswith(action.type)


# --- coordinate spaces ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "space,x,y,expected",
    [
        ("pixels", 540, 1200, (540, 1200)),
        ("unit", 0.5, 0.5, (540, 1200)),
        ("unit", 0.0, 0.0, (0, 0)),
        ("unit", 1.0, 1.0, (1079, 2399)),  # the far edge is the last pixel, not one past it
        ("thousand", 500, 500, (540, 1200)),
        ("thousand", 1000, 1000, (1079, 2399)),
        ("thousand", 250, 100, (270, 240)),
        ("grid999", 999, 999, (1079, 2399)),
        ("grid999", 0, 0, (0, 0)),
        (CoordSpace.THOUSAND, 500, 0, (540, 0)),
    ],
)
def test_to_device(space, x, y, expected):
    assert to_device(x, y, space, SCREEN) == expected


def test_to_device_clamps_out_of_range():
    assert to_device(-50, 5000, "pixels", SCREEN) == (0, 2399)
    assert to_device(1.7, -0.2, "unit", SCREEN) == (1079, 0)
    assert to_device(1200, 1200, "thousand", SCREEN) == (1079, 2399)


def test_to_device_resized():
    # a 540x1200 resized image of a 1080x2400 screen: pixel (270, 600) is the centre
    assert to_device(270, 600, "resized", SCREEN, resized=(540, 1200)) == (540, 1200)
    assert to_device(539, 1199, "resized", SCREEN, resized=(540, 1200)) == (1078, 2398)
    with pytest.raises(ActionError, match="resized"):
        to_device(1, 1, "resized", SCREEN)
    with pytest.raises(ActionError, match="resized"):
        from_device(1, 1, "resized", SCREEN)


def test_unknown_space_is_refused():
    with pytest.raises(ValueError):
        to_device(1, 1, "percent", SCREEN)


def test_to_device_returns_ints():
    x, y = to_device(0.33333, 0.66666, "unit", SCREEN)
    assert type(x) is int and type(y) is int


@pytest.mark.parametrize("space", ["pixels", "unit", "thousand", "grid999", "resized"])
@pytest.mark.parametrize("point", [(0, 0), (1, 1), (540, 1200), (1079, 2399), (333, 1777), (1000, 7)])
def test_from_device_inverts_to_device(space, point):
    resized = (812, 1804) if space == "resized" else None
    fx, fy = from_device(*point, space, SCREEN, resized=resized)
    assert to_device(fx, fy, space, SCREEN, resized=resized) == point


def test_from_device_values():
    assert from_device(540, 1200, "unit", SCREEN) == (0.5, 0.5)
    assert from_device(540, 1200, "thousand", SCREEN) == (500.0, 500.0)
    assert from_device(1080, 2400, "grid999", SCREEN) == (999.0, 999.0)
    assert from_device(540, 1200, "pixels", SCREEN) == (540.0, 1200.0)
    assert from_device(540, 1200, "resized", SCREEN, resized=(100, 200)) == (50.0, 100.0)
