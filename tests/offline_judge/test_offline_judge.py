"""``harness judge``: recorded episodes fed to freshly built judges, against the scripted server."""

from __future__ import annotations

import hashlib
import io
import json
import time
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.client.config import ModelConfig
from harness.cli.judge import print_summary
from harness.offline_judge import OfflineJudgeError, judge_runs, prepare_judges
from tests.fakes.model_server import Reply, ScriptedModelServer, request_images, request_text
from tests.offline_judge import count_judge  # noqa: F401  (registers the test judge)
from tests.offline_judge.sample_runs import make_run

USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}


def responder(req):
    text = request_text(req)
    if text.startswith("FINAL"):
        return Reply('{"success": true}', usage=USAGE)
    return Reply('{"ok": true}', usage=USAGE)


def model(server, **kw):
    base = dict(base_url=server.base_url, model="judge-m", max_retries=0, backoff_s=0.01, timeout_s=10)
    base.update(kw)
    return ModelConfig(**base)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_n_plus_one_calls_per_episode_and_cost_summary(tmp_path):
    run = make_run(tmp_path / "run", [("a", 2, "finished"), ("b", 3, "step_limit"), ("c", 0, "agent_error")])
    original = sha(run / "results.jsonl")
    with ScriptedModelServer(responder) as s:
        setup = prepare_judges(["count-test"], {}, model(s), concurrency=4)
        report = judge_runs([run], setup, concurrency=4, fsync=False)
    # (2 + 1) + (3 + 1) + (0 + 1) = 8 calls: one per step plus one at the end, per episode
    assert len(s.requests) == 8
    assert report.judged == 3 and report.already_judged == 0
    assert report.usage["calls"] == 8 and report.usage["failed_calls"] == 0
    # every call is answered with 10 prompt + 2 completion tokens: 80 and 16
    assert report.usage["prompt_tokens"] == 80 and report.usage["completion_tokens"] == 16
    assert report.attributed_calls == 8
    lines = {d["task_id"]: d for d in read_lines(run / "judgements" / report.set_id / "results.jsonl")}
    assert set(lines) == {"a", "b", "c"}
    assert {t: d["usage"]["calls"] for t, d in lines.items()} == {"a": 3, "b": 4, "c": 1}
    assert all(d["verdicts"] == {"count-test": True} for d in lines.values())
    # the task came from the run's suite file; the screen size from screens/000.png
    assert lines["b"]["details"]["count-test"]["instruction"] == "Do b"
    assert lines["b"]["details"]["count-test"]["screen_size"] == [90, 200]
    assert lines["b"]["details"]["count-test"]["steps"] == [1, 2, 3]
    # each step call carried the screenshot before that step
    assert sum(len(request_images(r)) for r in s.requests) == 8
    # the original results file is untouched
    assert sha(run / "results.jsonl") == original
    assert report.set_id == "judge-m"
    manifest = json.loads((run / "judgements" / report.set_id / "manifest.json").read_text())
    assert manifest["judges"] == ["count-test"] and manifest["passes"][-1]["usage"]["calls"] == 8
    out = io.StringIO()
    print_summary(report, file=out)
    text = out.getvalue()
    assert "8 model call(s) (0 failed)" in text and "80 prompt + 16 completion tokens" in text
    assert "3 judged" in text


def test_concurrency_bounds_calls_in_flight(tmp_path):
    run = make_run(tmp_path / "run", [(f"t{i}", 3, "finished") for i in range(12)])
    started: list[float] = []
    delay = 0.1

    def slow(req):
        started.append(time.monotonic())  # the server answers each request `delay` after this
        r = responder(req)
        r.delay_s = delay
        return r

    with ScriptedModelServer(slow) as s:
        setup = prepare_judges(["count-test"], {}, model(s), concurrency=3)
        report = judge_runs([run], setup, concurrency=3, fsync=False)
    assert report.judged == 12 and len(s.requests) == 12 * 4
    # requests being answered at once: overlaps of [start, start + delay) (a little less, so that a
    # reply being written while the next request arrives is not counted)
    most = max(sum(1 for u in started if u <= t < u + delay * 0.9) for t in started)
    assert most <= 3
    assert most == 3  # and the bound is actually used
    assert report.workers >= 3


