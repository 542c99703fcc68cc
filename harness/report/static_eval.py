"""Static (offline) evaluation: predicted actions scored against ground-truth episodes.

Each step is predicted with the ground-truth history (the screen of step j and the true actions
before it), so a mistake does not derail later steps. A *profile* says when a predicted action
counts as right and which steps count at all; each reproduces one published scorer (the package
:mod:`harness.report.static`, a module per scorer, each naming the repository, file and commit it
follows). Dataset shape and action conversion: :mod:`harness.importers.androidcontrol`.

Coordinates are compared as the scorer compares them (fractions of the screen, its pixels, or a
0-1000 grid). The screen size of a step comes from the dataset (``width``/``height`` on the step or
episode), else from the screenshot file when it exists, else from ``screen`` (default 1080x2400, the
usual AndroidControl size; coordinates of the shared sample reach 1355x2952, so pass the real size
when it matters).

A step a profile does not score (UI-R1 has no wait or long-press steps, AgentCPM-GUI drops open-app
steps) is reported as *skipped*, never as right or wrong; every figure is over the scored steps, and
the summary gives the scored and skipped counts with the reasons. AgentCPM-GUI adds a finish step to
every episode (prediction index = the episode's length); as its ``run_eval_agent.py`` scores only
the steps it has a prediction for, an episode's finish step is scored when the predictions give one,
else skipped.

Metrics (all percentages unless said otherwise; see docs/reports.md):

* ``type_match``: steps whose predicted action type is right (the profile's notion of type).
* ``ams``: Action Matching Score, steps whose type and arguments are right (micro average over
  steps; AndroidLens 4.1, GUI-Odyssey ``stat_result``): the step accuracy.
* ``sr``: episodes whose every scored step is right (GUI-Odyssey ``check_SR``; UI-S1's episode success).
* ``progress``: the share of an episode's steps that are right *before its first wrong step*,
  averaged over episodes (UI-S1's and AgentCPM-GUI's "progress"; our reading of AndroidLens's
  static task progress, for which the paper gives no formula).
* Mobile-R1 (seed 004): ``acc`` = per-episode share of steps with a valid format *and* a matching
  action, averaged over episodes (its recipe returns ``step_acc`` per trajectory, so it is a macro
  average and differs from ``ams``); ``task_succ`` = every step right (equals ``sr``); ``tail_succ`` =
  the episode's last step right (the step that reaches the goal state; intermediate errors are
  ignored, as the metric requires); ``avg_err`` = mean raw count of wrong steps per episode (a raw
  count, so it grows with episode length: compare it only on the same episodes; ``err_per_step``
  gives the length-weighted rate and ``avg_arg_err`` the count with a right type but wrong
  arguments).
* ``text_anls``: mean Average Normalised Levenshtein Similarity (ST-VQA, threshold 0.5) over
  type/open steps whose type matches, whatever the profile's own text rule.
* ``large_boxes``: click and long-press steps with a candidate box covering at least
  :data:`LARGE_BOX` of the screen (any-box rules accept nearly any tap there), and the step
  accuracy without them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from harness.importers.androidcontrol import DatasetError, StaticEpisode, load_dataset, prediction_to_ac, read_text
from harness.report.static.common import (FINISH, GT, Act, StaticEvalError, anls, box_area_fraction, levenshtein,
                                          to_act, to_gt)
from harness.report.static.profiles import PROFILE_MAP, PROFILES, Profile

__all__ = ["PROFILES", "PROFILE_MAP", "MATCHERS", "Act", "GT", "Prediction", "StaticEvalError", "StaticReport",
           "StepScore", "anls", "decisions", "levenshtein", "load_predictions", "ground_truth_predictions", "score", "score_files",
           "summarise", "to_act", "to_gt", "DEFAULT_SCREEN", "LARGE_BOX"]

DEFAULT_SCREEN = (1080, 2400)
# A candidate box this large (area as a fraction of the screen's) makes an any-box rule accept nearly
# any tap: 744 of the test set's 5,083 click and long-press steps have one.
LARGE_BOX = 0.8
MATCHERS = {name: p.match for name, p in PROFILE_MAP.items()}


# --------------------------------------------------------------------------- predictions


@dataclass
class Prediction:
    action: dict[str, Any] | None        # AndroidControl shape; None = invalid output
    invalid: str | None = None


def load_predictions(path: str | Path, episodes: list[StaticEpisode]) -> dict[tuple[int, int], Prediction]:
    """Read ``{"episode": i, "step": j, "action": {...}}`` lines (0-based indexes into the dataset;
    ``episode_id`` may stand for ``episode``). An action that is not a valid action is kept as an
    invalid prediction (a format error), not refused; a defect of the file itself is an error.
    Step ``j`` may also be the episode's length: the finish step a profile such as agentcpm-gui adds
    (a profile without one leaves it unread and says how many it left)."""
    p = Path(path)
    text = read_text(p)
    by_id = {str(e.episode_id): e.index for e in episodes}
    out: dict[tuple[int, int], Prediction] = {}
    first: dict[tuple[int, int], int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{p}:{lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{p}:{lineno}: expected a JSON object")
        ep = obj.get("episode")
        if ep is None and "episode_id" in obj:
            ep = by_id.get(str(obj["episode_id"]))
            if ep is None:
                raise DatasetError(f"{p}:{lineno}: episode_id: {obj['episode_id']!r} is not in the dataset")
        step = obj.get("step")
        if not isinstance(ep, int) or isinstance(ep, bool) or not 0 <= ep < len(episodes):
            raise DatasetError(f"{p}:{lineno}: episode: expected an index 0..{len(episodes) - 1}, got {ep!r}")
        n = len(episodes[ep].steps)
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= n:
            raise DatasetError(f"{p}:{lineno}: step: episode {ep} has steps 0..{n - 1} (and {n}, its finish step), "
                               f"got {step!r}")
        key = (ep, step)
        if key in first:
            raise DatasetError(f"{p}:{lineno}: episode {ep} step {step}: duplicate prediction (first at line {first[key]})")
        first[key] = lineno
        raw = obj.get("action")
        if raw is None:
            out[key] = Prediction(None, obj.get("invalid") or "no action")
            continue
        try:
            out[key] = Prediction(prediction_to_ac(raw))
        except DatasetError as e:
            out[key] = Prediction(None, str(e))
    return out


def ground_truth_predictions(episodes: list[StaticEpisode]) -> dict[tuple[int, int], Prediction]:
    """The dataset's own actions as predictions (a sanity check: the profiles that judge the dataset's
    own actions right give AMS 100; docs/reports.md says which do not, and why)."""
    return {(e.index, j): Prediction(dict(s.options[0].action)) for e in episodes for j, s in enumerate(e.steps)}


# --------------------------------------------------------------------------- scoring


def screen_size_of(ep: StaticEpisode, step_index: int, default: tuple[int, int], base: Path | None = None,
                   cache: dict[str, tuple[int, int] | None] | None = None) -> tuple[int, int]:
    """The step's screen size: the dataset's, else the screenshot's (when the file exists), else default."""
    step = ep.steps[step_index]
    if step.size:
        return step.size
    if ep.size:
        return ep.size
    if step.screenshot:
        cache = cache if cache is not None else {}
        if step.screenshot not in cache:
            cache[step.screenshot] = None
            path = Path(step.screenshot)
            if not path.is_absolute() and base is not None:
                path = base / path
            if path.is_file():
                try:
                    from PIL import Image

                    with Image.open(path) as im:
                        cache[step.screenshot] = im.size
                except OSError:
                    pass
        if cache[step.screenshot]:
            return cache[step.screenshot]  # type: ignore[return-value]
    return default


