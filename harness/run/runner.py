"""One episode: reset -> observe -> agent proposes -> monitors may veto -> execute -> settle ->
record -> observers get the step; stop on finish, veto, the 2c+1 cap, agent error or infra error.

Monitors fail closed: a check that raises or does not answer within its monitor's ``timeout_s``
halts before the action unless that monitor says ``on_error=allow``; every model call the check
makes ends by that deadline too (harness.client.transport.deadline), so a check that failed closed
holds no endpoint slot or connection after it. A gate in ``ask`` mode whose
verdict would halt asks the ``operator`` first (:class:`harness.core.episode.Operator`): allowed, the action runs;
denied, or unanswered in time, it halts as a gate halts; with no operator it halts. A gate in
``reflect`` mode whose verdict would halt tells the agent why instead (:class:`harness.core.episode.
ReflectingAgent`): the step is recorded unexecuted with the feedback, and the agent proposes again
from the same screen as the next step (a proposal counts against the cap like any step); the
monitor's ``reflect_max``-th flagged proposal since an action last ran halts (``reflect,ask``:
asks the operator), and a check that failed is never reflected on. An async
check of step k is waited for before the action of step k+1 runs (one step of lag, never more). Every step record
says whether its action ran (``executed``); ``steps`` counts those that did. At the end every
judge finishes at once.

A run being stopped (``should_stop``: Ctrl-C) abandons the episode at the next point where the
phone would be touched: before an action runs, after an agent or check that failed while the
model calls were being cut (harness.client.calls.stop_calls), and after judges that failed meanwhile. An
abandoned episode is not recorded as finished, halted or failed: it is redone on ``--resume``.
Monitors' checks and judges' ``finish`` run on daemon threads (harness.core.daemon_pool), so one that
never returns is left behind, never joined.

The runner talks to a :class:`harness.device.base.Device` and to the plugin protocols of
``harness.core.episode``; it knows no particular agent, judge, device kind, operator or live view.
Beside the trajectory it tells the episode's :class:`harness.core.episode.LiveRecorder` what it is
doing (the step being decided, judges' step evidence); ``harness.live.records.EpisodeLive`` writes
that into the run folder, where a live view reads it.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.client.config import ModelError
from harness.core.actions import NO_DEVICE_EFFECT, ActionError, Answer, Finish, NeedsUser, action_to_json, check_on_screen
from harness.core.daemon_pool import DaemonPool
from harness.run.gate import Checks as _Checks, Flagged, Interrupted  # noqa: F401  (the gate's decision, shared)
from harness.device.base import Device, DeviceError, InfraError, TaskUnavailable
from harness.core.episode import (REFLECT_MODES, Agent, CandidatePixels, EpisodeContext, EpisodeEnd, Feedback,
                                  HandingOperator, LiveRecorder, Monitor, MonitorVerdict, NoLiveView, Observation, Operator,
                                  OperatorStep, PixelPreparingAgent, PreparingAgent, ProposedStep, Question, ReflectingAgent,
                                  Status, StepEvent, StepObserver)
from harness.records import EpisodeWriter, StepRecord, kept_thought, now_iso
from harness.core.screenshot import Screenshot
from harness.core.tasks import Task
from harness.core.usage import Meter

log = logging.getLogger("harness.run.runner")


@dataclass
class EpisodeOutcome:
    status: Status
    steps: int                          # steps whose action ran
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
    proposed_steps: int = 0             # steps recorded, executed or not
    usage: dict[str, Any] | None = None  # the episode's model usage by role (harness.core.usage.Meter)
    checks: dict[str, int] = field(default_factory=dict)  # monitor checks: made, flagged, failed, ran_unchecked
    operator: dict[str, Any] = field(default_factory=dict)  # mode ask: asked, allowed, denied, timed_out, wait_s
    handovers: list[dict[str, Any]] = field(default_factory=list)  # needs_user: each hand-over (HandOvers.done)
    operator_steps: int = 0             # steps a person did during hand-overs (not the agent's, not capped)
    reflections: int = 0                # mode reflect: flagged proposals the agent was told about


def agent_indexes(cap: int, taken: list[int]):
    """The trajectory index of each agent step, up to ``cap`` agent steps: the steps a person did
    meanwhile (``taken[0]``, hand-overs) are indexes of their own and do not count against the cap."""
    for k in range(1, cap + 1):
        yield k + taken[0]


class HandOvers:
    """The episode's hand-overs (an agent's ``needs_user``): each asks the operator to take the
    phone, records the person's touches as steps ``by: operator`` (written as they come, given to
    the judges, never to the monitors) and returns the screen the agent goes on from; with nobody
    to hand it to, or no hand-back before the timeout, the episode ends ``needs_user``."""

    def __init__(self, operator: Operator | None, device: Device, writer: EpisodeWriter, live: LiveRecorder,
                 observers: list[StepObserver], task: Task, cap: int, should_stop: Callable[[], bool]):
        self.operator = operator if isinstance(operator, HandingOperator) and operator.can_hand_over else None
        self.device, self.writer, self.live, self.observers = device, writer, live, observers
        self.task, self.cap, self.should_stop = task, cap, should_stop
        self.taken = [0]                   # operator steps so far (agent_indexes reads it)
        self.indexes: set[int] = set()
        self.done: list[dict[str, Any]] = []
        self.last = 0                      # the last index written

    def question(self, index: int, action: NeedsUser) -> dict[str, Any]:
        """What the needs_user step's record says of the request (``outcome`` nobody when no one can take it)."""
        q = {"text": action.text, "asked_at": now_iso()}
        return q if self.operator is not None else {**q, "outcome": "nobody"}

    def run(self, index: int, action: NeedsUser, shot: Screenshot, before_path: str,
            asked: dict[str, Any]) -> tuple[Screenshot, str] | None:
        """Hand the phone over at step ``index``: (the screen and its path the agent goes on from), or
        None when the episode ends needs_user (nobody could take it, gave up, timed out)."""
        if self.operator is None:
            self.done.append({"step": index, "outcome": "nobody", "text": action.text, "asked_at": asked["asked_at"],
                              "wait_s": 0.0, "operator_steps": []})
            return None
        self.last = index
        state = {"shot": shot, "path": before_path, "steps": []}
        self.live.step(index, "handed_over", screen_before=before_path, action=action_to_json(action),
                       action_text=action.describe())

        def on_step(op: OperatorStep) -> None:
            i = self.last + 1
            after = self.writer.write_screen(i, op.screen_after) if op.screen_after else None
            unread = f"the person's actions could not be read: {op.unread}" if op.action is None else None
            rec = StepRecord(index=i, action=action_to_json(op.action) if op.action is not None else None,
                             executed=True, by="operator", invalid=unread, raw_output=None, screen_before=state["path"],
                             screen_after=after, extras={**op.extras, "at": op.at, "handover_step": index} or None)
            self.writer.append_step(rec)
            self.last = i
            self.taken[0] += 1
            self.indexes.add(i)
            state["steps"].append(i)
            after_shot = Screenshot(op.screen_after) if op.screen_after else None
            event = StepEvent(index=i, action=op.action, raw_output=None, invalid=unread,
                              screenshot_before=op.screen_before or state["shot"], screenshot_after=after_shot,
                              screen_before_path=state["path"], screen_after_path=after, by="operator")
            for o in self.observers:
                o.on_step(event)
            if after_shot is not None:
                state["shot"], state["path"] = after_shot, after

        q = Question(self.writer.path, self.writer.task_id, self.device.serial, index, self.cap, action.describe(),
                     "agent", None, action.text, kind="needs_user")
        d = self.operator.hand_over(q, self.device, self.live, on_step, self.should_stop)
        if d is None:
            raise Interrupted()
        if d.unread:  # what the person did (all of it, or from some point on) is not in the steps: one step says so
            on_step(OperatorStep(None, state["shot"], self.device.screenshot(), {"unread": d.unread}, unread=d.unread))
        outcome = "handed_back" if d.allowed else "timeout" if d.by == "timeout" else "gave_up"
        self.done.append({"step": index, "outcome": outcome, "text": action.text, **d.to_json(),
                          "operator_steps": list(state["steps"])})
        return (state["shot"], state["path"]) if d.allowed else None


