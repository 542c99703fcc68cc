"""A TEST DOUBLE: a local OpenAI-compatible chat-completions server that tests script per request.

Nothing user-facing uses it. A test gives it a ``responder`` (a function of the parsed request
returning a :class:`Reply`) or a list of replies served in order, and reads back every request it
received, with its headers (to check prompts, images, sampling, and where keys go). Replies can be
delayed, be HTTP errors with Retry-After, malformed bodies, empty or huge content, cut off at
max_tokens (``finish_reason``), carry OpenAI ``tool_calls``, or be a dropped connection.

Hostile endpoints, as the issue-28 probes met them: a reply that trickles (``trickle_s``: the headers
at once, then the body one byte every ``trickle_s`` seconds, as long as the client reads), one that
never sends its headers (``silent=True``: the connection stays open and quiet until the client
leaves or the server closes), a huge one (``Reply(content="x" * 50_000_000)``), and a server that
refuses ``response_format`` for some models only (:func:`refusing_structured_output`). The server
notes when each trickle sent its first byte (``trickle_started``, ``time.monotonic()`` values), and
``bytes_sent`` counts every body byte it wrote, so a test can prove a client stopped reading.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Reply:
    content: str | None = "ok"
    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None          # error message body for non-200 replies
    raw_body: bytes | None = None     # send these bytes as the body instead (malformed replies)
    drop: bool = False                # close the connection without answering
    usage: dict[str, int] | None = None
    hold: threading.Event | None = None  # answer only once this is set (a call kept in flight)
    finish_reason: str = "stop"       # "length": cut off at max_tokens
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI message.tool_calls: [{"name", "arguments"}]
    hold_s: float = 30.0                 # ... or once this long has passed
    trickle_s: float = 0.0               # send the headers, then the body one byte every this many seconds
    silent: bool = False                 # never send the headers: keep the connection open and quiet
    system_fingerprint: str | None = None  # OpenAI's backend configuration field, when the server sends one


Responder = Callable[[dict[str, Any]], Reply]


def _is_probe(req: dict[str, Any]) -> bool:
    """The harness's preflight request (harness.preflight.endpoints.PROBE_TEXT)."""
    from harness.preflight import PROBE_TEXT

    return PROBE_TEXT in request_text(req)


