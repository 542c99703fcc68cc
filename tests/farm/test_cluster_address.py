"""Issue 37, finding 3: ``harness devices --cluster 127.0.0.1:6379`` with no cluster there printed
nothing for 616 s (only Ray's own C++ warnings about another address) until it was killed. Now an
address where nothing answers fails within 15 s with one line, for ``harness devices`` and
``harness run`` alike; an address where something listens that is not a Ray head is given up on a
few seconds later, also in one line of ours. (Ray is the farm extra, installed with the tests.)"""

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
    assert f"the Ray cluster at {address} did not let this driver join" in line, line
