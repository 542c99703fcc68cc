"""``harness judge`` with the real ``crate`` and ``crate-s`` judges against the scripted server: one
step call per step and one aggregation call per episode and judge; with a step-evidence cache file
a second pass (another judgement set, another server) makes only the aggregation calls."""

from __future__ import annotations

import json
from pathlib import Path

from harness.cli.main import main
from harness.client.config import ModelConfig
from harness.offline_judge import judge_runs, prepare_judges
from judges import crate  # ours, in the same tree: an import error here is a failure, never a skip
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.offline_judge.sample_runs import make_run

REPLIES = {
    "crate_step": {"clues": "a list of contacts", "effect": "opens the contact"},
    "crate_s_step": {"risky": False, "category": None, "reason": "harmless tap", "score": 0.1},
    "crate_traj": {"conditions": [{"condition": "done", "met": True, "evidence": "seen"}], "success": True,
                   "reason": "all met"},
    "crate_s_traj": {"unsafe": True, "first_unsafe_step": 2, "category": "Destructive Actions", "reason": "deleted"},
}


def kind(req) -> str:
    rf = req.get("response_format") or {}
    name = (rf.get("json_schema") or {}).get("name")
    if name:
        return name
    text = json.dumps(req.get("messages"))
    return "crate_s_traj" if "unsafe" in text and "first_unsafe_step" in text else "crate_traj"


def responder(counts: dict[str, int], broken: set[str] = frozenset()):
    def reply(req):
        k = kind(req)
        counts[k] = counts.get(k, 0) + 1
        if k in broken:
            return Reply("I cannot answer in JSON, sorry.")
        return Reply(json.dumps(REPLIES[k]))
    return reply


def cfg(server) -> ModelConfig:
    return ModelConfig(base_url=server.base_url, model="judge-vl", max_retries=0, timeout_s=20)


def test_crate_offline_with_cache_second_pass_is_nearly_free(tmp_path):
    run = make_run(tmp_path / "run", [("a", 3, "finished"), ("b", 2, "step_limit"), ("c", 3, "halted")])
    cache = tmp_path / "evidence.jsonl"
    first_counts: dict[str, int] = {}
    second_counts: dict[str, int] = {}
    with ScriptedModelServer(responder(first_counts)) as s:
        s.httpd.RequestHandlerClass.disable_nagle_algorithm = True
        setup = prepare_judges(["crate", "crate-s"], {}, cfg(s), concurrency=4, cache=str(cache))
        r1 = judge_runs([run], setup, concurrency=4, fsync=False)
        max_active = s.max_active
        # a second pass on the same endpoint and model, in a fresh process's memory (the cache file only)
        from judges.evidence import _shared
        _shared.clear()
        s.set(responder(second_counts))
        setup2 = prepare_judges(["crate", "crate-s"], {}, cfg(s), concurrency=4, cache=str(cache))
        r2 = judge_runs([run], setup2, concurrency=4, set_id="second-pass", fsync=False)
    steps = 3 + 2 + 3
    assert first_counts == {"crate_step": steps, "crate_s_step": steps, "crate_traj": 3, "crate_s_traj": 3}
    assert r1.usage["calls"] == 2 * (steps + 3) and r1.attributed_calls == r1.usage["calls"]
    assert max_active <= 4
    lines = {d["task_id"]: d for d in map(json.loads, (run / "judgements" / r1.set_id / "results.jsonl").open())}
    assert r1.set_id == "judge-vl"  # the model's name: columns read crate@judge-vl
    assert lines["a"]["verdicts"] == {"crate": True, "crate-s": True}
    assert lines["a"]["details"]["crate-s"]["first_unsafe_step"] == 2
    assert len(lines["a"]["details"]["crate"]["evidence"]) == 3
    assert lines["b"]["usage"]["calls"] == 2 * (2 + 1)  # traced to the episode through the judges' clients

    # every step's evidence comes from the cache file: only the aggregation calls remain
    assert second_counts == {"crate_traj": 3, "crate_s_traj": 3}
    assert r2.judged == 3 and r2.usage["calls"] == 6
    lines2 = {d["task_id"]: d for d in map(json.loads, (run / "judgements" / "second-pass" / "results.jsonl").open())}
    assert lines2["a"]["verdicts"] == lines["a"]["verdicts"]
    assert all(e["cached"] for e in lines2["a"]["details"]["crate"]["evidence"])

    # another endpoint (same model name) is another judge: its answers are its own, none is reused
    third_counts: dict[str, int] = {}
    with ScriptedModelServer(responder(third_counts)) as s3:
        setup3 = prepare_judges(["crate", "crate-s"], {}, cfg(s3), concurrency=4, cache=str(cache))
        judge_runs([run], setup3, concurrency=4, set_id="third-pass", fsync=False)
    assert third_counts == first_counts


def test_crate_unparseable_reply_is_a_judge_error_with_reason(tmp_path):
    run = make_run(tmp_path / "run", [("a", 2, "finished"), ("b", 1, "finished")])
    counts: dict[str, int] = {}
    with ScriptedModelServer(responder(counts, broken={"crate_traj"})) as s:
        report = judge_runs([run], prepare_judges(["crate", "crate-s"], {}, cfg(s), concurrency=2), concurrency=2,
                            fsync=False)
    assert report.verdicts["crate"] == {"true": 0, "false": 0, "judge_error": 2}
    assert report.verdicts["crate-s"]["judge_error"] == 0
    line = json.loads((run / "judgements" / report.set_id / "results.jsonl").read_text().splitlines()[0])
    assert "unusable reply" in line["details"]["crate"]["error"]


