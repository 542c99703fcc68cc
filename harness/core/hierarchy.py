"""Reading a uiautomator dump: elements with bounds, selectors, and aiming reference steps.

Used by the replay agent (a reference step aimed at ``{text: Wi-Fi}`` becomes a tap at that
node's centre), by Set-of-Mark agents (numbered element boxes) and by the oracle's milestone
checks. Parsing never trusts the XML: it is read with the standard library's parser (no entity
expansion beyond XML's own) and malformed bounds are skipped.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Callable

from harness.core.actions import Action, Click, DoubleTap, Key, LongPress, Swipe
from harness.core.tasks import AIMED, RefStep, Selector

_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


class HierarchyError(ValueError):
    pass


@dataclass(frozen=True)
class Element:
    index: int               # document order
    text: str
    desc: str
    rid: str
    cls: str
    package: str
    bounds: tuple[int, int, int, int]
    clickable: bool
    long_clickable: bool
    scrollable: bool
    checkable: bool
    checked: bool
    focused: bool
    enabled: bool
    selected: bool
    depth: int
    # additive (defaults keep older constructions valid): the dump's ``hint`` (AOSP's and androidx's
    # uiautomator dumpers write it since API 26; empty where absent) and ``focusable``
    hint: str = ""
    focusable: bool = False

    @property
    def center(self) -> tuple[int, int]:
        x1, y1, x2, y2 = self.bounds
        return (x1 + x2) // 2, (y1 + y2) // 2

    @property
    def area(self) -> int:
        x1, y1, x2, y2 = self.bounds
        return max(0, x2 - x1) * max(0, y2 - y1)

    @property
    def label(self) -> str:
        return self.text or self.desc

    @property
    def short_rid(self) -> str:
        return self.rid.split(":id/", 1)[-1] if self.rid else ""


def parse(xml_text: str) -> list[Element]:
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as e:
        raise HierarchyError(f"the hierarchy dump is not valid XML: {e}") from None
    out: list[Element] = []

    def visit(node: ET.Element, depth: int) -> None:
        if node.tag == "node":
            m = _BOUNDS.fullmatch(node.get("bounds", ""))
            if m:
                b = tuple(int(v) for v in m.groups())
                t = lambda k: node.get(k) == "true"  # noqa: E731
                out.append(Element(
                    index=len(out), text=node.get("text", ""), desc=node.get("content-desc", ""),
                    rid=node.get("resource-id", ""), cls=node.get("class", ""), package=node.get("package", ""),
                    bounds=b, clickable=t("clickable"), long_clickable=t("long-clickable"),
                    scrollable=t("scrollable"), checkable=t("checkable"), checked=t("checked"),
                    focused=t("focused"), enabled=node.get("enabled", "true") == "true", selected=t("selected"),
                    depth=depth, hint=node.get("hint", ""), focusable=t("focusable")))
        for child in node:
            visit(child, depth + 1)

    visit(root, 0)
    return out


def matches(el: Element, sel: Selector) -> bool:
    if sel.text is not None and el.text != sel.text:
        return False
    if sel.text_contains is not None and sel.text_contains not in el.text:
        return False
    if sel.desc is not None and el.desc != sel.desc:
        return False
    if sel.rid is not None and el.rid != sel.rid and el.short_rid != sel.rid:
        return False
    if sel.cls is not None and el.cls != sel.cls and el.cls.rsplit(".", 1)[-1] != sel.cls:
        return False
    return el.area > 0


def find(elements: list[Element], sel: Selector) -> Element | None:
    found = [e for e in elements if matches(e, sel)]
    if len(found) <= sel.index:
        return None
    return found[sel.index]


class TargetMissing(HierarchyError):
    """The step's target is not on the screen."""


def resolve_step(step: RefStep, elements: list[Element], screen: tuple[int, int]) -> Action:
    """Turn a reference step into a concrete action on the current screen.

    Raises TargetMissing when the step's target is not on screen (the reference no longer fits
    the app, an earlier step went wrong, or the target is below the fold: ``scroll_to``), and
    HierarchyError when a targeted swipe would leave the screen (it is never clamped: a clamped
    swipe moves a list or a wheel by less than the reference says)."""
    if step.target is None:
        return step.action()
    el = find(elements, step.target)
    if el is None:
        hint = "" if step.scroll_to else " (below the fold? add scroll_to: true to scroll its list to it)"
        raise TargetMissing(f"no element on screen matches {step.target.describe()}{hint}")
    cx, cy = el.center
    extra = step.model_extra or {}
    if step.type not in AIMED:
        return step.action()  # answer / wait: the target only had to be on screen
    if step.type == "click":
        return Click(x=cx, y=cy)
    if step.type == "long_press":
        return LongPress(x=cx, y=cy, duration_ms=int(extra.get("duration_ms", 1000)))
    if step.type == "double_tap":
        return DoubleTap(x=cx, y=cy)
    x1, y1, x2, y2 = el.bounds
    w, h = screen
    vertical = step.direction in ("up", "down")
    size = (y2 - y1) if vertical else (x2 - x1)
    travel = int(round(step.distance * size))
    sign = -1 if step.direction in ("up", "left") else 1
    ex, ey = (cx, cy + sign * travel) if vertical else (cx + sign * travel, cy)
    if not (0 <= ex < w and 0 <= ey < h):
        room = (cy if sign < 0 else h - 1 - cy) if vertical else (cx if sign < 0 else w - 1 - cx)
        raise HierarchyError(
            f"swipe {step.direction} from ({cx}, {cy}) by {travel} px ({step.distance} x the target's "
            f"{'height' if vertical else 'width'} {size} px) would end at ({ex}, {ey}), off the {w}x{h} screen; "
            f"split it into swipes of at most distance {room / max(1, size):.2f} here")
    return Swipe(start=(cx, cy), end=(ex, ey), duration_ms=int(extra.get("duration_ms", 400)))


