"""The live page without JavaScript: the script draws the page from the server's events, so a
browser that runs no script (or a text browser, or a locked-down one) once saw nothing at all. The
page now carries, inside ``<noscript>``, the run's state as it was when the page was served — each
device's latest episode (its state, step against the cap, last action, verdicts with the reason of
each judge_error) and every episode's state — and reloads itself every few seconds. Everything is
escaped text: a thought, a reason or a typed text full of markup shows as text."""

from __future__ import annotations

from typing import Any

from harness.report.page_parts import esc

RELOAD_S = 5


def noscript_head() -> str:
    return f'<noscript><meta http-equiv="refresh" content="{RELOAD_S}"></noscript>'


def _verdicts(result: dict[str, Any] | None) -> str:
    if not result:
        return ""
    whys = result.get("judge_errors") or {}
    parts = []
    for k, v in sorted((result.get("verdicts") or {}).items()):
        word = "true" if v is True else "false" if v is False else str(v)
        parts.append(f"{k}: {word}" + (f" ({whys[k]})" if k in whys else ""))
    return "; ".join(parts)


def noscript_body(snapshot: dict[str, Any] | None) -> str:
    """The state as static HTML (empty without a snapshot)."""
    if snapshot is None:
        return ""
    rows = []
    for d in snapshot.get("devices") or []:
        ep = d.get("episode") or {}
        steps = ep.get("steps") or []
        last = steps[-1] if steps else {}
        result = ep.get("result") or {}
        halt = result.get("halt") or {}
        note = result.get("error") or (f"halted at step {halt.get('step')}: {halt.get('category')}: {halt.get('reason')}"
                                       if halt else "")
        cells = [d.get("device"), ep.get("task_id"), ep.get("state"), f"{len(steps)}/{ep.get('cap') or '?'}",
                 last.get("action_text") or last.get("invalid") or "", _verdicts(result), note]
        rows.append("<tr>" + "".join(f"<td>{esc(str(c or ''))}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("device", "task", "state", "steps", "last action", "verdicts", "halt / error"))
    episodes = "".join(f"<li>{esc(str(e.get('device') or '?'))} {esc(str(e.get('task_id')))}: {esc(str(e.get('state')))}"
                       f"</li>" for e in snapshot.get("episodes") or [])
    return (f"<noscript><p>This page draws itself with JavaScript; without it, here is the run as it was "
            f"{RELOAD_S} s ago or less (the page reloads itself). The whole record: <code>harness view RUN</code>."
            f"</p><table><tr>{head}</tr>{''.join(rows)}</table><h2>Episodes</h2><ul>{episodes}</ul></noscript>")
