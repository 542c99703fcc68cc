"""``random``: a seeded, monkey-like agent — taps, swipes, back presses and short ASCII text,
bounded to the screen, never finishing on its own (it runs to the step cap). A floor for tables
and a stress test for the runner."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

from harness.core.actions import Click, Key, Swipe, TypeText
from harness.core.episode import AgentOutput, EpisodeContext, Observation
from harness.core.registry import AGENTS
from agents.replay import episode_rng


@dataclass
class RandomConfig:
    tap: float = field(default=0.6, metadata={"help": "weight of taps"})
    swipe: float = field(default=0.2, metadata={"help": "weight of swipes"})
    back: float = field(default=0.1, metadata={"help": "weight of back presses"})
    text: float = field(default=0.1, metadata={"help": "weight of typing short ASCII text"})

    def __post_init__(self) -> None:
        if min(self.tap, self.swipe, self.back, self.text) < 0 or self.tap + self.swipe + self.back + self.text <= 0:
            raise ValueError("weights must be >= 0 and not all 0")


class RandomAgent:
    name = "random"

    def __init__(self, config: RandomConfig):
        self.config = config

    def spec(self) -> dict[str, Any]:
        c = self.config
        return {"name": self.name, "tap": c.tap, "swipe": c.swipe, "back": c.back, "text": c.text}

    def reset(self, ctx: EpisodeContext) -> None:
        self.rng = episode_rng(ctx.seed, ctx.task.id, "random")

    def step(self, obs: Observation) -> AgentOutput:
        w, h = obs.screen_size
        c = self.config
        kind = self.rng.choices(["tap", "swipe", "back", "text"], weights=[c.tap, c.swipe, c.back, c.text])[0]
        # keep away from the status bar and the navigation bar, as a monkey run does by default
        y_lo, y_hi = int(h * 0.04), int(h * 0.93)
        if kind == "tap":
            a = Click(x=self.rng.randrange(w), y=self.rng.randrange(y_lo, y_hi))
        elif kind == "swipe":
            a = Swipe(start=(self.rng.randrange(w), self.rng.randrange(y_lo, y_hi)),
                      end=(self.rng.randrange(w), self.rng.randrange(y_lo, y_hi)), duration_ms=300)
        elif kind == "back":
            a = Key(key="back")
        else:
            a = TypeText(text="".join(self.rng.choice(string.ascii_lowercase) for _ in range(self.rng.randint(1, 8))))
        return AgentOutput(action=a, raw_output=f"random {kind}")


@AGENTS.register("random", RandomConfig, help="seeded monkey-like taps, swipes, back presses and text; never finishes")
def _build(config: RandomConfig) -> RandomAgent:
    return RandomAgent(config)
