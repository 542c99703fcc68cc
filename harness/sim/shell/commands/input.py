"""Input: Android's ``input`` (InputShellCommand: taps, swipes, key events, text, motion events) and
the kernel input devices' ``getevent``/``sendevent``."""

from __future__ import annotations

import getopt
import queue
import re

from harness.sim.evdev import format_capabilities, format_event
from harness.sim.shell.context import CommandError, Ctx, to_int
from harness.sim.shell.table import command


_INPUT_USAGE = (
    "Usage: input [<source>] [-d DISPLAY_ID] <command> [<arg>...]\n\n"
    "The commands and default sources are:\n"
    "      text <string> (Default: keyboard)\n"
    "      keyevent [--longpress|--duration <duration to hold key down in ms>] [--doubletap] [--async] [--delay <duration between keycodes in ms>] <key code number or name> ... (Default: keyboard)\n"
    "      tap <x> <y> (Default: touchscreen)\n"
    "      swipe <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)\n"
    "      draganddrop <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)\n"
    "      motionevent <DOWN|UP|MOVE|CANCEL> <x> <y> (Default: touchscreen)"
)


def _atoi(text: str) -> int:
    """C's atoi: an optional sign and the leading digits; anything else reads as 0."""
    m = re.match(r"\s*([+-]?\d+)", text)
    return int(m.group(1)) if m else 0


