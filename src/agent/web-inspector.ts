/**
 * The local inspector: one page at `/inspect/http` (and `/status`) with its script and style,
 * served by the agent itself (nothing from a CDN: it works offline). It reads the agent API:
 * the requests as they happen (polled twice a second), each with its headers and body (JSON
 * pretty-printed, form fields listed, binary as hex, the capture limit stated), replay and
 * replay with changes, a filter, and the status of the session and of each tunnel.
 */

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Burrow agent inspector</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/inspector.css"></head>
<body>
<header><strong>Burrow agent</strong>
<nav><a href="/inspect/http" id="nav-http">Requests</a> <a href="/status" id="nav-status">Status</a></nav></header>
<main id="http-view">
  <section id="list-pane">
    <div class="bar"><input id="filter" placeholder="Filter: method, path, status, tunnel" aria-label="filter">
    <button id="clear" type="button">Clear</button></div>
    <table id="requests"><thead><tr><th>Time</th><th>Method</th><th>Path</th><th>Status</th><th>Duration</th><th>Tunnel</th></tr></thead>
    <tbody></tbody></table>
    <p id="empty">No requests yet. Requests to your tunnels appear here as they happen.</p>
  </section>
  <section id="detail-pane" hidden>
    <div class="bar"><button id="replay" type="button">Replay</button>
    <button id="edit" type="button">Replay with changes</button> <span id="replay-note"></span></div>
    <form id="edit-form" hidden>
      <label>Method <input name="method"></label> <label>Path <input name="uri" size="40"></label>
      <label>Headers (JSON) <textarea name="headers" rows="6"></textarea></label>
      <label>Body <textarea name="body" rows="6"></textarea></label>
      <button type="submit">Send</button></form>
    <h2 id="detail-title"></h2>
    <h3>Request</h3><div id="request-detail"></div>
    <h3>Response</h3><div id="response-detail"></div>
  </section>
</main>
<main id="status-view" hidden>
  <h2>Session</h2><dl id="session"></dl>
  <h2>Tunnels</h2>
  <table id="tunnels"><thead><tr><th>Name</th><th>URL</th><th>Forwards to</th><th>Requests</th><th>Rate (1m/5m/15m)</th><th>p50</th><th>p90</th><th>p99</th></tr></thead><tbody></tbody></table>
