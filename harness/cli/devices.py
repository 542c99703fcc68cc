"""``harness devices`` on the command line: list the attached phones (or a Ray cluster's) with
their health, prepare them for runs and restore what was changed (harness/device/prepare.py), and
capture a phone's profile (harness/device/capture.py)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from harness.core.user_error import UserError


def add_devices_parser(sub: argparse._SubParsersAction) -> None:
    from harness.cli.run_parts import adb_arguments, prepare_arguments

    dv = sub.add_parser("devices", help="list attached devices with model, size and health; prepare or restore them")
    adb_arguments(dv)
    dv.add_argument("--cluster", metavar="ADDRESS",
                    help="every node's devices in a Ray cluster (HEAD:6379, or auto), each node asking its own adb server")
    dv.add_argument("--json", action="store_true")
    dv.set_defaults(run=cmd_devices)
    dv_sub = dv.add_subparsers(dest="devices_cmd", required=False)
    dp = dv_sub.add_parser("prepare", help="screen on and unlocked, stay awake, animations off, ADBKeyboard "
                                           "(the original values are recorded for `devices restore`)")
    dp.add_argument("serials", nargs="*", metavar="SERIAL", help="devices (default: all attached)")
    prepare_arguments(dp)
    adb_arguments(dp, nested=True)
    dp.set_defaults(run=cmd_devices_prepare)
    dr = dv_sub.add_parser("restore", help="put back every value a prepare or a run changed (also after a crash)")
    dr.add_argument("serials", nargs="*", metavar="SERIAL", help="devices (default: every device with recorded changes)")
    adb_arguments(dr, nested=True)
    dr.set_defaults(run=cmd_devices_restore)
    dc = dv_sub.add_parser("capture", help="save what a phone answers to every read-only command the harness sends "
                                           "(a device profile for `harness sim serve --profile`; identifiers "
                                           "redacted; nothing on the phone is changed)")
    dc.add_argument("serial", metavar="SERIAL", help="the device (as `adb devices` lists it)")
    dc.add_argument("--out", required=True, metavar="DIR", help="a new (or empty) folder for the profile")
    dc.add_argument("--name", help="the profile's name (default: the folder's name)")
    adb_arguments(dc, nested=True)
    dc.set_defaults(run=cmd_devices_capture)


def add_adb_parser(sub: argparse._SubParsersAction) -> None:
    """``harness adb ARGS``: the adb the harness uses (PATH's, else the one in the adbutils wheel)."""
    ad = sub.add_parser("adb", prefix_chars="+", help="run the adb the harness uses (bundled in the adbutils wheel "
                                                     "when adb is not on PATH): harness adb connect HOST:PORT; "
                                                     "harness adb --path prints where it is")
    ad.add_argument("adb_args", nargs=argparse.REMAINDER, metavar="ARGS", help="adb's own arguments")
    ad.set_defaults(run=cmd_adb, adb_parser=ad)


def cmd_adb(args: argparse.Namespace) -> int:
    """adb with these arguments, as adb picks its server (``-H``/``-P``, ``ANDROID_ADB_SERVER_PORT``...,
    the same rules :func:`harness.device.adb_server.adb_endpoint` follows); its exit code."""
    import subprocess

    from harness.device.adb_server import AdbNotFound, adb_path

    try:
        adb = adb_path()
    except AdbNotFound as e:
        raise UserError(str(e)) from None
    if args.adb_args == ["--path"]:
        print(adb)
        return 0
    if args.adb_args in (["-h"], ["--help"]):
        args.adb_parser.print_help()
        print(f"\nadb: {adb} (adb's own help: harness adb help)")
        raise SystemExit(0)
    try:
        return subprocess.run([adb, *args.adb_args]).returncode
    except KeyboardInterrupt:
        return 130


def _device_config(args: argparse.Namespace, host: str | None = None, port: int | None = None):
    from harness.device.adb_server import AdbEndpointError
    from harness.device.config import DeviceConfig

    cfg = DeviceConfig(adb_host=args.adb_host or host, adb_port=args.adb_port or port)
    try:
        cfg.endpoint()
    except AdbEndpointError as e:
        raise UserError(str(e)) from None
    return cfg


def _attached(cfg) -> list:
    import adbutils

    from harness.device.adb_server import adb_client

    ep = cfg.endpoint()
    try:
        return adb_client(host=ep.host, port=ep.port).list()
    except (adbutils.AdbError, OSError) as e:
        raise UserError(f"cannot reach the adb server at {ep}: {e}") from None


def cmd_devices(args: argparse.Namespace) -> int:
    from harness.device.base import DeviceError
    from harness.device.prepare import Journal, waiting_values

    pending: dict[str, Journal] = {}
    if args.cluster:
        rows, where = _cluster_devices(args), f"the nodes of {args.cluster}"
    else:
        cfg = _device_config(args)
        try:
            pending = {j.serial: j for j in Journal.pending()}
        except DeviceError as e:
            raise UserError(str(e)) from None
        rows = []
        for d in _attached(cfg):
            dev = cfg.open(d.serial) if d.state == "device" else None
            row = (dev.describe().to_json() if dev is not None
                   else {"serial": d.serial, "state": d.state, "healthy": False, "problem": d.state})
            j = pending.get(d.serial)
            row["pending_restore"] = len(j.changes) if j else 0
            row["to_restore"] = waiting_values(j, dev if row.get("healthy") else None) if j else []
            rows.append(row)
        where = str(cfg.endpoint())
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from rich.console import Console

    nodes = sorted({r["node"] for r in rows if "node" in r})
    count = sum(1 for r in rows if r["serial"] != "-")  # a node without a usable adb server has a row of its own
    cols = (*(["node"] if nodes else []), "serial", "state", "kind", "model", "size", "density", "healthy",
            "to restore", "problem")
    cells = [[*([r["node"]] if nodes else []), r["serial"], r["state"], r.get("kind") or "-", r.get("model") or "-",
              "x".join(map(str, r.get("size") or [])) or "-", str(r.get("density") or "-"),
              "yes" if r.get("healthy") else "no", str(r.get("pending_restore") or "-"), r.get("problem") or ""]
             for r in (sorted(rows, key=lambda r: (r["node"], r["serial"])) if nodes else rows)]
    tty = sys.stdout.isatty()
    if not rows:  # not a bare header: where it looked, and how to attach one
        print(f"no device attached to the adb server at {where}: plug a phone in with USB debugging on "
              "(docs/phones.md section 1), `harness adb connect HOST:PORT` a network one, or start a simulated "
              "phone (`harness sim serve --as-phone`)", file=sys.stderr)
    if not tty:  # a pipe or a file: whole values, tab-separated (a table would cut serials)
        for line in (cols, *cells):
            print("\t".join(line))
    elif rows:
        title = f"{count} device(s) " + (f"on {len(nodes)} node(s) of {args.cluster}" if nodes else f"at {where}")
        print_devices(Console(), title, list(cols), cells)
    absent = sorted(set(pending) - {r["serial"] for r in rows})
    waiting = [r for r in rows if r.get("to_restore")] + \
        [{"serial": s, "to_restore": waiting_values(pending[s]), "absent": True,
          "adb": pending[s].adb} for s in absent]
    for r in waiting:  # a phone a run holds keeps its values until that run puts them back itself
        j = pending.get(r["serial"])
        if j is not None and not r.get("node"):
            from harness.device.phone_lock import holder_of

            r["holder"] = holder_of(r["serial"], *_adb_of(j, cfg))
    _print_waiting(waiting, str(where), sys.stdout if tty else sys.stderr)  # a pipe's stdout stays one row per device
    return 0


def _adb_of(journal, cfg) -> tuple[str, int]:
    """The adb server a journal's phone was reached through (else this command's)."""
    ep = cfg.endpoint()
    return str(journal.adb.get("host") or ep.host), int(journal.adb.get("port") or ep.port)


def print_devices(console: Any, title: str, cols: list[str], cells: list[list[str]]) -> None:
    """The devices as a table where it fits the terminal, a column with nothing in it left out (no
    value to restore, no problem); on a terminal too narrow for it (80 columns and a long model
    name or problem), one line per device instead of a table whose cells wrap."""
    from rich.markup import escape
    from rich.table import Table

    keep = [i for i, c in enumerate(cols) if c in ("serial", "state", "healthy")
            or any(row[i] not in ("", "-") for row in cells)]
    table = Table(title=title)
    for i in keep:
        table.add_column(cols[i], no_wrap=True)
    for c in cells:
        table.add_row(*(escape(c[i]) for i in keep))  # node names and problems are not rich markup
    natural = sum(max(len(cols[i]), *(len(c[i]) for c in cells)) + 3 for i in keep) + 1  # cells, padding, borders
    if natural <= console.width:
        console.print(table)
        return
    console.print(title, highlight=False)
    for c in cells:
        row = dict(zip(cols, c))
        where = f"{row['node']}/{row['serial']}" if row.get("node") else row["serial"]
        parts = [row[k] for k in ("state", "kind", "model", "size") if row.get(k) not in (None, "", "-")]
        parts += [f"{row['density']} dpi"] if row.get("density") not in (None, "", "-") else []
        parts.append("healthy" if row["healthy"] == "yes" else "not usable")
        if row.get("to restore") not in (None, "", "-"):
            parts.append(f"{row['to restore']} value(s) to restore")
        if row.get("problem"):
            parts.append(row["problem"])
        console.print(f"{where}: {', '.join(parts)}", markup=False, highlight=False)


def _print_waiting(rows: list[dict], where: str, stream) -> None:
    """Each device's values waiting to be restored, one line each with what the device holds now:
    how to put them back, or who holds the phone and will put them back itself."""
    from harness.device.phone_lock import holder_text
    from harness.device.prepare import describe_waiting

    for r in rows:
        name = f"{r['node']}/{r['serial']}" if r.get("node") else r["serial"]
        restore = f"`harness devices restore {r['serial']}`" + (f" on node {r['node']}" if r.get("node") else "")
        if r.get("holder"):
            head = (f"to restore on {name}, held now by a running command ({holder_text(r['holder'])}), which puts "
                    "them back itself when it ends:")
        elif r.get("absent"):
            adb = r.get("adb") or {}
            server = f"{adb.get('host')}:{adb.get('port')}" if adb.get("port") else None
            other = f"; its journal names the adb server {server}" if server and server != where else ""
            head = (f"to restore on {name}, which is not attached to the adb server at {where}{other}: "
                    f"{restore} once it is attached again:")
        else:
            head = f"to restore on {name}, with {restore}:"
        print(head, file=stream)
        for v in r["to_restore"]:
            print(f"  {describe_waiting(v)}", file=stream)


def _cluster_devices(args: argparse.Namespace) -> list[dict]:
    """Every node's devices, each node asking its own adb server (``--adb-host/--adb-port`` only
    when given: otherwise each node's own default)."""
    from harness.device.config import DeviceConfig
    from harness.farm import FarmError, cluster_devices

    try:
        return cluster_devices(args.cluster, DeviceConfig(adb_host=args.adb_host, adb_port=args.adb_port))
    except FarmError as e:
        raise UserError(str(e)) from None


def _hold(dev):
    """The phone's lock for this command (harness.device.phone_lock), or a UserError naming its holder."""
    from harness.device.phone_lock import PhoneBusy, hold

    try:
        lock = hold(dev.serial, dev.host, dev.port)
    except PhoneBusy as e:
        raise UserError(str(e)) from None
    if lock.note:
        print(f"note: {lock.note}", file=sys.stderr, flush=True)
    return lock


def cmd_devices_prepare(args: argparse.Namespace) -> int:
    from harness.device.base import DeviceError, InfraError
    from harness.device.prepare import Journal, PrepareRefused, describe_prepare, prepare
    from harness.run.options import RunError
    from harness.cli.run_parts import prepare_config

    try:
        prep = prepare_config(args)
    except RunError as e:
        raise UserError(str(e)) from None
    from harness.preflight import DeviceNeeds, Plan, preflight

    cfg = _device_config(args)
    # every device checked before any is changed: attached, usable, unlockable, can take --size
    passed = preflight(Plan(device_config=cfg, serials=list(args.serials), needs=DeviceNeeds(prepare=prep)))
    for dev in passed.devices:
        serial = dev.serial
        with _hold(dev):
            try:
                dev.journal = Journal.open(serial, {"host": dev.host, "port": dev.port},
                                           owner={"command": "devices prepare"})
                report = prepare(dev, prep)
            except (PrepareRefused, DeviceError, InfraError) as e:
                raise UserError(str(e)) from None
        changed = describe_prepare(report.to_json()) or "nothing (already prepared)"
        print(f"{serial} ({report.kind}): changed {changed}")
        for note in report.notes:
            print(f"  note: {note}")
        if dev.journal.changes:
            print(f"  the original values are recorded in {dev.journal.path}; put them back with "
                  f"`harness devices restore {serial}`")
    return 0


def cmd_devices_restore(args: argparse.Namespace) -> int:
    from harness.device.base import DeviceError
    from harness.device.phone_lock import PhoneBusy, hold
    from harness.device.prepare import Journal, restore, shown_value

    try:
        journals = [j for j in Journal.pending() if not args.serials or j.serial in args.serials]
    except DeviceError as e:
        raise UserError(str(e)) from None
    if not journals:
        print("nothing to restore" + (f" on {', '.join(args.serials)}" if args.serials else ""))
        return 0
    failed, busy = 0, []
    for j in journals:
        cfg = _device_config(args, j.adb.get("host"), j.adb.get("port"))
        dev = cfg.open(j.serial)
        try:  # a phone a run is using keeps its values until that run puts them back itself
            lock = hold(dev.serial, dev.host, dev.port)
        except PhoneBusy as e:
            busy.append(str(e))
            continue
        with lock:
            if lock.note:
                print(f"note: {lock.note}", file=sys.stderr, flush=True)
            report = restore(dev, j)
        for r in report.restored:
            print(f"{j.serial}: {r['what']} restored to {shown_value(r['what'], r['value'])}")
        for r in report.failed:
            print(f"{j.serial}: {r['what']} NOT restored: {r['error']}", file=sys.stderr)
        failed += len(report.failed)
    if busy:
        raise UserError("not restored, the phone is in use: " + "; ".join(busy) +
                        ("" if not failed else f" ({failed} other value(s) could not be put back either)"))
    if failed:
        print(f"{failed} value(s) are still recorded; run `harness devices restore` again once the device is reachable",
              file=sys.stderr)
        return 1
    return 0


def cmd_devices_capture(args: argparse.Namespace) -> int:
    from pathlib import Path

    from harness.device.capture import CaptureError, capture

    cfg = _device_config(args)
    states = {d.serial: d.state for d in _attached(cfg)}
    if states.get(args.serial) != "device":
        raise UserError(f"device {args.serial} is {states.get(args.serial) or 'not attached'} "
                        f"(attached: {', '.join(f'{s} ({st})' for s, st in states.items()) or 'none'})")
    dev = cfg.open(args.serial)
    try:
        m = capture(dev, Path(args.out), name=args.name, say=lambda line: print(line, file=sys.stderr, flush=True))
    except CaptureError as e:
        raise UserError(str(e)) from None
    except OSError as e:
        raise UserError(f"{e.filename or args.out}: {e.strerror}") from None
    d = m.device
    failed = [a for a in m.answers if a.error]
    print(f"{args.serial}: {d.get('manufacturer') or '?'} {d.get('model') or '?'}, Android {d.get('release') or '?'} "
          f"(SDK {d.get('sdk') or '?'}), build {d.get('build') or '?'}: {len(m.answers) - len(failed)} answers in "
          f"{args.out}")
    props = [r["prop"] for r in m.redactions if "prop" in r]
    others = sum(r.get("count", 0) for r in m.redactions if "what" in r)
    print(f"  redacted: {', '.join(props) or 'no property'}" + (f" and {others} value(s) in the answers" if others else "")
          + f" (listed in {Path(args.out) / 'manifest.json'})")
    for a in failed:
        print(f"  not answered: {a.command}: {a.error}", file=sys.stderr)
    if m.foreground:
        print(f"  in front: {m.foreground['package']}/{m.foreground['activity']}")
    return 0