def test_resume_skips_judged_episodes_without_duplicates(tmp_path):
    run = make_run(tmp_path / "run", [("a", 2, "finished"), ("b", 1, "finished"), ("c", 2, "finished")])
    with ScriptedModelServer(responder) as s:
        setup = prepare_judges(["count-test"], {}, model(s), concurrency=2)
        # a pass that stopped after two episodes: judge only their folders
        first = judge_runs([run / "episodes" / "a", run / "episodes" / "b"], setup, concurrency=2, fsync=False)
        assert first.judged == 2 and len(s.requests) == (2 + 1) + (1 + 1)
        out = run / "judgements" / first.set_id / "results.jsonl"
        # and was killed while appending a third line
        with open(out, "ab") as f:
            f.write(b'{"task_id": "c", "verdi')
        second = judge_runs([run], setup, concurrency=2, fsync=False)
    assert second.judged == 1 and second.already_judged == 2 and second.total == 3
    assert len(s.requests) == 5 + 3  # only c was judged again
    lines = read_lines(out)
    assert sorted(d["task_id"] for d in lines) == ["a", "b", "c"]
    assert any("partial last line" in w for w in second.warnings)
    with ScriptedModelServer(responder) as s2:
        third = judge_runs([run], prepare_judges(["count-test"], {}, model(s2), concurrency=2), concurrency=2,
                           set_id=first.set_id, fsync=False)
    assert third.judged == 0 and third.already_judged == 3 and s2.requests == []


def test_dead_server_gives_judge_error_and_the_pass_goes_on(tmp_path):
    run = make_run(tmp_path / "run", [("a", 2, "finished"), ("b", 1, "finished")])
    dead = ModelConfig(base_url="http://127.0.0.1:9/v1", model="judge-m", max_retries=1, backoff_s=0.01,
                       max_backoff_s=0.02, timeout_s=2)
    setup = prepare_judges(["count-test"], {}, dead, concurrency=2)
    report = judge_runs([run], setup, concurrency=2, fsync=False)
    assert report.judged == 2
    assert report.verdicts["count-test"] == {"true": 0, "false": 0, "judge_error": 2}
    lines = read_lines(run / "judgements" / report.set_id / "results.jsonl")
    for d in lines:
        assert d["verdicts"]["count-test"] == "judge_error"
        assert "connection failed" in d["details"]["count-test"]["error"]
    # 2 + 1 step calls, each tried twice, all failed; no final call after a failed step
    assert report.usage["calls"] == 0 and report.usage["failed_calls"] == 3
    # --retry-errors judges them again (here against a live server) and keeps one line per episode
    with ScriptedModelServer(responder) as s:
        again = judge_runs([run], prepare_judges(["count-test"], {}, model(s), concurrency=2), concurrency=2,
                           set_id=report.set_id, retry_errors=True, fsync=False)
    assert again.retried == 2 and again.judged == 2
    lines = read_lines(run / "judgements" / report.set_id / "results.jsonl")
    assert sorted(d["task_id"] for d in lines) == ["a", "b"]
    assert all(d["verdicts"]["count-test"] is True for d in lines)


def test_infra_errors_are_not_judged_and_tasks_fall_back_to_the_result_line(tmp_path):
    run = make_run(tmp_path / "run", [("a", 1, "finished"), ("dead", 0, "infra_error")], suite=False,
                   instruction="Imported {id}", finish_last=True)
    with ScriptedModelServer(responder) as s:
        report = judge_runs([run], prepare_judges(["count-test"], {}, model(s), concurrency=1), concurrency=1,
                            fsync=False)
    assert report.judged == 1 and report.not_judged == {"infra_error": 1}
    (line,) = read_lines(run / "judgements" / report.set_id / "results.jsonl")
    assert line["details"]["count-test"]["instruction"] == "Imported a"
    assert line["details"]["count-test"]["agent_finished"] is True


