"""``harness tasks``: list a suite, check it (statically, then on simulated phones at each size), import
SPA-Bench task lists."""

from __future__ import annotations

import argparse
import json
import sys

from harness.cli.options import size_arg
from harness.core.user_error import UserError


def cmd_tasks_list(args: argparse.Namespace) -> int:
    from harness.run.task_checks import load_checked_suite

    suite = load_checked_suite(args.suite)
    rows = [t.summary() for t in suite.tasks]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    cols = ("id", "lang", "c", "cap", "safety", "categories", "milestones", "verified", "instruction")
    cells = []
    for r in rows:
        s = r["safety"]
        safety = s["label"] + (f" ({s['category']})" if s["category"] else "")
        cells.append([r["id"], r["language"], str(r["reference_steps"]), str(r["cap"]), safety,
                      ",".join(r["categories"]), str(r["milestones"]), "yes" if r["verified"] else "no",
                      " ".join(r["instruction"].split())])
    if not sys.stdout.isatty():  # a pipe or a file: whole values, one task a line, tab-separated (grep, cut)
        for line in (cols, *cells):
            print("\t".join(line))
        print(f"{len(rows)} tasks in {args.suite}", file=sys.stderr)  # the table's title, beside the data
    else:
        table = Table(title=f"{len(rows)} tasks in {args.suite}")
        for col in cols:
            table.add_column(col, overflow="fold", no_wrap=col in ("id", "lang", "c", "cap", "verified"))
        for c in cells:
            table.add_row(*map(escape, c))
        Console().print(table)
    unverified = sum(1 for r in rows if not r["verified"])
    if unverified:
        Console(stderr=True).print(f"{unverified} task(s) are not verified on a device (verified: false): they were "
                                   "written without running them, so check their step counts and milestones first")
    return 0


def _sizes(text: str) -> list[tuple[int, int]]:
    return [size_arg(part.strip()) for part in text.split(",") if part.strip()]


def cmd_tasks_check(args: argparse.Namespace) -> int:
    """Static checks always; with devices or sizes, the do-nothing baseline and the references
    on simulated phones at every size. Exit 0 when everything holds, 1 when a trial fails."""
    from harness.cli.run_parts import split_list
    from harness.run.task_checks import load_checked_suite
    from harness.run.task_trials import TrialError, run_trials, size_name

    suite = load_checked_suite(args.suite)  # TaskErrors: every static defect, exit 2
    tasks = suite.select(split_list(args.tasks) or None)
    devices = split_list(args.device)
    sizes = [s for v in args.sizes or [] for s in v]
    print(f"static checks: {len(tasks)} task(s) in {args.suite} hold", flush=True)
    if not devices and not sizes:
        return 0
    if args.phones < 1:
        raise UserError("--phones must be >= 1")
    from harness.sim.phone import check_size

    for w, h in sizes:
        try:
            check_size(w, h)
        except ValueError as e:
            raise UserError(f"--sizes: {e}") from None
    from pathlib import Path

    if args.out and Path(args.out).exists() and any(Path(args.out).iterdir()):
        raise UserError(f"--out {args.out}: the folder is not empty; the trials write fresh run folders there")
    try:
        report = run_trials(str(args.suite), suite, tasks, devices=devices, sizes=sizes, adb_port=args.adb_port,
                            out=args.out, per_size=args.phones)
    except TrialError as e:
        raise UserError(str(e)) from None
    from rich.console import Console
    from rich.table import Table

    table = Table(title="dynamic checks (oracle) per screen size")
    for col in ("size", "phones", "tasks", "do-nothing fails", "reference holds"):
        table.add_column(col)
    for sr in report.sizes:
        table.add_row(size_name(sr.size), ", ".join(sr.serials), str(sr.tasks), f"{sr.baseline_failed}/{sr.tasks}",
                      f"{sr.references_held}/{sum(1 for t in tasks if t.is_simulated and t.reference is not None)}")
    Console(width=140).print(table)
    if report.skipped:
        print(f"not simulated, no dynamic check: {', '.join(report.skipped)}")
    if args.out:
        print(f"run records: {args.out} (harness report / harness view read them)")
    for p in report.problems:
        print(f"harness: check failed: {p}", file=sys.stderr)
    return 1 if report.problems else 0


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


def add_parser(sub: argparse._SubParsersAction) -> None:
    tasks = sub.add_parser("tasks", help="list, check and import task suites").add_subparsers(dest="tasks_cmd", required=True)
    tl = tasks.add_parser("list", help="print the tasks of a suite (file or folder)")
    tl.add_argument("--suite", required=True, help="a task YAML file or a folder of them")
    tl.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    tl.set_defaults(run=cmd_tasks_list)
    tc = tasks.add_parser("check", help="check a suite: static checks, then (with --device/--sizes) the do-nothing "
                                        "baseline and every reference on simulated phones at each size")
    tc.add_argument("--suite", required=True, help="a task YAML file or a folder of them")
    tc.add_argument("--tasks", action="append", help="only these task ids (comma-separated)")
    tc.add_argument("--device", action="append", help="a simulated phone's serial (repeatable; each is checked at its own size)")
    tc.add_argument("--sizes", action="append", type=_sizes, metavar="WxH,...",
                    help="screen sizes to check, e.g. 720x1280,1080x1920,1080x2400,1440x3120; a size no --device "
                         "has gets simulated phones started by the check")
    tc.add_argument("--phones", type=int, default=1, help="simulated phones the check starts per size (default 1)")
    tc.add_argument("--adb-port", type=int, help="adb server port (default ANDROID_ADB_SERVER_PORT or 5037; with no "
                                                 "--device the check starts a private one)")
    tc.add_argument("--out", help="keep the trials' run records here (default: a temporary folder, removed)")
    tc.set_defaults(run=cmd_tasks_check)
    ti = tasks.add_parser("import", help="convert other benchmarks' task lists").add_subparsers(dest="fmt", required=True)
    spa = ti.add_parser("spa-bench", help="SPA-Bench CSV task lists -> YAML suites")
    spa.add_argument("csv", nargs="+", help="SPA-Bench data/*.csv files")
    spa.add_argument("--out", required=True, help="folder for the YAML files")
    spa.set_defaults(run=cmd_tasks_import_spa)
