"""The slots of a model endpoint: how many calls may be in flight to it at once, shared by every
client of it in the process (agents', judges' and monitors' alike), and who goes first when calls
wait: a gate check before an agent call before live step evidence before offline judging
(:class:`Priority`). :class:`harness.client.calls.ModelClient` takes a slot for each attempt of a call."""

from __future__ import annotations

import heapq
import threading
import time
from contextlib import contextmanager
from enum import IntEnum
from typing import Any, Iterator


class Priority(IntEnum):
    """Who waits on a call, most urgent first. A gate check holds the action it judges; an agent
    call holds the episode; live step evidence only needs to be in before the episode ends; offline
    judging waits on nobody."""

    GATE = 0
    AGENT = 1
    LIVE = 2
    OFFLINE = 3


class EndpointSlots:
    """The slots of one endpoint: at most ``capacity`` calls in flight, waiting calls served by
    priority (then in arrival order). Once gate checks or agent calls use the endpoint, the
    background classes (live evidence, offline judging) may fill only ``capacity - reserve`` slots,
    so those find a free slot at once while evidence calls are in flight; an endpoint that only
    judges use keeps all its slots for them (with one slot there is no reserve).

    Each waiter sleeps on its own event and a freed slot is handed to the head of the queue alone:
    waking every waiter on every release (one condition for all) cost each call ~2 x K wake-ups at
    K calls in flight, a large part of an offline pass's CPU at K = 64. A slot has a number, the
    lowest free one is given out, so a client can keep its connections in groups by slot
    (:class:`ModelClient`): at most ``SLOTS_PER_POOL`` calls share a connection pool."""

    def __init__(self, capacity: int) -> None:
        self._lock = threading.Lock()
        self.capacity = max(1, capacity)
        self.in_flight = 0
        self.foreground = False  # a gate check or an agent call has used this endpoint
        self._waiting: list[tuple[int, int, list[Any]]] = []  # heap of (priority, ticket, [event, slot])
        self._ticket = 0
        self._free = list(range(self.capacity))  # heap of free slot numbers

    @property
    def reserve(self) -> int:
        if not self.foreground or self.capacity < 2:
            return 0
        return max(1, self.capacity // 4)

    def grow(self, capacity: int) -> None:
        with self._lock:
            if capacity > self.capacity:
                for n in range(self.capacity, capacity):
                    heapq.heappush(self._free, n)
                self.capacity = capacity
                self._hand_out()

    def _limit(self, priority: int) -> int:
        return self.capacity if priority <= Priority.AGENT else self.capacity - self.reserve

    def _hand_out(self) -> None:
        """Give free slots to the head of the queue while it may have one (lock held). The head has
        the best priority, and a worse one has no higher limit: when the head cannot go, nobody
        behind it can."""
        while self._waiting and self.in_flight < self._limit(self._waiting[0][0]):
            _, _, waiter = heapq.heappop(self._waiting)
            self.in_flight += 1
            waiter[1] = heapq.heappop(self._free)
            waiter[0].set()

    def _give_back(self, number: int) -> None:
        with self._lock:
            self.in_flight -= 1
            heapq.heappush(self._free, number)
            self._hand_out()

    @contextmanager
    def slot(self, priority: int, deadline: float | None = None) -> Iterator[int]:
        """Hold one slot while the block runs; yields the slot's number (0 .. capacity - 1). A call
        that gets none by ``deadline`` (a ``time.monotonic()`` value), or is woken by
        :meth:`wake_all` (the run is stopping), raises :class:`NoSlot` and leaves the queue."""
        waiter: list[Any] = [threading.Event(), None]
        with self._lock:
            self._ticket += 1
            if int(priority) <= Priority.AGENT:
                self.foreground = True
            heapq.heappush(self._waiting, (int(priority), self._ticket, waiter))
            self._hand_out()
        try:
            waiter[0].wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except BaseException:  # interrupted while waiting: leave the queue, or give back what came
            self._leave(waiter)
            raise
        if waiter[1] is None:
            self._leave(waiter)
            if waiter[1] is None:
                raise NoSlot("no free slot before the call's deadline")
        try:
            yield waiter[1]
        finally:
            self._give_back(waiter[1])

    def _leave(self, waiter: list[Any]) -> None:
        """Take ``waiter`` out of the queue; a slot handed to it meanwhile is given back."""
        with self._lock:
            if waiter[1] is None:
                self._waiting = [w for w in self._waiting if w[2] is not waiter]
                heapq.heapify(self._waiting)
                return
        self._give_back(waiter[1])

    def wake_all(self) -> None:
        """Wake every waiting call without a slot (:func:`stop_calls`): each raises :class:`NoSlot`."""
        with self._lock:
            for _, _, waiter in self._waiting:
                waiter[0].set()


class NoSlot(Exception):
    """A call got no endpoint slot: its deadline came first, or the run is stopping."""


SLOTS_PER_POOL = 8  # calls in flight that share one connection pool (harness.client.calls.ModelClient._pool)
_slots: dict[str, EndpointSlots] = {}
_slots_lock = threading.Lock()


def endpoint_slots(base_url: str, n: int) -> EndpointSlots:
    """The slots of ``base_url``, shared by every client of it (agents', judges' and monitors'
    alike, so that priorities hold across them); the largest limit asked for applies."""
    with _slots_lock:
        slots = _slots.get(base_url)
        if slots is None:
            slots = _slots[base_url] = EndpointSlots(n)
        else:
            slots.grow(n)
        return slots


def forget_slots(base_url: str) -> None:
    """Drop ``base_url``'s slots (harness.client.structured.forget_endpoint): later calls get fresh ones."""
    with _slots_lock:
        _slots.pop(base_url, None)


def wake_every_waiter() -> None:
    """:meth:`EndpointSlots.wake_all` on every endpoint (the run is stopping)."""
    with _slots_lock:
        endpoints = list(_slots.values())
    for slots in endpoints:
        slots.wake_all()
