"""The uiautomator dump of the simulated phone's view tree.

The shape follows ``uiautomator dump`` on Android 10-14: ``<hierarchy rotation="0">`` with nested
``<node>`` elements carrying index, text, resource-id, class, package, content-desc, the boolean
flags, and ``bounds="[x1,y1][x2,y2]"`` (the visible bounds, clipped by scrolling parents).
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from harness.sim.ui import Node

_FLAGS = ("checkable", "checked", "clickable", "enabled", "focusable", "focused", "scrollable",
          "long-clickable", "password", "selected")


def _b(v: bool) -> str:
    return "true" if v else "false"


def _clean(s: str) -> str:
    # XML 1.0 forbids most control characters; Android's dump drops them too
    return "".join(ch for ch in s if ch in "\t\n\r" or ord(ch) >= 0x20)


def _node_xml(n: Node, index: int, out: list[str], depth: int) -> None:
    x1, y1, x2, y2 = n.visible_bounds()
    flags = {
        "checkable": n.checkable, "checked": n.checked, "clickable": n.clickable, "enabled": n.enabled,
        "focusable": n.focusable, "focused": n.focused, "scrollable": n.scrollable,
        "long-clickable": n.long_clickable, "password": n.password, "selected": n.selected,
    }
    attrs = (f'index="{index}" text={quoteattr(_clean(n.text))} resource-id={quoteattr(n.rid)} '
             f'class={quoteattr(n.cls)} package={quoteattr(n.package)} content-desc={quoteattr(_clean(n.desc))} '
             + " ".join(f'{k}="{_b(flags[k])}"' for k in _FLAGS)
             + f' bounds="[{x1},{y1}][{x2},{y2}]"')
    if not n.children:
        out.append(f"<node {attrs} />")
        return
    out.append(f"<node {attrs}>")
    for i, c in enumerate(n.children):
        _node_xml(c, i, out, depth + 1)
    out.append("</node>")


def hierarchy_xml(root: Node) -> str:
    out = ["<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>", '<hierarchy rotation="0">']
    _node_xml(root, 0, out, 0)
    out.append("</hierarchy>")
    return "".join(out)
