"""GUI-R1's AndroidControl scorer.

Source: ritzz-ai/GUI-R1 @ d43eea2f1c52356077034ff2524642fc05e06c6a: ``guir1/eval/eval_omni.py`` (the
scorer: ``evaluate`` and ``calculate_f1_score``) and ``guir1/inference/inference_vllm_android.py`` (how a
model's answer becomes the record it scores: ``extract_action``, ``extract_coord``,
``extract_input_text``); the records' ground-truth fields as GUI-R1's AndroidControl test file holds
them, as the fork YangRui2015/GUI-R1 @ 131ae9a publishes them with its predictions
(``outputs/*/androidcontrol_*_pred.json``: ``gt_bbox`` the target point in screen pixels, ``image_size``
the model's resized image, 1092x2408 for 1080x2400, the typed text's first word, the scroll word
upper-cased).

A step's record: ``gt_action`` (click, long_press, scroll, type, open_app, wait, press_back;
navigate_home and press_<button> for other buttons), ``gt_bbox``, ``gt_input_text``, ``image_size``; the
prediction as the model's answer ``[{'action': ..., 'point': [x, y], 'input_text': ...}]`` read back by
the inference script's patterns: the action word, the last ``[x, y]`` of non-negative integers (else
``[0, 0]``: an answer without a point is read at the top-left corner) and the first single-quoted
``input_text`` (a text holding an apostrophe is cut there); an answer that does not parse has no
action, ``no input text`` and the point ``[0, 0]``.

Per step (``evaluate``'s loop): the type is right when the two action words are equal. The step
counts in "Step" only for a click or long-press ground truth (grounding: the predicted point within
0.14 of the screen of the target, ``((gx - px) / w)**2 + ((gy - py) / h)**2 < 0.14**2`` with ``w, h``
the model's image, whatever type was predicted) and for scroll, type and open-app ground truths
(text: ``calculate_f1_score(gt, pred) >= 0.5``, token F1 on lower-cased whitespace tokens with
brackets removed, or 1 when each side is one token and one contains the other); wait, Back, Home
and other buttons are not in "Step" (the profile skips them). The totals add per action type only
the types with at least one hit (``score_dict`` holds a type's key only once it is hit), in "Type"
and "Step" alike: :func:`totals` gives "Step" so (``gui_r1_step``), the report's step accuracy is
over every scored step.
"""

from __future__ import annotations

import re
from typing import Any

from .common import GT, Act

SOURCE = ("ritzz-ai/GUI-R1 @ d43eea2, guir1/eval/eval_omni.py + guir1/inference/inference_vllm_android.py; "
          "records as YangRui2015/GUI-R1 @ 131ae9a publishes them")
THRESHOLD = 0.14
GROUNDING = ("click", "long_press", "moveto", "doubleclick", "rightclick")
TEXT = ("open_app", "type", "scroll", "select")
NO_POINT = [-100, -100]
_ACTION = re.compile(r"'action':\s*'(\w+)'")
_INPUT = re.compile(r"'input_text':\s*'(.*?)'")
_POINT = re.compile(r"\{.*\[(\d+),\s*(\d+)]\s*.*\}")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
_CONTENT_WORD = {"up": "down", "down": "up", "left": "left", "right": "right"}  # finger -> the scroll word


def model_image(size: tuple[int, int]) -> tuple[int, int]:
    """The model's image of a ``size`` screen: Qwen2.5-VL's processor (factor 28, 3136 to 12845056 pixels)."""
    from ui_tars.action_parser import smart_resize

    h, w = smart_resize(size[1], size[0], factor=28, min_pixels=3136, max_pixels=12845056)
    return w, h


def _button_word(button: str | None) -> str:
    b = (button or "").lower().strip()
    return {"back": "press_back", "home": "navigate_home"}.get(b, "press_" + b)


def ground_truth(gt: GT) -> dict[str, Any]:
    """The step's record fields as GUI-R1's test file writes them."""
    a = gt.act
    rec: dict[str, Any] = {"gt_bbox": list(NO_POINT), "gt_input_text": "no input text"}
    if a.kind in ("click", "long_press"):
        rec.update(gt_action=a.kind, gt_bbox=list(a.raw["coordinate"]))
    elif a.kind == "swipe":
        rec.update(gt_action="scroll", gt_input_text=str(gt.check.get("direction") or "").upper())
    elif a.kind == "type":
        words = (a.text or "").split()
        rec.update(gt_action="type", gt_input_text=words[0] if words else "")
    elif a.kind == "open":
        rec.update(gt_action="open_app", gt_input_text=a.text or "")
    elif a.kind == "system_button":
        rec.update(gt_action=_button_word(a.button))
    else:
        rec.update(gt_action=a.kind)
    return rec