# --- playing a reference step by step -----------------------------------------------------
IME_CLASSES = ("android.inputmethodservice.KeyboardView",)
SCROLL_MS = 600  # slow enough not to fling: the list moves by the finger's travel


@dataclass
class Play:
    """The next action of a reference: the action (None when the step cannot be aimed, with
    ``invalid`` saying why), the 1-based reference step it serves, and ``seeking`` when it is a
    scroll (or hiding the keyboard) that brings a ``scroll_to`` step's target into view."""

    action: Action | None
    step: int
    raw: str
    invalid: str | None = None
    seeking: str | None = None


@dataclass
class _Seek:
    forward: bool = True
    tries: int = 0
    last: tuple | None = None
    turned: bool = False
    hid_keyboard: bool = False


class ReferencePlayer:
    """Plays reference steps (a task's reference, a script) one action at a time, aiming each
    targeted step on the current screen. A step with ``scroll_to`` whose target is not on screen
    first hides the keyboard if it is up, then scrolls the target's list (the largest scrollable
    on screen, or the one ``scroll_to`` names) towards its end, then back towards its start,
    until the target appears; these extra actions serve the same step."""

    MAX_SEEK = 16

    def __init__(self, steps: list[RefStep]):
        self.steps = list(steps)
        self.pos = 0
        self._seek: _Seek | None = None

    @property
    def finished(self) -> bool:
        return self.pos >= len(self.steps)

    def skip(self) -> None:
        """Drop the next step (a replay's perturbation)."""
        self.pos += 1
        self._seek = None

    def next(self, elements: Callable[[], list[Element]], screen: tuple[int, int]) -> Play:
        ref = self.steps[self.pos]
        index = self.pos + 1
        raw = ref.model_dump_json(exclude_none=True, by_alias=True, exclude=None if ref.scroll_to else {"scroll_to"})
        if ref.target is None:
            self.skip()
            return Play(ref.action(), index, raw)
        try:
            els = elements()
            action = resolve_step(ref, els, screen)
        except TargetMissing as e:
            if ref.scroll_to:
                seek = self._seek_action(ref, els)
                if seek is not None:
                    return Play(seek[0], index, raw, seeking=seek[1])
                e = TargetMissing(f"{e}; scrolling did not bring it into view")
            self.skip()
            return Play(None, index, raw, invalid=f"reference step {index}: {e}")
        except HierarchyError as e:
            self.skip()
            return Play(None, index, raw, invalid=f"reference step {index}: {e}")
        self.skip()
        return Play(action, index, raw)

    def _seek_action(self, ref: RefStep, els: list[Element]) -> tuple[Action, str] | None:
        seek = self._seek = self._seek or _Seek()
        if seek.tries >= self.MAX_SEEK:
            return None
        seek.tries += 1
        if not seek.hid_keyboard and any(e.cls in IME_CLASSES for e in els):
            seek.hid_keyboard = True  # once: a second back would leave the page
            return Key(key="back"), "hide_keyboard"
        box = self._container(ref, els)
        if box is None:
            return None
        x1, y1, x2, y2 = box.bounds
        inside = tuple((e.text, e.desc, e.rid, e.bounds) for e in els
                       if x1 <= e.center[0] < x2 and y1 <= e.center[1] < y2)
        if seek.last == inside:  # the last scroll moved nothing: that end of the list is reached
            if seek.turned:
                return None
            seek.forward, seek.turned = not seek.forward, True
        seek.last = inside
        cx = (x1 + x2) // 2
        hi, lo = y1 + (y2 - y1) * 3 // 4, y1 + (y2 - y1) // 4
        start, end = ((cx, hi), (cx, lo)) if seek.forward else ((cx, lo), (cx, hi))
        return Swipe(start=start, end=end, duration_ms=SCROLL_MS), "scroll"

    @staticmethod
    def _container(ref: RefStep, els: list[Element]) -> Element | None:
        if isinstance(ref.scroll_to, Selector):
            return find(els, ref.scroll_to)
        lists = [e for e in els if e.scrollable and e.area > 0]
        return max(lists, key=lambda e: e.area, default=None)
