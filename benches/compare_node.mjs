// callpost against node:crypto and hash-wasm, interleaved in one process, on
// every fixture in benches/fixtures/. Each round runs every candidate for n
// calls in turn; the median round is reported, so machine drift hits every
// candidate alike, and every ratio comes from one run.
//   node benches/compare_node.mjs [--smoke]   (from target/bench-node)
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const callpost = require('callpost');
const { createHMAC, createSHA1 } = require('hash-wasm');

const SMOKE = process.argv.includes('--smoke');
const NAMES = ['track_423', 'track_4k', 'identify_200_traits', 'unicode_text', 'number_arrays', 'product_list_32k', 'order_completed'];
const fixture = (name, form = '') => readFileSync(new URL(`./fixtures/${name}${form}.json`, import.meta.url), 'utf8');
const SECRET = 'whsec-bench';

function bench(candidates, n, rounds) {
  const times = Object.fromEntries(Object.keys(candidates).map((k) => [k, []]));
  let sink = 0;
  for (let r = 0; r < rounds; r++) {
    for (const [name, fn] of Object.entries(candidates)) {
      const t = process.hrtime.bigint();
      for (let i = 0; i < n; i++) sink += fn().length;
      times[name].push(Number(process.hrtime.bigint() - t) / n);
    }
  }
  if (sink === -1) console.log(sink);
  const median = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
  return Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)]));
}

// How many times faster callpost is (below 1: slower).
const ratio = (ours, theirs) => theirs / ours;

function report(title, result, ours) {
  console.log(`\n${title}`);
  for (const [name, ns] of Object.entries(result)) {
    const r = name === ours ? '' : `  callpost ${ratio(result[ours], ns).toFixed(2)}x`;
    console.log(`  ${name.padEnd(46)} ${(ns / 1000).toFixed(3).padStart(9)} us/call${r}`);
  }
}

const iterations = (size) => (SMOKE ? 20 : Math.max(200, Math.min(20_000, Math.floor(8_000_000 / size))));
const rounds = SMOKE ? 3 : 11;
const hooks = new callpost.Webhooks({ endpoints: ['https://hooks.example.com/segment'], sharedSecret: SECRET });
console.log(`node ${process.version}, callpost ${callpost.VERSION}`);

const summary = [];
for (const name of NAMES) {
  const text = fixture(name);
  const call = JSON.parse(text);
  const n = iterations(text.length);
  const body = hooks.request(call).body;
  let ours = 'callpost Webhooks.request(object)';
  let r = bench({
    [ours]: () => hooks.request(call).body,
    'JSON.stringify + createHmac': () => { const b = JSON.stringify(call); return createHmac('sha1', SECRET).update(b).digest('hex') + b; },
  }, n, rounds);
  report(`${name}: webhook request from an object (${Buffer.byteLength(text)} B call, ${Buffer.byteLength(body)} B body)`, r, ours);
  const byObject = ratio(r[ours], r['JSON.stringify + createHmac']);
  // A forwarder receives the call as JSON text: the peer must parse it too.
  const byText = [];
  for (const [form, t] of [['compact', text], ['json.dumps', fixture(name, '.dumps')]]) {
    ours = `callpost Webhooks.request(text, ${form})`;
    r = bench({
      [ours]: () => hooks.request(t).body,
      'JSON.parse + JSON.stringify + createHmac': () => { const b = JSON.stringify(JSON.parse(t)); return createHmac('sha1', SECRET).update(b).digest('hex') + b; },
    }, n, rounds);
    report(`${name}: forwarding ${Buffer.byteLength(t)} B of text as ${form} writes it`, r, ours);
    byText.push(ratio(r[ours], r['JSON.parse + JSON.stringify + createHmac']));
  }
  summary.push([name, byObject, ...byText]);
}

const signer = new callpost.Signer(SECRET);
const hw = await createHMAC(createSHA1(), SECRET);
const hashWasm = (body) => { hw.init(); hw.update(body); return hw.digest('hex'); };
const body423 = hooks.request(JSON.parse(fixture('track_423'))).body;
report(`sign(string), ${Buffer.byteLength(body423)} B`, bench({
  'callpost sign(secret, body)': () => callpost.sign(SECRET, body423),
  'callpost Signer.signString (prekeyed)': () => signer.signString(body423),
  'node:crypto createHmac': () => createHmac('sha1', SECRET).update(body423).digest('hex'),
  'hash-wasm HMAC (instance reused)': () => hashWasm(body423),
}, SMOKE ? 500 : 50_000, rounds), 'callpost sign(secret, body)');

// What the private scratch buffer buys: verify() with one secret writes the
// body and secret into wasm memory with encodeInto (the package's path for
// bodies below hostHmacMinBytes), against the same core function reached
// through wasm-bindgen's value passing (a Uint8Array and strings; that path
// also keys the HMAC on every call, where the scratch path's core keeps the
// last key prekeyed).
const pkgDir = join(require.resolve('callpost/package.json'), '..');
const fullWasm = require(join(pkgDir, 'node/callpost_wasm.js'));
const encoder = new TextEncoder();
for (const b of [body423, hooks.request(JSON.parse(fixture('track_4k'))).body.slice(0, 1500)]) {
  const sig = createHmac('sha1', SECRET).update(b).digest('hex');
  report(`verify at ${Buffer.byteLength(b)} B: the scratch buffer against value passing`, bench({
    'callpost verify (scratch buffer)': () => String(callpost.verify(b, sig, SECRET)),
    'the same core verify through wasm-bindgen values': () => String(fullWasm.verify(encoder.encode(b), sig, SECRET)),
  }, SMOKE ? 500 : 50_000, rounds), 'callpost verify (scratch buffer)');
}

