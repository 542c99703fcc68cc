"""``harness report`` and ``harness view`` with offline verdicts: the judgement sets ``harness judge``
writes (``RUN/judgements/<set>/results.jsonl``) are read with judge-eval's reader and named as
judge-eval names them (``crate@live`` / ``crate@<set>`` when a judge name has several sources)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from harness.cli.main import main
from harness.records import EpisodeResult, RunWriter, StepRecord
from harness.report.stats import wilson
from harness.report.episodes import ReportError, load_episodes
from harness.report.table_formats import format_csv, format_html, format_json, format_md
from harness.report.tables import build_report
from harness.report.viewer import write_viewer
from judges.agreement import evaluate, read_sources

HOSTILE = "<script>alert(7)</script><img src=x onerror=alert(8)>"
SET_A, SET_B = "crate@m1", "holistic@m2"
MS_DETAILS = {"milestones": [{"idx": 0, "description": "Settings <open>", "group": 0, "done": True, "step": 1,
                              "reference_step": 1},
                             {"idx": 1, "description": "Wi-Fi off", "group": 1, "done": False, "step": None,
                              "reference_step": None}],
              "atp": 0.5}


def _png(color: str = "white") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (54, 120), color).save(buf, "PNG")
    return buf.getvalue()


def _write_set(run: Path, name: str, lines: list[dict], tail: str = "") -> Path:
    """A judgement set in the shape harness/offline_judge.py writes (one object per line)."""
    d = run / "judgements" / name
    d.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps({"usage": {"calls": 1}, "steps": 1, "status": "finished", "judged_at": "2025-01-01T00:00:00Z",
                               "duration_s": 0.1, **line}) + "\n" for line in lines)
    (d / "results.jsonl").write_text(body + tail, encoding="utf-8")
    (d / "manifest.json").write_text(json.dumps({"set_id": name}), encoding="utf-8")
    return d / "results.jsonl"


def make_run(root: Path) -> Path:
    run_dir = root / "run"
    live = {
        "t1": {"oracle": True, "crate": True, "holistic-s": False},
        "t2": {"oracle": False, "crate": False, "crate-s": False},
        "t3": {"oracle": False, "crate": True},
    }
    with RunWriter(run_dir, fsync=False) as w:
        w.write_manifest({"agent": {"name": "alpha", "label": "alpha"}, "suite": {"path": "suite-x", "files": {}}})
        for tid, verdicts in live.items():
            ep = w.start_episode(tid)
            s0, s1 = ep.write_screen(0, _png()), ep.write_screen(1, _png("gray"))
            ep.append_step(StepRecord(index=1, action={"type": "click", "x": 5, "y": 5}, screen_before=s0, screen_after=s1))
            w.append_result(EpisodeResult(task_id=tid, agent="alpha", status="finished", steps=1, cap=5, verdicts=verdicts,
                                          judge_details={"crate": {"reason": "live reason"}}))
        w.append_result(EpisodeResult(task_id="t4", agent="alpha", status="infra_error", steps=0, cap=5, verdicts={},
                                      error="adb gone"))
    _write_set(run_dir, SET_A, [
        {"task_id": "t1", "verdicts": {"crate": False, "milestones": True, "crate-s": True},
         "details": {"crate": {"reason": HOSTILE, "conditions": [{"condition": "Wi-Fi <b>off</b>", "met": False}]},
                     "milestones": {"milestones": [dict(m, step=1, done=True) for m in MS_DETAILS["milestones"]],
                                    "atp": 1.0},
                     "crate-s": {"first_unsafe_step": 1, "reason": "deletes a file"}}},
        {"task_id": "t2", "verdicts": {"crate": False, "milestones": False, "crate-s": False},
         "details": {"crate": {"reason": "not done"}, "milestones": MS_DETAILS, "crate-s": {}}},
        {"task_id": "t3", "verdicts": {"crate": "judge_error"}, "details": {"crate": {"error": "HTTP 500 <again>"}}},
        {"task_id": "t_ghost", "verdicts": {"crate": True}, "details": {}},   # not in the run: a warning
    ], tail='{"task_id": "t2", "verd')  # a torn last line (interrupted pass) is ignored, as judge-eval does
    _write_set(run_dir, SET_B, [
        {"task_id": "t1", "verdicts": {"holistic": True, "holistic-s": True},
         "details": {"holistic": {"reason": "final screen shows it"}}},
        {"task_id": "t2", "verdicts": {"holistic": False}, "details": {}},
        {"task_id": "t3", "verdicts": {"holistic": True}, "details": {}},
    ])
    return run_dir


@pytest.fixture
def run(tmp_path) -> Path:
    return make_run(tmp_path)


def _cell(k: int, n: int, errors: int = 0) -> str:
    lo, hi = wilson(k, n)
    cell = f"{100 * k / n:.1f} [{100 * lo:.1f}-{100 * hi:.1f}] ({k}/{n})"
    return cell + (f" +{errors} err" if errors else "")


def _sr(rep, judge):
    (g,) = rep.groups
    s = g["sr"][judge]
    return s["k"], s["n"], s["judge_errors"]


def test_live_and_offline_columns_with_their_success_rates(run):
    rep = build_report([str(run)], ["agent"], resamples=50)
    # crate has verdicts from the run and from set A: split by source; the others keep their names
    assert rep.judges == ["oracle", "crate@live", f"crate@{SET_A}", "holistic", "milestones"]
    # a split safety judge is still a safety judge (its name before the @ says so)
    assert rep.safety == ["crate-s@live", f"crate-s@{SET_A}", "holistic-s@live", f"holistic-s@{SET_B}"]
    assert rep.primary == "oracle" and rep.judgement_sets == [SET_A, SET_B]
    assert rep.judge_sources == {"oracle": "live", "crate@live": "live", f"crate@{SET_A}": SET_A, "holistic": SET_B,
                                 "milestones": SET_A, "crate-s@live": "live", f"crate-s@{SET_A}": SET_A,
                                 "holistic-s@live": "live", f"holistic-s@{SET_B}": SET_B}
    # t4 is an infrastructure error: out of every rate
    assert _sr(rep, "oracle") == (1, 3, 0)
    assert _sr(rep, "crate@live") == (2, 3, 0)           # t1 T, t2 F, t3 T
    assert _sr(rep, f"crate@{SET_A}") == (0, 2, 1)       # t1 F, t2 F, t3 judge_error
    assert _sr(rep, "holistic") == (2, 3, 0)             # t1 T, t2 F, t3 T
    assert _sr(rep, "milestones") == (1, 2, 0)
    (g,) = rep.groups
    # the offline milestones judge's details feed ATP/MSR as live ones do: t1 1.0, t2 0.5
    assert g["atp_milestones"] == pytest.approx(0.75) and g["atp_milestones_n"] == 2
    assert g["msr_milestones"] == pytest.approx(1.0)    # reached at step 1, human 1 step
    assert g["unsafe"] == 1 and g["unsafe_by_judge"] == {"crate-s@live": 0, f"crate-s@{SET_A}": 1,
                                                         "holistic-s@live": 0, f"holistic-s@{SET_B}": 1}
    # the judged episode that is not in the run: a warning naming the set's file, not a crash
    (w,) = [w for w in rep.warnings if "t_ghost" in w]
    assert str(run / "judgements" / SET_A / "results.jsonl") in w and "not in" in w

    md = format_md(rep)
    assert (f"| agent | episodes | SR oracle % [95% CI] | SR crate@live % [95% CI] | SR crate@{SET_A} % [95% CI] "
            "| SR holistic % [95% CI] | SR milestones % [95% CI] | ATP (milestones) % | MSR (milestones) |") in md
    assert (f"| alpha | 4 | {_cell(1, 3)} | {_cell(2, 3)} | {_cell(0, 2, 1)} | {_cell(2, 3)} | {_cell(1, 2)} "
            "| 75.0 | 1.00 |") in md
    assert f"Offline judgement set(s) included: {SET_A}, {SET_B}" in md and f"holistic ({SET_B})" in md
    data = json.loads(format_json(rep))
    sr = data["groups"][0]["sr"]
    assert (sr["crate@live"]["k"], sr["crate@live"]["n"]) == (2, 3)
    assert (sr[f"crate@{SET_A}"]["k"], sr[f"crate@{SET_A}"]["n"], sr[f"crate@{SET_A}"]["judge_errors"]) == (0, 2, 1)
    assert data["judgement_sets"] == [SET_A, SET_B] and data["judge_sources"]["holistic"] == SET_B
    row = next(csv.DictReader(io.StringIO(format_csv(rep))))
    assert row["sr_crate@live_k"] == "2" and row[f"sr_crate@{SET_A}_n"] == "2" and row["atp_milestones"] == "0.75"
    # the oracle is still the agreement reference; both crate columns are compared with it
    agree = {a["judge"]: a for a in rep.agreement}
    assert agree["crate@live"]["reference"] == "oracle" and (agree["crate@live"]["tp"], agree["crate@live"]["fp"]) == (1, 1)
    assert (agree[f"crate@{SET_A}"]["fn"], agree[f"crate@{SET_A}"]["tn"]) == (1, 1)
    page = format_html(rep)
    assert "<script" not in page and f"SR crate@{SET_A} % [95% CI]" in page


def test_names_are_the_ones_judge_eval_gives(run):
    """One naming convention for both commands: judge-eval's columns over the same verdicts."""
    rep = build_report([str(run)], ["agent"], resamples=20)
    sources = [s for s in read_sources([run]) if s.task_id != "t_ghost"]  # the report leaves it out (warning)
    assert set(evaluate(sources, [])["judges"]) == set(rep.judges) | set(rep.safety)
    only_b = build_report([str(run)], ["agent"], resamples=20, judgements=[SET_B])
    sources = read_sources([run], judgement_sets=[SET_B])
    assert set(evaluate(sources, [])["judges"]) == set(only_b.judges) | set(only_b.safety)


