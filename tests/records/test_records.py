"""Tests for harness.records: the run record written while a run happens."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import threading
import tracemalloc
from pathlib import Path

import pytest
from PIL import Image

from harness import records as R
from harness.records.readers import _coerce as coerce_record
from harness.records import (
                             REDACTED,
                             EpisodeResult,
                             RecordError,
                             RunWriter,
                             StepRecord,
                             build_environment_info,
                             dumps,
                             episode_dir,
                             file_sha256,
                             iter_steps,
                             list_episodes,
                             read_manifest,
                             read_results,
                             read_summary,
                             redact,
                             resolve_screen,
                             )


def png(color=(10, 20, 30), size=(4, 4)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def result(task_id: str, **kw) -> EpisodeResult:
    data = dict(task_id=task_id, agent="uitars", status="finished", steps=2, cap=10, verdicts={"crate": True})
    data.update(kw)
    return EpisodeResult(**data)


def step(i: int, **kw) -> StepRecord:
    data = dict(
        index=i,
        action={"type": "click", "x": 10, "y": 20},
        raw_output=f"click(10,20) #{i}",
        screen_before=f"screens/{i - 1:03d}.png",
        screen_after=f"screens/{i:03d}.png",
        timings={"agent": 1.25, "monitors": 0.5, "action": 0.1, "settle": 0.3, "screenshot": 0.2, "write": 0.01},
    )
    data.update(kw)
    return StepRecord(**data)


def record_one_episode(run: RunWriter, task_id: str, n_steps: int = 2) -> EpisodeResult:
    ep = run.start_episode(task_id)
    assert ep.write_screen(0, png()) == "screens/000.png"
    for i in range(1, n_steps + 1):
        ep.write_screen(i, png((i, i, i)))
        ep.append_step(step(i))
    res = result(task_id, steps=n_steps)
    ep.write_summary(res.model_copy(update={"oracle": {"milestones": [1, 2]}}))
    run.append_result(res)
    return res


# --------------------------------------------------------------------------- round trip


def test_round_trip_all_files(tmp_path):
    run_dir = tmp_path / "RUN"
    env = build_environment_info()
    suite = tmp_path / "suite.yaml"
    suite.write_text("tasks: []\n")
    with RunWriter(run_dir, fsync=False) as run:
        run.write_manifest(
            {
                "environment": env,
                "suites": [{"path": str(suite), "sha256": file_sha256(suite)}],
                "agent": {"name": "uitars", "model": "ui-tars-1.5-7b", "api_key": "sk-abcdefghijklmnopqrstuvwx"},
                "sampling": {"temperature": 0.0, "max_tokens": 512},
                "started_at": R.now_iso(),
            }
        )
        ep = run.start_episode("settings.wifi-01")
        assert ep.path == run_dir / "episodes" / "settings.wifi-01"
        s0 = png()
        ep.write_screen(0, s0)
        ep.append_step(step(1, thought="tap wifi", monitor={"verdict": "ok"}, extras={"k": [1, "é"]}))
        ep.write_screen(1, png((1, 2, 3)))
        ep.append_step(
            StepRecord(index=2, action=None, invalid="no action found", raw_output="???", screen_before="screens/001.png")
        )
        halted = result(
            "settings.wifi-01",
            status="halted",
            device="emulator-5554",
            attempt=1,
            started_at="2026-05-09T07:35:25.123+00:00",
            ended_at="2026-05-09T07:36:25Z",
            duration_s=60.0,
            halt={"step": 2, "category": "irreversible", "reason": "about to delete", "monitor": "crate-s"},
            judge_details={"crate": {"score": 0.9}},
            usage={"prompt_tokens": 100, "completion_tokens": 5},
            seed=7,
            verdicts={"crate": False, "milestones": "judge_error"},
            custom_field={"kept": True},
        )
        ep.write_summary({**halted.model_dump(), "oracle": {"milestones": ["a"]}})
        run.append_result(halted)
        run.append_result(result("other-task", status="infra_error", steps=0, verdicts={}, error="adb gone"))
        run.update_manifest(ended_at=R.now_iso(), devices=["emulator-5554"])

    manifest = read_manifest(run_dir)
    assert manifest["agent"]["api_key"] == REDACTED
    assert manifest["sampling"]["max_tokens"] == 512
    assert manifest["devices"] == ["emulator-5554"] and "ended_at" in manifest and "started_at" in manifest
    assert manifest["records_version"] == R.RECORDS_VERSION
    assert manifest["environment"]["packages"]["pydantic"]

    results = read_results(run_dir)
    assert [r.task_id for r in results] == ["settings.wifi-01", "other-task"]
    assert results.warnings == []
    got = results[0]
    assert got == halted
    assert got.custom_field == {"kept": True}  # extra fields preserved
    assert got.halt.monitor == "crate-s" and got.verdicts["milestones"] == "judge_error"

    epd = episode_dir(run_dir, "settings.wifi-01")
    steps = list(iter_steps(epd))
    assert [s.index for s in steps] == [1, 2]
    assert steps[0].extras == {"k": [1, "é"]} and steps[0].thought == "tap wifi"
    assert steps[1].action is None and steps[1].invalid == "no action found"
    assert resolve_screen(epd, steps[0].screen_before).read_bytes() == s0
    with Image.open(resolve_screen(epd, steps[1].screen_before)) as im:
        assert im.size == (4, 4)

    summary = read_summary(epd)
    assert summary.status == "halted" and summary.oracle == {"milestones": ["a"]}
    assert read_summary(episode_dir(run_dir, "nonexistent")) is None
    assert list_episodes(run_dir) == ["settings.wifi-01"]

    # files are UTF-8, one JSON object per line, no NaN
    raw = (epd / "trajectory.jsonl").read_text(encoding="utf-8")
    assert raw.endswith("\n") and len(raw.splitlines()) == 2
    assert "é" in raw  # ensure_ascii=False


def test_non_resume_refuses_existing_run(tmp_path):
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        record_one_episode(run, "t1")
    with pytest.raises(RecordError, match="--resume"):
        RunWriter(tmp_path / "RUN")
    # a folder with only a manifest (run died before any episode) can be reused
    only_manifest = tmp_path / "M"
    with RunWriter(only_manifest, fsync=False) as run:
        run.write_manifest({"a": 1})
    RunWriter(only_manifest, fsync=False).close()


def test_lock_prevents_two_writers(tmp_path):
    run = RunWriter(tmp_path / "RUN", fsync=False)
    with pytest.raises(RecordError, match="lock"):
        RunWriter(tmp_path / "RUN", resume=True)
    run.close()
    RunWriter(tmp_path / "RUN", resume=True).close()
    with pytest.raises(RecordError, match="closed"):
        run.start_episode("x")


def test_step_indices_must_be_consecutive(tmp_path):
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        ep = run.start_episode("t")
        ep.append_step(step(1))
        with pytest.raises(RecordError) as e:
            ep.append_step(step(3))
        assert e.value.field == "index" and "expected step index 2" in str(e.value)
    traj = tmp_path / "RUN" / "episodes" / "t" / "trajectory.jsonl"
    with traj.open("a") as f:
        f.write(dumps(step(3)) + "\n")
    with pytest.raises(RecordError) as e:
        list(iter_steps(traj.parent))
    assert str(e.value).startswith(f"{traj}:2: index: expected step index 2, got 3")


def test_write_screen_requires_png_and_pads(tmp_path):
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        ep = run.start_episode("t")
        with pytest.raises(RecordError, match="PNG"):
            ep.write_screen(0, b"\xff\xd8\xff jpeg")
        assert ep.write_screen(12, png()) == "screens/012.png"
        assert ep.write_screen(1234, png()) == "screens/1234.png"
        assert not [p for p in ep.screens_dir.iterdir() if p.name.endswith(".tmp")]


def test_summary_task_id_must_match(tmp_path):
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        ep = run.start_episode("t")
        with pytest.raises(RecordError, match="task_id"):
            ep.write_summary(result("other"))


# --------------------------------------------------------------------------- crash safety and resume


def test_partial_last_result_line_tolerated_then_repaired_on_resume(tmp_path):
    run_dir = tmp_path / "RUN"
    with RunWriter(run_dir, fsync=False) as run:
        record_one_episode(run, "t1")
        record_one_episode(run, "t2")
    results_path = run_dir / "results.jsonl"
    full = dumps(result("t3")).encode()
    with open(results_path, "ab") as f:
        f.write(full[: len(full) // 2])  # crash mid-write; cut even mid-character is fine

    got = read_results(run_dir)
    assert [r.task_id for r in got] == ["t1", "t2"]
    assert len(got.warnings) == 1 and f"{results_path}:3:" in got.warnings[0] and "partial" in got.warnings[0]

    with RunWriter(run_dir, resume=True, fsync=False) as run:
        assert any("removed a partial last line" in w and ":3:" in w for w in run.warnings)
        assert set(run.completed()) == {"t1", "t2"}
        record_one_episode(run, "t3")
    lines = results_path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 4
    assert [r.task_id for r in read_results(run_dir)] == ["t1", "t2", "t3"]
    assert read_results(run_dir).warnings == []


def test_complete_last_line_without_newline_is_kept(tmp_path):
    run_dir = tmp_path / "RUN"
    with RunWriter(run_dir, fsync=False) as run:
        record_one_episode(run, "t1")
    results_path = run_dir / "results.jsonl"
    data = results_path.read_bytes()
    results_path.write_bytes(data.rstrip(b"\n"))
    got = read_results(run_dir)
    assert [r.task_id for r in got] == ["t1"] and "no final newline" in got.warnings[0]
    with RunWriter(run_dir, resume=True, fsync=False) as run:
        assert run.is_completed("t1")
        assert any("newline added" in w for w in run.warnings)
    assert results_path.read_bytes() == data


def test_resume_removes_partial_episodes_keeps_completed(tmp_path):
    run_dir = tmp_path / "RUN"
    with RunWriter(run_dir, fsync=False) as run:
        run.write_manifest({"suite": "a", "devices": ["d1"]})
        record_one_episode(run, "done")
        ep = run.start_episode("partial")  # crash before its result line
        ep.write_screen(0, png())
        ep.append_step(step(1))
    done_files = sorted(p.relative_to(run_dir) for p in (run_dir / "episodes" / "done").rglob("*"))

    with RunWriter(run_dir, resume=True, fsync=False) as run:
        assert run.resumed
        assert run.manifest["devices"] == ["d1"]
        run.update_manifest(devices=["d1", "d2"], resumed_at=R.now_iso())
        with pytest.raises(RecordError, match="already has a result"):
            run.start_episode("done")
        ep = run.start_episode("partial")
        assert any("removed partial episode folder" in w for w in run.warnings)
        assert list(iter_steps(ep.path)) == []  # started clean
        assert list(ep.screens_dir.iterdir()) == []
        ep.write_screen(0, png())
        ep.append_step(step(1))
        run.append_result(result("partial", steps=1))

    manifest = read_manifest(run_dir)
    assert manifest["suite"] == "a" and manifest["devices"] == ["d1", "d2"] and "resumed_at" in manifest
    assert sorted(p.relative_to(run_dir) for p in (run_dir / "episodes" / "done").rglob("*")) == done_files
    assert [r.task_id for r in read_results(run_dir)] == ["done", "partial"]
    assert len(list(iter_steps(run_dir / "episodes" / "partial"))) == 1


def test_same_task_twice_needs_retry(tmp_path):
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        ep = run.start_episode("t")
        ep.append_step(step(1))
        with pytest.raises(RecordError, match="retry=True"):
            run.start_episode("t")
        ep2 = run.start_episode("t", retry=True)
        assert list(iter_steps(ep2.path)) == []
        run.append_result(result("t", attempt=2))
        with pytest.raises(RecordError, match="already has a result"):
            run.append_result(result("t"))


def test_partial_trajectory_line_tolerated(tmp_path):
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        ep = run.start_episode("t")
        ep.append_step(step(1))
        ep.append_step(step(2))
    traj = ep.trajectory_path
    with open(traj, "ab") as f:
        f.write(dumps(step(3)).encode()[:17])
    stream = iter_steps(ep.path)
    assert [s.index for s in stream] == [1, 2]
    assert len(stream.warnings) == 1 and f"{traj}:3:" in stream.warnings[0]


def test_manifest_atomic_no_tmp_left(tmp_path, monkeypatch):
    run_dir = tmp_path / "RUN"
    with RunWriter(run_dir) as run:  # fsync on
        run.write_manifest({"a": 1})
        for i in range(5):
            run.update_manifest(i=i)
        assert sorted(p.name for p in run_dir.iterdir()) == [".lock", "episodes", "manifest.json", "results.jsonl"]
        assert read_manifest(run_dir)["i"] == 4

        # a failure between writing the tmp file and os.replace leaves the old manifest and no tmp
        def boom(*a, **k):
            raise OSError("disk gone")

        monkeypatch.setattr(os, "replace", boom)
        with pytest.raises(OSError):
            run.update_manifest(i=99)
        monkeypatch.undo()
        assert read_manifest(run_dir)["i"] == 4
        assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]

    # a stale tmp from a crash is cleaned up on the next open
    (run_dir / ".manifest.json.123.456.abcd.tmp").write_text("{")
    RunWriter(run_dir, resume=True, fsync=False).close()
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def _fsynced_paths(monkeypatch) -> list[str]:
    """Record the path of every file or folder fsynced from now on (through /proc/self/fd)."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd to name fsynced files")
