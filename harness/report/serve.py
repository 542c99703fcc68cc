"""``harness view RUN``: serve the run's viewer on localhost.

A read-only HTTP server (GET/HEAD only) bound to 127.0.0.1 by default. It serves files under RUN and
nothing else: paths are decoded, normalised and resolved (symlinks included) and must stay inside
RUN; folders are never listed; ``/`` is the viewer's index. With ``--out DIR`` the pages are served
from DIR and ``/run/...`` from RUN, each path resolved inside its own folder. A thumbnail the pages
show that is not made yet (``thumbnails``: harness.report.viewer_files) is made when it is asked for. Every response carries
the viewer's Content-Security-Policy and ``X-Content-Type-Options: nosniff``.

DNS rebinding: a web page on another site can point its own host name at 127.0.0.1 and then read
what a local server answers, since the browser sees one origin. So a request whose ``Host`` header
names anything but the address the server listens on (or ``localhost``), or another port, is refused
with 421 (OWASP and the Chromium/Jupyter fix for this attack: check the Host header). Listening on a
wildcard address (0.0.0.0, ::) accepts IP literals and this machine's own names.

Requests are answered by a thread each (``ThreadingHTTPServer``) and the listen backlog is
``BACKLOG`` (the standard library's default of 5 made 200 simultaneous requests wait up to 32 s
for SYN retransmits).
"""

from __future__ import annotations

import http.server
import ipaddress
import mimetypes
import posixpath
import socket
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness.report.page_parts import CSP
from harness.report.viewer import REPORT_FILE, RUN_LINK
from harness.report.viewer_files import Thumbnails

LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
BACKLOG = 1024


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def split_host(header: str) -> tuple[str, int | None] | None:
    """``Host`` header -> (lower-case name without brackets or trailing dot, port or None), or None
    when it is not a host[:port]."""
    h = header.strip().lower()
    if not h or any(c in h for c in "/@ \t"):
        return None
    if h.startswith("["):
        end = h.find("]")
        if end < 0:
            return None
        name, rest = h[1:end], h[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, _, port_text = h.partition(":") if h.count(":") <= 1 else (h, "", None)
        port_text = port_text or None
    if port_text is not None and not (port_text.isdigit() and 0 < int(port_text) < 65536):
        return None
    return name.rstrip("."), int(port_text) if port_text else None


def allowed_host(header: str | None, listen_host: str, port: int) -> bool:
    """Whether a request's ``Host`` header names this server: its listen address or ``localhost``
    (any IP literal, or this machine's names, when it listens on a wildcard address), and its port."""
    if header is None:
        return False
    parsed = split_host(header)
    if parsed is None:
        return False
    name, given_port = parsed
    if (given_port if given_port is not None else 80) != port:
        return False
    if name == "localhost":
        return True
    listen = listen_host.strip("[]").lower()
    if listen in WILDCARDS:
        return _ip(name) is not None or name in {n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n}
    a, b = _ip(name), _ip(listen)
    return (a == b) if a is not None and b is not None else name == listen


def resolve_request_path(root: Path, url_path: str, run: Path | None = None) -> Path | None:
    """The file under ``root`` that ``url_path`` names, or None when it names nothing servable
    (outside root after decoding and resolving symlinks, a folder, a hidden file, or missing).
    With ``run``, paths under ``/run/`` name files under ``run`` instead (the pages of
    ``harness view --out`` link the run's screenshots there)."""
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
    if run is not None and parts and parts[0] == RUN_LINK:
        root, parts = run, parts[1:]
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


class FileHandler(http.server.BaseHTTPRequestHandler):
    """The viewer server's requests: files under ``root`` (and ``/run/...`` from ``run``), GET and HEAD
    only, under the Host rule (above); the live page's handler extends it (harness.live.server)."""

    root: Path
    run: Path | None = None
    thumbnails: Thumbnails | None = None  # thumbnails the pages show, still to make: made when asked for
    listen_host: str = "127.0.0.1"
    server_version = "crate-harness-view"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:  # quiet: one line per error only
        pass

    def host_allowed(self) -> bool:
        """The Host rule (above); a request that breaks it is answered 421 here."""
        if allowed_host(self.headers.get("Host"), self.listen_host, self.server.server_address[1]):
            return True
        self.send_error(421, "misdirected request", "this viewer answers only to its own address and localhost")
        return False

    def _send(self, head_only: bool) -> None:
        if not self.host_allowed():
            return
        try:
            target = resolve_request_path(self.root, self.path, self.run)
        except UnicodeDecodeError:
            target = None
        if target is None and self.thumbnails is not None:
            # a thumbnail made on this request, or waited for; or made by the background thread
            # between the first look and this one (ensure then finds it neither to make nor making)
            self.thumbnails.ensure(self.path)
            target = resolve_request_path(self.root, self.path, self.run)
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

    def __init__(self, root: str | Path, host: str = "127.0.0.1", port: int = 0, run: str | Path | None = None,
                 handler: type[FileHandler] | None = None, **attrs: object):
        """Serve ``root``; with ``run`` (the run folder, when the pages were written elsewhere),
        ``/run/...`` is served from it. ``handler`` (a subclass of this server's handler, given
        ``attrs``) answers more than files: the live view (harness.live.server)."""
        rp = Path(run).resolve() if run is not None else None
        handler = type("Handler", (handler or FileHandler,), {"root": Path(root).resolve(), "listen_host": host,
                                                           "run": rp if rp != Path(root).resolve() else None, **attrs})
        server_attrs: dict[str, object] = {"request_queue_size": BACKLOG, "daemon_threads": True}
        if ":" in host:
            server_attrs["address_family"] = socket.AF_INET6
        cls = type("ViewHTTPServer", (http.server.ThreadingHTTPServer,), server_attrs)
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
        if self._thread:
            self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ViewServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
