"""Static (offline) evaluation: predicted actions scored against ground-truth episodes.

Each step is predicted with the ground-truth history (the screen of step j and the true actions
before it), so a mistake does not derail later steps. Four *profiles* say when a predicted action
counts as right; each follows one public reference, and every threshold below names its source.
Dataset shape and action conversion: :mod:`harness.importers.androidcontrol`.

Coordinates are compared as fractions of the screen (x / width, y / height), as all four references
do. The screen size of a step comes from the dataset (``width``/``height`` on the step or episode),
else from the screenshot file when it exists, else from ``screen`` (default 1080x2400, the usual
AndroidControl size; coordinates of the shared sample reach 1355x2952, so pass the real size when
it matters).

Metrics (all percentages unless said otherwise; see docs/reports.md):

* ``type_match``: steps whose predicted action type is right (the profile's notion of type).
* ``ams``: Action Matching Score, steps whose type and arguments are right (micro average over
  steps; AndroidLens 4.1, GUI-Odyssey ``stat_result``).
* ``sr``: episodes whose every step is right (GUI-Odyssey ``check_SR``; UI-S1's episode success).
* ``progress``: AndroidLens's average task progress for static evaluation, read here as the share
  of an episode's steps that are right *before its first wrong step*, averaged over episodes (the
  paper gives no formula for the static case; this is our reading, documented as such).
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
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from harness.importers.androidcontrol import (DatasetError, GroundTruth, StaticEpisode, finger_direction,
                                              load_dataset, prediction_to_ac, read_text)

PROFILES = ("aitw", "androidcontrol", "guiodyssey", "androidlens")
DEFAULT_SCREEN = (1080, 2400)

# --- thresholds, each with its source -------------------------------------------------------------
# AITW: google-research/google-research android_in_the_wild/action_matching.py
AITW_TAP_DISTANCE = 0.14         # _TAP_DISTANCE_THRESHOLD: taps match within 14% of the screen
AITW_BOX_AUGMENT = 1.4           # ANNOTATION_{WIDTH,HEIGHT}_AUGMENT_FRACTION (box grows by 1.4x its size)
AITW_SWIPE_DISTANCE = 0.04       # _SWIPE_DISTANCE_THRESHOLD: touch-lift distance below which it is a tap
# AndroidControl as UI-S1 scores it: X-PLUG/MobileAgent UI-S1/evaluation/qwenvl_utils.py
UIS1_BBOX_ENLARGE = 1.2          # BBOX_ENLARGE_FACTOR (box width and height scaled by 1.2 about its centre)
UIS1_POINT_DISTANCE = 0.04       # POINT_DISTANCE_THRESHOLD
# GUI-Odyssey: OpenGVLab/GUI-Odyssey src/eval_mm/GUIOdyssey_action_matching.py
ODYSSEY_CLICK_DISTANCE = 0.14    # CLICK_COORD_THRESHOLD (on the 0-1000 grid / 1000)
ODYSSEY_TEXT_SIMILARITY = 0.5    # TEXT_ANLS_THRESHOLD: 1 - Levenshtein / max length >= 0.5
# AndroidLens (seed 002 section 4.1): text by ANLS (ST-VQA, Biten et al. 2019, threshold tau = 0.5);
# clicks by the UI element; swipes by start and end point, or by direction when only a start is
# predicted. The paper gives no point tolerance; it follows GUI-Odyssey and AITW, so we use their
# common 0.14 screen fraction for points that have no element box and for swipe start/end.
ANLS_TAU = 0.5
LENS_POINT_DISTANCE = 0.14
# a swipe predicted only as a start point and a direction gets an end 0.2 screens away (only its
# direction is ever compared)
_DIRECTION_STEP = 0.2


class StaticEvalError(ValueError):
    pass


# --------------------------------------------------------------------------- text


def levenshtein(a: str, b: str) -> int:
    if a == b:
        return 0
    if len(a) > len(b):
        a, b = b, a
    if not a:
        return len(b)
    prev = list(range(len(a) + 1))
    for j, cb in enumerate(b, start=1):
        cur = [j]
        for i, ca in enumerate(a, start=1):
            cur.append(min(prev[i] + 1, cur[i - 1] + 1, prev[i - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _norm_text(s: str) -> str:
    return " ".join(s.lower().split())


def anls(pred: str, gt: str, tau: float = ANLS_TAU) -> float:
    """ST-VQA's normalised Levenshtein similarity: ``1 - NL`` when ``NL < tau``, else 0 (on
    lower-cased, whitespace-collapsed text)."""
    p, g = _norm_text(pred), _norm_text(gt)
    longest = max(len(p), len(g))
    if longest == 0:
        return 1.0
    nl = levenshtein(p, g) / longest
    return 1.0 - nl if nl < tau else 0.0


# --------------------------------------------------------------------------- normalised actions


@dataclass(slots=True)
class Act:
    """An AndroidControl action with points as screen fractions."""

    kind: str
    p: tuple[float, float] | None = None
    p2: tuple[float, float] | None = None       # swipe end (None: direction-only prediction)
    direction: str | None = None                # finger direction of a swipe
    text: str | None = None
    button: str | None = None


@dataclass(slots=True)
class GT:
    act: Act
    check_point: tuple[float, float] | None     # check_options.coordinate (else the action's)
    boxes: list[tuple[float, float, float, float]]  # candidate_bbox as fractions x1, y1, x2, y2
    check_text: str | None
    check_button: str | None


def _frac(p: Any, size: tuple[int, int]) -> tuple[float, float]:
    return float(p[0]) / size[0], float(p[1]) / size[1]


def to_act(a: dict[str, Any], size: tuple[int, int]) -> Act:
    kind = a["action"]
    if kind in ("click", "long_press"):
        return Act(kind, p=_frac(a["coordinate"], size))
    if kind == "swipe":
        p = _frac(a["coordinate"], size)
        if "coordinate2" in a:
            p2 = _frac(a["coordinate2"], size)
            return Act(kind, p=p, p2=p2, direction=finger_direction(p, p2))
        d = a["direction"]
        return Act(kind, p=p, p2=None, direction=d)
    if kind in ("type", "open", "answer"):
        return Act(kind, text=str(a.get("text", "")))
    if kind == "system_button":
        return Act(kind, button=str(a["button"]))
    return Act(kind)


def to_gt(g: GroundTruth, size: tuple[int, int]) -> GT:
    act = to_act(g.action, size)
    c = g.check
    cp = c.get("coordinate")
    point = _frac(cp, size) if isinstance(cp, (list, tuple)) and len(cp) == 2 else act.p
    boxes = []
    for b in c.get("candidate_bbox") or []:
        if isinstance(b, (list, tuple)) and len(b) == 4:
            boxes.append((b[0] / size[0], b[1] / size[1], b[2] / size[0], b[3] / size[1]))
    text = c.get("text") if isinstance(c.get("text"), str) else act.text
    button = c.get("button") if isinstance(c.get("button"), str) else act.button
    return GT(act, point, boxes, text, button)


def _dist(a: tuple[float, float], b: tuple[float, float]) -> float:
    return math.hypot(a[0] - b[0], a[1] - b[1])


def _inside(p: tuple[float, float], box: tuple[float, float, float, float]) -> bool:
    return box[0] <= p[0] <= box[2] and box[1] <= p[1] <= box[3]


# --------------------------------------------------------------------------- profiles
# Each returns (type_ok, action_ok) for one prediction against one ground-truth option.


def match_androidcontrol(pred: Act, gt: GT) -> tuple[bool, bool]:
    """UI-S1 ``evaluate_android_control_action`` (qwenvl_utils.py), rule for rule."""
    g = gt.act.kind

    def check_click(p: tuple[float, float], point: tuple[float, float] | None) -> bool:
        for x1, y1, x2, y2 in gt.boxes:  # enlarge_bbox: width and height x1.2 about the centre
            cx, cy, hw, hh = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) * UIS1_BBOX_ENLARGE / 2, (y2 - y1) * UIS1_BBOX_ENLARGE / 2
            if cx - hw <= p[0] <= cx + hw and cy - hh <= p[1] <= cy + hh:
                return True
        return point is not None and _dist(p, point) <= UIS1_POINT_DISTANCE

    def check_text(p: str | None, t: str | None) -> bool:  # lower-case containment either way
        a, b = (p or "").lower().strip(), (t or "").lower().strip()
        return a in b or b in a

    if g == "wait":
        ok = pred.kind == "wait"
        return ok, ok
    if g == "system_button":
        if pred.kind != "system_button":
            return False, False
        return True, (pred.button or "").lower().strip() == (gt.check_button or "").lower().strip()
    if g == "type":
        return (True, check_text(pred.text, gt.check_text)) if pred.kind == "type" else (False, False)
    if g == "open":
        if pred.kind == "open":
            return True, check_text(pred.text, gt.check_text)
        if pred.kind == "click":
            if gt.boxes:  # the app icon is on screen: clicking it counts; gt point = centre of the first box
                b = gt.boxes[0]
                return True, check_click(pred.p, ((b[0] + b[2]) / 2, (b[1] + b[3]) / 2))  # type: ignore[arg-type]
            return False, False
        return False, False
    if g == "swipe":  # UI-S1 accepts any swipe (its direction check is commented out)
        ok = pred.kind == "swipe"
        return ok, ok
    if g in ("click", "long_press"):
        if pred.kind != g:
            return False, False
        return True, check_click(pred.p, gt.check_point)  # type: ignore[arg-type]
    raise StaticEvalError(f"androidcontrol profile: unknown ground-truth action {g!r}")


_AITW_KEYS = {"back": "PRESS_BACK", "home": "PRESS_HOME", "enter": "PRESS_ENTER"}


def _aitw_type(a: Act) -> str:
    if a.kind in ("click", "long_press", "swipe"):
        return "DUAL_POINT"
    if a.kind == "type":
        return "TYPE"
    if a.kind == "system_button":
        b = (a.button or "").lower().strip()
        return _AITW_KEYS.get(b, "KEY_" + b)
    if a.kind == "finish":
        return "STATUS_TASK_COMPLETE"
    return a.kind.upper()  # open, wait, answer: not in AITW's space; compared by type only


def _aitw_gesture(a: Act) -> tuple[tuple[float, float], tuple[float, float]]:
    touch = a.p or (0.0, 0.0)
    if a.kind != "swipe":
        return touch, touch  # a click or long press is a dual-point gesture with touch == lift
    if a.p2 is not None:
        return touch, a.p2
    dx, dy = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}[a.direction or "up"]
    return touch, (touch[0] + dx * _DIRECTION_STEP, touch[1] + dy * _DIRECTION_STEP)


def match_aitw(pred: Act, gt: GT) -> tuple[bool, bool]:
    """AITW ``check_actions_match`` (action_matching.py): non-gesture actions match on type alone;
    gestures are taps when touch and lift are within 0.04; taps match inside the same annotation box
    grown by 1.4x (our boxes: ``candidate_bbox``) or within 0.14; swipes match on the main axis."""
    tp, tg = _aitw_type(pred), _aitw_type(gt.act)
    if tp != "DUAL_POINT" or tg != "DUAL_POINT":
        ok = tp == tg
        return ok, ok
    (pt, pl), (gtt, gl) = _aitw_gesture(pred), _aitw_gesture(gt.act)
    p_tap, g_tap = _dist(pt, pl) <= AITW_SWIPE_DISTANCE, _dist(gtt, gl) <= AITW_SWIPE_DISTANCE
    if p_tap != g_tap:
        return False, False  # a tap against a swipe: different types
    if p_tap:
        for x1, y1, x2, y2 in gt.boxes:
            # _resize_annotation_bounding_boxes in (top, left, height, width) form, clamped as there
            h, w = y2 - y1, x2 - x1
            top, left = max(0.0, y1 - AITW_BOX_AUGMENT * h / 2), max(0.0, x1 - AITW_BOX_AUGMENT * w / 2)
            hh, ww = min(1.0, h + AITW_BOX_AUGMENT * h), min(1.0, w + AITW_BOX_AUGMENT * w)
            box = (left, top, left + ww, top + hh)
            if _inside(pt, box) and _inside(gtt, box):
                return True, True
        return True, _dist(pt, gtt) <= AITW_TAP_DISTANCE
    # main axis = argmax of |delta| in (y, x) order: ties go to y, as numpy's argmax does
    pa = 0 if abs(pl[1] - pt[1]) >= abs(pl[0] - pt[0]) else 1
    ga = 0 if abs(gl[1] - gtt[1]) >= abs(gl[0] - gtt[0]) else 1
    return True, pa == ga


_ODYSSEY_KEYS = {"back": "PRESS_BACK", "home": "PRESS_HOME", "recent": "PRESS_RECENT", "recents": "PRESS_RECENT"}
_ODYSSEY_TYPES = {"click": "CLICK", "long_press": "LONG_PRESS", "swipe": "SCROLL", "type": "TYPE",
                  "finish": "COMPLETE", "open": "OPEN_APP", "wait": "WAIT", "answer": "ANSWER"}


def _odyssey_type(a: Act) -> str:
    if a.kind == "system_button":
        b = (a.button or "").lower().strip()
        return _ODYSSEY_KEYS.get(b, "PRESS_" + b.upper())
    return _ODYSSEY_TYPES.get(a.kind, a.kind.upper())


def odyssey_text_match(gt: str, pred: str) -> bool:
    """GUI-Odyssey ``text_matching``: stripped (case kept), containment either way, else
    ``1 - levenshtein / max(len)`` >= 0.5."""
    g, p = gt.strip(), pred.strip()
    if g in p or p in g:
        return True
    longest = max(len(g), len(p))
    value = 0.0 if longest == 0 else levenshtein(g, p) / longest
    return 1 - value >= ODYSSEY_TEXT_SIMILARITY


def match_guiodyssey(pred: Act, gt: GT) -> tuple[bool, bool]:
    """GUI-Odyssey ``action_matching``: the type must be equal; then TYPE by ``text_matching``,
    SCROLL by direction, CLICK/LONG_PRESS inside the target box (``candidate_bbox``, not enlarged)
    or within 0.14 of the ground-truth point; every other type matches on type alone."""
    tp, tg = _odyssey_type(pred), _odyssey_type(gt.act)
    if tp != tg:
        return False, False
    if tg == "TYPE":
        return True, odyssey_text_match(gt.check_text or "", pred.text or "")
    if tg == "SCROLL":
        return True, (pred.direction or "") == (gt.act.direction or "")
    if tg in ("CLICK", "LONG_PRESS"):
        if any(_inside(pred.p, b) for b in gt.boxes):  # type: ignore[arg-type]
            return True, True
        return True, gt.check_point is not None and _dist(pred.p, gt.check_point) <= ODYSSEY_CLICK_DISTANCE  # type: ignore[arg-type]
    return True, True


def match_androidlens(pred: Act, gt: GT) -> tuple[bool, bool]:
    """AndroidLens AMS (seed 002, 4.1): same type and right attributes. Click/long press: inside the
    target element (``candidate_bbox``), or within 0.14 of the point when no box is given. Swipe:
    start and end each within 0.14, or the finger direction when only a start is predicted. Text
    (type, open): ANLS > 0 (normalised Levenshtein distance below 0.5). Buttons by name."""
    g = gt.act.kind
    if pred.kind != g:
        return False, False
    if g in ("click", "long_press"):
        if gt.boxes:
            return True, any(_inside(pred.p, b) for b in gt.boxes)  # type: ignore[arg-type]
        return True, gt.check_point is not None and _dist(pred.p, gt.check_point) <= LENS_POINT_DISTANCE  # type: ignore[arg-type]
    if g == "swipe":
        if pred.p2 is None or gt.act.p2 is None:
            return True, pred.direction == gt.act.direction
        return True, (_dist(pred.p, gt.act.p) <= LENS_POINT_DISTANCE  # type: ignore[arg-type]
                      and _dist(pred.p2, gt.act.p2) <= LENS_POINT_DISTANCE)
    if g in ("type", "open"):
        return True, anls(pred.text or "", gt.check_text or "") > 0.0
    if g == "system_button":
        return True, (pred.button or "").lower().strip() == (gt.check_button or "").lower().strip()
    return True, True  # wait


MATCHERS: dict[str, Callable[[Act, GT], tuple[bool, bool]]] = {
    "aitw": match_aitw, "androidcontrol": match_androidcontrol,
    "guiodyssey": match_guiodyssey, "androidlens": match_androidlens,
}


# --------------------------------------------------------------------------- predictions


@dataclass
class Prediction:
    action: dict[str, Any] | None        # AndroidControl shape; None = invalid output
    invalid: str | None = None


def load_predictions(path: str | Path, episodes: list[StaticEpisode]) -> dict[tuple[int, int], Prediction]:
    """Read ``{"episode": i, "step": j, "action": {...}}`` lines (0-based indexes into the dataset;
    ``episode_id`` may stand for ``episode``). An action that is not a valid action is kept as an
    invalid prediction (a format error), not refused; a defect of the file itself is an error."""
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
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < n:
            raise DatasetError(f"{p}:{lineno}: step: episode {ep} has steps 0..{n - 1}, got {step!r}")
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
    """The dataset's own actions as predictions (a sanity check: every profile must give AMS 100)."""
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


