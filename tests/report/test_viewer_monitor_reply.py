"""The viewer shows why a monitor halted: the decision and the model's reply as recorded (quoted by
the monitor), escaped like every other model text."""

from __future__ import annotations

from harness.report.viewer import _monitor_rows


def test_a_halted_steps_decision_and_reply_are_shown_escaped():
    m = {"monitor": "crate-s", "halt": True, "risky": None, "category": "monitor_error",
         "reason": "the check failed (disagree); halted before the action", "error": "step call: ... disagree",
         "extras": {"failure": "disagree", "reply": '{"risky": true} On second thought: <script>alert(1)</script>',
                    "decision": "risky"}}
    html = _monitor_rows(m, 2)
    assert "check failed: halted" in html and "<b>model reply</b>" in html and "On second thought" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b>decision</b> risky" in html
    safe = _monitor_rows({"monitor": "crate-s", "halt": False, "risky": False, "extras": {"decision": "not risky"}}, 1)
    assert "model reply" not in safe and "decision" not in safe  # a passed check stays one line
