#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 15), with corpora seeded
# from the shared vectors in testdata/. Longer runs: `bash core/fuzz/run.sh 3600`,
# or one target, from core/: `cargo +nightly fuzz run call_parse fuzz/corpus/call_parse`.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-15}

if ! cargo fuzz --version 2>/dev/null | grep -q "0.13"; then
  cargo install cargo-fuzz --version 0.13.2
fi

# Seeds: every call, body and JSON text the vectors hold.
mkdir -p corpus/call_parse corpus/canonical_json corpus/verify corpus/state_machines corpus/endpoint_url
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
JS

for t in call_parse canonical_json verify state_machines endpoint_url; do
  echo "== fuzz $t for ${seconds}s"
  set +e
  (cd .. && cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$seconds" -rss_limit_mb=2048) > "target-$t.log" 2>&1
  rc=$?
  set -e
  grep -E "^Done|SUMMARY|panicked" "target-$t.log" || true
  if [ $rc -ne 0 ]; then
    echo "fuzz target $t failed (exit $rc):"; tail -40 "target-$t.log"
    ls "artifacts/$t" 2>/dev/null || true
    exit 1
  fi
done
