// Regenerates the expected outputs in this folder from an independent
// oracle: JavaScript's own JSON.stringify, Date and node:crypto. The inputs
// live here; the Rust, Python and JS suites only read the generated files.
// Run: node testdata/generate.mjs
import { createHash, createHmac } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const here = new URL('.', import.meta.url);
const write = (name, data) => writeFileSync(new URL(name, here), JSON.stringify(data, null, 1) + '\n');
const hmac = (key, body) => createHmac('sha1', Buffer.from(key, 'utf8')).update(Buffer.from(body, 'utf8')).digest('hex');
const iso = (t) => new Date(t).toISOString();

// The destination spec's "Body shape by call kind" table, written in JS.
function body(call, now) {
  const ts = iso(call.timestamp ?? now);
  const uid = call.userId === '' ? undefined : (typeof call.userId === 'number' ? String(call.userId) : call.userId);
  const o = {};
  if (call.type !== 'delete') o.version = 1;
  o.type = call.type;
  const put = (k, v) => { if (v !== undefined && v !== null) o[k] = v; };
  switch (call.type) {
    case 'page': put('userId', uid); o.properties = call.properties ?? {}; o.timestamp = ts; break;
    case 'screen': {
      put('userId', uid); put('name', call.name); o.timestamp = ts;
      const c = call.context ?? {}; const ctx = {};
      for (const p of ['device', 'os', 'app']) if (p in c) ctx[p] = c[p];
      o.context = ctx; break;
    }
    case 'identify': put('userId', uid); o.traits = call.traits ?? {}; o.timestamp = ts; break;
    case 'track': put('userId', uid); put('event', call.event); o.properties = call.properties ?? {}; o.timestamp = ts; break;
    case 'alias': put('Previous ID', call.previousId); put('User ID', uid); o.timestamp = ts; break;
    case 'group': put('groupId', call.groupId); put('userId', uid); o.traits = call.traits ?? {}; o.timestamp = ts; break;
    case 'delete': put('userId', uid); o.timestamp = ts; break;
  }
  return JSON.stringify(o);
}

const NOW = Date.parse('2026-11-22T10:04:05.123Z');
const settings = {
  endpoints: [
    { url: 'https://hooks.example.com/segment', headers: { Authorization: 'Bearer abc', 'X-Team': 'growth' } },
    'http://127.0.0.1:8080/fallback',
  ],
  sharedSecret: 'whsec-test-7f3a',
};
const unsigned = { endpoints: ['https://hooks.example.com/'] };
// A receiver that updates a record: the same request under another method.
const put = { ...settings, method: 'PUT' };
const patch = { endpoints: ['https://crm.example.com/users'], method: 'PATCH' };
// HTTP Basic (RFC 7617): the UTF-8 of user:password in base64, after the
// static headers.
const basicAuth = {
  endpoints: [{ url: 'https://crm.example.com/in', headers: { 'X-Team': 'growth' },
    auth: { type: 'basic', username: 'callpost', password: 'pä:ss wörd' } }],
  sharedSecret: 'whsec-test-7f3a',
};

const calls = [
  ['track_basic', { type: 'track', userId: 'u-123', event: 'Order Completed', messageId: 'msg-1',
    properties: { total: 25.0, currency: 'EUR', items: [{ sku: 'A1', qty: 2, price: 12.5 }], coupon: null },
    timestamp: '2026-11-22T10:04:05.123Z' }],
  // Raw JSON text: key order and number spelling as a sender would write them.
  ['track_integer_keys_and_numbers', String.raw`{"type":"track","userId":"u","event":"e","timestamp":"2026-01-01T00:00:00Z","properties":{"b":1,"10":"ten","a":1e21,"2":1.5e-7,"01":1e16,"neg":-0,"big":9007199254740991,"tiny":5e-324,"f":25.0,"nested":{"z":1,"0":0}}}`],
  ['track_unicode_and_controls', String.raw`{"type":"track","anonymousId":"anon-1","event":"Résumé 😀 \"quoted\"\n","properties":{"ctl":"\u0000\u0001\b\f\n\r\t\u001f\u007f","sep":"\u2028\u2029","back":"a\\b\/c"},"timestamp":"2026-11-22T12:04:05.123+02:00"}`],
  ['track_no_properties_offset_timestamp', { type: 'track', userId: 'u', event: 'Signed Up', timestamp: '2026-11-22 23:30:00.987654-01:00' }],
  ['track_stamped_with_now', { type: 'track', userId: 42, event: 'Numeric Id' }],
  ['page', { type: 'page', userId: 'u', name: 'Home', category: 'Docs',
    properties: { path: '/', referrer: 'https://r.example/', title: 'Home', url: 'https://x.example/', extra: true }, timestamp: '2026-11-22T10:04:05Z' }],
  ['page_anonymous_only', { type: 'page', anonymousId: 'a-1', timestamp: '2026-11-22T10:04:05Z' }],
  ['screen', { type: 'screen', userId: 'u', name: 'Checkout', timestamp: '2026-11-22T10:04:05.5Z',
    context: { ip: '203.0.113.9', app: { build: '42', name: 'Shop', version: '1.2' }, device: { model: 'Pixel', type: 'android' }, os: { name: 'Android', version: '15' } } }],
  ['screen_no_context', { type: 'screen', anonymousId: 'a', timestamp: '2026-11-22T10:04:05Z' }],
  ['identify', { type: 'identify', userId: 'u', traits: { email: 'a@example.com', plan: 'pro', logins: 3 }, timestamp: '2026-11-22T10:04:05Z', messageId: 'id-9' }],
  ['identify_no_traits', { type: 'identify', userId: 'u', timestamp: '1969-07-20T20:17:40Z' }],
  ['alias', { type: 'alias', userId: 'new-id', previousId: 'old-id', timestamp: '2026-11-22T10:04:05Z' }],
  ['group', { type: 'group', userId: 'u', groupId: 'g-1', traits: { name: 'Initech', employees: 250 }, timestamp: '2026-11-22T10:04:05Z' }],
  ['group_anonymous', { type: 'group', anonymousId: 'a', groupId: 'g-2', timestamp: '2026-11-22T10:04:05Z' }],
  ['delete', { type: 'delete', userId: 'u-gone', timestamp: '2026-11-22T10:04:05Z' }],
  ['ignores_unknown_keys', { type: 'identify', userId: 'u', sentAt: 'x', version: 2, channel: 'server', timestamp: '2026-11-22T10:04:05Z' }],
];

const requests = [];
for (const [name, input] of calls) {
  const call = typeof input === 'string' ? JSON.parse(input) : input;
  for (const [sname, s, endpoint] of [['signed', settings, 0], ['signed_ep1', settings, 1], ['unsigned', unsigned, 0], ['put', put, 1], ['patch', patch, 0], ['basic', basicAuth, 0]]) {
    if (sname === 'signed_ep1' && name !== 'track_basic') continue;
    if ((sname === 'put' || sname === 'patch' || sname === 'basic') && !['track_basic', 'identify'].includes(name)) continue;
    const b = body(call, NOW);
    const ep = s.endpoints[endpoint];
    const headers = [['User-Agent', 'callpost/1.0'], ['Content-Type', 'application/json']];
    if (typeof ep === 'object') headers.push(...Object.entries(ep.headers));
    if (typeof ep === 'object' && ep.auth?.type === 'basic') {
      headers.push(['Authorization', 'Basic ' + Buffer.from(`${ep.auth.username}:${ep.auth.password}`, 'utf8').toString('base64')]);
    }
    if (s.sharedSecret) headers.push(['X-Signature', hmac(s.sharedSecret, b)]);
    if (call.messageId) headers.push(['Idempotency-Key', call.messageId]);
    const url = new URL(typeof ep === 'string' ? ep : ep.url).href;
    const given = typeof input === 'string' ? { call_json: input } : { call };
    requests.push({ name: `${name}/${sname}`, settings: s, endpoint, now: NOW, ...given, expect: { method: s.method ?? 'POST', url, headers, body: b } });
  }
}
write('webhook_requests.json', requests);

// stringify: input JSON text, expected JSON.stringify(JSON.parse(text)).
const texts = [
  '{"b":1,"10":2,"a":3,"2":4,"01":5,"4294967295":6,"4294967294":7,"-1":8}',
  '[1.0,-0,1e21,1e20,1.5e-7,0.000001,1e-7,123456789012345680000,0.1,5e-324,1.7976931348623157e308,-25.50]',
  '"\\u0000\\u001f\\u007f\\b\\f\\n\\r\\t\\"\\\\\\/ \\u2028 é 😀 \\ud83d\\ude00"',
  '{"a":{"b":[{"c":null,"d":true,"e":false}]},"":"empty key","a":"dup replaces"}',
  '[]', '{}', '0', '-0', '"plain"', 'null', '[[[]]]',
  '9007199254740991', '-9007199254740991', '12345678901234567890123',
];
write('stringify.json', texts.map((text) => ({ input: text, expected: JSON.stringify(JSON.parse(text)) })));

// RFC 2202 section 3 (HMAC-SHA1), plus sign() over UTF-8 strings.
const rfc2202 = [
  ['0b'.repeat(20), Buffer.from('Hi There').toString('hex')],
  [Buffer.from('Jefe').toString('hex'), Buffer.from('what do ya want for nothing?').toString('hex')],
  ['aa'.repeat(20), 'dd'.repeat(50)],
  ['0102030405060708090a0b0c0d0e0f10111213141516171819', 'cd'.repeat(50)],
  ['0c'.repeat(20), Buffer.from('Test With Truncation').toString('hex')],
  ['aa'.repeat(80), Buffer.from('Test Using Larger Than Block-Size Key - Hash Key First').toString('hex')],
  ['aa'.repeat(80), Buffer.from('Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data').toString('hex')],
].map(([key, data]) => ({ key_hex: key, data_hex: data,
  digest: createHmac('sha1', Buffer.from(key, 'hex')).update(Buffer.from(data, 'hex')).digest('hex') }));
