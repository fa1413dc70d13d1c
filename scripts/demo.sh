#!/usr/bin/env bash
# Sets up and runs the main demo: a Python client batches every call kind to
# the relay (python -m callpost relay, on a throwaway SQLite file), which
# stores them and delivers each through the Webhooks destination to two
# endpoints at once (one always down; one that fails its first request, so
# a retry round shows, and verifies every signature), then a delete
# notification from the admin API. All on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/python-env.sh
target/venv/bin/python -m callpost demo
