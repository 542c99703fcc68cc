"""The adb device backend against simulated phones over the real adb server: observation,
actions, injection-safe and Unicode typing, resets and their verification, and disconnects."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from harness.core.actions import ActionError, Click, Key, OpenApp, Swipe, TypeText
from harness.device.base import DeviceError, InfraError
from harness.core.tasks import Setup, SimSetup


def _focus_name_field(dev, phone):
    dev.execute(OpenApp(app="Settings"))
    phone_tree = phone.state_json()
    assert phone_tree["screen"]["page"] == "settings/home"
    from harness.core import hierarchy
    from harness.core.tasks import Selector

    def tap(sel):
        el = hierarchy.find(hierarchy.parse(dev.hierarchy()), sel)
        assert el is not None, sel
        dev.execute(Click(x=el.center[0], y=el.center[1]))

    tap(Selector(text="About phone"))
    tap(Selector(rid="device_name"))
    tap(Selector(rid="name_input"))
    assert phone.state_json()["screen"]["focused_field"] is not None
    dev.execute(Key(key="delete"))


def test_screenshot_is_the_phones_png_and_describe(serve_sim):
    s = serve_sim()
    dev = s.device()
    shot = dev.screenshot()
    assert shot == s.phone.screencap_encode()  # `screencap -p` as a phone writes it: RGBA
    img = Image.open(io.BytesIO(shot))
    assert img.mode == "RGBA" and img.convert("RGB").tobytes() == s.phone.screencap_image().tobytes()
    d = dev.describe()
    assert d.healthy and d.simulated and d.size == (1080, 2400) and d.model == "CrateSim"


def test_actions_reach_the_phone(serve_sim):
    s = serve_sim()
    dev = s.device()
    dev.execute(OpenApp(app="设置"))  # the Chinese label resolves too
    assert s.phone.current_focus()[0] == "com.android.settings"
    dev.execute(Key(key="home"))
    assert s.phone.current_focus()[0] == "com.android.launcher3"
    dev.execute(Swipe(start=(540, 1500), end=(540, 700), duration_ms=200))
    assert s.phone.events[-1] == {"type": "swipe", "start": [540, 1500], "end": [540, 700], "ms": 200}
    with pytest.raises(ActionError, match="no installed app"):
        dev.execute(OpenApp(app="No Such App"))


def test_two_users_of_one_phone_each_read_their_own_hierarchy(serve_sim):
    """A dump file per call: B's dump, taken after the phone changed, lands between A's dump and
    A's read; A still reads the tree of its own moment (with one shared path it read B's), and no
    dump file is left behind."""
    from harness.device.adb import DUMP_PREFIX

    s = serve_sim(width=540, height=1200)
    a, b = s.device(), s.device()
    a.execute(OpenApp(app="Settings"))
    shell = a.shell

    def b_in_between(argv, timeout=None):
        out = shell(argv, timeout)
        if argv[:2] == ["uiautomator", "dump"]:  # A's dump is written; before A reads it:
            b.execute(Key(key="home"))
            assert "com.android.launcher3" in b.hierarchy()
        return out

    a.shell = b_in_between
    seen = a.hierarchy()
    assert "com.android.settings" in seen and "com.android.launcher3" not in seen
    a.shell = shell
    left = a.shell(["ls", "/data/local/tmp"]).split()
    assert not [f for f in left if ("/data/local/tmp/" + f).startswith(DUMP_PREFIX)], left


def test_injection_text_is_typed_not_run(serve_sim):
    s = serve_sim(adbkeyboard=False)
    dev = s.device()
    before = s.phone.fs.digest("/sdcard")
    _focus_name_field(dev, s.phone)
    evil = "'; rm -rf /sdcard; echo '"
    n_log = len(s.handle.device.shell.log)
    dev.execute(TypeText(text=evil))
    ran = [argv for argv in s.handle.device.shell.log[n_log:]]
    assert ran and all(argv[0] == "input" for argv in ran), ran
    assert s.phone.fs.digest("/sdcard") == before
    value = s.phone.apps["com.android.settings"].params["value"]
    assert value.endswith(evil), value
    assert dev.last_text_strategy == "input_text"


@pytest.mark.parametrize("adbkeyboard", [True, False])
def test_chinese_text(serve_sim, adbkeyboard):
    s = serve_sim(adbkeyboard=adbkeyboard)
    dev = s.device()
    _focus_name_field(dev, s.phone)
    if adbkeyboard:
        dev.execute(TypeText(text="我的手机 $(reboot)"))
        assert s.phone.apps["com.android.settings"].params["value"].endswith("我的手机 $(reboot)")
        assert dev.last_text_strategy == "adbkeyboard"
    else:
        with pytest.raises(ActionError, match="ADBKeyboard"):
            dev.execute(TypeText(text="我的手机"))


def test_reset_applies_preset_and_verifies(serve_sim):
    s = serve_sim()
    dev = s.device()
    s.phone.launch("com.android.settings")
    s.phone.apps["com.android.settings"].state["wifi"] = False
    dev.reset(Setup(clear=["com.android.settings"], sim=SimSetup(preset="default", locale="zh")), "zh")
    st = dev.state()
    assert st["apps"]["settings"]["wifi"] is True
    assert st["screen"]["page"] == "launcher/home" and st["device"]["locale"] == "zh"
    # an app the setup names that is not installed is refused before anything reaches the phone
    # (reset checks cannot_run first), not found out by a failing pm clear or am start
    with pytest.raises(DeviceError, match=r"needs com\.not\.installed, not installed on "):
        dev.reset(Setup(clear=["com.not.installed"]), "en")
    with pytest.raises(DeviceError, match=r"needs com\.not\.installed, not installed on "):
        dev.reset(Setup(start="com.not.installed/.Main"), "en")


def test_bad_preset_config_is_refused(serve_sim):
    s = serve_sim()
    dev = s.device()
    with pytest.raises(DeviceError, match="refused the reset"):
        dev.reset(Setup(sim=SimSetup(state={"nope": {}})), "en")


def test_stopped_phone_is_infra_error_and_reconnect_gives_up(serve_sim):
    s = serve_sim()
    dev = s.device(command_timeout=5)
    s.stop()
    with pytest.raises(InfraError):
        dev.screenshot()
    assert dev.reconnect(timeout=1.0) is False


def test_uiautomator2_backend_hierarchy_and_chinese_text(serve_sim):
    from harness.device.config import DeviceConfig

    s = serve_sim(adbkeyboard=False)
    dev = DeviceConfig(backend="uiautomator2", adb_port=s.adb.port).open(s.serial)
    xml = dev.hierarchy()
    assert "<hierarchy" in xml and "com.android.launcher3" in xml
    _focus_name_field(dev, s.phone)
    dev.execute(TypeText(text="张三的手机"))
    assert s.phone.apps["com.android.settings"].params["value"].endswith("张三的手机")
    assert dev.last_text_strategy == "uiautomator2"


@pytest.mark.parametrize("backend,adbkeyboard,current,strategy", [
    ("adb", True, True, "adbkeyboard"),     # ADBKeyboard's ADB_CLEAR_TEXT broadcast, when it is the IME
    ("adb", True, False, "keyevents"),      # installed but not current: clearing never switches the IME
    ("adb", False, False, "keyevents"),     # move to the end, one delete per character the tree shows
    ("uiautomator2", False, False, "uiautomator2"),  # uiautomator2's clear_text (clearInputText JSON-RPC)
])
def test_type_with_clear_replaces_a_prefilled_field(serve_sim, backend, adbkeyboard, current, strategy):
    from harness.device.config import DeviceConfig
    from harness.device.text_input import ADB_IME

    s = serve_sim(adbkeyboard=adbkeyboard)
    if current:
        assert s.phone.ime_set(ADB_IME)
    ime_before = s.phone.ime_current()
    dev = DeviceConfig(backend=backend, adb_port=s.adb.port).open(s.serial)
    _focus_name_field(dev, s.phone)
    params = s.phone.apps["com.android.settings"].params
    assert params["value"] == "Crate Phon"  # prefilled, one character deleted
    dev.execute(TypeText(text="Alex phone", clear=True))
    assert params["value"] == "Alex phone"
    assert dev.last_clear_strategy == strategy
    if backend == "adb":
        assert s.phone.ime_current() == ime_before
    dev.execute(TypeText(text=" 2"))  # without clear the text goes after what is there
    assert params["value"] == "Alex phone 2"


def test_harness_devices_lists_the_sim(serve_sim, capsys):
    import json

    from harness.cli.main import main

    s = serve_sim()
    assert main(["devices", "--adb-port", str(s.adb.port), "--json"]) == 0
    rows = {r["serial"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[s.serial]["healthy"] is True and rows[s.serial]["size"] == [1080, 2400]
    assert rows[s.serial]["simulated"] is True


@pytest.mark.parametrize("backend", ["adb", "uiautomator2"])
def test_double_tap_reaches_the_phone_as_a_double_tap(serve_sim, backend):
    """A unified double_tap through each backend: the phone pairs the two taps (40-300 ms apart) and
    the file preview zooms; a single click does not."""
    from harness.core import hierarchy
    from harness.core.actions import DoubleTap
    from harness.device.config import DeviceConfig
    from harness.core.tasks import Selector

    s = serve_sim()
    dev = DeviceConfig(backend=backend, adb_port=s.adb.port).open(s.serial)

    def find(**sel):
        el = hierarchy.find(hierarchy.parse(dev.hierarchy()), Selector(**sel))
        assert el is not None, sel
        return el

    dev.execute(OpenApp(app="Files"))
    for text in ("Pictures", "family_2024.jpg"):
        e = find(text=text)
        dev.execute(Click(x=e.center[0], y=e.center[1]))
    preview = find(rid="preview")
    x, y = preview.center
    assert not preview.selected
    dev.execute(DoubleTap(x=x, y=y))
    assert find(rid="preview").selected, s.phone.events[-3:]
    assert s.phone.events[-2:] == [{"type": "tap", "x": x, "y": y}, {"type": "tap", "x": x, "y": y, "double_tap": True}]
    dev.execute(Click(x=x, y=y))  # one tap after a finished double tap is a tap: no zoom change
    assert find(rid="preview").selected and s.phone.events[-1] == {"type": "tap", "x": x, "y": y}
