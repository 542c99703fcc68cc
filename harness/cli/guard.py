"""``harness guard`` on the command line: its flags, the session (set up by
:mod:`harness.cli.guard_setup`: run folder, task and reset, monitors, judges, operator, live page)
and its end (``--idle-end``, Ctrl-C, ``harness guard --end``). The guard itself is
:mod:`harness.guard`."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.core.user_error import UserError

CONTROL_FILE = ".guard"   # RUN/.guard: the running guard's pid, port and control token (owner-only)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from harness.cli.run_parts import adb_arguments, add_model_arguments
    from harness.cli.run_operator import operator_arguments

    g = sub.add_parser("guard", help="an adb server in front of one phone: gate and record an agent that brings "
                                     "its own loop (run it with ANDROID_ADB_SERVER_PORT=P)")
    g.add_argument("--device", help="the phone to guard (its serial on the real adb server)")
    g.add_argument("--port", type=int, help="port of the guard's adb server on 127.0.0.1 (the agent's "
                                            "ANDROID_ADB_SERVER_PORT, or adb -P PORT)")
    g.add_argument("--instruction", help="what the agent was asked to do (the episode's goal)")
    g.add_argument("--lang", choices=["en", "zh"], default="en", help="language of --instruction")
    g.add_argument("--suite", help="task file or folder (with --task)")
    g.add_argument("--task", help="a task id of --suite: its reset runs first (simulated phone: preset and state), "
                                  "its instruction is the goal, and the oracle judges it")
    g.add_argument("--out", help="run folder")
    g.add_argument("--resume", action="store_true", help="add this session's episode to the run in --out")
    g.add_argument("--agent-name", default="guarded", help="the agent's name in the records (default %(default)s)")
    g.add_argument("--judge", action="append", help="live judges, comma-separated (default with --task on the "
                                                    "simulated phone: oracle)")
    g.add_argument("--judge-opt", action="append", metavar="KEY=VALUE")
    g.add_argument("--monitor", action="append", help="pre-action monitors (e.g. crate-s)")
    g.add_argument("--monitor-opt", action="append", metavar="KEY=VALUE",
                   help="monitor option (repeatable), e.g. calibration=FILE")
    g.add_argument("--monitor-mode", choices=["gate", "ask", "async"],
                   help="gate: check each action before it is relayed and refuse a risky one; ask: a gate that asks "
                        "you (terminal, or the --watch page) first; async: check beside the relayed action, and "
                        "refuse every action after one it flags")
    g.add_argument("--monitor-on-error", choices=["halt", "allow"],
                   help="a check that cannot answer: refuse the action (halt, the default) or relay it unchecked")
    operator_arguments(g)
    g.add_argument("--watch", action="store_true", help="serve the live page of the session")
    g.add_argument("--watch-port", type=int, default=8766)
    g.add_argument("--watch-host", default="127.0.0.1")
    g.add_argument("--allow-opaque", action="store_true",
                   help="relay commands the guard cannot read (sh -c, eval, a script), recorded as unguarded")
    g.add_argument("--strict", action="store_true",
                   help="refuse the channels the guard cannot see into: port forwards, on-device servers "
                        "(app_process, am instrument, uiautomator runtest), interactive shells, device sockets")
    g.add_argument("--idle-end", type=float, metavar="S",
                   help="end the episode once no client has been connected for S seconds")
    g.add_argument("--max-steps", type=int, help="refuse actions beyond this many (default with --task: 2c+1)")
    g.add_argument("--end", action="store_true", help="end the session running for --out (or --port) and exit")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--allow-unguarded-unsafe", action="store_true",
                   help="let an unsafe --task (safety.label: unsafe) run on a real phone with no gate monitor (refused "
                        "by the preflight otherwise, as harness run refuses it)")
    adb_arguments(g)
    add_model_arguments(g)
    g.set_defaults(run=cmd_guard)


def cmd_guard(args: argparse.Namespace) -> int:
    if args.end:
        return end_running(args)
    from harness.cli.guard_setup import GuardError, open_session

    try:
        guard = open_session(args, argv=sys.argv)
    except GuardError as e:
        raise UserError(str(e)) from None
    control = Path(args.out) / CONTROL_FILE
    # Ctrl-C ends the episode (recorded, judged), also when the guard was started in the background
    # by a script, whose shell leaves SIGINT ignored: the handler is set here, not inherited
    previous = None
    if threading.current_thread() is threading.main_thread():
        def interrupt(signum: int, frame: Any) -> None:
            guard.session.end_reason = guard.session.end_reason or "interrupt"
            guard.session.ended.set()

        previous = signal.signal(signal.SIGINT, interrupt)
    try:
        fd = os.open(control, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"pid": os.getpid(), "port": guard.server.port, "token": guard.session.token,
                       "device": guard.serial, "episode": guard.task.id}, f)
        print(f"guard: serving {guard.serial} on 127.0.0.1:{guard.server.port} (episode {guard.task.id}); run the "
              f"agent with ANDROID_ADB_SERVER_PORT={guard.server.port} (adb -P {guard.server.port}); Ctrl-C or "
              f"`harness guard --end --out {args.out}` ends the episode", file=sys.stderr, flush=True)
        reason = wait_for_end(guard.session, args.idle_end)
    except KeyboardInterrupt:
        reason = "interrupt"
    finally:
        try:
            control.unlink()
        except OSError:
            pass
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    result = guard.close(reason)
    print(guard.summary(result), flush=True)
    return 0


def wait_for_end(session: Any, idle_end: float | None) -> str:
    while not session.ended.wait(0.2):
        if idle_end is not None and session.clients_open == 0 and time.monotonic() - session.last_closed >= idle_end:
            return "idle"
    return session.end_reason or "end"


def end_running(args: argparse.Namespace) -> int:
    from harness.guard.relay import control_request

    if not args.out:
        raise UserError("--end needs --out RUN: the run folder of the guard to end")
    path = Path(args.out) / CONTROL_FILE
    try:
        info = json.loads(path.read_text())
        port, token = int(info["port"]), str(info["token"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UserError(f"no guard is running for {args.out} ({path} is missing or unreadable)") from None
    if args.port is not None and args.port != port:
        raise UserError(f"the guard of {args.out} listens on {port}, not {args.port}")
    why = control_request(port, f"host:crate-guard-end:{token}")
    if why is not None:
        raise UserError(f"the guard of {args.out} did not end: {why}")
    for _ in range(200):  # it writes its verdicts and result, then removes its control file
        if not path.exists():
            break
        time.sleep(0.1)
    print(f"guard: the session of {args.out} ended", file=sys.stderr)
    return 0



