"""Shell builtins: sh, true/false, exit, cd, pwd, export/unset/env/set, echo, printf, sleep,
wait, which, type, test/[."""

from __future__ import annotations

import re
import stat as stat_mod

from harness.sim.fs import shell_write_error
from harness.sim.shell.context import SH, CommandError, Ctx, ExitShell, Session, to_int
from harness.sim.shell.parse import ShellSyntaxError, parse
from harness.sim.shell.table import command


def _echo_escapes(text: str) -> tuple[str, bool]:
    """Backslash escapes of echo/printf; returns (text, saw \\c)."""
    out = []
    i = 0
    table = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b"}
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in table:
                out.append(table[nxt])
                i += 2
                continue
            if nxt == "c":
                return "".join(out), True
            if nxt == "0":
                m = re.match(r"0[0-7]{0,3}", text[i + 1 :])
                assert m
                out.append(chr(int(m.group(0), 8)))
                i += 1 + len(m.group(0))
                continue
        out.append(ch)
        i += 1
    return "".join(out), False


@command("sh", "mksh")
def sh(c: Ctx) -> int:
    """``sh -c SCRIPT`` / ``sh FILE`` / ``sh`` (script on stdin), in a child session."""
    shell = c.shell
    args = c.argv[1:]
    while args and args[0] in ("-e", "-x", "-u", "-l", "-i"):
        args = args[1:]
    if args and args[0] == "-c":
        if len(args) < 2:
            raise CommandError(f"{SH}: -c: option requires an argument", 2)
        script = args[1]
    elif args:
        data = shell.phone.fs.read(c.path(args[0]))
        if data is None:
            raise CommandError(f"{SH}: {args[0]}: No such file or directory", 127)
        script = data.decode("utf-8", "replace")
    else:
        script = c.stdin.read().decode("utf-8", "replace")
    try:
        parsed = parse(script)
    except ShellSyntaxError as e:
        raise CommandError(f"{SH}: syntax error: {e}", 2) from None
    sub = Session(env=dict(c.env), cwd=c.sess.cwd)
    try:
        return shell.run_script(parsed, sub, c.out, c.err, c.stdin, c.cancel)
    except ExitShell as e:
        return e.code


@command("true")
def true(c: Ctx) -> int:
    return 0


@command("false")
def false(c: Ctx) -> int:
    return 1


@command("exit")
def exit_(c: Ctx) -> int:
    code = c.sess.status
    if len(c.argv) > 1:
        try:
            code = int(c.argv[1])
        except ValueError:
            c.error(f"{SH}: exit: {c.argv[1]}: bad number")
            code = 2
    raise ExitShell(code & 0xFF)


@command("cd")
def cd(c: Ctx) -> int:
    target = c.path(c.argv[1] if len(c.argv) > 1 else "/")
    if not c.shell.phone.fs.stat(target):
        c.error(f"{SH}: cd: {c.argv[1]}: No such file or directory")
        return 2
    c.sess.cwd = target
    return 0


@command("pwd")
def pwd(c: Ctx) -> int:
    c.line(c.sess.cwd)
    return 0


@command("export")
def export(c: Ctx) -> int:
    for a in c.argv[1:]:
        if "=" in a:
            k, v = a.split("=", 1)
            c.sess.env[k] = v
    return 0


@command("unset")
def unset(c: Ctx) -> int:
    for a in c.argv[1:]:
        c.sess.env.pop(a, None)
    return 0


@command("env")
def env(c: Ctx) -> int:
    for k, v in sorted(c.env.items()):
        c.line(f"{k}={v}")
    return 0


@command("set")
def set_(c: Ctx) -> int:
    return 0


@command("echo")
def echo(c: Ctx) -> int:
    args = c.argv[1:]
    newline, escapes = True, True  # mksh's echo interprets backslash escapes
    while args and re.fullmatch(r"-[neE]+", args[0]):
        for f in args[0][1:]:
            if f == "n":
                newline = False
            elif f == "e":
                escapes = True
            elif f == "E":
                escapes = False
        args = args[1:]
    text = " ".join(args)
    if escapes and "\\" in text:
        text, stop = _echo_escapes(text)
        if stop:
            newline = False
    c.write(text + ("\n" if newline else ""))
    return 0