def score(episodes: list[StaticEpisode], predictions: dict[tuple[int, int], Prediction], profile: str, *,
          screen: tuple[int, int] = DEFAULT_SCREEN, base: Path | None = None) -> StaticReport:
    """Score ``predictions`` against ``episodes`` under ``profile``; a step without a prediction is wrong."""
    if profile not in MATCHERS:
        raise StaticEvalError(f"unknown profile {profile!r} (expected one of {', '.join(PROFILES)})")
    match = MATCHERS[profile]
    sizes: dict[str, tuple[int, int] | None] = {}
    scores: list[StepScore] = []
    missing = 0
    for ep in episodes:
        for j, step in enumerate(ep.steps):
            size = screen_size_of(ep, j, screen, base, sizes)
            gts = [to_gt(o, size) for o in step.options]
            pred = predictions.get((ep.index, j))
            gt_type = gts[0].act.kind
            if pred is None or pred.action is None:
                missing += pred is None
                scores.append(StepScore(ep.index, j, gt_type, None, False, False, False))
                continue
            try:
                act = to_act(pred.action, size)
            except (KeyError, TypeError, ValueError, IndexError):
                scores.append(StepScore(ep.index, j, gt_type, None, False, False, False))
                continue
            type_ok = ok = False
            sim: float | None = None
            for g in gts:
                t, a = match(act, g)
                type_ok, ok = type_ok or t, ok or a
                if g.act.kind in ("type", "open") and act.kind == g.act.kind:
                    s = anls(act.text or "", g.check_text or "")
                    sim = s if sim is None else max(sim, s)
            scores.append(StepScore(ep.index, j, gt_type, act.kind, True, type_ok, ok, sim))
    report = StaticReport(profile, scores, len(episodes), missing)
    report.summary = summarise(scores, episodes, missing)
    return report


