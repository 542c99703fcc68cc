"""The network side of every model call: one deadline for the whole call, a cap on the bytes it
reads, and a way to cut every call in flight when the run is being stopped.

The HTTP library times each socket operation on its own (httpx's ``connect``, ``read``, ``write``
and ``pool`` timeouts; httpx2 here, the same design): a read waits at most ``read`` seconds, and the
timer starts again with every byte, so a server that sends its headers and then one byte every
two seconds keeps a call alive forever. There is no overall timeout to ask for (httpx's timeout
documentation names the four only; encode/httpcore pull request #936, "Add overall timeout
support", was never merged). So the calls' connections go through :class:`DeadlineBackend`, a
network backend (httpcore's documented ``network_backend`` hook) whose every connect, TLS
handshake, write and read waits at most until the deadline of the attempt being made on that
thread (:func:`attempt`), and fails at once after it. The call's thread itself gives up, on time:
no watchdog, and no thread left reading after its caller stopped waiting.

An attempt also counts the bytes read from the network; past its ``max_bytes`` a read fails, so
even a body the HTTP library reads itself (an error reply's) cannot grow without bound.

:func:`cut_all` (Ctrl-C, SIGTERM: ``harness.client.calls.stop_calls``) shuts the socket of every attempt
in flight, which wakes a thread blocked in a read at once, and makes every later socket operation
of those attempts fail.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator


@dataclass(eq=False)
class Attempt:
    """One try of one call, on the thread that makes it: until when, how many bytes it may read,
    what it read, and why it was stopped from outside (None: it was not)."""

    deadline: float                      # time.monotonic() value
    max_bytes: int | None = None
    read: int = 0
    cut: str | None = None
    over: bool = False                   # a read went past max_bytes
    streams: list[Any] = field(default_factory=list)  # the raw streams it used (to shut on a cut)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


_local = threading.local()
_active: set[Attempt] = set()
_active_lock = threading.Lock()
_stopped: list[str | None] = [None]  # cut_all's reason until allow(): every attempt begun meanwhile is cut


def current() -> Attempt | None:
    """The attempt this thread is making, if any."""
    return getattr(_local, "attempt", None)


def outer_deadline() -> float | None:
    """The deadline a caller set for everything this thread does (:func:`deadline`), if any."""
    stack = getattr(_local, "deadlines", None)
    return min(stack) if stack else None


@contextmanager
def deadline(at: float) -> Iterator[None]:
    """Every model call this thread makes inside the block ends by ``at`` (a ``time.monotonic()``
    value), retries included: a monitor's check bounded by the monitor's own ``timeout_s``. Nested
    blocks: the earliest deadline holds."""
    stack = getattr(_local, "deadlines", None)
    if stack is None:
        stack = _local.deadlines = []
    stack.append(at)
    try:
        yield
    finally:
        stack.remove(at)


@contextmanager
def attempt(until: float, max_bytes: int | None = None) -> Iterator[Attempt]:
    """Make one try of a call on this thread: every socket operation inside waits at most until
    ``until`` (and :func:`outer_deadline`), and the reads together may take ``max_bytes``."""
    outer = outer_deadline()
    a = Attempt(min(until, outer) if outer is not None else until, max_bytes)
    _local.attempt = a
    with _active_lock:
        _active.add(a)
        a.cut = _stopped[0]  # begun after a cut_all (or racing it): its first socket operation fails
    try:
        yield a
    finally:
        _local.attempt = None
        with _active_lock:
            _active.discard(a)


def cut_all(reason: str) -> int:
    """Stop every attempt in flight now: its sockets are shut (a blocked read returns at once) and
    its later socket operations fail with ``reason``; so do those of every attempt begun after it,
    until :func:`allow`. Returns how many were cut."""
    with _active_lock:
        _stopped[0] = reason
        attempts = list(_active)
    for a in attempts:
        a.cut = reason
        for stream in list(a.streams):
            _shut(stream)
    return len(attempts)


def allow() -> None:
    """Let attempts go out again after :func:`cut_all`."""
    with _active_lock:
        _stopped[0] = None


def _shut(stream: Any) -> None:
    try:
        sock = stream.get_extra_info("socket")
    except Exception:  # a stream that cannot say: it is closed when its owner sees the cut
        return
    if isinstance(sock, socket.socket):
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


def _errors() -> Any:
    import httpcore2

    return httpcore2


def _limit(timeout: float | None, kind: str) -> float | None:
    """The time a socket operation may wait: ``timeout`` shortened to this thread's attempt's
    deadline. Raises the library's own timeout error once the deadline has passed, and a network
    error once the attempt was cut."""
    a = current()
    if a is None:
        return timeout
    errors = _errors()
    if a.cut is not None:
        raise (errors.ReadError if kind == "read" else errors.WriteError if kind == "write"
               else errors.ConnectError)(f"the call was stopped: {a.cut}")
    left = a.remaining()
    if left <= 0:
        raise (errors.ReadTimeout if kind == "read" else errors.WriteTimeout if kind == "write"
               else errors.ConnectTimeout)("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream:
    """A network stream whose operations end by the deadline of the attempt being made on the
    calling thread (httpcore's ``NetworkStream`` interface)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def _mine(self) -> Attempt | None:
        a = current()
        if a is not None and self._inner not in a.streams:
            a.streams.append(self._inner)
        return a

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        a = self._mine()
        data = self._inner.read(max_bytes, _limit(timeout, "read"))
        if a is not None:
            if a.cut is not None:  # woken by the shut socket: not a reply's end
                raise _errors().ReadError(f"the call was stopped: {a.cut}")
            a.read += len(data)
            if a.max_bytes is not None and a.read > a.max_bytes:
                a.over = True
                raise _errors().ReadError(f"the reply passed {a.max_bytes} bytes")
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._mine()
        self._inner.write(buffer, _limit(timeout, "write"))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        self._mine()
        return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _limit(timeout, "connect")))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend:
    """httpcore's network backend (``ConnectionPool(network_backend=...)``) with every connection
    a :class:`DeadlineStream`: connecting, too, waits at most until the attempt's deadline."""

    def __init__(self, inner: Any = None) -> None:
        if inner is None:
            import httpcore2

            inner = httpcore2.SyncBackend()
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> DeadlineStream:
        stream = self._inner.connect_tcp(host, port, _limit(timeout, "connect"), local_address, socket_options)
        return DeadlineStream(stream)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> DeadlineStream:
        return DeadlineStream(self._inner.connect_unix_socket(path, _limit(timeout, "connect"), socket_options))

    def sleep(self, seconds: float) -> None:
        a = current()
        time.sleep(max(0.0, min(seconds, a.remaining())) if a is not None else seconds)


