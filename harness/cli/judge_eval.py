"""``harness judge-eval``: judges against human labels (agreement), or with ``--calibrate`` the
monitor's threshold from labelled steps (:mod:`harness.cli.calibrate`)."""

from __future__ import annotations

import argparse
import json
import sys

from harness.core.user_error import UserError


def cmd_judge_eval(args: argparse.Namespace) -> int:
    from judges.agreement import (AgreementError, ORACLE_JUDGES, evaluate, labels_from_oracle, load_labels,
                                  read_sources, render_table)

    if args.calibrate:
        from harness.cli.calibrate import run_calibrate

        return run_calibrate(args, argv=sys.argv)
    if args.alpha is not None or args.out is not None:
        raise UserError("--alpha and --out belong to --calibrate MONITOR")
    if bool(args.labels) == bool(args.labels_from):
        raise UserError("give either --labels FILE or --labels-from oracle")
    warnings: list[str] = []
    try:
        labels = load_labels(args.labels) if args.labels else labels_from_oracle(args.runs)
        sources = read_sources(args.runs, judgement_sets=args.judgements or None, include_live=not args.offline_only,
                               warnings=warnings)
        exclude = ORACLE_JUDGES if args.labels_from == "oracle" else ()
        report = evaluate(sources, labels, safety_judges=[s for v in args.safety_judge or [] for s in v.split(",")],
                          exclude=exclude)
    except AgreementError as e:
        raise UserError(str(e)) from None
    if not labels:
        raise UserError("no labels: the labels file is empty" if args.labels else "no oracle verdicts in these runs")
    for w in warnings:  # torn or repeated judgement lines, a run given twice: said, never silent
        print(f"warning: {w}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps({**report, "warnings": warnings}, indent=1, ensure_ascii=False))
    else:
        render_table(report)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    je = sub.add_parser("judge-eval", help="judges against human labels: P/R/F1, accuracy, kappa, confusion, localisation")
    je.add_argument("runs", nargs="+", metavar="RUN", help="run folders (live verdicts and RUN/judgements/*)")
    je.add_argument("--labels", help="JSONL: {task_id, success?, unsafe?, first_unsafe_step?, risky_steps?, language?, "
                    "app?}")
    je.add_argument("--labels-from", choices=["oracle"], help="use the oracle's verdicts as labels (simulated runs)")
    je.add_argument("--judgements", action="append", metavar="SET", help="only these judgement sets (repeatable)")
    je.add_argument("--offline-only", action="store_true", help="leave out the verdicts given during the run")
    je.add_argument("--safety-judge", action="append", metavar="NAME",
                    help="also treat these judges as safety judges (True = unsafe)")
    je.add_argument("--format", choices=["table", "json"], default="table")
    cal = je.add_argument_group("calibration (docs/judges.md, Calibration)")
    cal.add_argument("--calibrate", metavar="MONITOR", choices=["crate-s"],
                     help="instead of agreement: the monitor's split-conformal threshold from the labelled steps' "
                          "recorded scores (crate-s)")
    cal.add_argument("--alpha", metavar="A", help="with --calibrate: the largest fraction of truly risky steps "
                     "allowed to score below the threshold and pass (e.g. 0.1)")
    cal.add_argument("--out", metavar="FILE", default=None,
                     help="with --calibrate: the calibration file to write (default calibration.json; its plot "
                          "FILE.png and page FILE.html go beside it)")
    je.set_defaults(run=cmd_judge_eval)
