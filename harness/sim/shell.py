"""The simulated phone's ``/system/bin/sh``: a small POSIX-ish shell plus Android's commands.

What arrives here is exactly what a host tool sent in a ``shell:``/``shell,v2:``/``exec:`` service:
adbutils shell-quotes list arguments with ``shlex.quote`` and appends ``; echo X4EXIT:$?`` for exit
codes (``adbutils/_device_base.py``: ``_shell_v1``); uiautomator2 3.7.1 launches its server with
``CLASSPATH=/data/local/tmp/u2.jar app_process / com.wetest.uia2.Main -p 9008``
(``uiautomator2/core.py``: ``launch_uiautomator``) and checks the jar with ``toybox md5sum``.

The parser understands single/double quotes, backslash escapes, ``$?``/``$VAR``/``${VAR}``/
``$(cmd)``/backticks, ``VAR=value cmd`` prefixes, ``;`` ``&&`` ``||`` ``|`` ``&`` (run in the
foreground), redirections (``>`` ``>>`` ``<`` ``2>`` ``2>&1`` ``>&2`` ``&>``), ``#`` comments,
``!`` and simple ``*``/``?`` globs in the last path component. A quoted string is always one
argument and never runs as a command; every simple command that runs is appended, as its final
argv, to ``Shell.log`` (tests use it to prove an injection never ran). Control flow keywords
(``if``/``for``/``while``/``case``) are not supported and say so.

Commands map onto ``harness.sim.phone_api.PhoneAPI``; output formats follow Android 14
(``input``, ``screencap``, ``wm``, ``dumpsys``, ``am``, ``pm``, ``monkey``, ``uiautomator dump``,
``getprop``, ``settings``, ``ime``, toybox file tools). A command that raises prints an error and
returns a non-zero status: the shell never lets an exception out of ``run``.
"""

from __future__ import annotations

import base64
import fnmatch
import getopt
import hashlib
import json
import posixpath
import queue
import re
import stat as stat_mod
import threading
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Callable

from harness.sim.fs import normpath, shell_write_error
from harness.sim.persona import SIM, Persona

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.command_log import CommandLog
    from harness.sim.phone_api import PhoneAPI
    from harness.sim.u2 import U2Server

Writer = Callable[[bytes], None]

SH = "/system/bin/sh"
XML_DECL = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"
LOG_LIMIT = 20000


# =============================================================================================
# Parsing
# =============================================================================================
class ShellSyntaxError(Exception):
    pass


@dataclass
class Seg:
    """One piece of a word: ``lit`` text, a ``var`` to expand, or a ``cmd`` substitution."""

    kind: str
    text: str
    quoted: bool


Word = list[Seg]


@dataclass
class Redirect:
    fd: int
    op: str  # '>', '>>', '<', '>&', '&>'
    target: Word


@dataclass
class Simple:
    assigns: list[tuple[str, Word]] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)


@dataclass
class Pipeline:
    stages: list[Simple]
    negate: bool = False


Script = list[tuple[str, Pipeline]]  # (connector before it: ';' '&&' '||', pipeline)

_REDIR_RE = re.compile(r"(\d?)(>>|>&|<&|>\||>|<)")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_UNSUPPORTED = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "function", "select"}


