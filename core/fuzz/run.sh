#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 15; `run.sh SECONDS --dev`:
# unoptimised builds), with corpora seeded
# from the shared vectors in testdata/. Longer runs: `bash core/fuzz/run.sh 3600`,
# or one target, from core/: `cargo +nightly fuzz run call_parse fuzz/corpus/call_parse`.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-15}
# --dev (second argument): the targets built without optimisation, a minute
# less of building on 2 cores for fewer runs a second; scripts/test.sh's
# 10-second smoke takes it, a long run should not.
build=()
if [ "${2:-}" = "--dev" ]; then build=(--dev); fi

if ! cargo fuzz --version 2>/dev/null | grep -q "0.13"; then
  # --debug: a command-line tool that starts cargo; it builds faster.
  cargo install cargo-fuzz --version 0.13.2 --debug
fi

# Seeds: every call, body and JSON text the vectors hold, and every
# Tracking API request (as the ingest target's structured input).
targets="call_parse canonical_json verify state_machines endpoint_url ingest"
for t in $targets; do mkdir -p "corpus/$t"; done
node - <<'JS'
const fs = require('fs');
const td = (f) => JSON.parse(fs.readFileSync(`../../testdata/${f}`, 'utf8'));
let i = 0;
const put = (dir, text) => fs.writeFileSync(`corpus/${dir}/seed-${i++}`, text);
for (const c of td('webhook_requests.json')) {
  put('call_parse', c.call_json ?? JSON.stringify(c.call));
  put('canonical_json', c.expect.body);
}
for (const c of td('errors.json').calls) if (c.call_json) put('call_parse', c.call_json);
for (const c of td('stringify.json')) put('canonical_json', c.input);
for (const c of td('batches.json')) for (const x of c.calls) put('call_parse', JSON.stringify(x.call));
for (const c of td('signatures.json').verify) put('verify', c.body + '\u0000' + c.signature);
for (const c of [...td('webhook_requests.json'), ...td('errors.json').settings]) {
  for (const e of c.settings.endpoints || []) {
    const url = typeof e === 'string' ? e : e && e.url;
    if (typeof url === 'string') put('endpoint_url', url);
  }
}

// The ingest target's input (fuzz_targets/ingest.rs, `Input`) as the
// arbitrary crate (1.x) reads it: an enum variant as a little-endian u32
// whose top bits pick it (0: the first), an Option as a byte (0: None),
// integers little-endian, the body as the rest. Every string is left out
// (a string's length comes from the end of the input, that is, the body).
const ingest = td('ingest.json');
const int = (n, bytes) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt.asUintN(64, BigInt(n))); return b.subarray(0, bytes); };
const variant = (i, count) => int(Math.ceil(i * 2 ** 32 / count), 4);
const some = (...parts) => Buffer.concat([Buffer.from([1]), ...parts]);
const none = Buffer.from([0]);
const headerSet = (gzip) => ingest.headers.findIndex((h) => h.expect.gzip === gzip);
// Authorization values, in the order the target lists them.
const auths = [];
for (const a of [...ingest.write_keys, ...ingest.requests]) {
  if (a.authorization != null && !auths.includes(a.authorization)) auths.push(a.authorization);
}
const ingestSeed = ({ path, authorization = null, body, gzipped = false, compress = null, grow = null, receivedAt = 0 }) => {
  const route = ingest.routes.findIndex((r) => r[0] === path);
  if (route < 0) return;
  const auth = auths.indexOf(authorization);
  put('ingest', Buffer.concat([
    variant(0, 2), int(route, 1),
    variant(0, 2), int(headerSet(gzipped), 1),
    auth < 0 ? none : some(variant(0, 3), int(auth, 1)),
    compress ? some(int(compress.level, 1), int(compress.split, 2)) : none,
    grow ? some(int(grow.at, 2), int(grow.len, 2), int(grow.times, 1)) : none,
    int(receivedAt, 8),
    int(0, 8),
    Buffer.from(body),
  ]));
};
// `{prefix}{unit × count}{suffix}`: a block of units that the target
// repeats (at most 255 times), then the units left over.
const repeated = (prefix, unit, count, suffix) => {
  const per = Math.max(1, Math.ceil(count / 255));
  const times = Math.floor(count / per);
  const block = unit.repeat(per);
  return {
    body: prefix + block + unit.repeat(count - times * per) + suffix,
    grow: { at: prefix.length, len: block.length, times },
  };
};
for (const r of ingest.requests) {
  const receivedAt = Date.parse(r.received_at);
  ingestSeed({ ...r, receivedAt });
  ingestSeed({ ...r, receivedAt, gzipped: true, compress: { level: 6, split: 0 } });
  ingestSeed({ ...r, receivedAt, gzipped: true, compress: { level: 1, split: r.body.length >> 1 } });
}
const track = '{"type":"track","userId":"u","event":"e"}';
for (const e of ingest.errors) {
  if (e.body !== undefined) ingestSeed(e);
  else if (e.body_hex) ingestSeed({ ...e, body: Buffer.from(e.body_hex, 'hex') });
  else if (e.body_call_pad) {
    const head = '{"type":"track","userId":"u","event":"e","properties":{"p":"';
    const tail = '"}}';
    ingestSeed({ ...e, ...repeated('{"batch":[' + head, 'x', e.body_call_pad - head.length - tail.length, tail + ']}') });
  } else if (e.body_batch_pad) {
    const head = '{"batch":[],"pad":"';
    ingestSeed({ ...e, ...repeated(head, 'x', e.body_batch_pad - head.length - 2, '"}') });
  } else if (e.body_batch_count) {
    ingestSeed({ ...e, ...repeated('{"batch":[', track + ',', e.body_batch_count - 1, track + ']}') });
  }
}
// The gzip vectors as they come (valid, multi-member, bombs, broken),
// declared gzip.
for (const g of ingest.gzip) {
  ingestSeed({ path: '/v1/batch', body: Buffer.from(g.body_b64, 'base64'), gzipped: true });
}
// Repeated and non-string write keys: the scan stops at the first
// string, the full parse keeps the last.
for (const body of [
  '{"writeKey":"wk_body","batch":[],"writeKey":"wk_header"}',
  '{"writeKey":"","batch":[],"writeKey":"wk_body"}',
  '{"writeKey":1,"writeKey":"wk_body","batch":[]}',
]) ingestSeed({ path: '/v1/batch', body });
JS

for t in $targets; do
  echo "== fuzz $t for ${seconds}s"
  set +e
  dict=()
  if [ -f "$t.dict" ]; then dict=(-dict="fuzz/$t.dict"); fi
  (cd .. && cargo +nightly fuzz run "${build[@]}" "$t" "fuzz/corpus/$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 "${dict[@]}") > "target-$t.log" 2>&1
  rc=$?
  set -e
  grep -E "^Done|SUMMARY|panicked" "target-$t.log" || true
  if [ $rc -ne 0 ]; then
    echo "fuzz target $t failed (exit $rc):"; tail -40 "target-$t.log"
    ls "artifacts/$t" 2>/dev/null || true
    exit 1
  fi
done
