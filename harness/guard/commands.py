"""What a command sent to the phone does, read by allowlist: an action (a screen action in the
unified action space with the phone's coordinates, or a :class:`harness.core.actions.DeviceCommand` for
one that changes the phone otherwise), a read that changes nothing (passed through untouched), a
channel the guard cannot see into (an on-device server, an interactive shell), or a command it
cannot read (a shell inside the shell, a computed command name). A command the guard does not know
is an action of kind ``command``: shown to the monitor as it is, never let through unjudged.

Sources of the command forms: Android's ``InputShellCommand`` (``input [source] [-d DISPLAY] tap
X Y | swipe X1 Y1 X2 Y2 [MS] | draganddrop | text S | keyevent [--longpress|--duration MS|
--doubletap|--async|--delay MS] K... | motionevent | press | roll | keycombination``; ``%s`` in
text is a space), ``Intent.parseCommandArgs`` (``am start``/``broadcast`` arguments),
ADBKeyBoard's README (``ADB_INPUT_TEXT``/``ADB_INPUT_B64 --es msg``, ``ADB_INPUT_CHARS --eia
chars``, ``ADB_INPUT_CODE``/``ADB_EDITOR_CODE --ei code``, ``ADB_CLEAR_TEXT``), mobile-mcp 1.0.4's
``lib/android.js`` (``devicekit.clipboard.set -e encoding base64 -e text B64``), AOSP adb's
SERVICES.TXT (``reboot:``, ``root:``, ``remount:``, ``tcpip:``, ``abb:`` with NUL-separated
arguments) and ``client/adb_install.cpp`` (``adb install`` streams to ``cmd package install -S``;
``adb uninstall`` runs ``cmd package uninstall``).
"""

from __future__ import annotations

import base64
import binascii
import posixpath
from dataclasses import dataclass, field
from typing import Callable, Literal

from harness.core.actions import Action, ActionError, Click, DeviceCommand, Key, LongPress, OpenApp, Swipe, TypeText
from harness.guard.shell_words import Simple, Word
from harness.core.intent_args import IntentArgs, IntentArgsError, parse_intent_args

Kind = Literal["read", "action", "opaque", "unseen"]


@dataclass
class Reading:
    """What one simple command does: ``kind``; for an action its ``actions`` (several for ``input
    keyevent A B``); for an opaque or unseen one ``why``; ``form`` names the command's form."""

    kind: Kind
    actions: list[Action] = field(default_factory=list)
    why: str = ""
    form: str = ""


# Android KeyEvent codes by name (android.view.KeyEvent): the ones agents send, and the unified
# action's own names for back, home, enter, delete and app switch
KEYCODE_NAMES = {
    "HOME": 3, "BACK": 4, "CALL": 5, "ENDCALL": 6, "DPAD_UP": 19, "DPAD_DOWN": 20, "DPAD_LEFT": 21,
    "DPAD_RIGHT": 22, "DPAD_CENTER": 23, "VOLUME_UP": 24, "VOLUME_DOWN": 25, "POWER": 26, "CAMERA": 27,
    "TAB": 61, "SPACE": 62, "ENTER": 66, "DEL": 67, "MENU": 82, "NOTIFICATION": 83, "SEARCH": 84,
    "MEDIA_PLAY_PAUSE": 85, "PAGE_UP": 92, "PAGE_DOWN": 93, "ESCAPE": 111, "FORWARD_DEL": 112,
    "MOVE_HOME": 122, "MOVE_END": 123, "VOLUME_MUTE": 164, "APP_SWITCH": 187, "SLEEP": 223, "WAKEUP": 224,
    "CUT": 277, "COPY": 278, "PASTE": 279,
    **{chr(ord("A") + k): 29 + k for k in range(26)}, **{str(k): 7 + k for k in range(10)},
}
NAMED = {3: "home", 4: "back", 66: "enter", 67: "delete", 187: "app_switch"}
INPUT_SOURCES = {"keyboard", "mouse", "joystick", "touchnavigation", "touchpad", "trackball", "stylus", "dpad",
                 "gesture", "touchscreen", "gamepad", "rotaryencoder"}
SCRATCH = "/data/local/tmp/"  # the shell's own scratch folder: tools put their dumps and servers here
QUIET_FILES = ("/dev/null", "/dev/tty", "/dev/stdout", "/dev/stderr", "/dev/zero")

