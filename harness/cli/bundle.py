"""``harness bundle RUN -o FILE`` and ``harness bundle verify FILE``: a run as one portable file,
redacted, every file's hash in its index (:mod:`harness.report.bundle`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.core.user_error import UserError


def cmd_bundle(args: argparse.Namespace) -> int:
    from harness.report.bundle import BundleError, make_bundle, read_bundle

    words = list(args.what)
    try:
        if words[0] == "verify" and len(words) == 2 and not Path(words[0]).is_dir():
            t0 = time.monotonic()
            v = read_bundle(words[1])
            red = v.index.get("redacted") or {}
            side = (v.index.get("screens") or {}).get("max_side")
            print(f"{words[1]}: ok: {v.files} files, {v.bytes:,} bytes, each as its index says "
                  f"({time.monotonic() - t0:.1f} s)")
            print(f"signature: {v.signature} (sha256 of its seal: compare it with the one its sender gave)")
            print(f"run: {v.index.get('run')}; made by harness {v.index.get('harness_version')}; screenshots: "
                  f"{f'downscaled to {side} px' if side else 'as recorded'}; "
                  f"redacted: secrets, {red.get('devices', 0)} device serial(s), host paths")
            return 0
        if len(words) != 1:
            raise UserError("usage: harness bundle RUN -o FILE, or harness bundle verify FILE")
        if not args.out:
            raise UserError("harness bundle RUN: give the bundle's file with -o FILE (e.g. -o run.tar.zst)")
        if args.screens_max_side is not None and args.screens_max_side < 16:
            raise UserError("--screens-max-side: at least 16 px")
        t0 = time.monotonic()
        digest, index, files = make_bundle(words[0], args.out, max_side=args.screens_max_side)
    except BundleError as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"{e.filename or args.out}: {e.strerror}") from None
    size = Path(args.out).stat().st_size
    print(f"{args.out}: {files} files of {words[0]} ({size:,} bytes, {time.monotonic() - t0:.1f} s); "
          f"secrets, {index['redacted']['devices']} device serial(s) and host paths redacted", file=sys.stderr)
    print(f"signature: {digest} (give it with the bundle: `harness bundle verify FILE` prints the same)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bundle", help="a run as one portable, redacted file (tar + zstd); `bundle verify FILE` checks one",
                       description="harness bundle RUN -o FILE writes the run as one file: manifest, results, "
                       "trajectories, screenshots, judgements and task files, with keys, tokens, device serials and "
                       "host paths redacted and every file's sha256 in its index or seal. harness bundle verify FILE "
                       "checks every file and prints the bundle's signature (the seal's sha256). harness report, view "
                       "and compare read a bundle as they read a run folder.")
    p.add_argument("what", nargs="+", metavar="RUN | verify FILE")
    p.add_argument("-o", "--out", help="the bundle file to write (e.g. run.tar.zst)")
    p.add_argument("--screens-max-side", type=int, metavar="PX",
                   help="downscale screenshots to at most PX on their longer side (the viewer still draws actions "
                        "in the phone's pixels)")
    p.set_defaults(run=cmd_bundle)