@dataclass
class StepScore:
    episode: int
    step: int
    gt_type: str
    pred_type: str | None
    format_ok: bool
    type_ok: bool
    ok: bool
    text_anls: float | None = None
    skipped: str | None = None          # why the profile does not score this step (None: scored)
    large_box: bool = False             # a click step with a candidate box >= LARGE_BOX of the screen


@dataclass
class StaticReport:
    profile: str
    steps: list[StepScore]
    episodes: int
    missing: int = 0
    summary: dict[str, Any] = field(default_factory=dict)

    def to_json(self, with_steps: bool = False) -> dict[str, Any]:
        out = {"profile": self.profile, **self.summary}
        if with_steps:
            out["per_step"] = [s.__dict__ for s in self.steps]
        return out


def _profile(name: str) -> Profile:
    if name not in PROFILE_MAP:
        raise StaticEvalError(f"unknown profile {name!r} (expected one of {', '.join(PROFILES)})")
    return PROFILE_MAP[name]


def has_large_box(g: GT, size: tuple[int, int]) -> bool:
    return g.act.kind in ("click", "long_press") and any(box_area_fraction(b, size) >= LARGE_BOX for b in g.pixel_boxes)


def _judge(profile: Profile, act: Act | None, gts: list[GT]) -> tuple[bool, bool, float | None]:
    if act is None and not profile.reads_unparsed:
        return False, False, None
    type_ok = ok = False
    sim: float | None = None
    for g in gts:
        t, a = profile.match(act, g)
        type_ok, ok = type_ok or t, ok or a
        if act is not None and g.act.kind in ("type", "open") and act.kind == g.act.kind:
            s = anls(act.text or "", g.check_text or "")
            sim = s if sim is None else max(sim, s)
    return type_ok, ok, sim


