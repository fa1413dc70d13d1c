// The shared vectors in testdata/: the same bytes as Rust and Python.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as callpost from 'callpost';
import * as verifyEntry from 'callpost/verify';
import { join } from 'node:path';
import { vectors, pkgDir, pkgRequire, pkgSize, loadedBy } from './helpers.mjs';

// The main entry and `callpost/verify` (the verify-only wasm module) must
// sign and verify alike.
const signingEntries = [['callpost', callpost], ['callpost/verify', verifyEntry]];

const hooksFor = (s) => new callpost.Webhooks({ endpoints: s.endpoints, sharedSecret: s.sharedSecret, method: s.method });

test('webhook requests', () => {
  for (const c of vectors('webhook_requests.json')) {
    const req = hooksFor(c.settings).request(c.call_json ?? c.call, c.endpoint, c.now);
    assert.equal(req.body, c.expect.body, c.name);
    assert.equal(req.method, c.expect.method);
    assert.equal(req.url, c.expect.url);
    assert.deepEqual(req.headers, c.expect.headers, c.name);
    assert.equal(JSON.stringify(JSON.parse(req.body)), req.body, 'survives re-stringify');
    // Text given as UTF-8 bytes is the same call.
    const text = c.call_json ?? JSON.stringify(c.call);
    const fromBytes = hooksFor(c.settings).request(new TextEncoder().encode(text), c.endpoint, c.now);
    assert.deepEqual(fromBytes, req, c.name);
  }
  // Bytes that are not UTF-8 get the core's code, in any position.
  const hooks = new callpost.Webhooks({ endpoints: ['https://example.com/'] });
  for (const bad of [[0xff], [0x7b, 0x22, 0xc3, 0x22, 0x3a, 0x31, 0x7d], [0x7b, 0x7d, 0xed, 0xa0, 0x80]]) {
    assert.throws(() => hooks.request(new Uint8Array(bad), 0, 0), (e) => e.code === 'invalid_unicode' && e.name === 'JSONValueError');
  }
});

test('request() outgrows the scratch buffer it writes into', () => {
  // A call over 1 MB leaves a large scratch buffer, which the next small
  // call replaces with one just its size; the request written back is
  // longer than that and must grow it, not be cut short.
  const hooks = new callpost.Webhooks({ endpoints: ['https://example.com/h'], sharedSecret: 's' });
  const text = '{"type":"track","userId":"u","event":"e","messageId":"m-1","timestamp":"2026-11-22T10:00:00.000Z"}';
  const want = hooks.request(text, 0, 0);
  try {
    hooks.request({ type: 'track', userId: 'u', event: 'e', properties: { pad: 'x'.repeat(1_200_000) } }, 0, 0);
  } catch {
    // Whether so large a call is refused does not matter here.
  }
  const got = hooks.request(new TextEncoder().encode(text), 0, 0);
  assert.ok(got.body.length + got.url.length > text.length);
  assert.deepEqual(got, want);
  assert.equal(got.headers.find(([k]) => k === 'X-Signature')[1], callpost.sign('s', got.body));
});

test('request() of a large call whose request is small', () => {
  // The call's JSON grows the scratch buffer past 1 MB; the request written
  // back drops the unknown field and is small, and reading it must not let
  // the buffer be swapped for a fresh one first.
  const hooks = new callpost.Webhooks({ endpoints: ['https://example.com/h'], sharedSecret: 's' });
  const call = { type: 'track', userId: 'u', event: 'e', messageId: 'm-1', timestamp: '2026-11-22T10:00:00.000Z' };
  const want = hooks.request(call, 0, 0);
  const got = hooks.request({ ...call, unknownField: 'x'.repeat(500_000) }, 0, 0);
  assert.deepEqual(got, want);
  assert.equal(got.url, 'https://example.com/h');
});

test('request() unpacks empty header values and bodies with escaped newlines', () => {
  // requestScratch hands over one string, header count first; an empty value
  // is two newlines in a row and must not end the header list early.
  const hooks = new callpost.Webhooks({
    endpoints: [{ url: 'https://example.com/h', headers: { 'X-Empty': '', 'X-After': 'v' } }],
    sharedSecret: 's',
  });
  const call = { type: 'track', userId: 'u', event: 'line\nbreak', messageId: 'm-1', timestamp: '2026-11-22T10:00:00.000Z' };
  const req = hooks.request(call, 0, 0);
  assert.deepEqual(req.headers.map(([k]) => k), ['User-Agent', 'Content-Type', 'X-Empty', 'X-After', 'X-Signature', 'Idempotency-Key']);
  assert.deepEqual(req.headers[2], ['X-Empty', '']);
  assert.deepEqual(req.headers[3], ['X-After', 'v']);
  assert.equal(req.headers[4][1], callpost.sign('s', req.body));
  assert.equal(req.headers[5][1], 'm-1');
  assert.equal(req.url, 'https://example.com/h');
  assert.equal(JSON.parse(req.body).event, 'line\nbreak');
});

