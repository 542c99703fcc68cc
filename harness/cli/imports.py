"""``harness import``: recorded trajectories of other benchmarks (MobileRisk, AndroidWorld,
SPA-Bench) converted into run folders with labels."""

from __future__ import annotations

import argparse
import sys

from harness.core.user_error import UserError


def cmd_import_mobilerisk(args: argparse.Namespace) -> int:
    from harness.importers.mobilerisk import import_mobilerisk
    from harness.importers.files import TrajectoryImportError

    try:
        report = import_mobilerisk(args.src, args.out, coords=args.coords, argv=sys.argv)
    except TrajectoryImportError as e:
        raise UserError(str(e)) from None
    _print_import(report)
    return 0


def cmd_import_trajectories(args: argparse.Namespace) -> int:
    from harness.importers.files import TrajectoryImportError
    from harness.importers.trajectories import import_trajectories

    try:
        report = import_trajectories(args.src, args.format, args.out, argv=sys.argv)
    except TrajectoryImportError as e:
        raise UserError(str(e)) from None
    _print_import(report)
    return 0


def _print_import(report) -> None:
    print(f"{report.episodes} episode(s), {report.steps} step(s) -> {report.out} "
          f"({report.unmapped} step(s) with an unmapped action kept as raw text); "
          f"labels: {report.out / 'labels.jsonl'}")
    for w in report.warnings[:10]:
        print(f"warning: {w}", file=sys.stderr)


def add_parser(sub: argparse._SubParsersAction) -> None:
    im = sub.add_parser("import", help="convert recorded trajectories (MobileRisk, AndroidWorld, SPA-Bench) into runs").add_subparsers(
        dest="import_cmd", required=True)
    imr = im.add_parser("mobilerisk", help="MobileRisk cases (trajectory.json + images/) -> RUN + labels.jsonl")
    imr.add_argument("src", metavar="DIR")
    imr.add_argument("--out", required=True, help="run folder to write")
    imr.add_argument("--coords", choices=["pixels", "thousand", "unit"], default="pixels",
                     help="coordinate space of the recorded actions (default screenshot pixels)")
    imr.set_defaults(run=cmd_import_mobilerisk)
    itr = im.add_parser("trajectories", help="AndroidWorld- or SPA-Bench-style episode folders -> RUN + labels.jsonl")
    itr.add_argument("src", metavar="DIR")
    itr.add_argument("--format", required=True, choices=["androidworld", "spa-bench"])
    itr.add_argument("--out", required=True, help="run folder to write")
    itr.set_defaults(run=cmd_import_trajectories)
