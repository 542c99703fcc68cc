"""Issue 37, "the first hour on a real phone": every mistake a new user made that the harness let
through until the phone was prepared, or until 25 episodes had run, is now refused before anything
touches a phone, one line each, exit 2. Each test holds a finding of the issue: on the code before
it, the run went ahead (the phone's command log shows it) or ended in a traceback.

The phone is the simulated one playing a retail Pixel 8 (``--as-phone``), with a command log that
proves what was, and was not, sent to it."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.sim.command_log import read_command_log
from tests.fakes.model_server import Reply, ScriptedModelServer, dead_url, refusing_structured_output
from tests.phone_commands import changes

ROOT = Path(__file__).resolve().parents[2]
ANDROID = str(ROOT / "tasks" / "android")
CLOCK = "android_clock_alarm_7am"          # a safe task the Pixel persona can start
RESET = "android_settings_factory_reset_unsafe"  # an unsafe one it can start too


@pytest.fixture
def pixel(serve_sim, tmp_path):
    log = tmp_path / "commands.jsonl"
    sim = serve_sim(as_phone=True, command_log=log)
    sim.log = log
    return sim


def _run(args: list[str], adb, capsys) -> tuple[int, str, str]:
    rc = main([*args, "--adb-port", str(adb.port)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _touched(log: Path) -> list[str]:
    """The command lines sent to the phone that change it (prepare, a reset, a tap...)."""
    return [r["line"] for r in read_command_log(log) if any(changes(a) for a in r.get("argv") or [])] \
        if log.exists() else []


def _errors(err: str) -> list[str]:
    lines = [line for line in err.splitlines() if line.strip()]
    assert all(line.startswith("harness: error: ") for line in lines), err  # one line each, no traceback
    return lines


# --- finding 1: --resume only resumes ------------------------------------------------------------
def test_resume_into_a_folder_with_no_run_is_refused_with_its_path(adb, pixel, tmp_path, capsys):
    for out in (tmp_path / "typo", tmp_path / "empty"):
        if out.name == "empty":
            out.mkdir()
        rc, _, err = _run(["run", "--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial, "--agent", "random",
                           "--max-steps", "1", "--out", str(out), "--resume"], adb, capsys)
        assert rc == 2, err
        (line,) = _errors(err)
        assert "--resume" in line and str(out) in line and "no run" in line, line
        assert not (out / "results.jsonl").exists() and not (out / "manifest.json").exists()
    assert _touched(pixel.log) == []  # no episode, no prepare: the phone was only looked at


def test_resume_starts_a_run_killed_before_it_wrote_its_manifest(adb, pixel, tmp_path, capsys):
    """A run's own folder (its empty results file, nothing foreign) left by a kill in the moment
    before its manifest: nothing was recorded, and --resume starts it, saying so."""
    out = tmp_path / "killed"
    (out / "episodes").mkdir(parents=True)
    (out / "results.jsonl").write_bytes(b"")
    (out / ".lock").write_bytes(b"")
    rc, _, err = _run(["run", "--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial, "--agent", "finish",
                       "--out", str(out), "--resume"], adb, capsys)
    assert rc == 0, err
    assert "stopped before it wrote its manifest: nothing was recorded, so --resume starts it" in err, err
    assert (out / "manifest.json").is_file()


def test_a_new_run_into_a_folder_that_is_not_a_run_is_refused(adb, pixel, tmp_path, capsys):
    out = tmp_path / "Documents"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    rc, _, err = _run(["run", "--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial, "--agent", "random",
                       "--max-steps", "1", "--out", str(out)], adb, capsys)
    assert rc == 2, err
    (line,) = _errors(err)
    assert "not a run folder" in line and "thesis.tex" in line, line
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"] and _touched(pixel.log) == []



def test_a_new_run_into_a_folder_that_holds_a_run_is_refused_by_preflight_as_by_run(adb, pixel, tmp_path, capsys):
    """``harness preflight`` said "free for a new run" of a folder holding a run, which ``harness run``
    then refused (found walking docs/quickstart.md from a fresh clone): both now refuse it up front,
    naming --resume, and nothing recorded is touched; with --resume both go ahead."""
    out = tmp_path / "first"
    args = ["--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial, "--agent", "finish", "--out", str(out)]
    rc, _, err = _run(["run", *args], adb, capsys)
    assert rc == 0, err
    def records() -> dict:
        return {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".lock"}

    recorded, touched = records(), _touched(pixel.log)
    for command in ("preflight", "run"):
        rc, printed, err = _run([command, *args], adb, capsys)
        assert rc == 2, printed + err
        (line,) = _errors(err)
        assert f"--out {out} already holds a run" in line and "pass --resume" in line, line
        assert "free for a new run" not in printed
    assert records() == recorded
    assert _touched(pixel.log) == touched  # refused before the phone was prepared again
    rc, printed, err = _run(["preflight", *args, "--resume"], adb, capsys)
    assert rc == 0 and f"ok: run folder {out}: a run to continue (--resume)" in printed, printed + err

# --- finding 2: every model endpoint answers before the phone is touched ------------------------------
def test_dead_endpoints_stop_the_run_before_the_phone_is_touched(adb, pixel, tmp_path, capsys):
    agent_url, judge_url = dead_url(), dead_url()
    t0 = time.monotonic()
    rc, _, err = _run(["run", "--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial, "--agent", "uitars",
                       "--model-base-url", agent_url, "--model", "ui-tars", "--judge", "crate-s", "--monitor", "crate-s",
                       "--monitor-mode", "gate", "--judge-base-url", judge_url, "--judge-model", "qwen",
                       "--out", str(tmp_path / "run")], adb, capsys)
    assert rc == 2, err
    lines = _errors(err)
    assert len(lines) == 2, lines  # one line per dead endpoint, each with its URL and error
    assert agent_url in lines[0] and "agent" in lines[0] and "Connection refused" in lines[0], lines
    assert judge_url in lines[1] and "--judge-base-url" in lines[1] and "Connection refused" in lines[1], lines
    assert time.monotonic() - t0 < 30  # not 14 s an episode
    assert _touched(pixel.log) == [] and not (tmp_path / "run").exists()


def test_the_probe_is_made_as_the_run_calls_the_endpoint(adb, pixel, tmp_path, capsys, monkeypatch):
    """/models then one tiny request per endpoint, with the run's key rule (a named variable goes to
    its endpoint), model name and structured-output choice: a server that refuses response_format
    for the judge model is learned before the run, and the model it serves is named when the run's
    is not among them."""
    monkeypatch.setenv("I37_JUDGE_KEY", "sk-judge-secret")
    reply = refusing_structured_output({"judge-refusing"}, lambda req: Reply('{"ok": true}'))
    with ScriptedModelServer(reply, model="judge-refusing", probes=None) as s:
        rc, out, err = _run(["preflight", "--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial,
                             "--agent", "finish", "--judge", "crate-s", "--judge-base-url", s.base_url,
                             "--judge-model", "judge-refusing", "--judge-api-key-env", "I37_JUDGE_KEY",
                             "--out", str(tmp_path / "run")], adb, capsys)
        assert rc == 0, err
        assert [r["model"] for r in s.requests] == ["judge-refusing", "judge-refusing"]  # refused, then plain text
        assert "response_format" in s.requests[0] and "response_format" not in s.requests[1]
        assert all(h.get("authorization") == "Bearer sk-judge-secret" for h in s.headers)
        assert "structured output: none" in out and "sk-judge-secret" not in out + err, out
        assert "preflight passed" in out and not (tmp_path / "run").exists()  # preflight writes nothing
    with ScriptedModelServer(lambda req: Reply(status=404, error="The model `ui-tars-typo` does not exist."),
                             model="ui-tars-1.5-7b", probes=None) as s:
        rc, _, err = _run(["preflight", "--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial,
                           "--agent", "uitars", "--model-base-url", s.base_url, "--model", "ui-tars-typo"], adb, capsys)
    assert rc == 2, err
    (line,) = _errors(err)
    assert "HTTP 404" in line and "it serves ui-tars-1.5-7b, not 'ui-tars-typo'" in line, line
    assert _touched(pixel.log) == []


# --- finding 6: accepted, then fails every episode; runs unguarded without a word -------------------
def test_the_oracle_on_a_phone_is_refused_up_front(adb, pixel, tmp_path, capsys):
    rc, _, err = _run(["run", "--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial, "--agent", "random",
                       "--judge", "oracle", "--out", str(tmp_path / "run")], adb, capsys)
    assert rc == 2, err
    (line,) = _errors(err)
    assert "judge 'oracle'" in line and "simulated phone" in line and pixel.serial in line, line
    assert _touched(pixel.log) == []


def test_unsafe_tasks_on_a_phone_without_a_gate_are_refused_unless_allowed(adb, pixel, tmp_path, capsys):
    base = ["run", "--suite", ANDROID, "--tasks", f"{CLOCK},{RESET}", "--device", pixel.serial, "--agent", "finish"]
    rc, _, err = _run([*base, "--out", str(tmp_path / "refused")], adb, capsys)
    assert rc == 2, err
    (line,) = _errors(err)
    assert RESET in line and "--allow-unguarded-unsafe" in line and "--monitor crate-s --monitor-mode gate" in line
    assert _touched(pixel.log) == []
    rc, _, err = _run([*base, "--allow-unguarded-unsafe", "--out", str(tmp_path / "allowed")], adb, capsys)
    assert rc == 0, err
    assert "note: 1 unsafe task(s) will run" in err and RESET in err  # said, not silent
    # a gate monitor is what the refusal asks for: with one, no flag is needed
    with ScriptedModelServer(lambda req: Reply(json.dumps({"reason": "fine", "category": "none", "risky": False,
                                                             "score": 0.0}))) as s:
        rc, _, err = _run([*base, "--monitor", "crate-s", "--monitor-mode", "gate", "--judge-base-url", s.base_url,
                           "--judge-model", "j", "--out", str(tmp_path / "gated")], adb, capsys)
    assert rc == 0, err


# --- finding 7: --size the phone cannot take: refused before prepare, not a traceback after it ------
@pytest.mark.parametrize("command", ["run", "devices prepare"])
def test_a_size_the_phone_cannot_take_is_refused_before_prepare(adb, pixel, tmp_path, capsys, command):
    args = (["run", "--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial, "--agent", "random",
             "--out", str(tmp_path / "run")] if command == "run" else ["devices", "prepare", pixel.serial])
    rc, _, err = _run([*args, "--size", "99999x1"], adb, capsys)
    assert rc == 2, err
    (line,) = _errors(err)
    assert "--size 99999x1" in line and "1080x2400" in line and "2160x4800" in line, line
    assert _touched(pixel.log) == []  # nothing prepared, so nothing left to restore


# --- finding 8: a wrong --device, a taken --watch-port ---------------------------------------------
def test_a_wrong_serial_lists_the_attached_devices(adb, pixel, tmp_path, capsys):
    rc, _, err = _run(["run", "--suite", ANDROID, "--tasks", CLOCK, "--device", "emulator-5554", "--agent", "random",
                       "--out", str(tmp_path / "run")], adb, capsys)
    assert rc == 2, err
    (line,) = _errors(err)
    assert "emulator-5554 is not attached" in line and f"{pixel.serial} (device)" in line, line


def test_a_taken_watch_port_is_refused_before_the_phone_is_prepared(adb, pixel, tmp_path, capsys):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    port = squatter.getsockname()[1]
    try:
        rc, _, err = _run(["run", "--suite", ANDROID, "--tasks", CLOCK, "--device", pixel.serial, "--agent", "random",
                           "--watch", "--watch-port", str(port), "--out", str(tmp_path / "run")], adb, capsys)
    finally:
        squatter.close()
    assert rc == 2, err
    (line,) = _errors(err)
    assert f"--watch-port {port}" in line and "--watch-port 0" in line, line
    assert _touched(pixel.log) == []


def test_harness_preflight_says_what_passed(adb, pixel, tmp_path, capsys):
    with ScriptedModelServer() as s:
        rc, out, err = _run(["preflight", "--suite", ANDROID, "--tasks", f"{CLOCK},android_calendar_dentist",
                             "--device", pixel.serial, "--agent", "uitars", "--model-base-url", s.base_url,
                             "--model", "ui-tars", "--watch", "--watch-port", "0", "--out", str(tmp_path / "run")],
                            adb, capsys)
    assert rc == 0, err
    assert len(s.probes) == 1 and s.requests == []
    assert f"ok: the agent model endpoint {s.base_url}" in out and f"ok: device {pixel.serial}: phone, Pixel 8" in out
    assert "note: skipped android_calendar_dentist: needs com.google.android.calendar" in out
    assert "preflight passed in" in out and "1 task(s) can run on 1 device(s)" in out, out
    assert _touched(pixel.log) == [] and not (tmp_path / "run").exists()


def test_harness_record_checks_the_phone_first(adb, serve_sim, tmp_path, capsys):
    """A wrong serial lists the attached phones; a PIN lock is refused before the recording starts
    (the person's touches would put the secret into the task file)."""
    locked = serve_sim(as_phone=True, lock="pin", command_log=tmp_path / "locked.jsonl")
    base = ["record", "--id", "t1", "--instruction", "Open the clock", "--out", str(tmp_path / "mine.yaml"),
            "--until-idle", "1", "--run-dir", str(tmp_path / "rec")]
    rc, _, err = _run([*base, "--device", "192.0.2.1:5555"], adb, capsys)
    assert rc == 2, err
    (line,) = _errors(err)
    assert "192.0.2.1:5555 is not attached" in line and f"{locked.serial} (device)" in line, line
    rc, _, err = _run([*base, "--device", locked.serial], adb, capsys)
    assert rc == 2, err
    (line,) = _errors(err)
    assert "locked with a PIN, pattern or password" in line, line
    assert not (tmp_path / "mine.yaml").exists() and not (tmp_path / "rec").exists()
    assert _touched(tmp_path / "locked.jsonl") == []


def test_a_farms_phones_meet_the_same_rules_before_their_actors_prepare_them():
    """--cluster: the nodes describe their phones; the oracle on a phone and unsafe tasks with no
    gate on a real phone are refused from those descriptions (harness.farm.driver.Farm calls this
    before it starts an actor), the simulated phone passes."""
    from harness.core.tasks import load_suite
    from harness.preflight import DeviceNeeds, Plan, PreflightFailed
    from harness.preflight.plan import check_described

    tasks = load_suite(ANDROID).select([CLOCK, RESET])
    phone = {"serial": "R58M1", "node": "lab-2", "kind": "phone", "model": "SM-S911B", "simulated": False}
    sim = {"serial": "127.0.0.1:6520", "node": "lab-1", "kind": "sim", "model": "sim", "simulated": True}
    plan = Plan(needs=DeviceNeeds(simulated=["judge 'oracle'"], tasks=tasks), gates=[])
    with pytest.raises(PreflightFailed) as e:
        check_described(plan, [sim, phone])
    lines = [p.text for p in e.value.problems]
    assert len(lines) == 2 and "lab-2/R58M1" in lines[0] and "judge 'oracle'" in lines[0], lines
    assert RESET in lines[1] and "--allow-unguarded-unsafe" in lines[1], lines
    check_described(plan, [sim])  # nothing to refuse on the simulated phone
    check_described(Plan(needs=DeviceNeeds(tasks=tasks), gates=["crate-s"]), [phone])  # gated: fine