test('stringify', () => {
  for (const c of vectors('stringify.json')) assert.equal(callpost.stringify(JSON.parse(c.input)), c.expected, c.input);
});

for (const [entry, api] of signingEntries) {
  test(`signatures (${entry})`, () => {
    const s = vectors('signatures.json');
    for (const c of s.rfc2202) assert.equal(api.sign(Buffer.from(c.key_hex, 'hex'), Buffer.from(c.data_hex, 'hex')), c.digest);
    for (const c of s.sign) {
      assert.equal(api.sign(c.secret, c.body), c.signature);
      assert.equal(new api.Signer(c.secret).signString(c.body), c.signature);
    }
    for (const c of s.verify) {
      if (c.error) assert.throws(() => api.verify(c.body, c.signature, c.secrets), (e) => e.code === c.error && e.name === 'SignatureError', c.name);
      else assert.equal(api.verify(c.body, c.signature, c.secrets), c.expect, c.name);
    }
  });
}

const nested = (n) => '{"type":"track","userId":"u","event":"e","properties":' + '{"a":'.repeat(n) + '1' + '}'.repeat(n) + '}';

test('error table', () => {
  const e = vectors('errors.json');
  const hooks = new callpost.Webhooks({ endpoints: ['https://example.com/'] });
  for (const c of e.calls) {
    const text = c.call_json ?? nested(c.call_json_nest);
    if (c.code === null) hooks.request(text, 0, 0);
    else assert.throws(() => hooks.request(text, 0, 0), (err) => err.code === c.code && (c.message === undefined || err.message === c.message), c.name);
  }
  for (const c of e.settings) {
    if (c.code === null) hooksFor(c.settings);
    else assert.throws(() => hooksFor(c.settings), (err) => err.code === c.code && err.name === 'SettingsError', c.name);
  }
  for (const c of e.stringify) assert.throws(() => callpost.stringify({ n: Number(c.number) }), (err) => err.code === c.code);
});

test('audiences', () => {
  const a = vectors('audiences.json');
  for (const [name, want] of a.trait_names) assert.equal(callpost.traitName(name), want);
  for (const name of a.invalid_names) assert.throws(() => callpost.traitName(name), (e) => e.code === 'invalid_audience_name');
});

test('batches', () => {
  for (const c of vectors('batches.json')) {
    const k = c.config;
    const b = new callpost.Batcher({ writeKey: k.writeKey, endpoint: k.endpoint, flushAt: k.flushAt, libraryName: k.libraryName, libraryVersion: k.libraryVersion }, 0);
    for (const item of c.calls) b.handleCall(item.now, JSON.stringify(item.call), Buffer.from(item.random, 'hex'));
    b.flush(c.flushAt);
    const bodies = [];
    for (let r = b.pollRequest(c.flushAt); r; r = b.pollRequest(c.flushAt)) {
      assert.equal(r.request.url, c.expect.url);
      assert.deepEqual(r.request.headers, c.expect.headers);
      bodies.push(r.request.body);
      b.handleResponse(c.flushAt, r.batchId, { status: 200 });
    }
    assert.deepEqual(bodies, c.expect.bodies, c.name);
    b.free();
  }
});

