"""InfiGUI-R1's AndroidControl scorer.

Source: Reallm-Labs/InfiGUI-R1 @ d280ab8786cb3b063ae5cc62dc5fa91c4ceb348e,
``eval/android_control/evaluate_android_control.py`` (``evaluate_android_control_action``,
``check_click``, ``predict_direction``) as ``eval/android_control/android_control.py``
(``compute_scores``) calls it: step accuracy over every step, a step whose prediction cannot be
read counting as wrong.

It is UI-S1's function (both adapt Qwen2.5-VL's evaluation) with two changes:

* the point rule is a disc in pixels of the image the model saw: within ``0.04 * max(width,
  height)`` (96 px on 1080x2400) instead of 0.04 of each axis (an ellipse, 43 x 96 px);
* a swipe must go the way ``check_options.direction`` says, read as the finger's direction. The
  dataset writes vertical swipes with the scroll word (``down`` = the finger moves up), so a
  vertical swipe along the ground truth's path is judged wrong and the opposite one right;
  horizontal words are the finger's, so those are judged as one expects.

Predictions are screen pixels here, so the image the model saw is the screen; a swipe given as a
start and a direction is read as that finger direction.
"""

from __future__ import annotations

import math

from .common import GT, Act, enlarge_about_centre, inside
from .uis1 import BBOX_ENLARGE, POINT_DISTANCE, qwen_rules

SOURCE = "Reallm-Labs/InfiGUI-R1 @ d280ab8, eval/android_control/evaluate_android_control.py"


def check_click_disc(p: tuple[float, float], boxes: list, point: tuple[float, float] | None,
                     size: tuple[int, int]) -> bool:
    if any(inside(p, enlarge_about_centre(b, BBOX_ENLARGE)) for b in boxes):
        return True
    if point is None:
        return False
    w, h = size
    dx, dy = (point[0] - p[0]) * w, (point[1] - p[1]) * h
    return math.sqrt(dx ** 2 + dy ** 2) <= POINT_DISTANCE * max(w, h)


def _finger_word(pred: Act, gt: GT) -> tuple[bool, bool]:
    if "direction" not in gt.check:
        return False, False  # the source raises on a missing word: counted neither right nor type-right
    return True, pred.direction == gt.check["direction"]


def match_infigui_r1(pred: Act, gt: GT) -> tuple[bool, bool]:
    def disc(p: tuple[float, float], boxes: list, point: tuple[float, float] | None) -> bool:
        return check_click_disc(p, boxes, point, pred.size)

    return qwen_rules(pred, gt, disc, _finger_word, "infigui-r1")


KNOWN_FOR = ("UI-S1's rules with a disc of 0.04 x the longer side (96 px) and the swipe's finger direction "
             "compared with the dataset's scroll word: every vertical swipe along the ground truth is wrong")
