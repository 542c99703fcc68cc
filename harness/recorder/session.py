"""``harness record``: a person does a task on the phone; the recorder reads the touches from
``getevent -lt`` over adb, captures the screen around every gesture, and writes the task and the
recorded trajectory.

One thread reads the getevent stream (``shell,v2,pty:`` so the phone's getevent writes line by
line to a terminal rather than in blocks to a pipe; plain ``shell:`` where the phone has no shell
protocol v2) and turns it into gestures. The main thread captures the screen whenever no gesture
is waiting: a settled screenshot, the accessibility tree, and on the simulated phone its state. A
capture during which a new touch began is kept only as a hint: the next gesture may have changed
the screen while it was taken. After every clean capture the recorder prints
``[ready] gestures=N steps=M``: the cue to make the next gesture (``harness sim human --follow``
waits for it, as a person should).

The trajectory is written as a run folder while it is recorded (``RUN/manifest.json``,
``RUN/tasks.yaml`` with the task as recorded so far, ``RUN/episodes/<id>/``), so ``harness view
RUN`` shows it and a recording cut short keeps every step up to where it stopped.
"""

from __future__ import annotations

import json
import queue
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import adbutils

from harness.core import hierarchy
from harness.device.adb import AdbDevice
from harness.device import getevent, wm
from harness.device.getevent import GETEVENT_LISTING
from harness.device.base import DeviceError, InfraError
from harness.recorder.evdev import (UNPLACED, EvdevError, Gesture, GestureReader, Touch, Touchscreen,
                                    find_touchscreen, parse_devices, parse_event_line, unopened_nodes)
from harness.recorder.steps import Screen, Step, StepBuilder
from harness.recorder.task_build import TaskSpec, build_task, page_of
from harness.recorder.task_file import task_yaml, write_task
from harness.records import (RunWriter, atomic_write_bytes, build_environment_info, file_sha256, now_iso)
from harness.core.tasks import SimSetup, Setup, parse_task

SHELL_STDOUT, SHELL_EXIT = 1, 3
GETEVENT_STREAM = " ".join(getevent.GETEVENT_STREAM)
AGENT = "human"


class RecordError(RuntimeError):
    """The recording cannot start (bad input, no touchscreen): nothing was recorded."""


def touchscreen_of(device: AdbDevice) -> tuple[Touchscreen, int]:
    """The phone's touchscreen (from ``getevent -lp``) and how many input devices it has."""
    listing = device.shell(list(GETEVENT_LISTING))
    devices = parse_devices(listing)
    try:
        dev = find_touchscreen(devices, unopened_nodes(listing))
    except EvdevError as e:
        raise RecordError(f"{device.serial}: {e}") from None
    return Touchscreen.of(dev, device.screen_size()), len(devices)


def density_of(device: AdbDevice) -> int:
    """The density in effect (``wm density``: the override where there is one), else 160 (mdpi)."""
    return wm.parse_density(device.shell(list(wm.WM_DENSITY))) or 160


def ime_packages(device: AdbDevice) -> set[str]:
    out = device.shell(["settings", "get", "secure", "default_input_method"]).strip()
    return {out.split("/", 1)[0]} if out and out != "null" else set()


