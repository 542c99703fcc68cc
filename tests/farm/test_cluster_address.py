"""Issue 37, finding 3: ``harness devices --cluster 127.0.0.1:6379`` with no cluster there printed
nothing for 616 s (only Ray's own C++ warnings about another address) until it was killed. Now an
address where nothing answers fails within 15 s with one line, for ``harness devices`` and
``harness run`` alike; an address where something listens that is not a Ray head is given up on a
few seconds later, also in one line of ours, as is one that answers but not as gRPC does (a Ray head's
GCS port is a gRPC server). (Ray is the farm extra, installed with the tests.)"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.faults.helpers import ROOT

pytest.importorskip("ray")  # the farm extra; scripts/test installs it


def _harness(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    return p, time.monotonic() - t0


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _ours(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("harness: error:")]


def test_nothing_at_the_cluster_address_fails_fast_in_one_line(tmp_path):
    address = f"127.0.0.1:{_free_port()}"
    p, took = _harness("devices", "--cluster", address)
    assert p.returncode == 2 and took < 15, (took, p.stderr)
    assert p.stderr.strip().splitlines() == _ours(p.stderr), p.stderr  # no Ray output: it was never started
    (line,) = _ours(p.stderr)
    assert f"no Ray cluster at {address}" in line and "ray start --head" in line, line
    p, took = _harness("run", "--cluster", address, "--suite", str(ROOT / "tasks" / "sim" / "clock.yaml"),
                       "--agent", "replay", "--out", str(tmp_path / "run"))
    assert p.returncode == 2 and took < 15, (took, p.stderr)
    (line,) = _ours(p.stderr)
    assert f"no Ray cluster at {address}" in line and not (tmp_path / "run").exists(), p.stderr


def test_something_that_is_not_a_ray_head_is_given_up_on(tmp_path):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen(16)  # accepts, and never says a word
    address = f"127.0.0.1:{squatter.getsockname()[1]}"
    try:
        p, took = _harness("devices", "--cluster", address)
    finally:
        squatter.close()
    assert p.returncode == 2 and took < 30, (took, p.stderr)
    (line,) = _ours(p.stderr)
    assert f"something listens at {address}, but not a Ray head's GCS port (no answer within" in line, line


def test_a_server_that_answers_but_not_as_grpc_is_refused_at_once(tmp_path):
    """What listens and talks, but not HTTP/2 (a web server's HTTP/1.1 error here), is not a GCS: refused
    after the first reply, before Ray is asked to join it."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.recv(64)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    address = f"127.0.0.1:{server.getsockname()[1]}"
    try:
        p, took = _harness("devices", "--cluster", address)
    finally:
        server.close()
    assert p.returncode == 2 and took < 15, (took, p.stderr)
    assert p.stderr.strip().splitlines() == _ours(p.stderr), p.stderr  # Ray was never started
    (line,) = _ours(p.stderr)
    assert f"something listens at {address}, but not a Ray head's GCS port (it answered, but not as gRPC does)" \
        in line, line


def test_a_cluster_speaking_tls_is_not_probed_as_plain_http2(monkeypatch):
    """With RAY_USE_TLS=1 a GCS port speaks TLS first, so the plain HTTP/2 preface would be refused by
    a real head: only the TCP connection is checked, then Ray's own join decides."""
    from harness.farm.errors import FarmError
    from harness.farm.nodes import check_reachable

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen(16)
    address = f"127.0.0.1:{squatter.getsockname()[1]}"
    try:
        monkeypatch.setenv("RAY_USE_TLS", "1")
        check_reachable(address, timeout=0.5)  # accepted: something listens
        monkeypatch.setenv("RAY_USE_TLS", "0")
        with pytest.raises(FarmError, match="but not a Ray head's GCS port"):
            check_reachable(address, timeout=0.5)
    finally:
        squatter.close()