# commands that only read (or only compute) and change nothing on the phone
READS = {
    "screencap", "screenrecord", "getprop", "getevent", "ls", "cat", "stat", "echo", "printf", "id", "whoami",
    "uname", "ps", "top", "pidof", "pgrep", "grep", "egrep", "fgrep", "head", "tail", "wc", "sort", "uniq", "tr",
    "cut", "true", "false", "test", "[", "sleep", "exit", "cd", "pwd", "export", "unset", "set", "which", "type",
    "md5sum", "md5", "sha1sum", "sha256sum", "sha512sum", "base64", "df", "du", "mount", "logcat", "log", "ip",
    "ifconfig", "netstat", "ping", "wait", "readlink", "realpath", "basename", "dirname", "file", "od", "xxd",
    "hexdump", "strings", "expr", "seq", "getenforce", "uptime", "free", "env", "printenv", "tty", "nproc",
    "service", "wm", "dumpsys", "uiautomator", "cmd", "settings", "content", "pm", "am", "ime", "date", "find",
    "sed", "diff", "cmp", "comm", "paste", "fold", "rev", "tac", "nl", "less", "more", "getconf", "locale",
}
# a shell or interpreter run inside the shell can hide any action behind text the guard cannot read
OPAQUE = {"sh", "bash", "mksh", "ksh", "zsh", "dash", "ash", "su", "eval", ".", "source", "xargs", "awk", "nawk",
          "gawk", "perl", "python", "python3", "lua", "nc", "netcat", "toybox-sh", "watch", "script", "setsid"}
UNSEEN = {"app_process", "app_process32", "app_process64", "dalvikvm", "dalvikvm32", "dalvikvm64"}
WRITES = {"cp", "mv", "mkdir", "touch", "ln", "chmod", "chown", "chgrp", "dd", "tee", "truncate", "install",
          "tar", "unzip", "gzip", "gunzip"}
PREFIXES = {"nohup", "exec", "time", "toybox", "busybox", "nice", "env", "timeout", "command", "run-as", "stdbuf"}


def device_command(kind: str, simple_text: str, target: str | None = None) -> DeviceCommand:
    return DeviceCommand(kind=kind, target=(target or None) and target[:2000], command=simple_text[:8000])


def _opaque(why: str) -> Reading:
    return Reading("opaque", why=why)


def _act(form: str, *actions: Action) -> Reading:
    return Reading("action", list(actions), form=form)


def _strip_prefixes(words: list[Word]) -> tuple[list[Word], str | None]:
    """The command a prefix runs (``nohup X``, ``env A=B X``, ``timeout 5 X``, ``run-as PKG X``...)."""
    while words:
        name = posixpath.basename(words[0].text)
        if not words[0].literal or name not in PREFIXES:
            return words, None
        rest = words[1:]
        if name == "command":
            if rest and rest[0].text in ("-v", "-V"):
                return words, "read"
            rest = rest[1:] if rest and rest[0].text == "-p" else rest
        elif name == "nice":
            if rest and rest[0].text == "-n":
                rest = rest[2:]
            elif rest and rest[0].text.startswith("-"):
                rest = rest[1:]
        elif name == "env":
            while rest and (rest[0].text.startswith("-") or "=" in rest[0].text):
                rest = rest[2:] if rest[0].text in ("-u", "-C") else rest[1:]
            if not rest:
                return words, "read"
        elif name == "timeout":
            while rest and rest[0].text.startswith("-"):
                rest = rest[2:] if rest[0].text in ("-s", "-k") else rest[1:]
            rest = rest[1:]
        elif name == "run-as":
            while rest and rest[0].text.startswith("-"):
                rest = rest[2:] if rest[0].text == "--user" else rest[1:]
            rest = rest[1:]
        elif name == "stdbuf":
            while rest and rest[0].text.startswith("-"):
                rest = rest[1:]
        elif name in ("toybox", "busybox") and not rest:
            return words, "read"
        words = rest
    return words, "read"


def _under_scratch(path: str) -> bool:
    norm = posixpath.normpath(path)
    return (norm + "/").startswith(SCRATCH) and ".." not in path.split("/")


