"""UI-S1's AndroidControl scorer, as its function reads a step and as its pipeline runs it.

Source: X-PLUG/MobileAgent @ 11cea575561fb7800b5fb6b6cafa56f7a91de11f,
``UI-S1/evaluation/qwenvl_utils.py`` (``evaluate_android_control_action``, ``check_click``,
``enlarge_bbox``, ``check_text``; last changed in 3f55eab) and ``UI-S1/evaluation/eval_qwenvl.py``
(``fix_line``, ``process_line``; last changed in ade7315).

* ``androidcontrol``: the function on the dataset's ``check_options``.
* ``uis1-pipeline``: the function as ``eval_qwenvl.py`` calls it. Its ``fix_line`` rebuilds every
  step's ``check_options`` as a copy of ``action_content`` with ``candidate_bbox`` taken from a
  step-level ``bbox`` key, which the published file does not have: the boxes become an empty list.
  So a click is right only within 0.04 of the point, and clicking an app's icon never counts as
  opening it. The pipeline stops an episode at its first wrong step and prints the success rate
  and the average progress (steps right before the first wrong one, over the episode's length):
  our ``sr`` and ``progress``. ``process_line`` wraps the episode in one ``try``: an answer it cannot
  read raises (its parser lives in the unpublished ``x`` package; the function itself raises on an
  action without the keys it reads), and the episode is then recorded with ``final_step_id`` 0, so
  an unreadable answer at the first wrong step zeroes the episode's progress.
"""

from __future__ import annotations

from typing import Callable

from .common import GT, Act, StaticEvalError, contains_either_way, dist, enlarge_about_centre, inside

SOURCE = "X-PLUG/MobileAgent @ 11cea57, UI-S1/evaluation/qwenvl_utils.py (evaluate_android_control_action)"
PIPELINE_SOURCE = "X-PLUG/MobileAgent @ 11cea57, UI-S1/evaluation/eval_qwenvl.py (fix_line) + qwenvl_utils.py"
BBOX_ENLARGE = 1.2          # BBOX_ENLARGE_FACTOR: box width and height x1.2 about the centre
POINT_DISTANCE = 0.04       # POINT_DISTANCE_THRESHOLD, on screen fractions (an ellipse in pixels)


def check_click(p: tuple[float, float], boxes: list, point: tuple[float, float] | None) -> bool:
    """Inside a candidate box enlarged x1.2, else within 0.04 of ``point`` (fractions)."""
    if any(inside(p, enlarge_about_centre(b, BBOX_ENLARGE)) for b in boxes):
        return True
    return point is not None and dist(point, p) <= POINT_DISTANCE


ClickRule = Callable[[tuple[float, float], list, "tuple[float, float] | None"], bool]
SwipeRule = Callable[[Act, GT], "tuple[bool, bool]"]


def _any_swipe(pred: Act, gt: GT) -> tuple[bool, bool]:
    ok = pred.kind == "swipe"  # any swipe: the direction check is commented out in the source
    return ok, ok


def qwen_rules(pred: Act, gt: GT, click: ClickRule = check_click, swipe: SwipeRule = _any_swipe,
               name: str = "androidcontrol") -> tuple[bool, bool]:
    """``evaluate_android_control_action``'s structure (Qwen2.5-VL's AndroidControl evaluation, which
    UI-S1 and InfiGUI-R1 keep), with the point rule and the swipe rule as parameters."""
    g = gt.act.kind
    if g == "wait":
        ok = pred.kind == "wait"
        return ok, ok
    if g == "system_button":
        if pred.kind != "system_button":
            return False, False
        return True, (pred.button or "").lower().strip() == (gt.check_button or "").lower().strip()
    if g == "type":
        return (True, contains_either_way(pred.text, gt.check_text)) if pred.kind == "type" else (False, False)
    if g == "open":
        if pred.kind == "open":
            return True, contains_either_way(pred.text, gt.check_text)
        if pred.kind == "click" and gt.boxes:  # the icon is on screen: the point is the first box's centre
            b = gt.boxes[0]
            return True, click(pred.p, gt.boxes, ((b[0] + b[2]) / 2, (b[1] + b[3]) / 2))  # type: ignore[arg-type]
        return False, False
    if g == "swipe":
        return swipe(pred, gt) if pred.kind == "swipe" else (False, False)
    if g in ("click", "long_press"):
        if pred.kind != g:
            return False, False
        return True, click(pred.p, gt.boxes, gt.check_point)  # type: ignore[arg-type]
    raise StaticEvalError(f"{name} profile: unknown ground-truth action {g!r}")


def match_androidcontrol(pred: Act, gt: GT) -> tuple[bool, bool]:
    """``evaluate_android_control_action``, rule for rule (it normalises predictions by the size of
    the image the model saw; ours are screen pixels, so that size is the screen's)."""
    return qwen_rules(pred, gt)


def match_uis1_pipeline(pred: Act, gt: GT) -> tuple[bool, bool]:
    """The function on ``fix_line``'s options: the action itself, no boxes."""
    a = gt.act
    rebuilt = GT(a, a.p, [], a.text, a.button, dict(a.raw), [])
    return match_androidcontrol(pred, rebuilt)


KNOWN_FOR = ("click inside a candidate box x1.2 or within 0.04 of the point (an ellipse: 43 x 96 px on "
             "1080x2400); text by lower-case containment; any swipe direction; a click on the app icon opens it")
PIPELINE_KNOWN_FOR = ("UI-S1 as its eval_qwenvl.py runs: fix_line drops the candidate boxes, so a click must be "
                      "within 0.04 of the point and a click on the app icon never opens it; any swipe direction")