const signs = [['secret', '{"a":1}'], ['ключ 🔑', 'body with ünïcode'], ['k', ''], ['x'.repeat(1000), 'long key']]
  .map(([secret, body]) => ({ secret, body, signature: hmac(secret, body) }));
const good = hmac('s1', '{"type":"track"}');
const verify = [
  { name: 'match', body: '{"type":"track"}', signature: good, secrets: ['s1'], expect: true },
  { name: 'rotation_second_secret', body: '{"type":"track"}', signature: good, secrets: ['old', 's1'], expect: true },
  { name: 'uppercase_hex_accepted', body: '{"type":"track"}', signature: good.toUpperCase(), secrets: ['s1'], expect: true },
  { name: 'wrong_secret', body: '{"type":"track"}', signature: good, secrets: ['s2'], expect: false },
  { name: 'body_changed', body: '{"type":"track" }', signature: good, secrets: ['s1'], expect: false },
  { name: 'too_short', body: '{}', signature: good.slice(0, 39), secrets: ['s1'], error: 'malformed_signature' },
  { name: 'too_long', body: '{}', signature: good + '0', secrets: ['s1'], error: 'malformed_signature' },
  { name: 'non_hex', body: '{}', signature: 'z'.repeat(40), secrets: ['s1'], error: 'malformed_signature' },
  { name: 'sha1_prefixed', body: '{}', signature: 'sha1=' + good, secrets: ['s1'], error: 'malformed_signature' },
  { name: 'no_secrets', body: '{}', signature: good, secrets: [], error: 'no_secrets' },
  { name: 'empty_secret', body: '{}', signature: good, secrets: [''], error: 'empty_secret' },
];
write('signatures.json', { rfc2202, sign: signs, verify });
console.log(`wrote ${requests.length} requests, ${texts.length} stringify, ${rfc2202.length + signs.length + verify.length} signature cases`);