def test_cli_judge_with_crate_uses_the_run_cache_by_default(tmp_path, capsys):
    run = make_run(tmp_path / "run", [("a", 2, "finished")])
    counts: dict[str, int] = {}
    with ScriptedModelServer(responder(counts)) as s:
        argv = ["judge", str(run), "--judge", "crate", "--model-base-url", s.base_url, "--model", "vl",
                "--concurrency", "3", "--retries", "0", "--no-progress"]
        assert main(argv) == 0
        assert main([*argv, "--judge-set", "again"]) == 0
    out = capsys.readouterr().out
    assert (run / "judgements" / "evidence-cache.jsonl").is_file()
    # pass 1: 2 step calls + 1 aggregation; pass 2 (new set, same process): the steps come from cache
    assert counts == {"crate_step": 2, "crate_traj": 2}
    assert "3 model call(s)" in out and "1 model call(s)" in out
    assert not (Path(run) / "judgements" / "evidence-cache.jsonl").is_dir()


def test_steps_that_did_not_run_are_known_offline_new_and_old_records(tmp_path):
    """Offline judging rebuilds each step's ``executed`` from the record (new records say it; older
    ones are read as what happened: a monitor's halt means the action did not run): no step call
    for a step that did not run, and the CRATE-S verdict never names it the first unsafe step."""
    run = make_run(tmp_path / "run", [("new", 3, "halted"), ("old", 3, "halted")])
    for tid, keep_field in (("new", True), ("old", False)):
        traj = run / "episodes" / tid / "trajectory.jsonl"
        lines = [json.loads(x) for x in traj.read_text().splitlines()]
        # an async halt: step 2's check halted; step 3 is the boundary, its proposal never ran
        lines[2]["monitor"] = {"monitor": "crate-s", "halt": True, "risky": True, "halted_step": 2,
                               "category": "Destructive Actions", "reason": "deletes everything"}
        lines[2]["screen_after"] = None
        if keep_field:
            for ln in lines:
                ln["executed"] = ln["index"] != 3
        traj.write_text("".join(json.dumps(x) + "\n" for x in lines))
        (run / "episodes" / tid / "screens" / "003.png").unlink()
    replies = dict(REPLIES)
    replies["crate_s_traj"] = {"reason": "step 3 deletes", "first_unsafe_step": 3, "category": "Destructive Actions",
                               "unsafe": True}
    counts: dict[str, int] = {}

    def reply(req):
        k = kind(req)
        counts[k] = counts.get(k, 0) + 1
        return Reply(json.dumps(replies[k]))

    with ScriptedModelServer(reply) as s:
        setup = prepare_judges(["crate-s"], {}, cfg(s), concurrency=2)
        judge_runs([run], setup, concurrency=2, fsync=False)
    assert counts == {"crate_s_step": 4, "crate_s_traj": 2}  # two steps per episode: step 3 is never asked
    sets = list((run / "judgements").iterdir())
    lines = [json.loads(x) for x in (sets[0] / "results.jsonl").read_text().splitlines()]
    for line in lines:
        d = line["details"]["crate-s"]
        assert d["first_unsafe_step"] is None and d["first_unsafe_step_not_executed"] == 3, line["task_id"]
        assert d["evidence"][2]["synthetic"] and d["evidence"][2]["executed"] is False


def test_the_pass_shares_one_bounded_pool_of_call_threads(tmp_path):
    """Every judge of every worker sends its calls to the pass's one pool of K + a margin threads:
    the judges start no threads of their own, so a pass's threads (and memory) do not grow with the
    number of judges or episodes open at once."""
    import threading

    run = make_run(tmp_path / "run", [(f"e{i}", 3, "finished") for i in range(12)])
    before = set(threading.enumerate())  # other tests' threads in this process are not the pass's
    seen: set[str] = set()
    counts: dict[str, int] = {}
    reply = responder(counts)

    def watching(req):
        seen.update(t.name for t in threading.enumerate() if t not in before)
        return reply(req)

    with ScriptedModelServer(watching) as s:
        setup = prepare_judges(["crate", "crate-s"], {}, cfg(s), concurrency=4)
        r = judge_runs([run], setup, concurrency=4, fsync=False)
    assert r.judged == 12 and counts["crate_step"] == 36 and counts["crate_s_step"] == 36
    calls = {n for n in seen if n.startswith("judge-calls")}
    assert 1 <= len(calls) <= 4 + 2
    assert not [n for n in seen if n.startswith(("judge-crate", "judge-milestones", "judge-holistic"))]


def test_a_judged_episode_leaves_no_reference_cycle_behind(tmp_path, monkeypatch):
    """Each episode's step collector is freed by reference counting once the episode is judged: its
    step futures hold callbacks into it, so a collector still holding them would be a cycle that
    only the garbage collector frees, and the memory of a long pass crept up between collections."""
    import gc
    import weakref

    made: list[weakref.ref] = []
    real_init = crate.StepCollector.__init__

    def tracked(self, *a, **k):
        real_init(self, *a, **k)
        made.append(weakref.ref(self))

    monkeypatch.setattr(crate.StepCollector, "__init__", tracked)
    run = make_run(tmp_path / "run", [(f"e{i}", 3, "finished") for i in range(8)])
    counts: dict[str, int] = {}
    gc.collect()
    gc.disable()
    try:
        with ScriptedModelServer(responder(counts)) as s:
            setup = prepare_judges(["crate", "crate-s"], {}, cfg(s), concurrency=2)
            r = judge_runs([run], setup, concurrency=2, fsync=False)
            del setup
        assert r.judged == 8 and len(made) >= 16  # a collector per episode and judge
        alive = [ref() for ref in made if ref() is not None]
        assert alive == [], f"{len(alive)} collectors kept alive by reference cycles"
    finally:
        gc.enable()
