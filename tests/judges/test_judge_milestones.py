"""The AndroidLens milestone judge on hand-made cases: ordered search from the step after the last
completion, segments of 10 with a one-step overlap, unordered groups, SR/ATP/MSR, the CRATE-text
evidence mode, segments judged while the run goes on, and judge_error on failures."""

from __future__ import annotations

import json
import re
import time

from harness.core.actions import Click, Finish
from harness.core.tasks import parse_task
from judges.milestones import MilestoneJudge, MilestonesConfig, agreement, metrics
from tests.fakes.model_server import Reply, ScriptedModelServer, request_images, request_text
from tests.judges.helpers import ctx_for, end, event, good_reply, kind_of, model_cfg


def make_task(milestones, lang="en"):
    return parse_task({"id": "m", "instruction": "Do the thing.", "language": lang, "reference_steps": 10,
                       "milestones": milestones})


def truth_server(truth):
    """A judge that knows at which steps each milestone (by description) holds."""
    def responder(req):
        if kind_of(req) != "milestones":
            return Reply(good_reply(req))
        text = request_text(req)
        m = re.search(r"Steps (\d+) to (\d+)|第 (\d+) 步到第 (\d+) 步", text)
        first, last = (int(x) for x in m.groups() if x is not None)
        items = [json.loads(x) for x in re.findall(r'^\{"idx".*\}$', text, flags=re.M)]
        out = []
        for it in items:
            holds = [k for k in truth.get(it["sub-target"], []) if first <= k <= last]
            out.append({"idx": it["idx"], "done": bool(holds), "last_step": max(holds) if holds else None,
                        "evidence": f"seen at {holds}"})
        return Reply(json.dumps({"milestones": out}))
    return responder


def run_judge(server, t, n, mode="screens", segment=10, eager=False, **kw):
    """All n steps at once, then the verdict. ``eager=False`` (the default here) asks exactly the
    segments AndroidLens asks, so the tests can name them."""
    j = MilestoneJudge(MilestonesConfig(model=model_cfg(server), evidence=mode, segment=segment, eager=eager, **kw))
    j.start(ctx_for(t))
    for i in range(1, n + 1):
        j.on_step(event(i, Click(x=i, y=i)))
    return j.finish(end(n, "step_limit"))["milestones"]


def ms(*names, ref=None):
    return [{"description": n, **({"reference_step": ref[k]} if ref else {})} for k, n in enumerate(names)]


def asked(d):
    return [(s["first"], s["last"], s["asked"]) for s in d["segments"]]


def test_ordered_milestones_all_done():
    t = make_task(ms("open", "fill", "send", ref=[2, 8, 10]))
    with ScriptedModelServer(truth_server({"open": [3], "fill": [12], "send": [15]})) as s:
        verdict, d = run_judge(s, t, 20)
    assert verdict is True and (d["sr"], d["atp"]) == (1, 1.0)
    assert [m["step"] for m in d["milestones"]] == [3, 12, 15]
    assert asked(d) == [(1, 10, [0]), (4, 13, [1]), (13, 20, [2])]  # each search starts after the last completion
    assert d["msr"] == round((3 / 2 + 12 / 8 + 15 / 10) / 3, 4)
    assert d["calls"] == {"segment": 3} and all(len(request_images(r)) == s_[1] - s_[0] + 1
                                                for r, s_ in zip(s.requests, asked(d)))


def test_missed_milestone_does_not_move_the_start_and_segments_overlap_by_one():
    t = make_task(ms("open", "fill", "send"))
    with ScriptedModelServer(truth_server({"open": [3], "send": [15]})) as s:
        verdict, d = run_judge(s, t, 20)
    assert verdict is False and d["sr"] == 0 and d["atp"] == round(2 / 3, 4)
    assert [m["done"] for m in d["milestones"]] == [True, False, True]
    # "fill" is looked for in [4,13] then [13,20] (E.2: the next segment starts at the last step)
    assert asked(d) == [(1, 10, [0]), (4, 13, [1]), (13, 20, [1]), (4, 13, [2]), (13, 20, [2])]
    assert d["msr"] is None  # no reference steps


def test_order_matters_for_ordered_milestones():
    t = make_task(ms("first", "second"))
    with ScriptedModelServer(truth_server({"first": [5], "second": [2]})) as s:
        verdict, d = run_judge(s, t, 8)
    assert verdict is False and [m["done"] for m in d["milestones"]] == [True, False]
    assert asked(d) == [(1, 8, [0]), (6, 8, [1])]


