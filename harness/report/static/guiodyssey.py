"""GUI-Odyssey's action matcher, applied to AndroidControl steps.

Source: OpenGVLab/GUI-Odyssey @ fefcbe9d76e2f010c68225ae7f378c4c550a89c1,
``src/eval_mm/GUIOdyssey_action_matching.py`` (``action_matching``, ``click_matching``,
``text_matching``), ``src/eval_mm/evaluate_GUIOdyssey.py`` (``simple_decode``, ``check_SR``) and
``data/format_converter.py`` (``decode_action``: how an action becomes its ``ACTION: info`` string).

GUI-Odyssey's points and its one SAM2 box per step are on the 0-1000 integer grid its data and
models use; pixel points are put on it by :func:`~.common.on_grid`. AndroidControl gives several
candidate boxes: a click is right when it is right with any one of them as the step's box.
"""

from __future__ import annotations

from .common import GT, Act, dist, levenshtein, on_grid

SOURCE = "OpenGVLab/GUI-Odyssey @ fefcbe9, src/eval_mm/GUIOdyssey_action_matching.py (action_matching)"
CLICK_DISTANCE = 0.14     # CLICK_COORD_THRESHOLD (on the 0-1000 grid / 1000)
TEXT_SIMILARITY = 0.5     # TEXT_ANLS_THRESHOLD: 1 - Levenshtein / max length >= 0.5

_KEYS = {"back": "PRESS_BACK", "home": "PRESS_HOME", "recent": "PRESS_RECENT", "recents": "PRESS_RECENT"}
_TYPES = {"click": "CLICK", "long_press": "LONG_PRESS", "swipe": "SCROLL", "type": "TYPE", "finish": "COMPLETE",
          "open": "OPEN_APP", "wait": "WAIT", "answer": "ANSWER"}


def odyssey_type(a: Act) -> str:
    if a.kind == "system_button":
        b = (a.button or "").lower().strip()
        return _KEYS.get(b, "PRESS_" + b.upper())
    return _TYPES.get(a.kind, a.kind.upper())


def text_match(gt: str, pred: str) -> bool:
    """``text_matching``: stripped (case kept), containment either way, else
    ``1 - levenshtein / max(len)`` >= 0.5."""
    g, p = gt.strip(), pred.strip()
    if g in p or p in g:
        return True
    longest = max(len(g), len(p))
    value = 0.0 if longest == 0 else float(levenshtein(g, p)) / float(longest)
    return 1 - value >= TEXT_SIMILARITY


def decoded_text(text: str) -> str:
    """The text ``simple_decode`` reads back from ``TYPE: text``: up to the text's first colon, stripped."""
    return text.split(":")[0].strip()


def _grid_point(p: list | tuple, size: tuple[int, int]) -> tuple[int, int]:
    return on_grid(p[0], size[0]), on_grid(p[1], size[1])


def scroll_word(start: tuple[int, int], end: tuple[int, int]) -> str:
    """``decode_action``'s SCROLL word of a finger path on the grid: the larger of |dx| and |dy|
    (ties vertical); a path of length 0 reads DOWN."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    if abs(dx) > abs(dy):
        return "LEFT" if dx < 0 else "RIGHT"
    return "UP" if dy < 0 else "DOWN"


def _scroll(a: Act) -> str:
    if "coordinate2" in a.raw:
        return scroll_word(_grid_point(a.raw["coordinate"], a.size), _grid_point(a.raw["coordinate2"], a.size))
    return (a.direction or "").upper()


def match_guiodyssey(pred: Act, gt: GT) -> tuple[bool, bool]:
    """``action_matching``: the type must be equal; then TYPE by ``text_matching`` on the decoded
    texts, SCROLL by direction, CLICK/LONG_PRESS inside the box (not enlarged) or within 0.14 of
    the ground-truth point on the grid; every other type matches on type alone."""
    tp, tg = odyssey_type(pred), odyssey_type(gt.act)
    if tp != tg:
        return False, False
    if tg == "TYPE":
        return True, text_match(decoded_text(gt.check_text or ""), decoded_text(pred.text or ""))
    if tg == "SCROLL":
        return True, _scroll(pred).lower() == _scroll(gt.act).lower()
    if tg in ("CLICK", "LONG_PRESS"):
        size = gt.act.size
        px, py = _grid_point(pred.raw["coordinate"], size)
        for x1, y1, x2, y2 in gt.pixel_boxes:
            if on_grid(x1, size[0]) <= px <= on_grid(x2, size[0]) and on_grid(y1, size[1]) <= py <= on_grid(y2, size[1]):
                return True, True
        g = gt.check.get("coordinate") or gt.act.raw.get("coordinate")
        gx, gy = _grid_point(g, size)
        return True, dist((px / 1000, py / 1000), (gx / 1000, gy / 1000)) <= CLICK_DISTANCE
    return True, True


KNOWN_FOR = ("0-1000 grid; click inside the box (not enlarged) or within 0.14; scroll by direction; text by "
             "containment (case kept) or 1 - Levenshtein/length >= 0.5, cut at its first colon; app names never checked")
