"""``harness record`` and ``harness sim human`` from the command line, over a private adb server
and simulated phones: a task recorded from raw touches (Chinese typed through pinyin), written to
a suite file, shown by ``harness view``, and replayed at another screen size to oracle success;
and the bad inputs: a bad id, an id already in the file, a phone without a touchscreen, a phone
that disconnects mid-recording."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.recorder.human import Cues, SimHuman
from harness.recorder.session import touchscreen_of
from harness.records import iter_steps, read_manifest, read_results
from harness.sim.phone_api import DeviceInfo
from harness.core.tasks import load_file, load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tasks" / "sim"


def cli(adb, *args: str, **kw) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args] + (["--adb-port", str(adb.port)] if kw.get("port", True) else [])


def env(adb) -> dict[str, str]:
    return dict(os.environ, ANDROID_ADB_SERVER_PORT=str(adb.port))


def start_record(adb, serial: str, task_id: str, out: Path, run_dir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(cli(adb, "record", "--device", serial, "--from", str(SUITE), "--id", task_id,
                                "--out", str(out), "--run-dir", str(run_dir), *extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(adb))


@pytest.mark.slow
def test_record_a_chinese_task_view_it_and_replay_it_at_another_size(serve_sim, adb, tmp_path):
    phone = serve_sim(720, 1600)
    task_id = "contacts_add_full_favourite_zh"
    out, run_dir = tmp_path / "mine.yaml", tmp_path / "rec"
    rec = start_record(adb, phone.serial, task_id, out, run_dir)
    human = subprocess.Popen(cli(adb, "sim", "human", "--device", phone.serial, "--suite", str(SUITE), "--task", task_id,
                                 "--follow", "--json"), stdin=rec.stdout, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env(adb))
    for line in human.stderr:  # the person is done: Ctrl-C on the recorder (a terminal sends it to both)
        if "waiting for the recorder's last lines" in line:
            break
    rec.send_signal(signal.SIGINT)
    human.send_signal(signal.SIGINT)
    shown, _ = human.communicate(timeout=120)
    _, err = rec.communicate(timeout=60)
    assert human.returncode == 0 and rec.returncode == 0, err
    report = json.loads(shown.strip().splitlines()[-1])
    assert "[ready] gestures=0 steps=0" in shown  # the recorder's output, passed through
    # ... to its end: the recorder's closing lines come through the pipe too (issue 37: they were cut off)
    assert "10 step(s) recorded: c = 11" in shown and f"task {task_id!r} created in {out}" in shown, shown

    [task] = load_file(out)[0]
    original = load_suite(SUITE).by_id()[task_id]
    # c: the gestures made (open_app was one tap) and the closing finish
    assert len(task.reference) == task.reference_steps == report["gestures"] + 1 == 11
    typed = [(s.model_extra or {})["text"] for s in task.reference if s.type == "type"]
    assert typed == ["陈晓明", "139 0571 2266", "xiaoming.chen@163.com"]  # read from the field, exactly
    assert report["touches"] > 40  # ... though typed key by key, pinyin and candidates included
    assert task.reference[0].target.text == "联系人" and task.reference[-1].type == "finish"
    assert task.success == original.success and task.setup == original.setup
    [written] = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert [m["check"] for m in written["milestones"]][:2] == [  # draft milestones where the page changed
        {"path": "screen.page", "eq": "contacts/home"}, {"path": "screen.page", "eq": "contacts/edit"}]
    assert [m["reference_step"] for m in written["milestones"]][:2] == [1, 2]

    # the trajectory is a run folder: manifest, one step per action with its screens, a result
    manifest = read_manifest(run_dir)
    assert manifest["kind"] == "crate-harness record" and "0-4095" in manifest["touchscreen"]
    [result] = read_results(run_dir)
    assert result.status == "finished" and result.steps == 10 and result.cap == 23
    steps = list(iter_steps(run_dir / "episodes" / task_id))
    assert len(steps) == 10 and all(s.screen_before and s.screen_after for s in steps)
    assert steps[3].action == {"type": "type", "text": "陈晓明", "submit": False}
    assert (run_dir / "tasks.yaml").read_text(encoding="utf-8").count(task_id) == 1
    view = subprocess.run(cli(adb, "view", str(run_dir), "--no-serve", port=False), capture_output=True, text=True)
    assert view.returncode == 0, view.stderr
    html = "".join(p.read_text(encoding="utf-8") for p in run_dir.rglob("*.html"))
    assert "陈晓明" in html and "新建一个联系人" in html

    # the recorded reference replays on a bigger phone, and the oracle says the task is done
    big = serve_sim(1440, 3120)
    run = subprocess.run(cli(adb, "run", "--suite", str(out), "--device", big.serial, "--agent", "replay",
                             "--judge", "oracle", "--out", str(tmp_path / "replay"), port=False),
                         capture_output=True, text=True, env=env(adb), timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    [replayed] = read_results(tmp_path / "replay")
    assert replayed.verdicts["oracle"] is True, replayed.judge_details


def test_bad_input_is_refused_before_recording(serve_sim, adb, tmp_path):
    phone = serve_sim(720, 1600)
    out = tmp_path / "mine.yaml"
    bad = subprocess.run(cli(adb, "record", "--device", phone.serial, "--id", "bad id!", "--instruction", "x",
                             "--out", str(out), "--run-dir", str(tmp_path / "r1")), capture_output=True, text=True, env=env(adb))
    assert bad.returncode == 2 and "--id: 'bad id!' is not a valid task id" in bad.stderr
    assert not out.exists() and not (tmp_path / "r1").exists()

    out.write_text("# mine\n- id: kept_task\n  instruction: keep me\n  reference_steps: 1\n", encoding="utf-8")
    before = out.read_bytes()
    dup = subprocess.run(cli(adb, "record", "--device", phone.serial, "--id", "kept_task", "--instruction", "x",
                             "--out", str(out), "--run-dir", str(tmp_path / "r2")), capture_output=True, text=True, env=env(adb))
    assert dup.returncode == 2 and "already there (--replace" in dup.stderr and out.read_bytes() == before

    bare = serve_sim(720, 1600, info=DeviceInfo(touchscreen=False))
    none = subprocess.run(cli(adb, "record", "--device", bare.serial, "--id", "new_task", "--instruction", "x",
                              "--out", str(out), "--run-dir", str(tmp_path / "r3")), capture_output=True, text=True, env=env(adb))
    assert none.returncode == 2 and "getevent lists no touchscreen" in none.stderr and "gpio-keys" in none.stderr
    assert out.read_bytes() == before


def test_a_phone_lost_mid_recording_keeps_what_was_recorded(serve_sim, adb, tmp_path):
    phone = serve_sim(720, 1600)
    task = load_suite(SUITE).by_id()["contacts_add_jordan"]
    out, run_dir = tmp_path / "mine.yaml", tmp_path / "rec"
    rec = start_record(adb, phone.serial, task.id, out, run_dir)
    device = phone.device()
    human = SimHuman(device, touchscreen_of(device)[0], cues=Cues(rec.stdout, lambda line: None), say=lambda m: None)
    partial = task.model_copy(update={"reference": task.reference[:3]})  # open Contacts, +, the name field
    report = human.perform(partial)
    assert report.gestures == 3
    phone.stop()  # the phone goes away (cable pulled)
    _, err = rec.communicate(timeout=120)
    assert rec.returncode == 3, err
    assert "stopped after step 3" in err and "is unchanged" in err and not out.exists()
    [result] = read_results(run_dir)
    assert result.status == "infra_error" and "recording stopped after step 3" in result.error
    assert len(list(iter_steps(run_dir / "episodes" / task.id))) == 3
    [kept] = load_file(run_dir / "tasks.yaml")[0]
    assert [s.type for s in kept.reference] == ["click", "click", "click", "finish"] and kept.reference_steps == 4
    assert "stopped after step 3" in kept.source


def test_a_new_task_with_an_answer_recorded_then_judged_by_the_oracle(serve_sim, adb, tmp_path):
    """A task that is not in any suite: instruction and answer from the command line, setup from
    the phone, apps from what was visited, and the answer as the last step and the expected one."""
    phone = serve_sim(720, 1600, locale="zh")
    out, run_dir = tmp_path / "mine.yaml", tmp_path / "rec"
    rec = subprocess.Popen(cli(adb, "record", "--device", phone.serial, "--id", "my.wifi-password", "--language", "zh",
                               "--instruction", "访客 Wi-Fi 的密码是什么？", "--answer", "lemon-tree-42",
                               "--out", str(out), "--run-dir", str(run_dir)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(adb))
    device = phone.device()
    human = SimHuman(device, touchscreen_of(device)[0], cues=Cues(rec.stdout, lambda line: None), say=lambda m: None)
    report = human.perform(load_suite(SUITE).by_id()["notes_guest_wifi_query"])
    rec.send_signal(signal.SIGINT)
    _, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, err
    [task] = load_file(out)[0]
    assert task.reference_steps == report.gestures + 2 == 4 and task.answer == "lemon-tree-42"
    assert [s.type for s in task.reference] == ["click", "click", "answer", "finish"]
    assert task.apps == ["com.crate.notes"] and task.setup.sim.locale == "zh" and task.success is None
    run = subprocess.run(cli(adb, "run", "--suite", str(out), "--device", serve_sim(1080, 2400).serial, "--agent", "replay",
                             "--judge", "oracle", "--out", str(tmp_path / "replay"), port=False),
                         capture_output=True, text=True, env=env(adb), timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert read_results(tmp_path / "replay")[0].verdicts["oracle"] is True
