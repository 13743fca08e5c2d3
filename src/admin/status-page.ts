import { columnOf } from '../http/outcomes.js'
import { createHash } from 'node:crypto'

// SPEC §7: the status page. One document, no asset from outside, and nothing it runs or styles
// but its own: its one script and one style are inline, and the CSP admits exactly them by
// their hash (no 'unsafe-inline': issue #39 item 5). Inline, not fetched: a page opened as
// http://admin:TOKEN@host/ may not load sub-resources from a URL holding credentials. It
// fetches /v1/status (same origin, the same credentials the browser sent for the page) every
// 5 s and draws it: an SVG chart drawn at the pixels it has, the team bars and days, the
// busiest keys, the protection, the server and the store, and since when a problem is on.

export const STATUS_CSS = `  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2330; background: #fafbfc; }
  h1 { font-size: 1.3em; margin: 0 0 .2em; } h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }
  .muted { color: #6b7280; } .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(22em, 100%), 1fr)); gap: 1em; }
  section { background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; padding: .8em 1em; min-width: 0; }
  section.block { margin-top: 1em; } h2.first { margin-top: 0; }
  table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: .15em .4em; border-bottom: 1px solid #f0f1f3; vertical-align: top; }
  td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; } td.n { white-space: nowrap; }
  .bar { background: #eef0f3; height: .9em; border-radius: 3px; overflow: hidden; }
  .bar > div { height: 100%; background: #3b82f6; } .amber > div { background: #f59e0b; } .red > div { background: #dc2626; }
  .swatch { display: inline-block; width: 1.4em; height: 0; margin-right: .4em; vertical-align: middle; border-top: 3px solid; }
  pre { max-height: 24em; overflow: auto; background: #f6f7f9; padding: .6em; font-size: 12px; }
  #state.bad, .bad { color: #b91c1c; font-weight: 600; } .ok { color: #15803d; } .warn { color: #b45309; }
  #alerts, #recoveries { margin-top: .6em; }
  #alerts div { background: #fef2f2; border: 1px solid #fca5a5; color: #991b1b; border-radius: 6px; padding: .5em .8em; margin-top: .4em; font-weight: 600; }
  #recoveries div { background: #f0fdf4; border: 1px solid #86efac; color: #166534; border-radius: 6px; padding: .4em .8em; margin-top: .4em; }
  #chart-box { width: 100%; } #chart { display: block; width: 100%; height: 240px; }
  #chart text { font-size: 11px; fill: #4b5563; } #chart .grid-line { stroke: #eef0f3; }
  #busiest td.key { word-break: break-all; } #busiest .who { display: block; color: #6b7280; font-size: 12px; word-break: normal; }
  .team { margin-bottom: .9em; } .days { display: block; margin-top: .2em; width: 100%; height: 58px; }
  .days text { font-size: 10px; fill: #4b5563; } .days-text { font-size: 12px; color: #4b5563; }
  .exports a, .team a { font-size: 12px; }
  #history-form { display: flex; flex-wrap: wrap; gap: .4em; } #history-base { flex: 1 1 16em; min-width: 0; max-width: 100%; box-sizing: border-box; }
  @media (min-width: 1000px) { .wide { grid-column: span 2; } }
  @media (max-width: 480px) { body { margin: .6em; } section { padding: .6em; } }
  .use { display: block; margin-top: 2px; width: 100%; max-width: 220px; height: 12px; } .use .p50 { fill: #cbd5e1; } .use .p90 { fill: #94a3b8; } .use .p99 { fill: #475569; } .use .max { fill: #0f172a; } .use .limit { stroke: #dc2626; stroke-width: 2; vector-effect: non-scaling-stroke; }
`

