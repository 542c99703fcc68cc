"""Device profiles: ``harness devices capture`` and ``harness sim serve --profile``.

* The shipped profiles are what their SOURCES say: every answer marked ``transcript`` is that
  transcript byte for byte, a ``getevent`` listing prints again as the phone printed it, and
  ``getprop`` as it was (line ends kept).
* A capture redacts serial numbers and identifiers (checked on the real getprop transcripts: the
  values are gone everywhere, nothing else changed) and never changes the phone (the simulated
  phone's command log: every command it received is on the read-only list, none changes a setting,
  an app, an input method or the screen).
* A capture folder is a profile: a phone serving a capture answers a second capture as the first.
* The simulated phone answers in a profile's formats with its own state: its app in front where
  the captured one was (a lock screen's focus too), several displays, screencap's warning unless
  ``-d``, a type A touchscreen's protocol in its kernel, keys on the touch controller's node.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.device import focus
from harness.device.read_only_commands import READ_ONLY, listed, to_capture
from harness.device.redaction import REDACTED, Redactor, decode
from harness.core.profile_folder import ProfileError, read_manifest
from harness.sim import profile as P
from harness.sim.command_log import read_command_log
from harness.sim.evdev import format_capabilities
from tests.phone_commands import changes
from tests.shared_data import reference

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = P.shipped_names()


def test_the_shipped_profiles_are_what_their_sources_say():
    assert {"pixel8", "mtk-tablet-android13", "emulator-android11", "type-a-touchscreen", "vivo-pad-two-touch",
            "galaxy-z-flip4-multi-display"} <= set(SHIPPED)
    for name in SHIPPED:
        folder = P.find(name)
        m = read_manifest(folder)
        sources = (folder / "SOURCES").read_text(encoding="utf-8")
        assert not list(folder.glob("*.png")) and sum(f.stat().st_size for f in folder.iterdir()) < 300_000, name
        for a in m.answers:
            assert (folder / a.file).is_file() and a.command in sources and a.origin in sources, (name, a.command)
            assert listed(a.command.split()) or a.command == "getevent -p", (name, a.command)
        if name != "pixel8":
            assert "license: per source" in sources


def test_the_shipped_profiles_answer_as_the_transcripts_they_cite():
    """Each profile built from real transcripts cites them (``../shared/reference/real_device``) and
    answers with their bytes; without the shared data this is skipped, saying so (tests/shared_data.py)."""
    real = reference("real_device")
    for name in SHIPPED:
        if name == "pixel8":
            continue
        folder = P.find(name)
        m = read_manifest(folder)
        sources = (folder / "SOURCES").read_text(encoding="utf-8")
        index = {json.loads(line)["file"]: json.loads(line) for line in (real / "INDEX.jsonl").read_text().splitlines()}
        cited = [f for f in index if f in sources]
        assert cited and all(index[f]["source"] in sources for f in cited), name
        for a in m.answers:
            if a.origin.startswith("transcript"):
                assert any((folder / a.file).read_bytes() == (real / f).read_bytes() for f in cited), (name, a.command)


@pytest.mark.parametrize("name", [n for n in SHIPPED if (P.find(n) / "getevent-lp.txt").exists()
                                  or (P.find(n) / "getevent-p.txt").exists()])
def test_a_listing_prints_again_as_the_phone_printed_it(name):
    prof = P.load(name)
    labelled = prof.answer("getevent -lp") is not None
    text = prof.text("getevent -lp" if labelled else "getevent -p")
    devices = prof.input_devices()
    printed = []
    for n, d in enumerate(devices, 1):
        printed += [f"add device {n}: {d.path}", f'  name:     "{d.name}"', *format_capabilities(d, labels=labelled)]
    assert "\n".join(printed) + "\n" == text.replace("\r", "")


def test_getprop_is_served_as_captured_with_the_phones_serial():
    prof = P.load("mtk-tablet-android13")
    captured = prof.answer("getprop")
    served = prof.getprop("SERIAL-1", {})
    assert served.replace(b"SERIAL-1", b"0123456789ABCDEF") == reference("real_device", "getprop",
                                                                         "mtk_tb8168_android13_getprop_full.txt").read_bytes()
    assert captured == served.replace(b"[SERIAL-1]", b"[0123456789ABCDEF]")
    assert prof.getprop_value("ro.build.version.sdk", "S", {}) == "33" and prof.info("S").model == "tb8168p1_64_bsp_k510"
    with_extra = prof.getprop("S", {"debug.crate.x": "1"}).decode()
    assert "[debug.crate.x]: [1]\n" in with_extra and with_extra.index("[debug.crate.x]") < with_extra.index("[dev.")


@pytest.mark.parametrize("file,props", [
    ("mtk_tb8168_android13_getprop_full.txt", {"ro.boot.serialno", "ro.serialno"}),
    ("motorola_edge20_android13_getprop.txt", {"ro.boot.serialno", "ro.serialno", "ro.vendor.boot.serialno"}),
    ("asus_tf201_android3.2.1_getprop_crlf.txt", {"ro.serialno", "net.hostname"}),
])
def test_a_capture_redacts_identifiers_of_real_getprop_listings(file, props):
    raw = reference("real_device", "getprop", file).read_bytes()
    red = Redactor()
    text = red.getprop(decode(raw), "getprop.txt")
    values = {line.split("]: [")[1].rstrip("]\r") for line in decode(raw).splitlines()
              if any(line.startswith(f"[{p}]: [") for p in props)}
    assert {r["prop"] for r in red.records} == props and all(r["kind"] for r in red.records)
    assert values and not any(v in text for v in values)
    # nothing else changed: the same lines, the same line ends (the TF201's CRLF)
    before, after = decode(raw).splitlines(keepends=True), text.splitlines(keepends=True)
    changed = [(b, a) for b, a in zip(before, after) if b != a]
    assert len(before) == len(after) and len(changed) == len(props)
    assert all(a.split("]: [")[1].startswith(REDACTED) for _, a in changed)
    assert ("\r\n" in text) == ("\r\n" in decode(raw))
    if file.startswith("motorola"):  # the IMEI's two-digit software version is no identifier
        assert "[ro.vendor.radio.imei.sv]: [39]" in text
    # the values go from every other answer too
    other = red.text(f"  mSerial={sorted(values)[0]} Device ID: 356938035643809 mac 3c:5a:b4:01:02:03 "
                     "02:00:00:00:00:00 owner@example.com act=android.intent.action.VIEW dat=tel:+441234567890 flg=0x1",
                     "dumpsys-x.txt")
    assert sorted(values)[0] not in other and "356938035643809" not in other and "3c:5a:b4" not in other
    assert "02:00:00:00:00:00" in other and "owner@example.com" not in other and "+441234567890" not in other
    assert {r["what"] for r in red.records if r.get("file") == "dumpsys-x.txt"} == {
        "a value redacted from getprop (serial number, identifiers)", "IMEI/MEID field", "MAC address",
        "e-mail address (account)", "intent data URI"}


def test_capture_never_changes_the_phone_and_a_capture_is_a_profile(adb, profile_phone, tmp_path, serve_sim, capsys):
    from harness.cli.main import main  # the command line in this process (the phone is served in it)

    phone = profile_phone("mtk-tablet-android13").fresh(tmp_path / "log1.jsonl")
    assert phone.phone.launch("com.android.settings")
    rc = main(["devices", "capture", phone.serial, "--out", str(tmp_path / "first"), "--adb-port", str(adb.port)])
    said = capsys.readouterr()
    assert rc == 0, said.err
    assert "tb8168p1_64_bsp_k510, Android 13 (SDK 33)" in said.out and "ro.serialno" in said.out
    assert "in front: com.android.settings/com.android.settings.Settings" in said.out
    # nothing on the phone changed: every command it received is on the read-only list
    cmds = read_command_log(tmp_path / "log1.jsonl")
    argvs = [argv for rec in cmds for argv in rec["argv"]]
    assert argvs and all(listed(a) for a in argvs), [a for a in argvs if not listed(a)]
    assert not [a for a in argvs if changes(a)]
    assert {tuple(a) for a in argvs} >= {c.argv for c in to_capture()}
    m = read_manifest(tmp_path / "first")
    assert m.captured_at and m.harness_version and m.device["sdk"] == 33 and m.device["size"] == [480, 800]
    assert {r["prop"] for r in m.redactions if "prop" in r} == {"ro.serialno", "ro.boot.serialno"}
    assert phone.phone.info.serial not in "".join(f.read_text(errors="replace") for f in (tmp_path / "first").iterdir())
    assert set(m.foreground["components"]) == {"com.android.settings/.Settings",
                                               "com.android.settings/com.android.settings.Settings"}
    assert [c["command"] for c in m.not_captured] == [c.line for c in READ_ONLY if not c.capture]
    shot = m.answer("screencap -p")
    assert shot.image == {"format": "png", "width": 480, "height": 800, "bytes": shot.image["bytes"]}
    assert (tmp_path / "first" / "uiautomator-dump.xml").read_text().count('text="REDACTED"') > 0
    from harness.device.capture import CaptureError, capture

    with pytest.raises(CaptureError, match="not empty"):  # never mixed with another capture
        capture(phone.device(), tmp_path / "first")

    # the capture served as a profile answers a second capture as the phone answered the first
    again = serve_sim(as_phone=True, profile=P.load(tmp_path / "first"))
    again.phone.launch("com.android.settings")
    capture(again.device(), tmp_path / "second")
    first, second = read_manifest(tmp_path / "first"), read_manifest(tmp_path / "second")
    for a in first.answers:
        b = second.answer(a.command)
        if a.command.startswith(("uiautomator", "dumpsys power", "dumpsys window policy", "pm list")):
            continue  # the simulated phone's own state, not the profile's
        assert (tmp_path / "second" / b.file).read_bytes() == (tmp_path / "first" / a.file).read_bytes(), a.command


def test_a_command_neither_read_only_nor_changing_is_found():
    from tests.phone_commands import not_on_the_list

    records = [{"line": "dumpsys battery", "argv": [["dumpsys", "battery"]]},
               {"line": "settings put global x 1", "argv": [["settings", "put", "global", "x", "1"]]},
               {"line": "input tap 1 2 & sleep 0.1; wait", "argv": [["input", "tap", "1", "2"], ["sleep", "0.1"], ["wait"]]},
               {"line": "screencap -p -d 4619827259835644672", "argv": [["screencap", "-p", "-d", "4619827259835644672"]]},
               {"line": "echo 'x", "argv": None}]
    assert not_on_the_list(records) == ["dumpsys battery", "echo 'x"]


def test_a_profile_folder_that_cannot_be_read_is_named(tmp_path, capsys):
    with pytest.raises(ProfileError, match="no such profile folder.*pixel8"):
        P.load("no-such-profile")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "manifest.json").write_text('{"kind": "crate-harness device profile", "format": 1, '
                                                  '"device": {}, "answers": [{"command": "getprop"}]}')
    with pytest.raises(ProfileError, match=r"manifest.json: answers\[0\]: 'service' is missing"):
        P.load(tmp_path / "p")
    from harness.cli.main import main

    for args, said in (([str(tmp_path / "p")], "answers[0]"), (["mtk-tablet-android13", "--size", "1080x2400"],
                                                               "has a 480x800 screen"),
                       (["mtk-tablet-android13", "--no-touchscreen"], "lists its input devices")):
        assert main(["sim", "serve", "--profile", *args]) == 2  # refused before anything is served
        assert said in capsys.readouterr().err


def test_the_app_in_front_is_put_where_the_captured_one_was(profile_phone):
    tablet = profile_phone("mtk-tablet-android13").fresh()
    sh = tablet.handle.shell
    assert tablet.phone.launch("com.android.settings")
    displays = sh.execute("dumpsys window displays").stdout.decode()
    assert "mCurrentFocus=Window{1651cd4 u0 com.android.settings/com.android.settings.Settings}" \
        in displays  # the lock screen's shade had the focus when the tablet was captured
    assert "mFocusedApp=ActivityRecord{1f72345 u0 com.android.settings/.Settings} t12}" in displays
    assert "com.mediatek.camera/.CameraLauncher" not in displays
    found = focus.read_window_dump(displays)
    assert (found.package, found.activity) == ("com.android.settings", "com.android.settings.Settings")
    tablet.phone.set_lock("swipe", showing=True)
    assert "mCurrentFocus=Window{1651cd4 u0 NotificationShade}" in sh.execute("dumpsys window displays").stdout.decode()
    tablet.fresh()

    flip = profile_phone("galaxy-z-flip4-multi-display").fresh()
    flip.phone.launch("com.android.settings")
    text = flip.handle.shell.execute("dumpsys window displays").stdout.decode()
    assert [line.strip() for line in text.splitlines() if "mCurrentFocus" in line] == [
        "mCurrentFocus=null", "mCurrentFocus=null",
        "mCurrentFocus=Window{5e9b13b u0 com.android.settings/com.android.settings.Settings}"]
    assert "com.android.systemui/.subscreen.SubHomeActivity" in text  # the cover screen keeps its own


def test_screencap_warns_of_several_displays_unless_one_is_named(profile_phone):
    flip = profile_phone("galaxy-z-flip4-multi-display").fresh()
    sh = flip.handle.shell
    mixed = sh.execute("screencap -p", merge=True).stdout
    assert mixed.startswith(b"[Warning] Multiple displays were found") and b"\x89PNG" in mixed[:400]
    assert sh.execute("screencap -p -d 4630947232038877057", merge=True).stdout.startswith(b"\x89PNG")
    assert profile_phone("pixel8").fresh().handle.shell.execute("screencap -p", merge=True).stdout.startswith(b"\x89PNG")


def _events(sh, device: str, lines: list[str]) -> None:
    for line in lines:
        assert sh.execute(f"sendevent {device} {line}").exit_code == 0


def test_a_type_a_touchscreen_reports_type_a_and_its_touch_lands(profile_phone):
    phone = profile_phone("type-a-touchscreen").fresh()
    sh = phone.handle.shell
    listing = sh.execute("getevent -lp").stdout.decode()
    assert "ABS_MT_SLOT" not in listing and "BTN_TOUCH" in listing and '"touchscreen"' in listing
    reader = sh.evdev.open_reader()
    try:
        # a tap on the launcher's Settings icon as Cartucho's type A phone reports one (raw = pixels here)
        from harness.core import hierarchy
        from harness.core.tasks import Selector

        icon = hierarchy.find(hierarchy.parse(phone.phone.hierarchy_xml()), Selector(text="Settings"))
        x, y = icon.center
        frame = ["1 330 1", f"3 53 {x}", f"3 54 {y}", "3 48 31", "3 50 31", "3 57 0", "0 2 0", "0 0 0"]
        _events(sh, "/dev/input/event7", frame + ["1 330 0", "0 0 0"])
        events = []
        while not reader.empty():
            e = reader.get_nowait()
            events.append((e.type, e.code, e.value))
    finally:
        sh.evdev.close_reader(reader)
    assert (0, 2, 0) in events and (3, 0x39, 0) in events and not any(c == 0x2F for _, c, _ in events)
    assert events[-2:] == [(1, 330, 0), (0, 0, 0)]
    assert phone.phone.current_focus()[0] == "com.android.settings"


def test_keys_on_the_touch_controllers_node_act_on_the_phone(profile_phone):
    phone = profile_phone("vivo-pad-two-touch").fresh()
    sh = phone.handle.shell
    phone.phone.launch("com.android.settings")
    _events(sh, "/dev/input/event6", ["1 158 1", "0 0 0", "1 158 0", "0 0 0"])  # KEY_BACK on vivo_ts
    assert phone.phone.current_focus()[0] != "com.android.settings"
    assert list(sh.evdev.touches) == ["/dev/input/event6", "/dev/input/event5"]  # the screen and the pen
    assert sh.evdev.device("/dev/input/event6").slot == 1  # as listed: ABS_MT_SLOT value 1


def test_sim_serve_answers_in_a_profile_from_the_command_line(adb, sim_process):
    """``harness sim serve --as-phone --profile NAME``, as a user starts it (the one profile phone
    of these tests in a process of its own)."""
    from harness.device.adb import AdbDevice

    dev = AdbDevice(sim_process("--as-phone", "--profile", "mtk-tablet-android13"), port=adb.port)
    d = dev.describe()
    assert (d.model, d.sdk, d.size, d.density, d.kind) == ("tb8168p1_64_bsp_k510", "33", (480, 800), 240, "phone")
    assert dev.shell(["getevent", "-lp"]) == P.load("mtk-tablet-android13").text("getevent -lp").strip()
    assert dev.current_app()[0] == "com.android.launcher3"  # read from the tablet's layout, home in front
