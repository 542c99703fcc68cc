"""AgentCPM-GUI's AndroidControl scorer.

Source: OpenBMB/AgentCPM-GUI @ acbaf509b8afb3f58b782486f4e8c0e33d8a486b: ``eval/utils/evaluator.py``
(``ActionEvaluator`` with ``eval_android_control=True``: ``_parse_answer_``, ``_parse_action_``,
``action_map``, ``obtain_gt_bbox``, ``_resize_annotation_bounding_boxes``, ``_get_direction``),
``eval/utils/convert_output.py`` (``parse_action``: the model's JSON checked against
``utils/schema/schema_for_extraction.json``), ``eval/run_eval_agent.py`` (``process_step_data``,
``compute_episode_metrics``) and ``eval/eval_data/process_ac.py`` (``transform_action_data``,
``turn_ui_trees``, the finish step appended to every episode).

What sets it apart, each rule from those files:

* The ground truth is rebuilt from AndroidControl's raw actions: ``open_app`` steps are dropped
  (the conversion has no form for them); a long press goes through the click branch, so it is
  scored as a click (a predicted long press is then the wrong type); ``wait`` and the finish
  step appended to every episode are both "stop", and so is a predicted wait or finish.
* Scroll words are reversed (``left`` <-> ``right``, ``up`` <-> ``down``) and turned into a path
  from the screen's centre. Vertical words become the finger's direction; the dataset's horizontal
  words already are the finger's (UI-S1's file draws ``left`` as a finger moving left), so a
  horizontal swipe along the dataset's path is judged wrong and the opposite one right.
* Candidate boxes grow to 1.2x their height and width, the top-left corner moved back by half the
  growth, clamped as AITW's are (top/left at 0, height/width at 1); the five whose centres are
  nearest the ground-truth point are tried; else within 0.04 of it. Its boxes are *every* node of
  the step's accessibility tree (``turn_ui_trees`` reads each ``bounds_in_screen``), so a tap on a
  neighbouring element can fall in one of the five; UI-S1's file has no tree, only the
  ``candidate_bbox`` boxes that contain the target, so this profile gives what AgentCPM-GUI's code
  gives on a tree of just those nodes (as ``(y1 / H, x1 / W, (y2 - y1) / H, (x2 - x1) / W)``). On the
  real tree a click step can go either way: a neighbour among the five accepts more taps, and a
  large container pushed out of the five by nearer nodes accepts fewer.
* Predictions are read on the 0-1000 integer grid of its action schema (``POINT``, ``to``): a
  point off the screen breaks the schema and the step is a format error; a swipe's direction is
  the nearest of up/down/left/right (ties vertical), and a swipe of length 0 has none.
* Text: lower-case containment either way; buttons by name.
* ``run_eval_agent.py`` scores only the steps it has a prediction for: the finish steps are scored
  when the predictions give any (step index = the episode's length), else skipped.
"""

from __future__ import annotations

from .common import GT, Act, contains_either_way, dist, on_grid

SOURCE = "OpenBMB/AgentCPM-GUI @ acbaf50, eval/utils/evaluator.py + eval/eval_data/process_ac.py + eval/run_eval_agent.py"
TAP_DISTANCE = 0.04          # _TAP_DISTANCE_THRESHOLD_AC ("align with qwen's code")
AUGMENT = 1.2                # ANNOTATION_{WIDTH,HEIGHT}_AUGMENT_FRACTION
NEAREST_BOXES = 5            # obtain_gt_bbox keeps the five boxes nearest the point
DEFAULT_DURATION_MS = 200    # schema_for_extraction.json: duration default (a press this long is a click)
_REVERSED = {"left": "right", "right": "left", "up": "down", "down": "up"}
_PRESS = {"back": "BACK", "home": "HOME", "enter": "ENTER", "recent": "APPSELECT", "app_switch": "APPSELECT"}
_GT_PRESS = {"back": "back", "home": "home"}     # process_ac: navigate_back, navigate_home


def skip(gt: GT) -> str | None:
    a = gt.act
    if a.kind == "open":
        return "open-app step: dropped by AgentCPM-GUI's conversion (process_ac.py)"
    if a.kind == "system_button" and (a.button or "").lower().strip() not in _GT_PRESS:
        return "button other than Back/Home: no form in AgentCPM-GUI's conversion"
    return None


def _gt(gt: GT) -> tuple[str, object]:
    """(type, detail) of the ground truth as ``_parse_answer_`` reads process_ac.py's output."""
    a = gt.act
    if a.kind in ("click", "long_press"):
        return "click", (a.p[0], a.p[1])  # type: ignore[index]
    if a.kind == "swipe":
        return "scroll", _REVERSED.get(str(gt.check.get("direction", "")), "no direction")
    if a.kind == "type":
        return "type", a.text or ""
    if a.kind == "system_button":
        return "press", _GT_PRESS[(a.button or "").lower().strip()]
    return "stop", None  # wait, finish


