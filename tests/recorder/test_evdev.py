"""Reading getevent's formats (AOSP toolbox getevent.c: ``-lp`` listings, ``-lt`` and ``-t``
event lines) into devices, the touchscreen, screen pixels and gestures. The fixtures are written in
a phone's format: a Pixel-style touchscreen whose axes are pixels, a touchpad, key devices, and
the event lines of real taps and swipes."""

from __future__ import annotations

import pytest

from harness.core import input_codes as C
from harness.recorder.evdev import (EvdevError, GestureReader, KeyPress, Touch, Touchscreen, classify,
                                    find_touchscreen, parse_devices, parse_event_line)

LISTING = """\
add device 1: /dev/input/event3
  name:     "uinput-fpc"
  events:
    KEY (0001): KEY_WAKEUP            KEY_CAMERA           
  input props:
    <none>
add device 2: /dev/input/event1
  name:     "synaptics_tm2"
  events:
    KEY (0001): BTN_TOOL_FINGER       BTN_TOUCH            
    ABS (0003): ABS_MT_SLOT           : value 0, min 0, max 4, fuzz 0, flat 0, resolution 0
                ABS_MT_POSITION_X     : value 0, min 0, max 3000, fuzz 0, flat 0, resolution 31
                ABS_MT_POSITION_Y     : value 0, min 0, max 2000, fuzz 0, flat 0, resolution 31
                ABS_MT_TRACKING_ID    : value -1, min 0, max 65535, fuzz 0, flat 0, resolution 0
  input props:
    INPUT_PROP_POINTER
add device 3: /dev/input/event2
  name:     "fts_ts"
  events:
    KEY (0001): KEY_WAKEUP            BTN_TOOL_FINGER       BTN_TOUCH             02fe                 
    ABS (0003): ABS_MT_SLOT           : value 0, min 0, max 9, fuzz 0, flat 0, resolution 0
                ABS_MT_TOUCH_MAJOR    : value 0, min 0, max 1079, fuzz 0, flat 0, resolution 0
                ABS_MT_POSITION_X     : value 412, min 0, max 4095, fuzz 0, flat 0, resolution 0
                ABS_MT_POSITION_Y     : value 1733, min 0, max 8191, fuzz 0, flat 0, resolution 0
                ABS_MT_TRACKING_ID    : value -1, min 0, max 65535, fuzz 0, flat 0, resolution 0
                ABS_MT_PRESSURE       : value 0, min 0, max 127, fuzz 0, flat 0, resolution 0
  input props:
    INPUT_PROP_DIRECT
add device 4: /dev/input/event0
  name:     "qpnp_pon"
  events:
    KEY (0001): KEY_VOLUMEDOWN        KEY_POWER*           
  input props:
    <none>
"""

# the same touchscreen listed without -l: codes as hex
NUMERIC = """\
add device 1: /dev/input/event5
  name:     "sec_touchscreen"
  events:
    KEY (0001): 0145  014a 
    ABS (0003): 002f  : value 0, min 0, max 9, fuzz 0, flat 0, resolution 0
                0035  : value 0, min 0, max 1079, fuzz 0, flat 0, resolution 0
                0036  : value 0, min 0, max 2399, fuzz 0, flat 0, resolution 0
                0039  : value -1, min 0, max 65535, fuzz 0, flat 0, resolution 0
  input props:
    INPUT_PROP_DIRECT
"""

TAP = """\
[   51260.164939] /dev/input/event2: EV_ABS       ABS_MT_TRACKING_ID   00000b3c            
[   51260.164939] /dev/input/event2: EV_ABS       ABS_MT_POSITION_X    00000800            
[   51260.164939] /dev/input/event2: EV_ABS       ABS_MT_POSITION_Y    00001000            
[   51260.164939] /dev/input/event2: EV_ABS       ABS_MT_TOUCH_MAJOR   00000006            
[   51260.164939] /dev/input/event2: EV_KEY       BTN_TOUCH            DOWN                
[   51260.164939] /dev/input/event2: EV_SYN       SYN_REPORT           00000000            
[   51260.231235] /dev/input/event2: EV_ABS       ABS_MT_TRACKING_ID   ffffffff            
[   51260.231235] /dev/input/event2: EV_KEY       BTN_TOUCH            UP                  
[   51260.231235] /dev/input/event2: EV_SYN       SYN_REPORT           00000000            
"""