test('retry decisions and delivery scenarios', () => {
  const r = vectors('retry.json');
  const start = 1_795_341_845_123;
  for (const c of r.deliveries) {
    const hooks = new callpost.Webhooks({ endpoints: Array.from({ length: c.endpoints }, (_, i) => `https://r${i}.example/`), sharedSecret: 'k', mode: c.mode });
    const call = { type: 'track', userId: 'u', event: 'e', ...(c.integrations ? { integrations: c.integrations } : {}) };
    const d = hooks.delivery(call, { nowMs: start, seed: c.seed });
    const used = new Array(c.endpoints).fill(0);
    let now = start;
    // The runner of testdata/README.md: send every request due now, then
    // answer them at once in the order they were sent; a `timeout` reply
    // never answers, so the core's timer fires.
    for (let i = 0; i < 1000; i++) {
      const sent = [];
      for (let a = d.pollRequest(now); a; a = d.pollRequest(now)) {
        const list = c.replies[a.endpoint];
        sent.push([a.attempt, list[Math.min(used[a.endpoint]++, list.length - 1)]]);
      }
      for (const [attempt, reply] of sent) {
        if (reply.kind === 'timeout') continue;
        if (reply.kind) d.handleResponse(now, attempt, { error: reply.kind, message: 'vector' });
        else d.handleResponse(now, attempt, { status: reply.status, retryAfter: reply.retry_after });
      }
      if (sent.length) continue;
      const t = d.pollTimeout();
      if (t === undefined) break;
      now = t;
      d.handleTimeout(now);
    }
    const code = (o) => (o.kind === 'response' ? `http_${o.status}` : o.kind === 'connection' ? 'connection_error' : o.kind === 'tls' ? 'tls_error' : o.kind);
    assert.deepEqual(d.log.map((x) => [x.sentAt - start, x.endpoint, code(x.outcome), x.round]), c.expect.attempts, c.name);
    const out = d.pollOutcome();
    assert.equal(out.kind, c.expect.outcome, c.name);
    if (out.kind === 'delivered') assert.equal(out.endpoint, c.expect.endpoint);
    if (out.kind === 'gave_up') assert.equal(out.reason, c.expect.reason);
  }
  // The status table, through one-endpoint deliveries.
  const hooks = new callpost.Webhooks({ endpoints: ['https://r.example/'] });
  for (const [status, verdict] of r.statuses) {
    const d = hooks.delivery({ type: 'track', userId: 'u', event: 'e' }, { nowMs: 0, seed: 1 });
    d.handleResponse(0, d.pollRequest(0).attempt, { status });
    const out = d.pollOutcome();
    assert.equal(out ? (out.kind === 'delivered' ? 'success' : 'reject') : 'retry', verdict, String(status));
  }
});

test('call bytes and enqueue errors', () => {
  const e = vectors('errors.json');
  const hooks = new callpost.Webhooks({ endpoints: ['https://example.com/'] });
  for (const c of e.call_bytes) {
    const raw = new Uint8Array(Buffer.from(c.hex, 'hex'));
    if (c.code === null) hooks.request(raw, 0, 0);
    else assert.throws(() => hooks.request(raw, 0, 0), (err) => err.code === c.code, c.name);
  }
  for (const c of e.enqueue) {
    const b = new callpost.Batcher({ writeKey: 'wk' }, 0);
    const call = { type: 'track', event: 'e', properties: { pad: 'x'.repeat(c.pad) }, ...(c.drop_user ? {} : { userId: 'u' }) };
    if (c.code === null) b.handleCall(0, JSON.stringify(call), new Uint8Array(16));
    else assert.throws(() => b.handleCall(0, JSON.stringify(call), new Uint8Array(16)), (err) => err.code === c.code, c.name);
    b.free();
  }
});

test('Retry-After vectors through a delivery', () => {
  const hooks = new callpost.Webhooks({ endpoints: ['https://r.example/'] });
  for (const c of vectors('retry.json').retry_after) {
    const d = hooks.delivery({ type: 'track', userId: 'u', event: 'e' }, { nowMs: c.now, seed: 3 });
    d.handleResponse(c.now, d.pollRequest(c.now).attempt, { status: 503, retryAfter: c.value });
    if (c.ms !== null && c.ms > 4 * 3600_000) {
      assert.equal(d.pollOutcome().reason, 'window_exhausted', c.value);
      continue;
    }
    const wait = d.pollTimeout() - c.now;
    if (c.ms !== null && c.ms >= 10_000) assert.equal(wait, c.ms, c.value);
    else assert.ok(wait >= 5_000 && wait <= 10_000, `${JSON.stringify(c.value)}: ${wait}`);
    d.free();
  }
});

