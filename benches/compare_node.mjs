// callpost against node:crypto and hash-wasm, interleaved in one process.
// Each round runs every candidate for n calls in turn; the median round is
// reported, so machine drift hits every candidate alike.
//   node benches/compare_node.mjs [--smoke]   (from target/bench-node)
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const callpost = require('callpost');
const { createHMAC, createSHA1 } = require('hash-wasm');

const SMOKE = process.argv.includes('--smoke');
const FIXTURE = JSON.parse(readFileSync(new URL('./fixtures/track.json', import.meta.url), 'utf8'));
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

function report(title, result, ours) {
  console.log(`\n${title}`);
  for (const [name, ns] of Object.entries(result)) {
    const r = result[ours];
    const ratio = name === ours ? '' : ns >= r ? `  callpost is ${(ns / r).toFixed(2)}x faster` : `  callpost is ${(r / ns).toFixed(2)}x slower`;
    console.log(`  ${name.padEnd(46)} ${(ns / 1000).toFixed(3).padStart(9)} us/call${ratio}`);
  }
}

const hooks = new callpost.Webhooks({ endpoints: ['https://hooks.example.com/segment'], sharedSecret: SECRET });
const body423 = hooks.request(FIXTURE).body;
const signer = new callpost.Signer(SECRET);
const hw = await createHMAC(createSHA1(), SECRET);
const hashWasm = (body) => { hw.init(); hw.update(body); return hw.digest('hex'); };
const rounds = SMOKE ? 3 : 15;

console.log(`node ${process.version}, ${Buffer.byteLength(body423)}-byte body`);
report('sign(string), 423 B', bench({
  'callpost sign(secret, body)': () => callpost.sign(SECRET, body423),
  'callpost Signer.signString (prekeyed)': () => signer.signString(body423),
  'node:crypto createHmac': () => createHmac('sha1', SECRET).update(body423).digest('hex'),
  'hash-wasm HMAC (instance reused)': () => hashWasm(body423),
}, SMOKE ? 500 : 50_000, rounds), 'callpost sign(secret, body)');

report('build + sign from an object, 423 B', bench({
  'callpost Webhooks.request(call)': () => hooks.request(FIXTURE).body,
  'JSON.stringify + createHmac': () => { const b = JSON.stringify(FIXTURE); return createHmac('sha1', SECRET).update(b).digest('hex') + b; },
}, SMOKE ? 500 : 20_000, rounds), 'callpost Webhooks.request(call)');

// A forwarder receives the call as JSON text: the peer must parse it too.
const TEXT = JSON.stringify(FIXTURE);
report('forwarding a call received as JSON text, 423 B', bench({
  'callpost Webhooks.request(text)': () => hooks.request(TEXT).body,
  'JSON.parse + JSON.stringify + createHmac': () => { const b = JSON.stringify(JSON.parse(TEXT)); return createHmac('sha1', SECRET).update(b).digest('hex') + b; },
}, SMOKE ? 500 : 20_000, rounds), 'callpost Webhooks.request(text)');

const FIXTURE_32K = { ...FIXTURE, properties: { ...FIXTURE.properties, notes: 'x'.repeat(32 * 1024 - 440) } };
report(`build + sign from an object, ${Buffer.byteLength(hooks.request(FIXTURE_32K).body)} B`, bench({
  'callpost Webhooks.request(call)': () => hooks.request(FIXTURE_32K).body,
  'JSON.stringify + createHmac': () => { const b = JSON.stringify(FIXTURE_32K); return createHmac('sha1', SECRET).update(b).digest('hex') + b; },
}, SMOKE ? 50 : 1_000, rounds), 'callpost Webhooks.request(call)');

// Either side of 1792 B, where the package hands bodies to node:crypto
// (sign, verify and the prekeyed Signer); 1280 B, where sign and verify did
// until session 10; 1535 and 2047 B, where they did until session 6.
for (const size of [64, 423, 1024, 1279, 1280, 1535, 1791, 1792, 2047, 4096, 32 * 1024, 500_000]) {
  const body = 'a'.repeat(size);
  const n = SMOKE ? 50 : Math.max(200, Math.min(50_000, Math.floor(20_000_000 / size / 4)));
  report(`sign at ${size} B`, bench({
    'callpost sign': () => callpost.sign(SECRET, body),
    'callpost Signer.signString (prekeyed)': () => signer.signString(body),
    'node:crypto createHmac': () => createHmac('sha1', SECRET).update(body).digest('hex'),
  }, n, rounds), 'callpost sign');
}

// A receiver's verify: in Node, bodies from 1792 B have their HMAC computed
// by node:crypto and compared by the core; the wasm-only row is the path
// browsers take (the same API built with no platform HMAC).
const pkgDir = join(require.resolve('callpost/package.json'), '..');
const wasmOnly = require(join(pkgDir, 'api.cjs')).makeSigning(require(join(pkgDir, 'verify/node/callpost_wasm.js')), {}).api;
for (const size of [423, 1535, 4096, 32 * 1024]) {
  const body = 'a'.repeat(size);
  const sig = createHmac('sha1', SECRET).update(body).digest('hex');
  const n = SMOKE ? 50 : Math.max(200, Math.min(50_000, Math.floor(20_000_000 / size / 4)));
  report(`verify at ${size} B`, bench({
    'callpost verify': () => String(callpost.verify(body, sig, SECRET)),
    'callpost verify, wasm only (browsers)': () => String(wasmOnly.verify(body, sig, SECRET)),
    'createHmac + timingSafeEqual': () => String(timingSafeEqual(Buffer.from(createHmac('sha1', SECRET).update(body).digest('hex')), Buffer.from(sig))),
  }, n, rounds), 'callpost verify');
}
