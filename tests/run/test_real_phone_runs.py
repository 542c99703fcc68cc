"""`harness run` on simulated phones that look like retail phones (``as_phone``: Pixel props, no
simulator markers, no `dumpsys crate_sim`, no reset broadcast), each logging every shell command
it receives, so the tests prove what was and was not run on the device:

* an imported SPA-Bench task (Google Keep) runs with no `pm clear`: its reset force-stops and starts the app, the
  agent types Chinese through ADBKeyboard, CRATE judges from the screens alone (the scripted model
  server), and every value prepare changed is back afterwards;
* a task with `setup.clear` is refused before anything runs unless `--allow-clear`;
* the originals come back after Ctrl-C, and after a SIGKILL with `harness devices restore`;
* a securely locked phone is refused with "unlock the phone";
* a run through `--adb-host`/`--adb-port` (and `ANDROID_ADB_SERVER_ADDRESS`) to a second adb
  server works as through the default one;
* a run on phones that answer in real phones' formats (the shipped device profiles, one phone per
  profile shared by the tests that use it): the reset finds the app it started in front, the steps'
  screenshots are images, prepare's keyboard switch is read back and everything is put back; and
  every command the harness sent that changes nothing is on the read-only list a capture keeps
  (a run and a recording, so a reader added without capture support fails here).

The profiles run here are those whose answers a run reads differently (the app in front, the
screenshots): the Android 13 tablet's window dump (its lock screen's shade had the focus), the
Android 11 emulator's (SDK 30, an emulator's identity), the Galaxy Z Flip4's three displays
(screencap's warning, then ``-d`` the focused display). The type A, vivo and Pixel 8 profiles
print the Pixel 8's window dumps and screenshots: what they change, the touchscreen, is the
recorder's to read (tests/recorder/test_record_on_profiles.py); the Pixel 8 is the phone of the
read-only list's test.

Kill points are states, not moments: phones in this process hold a chosen command until the test
has signalled the runner (tests/fakes/held_commands.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.device.adb_server import AdbServer
from harness.device.prepare import ANIMATION_SCALES, Journal
from harness.device.text_input import ADB_IME
from harness.records import iter_steps, read_manifest, read_results
from harness.sim.command_log import read_command_log, ran
from harness.sim.phone import LATIN_IME
from tests.fakes.held_commands import HeldCommands
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.fakes.tcp_forward import TcpForward
from tests.judges.helpers import good_reply
from tests.phone_commands import not_on_the_list
from tests.recorder.recording import record_task
from tests.shared_data import reference

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ("stay_on_while_plugged_in", *ANIMATION_SCALES)
PREPARED = {"stay_on_while_plugged_in": "7", **{k: "0" for k in ANIMATION_SCALES}}
KEEP = "com.google.android.keep"  # SPA-Bench's keep_notes tasks: the Pixel persona's Notes


@pytest.fixture(autouse=True)
def own_journals(tmp_path, monkeypatch):
    """Journals of this test only (runs and `harness devices` in subprocesses inherit it), so what
    other tests left behind cannot be mistaken for this test's."""
    monkeypatch.setenv("CRATE_HARNESS_STATE", str(tmp_path / "state"))


def _harness(args: list[str], adb_port: int | None, **env: str) -> subprocess.Popen:
    e = dict(os.environ, **env)
    if adb_port is not None:
        e["ANDROID_ADB_SERVER_PORT"] = str(adb_port)
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], env=e, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _done(p: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def _globals(sim) -> dict[str, str]:
    return {k: sim.handle.shell.settings["global"][k] for k in SETTINGS}


def _suite(tmp_path: Path, tasks: list[dict]) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(tasks, allow_unicode=True), encoding="utf-8")
    return path


CONTACTS = "com.google.android.contacts"  # the Pixel persona's Contacts
CONTACTS_TASK = {"id": "contacts_stop", "instruction": "Open the contacts list.", "apps": [CONTACTS],
                 "reference_steps": 1, "setup": {"stop": [CONTACTS], "start": CONTACTS}}


