"""The UI-TARS family's mobile protocols, one agent per release: ``uitars-v1`` (UI-TARS v1),
``uitars`` (UI-TARS-1.5) and ``doubao`` (Doubao-1.5-UI-TARS / Seed, the ``ui-tars`` package's
current prompts). Each variant fixes its prompt, coordinate space, point notation and history form;
nothing about coordinates is a default that another variant could inherit.

Facts, from the ``ui-tars`` package (0.5.1) and bytedance/UI-TARS:

- ``doubao``: the package's ``ui_tars.prompt.MOBILE_USE_DOUBAO`` as it ships; points are
  ``<point>x y</point>`` on the 0-1000 grid (``point=``, ``start_point=``/``end_point=``); no system
  turn; history turns are the model's own outputs as written.
- ``uitars`` (UI-TARS-1.5): the mobile prompt as released (codes/prompts.py ``MOBILE_USE`` at commit
  6b315cc, README "MOBILE_USE"), which is MOBILE_USE_DOUBAO with the 1.5 notation:
  ``start_box='<|box_start|>(x1,y1)<|box_end|>'`` and ``drag(start_box=..., end_box=...)``. It is built
  here from the package constant by exactly that substitution; :data:`RELEASED_SHA256` is the released
  text's sha256 (a test checks the two agree). Points are absolute pixels of the screenshot after
  ``smart_resize`` (factor 28, 100x28x28 to 16384x28x28 pixels; README_coordinates.md). The deploy
  example (README_deploy.md, data/training_example.json) sends a system turn "You are a helpful
  assistant." and writes earlier assistant turns with the box tokens back in (``add_box_token``).
- ``uitars-v1`` (UI-TARS v1, README_v1.md "Prompt template for mobile"): click(start_box),
  long_press(start_box, time), type(content), ``scroll(start_box, end_box)`` (two points, no
  direction: the finger's path), press_home, press_back, finished(content); the 0-1000 grid; box
  tokens in the action space and in history turns as in 1.5; no system turn in the example (the
  Qwen2-VL chat template adds its default one). The prompt's frame (introduction, output format,
  notes) is the package constant's; the action lines are v1's, the finished() comment ours.

Common to all three:

- Messages: [system], a user turn with the prompt (thought language and instruction filled in), then
  per earlier step a user turn with its screenshot (only the last ``history`` screenshots are sent,
  the current one included; README_v1 serves with ``--limit-mm-per-prompt image=5``) and an assistant
  turn with the model's output, then the current screenshot.
- Images: sent at exactly the ``smart_resize`` size, so the model points in what it sees.
- Parsing: the output is normalised (agents.parsing), rewritten as one canonical call and read by the
  package's ``parse_action_to_structure_output(factor=1000, model_type="qwen25vl")`` for 1.5 (0-1
  fractions of the resized image) or ``"qwen2vl"`` for the 0-1000 variants; ``harness.core.actions.to_device``
  maps the fractions to device pixels. A trailing newline in ``type`` submits; ``scroll(direction)``
  is the content direction (``down`` shows what is below: the finger moves up); ``drag`` and the
  two-point ``scroll`` are the finger's path; ``finished(content)`` with an answer is an Answer then a
  Finish on the next step.
- A ``<point>``/``<bbox>`` point under ``uitars`` (1.5) is refused: that notation is Doubao's 0-1000
  grid, and read as 1.5 pixels it would land in the wrong place (run such a model as ``doubao``).
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Literal

from ui_tars.action_parser import parse_action_to_structure_output, smart_resize
from ui_tars.prompt import MOBILE_USE_DOUBAO

from harness.core.actions import Action, CoordSpace, from_device, to_device
from harness.core.episode import AgentOutput, Observation
from harness.client.config import ModelConfig
from harness.client.images import encode_image, user_message
from harness.core.registry import AGENTS

from agents.common import ModelAgent, ServerResize, StepTrace, encoding_note, image_record, language_name, send_size
from agents.parsing import (ParseError, Parsed, TarsNotation, device_point, first_tars_call, map_tars_call,
                            numbers_in, point_of, quote_text, register_parser, tars_call, _fmt)
from agents.prompts import Prompt, identity

FACTOR = 28
MIN_PIXELS = 100 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
# UI-TARS v1 and 1.5 are Qwen2-VL / Qwen2.5-VL models: served by vLLM, SGLang or transformers, their
# processor smart_resizes every image itself (preprocessor_config.json: 3136 to 12845056 pixels)
QWEN2_PROCESSOR = ServerResize(28, 56 * 56, 16384 * 28 * 28,
                               "Qwen2-VL / Qwen2.5-VL processor: factor 28, 3136 to 12845056 pixels, bicubic")
KNOWN = {"click", "long_press", "type", "scroll", "open_app", "drag", "press_home", "press_back", "wait",
         "finished", "hotkey", "press", "left_double", "right_single", "call_user", "swipe", "left_single",
         "double_tap"}

try:
    _UITARS_VERSION = metadata.version("ui-tars")
except metadata.PackageNotFoundError:  # pragma: no cover
    _UITARS_VERSION = "unknown"

# --- the three prompts ---------------------------------------------------------------------------
# Doubao's point notation -> UI-TARS-1.5's (the only differences between the two released prompts)
_TO_BOX_NOTATION = (
    ("click(point='<point>x1 y1</point>')", "click(start_box='<|box_start|>(x1,y1)<|box_end|>')"),
    ("long_press(point='<point>x1 y1</point>')", "long_press(start_box='<|box_start|>(x1,y1)<|box_end|>')"),
    ("scroll(point='<point>x1 y1</point>'", "scroll(start_box='<|box_start|>(x1,y1)<|box_end|>'"),
    ("drag(start_point='<point>x1 y1</point>', end_point='<point>x2 y2</point>')",
     "drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')"),
)
# sha256 of UI-TARS-1.5's mobile prompt as released (bytedance/UI-TARS codes/prompts.py MOBILE_USE, 6b315cc)
RELEASED_SHA256 = {"uitars": "2367ade469667c65cc6c7f2a85cab969a2a6192ccc0bd5bda24a88253832c6e7"}

# UI-TARS v1's mobile action space (README_v1.md, "Prompt template for mobile")
_V1_ACTIONS = """click(start_box='<|box_start|>(x1,y1)<|box_end|>')
long_press(start_box='<|box_start|>(x1,y1)<|box_end|>', time='')
type(content='')
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
press_home()
press_back()
finished(content='') # End the task, whether it succeeded or not."""


