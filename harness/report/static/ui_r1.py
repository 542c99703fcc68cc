"""UI-R1's AndroidControl scorer.

Source: lll6gg/UI-R1 @ 2fe9bf00c8aae85fcedaf56eb3e2780dbfe8075e: ``evaluation/eval_ac.py`` (the
whole script), its test file ``dataset/ac_test.json`` (7,868 steps: the test set without its wait
and long-press steps; ground truths ``{"action_type": "click", "x": .., "y": ..}``, ``scroll``
with AndroidControl's word, ``input_text``, ``open_app``, ``navigate_back``) and the answer format
of ``evaluation/test_androidcontrol.py`` (``{'action': 'click', 'coordinate': [x, y]}``, points in
pixels of the model's 644x1484 image of a 1080x2400 screen).

The script reads one line per step with two greedy regular expressions, ``"content": "{...}"``
(the ground truth) and ``"response": "{...}"`` (the answer), and finds each one's action by
substring: the last of ``open_app, click, scroll, input_text, navigate_back`` that occurs wins.
A step is right when the two actions agree and, for clicks, when the answer's point, scaled by
1080/644 and 2400/1484 and truncated to integers, lies within ``1080 * 0.14`` = 151.2 pixels
(strictly) of the ground truth's; a coordinate of 0 reads as no point. Text, app names and scroll
directions are never compared.

The file the script reads is not published, only its two patterns. Both are greedy (``.*``) and
end at a line's last ``}"``, so on any one-line layout the field written first runs on into the
other: we write the ground truth first, as the script reads them (:func:`line_of`), and the answer's
action word then counts as the ground truth's too (a ground truth reads as the later-listed, in the
order above, of its own word and the answer's; an open-app step answered by a click reads as a
click, its point as the answer's own). Written the other way round, the answer would take the
ground truth's word instead: the mirror quirk. Either is what the script computes on such a line.
"""

from __future__ import annotations

import json
import math
import re

from .common import GT, Act

SOURCE = "lll6gg/UI-R1 @ 2fe9bf0, evaluation/eval_ac.py + dataset/ac_test.json"
KEYWORDS = ("open_app", "click", "scroll", "input_text", "navigate_back")   # its ``correct`` dict's order
ERROR_PX = 1080 * 0.14            # error = 1080 * 0.14
IMAGE = (644, 1484)               # the model's image of a 1080x2400 screen (its scale_x, scale_y)
SCREEN = (1080, 2400)
_CONTENT = re.compile(r'"content":\s*"({.*})"')
_RESPONSE = re.compile(r'"response":\s*"({.*})"')
_DIGITS = re.compile(r"\d+")
_WORD = {"click": "click", "long_press": "long_press", "double_tap": "double_tap", "swipe": "scroll",
         "type": "input_text", "open": "open_app", "wait": "wait", "finish": "finish", "answer": "answer"}


def skip(gt: GT) -> str | None:
    a = gt.act
    if a.kind in ("wait", "long_press"):
        return f"{a.kind.replace('_', ' ')} step: not in UI-R1's test file (dataset/ac_test.json)"
    if a.kind == "system_button" and (a.button or "").lower().strip() != "back":
        return "button other than Back: not in UI-R1's test file"
    return None


def ground_truth_json(gt: GT) -> str:
    """The step as ``dataset/ac_test.json`` writes it."""
    a = gt.act
    if a.kind == "click":
        x, y = a.raw["coordinate"]
        d: dict = {"action_type": "click", "x": x, "y": y}
    elif a.kind == "swipe":
        d = {"action_type": "scroll", "direction": gt.check.get("direction")}
    elif a.kind == "type":
        d = {"action_type": "input_text", "text": a.text}
    elif a.kind == "open":
        d = {"action_type": "open_app", "app_name": a.text}
    else:
        d = {"action_type": "navigate_back"}
    return json.dumps(d, ensure_ascii=False)


def answer(pred: Act) -> str:
    """The prediction in UI-R1's answer format (a point on the 644x1484 image)."""
    if pred.kind == "system_button":
        word = "navigate_" + (pred.button or "").lower().strip()
    else:
        word = _WORD.get(pred.kind, pred.kind)
    if pred.kind in ("click", "long_press", "double_tap"):
        x, y = pred.raw["coordinate"]
        gx, gy = round(x / pred.size[0] * IMAGE[0]), round(y / pred.size[1] * IMAGE[1])
        return "{'action': '%s', 'coordinate': [%d, %d]}" % (word, gx, gy)
    return "{'action': '%s'}" % word


def line_of(gt: GT, pred: Act) -> str:
    """One step's line: the ground truth's content before the answer."""
    return json.dumps({"content": ground_truth_json(gt), "response": answer(pred)}, ensure_ascii=False)


def _last_keyword(s: str | None) -> str | None:
    found = None
    for k in KEYWORDS:
        if s and k in s:
            found = k
    return found


def match_ui_r1(pred: Act, gt: GT) -> tuple[bool, bool]:
    line = line_of(gt, pred)
    content = _CONTENT.search(line).group(1)  # type: ignore[union-attr]
    m = _RESPONSE.search(line)
    response = m.group(1) if m else None
    gtype, ptype = _last_keyword(content), _last_keyword(response)
    if gtype != ptype:
        return False, False
    if gtype != "click":
        return True, True
    gn, pn = _DIGITS.findall(content), _DIGITS.findall(response or "")
    if len(pn) <= 1:
        return True, False
    gx, gy = int(gn[0]), int(gn[1])
    px = int(SCREEN[0] / IMAGE[0] * int(pn[0])) if int(pn[0]) else None
    py = int(SCREEN[1] / IMAGE[1] * int(pn[1])) if int(pn[1]) else None
    return True, bool(px and py and math.sqrt((gx - px) ** 2 + (gy - py) ** 2) < ERROR_PX)


KNOWN_FOR = ("skips wait and long-press steps; type only except clicks (within 151.2 px of 1080x2400, no box); "
             "never checks text, app names or directions; an answer's action word also counts as the ground truth's")
