"""What every static scorer shares: the normalised actions a profile reads, the profile record, the
geometry and text helpers, and the grids some scorers read points on.

A profile receives one prediction and one ground-truth option (:class:`Act`, :class:`GT`): points
as fractions of the screen for the scorers that normalise that way, and the raw pixel dictionaries
and the screen size for those that read pixels or a grid of their own. Distances are computed as
``sqrt(dx*dx + dy*dy)``, the value ``numpy.linalg.norm`` gives for two numbers (``math.hypot``
differs from it in the last bit about one time in six, which flips points lying exactly on a
threshold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.importers.androidcontrol import GroundTruth, finger_direction


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


def norm_text(s: str) -> str:
    return " ".join(s.lower().split())


ANLS_TAU = 0.5


def anls(pred: str, gt: str, tau: float = ANLS_TAU) -> float:
    """ST-VQA's normalised Levenshtein similarity: ``1 - NL`` when ``NL < tau``, else 0 (on
    lower-cased, whitespace-collapsed text)."""
    p, g = norm_text(pred), norm_text(gt)
    longest = max(len(p), len(g))
    if longest == 0:
        return 1.0
    nl = levenshtein(p, g) / longest
    return 1.0 - nl if nl < tau else 0.0


def contains_either_way(pred: str | None, gt: str | None) -> bool:
    """Lower-cased, stripped, one text inside the other (Qwen2.5-VL's AndroidControl rule, which
    UI-S1, InfiGUI-R1 and AgentCPM-GUI all keep)."""
    a, b = (pred or "").lower().strip(), (gt or "").lower().strip()
    return a in b or b in a


# --------------------------------------------------------------------------- normalised actions

Point = tuple[float, float]
Box = tuple[float, float, float, float]


@dataclass(slots=True)
class Act:
    """An AndroidControl action with points as screen fractions (``raw``: the pixel dictionary)."""

    kind: str
    p: Point | None = None
    p2: Point | None = None            # swipe end (None: direction-only prediction)
    direction: str | None = None       # finger direction of a swipe
    text: str | None = None
    button: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    size: tuple[int, int] = (1080, 2400)


@dataclass(slots=True)
class GT:
    act: Act
    check_point: Point | None          # check_options.coordinate (else the action's)
    boxes: list[Box]                   # candidate_bbox as fractions x1, y1, x2, y2
    check_text: str | None
    check_button: str | None
    check: dict[str, Any] = field(default_factory=dict)        # check_options as written (pixels)
    pixel_boxes: list[tuple[float, float, float, float]] = field(default_factory=list)


def _frac(p: Any, size: tuple[int, int]) -> Point:
    return float(p[0]) / size[0], float(p[1]) / size[1]


def to_act(a: dict[str, Any], size: tuple[int, int]) -> Act:
    kind = a["action"]
    if kind in ("click", "long_press", "double_tap"):
        return Act(kind, p=_frac(a["coordinate"], size), raw=a, size=size)
    if kind == "swipe":
        p = _frac(a["coordinate"], size)
        if "coordinate2" in a:
            p2 = _frac(a["coordinate2"], size)
            return Act(kind, p=p, p2=p2, direction=finger_direction(p, p2), raw=a, size=size)
        return Act(kind, p=p, p2=None, direction=a["direction"], raw=a, size=size)
    if kind in ("type", "open", "answer"):
        return Act(kind, text=str(a.get("text", "")), raw=a, size=size)
    if kind == "system_button":
        return Act(kind, button=str(a["button"]), raw=a, size=size)
    return Act(kind, raw=a, size=size)


def to_gt(g: GroundTruth, size: tuple[int, int]) -> GT:
    act = to_act(g.action, size)
    c = g.check
    cp = c.get("coordinate")
    point = _frac(cp, size) if isinstance(cp, (list, tuple)) and len(cp) == 2 else act.p
    boxes, pixel_boxes = [], []
    for b in c.get("candidate_bbox") or []:
        if isinstance(b, (list, tuple)) and len(b) == 4:
            pixel_boxes.append((b[0], b[1], b[2], b[3]))
            boxes.append((b[0] / size[0], b[1] / size[1], b[2] / size[0], b[3] / size[1]))
    text = c.get("text") if isinstance(c.get("text"), str) else act.text
    button = c.get("button") if isinstance(c.get("button"), str) else act.button
    return GT(act, point, boxes, text, button, c, pixel_boxes)


FINISH = GroundTruth({"action": "finish"}, {})


# --------------------------------------------------------------------------- geometry


def dist(a: Point, b: Point) -> float:
    """Euclidean distance as ``numpy.linalg.norm`` computes it for two numbers."""
    dx, dy = a[0] - b[0], a[1] - b[1]
    return math.sqrt(dx * dx + dy * dy)


def inside(p: Point, box: Box) -> bool:
    return box[0] <= p[0] <= box[2] and box[1] <= p[1] <= box[3]


def enlarge_about_centre(box: Box, factor: float) -> Box:
    """Width and height scaled by ``factor`` about the centre, not clamped (Qwen2.5-VL's
    ``enlarge_bbox``, kept by UI-S1 and InfiGUI-R1), in the same order of operations."""
    x1, y1, x2, y2 = box
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    w, h = (x2 - x1) * factor, (y2 - y1) * factor
    return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2


def on_grid(v: float, size: float, scale: int = 1000) -> int:
    """A pixel coordinate on a 0-``scale`` integer grid (the 0-1000 grid GUI-Odyssey, AgentCPM-GUI
    and OS-Atlas models answer on): ``round(v / size * scale)``, Python's rounding (half to even).
    A model answers on the grid itself; this only applies to points given in pixels."""
    return round(v / size * scale)


def box_area_fraction(box: tuple[float, float, float, float], size: tuple[int, int]) -> float:
    """The area of a pixel box ``[x1, y1, x2, y2]`` as a fraction of the screen's, the box as given
    (AndroidControl's boxes may pass the screen's edge by a few pixels)."""
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1]) / (size[0] * size[1])


# --------------------------------------------------------------------------- profiles

Matcher = Callable[[Act, GT], "tuple[bool, bool]"]  # (a profile that reads_unparsed also gets None)


def _never(_: GT) -> str | None:
    return None


@dataclass(frozen=True)
class Profile:
    """One published scorer: how it matches a prediction (``match`` returns type-right and
    action-right), which ground-truth steps it scores (``skip`` gives the reason a step is not
    scored, or None), whether it adds a finish step to every episode, whether an unreadable answer
    zeroes its episode's progress, where it comes from and the
    rules that set it apart (``known_for``, one line for the cross-scorer table)."""

    name: str
    match: Matcher
    source: str
    known_for: str
    skip: Callable[[GT], str | None] = _never
    finish_step: bool = False
    reproduces: str = ""
    error_resets_progress: bool = False   # an unreadable answer zeroes the episode's progress
    reads_unparsed: bool = False          # ``match`` judges an unreadable answer itself (it gets None)
    totals: Callable[[list[Any]], dict[str, Any]] | None = None  # the scorer's own totals, added to the summary
