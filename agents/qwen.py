"""``qwen``: Qwen2.5-VL / Qwen3-VL's native ``mobile_use`` function call.

Protocol (facts from the Qwen2.5-VL and Qwen3-VL ``mobile_agent`` cookbooks and their
``agent_function_call.py``; prompt text in ``agents/prompts/qwen_mobile_use.md`` is ours):

- A system prompt declares one tool, ``mobile_use``, whose description states the screen's
  resolution; a user turn gives the task, the progress so far (one line per earlier step), and the
  screenshot.
- Output: ``<tool_call>{"name": "mobile_use", "arguments": {"action": ..., ...}}</tool_call>``,
  Qwen3 usually with ``Thought:`` / ``Action:`` lines before it.
- Actions: key(text), click(coordinate), long_press(coordinate, time), swipe(coordinate,
  coordinate2), type(text), system_button(button: Back/Home/Menu/Enter), open(text), wait(time),
  answer(text), terminate(status: success/failure).
- Coordinates: ``version=2.5``: absolute pixels of the screenshot after ``smart_resize`` (factor
  28, min 4x28x28, max ``max_pixels``); the prompt states that resized resolution and the image is
  sent at exactly that size. ``version=3``: the normalised grid, 0-999 (``grid=999``, the prompt
  says 999x999) or 0-1000 (``grid=1000``), whatever the image size.
- ``swipe`` is the finger's path (from ``coordinate`` to ``coordinate2``): a swipe from bottom to
  top scrolls a list towards its end. A ``direction`` without ``coordinate2`` is also read as the
  finger's direction.
- ``type`` text ending in a newline submits. ``answer`` is an Answer (the model terminates after
  it); ``terminate`` is a Finish (success -> complete, failure -> infeasible).

Known failure shapes: a missing ``</tool_call>``, stray tokens after the call, a repeated second
call, ``<think>`` blocks, a bare JSON object without the tags, prose without any call (refused).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ui_tars.action_parser import smart_resize

from harness.actions import (Action, Answer, Click, CoordSpace, Finish, Key, LongPress, OpenApp, Swipe, TypeText,
                             Wait, from_device)
from harness.episode import AgentOutput, EpisodeContext, Observation
from harness.model import ModelConfig, encode_image
from harness.registry import AGENTS

from agents.common import ModelAgent, StepTrace, image_record
from agents.parsing import (ParseError, Parsed, as_point, clean_text, device_point, direction_of, finger_swipe,
                            json_spans, key_action, loads_lenient, register_parser, type_action)
from agents.prompts import load_prompt

MIN_PIXELS = 4 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
_TAG_OPEN = "<tool_call>"
_TAG_CLOSE = "</tool_call>"
_BUTTONS = {"back": "back", "home": "home", "menu": "menu", "enter": "enter"}


def resized_size(screen: tuple[int, int], version: str = "2.5", min_pixels: int = MIN_PIXELS,
                 max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """(width, height) of the screenshot sent: smart_resize with factor 28 (2.5) or 32 (3)."""
    w, h = screen
    factor = 28 if version == "2.5" else 32
    rh, rw = smart_resize(h, w, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
    return rw, rh


def _space(version: str, grid: int) -> CoordSpace:
    if version == "2.5":
        return CoordSpace.RESIZED
    if grid == 999:
        return CoordSpace.GRID_999
    if grid == 1000:
        return CoordSpace.THOUSAND
    raise ParseError(f"grid must be 999 or 1000, got {grid!r}")


def _calls(text: str, notes: list[str]) -> tuple[list[dict[str, Any]], int]:
    """The tool calls in order, and where the first one starts."""
    blocks: list[tuple[int, str]] = []
    pos = 0
    while True:
        i = text.find(_TAG_OPEN, pos)
        if i < 0:
            break
        start = i + len(_TAG_OPEN)
        j_close = text.find(_TAG_CLOSE, start)
        j_next = text.find(_TAG_OPEN, start)
        if j_close < 0 or (0 <= j_next < j_close):
            end = j_next if j_next >= 0 else len(text)
            notes.append("missing </tool_call>")
        else:
            end = j_close
        blocks.append((i, text[start:end]))
        pos = end
    first_at = blocks[0][0] if blocks else -1
    if not blocks:
        spans = json_spans(text)
        bare = []
        for s, e in spans:
            try:
                obj = loads_lenient(text[s:e])
            except ParseError:
                continue
            if isinstance(obj, dict) and ("arguments" in obj or "action" in obj):
                bare.append((s, text[s:e]))
        if not bare:
            raise ParseError("no <tool_call> in the output")
        notes.append("no <tool_call> tags; used a bare JSON call")
        blocks, first_at = bare, bare[0][0]
    calls = []
    for k, (_, body) in enumerate(blocks):
        spans = json_spans(body)
        if not spans:
            if k == 0:
                raise ParseError(f"the tool call holds no JSON object: {body.strip()[:60]!r}")
            continue
        s, e = spans[0]
        tail = body[e:].strip()
        if tail and k == 0:
            notes.append(f"ignored text after the call: {tail[:20]!r}")
        try:
            obj = loads_lenient(body[s:e])
        except ParseError as err:
            if k == 0:
                raise ParseError(f"the tool call is not valid JSON: {err}") from None
            continue
        if not isinstance(obj, dict):
            if k == 0:
                raise ParseError("the tool call is not a JSON object")
            continue
        calls.append(obj)
    return calls, first_at


def parse_detailed(text: str, screen_size: tuple[int, int], version: str = "2.5", grid: int = 999,
                   max_pixels: int = MAX_PIXELS, min_pixels: int = MIN_PIXELS) -> Parsed:
    version = str(version)
    if version not in ("2.5", "3"):
        raise ParseError(f"version must be 2.5 or 3, got {version!r}")
    t, notes = clean_text(text)
    calls, first_at = _calls(t, notes)
    thought = t[:first_at].strip() if first_at > 0 else None
    call = calls[0]
    if len(calls) > 1:
        same = all(c == call for c in calls[1:])
        notes.append(f"took the first of {len(calls)} tool calls" + (" (the others repeat it)" if same else ""))
    name = call.get("name", "mobile_use")
    args = call.get("arguments", call if "action" in call else None)
    if isinstance(args, str):
        args = loads_lenient(args)
    if not isinstance(args, dict):
        raise ParseError(f"the tool call has no arguments object: {json.dumps(call)[:80]}")
    if name not in ("mobile_use", "computer_use"):
        raise ParseError(f"unknown function {name!r} (expected mobile_use)")
    if name != "mobile_use":
        notes.append(f"function {name!r} instead of mobile_use")
    space = _space(version, int(grid))
    resized = resized_size(screen_size, version, min_pixels, max_pixels) if space is CoordSpace.RESIZED else None

    def pt(key: str) -> tuple[int, int]:
        if key not in args:
            raise ParseError(f"{action}: needs {key}")
        x, y = as_point(args[key], key, notes)
        return device_point(x, y, space, screen_size, resized, what=key)

    action = str(args.get("action", "")).strip().lower()
    acts: list[Action]
    if action == "click":
        x, y = pt("coordinate")
        acts = [Click(x=x, y=y)]
    elif action == "long_press":
        x, y = pt("coordinate")
        acts = [LongPress(x=x, y=y, duration_ms=_ms(args.get("time"), 1000))]
    elif action == "swipe":
        if "coordinate2" in args:
            acts = [Swipe(start=pt("coordinate"), end=pt("coordinate2"), duration_ms=400)]
        else:
            d = direction_of(args.get("direction"), "swipe direction")
            start = pt("coordinate") if "coordinate" in args else None
            acts = [finger_swipe(d, screen_size, start=start)]
    elif action == "type":
        acts = [type_action(args.get("text"), "type")]
    elif action == "key":
        acts = [key_action(args.get("text") or args.get("key"), "key")]
    elif action == "system_button":
        b = str(args.get("button", "")).strip().lower()
        if b not in _BUTTONS:
            raise ParseError(f"system_button: unknown button {args.get('button')!r} (Back, Home, Menu, Enter)")
        acts = [key_action(_BUTTONS[b], "system_button")]
    elif action in ("open", "open_app", "awake"):
        app = str(args.get("text") or args.get("app_name") or "").strip()
        if not app:
            raise ParseError("open: no app name in text")
        acts = [OpenApp(app=app)]
    elif action == "wait":
        acts = [Wait(seconds=min(max(_num(args.get("time"), 2.0), 0.0), 60.0))]
    elif action == "answer":
        acts = [Answer(text=str(args.get("text", "")))]
    elif action == "terminate":
        status = str(args.get("status", "success")).strip().lower()
        if status not in ("success", "failure", "fail", "failed"):
            raise ParseError(f"terminate: status must be success or failure, got {args.get('status')!r}")
        acts = [Finish(status="complete" if status == "success" else "infeasible")]
    else:
        raise ParseError(f"unknown mobile_use action {args.get('action')!r}")
    raw = {"name": name, "arguments": args, "version": version,
           "coordinate_space": space.value, **({"resized": list(resized)} if resized else {})}
    return Parsed(actions=acts, raw=raw, thought=thought or None, notes=notes)


def _num(v: Any, default: float) -> float:
    if v in (None, ""):
        return default
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ParseError(f"expected a number of seconds, got {v!r}") from None


def _ms(v: Any, default: int) -> int:
    return int(min(max(_num(v, default / 1000), 0.1), 60.0) * 1000)


_BUTTON_OF_KEY = {"back": "Back", "home": "Home", "enter": "Enter", 82: "Menu"}


def call_arguments(action: Action, point: Any) -> dict[str, Any]:
    """A unified action as the ``mobile_use`` arguments (for a ground-truth progress line); ``point``
    maps device pixels to the model's space (:func:`harness.actions.from_device`)."""
    def xy(x: int, y: int) -> list[int]:
        px, py = point(x, y)
        return [round(px), round(py)]

    if isinstance(action, Click):
        return {"action": "click", "coordinate": xy(action.x, action.y)}
    if isinstance(action, LongPress):
        return {"action": "long_press", "coordinate": xy(action.x, action.y), "time": action.duration_ms / 1000}
    if isinstance(action, Swipe):
        return {"action": "swipe", "coordinate": xy(*action.start), "coordinate2": xy(*action.end)}
    if isinstance(action, TypeText):
        return {"action": "type", "text": action.text + ("\n" if action.submit else "")}
    if isinstance(action, Key):
        button = _BUTTON_OF_KEY.get(action.key)
        return {"action": "system_button", "button": button} if button else {"action": "key", "text": str(action.key)}
    if isinstance(action, OpenApp):
        return {"action": "open", "text": action.app}
    if isinstance(action, Wait):
        return {"action": "wait", "time": action.seconds}
    if isinstance(action, Answer):
        return {"action": "answer", "text": action.text}
    if isinstance(action, Finish):
        return {"action": "terminate", "status": "success" if action.status == "complete" else "failure"}
    raise ValueError(f"no mobile_use form for {action!r}")