// Batches: Segment messages in callpost's key order, built with JS, and the
// /v1/batch envelope. messageId is a UUID v4 made from the given random bytes.
function uuidFromBytes(hex) {
  const b = Buffer.from(hex, 'hex');
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
function message(call, now, randomHex, library) {
  const m = { type: call.type };
  const put = (k, v) => { if (v !== undefined && v !== null && v !== '') m[k] = v; };
  put('messageId', call.messageId || uuidFromBytes(randomHex));
  m.timestamp = iso(call.timestamp ?? now);
  put('userId', call.userId); put('anonymousId', call.anonymousId); put('event', call.event);
  put('name', call.name); put('category', call.category); put('groupId', call.groupId); put('previousId', call.previousId);
  if (call.properties) m.properties = call.properties;
  if (call.traits) m.traits = call.traits;
  m.context = { ...(call.context ?? {}), library };
  if (call.integrations) m.integrations = call.integrations;
  return m;
}
const library = { name: 'callpost', version: '0.1.0' };
const batchCalls = [
  { now: NOW, random: '00112233445566778899aabbccddeeff', call: { type: 'identify', userId: 'u1', traits: { plan: 'pro', 7: 'seven' } } },
  { now: NOW + 10, random: 'ffeeddccbbaa99887766554433221100', call: { type: 'track', anonymousId: 'a1', event: 'Clicked', properties: { x: 1.5 }, context: { ip: '203.0.113.5' }, integrations: { All: false, Webhooks: true } } },
  { now: NOW + 20, random: '0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f', call: { type: 'page', userId: 'u1', name: 'Home', category: 'Docs', properties: { path: '/' } } },
  { now: NOW + 30, random: 'a0a1a2a3a4a5a6a7a8a9aaabacadaeaf', call: { type: 'screen', userId: 'u1', name: 'Cart', timestamp: '2020-02-02T02:02:02.222+01:00' } },
  { now: NOW + 40, random: '10101010101010101010101010101010', call: { type: 'group', userId: 'u1', groupId: 'g1', traits: { name: 'Initech' }, messageId: 'caller-id' } },
  { now: NOW + 50, random: '20202020202020202020202020202020', call: { type: 'alias', userId: 'u2', previousId: 'u1' } },
];
const sentAt = NOW + 60;
const batches = [];
for (const flushAt of [3, 20]) {
  const msgs = batchCalls.map(({ call, now, random }) => message(call, now, random, library));
  const groups = [];
  for (let i = 0; i < msgs.length; i += flushAt) groups.push(msgs.slice(i, i + flushAt));
  batches.push({
    name: `flush_at_${flushAt}`,
    config: { writeKey: 'wk_shared', endpoint: 'https://ingest.example.com/base/', flushAt, libraryName: library.name, libraryVersion: library.version },
    calls: batchCalls, flushAt: sentAt,
    expect: {
      url: 'https://ingest.example.com/base/v1/batch',
      headers: [['User-Agent', 'callpost/0.1.0'], ['Content-Type', 'application/json'], ['Authorization', 'Basic ' + Buffer.from('wk_shared:').toString('base64')]],
      bodies: groups.map((g) => JSON.stringify({ batch: g, sentAt: iso(sentAt) })),
    },
  });
}
write('batches.json', batches);

// Ingest: Tracking API requests as the relay receives them, and what Segment's
// servers make of each call (segment-docs, "Common fields" and "Timestamps"),
// written in JS: messageId filled in (a UUID v4 from the given bytes),
// receivedAt, sentAt (the call's or the batch's), originalTimestamp, the
// skew-corrected timestamp receivedAt − (sentAt − originalTimestamp), and the
// batch's context and integrations under the call's own keys.
function enriched(call, batch, receivedAt, randomHex) {
  const m = { type: call.type };
  const put = (k, v) => { if (v !== undefined && v !== null && v !== '') m[k] = v; };
  put('messageId', call.messageId || uuidFromBytes(randomHex));
  // An unparseable sentAt is ignored, as if absent.
  const valid = (t) => (t !== undefined && !Number.isNaN(Date.parse(t)) ? t : undefined);
  const sent = valid(call.sentAt) ?? valid(batch.sentAt);
  const original = call.timestamp;
  let ts;
  if (original !== undefined && sent !== undefined) ts = receivedAt - (Date.parse(sent) - Date.parse(original));
  else if (original !== undefined) ts = Date.parse(original);
  else ts = receivedAt;
  m.timestamp = iso(ts);
  put('userId', call.userId); put('anonymousId', call.anonymousId); put('event', call.event);
  put('name', call.name); put('category', call.category); put('groupId', call.groupId); put('previousId', call.previousId);
  if (call.properties) m.properties = call.properties;
  if (call.traits) m.traits = call.traits;
  if (call.context || batch.context) m.context = { ...(call.context ?? {}), ...Object.fromEntries(Object.entries(batch.context ?? {}).filter(([k]) => !(k in (call.context ?? {})))) };
  if (call.integrations || batch.integrations) m.integrations = { ...(call.integrations ?? {}), ...Object.fromEntries(Object.entries(batch.integrations ?? {}).filter(([k]) => !(k in (call.integrations ?? {})))) };
  if (original !== undefined) m.originalTimestamp = iso(Date.parse(original));
  if (sent !== undefined) m.sentAt = iso(Date.parse(sent));
  m.receivedAt = iso(receivedAt);
  return JSON.stringify(m);
}
const RECEIVED = Date.parse('2026-11-22T12:00:00.500Z');
const basic = (key) => 'Basic ' + Buffer.from(`${key}:`).toString('base64');
const R = ['0123456789abcdef0123456789abcdef', 'fedcba9876543210fedcba9876543210', '11111111111111112222222222222222'];
const ingestCases = [
  { name: 'batch_with_skewed_clock', path: '/v1/batch', body: { writeKey: 'wk_body', sentAt: '2026-11-22T11:59:00.000Z', batch: [
    { type: 'track', userId: 'u1', event: 'Order Completed', messageId: 'm1', timestamp: '2026-11-22T11:58:59.000Z', properties: { total: 25, products: [{ sku: 'A', price: 12.5 }] } },
    { type: 'identify', anonymousId: 'a1', messageId: 'm2', timestamp: '2026-11-22T12:58:00.000+01:00', traits: { plan: 'pro' } },
  ] } },
  { name: 'message_id_filled_and_timestamp_from_receipt', path: '/v1/batch', authorization: basic('wk_header'), body: { batch: [
    { type: 'page', userId: 'u1', name: 'Home' },
    { type: 'screen', anonymousId: 'a', name: 'Cart', messageId: '' },
  ] } },
  { name: 'no_sent_at_keeps_the_timestamp', path: '/v1/import', authorization: basic('wk_header'), body: { batch: [
    { type: 'group', userId: 'u1', groupId: 'g1', messageId: 'm3', timestamp: '2020-01-01T00:00:00Z', traits: { name: 'Initech' } },
  ] } },
  { name: 'call_sent_at_wins_over_the_batch', path: '/v1/batch', body: { writeKey: 'wk_body', sentAt: '2026-11-22T10:00:00.000Z', batch: [
    { type: 'track', userId: 'u1', event: 'e', messageId: 'm4', timestamp: '2026-11-22T11:59:59.000Z', sentAt: '2026-11-22T12:00:00.000Z' },
  ] } },
  { name: 'batch_context_and_integrations_merge_under_the_call', path: '/v1/batch', body: { writeKey: 'wk_body',
    context: { library: { name: 'analytics-python', version: '2.3.3' }, ip: '198.51.100.1' },
    integrations: { All: true, Mixpanel: false },
    batch: [
      { type: 'alias', userId: 'u2', previousId: 'u1', messageId: 'm5', context: { ip: '203.0.113.7', locale: 'de-DE' }, integrations: { Webhooks: false } },
      { type: 'track', userId: 'u2', event: 'e', messageId: 'm6' },
    ] } },
  { name: 'basic_auth_wins_over_the_body_key', path: '/v1/batch', authorization: basic('wk_header'), body: { writeKey: 'wk_body', batch: [
    { type: 'track', userId: 'u', event: 'e', messageId: 'm7' } ] } },
  { name: 'single_call_route_sets_the_type', path: '/v1/track', body: { writeKey: 'wk_body', userId: 'u', event: 'Signed Up', messageId: 'm8', sentAt: '2026-11-22T12:00:00.000Z', timestamp: '2026-11-22T11:59:58.000Z' } },
  { name: 'analytics_js_short_route', path: '/v1/i', body: { writeKey: 'wk_body', type: 'identify', userId: 'u', traits: { email: 'ü@example.com' }, messageId: 'ajs-1', sentAt: '2026-11-22T12:00:01.000Z', timestamp: '2026-11-22T12:00:00.900Z', context: { page: { path: '/' } } } },
  { name: 'invalid_calls_are_refused_alone', path: '/v1/batch', body: { writeKey: 'wk_body', batch: [
    { type: 'track', userId: 'u', event: 'ok', messageId: 'm9' },
    { type: 'track', userId: 'u' },
    17,
    { type: 'teleport', userId: 'u' },
    { type: 'identify', traits: {} },
    { type: 'track', userId: 'u', event: 'e', timestamp: 'yesterday' },
    { type: 'page', userId: 'u', messageId: 'm10' },
  ] }, rejected: { 1: 'missing_event', 2: 'not_an_object', 3: 'unknown_type', 4: 'missing_identity', 5: 'invalid_timestamp' } },
  // Every store keys on (source, messageId): an id over 1,000 bytes, or with
  // U+0000 (which Postgres's text cannot hold), is refused alone.
  { name: 'message_ids_every_store_can_key_on', path: '/v1/batch', body: { writeKey: 'wk_body', batch: [
    { type: 'track', userId: 'u', event: 'e', messageId: 'x'.repeat(1000) },
    { type: 'track', userId: 'u', event: 'e', messageId: 'x'.repeat(1001) },
    { type: 'track', userId: 'u', event: 'e', messageId: 'm\u0000n' },
    { type: 'track', userId: 'u', event: 'e', messageId: 'm12' },
  ] }, rejected: { 1: 'invalid_field', 2: 'invalid_field' } },
  { name: 'unparseable_sent_at_is_ignored', path: '/v1/batch', body: { writeKey: 'wk_body', sentAt: 'soon', batch: [
    { type: 'track', userId: 'u', event: 'e', messageId: 'm11', timestamp: '2026-11-22T11:00:00.000Z' } ] } },
];
const ingestRequests = ingestCases.map((c) => {
  const batch = c.path.match(/\/v1\/(batch|import|b)$/) ? c.body : { sentAt: undefined };
  const calls = batch === c.body ? c.body.batch : [{ ...c.body, type: { '/v1/track': 'track', '/v1/i': 'identify' }[c.path] }];
  let r = 0;
  const expect = calls.map((call, i) => {
    if (c.rejected && c.rejected[i]) return { rejected: c.rejected[i] };
    const { writeKey, ...own } = call;
    return { message: enriched(own, batch, RECEIVED, call.messageId ? null : R[r++]) };
  });
  const writeKey = c.authorization ? 'wk_header' : c.body.writeKey;
  return { name: c.name, path: c.path, authorization: c.authorization ?? null, body: JSON.stringify(c.body), received_at: iso(RECEIVED), random: R, expect: { write_key: writeKey, calls: expect } };
});
// The same batch as json.dumps writes it (spaces, \u escapes) and pretty-printed:
// the stored messages are the same JSON.stringify text.
const spaced = ingestRequests[0];
const dumps = (v) => JSON.stringify(v, null, 2).replace(/[\u0080-\uffff]/g, (ch) => '\\u' + ch.charCodeAt(0).toString(16).padStart(4, '0'));
ingestRequests.push({ ...spaced, name: 'pretty_printed_with_escapes', body: dumps(JSON.parse(spaced.body)) });
const ingestErrors = [
  { name: 'malformed_json', path: '/v1/batch', body: '{"batch": [', code: 'invalid_json', status: 400 },
  { name: 'not_an_object', path: '/v1/batch', body: '[1,2]', code: 'invalid_batch', status: 400 },
  { name: 'batch_not_an_array', path: '/v1/batch', body: '{"batch": {"type": "track"}}', code: 'invalid_batch', status: 400 },
  { name: 'no_batch', path: '/v1/batch', body: '{"writeKey": "k"}', code: 'invalid_batch', status: 400 },
  { name: 'unknown_route', path: '/v2/batch', body: '{"batch": []}', code: 'unknown_route', status: 404 },
  { name: 'single_route_invalid_call', path: '/v1/track', body: '{"userId": "u"}', code: 'missing_event', status: 400 },
  { name: 'single_route_not_an_object', path: '/v1/identify', body: '"u"', code: 'invalid_batch', status: 400 },
  { name: 'invalid_utf8', path: '/v1/batch', body_hex: '7b226261746368223a5b7b2274797065223a22ff227d5d7d', code: 'invalid_unicode', status: 400 },
  { name: 'call_over_32000_bytes', path: '/v1/batch', body_call_pad: 32001, code: 'call_too_large', status: 400 },
  { name: 'call_at_32000_bytes', path: '/v1/batch', body_call_pad: 32000, code: null, status: 200 },
  { name: 'request_over_500000_bytes', path: '/v1/batch', body_batch_pad: 500001, code: 'batch_too_large', status: 400 },
  { name: 'batch_of_2501_calls', path: '/v1/batch', body_batch_count: 2501, code: 'too_many_calls', status: 400 },
  { name: 'batch_of_2500_calls', path: '/v1/batch', body_batch_count: 2500, code: null, status: 200 },
];
const headerCases = [
  { content_type: 'application/json', content_encoding: null, content_length: 100, expect: { gzip: false } },
  { content_type: 'application/json; charset=utf-8', content_encoding: 'gzip', content_length: 900, expect: { gzip: true } },
  { content_type: 'application/json', content_encoding: 'gzip', content_length: 500001, expect: { code: 'batch_too_large', status: 400 } },
  { content_type: 'text/plain', content_encoding: 'identity', content_length: null, expect: { gzip: false } },
  { content_type: 'TEXT/PLAIN;charset=UTF-8', content_encoding: 'GZIP', content_length: 10, expect: { gzip: true } },
  { content_type: null, content_encoding: null, content_length: null, expect: { gzip: false } },
  { content_type: 'application/x-www-form-urlencoded', content_encoding: null, content_length: 10, expect: { code: 'unsupported_media_type', status: 415 } },
  { content_type: 'application/json', content_encoding: 'br', content_length: 10, expect: { code: 'unsupported_encoding', status: 415 } },
  { content_type: 'application/json', content_encoding: null, content_length: 500001, expect: { code: 'batch_too_large', status: 400 } },
];
const writeKeys = [
  { authorization: basic('wk'), body_key: null, expect: 'wk' },
  { authorization: 'basic ' + Buffer.from('wk:ignored').toString('base64'), body_key: 'other', expect: 'wk' },
  { authorization: 'Bearer wk', body_key: 'body', expect: 'body' },
  { authorization: 'Basic !!!', body_key: null, expect: null },
  { authorization: basic(''), body_key: 'body', expect: 'body' },
  { authorization: null, body_key: '', expect: null },
  { authorization: null, body_key: 'ключ', expect: 'ключ' },
];
const routes = [
  ['/v1/batch', 'batch'], ['/v1/import', 'batch'], ['/v1/b', 'batch'], ['/v1/batch/', 'batch'],
  ['/v1/identify', 'identify'], ['/v1/track', 'track'], ['/v1/page', 'page'], ['/v1/screen', 'screen'],
  ['/v1/group', 'group'], ['/v1/alias', 'alias'], ['/v1/i', 'identify'], ['/v1/t', 'track'], ['/v1/p', 'page'],
  ['/v1/s', 'screen'], ['/v1/g', 'group'], ['/v1/a', 'alias'], ['/v1/delete', null], ['/v2/batch', null], ['/batch', null],
];
// gzip bodies, compressed by node:zlib: one inflates to a batch; a member
// pair (two gzip streams back to back, as `cat a.gz b.gz` makes); a zip bomb
// of 10 MB of zeros in 10 KB; the limit exactly; and bytes that are not gzip.
const gzBatch = ingestRequests[0].body;
const b64 = (buf) => Buffer.from(buf).toString('base64');
const gzip = [
  { name: 'batch', body_b64: b64(gzipSync(gzBatch)), expect: { inflated: gzBatch } },
  { name: 'two_members', body_b64: b64(Buffer.concat([gzipSync(gzBatch.slice(0, 10)), gzipSync(gzBatch.slice(10))])), expect: { inflated: gzBatch } },
  { name: 'at_the_limit', body_b64: b64(gzipSync(' '.repeat(500000))), expect: { inflated_length: 500000 } },
  { name: 'one_byte_over', body_b64: b64(gzipSync(' '.repeat(500001))), expect: { code: 'batch_too_large', status: 413 } },
  { name: 'zip_bomb', body_b64: b64(gzipSync(Buffer.alloc(10_000_000), { level: 9 })), expect: { code: 'batch_too_large', status: 413 } },
  { name: 'not_gzip', body_b64: b64(Buffer.from(gzBatch)), expect: { code: 'invalid_compression', status: 400 } },
  { name: 'truncated', body_b64: b64(gzipSync(gzBatch).subarray(0, 40)), expect: { code: 'invalid_compression', status: 400 } },
];
write('ingest.json', { requests: ingestRequests, errors: ingestErrors, headers: headerCases, write_keys: writeKeys, routes, gzip });
console.log(`wrote ${ingestRequests.length} ingest requests, ${ingestErrors.length} ingest errors`);

// Receivers: what a receiver accepts, as senders sign. callpost and
// Segment's Webhooks (Classic) sign the whole body in X-Signature. Segment's
// Webhooks (Actions) batches the calls into a JSON array; with "Use
// X-Segment-Signature Header" it signs the whole array in
// X-Segment-Signature, without it X-Signature signs JSON.stringify of the
// first event only (action-destinations, actions-webhook extendRequest).
const rsecret = 'whsec-3f9a';
const rcall = (id, extra = {}) => ({ type: 'track', userId: 'u1', event: 'Order Completed', messageId: id, ...extra });
const one = JSON.stringify(rcall('m-1', { properties: { total: 25.5, note: 'ünïcode ✓ 🚀' } }));
const events = [rcall('m-1'), rcall('m-2', { properties: { n: 1 } }), { type: 'identify', userId: 'u2' }];
const batch = JSON.stringify(events);
const pretty = JSON.stringify(events, null, 2);
const firstOnly = hmac(rsecret, JSON.stringify(events[0]));
// A call's id for duplicates: its messageId (inside the signed body), else
// the request's signed id, and in a batch the call's index after it. The
// signed id is the verified webhook-id under Standard Webhooks, and under
// X-Signature or X-Segment-Signature over the whole body, `body_` and the
// first 16 bytes of the body's SHA-256 in hex: never the Idempotency-Key
// header, which no signature covers (a captured request sent again with a
// new key is the same request). A first-event signature gives no id.
const bodyId = (body) => 'body_' + createHash('sha256').update(body, 'utf8').digest('hex').slice(0, 32);
const ok = (body, header, coverage, key = coverage === 'body' && header !== 'webhook-signature' ? bodyId(body) : null) => {
  const value = JSON.parse(body);
  const id = (c) => (c && typeof c.messageId === 'string' && c.messageId !== '' ? c.messageId : null);
  return { header, coverage, batch: Array.isArray(value), value,
    message_ids: Array.isArray(value) ? value.map((c, i) => id(c) ?? (key === null ? null : `${key}.${i}`)) : [id(value) ?? key] };
};
const spec = JSON.stringify({ version: 1, type: 'track', userId: 'u1', event: 'Signed Up', properties: {}, timestamp: '2026-11-22T10:04:05.123Z' });
const receive = [
  { name: 'one_call', body: one, headers: [['X-Signature', hmac(rsecret, one)]], expect: ok(one, 'X-Signature', 'body') },
  { name: 'header_name_any_case', body: one, headers: [['x-signature', hmac(rsecret, one)]], expect: ok(one, 'X-Signature', 'body') },
  { name: 'rotation_second_secret', secrets: ['old', rsecret], body: one, headers: [['X-Signature', hmac(rsecret, one)]], expect: ok(one, 'X-Signature', 'body') },
  // The spec's body has no messageId: the Idempotency-Key header is not
  // its id, the body is; the same body under another key is a duplicate.
  { name: 'callpost_body_idempotency_key', body: spec, headers: [['X-Signature', hmac(rsecret, spec)], ['Idempotency-Key', 'm-9']], expect: ok(spec, 'X-Signature', 'body') },
  { name: 'callpost_body_replayed_under_a_new_key', body: spec, headers: [['X-Signature', hmac(rsecret, spec)], ['Idempotency-Key', 'forged-new-key']], expect: ok(spec, 'X-Signature', 'body') },
  { name: 'tampered_body', body: one.replace('25.5', '255'), headers: [['X-Signature', hmac(rsecret, one)]], expect: { error: 'signature_mismatch' } },
  { name: 'wrong_secret', body: one, headers: [['X-Signature', hmac('other', one)]], expect: { error: 'signature_mismatch' } },
  { name: 'missing_header', body: one, headers: [['Content-Type', 'application/json']], expect: { error: 'missing_signature' } },
  { name: 'malformed_header', body: one, headers: [['X-Signature', 'sha1=' + hmac(rsecret, one)]], expect: { error: 'malformed_signature' } },
  { name: 'verified_but_not_json', body: 'ok', headers: [['X-Signature', hmac(rsecret, 'ok')]], expect: { error: 'invalid_json' } },
  { name: 'batch_segment_signature', body: batch, headers: [['X-Segment-Signature', hmac(rsecret, batch)]], expect: ok(batch, 'X-Segment-Signature', 'body') },
  { name: 'segment_signature_preferred', body: batch, headers: [['X-Signature', firstOnly], ['x-segment-signature', hmac(rsecret, batch)]], expect: ok(batch, 'X-Segment-Signature', 'body') },
  { name: 'batch_tampered_segment_signature', body: batch.replace('m-2', 'm-9'), headers: [['X-Segment-Signature', hmac(rsecret, batch)]], expect: { error: 'signature_mismatch' } },
  { name: 'batch_first_event_refused', body: batch, headers: [['X-Signature', firstOnly]], expect: { error: 'first_event_signature' } },
  { name: 'batch_first_event_opted_in', body: batch, headers: [['X-Signature', firstOnly]], options: { allow_first_event_signature: true }, expect: ok(batch, 'X-Signature', 'first_event') },
  { name: 'pretty_batch_first_event_opted_in', body: pretty, headers: [['X-Signature', firstOnly]], options: { allow_first_event_signature: true }, expect: ok(pretty, 'X-Signature', 'first_event') },
  { name: 'batch_first_event_forged_rest', body: batch.replace('m-2', 'forged'), headers: [['X-Signature', firstOnly]], options: { allow_first_event_signature: true }, expect: ok(batch.replace('m-2', 'forged'), 'X-Signature', 'first_event') },
  { name: 'batch_first_event_wrong', body: batch, headers: [['X-Signature', hmac(rsecret, JSON.stringify(events[1]))]], options: { allow_first_event_signature: true }, expect: { error: 'signature_mismatch' } },
  { name: 'batch_whole_body_x_signature', body: batch, headers: [['X-Signature', hmac(rsecret, batch)]], expect: ok(batch, 'X-Signature', 'body') },
  { name: 'no_secrets', secrets: [], body: one, headers: [['X-Signature', hmac(rsecret, one)]], expect: { error: 'no_secrets' } },
];

// Operational events (core ops.rs): the body a service signs for its
// operator, built here with JSON.stringify. `event` is the input (the URL
// as configured); `expect.body` shows it without userinfo or query.
const opsNow = Date.parse('2026-11-25T18:00:00.000Z');
const opsSecret = 'ops-secret';
const shown = (url) => url.replace(/\/\/[^/@]*@/, '//***@').replace(/\?.*$/, '');
const opsCases = [
  { name: 'circuit_opened', type: 'endpoint.circuit_opened', random: '00112233445566778899aabbccddeeff',
    input: { url: 'https://user:pw@hooks.example.com/in?token=abc', until: opsNow + 30_000 } },
  { name: 'circuit_closed', type: 'endpoint.circuit_closed', random: '0f0e0d0c0b0a09080706050403020100',
    input: { url: 'https://hooks.example.com/in' } },
  { name: 'endpoint_disabled', type: 'endpoint.disabled', random: 'ffeeddccbbaa99887766554433221100',
    input: { url: 'http://10.0.0.7:8080/hook', failing_since: opsNow - 5 * 86_400_000 } },
  { name: 'endpoint_disabled_by_operator', type: 'endpoint.disabled', random: '11111111111111111111111111111111',
    input: { url: 'https://hooks.example.com/in', failing_since: null } },
  { name: 'dead_lettered', type: 'calls.dead_lettered', random: '22222222222222222222222222222222',
    input: { count: 42, sources: [['web', 40], ['ios', 2]], since: opsNow - 3_600_000 } },
  { name: 'dead_lettered_by_destination', type: 'calls.dead_lettered', random: '55555555555555555555555555555555',
    input: { count: 3, sources: [['shop', 3]], destinations: [['shop', 'chat', 1], ['shop', 'crm', 2]], since: opsNow - 60_000 } },
  { name: 'backlog_over_threshold', type: 'backlog.over_threshold', random: '33333333333333333333333333333333',
    input: { pending: 60_000, threshold: 50_000, oldest_pending_at: opsNow - 120_000 } },
  { name: 'database_unreachable', type: 'database.unreachable', random: '44444444444444444444444444444444',
    input: { since: opsNow - 15_000, reason: 'connection refused: "db" — 127.0.0.1:5432' } },
  { name: 'database_recovered', type: 'database.recovered', random: '66666666666666666666666666666666',
    input: { since: opsNow - 42_000 } },
];
const opsData = ({ type, input }) => {
  const time = (t) => (t === null ? null : iso(t));
  switch (type) {
    case 'endpoint.circuit_opened': return { url: shown(input.url), until: time(input.until) };
    case 'endpoint.circuit_closed': return { url: shown(input.url) };
    case 'endpoint.disabled': return { url: shown(input.url), failing_since: time(input.failing_since) };
    case 'calls.dead_lettered': {
      const data = { count: input.count, sources: Object.fromEntries(input.sources) };
      if (input.destinations?.length) {
        data.destinations = {};
        for (const [source, destination, n] of input.destinations) (data.destinations[source] ??= {})[destination] = n;
      }
      data.since = time(input.since);
      return data;
    }
    case 'backlog.over_threshold': return { pending: input.pending, threshold: input.threshold, oldest_pending_at: time(input.oldest_pending_at) };
    case 'database.unreachable': return { since: time(input.since), reason: input.reason };
    case 'database.recovered': return { since: time(input.since) };
  }
  throw new Error(type);
};
const ops = opsCases.map((c) => {
  const id = uuidFromBytes(c.random);
  const body = JSON.stringify({ version: 1, id, type: c.type, timestamp: iso(opsNow), data: opsData(c) });
  return { ...c, now: opsNow, secret: opsSecret, expect: { body, signature: hmac(opsSecret, body), idempotency_key: id } };
});
write('ops_events.json', ops);
console.log(`wrote ${ops.length} operational events`);

// Standard Webhooks (core standard.rs): `v1,` and the base64 HMAC-SHA256,
// keyed with the secret's base64-decoded bytes, of `id.timestamp.body`.
// The first case is the specification's own example, whose signature it
// states; the rest are computed here with node:crypto.
const whsecKey = (s) => Buffer.from(s.replace(/^whsec_/, ''), 'base64');
const v1 = (secret, id, ts, body) =>
  'v1,' + createHmac('sha256', whsecKey(secret)).update(`${id}.${ts}.${body}`, 'utf8').digest('base64');
const SPEC = { secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', id: 'msg_p5jXN8AQM9LWM0D4loKWxJek', ts: 1614265330, body: '{"test": 2432232314}' };
if (v1(SPEC.secret, SPEC.id, SPEC.ts, SPEC.body) !== 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=') throw new Error('the spec example');
const NEW_SECRET = 'whsec_' + Buffer.from('a new secret of thirty-two bytes').toString('base64');
const OLD_SECRET = 'whsec_' + Buffer.from('the old secret, still accepted').toString('base64');
const whOrder = body({ type: 'track', userId: 'u42', event: 'Order Completed', messageId: 'm-1', properties: { order_id: 'o-9', total: 27.5, products: [{ sku: 'p-1', name: 'Réveil ⏰', price: 13.75, quantity: 2 }] } }, NOW);
const WH_TS = Math.floor(NOW / 1000);
const standardSign = [
  { name: 'specification_example', secrets: [SPEC.secret], id: SPEC.id, timestamp: SPEC.ts, body: SPEC.body },
  { name: 'track_call_unicode', secrets: [NEW_SECRET], id: 'm-1', timestamp: WH_TS, body: whOrder },
  { name: 'rotation_two_secrets', secrets: [NEW_SECRET, OLD_SECRET], id: 'm-1', timestamp: WH_TS, body: whOrder },
  { name: 'unpadded_secret_without_prefix', secrets: [SPEC.secret.slice(6).replace(/=+$/, '')], id: 'm-2', timestamp: WH_TS, body: '{}' },
].map((c) => ({ ...c, signature: c.secrets.map((s) => v1(s, c.id, c.timestamp, c.body)).join(' ') }));
const whGood = v1(NEW_SECRET, 'm-1', WH_TS, whOrder);
const heads = (id, ts, sig) => [['webhook-id', id], ['webhook-timestamp', ts === null ? null : String(ts)], ['webhook-signature', sig]].filter(([, v]) => v !== null);
const whOk = { id: 'm-1', timestamp: WH_TS };
const standardVerify = [
  { name: 'valid', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, whGood), now: WH_TS, expect: whOk },
  { name: 'second_secret_of_two', secrets: [OLD_SECRET, NEW_SECRET], headers: heads('m-1', WH_TS, whGood), now: WH_TS, expect: whOk },
  { name: 'rotating_sender_old_receiver', secrets: [OLD_SECRET], headers: heads('m-1', WH_TS, `${whGood} ${v1(OLD_SECRET, 'm-1', WH_TS, whOrder)}`), now: WH_TS, expect: whOk },
  { name: 'other_versions_skipped', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, `v2,AAAA ${whGood}`), now: WH_TS, expect: whOk },
  { name: 'mixed_case_header_names', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, whGood).map(([k, v]) => [k.toUpperCase(), v]), now: WH_TS, expect: whOk },
  { name: 'at_the_tolerance_past', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, whGood), now: WH_TS + 300, expect: whOk },
  { name: 'past_the_tolerance', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, whGood), now: WH_TS + 301, expect: { error: 'timestamp_too_old' } },
  { name: 'ahead_of_the_tolerance', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, whGood), now: WH_TS - 301, expect: { error: 'timestamp_too_new' } },
  { name: 'a_longer_tolerance', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, whGood), now: WH_TS + 3600, tolerance_ms: 3_600_000, expect: whOk },
  { name: 'body_changed', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, whGood), now: WH_TS, body: whOrder.replace('27.5', '2.75'), expect: { error: 'signature_mismatch' } },
  { name: 'id_changed', secrets: [NEW_SECRET], headers: heads('m-2', WH_TS, whGood), now: WH_TS, expect: { error: 'signature_mismatch' } },
  { name: 'timestamp_changed', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS + 1, whGood), now: WH_TS, expect: { error: 'signature_mismatch' } },
  { name: 'wrong_secret', secrets: [OLD_SECRET], headers: heads('m-1', WH_TS, whGood), now: WH_TS, expect: { error: 'signature_mismatch' } },
  { name: 'missing_id', secrets: [NEW_SECRET], headers: heads(null, WH_TS, whGood), now: WH_TS, expect: { error: 'missing_signature' } },
  { name: 'missing_timestamp', secrets: [NEW_SECRET], headers: heads('m-1', null, whGood), now: WH_TS, expect: { error: 'missing_signature' } },
  { name: 'missing_signature', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, null), now: WH_TS, expect: { error: 'missing_signature' } },
  { name: 'fractional_timestamp', secrets: [NEW_SECRET], headers: heads('m-1', `${WH_TS}.5`, whGood), now: WH_TS, expect: { error: 'malformed_signature' } },
  { name: 'no_v1_signature', secrets: [NEW_SECRET], headers: heads('m-1', WH_TS, 'v2,AAAA'), now: WH_TS, expect: { error: 'malformed_signature' } },
  { name: 'no_secrets', secrets: [], headers: heads('m-1', WH_TS, whGood), now: WH_TS, expect: { error: 'no_secrets' } },
  { name: 'malformed_secret', secrets: ['whsec_*not base64*'], headers: heads('m-1', WH_TS, whGood), now: WH_TS, expect: { error: 'malformed_secret' } },
].map((c) => ({ ...c, body: c.body ?? whOrder }));
write('standard_webhooks.json', { sign: standardSign, verify: standardVerify });

