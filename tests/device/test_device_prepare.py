"""Device preparation and restore over real adb, on simulated phones that look like retail phones
(``as_phone``) and log every shell command they receive: what prepare changes, that the originals
are journaled before each change and put back, that a securely locked phone is refused before
anything changes, that a journal left by a crash keeps the user's values, and that typing that
switches the IME on its own is journaled too.

Also on phones with real phones' formats (the shipped device profiles, one phone per profile shared
by the tests that use it), chosen for what prepare reads differently there: the type A profile's
input methods are another Android 14 phone's (LatinIME and a Wi-Fi keyboard enabled, ADBKeyboard
installed but not), the Android 11 emulator is an emulator by its properties, and the Android 13
tablet is a 240 dpi tablet."""

from __future__ import annotations

import json

import pytest

from harness.core.actions import TypeText
from harness.device.adb import parse_screen_state
from harness.device.prepare import (ANIMATION_SCALES, Journal, PrepareRefused, prepare, restore, state_dir)
from harness.device.text_input import ADB_IME
from harness.sim.command_log import read_command_log, ran
from harness.sim.phone import LATIN_IME

SETTINGS = ("stay_on_while_plugged_in", *ANIMATION_SCALES)


@pytest.fixture(autouse=True)
def own_journals(tmp_path, monkeypatch):
    """Journals of this test only (runs and `harness devices` in subprocesses inherit it), so what
    other tests left behind cannot be mistaken for this test's."""
    monkeypatch.setenv("CRATE_HARNESS_STATE", str(tmp_path / "state"))


def _globals(sim) -> dict[str, str]:
    return {k: sim.handle.shell.settings["global"][k] for k in SETTINGS}


def _phone(serve_sim, tmp_path, **kw):
    log = tmp_path / "commands.jsonl"
    sim = serve_sim(as_phone=True, command_log=log, **kw)
    dev = sim.device()
    dev.journal = Journal.open(dev.serial, {"host": dev.host, "port": dev.port})
    return sim, dev, log


def test_prepare_changes_are_journaled_then_restored(serve_sim, tmp_path):
    sim, dev, log = _phone(serve_sim, tmp_path)
    before = _globals(sim)
    assert dev.kind() == "phone" and sim.phone.ime == LATIN_IME and ADB_IME not in sim.phone.enabled_imes

    report = prepare(dev)
    assert _globals(sim) == {"stay_on_while_plugged_in": "7", **{k: "0" for k in ANIMATION_SCALES}}
    assert sim.phone.ime == ADB_IME
    assert report.changed == [f"global {k}" for k in SETTINGS] + ["input method"]
    # the originals are on disk before anything is put back
    on_disk = json.loads(dev.journal.path.read_text())
    assert dev.journal.path.parent == state_dir() / "devices"
    assert {c["key"]: c["before"] for c in on_disk["changes"] if c["kind"] == "setting"} == before
    assert [c for c in on_disk["changes"] if c["kind"] == "input_method"][0]["before"] == LATIN_IME
    cmds = read_command_log(log)
    assert ran(cmds, "settings", "put", "global", "window_animation_scale") == [
        ["settings", "put", "global", "window_animation_scale", "0"]]
    assert ran(cmds, "ime", "set") == [["ime", "set", ADB_IME]]
    # each value was read (journaled) before it was written
    lines = [r["line"] for r in cmds]
    for k in SETTINGS:
        assert lines.index(f"settings get global {k}") < lines.index(f"settings put global {k} " + ("7" if k.startswith("stay") else "0"))

    result = restore(dev, dev.journal)
    assert result.ok and len(result.restored) == 5
    assert _globals(sim) == before
    assert sim.phone.ime == LATIN_IME and ADB_IME not in sim.phone.enabled_imes  # disabled again, as it was
    assert not dev.journal.path.exists()
    assert ran(read_command_log(log), "ime", "disable") == [["ime", "disable", ADB_IME]]