@pytest.mark.slow
def test_imported_spa_bench_task_runs_on_a_phone_without_pm_clear(adb, serve_sim, tmp_path):
    spa_eng = reference("spa-bench", "single-app-ENG.csv")  # ../shared beside the repository, as on CI
    log = tmp_path / "commands.jsonl"
    sim = serve_sim(as_phone=True, command_log=log)
    originals = _globals(sim)
    suite = tmp_path / "spa"
    p = _harness(["tasks", "import", "spa-bench", str(spa_eng), "--out", str(suite)], None)
    assert _done(p)[0] == 0
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"keep_notes_0_ENG": [  # Google Keep: the Pixel persona's Notes
        {"type": "click", "target": {"rid": "new_note"}},
        {"type": "click", "target": {"rid": "title_input"}},
        {"type": "type", "text": "代理 Agent"},          # not ASCII: only ADBKeyboard can type it
        {"type": "click", "target": {"rid": "save"}},   # (c = 2: the cap is 5 steps)
        {"type": "finish", "status": "complete"}]}, allow_unicode=True), encoding="utf-8")
    out = tmp_path / "run"
    with ScriptedModelServer(lambda req: Reply(good_reply(req))) as model:
        p = _harness(["run", "--suite", str(suite), "--tasks", "keep_notes_0_ENG", "--device", sim.serial,
                      "--agent", "script", "--agent-opt", f"file={script}", "--judge", "crate",
                      "--judge-base-url", model.base_url, "--judge-model", "judge-m", "--judge-retries", "1",
                      "--out", str(out), "--quiet"], adb.port)
        rc, stdout, stderr = _done(p)
        assert rc == 0, stdout + stderr
        assert model.requests  # CRATE judged from the screens: a phone has no state to read
    (row,) = read_results(out)
    assert row.status == "finished" and row.verdicts["crate"] is True

    cmds = read_command_log(log)
    lines = [r["line"] for r in cmds]
    assert not ran(cmds, "pm", "clear") and not any("pm clear" in line for line in lines)
    assert ran(cmds, "am", "force-stop") == [["am", "force-stop", KEEP]]
    assert ["am", "start", "-W", "-n", f"{KEEP}/com.google.android.keep.activities.BrowseActivity"] in \
        ran(cmds, "am", "start")
    assert not any("dumpsys crate_sim" == line for line in lines[1:]) and not any("RESET" in line for line in lines)
    # prepare's changes come before the episode, their restores after it
    first_reset = lines.index(f"am force-stop {KEEP}")
    for k, v in PREPARED.items():
        assert lines.index(f"settings put global {k} {v}") < first_reset
        assert lines.index(f"settings put global {k} {originals[k]}") > first_reset
    assert lines.index(f"ime set {ADB_IME}") < first_reset < lines.index(f"ime set {LATIN_IME}")
    assert ran(cmds, "am", "broadcast", "-a", "ADB_INPUT_B64")

    state = sim.phone.state_json()  # what really happened, read in-process
    assert any(n["title"] == "代理 Agent" for n in state["apps"]["notes"]["notes"]), state["apps"]["notes"]
    assert _globals(sim) == originals and sim.phone.ime == LATIN_IME and ADB_IME not in sim.phone.enabled_imes
    assert not Journal.pending()

    m = read_manifest(out)
    assert m["devices"][0]["kind"] == "phone" and not m["devices"][0]["simulated"]
    (reset,) = m["resets"]
    assert reset["task"] == "keep_notes_0_ENG" and reset["stopped"] == [KEEP] and reset["complete"]
    assert "cleared" not in reset
    (session,) = m["device_sessions"]
    dev = session["devices"][sim.serial]
    assert dev["prepare"]["changed"] == [f"global {k}" for k in SETTINGS] + ["input method"]
    assert len(dev["restore"]["restored"]) == 5 and not dev["restore"]["failed"]


