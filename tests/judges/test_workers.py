"""judges.workers: a judge's threads are kept from episode to episode; an episode's queued work is
cancelled at its end, and a call still running then makes the next episode use new threads."""

from __future__ import annotations

import threading

from judges.workers import EpisodeWorkers


def test_threads_are_kept_across_episodes_and_queued_work_is_cancelled():
    w = EpisodeWorkers(1, "t")
    names = set()
    for _ in range(5):  # five episodes, one pool
        w.submit(lambda: names.add(threading.current_thread().name)).result()
        w.end_episode()
    assert w.pools_made == 1 and len(names) == 1
    gate = threading.Event()
    first = w.submit(gate.wait, 5)
    queued = w.submit(lambda: "never")
    gate.set()
    first.result()
    # a call that finished and one that had not started: the first is done, the second cancelled
    w.end_episode()
    assert queued.cancelled() or queued.result() == "never"
    assert w.pools_made == 1
    w.close()


def test_a_call_still_running_at_the_end_of_an_episode_retires_the_pool():
    w = EpisodeWorkers(1, "t")
    gate = threading.Event()
    stuck = w.submit(gate.wait, 5)
    queued = w.submit(lambda: "never")
    w.end_episode()
    assert queued.cancelled() and not stuck.done()
    assert w.submit(lambda: "next episode").result(timeout=5) == "next episode"  # not behind the stuck call
    assert w.pools_made == 2
    gate.set()
    assert stuck.result(timeout=5) is True
    w.close()
