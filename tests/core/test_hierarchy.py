"""Tests for harness.core.hierarchy: parsing uiautomator dumps, selectors, and aiming reference steps."""

from __future__ import annotations

import pytest

from harness.core.actions import Click, DoubleTap, LongPress, OpenApp, Swipe, check_on_screen
from harness.core.hierarchy import Element, HierarchyError, find, matches, parse, resolve_step
from harness.core.tasks import RefStep, Selector

SCREEN = (1080, 2400)

XML = """<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>
<hierarchy rotation="0">
  <node index="0" text="" resource-id="" class="android.widget.FrameLayout" package="com.android.settings"
        content-desc="" clickable="false" bounds="[0,0][1080,2400]">
    <node index="0" text="Network &amp; internet" resource-id="com.android.settings:id/title"
          class="android.widget.TextView" package="com.android.settings" content-desc="" clickable="true"
          long-clickable="true" bounds="[0,200][1080,400]" />
    <node index="1" text="Wi-Fi" resource-id="com.android.settings:id/title" class="android.widget.TextView"
          package="com.android.settings" content-desc="" clickable="true" bounds="[0,400][1080,600]">
      <node index="0" text="" resource-id="com.android.settings:id/wifi_switch" class="android.widget.Switch"
            package="com.android.settings" content-desc="Wi-Fi switch" checkable="true" checked="true"
            clickable="true" bounds="[900,450][1040,550]" />
    </node>
    <node index="2" text="Bluetooth" resource-id="com.android.settings:id/title" class="android.widget.TextView"
          package="com.android.settings" content-desc="" clickable="true" focused="true" selected="true"
          bounds="[0,600][1080,800]" />
    <node index="3" text="Zero" resource-id="" class="android.view.View" package="com.android.settings"
          bounds="[10,10][10,50]" />
    <node index="4" text="Broken" resource-id="" class="android.view.View" package="com.android.settings"
          bounds="[1,2][3]" />
    <node index="5" text="" resource-id="com.android.settings:id/list" class="androidx.recyclerview.widget.RecyclerView"
          package="com.android.settings" scrollable="true" enabled="false" bounds="[0,800][1080,2200]" />
    <node index="6" text="设置" resource-id="" class="android.widget.TextView" package="com.android.settings"
          content-desc="Settings" bounds="[100,2250][300,2350]" />
  </node>
</hierarchy>
"""


@pytest.fixture(scope="module")
def els() -> list[Element]:
    return parse(XML)


def sel(**kw) -> Selector:
    if "cls" in kw:
        kw["class"] = kw.pop("cls")
    return Selector.model_validate(kw)


def step(d) -> RefStep:
    return RefStep.model_validate(d)


# --- parse ---------------------------------------------------------------------------------------
def test_parse_reads_nodes_in_document_order(els):
    labels = [e.label for e in els]
    # the node with malformed bounds is skipped; the zero-size node is kept (it simply never matches)
    assert labels == ["", "Network & internet", "Wi-Fi", "Wi-Fi switch", "Bluetooth", "Zero", "", "设置"]
    assert [e.index for e in els] == list(range(len(els)))


def test_parse_attributes(els):
    root, net, wifi, switch, bt = els[:5]
    assert root.depth == 1 and net.depth == 2 and switch.depth == 3
    assert net.text == "Network & internet"  # entities decoded
    assert net.bounds == (0, 200, 1080, 400) and net.center == (540, 300) and net.area == 1080 * 200
    assert net.clickable and net.long_clickable and not net.scrollable
    assert switch.checkable and switch.checked and switch.desc == "Wi-Fi switch"
    assert switch.rid == "com.android.settings:id/wifi_switch" and switch.short_rid == "wifi_switch"
    assert bt.focused and bt.selected and not bt.checked
    assert root.enabled  # enabled defaults to true when absent
    lst = els[6]
    assert lst.scrollable and not lst.enabled
    assert root.short_rid == ""
    assert els[7].label == "设置" and els[7].desc == "Settings"
    assert els[5].area == 0


def test_parse_label_prefers_text_over_desc(els):
    assert els[7].label == "设置"
    assert els[3].label == "Wi-Fi switch"


def test_parse_negative_bounds_and_empty_hierarchy():
    out = parse('<hierarchy><node text="a" bounds="[-10,-20][30,40]"/></hierarchy>')
    assert out[0].bounds == (-10, -20, 30, 40) and out[0].center == (10, 10)
    assert parse("<hierarchy/>") == []
    assert parse('<hierarchy><node text="no bounds"/></hierarchy>') == []


@pytest.mark.parametrize("bad", ["", "not xml", "<hierarchy><node></hierarchy>", "<a>&undefined;</a>"])
def test_parse_invalid_xml_raises_hierarchy_error(bad):
    with pytest.raises(HierarchyError, match="not valid XML"):
        parse(bad)


