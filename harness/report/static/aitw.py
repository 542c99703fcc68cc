"""AITW's action matcher (Android in the Wild), applied to AndroidControl steps.

Source: google-research/google-research, ``android_in_the_wild/action_matching.py``
(``check_actions_match``; read at commit 1d49f2c0d5506a6e11115726164d42f6b7b7b95a) and
``android_in_the_wild/action_type.py`` (4c42994). The published function runs in JAX, whose
default is 32-bit floats; see :func:`f32` for how this profile follows it.

Click, long press and swipe are one *dual-point* type (a press records touch and lift only); a
gesture is a tap when touch and lift are within 0.04; two taps match when both lie in the same
annotation box grown by 1.4 times its height and width (to 2.4x; clamped as the source does:
top/left at 0, height/width at 1) or within 0.14; two swipes match on the same main axis. Every other action matches on type alone.
Our annotation boxes are the step's ``candidate_bbox`` as AITW writes boxes: ``(y1 / H, x1 / W,
(y2 - y1) / H, (x2 - x1) / W)``.
"""

from __future__ import annotations

import math
import struct

from .common import GT, Act

SOURCE = "google-research/google-research @ 1d49f2c, android_in_the_wild/action_matching.py (check_actions_match)"
TAP_DISTANCE = 0.14         # _TAP_DISTANCE_THRESHOLD: taps match within 14% of the screen
BOX_AUGMENT = 1.4           # ANNOTATION_{WIDTH,HEIGHT}_AUGMENT_FRACTION: grows by 1.4x its size (to 2.4x)
SWIPE_DISTANCE = 0.04       # _SWIPE_DISTANCE_THRESHOLD: touch-lift distance below which it is a tap
# a swipe predicted only as a start point and a direction gets an end 0.2 screens away (only its
# main axis is compared)
DIRECTION_STEP = 0.2

_pack = struct.Struct("f")


def f32(x: float) -> float:
    """``x`` rounded to a 32-bit float (JAX's default precision). One operation done in 64 bits on
    32-bit inputs and rounded once gives the 32-bit result exactly (+, -, *, /, sqrt)."""
    return _pack.unpack(_pack.pack(x))[0]


_KEYS = {"back": "PRESS_BACK", "home": "PRESS_HOME", "enter": "PRESS_ENTER"}


def aitw_type(a: Act) -> str:
    if a.kind in ("click", "long_press", "swipe"):
        return "DUAL_POINT"
    if a.kind == "type":
        return "TYPE"
    if a.kind == "system_button":
        b = (a.button or "").lower().strip()
        return _KEYS.get(b, "KEY_" + b)
    if a.kind == "finish":
        return "STATUS_TASK_COMPLETE"
    return a.kind.upper()  # open, wait, answer, double tap: not in AITW's space; compared by type only


def gesture(a: Act) -> tuple[tuple[float, float], tuple[float, float]]:
    """(touch, lift) as (y, x) 32-bit fractions."""
    touch = a.p or (0.0, 0.0)
    if a.kind != "swipe":
        lift = touch  # a click or long press is a dual-point gesture with touch == lift
    elif a.p2 is not None:
        lift = a.p2
    else:
        dx, dy = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}[a.direction or "up"]
        lift = (touch[0] + dx * DIRECTION_STEP, touch[1] + dy * DIRECTION_STEP)
    return (f32(touch[1]), f32(touch[0])), (f32(lift[1]), f32(lift[0]))


def _norm(a: tuple[float, float], b: tuple[float, float]) -> float:
    dy, dx = f32(a[0] - b[0]), f32(a[1] - b[1])
    return f32(math.sqrt(f32(f32(dy * dy) + f32(dx * dx))))


def _grown(box: tuple[float, float, float, float], size: tuple[int, int]) -> tuple[float, float, float, float]:
    """``_resize_annotation_bounding_boxes`` of one pixel box, as (top, left, bottom, right)."""
    x1, y1, x2, y2 = box
    w, h = size
    top, left, height, width = f32(y1 / h), f32(x1 / w), f32((y2 - y1) / h), f32((x2 - x1) / w)
    dh, dw = f32(f32(BOX_AUGMENT) * height), f32(f32(BOX_AUGMENT) * width)
    top, left = max(0.0, f32(top - f32(dh / 2))), max(0.0, f32(left - f32(dw / 2)))
    height, width = min(1.0, f32(height + dh)), min(1.0, f32(width + dw))
    return top, left, f32(top + height), f32(left + width)


def _in(yx: tuple[float, float], box: tuple[float, float, float, float]) -> bool:
    return box[0] <= yx[0] <= box[2] and box[1] <= yx[1] <= box[3]


def match_aitw(pred: Act, gt: GT) -> tuple[bool, bool]:
    """``check_actions_match`` in 32-bit arithmetic."""
    tp, tg = aitw_type(pred), aitw_type(gt.act)
    if tp != "DUAL_POINT" or tg != "DUAL_POINT":
        ok = tp == tg
        return ok, ok
    (pt, pl), (gtt, gl) = gesture(pred), gesture(gt.act)
    p_tap, g_tap = _norm(pt, pl) <= f32(SWIPE_DISTANCE), _norm(gtt, gl) <= f32(SWIPE_DISTANCE)
    if p_tap != g_tap:
        return False, False  # a tap against a swipe: different types
    if p_tap:
        for b in gt.pixel_boxes:
            box = _grown(b, gt.act.size)
            if _in(pt, box) and _in(gtt, box):
                return True, True
        return True, _norm(pt, gtt) <= f32(TAP_DISTANCE)
    # main axis = argmax of |delta| in (y, x) order: ties go to y, as numpy's argmax does
    pa = 0 if abs(f32(pl[0] - pt[0])) >= abs(f32(pl[1] - pt[1])) else 1
    ga = 0 if abs(f32(gl[0] - gtt[0])) >= abs(f32(gl[1] - gtt[1])) else 1
    return True, pa == ga


KNOWN_FOR = ("click, long press and swipe are one dual-point type; taps match in the same box grown by 1.4x (to 2.4x) or "
             "within 0.14; swipes on the main axis only; typed text and app names never checked")
