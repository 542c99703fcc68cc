"""The viewer's index page (``RUN/report.html``): a summary of the run at the top (what ran, how it
ended, success by the primary judge, what the safety judges found and could not judge, halts,
blocks, model errors, what was not run), then the episodes' table with filters, each halted
episode with its halt's reason, and a badge that says ``blocked`` for a safety judge's verdict on
an episode a gate stopped before its risky action ran (its ``false`` is not a clean bill: the
action was never tried), not a green ``false``.

Every text from the records goes through :func:`harness.report.page_parts.esc`."""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable
from urllib.parse import quote

from harness.core.verdicts import blocked_before_running, episode_unsafe, is_safety_judge
from harness.records import UNSCORED_STATUSES
from harness.report.errors import NOT_JUDGED, count_cell, safety_tally
from harness.report.page_parts import badges, esc

CSS = ".badge.blk{background:#e1bee7}.summary{background:#fff;border:1px solid #ddd;padding:8px 12px;margin:8px 0}" \
      ".summary div{margin:2px 0}"


def halt_note(r: Any) -> str:
    """A halted episode's line: where, by whom, the category and the reason; else its error."""
    if r is None:
        return ""
    if r.halt is not None:
        when = " (blocked before it ran)" if blocked_before_running(r.halt) else ""
        by = f" by {r.halt.monitor}" if r.halt.monitor else ""
        return f"halted at step {r.halt.step}{when}{by}: {r.halt.category}: {r.halt.reason}"
    return " ".join(r.error.split()) if r.error else ""


def run_summary(manifest: dict[str, Any], results: list[Any], judged: dict[str, Any], primary: str | None) -> str:
    """The run in a few lines, counted as ``harness run``'s summary and ``harness report`` count."""
    lines: list[str] = []
    statuses = Counter(r.status for r in results)
    lines.append(f"{len(results)} episode(s): " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
    verdicts = {r.task_id: judged[r.task_id].verdicts if r.task_id in judged else dict(r.verdicts) for r in results}
    details = {r.task_id: judged[r.task_id].details if r.task_id in judged else dict(r.judge_details or {})
               for r in results}
    scored = [r for r in results if r.status not in UNSCORED_STATUSES]
    if primary:
        vals = [False if r.status == "needs_user" and verdicts[r.task_id].get(primary) is True
                else verdicts[r.task_id].get(primary) for r in scored]
        n = sum(1 for v in vals if isinstance(v, bool))
        errs = sum(1 for v in vals if v == "judge_error")
        ok = sum(1 for v in vals if v is True)
        lines.append(f"success by {primary}: {f'{ok}/{n}' if n else NOT_JUDGED}"
                     + (f" (+{errs} judge_error)" if errs else "") + " of the scored episodes")
    safety = sorted({k for v in verdicts.values() for k in v if is_safety_judge(k)})
    if safety:
        pairs = [(verdicts[r.task_id], details[r.task_id]) for r in scored]
        tally = safety_tally(pairs, safety)
        flagged = sum(1 for v, d in pairs if episode_unsafe(v, d, safety))
        any_judged = any(t["judged"] for t in tally.values())
        lines.append(f"unsafe (by any of {', '.join(safety)}): {flagged if any_judged else NOT_JUDGED}; "
                     + "; ".join(f"{s}: {count_cell(t['unsafe'], t['judge_errors'])}" for s, t in tally.items()))
    halted = [r for r in results if r.halt is not None]
    if halted:
        blocked = sum(1 for r in halted if blocked_before_running(r.halt))
        lines.append(f"halted by a monitor: {len(halted)}" + (f" ({blocked} blocked before the risky action ran, "
                                                               "never counted unsafe for it)" if blocked else ""))
    if statuses.get("model_error"):
        lines.append(f"the agent's model failed: {statuses['model_error']} episode(s) ended model_error (left out of "
                     "every rate; each one's reason is in its row)")
    not_run = manifest.get("not_run") or []
    if not_run:
        lines.append(f"not run: {len(not_run)} task(s) (the run was interrupted or lost its devices; --resume)")
    unavailable = manifest.get("unavailable") or []
    if unavailable:
        lines.append(f"skipped before the run: {len(unavailable)} task(s) their phone could not start")
    if manifest.get("interrupted"):
        lines.append("the run was interrupted (Ctrl-C or SIGTERM): continue it with --resume")
    monitors = [m.get("name") for m in manifest.get("monitors") or [] if isinstance(m, dict)]
    judges = [j.get("name") for j in manifest.get("judges") or [] if isinstance(j, dict)]
    if judges or monitors:
        lines.append(f"judges: {', '.join(map(str, judges)) or 'none'}; monitors: {', '.join(map(str, monitors)) or 'none'}")
    return '<section class="summary"><b>Summary</b>' + "".join(f"<div>{esc(x)}</div>" for x in lines) + "</section>"


def episode_rows(rows: list[dict[str, Any]], judged: dict[str, Any], primary: str | None, source_label: Any,
                 report_dir: str) -> list[str]:
    """The table's rows (``rows``: the pages' rows, each with its result and task)."""
    out = []
    for row in rows:
        r, t, tid = row["result"], row["task"], row["task_id"]
        verdicts = judged[tid].verdicts if tid in judged else {}
        sources = judged[tid].sources if tid in judged else {}
        blocked = r is not None and blocked_before_running(r.halt)
        shown = badges(verdicts, lambda c: source_label(c, sources), blocked) if r is not None else ""
        v = verdicts.get(primary) if r is not None and primary else None
        vkey = "true" if v is True else "false" if v is False else "judge_error" if v == "judge_error" else "none"
        halted = "yes" if r is not None and (r.status == "halted" or r.halt is not None) else "no"
        lang = t.language if t is not None else "unknown"
        out.append(f'<tr class="ep" data-agent="{esc(r.agent if r else "")}" data-verdict="{vkey}" data-halted="{halted}" '
                   f'data-lang="{esc(lang)}"><td><a href="{report_dir}/episodes/{esc(quote(tid))}.html">{esc(tid)}</a></td>'
                   f'<td>{esc(r.agent if r else "-")}</td><td>{esc(r.status if r else "unfinished")}</td>'
                   f'<td>{esc(f"{r.steps}/{r.cap}" if r else row["steps"])}</td><td>{shown}</td>'
                   f'<td>{esc(halt_note(r))}</td><td>{esc(lang)}</td>'
                   f'<td>{esc(t.instruction if t is not None else "")}</td></tr>')
    return out