def _act_of(pred: Prediction | None, size: tuple[int, int]) -> Act | None:
    if pred is None or pred.action is None:
        return None
    try:
        return to_act(pred.action, size)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def score(episodes: list[StaticEpisode], predictions: dict[tuple[int, int], Prediction], profile: str, *,
          screen: tuple[int, int] = DEFAULT_SCREEN, base: Path | None = None) -> StaticReport:
    """Score ``predictions`` against ``episodes`` under ``profile``; a scored step without a
    prediction is wrong."""
    prof = _profile(profile)
    sizes: dict[str, tuple[int, int] | None] = {}
    scores: list[StepScore] = []
    missing = 0
    for ep in episodes:
        size = screen
        for j, step in enumerate(ep.steps):
            size = screen_size_of(ep, j, screen, base, sizes)
            gts = [to_gt(o, size) for o in step.options]
            gt_type = gts[0].act.kind
            large = has_large_box(gts[0], size)
            reason = prof.skip(gts[0])
            if reason:
                scores.append(StepScore(ep.index, j, gt_type, None, False, False, False, skipped=reason, large_box=large))
                continue
            pred = predictions.get((ep.index, j))
            missing += pred is None
            act = _act_of(pred, size)
            type_ok, ok, sim = _judge(prof, act, gts)
            scores.append(StepScore(ep.index, j, gt_type, act.kind if act else None, act is not None, type_ok, ok, sim,
                                    large_box=large))
        if prof.finish_step:
            n = len(ep.steps)
            pred = predictions.get((ep.index, n))
            if pred is None:  # run_eval_agent.py scores the steps it has a prediction for
                scores.append(StepScore(ep.index, n, "finish", None, False, False, False,
                                        skipped="finish step: no prediction for it (step index = episode length)"))
                continue
            act = _act_of(pred, size)
            type_ok, ok, _ = _judge(prof, act, [to_gt(FINISH, size)])
            scores.append(StepScore(ep.index, n, "finish", act.kind if act else None, act is not None, type_ok, ok))
    report = StaticReport(profile, scores, len(episodes), missing)
    report.summary = summarise(scores, episodes, missing, error_resets_progress=prof.error_resets_progress)
    if prof.totals is not None:
        report.summary.update(prof.totals(scores))
    report.summary["finish_unread"] = 0 if prof.finish_step else sum((e.index, len(e.steps)) in predictions
                                                                     for e in episodes)
    return report


def decisions(report: StaticReport) -> dict[int, list[Any]]:
    """Per episode, each step's decision in order: ``[type_ok, ok]``, or ``"skip: reason"`` for a
    step the profile does not score (the shape scripts/published_scorers.py writes the scorers' in)."""
    out: dict[int, list[Any]] = {}
    for s in report.steps:
        out.setdefault(s.episode, []).append(f"skip: {s.skipped}" if s.skipped is not None else [s.type_ok, s.ok])
    return out


def _pct(num: float, den: float) -> float | None:
    return round(100.0 * num / den, 2) if den else None


