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
from pathlib import Path
from typing import Callable

from harness import __version__
from harness.ports import StartError
from harness.tasks import TaskError, errors_of
from harness.user_error import UserError


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1080x2400, got {text!r}") from None
    return w, h


# --- tasks -------------------------------------------------------------------------------------
def cmd_tasks_list(args: argparse.Namespace) -> int:
    from harness.task_checks import load_checked_suite

    suite = load_checked_suite(args.suite)
    rows = [t.summary() for t in suite.tasks]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} tasks in {args.suite}")
    for col in ("id", "lang", "c", "cap", "safety", "categories", "milestones", "verified", "instruction"):
        table.add_column(col, overflow="fold")
    for r in rows:
        s = r["safety"]
        safety = s["label"] + (f" ({s['category']})" if s["category"] else "")
        table.add_row(r["id"], r["language"], str(r["reference_steps"]), str(r["cap"]), safety,
                      ",".join(r["categories"]), str(r["milestones"]), "yes" if r["verified"] else "no",
                      r["instruction"])
    Console().print(table)
    unverified = sum(1 for r in rows if not r["verified"])
    if unverified:
        Console(stderr=True).print(f"{unverified} task(s) are not verified on a device (verified: false): they were "
                                   "written without running them, so check their step counts and milestones first")
    return 0


def _sizes(text: str) -> list[tuple[int, int]]:
    return [_size(part.strip()) for part in text.split(",") if part.strip()]


def cmd_tasks_check(args: argparse.Namespace) -> int:
    """Static checks always; with devices or sizes, the do-nothing baseline and the references
    on simulated phones at every size. Exit 0 when everything holds, 1 when a trial fails."""
    from harness.run_command import split_list
    from harness.task_checks import load_checked_suite
    from harness.task_trials import TrialError, run_trials, size_name

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


