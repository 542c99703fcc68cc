"""Many episodes: a pool of stations (a device each, one episode at a time), resume, retries of
infrastructure failures on a healthy station, Ctrl-C that leaves a resumable run, live progress.

When the run stops (Ctrl-C, SIGTERM, a fault outside any episode) every model call in flight is cut
(harness.client.calls.stop_calls) and the stations get ``STOP_GRACE_S`` to leave their episodes at the
next safe point (harness.run.runner: before anything more reaches a phone); a station still busy then
(a device command that hangs) is abandoned, not joined: its thread is a daemon, its episode
unrecorded and redone on ``--resume``, and the run goes on to put the phones back.

A station is a device of this host (:class:`LocalStation`) or a device on a node of a Ray farm
(``harness.farm``); the queue, retries and records are the same for both.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from harness.client import calls as model
from harness.device.base import Device
from harness.core.episode import Agent, LiveRecorder, Monitor, Operator, StepObserver
from harness.records import EpisodeResult, EpisodeWriter, RunWriter
from harness.run.conditions import episode_conditions
from harness.run.repeats import PlannedEpisode, as_planned
from harness.run.runner import EpisodeOutcome, Interrupted, run_episode
from harness.core.tasks import Task
from harness.core.usage import Meter


@dataclass
class Plugins:
    """Builds fresh plugin instances for a worker (agents and judges keep per-episode state)."""

    agent: Callable[[], Agent]
    observers: Callable[[], list[StepObserver]] = lambda: []
    monitors: Callable[[], list[Monitor]] = lambda: []
    # why the agent cannot run a task (replay: no reference), checked before any device is touched
    check_task: Callable[[Task], str | None] = lambda task: None
    operator: Operator | None = None  # answers ``ask`` monitors' questions (harness.live.operator.Operator); shared
    # each episode's live records, from its folder (harness.live.records.EpisodeLive); None: no live view
    live: Callable[[Path], LiveRecorder] | None = None


@dataclass
class SuiteConfig:
    agent_name: str
    seed: int = 0
    max_steps: int | None = None       # overrides every task's 2c+1 cap
    infra_retries: int = 1             # an infra_error episode is retried this often on a healthy device
    reconnect_timeout: float = 15.0
    on_reset: Callable[[dict[str, Any]], None] | None = None  # what each episode's reset did (the manifest)


@dataclass
class DeviceStatus:
    serial: str
    task: str = ""
    state: str = "idle"
    done: int = 0


@dataclass
class SuiteReport:
    results: list[EpisodeResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)      # already complete (resume)
    not_run: list[str] = field(default_factory=list)      # interrupted or no healthy device left
    interrupted: bool = False
    dead_devices: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    error: str | None = None                              # a fault outside any episode stopped the run
    usage: dict[str, Any] | None = None                   # model usage of the episodes run now, by role
    abandoned: list[str] = field(default_factory=list)    # stations still busy STOP_GRACE_S after the stop


class Job:
    """One episode to run (a task, or a repeat of it: ``planned``): its attempt number, and the
    station that failed it last (to go elsewhere)."""

    def __init__(self, planned: PlannedEpisode, attempt: int = 1, avoid: str | None = None):
        self.planned, self.attempt, self.avoid = planned, attempt, avoid
        self.task, self.episode, self.seed = planned.task, planned.id, planned.seed


@dataclass
class Attempt:
    """What a station did with a job: the episode's outcome, the fields its result takes from the
    station (``device``; a farm adds ``node``), and ``commit``, which makes the episode's records
    final (its summary written, a farm's episode installed) before its result line is appended."""

    outcome: EpisodeOutcome
    commit: Callable[[EpisodeResult], Any]
    fields: dict[str, Any] = field(default_factory=dict)
    reset: dict[str, Any] | None = None  # what the episode's reset did (the device's ``last_reset``)
    conditions: dict[str, Any] | None = None  # what could make repeats differ (harness.run.conditions)


class StationLost(Exception):
    """The station was gone before the episode started (a farm node that died while idle): the job
    goes back to the queue unchanged, since it was never attempted."""


class Station(Protocol):
    """Where episodes run, one at a time: a device of this host (:class:`LocalStation`) or a device
    on a farm node (``harness.farm``). ``name`` is unique in the run: the progress row, and what a
    retry avoids. ``run`` raises :class:`harness.run.runner.Interrupted` when ``should_stop`` stops it."""

    name: str

    def run(self, job: Job, writer: RunWriter, cfg: "SuiteConfig", should_stop: Callable[[], bool],
            emit: Callable[[str, dict[str, Any]], None], meter: Meter) -> Attempt: ...

    def reconnect(self, timeout: float) -> bool: ...


class LocalStation:
    """A device of this host: episodes run here, written straight into the run folder."""

    def __init__(self, device: Device, plugins: Plugins):
        self.device, self.plugins, self.name = device, plugins, device.serial
        self.agent: Agent | None = None  # built in the worker's thread, kept across episodes

    def run(self, job: Job, writer: RunWriter, cfg: "SuiteConfig", should_stop: Callable[[], bool],
            emit: Callable[[str, dict[str, Any]], None], meter: Meter) -> Attempt:
        if self.agent is None:
            self.agent = self.plugins.agent()
        ep = writer.start_episode(job.episode, retry=job.attempt > 1)
        out = play_episode(job.task, self.agent, self.device, ep, self.plugins, cap=cfg.max_steps or job.task.cap,
                           seed=job.seed, should_stop=should_stop, progress=StepProgress(emit, self.name, job.episode),
                           meter=meter)
        start = ep.path / "screens" / "000.png"
        cond = episode_conditions(self.device.serial, self.device, self.agent, out.usage,
                                  start.read_bytes() if start.is_file() else None)
        return Attempt(out, ep.write_summary, {"device": self.device.serial}, getattr(self.device, "last_reset", None),
                       cond)

    def reconnect(self, timeout: float) -> bool:
        return self.device.reconnect(timeout)


def play_episode(task: Task, agent: Agent, device: Device, ep: EpisodeWriter, plugins: Plugins, *, cap: int,
                 seed: int, should_stop: Callable[[], bool], progress: StepObserver,
                 meter: Meter | None = None) -> EpisodeOutcome:
    """One episode with fresh judges and monitors, and ``progress`` told of every step, wherever
    the device is (this host, or a farm node's actor); ``plugins.operator`` answers ``ask``
    monitors (a farm node has none: ``harness run`` refuses ``ask`` with ``--cluster``), and the
    episode's live records are ``plugins.live``'s."""
    return run_episode(task, agent, device, ep, cap=cap, seed=seed, monitors=plugins.monitors(),
                       observers=[*plugins.observers(), progress], should_stop=should_stop, meter=meter,
                       operator=plugins.operator, live=plugins.live(ep.path) if plugins.live is not None else None)


def run_suite(tasks: list[Task], devices: list[Device], plugins: Plugins, writer: RunWriter, cfg: SuiteConfig,
              progress: Callable[[str, dict[str, Any]], None] | None = None,
              stop: threading.Event | None = None) -> SuiteReport:
    """Run ``tasks`` over this host's ``devices`` in parallel and record every episode through ``writer``."""
    return run_stations(tasks, [LocalStation(d, plugins) for d in devices], writer, cfg, progress, stop)


def run_stations(tasks: "list[Task] | list[PlannedEpisode]", stations: list[Station], writer: RunWriter,
                 cfg: SuiteConfig,
                 progress: Callable[[str, dict[str, Any]], None] | None = None,
                 stop: threading.Event | None = None,
                 joining: Callable[[], list[Station]] | None = None) -> SuiteReport:
    """Run ``tasks`` (or planned episodes: repeats, harness.run.repeats) over ``stations``, one
    worker thread each, and record every episode through ``writer``. ``joining``, polled while the
    run goes on, gives stations that became ready since (a farm's node that joined): they take jobs
    from the same queue."""
    stop = stop or threading.Event()
    report = SuiteReport()
    started = time.monotonic()
    done = writer.completed()
    jobs: "queue.Queue[Job]" = queue.Queue()
    planned = [as_planned(t, cfg.seed) for t in tasks]
    for p in planned:
        if p.id in done:
            report.skipped.append(p.id)
        else:
            jobs.put(Job(p))
    pending = {"n": jobs.qsize()}
    lock = threading.Lock()
    alive = {s.name for s in stations}
    status = {s.name: DeviceStatus(s.name) for s in stations}
    emit = progress or (lambda kind, data: None)
    meter = Meter()

    def record(job: Job, att: Attempt) -> EpisodeResult:
        out = att.outcome
        extra: dict[str, Any] = dict(att.fields)
        if out.checks.get("made"):
            extra["monitor_checks"] = out.checks
        if out.operator:
            extra["operator"] = out.operator
        if out.handovers:  # needs_user: each hand-over (outcome, wait_s, operator steps), docs/records.md
            extra["handovers"] = out.handovers
            extra["operator_steps"] = out.operator_steps
        if out.reflections:
            extra["reflections"] = out.reflections
        if att.conditions:
            extra["conditions"] = att.conditions
        extra.update(job.planned.result_fields())
        res = EpisodeResult(task_id=job.episode, agent=cfg.agent_name, status=out.status, steps=out.steps,
                            cap=out.cap, proposed_steps=out.proposed_steps, verdicts=out.verdicts,
                            attempt=job.attempt, started_at=out.started_at, ended_at=out.ended_at,
                            duration_s=out.duration_s, error=out.error, halt=out.halt,
                            judge_details=out.judge_details or None, usage=out.usage, seed=job.seed,
                            timings=out.timings, answer=out.answer, **extra)
        return res

    def lose(station: Station, error: str | None) -> None:
        with lock:
            alive.discard(station.name)
            report.dead_devices.append(station.name)
        status[station.name].state = "dead"
        emit("dead", {"device": station.name, "error": error or ""})

    def worker(station: Station) -> None:
        try:
            work(station)
        except Exception as e:  # records or disk failed (e.g. ENOSPC): stop the whole run, resumable
            with lock:
                if report.error is None:
                    report.error = f"{status[station.name].task or 'run'} on {station.name}: {type(e).__name__}: {e}"
            status[station.name].state = "failed"
            stop.set()  # the others stop at their next step; unfinished episodes are redone on --resume

    def work(station: Station) -> None:
        st = status[station.name]
        while not stop.is_set():
            try:
                job = jobs.get(timeout=0.2)
            except queue.Empty:
                with lock:
                    if pending["n"] == 0:
                        return
                continue
            if job.avoid == station.name and len(alive) > 1:
                jobs.put(job)  # let a different station take the retry
                time.sleep(0.05)
                continue
            st.task, st.state = job.episode, "running"
            emit("start", {"device": station.name, "task": job.episode, "attempt": job.attempt})
            try:
                att = station.run(job, writer, cfg, stop.is_set, emit, meter)
            except Interrupted:
                st.state = "stopped"
                return  # the partial episode is redone on --resume
            except StationLost as e:
                jobs.put(job)  # never attempted: another station takes it as it was
                lose(station, str(e))
                return
            out = att.outcome
            if cfg.on_reset is not None and att.reset is not None:
                cfg.on_reset({"task": job.episode, **att.fields, "attempt": job.attempt, **att.reset})
            res = record(job, att)
            if out.status == "infra_error" and job.attempt <= cfg.infra_retries:
                emit("retry", {"device": station.name, "task": job.episode, "error": out.error,
                               "elsewhere": len(alive) > 1})
                jobs.put(Job(job.planned, job.attempt + 1, avoid=station.name))
                if not station.reconnect(cfg.reconnect_timeout):
                    lose(station, out.error)
                    return
                continue
            att.commit(res)
            writer.append_result(res)
            with lock:
                pending["n"] -= 1
                report.results.append(res)
            st.done += 1
            st.state = "idle"
            emit("done", {"device": station.name, "task": job.episode, "result": res})
            if out.status == "infra_error" and not station.reconnect(cfg.reconnect_timeout):
                lose(station, out.error)
                return

    threads: list[threading.Thread] = []

    def launch(s: Station) -> None:
        t = threading.Thread(target=worker, args=(s,), name=f"station-{s.name}", daemon=True)
        threads.append(t)
        t.start()

    for s in stations:
        launch(s)
    try:
        while any(t.is_alive() for t in threads) and not stop.is_set():
            for s in (joining() if joining is not None and not stop.is_set() else []):
                with lock:
                    alive.add(s.name)
                status[s.name] = DeviceStatus(s.name)
                emit("joined", {"device": s.name})
                launch(s)
            for t in list(threads):
                t.join(timeout=0.2)
    except KeyboardInterrupt:
        stop.set()
    if stop.is_set():
        report.interrupted = True
        report.abandoned = _wind_down(threads)
    recorded = {r.task_id for r in report.results} | set(report.skipped)
    report.not_run = [p.id for p in planned if p.id not in recorded]
    report.wall_s = round(time.monotonic() - started, 3)
    report.usage = meter.to_json()
    return report


STOP_GRACE_S = 5.0  # s the stations get, once the run stops, to leave their episodes


def _wind_down(threads: list[threading.Thread]) -> list[str]:
    """The run is stopping: cut every model call (no station waits on one), give the stations
    STOP_GRACE_S to end, and return the names of those still busy (abandoned: daemon threads)."""
    with model.calls_stopped():
        end = time.monotonic() + STOP_GRACE_S
        try:
            for t in threads:
                t.join(max(0.0, end - time.monotonic()))
        except KeyboardInterrupt:  # a second Ctrl-C: stop waiting now
            pass
    return [t.name.removeprefix("station-") for t in threads if t.is_alive()]


class StepProgress:
    """Forwards each recorded step to the progress display (an observer with no verdicts)."""

    name = "progress"

    def __init__(self, emit: Callable[[str, dict[str, Any]], None], serial: str, task_id: str):
        self.emit, self.serial, self.task_id = emit, serial, task_id

    def spec(self) -> dict[str, Any]:
        return {"name": self.name}

    def start(self, ctx: Any) -> None:
        self.cap = ctx.cap

    def on_step(self, event: Any) -> None:
        self.emit("step", {"device": self.serial, "task": self.task_id, "step": event.index, "cap": self.cap,
                           "executed": event.executed,
                           "action": event.action.describe() if event.action is not None else f"invalid: {event.invalid}"})

    def finish(self, end: Any) -> dict[str, Any]:
        return {}


class LiveProgress:
    """A rich live panel: one line per device (task, step/cap, last action) and the tally so far."""

    def __init__(self, devices: list[str], total: int, console: Any = None):
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.rows = {d: {"task": "", "step": "", "action": "", "state": "idle"} for d in devices}
        self.total = total
        self.done = 0
        self.tally: dict[str, int] = {}
        self.lock = threading.Lock()
        self.live: Any = None
        self.held = False

    def _render(self) -> Any:
        from rich.table import Table

        t = Table(title=f"{self.done}/{self.total} episodes  " + "  ".join(f"{k}: {v}" for k, v in sorted(self.tally.items())),
                  expand=False)
        # widths set here, from the terminal's: a device's name, state and step stay whole, the task
        # and the last action share what is left and are cut (an 80-column terminal once lost the
        # state and step columns entirely: rich shrinks columns to nothing when a table is too wide)
        fixed = {k: max([len(str(r[k])) for r in self.rows.values()] + [len(k)]) for k in ("state", "step")}
        device = min(max([len(d) for d in self.rows] + [6]), 24)
        room = max(20, self.console.width - device - fixed["state"] - fixed["step"] - 16)  # 16: borders, padding
        task = min(max([len(str(r["task"])) for r in self.rows.values()] + [4]), max(8, room * 2 // 5), 48)
        t.add_column("device", overflow="ellipsis", no_wrap=True, width=device)
        t.add_column("state", no_wrap=True, width=fixed["state"])
        t.add_column("task", overflow="ellipsis", no_wrap=True, width=task)
        t.add_column("step", no_wrap=True, width=fixed["step"])
        t.add_column("last action", overflow="ellipsis", no_wrap=True, width=max(8, min(room - task, 60)))
        for d, r in self.rows.items():
            t.add_row(d, r["state"], r["task"], r["step"], r["action"])
        return t

    def __enter__(self) -> "LiveProgress":
        from rich.live import Live

        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.update(self._render())
        self.live.__exit__(*exc)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The panel stops redrawing meanwhile (a question asked on the same terminal), then goes on."""
        with self.lock:
            self.held = True
            if self.live is not None:
                self.live.stop()
        try:
            yield
        finally:
            with self.lock:
                self.held = False
                if self.live is not None:
                    self.live.start(refresh=True)

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        with self.lock:
            row = self.rows.setdefault(data.get("device", "?"), {"task": "", "step": "", "action": "", "state": ""})
            if kind == "start":
                row.update(task=data["task"], step="", action="", state="running" if data.get("attempt", 1) == 1 else "retry")
            elif kind == "step":
                row.update(step=f"{data['step']}/{data['cap']}", action=data["action"])
            elif kind == "done":
                r = data["result"]
                self.done += 1
                key = r.status if r.verdicts.get("oracle") is None else f"{r.status}/{'ok' if r.verdicts.get('oracle') is True else 'fail'}"
                self.tally[key] = self.tally.get(key, 0) + 1
                row.update(state="idle")
            elif kind == "dead":
                row.update(state="dead", action=data.get("error", "")[:48])
            elif kind == "joined":
                row.update(state="idle", action="joined the run")
            if self.live is not None and not self.held:
                self.live.update(self._render())


def _error_of(r: EpisodeResult, judge: str) -> str:
    d = (r.judge_details or {}).get(judge) or {}
    return " ".join(str(d.get("error") or "no reason recorded").split())


# statuses whose episode's error is its reason: said in full on its line (a log is where it is read)
ERROR_STATUSES = ("agent_error", "model_error", "infra_error", "task_error")


STEP_LINE_INTERVAL = 5.0  # s between step lines of one device when it steps quickly


def describe_progress(stream: Any = None, step_interval: float = STEP_LINE_INTERVAL,
                      clock: Callable[[], float] = time.monotonic) -> Callable[[str, dict[str, Any]], None]:
    """A plain line-per-event progress printer (for logs and non-terminals); ``stream`` defaults to
    the ``sys.stderr`` of the moment of the call (not of the import: it may have been replaced).

    Each device's steps are printed as they happen (a model agent takes seconds a step, so a log
    shows life long before an episode ends), rate-limited: an episode's first step always, then at
    most one line per ``step_interval`` seconds per device, saying how many steps it stands for."""
    stream = stream if stream is not None else sys.stderr
    lock = threading.Lock()
    last: dict[str, tuple[float, int]] = {}  # device -> (time of its last step line, steps since)

    def emit(kind: str, data: dict[str, Any]) -> None:
        with lock:
            if kind == "step":
                dev, now = data["device"], clock()
                shown, skipped = last.get(dev, (float("-inf"), 0))
                if data["step"] == 1 or now - shown >= step_interval:
                    more = f" (+{skipped} more since the last line)" if skipped and data["step"] != 1 else ""
                    action = str(data["action"])
                    action = action if len(action) <= 120 else action[:117] + "..."
                    print(f"[{dev}] {data['task']}: step {data['step']}/{data['cap']} {action}{more}",
                          file=stream, flush=True)
                    last[dev] = (now, 0)
                else:
                    last[dev] = (shown, skipped + 1)
            elif kind == "done":
                r: EpisodeResult = data["result"]
                verdicts = " ".join(f"{k}={v}" + (f" ({_error_of(r, k)})" if v == "judge_error" else "")
                                    for k, v in r.verdicts.items())
                halt = ""
                if r.halt is not None:
                    halt = f" halted at step {r.halt.step} by {r.halt.monitor or 'a monitor'}: {r.halt.category}"
                    if r.halt.category == "monitor_error":
                        halt += f" ({r.halt.reason[:120]})"
                why = f" (why: {' '.join(r.error.split())})" if r.error and r.status in ERROR_STATUSES else ""
                print(f"[{data['device']}] {r.task_id}: {r.status} in {r.steps}/{r.cap} steps {verdicts}{halt}{why}",
                      file=stream, flush=True)
            elif kind == "retry":
                where = "retrying elsewhere" if data.get("elsewhere", True) else "retrying once the phone is back"
                print(f"[{data['device']}] {data['task']}: infra error, {where}: {data['error']}",
                      file=stream, flush=True)
            elif kind == "dead":
                print(f"[{data['device']}] device lost: {data['error']}", file=stream, flush=True)
            elif kind == "joined":
                print(f"[{data['device']}] joined the run", file=stream, flush=True)

    return emit
