"""What a judging pass reads before it starts (harness.offline_judge.targets.read_episodes): every
selected episode's result line and task, packed, giving back the very objects the records and the
suite hold; the episodes asked for without a result line; and a pass over what was read judges
exactly what a pass over the paths judges."""

from __future__ import annotations

import json
from pathlib import Path

from harness.offline_judge import judge_runs, prepare_judges
from harness.offline_judge.targets import PackedEpisode, _pack, read_episodes
from harness.records import EpisodeResult, read_manifest, read_results
from harness.core.run_tasks import load_run_tasks
from harness.core.tasks import load_suite
from tests.fakes.model_server import ScriptedModelServer
from tests.offline_judge import count_judge  # noqa: F401  (registers the test judge)
from tests.offline_judge.sample_runs import make_run
from tests.offline_judge.test_offline_judge import model, read_lines, responder

ROOT = Path(__file__).resolve().parents[2]


def test_packed_episodes_unpack_to_the_records_and_the_suites_objects(tmp_path):
    run = make_run(tmp_path / "run", [("a", 2, "finished"), ("b", 0, "agent_error"), ("dead", 0, "infra_error")])
    read = read_episodes([run])
    (te,) = read.targets
    results = {r.task_id: r for r in read_results(run)}
    tasks = load_run_tasks(run, read_manifest(run))
    assert [e.task_id for e in te.episodes] == ["a", "b", "dead"] and te.missing == []
    for e in te.episodes:
        assert isinstance(e, PackedEpisode) and isinstance(e.packed_result, bytes)
        result, task = e.unpack()
        assert result == results[e.task_id] and task == tasks[e.task_id] and e.status == result.status
        assert result is not e.unpack()[0]  # each unpack is the worker's own copy
    assert read.read_s > 0 and read.warnings == []


def test_tasks_fall_back_to_the_result_line_or_say_why_there_is_none(tmp_path):
    run = make_run(tmp_path / "run", [("a", 1, "finished"), ("b", 1, "finished")], suite=False,
                   instruction="Imported {id}")
    lines = (run / "results.jsonl").read_text().splitlines()
    b = json.loads(lines[1])
    b.pop("instruction")
    (run / "results.jsonl").write_text(lines[0] + "\n" + json.dumps(b) + "\n")
    a, nob = read_episodes([run]).targets[0].episodes
    assert a.unpack()[1].instruction == "Imported a" and a.task_problem is None
    assert nob.packed_task is None and nob.unpack()[1] is None and "--suite" in nob.task_problem


def test_episode_folders_select_their_episodes_and_name_the_missing(tmp_path):
    run = make_run(tmp_path / "run", [("a", 1, "finished"), ("b", 1, "finished")])
    (run / "episodes" / "c").mkdir()
    (run / "episodes" / "c" / "trajectory.jsonl").write_text("")  # started, never finished
    (te,) = read_episodes([run / "episodes" / "b", run / "episodes" / "c"]).targets
    assert [e.task_id for e in te.episodes] == ["b"] and te.missing == ["c"]


def test_every_shipped_task_survives_packing():
    for t in load_suite(ROOT / "tasks").tasks:
        r = EpisodeResult(task_id=t.id, agent="x", status="finished", steps=1, cap=t.cap, verdicts={})
        assert PackedEpisode(t.id, r.status, _pack(r), _pack(t), None).unpack() == (r, t)


def test_a_pass_over_what_was_read_judges_what_a_pass_over_the_paths_judges(tmp_path):
    runs = [make_run(tmp_path / name, [("a", 2, "finished"), ("b", 1, "step_limit")]) for name in ("one", "two")]
    read = read_episodes(runs)
    with ScriptedModelServer(responder) as s:
        setup = prepare_judges(["count-test"], {}, model(s), concurrency=2)
        first = judge_runs(read, setup, concurrency=2, set_id="read", fsync=False)
        second = judge_runs(runs, setup, concurrency=2, set_id="paths", fsync=False)
    assert first.judged == second.judged == 4 and first.runs == second.runs
    assert first.wall_s >= read.read_s

    def lines(run, set_id):  # without what is a time
        out = []
        for d in read_lines(run / "judgements" / set_id / "results.jsonl"):
            d = {k: v for k, v in d.items() if k not in ("judged_at", "duration_s")}
            d["usage"].pop("model_s")
            out.append(d)
        return sorted(out, key=lambda d: d["task_id"])

    for run in runs:
        assert lines(run, "read") == lines(run, "paths") and len(lines(run, "read")) == 2
