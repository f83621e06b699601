#!/usr/bin/env node
// Headless-browser check of Sluice's built-in dashboard (/dashboard), with playwright-core
// driving the system's Chromium (Debian package `chromium`; override with $CHROMIUM).
//
// Steps:
//   auth-401   open /dashboard with a wrong token in the fragment: the token form must appear
//   ready      open /dashboard#token=T: the token leaves the address bar, body[data-ready=true]
//   live       the live queries chart holds >= 3 points and keeps receiving new ones
//   servers    at least one server row; screenshot dashboard.png (full page)
//   candidate  a cache-candidate row whose statement contains --expect-digest appears
//   enable     click its "Enable cache" button, the row turns data-cached=true; advisor.png
//   freshness  the cache freshness row of the rule just enabled shows its hits' ages;
//              freshness.png
// Along the way: no request may carry the token in its URL, every /v1 request carries the
// bearer header, and the page must raise no uncaught exception.
//
// Usage:
//   node dashboard.js --url http://127.0.0.1:PORT --token T --out DIR
//                     --expect-digest SUBSTRING [--timeout-ms 60000]
//
// Prints ONE JSON line: {"ok":true,"live_points":N,"servers":[...],"candidates":[...],
// "enabled":{"digest":ID,"rule":NAME},"freshness":{"rule":NAME,"hits":..,"p50":..,
// "p99":..,"max":..}} and exits 0; on failure {"ok":false,"error":...,
// "step":...} (and failure.png in DIR when possible) and exits 1.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const util = require('node:util');
const { chromium } = require('playwright-core');

function parseArgs(argv) {
  const { values } = util.parseArgs({
    args: argv,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      out: { type: 'string' },
      'expect-digest': { type: 'string' },
      'timeout-ms': { type: 'string', default: '60000' },
    },
    strict: true,
  });
  const args = { ...values };
  for (const k of ['url', 'token', 'out', 'expect-digest']) {
    if (!args[k]) throw new Error(`--${k} is required`);
  }
  args.url = args.url.replace(/\/+$/, '');
  args.timeoutMs = Number(args['timeout-ms']);
  if (!Number.isFinite(args.timeoutMs) || args.timeoutMs <= 0) throw new Error('--timeout-ms must be a positive number');
  return args;
}

