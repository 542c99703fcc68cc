"""The trajectory viewer: static HTML pages written into the run folder, readable offline.

    RUN/report.html                      index of episodes with filters (agent, verdict, halted, language)
    RUN/report/episodes/<task-id>.html   one page per episode
    RUN/report/thumbs/<task-id>/NNN.jpg  thumbnails (Pillow); the full PNG opens on click
    RUN/report/assets/viewer.css, viewer.js

Safety: every text from the records (thoughts, raw outputs, typed text, judge rationales) goes
through :func:`harness.report.page_parts.esc` (:func:`html.escape`); no inline script, style attribute or event handler is ever written, and
each page carries a Content-Security-Policy that allows scripts, styles and images only from the
run's own files (``'self'``), so even markup that slipped through could not run. Nothing is fetched
from the network.

Offline verdicts: the verdicts and details of every judgement set ``harness judge`` wrote
(``RUN/judgements/<set>/results.jsonl``) are shown next to the live ones, each with its set's name,
under the same column names as ``harness report`` (:func:`harness.report.episodes.combine_verdicts`).
"""

from __future__ import annotations

import concurrent.futures as cf
import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.core.episode_ids import task_of
from harness.records import (EPISODES_DIR, RecordError, episode_dir, iter_steps, list_episodes,
                             read_manifest, read_results, resolve_screen)
from harness.report.page_parts import CSP, action_overlay, describe_action, esc
from harness.report.page_parts import badges as _badges, monitor_rows as _monitor_rows  # shared with compare pages
from harness.report.page_parts import verdict_class, verdict_word
from harness.report.viewer_index import CSS as INDEX_CSS
from harness.report.viewer_index import episode_rows, run_summary
from harness.report.viewer_files import (THUMB_WIDTH, Thumbnails, ViewerError, make_dir, make_thumb,  # noqa: F401
                                         workers)  # (THUMB_WIDTH and ViewerError were defined here: still importable)

_overlay = action_overlay  # (the name tests/report/test_viewer.py reads it by)

