"""A test double: an agent that proposes given outputs in order, then finishes (shared by the
fault suite and the gate runs of tests/judges)."""

from __future__ import annotations

from typing import Any

from harness.core.actions import Action, Finish
from harness.core.episode import AgentOutput


class Says:
    """Proposes ``outputs`` in order (an :class:`AgentOutput`, or a bare action wrapped in one),
    then ``finish``."""

    name = "says"

    def __init__(self, outputs: list[AgentOutput | Action]):
        self.outputs = outputs

    def spec(self) -> dict[str, Any]:
        return {"name": self.name}

    def reset(self, ctx: Any) -> None:
        self.i = 0

    def step(self, obs: Any) -> AgentOutput:
        out = self.outputs[self.i] if self.i < len(self.outputs) else AgentOutput(Finish())
        self.i += 1
        return out if isinstance(out, AgentOutput) else AgentOutput(out)
