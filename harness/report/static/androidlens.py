"""AndroidLens's Action Matching Score, as its paper describes it (seed 002, section 4.1).

AndroidLens publishes no scorer code: this profile is our reading of the paper, not a reproduction
of a program. Text by ANLS (ST-VQA, Biten et al. 2019, threshold tau = 0.5); clicks by the UI
element; swipes by start and end point, or by direction when only a start is predicted. The paper
gives no point tolerance; it follows GUI-Odyssey and AITW, so we use their common 0.14 screen
fraction for points that have no element box and for swipe start/end.
"""

from __future__ import annotations

from .common import GT, Act, anls, dist, inside

SOURCE = "AndroidLens paper, section 4.1 (no public scorer code; our reading)"
POINT_DISTANCE = 0.14


def match_androidlens(pred: Act, gt: GT) -> tuple[bool, bool]:
    """Same type and right attributes. Click/long press: inside the target element
    (``candidate_bbox``), or within 0.14 of the point when no box is given. Swipe: start and end each
    within 0.14, or the finger direction when only a start is predicted. Text (type, open): ANLS > 0
    (normalised Levenshtein distance below 0.5). Buttons by name."""
    g = gt.act.kind
    if pred.kind != g:
        return False, False
    if g in ("click", "long_press"):
        if gt.boxes:
            return True, any(inside(pred.p, b) for b in gt.boxes)  # type: ignore[arg-type]
        return True, gt.check_point is not None and dist(pred.p, gt.check_point) <= POINT_DISTANCE  # type: ignore[arg-type]
    if g == "swipe":
        if pred.p2 is None or gt.act.p2 is None:
            return True, pred.direction == gt.act.direction
        return True, (dist(pred.p, gt.act.p) <= POINT_DISTANCE  # type: ignore[arg-type]
                      and dist(pred.p2, gt.act.p2) <= POINT_DISTANCE)
    if g in ("type", "open"):
        return True, anls(pred.text or "", gt.check_text or "") > 0.0
    if g == "system_button":
        return True, (pred.button or "").lower().strip() == (gt.check_button or "").lower().strip()
    return True, True  # wait


KNOWN_FOR = ("our reading of the AndroidLens paper (no public code): click inside the element box, swipe by start "
             "and end within 0.14, text by ANLS (normalised edit distance < 0.5)")
