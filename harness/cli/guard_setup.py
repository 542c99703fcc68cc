"""A guard session's set-up and end: everything checked before the phone is touched (flags, the
device, the monitors and judges built, the run folder), then the task's reset, the episode, the
server; at the end the judges' verdicts and the result line, as ``harness run`` writes them."""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from harness.core.episode import EpisodeContext, EpisodeEnd
from harness.guard.relay import GuardServer, Upstream
from harness.guard.session import Policy, Session
from harness.records import EpisodeResult, RecordError, RunWriter, build_environment_info, now_iso
from harness.core.usage import Meter

MODES = ("gate", "ask", "async")


class GuardError(Exception):
    """A set-up that cannot run, said in one line before the phone is touched."""


@dataclass
class Guard:
    args: argparse.Namespace
    serial: str
    task: Any
    writer: RunWriter
    episode: Any
    device: Any
    session: Session
    server: GuardServer
    observers: list[Any]
    meter: Meter
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=now_iso)
    watch: Any = None

    def close(self, reason: str) -> EpisodeResult:
        """End the episode: stop relaying, write the steps still open with the final screen, let the
        judges give their verdicts, append the result line."""
        from harness.run.runner import finish_all

        self.session.end_reason = self.session.end_reason or reason
        self.server.stop()
        final = self.session.finish()
        s = self.session
        proposed = s.steps.index
        status = "finished"
        end = EpisodeEnd(status=status, steps=proposed, final_screenshot=final, answer=None, agent_finished=False,
                         executed=frozenset(s.steps.executed))
        verdicts: dict[str, Any] = {}
        details: dict[str, Any] = {}
        for o, res in finish_all(list(self.observers), end):
            if isinstance(res, Exception):
                verdicts[o.name] = "judge_error"
                details[o.name] = {"error": f"{type(res).__name__}: {res}"}
                continue
            for name, (verdict, detail) in res.items():
                verdicts[name], details[name] = verdict, detail
        s.live.clear()
        cap = s.policy.cap or max(1, proposed)
        extra: dict[str, Any] = {
            # the goal, as an imported episode carries it: `harness judge` reads it without a task file
            "instruction": self.task.instruction, "language": self.task.language,
            "monitor_checks": s.checks.stats(),
            "guard": {"end": s.end_reason, "port": self.server.port, **s.counts, "unseen_channels": s.unseen[:50]},
        }
        if s.flagged.asked["asked"]:
            extra["operator"] = {**s.flagged.asked, "wait_s": round(s.flagged.asked["wait_s"], 3)}
        result = EpisodeResult(task_id=self.task.id, agent=self.args.agent_name, status=status,
                               steps=len(s.steps.executed), cap=cap, proposed_steps=proposed, verdicts=verdicts,
                               device=self.serial, started_at=self.started_at, ended_at=now_iso(),
                               duration_s=round(time.monotonic() - self.started, 4), halt=s.halt,
                               judge_details=details or None, usage=self.meter.to_json(), seed=self.args.seed,
                               **extra)
        try:
            self.episode.write_summary(result)
            self.writer.append_result(result)
            self.writer.update_manifest(ended_at=now_iso(), guard_end=s.end_reason)
        finally:
            self.writer.close()
            if self.watch is not None:
                self.watch.__exit__(None, None, None)
        return result

    def summary(self, r: EpisodeResult) -> str:
        g = (r.model_extra or {}).get("guard", {})
        verdicts = ", ".join(f"{k}={v}" for k, v in r.verdicts.items()) or "no judges"
        return (f"guard: episode {r.task_id} ended ({g.get('end')}): {r.proposed_steps} action(s), {r.steps} relayed, "
                f"{g.get('blocked', 0)} blocked, {g.get('refused', 0)} refused, {g.get('unseen', 0)} unseen "
                f"channel(s); {verdicts}; records in {self.writer.run_dir}")


def _next_episode_id(writer: RunWriter) -> str:
    taken = {p.name for p in (writer.run_dir / "episodes").glob("*")} | set(writer.completed())
    n = 1
    while f"guard-{n}" in taken:
        n += 1
    return f"guard-{n}"


