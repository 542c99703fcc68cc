"""The device readers on the forms the real transcripts (tests/device/test_real_transcripts.py) show only in
part: a focus on several displays settled by ``mTopFocusedDisplayId``, vivo's ``... type=1 }``
window names, the commands asked by Android version; type A frames that report no contact, keys
and pen buttons on their nodes, the emulator's eleven touch nodes; a keyboard switch Android did
not make (on the simulated phone over adb, and in prepare); a screenshot on a phone with two
displays taken again with ``-d``."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from harness.core import input_codes as C
from harness.device import focus
from harness.device.base import DeviceError, InfraError
from harness.device.prepare import PrepareConfig, prepare
from harness.recorder.evdev import GestureReader, KeyPress, Touch, Touchscreen, find_touchscreen, parse_devices, parse_event_line
from tests.device.test_real_transcripts import phone

LINE = "jp.naver.line.android/jp.naver.line.android.activity.main.MainActivity"
COVER = "com.android.systemui/.subscreen.SubHomeActivity"


def _displays(cover_focus: str) -> str:
    """``dumpsys window displays`` of a foldable whose cover screen (display 1) has a focus too."""
    return (f"WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n"
            f"  Display: mDisplayId=0 rootTasks=4\n  mCurrentFocus=Window{{5e9b13b u0 {LINE}}}\n"
            f"  mFocusedApp=ActivityRecord{{a646676 u0 jp.naver.line.android/.activity.main.MainActivity t285}}\n"
            f"  Display: mDisplayId=1 rootTasks=2\n  mCurrentFocus={cover_focus}\n"
            f"  mFocusedApp=ActivityRecord{{caf038a u0 {COVER} t7}}\n")


def test_several_focused_displays_are_settled_by_the_top_focused_display():
    both = _displays(f"Window{{77a u0 {COVER.replace('/.', '/com.android.systemui.')}}}")
    assert focus.read_window_dump(both) is None  # two displays with a focus, nothing says which is on top
    asked: list[str] = []

    def shell(argv: list[str]) -> str:
        asked.append(" ".join(argv))
        return {"dumpsys window displays": both, "dumpsys window windows": "  mTopFocusedDisplayId=0\n"}.get(asked[-1], "")

    found = focus.foreground(shell, 31)
    assert found.component == LINE and found.display == 0
    assert asked == ["dumpsys window displays", "dumpsys window windows"]
    # the cover screen on top: its SystemUI is in front
    cover = focus.read_window_dump(both, top_display=1)
    assert cover.package == "com.android.systemui" and cover.display == 1
    # only one display has the focus (the others print null): that one, without asking more
    assert focus.read_window_dump(_displays("null")).component == LINE


def test_window_names_with_words_after_the_component():
    text = ("  mCurrentFocus=Window{9d4c7b1 u0 com.bbk.launcher2/com.bbk.launcher2.Launcher type=1 }\n"
            "  mFocusedApp=ActivityRecord{1f0 u0 com.bbk.launcher2/.Launcher t3}\n")
    assert focus.read_window_dump(text).component == "com.bbk.launcher2/com.bbk.launcher2.Launcher"
    popup = "  mCurrentFocus=Window{3c2 u0 PopupWindow:1a2b3c}\n  mFocusedApp=ActivityRecord{1f0 u0 com.x.app/.Main t3}\n"
    assert focus.read_window_dump(popup).component == "com.x.app/com.x.app.Main"  # a window without a package


def test_resumed_activity_names_by_android_version():
    top = ("  topResumedActivity=ActivityRecord{9 u0 com.a/.Top t4}\n"
           "  ResumedActivity: ActivityRecord{8 u0 com.b/.Other t5}\n")
    assert focus.read_activities(top).component == "com.a/com.a.Top"
    assert focus.read_activities("  mResumedActivity: ActivityRecord{1 u0 com.c/com.c.Main t2}\n").component == "com.c/com.c.Main"
    assert focus.read_activities("nothing here\n") is None


@pytest.mark.parametrize("sdk, first", [(28, "dumpsys window windows"), (33, "dumpsys window displays"),
                                        (None, "dumpsys window displays")])
def test_the_command_follows_the_android_version(sdk, first):
    asked: list[str] = []

    def shell(argv):
        asked.append(" ".join(argv))
        return ""

    assert focus.foreground(shell, sdk) is None
    assert asked[0] == first and asked[-2:] == ["dumpsys activity activities", "dumpsys activity top"]
    assert tuple(tuple(a.split()) for a in asked) == tuple(focus.commands_for(sdk))


def _axis(name: str, top: int) -> str:
    return f"{name:<22}: value 0, min 0, max {top}, fuzz 0, flat 0, resolution 0"


_MT_XY = f"{_axis('ABS_MT_POSITION_X', 1079)}\n                {_axis('ABS_MT_POSITION_Y', 2399)}"
# a fingerprint sensor with multi-touch axes but no INPUT_PROP_DIRECT listed first, the screen, a pen
LISTING = f"""\
add device 1: /dev/input/event3
  name:     "fpc_sensor"
  events:
    KEY (0001): KEY_HOME              00fe
    ABS (0003): {_MT_XY}
  input props:
    <none>
