"""Repeated episodes in ``harness report``: pass@k, pass^k, flip rate, the spread over repeats, the
flaky list and the paired comparison over every repeat, each checked against figures computed by
hand in this file (the arithmetic is written out beside each), and a report of single episodes
unchanged by the repeats section."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.core.episode_ids import episode_id, repeat_seed, split_episode_id, task_of
from harness.records import EpisodeResult, RunWriter, validate_task_id
from harness.report import repeat_stats as rs
from harness.report.table_formats import format_html, format_json, format_md
from harness.report.tables import build_report

TASKS = """
- id: a
  instruction: A
  language: en
  reference_steps: 2
- id: b
  instruction: B
  language: en
  reference_steps: 2
- id: c
  instruction: C
  language: zh
  reference_steps: 2
"""

# agent X over 5 repeats: a = S F S S F (3/5), b = S S S S S (5/5), c = F F F F - (0/4: an infra error)
X = {"a": [True, False, True, True, False], "b": [True] * 5, "c": [False, False, False, False, None]}
# agent Y: a = F F F F F, b = S S F S S, c = S F F F F
Y = {"a": [False] * 5, "b": [True, True, False, True, True], "c": [True, False, False, False, False]}


def write_repeats(path: Path, agent: str, outcomes: dict[str, list], conditions=None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "tasks.yaml").write_text(TASKS)
    n = max(len(v) for v in outcomes.values())
    with RunWriter(path, fsync=False) as run:
        run.write_manifest({"agent": {"name": agent, "label": agent}, "repeats": n,
                            "suite": {"path": "suite-x", "files": {"tasks.yaml": None}}})
        for r in range(1, n + 1):
            for task, outs in outcomes.items():
                o = outs[r - 1]
                extra = {"conditions": conditions(task, r)} if conditions else {}
                run.append_result(EpisodeResult(
                    task_id=episode_id(task, r, n), agent=agent, status="infra_error" if o is None else "finished",
                    steps=1, cap=5, verdicts={} if o is None else {"oracle": o}, seed=repeat_seed(0, r),
                    task=task, repeat=r, **extra))
    return path


def test_episode_ids_and_seeds():
    assert episode_id("a.b", 1, 1) == "a.b" and episode_id("a.b", 3, 5) == "a.b#3"
    assert split_episode_id("a.b#3") == ("a.b", 3) and split_episode_id("a.b") == ("a.b", None)
    assert task_of("x-1#12") == "x-1" and validate_task_id("x-1#12") == "x-1#12"
    for bad in ("x#0", "x#", "#1", "x#1#2", "x#01"):
        with pytest.raises(Exception):
            validate_task_id(bad)
    assert repeat_seed(7, 1) == 7  # the first repeat is the episode a single run would have been
    seeds = {repeat_seed(7, r) for r in range(1, 50)}
    assert len(seeds) == 49 and all(0 <= s < 2 ** 31 for s in seeds)


def test_estimators_by_hand():
    # n = 5, c = 3: pass@1 = 3/5; pass@2 = 1 - C(2,2)/C(5,2) = 1 - 1/10; pass@3 = 1 - 0/10 = 1
    assert rs.pass_at_k(5, 3, 1) == pytest.approx(0.6)
    assert rs.pass_at_k(5, 3, 2) == pytest.approx(0.9)
    assert rs.pass_at_k(5, 3, 3) == 1.0
    # pass^2 = C(3,2)/C(5,2) = 3/10; pass^3 = C(3,3)/C(5,3) = 1/10; pass^4 = 0
    assert rs.pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert rs.pass_hat_k(5, 3, 3) == pytest.approx(0.1)
    assert rs.pass_hat_k(5, 3, 4) == 0.0
    with pytest.raises(ValueError):
        rs.pass_at_k(5, 3, 6)
    # sign-flip, exact: diffs (1, 1, 1): of 8 sign patterns, 2 reach |sum| = 3: p = 0.25
    assert rs.sign_flip_p([1, 1, 1]) == pytest.approx(0.25)
    # detectable: sd of (0.2, 0.4, 0.6) is 0.2; (1.95996 + 0.84162) * 0.2 / sqrt(3) = 0.32350
    assert rs.min_detectable([0.2, 0.4, 0.6]) == pytest.approx(0.323499, abs=1e-5)
    # a task always solved or never solved does not move: the interval of all-0/1 tasks is a point
    assert rs.bootstrap_sr([(5, 5), (5, 5)], resamples=50) == (1.0, 1.0)
    lo, hi = rs.bootstrap_sr([(5, 3), (5, 5), (4, 0)], resamples=2000, seed=1)
    assert 0 <= lo < (0.6 + 1 + 0) / 3 < hi <= 1


def test_report_of_repeats_matches_hand_computation(tmp_path):
    run = write_repeats(tmp_path / "x", "X", X)
    rep = build_report([str(run)], ["agent"], resamples=500)
    assert rep.paired == [] and rep.repeats is not None
    (a,) = rep.repeats["agents"]
    assert (a["tasks"], a["repeats"], a["repeats_min"]) == (3, 5, 4)
    # SR in each repeat: r1 S S F = 2/3, r2 F S F = 1/3, r3 2/3, r4 2/3, r5 (F S, c missing) = 1/2
    by_repeat = [2 / 3, 1 / 3, 2 / 3, 2 / 3, 1 / 2]
    assert a["sr_by_repeat"] == pytest.approx(by_repeat)
    mean = sum(by_repeat) / 5  # 0.56667
    sd = math.sqrt(sum((x - mean) ** 2 for x in by_repeat) / 4)  # 0.14907
    assert a["sr_mean"] == pytest.approx(0.566667, abs=1e-6) and a["sr_sd"] == pytest.approx(sd)
    assert sd == pytest.approx(0.149071, abs=1e-6)
    # pass@1 = mean(3/5, 5/5, 0/4) = 0.53333; pass@2 = mean(0.9, 1, 0) = 0.63333; pass@5 only a and b:
    # mean(1 - C(2,5)/C(5,5) = 1, 1) = 1
    assert a["pass_at"][:2] == pytest.approx([1.6 / 3, 1.9 / 3])
    assert a["pass_at"][4] == 1.0 and a["pass_tasks"] == [3, 3, 3, 3, 2]
    # pass^2 = mean(0.3, 1, 0) = 0.43333; pass^3 = mean(0.1, 1, 0) = 0.36667
    assert a["pass_hat"][1:3] == pytest.approx([1.3 / 3, 1.1 / 3])
    # flip rate: only a disagrees, of 3 tasks with two or more repeats
    assert (a["flipped"], a["flip_tasks"], a["flip_rate"]) == (1, 3, pytest.approx(1 / 3))
    assert a["flaky"] == ["a"] and a["boot_low"] < mean < a["boot_high"]
    md = format_md(rep)
    assert "| X | 3 | 5 (min 4) | 66.7 33.3 66.7 66.7 50.0 | 56.7 ± 14.9 |" in md
    assert "| X | a | 3/5 | S F S S F |" in md and "| X | c | 0/4 | F F F F - |" in md
    assert "pass@2 %" in md and "pass^5 %" in md and "53.3 | 63.3 |" in md and "| 33.3 (1/3) | 1 |" in md
    assert "| 100.0 (2 tasks) |" in md  # pass@5: c has 4 scored repeats
    assert json.loads(format_json(rep))["repeats"]["agents"][0]["flaky"] == ["a"]
    assert "Flaky tasks" in format_html(rep)


def test_paired_over_repeats_by_hand(tmp_path):
    x, y = write_repeats(tmp_path / "x", "X", X), write_repeats(tmp_path / "y", "Y", Y)
    rep = build_report([str(x), str(y)], ["agent"], resamples=500)
    (p,) = rep.repeats["paired"]
    # per-task rates X: a 0.6, b 1, c 0; Y: a 0, b 0.8, c 0.2 -> diffs 0.6, 0.2, -0.2
    assert (p["sr_a"], p["sr_b"], p["diff"]) == (pytest.approx(1.6 / 3), pytest.approx(1 / 3), pytest.approx(0.2))
    # majorities X: S S F, Y: F S F -> only X on a: b = 1, c = 0, McNemar exact p = 1
    assert (p["only_a"], p["only_b"], p["mcnemar_p"]) == (1, 0, 1.0)
    # sign-flip exact over (0.6, 0.2, -0.2): |sum| >= 0.6 for (+,+,-) (+,+,+)... by enumeration:
    sums = [abs(s1 * 0.6 + s2 * 0.2 + s3 * -0.2) for s1 in (1, -1) for s2 in (1, -1) for s3 in (1, -1)]
    assert p["sign_flip_p"] == pytest.approx(sum(1 for s in sums if s >= 0.6 - 1e-9) / 8)  # 0.75
    # sd(0.6, 0.2, -0.2) = 0.4 -> (1.95996 + 0.84162) * 0.4 / sqrt(3) = 0.64700
    assert p["min_detectable"] == pytest.approx(0.647, abs=1e-3)
    assert "Paired comparisons over repeats" in format_md(rep) and "| 64.7 |" in format_md(rep)


def test_conditions_that_differ_are_named(tmp_path):
    def cond(task, r):
        return {"device": "phone-1" if r % 2 else "phone-2", "build": "b1", "profile": "p",
                "sampling": {"temperature": 0.0}, "start_screen": {"dhash": "00ff" if task != "a" or r < 5 else "ffff"}}

    rep = build_report([str(write_repeats(tmp_path / "x", "X", X, cond))], ["agent"], resamples=100)
    (a,) = rep.repeats["agents"]
    assert a["differs"]["device"] == 3 and a["differs"]["start screen"] == 1 and "build" not in a["differs"]
    md = format_md(rep)
    assert "device: A B A B A; start screen: A A A A B" in md  # task a, its fifth repeat began elsewhere


def test_single_episodes_read_as_before(tmp_path):
    single = write_repeats(tmp_path / "one", "X", {"a": [True], "b": [False]})
    rep = build_report([str(single)], ["agent"])
    assert rep.repeats is None and "repeats" not in json.loads(format_json(rep))
    assert "Repeats" not in format_md(rep)