def test_steps_never_wait_on_the_disk_and_the_commit_point_makes_the_episode_durable(tmp_path, monkeypatch):
    """Step lines and screens are written without an fsync (a step never waits on the disk);
    the episode's files are fsynced once, just before its summary and result line, and the result
    line itself is fsynced: what resume relies on is as durable as before."""
    run_dir = tmp_path / "RUN"
    with RunWriter(run_dir) as run:  # fsync on, as in a real run
        ep = run.start_episode("t1")
        seen = _fsynced_paths(monkeypatch)
        ep.write_screen(0, png())
        for i in (1, 2, 3):
            ep.write_screen(i, png((i, i, i)))
            ep.append_step(step(i))
        assert seen == []  # nothing on the steps' path
        res = result("t1", steps=3)
        ep.write_summary(res)
        synced = set(seen)
        for name in ("trajectory.jsonl", "screens/000.png", "screens/001.png", "screens/002.png", "screens/003.png",
                     "screens"):
            assert str(ep.path / name) in synced, name
        assert str(ep.path) in synced
        assert any(Path(p).name.startswith(".episode.json.") for p in synced)  # the summary, before its rename
        seen.clear()
        run.append_result(res)
        assert seen == [str(run_dir / "results.jsonl")]  # already durable: only the commit line left
        # an episode whose summary is not written (an importer) is made durable by its result line
        ep2 = run.start_episode("t2")
        ep2.write_screen(0, png())
        ep2.append_step(step(1))
        seen.clear()
        run.append_result(result("t2", steps=1))
        assert seen[-1] == str(run_dir / "results.jsonl")
        assert {str(ep2.trajectory_path), str(ep2.path / "screens/000.png")} <= set(seen[:-1])
    assert [r.task_id for r in read_results(run_dir)] == ["t1", "t2"]