def test_securely_locked_phone_is_refused_before_anything_changes(serve_sim, tmp_path):
    sim, dev, log = _phone(serve_sim, tmp_path, lock="pin")
    sim.phone.keyevent("SLEEP")
    with pytest.raises(PrepareRefused, match="unlock the phone"):
        prepare(dev)
    cmds = read_command_log(log)
    assert ran(cmds, "input", "keyevent", "KEYCODE_WAKEUP")  # woken to look at the lock screen
    assert not ran(cmds, "settings", "put") and not ran(cmds, "ime", "set") and not ran(cmds, "wm", "dismiss-keyguard")
    assert not dev.journal.changes and not dev.journal.path.exists()
    assert sim.phone.keyguard.showing  # still locked: the harness never enters a secret


def test_swipe_lock_is_opened_and_the_screen_woken(serve_sim, tmp_path):
    sim, dev, log = _phone(serve_sim, tmp_path, lock="swipe")
    sim.phone.keyevent("POWER")  # asleep (and locked, as a phone that has a lock is when it sleeps)
    assert not sim.phone.keyguard.awake
    assert dev.screen_state().awake is False
    report = prepare(dev)
    assert report.screen["woken"] and report.screen["dismissed_keyguard"]
    assert sim.phone.keyguard.awake and not sim.phone.keyguard.showing
    assert sim.phone.state_json()["screen"]["page"] == "launcher/home"
    restore(dev, dev.journal)


def test_a_crashed_runs_journal_keeps_the_users_values(serve_sim, tmp_path):
    sim, dev, _ = _phone(serve_sim, tmp_path)
    before = _globals(sim)
    prepare(dev)  # ... and the run dies here: nothing restored
    again = sim.device()
    again.journal = Journal.open(again.serial, {"host": again.host, "port": again.port})
    assert again.journal.inherited == 5
    second = prepare(again)
    assert second.changed == []  # the values are already the harness's: nothing new is recorded
    assert [c.before for c in again.journal.changes if c.kind == "setting"] == list(before.values())
    assert restore(again, again.journal).ok
    assert _globals(sim) == before and sim.phone.ime == LATIN_IME


def test_typing_switches_the_ime_through_the_journal(serve_sim, tmp_path):
    """Without prepare (--no-prepare), the first non-ASCII text switches to ADBKeyboard: that
    switch is journaled and put back like prepare's."""
    sim, dev, log = _phone(serve_sim, tmp_path, locale="zh")
    sim.phone.launch("com.google.android.contacts")  # the Pixel persona's Contacts
    sim.phone.tap(*_centre(sim, "fab"))
    sim.phone.tap(*_centre(sim, "name"))
    dev.execute(TypeText(text="陈晓明"))
    assert dev.last_text_strategy == "adbkeyboard"
    assert "陈晓明" in sim.phone.hierarchy_xml()  # typed into the field through ADBKeyboard
    assert [c.kind for c in dev.journal.changes] == ["input_method"]
    assert ran(read_command_log(log), "am", "broadcast", "-a", "ADB_INPUT_B64")
    assert restore(dev, dev.journal).ok
    assert sim.phone.ime == LATIN_IME and ADB_IME not in sim.phone.enabled_imes


def _centre(sim, rid: str) -> tuple[int, int]:
    from harness.core import hierarchy
    from harness.core.tasks import Selector

    node = hierarchy.find(hierarchy.parse(sim.phone.hierarchy_xml()), Selector(rid=rid))
    assert node is not None, rid
    return node.center


def test_screen_state_from_real_dumps():
    """dumpsys text as Android prints it (PowerManagerService, KeyguardServiceDelegate, and
    PhoneWindowManager before Android 8)."""
    power = "POWER MANAGER (dumpsys power)\nPower Manager State:\n  mDirty=0x0\n  mWakefulness=Asleep\n"
    policy = ("    KeyguardServiceDelegate\n      showing=true\n      inputRestricted=true\n      occluded=false\n"
              "      secure=true\n      dreaming=false\n      KeyguardStateMonitor\n        mIsShowing=true\n"
              "        mSimSecure=false\n        mTrusted=false\n")
    st = parse_screen_state(power, policy)
    assert (st.awake, st.keyguard, st.secure, st.trusted) == (False, True, True, False)
    old = parse_screen_state("  mWakefulness=Awake\n", "    mShowingLockscreen=false mShowingDream=false\n")
    assert (old.awake, old.keyguard, old.secure) == (True, False, None)
    assert parse_screen_state("", "").awake is None


