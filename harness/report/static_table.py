"""The cross-scorer table of ``harness static score``: every profile's figures side by side, the
scored and skipped counts, what each profile's scorer is known for, and the large-box warning; as
Markdown (printed) or as a standalone HTML page (no script; every text escaped)."""

from __future__ import annotations

import html
from typing import Any, Callable

from harness.report.static.profiles import PROFILE_MAP
from harness.report.static_eval import LARGE_BOX, StaticReport
from harness.report.table_formats import _HTML_CSP, _html_table

FORMATS = ("md", "json", "html")

HEAD = ["profile", "scored", "skipped", "episodes", "step acc (AMS)", "type", "SR", "progress", "Acc", "TaskSucc",
        "TailSucc", "AvgErr", "Err/step", "ANLS", "format err", "missing", "large-box steps", "AMS w/o large"]


def _f(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def _row(r: StaticReport) -> list[str]:
    s, m, lb = r.summary, r.summary["mobile_r1"], r.summary["large_boxes"]
    return [_f(v) for v in (r.profile, s["scored"], s["skipped"], s["episodes"], s["ams"], s["type_match"], s["sr"],
                            s["progress"], m["acc"], m["task_succ"], m["tail_succ"], m["avg_err"], m["err_per_step"],
                            s["text_anls"], s["format_errors"], s["missing"], lb["steps"], lb["ams_without"])]


def _type_rows(reports: list[StaticReport]) -> tuple[list[str], list[list[str]]]:
    types = sorted({t for r in reports for t in r.summary["by_type"]})
    head = ["action (steps)"] + [f"{r.profile} type / AMS" for r in reports]
    rows = []
    for t in types:
        n = max(r.summary["by_type"].get(t, {}).get("steps", 0) for r in reports)
        cells = [f"{t} ({n})"]
        for r in reports:
            d = r.summary["by_type"].get(t)
            cells.append(f"{_f(d['type_match'])} / {_f(d['ams'])} ({d['steps']})" if d else "skipped")
        rows.append(cells)
    return head, rows


def profile_notes(reports: list[StaticReport]) -> list[tuple[str, str, str]]:
    """(profile, what its scorer is known for, source) for each report's profile."""
    return [(r.profile, PROFILE_MAP[r.profile].known_for, PROFILE_MAP[r.profile].source) for r in reports]


def large_box_note(reports: list[StaticReport]) -> str | None:
    if not reports:
        return None
    lb = max((r.summary["large_boxes"] for r in reports), key=lambda d: d["click_steps"])
    if not lb["steps"]:
        return None
    return (f"Large boxes: {lb['steps']} of {lb['click_steps']} click/long-press steps have a candidate box covering at "
            f"least {LARGE_BOX:.0%} of the screen; a rule that accepts any point inside a candidate box accepts nearly "
            "any tap there. 'AMS w/o large' is the step accuracy without those steps.")


def skipped_notes(reports: list[StaticReport]) -> list[str]:
    notes = [f"{r.profile}: {n} skipped ({reason})" for r in reports
             for reason, n in r.summary["skipped_by_reason"].items()]
    return notes + [f"{r.profile}: {r.summary['finish_unread']} finish-step predictions not read (its scorer adds "
                    "no finish step)" for r in reports if r.summary.get("finish_unread")]


def format_md(reports: list[StaticReport]) -> str:
    def table(head: list[str], rows: list[list[str]]) -> list[str]:
        esc: Callable[[str], str] = lambda c: c.replace("|", "\\|")
        return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                + ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows])

    lines = table(HEAD, [_row(r) for r in reports])
    if not reports:
        return "\n".join(lines)
    lines += ["", "What each profile's scorer is known for (source):"]
    lines += [f"- {name}: {note} ({src})" for name, note, src in profile_notes(reports)]
    note = large_box_note(reports)
    if note:
        lines += ["", note]
    skipped = skipped_notes(reports)
    if skipped:
        lines += ["", "Skipped steps (neither right nor wrong):"] + [f"- {s}" for s in skipped]
    lines.append("")
    lines += table(*_type_rows(reports))
    return "\n".join(lines)


def format_html(reports: list[StaticReport], title: str = "Static evaluation") -> str:
    """A standalone page (no script, no external resource); every text is escaped."""
    e = html.escape
    parts = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<meta http-equiv=\"Content-Security-Policy\" content=\"{e(_HTML_CSP)}\">",
             f"<title>{e(title)}</title>",
             "<style>body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;margin:1em 0}"
             "th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}th{background:#f3f3f3}</style></head><body>",
             f"<h1>{e(title)}</h1>",
             "<p>One row per profile: each reproduces one published scorer. Figures are over the steps the "
             "profile scores; skipped steps are neither right nor wrong.</p>",
             _html_table(HEAD, [_row(r) for r in reports])]
    if reports:
        parts.append("<h2>What each profile's scorer is known for</h2>"
                     + _html_table(["profile", "known for", "source"], [list(t) for t in profile_notes(reports)]))
        note = large_box_note(reports)
        if note:
            parts.append(f"<p><strong>{e(note)}</strong></p>")
        skipped = skipped_notes(reports)
        if skipped:
            parts.append("<h2>Skipped steps</h2><ul>" + "".join(f"<li>{e(s)}</li>" for s in skipped) + "</ul>")
        parts.append("<h2>By action type</h2>" + _html_table(*_type_rows(reports)))
    parts.append("</body></html>\n")
    return "".join(parts)


def format_json(reports: list[StaticReport]) -> str:
    import json

    out = []
    for r in reports:
        p = PROFILE_MAP[r.profile]
        out.append({**r.to_json(), "known_for": p.known_for, "source": p.source})
    return json.dumps(out, ensure_ascii=False, indent=1)


FORMATTERS: dict[str, Callable[[list[StaticReport]], str]] = {"md": format_md, "json": format_json, "html": format_html}


def render(reports: list[StaticReport], fmt: str) -> str:
    return FORMATTERS[fmt](reports)
