"""``vlm``: a prompted agent for general vision-language models (GPT-4o, Claude, Gemini), in the
style of AndroidLens's unified prompt (seed 002, appendix E.1; our own text in
``agents/prompts/vlm_en.md`` and ``vlm_zh.md``).

Protocol:

- System prompt: output ``Thought: ...`` then ``Action: <call>``; calls click(start_box='(x,y)'),
  long_press(start_box, time), type(content), scroll(start_box, direction), drag(start_box,
  end_box), open_app(app_name), press_back(), press_home(), wait(), finished(content).
  ``{language}`` of the thought and the instruction are filled in (AndroidLens's placeholders).
- Conversation: earlier steps as user turns with their screenshot (the last ``history``
  screenshots, the current one included) and assistant turns with the model's output; older steps
  keep only their text. Consecutive turns of one role are merged, so the roles alternate (some
  hosted APIs require it).
- Coordinates per model family (AndroidLens: GPT-4o and Claude absolute, Gemini relative 0-1000):
  ``coords=pixels`` means pixels of the screenshot as sent (its size is stated in the prompt; it
  may be smaller than the screen, see ``max_side``), ``coords=thousand`` the 0-1000 grid.
- ``scroll(direction)`` is the content direction (``down`` shows what is below: the finger moves
  up); ``drag`` is the finger's path; ``type`` text ending in a newline submits;
  ``finished(content)`` with an answer is an Answer then a Finish on the next step.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.core.actions import Action, CoordSpace, from_device
from harness.core.episode import AgentOutput, Observation
from harness.client.config import ModelConfig
from harness.client.images import ImagePolicy, encode_image
from harness.core.registry import AGENTS

from agents.common import ModelAgent, StepTrace, image_record
from agents.parsing import (ParseError, Parsed, device_point, first_tars_call, map_tars_call, point_of,
                            register_parser, tars_call)
from agents.prompts import load_prompt

KNOWN = {"click", "long_press", "type", "scroll", "drag", "open_app", "press_back", "press_home", "wait",
         "finished", "swipe", "press_enter", "hotkey", "left_double", "call_user", "double_tap"}

_COORDS = {
    ("pixels", "en"): "Points are pixels of the screenshot you see: x counts from the left edge (0-{w}), y from the "
                      "top edge (0-{h}). The screenshot is {w}x{h} pixels.",
    ("thousand", "en"): "Points are relative, on a 0-1000 grid: (0,0) is the top-left corner and (1000,1000) the "
                        "bottom-right corner of the screen, whatever the screenshot's size.",
    ("pixels", "zh"): "坐标是截图的像素：x 从左边缘算起（0-{w}），y 从上边缘算起（0-{h}）。截图尺寸为 {w}x{h} 像素。",
    ("thousand", "zh"): "坐标是 0-1000 的相对坐标：(0,0) 是屏幕左上角，(1000,1000) 是右下角，与截图尺寸无关。",
}
_LANGUAGE = {"en": "English", "zh": "中文"}


def parse_detailed(text: str, screen_size: tuple[int, int], coords: str = "pixels",
                   image_size: tuple[int, int] | None = None) -> Parsed:
    """``image_size``: the size of the screenshot the model saw (pixels mode); default the screen."""
    if coords not in ("pixels", "thousand"):
        raise ParseError(f"coords must be pixels or thousand, got {coords!r}")
    call, args, thought, notes = first_tars_call(text, KNOWN)
    if coords == "thousand":
        space, resized = CoordSpace.THOUSAND, None
    elif image_size and tuple(image_size) != tuple(screen_size):
        space, resized = CoordSpace.RESIZED, tuple(image_size)
    else:
        space, resized = CoordSpace.PIXELS, None
    model_points: dict[str, list[float]] = {}

    def point(key: str) -> tuple[int, int]:
        v = args.get(key)
        if not v:
            raise ParseError(f"{call.name}(...) needs {key}")
        x, y = point_of(v, key, notes)
        model_points[key] = [x, y]
        return device_point(x, y, space, screen_size, resized, what=key)

    actions = map_tars_call(call.name, args, point, screen_size, notes)
    raw = {"action": call.name, "args": call.args, "points": model_points, "coords": coords,
           **({"image_size": list(resized)} if resized else {})}
    return Parsed(actions=actions, raw=raw, thought=thought, notes=notes)


def parse_output(text: str, screen_size: tuple[int, int], **opts: Any) -> Action:
    return parse_detailed(text, screen_size, **opts).action


def _cli(text: str, screen_size: tuple[int, int], coords: str = "pixels", image_size: str | None = None,
         **_: Any) -> Parsed:
    size = None
    if image_size:
        try:
            iw, ih = (int(v) for v in str(image_size).lower().split("x"))
        except ValueError:
            raise ParseError(f"image_size must be WIDTHxHEIGHT, got {image_size!r}") from None
        size = (iw, ih)
    return parse_detailed(text, screen_size, coords=coords, image_size=size)


register_parser("vlm", _cli, {"coords": "pixels (default) or thousand",
                              "image_size": "WxH of the screenshot the model saw (pixels mode; default the screen)"})


# --- the agent ---------------------------------------------------------------------------------
@dataclass
class VLMConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint (from --model-base-url/--model)"})
    coords: Literal["pixels", "thousand"] = field(default="pixels", metadata={
        "help": "pixels of the screenshot sent (GPT-4o, Claude) or the 0-1000 grid (Gemini)"})
    lang: Literal["auto", "en", "zh"] = field(default="auto", metadata={
        "help": "prompt and Thought language (auto: the task's)"})
    history: int = field(default=3, metadata={"help": "screenshots per request, the current one included"})
    max_side: int = field(default=1280, metadata={"help": "longest side of the screenshot sent (0: full size)"})
    image_format: Literal["png", "jpeg"] = field(default="jpeg", metadata={"help": "screenshot encoding"})
    jpeg_quality: int = field(default=85, metadata={"help": "JPEG quality when image_format=jpeg"})

    def __post_init__(self) -> None:
        if self.history < 1:
            raise ValueError("history must be >= 1 (the current screenshot)")


def sent_size(screen: tuple[int, int], policy: ImagePolicy) -> tuple[int, int]:
    """The size a screenshot of ``screen`` is sent at under ``policy``'s caps (the rule of
    :func:`harness.client.images.encode_image` without ``size``)."""
    return policy.target(screen)


def merge_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge consecutive messages of one role (content parts concatenated)."""
    def parts(c: Any) -> list[dict[str, Any]]:
        return list(c) if isinstance(c, list) else [{"type": "text", "text": c}]

    out: list[dict[str, Any]] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            out[-1] = {"role": m["role"], "content": parts(out[-1]["content"]) + parts(m["content"])}
        else:
            out.append(dict(m))
    return out


