"""A test double for the farm's device actors (harness/farm/actor.py), as cheap as one can be: no
phone, no screenshot, no agent, no model. Each actor hosts many fake phones (one thread each,
``max_concurrency``), and ``run`` streams an episode as the real actor does (``started``, one
``step`` event per step in the shape harness.run.suite.StepProgress emits, then ``done`` with the
outcome and the episode's files: here an empty trajectory) as fast as it can, so that what a
benchmark measures is the driver that follows the streams (scripts/bench_farm: the driver ceiling).
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import ray

from harness.records import now_iso
from harness.run.runner import EpisodeOutcome


@ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0, max_concurrency=1024)
class PhonelessActor:
    def __init__(self, steps: int):
        self.steps = steps

    def hello(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "frames": {"error": "a fake phone: no frames"}}

    def halt(self) -> None:
        pass

    def reconnect(self, timeout: float) -> bool:
        return True

    def run(self, task: Any, cap: int, seed: int, name: str = "fake") -> Iterator[dict[str, Any]]:
        yield {"kind": "started", "pid": os.getpid()}
        started = now_iso()
        for i in range(1, self.steps + 1):
            yield {"kind": "step", "device": name, "task": task.id, "step": i, "cap": cap, "executed": True,
                   "action": f"click(x={i}, y={2 * i})"}
        out = EpisodeOutcome(status="finished", steps=self.steps, cap=cap, proposed_steps=self.steps,
                             started_at=started, ended_at=now_iso())
        yield {"kind": "done", "outcome": out, "files": {"trajectory.jsonl": b""}, "reset": None}
