"""How a run's plugins get their options from the command line: ``--judge-opt``/``--monitor-opt``
apply to every chosen plugin that has the option, and a plugin whose config has a ``model`` field
gets the endpoint of the command line. ``harness run`` and ``harness judge`` build their plugins
through these; a mistake is a :class:`RunError`."""

from __future__ import annotations

from typing import Any


class RunError(Exception):
    pass


def opts_for(registry: Any, name: str, opts: dict[str, str]) -> dict[str, str]:
    """Options apply to every judge that has them (judges share endpoint options)."""
    import dataclasses

    fields = {f.name for f in dataclasses.fields(registry.entries[name].config)} if name in registry.entries else set()
    return {k: v for k, v in opts.items() if k.replace("-", "_") in fields}


def with_model(registry: Any, name: str, opts: dict[str, Any], model: Any, flag: str) -> dict[str, Any]:
    """Plugins whose config has a ``model`` field get the endpoint from the command line."""
    import dataclasses

    entry = registry.entries.get(name)
    if entry is None:
        return opts
    fields = {f.name: f for f in dataclasses.fields(entry.config)}
    if "model" not in fields:
        return opts
    if model is None:
        f = fields["model"]
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            raise RunError(f"{registry.kind} {name!r} needs a model endpoint: pass {flag}")
        return opts
    return {**opts, "model": model}
