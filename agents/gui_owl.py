"""``gui-owl``: GUI-Owl (Mobile-Agent-v3) as an end-to-end phone agent, as X-PLUG/MobileAgent @11cea57 runs
it: Mobile-Agent-v3/android_world_v3/android_world/agents/gui_owl.py, mobile_agent_utils_new.py,
function_call_mobile_answer.py and coordinate_resize.py (AndroidWorld), and cookbook/end2end_usage.ipynb
with cookbook/utils/mobile_use.py (the real-phone cookbook). The wording of the prompts
(``agents/prompts/qwen25_mobile_use.md``, ``gui_owl_aw_mobile_use.md``, ``gui_owl_user.md``) is ours;
the tool's structure, action lists, argument names and the user turn's layout are the sources'.

- The tool: Qwen2.5-VL's ``mobile_use`` in qwen-agent's Nous function-call form after "You are a
  helpful assistant." (``NousFnCallPrompt``), stating the resized screenshot's resolution.
  ``actions=cookbook`` (default): the cookbook's MobileUse (key, click, long_press, swipe, type,
  system_button, open, wait, terminate); ``actions=androidworld``: AndroidWorldMobileUse (click,
  long_press, swipe, type, answer, system_button, wait, terminate).
- Points: pixels of the screenshot after ``smart_resize`` (factor 28, 3136 to 10035200 pixels: the
  cookbook's MIN_PIXELS/MAX_PIXELS, AndroidWorld's ``update_image_size_`` with 12800 tokens of 28x28),
  mapped back by x * W / w (``src_format='abs_resized'``).
- One user turn: "The user query: {goal}", the task progress ``Step N: {conclusion}; `` (the
  earlier steps' ``<conclusion>``, line breaks and double quotes removed), then the instruction to
  reason in ``<thinking></thinking>`` before the ``<tool_call>`` and sum up in
  ``<conclusion></conclusion>`` after it, then the screenshot.
- Output: ``<thinking>...</thinking>``, ``<tool_call>{"name": "mobile_use", ...}</tool_call>``,
  ``<conclusion>...</conclusion>``; ``tap`` is read as ``click`` (the agent's ``replace('tap',
  'click')``). ``answer`` is an Answer then, on the next step, a Finish: the AndroidWorld agent
  turns the step after an answer into ``terminate`` itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.core.actions import Action, Answer, CoordSpace, Finish, from_device
from harness.client.config import ModelConfig
from harness.core.registry import AGENTS

from agents.common import ServerResize, send_size
from agents.mobile_use import read_call
from agents.parsing import ParseError, Parsed, clean_text, register_parser
from agents.prompts import load_prompt
from agents.qwen import (QwenAgent, call_arguments, history_item, plain_words, resized_size as qwen_resized_size)

SOURCE = "X-PLUG/MobileAgent @11cea575561fb7800b5fb6b6cafa56f7a91de11f (Mobile-Agent-v3)"
MIN_PIXELS = 3136            # cookbook MIN_PIXELS
MAX_PIXELS = 10035200        # cookbook MAX_PIXELS = AndroidWorld's 12800 tokens x 28 x 28
ACTIONS = {"cookbook": ("key", "click", "long_press", "swipe", "type", "system_button", "open", "wait", "terminate"),
           "androidworld": ("click", "long_press", "swipe", "type", "answer", "system_button", "wait", "terminate")}
# served by vLLM with Qwen2.5-VL's processor (GUI-Owl-7B/32B are Qwen2.5-VL models)
SERVER = ServerResize(28, 3136, 12845056, "GUI-Owl's Qwen2.5-VL processor: factor 28, 3136 to 12845056 pixels")
_CONCLUSION = re.compile(r"<conclusion>\s*(.*?)\s*(?:</conclusion>|$)", re.S)


def resized_size(screen: tuple[int, int], min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    return qwen_resized_size(screen, "2.5", min_pixels, max_pixels)


def parse_detailed(text: str, screen_size: tuple[int, int], actions: str = "cookbook",
                   max_pixels: int = MAX_PIXELS, min_pixels: int = MIN_PIXELS) -> Parsed:
    """One GUI-Owl reply as unified actions; ``raw["conclusion"]`` is its ``<conclusion>``."""
    if actions not in ACTIONS:
        raise ParseError(f"actions must be cookbook or androidworld, got {actions!r}")
    resized = resized_size(screen_size, min_pixels, max_pixels)
    parsed = read_call(text, screen_size, CoordSpace.RESIZED, resized, ACTIONS[actions], "GUI-Owl")
    m = _CONCLUSION.search(clean_text(text)[0])
    if m and m.group(1).strip():
        parsed.raw["conclusion"] = m.group(1).strip()
    if len(parsed.actions) == 1 and isinstance(parsed.actions[0], Answer):
        parsed.actions.append(Finish(status="complete"))  # the AndroidWorld agent terminates after an answer
    return parsed


def parse_output(text: str, screen_size: tuple[int, int], **opts: Any) -> Action:
    return parse_detailed(text, screen_size, **opts).action


def _cli(text: str, screen_size: tuple[int, int], actions: str = "cookbook", max_pixels: str | int = MAX_PIXELS,
         min_pixels: str | int = MIN_PIXELS, **_: Any) -> Parsed:
    return parse_detailed(text, screen_size, actions, int(max_pixels), int(min_pixels))


register_parser("gui-owl", _cli, {"actions": "cookbook (default) or androidworld: the tool's action list",
                                  "max_pixels": f"smart_resize max_pixels (default {MAX_PIXELS})",
                                  "min_pixels": f"smart_resize min_pixels (default {MIN_PIXELS})"})


@dataclass
class GuiOwlConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint (from --model-base-url/--model)"})
    actions: Literal["cookbook", "androidworld"] = field(default="cookbook", metadata={
        "help": "cookbook: the real-phone tool (key, open, no answer); androidworld: its AndroidWorld tool (answer)"})
    history: int = field(default=1, metadata={"help": "screenshots per request, the current one included"})
    max_pixels: int = field(default=MAX_PIXELS, metadata={"help": "smart_resize max_pixels"})
    min_pixels: int = field(default=MIN_PIXELS, metadata={"help": "smart_resize min_pixels"})
    image_format: Literal["png", "jpeg"] = field(default="png", metadata={"help": "screenshot encoding"})
    jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality when image_format=jpeg"})
    send: Literal["auto", "resized"] = field(default="auto", metadata={
        "help": "auto: the captured PNG as it is where the server's processor resizes it to the same size; "
                "resized: always resize here"})

    def __post_init__(self) -> None:
        if self.history < 1:
            raise ValueError("history must be >= 1 (the current screenshot)")
        if not 0 < self.min_pixels <= self.max_pixels:
            raise ValueError("need 0 < min_pixels <= max_pixels")


class GuiOwlAgent(QwenAgent):
    """Qwen2.5-VL's request and reflection (one user turn, the refused replies after it), with
    GUI-Owl's tool, user turn, output and history (its conclusions)."""

    family = "gui-owl"

    def __init__(self, config: GuiOwlConfig, name: str = "gui-owl"):
        super().__init__(config, name)  # type: ignore[arg-type]  (the fields QwenAgent reads are here)
        self.system = load_prompt("qwen25_mobile_use" if config.actions == "cookbook" else "gui_owl_aw_mobile_use")
        self.user = load_prompt("gui_owl_user")

    @property
    def version(self) -> str:
        return "2.5"

    @property
    def grid(self) -> int:
        return 999  # (unused: GUI-Owl points in resized pixels)

    def parse(self, text: str, screen: tuple[int, int]) -> Parsed:
        c = self.config
        return parse_detailed(text, screen, c.actions, c.max_pixels, c.min_pixels)

    def spec(self) -> dict[str, Any]:
        out = super().spec()
        c = self.config
        return {**out, "source": SOURCE, "actions": list(ACTIONS[c.actions]),
                "coordinate_space": "resized (smart_resize, factor 28, max 10035200 pixels)",
                "history_form": "Step N: <conclusion>; run together", "server_resize": SERVER.to_json()}

    def _sizes(self, screen: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int] | None]:
        c = self.config
        size = resized_size(screen, c.min_pixels, c.max_pixels)
        return size, send_size(screen, size, SERVER, c.send, c.image_format)

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        """A ground-truth step's progress entry: the call in plain words (it has no conclusion),
        points in resized pixels."""
        c = self.config
        resized = resized_size(screen, c.min_pixels, c.max_pixels)
        args = call_arguments(action, lambda x, y: from_device(x, y, CoordSpace.RESIZED, screen, resized))
        return history_item(plain_words(args))

    def _progress_entry(self, text: str, parsed: Parsed | None, err: ParseError | None) -> str:
        """The step's ``<conclusion>`` (line breaks and double quotes removed, as the AndroidWorld
        agent's history loop does); the call in plain words when there is none."""
        if parsed is None:
            return f"(output not understood: {str(err)[:80]})"
        said = parsed.raw.get("conclusion")
        return history_item(said) if said else history_item(plain_words(parsed.raw.get("arguments", {})))


@AGENTS.register("gui-owl", GuiOwlConfig, help="GUI-Owl / Mobile-Agent-v3 end to end: Qwen2.5-VL's mobile_use with "
                                                "thinking and conclusion (actions=cookbook|androidworld)")
def _build(config: GuiOwlConfig) -> GuiOwlAgent:
    return GuiOwlAgent(config, "gui-owl")