def finish_all(observers: list[StepObserver], end: EpisodeEnd) -> list[tuple[StepObserver, Any]]:
    """Every observer's ``finish(end)`` at once, each on a thread of its own, so the verdicts wait
    for the slowest judge rather than for the sum of them: (observer, its return value or the
    exception it raised), in the observers' order."""
    if len(observers) <= 1:
        out: list[tuple[StepObserver, Any]] = []
        for o in observers:
            try:
                out.append((o, o.finish(end)))
            except Exception as e:
                out.append((o, e))
        return out
    pool = DaemonPool(len(observers), thread_name_prefix="finish")
    try:
        futures = [(o, pool.submit(o.finish, end)) for o in observers]
        results = []
        for o, f in futures:
            try:
                results.append((o, f.result()))
            except Exception as e:
                results.append((o, e))
        return results
    finally:
        pool.shutdown(wait=False)


def run_episode(task: Task, agent: Agent, device: Device, writer: EpisodeWriter, *,
                cap: int | None = None, seed: int = 0, monitors: list[Monitor] = (),
                observers: list[StepObserver] = (),
                should_stop: Callable[[], bool] = lambda: False, meter: Meter | None = None,
                operator: Operator | None = None, live: LiveRecorder | None = None) -> EpisodeOutcome:
    """Run ``task`` once on ``device`` and record it through ``writer``. The episode's model usage
    goes to a meter of its own (reporting into ``meter`` when given) and into the outcome.
    ``operator`` answers the questions of ``ask`` monitors (none given: they halt). ``live`` is
    told what the episode does as it does it; none given: the ``operator``'s live records of the
    episode's folder (its questions are shown from there), else nothing is told. A ``reflect``
    monitor needs an agent that reflects (TypeError before the device is touched)."""
    reflecting = [m.name for m in monitors if m.mode in REFLECT_MODES]
    if reflecting and not isinstance(agent, ReflectingAgent):
        raise TypeError(f"agent {getattr(agent, 'name', type(agent).__name__)!r} cannot be told why its action was "
                        f"refused (it has no reflect()): it cannot run with monitor {reflecting[0]!r} in mode "
                        f"{next(m.mode for m in monitors if m.mode in REFLECT_MODES)}")
    cap = cap or task.cap
    started = time.monotonic()
    out = EpisodeOutcome(status="infra_error", steps=0, cap=cap, started_at=now_iso())
    checks = _Checks(list(monitors))
    episode_meter = Meter(parent=meter)
    totals: dict[str, float] = {}
    final_shot: bytes | None = None
    agent_finished = False
    ran: set[int] = set()
    held: list[StepRecord] = []  # a step whose async check is still running (written when it answers)
    abandoned = False            # interrupted: the episode is redone on --resume, nothing more to wait for
    if live is None:
        live = operator.live_records(writer.path) if operator is not None else NoLiveView()
    flagged = Flagged(operator, live, should_stop, lambda m, step, v: Question(
        writer.path, writer.task_id, device.serial, step.index, cap, step.action.describe(), v.monitor or m.name, v.category,
        v.reason, v.error, v.score))
    asked = flagged.asked
    handovers = HandOvers(operator, device, writer, live, list(observers), task, cap, should_stop)
    step_wait = flagged.step_wait  # the current step's time waiting for the operator
    in_row = flagged.in_row        # flagged proposals reflected on since an action last ran

    def write(record: StepRecord, timings: dict[str, float]) -> None:
        t0 = time.monotonic()
        writer.append_step(record.model_copy(update={"timings": {k: round(v, 6) for k, v in timings.items()}}))
        timings["write"] = timings.get("write", 0.0) + time.monotonic() - t0
        for k, v in timings.items():
            totals[k] = totals.get(k, 0.0) + v
        live.recorded(record.index)

    def release_held() -> tuple[int, MonitorVerdict] | None:
        """Wait for the pending async checks and write the step they belong to, with its verdict."""
        if not checks.pending:
            return None
        got = checks.wait()
        if held:
            rec = held.pop()
            mon = got[1].to_json() | ({"halted_step": got[0]} if got[1].halt else {}) if got else None
            write(rec.model_copy(update={"monitor": mon}), dict(rec.timings))
        return got if got and got[1].halt else None

    live.started(task_id=writer.task_id, device=device.serial, cap=cap, instruction=task.instruction,
                 language=task.language)
    live.step(None, "resetting")
    try:
        # --- reset and first observation ---------------------------------------------------
        try:
            device.reset(task.setup, task.language)
            shot = Screenshot(device.screenshot())  # its pixels are decoded once, for agent and judges alike
            size = device.screen_size()
        except TaskUnavailable as e:
            # an app it needs is not installed here (or it needs another kind of device): the task's
            # fault on this phone, neither the agent's nor the infrastructure's; not retried
            out.status, out.error = "task_error", str(e)
            return out
        except (DeviceError, ActionError) as e:
            # the task cannot start here (refused preset, a start that did not take): the device is fine
            out.status, out.error = "infra_error", f"reset failed: {e}"
            return out
        ctx = EpisodeContext(task=task, screen_size=size, seed=seed, device_serial=device.serial,
                             query_state=device.state, cap=cap, episode_dir=str(writer.path), meter=episode_meter,
                             report_evidence=live.evidence)

        def observe(step: int, screenshot: bytes) -> Observation:
            return Observation(step=step, screenshot=screenshot, screen_size=size, hierarchy=device.hierarchy,
                               instruction=task.instruction, language=task.language)

        # an agent that can start work on a screenshot as it arrives (encoding it) is told at once:
        # during settling, as soon as a candidate frame is ready, while the device confirms it
        # (best effort: a prepare that fails is the step's to redo, and to report); a raw frame's
        # pixels go to an agent that takes them even before the frame's PNG is encoded
        agent_prepare = agent.prepare if isinstance(agent, PreparingAgent) else None
        agent_pixels = agent.prepare_pixels if isinstance(agent, PixelPreparingAgent) else None

        def prepare(obs: Observation) -> None:
            if agent_prepare is not None:
                try:
                    agent_prepare(obs)
                except Exception:
                    log.debug("agent prepare failed: %s", traceback.format_exc())

        def prepare_pixels(step: int, pixels: Any) -> None:
            try:
                agent_pixels(CandidatePixels(step=step, pixels=pixels, screen_size=size, hierarchy=device.hierarchy))
            except Exception:
                log.debug("agent prepare_pixels failed: %s", traceback.format_exc())
        before_path = writer.write_screen(0, shot)
        for plug in [*observers, *monitors]:
            plug.start(ctx)
        try:
            agent.reset(ctx)
        except Exception as e:
            out.status, out.error = "agent_error", f"agent reset failed: {type(e).__name__}: {e}"
            return out
        prepare(observe(1, shot))
        status: Status = "step_limit"
        for i in agent_indexes(cap, handovers.taken):
            if should_stop():
                abandoned = True
                raise Interrupted()
            timings: dict[str, float] = {}
            live.step(i, "thinking", screen_before=before_path)
            # --- the agent proposes (an async check of the last step runs meanwhile) -----------
            obs = observe(i, shot)
            t0 = time.monotonic()
            try:
                proposal = agent.step(obs)
            except InfraError:
                raise
            except Exception as e:
                if should_stop():  # its model call was cut because the run is stopping: not the agent's error
                    abandoned = True
                    raise Interrupted() from None
                log.debug("agent error: %s", traceback.format_exc())
                # the agent's model endpoint failed the call for good: not a decision of the agent's
                status = "model_error" if isinstance(e, ModelError) else "agent_error"
                out.status, out.error = status, f"step {i}: {type(e).__name__}: {e}"
                break
            timings["agent"] = time.monotonic() - t0
            action = proposal.action
            invalid = proposal.invalid
            monitor_json: dict[str, Any] | None = None
            halt: tuple[int, MonitorVerdict] | None = None
            # --- monitors: the last step's async check answers before anything else runs -------
            if checks.pending:
                t0 = time.monotonic()
                halt = release_held()
                timings["monitor_wait"] = time.monotonic() - t0
            proposed = None
            if action is not None:
                try:  # an action off the screen is refused before any monitor is asked about it
                    check_on_screen(action, *size)
                    proposed = ProposedStep(i, shot, action, proposal.raw_output, task.instruction, task.language)
                except ActionError as e:
                    invalid = f"action failed on the device: {e}"
            confirmed: dict[str, Any] | None = None
            if halt is None and proposed is not None and proposal.confirm is not None:
                # the agent itself asks before this action (AutoGLM's sensitive Tap): the operator's
                # answer decides, as for a monitor in mode ask; nobody to ask halts, as its source stops
                asked_v = flagged.ask(None, proposed, MonitorVerdict(  # type: ignore[arg-type]  (the verdict names its asker)
                    halt=True, category="sensitive_action", monitor="agent", reason=proposal.confirm[:2000]))
                confirmed = {"text": proposal.confirm[:2000], **(asked_v.operator or {})}
                if asked_v.halt:
                    halt, monitor_json = (i, asked_v), asked_v.to_json()
            checking = halt is None and proposed is not None and bool(checks.gates)
            live.update(state="checking" if checking else "halted" if halt else "running",
                        thought=kept_thought(proposal.thought, proposal.raw_output)[0],
                        action=action_to_json(action) if action is not None else None, invalid=invalid,
                        action_text=action.describe() if action is not None else None)
            t0 = time.monotonic()
            step_wait[0] = 0.0
            feedback: dict[str, Any] | None = None
            if checking:
                v, halted = checks.gate(proposed, flagged, seen=lambda v: live.verdict(v.to_json()))
                monitor_json = v.to_json() if v is not None else None
                if halted and v.feedback is not None:  # reflect: the agent is told why, and proposes again
                    feedback = v.feedback
                elif halted:
                    halt = (i, v)
                live.update(state="halted" if halt else "reflecting" if feedback else "running")
            timings["monitors"] = time.monotonic() - t0 - step_wait[0]
            if step_wait[0]:
                timings["operator"] = step_wait[0]
            if should_stop():  # stopping: nothing more reaches the phone, and a check cut meanwhile decides nothing
                abandoned = True
                raise Interrupted()
            after_shot: bytes | None = None
            after_path: str | None = None
            executed = False
            if halt is None and feedback is None and proposed is not None:  # (reflect: refused, not run)
                if checks.background:
                    checks.start(proposed)
                t0 = time.monotonic()
                try:
                    device.execute(action)
                    executed = True
                except ActionError as e:
                    invalid = f"action failed on the device: {e}"
                timings["action"] = time.monotonic() - t0
                if executed and not isinstance(action, NO_DEVICE_EFFECT):
                    after_shot, settle = device.settle(
                        shot, on_frame=lambda s, k=i + 1: prepare(observe(k, s)),
                        on_pixels=(lambda p, k=i + 1: prepare_pixels(k, p)) if agent_pixels is not None else None)
                    timings["settle"] = settle.settle
                    timings["screenshot"] = 0.0  # the settled frame is the observation
                if executed and isinstance(action, Answer):
                    out.answer = action.text
            # --- record ---------------------------------------------------------------------
            t0 = time.monotonic()
            if after_shot is not None:
                after_path = writer.write_screen(i, after_shot)
            timings["write"] = time.monotonic() - t0
            if executed:
                ran.add(i)
                in_row[0] = 0
            reflection: dict[str, Any] | None = None
            reflect_error: str | None = None
            if feedback is not None:
                in_row[0] += 1
                out.reflections += 1
                try:
                    told = agent.reflect(Feedback(**feedback))  # type: ignore[union-attr]
                    reflection = {"feedback": str(told), **feedback}
                except InfraError:
                    raise
                except Exception as e:
                    log.debug("agent reflect failed: %s", traceback.format_exc())
                    reflect_error = f"step {i}: the agent could not take the feedback: {type(e).__name__}: {e}"
                    reflection = {"feedback": None, "error": reflect_error, **feedback}
            thought, thought_note = kept_thought(proposal.thought, proposal.raw_output)
            extras = {**(proposal.extras or {}), **({"thought_cut": thought_note} if thought_note else {}),
                      **({"confirmed": confirmed} if confirmed else {})}
            record = StepRecord(
                index=i, action=action_to_json(action) if action is not None else None, executed=executed,
                invalid=invalid, raw_output=proposal.raw_output, thought=thought, screen_before=before_path,
                screen_after=after_path, timings={k: round(v, 6) for k, v in timings.items()},
                monitor=(halt[1].to_json() | {"halted_step": halt[0]}) if halt else monitor_json,
                handover=handovers.question(i, action) if executed and isinstance(action, NeedsUser) else None,
                reflection=reflection, extras=extras or None)
            if checks.pending:
                held.append(record)  # written with its verdict at the next boundary
            else:
                write(record, timings)
            out.proposed_steps = i  # the trajectory's length (operator steps included once they come)
            event = StepEvent(index=i, action=action, raw_output=proposal.raw_output, invalid=invalid,
                              screenshot_before=shot, screenshot_after=after_shot, screen_before_path=before_path,
                              screen_after_path=after_path, thought=thought, monitor=record.monitor,
                              executed=executed)
            for o in observers:
                o.on_step(event)
            if reflect_error is not None:
                out.status, out.error = "agent_error", reflect_error
                status = "agent_error"
                break
            if halt is not None:
                hv = halt[1]
                status = "halted"
                out.halt = {"step": halt[0], "category": hv.category or "unspecified", "reason": hv.reason,
                            "monitor": hv.monitor, "executed": halt[0] < i}
                if hv.operator:
                    out.halt["operator"] = hv.operator
                if in_row[0] and halt[0] == i:  # mode reflect: the agent had been told, and proposed it again
                    out.halt["after_reflections"] = in_row[0]
                break
            if after_shot is not None:
                shot, before_path = after_shot, after_path
            if isinstance(action, NeedsUser) and executed:
                late = release_held()  # an async check of the step before must be heard first
                if late is not None:
                    status = "halted"
                    out.halt = {"step": late[0], "category": late[1].category or "unspecified",
                                "reason": late[1].reason, "monitor": late[1].monitor, "executed": True}
                    break
                back = handovers.run(i, action, shot, before_path, record.handover or {})
                if back is None:
                    status = "needs_user"
                    break
                shot, before_path = back
                prepare(observe(handovers.last + 1, shot))
                continue
            if isinstance(action, Finish) and executed:
                status = "finished"
                agent_finished = True
                break
        else:
            status = "step_limit"
        # an async check still running when the episode ended must still be heard
        late = release_held()
        if late is not None and status in ("step_limit", "finished", "agent_error", "model_error"):
            if status not in ("agent_error", "model_error"):
                status = "halted"
            out.halt = {"step": late[0], "category": late[1].category or "unspecified",
                        "reason": late[1].reason, "monitor": late[1].monitor, "executed": True}
        if status not in ("agent_error", "model_error"):
            out.status = status
        final_shot = shot
    except InfraError as e:
        out.status, out.error = "infra_error", str(e)
    finally:
        try:
            if held and not (abandoned or flagged.stopped):  # an infra error while a check ran: keep what was recorded
                release_held()
        except Exception:  # the records' own failure is reported by the caller
            log.debug("could not write the held step: %s", traceback.format_exc())
        checks.close()
        live.clear()
        out.steps = len(ran)
        out.checks = checks.stats()
        if asked["asked"]:
            out.operator = {**asked, "wait_s": round(asked["wait_s"], 3)}
        out.handovers = handovers.done
        out.operator_steps = len(handovers.indexes)
        out.proposed_steps = max(out.proposed_steps, handovers.last)
        out.timings = {k: round(v, 4) for k, v in totals.items()}
        # the early returns (reset or agent reset failed) skip the end below: without these the
        # result line was invalid (ended_at '') and the worker thread died with it
        out.ended_at = now_iso()
        out.duration_s = round(time.monotonic() - started, 4)
    # --- judges: verdicts from what they gathered during the run, all at once ------------------
    if out.status != "infra_error":
        end = EpisodeEnd(status=out.status, steps=out.proposed_steps, final_screenshot=final_shot, answer=out.answer,
                         agent_finished=agent_finished, executed=frozenset(ran | handovers.indexes),
                         by_operator=frozenset(handovers.indexes))
        live.step(None, "judging", status=out.status)
        for o, res in finish_all(list(observers), end):
            if isinstance(res, InfraError):
                out.status, out.error = "infra_error", f"judge {o.name}: {res}"
                break
            if isinstance(res, Exception):  # a judge failure is a judge_error verdict, never a crash
                out.verdicts[o.name] = "judge_error"
                out.judge_details[o.name] = {"error": f"{type(res).__name__}: {res}"}
                continue
            for name, (verdict, details) in res.items():
                out.verdicts[name] = verdict
                out.judge_details[name] = details
        if should_stop() and "judge_error" in out.verdicts.values():
            live.clear()  # a judge failed while the run was stopping (its calls cut): judged again on --resume
            raise Interrupted()
    live.clear()
    out.usage = episode_meter.to_json()
    out.ended_at = now_iso()
    out.duration_s = round(time.monotonic() - started, 4)
    return out
