"""A TEST DOUBLE: a local OpenAI-compatible chat-completions server that tests script per request.

Nothing user-facing uses it. A test gives it a ``responder`` (a function of the parsed request
returning a :class:`Reply`) or a list of replies served in order, and reads back every request it
received, with its headers (to check prompts, images, sampling, and where keys go). Replies can be
delayed, be HTTP errors with Retry-After, malformed bodies, empty or huge content, cut off at
max_tokens (``finish_reason``), carry OpenAI ``tool_calls``, or be a dropped connection.
"""

from __future__ import annotations

import json
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


Responder = Callable[[dict[str, Any]], Reply]


class ScriptedModelServer:
    def __init__(self, responder: Responder | list[Reply] | None = None, model: str = "test-model",
                 port: int = 0):
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.set(responder or (lambda req: Reply("ok")))
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # without TCP_NODELAY a kept-alive connection stalls ~40 ms per reply on delayed ACKs
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output clean
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
                with server.lock:
                    server.requests.append(req)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.active += 1
                    server.max_active = max(server.max_active, server.active)
                try:
                    reply = server.next_reply(req)
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
                self._send(200, json.dumps(out).encode(), reply.headers)

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

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
        from harness.model import forget_endpoint

        url = self.base_url
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
