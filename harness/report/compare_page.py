"""The page of ``harness compare`` (:mod:`harness.report.compare`): static files, as the viewer's.

    OUT/index.html              the runs, each pair's outcome matrix (repeats as rates), McNemar,
                                the sign-flip test, the bootstrap interval; the tasks, filtered by
                                app, language and outcome (A against B)
    OUT/tasks/<task>.html       the runs' trajectories of one task side by side, step by step, per
                                repeat: screen with the action drawn on it, action, thought,
                                monitor verdict; the episode's status and verdicts
    OUT/assets/                 the viewer's stylesheet and script (the full-screen view of a
                                screenshot) and the filters' script
    OUT/runs/A, B, ...          links to the run folders the screenshots are shown from

Every text from the records goes through ``html.escape`` (harness.report.page_parts, the viewer's
parts), no inline script, style attribute or event handler is written, and each page carries the
viewer's Content-Security-Policy (scripts, styles and images from its own files only).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.records import RecordError, episode_dir, iter_steps, resolve_screen
from harness.report.compare import Comparison, RunColumn
from harness.report.page_parts import CSP, action_overlay, badges, describe_action, esc, monitor_rows
from harness.report.viewer import CSS as VIEWER_CSS
from harness.report.viewer import JS as VIEWER_JS
from harness.report.viewer import LIGHTBOX
from harness.report.viewer_files import source_size

CSS = """
.cmp{border-collapse:collapse;margin:.6em 0}.cmp td,.cmp th{border:1px solid #ccc;padding:3px 8px;vertical-align:top}
.side{display:grid;gap:10px}.side .cell{border:1px solid #ddd;border-radius:6px;padding:6px;min-width:0}
.side .shot{max-width:260px}.side .shot img{width:100%}.stepno{font-weight:bold;color:#555}
.matrix td.n{text-align:right;font-variant-numeric:tabular-nums}.filters select{margin-right:1em}
"""

JS = """
(function () {
  function apply() {
    var want = {};
    document.querySelectorAll('.filters select').forEach(function (s) { want[s.dataset.key] = s.value; });
    document.querySelectorAll('tr.task').forEach(function (tr) {
      var ok = Object.keys(want).every(function (k) { return !want[k] || tr.dataset[k] === want[k]; });
      tr.hidden = !ok;
    });
    var n = document.querySelectorAll('tr.task:not([hidden])').length;
    var c = document.getElementById('shown');
    if (c) { c.textContent = String(n); }
  }
  document.querySelectorAll('.filters select').forEach(function (s) { s.addEventListener('change', apply); });
  apply();
})();
"""


def _page(title: str, body: str, prefix: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
            f'<title>{esc(title)}</title><link rel="stylesheet" href="{prefix}assets/viewer.css">'
            f'<link rel="stylesheet" href="{prefix}assets/compare.css"></head><body>{body}'
            f'<script src="{prefix}assets/viewer.js" defer></script>'
            f'<script src="{prefix}assets/compare.js" defer></script></body></html>\n')


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _task_file(task: str) -> str:
    return quote(task, safe="") + ".html"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _rate(col: RunColumn, task: str, judge: str) -> str:
    n, c = col.rate(task, judge)
    return f"{c}/{n}" if n else "-"


def _select(key: str, label: str, values: list[str]) -> str:
    opts = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in values)
    return f'<label>{esc(label)} <select id="f-{key}" data-key="{key}"><option value="">all</option>{opts}</select></label>'


def _pair_block(cmp: Comparison, p: dict[str, Any]) -> str:
    m = p["matrix"]
    b = next(c for c in cmp.runs if c.letter == p["b"])
    a = cmp.runs[0]
    num = lambda x: f"{x:.2f}".rstrip("0").rstrip(".")  # noqa: E731
    rows = [f'<h3>A ({esc(a.agent)}) against {esc(b.letter)} ({esc(b.agent)})</h3>',
            '<table class="cmp matrix"><tr><th></th><th>' + esc(b.letter) + ' succeeds</th><th>' + esc(b.letter)
            + ' fails</th></tr>',
            f'<tr><th>A succeeds</th><td class="n" id="m-{esc(b.letter)}-both">{num(m["both succeed"])}</td>'
            f'<td class="n" id="m-{esc(b.letter)}-onlya">{num(m["only A"])}</td></tr>',
            f'<tr><th>A fails</th><td class="n" id="m-{esc(b.letter)}-onlyb">{num(m["only B"])}</td>'
            f'<td class="n" id="m-{esc(b.letter)}-neither">{num(m["both fail"])}</td></tr></table>']
    if "mcnemar_p" in p:
        rows.append(f'<table class="cmp stats" id="stats-{esc(b.letter)}">'
                    f'<tr><th>SR A / {esc(b.letter)}</th><td>{_pct(p["sr_a"])} % / {_pct(p["sr_b"])} % '
                    f'(A-{esc(b.letter)} {100 * p["diff"]:+.1f} pp, {p["tasks"]} tasks)</td></tr>'
                    f'<tr><th>McNemar exact p (each task\'s majority)</th><td>{p["mcnemar_p"]:.4f} '
                    f'(only A {p["only_a"]}, only {esc(b.letter)} {p["only_b"]}'
                    + (f', {p["majority_ties"]} tasks at 1/2 left out' if p["majority_ties"] else "") + ')</td></tr>'
                    f'<tr><th>sign-flip p (per-task rates)</th><td>{p["sign_flip_p"]:.4f}</td></tr>'
                    f'<tr><th>bootstrap 95% CI of A-{esc(b.letter)}</th><td>[{100 * p["boot_low"]:+.1f}, '
                    f'{100 * p["boot_high"]:+.1f}] pp (tasks resampled, then repeats)</td></tr>'
                    f'<tr><th>detectable at 80% power</th><td>{_pct(p["min_detectable"])} pp</td></tr></table>')
    return "".join(rows)


def index_page(cmp: Comparison) -> str:
    runs = "".join(f'<tr><th>{esc(c.letter)}</th><td>{esc(c.agent)}</td><td>{esc(c.name)}</td>'
                   f'<td>{_pct(cmp.sr(c))} %</td></tr>' for c in cmp.runs)
    body = [f'<header><h1>Compare: {esc(" vs ".join(c.agent for c in cmp.runs))}</h1></header><main>',
            f'<p>Judge: {esc(cmp.judge)}. Each task\'s outcome in a run is its success rate over that run\'s '
            f'repeats; the matrix sums, per task, a*b (both succeed), a(1-b), (1-a)b and (1-a)(1-b). '
            f'{len(cmp.tasks)} tasks in every run.</p>',
            f'<table class="cmp runs"><tr><th>run</th><th>agent</th><th>source</th><th>SR</th></tr>{runs}</table>']
    body += [_pair_block(cmp, p) for p in cmp.pairs]
    apps = sorted({i["app"] for i in cmp.info.values()})
    langs = sorted({i["language"] for i in cmp.info.values()})
    classes = ["both succeed", "both fail", "only A", "only B", "mixed", "no outcome"]
    body.append('<h2>Tasks</h2><div class="filters">' + _select("app", "app", apps) + _select("lang", "language", langs)
                + _select("outcome", "outcome (A against B)", classes)
                + f' <span><span id="shown">{len(cmp.tasks)}</span> shown</span></div>')
    head = "".join(f"<th>{esc(c.letter)}</th>" for c in cmp.runs)
    rows = []
    for t in cmp.tasks:
        i = cmp.info[t]
        cls = cmp.classify(t)
        rows.append(f'<tr class="task" data-app="{esc(i["app"])}" data-lang="{esc(i["language"])}" '
                    f'data-outcome="{esc(cls)}"><td><a href="tasks/{esc(_task_file(t))}">{esc(t)}</a></td>'
                    f'<td>{esc(i["app"])}</td><td>{esc(i["language"])}</td>'
                    + "".join(f"<td>{esc(_rate(c, t, cmp.judge))}</td>" for c in cmp.runs)
                    + f"<td>{esc(cls)}</td></tr>")
    body.append(f'<table class="cmp tasks"><tr><th>task</th><th>app</th><th>language</th>{head}<th>outcome</th></tr>'
                + "".join(rows) + "</table>")
    if cmp.warnings:
        body.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{esc(w)}</li>" for w in cmp.warnings) + "</ul>")
    body.append("</main>")
    return _page("Compare: " + " vs ".join(c.agent for c in cmp.runs), "".join(body), "")


def _shot(col: RunColumn, eid: str, rel: str | None, action: dict[str, Any] | None) -> str:
    if not rel:
        return ""
    try:
        src = resolve_screen(episode_dir(col.path, eid), rel)
    except RecordError:
        return '<p class="err">unsafe screenshot path refused (it leads out of the episode folder)</p>'
    size = source_size(src) if src.is_file() else None
    if size is None:
        return f'<p class="err">screenshot {esc(rel)} missing</p>'
    url = f"../runs/{quote(col.letter)}/episodes/{quote(eid, safe='')}/{quote(rel)}"
    return (f'<div class="shot"><a class="zoom" href="{esc(url)}" title="open the full screenshot">'
            f'<img src="{esc(url)}" alt="screen {esc(rel)}" loading="lazy"></a>{action_overlay(action, size)}</div>')


def _steps(col: RunColumn, eid: str) -> list[Any]:
    try:
        return list(iter_steps(episode_dir(col.path, eid)))
    except (RecordError, OSError):
        return []


def _cell(col: RunColumn, eid: str, s: Any) -> str:
    if s is None:
        return '<div class="cell empty"></div>'
    parts = [f'<div class="cell step"><div class="stepno">step {esc(s.index)}'
             + ("" if s.ran else " (not run)") + "</div>", _shot(col, eid, s.screen_before, s.action),
             f'<div class="kv action"><b>action</b> <code>{esc(describe_action(s.action))}</code></div>']
    if s.invalid:
        parts.append(f'<div class="kv"><b>invalid</b> {esc(s.invalid)}</div>')
    if s.thought:
        parts.append(f'<div class="kv thought"><b>thought</b> {esc(s.thought)}</div>')
    if s.monitor:
        parts.append(monitor_rows(s.monitor, s.index))
    return "".join(parts) + "</div>"


def task_page(cmp: Comparison, task: str) -> str:
    cols = cmp.runs
    i = cmp.info[task]
    body = [f'<header><a href="../index.html">← all tasks</a><h1>{esc(task)}</h1></header><main>'
            f'<p>app {esc(i["app"])}, language {esc(i["language"])}, outcome (A against B): '
            f'{esc(cmp.classify(task))}; ' + ", ".join(f"{esc(c.letter)} {esc(_rate(c, task, cmp.judge))}"
                                                      for c in cols) + "</p>"]
    n = max(len(c.episodes.get(task, [])) for c in cols)
    for r in range(n):
        body.append(f'<details class="repeat" {"open" if r == 0 else ""}><summary>repeat {r + 1}</summary>'
                    f'<div class="side cols-{len(cols)}">')
        eps = [c.episodes.get(task, [])[r] if r < len(c.episodes.get(task, [])) else None for c in cols]
        for c, e in zip(cols, eps):
            if e is None:
                body.append(f'<div class="cell head"><b>{esc(c.letter)}</b> {esc(c.agent)}: no repeat {r + 1}</div>')
                continue
            body.append(f'<div class="cell head"><b>{esc(c.letter)}</b> {esc(c.agent)} <code>{esc(e.task_id)}</code>'
                        f'<div class="kv"><b>status</b> {esc(e.status)} in {esc(e.steps)}/{esc(e.cap)} steps</div>'
                        f'<div class="badges">{badges(e.verdicts)}</div></div>')
        steps = [(_steps(c, e.task_id) if e is not None else []) for c, e in zip(cols, eps)]
        for i in range(max((len(s) for s in steps), default=0)):
            for c, e, ss in zip(cols, eps, steps):
                body.append(_cell(c, e.task_id, ss[i]) if e is not None and i < len(ss) else '<div class="cell empty"></div>')
        for c, e, ss in zip(cols, eps, steps):  # the screen each episode ended on
            last = ss[-1].screen_after if ss else None
            body.append('<div class="cell end"><div class="stepno">final screen</div>'
                        + (_shot(c, e.task_id, last, None) if e is not None else "") + "</div>")
        body.append("</div></details>")
    body.append("</main>" + LIGHTBOX)
    return _page(f"{task}: " + " vs ".join(c.agent for c in cols), "".join(body), "../")


def write_compare(cmp: Comparison, out: str | Path) -> Path:
    """Write the pages into ``out``; returns ``out/index.html``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = out / "runs"
    runs.mkdir(exist_ok=True)
    for c in cmp.runs:
        link = runs / c.letter
        if link.is_symlink() or link.exists():
            if not link.is_symlink():
                raise RecordError(f"{link}: exists and is not a link to a run; choose another --out")
            link.unlink()
        link.symlink_to(c.path.resolve(), target_is_directory=True)
    cols = len(cmp.runs)
    _write(out / "assets" / "viewer.css", VIEWER_CSS)
    _write(out / "assets" / "viewer.js", VIEWER_JS)
    _write(out / "assets" / "compare.css", CSS + f".side{{grid-template-columns:repeat({cols},minmax(0,1fr))}}\n")
    _write(out / "assets" / "compare.js", JS)
    for t in cmp.tasks:
        _write(out / "tasks" / _task_file(t), task_page(cmp, t))
    _write(out / "index.html", index_page(cmp))
    return out / "index.html"
