// The batching client against a real ingest server, from the main entry and
// from `callpost/client` (the client-only wasm module), and the CommonJS entry.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as main from 'callpost';
import * as clientEntry from 'callpost/client';
import { Webhooks } from 'callpost';

const CALL = { type: 'track', userId: 'u1', event: 'Tested' };
import { join } from 'node:path';
import { serve, ok, pkgDir, pkgRequire, pkgSize, loadedBy } from './helpers.mjs';

const batches = (srv) => srv.received.map((r) => JSON.parse(r.body));
const ids = (srv) => batches(srv).flatMap((b) => b.batch.map((m) => m.messageId));

for (const [entry, { Client }] of [['callpost', main], ['callpost/client', clientEntry]]) {
  test(`batches of flushAt with Basic auth; close() delivers everything (${entry})`, async () => {
    const srv = await serve(ok);
    try {
      const c = new Client({ writeKey: 'wk_123', endpoint: srv.url, flushAt: 5, flushAfter: 60_000 });
      const sent = [];
      for (let i = 0; i < 12; i++) sent.push(c.track({ userId: 'u1', event: 'E', properties: { i } }));
      sent.push(c.identify({ userId: 'u1', traits: { plan: 'pro' } }), c.page({ userId: 'u1', name: 'Home' }),
        c.screen({ anonymousId: 'a', name: 'Cart' }), c.group({ userId: 'u1', groupId: 'g' }), c.alias({ previousId: 'anon', userId: 'u1' }));
      await c.close();
      assert.deepEqual(batches(srv).map((b) => b.batch.length), [5, 5, 5, 2]);
      for (const r of srv.received) {
        assert.equal(r.path, '/v1/batch');
        assert.equal(r.headers.authorization, 'Basic ' + Buffer.from('wk_123:').toString('base64'));
        assert.ok(r.body.length <= 500_000);
      }
      assert.deepEqual(ids(srv), sent);
      assert.throws(() => c.track({ userId: 'u', event: 'late' }), (e) => e.code === 'closed');
    } finally { srv.close(); }
  });

  test(`a full batch goes out at once while the sender sleeps through a long flushAfter (${entry})`, async () => {
    const srv = await serve(ok);
    try {
      const c = new Client({ writeKey: 'wk', endpoint: srv.url, flushAt: 3, flushAfter: 3_600_000 });
      c.track({ userId: 'u', event: 'E', properties: { i: 0 } });
      // The sender is now asleep until the hour's flush.
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(srv.received.length, 0);
      c.track({ userId: 'u', event: 'E', properties: { i: 1 } });
      c.track({ userId: 'u', event: 'E', properties: { i: 2 } });
      // Only a wake-up sends the batch now; the guard fails a sender that
      // missed it, long before the hour.
      for (let waited = 0; srv.received.length === 0; waited += 10) {
        assert.ok(waited < 20_000, 'the full batch was not sent');
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.deepEqual(batches(srv).map((b) => b.batch.length), [3]);
      await c.close();
    } finally { srv.close(); }
  });

  test(`flushAfter sends a partial batch (${entry})`, async () => {
    const srv = await serve(ok);
    try {
      const c = new Client({ writeKey: 'wk', endpoint: srv.url, flushAfter: 200 });
      c.track({ userId: 'u', event: 'e' });
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(srv.received.length, 0);
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(srv.received.length, 1);
      await c.close();
    } finally { srv.close(); }
  });

  test(`500 three times then 200 loses nothing; 4xx goes to onError (${entry})`, async () => {
    const srv = await serve((n) => (n < 3 ? [500] : [200]));
    const bad = await serve(() => [400]);
    try {
      const errors = [];
      const c = new Client({ writeKey: 'wk', endpoint: srv.url, flushAt: 10, backoffBaseMs: 20, backoffCapMs: 100, onError: (e) => errors.push(e) });
      const sent = Array.from({ length: 10 }, (_, i) => c.track({ userId: 'u', event: 'e', properties: { i } }));
      await c.flush();
      await c.close();
      assert.equal(srv.received.length, 4);
      assert.deepEqual(ids(srv).slice(-10), sent);
      assert.equal(errors.length, 0);

      const failed = [];
      const c2 = new Client({ writeKey: 'wk', endpoint: bad.url, flushAt: 3, onError: (e, msgs) => failed.push([e.code, msgs.map((m) => m.messageId)]) });
      const sent2 = [0, 1, 2].map((i) => c2.track({ userId: 'u', event: 'e', properties: { i } }));
      await c2.close();
      assert.deepEqual(failed, [['rejected', sent2]]);
      assert.equal(bad.received.length, 1);
    } finally { srv.close(); bad.close(); }
  });
}

const { Client } = main;

test('integer ids reach the server as their exact digits; the caller\'s object is left as it is', async () => {
  const srv = await serve(ok);
  try {
    const c = new Client({ writeKey: 'wk', endpoint: srv.url, flushAt: 2 });
    const fields = { userId: 157963456373623802n, anonymousId: 42, event: 'Purchased Item', messageId: 10n ** 30n };
    c.track(fields);
    assert.equal(fields.userId, 157963456373623802n);
    const hooks = new Webhooks({ endpoints: ['https://h.example/'] });
    assert.equal(JSON.parse(hooks.request({ type: 'track', userId: 2n ** 64n, event: 'e' }).body).userId, '18446744073709551616');
    c.alias({ userId: -(2n ** 70n), previousId: Number.MAX_SAFE_INTEGER });
    assert.throws(() => c.track({ userId: 2 ** 53, event: 'e' }), (e) => e.code === 'integer_out_of_range');
    await c.close();
    const [track, alias] = srv.received.flatMap((r) => JSON.parse(r.body).batch);
    assert.deepEqual([track.userId, track.anonymousId, track.messageId], ['157963456373623802', '42', `1${'0'.repeat(30)}`]);
    assert.deepEqual([alias.userId, alias.previousId], [String(-(2n ** 70n)), '9007199254740991']);
  } finally { srv.close(); }
});

test('bad calls throw typed errors and nothing is queued', async () => {
  const c = new Client({ writeKey: 'wk', endpoint: 'http://127.0.0.1:9' });
  assert.throws(() => c.track({ event: 'no user' }), (e) => e.code === 'missing_identity' && e.name === 'InvalidCallError');
  assert.throws(() => c.track({ userId: 'u', event: 'big', properties: { pad: 'x'.repeat(40_000) } }), (e) => e.code === 'message_too_large');
  assert.throws(() => c.track({ userId: 'u', event: 'e', properties: { n: 10n } }), (e) => e.code === 'not_json');
  assert.throws(() => new Client({ writeKey: '' }), (e) => e.code === 'empty_write_key');
  // Option types are checked where they cross into wasm, with one code.
  const badArg = (field) => (e) => e instanceof TypeError && e.code === 'invalid_argument' && e.message.includes(field);
  assert.throws(() => new Client({ writeKey: 'wk', flushAt: '20' }), badArg('flushAt'));
  assert.throws(() => new Client({ writeKey: 'wk', flushAt: 2.5 }), badArg('flushAt'));
  assert.throws(() => new Client({ writeKey: 'wk', maxRetryMs: -1 }), badArg('maxRetryMs'));
  assert.throws(() => new Client({ writeKey: 'wk', endpoint: 42 }), badArg('endpoint'));
  assert.throws(() => new Client({}), badArg('writeKey'));
  assert.throws(() => new Client({ writeKey: 'wk', endpoint: 'https://wk:TOPSECRET@api.example/' }),
    (e) => e.code === 'invalid_endpoint' && !e.message.includes('TOPSECRET') && e.message.includes('***@api.example'));
  assert.throws(() => new Webhooks({ endpoints: ['https://h.example'], timeoutMs: '5s' }).delivery(CALL), badArg('timeoutMs'));
  await c.close({ timeoutMs: 10 });
});

test('require() works with no init step, and a script that never closes still sends', async () => {
  const require = createRequire(import.meta.url);
  const cjs = require('callpost');
  assert.equal(cjs.sign('k', 'b'), (await import('callpost')).sign('k', 'b'));
  assert.equal(typeof cjs.init, 'function');
  const srv = await serve(ok);
  try {
    const script = `const { Client } = require('callpost'); const c = new Client({ writeKey: 'wk', endpoint: ${JSON.stringify(srv.url)}, flushAt: 100, flushAfter: 3600000 });
      for (let i = 0; i < 30; i++) c.track({ userId: 'u', event: 'at exit', properties: { i } });`;
    // Runs in a child so 'beforeExit' fires; the server must see all 30.
    await new Promise((resolve, reject) => {
      import('node:child_process').then(({ execFile }) =>
        execFile(process.execPath, ['-e', script], { cwd: new URL('..', import.meta.url).pathname }, (err) => (err ? reject(err) : resolve())));
    });
    assert.equal(ids(srv).length, 30);
  } finally { srv.close(); }
});

test('callpost/client loads the client-only wasm module, which sends the same messages', async () => {
  const small = pkgRequire('client/node/callpost_wasm.js');
  // Built with the `client` feature alone: no webhooks, no signing.
  assert.equal(typeof small.BatcherCore, 'function');
  assert.equal(small.WebhooksCore, undefined);
  assert.equal(small.signScratch, undefined);
  assert.deepEqual(Object.keys(clientEntry).sort(), ['Batcher', 'Client', 'DEFAULTS', 'MAX_MESSAGE_BYTES', 'VERSION', 'default', 'init', 'parseTimestamp', 'stringify']);
  assert.equal(await clientEntry.init(), clientEntry.default);
  // A size, not a time: what the feature split is for.
  assert.ok(pkgSize('client/web/callpost_wasm_bg.wasm') < pkgSize('web/callpost_wasm_bg.wasm') * 0.8);
  // The entry loads that module, not the full one.
  const loaded = loadedBy('callpost/client');
  assert.ok(loaded.some((f) => f.endsWith(join('client', 'node', 'callpost_wasm.js'))), loaded.join('\n'));
  assert.ok(!loaded.some((f) => f.endsWith(join(pkgDir, 'node', 'callpost_wasm.js'))), loaded.join('\n'));
  // The same Batcher input gives the same batch bytes from both modules.
  const batchOf = (api) => {
    const b = new api.Batcher({ writeKey: 'wk', flushAt: 2 }, 1_700_000_000_000);
    assert.equal(b.pollWake(), false);
    for (let i = 0; i < 2; i++) b.handleCall(1_700_000_000_000, JSON.stringify({ type: 'track', userId: 'u', event: 'e', properties: { i, x: 1.5e-7 } }), new Uint8Array(16).fill(i));
    return b.pollRequest(1_700_000_000_000).request.body;
  };
  assert.equal(batchOf(clientEntry), batchOf(main));
  assert.equal(clientEntry.stringify({ b: 1, 10: 'ten', a: [1.0, 1e21] }), main.stringify({ b: 1, 10: 'ten', a: [1.0, 1e21] }));
});