def test_no_change_is_made_when_its_original_cannot_be_recorded(serve_sim, tmp_path, monkeypatch):
    from harness.device.base import DeviceError

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("CRATE_HARNESS_STATE", str(blocker))
    sim, dev, log = _phone(serve_sim, tmp_path)
    before = _globals(sim)
    with pytest.raises(DeviceError, match="cannot record the device's original settings"):
        prepare(dev)
    assert _globals(sim) == before and not dev.journal.changes
    assert not ran(read_command_log(log), "settings", "put")


def _wm(dev, key: str) -> str:
    return dev.shell(["wm", key])


def test_screen_size_and_density_are_overridden_only_when_asked_and_put_back(serve_sim, tmp_path):
    from PIL import Image
    import io

    from harness.device.prepare import PrepareConfig

    sim, dev, log = _phone(serve_sim, tmp_path)
    prepare(dev)
    assert not ran(read_command_log(log), "wm", "size", "720x1600") and sim.phone.size == (1080, 2400)
    restore(dev, dev.journal)

    report = prepare(dev, PrepareConfig(size=(720, 1600), density=320))
    assert "screen size 720x1600" in report.changed and "screen density 320" in report.changed
    assert sim.phone.size == (720, 1600) and sim.phone.density == 320
    assert dev.screen_size() == (720, 1600) and Image.open(io.BytesIO(dev.screenshot())).size == (720, 1600)
    assert "Override size: 720x1600" in _wm(dev, "size") and "Override density: 320" in _wm(dev, "density")
    shown = {(c.kind, c.key): c.before for c in dev.journal.changes if c.kind == "display"}
    assert shown == {("display", "size"): None, ("display", "density"): None}  # the phone had no override
    result = restore(dev, dev.journal)
    assert result.ok and {"what": "screen size", "value": None, "was": "720x1600"} in result.restored
    assert sim.phone.size == (1080, 2400) and sim.phone.density == 480
    assert "Override" not in _wm(dev, "size") and "Override" not in _wm(dev, "density")
    assert ran(read_command_log(log), "wm", "size", "reset") and ran(read_command_log(log), "wm", "density", "reset")

    # an override the owner had is what comes back, not the physical size
    dev.shell(["wm", "size", "1080x2000"])
    prepare(dev, PrepareConfig(size=(720, 1600)))
    assert sim.phone.size == (720, 1600)
    assert restore(dev, dev.journal).ok and sim.phone.size == (1080, 2000) and "Override size: 1080x2000" in _wm(dev, "size")
    with pytest.raises(ValueError, match="density"):
        PrepareConfig(density=5)


def test_devices_prepare_size_and_density_from_the_command_line(adb, serve_sim, tmp_path):
    from tests.run.test_real_phone_runs import _done, _harness

    sim = serve_sim(as_phone=True)
    rc, out, err = _done(_harness(["devices", "prepare", sim.serial, "--size", "720x1600", "--density", "320"], adb.port))
    assert rc == 0 and "screen size 720x1600, screen density 320" in out, out + err
    rc, out, err = _done(_harness(["devices", "--json"], adb.port))
    (row,) = [r for r in json.loads(out) if r["serial"] == sim.serial]
    assert row["size"] == [720, 1600] and row["density"] == 320 and row["pending_restore"] == 7
    assert {"what": "screen size", "kind": "display", "namespace": "", "key": "size", "value": None,
            "now": "720x1600"} in row["to_restore"]
    rc, out, err = _done(_harness(["devices", "restore", sim.serial], adb.port))
    assert rc == 0 and "screen size restored to the phone's own (no override)" in out, out + err
    assert sim.phone.size == (1080, 2400) and sim.phone.density == 480
    rc, out, err = _done(_harness(["devices", "prepare", sim.serial, "--size", "big"], adb.port))
    assert rc == 2 and "--size: expected WIDTHxHEIGHT" in err