def http_client(**kwargs: Any) -> Any:
    """The ``openai`` SDK's own HTTP client (``openai.DefaultHttpxClient``: its connection limits,
    redirects and the environment's proxies), every transport of it connecting through a
    :class:`DeadlineBackend`. A library whose transports no longer look as expected is an error
    here, never a client whose calls silently have no deadline."""
    import openai

    client = openai.DefaultHttpxClient(**kwargs)
    transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
    for t in transports:
        pool = getattr(t, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:
            raise RuntimeError(f"{type(t).__name__}: no connection pool with a network backend to bound: the model "
                               "client cannot keep its deadlines with this httpx2/httpcore2 (see harness/client/transport.py)")
        if not isinstance(backend, DeadlineBackend):
            pool._network_backend = DeadlineBackend(backend)
    return client


# --- the reply's body ------------------------------------------------------------------------------
def read_body(response: Any, limit: int) -> tuple[bytes, bool]:
    """The body of ``response`` (as decoded: after gzip), at most ``limit`` bytes: (bytes, cut).
    A longer body is cut at ``limit`` and its connection closed, not read to its end."""
    buf = bytearray()
    try:
        for chunk in response.iter_bytes():
            buf += chunk
            if len(buf) > limit:
                del buf[limit:]
                return bytes(buf), True
    finally:
        response.close()
    return bytes(buf), False


_CONTENT_KEY = re.compile(rb'"content"\s*:\s*"')


def partial_content(body: bytes) -> str:
    """The message text of a chat-completion body cut short (:func:`read_body`): the first
    ``"content"`` string, decoded up to its end or up to the cut (an escape or a UTF-8 sequence cut
    in half is dropped). "" when the cut came before any content."""
    m = _CONTENT_KEY.search(body)
    if m is None:
        return ""
    text = body[m.end() - 1:].decode("utf-8", "ignore")  # from the opening quote
    try:
        return json.decoder.scanstring(text, 1, False)[0]  # the whole string was within the limit
    except json.JSONDecodeError:
        pass
    for trim in range(0, 7):  # "\u12", a lone backslash: at most six characters of a cut escape
        try:
            return json.decoder.scanstring(text[:len(text) - trim] + '"', 1, False)[0]
        except json.JSONDecodeError:
            continue
    return ""
