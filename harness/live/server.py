"""The live page's server: ``harness run --watch`` (in the runner's process) and ``harness view
--live RUN`` (any process on the machine that can read the run folder).

It is the viewer's server (:mod:`harness.report.serve`) with a handler that answers a few more
paths; every request passes the same Host rule first (DNS rebinding), and files are served from
the run folder by the same path rules (nothing outside it, no hidden file, no folder listing):

    GET  /                        the page (every device; ``/?device=SERIAL`` one device)
    GET  /live/live.js, live.css  its script and style (the page has no inline script or style)
    GET  /live/state              the run's live state as JSON (harness.live.state)
    GET  /live/events             the same state as server-sent events, sent when it changes
    GET  /live/overlay/TASK/N.svg the proposed action of step N (or ``pending``) drawn as an SVG
    POST /live/decide             an operator's answer to an open question (Allow / Deny)
    GET  /episodes/...            the run's files (screenshots), as ``harness view`` serves them

A decision changes what happens on a phone, so ``POST /live/decide`` is guarded three ways: the
Host rule; the run's secret token (``RUN/.live-token``, put in the page it serves, never in a URL)
in an ``X-Live-Token`` header, which a page of another site cannot read (the same-origin policy)
nor send without a CORS preflight this server refuses; and an ``Origin`` header, when the browser
sends one, naming this server. The answer becomes a decision record in the episode folder, which
the runner, in this process or another, waits for.
"""

from __future__ import annotations

import hmac
import json
import re
import struct
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.live.page import CSS, JS, page_html
from harness.core.episode import ANSWERS
from harness.live.records import ASK_ID_RE, DECISIONS, claim_decision, read_pending, run_token
from harness.live.state import RunState
from harness.records import RecordError, episode_dir, iter_steps, resolve_screen
from harness.report.page_parts import CSP, action_overlay
from harness.report.serve import FileHandler, ViewServer, allowed_host

LIVE_CSP = CSP.replace("default-src 'none';", "default-src 'none'; connect-src 'self';")
POLL_S = 0.1            # how often the run folder is looked at for an open event stream
HEARTBEAT_S = 10.0      # an event stream with no change says it is alive this often
BODY_LIMIT = 4096
OVERLAY_RE = re.compile(r"/live/overlay/([A-Za-z0-9][A-Za-z0-9_.-]{0,127})/(pending|[0-9]{1,6})\.svg")


class _Feed:
    """The run's state as JSON, read at most once per ``POLL_S`` whatever the number of pages."""

    def __init__(self, run_dir: Path):
        self.state = RunState(run_dir)
        self._lock = threading.Lock()
        self._at = 0.0
        self._text = ""

    def json(self) -> str:
        with self._lock:
            if time.monotonic() - self._at >= POLL_S or not self._text:
                self._text = json.dumps(self.state.snapshot(), ensure_ascii=False, allow_nan=False, default=str)
                self._at = time.monotonic()
            return self._text


def _png_size(path: Path) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            head = f.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[12:16] != b"IHDR":
        return None
    w, h = struct.unpack(">II", head[16:24])
    return (w, h) if w and h else None


