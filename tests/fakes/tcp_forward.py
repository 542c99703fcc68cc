"""A TEST DOUBLE: a TCP port forward standing in for "an adb server on another machine".

adb servers listen on localhost or on every interface (``adb -a``), never on one chosen address,
so a test cannot put one at a second address directly. This forward listens on ``host:port``
(e.g. 127.0.0.2, which only a client told that host reaches) and relays every connection to the
real server, so a run that works through it proves the host reached every adb client.
"""

from __future__ import annotations

import socket
import threading


class TcpForward:
    def __init__(self, host: str, target_port: int, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.host, self.port = self.sock.getsockname()
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()

    def __enter__(self) -> "TcpForward":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
