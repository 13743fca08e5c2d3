// SPEC §7: the status page. One document, its script and its style, all served by the admin
// listener (no asset from outside, and no inline script or style: the page's CSP allows only
// its own origin's). It fetches /v1/status (same origin, the same credentials the browser sent
// for the page) every 5 s and draws it: an SVG chart, the team bars, the busiest keys, the
// protection, the server and the store.

export const STATUS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>basegate status</title>
<link rel="stylesheet" href="/status.css">
<script src="/status.js" defer></script>
</head>
<body>
<h1>basegate <span id="version" class="muted"></span></h1>
<div class="muted"><span id="state">loading…</span> · refreshed every 5 s · <span id="updated"></span></div>
<div id="alerts" role="alert"></div>
<section class="block">
  <h2 class="first">Calls per second, last 15 minutes, by class and outcome</h2>
  <svg id="chart" viewBox="0 0 900 240" preserveAspectRatio="none" width="100%" height="240" role="img" aria-label="calls per second"></svg>
  <table id="series"><thead><tr><th>class / outcome</th><th class="n">calls (15 min)</th><th class="n">per s now</th></tr></thead><tbody></tbody></table>
</section>
<div class="grid">
  <section class="wide"><h2>Busiest keys (15 min)</h2><table id="busiest"><thead><tr><th>key</th><th class="w">team / override</th><th class="n">calls</th></tr></thead><tbody></tbody></table></section>
  <section><h2>Refusals and sheds (15 min)</h2><table id="refusals"><tbody></tbody></table></section>
  <section><h2>Teams this month</h2><div id="teams"></div></section>
  <section><h2>Server protection</h2><table id="protect"><tbody></tbody></table></section>
  <section class="wide"><h2>Server and store</h2><table id="server"><tbody></tbody></table><div id="report"></div></section>
</div>
<section class="block"><h2 class="first">A base's calls per day</h2>
  <form id="history-form"><input id="history-base" size="40" placeholder="base UUID" aria-label="base UUID"> <button type="submit">Show this month</button></form>
  <div id="history" class="muted"></div>
