"""The guard's adb server endpoint: it answers a client's host requests as the real adb server
would if the guarded phone were its only device, and relays the rest to the real server byte for
byte. Device services (``shell:``, ``exec:``, ``sync:``...) go to a :class:`Gatekeeper`, which
decides for each one (pass it through, gate it, refuse it); this module only moves bytes.

Host requests (AOSP ``packages/modules/adb`` SERVICES.TXT; ``adb_client.cpp``, ``services.cpp``):
``host:version``, ``host:host-features`` and ``host:server-status`` are relayed as they are;
``host:devices[-l]`` and ``host:track-devices[-l]`` are relayed with every other serial's line
left out; ``host:transport:S``, ``host:tport:serial:S``, ``host:transport-id:N`` (and
``host:tport:id:N``) switch to the guarded phone only, and the ``-any``/``-usb``/``-local`` forms
switch to it as the only device there is; ``host-serial:S:REQ``, ``host-transport-id:N:REQ``,
``host-usb:REQ``, ``host-local:REQ`` and the device requests of ``host:`` (``features``,
``get-state``, ``forward:``, ``list-forward``...) are sent as ``host-serial:S:REQ``. A request
naming another serial is answered ``device 'X' not found``, as the server answers for a phone it
does not know. ``host:kill``, ``connect``, ``disconnect``, ``pair``, ``mdns`` and anything not
named here are refused: they would reach beyond the guarded phone.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from harness.guard import wire
from harness.guard.clients import ClientInfo, client_info
from harness.guard.wire import WireError

log = logging.getLogger("harness.guard")

REQUEST_TIMEOUT_S = 30.0   # a client that starts a request and stops sending is dropped after this
RELAYED_AS_IS = ("host:version", "host:host-features", "host:server-status")
REQUEST_WORDS = ("features", "get-", "reconnect", "list-forward", "killforward", "forward:", "wait-for-", "transport",
                 "tport", "attach", "detach")
# killforward-all is left out: the server drops every phone's forwards for it
DEVICE_REQUESTS = ("features", "get-state", "get-serialno", "get-devpath", "get-product", "reconnect",
                   "list-forward", "attach", "detach")
# each also with ":ARGS" after it; the proto forms (adb 35's --proto-binary/-text) carry other phones
# in a format the guard does not filter
REFUSED_HOST = ("host:kill", "host:connect", "host:disconnect", "host:pair", "host:mdns", "host:emulator",
                "host:reconnect", "host:reconnect-offline", "host:start-server")


@dataclass
class Upstream:
    """The real adb server."""

    host: str
    port: int
    timeout: float = 10.0

    def connect(self) -> socket.socket:
        try:
            s = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as e:
            raise Unreachable(f"cannot reach the adb server at {self.host}:{self.port}: {e.strerror or e}") from None
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def query(self, text: str) -> bytes:
        """A host request whose answer is OKAY + counted data (``host:devices-l``)."""
        s = self.connect()
        try:
            s.settimeout(self.timeout)
            s.sendall(wire.request(text))
            err = wire.read_status(s)
            if err is not None:
                raise Unreachable(err)
            return wire.read_counted(s)
        finally:
            s.close()


class Unreachable(Exception):
    """The real adb server could not be reached or refused what was asked of it."""


@dataclass
class Piped:
    """How a relayed service went: bytes each way, who closed first, the shell v2 exit status."""

    up: int = 0
    down: int = 0
    client_closed_first: bool = False
    exit_status: int | None = None
    error: str | None = None
    seconds: float = 0.0
    sent: bool = False     # the request reached the real server (the phone may have run it)
    output: bytes | None = None  # what the phone wrote, when kept


class ServiceCall:
    """One device service a client asked for, with the real server's connection already switched to
    the guarded phone. The gatekeeper ends it with exactly one of :meth:`relay`, :meth:`refuse` or
    :meth:`answer`."""

    def __init__(self, guard: "GuardServer", client: socket.socket, upstream: socket.socket, service: str, peer: Any):
        self.guard, self.client, self.upstream, self.service, self.peer = guard, client, upstream, service, peer
        self._info: ClientInfo | None = None
        self._info_lock = threading.Lock()
        self.done = False

    def client_info(self) -> ClientInfo:
        """Which process sent it (looked up once, from /proc; any thread may ask)."""
        with self._info_lock:
            if self._info is None:
                self._info = client_info(self.peer, self.guard.port)
            return self._info

    def client_gone(self) -> bool:
        """The client closed its connection (killed while its request was being decided)."""
        try:
            return self.client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True

    def relay(self, service: str | None = None, v2: bool = False, unless_gone: bool = False,
              keep: int = 0) -> Piped:
        """Send ``service`` (default: as asked) to the phone and relay both ways until both sides
        close; with ``unless_gone``, not when the client has gone meanwhile (``Piped.error`` says so);
        ``keep``: keep up to this many bytes of what the phone wrote (``Piped.output``)."""
        self.done = True
        if unless_gone and self.client_gone():
            return Piped(error="the client went away before its command was relayed", client_closed_first=True)
        frames = wire.ShellFrames(keep_stdout=keep) if v2 else None
        raw = wire.Capture(keep) if keep and not v2 else None
        reader = frames.feed if frames is not None else raw.feed if raw is not None else None
        out = pipe(self.client, self.upstream, wire.request(service if service is not None else self.service),
                   wire.AfterStatus(reader).feed if reader is not None else None)
        if frames is not None:
            out.exit_status = frames.exit_status
            out.output = bytes(frames.stdout) if keep and not frames.overflow else None
        elif raw is not None:
            out.output = raw.bytes
        return out

    def refuse(self, message: str) -> None:
        """Answer as the server answers a service it cannot open (``FAIL`` + message)."""
        self.done = True
        _send(self.client, wire.fail(message))

    def answer(self, v2: bool, stdout: bytes = b"", stderr: bytes = b"", status: int = 1) -> None:
        """Answer the service here, never touching the phone: shell v2 frames (stdout, stderr, exit
        status), or for ``shell:``/``exec:`` the bytes as the device would write them."""
        self.done = True
        if v2:
            data = b"".join(wire.shell_packet(k, p) for k, p in ((wire.SHELL_STDOUT, stdout), (wire.SHELL_STDERR, stderr))
                            if p) + wire.shell_packet(wire.SHELL_EXIT, bytes([status & 0xFF]))
        else:
            data = stdout + stderr
        _send(self.client, wire.okay() + data)


class Gatekeeper(Protocol):
    """What the guard asks about the traffic it relays (``harness.guard.session.Session``)."""

    def service(self, call: ServiceCall) -> None:
        """Decide about one device service and end ``call`` (relay, refuse or answer it)."""

    def forward(self, request: str, peer: Any) -> str | None:
        """A port forward to the phone (an unseen channel): None relays it, a message refuses it."""

    def refused(self, request: str, reason: str, peer: Any) -> None:
        """A host request the guard answered with a refusal (recorded, never silent)."""

    def connected(self, delta: int) -> None:
        """A client connection opened (+1) or closed (-1)."""

    def control(self, request: str, answer: Callable[[], None]) -> bool:
        """A control request of harness guard itself (``host:crate-guard-end:TOKEN``): handled? It
        calls ``answer`` (the client's OKAY) before it acts."""


def _send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass


def _read_within(c: socket.socket, what: str) -> str | None:
    """A client's next request, within REQUEST_TIMEOUT_S (a client that stalls mid-request is dropped)."""
    c.settimeout(REQUEST_TIMEOUT_S)
    try:
        return wire.read_request(c)
    except socket.timeout:
        raise WireError(f"no {what} within {REQUEST_TIMEOUT_S:g} s") from None
    finally:
        c.settimeout(None)


def pipe(client: socket.socket, upstream: socket.socket, first: bytes,
         watch: Callable[[bytes], None] | None) -> Piped:
    """Send ``first`` upstream, then copy both ways until both sides have closed (half-closes passed
    on); ``watch`` reads the phone's side as it passes."""
    out = Piped()
    t0 = time.monotonic()
    state = {"client_eof": False, "upstream_eof": False}

    def up() -> None:
        try:
            while True:
                b = client.recv(1 << 16)
                if not b:
                    break
                upstream.sendall(b)
                out.up += len(b)
        except OSError:
            pass
        state["client_eof"] = True
        if not state["upstream_eof"]:
            out.client_closed_first = True
        try:
            upstream.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    try:
        upstream.sendall(first)
    except OSError as e:
        out.error = f"the adb server went away: {e.strerror or e}"
        return out
    out.sent = True
    t = threading.Thread(target=up, name="guard-up", daemon=True)
    t.start()
    buf = bytearray(1 << 18)
    view = memoryview(buf)
    try:
        while True:
            n = upstream.recv_into(buf)
            if not n:
                break
            if watch is not None:
                watch(bytes(view[:n]))
            client.sendall(view[:n])
            out.down += n
    except OSError as e:
        if not state["client_eof"]:
            out.error = f"{type(e).__name__}: {e.strerror or e}"
    state["upstream_eof"] = True
    try:
        client.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    t.join(timeout=5.0)
    out.seconds = time.monotonic() - t0
    return out


@dataclass
class GuardServer:
    """Listens on ``host:port`` and serves each client connection on a thread of its own."""

    serial: str
    upstream: Upstream
    keeper: Gatekeeper
    port: int = 0
    host: str = "127.0.0.1"
    _sock: socket.socket | None = field(default=None, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _transport_id: int | None = field(default=None, repr=False)
    _conns: set = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self) -> "GuardServer":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((self.host, self.port))
        except OSError as e:
            s.close()
            raise OSError(e.errno, f"cannot listen on {self.host}:{self.port}: {e.strerror or e}") from None
        s.listen(128)
        self._sock = s
        self.port = s.getsockname()[1]
        threading.Thread(target=self._accept, name="guard-accept", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                c, peer = self._sock.accept()
            except OSError:
                return
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(c, peer), name="guard-client", daemon=True).start()

    # --- one client connection ----------------------------------------------------------------
    def _serve(self, c: socket.socket, peer: Any) -> None:
        with self._lock:
            self._conns.add(c)
        self.keeper.connected(+1)
        try:
            self._requests(c, peer)
        except WireError as e:
            self.keeper.refused("(unreadable)", str(e), peer)
            _send(c, wire.fail(f"harness guard: {e}"))
        except Unreachable as e:
            self.keeper.refused("(the real adb server)", str(e), peer)
            _send(c, wire.fail(str(e)))
        except OSError:
            pass
        except Exception as e:  # a bug here must not take the guard down; the client is told
            log.exception("guard: serving %s", peer)
            _send(c, wire.fail(f"harness guard: internal error: {type(e).__name__}: {e}"))
        finally:
            try:
                c.close()
            except OSError:
                pass
            with self._lock:
                self._conns.discard(c)
            self.keeper.connected(-1)

    def _requests(self, c: socket.socket, peer: Any) -> None:
        while not self._stopping.is_set():
            text = _read_within(c, "complete request")
            if text is None:
                return
            if not self._host_request(c, peer, text):
                return

    def _refuse(self, c: socket.socket, peer: Any, text: str, reason: str) -> bool:
        self.keeper.refused(text, reason, peer)
        _send(c, wire.fail(reason))
        return False

    def _not_found(self, c: socket.socket, peer: Any, text: str, who: str) -> bool:
        return self._refuse(c, peer, text, f"device '{who}' not found (harness guard serves only {self.serial})")

    def _host_request(self, c: socket.socket, peer: Any, text: str) -> bool:
        """Handle one host request; True when the connection takes another request after it."""
        if text.startswith("host:crate-guard-"):
            if self.keeper.control(text, lambda: _send(c, wire.okay())):
                return False
            return self._refuse(c, peer, "host:crate-guard-…", "harness guard: wrong or stale control token")
        if text in RELAYED_AS_IS:
            return self._relay_host(c, text)
        if text in ("host:devices", "host:devices-l"):
            data = self.upstream.query(text)
            _send(c, wire.okay() + wire.counted(self._only_ours(data)))
            return False
        if text in ("host:track-devices", "host:track-devices-l"):
            self._track(c, text)
            return False
        if any(text == r or text.startswith(r + ":") for r in REFUSED_HOST) or "-proto" in text.partition(":")[2].split(":")[0]:
            return self._refuse(c, peer, text, f"harness guard: '{text.split(':')[1]}' reaches beyond the guarded "
                                               f"phone {self.serial} and is not relayed")
        switch = self._transport_form(text)
        if switch is not None:
            kind, who = switch
            if who is not None and not self._is_ours(who, kind):
                return self._not_found(c, peer, text, who)
            return self._switch(c, peer, tport=kind.startswith("tport"))
        target = self._device_request(text)
        if target is not None:
            kind, who, req = target
            if who is not None and not self._is_ours(who, kind):
                return self._not_found(c, peer, text, who)
            if req.startswith(("transport", "tport")):
                return self._switch(c, peer, tport=req.startswith("tport"))
            if req.startswith(("forward:", "killforward:")):
                if req.startswith("forward:"):
                    why = self.keeper.forward(req, peer)
                    if why is not None:
                        return self._refuse(c, peer, text, why)
                return self._relay_host(c, f"host-serial:{self.serial}:{req}")
            if req == "list-forward":
                data = self.upstream.query(f"host-serial:{self.serial}:list-forward")
                _send(c, wire.okay() + wire.counted(self._only_ours(data)))
                return False
            if req in DEVICE_REQUESTS or req.startswith(("wait-for-", "get-")):
                return self._relay_host(c, f"host-serial:{self.serial}:{req}")
            return self._refuse(c, peer, text, f"harness guard: '{req}' is not relayed")
        return self._refuse(c, peer, text, f"harness guard: unknown host request '{text[:80]}' is not relayed")

    # --- forms ----------------------------------------------------------------------------------
    @staticmethod
    def _transport_form(text: str) -> tuple[str, str | None] | None:
        """A transport switch: (kind, the serial or transport id it names; None for any/usb/local)."""
        for prefix, kind in (("host:transport:", "serial"), ("host:tport:serial:", "tport-serial"),
                             ("host:transport-id:", "id"), ("host:tport:id:", "tport-id")):
            if text.startswith(prefix):
                return kind, text[len(prefix):]
        if text in ("host:transport-any", "host:transport-usb", "host:transport-local"):
            return "any", None
        if text in ("host:tport:any", "host:tport:usb", "host:tport:local", "host:tport:"):
            return "tport-any", None
        return None

    def _device_request(self, text: str) -> tuple[str, str | None, str] | None:
        """A request about one device: (how it names the device: serial, id or any; the serial or
        transport id it names, None for the only one; the request after the prefix)."""
        if text.startswith("host-serial:"):
            rest = text[len("host-serial:"):]
            if rest.startswith(self.serial + ":"):
                return "serial", self.serial, rest[len(self.serial) + 1:]
            # another serial (which may hold colons: host:port): it ends where a request begins
            for i, ch in enumerate(rest):
                if ch == ":" and rest[i + 1:].startswith(REQUEST_WORDS):
                    return "serial", rest[:i], rest[i + 1:]
            return "serial", rest, ""
        if text.startswith("host-transport-id:"):
            who, _, req = text[len("host-transport-id:"):].partition(":")
            return "id", who, req
        for prefix in ("host-usb:", "host-local:", "host:"):
            if text.startswith(prefix):
                return "any", None, text[len(prefix):]
        return None

    def _is_ours(self, who: str, kind: str) -> bool:
        if kind in ("serial", "tport-serial"):
            return who == self.serial
        if kind not in ("id", "tport-id"):
            return False
        if not who.isdigit():
            return False
        tid = self.transport_id(refresh=False)
        if tid is None or int(who) != tid:
            tid = self.transport_id(refresh=True)
        return tid is not None and int(who) == tid

    def transport_id(self, refresh: bool = False) -> int | None:
        """The real server's transport id of the guarded phone (asked again after a reconnect)."""
        if self._transport_id is None or refresh:
            try:
                s = self.upstream.connect()
                try:
                    s.settimeout(self.upstream.timeout)
                    s.sendall(wire.request(f"host:tport:serial:{self.serial}"))
                    if wire.read_status(s) is None:
                        self._transport_id = struct.unpack("<Q", wire.read_exact(s, 8))[0]
                finally:
                    s.close()
            except (Unreachable, OSError, WireError):
                return None
        return self._transport_id

    def _only_ours(self, data: bytes) -> bytes:
        """A device or forward list with only the guarded phone's lines."""
        keep = []
        for line in data.decode("utf-8", "replace").splitlines(keepends=True):
            first = line.split()[0] if line.split() else ""
            if first == self.serial:
                keep.append(line)
                for part in line.split():
                    if part.startswith("transport_id:") and part[13:].isdigit():
                        self._transport_id = int(part[13:])
        return "".join(keep).encode("utf-8")

    # --- answers --------------------------------------------------------------------------------
    def _relay_host(self, c: socket.socket, text: str) -> bool:
        up = self.upstream.connect()
        try:
            pipe(c, up, wire.request(text), None)
        finally:
            up.close()
        return False

    def _track(self, c: socket.socket, text: str) -> None:
        """``host:track-devices``: the server's stream of device lists, each with only our phone's
        line, and a list passed on only when that line changed."""
        up = self.upstream.connect()
        last: bytes | None = None
        stop = threading.Event()

        def watch_client() -> None:  # the client closing ends the stream
            try:
                while c.recv(1024):
                    pass
            except OSError:
                pass
            stop.set()
            try:
                up.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        try:
            up.sendall(wire.request(text))
            err = wire.read_status(up)
            if err is not None:
                _send(c, wire.fail(err))
                return
            c.sendall(wire.okay())
            threading.Thread(target=watch_client, name="guard-track", daemon=True).start()
            while not stop.is_set():
                mine = self._only_ours(wire.read_counted(up))
                if mine != last:
                    c.sendall(wire.counted(mine))
                    last = mine
        except (OSError, WireError):
            pass
        finally:
            up.close()

    def _switch(self, c: socket.socket, peer: Any, tport: bool) -> bool:
        """Switch a connection of the real server to the guarded phone, answer the client as the
        server would, and hand the service the client then asks for to the gatekeeper."""
        up = self.upstream.connect()
        try:
            up.settimeout(self.upstream.timeout)
            up.sendall(wire.request(f"host:tport:serial:{self.serial}" if tport else f"host:transport:{self.serial}"))
            err = wire.read_status(up)
            if err is not None:  # the phone is gone (unplugged, offline): the server's own words
                self.keeper.refused(f"host:transport:{self.serial}", f"the adb server: {err}", peer)
                _send(c, wire.fail(err))
                return False
            answer = wire.okay()
            if tport:
                tid = wire.read_exact(up, 8)
                self._transport_id = struct.unpack("<Q", tid)[0]
                answer += tid
            up.settimeout(None)
            c.sendall(answer)
            service = _read_within(c, "service asked for after the transport switch")
            if service is None:
                return False
            if service.startswith("host"):
                return self._switched_host(c, peer, up, service)
            call = ServiceCall(self, c, up, service, peer)
            self.keeper.service(call)
            if not call.done:  # a gatekeeper that decided nothing: fail closed
                call.refuse("harness guard: the service was not decided")
            return False
        finally:
            try:
                up.close()
            except OSError:
                pass

    def _switched_host(self, c: socket.socket, peer: Any, up: socket.socket, text: str) -> bool:
        """A host request on a connection already switched to the guarded phone (the adb binary's
        ``adb -s S forward`` sends ``host:forward:...`` so): it can only be about this phone."""
        req = text.split(":", 1)[1] if ":" in text else ""
        if not text.startswith("host:") or req.startswith(("transport", "tport")) or req == "list-forward":
            return self._refuse(c, peer, text, f"harness guard: '{text[:80]}' is not relayed after a transport switch")
        if req.startswith("forward:"):
            why = self.keeper.forward(req, peer)
            if why is not None:
                return self._refuse(c, peer, text, why)
        elif not (req.startswith(("killforward:", "wait-for-", "get-")) or req in DEVICE_REQUESTS):
            return self._refuse(c, peer, text, f"harness guard: '{req[:80]}' is not relayed")
        pipe(c, up, wire.request(text), None)
        return False


def control_request(port: int, text: str, timeout: float = 10.0) -> str | None:
    """Send a control request to a running guard on ``port``: None when it said OKAY, else why not."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(wire.request(text))
            return wire.read_status(s)
    except (OSError, WireError) as e:
        return f"no guard answered on 127.0.0.1:{port}: {e}"

