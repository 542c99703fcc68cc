"""``harness view RUN``: serve the run's viewer on localhost.

A read-only HTTP server (GET/HEAD only) bound to 127.0.0.1 by default. It serves files under RUN and
nothing else: paths are decoded, normalised and resolved (symlinks included) and must stay inside
RUN; folders are never listed; ``/`` is the viewer's index. Every response carries the viewer's
Content-Security-Policy and ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import http.server
import mimetypes
import posixpath
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness.report.viewer import CSP, REPORT_FILE

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def resolve_request_path(root: Path, url_path: str) -> Path | None:
    """The file under ``root`` that ``url_path`` names, or None when it names nothing servable
    (outside root after decoding and resolving symlinks, a folder, a hidden file, or missing)."""
    try:
        path = unquote(urlsplit(url_path).path, errors="strict") if url_path else "/"
    except (UnicodeDecodeError, ValueError):
        return None
    if "\x00" in path or "\\" in path:
        return None
    if path in ("", "/"):
        path = "/" + REPORT_FILE
    norm = posixpath.normpath(path)
    parts = [p for p in norm.split("/") if p]
    if any(p in (".", "..") or p.startswith(".") for p in parts):
        return None
    root_real = root.resolve()
    try:
        target = root_real.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if target != root_real and root_real not in target.parents:
        return None
    if not target.is_file():
        return None
    return target


class _Handler(http.server.BaseHTTPRequestHandler):
    root: Path
    server_version = "crate-harness-view"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:  # quiet: one line per error only
        pass

    def _send(self, head_only: bool) -> None:
        try:
            target = resolve_request_path(self.root, self.path)
        except UnicodeDecodeError:
            target = None
        if target is None:
            self.send_error(404, "not found")
            return
        try:
            data = target.read_bytes()
        except OSError:
            self.send_error(404, "not found")
            return
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
            ctype += "; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if not head_only:
            self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._send(False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._send(True)

    def _refuse(self) -> None:
        self.send_error(405, "read-only")

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815


class ViewServer:
    """A running viewer server; ``url`` is what to open, ``stop()`` shuts it down."""

    def __init__(self, root: str | Path, host: str = "127.0.0.1", port: int = 0):
        handler = type("Handler", (_Handler,), {"root": Path(root).resolve()})
        cls = http.server.ThreadingHTTPServer
        if ":" in host:
            import socket

            cls = type("V6Server", (http.server.ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
        self.httpd = cls((host, port), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = host, self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> "ViewServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="harness-view", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)
