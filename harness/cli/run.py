"""``harness run``: the run executed from its parts (:mod:`harness.cli.run_parts`): the suite
checked, the devices found, held and prepared, the manifest written (or checked on ``--resume``),
and the suite run over the stations with live progress; its exit code, and the table it prints
at the end (:func:`print_summary`)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from harness.cli.run_operator import OperatorSetupError, asks_operator, handover_operator
from harness.cli.run_checks import run_plan
from harness.cli.run_parts import (add_run_arguments, agent_label, build_plugins, device_config, make_operator,
                                   model_configs, prepare_config, split_list, watching)
from harness.client.structured import structured_counts, structured_report
from harness.core.registry import RegistryError
from harness.core.usage import role_tokens_sum
from harness.core.user_error import UserError
from harness.core.verdicts import judge_errors
from harness.device.config import DeviceConfig
from harness.device.phone_lock import release_all
from harness.device.safeguards import ClearRefused, refuse_clear
from harness.preflight import preflight
from harness.preflight.plan import check_described
from harness.records import UNSCORED_STATUSES, RecordError, RunWriter, build_environment_info, now_iso
from harness.report.errors import summary_line as unsafe_summary_line
from harness.report.handovers import summary_line as handover_line
from harness.run.options import RunError
from harness.run.repeats import check_resume_repeats, plan_episodes
from harness.run.suite import (ERROR_STATUSES, LiveProgress, LocalStation, Plugins, SuiteConfig, SuiteReport,
                               describe_progress, run_stations)
from harness.run.task_checks import load_checked_suite


def calibrations(monitors: Any) -> list[str | None]:
    """The sha256 of each monitor's calibration file in a manifest's ``monitors`` (None: none)."""
    return [((m or {}).get("calibration") or {}).get("sha256") for m in monitors or [] if isinstance(m, dict)]


def suite_changes(old: dict[str, Any], new: dict[str, str]) -> dict[str, list[str]]:
    """Task files that differ between the manifest's ``suite.files`` (path -> sha256) and the suite
    as loaded now: ``changed`` (other hash), ``added``, ``removed``; empty when none. Paths are
    compared as absolute paths, so ``tasks/x.yaml`` and ``./tasks/x.yaml`` are one file."""
    def norm(files: dict[str, Any]) -> dict[str, tuple[str, Any]]:
        return {os.path.normpath(os.path.abspath(k)): (k, v) for k, v in files.items()}

    a, b = norm(old), norm(new)
    out = {"changed": sorted(b[k][0] for k in a.keys() & b.keys() if a[k][1] != b[k][1]),
           "added": sorted(b[k][0] for k in b.keys() - a.keys()),
           "removed": sorted(a[k][0] for k in a.keys() - b.keys())}
    return {k: v for k, v in out.items() if v}


def describe_suite_changes(change: dict[str, list[str]]) -> str:
    return "; ".join(f"{kind}: {', '.join(files)}" for kind, files in change.items())


def execute_run(args: argparse.Namespace, stop: threading.Event | None = None, argv: list[str] | None = None) -> SuiteReport:
    if getattr(args, "accept_changed_suite", False) and not args.resume:
        raise RunError("--accept-changed-suite only applies with --resume")
    suite = load_checked_suite(args.suite)
    tasks = suite.select(split_list(args.tasks) or None)
    repeats = getattr(args, "repeats", 1)
    plan_episodes([], repeats, args.seed)  # a bad --repeats fails before any device is touched
    if args.max_steps is not None and args.max_steps < 1:
        raise RunError("--max-steps must be >= 1")
    prep = prepare_config(args)  # a bad --size or --density fails before any device is touched
    try:
        built = build_plugins(args)
    except RegistryError as e:
        raise RunError(str(e)) from None
    plugins, specs = built.plugins, built.specs
    try:
        plugins.operator = make_operator(args) if asks_operator(specs) else handover_operator(args)
    except OperatorSetupError as e:
        raise RunError(str(e)) from None
    unfit = [problem for t in tasks if (problem := plugins.check_task(t))]
    if unfit:
        more = f" (and {len(unfit) - 5} more)" if len(unfit) > 5 else ""
        raise RunError(f"cannot run {len(unfit)} task(s): {'; '.join(unfit[:5])}{more}")
    cfg = device_config(args)
    # every check before any device is prepared, reset or locked: endpoints, devices, folder, port
    cluster = bool(getattr(args, "cluster", None))
    plan = run_plan(args, cfg, tasks, built, prep, devices=not cluster)
    passed = preflight(plan)  # (a farm's phones are checked as their nodes find them: check_described)
    if not args.quiet:
        phones = "the cluster's phones are checked on their nodes" if cluster else f"{len(passed.devices)} device(s) ready"
        answer = f"{len(built.endpoints)} model endpoint(s) answer, " if built.endpoints else ""
        print(f"preflight: {answer}{phones}, "
              f"run folder {args.out} {'to continue' if args.resume else 'free'} ({passed.wall_s:.2f} s; "
              "`harness preflight` with these flags says more)", file=sys.stderr, flush=True)
    for note in passed.notes:
        print(note if note.startswith("skipped ") else f"note: {note}", file=sys.stderr, flush=True)
    farm = open_cluster(args, cfg, plugins, check=lambda found: check_described(plan, found)) if cluster else None
    if farm is not None:
        devices, stations, descriptions = [], list(farm.stations), farm.descriptions
    else:
        devices, descriptions = passed.devices, passed.descriptions
        stations = [LocalStation(d, plugins) for d in devices]
    locks = hold_phones(devices, quiet=args.quiet)  # one run per phone, until its settings are back
    try:
        try:
            refuse_clear(tasks, {d["serial"]: d["kind"] for d in descriptions}, cfg.allow_clear)
        except ClearRefused as e:
            raise RunError(str(e)) from None
        unavailable = passed.unavailable  # (a farm's phones meet it at reset: task_error)
        runnable = [t for t in tasks if t.id not in unavailable]
        writer = RunWriter(args.out, resume=args.resume)
    except BaseException:
        release_all(locks)
        if farm is not None:
            farm.close()
        raise
    try:
        manifest = {
            "kind": "crate-harness run",
            "command": argv if argv is not None else sys.argv,
            "environment": build_environment_info(),
            "agent": {"name": args.agent, "label": agent_label(args), **specs["agent"]},
            "judges": specs["judges"],
            "monitors": specs["monitors"],
            "seed": args.seed,
            "max_steps": args.max_steps,
            "suite": {"path": str(args.suite), "files": {p: h for p, h in suite.files.items()}},
            "tasks": [t.id for t in tasks],
            **({"repeats": repeats} if repeats > 1 else {}),
            "unavailable": [{"task": tid, "reason": why} for tid, why in unavailable.items()],
            "devices": descriptions,
            "device_config": cfg.to_json(),
            **({"cluster": farm.manifest()} if farm is not None else {}),
        }
        if plugins.operator is not None:
            manifest["operator"] = plugins.operator.spec()
        if args.resume and writer.manifest:
            old = writer.manifest
            for key in ("agent", "seed", "max_steps", "tasks", "judges"):
                was, now = old.get(key), manifest[key]
                if key == "agent":
                    was, now = (was or {}).get("label"), now["label"]
                if was != now:
                    raise RunError(f"--resume: {key} differs from the run in {args.out} (was {was!r}, now {now!r}); "
                                   "resume with the same command")
            check_resume_repeats(old, repeats, args.out)
            was, now = (calibrations(old.get("monitors")), calibrations(manifest["monitors"]))
            if was != now and any(was + now):  # episodes gated by two thresholds would be one run
                raise RunError(f"--resume: the monitors' calibration differs from the run in {args.out} (sha256 was "
                               f"{was}, now {now}); resume with the same calibration file")
            update: dict[str, Any] = {"resumed": (old.get("resumed", 0) or 0) + 1, "devices": descriptions,
                                      "unavailable": manifest["unavailable"],
                                      **({"cluster": manifest["cluster"]} if farm is not None else {})}
            change = suite_changes((old.get("suite") or {}).get("files") or {}, manifest["suite"]["files"])
            if change:
                if not args.accept_changed_suite:
                    raise RunError(f"--resume: the suite changed since the run in {args.out} started: "
                                   f"{describe_suite_changes(change)}; episodes already recorded ran the old tasks. "
                                   "Resume with the files as they were, or pass --accept-changed-suite to continue "
                                   "with the new ones (their hashes are then recorded)")
                update["suite"] = manifest["suite"]
                update["suite_changes"] = [*(old.get("suite_changes") or []),
                                           {"at": now_iso(), "completed_before": len(writer.completed()), **change}]
            writer.update_manifest(**update)
        else:
            writer.write_manifest(manifest)
        if farm is not None:  # a node that joins mid-run: its phones go into the manifest as they join
            def joined() -> None:
                writer.update_manifest(devices=farm.descriptions, cluster=farm.manifest())
                _choose_frames(farm.frame_choices(), writer, True)

            farm.on_change = joined
        joining = farm.joining if farm is not None else None
        suite_cfg = SuiteConfig(agent_name=agent_label(args), seed=args.seed, max_steps=args.max_steps,
                                reconnect_timeout=cfg.reconnect_timeout, on_reset=_reset_recorder(writer))
        terminal = plugins.operator.terminal if plugins.operator is not None else None
        episodes = plan_episodes(runnable, repeats, args.seed)
        modes_before = structured_counts()
        with _PreparedDevices(args, devices, writer, farm), watching(args):
            _choose_frames(farm.frame_choices() if farm is not None else {d.serial: d.frame_choice for d in devices},
                           writer, args.quiet)
            if not args.quiet and sys.stderr.isatty():
                with LiveProgress([s.name for s in stations], len(episodes)) as live:
                    if terminal is not None:
                        terminal.pause = live.paused  # a question stops the panel's redrawing
                    report = run_stations(episodes, stations, writer, suite_cfg, progress=live, stop=stop,
                                          joining=joining)
            else:
                progress = None if args.quiet else describe_progress()
                report = run_stations(episodes, stations, writer, suite_cfg, progress=progress, stop=stop,
                                      joining=joining)
        # what structured output each endpoint and model used (the calls of this process: a farm
        # node's judges are not seen here), added to what earlier invocations of the run used
        ended = {"structured_output": merge_structured(writer.manifest.get("structured_output"),
                                                       structured_report(since=modes_before))}
        if report.abandoned:
            ended["abandoned_stations"] = report.abandoned
        if report.error:
            try:  # best effort: the disk may be the thing that failed
                writer.update_manifest(last_wall_s=report.wall_s, interrupted=True, error=report.error,
                                       not_run=report.not_run, dead_devices=report.dead_devices, **ended)
            except (OSError, RecordError):
                pass
            raise RunError(f"the run stopped: {report.error}; {len(report.not_run)} task(s) not finished; "
                           f"fix the cause and continue with --resume --out {args.out}")
        writer.update_manifest(last_wall_s=report.wall_s, interrupted=report.interrupted,
                               not_run=report.not_run, dead_devices=report.dead_devices, **ended)
        return report
    finally:
        writer.close()
        release_all(locks)
        if farm is not None:
            farm.close()


def merge_structured(old: Any, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries of :func:`harness.client.structured.structured_report`, one per endpoint and model: the calls
    of each mode added up, the refusals kept (an earlier invocation's entry that is not a list of
    such entries is dropped)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for e in [*(old if isinstance(old, list) else []), *new]:
        if not isinstance(e, dict) or not isinstance(e.get("used"), dict):
            continue
        row = rows.setdefault((str(e.get("base_url")), str(e.get("model"))),
                              {"base_url": e.get("base_url"), "model": e.get("model"), "used": {}, "refused": {}})
        for mode, n in e["used"].items():
            row["used"][mode] = row["used"].get(mode, 0) + (n if isinstance(n, int) else 0)
        row["refused"].update(e.get("refused") if isinstance(e.get("refused"), dict) else {})
    return list(rows.values())


def hold_phones(devices: list[Any], quiet: bool = False) -> list[Any]:
    """This host's lock of each device (harness.device.phone_lock), or a RunError naming the
    command that holds one; a lock taken over from a command that died holding it is said."""
    from harness.device.phone_lock import PhoneBusy, hold_devices

    try:
        locks = hold_devices(devices)
    except PhoneBusy as e:
        raise RunError(str(e)) from None
    for lock in locks:
        if lock.note and not quiet:
            print(f"note: {lock.note}", file=sys.stderr, flush=True)
    return locks


def open_cluster(args: argparse.Namespace, cfg: DeviceConfig, plugins: Plugins, check: Any = None) -> Any:
    """``--cluster ADDRESS``: the Ray farm's phones as the run's stations (``harness.farm``)."""
    import dataclasses

    from harness.farm import FarmError, open_farm

    # each node asks its own adb server: only what the user gave goes with the config, the rest is
    # resolved on the node (its ANDROID_ADB_SERVER_PORT), not here
    node_cfg = dataclasses.replace(cfg, adb_host=args.adb_host, adb_port=args.adb_port)
    say = lambda text: print(f"farm: {text}", file=sys.stderr, flush=True)  # noqa: E731
    from harness.device.phone_lock import command_line

    try:  # each phone is prepared, journaled and held by its actor on its node, and put back at the end
        farm = open_farm(args.cluster, node_cfg, plugins, models=model_configs(args),
                         select=split_list(args.device) + split_list(args.devices), say=say,
                         prepare=prepare_config(args), holder=f"{command_line()} (pid {os.getpid()})", check=check)
    except FarmError as e:
        raise RunError(str(e)) from None
    return farm


def _choose_frames(choices: dict[str, Callable[[], dict[str, Any]]], writer: RunWriter, quiet: bool) -> None:
    """Each phone's frame sources measured on its idle screen (harness.device.frame_sources), by the
    name the run knows it by (its serial; ``node/serial`` on a farm, whose actors measured them on
    their nodes), recorded in the manifest's ``frames``. A phone that fails here is noted, not
    refused: its episodes meet the failure (infra_error, retried elsewhere) as before."""
    from harness.device.base import DeviceError, InfraError

    frames = dict(writer.manifest.get("frames") or {})
    for name, choose in choices.items():
        try:
            rep = choose()
        except (InfraError, DeviceError) as e:
            rep = {"error": str(e)}
        frames[name] = rep
        if not quiet and "chosen" in rep:
            costs = ", ".join(f"{k} {v:.0f} ms" for k, v in sorted(rep["per_step_ms"].items(), key=lambda kv: kv[1]))
            print(f"{name}: settling on {rep['chosen']} frames (estimated per step: {costs})",
                  file=sys.stderr, flush=True)
    writer.update_manifest(frames=frames)


def _reset_recorder(writer: RunWriter) -> Any:
    """What each episode's reset did, appended to the manifest's ``resets`` (kept across resumes)."""
    lock = threading.Lock()
    resets = list(writer.manifest.get("resets") or [])

    def record(entry: dict[str, Any]) -> None:
        with lock:
            resets.append({k: v for k, v in entry.items() if v not in (None, [], False) or k == "complete"})
            writer.update_manifest(resets=list(resets))
    return record


class _PreparedDevices:
    """Prepare the run's devices (unless --no-prepare) and restore them at the end, whatever ends
    the run; both go into the manifest's ``device_sessions`` (one entry per invocation). A farm's
    phones are prepared and restored by their actors on their nodes: their entries are added by
    ``node/serial``."""

    def __init__(self, args: argparse.Namespace, devices: list[Any], writer: RunWriter, farm: Any = None):
        from harness.device.prepare import DeviceSession

        self.writer = writer
        self.quiet = args.quiet
        self.farm = farm
        self.earlier = list(writer.manifest.get("device_sessions") or [])
        self.session = DeviceSession(devices, prepare_config(args),
                                     owner={"pid": os.getpid(), "run": str(Path(args.out).resolve())},
                                     on_prepared=lambda s: self._prepared())
        self.farm_restored: dict[str, dict[str, Any]] = {}

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def _prepared(self) -> None:
        from harness.device.prepare import describe_prepare, describe_waiting

        self._record()
        entries = dict(self.session.prepared)
        if self.farm is not None:
            entries.update(self.farm.sessions())
        for serial, entry in entries.items():
            if entry.get("inherited"):
                values = "; ".join(describe_waiting({"what": _change_what(c), "value": c.get("before")})
                                   for c in entry["inherited"])
                self._say(f"{serial}: {len(entry['inherited'])} value(s) an earlier run changed and never put back "
                          f"({values}) will be restored to the owner's originals when this run ends")
            prep = entry.get("prepare")
            if prep is None:
                continue
            changed = describe_prepare(prep) or "nothing needed changing"
            self._say(f"{serial} ({prep['kind']}): prepared: {changed}; the originals are put back when the run ends")
            for note in prep["notes"]:
                self._say(f"{serial}: note: {note}")

    def _entry(self) -> dict[str, Any]:
        entry = self.session.entry()
        if self.farm is not None:
            for name, e in self.farm.sessions().items():
                entry["devices"][name] = {**e, "restore": self.farm_restored.get(name)}
        return entry

    def _record(self) -> None:
        try:
            self.writer.update_manifest(device_sessions=[*self.earlier, self._entry()])
        except (OSError, RecordError):
            pass  # the disk may be what failed; the journals still hold the originals

    def __enter__(self) -> Any:
        from harness.device.base import DeviceError, InfraError
        from harness.device.prepare import PrepareRefused

        try:
            return self.session.__enter__()
        except PrepareRefused as e:
            self._record()
            raise RunError(str(e)) from None
        except (DeviceError, InfraError) as e:
            self._record()
            raise RunError(f"preparing the devices failed: {e}; whatever was changed has been put back "
                           "(or is recorded for `harness devices restore`)") from None
        except BaseException:
            self._record()
            raise

    def __exit__(self, *exc: Any) -> None:
        from harness.device.prepare import shown_value

        self.session.__exit__(*exc)
        restored = dict(self.session.restored)
        if self.farm is not None:
            self.farm_restored = self.farm.restore()
            restored.update(self.farm_restored)
        self._record()
        for serial, r in restored.items():
            if r["restored"]:
                self._say(f"{serial}: put back {len(r['restored'])} value(s): "
                          + ", ".join(f"{x['what']}={shown_value(x['what'], x['value'])}" for x in r["restored"]))
        for serial, r in restored.items():
            if r.get("failed"):
                what = ", ".join(f["what"] for f in r["failed"])
                why = "; ".join(dict.fromkeys(f.get("error", "") for f in r["failed"]))
                print(f"warning: {serial}: could not put back {what} ({why}); run `harness devices restore "
                      f"{serial.rpartition('/')[2]}` {'on its node ' if '/' in serial else ''}when the device is "
                      "reachable", file=sys.stderr, flush=True)


def _change_what(c: dict[str, Any]) -> str:
    """A journal entry's ``Change.describe()``, from its JSON."""
    from harness.device.prepare import Change

    return Change.from_json(c).describe()


EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT
EXIT_UNFINISHED = 3     # every device dropped out with tasks left unrun
EXIT_MODEL_FAILED = 4   # every episode of this invocation ended model_error: nothing was measured


def run_exit_code(report: SuiteReport) -> int:
    """0 when every task ran (whatever the agents did), 130 when interrupted, 3 when tasks were
    left unrun because no healthy device remained (``--resume`` continues both), 4 when every
    episode run ended ``model_error`` (the agent's endpoint failed them all)."""
    if report.interrupted:
        return EXIT_INTERRUPTED
    if report.not_run:
        return EXIT_UNFINISHED
    if report.results and all(r.status == "model_error" for r in report.results):
        return EXIT_MODEL_FAILED
    return 0


def print_summary(out: str, report: SuiteReport, file: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from harness.records import read_results
    from harness.core.verdicts import blocked_before_running, episode_unsafe, is_safety_judge

    console = Console(file=file or sys.stdout, width=140)
    rows = read_results(out)
    table = Table(title=f"{len(rows)} episodes in {out}")
    judges = sorted({k for r in rows for k in r.verdicts})
    by_device = len({r.device for r in rows}) > 1  # a run over several phones says which played what
    for col in ("task", *(["device"] if by_device else []), "agent", "status", "steps/cap", *judges, "halt/error"):
        table.add_column(col, overflow="fold")
    for r in sorted(rows, key=lambda r: r.task_id):
        note = ""
        if r.halt:
            note = f"halted at step {r.halt.step}: {r.halt.category}"  # the reason is printed in full below
        elif r.error:
            note = r.error[:60] + ("... (below)" if len(r.error) > 60 else "")
        table.add_row(escape(r.task_id), *([escape(r.device or "-")] if by_device else []), escape(r.agent), r.status,
                      f"{r.steps}/{r.cap}", *[str(r.verdicts.get(j, "-")) for j in judges],
                      escape(note))  # model text is not markup
    console.print(table)
    for r in sorted((r for r in rows if r.error and r.status in ERROR_STATUSES and len(r.error) > 60),
                    key=lambda r: r.task_id):
        console.print(f"{r.status}: {r.task_id}: {' '.join(r.error.split())}", markup=False, highlight=False)
    for r in sorted((r for r in rows if r.halt is not None), key=lambda r: r.task_id):
        ran = (r.halt.model_extra or {}).get("executed")
        when = " (blocked before it ran)" if ran is False else " (after it ran)" if ran else ""
        op = (r.halt.model_extra or {}).get("operator")
        who = f"; the operator was asked: {op.get('decision')} by {op.get('by')}" if isinstance(op, dict) else ""
        if isinstance(told := (r.halt.model_extra or {}).get("after_reflections"), int):
            who += f"; proposed again after {told} reflection(s)"
        console.print(f"halted: {r.task_id} at step {r.halt.step}{when} by {r.halt.monitor or 'a monitor'}: "
                      f"{r.halt.category}: {r.halt.reason}{who}", markup=False, highlight=False)
    for task_id, judge, why in judge_errors(rows):
        console.print(f"[red]{escape(judge)}[/red] judge_error on {escape(task_id)}: {escape(why)}", highlight=False)
    used = [r.usage for r in rows if isinstance(r.usage, dict) and r.usage.get("calls")]
    if used:
        parts = [(name, role_tokens_sum(used, roles, exclude)) for name, roles, exclude in
                 (("agent", ("agent",), ()), ("judges", None, ("agent", "monitor:")), ("monitors", ("monitor:",), ()))]
        failed_calls = sum(u.get("failed", 0) for u in used)
        shown = [f"{name} {n:,}" for name, n in parts if n] + ([f"{failed_calls} failed"] if failed_calls else [])
        console.print(f"model usage: {sum(u.get('total_tokens', 0) for u in used):,} tokens in "
                      f"{sum(u.get('calls', 0) for u in used)} calls" + (f" ({', '.join(shown)})" if shown else ""))
    checks = [r.model_extra.get("monitor_checks") or {} for r in rows if r.model_extra]
    made = sum(c.get("made", 0) for c in checks)
    if made:
        failed, unchecked = sum(c.get("failed", 0) for c in checks), sum(c.get("ran_unchecked", 0) for c in checks)
        line = f"monitor checks: {made}, flagged: {sum(c.get('flagged', 0) for c in checks)}, failed: {failed}"
        if unchecked:
            line += f"; [yellow]{unchecked} action(s) ran unchecked (--monitor-on-error allow)[/yellow]"
        console.print(line)
    asked = [a for r in rows if r.model_extra and isinstance(a := r.model_extra.get("operator"), dict)]
    if asked:
        n = {k: sum(int(a.get(k) or 0) for a in asked) for k in ("asked", "allowed", "denied", "timed_out")}
        console.print(f"operator: asked {n['asked']}, allowed {n['allowed']}, denied {n['denied']} "
                      f"({n['timed_out']} with no answer in time), waited {sum(float(a.get('wait_s') or 0) for a in asked):.1f} s")
    if any(r.model_extra and r.model_extra.get("reflections") for r in rows):  # counted as `harness report` counts them
        from harness.report.episodes import load_episodes
        from harness.report.tables import reflection_counts

        scored_eps = [e for e in load_episodes([out], offline=False) if e.status not in UNSCORED_STATUSES]
        c = reflection_counts(scored_eps, [j for j in judges if is_safety_judge(j)])
        console.print(f"reflections: {c['reflections']} in {c['reflected_episodes']} episode(s) (told why, the agent "
                      "proposed again)" + (f"; unsafe tasks finished safely after one: {c['unsafe_safe_after_reflection']}"
                                           f"/{c['reflected_unsafe_judged']}" if c["reflected_unsafe_judged"] else ""))
    if line := handover_line(rows):  # apart from failures: the agent asked for a person
        console.print(line, markup=False, highlight=False)
    ok = sum(1 for r in rows if r.verdicts.get("oracle") is True and r.status != "needs_user")
    scored = [r for r in rows if r.status not in UNSCORED_STATUSES and r.verdicts.get("oracle") in (True, False)]
    infra = sum(1 for r in rows if r.status == "infra_error")
    task_errors = sum(1 for r in rows if r.status == "task_error")
    model_errors = sum(1 for r in rows if r.status == "model_error")
    if scored:
        console.print(f"oracle success: {ok}/{len(scored)} scored episodes ({infra} infra errors"
                      + (f", {task_errors} task errors" if task_errors else "")
                      + (f", {model_errors} model errors" if model_errors else "") + " excluded)")
    safety = [j for j in judges if is_safety_judge(j)]
    blocked = sum(1 for r in rows if r.status not in UNSCORED_STATUSES and blocked_before_running(r.halt))
    if safety:  # counted as `harness report` counts them (harness.report.errors), unscored episodes left out
        kept = [r for r in rows if r.status not in UNSCORED_STATUSES]
        flagged = sum(1 for r in kept if episode_unsafe(r.verdicts, r.judge_details, safety))
        console.print(unsafe_summary_line([(r.verdicts, r.judge_details) for r in kept], safety, flagged),
                      markup=False, highlight=False)
    if model_errors:
        every = " every episode" if model_errors == len(rows) else f" {model_errors} episode(s)"
        console.print(f"[red]the agent's model failed:{every} ended model_error[/red] (the endpoint's reasons are "
                      "above; left out of every rate, nothing of the agent's was measured there; once the endpoint "
                      "answers, run those tasks again into a new --out)", highlight=False)
    if blocked:  # the rule for blocked actions: an action that never ran does not make its episode unsafe
        console.print(f"blocked before they ran: {blocked} episode(s) halted by a gate (not counted unsafe for it)")
    if report.not_run:
        console.print(f"[yellow]not run: {len(report.not_run)} task(s); continue with --resume[/yellow]")
    from harness.records import read_manifest

    try:
        unavailable = read_manifest(out).get("unavailable") or []
    except (OSError, RecordError):
        unavailable = []
    if unavailable:
        console.print(f"[yellow]skipped, not runnable on these devices: {len(unavailable)} task(s)[/yellow] "
                      f"({escape(', '.join(u['task'] for u in unavailable))}; the reasons are above and in the manifest's "
                      "`unavailable`)", highlight=False)
    console.print(f"records: {Path(out).resolve()}")


def cmd_run(args: argparse.Namespace) -> int:
    try:
        report = execute_run(args)
    except (RunError, RecordError, RegistryError) as e:
        raise UserError(str(e)) from None
    except OSError as e:  # the run folder cannot be written (full disk, permissions): one clear line
        raise UserError(f"{e}; the run can be continued with --resume once this is fixed") from None
    print_summary(args.out, report)
    return run_exit_code(report)


def add_parser(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run an agent on a suite over one or more devices and judge it")
    add_run_arguments(run)
    run.set_defaults(run=cmd_run)
