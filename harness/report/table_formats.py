"""``harness report``'s tables written out: Markdown, CSV, JSON and a standalone HTML page
(:func:`render`), from a :class:`harness.report.tables.Report`. Model text is escaped in every
format (Markdown cells, HTML)."""

from __future__ import annotations

import csv
import html
import io
import json
import math
from typing import Any

from harness.core.verdicts import LIVE
from harness.report import errors, guarded, handovers, repeats
from harness.report.episodes import ReportError
from harness.report.tables import Report

FORMATS = ("md", "csv", "json", "html")


# --------------------------------------------------------------------------- formatting


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _sr_cell(r: dict[str, Any]) -> str:
    if not r["n"]:
        return "-"
    cell = f"{_pct(r['rate'])} [{_pct(r['low'])}-{_pct(r['high'])}] ({r['k']}/{r['n']})"
    if r.get("judge_errors"):
        cell += f" +{r['judge_errors']} err"
    return cell


def _columns(rep: Report) -> list[tuple[str, Any]]:
    """(header, cell function) for the main table; judge-dependent columns only where data exists."""
    cols: list[tuple[str, Any]] = [(k, (lambda g, k=k: str(g["key"][k]))) for k in rep.by]
    cols.append(("episodes", lambda g: str(g["episodes"])))
    for j in rep.judges:
        cols.append((f"SR {j} % [95% CI]", lambda g, j=j: _sr_cell(g["sr"][j])))
    for src in rep.milestone_sources:
        if any(g.get(f"atp_{src}_n") for g in rep.groups):
            tag = "" if src == "oracle" else f" ({src})"
            cols.append((f"ATP{tag} %", lambda g, s=src: _pct(g[f"atp_{s}"]) + (
                f" +{g[f'atp_{s}_errors']} err" if g.get(f"atp_{s}_errors") else "")))
            cols.append((f"MSR{tag}", lambda g, s=src: _num(g[f"msr_{s}"])))
    if any(g["tail_succ"]["n"] for g in rep.groups):
        cols.append(("Task Succ %", lambda g: f"{_pct(g['task_succ']['rate'])} ({g['task_succ']['k']}/{g['task_succ']['n']})"
                     if g["task_succ"]["n"] else "-"))
        cols.append(("Tail Succ %", lambda g: f"{_pct(g['tail_succ']['rate'])} ({g['tail_succ']['k']}/{g['tail_succ']['n']})"
                     if g["tail_succ"]["n"] else "-"))
    if any(g.get("monitor_checks") for g in rep.groups):
        cols.append(("monitor errors", lambda g: str(g["monitor_errors"]) + (
            f" ({g['ran_unchecked']} ran unchecked)" if g.get("ran_unchecked") else "")))
        cols.append(("flags", lambda g: str(g["monitor_flags"])))
    if any(g.get("operator_asked") for g in rep.groups):
        cols.append(("operator allow/deny (timeouts), wait", lambda g: (
            f"{g['operator_allowed']}/{g['operator_denied']} ({g['operator_timed_out']}), {g['operator_wait_s']:.1f} s"
            if g["operator_asked"] else "-")))
    if any(g.get("reflections") for g in rep.groups):
        cols.append(("reflections (episodes)", lambda g: f"{g['reflections']} ({g['reflected_episodes']})"))
        cols.append(("unsafe tasks safe after one", lambda g: f"{g['unsafe_safe_after_reflection']}/"
                     f"{g['reflected_unsafe_judged']}" if g["reflected_unsafe_judged"] else "-"))
    cols += [*handovers.columns(rep.groups), *guarded.columns(rep.groups),
        ("halted", lambda g: str(g["halted"]) + (f" ({g['blocked']} blocked)" if g.get("blocked") else "")),
        *errors.columns(rep.safety),
        ("steps/cap", lambda g: f"{_num(g['steps_mean'], 1)}/{_num(g['cap_mean'], 1)}"),
        ("at cap", lambda g: str(g["step_limit"])),
        ("agent err", lambda g: str(g["agent_errors"])),
        *([("model err", lambda g: str(g["model_errors"]))] if any(g.get("model_errors") for g in rep.groups) else []),
        ("infra err", lambda g: str(g["infra_errors"])),
        *([("task err", lambda g: str(g["task_errors"]))] if any(g.get("task_errors") for g in rep.groups) else []),
        ("tokens/ep", lambda g: _num(g["tokens_mean"], 0)),
        ("wall s/ep", lambda g: _num(g["wall_mean_s"], 1)),
    ]
    return cols


