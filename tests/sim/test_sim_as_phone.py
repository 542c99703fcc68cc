"""The simulated phone as a retail phone (``harness sim serve --as-phone``) over the real adb
server: no simulator marker where an agent or the harness could look (getprop, dumpsys, the package
list, the adb banner's product fields), `dumpsys crate_sim` and the reset broadcast refused, the
lock screen and screen power, enabled vs installed input methods, and `--command-log`."""

from __future__ import annotations

import re

from harness.device.adb_server import run_adb
from harness.sim.command_log import read_command_log, ran
from harness.sim.phone import ADB_IME, SimPhone

MARKERS = re.compile(r"crate|cratesim|qemu|goldfish|ranchu|emulator|sdk_gphone|simulat", re.I)


def _sh(adb, serial: str, *argv: str) -> str:
    r = run_adb(["-s", serial, "shell", *argv], adb.port)
    return r.stdout + r.stderr


def test_no_simulator_markers_anywhere_adb_looks(adb, serve_sim):
    sim = serve_sim(as_phone=True)
    for argv in (["getprop"], ["dumpsys", "-l"], ["pm", "list", "packages"], ["uname", "-a"],
                 ["settings", "list", "global"], ["dumpsys", "window", "windows"], ["dumpsys", "SurfaceFlinger"],
                 ["dumpsys", "display"], ["ps", "-A"]):
        out = _sh(adb, sim.serial, *argv)
        assert out.strip() and not MARKERS.search(out), (argv, MARKERS.search(out))
    listed = run_adb(["devices", "-l"], adb.port).stdout  # the CNXN banner's product fields
    line = next(x for x in listed.splitlines() if x.startswith(sim.serial))
    assert "product:shiba model:Pixel_8 device:shiba" in line and not MARKERS.search(line)
    assert _sh(adb, sim.serial, "getprop", "ro.build.fingerprint").strip() == \
        "google/shiba/shiba:14/AP2A.240805.005/12025142:user/release-keys"
    assert _sh(adb, sim.serial, "getprop", "ro.product.cpu.abi").strip() == "arm64-v8a"
    assert "Can't find service: crate_sim" in _sh(adb, sim.serial, "dumpsys", "crate_sim")
    # the reset broadcast has no receiver on a retail phone
    out = _sh(adb, sim.serial, "am", "broadcast", "-a", "com.crate.sim.RESET", "--es", "config", "e30=")
    assert "result=0" in out
    dev = sim.device()
    d = dev.describe()
    assert d.healthy and not d.simulated and d.kind == "phone" and d.model == "Pixel 8"
    assert dev.state() is None
    # the default persona still says what it is
    plain = serve_sim()
    assert plain.device().describe().kind == "simulated"
    assert _sh(adb, plain.serial, "getprop", "ro.crate.sim").strip() == "1"


def test_input_methods_installed_versus_enabled(adb, serve_sim):
    sim = serve_sim(as_phone=True)
    assert ADB_IME in _sh(adb, sim.serial, "ime", "list", "-a", "-s").split()
    assert ADB_IME not in _sh(adb, sim.serial, "ime", "list", "-s").split()  # installed, not enabled
    assert "cannot be selected" in _sh(adb, sim.serial, "ime", "set", ADB_IME)
    assert "now enabled" in _sh(adb, sim.serial, "ime", "enable", ADB_IME)
    assert "selected" in _sh(adb, sim.serial, "ime", "set", ADB_IME)
    assert _sh(adb, sim.serial, "settings", "get", "secure", "default_input_method").strip() == ADB_IME
    _sh(adb, sim.serial, "ime", "disable", ADB_IME)
    assert sim.phone.ime != ADB_IME  # Android falls back to an enabled IME


def test_lock_screen_and_screen_power():
    phone = SimPhone(540, 1200, lock="pin")
    assert phone.keyguard.showing and "Enter PIN" in phone.hierarchy_xml()
    phone.launch("com.android.settings")
    assert "Enter PIN" in phone.hierarchy_xml()  # apps start behind the lock screen
    phone.swipe(270, 1000, 270, 200)
    assert phone.keyguard.showing  # a secure lock does not open with a swipe
    assert not phone.dismiss_keyguard()
    phone.input_text("0000")
    phone.keyevent("ENTER")
    assert phone.keyguard.showing
    phone.input_text("1234")
    phone.keyevent("ENTER")
    assert not phone.keyguard.showing and phone.state_json()["screen"]["package"] == "com.android.settings"
    phone.keyevent("POWER")
    assert not phone.keyguard.awake and phone.keyguard.showing  # sleeping locks it again
    assert phone.screencap_image().convert("RGB").getextrema() == ((0, 0), (0, 0), (0, 0))  # a black screen
    phone.tap(270, 600)
    phone.keyevent("KEYCODE_WAKEUP")
    assert phone.keyguard.awake and phone.keyguard.showing
    swipe = SimPhone(540, 1200, lock="swipe")
    swipe.swipe(270, 1000, 270, 200)
    assert not swipe.keyguard.showing


def test_command_log_records_every_command_line_before_it_runs(adb, serve_sim, tmp_path):
    log = tmp_path / "log.jsonl"
    sim = serve_sim(as_phone=True, command_log=log)
    dev = sim.device()
    dev.shell(["echo", "'; pm clear com.android.contacts; echo '"])  # quoted: typed, never run
    dev.shell(["settings", "get", "global", "window_animation_scale"])
    run_adb(["-s", sim.serial, "shell", "echo $HOME && getprop ro.product.model | head -1"], adb.port)
    run_adb(["-s", sim.serial, "shell", "echo 'unterminated"], adb.port)
    recs = read_command_log(log)
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))
    assert not ran(recs, "pm", "clear")  # the injection was an argument of echo
    assert ["echo", "'; pm clear com.android.contacts; echo '"] in ran(recs, "echo")
    assert ran(recs, "settings", "get") == [["settings", "get", "global", "window_animation_scale"]]
    chain = next(r for r in recs if r["line"].startswith("echo $HOME"))
    assert chain["argv"] == [["echo", "$HOME"], ["getprop", "ro.product.model"], ["head", "-1"]]
    bad = recs[-1]
    assert bad["argv"] is None and "syntax error" in bad["error"]


def test_sim_serve_cli_flags(adb, sim_process, tmp_path):
    log = tmp_path / "cli-log.jsonl"
    serial = sim_process("--as-phone", "--lock", "swipe", "--command-log", str(log))
    from harness.device.adb import AdbDevice

    dev = AdbDevice(serial, port=adb.port)
    st = dev.screen_state()
    assert dev.describe().kind == "phone" and st.keyguard is True and st.secure is False
    assert any(r["line"] == "dumpsys window policy" for r in read_command_log(log))
