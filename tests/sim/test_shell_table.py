"""The simulated shell's command table: which names a phone answers to, where each command lives,
and one phone's table apart from another's."""

from __future__ import annotations

import pytest

from fake_phone import FakePhone
from harness.sim.shell import Shell
from harness.sim.shell.table import COMMANDS, command

# What `which`/`type` and the dispatcher know: the commands and their aliases (toybox's checksum
# names, mksh, app_process64/32, `[`).
EXPECTED = sorted("""
[ am app_process app_process32 app_process64 base64 cat cd chmod chown cmd cp date dumpsys echo env exit
export false getevent getprop grep head id ime input kill killall log logcat ls md5 md5sum mkdir mksh monkey mv
pgrep pidof pkill pm printf ps pwd reboot rm rmdir screencap sendevent set setprop settings sh sha1sum sha256sum
sha512sum sleep sort stat su svc sync tail tee test touch tr true type uiautomator uname uniq unset wait
wc which whoami wm
""".split())

GROUPS = {
    "builtins": "sh true false exit cd pwd export unset env set echo printf sleep wait which type test",
    "files": "ls cat rm rmdir mkdir touch cp mv stat md5sum base64 chmod chown sync",
    "text": "head tail wc grep sort uniq tee tr",
    "input": "input getevent sendevent",
    "screen": "screencap wm uiautomator",
    "dumpsys": "dumpsys",
    "am": "am monkey",
    "pm": "pm",
    "settings": "settings getprop setprop ime svc",
    "system": "ps pidof pgrep pkill killall kill app_process cmd reboot su id whoami uname date log logcat",
}


def test_every_command_and_alias_is_in_the_table() -> None:
    sh = Shell(FakePhone())
    assert sh.commands() == EXPECTED
    assert sh.handler("[") is sh.handler("test") and sh.handler("sha256sum") is sh.handler("md5sum")
    assert sh.handler("nosuch") is None


def test_commands_live_in_the_module_of_what_they_serve() -> None:
    for group, names in GROUPS.items():
        for name in names.split():
            assert COMMANDS[name].__module__ == f"harness.sim.shell.commands.{group}", name


def test_a_name_registers_once() -> None:
    with pytest.raises(ValueError, match="'ls' is registered twice"):
        command("ls")(lambda c: 0)
    assert COMMANDS["ls"].__module__ == "harness.sim.shell.commands.files"


def test_each_phone_has_its_own_table() -> None:
    a, b = Shell(FakePhone()), Shell(FakePhone())
    a._commands["echo"] = lambda c: 7
    assert a.execute("echo hi").exit_code == 7
    assert b.execute("echo hi").stdout == b"hi\n"


def test_cmd_reaches_a_command_through_the_phones_table() -> None:
    sh = Shell(FakePhone())
    sh._commands["wm"] = lambda c: (c.line("wm " + " ".join(c.argv[1:])), 0)[1]
    assert sh.execute("cmd window size").stdout == b"wm size\n"


def test_dumpsys_finds_only_its_services() -> None:
    sh = Shell(FakePhone())
    for name in ("window_policy", "window.policy", "_window", "nosuch"):  # before: the first two reached a helper and crashed
        r = sh.execute(f"dumpsys {name}")
        assert (r.stdout, r.stderr, r.exit_code) == (b"", f"Can't find service: {name}\n".encode(), 0)
    assert sh.execute("dumpsys window policy").stdout.startswith(b"WINDOW MANAGER POLICY STATE")
