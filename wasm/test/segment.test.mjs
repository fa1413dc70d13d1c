// callpost/segment: @segment/analytics-node's Analytics on the batching
// Client, against real ingest servers on 127.0.0.1; the per-call callbacks
// of the Client; and one analytics-node script run through Segment's own
// SDK (from npm, in test/runtimes) and through callpost/segment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { Analytics, SEGMENT_DEFAULTS } from 'callpost/segment';
import { Client } from 'callpost/client';
import { serve, ok } from './helpers.mjs';

const messages = (srv) => srv.received.flatMap((r) => JSON.parse(r.body).batch);
const until = (emitter, event) => new Promise((resolve) => emitter.once(event, (...args) => resolve(args)));

test('the callback pattern resolves: await new Promise((r) => analytics.track(evt, r))', async () => {
  const srv = await serve(ok);
  try {
    const analytics = new Analytics({ writeKey: 'wk', host: srv.url, flushAt: 1 });
    const [err, ctx] = await new Promise((r) => analytics.track({ userId: 'u1', event: 'Lambda Ran' }, (...a) => r(a)));
    assert.equal(err, undefined);
    assert.equal(ctx.event.event, 'Lambda Ran');
    assert.equal(ctx.id, ctx.event.messageId);
    assert.equal(ctx.failedDelivery(), undefined);
    assert.deepEqual(messages(srv).map((m) => m.messageId), [ctx.id]);
    // With the default flushAt, the batch waits for flushInterval.
    const later = new Analytics({ writeKey: 'wk', host: srv.url, flushInterval: 100 });
    const [err2] = await new Promise((r) => later.identify({ userId: 'u2', traits: { a: 1 } }, (...a) => r(a)));
    assert.equal(err2, undefined);
    assert.equal(messages(srv).length, 2);
    await Promise.all([analytics.closeAndFlush(), later.closeAndFlush()]);
  } finally { srv.close(); }
});

test('closeAndFlush sends everything queued, then calls are call_after_close and are not sent', async () => {
  const srv = await serve(ok);
  try {
    const analytics = new Analytics({ writeKey: 'wk', host: srv.url, flushInterval: 60_000 });
    const done = [];
    for (let i = 0; i < 40; i++) analytics.track({ userId: 'u', event: 'E', properties: { i } }, (err) => done.push(err));
    const closing = analytics.closeAndFlush();
    const [late] = await Promise.all([until(analytics, 'call_after_close'), analytics.track({ userId: 'u', event: 'Late' })]);
    await closing;
    assert.equal(late[0].event, 'Late');
    assert.deepEqual(done, Array(40).fill(undefined));
    assert.deepEqual(messages(srv).map((m) => m.properties.i), [...Array(40).keys()]);
    assert.deepEqual(srv.received.map((r) => JSON.parse(r.body).batch.length), [15, 15, 10]);
    assert.ok(!messages(srv).some((m) => m.event === 'Late'));
  } finally { srv.close(); }
});

// The request hangs for httpRequestTimeout (60 s): the test's own 30 s
// timeout fails it if closeAndFlush waits for the request instead of its
// 300 ms timeout.
test('closeAndFlush({timeout}) resolves by its timeout; what is left fails to callbacks and `error`', { timeout: 30_000 }, async () => {
  const srv = await serve(() => 'hang');
  try {
    const analytics = new Analytics({ writeKey: 'wk', host: srv.url, httpRequestTimeout: 60_000 });
    const errors = [];
    analytics.on('error', (e) => errors.push(e));
    const failed = new Promise((r) => analytics.track({ userId: 'u', event: 'Stuck' }, (err, ctx) => r([err, ctx])));
    await analytics.closeAndFlush({ timeout: 300 });
    assert.equal(srv.received.length, 1, 'the one request is still unanswered');
    const [err, ctx] = await failed;
    assert.equal(err.code, 'shutdown');
    assert.equal(ctx.failedDelivery().reason, err);
    assert.equal(ctx.event.event, 'Stuck');
    assert.equal(errors.length, 1);
    assert.equal(errors[0].code, 'delivery_failure');
    assert.equal(errors[0].ctx.id, ctx.id);
  } finally { srv.close(); }
});

