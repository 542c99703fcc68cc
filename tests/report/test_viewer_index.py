"""Issue 37, finding 8 and "What to build" 6: the viewer's index gave a halt's category but not its
reason, showed an episode a gate blocked before its risky action ran with a green ``crate-s: false``
badge, and had no summary of the run. Now the index opens with a summary (statuses, success, what
the safety judges found and could not judge, halts and blocks, model errors), a halted row says its
reason, and a blocked episode's safety badge says ``blocked``."""

from __future__ import annotations

import re
from pathlib import Path

from harness.records import EpisodeResult, Halt, RunWriter
from harness.report.viewer import write_viewer

REASON = "sends the whole balance to an unknown account"


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    with RunWriter(run, fsync=False) as w:
        w.write_manifest({"agent": {"name": "uitars", "label": "uitars"}, "judges": [{"name": "oracle"}],
                          "monitors": [{"name": "crate-s"}]})
        rows = [
            EpisodeResult(task_id="pay", agent="uitars", status="halted", steps=2, cap=7,
                          verdicts={"oracle": False, "crate-s": False},
                          halt=Halt(step=3, category="Financial Loss", reason=REASON, monitor="crate-s", executed=False)),
            EpisodeResult(task_id="wifi", agent="uitars", status="finished", steps=3, cap=7,
                          verdicts={"oracle": True, "crate-s": False}),
            EpisodeResult(task_id="clock", agent="uitars", status="finished", steps=3, cap=7,
                          verdicts={"oracle": True, "crate-s": "judge_error"}, judge_details={"crate-s": {"error": "down"}}),
            EpisodeResult(task_id="notes", agent="uitars", status="model_error", steps=0, cap=5,
                          verdicts={"oracle": False, "crate-s": False},
                          error="step 1: ModelError: m at http://x/v1: failed after 5 attempt(s)"),
        ]
        for r in rows:
            w.start_episode(r.task_id)
            w.append_result(r)
    return run


def _row(index: str, task: str) -> str:
    return re.search(rf'<tr class="ep"[^>]*>(?:(?!</tr>).)*>{task}</a>.*?</tr>', index, re.S).group(0)


def test_the_index_summarises_the_run_and_says_blocked_and_why(tmp_path):
    index = write_viewer(_run(tmp_path)).read_text(encoding="utf-8")
    summary = re.search(r'<section class="summary">.*?</section>', index, re.S).group(0)
    assert "4 episode(s): 2 finished, 1 halted, 1 model_error" in summary, summary
    assert "success by oracle: 2/3 of the scored episodes" in summary, summary  # the model_error left out
    assert "unsafe (by any of crate-s): 0; crate-s: 0 (+1 err)" in summary, summary
    assert "halted by a monitor: 1 (1 blocked before the risky action ran" in summary, summary
    assert "the agent&#x27;s model failed: 1 episode(s) ended model_error" in summary, summary
    pay = _row(index, "pay")
    assert f"halted at step 3 (blocked before it ran) by crate-s: Financial Loss: {REASON}" in pay, pay
    assert '<span class="badge blk">crate-s: blocked</span>' in pay and "crate-s: false" not in pay, pay
    wifi = _row(index, "wifi")
    assert '<span class="badge yes">crate-s: false</span>' in wifi, wifi  # judged and safe: green, as before
    assert "ModelError: m at http://x/v1" in _row(index, "notes")


def test_a_run_whose_safety_judge_judged_nothing_shows_a_dash(tmp_path):
    run = tmp_path / "run"
    with RunWriter(run, fsync=False) as w:
        w.write_manifest({"agent": {"name": "random"}})
        for tid in ("a", "b"):
            w.start_episode(tid)
            w.append_result(EpisodeResult(task_id=tid, agent="random", status="finished", steps=1, cap=3,
                                          verdicts={"oracle": "judge_error", "oracle_unsafe": "judge_error"}))
    index = write_viewer(run).read_text(encoding="utf-8")
    summary = re.search(r'<section class="summary">.*?</section>', index, re.S).group(0)
    assert "unsafe (by any of oracle_unsafe): —; oracle_unsafe: — (2 err)" in summary, summary
    assert "success by oracle: — (+2 judge_error)" in summary, summary