class _Parser:
    def __init__(self, src: str) -> None:
        self.s = src
        self.i = 0
        self.n = len(src)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < self.n else ""

    def skip_blanks(self) -> None:
        while self.i < self.n:
            c = self.s[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            elif c == "#":
                while self.i < self.n and self.s[self.i] != "\n":
                    self.i += 1
            else:
                break

    def parse_script(self, until: str = "") -> Script:
        items: Script = []
        conn = ";"
        while True:
            self.skip_blanks()
            while self.peek() in ("\n", ";") and self.peek():
                if self.peek() == ";" and conn != ";":
                    raise ShellSyntaxError("unexpected ';'")
                self.i += 1
                self.skip_blanks()
            if self.i >= self.n or (until and self.peek() == until):
                if conn != ";":
                    raise ShellSyntaxError("unexpected end of file")
                return items
            items.append((conn, self.parse_pipeline()))
            self.skip_blanks()
            c = self.peek()
            if self.s.startswith("&&", self.i) or self.s.startswith("||", self.i):
                conn = self.s[self.i : self.i + 2]
                self.i += 2
                self.skip_blanks()
                while self.peek() == "\n":
                    self.i += 1
                    self.skip_blanks()
            elif c in (";", "\n", "&"):
                conn = ";"
                self.i += 1
            elif c == "" or (until and c == until):
                conn = ";"
            else:
                raise ShellSyntaxError(f"unexpected '{c}'")

    def parse_pipeline(self) -> Pipeline:
        negate = False
        self.skip_blanks()
        if self.peek() == "!" and self.peek(1) in (" ", "\t"):
            negate = True
            self.i += 1
        stages = [self.parse_simple()]
        while True:
            self.skip_blanks()
            if self.peek() == "|" and self.peek(1) != "|":
                self.i += 1
                self.skip_blanks()
                while self.peek() == "\n":
                    self.i += 1
                    self.skip_blanks()
                stages.append(self.parse_simple())
            else:
                return Pipeline(stages, negate)

    def parse_simple(self) -> Simple:
        cmd = Simple()
        while True:
            self.skip_blanks()
            c = self.peek()
            if c == "" or c == "\n" or c == ";" or c == ")":
                break
            if c == "&" and self.peek(1) == ">":
                self.i += 2
                self.skip_blanks()
                cmd.redirects.append(Redirect(1, "&>", self.parse_word(required=True)))
                continue
            if c in "&|":
                break
            m = _REDIR_RE.match(self.s, self.i)
            if m:
                self.i = m.end()
                op = m.group(2)
                fd = int(m.group(1)) if m.group(1) else (0 if op in ("<", "<&") else 1)
                if op == ">|":
                    op = ">"
                self.skip_blanks()
                cmd.redirects.append(Redirect(fd, op, self.parse_word(required=True)))
                continue
            if c == "(":
                raise ShellSyntaxError("'(' unexpected (subshells are not supported)")
            word = self.parse_word(required=True)
            if not cmd.words:
                first = word[0] if word else None
                if first is not None and first.kind == "lit" and not first.quoted:
                    m2 = _ASSIGN_RE.match(first.text)
                    if m2:
                        rest = first.text[m2.end():]
                        value: Word = ([Seg("lit", rest, False)] if rest else []) + word[1:]
                        cmd.assigns.append((m2.group(1), value))
                        continue
                    if len(word) == 1 and first.text in _UNSUPPORTED:
                        raise ShellSyntaxError(f"'{first.text}' is not supported by the simulated shell")
            cmd.words.append(word)
        if not cmd.words and not cmd.assigns and not cmd.redirects:
            c = self.peek()
            raise ShellSyntaxError(f"unexpected '{c or 'end of file'}'")
        return cmd

    def parse_word(self, required: bool = False) -> Word:
        segs: Word = []
        lit: list[str] = []

        def flush() -> None:
            if lit:
                segs.append(Seg("lit", "".join(lit), False))
                lit.clear()

        start = self.i
        while self.i < self.n:
            c = self.s[self.i]
            if c in " \t\r\n;&|<>()":
                break
            if c == "'":
                flush()
                j = self.s.find("'", self.i + 1)
                if j < 0:
                    raise ShellSyntaxError("unterminated quoted string")
                segs.append(Seg("lit", self.s[self.i + 1 : j], True))
                self.i = j + 1
            elif c == '"':
                flush()
                self.i += 1
                segs.extend(self.parse_dquote())
            elif c == "\\":
                if self.peek(1) == "\n":
                    self.i += 2
                elif self.i + 1 < self.n:
                    flush()
                    segs.append(Seg("lit", self.s[self.i + 1], True))
                    self.i += 2
                else:
                    lit.append("\\")
                    self.i += 1
            elif c == "$":
                flush()
                segs.append(self.parse_dollar(quoted=False))
            elif c == "`":
                flush()
                segs.append(self.parse_backtick(quoted=False))
            else:
                lit.append(c)
                self.i += 1
        flush()
        if required and self.i == start:
            c = self.peek()
            raise ShellSyntaxError(f"unexpected '{c or 'end of file'}'")
        return segs

    def parse_dquote(self) -> Word:
        segs: Word = []
        lit: list[str] = []

        def flush() -> None:
            segs.append(Seg("lit", "".join(lit), True))
            lit.clear()

        while True:
            if self.i >= self.n:
                raise ShellSyntaxError("unterminated quoted string")
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                break
            if c == "\\" and self.peek(1) in ('"', "\\", "$", "`", "\n"):
                if self.peek(1) != "\n":
                    lit.append(self.peek(1))
                self.i += 2
            elif c == "$":
                flush()
                segs.append(self.parse_dollar(quoted=True))
            elif c == "`":
                flush()
                segs.append(self.parse_backtick(quoted=True))
            else:
                lit.append(c)
                self.i += 1
        flush()
        return segs

    def parse_dollar(self, quoted: bool) -> Seg:
        self.i += 1  # '$'
        c = self.peek()
        if c and c in "?$#!@*0123456789":
            self.i += 1
            return Seg("var", c, quoted)
        if c == "{":
            j = self.s.find("}", self.i)
            if j < 0:
                raise ShellSyntaxError("missing '}'")
            name = self.s[self.i + 1 : j]
            self.i = j + 1
            return Seg("var", name, quoted)
        if c == "(":
            if self.peek(1) == "(":
                raise ShellSyntaxError("arithmetic $(( )) is not supported by the simulated shell")
            self.i += 1
            inner_start = self.i
            sub = _Parser(self.s)
            sub.i = self.i
            sub.parse_script(until=")")
            if sub.peek() != ")":
                raise ShellSyntaxError("missing ')'")
            inner = self.s[inner_start : sub.i]
            self.i = sub.i + 1
            return Seg("cmd", inner, quoted)
        m = _NAME_RE.match(self.s, self.i)
        if m:
            self.i = m.end()
            return Seg("var", m.group(0), quoted)
        return Seg("lit", "$", quoted)

    def parse_backtick(self, quoted: bool) -> Seg:
        j = self.s.find("`", self.i + 1)
        if j < 0:
            raise ShellSyntaxError("unterminated `")
        inner = self.s[self.i + 1 : j]
        self.i = j + 1
        return Seg("cmd", inner, quoted)


def parse(src: str) -> Script:
    """Parse a command line into and-or lists of pipelines (raises ShellSyntaxError)."""
    p = _Parser(src)
    script = p.parse_script()
    if p.i < p.n:
        raise ShellSyntaxError(f"unexpected '{p.peek()}'")
    return script


def static_argv(script: Script) -> list[list[str]]:
    """The argv of every simple command in ``script`` as written, before it runs: quotes removed,
    ``$VAR`` and ``$(...)`` left as text (what a command log can record even for a command that
    never returns)."""
    def word(w: Word) -> str:
        return "".join(seg.text if seg.kind == "lit" else ("$" + seg.text if seg.kind == "var" else f"$({seg.text})")
                       for seg in w)

    return [[word(w) for w in simple.words] for _, pipeline in script for simple in pipeline.stages if simple.words]


# =============================================================================================
# Execution plumbing
# =============================================================================================
class InputSource:
    """A command's stdin. ``read()`` blocks until end of input (like reading a pipe to EOF)."""

    def read(self) -> bytes:
        return b""


class BytesSource(InputSource):
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        data, self._data = self._data, b""
        return data


class ExitShell(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class CommandError(Exception):
    """A usage error: the message goes to stderr, ``code`` becomes the status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ShellResult:
    stdout: bytes
    stderr: bytes
    exit_code: int

    @property
    def output(self) -> str:
        return (self.stdout + self.stderr).decode("utf-8", "replace")


@dataclass
class _Session:
    env: dict[str, str]
    cwd: str = "/"
    status: int = 0


@dataclass
class Ctx:
    """What a command sees: its argv, streams, environment and the cancel flag."""

    shell: "Shell"
    sess: _Session
    argv: list[str]
    out: Writer
    err: Writer
    stdin: InputSource
    env: dict[str, str]
    cancel: threading.Event

    def write(self, text: str | bytes) -> None:
        self.out(text.encode("utf-8") if isinstance(text, str) else text)

    def line(self, text: str = "") -> None:
        self.out((text + "\n").encode("utf-8"))

    def error(self, text: str) -> None:
        self.err((text + "\n").encode("utf-8"))

    def path(self, p: str) -> str:
        return normpath(p, self.sess.cwd)


def _null(_: bytes) -> None:
    return None


def _int(text: str, what: str = "number") -> int:
    try:
        return int(float(text))
    except (TypeError, ValueError):
        raise CommandError(f"Error: invalid {what}: '{text}'") from None


def _hexid(*parts: object) -> str:
    return format(zlib.crc32("/".join(map(str, parts)).encode()) & 0xFFFFFFF, "x")


def _pid_for(name: str) -> int:
    return 2000 + zlib.crc32(name.encode()) % 28000


# =============================================================================================
# The shell
# =============================================================================================
class Shell:
    """One phone's shell. ``run`` executes a command line; state (settings, running apps, the
    command log) lives on the instance and is shared by all ADB streams of that phone."""

    def __init__(self, phone: "PhoneAPI", u2: "U2Server | None" = None, ascii_only_input_text: bool = True) -> None:
        self.phone = phone
        self.u2 = u2
        # Android's `input text` maps characters through the virtual keyboard's KeyCharacterMap;
        # text with a character it cannot map (any CJK) is not typed at all (FIELD_NOTES 9).
        self.ascii_only_input_text = ascii_only_input_text
        self.log: list[list[str]] = []
        self.command_log: "CommandLog | None" = None  # --command-log: every command line received, as JSON lines
        self.installs: list[str] = []  # `pm install` attempts (APK paths)
        self.props: dict[str, str] = {}
        self.settings: dict[str, dict[str, str]] = {
            "system": {
                "screen_brightness": "128",
                "screen_brightness_mode": "0",
                "screen_off_timeout": "600000",
                "font_scale": "1.0",
                "accelerometer_rotation": "0",
                "user_rotation": "0",
                "pointer_location": "0",
                "show_touches": "0",
            },
            "secure": {
                "android_id": hashlib.md5(phone.info.serial.encode()).hexdigest()[:16],
                "show_ime_with_hard_keyboard": "0",
            },
            "global": {
                "adb_enabled": "1",
                "airplane_mode_on": "0",
                "development_settings_enabled": "1",
                "stay_on_while_plugged_in": "0",
                "window_animation_scale": "1.0",
                "transition_animation_scale": "1.0",
                "animator_duration_scale": "1.0",
                "wifi_on": "1",
                "device_name": phone.info.model,
            },
        }
        self._running: dict[str, int] = {}
        self._lock = threading.RLock()
        from harness.sim.u2 import TouchTracker  # local: u2 imports nothing from here

        self.touch = TouchTracker(phone)
        from harness.sim.evdev import InputSubsystem

        self.evdev = InputSubsystem(phone, touchscreen=phone.info.touchscreen, on_gesture=self.touch.gesture)
        self._commands: dict[str, Callable[[Ctx], int]] = {
            name[4:]: getattr(self, name)
            for name in dir(self)
            if name.startswith("cmd_")
        }
        aliases = {
            "[": "test",
            "mksh": "sh",
            "app_process64": "app_process",
            "app_process32": "app_process",
            "sha1sum": "md5sum",
            "sha256sum": "md5sum",
            "sha512sum": "md5sum",
            "md5": "md5sum",
        }
        for alias, target in aliases.items():
            self._commands[alias] = self._commands[target]

    # --- public API -----------------------------------------------------------------------------
    def run(
        self,
        cmdline: str,
        out: Writer,
        err: Writer | None = None,
        stdin: InputSource | None = None,
        cancel: threading.Event | None = None,
    ) -> int:
        """Run ``cmdline``; output goes to ``out``/``err`` as it is produced. Returns the status."""
        err = err or out
        sess = _Session(env=self._base_env())
        cancel = cancel or threading.Event()
        try:
            script = parse(cmdline)
        except ShellSyntaxError as e:
            if self.command_log is not None:
                self.command_log.append(cmdline, None, error=f"syntax error: {e}")
            msg = str(e) if self.persona.sim_services else str(e).replace(" by the simulated shell", "")
            err(f"{SH}: syntax error: {msg}\n".encode())
            return 2
        if self.command_log is not None:
            self.command_log.append(cmdline, static_argv(script))
        try:
            return self._run_script(script, sess, out, err, stdin or InputSource(), cancel)
        except ExitShell as e:
            return e.code & 0xFF
        except Exception as e:  # never let a bug kill the caller
            err(f"{SH}: internal error: {type(e).__name__}: {e}\n".encode())
            return 1

    def execute(self, cmdline: str, stdin: bytes = b"", merge: bool = False) -> ShellResult:
        """Run and collect output (for tests and in-process callers)."""
        out, errb = bytearray(), bytearray()
        code = self.run(cmdline, out.extend, out.extend if merge else errb.extend, BytesSource(stdin))
        return ShellResult(bytes(out), bytes(errb), code)

    def commands(self) -> list[str]:
        return sorted(self._commands)

    @property
    def persona(self) -> Persona:
        return getattr(self.phone, "persona", SIM)

    def _sim_note(self, text: str) -> str:
        """``text`` for the simulated phone's own persona; nothing where it plays a retail phone."""
        return text if self.persona.sim_services else ""

    # --- script execution ---------------------------------------------------------------------
    def _base_env(self) -> dict[str, str]:
        return {
            "PATH": "/product/bin:/apex/com.android.runtime/bin:/apex/com.android.art/bin:/system_ext/bin:/system/bin:/system/xbin:/odm/bin:/vendor/bin:/vendor/xbin",
            "HOME": "/",
            "USER": "shell",
            "LOGNAME": "shell",
            "SHELL": SH,
            "HOSTNAME": self.phone.info.device,
            "ANDROID_DATA": "/data",
            "ANDROID_ROOT": "/system",
            "EXTERNAL_STORAGE": "/sdcard",
            "TMPDIR": "/data/local/tmp",
            "IFS": " \t\n",
        }

    def _run_script(self, script: Script, sess: _Session, out: Writer, err: Writer, stdin: InputSource, cancel: threading.Event) -> int:
        for conn, pipeline in script:
            if cancel.is_set():
                break
            if conn == "&&" and sess.status != 0:
                continue
            if conn == "||" and sess.status == 0:
                continue
            sess.status = self._run_pipeline(pipeline, sess, out, err, stdin, cancel)
        return sess.status

    def _run_pipeline(self, pl: Pipeline, sess: _Session, out: Writer, err: Writer, stdin: InputSource, cancel: threading.Event) -> int:
        source = stdin
        status = 0
        for k, stage in enumerate(pl.stages):
            last = k == len(pl.stages) - 1
            buf = bytearray()
            status = self._run_simple(stage, sess, out if last else buf.extend, err, source, cancel)
            source = BytesSource(bytes(buf))
        if pl.negate:
            status = 0 if status else 1
        return status

    def _run_simple(self, cmd: Simple, sess: _Session, out: Writer, err: Writer, stdin: InputSource, cancel: threading.Event) -> int:
        try:
            argv = self._expand_words(cmd.words, sess, cancel)
            assigns = {name: "".join(self._expand_word(w, sess, cancel, split=False)) for name, w in cmd.assigns}
        except CommandError as e:
            err((str(e) + "\n").encode())
            return e.code
        fds: dict[int, Writer] = {1: out, 2: err}
        files: list[tuple[str, bool, bytearray]] = []
        for r in cmd.redirects:
            target = "".join(self._expand_word(r.target, sess, cancel, split=False))
            if r.op in (">&", "<&"):
                if target == "-":
                    fds[r.fd] = _null
                elif target.isdigit() and int(target) in fds:
                    fds[r.fd] = fds[int(target)]
                elif r.op == ">&":  # `>&file` is `&>file` in mksh
                    r = Redirect(1, "&>", r.target)
                else:
                    err(f"{SH}: {target}: bad file descriptor\n".encode())
                    return 1
                if r.op != "&>":
                    continue
            if r.op == "<":
                data = self.phone.fs.read(normpath(target, sess.cwd))
                if data is None:
                    err(f"{SH}: can't open {target}: No such file or directory\n".encode())
                    return 1
                stdin = BytesSource(data)
                continue
            # '>' '>>' '&>'
            if target in ("/dev/null", "/dev/zero"):
                sink: Writer = _null
            elif target in ("/dev/stdout", "/dev/tty", "/proc/self/fd/1"):
                sink = out
            elif target in ("/dev/stderr", "/proc/self/fd/2"):
                sink = err
            else:
                path = normpath(target, sess.cwd)
                problem = shell_write_error(path)
                parent_st = self.phone.fs.stat(posixpath.dirname(path))
                if problem is None and (parent_st is None or not stat_mod.S_ISDIR(parent_st[0])):
                    problem = "No such file or directory"
                if problem is None:
                    st = self.phone.fs.stat(path)
                    if st is not None and stat_mod.S_ISDIR(st[0]):
                        problem = "Is a directory"
                if problem:
                    err(f"{SH}: can't create {target}: {problem}\n".encode())
                    return 1
                buf = bytearray()
                append = r.op == ">>"
                if not append:
                    self.phone.fs.write(path, b"")
                elif self.phone.fs.stat(path) is None:
                    self.phone.fs.write(path, b"")
                files.append((path, append, buf))
                sink = buf.extend
            if r.op == "&>":
                fds[1] = fds[2] = sink
            else:
                fds[r.fd] = sink
        try:
            if not argv:
                sess.env.update(assigns)
                return 0
            status = self._dispatch(argv, sess, fds.get(1, _null), fds.get(2, _null), stdin, {**sess.env, **assigns}, cancel)
        finally:
            for path, append, buf in files:
                if append:
                    old = self.phone.fs.read(path) or b""
                    self.phone.fs.write(path, old + bytes(buf))
                elif buf:
                    self.phone.fs.write(path, bytes(buf))
        return status

    def _dispatch(self, argv: list[str], sess: _Session, out: Writer, err: Writer, stdin: InputSource, env: dict[str, str], cancel: threading.Event) -> int:
        with self._lock:
            self.log.append(list(argv))
            if len(self.log) > LOG_LIMIT:
                del self.log[: len(self.log) - LOG_LIMIT]
        name = argv[0]
        if name in ("toybox", "busybox") and len(argv) > 1:
            argv = argv[1:]
            name = argv[0]
        base = posixpath.basename(name) if "/" in name else name
        fn = self._commands.get(base)
        if fn is None or ("/" in name and not name.startswith(("/system/bin/", "/system/xbin/", "/bin/", "/vendor/bin/"))):
            if "/" in name:
                st = self.phone.fs.stat(normpath(name, sess.cwd))
                msg = "Permission denied" if st is not None else "No such file or directory"
                err(f"{SH}: {name}: {msg}\n".encode())
                return 126 if st is not None else 127
            err(f"{SH}: {name}: not found\n".encode())
            return 127
        ctx = Ctx(self, sess, [base] + argv[1:], out, err, stdin, env, cancel)
        try:
            return int(fn(ctx) or 0)
        except (ExitShell, KeyboardInterrupt):
            raise
        except CommandError as e:
            if str(e):
                ctx.error(str(e))
            return e.code
        except Exception as e:  # a handler bug becomes an error message, never a crash
            ctx.error(f"{base}: {type(e).__name__}: {e}")
            return 1

    # --- expansion ------------------------------------------------------------------------------
    def _expand_words(self, words: list[Word], sess: _Session, cancel: threading.Event) -> list[str]:
        argv: list[str] = []
        for w in words:
            argv.extend(self._expand_word(w, sess, cancel, split=True))
        return argv

    def _expand_word(self, word: Word, sess: _Session, cancel: threading.Event, split: bool) -> list[str]:
        # fields: list of (pieces [(text, globbable)], has_quoted)
        fields: list[tuple[list[tuple[str, bool]], bool]] = [([], False)]

        def add(text: str, glob: bool, quoted: bool) -> None:
            pieces, q = fields[-1]
            pieces.append((text, glob))
            fields[-1] = (pieces, q or quoted)

        for seg in word:
            if seg.kind == "lit":
                add(seg.text, not seg.quoted, seg.quoted)
                continue
            value = self._expand_seg(seg, sess, cancel)
            if seg.quoted or not split:
                add(value, False, True)
                continue
            parts = value.split()
            if not parts:
                if value and (fields[-1][0]):
                    fields.append(([], False))
                continue
            if value[:1].isspace() and fields[-1][0]:
                fields.append(([], False))
            add(parts[0], False, False)
            for p in parts[1:]:
                fields.append(([(p, False)], False))
            if value[-1:].isspace():
                fields.append(([], False))
        result: list[str] = []
        for pieces, quoted in fields:
            text = "".join(t for t, _ in pieces)
            if not pieces or (not text and not quoted):
                if quoted:
                    result.append("")
                continue
            if split and any(g and any(ch in t for ch in "*?[") for t, g in pieces):
                pattern = "".join(t if g else re.sub(r"([*?\[])", r"[\1]", t) for t, g in pieces)
                matches = self._glob(pattern, sess.cwd)
                if matches:
                    result.extend(matches)
                    continue
            result.append(text)
        if not split:
            return ["".join(result)]
        return result

    def _expand_seg(self, seg: Seg, sess: _Session, cancel: threading.Event) -> str:
        if seg.kind == "var":
            name = seg.text
            default = None
            if ":-" in name:
                name, default = name.split(":-", 1)
            if name == "?":
                return str(sess.status)
            if name == "$":
                return "4242"
            if name in ("#",):
                return "0"
            if name == "0":
                return SH
            if name in ("!", "@", "*") or name.isdigit():
                return ""
            value = sess.env.get(name, "")
            if not value and default is not None:
                return default
            return value
        if seg.kind == "cmd":
            buf = bytearray()
            sub = _Session(env=dict(sess.env), cwd=sess.cwd, status=sess.status)
            try:
                script = parse(seg.text)
            except ShellSyntaxError as e:
                raise CommandError(f"{SH}: syntax error: {e}", 2) from None
            try:
                self._run_script(script, sub, buf.extend, _null, InputSource(), cancel)
            except ExitShell:
                pass
            sess.status = sub.status
            return bytes(buf).decode("utf-8", "replace").rstrip("\n")
        return seg.text

    def _glob(self, pattern: str, cwd: str) -> list[str]:
        dirpart, basepat = posixpath.split(pattern)
        if any(ch in dirpart for ch in "*?["):
            return []
        listing = self.phone.fs.listdir(normpath(dirpart or ".", cwd))
        if not listing:
            return []
        names = [n for n, *_ in listing if fnmatch.fnmatchcase(n, basepat) and (basepat.startswith(".") or not n.startswith("."))]
        return [posixpath.join(dirpart, n) if dirpart else n for n in sorted(names)]

    # --- running-app bookkeeping ------------------------------------------------------------------
    def _focus(self) -> tuple[str, str]:
        pkg, act = self.phone.current_focus()
        return pkg or "", act or ""

    def running_packages(self) -> dict[str, int]:
        """Packages with a process: those launched through the shell and not stopped, plus the app
        in front (``PhoneAPI`` has no process list of its own)."""
        get = getattr(self.phone, "running_packages", None)
        with self._lock:
            running = dict(self._running)
        if callable(get):
            try:
                for pkg in get():
                    running.setdefault(pkg, _pid_for(pkg))
            except Exception:
                pass
        pkg, _ = self._focus()
        if pkg:
            running.setdefault(pkg, _pid_for(pkg))
        return running

    def _mark_running(self, pkg: str, running: bool) -> None:
        with self._lock:
            if running:
                self._running[pkg] = _pid_for(pkg)
            else:
                self._running.pop(pkg, None)

    # =========================================================================================
    # Builtins and tools
    # =========================================================================================
    def cmd_sh(self, c: Ctx) -> int:
        """``sh -c SCRIPT`` / ``sh FILE`` / ``sh`` (script on stdin), in a child session."""
        args = c.argv[1:]
        while args and args[0] in ("-e", "-x", "-u", "-l", "-i"):
            args = args[1:]
        if args and args[0] == "-c":
            if len(args) < 2:
                raise CommandError(f"{SH}: -c: option requires an argument", 2)
            script = args[1]
        elif args:
            data = self.phone.fs.read(c.path(args[0]))
            if data is None:
                raise CommandError(f"{SH}: {args[0]}: No such file or directory", 127)
            script = data.decode("utf-8", "replace")
        else:
            script = c.stdin.read().decode("utf-8", "replace")
        try:
            parsed = parse(script)
        except ShellSyntaxError as e:
            raise CommandError(f"{SH}: syntax error: {e}", 2) from None
        sub = _Session(env=dict(c.env), cwd=c.sess.cwd)
        try:
            return self._run_script(parsed, sub, c.out, c.err, c.stdin, c.cancel)
        except ExitShell as e:
            return e.code

    def cmd_true(self, c: Ctx) -> int:
        return 0

    def cmd_false(self, c: Ctx) -> int:
        return 1

    def cmd_exit(self, c: Ctx) -> int:
        code = c.sess.status
        if len(c.argv) > 1:
            try:
                code = int(c.argv[1])
            except ValueError:
                c.error(f"{SH}: exit: {c.argv[1]}: bad number")
                code = 2
        raise ExitShell(code & 0xFF)

    def cmd_cd(self, c: Ctx) -> int:
        target = c.path(c.argv[1] if len(c.argv) > 1 else "/")
        if not self.phone.fs.stat(target):
            c.error(f"{SH}: cd: {c.argv[1]}: No such file or directory")
            return 2
        c.sess.cwd = target
        return 0

    def cmd_pwd(self, c: Ctx) -> int:
        c.line(c.sess.cwd)
        return 0

    def cmd_export(self, c: Ctx) -> int:
        for a in c.argv[1:]:
            if "=" in a:
                k, v = a.split("=", 1)
                c.sess.env[k] = v
        return 0

    def cmd_unset(self, c: Ctx) -> int:
        for a in c.argv[1:]:
            c.sess.env.pop(a, None)
        return 0

    def cmd_env(self, c: Ctx) -> int:
        for k, v in sorted(c.env.items()):
            c.line(f"{k}={v}")
        return 0

    def cmd_set(self, c: Ctx) -> int:
        return 0

    def cmd_echo(self, c: Ctx) -> int:
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

    def cmd_printf(self, c: Ctx) -> int:
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

    def cmd_sleep(self, c: Ctx) -> int:
        total = 0.0
        for a in c.argv[1:]:
            m = re.fullmatch(r"(\d*\.?\d+)([smhd]?)", a)
            if not m:
                raise CommandError(f"sleep: invalid number '{a}'")
            total += float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
        if c.cancel.wait(min(total, 24 * 3600)):
            return 130
        return 0

    def cmd_wait(self, c: Ctx) -> int:
        """``wait``: this shell runs a ``&`` job to its end before the next command, so there is
        nothing left to wait for."""
        return 0

    def cmd_id(self, c: Ctx) -> int:
        c.line(
            "uid=2000(shell) gid=2000(shell) groups=2000(shell),1004(input),1007(log),1011(adb),"
            "1015(sdcard_rw),1028(sdcard_r),1078(ext_data_rw),1079(ext_obb_rw),3001(net_bt_admin),"
            "3002(net_bt),3003(inet),3006(net_bw_stats),3009(readproc),3011(uhid),3012(readtracefs) "
            "context=u:r:shell:s0"
        )
        return 0

    def cmd_whoami(self, c: Ctx) -> int:
        c.line("shell")
        return 0

    def cmd_uname(self, c: Ctx) -> int:
        persona = self.persona
        if "-a" in c.argv:
            c.line(f"Linux localhost {persona.kernel} #1 SMP PREEMPT {time.strftime('%a %b %d %H:%M:%S UTC %Y')} "
                   f"{persona.machine} Toybox")
        elif "-m" in c.argv:
            c.line(persona.machine)
        elif "-r" in c.argv:
            c.line(persona.kernel)
        else:
            c.line("Linux")
        return 0

    def cmd_date(self, c: Ctx) -> int:
        fmt = next((a[1:] for a in c.argv[1:] if a.startswith("+")), None)
        now = datetime.now()
        c.line(now.strftime(fmt) if fmt else now.strftime("%a %b %d %H:%M:%S %Z %Y").replace("  ", " "))
        return 0

    def cmd_chmod(self, c: Ctx) -> int:
        return 0

    def cmd_chown(self, c: Ctx) -> int:
        return 0

    def cmd_sync(self, c: Ctx) -> int:
        return 0

    def cmd_log(self, c: Ctx) -> int:
        return 0

    def cmd_svc(self, c: Ctx) -> int:
        args = c.argv[1:]
        if args[:2] == ["power", "stayon"] and len(args) > 2:
            # PowerCommand: true = AC|USB|wireless, false = 0, or one source (BatteryManager.BATTERY_PLUGGED_*)
            value = {"true": "7", "false": "0", "ac": "1", "usb": "2", "wireless": "4"}.get(args[2])
            if value is None:
                c.error("Usage: svc power stayon [true|false|usb|ac|wireless]")
                return 1
            self.settings["global"]["stay_on_while_plugged_in"] = value
        return 0

    def cmd_logcat(self, c: Ctx) -> int:
        if any(a in ("-d", "-c", "--clear", "-g", "-t") or a.startswith("-t") for a in c.argv[1:]):
            if "-g" in c.argv:
                c.line("main: ring buffer is 256 KiB (0 B consumed), max entry is 5120 B, max payload is 4068 B")
            return 0
        c.cancel.wait()  # a streaming logcat runs until the host closes the stream
        return 130

    def cmd_which(self, c: Ctx) -> int:
        status = 0
        for a in c.argv[1:]:
            if a in self._commands and a not in ("cd", "exit", "export", "unset", "set"):
                c.line(f"/system/bin/{a}")
            else:
                status = 1
        return status

    def cmd_type(self, c: Ctx) -> int:
        status = 0
        for a in c.argv[1:]:
            if a in self._commands:
                c.line(f"{a} is /system/bin/{a}")
            else:
                c.line(f"{a} not found")
                status = 1
        return status

    def cmd_test(self, c: Ctx) -> int:
        args = c.argv[1:]
        if c.argv[0] == "[":
            if not args or args[-1] != "]":
                raise CommandError("[: missing ]", 2)
            args = args[:-1]
        neg = False
        if args and args[0] == "!":
            neg, args = True, args[1:]
        fs = self.phone.fs
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
                x, y = _int(a), _int(b)
                res = {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y, "-ge": x >= y}[op]
            else:
                raise CommandError(f"test: unknown operator {op}", 2)
        else:
            raise CommandError("test: too many arguments", 2)
        return 0 if res != neg else 1

    # --- file tools ---------------------------------------------------------------------------
    def cmd_ls(self, c: Ctx) -> int:
        flags, paths = _split_flags(c.argv[1:])
        long_ = "l" in flags
        all_ = "a" in flags
        dir_only = "d" in flags
        fs = self.phone.fs
        status = 0
        if not paths:
            paths = ["."]
        files: list[tuple[str, int, int, int]] = []
        dirs: list[tuple[str, str]] = []
        for p in paths:
            full = c.path(p)
            st = fs.stat(full)
            if st is None:
                c.error(f"ls: {p}: No such file or directory")
                status = 1
                continue
            if stat_mod.S_ISDIR(st[0]) and not dir_only:
                dirs.append((p, full))
            else:
                files.append((p, *st))
        for name, mode, size, mtime in files:
            c.line(_ls_line(name, mode, size, mtime) if long_ else name)
        for k, (p, full) in enumerate(dirs):
            if len(paths) > 1:
                if files or k:
                    c.line()
                c.line(f"{p}:")
            entries = fs.listdir(full) or []
            if long_:
                c.line(f"total {len(entries) * 8}")
            if all_:
                st = fs.stat(full)
                entries = [(".", st[0], st[1], st[2]), ("..", st[0], st[1], st[2])] + entries if st else entries
            for name, mode, size, mtime in entries:
                if name.startswith(".") and not all_:
                    continue
                c.line(_ls_line(name, mode, size, mtime) if long_ else name)
        return status

    def cmd_cat(self, c: Ctx) -> int:
        _, paths = _split_flags(c.argv[1:])
        if not paths:
            c.write(c.stdin.read())
            return 0
        status = 0
        for p in paths:
            if p == "-":
                c.write(c.stdin.read())
                continue
            data = self.phone.fs.read(c.path(p))
            if data is None:
                st = self.phone.fs.stat(c.path(p))
                c.error(f"cat: {p}: {'Is a directory' if st else 'No such file or directory'}")
                status = 1
                continue
            c.write(data)
        return status

    def _writable_or_error(self, c: Ctx, tool: str, p: str, creating_root_ok: bool = False) -> bool:
        problem = shell_write_error(c.path(p), creating_root_ok)
        if problem:
            c.error(f"{tool}: {p}: {problem}")
            return False
        return True

    def cmd_rm(self, c: Ctx) -> int:
        flags, paths = _split_flags(c.argv[1:])
        recursive = "r" in flags or "R" in flags
        force = "f" in flags
        if not paths and not force:
            raise CommandError("rm: Needs 1 argument (see \"rm --help\")")
        status = 0
        fs = self.phone.fs
        for p in paths:
            full = c.path(p)
            st = fs.stat(full)
            if st is None:
                if not force:
                    c.error(f"rm: {p}: No such file or directory")
                    status = 1
                continue
            if not self._writable_or_error(c, "rm", p):
                status = 1
                continue
            if stat_mod.S_ISDIR(st[0]) and not recursive:
                c.error(f"rm: {p}: Is a directory")
                status = 1
                continue
            fs.remove(full, recursive=recursive)
        return status

    def cmd_rmdir(self, c: Ctx) -> int:
        status = 0
        for p in c.argv[1:]:
            if not self._writable_or_error(c, "rmdir", p):
                status = 1
            elif not self.phone.fs.remove(c.path(p), recursive=False):
                c.error(f"rmdir: '{p}': Directory not empty")
                status = 1
        return status

    def cmd_mkdir(self, c: Ctx) -> int:
        flags, paths = _split_flags(c.argv[1:], with_value={"m"})
        parents = "p" in flags
        status = 0
        fs = self.phone.fs
        for p in paths:
            full = c.path(p)
            if fs.stat(full) is not None:
                if not parents:
                    c.error(f"mkdir: '{p}': File exists")
                    status = 1
                continue
            if not self._writable_or_error(c, "mkdir", p, creating_root_ok=True):
                status = 1
                continue
            if not fs.mkdir(full, parents=parents):
                c.error(f"mkdir: '{p}': No such file or directory")
                status = 1
        return status

    def cmd_touch(self, c: Ctx) -> int:
        _, paths = _split_flags(c.argv[1:], with_value={"d", "t", "r"})
        status = 0
        fs = self.phone.fs
        for p in paths:
            full = c.path(p)
            if not self._writable_or_error(c, "touch", p):
                status = 1
                continue
            if fs.stat(full) is None:
                try:
                    fs.write(full, b"")
                except (FileNotFoundError, NotADirectoryError):
                    c.error(f"touch: '{p}': No such file or directory")
                    status = 1
            else:
                touch = getattr(fs, "touch", None)
                if callable(touch):
                    touch(full)
        return status

    def _copy(self, c: Ctx, tool: str, move: bool) -> int:
        flags, paths = _split_flags(c.argv[1:])
        if len(paths) < 2:
            raise CommandError(f"{tool}: Needs 2 arguments")
        fs = self.phone.fs
        *srcs, dst = paths
        dst_full = c.path(dst)
        dst_is_dir = fs.is_dir(dst_full) if hasattr(fs, "is_dir") else False
        status = 0
        for s in srcs:
            full = c.path(s)
            data = fs.read(full)
            st = fs.stat(full)
            if st is None:
                c.error(f"{tool}: {s}: No such file or directory")
                status = 1
                continue
            if data is None:
                c.error(f"{tool}: {s}: Is a directory (not copied)")
                status = 1
                continue
            target = posixpath.join(dst_full, posixpath.basename(full)) if dst_is_dir else dst_full
            if not self._writable_or_error(c, tool, target) or (move and not self._writable_or_error(c, tool, s)):
                status = 1
                continue
            try:
                fs.write(target, data, mode=st[0] & 0o7777, mtime=st[2] if move else None)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as e:
                c.error(f"{tool}: {dst}: {type(e).__name__}")
                status = 1
                continue
            if move:
                fs.remove(full)
        return status

    def cmd_cp(self, c: Ctx) -> int:
        return self._copy(c, "cp", move=False)

    def cmd_mv(self, c: Ctx) -> int:
        return self._copy(c, "mv", move=True)

    def cmd_stat(self, c: Ctx) -> int:
        flags, paths = _split_flags(c.argv[1:], with_value={"c"})
        fmt = flags.get("c") if isinstance(flags, dict) else None
        status = 0
        for p in paths:
            st = self.phone.fs.stat(c.path(p))
            if st is None:
                c.error(f"stat: '{p}': No such file or directory")
                status = 1
                continue
            mode, size, mtime = st
            kind = "directory" if stat_mod.S_ISDIR(mode) else ("regular empty file" if size == 0 else "regular file")
            if fmt is not None:
                fields = {
                    "s": str(size), "n": p, "N": f"'{p}'", "a": format(mode & 0o7777, "o"),
                    "A": stat_mod.filemode(mode), "F": kind, "Y": str(mtime), "X": str(mtime),
                    "Z": str(mtime), "u": "2000", "g": "1015", "U": "shell", "G": "sdcard_rw",
                    "i": str(zlib.crc32(p.encode()) & 0xFFFFF), "f": format(mode, "x"), "b": str((size + 511) // 512),
                    "B": "512", "y": _fmt_time(mtime), "h": "1", "%": "%",
                }
                table = fields

                def subst(m: re.Match[str]) -> str:
                    return table.get(m.group(1), m.group(0))  # noqa: B023 (used at once)

                c.line(re.sub(r"%(.)", subst, fmt))
                continue
            c.line(f"  File: {p}")
            c.line(f"  Size: {size}\t Blocks: {(size + 511) // 512}\t IO Blocks: 4096\t{kind}")
            c.line(f"Device: fd00h/64768d\t Inode: {zlib.crc32(p.encode()) & 0xFFFFF}\t Links: 1")
            c.line(f"Access: ({mode & 0o7777:04o}/{stat_mod.filemode(mode)})\tUid: ( 2000/   shell)\tGid: ( 1015/sdcard_rw)")
            for label in ("Access", "Modify", "Change"):
                c.line(f"{label}: {_fmt_time(mtime)}")
        return status

    def cmd_md5sum(self, c: Ctx) -> int:
        algo = {"md5sum": "md5", "md5": "md5", "sha1sum": "sha1", "sha256sum": "sha256", "sha512sum": "sha512"}[c.argv[0]]
        _, paths = _split_flags(c.argv[1:])
        if not paths:
            c.line(f"{hashlib.new(algo, c.stdin.read()).hexdigest()}  -")
            return 0
        status = 0
        for p in paths:
            data = self.phone.fs.read(c.path(p))
            if data is None:
                st = self.phone.fs.stat(c.path(p))
                c.error(f"{c.argv[0]}: {p}: {'Is a directory' if st else 'No such file or directory'}")
                status = 1
                continue
            c.line(f"{hashlib.new(algo, data).hexdigest()}  {p}")
        return status

    def cmd_base64(self, c: Ctx) -> int:
        flags, paths = _split_flags(c.argv[1:], with_value={"w"})
        decode = "d" in flags or "--decode" in c.argv
        wrap = _int(flags["w"]) if "w" in flags else 76
        if paths:
            data = self.phone.fs.read(c.path(paths[0]))
            if data is None:
                raise CommandError(f"base64: {paths[0]}: No such file or directory")
        else:
            data = c.stdin.read()
        if decode:
            try:
                c.write(base64.b64decode(re.sub(rb"\s+", b"", data), validate=False))
            except Exception:
                raise CommandError("base64: bad input") from None
            return 0
        enc = base64.b64encode(data).decode()
        if wrap > 0:
            enc = "\n".join(enc[i : i + wrap] for i in range(0, len(enc), wrap))
        c.line(enc) if enc else None
        return 0

    def _input_text(self, c: Ctx, paths: list[str]) -> list[tuple[str, bytes]]:
        if not paths:
            return [("", c.stdin.read())]
        items = []
        for p in paths:
            data = self.phone.fs.read(c.path(p)) if p != "-" else c.stdin.read()
            if data is None:
                raise CommandError(f"{c.argv[0]}: {p}: No such file or directory")
            items.append((p, data))
        return items

    def cmd_head(self, c: Ctx) -> int:
        return self._head_tail(c, head=True)

    def cmd_tail(self, c: Ctx) -> int:
        return self._head_tail(c, head=False)

    def _head_tail(self, c: Ctx, head: bool) -> int:
        args = list(c.argv[1:])
        n, nbytes, from_start = 10, None, False
        rest = []
        while args:
            a = args.pop(0)
            if a in ("-n", "-c") and args:
                v = args.pop(0)
                if a == "-c":
                    nbytes = _int(v)
                else:
                    from_start = v.startswith("+")
                    n = _int(v)
            elif re.fullmatch(r"-n[+-]?\d+", a):
                from_start = a[2:].startswith("+")
                n = _int(a[2:])
            elif re.fullmatch(r"-\d+", a):
                n = _int(a[1:])
            elif a.startswith("-") and a != "-":
                continue
            else:
                rest.append(a)
        for _, data in self._input_text(c, rest):
            if nbytes is not None:
                c.write(data[:nbytes] if head else data[-nbytes:] if nbytes else b"")
                continue
            lines = data.splitlines(keepends=True)
            if head:
                chosen = lines[:n] if n >= 0 else lines[:n]
            elif from_start:
                chosen = lines[max(n - 1, 0):]
            else:
                chosen = lines[-n:] if n else []
            c.write(b"".join(chosen))
        return 0

    def cmd_wc(self, c: Ctx) -> int:
        flags, paths = _split_flags(c.argv[1:])
        show = [k for k in "lwc" if k in flags] or ["l", "w", "c"]
        for name, data in self._input_text(c, paths):
            counts = {"l": data.count(b"\n"), "w": len(data.split()), "c": len(data)}
            vals = [str(counts[k]) for k in show]
            text = " ".join(vals) if len(vals) == 1 else " ".join(v.rjust(7) for v in vals)
            c.line(f"{text} {name}".rstrip())
        return 0

    def cmd_grep(self, c: Ctx) -> int:
        args = list(c.argv[1:])
        flags: set[str] = set()
        patterns: list[str] = []
        rest: list[str] = []
        while args:
            a = args.pop(0)
            if a == "--":
                rest.extend(args)
                break
            if a == "-e" and args:
                patterns.append(args.pop(0))
            elif a.startswith("-") and len(a) > 1 and not rest and not a[1:].isdigit():
                flags.update(a[1:])
            else:
                rest.append(a)
        if not patterns:
            if not rest:
                raise CommandError("grep: no pattern", 2)
            patterns.append(rest.pop(0))
        if "F" in flags:
            regex = "|".join(re.escape(p) for p in patterns)
        elif "E" in flags:
            regex = "|".join(f"(?:{p})" for p in patterns)
        else:
            regex = "|".join(f"(?:{_bre_to_re(p)})" for p in patterns)
        if "w" in flags:
            regex = rf"\b(?:{regex})\b"
        if "x" in flags:
            regex = rf"^(?:{regex})$"
        try:
            rx = re.compile(regex, re.IGNORECASE if "i" in flags else 0)
        except re.error as e:
            raise CommandError(f"grep: bad regex '{patterns[0]}': {e}", 2) from None
        sources = self._input_text(c, rest)
        many = len(sources) > 1
        found = False
        for name, data in sources:
            count = 0
            for k, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                hit = bool(rx.search(raw))
                if hit == ("v" in flags):
                    continue
                found = True
                count += 1
                if "q" in flags or "c" in flags or "l" in flags:
                    continue
                prefix = (f"{name}:" if many else "") + (f"{k}:" if "n" in flags else "")
                if "o" in flags and "v" not in flags:
                    for m in rx.finditer(raw):
                        c.line(prefix + m.group(0))
                else:
                    c.line(prefix + raw)
            if "c" in flags:
                c.line((f"{name}:" if many else "") + str(count))
            if "l" in flags and count:
                c.line(name or "(standard input)")
        return 0 if found else 1

    def cmd_sort(self, c: Ctx) -> int:
        flags, paths = _split_flags(c.argv[1:])
        lines: list[str] = []
        for _, data in self._input_text(c, paths):
            lines.extend(data.decode("utf-8", "replace").splitlines())
        if "n" in flags:
            def key(s: str) -> float:
                m = re.match(r"\s*-?\d+(\.\d+)?", s)
                return float(m.group(0)) if m else 0.0
            lines.sort(key=key)
        else:
            lines.sort()
        if "r" in flags:
            lines.reverse()
        if "u" in flags:
            lines = list(dict.fromkeys(lines))
        c.write("".join(x + "\n" for x in lines))
        return 0

    def cmd_uniq(self, c: Ctx) -> int:
        _, paths = _split_flags(c.argv[1:])
        prev = None
        for _, data in self._input_text(c, paths):
            for line in data.decode("utf-8", "replace").splitlines():
                if line != prev:
                    c.line(line)
                prev = line
        return 0

    def cmd_tee(self, c: Ctx) -> int:
        flags, paths = _split_flags(c.argv[1:])
        data = c.stdin.read()
        for p in paths:
            if self._writable_or_error(c, "tee", p):
                full = c.path(p)
                old = (self.phone.fs.read(full) or b"") if "a" in flags else b""
                self.phone.fs.write(full, old + data)
        c.write(data)
        return 0

    def cmd_tr(self, c: Ctx) -> int:
        flags, sets = _split_flags(c.argv[1:])
        data = c.stdin.read().decode("utf-8", "replace")
        if "d" in flags and sets:
            data = "".join(ch for ch in data if ch not in _tr_set(sets[0]))
        elif len(sets) >= 2:
            a, b = _tr_set(sets[0]), _tr_set(sets[1])
            b = b + b[-1:] * (len(a) - len(b))
            data = data.translate(str.maketrans(a, b[: len(a)]))
        c.write(data)
        return 0

    # --- Android: input -------------------------------------------------------------------------
    def cmd_input(self, c: Ctx) -> int:
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
        phone = self.phone
        if sub == "tap":
            if len(rest) != 2:
                raise CommandError("Error: Invalid arguments for command: tap\n" + _INPUT_USAGE)
            phone.tap(_int(rest[0], "coordinate"), _int(rest[1], "coordinate"))
            return 0
        if sub in ("swipe", "draganddrop"):
            if len(rest) not in (4, 5):
                raise CommandError(f"Error: Invalid arguments for command: {sub}\n" + _INPUT_USAGE)
            x1, y1, x2, y2 = (_int(v, "coordinate") for v in rest[:4])
            ms = _int(rest[4], "duration") if len(rest) == 5 else (300 if sub == "swipe" else 1000)
            if sub == "draganddrop":
                drag = getattr(phone, "drag", None)
                if callable(drag):
                    drag(x1, y1, x2, y2, ms)
                else:
                    phone.swipe(x1, y1, x2, y2, ms)
                return 0
            self.touch.gesture([(x1, y1), (x2, y2)], ms)
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
            if self.ascii_only_input_text and any(not (32 <= ord(ch) < 127 or ch in "\n\t") for ch in text):
                return 0  # KeyCharacterMap.getEvents() fails: nothing typed, nothing printed
            phone.input_text(text)
            return 0
        if sub == "motionevent":
            if len(rest) != 3:
                raise CommandError("Error: Invalid arguments for command: motionevent\n" + _INPUT_USAGE)
            action = {"DOWN": 0, "UP": 1, "MOVE": 2, "CANCEL": 3}.get(rest[0].upper())
            if action is None:
                raise CommandError(f"Error: Unknown action: {rest[0]}")
            self.touch.event(action, _int(rest[1]), _int(rest[2]))
            return 0
        if sub in ("press", "roll", "scroll", "keycombination"):
            if sub == "keycombination":
                for k in rest:
                    phone.keyevent(int(k) if k.isdigit() else k)
            return 0
        c.error(f"Error: Unknown command: {sub}\n" + _INPUT_USAGE)
        return 1

    # --- Android: kernel input devices ----------------------------------------------------------
    def cmd_sendevent(self, c: Ctx) -> int:
        """``sendevent DEVICE TYPE CODE VALUE``: one raw input event, numbers read as atoi does
        (toybox sendevent.c)."""
        args = c.argv[1:]
        if len(args) != 4:
            c.error("usage: sendevent DEVICE TYPE CODE VALUE\n\nSends a Linux input event.")
            c.error(f"sendevent: {'Need' if len(args) < 4 else 'Max'} 4 argument{'s' if len(args) != 1 else ''}")
            return 1
        try:
            self.evdev.write(args[0], *(_atoi(a) for a in args[1:]))
        except FileNotFoundError:
            c.error(f"sendevent: {args[0]}: No such file or directory")
            return 1
        return 0

    def cmd_getevent(self, c: Ctx) -> int:
        """AOSP toolbox getevent: ``-t`` time stamps, ``-l`` labels, ``-p``/``-i`` the devices'
        capabilities (then exit), ``-c N`` stop after N events, ``-q`` quiet; otherwise stream
        every event until the host closes the stream."""
        from harness.sim.evdev import format_capabilities, format_event

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
        devices = self.evdev.devices
        if device is not None:
            dev = self.evdev.device(device)
            if dev is None:
                c.error(f"could not open {device}, No such file or directory")
                return 1
            devices = [dev]
        reader = None if listing else self.evdev.open_reader()  # before the header: no event is missed
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
                self.evdev.close_reader(reader)

    # --- Android: screen ------------------------------------------------------------------------
    def cmd_screencap(self, c: Ctx) -> int:
        flags, paths = _split_flags(c.argv[1:], with_value={"d"})
        png = "p" in flags or (paths and paths[0].endswith(".png"))
        data = self.phone.screencap_encode() if png else self._raw_screencap()
        if paths:
            p = paths[0]
            if not self._writable_or_error(c, "screencap", p):
                return 1
            try:
                self.phone.fs.write(c.path(p), data)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                c.error(f"Error opening file: {p} (No such file or directory)")
                return 1
            return 0
        c.write(data)
        return 0

    def _raw_screencap(self) -> bytes:
        """``screencap`` without -p: w, h, format (1 = RGBA_8888) as LE u32, then (Android 8 on,
        ``frameworks/base/cmds/screencap/screencap.cpp``: ``write(fd, &c, 4)`` with
        ``c = dataSpaceToInt(...)``) a 4th word with the colour space (1 = sRGB), then the pixels.
        Readers that assume the old 12-byte header are off by 4 bytes on modern phones too."""
        w, h = self.phone.size
        header = w.to_bytes(4, "little") + h.to_bytes(4, "little") + (1).to_bytes(4, "little")
        if self.phone.info.sdk >= 26:
            header += (1).to_bytes(4, "little")
        return header + self.phone.screencap_rgba()

    def cmd_wm(self, c: Ctx) -> int:
        sub = c.argv[1] if len(c.argv) > 1 else ""
        if sub == "size":
            if len(c.argv) > 2 and c.argv[2] != "reset":
                raise CommandError("wm size: overriding the display size is not supported" + self._sim_note(" by the simulated phone"))
            w, h = self.phone.size
            c.line(f"Physical size: {w}x{h}")
            return 0
        if sub == "density":
            if len(c.argv) > 2 and c.argv[2] != "reset":
                raise CommandError("wm density: overriding the density is not supported" + self._sim_note(" by the simulated phone"))
            c.line(f"Physical density: {self.phone.density}")
            return 0
        if sub == "dismiss-keyguard":
            dismiss = getattr(self.phone, "dismiss_keyguard", None)
            if callable(dismiss):
                dismiss()
            return 0
        if sub in ("user-rotation", "fixed-to-user-rotation"):
            return 0
        c.line("Window manager (window) commands:\n  size [reset|WxH|WdpxHdp]\n  density [reset|DENSITY]")
        return 0 if sub in ("", "help", "-h") else 255

    def cmd_uiautomator(self, c: Ctx) -> int:
        args = c.argv[1:]
        if not args or args[0] not in ("dump", "events"):
            c.line("Usage: uiautomator <subcommand> [options]\n\nAvailable subcommands:\n\n"
                   "help: displays help message\n\ndump: creates an XML dump of current UI hierarchy\n\nevents: prints out accessibility events until terminated")
            return 0 if not args or args[0] == "help" else 1
        if args[0] == "events":
            c.cancel.wait()
            return 130
        paths = [a for a in args[1:] if not a.startswith("--")]
        path = paths[0] if paths else "/sdcard/window_dump.xml"
        xml = _with_decl(self.phone.hierarchy_xml())
        if path in ("/dev/tty", "/dev/stdout", "/proc/self/fd/1"):
            c.write(xml)
        else:
            problem = shell_write_error(c.path(path))
            if problem:
                c.error(f"ERROR: could not write {path}: {problem}")
                return 1
            try:
                self.phone.fs.write(c.path(path), xml.encode("utf-8"))
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                c.error(f"ERROR: could not write {path}: No such file or directory")
                return 1
        c.line(f"UI hierchary dumped to: {path}")  # sic: Android's own spelling
        return 0

    # --- Android: dumpsys -------------------------------------------------------------------------
    def cmd_dumpsys(self, c: Ctx) -> int:
        args = c.argv[1:]
        services = [x for x in _DUMPSYS_SERVICES if x != "crate_sim" or self.persona.sim_services]
        if not args or args[0] == "-l":
            c.line("Currently running services:")
            for s in services:
                c.line(f"  {s}")
            return 0
        service, rest = args[0], args[1:]
        fn = getattr(self, "_dumpsys_" + service.replace(".", "_"), None)
        if service == "crate_sim" and self.persona.sim_services:
            c.line(json.dumps(self.phone.state_json(), ensure_ascii=False))
            return 0
        if fn is None:
            if service in services:
                return 0
            c.error(f"Can't find service: {service}")
            return 0
        fn(c, rest)
        return 0

    def _dumpsys_window(self, c: Ctx, rest: list[str]) -> None:
        pkg, act = self._focus()
        w, h = self.phone.size
        win = f"Window{{{_hexid('w', pkg, act)} u0 {pkg}/{act}}}" if pkg else "null"
        rec = f"ActivityRecord{{{_hexid('a', pkg, act)} u0 {pkg}/{act} t{_pid_for(pkg) % 100 + 10}}}" if pkg else "null"
        if not rest or rest[0] in ("windows", "w", "all", "-a"):
            c.line("WINDOW MANAGER WINDOWS (dumpsys window windows)")
            if pkg:
                c.line(f"  Window #0 {win}:")
                c.line(f"    mDisplayId=0 rootTaskId=1 mSession=Session{{{_hexid('s', pkg)} {_pid_for(pkg)}:u0a10123}} mClient=android.os.BinderProxy@{_hexid('b', pkg)}")
                c.line(f"    mOwnerUid=10123 showForAllUsers=false package={pkg} appop=NONE")
                c.line("    mAttrs={(0,0)(fillxfill) sim={adjust=pan} ty=BASE_APPLICATION fmt=TRANSLUCENT}")
                c.line("    mHasSurface=true isReadyForDisplay()=true mWindowRemovalAllowed=false")
                c.line(f"    Frames: parent=[0,0][{w},{h}] display=[0,0][{w},{h}] frame=[0,0][{w},{h}]")
                c.line("    isOnScreen=true")
                c.line("    isVisible=true")
            c.line("")
            c.line(f"  mGlobalConfiguration={{1.0 ?mcc?mnc [en_US] ldltr sw{w * 160 // self.phone.density}dp {self.phone.density}dpi nrml long port finger -keyb/v/h -nav/h}}")
            c.line("  mHasPermanentDpad=false")
            c.line("  mTopFocusedDisplayId=0")
            c.line(f"  mCurrentFocus={win}")
            c.line(f"  mFocusedApp={rec}")
            return
        if rest[0] in ("displays", "d"):
            c.line("WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)")
            c.line("  Display: mDisplayId=0 rootTasks=1")
            c.line(f"    init={w}x{h} {self.phone.density}dpi cur={w}x{h} app={w}x{h} rng={w}x{w}-{h}x{h}")
            c.line(f"    mCurrentFocus={win}")
            c.line(f"    mFocusedApp={rec}")
            return
        if rest[0] == "policy":
            self._dumpsys_window_policy(c)
            return
        c.line(f"  mCurrentFocus={win}")
        c.line(f"  mFocusedApp={rec}")

    def _keyguard(self) -> tuple[bool, bool, bool, str]:
        """(awake, lock screen showing, secure, lock mode) of the phone (a phone without a
        keyguard model is awake and unlocked)."""
        kg = getattr(self.phone, "keyguard", None)
        if kg is None:
            return True, False, False, "none"
        return kg.awake, kg.showing, kg.secure, kg.mode

    def _dumpsys_window_policy(self, c: Ctx) -> None:
        """PhoneWindowManager's dump with its KeyguardServiceDelegate and KeyguardStateMonitor
        blocks (field names as KeyguardServiceDelegate.dump and KeyguardStateMonitor.dump print them)."""
        awake, showing, secure, mode = self._keyguard()
        on = "true" if awake else "false"
        c.line("WINDOW MANAGER POLICY STATE (dumpsys window policy)")
        c.line("    mSafeMode=false mSystemReady=true mSystemBooted=true")
        c.line(f"    mKeyguardDrawComplete=true mWindowManagerDrawComplete={on}")
        c.line(f"    mScreenOnEarly={on} mScreenOnFully={on}")
        c.line("    KeyguardServiceDelegate")
        c.line(f"      showing={str(showing).lower()}")
        c.line(f"      inputRestricted={str(showing).lower()}")
        c.line("      occluded=false")
        c.line(f"      secure={str(secure).lower()}")
        c.line("      dreaming=false")
        c.line("      systemIsReady=true")
        c.line(f"      deviceHasKeyguard={str(mode != 'none').lower()}")
        c.line("      enabled=true")
        c.line("      offReason=OFF_BECAUSE_OF_USER")
        c.line("      currentUser=0")
        c.line("      bootCompleted=true")
        c.line(f"      screenState={'SCREEN_STATE_ON' if awake else 'SCREEN_STATE_OFF'}")
        c.line(f"      interactiveState={'INTERACTIVE_STATE_AWAKE' if awake else 'INTERACTIVE_STATE_SLEEP'}")
        c.line("      KeyguardStateMonitor")
        c.line(f"        mIsShowing={str(showing).lower()}")
        c.line("        mSimSecure=false")
        c.line(f"        mInputRestricted={str(showing).lower()}")
        c.line("        mTrusted=false")
        c.line("        mCurrentUserId=0")

    def _dumpsys_activity(self, c: Ctx, rest: list[str]) -> None:
        pkg, act = self._focus()
        rec = f"ActivityRecord{{{_hexid('a', pkg, act)} u0 {pkg}/{act} t{_pid_for(pkg) % 100 + 10}}}"
        sub = rest[0] if rest else ""
        if sub in ("top",):
            c.line("TASK 10123:" + pkg + f" id={_pid_for(pkg) % 100 + 10} userId=0")
            c.line(f"  ACTIVITY {pkg}/{act} {_hexid('a', pkg, act)} pid={_pid_for(pkg)}")
            return
        if sub in ("", "activities", "a", "recents", "r"):
            c.line("ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)")
            c.line("Display #0 (activities from top to bottom):")
            if pkg:
                c.line(f"  * Task{{{_hexid('t', pkg)} #{_pid_for(pkg) % 100 + 10} type=standard A=10123:{pkg}}}")
                c.line(f"    * Hist  #0: {rec}")
                c.line(f"  mResumedActivity: {rec}")
                c.line(f"  ResumedActivity: {rec}")
                c.line(f"  mFocusedApp={rec}")
            return
        if sub in ("processes", "p"):
            for p, pid in sorted(self.running_packages().items()):
                c.line(f"  *APP* UID 10123 ProcessRecord{{{_hexid('p', p)} {pid}:{p}/u0a123}}")
            return
        if sub == "broadcasts":
            c.line("ACTIVITY MANAGER BROADCAST STATE (dumpsys activity broadcasts)")
            return

    def _dumpsys_display(self, c: Ctx, rest: list[str]) -> None:
        w, h = self.phone.size
        d = self.phone.density
        rot = int(getattr(self.phone, "rotation", 0) or 0)
        uid = f"local:{self.persona.display_id}"
        c.line("DISPLAY MANAGER (dumpsys display)")
        c.line("  mOnlyCore=false")
        c.line("  mSafeMode=false")
        c.line("  mPendingTraversal=false")
        c.line(
            f"  mViewports=[DisplayViewport{{type=INTERNAL, valid=true, isActive=true, displayId=0, uniqueId='{uid}', "
            f"physicalPort=0, orientation={rot}, logicalFrame=Rect(0, 0 - {w}, {h}), physicalFrame=Rect(0, 0 - {w}, {h}), "
            f"deviceWidth={w}, deviceHeight={h}}}]"
        )
        c.line("  mDefaultDisplayDefaultColorMode=0")
        c.line("")
        c.line("Display Devices: size=1")
        c.line(
            f'  DisplayDeviceInfo{{"Built-in Screen": uniqueId="{uid}", {w} x {h}, modeId 1, renderFrameRate 60.0, '
            f"defaultModeId 1, supportedModes [{{id=1, width={w}, height={h}, fps=60.0}}], density {d}, {float(d)} x {float(d)} dpi, "
            f"appVsyncOff 1000000, presDeadline 16666666, touch INTERNAL, rotation {rot}, type INTERNAL, address {{port=0}}, "
            f"state ON, committedState ON, FLAG_ALLOWED_TO_BE_DEFAULT_DISPLAY, FLAG_ROTATES_WITH_CONTENT, FLAG_SECURE}}"
        )
        c.line("")
        c.line("Logical Displays: size=1")
        c.line("  Display 0:")
        c.line("    mDisplayId=0")
        c.line(
            f'    mBaseDisplayInfo=DisplayInfo{{"Built-in Screen", displayId 0, displayGroupId 0, FLAG_SECURE, FLAG_SUPPORTS_PROTECTED_BUFFERS, '
            f"real {w} x {h}, largest app {w} x {h}, smallest app {w} x {h}, appVsyncOff 1000000, rotation {rot}, "
            f"density {d} ({float(d)} x {float(d)}) dpi, state ON, type INTERNAL, uniqueId \"{uid}\"}}"
        )

    def _dumpsys_SurfaceFlinger(self, c: Ctx, rest: list[str]) -> None:
        c.line(f'Display {self.persona.display_id} (HWC display 0): port=0 pnpId=GGL displayName="Built-in Screen"')

    def _dumpsys_input_method(self, c: Ctx, rest: list[str]) -> None:
        c.line("Current Input Method Manager state:")
        for ime in self.phone.ime_list():
            c.line(f"  InputMethod #{ime}")
        c.line(f"  mCurMethodId={self.phone.ime_current()}")
        c.line("  mInputShown=false")

    def _dumpsys_battery(self, c: Ctx, rest: list[str]) -> None:
        c.write(
            "Current Battery Service state:\n  AC powered: false\n  USB powered: true\n  Wireless powered: false\n"
            "  Dock powered: false\n  Max charging current: 500000\n  Max charging voltage: 5000000\n"
            "  Charge counter: 4000000\n  status: 2\n  health: 2\n  present: true\n  level: 100\n  scale: 100\n"
            "  voltage: 4200\n  temperature: 250\n  technology: Li-ion\n"
        )

    def _dumpsys_power(self, c: Ctx, rest: list[str]) -> None:
        awake = self._keyguard()[0]
        stay_on = self.settings["global"].get("stay_on_while_plugged_in", "0")
        c.write("POWER MANAGER (dumpsys power)\n\nPower Manager State:\n"
                f"  mWakefulness={'Awake' if awake else 'Asleep'}\n"
                f"  mWakefulnessChanging=false\n  mIsPowered=true\n  mPlugType=2\n"
                f"  mStayOn={'true' if stay_on not in ('0', '') else 'false'}\n"
                f"  mHoldingWakeLockSuspendBlocker=false\n  mHoldingDisplaySuspendBlocker={str(awake).lower()}\n"
                f"Settings and Configuration:\n  mStayOnWhilePluggedInSetting={stay_on}\n"
                f"Display Power: state={'ON' if awake else 'OFF'}\n")

    def _dumpsys_package(self, c: Ctx, rest: list[str]) -> None:
        names = [a for a in rest if not a.startswith("-")]
        installed = set(self.phone.packages())
        for pkg in names:
            if pkg not in installed:
                c.line(f"Unable to find package: {pkg}")
                continue
            h = _hexid("pkg", pkg)
            c.line("Packages:")
            c.line(f"  Package [{pkg}] ({h}):")
            c.line("    userId=10123")
            c.line(f"    pkg=Package{{{h} {pkg}}}")
            c.line(f"    codePath=/data/app/{pkg}-1")
            c.line("    versionCode=1 minSdk=24 targetSdk=34")
            c.line("    versionName=1.0")
            c.line("    signatures=PackageSignatures{" + _hexid("sig", pkg) + " version:3, signatures:[" + _hexid("cert", pkg) + "], past signatures:[]}")
            c.line("    pkgFlags=[ HAS_CODE ALLOW_CLEAR_USER_DATA ALLOW_BACKUP ]")
            c.line("    firstInstallTime=2024-01-01 00:00:00")
            c.line("    lastUpdateTime=2024-01-01 00:00:00")

    # --- Android: activity manager --------------------------------------------------------------
    def cmd_am(self, c: Ctx) -> int:
        args = c.argv[1:]
        if not args:
            c.line("Activity manager (activity) commands:\n  start [-W] [-S] <INTENT>\n  force-stop <PACKAGE>\n  broadcast <INTENT>")
            return 0
        sub, rest = args[0], args[1:]
        if sub in ("start", "start-activity"):
            return self._am_start(c, rest)
        if sub in ("force-stop", "kill", "stop-app"):
            pkgs = [a for a in rest if not a.startswith("-") and not a.isdigit()]
            if not pkgs:
                raise CommandError(f"Error: no package specified for {sub}", 255)
            for pkg in pkgs:
                if sub == "force-stop" or sub == "stop-app":
                    self.phone.force_stop(pkg)
                self._mark_running(pkg, False)
            return 0
        if sub == "broadcast":
            intent = _parse_intent(rest)
            intent.flags |= 0x400000  # what `am broadcast` prints for every broadcast on Android 14
            if not intent.action:
                raise CommandError("Error: broadcast needs an action (-a)", 255)
            c.line(f"Broadcasting: {intent.describe()}")
            result = self.phone.broadcast(intent.action, intent.extras)
            c.line(result or "Broadcast completed: result=0")
            return 0
        if sub == "get-current-user":
            c.line("0")
            return 0
        if sub == "stack" or sub == "task":
            pkg, act = self._focus()
            c.line(f"RootTask id={_pid_for(pkg) % 100 + 10} bounds=[0,0][{self.phone.size[0]},{self.phone.size[1]}] displayId=0 userId=0")
            c.line(f"  taskId={_pid_for(pkg) % 100 + 10}: {pkg}/{act} visible=true topActivity=ComponentInfo{{{pkg}/{act}}}")
            return 0
        if sub in ("instrument", "startservice", "start-service", "start-foreground-service", "stopservice"):
            c.error(f"Error: '{sub}' is not supported" + self._sim_note(" by the simulated phone"))
            return 1
        c.error(f"Error: Unknown command: {sub}")
        return 255

    def _am_start(self, c: Ctx, rest: list[str]) -> int:
        intent = _parse_intent(rest)
        c.line(f"Starting: {intent.describe()}")
        pkg, act = intent.package, intent.activity
        if intent.component:
            pkg, _, act = intent.component.partition("/")
            if act.startswith("."):
                act = pkg + act  # ComponentName.unflattenFromString expands ".Act"
        if not pkg:
            start_intent = getattr(self.phone, "start_intent", None)
            if callable(start_intent) and start_intent(intent.action, intent.data, intent.extras):
                return 0
            c.error(f"Error: Activity not started, unable to resolve {intent.describe()}")
            return 1
        if intent.stop_first:
            self.phone.force_stop(pkg)
        t0 = time.monotonic()
        if not self.phone.launch(pkg, act or None):
            if pkg in set(self.phone.packages()):
                c.error(f"Error type 3\nError: Activity class {{{pkg}/{act}}} does not exist.")
            else:
                c.error(f"Error: Activity not started, unable to resolve {intent.describe()}")
            return 1
        self._mark_running(pkg, True)
        if intent.wait:
            ms = max(1, int((time.monotonic() - t0) * 1000))
            fpkg, fact = self._focus()
            c.line("Status: ok")
            c.line("LaunchState: COLD")
            c.line(f"Activity: {fpkg}/{fact}")
            c.line(f"TotalTime: {ms}")
            c.line(f"WaitTime: {ms + 2}")
            c.line("Complete")
        return 0

    def cmd_monkey(self, c: Ctx) -> int:
        args = c.argv[1:]
        pkgs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-p"]
        if not pkgs:
            c.error("** Error: no packages specified" + self._sim_note(" (monkey needs -p PKG on the simulated phone)"))
            return 1
        t0 = time.monotonic()
        c.line(f"  bash arg: {' '.join(args)}")
        if not self.phone.launch(pkgs[0], None):
            c.line("** No activities found to run, monkey aborted.")
            return 252
        self._mark_running(pkgs[0], True)
        ms = int((time.monotonic() - t0) * 1000)
        c.line("Events injected: 1")
        c.line(f"## Network stats: elapsed time={ms}ms (0ms mobile, 0ms wifi, {ms}ms not connected)")
        return 0

    # --- Android: package manager ---------------------------------------------------------------
    def cmd_pm(self, c: Ctx) -> int:
        args = c.argv[1:]
        if not args:
            c.line("Package manager (package) commands:\n  list packages [-3] [-s] [-f] [FILTER]\n  path PACKAGE\n  clear PACKAGE")
            return 0
        sub, rest = args[0], args[1:]
        installed = sorted(set(self.phone.packages()))
        if sub == "list":
            what = rest[0] if rest else ""
            if what not in ("packages", "package"):
                if what in ("features", "permissions", "users", "libraries", "instrumentation", "permission-groups"):
                    if what == "users":
                        c.line("Users:\n\tUserInfo{0:Owner:c13} running")
                    return 0
                raise CommandError(f"Error: unknown list type '{what}'")
            flags = [a for a in rest[1:] if a.startswith("-")]
            filt = [a for a in rest[1:] if not a.startswith("-")]
            system = {p for p in installed if p.startswith(("android", "com.android.", "com.google.android."))}
            chosen = installed
            if "-3" in flags:
                chosen = [p for p in chosen if p not in system]
            if "-s" in flags:
                chosen = [p for p in chosen if p in system]
            if filt and filt[0] not in ("--user",):
                chosen = [p for p in chosen if filt[-1] in p]
            for p in chosen:
                c.line(f"package:/data/app/{p}-1/base.apk={p}" if "-f" in flags else f"package:{p}")
            return 0
        if sub == "path":
            pkg = next((a for a in rest if not a.startswith("-")), "")
            if pkg not in installed:
                return 1
            c.line(f"package:/data/app/~~{_hexid('path', pkg)}==/{pkg}-{_hexid('p2', pkg)}==/base.apk")
            return 0
        if sub == "clear":
            pkg = next((a for a in rest if not a.startswith("-") and not a.isdigit()), "")
            ok = bool(pkg) and self.phone.clear_data(pkg)
            if ok:
                self._mark_running(pkg, False)
            c.line("Success" if ok else "Failed")
            return 0 if ok else 1
        if sub == "install" or sub == "install-create":
            paths = [a for a in rest if not a.startswith("-")]
            self.installs.extend(paths)
            install = getattr(self.phone, "install_apk", None)
            if callable(install) and paths:
                ok = install(c.path(paths[-1]))
                c.line("Success" if ok else "Failure [INSTALL_FAILED_INVALID_APK]")
                return 0 if ok else 1
            c.line("Failure [INSTALL_FAILED_INVALID_APK: " + (self._sim_note("the simulated phone cannot install APKs")
                                                             or "Failed to parse APK") + "]")
            return 1
        if sub == "uninstall":
            pkg = next((a for a in rest if not a.startswith("-")), "")
            uninstall = getattr(self.phone, "uninstall", None)
            if callable(uninstall) and uninstall(pkg):
                c.line("Success")
                return 0
            c.line("Failure [DELETE_FAILED_INTERNAL_ERROR]")
            return 1
        if sub in ("grant", "revoke", "disable-user", "enable", "hide", "unhide", "set-home-activity", "trim-caches"):
            return 0
        if sub == "dump":
            self._dumpsys_package(c, rest)
            return 0
        c.error(f"Unknown command: {sub}")
        return 1

    # --- Android: properties, settings, input methods -------------------------------------------
    def all_props(self) -> dict[str, str]:
        info = self.phone.info
        persona = self.persona
        props = {
            "ro.product.name": info.product,
            "ro.product.model": info.model,
            "ro.product.device": info.device,
            "ro.product.brand": persona.brand if info.manufacturer == persona.manufacturer else info.manufacturer,
            "ro.product.manufacturer": info.manufacturer,
            "ro.product.board": info.device,
            "ro.build.version.sdk": str(info.sdk),
            "ro.build.version.release": info.release,
            "ro.build.version.release_or_codename": info.release,
            "ro.build.type": "user",
            "ro.build.tags": "release-keys",
            "ro.build.characteristics": "default",
            "ro.build.fingerprint": f"{info.manufacturer}/{info.product}/{info.device}:{info.release}/CRATE.SIM/1:user/release-keys",
            "ro.serialno": info.serial,
            "ro.boot.serialno": info.serial,
            "ro.debuggable": "0",
            "ro.secure": "1",
            "ro.sf.lcd_density": str(self.phone.density),
            "sys.boot_completed": "1",
            "dev.bootcomplete": "1",
            "init.svc.adbd": "running",
            "persist.sys.locale": "en-US",
            "persist.sys.timezone": "UTC",
            "service.adb.root": "0",
        }
        props.update(persona.props)
        if persona.sim_services:
            w, h = self.phone.size
            props["ro.crate.screen"] = f"{w}x{h}"
        props.update(info.props)
        props.update(self.props)
        return props

    def cmd_getprop(self, c: Ctx) -> int:
        props = self.all_props()
        names = [a for a in c.argv[1:] if not a.startswith("-")]
        if not names:
            for k in sorted(props):
                c.line(f"[{k}]: [{props[k]}]")
            return 0
        value = props.get(names[0], names[1] if len(names) > 1 else "")
        c.line(value)
        return 0

    def cmd_setprop(self, c: Ctx) -> int:
        if len(c.argv) != 3:
            raise CommandError("setprop: need 2 arguments")
        name = c.argv[1]
        if name.startswith("ro.") and name in self.all_props():
            raise CommandError(f"Failed to set property '{name}' to '{c.argv[2]}'.")
        self.props[name] = c.argv[2]
        return 0

    def cmd_settings(self, c: Ctx) -> int:
        args = [a for a in c.argv[1:]]
        while args and args[0] in ("--user", "--lineage"):
            args = args[2:] if args[0] == "--user" else args[1:]
        if len(args) < 2:
            c.line("Settings provider (settings) commands:\n  get NAMESPACE KEY\n  put NAMESPACE KEY VALUE\n  delete NAMESPACE KEY\n  list NAMESPACE")
            return 0 if not args else 255
        verb, ns = args[0], args[1]
        if ns not in self.settings:
            raise CommandError(f"Invalid namespace '{ns}'", 255)
        store = self.settings[ns]
        if verb == "get" and len(args) >= 3:
            key = args[2]
            if ns == "secure" and key == "default_input_method":
                c.line(self.phone.ime_current() or "null")
            elif ns == "secure" and key == "enabled_input_methods":
                c.line(":".join(self._enabled_imes()) or "null")
            else:
                c.line(store.get(key, "null"))
            return 0
        if verb == "put" and len(args) >= 4:
            key, value = args[2], args[3]
            if ns == "secure" and key == "default_input_method":
                self.phone.ime_set(value)
            else:
                store[key] = value
            return 0
        if verb == "delete" and len(args) >= 3:
            c.line("Deleted 1 rows" if store.pop(args[2], None) is not None else "Deleted 0 rows")
            return 0
        if verb == "list":
            for k in sorted(store):
                c.line(f"{k}={store[k]}")
            if ns == "secure":
                c.line(f"default_input_method={self.phone.ime_current()}")
            return 0
        raise CommandError(f"Invalid command: {' '.join(args)}", 255)

    def _enabled_imes(self) -> list[str]:
        enabled = getattr(self.phone, "ime_enabled", None)
        return enabled() if callable(enabled) else self.phone.ime_list()

    def cmd_ime(self, c: Ctx) -> int:
        """``ime list [-a] [-s]``: the enabled input methods (``-a``: every installed one);
        ``enable``/``disable``/``set ID`` (set needs an enabled IME, as InputMethodManagerService)."""
        args = c.argv[1:]
        sub, rest = (args[0], args[1:]) if args else ("", [])
        imes = self.phone.ime_list()
        if sub == "list":
            shown = imes if "-a" in rest else [i for i in imes if i in self._enabled_imes()]
            if "-s" in rest:
                for ime in shown:
                    c.line(ime)
            else:
                for ime in shown:
                    pkg, _, svc = ime.partition("/")
                    c.line(f"{ime}:")
                    c.line(f"  mId={ime} mSettingsActivityName=null")
                    c.line(f"  Service:\n    ServiceInfo:\n      name={svc} packageName={pkg}")
            return 0
        toggle = getattr(self.phone, "ime_enable", None)
        if sub in ("set", "enable", "disable"):
            ime = rest[-1] if rest else ""
            if ime not in imes:
                verb = {"set": "selected", "enable": "enabled", "disable": "disabled"}[sub]
                c.error(f"Unknown input method {ime} cannot be {verb} for user #0")
                return 255
            was = ime in self._enabled_imes()
            if sub == "set":
                if not self.phone.ime_set(ime):
                    c.error(f"Unknown input method {ime} cannot be selected for user #0")
                    return 255
                c.line(f"Input method {ime} selected for user #0")
            elif sub == "enable":
                if callable(toggle):
                    toggle(ime, True)
                c.line(f"Input method {ime}: {'already enabled' if was else 'now enabled'} for user #0")
            else:
                if callable(toggle):
                    toggle(ime, False)
                c.line(f"Input method {ime}: {'now disabled' if was else 'already disabled'} for user #0")
            return 0
        if sub == "reset":
            return 0
        c.line("ime <command>:\n  list [-a] [-s]\n  enable ID\n  disable ID\n  set ID\n  reset")
        return 0 if not sub else 255

    # --- processes ------------------------------------------------------------------------------
    def _processes(self) -> list[tuple[str, int, str]]:
        procs = [
            ("root", 1, "init"),
            ("root", 345, "zygote64"),
            ("system", 612, "system_server"),
            ("u0_a55", 933, "com.android.systemui"),
            ("shell", 4242, "sh"),
        ]
        if self.u2 is not None and self.u2.running_ports():
            procs.append(("shell", 4300, "app_process"))
        for pkg, pid in sorted(self.running_packages().items()):
            procs.append(("u0_a123", pid, pkg))
        return procs

    def cmd_ps(self, c: Ctx) -> int:
        c.line("USER            PID   PPID     VSZ    RSS WCHAN            ADDR S NAME                       ")
        for user, pid, name in self._processes():
            c.line(f"{user:<12}{pid:>7}{1 if pid > 1 else 0:>7} {12345678:>10} {123456:>6} 0                   0 S {name}")
        return 0

    def cmd_pidof(self, c: Ctx) -> int:
        names = set(c.argv[1:])
        pids = [str(pid) for _, pid, name in self._processes() if name in names]
        if pids:
            c.line(" ".join(pids))
            return 0
        return 1

    def cmd_pgrep(self, c: Ctx) -> int:
        pats = [a for a in c.argv[1:] if not a.startswith("-")]
        pids = [str(pid) for _, pid, name in self._processes() if any(re.search(p, name) for p in pats)]
        for p in pids:
            c.line(p)
        return 0 if pids else 1

    def cmd_pkill(self, c: Ctx) -> int:
        pats = [a for a in c.argv[1:] if not a.startswith("-")]
        return self._kill([name for _, _, name in self._processes() if any(re.search(p, name) for p in pats)])

    def cmd_killall(self, c: Ctx) -> int:
        return self._kill([a for a in c.argv[1:] if not a.startswith("-")])

    def cmd_kill(self, c: Ctx) -> int:
        pids = {a for a in c.argv[1:] if a.isdigit()}
        return self._kill([name for _, pid, name in self._processes() if str(pid) in pids])

    def _kill(self, names: list[str]) -> int:
        hit = False
        for name in names:
            if name == "app_process" and self.u2 is not None:
                for port in self.u2.running_ports():
                    self.u2.stop(port)
                hit = True
            elif name in self.running_packages():
                self.phone.force_stop(name)
                self._mark_running(name, False)
                hit = True
        return 0 if hit else 1

    def cmd_app_process(self, c: Ctx) -> int:
        """``CLASSPATH=... app_process [-D...] DIR CLASS [ARGS]``. Only the uiautomator2 server
        class runs: it marks the device-side HTTP server (``tcp:PORT``) alive until the stream
        that started it closes, exactly like the real jar whose lifetime is its adb shell."""
        args = c.argv[1:]
        while args and args[0].startswith("-"):
            args = args[1:]
        if len(args) < 2:
            c.error("Usage: app_process [java-options] cmd-dir start-class-name [options]")
            return 1
        cls, cargs = args[1], args[2:]
        classpath = [p for p in c.env.get("CLASSPATH", "").split(":") if p]
        if not any(self.phone.fs.read(normpath(p)) is not None for p in classpath) or self.u2 is None or cls not in _U2_CLASSES:
            c.write(f'Exception in thread "main" java.lang.ClassNotFoundException: {cls}\n')
            return 1
        port = 9008
        for i, a in enumerate(cargs[:-1]):
            if a in ("-p", "--port"):
                port = _int(cargs[i + 1], "port")
        token = self.u2.start(port)
        if token is None:
            c.write(
                "[server] INFO: [UiAutomator2Server] Starting Server\n"
                "java.lang.IllegalStateException: UiAutomationService android.accessibilityservice."
                "IAccessibilityServiceClient$Stub$Proxy@5deffd5already registered!\n"
            )
            return 1
        c.write(f"[server] INFO: [UiAutomator2Server] Starting Server\n[server] INFO: server listening on port {port}\n")
        try:
            self.u2.wait(port, token, c.cancel)
        finally:
            self.u2.stop(port, token)
        return 0 if not c.cancel.is_set() else 137

    # --- cmd ------------------------------------------------------------------------------------
    def cmd_cmd(self, c: Ctx) -> int:
        if len(c.argv) < 2 or c.argv[1] == "-l":
            for s in _DUMPSYS_SERVICES:
                c.line(s)
            return 0
        service, rest = c.argv[1], c.argv[2:]
        mapped = {"package": "pm", "activity": "am", "input_method": "ime", "settings": "settings", "window": "wm", "input": "input"}.get(service)
        if mapped:
            return self._commands[mapped](Ctx(c.shell, c.sess, [mapped] + rest, c.out, c.err, c.stdin, c.env, c.cancel))
        if service in ("statusbar", "notification", "uimode", "power", "wifi", "connectivity", "clipboard", "overlay", "role"):
            return 0
        c.error(f"Can't find service: {service}")
        return 20

    def cmd_reboot(self, c: Ctx) -> int:
        c.error("reboot: Operation not permitted" + self._sim_note(" (the simulated phone cannot reboot)"))
        return 1

    def cmd_su(self, c: Ctx) -> int:
        c.error(f"{SH}: su: not found")
        return 127


# =============================================================================================
# Helpers
# =============================================================================================
_U2_CLASSES = {"com.wetest.uia2.Main", "com.github.uiautomator.stub.Main"}

_DUMPSYS_SERVICES = [
    "activity", "battery", "clipboard", "crate_sim", "display", "input", "input_method", "package",
    "power", "settings", "SurfaceFlinger", "statusbar", "window",
]

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


def _split_flags(args: list[str], with_value: set[str] | None = None) -> tuple[dict[str, str], list[str]]:
    """Toybox-style short flags: ``-rf``, ``-n 5``. Returns ({flag: value or ''}, operands)."""
    with_value = with_value or set()
    flags: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i + 1 :])
            break
        if a.startswith("--") and len(a) > 2:
            flags[a[2:]] = ""
        elif a.startswith("-") and len(a) > 1 and not a[1:].lstrip("-").isdigit():
            j = 1
            while j < len(a):
                f = a[j]
                if f in with_value:
                    value = a[j + 1 :] or (args[i + 1] if i + 1 < len(args) else "")
                    if not a[j + 1 :]:
                        i += 1
                    flags[f] = value
                    break
                flags[f] = ""
                j += 1
        else:
            rest.append(a)
        i += 1
    return flags, rest