def _tars15_prompt() -> str:
    text = MOBILE_USE_DOUBAO
    for old, new in _TO_BOX_NOTATION:
        if old not in text:  # a package release that changed the constant: refuse rather than send a hybrid
            raise RuntimeError(f"ui-tars {_UITARS_VERSION}: MOBILE_USE_DOUBAO no longer holds {old!r}")
        text = text.replace(old, new)
    return text


def _v1_prompt() -> str:
    head, sep, rest = MOBILE_USE_DOUBAO.partition("## Action Space\n\n")
    _, sep2, tail = rest.partition("\n\n\n## Note")
    if not (sep and sep2):  # pragma: no cover - guards a changed package constant
        raise RuntimeError(f"ui-tars {_UITARS_VERSION}: MOBILE_USE_DOUBAO has no '## Action Space' block")
    return head + sep + _V1_ACTIONS + sep2 + tail


_SRC = f"ui-tars {_UITARS_VERSION}: ui_tars/prompt.py MOBILE_USE_DOUBAO"
PROMPTS: dict[str, Prompt] = {
    "doubao": identity("ui_tars.MOBILE_USE_DOUBAO", _UITARS_VERSION, MOBILE_USE_DOUBAO, _SRC),
    "uitars": identity("ui_tars.MOBILE_USE_1.5", _UITARS_VERSION, _tars15_prompt(),
                       f"{_SRC}, in UI-TARS-1.5's <|box_start|>(x,y)<|box_end|> notation (= UI-TARS codes/prompts.py "
                       "MOBILE_USE @6b315cc)"),
    "uitars-v1": identity("ui_tars.MOBILE_USE_V1", _UITARS_VERSION, _v1_prompt(),
                          f"{_SRC} frame with UI-TARS v1's mobile action space (README_v1.md)"),
}

_POINT_WORDS = re.compile(r"((?:start|end)_box)='\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)'")


