"""Rough edges a new user hits: `harness judge --judge oracle` on recordings, the run summary's
unsafe count against its own table and `harness report`, `harness run` without a terminal (silent
until an episode ended), first installs that said nothing, `harness devices` in a pipe, long default
judgement-set names in report columns, and the simulated phone's `tr` ignoring backslash escapes.
Afterwards: each is refused up front or said plainly, counts agree everywhere, and nothing is cut."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.device.adb_server import run_adb
from harness.records import EpisodeResult, RunWriter
from harness.run.suite import describe_progress
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.faults.helpers import ROOT, harness_popen, harness_run, write_suite
from tests.offline_judge import count_judge  # noqa: F401  (registers the count-test judge)
from tests.offline_judge.sample_runs import make_run

pytestmark = pytest.mark.faults


def test_judging_recordings_with_the_oracle_is_refused_up_front(tmp_path, capsys):
    run = make_run(tmp_path / "run", [("a", 2, "finished")])
    with ScriptedModelServer(lambda req: Reply('{"ok": true}')) as s:
        rc = main(["judge", str(run), "--judge", "crate,oracle", "--model-base-url", s.base_url, "--model", "m",
                   "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "'oracle' reads the live phone's state" in err and "harness run --judge oracle" in err, err
    assert s.requests == [] and not (run / "judgements").exists()  # nothing called, nothing written


def test_the_run_summary_counts_unsafe_episodes_as_the_report_does(tmp_path, capsys):
    """A safety judge other than the oracle flags an episode: the summary says 1, as its own table
    and `harness report` do (the summary used to count oracle_unsafe only)."""
    from harness.cli.run import print_summary
    from harness.run.suite import SuiteReport

    run = tmp_path / "run"
    verdicts = [{"oracle": True, "oracle_unsafe": False, "crate-s": True},
                {"oracle": True, "oracle_unsafe": False, "crate-s": False},
                {"oracle": False, "oracle_unsafe": False, "crate-s": "judge_error"}]
    with RunWriter(run, fsync=False) as w:
        w.write_manifest({"kind": "test"})
        for i, v in enumerate(verdicts):
            w.start_episode(f"t{i}")
            w.append_result(EpisodeResult(task_id=f"t{i}", agent="a", status="finished", steps=1, cap=3, verdicts=v))
    out = io.StringIO()
    print_summary(str(run), SuiteReport(), file=out)
    text = " ".join(out.getvalue().split())
    assert "unsafe episodes flagged: 1 (by any of crate-s, oracle_unsafe)" in text, text
    assert main(["report", str(run), "--format", "json", "--resamples", "10"]) == 0
    assert json.loads(capsys.readouterr().out)["groups"][0]["unsafe"] == 1


def test_without_a_terminal_each_step_is_printed_rate_limited():
    """A log shows each device's steps as they happen: an episode's first step always, then at most
    one line per interval per device, saying how many steps it stands for."""
    now = [0.0]
    out = io.StringIO()
    emit = describe_progress(out, step_interval=5.0, clock=lambda: now[0])
    for step in range(1, 13):  # one step a second on device A; B steps slowly
        now[0] = float(step - 1)
        emit("step", {"device": "A", "task": "t", "step": step, "cap": 25, "action": f"click(x={step})"})
        if step in (1, 7):
            emit("step", {"device": "B", "task": "u", "step": 1 if step == 1 else 2, "cap": 5, "action": "back"})
    lines = out.getvalue().splitlines()
    assert lines == ["[A] t: step 1/25 click(x=1)", "[B] u: step 1/5 back",
                     "[A] t: step 6/25 click(x=6) (+4 more since the last line)",
                     "[B] u: step 2/5 back",
                     "[A] t: step 11/25 click(x=11) (+4 more since the last line)"], lines


def test_harness_run_in_a_pipe_shows_steps_before_the_episode_ends(adb, serve_sim, tmp_path):
    phone = serve_sim(width=540, height=1200)
    suite = write_suite(tmp_path / "suite.yaml", ["messages_reply_lena"])
    r = harness_run(["run", "--suite", str(suite), "--device", phone.serial, "--agent", "replay", "--judge", "oracle",
                     "--adb-port", str(adb.port), "--out", str(tmp_path / "run")], adb.port)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    first = next(i for i, x in enumerate(lines) if "messages_reply_lena: step 1/" in x)
    done = next(i for i, x in enumerate(lines) if "messages_reply_lena: finished" in x)
    assert first < done and "open_app" in lines[first], lines


def test_harness_devices_in_a_pipe_prints_whole_serials(adb, serve_sim, tmp_path):
    phones = [serve_sim(width=540, height=1200) for _ in range(2)]
    p = harness_popen(["devices", "--adb-port", str(adb.port)], adb.port, env={"COLUMNS": "40"})
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    lines = out.splitlines()
    head = lines[0].split("\t")
    assert head == ["serial", "state", "kind", "model", "size", "density", "healthy", "to restore", "problem"]
    by_serial = {r["serial"]: r for r in (dict(zip(head, line.split("\t"))) for line in lines[1:])}
    for ph in phones:
        r = by_serial[ph.serial]  # the whole serial, however narrow the terminal there is not
        assert (r["state"], r["size"], r["healthy"]) == ("device", "540x1200", "yes"), r


def test_default_judgement_set_names_keep_report_columns_short(tmp_path, capsys):
    """Two passes with different judge settings and no --judge-set: sets named after the model
    (jm, jm-2), columns count-test@jm and count-test@jm-2 (they were count-test@count-test@jm)."""
    run = make_run(tmp_path / "run", [("a", 1, "finished"), ("b", 1, "finished")])
    answer = lambda req: Reply('{"success": true}' if "FINAL" in json.dumps(req) else '{"ok": true}')  # noqa: E731
    with ScriptedModelServer(answer) as s:
        for tag in ("v1", "v2", "v1"):
            assert main(["judge", str(run), "--judge", "count-test", "--judge-opt", f"tag={tag}",
                         "--model-base-url", s.base_url, "--model", "org/jm", "--retries", "0", "--no-progress",
                         "--no-cache"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in (run / "judgements").iterdir()) == ["jm", "jm-2"]  # the third pass resumed jm
    assert main(["report", str(run), "--format", "json", "--resamples", "10"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["judges"] == ["oracle", "count-test@jm", "count-test@jm-2"], rep["judges"]


def test_the_sim_tr_reads_backslash_escapes_and_classes(adb, serve_sim):
    phone = serve_sim(width=540, height=1200)

    def sh(cmd: str) -> str:
        r = run_adb(["-s", phone.serial, "shell", cmd], adb.port)
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert sh(r"printf 'a\nb\n' | tr '\n' X") == "aXbX"
    assert sh(r"printf 'a\tb\n' | tr -d '\t\n'") == "ab"
    assert sh(r"printf '%s\n' 'a\b' | tr '\\' /") == "a/b\n"
    assert sh(r"echo abc | tr '\141-\142' '\101\102'") == "ABc\n"
    assert sh("echo Hello42 | tr '[:lower:]' '[:upper:]'") == "HELLO42\n"
    assert sh("echo a-b | tr 'a\\-' 'x_'") == "x_b\n"


# --- the first install says what it is doing -----------------------------------------------------------------
def test_scripts_say_what_a_first_install_is_doing(tmp_path):
    """scripts/_venv.sh (behind scripts/test and scripts/demo) on a machine without .venv: it says
    it is creating the environment and installing, and where the log is; the next call, with
    nothing to do, says nothing. (A stand-in python in .venv records what pip was asked, so the
    test needs no network.)"""
    proj = tmp_path / "proj"
    (proj / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "_venv.sh", proj / "scripts" / "_venv.sh")
    shutil.copy(ROOT / "pyproject.toml", proj / "pyproject.toml")
    real_python = shutil.which("python3") or sys.executable
    fake = proj / "fake-python"
    fake.write_text("#!/bin/sh\n"
                    f'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi\n'
                    f'if [ "$1" = "-c" ]; then exec {real_python} "$@"; fi\n'
                    'echo "$@" >> "$(dirname "$0")/../pip-calls"\n')
    fake.chmod(0o755)
    env = dict(os.environ, PYTHON=str(fake))
    first = subprocess.run(["bash", "-c", "source scripts/_venv.sh"], cwd=proj, env=env, capture_output=True, text=True,
                           timeout=60)
    assert first.returncode == 0, first.stderr
    assert "creating .venv" in first.stderr and "installing crate-harness" in first.stderr, first.stderr
    assert ".venv/install.log" in first.stderr and "done" in first.stderr
    assert "install -q -e .[test,farm]" in (proj / ".venv" / "pip-calls").read_text()
    again = subprocess.run(["bash", "-c", "source scripts/_venv.sh"], cwd=proj, env=env, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0 and again.stderr == "" and again.stdout == "", again.stderr
