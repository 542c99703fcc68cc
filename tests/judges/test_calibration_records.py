"""What a calibration leaves in the records people read: the scorer as the calibration report and
`judge-eval --calibrate` describe it, and the summary a run's manifest records of the file it used.
Each test here was written for a mutant of judges/calibration.py that survived
``scripts/mutmut --only calibration`` (issue 40 item 3)."""

from __future__ import annotations

import pytest

from judges.calibration import describe_scorer, load_calibration
from tests.judges.test_calibration import _monitor, write_calibration


@pytest.mark.parametrize("scorer,text", [
    ({"model": "judge-model", "temperature": 0.0, "top_p": 0.9, "draw": True,
      "image_policy": {"max_long_side": 1280, "format": "png"}},
     "model 'judge-model', temperature 0.0, top_p 0.9, image long side 1280 png, action drawn"),
    ({"model": "qwen", "temperature": 0.7, "draw": False, "image_policy": {"max_long_side": 896}},
     "model 'qwen', temperature 0.7, image long side 896, action not drawn"),
    ({"model": "m", "temperature": None, "top_p": None, "image_policy": None},
     "model 'm', temperature None, image long side None, action not drawn"),
])
def test_a_scorer_is_described_by_what_shapes_its_scores(scorer, text):
    assert describe_scorer(scorer) == text


def test_the_summary_a_manifest_records_holds_every_figure_of_the_file(tmp_path):
    f = write_calibration(tmp_path / "c.json", _monitor(), threshold=0.6, alpha=0.2, n=9)
    cal = load_calibration(f)
    s = cal.summary()
    assert list(s) == ["path", "sha256", "threshold", "alpha", "rank", "n_risky", "n_safe", "miss_rate",
                       "false_alarm_rate", "scorer", "prompts", "created_at"]
    assert (s["path"], s["sha256"], s["threshold"], s["alpha"], s["rank"], s["n_risky"], s["n_safe"]) == (
        str(f), cal.sha256, 0.6, 0.2, 2, 9, 2)
    assert (s["miss_rate"], s["false_alarm_rate"]) == (cal.miss_rate, cal.false_alarm_rate)
    assert s["miss_rate"] is not None and s["false_alarm_rate"] is not None
    assert s["scorer"] == cal.scorer and s["prompts"] == cal.prompts and s["created_at"] == "2026-01-01T00:00:00+00:00"
