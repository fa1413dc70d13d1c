#!/usr/bin/env bash
# The relay benchmark (benches/relay/bench.py): wrk sends, the relay stores
# and delivers, a Node receiver verifies. Installs wrk (Debian) if missing.
#   bash benches/relay.sh          full run (about 2 minutes)
#   bash benches/relay.sh --smoke  short runs
#   bash benches/relay.sh --postgres   also Postgres (scripts/postgres.sh), 1 and 2 relays
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
bash scripts/python-env.sh >/dev/null
bash benches/node-env.sh >/dev/null
target/venv/bin/python benches/relay/bench.py "$@"
