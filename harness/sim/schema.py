"""What a task file may say about the simulated phone, read from the phone itself: its presets,
pages and packages, the effect kinds its apps log (with each field's type), and the shape of its
state (``dumpsys crate_sim``) after a reset of every preset in both languages.

Nothing here is a hand-kept list: the shapes are measured on a fresh :class:`SimPhone`, the
effect kinds come from the apps' ``effects`` tables (which ``App.effect`` enforces when an effect
is logged), so the checks in ``harness.run.task_checks`` cannot drift from the simulator.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from harness.sim.phone import SimPhone

LOCALES = ("en", "zh")
_JSON_TYPES = {str: "string", bool: "boolean", int: "number", float: "number", type(None): "null",
               dict: "object", list: "array"}
# state objects whose keys are data, not a fixed set: any key may follow them in a path
_OPEN_OBJECTS = (("screen",),)


@dataclass
class Shape:
    """The shape of a JSON value as seen in samples of the sim's state: the types it had, the
    fields of an object (``open``: keys are data, so any may appear) and the shape of a list's
    items (``None``: no item was ever seen, so nothing is known about them)."""

    types: set[str] = field(default_factory=set)
    keys: dict[str, "Shape"] = field(default_factory=dict)
    items: "Shape | None" = None
    open: bool = False
    values: frozenset[str] | None = None  # the only values a string may take (``screen.page``)

    def add(self, value: Any) -> "Shape":
        self.types.add(json_type(value))
        if isinstance(value, dict):
            for k, v in value.items():
                self.keys.setdefault(str(k), Shape()).add(v)
        elif isinstance(value, list):
            for v in value:
                self.items = self.items or Shape()
                self.items.add(v)
        return self

    def close(self) -> "Shape":
        """Mark objects seen empty in every sample as open (their keys are data)."""
        if "object" in self.types and not self.keys:
            self.open = True
        for s in self.keys.values():
            s.close()
        if self.items is not None:
            self.items.close()
        return self

    def describe(self) -> str:
        return " or ".join(sorted(self.types)) or "unknown"


def json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def shape_of_fields(fields: dict[str, type]) -> Shape:
    """The shape of an object with the given typed fields (an effect)."""
    return Shape(types={"object"}, keys={k: Shape(types={_JSON_TYPES[t]}) for k, t in fields.items()})


@dataclass(frozen=True)
class SimFacts:
    presets: tuple[str, ...]
    pages: frozenset[str]                       # "<app key>/<page>"
    packages: frozenset[str]
    app_keys: tuple[str, ...]
    effects: dict[str, dict[str, type]]         # kind -> field -> type (common fields included)
    state: Shape                                 # the state JSON after reset, every preset and locale
    app_states: dict[str, Shape]                 # apps.<key> alone (for setup.sim.state overrides)


_PHONE_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _phone() -> SimPhone:
    return SimPhone(1080, 2400)


@lru_cache(maxsize=1)
def facts() -> SimFacts:
    with _PHONE_LOCK:
        phone = _phone()
        presets = phone.presets()
        shape = Shape()
        for preset in presets:
            for locale in LOCALES:
                phone.reset(preset=preset, locale=locale)
                shape.add(phone.state_json())
        shape.close()
        for path in _OPEN_OBJECTS:
            node = shape
            for k in path:
                node = node.keys[k]
            node.open = True
        effects = phone.effect_schema()
        item = Shape(types={"object"})
        for fields in effects.values():
            for name, typ in fields.items():
                item.keys.setdefault(name, Shape()).types.add(_JSON_TYPES[typ])
        shape.keys["effects"].items = item
        pages = {f"{key}/{name[len('build_'):]}" for key, app in [("launcher", phone.launcher), *phone.by_key.items()]
                 for name in dir(app) if name.startswith("build_")}
        pages.add("systemui/recents")
        shape.keys["screen"].keys["page"].values = frozenset(pages)
        return SimFacts(presets=presets, pages=frozenset(pages), packages=frozenset(phone.packages()),
                        app_keys=tuple(phone.by_key), effects=effects, state=shape,
                        app_states=dict(shape.keys["apps"].keys))


def start_state(task: Any) -> dict[str, Any]:
    """The state a device reports right after the runner's reset for ``task`` (a simulated task):
    its preset, locale, anomalies, seed and overrides, then ``setup.start`` if any."""
    from harness.sim.local import reset_for_task

    with _PHONE_LOCK:
        phone = _phone()
        reset_for_task(phone, task)
        return phone.state_json()