def _paired_rows(rep: Report) -> tuple[list[str], list[list[str]]]:
    head = [*[k for k in rep.by if k != "agent"], "agent A", "agent B", "tasks", "SR A %", "SR B %", "only A", "only B",
            "McNemar p (exact)", "mid-p", "bootstrap 95% CI of SR A-B (pp)"]
    rows = []
    for p in rep.paired:
        rows.append([*[str(p["group"][k]) for k in rep.by if k != "agent"], p["agent_a"], p["agent_b"], str(p["n"]),
                     _pct(p["sr_a"]), _pct(p["sr_b"]), str(p["only_a"]), str(p["only_b"]), _num(p["p_exact"], 4),
                     _num(p["p_midp"], 4), f"[{_num(100 * p['boot_low'], 1)}, {_num(100 * p['boot_high'], 1)}]"])
    return head, rows


def _agreement_rows(rep: Report) -> tuple[list[str], list[list[str]]]:
    head = ["judge", "reference", "episodes", "agree %", "precision", "recall", "F1", "kappa", "TP/FP/FN/TN"]
    rows = [[a["judge"], a["reference"], str(a["n"]), _pct(a["agree"]), _num(a["precision"]), _num(a["recall"]),
             _num(a["f1"]), _num(a["kappa"]), f"{a['tp']}/{a['fp']}/{a['fn']}/{a['tn']}"] for a in rep.agreement]
    return head, rows


def _sources_note(rep: Report) -> str | None:
    """One sentence naming the offline judgement sets and which columns come from them."""
    if not rep.judgement_sets:
        return None
    offline = [f"{c} ({s})" if "@" not in c else c for c, s in rep.judge_sources.items() if s != LIVE]
    return (f"Offline judgement set(s) included: {', '.join(rep.judgement_sets)} (RUN/judgements/SET/results.jsonl). "
            f"Offline verdict columns: {', '.join(offline)}; a judge name given by more than one source is shown "
            "once per source as name@live / name@SET.")


def _md_text(s: str) -> str:
    """Markdown viewers render raw HTML: agent names, paths and warnings are shown as text."""
    return html.escape(s, quote=False)


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    def esc(s: str) -> str:
        return _md_text(s).replace("|", "\\|").replace("\n", " ")

    return ["| " + " | ".join(esc(h) for h in head) + " |", "|" + "---|" * len(head),
            *["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]]


def format_md(rep: Report) -> str:
    cols = _columns(rep)
    lines = [f"# Report: {_md_text(', '.join(rep.runs))}", ""]
    if rep.primary:
        lines.append(f"Primary judge (Task/Tail success, paired tests): {rep.primary}. Infrastructure errors, task "
                     "errors (an app missing on the phone) and model errors (the agent's endpoint failed) are excluded "
                     "from every rate; SR cells read rate [95% Wilson CI] (successes/judged); a safety count of — "
                     "means that judge judged none of the episodes (its errors are beside it).")
        lines.append("")
    note = _sources_note(rep)
    if note:
        lines += [_md_text(note), ""]
    lines += _md_table([h for h, _ in cols], [[f(g) for _, f in cols] for g in rep.groups])
    if rep.paired:
        lines += ["", "## Paired comparisons (same tasks)", ""]
        lines += _md_table(*_paired_rows(rep))
    if rep.repeats:
        lines += repeats.section_md(rep.repeats, _md_table, _md_text)
    if rep.agreement:
        lines += ["", "## Judge agreement (details: `harness judge-eval`)", ""]
        lines += _md_table(*_agreement_rows(rep))
    if rep.model_errors:
        lines += ["", "## Not played: the agent's model failed (model_error, left out of every rate)", ""]
        lines += [f"- {_md_text(x)}" for x in errors.model_error_lines(rep.model_errors)]
    if rep.warnings:
        lines += ["", "## Warnings", ""] + [f"- {_md_text(w)}" for w in rep.warnings]
    return "\n".join(lines) + "\n"


def csv_rows(rep: Report) -> tuple[list[str], list[list[Any]]]:
    head = [*rep.by, "episodes", "infra_errors", "task_errors", "scored"]
    for j in rep.judges:
        head += [f"sr_{j}", f"sr_{j}_low", f"sr_{j}_high", f"sr_{j}_k", f"sr_{j}_n", f"judge_errors_{j}"]
    for src in rep.milestone_sources:
        head += [f"atp_{src}", f"msr_{src}", f"atp_{src}_errors"]
    head += ["task_succ", "tail_succ", "ref_episodes", "halted", "blocked", "unsafe", "agent_errors", "step_limit", "steps_mean",
             "cap_mean", "tokens_total", "tokens_mean", "wall_total_s", "wall_mean_s", "monitor_checks",
             "monitor_errors", "ran_unchecked", "monitor_flags", "operator_asked", "operator_allowed",
             "operator_denied", "operator_timed_out", "operator_wait_s", "reflections", "reflected_episodes",
             "reflected_unsafe_judged", "unsafe_safe_after_reflection", *handovers.CSV_KEYS,
             *guarded.CSV_KEYS, *errors.csv_head(rep.safety)]
    rows = []
    for g in rep.groups:
        row: list[Any] = [g["key"][k] for k in rep.by] + [g["episodes"], g["infra_errors"], g["task_errors"], g["scored"]]
        for j in rep.judges:
            s = g["sr"][j]
            row += [s["rate"], s["low"], s["high"], s["k"], s["n"], s["judge_errors"]]
        for src in rep.milestone_sources:
            row += [g.get(f"atp_{src}"), g.get(f"msr_{src}"), g.get(f"atp_{src}_errors")]
        row += [g["task_succ"]["rate"], g["tail_succ"]["rate"], g["tail_succ"]["n"], g["halted"], g["blocked"], g["unsafe"],
                g["agent_errors"], g["step_limit"], g["steps_mean"], g["cap_mean"], g["tokens_total"], g["tokens_mean"],
                g["wall_total_s"], g["wall_mean_s"], g["monitor_checks"], g["monitor_errors"], g["ran_unchecked"],
                g["monitor_flags"], g["operator_asked"], g["operator_allowed"], g["operator_denied"],
                g["operator_timed_out"], g["operator_wait_s"], g["reflections"], g["reflected_episodes"],
                g["reflected_unsafe_judged"], g["unsafe_safe_after_reflection"], *[g[k] for k in handovers.CSV_KEYS],
                *[g[k] for k in guarded.CSV_KEYS], *errors.csv_row(g, rep.safety)]
        rows.append(row)
    return head, rows


def format_csv(rep: Report) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    head, rows = csv_rows(rep)
    w.writerow(head)
    for r in rows:
        w.writerow(["" if v is None else (round(v, 6) if isinstance(v, float) else v) for v in r])
    return buf.getvalue()


def format_json(rep: Report) -> str:
    def clean(o: Any) -> Any:
        if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, list):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(rep.to_json()), ensure_ascii=False, indent=1) + "\n"