def with_box_tokens(text: str) -> str:
    """``start_box='(x,y)'`` -> ``start_box='<|box_start|>(x,y)<|box_end|>'`` (what the 1.5 deploy
    example does to earlier assistant turns: servers that skip special tokens strip them from the
    model's output, and the model was trained on turns that hold them)."""
    return _POINT_WORDS.sub(lambda m: f"{m.group(1)}='<|box_start|>({m.group(2)},{m.group(3)})<|box_end|>'", text)


@dataclass(frozen=True)
class Variant:
    """One release of the protocol: everything that differs between v1, 1.5 and Doubao."""

    name: str
    release: str
    space: CoordSpace              # RESIZED: pixels of the smart_resize'd screenshot; THOUSAND: 0-1000
    notation: TarsNotation         # how calls are written in history turns
    box_tokens: bool               # history turns carry <|box_start|>/<|box_end|> around points
    system: str | None             # the system turn, when the release sends one
    doubao_points_ok: bool         # <point>/<bbox> are in this variant's space
    server: ServerResize | None    # the resize its servers do themselves (None: not known, e.g. a hosted API)
    as_captured: str | None = None  # why its deployment is sent the screenshot as captured (0-1000 grids only)

    @property
    def prompt(self) -> Prompt:
        return PROMPTS[self.name]

    @property
    def model_type(self) -> str:
        """The ui-tars parser's mode: qwen25vl reads absolute pixels, qwen2vl the 0-1000 grid."""
        return "qwen25vl" if self.space is CoordSpace.RESIZED else "qwen2vl"

    def coordinate_space(self) -> str:
        return "resized (smart_resize, factor 28)" if self.space is CoordSpace.RESIZED else "thousand (0-1000)"

    def history_turn(self, said: str) -> str:
        return with_box_tokens(said) if self.box_tokens else said


VARIANTS: dict[str, Variant] = {
    "uitars-v1": Variant("uitars-v1", "UI-TARS v1 (README_v1.md)", CoordSpace.THOUSAND,
                         TarsNotation(points="box", swipe="two_points"), box_tokens=True, system=None,
                         doubao_points_ok=True, server=QWEN2_PROCESSOR),
    "uitars": Variant("uitars", "UI-TARS-1.5 (README.md, README_deploy.md)", CoordSpace.RESIZED,
                      TarsNotation(points="box", swipe="direction"), box_tokens=True,
                      system="You are a helpful assistant.", doubao_points_ok=False, server=QWEN2_PROCESSOR),
    "doubao": Variant("doubao", "Doubao-1.5-UI-TARS / Seed (ui-tars package prompts)", CoordSpace.THOUSAND,
                      TarsNotation(points="point", swipe="direction"), box_tokens=False, system=None,
                      doubao_points_ok=True, server=None,  # Volcengine's API: its resize is not published
                      # the ui-tars package README (0.5.1, "Parse output into structured actions") maps a
                      # Doubao point with factor=1000 against the original screenshot's width and height
                      as_captured="the ui-tars package maps Doubao's 0-1000 points against the original screenshot, "
                                  "so it is sent as captured (a point lands on the same phone pixel at any size)"),
}