class _LiveHandler(FileHandler):
    feed: _Feed
    stopping: threading.Event
    server_version = "crate-harness-live"

    # ------------------------------------------------------------------ responses
    def _reply(self, status: int, body: bytes | str, ctype: str, head_only: bool = False) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", LIVE_CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()
        if not head_only:
            self.wfile.write(data)

    def _json(self, status: int, obj: Any) -> None:
        self._reply(status, json.dumps(obj, ensure_ascii=False, default=str), "application/json; charset=utf-8")

    # ------------------------------------------------------------------ GET
    def _live_get(self, head_only: bool) -> None:
        if not self.host_allowed():
            return
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            token = run_token(self.root, create=False)
            self._reply(200, page_html(self.root.name, token, json.loads(self.feed.json())), "text/html; charset=utf-8",
                        head_only)
        elif path == "/live/live.js":
            self._reply(200, JS, "application/javascript; charset=utf-8", head_only)
        elif path == "/live/live.css":
            self._reply(200, CSS, "text/css; charset=utf-8", head_only)
        elif path == "/live/state":
            self._reply(200, self.feed.json(), "application/json; charset=utf-8", head_only)
        elif path == "/live/events" and not head_only:
            self._events()
        elif (m := OVERLAY_RE.fullmatch(path)) is not None:
            svg = self._overlay(m.group(1), m.group(2))
            if svg is None and m.group(2) == "pending":
                # the step was decided and recorded between the page's last state and this request:
                # nothing is being decided, so nothing to draw (not an error the page should show)
                svg = '<svg xmlns="http://www.w3.org/2000/svg"/>'
            if svg is None:
                self.send_error(404, "not found")
            else:
                self._reply(200, svg, "image/svg+xml; charset=utf-8", head_only)
        else:
            self._send(head_only)  # the run's files, by the viewer's rules

    def _overlay(self, task_id: str, which: str) -> str | None:
        """The action of step ``which`` (or of the step being decided) drawn in its screenshot's pixels."""
        try:
            folder = episode_dir(self.root, task_id)
            if which == "pending":
                p = read_pending(folder) or {}
                action, screen = p.get("action"), p.get("screen_before")
            else:
                n = int(which)
                step = next((s for s in iter_steps(folder) if s.index == n), None)
                action, screen = (step.action, step.screen_before) if step is not None else (None, None)
            if not isinstance(action, dict) or not isinstance(screen, str):
                return None
            size = _png_size(resolve_screen(folder, screen))
        except (OSError, RecordError, ValueError):
            return None
        return action_overlay(action, size) if size else None

    def _events(self) -> None:
        """Server-sent events: the state whenever it changes (and a comment now and then, so a
        dead connection is noticed); the browser's EventSource reconnects by itself."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", LIVE_CSP)
        self.end_headers()
        last, beat = None, time.monotonic()
        try:
            self.wfile.write(b"retry: 1000\n\n")
            while not self.stopping.is_set():
                text = self.feed.json()
                if text != last:
                    self.wfile.write(b"data: " + text.encode("utf-8") + b"\n\n")
                    self.wfile.flush()
                    last, beat = text, time.monotonic()
                elif time.monotonic() - beat >= HEARTBEAT_S:
                    self.wfile.write(b": alive\n\n")
                    self.wfile.flush()
                    beat = time.monotonic()
                self.stopping.wait(POLL_S)
        except (OSError, ValueError):
            pass  # the page went away
        self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        self._live_get(False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._live_get(True)

    # ------------------------------------------------------------------ POST
    def _origin_ok(self) -> bool:
        origin = self.headers.get("Origin")
        if origin is None:
            return True
        parts = urlsplit(origin)
        return parts.scheme == "http" and allowed_host(parts.netloc, self.listen_host, self.server.server_address[1])

    def do_POST(self) -> None:  # noqa: N802
        if not self.host_allowed():
            return
        if urlsplit(self.path).path != "/live/decide":
            self.send_error(404, "not found")
            return
        if not self._origin_ok():
            self._json(403, {"error": "the request comes from another site"})
            return
        token = run_token(self.root, create=False)
        given = self.headers.get("X-Live-Token") or ""
        if token is None:
            self._json(403, {"error": "this run has no live token (a read-only run folder): answer on the terminal"})
            return
        if not hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("ascii")):
            self._json(403, {"error": "wrong or missing X-Live-Token"})
            return
        if (self.headers.get("Content-Type") or "").split(";")[0].strip().lower() != "application/json":
            self._json(415, {"error": "send application/json"})
            return
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if not 0 < length <= BODY_LIMIT:
            self._json(400, {"error": f"a body of 1 to {BODY_LIMIT} bytes is needed"})
            return
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            body = None
        if not isinstance(body, dict):
            self._json(400, {"error": "the body is not a JSON object"})
            return
        task_id, ask_id, decision = body.get("task_id"), body.get("ask_id"), body.get("decision")
        if decision not in DECISIONS or not isinstance(ask_id, str) or not ASK_ID_RE.fullmatch(ask_id) \
                or not isinstance(task_id, str):
            self._json(400, {"error": f"need task_id, ask_id and decision (one of {', '.join(DECISIONS)})"})
            return
        try:
            folder = episode_dir(self.root, task_id)
        except (RecordError, ValueError) as e:
            self._json(400, {"error": str(e)})
            return
        asked = (read_pending(folder) or {}).get("ask") or {}
        if asked.get("id") != ask_id:
            self._json(409, {"error": "that question is not open (answered, timed out, or the episode moved on)"})
            return
        takes = ANSWERS.get(str(asked.get("kind") or "flagged_action"), ())
        if decision not in takes:  # allow is no answer to a hand-over, nor hand_back to a flagged action
            self._json(400, {"error": f"that question takes {' or '.join(takes) or 'no answer'}, not {decision}"})
            return
        try:
            record, won = claim_decision(folder, ask_id, decision, "page")
        except OSError as e:
            self._json(500, {"error": f"could not record the decision: {e.strerror or e}"})
            return
        self._json(200 if won else 409, {**record, "won": won})

    do_PUT = do_DELETE = do_PATCH = FileHandler._refuse  # noqa: N815


class LiveServer(ViewServer):
    """The live view of the run in ``run_dir``; ``url`` is what to open."""

    def __init__(self, run_dir: str | Path, host: str = "127.0.0.1", port: int = 0):
        self.stopping = threading.Event()
        super().__init__(run_dir, host=host, port=port, handler=_LiveHandler, feed=_Feed(Path(run_dir).resolve()),
                         stopping=self.stopping)

    def stop(self) -> None:
        self.stopping.set()  # open event streams end
        super().stop()
