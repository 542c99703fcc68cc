"""``qwen``: Qwen2.5-VL / Qwen3-VL's native ``mobile_use`` function call, as each version's official
cookbook (QwenLM/Qwen2.5-VL and QwenLM/Qwen3-VL ``cookbooks/mobile_agent.ipynb``) lays it out.
The wording of the prompts (``agents/prompts/qwen25_mobile_use.md``, ``qwen3_mobile_use.md``,
``qwen_user.md``) is ours; their structure, action lists, argument names and history form are the
cookbooks'.

- ``version=2.5``: a system turn "You are a helpful assistant." with the ``mobile_use`` tool in the
  Nous/hermes function-call form (``name_for_human``, ``args_format``). Actions: key, click,
  long_press, swipe, type, system_button, open, wait, terminate (no ``answer``). Coordinates:
  absolute pixels of the screenshot after ``smart_resize`` (factor 28, 4x28x28 to 16384x28x28
  pixels); the tool description states that resolution and the image is sent at exactly that size.
  History: one ``Step N: {"name": "mobile_use", "arguments": {...}};`` per earlier step.
- ``version=3``: the tool without ``name_for_human``, then a response format: ``Thought:`` /
  ``Action:`` (a short plain-language description) / one ``<tool_call>``. Actions: click,
  long_press, swipe, type, answer, system_button, wait, terminate (no ``key``, no ``open``: the model
  opens apps from the launcher). Coordinates: the normalised grid, "The screen's resolution is
  999x999" (``grid=999``; ``grid=1000`` for 0-1000), whatever the image size (the cookbook scales
  by ``/999 * size``). Images: ``smart_resize`` with factor 32 (Qwen3-VL's 16-pixel patches merged
  2x2), 4x32x32 to 16384x32x32 pixels. History: the plain-language ``Action:`` line of each earlier
  step (``Step N: <what it did>;``), as the cookbook's history list.
- The user turn: the task, the progress so far, then the screenshot (``history=N`` adds the N-1
  previous screenshots).
- Output: ``<tool_call>{"name": "mobile_use", "arguments": {"action": ..., ...}}</tool_call>``, or
  the same calls returned the OpenAI way (``message.tool_calls``, servers with a tool-call parser),
  which are read alike. Actions the version does not list (``open`` for 3, ``answer`` for 2.5) are
  still done, with a note.
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
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ui_tars.action_parser import smart_resize

from harness.core.actions import (Action, Answer, Click, CoordSpace, DoubleTap, Finish, Key, LongPress, OpenApp, Swipe,
                                  TypeText, Wait, from_device)
from harness.core.episode import AgentOutput, EpisodeContext, Feedback, Observation
from harness.client.config import ModelConfig
from harness.client.images import encode_image
from harness.core.registry import AGENTS

from agents.common import ModelAgent, ServerResize, StepTrace, encoding_note, feedback_text, image_record, send_size
from agents.parsing import (ParseError, Parsed, as_point, clean_text, device_point, direction_of, finger_swipe,
                            json_spans, key_action, loads_lenient, read_reply, register_parser, type_action)
from agents.prompts import load_prompt, sha12

# smart_resize factor: Qwen2.5-VL's 14-pixel patches merged 2x2, Qwen3-VL's 16-pixel patches merged 2x2
FACTOR = {"2.5": 28, "3": 32}
# each version's mobile_use action list, as its cookbook declares it
ACTIONS = {"2.5": ("key", "click", "long_press", "swipe", "type", "system_button", "open", "wait", "terminate"),
           "3": ("click", "long_press", "swipe", "type", "answer", "system_button", "wait", "terminate")}
# what a server running the model (vLLM, SGLang, transformers) resizes to itself: the version's own
# processor (preprocessor_config.json): Qwen2.5-VL 3136 to 12845056 pixels, factor 28; Qwen3-VL
# "size": {"shortest_edge": 65536, "longest_edge": 16777216}, patch 16 merged 2x2 (factor 32)
SERVER_RESIZE = {"2.5": ServerResize(28, 3136, 12845056, "Qwen2.5-VL processor: factor 28, 3136 to 12845056 pixels"),
                 "3": ServerResize(32, 65536, 16777216, "Qwen3-VL processor: factor 32, 65536 to 16777216 pixels")}
_TAG_OPEN = "<tool_call>"
_TAG_CLOSE = "</tool_call>"
_BUTTONS = {"back": "back", "home": "home", "menu": "menu", "enter": "enter"}


def pixel_limits(version: str, min_pixels: int | None = None, max_pixels: int | None = None) -> tuple[int, int]:
    """``smart_resize``'s (min_pixels, max_pixels): the given ones, else the version's processor
    defaults (qwen-vl-utils vision_process.py: 4 and 16384 tokens of factor x factor pixels)."""
    f = FACTOR[str(version)]
    return (min_pixels if min_pixels is not None else 4 * f * f,
            max_pixels if max_pixels is not None else 16384 * f * f)


def resized_size(screen: tuple[int, int], version: str = "2.5", min_pixels: int | None = None,
                 max_pixels: int | None = None) -> tuple[int, int]:
    """(width, height) of the screenshot sent: smart_resize with factor 28 (2.5) or 32 (3)."""
    w, h = screen
    lo, hi = pixel_limits(version, min_pixels, max_pixels)
    rh, rw = smart_resize(h, w, factor=FACTOR[str(version)], min_pixels=lo, max_pixels=hi)
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
                   max_pixels: int | None = None, min_pixels: int | None = None) -> Parsed:
    version = str(version)
    if version not in ACTIONS:
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
    if action and action not in ACTIONS[version]:
        notes.append(f"{action!r} is not in Qwen{version}-VL's mobile_use action list; done as asked")
    acts: list[Action]
    if action == "click":
        x, y = pt("coordinate")
        acts = [Click(x=x, y=y)]
    elif action == "long_press":
        x, y = pt("coordinate")
        acts = [LongPress(x=x, y=y, duration_ms=_ms(args.get("time"), 1000))]
    elif action in ("double_tap", "double_click"):
        x, y = pt("coordinate")
        acts = [DoubleTap(x=x, y=y)]
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
    maps device pixels to the model's space (:func:`harness.core.actions.from_device`)."""
    def xy(x: int, y: int) -> list[int]:
        px, py = point(x, y)
        return [round(px), round(py)]

    if isinstance(action, Click):
        return {"action": "click", "coordinate": xy(action.x, action.y)}
    if isinstance(action, LongPress):
        return {"action": "long_press", "coordinate": xy(action.x, action.y), "time": action.duration_ms / 1000}
    if isinstance(action, DoubleTap):
        return {"action": "double_tap", "coordinate": xy(action.x, action.y)}
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


