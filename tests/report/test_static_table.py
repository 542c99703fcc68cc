"""The cross-scorer table of ``harness static score --profile all`` and the report-level rules that
are not one step's decision: skipped and finish steps, UI-S1's pipeline progress, the large-box
warning. Small hand-made episodes (our own, in AndroidControl's shape), figures worked by hand."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from harness.cli.main import main
from harness.importers.androidcontrol import DatasetError, load_dataset
from harness.report.static_eval import PROFILES, load_predictions, score, score_files


def _click(x, y, boxes):
    return {"action_content": {"action": "click", "coordinate": [x, y]},
            "check_options": {"action": "click", "candidate_bbox": boxes, "coordinate": [x, y]}}


EPISODES = [
    {"goal": "g0", "episode_id": 1, "steps": [
        _click(540, 1200, [[0, 0, 1080, 2400]]),                       # a box covering the whole screen
        _click(100, 300, [[60, 260, 140, 340]]),
        {"action_content": {"action": "open", "text": "Clock"}, "check_options": {"action": "open", "text": "Clock"}},
    ]},
    {"goal": "g1", "episode_id": 2, "steps": [
        _click(900, 2000, [[850, 1950, 950, 2050], [0, 200, 1080, 2300]]),   # 0.875 of the screen: large
        {"action_content": {"action": "wait", "time": 2}, "check_options": {"action": "wait", "time": 2}},
    ]},
]
PREDICTIONS = [
    (0, 0, {"action": "click", "coordinate": [1000, 100]}),   # far from the point, inside the screen-sized box
    (0, 1, {"action": "click", "coordinate": [101, 301]}),
    (0, 2, {"action": "open", "text": "clock"}),
    (0, 3, {"action": "finish"}),                             # the finish step agentcpm-gui adds
    (1, 0, {"action": "click", "coordinate": [300, 700]}),    # inside the large box only
    (1, 1, None),                                             # an unreadable answer
]


@pytest.fixture
def files(tmp_path):
    data, preds = tmp_path / "d.jsonl", tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(e) + "\n" for e in EPISODES))
    preds.write_text("".join(json.dumps({"episode": e, "step": j, "action": a} if a else
                                        {"episode": e, "step": j, "action": None, "invalid": "no JSON"}) + "\n"
                             for e, j, a in PREDICTIONS))
    return data, preds


def _report(files, profile):
    (r,) = score_files(*files, [profile])
    return r


def test_large_boxes_are_counted_and_accuracy_given_without_them(files):
    s = _report(files, "androidcontrol").summary
    # steps 0/0 and 1/0 have a box >= 80 % of the screen; both taps land in it (right under the any-box rule)
    assert s["large_boxes"] == {"threshold": 0.8, "steps": 2, "click_steps": 3, "ams_large": 100.0,
                                "ams_without": round(100 * 2 / 3, 2), "click_ams_without": 100.0}
    assert s["ams"] == 80.0  # 4 of 5: the wait step's answer is unreadable
    # UI-S1's pipeline drops the boxes: both large-box taps are far from the point
    p = _report(files, "uis1-pipeline").summary
    assert p["ams"] == 40.0 and p["large_boxes"]["ams_large"] == 0.0


def test_uis1_pipeline_zeroes_progress_at_an_unreadable_answer(files):
    a, p = _report(files, "androidcontrol").summary, _report(files, "uis1-pipeline").summary
    # androidcontrol: ep0 3/3 right, ep1 1 right then the unreadable answer -> (1 + 1/2) / 2
    assert a["progress"] == 75.0 and a["sr"] == 50.0
    # the pipeline: ep0 step 0 wrong (no boxes) -> 0; ep1 step 0 wrong -> 0
    assert p["progress"] == 0.0
    # an unreadable answer that is the first wrong step: the function would give 1/2, the pipeline 0
    eps = load_dataset(files[0])
    preds = load_predictions(files[1], eps)
    preds[(1, 0)] = preds[(1, 0)].__class__({"action": "click", "coordinate": [900, 2000]})
    assert score(eps, preds, "androidcontrol").summary["progress"] == 75.0
    assert score(eps, preds, "uis1-pipeline").summary["progress"] == 0.0  # ep0 still 0; ep1 reset from 1/2


def test_agentcpm_gui_scores_a_finish_step_only_where_one_is_predicted(files):
    r = _report(files, "agentcpm-gui")
    s = r.summary
    # scored: ep0 clicks (2) + its finish; ep1 click + wait (stop); skipped: the open step, ep1's finish
    assert (s["scored"], s["skipped"]) == (5, 2)
    assert sorted(s["skipped_by_reason"]) == ["finish step: no prediction for it (step index = episode length)",
                                              "open-app step: dropped by AgentCPM-GUI's conversion (process_ac.py)"]
    fin = [st for st in r.steps if st.gt_type == "finish"]
    assert [(st.episode, st.step, st.ok, st.skipped is None) for st in fin] == [(0, 3, True, True), (1, 2, False, False)]


def test_a_finish_step_prediction_is_left_unread_by_a_profile_without_one(files, tmp_path):
    a, c = score_files(*files, ["androidcontrol", "agentcpm-gui"])
    assert (a.summary["finish_unread"], c.summary["finish_unread"]) == (1, 0)
    assert a.summary["scored"] == 5 and a.summary["missing"] == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"episode": 0, "step": 4, "action": {"action": "finish"}}) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl:1: step: episode 0 has steps 0..2 \(and 3, its finish step\), got 4"):
        score_files(files[0], bad, ["agentcpm-gui"])


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_profile_all_prints_every_profile_side_by_side(files, capsys, tmp_path):
    assert main(["static", "score", "--dataset", str(files[0]), "--predictions", str(files[1]), "--profile", "all"]) == 0
    out = capsys.readouterr().out
    head = next(line for line in out.splitlines() if line.startswith("| profile |"))
    for col in ("scored", "skipped", "step acc (AMS)", "SR", "Acc", "TaskSucc", "TailSucc", "AvgErr", "AMS w/o large"):
        assert f"| {col} |" in head
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert set(PROFILES) <= set(rows)
    assert rows["agentcpm-gui"].startswith("| agentcpm-gui | 5 | 2 | 2 | ")
    assert rows["ui-r1"].startswith("| ui-r1 | 4 | 1 | 2 | ")           # the wait step is skipped
    assert rows["androidcontrol"].startswith("| androidcontrol | 5 | 0 | 2 | 80.00 |")
    # one line per profile: what its scorer is known for, and its source with the commit
    for name in PROFILES:
        assert re.search(rf"^- {re.escape(name)}: .+\(.+\)$", out, re.M), name
    assert "@ 11cea57" in out and "@ acbaf50" in out and "no public scorer code" in out
    assert "Large boxes: 2 of 3 click/long-press steps" in out
    assert "- ui-r1: 1 skipped (wait step" in out
    assert "- androidcontrol: 1 finish-step predictions not read" in out


def test_the_table_as_html_and_json(files, capsys, tmp_path):
    page = tmp_path / "static.html"
    assert main(["static", "score", "--dataset", str(files[0]), "--predictions", str(files[1]), "--format", "html",
                 "--out", str(page)]) == 0
    assert f"static report -> {page}" in capsys.readouterr().out
    html = page.read_text()
    p = _Text()
    p.feed(html)
    assert "script" not in p.tags and "Content-Security-Policy" in html
    text = " ".join(p.text)
    for name in PROFILES:
        assert name in text
    assert "What each profile's scorer is known for" in text and "Large boxes: 2 of 3" in text
    assert "&" not in text.replace("&amp;", "")  # every text escaped by the parser's reading
    assert main(["static", "score", "--dataset", str(files[0]), "--predictions", str(files[1]), "--format", "json",
                 "--profile", "ui-r1,os-atlas"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [o["profile"] for o in out] == ["ui-r1", "os-atlas"]
    assert out[0]["scored"] == 4 and out[0]["skipped"] == 1 and "2fe9bf0" in out[0]["source"] and out[0]["known_for"]


def test_the_datasets_own_actions_under_the_published_scorers():
    """The ground truth as predictions on the shared sample: right everywhere except where a
    scorer's own rules judge the dataset's actions wrong (docs/reports.md says why)."""
    from tests.shared_data import reference

    sample = reference("androidcontrol_test_300.jsonl")
    got = {r.profile: r.summary for r in score_files(sample, None, PROFILES)}
    for name in ("aitw", "androidcontrol", "guiodyssey", "androidlens", "uis1-pipeline", "os-atlas", "ui-r1"):
        assert got[name]["ams"] == 100.0 and got[name]["sr"] == 100.0, name
    assert (got["ui-r1"]["scored"], got["ui-r1"]["skipped"]) == (1465, 114)  # 112 waits, 2 long presses
    # InfiGUI-R1 reads the scroll word as the finger's: the 196 vertical swipes are wrong, the 27 horizontal right
    assert got["infigui-r1"]["by_type"]["swipe"] == {"steps": 223, "type_match": 100.0, "ams": round(100 * 27 / 223, 2)}
    a = got["agentcpm-gui"]
    assert (a["scored"], a["skipped"]) == (1469, 410)  # 110 open-app steps and 300 unpredicted finish steps
    assert a["by_type"]["swipe"]["ams"] == round(100 * 196 / 223, 2)       # words reversed: horizontal ones wrong
    assert a["by_type"]["long_press"]["ams"] == 0.0                        # a long press is its click; ours is not
    assert a["by_type"]["click"]["ams"] == round(100 * 941 / 949, 2)       # 8 points off the 1080x2400 grid