test('each event fires: http_request, http_response, one per call type, drained, error, call_after_close', async () => {
  const srv = await serve((n, req, body) => (body.includes('"Refused"') ? [400] : [200, { 'x-ingest': 'yes' }, 'ok']));
  try {
    const analytics = new Analytics({ writeKey: 'wk_secret', host: srv.url, flushAt: 1 });
    const seen = [];
    for (const e of ['http_request', 'http_response', 'identify', 'track', 'page', 'screen', 'group', 'alias', 'drained', 'error', 'call_after_close']) {
      analytics.on(e, (arg) => seen.push([e, arg]));
    }
    const calls = [
      ['identify', { userId: 'u', traits: { a: 1 } }], ['track', { userId: 'u', event: 'E' }], ['page', { userId: 'u', name: 'P' }],
      ['screen', { userId: 'u', name: 'S' }], ['group', { userId: 'u', groupId: 'g' }], ['alias', { userId: 'u', previousId: 'a' }],
      ['track', { userId: 'u', event: 'Refused' }],
    ];
    for (const [method, params] of calls) await new Promise((r) => analytics[method](params, r));
    await analytics.closeAndFlush();
    analytics.track({ userId: 'u', event: 'After' });
    const names = seen.map(([e]) => e);
    for (const type of ['identify', 'track', 'page', 'screen', 'group', 'alias']) {
      const ctx = seen.find(([e, c]) => e === type && c.event.type === type);
      assert.ok(ctx, `${type} event`);
    }
    assert.equal(names.filter((e) => e === 'http_request').length, 7);
    assert.equal(names.filter((e) => e === 'http_response').length, 7);
    assert.equal(names.filter((e) => e === 'drained').length, 7);
    const [, request] = seen.find(([e]) => e === 'http_request');
    assert.equal(request.method, 'POST');
    assert.equal(request.url, `${srv.url}/v1/batch`);
    assert.equal(JSON.parse(request.body).batch[0].type, 'identify');
    // The write key is not shown (Segment's event carries it).
    assert.equal(request.headers.Authorization ?? request.headers.authorization, 'Basic ***');
    assert.ok(!JSON.stringify(seen.map(([, a]) => a)).includes(Buffer.from('wk_secret:').toString('base64')));
    const [, response] = seen.find(([e]) => e === 'http_response');
    assert.equal(response.status, 200);
    assert.equal(response.headers['x-ingest'], 'yes');
    const [, error] = seen.find(([e]) => e === 'error');
    assert.equal(error.code, 'delivery_failure');
    assert.equal(error.reason.code, 'rejected');
    assert.equal(error.ctx.event.event, 'Refused');
    assert.equal(seen.find(([e]) => e === 'call_after_close')[1].event, 'After');
  } finally { srv.close(); }
});

test('disable sends nothing; calls are still checked, and their callbacks and events report delivery', async () => {
  const srv = await serve(ok);
  try {
    const analytics = new Analytics({ writeKey: 'wk', host: srv.url, flushAt: 1, disable: true });
    const tracked = until(analytics, 'track');
    const [err, ctx] = await new Promise((r) => analytics.track({ userId: 'u', event: 'Quiet' }, (...a) => r(a)));
    assert.equal(err, undefined);
    assert.equal(ctx.event.event, 'Quiet');
    assert.equal((await tracked)[0].id, ctx.id);
    assert.throws(() => analytics.track({ event: 'No One' }), (e) => e.code === 'missing_identity');
    await analytics.closeAndFlush();
    assert.equal(srv.received.length, 0);
  } finally { srv.close(); }
});

test("Segment's options: host and path as analytics-node resolves them, httpClient as a function or makeRequest", async () => {
  const srv = await serve(ok);
  try {
    const viaPath = new Analytics({ writeKey: 'wk', host: `${srv.url}/ignored/`, path: '/collect/', flushAt: 1 });
    await new Promise((r) => viaPath.track({ userId: 'u', event: 'E' }, r));
    assert.equal(srv.received.at(-1).path, '/collect');
    const fetched = [];
    const fn = new Analytics({
      writeKey: 'wk', host: srv.url, flushAt: 1,
      httpClient: (url, init) => { fetched.push([url, init.headers['Content-Type'] ?? init.headers['content-type']]); return fetch(url, init); },
    });
    await new Promise((r) => fn.track({ userId: 'u', event: 'E' }, r));
    assert.deepEqual(fetched, [[`${srv.url}/v1/batch`, 'application/json']]);
    const made = [];
    const custom = new Analytics({
      writeKey: 'wk', host: srv.url, flushAt: 1, httpRequestTimeout: 1234,
      httpClient: {
        async makeRequest(req) {
          made.push(req);
          const r = await fetch(req.url, { method: req.method, headers: req.headers, body: req.body });
          return { status: r.status, statusText: r.statusText, headers: Object.fromEntries(r.headers) };
        },
      },
    });
    const [err] = await new Promise((r) => custom.track({ userId: 'u', event: 'E' }, (...a) => r(a)));
    assert.equal(err, undefined);
    assert.equal(made[0].httpRequestTimeout, 1234);
    assert.equal(JSON.parse(made[0].body).batch[0].event, 'E');
    await Promise.all([viaPath, fn, custom].map((a) => a.closeAndFlush()));
  } finally { srv.close(); }
});