// Receivers holding Standard Webhooks secrets (core receive.rs,
// receive_any): with only those, a request must carry webhook-signature;
// with both kinds, one carrying it is held to it (no fallback to
// X-Signature) and one without it to X-Signature. The id for duplicates is
// the call's messageId, else the verified webhook-id (the spec's body, as
// callpost sends it, has no messageId; webhook-id carries it).
const noId = JSON.stringify({ type: 'identify', userId: 'u42', traits: { name: 'Zoë' } });
const whSegment = [['X-Signature', hmac(rsecret, whOrder)]];
receive.push(
  { name: 'standard_only', standard_secrets: [NEW_SECRET], secrets: [], body: whOrder, headers: heads('m-1', WH_TS, whGood), expect: ok(whOrder, 'webhook-signature', 'body', 'm-1') },
  { name: 'standard_id_when_the_call_has_none', standard_secrets: [NEW_SECRET], secrets: [], body: noId, headers: heads('w-7', WH_TS, v1(NEW_SECRET, 'w-7', WH_TS, noId)), expect: ok(noId, 'webhook-signature', 'body', 'w-7') },
  { name: 'standard_rotation_old_secret', standard_secrets: [OLD_SECRET], secrets: [], body: whOrder, headers: heads('m-1', WH_TS, `${whGood} ${v1(OLD_SECRET, 'm-1', WH_TS, whOrder)}`), expect: ok(whOrder, 'webhook-signature', 'body', 'm-1') },
  { name: 'standard_only_refuses_x_signature', standard_secrets: [NEW_SECRET], secrets: [], body: whOrder, headers: whSegment, expect: { error: 'missing_signature' } },
  { name: 'standard_replayed_late', standard_secrets: [NEW_SECRET], secrets: [], body: whOrder, headers: heads('m-1', WH_TS, whGood), now_ms: (WH_TS + 301) * 1000, expect: { error: 'timestamp_too_old' } },
  { name: 'standard_tampered', standard_secrets: [NEW_SECRET], secrets: [], body: whOrder.replace('27.5', '2.75'), headers: heads('m-1', WH_TS, whGood), expect: { error: 'signature_mismatch' } },
  { name: 'both_held_to_standard', standard_secrets: [NEW_SECRET], body: whOrder, headers: [...whSegment, ...heads('m-1', WH_TS, v1(OLD_SECRET, 'm-1', WH_TS, whOrder))], expect: { error: 'signature_mismatch' } },
  { name: 'both_standard_signed', standard_secrets: [NEW_SECRET], body: whOrder, headers: [...whSegment, ...heads('m-1', WH_TS, whGood)], expect: ok(whOrder, 'webhook-signature', 'body', 'm-1') },
  { name: 'both_x_signature_alone', standard_secrets: [NEW_SECRET], body: whOrder, headers: whSegment, expect: ok(whOrder, 'X-Signature', 'body') },
);
// A callpost batch (core webhooks/batch.rs): the spec's bodies carry no
// messageId, so a call's id is the request's signed id and its index.
const cpBatch = `[${whOrder},${noId},${JSON.stringify({ type: 'track', event: 'E', messageId: 'own-id' })}]`;
receive.push(
  { name: 'callpost_batch_ids', body: cpBatch, headers: [['X-Signature', hmac(rsecret, cpBatch)], ['Idempotency-Key', 'batch_0f1e']],
    expect: ok(cpBatch, 'X-Signature', 'body') },
  { name: 'callpost_batch_standard_ids', standard_secrets: [NEW_SECRET], secrets: [], body: cpBatch,
    headers: heads('batch_0f1e', WH_TS, v1(NEW_SECRET, 'batch_0f1e', WH_TS, cpBatch)),
    expect: { ...ok(cpBatch, 'webhook-signature', 'body'), message_ids: ['batch_0f1e.0', 'batch_0f1e.1', 'own-id'] } },
);
const receiveCases = receive.map((c) => ({
  secrets: [rsecret], standard_secrets: [], now_ms: WH_TS * 1000, options: { allow_first_event_signature: false }, ...c,
}));
write('receive.json', receiveCases);
console.log(`wrote ${receiveCases.length} receive cases`);

