// Webhook delivery over real HTTP(S) on 127.0.0.1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Webhooks, Delivery, sign, verifyRequest } from 'callpost';
import { serve, ok, selfSigned } from './helpers.mjs';

const CALL = { type: 'track', userId: 'u1', event: 'Tested', messageId: 'm-1', properties: { n: 1 } };
const FAST = { backoffBaseMs: 50, backoffCapMs: 200 };

test('500 then 200 is retried and delivered once, same signed bytes', async () => {
  const srv = await serve((n) => (n === 0 ? [500] : [200]));
  try {
    const r = await new Webhooks({ endpoints: [srv.url + '/hook'], sharedSecret: 's3cret', ...FAST }).deliver(CALL);
    assert.deepEqual([r.delivered, r.endpoint, r.attempts], [true, 0, 2]);
    assert.equal(srv.received.length, 2);
    assert.equal(srv.received[0].body, srv.received[1].body);
    for (const q of srv.received) {
      assert.equal(q.headers['x-signature'], sign('s3cret', q.body));
      assert.equal(q.headers['idempotency-key'], 'm-1');
      assert.equal(q.headers['user-agent'], 'callpost/1.0');
      assert.ok(verifyRequest(q.body, q.headers, 's3cret'));
    }
  } finally { srv.close(); }
});

test('a receiver slower than the timeout is retried', async () => {
  const srv = await serve((n) => (n === 0 ? 'hang' : [200]));
  try {
    const t0 = Date.now();
    const r = await new Webhooks({ endpoints: [srv.url], timeoutMs: 300, ...FAST }).deliver(CALL);
    assert.equal(r.attempts, 2);
    assert.equal(r.log[0].outcome.kind, 'timeout');
    assert.ok(Date.now() - t0 < 2000);
  } finally { srv.close(); }
});

test('4xx and 3xx are not retried; redirects are not followed', async () => {
  for (const status of [400, 404, 410, 302]) {
    const target = await serve(ok);
    const srv = await serve(() => [status, { Location: target.url }]);
    try {
      await assert.rejects(new Webhooks({ endpoints: [srv.url], ...FAST }).deliver(CALL),
        (e) => e.name === 'DeliveryError' && e.code === 'all_endpoints_rejected');
      assert.equal(srv.received.length, 1);
      assert.equal(target.received.length, 0, 'the redirect target saw nothing');
    } finally { srv.close(); target.close(); }
  }
});

test('failover to the second URL; the third never sees the call', async () => {
  const down = await serve(() => [503]);
  const up = await serve(ok);
  const third = await serve(ok);
  try {
    const r = await new Webhooks({ endpoints: [down.url, { url: up.url, headers: { Authorization: 'Bearer t' } }, third.url], ...FAST }).deliver(CALL);
    assert.deepEqual([r.endpoint, r.attempts], [1, 2]);
    assert.equal(up.received[0].headers.authorization, 'Bearer t');
    assert.equal(third.received.length, 0);
  } finally { down.close(); up.close(); third.close(); }
});

test('a connection closed mid-response and a refused port are retried / failed over', async () => {
  const srv = await serve((n) => (n === 0 ? 'close' : [200]));
  try {
    const r = await new Webhooks({ endpoints: ['http://127.0.0.1:9/', srv.url], ...FAST }).deliver(CALL);
    assert.equal(r.log[0].outcome.kind, 'connection');
    assert.equal(r.log[1].outcome.kind, 'connection');
    assert.equal(r.endpoint, 1);
  } finally { srv.close(); }
});

test('a self-signed HTTPS receiver is rejected and sees no request', async () => {
  const srv = await serve(ok, selfSigned());
  try {
    await assert.rejects(new Webhooks({ endpoints: [srv.url + '/hook'], ...FAST }).deliver(CALL), (e) => {
      assert.equal(e.code, 'all_endpoints_rejected');
      assert.equal(e.log[0].outcome.kind, 'tls');
      return true;
    });
    assert.equal(srv.received.length, 0);
  } finally { srv.close(); }
});

test('delivery state survives a restart', () => {
  const hooks = new Webhooks({ endpoints: ['https://a.example/', 'https://b.example/'], sharedSecret: 'k' });
  const d = hooks.delivery(CALL, { nowMs: 1000, seed: 9 });
  const a = d.pollRequest(1000, hooks.settings);
  d.handleResponse(1010, undefined, undefined, 'connection', 'reset');
  const saved = d.toJSON();
  const restored = Delivery.fromJSON(saved);
  assert.equal(restored.toJSON(), saved);
  const a2 = restored.pollRequest(1010, hooks.settings);
  assert.deepEqual([a2.endpoint, a2.attempt, a2.request.body], [1, 2, a.request.body]);
  assert.throws(() => Delivery.fromJSON('{nope'), (e) => e.code === 'invalid_state');
});
