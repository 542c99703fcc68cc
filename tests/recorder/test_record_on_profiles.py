"""Recording on phones whose touchscreens are real phones' (the shipped device profiles, one phone
per profile shared by the tests that use it): the stand-in human touches the touchscreen the
recorder picks, in the protocol it speaks, and the recorder reads every gesture as a step.

The profiles recorded on are those whose input devices differ: a type A touchscreen (SYN_MT_REPORT,
BTN_TOUCH, no slots; axes in pixels), the vivo tablet (vivo_ts listed in slot 1 with BTN_TOUCH held,
a pen and a second multi-touch node that is not the screen), the Android 11 emulator (virtio nodes
without INPUT_PROP_DIRECT, axes 0-32767) and the Android 13 tablet (sil_ts without BTN_TOUCH, axes
0-480 x 0-800). The Pixel 8 and Z Flip4 profiles have the simulated phone's own touchscreen, which
the other recorder tests use."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.records import read_manifest
from harness.sim.command_log import read_command_log
from harness.core.tasks import load_suite
from tests.recorder.recording import record_task

ROOT = Path(__file__).resolve().parents[2]
TOUCHSCREENS = {"type-a-touchscreen": "/dev/input/event7 ('touchscreen')",
                "vivo-pad-two-touch": "/dev/input/event6 ('vivo_ts')",
                "emulator-android11": "/dev/input/event9 ('virtio_input_multi_touch_10')",
                "mtk-tablet-android13": "/dev/input/event0 ('sil_ts')"}


@pytest.mark.parametrize("name", TOUCHSCREENS)
def test_a_task_recorded_on_a_real_phones_touchscreen(name, profile_phone, tmp_path):
    phone = profile_phone(name).fresh(tmp_path / "commands.jsonl")
    task = load_suite(ROOT / "tasks" / "sim").by_id()["clock_turn_off_work_alarm"]
    phone.phone.reset(locale=task.language)
    rec = record_task(phone.device(), task, tmp_path / "rec")
    assert rec.result.steps == rec.human.gestures >= 2 and not rec.result.stopped, rec.log
    assert any(line.startswith("[ready] gestures=0") for line in rec.log)
    assert read_manifest(tmp_path / "rec")["touchscreen"].startswith(TOUCHSCREENS[name])
    steps = rec.result.task["reference"]
    assert [s["type"] for s in steps][-2:] == ["click", "finish"]
    assert steps[-3]["target"]["text"] == "时钟"  # the launcher icon, tapped where the screen showed it
    sent = " && ".join(argv[2] for r in read_command_log(tmp_path / "commands.jsonl") for argv in r["argv"] or []
                       if argv[:2] == ["sh", "-c"])
    path = TOUCHSCREENS[name].split()[0]
    if name == "type-a-touchscreen":  # each contact closed by SYN_MT_REPORT, no slots, lifted by BTN_TOUCH up
        assert f"sendevent {path} 0 2 0" in sent and f"sendevent {path} 3 47 " not in sent
        assert f"sendevent {path} 1 330 0 && sendevent {path} 0 0 0" in sent
    else:
        assert f"sendevent {path} 3 57 -1" in sent and f"sendevent {path} 0 2 0" not in sent
    alarms = phone.phone.state_json()["apps"]["clock"]["alarms"]
    assert [a["enabled"] for a in alarms if a["label"] == "上班"] == [False]  # the touches did it


def test_a_touch_where_one_lifted_before_the_recording_is_announced_never_read_at_0_0(profile_phone):
    """A touch the kernel reports without position events (its slot's position unchanged since
    before the reader started: the input core drops unchanged values, and the listing's MT axes are
    idle values, not a slot's) cannot be placed: the reader says so and gives a touch with no point,
    which a step records as a touch that could not be placed, never as a tap at the listed (0, 0)
    (found by the faithful simulated kernel: test_record_every_task recorded open_app taps at 0,0).
    Once the slot has reported a position, a touch where it lifted is read right."""
    from harness.recorder.evdev import GestureReader, Touchscreen, find_touchscreen, parse_devices, parse_event_line
    from harness.recorder.steps import Screen, StepBuilder
    from harness.sim.evdev import format_event

    phone = profile_phone("mtk-tablet-android13").fresh()
    sh = phone.handle.shell
    tap = ["3 47 0", "3 57 {}", "3 53 {x}", "3 54 {y}", "0 0 0", "3 57 -1", "0 0 0"]

    def touch(n: int, x: int, y: int) -> None:
        for line in tap:
            assert sh.execute("sendevent /dev/input/event0 " + line.format(n, x=x, y=y)).exit_code == 0

    touch(1, 300, 500)  # a touch before the recording began
    screen = Touchscreen.of(find_touchscreen(parse_devices(sh.execute("getevent -lp").stdout.decode())), phone.phone.size)
    reader = sh.evdev.open_reader()
    try:
        touch(2, 300, 500)  # where the first lifted: no position events reach getevent
        touch(3, 700, 500)  # x changes, y does not: still no y read, so still not placed
        touch(4, 700, 900)  # the slot has reported both axes now
        touch(5, 700, 900)  # where the last one lifted, during the recording: read right
        lines = []
        while not reader.empty():
            e = reader.get_nowait()
            lines.append(format_event(e, labels=True, timestamps=True, with_device=True))
    finally:
        sh.evdev.close_reader(reader)
    gestures, warnings = [], []
    GestureReader(screen, gestures.append, on_warning=warnings.append).feed_all(
        filter(None, map(parse_event_line, lines)))
    assert [(g.points, g.unplaced) for g in gestures] == [
        ([], True), ([], True), ([screen.to_pixels(700, 900)], False), ([screen.to_pixels(700, 900)], False)]
    assert len(warnings) == 2 and all("could not be placed" in w and "before the reading started" in w
                                      for w in warnings)
    # the step a touch with no point makes: it says so, and no reference step is made of it
    builder = StepBuilder(set(), 320, phone.phone.size)
    builder.start(Screen(b"", "", [], "launcher/home", None))
    builder.gesture(gestures[0])
    (step,) = builder.finish(None)
    assert step.action is None and step.ref == {} and step.gesture["kind"] == "unplaced"
    assert step.warnings and step.warnings[0].startswith("the touch could not be placed: getevent gave no position")