// Runs a wait and, when it times out, says what was awaited instead of Playwright's generic text.
async function until(what, promise) {
  try {
    return await promise;
  } catch (e) {
    if (e && e.name === 'TimeoutError') throw new Error(`timed out waiting for ${what}`);
    throw e;
  }
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function main() {
  let step = 'args';
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    emit({ ok: false, error: e.message, step });
    return 1;
  }
  const deadline = Date.now() + args.timeoutMs;
  const left = () => Math.max(1, deadline - Date.now());
  fs.mkdirSync(args.out, { recursive: true });

  // Hard stop: if something hangs past the timeout despite the per-step limits.
  let finished = false;
  const watchdog = setTimeout(() => {
    if (finished) return;
    emit({ ok: false, error: `timed out after ${args.timeoutMs} ms (watchdog)`, step });
    process.exit(1); // playwright kills the browser it launched on exit
  }, args.timeoutMs + 15000);
  watchdog.unref();

  const problems = []; // token leaks, missing headers, page exceptions
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-dashboard-'));
  let context = null;
  let page = null;
  let result = null;
  try {
    step = 'launch';
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: 1440, height: 900 },
      timeout: left(),
    });
    context.setDefaultTimeout(left());
    page = context.pages()[0] || (await context.newPage());
    page.on('pageerror', (e) => problems.push(`page exception: ${e.message}`));
    page.on('request', (req) => {
      const u = req.url();
      if (args.token.length >= 8 && (u.includes(args.token) || u.includes(encodeURIComponent(args.token)))) {
        // The fragment never goes on the wire; anything else carrying the token is a leak
        // (checked only for tokens long enough not to match by chance).
        const wire = u.split('#')[0];
        if (wire.includes(args.token) || wire.includes(encodeURIComponent(args.token))) problems.push(`token in a request URL: ${wire}`);
      }
      const p = new URL(u).pathname;
      if (p.startsWith('/v1/') && !/^Bearer .+/.test(req.headers().authorization || '')) {
        problems.push(`request without a bearer token: ${req.method()} ${p}`);
      }
    });

    // (a) a wrong token: the API answers 401 and the page asks for a token.
    step = 'auth-401';
    await page.goto(`${args.url}/dashboard#token=wrong-${Date.now().toString(36)}`, { timeout: left() });
    await until('the token form after a 401', page.waitForSelector('#token-form', { state: 'visible', timeout: left() }));
    const message = (await page.textContent('#token-message')) || '';
    if (!/401|refused/i.test(message)) throw new Error(`token form shown without the 401 message: ${JSON.stringify(message)}`);
    if (await page.getAttribute('body', 'data-ready')) throw new Error('body is data-ready despite the 401');

    // (b) the right token, from the fragment.
    step = 'ready';
    await page.goto('about:blank', { timeout: left() });
    await page.goto(`${args.url}/dashboard#token=${encodeURIComponent(args.token)}`, { timeout: left() });
    await until('body[data-ready=true] (first full refresh; see the section errors in failure.png)',
      page.waitForSelector('body[data-ready="true"]', { timeout: left() }));
    const address = page.url();
    if (address.includes('token=')) throw new Error(`token left in the address bar: ${address}`);
    if (await page.isVisible('#token-form')) throw new Error('token form still visible with a valid token');

    step = 'live';
    const liveSel = 'canvas[data-chart="queries"]';
    const sample = () => page.$eval(liveSel, (c) => ({ points: Number(c.dataset.points || 0), lastT: Number(c.dataset.lastT || 0) }));
    await until('3 points in the live queries chart',
      page.waitForFunction((sel) => Number(document.querySelector(sel)?.dataset.points || 0) >= 3, liveSel, { timeout: left() }));
    // Live data keeps arriving: the newest point moves forward, twice.
    let prev = await sample();
    for (let i = 0; i < 2; i++) {
      await until(`a live point newer than t=${prev.lastT}`, page.waitForFunction(([sel, t]) => {
        const c = document.querySelector(sel);
        return c && Number(c.dataset.points || 0) >= 3 && Number(c.dataset.lastT || 0) > t;
      }, [liveSel, prev.lastT], { timeout: left() }));
      const cur = await sample();
      if (cur.points < 3) throw new Error(`live chart shrank to ${cur.points} points`);
      prev = cur;
    }

    step = 'servers';
    await until('a server row', page.waitForSelector('tr[data-server]', { timeout: left() }));
    const servers = await page.$$eval('tr[data-server]', (rows) => rows.map((r) => r.dataset.server));
    // Let the freshly appended point be drawn before the picture.
    await page.waitForTimeout(Math.min(300, left()));
    await page.screenshot({ path: path.join(args.out, 'dashboard.png'), fullPage: true, timeout: left() });

    // (c) the advisor: enable caching for the expected statement.
    step = 'candidate';
    const handle = await until(`a cache candidate containing ${JSON.stringify(args['expect-digest'])}`, page.waitForFunction((sub) => {
      for (const tr of document.querySelectorAll('#advisor-body tr[data-digest]')) {
        const text = tr.querySelector('td.sql code')?.textContent || tr.textContent;
        if (text.includes(sub)) return { id: tr.dataset.digest, cached: tr.dataset.cached === 'true', rule: tr.dataset.rule || null };
      }
      return null;
    }, args['expect-digest'], { timeout: left() }));
    const cand = await handle.jsonValue();
    if (cand.cached) throw new Error(`candidate ${cand.id} is already cached (rule ${cand.rule}); start from a fresh Sluice`);

    step = 'enable';
    const row = `#advisor-body tr[data-digest="${cand.id}"]`;
    const button = `${row} [data-action="enable-cache"]`;
    if (await page.isDisabled(button)) {
      throw new Error(`the enable button is disabled: ${await page.getAttribute(button, 'title')}`);
    }
    await until('the enable button to be clickable', page.click(button, { timeout: left() }));
    const enabledHandle = await until('the candidate row to turn data-cached=true (see its error in failure.png)',
      page.waitForFunction((sel) => {
        const tr = document.querySelector(sel);
        return tr && tr.dataset.cached === 'true' ? { rule: tr.dataset.rule || null } : null;
      }, row, { timeout: left() }));
    const { rule } = await enabledHandle.jsonValue();
    const candidates = await page.$$eval('#advisor-body tr[data-digest] td.sql code', (cs) => cs.map((c) => c.textContent));
    const live = await sample();
    await page.locator('#advisor').screenshot({ path: path.join(args.out, 'advisor.png'), timeout: left() });

    // (d) cache freshness: the rule just enabled serves hits, and their ages show.
    step = 'freshness';
    const freshHandle = await until(`the cache freshness row of rule ${rule} to show hit ages`, page.waitForFunction((name) => {
      const tr = [...document.querySelectorAll('#freshness-body tr')].find((r) => r.dataset.key === 'rule ' + name);
      const cells = tr ? [...tr.cells].map((td) => td.textContent) : [];
      return cells.length && cells[2] !== '–' && cells[4] !== '–' ? { hits: cells[1], p50: cells[2], p99: cells[3], max: cells[4] } : null;
    }, rule, { timeout: left() }));
    const freshness = { rule, ...(await freshHandle.jsonValue()) };
    await page.locator('#freshness').screenshot({ path: path.join(args.out, 'freshness.png'), timeout: left() });

    step = 'checks';
    if (problems.length) throw new Error(problems.join('; '));
    result = { ok: true, live_points: live.points, servers, candidates, enabled: { digest: cand.id, rule }, freshness };
  } catch (e) {
    const error = String((e && e.message) || e).split('\n')[0];
    if (page) {
      try {
        await page.screenshot({ path: path.join(args.out, 'failure.png'), fullPage: true, timeout: 5000 });
      } catch { /* best effort */ }
    }
    result = { ok: false, error: problems.length && step !== 'checks' ? `${error} (also: ${problems.join('; ')})` : error, step };
  } finally {
    if (context) {
      try { await context.close(); } catch { /* already gone */ }
    }
    fs.rmSync(userDataDir, { recursive: true, force: true });
    finished = true;
    clearTimeout(watchdog);
  }
  emit(result);
  return result.ok ? 0 : 1;
}

main().then((code) => { process.exitCode = code; }, (e) => {
  emit({ ok: false, error: String((e && e.message) || e), step: 'internal' });
  process.exitCode = 1;
});