def _pct(num: float, den: float) -> float | None:
    return round(100.0 * num / den, 2) if den else None


def summarise(scores: list[StepScore], episodes: list[StaticEpisode], missing: int = 0) -> dict[str, Any]:
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
    return {
        "episodes": n_eps,
        "steps": n_steps,
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
        "by_type": {k: {"steps": v["steps"], "type_match": _pct(v["type_ok"], v["steps"]), "ams": _pct(v["ok"], v["steps"])}
                    for k, v in sorted(by_type.items())},
    }


def score_files(dataset: str | Path, predictions: str | Path | None, profiles: Iterable[str], *,
                screen: tuple[int, int] = DEFAULT_SCREEN, limit: int | None = None) -> list[StaticReport]:
    """Load a dataset and predictions (None: the ground truth itself) and score every profile
    (only the first ``limit`` episodes when given)."""
    episodes = load_dataset(dataset)
    if limit is not None:
        episodes = episodes[:limit]
    preds = ground_truth_predictions(episodes) if predictions is None else load_predictions(predictions, episodes)
    base = Path(dataset).resolve().parent
    return [score(episodes, preds, p, screen=screen, base=base) for p in profiles]


def format_reports(reports: list[StaticReport]) -> str:
    """A readable summary: one table row per profile, then the per-type breakdown."""
    head = ["profile", "episodes", "steps", "type", "AMS", "SR", "progress", "Acc", "TaskSucc", "TailSucc",
            "AvgErr", "Err/step", "ANLS", "format err", "missing"]

    def f(v: Any) -> str:
        if v is None:
            return "-"
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    rows = []
    for r in reports:
        s, m = r.summary, r.summary["mobile_r1"]
        rows.append([r.profile, s["episodes"], s["steps"], s["type_match"], s["ams"], s["sr"], s["progress"], m["acc"],
                     m["task_succ"], m["tail_succ"], m["avg_err"], m["err_per_step"], s["text_anls"],
                     s["format_errors"], s["missing"]])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(f(v) for v in row) + " |" for row in rows]
    if reports:
        lines.append("")
        types = sorted({t for r in reports for t in r.summary["by_type"]})
        lines.append("| action (steps) | " + " | ".join(f"{r.profile} type / AMS" for r in reports) + " |")
        lines.append("|" + "---|" * (len(reports) + 1))
        for t in types:
            n = reports[0].summary["by_type"].get(t, {}).get("steps", 0)
            cells = []
            for r in reports:
                d = r.summary["by_type"].get(t)
                cells.append(f"{f(d['type_match'])} / {f(d['ams'])}" if d else "-")
            lines.append(f"| {t} ({n}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)
