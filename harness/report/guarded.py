"""Guarded sessions in the report (``harness guard``: an agent with its own loop behind the guard's
adb server): the actions the guard read, how many it blocked, the commands it refused (unreadable,
over the cap, after a halt) and the channels it could not see into (port forwards, on-device
servers, interactive shells), which the guard names rather than ignores."""

from __future__ import annotations

from typing import Any, Callable, Iterable


def episode_guard(extra: dict[str, Any]) -> dict[str, Any] | None:
    """The ``guard`` counts a result line records, or None for an episode the runner ran."""
    g = extra.get("guard")
    return g if isinstance(g, dict) else None


def _n(g: dict[str, Any], key: str) -> int:
    v = g.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def summary(rows: Iterable[Any]) -> dict[str, Any]:
    """Counts over episodes (``harness.report.episodes.Episode``) for one group of the report."""
    gs = [e.guard for e in rows if e.guard is not None]
    return {"guarded": len(gs), **{f"guard_{k}": sum(_n(g, k) for g in gs)
                                   for k in ("actions", "blocked", "refused", "unguarded", "unseen")}}


def columns(groups: list[dict[str, Any]]) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """The report table's guard column, when any episode was guarded."""
    if not any(g.get("guarded") for g in groups):
        return []
    return [("guard: actions, blocked, refused, unseen channels", lambda g: (
        f"{g['guard_actions']}, {g['guard_blocked']}, {g['guard_refused']}"
        + (f" (+{g['guard_unguarded']} unguarded)" if g["guard_unguarded"] else "") + f", {g['guard_unseen']}"
        if g["guarded"] else "-"))]


CSV_KEYS = ("guarded", "guard_actions", "guard_blocked", "guard_refused", "guard_unguarded", "guard_unseen")
