"""Issue 37, finding 8: the live page showed ``crate-s "judge_error"`` without its reason, the judges'
step evidence as raw ``key=value`` dumps (``clues=["a","b"]; effect={"kind":...}``), and drew nothing
at all without JavaScript. Now a judge_error shows its judge's reason, a finding reads as fields
(``clues: a; b``), and a browser that runs no script gets the run's state as text, reloading itself."""

from __future__ import annotations

from pathlib import Path

from harness.live.records import EpisodeLive
from harness.live.server import LiveServer
from harness.records import EpisodeResult, RunWriter
from tests.judges.helpers import png
from tests.report.test_viewer import _Watch, browser  # noqa: F401  (fixture)

REASON = "qwen at http://127.0.0.1:8001/v1: failed after 5 attempt(s); last error: connection failed"
XSS = '<img src=x onerror="window.__pwned=1">'


def _ended_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    w = RunWriter(run, fsync=False)
    w.write_manifest({"agent": {"name": "x", "label": "x"}})
    ep = w.start_episode("t1")
    s0 = ep.write_screen(0, png(0))
    live = EpisodeLive(ep.path)
    live.started(task_id="t1", device="emu-1", cap=5, instruction="turn wifi off")
    live.step(1, "running", screen_before=s0, action={"type": "click", "x": 5, "y": 6}, action_text="click(x=5, y=6)")
    s1 = ep.write_screen(1, png(1))
    ep.append_step({"index": 1, "action": {"type": "click", "x": 5, "y": 6}, "executed": True, "screen_before": s0,
                    "screen_after": s1})
    live.evidence("crate", {"step": 1, "clues": ["Wi-Fi toggle visible", XSS], "effect": {"kind": "setting", "on": False}})
    result = EpisodeResult(task_id="t1", agent="x", status="finished", steps=1, cap=5, device="emu-1",
                           verdicts={"crate": True, "crate-s": "judge_error"},
                           judge_details={"crate-s": {"error": REASON}})
    ep.write_summary(result)
    w.append_result(result)
    w.close()
    return run


def test_judge_errors_say_why_and_findings_read_as_fields(browser, tmp_path):  # noqa: F811
    server = LiveServer(_ended_run(tmp_path)).start()
    try:
        page = browser.new_page()
        w = _Watch(page)
        page.goto(server.url)
        panel = page.locator('section.device[data-device="emu-1"]')
        panel.locator(".end").wait_for()
        end = panel.locator(".end").text_content()
        assert f"crate-s judge_error: {REASON}" in end, end
        finding = panel.locator("ul.evidence li").first.text_content()
        assert "clues Wi-Fi toggle visible; " + XSS in finding and "effect kind: setting, on: false" in finding, finding
        assert "=" not in finding.replace(XSS, "") and "[" not in finding, finding  # no key=value, no JSON
        assert page.evaluate("window.__pwned") is None and w.errors == []
        page.close()
    finally:
        server.stop()


def test_without_javascript_the_page_shows_the_run_as_text(browser, tmp_path):  # noqa: F811
    server = LiveServer(_ended_run(tmp_path)).start()
    try:
        context = browser.new_context(java_script_enabled=False)
        page = context.new_page()
        page.goto(server.url)
        text = page.locator("body").inner_text()
        assert "emu-1" in text and "t1" in text and "finished" in text and "1/5" in text, text
        assert "connecting" not in text  # the script says that, when there is one
        assert "click(x=5, y=6)" in text and f"crate-s: judge_error ({REASON})" in text, text
        assert page.locator('meta[http-equiv="refresh"]').count() == 1  # it follows the run by reloading
        context.close()
    finally:
        server.stop()
