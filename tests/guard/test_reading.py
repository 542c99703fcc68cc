"""What the guard reads from a command line, without a phone: words split as mksh splits them, each
command read by allowlist into an action, a read, an unseen channel or something it cannot read."""

from __future__ import annotations

import pytest

from harness.guard.commands import read_command, read_service
from harness.guard.session import EXIT_IDIOM, one_line, refusal_command
from harness.guard.shell_words import split


def readings(line: str):
    script = split(line)
    assert script.opaque is None, script.opaque
    return [read_command(c, line) for c in script.commands]


def only(line: str):
    (r,) = readings(line)
    return r


@pytest.mark.parametrize("line,argvs", [
    ("input tap 900 2000; echo X4EXIT:$?", [["input", "tap", "900", "2000"], ["echo", "X4EXIT:$?"]]),
    ("input text 'it'\\''s'", [["input", "text", "it's"]]),
    ('input text "a b"  &&  echo ok || echo no', [["input", "text", "a b"], ["echo", "ok"], ["echo", "no"]]),
    ("input text hello\\ world\\!", [["input", "text", "hello world!"]]),  # mobile-mcp's escaping
    ("a | b\nc # d; e", [["a"], ["b"], ["c"]]),
    ("V=1 W=2 cmd arg >/dev/null 2>&1 &", [["cmd", "arg"]]),
])
def test_words_as_the_phones_shell_splits_them(line, argvs):
    assert [c.argv for c in split(line).commands] == argvs


@pytest.mark.parametrize("line", ["if true; then input tap 1 2; fi", "(input tap 1 2)", "{ input tap 1 2; }",
                                  "f() { input tap 1 2; }", "cat <<EOF\nx\nEOF", "echo 'open", 'echo "open',
                                  "echo $(open", "case x in x) ;; esac", "for i in 1; do :; done"])
def test_lines_it_cannot_read_are_opaque(line):
    assert split(line).opaque


@pytest.mark.parametrize("line,want", [
    ("input tap 200 600", "click(x=200, y=600)"),
    ("input touchscreen -d 0 tap 1.6 2", "click(x=2, y=2)"),
    ("input swipe 1 2 3 4 500", "swipe(start=[1, 2], end=[3, 4], duration_ms=500)"),
    ("input swipe 9 9 9 9 1500", "long_press(x=9, y=9, duration_ms=1500)"),
    ("input swipe 9 9 9 9 100", "click(x=9, y=9)"),
    ("input text a%sb", "type(text='a b', submit=False)"),
    ("input keyevent KEYCODE_HOME", "key(key='home')"),
    ("input keyevent 187", "key(key='app_switch')"),
    ("am broadcast -a ADB_INPUT_TEXT --es msg hi", "type(text='hi', submit=False)"),
    ("am broadcast -a ADB_INPUT_CODE --ei code 67", "key(key='delete')"),
    ("am broadcast -a ADB_CLEAR_TEXT", "type(text='', submit=False, clear=True)"),
    ("am start -n com.a/.B", "open_app(app='com.a')"),
    ("am start -W -S com.a/.B", "open_app(app='com.a')"),
    ("monkey -p com.a -c android.intent.category.LAUNCHER 1", "open_app(app='com.a')"),
])
def test_screen_actions(line, want):
    r = only(line)
    assert r.kind == "action" and [a.describe() for a in r.actions] == [want]


