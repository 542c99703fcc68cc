"""What a preflight check finds: a :class:`Problem` (one line: what failed, and what to do), the
error that carries every problem found (:class:`PreflightFailed`), and the lines of what passed
(:class:`Passed`) that ``harness preflight`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.core.user_error import UserError


@dataclass(frozen=True)
class Problem:
    """One thing that stops the command before it touches a device, said in one line."""

    check: str   # which check found it: "endpoint", "device", "size", "port", "unsafe", "run folder", ...
    text: str    # what failed, and what to do

    def __str__(self) -> str:
        return self.text


class PreflightFailed(UserError):
    """Every problem the checks found, each its own line (the command line prints one
    ``harness: error:`` line per problem and exits 2)."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(p.text for p in self.problems))


@dataclass
class Passed:
    """What the checks found in order, for ``harness preflight`` to print and for the command to go
    on with: ``lines`` (one per check that passed, or a note), the devices opened and their
    descriptions, and the tasks some device cannot start (task id -> why: skipped before the run)."""

    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    devices: list[Any] = field(default_factory=list)
    descriptions: list[dict[str, Any]] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