REPORT_FILE = "report.html"
REPORT_DIR = "report"
RUN_LINK = "run"  # with --out DIR: DIR/run links to the run folder, whose screenshots the pages open

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#222;background:#fafafa}
header,main{padding:12px 20px}header{background:#263238;color:#fff}header a{color:#cfe}
h1{font-size:20px;margin:4px 0}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;background:#fff}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eee}.filters{margin:8px 0}.filters label{margin-right:14px}
.yes{color:#1b5e20;font-weight:600}.no{color:#b71c1c;font-weight:600}.err{color:#e65100;font-weight:600}
.badge{display:inline-block;border-radius:3px;padding:0 5px;margin:0 3px 2px 0;background:#eceff1;font-size:12px}
.badge.yes{background:#c8e6c9}.badge.no{background:#ffcdd2}.badge.err{background:#ffe0b2}
.timeline{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:4px}
.timeline li a{display:inline-block;min-width:26px;text-align:center;border:1px solid #90a4ae;border-radius:3px;
 padding:1px 4px;text-decoration:none;color:#222;background:#fff}
.timeline li.ms a{background:#fff59d;border-color:#f9a825;font-weight:700}
.timeline li.unsafe a{background:#ffcdd2;border-color:#c62828}.timeline li.halt a{background:#ce93d8}
.timeline li.invalid a{border-style:dashed}.timeline li.reflect a{background:#ffe0b2;border-color:#ef6c00}
.timeline li.op a{background:#b3e5fc;border-color:#0277bd;border-style:dotted}.step.op{border-left:5px dotted #0277bd}
.step{display:flex;gap:16px;background:#fff;border:1px solid #ddd;margin:10px 0;padding:10px}
.step.unsafe{border-left:5px solid #c62828}.step.halt{border-left:5px solid #8e24aa}.step.reflect{border-left:5px solid #ef6c00}.step.ms{border-top:3px solid #f9a825}
.shot{position:relative;display:inline-block;line-height:0;flex:none}
.shot img{width:240px;height:auto;border:1px solid #bbb}
.shot svg{position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none}
.info{flex:1;min-width:0}.info pre{white-space:pre-wrap;word-break:break-word;background:#f5f5f5;padding:6px;margin:4px 0}
.kv{margin:2px 0}.kv b{display:inline-block;min-width:90px}
.ms-list li.reached{color:#1b5e20}.ms-list li.missed{color:#b71c1c}
#lightbox{position:fixed;inset:0;background:rgba(0,0,0,.85);display:flex;align-items:center;justify-content:center;z-index:10}
#lightbox[hidden]{display:none}#lightbox img{max-width:95vw;max-height:92vh;background:#fff;display:block}
.lb-shot{position:relative;display:inline-block;line-height:0}
.lb-shot svg{position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none}
.blocked{color:#6a1b9a;font-weight:600}
#lightbox p{color:#fff;position:absolute;bottom:4px;width:100%;text-align:center;margin:0}
tr.ep[hidden]{display:none}
"""

JS = """(function () {
  'use strict';
  function applyFilters() {
    var sel = {};
    document.querySelectorAll('select[data-filter]').forEach(function (s) { sel[s.dataset.filter] = s.value; });
    var shown = 0;
    document.querySelectorAll('tr.ep').forEach(function (row) {
      var ok = Object.keys(sel).every(function (k) { return sel[k] === '' || row.dataset[k] === sel[k]; });
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    var counter = document.getElementById('shown');
    if (counter) { counter.textContent = String(shown); }
  }
  document.querySelectorAll('select[data-filter]').forEach(function (s) { s.addEventListener('change', applyFilters); });
  if (document.querySelector('select[data-filter]')) { applyFilters(); }

  // a thumbnail not made yet (harness view makes them in the background): the full screenshot,
  // scaled to the same box, stands in for it; an image not yet asked for (lazy) has no currentSrc
  var useFull = function (im) {
    var a = im.parentNode;
    if (a && a.getAttribute('href') && im.getAttribute('src') !== a.getAttribute('href')) {
      im.src = a.getAttribute('href');
    }
  };
  document.querySelectorAll('.shot img').forEach(function (im) {
    im.addEventListener('error', function () { useFull(im); });
    if (im.complete && im.currentSrc && im.naturalWidth === 0) { useFull(im); }
  });

  var box = document.getElementById('lightbox');
  if (box) {
    var img = document.getElementById('lightbox-img');
    var holder = document.getElementById('lightbox-shot');
    var clear = function () { holder.querySelectorAll('svg').forEach(function (s) { s.remove(); }); };
    var close = function () { box.hidden = true; img.removeAttribute('src'); clear(); };
    document.querySelectorAll('a.zoom').forEach(function (a) {
      a.addEventListener('click', function (ev) {
        ev.preventDefault();
        clear();
        img.src = a.getAttribute('href');
        // the full-size screenshot gets the same drawing of the action as its thumbnail
        var drawn = a.parentNode.querySelector('svg');
        if (drawn) { holder.appendChild(drawn.cloneNode(true)); }
        box.hidden = false;
      });
    });
    box.addEventListener('click', close);
    document.addEventListener('keydown', function (ev) { if (ev.key === 'Escape') { close(); } });
  }
}());
"""


# the full-screen view of a screenshot (viewer.js opens it on a click of a.zoom); compare pages use it too
LIGHTBOX = ('<div id="lightbox" hidden><div class="lb-shot" id="lightbox-shot"><img id="lightbox-img" '
            'alt="full screenshot"></div><p>click or press Esc to close</p></div>')


def _page(title: str, body: str, asset_prefix: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
            f'<title>{esc(title)}</title><link rel="stylesheet" href="{asset_prefix}viewer.css"></head>'
            f'<body>{body}<script src="{asset_prefix}viewer.js" defer></script></body></html>\n')


def _source_label(col: str, sources: dict[str, str]) -> str:
    """A verdict column as shown: an offline one names its judgement set (``crate [SET]``) unless its
    name already does (``crate@SET``, a name split by source)."""
    src = sources.get(col, "live")
    return col if src == "live" or "@" in col else f"{col} [{src}]"


# --------------------------------------------------------------------------- images


def _write_page(path: Path, text: str, out: Path) -> None:
    make_dir(path.parent, out)
    if path.is_symlink():  # replaced, never written through
        path.unlink()
    path.write_text(text, encoding="utf-8")




# --------------------------------------------------------------------------- judge details


def _milestone_sources(details: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Milestones per source: the oracle's ``milestones.reached`` and the milestones judge's list
    (also under their ``@live`` / ``@<set>`` columns when offline judgement sets split the name)."""
    from harness.report.tables import MILESTONE_SOURCES
    from harness.core.verdicts import judge_base

    out = {}
    names = sorted((k for k in details if judge_base(k) in MILESTONE_SOURCES),
                   key=lambda k: (MILESTONE_SOURCES.index(judge_base(k)), k != judge_base(k), k))
    for src in names:
        d = details.get(src)
        if not isinstance(d, dict):
            continue
        m = d.get("milestones")
        items = m.get("reached") if isinstance(m, dict) else m if isinstance(m, list) else d.get("reached")
        if isinstance(items, list):
            out[src] = [x for x in items if isinstance(x, dict)]
    return out


def _unsafe_steps(details: dict[str, Any], verdicts: dict[str, Any]) -> dict[int, list[str]]:
    """Step -> safety judges that flagged it."""
    from harness.core.verdicts import is_safety_judge

    out: dict[int, list[str]] = {}
    for name, d in details.items():
        if not is_safety_judge(name) or not isinstance(d, dict):
            continue
        steps = d.get("unsafe_steps") or d.get("risky_steps") or []
        for s in steps if isinstance(steps, list) else []:
            n = s.get("step") if isinstance(s, dict) else s
            if isinstance(n, int):
                out.setdefault(n, []).append(name)
        first = d.get("first_unsafe_step")
        if isinstance(first, int) and verdicts.get(name) is True and name not in out.get(first, []):
            out.setdefault(first, []).append(name)
    return out


def _step_notes(details: dict[str, Any]) -> dict[int, list[tuple[str, dict[str, Any]]]]:
    """Per-step notes of model judges (CRATE's clues and effect, CRATE-S's risk findings): step ->
    [(judge, note)]. Read from ``judge_details.<judge>.evidence`` (what the crate judges record),
    ``steps`` or ``step_notes``: lists of objects with ``step`` (or ``index``) and any of ``clues``,
    ``effect``, ``risky``, ``category``, ``reason``."""
    out: dict[int, list[tuple[str, dict[str, Any]]]] = {}
    for name, d in details.items():
        if not isinstance(d, dict):
            continue
        notes = next((d[k] for k in ("evidence", "steps", "step_notes") if isinstance(d.get(k), list)), None)
        if not isinstance(notes, list):
            continue
        for i, note in enumerate(notes, start=1):
            if not isinstance(note, dict):
                continue
            n = note.get("step", note.get("index", i))
            if isinstance(n, int):
                out.setdefault(n, []).append((name, note))
    return out


def _conditions(details: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Final conditions tables: ``judge_details.<judge>.conditions`` lists (CRATE's trajectory level)."""
    out = []
    for name, d in sorted(details.items()):
        if isinstance(d, dict) and isinstance(d.get("conditions"), list):
            out.append((name, [c if isinstance(c, dict) else {"condition": c} for c in d["conditions"]]))
    return out


def _first(d: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in d:
            return d[k]
    return None


def handover_rows(extra: dict[str, Any]) -> list[str]:
    """The episode header's lines about its hand-overs (an agent's needs_user): each one's outcome,
    who answered, the wait and the person's steps; the agent's text escaped."""
    out = []
    for h in extra.get("handovers") or []:
        if not isinstance(h, dict):
            continue
        ops = h.get("operator_steps") or []
        who = f" by {esc(h.get('by'))}" if h.get("by") else ""
        steps = (f"; the person's steps {esc(ops[0])}–{esc(ops[-1])}" if len(ops) > 1 else
                 f"; the person's step {esc(ops[0])}" if ops else "; no step by the person")
        out.append(f'<div class="kv handover"><b>hand-over</b> at <a href="#step-{esc(h.get("step"))}">step '
                   f'{esc(h.get("step"))}</a>: {esc(h.get("outcome"))}{who} after {esc(h.get("wait_s"))} s{steps}'
                   f'{"; " + esc(h["note"]) if h.get("note") else ""}</div>')
    return out


# --------------------------------------------------------------------------- pages


class _Ctx:
    """The run read, and the folder the pages go to: the run itself, or ``out`` (then the pages
    reach the run's screenshots through ``out/run``, a link to the run folder)."""

    def __init__(self, run: Path, out: Path | None = None, later: bool = False):
        if out is not None and out.resolve() == run.resolve():
            out = None
        self.run = run
        self.out = out if out is not None else run
        self.run_prefix = "" if out is None else RUN_LINK + "/"
        self.report_dir = self.out / REPORT_DIR
        self.warnings: list[str] = []
        self.thumbs = Thumbnails(self.out) if later else None  # None: each page makes its own at once

    def thumb(self, src: Path, dst: Path) -> tuple[int, int] | None:
        """The screenshot's size for its page; its thumbnail made now, or queued for later."""
        if self.thumbs is not None:
            return self.thumbs.need(src, dst)
        return make_thumb(src, dst, self.out)


# The most of one step's raw output or thought a page shows; the whole text stays in
# trajectory.jsonl (a 50 MB reply made 101 MB of pages at 663 MB RSS: issue 28)
SHOWN_CHARS = 20_000


def _cut_text(text: str | None) -> str | None:
    if text is None or len(text) <= SHOWN_CHARS:
        return text
    return (f"{text[:SHOWN_CHARS]}\n[... {len(text) - SHOWN_CHARS:,} more characters not shown here: the whole text "
            "is in the episode's trajectory.jsonl]")


def _shown(step: Any) -> Any:
    """``step`` with its raw output and thought cut to what a page shows."""
    raw, thought = _cut_text(step.raw_output), _cut_text(step.thought)
    if raw is step.raw_output and thought is step.thought:
        return step
    return step.model_copy(update={"raw_output": raw, "thought": thought})


def _episode_page(ctx: _Ctx, task_id: str, result: Any, task: Any,
                  judged: Any = None) -> tuple[str, dict[str, Any]]:
    """``judged`` (a :class:`harness.report.episodes.Judged`): the live and offline verdicts and
    details under their column names; without it, the result's own."""
    from harness.core.verdicts import LIVE

    try:
        ep_dir: Path | None = episode_dir(ctx.run, task_id)
    except RecordError as e:  # a symlinked episode folder: nothing of it is read
        ctx.warnings.append(str(e))
        ep_dir = None
    if judged is not None:
        details, verdicts, sources = dict(judged.details), dict(judged.verdicts), dict(judged.sources)
    else:
        details = dict(result.judge_details or {}) if result else {}
        verdicts = dict(result.verdicts) if result else {}
        sources = {}

    def label(col: str) -> str:
        return _source_label(col, sources)

    milestones = {label(k): v for k, v in _milestone_sources(details).items()}
    ms_at: dict[int, list[str]] = {}
    for src, items in milestones.items():
        for m in items:
            if isinstance(m.get("step"), int):
                ms_at.setdefault(m["step"], []).append(f"{src}: {m.get('description', '')}")
    unsafe = {n: [label(j) for j in js] for n, js in _unsafe_steps(details, verdicts).items()}
    notes = {n: [(label(j), note) for j, note in ns] for n, ns in _step_notes(details).items()}
    halt_step = result.halt.step if result is not None and result.halt is not None else None
    steps = []
    try:
        if ep_dir is not None:
            stream = iter_steps(ep_dir)
            for s in stream:
                steps.append(_shown(s))  # long texts cut as they are read: the page and the memory stay small
            ctx.warnings.extend(stream.warnings)
    except RecordError as e:
        ctx.warnings.append(str(e))
    q = quote(task_id)
    shot_html: dict[str, str] = {}

    def shot(rel: str | None, action: dict[str, Any] | None) -> str:
        if not rel or ep_dir is None:
            return ""
        name = Path(rel).stem + ".jpg"
        dst = ctx.report_dir / "thumbs" / task_id / name
        try:  # the same checks as every reader: relative, no '..', no symlink leading out of the episode
            src = resolve_screen(ep_dir, rel)
        except RecordError:
            if dst.is_file() and not dst.is_symlink():  # a thumbnail an older viewer made of it goes too
                dst.unlink()
            return '<p class="err">unsafe screenshot path refused (it leads out of the episode folder)</p>'
        size = ctx.thumb(src, dst) if src.is_file() else None
        if size is None:
            return f'<p class="err">screenshot {esc(rel)} is missing</p>'
        full = f"../../{ctx.run_prefix}{EPISODES_DIR}/{q}/{quote(rel)}"
        thumb = f"../thumbs/{q}/{quote(name)}"
        return (f'<div class="shot"><a class="zoom" href="{esc(full)}" title="open the full screenshot">'
                f'<img src="{esc(thumb)}" alt="screen {esc(rel)}" loading="lazy"></a>{action_overlay(action, size)}</div>')

    body = []
    title = f"{task_id} — {result.agent if result else 'unfinished'}"
    body.append(f'<header><a href="../../{REPORT_FILE}">← all episodes</a><h1>{esc(task_id)}</h1>')
    if task is not None:
        body.append(f"<div>{esc(task.instruction)}</div>")
    body.append("</header><main>")
    info = [("agent", result.agent if result else "-"), ("status", result.status if result else "unfinished (no result line)"),
            ("steps / cap", f"{result.steps} / {result.cap}" if result else str(len(steps))),
            ("language", task.language if task is not None else "unknown"),
            ("duration", f"{result.duration_s:.1f} s" if result and result.duration_s is not None else "-")]
    body.append("".join(f'<div class="kv"><b>{esc(k)}</b> {esc(v)}</div>' for k, v in info))
    live = {k: v for k, v in verdicts.items() if sources.get(k, LIVE) == LIVE}
    body.append(f'<div class="kv"><b>verdicts</b> {_badges(live) or "-"}</div>')
    for col in sorted(k for k, v in live.items() if v == "judge_error"):  # why a judge could not answer
        d = details.get(col)
        why = d.get("error") if isinstance(d, dict) and isinstance(d.get("error"), str) else "no reason recorded"
        body.append(f'<div class="kv"><b>{esc(label(col))} error</b> <span class="err">{esc(why[:1000])}</span></div>')
    checks = (result.model_extra or {}).get("monitor_checks") if result is not None else None
    if isinstance(checks, dict) and checks.get("failed"):
        unchecked = checks.get("ran_unchecked") or 0
        body.append(f'<div class="kv"><b>monitor errors</b> <span class="err">{esc(checks["failed"])} of '
                    f'{esc(checks.get("made"))} check(s) could not answer'
                    + (f"; {esc(unchecked)} action(s) ran unchecked" if unchecked else "") + "</span></div>")
    asked = (result.model_extra or {}).get("operator") if result is not None else None
    if isinstance(asked, dict) and asked.get("asked"):
        body.append(f'<div class="kv"><b>operator</b> asked {esc(asked.get("asked"))}: allowed '
                    f'{esc(asked.get("allowed"))}, denied {esc(asked.get("denied"))} (no answer in time: '
                    f'{esc(asked.get("timed_out"))}), waited {esc(asked.get("wait_s"))} s</div>')
    body += handover_rows(result.model_extra or {} if result is not None else {})
    told = [s.index for s in steps if s.reflection]
    if told:
        body.append(f'<div class="kv"><b>reflections</b> {len(told)}: the agent was told why and proposed again '
                    f'(step {", ".join(str(i) for i in told)})</div>')
    for source in sorted(set(sources.values()) - {LIVE}):  # offline judgement sets, next to the live verdicts
        cols = {k: v for k, v in verdicts.items() if sources.get(k) == source}
        body.append(f'<div class="kv offline"><b>judgements/{esc(source)}</b> {_badges(cols)}</div>')
        for col in sorted(cols):
            d = details.get(col)
            why = next((d[k] for k in ("reason", "error") if isinstance(d.get(k), str) and d[k]), None) \
                if isinstance(d, dict) else None
            if why:
                body.append(f'<div class="kv"><b>{esc(label(col))}</b> {esc(why[:1000])}</div>')
    if result is not None and result.error:
        body.append(f'<div class="kv"><b>error</b> <span class="err">{esc(result.error)}</span></div>')
    if result is not None and result.halt is not None:
        h = result.halt
        ran = (h.model_extra or {}).get("executed")
        when = "after it ran (async check)" if ran else "blocked before it ran" if ran is False else ""
        body.append(f'<div class="kv"><b>halted</b> <span class="blocked">at step {esc(h.step)} by '
                    f'{esc(h.monitor or "a monitor")}{", " + esc(when) if when else ""}</span></div>'
                    f'<div class="kv"><b>category</b> {esc(h.category)}</div>'
                    f'<div class="kv"><b>reason</b> {esc(h.reason)}</div>')
    # timeline
    body.append('<h2>Timeline</h2><ol class="timeline">')
    for s in steps:
        cls = [c for c, on in (("ms", s.index in ms_at), ("unsafe", s.index in unsafe), ("halt", s.index == halt_step),
                               ("invalid", s.action is None), ("reflect", bool(s.reflection)), ("op", s.by_operator))
               if on]
        tips = list(ms_at.get(s.index, [])) + (["not run: the agent was told why"] if s.reflection else [])
        if s.index in unsafe:
            tips.append(f"unsafe ({', '.join(unsafe[s.index])})")
        if s.by_operator:
            tips.append("done by a person (hand-over)")
        tip = "; ".join(tips)
        body.append(f'<li class="{" ".join(cls)}"><a href="#step-{s.index}" title="{esc(tip)}">{s.index}</a></li>')
    body.append("</ol>")
    for src, items in milestones.items():
        body.append(f'<h2>Milestones ({esc(src)})</h2><ul class="ms-list">')
        for m in items:
            st = m.get("step")
            where = (f'reached at <a href="#step-{st}">step {st}</a>' if isinstance(st, int) and st > 0
                     else "true from the start" if st == 0 else "not reached")
            by = " (by the person, not the agent)" if m.get("by") == "operator" else ""
            body.append(f'<li class="{"reached" if st is not None else "missed"}">{esc(m.get("description"))} — {where}{by}</li>')
        body.append("</ul>")
    # steps
    body.append("<h2>Steps</h2>")
    for s in steps:
        cls = " ".join(c for c, on in (("ms", s.index in ms_at), ("unsafe", s.index in unsafe),
                                       ("halt", s.index == halt_step), ("reflect", bool(s.reflection)),
                                       ("op", s.by_operator)) if on)
        body.append(f'<section class="step {cls}" id="step-{s.index}">')
        body.append(shot(s.screen_before, s.action))
        body.append(f'<div class="info"><div class="kv"><b>step {s.index}</b> <code>{esc(describe_action(s.action))}</code></div>')
        if s.by_operator:
            body.append(f'<div class="kv"><b>by</b> <span class="op">a person, during the hand-over of step '
                        f'{esc((s.extras or {}).get("handover_step"))}: not the agent\'s action</span></div>')
        if s.handover:
            body.append(f'<div class="kv"><b>the agent asks for a person</b></div><pre class="thought">{esc(s.handover.get("text"))}</pre>')
        halted_here = bool((s.monitor or {}).get("halt")) and not s.ran
        if not s.ran and s.action is not None:
            body.append('<div class="kv"><b>executed</b> <span class="blocked">no: '
                        + ("refused before it ran; the agent proposed again" if s.reflection else
                           "blocked before it ran" if halted_here else "the action did not run") + "</span></div>")
        if s.invalid:
            body.append(f'<div class="kv"><b>invalid</b> <span class="err">{esc(s.invalid)}</span></div>')
        if s.thought:
            body.append(f'<div class="kv"><b>thought</b></div><pre class="thought">{esc(s.thought)}</pre>')
        if s.monitor:
            body.append(_monitor_rows(s.monitor, s.index))
        if s.reflection:  # what the agent was told (model text: escaped like every record)
            r = s.reflection
            body.append(f'<div class="kv"><b>feedback</b> sent to the agent (flagged {esc(r.get("in_row"))} in a row; '
                        f'{esc(r.get("limit"))} in a row halt)</div>'
                        + (f'<pre class="feedback">{esc(r["feedback"])}</pre>' if r.get("feedback") else
                           f'<div class="kv"><span class="err">{esc(r.get("error"))}</span></div>'))
        for judge, note in notes.get(s.index, []):
            if note.get("error"):
                body.append(f'<div class="kv"><b>{esc(judge)} error</b> <span class="err">{esc(note["error"])}</span></div>')
            elif note.get("executed") is False or (not s.ran and note.get("synthetic")):
                word = "blocked" if halted_here else "not run"
                body.append(f'<div class="kv"><b>{esc(judge)}</b> <span class="blocked">{word}</span></div>')
            elif isinstance(note.get("risky"), bool):
                body.append(f'<div class="kv"><b>{esc(judge)}</b> <span class="{"no" if note["risky"] else "yes"}">'
                            f'{"risky" if note["risky"] else "not risky"}</span></div>')
                if note.get("category"):
                    body.append(f'<div class="kv"><b>{esc(judge)} category</b> {esc(note["category"])}</div>')
            for key in ("clues", "effect", "risk", "reason"):
                if note.get(key):
                    val = note[key] if isinstance(note[key], str) else json.dumps(note[key], ensure_ascii=False)
                    body.append(f'<div class="kv"><b>{esc(judge)} {esc(key)}</b> {esc(val)}</div>')
        if s.index in ms_at:
            body.append("".join(f'<div class="kv"><b>milestone</b> <span class="yes">{esc(t)}</span></div>' for t in ms_at[s.index]))
        if s.index in unsafe:
            body.append(f'<div class="kv"><b>unsafe</b> <span class="no">flagged by {esc(", ".join(unsafe[s.index]))}</span></div>')
        cut_by = (s.extras or {}).get("truncated_by")
        if cut_by:
            why = ("it passed the client's byte limit (--model-max-reply-bytes) and was cut there"
                   if cut_by == "max_reply_bytes" else "the server stopped at max_tokens")
            body.append(f'<div class="kv"><b>reply cut</b> <span class="err">{esc(why)}</span></div>')
        if s.raw_output:
            body.append(f"<details><summary>raw output</summary><pre>{esc(s.raw_output)}</pre></details>")
        if s.timings:
            body.append(f'<div class="kv"><b>timings</b> {esc(", ".join(f"{k} {v:.2f}s" for k, v in s.timings.items()))}</div>')
        body.append("</div></section>")
    if steps and steps[-1].screen_after:
        body.append('<h2>Final screen</h2><section class="step">' + shot(steps[-1].screen_after, None) + "</section>")
    # final conditions
    for judge, conds in _conditions(details):
        body.append(f"<h2>Final conditions ({esc(label(judge))})</h2><table><thead><tr><th>condition</th><th>met</th>"
                    "<th>evidence</th></tr></thead><tbody>")
        for c in conds:
            met = _first(c, "met", "satisfied", "ok", "holds", "verdict")
            body.append(f'<tr><td>{esc(_first(c, "condition", "text", "description", "name"))}</td>'
                        f'<td class="{verdict_class(met) if isinstance(met, bool) else ""}">{esc(verdict_word(met))}</td>'
                        f'<td>{esc(_first(c, "evidence", "reason", "rationale"))}</td></tr>')
        body.append("</tbody></table>")
    if details:
        body.append("<h2>Judge details</h2>")
        for judge, d in sorted(details.items()):
            body.append(f"<details><summary>{esc(label(judge))}</summary><pre>"
                        f"{esc(json.dumps(d, ensure_ascii=False, indent=1, default=str))}</pre></details>")
    body.append('</main>' + LIGHTBOX)
    row = {"task_id": task_id, "result": result, "task": task, "steps": len(steps)}
    return _page(title, "".join(body), "../assets/"), row


def write_viewer(run: str | Path, judgement_sets: list[str] | None = None, offline: bool = True,
                 out: str | Path | None = None) -> Path:
    """Write ``RUN/report.html`` and ``RUN/report/`` (or ``OUT/report.html`` and ``OUT/report/``,
    with ``OUT/run`` linking to the run, when ``out`` is given), every thumbnail made (pages on
    threads of their own, one per core); return the index path. Offline verdicts of every
    judgement set are shown, or of ``judgement_sets`` only, or none when not ``offline``. A folder
    that cannot be written raises OSError; nothing is read from outside the run folder, nor written
    outside the pages' folder."""
    return write_pages(run, judgement_sets, offline, out)[0]


def write_pages(run: str | Path, judgement_sets: list[str] | None = None, offline: bool = True,
                out: str | Path | None = None, later: bool = False) -> tuple[Path, Thumbnails | None]:
    """:func:`write_viewer`; with ``later`` the thumbnails are not made but returned, queued
    (harness.report.viewer_files: the caller makes them in the background and on request, and the
    pages show the full screenshot where one is missing): (the index, the queue or None)."""
    from harness.report.episodes import ReportError, combine_verdicts, load_task_objects, read_judgement_sets
    from harness.report.tables import order_judges
    from harness.core.verdicts import is_safety_judge

    ctx = _Ctx(Path(run), Path(out) if out is not None else None, later=later)
    if not ctx.run.is_dir():
        raise FileNotFoundError(f"{ctx.run}: no such run folder")
    if ctx.run_prefix:
        _link_run(ctx)
    try:
        manifest = read_manifest(ctx.run) if (ctx.run / "manifest.json").is_file() else {}
        results = read_results(ctx.run)
    except RecordError as e:
        raise ValueError(str(e)) from None
    ctx.warnings.extend(results.warnings)
    tasks = load_task_objects(ctx.run, manifest, ctx.warnings)
    by_id = {r.task_id: r for r in results}
    # live verdicts with those of every offline judgement set (RUN/judgements/<set>/results.jsonl)
    try:
        sets = read_judgement_sets([ctx.run], judgement_sets, ctx.warnings) if offline else []
    except ReportError as e:
        raise ValueError(str(e)) from None
    live = list(results)
    judged = dict(zip((r.task_id for r in live), combine_verdicts(
        live, lambda r: (ctx.run, r.task_id), lambda r: (r.verdicts, r.judge_details or {}), sets, ctx.warnings)))
    ids = list(by_id) + [t for t in list_episodes(ctx.run) if t not in by_id]
    assets = ctx.report_dir / "assets"
    _write_page(assets / "viewer.css", CSS + INDEX_CSS, ctx.out)
    _write_page(assets / "viewer.js", JS, ctx.out)
    success = order_judges(k for j in judged.values() for k in j.verdicts if not is_safety_judge(k))
    primary = success[0] if success else None
    def build(tid: str) -> tuple[dict[str, Any], list[str]]:
        own = copy.copy(ctx)  # warnings of its own, gathered below in the pages' order
        own.warnings = []
        page, row = _episode_page(own, tid, by_id.get(tid), tasks.get(task_of(tid)), judged.get(tid))
        _write_page(ctx.report_dir / "episodes" / f"{tid}.html", page, ctx.out)
        return row, own.warnings

    if ctx.thumbs is None and len(ids) > 1:  # thumbnails made as each page is built: pages in parallel
        with cf.ThreadPoolExecutor(workers(), thread_name_prefix="viewer") as pool:
            built = list(pool.map(build, ids))
    else:
        built = [build(tid) for tid in ids]
    rows = [row for row, _ in built]
    for _, warned in built:
        ctx.warnings.extend(warned)
    # index
    agents = sorted({r.agent for r in results})
    langs = sorted({(tasks[task_of(t)].language if task_of(t) in tasks else "unknown") for t in ids})
    b = [f'<header><h1>Run {esc(ctx.run.name)}</h1><div>{esc(ctx.run.resolve())}</div>']
    agent_spec = manifest.get("agent")
    if isinstance(agent_spec, dict):
        b.append(f"<div>agent: {esc(agent_spec.get('label') or agent_spec.get('name'))}</div>")
    b.append("</header><main>")
    b.append(run_summary(manifest, list(results), judged, primary))

    def select(name: str, label: str, options: list[tuple[str, str]]) -> str:
        opts = '<option value="">any</option>' + "".join(f'<option value="{esc(v)}">{esc(t)}</option>' for v, t in options)
        return f'<label>{esc(label)} <select data-filter="{esc(name)}" id="f-{esc(name)}">{opts}</select></label>'

    b.append('<div class="filters">')
    b.append(select("agent", "agent", [(a, a) for a in agents]))
    b.append(select("verdict", f"verdict ({primary or 'none'})",
                    [("true", "success"), ("false", "failure"), ("judge_error", "judge error"), ("none", "no verdict")]))
    b.append(select("halted", "halted", [("yes", "yes"), ("no", "no")]))
    b.append(select("lang", "language", [(x, x) for x in langs]))
    b.append(f' <span><span id="shown">{len(rows)}</span> of {len(rows)} episodes shown</span></div>')
    b.append("<table><thead><tr><th>task</th><th>agent</th><th>status</th><th>steps/cap</th><th>verdicts</th>"
             "<th>halt / error</th><th>lang</th><th>instruction</th></tr></thead><tbody>")
    b.extend(episode_rows(rows, judged, primary, _source_label, REPORT_DIR))
    b.append("</tbody></table>")
    if ctx.warnings:
        b.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{esc(w)}</li>" for w in ctx.warnings) + "</ul>")
    b.append("</main>")
    index = ctx.out / REPORT_FILE
    _write_page(index, _page(f"Run {ctx.run.name}", "".join(b), f"{REPORT_DIR}/assets/"), ctx.out)
    return index, ctx.thumbs


def _link_run(ctx: _Ctx) -> None:
    """``OUT/run`` -> the run folder, so the pages open full screenshots when read from disk too
    (``harness view`` serves that path from the run folder itself). An existing ``OUT/run`` that is
    not such a link is left alone and refused."""
    link = ctx.out / RUN_LINK
    ctx.out.mkdir(parents=True, exist_ok=True)
    target = ctx.run.resolve()
    if link.is_symlink():
        if link.resolve() == target:
            return
        link.unlink()
    elif link.exists():
        raise ViewerError(f"{link}: exists and is not a link to the run; choose another --out folder")
    try:
        link.symlink_to(target, target_is_directory=True)
    except OSError as e:  # a file system without symlinks: pages still work when served
        ctx.warnings.append(f"{link}: could not link to the run ({e.strerror}); open the pages with `harness view`")
