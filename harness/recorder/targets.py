"""Naming the node a finger touched, so a recorded step replays at any screen size.

The inverse of ``harness.core.hierarchy.resolve_step``: given the screen's elements and the point a
person tapped, find the element that took the tap (the topmost clickable one under the finger,
as Android dispatches a touch) and the shortest target that picks exactly that element again:
its resource id, its text, its content description, a pair of them, or, failing all, the first
with ``index``. A child's text names its clickable parent when the child sits inside it (tapping
the child's centre lands on the parent), which is how list rows are usually named.
"""

from __future__ import annotations

from typing import Any

from harness.core.hierarchy import Element, matches
from harness.core.tasks import Selector

_ACTOR = {"click": "clickable", "long_press": "long_clickable", "swipe": "scrollable"}


def _inside(b: tuple[int, int, int, int], x: int, y: int) -> bool:
    return b[0] <= x < b[2] and b[1] <= y < b[3]


def element_at(elements: list[Element], x: int, y: int, kind: str = "click") -> Element | None:
    """The element that takes a ``kind`` gesture at (x, y): the last (topmost) one under the point
    that handles it; for a long press a clickable one when nothing is long-clickable."""
    under = [e for e in elements if e.area > 0 and _inside(e.bounds, x, y) and e.enabled]
    for attr in (_ACTOR[kind],) + (("clickable",) if kind == "long_press" else ()):
        hits = [e for e in under if getattr(e, attr)]
        if hits:
            return hits[-1]
    return None


def _descendants(elements: list[Element], el: Element) -> list[Element]:
    out = []
    for e in elements[el.index + 1:]:
        if e.depth <= el.depth:
            break
        out.append(e)
    return out


def _options(e: Element) -> list[dict[str, Any]]:
    rid = e.short_rid
    out: list[dict[str, Any]] = []
    if rid:
        out.append({"rid": rid})
    if e.text:
        out.append({"text": e.text})
    if e.desc:
        out.append({"desc": e.desc})
    if rid and e.text:
        out.append({"rid": rid, "text": e.text})
    if rid and e.desc:
        out.append({"rid": rid, "desc": e.desc})
    if e.rid and e.rid != rid:
        out.append({"rid": e.rid})
    return out


def selector_for(elements: list[Element], actor: Element, x: int, y: int) -> dict[str, Any] | None:
    """The shortest target that finds ``actor`` again (or a child under (x, y) whose centre lies
    inside it), as a dict for a reference step; None when nothing on it has a name."""
    # the actor, then its children under the finger, then its other children; never a clickable
    # child (a tap at its centre would go to it, not to the actor)
    inner = [d for d in reversed(_descendants(elements, actor)) if not d.clickable]
    named = [actor] + sorted(inner, key=lambda d: not _inside(d.bounds, x, y))
    fallback = None
    for cand in named:
        if cand is not actor and not _inside(actor.bounds, *cand.center):
            continue
        for opt in _options(cand):
            sel = Selector.model_validate(opt)
            found = [e for e in elements if matches(e, sel)]
            if len(found) == 1:
                return opt
            if fallback is None and cand in found:
                fallback = {**opt, "index": found.index(cand)} if found.index(cand) else opt
    return fallback


def swipe_target(elements: list[Element], start: tuple[int, int], end: tuple[int, int]) -> dict[str, Any] | None:
    """A targeted swipe (``target``, ``direction``, ``distance``) for a finger moving from start to
    end over a scrollable element; None when no scrollable element is under the start."""
    el = element_at(elements, *start, kind="swipe")
    if el is None:
        return None
    sel = selector_for(elements, el, *start)
    if sel is None:
        return None
    dx, dy = end[0] - start[0], end[1] - start[1]
    x1, y1, x2, y2 = el.bounds
    if abs(dy) >= abs(dx):
        direction, span, moved = ("up" if dy < 0 else "down"), max(1, y2 - y1), abs(dy)
    else:
        direction, span, moved = ("left" if dx < 0 else "right"), max(1, x2 - x1), abs(dx)
    return {"target": sel, "direction": direction, "distance": round(min(max(moved / span, 0.01), 3.0), 2)}
