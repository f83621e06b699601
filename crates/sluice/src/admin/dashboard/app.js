// Sluice dashboard: polls the admin API with a bearer token and draws what it gets.
// No libraries. All data goes into the DOM through textContent or attributes, never as HTML.
'use strict';
(() => {
const LIVE_WINDOW = 300; // seconds of per-second points kept on screen
const DAY_WINDOW = 86400;
const TOKEN_KEY = 'sluice.token';
const DASH = '–';
const $ = (sel) => document.querySelector(sel);

// small helpers
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of kids) if (c != null) e.append(c); // strings become text nodes
  return e;
}
function setText(node, s) {
  s = s == null ? '' : String(s);
  if (node.textContent !== s) node.textContent = s;
}
const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
const nz = (v) => (isNum(v) ? v : 0);
const pad = (n) => String(n).padStart(2, '0');

function fmtCount(n) {
  if (!isNum(n)) return DASH;
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(a >= 1e10 ? 0 : 1) + 'G';
  if (a >= 1e6) return (n / 1e6).toFixed(a >= 1e7 ? 0 : 1) + 'M';
  if (a >= 1e4) return (n / 1e3).toFixed(a >= 1e5 ? 0 : 1) + 'k';
  return n.toLocaleString('en-US', { maximumFractionDigits: a < 10 ? 2 : a < 100 ? 1 : 0 });
}
function fmtUs(us) {
  if (!isNum(us)) return DASH;
  if (us < 1000) return Math.round(us) + ' µs';
  if (us < 1e6) return (us / 1000).toFixed(us < 1e4 ? 2 : us < 1e5 ? 1 : 0) + ' ms';
  return (us / 1e6).toFixed(2) + ' s';
}
const fmtMs = (ms) => (isNum(ms) ? fmtUs(ms * 1000) : DASH);
function fmtBytes(b) {
  if (!isNum(b)) return DASH;
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i && Math.abs(b) < 10 ? b.toFixed(1) : Math.round(b)) + ' ' + u[i];
}
const fmtPct = (r) => (isNum(r) ? (r * 100).toFixed(1) + '%' : DASH);
function fmtDur(s) {
  if (!isNum(s)) return DASH;
  s = Math.floor(s);
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m ${s % 60}s`;
  return `${s}s`;
}
function fmtTime(t, sec) {
  const d = new Date(t * 1000);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}` + (sec ? ':' + pad(d.getSeconds()) : '');
}

// token and API
class ApiError extends Error {} // HTTP errors and unreachable server
class AuthError extends ApiError {}
let token = null;
let memToken = null; // when sessionStorage is unavailable
const store = {
  get() { try { return sessionStorage.getItem(TOKEN_KEY); } catch { return memToken; } },
  set(t) { memToken = t; try { sessionStorage.setItem(TOKEN_KEY, t); } catch { /* memory only */ } },
  clear() { memToken = null; try { sessionStorage.removeItem(TOKEN_KEY); } catch { /* ignore */ } },
};

