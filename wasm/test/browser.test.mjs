// The package in headless Chromium (Debian's, driven by playwright-core): a
// page served from 127.0.0.1 loads the web build, the verify-only one and the
// client-only one, signs and verifies with the first two, and a Client from
// the first and the last each sends a batch to this server, which checks
// what arrived. Then a user's app, built by Vite, webpack and esbuild and
// served by the Vite dev server, runs the receivers' scenario and sends a
// batch through the bundled package.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { pathToFileURL } from 'node:url';
import { extname, join, normalize } from 'node:path';
import { chromium } from 'playwright-core';
import { sign } from 'callpost';
import { createHmac } from 'node:crypto';
import { pkgDir } from './helpers.mjs';

// Opens `url` in headless Chromium and resolves to the page's
// window.__result and the errors it logged.
async function pageResult(url) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      // launch() gives every run a fresh temporary profile (a fresh
      // --user-data-dir); without the background-networking flags Chromium
      // tries to reach Google's hosts, which this network refuses.
      '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(url);
    await page.waitForFunction(() => window.__result, null, { timeout: 20_000 });
    return [await page.evaluate(() => window.__result), errors];
  } finally {
    await browser.close();
  }
}

// Collects the batches POSTed to /v1/batch (from any origin, as Segment's
// API allows); answers everything else with `files(req, res)`.
function batchServer(batches, files = (req, res) => res.writeHead(404).end()) {
  const cors = { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'authorization, content-type' };
  return createServer((req, res) => {
    if (req.method === 'OPTIONS' && req.url === '/v1/batch') return res.writeHead(204, cors).end();
    if (req.method === 'POST' && req.url === '/v1/batch') {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        batches.push({ auth: req.headers.authorization, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
        res.writeHead(200, { 'content-type': 'application/json', ...cors }).end('{}');
      });
      return;
    }
    files(req, res);
  });
}

const TYPES = { '.wasm': 'application/wasm', '.js': 'text/javascript', '.mjs': 'text/javascript', '.html': 'text/html' };
const serveDir = (dir, prefix = '/') => (req, res) => {
  const path = req.url === '/' ? '/index.html' : req.url;
  if (!path.startsWith(prefix)) return res.writeHead(404).end();
  const file = normalize(join(dir, path.slice(prefix.length)));
  if (!file.startsWith(dir)) return res.writeHead(403).end();
  const type = TYPES[extname(file)] ?? 'application/octet-stream';
  try { return res.writeHead(200, { 'content-type': type }).end(readFileSync(file)); } catch { return res.writeHead(404).end(); }
};

const PAGE = `<!doctype html><html><head><link rel="icon" href="data:,"></head><body><script type="module">
  import { init } from '/pkg/web.mjs';
  const cp = await init();
  const body = cp.stringify({ b: 1, 10: 'ten', a: [1.0, 1e21, 1.5e-7] });
  const signature = cp.sign('browser-secret', body);
  const verified = cp.verify(body, signature, ['old', 'browser-secret']);
  // No platform HMAC here: every size is signed in wasm, and 3 MB bodies
  // make its memory grow between calls.
  const sizes = [0, 423, 5000, 3000000, 64];
  const sigs = sizes.map((n) => {
    const text = '\\u00e9'.repeat(n);
    const signer = new cp.Signer('browser-secret');
    const s = cp.sign('browser-secret', text);
    return [s, signer.signString(text), signer.signBytes(new TextEncoder().encode(text)), cp.verify(text, s, 'browser-secret')];
  });
  // The verify-only module (callpost/verify) at the same sizes.
  const { init: initVerify } = await import('/pkg/verify-web.mjs');
  const v = await initVerify();
  const verifySigs = sizes.map((n) => {
    const text = '\\u00e9'.repeat(n);
    const s = v.sign('browser-secret', text);
    return [s, new v.Signer('browser-secret').signString(text), v.verify(text, s, ['old', 'browser-secret'])];
  });
  let code = null;
  try { cp.stringify({ n: NaN }); } catch (e) { code = e.code; }
  const client = new cp.Client({ writeKey: 'wk_browser', endpoint: location.origin, flushAt: 3, flushAfter: 60000 });
  const ids = [client.track({ userId: 'u', event: 'A' }), client.page({ userId: 'u', name: 'Home' }), client.identify({ userId: 'u', traits: { plan: 'pro' } })];
  await client.flush();
  // The client-only module (callpost/client) sends its own batch.
  const { init: initClient } = await import('/pkg/client-web.mjs');
  const small = await initClient();
  const smallClient = new small.Client({ writeKey: 'wk_client', endpoint: location.origin, flushAt: 2, flushAfter: 60000 });
  const smallIds = [smallClient.track({ userId: 'u', event: 'B' }), smallClient.page({ userId: 'u', name: 'Cart' })];
  await smallClient.flush();
  window.__result = { body, signature, verified, code, ids, sizes, sigs, verifySigs, smallIds, hasWebhooks: 'Webhooks' in small };
</script></body></html>`;

