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

from harness.actions import Action, Click, DoubleTap, LongPress, Swipe
from harness.tasks import RefStep, Selector

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
                    depth=depth))
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


def resolve_step(step: RefStep, elements: list[Element], screen: tuple[int, int]) -> Action:
    """Turn a reference step into a concrete action on the current screen.

    Raises HierarchyError when the step's target is not on screen (the reference no longer fits
    the app, or an earlier step went wrong)."""
    if step.target is None:
        return step.action()
    el = find(elements, step.target)
    if el is None:
        raise HierarchyError(f"no element on screen matches {step.target.describe()}")
    cx, cy = el.center
    extra = step.model_extra or {}
    if step.type == "click":
        return Click(x=cx, y=cy)
    if step.type == "long_press":
        return LongPress(x=cx, y=cy, duration_ms=int(extra.get("duration_ms", 1000)))
    if step.type == "double_tap":
        return DoubleTap(x=cx, y=cy)
    x1, y1, x2, y2 = el.bounds
    w, h = screen
    dist_y = int(round(step.distance * (y2 - y1)))
    dist_x = int(round(step.distance * (x2 - x1)))
    dx, dy = {"up": (0, -dist_y), "down": (0, dist_y), "left": (-dist_x, 0), "right": (dist_x, 0)}[step.direction]
    ex = min(max(cx + dx, 0), w - 1)
    ey = min(max(cy + dy, 0), h - 1)
    return Swipe(start=(cx, cy), end=(ex, ey), duration_ms=int(extra.get("duration_ms", 400)))