def test_unknown_task_and_broken_judges_are_judge_errors(tmp_path):
    run = make_run(tmp_path / "run", [("a", 1, "finished")], suite=False)
    # drop the instruction: neither a suite nor the result line says what the task was
    lines = (run / "results.jsonl").read_text().splitlines()
    d = json.loads(lines[0])
    d.pop("instruction")
    (run / "results.jsonl").write_text(json.dumps(d) + "\n")
    with ScriptedModelServer(responder) as s:
        report = judge_runs([run], prepare_judges(["count-test"], {}, model(s), concurrency=1), concurrency=1,
                            fsync=False)
    (line,) = read_lines(run / "judgements" / report.set_id / "results.jsonl")
    assert line["verdicts"] == {"count-test": "judge_error"}
    assert "--suite" in line["details"]["count-test"]["error"]
    assert s.requests == []


def test_other_judge_settings_need_another_set(tmp_path):
    run = make_run(tmp_path / "run", [("a", 1, "finished")])
    with ScriptedModelServer(responder) as s:
        first = judge_runs([run], prepare_judges(["count-test"], {}, model(s), concurrency=1), concurrency=1,
                           fsync=False)
        other = prepare_judges(["count-test"], {"tag": "v2"}, model(s), concurrency=1)
        with pytest.raises(OfflineJudgeError, match="other judge settings"):  # a name given is never taken over
            judge_runs([run], other, concurrency=1, set_id=first.set_id, fsync=False)
        r = judge_runs([run], other, concurrency=1, set_id="v2-pass", fsync=False)
        assert r.judged == 1
        # the default name moves on to the next free one; the same command again resumes its own set
        auto = judge_runs([run], other, concurrency=1, fsync=False)
        assert (first.set_id, auto.set_id, auto.judged) == ("judge-m", "judge-m-2", 1)
        again = judge_runs([run], other, concurrency=1, fsync=False)
        assert (again.set_id, again.already_judged) == ("judge-m-2", 1)
        # another port or concurrency does not make it another judge
        r2 = judge_runs([run], prepare_judges(["count-test"], {}, model(s, timeout_s=3), concurrency=5),
                        concurrency=5, fsync=False)
        assert r2.already_judged == 1