// Destination filters (core filter.rs): each case's rules applied to a
// call, by this JavaScript reading of docs/operators.md ("Destination
// filters"): dropped by rule n, or kept with its body (the spec's body of
// the call without the dropped fields). `invalid` lists rules the settings
// refuse.
const OWN_FIELDS = ['type', 'event', 'name', 'category', 'userId', 'anonymousId', 'groupId', 'previousId'];
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
function sameJson(a, b) {
  if (Array.isArray(a) || Array.isArray(b)) return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  if (isObj(a) || isObj(b)) {
    if (!isObj(a) || !isObj(b) || Object.keys(a).length !== Object.keys(b).length) return false;
    return Object.keys(a).every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]));
  }
  return a === b;
}
function fieldOf(call, field) {
  if (OWN_FIELDS.includes(field)) return call[field] ?? undefined;
  const [root, ...keys] = field.split('.');
  let v = call[root];
  for (const k of keys) {
    if (!isObj(v) || !Object.hasOwn(v, k)) return undefined;
    v = v[k];
  }
  return v;
}
function holds(c, call) {
  if (c.and) return c.and.every((x) => holds(x, call));
  if (c.or) return c.or.some((x) => holds(x, call));
  if (c.not) return !holds(c.not, call);
  const v = fieldOf(call, c.field);
  if ('exists' in c) return (v !== undefined) === c.exists;
  if (v === undefined) return false;
  if ('equals' in c) return sameJson(v, c.equals);
  if ('in' in c) return c.in.some((x) => sameJson(v, x));
  if (typeof v !== 'number') return false;
  if ('gt' in c) return v > c.gt;
  if ('gte' in c) return v >= c.gte;
  if ('lt' in c) return v < c.lt;
  return v <= c.lte;
}
function applyFilters(rules, input) {
  const call = structuredClone(input);
  for (const [i, r] of rules.entries()) {
    if (r.action === 'drop' && holds(r.if, call)) return { dropped_by: i };
    if (r.action === 'keep' && !holds(r.if, call)) return { dropped_by: i };
    if (r.action === 'drop_fields' && (r.if === undefined || holds(r.if, call))) {
      for (const f of r.fields) {
        const keys = f.split('.');
        let at = call;
        for (const k of keys.slice(0, -1)) at = isObj(at) ? at[k] : undefined;
        if (isObj(at)) delete at[keys.at(-1)];
      }
    }
  }
  return { body: body(call, NOW) };
}
const fOrder = { type: 'track', userId: 'u42', event: 'Order Completed', messageId: 'm-1', timestamp: '2026-11-22T10:00:00.000Z',
  properties: { order_id: 'o-9', total: 127.5, coupon: null, card: { last4: '4242', brand: 'visa' }, products: [{ sku: 'p-1', name: 'Réveil ⏰', price: 13.75 }] },
  context: { ip: '203.0.113.9', locale: 'fr-FR' } };