test('large bodies are signed by the platform HMAC, with the same result', async () => {
  const { createHmac } = await import('node:crypto');
  const hooks = new callpost.Webhooks({ endpoints: ['https://example.com/'], sharedSecret: 'k€y' });
  const big = { type: 'track', userId: 'u', event: 'e', properties: { pad: 'é'.repeat(5000) } };
  const small = { type: 'track', userId: 'u', event: 'e' };
  const sig = (r) => r.headers.find(([k]) => k === 'X-Signature')[1];
  for (const call of [big, small]) {
    const r = hooks.request(call);
    assert.equal(sig(r), createHmac('sha1', 'k€y').update(r.body).digest('hex'));
    assert.equal(sig(r), new callpost.Signer('k€y').signString(r.body));
  }
  // In Node the package installs node:crypto for large bodies.
  const crypto = (await import('node:crypto')).default;
  const orig = crypto.createHmac;
  let platformCalls = 0;
  crypto.createHmac = (...a) => { platformCalls++; return orig(...a); };
  try {
    const fresh = new callpost.Webhooks({ endpoints: ['https://example.com/'], sharedSecret: 'k€y' });
    fresh.request(small);
    assert.equal(platformCalls, 0);
    fresh.request(big);
    assert.equal(platformCalls, 1);
  } finally { crypto.createHmac = orig; }
  // The route, through the wasm settings: the core asks a stand-in platform
  // HMAC for bodies from its threshold up only, and never sends an answer
  // that is not 40 lowercase hex digits.
  const wasm = pkgRequire('node/callpost_wasm.js');
  assert.equal(wasm.hostHmacMinBytes(), callpost.DEFAULTS.hostHmacMinBytes);
  const from = callpost.DEFAULTS.hostHmacRequestMinBytes;
  assert.ok(from > callpost.DEFAULTS.hostHmacMinBytes);
  const settings = new wasm.WebhooksCore(JSON.stringify({ endpoints: ['https://example.com/'], sharedSecret: 'k€y' }));
  const seen = [];
  // It gets the body's place in wasm memory, not a copy.
  settings.setNativeHmac((at, len) => {
    seen.push(new TextDecoder().decode(new Uint8Array(wasm.wasmMemory().buffer, at, len)));
    return 'a'.repeat(40);
  });
  const bytes = (call) => new TextEncoder().encode(JSON.stringify(call));
  const sigOf = (packed) => packed.split('\n').find((line, i, all) => all[i - 1] === 'X-Signature');
  const bigPacked = settings.request(bytes(big), 0, 0);
  assert.equal(sigOf(bigPacked), 'a'.repeat(40));
  const smallPacked = settings.request(bytes(small), 0, 0);
  assert.notEqual(sigOf(smallPacked), 'a'.repeat(40));
  assert.equal(seen.length, 1);
  assert.equal(seen[0], bigPacked.slice(bigPacked.indexOf('{"version"')));
  assert.ok(Buffer.byteLength(seen[0]) >= from);
  const d = new wasm.DeliveryCore(settings, bytes(big), 0, { seed: 1 });
  assert.equal(sig(d.pollRequest(0).request), 'a'.repeat(40));
  for (const answer of ['not hex', 'A'.repeat(40), 'a'.repeat(39), undefined]) {
    settings.setNativeHmac(() => answer);
    const packed = settings.request(bytes(big), 0, 0);
    const body = packed.slice(packed.indexOf('{"version"'));
    assert.equal(sigOf(packed), createHmac('sha1', 'k€y').update(body).digest('hex'), String(answer));
  }
});

for (const [entry, api] of signingEntries) {
test(`sign, Signer and verify agree with node:crypto at every size, across wasm memory growth (${entry})`, async () => {
  const { createHmac } = await import('node:crypto');
  const want = (key, body) => createHmac('sha1', key).update(body).digest('hex');
  const bodies = [];
  // Around the node:crypto threshold and the SHA-1 block, as text (with
  // multi-byte characters, so UTF-16 length != UTF-8 length) and as bytes.
  for (const n of [0, 1, 55, 56, 64, 423, 1279, 1280, 1791, 1792, 2048, 5000, 70_000]) {
    const text = 'aé€😀'.repeat(n).slice(0, n);
    bodies.push(text, new TextEncoder().encode(text));
  }
  const check = () => {
    // 'K' right after 'k': the core's one-key cache must tell same-length keys apart.
    for (const key of ['k', 'K', 'k€y'.repeat(30), new Uint8Array([0, 255, 7])]) {
      const signer = new api.Signer(key);
      for (const body of bodies) {
        const expected = want(key, body);
        assert.equal(api.sign(key, body), expected);
        assert.equal(typeof body === 'string' ? signer.signString(body) : signer.signBytes(body), expected);
        assert.equal(api.verify(body, expected, key), true);
        assert.equal(api.verify(body, expected.toUpperCase(), key), true);
        assert.equal(api.verify(body, want('other', body), key), false);
        assert.equal(api.verify(body, expected, ['other', key]), true);
      }
      signer.free();
    }
  };
  check();
  // Make the wasm memory grow (which detaches every view of it), then sign again.
  // verify with several secrets copies the body in as a value: 8 MB grows it.
  const before = api.sign('k', 'abc');
  assert.equal(api.verify('x'.repeat(8 << 20), '0'.repeat(40), ['a', 'b']), false);
  assert.equal(api.sign('k', 'abc'), before);
  check();
  // Bad arguments keep the core's codes.
  assert.throws(() => api.sign('', 'body'), (e) => e.code === 'empty_secret');
  assert.throws(() => api.verify('body', 'a'.repeat(40), ''), (e) => e.code === 'empty_secret');
  assert.throws(() => api.verify('body', 'zz', 'k'), (e) => e.code === 'malformed_signature');
  assert.throws(() => api.sign(42, 'body'), (e) => e instanceof TypeError && e.code === 'invalid_argument');
  assert.throws(() => api.sign('k', { a: 1 }), (e) => e instanceof TypeError && e.code === 'invalid_argument');
  assert.throws(() => new api.Signer('k').signString(new Uint8Array(1)), (e) => e instanceof TypeError && e.code === 'invalid_argument');
  assert.throws(() => new api.Signer('k').signBytes('text'), (e) => e instanceof TypeError && e.code === 'invalid_argument');
  assert.throws(() => new api.Signer(''), (e) => e.code === 'empty_secret');
  // The prekeyed signer shows no secret.
  const { inspect } = await import('node:util');
  assert.ok(!inspect(new api.Signer('hunter2'), { showHidden: true, depth: 5 }).includes('hunter2'));
});
}