class ScriptedModelServer:
    """``probes``: how the harness's preflight request (one tiny chat request before a run touches a
    phone) is answered: by default as a working server answers it, apart from the script (kept in
    ``self.probes``, not in ``self.requests``, so a test scripting the run's calls sees those only);
    a responder of its own to script it; None to hand it to ``responder`` like any request."""

    def __init__(self, responder: Responder | list[Reply] | None = None, model: str = "test-model",
                 port: int = 0, probes: Responder | None = lambda req: Reply('{"ok": true}')):
        self.model = model
        self.probe_responder = probes
        self.probes: list[dict[str, Any]] = []
        self.probe_headers: list[dict[str, str]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.trickle_started: list[float] = []
        self.bytes_sent = 0
        self.closing = threading.Event()  # set on exit: quiet and trickling replies end
        self.set(responder or (lambda req: Reply("ok")))
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # without TCP_NODELAY a kept-alive connection stalls ~40 ms per reply on delayed ACKs
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def handle(self) -> None:
                try:
                    super().handle()
                except (ConnectionResetError, BrokenPipeError):  # a client that gave up and reset
                    pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [{"id": server.model, "object": "model"}]}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                try:
                    req = json.loads(body)
                except json.JSONDecodeError:
                    self._send(400, b'{"error": {"message": "bad json"}}')
                    return
                probe = server.probe_responder is not None and _is_probe(req)
                with server.lock:
                    (server.probes if probe else server.requests).append(req)
                    (server.probe_headers if probe else server.headers).append(
                        {k.lower(): v for k, v in self.headers.items()})
                    server.active += 1
                    server.max_active = max(server.max_active, server.active)
                try:
                    reply = server.probe_responder(req) if probe else server.next_reply(req)
                    if reply.hold is not None:
                        reply.hold.wait(reply.hold_s)
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                finally:
                    # counted as active until the reply is decided and waited for, never after the
                    # client could have read it (else a client that got its reply and sent the next
                    # request could see this one still counted: a spurious max_active + 1)
                    with server.lock:
                        server.active -= 1
                if reply.drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if reply.silent:  # the client waits for headers that never come
                    while not server.closing.wait(0.1):
                        if _peer_gone(self.connection):
                            break
                    self.close_connection = True
                    return
                if reply.raw_body is not None:
                    self._send(reply.status, reply.raw_body, reply.headers)
                    return
                if reply.status != 200:
                    err = {"error": {"message": reply.error or f"error {reply.status}", "type": "test",
                                     "code": reply.status}}
                    self._send(reply.status, json.dumps(err).encode(), reply.headers)
                    return
                content = reply.content
                usage = reply.usage or {"prompt_tokens": 100, "completion_tokens": len(content or "") // 4 + 1,
                                        "total_tokens": 100 + len(content or "") // 4 + 1}
                message: dict[str, Any] = {"role": "assistant", "content": content}
                if reply.tool_calls:
                    message["tool_calls"] = [
                        {"id": f"call_{k}", "type": "function",
                         "function": {"name": tc["name"], "arguments": tc["arguments"] if isinstance(tc["arguments"], str)
                                      else json.dumps(tc["arguments"], ensure_ascii=False)}}
                        for k, tc in enumerate(reply.tool_calls)]
                out = {"id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion",
                       "created": int(time.time()), "model": req.get("model", server.model),
                       "choices": [{"index": 0, "finish_reason": reply.finish_reason, "message": message}],
                       "usage": usage}
                if reply.system_fingerprint is not None:
                    out["system_fingerprint"] = reply.system_fingerprint
                body = json.dumps(out).encode()
                if reply.trickle_s:
                    self._trickle(body, reply.trickle_s, reply.headers)
                    return
                self._send(200, body, reply.headers)

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:  # the client stopped reading (a byte limit) and closed
                    self.close_connection = True
                    return
                with server.lock:
                    server.bytes_sent += len(body)

            def _trickle(self, body: bytes, every_s: float, headers: dict[str, str]) -> None:
                """The headers now (the whole body's length announced), then a byte at a time."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.close_connection = True
                try:
                    self.wfile.flush()
                    for i in range(len(body)):
                        if i == 0:
                            with server.lock:
                                server.trickle_started.append(time.monotonic())
                        elif server.closing.wait(every_s):
                            return
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                        with server.lock:
                            server.bytes_sent += 1
                except OSError:  # the client gave up and closed the connection
                    return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def set(self, responder: Responder | list[Reply]) -> None:
        if isinstance(responder, list):
            queue = list(responder)

            def from_queue(req: dict[str, Any]) -> Reply:
                return queue.pop(0) if len(queue) > 1 else queue[0]

            self._responder = from_queue
        else:
            self._responder = responder

    def next_reply(self, req: dict[str, Any]) -> Reply:
        with self.lock:
            return self._responder(req)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedModelServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        from harness.client.structured import forget_endpoint

        url = self.base_url
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        # the port is free again and another test's server may get it: what this process learned
        # about this one (its slots' capacity, a refused response_format) must not apply to that one
        forget_endpoint(url)


def request_text(req: dict[str, Any]) -> str:
    """All text parts of a request's messages, joined (for prompt assertions)."""
    out = []
    for m in req.get("messages", []):
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out.extend(p.get("text", "") for p in c if p.get("type") == "text")
    return "\n".join(out)


def request_images(req: dict[str, Any]) -> list[str]:
    out = []
    for m in req.get("messages", []):
        c = m.get("content")
        if isinstance(c, list):
            out.extend(p["image_url"]["url"] for p in c if p.get("type") == "image_url")
    return out


def _peer_gone(conn: socket.socket) -> bool:
    """The client closed its end (readable with nothing to read)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def refusing_structured_output(refusing: set[str], reply: Callable[[dict[str, Any]], Reply]) -> Responder:
    """A server that refuses ``response_format`` (HTTP 400 naming it, as vLLM and OpenAI-compatible
    proxies word it) for the models in ``refusing`` and answers ``reply(req)`` otherwise: for any
    model without it, and for the other models with it."""

    def responder(req: dict[str, Any]) -> Reply:
        if req.get("model") in refusing and ("response_format" in req or "guided_json" in req):
            return Reply(status=400, error=f"model {req.get('model')} does not support response_format json_schema")
        return reply(req)

    return responder


def dead_url() -> str:
    """An endpoint on loopback where nothing listens (connection refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"