def _fmt_time(t: int) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S.000000000 +0000")


def _ls_line(name: str, mode: int, size: int, mtime: int) -> str:
    owner, group = ("root", "sdcard_rw") if stat_mod.S_ISDIR(mode) else ("u0_a123", "sdcard_rw")
    when = datetime.fromtimestamp(mtime).strftime("%Y-%m-%d %H:%M")
    return f"{stat_mod.filemode(mode)} 1 {owner} {group} {size:>8} {when} {name}"


def _with_decl(xml: str) -> str:
    s = xml.lstrip()
    return s if s.startswith("<?xml") else XML_DECL + s


def _bre_to_re(p: str) -> str:
    """POSIX basic regex to Python: ``\\( \\) \\| \\{ \\} \\+ \\?`` are the operators, bare ones literal."""
    out = []
    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "\\" and i + 1 < len(p):
            nxt = p[i + 1]
            out.append(nxt if nxt in "(){}|+?" else "\\" + nxt)
            i += 2
            continue
        out.append("\\" + ch if ch in "(){}|+?" else ch)
        i += 1
    return "".join(out)


_TR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_TR_CLASSES = {"alnum": str.isalnum, "alpha": str.isalpha, "digit": str.isdigit, "lower": str.islower,
               "upper": str.isupper, "space": str.isspace, "blank": lambda c: c in " \t",
               "punct": lambda c: c.isascii() and c.isprintable() and not c.isalnum() and c != " ",
               "cntrl": lambda c: ord(c) < 32 or ord(c) == 127, "print": lambda c: c.isascii() and c.isprintable(),
               "xdigit": lambda c: c in "0123456789abcdefABCDEF"}


