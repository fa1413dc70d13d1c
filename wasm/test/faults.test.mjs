// No data loss under faults, over real HTTP: a receiver that fails 30% with
// 500, hangs past the timeout on 5%, closes mid-response on 5%. Counts are
// printed with the test output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Webhooks, Client } from 'callpost';
import { serve } from './helpers.mjs';

const N = 1000;

function faulty(seed) {
  let s = seed;
  const rnd = () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const acked = new Map();
  const handler = (n, req, body) => {
    const r = rnd();
    if (r < 0.3) return [500];
    if (r < 0.35) return 'hang';
    if (r < 0.4) return 'close';
    const key = req.headers['idempotency-key'] ?? JSON.parse(body).batch[0].messageId;
    const ids = req.headers['idempotency-key'] ? [key] : JSON.parse(body).batch.map((m) => m.messageId);
    for (const id of ids) acked.set(id, (acked.get(id) ?? 0) + 1);
    return [200];
  };
  return { handler, acked };
}

// At least once, not exactly once: when the machine is loaded, a 200 ms
// timeout can fire after the receiver has already accepted, and the retry
// is a duplicate carrying the same Idempotency-Key for the receiver to drop.
test('webhook deliveries under faults: every message delivered or reported', async () => {
  const { handler, acked } = faulty(7);
  const srv = await serve(handler);
  const hooks = new Webhooks({ endpoints: [srv.url], sharedSecret: 'k', timeoutMs: 200, backoffBaseMs: 10, backoffCapMs: 50, retryWindowMs: 30_000 });
  let delivered = 0, reported = 0, attempts = 0, duplicates = 0;
  const ids = Array.from({ length: N }, (_, i) => `m-${i}`);
  try {
    for (let i = 0; i < N; i += 50) {
      await Promise.all(ids.slice(i, i + 50).map(async (messageId) => {
        try {
          const r = await hooks.deliver({ type: 'track', userId: 'u', event: 'e', messageId });
          delivered++; attempts += r.attempts;
          duplicates += acked.get(messageId) - 1;
          assert.ok(acked.get(messageId) >= 1, `${messageId} reported delivered but never accepted`);
        } catch (e) {
          if (e.name !== 'DeliveryError') throw e;
          reported++; attempts += e.log.length;
        }
      }));
    }
  } finally { srv.close(); }
  console.log(`webhooks under faults: sent=${N} delivered=${delivered} reported=${reported} lost=${N - delivered - reported} attempts=${attempts} duplicates=${duplicates}`);
  assert.equal(delivered + reported, N);
  assert.ok(attempts > N * 1.4, 'the faults really happened');
});

test('batching client under faults: close() accounts for every message', async () => {
  const { handler, acked } = faulty(11);
  const srv = await serve(handler);
  const failed = [];
  const c = new Client({ writeKey: 'wk', endpoint: srv.url, flushAt: 10, flushAfter: 50, timeoutMs: 200, backoffBaseMs: 10,
    backoffCapMs: 50, maxAttempts: 4, onError: (e, msgs) => failed.push(...msgs.map((m) => m.messageId)) });
  const sent = Array.from({ length: N }, (_, i) => c.track({ userId: 'u', event: 'e', properties: { i } }));
  try { await c.close({ timeoutMs: 60_000 }); } finally { srv.close(); }
  const delivered = sent.filter((id) => acked.has(id));
  console.log(`client under faults: sent=${N} delivered=${delivered.length} reported=${failed.length} lost=${N - delivered.length - failed.length}`);
  assert.deepEqual(new Set([...delivered, ...failed]), new Set(sent));
  assert.equal(delivered.length + failed.length, N, 'none both delivered and reported');
  assert.ok([...acked.values()].every((v) => v === 1), 'no message acked twice');
});

test('a receiver that never answers blocks nothing', async () => {
  const srv = await serve(() => 'hang');
  try {
    const hooks = new Webhooks({ endpoints: [srv.url], timeoutMs: 200, backoffBaseMs: 50, backoffCapMs: 100, retryWindowMs: 1000 });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    const t0 = Date.now();
    await assert.rejects(hooks.deliver({ type: 'track', userId: 'u', event: 'e' }), (e) => e.code === 'window_exhausted' && e.log.every((a) => a.outcome.kind === 'timeout'));
    clearInterval(timer);
    assert.ok(Date.now() - t0 < 5000, 'the timeout held');
    // A blocked loop would tick at most once; 10 leaves room for a loaded machine.
    assert.ok(ticks > 10, 'the event loop kept running');
  } finally { srv.close(); }
});
