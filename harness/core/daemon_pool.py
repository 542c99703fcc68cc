"""Worker threads that never hold the process: an executor with ``concurrent.futures``' interface
whose threads are daemons, so a worker stuck in a call (a model endpoint that never answers, a
check that hangs) is abandoned when the program ends, never waited for.

``concurrent.futures.ThreadPoolExecutor`` joins every worker it ever started when the interpreter
exits (its exit hook, ``_python_exit`` in CPython's Lib/concurrent/futures/thread.py, registered
with ``threading._register_atexit``), whether or not the pool was shut down: after Ctrl-C one
monitor thread stuck reading a reply held ``harness run`` for over ten minutes after its summary
(issue 28). The runner's monitor checks and judges, the judges' evidence workers and an offline
pass's calls run here instead; a worker here ends when its pool is shut down and it is idle.
"""

from __future__ import annotations

import concurrent.futures as cf
import queue
import threading
from typing import Any, Callable


class DaemonPool(cf.Executor):
    """Up to ``max_workers`` daemon threads, started as work arrives (an idle one is reused)."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "worker") -> None:
        self.max_workers = max(1, max_workers)
        self.prefix = thread_name_prefix
        self._work: queue.SimpleQueue[tuple[cf.Future, Callable[..., Any], tuple, dict] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # one release per worker waiting for work
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            fut: cf.Future = cf.Future()
            self._work.put((fut, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self.max_workers:
                t = threading.Thread(target=self._run, name=f"{self.prefix}_{len(self._threads)}", daemon=True)
                self._threads.append(t)
                t.start()
        return fut

    def _run(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            _do(*item)
            del item  # the work's arguments are not kept alive while this worker is idle
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new work; idle workers end (busy ones when done). ``cancel_futures``: work not started
        is cancelled. ``wait``: return only when every worker has ended."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:
            self._work.put(None)
        if wait:
            for t in threads:
                t.join()


def _do(fut: cf.Future, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    if not fut.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as e:  # as ThreadPoolExecutor: the caller gets it from the future
        fut.set_exception(e)
    else:
        fut.set_result(result)