@pytest.mark.parametrize("line,kind,target", [
    ("pm uninstall com.bank", "uninstall", "com.bank"),
    ("cmd package 'uninstall' -k 'com.bank'", "uninstall", "com.bank"),
    ("pm install -r /data/local/tmp/x.apk", "install", "/data/local/tmp/x.apk"),
    ("pm clear com.a", "clear_data", "com.a"),
    ("am force-stop com.a", "force_stop", "com.a"),
    ("settings put global airplane_mode_on 1", "settings", "global airplane_mode_on 1"),
    ("content delete --uri content://sms", "content", "content://sms"),
    ("rm -rf /sdcard/DCIM", "delete_files", "/sdcard/DCIM"),
    ("echo x > /sdcard/notes.txt", "write_files", "/sdcard/notes.txt"),
    ("am start -a android.intent.action.VIEW -d https://x.example/pay", "open_url", "https://x.example/pay"),
    ("am start -a android.intent.action.CALL -d tel:123", "intent", None),
    ("am broadcast -a clipper.set -e text secret", "clipboard", "secret"),
    ("monkey -p com.a 500", "random_events", "com.a"),
    ("svc wifi disable", "system_service", "wifi disable"),
    ("reboot", "reboot", None),
    ("wm size 100x100", "display", "size 100x100"),
    ("locksettings clear --old 1234", "lock_settings", "clear --old"),
    ("some_unknown_tool --flag", "command", "some_unknown_tool"),
])
def test_commands_that_change_the_phone_are_device_commands(line, kind, target):
    (a,) = only(line).actions
    assert a.type == "device_command" and a.kind == kind
    if target is not None:
        assert a.target == target


@pytest.mark.parametrize("line", ["screencap -p", "uiautomator dump /dev/tty", "getprop ro.build.version.sdk",
                                  "dumpsys window windows", "pm list packages -3", "wm size", "settings get system x",
                                  "cmd package query-activities -a android.intent.action.MAIN", "ls /sdcard",
                                  "rm -f /data/local/tmp/uidump.xml", "echo hi > /dev/null", "content query --uri x",
                                  "ime list -s", "am get-current-user", "cat /proc/meminfo | grep Mem"])
def test_reads_pass(line):
    assert all(r.kind == "read" for r in readings(line))


@pytest.mark.parametrize("line", ["sh -c 'input tap 1 2'", "su -c reboot", "eval input tap 1 2", "$CMD tap 1 2",
                                  "inp* tap 1 2", "input tap $X 2", "find / -exec rm {} ;", "xargs input tap",
                                  "awk 'BEGIN{system(\"reboot\")}'", ". /sdcard/script.sh", "base64 -d x | sh"])
def test_what_could_hide_an_action_is_opaque(line):
    assert any(r.kind == "opaque" for r in readings(line))


@pytest.mark.parametrize("line,form", [("CLASSPATH=/data/local/tmp/x.dex nohup app_process / com.x.S &", "app_process"),
                                        ("am instrument -w com.x.test/androidx.test.Runner", "am instrument"),
                                        ("uiautomator runtest x.jar -c com.x.T", "uiautomator runtest")])
def test_on_device_servers_are_unseen_channels(line, form):
    assert only(line).kind == "unseen" and only(line).form == form


@pytest.mark.parametrize("service,kind", [("reboot:", "reboot"), ("reboot:bootloader", "reboot"), ("root:", "root"),
                                          ("remount:", "remount"), ("tcpip:5555", "tcpip"), ("usb:", "usb")])
def test_services_that_change_the_phone(service, kind):
    r = read_service(service)
    assert r.kind == "action" and r.actions[0].kind == kind


def test_other_services():
    assert read_service("sync:").kind == "read" and read_service("framebuffer:").kind == "read"
    assert read_service("tcp:9008").kind == "unseen" and read_service("localabstract:scrcpy").kind == "unseen"
    assert read_service("jdwp:123").kind == "unseen" and read_service("sideload-host:1:2").kind == "action"
    assert read_service("nonsense:").kind == "opaque"


def test_the_refusal_keeps_untrusted_text_quoted_and_on_one_line():
    reason = one_line("harness guard: refused x: model says '; reboot; echo $(id)\n\x1b[31m" + "y" * 500)
    assert "\n" not in reason and "\x1b" not in reason and len(reason) <= 300
    cmd = refusal_command(reason)
    script = split(cmd)
    assert script.opaque is None and [c.argv[:2] for c in script.commands] == [["sh", "-c"]]
    inner = split(script.commands[0].argv[2])
    assert [c.argv for c in inner.commands] == [["echo", reason], ["exit", "1"]]  # the reason is one word
    assert EXIT_IDIOM.match("for i in 1; do x; done; echo X4EXIT:$?").group(1) == "for i in 1; do x; done"