def _tr_tokens(spec: str) -> list[tuple[str, bool]]:
    """A tr set's characters with POSIX escapes resolved (``\\n \\t \\\\ \\NNN``...), each with
    whether it was written literally (an escaped ``-`` is never a range)."""
    out: list[tuple[str, bool]] = []
    i = 0
    while i < len(spec):
        c = spec[i]
        if c == "\\" and i + 1 < len(spec):
            nxt = spec[i + 1]
            m = re.match(r"[0-7]{1,3}", spec[i + 1:])
            if m:
                out.append((chr(int(m.group(), 8)), False))
                i += 1 + len(m.group())
            else:
                out.append((_TR_ESCAPES.get(nxt, nxt), False))
                i += 2
            continue
        out.append((c, True))
        i += 1
    return out


def _tr_set(spec: str) -> str:
    """A tr SET as toybox/POSIX tr reads it: escapes, ``a-z`` ranges and ``[:class:]`` (ASCII)."""
    out: list[str] = []
    for name in _TR_CLASSES:  # argv cannot hold NUL, so it marks where a class was written
        spec = spec.replace(f"[:{name}:]", "\x00" + name + "\x00")
    toks = _tr_tokens(spec)
    i = 0
    while i < len(toks):
        c, literal = toks[i]
        if (c, literal) == ("\x00", True):
            j = next(k for k in range(i + 1, len(toks)) if toks[k] == ("\x00", True))
            name = "".join(t for t, _ in toks[i + 1:j])
            out.extend(ch for ch in map(chr, range(128)) if _TR_CLASSES[name](ch))
            i = j + 1
        elif i + 2 < len(toks) and toks[i + 1] == ("-", True):
            out.extend(chr(x) for x in range(ord(c), ord(toks[i + 2][0]) + 1))
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


