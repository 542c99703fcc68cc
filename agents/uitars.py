"""``uitars`` and ``uitars-v1``: the UI-TARS mobile protocol.

Protocol (facts from the ``ui-tars`` package 0.5.1 and FIELD_NOTES section 7):

- Prompt: the package's own ``ui_tars.prompt.MOBILE_USE_DOUBAO`` constant, with ``{language}``
  (the thought's language) and ``{instruction}`` filled in; its identity is recorded.
- Messages (as the UI-TARS deploy examples lay them out): a user turn holding the prompt, then for
  each earlier step a user turn with its screenshot (only the last ``history`` screenshots are
  sent, the current one included) and an assistant turn with the model's own output, then the
  current screenshot.
- Output: ``Thought: ...`` then ``Action: <call>``; calls click, long_press, type, scroll,
  open_app, drag, press_home, press_back, wait, finished(content). Points are written
  ``<point>x y</point>`` (the prompt's form) or ``(x,y)`` / ``<|box_start|>(x,y)<|box_end|>``
  (UI-TARS-1.5's own habit).
- Coordinates: ``uitars`` (UI-TARS-1.5): absolute pixels of the screenshot after
  ``smart_resize`` (factor 28, ``min_pixels``..``max_pixels``); the screenshot is sent at exactly
  that size, so what the model sees is what it points in. ``uitars-v1`` (UI-TARS v1): the 0-1000
  grid.
- Conversion: the output is normalised (see agents.parsing), rewritten as one canonical call and
  read by the package's ``parse_action_to_structure_output(factor=1000, origin_resized_height=H,
  origin_resized_width=W, model_type="qwen25vl")`` (``"qwen2vl"`` for v1), which gives 0-1
  fractions of the resized image; ``harness.actions.to_device`` maps those to device pixels.
- ``type(content)`` with a trailing newline submits (TypeText(submit=True)).
- ``scroll(direction)`` is the content direction: ``down`` shows what is below, so the finger
  moves up (the package's computer prompt: "Show more information on the direction side").
  ``drag(start, end)`` is the finger's path.
- ``finished(content)``: when ``content`` is not empty the step is an Answer (the runner keeps the
  episode's last answer for the judges) and the next step is the Finish, without a model call;
  ``finished()`` is a Finish.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Literal

from ui_tars.action_parser import parse_action_to_structure_output, smart_resize
from ui_tars.prompt import MOBILE_USE_DOUBAO

from harness.actions import Action, CoordSpace, from_device, to_device
from harness.episode import AgentOutput, Observation
from harness.model import ModelConfig, encode_image, user_message
from harness.registry import AGENTS

from agents.common import ModelAgent, StepTrace, image_record, language_name
from agents.parsing import (ParseError, Parsed, device_point, first_tars_call, map_tars_call, numbers_in, point_of,
                            quote_text, register_parser, tars_call, _fmt)
from agents.prompts import identity

FACTOR = 28
MIN_PIXELS = 100 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
KNOWN = {"click", "long_press", "type", "scroll", "open_app", "drag", "press_home", "press_back", "wait",
         "finished", "hotkey", "press", "left_double", "right_single", "call_user", "swipe", "left_single"}

try:
    _UITARS_VERSION = metadata.version("ui-tars")
except metadata.PackageNotFoundError:  # pragma: no cover
    _UITARS_VERSION = "unknown"

PROMPT = identity("ui_tars.MOBILE_USE_DOUBAO", _UITARS_VERSION, MOBILE_USE_DOUBAO,
                  f"ui-tars {_UITARS_VERSION}: ui_tars/prompt.py MOBILE_USE_DOUBAO")


def resized_size(screen: tuple[int, int], min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """(width, height) of the screenshot as UI-TARS sees it (``smart_resize`` works in (h, w))."""
    w, h = screen
    rh, rw = smart_resize(h, w, factor=FACTOR, min_pixels=min_pixels, max_pixels=max_pixels)
    return rw, rh


def parse_detailed(text: str, screen_size: tuple[int, int], coords: str = "resized",
                   max_pixels: int = MAX_PIXELS, min_pixels: int = MIN_PIXELS) -> Parsed:
    w, h = screen_size
    if coords not in ("resized", "thousand"):
        raise ParseError(f"coords must be resized or thousand, got {coords!r}")
    call, args, thought, notes = first_tars_call(text, KNOWN)
    space = CoordSpace.RESIZED if coords == "resized" else CoordSpace.THOUSAND
    resized = resized_size(screen_size, min_pixels, max_pixels)
    parts = []
    for k, v in args.items():
        if k in ("start_box", "end_box"):
            x, y = point_of(v, k, notes)
            device_point(x, y, space, screen_size, resized, what=k)  # refuses out-of-range points
            parts.append(f"{k}='({_fmt(x)},{_fmt(y)})'")
        else:
            parts.append(f"{k}='{quote_text(v)}'")
    canon = f"{call.name}({', '.join(parts)})"
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the package prints on failure
            out = parse_action_to_structure_output(
                "Action: " + canon, factor=1000, origin_resized_height=h, origin_resized_width=w,
                model_type="qwen25vl" if space is CoordSpace.RESIZED else "qwen2vl",
                max_pixels=max_pixels, min_pixels=min_pixels)
    except Exception as e:  # noqa: BLE001  (the package raises ValueError, AssertionError, SyntaxError...)
        raise ParseError(f"the ui-tars parser refused {canon!r}: {type(e).__name__}: {e}") from None
    if not out:
        raise ParseError(f"the ui-tars parser found no action in {canon!r}")
    first = out[0]
    inputs = {k: v for k, v in (first.get("action_inputs") or {}).items()}
    name = first.get("action_type") or call.name

    def point(key: str) -> tuple[int, int]:
        v = inputs.get(key)
        if not v:
            raise ParseError(f"{name}(...) needs {key}")
        fr = numbers_in(str(v))
        if len(fr) < 2:
            raise ParseError(f"{name}: {key} is not a point: {v!r}")
        return to_device(fr[0], fr[1], CoordSpace.UNIT, screen_size)

    actions = map_tars_call(name, inputs, point, screen_size, notes)
    raw = {"action_type": name, "action_inputs": inputs, "model_args": call.args, "call": canon,
           "coords": coords, "resized": list(resized)}
    return Parsed(actions=actions, raw=raw, thought=thought or first.get("thought"), notes=notes)


def parse_output(text: str, screen_size: tuple[int, int], **opts: Any) -> Action:
    """The unified action (device pixels) for one UI-TARS output; raises ParseError."""
    return parse_detailed(text, screen_size, **opts).action


def _cli(text: str, screen_size: tuple[int, int], coords: str = "resized", max_pixels: str | int = MAX_PIXELS,
         min_pixels: str | int = MIN_PIXELS, **_: Any) -> Parsed:
    return parse_detailed(text, screen_size, coords=coords, max_pixels=int(max_pixels), min_pixels=int(min_pixels))


_CLI_OPTS = {"coords": "resized (UI-TARS-1.5, default for uitars) or thousand (default for uitars-v1)",
             "max_pixels": f"smart_resize max_pixels (default {MAX_PIXELS})",
             "min_pixels": f"smart_resize min_pixels (default {MIN_PIXELS})"}
register_parser("uitars", _cli, _CLI_OPTS)
register_parser("uitars-v1", lambda text, size, **o: _cli(text, size, **{"coords": "thousand", **o}), _CLI_OPTS)


# --- the agent ---------------------------------------------------------------------------------
@dataclass
class UITarsConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint (from --model-base-url/--model)"})
    history: int = field(default=5, metadata={"help": "screenshots per request, the current one included"})
    lang: Literal["auto", "en", "zh"] = field(default="auto", metadata={"help": "language of the Thought (auto: the task's)"})
    coords: Literal["resized", "thousand"] = field(default="resized", metadata={
        "help": "resized: pixels of the smart_resize'd screenshot (UI-TARS-1.5); thousand: 0-1000 (v1)"})
    max_pixels: int = field(default=MAX_PIXELS, metadata={"help": "smart_resize max_pixels"})
    min_pixels: int = field(default=MIN_PIXELS, metadata={"help": "smart_resize min_pixels"})
    image_format: Literal["png", "jpeg"] = field(default="png", metadata={"help": "screenshot encoding"})
    jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality when image_format=jpeg"})

    def __post_init__(self) -> None:
        if self.history < 1:
            raise ValueError("history must be >= 1 (the current screenshot)")
        if not 28 * 28 <= self.min_pixels <= self.max_pixels:
            raise ValueError("need 784 <= min_pixels <= max_pixels")


@dataclass
class UITarsV1Config(UITarsConfig):
    coords: Literal["resized", "thousand"] = field(default="thousand", metadata={
        "help": "thousand: the 0-1000 grid of UI-TARS v1"})


class UITarsAgent(ModelAgent):
    family = "uitars"

    def __init__(self, config: UITarsConfig, name: str = "uitars"):
        super().__init__(config, name)

    def spec(self) -> dict[str, Any]:
        return {**self.base_spec(), "prompt": PROMPT.to_json(), "ui_tars_version": _UITARS_VERSION,
                "coordinate_space": "resized (smart_resize, factor 28)" if self.config.coords == "resized" else "thousand"}

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        """A ground-truth action as UI-TARS writes it (``set_history``): ``Action: click(start_box='(x,y)')``
        in the model's space (smart_resize'd pixels, or 0-1000 for v1), no Thought."""
        c = self.config
        space = CoordSpace.RESIZED if c.coords == "resized" else CoordSpace.THOUSAND
        resized = resized_size(screen, c.min_pixels, c.max_pixels)
        return "Action: " + tars_call(action, lambda x, y: from_device(x, y, space, screen, resized))

    def model_step(self, obs: Observation) -> AgentOutput:
        c = self.config
        trace = StepTrace(prompt=PROMPT.to_json())
        size = resized_size(obs.screen_size, c.min_pixels, c.max_pixels)
        lang = language_name(c.lang, obs.language)
        text = MOBILE_USE_DOUBAO.replace("{language}", lang).replace("{instruction}", obs.instruction)
        trace.lap("prompt")
        policy = self.policy()
        first_kept = self.first_kept(c.history)
        messages: list[dict[str, Any]] = [user_message(text)]
        for i, (png, said) in enumerate(self.turns):
            if i >= first_kept:
                enc = encode_image(png, policy, size=size)
                trace.images.append(image_record(enc, f"step {i + 1}"))
                messages.append({"role": "user", "content": [enc.part()]})
            messages.append({"role": "assistant", "content": said})
        enc = encode_image(obs.screenshot, policy, size=size)
        trace.images.append(image_record(enc, "current"))
        messages.append({"role": "user", "content": [enc.part()]})
        trace.lap("encode")
        trace.extra.update({"history": c.history, "thought_language": lang, "resized": list(size)})
        res = self.chat(messages, trace, "action")
        return self.conclude(res, lambda text: parse_detailed(text, obs.screen_size, c.coords, c.max_pixels,
                                                              c.min_pixels), obs.screenshot, trace, obs.step)


@AGENTS.register("uitars", UITarsConfig, help="UI-TARS-1.5 mobile protocol (smart_resize'd pixel coordinates)")
def _build(config: UITarsConfig) -> UITarsAgent:
    return UITarsAgent(config, "uitars")


@AGENTS.register("uitars-v1", UITarsV1Config, help="UI-TARS v1 mobile protocol (0-1000 coordinates)")
def _build_v1(config: UITarsV1Config) -> UITarsAgent:
    return UITarsAgent(config, "uitars-v1")