def read_command(simple: Simple, text: str) -> Reading:
    """What ``simple`` (a simple command of the line ``text``) does."""
    src = text[simple.start:simple.end]
    words, prefix_says = _strip_prefixes(simple.words)
    writes = [w for op, w in simple.redirects if ">" in op and not (op.endswith(">&") and w.text.isdigit() or w.text == "-")]
    out_files = [w for w in writes if not (w.literal and not w.glob and (w.text in QUIET_FILES or _under_scratch(w.text)))]
    if not words or prefix_says == "read":
        reading = Reading("read")
    elif not words[0].literal or words[0].glob:
        return _opaque(f"the command's name is computed ({words[0].raw})")
    else:
        reading = _by_name(posixpath.basename(words[0].text), words, src)
    if out_files and reading.kind == "read":
        targets = ", ".join(w.text for w in out_files)
        return _act("write", device_command("write_files", src, targets))
    return reading


def _by_name(name: str, words: list[Word], src: str) -> Reading:
    argv = [w.text for w in words]
    if name in OPAQUE:
        return _opaque(f"{name} runs commands the guard cannot read")
    if name in UNSEEN:
        return Reading("unseen", why=f"an on-device server ({name}): actions through it are not gated", form=name)
    handler = HANDLERS.get(name)
    if handler is not None:
        return handler(argv, words, src)
    if name in WRITES:
        paths = [a for a in argv[1:] if not a.startswith("-")]
        if paths and all(_under_scratch(p) for p in paths):
            return Reading("read")
        return _act(name, device_command("write_files", src, " ".join(paths)))
    if name in ("rm", "rmdir", "unlink", "shred"):
        paths = [a for a in argv[1:] if not a.startswith("-")]
        if paths and all(_under_scratch(p) for p in paths):
            return Reading("read")
        return _act(name, device_command("delete_files", src, " ".join(paths)))
    if name in READS:
        return Reading("read")
    return _act(name, device_command("command", src, name))


# --- input ---------------------------------------------------------------------------------------
def _number(word: Word) -> int | None:
    if not word.literal:
        return None
    try:
        v = float(word.text)
    except ValueError:
        return None
    return int(round(v)) if v == v and abs(v) < 1e6 else None


def _key(token: str) -> Key | DeviceCommand | None:
    t = token.upper().removeprefix("KEYCODE_")
    code = int(t) if t.isdigit() else KEYCODE_NAMES.get(t)
    if code is None or not 0 <= code <= 1000:
        return None
    return Key(key=NAMED.get(code, code))


def _input(argv: list[str], words: list[Word], src: str) -> Reading:
    i = 1
    while i < len(argv) and (argv[i] in INPUT_SOURCES or argv[i] == "-d"):
        i += 2 if argv[i] == "-d" else 1
    if i >= len(argv):
        return Reading("read")  # the usage text
    sub, rest = argv[i], words[i + 1:]
    if any(not w.literal for w in rest):
        return _opaque(f"input {sub} with computed arguments ({' '.join(w.raw for w in rest)})")
    nums = [_number(w) for w in rest]
    form = f"input {sub}"
    try:
        if sub == "tap" and len(nums) >= 2 and None not in nums[:2]:
            return _act(form, Click(x=nums[0], y=nums[1]))
        if sub in ("swipe", "draganddrop") and len(nums) >= 4 and None not in nums[:4]:
            ms = nums[4] if len(nums) > 4 and nums[4] is not None and nums[4] > 0 else 300
            if (nums[0], nums[1]) == (nums[2], nums[3]) and sub == "swipe":
                # a swipe that does not move, held: Android's long press (mobile-mcp, adb backends)
                if ms >= 400:
                    return _act(form, LongPress(x=nums[0], y=nums[1], duration_ms=min(ms, 60_000)))
                return _act(form, Click(x=nums[0], y=nums[1]))
            return _act(form, Swipe(start=(nums[0], nums[1]), end=(nums[2], nums[3]), duration_ms=min(ms, 60_000)))
        if sub == "text" and rest:
            return _act(form, TypeText(text=rest[0].text.replace("%s", " ")))
        if sub == "keyevent":
            keys = [a for a in argv[i + 1:] if not a.startswith("--")]
            opts = {a for a in argv[i + 1:] if a.startswith("--")}
            if opts & {"--duration", "--delay"}:
                keys = [k for k in keys if not k.isdigit() or len(keys) == 1]
            found = [_key(k) for k in keys]
            if keys and None not in found:
                return _act(form + (" " + " ".join(sorted(opts)) if opts else ""), *found)  # type: ignore[arg-type]
        if sub == "motionevent" and len(nums) >= 3 and None not in nums[1:3]:
            return _act(f"{form} {rest[0].text}", Click(x=nums[1], y=nums[2]))
        if sub == "press":
            return _act(form, Key(key=23))
    except (ActionError, ValueError):
        pass
    return _act(form, device_command("input", src, " ".join(argv[i:])))


