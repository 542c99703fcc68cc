"""The starter suite for stock Android apps (tasks/android): it validates, covers the eight stock
apps in English and Chinese, never clears app data, pairs every unsafe task with a safe twin, and is
marked unverified; `--agent replay` on tasks without a reference is refused up front."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.tasks import MilestoneGroup, RISK_CATEGORIES, load_suite

ROOT = Path(__file__).resolve().parent.parent
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