def test_an_override_is_read_as_a_phone_prints_it():
    """The override prepare journals and puts back, read from a real phone's words (awesome-adb's
    README, in ../shared/reference/real_device/doc_examples) and from one without an override."""
    import re

    from harness.device.wm import parse_override
    from tests.shared_data import reference

    page = reference("real_device", "doc_examples",
                     "awesome-adb_README_wm_size_density_devices_pm_list_resumed.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)\n\s*```", page, flags=re.S)
    size = next(b for b in blocks if "Override size" in b)
    density = next(b for b in blocks if "Override density" in b)
    assert parse_override(size, "size") == "480x1024" and parse_override(density, "density") == "160"
    assert parse_override(size.replace("\n", "\r\n"), "size") == "480x1024"  # an `adb shell` pty's line ends
    assert parse_override("Physical size: 1080x1920", "size") is None  # no override: the phone's own
    assert parse_override("Physical density: 480\n", "density") is None


def test_a_run_that_finds_a_crashed_runs_journal_names_each_value_and_puts_back_the_owners(adb, serve_sim, tmp_path):
    from tests.run.test_real_phone_runs import CONTACTS_TASK, _done, _harness, _suite

    sim, dev, _ = _phone(serve_sim, tmp_path)
    owners = _globals(sim)
    prepare(dev)  # ... and the process dies here, its journal left on disk
    rc, out, err = _done(_harness(["run", "--suite", str(_suite(tmp_path, [CONTACTS_TASK])), "--device", sim.serial,
                                   "--agent", "random", "--max-steps", "1", "--out", str(tmp_path / "run")], adb.port))
    assert rc == 0, out + err
    said = next(line for line in err.splitlines() if "an earlier run changed and never put back" in line)
    assert said.startswith(f"{sim.serial}: 5 value(s) an earlier run changed and never put back (global "
                           f"stay_on_while_plugged_in: {owners['stay_on_while_plugged_in']}; "), said
    assert f"global window_animation_scale: {owners['window_animation_scale']}" in said and \
        f"input method: {LATIN_IME}) will be restored to the owner's originals" in said, said
    assert _globals(sim) == owners and sim.phone.ime == LATIN_IME and not Journal.pending()


@pytest.mark.parametrize("name,kind", [("type-a-touchscreen", "phone"), ("emulator-android11", "emulator"),
                                       ("mtk-tablet-android13", "phone")])
def test_prepare_and_restore_on_a_phone_with_a_real_phones_formats(name, kind, profile_phone, tmp_path):
    sim = profile_phone(name).fresh(tmp_path / "commands.jsonl")
    dev = sim.device()
    dev.journal = Journal.open(dev.serial, {"host": dev.host, "port": dev.port})
    before, ime, enabled = _globals(sim), sim.phone.ime, list(sim.phone.enabled_imes)
    assert ADB_IME not in enabled and ADB_IME in sim.phone.imes
    assert ("com.volosyukivan/.WiFiInputMethod" in enabled) == (name == "type-a-touchscreen")
    report = prepare(dev)
    assert report.kind == kind and report.changed == [f"global {k}" for k in SETTINGS] + ["input method"]
    assert sim.phone.ime == ADB_IME and dev.input_methods().current == ADB_IME  # switched, and read back so
    assert dev.describe().density == (sim.profile.density() or sim.phone.density)
    result = restore(dev, dev.journal)
    assert result.ok and _globals(sim) == before
    assert sim.phone.ime == ime and sim.phone.enabled_imes == enabled  # the owner's keyboards, as they were
    cmds = read_command_log(tmp_path / "commands.jsonl")
    assert ran(cmds, "ime", "set") == [["ime", "set", ADB_IME], ["ime", "set", ime]]
