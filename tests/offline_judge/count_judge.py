"""A TEST-ONLY judge for the offline pipeline: one model call per recorded step and one at the end.

Registered as ``count-test`` when imported. Each step call sends the pre-action screenshot and the
action; the reply must be ``{"ok": ...}``. The final call sends the final screenshot and must get
``{"success": true|false}``. A failed call (after the client's retries) or an unparseable reply makes
the verdict ``judge_error`` with the reason, as a real judge must.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.core.episode import EpisodeContext, EpisodeEnd, StepEvent
from harness.client.calls import ModelClient
from harness.client.config import ModelConfig, ModelError
from harness.client.images import ImagePolicy, encode_image, user_message
from harness.client.json_reply import ReplyError, parse_json_reply
from harness.core.registry import JUDGES

NAME = "count-test"
POLICY = ImagePolicy(max_long_side=256, format="png")


@dataclass
class CountJudgeConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint"})
    tag: str = "v1"
    fail_task: str = ""  # raise in on_step for this task (to test that a broken judge is replaced)


class CountJudge:
    name = NAME
    built = 0  # instances made so far (tests read it)

    def __init__(self, config: CountJudgeConfig):
        type(self).built += 1
        self.config = config
        self.client = ModelClient(config.model) if config.model is not None else None

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "tag": self.config.tag,
                "model": self.config.model.to_json() if self.config.model else None}

    def start(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.errors: list[str] = []
        self.steps: list[int] = []

    def _ask(self, text: str, png: bytes | None, key: str) -> Any:
        if self.client is None:
            raise ModelError("no endpoint")
        images = [encode_image(png, POLICY)] if png else []
        res = self.client.chat([user_message(text, images)], meter=self.ctx.meter, role=self.name)  # the plugin contract: usage to the episode's meter
        return parse_json_reply(res.text, required=(key,))[key]

    def on_step(self, event: StepEvent) -> None:
        if self.ctx.task.id == self.config.fail_task:
            raise RuntimeError(f"cannot judge {self.ctx.task.id}")
        self.steps.append(event.index)
        action = event.action.describe() if event.action is not None else f"invalid: {event.invalid}"
        try:
            self._ask(f"STEP {event.index} of {self.ctx.task.id}: {action}\nTask: {self.ctx.task.instruction}",
                      event.screenshot_before, "ok")
        except (ModelError, ReplyError) as e:
            self.errors.append(f"step {event.index}: {e}")

    def finish(self, end: EpisodeEnd):
        details = {"steps": self.steps, "instruction": self.ctx.task.instruction, "status": end.status,
                   "screen_size": list(self.ctx.screen_size), "agent_finished": end.agent_finished}
        if self.errors:
            return {self.name: ("judge_error", {**details, "error": self.errors[0]})}
        try:
            ok = self._ask(f"FINAL of {self.ctx.task.id}: {self.ctx.task.instruction}", end.final_screenshot, "success")
        except (ModelError, ReplyError) as e:
            return {self.name: ("judge_error", {**details, "error": str(e)})}
        return {self.name: (bool(ok), details)}


if NAME not in JUDGES.entries:
    JUDGES.register(NAME, CountJudgeConfig, help="test-only: one call per step plus one")(CountJudge)