export const STATUS_JS = `// One colour per outcome, each its own hue (issue #41): what went on in greys and blue, the
// server's own failures in reds, each kind of refusal apart. Classes keep their own dash.
const OUTCOME_COLOR = ${JSON.stringify({ ...columnOf('color'), dry_run: '#2563eb' })};
const CLASS_DASH = { base: '', account: '7 3', auth_token: '2 3', other: '10 3 2 3' };
const colorOf = (name) => OUTCOME_COLOR[name.slice(name.indexOf('/') + 1)] || '#94a3b8';
const dashOf = (name) => CLASS_DASH[name.slice(0, name.indexOf('/'))] ?? '1 3';
const $ = (id) => document.getElementById(id);
const text = (v) => document.createTextNode(v === null || v === undefined ? '—' : String(v));
const ns = 'http://www.w3.org/2000/svg';
function svgEl(tag, attrs, content) {
  const e = document.createElementNS(ns, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (content !== undefined) e.textContent = content;
  return e;
}
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
const hhmmss = (ms) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const shortDate = (iso) => new Date(iso + 'T12:00:00Z').toLocaleDateString([], { month: 'short', day: 'numeric', timeZone: 'UTC' });
/** 75 s as "1 min 15 s", 4000 s as "1 h 6 min". */
function lasted(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min' + (s % 60 ? ' ' + (s % 60) + ' s' : '');
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}
const perS = (v) => (v >= 10 ? Math.round(v) : Math.round(v * 10) / 10);
/** 3 to 5 round steps from 0 past max (so one burst does not flatten the rest unread). */
function niceTicks(max) {
  const m = max > 0 ? max : 1;
  const raw = m / 4;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / p;
  const step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  const top = Math.ceil(m / step) * step;
  const ticks = [];
  for (let v = 0; v <= top + step / 1000; v += step) ticks.push(Math.round(v * 1000) / 1000);
  return { top, ticks };
}
let lastStatus = null;
// The chart is drawn at the pixels it has (no stretching: its labels stay their font's size on a
// phone), with y ticks and the last 15 minutes' times below.
function drawChart(traffic) {
  const svg = $('chart'); svg.replaceChildren();
  const W = Math.max(280, Math.round($('chart-box').clientWidth || 900)), H = 240;
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H); svg.setAttribute('height', H);
  const names = Object.keys(traffic.series).sort();
  const step = traffic.step_s;
  let max = 0;
  for (const n of names) for (const v of traffic.series[n]) max = Math.max(max, v / step);
  const { top: yTop, ticks } = niceTicks(max);
  const left = 44, right = W - 8, topY = 10, bottom = H - 30;
  const y = (v) => bottom - (v / yTop) * (bottom - topY);
  for (const t of ticks) {
    svg.appendChild(svgEl('line', { x1: left, y1: y(t), x2: right, y2: y(t), class: 'grid-line' }));
    svg.appendChild(svgEl('text', { x: left - 6, y: y(t) + 4, 'text-anchor': 'end', class: 'ytick' }, (t >= 10 ? Math.round(t) : t) + (t === yTop ? '/s' : '')));
  }
  svg.appendChild(svgEl('line', { x1: left, y1: bottom, x2: right, y2: bottom, stroke: '#9ca3af' }));
  const points = (traffic.series[names[0]] || new Array(90).fill(0)).length;
  const x = (i) => left + i * (right - left) / (points - 1);
  const endMs = traffic.end * 1000;
  // Four times on a wide chart; on a narrow one the start and now only (they would overlap).
  const marks = W < 520 ? [15, 0] : [15, 10, 5, 0];
  for (const back of marks) {
    // Never left of the axis: at 90 points, −15 min is one step before the first, and its mark
    // sat under the y axis's 0, which then read ".0" (issue #49).
    const at = Math.max(left, x(points - 1 - back * 60 / step));
    svg.appendChild(svgEl('line', { x1: at, y1: bottom, x2: at, y2: bottom + 5, stroke: '#9ca3af' }));
    const anchor = back === 15 ? 'start' : back === 0 ? 'end' : 'middle';
    const label = back === 0 ? 'now ' + hhmm(endMs) : '−' + back + ' min ' + hhmm(endMs - back * 60000);
    svg.appendChild(svgEl('text', { x: at, y: H - 10, 'text-anchor': anchor, class: 'tick' }, label));
  }
  for (const n of names) {
    const values = traffic.series[n];
    const pts = values.map((v, i) => x(i).toFixed(1) + ',' + y(v / step).toFixed(1)).join(' ');
    svg.appendChild(svgEl('polyline', { points: pts, fill: 'none', 'stroke-width': 1.8, stroke: colorOf(n), 'stroke-dasharray': dashOf(n), 'data-series': n, 'data-total': values.reduce((a, b) => a + b, 0) }));
  }
  clear('series');
  for (const n of names) {
    const values = traffic.series[n];
    const total = values.reduce((a, b) => a + b, 0);
    // The last whole step: the one under way has only part of its calls yet.
    const recent = values.length > 1 ? values[values.length - 2] : 0;
    const tr = row($('series'), [n, total, perS(recent / step)], { 'data-series': n, 'data-total': String(total), 'data-color': colorOf(n), 'data-rate': String(recent / step) });
    const sw = document.createElement('span'); sw.className = 'swatch'; sw.style.borderTopColor = colorOf(n);
    if (dashOf(n)) sw.style.borderTopStyle = 'dashed';
    tr.firstChild.prepend(sw);
  }
}
function link(href, label) { const a = document.createElement('a'); a.href = href; a.textContent = label; return a; }
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
    // During a store outage: the last figures read, which basegate goes on refusing from.
    if (t.as_of_ms) { div.setAttribute('data-as-of', String(t.as_of_ms)); div.appendChild(text(' — as of ' + hhmmss(t.as_of_ms) + ', while the store does not answer')); }
    const bar = document.createElement('div'); bar.className = 'bar' + (level ? ' ' + level : '');
    const fill = document.createElement('div'); fill.style.width = Math.min(100, pct) + '%'; bar.appendChild(fill); div.appendChild(bar);
    // At a glance: where the last week's pace ends, and the day it runs out if that is before.
    if (t.pace && pct < 100) {
      const pace = document.createElement('div'); pace.className = 'pace-text ' + (t.pace.runs_out ? 'warn' : 'muted');
      pace.setAttribute('data-runs-out', t.pace.runs_out || '');
      const per = ' (' + t.pace.per_day + ' a day over the last 7 days and today)';
      pace.appendChild(text(t.pace.used_up_on ? 'used up on ' + t.pace.used_up_on + ': its calls get 429 until the month ends' + per : t.pace.runs_out ? 'on pace for ' + t.pace.projected + per + ': runs out around ' + t.pace.runs_out : 'on pace for ' + t.pace.projected + ' this month' + per));
      div.appendChild(pace);
    }
    box.appendChild(div);
    if (Array.isArray(t.days)) drawDays(div, t, box.clientWidth);
    const csv = link('/v1/usage/history?team=' + encodeURIComponent(t.id) + '&format=csv', 'days (CSV)');
    const p = document.createElement('div'); p.appendChild(csv); div.appendChild(p);
  }
}
// A month's calls per day (issue #41: its dates and numbers readable without hovering): the
// first and last date under it, the busiest day's count on it, and a line of text below; the
// quota's even pace as a dashed line.
function drawDays(into, t, width) {
  const W = Math.max(200, Math.round(width || 300)), H = 58, barsH = 38, days = t.days;
  const n = t.days_in_month || Math.max(days.length, 1);
  const svg = svgEl('svg', { viewBox: '0 0 ' + W + ' ' + H, height: H, class: 'days', 'data-days': days.length, role: 'img', 'aria-label': t.id + ' calls per day' });
  const even = t.quota > 0 && t.days_in_month ? t.quota / t.days_in_month : 0;
  const max = Math.max(1, ...days.map((d) => d.calls), even);
  const bw = W / n;
  let busiest = null;
  days.forEach((d, i) => {
    const bh = d.calls / max * (barsH - 12);
    const r = svgEl('rect', { x: (i * bw + 0.5).toFixed(1), y: (barsH - bh).toFixed(1), width: Math.max(1, bw - 1).toFixed(1), height: bh.toFixed(1), fill: d.credited > 0 ? '#22c55e' : '#60a5fa', 'data-date': d.date, 'data-calls': d.calls });
    r.appendChild(svgEl('title', {}, d.date + ': ' + d.calls + ' calls' + (d.credited ? ', ' + d.credited + ' credited' : '')));
    svg.appendChild(r);
    if (busiest === null || d.calls > busiest.d.calls) busiest = { d, i };
  });
  if (busiest !== null && busiest.d.calls > 0) {
    const bx = Math.min(W - 2, Math.max(2, busiest.i * bw + bw / 2));
    svg.appendChild(svgEl('text', { x: bx, y: 9, 'text-anchor': bx < W / 4 ? 'start' : bx > W * 3 / 4 ? 'end' : 'middle', class: 'peak' }, String(busiest.d.calls)));
  }
  if (even > 0) {
    const pace = barsH - even / max * (barsH - 12);
    svg.appendChild(svgEl('line', { x1: 0, y1: pace, x2: W, y2: pace, stroke: '#9ca3af', 'stroke-dasharray': '3 3', class: 'pace' }));
  }
  svg.appendChild(svgEl('line', { x1: 0, y1: barsH + 0.5, x2: W, y2: barsH + 0.5, stroke: '#d1d5db' }));
  if (days.length > 0) {
    svg.appendChild(svgEl('text', { x: 0, y: H - 6, 'text-anchor': 'start', class: 'date' }, shortDate(days[0].date)));
    if (days.length > 1) {
      const lx = Math.min(W, (days.length - 0.5) * bw);
      svg.appendChild(svgEl('text', { x: lx, y: H - 6, 'text-anchor': lx > W - 40 ? 'end' : 'middle', class: 'date' }, shortDate(days[days.length - 1].date)));
    }
  }
  into.appendChild(svg);
  if (days.length > 0) {
    const today = days[days.length - 1];
    const credited = days.reduce((a, d) => a + (d.credited || 0), 0);
    const line = document.createElement('div'); line.className = 'days-text';
    line.appendChild(text('today ' + today.calls + (busiest && busiest.d.calls > 0 ? ' · busiest ' + busiest.d.calls + ' on ' + shortDate(busiest.d.date) : '') + (credited ? ' · credited ' + credited + ' (its days in green)' : '')));
    into.appendChild(line);
  }
}
function drawAlerts(alerts, recoveries, nowMs) {
  const box = $('alerts'); box.replaceChildren();
  for (const a of alerts) {
    const d = document.createElement('div'); d.className = 'alert'; d.setAttribute('data-kind', a.kind);
    d.textContent = a.text + (a.since_ms ? ' — since ' + hhmmss(a.since_ms) + ' (' + lasted((nowMs - a.since_ms) / 1000) + ')' : '');
    box.appendChild(d);
  }
  const ok = $('recoveries'); ok.replaceChildren();
  for (const r of recoveries) {
    const d = document.createElement('div'); d.className = 'recovery'; d.setAttribute('data-kind', r.kind); d.setAttribute('data-lasted', String(r.lasted_s));
    d.textContent = (r.kind === 'server' ? 'The server answers again' : 'The store answers again') + ' since ' + hhmmss(r.end_ms) + ', after ' + lasted(r.lasted_s) + (r.kind === 'server' ? ' of failures' : ' away') + ' (from ' + hhmmss(r.start_ms) + ').';
    ok.appendChild(d);
  }
}
function drawServer(s) {
  clear('server');
  const u = s.upstream;
  const ustate = u.state === 'failing' ? { cls: 'bad', v: 'failing' + (u.since_ms ? ' since ' + hhmmss(u.since_ms) : '') } : u.state === 'ok' ? { cls: 'ok', v: 'answering' } : { cls: 'muted', v: 'no calls in 5 min' };
  row($('server'), ['server', ustate], { 'data-upstream': u.state });
  row($('server'), ['server version', s.server.version]);
  row($('server'), ['time to headers (5 min avg)', u.latency_ms === null ? null : u.latency_ms + ' ms']);
  row($('server'), ['failed (5xx, 502, 504), last 20 s', u.errors_20s + ' of ' + u.calls_20s], { 'data-errors-20s': String(u.errors_20s) });
  row($('server'), ['failed (5xx, 502, 504), 5 min', u.errors_5m + ' of ' + u.calls_5m + (u.calls_5m ? ' (' + (u.error_share * 100).toFixed(0) + ' %)' : '')], { 'data-errors': String(u.errors_5m) });
  if (u.last_error) row($('server'), ['last failure', hhmmss(u.last_error.at) + ' ' + (u.last_error.status || '') + ' ' + (u.last_error.error || '')]);
  const st = s.store.kind === 'memory' ? { cls: 'muted', v: 'memory (this process)' } : s.store.ready ? { cls: 'ok', v: s.store.kind + ', answering' } : { cls: 'bad', v: s.store.kind + ', NOT answering' + (s.store.since_ms ? ' since ' + hhmmss(s.store.since_ms) : '') };
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
// A busy key whole, as operators search for it (issue #41): a base by its hyphenated UUID, its
// team and override on a line of their own; its admitted and refused calls apart.
function drawBusiest(busiest) {
  clear('busiest');
  for (const b of busiest) {
    const tr = row($('busiest'), [{ cls: 'key', v: b.name || b.key }, b.admitted, b.refused], { 'data-key': b.key, 'data-calls': String(b.calls), 'data-admitted': String(b.admitted), 'data-refused': String(b.refused) });
    const who = [b.team && 'team ' + b.team, b.override && 'override ' + b.override].filter(Boolean).join(' · ');
    if (who) { const s = document.createElement('span'); s.className = 'who'; s.textContent = who; tr.firstChild.appendChild(s); }
  }
}
// SPEC §11: each limit in force beside the keys' busiest minute (p50 to max as shades on one
// scale, the most a minute can hold under the limit as a red line), so a limit far above all
// use, or one that cuts into ordinary traffic, shows at a glance.
function drawLimits(t) {
  clear('limits');
  const note = $('limits-note');
  if (t === null || t === undefined) { note.textContent = 'worked out in the background from the kept evidence; shown here within a minute'; return; }
  note.textContent = 'as of ' + new Date(t.as_of_ms).toLocaleTimeString() + ' · suggested: the lowest N/min no key passed on 99 % of its days, and with headroom (its 1.5 ×, never below the busiest minute: what to set); npx basegate tune-report says what each would refuse' + t.limits.filter((l) => l.note).map((l) => ' · ' + l.id + ': ' + l.note).join('');
  if (t.limits.length === 0) row($('limits'), ['no calls kept yet', '', '', '', '']);
  for (const l of t.limits) {
    const tr = row($('limits'), [l.id, l.limit, l.keys, l.p50 + ' · ' + l.p90 + ' · ' + l.p99 + ' · ' + l.max, l.suggested + ' (with headroom ' + l.with_headroom + ')'], { 'data-limit-id': l.id, 'data-p99': String(l.p99), 'data-max': String(l.max), 'data-per-minute': String(l.per_minute) });
    const top = Math.max(1, l.max, l.per_minute || 0) * 1.05;
    const w = 220, x = (v) => (v / top) * w;
    // Drawn on a 220-wide box and scaled to its cell (at most 220 px): on a phone the column narrows with the table.
    const svg = svgEl('svg', { class: 'use', viewBox: '0 0 ' + w + ' 12', preserveAspectRatio: 'none' });
    svg.appendChild(svgEl('rect', { class: 'p50', x: 0, y: 3, width: x(l.p50), height: 6 }));
    svg.appendChild(svgEl('rect', { class: 'p90', x: x(l.p50), y: 3, width: Math.max(0, x(l.p90) - x(l.p50)), height: 6 }));
    svg.appendChild(svgEl('rect', { class: 'p99', x: x(l.p90), y: 3, width: Math.max(0, x(l.p99) - x(l.p90)), height: 6 }));
    svg.appendChild(svgEl('circle', { class: 'max', cx: x(l.max), cy: 6, r: 2.5 }));
    if (l.per_minute !== null) svg.appendChild(svgEl('line', { class: 'limit', x1: x(l.per_minute), x2: x(l.per_minute), y1: 0, y2: 12 }));
    tr.children[3].appendChild(svg);
  }
}
function draw(s) {
  lastStatus = s;
  const nowMs = Date.now();
  $('version').textContent = s.version + ' · ' + s.processes + ' process' + (s.processes === 1 ? '' : 'es') + ' · up ' + lasted(s.uptime_s);
  drawAlerts(s.alerts, s.recoveries || [], nowMs);
  drawChart(s.traffic);
  drawBusiest(s.busiest);
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
  drawLimits(s.tuning);
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
    const q = '/v1/usage/history?base=' + encodeURIComponent(base);
    const r = await fetch(new URL(q, location.origin).href, { credentials: 'same-origin', cache: 'no-store' });
    const h = await r.json();
    if (!r.ok) { box.appendChild(text(h.error_msg || ('HTTP ' + r.status))); return; }
    const total = h.days.reduce((a, d) => a + d.calls, 0);
    const p = document.createElement('div'); p.setAttribute('data-history', h.key); p.setAttribute('data-total', String(total));
    p.appendChild(text((h.id || h.key) + ': ' + total + ' calls from ' + h.from + ' to ' + h.to + ' '));
    p.appendChild(link(q + '&format=csv', '(CSV)'));
    box.appendChild(p);
    drawDays(box, { id: h.key, days: h.days, quota: 0, days_in_month: h.days.length }, box.clientWidth);
  } catch (e) { box.appendChild(text('could not read: ' + e.message)); }
});
// Redrawn at the width the window now gives (a phone turned, a window resized).
let resizing = null;
window.addEventListener('resize', () => { clearTimeout(resizing); resizing = setTimeout(() => lastStatus && draw(lastStatus), 150); });
refresh(); setInterval(refresh, 5000);
`