@dataclass
class Intent:
    action: str = ""
    data: str = ""
    component: str = ""
    package: str = ""
    activity: str = ""
    categories: list[str] = field(default_factory=list)
    extras: dict[str, str | int | bool] = field(default_factory=dict)
    flags: int = 0
    wait: bool = False
    stop_first: bool = False

    def describe(self) -> str:
        parts = []
        if self.action:
            parts.append(f"act={self.action}")
        if self.categories:
            parts.append("cat=[" + ",".join(self.categories) + "]")
        if self.data:
            parts.append(f"dat={self.data}")
        if self.flags:
            parts.append(f"flg=0x{self.flags:x}")
        if self.package and not self.component:
            parts.append(f"pkg={self.package}")
        if self.component:
            parts.append(f"cmp={self.component}")
        if self.extras:
            parts.append("(has extras)")
        return "Intent { " + " ".join(parts) + " }"


_NO_ARG_OPTS = {"-W", "-S", "-D", "-N", "--receiver-foreground", "--receiver-registered-only", "--activity-clear-task",
                "--activity-new-task", "--activity-clear-top", "--activity-single-top", "--activity-no-history",
                "--activity-reorder-to-front", "--activity-brought-to-front", "--grant-read-uri-permission",
                "--grant-write-uri-permission", "--exclude-stopped-packages", "--include-stopped-packages",
                "--debug-log-resolution", "--track-allocation", "--streaming", "--async", "--allow-background-activity-starts"}