def _android_input_text(text: str) -> str:
    """``input text``'s own unescaping: ``%s`` is a space (InputShellCommand.sendText)."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == "%" and i + 1 < len(text) and text[i + 1] == "s":
            out.append(" ")
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


@command("input")
def input_(c: Ctx) -> int:
    shell = c.shell
    args = list(c.argv[1:])
    sources = {"keyboard", "mouse", "joystick", "touchnavigation", "touchpad", "trackball", "stylus", "dpad", "gesture", "touchscreen", "gamepad", "rotaryencoder"}
    while args and (args[0] in sources or args[0] == "-d"):
        if args[0] == "-d":
            args = args[2:]
        else:
            args = args[1:]
    if not args:
        c.error(_INPUT_USAGE)
        return 1
    sub, rest = args[0], args[1:]
    phone = shell.phone
    if sub == "tap":
        if len(rest) != 2:
            raise CommandError("Error: Invalid arguments for command: tap\n" + _INPUT_USAGE)
        phone.tap(to_int(rest[0], "coordinate"), to_int(rest[1], "coordinate"))
        return 0
    if sub in ("swipe", "draganddrop"):
        if len(rest) not in (4, 5):
            raise CommandError(f"Error: Invalid arguments for command: {sub}\n" + _INPUT_USAGE)
        x1, y1, x2, y2 = (to_int(v, "coordinate") for v in rest[:4])
        ms = to_int(rest[4], "duration") if len(rest) == 5 else (300 if sub == "swipe" else 1000)
        if sub == "draganddrop":
            drag = getattr(phone, "drag", None)
            if callable(drag):
                drag(x1, y1, x2, y2, ms)
            else:
                phone.swipe(x1, y1, x2, y2, ms)
            return 0
        shell.touch.gesture([(x1, y1), (x2, y2)], ms)
        return 0
    if sub == "keyevent":
        keys = [k for k in rest if not k.startswith("--")]
        if not keys:
            raise CommandError("Error: Invalid arguments for command: keyevent\n" + _INPUT_USAGE)
        status = 0
        for k in keys:
            key: str | int = int(k) if k.isdigit() else k
            if phone.keyevent(key) is False:
                c.error(f"Error: Unknown keycode: {k}")
                status = 1
        return status
    if sub == "text":
        if not rest:
            raise CommandError("Error: Invalid arguments for command: text\n" + _INPUT_USAGE)
        text = _android_input_text(rest[0])  # Android types only the first argument
        if shell.ascii_only_input_text and any(not (32 <= ord(ch) < 127 or ch in "\n\t") for ch in text):
            return 0  # KeyCharacterMap.getEvents() fails: nothing typed, nothing printed
        phone.input_text(text)
        return 0
    if sub == "motionevent":
        if len(rest) != 3:
            raise CommandError("Error: Invalid arguments for command: motionevent\n" + _INPUT_USAGE)
        action = {"DOWN": 0, "UP": 1, "MOVE": 2, "CANCEL": 3}.get(rest[0].upper())
        if action is None:
            raise CommandError(f"Error: Unknown action: {rest[0]}")
        shell.touch.event(action, to_int(rest[1]), to_int(rest[2]))
        return 0
    if sub in ("press", "roll", "scroll", "keycombination"):
        if sub == "keycombination":
            for k in rest:
                phone.keyevent(int(k) if k.isdigit() else k)
        return 0
    c.error(f"Error: Unknown command: {sub}\n" + _INPUT_USAGE)
    return 1


@command("sendevent")
def sendevent(c: Ctx) -> int:
    """``sendevent DEVICE TYPE CODE VALUE``: one raw input event, numbers read as atoi does
    (toybox sendevent.c)."""
    args = c.argv[1:]
    if len(args) != 4:
        c.error("usage: sendevent DEVICE TYPE CODE VALUE\n\nSends a Linux input event.")
        c.error(f"sendevent: {'Need' if len(args) < 4 else 'Max'} 4 argument{'s' if len(args) != 1 else ''}")
        return 1
    try:
        c.shell.evdev.write(args[0], *(_atoi(a) for a in args[1:]))
    except FileNotFoundError:
        c.error(f"sendevent: {args[0]}: No such file or directory")
        return 1
    return 0


@command("getevent")
def getevent(c: Ctx) -> int:
    """AOSP toolbox getevent: ``-t`` time stamps, ``-l`` labels, ``-p``/``-i`` the devices'
    capabilities (then exit), ``-c N`` stop after N events, ``-q`` quiet; otherwise stream
    every event until the host closes the stream."""
    shell = c.shell
    usage = "Usage: getevent [-t] [-n] [-s switchmask] [-S] [-v [mask]] [-d] [-p] [-i] [-l] [-q] [-c count] [-r] [device]"
    # -v takes its mask only when attached (getopt "v::"); the verbosity it picks is not modelled
    args = [a for a in c.argv[1:] if not a.startswith("-v")]
    try:
        opts, rest = getopt.getopt(args, "tns:Sdpilqc:rh")
    except getopt.GetoptError as e:
        c.error(f"getevent: invalid option -{e.opt}")
        c.error(usage)
        return 1
    flags = {o[1] for o, _ in opts}
    count = next((_atoi(v) for o, v in opts if o == "-c"), 0)
    if "h" in flags or len(rest) > 1:
        c.error(usage)
        return 1
    device = rest[0] if rest else None
    labels, newline = "l" in flags, "" if "n" in flags else "\n"
    listing = bool(flags & {"p", "i"})
    devices = shell.evdev.devices
    if device is not None:
        dev = shell.evdev.device(device)
        if dev is None:
            c.error(f"could not open {device}, No such file or directory")
            return 1
        devices = [dev]
    reader = None if listing else shell.evdev.open_reader()  # before the header: no event is missed
    try:
        if "q" not in flags and (listing or device is None):
            for n, dev in enumerate(devices, 1):
                c.line(f"add device {n}: {dev.path}")
                c.line(f'  name:     "{dev.name}"')
                if "i" in flags:
                    c.line(f"  bus:      {dev.bus:04x}\n  vendor    {dev.vendor:04x}\n  product   {dev.product:04x}\n"
                           f"  version   {dev.version:04x}")
                if listing:
                    for line in format_capabilities(dev, labels=labels):
                        c.line(line)
        if reader is None:
            return 0
        paths = {d.path for d in devices}
        seen = 0
        while not c.cancel.is_set():
            try:
                e = reader.get(timeout=0.1)
            except queue.Empty:
                continue
            if e.device not in paths:
                continue
            c.write(format_event(e, labels=labels, timestamps="t" in flags, with_device=device is None) + newline)
            seen += 1
            if count and seen >= count:
                return 0
        return 130
    finally:
        if reader is not None:
            shell.evdev.close_reader(reader)
