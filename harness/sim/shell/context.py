"""What a simulated shell command sees and may raise: its Ctx (argv, streams, environment, the
cancel flag, the shell), stdin sources, CommandError/ExitShell, and the small argument helpers the
command groups share (toybox-style flags, numbers, stable ids and pids)."""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

from harness.sim.fs import normpath, shell_write_error

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.evdev import InputSubsystem
    from harness.sim.persona import Persona
    from harness.sim.phone_api import PhoneAPI
    from harness.sim.profile import Profile
    from harness.sim.shell.parse import Script
    from harness.sim.u2 import TouchTracker, U2Server

Writer = Callable[[bytes], None]

SH = "/system/bin/sh"


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
class Session:
    """One shell session's variables, working directory and last status (``sh -c`` and ``$(...)``
    run in a copy)."""

    env: dict[str, str]
    cwd: str = "/"
    status: int = 0


class ShellState(Protocol):
    """The phone's shell as a command sees it (``Ctx.shell``): the phone, the state every command
    shares (settings, props, running apps, input devices), and running a parsed script in a session
    (``sh -c``, ``$(...)``). :class:`harness.sim.shell.runtime.Shell` is one; the commands never
    import it (the runtime imports them, to fill the command table)."""

    phone: PhoneAPI
    u2: U2Server | None
    ascii_only_input_text: bool
    installs: list[str]                     # `pm install` attempts (APK paths)
    props: dict[str, str]                   # `setprop`'s
    settings: dict[str, dict[str, str]]     # namespace -> key -> value
    touch: TouchTracker
    evdev: InputSubsystem

    @property
    def persona(self) -> Persona: ...

    @property
    def profile(self) -> Profile | None: ...

    def sim_note(self, text: str) -> str: ...

    def handler(self, name: str) -> Callable[[Ctx], int] | None:
        """The function this shell runs for the command ``name`` (None: not a command here)."""

    def run_script(self, script: Script, sess: Session, out: Writer, err: Writer, stdin: InputSource,
                   cancel: threading.Event) -> int: ...

    def focus(self) -> tuple[str, str]: ...

    def running_packages(self) -> dict[str, int]: ...

    def mark_running(self, pkg: str, running: bool) -> None: ...


@dataclass
class Ctx:
    """What a command sees: its argv, streams, environment and the cancel flag; ``shell`` is the
    phone's shell, whose state (phone, settings, props, running apps) every command shares."""

    shell: ShellState
    sess: Session
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

    def writable(self, tool: str, p: str, creating_root_ok: bool = False) -> bool:
        """Whether the shell user may write ``p``; if not, say why on stderr as ``tool`` does."""
        problem = shell_write_error(self.path(p), creating_root_ok)
        if problem:
            self.error(f"{tool}: {p}: {problem}")
            return False
        return True


def to_int(text: str, what: str = "number") -> int:
    try:
        return int(float(text))
    except (TypeError, ValueError):
        raise CommandError(f"Error: invalid {what}: '{text}'") from None


def hexid(*parts: object) -> str:
    """A stable hex id for a window, record or task of ``parts`` (what dumpsys prints as a hash)."""
    return format(zlib.crc32("/".join(map(str, parts)).encode()) & 0xFFFFFFF, "x")


def pid_for(name: str) -> int:
    """A stable pid for a process named ``name``."""
    return 2000 + zlib.crc32(name.encode()) % 28000


def split_flags(args: list[str], with_value: set[str] | None = None) -> tuple[dict[str, str], list[str]]:
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