export const STATUS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>basegate status</title>
<style>${STATUS_CSS}</style>
</head>
<body>
<h1>basegate <span id="version" class="muted"></span></h1>
<div class="muted"><span id="state">loading…</span> · refreshed every 5 s · <span id="updated"></span></div>
<div id="alerts" role="alert"></div>
<div id="recoveries"></div>
<section class="block">
  <h2 class="first">Calls per second, last 15 minutes, by class and outcome</h2>
  <div id="chart-box"><svg id="chart" role="img" aria-label="calls per second"></svg></div>
  <table id="series"><thead><tr><th>class / outcome</th><th class="n">calls (15 min)</th><th class="n">per s (last 10 s)</th></tr></thead><tbody></tbody></table>
</section>
<div class="grid">
  <section class="wide"><h2>Busiest keys (15 min)</h2><table id="busiest"><thead><tr><th>key</th><th class="n">admitted</th><th class="n">refused</th></tr></thead><tbody></tbody></table></section>
  <section><h2>Refusals and sheds (15 min)</h2><table id="refusals"><tbody></tbody></table></section>
  <section><h2>Teams this month</h2><div id="teams"></div><p class="exports"><a id="export-month" href="/v1/usage/export?format=csv">Export this month: every team and base (CSV)</a></p></section>
  <section><h2>Server protection</h2><table id="protect"><tbody></tbody></table></section>
  <section class="wide"><h2>Limits against use: each key's busiest minute, last 7 days</h2><table id="limits"><thead><tr><th>window</th><th>in force</th><th class="n">keys</th><th>busiest minute (p50 · p90 · p99 · max)</th><th>suggested</th></tr></thead><tbody></tbody></table><p id="limits-note" class="muted"></p></section>
  <section class="wide"><h2>Server and store</h2><table id="server"><tbody></tbody></table><div id="report"></div></section>
</div>
<section class="block"><h2 class="first">A base's calls per day</h2>
  <form id="history-form"><input id="history-base" placeholder="base UUID" aria-label="base UUID" autocomplete="off"> <button type="submit">Show this month</button></form>
  <div id="history" class="muted"></div>
</section>
<section class="block"><h2 class="first">Configuration in force (secrets masked)</h2><pre id="config"></pre></section>
<script>${STATUS_JS}</script>
</body>
</html>
`

const sha256 = (text: string) =>
  `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`

/** The page's CSP: its own script and style only, fetches to its origin, never framed. */
export const STATUS_CSP = `default-src 'none'; script-src ${sha256(STATUS_JS)}; style-src ${sha256(STATUS_CSS)}; connect-src 'self'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'`