add device 2: /dev/input/event2
  name:     "touch_ctl"
  events:
    KEY (0001): KEY_BACK              KEY_HOMEPAGE          BTN_TOUCH
    ABS (0003): {_MT_XY}
                {_axis('ABS_MT_TRACKING_ID', 65535)}
  input props:
    INPUT_PROP_DIRECT
add device 3: /dev/input/event5
  name:     "pen"
  events:
    KEY (0001): BTN_DIGI              BTN_TOUCH             BTN_STYLUS
    ABS (0003): {_axis('ABS_X', 1079)}
                {_axis('ABS_Y', 2399)}
  input props:
    INPUT_PROP_DIRECT
"""


def _read(lines: list[str], listing: str = LISTING) -> list:
    out: list = []
    ts = Touchscreen.of(find_touchscreen(parse_devices(listing)), (1080, 2400))
    reader = GestureReader(ts, out.append)
    for line in lines:
        e = parse_event_line(line)
        if e is not None:
            reader.feed(e)
    return out


def test_type_a_a_frame_reporting_no_contact_lifts_every_finger():
    """A type A controller without BTN_TOUCH: a contact is its axes and SYN_MT_REPORT; the lift is a
    frame whose only report is empty (the kernel's multi-touch-protocol document)."""
    ev = "/dev/input/event2"
    lines = [f"[ 1.000000] {ev}: 0003 0035 00000064", f"[ 1.000000] {ev}: 0003 0036 000000c8",
             f"[ 1.000000] {ev}: 0000 0002 00000000", f"[ 1.000000] {ev}: 0000 0000 00000000",
             f"[ 1.050000] {ev}: 0003 0035 00000064", f"[ 1.050000] {ev}: 0003 0036 000000c8",
             f"[ 1.050000] {ev}: 0000 0002 00000000", f"[ 1.050000] {ev}: 0000 0000 00000000",
             f"[ 1.090000] {ev}: 0000 0002 00000000", f"[ 1.090000] {ev}: 0000 0000 00000000"]
    [tap] = _read(lines)
    assert isinstance(tap, Touch) and tap.points == [(100, 200)] and tap.duration_ms == 90


def test_keys_on_the_touch_node_and_pen_buttons():
    ts, pen = "/dev/input/event2", "/dev/input/event5"
    lines = [f"[ 2.000000] {ts}: EV_KEY       KEY_BACK             DOWN", f"[ 2.000000] {ts}: EV_SYN       SYN_REPORT           00000000",
             f"[ 2.080000] {ts}: EV_KEY       KEY_BACK             UP", f"[ 2.080000] {ts}: EV_SYN       SYN_REPORT           00000000",
             f"[ 3.000000] {pen}: EV_KEY       BTN_TOUCH            DOWN", f"[ 3.000000] {pen}: EV_SYN       SYN_REPORT           00000000",
             f"[ 3.100000] {pen}: EV_KEY       BTN_TOUCH            UP", f"[ 3.100000] {pen}: EV_SYN       SYN_REPORT           00000000",
             "[ 4.000000] /dev/input/event3: EV_KEY       KEY_HOME             DOWN\r\r",
             "[ 4.050000] /dev/input/event3: EV_KEY       KEY_HOME             UP\r\r"]
    back, home = _read(lines)  # the pen's BTN_TOUCH is neither a key nor the screen's touch
    assert isinstance(back, KeyPress) and back.name == "KEY_BACK" and back.device == ts
    assert home.code == C.KEY_HOME and home.name == "KEY_HOME"
    from harness.recorder.steps import HW_KEYS
    assert HW_KEYS[C.KEY_HOME] == HW_KEYS[C.KEY_HOMEPAGE] == "home"


def test_the_screen_is_ranked_above_a_sensor_and_a_pen_and_the_first_emulator_display():
    assert find_touchscreen(parse_devices(LISTING)).name == "touch_ctl"
    node = ("add device {n}: /dev/input/event{e}\n  name:     \"virtio_input_multi_touch_{k}\"\n  events:\n"
            "    ABS (0003): 002f  : value 0, min 0, max 10, fuzz 0, flat 0, resolution 0\n"
            "                0035  : value 0, min 0, max 32767, fuzz 0, flat 0, resolution 0\n"
            "                0036  : value 0, min 0, max 32767, fuzz 0, flat 0, resolution 0\n"
            "  input props:\n    <none>\n")
    emulator = "".join(node.format(n=i, e=20 - i, k=k) for i, k in enumerate([11, 2, 10, 1, 3], 1))
    assert find_touchscreen(parse_devices(emulator)).name == "virtio_input_multi_touch_1"


def test_a_keyboard_switch_android_refused_is_an_error_naming_it(serve_sim):
    dev = serve_sim(as_phone=True).device()
    with pytest.raises(DeviceError, match=r"could not enable the input method com\.example\.none/\.Ime"):
        dev.set_input_method("com.example.none/.Ime")
    before = dev.input_methods().current
    from harness.sim.phone import ADB_IME

    dev.set_input_method(ADB_IME)  # installed: enabled, then selected, and the settings say so
    assert dev.input_methods().current == ADB_IME != before


def _prepare_phone(ime_set_answer: str, current: str) -> object:
    adb_ime = "com.android.adbkeyboard/.AdbIME"
    latin = "com.android.inputmethod.latin/.LatinIME"
    return phone({
        "dumpsys power": "  mWakefulness=Awake\n", "dumpsys window policy": "    showing=false\n",
        "ime list -s": f"{latin}\n", "ime list -a -s": f"{latin}\n{adb_ime}\n",
        "settings get secure default_input_method": current,
        "settings get secure enabled_input_methods": f"{latin}:{adb_ime}",
        f"ime set {adb_ime}": ime_set_answer,
        "settings get global stay_on_while_plugged_in": "7",
        **{f"settings get global {k}": "0" for k in ("window_animation_scale", "transition_animation_scale",
                                                      "animator_duration_scale")},
    })


def test_prepare_does_not_say_the_keyboard_was_switched_when_it_was_not():
    adb_ime = "com.android.adbkeyboard/.AdbIME"
    dev = _prepare_phone(f"Unknown input method {adb_ime} cannot be selected for user #0",
                         "com.android.inputmethod.latin/.LatinIME")
    with pytest.raises(DeviceError, match=r"could not switch the keyboard to com\.android\.adbkeyboard/\.AdbIME: "
                                          r"the phone said 'Unknown input method"):
        prepare(dev, PrepareConfig())


def _png(color: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 2), color).save(buf, "PNG")
    return buf.getvalue()