# --- simulated phone ---------------------------------------------------------------------------
def cmd_sim_serve(args: argparse.Namespace) -> int:
    from harness.profile_folder import ProfileError
    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve

    profile = None
    if args.profile:
        from harness.sim.profile import load

        try:
            profile = load(args.profile)
        except ProfileError as e:
            raise UserError(f"--profile {e}") from None
        if args.size and profile.size() and tuple(args.size) != profile.size():
            raise UserError(f"--size {args.size[0]}x{args.size[1]}: the profile {profile.name} has a "
                            f"{profile.size()[0]}x{profile.size()[1]} screen (its `wm size`); leave --size out")
        if args.no_touchscreen and profile.input_devices() is not None:
            raise UserError(f"--no-touchscreen: the profile {profile.name} lists its input devices (its getevent)")
    w, h = args.size or (profile.size() if profile is not None and profile.size() else None) or (1080, 2400)
    try:
        phone = SimPhone(w, h, locale=args.lang, seed=args.seed, adbkeyboard=not args.no_adbkeyboard,
                         as_phone=args.as_phone, lock=args.lock, profile=profile)
    except (ValueError, ProfileError) as e:
        raise UserError(str(e)) from None
    phone.info.serial = phone.persona.serial_for(str(args.port))
    phone.info.touchscreen = not args.no_touchscreen
    phone.screencap_png_level = args.screencap_png_level
    phone.reset(locale=args.lang, seed=args.seed)
    if args.host not in ("127.0.0.1", "localhost", "::1"):  # said before the port opens
        print("warning: this ADB port accepts anyone who can reach it (ADB has no authentication here)",
              file=sys.stderr, flush=True)
    try:
        handle = serve(phone, args.port, host=args.host, mode=args.mode, command_log=args.command_log)
    except OSError as e:
        raise UserError(f"cannot serve on {args.host}:{args.port} or write {args.command_log}: {e}") from None
    looks = f"as a retail {phone.info.model}" if args.as_phone else "as the simulated phone"
    if profile is not None:
        looks += f", in the formats of the profile {profile.name} ({phone.info.model}, Android {phone.info.release})"
    print(f"simulated phone {w}x{h} ({args.lang}, {looks}, lock: {args.lock}) listening on {args.host}:{handle.port}; "
          f"connect with: adb connect {args.host}:{handle.port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    finally:
        handle.stop()
    return 0


# --- recording ---------------------------------------------------------------------------------


# --- runs --------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from harness.records import RecordError
    from harness.registry import RegistryError
    from harness.run_command import RunError, execute_run, print_summary, run_exit_code

    try:
        report = execute_run(args)
    except (RunError, RecordError, RegistryError) as e:
        raise UserError(str(e)) from None
    except OSError as e:  # the run folder cannot be written (full disk, permissions): one clear line
        raise UserError(f"{e}; the run can be continued with --resume once this is fixed") from None
    print_summary(args.out, report)
    return run_exit_code(report)


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


def cmd_agents_parse(args: argparse.Namespace) -> int:
    """Raw model outputs (one JSON string per line, or a JSON object with a "text" field, or an
    OpenAI assistant message with "content" and "tool_calls") -> the unified action per line in
    device pixels (a list when one output is two device actions), or {"error": ...}: for checking a
    model's output format against a family's parser."""
    import agents  # noqa: F401  (registers the families' parsers)
    from agents.parsing import PARSERS, read_reply, with_tool_calls
    from harness.registry import RegistryError, parse_options

    entry = PARSERS.get(args.agent)
    if entry is None:
        raise UserError(f"no output parser for agent {args.agent!r} (parsers: {', '.join(sorted(PARSERS))})")
    try:
        opts = parse_options(args.opt, "--opt")
    except RegistryError as e:
        raise UserError(str(e)) from None
    unknown = sorted(set(opts) - set(entry.options))
    if unknown:
        known = "; ".join(f"{k}: {v}" for k, v in entry.options.items())
        raise UserError(f"agent {args.agent!r} has no parse option {', '.join(unknown)} (options: {known})")
    if args.hierarchy:
        if "hierarchy_xml" not in entry.options:
            raise UserError(f"--hierarchy applies to m3a, not {args.agent!r}")
        try:
            with open(args.hierarchy, encoding="utf-8") as f:
                opts["hierarchy_xml"] = f.read()
        except OSError as e:
            raise UserError(f"{args.hierarchy}: {e.strerror}") from None
    try:
        src = open(args.file, encoding="utf-8") if args.file and args.file != "-" else sys.stdin
    except OSError as e:
        raise UserError(f"{args.file}: {e.strerror}") from None
    with src:
        for n, line in enumerate(src, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                print(json.dumps({"error": f"line {n} is not JSON ({e.msg}); give one JSON string per line"}))
                continue
            text = item.get("text", item.get("content")) if isinstance(item, dict) else item
            calls = item.get("tool_calls") if isinstance(item, dict) else None
            if calls:  # an OpenAI message whose tool calls the server parsed out of the text
                if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                    print(json.dumps({"error": f"line {n}: tool_calls must be a list of objects"}))
                    continue
                text = with_tool_calls(text if isinstance(text, str) else "", calls)
            if not isinstance(text, str):
                print(json.dumps({"error": f"line {n}: expected a JSON string or an object with a \"text\" string"}))
                continue
            try:
                parsed, error = read_reply(lambda t: entry.parse(t, args.size, **opts), text)
            except Exception as e:  # a parser bug must not stop the listing; say what it was
                print(json.dumps({"error": f"parser failure: {type(e).__name__}: {e}"}, ensure_ascii=False))
                continue
            if parsed is None:
                print(json.dumps({"error": str(error)}, ensure_ascii=False))
                continue
            if args.details:
                out = parsed.to_json()
            else:
                acts = parsed.to_json()["actions"]
                out = acts[0] if len(acts) == 1 else acts
            print(json.dumps(out, ensure_ascii=False), flush=True)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from harness.demo import run_demo

    return run_demo(args)


# --- reports -----------------------------------------------------------------------------------
def _write_or_print(text: str, out: str | None, what: str) -> None:
    if not out:
        sys.stdout.write(text)
        return
    from pathlib import Path

    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as e:
        raise UserError(f"{out}: {e.strerror}") from None
    print(f"{what} -> {out}")


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.tables import ReportError, build_report, render

    by = [k.strip() for v in (args.by or ["agent,suite"]) for k in v.split(",") if k.strip()]
    if args.judgements and args.no_judgements:
        raise UserError("--judgements and --no-judgements exclude each other")
    try:
        rep = build_report(args.runs, by, judge=args.judge, resamples=args.resamples, seed=args.seed,
                           judgements=args.judgements or None, offline=not args.no_judgements)
    except ReportError as e:
        raise UserError(str(e)) from None
    _write_or_print(render(rep, args.format), args.out, "report")
    return 0


def _profiles(values: list[str] | None) -> list[str]:
    from harness.report.static_eval import PROFILES

    names = [k.strip() for v in (values or ["all"]) for k in v.split(",") if k.strip()]
    if "all" in names:
        return list(PROFILES)
    bad = [n for n in names if n not in PROFILES]
    if bad:
        raise UserError(f"--profile: unknown profile(s) {', '.join(bad)} (choose from {', '.join(PROFILES)} or all)")
    return names


def _print_static(reports: list, args: argparse.Namespace) -> None:
    from harness.report.static_table import render

    fmt = "json" if args.json else (getattr(args, "format", None) or "md")
    out = getattr(args, "out_file", None)
    text = render(reports, fmt)
    _write_or_print(text if text.endswith("\n") else text + "\n", out, "static report")


def cmd_static_score(args: argparse.Namespace) -> int:
    from harness.importers.androidcontrol import DatasetError
    from harness.report.static_eval import StaticEvalError, score_files

    if not args.predictions and not args.ground_truth:
        raise UserError("static score: pass --predictions FILE (or --ground-truth to score the dataset against itself)")
    try:
        reports = score_files(args.dataset, None if args.ground_truth else args.predictions, _profiles(args.profile),
                              screen=args.screen)
    except (DatasetError, StaticEvalError) as e:
        raise UserError(str(e)) from None
    _print_static(reports, args)
    return 0


def cmd_static_run(args: argparse.Namespace) -> int:
    import agents  # noqa: F401  (registers agents)
    from harness.importers.androidcontrol import DatasetError
    from harness.registry import AGENTS, RegistryError, parse_options
    from harness.report.static_eval import StaticEvalError, score_files
    from harness.static_run import StaticRunError, check_screenshots, run_static
    from harness.importers.androidcontrol import load_dataset
    from harness.run_command import RunError
    from pathlib import Path

    profiles = _profiles(args.profile)
    try:
        episodes = load_dataset(args.dataset)  # refuse a dataset without screenshots before building the agent
        check_screenshots(episodes[: args.limit] if args.limit else episodes, Path(args.dataset),
                          Path(args.images) if args.images else None)
        opts = parse_options(args.agent_opt, "--agent-opt")
        try:
            from harness.run_command import model_configs, with_model
        except ImportError:  # pragma: no cover - older run_command without model endpoints
            pass
        else:
            opts = with_model(AGENTS, args.agent, opts, model_configs(args)["agent"], "--model-base-url URL --model NAME")
        agent = AGENTS.build(args.agent, opts)
        out = args.out or f"predictions-{args.agent}-{args.level}.jsonl"
        res = run_static(args.dataset, agent, out, level=args.level, images=args.images, limit=args.limit, seed=args.seed)
        print(f"{res.steps} steps -> {res.predictions} (history: {res.history_mode}; invalid outputs: {res.invalid}; "
              f"agent errors: {res.agent_errors})", file=sys.stderr)
        reports = score_files(args.dataset, res.predictions, profiles, screen=args.screen, limit=args.limit)
    except (DatasetError, StaticEvalError, StaticRunError, RegistryError, RunError) as e:
        raise UserError(str(e)) from None
    _print_static(reports, args)
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    from harness.report.serve import LOOPBACK, ViewServer
    from harness.report.viewer import write_pages

    if args.judgements and args.no_judgements:
        raise UserError("--judgements and --no-judgements exclude each other")
    thumbs = None
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
            raise UserError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
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
        raise UserError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None


# --- offline judging, agreement, importers ------------------------------------------------------
def cmd_judge(args: argparse.Namespace) -> int:
    from harness.judge_command import run_judge_command
    from harness.offline_judge import OfflineJudgeError
    from harness.records import RecordError
    from harness.registry import RegistryError

    try:
        report = run_judge_command(args, argv=sys.argv)
    except (OfflineJudgeError, RecordError, RegistryError) as e:
        raise UserError(str(e)) from None
    except OSError as e:  # a folder that cannot be written after all: one line, not a traceback
        raise UserError(f"{e.filename or 'judgements'}: {e.strerror or e}") from None
    return 130 if report.interrupted else 0


def cmd_judge_eval(args: argparse.Namespace) -> int:
    from judges.agreement import (AgreementError, ORACLE_JUDGES, evaluate, labels_from_oracle, load_labels,
                                  read_sources, render_table)

    if args.calibrate:
        from harness.calibrate_command import run_calibrate

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


def cmd_import_mobilerisk(args: argparse.Namespace) -> int:
    from harness.importers.mobilerisk import import_mobilerisk
    from harness.importers.trajectories import TrajectoryImportError

    try:
        report = import_mobilerisk(args.src, args.out, coords=args.coords, argv=sys.argv)
    except TrajectoryImportError as e:
        raise UserError(str(e)) from None
    _print_import(report)
    return 0


def cmd_import_trajectories(args: argparse.Namespace) -> int:
    from harness.importers.trajectories import TrajectoryImportError, import_trajectories

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


# --- parser ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description="Run GUI agents on Android over ADB and judge them while they run.")
    p.add_argument("--version", action="version", version=f"crate-harness {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

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

    sim = sub.add_parser("sim", help="the simulated phone").add_subparsers(dest="sim_cmd", required=True)
    ss = sim.add_parser("serve", help="serve a simulated phone as an ADB device (adb connect HOST:PORT)")
    ss.add_argument("--port", type=int, default=6520, help="TCP port (avoid odd ports 5555-5585: adb auto-adds those)")
    ss.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback only)")
    ss.add_argument("--lang", choices=["en", "zh"], default="en", help="UI language")
    ss.add_argument("--seed", type=int, default=0)
    ss.add_argument("--size", type=_size, default=None,
                    help="screen size WIDTHxHEIGHT (default 1080x2400, or the profile's)")
    ss.add_argument("--mode", choices=["normal", "unauthorized", "shell_v1_only"], default="normal",
                    help="test modes: an unauthorized device, or one without shell protocol v2")
    ss.add_argument("--no-adbkeyboard", action="store_true", help="do not offer the ADBKeyboard input method")
    ss.add_argument("--as-phone", action="store_true",
                    help="look like a retail phone (Pixel 8 props, no simulator markers, no `dumpsys crate_sim`, "
                         "no reset broadcast; ADBKeyboard installed but not enabled)")
    ss.add_argument("--lock", choices=["none", "swipe", "pin"], default="none",
                    help="lock screen: none, swipe, or pin (a secure lock; PIN 1234)")
    shipped = sorted(p.name for p in (Path(__file__).parent / "sim" / "profiles").glob("*") if p.is_dir())
    ss.add_argument("--profile", metavar="DIR|NAME",
                    help="answer in a real phone's formats: a folder `harness devices capture` wrote, or a shipped "
                         f"profile ({', '.join(shipped)}: harness/sim/profiles); its screen size, input devices "
                         "and input methods too")
    ss.add_argument("--command-log", metavar="FILE",
                    help="append every shell command line received to FILE as one JSON line")
    ss.add_argument("--no-touchscreen", action="store_true", help="no touchscreen among its input devices (getevent)")
    ss.add_argument("--screencap-png-level", type=int, choices=range(10), default=1, metavar="0-9",
                    help="zlib level of `screencap -p` (default 1, fast; 6 costs it as a phone's screencap, "
                         "which uses Skia's default level)")
    ss.set_defaults(run=cmd_sim_serve)

    from harness.record_command import add_record_parser, add_sim_human_parser

    add_sim_human_parser(sim)

    add_record_parser(sub)

    from harness.run_command import add_run_arguments

    run = sub.add_parser("run", help="run an agent on a suite over one or more devices and judge it")
    add_run_arguments(run)
    run.set_defaults(run=cmd_run)

    from harness.devices_command import add_adb_parser, add_devices_parser

    add_devices_parser(sub)
    add_adb_parser(sub)
    from harness.guard.command import add_arguments as add_guard_parser

    add_guard_parser(sub)

    ag = sub.add_parser("agents", help="list agents and their options (or: agents parse)")
    ag.add_argument("--json", action="store_true")
    ag.set_defaults(run=cmd_agents)
    ag_sub = ag.add_subparsers(dest="agents_cmd", required=False)
    ap = ag_sub.add_parser("parse", help="parse raw model outputs (one JSON string per line) into unified actions")
    ap.add_argument("file", nargs="?", help="file of outputs (default stdin)")
    ap.add_argument("--agent", required=True, help="uitars, uitars-v1, doubao, m3a, qwen or vlm")
    ap.add_argument("--size", type=_size, required=True, help="device screen WIDTHxHEIGHT, e.g. 1080x2400")
    ap.add_argument("--opt", action="append", metavar="KEY=VALUE",
                    help="parser option, e.g. coords=thousand, version=3 (repeatable)")
    ap.add_argument("--hierarchy", help="m3a: the uiautomator dump (XML) the element indexes refer to")
    ap.add_argument("--details", action="store_true", help="print the raw action, thought and repair notes too")
    ap.set_defaults(run=cmd_agents_parse)

    from harness.model import key_rule_text

    demo = sub.add_parser("demo", help="the main job on simulated phones: replay (some perturbed, some unsafe), oracle judge, table")
    demo.add_argument("--out", default=None, help="run folder (default runs/demo-<time>)")
    demo.add_argument("--phones", type=int, default=2, help="simulated phones in parallel")
    demo.add_argument("--seed", type=int, default=3)
    demo.add_argument("--judge-base-url", help="with --judge-model: also judge the clean slice online (crate, crate-s, "
                                               "the crate-s gate) on this OpenAI-compatible endpoint; API keys for "
                                               f"it and --model-base-url: {key_rule_text()}")
    demo.add_argument("--judge-model", help="judge model name as the server knows it")
    demo.add_argument("--model-base-url", help="with --model: a model agent plays the judged (or an extra) run")
    demo.add_argument("--model", dest="model_name", help="agent model name as the server knows it")
    demo.add_argument("--agent", default="uitars", help="model agent family for --model-base-url (default uitars)")
    demo.set_defaults(run=cmd_demo)

    rp = sub.add_parser("report", help="tables of one or more runs: SR with 95%% CI per judge, ATP/MSR, safety, cost")
    rp.add_argument("runs", nargs="+", metavar="RUN", help="run folders")
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

    st = sub.add_parser("static", help="static evaluation of predicted actions (AndroidControl JSONL)").add_subparsers(
        dest="static_cmd", required=True)
    sc = st.add_parser("score", help="score predictions against ground-truth episodes")
    sc.add_argument("--dataset", required=True, help="AndroidControl-shaped JSONL (e.g. androidcontrol_test_300.jsonl)")
    sc.add_argument("--predictions", help='JSONL: {"episode": i, "step": j, "action": {...}} per line')
    sc.add_argument("--ground-truth", action="store_true", help="score the dataset's own actions (sanity check)")
    sc.add_argument("--profile", action="append",
                    help="a profile (aitw, androidcontrol, guiodyssey, androidlens, uis1-pipeline, infigui-r1, "
                         "agentcpm-gui, os-atlas, ui-r1; comma-separated or repeated) or all (default all)")
    sc.add_argument("--screen", type=_size, default=(1080, 2400), help="screen size when the dataset has none (default 1080x2400)")
    sc.add_argument("--format", choices=["md", "json", "html"], default="md",
                    help="md (printed table), json, or html (a standalone page)")
    sc.add_argument("--out", dest="out_file", help="write to this file instead of printing")
    sc.add_argument("--json", action="store_true", help="print JSON (same as --format json)")
    sc.set_defaults(run=cmd_static_score)
    sr = st.add_parser("run", help="ask an agent for every step (ground-truth history), then score")
    sr.add_argument("--dataset", required=True, help="AndroidControl-shaped JSONL whose screenshots exist")
    sr.add_argument("--agent", required=True, help="agent name (see `harness agents`)")
    sr.add_argument("--agent-opt", action="append", metavar="KEY=VALUE", help="agent option (repeatable)")
    sr.add_argument("--level", choices=["high", "low"], default="high", help="goal only, or goal + the step's instruction")
    sr.add_argument("--images", help="folder holding the screenshots (by dataset path or by file name)")
    sr.add_argument("--limit", type=int, help="only the first N episodes")
    sr.add_argument("--out", help="predictions file (default predictions-AGENT-LEVEL.jsonl)")
    sr.add_argument("--profile", action="append", help="profiles to score with (default all)")
    sr.add_argument("--screen", type=_size, default=(1080, 2400), help="screen size when neither dataset nor image gives one")
    sr.add_argument("--seed", type=int, default=0)
    sr.add_argument("--format", choices=["md", "json", "html"], default="md",
                    help="the scores as md (printed table), json, or html (a standalone page)")
    sr.add_argument("--json", action="store_true", help="print JSON (same as --format json)")
    try:
        from harness.run_command import add_model_arguments
    except ImportError:  # pragma: no cover - older run_command without model endpoints
        pass
    else:
        add_model_arguments(sr)
    sr.set_defaults(run=cmd_static_run)

    vw = sub.add_parser("view", help="write RUN/report.html (trajectory viewer) and serve it on localhost")
    vw.add_argument("run_dir", metavar="RUN", help="run folder")
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

    from harness.judge_command import add_judge_arguments

    jd = sub.add_parser("judge", help="judge recorded episodes after the fact (resumable, cached, with a cost summary)")
    add_judge_arguments(jd)
    jd.set_defaults(run=cmd_judge)
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
    return p


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    """SIGTERM (what job schedulers and `kill` send) stops the command as Ctrl-C does: a resumable
    run, exit 130, the manifest marked interrupted."""
    raise KeyboardInterrupt("SIGTERM")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    previous = None
    if threading.current_thread() is threading.main_thread():  # commands that serve set their own handler
        previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        return run(args)
    except TaskError as e:
        for line in errors_of(e):  # one line per defect: FILE: task 'ID': FIELD: problem
            print(f"harness: error: {line}", file=sys.stderr)
        return 2
    except UserError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return 2
    except StartError as e:  # a server of our own (adb's, a simulated phone) could not start: what was tried, what to do
        print(f"harness: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
