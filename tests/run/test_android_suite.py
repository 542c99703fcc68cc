"""The starter suite for stock Android apps (tasks/android): it validates, covers the eight stock
apps in English and Chinese, never clears app data, pairs every unsafe task with a safe twin, and is
marked unverified; `--agent replay` on tasks without a reference is refused up front."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.core.tasks import MilestoneGroup, RISK_CATEGORIES, load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tasks" / "android"
STOCK = {"com.android.settings", "com.google.android.deskclock", "com.google.android.contacts",
         "com.google.android.calendar", "com.android.chrome", "com.google.android.apps.nbu.files",
         "com.google.android.apps.messaging", "com.google.android.GoogleCamera"}


def _milestones(t):
    for m in t.milestones:
        yield from (m.unordered if isinstance(m, MilestoneGroup) else [m])


def test_the_suite_validates_and_covers_stock_apps():
    tasks = load_suite(SUITE).tasks
    assert 30 <= len(tasks) <= 40
    assert {t.language for t in tasks} == {"en", "zh"} and sum(t.language == "zh" for t in tasks) >= 12
    assert {a for t in tasks for a in t.apps} == STOCK
    by_id = {t.id: t for t in tasks}
    for t in tasks:
        assert not t.verified and t.reference is None and t.reference_steps >= 1, t.id
        assert not t.setup.clear and t.setup.sim is None, t.id           # nothing a phone's owner would lose
        assert t.setup.start in t.setup.stop and set(t.setup.stop) <= set(t.apps), t.id
        assert t.milestones and any(m.key_text for m in _milestones(t)), t.id
        assert all(m.check is None for m in _milestones(t)), t.id    # no state to check on a phone
        assert t.key_components, t.id
        if t.safety.label == "unsafe":
            assert t.safety.category in RISK_CATEGORIES and t.safety.note, t.id
            twin = by_id[t.safety.twin]
            assert twin.safety.label == "safe" and twin.safety.twin == t.id and twin.apps[0] == t.apps[0], t.id
    assert sum(t.safety.label == "unsafe" for t in tasks) >= 6


def _harness(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDROID_ADB")}
    env["ANDROID_ADB_SERVER_PORT"] = "9"  # nothing listens: a command that touched adb would fail on it
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_tasks_list_shows_them_unverified():
    p = _harness("tasks", "list", "--suite", str(SUITE))
    assert p.returncode == 0, p.stderr
    assert "verified" in p.stdout and "not verified on a device" in p.stderr


def test_replay_is_refused_up_front_for_tasks_without_a_reference(tmp_path):
    out = tmp_path / "run"
    p = _harness("run", "--suite", str(SUITE), "--tasks", "android_clock_alarm_7am,android_files_downloads",
                 "--agent", "replay", "--out", str(out))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "'android_clock_alarm_7am' has no reference trajectory" in p.stderr
    assert "android_files_downloads" in p.stderr and "adb" not in p.stderr.lower()
    assert not out.exists()


# --- on the --as-phone Pixel 8: which tasks it can run, and a missing app said in one line ----------
NOT_ON_THE_SIM = {"com.google.android.calendar", "com.android.chrome", "com.google.android.GoogleCamera"}


def test_the_pixel_persona_runs_the_tasks_of_the_apps_it_has_and_skips_the_rest_naming_the_package(
        adb, serve_sim, tmp_path):
    from harness.preflight.devices import unavailable_tasks

    sim = serve_sim(as_phone=True)
    tasks = load_suite(SUITE).tasks
    skipped = unavailable_tasks(sim.device(), tasks)
    want = {t.id for t in tasks if set(t.setup.packages()) & NOT_ON_THE_SIM}
    assert set(skipped) == want and len(want) == 10 and len(tasks) - len(want) == 25, sorted(skipped)
    for tid, why in skipped.items():
        (pkg,) = set(load_suite(SUITE).by_id()[tid].setup.packages()) & NOT_ON_THE_SIM
        assert why == f"needs {pkg}, not installed on {sim.serial}", why

    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(adb.port)}
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--suite", str(SUITE), "--tasks",
                        "android_calendar_dentist,android_clock_alarm_7am", "--device", sim.serial, "--agent", "random",
                        "--max-steps", "1", "--out", str(out), "--quiet"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (f"skipped android_calendar_dentist: needs com.google.android.calendar, not installed on {sim.serial}"
            in p.stderr.splitlines()), p.stderr
    assert "retrying" not in p.stderr and "monkey" not in p.stderr
    from harness.records import read_manifest, read_results

    (row,) = read_results(out)
    assert row.task_id == "android_clock_alarm_7am" and row.status == "step_limit", row
    assert read_manifest(out)["unavailable"] == [{"task": "android_calendar_dentist", "reason": skipped[
        "android_calendar_dentist"]}]
    assert "skipped, not runnable on these devices: 1 task(s)" in p.stdout

    # nothing it can run: refused before a run folder is made
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--suite", str(SUITE), "--tasks",
                        "android_camera_photo", "--device", sim.serial, "--agent", "random", "--out",
                        str(tmp_path / "none")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "nothing to run: android_camera_photo needs com.google.android.GoogleCamera" in p.stderr
    assert not (tmp_path / "none").exists()


def test_an_app_missing_at_reset_ends_the_episode_task_error_in_one_line_never_retried(serve_sim, tmp_path):
    """The run's check before it starts is passed by (an app uninstalled since, a farm's phone): the
    reset names the package, nothing is stopped or started, and the episode is neither the agent's
    failure nor an infrastructure fault."""
    from harness.device.base import TaskUnavailable
    from harness.records import RunWriter, read_results
    from harness.report.episodes import load_episodes
    from harness.report.tables import summarise
    from harness.sim.command_log import read_command_log, ran
    from harness.run.suite import Plugins, SuiteConfig, run_suite
    from agents.random_agent import RandomAgent, RandomConfig

    log = tmp_path / "cmds.jsonl"
    sim = serve_sim(as_phone=True, command_log=log)
    task = load_suite(SUITE).by_id()["android_calendar_dentist"]
    dev = sim.device()
    try:
        dev.reset(task.setup, task.language)
        raise AssertionError("the reset went on without the app")
    except TaskUnavailable as e:
        assert str(e) == f"needs com.google.android.calendar, not installed on {sim.serial}"
    assert not ran(read_command_log(log), "am") and not ran(read_command_log(log), "monkey")
    with RunWriter(tmp_path / "run", fsync=False) as w:
        rep = run_suite([task], [dev], Plugins(agent=lambda: RandomAgent(RandomConfig())), w,
                        SuiteConfig(agent_name="random", reconnect_timeout=0.1))
    (row,) = read_results(tmp_path / "run")
    assert not rep.error and not rep.not_run
    assert row.status == "task_error" and row.attempt == 1 and row.steps == 0 and row.verdicts == {}, row
    assert row.error == f"needs com.google.android.calendar, not installed on {sim.serial}"
    (ep,) = load_episodes([tmp_path / "run"])  # counted apart, and left out of every rate
    got = summarise([ep], [], [], None)
    assert (got["episodes"], got["task_errors"], got["infra_errors"], got["scored"]) == (1, 1, 0, 0)
    import csv
    import io

    from harness.report.table_formats import format_csv, format_md
    from harness.report.tables import build_report

    rep = build_report([str(tmp_path / "run")], ["agent"], resamples=10)
    (line,) = csv.DictReader(io.StringIO(format_csv(rep)))
    assert (line["episodes"], line["task_errors"], line["infra_errors"], line["scored"]) == ("1", "1", "0", "0")
    assert "| task err |" in format_md(rep)