test('callpost/verify loads the verify-only wasm module', async () => {
  const small = pkgRequire('verify/node/callpost_wasm.js');
  const full = pkgRequire('node/callpost_wasm.js');
  // Built without the `full` feature: the signing exports only.
  assert.equal(typeof small.signScratch, 'function');
  // The key sits before the body in the scratch buffer; lengths that
  // overlap the two, or run past the buffer, are refused.
  const n = small.wasmMemory().buffer.byteLength - small.scratch(64);
  for (const [keyLen, bodyAt, bodyLen] of [[8, 4, 4], [0, 60, n], [0, 2 ** 31, 2 ** 31]]) {
    assert.throws(() => small.signScratch(keyLen, bodyAt, bodyLen), (e) => e.code === 'invalid_argument', `${keyLen} ${bodyAt} ${bodyLen}`);
  }
  small.signScratch(4, 4, 60);
  assert.equal(small.WebhooksCore, undefined);
  assert.equal(small.BatcherCore, undefined);
  assert.equal(typeof full.WebhooksCore, 'function');
  // And the entry loads that module, not the full one.
  const loaded = loadedBy('callpost/verify');
  assert.ok(loaded.some((f) => f.endsWith(join('verify', 'node', 'callpost_wasm.js'))), loaded.join('\n'));
  assert.ok(!loaded.some((f) => f.endsWith(join(pkgDir, 'node', 'callpost_wasm.js'))), loaded.join('\n'));
  // Link-time optimisation then leaves the HMAC alone (a size, not a time).
  // Under half the full one: receive() carries the JSON parser and the
  // JSON.stringify writer (a batch's first event, the calls' ids).
  assert.ok(pkgSize('verify/web/callpost_wasm_bg.wasm') * 2 < pkgSize('web/callpost_wasm_bg.wasm'));
  // verifyRequest reads X-Signature from either header form.
  const body = '{"type":"track"}';
  const signature = verifyEntry.sign('s', body);
  assert.equal(verifyEntry.verifyRequest(body, new Headers({ 'X-Signature': signature }), 's'), true);
  assert.equal(verifyEntry.verifyRequest(body, { 'x-signature': signature }, ['old', 's']), true);
  assert.equal(verifyEntry.verifyRequest(body, {}, 's'), false);
  assert.equal(await verifyEntry.init(), verifyEntry.default);
});

test('large-body verify uses the host HMAC, and the core when the host answers wrongly', async () => {
  const { createHmac } = await import('node:crypto');
  const { makeSigning } = pkgRequire('api.cjs');
  const wasm = pkgRequire('verify/node/callpost_wasm.js');
  const body = 'x'.repeat(40_000);
  const good = createHmac('sha1', 'key').update(body).digest('hex');
  const calls = [];
  const withHost = (answer) => makeSigning(wasm, { hmacSha1: (k, b) => { calls.push(b.length); return answer(k, b); } }).api;
  // A host that answers: its digests are what the core compares.
  const real = withHost((k, b) => createHmac('sha1', k).update(b).digest('hex'));
  assert.equal(real.verify(body, good, ['old', 'key']), true);
  assert.equal(real.verify(body, good.toUpperCase(), 'key'), true);
  assert.equal(real.verify(body, good, 'other'), false);
  assert.throws(() => real.verify(body, 'zz', 'key'), (e) => e.code === 'malformed_signature');
  assert.deepEqual(calls, [40_000, 40_000, 40_000, 40_000, 40_000]);
  // Not 40 lowercase hex digits: the core verifies with the secrets itself.
  for (const answer of [() => 'NOT HEX', () => good.toUpperCase(), () => good.slice(1)]) {
    const api = withHost(answer);
    assert.equal(api.verify(body, good, 'key'), true);
    assert.equal(api.verify(body, good, 'other'), false);
  }
  // Small bodies, empty secrets and empty lists never reach the host.
  calls.length = 0;
  assert.equal(real.verify('small', createHmac('sha1', 'key').update('small').digest('hex'), 'key'), true);
  assert.throws(() => real.verify(body, good, ['key', '']), (e) => e.code === 'empty_secret');
  assert.throws(() => real.verify(body, good, []), (e) => e.code === 'no_secrets');
  assert.deepEqual(calls, []);
});

