"""``script``: plays a fixed list of actions from a YAML file (the same step format as a task's
reference: concrete actions or actions aimed at a ``target``), then finishes. ``finish``: the
empty script, the do-nothing baseline: it declares the task complete at once, so a task it
passes is one an agent passes without doing anything (``harness tasks check`` runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agents.replay import play_next
from harness.core import hierarchy
from harness.core.actions import Finish
from harness.core.episode import AgentOutput, EpisodeContext, Observation
from harness.core.registry import AGENTS
from harness.core.tasks import RefStep


@dataclass
class ScriptConfig:
    file: str = field(default="", metadata={"help": "YAML file: a list of actions (or {TASK_ID: [actions]})"})

    def __post_init__(self) -> None:
        if not self.file:
            raise ValueError("the script agent needs --agent-opt file=PATH")


def load_script(path: str) -> dict[str, list[RefStep]] | list[RefStep]:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from None

    def steps(items: Any, where: str) -> list[RefStep]:
        if not isinstance(items, list):
            raise ValueError(f"{path}: {where}: expected a list of actions")
        out = []
        for i, item in enumerate(items, start=1):
            try:
                out.append(RefStep.model_validate(item))
            except ValidationError as e:
                err = e.errors()[0]
                raise ValueError(f"{path}: {where} step {i}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
        return out

    if isinstance(data, dict):
        return {str(k): steps(v, f"task {k}") for k, v in data.items()}
    return steps(data, "script")


class ScriptAgent:
    name = "script"

    def __init__(self, config: ScriptConfig):
        self.config = config
        self.script = load_script(config.file)
        self.player = hierarchy.ReferencePlayer([])

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "file": self.config.file}

    def reset(self, ctx: EpisodeContext) -> None:
        if isinstance(self.script, dict):
            if ctx.task.id not in self.script:
                raise ValueError(f"{self.config.file}: no script for task {ctx.task.id}")
            self.player = hierarchy.ReferencePlayer(self.script[ctx.task.id])
        else:
            self.player = hierarchy.ReferencePlayer(self.script)

    def step(self, obs: Observation) -> AgentOutput:
        if self.player.finished:
            return AgentOutput(action=Finish(status="complete"), raw_output="script exhausted")
        return play_next(self.player, obs)


@AGENTS.register("script", ScriptConfig, help="play a YAML list of actions (file=PATH)")
def _build(config: ScriptConfig) -> ScriptAgent:
    return ScriptAgent(config)


@dataclass
class FinishConfig:
    pass


class FinishAgent:
    name = "finish"

    def __init__(self, config: FinishConfig):
        self.config = config

    def spec(self) -> dict[str, Any]:
        return {"name": self.name}

    def reset(self, ctx: EpisodeContext) -> None:
        pass

    def step(self, obs: Observation) -> AgentOutput:
        return AgentOutput(action=Finish(status="complete"), raw_output="finish at once (do-nothing baseline)")


@AGENTS.register("finish", FinishConfig, help="declare the task complete at once: the do-nothing baseline")
def _build_finish(config: FinishConfig) -> FinishAgent:
    return FinishAgent(config)
