"""A person's first touch that getevent gives no position for (issue 40): on the simulated phone's
faithful kernel, a tap where the last touch before the recording lifted. ``harness record``
announces it as it happens, keeps it in the recorded trajectory as a step that says it could not be
placed (never a tap at (0, 0)), and writes no task with a step missing."""

from __future__ import annotations

import threading
import time

import pytest

from harness.recorder.session import Recorder, RecordError, touchscreen_of
from harness.recorder.task_build import TaskSpec
from harness.records import iter_steps


def _tap(device, path: str, tracking: int, rx: int, ry: int) -> None:
    lines = [f"3 47 0", f"3 57 {tracking}", f"3 53 {rx}", f"3 54 {ry}", "1 330 1", "0 0 0", "3 57 -1", "1 330 0",
             "0 0 0"]
    out = device.shell(["sh", "-c", " && ".join(f"sendevent {path} {line}" for line in lines)])
    assert not out.strip(), out


@pytest.mark.slow
def test_harness_record_announces_a_touch_it_cannot_place(serve_sim, tmp_path):
    phone = serve_sim(720, 1600)
    device = phone.device()
    screen, _ = touchscreen_of(device)
    rx, ry = screen.to_raw(360, 1400)
    _tap(device, screen.device.path, 1, rx, ry)  # before the recording: the slot now holds this point
    said: list[str] = []
    out = tmp_path / "mine.yaml"
    rec = Recorder(device, TaskSpec(id="tap_twice", instruction="Tap the screen.", language="en"), tmp_path / "rec",
                   out, reset=False, until_idle=3.0, say=said.append, argv=["harness", "record"])
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = rec.run()
        except BaseException as e:  # handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while not any(line.startswith("[ready] gestures=0") for line in said):
        assert time.monotonic() < deadline and t.is_alive(), said
        time.sleep(0.05)
    _tap(device, screen.device.path, 2, rx, ry)  # where the last one lifted: no position reaches getevent
    t.join(90)
    assert not t.is_alive()
    err = box.get("error")
    assert isinstance(err, RecordError) and "step(s) 1: a touch could not be placed" in str(err), box
    assert not out.exists()
    assert any("note: a touch could not be placed: getevent gave no position" in line for line in said), said
    (step,) = list(iter_steps(tmp_path / "rec" / "episodes" / "tap_twice"))
    assert step.action is None and step.invalid.startswith("the touch could not be placed")
    assert step.extras["gesture"]["kind"] == "unplaced"