_ACTION_LINE = re.compile(r"(?m)^[ \t]*Action:[ \t]*(.+?)[ \t]*$")


def action_line(text: str) -> str | None:
    """The plain-language ``Action:`` line before the tool call (Qwen3-VL's response format)."""
    head = text.split(_TAG_OPEN, 1)[0]
    found = _ACTION_LINE.findall(head)
    return found[-1] if found else None


def plain_words(args: dict[str, Any]) -> str:
    """A ``mobile_use`` call told in a few plain words (Qwen3-VL's history when the model's own
    ``Action:`` line is missing, and for a ground-truth history)."""
    a = str(args.get("action", ""))
    c, c2 = args.get("coordinate"), args.get("coordinate2")

    def xy(p: Any) -> str:
        return f"({p[0]}, {p[1]})" if isinstance(p, (list, tuple)) and len(p) == 2 else "the screen"

    text = str(args.get("text", ""))
    words = {
        "click": f"Tapped {xy(c)}.",
        "long_press": f"Long-pressed {xy(c)} for {args.get('time', 1)} s.",
        "double_tap": f"Double-tapped {xy(c)}.",
        "swipe": f"Swiped from {xy(c)} to {xy(c2)}." if c2 is not None else f"Swiped {args.get('direction', '')}.",
        "type": f"Typed {text.rstrip(chr(10))!r}" + (" and pressed Enter." if text.endswith("\n") else "."),
        "system_button": f"Pressed the {args.get('button', '')} button.",
        "key": f"Pressed the {text} key.",
        "open": f"Opened the {text} app.",
        "wait": f"Waited {args.get('time', 2)} s.",
        "answer": f"Answered {text!r}.",
        "terminate": f"Ended the task ({args.get('status', 'success')}).",
    }
    return words.get(a, f"{a}.")


def history_item(text: str) -> str:
    """One entry of Qwen3-VL's history, as the cookbook writes it (line breaks and double quotes
    removed)."""
    return text.replace("\n", "").replace('"', "").strip()


def progress_text(entries: list[str]) -> str:
    """The user turn's progress, as both cookbooks build it: ``Step N: <entry>; `` per earlier step,
    run together (Qwen3-VL's ``stage2_history += 'Step ' + str(idx + 1) + ': ' + ... + '; '``; the
    Qwen2.5-VL example's ``Step 1: {...}; ``); nothing before the first step."""
    return "".join(f"Step {i + 1}: {p}; " for i, p in enumerate(entries))


