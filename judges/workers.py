"""The worker threads a judge sends its step calls and image work to.

In a live run each judge has a pool of its own for the episode it is watching, let go when the
episode ends (queued work cancelled; a call still running finishes on its thread, which then exits).
An offline pass instead gives every judge of every worker one shared pool sized by its concurrency
(``EpisodeContext.workers``): a pool per judge per episode, with up to 2K episodes open at once, was
hundreds of threads, each with its stack and malloc arena, and the memory of ``harness judge`` grew
with them (issue 18). With a shared pool, the end of an episode cancels what it left queued there.
The threads are daemons (harness.core.daemon_pool): one stuck in a call never holds the process at exit.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from typing import Any, Callable

from harness.core.daemon_pool import DaemonPool


class EpisodeWorkers:
    def __init__(self, workers: int, name: str):
        self.workers = max(1, workers)
        self.name = name
        self._pool: DaemonPool | None = None
        self._shared: Any = None  # the episode's executor, when it brought one
        self._futures: list[cf.Future] = []
        self._lock = threading.Lock()
        self.pools_made = 0  # for tests: how many pools of its own this judge has made

    def use(self, shared: Any) -> None:
        """Send this episode's work to ``shared`` (an executor), or to threads of our own (None)."""
        with self._lock:
            self._shared = shared

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> cf.Future:
        with self._lock:
            if self._shared is not None:
                fut = self._shared.submit(fn, *args)
                self._futures.append(fut)
                return fut
            if self._pool is None:
                self._pool = DaemonPool(self.workers, thread_name_prefix=self.name)
                self.pools_made += 1
            return self._pool.submit(fn, *args)

    def end_episode(self) -> None:
        """Cancel what the episode left queued; let our own pool go (its threads exit when idle)."""
        with self._lock:
            futures, self._futures = self._futures, []
            for f in futures:
                f.cancel()
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def close(self) -> None:
        self.end_episode()
