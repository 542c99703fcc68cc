"""``harness preflight``, and the same checks at the start of ``harness run`` (:func:`run_plan`): the
run's flags turned into a :class:`harness.preflight.Plan` (its endpoints, devices, folder, live
page's port, the monitors that gate, the plugins that need the simulated phone), and the command
that runs them alone and prints what it found."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.core.user_error import UserError
from harness.preflight import DeviceNeeds, Plan, preflight


def run_plan(args: argparse.Namespace, cfg: Any, tasks: list[Any], built: Any, prep: Any,
             devices: bool = True) -> Plan:
    """The preflight plan of ``harness run`` with these flags (``devices`` False: a farm run, whose
    phones each node checks itself: the endpoints, folder and port only)."""
    from harness.cli.run_parts import split_list

    return Plan(endpoints=built.endpoints, device_config=cfg if devices else None,
                serials=split_list(args.device) + split_list(args.devices),
                needs=DeviceNeeds(simulated=built.simulated, prepare=prep, prepared=not args.no_prepare, tasks=tasks),
                reconnect_timeout=cfg.reconnect_timeout, out=args.out, resume=args.resume,
                watch=(args.watch_host, args.watch_port) if args.watch else None,
                gates=built.gates,
                allow_unguarded=getattr(args, "allow_unguarded_unsafe", False))


def cmd_preflight(args: argparse.Namespace) -> int:
    """Every check ``harness run`` makes with these flags before it touches a device, and nothing
    else: one line per check that passed, or one per problem (exit 2). Writes nothing (the run
    folder is checked, not made)."""
    from harness.cli.run_parts import build_plugins, device_config, prepare_config, split_list
    from harness.core.registry import RegistryError
    from harness.run.options import RunError
    from harness.run.task_checks import load_checked_suite

    try:
        suite = load_checked_suite(args.suite)
        tasks = suite.select(split_list(args.tasks) or None)
        prep = prepare_config(args)
        built = build_plugins(args)
        cfg = device_config(args)
    except (RunError, RegistryError) as e:
        raise UserError(str(e)) from None
    passed = preflight(run_plan(args, cfg, tasks, built, prep, devices=not getattr(args, "cluster", None)))
    for line in passed.lines:
        print(f"ok: {line}")
    if args.out:
        print(f"ok: run folder {args.out}: " + ("a run to continue (--resume)" if args.resume else "free for a new run"))
    if args.watch:
        print(f"ok: --watch-port {args.watch_port} is free on {args.watch_host}")
    for note in passed.notes:
        print(f"note: {note}")
    runnable = len(tasks) - len(passed.unavailable)
    print(f"preflight passed in {passed.wall_s:.2f} s: {runnable} task(s) can run on {len(passed.devices)} device(s)"
          + (f", {len(built.endpoints)} model endpoint(s) answer" if built.endpoints else ""), flush=True)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    from harness.cli.run_parts import add_run_arguments

    pf = sub.add_parser("preflight", help="check, before anything touches a phone, everything `harness run` with the "
                                          "same flags needs: model endpoints, devices, the run folder, ports, "
                                          "unguarded unsafe tasks (run makes the same checks first)")
    add_run_arguments(pf, out_required=False)
    pf.set_defaults(run=cmd_preflight)
