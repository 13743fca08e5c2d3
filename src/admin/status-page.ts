// SPEC §7: the status page. One document, no asset from outside: it fetches /v1/status (same
// origin, the same credentials the browser sent for the page) every 5 s and draws it: an inline
// SVG chart, the team bars, the busiest keys, the protection, the server and the store.

export const STATUS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>basegate status</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d2330; background: #fafbfc; }
  h1 { font-size: 1.3em; margin: 0 0 .2em; } h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }
  .muted { color: #6b7280; } .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(22em, 1fr)); gap: 1em; }
  section { background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; padding: .8em 1em; }
  table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: .15em .4em; border-bottom: 1px solid #f0f1f3; }
  td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
  .bar { background: #eef0f3; height: .9em; border-radius: 3px; overflow: hidden; }
  .bar > div { height: 100%; background: #3b82f6; } .amber > div { background: #f59e0b; } .red > div { background: #dc2626; }
  .swatch { display: inline-block; width: .8em; height: .8em; margin-right: .3em; border-radius: 2px; }
  pre { max-height: 24em; overflow: auto; background: #f6f7f9; padding: .6em; font-size: 12px; }
  #state.bad { color: #dc2626; }
</style>
</head>
<body>
<h1>basegate <span id="version" class="muted"></span></h1>
<div class="muted"><span id="state">loading…</span> · refreshed every 5 s · <span id="updated"></span></div>
<section style="margin-top:1em">
  <h2 style="margin-top:0">Calls per second, last 15 minutes, by class and outcome</h2>
  <svg id="chart" viewBox="0 0 900 220" preserveAspectRatio="none" width="100%" height="220" role="img" aria-label="calls per second"></svg>
  <table id="series"><thead><tr><th>class / outcome</th><th class="n">calls (15 min)</th><th class="n">per s now</th></tr></thead><tbody></tbody></table>
</section>
<div class="grid">
  <section><h2>Busiest keys (15 min)</h2><table id="busiest"><thead><tr><th>key</th><th class="n">calls</th></tr></thead><tbody></tbody></table></section>
  <section><h2>Refusals and sheds (15 min)</h2><table id="refusals"><tbody></tbody></table></section>
  <section><h2>Teams this month</h2><div id="teams"></div></section>
  <section><h2>Server protection</h2><table id="protect"><tbody></tbody></table></section>
  <section><h2>Server and store</h2><table id="server"><tbody></tbody></table><div id="report"></div></section>
</div>
<section style="margin-top:1em"><h2 style="margin-top:0">Configuration in force (secrets masked)</h2><pre id="config"></pre></section>
<script>
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#f59e0b', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#ea580c', '#475569'];
const $ = (id) => document.getElementById(id);
const text = (v) => document.createTextNode(v === null || v === undefined ? '—' : String(v));
function row(table, cells, attrs) {
  const tr = document.createElement('tr');
  for (const [k, v] of Object.entries(attrs || {})) tr.setAttribute(k, v);
  cells.forEach((c, i) => { const td = document.createElement('td'); if (i > 0 && typeof c === 'number') td.className = 'n'; td.appendChild(text(c)); tr.appendChild(td); });
  table.querySelector('tbody').appendChild(tr);
}
function clear(id) { $(id).querySelector('tbody').replaceChildren(); }
function drawChart(traffic) {
  const svg = $('chart'); svg.replaceChildren();
  const names = Object.keys(traffic.series).sort();
  const step = traffic.step_s;
  let max = 1;
  for (const n of names) for (const v of traffic.series[n]) max = Math.max(max, v / step);
  const ns = 'http://www.w3.org/2000/svg';
  const axis = document.createElementNS(ns, 'text');
  axis.setAttribute('x', '4'); axis.setAttribute('y', '12'); axis.setAttribute('font-size', '11'); axis.textContent = max.toFixed(1) + '/s';
  svg.appendChild(axis);
  names.forEach((n, k) => {
    const values = traffic.series[n];
    const pts = values.map((v, i) => (i * 900 / (values.length - 1)).toFixed(1) + ',' + (210 - (v / step) / max * 190).toFixed(1)).join(' ');
    const line = document.createElementNS(ns, 'polyline');
    line.setAttribute('points', pts); line.setAttribute('fill', 'none'); line.setAttribute('stroke-width', '1.5');
    line.setAttribute('stroke', COLORS[k % COLORS.length]); line.setAttribute('data-series', n);
    line.setAttribute('data-total', String(values.reduce((a, b) => a + b, 0)));
    svg.appendChild(line);
  });
  clear('series');
  names.forEach((n, k) => {
    const values = traffic.series[n];
    const total = values.reduce((a, b) => a + b, 0);
    row($('series'), [n, total, Number((values[values.length - 1] / step).toFixed(1))], { 'data-series': n, 'data-total': String(total) });
    const sw = document.createElement('span'); sw.className = 'swatch'; sw.style.background = COLORS[k % COLORS.length];
    $('series').querySelector('tbody').lastChild.firstChild.prepend(sw);
  });
}
function drawTeams(teams) {
  const box = $('teams'); box.replaceChildren();
  if (teams.length === 0) box.appendChild(text('no monthly quotas in force'));
  for (const t of teams) {
    const pct = t.quota > 0 ? t.used / t.quota * 100 : 0;
    const div = document.createElement('div');
    div.className = 'team'; div.setAttribute('data-team', t.id); div.setAttribute('data-used', t.used); div.setAttribute('data-quota', t.quota);
    div.appendChild(text(t.id + ': ' + t.used + ' of ' + t.quota + ' (' + pct.toFixed(1) + ' %)'));
    const bar = document.createElement('div'); bar.className = 'bar' + (pct > 100 ? ' red' : pct > 80 ? ' amber' : '');
    const fill = document.createElement('div'); fill.style.width = Math.min(100, pct) + '%'; bar.appendChild(fill); div.appendChild(bar);
    box.appendChild(div);
  }
}
function draw(s) {
  $('version').textContent = s.version + ' · ' + s.processes + ' process' + (s.processes === 1 ? '' : 'es') + ' · up ' + s.uptime_s + ' s';
  drawChart(s.traffic);
  clear('busiest'); for (const b of s.busiest) row($('busiest'), [b.key, b.calls], { 'data-key': b.key, 'data-calls': String(b.calls) });
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
  clear('server');
  row($('server'), ['server version', s.server.version]); row($('server'), ['store', s.store.kind + (s.store.ready ? ' (answering)' : ' (NOT answering)')]);
  const rep = $('report'); rep.replaceChildren();
  if (s.server.next !== null && s.server.upgrade_report !== null) {
    const rows = s.server.upgrade_report.entries || s.server.upgrade_report.rows || [];
    const breaking = rows.filter((e) => e.calls > 0);
    rep.appendChild(text('Upgrade to ' + s.server.next + ': ' + (breaking.length === 0 ? 'no call seen would break' : breaking.length + ' change(s) would break calls: ' + breaking.map((e) => e.id + ' (' + e.calls + ')').join(', '))));
  }
  $('config').textContent = JSON.stringify(s.config, null, 2);
  $('state').textContent = 'live'; $('state').className = ''; $('updated').textContent = new Date().toLocaleTimeString();
  document.body.setAttribute('data-loaded', String(Date.now()));
}
async function refresh() {
  try {
    const r = await fetch('/v1/status', { credentials: 'same-origin', cache: 'no-store' });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    draw(await r.json());
  } catch (e) { $('state').textContent = 'could not refresh: ' + e.message; $('state').className = 'bad'; }
}
refresh(); setInterval(refresh, 5000);
</script>
</body>
</html>
`
