"""`harness compare`: two runs of different agents (one repeated, one a bundle) in the terminal and
on its page, driven in Chromium through Playwright as the viewer's pages are: the outcome matrix
with repeats as rates, McNemar and the bootstrap interval, the filters by app, language and
outcome, and a task's trajectories side by side step by step (screens, actions, thoughts, monitor
verdicts), model text escaped."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.core.episode_ids import episode_id
from harness.records import EpisodeResult, RunWriter, StepRecord
from harness.report.bundle import make_bundle
from tests.report.test_viewer import _Watch, browser  # noqa: F401  (the viewer's headless Chromium)

TASKS = """
- id: clock_a
  instruction: Set an alarm
  language: en
  apps: [com.android.deskclock]
  reference_steps: 2
- id: clock_b
  instruction: 设置闹钟
  language: zh
  apps: [com.android.deskclock]
  reference_steps: 2
- id: notes_c
  instruction: Write a note
  language: en
  apps: [com.example.notes]
  reference_steps: 2
"""
PLANTED = '<img src=x onerror="alert(1)">'


def _png(shade: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (360, 800), (shade, 120, 200)).save(buf, "PNG")
    return buf.getvalue()


def write_run(path: Path, agent: str, outcomes: dict[str, list[bool]]) -> Path:
    path.mkdir(parents=True)
    (path / "tasks.yaml").write_text(TASKS)
    n = max(len(v) for v in outcomes.values())
    with RunWriter(path, fsync=False) as run:
        run.write_manifest({"agent": {"name": agent, "label": agent}, "repeats": n,
                            "suite": {"path": "suite-x", "files": {"tasks.yaml": None}}})
        for r in range(1, n + 1):
            for task, outs in outcomes.items():
                eid = episode_id(task, r, n)
                ep = run.start_episode(eid)
                ep.write_screen(0, _png(10 * r))
                steps = 2 if agent == "agent-one" else 3
                for i in range(1, steps + 1):
                    ep.write_screen(i, _png(10 * r + i))
                    ep.append_step(StepRecord(
                        index=i, action={"type": "click", "x": 100 * i, "y": 200}, screen_before=f"screens/{i - 1:03d}.png",
                        screen_after=f"screens/{i:03d}.png", thought=f"{agent} step {i} {PLANTED}",
                        monitor={"monitor": "crate-s", "risky": i == 2, "halt": False, "category": "payment" if i == 2 else None,
                                 "reason": f"checked by {agent}"}))
                run.append_result(EpisodeResult(task_id=eid, agent=agent, status="finished", steps=steps, cap=5,
                                                verdicts={"oracle": outs[r - 1]}, seed=r))
    return path


def test_compare_two_agents_in_chromium(tmp_path, browser, capsys, monkeypatch):  # noqa: F811
    one = write_run(tmp_path / "one", "agent-one", {"clock_a": [True, True, False], "clock_b": [True, True, True],
                                                    "notes_c": [False, False, False]})
    two = write_run(tmp_path / "two", "agent-two", {"clock_a": [False], "clock_b": [True], "notes_c": [True]})
    bundle = tmp_path / "two.tar.zst"
    make_bundle(two, bundle)
    out = tmp_path / "cmp"
    capsys.readouterr()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["compare", str(one), str(bundle), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    # rates A: clock_a 2/3, clock_b 1, notes_c 0; B: 0, 1, 1. Matrix: both = 0*2/3 + 1*1 + 0 = 1;
    # only A = 2/3*1 + 0 + 0 = 0.67; only B = 0 + 0 + 1*1 = 1; both fail = 1/3*1 + 0 + 0 = 0.33
    assert "agent-one" in printed and "agent-two" in printed and "0.7" in printed and "McNemar" in printed
    assert (out / "index.html").is_file() and len(list((out / "tasks").glob("*.html"))) == 3

    page = browser.new_page()
    w = _Watch(page)
    page.goto((out / "index.html").as_uri())
    assert page.locator("#m-B-both").inner_text() == "1" and page.locator("#m-B-onlya").inner_text() == "0.67"
    assert page.locator("#m-B-onlyb").inner_text() == "1" and page.locator("#m-B-neither").inner_text() == "0.33"
    stats = page.locator("#stats-B").inner_text()
    assert "McNemar exact p" in stats and "bootstrap 95% CI" in stats and "detectable at 80% power" in stats
    assert page.locator("tr.task:visible").count() == 3
    page.select_option("#f-app", "com.android.deskclock")
    assert page.locator("tr.task:visible").count() == 2
    page.select_option("#f-lang", "zh")
    assert page.locator("tr.task:visible").count() == 1 and page.locator("#shown").inner_text() == "1"
    page.select_option("#f-app", "")
    page.select_option("#f-lang", "")
    page.select_option("#f-outcome", "only B")
    assert [t.inner_text() for t in page.locator("tr.task:visible td:first-child").all()] == ["notes_c"]
    page.select_option("#f-outcome", "mixed")
    assert [t.inner_text() for t in page.locator("tr.task:visible td:first-child").all()] == ["clock_a"]

    page.locator("tr.task:visible a").click()
    assert page.url.endswith("tasks/clock_a.html")
    first = page.locator("details.repeat").first
    heads = first.locator(".cell.head")
    assert heads.count() == 2 and "agent-one" in heads.nth(0).inner_text() and "agent-two" in heads.nth(1).inner_text()
    steps = first.locator(".cell.step")
    assert steps.count() == 5  # two steps of A beside three of B, step by step
    assert "agent-one step 1 " + PLANTED in steps.nth(0).inner_text()  # shown as text, never run
    assert "agent-two step 1" in steps.nth(1).inner_text()
    assert "risky (allowed)" in steps.nth(2).inner_text() and "payment" in steps.nth(2).inner_text()
    assert "click(x=100" in steps.nth(0).inner_text()
    img = steps.nth(1).locator("img")
    assert img.evaluate("i => i.complete && i.naturalWidth") == 360  # B's screenshot, from the bundle's copy
    assert first.locator(".shot svg circle.mark").count() == 5
    page.locator("a.zoom").first.click()
    assert page.locator("#lightbox").is_visible()
    assert page.locator("details.repeat").count() == 3  # A's three repeats; B has only the first
    assert w.errors == [] and w.dialogs == []
    page.close()
