"""The table and the lines ``harness run`` prints when a run ends (read back from its records)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness.core.usage import role_tokens_sum
from harness.core.verdicts import judge_errors
from harness.records import UNSCORED_STATUSES, RecordError
from harness.report.handovers import summary_line as handover_line
from harness.run.suite import SuiteReport


def print_summary(out: str, report: SuiteReport, file: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from harness.records import read_results
    from harness.core.verdicts import blocked_before_running, episode_unsafe, is_safety_judge

    console = Console(file=file or sys.stdout, width=140)
    rows = read_results(out)
    table = Table(title=f"{len(rows)} episodes in {out}")
    judges = sorted({k for r in rows for k in r.verdicts})
    for col in ("task", "agent", "status", "steps/cap", *judges, "halt/error"):
        table.add_column(col, overflow="fold")
    for r in sorted(rows, key=lambda r: r.task_id):
        note = ""
        if r.halt:
            note = f"halted at step {r.halt.step}: {r.halt.category}"  # the reason is printed in full below
        elif r.error:
            note = r.error[:60]
        table.add_row(escape(r.task_id), escape(r.agent), r.status, f"{r.steps}/{r.cap}",
                      *[str(r.verdicts.get(j, "-")) for j in judges], escape(note))  # model text is not markup
    console.print(table)
    for r in sorted((r for r in rows if r.halt is not None), key=lambda r: r.task_id):
        ran = (r.halt.model_extra or {}).get("executed")
        when = " (blocked before it ran)" if ran is False else " (after it ran)" if ran else ""
        op = (r.halt.model_extra or {}).get("operator")
        who = f"; the operator was asked: {op.get('decision')} by {op.get('by')}" if isinstance(op, dict) else ""
        if isinstance(told := (r.halt.model_extra or {}).get("after_reflections"), int):
            who += f"; proposed again after {told} reflection(s)"
        console.print(f"halted: {r.task_id} at step {r.halt.step}{when} by {r.halt.monitor or 'a monitor'}: "
                      f"{r.halt.category}: {r.halt.reason}{who}", markup=False, highlight=False)
    for task_id, judge, why in judge_errors(rows):
        console.print(f"[red]{escape(judge)}[/red] judge_error on {escape(task_id)}: {escape(why)}", highlight=False)
    used = [r.usage for r in rows if isinstance(r.usage, dict) and r.usage.get("calls")]
    if used:
        parts = [(name, role_tokens_sum(used, roles, exclude)) for name, roles, exclude in
                 (("agent", ("agent",), ()), ("judges", None, ("agent", "monitor:")), ("monitors", ("monitor:",), ()))]
        failed_calls = sum(u.get("failed", 0) for u in used)
        shown = [f"{name} {n:,}" for name, n in parts if n] + ([f"{failed_calls} failed"] if failed_calls else [])
        console.print(f"model usage: {sum(u.get('total_tokens', 0) for u in used):,} tokens in "
                      f"{sum(u.get('calls', 0) for u in used)} calls" + (f" ({', '.join(shown)})" if shown else ""))
    checks = [r.model_extra.get("monitor_checks") or {} for r in rows if r.model_extra]
    made = sum(c.get("made", 0) for c in checks)
    if made:
        failed, unchecked = sum(c.get("failed", 0) for c in checks), sum(c.get("ran_unchecked", 0) for c in checks)
        line = f"monitor checks: {made}, flagged: {sum(c.get('flagged', 0) for c in checks)}, failed: {failed}"
        if unchecked:
            line += f"; [yellow]{unchecked} action(s) ran unchecked (--monitor-on-error allow)[/yellow]"
        console.print(line)
    asked = [a for r in rows if r.model_extra and isinstance(a := r.model_extra.get("operator"), dict)]
    if asked:
        n = {k: sum(int(a.get(k) or 0) for a in asked) for k in ("asked", "allowed", "denied", "timed_out")}
        console.print(f"operator: asked {n['asked']}, allowed {n['allowed']}, denied {n['denied']} "
                      f"({n['timed_out']} with no answer in time), waited {sum(float(a.get('wait_s') or 0) for a in asked):.1f} s")
    if any(r.model_extra and r.model_extra.get("reflections") for r in rows):  # counted as `harness report` counts them
        from harness.report.episodes import load_episodes
        from harness.report.tables import reflection_counts

        scored_eps = [e for e in load_episodes([out], offline=False) if e.status not in UNSCORED_STATUSES]
        c = reflection_counts(scored_eps, [j for j in judges if is_safety_judge(j)])
        console.print(f"reflections: {c['reflections']} in {c['reflected_episodes']} episode(s) (told why, the agent "
                      "proposed again)" + (f"; unsafe tasks finished safely after one: {c['unsafe_safe_after_reflection']}"
                                           f"/{c['reflected_unsafe_judged']}" if c["reflected_unsafe_judged"] else ""))
    if line := handover_line(rows):  # apart from failures: the agent asked for a person
        console.print(line, markup=False, highlight=False)
    ok = sum(1 for r in rows if r.verdicts.get("oracle") is True and r.status != "needs_user")
    scored = [r for r in rows if r.status not in UNSCORED_STATUSES and r.verdicts.get("oracle") in (True, False)]
    infra = sum(1 for r in rows if r.status == "infra_error")
    task_errors = sum(1 for r in rows if r.status == "task_error")
    if scored:
        console.print(f"oracle success: {ok}/{len(scored)} scored episodes ({infra} infra errors"
                      + (f", {task_errors} task errors" if task_errors else "") + " excluded)")
    safety = [j for j in judges if is_safety_judge(j)]
    blocked = sum(1 for r in rows if r.status not in UNSCORED_STATUSES and blocked_before_running(r.halt))
    if safety:  # counted as `harness report` counts them (harness.core.verdicts.counts_unsafe), infra errors left out
        flagged = sum(1 for r in rows if r.status not in UNSCORED_STATUSES
                      and episode_unsafe(r.verdicts, r.judge_details, safety))
        console.print(f"unsafe episodes flagged: {flagged} (by any of {', '.join(safety)})")
    if blocked:  # the rule for blocked actions: an action that never ran does not make its episode unsafe
        console.print(f"blocked before they ran: {blocked} episode(s) halted by a gate (not counted unsafe for it)")
    if report.not_run:
        console.print(f"[yellow]not run: {len(report.not_run)} task(s); continue with --resume[/yellow]")
    from harness.records import read_manifest

    try:
        unavailable = read_manifest(out).get("unavailable") or []
    except (OSError, RecordError):
        unavailable = []
    if unavailable:
        console.print(f"[yellow]skipped, not runnable on these devices: {len(unavailable)} task(s)[/yellow] "
                      f"({escape(', '.join(u['task'] for u in unavailable))}; the reasons are above and in the manifest's "
                      "`unavailable`)", highlight=False)
    console.print(f"records: {Path(out).resolve()}")
