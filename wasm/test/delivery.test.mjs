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
    // The first request is never answered: deliver() returning at all shows
    // it did not wait for it.
    const r = await new Webhooks({ endpoints: [srv.url], timeoutMs: 300, ...FAST }).deliver(CALL);
    assert.equal(r.attempts, 2);
    assert.equal(r.log[0].outcome.kind, 'timeout');
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

test('basic auth and an OAuth 2.0 bearer token are sent; a failing token endpoint fails attempts as token errors', async () => {
  const srv = await serve(ok);
  const tokens = ['t1', 't2'];
  const auth = await serve((n) => [200, { 'Content-Type': 'application/json' }, JSON.stringify({ access_token: tokens[Math.min(n, 1)], token_type: 'Bearer', expires_in: 3600 })]);
  const want = ['Bearer t1'];
  const crm = await serve((n, q) => (q.headers.authorization === want[0] ? [200] : [401]));
  const down = await serve(() => [401, { 'Content-Type': 'application/json' }, '{"error":"invalid_client"}']);
  try {
    const basic = { type: 'basic', username: 'callpost', password: 'pä:ss' };
    const r = await new Webhooks({ endpoints: [{ url: srv.url + '/hook', auth: basic }], sharedSecret: 's3cret' }).deliver(CALL);
    assert.ok(r.delivered);
    assert.equal(srv.received[0].headers.authorization, 'Basic Y2FsbHBvc3Q6cMOkOnNz');

    const grant = { type: 'oauth2', token_url: auth.url + '/token', client_id: 'c', client_secret: 'hunter2' };
    const hooks = new Webhooks({ endpoints: [{ url: crm.url + '/users', auth: grant }], ...FAST });
    // Built without the token (a host that sends them itself adds it).
    assert.equal(hooks.request(CALL).headers.find(([n]) => n === 'Authorization'), undefined);
    assert.ok((await hooks.deliver(CALL)).delivered);
    assert.ok((await hooks.deliver(CALL)).delivered);
    assert.equal(auth.received.length, 1, 'one token for both deliveries');
    assert.equal(auth.received[0].body, 'grant_type=client_credentials');
    assert.match(auth.received[0].headers.authorization, /^Basic /);
    // The API revokes t1: a 401, a new token, the call delivered.
    want[0] = 'Bearer t2';
    const again = await hooks.deliver(CALL);
    assert.deepEqual([again.delivered, again.attempts, again.log.map((a) => a.outcome.status)], [true, 2, [401, 200]]);
    assert.equal(auth.received.length, 2);

    const failing = { ...grant, token_url: down.url + '/token' };
    const broken = new Webhooks({ endpoints: [{ url: crm.url + '/users', auth: failing }], retryWindowMs: 500, ...FAST });
    const sent = crm.received.length;
    await assert.rejects(broken.deliver(CALL), (e) => e.log.length >= 1 && e.log.every((a) => a.outcome.kind === 'token') &&
      /invalid_client/.test(e.log[0].outcome.message) && !JSON.stringify(e.log).includes('hunter2'));
    assert.equal(crm.received.length, sent, 'nothing sent without a token');

    const cert = { certificate: '-----BEGIN CERTIFICATE-----\nx\n', private_key: '-----BEGIN PRIVATE KEY-----\nx\n' };
    await assert.rejects(new Webhooks({ endpoints: [{ url: crm.url, client_certificate: cert }] }).deliver(CALL),
      (e) => e.code === 'invalid_auth' && e.name === 'SettingsError' && /callpost-relay/.test(e.message));
  } finally { srv.close(); auth.close(); crm.close(); down.close(); }
});

test('failover to the second URL; the third never sees the call', async () => {
  const down = await serve(() => [503]);
  const up = await serve(ok);
  const third = await serve(ok);
  try {
    const r = await new Webhooks({ endpoints: [down.url, { url: up.url, headers: { Authorization: 'Bearer t' } }, third.url], mode: 'failover', ...FAST }).deliver(CALL);
    assert.deepEqual([r.endpoint, r.attempts], [1, 2]);
    assert.equal(up.received[0].headers.authorization, 'Bearer t');
    assert.equal(third.received.length, 0);
  } finally { down.close(); up.close(); third.close(); }
});

