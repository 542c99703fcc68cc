"""The live page: one HTML document, one script, one style sheet.

The document holds no data from the records: the script gets the run's state from
``/live/events`` (server-sent events; ``/live/state`` when the browser has no EventSource) and
builds the page with ``textContent`` and attributes only, never ``innerHTML``, so a thought, a
reason or a typed text full of markup shows as text. The action drawn on the screen is an SVG
image the server draws (``/live/overlay/...``), loaded through ``<img>``, where no script runs.
The run's secret for the Allow / Deny buttons is in a ``<meta>`` element of the document.
"""

from __future__ import annotations

from harness.report.page_parts import esc

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#263238;color:#fff;padding:10px 20px}header a{color:#cfe}h1{font-size:19px;margin:2px 0}
#conn{font-size:12px;margin-left:10px}#conn.down{color:#ffab91}
main{padding:10px 20px}.devices{display:flex;flex-wrap:wrap;gap:16px}
.device{background:#fff;border:1px solid #ccc;padding:10px;min-width:360px;flex:1 1 420px;max-width:760px}
.device h2{font-size:16px;margin:0 0 6px}.row{display:flex;gap:12px}
.shot{position:relative;display:inline-block;line-height:0;flex:none}
.shot img{width:270px;height:auto;border:1px solid #bbb}.shot img.overlay{position:absolute;left:0;top:0;
 width:100%;height:100%;border-color:transparent;pointer-events:none}
.info{flex:1;min-width:0}.info pre{white-space:pre-wrap;word-break:break-word;background:#f5f5f5;padding:6px;margin:4px 0;max-height:160px;overflow:auto}
.kv{margin:2px 0}.kv b{display:inline-block;min-width:80px}
.state{display:inline-block;border-radius:3px;padding:0 6px;background:#eceff1;font-size:12px}
.state.asking{background:#ffe082}.state.halted{background:#e1bee7}.state.finished{background:#c8e6c9}
.state.stopped,.state.agent_error,.state.model_error,.state.infra_error,.state.task_error{background:#ffe0b2}
.verdict{margin:2px 0}.verdict .yes{color:#1b5e20;font-weight:600}.verdict .no{color:#b71c1c;font-weight:600}
.verdict .err{color:#e65100;font-weight:600}
.ask{border:2px solid #f9a825;background:#fffde7;padding:8px;margin:8px 0}
.ask button{font-size:15px;padding:4px 18px;margin-right:10px}.ask .answered{font-weight:600}
table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top;font-size:12px}
.halt td{background:#f3e5f5}.notrun{color:#6a1b9a}
.end{border-top:2px solid #90a4ae;margin-top:8px;padding-top:6px}
"""

JS = r"""(function () {
  'use strict';
  var tokenMeta = document.querySelector('meta[name="live-token"]');
  var token = tokenMeta ? tokenMeta.getAttribute('content') : '';
  var only = new URLSearchParams(window.location.search).get('device');
  var root = document.getElementById('devices');
  var list = document.getElementById('episodes');
  var conn = document.getElementById('conn');
  conn.textContent = 'connecting\u2026';
  var panels = {};

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function kv(parent, key, value) {
    if (value === undefined || value === null || value === '') { return; }
    var d = el('div', 'kv'); d.appendChild(el('b', null, key)); d.appendChild(document.createTextNode(' ' + value));
    parent.appendChild(d);
  }
  // a finding's value as a person reads it: lists one item after another, objects as "name: value"
  function readable(v) {
    if (v === null || v === undefined) { return ''; }
    if (Array.isArray(v)) { return v.map(readable).filter(function (x) { return x !== ''; }).join('; '); }
    if (typeof v === 'object') {
      return Object.keys(v).map(function (k) { var x = readable(v[k]); return x === '' ? '' : k + ': ' + x; })
        .filter(function (x) { return x !== ''; }).join(', ');
    }
    return String(v);
  }
  function fileUrl(task, rel) {
    return '/episodes/' + encodeURIComponent(task) + '/' + rel.split('/').map(encodeURIComponent).join('/');
  }
  function verdictWord(m, asking) {
    if (asking && m.halt && !m.operator) { return ['flagged: asking the operator', 'no']; }
    if (m.error) { return [m.halt ? 'check failed: halted' : 'check failed: ran unchecked', 'err']; }
    if (m.operator) {
      return m.operator.decision === 'allow' ? ['risky: allowed by the operator (' + m.operator.by + ')', 'no']
        : ['denied (' + m.operator.by + ')', 'no'];
    }
    if (m.reflected) { return ['risky: not run, the agent was told why', 'no']; }
    if (m.halt) { return ['HALT', 'no']; }
    if (m.risky === true) { return ['risky (allowed)', 'no']; }
    if (m.risky === false) { return ['safe', 'yes']; }
    return ['no verdict', 'err'];
  }
  function monitorLine(parent, m, asking) {
    var d = el('div', 'verdict');
    d.dataset.monitor = m.monitor || '';
    var w = verdictWord(m, asking);
    d.appendChild(el('b', null, (m.monitor || 'monitor') + ': '));
    d.appendChild(el('span', w[1], w[0]));
    if (m.category) { d.appendChild(document.createTextNode(' [' + m.category + ']')); }
    if (m.reason) { d.appendChild(document.createTextNode(' ' + m.reason)); }
    if (m.error) { d.appendChild(document.createTextNode(' (' + m.error + ')')); }
    parent.appendChild(d);
  }
  function decide(ep, ask, decision, box) {
    box.querySelectorAll('button').forEach(function (b) { b.disabled = true; });
    fetch('/live/decide', {
      method: 'POST', credentials: 'same-origin',
      headers: {'Content-Type': 'application/json', 'X-Live-Token': token},
      body: JSON.stringify({task_id: ep.task_id, ask_id: ask.id, decision: decision})
    }).then(function (r) { return r.json().then(function (j) { return [r.status, j]; }); })
      .then(function (res) {
        var msg = res[1].decision ? (res[1].decision + ' (' + res[1].by + ')') : (res[1].error || 'refused');
        box.appendChild(el('div', 'answered', res[0] === 200 ? 'sent: ' + msg : 'not taken: ' + msg));
      })
      .catch(function (e) { box.appendChild(el('div', 'answered', 'could not send: ' + e)); });
  }
  function countdown(box, ask, say) {  // the seconds left to answer, said by say(s), every second
    var left = el('div', 'kv deadline');
    box.appendChild(left);
    var tick = function () {
      left.textContent = say(Math.max(0, Math.round((Date.parse(ask.deadline_at) - Date.now()) / 1000)));
    };
    tick();
    box._timer = window.setInterval(tick, 1000);
  }
  function answerButtons(box, ep, ask, answers) {  // [[answer, label], ...]: a button each
    answers.forEach(function (a) {
      var b = el('button', a[0], a[1]); b.type = 'button';
      b.addEventListener('click', function () { decide(ep, ask, a[0], box); });
      box.appendChild(b);
    });
  }
  function handoverBox(ep, ask) {
    // the agent asks for a person (needs_user): its words as text, never as markup
    var box = el('div', 'ask handover');
    box.dataset.ask = ask.id;
    box.appendChild(el('div', 'answered', 'The agent hands the phone to you. Do this on the phone, then hand it back:'));
    box.appendChild(el('pre', 'thought', ask.text || '(the agent said nothing more)'));
    kv(box, 'your steps so far', ask.operator_steps);
    countdown(box, ask, function (s) { return 'not handed back in ' + s + ' s ends the episode (needs_user)'; });
    if (ask.decision) {
      box.appendChild(el('div', 'answered', 'answered: ' + ask.decision.decision + ' (' + ask.decision.by + ')'));
    } else if (!token) {
      box.appendChild(el('div', 'answered', 'this page cannot hand back (no run token): use the terminal'));
    }
    if (!ask.decision && token) {
      answerButtons(box, ep, ask, [['hand_back', 'Hand back'], ['give_up', 'Give up']]);
    }
    return box;
  }
  function askBox(ep, ask) {
    if (ask.kind === 'needs_user') { return handoverBox(ep, ask); }
    var box = el('div', 'ask');
    box.dataset.ask = ask.id;
    box.appendChild(el('div', 'answered', 'The monitor flags this action. Allow it to run?'));
    kv(box, 'action', ask.action);
    kv(box, 'monitor', ask.monitor);
    kv(box, 'category', ask.category || (ask.error ? 'monitor_error' : 'unspecified'));
    kv(box, 'reason', ask.reason);
    kv(box, 'error', ask.error);
    countdown(box, ask, function (s) { return 'no answer in ' + s + ' s denies'; });
    if (ask.decision) {
      box.appendChild(el('div', 'answered', 'answered: ' + ask.decision.decision + ' (' + ask.decision.by + ')'));
    } else if (!token) {
      box.appendChild(el('div', 'answered', 'this page cannot answer (no run token): answer on the terminal'));
    } else if (ask.channels && ask.channels.indexOf('page') < 0 && ask.channels.length) {
      box.appendChild(el('div', 'kv', 'also asked on: ' + ask.channels.join(', ')));
    }
    if (!ask.decision && token) {
      answerButtons(box, ep, ask, [['allow', 'Allow'], ['deny', 'Deny']]);
    }
    return box;
  }
  function setImg(img, src) {
    if (!src) { img.hidden = true; img.removeAttribute('src'); return; }
    img.hidden = false;
    if (img.getAttribute('src') !== src) { img.setAttribute('src', src); }
  }
  function render(dev) {
    var ep = dev.episode;
    var key = dev.device;
    var p = panels[key];
    if (!p) {
      p = {root: el('section', 'device')};
      p.root.dataset.device = key;
      p.title = el('h2'); p.root.appendChild(p.title);
      p.head = el('div'); p.root.appendChild(p.head);
      var row = el('div', 'row');
      var shot = el('div', 'shot');
      p.img = el('img'); p.img.alt = 'screen';
      p.ov = el('img', 'overlay'); p.ov.alt = '';
      shot.appendChild(p.img); shot.appendChild(p.ov);
      row.appendChild(shot);
      p.info = el('div', 'info'); row.appendChild(p.info);
      p.root.appendChild(row);
      p.askHolder = el('div'); p.root.appendChild(p.askHolder);
      p.rest = el('div'); p.root.appendChild(p.rest);
      root.appendChild(p.root);
      panels[key] = p;
    }
    var pend = ep.pending;
    var last = ep.steps.length ? ep.steps[ep.steps.length - 1] : null;
    var current = pend && pend.step !== null && pend.step !== undefined ? pend.step : (last ? last.index : 0);
    p.root.dataset.task = ep.task_id;
    p.root.dataset.state = ep.state;
    p.root.dataset.step = String(current);
    p.root.dataset.recorded = String(ep.steps.length);
    p.title.textContent = key + ' \u2014 ' + ep.task_id;
    p.head.textContent = '';
    p.head.appendChild(el('span', 'state ' + ep.state, ep.state));
    p.head.appendChild(el('span', 'count', ' step ' + current + ' / ' + (ep.cap || '?') +
      ' (' + ep.executed + ' executed) \u00b7 episodes done on this device: ' + dev.episodes_done));
    kv(p.head, 'task', ep.instruction);

    // the screen: the step being decided, else the last one recorded
    var screen = null, overlay = null, thought = null, action = null, monitors = [];
    if (pend && pend.screen_before) {
      screen = fileUrl(ep.task_id, pend.screen_before);
      if (pend.action) { overlay = '/live/overlay/' + encodeURIComponent(ep.task_id) + '/pending.svg?u=' + encodeURIComponent(pend.updated_at || ''); }
      thought = pend.thought; action = pend.action_text || (pend.invalid ? '(invalid) ' + pend.invalid : null);
      monitors = pend.monitors || [];
    } else if (last) {
      screen = fileUrl(ep.task_id, last.screen_after || last.screen_before);
      if (!last.screen_after && last.action) { overlay = '/live/overlay/' + encodeURIComponent(ep.task_id) + '/' + last.index + '.svg'; }
      thought = last.thought; action = last.action_text || (last.invalid ? '(invalid) ' + last.invalid : null);
      monitors = last.monitor ? [last.monitor] : [];
    } else if (ep.started_at) {
      screen = null;
    }
    setImg(p.img, screen);
    setImg(p.ov, overlay);
    p.info.textContent = '';
    if (pend && pend.state) { kv(p.info, 'now', pend.state); }
    kv(p.info, 'action', action);
    if (thought) { p.info.appendChild(el('b', null, 'thought')); p.info.appendChild(el('pre', 'thought', thought)); }
    var mons = el('div', 'monitors');
    var asking = !!(pend && pend.state === 'asking');
    monitors.forEach(function (m) { monitorLine(mons, m, asking); });
    p.info.appendChild(mons);

    var ask = pend && pend.ask ? pend.ask : null;
    var shown = p.askHolder.firstChild;
    var sig = ask ? ask.id + (ask.decision ? ':' + ask.decision.decision : '') : '';
    if (!shown || shown.dataset.sig !== sig) {
      if (shown && shown._timer) { window.clearInterval(shown._timer); }
      p.askHolder.textContent = '';
      if (ask) { var box = askBox(ep, ask); box.dataset.sig = sig; p.askHolder.appendChild(box); }
    }

    p.rest.textContent = '';
    if (ep.result) {
      var end = el('div', 'end');
      end.dataset.status = ep.result.status || '';
      end.appendChild(el('b', null, 'episode ended: ' + ep.result.status));
      if (ep.result.halt) {
        var h = ep.result.halt;
        kv(end, 'halted', 'step ' + h.step + ' by ' + (h.monitor || '?') + ' [' + h.category + '] ' + h.reason +
          (h.operator ? ' \u2014 ' + h.operator.decision + ' by ' + h.operator.by : ''));
      }
      kv(end, 'error', ep.result.error);
      Object.keys(ep.result.verdicts || {}).forEach(function (k) {
        var v = ep.result.verdicts[k];
        var why = (ep.result.judge_errors || {})[k];
        kv(end, k, v === true ? 'true' : v === false ? 'false' : String(v) + (why ? ': ' + why : ''));
      });
      p.rest.appendChild(end);
    }
    if (ep.evidence && ep.evidence.length) {
      p.rest.appendChild(el('b', null, 'judges\u2019 step evidence'));
      var ul = el('ul', 'evidence');
      ep.evidence.slice(-20).forEach(function (e) {
        var li = el('li');
        li.appendChild(el('b', null, (e.judge || '?') + ' \u00b7 step ' + e.step));
        Object.keys(e).filter(function (k) { return ['judge', 'step', 'at'].indexOf(k) < 0; }).forEach(function (k) {
          var shown = readable(e[k]);
          if (shown !== '') { kv(li, k.replace(/_/g, ' '), shown); }
        });
        li.dataset.step = String(e.step);
        ul.appendChild(li);
      });
      p.rest.appendChild(ul);
    }
    if (ep.steps.length) {
      var t = el('table', 'steps');
      var hr = el('tr');
      ['step', 'action', 'ran', 'monitor'].forEach(function (c) { hr.appendChild(el('th', null, c)); });
      t.appendChild(hr);
      ep.steps.forEach(function (s) {
        var tr = el('tr', s.monitor && s.monitor.halt ? 'halt' : '');
        tr.dataset.step = String(s.index);
        tr.appendChild(el('td', null, s.index));
        tr.appendChild(el('td', null, s.action_text || s.invalid || ''));
        tr.appendChild(el('td', s.executed ? '' : 'notrun', s.executed ? 'yes' : 'not run'));
        var td = el('td');
        if (s.monitor) { monitorLine(td, s.monitor); }
        if (s.feedback) { td.appendChild(el('pre', 'thought', 'told the agent: ' + s.feedback)); }
        tr.appendChild(td);
        t.appendChild(tr);
      });
      p.rest.appendChild(t);
    }
  }
  function show(state) {
    document.getElementById('run').textContent = state.run;
    var seen = {};
    state.devices.forEach(function (d) {
      if (only && d.device !== only) { return; }
      seen[d.device] = true;
      render(d);
    });
    Object.keys(panels).forEach(function (k) { if (!seen[k]) { panels[k].root.remove(); delete panels[k]; } });
    list.textContent = '';
    state.episodes.forEach(function (e) {
      if (only && e.device !== only) { return; }
      var li = el('li');
      li.dataset.task = e.task_id;
      var a = el('a', null, e.device || '?');
      a.href = '?device=' + encodeURIComponent(e.device || '');
      li.appendChild(a);
      li.appendChild(document.createTextNode(' ' + e.task_id + ': ' + e.state));
      list.appendChild(li);
    });
    document.body.dataset.updates = String((Number(document.body.dataset.updates) || 0) + 1);
  }
  function onData(text) {
    try { show(JSON.parse(text)); } catch (e) { conn.textContent = 'bad update: ' + e; }
  }
  if (window.EventSource) {
    var es = new EventSource('/live/events');
    es.onopen = function () { conn.textContent = 'live'; conn.className = ''; };
    es.onmessage = function (ev) { onData(ev.data); };
    es.onerror = function () { conn.textContent = 'disconnected: reconnecting\u2026'; conn.className = 'down'; };
  } else {
    var poll = function () {
      fetch('/live/state').then(function (r) { return r.text(); }).then(onData)
        .catch(function () { conn.textContent = 'disconnected'; conn.className = 'down'; })
        .then(function () { window.setTimeout(poll, 500); });
    };
    poll();
  }
}());
"""


def page_html(run_name: str, token: str | None, snapshot: dict | None = None) -> str:
    """The page; ``snapshot`` (the run's state as ``/live/state`` gives it) is also drawn without
    script, in ``<noscript>``, reloading itself every few seconds (harness.live.noscript)."""
    from harness.live.noscript import noscript_body, noscript_head

    meta = f'<meta name="live-token" content="{esc(token)}">' if token else ""
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>live: {esc(run_name)}</title>{meta}"
            '<meta name="referrer" content="no-referrer"><link rel="icon" href="data:,">'
            f'<link rel="stylesheet" href="/live/live.css">{noscript_head()}</head><body>'
            f'<header><h1>Live: <span id="run">{esc(run_name)}</span><span id="conn"></span></h1>'
            '<a href="/">all devices</a></header>'
            f'<main>{noscript_body(snapshot)}<div id="devices" class="devices"></div><h2>Episodes</h2>'
            '<ul id="episodes"></ul></main>'
            '<script src="/live/live.js"></script></body></html>')