const fSmall = { ...fOrder, messageId: 'm-2', properties: { total: 9.99, '10': 'index-like key', note: 'ünïcode' } };
const fPage = { type: 'page', anonymousId: 'a-7', name: 'Home', messageId: 'm-3', timestamp: '2026-11-22T10:00:00.000Z', properties: { path: '/', referrer: '' } };
const fIdentify = { type: 'identify', userId: 'u42', messageId: 'm-4', timestamp: '2026-11-22T10:00:00.000Z',
  traits: { email: 'zoe@example.com', name: 'Zoë', plan: 'pro', address: { city: 'Lyon', street: '1 rue X' } } };
const fScreen = { type: 'screen', userId: 'u42', name: 'Cart', messageId: 'm-5', timestamp: '2026-11-22T10:00:00.000Z',
  context: { device: { id: 'd-1', advertisingId: 'ad-9' }, os: { name: 'iOS' }, app: { version: '1.2' } } };
const fCalls = { order: fOrder, small: fSmall, page: fPage, identify: fIdentify, screen: fScreen };
const filterRules = {
  no_pages: [{ action: 'drop', if: { field: 'type', in: ['page', 'screen'] } }],
  big_orders_only: [{ action: 'keep', if: { and: [{ field: 'event', equals: 'Order Completed' }, { field: 'properties.total', gte: 100 }] } }],
  not_small: [{ action: 'drop', if: { not: { field: 'properties.total', gt: 10 } } }],
  strip_pii: [{ action: 'drop_fields', fields: ['traits.email', 'traits.address.street', 'properties.card', 'context.device.advertisingId'] }],
  strip_then_test: [
    { action: 'drop_fields', fields: ['properties.total'], if: { field: 'type', equals: 'track' } },
    { action: 'drop', if: { field: 'properties.total', exists: true } },
  ],
  nested_and_null: [{ action: 'keep', if: { or: [{ field: 'properties.coupon', equals: null }, { field: 'traits.address', equals: { street: '1 rue X', city: 'Lyon' } }] } }],
  index_key_and_unicode: [{ action: 'drop_fields', fields: ['properties.10'], if: { field: 'properties.note', equals: 'ünïcode' } }],
  anonymous_only: [{ action: 'drop', if: { field: 'userId', exists: true } }],
  numbers_not_text: [{ action: 'keep', if: { field: 'properties.path', lt: 5 } }],
  bounds_inclusive: [{ action: 'keep', if: { or: [{ field: 'properties.total', gte: 127.5 }, { field: 'properties.total', lte: 9.99 }] } }],
  bounds_exclusive: [{ action: 'drop', if: { or: [{ field: 'properties.total', gt: 127.5 }, { field: 'properties.total', lt: 9.99 }] } }],
  missing_fields_untouched: [{ action: 'drop_fields', fields: ['properties.nothing.here', 'traits.none'] }],
};
const filterCases = [];
for (const [rules, list] of Object.entries(filterRules)) {
  for (const [name, call] of Object.entries(fCalls)) {
    filterCases.push({ name: `${rules}/${name}`, filters: list, call: JSON.stringify(call), now: NOW, expect: applyFilters(list, call) });
  }
}
const invalidFilters = [
  { name: 'not_a_list', filters: { action: 'drop' } },
  { name: 'drop_without_if', filters: [{ action: 'drop' }] },
  { name: 'unknown_action', filters: [{ action: 'sample', if: { field: 'type', equals: 'track' } }] },
  { name: 'unknown_test', filters: [{ action: 'drop', if: { field: 'event', matches: 'Order.*' } }] },
  { name: 'two_tests', filters: [{ action: 'drop', if: { field: 'event', equals: 'A', in: ['B'] } }] },
  { name: 'unknown_field', filters: [{ action: 'drop', if: { field: 'email', exists: true } }] },
  { name: 'bare_object_root', filters: [{ action: 'drop', if: { field: 'traits', exists: true } }] },
  { name: 'drop_an_id', filters: [{ action: 'drop_fields', fields: ['userId'] }] },
  { name: 'compare_with_text', filters: [{ action: 'keep', if: { field: 'properties.total', gt: '10' } }] },
  { name: 'empty_or', filters: [{ action: 'keep', if: { or: [] } }] },
  { name: 'too_deep', filters: [{ action: 'drop', if: Array.from({ length: 8 }).reduce((c) => ({ not: c }), { field: 'type', exists: true }) }] },
  { name: 'too_many_rules', filters: Array.from({ length: 33 }, () => ({ action: 'drop', if: { field: 'type', equals: 'x' } })) },
];
write('filters.json', { cases: filterCases, invalid: invalidFilters.map((c) => ({ ...c, code: 'invalid_settings' })) });
console.log(`wrote ${filterCases.length} filter decisions, ${invalidFilters.length} refused filters`);

