"""Episode ids of repeated runs (``harness run --repeats N``) and each repeat's seed.

A task run once is the episode of the same id (``clock.alarm-02``), as always. A task run N > 1
times is N episodes, ``TASK#1`` ... ``TASK#N`` (a task id never holds ``#``, so the split is
unambiguous); each repeat has its own seed, derived from the run's ``--seed``: repeat 1 keeps the
run's seed itself (so the first repeat is the episode a single run would have been), repeat r > 1
takes the first 31 bits of sha256("SEED#r"). Nothing else of ours is imported here.
"""

from __future__ import annotations

import hashlib
import re

SEPARATOR = "#"
MAX_REPEATS = 10_000
_EPISODE_RE = re.compile(r"(?P<task>[^#]+)#(?P<r>[1-9][0-9]{0,4})")


def episode_id(task_id: str, repeat: int, repeats: int) -> str:
    """The episode id of repeat ``repeat`` (1-based) of ``task_id`` in a run of ``repeats``."""
    if not 1 <= repeat <= repeats <= MAX_REPEATS:
        raise ValueError(f"repeat {repeat} of {repeats}: must be 1..repeats, repeats at most {MAX_REPEATS}")
    return task_id if repeats == 1 else f"{task_id}{SEPARATOR}{repeat}"


def split_episode_id(eid: str) -> tuple[str, int | None]:
    """``(task id, repeat)`` of an episode id; repeat None for a task run once (a plain task id)."""
    m = _EPISODE_RE.fullmatch(eid)
    return (m.group("task"), int(m.group("r"))) if m else (eid, None)


def task_of(eid: str) -> str:
    """The task an episode id belongs to (``a.b#3`` -> ``a.b``; a plain task id is itself)."""
    return split_episode_id(eid)[0]


def repeat_seed(seed: int, repeat: int) -> int:
    """The seed of repeat ``repeat``: the run's own for repeat 1, else 31 bits of sha256("SEED#r")."""
    if repeat == 1:
        return seed
    digest = hashlib.sha256(f"{seed}{SEPARATOR}{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