test('integer ids are sent as their exact digits: a bigint of any size, a number while it is a safe integer', async () => {
  const srv = await serve(ok);
  try {
    const analytics = new Analytics({ writeKey: 'wk', host: srv.url, flushAt: 3 });
    analytics.track({ userId: 157963456373623802n, event: 'Purchased Item', anonymousId: 157963456373623803n });
    analytics.group({ userId: Number.MAX_SAFE_INTEGER, groupId: 10n ** 30n, messageId: -(2n ** 64n) });
    analytics.alias({ userId: 0, previousId: 42 });
    // A number past 2^53 may already hold other digits than were written;
    // a fraction or a boolean is no id.
    assert.throws(() => analytics.track({ userId: 157963456373623802, event: 'E' }), (e) => e.code === 'integer_out_of_range');
    assert.throws(() => analytics.track({ userId: 1.5, event: 'E' }), (e) => e.code === 'invalid_field');
    assert.throws(() => analytics.track({ userId: true, event: 'E' }), (e) => e.code === 'invalid_field');
    await analytics.closeAndFlush();
    const [track, group, alias] = messages(srv);
    assert.deepEqual([track.userId, track.anonymousId], ['157963456373623802', '157963456373623803']);
    assert.deepEqual([group.userId, group.groupId, group.messageId], ['9007199254740991', `1${'0'.repeat(30)}`, '-18446744073709551616']);
    assert.deepEqual([alias.userId, alias.previousId], ['0', '42']);
  } finally { srv.close(); }
});

test('bad settings and calls throw typed errors at once, as analytics-node throws ValidationError', () => {
  assert.throws(() => new Analytics({}), (e) => e.code === 'invalid_argument' && /writeKey/.test(e.message));
  assert.throws(() => new Analytics({ writeKey: 'wk', oauthSettings: { clientId: 'x' } }), (e) => e.code === 'invalid_argument');
  const analytics = new Analytics({ writeKey: 'wk', disable: true });
  assert.throws(() => analytics.track({ userId: 'u' }), (e) => e.code === 'missing_event');
  assert.throws(() => analytics.identify({ traits: {} }), (e) => e.code === 'missing_identity');
  assert.throws(() => analytics.track({ userId: 'u', event: 'E' }, 'not a function'), (e) => e.code === 'invalid_argument');
  assert.throws(() => analytics.register({}), (e) => e.code === 'invalid_argument');
  assert.equal(SEGMENT_DEFAULTS.flushAt, 15);
  assert.equal(typeof analytics.VERSION, 'string');
});

test('the Client calls each call\'s callback once: delivered, rejected, or disabled', async () => {
  const srv = await serve((n, req, body) => (body.includes('"Bad"') ? [400] : [200]));
  try {
    const errors = [];
    const c = new Client({ writeKey: 'wk', endpoint: srv.url, flushAt: 1, onError: (e) => errors.push(e.code) });
    const [err, message] = await new Promise((r) => c.track({ userId: 'u', event: 'Good' }, (...a) => r(a)));
    assert.equal(err, undefined);
    assert.equal(message.event, 'Good');
    assert.equal(message.context.library.name, 'callpost');
    const [bad, badMessage] = await new Promise((r) => c.track({ userId: 'u', event: 'Bad' }, (...a) => r(a)));
    assert.equal(bad.code, 'rejected');
    assert.equal(badMessage.event, 'Bad');
    assert.deepEqual(errors, ['rejected'], 'onError still hears of it');
    // A repeated messageId: each call's callback is called once.
    const both = await Promise.all([1, 2].map((i) => new Promise((r) => c.track({ userId: 'u', event: 'Twice', messageId: 'same', properties: { i } }, (e, m) => r(m.properties.i)))));
    assert.deepEqual(both, [1, 2]);
    await c.close();
    const off = new Client({ writeKey: 'wk', endpoint: srv.url, flushAt: 1, disable: true });
    const id = await new Promise((r) => off.alias({ userId: 'u', previousId: 'a' }, (e, m) => r(e ?? m.messageId)));
    assert.match(id, /^[0-9a-f-]{36}$/);
    await off.close();
    assert.equal(srv.received.length, 4);
    // Ids from the pooled random bytes: distinct across several 4 KB draws.
    const many = new Client({ writeKey: 'wk', disable: true });
    assert.equal(new Set(Array.from({ length: 1000 }, () => many.track({ userId: 'u', event: 'E' }))).size, 1000);
  } finally { srv.close(); }
});