def _plugins(args: argparse.Namespace, on_sim: bool) -> tuple[list[Any], list[Any], dict[str, Any], Any]:
    import agents  # noqa: F401  (judges need the agents' registry loaded first, as harness run does)
    import judges  # noqa: F401
    from harness.core.registry import JUDGES, MONITORS, RegistryError, parse_options
    from harness.cli.run_parts import model_configs, split_list
    from harness.run.options import RunError, opts_for, with_model

    try:
        models = model_configs(args)
        judge_names = split_list(args.judge) or (["oracle"] if args.task and on_sim else [])
        monitor_names = split_list(args.monitor)
        judge_opts = parse_options(args.judge_opt, "--judge-opt")
        monitor_opts = parse_options(args.monitor_opt, "--monitor-opt")
        for flag, key in (("monitor_mode", "mode"), ("monitor_on_error", "on_error")):
            value = getattr(args, flag)
            if value:
                if monitor_opts.get(key, value) != value:
                    raise GuardError(f"--{flag.replace('_', '-')} {value} contradicts --monitor-opt {key}={monitor_opts[key]}")
                monitor_opts[key] = value
        if monitor_opts.get("mode", "gate") not in MODES:
            raise GuardError(f"mode {monitor_opts['mode']} does not fit the guard (gate, ask or async): the agent "
                             "cannot be told why in its own conversation")
        m_opts = [with_model(MONITORS, n, opts_for(MONITORS, n, monitor_opts), models["judge"],
                             "--judge-base-url URL --judge-model NAME") for n in monitor_names]
        j_opts = [with_model(JUDGES, n, opts_for(JUDGES, n, judge_opts), models["judge"],
                             "--judge-base-url URL --judge-model NAME") for n in judge_names]
        monitors = [MONITORS.build(n, o) for n, o in zip(monitor_names, m_opts)]
        observers = [JUDGES.build(n, o) for n, o in zip(judge_names, j_opts)]
    except (RegistryError, RunError) as e:
        raise GuardError(str(e)) from None
    specs = {"monitors": [m.spec() for m in monitors], "judges": [j.spec() for j in observers]}
    # the endpoint the preflight probes: the one model config the monitors and judges that call a model share
    called = next((o["model"] for o in [*m_opts, *j_opts] if o.get("model") is not None), None)
    return monitors, observers, specs, called


def _preflight(args: argparse.Namespace, cfg: Any, task: Any, monitors: list[Any], observers: list[Any],
               judge_model: Any) -> None:
    """The checks every command makes before it touches a phone (harness.preflight, as harness run
    makes them): the monitors' and judges' endpoint answers as they will call it, the phone is
    usable and of a kind the judges can judge, the task's apps are there, the run folder and the
    live page's port are right, and an unsafe task on a real phone has a gate monitor (or
    --allow-unguarded-unsafe). A problem is one line each, exit 2, before the reset or the relay."""
    from harness.client.config import ModelConfig
    from harness.client.slots import Priority
    from harness.preflight import DeviceNeeds, Endpoint, Plan, preflight

    gates = [m.name for m in monitors if getattr(m, "mode", "gate") in ("gate", "ask")]
    endpoints = [Endpoint("judges and monitors", "--judge-base-url/--judge-model", judge_model, structured=True,
                          priority=Priority.GATE if gates else Priority.LIVE)] \
        if isinstance(judge_model, ModelConfig) else []
    from harness.core.registry import JUDGES

    simulated = [f"judge {j.name!r}" for j in observers
                 if j.name in JUDGES.entries and getattr(JUDGES.entries[j.name].config, "needs_simulated_phone", False)]
    preflight(Plan(endpoints=endpoints, device_config=cfg, serials=[args.device],
                   needs=DeviceNeeds(simulated=simulated, prepared=False, tasks=[task] if task is not None else []),
                   out=args.out, resume=args.resume, watch=(args.watch_host, args.watch_port) if args.watch else None,
                   gates=gates, allow_unguarded=args.allow_unguarded_unsafe, all_tasks_needed=True))


