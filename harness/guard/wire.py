"""The adb host protocol on the wire, as the guard speaks it to clients and to the real server.

Facts (AOSP ``packages/modules/adb``): a client's request is 4 hex digits giving the length of the
text that follows (``000chost:version``; OVERVIEW.TXT, "smart sockets"); the answer is ``OKAY``, or
``FAIL`` + 4 hex digits + a message (protocol.txt, SERVICES.TXT). ``host:tport:...`` answers
``OKAY`` and then the transport's id as 8 bytes, little-endian (``adb_client.cpp``,
``switch_socket_transport``). After a transport switch the same socket carries one device service
and then raw bytes until either side closes. The shell protocol (``shell_protocol.h``) frames
``shell,v2`` streams as 1 byte id + 4 bytes little-endian length + payload; ids 0 stdin, 1 stdout,
2 stderr, 3 exit (payload: one byte, the status), 4 close stdin, 5 window size.
"""

from __future__ import annotations

import socket
import struct
from typing import Callable

MAX_REQUEST = 0xFFFF  # four hex digits can say no more
SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN, SHELL_WINDOW = 0, 1, 2, 3, 4, 5


class WireError(Exception):
    """The peer sent something that is not the adb host protocol, or went away mid-request."""


def read_exact(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        b = sock.recv(min(n - got, 1 << 16))
        if not b:
            raise WireError(f"the connection closed after {got} of {n} bytes")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def read_request(sock: socket.socket) -> str | None:
    """One smart-socket request's text, or None when the peer closed before sending one. A header
    that is not four hex digits, or text that is not UTF-8, is a :class:`WireError`."""
    head = b""
    while len(head) < 4:
        b = sock.recv(4 - len(head))
        if not b:
            if head:
                raise WireError(f"the connection closed inside a request header ({head!r})")
            return None
        head += b
    try:
        text = head.decode("ascii")
        n = int(text, 16)
        if len(text) != 4 or not all(c in "0123456789abcdefABCDEF" for c in text):
            raise ValueError
    except (UnicodeDecodeError, ValueError):
        raise WireError(f"not an adb request: the header {head!r} is not four hex digits") from None
    body = read_exact(sock, n)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("not an adb request: its text is not UTF-8") from None


def request(text: str) -> bytes:
    body = text.encode("utf-8")
    if len(body) > MAX_REQUEST:
        raise WireError(f"a request of {len(body)} bytes does not fit four hex digits")
    return b"%04x" % len(body) + body


def okay() -> bytes:
    return b"OKAY"


def fail(message: str) -> bytes:
    body = message.encode("utf-8")[:MAX_REQUEST]
    return b"FAIL" + b"%04x" % len(body) + body


def counted(data: bytes) -> bytes:
    """A length-prefixed answer (``host:devices``, ``host:version``): 4 hex digits + data."""
    return b"%04x" % len(data) + data


def read_status(sock: socket.socket) -> str | None:
    """``OKAY`` -> None; ``FAIL`` -> its message; anything else is a WireError."""
    st = read_exact(sock, 4)
    if st == b"OKAY":
        return None
    if st == b"FAIL":
        n = int(read_exact(sock, 4).decode("ascii"), 16)
        return read_exact(sock, n).decode("utf-8", "replace")
    raise WireError(f"the adb server answered {st!r}, neither OKAY nor FAIL")


def read_counted(sock: socket.socket) -> bytes:
    n = int(read_exact(sock, 4).decode("ascii"), 16)
    return read_exact(sock, n)


def shell_packet(kind: int, payload: bytes) -> bytes:
    return struct.pack("<BI", kind, len(payload)) + payload


class ShellFrames:
    """Reads the device's side of a ``shell,v2`` stream as it passes (in any pieces) and keeps the
    exit status when its packet comes; payloads are skipped, never buffered."""

    def __init__(self, keep_stdout: int = 0) -> None:
        self.head = b""
        self.kind = -1
        self.left = 0          # payload bytes of the current packet still to pass
        self.exit_status: int | None = None
        self.keep = keep_stdout  # keep up to this many bytes of standard output (0: none)
        self.stdout = bytearray()
        self.overflow = False

    def feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        while i < n:
            if self.left:
                if self.kind == SHELL_EXIT and self.exit_status is None:
                    self.exit_status = data[i]
                step = min(self.left, n - i)
                if self.kind == SHELL_STDOUT and self.keep:
                    if len(self.stdout) + step > self.keep:
                        self.overflow = True
                    else:
                        self.stdout += data[i:i + step]
                self.left -= step
                i += step
                continue
            take = min(5 - len(self.head), n - i)
            self.head += data[i:i + take]
            i += take
            if len(self.head) == 5:
                self.kind, self.left = struct.unpack("<BI", self.head)
                self.head = b""


class Capture:
    """The phone's side of a raw stream (``exec:``, legacy ``shell:``) as it passes, up to ``limit``
    bytes (``overflow`` past it: nothing kept)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.data, self.overflow = limit, bytearray(), False

    def feed(self, chunk: bytes) -> None:
        if len(self.data) + len(chunk) > self.limit:
            self.overflow = True
        elif not self.overflow:
            self.data += chunk

    @property
    def bytes(self) -> bytes | None:
        return None if self.overflow else bytes(self.data)


class AfterStatus:
    """Passes on what the phone writes after the server's answer to the service request (``OKAY``);
    nothing after a ``FAIL``."""

    def __init__(self, feed: Callable[[bytes], None]) -> None:
        self.feed_on, self.head, self.ok = feed, b"", None

    def feed(self, chunk: bytes) -> None:
        if self.ok is None:
            self.head += chunk
            if len(self.head) < 4:
                return
            self.ok = self.head[:4] == b"OKAY"
            chunk, self.head = self.head[4:], b""
        if self.ok and chunk:
            self.feed_on(chunk)
