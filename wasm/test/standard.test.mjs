// Standard Webhooks in the npm package: the shared vectors through
// signStandard and verifyStandard in both entries, and deliveries from
// Webhooks({ signature: 'standard' }) to a real node:http receiver built
// with nodeMiddleware, each request also checked by the reference
// verifier from npm (standardwebhooks).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import * as callpost from 'callpost';
import * as verifyEntry from 'callpost/verify';
import { Webhook as ReferenceWebhook } from 'standardwebhooks';
import { vectors } from './helpers.mjs';

const entries = [['callpost', callpost], ['callpost/verify', verifyEntry]];
const { sign: signCases, verify: verifyCases } = vectors('standard_webhooks.json');

for (const [entry, api] of entries) {
  test(`Standard Webhooks vectors (${entry})`, () => {
    assert.equal(api.STANDARD_TOLERANCE_MS, 5 * 60 * 1000);
    for (const c of signCases) {
      const h = api.signStandard(c.id, c.body, c.secrets, c.timestamp * 1000);
      assert.deepEqual(h, { 'webhook-id': c.id, 'webhook-timestamp': String(c.timestamp), 'webhook-signature': c.signature }, c.name);
      // Bytes sign as their text does.
      assert.deepEqual(api.signStandard(c.id, new TextEncoder().encode(c.body), c.secrets, new Date(c.timestamp * 1000)), h, c.name);
    }
    for (const c of verifyCases) {
      const headers = Object.fromEntries(c.headers);
      const options = { now: c.now * 1000, ...(c.tolerance_ms === undefined ? {} : { toleranceMs: c.tolerance_ms }) };
      if (c.expect.error) {
        assert.throws(() => api.verifyStandard(c.body, headers, c.secrets, options), (e) => e.code === c.expect.error, c.name);
      } else {
        assert.deepEqual(api.verifyStandard(c.body, new Headers(c.headers), c.secrets, options), c.expect, c.name);
      }
    }
    assert.throws(() => api.signStandard(1, '{}', signCases[0].secrets), (e) => e.code === 'invalid_argument');
    assert.throws(() => api.verifyStandard('{}', {}, [42]), (e) => e.code === 'invalid_argument');
    assert.throws(() => new api.Receiver(null), (e) => e.code === 'invalid_argument');
  });
}

const KEYS = [Buffer.from('the new key of the npm receiver!'), Buffer.from('the old key, still accepted')];
const SECRETS = KEYS.map((k) => 'whsec_' + k.toString('base64'));
const call = (event, extra = {}) => ({ type: 'track', userId: 'u42', event, messageId: crypto.randomUUID(), ...extra });

// A receiver as its users write it: nodeMiddleware over a Receiver that
// takes the Standard scheme only. Each request is also verified by the
// reference library under each secret; the handler records what it got.
async function receiver(standardSecrets) {
  const middleware = callpost.nodeMiddleware(new callpost.Receiver(null, { standardSecrets }));
  const seen = { processed: [], reference: [] };
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.reference.push(SECRETS.map((s) => {
        try {
          new ReferenceWebhook(s).verify(body, req.headers);
          return true;
        } catch {
          return false;
        }
      }));
      req.body = Buffer.from(body);
      middleware(req, res, () => {
        seen.processed.push(...req.webhook.ids);
        res.statusCode = 204;
        res.end();
      });
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/hook`;
  return { url, seen, close: () => { server.closeAllConnections(); server.close(); } };
}

test('deliveries signed the Standard way reach a nodeMiddleware receiver and the reference verifier', async () => {
  const srv = await receiver([SECRETS[1]]);
  try {
    // A sender rotating its secret signs with both; the receiver holds the
    // old one, and the reference verifier accepts either.
    const hooks = new callpost.Webhooks({ endpoints: [srv.url], signature: 'standard', signingSecrets: SECRETS });
    const sent = call('Order Completed', { properties: { products: [{ sku: 'p-1', name: 'Réveil ⏰', price: 13.75 }] } });
    const r = await hooks.deliver(sent);
    assert.ok(r.delivered, JSON.stringify(r.log));
    assert.deepEqual(srv.seen.processed, [sent.messageId]);
    assert.deepEqual(srv.seen.reference, [[true, true]]);

    // The retry of the same call is answered 200 and not processed again.
    const again = hooks.request(sent, 0);
    const post = (req) => fetch(srv.url, { method: 'POST', body: req.body, headers: req.headers });
    const dup = await post(again);
    assert.equal(dup.status, 200);
    assert.deepEqual(await dup.json(), { duplicates: 1 });

    // Captured and replayed after the tolerance: refused by both.
    const late = hooks.request(call('Replayed'), 0, Date.now() - 6 * 60 * 1000);
    const refused = await post(late);
    assert.equal(refused.status, 401);
    assert.equal((await refused.json()).error, 'timestamp_too_old');
    assert.deepEqual(srv.seen.reference.at(-1), [false, false]);

    // X-Signature alone does not get past a Standard-only receiver.
    const segment = new callpost.Webhooks({ endpoints: [srv.url], sharedSecret: 's3cret' }).request(call('Unsigned'), 0);
    const missing = await post(segment);
    assert.equal(missing.status, 401);
    assert.equal((await missing.json()).error, 'missing_signature');
    assert.deepEqual(srv.seen.processed, [sent.messageId]);
  } finally { srv.close(); }
});

test('webhookHandler takes either scheme when the receiver holds both kinds of secret', async () => {
  const handler = callpost.webhookHandler({ secrets: 's3cret', standardSecrets: SECRETS[0] }, (hook) => {
    return new Response(JSON.stringify({ header: hook.header, ids: hook.ids }), { status: 200 });
  });
  const both = new callpost.Webhooks({ endpoints: ['https://example.com/in'], sharedSecret: 's3cret', signature: 'both', signingSecrets: [SECRETS[0]] });
  const post = (req) => handler(new Request(req.url, { method: 'POST', body: req.body, headers: req.headers }));
  const sent = call('Both');
  const ok = await post(both.request(sent, 0));
  assert.deepEqual(await ok.json(), { header: 'webhook-signature', ids: [sent.messageId] });
  // The webhook-signature is held to, with no fallback to X-Signature.
  const forged = both.request(call('Forged'), 0);
  forged.headers = forged.headers.map(([k, v]) => [k, k === 'webhook-id' ? 'another' : v]);
  const refused = await post(forged);
  assert.equal(refused.status, 401);
  assert.equal((await refused.json()).error, 'signature_mismatch');
  // A request carrying X-Signature only is held to it.
  const classic = new callpost.Webhooks({ endpoints: ['https://example.com/in'], sharedSecret: 's3cret' }).request(call('Classic'), 0);
  assert.equal((await (await post(classic)).json()).header, 'X-Signature');
});
