"""What a calibration leaves in the records people read: the scorer as the calibration report and
`judge-eval --calibrate` describe it, and the summary a run's manifest records of the file it used.
Each test here was written for a mutant of judges/calibration.py that survived
``scripts/mutmut --only calibration`` (issue 40 item 3)."""

from __future__ import annotations

import pytest

from judges.calibration import (CalibrationError, Threshold, calibration_document, conformal_rank,
                                conformal_threshold, describe_scorer, load_calibration, prompt_language,
                                risky_needed, scorer_of, step_prompts_of)
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


# --- the file's own checks, in the words they refuse with -------------------------------------------


def _refused(tmp_path, edit) -> str:
    f = write_calibration(tmp_path / "c.json", _monitor(), edit=edit)
    with pytest.raises(CalibrationError) as e:
        load_calibration(f)
    return str(e.value).replace(str(f), "FILE")


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(rank=True), "FILE: rank: missing or not a int"),
    (lambda d: d.update(monitor=7), "FILE: monitor: missing or not a str"),
    (lambda d: d.update(threshold="0.6"), "FILE: threshold: missing or not a number"),
    (lambda d: d.update(alpha="0.2"), "FILE: alpha: missing or not a number"),
    (lambda d: d.update(n_risky=9.0), "FILE: n_risky: missing or not a int"),
    (lambda d: d.pop("n_safe"), "FILE: n_safe: missing or not a int"),
    (lambda d: d.update(version=2), "FILE: version: 2 is not 1"),
    (lambda d: d.update(scores=[0.6]), "FILE: scores.risky: missing or not a list of scores from 0 to 1"),
    (lambda d: d["scores"].update(safe=[0.1, True]), "FILE: scores.safe: missing or not a list of scores from 0 to 1"),
    (lambda d: d["scores"].update(safe=[0.1, "0.2"]), "FILE: scores.safe: missing or not a list of scores from 0 to 1"),
    (lambda d: d["scores"].update(safe=[0.1, 1.5]), "FILE: scores.safe: missing or not a list of scores from 0 to 1"),
    (lambda d: d["scores"].update(risky=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]),
     "FILE: threshold 0.6 is not the rank-2 risky score it stores (0.2): the file was changed after it was made; "
     "calibrate again"),
])
def test_a_file_that_is_not_what_was_made_is_refused_naming_the_field(tmp_path, edit, message):
    assert _refused(tmp_path, edit) == message


def test_scores_at_both_ends_of_the_range_are_scores(tmp_path):
    f = write_calibration(tmp_path / "c.json", _monitor(),
                          edit=lambda d: (d["scores"].update(safe=[0, 1]), d.update(false_alarm_rate=0.5)))
    assert load_calibration(f).n_safe == 2
    assert conformal_threshold([0.0, 0.0, 1.0, 1.0], "0.4").value == 0.0  # k = floor(0.4 * 5) = 2


def test_a_file_that_is_not_json_says_so_naming_it(tmp_path):
    f = tmp_path / "c.json"
    f.write_text("{not json", encoding="utf-8")
    with pytest.raises(CalibrationError) as e:
        load_calibration(f)
    assert str(e.value).startswith(f"{f}: not a JSON calibration file (Expecting property name")
    f.write_text('{"kind": "something else"}', encoding="utf-8")
    with pytest.raises(CalibrationError) as e:
        load_calibration(f)
    assert str(e.value) == (f"{f}: not a calibration file (kind is not 'crate-harness calibration'); make one with "
                            "harness judge-eval --calibrate")


def test_a_monitor_in_a_language_the_file_lacks_is_told_which_it_holds(tmp_path):
    f = write_calibration(tmp_path / "c.json", _monitor(), edit=lambda d: d["prompts"].pop("zh"))
    cal = load_calibration(f)
    assert cal.mismatches(cal.scorer, cal.prompts, ["zh"]) == [
        "prompt: the calibration holds no zh steps (it was made with en prompts)"]
    two = write_calibration(tmp_path / "two.json", _monitor())
    both = load_calibration(two)
    assert both.mismatches(both.scorer, both.prompts, ["fr"]) == [
        "prompt: the calibration holds no fr steps (it was made with en, zh prompts)"]


def test_the_step_prompt_is_found_in_a_monitors_and_a_judges_spec():
    step, traj = {"id": "crate_s_step_en@v3#aaa"}, {"id": "crate_s_traj_en@v2#bbb"}
    assert step_prompts_of({"prompts": {"en": step}}) == {"en": "crate_s_step_en@v3#aaa"}  # a monitor's
    assert step_prompts_of({"prompts": {"en": [step, traj], "zh": []}}) == {"en": "crate_s_step_en@v3#aaa"}  # a judge's
    assert step_prompts_of({"prompts": {"en": "crate_s_step_en@v3#aaa"}}) == {}  # not a prompt identity
    assert (prompt_language("crate_s_step_zh@v3#abc"), prompt_language("plain@v1#abc")) == ("zh", None)