@command("printf")
def printf(c: Ctx) -> int:
    if len(c.argv) < 2:
        raise CommandError("printf: needs a format", 1)
    fmt, args = c.argv[1], c.argv[2:]
    fmt, _ = _echo_escapes(fmt)
    out = []
    specs = re.findall(r"%[-+ 0#]*\d*(?:\.\d+)?[sdifxXoc%]", fmt)
    n = max(1, len([s for s in specs if s != "%%"]))
    while True:
        chunk = args[:n]
        args = args[n:]

        def repl(m: re.Match[str], chunk: list[str] = chunk) -> str:
            spec = m.group(0)
            if spec == "%%":
                return "%"
            v = chunk.pop(0) if chunk else ""
            conv = spec[-1]
            try:
                if conv in "dioxXc":
                    return (spec[:-1] + ("d" if conv == "i" else conv)) % (int(v or 0) if conv != "c" else (v or " ")[0])
                if conv == "f":
                    return spec % float(v or 0)
                return spec % v
            except (ValueError, TypeError):
                return v

        out.append(re.sub(r"%[-+ 0#]*\d*(?:\.\d+)?[sdifxXoc%]", repl, fmt))
        if not args:
            break
    c.write("".join(out))
    return 0


@command("sleep")
def sleep(c: Ctx) -> int:
    total = 0.0
    for a in c.argv[1:]:
        m = re.fullmatch(r"(\d*\.?\d+)([smhd]?)", a)
        if not m:
            raise CommandError(f"sleep: invalid number '{a}'")
        total += float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    if c.cancel.wait(min(total, 24 * 3600)):
        return 130
    return 0


@command("wait")
def wait(c: Ctx) -> int:
    """``wait``: this shell runs a ``&`` job to its end before the next command, so there is
    nothing left to wait for."""
    return 0


@command("which")
def which(c: Ctx) -> int:
    status = 0
    for a in c.argv[1:]:
        if c.shell.handler(a) is not None and a not in ("cd", "exit", "export", "unset", "set"):
            c.line(f"/system/bin/{a}")
        else:
            status = 1
    return status


@command("type")
def type_(c: Ctx) -> int:
    status = 0
    for a in c.argv[1:]:
        if c.shell.handler(a) is not None:
            c.line(f"{a} is /system/bin/{a}")
        else:
            c.line(f"{a} not found")
            status = 1
    return status


@command("test", "[")
def test(c: Ctx) -> int:
    args = c.argv[1:]
    if c.argv[0] == "[":
        if not args or args[-1] != "]":
            raise CommandError("[: missing ]", 2)
        args = args[:-1]
    neg = False
    if args and args[0] == "!":
        neg, args = True, args[1:]
    fs = c.shell.phone.fs
    res: bool | None
    if not args:
        res = False
    elif len(args) == 1:
        res = args[0] != ""
    elif len(args) == 2:
        op, a = args
        st = fs.stat(c.path(a))
        res = {
            "-e": st is not None,
            "-f": st is not None and stat_mod.S_ISREG(st[0]),
            "-d": st is not None and stat_mod.S_ISDIR(st[0]),
            "-s": st is not None and st[1] > 0,
            "-r": st is not None,
            "-w": st is not None and shell_write_error(c.path(a)) is None,
            "-x": st is not None and stat_mod.S_ISDIR(st[0]),
            "-z": a == "",
            "-n": a != "",
        }.get(op)
        if res is None:
            raise CommandError(f"test: unknown operator {op}", 2)
    elif len(args) == 3:
        a, op, b = args
        if op in ("=", "=="):
            res = a == b
        elif op == "!=":
            res = a != b
        elif op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
            x, y = to_int(a), to_int(b)
            res = {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y, "-ge": x >= y}[op]
        else:
            raise CommandError(f"test: unknown operator {op}", 2)
    else:
        raise CommandError("test: too many arguments", 2)
    return 0 if res != neg else 1
