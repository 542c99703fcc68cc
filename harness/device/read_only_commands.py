"""Every command the harness sends to a phone that only reads it, in one list.

``harness devices capture`` asks a phone each of them and keeps the answers (a device profile:
``harness.core.profile_folder``), so this list is what a profile holds; a test runs the real-phone
paths (prepare, resets, steps, a recording) on a simulated phone that logs every command line it
receives, and fails on any command that is neither here nor one the test knows changes the phone.
So a reader added later that asks something new fails that test until its command is listed here,
and captured.

Each reader module of the device layer names what it sends in a ``COMMANDS`` constant
(``harness.device.focus``, ``input_methods``, ``screencap``, ``wm``, ``getprop``, ``getevent``);
what ``harness.device.adb`` and ``harness.device.prepare`` send as literals is written out here.
Commands with a part that varies per call (the UI dump's file, a screencap's display id) carry
a ``pattern`` their logged command lines match.

Not every command on the list is captured: ``getevent -lt`` is a stream of what the touchscreen
sends while a person touches it (a profile's ``getevent -lp`` says which protocol it speaks), and
``rm -f`` of the UI dump's own file is the dump's clean-up. A few commands the harness does not
send are asked for the profile only (``dumpsys window`` and ``dumpsys input`` in full, ``ime list
-a``): the simulated phone serves them, and they say how a phone lays out what the readers read.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from harness.device import focus, getevent, getprop, input_methods, screencap, wm
from harness.device.adb import DUMP_PREFIX as UI_DUMP_PREFIX  # + this process's token and the call's number
from harness.device.prepare import ANIMATION_SCALES

SHELL, EXEC = "shell", "exec"


@dataclass(frozen=True)
class ReadCommand:
    """One read-only command: its words as sent, over ``shell:`` or ``exec:`` (``adb exec-out``:
    binary clean, stderr mixed in), who sends it, and whether and how a capture keeps its answer."""

    argv: tuple[str, ...]
    service: str = SHELL
    sender: str = ""
    capture: bool = True            # False: on the list (the harness sends it) but not asked by a capture
    why: str = ""                   # what the answer is for; for capture=False, why it is not asked
    pattern: str | None = None      # a logged command line with a varying part matches this (fullmatch)
    image: bool = False             # the answer is an image: a capture keeps the bytes before it and its size
    sent: bool = True               # False: asked for the profile only, the harness itself never sends it

    @property
    def line(self) -> str:
        """The command line as the harness sends it (each word quoted as ``AdbDevice.shell`` does)."""
        return " ".join(shlex.quote(a) for a in self.argv)

    def matches(self, argv: list[str] | tuple[str, ...]) -> bool:
        if tuple(argv) == self.argv:
            return True
        return self.pattern is not None and re.fullmatch(self.pattern, " ".join(argv)) is not None


def _each(commands, sender: str, why: str = "") -> list[ReadCommand]:
    return [ReadCommand(tuple(c), sender=sender, why=why) for c in commands]


_DISPLAY_ID = r"(?: -d \d+)?"

READ_ONLY: tuple[ReadCommand, ...] = (
    # identity first: a capture reads getprop before anything else, to know what to redact
    *_each(getprop.COMMANDS, "harness.device.getprop", "every system property (model, SDK, build, hardware)"),
    ReadCommand(("getprop", "ro.product.model"), sender="harness.device.adb (describe)", why="the model alone"),
    ReadCommand(("getprop", "ro.build.version.sdk"), sender="harness.device.adb (describe)", why="the SDK alone"),
    *_each(wm.COMMANDS, "harness.device.wm", "the screen's size and density"),
    *_each(focus.COMMANDS, "harness.device.focus", "which app is in front, by Android version"),
    ReadCommand(("dumpsys", "window"), sender="the profile", sent=False,
                why="the window manager's whole dump: the layout the sections above come from"),
    *_each(input_methods.COMMANDS, "harness.device.input_methods", "input methods enabled, installed and in use"),
    ReadCommand(("ime", "list", "-a"), sender="the profile", sent=False, why="the input methods in long form"),
    *_each(screencap.COMMANDS, "harness.device.screencap", "the displays screencap can be given (-d)"),
    ReadCommand(("screencap", "-p"), EXEC, "harness.device.adb (screenshot)", image=True,
                pattern=r"screencap -p" + _DISPLAY_ID,
                why="a screenshot: what the phone writes before the PNG (a warning on several displays)"),
    ReadCommand(("screencap",), EXEC, "harness.device.frame_sources (raw frames)", image=True,
                pattern=r"screencap" + _DISPLAY_ID, why="a raw frame: its header's size, and any text before it"),
    ReadCommand((getevent.GETEVENT_LISTING), sender="harness.recorder.session",
                why="the input devices: touchscreens, their axes and protocol, keys"),
    ReadCommand((getevent.GETEVENT_STREAM), sender="harness.recorder.session", capture=False,
                why="a stream of what the input devices send while someone touches the phone"),
    ReadCommand(("dumpsys", "input"), sender="the profile", sent=False,
                why="the input manager: devices, their classes and the touchscreen's raw axes"),
    ReadCommand(("uiautomator", "dump", UI_DUMP_PREFIX + "capture.xml"), sender="harness.device.adb (hierarchy)",
                pattern=re.escape("uiautomator dump " + UI_DUMP_PREFIX) + r"[0-9a-z-]+\.xml",
                why="the accessibility tree's format (writes one file under /data/local/tmp, removed after it is read)"),
    ReadCommand(("rm", "-f", UI_DUMP_PREFIX + "capture.xml"), sender="harness.device.adb (hierarchy)", capture=False,
                pattern=re.escape("rm -f " + UI_DUMP_PREFIX) + r"[0-9a-z-]+\.xml",
                why="removes the file the UI dump just wrote, nothing else"),
    ReadCommand(("pm", "list", "packages"), sender="harness.device.adb (apps)", why="the installed packages"),
    ReadCommand(("dumpsys", "crate_sim", "ping"), sender="harness.device.adb (is_simulated)",
                why="whether this is the simulated phone (a phone has no such service)"),
    ReadCommand(("dumpsys", "power"), sender="harness.device.adb (screen_state)", why="awake or asleep"),
    ReadCommand(("dumpsys", "window", "policy"), sender="harness.device.adb (screen_state)",
                why="the lock screen: showing, secure, trusted"),
    *_each((("settings", "get", "global", key) for key in ("stay_on_while_plugged_in", *ANIMATION_SCALES)),
           "harness.device.prepare", "a setting prepare changes, read (and journaled) before it is changed"),
)


def listed(argv: list[str] | tuple[str, ...]) -> ReadCommand | None:
    """The entry of the list ``argv`` is (a simple command as sent), or None."""
    return next((c for c in READ_ONLY if c.matches(argv)), None)


def to_capture() -> list[ReadCommand]:
    """The commands a capture asks, in order (each command once)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for c in READ_ONLY:
        if c.capture and c.argv not in seen:
            seen.add(c.argv)
            out.append(c)
    return out