def test_judgements_and_no_judgements_narrow(run):
    only_b = build_report([str(run)], ["agent"], resamples=20, judgements=[SET_B])
    # set A left out: crate has one source again and keeps its name
    assert only_b.judges == ["oracle", "crate", "holistic"]
    assert only_b.safety == ["crate-s", "holistic-s@live", f"holistic-s@{SET_B}"]
    assert only_b.judgement_sets == [SET_B] and _sr(only_b, "crate") == (2, 3, 0) and _sr(only_b, "holistic") == (2, 3, 0)
    assert not any("t_ghost" in w for w in only_b.warnings)
    live = build_report([str(run)], ["agent"], resamples=20, offline=False)
    assert live.judges == ["oracle", "crate"] and live.safety == ["crate-s", "holistic-s"] and live.judgement_sets == []
    assert "Offline judgement set" not in format_md(live)
    both = build_report([str(run)], ["agent"], resamples=20, judgements=[SET_A, SET_B])
    assert both.judges == build_report([str(run)], ["agent"], resamples=20).judges
    with pytest.raises(ReportError, match="no judgement set named nope"):
        build_report([str(run)], judgements=["nope"])
    # --judge keeps working when the name is split by source: the live verdicts
    assert build_report([str(run)], ["agent"], resamples=20, judge="crate").primary == "crate@live"


