"""Declarative checks over a phone's state JSON (the simulated phone's ``dumpsys crate_sim``).

A check is plain YAML/JSON, so task files carry it without code::

    success:
      all:
        - {path: apps.settings.wifi, eq: false}
        - {path: "apps.contacts.contacts[name=Ana Lima].phone", eq: "5550101"}
        - {path: "apps.messages.threads[contact=Bob].messages", any: {path: text, contains: "late"}}
        - not: {path: "apps.files.files[name=report.pdf]", exists: true}

Paths are dotted keys; ``[k=v]`` picks the first list item whose field ``k`` equals ``v`` (compared
as text, with booleans and null written the JSON way: ``[enabled=true]``), ``[N]`` indexes a list (negative from the end). A path that does not resolve has no
value: only ``exists: false`` holds for it. ``any``/``every`` apply a nested check to each item of
a list. Exactly one operator per leaf.
"""

from __future__ import annotations

import json
import re
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Missing:
    """"No value here" (an operator not given, a path not found): one object, kept one across
    pickling (tasks travel to farm nodes), since checks test it with ``is``."""

    def __repr__(self) -> str:
        return "<missing>"

    def __reduce__(self) -> str:
        return "_MISSING"  # pickled as a reference to this module's one instance


_MISSING = _Missing()
_SEGMENT = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")

OPERATORS = ("eq", "ne", "contains", "not_contains", "icontains", "gt", "gte", "lt", "lte",
             "exists", "len", "len_gte", "in", "any", "every", "matches")


class CheckError(ValueError):
    pass


def _split(path: str) -> list[str]:
    out: list[str] = []
    pos = 0
    for m in _SEGMENT.finditer(path):
        gap = path[pos:m.start()].strip(".")
        if gap:
            raise CheckError(f"bad path {path!r} near {gap!r}")
        out.append(m.group(1) if m.group(1) is not None else "[" + m.group(2) + "]")
        pos = m.end()
    rest = path[pos:].strip(".")
    if rest:
        raise CheckError(f"bad path {path!r}: cannot read {rest!r} at its end")
    if not out:
        raise CheckError(f"empty path {path!r}")
    return out


split_path = _split  # the segments of a path: keys and "[...]" selectors


def _as_text(v: Any) -> str:
    """How a value reads inside a ``[k=v]`` filter: JSON spelling for true/false/null."""
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    return str(v)


def resolve(state: Any, path: str) -> Any:
    """The value at ``path`` in ``state`` or ``_MISSING``."""
    cur = state
    for seg in _split(path):
        if seg.startswith("["):
            inner = seg[1:-1]
            if not isinstance(cur, list):
                return _MISSING
            if "=" in inner:
                k, v = inner.split("=", 1)
                k, v = k.strip(), v.strip()
                found = _MISSING
                for item in cur:
                    if isinstance(item, dict) and k in item and _as_text(item[k]) == v:
                        found = item
                        break
                cur = found
            else:
                try:
                    cur = cur[int(inner)]
                except (ValueError, IndexError):
                    return _MISSING
        else:
            if not isinstance(cur, dict) or seg not in cur:
                return _MISSING
            cur = cur[seg]
        if cur is _MISSING:
            return _MISSING
    return cur