def answer(pred: Act | None) -> str:
    """The prediction as GUI-R1's model writes its answer (a point in its resized image); "" for an
    output that did not parse."""
    if pred is None:
        return ""
    k, point, text = pred.kind, list(NO_POINT), "no input text"
    word = {"swipe": "scroll", "open": "open_app"}.get(k, k)
    if k == "system_button":
        word = _button_word(pred.button)
    if k in ("click", "long_press", "double_tap"):
        iw, ih = model_image(pred.size)
        x, y = pred.raw["coordinate"]
        point = [round(x / pred.size[0] * iw), round(y / pred.size[1] * ih)]
    elif k == "swipe":
        text = _CONTENT_WORD[pred.direction or "up"]
    elif k in ("type", "open", "answer"):
        text = pred.text or ""
    return "<answer>[{'action': '%s', 'point': [%d, %d], 'input_text': '%s'}]</answer>" % (word, point[0], point[1], text)


def read_answer(content: str) -> tuple[str | None, str, list[int]]:
    """(action, input text, point) as the inference script's three patterns read an answer."""
    m = _ANSWER.search(content)
    if not m:
        return None, "no input text", [0, 0]
    body = m.group(1).strip()
    act, text, pt = _ACTION.search(body), _INPUT.search(body), _POINT.search(body)
    return (act.group(1) if act else None, text.group(1) if text else "no input text",
            [int(pt.group(1)), int(pt.group(2))] if pt else [0, 0])


def f1(predicted: str, truth: str) -> float:
    """``calculate_f1_score``: token F1 of the lower-cased, whitespace-split texts without brackets;
    1 when each is one token and one contains the other."""
    p = set(predicted.replace("[", "").replace("]", "").lower().split())
    g = set(truth.replace("[", "").replace("]", "").lower().split())
    if len(p) == 1 and len(g) == 1:
        (a,), (b,) = p, g
        if a in b or b in a:
            return 1
    common = p & g
    precision = len(common) / len(p) if p else 0
    recall = len(common) / len(g) if g else 0
    return 0 if precision + recall == 0 else 2 * (precision * recall) / (precision + recall)


def skip(gt: GT) -> str | None:
    action = ground_truth(gt)["gt_action"]
    if action in GROUNDING or action in TEXT:
        return None
    return f"{action} step: not in GUI-R1's Step (only grounding and text steps are)"


def match_gui_r1(pred: Act | None, gt: GT) -> tuple[bool, bool]:
    rec = ground_truth(gt)
    action, text, point = read_answer(answer(pred))
    type_ok = rec["gt_action"] == action
    if rec["gt_action"] in GROUNDING:
        w, h = model_image(gt.act.size)
        gx, gy = rec["gt_bbox"]
        px, py = point
        return type_ok, ((gx - px) / w) ** 2 + ((gy - py) / h) ** 2 < THRESHOLD ** 2
    return type_ok, f1(rec["gt_input_text"], text) >= 0.5


def totals(scores: list[Any]) -> dict[str, Any]:
    """GUI-R1's own "Step": per ground-truth action type the hits over the steps, adding only the
    types with at least one hit (``evaluate`` iterates over ``score_dict``'s hit keys)."""
    by: dict[str, list[bool]] = {}
    for s in scores:
        if s.skipped is None:
            by.setdefault(s.gt_type, []).append(bool(s.ok))
    hit = {k: v for k, v in by.items() if any(v)}
    n = sum(len(v) for v in hit.values())
    return {"gui_r1_step": round(100.0 * sum(sum(v) for v in hit.values()) / n, 2) if n else None,
            "gui_r1_step_types_dropped": sorted(k for k in by if k not in hit)}


KNOWN_FOR = ("Step = click/long-press points within 0.14 of the model's resized image whatever type was "
             "predicted, and text F1 >= 0.5 with the typed text cut to its first word; wait and buttons not in Step; "
             "types without a hit dropped from its totals")