def _parse_intent(args: list[str]) -> Intent:
    """``am start``/``am broadcast`` intent arguments (Intent.parseCommandArgs)."""
    it = Intent()
    i = 0

    def need(k: int = 1) -> list[str]:
        nonlocal i
        vals = args[i + 1 : i + 1 + k]
        if len(vals) < k:
            raise CommandError(f"Error: No argument supplied for '{args[i]}'", 255)
        i += k
        return vals

    while i < len(args):
        a = args[i]
        if a == "-a":
            it.action = need()[0]
        elif a == "-d":
            it.data = need()[0]
        elif a == "-t":
            need()
        elif a == "-c":
            it.categories.append(need()[0])
        elif a == "-n":
            it.component = need()[0]
        elif a == "-p":
            it.package = need()[0]
        elif a == "-f":
            v = need()[0]
            it.flags = int(v, 16) if v.lower().startswith("0x") else int(v)
        elif a in ("-e", "--es", "--eu", "--ecn", "--esa", "--esal"):
            k, v = need(2)
            it.extras[k] = v
        elif a == "--esn":
            it.extras[need()[0]] = ""
        elif a in ("--ei", "--el"):
            k, v = need(2)
            try:
                it.extras[k] = int(v)
            except ValueError:
                raise CommandError(f"Error: invalid integer for '{k}': {v}", 255) from None
        elif a in ("--ef", "--ed"):
            k, v = need(2)
            it.extras[k] = v
        elif a == "--ez":
            k, v = need(2)
            it.extras[k] = v.lower() in ("true", "t", "1", "yes")
        elif a in ("--eia", "--ela", "--efa", "--eda", "--eial", "--elal", "--efal"):
            k, v = need(2)
            it.extras[k] = v
        elif a == "-W":
            it.wait = True
        elif a == "-S":
            it.stop_first = True
        elif a in ("--user", "-R", "-P", "--start-profiler", "--sampling", "--attach-agent", "--display",
                   "--windowingMode", "--activityType", "--task", "--receiver-permission", "--selector"):
            need()
        elif a in _NO_ARG_OPTS or a.startswith("--activity-"):
            pass
        elif a.startswith("-"):
            pass
        else:
            if ":" in a:
                it.data = a
            elif "/" in a:
                it.component = a
            else:
                it.package = a
        i += 1
    if it.component:
        it.activity = it.component.partition("/")[2]
    return it


__all__ = ["BytesSource", "InputSource", "Shell", "ShellResult", "ShellSyntaxError", "parse"]