def test_setup_clear_is_refused_on_a_phone_unless_allowed(adb, serve_sim, tmp_path):
    log = tmp_path / "commands.jsonl"
    sim = serve_sim(as_phone=True, command_log=log)
    task = {**CONTACTS_TASK, "id": "contacts_clear", "setup": {"clear": [CONTACTS], "start": CONTACTS}}
    suite = _suite(tmp_path, [task])
    base = ["run", "--suite", str(suite), "--device", sim.serial, "--agent", "random", "--max-steps", "1", "--quiet"]
    rc, out, err = _done(_harness([*base, "--out", str(tmp_path / "refused")], adb.port))
    assert rc == 2, out + err
    assert "contacts_clear" in err and CONTACTS in err and sim.serial in err and "--allow-clear" in err
    cmds = read_command_log(log)
    assert not ran(cmds, "pm", "clear") and not ran(cmds, "settings", "put") and not ran(cmds, "am", "force-stop")
    assert not (tmp_path / "refused").exists()  # refused before anything ran, or was written

    rc, out, err = _done(_harness([*base, "--allow-clear", "--out", str(tmp_path / "allowed")], adb.port))
    assert rc == 0, out + err
    assert ran(read_command_log(log), "pm", "clear") == [["pm", "clear", CONTACTS]]
    assert read_manifest(tmp_path / "allowed")["resets"][0]["cleared"] == [CONTACTS]


def test_a_securely_locked_phone_is_refused(adb, serve_sim, tmp_path):
    log = tmp_path / "commands.jsonl"
    sim = serve_sim(as_phone=True, command_log=log, lock="pin")
    rc, out, err = _done(_harness(["run", "--suite", str(_suite(tmp_path, [CONTACTS_TASK])), "--device", sim.serial,
                                   "--agent", "random", "--out", str(tmp_path / "run"), "--quiet"], adb.port))
    assert rc == 2 and "unlock the phone" in err, out + err
    assert not ran(read_command_log(log), "settings", "put") and not ran(read_command_log(log), "am")
    assert sim.phone.keyguard.showing and not (tmp_path / "run").exists()  # refused by the preflight: nothing written


@pytest.mark.slow
def test_originals_come_back_after_ctrl_c_and_after_a_crash(adb, serve_sim, tmp_path):
    sim = serve_sim(as_phone=True)
    originals = _globals(sim)
    hold = HeldCommands([sim])
    suite = _suite(tmp_path, [CONTACTS_TASK])
    base = ["run", "--suite", str(suite), "--device", sim.serial, "--agent", "random", "--max-steps", "300", "--quiet"]

    # Ctrl-C while the first episode's reset goes home: the run stops, resumable, and restores
    hold.arm("input", 1)
    p = _harness([*base, "--out", str(tmp_path / "interrupted")], adb.port)
    assert hold.reached.wait(120), p.stderr.read() if p.poll() is not None else "no reset reached"
    assert _globals(sim) == PREPARED and sim.phone.ime == ADB_IME
    p.send_signal(signal.SIGINT)
    hold.release_all()
    rc, out, err = _done(p)
    assert rc == 130, out + err
    assert _globals(sim) == originals and sim.phone.ime == LATIN_IME and not Journal.pending()
    (session,) = read_manifest(tmp_path / "interrupted")["device_sessions"]
    assert len(session["devices"][sim.serial]["restore"]["restored"]) == 5

    # SIGKILL at the same point: nothing is put back by the run itself; the journal survives it
    hold.arm("input", 1)
    p = _harness([*base, "--out", str(tmp_path / "killed")], adb.port)
    assert hold.reached.wait(120)
    p.kill()
    p.wait(30)
    hold.release_all()
    assert _globals(sim) == PREPARED and sim.phone.ime == ADB_IME
    (journal,) = Journal.pending()
    assert journal.serial == sim.serial and len(journal.changes) == 5
    rc, out, err = _done(_harness(["devices", "--json"], adb.port))
    assert rc == 0 and {d["serial"]: d["pending_restore"] for d in json.loads(out)}[sim.serial] == 5
    rc, out, err = _done(_harness(["devices"], adb.port))  # each value to put back, and what the phone holds now
    assert rc == 0 and f"to restore on {sim.serial}, with `harness devices restore {sim.serial}`:" in err, out + err
    assert f"  global window_animation_scale: {originals['window_animation_scale']} (now 0)" in err, err
    assert f"  input method: {LATIN_IME} (now {ADB_IME})" in err, err
    rc, out, err = _done(_harness(["devices", "restore"], adb.port))
    assert rc == 0, out + err
    # the killed run's lock of the phone is taken over, saying from whom (harness/device/phone_lock.py)
    assert f"taking the phone over from pid {p.pid}" in err and "no longer running" in err, err
    assert "window_animation_scale restored to 1.0" in out and "input method restored" in out
    assert _globals(sim) == originals and sim.phone.ime == LATIN_IME and not Journal.pending()
    rc, out, _ = _done(_harness(["devices", "restore"], adb.port))
    assert rc == 0 and "nothing to restore" in out