// Reads #token=... once, stores it and removes it from the address bar.
function takeTokenFromHash() {
  const h = location.hash.replace(/^#/, '');
  if (!h) return false;
  const p = new URLSearchParams(h);
  const t = p.get('token');
  if (t == null) return false;
  p.delete('token');
  const rest = p.toString();
  history.replaceState(null, '', location.pathname + location.search + (rest ? '#' + rest : ''));
  if (!t) return false;
  store.set(t);
  return true;
}

async function api(path, opts = {}) {
  const headers = { Authorization: 'Bearer ' + token };
  let body;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  let res;
  try {
    res = await fetch(path, { method: opts.method || 'GET', headers, body, cache: 'no-store', credentials: 'omit' });
  } catch {
    throw new ApiError('Sluice is unreachable');
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  const msg = data && typeof data.error === 'string' ? data.error : `HTTP ${res.status}`;
  if (res.status === 401) throw new AuthError(msg);
  if (!res.ok) throw new ApiError(msg);
  return data || {};
}

// status, errors, toast
const failures = new Map();
function sectionErr(name, msg) {
  const node = document.querySelector(`[data-err="${name}"]`);
  if (node) setText(node, msg ? '⚠ ' + msg : '');
  if (msg) failures.set(name, msg); else failures.delete(name);
  const st = $('#status');
  if (failures.size) {
    setText(st, `${failures.size} request${failures.size > 1 ? 's' : ''} failing: ${[...failures.values()][0]}`);
    st.className = 'status bad';
  } else {
    setText(st, 'Updated ' + fmtTime(Date.now() / 1000, true));
    st.className = 'status ok';
  }
}
let toastTimer = 0;
function toast(msg, bad) {
  const t = $('#toast');
  setText(t, msg);
  t.className = 'toast' + (bad ? ' bad' : '');
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 5000);
}

// polling
let gen = 0; // bumped on every (re)start and stop; stale loops see a different value and end
const timers = new Set();
const ready = new Set();
const NEEDED = ['live', 'servers', 'digests', 'advisor', 'day'];
const refreshers = {};

function loop(name, ms, fetcher, apply) {
  const g = gen;
  let timer = 0, busy = false, again = false;
  const run = async () => {
    if (g !== gen) return;
    if (busy) { again = true; return; } // asked to refresh while fetching: go again right after
    clearTimeout(timer);
    timers.delete(timer);
    busy = true;
    const t0 = performance.now();
    try {
      const data = await fetcher();
      if (g !== gen) return;
      apply(data);
      sectionErr(name, null);
      ready.add(name);
      if (NEEDED.every((n) => ready.has(n))) document.body.dataset.ready = 'true';
    } catch (e) {
      if (g !== gen) return;
      if (e instanceof AuthError) { authFailed(e.message); return; }
      if (!(e instanceof ApiError)) console.error(e);
      sectionErr(name, e.message);
    } finally {
      busy = false;
    }
    if (g !== gen) return;
    timer = setTimeout(run, again ? 0 : Math.max(200, ms - (performance.now() - t0)));
    again = false;
    timers.add(timer);
  };
  refreshers[name] = run; // call to refresh now
  run();
}

function stop() {
  gen++;
  for (const t of timers) clearTimeout(t);
  timers.clear();
}

function start() {
  stop();
  token = store.get();
  if (!token) { showTokenForm('Enter the admin API token to load data.'); return; }
  $('#token-panel').hidden = true;
  ready.clear();
  live.points = []; live.lastT = null;
  day.points = [];
  prevServerQueries.clear();
  setText($('#status'), 'Connecting…');
  loop('live', 1000, fetchLive, applyLive);
  loop('servers', 2000, () => api('/v1/servers'), applyServers);
  loop('fleet', 2000, fetchFleet, renderFleet);
  loop('digests', 2000, () => api('/v1/digests?limit=20'), applyDigests);
  loop('advisor', 2000, () => api('/v1/advisor'), applyAdvisor);
  loop('freshness', 2000, fetchFreshness, applyFreshness);
  loop('day', 30000, fetchDay, applyDay);
}

function showTokenForm(msg, bad) {
  stop();
  delete document.body.dataset.ready;
  const m = $('#token-message');
  setText(m, msg);
  m.className = bad ? 'err' : 'muted';
  $('#token-panel').hidden = false;
  const st = $('#status');
  setText(st, bad ? 'Unauthorized' : 'Not connected');
  st.className = 'status' + (bad ? ' bad' : '');
  $('#token-input').focus();
}
function authFailed(msg) {
  store.clear();
  token = null;
  showTokenForm(`The token was refused (HTTP 401: ${msg}). Enter a valid admin token.`, true);
}

// charts
const v = (x) => (isNum(x) ? x : null);
const per = (x, iv) => (isNum(x) ? x / iv : null);
const lat = (k) => (p) => (nz(p.queries) > 0 && isNum(p[k]) ? p[k] / 1000 : null);
const QUERIES = [
  ['total', 'c1', (p, iv) => per(p.queries, iv)],
  ['select', 'c2', (p, iv) => per(p.select, iv)],
  ['write', 'c3', (p, iv) => per(nz(p.insert) + nz(p.update) + nz(p.delete), iv)]];
const SPECS = {
  queries: { unit: '/s', fmt: fmtCount, series: QUERIES },
  latency: { fmt: fmtMs, series: [['p50', 'c2', lat('p50_us')], ['p95', 'c3', lat('p95_us')], ['p99', 'c4', lat('p99_us')]] },
  bandwidth: { bytes: true, int: true, axis: fmtBytes, fmt: (x) => (isNum(x) ? fmtBytes(x) + '/s' : DASH), series: [
    ['in', 'c1', (p, iv) => per(p.bytes_in, iv)], ['out', 'c5', (p, iv) => per(p.bytes_out, iv)]] },
  cache: { fmt: (x) => (isNum(x) ? x.toFixed(x >= 10 || x === 0 ? 0 : 1) + '%' : DASH), max: 100, series: [
    ['hit rate', 'c2', (p) => { const n = nz(p.cache_hits) + nz(p.cache_misses); return n ? (100 * nz(p.cache_hits)) / n : null; }]] },
  connections: { int: true, fmt: fmtCount, series: [
    ['clients', 'c1', (p) => v(p.clients)], ['in use', 'c3', (p) => v(p.backends_in_use)], ['idle', 'c6', (p) => v(p.backends_idle)]] },
  'history-queries': { unit: '/s', fmt: fmtCount, series: [...QUERIES, ['errors', 'c4', (p, iv) => per(p.errors, iv)]] },
  'history-latency': { fmt: fmtMs, series: [['p95', 'c3', lat('p95_us')]] },
  // Galera flow control: a series per node, known once points name them (showFlow).
  flow: { fmt: fmtShare, max: 100, series: [] },
  'history-flow': { fmt: fmtShare, max: 100, series: [] },
};
const charts = {};
function fmtShare(x) { return isNum(x) ? x.toFixed(x >= 10 || x === 0 ? 0 : 1) + '%' : DASH; }
const flowSeries = (node, i) => [node, 'c' + ((i % 6) + 1),
  (p) => (p.flow_paused && isNum(p.flow_paused[node]) ? 100 * p.flow_paused[node] : null)];

// (Re)builds a chart's legend from its series: a swatch, the label and its value.
function buildLegend(c) {
  const legend = c.canvas.parentElement.querySelector('.legend');
  legend.replaceChildren();
  c.items = c.spec.series.map(([label, color]) => {
    const val = el('b', { text: DASH });
    legend.append(el('span', null, el('i', { class: 'sw ' + color }), label + ' ', val));
    return val;
  });
  c.at = el('span', { class: 'at' });
  legend.append(c.at);
}

// The flow-control chart shows only with Galera nodes, with a series for each.
function showFlow(name, points) {
  const c = charts[name];
  const nodes = [...new Set(points.flatMap((p) => Object.keys(p.flow_paused || {})))].sort();
  c.canvas.closest('.card').hidden = !nodes.length;
  if (nodes.join('\n') !== c.spec.series.map(([n]) => n).join('\n')) {
    c.spec.series = nodes.map(flowSeries);
    buildLegend(c);
  }
}

function initCharts() {
  for (const canvas of document.querySelectorAll('canvas[data-chart]')) {
    const name = canvas.dataset.chart;
    const spec = SPECS[name];
    const c = (charts[name] = { canvas, spec, items: [], at: null, t: [], ys: spec.series.map(() => []), x0: 0, x1: 1, gap: 2, hover: null, sec: true });
    buildLegend(c);
    canvas.addEventListener('mousemove', (ev) => {
      if (!c.t.length) return;
      const r = canvas.getBoundingClientRect();
      const t = c.x0 + ((ev.clientX - r.left - PAD.l) / (r.width - PAD.l - PAD.r)) * (c.x1 - c.x0);
      let i = 0;
      while (i < c.t.length - 1 && Math.abs(c.t[i + 1] - t) <= Math.abs(c.t[i] - t)) i++;
      c.hover = i;
      drawChart(c);
    });
    canvas.addEventListener('mouseleave', () => { c.hover = null; drawChart(c); });
  }
}

function setChartData(name, points, iv, x0, x1, sec) {
  const c = charts[name];
  c.t = points.map((p) => p.t);
  c.ys = c.spec.series.map(([, , f]) => points.map((p) => f(p, iv)));
  Object.assign(c, { x0, x1, gap: iv * 2.5, sec });
  if (c.hover != null && c.hover >= c.t.length) c.hover = null;
  c.canvas.dataset.points = String(points.length);
  if (points.length) c.canvas.dataset.lastT = String(points[points.length - 1].t);
  drawChart(c);
}

function niceStep(x, bytes) {
  if (bytes && bytes >= 1024) { // round steps in the unit of the largest value: KiB, MiB...
    const k = Math.min(4, Math.floor(Math.log(bytes) / Math.log(1024)));
    return niceStep(x / 1024 ** k) * 1024 ** k;
  }
  const e = Math.pow(10, Math.floor(Math.log10(x)));
  const f = x / e;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * e;
}
const TIME_STEPS = [10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
const PAD = { l: 62, r: 10, t: 8, b: 20 };

function drawChart(c) {
  const { canvas } = c;
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (!w || !h) return;
  const dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const css = getComputedStyle(document.body);
  const color = (n) => css.getPropertyValue('--' + n).trim();
  const pw = w - PAD.l - PAD.r, ph = h - PAD.t - PAD.b;
  let max = 0, any = false;
  for (const ys of c.ys) for (const y of ys) if (y != null) { any = true; if (y > max) max = y; }
  let step = c.spec.max ? c.spec.max / 4 : niceStep((max || 1) / 4, c.spec.bytes && max);
  if (c.spec.int) step = Math.max(1, step);
  const top = c.spec.max || step * Math.max(1, Math.ceil(max / step - 1e-9));
  const X = (t) => PAD.l + ((t - c.x0) / (c.x1 - c.x0 || 1)) * pw;
  const Y = (y) => PAD.t + ph - (y / top) * ph;

  ctx.font = '11px system-ui, -apple-system, "Segoe UI", sans-serif';
  ctx.lineWidth = 1;
  ctx.strokeStyle = color('grid');
  ctx.fillStyle = color('muted');
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let y = 0; y <= (any ? top + step / 2 : 0); y += step) {
    const py = Math.round(Y(y)) + 0.5;
    ctx.beginPath(); ctx.moveTo(PAD.l, py); ctx.lineTo(w - PAD.r, py); ctx.stroke();
    ctx.fillText(y ? (c.spec.axis || c.spec.fmt)(y) : '0', PAD.l - 6, py);
  }
  // time axis, ticks on round local times
  const span = c.x1 - c.x0;
  const ts = TIME_STEPS.find((s) => span / s <= Math.max(2, Math.floor(pw / 90))) || 86400;
  const off = -new Date().getTimezoneOffset() * 60;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  for (let t = Math.ceil((c.x0 + off) / ts) * ts - off; t <= c.x1; t += ts) {
    const px = Math.round(X(t)) + 0.5;
    ctx.beginPath(); ctx.moveTo(px, PAD.t + ph); ctx.lineTo(px, PAD.t + ph + 4); ctx.stroke();
    const label = fmtTime(t, ts < 60), half = ctx.measureText(label).width / 2;
    ctx.fillText(label, Math.min(px, w - half - 1), PAD.t + ph + 6);
  }
  ctx.strokeStyle = color('axis');
  ctx.beginPath(); ctx.moveTo(PAD.l, PAD.t + ph + 0.5); ctx.lineTo(w - PAD.r, PAD.t + ph + 0.5); ctx.stroke();
  if (!any) {
    ctx.textBaseline = 'middle';
    ctx.fillText(c.t.length ? 'No activity' : 'No data yet', PAD.l + pw / 2, PAD.t + ph / 2);
  }

  // series: break lines on missing values and on holes in time
  ctx.save();
  ctx.beginPath(); ctx.rect(PAD.l, 0, pw + 1, h); ctx.clip();
  ctx.lineJoin = 'round';
  c.ys.forEach((ys, si) => {
    const col = color(c.spec.series[si][1]);
    const segs = [];
    let seg = null;
    for (let i = 0; i < ys.length; i++) {
      if (ys[i] == null || (seg && c.t[i] - c.t[i - 1] > c.gap)) seg = null;
      if (ys[i] == null) continue;
      if (!seg) segs.push((seg = []));
      seg.push([X(c.t[i]), Y(ys[i])]);
    }
    for (const s of segs) {
      if (si === 0 && s.length > 1) {
        ctx.globalAlpha = 0.12; ctx.fillStyle = col;
        ctx.beginPath(); ctx.moveTo(s[0][0], Y(0));
        for (const [x, y] of s) ctx.lineTo(x, y);
        ctx.lineTo(s[s.length - 1][0], Y(0)); ctx.closePath(); ctx.fill();
        ctx.globalAlpha = 1;
      }
      ctx.strokeStyle = col; ctx.fillStyle = col; ctx.lineWidth = 1.6;
      if (s.length === 1) { ctx.beginPath(); ctx.arc(s[0][0], s[0][1], 1.8, 0, 7); ctx.fill(); continue; }
      ctx.beginPath(); ctx.moveTo(s[0][0], s[0][1]);
      for (let i = 1; i < s.length; i++) ctx.lineTo(s[i][0], s[i][1]);
      ctx.stroke();
    }
  });
  ctx.restore();

  // legend: values at the hovered point, else the latest
  const i = c.hover != null ? c.hover : c.t.length - 1;
  if (c.hover != null) {
    const px = Math.round(X(c.t[i])) + 0.5;
    ctx.strokeStyle = color('axis');
    ctx.beginPath(); ctx.moveTo(px, PAD.t); ctx.lineTo(px, PAD.t + ph); ctx.stroke();
  }
  c.items.forEach((node, si) => {
    const y = i >= 0 ? c.ys[si][i] : null;
    setText(node, y == null ? DASH : c.spec.fmt(y) + (c.spec.unit || ''));
  });
  setText(c.at, i >= 0 ? fmtTime(c.t[i], c.sec) : '');
}
function redrawAll() { for (const c of Object.values(charts)) drawChart(c); }

// Appends new points, replacing any already held from the first new t on.
function merge(arr, add) {
  if (!Array.isArray(add) || !add.length) return;
  const first = add[0].t;
  while (arr.length && arr[arr.length - 1].t >= first) arr.pop();
  for (const p of add) if (p && isNum(p.t)) arr.push(p);
}

// live: overview + per-second history
const live = { points: [], lastT: null, iv: 1 };
async function fetchLive() {
  const ov = await api('/v1/overview');
  let since = live.lastT;
  if (since == null && isNum(ov.now)) since = ov.now - LIVE_WINDOW - 1;
  const h = await api('/v1/history?range=hour' + (since != null ? '&since=' + since : ''));
  return [ov, h];
}
function applyLive([ov, h]) {
  renderOverview(ov);
  const pts = Array.isArray(h.points) ? h.points : [];
  live.iv = h.interval_seconds || 1;
  merge(live.points, pts);
  if (live.points.length) live.lastT = live.points[live.points.length - 1].t;
  const now = isNum(h.now) ? h.now : isNum(ov.now) ? ov.now : live.lastT || Date.now() / 1000;
  while (live.points.length && live.points[0].t <= now - LIVE_WINDOW) live.points.shift();
  showFlow('flow', live.points);
  for (const name of ['queries', 'latency', 'bandwidth', 'cache', 'connections', 'flow'])
    setChartData(name, live.points, live.iv, now - LIVE_WINDOW, now, true);
}

function renderOverview(ov) {
  const set = (k, s, cls) => {
    const n = document.querySelector(`[data-ov="${k}"]`);
    setText(n, s);
    n.className = cls || '';
  };
  set('version', ov.version ? 'v' + ov.version : '');
  set('uptime', fmtDur(ov.uptime_seconds));
  set('writer', ov.writer || 'none', ov.writer ? '' : 'warn');
  set('clients', fmtCount(ov.clients));
  set('qps', ov.last ? fmtCount(nz(ov.last.queries)) : DASH);
  const ratio = isNum(ov.multiplex_ratio) ? ` · ${ov.multiplex_ratio.toFixed(1)}×` : '';
  set('backends', `${fmtCount(ov.backends_in_use)} in use / ${fmtCount(ov.backends_idle)} idle${ratio}`);
  set('hit', fmtPct(ov.cache_hit_rate));
  const banner = $('#banner');
  banner.hidden = ov.analytics !== false;
  setText(banner, ov.analytics === false
    ? 'Analytics are disabled in the configuration ([analytics] enabled = false): charts, digests and candidates stay empty.' : '');
}

// day history
const day = { points: [], iv: 60 };
function fetchDay() {
  // Re-ask for the last held minute too: it may have been partial.
  const n = day.points.length;
  const since = n >= 2 ? day.points[n - 2].t : null;
  return api('/v1/history?range=day' + (since != null ? '&since=' + since : ''));
}
function applyDay(h) {
  day.iv = h.interval_seconds || 60;
  merge(day.points, h.points);
  const last = day.points.length ? day.points[day.points.length - 1].t : null;
  const now = isNum(h.now) ? h.now : last || Date.now() / 1000;
  while (day.points.length && day.points[0].t <= now - DAY_WINDOW) day.points.shift();
  const first = day.points.length ? day.points[0].t : now;
  const x0 = Math.max(now - DAY_WINDOW, Math.min(first, now - 3600)); // at least one hour wide
  showFlow('history-flow', day.points);
  for (const name of ['history-queries', 'history-latency', 'history-flow']) setChartData(name, day.points, day.iv, x0, now, false);
}

// tables
// Updates rows in place (keyed), so buttons survive refreshes and nothing flickers.
function syncRows(tbody, items, key, cols, empty, onRow) {
  const old = new Map();
  for (const tr of [...tbody.rows]) {
    if (tr.dataset.key != null) old.set(tr.dataset.key, tr); else tr.remove();
  }
  let prev = null;
  for (const it of items) {
    const k = String(key(it));
    let tr = old.get(k);
    if (tr) old.delete(k);
    else {
      tr = el('tr');
      tr.dataset.key = k;
      for (const c of cols) tr.append(el('td', { class: c.cls }));
    }
    cols.forEach((c, i) => c.set(tr.cells[i], it, tr));
    if (onRow) onRow(tr, it);
    const want = prev ? prev.nextSibling : tbody.firstChild;
    if (want !== tr) tbody.insertBefore(tr, want);
    prev = tr;
  }
  for (const tr of old.values()) tr.remove();
  if (!items.length) tbody.append(el('tr', { class: 'empty' }, el('td', { colspan: cols.length, text: empty })));
}
const txt = (cls, f) => ({ cls, set: (td, it) => setText(td, f(it)) });
const numCol = (f) => txt('n', f);
function parts(td, spec) { // builds fixed children once: spec = [[tag, class], ...]
  if (td.childNodes.length !== spec.length) {
    td.textContent = '';
    for (const [tag, cls] of spec) td.append(el(tag, { class: cls }));
  }
  return td.children;
}
function sqlCell(sub) {
  return { cls: 'sql', set: (td, it) => {
    const [code, small] = parts(td, [['code', ''], ['small', 'muted']]);
    setText(code, it.text == null ? DASH : it.text);
    if (code.title !== (it.text || '')) code.title = it.text || '';
    setText(small, sub(it));
  } };
}

// Servers
let lastServers = null;
const prevServerQueries = new Map();
let confirmPending = null; // {name, action, until}
function serverQueries(s) { return isNum(s.queries) ? s.queries : isNum(s.reads) || isNum(s.writes) ? nz(s.reads) + nz(s.writes) : null; }
function applyServers(d) {
  const now = performance.now() / 1000;
  const list = Array.isArray(d.servers) ? d.servers : [];
  for (const s of list) {
    const q = serverQueries(s);
    const prev = prevServerQueries.get(s.name);
    // Rate over at least 1.5 s, so an extra refresh right after an action does not read 0.
    const due = !prev || now - prev.at >= 1.5;
    s._qps = prev && due && q != null ? Math.max(0, (q - prev.q) / (now - prev.at)) : prev ? prev.qps : null;
    if (q != null && due) prevServerQueries.set(s.name, { q, at: now, qps: s._qps });
  }
  lastServers = d;
  renderServers();
}
function renderServers() {
  const d = lastServers;
  if (!d) return;
  const list = Array.isArray(d.servers) ? d.servers : [];
  const notes = [];
  if (d.read_write_split === false) notes.push('read/write split off');
  if (d.switchover_in_progress) notes.push('switchover in progress');
  const lf = d.last_failover;
  if (lf && lf.kind) notes.push(`last ${lf.kind}: ${lf.from || '?'} → ${lf.to || '?'}, ${lf.outcome}, ${lf.took_ms} ms`);
  // Transactions and statements carried over to a new writer, and why some could not be.
  const st = d.stats || {};
  if (isNum(st.replays_attempted) && st.replays_attempted > 0) {
    const by = st.replays_refused_by || {};
    const why = Object.keys(by).map((k) => `${k} ${by[k]}`).join(', ');
    const found = st.commits_found > 0 ? `, ${st.commits_found} lost commits found committed` : '';
    notes.push(`replayed on a new writer: ${nz(st.replays_succeeded)} of ${st.replays_attempted}${found}${why ? ` (not: ${why})` : ''}`);
  }
  setText($('#servers-note'), notes.join(' · '));
  syncRows($('#servers-body'), list, (s) => s.name, [
    { cls: '', set: (td, s) => {
      const [b, small] = parts(td, [['b', ''], ['small', 'muted block']]);
      setText(b, s.name);
      setText(small, s.address || '');
    } },
    { cls: '', set: (td, s) => {
      const [b] = parts(td, [['span', '']]);
      setText(b, s.role || 'unknown');
      b.className = 'badge role-' + String(s.role || 'unknown').replace(/[^a-z]/g, '');
    } },
    { cls: '', set: (td, s) => {
      const [dot, t] = parts(td, [['i', ''], ['span', '']]);
      const hl = String(s.health || 'unknown').toLowerCase();
      dot.className = 'dot ' + (hl === 'up' ? 'up' : hl === 'down' ? 'down' : 'unk');
      setText(t, hl);
      td.title = s.error || '';
    } },
    numCol((s) => (isNum(s.lag_seconds) ? fmtCount(s.lag_seconds) + ' s' : DASH)),
    numCol((s) => (isNum(s._qps) ? fmtCount(s._qps) : DASH)),
    numCol((s) => fmtCount(serverQueries(s))),
    numCol((s) => fmtCount(s.errors)),
    numCol((s) => fmtUs(s.mean_us)),
    numCol((s) => fmtMs(s.ttfb_ms)),
    txt('conns', (s) => {
      const c = s.connections || {};
      return `${fmtCount(c.leased)} used · ${fmtCount(c.idle)} idle` + (nz(c.waiting) ? ` · ${fmtCount(c.waiting)} waiting` : '');
    }),
    { cls: 'actions', set: serverActions },
  ], 'No servers', (tr, s) => { tr.dataset.server = s.name; });
}
// What an instance may not have (a fleet, a cache) answers 404 with a message saying
// so: null then, and the section stays hidden.
async function optional(path, missing) {
  try {
    return await api(path);
  } catch (e) {
    if (e instanceof ApiError && missing.test(e.message)) return null;
    throw e;
  }
}
function fetchFleet() { return optional('/v1/fleet', /no fleet/); }
function renderFleet(d) {
  const section = $('#fleet');
  section.hidden = !d;
  if (!d) return;
  const members = Array.isArray(d.members) ? d.members : [];
  const mine = members.find((m) => m.slot === d.slot);
  const hash = mine ? mine.config_hash : null;
  const notes = [`${d.mode} · fleet ${d.name}`];
  if (d.named_writer) notes.push(`writer named: ${d.named_writer}`);
  if (d.trouble) notes.push(d.trouble);
  setText($('#fleet-note'), notes.join(' · '));
  syncRows($('#fleet-body'), members, (m) => String(m.slot), [
    { cls: '', set: (td, m) => {
      const [b, small] = parts(td, [['b', ''], ['small', 'muted block']]);
      setText(b, m.name + (m.slot === d.slot ? ' (this one)' : ''));
      setText(small, m.address || '');
    } },
    numCol((m) => String(m.slot)),
    txt('', (m) => m.version || DASH),
    txt('', (m) => (m.config_hash || DASH) + (hash && m.config_hash !== hash ? ' (differs)' : '')),
    numCol((m) => fmtCount(m.sessions)),
    txt('', (m) => (Array.isArray(m.duties) && m.duties.length ? m.duties.join(', ') : DASH)),
    txt('', (m) => (isNum(m.last_contact_ms) ? (m.last_contact_ms / 1000).toFixed(1) + ' s ago' : DASH)),
    txt('', (m) => (m.live ? 'live' : 'gone')),
  ], 'No instances yet');
}

const ACTIONS = ['enable', 'disable', 'drain'];
function serverActions(td, s, tr) {
  if (!td.firstChild) {
    for (const a of ACTIONS) td.append(el('button', { type: 'button', 'data-action': a, onclick: () => serverAction(tr.dataset.server, a) }));
  }
  const draining = s.draining === true || s.role === 'draining';
  const can = { enable: !!(s.disabled || s.fenced || draining), disable: !s.disabled, drain: !draining && !s.disabled };
  const pend = confirmPending && confirmPending.name === s.name && confirmPending.until > Date.now() ? confirmPending.action : null;
  for (const b of td.children) {
    const a = b.dataset.action;
    b.disabled = !can[a];
    setText(b, pend === a ? `Confirm ${a}?` : a[0].toUpperCase() + a.slice(1));
    b.classList.toggle('confirm', pend === a);
  }
}
async function serverAction(name, action) {
  if (action !== 'enable') { // disabling or draining takes a second click
    const p = confirmPending;
    if (!p || p.name !== name || p.action !== action || p.until < Date.now()) {
      confirmPending = { name, action, until: Date.now() + 4000 };
      renderServers();
      setTimeout(renderServers, 4100);
      return;
    }
  }
  confirmPending = null;
  renderServers();
  try {
    await api(`/v1/servers/${encodeURIComponent(name)}/${action}`, { method: 'POST' });
    toast(`${name}: ${action} done`);
  } catch (e) {
    if (e instanceof AuthError) { authFailed(e.message); return; }
    toast(`${name}: ${action} failed: ${e.message}`, true);
  }
  if (refreshers.servers) refreshers.servers();
}

// Digests
function applyDigests(d) {
  const list = Array.isArray(d.digests) ? d.digests : [];
  setText($('#digests-note'), `by total time · ${fmtCount(d.tracked)} tracked` + (nz(d.evicted) ? ` · ${fmtCount(d.evicted)} evicted` : ''));
  syncRows($('#digests-body'), list, (x) => x.id, [
    sqlCell((x) => [x.kind, x.schema, nz(x.scattered) ? `over several shards ${fmtCount(x.scattered)}×` : null, Array.isArray(x.users) && x.users.length ? 'users ' + x.users.join(', ') : null].filter(Boolean).join(' · ')),
    numCol((x) => fmtCount(x.count)),
    numCol((x) => fmtUs(x.total_us)),
    numCol((x) => fmtUs(x.mean_us)),
    numCol((x) => fmtUs(x.p95_us)),
    numCol((x) => fmtUs(x.p99_us)),
    numCol((x) => fmtCount(isNum(x.rows_sent) || isNum(x.rows_affected) ? nz(x.rows_sent) + nz(x.rows_affected) : null)),
    { cls: 'n', set: (td, x) => { setText(td, fmtCount(x.errors)); td.classList.toggle('bad', nz(x.errors) > 0); } },
    numCol((x) => fmtCount(x.cache_hits)),
  ], 'No statements seen yet');
}

// Cache freshness: each rule, then the digests served most, with their entries' ages.
function fetchFreshness() { return optional('/v1/cache/stats', /no cache/); }
function applyFreshness(d) {
  $('#freshness').hidden = !d;
  if (!d) return;
  const rules = (Array.isArray(d.rules) ? d.rules : []).map((r) => ({ ...r, key: 'rule ' + r.rule, text: r.rule, sub: `rule · ${fmtCount(r.entries)} entries` }));
  const digests = (Array.isArray(d.digests) ? d.digests : []).filter((x) => nz(x.hits) > 0).sort((a, b) => b.hits - a.hits).slice(0, 10)
    .map((x) => ({ ...x, key: 'digest ' + x.digest, sub: 'digest ' + x.digest }));
  setText($('#freshness-note'), d.binlog === 'not configured' ? 'binlog not followed: entries live until a write through Sluice or their TTL' : 'binlog ' + d.binlog);
  const age = (k, q) => numCol((x) => fmtMs(x[k] ? x[k][q] : null));
  syncRows($('#freshness-body'), rules.concat(digests), (x) => x.key, [
    sqlCell((x) => x.sub), numCol((x) => fmtCount(nz(x.hits) + nz(x.stale_hits))),
    age('hit_age', 'p50_ms'), age('hit_age', 'p99_ms'), age('hit_age', 'max_ms'),
    age('filled_after_change', 'p50_ms'), age('filled_after_change', 'p99_ms'), age('filled_after_change', 'max_ms'),
  ], 'No cache rules');
}

// Cache advisor
let lastAdvisor = null;
// Enabled from this page: digest id -> {rule, item, until}. Shown as cached until the API
// confirms it (or for 10 s), even if a refresh still lists it as uncached or not at all.
const enabled = new Map();
const enabling = new Set();
const enableErr = new Map();
function applyAdvisor(d) {
  for (const c of d.candidates || []) if (c.cached === true) enabled.delete(c.id);
  lastAdvisor = d;
  renderAdvisor();
}
function renderAdvisor() {
  const d = lastAdvisor;
  if (!d) return;
  const cacheOn = d.cache !== false;
  const list = (Array.isArray(d.candidates) ? d.candidates : []).slice();
  for (const [id, e] of enabled) {
    if (e.until < Date.now()) enabled.delete(id);
    else if (!list.some((c) => c.id === id)) list.push(e.item);
  }
  setText($('#advisor-note'), isNum(d.window_seconds) ? `read statements worth caching, observed over ${fmtDur(d.window_seconds)}` : '');
  const warn = $('#advisor-warn');
  warn.hidden = cacheOn;
  setText(warn, cacheOn ? '' : 'Enabling is unavailable: no query cache is configured in Sluice, so it would refuse new cache rules (add a [cache] section and reload).');
  syncRows($('#advisor-body'), list, (c) => c.id, [
    sqlCell((c) => [c.schema, Array.isArray(c.tables) ? c.tables.join(', ') : null].filter(Boolean).join(' · ')),
    numCol((c) => (isNum(c.per_second) ? fmtCount(c.per_second) + '/s' : DASH)),
    numCol((c) => fmtUs(c.mean_us)),
    numCol((c) => fmtPct(c.expected_hit_rate)),
    numCol((c) => fmtCount(c.writes_per_second)),
    numCol((c) => (isNum(c.saving_us_per_second) ? fmtUs(c.saving_us_per_second) + '/s' : DASH) + (isNum(c.saving_share) ? ` (${fmtPct(c.saving_share)})` : '')),
    { cls: 'actions', set: (td, c, tr) => {
      const [btn, state, err] = parts(td, [['button', 'primary'], ['span', 'state'], ['small', 'err block']]);
      if (!btn.dataset.action) {
        btn.type = 'button';
        btn.dataset.action = 'enable-cache';
        btn.addEventListener('click', () => enableCache(tr.dataset.digest));
      }
      const mine = enabled.get(c.id);
      const cached = c.cached === true || !!mine;
      const rule = c.rule || (mine && mine.rule) || null;
      if (cached) tr.dataset.cached = 'true'; else delete tr.dataset.cached;
      if (rule) tr.dataset.rule = rule; else delete tr.dataset.rule;
      btn.hidden = cached;
      btn.disabled = !cacheOn || enabling.has(c.id);
      setText(btn, enabling.has(c.id) ? 'Enabling…' : 'Enable cache');
      btn.title = cacheOn ? 'Add a cache rule for this statement (TTL 5m)' : 'No query cache is configured: Sluice refuses to enable caching';
      setText(state, cached ? '✓ cached' + (rule ? ' · ' + rule : '') : cacheOn ? '' : 'no query cache');
      state.className = 'state ' + (cached ? 'ok' : 'muted');
      setText(err, enableErr.get(c.id) || '');
    } },
  ], cacheOn ? 'No candidates yet: needs repeated read statements' : 'No candidates', (tr, c) => { tr.dataset.digest = c.id; });
}
async function enableCache(id) {
  if (!id || enabling.has(id)) return;
  const item = ((lastAdvisor && lastAdvisor.candidates) || []).find((c) => c.id === id);
  enabling.add(id);
  enableErr.delete(id);
  renderAdvisor();
  try {
    const r = await api('/v1/advisor/enable', { method: 'POST', body: { digest: id } });
    const rule = (r.rule && r.rule.name) || null;
    enabled.set(id, { rule, until: Date.now() + 10000, item: { ...(item || { id }), cached: true, rule } });
    toast(rule ? `Cache rule ${rule} added` : 'Cache rule added');
  } catch (e) {
    if (e instanceof AuthError) { enabling.delete(id); authFailed(e.message); return; }
    enableErr.set(id, e.message);
  }
  enabling.delete(id);
  renderAdvisor();
}

// boot
function boot() {
  initCharts();
  $('#token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = $('#token-input');
    const t = input.value.trim();
    if (!t) return;
    input.value = '';
    store.set(t);
    start();
  });
  window.addEventListener('hashchange', () => { if (takeTokenFromHash()) start(); });
  let rt = 0;
  window.addEventListener('resize', () => { clearTimeout(rt); rt = setTimeout(redrawAll, 120); });
  takeTokenFromHash();
  start();
}
if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot); else boot();
})();
