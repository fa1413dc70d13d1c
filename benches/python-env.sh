#!/usr/bin/env bash
# A throwaway venv for the peers (not project dependencies): orjson,
# segment-analytics-python and standardwebhooks, plus the callpost wheel scripts/python-env.sh built.
set -euo pipefail
cd "$(dirname "$0")/.."
# --reuse (the smoke run) installs the wheels target/wheels already holds,
# whatever their profile; a measured run builds the shipped ones.
if [ "${1:-}" != "--reuse" ] || ! ls target/wheels/callpost-*.whl >/dev/null 2>&1; then
  bash scripts/python-env.sh
fi
V=target/bench-venv
[ -x "$V/bin/python" ] || python3 -m venv "$V"
"$V/bin/pip" install -q "orjson==3.13.0" "segment-analytics-python==2.4.0" "httpx>=0.27,<1" "standardwebhooks==1.1.0"
"$V/bin/pip" install -q --force-reinstall --no-deps target/wheels/callpost-*.whl