test('require("callpost/segment") is the same API', () => {
  const require = createRequire(import.meta.url);
  const cjs = require('callpost/segment');
  assert.equal(typeof cjs.Analytics, 'function');
  assert.deepEqual(cjs.SEGMENT_DEFAULTS, SEGMENT_DEFAULTS);
});

// One analytics-node script, run unchanged through Segment's SDK (in Node)
// and with its import line changed through callpost/segment (in Node, Deno
// and Bun), each against its own ingest server. Only messageId, timestamps, context.library and Segment's
// `_metadata` (its SDK's telemetry) may differ; a timestamp the script gives
// must be the same instant.
const runtimes = fileURLToPath(new URL('./runtimes/', import.meta.url));
const script = readFileSync(new URL('./segment/script.mjs', import.meta.url), 'utf8');

const bin = (name) => join(runtimes, 'node_modules', '.bin', name);
const node = (source) => [process.execPath, ['--input-type=module', '-e', source]];

async function runScript([command, args]) {
  const srv = await serve(ok);
  try {
    await new Promise((resolve, reject) => execFile(command, args,
      { cwd: runtimes, env: { ...process.env, INGEST_URL: srv.url }, timeout: 60_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve())));
    return srv.received;
  } finally { srv.close(); }
}

const ours = script.replace("from '@segment/analytics-node'", "from 'callpost/segment'");


test('the same script through @segment/analytics-node and callpost/segment sends the same fields', async (t) => {
  assert.notEqual(ours, script, 'the import line was changed');
  assert.equal(ours.split('\n').filter((l, i) => l !== script.split('\n')[i]).length, 1, 'only the import line differs');
  const theirs = await runScript(node(script));
  for (const [runtime, command] of [
    ['Node', node(ours)],
    ['Deno', [bin('deno'), ['eval', ours]]],
    ['Bun', [bin('bun'), ['-e', ours]]],
  ]) {
    await t.test(`callpost/segment in ${runtime}`, async () => compare(theirs, await runScript(command)));
  }
});

function compare(theirs, mine) {
  for (const requests of [theirs, mine]) {
    assert.ok(requests.length >= 1);
    for (const r of requests) {
      assert.equal(r.path, '/v1/batch');
      assert.equal(r.headers.authorization, `Basic ${Buffer.from('wk_script:').toString('base64')}`);
      assert.match(r.headers['content-type'], /^application\/json/);
    }
  }
  const sent = (requests) => requests.flatMap((r) => JSON.parse(r.body).batch);
  const a = sent(theirs);
  const b = sent(mine);
  assert.equal(a.length, 11);
  assert.equal(b.length, 11);
  const key = (m) => `${m.type}/${m.event ?? m.name ?? ''}/${m.userId ?? m.anonymousId}`;
  const byKey = (list) => new Map(list.map((m) => [key(m), m]));
  const mineByKey = byKey(b);
  for (const [k, segment] of byKey(a)) {
    const callpost = mineByKey.get(k);
    assert.ok(callpost, `callpost sent ${k}`);
    assert.equal(callpost.context.library.name, 'callpost');
    assert.equal(segment.context.library.name, '@segment/analytics-node');
    assert.equal(Date.parse(callpost.timestamp) > 0, true);
    if (segment.messageId === 'script-msg-1') assert.equal(callpost.messageId, 'script-msg-1');
    if (k.startsWith('track/Viewed Pricing')) assert.equal(Date.parse(callpost.timestamp), Date.parse(segment.timestamp));
    const strip = (m) => {
      const { messageId, timestamp, _metadata, ...rest } = structuredClone(m);
      delete rest.context.library;
      return rest;
    };
    assert.deepEqual(strip(callpost), strip(segment), k);
  }
}
