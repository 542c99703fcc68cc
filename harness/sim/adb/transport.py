"""The device end of one ADB TCP transport (what ``adbd`` does for ``adb connect HOST:PORT``).

Protocol facts used here (AOSP ``adb/protocol.txt`` and ``adb/transport.cpp``; FIELD_NOTES §8,
verified against adb 36):

* The host opens with CNXN(version, max_payload, "host::features=..."). A device that answers
  with its own CNXN(min(host_version, 0x01000001), max_payload, "device::...") is online and
  listed as ``device`` without authentication.
* Instead, a device may answer AUTH(TOKEN, 0, 20 random bytes). The host replies with
  AUTH(SIGNATURE) for each of its keys; a device that rejects them sends a fresh TOKEN; when the
  host runs out of keys it sends AUTH(RSAPUBLICKEY) and lists the device as ``unauthorized``
  while the user is asked to confirm. The ``unauthorized`` mode never accepts.
* OPEN(host_id, 0, "service\\0") -> OKAY(local_id, host_id) to accept, CLSE(0, host_id) to refuse.
* Each side has at most one unacknowledged WRTE per stream: a WRTE must be answered with
  OKAY(local_id, remote_id) before the peer sends the next one on that stream. We answer every
  host WRTE at once and queue our own writes until the host's OKAY arrives.
* Payloads never exceed the negotiated max payload (the smaller of the two CNXN values).
* From version 0x01000001 on the data checksum is not checked, so we send 0.
* CLSE(host_id, local_id) from the host ends a stream; we do not answer it.
* A malformed header or a payload longer than the limit drops the connection (never the server).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import threading
from concurrent.futures import Executor
from typing import Awaitable, Callable, Protocol

from harness.sim.adb import packets as P

log = logging.getLogger(__name__)

Handler = Callable[["Stream"], Awaitable[None]]

AUTH_NORMAL = "normal"
AUTH_UNAUTHORIZED = "unauthorized"

# Our own limit: adb >= 29 offers 1 MiB; we accept that and never more. A host payload longer
# than this is treated as a corrupt stream.
DEVICE_MAX_PAYLOAD = P.MAX_PAYLOAD
CLOSE_FLUSH_TIMEOUT = 10.0


class DeviceServices(Protocol):
    """What the transport needs from the device: its banner and its services."""

    executor: Executor

    def banner(self) -> str: ...

    def open_service(self, name: str) -> Handler | None:
        """A coroutine function serving ``name`` on a stream, or None to refuse the OPEN."""


class Stream:
    """One multiplexed stream (an accepted OPEN).

    Writes are queued and sent one WRTE at a time, each waiting for the host's OKAY. Reads return
    what the host wrote. ``cancel`` (a threading.Event) is set once the stream is closed by either
    side, so worker threads can stop (``sleep``, ``app_process``).
    """

    def __init__(self, conn: "Connection", local_id: int, remote_id: int, service: str) -> None:
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self.service = service
        self.loop = asyncio.get_running_loop()
        self.cancel = threading.Event()
        self.closed = asyncio.Event()  # closed by either side
        self._out: collections.deque[bytes] = collections.deque()
        self._out_event = asyncio.Event()
        self._acked = asyncio.Event()
        self._acked.set()
        self._close_requested = False
        self._in = bytearray()
        self._in_event = asyncio.Event()
        self._eof = False
        self._sender = asyncio.create_task(self._send_loop(), name=f"adb-send-{local_id}")

    # --- writing ------------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Queue ``data`` (event-loop thread only). Dropped silently once the stream is closed."""
        if data and not self.closed.is_set() and not self._close_requested:
            self._out.append(bytes(data))
            self._out_event.set()

    def write_threadsafe(self, data: bytes) -> None:
        """Queue ``data`` from a worker thread; order between calls is preserved."""
        if data and not self.cancel.is_set():
            try:
                self.loop.call_soon_threadsafe(self.write, bytes(data))
            except RuntimeError:  # loop closed: the server is stopping
                pass

    def close(self) -> None:
        """Send CLSE after everything queued has been delivered (idempotent)."""
        self._close_requested = True
        self._out_event.set()

    async def finish(self) -> None:
        self.close()
        try:
            await asyncio.wait_for(asyncio.shield(self._sender), CLOSE_FLUSH_TIMEOUT)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self._sender.cancel()
            self._mark_closed()

    async def drain(self) -> None:
        """Wait until every queued byte has been acknowledged (or the stream closed)."""
        while (self._out or not self._acked.is_set()) and not self.closed.is_set():
            waiter = asyncio.ensure_future(self._acked.wait())
            closed = asyncio.ensure_future(self.closed.wait())
            await asyncio.wait({waiter, closed}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            closed.cancel()
            await asyncio.sleep(0)

    async def _send_loop(self) -> None:
        try:
            while True:
                while not self._out:
                    if self._close_requested or self.closed.is_set():
                        break
                    self._out_event.clear()
                    await self._out_event.wait()
                if not self._out:
                    break
                data = self._out.popleft()
                limit = self.conn.max_payload
                for off in range(0, len(data), limit):
                    await self._acked.wait()
                    if self.closed.is_set():
                        return
                    self._acked.clear()
                    await self.conn.send(P.wrte(self.local_id, self.remote_id, data[off : off + limit]))
            if not self.closed.is_set():
                # deliver the last WRTE before closing (bounded: a host that never acks)
                try:
                    await asyncio.wait_for(self._acked.wait(), CLOSE_FLUSH_TIMEOUT)
                except asyncio.TimeoutError:
                    pass
                if not self.closed.is_set():
                    await self.conn.send(P.clse(self.local_id, self.remote_id))
        except (ConnectionError, OSError):
            pass
        finally:
            self._mark_closed()
            self.conn._forget(self)

    # --- reading ------------------------------------------------------------------------------
    def _feed(self, data: bytes) -> None:
        self._in.extend(data)
        self._in_event.set()

    async def read(self, max_bytes: int = -1) -> bytes:
        """Some bytes the host wrote; b"" at end of stream."""
        while not self._in and not self._eof:
            self._in_event.clear()
            await self._in_event.wait()
        if not self._in:
            return b""
        n = len(self._in) if max_bytes < 0 else min(max_bytes, len(self._in))
        data = bytes(self._in[:n])
        del self._in[:n]
        return data

    async def read_exactly(self, n: int) -> bytes:
        """Exactly ``n`` bytes; raises EOFError when the stream ends first."""
        while len(self._in) < n:
            if self._eof:
                raise EOFError(f"stream closed with {len(self._in)} of {n} bytes")
            self._in_event.clear()
            await self._in_event.wait()
        data = bytes(self._in[:n])
        del self._in[:n]
        return data

    @property
    def at_eof(self) -> bool:
        return self._eof and not self._in

    # --- events from the connection -------------------------------------------------------------
    def _on_ack(self) -> None:
        self._acked.set()

    def _mark_closed(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
        self.cancel.set()
        self._eof = True
        self._in_event.set()
        self._acked.set()
        self._out_event.set()

    def _on_remote_close(self) -> None:
        self._out.clear()
        self._mark_closed()


class Connection:
    """One host (an adb server) connected over TCP."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        device: DeviceServices,
        auth: str = AUTH_NORMAL,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.device = device
        self.auth = auth
        self.peer = writer.get_extra_info("peername")
        self.version = P.A_VERSION_MIN
        self.max_payload = P.MAX_PAYLOAD_V1
        self.online = False
        self.streams: dict[int, Stream] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self._next_id = 1
        self._wlock = asyncio.Lock()
        self._closing = False

    # --- sending --------------------------------------------------------------------------------
    async def send(self, msg: P.Message) -> None:
        if self._closing:
            raise ConnectionResetError("connection closing")
        data = P.encode(msg, with_checksum=self.version < P.A_VERSION_SKIP_CHECKSUM)
        async with self._wlock:
            self.writer.write(data)
            await self.writer.drain()

    def _alloc_id(self) -> int:
        while True:
            lid = self._next_id
            self._next_id = self._next_id + 1 if self._next_id < 0x7FFFFFFF else 1
            if lid not in self.streams:
                return lid

    def _forget(self, stream: Stream) -> None:
        if self.streams.get(stream.local_id) is stream:
            del self.streams[stream.local_id]

    # --- the read loop ------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            while True:
                header = await self.reader.readexactly(P.HEADER_SIZE)
                command, arg0, arg1, length = P.decode_header(header, DEVICE_MAX_PAYLOAD)
                data = await self.reader.readexactly(length) if length else b""
                await self._handle(P.Message(command, arg0, arg1, data))
        except P.ProtocolError as e:
            log.warning("adb host %s: %s; dropping the connection", self.peer, e)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            await self.shutdown()

    async def shutdown(self) -> None:
        if self._closing:
            return
        self._closing = True
        for s in list(self.streams.values()):
            s._on_remote_close()
        self.streams.clear()
        for t in list(self.tasks):
            t.cancel()
        try:
            self.writer.close()
        except Exception:
            pass

    async def _handle(self, msg: P.Message) -> None:
        cmd = msg.command
        if cmd == P.A_CNXN:
            await self._on_cnxn(msg)
        elif cmd == P.A_AUTH:
            await self._on_auth(msg)
        elif not self.online:
            return  # nothing but the handshake before CNXN is accepted
        elif cmd == P.A_OPEN:
            await self._on_open(msg)
        elif cmd == P.A_OKAY:
            s = self.streams.get(msg.arg1)
            if s is not None and s.remote_id == msg.arg0:
                s._on_ack()
        elif cmd == P.A_WRTE:
            s = self.streams.get(msg.arg1)
            if s is not None and s.remote_id == msg.arg0 and not s.closed.is_set():
                s._feed(msg.data)
                await self.send(P.okay(s.local_id, s.remote_id))
        elif cmd == P.A_CLSE:
            s = self.streams.get(msg.arg1)
            if s is not None and (s.remote_id == msg.arg0 or msg.arg0 == 0):
                self._forget(s)
                s._on_remote_close()
        # SYNC, STLS: ignored

    async def _on_cnxn(self, msg: P.Message) -> None:
        host_version, host_max = msg.arg0, msg.arg1
        if self.online:  # the host restarted the handshake: its old streams are gone
            for s in list(self.streams.values()):
                s._on_remote_close()
            self.streams.clear()
            self.online = False
        if self.auth == AUTH_UNAUTHORIZED:
            await self.send(P.auth_token(os.urandom(P.AUTH_TOKEN_SIZE)))
            return
        version = min(host_version, P.A_VERSION)
        max_payload = max(P.MAX_PAYLOAD_V1, min(host_max, DEVICE_MAX_PAYLOAD))
        # our CNXN goes out with a checksum (the host does not know our version yet)
        await self.send(P.cnxn(version, max_payload, self.device.banner()))
        self.version = version
        self.max_payload = max_payload
        self.online = True

    async def _on_auth(self, msg: P.Message) -> None:
        if self.online:
            return
        if msg.arg0 == P.AUTH_SIGNATURE:
            # reject the signature: ask again with a fresh token, as adbd does
            await self.send(P.auth_token(os.urandom(P.AUTH_TOKEN_SIZE)))
        # AUTH_RSAPUBLICKEY: adbd would show the "Allow USB debugging?" dialog; nobody confirms.

    async def _on_open(self, msg: P.Message) -> None:
        name = msg.data.split(b"\0", 1)[0].decode("utf-8", "replace")
        remote_id = msg.arg0
        try:
            handler = self.device.open_service(name)
        except Exception:
            log.exception("open_service(%r) failed", name)
            handler = None
        if handler is None:
            await self.send(P.clse(0, remote_id))
            return
        stream = Stream(self, self._alloc_id(), remote_id, name)
        self.streams[stream.local_id] = stream
        await self.send(P.okay(stream.local_id, remote_id))
        task = asyncio.create_task(self._serve(stream, handler), name=f"adb-{name[:40]}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _serve(self, stream: Stream, handler: Handler) -> None:
        try:
            await handler(stream)
        except asyncio.CancelledError:
            stream._on_remote_close()
            raise
        except (EOFError, ConnectionError):
            pass
        except Exception:
            log.exception("service %r failed", stream.service)
        finally:
            if not self._closing:
                await stream.finish()


class AdbDeviceServer:
    """An asyncio TCP server: every accepted connection is one host talking to this device."""

    def __init__(self, device: DeviceServices, host: str = "127.0.0.1", port: int = 0, auth: str = AUTH_NORMAL) -> None:
        self.device = device
        self.host = host
        self.port = port
        self.auth = auth
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                import socket

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        conn = Connection(reader, writer, self.device, self.auth)
        self.connections.add(conn)
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.shutdown()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except asyncio.TimeoutError:
                pass
            self._server = None