class GeteventStream:
    """``getevent -lt`` over adb in a thread: gestures on ``gestures``, counts of touches begun
    and gestures ended, and ``ended`` with a reason when the stream stops."""

    def __init__(self, device: AdbDevice, screen: Touchscreen, n_devices: int,
                 warn: Callable[[str], None]):
        self.device = device
        self.n_devices = n_devices
        self.gestures: queue.Queue[Gesture] = queue.Queue()
        self.contacts = 0   # touches begun
        self.lifted = 0     # touches ended
        self.count = 0      # gestures ended (touches and key presses)
        self.ended = threading.Event()
        self.reason = ""
        self.listening = threading.Event()
        self._headers = 0
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self.reader = GestureReader(screen, self._gesture, self._contact, warn)
        self._thread = threading.Thread(target=self._run, name="getevent", daemon=True)

    def _gesture(self, g: Gesture) -> None:
        with self._lock:
            self.count += 1
            self.lifted += isinstance(g, Touch)
        self.gestures.put(g)

    def _contact(self, _t: float) -> None:
        with self._lock:
            self.contacts += 1

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return self.contacts, self.count

    def start(self, timeout: float = 15.0) -> None:
        self._thread.start()
        if not self.listening.wait(timeout):
            self.stop()
            raise RecordError(f"{self.device.serial}: getevent did not start within {timeout:.0f} s"
                              + (f": {self.reason}" if self.reason else ""))

    def _open(self) -> tuple[socket.socket, bool]:
        for service, v2 in ((f"shell,v2,pty:{GETEVENT_STREAM}", True), (f"shell:{GETEVENT_STREAM}", False)):
            c = self.device.client.make_connection(timeout=10)
            try:
                c.send_command(f"host:transport:{self.device.serial}")
                c.check_okay()
                c.send_command(service)
                c.check_okay()
            except adbutils.AdbError:
                c.close()
                if v2:
                    continue
                raise
            return c.conn, v2
        raise adbutils.AdbError("no shell service")  # pragma: no cover

    def _run(self) -> None:
        try:
            sock, v2 = self._open()
        except (adbutils.AdbError, OSError) as e:
            self.reason = f"cannot open getevent: {e}"
            self.ended.set()
            return
        self._sock = sock
        sock.settimeout(0.5)
        buf, text = b"", b""
        try:
            while not self._stop.is_set():
                try:
                    chunk = sock.recv(65536)
                except socket.timeout:
                    continue
                if not chunk:
                    self.reason = "the phone closed the getevent stream (disconnected?)"
                    break
                if not v2:
                    text += chunk
                else:
                    buf += chunk
                    while len(buf) >= 5:
                        kind, length = struct.unpack("<BI", buf[:5])
                        if len(buf) < 5 + length:
                            break
                        data, buf = buf[5:5 + length], buf[5 + length:]
                        if kind == SHELL_STDOUT:
                            text += data
                        elif kind == SHELL_EXIT:
                            self.reason = f"getevent exited on the phone (status {data[0] if data else '?'})"
                            self._stop.set()
                *lines, text = text.split(b"\n")
                for line in lines:
                    self._line(line.decode("utf-8", "replace"))
        except OSError as e:
            self.reason = f"the getevent stream failed: {e}"
        finally:
            try:
                sock.close()
            except OSError:
                pass
            self.ended.set()

    def _line(self, line: str) -> None:
        if line.startswith("add device"):
            self._headers += 1
            if self._headers >= self.n_devices:
                self.listening.set()
            return
        e = parse_event_line(line)
        if e is not None:
            self.listening.set()
            self.reader.feed(e)

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)


def capture(device: AdbDevice, stream: GeteventStream | None, simulated: bool, light: bool = False) -> Screen:
    """The screen now; ``light``: the tree and state only (while keys are being tapped). Not
    ``valid`` when a touch began while it was taken (the next gesture may have changed it)."""
    before = stream.counts()[0] if stream else 0
    png = b"" if light else device.settle()[0]
    xml = device.hierarchy()
    state = device.state() if simulated else None
    fallback = "/".join(device.current_app()) if not simulated else "unknown"
    valid = (stream.counts()[0] if stream else 0) == before
    try:
        elements = hierarchy.parse(xml)
    except hierarchy.HierarchyError as e:
        raise DeviceError(f"{device.serial}: {e}") from None
    return Screen(png, xml, elements, page_of(state, fallback), state, valid)


def touching(stream: GeteventStream) -> bool:
    with stream._lock:
        return stream.contacts != stream.lifted