def parse_output(text: str, screen_size: tuple[int, int], **opts: Any) -> Action:
    return parse_detailed(text, screen_size, **opts).action


def _cli(text: str, screen_size: tuple[int, int], version: str = "2.5", grid: str | int = 999,
         max_pixels: str | int = MAX_PIXELS, min_pixels: str | int = MIN_PIXELS, **_: Any) -> Parsed:
    return parse_detailed(text, screen_size, version=str(version), grid=int(grid), max_pixels=int(max_pixels),
                          min_pixels=int(min_pixels))


register_parser("qwen", _cli, {"version": "2.5 (resized pixels, default) or 3 (normalised grid)",
                               "grid": "version 3: 999 (default) or 1000",
                               "max_pixels": f"smart_resize max_pixels (default {MAX_PIXELS})",
                               "min_pixels": f"smart_resize min_pixels (default {MIN_PIXELS})"})


# --- the agent ---------------------------------------------------------------------------------
@dataclass
class QwenConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint (from --model-base-url/--model)"})
    version: Literal["2.5", "3"] = field(default="2.5", metadata={
        "help": "2.5: pixels of the smart_resize'd screenshot; 3: normalised grid"})
    grid: int = field(default=999, metadata={"help": "version 3 only: 999 (0-999) or 1000 (0-1000)"})
    history: int = field(default=1, metadata={"help": "screenshots per request, the current one included"})
    max_pixels: int = field(default=MAX_PIXELS, metadata={"help": "smart_resize max_pixels"})
    min_pixels: int = field(default=MIN_PIXELS, metadata={"help": "smart_resize min_pixels"})
    image_format: Literal["png", "jpeg"] = field(default="png", metadata={"help": "screenshot encoding"})
    jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality when image_format=jpeg"})

    def __post_init__(self) -> None:
        if self.grid not in (999, 1000):
            raise ValueError("grid must be 999 or 1000")
        if self.history < 1:
            raise ValueError("history must be >= 1 (the current screenshot)")


