"""Issue 37, finding 8: the smaller things a new user tripped on in the first hour, each held here
(the preflight's own are in tests/preflight, the terminal's Enter in tests/live/test_ask_runner.py,
the viewer's index in tests/report/test_viewer_index.py, the live page in tests/live/test_live_first_hour.py,
the recorder's closing lines through `harness sim human --follow` in tests/recorder/test_record_cli.py).
On the code before the issue each of these printed what its docstring quotes."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from harness.cli.main import main
from harness.device.adb_server import AdbServer
from harness.records import EpisodeResult, RunWriter
from harness.run.suite import SuiteReport

ROOT = Path(__file__).resolve().parents[2]
ANDROID = str(ROOT / "tasks" / "android")


def _harness(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def test_a_mistyped_task_id_names_the_suite_once_and_suggests_the_near_ones(capsys):
    """It listed all eight files of tasks/android first, then the unknown id, and suggested nothing."""
    rc = main(["run", "--suite", ANDROID, "--tasks", "android_clock_alarm_7", "--agent", "random", "--out", "x"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert ".yaml" not in err and ANDROID in err, err
    assert "'android_clock_alarm_7' (did you mean 'android_clock_alarm_7am'?)" in err, err


def test_sim_serve_names_harness_adb_and_a_busy_port_says_what_to_do(tmp_path):
    """The banner said `adb connect` (no adb on PATH: the docs say `harness adb connect`); a busy
    port said `cannot serve on ... or write None` with no hint of --port 0."""
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    port = squatter.getsockname()[1]
    try:
        p = _harness("sim", "serve", "--port", str(port))
    finally:
        squatter.close()
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "write None" not in p.stderr and f"127.0.0.1:{port}" in p.stderr and "--port 0" in p.stderr, p.stderr
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "sim", "serve", "--port", "0"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(10)
    assert "connect with: harness adb connect 127.0.0.1:" in banner, banner
    run = tmp_path / "run"
    with RunWriter(run, fsync=False) as w:
        w.write_manifest({"kind": "test"})
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    try:
        p = _harness("view", str(run), "--port", str(squatter.getsockname()[1]))
    finally:
        squatter.close()
    assert p.returncode == 2 and "--port 0" in p.stderr and p.stderr.count("\n") == 1, p.stderr


def test_tasks_list_in_a_pipe_is_one_task_a_line():
    """In a pipe it drew a table 80 columns wide with every column 7 characters: ids cut."""
    p = _harness("tasks", "list", "--suite", ANDROID)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split("\t") == ["id", "lang", "c", "cap", "safety", "categories", "milestones", "verified",
                                    "instruction"]
    assert len(lines) == 36 and all(len(line.split("\t")) == 9 for line in lines), lines[:3]
    assert "android_settings_factory_reset_unsafe" in {line.split("\t")[0] for line in lines}


def test_devices_with_nothing_attached_says_so_and_how_to_attach():
    """It printed a bare header."""
    server = AdbServer().start()
    try:
        p = _harness("devices", "--adb-port", str(server.port))
    finally:
        server.stop()
    assert p.returncode == 0, p.stderr
    assert f"no device attached to the adb server at 127.0.0.1:{server.port}" in p.stderr, p.stderr
    assert "harness adb connect" in p.stderr and "harness sim serve" in p.stderr


def test_devices_on_80_columns_is_one_line_per_device_rather_than_wrapped_cells():
    from harness.cli.devices import print_devices

    cols = ["serial", "state", "kind", "model", "size", "density", "healthy", "to restore", "problem"]
    cells = [["127.0.0.1:40123", "device", "phone", "Pixel 8", "1080x2400", "420", "yes", "-", ""],
             ["emulator-5554", "device", "emulator", "sdk_gphone64_x86_64", "1080x2400", "420", "yes", "5", ""],
             ["R58M123ABC", "unauthorized", "-", "-", "-", "-", "no", "-",
              "unauthorized: accept the USB debugging prompt on the phone"]]
    out = io.StringIO()
    print_devices(Console(file=out, width=80, color_system=None), "3 device(s)", cols, cells)
    text = out.getvalue()
    assert "emulator-5554: device, emulator, sdk_gphone64_x86_64, 1080x2400, 420 dpi, healthy, 5 value(s) to restore" \
        in " ".join(text.split()), text
    out = io.StringIO()
    print_devices(Console(file=out, width=80, color_system=None), "1 device(s)", cols, cells[:1])
    rows = [line for line in out.getvalue().splitlines() if "127.0.0.1:40123" in line]
    assert len(rows) == 1 and "1080x2400" in rows[0] and "Pixel 8" in rows[0], out.getvalue()  # a table, nothing cut
    assert "to restore" not in out.getvalue() and "problem" not in out.getvalue()  # empty columns left out


def test_the_progress_table_keeps_state_and_step_on_80_columns():
    """On an 80-column terminal rich dropped the state and step columns to nothing."""
    from harness.run.suite import LiveProgress

    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    lp = LiveProgress(["127.0.0.1:40123", "emulator-5556"], 25, console=console)
    lp.rows["127.0.0.1:40123"].update(task="android_settings_remove_lock_unsafe_zh", step="3/15", state="running",
                                      action="click(x=540, y=1200) on the button labelled Security settings")
    lp.rows["emulator-5556"].update(task="android_clock_alarm_7am", step="12/15", state="checking",
                                    action="type(text='hello world')")
    console.print(lp._render())
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80, out.getvalue()
    header = next(line for line in lines if "device" in line)
    assert "state" in header and "step" in header and "last action" in header, header
    assert any("running" in line and "3/15" in line for line in lines), out.getvalue()
    assert any("checking" in line and "12/15" in line for line in lines), out.getvalue()


def test_a_multi_device_run_table_says_which_device_played_what(tmp_path):
    from harness.cli.run import print_summary

    run = tmp_path / "run"
    with RunWriter(run, fsync=False) as w:
        w.write_manifest({"kind": "test"})
        for tid, dev in (("a", "emulator-5554"), ("b", "127.0.0.1:6520")):
            w.start_episode(tid)
            w.append_result(EpisodeResult(task_id=tid, agent="x", status="finished", steps=1, cap=3,
                                          verdicts={"oracle": True}, device=dev))
    out = io.StringIO()
    print_summary(str(run), SuiteReport(), file=out)
    text = out.getvalue()
    header = next(line for line in text.splitlines() if "task" in line and "status" in line)
    assert "device" in header and "emulator-5554" in text and "127.0.0.1:6520" in text, text


def _journal(serial: str, adb_port: int, state: Path) -> None:
    """A journal left with one value to put back, as a run leaves it (written in a child process
    whose CRATE_HARNESS_STATE is ``state``)."""
    code = ("from harness.device.prepare import Change, Journal\n"
            f"j = Journal.open({serial!r}, {{'host': '127.0.0.1', 'port': {adb_port}}})\n"
            "j.remember(Change('setting', '1.0', '0', namespace='global', key='window_animation_scale'))\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={**os.environ, "CRATE_HARNESS_STATE": str(state)})


def test_devices_names_the_run_holding_a_phone_and_an_absent_phones_own_server(adb, serve_sim, tmp_path):
    """It offered `harness devices restore` for values a live run was holding (and would have been
    refused), naming no holder; and for a phone of another adb server it printed the garbled
    "with once it is back: `harness devices restore`"."""
    phone = serve_sim()
    state, locks = tmp_path / "state", tmp_path / "locks"
    env = {"CRATE_HARNESS_STATE": str(state), "CRATE_HARNESS_LOCKS": str(locks), "ANDROID_ADB_SERVER_PORT": str(adb.port)}
    _journal(phone.serial, adb.port, state)
    _journal("192.0.2.7:5555", 5999, state)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom harness.device.phone_lock import hold\n"
                               f"hold({phone.serial!r}, '127.0.0.1', {adb.port}, command='harness run --out runs/r1')\n"
                               "print('held', flush=True)\ntime.sleep(120)"],
                              cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        p = _harness("devices", env=env)
    finally:
        holder.kill()
        holder.wait(10)
    text = " ".join((p.stdout + p.stderr).split())
    assert p.returncode == 0, p.stderr
    assert (f"to restore on {phone.serial}, held now by a running command (pid {holder.pid}, `harness run --out "
            "runs/r1`") in text and "puts them back itself when it ends" in text, text
    assert f"`harness devices restore {phone.serial}`" not in text, text
    assert "with once" not in text and ("192.0.2.7:5555, which is not attached to the adb server at 127.0.0.1:"
                                        f"{adb.port}; its journal names the adb server 127.0.0.1:5999") in text, text


def test_the_galaxy_and_vivo_profiles_name_their_devices(profile_phone):
    """Both presented as a Pixel 8 in `harness devices` (their getprop is the Pixel 8's)."""
    assert profile_phone("galaxy-z-flip4-multi-display").fresh().device().describe().model == "Galaxy Z Flip4"
    assert profile_phone("vivo-pad-two-touch").fresh().device().describe().model == "vivo tablet (mt6991)"
    assert profile_phone("pixel8").fresh().device().describe().model == "Pixel 8"


def test_the_readme_installs_the_farm_extra_from_the_checkout():
    """`pip install 'crate-harness[farm]'` names a package that is not published."""
    text = (ROOT / "README.md").read_text(encoding="utf-8") + (ROOT / "docs" / "farm.md").read_text(encoding="utf-8")
    assert "pip install 'crate-harness[farm]'" not in text
    assert "pip install -e '.[farm]'" in text