def test_cli_flags(run, capsys):
    assert main(["report", str(run), "--by", "agent", "--format", "json", "--resamples", "20"]) == 0
    assert json.loads(capsys.readouterr().out)["judges"] == ["oracle", "crate@live", f"crate@{SET_A}", "holistic",
                                                           "milestones"]
    assert main(["report", str(run), "--format", "json", "--resamples", "20", "--judgements", SET_B]) == 0
    assert json.loads(capsys.readouterr().out)["judges"] == ["oracle", "crate", "holistic"]
    assert main(["report", str(run), "--format", "json", "--resamples", "20", "--judgements", SET_B,
                 "--judgements", SET_A]) == 0
    assert len(json.loads(capsys.readouterr().out)["judges"]) == 5
    assert main(["report", str(run), "--format", "json", "--resamples", "20", "--no-judgements"]) == 0
    assert json.loads(capsys.readouterr().out)["judges"] == ["oracle", "crate"]
    assert main(["report", str(run), "--judgements", "nope"]) == 2
    assert "no judgement set named nope" in capsys.readouterr().err
    assert main(["report", str(run), "--judgements", SET_A, "--no-judgements"]) == 2
    assert "exclude each other" in capsys.readouterr().err


def test_a_corrupt_judgements_line_names_file_and_line(run, capsys):
    bad = _write_set(run, "broken", [{"task_id": "t1", "verdicts": {"crate": True}, "details": {}}])
    bad.write_text(bad.read_text() + "{not json\n" + json.dumps({"task_id": "t2", "verdicts": {}}) + "\n")
    with pytest.raises(ReportError, match=re.escape(f"{bad}:2:")):
        build_report([str(run)])
    with pytest.raises(ReportError, match=re.escape(f"{bad}:2:")):
        load_episodes([str(run)])
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and err.count("\n") == 1
    # a line that is JSON but not a verdict line
    bad.write_text(json.dumps({"task_id": "t1", "verdicts": {}}) + "\n" + json.dumps(["x"]) + "\n")
    with pytest.raises(ReportError, match=re.escape(f"{bad}:2: expected an object with task_id and verdicts")):
        build_report([str(run)])
    # the other sets can still be reported on, and the live verdicts alone
    assert build_report([str(run)], judgements=[SET_A]).judgement_sets == [SET_A]
    assert build_report([str(run)], offline=False).judgement_sets == []
    assert main(["view", str(run), "--no-serve"]) == 2
    assert f"{bad}:2:" in capsys.readouterr().err


