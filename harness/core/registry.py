"""Registries of named plugins (agents, judges, monitors), each with a typed config.

A plugin registers its name, its config dataclass and a factory. ``build(name, options)`` turns
``--agent-opt k=v`` strings into the config's typed fields (unknown keys and bad values are
refused with the option's name) and returns the plugin; its ``spec()`` goes into the manifest,
so a run says exactly how to rebuild what ran (the habit Inspect's registry follows).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class RegistryError(ValueError):
    pass


@dataclass
class Entry(Generic[T]):
    name: str
    config: type
    factory: Callable[[Any], T]
    help: str


def _convert(raw: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or str(origin) == "types.UnionType" or (origin is not None and type(None) in args):
        if raw in (None, "", "none", "null") and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(raw, inner[0], where) if len(inner) == 1 else raw
    if origin is typing.Literal:
        for a in args:  # options arrive as text: match the literal's spelling
            if raw == a or (isinstance(raw, str) and raw == str(a)):
                return a
        raise RegistryError(f"{where}: must be one of {', '.join(map(str, args))}, got {raw!r}")
    if not isinstance(raw, str):
        return raw
    try:
        if tp is bool:
            low = raw.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if tp is int:
            return int(raw)
        if tp is float:
            return float(raw)
        if origin in (list, tuple):
            return [_convert(v.strip(), args[0] if args else str, where) for v in raw.split(",") if v.strip()]
    except ValueError:
        raise RegistryError(f"{where}: {raw!r} is not a valid {getattr(tp, '__name__', tp)}") from None
    return raw


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self.entries: dict[str, Entry[T]] = {}

    def register(self, name: str, config: type, help: str = "") -> Callable[[Callable[[Any], T]], Callable[[Any], T]]:
        def deco(factory: Callable[[Any], T]) -> Callable[[Any], T]:
            if name in self.entries:
                raise RegistryError(f"{self.kind} {name!r} registered twice")
            self.entries[name] = Entry(name, config, factory, help)
            return factory
        return deco

    def names(self) -> list[str]:
        return sorted(self.entries)

    def config(self, name: str, options: dict[str, Any] | None = None) -> Any:
        entry = self._entry(name)
        fields = {f.name: f for f in dataclasses.fields(entry.config)}
        hints = typing.get_type_hints(entry.config)
        values = {}
        for k, v in (options or {}).items():
            key = k.replace("-", "_")
            if key not in fields:
                raise RegistryError(f"{self.kind} {name!r} has no option {k!r} (options: {', '.join(fields) or 'none'})")
            values[key] = _convert(v, hints[key], f"{self.kind} {name} option {k}")
        try:
            return entry.config(**values)
        except (TypeError, ValueError) as e:
            raise RegistryError(f"{self.kind} {name!r}: {e}") from None

    def build(self, name: str, options: dict[str, Any] | None = None) -> T:
        config = self.config(name, options)
        try:
            return self._entry(name).factory(config)
        except RegistryError:
            raise
        except ValueError as e:  # the plugin refused its inputs (a bad script file...): one clear line
            raise RegistryError(f"{self.kind} {name!r}: {e}") from None

    def _entry(self, name: str) -> Entry[T]:
        if name not in self.entries:
            raise RegistryError(f"unknown {self.kind} {name!r} (known: {', '.join(self.names()) or 'none'})")
        return self.entries[name]

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for name in self.names():
            e = self.entries[name]
            opts = []
            for f in dataclasses.fields(e.config):
                default = f.default if f.default is not dataclasses.MISSING else (
                    f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
                opts.append({"name": f.name, "type": str(f.type), "default": default,
                             "help": f.metadata.get("help", "")})
            out.append({"name": name, "help": e.help, "options": opts})
        return out


def parse_options(pairs: list[str] | None, flag: str) -> dict[str, str]:
    """``["k=v", ...]`` -> dict; a pair without '=' is an error naming the flag."""
    out: dict[str, str] = {}
    for p in pairs or []:
        if "=" not in p:
            raise RegistryError(f"{flag} {p!r}: expected KEY=VALUE")
        k, v = p.split("=", 1)
        out[k.strip()] = v
    return out


AGENTS: Registry[Any] = Registry("agent")
JUDGES: Registry[Any] = Registry("judge")
MONITORS: Registry[Any] = Registry("monitor")