class VLMAgent(ModelAgent):
    family = "vlm"

    def __init__(self, config: VLMConfig, name: str = "vlm"):
        super().__init__(config, name)
        self.prompts = {"en": load_prompt("vlm_en"), "zh": load_prompt("vlm_zh")}

    def spec(self) -> dict[str, Any]:
        c = self.config
        return {**self.base_spec(), "prompt": {code: p.to_json() for code, p in self.prompts.items()},
                "coordinate_space": "pixels of the screenshot sent" if c.coords == "pixels" else "thousand",
                "image_encoding": f"{c.image_format} (quality {c.jpeg_quality}) with the long side capped at "
                                  f"{c.max_side or 'none'}, bicubic; started as the screenshot arrives"}

    def encodings(self, screen: tuple[int, int]) -> list[tuple[Any, tuple[int, int] | None]]:
        return [(self.policy(), None)]

    def feedback_language(self) -> str:
        """The feedback turn is in the prompt's language (zh for a Chinese task with ``lang=auto``)."""
        code = self.config.lang if self.config.lang != "auto" else (self.ctx.task.language if self.ctx else "en")
        return code if code in self.prompts else "en"

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        """A ground-truth action as the vlm prompt asks for it (``set_history``): ``Action: <call>`` with
        points in pixels of the screenshot as sent (``max_side``), or on the 0-1000 grid."""
        if self.config.coords == "thousand":
            space, size = CoordSpace.THOUSAND, None
        else:
            space, size = CoordSpace.RESIZED, sent_size(screen, self.policy())
        return "Action: " + tars_call(action, lambda x, y: from_device(x, y, space, screen, size))

    def model_step(self, obs: Observation) -> AgentOutput:
        c = self.config
        code = (obs.language if c.lang == "auto" else c.lang)
        code = code if code in self.prompts else "en"
        prompt = self.prompts[code]
        trace = StepTrace(prompt=prompt.to_json())
        policy = self.policy()
        enc = encode_image(obs.screenshot, policy)  # started by prepare() as the screenshot arrived
        trace.lap("encode")
        size = (enc.width, enc.height)
        coords_text = _COORDS[(c.coords, code)].format(w=size[0], h=size[1])
        system = prompt.render(coordinates=coords_text, language=_LANGUAGE[code], instruction=obs.instruction)
        trace.prompt = {**prompt.to_json(), "rendered_sha256_12": hashlib.sha256(system.encode()).hexdigest()[:12]}
        trace.lap("prompt")
        first_kept = self.first_kept(c.history)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        if -1 in self.told:  # feedback before any turn of the model's
            messages.append({"role": "user", "content": self.told[-1]})
        older = [f"Step {i + 1}: {said}" + (f"\n{self.told[i]}" if i in self.told else "")
                 for i, (_, said) in enumerate(self.turns[:first_kept])]
        if older:
            messages.append({"role": "user", "content": "Earlier steps (screenshots not shown):\n" + "\n".join(older)})
        for i, (png, said) in enumerate(self.turns[first_kept:], start=first_kept):
            past = encode_image(png, policy)
            trace.images.append(image_record(past, f"step {i + 1}"))
            messages.append({"role": "user", "content": [{"type": "text", "text": f"Screenshot before step {i + 1}:"},
                                                         past.part()]})
            messages.append({"role": "assistant", "content": said})
            if i in self.told:  # the turn's action was refused: what the agent was told (reflect)
                messages.append({"role": "user", "content": self.told[i]})
        trace.images.append(image_record(enc, "current"))
        messages.append({"role": "user", "content": [{"type": "text", "text": "Current screenshot:"}, enc.part()]})
        messages = merge_roles(messages)
        trace.lap("encode")
        trace.extra.update({"history": c.history, "coords": c.coords, "image_size": list(size), "prompt_language": code})
        res = self.chat(messages, trace, "action")
        return self.conclude(res, lambda text: parse_detailed(text, obs.screen_size, c.coords,
                                                              size if c.coords == "pixels" else None),
                             obs.screenshot, trace, obs.step, empty="(empty output)")


@AGENTS.register("vlm", VLMConfig, help="prompted agent for general VLMs (AndroidLens-style; coords=pixels|thousand)")
def _build(config: VLMConfig) -> VLMAgent:
    return VLMAgent(config, "vlm")
