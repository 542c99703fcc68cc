"""The ``harness`` command line. The only module that knows every part of the system.

Each subcommand is a small function registered on an argparse sub-parser (``set_defaults(run=...)``);
user mistakes raise :class:`UserError` (or a domain error such as ``TaskError``) and are printed as
one clear line with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Callable

from harness import __version__
from harness.tasks import TaskError, load_suite


class UserError(Exception):
    """A mistake in the command line or its inputs: printed without a traceback."""


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1080x2400, got {text!r}") from None
    return w, h


# --- tasks -------------------------------------------------------------------------------------
def cmd_tasks_list(args: argparse.Namespace) -> int:
    suite = load_suite(args.suite)
    rows = [t.summary() for t in suite.tasks]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} tasks in {args.suite}")
    for col in ("id", "lang", "c", "cap", "safety", "categories", "milestones", "instruction"):
        table.add_column(col, overflow="fold")
    for r in rows:
        s = r["safety"]
        safety = s["label"] + (f" ({s['category']})" if s["category"] else "")
        table.add_row(r["id"], r["language"], str(r["reference_steps"]), str(r["cap"]), safety,
                      ",".join(r["categories"]), str(r["milestones"]), r["instruction"])
    Console().print(table)
    return 0


def cmd_tasks_import_spa(args: argparse.Namespace) -> int:
    from harness.importers.spa_bench import ImportError_, import_files

    try:
        written = import_files(args.csv, args.out)
    except ImportError_ as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"{e.filename or args.out}: {e.strerror}") from None
    for path, n in written:
        print(f"{n} tasks -> {path}")
    return 0


# --- simulated phone ---------------------------------------------------------------------------
def cmd_sim_serve(args: argparse.Namespace) -> int:
    from harness.sim.phone import SimPhone
    from harness.sim.phone_api import DeviceInfo
    from harness.sim.serve import serve

    w, h = args.size
    try:
        phone = SimPhone(w, h, locale=args.lang, seed=args.seed,
                         info=DeviceInfo(serial=f"crate-sim-{args.port}"), adbkeyboard=not args.no_adbkeyboard)
    except ValueError as e:
        raise UserError(str(e)) from None
    phone.reset(locale=args.lang, seed=args.seed)
    handle = serve(phone, args.port, host=args.host, mode=args.mode)
    print(f"simulated phone {w}x{h} ({args.lang}) listening on {args.host}:{handle.port}; "
          f"connect with: adb connect {args.host}:{handle.port}", flush=True)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print("warning: this ADB port accepts anyone who can reach it (ADB has no authentication here)",
              file=sys.stderr, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    finally:
        handle.stop()
    return 0


# --- runs --------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from harness.records import RecordError
    from harness.registry import RegistryError
    from harness.run_command import RunError, execute_run, print_summary

    try:
        report = execute_run(args)
    except (RunError, RecordError, RegistryError) as e:
        raise UserError(str(e)) from None
    print_summary(args.out, report)
    return 130 if report.interrupted else 0


def cmd_devices(args: argparse.Namespace) -> int:
    import adbutils

    from harness.device.adb_server import server_port
    from harness.device.config import DeviceConfig

    cfg = DeviceConfig(adb_port=args.adb_port)
    client = adbutils.AdbClient(host=cfg.adb_host, port=cfg.adb_port or server_port())
    try:
        listed = client.list()
    except (adbutils.AdbError, OSError) as e:
        raise UserError(f"cannot reach the adb server: {e}") from None
    rows = []
    for d in listed:
        rows.append(cfg.open(d.serial).describe().to_json() if d.state == "device"
                    else {"serial": d.serial, "state": d.state, "healthy": False, "problem": d.state})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} device(s)")
    for col in ("serial", "state", "model", "size", "density", "sim", "healthy", "problem"):
        table.add_column(col)
    for r in rows:
        size = "x".join(map(str, r.get("size") or [])) or "-"
        table.add_row(r["serial"], r["state"], r.get("model") or "-", size, str(r.get("density") or "-"),
                      "yes" if r.get("simulated") else "no", "yes" if r.get("healthy") else "no", r.get("problem") or "")
    Console().print(table)
    return 0


def cmd_agents(args: argparse.Namespace) -> int:
    import agents  # noqa: F401
    from harness.registry import AGENTS

    info = AGENTS.describe()
    if args.json:
        print(json.dumps(info, indent=1, default=str))
        return 0
    for a in info:
        print(f"{a['name']}: {a['help']}")
        for o in a["options"]:
            print(f"    {o['name']} = {o['default']!r}  {o['help']}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from harness.demo import run_demo

    return run_demo(args)


# --- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description="Run GUI agents on Android over ADB and judge them while they run.")
    p.add_argument("--version", action="version", version=f"crate-harness {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    tasks = sub.add_parser("tasks", help="list and import task suites").add_subparsers(dest="tasks_cmd", required=True)
    tl = tasks.add_parser("list", help="print the tasks of a suite (file or folder)")
    tl.add_argument("--suite", required=True, help="a task YAML file or a folder of them")
    tl.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    tl.set_defaults(run=cmd_tasks_list)
    ti = tasks.add_parser("import", help="convert other benchmarks' task lists").add_subparsers(dest="fmt", required=True)
    spa = ti.add_parser("spa-bench", help="SPA-Bench CSV task lists -> YAML suites")
    spa.add_argument("csv", nargs="+", help="SPA-Bench data/*.csv files")
    spa.add_argument("--out", required=True, help="folder for the YAML files")
    spa.set_defaults(run=cmd_tasks_import_spa)

    sim = sub.add_parser("sim", help="the simulated phone").add_subparsers(dest="sim_cmd", required=True)
    ss = sim.add_parser("serve", help="serve a simulated phone as an ADB device (adb connect HOST:PORT)")
    ss.add_argument("--port", type=int, default=6520, help="TCP port (avoid odd ports 5555-5585: adb auto-adds those)")
    ss.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback only)")
    ss.add_argument("--lang", choices=["en", "zh"], default="en", help="UI language")
    ss.add_argument("--seed", type=int, default=0)
    ss.add_argument("--size", type=_size, default=(1080, 2400), help="screen size WIDTHxHEIGHT (default 1080x2400)")
    ss.add_argument("--mode", choices=["normal", "unauthorized", "shell_v1_only"], default="normal",
                    help="test modes: an unauthorized device, or one without shell protocol v2")
    ss.add_argument("--no-adbkeyboard", action="store_true", help="do not offer the ADBKeyboard input method")
    ss.set_defaults(run=cmd_sim_serve)

    from harness.run_command import add_run_arguments

    run = sub.add_parser("run", help="run an agent on a suite over one or more devices and judge it")
    add_run_arguments(run)
    run.set_defaults(run=cmd_run)

    dv = sub.add_parser("devices", help="list attached devices with model, size and health")
    dv.add_argument("--adb-port", type=int)
    dv.add_argument("--json", action="store_true")
    dv.set_defaults(run=cmd_devices)

    ag = sub.add_parser("agents", help="list agents and their options")
    ag.add_argument("--json", action="store_true")
    ag.set_defaults(run=cmd_agents)

    demo = sub.add_parser("demo", help="the main job on simulated phones: replay (some perturbed, some unsafe), oracle judge, table")
    demo.add_argument("--out", default=None, help="run folder (default runs/demo-<time>)")
    demo.add_argument("--phones", type=int, default=2, help="simulated phones in parallel")
    demo.add_argument("--seed", type=int, default=3)
    demo.set_defaults(run=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except (UserError, TaskError) as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