def screen(size=(1080, 2400)) -> Touchscreen:
    return Touchscreen.of(find_touchscreen(parse_devices(LISTING)), size)


def gestures(text: str, ts: Touchscreen | None = None) -> list:
    out: list = []
    reader = GestureReader(ts or screen(), out.append)
    for line in text.splitlines():
        e = parse_event_line(line)
        if e is not None:
            reader.feed(e)
    return out


def test_listing_is_read_and_the_touchscreen_found_by_its_capabilities():
    devs = parse_devices(LISTING)
    assert [d.path for d in devs] == ["/dev/input/event3", "/dev/input/event1", "/dev/input/event2", "/dev/input/event0"]
    pad, ts = devs[1], devs[2]
    assert ts.name == "fts_ts" and C.INPUT_PROP_DIRECT in ts.props and 0x2FE in ts.caps[C.EV_KEY]
    assert ts.axes[C.ABS_MT_POSITION_Y].maximum == 8191 and ts.axes[C.ABS_MT_POSITION_X].value == 412
    assert C.KEY_POWER in devs[3].caps[C.EV_KEY]  # "KEY_POWER*": pressed right now
    assert pad.is_touchscreen is False  # multi-touch, but a pointer device (touchpad) without DIRECT
    assert find_touchscreen(devs) is ts
    numeric = find_touchscreen(parse_devices(NUMERIC))
    assert numeric.path == "/dev/input/event5" and numeric.axes[C.ABS_MT_POSITION_X].maximum == 1079


def test_no_touchscreen_is_an_error_naming_the_devices():
    pad_and_keys = LISTING.split("add device 3")[0]  # fpc keys and the touchpad
    with pytest.raises(EvdevError, match=r"no touchscreen.*uinput-fpc.*synaptics_tm2"):
        find_touchscreen(parse_devices(pad_and_keys))


def test_axes_scale_to_the_screen_both_ways():
    ts = screen()
    # TouchInputMapper: (raw - min) * size / (max - min + 1)
    assert ts.to_pixels(2048, 4096) == (540, 1200)
    assert ts.to_pixels(4095, 8191) == (1079, 2399)
    for x, y in [(0, 0), (1, 1), (540, 1200), (1079, 2399), (333, 2077)]:
        assert ts.to_pixels(*ts.to_raw(x, y)) == (x, y)


def test_event_lines_labelled_and_numeric():
    e = parse_event_line("[   51260.231235] /dev/input/event2: EV_ABS       ABS_MT_TRACKING_ID   ffffffff            \r")
    assert (e.time, e.device, e.type, e.code, e.value) == (51260.231235, "/dev/input/event2", C.EV_ABS,
                                                           C.ABS_MT_TRACKING_ID, -1)
    e = parse_event_line("[    1234.000100] 0001 014a 00000001")
    assert (e.device, e.type, e.code, e.value, e.time) == ("", C.EV_KEY, C.BTN_TOUCH, 1, 1234.0001)
    assert parse_event_line("add device 1: /dev/input/event2") is None
    assert parse_event_line('  name:     "fts_ts"') is None


def test_a_tap_in_raw_units_becomes_a_tap_in_pixels():
    [g] = gestures(TAP)
    assert isinstance(g, Touch) and g.points == [(540, 1200)] and g.duration_ms == 66
    assert classify(g, slop_px=21, long_press_ms=400) == "tap"