test('the web build works in headless Chromium', async () => {
  const batches = [];
  const pkgFiles = serveDir(pkgDir, '/pkg/');
  const server = batchServer(batches, (req, res) => {
    if (req.url === '/' || req.url === '/index.html') return res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
    return pkgFiles(req, res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  try {
    const [r, errors] = await pageResult(`http://127.0.0.1:${server.address().port}/`);
    assert.deepEqual(errors, []);
    assert.equal(r.body, '{"10":"ten","b":1,"a":[1,1e+21,1.5e-7]}');
    assert.equal(r.signature, sign('browser-secret', r.body), 'the browser signs the same as Node');
    assert.equal(r.verified, true);
    r.sizes.forEach((n, i) => {
      const want = createHmac('sha1', 'browser-secret').update('é'.repeat(n)).digest('hex');
      assert.deepEqual(r.sigs[i], [want, want, want, true], `${n} characters`);
      assert.deepEqual(r.verifySigs[i], [want, want, true], `${n} characters, callpost/verify`);
    });
    assert.equal(r.code, 'non_finite_number');
    assert.equal(batches.length, 2);
    assert.equal(batches[0].auth, 'Basic ' + Buffer.from('wk_browser:').toString('base64'));
    assert.deepEqual(batches[0].body.batch.map((m) => m.messageId), r.ids);
    assert.deepEqual(batches[0].body.batch.map((m) => m.type), ['track', 'page', 'identify']);
    assert.equal(batches[1].auth, 'Basic ' + Buffer.from('wk_client:').toString('base64'));
    assert.deepEqual(batches[1].body.batch.map((m) => m.messageId), r.smallIds);
    assert.deepEqual(batches[1].body.batch.map((m) => m.type), ['track', 'page']);
    assert.equal(r.hasWebhooks, false);
  } finally {
    server.close();
  }
});

// A user's app built for production by Vite, webpack and esbuild with their
// defaults (test/runtimes/apps/browser, bundlers from npm): the `browser`
// entries' init() finds the .wasm Vite or webpack emitted beside the bundle,
// or takes the URL of the one esbuild's file loader copied.
const apps = new URL('./runtimes/apps/', import.meta.url).pathname;
// What the page reported (the receivers' scenario: a valid call, its retry,
// a tampered body, no signature, a batch under X-Segment-Signature, and one
// whose X-Signature covers only the first event), checked against what the
// ingest server received.
function checkBundledApp(r, errors, batches) {
  assert.deepEqual(errors, []);
  assert.equal(r.error, undefined);
  assert.equal(r.signature, createHmac('sha1', 'whsec-runtimes').update(r.body).digest('hex'));
  assert.equal(r.event, 'Order Completed');
  assert.equal(r.product, 'Café ☕');
  assert.deepEqual(r.scenario, {
    valid: [200, { processed: ['m-1'] }],
    duplicate: [200, { duplicates: 1 }],
    tampered: [401, 'signature_mismatch'],
    missing: [401, 'missing_signature'],
    batch: [200, { processed: ['m-3', 'm-4'] }],
    firstEventOnly: [401, 'first_event_signature'],
  });
  assert.equal(batches.length, 1);
  assert.equal(batches[0].auth, 'Basic ' + Buffer.from('wk_bundle:').toString('base64'));
  assert.deepEqual(batches[0].body.batch.map((m) => [m.messageId, m.type]), [[r.ids[0], 'track'], [r.ids[1], 'identify']]);
}

for (const bundler of ['vite', 'webpack', 'esbuild']) {
  test(`a production build by ${bundler} works in headless Chromium`, { timeout: 120_000 }, async () => {
    const out = mkdtempSync(join(tmpdir(), `callpost-${bundler}-`));
    const built = spawnSync(process.execPath, [join(apps, 'build-browser.mjs'), bundler, out], { cwd: apps, encoding: 'utf8' });
    assert.equal(built.status, 0, built.stderr);
    const batches = [];
    const server = batchServer(batches, serveDir(out));
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    try {
      checkBundledApp(...await pageResult(`http://127.0.0.1:${server.address().port}/`), batches);
    } finally {
      server.close();
    }
  });
}

// `vite dev` serves the same app unbundled, through its dependency
// pre-bundling; the app sends its batch to this test's server.
test('the same app under the Vite dev server works in headless Chromium', { timeout: 120_000 }, async () => {
  const { createServer: viteServer } = await import(pathToFileURL(join(apps, '..', 'node_modules', 'vite', 'dist', 'node', 'index.js')));
  const batches = [];
  const ingest = batchServer(batches);
  await new Promise((r) => ingest.listen(0, '127.0.0.1', r));
  const vite = await viteServer({ root: join(apps, 'browser'), logLevel: 'warn', server: { host: '127.0.0.1', port: 0 } });
  try {
    await vite.listen();
    const endpoint = `http://127.0.0.1:${ingest.address().port}`;
    checkBundledApp(...await pageResult(`${vite.resolvedUrls.local[0]}?endpoint=${encodeURIComponent(endpoint)}`), batches);
  } finally {
    await vite.close();
    ingest.close();
  }
});
