"""The simulated phone's shell at run time: one Shell per phone, its shared state (settings,
props, running apps, the command log), and how it runs a parsed command line (lists, pipelines,
redirections, expansion, globs, dispatch through the command table).

A command that raises prints an error and returns a non-zero status: the shell never lets an
exception out of ``run``. Every simple command that runs is appended, as its final argv, to
``Shell.log`` (tests use it to prove an injection never ran).
"""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import re
import stat as stat_mod
import threading
from typing import TYPE_CHECKING

import harness.sim.shell.commands  # noqa: F401 (importing the command modules fills the table)
from harness.sim.evdev import InputSubsystem
from harness.sim.fs import normpath, shell_write_error
from harness.sim.persona import SIM, Persona
from harness.sim.shell.context import (SH, BytesSource, CommandError, Ctx, ExitShell, InputSource, Session,
                                       ShellResult, Writer, pid_for)
from harness.sim.shell.parse import Pipeline, Redirect, Script, Seg, ShellSyntaxError, Simple, Word, parse, static_argv
from harness.sim.shell.table import COMMANDS, Command
from harness.sim.u2 import TouchTracker

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.command_log import CommandLog
    from harness.sim.phone_api import PhoneAPI
    from harness.sim.profile import Profile
    from harness.sim.u2 import U2Server

LOG_LIMIT = 20000


def _null(_: bytes) -> None:
    return None


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
        self.touch = TouchTracker(phone)
        profile = self.profile
        self.evdev = InputSubsystem(phone, touchscreen=phone.info.touchscreen, on_gesture=self.touch.gesture,
                                    devices=profile.input_devices() if profile is not None else None)
        self._commands: dict[str, Command] = dict(COMMANDS)  # this phone's own table (tests may replace an entry)

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
        sess = Session(env=self._base_env())
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
            return self.run_script(script, sess, out, err, stdin or InputSource(), cancel)
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

    def handler(self, name: str) -> Command | None:
        """The function this shell runs for the command ``name`` (None: not a command here)."""
        return self._commands.get(name)

    @property
    def persona(self) -> Persona:
        return getattr(self.phone, "persona", SIM)

    @property
    def profile(self) -> "Profile | None":
        """The real phone whose formats this phone answers in (``harness.sim.profile``), if any."""
        return getattr(self.phone, "profile", None)

    def sim_note(self, text: str) -> str:
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

    def run_script(self, script: Script, sess: Session, out: Writer, err: Writer, stdin: InputSource, cancel: threading.Event) -> int:
        """Run a parsed script in ``sess`` (``sh`` and ``$(...)`` run theirs in a child session)."""
        for conn, pipeline in script:
            if cancel.is_set():
                break
            if conn == "&&" and sess.status != 0:
                continue
            if conn == "||" and sess.status == 0:
                continue
            sess.status = self._run_pipeline(pipeline, sess, out, err, stdin, cancel)
        return sess.status

    def _run_pipeline(self, pl: Pipeline, sess: Session, out: Writer, err: Writer, stdin: InputSource, cancel: threading.Event) -> int:
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

    def _run_simple(self, cmd: Simple, sess: Session, out: Writer, err: Writer, stdin: InputSource, cancel: threading.Event) -> int:
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

    def _dispatch(self, argv: list[str], sess: Session, out: Writer, err: Writer, stdin: InputSource, env: dict[str, str], cancel: threading.Event) -> int:
        with self._lock:
            self.log.append(list(argv))
            if len(self.log) > LOG_LIMIT:
                del self.log[: len(self.log) - LOG_LIMIT]
        name = argv[0]
        if name in ("toybox", "busybox") and len(argv) > 1:
            argv = argv[1:]
            name = argv[0]
        base = posixpath.basename(name) if "/" in name else name
        fn = self.handler(base)
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
    def _expand_words(self, words: list[Word], sess: Session, cancel: threading.Event) -> list[str]:
        argv: list[str] = []
        for w in words:
            argv.extend(self._expand_word(w, sess, cancel, split=True))
        return argv

    def _expand_word(self, word: Word, sess: Session, cancel: threading.Event, split: bool) -> list[str]:
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

    def _expand_seg(self, seg: Seg, sess: Session, cancel: threading.Event) -> str:
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
            sub = Session(env=dict(sess.env), cwd=sess.cwd, status=sess.status)
            try:
                script = parse(seg.text)
            except ShellSyntaxError as e:
                raise CommandError(f"{SH}: syntax error: {e}", 2) from None
            try:
                self.run_script(script, sub, buf.extend, _null, InputSource(), cancel)
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
    def focus(self) -> tuple[str, str]:
        """The package and activity in front ('' when there is none)."""
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
                    running.setdefault(pkg, pid_for(pkg))
            except Exception:
                pass
        pkg, _ = self.focus()
        if pkg:
            running.setdefault(pkg, pid_for(pkg))
        return running

    def mark_running(self, pkg: str, running: bool) -> None:
        """Record that ``pkg`` was started (``am start``, ``monkey``) or stopped (force-stop, clear, kill)."""
        with self._lock:
            if running:
                self._running[pkg] = pid_for(pkg)
            else:
                self._running.pop(pkg, None)
