"""AndroidControl episodes in UI-S1's JSONL shape, and the one conversion between their actions and
the unified action space (:mod:`harness.core.actions`).

The shape (``X-PLUG/MobileAgent`` ``UI-S1/evaluation/dataset/android_control_evaluation_std.jsonl``;
a 300-episode sample is ``../shared/reference/androidcontrol_test_300.jsonl``): one episode per line,
``{"goal", "episode_id", "is_successful", "steps": [{"action_content", "check_options",
"step_instruction", "screenshot"}]}``. Every ``action_type`` of the whole test set (8,444 steps)::

    click         {"coordinate": [x, y]}                    check_options: candidate_bbox, coordinate
    long_press    {"coordinate": [x, y], "time": 2}         check_options: candidate_bbox, coordinate
    swipe         {"coordinate": [x1, y1], "coordinate2": [x2, y2]}   (the finger's path)
                                                            check_options: direction (see below)
    type          {"text": "..."}                           check_options: text
    open          {"text": "App name"}                      check_options: text, sometimes candidate_bbox
                                                            (the app's icon, when it is on screen)
    wait          {"time": 2}
    system_button {"button": "Back"}                        (the test set only has Back)

Coordinates are pixels of the step's screenshot (about 1080x2400; the largest seen is 1355x2952).
``candidate_bbox`` lists ``[x1, y1, x2, y2]`` pixel boxes that contain the target, in no guaranteed
order (the last is not the largest in 77 of the test set's 1,273 multi-box steps); it may be empty. ``check_options.direction`` of a swipe uses the *scroll* word for vertical swipes
(``down`` = finger moves up, 947 of 947 cases) but the finger's word for horizontal ones (``left`` =
finger moves left); UI-S1's own scorer notes "the down up is wrong in gt". We therefore never read
it: directions are derived from the finger path (see :func:`finger_direction`).

Extensions this project reads (absent from the public files): ``alternatives`` on a step, a list of
``{"action_content", "check_options"}`` that are equally right (AndroidLens's multi-path ground
truth); ``width``/``height`` on an episode or a step (the screen size in pixels).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.actions import (Action, ActionError, Answer, Click, DoubleTap, Finish, Key, LongPress, OpenApp, Swipe, TypeText,
                                  Wait, parse_action)

AC_ACTION_TYPES = ("click", "long_press", "swipe", "type", "open", "wait", "system_button")
# what a prediction may also say although no ground truth uses it (scored as a wrong action type)
EXTRA_PREDICTION_TYPES = ("answer", "finish", "double_tap")  # not in AndroidControl: never match
# our named keys <-> AndroidControl's system_button words
_BUTTON_OF_KEY = {"back": "Back", "home": "Home", "enter": "Enter", "app_switch": "Recent", "delete": "Delete"}


class DatasetError(ValueError):
    """A defect in a dataset or prediction file: the message names file, line and field."""


@dataclass
class GroundTruth:
    action: dict[str, Any]            # action_content
    check: dict[str, Any]             # check_options


@dataclass
class StaticStep:
    options: list[GroundTruth]        # the first is the dataset's; more are alternative paths
    instruction: str | None
    screenshot: str | None
    size: tuple[int, int] | None = None


@dataclass
class StaticEpisode:
    index: int                        # 0-based position in the file (what predictions call "episode")
    episode_id: Any
    goal: str
    steps: list[StaticStep]
    size: tuple[int, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _size_of(obj: dict[str, Any]) -> tuple[int, int] | None:
    w, h = obj.get("width"), obj.get("height")
    if isinstance(w, (int, float)) and isinstance(h, (int, float)) and w > 0 and h > 0:
        return int(w), int(h)
    s = obj.get("screen_size")
    if isinstance(s, (list, tuple)) and len(s) == 2 and all(isinstance(v, (int, float)) and v > 0 for v in s):
        return int(s[0]), int(s[1])
    return None


def check_ac_action(a: Any, where: str, *, prediction: bool = False) -> dict[str, Any]:
    """Validate one AndroidControl action (the dataset's or a prediction's); return it or raise."""
    if not isinstance(a, dict):
        raise DatasetError(f"{where}: an action must be a JSON object, got {type(a).__name__}")
    kind = a.get("action")
    if prediction and kind in EXTRA_PREDICTION_TYPES:
        return a
    if kind not in AC_ACTION_TYPES:
        raise DatasetError(f"{where}.action: unknown action type {kind!r} (expected one of {', '.join(AC_ACTION_TYPES)})")

    def point(key: str) -> None:
        p = a.get(key)
        if not (isinstance(p, (list, tuple)) and len(p) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in p)):
            raise DatasetError(f"{where}.{key}: expected [x, y] numbers, got {p!r}")

    if kind in ("click", "long_press"):
        point("coordinate")
    elif kind == "swipe":
        point("coordinate")
        if "coordinate2" in a:
            point("coordinate2")
        elif a.get("direction") not in ("up", "down", "left", "right"):
            raise DatasetError(f"{where}: a swipe needs coordinate2 (or a finger direction up/down/left/right)")
    elif kind in ("type", "open"):
        if not isinstance(a.get("text"), str):
            raise DatasetError(f"{where}.text: expected a string, got {a.get('text')!r}")
    elif kind == "system_button":
        if not isinstance(a.get("button"), str):
            raise DatasetError(f"{where}.button: expected a string, got {a.get('button')!r}")
    return a


def read_text(p: Path) -> str:
    """A dataset or predictions file's UTF-8 text; DatasetError naming the file otherwise."""
    try:
        return p.read_text(encoding="utf-8")
    except OSError as e:
        raise DatasetError(f"{p}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise DatasetError(f"{p}: not UTF-8 text (byte {e.start})") from None


def load_dataset(path: str | Path) -> list[StaticEpisode]:
    """Read an AndroidControl JSONL file; every defect is reported as ``FILE:LINE: field: problem``."""
    p = Path(path)
    text = read_text(p)
    episodes: list[StaticEpisode] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{p}:{lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("steps"), list):
            raise DatasetError(f"{p}:{lineno}: steps: an episode needs a list of steps")
        steps = []
        for j, s in enumerate(obj["steps"]):
            where = f"{p}:{lineno}: steps[{j}]"
            if not isinstance(s, dict):
                raise DatasetError(f"{where}: a step must be a JSON object")
            options = [GroundTruth(check_ac_action(s.get("action_content"), f"{where}.action_content"),
                                   s.get("check_options") if isinstance(s.get("check_options"), dict) else {})]
            for k, alt in enumerate(s.get("alternatives") or []):
                aw = f"{where}.alternatives[{k}]"
                if not isinstance(alt, dict):
                    raise DatasetError(f"{aw}: expected {{action_content, check_options}}")
                options.append(GroundTruth(check_ac_action(alt.get("action_content"), f"{aw}.action_content"),
                                           alt.get("check_options") if isinstance(alt.get("check_options"), dict) else {}))
            shot = s.get("screenshot")
            steps.append(StaticStep(options, s.get("step_instruction"), shot if isinstance(shot, str) else None,
                                    _size_of(s)))
        goal = obj.get("goal")
        episodes.append(StaticEpisode(len(episodes), obj.get("episode_id"), goal if isinstance(goal, str) else "",
                                      steps, _size_of(obj)))
    return episodes


# --------------------------------------------------------------------------- conversion


def finger_direction(start: tuple[float, float], end: tuple[float, float]) -> str:
    """The direction the finger moves: the larger of |dx| and |dy| decides, ties go vertical (the rule
    of UI-S1's ``predict_direction``); y grows downwards."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    if abs(dx) > abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"


def to_unified(a: dict[str, Any]) -> Action:
    """AndroidControl action -> unified action (pixels are rounded to integers)."""
    kind = a.get("action")
    try:
        if kind == "click":
            x, y = a["coordinate"]
            return Click(x=round(x), y=round(y))
        if kind == "long_press":
            x, y = a["coordinate"]
            return LongPress(x=round(x), y=round(y), duration_ms=max(1, round(float(a.get("time", 1)) * 1000)))
        if kind == "swipe":
            x1, y1 = a["coordinate"]
            x2, y2 = a["coordinate2"]
            return Swipe(start=(round(x1), round(y1)), end=(round(x2), round(y2)))
        if kind == "type":
            return TypeText(text=a["text"])
        if kind == "open":
            return OpenApp(app=a["text"])
        if kind == "wait":
            return Wait(seconds=float(a.get("time", 1)))
        if kind == "system_button":
            return parse_action({"type": "key", "key": str(a["button"])})
    except (KeyError, TypeError, ValueError) as e:
        raise ActionError(f"{kind}: cannot convert {a!r}: {e}") from None
    raise ActionError(f"unknown AndroidControl action type {kind!r}")


def from_unified(action: Action) -> dict[str, Any]:
    """Unified action -> AndroidControl action. ``answer`` and ``finish`` have no AndroidControl
    form; they become ``{"action": "answer"|"finish", ...}``, which never matches a ground truth."""
    if isinstance(action, Click):
        return {"action": "click", "coordinate": [action.x, action.y]}
    if isinstance(action, LongPress):
        return {"action": "long_press", "coordinate": [action.x, action.y], "time": action.duration_ms / 1000}
    if isinstance(action, DoubleTap):
        return {"action": "double_tap", "coordinate": [action.x, action.y]}
    if isinstance(action, Swipe):
        return {"action": "swipe", "coordinate": list(action.start), "coordinate2": list(action.end)}
    if isinstance(action, TypeText):
        return {"action": "type", "text": action.text}
    if isinstance(action, OpenApp):
        return {"action": "open", "text": action.app}
    if isinstance(action, Wait):
        return {"action": "wait", "time": action.seconds}
    if isinstance(action, Key):
        button = _BUTTON_OF_KEY.get(action.key, str(action.key)) if isinstance(action.key, str) else str(action.key)
        return {"action": "system_button", "button": button}
    if isinstance(action, Answer):
        return {"action": "answer", "text": action.text}
    if isinstance(action, Finish):
        return {"action": "finish", "status": action.status}
    raise ActionError(f"no AndroidControl form for {action!r}")


def prediction_to_ac(raw: Any) -> dict[str, Any]:
    """A prediction's action in either shape (AndroidControl's ``action`` key or the unified ``type``
    key) as an AndroidControl action; raise DatasetError when it is neither."""
    if isinstance(raw, dict) and "action" in raw:
        return check_ac_action(raw, "action", prediction=True)
    if isinstance(raw, dict) and "type" in raw:
        try:
            return from_unified(parse_action(raw))
        except ActionError as e:
            raise DatasetError(f"action: {e}") from None
    raise DatasetError(f"action: expected an AndroidControl action ({{\"action\": ...}}) or a unified one "
                       f"({{\"type\": ...}}), got {raw!r}"[:300])