def open_session(args: argparse.Namespace, argv: list[str] | None = None) -> Guard:
    from harness.device.adb import AdbDevice
    from harness.live.records import EpisodeLive
    from harness.cli.run_parts import device_config, make_operator, watching
    from harness.run.options import RunError
    from harness.core.tasks import Task

    for flag in ("device", "port", "out"):
        if getattr(args, flag) is None:
            raise GuardError(f"--{flag} is required")
    if bool(args.task) != bool(args.suite):
        raise GuardError("--suite and --task go together")
    if args.task and args.instruction:
        raise GuardError("--instruction and --task exclude each other (the task's instruction is the goal)")
    if not args.task and not args.instruction:
        raise GuardError("say what the agent was asked to do: --instruction TEXT, or --suite S --task ID")
    if not 0 < args.port < 65536:
        raise GuardError(f"--port {args.port}: not a TCP port")
    if args.idle_end is not None and args.idle_end <= 0:
        raise GuardError("--idle-end must be > 0 seconds")
    if args.max_steps is not None and args.max_steps < 1:
        raise GuardError("--max-steps must be >= 1")
    task = None
    if args.task:
        from harness.run.task_checks import load_checked_suite
        from harness.core.tasks import TaskError

        try:
            tasks = load_checked_suite(args.suite).by_id()
        except TaskError as e:
            raise GuardError(str(e)) from None
        if args.task not in tasks:
            raise GuardError(f"--task {args.task}: no such task in {args.suite}")
        task = tasks[args.task]
    try:
        cfg = device_config(argparse.Namespace(**{**vars(args), "device_backend": "adb", "settle_max": 3.0,
                                                  "settle_frames": "auto", "command_timeout": 30.0,
                                                  "reconnect_timeout": 0.0, "allow_clear": False}))
    except RunError as e:
        raise GuardError(str(e)) from None
    if cfg.adb_port == args.port and cfg.adb_host in ("127.0.0.1", "localhost", "::1"):
        raise GuardError(f"the real adb server would be the guard itself (port {args.port}, from --adb-port or "
                         "ANDROID_ADB_SERVER_PORT): give the guard another --port, or name the real server with "
                         "--adb-port")
    device = AdbDevice(args.device, host=cfg.adb_host, port=cfg.adb_port)
    desc = device.describe()
    if not desc.healthy:
        raise GuardError(f"{args.device}: {desc.problem or desc.state} on the adb server at {cfg.adb_host}:"
                         f"{cfg.adb_port}; `harness devices` lists the phones it has")
    on_sim = device.is_simulated()
    if task is not None:
        why = device.cannot_run(task.setup)
        if why:
            raise GuardError(f"--task {task.id}: {why}")
    monitors, observers, specs, judge_model = _plugins(args, on_sim)
    _preflight(args, cfg, task, monitors, observers, judge_model)
    operator = None
    if any(getattr(m, "mode", None) == "ask" for m in monitors):
        try:
            operator = make_operator(args)
        except RunError as e:
            raise GuardError(str(e)) from None
    try:
        writer = RunWriter(args.out, resume=args.resume)
    except RecordError as e:
        raise GuardError(str(e)) from None
    try:
        if task is None:
            task = Task(id=_next_episode_id(writer), instruction=args.instruction, language=args.lang,
                        reference_steps=1, source="harness guard --instruction")
        elif writer.is_completed(task.id):
            raise GuardError(f"task {task.id} already has an episode in {args.out}")
        manifest = {"kind": "crate-harness guard", "command": argv or sys.argv, "environment": build_environment_info(),
                    "agent": {"name": args.agent_name, "label": args.agent_name, "guarded": True},
                    "judges": specs["judges"], "monitors": specs["monitors"], "seed": args.seed,
                    "devices": [desc.to_json()],
                    "device_config": cfg.to_json(),
                    "guard": {"port": args.port, "allow_opaque": args.allow_opaque, "strict": args.strict,
                              "idle_end": args.idle_end, "max_steps": args.max_steps},
                    "started_at": now_iso()}
        if args.suite:
            from harness.run.task_checks import load_checked_suite

            manifest["suite"] = {"path": str(args.suite), "files": dict(load_checked_suite(args.suite).files)}
        if operator is not None:
            manifest["operator"] = operator.spec()
        if args.resume and writer.manifest:
            writer.update_manifest(guard_sessions=[*(writer.manifest.get("guard_sessions") or []),
                                                   {"started_at": now_iso(), "episode": task.id}])
        else:
            writer.write_manifest(manifest)
        if args.task:
            try:
                device.reset(task.setup, task.language)
            except Exception as e:
                raise GuardError(f"--task {task.id}: the reset failed: {e}") from None
        cap = args.max_steps or (task.cap if args.task else None)
        episode = writer.start_episode(task.id)
        live = EpisodeLive(episode.path)
        meter = Meter()
        size = device.screen_size()
        ctx = EpisodeContext(task=task, screen_size=size, seed=args.seed, device_serial=args.device,
                             query_state=device.state, cap=cap or 0, episode_dir=str(episode.path), meter=meter,
                             report_evidence=live.evidence)
        for plug in [*observers, *monitors]:
            plug.start(ctx)
        live.started(task_id=task.id, device=args.device, cap=cap or 0, instruction=task.instruction,
                     language=task.language)
        session = Session(writer=episode, task=task, device=device, monitors=monitors, observers=observers,
                          operator=operator, live=live,
                          policy=Policy(allow_opaque=args.allow_opaque, strict=args.strict, cap=cap),
                          say=lambda text: print(text, file=sys.stderr, flush=True), token=secrets.token_urlsafe(24))
        server = GuardServer(args.device, Upstream(cfg.adb_host, cfg.adb_port), session, port=args.port)
        try:
            server.start()
        except OSError as e:
            raise GuardError(f"--port {args.port}: {e.strerror or e}; pick another port") from None
        session.port = server.port
        watch = None
        if args.watch:
            watch = watching(args)
            watch.__enter__()
        return Guard(args, args.device, task, writer, episode, device, session, server, observers, meter, watch=watch)
    except BaseException:
        writer.close()
        raise