class Check(BaseModel):
    """One node of a check tree: a combinator (all/any_of/not) or a leaf (path + one operator)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    all: list["Check"] | None = None
    any_of: list["Check"] | None = Field(default=None, alias="any_of")
    not_: "Check | None" = Field(default=None, alias="not")
    path: str | None = None
    description: str | None = None
    eq: Any = _MISSING
    ne: Any = _MISSING
    contains: Any = _MISSING
    not_contains: Any = _MISSING
    icontains: str | None = None
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None
    exists: bool | None = None
    len: int | None = None
    len_gte: int | None = None
    in_: list[Any] | None = Field(default=None, alias="in")
    any: "Check | None" = None
    every: "Check | None" = None
    matches: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> "Check":
        combos = [n for n in ("all", "any_of", "not_") if getattr(self, n) is not None]
        ops = [o for o in self._ops()]
        if combos and (self.path is not None or ops):
            raise ValueError("a check is either a combinator (all/any_of/not) or a leaf (path + operator)")
        if len(combos) > 1:
            raise ValueError("use one of all/any_of/not per check node")
        if not combos:
            if self.path is None:
                raise ValueError("a leaf check needs 'path'")
            _split(self.path)
            if len(ops) != 1:
                raise ValueError(f"a leaf check needs exactly one operator of {', '.join(OPERATORS)}; got {ops or 'none'}")
            if self.matches is not None:
                try:
                    re.compile(self.matches)
                except re.error as e:
                    raise ValueError(f"matches: invalid regular expression: {e}") from None
        return self

    @property
    def operator(self) -> str | None:
        """A leaf's operator (``eq``, ``in``, ``any``...); None for a combinator."""
        return self._ops()[0] if self.path is not None else None

    def _ops(self) -> list[str]:
        found = []
        for name in ("eq", "ne", "contains", "not_contains"):
            if getattr(self, name) is not _MISSING:
                found.append(name)
        for name in ("icontains", "gt", "gte", "lt", "lte", "exists", "len", "len_gte", "in_", "any", "every", "matches"):
            if getattr(self, name) is not None:
                found.append(name.rstrip("_"))
        return found

    def evaluate(self, state: Any) -> bool:
        if self.all is not None:
            return all(c.evaluate(state) for c in self.all)
        if self.any_of is not None:
            return any(c.evaluate(state) for c in self.any_of)
        if self.not_ is not None:
            return not self.not_.evaluate(state)
        assert self.path is not None
        v = resolve(state, self.path)
        op = self._ops()[0]
        if op == "exists":
            return (v is not _MISSING and v is not None) == self.exists
        if v is _MISSING:
            return False
        if op == "eq":
            return v == self.eq
        if op == "ne":
            return v != self.ne
        if op == "contains":
            return _contains(v, self.contains)
        if op == "not_contains":
            return not _contains(v, self.not_contains)
        if op == "icontains":
            return isinstance(v, str) and self.icontains.casefold() in v.casefold()
        if op == "matches":
            return isinstance(v, str) and re.search(self.matches, v) is not None
        if op == "in":
            return v in self.in_
        if op in ("len", "len_gte"):
            if not hasattr(v, "__len__"):
                return False
            return len(v) == self.len if op == "len" else len(v) >= self.len_gte
        if op in ("any", "every"):
            if not isinstance(v, list):
                return False
            sub = self.any if op == "any" else self.every
            results = (sub.evaluate(item) for item in v)
            return any(results) if op == "any" else all(results)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return False
        bound = getattr(self, op)
        return {"gt": v > bound, "gte": v >= bound, "lt": v < bound, "lte": v <= bound}[op]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, alias in (("all", "all"), ("any_of", "any_of")):
            val = getattr(self, name)
            if val is not None:
                out[alias] = [c.to_json() for c in val]
        if self.not_ is not None:
            out["not"] = self.not_.to_json()
        if self.path is not None:
            out["path"] = self.path
            op = self._ops()[0]
            attr = "in_" if op == "in" else op
            val = getattr(self, attr)
            out[op] = val.to_json() if isinstance(val, Check) else val
        if self.description:
            out["description"] = self.description
        return out


def _contains(v: Any, needle: Any) -> bool:
    if isinstance(v, str):
        return isinstance(needle, str) and needle in v
    if isinstance(v, list):
        return needle in v
    if isinstance(v, dict):
        return isinstance(needle, str) and needle in v  # dict keys are strings in JSON
    return False


Check.model_rebuild()

CheckLike = Union[Check, dict]


def as_check(obj: CheckLike) -> Check:
    return obj if isinstance(obj, Check) else Check.model_validate(obj)