@pytest.mark.slow
def test_runs_reach_a_second_adb_server_by_host_and_port(adb, serve_sim, tmp_path):
    """The phone is attached only to server B, which is reachable only at 127.0.0.2 (a forward
    standing in for another machine); the environment points at server A, which does not know it."""
    sim = serve_sim(as_phone=True)
    adb.disconnect(sim.serial)
    suite = str(_suite(tmp_path, [CONTACTS_TASK]))
    with AdbServer() as b, TcpForward("127.0.0.2", b.port) as remote:
        serial = b.connect(sim.serial)
        run = ["run", "--suite", suite, "--device", serial, "--agent", "random", "--max-steps", "2", "--quiet"]
        rc, out, err = _done(_harness([*run, "--out", str(tmp_path / "default")], adb.port))
        assert rc == 2 and f"{serial} is not attached to this adb server" in err, out + err  # server A does not have it
        rc, out, err = _done(_harness([*run, "--adb-port", str(b.port), "--out", str(tmp_path / "port")], adb.port))
        assert rc == 0, out + err  # --adb-host 127.0.0.1 is the default host
        rc, out, err = _done(_harness([*run, "--adb-host", "127.0.0.2", "--adb-port", str(remote.port),
                                       "--out", str(tmp_path / "host")], adb.port))
        assert rc == 0, out + err
        rc, out, err = _done(_harness([*run, "--device-backend", "uiautomator2", "--out", str(tmp_path / "env")], None,
                                      ANDROID_ADB_SERVER_ADDRESS="127.0.0.2", ANDROID_ADB_SERVER_PORT=str(remote.port)))
        assert rc == 0, out + err
        rc, out, err = _done(_harness(["devices", "--json", "--adb-host", "127.0.0.2", "--adb-port", str(remote.port)],
                                      adb.port))
        assert rc == 0 and [d["serial"] for d in json.loads(out)] == [serial]
        assert remote.connections > 0
    for name in ("port", "host", "env"):
        (row,) = read_results(tmp_path / name)
        assert row.status == "step_limit" and row.steps == 2, (name, row)
    ep = read_manifest(tmp_path / "host")["device_config"]
    assert (ep["adb_host"], ep["adb_port"]) == ("127.0.0.2", remote.port)
    assert read_manifest(tmp_path / "env")["device_config"]["adb_host"] == "127.0.0.2"


def test_devices_prepare_then_restore_from_the_command_line(adb, serve_sim, tmp_path):
    log = tmp_path / "commands.jsonl"
    sim = serve_sim(as_phone=True, command_log=log)
    originals = _globals(sim)
    rc, out, err = _done(_harness(["devices", "prepare", sim.serial], adb.port))
    assert rc == 0, out + err
    assert "changed global stay_on_while_plugged_in" in out and f"harness devices restore {sim.serial}" in out
    assert _globals(sim) == PREPARED and sim.phone.ime == ADB_IME
    rc, out, err = _done(_harness(["devices", "prepare", sim.serial], adb.port))
    assert rc == 0 and "nothing (already prepared)" in out
    rc, out, err = _done(_harness(["devices", "restore", sim.serial], adb.port))
    assert rc == 0 and _globals(sim) == originals and sim.phone.ime == LATIN_IME
    (journal_dir := Path(os.environ["CRATE_HARNESS_STATE"]) / "devices").mkdir(parents=True, exist_ok=True)
    (journal_dir / "broken.json").write_text("{not json")
    rc, out, err = _done(_harness(["devices", "restore"], adb.port))
    assert rc == 2 and "broken.json" in err and "cannot be read" in err