// Batched webhooks (core webhooks/batch.rs): calls packed in order into
// JSON arrays of their bodies, at most maxCalls calls and maxBytes bytes a
// batch (a call larger than maxBytes alone goes alone), after the filters
// and the call's integrations; a batch's id is `batch_` and the first 16
// bytes of the SHA-256 of its calls' messageIds, one per line, in hex.
// Each id after its byte length and ':', so ids holding any character
// (a newline) never run together.
const batchId = (ids) =>
  'batch_' +
  createHash('sha256')
    .update(ids.map((id) => `${Buffer.byteLength(id, 'utf8')}:${id}`).join(''), 'utf8')
    .digest('hex')
    .slice(0, 32);
function packCalls(calls, batch, filters) {
  const maxCalls = batch.maxCalls ?? 1000;
  const maxBytes = batch.maxBytes ?? 500000;
  const batches = [];
  const skipped = [];
  let open = null;
  const close = () => {
    if (open) batches.push({ id: batchId(open.ids), body: `[${open.bodies.join(',')}]`, members: open.members });
    open = null;
  };
  calls.forEach((call, i) => {
    if (call.integrations && call.integrations.Webhooks === false) { skipped.push([i, 'disabled']); return; }
    const decided = applyFilters(filters ?? [], call);
    if (decided.dropped_by !== undefined) { skipped.push([i, 'filtered', decided.dropped_by]); return; }
    const b = decided.body;
    const size = open ? Buffer.byteLength(`[${open.bodies.join(',')}`) + 2 + Buffer.byteLength(b) : 0;
    if (!open || open.members.length >= maxCalls || size > maxBytes) {
      close();
      open = { ids: [], bodies: [], members: [] };
    }
    open.ids.push(call.messageId ?? '');
    open.bodies.push(b);
    open.members.push(i);
  });
  close();
  return { batches, skipped };
}
const bigOrder = (n) => ({
  type: 'track', userId: 'u42', event: 'Order Completed', messageId: `big-${n}`, timestamp: '2026-11-22T10:00:00.000Z',
  properties: { order_id: `o-${n}`, total: 999.5, products: Array.from({ length: 200 }, (_, k) => ({ product_id: `p-${k}`, sku: `SKU-${k}`, name: `Produit n°${k} ☕`, price: 12.5 + k, quantity: 1 + (k % 3), category: 'Cuisine' })) },
});
const mixed = [
  fOrder, fPage, fIdentify, fScreen,
  { type: 'track', userId: 'u43', event: 'Signed Up', messageId: 'm-6', timestamp: '2026-11-22T10:00:01.000Z', integrations: { Webhooks: false } },
  { type: 'group', userId: 'u42', groupId: 'g-1', messageId: 'm-7', timestamp: '2026-11-22T10:00:02.000Z', traits: { name: 'Équipe' } },
  { type: 'alias', userId: 'u42', previousId: 'a-7', messageId: 'm-8', timestamp: '2026-11-22T10:00:03.000Z' },
];
const batchCases = [
  { name: 'defaults_all_in_one', batch: {}, calls: mixed },
  { name: 'two_a_batch', batch: { maxCalls: 2 }, calls: mixed },
  { name: 'filters_first', batch: { maxCalls: 3 }, filters: filterRules.no_pages.concat(filterRules.strip_pii), calls: mixed },
  { name: 'split_by_bytes', batch: { maxBytes: 64000 }, calls: [bigOrder(1), fSmall, bigOrder(2), bigOrder(3)] },
  { name: 'one_call', batch: { maxCalls: 1 }, calls: [fOrder] },
  // Ids holding a newline and a multi-byte character: two batches whose ids
  // joined by newlines would read alike have different ids.
  { name: 'ids_with_newlines', batch: { maxCalls: 2 }, calls: [
    { type: 'track', userId: 'u', event: 'E', messageId: 'a\nb', timestamp: '2026-11-22T10:00:00.000Z' },
    { type: 'track', userId: 'u', event: 'E', messageId: 'c', timestamp: '2026-11-22T10:00:00.000Z' },
    { type: 'track', userId: 'u', event: 'E', messageId: 'a', timestamp: '2026-11-22T10:00:00.000Z' },
    { type: 'track', userId: 'u', event: 'E', messageId: 'b\nc', timestamp: '2026-11-22T10:00:00.000Z' },
    { type: 'track', userId: 'u', event: 'E', messageId: 'é', timestamp: '2026-11-22T10:00:00.000Z' },
  ] },
].map((c) => ({ ...c, calls: c.calls.map((x) => JSON.stringify(x)), now: NOW, expect: packCalls(c.calls, c.batch, c.filters) }));
if (Buffer.byteLength(JSON.parse(batchCases[3].calls[0]).properties.products.map((p) => JSON.stringify(p)).join(',')) < 21000) throw new Error('bigOrder too small to split by bytes');
{
  const [first, second] = batchCases.find((c) => c.name === 'ids_with_newlines').expect.batches;
  if (first.id === second.id) throw new Error('ids_with_newlines: the two batches share an id');
}
write('webhook_batches.json', batchCases);
console.log(`wrote ${batchCases.length} webhook batch cases`);