def parse_output(text: str, screen_size: tuple[int, int], **opts: Any) -> Action:
    return parse_detailed(text, screen_size, **opts).action


def _cli(text: str, screen_size: tuple[int, int], version: str = "2.5", grid: str | int = 999,
         max_pixels: str | int | None = None, min_pixels: str | int | None = None, **_: Any) -> Parsed:
    return parse_detailed(text, screen_size, version=str(version), grid=int(grid),
                          max_pixels=None if max_pixels is None else int(max_pixels),
                          min_pixels=None if min_pixels is None else int(min_pixels))


register_parser("qwen", _cli, {"version": "2.5 (resized pixels, default) or 3 (normalised grid)",
                               "grid": "version 3: 999 (default) or 1000",
                               "max_pixels": "smart_resize max_pixels (default 16384 x factor^2: 28 for 2.5, 32 for 3)",
                               "min_pixels": "smart_resize min_pixels (default 4 x factor^2)"})


# --- the agent ---------------------------------------------------------------------------------
@dataclass
class QwenConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint (from --model-base-url/--model)"})
    version: Literal["2.5", "3"] = field(default="2.5", metadata={
        "help": "2.5: pixels of the smart_resize'd screenshot; 3: normalised grid"})
    grid: int = field(default=999, metadata={"help": "version 3 only: 999 (0-999) or 1000 (0-1000)"})
    history: int = field(default=1, metadata={"help": "screenshots per request, the current one included"})
    max_pixels: int | None = field(default=None, metadata={
        "help": "smart_resize max_pixels (default: the version's, 16384 x factor^2)"})
    min_pixels: int | None = field(default=None, metadata={"help": "smart_resize min_pixels (default: 4 x factor^2)"})
    image_format: Literal["png", "jpeg"] = field(default="png", metadata={"help": "screenshot encoding"})
    jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality when image_format=jpeg"})
    send: Literal["auto", "resized"] = field(default="auto", metadata={
        "help": "auto: the captured PNG as it is where the version's processor on the server resizes it to the "
                "same size itself; resized: always resize here"})

    def __post_init__(self) -> None:
        if self.grid not in (999, 1000):
            raise ValueError("grid must be 999 or 1000")
        if self.history < 1:
            raise ValueError("history must be >= 1 (the current screenshot)")
        # the version's sizes, written out so that the manifest records the numbers used
        self.min_pixels, self.max_pixels = pixel_limits(self.version, self.min_pixels, self.max_pixels)
        if not 0 < self.min_pixels <= self.max_pixels:
            raise ValueError("need 0 < min_pixels <= max_pixels")


