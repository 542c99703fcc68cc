"""Helpers for the judge tests: model configs for the scripted server, a classifier of judge
requests by the reply they ask for, synthetic step events, and episode runs on the in-process sim."""

from __future__ import annotations

import io
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

from PIL import Image

from harness.core.episode import EpisodeContext, EpisodeEnd, StepEvent
from harness.client.config import ModelConfig
from harness.core.tasks import load_suite
from tests.fakes.model_server import request_text

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tasks" / "sim"


def model_cfg(server: Any = None, base_url: str | None = None, **kw: Any) -> ModelConfig:
    """A judge endpoint on the scripted server. The model name is unique per server: step evidence
    is cached per process by (endpoint, model), and a later test's server may get an earlier one's
    port."""
    name = "judge-model"
    if server is not None:
        if not hasattr(server, "judge_model_name"):
            server.judge_model_name = f"judge-model-{uuid.uuid4().hex[:8]}"
        name = server.judge_model_name
    base = dict(base_url=base_url or server.base_url, model=name, backoff_s=0.01, max_backoff_s=0.05,
                timeout_s=5.0, max_retries=1, concurrency=16)
    base.update(kw)
    return ModelConfig(**base)


def kind_of(req: dict[str, Any]) -> str:
    """Which judge call a request is, from the reply its prompt asks for."""
    text = request_text(req)
    for key, kind in (('"clues"', "crate_step"), ('"risky"', "crate_s_step"), ('"conditions"', "crate_traj"),
                      ('"unsafe"', "crate_s_traj"), ('"result"', "holistic"), ('"milestones"', "milestones")):
        if key in text:
            return kind
    raise AssertionError(f"unrecognised judge request: {text[:200]}")


def action_in(req: dict[str, Any]) -> str:
    """The action text of a step-level request."""
    m = re.search(r"(?:Action of this step|Proposed action|这一步的动作|待执行的动作)[:：]\s*(.+)", request_text(req))
    assert m, request_text(req)[-300:]
    return m.group(1).strip()


def of_kind(server: Any, kind: str) -> list[dict[str, Any]]:
    return [r for r in server.requests if kind_of(r) == kind]


def task(task_id: str):
    return load_suite(SUITE).by_id()[task_id]


def png(i: int = 0, size: tuple[int, int] = (120, 240)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, ((37 * i) % 256, (91 * i) % 256, (53 * i + 20) % 256)).save(buf, format="PNG")
    return buf.getvalue()


def ctx_for(t: Any, size: tuple[int, int] = (120, 240)) -> EpisodeContext:
    return EpisodeContext(task=t, screen_size=size, seed=0, device_serial="test")


def event(i: int, action: Any, **kw: Any) -> StepEvent:
    """Step i: the screen before is png(i-1), after is png(i). ``executed`` defaults as the runner
    sets it: a valid action, not refused, not halted by a monitor."""
    base = dict(index=i, action=action, raw_output=None, invalid=None, screenshot_before=png(i - 1),
                screenshot_after=png(i), screen_before_path=f"screens/{i - 1:03d}.png",
                screen_after_path=f"screens/{i:03d}.png")
    base.update(kw)
    base.setdefault("executed", action is not None and not base["invalid"]
                    and not (base.get("monitor") or {}).get("halt"))
    return StepEvent(**base)


def end(steps: int, status: str = "finished", answer: str | None = None, events: list[StepEvent] | None = None
        ) -> EpisodeEnd:
    """The end of an episode of ``steps`` steps; with ``events``, only those that ran count as executed."""
    ran = frozenset(e.index for e in events if e.executed) if events is not None else None
    return EpisodeEnd(status=status, steps=steps, final_screenshot=png(steps), answer=answer,
                      agent_finished=status == "finished", executed=ran)


def run(tmp_path: Path, t: Any, agent: Any, device: Any = None, **kw: Any):
    from harness.records import RunWriter, iter_steps
    from harness.run.runner import run_episode
    from tests.fakes.local_device import LocalSimDevice

    w = RunWriter(tmp_path / f"run-{time.monotonic_ns()}")
    ep = w.start_episode(t.id)
    out = run_episode(t, agent, device or LocalSimDevice(), ep, **kw)
    w.close()
    return out, list(iter_steps(ep.path))


class WaitsFor:
    """Wraps an agent that thinks until ``ready()`` holds before each step (a slow model, made a
    state instead of a time: e.g. until the judges' calls for the earlier steps are answered)."""

    def __init__(self, inner: Any, ready: Any, timeout_s: float = 60.0):
        self.inner, self.ready, self.timeout_s = inner, ready, timeout_s
        self.name = "waits-" + inner.name

    def spec(self) -> dict[str, Any]:
        return {"name": self.name}

    def reset(self, ctx: Any) -> None:
        self.inner.reset(ctx)

    def step(self, obs: Any) -> Any:
        deadline = time.monotonic() + self.timeout_s
        while not self.ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: still not ready after {self.timeout_s:g}s")
            time.sleep(0.005)
        return self.inner.step(obs)


def good_reply(req: dict[str, Any]) -> str:
    """A valid reply for any judge request (steps get clues/effects naming their action)."""
    kind = kind_of(req)
    if kind == "crate_step":
        a = action_in(req)
        return json.dumps({"clues": f"clue<{a}>", "effect": f"effect<{a}>"})
    if kind == "crate_s_step":
        return json.dumps({"risky": False, "category": None, "reason": "routine", "score": 0.05})
    if kind == "crate_traj":
        return json.dumps({"conditions": [{"condition": "done", "met": True, "evidence": "step 1"}], "success": True,
                           "reason": "all conditions met"})
    if kind == "crate_s_traj":
        return json.dumps({"unsafe": False, "first_unsafe_step": None, "category": None, "reason": "nothing risky"})
    if kind == "holistic":
        return json.dumps({"reason": "looks done", "result": 1})
    return json.dumps({"milestones": []})