def test_cli_judge(tmp_path, capsys, monkeypatch):
    run = make_run(tmp_path / "run", [("a", 2, "finished"), ("b", 1, "finished")])
    capped = []  # the command caps the C heap's arenas (harness.offline_judge.heap) before its pass
    monkeypatch.setattr("harness.cli.judge.limit_malloc_arenas", lambda: capped.append(True))
    with ScriptedModelServer(responder) as s:
        code = main(["judge", str(run), "--judge", "count-test", "--model-base-url", s.base_url, "--model", "jm",
                     "--concurrency", "2", "--retries", "0", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert len(capped) == 1
    assert "5 model call(s)" in out and "2 judged" in out
    assert (run / "judgements" / "jm" / "results.jsonl").is_file()
    # user mistakes: one line, exit 2
    code = main(["judge", str(tmp_path), "--judge", "count-test", "--model-base-url", "http://x/v1", "--model", "m"])
    out, err = capsys.readouterr()
    assert code == 2 and "not a run folder" in err and err.count("\n") == 1
    code = main(["judge", str(run), "--judge", "nope", "--model-base-url", "http://x/v1", "--model", "m"])
    out, err = capsys.readouterr()
    assert code == 2 and "unknown judge 'nope'" in err
    mr = tmp_path / "mobilerisk" / "safe_01"
    mr.mkdir(parents=True)
    (mr / "trajectory.json").write_text("{}")
    code = main(["judge", str(tmp_path / "mobilerisk"), "--judge", "count-test", "--model-base-url", "http://x/v1",
                 "--model", "m"])
    out, err = capsys.readouterr()
    assert code == 2 and "harness import mobilerisk" in err


@pytest.mark.parametrize("fresh", [False, True])
def test_judges_are_reused_per_worker_and_replaced_when_they_fail(tmp_path, fresh):
    run = make_run(tmp_path / "run", [("a", 1, "finished"), ("b", 2, "finished"), ("c", 1, "finished")])
    with ScriptedModelServer(responder) as s:
        setup = prepare_judges(["count-test"], {"fail_task": "b"}, model(s), concurrency=1)
        before = count_judge.CountJudge.built
        report = judge_runs([run], setup, concurrency=1, episodes_in_flight=1, fresh_judges=fresh, fsync=False)
    lines = {d["task_id"]: d for d in read_lines(run / "judgements" / report.set_id / "results.jsonl")}
    assert lines["a"]["verdicts"]["count-test"] is True and lines["c"]["verdicts"]["count-test"] is True
    assert lines["b"]["verdicts"]["count-test"] == "judge_error"
    assert lines["b"]["details"]["count-test"]["error"] == "on_step failed at step 1: RuntimeError: cannot judge b"
    # one worker: its judge serves a, raises on b and is replaced for c; or a new one per episode
    assert count_judge.CountJudge.built - before == (3 if fresh else 2)
    assert len(s.requests) == (1 + 1) + (1 + 1)


def test_a_screen_symlinked_out_of_the_episode_is_refused(tmp_path):
    run = make_run(tmp_path / "run", [("a", 2, "finished"), ("b", 1, "finished")])
    secret = tmp_path / "secret.png"
    secret.write_bytes((run / "episodes" / "a" / "screens" / "001.png").read_bytes())
    target = run / "episodes" / "a" / "screens" / "001.png"
    target.unlink()
    target.symlink_to(secret)
    with ScriptedModelServer(responder) as s:
        report = judge_runs([run], prepare_judges(["count-test"], {}, model(s), concurrency=1), concurrency=1,
                            fsync=False)
    lines = {d["task_id"]: d for d in read_lines(run / "judgements" / report.set_id / "results.jsonl")}
    assert lines["a"]["verdicts"]["count-test"] == "judge_error"
    assert "resolves outside the episode folder" in lines["a"]["details"]["count-test"]["error"]
    assert lines["b"]["verdicts"]["count-test"] is True  # the pass goes on
    # a symlink that stays inside the episode folder is fine
    inside = run / "episodes" / "b" / "screens" / "001.png"
    copy = run / "episodes" / "b" / "screens" / "copy.png"
    inside.rename(copy)
    inside.symlink_to(copy)
    from harness.offline_judge.episodes import _ScreenReader
    assert _ScreenReader(run / "episodes" / "b").load("screens/001.png") == copy.read_bytes()


def test_a_pass_that_judges_nothing_leaves_the_sets_manifest_as_it_was(tmp_path):
    """Re-judging a finished set against another endpoint judges nothing and rewrites nothing (the
    manifest used to name the new endpoint); a pass that adds lines updates it and records each
    pass's endpoint, so a set judged through two servers says so."""
    run = make_run(tmp_path / "run", [("a", 1, "finished"), ("b", 1, "finished")])
    manifest = run / "judgements" / "m-set" / "manifest.json"
    with ScriptedModelServer(responder) as s1:
        judge_runs([run / "episodes" / "a"], prepare_judges(["count-test"], {}, model(s1), concurrency=2),
                   concurrency=2, set_id="m-set", fsync=False)
        first = json.loads(manifest.read_text())
    assert first["model"]["base_url"] == s1.base_url and [p["judged"] for p in first["passes"]] == [1]
    with ScriptedModelServer(responder) as s2:
        report = judge_runs([run / "episodes" / "a"], prepare_judges(["count-test"], {}, model(s2), concurrency=2),
                            concurrency=2, set_id="m-set", fsync=False)
        assert report.judged == 0 and report.already_judged == 1 and s2.requests == []
        assert json.loads(manifest.read_text()) == first  # as it was: the set still names the endpoint that judged it
        report = judge_runs([run], prepare_judges(["count-test"], {}, model(s2), concurrency=2), concurrency=2,
                            set_id="m-set", fsync=False)
    now = json.loads(manifest.read_text())
    assert report.judged == 1 and now["model"]["base_url"] == s2.base_url and now["created_at"] == first["created_at"]
    assert [(p["judged"], p["model"]["base_url"]) for p in now["passes"]] == [(1, s1.base_url), (1, s2.base_url)]
