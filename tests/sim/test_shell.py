"""The simulated shell: parsing, quoting, injection safety, Android commands (mostly in-process),
plus the injection case end to end through adbutils and the real adb server."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
import threading
import time

import pytest

from fake_phone import FakePhone
from harness.sim.shell import Shell, parse


@pytest.fixture
def phone() -> FakePhone:
    return FakePhone()


@pytest.fixture
def sh(phone: FakePhone) -> Shell:
    from harness.sim.u2 import U2Server

    return Shell(phone, u2=U2Server(phone))


def out(sh: Shell, cmd: str, stdin: bytes = b"") -> str:
    return sh.execute(cmd, stdin=stdin, merge=True).stdout.decode()


# --- parsing and quoting -------------------------------------------------------------------------
def test_quotes_and_escapes(sh: Shell) -> None:
    assert out(sh, "echo 'a  b' \"c  d\" e\\ f") == "a  b c  d e f\n"
    assert out(sh, "echo 'a; echo INJECTED'") == "a; echo INJECTED\n"
    assert out(sh, 'echo "x;y" && echo "$?"') == "x;y\n0\n"
    assert out(sh, "echo a\\;b") == "a;b\n"
    assert out(sh, "echo 'it'\\''s'") == "it's\n"
    assert out(sh, 'echo "a\\"b" \'$HOME\' "$HOME"') == 'a"b $HOME /\n'
    assert sh.log[-1] == ["echo", 'a"b', "$HOME", "/"]


def test_status_and_lists(sh: Shell) -> None:
    assert out(sh, "echo hi; false; echo $?") == "hi\n1\n"
    assert out(sh, "true && echo yes || echo no") == "yes\n"
    assert out(sh, "false && echo yes || echo no") == "no\n"
    assert out(sh, "false || false; echo $?") == "1\n"
    assert out(sh, "! false; echo $?") == "0\n"
    assert sh.execute("exit 3; echo never").exit_code == 3
    assert sh.execute("echo X; exit 7").stdout == b"X\n"
    assert sh.execute("sh_missing_cmd").exit_code == 127


def test_pipes_and_redirects(sh: Shell, phone: FakePhone) -> None:
    assert out(sh, "printf 'a\\nb\\nc\\n' | grep -v b | wc -l") == "2\n"
    assert out(sh, "echo hello | base64") == base64.b64encode(b"hello\n").decode() + "\n"
    assert out(sh, "echo aGVsbG8= | base64 -d") == "hello"
    assert out(sh, "printf '1\\n2\\n3\\n4\\n' | head -n 2 | tail -n 1") == "2\n"
    assert out(sh, "echo data > /sdcard/f.txt; cat /sdcard/f.txt") == "data\n"
    assert out(sh, "echo more >> /sdcard/f.txt; cat /sdcard/f.txt") == "data\nmore\n"
    assert phone.fs.read("/sdcard/f.txt") == b"data\nmore\n"
    r = sh.execute("cat /nope 2>&1")
    assert r.stdout == b"cat: /nope: No such file or directory\n" and r.stderr == b""
    r = sh.execute("cat /nope 2>/dev/null")
    assert r.stdout == r.stderr == b"" and r.exit_code == 1
    r = sh.execute("echo to-err >&2")
    assert r.stderr == b"to-err\n" and r.stdout == b""
    assert out(sh, "echo x >/dev/null; echo $?") == "0\n"
    assert out(sh, "cat < /sdcard/f.txt | grep -c more") == "1\n"
    r = sh.execute("echo x > /system/evil")
    assert r.exit_code == 1 and b"Read-only file system" in r.stderr
    r = sh.execute("echo x > /sdcard/nodir/file")
    assert r.exit_code == 1 and b"No such file or directory" in r.stderr


def test_variables_substitution_globs(sh: Shell, phone: FakePhone) -> None:
    assert out(sh, "X=1; echo $X ${X}") == "1 1\n"
    assert out(sh, "X='a b'; echo \"[$X]\"; printf '<%s>' $X") == "[a b]\n<a><b>"
    assert out(sh, "echo $(echo inner) `echo tick`") == "inner tick\n"
    phone.fs.write("/sdcard/Pictures/a.png", b"1")
    phone.fs.write("/sdcard/Pictures/b.png", b"2")
    assert out(sh, "ls /sdcard/Pictures/*.png") == "/sdcard/Pictures/a.png\n/sdcard/Pictures/b.png\n"
    assert out(sh, "echo '/sdcard/Pictures/*.png'") == "/sdcard/Pictures/*.png\n"


def test_syntax_errors_and_unsupported(sh: Shell) -> None:
    r = sh.execute("echo 'unterminated")
    assert r.exit_code == 2 and b"syntax error" in r.stderr
    r = sh.execute("if true; then echo x; fi")
    assert r.exit_code == 2 and b"not supported" in r.stderr
    assert parse("a | b && c; d")  # smoke


def test_injection_via_shlex_quote_runs_nothing(sh: Shell, phone: FakePhone) -> None:
    phone.fs.write("/sdcard/keep.txt", b"keep")
    before = phone.fs.digest()
    payload = "'; rm -rf /sdcard; echo '"
    sh.log.clear()
    r = sh.execute(" ".join(shlex.quote(a) for a in ["input", "text", payload]) + "; echo X4EXIT:$?")
    assert r.stdout == b"X4EXIT:0\n"
    assert sh.log == [["input", "text", payload], ["echo", "X4EXIT:0"]]
    assert phone.fs.digest() == before
    assert phone.events[-1] == ("input_text", payload)
    for evil in ["$(rm -rf /sdcard)", "`rm -rf /sdcard`", "a && rm -rf /sdcard", "a | rm -rf /sdcard", "\n rm -rf /sdcard"]:
        sh.log.clear()
        sh.execute("echo " + shlex.quote(evil))
        assert sh.log == [["echo", evil]]
    assert phone.fs.digest() == before


def test_handler_exception_becomes_error(sh: Shell, phone: FakePhone, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(x: int, y: int) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(phone, "tap", boom)
    r = sh.execute("input tap 1 2; echo after $?")
    assert b"kaboom" in r.stderr and r.stdout == b"after 1\n"


# --- Android commands ----------------------------------------------------------------------------
def test_input_commands(sh: Shell, phone: FakePhone) -> None:
    sh.execute("input tap 10 20")
    sh.execute("input swipe 100 200 300 400 250")
    sh.execute("input swipe 100 200 100 200 1000")  # the long-press idiom
    sh.execute("input keyevent BACK KEYCODE_HOME 66")
    sh.execute("input text hello%sworld")
    sh.execute("input touchscreen tap 5 6")
    assert phone.events == [
        ("tap", 10, 20),
        ("swipe", 100, 200, 300, 400, 250),
        ("long_press", 100, 200, 1000),
        ("keyevent", "BACK"),
        ("keyevent", "KEYCODE_HOME"),
        ("keyevent", 66),
        ("input_text", "hello world"),
        ("tap", 5, 6),
    ]
    assert sh.execute("input keyevent BOGUS").exit_code == 1
    assert sh.execute("input tap 1").exit_code == 1
    # Android's `input text` cannot type characters outside the virtual keyboard's key map
    n = len(phone.events)
    assert sh.execute("input text 中文").exit_code == 0
    assert len(phone.events) == n
    sh.execute("input motionevent DOWN 50 60; input motionevent UP 51 61")
    assert phone.events[-1] == ("tap", 50, 60)


def test_screen_and_window_commands(sh: Shell, phone: FakePhone) -> None:
    assert sh.execute("screencap -p").stdout == phone._png
    raw = sh.execute("screencap").stdout
    w, h, fmt = (int.from_bytes(raw[i : i + 4], "little") for i in (0, 4, 8))
    assert (w, h, fmt) == (1080, 2400, 1) and raw[16:] == phone._rgba
    sh.execute("screencap -p /sdcard/s.png")
    assert phone.fs.read("/sdcard/s.png") == phone._png
    assert out(sh, "wm size") == "Physical size: 1080x2400\n"
    assert out(sh, "wm density") == "Physical density: 420\n"
    phone.focus = ("com.example.notes", "com.example.notes.EditActivity")
    win = out(sh, "dumpsys window windows")
    # the regex adbutils 2.12 uses in app_current()
    m = re.search(r"mCurrentFocus=Window{.*\s+(?P<package>[^\s]+)/(?P<activity>[^\s]+)\}", win)
    assert m and m.group("package") == "com.example.notes" and m.group("activity") == "com.example.notes.EditActivity"
    assert "mFocusedApp=ActivityRecord{" in win
    disp = out(sh, "dumpsys display")
    m = re.search(r".*DisplayViewport{.*?valid=true, .*?orientation=(?P<o>\d+), .*?deviceWidth=(?P<w>\d+), deviceHeight=(?P<h>\d+).*", disp)
    assert m and (m.group("o"), m.group("w"), m.group("h")) == ("0", "1080", "2400")
    state = json.loads(out(sh, "dumpsys crate_sim state"))
    assert state["名前"] == "模拟"
    r = sh.execute("dumpsys nosuchservice")
    assert r.stderr == b"Can't find service: nosuchservice\n"


def test_uiautomator_dump(sh: Shell, phone: FakePhone) -> None:
    assert out(sh, "uiautomator dump") == "UI hierchary dumped to: /sdcard/window_dump.xml\n"
    xml = phone.fs.read("/sdcard/window_dump.xml").decode()
    assert xml.startswith("<?xml") and "<hierarchy" in xml
    assert out(sh, "rm -f /data/local/tmp/uidump.xml; uiautomator dump /data/local/tmp/uidump.xml && echo success").endswith("success\n")


def test_am_pm_monkey(sh: Shell, phone: FakePhone) -> None:
    r = sh.execute("am start -W -n com.example.notes/.EditActivity")
    assert r.exit_code == 0 and b"Starting: Intent { cmp=com.example.notes/.EditActivity }" in r.stdout
    assert b"Status: ok" in r.stdout
    assert phone.focus == ("com.example.notes", "com.example.notes.EditActivity")
    assert sh.execute("am start -n com.nope/.Main").exit_code == 1
    sh.execute("am force-stop com.example.notes")
    assert phone.events[-1] == ("force_stop", "com.example.notes")
    r = sh.execute("am broadcast -a ADB_INPUT_B64 --es msg 5Lit5paH --ei n 3 --ez flag true")
    assert r.stdout.decode().splitlines() == [
        "Broadcasting: Intent { act=ADB_INPUT_B64 flg=0x400000 (has extras) }",
        "Broadcast completed: result=0",
    ]
    assert phone.broadcasts[-1] == ("ADB_INPUT_B64", {"msg": "5Lit5paH", "n": 3, "flag": True})
    r = sh.execute("monkey -p com.example.shop -c android.intent.category.LAUNCHER 1")
    assert r.exit_code == 0 and b"Events injected: 1" in r.stdout and phone.focus[0] == "com.example.shop"
    assert sh.execute("monkey -p com.nope -c android.intent.category.LAUNCHER 1").exit_code != 0
    assert out(sh, "pm clear com.example.notes") == "Success\n"
    assert out(sh, "pm clear com.nope") == "Failed\n"
    assert out(sh, "pm list packages notes") == "package:com.example.notes\n"
    assert "package:com.android.settings" in out(sh, "pm list packages")
    assert out(sh, "pm path com.example.notes").startswith("package:/data/app/")
    assert sh.execute("pm path com.nope").exit_code == 1
    assert "com.example.shop" in out(sh, "ps -A")


def test_props_settings_ime(sh: Shell, phone: FakePhone) -> None:
    assert out(sh, "getprop ro.product.model") == "CrateFake\n"
    assert out(sh, "getprop ro.build.version.sdk") == "34\n"
    assert "[ro.serialno]: [fake-sim]" in out(sh, "getprop")
    assert out(sh, "settings get system screen_brightness") == "128\n"
    sh.execute("settings put global wifi_on 0")
    assert out(sh, "settings get global wifi_on") == "0\n"
    assert out(sh, "settings get secure nothing_here") == "null\n"
    assert out(sh, "ime list -s") == "".join(i + "\n" for i in phone.imes)
    assert out(sh, "ime set com.android.adbkeyboard/.AdbIME").startswith("Input method com.android.adbkeyboard/.AdbIME selected")
    assert phone.ime == "com.android.adbkeyboard/.AdbIME"
    assert out(sh, "settings get secure default_input_method") == "com.android.adbkeyboard/.AdbIME\n"


def test_file_tools(sh: Shell, phone: FakePhone) -> None:
    assert sh.execute("mkdir /sdcard/a/b").exit_code == 1
    assert sh.execute("mkdir -p /sdcard/a/b && touch /sdcard/a/b/c").exit_code == 0
    assert out(sh, "ls /sdcard/a/b") == "c\n"
    assert out(sh, "stat -c %s /sdcard/a/b/c") == "0\n"
    phone.fs.write("/sdcard/a/x", b"12345")
    assert out(sh, "toybox md5sum /sdcard/a/x") == hashlib.md5(b"12345").hexdigest() + "  /sdcard/a/x\n"
    assert out(sh, "sha256sum /sdcard/a/x").startswith(hashlib.sha256(b"12345").hexdigest())
    assert sh.execute("rm /sdcard/a").exit_code == 1
    assert sh.execute("rm -rf /sdcard/a").exit_code == 0 and not phone.fs.exists("/sdcard/a")
    r = sh.execute("rm -rf /sdcard")
    assert r.exit_code == 1 and phone.fs.is_dir("/sdcard/Download")
    assert sh.execute("rm -rf /").exit_code == 1
    assert out(sh, "which input") == "/system/bin/input\n"
    assert out(sh, "id").startswith("uid=2000(shell)")
    assert out(sh, "cat", stdin=b"piped") == "piped"


def test_sleep_honours_cancel(sh: Shell) -> None:
    cancel, inside = threading.Event(), threading.Event()
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(sh.run("echo in; sleep 30", lambda b: inside.set(), cancel=cancel)))
    t0 = time.monotonic()
    t.start()
    assert inside.wait(5)  # the shell is at the sleep, not before it
    cancel.set()
    t.join(5)
    assert result and time.monotonic() - t0 < 3


def test_app_process_starts_u2_only_with_jar(sh: Shell, phone: FakePhone) -> None:
    cmd = "CLASSPATH=/data/local/tmp/u2.jar app_process / com.wetest.uia2.Main -p 9008"
    r = sh.execute(cmd)
    assert r.exit_code == 1 and b"ClassNotFoundException" in r.stdout
    phone.fs.write("/data/local/tmp/u2.jar", b"PK fake jar")
    cancel = threading.Event()
    t = threading.Thread(target=sh.run, args=(cmd, lambda b: None), kwargs={"cancel": cancel})
    t.start()
    deadline = time.monotonic() + 5
    while not sh.u2.is_running(9008) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sh.u2.is_running(9008)
    assert "app_process" in out(sh, "ps -A")
    second = sh.execute(cmd)  # like the real jar: a second UiAutomation cannot register
    assert second.exit_code == 1 and b"already registered" in second.stdout
    cancel.set()
    t.join(5)
    assert not sh.u2.is_running(9008)


# --- end to end through adb ------------------------------------------------------------------------
def test_injection_through_adbutils(sim) -> None:
    d = sim.device()
    shell = sim.server.shell
    sim.phone.fs.write("/sdcard/keep.txt", b"keep")
    before = sim.phone.fs.digest()
    shell.log.clear()
    payload = "'; rm -rf /sdcard; echo '"
    d.shell(["input", "text", payload])
    assert shell.log == [["input", "text", payload]]
    assert sim.phone.fs.digest() == before
    assert sim.phone.events[-1] == ("input_text", payload)
    assert d.shell("echo 'a; echo INJECTED'") == "a; echo INJECTED"
    # the same through the adb command line (shell_v2 with a quoted argument)
    r = sim.run("shell", "input text ''\\''; rm -rf /sdcard; echo '\\'''")
    assert r.returncode == 0
    assert shell.log[-1] == ["input", "text", "'; rm -rf /sdcard; echo '"]
    assert sim.phone.fs.digest() == before
