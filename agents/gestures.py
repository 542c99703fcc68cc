"""Scroll and swipe geometry shared by the families: a direction word read, a finger's swipe
towards a direction, ``scroll`` in the content sense (show what lies that way) and its inverse."""

from __future__ import annotations

from typing import Any

from agents.parsing import ParseError
from harness.core.actions import Swipe


DIRECTIONS = ("up", "down", "left", "right")
_UNIT = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


def direction_of(value: Any, what: str = "direction") -> str:
    d = str(value or "").strip().lower()
    if d not in DIRECTIONS:
        raise ParseError(f"{what} must be up, down, left or right, got {value!r}")
    return d


def _clamp(v: float, hi: int) -> int:
    return int(min(max(round(v), 0), hi - 1))


def finger_swipe(direction: str, screen: tuple[int, int], start: tuple[int, int] | None = None,
                 region: tuple[int, int, int, int] | None = None, duration_ms: int = 400) -> Swipe:
    """The finger moves towards ``direction`` (``up`` = from lower to higher on the screen), from
    ``start`` (default: the region's centre) by half the region (default: the whole screen)."""
    w, h = screen
    x1, y1, x2, y2 = region or (0, 0, w, h)
    x1, y1, x2, y2 = max(0, x1), max(0, y1), min(w, x2), min(h, y2)
    sx, sy = start if start is not None else ((x1 + x2) // 2, (y1 + y2) // 2)
    ux, uy = _UNIT[direction]
    ex = sx + ux * (x2 - x1) / 2
    ey = sy + uy * (y2 - y1) / 2
    return Swipe(start=(_clamp(sx, w), _clamp(sy, h)), end=(_clamp(ex, w), _clamp(ey, h)), duration_ms=duration_ms)


_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}


def reveal_swipe(direction: str, screen: tuple[int, int], start: tuple[int, int] | None = None,
                 region: tuple[int, int, int, int] | None = None, duration_ms: int = 400) -> Swipe:
    """``scroll(direction)`` in the content sense: show what lies towards ``direction``. ``down``
    reveals what is below, so the finger moves up (AndroidWorld's ``scroll``, UI-TARS's
    ``scroll`` "show more information on the direction side")."""
    return finger_swipe(_OPPOSITE[direction], screen, start, region, duration_ms)


def content_direction(swipe: Swipe) -> str:
    """The ``scroll(direction)`` word (the content direction) for a finger's swipe: the finger moving
    up shows what is below, ``down`` (the inverse of :func:`reveal_swipe`)."""
    dx, dy = swipe.end[0] - swipe.start[0], swipe.end[1] - swipe.start[1]
    finger = ("right" if dx > 0 else "left") if abs(dx) > abs(dy) else ("down" if dy > 0 else "up")
    return _OPPOSITE[finger]
