"""The simulated phone's kernel input side over real adb: ``getevent`` lists its devices and
streams what ``sendevent`` writes to its touchscreen, the touches act on the phone, the input
core drops what did not change, and ``input tap`` (InputManager, above the kernel) never shows in
getevent. Also its keyboard: capitals, symbols, and Chinese through pinyin and the candidate strip."""

from __future__ import annotations

import adbutils
import pytest

from harness.core import hierarchy
from harness.core import input_codes as C
from harness.recorder.evdev import EvdevError, Touchscreen, find_touchscreen, parse_devices, parse_event_line
from harness.sim.phone import SimPhone
from harness.sim.phone_api import DeviceInfo

TS = "/dev/input/event2"


def adb_device(served) -> adbutils.AdbDevice:
    return adbutils.AdbClient(host="127.0.0.1", port=served.adb.port).device(served.serial)


def sh(served, cmd: str) -> str:
    return served.device().shell(["sh", "-c", cmd])


class Stream:
    """``getevent -lt`` over adb, read line by line."""

    def __init__(self, served, n_devices: int = 3):
        self.conn = adb_device(served).shell("getevent -lt", stream=True)
        self.conn.conn.settimeout(20)
        self.buf = b""
        headers = [self.line() for _ in range(2 * n_devices)]  # "add device N" and its name
        assert sum(h.startswith("add device") for h in headers) == n_devices

    def line(self) -> str:
        while b"\n" not in self.buf:
            chunk = self.conn.conn.recv(4096)
            assert chunk, "the getevent stream ended"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode().rstrip("\r")

    def events(self, n: int) -> list:
        return [parse_event_line(self.line()) for _ in range(n)]

    def close(self) -> None:
        self.conn.close()


def touch(x: int, y: int, tracking: int = 7) -> str:
    return " && ".join(f"sendevent {TS} {t} {c} {v}" for t, c, v in [
        (3, C.ABS_MT_TRACKING_ID, tracking), (3, C.ABS_MT_POSITION_X, x), (3, C.ABS_MT_POSITION_Y, y),
        (1, C.BTN_TOUCH, 1), (0, 0, 0)])


LIFT = " && ".join(f"sendevent {TS} {t} {c} {v}" for t, c, v in [(3, C.ABS_MT_TRACKING_ID, -1), (1, C.BTN_TOUCH, 0), (0, 0, 0)])


def test_getevent_lists_devices_and_the_touchscreen_is_found_by_capabilities(serve_sim):
    served = serve_sim(1080, 2400)
    devices = parse_devices(sh(served, "getevent -lp"))
    assert [d.name for d in devices] == ["gpio-keys", "accelerometer", "crate_touchscreen"]
    ts = find_touchscreen(devices)
    assert ts.path == TS and C.INPUT_PROP_DIRECT in ts.props
    screen = Touchscreen.of(ts, (1080, 2400))
    assert (screen.x.maximum, screen.y.maximum) == (4095, 4095)  # not pixels: the recorder must scale
    bare = serve_sim(1080, 2400, info=DeviceInfo(touchscreen=False))
    listing = sh(bare, "getevent -lp")
    assert "crate_touchscreen" not in listing and "accelerometer" in listing
    with pytest.raises(EvdevError, match="no touchscreen"):
        find_touchscreen(parse_devices(listing))


def test_sendevent_touches_stream_to_getevent_and_act_on_the_phone(serve_sim):
    served = serve_sim(1080, 2400)
    phone: SimPhone = served.phone
    phone.reset()
    icon = next(e for e in hierarchy.parse(phone.hierarchy_xml()) if e.text == "Settings")
    screen = Touchscreen.of(find_touchscreen(parse_devices(sh(served, "getevent -lp"))), phone.size)
    rx, ry = screen.to_raw(*icon.center)
    stream = Stream(served)
    try:
        assert sh(served, touch(rx, ry)) == ""
        down = stream.events(5)
        assert [(e.type, e.code, e.value) for e in down] == [
            (C.EV_ABS, C.ABS_MT_TRACKING_ID, 7), (C.EV_ABS, C.ABS_MT_POSITION_X, rx), (C.EV_ABS, C.ABS_MT_POSITION_Y, ry),
            (C.EV_KEY, C.BTN_TOUCH, 1), (C.EV_SYN, C.SYN_REPORT, 0)]
        assert len({e.time for e in down}) == 1 and {e.device for e in down} == {TS}  # one frame, one time
        assert phone.state_json()["screen"]["package"] != "com.android.settings"  # a finger acts when lifted
        sh(served, LIFT)
        up = stream.events(3)
        assert [(e.code, e.value) for e in up] == [(C.ABS_MT_TRACKING_ID, -1), (C.BTN_TOUCH, 0), (C.SYN_REPORT, 0)]
        assert up[0].time > down[0].time
        assert phone.state_json()["screen"]["package"] == "com.android.settings"
        assert phone.events[-1] == {"type": "tap", "x": icon.center[0], "y": icon.center[1]}
    finally:
        stream.close()


