#!/usr/bin/env bash
# Sets up a fresh machine and runs every test. Idempotent: each tool is
# installed only when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "toolchain"
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
command -v node >/dev/null || { echo "node is required (the JSON.stringify oracle)"; exit 1; }

step "core builds for wasm32-unknown-unknown (no I/O, no std::time, no getrandom)"
cargo build --locked -p callpost-core --target wasm32-unknown-unknown

step "clippy"
cargo clippy --locked --workspace --all-targets -- -D warnings

step "rust tests (unit, shared vectors, properties, node JSON.stringify corpus, simulations)"
cargo test --locked --workspace

step "demo runs"
cargo run --locked -q -p callpost-core --example demo >/dev/null
echo "all tests passed"
