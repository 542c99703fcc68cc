"""``harness judge-eval`` against metrics computed by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.records import EpisodeResult, RunWriter
from judges.agreement import (AgreementError, Confusion, binary_metrics, evaluate, load_labels, localisation_score,
                              predicted_step, read_sources)

T, F, E = True, False, "judge_error"
SUCCESS = [T, T, T, T, F, F, F, F, T, F]           # labels of t1..t10
CRATE = [T, T, T, F, T, F, F, E, T, F]             # the crate judge's verdicts
UNSAFE = [F, F, T, T, F, T, F, F, T, F]            # safety labels
T_STAR = {3: 2, 4: 5, 6: 1, 9: 3}                  # first unsafe steps (1-based)
CRATE_S = [F, T, T, F, F, T, F, T, T, E]           # crate-s: True = unsafe
T_HAT = {2: 4, 3: 2, 6: 4}                         # steps crate-s names (t9 is flagged without a step)
LANG = ["en"] * 5 + ["zh"] * 5


def write_run(path: Path, verdicts: dict[int, dict], details: dict[int, dict] | None = None) -> Path:
    with RunWriter(path, fsync=False) as w:
        w.write_manifest({"kind": "test"})
        for i, v in verdicts.items():
            w.append_result(EpisodeResult(task_id=f"t{i}", agent="a", status="finished", steps=3, cap=7, verdicts=v,
                                          judge_details=(details or {}).get(i)))
    return path


def write_labels(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def run_and_labels(tmp_path):
    verdicts = {i: {"crate": CRATE[i - 1], "crate-s": CRATE_S[i - 1]} for i in range(1, 11)}
    details = {i: {"crate-s": {"first_unsafe_step": T_HAT.get(i)}} for i in range(1, 11)}
    details[10] = {"crate-s": {"error": "step call failed: HTTP 500"}}
    run = write_run(tmp_path / "run", verdicts, details)
    rows = []
    for i in range(1, 11):
        row = {"task_id": f"t{i}", "success": SUCCESS[i - 1], "unsafe": UNSAFE[i - 1], "language": LANG[i - 1],
               "app": "Wallet" if i % 2 else "Notes"}
        if i in T_STAR:
            row["first_unsafe_step"] = T_STAR[i]
        rows.append(row)
    rows.append({"task_id": "t11", "success": True})  # labelled, never judged
    return run, write_labels(tmp_path / "labels.jsonl", rows)


def test_success_judge_metrics_by_hand(run_and_labels, capsys):
    run, labels = run_and_labels
    assert main(["judge-eval", "--labels", str(labels), str(run), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    c = report["judges"]["crate"]
    # t1,t2,t3,t9 TP; t4 FN (said fail, was success); t5 FP; t6,t7,t10 TN; t8 judge_error (left out)
    assert c["confusion"] == {"tp": 4, "fp": 1, "fn": 1, "tn": 3} and c["n"] == 9
    assert c["judge_errors"] == 1 and c["no_verdict"] == 1  # t11 has a label but no verdict
    assert c["precision"] == pytest.approx(4 / 5) and c["recall"] == pytest.approx(4 / 5)
    assert c["f1"] == pytest.approx(2 * 4 / (2 * 4 + 1 + 1))      # 0.8
    assert c["accuracy"] == pytest.approx(7 / 9)
    # kappa: p_o = 7/9; p_e = ((4+1)(4+1) + (1+3)(1+3)) / 81 = 41/81; (63-41)/(81-41) = 22/40
    assert c["kappa"] == pytest.approx(0.55)
    en, zh = c["by_language"]["en"], c["by_language"]["zh"]
    # en (t1-t5): TP 3 (t1-t3), FN 1 (t4), FP 1 (t5), TN 0
    assert en["confusion"] == {"tp": 3, "fp": 1, "fn": 1, "tn": 0}
    assert en["precision"] == pytest.approx(0.75) and en["f1"] == pytest.approx(0.75) and en["accuracy"] == pytest.approx(0.6)
    # p_o = 3/5; p_e = (4*4 + 1*1)/25 = 17/25; (15/25 - 17/25) / (8/25) = -2/8
    assert en["kappa"] == pytest.approx(-0.25)
    # zh (t6-t10): TN t6,t7,t10; TP t9; t8 judge_error; p_e = (1*1 + 3*3)/16, kappa (1 - 10/16)/(6/16) = 1
    assert zh["confusion"] == {"tp": 1, "fp": 0, "fn": 0, "tn": 3} and zh["judge_errors"] == 1
    assert zh["kappa"] == pytest.approx(1.0) and zh["f1"] == pytest.approx(1.0)
    # per app: odd ids are Wallet (t1,t3,t5,t7,t9): TP t1,t3,t9; FP t5; TN t7
    assert c["by_app"]["Wallet"]["confusion"] == {"tp": 3, "fp": 1, "fn": 0, "tn": 1}
    # even ids are Notes (t2,t4,t6,t8,t10): TP t2; FN t4; TN t6,t10; t8 error
    assert c["by_app"]["Notes"]["confusion"] == {"tp": 1, "fp": 0, "fn": 1, "tn": 2}
    assert "localisation" not in c


def test_safety_judge_metrics_and_localisation_by_hand(run_and_labels, capsys):
    run, labels = run_and_labels
    assert main(["judge-eval", "--labels", str(labels), str(run), "--format", "json"]) == 0
    s = json.loads(capsys.readouterr().out)["judges"]["crate-s"]
    assert s["kind"] == "safety" and s["positive"] == "unsafe"
    # positive = unsafe. TP t3,t6,t9; FP t2,t8; FN t4; TN t1,t5,t7; t10 judge_error
    assert s["confusion"] == {"tp": 3, "fp": 2, "fn": 1, "tn": 3}
    assert s["precision"] == pytest.approx(3 / 5) and s["recall"] == pytest.approx(3 / 4)
    assert s["f1"] == pytest.approx(6 / 9) and s["accuracy"] == pytest.approx(6 / 9)
    # p_o = 6/9 = 54/81; p_e = ((3+2)(3+1) + (1+3)(2+3))/81 = 40/81; kappa = (54-40)/(81-40) = 14/41
    assert s["kappa"] == pytest.approx(14 / 41)
    assert s["judge_errors"] == 1 and s["judge_error_reasons"] == {"step call failed: HTTP 500": 1}
    # localisation over unsafe episodes with t*: t3 t_hat 2 vs 2 -> 1; t4 judged safe -> 0;
    # t6 t_hat 4 vs 1 -> 1 - 3/5 = 0.4; t9 flagged without a step -> 0. Mean 1.4/4 = 0.35
    assert s["localisation"] == {"n": 4, "located": 2, "mean": pytest.approx(0.35)}


def test_table_output(run_and_labels, capsys):
    run, labels = run_and_labels
    assert main(["judge-eval", "--labels", str(labels), str(run)]) == 0
    out = capsys.readouterr().out
    assert "crate-s" in out and "0.550" in out and "0.350" in out and "per language" in out and "per app" in out
    assert "judge_error verdict(s) left out" in out


def test_metric_edge_cases():
    # nothing predicted positive: precision undefined, never 0 or 1
    m = binary_metrics(Confusion(tp=0, fp=0, fn=2, tn=3))
    assert m["precision"] is None and m["recall"] == 0 and m["f1"] == 0 and m["accuracy"] == pytest.approx(0.6)
    # both sides constant and equal: p_e = 1, kappa undefined
    assert binary_metrics(Confusion(tn=4))["kappa"] is None
    assert binary_metrics(Confusion())["accuracy"] is None
    assert localisation_score(7, 2) == 0.0 and localisation_score(3, 2) == pytest.approx(0.8)
    assert localisation_score(None, 2) == 0.0
    assert predicted_step({"unsafe_steps": [{"step": 5}, {"step": 3}]}) == 3
    assert predicted_step({"safety": {"first_unsafe_step": 2}}) == 2
    assert predicted_step({"first_unsafe_step": True}) is None


def test_offline_sets_and_live_verdicts_are_told_apart(tmp_path, capsys):
    run = write_run(tmp_path / "run", {1: {"crate": True}, 2: {"crate": False}})
    jset = run / "judgements" / "crate@big"
    jset.mkdir(parents=True)
    (jset / "results.jsonl").write_text(
        json.dumps({"task_id": "t1", "verdicts": {"crate": True, "holistic": False}, "details": {}}) + "\n" +
        json.dumps({"task_id": "t2", "verdicts": {"crate": True, "holistic": True}, "details": {}}) + "\n" +
        '{"task_id": "t3", "verd')  # a torn last line from an interrupted pass is ignored
    labels = write_labels(tmp_path / "l.jsonl", [{"task_id": "t1", "success": True}, {"task_id": "t2", "success": False}])
    assert main(["judge-eval", "--labels", str(labels), str(run), "--format", "json"]) == 0
    j = json.loads(capsys.readouterr().out)["judges"]
    assert set(j) == {"crate@live", "crate@crate@big", "holistic"}
    assert j["crate@live"]["accuracy"] == 1.0 and j["crate@crate@big"]["accuracy"] == 0.5
    assert j["holistic"]["confusion"] == {"tp": 0, "fp": 1, "fn": 1, "tn": 0}
    assert main(["judge-eval", "--labels", str(labels), str(run), "--format", "json", "--offline-only",
                 "--judgements", "crate@big"]) == 0
    assert set(json.loads(capsys.readouterr().out)["judges"]) == {"crate", "holistic"}


def test_labels_from_oracle(tmp_path, capsys):
    run = write_run(tmp_path / "run", {
        1: {"oracle": True, "oracle_unsafe": False, "crate": True, "crate-s": False},
        2: {"oracle": False, "oracle_unsafe": True, "crate": True, "crate-s": True},
        3: {"oracle": "judge_error", "oracle_unsafe": False, "crate": False, "crate-s": False},
    }, details={2: {"oracle_unsafe": {"first_unsafe_step": 2}, "crate-s": {"first_unsafe_step": 3}}})
    assert main(["judge-eval", "--labels-from", "oracle", str(run), "--format", "json"]) == 0
    j = json.loads(capsys.readouterr().out)["judges"]
    assert set(j) == {"crate", "crate-s"}  # the oracle is the label, not a judge here
    # success labels t1 True, t2 False (t3 has none): crate TP t1, FP t2; t3 unlabelled
    assert j["crate"]["confusion"] == {"tp": 1, "fp": 1, "fn": 0, "tn": 0} and j["crate"]["unlabelled"] == 1
    # unsafe labels t1 F, t2 T (t*=2), t3 F: crate-s TN, TP (t_hat 3: 1 - 1/5), TN
    assert j["crate-s"]["confusion"] == {"tp": 1, "fp": 0, "fn": 0, "tn": 2}
    assert j["crate-s"]["localisation"]["mean"] == pytest.approx(0.8)


def test_bad_labels_are_one_line_errors(tmp_path, capsys):
    run = write_run(tmp_path / "run", {1: {"crate": True}})
    bad = tmp_path / "bad.jsonl"
    for body, msg in [('{"task_id": "t1", "success": "yes"}\n', "success: must be true, false or null"),
                      ('{"success": true}\n', "task_id: required"),
                      ('{"task_id": "t1"}\n{"task_id": "t1"}\n', "duplicate label"),
                      ('{"task_id": "t1", "unsafe": false, "first_unsafe_step": 2}\n', "unsafe is false"),
                      ("not json\n", "invalid JSON")]:
        bad.write_text(body)
        assert main(["judge-eval", "--labels", str(bad), str(run)]) == 2
        err = capsys.readouterr().err
        assert msg in err and f"{bad}:" in err and err.count("\n") == 1
    assert main(["judge-eval", str(run)]) == 2
    assert "--labels" in capsys.readouterr().err
    with pytest.raises(AgreementError, match="not a run folder"):
        read_sources([tmp_path])
    labels = load_labels(write_labels(tmp_path / "ok.jsonl", [{"task_id": "t1", "first_unsafe_step": 2}]))
    assert labels[0].unsafe is True  # a first unsafe step implies unsafe
    assert evaluate([], labels)["judges"] == {}
