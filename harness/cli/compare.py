"""``harness compare RUN_A RUN_B [RUN_C...]``: runs or bundles side by side (:mod:`harness.report.compare`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.user_error import UserError


def cmd_compare(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from harness.records import RecordError
    from harness.report.bundle import BundleError, is_bundle
    from harness.report.compare import compare_runs, terminal_rows
    from harness.report.compare_page import write_compare
    from harness.report.episodes import ReportError
    from harness.report.run_source import cached

    if len(args.runs) < 2:
        raise UserError("harness compare needs two runs or more (folders or bundles)")
    try:
        # a bundle is unpacked (checked) into the cache once: the page shows its screenshots from there
        sources = [(str(r), cached(r) if is_bundle(r) else Path(r)) for r in args.runs]
        for name, path in sources:
            if not path.is_dir():
                raise UserError(f"{name}: not a run folder or a bundle")
        cmp = compare_runs(sources, judge=args.judge, resamples=args.resamples, seed=args.seed)
        page = None if args.no_page else write_compare(cmp, args.out)
    except (ReportError, BundleError, RecordError) as e:
        raise UserError(str(e)) from None
    head, rows = terminal_rows(cmp)
    table = Table(title=f"judge {cmp.judge}; {len(cmp.tasks)} tasks in every run; B..: each run against A")
    for h in head:
        table.add_column(h, overflow="fold")
    for r in rows:
        table.add_row(*[escape(x) for x in r])
    console = Console(width=200)
    console.print(table)
    for w in cmp.warnings:
        console.print(f"warning: {w}", markup=False, highlight=False)
    if page is not None:
        console.print(f"page: {page.resolve()}", markup=False, highlight=False)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="runs or bundles side by side: outcome matrix, McNemar, bootstrap interval, "
                       "a page with each task's trajectories side by side")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders or bundles (the first is A)")
    p.add_argument("--out", default="compare", help="folder for the page (default ./compare): index.html, tasks/")
    p.add_argument("--no-page", action="store_true", help="print the table only")
    p.add_argument("--judge", help="success judge (default oracle, then crate, holistic, milestones)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.set_defaults(run=cmd_compare)