test('every error code is raised as the class the core registry names', () => {
  const wasm = pkgRequire('node/callpost_wasm.js');
  const codes = JSON.parse(wasm.errorCodes());
  assert.ok(Object.keys(codes).length >= 40);
  // The classes that derive from TypeError are TypeErrors in JS too.
  for (const [code, name] of Object.entries(codes)) {
    const [cls, isType] = wasm.errorClass(code);
    assert.equal(cls, name, code);
    assert.equal(isType, ['NotJSONError', 'InvalidArgumentError'].includes(name), code);
  }
  assert.deepEqual([...new Set(Object.values(codes))].sort(), wasm.errorClasses().sort());
  // Errors from the shared table carry the registry's class.
  const hooks = new callpost.Webhooks({ endpoints: ['https://example.com/'] });
  for (const c of vectors('errors.json').calls) {
    if (c.code === null || !c.call_json) continue;
    assert.throws(() => hooks.request(c.call_json, 0, 0), (e) => e.code === c.code && e.name === codes[c.code], c.name);
  }
  // Misuse is invalid_argument, a TypeError, in every place it can happen.
  const d = hooks.delivery({ type: 'track', userId: 'u', event: 'e' }, { nowMs: 0, seed: 1 });
  const a = d.pollRequest(0);
  for (const misuse of [
    () => d.handleResponse(0, a.attempt, {}),
    () => d.handleResponse(0, a.attempt, { error: 'dns' }),
    () => hooks.request({ type: 'track', userId: 'u', event: 'e' }, 3, 0),
    () => new callpost.Batcher({ writeKey: 'wk' }, 0).handleCall(0, '{"type":"track","userId":"u","event":"e"}', new Uint8Array(3)),
    () => new callpost.Batcher({ writeKey: 'wk', flushAt: -1 }, 0),
    () => callpost.verifyRequest('b', 42, 's'),
    () => callpost.sign(42, 'b'),
  ]) {
    assert.throws(misuse, (e) => e.code === 'invalid_argument' && e.name === 'InvalidArgumentError' && e instanceof TypeError);
  }
});

test('defaults are the core\'s: DEFAULTS, and every @default in the types names one', async () => {
  const { readFileSync } = await import('node:fs');
  const dts = readFileSync(join(pkgDir, 'index.d.ts'), 'utf8');
  const named = [...dts.matchAll(/@default DEFAULTS\.(\w+)/g)].map((m) => m[1]);
  assert.ok(named.length >= 10);
  for (const name of named) assert.equal(typeof callpost.DEFAULTS[name], 'number', name);
  // No number is restated as a default in the types.
  assert.deepEqual([...dts.matchAll(/@default (\d+)/g)], []);
  const declared = [...dts.matchAll(/readonly (\w+): number;/g)].map((m) => m[1]).filter((n) => n in callpost.DEFAULTS);
  assert.deepEqual(declared.sort(), Object.keys(callpost.DEFAULTS).sort(), 'the Defaults interface lists every default');
  assert.equal(callpost.MAX_MESSAGE_BYTES, callpost.DEFAULTS.maxMessageBytes);
  // What the classes do with no option is what DEFAULTS says.
  const b = new callpost.Batcher({ writeKey: 'wk' }, 0);
  b.handleCall(0, { type: 'track', userId: 'u', event: 'e' });
  assert.equal(b.pollTimeout(), callpost.DEFAULTS.flushAfterMs);
  const d = new callpost.Webhooks({ endpoints: ['https://example.com/'] }).delivery({ type: 'track', userId: 'u', event: 'e' }, { nowMs: 0 });
  assert.equal(d.pollRequest(0).deadlineMs, callpost.DEFAULTS.webhookTimeoutMs);
});

test('the version has one source: the Rust workspace', async () => {
  const { readFileSync } = await import('node:fs');
  const cargo = readFileSync(new URL('../../Cargo.toml', import.meta.url), 'utf8');
  const version = cargo.match(/^version = "([^"]+)"/m)[1];
  assert.equal(callpost.VERSION, version);
  assert.equal(JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')).version, version);
  const { Client } = callpost;
  assert.equal(typeof Client, 'function');
});

