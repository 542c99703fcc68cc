"""Hand-overs in the report (an agent's ``needs_user``): how many episodes ended ``needs_user``
(counted in SR's denominator and never as a success: the agent did not finish the task, and
nobody finished it for it), how many hand-overs there were, how long people took, how many steps
they did, and how many episodes succeeded after one (``assisted``: their success verdicts stand,
told apart here).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable


def episode_handovers(extra: dict[str, Any]) -> list[dict[str, Any]]:
    """The hand-overs a result line records (``handovers``), the malformed left out."""
    hs = extra.get("handovers")
    return [h for h in hs if isinstance(h, dict)] if isinstance(hs, list) else []


def summary(rows: Iterable[Any], primary: str | None) -> dict[str, Any]:
    """Counts over episodes (``harness.report.episodes.Episode``) for one group of the report."""
    rows = list(rows)
    hs = [h for e in rows for h in e.handovers]
    taken = [h for h in hs if h.get("outcome") != "nobody"]
    return {"needs_user": sum(1 for e in rows if e.status == "needs_user"),
            "handovers": len(hs), "handovers_taken": len(taken),
            "handed_back": sum(1 for h in hs if h.get("outcome") == "handed_back"),
            "handover_wait_s": round(sum(float(h.get("wait_s") or 0.0) for h in taken), 3),
            "operator_steps": sum(len(h.get("operator_steps") or []) for h in hs),
            "assisted": sum(1 for e in rows if e.status != "needs_user" and any(h.get("operator_steps") for h in e.handovers)
                            and primary is not None and e.verdicts.get(primary) is True)}


def columns(groups: list[dict[str, Any]]) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """The report table's hand-over columns, when any episode asked for a person."""
    if not any(g.get("handovers") for g in groups):
        return []
    return [("needs_user", lambda g: str(g["needs_user"])),
            ("hand-overs (back), person's steps, wait", lambda g: (
                f"{g['handovers']} ({g['handed_back']}), {g['operator_steps']}, {g['handover_wait_s']:.1f} s"
                if g["handovers"] else "-")),
            ("assisted successes", lambda g: str(g["assisted"]))]


CSV_KEYS = ("needs_user", "handovers", "handed_back", "operator_steps", "handover_wait_s", "assisted")


def summary_line(rows: Iterable[Any]) -> str | None:
    """The run summary's hand-over line over result lines (``EpisodeResult``), or None without any."""
    rows = list(rows)
    handed = [h for r in rows for h in episode_handovers(r.model_extra or {})]
    needs_user = sum(1 for r in rows if r.status == "needs_user")
    if not (handed or needs_user):
        return None
    taken = [h for h in handed if h.get("outcome") != "nobody"]
    return (f"hand-overs: {len(handed)} ({sum(1 for h in handed if h.get('outcome') == 'handed_back')} handed back, "
            f"{sum(len(h.get('operator_steps') or []) for h in handed)} steps by a person, waited "
            f"{sum(float(h.get('wait_s') or 0) for h in taken):.1f} s); needs_user: {needs_user} episode(s), "
            "never counted as a success")