# --- activity manager ------------------------------------------------------------------------------
def _intent(args: list[str]) -> IntentArgs:
    try:
        return parse_intent_args(args)
    except IntentArgsError:
        return IntentArgs()  # Android refuses it: nothing starts, but it is still judged as an intent


def _extras(it: IntentArgs) -> dict[str, str]:
    return {k: v for _, k, v in it.extras}


def _describe(it: IntentArgs) -> str:
    parts = [f"{k}={v}" for k, v in (("act", it.action), ("dat", it.data), ("cmp", it.component),
                                         ("pkg", it.package)) if v]
    parts += [f"cat={c}" for c in it.categories] + [f"extra {k}={v[:200]}" for k, v in _extras(it).items()]
    return " ".join(parts)


def _b64(text: str) -> str | None:
    try:
        return base64.b64decode(text, validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None


AM_READS = {"get-current-user", "get-config", "stack", "get-standby-bucket", "get-inactive", "get-uid-state",
            "list-display-ids", "monitor", "help", "dumpheap"}


def _am(argv: list[str], words: list[Word], src: str) -> Reading:
    if len(argv) < 2:
        return Reading("read")
    sub, rest = argv[1], argv[2:]
    form = f"am {sub}"
    if sub in ("start", "start-activity"):
        it = _intent(rest)
        pkg = it.component.partition("/")[0] or it.package
        if it.data and (it.action in ("", "android.intent.action.VIEW")) and "://" in it.data:
            return _act(form, device_command("open_url", src, it.data))
        if pkg and not it.data and not it.extras and it.action in ("", "android.intent.action.MAIN"):
            return _act(form, OpenApp(app=pkg[:200]))
        return _act(form, device_command("intent", src, _describe(it)))
    if sub == "broadcast":
        return _broadcast(_intent(rest), src, form)
    if sub in ("force-stop", "stop-app", "kill", "kill-all"):
        pkgs = [a for a in rest if not a.startswith("-") and not a.isdigit()]
        return _act(form, device_command("force_stop", src, " ".join(pkgs)))
    if sub in ("startservice", "start-service", "start-foreground-service", "stopservice", "stop-service"):
        return _act(form, device_command("service", src, _describe(_intent(rest))))
    if sub == "instrument":
        return Reading("unseen", why="an on-device test runner (am instrument): actions through it are not gated",
                       form=form)
    if sub in AM_READS or sub.startswith("get-") or (sub == "task" and rest[:1] in ([], ["list"])):
        return Reading("read")
    return _act(form, device_command("activity_manager", src, sub))


def _broadcast(it: IntentArgs, src: str, form: str) -> Reading:
    extras = _extras(it)
    msg = extras.get("msg", "")
    if it.action == "ADB_INPUT_TEXT":
        return _act(f"{form} ADBKeyboard", TypeText(text=msg[:10_000]))
    if it.action == "ADB_INPUT_B64":
        text = _b64(msg)
        if text is not None:
            return _act(f"{form} ADBKeyboard", TypeText(text=text[:10_000]))
    if it.action == "ADB_INPUT_CHARS":
        try:
            text = "".join(chr(int(v)) for v in extras.get("chars", "").split(",") if v.strip())
            return _act(f"{form} ADBKeyboard", TypeText(text=text[:10_000]))
        except (ValueError, OverflowError):
            pass
    if it.action == "ADB_INPUT_CODE":
        k = _key(extras.get("code", ""))
        if k is not None:
            return _act(f"{form} ADBKeyboard", k)
    if it.action == "ADB_CLEAR_TEXT":
        return _act(f"{form} ADBKeyboard", TypeText(text="", clear=True))
    if "clipboard" in it.action.lower() or it.action.startswith("clipper."):
        text = extras.get("text")
        if text is not None and extras.get("encoding") == "base64":
            text = _b64(text) or text
        return _act(f"{form} clipboard", device_command("clipboard", src, text))
    return _act(form, device_command("broadcast", src, _describe(it)))


def _monkey(argv: list[str], words: list[Word], src: str) -> Reading:
    pkgs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-p"]
    count = argv[-1] if len(argv) > 1 and argv[-1].isdigit() else None
    if len(pkgs) == 1 and count == "1":
        return _act("monkey -p", OpenApp(app=pkgs[0][:200]))
    return _act("monkey", device_command("random_events", src, " ".join(pkgs)))


# --- package manager, settings, content, window manager ----------------------------------------------
PM_READS = {"list", "path", "dump", "query-activities", "query-services", "query-receivers", "resolve-activity",
            "has-feature", "get-install-location", "get-max-users", "get-max-running-users", "help",
            "get-app-links", "get-harmful-app-warning", "get-privapp-permissions", "get-oem-permissions",
            "get-instantapp-resolver", "get-moduleinfo", "art", "dump-profiles", "snapshot-profile"}
PM_KINDS = {"uninstall": "uninstall", "clear": "clear_data", "grant": "permission", "revoke": "permission",
            "reset-permissions": "permission", "disable": "app_state", "disable-user": "app_state",
            "disable-until-used": "app_state", "enable": "app_state", "hide": "app_state", "unhide": "app_state",
            "suspend": "app_state", "unsuspend": "app_state", "default-state": "app_state"}


def _pm(argv: list[str], words: list[Word], src: str, form: str = "pm") -> Reading:
    if len(argv) < 2:
        return Reading("read")
    sub, rest = argv[1], argv[2:]
    if sub in PM_READS:
        return Reading("read")
    targets = [a for a in rest if not a.startswith("-") and not a.isdigit()]
    if sub.startswith("install"):
        return _act(f"{form} {sub}", device_command("install", src, " ".join(targets) or None))
    return _act(f"{form} {sub}", device_command(PM_KINDS.get(sub, "package"), src, targets[-1] if targets else None))


def _settings(argv: list[str], words: list[Word], src: str) -> Reading:
    args = [a for a in argv[1:] if not a.startswith("--")]
    if not args or args[0] in ("get", "list"):
        return Reading("read")
    return _act(f"settings {args[0]}", device_command("settings", src, " ".join(args[1:4])))


def _content(argv: list[str], words: list[Word], src: str) -> Reading:
    if len(argv) < 2 or argv[1] in ("query", "read", "gettype", "help"):
        return Reading("read")
    uri = next((argv[k + 1] for k, a in enumerate(argv[:-1]) if a == "--uri"), None)
    return _act(f"content {argv[1]}", device_command("content", src, uri))


def _wm(argv: list[str], words: list[Word], src: str) -> Reading:
    if len(argv) < 2 or (argv[1] in ("size", "density") and len(argv) == 2) or argv[1].startswith("get"):
        return Reading("read")
    return _act(f"wm {argv[1]}", device_command("display", src, " ".join(argv[1:])))


def _ime(argv: list[str], words: list[Word], src: str) -> Reading:
    if len(argv) < 2 or argv[1] in ("list", "help"):
        return Reading("read")
    return _act(f"ime {argv[1]}", device_command("input_method", src, " ".join(argv[2:]) or None))


def _uiautomator(argv: list[str], words: list[Word], src: str) -> Reading:
    if len(argv) < 2 or argv[1] in ("dump", "events", "help"):
        return Reading("read")
    return Reading("unseen", why=f"an on-device test runner (uiautomator {argv[1]}): actions through it are not gated",
                   form=f"uiautomator {argv[1]}")


def _dumpsys(argv: list[str], words: list[Word], src: str) -> Reading:
    changing = {"set", "reset", "unplug", "force-idle", "unforce", "enable", "disable", "step", "whitelist", "put"}
    if any(a in changing for a in argv[2:]):
        return _act(f"dumpsys {argv[1]}", device_command("dumpsys", src, " ".join(argv[1:3])))
    return Reading("read")


def _date(argv: list[str], words: list[Word], src: str) -> Reading:
    if all(a.startswith("+") or a in ("-u", "-R", "-I", "--utc") for a in argv[1:]):
        return Reading("read")
    return _act("date", device_command("set_time", src, " ".join(argv[1:])))


def _find(argv: list[str], words: list[Word], src: str) -> Reading:
    if any(a in ("-exec", "-execdir", "-ok", "-okdir") for a in argv):
        return _opaque("find -exec runs commands the guard cannot read")
    if "-delete" in argv:
        return _act("find -delete", device_command("delete_files", src, argv[1] if len(argv) > 1 else None))
    return Reading("read")


def _sed(argv: list[str], words: list[Word], src: str) -> Reading:
    if any(a == "-i" or (a.startswith("-i") and not a.startswith("--")) or a.startswith("--in-place") for a in argv[1:]):
        return _act("sed -i", device_command("write_files", src, argv[-1]))
    return Reading("read")


# `cmd SERVICE ...`: the services whose shell command is also a command of its own
CMD_SERVICES = {"package": "pm", "activity": "am", "settings": "settings", "window": "wm", "input": "input",
                "input_method": "ime"}
CMD_READS = {("display", "get-displays"), ("-l", None), ("statusbar", None)}


def _cmd(argv: list[str], words: list[Word], src: str) -> Reading:
    if len(argv) < 2 or argv[1] == "-l":
        return Reading("read")
    service = argv[1]
    mapped = CMD_SERVICES.get(service)
    if mapped is not None:
        if mapped == "pm":
            return _pm([mapped, *argv[2:]], words[1:], src, form="cmd package")
        return HANDLERS[mapped]([mapped, *argv[2:]], words[1:], src)
    sub = argv[2] if len(argv) > 2 else None
    if (service, sub) in CMD_READS or (sub or "").startswith(("get", "list", "dump")):
        return Reading("read")
    return _act(f"cmd {service}", device_command("system_service", src, " ".join(argv[1:3])))


def _changes(kind: str) -> Callable[[list[str], list[Word], str], Reading]:
    def handler(argv: list[str], words: list[Word], src: str) -> Reading:
        return _act(argv[0], device_command(kind, src, " ".join(argv[1:3]) or None))
    return handler


def _gets_or(kind: str) -> Callable[[list[str], list[Word], str], Reading]:
    """A tool whose ``get``/``list`` subcommands read and the rest change (appops, device_config...)."""
    def handler(argv: list[str], words: list[Word], src: str) -> Reading:
        if len(argv) < 2 or argv[1].startswith(("get", "list", "help", "query")):
            return Reading("read")
        return _act(f"{argv[0]} {argv[1]}", device_command(kind, src, " ".join(argv[1:3])))
    return handler


HANDLERS: dict[str, Callable[[list[str], list[Word], str], Reading]] = {
    "input": _input, "am": _am, "monkey": _monkey, "pm": _pm, "settings": _settings, "content": _content,
    "wm": _wm, "ime": _ime, "uiautomator": _uiautomator, "dumpsys": _dumpsys, "date": _date, "find": _find,
    "sed": _sed, "cmd": _cmd, "svc": _changes("system_service"), "setprop": _changes("property"),
    "reboot": _changes("reboot"), "shutdown": _changes("reboot"), "kill": _changes("kill_process"),
    "pkill": _changes("kill_process"), "killall": _changes("kill_process"), "sendevent": _changes("raw_input"),
    "locksettings": _gets_or("lock_settings"), "appops": _gets_or("app_ops"), "device_config": _gets_or("device_config"),
    "telecom": _gets_or("telephony"), "bmgr": _gets_or("backup"), "sm": _gets_or("storage"),
}


# --- services other than a shell ---------------------------------------------------------------------
SERVICE_KINDS = {"reboot": "reboot", "root": "root", "unroot": "root", "remount": "remount", "tcpip": "tcpip",
                 "usb": "usb", "disable-verity": "verity", "enable-verity": "verity", "backup": "backup",
                 "restore": "restore", "sideload": "install", "sideload-host": "install"}
SERVICE_READS = ("sync:", "framebuffer:", "track-jdwp", "track-app", "reverse:")
SERVICE_UNSEEN = ("tcp:", "local:", "localabstract:", "localreserved:", "localfilesystem:", "dev:", "vsock:", "jdwp:",
                  "dev-raw:")


def read_service(service: str) -> Reading:
    """A device service other than ``shell``/``exec``/``abb`` (those carry commands to read)."""
    if service.startswith(SERVICE_READS):
        return Reading("read")
    if service.startswith(SERVICE_UNSEEN):
        return Reading("unseen", why=f"a socket to a server on the phone ({service[:60]}): what goes through it is "
                                     "not gated", form=service.split(":")[0])
    name, _, arg = service.partition(":")
    kind = SERVICE_KINDS.get(name)
    if kind is not None:
        return _act(f"{name}:", device_command(kind, service, arg.rstrip(":") or None))
    return _opaque(f"a service the guard does not know ({service[:60]})")