for (const [entry, api] of signingEntries) {
  test(`receive vectors (${entry})`, () => {
    const cases = vectors('receive.json');
    assert.ok(cases.length >= 15);
    for (const c of cases) {
      const options = {
        allowFirstEventSignature: c.options.allow_first_event_signature,
        standardSecrets: c.standard_secrets.length > 0 ? c.standard_secrets : null,
        now: c.now_ms,
      };
      // Headers as a plain object of the pairs, and as a Headers object.
      const plain = Object.fromEntries(c.headers);
      for (const [headers, body] of [[plain, c.body], [new Headers(c.headers), new TextEncoder().encode(c.body)]]) {
        if (c.expect.error) {
          assert.throws(() => api.receive(body, headers, c.secrets, options), (e) => e.code === c.expect.error, c.name);
        } else {
          assert.deepEqual(api.receive(body, headers, c.secrets, options), c.expect.value, c.name);
        }
      }
    }
  });

  test(`operational events verify as any webhook (${entry})`, () => {
    const cases = vectors('ops_events.json');
    assert.ok(cases.length >= 6);
    for (const c of cases) {
      const headers = { 'X-Signature': c.expect.signature, 'Idempotency-Key': c.expect.idempotency_key };
      const value = api.receive(c.expect.body, headers, [c.secret]);
      assert.deepEqual([value.version, value.type, value.id], [1, c.type, c.expect.idempotency_key], c.name);
      assert.throws(() => api.receive(c.expect.body, headers, ['another-secret']), (e) => e.code === 'signature_mismatch', c.name);
    }
  });

  test(`Receiver: ids, duplicates and failures (${entry})`, async () => {
    const c = vectors('receive.json').find((v) => v.name === 'callpost_body_idempotency_key');
    const receiver = new api.Receiver(c.secrets);
    const hook = await receiver.receive(c.body, Object.fromEntries(c.headers));
    assert.deepEqual(hook.ids, c.expect.message_ids);
    assert.ok((await receiver.receive(c.body, Object.fromEntries(c.headers))).onlyDuplicates);
    await receiver.failed(hook);
    assert.deepEqual((await receiver.receive(c.body, Object.fromEntries(c.headers))).calls, [c.expect.value]);
    assert.throws(() => api.receive({ type: 'track' }, {}, 's'), (e) => e.code === 'invalid_argument' && /verifyParsed/.test(e.message));
  });
}

// testdata/ids.json: each case's id in each id field, as the JS value its
// `form` names, through a call object (Batcher.prepare), the Client's
// methods and callpost/segment's Analytics; `json` cases as a literal in
// the call's JSON text.
test('id vectors', async () => {
  const { calls, cases } = vectors('ids.json');
  assert.deepEqual(Object.keys(calls), ['userId', 'anonymousId', 'groupId', 'previousId', 'messageId']);
  const { Analytics } = await import('callpost/segment');
  const client = new callpost.Client({ writeKey: 'wk', disable: true });
  const analytics = new Analytics({ writeKey: 'wk', disable: true });
  const b = new callpost.Batcher({ writeKey: 'wk' }, 0);
  const viaBatcher = (call) => JSON.parse(b.prepare(0, call, new Uint8Array(16)).json);
  const viaClient = ({ type, ...fields }) => new Promise((resolve, reject) => {
    client[type](fields, (err, message) => (err ? reject(err) : resolve(message)));
  });
  const viaAnalytics = ({ type, ...fields }) => new Promise((resolve, reject) => {
    analytics[type](fields, (err, ctx) => (err ? reject(err) : resolve(ctx.event)));
  });
  let checked = 0;
  for (const c of cases) {
    for (const field of c.fields ?? Object.keys(calls)) {
      const what = `${c.name} in ${field}`;
      let runs;
      if (c.form === 'json') {
        const text = `${JSON.stringify(calls[field]).slice(0, -1)},"${field}":${c.id}}`;
        runs = [async () => viaBatcher(text)];
      } else {
        const forms = {
          integer: () => [BigInt(c.id), ...(Number.isSafeInteger(Number(c.id)) ? [Number(c.id)] : [])],
          float: () => [Number(c.id)],
          string: () => [c.id],
          bool: () => [c.id === 'true'],
        };
        assert.ok(forms[c.form], `${c.name}: unknown form ${c.form}`);
        const values = forms[c.form]();
        runs = values.flatMap((v) => {
          const call = { ...calls[field], [field]: v };
          return [viaBatcher, viaClient, viaAnalytics].map((via) => async () => via(call));
        });
      }
      for (const run of runs) {
        if (c.code) await assert.rejects(run, (err) => err.code === c.code, what);
        else assert.equal((await run())[field], c.expect, what);
        checked++;
      }
    }
  }
  assert.ok(checked > 100, String(checked));
  b.free();
  await client.close();
  await analytics.closeAndFlush();
});