def test_a_phone_with_two_displays_is_captured_on_the_focused_one():
    inner, cover = "4619827259835644672", "4619827551948147201"
    warning = (b"[Warning] Multiple displays were found, but no display id was specified! Defaulting to the first "
               b"display found, however this default is not guaranteed to be consistent across captures. A display "
               b"id should be specified.\nA display ID can be specified with the [-d display-id] option.\n"
               b'See "dumpsys SurfaceFlinger --display-id" for valid display IDs.\n')
    dev = phone({
        "dumpsys SurfaceFlinger --display-id":
            f'Display {cover} (HWC display 1): port=1 pnpId=GGL displayName="cover"\n'
            f'Display {inner} (HWC display 0): port=0 pnpId=GGL displayName="inner"\n',
        "dumpsys window windows": "  mTopFocusedDisplayId=0\n",
        "dumpsys display": (f'    mBaseDisplayInfo=DisplayInfo{{"Built-in Screen", displayId 0, displayGroupId 0, '
                            f'real 4 x 2, uniqueId "local:{inner}"}}\n'
                            f'    mBaseDisplayInfo=DisplayInfo{{"Cover", displayId 1, real 4 x 2, uniqueId "local:{cover}"}}\n'),
    }, {"screencap -p": warning + _png((1, 1, 1)), f"screencap -p -d {inner}": _png((9, 9, 9))})
    assert dev.screenshot() == _png((9, 9, 9))  # not the first display's, which screencap picked alone
    assert dev.screenshot() == _png((9, 9, 9)) and dev.screencap_noise == ""
    raw = next(s for s in dev.frame_sources() if s.name == "raw")
    assert raw.command() == f"screencap -d {inner}"


def test_no_image_is_an_error_never_a_corrupt_image():
    cut = _png((5, 5, 5))[:-20]
    for data, said in [(b"", "hold no PNG"), (b"/system/bin/sh: screencap: not found\n", "screencap: not found"),
                       (b"[Warning] x\n" + cut, "cut short"), (b"\x00\x01 binary" + _png((5, 5, 5)), "not text")]:
        dev = phone({}, {"screencap -p": data})
        with pytest.raises(InfraError, match=said):
            dev.screenshot()
    noisy = phone({}, {"screencap -p": b"WARNING: linker: unused DT entry\n" + _png((5, 5, 5)) + b"\n"})
    assert noisy.screenshot() == _png((5, 5, 5)) and "linker" in noisy.screencap_noise
