#!/usr/bin/env bash
# Checks that the packages are ready to publish, and publishes nothing.
#
# - Crates: `cargo package` of callpost-core and callpost-relay, the relay
#   against the packaged core (a local registry, as `cargo publish` of the
#   two in one command does); every file the relay compiles in (console,
#   migrations, OpenAPI) is inside its crate. Without the verifying build:
#   it compiles the relay once more from the packages (minutes on 2
#   cores); `cargo package -p callpost-core -p callpost-relay --locked`
#   runs it.
# - Wheels (target/wheels, scripts/python-env.sh builds them): platform
#   tags that auditwheel agrees with (scripts/check_wheels.py), and
#   `twine check` (the metadata and README PyPI renders).
# The npm package is checked where it is packed (scripts/test.sh: publint
# --strict, @arethetypeswrong/cli).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-target/venv/bin/python}

# --allow-dirty: the tree as it is (a release is packaged from a clean tag).
cargo package --locked --allow-dirty --no-verify -p callpost-core -p callpost-relay
listed=$(cargo package --locked --allow-dirty --list -p callpost-relay)
for f in console/index.html openapi.json migrations/sqlite/0001_init.sql migrations/postgres/0001_init.sql; do
  grep -qx "$f" <<<"$listed" || { echo "check-packages: the relay's crate lacks $f" >&2; exit 1; }
done
"$PY" scripts/check_wheels.py target/wheels/*.whl
"$PY" -m twine check --strict target/wheels/*.whl