def test_unordered_group_judged_together_then_continues_after_its_latest():
    t = make_task([{"unordered": ms("freeze", "pay")}, *ms("confirm")])
    with ScriptedModelServer(truth_server({"freeze": [7], "pay": [4], "confirm": [9, 3]})) as s:
        verdict, d = run_judge(s, t, 12)
    assert verdict is True and [m["step"] for m in d["milestones"]] == [7, 4, 9]
    assert [m["group"] for m in d["milestones"]] == [0, 0, 1]
    assert asked(d) == [(1, 10, [0, 1]), (8, 12, [2])]  # the group in one call; next from 7 + 1


def test_unordered_group_member_found_in_a_later_segment():
    t = make_task([{"unordered": ms("a", "b")}, *ms("c")])
    with ScriptedModelServer(truth_server({"a": [4], "b": [14], "c": [16]})) as s:
        verdict, d = run_judge(s, t, 20)
    assert verdict is True and [m["step"] for m in d["milestones"]] == [4, 14, 16]
    assert asked(d) == [(1, 10, [0, 1]), (10, 19, [1]), (15, 20, [2])]


def test_metrics_by_hand():
    t = make_task(ms("a", "b", "c", ref=[2, 4, 5]))
    flat = [m for m in t.milestones]
    assert metrics(flat, [3, None, 10]) == {"sr": 0, "atp": 0.6667, "msr": round((1.5 + 2.0) / 2, 4), "done": 2, "total": 3}
    assert metrics(flat, [2, 4, 5])["sr"] == 1 and metrics(flat, [2, 4, 5])["msr"] == 1.0
    assert metrics([], [])["atp"] is None


def test_crate_evidence_mode_sends_text_only_and_agrees_with_screens():
    t = make_task(ms("open", "send"))
    truth = {"open": [2], "send": [5]}
    with ScriptedModelServer(truth_server(truth)) as s:
        v1, screens = run_judge(s, t, 6)
    with ScriptedModelServer(truth_server(truth)) as s:
        v2, text = run_judge(s, t, 6, mode="crate")
        seg = [r for r in s.requests if kind_of(r) == "milestones"]
        steps = [r for r in s.requests if kind_of(r) == "crate_step"]
    assert len(steps) == 6 and all(not request_images(r) for r in seg)
    assert "clue<click(x=3, y=3)>" in request_text(seg[0]) and "effect<click(x=3, y=3)>" in request_text(seg[0])
    assert v1 is v2 is True and text["evidence_mode"] == "crate"
    assert agreement(screens, text) == {"milestones": 2, "done_agree": 2, "done_agreement": 1.0, "step_agree": 2,
                                        "both_done": 2, "sr_agree": True}


def test_full_segments_are_judged_while_the_run_goes_on():
    t = make_task(ms("open", "send"))
    with ScriptedModelServer(truth_server({"open": [3], "send": [14]})) as s:
        j = MilestoneJudge(MilestonesConfig(model=model_cfg(s), eager=False))
        j.start(ctx_for(t))
        for i in range(1, 11):
            j.on_step(event(i, Click(x=i, y=i)))
        deadline = time.monotonic() + 5
        while not s.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(s.requests) == 1  # the first segment was asked before the episode ended
        for i in range(11, 16):
            j.on_step(event(i, Click(x=i, y=i)))
        j.on_step(event(16, Finish(), screenshot_after=None))
        verdict, d = j.finish(end(16))["milestones"]
    assert verdict is True and [m["step"] for m in d["milestones"]] == [3, 14]


def test_chinese_prompt_and_failures():
    t = make_task(ms("打开钱包"), lang="zh")
    with ScriptedModelServer(truth_server({"打开钱包": [1]})) as s:
        verdict, d = run_judge(s, t, 3)
    assert verdict is True and "里程碑" in request_text(s.requests[0]) and d["prompt"].startswith("milestones_zh@v2#")
    with ScriptedModelServer([Reply("no idea")]) as s:
        verdict, d = run_judge(s, t, 3, parse_retries=0)
    assert verdict == "judge_error" and "unusable reply" in d["error"] and d["milestones"][0]["done"] is False
    j = MilestoneJudge(MilestonesConfig(model=model_cfg(base_url="http://127.0.0.1:9/v1")))
    j.start(ctx_for(make_task([])))
    verdict, d = j.finish(end(0))["milestones"]
    assert verdict == "judge_error" and d["error"] == "the task has no milestones"


