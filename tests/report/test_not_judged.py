"""Issue 37, finding 4: safety numbers that hid missing verdicts. A ``crate-s`` judge_error never
appeared in ``harness report`` (md ``unsafe 0``, JSON ``unsafe_by_judge: {crate-s: 0}`` with no
error count, CSV ``judge_errors_crate`` only), and with ``--judge oracle`` on a phone every
``oracle_unsafe`` was an error while the run summary said ``unsafe episodes flagged: 0``. Now every
safety judge's error count stands beside its unsafe count in md, CSV, JSON and the run summary, and
a judge that judged nothing shows ``—`` (JSON null), never 0."""

from __future__ import annotations

import csv
import io
import json

from harness.cli.main import main
from harness.records import EpisodeResult, RunWriter
from harness.run.suite import SuiteReport

ERR = {"error": "qwen at http://127.0.0.1:8001/v1: failed after 5 attempt(s); last error: connection failed"}


def _run(path, verdicts: list[dict], details: dict | None = None):
    with RunWriter(path, fsync=False) as w:
        w.write_manifest({"kind": "test"})
        for i, v in enumerate(verdicts):
            w.start_episode(f"t{i}")
            w.append_result(EpisodeResult(task_id=f"t{i}", agent="a", status="finished", steps=1, cap=3, verdicts=v,
                                          judge_details={k: ERR for k, x in v.items() if x == "judge_error"} or None))
    return path


def _report(run, fmt, capsys):
    assert main(["report", str(run), "--format", fmt, "--resamples", "10"]) == 0
    return capsys.readouterr().out


def test_a_safety_judge_that_judged_nothing_shows_a_dash_and_its_errors(tmp_path, capsys):
    run = _run(tmp_path / "run", [{"crate": True, "crate-s": "judge_error"}] * 4)
    g = json.loads(_report(run, "json", capsys))["groups"][0]
    assert g["unsafe"] is None and g["unsafe_by_judge"] == {"crate-s": None}  # not 0: nothing was judged
    assert g["unsafe_errors_by_judge"] == {"crate-s": 4} and g["unsafe_judged_by_judge"] == {"crate-s": 0}
    md = _report(run, "md", capsys)
    head, row = [line for line in md.splitlines() if line.startswith("| ")][:2]
    cells = dict(zip([c.strip() for c in head.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["unsafe"] == "— (crate-s 4 err)", cells
    rows = list(csv.DictReader(io.StringIO(_report(run, "csv", capsys))))
    assert rows[0]["judge_errors_crate-s"] == "4" and rows[0]["unsafe_crate-s"] == "" and rows[0]["unsafe"] == ""
    assert "— (crate-s 4 err)" in _report(run, "html", capsys)


def test_each_safety_judge_gets_its_count_and_errors_beside_it(tmp_path, capsys):
    run = _run(tmp_path / "run", [{"crate": True, "crate-s": True, "oracle_unsafe": "judge_error"},
                                  {"crate": True, "crate-s": "judge_error", "oracle_unsafe": "judge_error"},
                                  {"crate": False, "crate-s": False, "oracle_unsafe": "judge_error"}])
    g = json.loads(_report(run, "json", capsys))["groups"][0]
    assert g["unsafe"] == 1 and g["unsafe_by_judge"] == {"crate-s": 1, "oracle_unsafe": None}
    assert g["unsafe_errors_by_judge"] == {"crate-s": 1, "oracle_unsafe": 3}
    md = _report(run, "md", capsys)
    head, row = [line for line in md.splitlines() if line.startswith("| ")][:2]
    cells = dict(zip([c.strip() for c in head.split("|")], [c.strip() for c in row.split("|")]))
    assert cells["unsafe"] == "1 (crate-s 1 err, oracle_unsafe 3 err)", cells
    assert cells["unsafe crate-s"] == "1 (+1 err)" and cells["unsafe oracle_unsafe"] == "— (3 err)", cells


def test_the_run_summary_never_says_unsafe_0_for_a_judge_that_judged_nothing(tmp_path):
    """--judge oracle on a phone (before the preflight refused it): every oracle_unsafe an error."""
    from harness.cli.run import print_summary

    run = _run(tmp_path / "run", [{"oracle": "judge_error", "oracle_unsafe": "judge_error"}] * 3)
    out = io.StringIO()
    print_summary(str(run), SuiteReport(), file=out)
    text = " ".join(out.getvalue().split())
    assert "unsafe episodes flagged: 0" not in text, text
    assert "unsafe episodes flagged: — (by any of oracle_unsafe); not judged (judge_error): oracle_unsafe: — (3 err)" \
        in text, text
