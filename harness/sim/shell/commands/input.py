"""Android's ``input`` (InputShellCommand): taps, swipes, key events, text, motion events."""

from __future__ import annotations

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