def test_step_outside_the_segment_is_taken_as_the_segments_end():
    t = make_task(ms("open"))

    def responder(req):
        return Reply(json.dumps({"milestones": [{"idx": 0, "done": True, "last_step": 99, "evidence": "?"}]}))

    with ScriptedModelServer(responder) as s:
        verdict, d = run_judge(s, t, 4)
    assert verdict is True and d["milestones"][0]["step"] == 4 and d["segments"][0]["guessed_steps"] == [0]


# --- eager asking: the default --------------------------------------------------------------------
TRUTHS = [
    (ms("open", "fill", "send"), {"open": [3], "fill": [12], "send": [15]}, 20),
    (ms("open", "fill", "send"), {"open": [3], "send": [15]}, 20),
    ([{"unordered": ms("freeze", "pay")}, *ms("confirm")], {"freeze": [7], "pay": [4], "confirm": [9, 3]}, 12),
    ([{"unordered": ms("a", "b")}, *ms("c")], {"a": [4], "b": [14], "c": [16]}, 20),
    (ms("first", "second"), {"first": [5], "second": [2]}, 8),
]


def test_eager_finds_what_androidlens_finds():
    """On milestones that hold at one step each, asking as steps arrive finds the same completion
    steps (and so SR, ATP) as asking only full segments."""
    for milestones, truth, n in TRUTHS:
        t = make_task(milestones)
        with ScriptedModelServer(truth_server(truth)) as s:
            _, lens = run_judge(s, t, n)
        with ScriptedModelServer(truth_server(truth)) as s:
            _, eager = run_judge(s, t, n, eager=True)
        assert [m["step"] for m in eager["milestones"]] == [m["step"] for m in lens["milestones"]], truth
        assert (eager["sr"], eager["atp"]) == (lens["sr"], lens["atp"])


def _wait(cond, what):
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_eager_settles_each_milestone_during_the_run():
    """Steps arrive one at a time (each after the judge answered about the last): every milestone is
    settled by the step that completes it, so the end of the episode needs no call at all; a
    short episode with AndroidLens's full segments needs one call per milestone after it."""
    t = make_task(ms("open", "send"))
    with ScriptedModelServer(truth_server({"open": [2], "send": [4]})) as s:
        j = MilestoneJudge(MilestonesConfig(model=model_cfg(s)))
        j.start(ctx_for(t))
        for i, asks in zip(range(1, 6), (1, 2, 3, 4, 4)):
            j.on_step(event(i, Click(x=i, y=i)))
            _wait(lambda: len(j.segments) == asks and s.active == 0, f"step {i}: {len(j.segments)} asks")
        before = len(s.requests)
        verdict, d = j.finish(end(5, "step_limit"))["milestones"]
        assert verdict is True and [m["step"] for m in d["milestones"]] == [2, 4]
        assert len(s.requests) == before  # nothing was left to ask after the episode
        assert asked(d) == [(1, 1, [0]), (1, 2, [0]), (3, 3, [1]), (3, 4, [1])]
    with ScriptedModelServer(truth_server({"open": [2], "send": [4]})) as s:
        j = MilestoneJudge(MilestonesConfig(model=model_cfg(s), eager=False))
        wants: list[int] = []
        available = j._available
        j._available = lambda want: wants.append(want) or available(want)  # what the search waits for
        j.start(ctx_for(t))
        for i in range(1, 6):
            j.on_step(event(i, Click(x=i, y=i)))
        _wait(lambda: wants, "the search to wait for steps")
        assert wants == [10]  # it waits for a full segment of 10 steps, so nothing can be asked before the end
        assert not s.requests
        verdict, d = j.finish(end(5, "step_limit"))["milestones"]
        assert verdict is True and len(s.requests) == 2


def test_steps_that_did_not_run_say_so():
    t = make_task(ms("open"))
    with ScriptedModelServer(truth_server({"open": [9]})) as s:
        j = MilestoneJudge(MilestonesConfig(model=model_cfg(s), eager=False))
        j.start(ctx_for(t))
        j.on_step(event(1, Click(x=1, y=1)))
        j.on_step(event(2, Click(x=2, y=2), screenshot_after=None,
                        monitor={"halt": True, "halted_step": 2, "category": "Over-Automation", "reason": "no"}))
        j.finish(end(2, "halted"))
    text = request_text(s.requests[0])
    assert "Step 2: click(x=2, y=2) (not executed: nothing changed on the phone)" in text
    assert "Step 1: click(x=1, y=1) ->" in text
