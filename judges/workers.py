"""The worker threads a judge sends its calls and image work to, kept from episode to episode.

A judge used to make a thread pool per episode. Offline, over thousands of episodes with dozens of
judges at work at once, that was thousands of thread starts and hundreds of live threads, each with
its stack and its malloc arena: the memory of ``harness judge`` grew with the number of episodes
(issue 18). :class:`EpisodeWorkers` makes the pool on first use and keeps it; the end of an episode
cancels the work it left queued. A call still running then (a step past the judge's timeout) would
hold a thread the next episode needs, so in that case the pool is let go (its threads finish what
they hold and exit) and the next episode gets a new one.

An episode may bring threads of its own to use instead (``EpisodeContext.workers``): an offline pass
gives every judge of every worker one shared pool sized by its concurrency, so the number of threads
does not grow with the number of judges at work.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from typing import Any, Callable


class EpisodeWorkers:
    def __init__(self, workers: int, name: str):
        self.workers = max(1, workers)
        self.name = name
        self._pool: cf.ThreadPoolExecutor | None = None
        self._shared: Any = None  # the episode's executor, when it brought one
        self._futures: list[cf.Future] = []
        self._lock = threading.Lock()
        self.pools_made = 0  # for tests: how many pools this judge has needed

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
                self._pool = cf.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=self.name)
                self.pools_made += 1
            fut = self._pool.submit(fn, *args)
            self._futures.append(fut)
            return fut

    def end_episode(self) -> None:
        """Cancel what the episode left queued; let the pool go if a call of it is still running."""
        with self._lock:
            futures, self._futures = self._futures, []
            busy = [f for f in futures if not f.cancel() and not f.done()]
            if busy and self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def close(self) -> None:
        with self._lock:
            self._futures = []
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
