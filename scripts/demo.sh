#!/usr/bin/env bash
# Sets up and runs the main demo: a Python client batches every call kind to
# a local ingest server, which forwards each one through the Webhooks
# destination (first endpoint down, so failover and a retry show) to a
# receiver that verifies every signature. All on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/python-env.sh
target/venv/bin/python -m callpost demo
