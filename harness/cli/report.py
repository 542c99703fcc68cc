"""``harness report``: tables of one or more runs (:mod:`harness.report.tables`)."""

from __future__ import annotations

import argparse

from harness.cli.options import write_or_print
from harness.core.user_error import UserError


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.episodes import ReportError
    from harness.report.table_formats import render
    from harness.report.tables import build_report

    by = [k.strip() for v in (args.by or ["agent,suite"]) for k in v.split(",") if k.strip()]
    if args.judgements and args.no_judgements:
        raise UserError("--judgements and --no-judgements exclude each other")
    from harness.report.bundle import BundleError
    from harness.report.run_source import open_runs, shown

    try:  # a bundle is read as a run folder (harness.report.run_source), its screenshots left unread
        with open_runs(args.runs, screens=False) as sources:
            rep = build_report([str(s.path) for s in sources], by, judge=args.judge, resamples=args.resamples,
                               seed=args.seed, judgements=args.judgements or None, offline=not args.no_judgements)
            text = shown(render(rep, args.format), sources)
    except (ReportError, BundleError) as e:
        raise UserError(str(e)) from None
    write_or_print(text, args.out, "report")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    rp = sub.add_parser("report", help="tables of one or more runs: SR with 95%% CI per judge, ATP/MSR, safety, cost")
    rp.add_argument("runs", nargs="+", metavar="RUN", help="run folders or bundles (harness bundle)")
    rp.add_argument("--by", action="append", help="group by agent,suite,language,category (default agent,suite)")
    rp.add_argument("--format", choices=["md", "csv", "json", "html"], default="md")
    rp.add_argument("--out", help="write to this file instead of printing")
    rp.add_argument("--judge", help="primary success judge for Task/Tail success and paired tests (default oracle, then crate, ...)")
    rp.add_argument("--resamples", type=int, default=2000, help="paired bootstrap resamples")
    rp.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    rp.add_argument("--judgements", action="append", metavar="SET",
                    help="offline verdicts of only these judgement sets, RUN/judgements/SET (repeatable; default all)")
    rp.add_argument("--no-judgements", action="store_true", help="only the verdicts given during the run (no offline sets)")
    rp.set_defaults(run=cmd_report)
