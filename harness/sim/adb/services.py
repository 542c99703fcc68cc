"""ADB services of the simulated phone: what an OPEN's service name leads to.

Service facts (AOSP ``adb/SERVICES.TXT``, ``adb/daemon/services.cpp``, ``shell_protocol.h``,
``file_sync_protocol.h``, ``framebuffer_service.cpp``; FIELD_NOTES §8):

* ``shell:CMD`` - legacy shell: raw bytes, stdout and stderr merged in order, no exit code; the
  stream closing is the end. ``shell:`` alone is an interactive shell.
* ``shell,v2[,TERM=..][,raw|,pty]:CMD`` - used by ``adb shell`` when the banner advertises
  ``shell_v2``. Packets of 1-byte id + u32 LE length + data. Device -> host: 1 stdout, 2 stderr,
  3 exit (1 byte). Host -> device: 0 stdin, 4 close stdin, 5 window size (ignored).
* ``exec:CMD`` - like legacy shell, raw and binary clean (``adb exec-out``).
* ``sync:`` - the file sync protocol: a byte stream, *not* aligned to WRTE packets (adb 36 packs a
  SEND request and the first 64 KB of DATA into one WRTE). Requests are 4-byte id + u32 LE length
  + that many bytes: STAT/LSTAT (v1: mode, size, mtime), STA2/LST2 (72-byte stat_v2 with an errno
  field), LIST (DENT entries, DONE), LIS2 (DNT2), RECV (DATA chunks of at most 64 KiB, DONE or
  FAIL), SEND ("path,mode"; then DATA..., DONE with mtime; reply OKAY or FAIL), QUIT.
* ``framebuffer:`` - a version-1 header of 13 u32 (version, bpp, size, width, height, then
  offset/length for red, blue, green, alpha) followed by the pixels (RGBA8888 here).
* ``tcp:PORT`` - a TCP connection to PORT on the device. Only the uiautomator2 server (u2.py)
  listens, and only while its ``app_process`` shell runs; otherwise the OPEN is refused (CLSE),
  which is how uiautomator2 learns it must start the server.
* ``root:`` answers ``adbd cannot run as root in production builds`` (a user build's adbd).
  ``reboot:``, ``remount:``, ``tcpip:``, ``usb:``, ``reverse:``, ``abb:`` and the rest are refused.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import stat as stat_mod
import struct
import threading
import time
import weakref
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

from harness.sim.adb import packets as P
from harness.sim.adb.transport import Handler, Stream
from harness.sim.fs import normpath, shell_write_error
from harness.sim.shell import InputSource, Shell
from harness.sim.u2 import U2Server

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.phone_api import PhoneAPI

log = logging.getLogger(__name__)

MODE_NORMAL = "normal"
MODE_UNAUTHORIZED = "unauthorized"
MODE_SHELL_V1_ONLY = "shell_v1_only"
MODES = (MODE_NORMAL, MODE_UNAUTHORIZED, MODE_SHELL_V1_ONLY)

# shell protocol packet ids (shell_protocol.h)
SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN, SHELL_WINDOW = 0, 1, 2, 3, 4, 5

SYNC_DATA_MAX = 64 * 1024
SYNC_PATH_MAX = 1024
ENOENT, EACCES, EROFS, EISDIR = 2, 13, 30, 21
_ERRNO = {"No such file or directory": ENOENT, "Permission denied": EACCES, "Read-only file system": EROFS, "Is a directory": EISDIR}

# Shells (and u2 servers) are shared per phone, so a restarted server sees the same settings,
# running apps and command log.
_shared: "weakref.WeakKeyDictionary[Any, tuple[Shell, U2Server]]" = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()


def shell_for(phone: "PhoneAPI") -> tuple[Shell, U2Server]:
    """The (shell, u2 server) pair of ``phone``, created on first use."""
    with _shared_lock:
        try:
            pair = _shared.get(phone)
        except TypeError:
            pair = None
        if pair is None:
            u2 = U2Server(phone)
            pair = (Shell(phone, u2=u2), u2)
            try:
                _shared[phone] = pair
            except TypeError:
                pass
        return pair


class QueueSource(InputSource):
    """Blocking stdin for a shell running in a worker thread, fed from the event loop."""

    def __init__(self, cancel: threading.Event) -> None:
        self._q: queue.Queue[bytes | None] = queue.Queue()
        self._cancel = cancel
        self._done = False

    def feed(self, data: bytes | None) -> None:
        self._q.put(data)

    def read(self) -> bytes:
        chunks = []
        while not self._done:
            try:
                item = self._q.get(timeout=0.1)
            except queue.Empty:
                if self._cancel.is_set():
                    break
                continue
            if item is None:
                self._done = True
                break
            chunks.append(item)
        return b"".join(chunks)


class Device:
    """The services of one simulated phone, as the transport sees them."""

    def __init__(
        self,
        phone: "PhoneAPI",
        mode: str = MODE_NORMAL,
        shell: Shell | None = None,
        u2: U2Server | None = None,
        executor: Executor | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {MODES}")
        self.phone = phone
        self.mode = mode
        if shell is None or u2 is None:
            shared_shell, shared_u2 = shell_for(phone)
            shell = shell or shared_shell
            u2 = u2 or shared_u2
        self.shell = shell
        self.u2 = u2
        self.executor = executor or ThreadPoolExecutor(max_workers=64, thread_name_prefix="adb-svc")
        self.opened: list[str] = []  # every service name the host opened (accepted or not)

    # --- banner -------------------------------------------------------------------------------
    def features(self) -> list[str]:
        feats = list(P.DEFAULT_FEATURES)
        if self.mode == MODE_SHELL_V1_ONLY:
            feats.remove("shell_v2")
        return feats

    def banner(self) -> str:
        info = self.phone.info
        return P.banner(info.product, info.model, info.device, self.features())

    # --- dispatch -----------------------------------------------------------------------------
    def open_service(self, name: str) -> Handler | None:
        self.opened.append(name)
        if len(self.opened) > 10000:
            del self.opened[:5000]
        if name.startswith("shell"):
            head, sep, cmd = name.partition(":")
            if not sep:
                return None
            opts = head.split(",")
            if opts[0] != "shell":
                return None
            v2 = "v2" in opts[1:]
            if v2 and self.mode == MODE_SHELL_V1_ONLY:
                return None
            if v2:
                return functools.partial(self._shell_v2, cmd)
            return functools.partial(self._shell_raw, cmd)
        if name.startswith("exec:"):
            return functools.partial(self._shell_raw, name[5:])
        if name == "sync:":
            return self._sync
        if name.startswith("framebuffer:"):
            return self._framebuffer
        if name.startswith("tcp:"):
            spec = name[4:].split(":")[0]
            try:
                port = int(spec)
            except ValueError:
                return None
            if self.u2.is_running(port):
                return functools.partial(self._http, port)
            return None
        if name.startswith("root:"):
            return functools.partial(self._message, "adbd cannot run as root in production builds\n")
        if name.startswith("unroot:"):
            return functools.partial(self._message, "adbd not running as root\n")
        return None  # reboot:, remount:, tcpip:, usb:, reverse:, abb:, jdwp:, dev:, ... refused

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    # --- simple -------------------------------------------------------------------------------
    async def _message(self, text: str, stream: Stream) -> None:
        stream.write(text.encode())

    # --- shell ----------------------------------------------------------------------------------
    async def _shell_raw(self, cmd: str, stream: Stream) -> None:
        """Legacy ``shell:`` and ``exec:``: output merged, no exit status."""
        stdin = QueueSource(stream.cancel)
        pump = asyncio.create_task(self._pump_raw(stream, stdin))
        try:
            if cmd.strip():
                await self._run(self.shell.run, cmd, stream.write_threadsafe, stream.write_threadsafe, stdin, stream.cancel)
            else:
                await self._interactive(stream, stdin, v2=False)
        finally:
            pump.cancel()

    async def _pump_raw(self, stream: Stream, stdin: QueueSource) -> None:
        while True:
            data = await stream.read()
            if not data:
                stdin.feed(None)
                return
            stdin.feed(data)

    async def _shell_v2(self, cmd: str, stream: Stream) -> None:
        def packet(kind: int, data: bytes) -> bytes:
            return struct.pack("<BI", kind, len(data)) + data

        stdin = QueueSource(stream.cancel)
        pump = asyncio.create_task(self._pump_v2(stream, stdin))

        def out(data: bytes) -> None:
            stream.write_threadsafe(packet(SHELL_STDOUT, data))

        def err(data: bytes) -> None:
            stream.write_threadsafe(packet(SHELL_STDERR, data))

        try:
            if cmd.strip():
                code = await self._run(self.shell.run, cmd, out, err, stdin, stream.cancel)
            else:
                code = await self._interactive(stream, stdin, v2=True)
            # let the output callbacks scheduled by the worker run first, then the exit packet
            await asyncio.sleep(0)
            stream.write(packet(SHELL_EXIT, bytes([int(code) & 0xFF])))
        finally:
            pump.cancel()

    async def _pump_v2(self, stream: Stream, stdin: QueueSource) -> None:
        try:
            while True:
                head = await stream.read_exactly(5)
                kind, length = struct.unpack("<BI", head)
                data = await stream.read_exactly(length) if length else b""
                if kind == SHELL_STDIN:
                    stdin.feed(data)
                elif kind == SHELL_CLOSE_STDIN:
                    stdin.feed(None)
                # SHELL_WINDOW (5) and anything else: ignored
        except EOFError:
            stdin.feed(None)

    async def _interactive(self, stream: Stream, stdin: QueueSource, v2: bool) -> int:
        """A line-at-a-time interactive shell (``adb shell`` with no command)."""
        prompt = f"{self.phone.info.device}:/ $ ".encode()

        def emit(data: bytes) -> None:
            if v2:
                stream.write_threadsafe(struct.pack("<BI", SHELL_STDOUT, len(data)) + data)
            else:
                stream.write_threadsafe(data)

        def loop() -> int:
            status = 0
            buf = b""
            emit(prompt)
            while not stream.cancel.is_set():
                try:
                    item = stdin._q.get(timeout=0.1)
                except queue.Empty:
                    continue
                if item is None:
                    break
                buf += item
                while b"\n" in buf or b"\r" in buf:
                    idx = min(i for i in (buf.find(b"\n"), buf.find(b"\r")) if i >= 0)
                    line, buf = buf[:idx], buf[idx + 1 :]
                    text = line.decode("utf-8", "replace").strip()
                    if text in ("exit", "logout") or text.startswith("exit "):
                        parts = text.split()
                        return int(parts[1]) & 0xFF if len(parts) > 1 and parts[1].isdigit() else status
                    if text:
                        status = self.shell.run(text, emit, emit, InputSource(), stream.cancel)
                    emit(prompt)
            return status

        return await self._run(loop)

    # --- framebuffer ----------------------------------------------------------------------------
    async def _framebuffer(self, stream: Stream) -> None:
        w, h = self.phone.size
        pixels = await self._run(self.phone.screencap_rgba)
        # version, bpp, size, width, height, red(off,len), blue(off,len), green(off,len), alpha(off,len)
        header = struct.pack("<13I", 1, 32, len(pixels), w, h, 0, 8, 16, 8, 8, 8, 24, 8)
        stream.write(header + pixels)

    # --- tcp:PORT -> the uiautomator2 server ----------------------------------------------------
    async def _http(self, port: int, stream: Stream) -> None:
        buf = bytearray()
        while True:
            while b"\r\n\r\n" not in buf:
                data = await stream.read()
                if not data:
                    return
                buf.extend(data)
                if len(buf) > 1 << 20:
                    return
            head, _, rest = bytes(buf).partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            try:
                method, target, version = lines[0].split(" ", 2)
            except ValueError:
                stream.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0") or 0)
            if len(rest) < length and version == "HTTP/1.1":
                # http.client sends headers and body in two send() calls; with Nagle on the
                # client socket the body then waits for the adb server's delayed ACK (~40 ms).
                # An interim 100 response makes the ACK go out at once (RFC 9110 §15.2: clients
                # must accept 1xx responses they did not ask for; http.client skips them).
                stream.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            while len(rest) < length:
                data = await stream.read()
                if not data:
                    return
                rest += data
            body, buf = rest[:length], bytearray(rest[length:])
            if not self.u2.is_running(port):
                return
            status, reason, ctype, payload = await self._run(self.u2.handle_http, method, target, body)
            close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
            resp = (
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}; charset=utf-8\r\n"
                f"Content-Length: {len(payload)}\r\n{'Connection: close' if close else 'Connection: keep-alive'}\r\n\r\n"
            ).encode("latin-1")
            stream.write(resp + payload)
            if close:
                return

    # --- sync -----------------------------------------------------------------------------------
    async def _sync(self, stream: Stream) -> None:
        fs = self.phone.fs
        while True:
            try:
                head = await stream.read_exactly(8)
            except EOFError:
                return
            ident, length = head[:4], struct.unpack("<I", head[4:])[0]
            if ident == b"QUIT":
                return
            if ident in (b"DATA", b"DONE"):
                _sync_fail(stream, "unexpected " + ident.decode())
                return
            if length > SYNC_PATH_MAX:
                _sync_fail(stream, "path too long")
                return
            path = (await stream.read_exactly(length)).decode("utf-8", "replace")
            if ident in (b"STAT", b"LSTA"):
                st = await self._run(fs.stat, path)
                mode, size, mtime = st if st else (0, 0, 0)
                stream.write(b"STAT" + struct.pack("<III", mode, size & 0xFFFFFFFF, mtime))
            elif ident in (b"STA2", b"LST2"):
                st = await self._run(fs.stat, path)
                stream.write(_stat_v2(ident, st))
            elif ident == b"LIST":
                await self._sync_list(stream, path, v2=False)
            elif ident == b"LIS2":
                await self._sync_list(stream, path, v2=True)
            elif ident == b"RECV":
                await self._sync_recv(stream, path)
            elif ident == b"SEND":
                if not await self._sync_send(stream, path):
                    return  # a malformed transfer ends the sync session (as adbd does)
            else:
                _sync_fail(stream, f"unknown command {ident!r}")
                return

    async def _sync_list(self, stream: Stream, path: str, v2: bool) -> None:
        fs = self.phone.fs
        st = await self._run(fs.stat, path)
        entries = await self._run(fs.listdir, path) or []
        if st is not None and entries is not None:
            entries = [(".", st[0], st[1], st[2]), ("..", st[0], st[1], st[2])] + list(entries)
        out = bytearray()
        for name, mode, size, mtime in entries:
            raw = name.encode("utf-8")
            if v2:
                out += b"DNT2" + _stat_v2_body(0, mode, size, mtime) + struct.pack("<I", len(raw)) + raw
            else:
                out += b"DENT" + struct.pack("<IIII", mode, size & 0xFFFFFFFF, mtime, len(raw)) + raw
        out += b"DONE" + (b"\0" * (72 if v2 else 16))
        stream.write(bytes(out))

    async def _sync_recv(self, stream: Stream, path: str) -> None:
        fs = self.phone.fs
        data = await self._run(fs.read, path)
        if data is None:
            st = await self._run(fs.stat, path)
            _sync_fail(stream, "read failed: Is a directory" if st else "open failed: No such file or directory")
            return
        out = bytearray()
        for off in range(0, len(data), SYNC_DATA_MAX):
            chunk = data[off : off + SYNC_DATA_MAX]
            out += b"DATA" + struct.pack("<I", len(chunk)) + chunk
        out += b"DONE" + struct.pack("<I", 0)
        stream.write(bytes(out))

    async def _sync_send(self, stream: Stream, spec: str) -> bool:
        """SEND ``path,mode``: read DATA chunks until DONE, then write the file and reply OKAY.
        On an error adbd still consumes the data up to DONE before replying FAIL."""
        path, _, mode_text = spec.rpartition(",")
        if not path:
            path, mode_text = spec, "33188"
        try:
            mode = int(mode_text)
        except ValueError:
            mode = stat_mod.S_IFREG | 0o644
        path = normpath(path)
        problem = shell_write_error(path)
        if problem is None:
            st = self.phone.fs.stat(path)
            if st is not None and stat_mod.S_ISDIR(st[0]):
                problem = "Is a directory"
        data = bytearray()
        mtime = 0
        while True:
            head = await stream.read_exactly(8)
            ident, n = head[:4], struct.unpack("<I", head[4:])[0]
            if ident == b"DATA":
                if n > SYNC_DATA_MAX:
                    _sync_fail(stream, "DATA chunk too large")
                    return False
                chunk = await stream.read_exactly(n)
                if problem is None:
                    data += chunk
            elif ident == b"DONE":
                mtime = n
                break
            else:
                _sync_fail(stream, f"invalid data message {ident!r}")
                return False
        if problem is None:

            def store() -> str | None:
                fs = self.phone.fs
                parent = path.rsplit("/", 1)[0] or "/"
                if fs.stat(parent) is None and not fs.mkdir(parent, parents=True):  # fixed_push_mkdir
                    return "No such file or directory"
                try:
                    fs.write(path, bytes(data), mode=mode & 0o7777, mtime=mtime or int(time.time()))
                except (FileNotFoundError, NotADirectoryError):
                    return "No such file or directory"
                except IsADirectoryError:
                    return "Is a directory"
                return None

            problem = await self._run(store)
        if problem is not None:
            _sync_fail(stream, f"couldn't create file: {problem}")
            return True
        stream.write(b"OKAY" + struct.pack("<I", 0))
        return True


def _sync_fail(stream: Stream, message: str) -> None:
    raw = message.encode("utf-8")
    stream.write(b"FAIL" + struct.pack("<I", len(raw)) + raw)


def _stat_v2_body(error: int, mode: int, size: int, mtime: int) -> bytes:
    # error, dev, ino, mode, nlink, uid, gid, size, atime, mtime, ctime (sync_stat_v2 minus id)
    if error:
        return struct.pack("<IQQIIIIQqqq", error, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    return struct.pack("<IQQIIIIQqqq", 0, 0xFD00, 0, mode, 1, 2000, 1015, size, mtime, mtime, mtime)


def _stat_v2(ident: bytes, st: tuple[int, int, int] | None) -> bytes:
    if st is None:
        return ident + _stat_v2_body(ENOENT, 0, 0, 0)
    mode, size, mtime = st
    return ident + _stat_v2_body(0, mode, size, mtime)