def test_the_input_core_drops_what_did_not_change_and_input_tap_is_not_a_kernel_event(serve_sim):
    served = serve_sim(1080, 2400)
    served.phone.reset()
    stream = Stream(served)
    try:
        # the same position twice, a code the device lacks, and an empty frame: one frame comes out
        sh(served, f"sendevent {TS} 3 {C.ABS_MT_POSITION_X} 100 && sendevent {TS} 3 {C.ABS_MT_POSITION_X} 100 && "
                   f"sendevent {TS} 3 {C.ABS_X} 5 && sendevent {TS} 0 0 0 && sendevent {TS} 0 0 0")
        # adb's `input tap` goes through InputManager: nothing reaches getevent ...
        served.device().shell(["input", "tap", "540", "1200"])
        assert served.phone.events[-1]["type"] == "tap"
        # ... so the next events read are the volume key pressed after it
        sh(served, "sendevent /dev/input/event0 1 115 1 && sendevent /dev/input/event0 0 0 0 && "
                   "sendevent /dev/input/event0 1 115 1 && sendevent /dev/input/event0 0 0 0")
        events = stream.events(4)
        assert [(e.device, e.code, e.value) for e in events] == [
            (TS, C.ABS_MT_POSITION_X, 100), (TS, C.SYN_REPORT, 0),
            ("/dev/input/event0", C.KEY_VOLUMEUP, 1), ("/dev/input/event0", C.SYN_REPORT, 0)]
        # the key already down: its second press was dropped, so the next event is its release
        sh(served, "sendevent /dev/input/event0 1 115 0 && sendevent /dev/input/event0 0 0 0")
        assert stream.events(1)[0].value == 0
    finally:
        stream.close()


def test_long_press_and_swipe_through_sendevent(serve_sim):
    served = serve_sim(1080, 2400)
    served.phone.reset()
    sh(served, touch(2048, 2048, 9) + " && sleep 0.6 && " + LIFT)
    assert served.phone.events[-1]["type"] == "long_press"
    moves = " && ".join(f"sendevent {TS} 3 {C.ABS_MT_POSITION_Y} {y} && sendevent {TS} 0 0 0" for y in (2600, 2200, 1800))
    sh(served, touch(2048, 3000, 10) + " && " + moves + " && " + LIFT)
    assert served.phone.events[-1] == {"type": "swipe", "start": [540, 1757], "end": [540, 1054],
                                        "ms": served.phone.events[-1]["ms"]}


def test_sendevent_and_getevent_errors(serve_sim):
    served = serve_sim(1080, 2400)
    dev = adb_device(served)
    out = dev.shell2("sendevent /dev/input/event2 3 57")
    assert out.returncode == 1 and "Need 4 arguments" in out.output
    out = dev.shell2("sendevent /dev/input/event9 3 57 1")
    assert out.returncode == 1 and "/dev/input/event9: No such file or directory" in out.output
    out = dev.shell2("getevent -p /dev/input/event9")
    assert out.returncode == 1 and "could not open /dev/input/event9" in out.output


# --- the keyboard ---------------------------------------------------------------------------------

def _kb(phone: SimPhone) -> dict[str, hierarchy.Element]:
    return {(e.desc or e.text): e for e in hierarchy.parse(phone.hierarchy_xml())
            if e.package == "com.android.inputmethod.latin" and e.clickable}


def press(phone: SimPhone, *names: str) -> None:
    for name in names:
        keys = _kb(phone)
        assert name in keys, f"no key {name!r}: {sorted(keys)}"
        phone.tap(*keys[name].center)


def focused_phone(locale: str) -> SimPhone:
    phone = SimPhone(1080, 2400, locale=locale)
    phone.reset(locale=locale)
    phone.launch("com.crate.notes")
    new = next(e for e in hierarchy.parse(phone.hierarchy_xml()) if e.short_rid == "new_note")
    phone.tap(*new.center)
    field = next(e for e in hierarchy.parse(phone.hierarchy_xml()) if "EditText" in e.cls)
    phone.tap(*field.center)
    assert phone.state_json()["screen"]["focused_field"]
    return phone


def field_text(phone: SimPhone) -> str:
    return next(e.text for e in hierarchy.parse(phone.hierarchy_xml()) if e.focused)


def test_keyboard_types_capitals_and_symbols():
    phone = focused_phone("en")
    press(phone, "Shift", "H", "i", ",", "Space", "Shift", "A", "m", "y", "Symbols", "!", "More symbols", "~",
          "Symbols", "0", "8", "/", "Letters", "o", "k")
    assert field_text(phone) == "Hi, Amy!~08/ok"
    press(phone, "Delete")
    assert field_text(phone) == "Hi, Amy!~08/o"


def test_pinyin_composes_pages_and_commits_characters():
    phone = focused_phone("zh")
    press(phone, "c", "h", "e", "n")
    els = hierarchy.parse(phone.hierarchy_xml())
    assert next(e.text for e in els if e.short_rid == "composing") == "chen"
    assert "陈" in [e.text for e in els if e.short_rid == "candidate"]
    assert field_text(phone) != "chen"  # the field holds only committed text
    press(phone, "陈", "x", "i", "a", "o")
    page1 = [e.text for e in hierarchy.parse(phone.hierarchy_xml()) if e.short_rid == "candidate"]
    assert "晓" not in page1
    press(phone, "More candidates", "晓", "m", "i", "n", "g", "Space")  # space: the first candidate
    first = field_text(phone)
    assert first.startswith("陈晓") and len(first) == 3
    press(phone, "，", "h", "a", "o", "Delete", "o", "好", "。", "a", "b", "Enter")  # Enter: the letters as typed
    assert field_text(phone) == first + "，好。ab"
    press(phone, "Language", "x", "Language")  # English types letters; back to 中
    assert field_text(phone) == first + "，好。abx"
    press(phone, "w", "o")
    phone.keyevent("BACK")  # focus leaves: the composition is dropped, nothing half-typed stays
    assert phone.keyboard.composing == ""