</section>
<section class="block"><h2 class="first">Configuration in force (secrets masked)</h2><pre id="config"></pre></section>
</body>
</html>
`

export const STATUS_CSS = `  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2330; background: #fafbfc; }
  h1 { font-size: 1.3em; margin: 0 0 .2em; } h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }
  .muted { color: #6b7280; } .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(22em, 1fr)); gap: 1em; }
  section { background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; padding: .8em 1em; }
  table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: .15em .4em; border-bottom: 1px solid #f0f1f3; }
  td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
  .bar { background: #eef0f3; height: .9em; border-radius: 3px; overflow: hidden; }
  .bar > div { height: 100%; background: #3b82f6; } .amber > div { background: #f59e0b; } .red > div { background: #dc2626; }
  .swatch { display: inline-block; width: 1.4em; height: 0; margin-right: .4em; vertical-align: middle; border-top: 3px solid; }
  pre { max-height: 24em; overflow: auto; background: #f6f7f9; padding: .6em; font-size: 12px; }
  #state.bad, .bad { color: #b91c1c; font-weight: 600; } .ok { color: #15803d; } .warn { color: #b45309; }
  #alerts { margin-top: .6em; } #alerts div { background: #fef2f2; border: 1px solid #fca5a5; color: #991b1b; border-radius: 6px; padding: .5em .8em; margin-top: .4em; font-weight: 600; }
  #busiest { table-layout: fixed; } #busiest td:first-child { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  #busiest th.n, #busiest td.n { width: 5.5em; } #busiest th.w, #busiest td.w { width: 35%; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  .team { margin-bottom: .5em; } .days { display: block; margin-top: .15em; }
  @media (min-width: 1000px) { .wide { grid-column: span 2; } }
  section.block { margin-top: 1em; } h2.first { margin-top: 0; }
`

export const STATUS_JS = `// One colour per outcome, whatever else is drawn (issue #34): forwarded neutral, refusals amber,
// errors and sheds red. Classes keep their own dash.
const OUTCOME_COLOR = {
  forwarded: '#64748b', dry_run: '#2563eb', client_aborted: '#cbd5e1',
  rate_limited: '#f59e0b', monthly_limited: '#d97706', size_refused: '#b45309', key_in_flight: '#fbbf24',
  gone: '#92400e', bad_path: '#a16207', bad_request: '#a16207',
  upstream_error: '#dc2626', shed: '#b91c1c', store_unavailable: '#7f1d1d', body_unavailable: '#ef4444', body_timeout: '#f87171',
};
const CLASS_DASH = { base: '', account: '7 3', auth_token: '2 3', other: '10 3 2 3' };
const colorOf = (name) => OUTCOME_COLOR[name.slice(name.indexOf('/') + 1)] || '#94a3b8';
const dashOf = (name) => CLASS_DASH[name.slice(0, name.indexOf('/'))] ?? '1 3';
const $ = (id) => document.getElementById(id);
const text = (v) => document.createTextNode(v === null || v === undefined ? '—' : String(v));
const ns = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs) { const e = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v)); return e; }
function row(table, cells, attrs) {
  const tr = document.createElement('tr');
  for (const [k, v] of Object.entries(attrs || {})) tr.setAttribute(k, v);
  cells.forEach((c, i) => {
    const td = document.createElement('td');
    if (c !== null && typeof c === 'object' && 'cls' in c) { td.className = c.cls; td.appendChild(text(c.v)); }
    else { if (i > 0 && typeof c === 'number') td.className = 'n'; td.appendChild(text(c)); }
    tr.appendChild(td);
  });
  table.querySelector('tbody').appendChild(tr);
  return tr;
}
function clear(id) { $(id).querySelector('tbody').replaceChildren(); }
const hhmm = (ms) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
function drawChart(traffic) {
  const svg = $('chart'); svg.replaceChildren();
  const names = Object.keys(traffic.series).sort();
  const step = traffic.step_s;
  let max = 1;
  for (const n of names) for (const v of traffic.series[n]) max = Math.max(max, v / step);
  const top = 8, bottom = 212, width = 900;
  svg.appendChild(svgEl('line', { x1: 0, y1: bottom, x2: width, y2: bottom, stroke: '#d1d5db' }));
  const yLabel = svgEl('text', { x: 4, y: 18, 'font-size': 11, fill: '#6b7280' }); yLabel.textContent = max.toFixed(1) + '/s'; svg.appendChild(yLabel);
  // The time axis: the window's start, every 5 minutes, and now (the browser's clock).
  const points = (traffic.series[names[0]] || new Array(90).fill(0)).length;
  const endMs = traffic.end * 1000;
  for (const back of [15, 10, 5, 0]) {
    const x = width - (back * 60 / step) * (width / (points - 1));
    svg.appendChild(svgEl('line', { x1: Math.max(0, x), y1: bottom, x2: Math.max(0, x), y2: bottom + 5, stroke: '#9ca3af' }));
    const anchor = back === 15 ? 'start' : back === 0 ? 'end' : 'middle';
    const t = svgEl('text', { x: Math.max(0, x), y: 234, 'font-size': 11, fill: '#6b7280', 'text-anchor': anchor, class: 'tick' });
    t.textContent = back === 0 ? 'now ' + hhmm(endMs) : '−' + back + ' min ' + hhmm(endMs - back * 60000);
    svg.appendChild(t);
  }
  for (const n of names) {
    const values = traffic.series[n];
    const pts = values.map((v, i) => (i * width / (values.length - 1)).toFixed(1) + ',' + (bottom - (v / step) / max * (bottom - top)).toFixed(1)).join(' ');
    svg.appendChild(svgEl('polyline', { points: pts, fill: 'none', 'stroke-width': 1.8, stroke: colorOf(n), 'stroke-dasharray': dashOf(n), 'data-series': n, 'data-total': values.reduce((a, b) => a + b, 0) }));
  }
  clear('series');
  for (const n of names) {
    const values = traffic.series[n];
    const total = values.reduce((a, b) => a + b, 0);
    const tr = row($('series'), [n, total, Number((values[values.length - 1] / step).toFixed(1))], { 'data-series': n, 'data-total': String(total), 'data-color': colorOf(n) });
    const sw = document.createElement('span'); sw.className = 'swatch'; sw.style.borderTopColor = colorOf(n);
    if (dashOf(n)) sw.style.borderTopStyle = 'dashed';
    tr.firstChild.prepend(sw);
  }
}
function drawTeams(teams) {
  const box = $('teams'); box.replaceChildren();
  if (teams.length === 0) box.appendChild(text('no monthly quotas in force'));
  for (const t of teams) {
    if (t.used === null) {
      const div = document.createElement('div'); div.className = 'team muted'; div.setAttribute('data-team', t.id); div.setAttribute('data-level', 'unknown');
      div.appendChild(text(t.id + ': count unknown while the store does not answer')); box.appendChild(div); continue;
    }
    const pct = t.quota > 0 ? t.used / t.quota * 100 : 0;
    // Used up (100 %, the point where its calls get 429) is red; past 80 % amber.
    const level = pct >= 100 ? 'red' : pct >= 80 ? 'amber' : '';
    const div = document.createElement('div');
    div.className = 'team'; div.setAttribute('data-team', t.id); div.setAttribute('data-used', t.used); div.setAttribute('data-quota', t.quota); div.setAttribute('data-level', level || 'ok');
    div.appendChild(text(t.id + ': ' + t.used + ' of ' + t.quota + ' (' + pct.toFixed(1) + ' %)' + (pct >= 100 ? ' — used up' : '')));
    const bar = document.createElement('div'); bar.className = 'bar' + (level ? ' ' + level : '');
    const fill = document.createElement('div'); fill.style.width = Math.min(100, pct) + '%'; bar.appendChild(fill); div.appendChild(bar);
    // At a glance: where this month's pace ends, and the day it runs out if that is before.
    if (t.pace && pct < 100) {
      const pace = document.createElement('div'); pace.className = 'pace-text ' + (t.pace.runs_out ? 'warn' : 'muted');
      pace.setAttribute('data-runs-out', t.pace.runs_out || '');
      pace.appendChild(text(t.pace.runs_out ? 'on pace for ' + t.pace.projected + ': runs out around ' + t.pace.runs_out : 'on pace for ' + t.pace.projected + ' this month'));
      div.appendChild(pace);
    }
    if (Array.isArray(t.days)) div.appendChild(drawDays(t));
    box.appendChild(div);
  }
}
// This month's calls per day beside the bar (issue #33): the quota's even pace as a dashed line.
function drawDays(t) {
  const w = 300, h = 34, days = t.days, n = Math.max(days.length, 1);
  const svg = svgEl('svg', { viewBox: '0 0 ' + w + ' ' + h, preserveAspectRatio: 'none', width: '100%', height: h, class: 'days', 'data-days': days.length, role: 'img', 'aria-label': t.id + ' calls per day this month' });
  const max = Math.max(1, ...days.map((d) => d.calls), t.quota > 0 && t.days_in_month ? t.quota / t.days_in_month : 0);
  const bw = w / (t.days_in_month || n);
  days.forEach((d, i) => {
    const bh = d.calls / max * (h - 2);
    const r = svgEl('rect', { x: (i * bw + 0.5).toFixed(1), y: (h - bh).toFixed(1), width: Math.max(1, bw - 1).toFixed(1), height: bh.toFixed(1), fill: '#60a5fa' });
    const title = svgEl('title', {}); title.textContent = d.date + ': ' + d.calls + ' calls'; r.appendChild(title);
    svg.appendChild(r);
  });
  if (t.quota > 0 && t.days_in_month) {
    const pace = h - (t.quota / t.days_in_month) / max * (h - 2);
    svg.appendChild(svgEl('line', { x1: 0, y1: pace, x2: w, y2: pace, stroke: '#9ca3af', 'stroke-dasharray': '3 3', class: 'pace' }));
  }
  return svg;
}
function drawAlerts(alerts) {
  const box = $('alerts'); box.replaceChildren();
  for (const a of alerts) { const d = document.createElement('div'); d.className = 'alert'; d.textContent = a; box.appendChild(d); }
}
function drawServer(s) {
  clear('server');
  const u = s.upstream;
  const ustate = u.state === 'failing' ? { cls: 'bad', v: 'failing' } : u.state === 'ok' ? { cls: 'ok', v: 'answering' } : { cls: 'muted', v: 'no calls in 5 min' };
  row($('server'), ['server', ustate], { 'data-upstream': u.state });
  row($('server'), ['server version', s.server.version]);
  row($('server'), ['time to headers (5 min avg)', u.latency_ms === null ? null : u.latency_ms + ' ms']);
  row($('server'), ['failed (5xx, 502, 504), 5 min', u.errors_5m + ' of ' + u.calls_5m + (u.calls_5m ? ' (' + (u.error_share * 100).toFixed(0) + ' %)' : '')], { 'data-errors': String(u.errors_5m) });
  if (u.last_error) row($('server'), ['last failure', hhmm(u.last_error.at) + ' ' + (u.last_error.status || '') + ' ' + (u.last_error.error || '')]);
  const st = s.store.kind === 'memory' ? { cls: 'muted', v: 'memory (this process)' } : s.store.ready ? { cls: 'ok', v: s.store.kind + ', answering' } : { cls: 'bad', v: s.store.kind + ', NOT answering' };
  row($('server'), ['store', st], { 'data-store': s.store.ready ? 'up' : 'down' });
  const rep = $('report'); rep.replaceChildren();
  const sv = s.server;
  if (sv.unavailable) {
    const p = document.createElement('p'); p.className = 'muted'; p.setAttribute('data-next', sv.next || '');
    p.appendChild(text('The upgrade report is not available while the store does not answer.')); rep.appendChild(p);
  } else if (sv.next !== null) {
    const calls = (r) => r === null ? 0 : r.entries.reduce((n, e) => n + e.calls, 0);
    const p = document.createElement('p'); p.setAttribute('data-next', sv.next);
    p.appendChild(text('Upgrade to ' + sv.next + ': ' + (calls(sv.upgrade_report) === 0 ? 'no call seen would break.' : calls(sv.upgrade_report) + ' calls seen would break.')));
    rep.appendChild(p);
    if (sv.next_breaking !== null && sv.next_breaking.version !== sv.next) {
      const b = document.createElement('p'); b.className = 'warn'; b.setAttribute('data-breaking', sv.next_breaking.version);
      const ids = sv.next_breaking.report ? sv.next_breaking.report.entries.filter((e) => e.calls > 0).map((e) => e.id + ' (' + e.calls + ')').join(', ') : '';
      b.appendChild(text('The first release that breaks calls seen: ' + sv.next_breaking.version + ', ' + sv.next_breaking.calls + ' calls: ' + ids));
      rep.appendChild(b);
    } else if (sv.next_breaking !== null) {
      const ids = sv.upgrade_report.entries.filter((e) => e.calls > 0).map((e) => e.id + ' (' + e.calls + ')').join(', ');
      const b = document.createElement('p'); b.className = 'warn'; b.setAttribute('data-breaking', sv.next); b.appendChild(text('Breaks: ' + ids)); rep.appendChild(b);
    } else {
      const b = document.createElement('p'); b.className = 'muted'; b.appendChild(text('No release the history knows breaks a call seen in the last 35 days.')); rep.appendChild(b);
    }
  }
}
function draw(s) {
  $('version').textContent = s.version + ' · ' + s.processes + ' process' + (s.processes === 1 ? '' : 'es') + ' · up ' + s.uptime_s + ' s';
  drawAlerts(s.alerts);
  drawChart(s.traffic);
  clear('busiest');
  for (const b of s.busiest) {
    const tr = row($('busiest'), [b.key, { cls: 'w', v: [b.team && 'team ' + b.team, b.override && 'override ' + b.override].filter(Boolean).join(' · ') || '' }, b.calls], { 'data-key': b.key, 'data-calls': String(b.calls) });
    tr.firstChild.title = b.key;
  }
  clear('refusals'); const rs = Object.entries(s.refusals);
  if (rs.length === 0) row($('refusals'), ['none', 0]); for (const [r, n] of rs) row($('refusals'), [r, n], { 'data-reason': r });
  drawTeams(s.teams);
  clear('protect'); const p = s.protect;
  if (p === null) row($('protect'), ['no proxy process is serving', '']);
  else {
    const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
    row($('protect'), ['max_in_flight', String(p.max_in_flight)]); row($('protect'), ['ceiling', p.ceiling === null ? 'unlimited' : p.ceiling], { 'data-ceiling': String(p.ceiling) });
    row($('protect'), ['in flight', sum(p.in_flight)]); row($('protect'), ['waiting', sum(p.waiting)]); row($('protect'), ['shed', sum(p.shed)]);
    row($('protect'), ['unloaded / recent ms', (p.unloaded_ms === null ? '—' : p.unloaded_ms.toFixed(1)) + ' / ' + (p.recent_ms === null ? '—' : p.recent_ms.toFixed(1))]);
  }
  drawServer(s);
  $('config').textContent = JSON.stringify(s.config, null, 2);
  const trouble = s.alerts.length > 0;
  $('state').textContent = trouble ? 'live — ' + s.alerts.length + ' problem' + (s.alerts.length === 1 ? '' : 's') : 'live, all well';
  $('state').className = trouble ? 'bad' : 'ok';
  $('updated').textContent = new Date().toLocaleTimeString();
  document.body.setAttribute('data-loaded', String(Date.now()));
}
// The origin, not the document's URL: a page opened as http://user:token@host/ has credentials
// in its URL, and a fetch() relative to it is refused (issue #34); the browser still sends the
// login it holds for the origin.
const STATUS_URL = new URL('/v1/status', location.origin).href;
async function refresh() {
  try {
    const r = await fetch(STATUS_URL, { credentials: 'same-origin', cache: 'no-store' });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    draw(await r.json());
  } catch (e) { $('state').textContent = 'could not refresh: ' + e.message; $('state').className = 'bad'; }
}
// A base's history on request (SPEC §5): this month's days, from /v1/usage/history.
$('history-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const box = $('history'); box.replaceChildren();
  const base = $('history-base').value.trim();
  try {
    const r = await fetch(new URL('/v1/usage/history?base=' + encodeURIComponent(base), location.origin).href, { credentials: 'same-origin', cache: 'no-store' });
    const h = await r.json();
    if (!r.ok) { box.appendChild(text(h.error_msg || ('HTTP ' + r.status))); return; }
    const total = h.days.reduce((a, d) => a + d.calls, 0);
    const p = document.createElement('div'); p.setAttribute('data-history', h.key); p.setAttribute('data-total', String(total));
    p.appendChild(text(h.key + ': ' + total + ' calls from ' + h.from + ' to ' + h.to));
    box.appendChild(p);
    box.appendChild(drawDays({ id: h.key, days: h.days, quota: 0, days_in_month: h.days.length }));
  } catch (e) { box.appendChild(text('could not read: ' + e.message)); }
});
refresh(); setInterval(refresh, 5000);
`
