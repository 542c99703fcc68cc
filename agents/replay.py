"""``replay``: plays the task's reference trajectory, optionally with seeded perturbations.

Reference steps aimed at a node (``target``) are resolved on the current screen's hierarchy, so a
replay works on any screen size. With ``perturb=P`` each step is, with probability P, replaced by
a mistake: a tap at a random point, a skipped reference step, or a back press. The random stream
is seeded from the run seed and the task id, so a rerun (or a resumed run) makes the same choices
whatever order the episodes run in.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from harness.core import hierarchy
from harness.core.actions import Click, Finish, Key, action_to_json
from harness.core.episode import AgentOutput, EpisodeContext, Observation
from harness.core.registry import AGENTS


def episode_rng(seed: int, task_id: str, salt: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{task_id}:{salt}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass
class ReplayConfig:
    perturb: float = field(default=0.0, metadata={"help": "probability that a step is replaced by a mistake (0-1)"})
    kinds: list[str] = field(default_factory=lambda: ["wrong_tap", "skip", "back"],
                             metadata={"help": "mistakes to draw from: wrong_tap, skip, back"})

    def __post_init__(self) -> None:
        if not 0.0 <= self.perturb <= 1.0:
            raise ValueError("perturb must be between 0 and 1")
        bad = [k for k in self.kinds if k not in ("wrong_tap", "skip", "back")]
        if bad:
            raise ValueError(f"unknown perturbation kinds {bad}")
        if self.perturb > 0 and not self.kinds:
            raise ValueError("perturb > 0 needs at least one perturbation kind")


class ReplayAgent:
    name = "replay"

    def __init__(self, config: ReplayConfig):
        self.config = config
        self.player = hierarchy.ReferencePlayer([])
        self.rng = random.Random(0)
        self.task_id = ""

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "perturb": self.config.perturb, "kinds": list(self.config.kinds)}

    def check_task(self, task: Any) -> str | None:
        """Why this agent cannot run ``task`` (checked by ``harness run`` before any device is touched)."""
        if task.reference is None:
            return (f"task {task.id!r} has no reference trajectory (`reference:` steps) for the replay agent to "
                    "play; run it with a model agent")
        return None

    def reset(self, ctx: EpisodeContext) -> None:
        problem = self.check_task(ctx.task)
        if problem:
            raise ValueError(problem)
        self.player = hierarchy.ReferencePlayer(ctx.task.reference)
        self.task_id = ctx.task.id
        self.rng = episode_rng(ctx.seed, ctx.task.id, "replay")

    def _perturbation(self, obs: Observation) -> AgentOutput | None:
        if self.config.perturb <= 0 or self.rng.random() >= self.config.perturb:
            return None
        kind = self.rng.choice(self.config.kinds)
        w, h = obs.screen_size
        if kind == "wrong_tap":
            a = Click(x=self.rng.randrange(w), y=self.rng.randrange(int(h * 0.05), int(h * 0.9)))
        elif kind == "back":
            a = Key(key="back")
        else:
            self.player.skip()  # drop the next reference step
            return AgentOutput(action=None, raw_output="perturbation: skip", invalid="perturbation: skipped a reference step",
                               extras={"perturbation": "skip"})
        return AgentOutput(action=a, raw_output=f"perturbation: {kind}", extras={"perturbation": kind})

    def step(self, obs: Observation) -> AgentOutput:
        if self.player.finished:
            return AgentOutput(action=Finish(status="complete"), raw_output="reference exhausted")
        bad = self._perturbation(obs)
        if bad is not None:
            return bad
        return play_next(self.player, obs)


def play_next(player: hierarchy.ReferencePlayer, obs: Observation) -> AgentOutput:
    """The player's next action on this screen, as the agent's output: which reference step it
    serves (``reference_step``), the action a targeted step resolved to, and ``seeking`` for a
    scroll towards a ``scroll_to`` target."""
    play = player.next(lambda: hierarchy.parse(obs.hierarchy()), obs.screen_size)
    extras: dict[str, Any] = {"reference_step": play.step}
    if play.action is not None and player.steps[play.step - 1].target is not None:
        extras["resolved"] = action_to_json(play.action)
    if play.seeking:
        extras["seeking"] = play.seeking
    return AgentOutput(action=play.action, raw_output=play.raw, invalid=play.invalid, extras=extras)


@AGENTS.register("replay", ReplayConfig, help="replay the task's reference trajectory (perturb=P adds seeded mistakes)")
def _build(config: ReplayConfig) -> ReplayAgent:
    return ReplayAgent(config)
