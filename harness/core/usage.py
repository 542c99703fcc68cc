"""Model usage, metered by whoever owns the calls: every model call reports its tokens to the
:class:`Meter` its caller passes in (an episode's, a run's, an offline pass's), by role (``agent``,
a judge's name, ``monitor:crate-s``). Nothing is patched to count: a call that is given no meter is
simply not counted anywhere.

A meter may have a parent (an episode's meter reports into its run's), so one call is recorded once
and seen at every level. This module imports nothing else of ours.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _number(v: Any) -> float:
    """A count as a server or a record gives it; anything that is not a number counts 0."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _empty() -> dict[str, Any]:
    return {"calls": 0, "failed": 0, **{k: 0 for k in TOKEN_KEYS}, "model_s": 0.0}


class Meter:
    """Calls, failures, tokens and model seconds per role; thread-safe."""

    def __init__(self, parent: "Meter | None" = None) -> None:
        self.parent = parent
        self._lock = threading.Lock()
        self._roles: dict[str, dict[str, Any]] = {}
        self._active = 0  # calls inside a model client now (waiting for a slot or on the wire)
        self._peak = 0

    def enter(self) -> None:
        """A call begins (here and in every parent): :meth:`take_peak` sees it until :meth:`leave`."""
        with self._lock:
            self._active += 1
            self._peak = max(self._peak, self._active)
        if self.parent is not None:
            self.parent.enter()

    def leave(self) -> None:
        with self._lock:
            self._active -= 1
        if self.parent is not None:
            self.parent.leave()

    def take_peak(self) -> int:
        """The most calls in flight at once since the last take (an offline pass sizes its workers
        by it)."""
        with self._lock:
            p, self._peak = max(self._peak, self._active), self._active
            return p

    def record(self, role: str, usage: Mapping[str, Any] | None, latency_s: float = 0.0, *,
               failed: bool = False, structured: str | None = None, fingerprint: str | None = None) -> None:
        """One call of ``role``: its usage (``prompt_tokens``...; missing keys count 0), and, for a
        call that asked for a JSON schema, the structured-output mode it used (``structured``:
        ``{mode: calls}`` in the role's row); the server's ``system_fingerprint`` when it sent one
        (``system_fingerprints``: ``{value: calls}``)."""
        with self._lock:
            row = self._roles.setdefault(role, _empty())
            row["calls"] += 1
            row["failed"] += int(failed)
            for k in TOKEN_KEYS:
                row[k] += int(_number((usage or {}).get(k, 0)))
            if not (usage or {}).get("total_tokens"):  # servers that give only the two parts
                row["total_tokens"] = max(row["total_tokens"], row["prompt_tokens"] + row["completion_tokens"])
            row["model_s"] += float(latency_s)
            if structured is not None:
                modes = row.setdefault("structured", {})
                modes[structured] = modes.get(structured, 0) + 1
            if fingerprint is not None:
                fps = row.setdefault("system_fingerprints", {})
                fps[fingerprint] = fps.get(fingerprint, 0) + 1
        if self.parent is not None:
            self.parent.record(role, usage, latency_s, failed=failed, structured=structured, fingerprint=fingerprint)

    def add(self, recorded: Mapping[str, Any] | None) -> None:
        """Add the calls of a recorded :meth:`to_json` (an episode metered in another process, e.g.
        on a farm node), role by role, as if they had been recorded here."""
        if not isinstance(recorded, Mapping) or not isinstance(recorded.get("by_role"), Mapping):
            return
        with self._lock:
            for role, part in recorded["by_role"].items():
                if not isinstance(part, Mapping):
                    continue
                row = self._roles.setdefault(role, _empty())
                for k in ("calls", "failed", *TOKEN_KEYS):
                    row[k] += int(_number(part.get(k, 0)))
                row["model_s"] += _number(part.get("model_s", 0.0))
                if isinstance(part.get("structured"), Mapping):
                    modes = row.setdefault("structured", {})
                    for mode, n in part["structured"].items():
                        modes[str(mode)] = modes.get(str(mode), 0) + int(_number(n))
                if isinstance(part.get("system_fingerprints"), Mapping):
                    fps = row.setdefault("system_fingerprints", {})
                    for fp, n in part["system_fingerprints"].items():
                        fps[str(fp)] = fps.get(str(fp), 0) + int(_number(n))
        if self.parent is not None:
            self.parent.add(recorded)

    def role(self, role: str) -> dict[str, Any]:
        with self._lock:
            return dict(self._roles.get(role) or _empty())

    @property
    def total_tokens(self) -> int:
        with self._lock:
            return sum(r["total_tokens"] for r in self._roles.values())

    def to_json(self) -> dict[str, Any]:
        """``{"prompt_tokens", "completion_tokens", "total_tokens", "calls", "failed", "by_role":
        {role: {...}}}``: the sums first (what cost summaries read), then the parts."""
        with self._lock:
            roles = {k: {**v, "model_s": round(v["model_s"], 4),
                         **({"structured": dict(v["structured"])} if "structured" in v else {}),
                         **({"system_fingerprints": dict(v["system_fingerprints"])}
                            if "system_fingerprints" in v else {})}
                     for k, v in sorted(self._roles.items())}
        out: dict[str, Any] = {k: sum(r[k] for r in roles.values()) for k in TOKEN_KEYS}
        out["calls"] = sum(r["calls"] for r in roles.values())
        out["failed"] = sum(r["failed"] for r in roles.values())
        out["by_role"] = roles
        return out


def role_tokens(usage: Any, roles: tuple[str, ...] | None = None, *, exclude: tuple[str, ...] = ()) -> int | None:
    """Tokens of some roles in a recorded :meth:`Meter.to_json` (None when it has no ``by_role``).
    ``roles`` are names or prefixes ending in ``:`` (``"monitor:"`` for every monitor)."""
    if not isinstance(usage, Mapping) or not isinstance(usage.get("by_role"), Mapping):
        return None

    def chosen(name: str) -> bool:
        def hit(pats: tuple[str, ...]) -> bool:
            return any(name == p or (p.endswith(":") and name.startswith(p)) for p in pats)
        return (roles is None or hit(roles)) and not hit(exclude)

    total = 0
    for name, row in usage["by_role"].items():
        if chosen(str(name)) and isinstance(row, Mapping):
            v = row.get("total_tokens", 0)
            total += int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0
    return total


def role_tokens_sum(usages: list[dict[str, Any]], roles: tuple[str, ...] | None, exclude: tuple[str, ...]) -> int:
    """:func:`role_tokens` summed over many usages (a run's episodes), a missing one counting 0."""
    return sum(role_tokens(u, roles, exclude=exclude) or 0 for u in usages)
