"""``harness record`` and ``harness sim human`` on the command line: recording a task from a
person's touches, performing a task's reference (or given actions) as raw touches
(harness/recorder/), and taking a phone an agent handed over and handing it back (harness/live/handover)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

from harness.core.user_error import UserError


def add_record_parser(sub: argparse._SubParsersAction) -> None:
    rc = sub.add_parser("record", help="record a task from a person doing it on the phone: reference, c, draft milestones")
    rc.add_argument("--device", required=True, help="serial of the phone")
    rc.add_argument("--id", required=True, help="task id ([A-Za-z0-9][A-Za-z0-9_.-]*)")
    rc.add_argument("--instruction", help="the task's instruction (required unless --from)")
    rc.add_argument("--from", dest="from_suite", metavar="SUITE",
                    help="re-record the task with this id from SUITE: its instruction, setup, success check and safety are kept")
    rc.add_argument("--language", choices=["en", "zh"], help="the instruction's language (default en, or the --from task's)")
    rc.add_argument("--app", action="append", metavar="PACKAGE", help="a package the task touches (default: the apps visited)")
    rc.add_argument("--answer", help="for an information query: the answer, added as the last step before finish")
    rc.add_argument("--out", required=True, help="task file to append the task to (created if missing)")
    rc.add_argument("--replace", action="store_true", help="replace a task with the same id in --out")
    rc.add_argument("--run-dir", help="folder for the recorded trajectory (default runs/record-ID-TIME)")
    rc.add_argument("--until-idle", type=float, metavar="S", help="stop after S seconds without a touch (default: Ctrl-C)")
    rc.add_argument("--reset", action=argparse.BooleanOptionalAction, default=None,
                    help="put the phone in the task's start state first (default: yes on the simulated phone, no on a real one)")
    rc.add_argument("--allow-clear", action="store_true",
                    help="with --reset on a phone: let the task's setup.clear erase its apps' data")
    rc.add_argument("--adb-port", type=int)
    rc.set_defaults(run=cmd_record)


def add_sim_human_parser(sim: argparse._SubParsersAction) -> None:
    sh = sim.add_parser("human", help="do a task's reference, or given actions, on a phone as raw touches (sendevent), "
                                      "as a person would; with --run, take a phone an agent handed over and hand it back")
    sh.add_argument("--device", "--serial", dest="device", required=True, help="serial of the (simulated) phone")
    sh.add_argument("--suite", help="task file or folder (with --task: do its reference)")
    sh.add_argument("--task", help="task id")
    sh.add_argument("--do", action="append", metavar="ACTION",
                    help="an action to do instead of a reference (repeatable, in order): 'tap X Y', 'tap-on LABEL', "
                         "'long-press X Y', 'swipe X1 Y1 X2 Y2', 'type TEXT', 'key back|home|enter|delete', 'wait S'")
    sh.add_argument("--run", dest="run_dir", metavar="RUN", help="wait until an episode of the run in RUN hands this phone over "
                                                 "(an agent's needs_user on a --watch run), then act")
    sh.add_argument("--hand-back", action="store_true", help="with --run: hand the phone back when done, as the live "
                                                             "page's button does (the agent goes on)")
    sh.add_argument("--give-up", action="store_true", help="with --run: give up instead (the episode ends needs_user)")
    sh.add_argument("--wait", type=float, default=600.0, metavar="S",
                    help="with --run: wait at most S seconds for the hand-over (default %(default)s)")
    sh.add_argument("--follow", action="store_true",
                    help="read `harness record` output on stdin, pass it through, and wait for its [ready] cue before each step")
    sh.add_argument("--pause", type=float, default=1.0, help="seconds between steps without --follow (default 1)")
    sh.add_argument("--reset", action="store_true", help="put the phone in the task's start state first")
    sh.add_argument("--json", action="store_true", help="print what was done as JSON (gestures, touches, steps)")
    sh.add_argument("--adb-port", type=int)
    sh.set_defaults(run=cmd_sim_human)


def cmd_sim_human(args: argparse.Namespace) -> int:
    if args.do or args.run_dir:
        return _sim_human_acts(args)
    from harness.recorder.human import Cues, HumanError, SimHuman
    from harness.recorder.session import RecordError, touchscreen_of
    from harness.core.tasks import load_suite

    if not (args.suite and args.task):
        raise UserError("give --suite and --task (do a task's reference), or --do ACTION (and --run RUN to take a "
                        "phone an agent handed over)")
    suite = load_suite(args.suite)
    task = suite.select([args.task])[0]
    device = _adb_device(args.device, args.adb_port)
    try:
        screen, _ = touchscreen_of(device)
        if args.reset:
            device.reset(task.setup, task.language)
        cues = Cues(sys.stdin, lambda line: print(line, flush=True)) if args.follow else None
        report = SimHuman(device, screen, cues=cues, pause=args.pause).perform(task)
    except (HumanError, RecordError) as e:
        raise UserError(str(e)) from None
    if cues is not None:  # the recorder's closing lines are still to come: passed through, not cut off
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the recorder's: it ends, and so this
        print(f"{task.id}: done ({report.gestures} gesture(s)); waiting for the recorder's last lines (it stops at "
              "its --until-idle, or Ctrl-C)", file=sys.stderr, flush=True)
        try:
            cues.until_closed()
        finally:
            signal.signal(signal.SIGINT, previous)
    print(json.dumps(report.to_json(), ensure_ascii=False) if args.json else
          f"{task.id}: {report.gestures} gesture(s), {report.touches} touch(es)", flush=True)
    return 0


def _sim_human_acts(args: argparse.Namespace) -> int:
    """``harness sim human --do ... [--run RUN --hand-back]``: the person an agent hands the phone to."""
    from harness.live.handover import StandInError, answer_handover, parse_do, wait_ready, waiting_handover
    from harness.live.operator import shown
    from harness.recorder.human import HumanError, SimHuman
    from harness.recorder.session import RecordError, touchscreen_of

    if (args.hand_back or args.give_up) and not args.run_dir:
        raise UserError("--hand-back and --give-up answer a hand-over: give --run RUN")
    if args.hand_back and args.give_up:
        raise UserError("--hand-back or --give-up, not both")
    if args.suite or args.task:
        raise UserError("--do acts on its own: leave out --suite and --task")
    try:
        acts = [parse_do(d) for d in args.do or []]
    except StandInError as e:
        raise UserError(str(e)) from None
    device = _adb_device(args.device, args.adb_port)
    done: list[dict[str, Any]] = []
    try:
        screen, _ = touchscreen_of(device)
        episode = ask = None
        if args.run_dir:
            print(f"waiting for an agent to hand {device.serial} over in {args.run_dir} ...", file=sys.stderr, flush=True)
            episode, ask = waiting_handover(args.run_dir, device.serial, args.wait)
            print(f"{episode.name}: the agent asks: {shown(ask.get('text'))}", file=sys.stderr, flush=True)
        human = SimHuman(device, screen, pause=args.pause, say=lambda m: print(m, file=sys.stderr, flush=True))
        for text, act in zip(args.do or [], acts):
            if isinstance(act, tuple):  # tap-on LABEL: the element showing it, as a person finds it
                act = human.find(act[1])
            gestures = human.act(act)
            done.append({"do": text, "action": act.to_json(), "gestures": gestures})
            if episode is not None and ask is not None:  # the hand-over has read it: the next one
                wait_ready(episode, ask["id"], human.finger.touches, max(30.0, args.pause))
            elif args.pause:
                time.sleep(args.pause)
        answer = None
        if episode is not None and ask is not None and (args.hand_back or args.give_up):
            answer = answer_handover(episode, ask["id"], "give_up" if args.give_up else "hand_back")
    except (HumanError, RecordError, StandInError) as e:
        raise UserError(str(e)) from None
    out = {"device": device.serial, "done": done, "touches": human.finger.touches,
           **({"episode": episode.name, "answer": answer} if episode is not None else {})}
    print(json.dumps(out, ensure_ascii=False) if args.json else
          f"{device.serial}: {len(done)} action(s), {human.finger.touches} touch(es)"
          + (f"; {episode.name}: {answer['decision']}" if answer else ""), flush=True)
    return 0


def _adb_device(serial: str, adb_port: int | None, allow_clear: bool = False):
    from harness.device.adb import AdbDevice
    from harness.device.adb_server import server_port

    device = AdbDevice(serial, port=adb_port or server_port(), allow_clear=allow_clear)
    state = device.describe().state
    if state != "device":
        raise UserError(f"--device {serial}: {state} (see `harness devices`)")
    return device


def cmd_record(args: argparse.Namespace) -> int:
    import re
    from datetime import datetime
    from pathlib import Path

    from harness.device.base import DeviceError, InfraError
    from harness.recorder.session import Recorder, RecordError
    from harness.recorder.task_build import TaskSpec
    from harness.recorder.task_file import existing_ids
    from harness.records import RecordError as RecordsError
    from harness.core.tasks import TASK_ID_PATTERN, load_suite

    if not re.fullmatch(TASK_ID_PATTERN, args.id) or args.id in (".", ".."):
        raise UserError(f"--id: {args.id!r} is not a valid task id (letters, digits and _ . -, starting with a "
                        "letter or digit, at most 128 characters)")
    template = None
    if args.from_suite:
        template = load_suite(args.from_suite).by_id().get(args.id)
        if template is None:
            raise UserError(f"--from {args.from_suite}: no task {args.id!r} to re-record")
    elif not args.instruction:
        raise UserError("give --instruction TEXT (or --from SUITE to re-record a task of a suite)")
    out = Path(args.out)
    if args.id in existing_ids(out) and not args.replace:
        raise UserError(f"{out}: task {args.id!r} is already there (--replace to record it again)")
    spec = TaskSpec(id=args.id, instruction=args.instruction or template.instruction,
                    language=args.language or (template.language if template else "en"),
                    apps=list(args.app or []), answer=args.answer, template=template)
    run_dir = Path(args.run_dir or f"runs/record-{args.id}-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    from harness.device.config import DeviceConfig
    from harness.preflight import Plan, preflight

    # before anything is asked of the phone: attached (else the attached ones are listed), usable, and not
    # behind a PIN, pattern or password (the person's touches would record the secret into the task)
    preflight(Plan(device_config=DeviceConfig(adb_port=args.adb_port), serials=[args.device]))
    device = _adb_device(args.device, args.adb_port, allow_clear=args.allow_clear)
    from harness.device.phone_lock import PhoneBusy, hold

    try:  # the phone is the person's and this recording's: no run drives it meanwhile (sim human does not lock)
        lock = hold(device.serial, device.host, device.port)
    except PhoneBusy as e:
        raise UserError(str(e)) from None
    if lock.note:
        print(f"note: {lock.note}", file=sys.stderr, flush=True)
    rec = Recorder(device, spec, run_dir, out, replace=args.replace, reset=args.reset,
                   until_idle=args.until_idle, argv=sys.argv)
    previous = signal.signal(signal.SIGINT, lambda *_: rec.stop.set())  # Ctrl-C ends the recording
    try:
        result = rec.run()
    except (RecordError, RecordsError) as e:
        raise UserError(str(e)) from None
    except (InfraError, DeviceError) as e:
        raise UserError(f"{args.device}: {e}") from None
    finally:
        signal.signal(signal.SIGINT, previous)
        lock.release()
    task = result.task or {}
    print(f"{result.steps} step(s) recorded: c = {task.get('reference_steps')}, cap {2 * task.get('reference_steps', 0) + 1}, "
          f"{len(task.get('milestones', []))} draft milestone(s); trajectory: {result.run_dir} (harness view {result.run_dir})")
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if result.stopped:
        print(f"harness: the recording stopped after step {result.steps}: {result.stopped}; what was recorded is "
              f"in {result.run_dir} (tasks.yaml there); {out} is unchanged", file=sys.stderr)
        return 3
    print(f"task {args.id!r} {result.written} in {out}")
    return 0