def _ms(a: Act) -> int:
    return round(float(a.raw.get("time", 1)) * 1000)


def _on_screen(*pts: tuple[int, int]) -> bool:
    return all(0 <= v <= 1000 for p in pts for v in p)


def _pred(a: Act) -> tuple[str | None, object]:
    """(type, detail) of a prediction written in AgentCPM-GUI's schema and read by ``action_map``
    and ``_parse_action_``; (None, None) when the schema refuses it or it has no form there."""
    w, h = a.size
    if a.kind in ("click", "long_press"):
        x, y = a.raw["coordinate"]
        pt = (on_grid(x, w), on_grid(y, h))
        if not _on_screen(pt):
            return None, None
        ms = _ms(a) if a.kind == "long_press" else DEFAULT_DURATION_MS
        if ms == DEFAULT_DURATION_MS:
            return "click", (pt[0] / 1000, pt[1] / 1000)
        if ms > DEFAULT_DURATION_MS:
            return "long_point", (pt[0] / 1000, pt[1] / 1000)
        return ("stop", None) if ms >= 0 else (None, None)  # a shorter press falls to the wait branch
    if a.kind == "swipe":
        x, y = a.raw["coordinate"]
        start = (on_grid(x, w), on_grid(y, h))
        if "coordinate2" not in a.raw:
            return ("scroll", a.direction) if _on_screen(start) else (None, None)
        x2, y2 = a.raw["coordinate2"]
        end = (on_grid(x2, w), on_grid(y2, h))
        if not _on_screen(start, end):
            return None, None
        return "scroll", grid_direction(start, end)
    if a.kind == "type":
        return "type", a.text or ""
    if a.kind == "system_button":
        b = (a.button or "").lower().strip()
        return ("press", _PRESS[b].lower()) if b in _PRESS else (None, None)
    if a.kind == "wait":
        return ("stop", None) if _ms(a) >= 0 else (None, None)
    if a.kind == "finish":
        return "stop", None
    return None, None  # open, answer, double tap: no form in its schema


def grid_direction(start: tuple[int, int], end: tuple[int, int]) -> str:
    """``_get_direction``: the unit vector's largest cosine with up, down, left, right (first wins on
    a tie, so ties go vertical); no direction for a path of length 0."""
    vx, vy = end[0] - start[0], end[1] - start[1]
    if vx == 0 and vy == 0:
        return "no direction"
    if abs(vy) >= abs(vx):
        return "up" if vy < 0 else "down"
    return "right" if vx > 0 else "left"


def _grown(box: tuple[float, float, float, float], size: tuple[int, int]) -> tuple[float, float, float, float]:
    """A pixel box as (y, x, h, w) fractions grown by ``_resize_annotation_bounding_boxes``."""
    x1, y1, x2, y2 = box
    W, H = size
    y, x, hh, ww = y1 / H, x1 / W, (y2 - y1) / H, (x2 - x1) / W
    dh, dw = (AUGMENT - 1) * hh, (AUGMENT - 1) * ww
    return max(0, y - dh / 2), max(0, x - dw / 2), min(1, hh + dh), min(1, ww + dw)


def _click(p: tuple[float, float], point: tuple[float, float], gt: GT) -> bool:
    boxes = [_grown(b, gt.act.size) for b in gt.pixel_boxes]
    gx, gy = point

    def centre_distance(b: tuple[float, float, float, float]) -> float:
        return ((b[0] + b[2] / 2 - gy) ** 2 + (b[1] + b[3] / 2 - gx) ** 2) ** 0.5

    for ymin, xmin, bh, bw in sorted(boxes, key=centre_distance)[:NEAREST_BOXES]:
        if ymin <= p[1] <= ymin + bh and xmin <= p[0] <= xmin + bw:
            return True
    return dist(point, p) <= TAP_DISTANCE


def match_agentcpm_gui(pred: Act, gt: GT) -> tuple[bool, bool]:
    gtype, gdetail = _gt(gt)
    ptype, pdetail = _pred(pred)
    if ptype is None or ptype != gtype:
        return False, False
    if ptype == "click":
        return True, _click(pdetail, gdetail, gt)  # type: ignore[arg-type]
    if ptype == "scroll":
        return True, pdetail == gdetail
    if ptype == "type":
        return True, contains_either_way(str(pdetail), str(gdetail))
    if ptype == "press":
        return True, pdetail == gdetail
    return True, True  # stop


KNOWN_FOR = ("drops open-app steps, adds a finish step per episode (wait = finish = stop), long press scored as "
             "click, scroll words reversed (horizontal swipes judged backwards), the 5 boxes nearest the point x1.2 "
             "clamped (its accessibility tree's; here the candidate boxes), 0-1000 grid")