_FORMAT_3 = ("\nBefore the call, write one line `Thought: ...` with your reasoning and one line `Action: ...` "
             "that says in a short sentence what you do.")


class QwenAgent(ModelAgent):
    family = "qwen"

    def __init__(self, config: QwenConfig, name: str = "qwen"):
        super().__init__(config, name)
        self.system = load_prompt("qwen_mobile_use")
        self.user = load_prompt("qwen_user")
        self.progress: list[str] = []
        self.shots: list[bytes] = []

    def _prompts(self) -> dict[str, Any]:
        return {"id": f"{self.system.id}+{self.user.id}", "system": self.system.to_json(), "user": self.user.to_json()}

    def spec(self) -> dict[str, Any]:
        c = self.config
        space = "resized (smart_resize, factor 28)" if c.version == "2.5" else f"grid 0-{c.grid}"
        return {**self.base_spec(), "prompt": self._prompts(), "coordinate_space": space}

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        """The progress line of a ground-truth action: its ``mobile_use`` call as the model writes it,
        points in the model's space (smart_resize'd pixels for 2.5, the grid for 3)."""
        c = self.config
        space = _space(c.version, c.grid)
        resized = resized_size(screen, c.version, c.min_pixels, c.max_pixels)
        args = call_arguments(action, lambda x, y: from_device(x, y, space, screen, resized))
        return json.dumps({"name": "mobile_use", "arguments": args}, ensure_ascii=False)

    def replace_history(self, texts: list[str]) -> None:
        """The progress lines become the ground truth's calls. The earlier screenshots (``history`` > 1)
        stay the ones the agent was shown at the last steps, which in a static run are the
        episode's earlier screens."""
        self.progress = list(texts)

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.progress = []
        self.shots = []

    def model_step(self, obs: Observation) -> AgentOutput:
        c = self.config
        trace = StepTrace(prompt=self._prompts())
        size = resized_size(obs.screen_size, c.version, c.min_pixels, c.max_pixels)
        stated = size if c.version == "2.5" else (c.grid, c.grid)
        system = self.system.render(width=stated[0], height=stated[1], response_format=_FORMAT_3 if c.version == "3" else "")
        progress = " ".join(f"Step {i + 1}: {p};" for i, p in enumerate(self.progress)) or "none yet."
        user_text = self.user.render(instruction=obs.instruction, progress=progress)
        trace.lap("prompt")
        policy = self.policy()
        parts: list[dict[str, Any]] = [{"type": "text", "text": user_text}]
        earlier = self.shots[-(c.history - 1):] if c.history > 1 else []
        for k, png in enumerate(earlier):
            enc = encode_image(png, policy, size=size)
            trace.images.append(image_record(enc, f"earlier {len(earlier) - k}"))
            parts += [{"type": "text", "text": f"Screenshot {len(earlier) - k} step(s) ago:"}, enc.part()]
        enc = encode_image(obs.screenshot, policy, size=size)
        trace.images.append(image_record(enc, "current"))
        if earlier:
            parts.append({"type": "text", "text": "Current screenshot:"})
        parts.append(enc.part())
        messages = [{"role": "system", "content": system}, {"role": "user", "content": parts}]
        trace.lap("encode")
        trace.extra.update({"history": c.history, "version": c.version, "resized": list(size)})
        res = self.chat(messages, trace, "action")
        try:
            parsed: Parsed | None = parse_detailed(res.text, obs.screen_size, c.version, c.grid, c.max_pixels, c.min_pixels)
            err = None
        except ParseError as e:
            parsed, err = None, e
        self.shots.append(obs.screenshot)
        if parsed is not None:
            summary = json.dumps({"name": "mobile_use", "arguments": parsed.raw["arguments"]}, ensure_ascii=False)
            self.progress.append(summary)
        else:
            self.progress.append(f"(output not understood: {str(err)[:80]})")
        return self.output(res.text, parsed, err, trace, obs.step)


@AGENTS.register("qwen", QwenConfig, help="Qwen2.5-VL / Qwen3-VL mobile_use function call (version=2.5|3)")
def _build(config: QwenConfig) -> QwenAgent:
    return QwenAgent(config, "qwen")