def follow(stream: GeteventStream, builder: StepBuilder, look: Callable[[bool], Screen], stop: threading.Event,
           emit: Callable[[list[Step]], None], ready: Callable[[], None] = lambda: None,
           until_idle: float | None = None) -> str | None:
    """Gestures in, captures out, finished steps to ``emit``, until ``stop`` is set (or
    ``until_idle`` seconds pass without a touch); returns why the phone was lost, if it was.
    ``look(light)`` captures the screen; ``ready`` is called whenever the phone may be touched
    again (every gesture so far is in a step or in the builder). ``harness record`` and a run's
    hand-over (``harness.live.handover``) read a person's touches with it."""
    last_touch = time.monotonic()
    while not stop.is_set():
        try:
            g = stream.gestures.get(timeout=0.1)
        except queue.Empty:
            if stream.ended.is_set():
                return stream.reason or "the getevent stream ended"
            if until_idle and time.monotonic() - last_touch >= until_idle and not touching(stream):
                return None
            continue
        last_touch = time.monotonic()
        builder.gesture(g)
        while True:
            try:
                builder.gesture(stream.gestures.get_nowait())
            except queue.Empty:
                break
        try:
            if builder.typing is not None:
                # keys come fast: look at the tree only, take the screenshot once they stop
                glance = look(True)
                builder.glimpse(glance)
                if not (glance.valid and stream.gestures.empty() and not touching(stream)):
                    continue
            screen = look(False)
        except (InfraError, DeviceError) as e:
            return f"the phone stopped answering: {e}"
        emit(builder.capture(screen))
        if screen.valid and stream.gestures.empty() and not touching(stream):
            ready()
    return None


@dataclass
class RecordResult:
    task: dict[str, Any] | None
    steps: int
    run_dir: Path
    written: str | None = None         # what was done to --out (created/appended/replaced)
    stopped: str | None = None         # why the recording stopped early (device lost)
    warnings: list[str] = field(default_factory=list)