def resized_size(screen: tuple[int, int], min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """(width, height) of the screenshot as UI-TARS sees it (``smart_resize`` works in (h, w))."""
    w, h = screen
    rh, rw = smart_resize(h, w, factor=FACTOR, min_pixels=min_pixels, max_pixels=max_pixels)
    return rw, rh


def parse_detailed(text: str, screen_size: tuple[int, int], variant: str = "uitars",
                   max_pixels: int = MAX_PIXELS, min_pixels: int = MIN_PIXELS) -> Parsed:
    """One output of ``variant`` (uitars, uitars-v1, doubao) as unified actions in device pixels."""
    if variant not in VARIANTS:
        raise ParseError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    v = VARIANTS[variant]
    w, h = screen_size
    call, args, thought, notes = first_tars_call(text, KNOWN)
    resized = resized_size(screen_size, min_pixels, max_pixels)
    parts = []
    for k, val in args.items():
        if k in ("start_box", "end_box"):
            if not v.doubao_points_ok and re.search(r"<(point|bbox)>", val):
                raise ParseError(f"{k}: {val[:40]!r} is Doubao's <point>/<bbox> notation on the 0-1000 grid, not "
                                 f"{v.release}'s pixels of the resized screenshot; a model that writes it runs as "
                                 "--agent doubao")
            x, y = point_of(val, k, notes)
            device_point(x, y, v.space, screen_size, resized, what=k)  # refuses out-of-range points
            parts.append(f"{k}='({_fmt(x)},{_fmt(y)})'")
        else:
            parts.append(f"{k}='{quote_text(val)}'")
    canon = f"{call.name}({', '.join(parts)})"
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the package prints on failure
            out = parse_action_to_structure_output(
                "Action: " + canon, factor=1000, origin_resized_height=h, origin_resized_width=w,
                model_type=v.model_type, max_pixels=max_pixels, min_pixels=min_pixels)
    except Exception as e:  # noqa: BLE001  (the package raises ValueError, AssertionError, SyntaxError...)
        raise ParseError(f"the ui-tars parser refused {canon!r}: {type(e).__name__}: {e}") from None
    if not out:
        raise ParseError(f"the ui-tars parser found no action in {canon!r}")
    first = out[0]
    inputs = {k: val for k, val in (first.get("action_inputs") or {}).items()}
    name = first.get("action_type") or call.name

    def point(key: str) -> tuple[int, int]:
        val = inputs.get(key)
        if not val:
            raise ParseError(f"{name}(...) needs {key}")
        fr = numbers_in(str(val))
        if len(fr) < 2:
            raise ParseError(f"{name}: {key} is not a point: {val!r}")
        return to_device(fr[0], fr[1], CoordSpace.UNIT, screen_size)

    actions = map_tars_call(name, inputs, point, screen_size, notes)
    raw = {"action_type": name, "action_inputs": inputs, "model_args": call.args, "call": canon,
           "variant": variant, "coordinate_space": v.space.value, "resized": list(resized)}
    return Parsed(actions=actions, raw=raw, thought=thought or first.get("thought"), notes=notes)


def parse_output(text: str, screen_size: tuple[int, int], **opts: Any) -> Action:
    """The unified action (device pixels) for one UI-TARS-family output; raises ParseError."""
    return parse_detailed(text, screen_size, **opts).action


_CLI_OPTS = {"max_pixels": f"smart_resize max_pixels (default {MAX_PIXELS})",
             "min_pixels": f"smart_resize min_pixels (default {MIN_PIXELS})"}


def _cli_for(variant: str) -> Any:
    def parse(text: str, screen_size: tuple[int, int], max_pixels: str | int = MAX_PIXELS,
              min_pixels: str | int = MIN_PIXELS, **_: Any) -> Parsed:
        return parse_detailed(text, screen_size, variant, max_pixels=int(max_pixels), min_pixels=int(min_pixels))
    return parse


for _name in VARIANTS:
    register_parser(_name, _cli_for(_name), _CLI_OPTS)


# --- the agent ---------------------------------------------------------------------------------
@dataclass
class UITarsConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint (from --model-base-url/--model)"})
    history: int = field(default=5, metadata={"help": "screenshots per request, the current one included"})
    lang: Literal["auto", "en", "zh"] = field(default="auto", metadata={"help": "language of the Thought (auto: the task's)"})
    max_pixels: int = field(default=MAX_PIXELS, metadata={"help": "smart_resize max_pixels"})
    min_pixels: int = field(default=MIN_PIXELS, metadata={"help": "smart_resize min_pixels"})
    image_format: Literal["png", "jpeg"] = field(default="png", metadata={"help": "screenshot encoding"})
    jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality when image_format=jpeg"})
    send: Literal["auto", "resized"] = field(default="auto", metadata={
        "help": "auto: the captured PNG as it is where the release's server resizes it to the same size itself "
                "(uitars, uitars-v1 on vLLM/SGLang); resized: always resize here"})

    def __post_init__(self) -> None:
        if self.history < 1:
            raise ValueError("history must be >= 1 (the current screenshot)")
        if not 28 * 28 <= self.min_pixels <= self.max_pixels:
            raise ValueError("need 784 <= min_pixels <= max_pixels")


class UITarsAgent(ModelAgent):
    family = "uitars"

    def __init__(self, config: UITarsConfig, name: str = "uitars"):
        super().__init__(config, name)
        self.variant = VARIANTS[name]

    def spec(self) -> dict[str, Any]:
        v = self.variant
        c = self.config
        return {**self.base_spec(), "prompt": v.prompt.to_json(), "ui_tars_version": _UITARS_VERSION,
                "variant": v.name, "release": v.release, "coordinate_space": v.coordinate_space(),
                "system_turn": v.system, "history_box_tokens": v.box_tokens,
                "image_encoding": encoding_note(v.server, c.send, c.image_format, v.as_captured),
                "server_resize": v.server.to_json() if v.server else None}

    def _sizes(self, screen: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int] | None]:
        """(the smart_resize'd size the model points in, the size to encode at: None = as captured)."""
        c = self.config
        size = resized_size(screen, c.min_pixels, c.max_pixels)
        return size, send_size(screen, size, self.variant.server, c.send, c.image_format, self.variant.as_captured)

    def encodings(self, screen: tuple[int, int]) -> list[tuple[Any, tuple[int, int] | None]]:
        return [(self.policy(), self._sizes(screen)[1])]

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        """A ground-truth action as this variant's model writes it (``set_history``), in its space
        and notation: ``Action: click(start_box='(546,1204)')`` (1.5: smart_resize'd pixels; v1 0-1000,
        a swipe as ``scroll(start_box, end_box)``), Doubao ``click(point='<point>500 500</point>')``."""
        c, v = self.config, self.variant
        resized = resized_size(screen, c.min_pixels, c.max_pixels)
        return "Action: " + tars_call(action, lambda x, y: from_device(x, y, v.space, screen, resized), v.notation)

    def model_step(self, obs: Observation) -> AgentOutput:
        c, v = self.config, self.variant
        trace = StepTrace(prompt=v.prompt.to_json())
        size, sent = self._sizes(obs.screen_size)
        server_size = size if v.server is not None else None  # what its server resizes a captured PNG to
        lang = language_name(c.lang, obs.language)
        text = v.prompt.text.replace("{language}", lang).replace("{instruction}", obs.instruction)
        trace.lap("prompt")
        policy = self.policy()
        first_kept = self.first_kept(c.history)
        messages: list[dict[str, Any]] = [{"role": "system", "content": v.system}] if v.system else []
        messages.append(user_message(text))
        if -1 in self.told:  # feedback before any turn of the model's
            messages.append(user_message(self.told[-1]))
        for i, (png, said) in enumerate(self.turns):
            if i >= first_kept:
                enc = encode_image(png, policy, size=sent)
                trace.images.append(image_record(enc, f"step {i + 1}", server_size))
                messages.append({"role": "user", "content": [enc.part()]})
            messages.append({"role": "assistant", "content": v.history_turn(said)})
            if i in self.told:  # the turn's action was refused: what the agent was told (reflect)
                messages.append(user_message(self.told[i]))
        enc = encode_image(obs.screenshot, policy, size=sent)
        trace.images.append(image_record(enc, "current", server_size))
        messages.append({"role": "user", "content": [enc.part()]})
        trace.lap("encode")
        trace.extra.update({"history": c.history, "thought_language": lang, "resized": list(size), "variant": v.name})
        res = self.chat(messages, trace, "action")
        return self.conclude(res, lambda t: parse_detailed(t, obs.screen_size, v.name, c.max_pixels, c.min_pixels),
                             obs.screenshot, trace, obs.step)


@AGENTS.register("uitars", UITarsConfig, help="UI-TARS-1.5 mobile protocol (<|box_start|> points, smart_resize'd pixels)")
def _build(config: UITarsConfig) -> UITarsAgent:
    return UITarsAgent(config, "uitars")


@AGENTS.register("uitars-v1", UITarsConfig, help="UI-TARS v1 mobile protocol (0-1000 grid, two-point scroll)")
def _build_v1(config: UITarsConfig) -> UITarsAgent:
    return UITarsAgent(config, "uitars-v1")


@AGENTS.register("doubao", UITarsConfig, help="Doubao-1.5-UI-TARS / Seed: the ui-tars package's MOBILE_USE_DOUBAO (<point> 0-1000)")
def _build_doubao(config: UITarsConfig) -> UITarsAgent:
    return UITarsAgent(config, "doubao")