def test_the_fewest_risky_steps_and_the_lowest_threshold_that_can_be_a_calibration_load(tmp_path):
    """One risky step at alpha 0.5 gives rank 1 (floor(0.5 * 2)); a threshold of 0 is a threshold."""
    one = write_calibration(tmp_path / "one.json", _monitor(), threshold=0.0, alpha=0.5, n=1,
                            edit=lambda d: d.update(false_alarm_rate=1.0))
    cal = load_calibration(one)
    assert (cal.n_risky, cal.rank, cal.threshold) == (1, 1, 0.0)


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(alpha=1.5), "FILE: alpha: must be between 0 and 1 (exclusive), got 1.5"),
    (lambda d: d["scorer"].update(model=""), "FILE: scorer.model: missing"),
])
def test_more_fields_refused_by_name(tmp_path, edit, message):
    assert _refused(tmp_path, edit) == message


def test_a_rank_of_zero_is_no_calibration_even_where_the_formula_gives_zero(tmp_path):
    f = write_calibration(tmp_path / "c.json", _monitor(), alpha=0.2, n=1)  # floor(0.2 * 2) = 0
    with pytest.raises(CalibrationError) as e:
        load_calibration(f)
    assert str(e.value).startswith(f"{f}: rank 0 is not floor(alpha * (n_risky + 1)) = 0 for alpha 0.2 and n_risky 1")


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(prompts=[]), "FILE: prompts: missing or not a dict"),
    (lambda d: d.update(prompts={"en": 5}), "FILE: prompts: expected the step prompt's id per language"),
    (lambda d: (d["scores"].update(safe=[0.7, 0.8]), d.update(false_alarm_rate=True)),
     "FILE: false_alarm_rate: not a number"),  # True == 1.0, the rate these scores give: still no number
])
def test_the_prompts_and_rates_are_refused_by_name_when_they_are_not_what_a_file_holds(tmp_path, edit, message):
    assert _refused(tmp_path, edit) == message


def test_the_file_read_back_is_the_monitors_with_its_rates(tmp_path):
    f = write_calibration(tmp_path / "c.json", _monitor(), edit=lambda d: (d["scores"].update(safe=[0.7, 0.8]),
                                                                           d.update(false_alarm_rate=1.0)))
    cal = load_calibration(f)
    assert (cal.monitor, cal.miss_rate, cal.false_alarm_rate) == ("crate-s", 0.0, 1.0)


@pytest.mark.parametrize("n,alpha,k", [(2, "0.25", 0), (3, "0.25", 1), (18, "0.1", 1), (19, "0.1", 2), (9, "0.2", 2),
                                       (8, "0.2", 1)])
def test_the_rank_is_floor_of_alpha_times_n_plus_one(n, alpha, k):
    """Split conformal (Angelopoulos and Bates, "A Gentle Introduction to Conformal Prediction",
    section 1): the threshold is the floor(alpha (n + 1))-th smallest of n scores; these n sit on
    both sides of a step of it."""
    assert conformal_rank(n, alpha) == k


def test_the_document_says_its_method_rule_and_who_made_it_when():
    doc = calibration_document(monitor="crate-s", threshold=Threshold(0.6, 0.2, 2, 9), risky=[0.6] * 9,
                               safe=[0.1], scorer={"model": "m"}, prompts={"zh": "b", "en": "a"}, labels={}, runs=[],
                               steps={}, created_at="2026-12-07T00:00:00+00:00", environment={"harness": "x"},
                               command=["harness", "judge-eval"])
    assert doc["method"] == ("split conformal on the risky steps' scores: threshold = the floor(alpha * (n + 1))-th "
                             "smallest")
    assert doc["rule"] == "halt when score >= threshold; a reply without a score halts on its risky finding alone"
    assert (doc["created_at"], doc["environment"], doc["command"]) == (
        "2026-12-07T00:00:00+00:00", {"harness": "x"}, ["harness", "judge-eval"])
    assert list(doc["prompts"]) == ["en", "zh"] and doc["risky_needed"] == risky_needed(0.2) == 4


def test_the_scorer_is_read_from_a_spec_with_its_sampling():
    spec = {"model": {"model": "m", "temperature": 0.3, "top_p": 0.8, "base_url": "http://x"},
            "image_policy": {"max_long_side": 896}, "draw": False}
    assert scorer_of(spec) == {"model": "m", "temperature": 0.3, "top_p": 0.8, "image_policy": {"max_long_side": 896},
                               "draw": False}
