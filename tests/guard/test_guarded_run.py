"""A guarded session on a task of the simulated suite is an ordinary run: its reset runs first,
the oracle judges it, and `harness judge`, `report` and `view` read it unchanged."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli.main import main
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.offline_judge.test_offline_crate import REPLIES, kind


def _center(xml: str, pattern: str) -> tuple[int, int]:
    for node in re.findall(r"<node [^>]*>", xml):
        if re.search(pattern, node):
            x1, y1, x2, y2 = map(int, re.search(r'bounds="\[(\d+),(\d+)\]\[(\d+),(\d+)\]"', node).groups())
            return (x1 + x2) // 2, (y1 + y2) // 2
    raise AssertionError(f"no node matches {pattern}")


def _do_the_task_by_adb(g) -> None:
    """What an agent speaking only adb does: open Settings, read the screen, tap, tap."""
    assert g.adb("-s", g.serial, "shell", "monkey", "-p", "com.android.settings", "-c",
                 "android.intent.category.LAUNCHER", "1").returncode == 0
    xml = g.adb("-s", g.serial, "exec-out", "uiautomator", "dump", "/dev/tty").stdout.decode()
    x, y = _center(xml, r'text="Network &amp; internet"')
    g.adb("-s", g.serial, "shell", "input", "tap", str(x), str(y))
    xml = g.adb("-s", g.serial, "exec-out", "uiautomator", "dump", "/dev/tty").stdout.decode()
    x, y = _center(xml, r'resource-id="[^"]*wifi_switch"')
    g.adb("-s", g.serial, "shell", "input", "tap", str(x), str(y))


def test_a_task_through_the_guard_is_reset_judged_reported_and_viewed(guard, risky, tmp_path, capsys):
    risky(r"kind='clear_data'")
    g = guard("--suite", "tasks/sim", "--task", "settings_wifi_off")
    _do_the_task_by_adb(g)
    r = g.adb("-s", g.serial, "shell", "pm", "clear", "com.crate.wallet")
    assert r.returncode == 1 and b"refused" in r.stderr
    result = g.end()
    assert result.verdicts["oracle"] is True and result.verdicts["oracle_unsafe"] is False
    assert result.cap == 9 and result.steps == 3 and result.proposed_steps == 4
    steps = g.steps()
    assert [s["executed"] for s in steps] == [True, True, True, False]
    assert all(s["screen_after"] for s in steps[:3]) and steps[3]["screen_after"] is None
    manifest = json.loads((g.out / "manifest.json").read_text())
    assert manifest["kind"] == "crate-harness guard" and manifest["suite"]["path"] == "tasks/sim"

    capsys.readouterr()
    assert main(["report", str(g.out)]) == 0
    report = capsys.readouterr().out
    assert "guarded" in report and "1 blocked" in report
    assert "guard: actions, blocked, refused, unseen channels" in report and "4, 1, 0, 0" in report

    assert main(["view", str(g.out), "--out", str(tmp_path / "pages"), "--no-serve"]) == 0
    page = (tmp_path / "pages" / "report.html").read_text()
    assert "settings_wifi_off" in page

    counts: dict[str, int] = {}

    def reply(req):
        k = kind(req)
        counts[k] = counts.get(k, 0) + 1
        if k == "milestones":
            return Reply(json.dumps({"milestones": [{"idx": 1, "done": True, "last_step": 2},
                                                    {"idx": 2, "done": True, "last_step": 3}]}))
        return Reply(json.dumps(REPLIES[k]))

    with ScriptedModelServer(reply) as s:
        assert main(["judge", str(g.out), "--judge", "crate,crate-s,milestones", "--model-base-url", s.base_url,
                     "--model", "judge-vl"]) == 0
    lines = [json.loads(x) for x in (g.out / "judgements" / "judge-vl" / "results.jsonl").read_text().splitlines()]
    assert set(lines[0]["verdicts"]) >= {"crate", "crate-s", "milestones"}
    assert counts["crate_step"] == 3  # the step that did not run is never put to a model


def test_the_guard_command_ends_on_sigint_and_on_end(adb, serve_sim, tmp_path):
    """`harness guard` as its users start it, in the background: Ctrl-C (SIGINT, which a script's
    background jobs otherwise ignore) and `harness guard --end` each end the episode recorded."""
    from harness.core.ports import free_port

    sim = serve_sim()
    for how in ("sigint", "end", "idle"):
        out, port = tmp_path / how, free_port()
        cmd = [str(Path(sys.executable).parent / "harness"), "guard", "--device", sim.serial, "--port", str(port), "--out", str(out),
               "--instruction", "look around", "--adb-port", str(adb.port)]
        if how == "idle":
            cmd += ["--idle-end", "1"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_ignore_sigint)
        try:
            for _ in range(300):
                if (out / ".guard").exists() or p.poll() is not None:
                    break
                time.sleep(0.1)
            assert (out / ".guard").exists(), p.communicate()[1]
            env_adb = ["-P", str(port), "-s", sim.serial]
            from harness.device.adb_server import adb_path
            subprocess.run([adb_path(), *env_adb, "shell", "input", "keyevent", "4"], timeout=30, check=True)
            if how == "sigint":
                p.send_signal(2)
            elif how == "end":
                assert main(["guard", "--end", "--out", str(out)]) == 0
            stdout, stderr = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 0, stderr
        result = json.loads((out / "results.jsonl").read_text())
        assert result["guard"]["end"] == {"sigint": "interrupt", "end": "end", "idle": "idle"}[how]
        assert result["proposed_steps"] == 1 and b"ended" in stdout
        assert not (out / ".guard").exists()


def _ignore_sigint() -> None:
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as bash leaves it for a script's background job


def test_watch_serves_the_live_page_and_resume_adds_an_episode(guard, risky, tmp_path):
    import urllib.request

    from harness.core.ports import free_port

    risky()
    port = free_port()
    g = guard("--watch", "--watch-port", str(port))
    g.adb("-s", g.serial, "shell", "input", "tap", "10", "10")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
        assert r.status == 200
    g.end()
    again = guard("--out", str(g.out), "--resume", sim=g.sim)
    again.out = g.out
    again.adb("-s", again.serial, "shell", "input", "tap", "20", "20")
    again.end()
    results = [json.loads(x) for x in (g.out / "results.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in results] == ["guard-1", "guard-2"]
    assert [r["proposed_steps"] for r in results] == [1, 1]


def test_bad_set_ups_are_refused_before_the_phone_is_touched(adb, tmp_path, capsys):
    from harness.core.ports import free_port

    port = str(free_port())
    base = ["guard", "--device", "127.0.0.1:1", "--port", port, "--out", str(tmp_path / "r")]
    for extra, why in ((["--instruction", "x", "--adb-port", port], "would be the guard itself"),
                       ([], "--instruction TEXT"), (["--task", "t"], "--suite and --task go together"),
                       (["--suite", "tasks/sim", "--task", "nope"], "no such task"),
                       (["--instruction", "x", "--monitor-mode", "reflect"], "invalid choice")):
        with pytest.raises(SystemExit) if "invalid choice" in why else _nothing():
            assert main([*base, *extra, "--adb-port", extra[-1] if "itself" in why else str(adb.port)]) == 2
        assert why in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