def summarise(all_scores: list[StepScore], episodes: list[StaticEpisode], missing: int = 0, *,
              error_resets_progress: bool = False) -> dict[str, Any]:
    """The report's figures over the scored steps. ``error_resets_progress``: an episode whose first
    wrong step has no readable prediction makes no progress at all (UI-S1's pipeline: the error its
    evaluation raises resets the episode's step count to 0)."""
    scores = [s for s in all_scores if s.skipped is None]
    skipped: dict[str, int] = {}
    for s in all_scores:
        if s.skipped is not None:
            skipped[s.skipped] = skipped.get(s.skipped, 0) + 1
    by_ep: dict[int, list[StepScore]] = {}
    for s in scores:
        by_ep.setdefault(s.episode, []).append(s)
    ep_lists = [by_ep[e.index] for e in episodes if by_ep.get(e.index)]
    n_steps = len(scores)
    n_eps = len(ep_lists)
    right = sum(s.ok for s in scores)
    all_right = sum(all(s.ok for s in lst) for lst in ep_lists)
    progress = []
    for lst in ep_lists:
        k = 0
        while k < len(lst) and lst[k].ok:
            k += 1
        if error_resets_progress and k < len(lst) and not lst[k].format_ok:
            k = 0
        progress.append(k / len(lst))
    acc = [sum(s.ok and s.format_ok for s in lst) / len(lst) for lst in ep_lists]
    errs = [sum(not s.ok for s in lst) for lst in ep_lists]
    arg_errs = [sum(s.type_ok and not s.ok for s in lst) for lst in ep_lists]
    by_type: dict[str, dict[str, Any]] = {}
    for s in scores:
        d = by_type.setdefault(s.gt_type, {"steps": 0, "type_ok": 0, "ok": 0})
        d["steps"] += 1
        d["type_ok"] += s.type_ok
        d["ok"] += s.ok
    texts = [s.text_anls for s in scores if s.text_anls is not None]
    large = [s for s in scores if s.large_box]
    clicks = [s for s in scores if s.gt_type in ("click", "long_press")]
    rest = [s for s in scores if not s.large_box]
    return {
        "episodes": n_eps,
        "steps": n_steps,
        "scored": n_steps,
        "skipped": len(all_scores) - n_steps,
        "skipped_by_reason": skipped,
        "type_match": _pct(sum(s.type_ok for s in scores), n_steps),
        "ams": _pct(right, n_steps),
        "sr": _pct(all_right, n_eps),
        "progress": _pct(sum(progress), n_eps),
        "mobile_r1": {
            "acc": _pct(sum(acc), n_eps),
            "task_succ": _pct(all_right, n_eps),
            "tail_succ": _pct(sum(lst[-1].ok for lst in ep_lists), n_eps),
            "avg_err": round(sum(errs) / n_eps, 4) if n_eps else None,
            "err_per_step": round(sum(errs) / n_steps, 4) if n_steps else None,
            "avg_arg_err": round(sum(arg_errs) / n_eps, 4) if n_eps else None,
        },
        "text_anls": _pct(sum(texts), len(texts)),
        "text_steps": len(texts),
        "format_errors": sum(not s.format_ok for s in scores) - missing,
        "missing": missing,
        "large_boxes": {
            "threshold": LARGE_BOX,
            "steps": len(large),
            "click_steps": len(clicks),
            "ams_large": _pct(sum(s.ok for s in large), len(large)),
            "ams_without": _pct(sum(s.ok for s in rest), len(rest)),
            "click_ams_without": _pct(sum(s.ok for s in clicks if not s.large_box), len(clicks) - len(large)),
        },
        "by_type": {k: {"steps": v["steps"], "type_match": _pct(v["type_ok"], v["steps"]), "ams": _pct(v["ok"], v["steps"])}
                    for k, v in sorted(by_type.items())},
    }


def score_files(dataset: str | Path, predictions: str | Path | None, profiles: Iterable[str], *,
                screen: tuple[int, int] = DEFAULT_SCREEN, limit: int | None = None) -> list[StaticReport]:
    """Load a dataset and predictions (None: the ground truth itself) and score every profile
    (only the first ``limit`` episodes when given)."""
    names = list(profiles)
    for n in names:
        _profile(n)
    episodes = load_dataset(dataset)
    if limit is not None:
        episodes = episodes[:limit]
    preds = ground_truth_predictions(episodes) if predictions is None else load_predictions(predictions, episodes)
    base = Path(dataset).resolve().parent
    return [score(episodes, preds, n, screen=screen, base=base) for n in names]