def test_long_press_swipe_two_fingers_and_keys():
    lines = []
    t = 100.0

    def ev(dt, dev, kind, code, value):
        nonlocal t
        t += dt
        lines.append(f"[{int(t):8d}.{round((t - int(t)) * 1e6):06d}] {dev}: {kind:<12} {code:<20} {value}")

    ts = "/dev/input/event2"
    ev(0, ts, "EV_ABS", "ABS_MT_TRACKING_ID", "00000001"); ev(0, ts, "EV_ABS", "ABS_MT_POSITION_X", "00000100")
    ev(0, ts, "EV_ABS", "ABS_MT_POSITION_Y", "00000200"); ev(0, ts, "EV_SYN", "SYN_REPORT", "00000000")
    ev(0.8, ts, "EV_ABS", "ABS_MT_TRACKING_ID", "ffffffff"); ev(0, ts, "EV_SYN", "SYN_REPORT", "00000000")
    # a swipe up: down, three moves, up
    ev(0.5, ts, "EV_ABS", "ABS_MT_TRACKING_ID", "00000002"); ev(0, ts, "EV_ABS", "ABS_MT_POSITION_Y", "00001800")
    ev(0, ts, "EV_SYN", "SYN_REPORT", "00000000")
    for y in ("00001400", "00001000", "00000c00"):
        ev(0.02, ts, "EV_ABS", "ABS_MT_POSITION_Y", y); ev(0, ts, "EV_SYN", "SYN_REPORT", "00000000")
    ev(0.02, ts, "EV_ABS", "ABS_MT_TRACKING_ID", "ffffffff"); ev(0, ts, "EV_SYN", "SYN_REPORT", "00000000")
    # two fingers: slot 0 then slot 1
    ev(0.5, ts, "EV_ABS", "ABS_MT_TRACKING_ID", "00000003"); ev(0, ts, "EV_SYN", "SYN_REPORT", "00000000")
    ev(0.01, ts, "EV_ABS", "ABS_MT_SLOT", "00000001"); ev(0, ts, "EV_ABS", "ABS_MT_TRACKING_ID", "00000004")
    ev(0, ts, "EV_ABS", "ABS_MT_POSITION_X", "00000900"); ev(0, ts, "EV_SYN", "SYN_REPORT", "00000000")
    ev(0.1, ts, "EV_ABS", "ABS_MT_TRACKING_ID", "ffffffff"); ev(0, ts, "EV_ABS", "ABS_MT_SLOT", "00000000")
    ev(0, ts, "EV_ABS", "ABS_MT_TRACKING_ID", "ffffffff"); ev(0, ts, "EV_SYN", "SYN_REPORT", "00000000")
    # a hardware Back key on another device
    ev(0.5, "/dev/input/event4", "EV_KEY", "KEY_BACK", "DOWN"); ev(0, "/dev/input/event4", "EV_SYN", "SYN_REPORT", "00000000")
    ev(0.1, "/dev/input/event4", "EV_KEY", "KEY_BACK", "UP"); ev(0, "/dev/input/event4", "EV_SYN", "SYN_REPORT", "00000000")
    press, swipe, two, key = gestures("\n".join(lines))
    assert classify(press, 21, 400) == "long_press" and press.duration_ms == 800 and press.points == [(67, 150)]
    assert classify(swipe, 21, 400) == "swipe"
    assert swipe.points[0] == (67, 1800) and swipe.points[-1] == (67, 900) and len(swipe.points) == 4
    assert two.contacts == 2 and classify(two, 21, 400) == "multi"
    assert isinstance(key, KeyPress) and key.code == C.KEY_BACK and key.name == "KEY_BACK"


def test_a_touch_where_the_last_one_lifted_has_no_position_events():
    """The kernel reports only changes, and a slot's position is not what getevent -p lists (the
    listing's MT values are absinfo, which the input core never updates for a slotted device: its
    values live in the slots, drivers/input/input.c input_handle_abs_event): a touch with no position
    events is not placed at the listed 412, 1733 but read as unplaced, with a warning; once the slot
    reported a position, a touch there without position events is read where the slot says."""
    lines = [line for line in TAP.splitlines() if "POSITION" not in line]
    warned: list[str] = []
    out: list = []
    reader = GestureReader(screen(), out.append, on_warning=warned.append)
    reader.feed_all(filter(None, map(parse_event_line, lines)))
    [g] = out
    assert g.points == [] and g.unplaced is True and "could not be placed" in warned[0]
    reader.feed_all(filter(None, map(parse_event_line, TAP.splitlines())))  # now it reports one
    reader.feed_all(filter(None, map(parse_event_line, lines)))              # and the next one does not
    assert [t.points for t in out[1:]] == [[screen().to_pixels(0x800, 0x1000)]] * 2 and len(warned) == 1
