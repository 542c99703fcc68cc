"""A test double for the stranger on a chosen port: a listener that takes a TCP port on loopback and
sends back whatever it is sent.

It answers like the program that once held the demo's adb port on a busy machine: adb's client opens
with ``000chost:version`` (a 4-hex-digit length, then the request) and reads a 4-byte status, so it
reads its own ``000c`` back as the status, which is neither OKAY nor FAIL, and reports ``error:
protocol fault (status 30 30 30 63?!)`` (those four bytes in hex), the exact line of that failure.
Reproduced with the adbutils wheel's adb 36.0.0; tests/core/test_ports.py checks that adb says exactly
that to it.

    with PortSquatter() as sq:       # sq.port is held until the block ends
        ...
"""

from __future__ import annotations

import socket
import threading


class PortSquatter:
    def __init__(self, port: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0  # how many clients talked to it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"squatter-{self.port}", daemon=True)

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                while data := conn.recv(4096):
                    conn.sendall(data)
            except OSError:
                pass

    def __enter__(self) -> "PortSquatter":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