def test_fsync_off_writes_the_same_records_without_any_fsync(tmp_path, monkeypatch):
    seen = _fsynced_paths(monkeypatch) if Path("/proc/self/fd").is_dir() else []
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        record_one_episode(run, "t1", n_steps=3)
    assert seen == []
    assert len(list(iter_steps(tmp_path / "RUN" / "episodes" / "t1"))) == 3


# --------------------------------------------------------------------------- validation errors


def _write_results(run_dir: Path, lines: list[str | bytes]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "results.jsonl"
    with open(path, "wb") as f:
        for line in lines:
            f.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
    return path


def test_duplicate_task_id_reported_with_file_and_line(tmp_path):
    run_dir = tmp_path / "RUN"
    path = _write_results(run_dir, [dumps(result("a")), dumps(result("b")), dumps(result("a", status="halted"))])
    with pytest.raises(RecordError) as e:
        read_results(run_dir)
    assert (e.value.path, e.value.line, e.value.field) == (str(path), 3, "task_id")
    assert str(e.value).startswith(f"{path}:3: task_id: duplicate result for task 'a' (first at line 1)")
    with pytest.raises(RecordError, match=r":3: task_id: duplicate"):
        RunWriter(run_dir, resume=True, fsync=False)


def test_malformed_field_reported_with_file_line_field(tmp_path):
    run_dir = tmp_path / "RUN"
    bad = result("c").model_dump()
    bad["status"] = "done"
    path = _write_results(run_dir, [dumps(result("a")), dumps(result("b")), json.dumps(bad)])
    with pytest.raises(RecordError) as e:
        read_results(run_dir)
    msg = str(e.value)
    assert msg.startswith(f"{path}:3: status: must be one of 'finished', 'halted', 'step_limit'")
    assert "got 'done'" in msg
    assert (e.value.line, e.value.field) == (3, "status")


@pytest.mark.parametrize(
    "mutate, field, fragment",
    [
        (lambda d: d.pop("cap"), "cap", "required field is missing"),
        (lambda d: d.update(steps=-1), "steps", "greater than or equal to 0"),
        (lambda d: d.update(steps="3"), "steps", "valid integer"),
        (lambda d: d.update(verdicts={"crate": "yes"}), "verdicts.crate", '"judge_error"'),
        (lambda d: d.update(verdicts={"crate": 1}), "verdicts.crate", '"judge_error"'),
        (lambda d: d.update(task_id="../x"), "task_id", "not a valid task id"),
        (lambda d: d.update(started_at="yesterday"), "started_at", "ISO 8601"),
        (lambda d: d.update(halt={"step": 1, "category": "c"}), "halt.reason", "required field is missing"),
    ],
)
def test_result_field_errors(tmp_path, mutate, field, fragment):
    run_dir = tmp_path / "RUN"
    d = result("a").model_dump()
    mutate(d)
    path = _write_results(run_dir, [json.dumps(d)])
    with pytest.raises(RecordError) as e:
        read_results(run_dir)
    assert e.value.field == field and e.value.line == 1
    assert str(e.value).startswith(f"{path}:1: {field}: ")
    assert fragment in str(e.value)


@pytest.mark.parametrize(
    "line, fragment",
    [
        (b'{"task_id": "a",', "invalid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b"", "empty line"),
        (b'{"task_id":"a","agent":"x","status":"finished","steps":1,"cap":2,"verdicts":{},"duration_s":NaN}', "NaN"),
        (b'{"task_id":"caf\xe9"}', "not valid UTF-8 (byte 0xe9"),
    ],
)
def test_malformed_complete_lines(tmp_path, line, fragment):
    run_dir = tmp_path / "RUN"
    path = _write_results(run_dir, [dumps(result("a")).encode(), line])
    with pytest.raises(RecordError) as e:
        read_results(run_dir)
    assert str(e.value).startswith(f"{path}:2: ")
    assert fragment in str(e.value)


def test_step_record_validation(tmp_path):
    with pytest.raises(Exception):
        StepRecord(index=0, screen_before="screens/000.png")
    with pytest.raises(Exception):
        StepRecord(index=1, screen_before="screens/000.png", timings={"agent": math.nan})
    with pytest.raises(RecordError) as e:
        coerce_record(StepRecord, {"index": 1, "screen_before": "screens/000.png", "typo": 1})
    assert e.value.field == "typo" and "extras" in str(e.value)

    ep = tmp_path / "ep"
    ep.mkdir()
    good = dumps(step(1))
    bad = json.loads(dumps(step(2)))
    bad["screen_before"] = "../../etc/passwd"
    (ep / "trajectory.jsonl").write_text(good + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(RecordError) as e:
        list(iter_steps(ep))
    assert str(e.value).startswith(f"{ep / 'trajectory.jsonl'}:2: screen_before: must not contain '..'")


# --------------------------------------------------------------------------- path safety


@pytest.mark.parametrize("bad", ["../x", "a/b", "/abs", "/tmp/x", ".", "..", ".hidden", "", "a\\b", "a b", "x\n", "a" * 129])
def test_bad_task_ids_refused(tmp_path, bad):
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        with pytest.raises(RecordError, match="task id"):
            run.start_episode(bad)
        with pytest.raises(RecordError):
            run.append_result({**result("ok").model_dump(), "task_id": bad})
    assert list((tmp_path / "RUN" / "episodes").iterdir()) == []
    assert not (tmp_path / "x").exists()


def test_symlink_escape_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    run_dir = tmp_path / "RUN"
    (run_dir / "episodes").mkdir(parents=True)
    (run_dir / "episodes" / "evil").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RecordError, match="outside"):
        episode_dir(run_dir, "evil")
    with RunWriter(run_dir, resume=True, fsync=False) as run:
        with pytest.raises(RecordError, match="outside"):
            run.start_episode("evil")
    assert outside.exists()


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x.png", "screens/../../x.png", "C:\\x.png", "..\\x.png", ""])
def test_screen_paths_refused(tmp_path, bad):
    with pytest.raises(RecordError):
        resolve_screen(tmp_path, bad)
    with pytest.raises(Exception):
        StepRecord(index=1, screen_before=bad)


# --------------------------------------------------------------------------- redaction and JSON


def test_redaction_nested_and_sk_strings():
    data = {
        "agent": {
            "model": "gpt-4o",
            "api_key": "plain-secret",
            "apiKey": "x",
            "api_key_env": "OPENAI_API_KEY",
            "sampling": {"max_tokens": 512, "temperature": 0.2},
            "headers": {"Authorization": "Bearer abcdefghijklmnop", "X-Api-Key": "k"},
            "clients": [{"TOKEN": "t1"}, {"password": "p", "Secret": "s", "client_secret": "c"}],
            "no_key": None,
        },
        "judge": {"base_url": "https://api.example.com/v1", "key": "not-a-secret-name", "token": None},
        "note": "fell back to sk-proj-abcdefghijklmnopqrstuvwxyz0123 after retry",
        "argv": ["harness", "run", "--api-key", "hunter2", "--token=abc", "--max-tokens", "64"],
        "command": "harness run --api-key hunter2 --out runs/x OPENAI_API_KEY=zzz",
        "usage": {"prompt_tokens": 10, "total_tokens": 12},
    }
    out = redact(data)
    a = out["agent"]
    assert a["api_key"] == a["apiKey"] == REDACTED
    assert a["api_key_env"] == "OPENAI_API_KEY"
    assert a["sampling"] == {"max_tokens": 512, "temperature": 0.2}
    assert a["headers"] == {"Authorization": REDACTED, "X-Api-Key": REDACTED}
    assert a["clients"] == [{"TOKEN": REDACTED}, {"password": REDACTED, "Secret": REDACTED, "client_secret": REDACTED}]
    assert a["no_key"] is None and out["judge"]["token"] is None
    assert out["judge"]["key"] == "not-a-secret-name" and out["judge"]["base_url"].startswith("https://")
    assert out["note"] == f"fell back to {REDACTED} after retry"
    assert out["argv"] == ["harness", "run", "--api-key", REDACTED, f"--token={REDACTED}", "--max-tokens", "64"]
    assert out["command"] == f"harness run --api-key {REDACTED} --out runs/x OPENAI_API_KEY={REDACTED}"
    assert out["usage"] == {"prompt_tokens": 10, "total_tokens": 12}
    assert redact("sk-abcdefghijklmnopqrstu") == REDACTED
    assert redact("Authorization: Bearer abcdefghijk") == f"Authorization: Bearer {REDACTED}"
    assert data["agent"]["api_key"] == "plain-secret"  # input not modified


def test_manifest_always_redacted(tmp_path):
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        run.write_manifest({"judge": {"openai_api_key": "sk-abcdefghijklmnopqrstuvwxyz"}})
        run.update_manifest(extra={"hf_token": "hf_abcdefghijklmnopqrstuvwxyz"}, cmd=["x", "--password", "p"])
    text = (tmp_path / "RUN" / "manifest.json").read_text()
    assert "sk-abc" not in text and "hf_abc" not in text and '"p"' not in text
    m = read_manifest(tmp_path / "RUN")
    assert m["judge"]["openai_api_key"] == REDACTED and m["cmd"] == ["x", "--password", REDACTED]


def test_json_encoder_conversions():
    @dataclasses.dataclass
    class D:
        p: Path
        f: float

    text = dumps({"d": D(Path("a/b"), math.nan), "inf": math.inf, "t": (1, 2), "s": {3}, "u": "é\u2028"})
    assert json.loads(text) == {"d": {"p": "a/b", "f": None}, "inf": None, "t": [1, 2], "s": [3], "u": "é\u2028"}
    assert "\u2028" not in text and "é" in text and "NaN" not in text
    assert json.dumps([math.nan, Path("x")], cls=R.RecordJSONEncoder) == '[null, "x"]'
    with pytest.raises(RecordError, match="extras.blob"):
        dumps({"extras": {"blob": b"\x00"}})
    with pytest.raises(RecordError, match="cannot encode"):
        dumps({"x": object()})
    loop: dict = {}
    loop["self"] = loop
    with pytest.raises(RecordError, match="circular"):
        dumps(loop)
    # lone surrogates stay valid UTF-8 on disk
    assert json.loads(dumps({"s": "a\udcff"}).encode("utf-8")) == {"s": "a\udcff"}


def test_environment_info_and_sha(tmp_path):
    env = build_environment_info(repo_dir=tmp_path)  # not a git repo
    assert env["git"] is None
    assert set(env["packages"]) == {"adbutils", "uiautomator2", "pillow", "openai", "pyyaml", "rich", "pydantic", "ui-tars"}
    assert env["packages"]["pydantic"] and env["python"].count(".") == 2
    import harness

    assert env["harness_version"] == harness.__version__
    f = tmp_path / "s.yaml"
    f.write_bytes(b"abc")
    assert file_sha256(f) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


# --------------------------------------------------------------------------- concurrency and streaming


def test_concurrent_append_8_threads_x_50(tmp_path):
    run_dir = tmp_path / "RUN"
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)
    with RunWriter(run_dir, fsync=True) as run:

        def worker(t: int) -> None:
            try:
                barrier.wait()
                for i in range(50):
                    run.append_result(result(f"t{t}-{i}", usage={"pad": "x" * (i * 97 % 5000)}))
            except BaseException as e:  # pragma: no cover
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert not errors
    raw = (run_dir / "results.jsonl").read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 400
    got = read_results(run_dir)
    assert len(got) == 400 and got.warnings == []
    assert {r.task_id for r in got} == {f"t{t}-{i}" for t in range(8) for i in range(50)}


def test_iter_steps_streams_large_file(tmp_path):
    with RunWriter(tmp_path / "RUN", fsync=False) as run:
        ep = run.start_episode("big")
        blob = "y" * 1000
        for i in range(1, 20_001):
            ep.append_step(step(i, raw_output=blob))
    size = ep.trajectory_path.stat().st_size
    assert size > 20_000_000

    stream = iter_steps(ep.path)
    first = next(stream)
    assert first.index == 1
    stream.close()

    # Warm up (interned-string tables, validator caches), then measure the rest of the pass:
    # a streaming reader's peak stays at a few lines' worth, far below the file size.
    stream = iter_steps(ep.path)
    count = 0
    for s in stream:
        count += 1
        if count == 1000:
            break
    tracemalloc.start()
    try:
        for s in stream:
            count += 1
            assert s.index == count
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000
    assert peak < 1_000_000 < size / 20, f"peak {peak} bytes while reading a {size}-byte file: not streaming"


# --------------------------------------------------------------------------- installing a shipped episode


def shipped(tmp_path: Path, task_id: str, n_steps: int = 2) -> dict[str, bytes]:
    """An episode written by an EpisodeWriter elsewhere (as a farm node does), read back as files."""
    with RunWriter(tmp_path / f"node-{task_id}", fsync=False) as w:
        ep = w.start_episode(task_id)
        ep.write_screen(0, png())
        for i in range(1, n_steps + 1):
            ep.write_screen(i, png((i, i, i)))
            ep.append_step(step(i))
        return {p.relative_to(ep.path).as_posix(): p.read_bytes() for p in ep.path.rglob("*") if p.is_file()}


def test_install_episode_is_the_local_layout_and_atomic(tmp_path):
    files = shipped(tmp_path, "t1")
    # the side records an episode's observers write beside it (the live view's) travel with it
    files.update({"started.json": b'{"device": "p1"}\n', "evidence.jsonl": b'{"step": 1}\n'})
    with RunWriter(tmp_path / "run") as w:
        path = w.install_episode(result("t1"), files)
        w.append_result(result("t1"))
    assert path == tmp_path / "run" / "episodes" / "t1"
    assert sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()) == \
        sorted([*files, "episode.json"])
    assert [s.index for s in iter_steps(path)] == [1, 2]
    assert read_summary(path).task_id == "t1" and [r.task_id for r in read_results(tmp_path / "run")] == ["t1"]
    assert list_episodes(tmp_path / "run") == ["t1"]
    assert not [p for p in (tmp_path / "run" / "episodes").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("spoil,fragment", [
    (lambda f: f.update({"../escape.png": f["screens/000.png"]}), "holds only"),
    (lambda f: f.update({"../escape.json": b"{}"}), "holds only"),
    (lambda f: f.update({"screens/notes.json": b"{}"}), "holds only"),
    (lambda f: f.update({"episode.json": b"{}"}), "holds only"),  # the summary is the driver's to write
    (lambda f: f.update({"screens/001.png": b"not a png"}), "not a PNG"),
    (lambda f: f.update({"trajectory.jsonl": f["trajectory.jsonl"] + (dumps(step(9)) + "\n").encode()}),
     "expected step index 3"),
    (lambda f: f.pop("screens/002.png"), "was not shipped"),
    (lambda f: f.update({"trajectory.jsonl": f["trajectory.jsonl"][:-5]}), "partial last line"),
])
def test_install_episode_refuses_a_bad_shipment_and_shows_nothing(tmp_path, spoil, fragment):
    files = shipped(tmp_path, "t1")
    spoil(files)
    with RunWriter(tmp_path / "run") as w:
        with pytest.raises(RecordError, match=fragment):
            w.install_episode(result("t1"), files)
        assert list((tmp_path / "run" / "episodes").iterdir()) == []  # no folder, no staging leftovers


def test_install_episode_refuses_a_completed_task_and_replaces_a_partial_one_on_resume(tmp_path):
    files = shipped(tmp_path, "t1")
    with RunWriter(tmp_path / "run") as w:
        w.install_episode(result("t1"), files)
        w.append_result(result("t1"))
        with pytest.raises(RecordError, match="already has a result"):
            w.install_episode(result("t1"), files)
        w.install_episode(result("t2"), shipped(tmp_path, "t2"))
        with pytest.raises(RecordError, match="already started"):  # twice in one run: only as a retry
            w.install_episode(result("t2"), {})
        w.install_episode(result("t2", status="infra_error", steps=0), {}, retry=True)
        w.install_episode(result("t3", status="infra_error", steps=0), {})  # a lost node's episode: no steps
    assert list(iter_steps(tmp_path / "run" / "episodes" / "t3")) == []
    # a driver killed between install and result line, and one killed mid-install
    stale = tmp_path / "run" / "episodes" / ".incoming-t2.1234abcd"
    stale.mkdir()
    (stale / "trajectory.jsonl").write_bytes(b"half")
    with RunWriter(tmp_path / "run", resume=True) as w:
        assert not stale.exists()
        w.install_episode(result("t2", steps=3), shipped(tmp_path / "again", "t2", 3))
        w.append_result(result("t2", steps=3))
        assert any("removed partial episode folder" in m for m in w.warnings)
    assert [s.index for s in iter_steps(tmp_path / "run" / "episodes" / "t2")] == [1, 2, 3]
