"""``harness run``'s parts from the command line: its flags (run, adb, prepare, model endpoints),
the device and model configs they make, the agent, judges and monitors built through the
registries (:func:`_plugin_factories`, refusing bad options before any device is touched), the
operator and the live page."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from typing import Any, Iterator

from harness.cli.run_operator import OperatorSetupError, ask_operator, operator_arguments
from harness.client.config import MAX_REPLY_BYTES
from harness.core.episode import REFLECT_MODES, ReflectingAgent
from harness.core.registry import AGENTS, JUDGES, MONITORS, parse_options
from harness.device.adb_server import AdbEndpointError
from harness.device.config import DeviceConfig, SettleConfig
from harness.live.operator import Operator
from harness.live.records import EpisodeLive
from harness.preflight.run_setup import GATE_MODES
from harness.run.options import RunError, opts_for, with_model
from harness.run.suite import Plugins


def split_list(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


def adb_arguments(p: argparse.ArgumentParser, nested: bool = False) -> None:
    """The adb server flags every command that talks to devices takes. ``nested``: on a
    sub-command whose parent has them too (its default must not overwrite the parent's value)."""
    extra: dict[str, Any] = {"default": argparse.SUPPRESS} if nested else {}
    p.add_argument("--adb-host", help="adb server host (default ANDROID_ADB_SERVER_ADDRESS or localhost); "
                                      "phones served from another machine: see docs/phones.md", **extra)
    p.add_argument("--adb-port", type=int, help="adb server port (default ANDROID_ADB_SERVER_PORT or 5037)", **extra)


def prepare_arguments(p: argparse.ArgumentParser) -> None:
    """The screen overrides prepare makes only when asked (journaled and put back like the rest)."""
    p.add_argument("--size", metavar="WxH", help="prepare overrides the screen size (wm size WxH; put back at the end "
                                                 "with the phone's own, or the override it had)")
    p.add_argument("--density", type=int, metavar="DPI", help="prepare overrides the screen density (wm density DPI; "
                                                              "put back at the end)")


def prepare_config(args: argparse.Namespace) -> Any:
    """prepare's PrepareConfig from the command line (None with ``--no-prepare``)."""
    from harness.device.prepare import PrepareConfig

    size = None
    if getattr(args, "size", None):
        try:
            w, h = (int(v) for v in args.size.lower().split("x"))
        except ValueError:
            raise RunError(f"--size: expected WIDTHxHEIGHT such as 1080x2400, got {args.size!r}") from None
        size = (w, h)
    density = getattr(args, "density", None)
    if getattr(args, "no_prepare", False):
        if size or density:
            raise RunError("--size and --density are made by prepare: they cannot go with --no-prepare")
        return None
    try:
        return PrepareConfig(size=size, density=density)
    except ValueError as e:
        raise RunError(f"--{e}") from None


def device_config(args: argparse.Namespace) -> DeviceConfig:
    if args.reconnect_timeout < 0:
        raise RunError("--reconnect-timeout must be >= 0")
    try:
        cfg = DeviceConfig(backend=args.device_backend, adb_host=args.adb_host, adb_port=args.adb_port,
                           settle=SettleConfig(max_s=args.settle_max, frames=args.settle_frames),
                           command_timeout=args.command_timeout, reconnect_timeout=args.reconnect_timeout,
                           allow_clear=args.allow_clear)
    except ValueError as e:
        raise RunError(f"--settle-frames: {e}") from None
    try:
        ep = cfg.endpoint()
    except AdbEndpointError as e:
        raise RunError(str(e)) from None
    return dataclasses.replace(cfg, adb_host=ep.host, adb_port=ep.port)  # the manifest names the server used


def add_run_arguments(p: argparse.ArgumentParser, out_required: bool = True) -> None:
    p.add_argument("--suite", required=True, help="task YAML file or folder")
    p.add_argument("--tasks", action="append", help="task ids to run (comma-separated; default all)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run on the phones of every node of a Ray cluster (HEAD:6379, or auto inside a Ray job); "
                        "needs the farm extra: pip install -e '.[farm]' in the checkout")
    p.add_argument("--device", action="append", help="a device serial (repeatable; with --cluster also NODE/SERIAL)")
    p.add_argument("--devices", action="append", help="device serials, comma-separated (default: all attached)")
    p.add_argument("--agent", required=True, help="agent name (see `harness agents`)")
    p.add_argument("--agent-opt", action="append", metavar="KEY=VALUE", help="agent option (repeatable)")
    p.add_argument("--judge", action="append", help="judges, comma-separated or repeated (e.g. oracle)")
    p.add_argument("--judge-opt", action="append", metavar="KEY=VALUE", help="judge option (repeatable)")
    p.add_argument("--monitor", action="append", help="pre-action monitors (e.g. crate-s)")
    p.add_argument("--monitor-opt", action="append", metavar="KEY=VALUE", help="monitor option (repeatable)")
    p.add_argument("--monitor-mode", choices=["gate", "async", "ask", "reflect", "reflect,ask"],
                   help="gate: judge each action before it runs and halt before a risky one; async: judge beside it "
                        "and halt at the next step; ask: a gate that asks you (terminal, or the --watch page) before "
                        "halting, and runs the action if you allow it; reflect: a gate that tells the agent why instead "
                        "(the action does not run) and lets it propose again, halting at the --reflect-max-th flagged "
                        "proposal in a row (reflect,ask: asking you then) (same as --monitor-opt mode=...)")
    p.add_argument("--reflect-max", type=int, metavar="K",
                   help="with --monitor-mode reflect: the K-th flagged proposal since an action last ran halts (or "
                        "asks); each proposal is an agent step against the cap (default 2: one reflection)")
    operator_arguments(p)
    p.add_argument("--watch", action="store_true",
                   help="serve a live page of the run (a panel per device; Allow/Deny for --monitor-mode ask)")
    p.add_argument("--watch-port", type=int, default=8766, help="port of the --watch page (default %(default)s; "
                   "keep it the same across --resume and an open page reconnects)")
    p.add_argument("--watch-host", default="127.0.0.1", help="address of the --watch page (default loopback only)")
    p.add_argument("--monitor-on-error", choices=["halt", "allow"],
                   help="a check that cannot answer (endpoint down, timeout, unusable reply): halt before the action "
                        "(the default) or let it run unchecked (allow: counted and shown as unchecked everywhere)")
    p.add_argument("--max-steps", type=int, help="step cap for every task (default 2c+1 per task)")
    p.add_argument("--seed", type=int, default=0, help="seed for agents' randomness and perturbations")
    p.add_argument("--repeats", type=int, default=1, metavar="N",
                   help="run every task N times: episodes TASK#1..TASK#N, each with its own seed derived from --seed "
                        "(harness report then gives pass@k, pass^k, flip rate and the flaky tasks)")
    p.add_argument("--out", required=out_required, help="run folder")
    p.add_argument("--resume", action="store_true", help="continue a stopped run in --out")
    p.add_argument("--accept-changed-suite", action="store_true",
                   help="with --resume: continue although task files changed since the run started (the new "
                        "hashes and what changed are recorded in the manifest)")
    adb_arguments(p)
    p.add_argument("--no-prepare", action="store_true",
                   help="do not prepare the devices (screen check, stay awake, animations off, ADBKeyboard); "
                        "what the run still changes is put back at the end")
    prepare_arguments(p)
    p.add_argument("--allow-unguarded-unsafe", action="store_true",
                   help="run the chosen unsafe tasks (safety.label: unsafe) on a real device with no monitor that "
                        "halts a risky action before it runs (refused without this; the simulated phone needs neither)")
    p.add_argument("--allow-clear", action="store_true",
                   help="let setup.clear run `pm clear` on phones (erases the apps' data; emulators and the "
                        "simulated phone never need this)")
    p.add_argument("--device-backend", choices=["adb", "uiautomator2"], default="adb")
    p.add_argument("--settle-max", type=float, default=3.0, help="longest wait for the screen to settle (s)")
    p.add_argument("--settle-frames", choices=["auto", "png", "raw", "u2"], default="auto",
                   help="frames settling compares: auto (default) measures what each device offers and takes the "
                        "cheapest per step; png (screencap -p), raw (screencap, hashed here) or u2 (uiautomator2's "
                        "screenshot, with --device-backend uiautomator2)")
    p.add_argument("--command-timeout", type=float, default=30.0, help="timeout of one device command (s)")
    p.add_argument("--reconnect-timeout", type=float, default=15.0,
                   help="how long to wait for a device that dropped off before giving its task to another (s)")
    p.add_argument("--quiet", action="store_true", help="no per-episode lines")
    add_model_arguments(p)


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """Endpoints: one for the agent (--model-*), one for judges and monitors (--judge-*)."""
    from harness.client.keys import key_rule_text

    g = p.add_argument_group("agent model endpoint (OpenAI-compatible: vLLM, SGLang, OpenAI, DashScope)")
    g.add_argument("--model-base-url", help="e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", dest="model_name", help="model name as the server knows it")
    g.add_argument("--model-api-key-env", default=None, metavar="VAR",
                   help="environment variable holding this endpoint's API key, sent to --model-base-url and to no "
                        f"other endpoint (set but empty or unset: an error); without it: {key_rule_text()}")
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--top-p", type=float, default=None)
    g.add_argument("--max-tokens", type=int, default=1024)
    g.add_argument("--model-timeout", type=float, default=120.0, metavar="S",
                   help="longest time for one attempt of a call, whole: connecting, the headers and the entire "
                        "reply together (a reply that trickles in is cut here); then it is retried")
    g.add_argument("--model-retries", type=int, default=4)
    g.add_argument("--model-deadline", type=float, default=None, metavar="S",
                   help="longest time for one call, its retries and their waits included (default: no bound but "
                        "the attempts' own); past it the agent's step is an error")
    g.add_argument("--model-max-reply-bytes", type=int, default=MAX_REPLY_BYTES, metavar="N",
                   help=f"a reply body longer than this is cut there and recorded as truncated (default {MAX_REPLY_BYTES})")
    g.add_argument("--model-max-wait", type=float, default=300.0, metavar="S",
                   help="longest Retry-After wait honoured (s); a server asking for more fails the call")
    g.add_argument("--model-concurrency", type=int, default=8)
    g.add_argument("--model-seed", type=int, default=None)
    j = p.add_argument_group("judge and monitor model endpoint")
    j.add_argument("--judge-base-url", help="endpoint for model-based judges and monitors")
    j.add_argument("--judge-model", help="judge model name")
    j.add_argument("--judge-api-key-env", default=None, metavar="VAR",
                   help="environment variable holding the judge endpoint's API key, sent to --judge-base-url and to "
                        "no other endpoint (set but empty or unset: an error); never taken from --model-api-key-env: "
                        f"without it, {key_rule_text()}")
    j.add_argument("--judge-temperature", type=float, default=0.0)
    j.add_argument("--judge-max-tokens", type=int, default=1024)
    j.add_argument("--judge-timeout", type=float, default=120.0, metavar="S",
                   help="longest time for one attempt of a judge or monitor call, whole (connect, headers and body)")
    j.add_argument("--judge-retries", type=int, default=4)
    j.add_argument("--judge-deadline", type=float, default=None, metavar="S",
                   help="longest time for one judge or monitor call, retries included (a monitor's own timeout_s "
                        "bounds its checks too)")
    j.add_argument("--judge-max-reply-bytes", type=int, default=MAX_REPLY_BYTES, metavar="N",
                   help="a judge's reply body longer than this is cut, and a cut verdict is an error, never read "
                        f"(default {MAX_REPLY_BYTES})")
    j.add_argument("--judge-max-wait", type=float, default=300.0, metavar="S",
                   help="longest Retry-After wait honoured for judge calls (s)")
    j.add_argument("--judge-concurrency", type=int, default=16)


def model_configs(args: argparse.Namespace) -> dict[str, Any]:
    """The agent's and the judges' ModelConfig from the flags (None where no endpoint is given)."""
    from harness.client.config import ModelConfig

    agent = judge = None
    try:
        if getattr(args, "model_base_url", None) or getattr(args, "model_name", None):
            if not (args.model_base_url and args.model_name):
                raise RunError("--model-base-url and --model go together")
            agent = ModelConfig(base_url=args.model_base_url, model=args.model_name,
                                api_key_env=args.model_api_key_env, temperature=args.temperature, top_p=args.top_p,
                                max_tokens=args.max_tokens, timeout_s=args.model_timeout,
                                max_retries=args.model_retries, max_wait_s=args.model_max_wait,
                                concurrency=args.model_concurrency, seed=args.model_seed,
                                deadline_s=getattr(args, "model_deadline", None),
                                max_reply_bytes=getattr(args, "model_max_reply_bytes", MAX_REPLY_BYTES))
        if getattr(args, "judge_base_url", None) or getattr(args, "judge_model", None):
            if not (args.judge_base_url and args.judge_model):
                raise RunError("--judge-base-url and --judge-model go together")
            judge = ModelConfig(base_url=args.judge_base_url, model=args.judge_model,
                                api_key_env=args.judge_api_key_env, temperature=args.judge_temperature,
                                max_tokens=args.judge_max_tokens, timeout_s=args.judge_timeout,
                                max_retries=args.judge_retries, max_wait_s=args.judge_max_wait,
                                concurrency=args.judge_concurrency, deadline_s=getattr(args, "judge_deadline", None),
                                max_reply_bytes=getattr(args, "judge_max_reply_bytes", MAX_REPLY_BYTES))
    except ValueError as e:  # a timeout or byte limit out of range: named by the config
        raise RunError(f"{e} (--model-timeout/--model-deadline/--model-max-reply-bytes, or their --judge- twins)") from None
    return {"agent": agent, "judge": judge}


def make_operator(args: argparse.Namespace) -> Operator:
    """The operator of a ``--monitor-mode ask`` run (harness.cli.run_operator.ask_operator)."""
    try:
        return ask_operator(args)
    except OperatorSetupError as e:
        raise RunError(str(e)) from None


@contextlib.contextmanager
def watching(args: argparse.Namespace) -> Iterator[Any]:
    """The live page of the run in ``--out`` while the run goes on (``--watch``), else nothing."""
    if not args.watch:
        yield None
        return
    from harness.live.records import run_token
    from harness.live.server import LiveServer
    from harness.report.serve import LOOPBACK

    if run_token(args.out) is None:
        print(f"warning: cannot write {args.out}/.live-token: the live page shows no Allow/Deny buttons",
              file=sys.stderr, flush=True)
    try:
        server = LiveServer(args.out, host=args.watch_host, port=args.watch_port)
    except OSError as e:  # taken since the preflight looked
        from harness.cli.options import busy_port

        raise RunError(f"--watch: {busy_port(args.watch_host, args.watch_port, e, '--watch-port')}") from None
    print(f"watch the run at {server.url}", file=sys.stderr, flush=True)
    if args.watch_host not in LOOPBACK:
        print("warning: anyone who can reach this address can watch the run", file=sys.stderr, flush=True)
    with server:
        yield server


def _plugin_factories(args: argparse.Namespace) -> tuple[Plugins, dict[str, Any]]:
    built = build_plugins(args)
    return built.plugins, built.specs


@dataclasses.dataclass
class BuiltPlugins:
    """A run's plugins from its flags: the factories, their specs for the manifest, and what the
    preflight checks of them (harness.preflight): the model endpoints they call, the monitors
    that judge each action before it runs, and the plugins that need the simulated phone."""

    plugins: Plugins
    specs: dict[str, Any]
    endpoints: list[Any]
    gates: list[str]
    simulated: list[str]


def build_plugins(args: argparse.Namespace) -> BuiltPlugins:
    import agents  # noqa: F401  (registers agents)
    import judges  # noqa: F401  (registers judges and monitors)

    models = model_configs(args)
    agent_opts = with_model(AGENTS, args.agent, parse_options(args.agent_opt, "--agent-opt"), models["agent"],
                            "--model-base-url URL --model NAME")
    judge_names = split_list(args.judge)
    judge_opts = parse_options(args.judge_opt, "--judge-opt")
    monitor_names = split_list(args.monitor)
    monitor_opts = parse_options(args.monitor_opt, "--monitor-opt")
    flags = {"monitor_mode": getattr(args, "monitor_mode", None), "monitor_on_error": getattr(args, "monitor_on_error", None)}
    if getattr(args, "reflect_max", None) is not None:
        if (flags["monitor_mode"] or monitor_opts.get("mode", "")) not in REFLECT_MODES:
            raise RunError("--reflect-max only applies with --monitor-mode reflect (or reflect,ask)")
        if args.reflect_max < 1:
            raise RunError("--reflect-max must be >= 1 (1: the first flagged proposal halts, as gate)")
        flags["reflect_max"] = str(args.reflect_max)
    for flag, key in (("monitor_mode", "mode"), ("monitor_on_error", "on_error"), ("reflect_max", "reflect_max")):
        value = flags.get(flag)
        if value:
            if monitor_opts.get(key, value) != value:
                raise RunError(f"--{flag.replace('_', '-')} {value} contradicts --monitor-opt {key}={monitor_opts[key]}")
            monitor_opts[key] = value
    j_opts = {n: with_model(JUDGES, n, opts_for(JUDGES, n, judge_opts), models["judge"],
                            "--judge-base-url URL --judge-model NAME") for n in judge_names}
    m_opts = {n: with_model(MONITORS, n, opts_for(MONITORS, n, monitor_opts), models["judge"],
                            "--judge-base-url URL --judge-model NAME") for n in monitor_names}
    # build once now so that bad options fail before any device is touched
    probe_agent = AGENTS.build(args.agent, agent_opts)
    probe_judges = [JUDGES.build(n, j_opts[n]) for n in judge_names]
    probe_monitors = [MONITORS.build(n, m_opts[n]) for n in monitor_names]
    reflecting = [(n, m) for n, m in zip(monitor_names, probe_monitors) if getattr(m, "mode", None) in REFLECT_MODES]
    if reflecting and not isinstance(probe_agent, ReflectingAgent):  # refused before any device is touched
        n, m = reflecting[0]
        raise RunError(f"agent {args.agent!r} cannot be told why an action was refused (it has no reflect(): only the "
                       f"model agents have), so it cannot run with monitor {n!r} in mode {m.mode}; use --monitor-mode "
                       "gate or ask, or a model agent")
    checks = [(f"agent {args.agent!r}", probe_agent), *((f"monitor {n!r}", m) for n, m in zip(monitor_names, probe_monitors))]

    def check_task(task: Any) -> str | None:  # why a plugin cannot take the task (replay: no reference...)
        found = [f"{who}: {problem}" for who, p in checks if (problem := getattr(p, "check_task", lambda t: None)(task))]
        return "; ".join(found) or None

    plugins = Plugins(
        agent=lambda: AGENTS.build(args.agent, agent_opts),
        observers=lambda: [JUDGES.build(n, j_opts[n]) for n in judge_names],
        monitors=lambda: [MONITORS.build(n, m_opts[n]) for n in monitor_names],
        check_task=check_task,
        live=EpisodeLive,
    )
    specs = {"agent": probe_agent.spec(), "judges": [j.spec() for j in probe_judges],
             "monitors": [m.spec() for m in probe_monitors]}
    gates = [n for n, m in zip(monitor_names, probe_monitors) if getattr(m, "mode", "gate") in GATE_MODES]
    simulated = [f"{reg.kind} {n!r}" for reg, names in ((AGENTS, [args.agent]), (JUDGES, judge_names),
                                                       (MONITORS, monitor_names))
                 for n in names if getattr(reg.entries[n].config, "needs_simulated_phone", False)]
    endpoints = plugin_endpoints(agent_opts, j_opts, m_opts, gates)
    return BuiltPlugins(plugins, specs, endpoints, gates, simulated)


def plugin_endpoints(agent_opts: dict[str, Any], j_opts: dict[str, dict[str, Any]], m_opts: dict[str, dict[str, Any]],
                     gates: list[str]) -> list[Any]:
    """The model endpoints the plugins will call (each config once), as the preflight probes them:
    the agent's in plain text, the judges' and monitors' with a JSON schema, a gate's first."""
    from harness.client.config import ModelConfig
    from harness.client.slots import Priority
    from harness.preflight import Endpoint

    out: dict[tuple[str, str, str | None], Any] = {}
    if isinstance(agent_opts.get("model"), ModelConfig):
        cfg = agent_opts["model"]
        out[(cfg.base_url, cfg.model, cfg.api_key_env)] = Endpoint("agent", "--model-base-url/--model", cfg,
                                                                   priority=Priority.AGENT)
    for opts, gating in ((m_opts, True), (j_opts, False)):
        for n, o in opts.items():
            cfg = o.get("model")
            key = (cfg.base_url, cfg.model, cfg.api_key_env) if isinstance(cfg, ModelConfig) else None
            if key is not None and key not in out:
                prio = Priority.GATE if gating and n in gates else Priority.LIVE
                out[key] = Endpoint("judges and monitors", "--judge-base-url/--judge-model", cfg, structured=True,
                                    priority=prio)
    return list(out.values())


def agent_label(args: argparse.Namespace) -> str:
    opts = parse_options(args.agent_opt, "--agent-opt")
    if not opts:
        return args.agent
    return args.agent + "(" + ",".join(f"{k}={v}" for k, v in sorted(opts.items())) + ")"
