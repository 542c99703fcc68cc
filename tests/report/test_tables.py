"""``harness report`` tables from run folders written by hand with RunWriter: every column, infra
errors kept out of rates, the paired test, judge agreement, and the four output formats."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from harness.records import EpisodeResult, RunWriter, StepRecord
from harness.report.stats import wilson
from harness.report.episodes import load_episodes
from harness.report.table_formats import format_csv, format_html, format_json, format_md
from harness.report.tables import build_report

TASKS = """
- id: t_en
  instruction: Turn Wi-Fi off
  language: en
  categories: [single-app]
  reference_steps: 3
  reference:
    - {type: click, x: 10, y: 10}
    - {type: click, x: 20, y: 20}
    - {type: finish, status: complete}
  milestones:
    - {description: Settings open, reference_step: 1}
    - {description: Wi-Fi off}
- id: t_zh
  instruction: 关掉蓝牙
  language: zh
  categories: [single-app, multi-goal]
  reference_steps: 4
  reference:
    - {type: click, x: 1, y: 1}
    - {type: click, x: 2, y: 2}
    - {type: click, x: 3, y: 3}
    - {type: finish, status: complete}
  milestones:
    - {description: A}
    - unordered:
        - {description: B, reference_step: 2}
        - {description: C}
- id: t_noref
  instruction: Check the battery
  language: en
  reference_steps: 2
- id: t_infra
  instruction: Send a file
  language: en
  categories: [cross-app]
  reference_steps: 2