class Recorder:
    def __init__(self, device: AdbDevice, spec: TaskSpec, run_dir: Path, out: Path | None, *,
                 replace: bool = False, reset: bool | None = None, until_idle: float | None = None,
                 say: Callable[[str], None] | None = None, argv: list[str] | None = None):
        self.device = device
        self.spec = spec
        self.run_dir = Path(run_dir)
        self.out = out
        self.replace = replace
        self.reset = reset
        self.until_idle = until_idle
        self.say = say or (lambda m: print(m, flush=True))
        self.argv = argv if argv is not None else sys.argv
        self.stop = threading.Event()
        self.simulated = False
        self.first: Screen | None = None
        self.written_steps = 0
        self.screens = 0
        self.warnings: list[str] = []

    # --- captures -----------------------------------------------------------------------------------
    def _capture(self, stream: GeteventStream | None, light: bool = False) -> Screen:
        return capture(self.device, stream, self.simulated, light)

    def _screen_rel(self, ep, screen: Screen | None) -> str | None:
        if screen is None or not screen.png:
            return None
        if screen.rel is None:
            screen.rel = ep.write_screen(self.screens, screen.png)
            self.screens += 1
        return screen.rel

    def _write_steps(self, ep, steps: list[Step]) -> None:
        for s in steps:
            self.written_steps += 1
            extras = {"reference": s.ref, "gesture": s.gesture, "page_before": s.before.page,
                      "page_after": s.after.page if s.after else None}
            if s.warnings:
                extras["warnings"] = s.warnings
            ep.append_step({"index": self.written_steps, "action": s.action.to_json() if s.action else None,
                            "executed": True, "invalid": None if s.action else "; ".join(s.warnings),
                            "raw_output": json.dumps(s.ref, ensure_ascii=False),
                            "screen_before": self._screen_rel(ep, s.before),
                            "screen_after": self._screen_rel(ep, s.after), "extras": extras})
            for w in s.warnings:
                self.say(f"  note: step {self.written_steps}: {w}")

    def _task(self, builder: StepBuilder, stopped: str | None) -> dict[str, Any]:
        size = self.device.screen_size()
        source = (f"recorded with harness record on {self.device.serial} ({size[0]}x{size[1]}) at {now_iso()}"
                  + (f"; stopped after step {len(builder.steps)}: {stopped}" if stopped else ""))
        return build_task(self.spec, builder.steps, self.first, source)

    def _save_draft(self, task: dict[str, Any]) -> None:
        atomic_write_bytes(self.run_dir / "tasks.yaml", task_yaml(task).encode("utf-8"))

    # --- the recording ----------------------------------------------------------------------------
    def run(self) -> RecordResult:
        dev = self.device
        self.simulated = dev.is_simulated()
        screen_map, n_devices = touchscreen_of(dev)
        t = self.spec.template
        setup = t.setup if t is not None else Setup(sim=SimSetup(locale=self.spec.language) if self.simulated else None)
        if self.reset if self.reset is not None else self.simulated:
            self.say(f"resetting {dev.serial} to the task's start state")
            dev.reset(setup, self.spec.language)
        builder = StepBuilder(ime_packages(dev), density_of(dev), dev.screen_size())
        writer = RunWriter(self.run_dir)
        stopped: str | None = None
        try:
            started = now_iso()
            self._save_draft({"id": self.spec.id, "instruction": self.spec.instruction,
                              "language": self.spec.language, "reference_steps": 1})
            writer.write_manifest({
                "kind": "crate-harness record", "command": self.argv, "environment": build_environment_info(),
                "agent": {"name": AGENT, "label": "human (recorded)"}, "judges": [],
                "devices": [dev.serial], "touchscreen": screen_map.describe(), "screen_size": list(dev.screen_size()),
                "density": density_of(dev), "input_methods": sorted(builder.ime),
                "suite": {"path": "tasks.yaml", "files": {"tasks.yaml": file_sha256(self.run_dir / "tasks.yaml")}},
                "tasks": [self.spec.id], "started_at": started})
            ep = writer.start_episode(self.spec.id)
            stream = GeteventStream(dev, screen_map, n_devices, self._warn)
            stream.start()
            self.say(f"recording {self.spec.id!r} on {dev.serial}: touchscreen {screen_map.describe()}")
            self.say("do the task on the phone; wait for [ready] before each gesture; Ctrl-C when done"
                     + (f" (or stop after {self.until_idle:g} s without a touch)" if self.until_idle else ""))
            t0 = time.monotonic()
            try:
                self.first = self._capture(None)
                builder.start(self.first)
                self._ready(stream, builder)
                stopped = self._loop(stream, builder, ep)
            finally:
                stream.stop()
            final = None
            if stopped is None:
                try:
                    final = self._capture(None)
                except (InfraError, DeviceError) as e:
                    stopped = f"the phone stopped answering: {e}"
            self._write_steps(ep, builder.finish(final))
            task = self._task(builder, stopped)
            self._save_draft(task)
            writer.update_manifest(suite={"path": "tasks.yaml", "files": {"tasks.yaml": file_sha256(self.run_dir / "tasks.yaml")}})
            n = len(builder.steps)
            result = {"task_id": self.spec.id, "agent": AGENT, "status": "infra_error" if stopped else "finished",
                      "steps": self.written_steps, "proposed_steps": self.written_steps, "cap": 2 * task["reference_steps"] + 1,
                      "verdicts": {}, "device": dev.serial, "started_at": started, "ended_at": now_iso(),
                      "duration_s": round(time.monotonic() - t0, 3),
                      "error": f"recording stopped after step {n}: {stopped}" if stopped else None,
                      "warnings": builder.warnings + self.warnings}
            writer.append_result(result)
            writer.update_manifest(ended_at=now_iso())
        finally:
            writer.close()
        res = RecordResult(task, len(builder.steps), self.run_dir, stopped=stopped,
                           warnings=builder.warnings + self.warnings)
        if stopped is None and self.out is not None:
            if not builder.steps:
                raise RecordError(f"nothing was recorded (no gesture); {self.out} is unchanged; the run is in {self.run_dir}")
            unplaced = [i for i, s in enumerate(builder.steps, 1) if s.action is None]
            if unplaced:  # a reference with a touch missing would be wrong: said, and nothing written
                raise RecordError(f"step(s) {', '.join(map(str, unplaced))}: a touch could not be placed ({UNPLACED}); "
                                  f"{self.out} is unchanged; the recording is in {self.run_dir}; record again, the "
                                  "first touch a little apart from the last one before the recording")
            parse_task(task, self.run_dir / "tasks.yaml")
            res.written = write_task(self.out, task, self.replace)
        return res

    def _ready(self, stream: GeteventStream, builder: StepBuilder) -> None:
        self.say(f"[ready] gestures={stream.counts()[1]} steps={len(builder.steps)}")

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        self.say(f"  note: {message}")

    def _loop(self, stream: GeteventStream, builder: StepBuilder, ep) -> str | None:
        """Gestures in, captures out, until stopped; returns why the phone was lost, if it was."""
        def emit(done: list[Step]) -> None:
            self._write_steps(ep, done)
            if done:
                self._save_draft(self._task(builder, None))

        return follow(stream, builder, lambda light: self._capture(stream, light), self.stop, emit,
                      lambda: self._ready(stream, builder), self.until_idle)
