#!/usr/bin/env bash
# Sets up and runs the main demo: signed webhook requests for every call kind,
# verified as a receiver would verify them.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --locked -q -p callpost-core --example demo