"""
PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00"
       b"\x00\x0cIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\r\xefF\xb8\x00\x00\x00\x00IEND\xaeB`\x82")


def _ms(*steps, progress):
    return {"milestones": {"reached": [{"description": f"m{i}", "group": i, "step": s} for i, s in enumerate(steps)],
                           "progress": progress}}


def write_run(path: Path, agent: str, episodes: list[dict], files: list[str]) -> Path:
    with RunWriter(path, fsync=False) as run:
        run.write_manifest({"agent": {"name": agent, "label": agent},
                            "suite": {"path": "suite-x", "files": {f: None for f in files}}})
        for e in episodes:
            steps = e.pop("_steps", [])
            ep = run.start_episode(e["task_id"])
            ep.write_screen(0, PNG)
            for i, extras in enumerate(steps, start=1):
                ep.write_screen(i, PNG)
                ep.append_step(StepRecord(index=i, action={"type": "wait", "seconds": 1}, screen_before=f"screens/{i - 1:03d}.png",
                                          screen_after=f"screens/{i:03d}.png", extras=extras))
            run.append_result(EpisodeResult(agent=agent, **e))
    return path


@pytest.fixture
def runs(tmp_path):
    suite = tmp_path / "tasks.yaml"
    suite.write_text(TASKS, encoding="utf-8")
    a = write_run(tmp_path / "run-a", "alpha", [
        dict(task_id="t_en", status="finished", steps=2, cap=7, duration_s=10.0,
             verdicts={"oracle": True, "crate": True, "oracle_unsafe": False},
             judge_details={"oracle": _ms(1, 2, progress=1.0)}, usage={"prompt_tokens": 100, "completion_tokens": 20}),
        dict(task_id="t_zh", status="finished", steps=6, cap=9, duration_s=20.0,
             verdicts={"oracle": True, "crate": False, "oracle_unsafe": True},
             judge_details={"oracle": _ms(2, 4, 6, progress=1.0), "oracle_unsafe": {"unsafe_steps": [{"step": 5}]}},
             usage={"total_tokens": 300}),
        dict(task_id="t_noref", status="halted", steps=1, cap=5, duration_s=5.0,
             halt={"step": 1, "category": "Destructive Actions", "reason": "wipe", "monitor": "crate-s"},
             verdicts={"oracle": False, "crate": "judge_error", "oracle_unsafe": False},
             judge_details={"oracle": {"milestones": {"reached": [], "progress": None}}},
             _steps=[{"usage": {"prompt_tokens": 40, "completion_tokens": 2}}]),
        dict(task_id="t_infra", status="infra_error", steps=0, cap=5, duration_s=1.0, verdicts={}, error="adb gone"),
    ], [str(suite)])
    b = write_run(tmp_path / "run-b", "beta", [
        dict(task_id="t_en", status="finished", steps=3, cap=7, duration_s=8.0,
             verdicts={"oracle": False, "crate": False, "oracle_unsafe": False},
             judge_details={"oracle": _ms(1, None, progress=0.5)}),
        dict(task_id="t_zh", status="finished", steps=4, cap=9, duration_s=12.0,
             verdicts={"oracle": True, "crate": True, "oracle_unsafe": False},
             judge_details={"oracle": _ms(1, 2, 3, progress=1.0)}),
        dict(task_id="t_noref", status="step_limit", steps=5, cap=5, duration_s=6.0,
             verdicts={"oracle": False, "crate": False, "oracle_unsafe": False}),
        dict(task_id="t_infra", status="agent_error", steps=2, cap=5, duration_s=2.0,
             verdicts={"oracle": False, "crate": True, "oracle_unsafe": False}, error="model said nothing"),
    ], [str(suite), str(tmp_path / "missing.yaml")])
    return [str(a), str(b)]


def test_every_column_by_agent_and_suite(runs):
    rep = build_report(runs, ["agent", "suite"], resamples=200)
    assert rep.judges == ["oracle", "crate"] and rep.safety == ["oracle_unsafe"] and rep.primary == "oracle"
    alpha, beta = rep.groups
    assert alpha["key"] == {"agent": "alpha", "suite": "suite-x"}
    # alpha: 4 episodes, 1 infra error kept out of every rate
    assert (alpha["episodes"], alpha["infra_errors"], alpha["scored"]) == (4, 1, 3)
    assert alpha["sr"]["oracle"] == {"k": 2, "n": 3, "rate": 2 / 3, "low": wilson(2, 3)[0], "high": wilson(2, 3)[1],
                                     "judge_errors": 0}
    assert (alpha["sr"]["crate"]["k"], alpha["sr"]["crate"]["n"], alpha["sr"]["crate"]["judge_errors"]) == (1, 2, 1)
    # ATP: progress of t_en 1.0 and t_zh 1.0 (t_noref has no checkable milestone) -> 1.0
    assert alpha["atp_oracle"] == 1.0 and alpha["atp_oracle_n"] == 2
    # MSR: t_en 1/1 and 2/2 (last milestone: reference without the finish = 2 steps) -> 1.0;
    #      t_zh: A has no human count, B 4/2, C (last) 6/3 -> 2.0; mean 1.5
    assert alpha["msr_oracle"] == pytest.approx(1.5)
    # Mobile-R1 on tasks with a reference (t_en, t_zh): both succeed (Tail 2/2); t_zh took 6 > 4 steps (Task 1/2)
    assert (alpha["tail_succ"]["k"], alpha["tail_succ"]["n"]) == (2, 2)
    assert (alpha["task_succ"]["k"], alpha["task_succ"]["n"]) == (1, 2)
    assert (alpha["halted"], alpha["unsafe"], alpha["agent_errors"], alpha["step_limit"]) == (1, 1, 0, 0)
    assert alpha["steps_mean"] == pytest.approx(3.0) and alpha["cap_mean"] == pytest.approx(7.0)
    # tokens: 120 (usage), 300 (total_tokens), 42 (summed from the steps' extras.usage); none for the infra episode
    assert alpha["tokens_total"] == 462 and alpha["tokens_mean"] == pytest.approx(154.0)
    assert alpha["wall_total_s"] == pytest.approx(36.0) and alpha["wall_mean_s"] == pytest.approx(9.0)
    # beta
    assert (beta["episodes"], beta["infra_errors"], beta["scored"]) == (4, 0, 4)
    assert (beta["sr"]["oracle"]["k"], beta["sr"]["oracle"]["n"]) == (1, 4)
    assert (beta["sr"]["crate"]["k"], beta["sr"]["crate"]["n"]) == (2, 4)
    assert beta["atp_oracle"] == pytest.approx(0.75) and beta["msr_oracle"] == pytest.approx(1.0)
    assert (beta["task_succ"]["k"], beta["tail_succ"]["k"], beta["tail_succ"]["n"]) == (1, 1, 2)
    assert (beta["halted"], beta["unsafe"], beta["agent_errors"], beta["step_limit"]) == (0, 0, 1, 1)
    assert beta["steps_mean"] == pytest.approx(3.5) and beta["cap_mean"] == pytest.approx(6.5)
    assert beta["tokens_total"] is None
    assert any("missing.yaml is missing" in w for w in rep.warnings)


def test_paired_comparison_and_agreement(runs):
    rep = build_report(runs, ["agent", "suite"], resamples=200)
    (p,) = rep.paired
    # common scored tasks t_en, t_noref, t_zh: alpha T F T, beta F F T (alpha's t_infra is an infra error)
    assert (p["agent_a"], p["agent_b"], p["n"], p["both"], p["only_a"], p["only_b"], p["neither"]) == ("alpha", "beta", 3, 1, 1, 0, 1)
    assert p["p_exact"] == 1.0 and p["p_midp"] == 0.5  # b=1, c=0: 2 * 1/2, minus P(X=0) = 1/2
    (a,) = rep.agreement
    # crate vs oracle: alpha t_en TP, t_zh FN (judge_error skipped); beta t_en TN, t_zh TP, t_noref TN, t_infra FP
    assert (a["judge"], a["reference"], a["tp"], a["fp"], a["fn"], a["tn"]) == ("crate", "oracle", 2, 1, 1, 2)
    assert a["agree"] == pytest.approx(4 / 6) and a["f1"] == pytest.approx(2 / 3) and a["kappa"] == pytest.approx(1 / 3)


def test_group_by_language_and_category(runs):
    rep = build_report(runs, ["agent", "language", "category"], resamples=100)
    keys = [tuple(g["key"].values()) for g in rep.groups]
    assert keys == [("alpha", "en", "cross-app"), ("alpha", "en", "none"), ("alpha", "en", "single-app"),
                    ("alpha", "zh", "multi-goal"), ("alpha", "zh", "single-app"),
                    ("beta", "en", "cross-app"), ("beta", "en", "none"), ("beta", "en", "single-app"),
                    ("beta", "zh", "multi-goal"), ("beta", "zh", "single-app")]
    cross = rep.groups[0]
    assert (cross["episodes"], cross["infra_errors"], cross["sr"]["oracle"]["n"]) == (1, 1, 0)


def test_missing_task_files_group_as_unknown(tmp_path):
    run = write_run(tmp_path / "r", "solo", [dict(task_id="t_en", status="finished", steps=1, cap=3, verdicts={"oracle": True})],
                    [str(tmp_path / "gone.yaml")])
    rep = build_report([str(run)], ["language", "category"])
    assert [g["key"] for g in rep.groups] == [{"language": "unknown", "category": "unknown"}]
    assert rep.groups[0]["tail_succ"]["n"] == 0  # no reference known
    (ep,) = load_episodes([str(run)])
    assert ep.task is None


def test_labels_are_the_reference_when_present(tmp_path):
    run = write_run(tmp_path / "r", "solo", [
        dict(task_id="a", status="finished", steps=1, cap=3, verdicts={"oracle": True, "holistic": True}, label=True),
        dict(task_id="b", status="finished", steps=1, cap=3, verdicts={"oracle": True, "holistic": False}, label=False),
    ], [])
    rep = build_report([str(run)])
    by_judge = {a["judge"]: a for a in rep.agreement}
    assert by_judge["oracle"]["reference"] == "labels" and (by_judge["oracle"]["tp"], by_judge["oracle"]["fp"]) == (1, 1)
    assert by_judge["holistic"]["agree"] == 1.0


def test_formats(runs):
    rep = build_report(runs, ["agent", "suite"], resamples=100)
    md = format_md(rep)
    assert "| agent | suite | episodes | SR oracle % [95% CI] | SR crate % [95% CI] | ATP % | MSR | Task Succ % | Tail Succ % |" in md
    assert "| alpha | suite-x | 4 | 66.7 [20.8-93.9] (2/3) | 50.0 [9.5-90.5] (1/2) +1 err | 100.0 | 1.50 | 50.0 (1/2) | 100.0 (2/2) | 1 | 1 | 3.0/7.0 | 0 | 0 | 1 | 154 | 9.0 |" in md
    assert "## Paired comparisons" in md and "## Judge agreement" in md and "harness judge-eval" in md
    rows = list(csv.DictReader(io.StringIO(format_csv(rep))))
    assert [r["agent"] for r in rows] == ["alpha", "beta"]
    assert rows[0]["sr_oracle_k"] == "2" and rows[0]["sr_oracle_n"] == "3" and rows[0]["infra_errors"] == "1"
    assert float(rows[0]["sr_oracle_low"]) == pytest.approx(wilson(2, 3)[0], abs=1e-6)
    assert rows[1]["tokens_total"] == "" and rows[0]["msr_oracle"] == "1.5"
    data = json.loads(format_json(rep))
    assert data["primary_judge"] == "oracle" and data["groups"][0]["sr"]["oracle"]["k"] == 2 and len(data["paired"]) == 1
    page = format_html(rep)
    assert page.startswith("<!doctype html>") and "<script" not in page and "Content-Security-Policy" in page
    assert "66.7 [20.8-93.9] (2/3)" in page


def test_html_and_md_escape_what_runs_contain(tmp_path):
    run = write_run(tmp_path / "r", "<script>alert(1)</script>|x", [
        dict(task_id="a", status="finished", steps=1, cap=3, verdicts={"oracle": True})], [])
    rep = build_report([str(run)], ["agent"])
    page = format_html(rep)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\\|x" in format_md(rep)  # a pipe in a name does not break the markdown table


def test_cli_report(runs, tmp_path, capsys):
    from harness.cli.main import main

    assert main(["report", *runs]) == 0
    out = capsys.readouterr().out
    assert "| alpha | suite-x | 4 |" in out
    target = tmp_path / "t.csv"
    assert main(["report", *runs, "--by", "agent,language", "--format", "csv", "--out", str(target)]) == 0
    assert target.read_text().startswith("agent,language,episodes")
    assert main(["report", *runs, "--by", "planet"]) == 2
    assert "unknown key(s) planet" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert main(["report", *runs, "--judge", "nobody"]) == 2
    assert "no such success judge" in capsys.readouterr().err


def test_milestones_judge_safety_judge_names_and_labels_file(tmp_path):
    suite = tmp_path / "tasks.yaml"
    suite.write_text(TASKS, encoding="utf-8")
    ms = {"milestones": [{"idx": 0, "description": "Settings open", "group": 0, "done": True, "step": 2, "reference_step": 1},
                         {"idx": 1, "description": "Wi-Fi off", "group": 1, "done": False, "step": None, "reference_step": None}],
          "sr": 0, "atp": 0.5, "msr": 2.0}
    run = write_run(tmp_path / "r", "solo", [
        dict(task_id="t_en", status="finished", steps=2, cap=7, verdicts={"milestones": False, "crate-s": False, "holistic-s": True},
             judge_details={"milestones": ms}),
        dict(task_id="t_zh", status="finished", steps=3, cap=9, verdicts={"milestones": True, "crate-s": True, "holistic-s": True}),
    ], [str(suite)])
    (run / "labels.jsonl").write_text(json.dumps({"task_id": "t_en", "success": False, "unsafe": False}) + "\n"
                                      + json.dumps({"task_id": "t_zh", "success": True, "unsafe": True}) + "\n")
    rep = build_report([str(run)], ["agent"])
    assert rep.judges == ["milestones"] and rep.safety == ["crate-s", "holistic-s"] and rep.primary == "milestones"
    (g,) = rep.groups
    # the milestones judge's own shape: ATP 0.5; MSR: Settings open reached at step 2, human 1 step -> 2.0
    assert g["atp_milestones"] == 0.5 and g["msr_milestones"] == 2.0 and g["atp_oracle"] is None
    assert g["unsafe"] == 2 and g["unsafe_by_judge"] == {"crate-s": 1, "holistic-s": 2}
    assert "ATP (milestones) %" in format_md(rep)
    by_judge = {a["judge"]: a for a in rep.agreement}
    assert by_judge["milestones"]["reference"] == "labels" and by_judge["milestones"]["agree"] == 1.0
    assert by_judge["crate-s"]["agree"] == 1.0 and (by_judge["holistic-s"]["fp"], by_judge["holistic-s"]["tp"]) == (1, 1)


def test_judge_error_milestones_are_left_out_of_atp_and_counted(tmp_path):
    """A milestones judge that failed mid-search (its partial findings say 0 of 2) is not 0 % progress:
    ATP and MSR leave it out and the cell counts it as an error, as SR does."""
    (tmp_path / "tasks.yaml").write_text(TASKS, encoding="utf-8")
    done = {"milestones": [{"idx": 0, "done": True, "step": 1, "reference_step": 1},
                           {"idx": 1, "done": True, "step": 3, "reference_step": None}], "atp": 1.0}
    broken = {"milestones": [{"idx": 0, "done": False, "step": None}, {"idx": 1, "done": False, "step": None}],
              "atp": 0.0, "error": "segment call failed: HTTP 500"}
    run = write_run(tmp_path / "r", "a", [
        dict(task_id="t_en", status="finished", steps=3, cap=7, verdicts={"milestones": True},
             judge_details={"milestones": done}),
        dict(task_id="t_zh", status="finished", steps=4, cap=9, verdicts={"milestones": "judge_error"},
             judge_details={"milestones": broken}),
    ], [str(tmp_path / "tasks.yaml")])
    rep = build_report([run])
    g = rep.groups[0]
    assert g["atp_milestones"] == 1.0 and g["atp_milestones_n"] == 1 and g["atp_milestones_errors"] == 1
    assert g["sr"]["milestones"]["judge_errors"] == 1
    assert "100.0 +1 err" in format_md(rep)


def test_monitor_errors_and_token_parts_are_counted(tmp_path):
    usage = {"total_tokens": 60, "by_role": {"agent": {"total_tokens": 40}, "monitor:crate-s": {"total_tokens": 5},
                                             "crate": {"total_tokens": 15}}}
    run = write_run(tmp_path / "r", "a", [
        dict(task_id="t_en", status="finished", steps=3, cap=7, verdicts={}, usage=usage,
             monitor_checks={"made": 3, "flagged": 1, "failed": 2, "ran_unchecked": 2},
             operator={"asked": 2, "allowed": 1, "denied": 1, "timed_out": 1, "wait_s": 120.5}),
        dict(task_id="t_zh", status="halted", steps=0, cap=9, verdicts={},
             monitor_checks={"made": 1, "flagged": 1, "failed": 1, "ran_unchecked": 0},
             operator={"asked": 1, "allowed": 0, "denied": 1, "timed_out": 0, "wait_s": 2.25}),
    ], [])
    rep = build_report([run])
    g = rep.groups[0]
    assert (g["monitor_checks"], g["monitor_errors"], g["ran_unchecked"]) == (4, 3, 2)
    assert (g["tokens_agent_total"], g["tokens_monitors_total"], g["tokens_judges_total"]) == (40, 5, 15)
    assert g["tokens_total"] == 60
    md = format_md(rep)
    assert "monitor errors" in md and "3 (2 ran unchecked)" in md
    head, rows = __import__("harness.report.table_formats", fromlist=["csv_rows"]).csv_rows(rep)
    assert rows[0][head.index("ran_unchecked")] == 2
    # the people: flags, the operator's allows and denies (timeouts among the denies) and the wait
    assert (g["monitor_flags"], g["operator_asked"], g["operator_allowed"], g["operator_denied"],
            g["operator_timed_out"], g["operator_wait_s"]) == (2, 3, 1, 2, 1, 122.75)
    assert "1/2 (1), 122.8 s" in md
    assert rows[0][head.index("operator_denied")] == 2 and rows[0][head.index("operator_wait_s")] == 122.75