test('a connection closed mid-response and a refused port are retried / failed over', async () => {
  const srv = await serve((n) => (n === 0 ? 'close' : [200]));
  try {
    const r = await new Webhooks({ endpoints: ['http://127.0.0.1:9/', srv.url], mode: 'failover', ...FAST }).deliver(CALL);
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

// A handler for `parties` receivers that answers `status` only when all of
// them hold a request at the same moment, and 599 if they never do:
// requests sent one after another cannot get past it.
function together(parties, status = 200) {
  let waiting = [];
  return () => new Promise((resolve) => {
    const timer = setTimeout(() => {
      waiting = waiting.filter((w) => w !== release);
      resolve([599]);
    }, 2000);
    const release = () => { clearTimeout(timer); resolve([status]); };
    waiting.push(release);
    if (waiting.length === parties) for (const w of waiting.splice(0)) w();
  });
}

test('parallel: every round goes to every URL at once, and all of them again after a failed round', async () => {
  const rounds = [together(3, 503), together(3, 200)];
  const servers = await Promise.all([0, 1, 2].map(() => serve((n) => rounds[Math.min(n, 1)]())));
  try {
    const hooks = new Webhooks({ endpoints: servers.map((s) => s.url), sharedSecret: 'k', retryWindowMs: 3000, ...FAST });
    assert.equal(hooks.mode, 'parallel');
    const r = await hooks.deliver(CALL);
    assert.deepEqual(r.log.map((x) => x.round), [1, 1, 1, 2, 2, 2]);
    assert.deepEqual(r.log.map((x) => x.outcome.status), [503, 503, 503, 200, 200, 200], 'each round was in flight together');
    assert.ok(servers.every((s) => s.received.length === 2));
    assert.equal(new Set(servers.map((s) => s.received[1].body)).size, 1, 'the same signed bytes to every URL');
  } finally { servers.forEach((s) => s.close()); }
});

test('parallel: a URL that failed beside a success is not retried', async () => {
  const down = await serve(() => [500]);
  const up = await serve(ok);
  try {
    const r = await new Webhooks({ endpoints: [down.url, up.url], ...FAST }).deliver(CALL);
    assert.deepEqual([r.endpoint, r.attempts], [1, 2]);
    await new Promise((res) => setTimeout(res, 300)); // past the backoff: nothing more comes
    assert.deepEqual([down.received.length, up.received.length], [1, 1]);
  } finally { down.close(); up.close(); }
});

test('delivery state survives a restart', () => {
  const hooks = new Webhooks({ endpoints: ['https://a.example/', 'https://b.example/'], sharedSecret: 'k', mode: 'failover' });
  const d = hooks.delivery(CALL, { nowMs: 1000, seed: 9 });
  const a = d.pollRequest(1000);
  d.handleResponse(1010, a.attempt, { error: 'connection', message: 'reset' });
  const saved = d.toJSON();
  const restored = Delivery.fromJSON(saved, hooks);
  assert.equal(restored.toJSON(), saved);
  const a2 = restored.pollRequest(1010);
  assert.deepEqual([a2.endpoint, a2.attempt, a2.request.body], [1, 2, a.request.body]);
  // Restored with a request in flight, it is sent again as the same attempt.
  const again = Delivery.fromJSON(restored.toJSON(), hooks).pollRequest(5000);
  assert.deepEqual([again.endpoint, again.attempt], [1, 2]);
  assert.throws(() => Delivery.fromJSON('{nope', hooks), (e) => e.code === 'invalid_state' && e.name === 'StateError');
  assert.throws(() => Delivery.fromJSON(saved, new Webhooks({ endpoints: ['https://a.example/'] })), (e) => e.code === 'invalid_state');
  assert.throws(() => Delivery.fromJSON(saved, 'not settings'), (e) => e.code === 'invalid_argument' && e instanceof TypeError);
});

test('raw deliveries without a seed do not share one schedule', () => {
  const hooks = new Webhooks({ endpoints: ['https://a.example/'] });
  const waits = new Set();
  for (let i = 0; i < 5; i++) {
    const d = new Delivery(hooks, CALL, { nowMs: 0 });
    d.handleResponse(0, d.pollRequest(0).attempt, { status: 503 });
    waits.add(d.pollTimeout());
  }
  assert.ok(waits.size > 1);
});

test('signature "standard" and "both" add the Standard Webhooks headers, checked with node:crypto', async () => {
  const { createHmac } = await import('node:crypto');
  const keys = [Buffer.from('the new key of the standard test'), Buffer.from('the old key, during a rotation')];
  const secrets = keys.map((k) => 'whsec_' + k.toString('base64'));
  const now = Date.parse('2026-11-22T10:04:05.123Z');
  for (const [signature, xSignature] of [['standard', false], ['both', true]]) {
    const hooks = new Webhooks({ endpoints: ['https://example.com/in'], sharedSecret: 's3cret', signature, signingSecrets: secrets });
    const r = hooks.request(CALL, 0, now);
    const h = Object.fromEntries(r.headers.map(([k, v]) => [k.toLowerCase(), v]));
    assert.equal('x-signature' in h, xSignature, signature);
    assert.equal(h['webhook-id'], 'm-1');
    assert.equal(h['webhook-timestamp'], String(Math.floor(now / 1000)));
    const expected = keys.map((k) => 'v1,' + createHmac('sha256', k).update(`m-1.${h['webhook-timestamp']}.${r.body}`).digest('base64'));
    assert.equal(h['webhook-signature'], expected.join(' '), signature);
  }
  // Standard signing needs its secrets.
  assert.throws(() => new Webhooks({ endpoints: ['https://example.com/in'], signature: 'standard' }), (e) => e.code === 'invalid_settings');
});

test('deliverBatch sends calls several to a POST; a receiver takes each batch as its list', async () => {
  const srv = await serve((n) => (n === 1 ? [503] : [200]));
  try {
    const hooks = new Webhooks({
      endpoints: [srv.url + '/hook'], sharedSecret: 's3cret', batch: { maxCalls: 2 },
      filters: [{ action: 'drop', if: { field: 'type', equals: 'page' } }], ...FAST,
    });
    const calls = [0, 1, 2, 3, 4].map((i) => ({ type: 'track', userId: 'u1', event: 'Order Completed', messageId: `m-${i}`, properties: { n: i } }));
    calls.splice(2, 0, { type: 'page', userId: 'u1', name: 'Home', messageId: 'm-page' });
    const results = await hooks.deliverBatch(calls);
    assert.deepEqual(results.map((r) => r.delivered), [true, true, false, true, true, true]);
    assert.equal(results[2].filteredBy, 0);
    assert.deepEqual(results.map((r) => r.attempts), [1, 1, 0, 2, 2, 1]);
    assert.equal(srv.received.length, 4);
    assert.equal(srv.received[1].body, srv.received[2].body, 'a batch is retried whole');
    const { Receiver } = await import('callpost');
    const receiver = new Receiver('s3cret', { seen: false });
    const ids = [];
    for (const q of [srv.received[0], srv.received[2], srv.received[3]]) {
      assert.ok(verifyRequest(q.body, q.headers, 's3cret'));
      const hook = await receiver.receive(q.body, q.headers);
      assert.ok(hook.batch);
      ids.push(...hook.ids);
    }
    // The spec's bodies carry no messageId: a call's id is its signed
    // body's (body_ and 16 bytes of its SHA-256) and its index.
    const { createHash } = await import('node:crypto');
    const bodyId = 'body_' + createHash('sha256').update(srv.received[0].body).digest('hex').slice(0, 32);
    assert.ok(srv.received[0].headers['idempotency-key'].startsWith('batch_'));
    assert.deepEqual(ids.slice(0, 2), [`${bodyId}.0`, `${bodyId}.1`]);
    assert.equal(new Set(ids).size, 5);
    assert.deepEqual(hooks.pack(calls).batches.map((b) => b.members), [[0, 1], [3, 4], [5]]);
  } finally { srv.close(); }
  assert.throws(() => new Webhooks({ endpoints: ['https://example.com/'], batch: { maxCalls: 4001 } }), (e) => e.code === 'invalid_settings');
});
