"""``harness devices`` on the command line: list the attached phones (or a Ray cluster's) with
their health, prepare them for runs and restore what was changed (harness/device/prepare.py), and
capture a phone's profile (harness/device/capture.py)."""

from __future__ import annotations

import argparse
import json
import sys

from harness.user_error import UserError


def add_devices_parser(sub: argparse._SubParsersAction) -> None:
    from harness.run_command import adb_arguments

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
    from harness.device.prepare import Journal

    pending: dict[str, int] = {}
    if args.cluster:
        rows, where = _cluster_devices(args), f"the nodes of {args.cluster}"
    else:
        cfg = _device_config(args)
        try:
            pending = {j.serial: len(j.changes) for j in Journal.pending()}
        except DeviceError as e:
            raise UserError(str(e)) from None
        rows = []
        for d in _attached(cfg):
            row = (cfg.open(d.serial).describe().to_json() if d.state == "device"
                   else {"serial": d.serial, "state": d.state, "healthy": False, "problem": d.state})
            row["pending_restore"] = pending.get(d.serial, 0)
            rows.append(row)
        where = str(cfg.endpoint())
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    nodes = sorted({r["node"] for r in rows if "node" in r})
    count = sum(1 for r in rows if r["serial"] != "-")  # a node without a usable adb server has a row of its own
    cols = (*(["node"] if nodes else []), "serial", "state", "kind", "model", "size", "density", "healthy",
            "to restore", "problem")
    cells = [[*([r["node"]] if nodes else []), r["serial"], r["state"], r.get("kind") or "-", r.get("model") or "-",
              "x".join(map(str, r.get("size") or [])) or "-", str(r.get("density") or "-"),
              "yes" if r.get("healthy") else "no", str(r.get("pending_restore") or "-"), r.get("problem") or ""]
             for r in (sorted(rows, key=lambda r: (r["node"], r["serial"])) if nodes else rows)]
    if not sys.stdout.isatty():  # a pipe or a file: whole values, tab-separated (a table would cut serials)
        for line in (cols, *cells):
            print("\t".join(line))
    else:
        table = Table(title=f"{count} device(s) " + (f"on {len(nodes)} node(s) of {args.cluster}" if nodes
                                                     else f"at {where}"))
        for col in cols:
            table.add_column(col, no_wrap=col == "serial", overflow="fold")
        for c in cells:
            table.add_row(*map(escape, c))  # node names and problems are not rich markup
        Console().print(table)
    absent = sorted(set(pending) - {r["serial"] for r in rows})
    if absent:
        print(f"changes waiting to be restored on devices not attached now: {', '.join(absent)} "
              "(`harness devices restore` once they are back)", file=sys.stderr)
    return 0


def _cluster_devices(args: argparse.Namespace) -> list[dict]:
    """Every node's devices, each node asking its own adb server (``--adb-host/--adb-port`` only
    when given: otherwise each node's own default)."""
    from harness.device.config import DeviceConfig
    from harness.farm import FarmError, cluster_devices

    try:
        return cluster_devices(args.cluster, DeviceConfig(adb_host=args.adb_host, adb_port=args.adb_port))
    except FarmError as e:
        raise UserError(str(e)) from None


def cmd_devices_prepare(args: argparse.Namespace) -> int:
    from harness.device.base import DeviceError, InfraError
    from harness.device.prepare import Journal, PrepareRefused, describe_prepare, prepare

    cfg = _device_config(args)
    serials = args.serials or [d.serial for d in _attached(cfg) if d.state == "device"]
    if not serials:
        raise UserError("no device is attached (adb devices lists none)")
    for serial in serials:
        dev = cfg.open(serial)
        desc = dev.describe()
        if not desc.healthy:
            raise UserError(f"device {serial} is not usable: {desc.problem or desc.state}")
        try:
            dev.journal = Journal.open(serial, {"host": dev.host, "port": dev.port}, owner={"command": "devices prepare"})
            report = prepare(dev)
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
    from harness.device.prepare import Journal, restore

    try:
        journals = [j for j in Journal.pending() if not args.serials or j.serial in args.serials]
    except DeviceError as e:
        raise UserError(str(e)) from None
    if not journals:
        print("nothing to restore" + (f" on {', '.join(args.serials)}" if args.serials else ""))
        return 0
    failed = 0
    for j in journals:
        cfg = _device_config(args, j.adb.get("host"), j.adb.get("port"))
        report = restore(cfg.open(j.serial), j)
        for r in report.restored:
            print(f"{j.serial}: {r['what']} restored to {r['value'] if r['value'] is not None else '(unset)'}")
        for r in report.failed:
            print(f"{j.serial}: {r['what']} NOT restored: {r['error']}", file=sys.stderr)
        failed += len(report.failed)
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