// testdata/filters.json: each case's filters keep its call with exactly the
// expected body, or drop it by the expected rule, through a Delivery as
// Webhooks.deliver runs one; refused rules throw invalid_settings.
test('filter vectors', async () => {
  const { cases, invalid } = vectors('filters.json');
  assert.ok(cases.length >= 40);
  for (const c of cases) {
    const hooks = new callpost.Webhooks({ endpoints: ['https://hooks.example.com/in'], filters: c.filters });
    const d = new callpost.Delivery(hooks, c.call, { nowMs: c.now });
    const attempt = d.pollRequest(c.now);
    if (c.expect.dropped_by !== undefined) {
      assert.equal(attempt, undefined, c.name);
      assert.deepEqual(d.pollOutcome(), { kind: 'filtered', rule: c.expect.dropped_by }, c.name);
      const r = await hooks.deliver(c.call);
      assert.deepEqual([r.delivered, r.filteredBy, r.attempts], [false, c.expect.dropped_by, 0], c.name);
    } else {
      assert.equal(attempt.request.body, c.expect.body, c.name);
    }
  }
  for (const c of invalid) {
    assert.throws(() => new callpost.Webhooks({ endpoints: ['https://hooks.example.com/in'], filters: c.filters }),
      (e) => e.code === c.code && /filters/.test(e.message), c.name);
  }
});

// testdata/mappings.json: each case's mapping builds its call's body exactly
// as the generator's JavaScript reading of the rules does, in the request
// and through a Delivery; refused mappings throw invalid_settings.
test('mapping vectors', () => {
  const { cases, invalid } = vectors('mappings.json');
  assert.ok(cases.length >= 40);
  for (const c of cases) {
    const hooks = new callpost.Webhooks({ endpoints: ['https://hooks.example.com/in'], mapping: c.mapping });
    assert.equal(hooks.request(c.call, 0, c.now).body, c.expect.body, c.name);
    const d = new callpost.Delivery(hooks, c.call, { nowMs: c.now });
    assert.equal(d.pollRequest(c.now).request.body, c.expect.body, c.name);
  }
  for (const c of invalid) {
    assert.throws(() => new callpost.Webhooks({ endpoints: ['https://hooks.example.com/in'], mapping: c.mapping }),
      (e) => e.code === c.code && /mapping/.test(e.message), c.name);
  }
});

// testdata/mappings.json's url_templates: each call's URL filled in from its
// endpoint's template, or refused with invalid_url_value (the delivery gives
// up unsent); invalid_url_templates are refused when the settings are read.
test('url template vectors', () => {
  const { url_templates: cases, invalid_url_templates: invalid } = vectors('mappings.json');
  assert.ok(cases.length >= 12);
  for (const c of cases) {
    const hooks = hooksFor(c.settings);
    const d = new callpost.Delivery(hooks, c.call, { nowMs: c.now });
    if (c.expect.url) {
      assert.equal(hooks.request(c.call, 0, c.now).url, c.expect.url, c.name);
      assert.equal(d.pollRequest(c.now).request.url, c.expect.url, c.name);
    } else {
      assert.throws(() => hooks.request(c.call, 0, c.now), (e) => e.code === c.expect.code, c.name);
      assert.equal(d.pollRequest(c.now), undefined, c.name);
      assert.deepEqual(d.pollOutcome(), { kind: 'gave_up', reason: 'invalid_url_value', attempts: 0, last: null }, c.name);
    }
  }
  for (const c of invalid) {
    assert.throws(() => new callpost.Webhooks(c.settings), (e) => e.code === c.code, c.name);
  }
});

// testdata/webhook_batches.json: calls packed into batches (ids, bodies,
// members) and the calls in none, as the generator's JavaScript packs them.
test('webhook batch vectors', () => {
  for (const c of vectors('webhook_batches.json')) {
    const hooks = new callpost.Webhooks({ endpoints: ['https://hooks.example.com/in'], sharedSecret: 's3cret', batch: c.batch, filters: c.filters });
    const { batches, skipped } = hooks.pack(c.calls, c.now);
    assert.deepEqual(batches, c.expect.batches, c.name);
    assert.deepEqual(skipped.map(([i, o]) => [i, o.kind, ...(o.kind === 'filtered' ? [o.rule] : [])]), c.expect.skipped, c.name);
  }
});
