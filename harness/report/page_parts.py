"""What the pages of a run draw alike, the trajectory viewer (:mod:`harness.report.viewer`), the
live page (:mod:`harness.live`) and the compare pages (:mod:`harness.report.compare_page`): the
Content-Security-Policy they are served under, HTML escaping of record text, a recorded action as
one line, the SVG drawn over a screenshot to show it, verdict badges and a step's monitor verdict.
Everything here takes untrusted record text and returns markup with that text escaped.
"""

from __future__ import annotations

import html
import json
from typing import Any, Callable

from harness.core.verdicts import is_safety_judge

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'; object-src 'none'")


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def action_overlay(action: dict[str, Any] | None, size: tuple[int, int]) -> str:
    """An SVG drawn over the screenshot (thumbnail and full size alike: it is in the image's own
    pixels): tap marker, swipe arrow, typed text or a label. Marks are sized from the image's
    shorter side and drawn red over a white halo and a dark rim, so they show on any background."""
    if not action:
        return ""
    w, h = size
    side = max(1, min(w, h))
    r = max(12, side // 28)
    stroke = max(3, side // 200)
    font = max(28, w // 22)
    kind = action.get("type")
    parts = []

    def num(v: Any) -> float:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0

    def label(text: str) -> str:
        y = font + 20
        return (f'<rect x="10" y="10" width="{w - 20}" height="{font + 24}" rx="8" fill="#000" fill-opacity="0.65"/>'
                f'<text x="24" y="{y}" font-size="{font}" fill="#fff" font-family="sans-serif">{esc(text[:80])}</text>')

    if kind in ("click", "long_press", "double_tap"):
        x, y = num(action.get("x")), num(action.get("y"))
        halo = (f'<circle cx="{x}" cy="{y}" r="{r}" fill="none" stroke="#fff" stroke-width="{stroke * 3}"/>'
                f'<circle cx="{x}" cy="{y}" r="{r}" fill="none" stroke="#000" stroke-opacity="0.7" stroke-width="{stroke * 2}"/>')
        parts.append(halo)
        parts.append(f'<circle class="mark" cx="{x}" cy="{y}" r="{r}" fill="#ff1744" fill-opacity="0.3" stroke="#ff1744" stroke-width="{stroke}"/>')
        parts.append(f'<circle cx="{x}" cy="{y}" r="{stroke * 1.5}" fill="#ff1744" stroke="#fff" stroke-width="{max(1, stroke // 2)}"/>')
        if kind == "long_press":
            parts.append(f'<circle cx="{x}" cy="{y}" r="{r * 1.8}" fill="none" stroke="#ff1744" stroke-width="{stroke}" stroke-dasharray="{stroke * 3}"/>')
        if kind == "double_tap":
            parts.append(f'<circle cx="{x}" cy="{y}" r="{r * 1.5}" fill="none" stroke="#ff1744" stroke-width="{stroke}"/>')
    elif kind == "swipe":
        (x1, y1), (x2, y2) = [(num(p[0]), num(p[1])) if isinstance(p, (list, tuple)) and len(p) == 2 else (0.0, 0.0)
                              for p in (action.get("start"), action.get("end"))]
        parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#fff" stroke-width="{stroke * 4}"/>')
        parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#2979ff" stroke-width="{stroke * 2}" marker-end="url(#arrow)"/>')
        parts.append(f'<circle cx="{x1}" cy="{y1}" r="{r * 0.6}" fill="#2979ff" fill-opacity="0.6"/>')
    elif kind == "type":
        parts.append(label("⌨ " + str(action.get("text", ""))))
    elif kind == "key":
        parts.append(label(f"key: {action.get('key')}"))
    elif kind == "open_app":
        parts.append(label(f"open: {action.get('app')}"))
    elif kind == "wait":
        parts.append(label(f"wait {action.get('seconds')} s"))
    elif kind == "answer":
        parts.append(label(f"answer: {action.get('text')}"))
    elif kind == "finish":
        parts.append(label(f"finish ({action.get('status')})"))
    else:
        return ""
    defs = (f'<defs><marker id="arrow" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="4" markerHeight="4" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#2979ff"/></marker></defs>')
    return (f'<svg viewBox="0 0 {w} {h}" preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg" '
            f'aria-hidden="true">{defs}{"".join(parts)}</svg>')


def describe_action(action: dict[str, Any] | None) -> str:
    """A recorded action as one line, ``kind(key=value, ...)``, its values as JSON."""
    if not action:
        return "(no valid action)"
    kind = action.get("type", "?")
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in action.items() if k != "type")
    return f"{kind}({args})"


BLOCKED = "blocked"  # a safety judge's false on an episode a gate stopped before its risky action ran


def verdict_class(v: Any) -> str:
    return "yes" if v is True else "no" if v is False else "err"


def verdict_word(v: Any) -> str:
    return "true" if v is True else "false" if v is False else str(v)


def badges(verdicts: dict[str, Any], label: Callable[[str], str] | None = None, blocked: bool = False) -> str:
    """Verdict badges; ``label(name)`` is the text shown for a verdict column (default the name). A
    safety judge's true means unsafe (shown as bad); on a ``blocked`` episode its false says
    ``blocked``: the risky action never ran, so nothing was judged safe."""

    def shown(k: str, v: Any) -> tuple[str, str]:
        if is_safety_judge(k) and isinstance(v, bool):
            if blocked and v is False:
                return "blk", BLOCKED
            return verdict_class(not v), verdict_word(v)
        return verdict_class(v), verdict_word(v)

    out = []
    for k, v in sorted(verdicts.items()):
        cls, word = shown(k, v)
        out.append(f'<span class="badge {cls}">{esc(label(k) if label else k)}: {esc(word)}</span>')
    return "".join(out)


def monitor_rows(m: dict[str, Any], index: int) -> str:
    """A step's monitor verdict: its word (a check that failed is never "safe"), then category,
    reason and error, each a field of its own. An async verdict may belong to an earlier step."""
    if m.get("error"):
        word, cls = ("check failed: halted" if m.get("halt") else "check failed: ran unchecked"), "err"
    elif m.get("halt"):
        word, cls = "HALT", "no"
    elif m.get("risky") is True:
        word, cls = "risky (allowed)", "no"
    elif m.get("risky") is False:
        word, cls = "safe", "yes"
    else:
        word, cls = "no verdict", "err"
    if m.get("reflected") and not m.get("error"):  # --monitor-mode reflect: not run, the agent was told why
        word, cls = "risky: not run, the agent was told why", "no"
    op = m.get("operator")
    if isinstance(op, dict):  # --monitor-mode ask: the person's answer stands instead of the verdict
        allowed = op.get("decision") == "allow"
        word, cls = (f"risky: allowed by the operator ({op.get('by')})" if allowed
                     else f"risky: denied ({op.get('by')})"), "no"
    of = m.get("halted_step")
    rows = [f'<div class="kv"><b>monitor</b> {esc(m.get("monitor") or "")} <span class="{cls}">{esc(word)}</span>'
            + (f" (the check of step {esc(of)})" if isinstance(of, int) and of != index else "") + "</div>"]
    for key in ("category", "reason", "error"):
        if m.get(key):
            rows.append(f'<div class="kv"><b>{key}</b> {esc(m[key])}</div>')
    extras = m.get("extras") if isinstance(m.get("extras"), dict) else {}
    if extras.get("decision") and m.get("halt"):
        rows.append(f'<div class="kv"><b>decision</b> {esc(extras["decision"])}</div>')
    if extras.get("reply"):  # why it halted, as the model said it (quoted, capped when recorded)
        rows.append(f'<div class="kv"><b>model reply</b> <code>{esc(str(extras["reply"])[:4000])}</code></div>')
    if isinstance(op, dict):
        rows.append(f'<div class="kv"><b>operator</b> {esc(op.get("decision"))} by {esc(op.get("by"))} after '
                    f'{esc(op.get("wait_s"))} s</div>')
    return "".join(rows)
