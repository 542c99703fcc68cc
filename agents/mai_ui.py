"""``mai-ui``: MAI-UI's navigation agent as Tongyi-MAI/MAI-UI @4dd07b9 runs it (src/mai_naivigation_agent.py,
src/prompt.py); its swipe and ask_user as Tongyi-MAI/MobileWorld @d42de47 executes them
(agents/implementations/mai_ui_agent.py, agents/utils/action_translation.py). The prompt's wording
(``agents/prompts/mai_ui_en.md``) is ours; its output format, action space and argument names are
the source's.

- Output: ``<thinking>...</thinking>`` then ``<tool_call>{"name": "mobile_use", "arguments": {...}}</tool_call>``
  (a thinking model's lone ``</think>`` is read too, as the source's ``parse_tagged_text`` does).
- Points: the 0-999 grid (``SCALE_FACTOR = 999``: ``x / 999`` of the screenshot); a box of four
  numbers is its centre, as the source takes it.
- Actions: click, long_press, type, swipe (``direction``, the finger's: MobileWorld turns ``swipe
  up`` into AndroidWorld's ``scroll down``; an optional ``coordinate`` to start from), open, drag
  (``start_coordinate`` to ``end_coordinate``), system_button (back, home, menu, enter), wait,
  terminate (success, fail), answer; with ``ask_user=true`` (the default: MAI_MOBILE_SYS_PROMPT_ASK_USER_MCP's
  action space) also ask_user ("ask user for more information"), which hands the phone to a
  person (``needs_user``), and double_click. A call to another function (an MCP tool) is recorded
  as a note: no tool is served here.
- Messages (``_build_messages``): the system prompt; the instruction as a user turn; per earlier
  step its screenshot as a user turn (only the last ``history`` - 1 steps keep theirs: ``history_n``,
  default 3) and the model's turn written back as ``<thinking>\\n{thought}\\n</thinking>\\n<tool_call>\\n{json}\\n</tool_call>``
  (``mem2response``: compact JSON, ASCII-escaped, the point mapped to the grid and back with
  ``int()``); then the current screenshot. A reply that did not parse leaves no turn, as the
  source keeps no step for it. Screenshots go as captured (PNG): the grid is relative.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.core.actions import Action, CoordSpace, from_device
from harness.core.episode import AgentOutput, EpisodeContext, Observation
from harness.client.config import ModelConfig
from harness.client.images import encode_image
from harness.core.registry import AGENTS

from agents.common import ModelAgent, StepTrace, ground_truth_turns, image_record
from agents.mobile_use import read_call
from agents.parsing import Parsed, read_reply, register_parser
from agents.prompts import load_prompt, sha12
from agents.qwen import call_arguments

SOURCE = "Tongyi-MAI/MAI-UI @4dd07b9e910a294f001452e888514d912b96cc41; Tongyi-MAI/MobileWorld @d42de47"
SCALE_FACTOR = 999
ACTIONS = ("click", "long_press", "type", "swipe", "open", "drag", "system_button", "wait", "terminate", "answer")
ASK_USER_ACTIONS = ("ask_user", "double_click")
# the two action lines MAI_MOBILE_SYS_PROMPT_ASK_USER_MCP adds (in our words)
_MORE = ('{"action": "ask_user", "text": "xxx"} # ask the user for information you need to complete the task.\n'
         '{"action": "double_click", "coordinate": [x, y]}')


def parse_detailed(text: str, screen_size: tuple[int, int], ask_user: bool = True) -> Parsed:
    """One MAI-UI reply as unified actions (points on the 0-999 grid)."""
    listed = ACTIONS + (ASK_USER_ACTIONS if ask_user else ())
    return read_call(text, screen_size, CoordSpace.GRID_999, None, listed, "MAI-UI")


def parse_output(text: str, screen_size: tuple[int, int], **opts: Any) -> Action:
    return parse_detailed(text, screen_size, **opts).action


def _cli(text: str, screen_size: tuple[int, int], ask_user: str | bool = True, **_: Any) -> Parsed:
    return parse_detailed(text, screen_size, str(ask_user).lower() not in ("false", "0", "no"))


register_parser("mai-ui", _cli, {"ask_user": "true (default): ask_user and double_click are in the action list"})


def history_turn(thought: str | None, arguments: dict[str, Any], name: str = "mobile_use") -> str:
    """The model's turn as the source writes it back (``mem2response``): the thought, then the call
    as compact JSON with ``coordinate`` taken to 0-1 (``/ 999``) and back (``int(x * 999)``)."""
    args = copy.deepcopy(arguments)
    c = args.get("coordinate")
    if isinstance(c, list) and len(c) in (2, 4) and all(isinstance(v, (int, float)) for v in c):
        x, y = ((c[0] + c[2]) / 2, (c[1] + c[3]) / 2) if len(c) == 4 else (c[0], c[1])
        args["coordinate"] = [int(x / SCALE_FACTOR * SCALE_FACTOR), int(y / SCALE_FACTOR * SCALE_FACTOR)]
    call = json.dumps({"name": name, "arguments": args}, separators=(",", ":"))
    return f"<thinking>\n{thought}\n</thinking>\n<tool_call>\n{call}\n</tool_call>"


@dataclass
class MaiUiConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint (from --model-base-url/--model)"})
    ask_user: bool = field(default=True, metadata={
        "help": "offer ask_user (a hand-over to a person) and double_click, as MAI-UI's ask-user prompt does"})
    history: int = field(default=3, metadata={"help": "screenshots per request, the current one included (history_n)"})
    image_format: Literal["png", "jpeg"] = field(default="png", metadata={"help": "screenshot encoding"})
    jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality when image_format=jpeg"})

    def __post_init__(self) -> None:
        if self.history < 1:
            raise ValueError("history must be >= 1 (the current screenshot)")


class MaiUiAgent(ModelAgent):
    family = "mai-ui"

    def __init__(self, config: MaiUiConfig, name: str = "mai-ui"):
        super().__init__(config, name)
        self.prompt = load_prompt("mai_ui_en")
        self.seen: dict[int, bytes] = {}  # step -> the screenshot the agent was shown (a ground-truth history's)

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.seen = {}

    def replace_history(self, texts: list[str]) -> None:
        """Ground-truth turns with the screenshots the agent was shown at those steps (a static run
        asks every step in order); a step it was shown none of cannot be a turn of its own."""
        rows = [(self.seen.get(i + 1), text) for i, text in enumerate(texts)]
        self.turns = ground_truth_turns(rows, self.config.history - 1, self.name)

    def system_text(self) -> str:
        return self.prompt.render(more_actions=_MORE if self.config.ask_user else "").strip()

    def spec(self) -> dict[str, Any]:
        c = self.config
        return {**self.base_spec(), "prompt": self.prompt.to_json(), "source": SOURCE,
                "actions": list(ACTIONS + (ASK_USER_ACTIONS if c.ask_user else ())),
                "coordinate_space": "grid 0-999 (x / 999 of the screenshot)",
                "image_encoding": f"{c.image_format}, the screenshot as captured (the grid is relative)",
                "history_form": "the model's turns as <thinking>/<tool_call> (mem2response)"}

    def encodings(self, screen: tuple[int, int]) -> list[tuple[Any, tuple[int, int] | None]]:
        return [(self.policy(), None)]

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        """A ground-truth step as the model's turn: the call alone (a ground truth has no thought)."""
        args = call_arguments(action, lambda x, y: from_device(x, y, CoordSpace.GRID_999, screen))
        call = json.dumps({"name": "mobile_use", "arguments": args}, separators=(",", ":"))
        return f"<tool_call>\n{call}\n</tool_call>"

    def model_step(self, obs: Observation) -> AgentOutput:
        c = self.config
        trace = StepTrace(prompt=self.prompt.to_json())
        system = self.system_text()
        trace.prompt = {**trace.prompt, "rendered_sha256_12": sha12(system)}
        trace.lap("prompt")
        policy = self.policy()
        messages: list[dict[str, Any]] = [{"role": "system", "content": [{"type": "text", "text": system}]},
                                          {"role": "user", "content": [{"type": "text", "text": obs.instruction}]}]
        if -1 in self.told:
            messages.append({"role": "user", "content": [{"type": "text", "text": self.told[-1]}]})
        first_kept = self.first_kept(c.history)
        for i, (png, said) in enumerate(self.turns):
            if i >= first_kept:
                past = encode_image(png, policy)
                trace.images.append(image_record(past, f"step {i + 1}"))
                messages.append({"role": "user", "content": [past.part()]})
            messages.append({"role": "assistant", "content": [{"type": "text", "text": said}]})
            if i in self.told:  # the turn's action was refused: what the agent was told (reflect)
                messages.append({"role": "user", "content": [{"type": "text", "text": self.told[i]}]})
        enc = encode_image(obs.screenshot, policy)
        trace.images.append(image_record(enc, "current"))
        messages.append({"role": "user", "content": [enc.part()]})
        trace.lap("encode")
        trace.extra.update({"history": c.history, "ask_user": c.ask_user})
        res = self.chat(messages, trace, "action")
        parsed, err = read_reply(lambda t: parse_detailed(t, obs.screen_size, c.ask_user), res.text)
        self.seen[obs.step] = obs.screenshot
        if parsed is not None:  # the source keeps a step (and its turn) only for a reply it read
            self.turns.append((obs.screenshot, history_turn(parsed.thought, parsed.raw.get("arguments") or {},
                                                            str(parsed.raw.get("name") or "mobile_use"))))
        return self.output(res.text, parsed, err, trace, obs.step)


@AGENTS.register("mai-ui", MaiUiConfig, help="MAI-UI navigation agent: <thinking> + mobile_use on the 0-999 grid, "
                                              "ask_user hands the phone to a person")
def _build(config: MaiUiConfig) -> MaiUiAgent:
    return MaiUiAgent(config, "mai-ui")