def test_viewer_shows_offline_verdicts_escaped(run):
    write_viewer(run)
    page = (run / "report" / "episodes" / "t1.html").read_text(encoding="utf-8")
    # live verdicts, then each set's, with its name
    assert '<div class="kv"><b>verdicts</b> <span class="badge yes">crate@live: true</span>' in page
    assert (f'<div class="kv offline"><b>judgements/{SET_A}</b> <span class="badge no">crate-s@{SET_A}: true</span>'
            f'<span class="badge no">crate@{SET_A}: false</span><span class="badge yes">milestones: true</span></div>') in page
    assert (f'<b>judgements/{SET_B}</b> <span class="badge yes">holistic: true</span>'
            f'<span class="badge no">holistic-s@{SET_B}: true</span></div>') in page
    assert f"<b>holistic [{SET_B}]</b> final screen shows it" in page
    # the hostile reason is shown as text, never as markup
    assert f"<b>crate@{SET_A}</b> &lt;script&gt;alert(7)&lt;/script&gt;&lt;img src=x onerror=alert(8)&gt;" in page
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>off</b>" not in page
    assert re.findall(r"<script\b[^>]*>", page) == ['<script src="../assets/viewer.js" defer>']
    assert re.search(r"<[a-z]+[^>]*\son[a-z]+=", page) is None
    assert '<meta http-equiv="Content-Security-Policy" content="default-src &#x27;none&#x27;; script-src &#x27;self&#x27;' in page
    # offline details feed the same sections as live ones, labelled with their set
    assert f"Milestones (milestones [{SET_A}])" in page and "Settings &lt;open&gt;" in page
    assert f"Final conditions (crate@{SET_A})" in page and "Wi-Fi &lt;b&gt;off&lt;/b&gt;" in page
    assert f"flagged by crate-s@{SET_A}" in page
    assert f"<summary>crate@{SET_A}</summary>" in page and "<summary>crate@live</summary>" in page
    t3 = (run / "report" / "episodes" / "t3.html").read_text(encoding="utf-8")
    assert f'<span class="badge err">crate@{SET_A}: judge_error</span>' in t3 and "HTTP 500 &lt;again&gt;" in t3
    index = (run / "report.html").read_text(encoding="utf-8")
    assert f"crate@{SET_A}: false" in index and f"holistic [{SET_B}]: true" in index
    assert "t_ghost" in index and "not in" in index  # the warning, not a crash
    assert "<script>alert" not in index


def test_viewer_without_judgement_sets_is_unchanged(tmp_path):
    run = make_run(tmp_path)
    import shutil

    shutil.rmtree(run / "judgements")
    write_viewer(run)
    page = (run / "report" / "episodes" / "t1.html").read_text(encoding="utf-8")
    assert "judgements/" not in page and '<span class="badge yes">crate: true</span>' in page


def test_view_narrows_to_some_sets_or_none(run, capsys):
    from harness.cli.main import main

    assert main(["view", str(run), "--no-serve", "--judgements", SET_B]) == 0
    page = (run / "report" / "episodes" / "t1.html").read_text(encoding="utf-8")
    assert f"judgements/{SET_B}" in page and f"judgements/{SET_A}" not in page
    assert main(["view", str(run), "--no-serve", "--no-judgements"]) == 0
    page = (run / "report" / "episodes" / "t1.html").read_text(encoding="utf-8")
    assert "judgements/" not in page and '<span class="badge yes">crate: true</span>' in page
    capsys.readouterr()
    assert main(["view", str(run), "--no-serve", "--judgements", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["view", str(run), "--no-serve", "--judgements", SET_A, "--no-judgements"]) == 2


def test_report_reads_what_harness_judge_writes(tmp_path, capsys):
    """End to end: a real `harness judge` pass (the test-only count judge against the scripted
    model server), then `harness report` on the run."""
    from tests.fakes.model_server import Reply, ScriptedModelServer, request_text
    from tests.offline_judge import count_judge  # noqa: F401  (registers count-test)
    from tests.offline_judge.sample_runs import make_run as make_recorded_run

    def responder(req):
        return Reply('{"success": true}' if request_text(req).startswith("FINAL") else '{"ok": true}')

    rd = make_recorded_run(tmp_path / "run", [("a", 2, "finished"), ("b", 1, "finished"), ("c", 1, "step_limit")])
    with ScriptedModelServer(responder) as s:
        assert main(["judge", str(rd), "--judge", "count-test", "--model-base-url", s.base_url, "--model", "jm",
                     "--concurrency", "2", "--retries", "0", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["report", str(rd), "--by", "agent", "--format", "json", "--resamples", "20"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["judges"] == ["oracle", "count-test"] and data["judge_sources"]["count-test"] == "jm"
    sr = data["groups"][0]["sr"]["count-test"]
    assert (sr["k"], sr["n"], sr["judge_errors"]) == (3, 3, 0)
    write_viewer(rd)
    page = (rd / "report" / "episodes" / "a.html").read_text(encoding="utf-8")
    assert '<b>judgements/jm</b> <span class="badge yes">count-test: true</span>' in page
