"""What was not judged, counted beside what was (``harness report``, the run's summary, the viewer's
index): each safety judge's unsafe count with its ``judge_error`` count, where a judge that judged
nothing shows ``—`` and its errors, never "unsafe 0"; and the episodes the agent's model could not
play (``model_error``: its endpoint failed for good), each with its whole reason.

Rows are (verdicts, details) pairs, so a report's episodes and a run's result lines are counted by
one rule (:func:`harness.core.verdicts.counts_unsafe`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.core.verdicts import counts_unsafe

NOT_JUDGED = "—"  # shown for a count of a judge that judged nothing: not zero, nothing known
ERROR = "judge_error"


def safety_tally(rows: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
                 safety: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per safety judge: ``unsafe`` (episodes it counts unsafe; None when it judged none),
    ``judged`` (episodes with its true/false verdict) and ``judge_errors``."""
    rows = list(rows)
    out: dict[str, dict[str, Any]] = {}
    for s in safety:
        verdicts = [(v.get(s), (d or {}).get(s)) for v, d in rows]
        judged = sum(1 for v, _ in verdicts if isinstance(v, bool))
        out[s] = {"unsafe": sum(1 for v, d in verdicts if counts_unsafe(v, d)) if judged else None,
                  "judged": judged, "judge_errors": sum(1 for v, _ in verdicts if v == ERROR)}
    return out


def group_tally(g: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A report group's safety tally, from its JSON keys (``unsafe_by_judge`` and its two twins)."""
    return {s: {"unsafe": u, "judged": (g.get("unsafe_judged_by_judge") or {}).get(s, 0),
                "judge_errors": (g.get("unsafe_errors_by_judge") or {}).get(s, 0)}
            for s, u in (g.get("unsafe_by_judge") or {}).items()}


def any_judged(tally: Mapping[str, Mapping[str, Any]]) -> bool:
    return any(t["judged"] for t in tally.values())


def count_cell(unsafe: int | None, errors: int) -> str:
    """``2``, ``2 (+1 err)``, or ``— (4 err)`` for a judge (or judges) that judged nothing."""
    shown = NOT_JUDGED if unsafe is None else str(unsafe)
    return shown + (f" (+{errors} err)" if errors and unsafe is not None else f" ({errors} err)" if errors else "")


def unsafe_cell(unsafe: int | None, tally: Mapping[str, Mapping[str, Any]]) -> str:
    """The "unsafe" (by any safety judge) cell of a group: the count, each judge's errors beside
    it, ``—`` when no safety judge judged any of its episodes."""
    errors = [f"{s} {t['judge_errors']} err" for s, t in tally.items() if t["judge_errors"]]
    shown = NOT_JUDGED if unsafe is None else str(unsafe)
    return shown + (f" ({', '.join(errors)})" if errors else "")


def summary_line(rows: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]], safety: list[str],
                 flagged: int) -> str:
    """The run summary's line: how many episodes a safety judge flagged, and for each judge how
    many it could not judge (a judge that judged none: ``—``)."""
    tally = safety_tally(rows, safety)
    shown = str(flagged) if any_judged(tally) else NOT_JUDGED
    parts = [f"{s}: {count_cell(t['unsafe'], t['judge_errors'])}" for s, t in tally.items() if t["judge_errors"]]
    unjudged = [s for s, t in tally.items() if not t["judged"] and not t["judge_errors"]]
    line = f"unsafe episodes flagged: {shown} (by any of {', '.join(safety)})"
    if parts:
        line += f"; not judged (judge_error): {'; '.join(parts)}"
    if unjudged:
        line += f"; no verdict at all from {', '.join(unjudged)}"
    return line


def model_error_reasons(rows: Iterable[Any], run: str | None = None) -> list[dict[str, Any]]:
    """Each episode that ended ``model_error``, with its whole reason (``run`` names its run)."""
    return [{**({"run": run} if run is not None else {}), "task_id": r.task_id,
             "error": " ".join(str(getattr(r, "error", None) or "no reason recorded").split())}
            for r in rows if r.status == "model_error"]


def columns(safety: list[str]) -> list[tuple[str, Any]]:
    """The report table's safety columns: "unsafe" by any judge (with each judge's errors), and with
    two or more safety judges one column per judge (its unsafe count, its errors beside it)."""
    cols: list[tuple[str, Any]] = [("unsafe", lambda g: unsafe_cell(g["unsafe"], group_tally(g)) if safety else "-")]
    if len(safety) > 1:
        cols += [(f"unsafe {s}", lambda g, s=s: count_cell(group_tally(g)[s]["unsafe"], group_tally(g)[s]["judge_errors"]))
                 for s in safety]
    return cols


def csv_head(safety: list[str]) -> list[str]:
    return ["model_errors", *[k for s in safety for k in (f"unsafe_{s}", f"unsafe_judged_{s}", f"judge_errors_{s}")]]


def csv_row(g: Mapping[str, Any], safety: list[str]) -> list[Any]:
    t = group_tally(g)
    return [g.get("model_errors", 0), *[v for s in safety for v in (t[s]["unsafe"], t[s]["judged"], t[s]["judge_errors"])]]


def model_error_lines(model_errors: list[Mapping[str, Any]]) -> list[str]:
    """One line per episode the agent's model could not play: run, task, the whole reason."""
    return [f"{m.get('run', '')}/{m['task_id']}: {m['error']}" for m in model_errors]
