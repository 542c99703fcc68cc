"""The C heap of a judging pass (harness.offline_judge.heap): the arena cap holds for threads that
allocate at the same moment, a user's MALLOC_ARENA_MAX stands, a process that already runs threads
keeps its allocator, and `harness judge` in a process of its own sets the cap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.offline_judge import heap

ROOT = Path(__file__).resolve().parents[2]

# 8 threads compress 1 MB buffers at once (zlib runs without the GIL, so their mallocs meet), then
# glibc's malloc_info(3) report counts the arenas ("heap" elements) the process made
COUNT_ARENAS = r"""
import ctypes, os, re, sys, tempfile, threading, zlib
from harness.offline_judge.heap import limit_malloc_arenas
print("cap", limit_malloc_arenas(int(sys.argv[1])) if sys.argv[1] != "none" else None)
data = os.urandom(1 << 20)
def work():
    for _ in range(6):
        zlib.compress(data, 1)
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL(None)
libc.fdopen.restype = ctypes.c_void_p
libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
libc.fflush.argtypes = [ctypes.c_void_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
with tempfile.TemporaryFile() as f:
    fp = libc.fdopen(os.dup(f.fileno()), b"w")
    libc.malloc_info(0, fp)
    libc.fflush(fp)
    f.seek(0)
    print("arenas", len(re.findall(rb'<heap nr="\d+">', f.read())))
"""

glibc_only = pytest.mark.skipif(not heap._glibc(), reason="the arena cap and malloc_info are glibc's")


def _env_without_arena_max() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}


def _arenas(cap: str, env: dict[str, str] | None = None) -> tuple[str, int]:
    env = _env_without_arena_max() | (env or {})
    out = subprocess.run([sys.executable, "-c", COUNT_ARENAS, cap], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split("\n")
    return out[0].split()[1], int(out[1].split()[1])


@glibc_only
def test_the_cap_holds_for_threads_that_allocate_at_once():
    assert _arenas("2") == ("2", 2)
    _, free = _arenas("none")
    assert free > 2  # without the cap the same threads make arenas of their own (what the cap prevents)


@glibc_only
def test_a_users_malloc_arena_max_stands():
    cap, arenas = _arenas("2", {"MALLOC_ARENA_MAX": "3"})
    assert cap == "None" and 2 < arenas <= 3  # the user's 3, not our 2


def test_a_process_that_already_runs_threads_keeps_its_allocator():
    """In-process callers (a test runner, a program embedding the CLI) have threads of their own:
    the cap is left alone there (this test runs inside pytest, with a thread of its own started)."""
    import threading

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert heap.limit_malloc_arenas(2) is None
    finally:
        stop.set()
        other.join()


def test_harness_judge_caps_the_arenas_in_its_own_process(tmp_path):
    """`harness judge` as a process of its own (only its main thread when the command starts)."""
    probe = (
        "import sys\n"
        "import harness.cli.judge as jc\n"
        "real = jc.limit_malloc_arenas\n"
        "jc.limit_malloc_arenas = lambda: print('cap', real(), flush=True)\n"
        "from harness.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n")
    out = subprocess.run([sys.executable, "-c", probe, "judge", str(tmp_path), "--judge", "crate", "--model-base-url",
                          "http://127.0.0.1:9/v1", "--model", "m"], cwd=ROOT, env=_env_without_arena_max(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "not a run folder" in out.stderr  # the command went on after the cap
    expected = str(heap.default_arena_cap()) if heap._glibc() else "None"
    assert out.stdout.splitlines() == [f"cap {expected}"]


def test_the_default_cap_is_one_arena_per_core_at_least_two(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert heap.default_arena_cap() == 2
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert heap.default_arena_cap() == 16