# --- selectors -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw,label",
    [
        ({"text": "Wi-Fi"}, "Wi-Fi"),
        ({"text_contains": "internet"}, "Network & internet"),
        ({"desc": "Wi-Fi switch"}, "Wi-Fi switch"),
        ({"rid": "wifi_switch"}, "Wi-Fi switch"),
        ({"rid": "com.android.settings:id/wifi_switch"}, "Wi-Fi switch"),
        ({"cls": "Switch"}, "Wi-Fi switch"),
        ({"cls": "android.widget.Switch"}, "Wi-Fi switch"),
        ({"rid": "title"}, "Network & internet"),  # the first match in document order
        ({"rid": "title", "index": 1}, "Wi-Fi"),
        ({"rid": "title", "index": 2}, "Bluetooth"),
        ({"rid": "title", "text": "Bluetooth"}, "Bluetooth"),  # all given fields must match
        ({"desc": "Settings"}, "设置"),
        ({"text": "设置"}, "设置"),
    ],
)
def test_find(els, kw, label):
    found = find(els, sel(**kw))
    assert found is not None and found.label == label


@pytest.mark.parametrize(
    "kw",
    [
        {"text": "wi-fi"},  # exact, case-sensitive
        {"text": "Wi"},
        {"text_contains": "Internet"},
        {"rid": "switch"},
        {"cls": "widget.Switch"},
        {"rid": "title", "index": 3},
        {"rid": "title", "text": "Nope"},
        {"text": "Zero"},  # zero-area nodes never match
        {"text": "Broken"},  # skipped node
    ],
)
def test_find_none(els, kw):
    assert find(els, sel(**kw)) is None


def test_matches_requires_all_fields(els):
    wifi = els[2]
    assert matches(wifi, sel(text="Wi-Fi", rid="title", cls="TextView"))
    assert not matches(wifi, sel(text="Wi-Fi", rid="title", cls="Switch"))


# --- resolve_step --------------------------------------------------------------------------------
def test_concrete_step_needs_no_hierarchy():
    assert resolve_step(step({"type": "open_app", "app": "Settings"}), [], SCREEN) == OpenApp(app="Settings")
    assert resolve_step(step({"type": "click", "x": 3, "y": 4}), [], SCREEN) == Click(x=3, y=4)


def test_targeted_click_and_long_press_hit_the_centre(els):
    assert resolve_step(step({"type": "click", "target": {"text": "Wi-Fi"}}), els, SCREEN) == Click(x=540, y=500)
    assert resolve_step(step({"type": "click", "target": {"rid": "wifi_switch"}}), els, SCREEN) == Click(x=970, y=500)
    lp = resolve_step(step({"type": "long_press", "target": {"text": "Bluetooth"}}), els, SCREEN)
    assert lp == LongPress(x=540, y=700, duration_ms=1000)
    lp = resolve_step(step({"type": "long_press", "target": {"text": "Bluetooth"}, "duration_ms": 2500}), els, SCREEN)
    assert lp.duration_ms == 2500
    assert resolve_step(step({"type": "double_tap", "target": {"text": "Wi-Fi"}}), els, SCREEN) == DoubleTap(x=540, y=500)


@pytest.mark.parametrize(
    "direction,distance,end",
    [
        # list bounds [0,800][1080,2200]: centre (540, 1500), height 1400, width 1080
        ("up", 0.5, (540, 800)),
        ("down", 0.25, (540, 1850)),
        ("left", 0.5, (0, 1500)),
        ("right", 0.25, (810, 1500)),
        ("up", 1500 / 1400, (540, 0)),  # to the first row exactly
    ],
)
def test_targeted_swipe(els, direction, distance, end):
    s = resolve_step(step({"type": "swipe", "target": {"rid": "list"}, "direction": direction, "distance": distance}),
                     els, SCREEN)
    assert isinstance(s, Swipe)
    assert s.start == (540, 1500)
    assert s.end == end
    assert s.duration_ms == 400
    check_on_screen(s, *SCREEN)


def test_targeted_swipe_default_distance_and_duration(els):
    s = resolve_step(step({"type": "swipe", "target": {"text": "Wi-Fi"}, "direction": "up", "duration_ms": 900}),
                     els, SCREEN)
    assert s.start == (540, 500) and s.end == (540, 400)  # half the node's 200 px height
    assert s.duration_ms == 900


@pytest.mark.parametrize("direction,distance,screen,end", [
    ("up", 3.0, SCREEN, "(540, -2700)"),
    ("down", 3.0, SCREEN, "(540, 5700)"),
    ("left", 3.0, SCREEN, "(-2700, 1500)"),
    ("right", 1.0, SCREEN, "(1620, 1500)"),
    ("down", 0.5, (720, 1600), "(540, 2200)"),  # fits 2400 rows, not 1600
])
def test_swipe_that_would_leave_the_screen_is_refused_not_clamped(els, direction, distance, screen, end):
    """A clamped swipe moves a list or a wheel by less than the reference says: refuse it, naming
    where it would end and the longest swipe that fits."""
    with pytest.raises(HierarchyError) as ei:
        resolve_step(step({"type": "swipe", "target": {"rid": "list"}, "direction": direction, "distance": distance}),
                     els, screen)
    msg = str(ei.value)
    assert f"would end at {end}, off the {screen[0]}x{screen[1]} screen" in msg
    assert "split it into swipes of at most distance" in msg


def test_missing_target_raises_naming_the_selector(els):
    with pytest.raises(HierarchyError) as ei:
        resolve_step(step({"type": "click", "target": {"text": "Airplane mode"}}), els, SCREEN)
    assert "Airplane mode" in str(ei.value)
    with pytest.raises(HierarchyError):
        resolve_step(step({"type": "click", "target": {"text": "Wi-Fi"}}), [], SCREEN)