// Either side of the size where the package hands bodies to node:crypto
// (DEFAULTS.hostHmacMinBytes), for sign, verify and the prekeyed Signer.
const from = callpost.DEFAULTS.hostHmacMinBytes;
for (const size of [64, 423, 1024, from - 1, from, 4096, 32 * 1024, 500_000]) {
  const b = 'a'.repeat(size);
  const n = SMOKE ? 50 : Math.max(200, Math.min(50_000, Math.floor(20_000_000 / size / 4)));
  report(`sign at ${size} B`, bench({
    'callpost sign': () => callpost.sign(SECRET, b),
    'callpost Signer.signString (prekeyed)': () => signer.signString(b),
    'node:crypto createHmac': () => createHmac('sha1', SECRET).update(b).digest('hex'),
  }, n, rounds), 'callpost sign');
}

// A receiver's verify: in Node, large bodies have their HMAC computed by
// node:crypto and compared by the core; the wasm-only row is the path
// browsers take (the same API built with no platform HMAC).
const wasmOnly = require(join(pkgDir, 'api.cjs')).makeSigning(require(join(pkgDir, 'verify/node/callpost_wasm.js')), {}).api;
for (const size of [423, 1535, 4096, 32 * 1024]) {
  const b = 'a'.repeat(size);
  const sig = createHmac('sha1', SECRET).update(b).digest('hex');
  const n = SMOKE ? 50 : Math.max(200, Math.min(50_000, Math.floor(20_000_000 / size / 4)));
  report(`verify at ${size} B`, bench({
    'callpost verify': () => String(callpost.verify(b, sig, SECRET)),
    'callpost verify, wasm only (browsers)': () => String(wasmOnly.verify(b, sig, SECRET)),
    'createHmac + timingSafeEqual': () => String(timingSafeEqual(Buffer.from(createHmac('sha1', SECRET).update(b).digest('hex')), Buffer.from(sig))),
  }, n, rounds), 'callpost verify');
}

console.log('\nsummary: callpost\'s speed against JSON.stringify (and JSON.parse) + createHmac (above 1: faster)');
console.log(`  ${'fixture'.padEnd(22)} ${'request(object)'.padStart(16)} ${'request(text)'.padStart(14)} ${'request(dumps text)'.padStart(20)}`);
for (const [name, o, t, d] of summary) {
  console.log(`  ${name.padEnd(22)} ${o.toFixed(2).padStart(16)} ${t.toFixed(2).padStart(14)} ${d.toFixed(2).padStart(20)}`);
}

// The drop-in against the SDK it replaces: N tracks of track_423 through
// closeAndFlush() to a local ingest server in a child process (so its work
// is not counted), with each SDK's defaults. N stays under callpost's
// 10,000-message queue bound: the loop queues every call before the first
// upload can start. CPU time is this process's
// (process.cpuUsage: the SDK's JSON, batching and HTTP work); wall time
// includes the uploads. The runs alternate, and the median is reported.
const { Analytics: CallpostAnalytics } = require('callpost/segment');
const { Analytics: SegmentAnalytics } = require('@segment/analytics-node');
const { spawn } = require('node:child_process');
const ingest = spawn(process.execPath, ['-e', `
  const s = require('node:http').createServer((q, r) => { q.resume(); q.on('end', () => r.end('{}')); });
  s.listen(0, '127.0.0.1', () => console.log(s.address().port));`], { stdio: ['ignore', 'pipe', 'inherit'] });
const port = await new Promise((resolve) => ingest.stdout.once('data', (d) => resolve(Number(String(d).trim()))));
const { type: _type, ...trackParams } = JSON.parse(fixture('track_423'));
const N = SMOKE ? 200 : 8_000;
const sdkRuns = { 'callpost/segment Analytics.track()': [], '@segment/analytics-node Analytics.track()': [] };
for (let round = 0; round < (SMOKE ? 1 : 7); round++) {
  for (const [name, Analytics] of [['callpost/segment Analytics.track()', CallpostAnalytics], ['@segment/analytics-node Analytics.track()', SegmentAnalytics]]) {
    const analytics = new Analytics({ writeKey: 'wk', host: `http://127.0.0.1:${port}` });
    let failed = 0;
    analytics.on('error', () => failed++);
    const cpu = process.cpuUsage();
    const wall = process.hrtime.bigint();
    for (let i = 0; i < N; i++) analytics.track(trackParams);
    await analytics.closeAndFlush();
    const used = process.cpuUsage(cpu);
    if (failed) throw new Error(`${name}: ${failed} messages failed`);
    sdkRuns[name].push([(used.user + used.system) * 1000 / N, Number(process.hrtime.bigint() - wall) / N]);
  }
}
ingest.kill();
const med = (list, i) => list.map((x) => x[i]).sort((a, b) => a - b)[Math.floor(list.length / 2)];
console.log(`\nthe drop-in: ${N} tracks of track_423 through closeAndFlush() to a local ingest server (median of runs)`);
for (const [name, list] of Object.entries(sdkRuns)) {
  console.log(`  ${name.padEnd(46)} ${(med(list, 0) / 1000).toFixed(2).padStart(7)} us CPU/msg ${(1e9 / med(list, 1)).toFixed(0).padStart(8)} msg/s`);
}
const [oursRuns, theirRuns] = Object.values(sdkRuns);
console.log(`  callpost/segment uses ${(med(theirRuns, 0) / med(oursRuns, 0)).toFixed(2)}x less CPU per message, ${(med(theirRuns, 1) / med(oursRuns, 1)).toFixed(2)}x the messages per second`);
