#!/usr/bin/env bash
# Runs every benchmark: criterion (Rust), OpenSSL's SHA-1/HMAC speed on this
# machine (the hardware limit), and the Python and Node peer comparisons.
#   bash benches/run.sh          full run (about 14 minutes on 2 cores)
#   bash benches/run.sh --smoke  run every criterion bench once (cargo's test
#                                profile) and each peer script briefly, with
#                                the wheels scripts/test.sh built (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
smoke=${1:-}

bash benches/python-env.sh ${smoke:+--reuse} >/dev/null
bash benches/node-env.sh >/dev/null

if [ "$smoke" = "--smoke" ]; then
  # Criterion run by `cargo test` runs each bench once, unmeasured: every
  # bench still works, without the bench profile's fat-LTO build.
  cargo test --locked -p callpost-benches --benches >/dev/null
  target/bench-venv/bin/python benches/compare_python.py --smoke
  node target/bench-node/compare_node.mjs --smoke
  target/bench-node/node_modules/node24/bin/node target/bench-node/compare_node.mjs --smoke
  exit 0
fi

echo "== $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "== openssl speed (the hardware limit for SHA-1 / HMAC-SHA1)"
openssl speed -seconds 2 -bytes 4096 -evp sha1 2>/dev/null | tail -2
openssl speed -seconds 2 -bytes 4096 -hmac sha1 2>/dev/null | tail -2
echo "== criterion"
cargo bench --locked -p callpost-benches --bench hot_path -- --warm-up-time 1 --measurement-time 3 2>&1 | grep -E "^[a-z_]+/|time:|thrpt:"
echo "== python"
target/bench-venv/bin/python benches/compare_python.py
echo "== node"
node target/bench-node/compare_node.mjs
echo "== node 24"
target/bench-node/node_modules/node24/bin/node target/bench-node/compare_node.mjs