</main>
<script src="/assets/inspector.js"></script>
</body></html>
`;

const STYLE = `
[hidden] { display: none !important; }
body { font: 14px system-ui, sans-serif; margin: 0; color: #1d2330; }
header { display: flex; gap: 2em; align-items: center; padding: .6em 1em; background: #1d2330; color: #fff; }
header a { color: #cfe0ff; margin-right: 1em; }
main { display: flex; gap: 1em; padding: 1em; }
#list-pane { flex: 1 1 50%; min-width: 0; }
#detail-pane { flex: 1 1 50%; min-width: 0; border-left: 1px solid #ddd; padding-left: 1em; }
#status-view { display: block; }
.bar { display: flex; gap: .5em; margin-bottom: .5em; align-items: center; }
#filter { flex: 1; padding: .3em; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .25em .5em; border-bottom: 1px solid #eee; white-space: nowrap; }
td.path { overflow: hidden; text-overflow: ellipsis; max-width: 24em; }
tbody tr { cursor: pointer; } tbody tr.selected { background: #e6efff; }
.s2 { color: #17733a; } .s3 { color: #555; } .s4 { color: #a15c00; } .s5 { color: #b00020; }
pre { background: #f6f7f9; padding: .5em; overflow: auto; max-height: 24em; white-space: pre-wrap; word-break: break-all; }
.note { color: #666; font-size: 12px; }
form label { display: block; margin: .3em 0; } textarea { width: 100%; font-family: monospace; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
`;

const SCRIPT = `'use strict';
const $ = (id) => document.getElementById(id);
let requests = [];
let selected = null;
function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
function decode(b64) { const bin = atob(b64); const bytes = new Uint8Array(bin.length); for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i); return bytes; }
function bodyOf(raw) {
  for (let i = 0; i + 3 < raw.length; i++) if (raw[i] === 13 && raw[i + 1] === 10 && raw[i + 2] === 13 && raw[i + 3] === 10) return raw.subarray(i + 4);
  return new Uint8Array(0);
}
function header(side, name) { const v = side.headers[name]; return v ? v[0] : ''; }
function hex(bytes) { const out = []; for (let i = 0; i < bytes.length; i += 16) { const row = Array.from(bytes.subarray(i, i + 16)); out.push(i.toString(16).padStart(6, '0') + '  ' + row.map((b) => b.toString(16).padStart(2, '0')).join(' ').padEnd(48) + '  ' + row.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('')); } return out.join('\\n'); }
function showBody(box, side) {
  const bytes = bodyOf(decode(side.raw));
  const type = header(side, 'Content-Type').toLowerCase();
  const chunked = /chunked/i.test(header(side, 'Transfer-Encoding'));
  if (bytes.length === 0) { box.append(el('p', 'No body', 'note')); }
  else {
    let text = null;
    try { text = new TextDecoder('utf-8', { fatal: true }).decode(bytes); } catch (e) { text = null; }
    if (text !== null && !chunked && type.includes('json')) { try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* shown as it is */ } }
    if (text !== null && !chunked && type.includes('application/x-www-form-urlencoded')) {
      const dl = el('dl'); for (const [k, v] of new URLSearchParams(text)) { dl.append(el('dt', k), el('dd', v)); } box.append(dl);
    } else if (text !== null) { box.append(el('pre', text, 'body')); }
    else { box.append(el('p', 'Binary body, shown as hex', 'note'), el('pre', hex(bytes), 'body')); }
  }
  if (side.truncated) box.append(el('p', 'Captured ' + decode(side.raw).length + ' of ' + side.size + ' bytes: the inspector keeps the first 64 KiB of each message.', 'note'));
}
function showSide(box, side, first) {
  box.replaceChildren();
  if (!side) { box.append(el('p', 'No response (the connection ended first).', 'note')); return; }
  box.append(el('pre', first));
  const table = el('table'); for (const [k, vs] of Object.entries(side.headers)) for (const v of vs) { const tr = el('tr'); tr.append(el('th', k), el('td', v)); table.append(tr); }
  box.append(table);
  showBody(box, side);
}
function select(r) {
  selected = r;
  $('detail-pane').hidden = false;
  $('detail-title').textContent = r.request.method + ' ' + r.request.uri;
  showSide($('request-detail'), r.request, r.request.method + ' ' + r.request.uri + ' ' + r.request.proto + '   from ' + r.remote_addr + '   via ' + r.tunnel_name);
  showSide($('response-detail'), r.response, r.response ? r.response.proto + ' ' + r.response.status + '   in ' + (r.duration / 1e6).toFixed(1) + ' ms' : '');
  $('edit-form').hidden = true;
  for (const tr of document.querySelectorAll('#requests tbody tr')) tr.classList.toggle('selected', tr.dataset.id === r.id);
}
function render() {
  const words = $('filter').value.toLowerCase().split(/\\s+/).filter(Boolean);
  const rows = requests.filter((r) => { const hay = [r.request.method, r.request.uri, r.response ? r.response.status_code : '', r.tunnel_name].join(' ').toLowerCase(); return words.every((w) => hay.includes(w)); });
  const body = $('requests').tBodies[0];
  body.replaceChildren(...rows.map((r) => {
    const tr = el('tr'); tr.dataset.id = r.id; if (selected && selected.id === r.id) tr.className = 'selected';
    const code = r.response ? r.response.status_code : 0;
    tr.append(el('td', new Date(r.start).toLocaleTimeString()), el('td', r.request.method), el('td', r.request.uri, 'path'), el('td', code ? String(code) : '---', 's' + String(code).charAt(0)), el('td', (r.duration / 1e6).toFixed(1) + ' ms'), el('td', r.tunnel_name));
    tr.addEventListener('click', () => select(r));
    return tr;
  }));
  $('empty').hidden = requests.length > 0;
}
async function api(method, path, body) {
  const res = await fetch(path, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  if (!res.ok) { const e = await res.json().catch(() => ({ msg: res.statusText })); throw new Error(e.msg); }
  return res.status === 204 ? null : res.json();
}
// The log only changes at its newest end (a capture is added, older ones dropped with it) or all
// at once (cleared): asking for the newest request tells whether the list must be fetched again.
async function poll() {
  try {
    const newest = (await api('GET', '/api/requests/http?limit=1')).requests[0];
    if ((newest ? newest.id : '') === (requests.length > 0 ? requests[0].id : '')) return;
    requests = (await api('GET', '/api/requests/http?limit=500')).requests; render();
  }
  catch (e) { /* the agent is stopping; try again */ }
}
async function replay(changes) {
  $('replay-note').textContent = 'Replaying…';
  try { await api('POST', '/api/requests/http', Object.assign({ id: selected.id, tunnel_name: selected.tunnel_name }, changes || {})); $('replay-note').textContent = 'Replayed: the new request is at the top.'; await poll(); }
  catch (e) { $('replay-note').textContent = 'Replay failed: ' + e.message; }
}
function startEdit() {
  const form = $('edit-form'); form.hidden = false;
  form.method.value = selected.request.method; form.uri.value = selected.request.uri;
  form.headers.value = JSON.stringify(selected.request.headers, null, 2);
  try { form.body.value = new TextDecoder().decode(bodyOf(decode(selected.request.raw))); } catch (e) { form.body.value = ''; }
}
async function status() {
  const s = await api('GET', '/api/status');
  const dl = $('session'); dl.replaceChildren();
  for (const [k, v] of [['Server', s.session.server_addr], ['Connected', s.session.connected ? 'yes' : 'no (reconnecting)'], ['Latency', s.session.latency_ms === null ? 'unknown' : s.session.latency_ms.toFixed(1) + ' ms'], ['Client id', s.session.client_id], ['Version', s.version]]) dl.append(el('dt', k), el('dd', String(v)));
  const ms = (ns) => (ns / 1e6).toFixed(1) + ' ms';
  $('tunnels').tBodies[0].replaceChildren(...s.tunnels.map((t) => { const tr = el('tr'); const h = t.metrics.http; tr.append(el('td', t.name), el('td', t.public_url), el('td', t.config.addr), el('td', String(h.count)), el('td', [h.rate1, h.rate5, h.rate15].map((r) => r.toFixed(2)).join(' / ')), el('td', ms(h.p50)), el('td', ms(h.p90)), el('td', ms(h.p99))); return tr; }));
}
$('filter').addEventListener('input', render);
$('clear').addEventListener('click', async () => { await api('DELETE', '/api/requests/http'); requests = []; selected = null; $('detail-pane').hidden = true; render(); });
$('replay').addEventListener('click', () => replay());
$('edit').addEventListener('click', startEdit);
$('edit-form').addEventListener('submit', (ev) => { ev.preventDefault(); const f = ev.target; let headers; try { headers = JSON.parse(f.headers.value); } catch (e) { $('replay-note').textContent = 'Headers must be JSON: ' + e.message; return; } replay({ method: f.method.value, uri: f.uri.value, headers, body: f.body.value }); });
if (location.pathname === '/status') { $('http-view').hidden = true; $('status-view').hidden = false; status(); setInterval(status, 1000); }
else { poll(); setInterval(poll, 500); }
`;

/** What the agent serves outside `/api`, by path. */
export const INSPECTOR_ASSETS: Readonly<Record<string, { type: string; body: string }>> = {
  '/inspect/http': { type: 'text/html; charset=utf-8', body: PAGE },
  '/status': { type: 'text/html; charset=utf-8', body: PAGE },
  '/assets/inspector.js': { type: 'text/javascript; charset=utf-8', body: SCRIPT },
  '/assets/inspector.css': { type: 'text/css; charset=utf-8', body: STYLE },
};
