"""What ``harness judge-eval --calibrate`` shows: the summary lines (terminal and page), the plot of
miss rate and false alarms against the threshold (a PNG drawn with Pillow), and the HTML page
``calibration.html`` that holds both with the file's numbers. Reads a calibration document and
scores only; every text from records (run names, model names, prompt ids) is escaped on the page.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from judges.calibration import below, describe_scorer

WIDTH, HEIGHT = 900, 560
LEFT, RIGHT, TOP, BOTTOM = 78, 30, 92, 64
MISS = (200, 55, 40)
FALSE_ALARM = (35, 95, 200)
THRESHOLD = (20, 130, 60)
GRID = (226, 226, 226)
INK = (40, 40, 40)


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def summary_lines(doc: dict[str, Any]) -> list[str]:
    """The calibration in a few sentences (the terminal summary and the page's head)."""
    t, n, k = doc["threshold"], doc["n_risky"], doc["rank"]
    prompts = ", ".join(f"{lang} {pid}" for lang, pid in doc["prompts"].items())
    return [
        f"{doc['monitor']} calibration at alpha {doc['alpha']:g}: threshold {t:g}, the {_ordinal(k)} smallest of "
        f"{n} risky steps' scores; a new risky step scores below it with probability at most {k}/{n + 1} = "
        f"{doc['bound']:.3f} (exchangeable steps; marginal, not per task)",
        f"with it a step halts when its score >= {t:g}; a reply without a score halts on its risky finding alone",
        f"on these steps: {doc['missed']} of {n} risky steps pass (miss rate {_rate(doc['miss_rate'])}); "
        f"{doc['false_alarms']} of {doc['n_safe']} safe steps halt (false alarms {_rate(doc['false_alarm_rate'])})",
        f"scored by {describe_scorer(doc['scorer'])}; prompts: {prompts}",
    ]


def left_out_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Steps not used, by reason: (how many, labelled risky / safe / unlabelled; why)."""
    out = []
    for reason, c in doc["steps"]["left_out"].items():
        out.append((", ".join(f"{c[k]} {k}" for k in ("risky", "safe", "unlabelled") if c.get(k)), reason))
    return out


def curve_rows(doc: dict[str, Any], every: int = 10) -> list[tuple[str, str, str]]:
    """(threshold, miss rate, false alarms) at 0, 0.1, ... 1 and at the calibrated threshold."""
    rows = [(f"{p['threshold']:.2f}", _rate(p["miss_rate"]), _rate(p["false_alarm_rate"]))
            for p in doc["curve"][::every]]
    rows.append((f"{doc['threshold']:g} (calibrated)", _rate(doc["miss_rate"]), _rate(doc["false_alarm_rate"])))
    return rows


# --------------------------------------------------------------------------- the plot


def _font(size: int) -> Any:
    try:
        return ImageFont.load_default(size)
    except TypeError:  # pragma: no cover - Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def _dashed(d: ImageDraw.ImageDraw, a: tuple[float, float], b: tuple[float, float], fill: Any, dash: int = 7) -> None:
    (x0, y0), (x1, y1) = a, b
    length = max(abs(x1 - x0), abs(y1 - y0))
    steps = max(1, int(length // dash))
    for i in range(0, steps, 2):
        f0, f1 = i / steps, min(1.0, (i + 1) / steps)
        d.line([(x0 + (x1 - x0) * f0, y0 + (y1 - y0) * f0), (x0 + (x1 - x0) * f1, y0 + (y1 - y0) * f1)],
               fill=fill, width=2)


def plot_png(risky: Sequence[float], safe: Sequence[float], threshold: float, alpha: float, title: str) -> bytes:
    """Miss rate (risky steps scoring below t) and false alarms (safe steps at or above t) against
    the threshold t, exact at the plot's resolution, with alpha and the calibrated threshold."""
    r, s = sorted(risky), sorted(safe)
    img = Image.new("RGB", (WIDTH, HEIGHT), "white")
    d = ImageDraw.Draw(img)
    f, small = _font(15), _font(13)
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP
    w, h = x1 - x0, y0 - y1

    def px(t: float) -> float:
        return x0 + t * w

    def py(v: float) -> float:
        return y0 - v * h

    for i in range(11):
        v = i / 10
        d.line([(px(v), y0), (px(v), y1)], fill=GRID)
        d.line([(x0, py(v)), (x1, py(v))], fill=GRID)
        if i % 2 == 0:
            d.text((px(v), y0 + 8), f"{v:.1f}", fill=INK, font=small, anchor="ma")
            d.text((x0 - 8, py(v)), f"{v:.1f}", fill=INK, font=small, anchor="rm")
    d.rectangle([x0, y1, x1, y0], outline=INK)
    d.text(((x0 + x1) / 2, HEIGHT - 22), "threshold (a step halts when its score >= threshold)", fill=INK, font=f,
           anchor="mm")
    d.text((16, (y0 + y1) / 2), "rate", fill=INK, font=f, anchor="lm")
    for sorted_scores, colour, fn in ((r, MISS, lambda t: below(r, t) / len(r)),
                                      (s, FALSE_ALARM, lambda t: (len(s) - below(s, t)) / len(s))):
        if not sorted_scores:
            continue
        pts = [(float(x), py(fn((x - x0) / w))) for x in range(x0, x1 + 1)]
        d.line(pts, fill=colour, width=3)
    _dashed(d, (x0, py(alpha)), (x1, py(alpha)), (120, 120, 120))
    d.text((x1 - 6, py(alpha) - 4), f"alpha = {alpha:g}", fill=(90, 90, 90), font=small, anchor="rb")
    d.line([(px(threshold), y0), (px(threshold), y1)], fill=THRESHOLD, width=2)
    right = threshold < 0.6
    d.text((px(threshold) + (6 if right else -6), y1 + 6), f"threshold {threshold:.4g}", fill=THRESHOLD, font=small,
           anchor="la" if right else "ra")
    d.text((WIDTH / 2, 16), title, fill=INK, font=f, anchor="ma")
    lx = x0
    for colour, text in ((MISS, f"miss rate: risky steps that pass ({len(r)} risky)"),
                         (FALSE_ALARM, f"false alarms: safe steps that halt ({len(s)} safe)")):
        d.line([(lx, 56), (lx + 28, 56)], fill=colour, width=3)
        d.text((lx + 36, 56), text, fill=INK, font=small, anchor="lm")
        lx += 390
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


# --------------------------------------------------------------------------- the page


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    e = html.escape
    out = ["<table><thead><tr>", *(f"<th>{e(str(h))}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def calibration_html(doc: dict[str, Any], png: bytes) -> str:
    """``calibration.html``: the summary, the plot (inline), the curve, what was left out, the runs."""
    e = html.escape
    labels = doc["labels"]
    facts = [("threshold", doc["threshold"]), ("alpha", doc["alpha"]), ("rank k = floor(alpha (n + 1))", doc["rank"]),
             ("risky steps n", doc["n_risky"]), ("safe steps", doc["n_safe"]),
             ("bound k / (n + 1)", f"{doc['bound']:.4f}"), ("risky steps alpha needs", doc["risky_needed"]),
             ("miss rate on these steps", _rate(doc["miss_rate"])),
             ("false alarms on these steps", _rate(doc["false_alarm_rate"])),
             ("scorer", describe_scorer(doc["scorer"])),
             *((f"{lang} prompt", pid) for lang, pid in doc["prompts"].items()),
             ("labels", labels.get("path") or labels.get("from")), ("labels sha256", labels.get("sha256") or "-"),
             ("created", doc.get("created_at") or "-")]
    runs = [(r["run"], r["path"], r["episodes"], r["steps"],
             ", ".join(f"{k}: {v}" for k, v in r["used"].items()) or "none") for r in doc["runs"]]
    parts = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>{e(doc['monitor'])} calibration</title><style>",
             "body{font-family:system-ui,sans-serif;margin:2em;max-width:960px;color:#222}",
             "table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;"
             "text-align:left}th{background:#f3f3f3}img{max-width:100%;border:1px solid #ddd}",
             "</style></head><body>",
             f"<h1>{e(doc['monitor'])} calibration: threshold {doc['threshold']:g} at alpha {doc['alpha']:g}</h1>",
             *(f"<p>{e(line)}</p>" for line in summary_lines(doc)),
             "<img alt=\"miss rate and false alarms against the threshold\" src=\"data:image/png;base64,"
             + base64.b64encode(png).decode("ascii") + "\">",
             "<h2>The calibration</h2>", _table(["", "value"], facts),
             "<h2>Miss rate and false alarms by threshold</h2>",
             _table(["threshold", "miss rate", "false alarms"], curve_rows(doc)),
             "<h2>Steps left out</h2>",
             _table(["steps", "why"], left_out_rows(doc)) if doc["steps"]["left_out"] else "<p>none</p>",
             "<h2>Runs</h2>", _table(["run", "path", "episodes", "steps", "scores used, by source"], runs),
             "</body></html>\n"]
    return "".join(parts)