RUN_PROFILES = ("mtk-tablet-android13", "emulator-android11", "galaxy-z-flip4-multi-display")


def _run_on(adb, phone, tmp_path: Path, steps: int = 2) -> tuple[Path, list[dict]]:
    log = tmp_path / "commands.jsonl"
    phone.fresh(log)
    originals, ime = _globals(phone), phone.phone.ime
    out = tmp_path / "run"
    from harness.cli.main import main  # in this process, beside the phone (the command line itself is tested above)

    # --settle-max 0.5: what is tested is what the phone prints, not how long its screen takes to
    # settle (the default 3 s wait on the random agent's screens was most of each run's time)
    rc = main(["run", "--suite", str(_suite(tmp_path, [CONTACTS_TASK])), "--device", phone.serial, "--agent",
               "random", "--max-steps", str(steps), "--out", str(out), "--adb-port", str(adb.port), "--quiet",
               "--settle-max", "0.5"])
    assert rc == 0
    (row,) = read_results(out)
    assert row.status == "step_limit" and row.steps == steps, row
    m = read_manifest(out)
    (reset,) = m["resets"]
    assert reset["started"] == CONTACTS and reset["complete"], reset  # read back in front
    (session,) = m["device_sessions"]
    dev = session["devices"][phone.serial]
    assert "input method" in dev["prepare"]["changed"] and not dev["restore"]["failed"]
    assert _globals(phone) == originals and phone.phone.ime == ime
    return out, read_command_log(log)


@pytest.mark.parametrize("name", RUN_PROFILES)
def test_a_run_on_a_phone_with_a_real_phones_formats(name, adb, profile_phone, tmp_path):
    phone = profile_phone(name)
    out, cmds = _run_on(adb, phone, tmp_path)
    assert not not_on_the_list(cmds)
    if name == "galaxy-z-flip4-multi-display":  # the warning was seen, the focused display's id passed from then on
        main = "4630947232038877057"
        shots = [r["line"] for r in cmds if r["line"].startswith("screencap")]
        assert shots[0] == "screencap -p" and f"screencap -p -d {main}" in shots
    for step in iter_steps(out / "episodes" / "contacts_stop"):
        assert (out / "episodes" / "contacts_stop" / step.screen_before).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_read_only_command_the_harness_sends_is_on_the_capture_list(adb, profile_phone, tmp_path):
    """prepare, a reset that starts an app, steps, restore, then a recording: each command line the
    phone received either changes it (settings, input, am...) or is on the list a capture asks."""
    from harness.core.tasks import load_suite

    phone = profile_phone("pixel8")
    _, cmds = _run_on(adb, phone, tmp_path)
    task = load_suite(ROOT / "tasks" / "sim").by_id()["clock_turn_off_work_alarm"]
    phone.phone.reset(locale=task.language)  # the task's start (a phone is not reset by the recorder)
    recorded = record_task(phone.device(), task, tmp_path / "rec")
    assert recorded.result.steps == recorded.human.gestures >= 2
    cmds = read_command_log(tmp_path / "commands.jsonl")
    lines = [r["line"] for r in cmds]
    for sent in ("getevent -lt", "getevent -lp", "uiautomator dump ", "dumpsys window displays", "ime list -a -s",
                 "screencap -p", "settings get global window_animation_scale", "wm density"):
        assert any(line.startswith(sent) for line in lines), sent  # the run's readers and the recorder's
    assert not not_on_the_list(cmds), not_on_the_list(cmds)
