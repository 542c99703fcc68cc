"""One episode: reset -> observe -> agent proposes -> monitors may veto -> execute -> settle ->
record -> observers get the step; stop on finish, veto, the 2c+1 cap, agent error or infra error.

The runner talks to a :class:`harness.device.base.Device` and to the plugin protocols of
``harness.episode``; it knows no particular agent, judge or device kind.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.actions import ActionError, Answer, Finish, action_to_json, check_on_screen
from harness.device.base import Device, DeviceError, InfraError
from harness.episode import (Agent, EpisodeContext, EpisodeEnd, Monitor, MonitorVerdict, Observation,
                             ProposedStep, Status, StepEvent, StepObserver)
from harness.records import EpisodeWriter, StepRecord, now_iso
from harness.tasks import Task

log = logging.getLogger("harness.runner")


class Interrupted(Exception):
    """The run is being stopped (Ctrl-C): the episode is abandoned unrecorded, to be redone on --resume."""


@dataclass
class EpisodeOutcome:
    status: Status
    steps: int
    cap: int
    verdicts: dict[str, Any] = field(default_factory=dict)
    judge_details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    halt: dict[str, Any] | None = None
    answer: str | None = None
    started_at: str = ""
    ended_at: str = ""
    duration_s: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)


class _AsyncMonitors:
    """Async-mode monitors judge each proposed step in the background; a risky verdict halts the
    episode at the next step boundary (the action already ran)."""

    def __init__(self, monitors: list[Monitor]):
        self.monitors = monitors
        self.pool = cf.ThreadPoolExecutor(max_workers=max(1, len(monitors) * 2), thread_name_prefix="monitor") if monitors else None
        self.pending: list[tuple[int, cf.Future]] = []

    def submit(self, step: ProposedStep) -> None:
        for m in self.monitors:
            assert self.pool is not None
            self.pending.append((step.index, self.pool.submit(_safe_check, m, step)))

    def collect(self, wait: bool = False) -> tuple[int, MonitorVerdict] | None:
        """The first halting verdict among finished checks (all of them if ``wait``)."""
        keep = []
        found = None
        for idx, fut in self.pending:
            if wait or fut.done():
                v = fut.result()
                if v.halt and found is None:
                    found = (idx, v)
            else:
                keep.append((idx, fut))
        self.pending = keep
        return found

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


def _safe_check(m: Monitor, step: ProposedStep) -> MonitorVerdict:
    t0 = time.monotonic()
    try:
        v = m.check(step)
    except Exception as e:  # a broken monitor must not take the episode down; it is recorded
        v = MonitorVerdict(halt=False, error=f"{type(e).__name__}: {e}")
    v.monitor = v.monitor or m.name
    v.latency_s = v.latency_s or (time.monotonic() - t0)
    return v


def run_episode(task: Task, agent: Agent, device: Device, writer: EpisodeWriter, *,
                cap: int | None = None, seed: int = 0, monitors: list[Monitor] = (),
                observers: list[StepObserver] = (),
                should_stop: Callable[[], bool] = lambda: False) -> EpisodeOutcome:
    """Run ``task`` once on ``device`` and record it through ``writer``."""
    cap = cap or task.cap
    started = time.monotonic()
    out = EpisodeOutcome(status="infra_error", steps=0, cap=cap, started_at=now_iso())
    gates = [m for m in monitors if m.mode == "gate"]
    background = _AsyncMonitors([m for m in monitors if m.mode == "async"])
    totals: dict[str, float] = {}
    final_shot: bytes | None = None
    agent_finished = False
    try:
        # --- reset and first observation ---------------------------------------------------
        try:
            device.reset(task.setup, task.language)
            shot = device.screenshot()
            size = device.screen_size()
        except (DeviceError, ActionError) as e:
            # the task cannot start here (missing app, refused preset): the device is fine
            out.status, out.error = "infra_error", f"reset failed: {e}"
            return out
        ctx = EpisodeContext(task=task, screen_size=size, seed=seed, device_serial=device.serial,
                             query_state=device.state, cap=cap, episode_dir=str(writer.path))
        before_path = writer.write_screen(0, shot)
        for plug in [*observers, *monitors]:
            plug.start(ctx)
        try:
            agent.reset(ctx)
        except Exception as e:
            out.status, out.error = "agent_error", f"agent reset failed: {type(e).__name__}: {e}"
            return out
        status: Status = "step_limit"
        for i in range(1, cap + 1):
            if should_stop():
                raise Interrupted()
            timings: dict[str, float] = {}
            # --- the agent proposes ---------------------------------------------------------
            obs = Observation(step=i, screenshot=shot, screen_size=size, hierarchy=device.hierarchy,
                              instruction=task.instruction, language=task.language)
            t0 = time.monotonic()
            try:
                proposal = agent.step(obs)
            except InfraError:
                raise
            except Exception as e:
                log.debug("agent error: %s", traceback.format_exc())
                out.status, out.error = "agent_error", f"step {i}: {type(e).__name__}: {e}"
                out.steps = i - 1
                status = "agent_error"
                break
            timings["agent"] = time.monotonic() - t0
            action = proposal.action
            invalid = proposal.invalid
            monitor_json: dict[str, Any] | None = None
            halt: tuple[int, MonitorVerdict] | None = None
            # --- monitors: an async verdict from earlier steps halts at this boundary ---------
            t0 = time.monotonic()
            earlier = background.collect()
            if earlier is not None:
                halt = earlier
            elif action is not None and gates:
                proposed = ProposedStep(i, shot, action, proposal.raw_output, task.instruction, task.language)
                for m in gates:
                    v = _safe_check(m, proposed)
                    monitor_json = v.to_json()
                    if v.halt:
                        halt = (i, v)
                        break
            timings["monitors"] = time.monotonic() - t0
            after_shot: bytes | None = None
            after_path: str | None = None
            if halt is None and action is not None:
                if background.monitors:
                    background.submit(ProposedStep(i, shot, action, proposal.raw_output, task.instruction, task.language))
                t0 = time.monotonic()
                try:
                    check_on_screen(action, *size)
                    device.execute(action)
                    executed = True
                except ActionError as e:
                    invalid = f"action failed on the device: {e}"
                    executed = False
                timings["action"] = time.monotonic() - t0
                if executed and not isinstance(action, (Answer, Finish)):
                    after_shot, settle = device.settle(shot)
                    timings["settle"] = settle.settle
                    timings["screenshot"] = 0.0  # the settled frame is the observation
                if isinstance(action, Answer):
                    out.answer = action.text
            # --- record ---------------------------------------------------------------------
            t0 = time.monotonic()
            if after_shot is not None:
                after_path = writer.write_screen(i, after_shot)
            record = StepRecord(
                index=i, action=action_to_json(action) if action is not None else None, invalid=invalid,
                raw_output=proposal.raw_output, thought=proposal.thought, screen_before=before_path,
                screen_after=after_path, timings={k: round(v, 6) for k, v in timings.items()},
                monitor=(halt[1].to_json() | {"halted_step": halt[0]}) if halt else monitor_json,
                extras=proposal.extras or None)
            timings["write"] = time.monotonic() - t0
            record = record.model_copy(update={"timings": {k: round(v, 6) for k, v in timings.items()}})
            writer.append_step(record)
            for k, v in timings.items():
                totals[k] = totals.get(k, 0.0) + v
            out.steps = i
            event = StepEvent(index=i, action=action, raw_output=proposal.raw_output, invalid=invalid,
                              screenshot_before=shot, screenshot_after=after_shot, screen_before_path=before_path,
                              screen_after_path=after_path, thought=proposal.thought, monitor=record.monitor)
            for o in observers:
                o.on_step(event)
            if halt is not None:
                hv = halt[1]
                status = "halted"
                out.halt = {"step": halt[0], "category": hv.category or "unspecified", "reason": hv.reason,
                            "monitor": hv.monitor, "executed": halt[0] < i}
                break
            if after_shot is not None:
                shot, before_path = after_shot, after_path
            if isinstance(action, Finish):
                status = "finished"
                agent_finished = True
                break
        else:
            status = "step_limit"
        if status in ("step_limit", "finished") and background.monitors:
            # an async check still running when the episode ended must still be heard
            late = background.collect(wait=True)
            if late is not None:
                status = "halted"
                out.halt = {"step": late[0], "category": late[1].category or "unspecified",
                            "reason": late[1].reason, "monitor": late[1].monitor, "executed": True}
        if status != "agent_error":
            out.status = status
        final_shot = shot
    except InfraError as e:
        out.status, out.error = "infra_error", str(e)
    finally:
        background.close()
        out.timings = {k: round(v, 4) for k, v in totals.items()}
        # the early returns (reset or agent reset failed) skip the end below: without these the
        # result line was invalid (ended_at '') and the worker thread died with it
        out.ended_at = now_iso()
        out.duration_s = round(time.monotonic() - started, 4)
    # --- judges: verdicts from what they gathered during the run ------------------------------
    if out.status != "infra_error":
        end = EpisodeEnd(status=out.status, steps=out.steps, final_screenshot=final_shot, answer=out.answer,
                         agent_finished=agent_finished)
        for o in observers:
            try:
                for name, (verdict, details) in o.finish(end).items():
                    out.verdicts[name] = verdict
                    out.judge_details[name] = details
            except InfraError as e:
                out.status, out.error = "infra_error", f"judge {o.name}: {e}"
                break
            except Exception as e:  # a judge failure is a judge_error verdict, never a crash
                out.verdicts[o.name] = "judge_error"
                out.judge_details[o.name] = {"error": f"{type(e).__name__}: {e}"}
    out.ended_at = now_iso()
    out.duration_s = round(time.monotonic() - started, 4)
    return out
