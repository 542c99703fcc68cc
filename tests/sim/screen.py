"""Screen helpers for the in-process SimPhone tests (test_apps_*.py): read the accessibility tree,
find a node on screen, tap or long-press it, and look at the phone's state.

Imported as ``from screen import ...`` (``tests/sim`` is on ``sys.path`` the way ``fake_phone`` is)."""

from __future__ import annotations

from harness.core import hierarchy
from harness.sim.phone import SimPhone
from harness.core.tasks import Selector


def elements(p: SimPhone) -> list[hierarchy.Element]:
    return hierarchy.parse(p.hierarchy_xml())


def find(p: SimPhone, *, text=None, rid=None, desc=None, text_contains=None, index=0):
    """The ``index``-th node on screen (area > 0, document order) that matches every given field,
    or None; ``rid`` is the short resource id ("save", not "com.x:id/save")."""
    sel = Selector(text=text, rid=rid, desc=desc, text_contains=text_contains, index=index)
    return hierarchy.find(elements(p), sel)


def tap(p: SimPhone, **sel) -> None:
    e = find(p, **sel)
    assert e is not None, f"nothing on screen matches {sel}: {p.state_json()['screen']}"
    p.tap(*e.center)


def long_press(p: SimPhone, **sel) -> None:
    e = find(p, **sel)
    assert e is not None, f"nothing on screen matches {sel}"
    p.long_press(*e.center)


def texts(p: SimPhone) -> list[str]:
    """Every non-empty text in the tree, in document order."""
    return [e.text for e in elements(p) if e.text]


def list_titles(p: SimPhone, list_rid: str) -> list[str]:
    """Titles of the rows inside the scrolling list ``list_rid``, top to bottom."""
    box = find(p, rid=list_rid).bounds
    return [e.text for e in elements(p) if e.short_rid == "title" and e.text
            and box[1] <= e.bounds[1] and e.bounds[3] <= box[3]]


def state(p: SimPhone) -> dict:
    return p.state_json()


st = state  # the short name test_apps_money.py uses


def effects(p: SimPhone, kind: str) -> list[dict]:
    return [e for e in state(p)["effects"] if e["kind"] == kind]


def make(size=(1080, 2400), locale="en", **reset) -> SimPhone:
    """A phone of ``size`` in ``locale``, reset with the given ``reset`` arguments (preset, state...)."""
    p = SimPhone(*size, locale=locale)
    p.reset(locale=locale, **reset)
    return p