_HTML_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; script-src 'none'; base-uri 'none'; form-action 'none'"


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    e = html.escape
    out = ["<table><thead><tr>", *[f"<th>{e(h)}</th>" for h in head], "</tr></thead><tbody>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def format_html(rep: Report) -> str:
    """A standalone page (no script, no external resource); every text is escaped."""
    e = html.escape
    cols = _columns(rep)
    parts = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<meta http-equiv=\"Content-Security-Policy\" content=\"{e(_HTML_CSP)}\">",
             f"<title>{e('Report: ' + ', '.join(rep.runs))}</title>",
             "<style>body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;margin:1em 0}"
             "th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}th{background:#f3f3f3}</style></head><body>",
             f"<h1>{e('Report: ' + ', '.join(rep.runs))}</h1>"]
    if rep.primary:
        parts.append(f"<p>Primary judge: {e(rep.primary)}. Infrastructure errors, task errors (an app missing on "
                     "the phone) and model errors (the agent's endpoint failed) are excluded from every rate; "
                     "SR cells read rate [95% Wilson CI] (successes/judged); a safety count of — means that judge "
                     "judged none of the episodes (its errors are beside it).</p>")
    note = _sources_note(rep)
    if note:
        parts.append(f"<p>{e(note)}</p>")
    parts.append(_html_table([h for h, _ in cols], [[f(g) for _, f in cols] for g in rep.groups]))
    if rep.paired:
        parts.append("<h2>Paired comparisons (same tasks)</h2>" + _html_table(*_paired_rows(rep)))
    if rep.repeats:
        parts.append(repeats.section_html(rep.repeats, _html_table, e))
    if rep.agreement:
        parts.append("<h2>Judge agreement</h2><p>Details: <code>harness judge-eval</code>.</p>"
                     + _html_table(*_agreement_rows(rep)))
    if rep.model_errors:
        parts.append("<h2>Not played: the agent's model failed (model_error, left out of every rate)</h2><ul>"
                     + "".join(f"<li>{e(x)}</li>" for x in errors.model_error_lines(rep.model_errors)) + "</ul>")
    if rep.warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{e(w)}</li>" for w in rep.warnings) + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)


FORMATTERS = {"md": format_md, "csv": format_csv, "json": format_json, "html": format_html}


def render(rep: Report, fmt: str) -> str:
    if fmt not in FORMATTERS:
        raise ReportError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return FORMATTERS[fmt](rep)
