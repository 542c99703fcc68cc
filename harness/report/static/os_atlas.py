"""OS-Atlas's AndroidControl scorer.

Source: OS-Copilot/OS-Atlas @ bad08407ab54b5bf6c17a69fe1ced476b9494926,
``eval/eval_scripts/android_control/evaluation_unify.py`` (``evaluate``, ``calculate_f1_score``);
the action strings are those of its prompt and test files (``eval/data/ac_test.jsonl``:
``CLICK <point>[[x,y]]</point>``, ``LONG_PRESS <point>[[x,y]]</point>``, ``TYPE [text]``,
``SCROLL [UP|DOWN|LEFT|RIGHT]``, ``OPEN_APP [app]``, ``PRESS_BACK``, ``PRESS_HOME``, ``WAIT``,
``COMPLETE``), points on the 0-1000 grid.

The scorer compares strings:

* the type is the first word; CLICK and LONG_PRESS are right within 140 grid units (0.14 of the
  0-1000 grid, no box) of the point, the point read as the first two digit runs (so a minus sign
  is lost);
* TYPE and OPEN_APP are right when the whole strings are equal or their second words are (the text's
  first word with its opening bracket, case ignored: a one-word F1 above 0.5);
* every other action (SCROLL, PRESS_*, WAIT) must be the same string.

OS-Atlas's converted AndroidControl test set is not published (its 3 example lines hold no swipe):
a ground-truth swipe is written with the dataset's own word (``check_options.direction``) and a
predicted finger path with the word the dataset uses for that finger direction (vertical: the
scroll word, ``up`` = finger down; horizontal: the finger's word), so SCROLL is right when the
finger directions agree.
"""

from __future__ import annotations

import math
import re

from .common import GT, Act, on_grid

SOURCE = "OS-Copilot/OS-Atlas @ bad0840, eval/eval_scripts/android_control/evaluation_unify.py (evaluate)"
CLICK_DISTANCE = 0.14 * 1000   # "set 14 % of screen size as the ratio", on the 0-1000 grid
# the dataset's swipe word for each finger direction (all 1,211 swipes of the test set agree)
WORD_OF_FINGER = {"up": "DOWN", "down": "UP", "left": "LEFT", "right": "RIGHT"}
_BUTTONS = {"back": "PRESS_BACK", "home": "PRESS_HOME", "recent": "PRESS_RECENT", "app_switch": "PRESS_RECENT"}
_DIGITS = re.compile(r"\d+")
_IM_END = "<|im_end|>"   # the characters the scorer strips from both ends of a prediction


def _point(kind: str, a: Act) -> str:
    x, y = a.raw["coordinate"]
    return f"{kind} <point>[[{on_grid(x, a.size[0])},{on_grid(y, a.size[1])}]]</point>"


def action_string(a: Act, check: dict | None = None) -> str:
    """An action as OS-Atlas writes it (``check``: the ground truth's options, for its swipe word)."""
    if a.kind in ("click", "long_press", "double_tap"):
        return _point(a.kind.upper(), a)
    if a.kind == "swipe":
        word = (check or {}).get("direction")
        return f"SCROLL [{str(word).upper() if word else WORD_OF_FINGER.get(a.direction or '', '')}]"
    if a.kind == "type":
        return f"TYPE [{a.text}]"
    if a.kind == "open":
        return f"OPEN_APP [{a.text}]"
    if a.kind == "answer":
        return f"ANSWER [{a.text}]"
    if a.kind == "system_button":
        b = (a.button or "").lower().strip()
        return _BUTTONS.get(b, "PRESS_" + b.upper())
    if a.kind == "finish":
        return "COMPLETE"
    return a.kind.upper()  # WAIT


def first_word_f1(pred: str, gt: str) -> float:
    """``calculate_f1_score``: F1 of the lower-cased word sets."""
    p, g = set(pred.lower().split()), set(gt.lower().split())
    common = p & g
    precision = len(common) / len(p) if p else 0
    recall = len(common) / len(g) if g else 0
    return 0 if precision + recall == 0 else 2 * (precision * recall) / (precision + recall)


def _numbers(s: str) -> list[int]:
    return [int(n) for n in _DIGITS.findall(s)]


def match_os_atlas(pred: Act, gt: GT) -> tuple[bool, bool]:
    p = action_string(pred).split("actions:\n")[0].strip(_IM_END)
    g = action_string(gt.act, gt.check).split("actions:\n")[0]
    gtype, ptype = g.split()[0], p.split()[0]
    if gtype != ptype:
        return False, False
    if gtype in ("CLICK", "LONG_PRESS"):
        pn, gn = _numbers(p), _numbers(g)
        px, py = (pn[0], pn[1]) if len(pn) >= 2 else (-100, -100)
        return True, math.sqrt((px - gn[0]) ** 2 + (py - gn[1]) ** 2) <= CLICK_DISTANCE
    if gtype in ("OPEN_APP", "TYPE"):
        return True, g == p or first_word_f1(p.split()[1], g.split()[1]) > 0.5
    return True, g == p


KNOWN_FOR = ("no box rule: click within 0.14 of the point on the 0-1000 grid; text and app names match on "
             "their first word (or the whole string); everything else must be the same string")