class QwenAgent(ModelAgent):
    family = "qwen"

    def __init__(self, config: QwenConfig, name: str = "qwen"):
        super().__init__(config, name)
        self.system = load_prompt("qwen25_mobile_use" if config.version == "2.5" else "qwen3_mobile_use")
        self.user = load_prompt("qwen_user")
        self.progress: list[str] = []
        self.shots: list[bytes] = []
        self.reply = ""  # the model's last reply, as it wrote it
        self.refused: list[tuple[str, str]] = []  # this step's refused replies and what the agent was told
        self.refused_open = False  # reflect() came since the last model step: the next request carries them

    def system_text(self, width: int, height: int) -> str:
        """The system turn stating a ``width`` x ``height`` screen; it ends where the cookbook's does
        (the prompt file's last line break is the file's, not the prompt's)."""
        return self.system.render(width=width, height=height).removesuffix("\n")

    def _prompts(self) -> dict[str, Any]:
        return {"id": f"{self.system.id}+{self.user.id}", "system": self.system.to_json(), "user": self.user.to_json()}

    def spec(self) -> dict[str, Any]:
        c = self.config
        space = "resized (smart_resize, factor 28)" if c.version == "2.5" else f"grid 0-{c.grid}"
        server = SERVER_RESIZE[c.version]
        return {**self.base_spec(), "prompt": self._prompts(), "coordinate_space": space,
                "actions": list(ACTIONS[c.version]),
                "history_form": "mobile_use calls" if c.version == "2.5" else "plain-language Action lines",
                "image_encoding": encoding_note(server, c.send, c.image_format), "server_resize": server.to_json()}

    def _sizes(self, screen: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int] | None]:
        """(the smart_resize'd size, the size to encode at: None = as captured)."""
        c = self.config
        size = resized_size(screen, c.version, c.min_pixels, c.max_pixels)
        return size, send_size(screen, size, SERVER_RESIZE[c.version], c.send, c.image_format)

    def encodings(self, screen: tuple[int, int]) -> list[tuple[Any, tuple[int, int] | None]]:
        return [(self.policy(), self._sizes(screen)[1])]

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        """The progress entry of a ground-truth action: for 2.5 its ``mobile_use`` call as the model
        writes it, for 3 the call told in plain words; points in the model's space (smart_resize'd
        pixels for 2.5, the grid for 3)."""
        c = self.config
        space = _space(c.version, c.grid)
        resized = resized_size(screen, c.version, c.min_pixels, c.max_pixels)
        args = call_arguments(action, lambda x, y: from_device(x, y, space, screen, resized))
        if c.version == "3":
            return history_item(plain_words(args))
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
        self.reply = ""
        self.refused = []
        self.refused_open = False

    def reflect(self, feedback: Feedback) -> str:
        """Qwen's request is one user turn (the task, the progress, the screenshot): the refused step
        leaves the progress (it was not performed) and the next request repeats that turn, then the
        refused reply as the assistant's turn and the feedback as a user turn after it (each refused
        proposal of the step in a row adds such a pair; a refused second half of an action leaves
        the progress as it is, its first half ran). Returns the feedback turn's text."""
        self.pending = []
        if self.progress and not self.queued_step:
            self.progress.pop()
            self.shots.pop()
        text = feedback_text(feedback, self.feedback_language())
        self.refused.append((self.reply, text))
        self.refused_open = True
        return text

    def _progress_entry(self, text: str, parsed: Parsed | None, err: ParseError | None) -> str:
        """What the next request's progress says of this step, in the version's history form."""
        if parsed is None:
            return f"(output not understood: {str(err)[:80]})"
        if self.config.version == "3":
            said = action_line(clean_text(text)[0])
            return history_item(said or plain_words(parsed.raw["arguments"]))
        return json.dumps({"name": "mobile_use", "arguments": parsed.raw["arguments"]}, ensure_ascii=False)

    def model_step(self, obs: Observation) -> AgentOutput:
        c = self.config
        trace = StepTrace(prompt=self._prompts())
        size, sent = self._sizes(obs.screen_size)
        stated = size if c.version == "2.5" else (c.grid, c.grid)
        system = self.system_text(*stated)
        progress = progress_text(self.progress)
        user_text = self.user.render(instruction=obs.instruction, progress=progress)
        trace.prompt = {**trace.prompt, "rendered_sha256_12": sha12(system + user_text)}
        trace.lap("prompt")
        policy = self.policy()
        parts: list[dict[str, Any]] = [{"type": "text", "text": user_text}]
        earlier = self.shots[-(c.history - 1):] if c.history > 1 else []
        for k, png in enumerate(earlier):
            enc = encode_image(png, policy, size=sent)
            trace.images.append(image_record(enc, f"earlier {len(earlier) - k}", size))
            parts += [{"type": "text", "text": f"Screenshot {len(earlier) - k} step(s) ago:"}, enc.part()]
        enc = encode_image(obs.screenshot, policy, size=sent)
        trace.images.append(image_record(enc, "current", size))
        if earlier:
            parts.append({"type": "text", "text": "Current screenshot:"})
        parts.append(enc.part())
        messages = [{"role": "system", "content": system}, {"role": "user", "content": parts}]
        if not self.refused_open:  # the last proposal was not refused: its step is done
            self.refused = []
        self.refused_open = False
        for said, told in self.refused:  # this step's refused proposals and why (reflect)
            messages += [{"role": "assistant", "content": said}, {"role": "user", "content": told}]
        trace.lap("encode")
        trace.extra.update({"history": c.history, "version": c.version, "resized": list(size)})
        res = self.chat(messages, trace, "action")
        parsed, err = read_reply(lambda t: parse_detailed(t, obs.screen_size, c.version, c.grid, c.max_pixels,
                                                          c.min_pixels), res.text)
        self.shots.append(obs.screenshot)
        self.progress.append(self._progress_entry(res.text, parsed, err))
        self.reply = res.text
        return self.output(res.text, parsed, err, trace, obs.step)


@AGENTS.register("qwen", QwenConfig, help="Qwen2.5-VL / Qwen3-VL mobile_use function call (version=2.5|3)")
def _build(config: QwenConfig) -> QwenAgent:
    return QwenAgent(config, "qwen")