// Mappings (core mapping.rs): each case's mapping applied to a call by this
// JavaScript reading of the rules in docs/mappings.md, over the call as
// Segment's message has it; `invalid` lists mappings the settings refuse.
class CallScope {
  constructor(call, now) { this.call = call; this.now = now; }
}
const MESSAGE_STRINGS = ['messageId', 'userId', 'anonymousId', 'event', 'name', 'category', 'groupId', 'previousId'];
function messageOf({ call }) {
  const m = { type: call.type };
  for (const k of MESSAGE_STRINGS) {
    if (call[k]) m[k] = call[k];
    if (k === 'messageId' && call.timestamp) m.timestamp = iso(Date.parse(call.timestamp));
  }
  for (const k of ['properties', 'traits', 'context', 'integrations']) if (call[k] !== undefined) m[k] = call[k];
  return m;
}
function callField({ call, now }, k) {
  if (k === 'type') return call.type;
  if (MESSAGE_STRINGS.includes(k)) return call[k] ? call[k] : undefined;
  if (k === 'timestamp') return iso(call.timestamp ? Date.parse(call.timestamp) : now);
  if (['properties', 'traits', 'context', 'integrations'].includes(k)) return call[k];
  return undefined;
}
const arrayIndexOf = (k) => (/^(0|[1-9][0-9]{0,9})$/.test(k) && Number(k) <= 4294967294 ? Number(k) : undefined);
function stepsOf(text) {
  if (text === '$') return [];
  const steps = [];
  for (const seg of (text.startsWith('$.') ? text.slice(2) : text).split('.')) {
    const [, key, brackets] = /^([^[]*)(.*)$/.exec(seg);
    if (key) steps.push(key);
    for (const [, n] of brackets.matchAll(/\[([0-9]+)\]/g)) steps.push(Number(n));
  }
  return steps;
}
function lookup(scope, steps) {
  let v = scope;
  for (const s of steps) {
    if (v instanceof CallScope) v = typeof s === 'string' ? callField(v, s) : undefined;
    else if (Array.isArray(v)) {
      const i = typeof s === 'number' ? s : arrayIndexOf(s);
      v = i !== undefined && i < v.length ? v[i] : undefined;
    } else if (isObj(v)) v = typeof s === 'string' && Object.hasOwn(v, s) ? v[s] : undefined;
    else v = undefined;
    if (v === undefined) return undefined;
  }
  return v instanceof CallScope ? messageOf(v) : v;
}
function asText(v) {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}
function resolve(m, scope) {
  if (Array.isArray(m)) return m.map((x) => resolve(x, scope)).filter((x) => x !== undefined);
  if (!isObj(m)) return m;
  const directive = Object.keys(m).find((k) => k.startsWith('@'));
  if (directive === undefined) {
    const out = {};
    for (const k of Object.keys(m)) {
      const v = resolve(m[k], scope);
      if (v !== undefined) out[k] = v;
    }
    return out;
  }
  const a = m[directive];
  switch (directive) {
    case '@path': return lookup(scope, stepsOf(a));
    case '@literal': return a;
    case '@template': return a.replace(/\{\{([\s\S]*?)\}\}/g, (_, p) => asText(lookup(scope, stepsOf(p.trim()))));
    case '@if': {
      const blank = Object.hasOwn(a, 'blank');
      const v = resolve(blank ? a.blank : a.exists, scope);
      const holds = v !== undefined && v !== null && (!blank || v !== '');
      const branch = holds ? 'then' : 'else';
      return Object.hasOwn(a, branch) ? resolve(a[branch], scope) : undefined;
    }
    case '@arrayPath': {
      const [from, shape] = a;
      const root = typeof from === 'string' ? lookup(scope, stepsOf(from)) : resolve(from, scope);
      if (root === undefined || shape === undefined) return root;
      if (Array.isArray(root)) return root.map((x) => resolve(shape, x)).filter((x) => x !== undefined);
      return isObj(root) ? [resolve(shape, root)] : root;
    }
    case '@default':
      for (const x of a) {
        const v = resolve(x, scope);
        if (v !== undefined && v !== null) return v;
      }
      return undefined;
  }
  throw new Error(`no directive ${directive}`);
}
const mOrder = { ...fOrder, anonymousId: 'a-1', integrations: { All: false, Webhooks: true },
  traits: { email: '' }, properties: { ...fOrder.properties, currency: 'EUR', '7': 'seven', tags: ['new', 'gift', null],
    products: [...fOrder.properties.products, { sku: 'p-2', name: '"Quoted" \\ name\n', price: 1e21, quantity: 2 }, { sku: null }] } };
const mUntimed = { type: 'identify', userId: 'u9', traits: { name: 'Ünï 🎉', plan: 'pro', logins: 5, vip: false, email: 'u9@example.com' } };
const mCalls = { order: mOrder, identify: fIdentify, page: fPage, screen: fScreen, untimed: mUntimed };
const mappings = {
  segment_readme: { name: 'Mr. Rogers', neighborhood: { '@path': '$.properties.neighborhood' }, greeting: { '@template': "Won't you be my {{properties.noun}}?" } },
  crm_user: { id: { '@path': '$.userId' }, email: { '@default': [{ '@path': '$.traits.email' }, { '@path': '$.context.traits.email' }, 'unknown'] },
    name: { '@path': 'traits.name' }, address: { '@path': 'traits.address' }, plan: { '@if': { blank: { '@path': 'traits.plan' }, then: { '@path': 'traits.plan' }, else: 'free' } },
    seen: { '@path': '$.timestamp' }, kind: { '@path': 'type' } },
  chat_text: { text: { '@template': '{{ userId }}{{anonymousId}} did {{event}}{{name}}: {{properties.total}} {{properties.currency}} {{properties.products[0].name}} at {{timestamp}}' } },
  warehouse_row: { '10': 'index keys first', z: { '@path': 'messageId' }, '2': { '@path': 'properties.7' },
    items: { '@arrayPath': ['$.properties.products', { sku: { '@path': 'sku' }, price: { '@path': '$.price' }, qty: { '@default': [{ '@path': 'quantity' }, 1] }, whole: { '@path': '$' } }] },
    tags: { '@path': 'properties.tags' }, second_tag: { '@path': 'properties.tags.1' }, third: { '@path': 'properties.tags[2]' }, none: { '@path': 'properties.tags[9]' } },
  copies_whole_objects: { p: { '@path': 'properties' }, t: { '@path': 'traits' }, c: { '@path': 'context' }, i: { '@path': 'integrations' }, all: { '@path': '$' } },
  conditions: { has_coupon: { '@if': { exists: { '@path': 'properties.coupon' }, then: true, else: false } },
    has_total: { '@if': { exists: { '@path': 'properties.total' }, then: { '@path': 'properties.total' } } },
    empty_email: { '@if': { blank: { '@path': 'traits.email' }, then: 'set', else: '' } },
    zero_else: { '@if': { exists: { '@path': 'nothing' }, then: 1, else: 0 } },
    nested: { '@if': { exists: { '@if': { exists: { '@path': 'event' }, then: null } }, then: 'never', else: { '@literal': { '@path': 'kept as written' } } } } },
  arrays_and_literals: { list: [{ '@path': 'userId' }, { '@path': 'missing' }, 3, { '@literal': [1, { '@template': 'x' }] }],
    product_names: { '@arrayPath': ['properties.products', { n: { '@path': 'name' } }] }, no_shape: { '@arrayPath': ['properties.card'] },
    object_as_one: { '@arrayPath': ['properties.card', { brand: { '@path': 'brand' } }] }, scalar: { '@arrayPath': ['properties.total', { a: 1 }] },
    from_directive: { '@arrayPath': [{ '@default': [{ '@path': 'properties.nope' }, { '@path': 'properties.products' }] }, { s: { '@path': 'sku' } }] } },
  missing_everything: { a: { '@path': 'properties.a.b.c' }, b: { '@path': 'userId.length' }, c: { '@path': 'receivedAt' }, d: { '@template': '[{{nope}}]' }, e: { '@default': [{ '@path': 'x' }] }, f: null },
  screen_context: { device: { '@path': 'context.device.id' }, os: { '@template': '{{context.os.name}}/{{context.app}}' } },
};
const mappingCases = [];
for (const [mName, mapping] of Object.entries(mappings)) {
  for (const [cName, call] of Object.entries(mCalls)) {
    mappingCases.push({ name: `${mName}/${cName}`, mapping, call: JSON.stringify(call), now: NOW,
      expect: { body: JSON.stringify(resolve(mapping, new CallScope(call, NOW))) } });
  }
}
const invalidMappings = [
  { name: 'not_an_object', mapping: [{ '@path': 'event' }] },
  { name: 'top_level_directive', mapping: { '@path': 'event' } },
  { name: 'unknown_directive', mapping: { a: { '@json': 'event' } } },
  { name: 'directive_beside_a_key', mapping: { a: { '@path': 'event', b: 1 } } },
  { name: 'path_not_a_string', mapping: { a: { '@path': 1 } } },
  { name: 'path_empty_key', mapping: { a: { '@path': 'properties..total' } } },
  { name: 'path_bad_index', mapping: { a: { '@path': 'properties.tags[x]' } } },
  { name: 'path_unclosed_bracket', mapping: { a: { '@path': 'properties.tags[1' } } },
  { name: 'template_unclosed', mapping: { a: { '@template': 'Hi {{userId' } } },
  { name: 'template_not_a_string', mapping: { a: { '@template': { '@path': 'userId' } } } },
  { name: 'if_without_test', mapping: { a: { '@if': { then: 1 } } } },
  { name: 'if_without_branch', mapping: { a: { '@if': { exists: { '@path': 'userId' } } } } },
  { name: 'if_unknown_key', mapping: { a: { '@if': { exists: { '@path': 'userId' }, then: 1, otherwise: 2 } } } },
  { name: 'if_two_tests', mapping: { a: { '@if': { exists: 1, blank: 2, then: 1 } } } },
  { name: 'array_path_not_a_list', mapping: { a: { '@arrayPath': 'properties.products' } } },
  { name: 'array_path_shape_not_an_object', mapping: { a: { '@arrayPath': ['properties.products', [1]] } } },
  { name: 'default_empty', mapping: { a: { '@default': [] } } },
  { name: 'too_deep', mapping: JSON.parse('{"a":'.repeat(17) + '1' + '}'.repeat(17)) },
  { name: 'too_many_nodes', mapping: Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [`k${i}`, i])) },
  { name: 'too_much_text', mapping: { a: 'x'.repeat(65 * 1024) } },
  { name: 'path_too_long', mapping: { a: { '@path': Array.from({ length: 17 }, () => 'a').join('.') } } },
];
// URL templates: each value filled in as a template writes it, then
// encodeURIComponent with RFC 3986's reserved !'()* encoded too, and the
// whole URL as the WHATWG parser writes it. A missing, null or empty
// value, or a dot segment, refuses the call.
const urlValue = (v) => encodeURIComponent(v).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
function templatedUrl(template, call) {
  let refused = false;
  const filled = template.replace(/\{\{([\s\S]*?)\}\}/g, (_, p) => {
    const v = asText(lookup(new CallScope(call, NOW), stepsOf(p.trim())));
    if (v === '' || v === '.' || v === '..') refused = true;
    return urlValue(v);
  });
  return refused ? { code: 'invalid_url_value' } : { url: new URL(filled).href };
}
const tCalls = {
  odd_id: { type: 'identify', userId: 'u 1/é?#&=%', traits: { email: 'a+b@example.com', n: 27.5, vip: true, tags: ['x', 'y'] }, timestamp: '2026-11-22T10:04:05Z' },
  plain: { type: 'group', userId: 'u-2', groupId: 'g~1.x_y-z', traits: { email: '', n: 0 }, timestamp: '2026-11-22T10:04:05Z' },
  dots: { type: 'identify', userId: '..', traits: { email: '.' }, timestamp: '2026-11-22T10:04:05Z' },
  grouped: { type: 'group', userId: 'u-3', groupId: 'g 3', traits: { email: 'c@d.example', n: 1e21 } },
};
const templates = [
  'https://API.example.com:443/users/{{userId}}',
  'https://api.example.com/search?email={{traits.email}}&n={{ traits.n }}&g={{$.groupId}}',
  'https://api.example.com/ü/{{traits.vip}}/{{traits.tags}}/{{type}}',
  'http://127.0.0.1:8080/{{userId}}/{{timestamp}}',
];
const urlTemplates = [];
for (const [ti, url] of templates.entries()) {
  for (const [cName, call] of Object.entries(tCalls)) {
    urlTemplates.push({ name: `template_${ti}/${cName}`, settings: { endpoints: [url], method: 'PUT' }, call: JSON.stringify(call), now: NOW, expect: templatedUrl(url, call) });
  }
}
const invalidTemplates = [
  ['in_the_host', 'https://{{userId}}.example.com/'],
  ['in_the_port', 'https://api.example.com:{{traits.port}}/'],
  ['in_the_scheme', '{{type}}://api.example.com/'],
  ['no_path', 'https://api.example.com{{userId}}'],
  ['unclosed', 'https://api.example.com/{{userId'],
  ['bad_path', 'https://api.example.com/{{traits..email}}'],
  ['removed_by_a_dot_segment', 'https://api.example.com/users/{{userId}}/..'],
  ['in_the_host_after_slashes', 'http:///{{userId}}/x'],
].map(([name, url]) => ({ name, settings: { endpoints: [url] }, code: 'invalid_url' }));
invalidTemplates.push({ name: 'batched', settings: { endpoints: ['https://api.example.com/{{userId}}'], batch: {} }, code: 'invalid_settings' });
write('mappings.json', { cases: mappingCases, invalid: invalidMappings.map((c) => ({ ...c, code: 'invalid_settings' })), url_templates: urlTemplates, invalid_url_templates: invalidTemplates });
