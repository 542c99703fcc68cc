"""The ``harness`` command line. The only package that knows every part of the system.

Each command is a module of this package whose ``add_parser`` registers its sub-parser and the
function that runs it (``set_defaults(run=...)``); :data:`COMMANDS` lists them in the order
``harness --help`` shows them. User mistakes raise :class:`UserError` (or a domain error such as
``TaskError``) and are printed as one clear line with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Callable

from harness import __version__
from harness.cli import (agents, bundle, compare, demo, devices, guard, imports, judge, judge_eval, record, report, run,
                         run_checks, sim, static, tasks, view)
from harness.core.ports import StartError
from harness.core.tasks import TaskError, errors_of
from harness.core.user_error import UserError
from harness.preflight import PreflightFailed

# Each registers its command(s) on the sub-parsers, in the order of `harness --help`.
COMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    tasks.add_parser,           # harness tasks list|check|import
    sim.add_parser,             # harness sim serve|human
    record.add_record_parser,   # harness record
    run.add_parser,             # harness run
    run_checks.add_parser,      # harness preflight
    devices.add_devices_parser,  # harness devices [prepare|restore|capture]
    devices.add_adb_parser,     # harness adb
    guard.add_parser,           # harness guard
    agents.add_parser,          # harness agents [parse]
    demo.add_parser,            # harness demo
    report.add_parser,          # harness report
    static.add_parser,          # harness static score|run
    view.add_parser,            # harness view
    compare.add_parser,         # harness compare
    bundle.add_parser,          # harness bundle [verify]
    judge.add_parser,           # harness judge
    judge_eval.add_parser,      # harness judge-eval
    imports.add_parser,         # harness import mobilerisk|trajectories
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description="Run GUI agents on Android over ADB and judge them while they run.")
    p.add_argument("--version", action="version", version=f"crate-harness {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return p


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    """SIGTERM (what job schedulers and `kill` send) stops the command as Ctrl-C does: a resumable
    run, exit 130, the manifest marked interrupted."""
    raise KeyboardInterrupt("SIGTERM")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    previous = None
    if threading.current_thread() is threading.main_thread():  # commands that serve set their own handler
        previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        return run(args)
    except TaskError as e:
        for line in errors_of(e):  # one line per defect: FILE: task 'ID': FIELD: problem
            print(f"harness: error: {line}", file=sys.stderr)
        return 2
    except PreflightFailed as e:
        for problem in e.problems:  # one line each: what failed, and what to do
            print(f"harness: error: {problem}", file=sys.stderr)
        return 2
    except UserError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return 2
    except StartError as e:  # a server of our own (adb's, a simulated phone) could not start: what was tried, what to do
        print(f"harness: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
