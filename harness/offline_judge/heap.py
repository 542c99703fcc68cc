"""The C heap of a judging pass (glibc only; nothing elsewhere): how many malloc arenas its threads
may spread over, and handing freed pages back to the system.

A pass's threads (workers, call threads, the HTTP library's) allocate and free request bodies,
replies and images of every size, and the C parts that run without the GIL (image codecs, zlib,
socket reads) allocate at the same moment on several threads. glibc then gives such threads arenas
of their own, up to 8 per core (mallopt(3), M_ARENA_MAX), and each keeps its freed pages: the peak
memory of a pass depended on how many arenas the threads happened to make, and varied from run to
run by more than the episodes judged changed it."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
import threading
from typing import Any

# Every TRIM_EVERY judged episodes the pass hands the free pages of every arena back to the system
# (malloc_trim(0), glibc 2.8 on, releases the free pages of every arena, not only the top of the
# heap, malloc_trim(3)). bench_judges_scale at wave 2's start: 137 MB at 200 episodes, 179 MB at
# 2,000; with a trim every 100 episodes 140 and 151 MB.
TRIM_EVERY = 100
M_ARENA_MAX = -8  # glibc's malloc.h
_libc: Any = None


def _glibc() -> Any:
    global _libc
    if _libc is None:
        _libc = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                if hasattr(lib, "malloc_trim") and hasattr(lib, "mallopt"):  # glibc; musl has neither
                    _libc = lib
    return _libc


def give_back_free_memory() -> None:
    """``malloc_trim(0)`` where the C library is glibc; nothing elsewhere."""
    lib = _glibc()
    if lib:
        lib.malloc_trim(0)


def default_arena_cap() -> int:
    """One arena per core, at least 2: the threads that hold the GIL do not allocate at the same
    moment, and the C work that runs without it runs on at most that many cores at once."""
    return max(2, os.cpu_count() or 2)


def limit_malloc_arenas(cap: int | None = None) -> int | None:
    """Let this process's threads use at most ``cap`` malloc arenas (default
    :func:`default_arena_cap`); call it before the pass starts its threads (a thread keeps the arena
    it was given). Returns the cap set, or None, changing nothing: not glibc; ``MALLOC_ARENA_MAX`` is
    set in the environment (glibc applied the user's choice at start-up; it stands); or the process
    already runs other threads (a program that calls the command in-process, a test runner: its
    allocator is its own business)."""
    if "MALLOC_ARENA_MAX" in os.environ or threading.active_count() > 1:
        return None
    lib = _glibc()
    if not lib:
        return None
    cap = cap or default_arena_cap()
    return cap if lib.mallopt(M_ARENA_MAX, int(cap)) == 1 else None
