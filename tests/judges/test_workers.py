"""judges.workers: a judge's own pool lives for one episode; an episode that brings a shared pool
(an offline pass) has its work run there, and what it left queued is cancelled at its end."""

from __future__ import annotations

import concurrent.futures as cf
import threading

from judges.workers import EpisodeWorkers


def test_own_pool_per_episode_let_go_at_its_end():
    w = EpisodeWorkers(1, "t-own")
    gate, started = threading.Event(), threading.Event()
    running = w.submit(lambda: started.set() or gate.wait(5))
    assert started.wait(5)
    queued = w.submit(lambda: "never")
    w.end_episode()
    assert queued.cancelled() and not running.done()
    assert w.submit(lambda: "next episode").result(timeout=5) == "next episode"  # not behind the running call
    assert w.pools_made == 2
    gate.set()
    assert running.result(timeout=5) is True
    w.close()


def test_a_shared_pool_runs_the_work_and_queued_work_is_cancelled_at_the_end():
    shared = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="t-shared")
    try:
        w = EpisodeWorkers(4, "t-own")
        w.use(shared)
        assert w.submit(lambda: threading.current_thread().name).result(timeout=5).startswith("t-shared")
        gate, started = threading.Event(), threading.Event()
        running = w.submit(lambda: started.set() or gate.wait(5))
        assert started.wait(5)  # running on the shared thread, not queued
        queued = w.submit(lambda: "never")
        w.end_episode()
        assert queued.cancelled() and w.pools_made == 0
        gate.set()
        assert running.result(timeout=5) is True
        assert shared.submit(lambda: "the pool goes on").result(timeout=5) == "the pool goes on"
    finally:
        shared.shutdown()
