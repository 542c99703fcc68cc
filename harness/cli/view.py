"""``harness view``: the trajectory viewer of a run, written and served on localhost; ``--live``: the
live page of a run in progress."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from harness.cli.options import busy_port
from harness.core.user_error import UserError


def cmd_view(args: argparse.Namespace) -> int:
    from harness.report.serve import LOOPBACK, ViewServer
    from harness.report.viewer import write_pages

    if args.judgements and args.no_judgements:
        raise UserError("--judgements and --no-judgements exclude each other")
    thumbs = None
    if not args.live:
        args.run_dir = _bundle_folder(args.run_dir)
    if args.live:
        server = _live_server(args)
        what = f"the live view of {args.run_dir}"
    else:
        try:  # serving: thumbnails made in the background and on request; --no-serve: all made first
            index, thumbs = write_pages(args.run_dir, args.judgements or None, offline=not args.no_judgements,
                                        out=args.out, later=not args.no_serve)
        except (FileNotFoundError, ValueError) as e:
            raise UserError(str(e)) from None
        except OSError as e:  # a read-only run folder (or --out folder): one line, not a traceback
            where = e.filename or args.out or args.run_dir
            hint = "; pass --out DIR to write the pages elsewhere" if not args.out else ""
            raise UserError(f"{where}: cannot write the viewer's pages ({e.strerror or e}){hint}") from None
        if args.no_serve:
            print(f"viewer written: {index}")
            return 0
        try:
            server = ViewServer(index.parent, host=args.host, port=args.port, run=args.run_dir, thumbnails=thumbs)
        except OSError as e:
            raise busy_port(args.host, args.port, e) from None
        what = str(index.parent)
    print(f"serving {what} at {server.url} (Ctrl-C to stop)", flush=True)
    if thumbs is not None and len(thumbs):
        print(f"thumbnails: {len(thumbs)} to make, in the background and at once for a page that asks; until then "
              "a page read from disk shows the full screenshot in a thumbnail's place", flush=True)
        thumbs.start(on_done=lambda t, took: print(
            f"thumbnails: {t.made} made in {took:.0f} s" + (f", {t.failed} unreadable" if t.failed else ""), flush=True))
    if args.host not in LOOPBACK:
        print("warning: anyone who can reach this address can read the run's screenshots and outputs",
              file=sys.stderr, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    if thumbs is not None and len(thumbs):  # stopped before the background was done: say what is left
        print(f"thumbnails: {len(thumbs)} not made; the pages show those screenshots full size until "
              f"`harness view` runs again (--no-serve makes them all)", flush=True)
    return 0


def _live_server(args: argparse.Namespace):
    """``harness view --live RUN``: the live page of a run in progress (or done), read from its folder."""
    from harness.live.records import run_token
    from harness.live.server import LiveServer
    from harness.records import MANIFEST_FILE

    if args.out or args.no_serve or args.judgements or args.no_judgements:
        raise UserError("--live serves the run as it is recorded: --out, --no-serve and --judgements do not apply")
    run = Path(args.run_dir)
    if not (run / MANIFEST_FILE).is_file():
        raise UserError(f"{run}: not a run folder (no {MANIFEST_FILE}); start the run first, or pass its --out")
    if run_token(run) is None:
        print(f"warning: cannot write {run}/.live-token: the page shows no Allow/Deny buttons", file=sys.stderr)
    try:
        return LiveServer(run, host=args.host, port=args.port)
    except OSError as e:
        raise busy_port(args.host, args.port, e) from None


def _bundle_folder(run: str) -> str:
    """A bundle (harness bundle) as the run folder it holds, checked and unpacked once into the cache."""
    from harness.report.bundle import BundleError, is_bundle
    from harness.report.run_source import cached

    if not is_bundle(run):
        return run
    try:
        folder = cached(run)
    except BundleError as e:
        raise UserError(str(e)) from None
    print(f"{run}: checked against its index, unpacked into {folder}", file=sys.stderr)
    return str(folder)


def add_parser(sub: argparse._SubParsersAction) -> None:
    vw = sub.add_parser("view", help="write RUN/report.html (trajectory viewer) and serve it on localhost")
    vw.add_argument("run_dir", metavar="RUN", help="run folder or bundle (harness bundle)")
    vw.add_argument("--port", type=int, default=8765, help="TCP port (0 = any free port)")
    vw.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback only)")
    vw.add_argument("--no-serve", action="store_true", help="only write the pages, every thumbnail made first "
                    "(when serving, thumbnails are made in the background and on request)")
    vw.add_argument("--out", metavar="DIR", help="write the pages to DIR instead of the run folder (e.g. a read-only "
                    "run); DIR/run links to the run, whose screenshots the pages open")
    vw.add_argument("--judgements", action="append", metavar="SET",
                    help="offline verdicts of only these judgement sets, RUN/judgements/SET (repeatable; default all)")
    vw.add_argument("--no-judgements", action="store_true", help="only the verdicts given during the run")
    vw.add_argument("--live", action="store_true", help="serve the live page of a run in progress (started "
                    "elsewhere; a panel per device, Allow/Deny for --monitor-mode ask) instead of the viewer")
    vw.set_defaults(run=cmd_view)
