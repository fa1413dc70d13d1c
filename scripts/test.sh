#!/usr/bin/env bash
# Sets up a fresh machine and runs every test. Idempotent: each tool is
# installed only when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "toolchain"
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
# The static relay (the wheel's and the image's): the musl target, and
# Debian's musl-tools, the C compiler for SQLite and ring.
rustup target list --installed | grep -qx x86_64-unknown-linux-musl || rustup target add x86_64-unknown-linux-musl
if ! command -v musl-gcc >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null
fi
command -v node >/dev/null || { echo "node is required (the JSON.stringify oracle)"; exit 1; }

step "core builds for wasm32-unknown-unknown (no I/O, no std::time, no getrandom)"
cargo build --locked -p callpost-core --target wasm32-unknown-unknown

step "rustfmt, clippy (the workspace with the relay's test clock; the wasm crate also with the features callpost/verify and callpost/client build it with)"
# rustfmt and clippy are installed when missing; if that fails, so does CI.
for c in rustfmt clippy; do
  rustup component list --installed | grep -q "^$c" || rustup component add "$c"
done
cargo fmt --all -- --check
# The relay without its test clock differs by one line (relay/src/cli.rs);
# the wheel step below builds it, and the end-to-end tests check that the
# shipped build has no test clock.
cargo clippy --locked --workspace --all-targets --features callpost-relay/test-clock -- -D warnings
for f in signing client; do
  cargo clippy --locked -p callpost-wasm --no-default-features --features "$f" --target wasm32-unknown-unknown -- -D warnings
done

step "rust tests (unit, shared vectors, properties, node JSON.stringify corpus, simulations; the relay's stores on SQLite and a throwaway Postgres, its listeners, deliveries and layers)"
# The Postgres cluster under target/pg (Debian's postgresql, installed when
# missing), stopped when this script ends, passed or failed.
CALLPOST_PG_URL=$(bash scripts/postgres.sh start)
export CALLPOST_PG_URL
trap 'bash scripts/postgres.sh stop' EXIT
# With the relay's test clock (never in a shipped build): its tests run,
# and a copy of target/debug/callpost-relay is the build the Go and
# end-to-end tests start (the wheel step below builds the shipped relay,
# static and without the test clock, for x86_64-unknown-linux-musl).
# Examples are compiled by clippy above, not again here.
cargo test --locked --workspace --features callpost-relay/test-clock --lib --bins --tests
cargo test --locked --workspace --features callpost-relay/test-clock --doc
mkdir -p target/e2e
cp target/debug/callpost-relay target/e2e/callpost-relay
RELAY_BIN="$PWD/target/e2e/callpost-relay"

# The static relay (x86_64-unknown-linux-musl, profile static-dev: the
# relay wheel's binary and the image's) builds in the background from here,
# niced, in a target directory of its own (cargo locks one per build), while
# the Go tests run; the wheel step waits for it.
mkdir -p target/static
CARGO_TARGET_DIR=target/static nice -n 10 cargo build --locked --profile static-dev -p callpost-relay \
  --bin callpost-relay --target x86_64-unknown-linux-musl >target/static/build.log 2>&1 &
static_build=$!

step "go: the C ABI and the Go module (scripts/test-go.sh: the C test, go vet, go test -race with the relay end to end, a fuzz run; installs golang-go when go is missing)"
CALLPOST_RELAY_BIN="$RELAY_BIN" bash scripts/test-go.sh

step "python: build the wheels (maturin, cargo's dev profile) into target/venv"
# The dev profile reuses what the Rust tests compiled (a minute, where the
# release profiles take seven on 2 cores); scripts/demo.sh and the
# benchmarks build the shipped profiles.
wait "$static_build" || { cat target/static/build.log; exit 1; }
CALLPOST_WHEEL_PROFILE=dev CALLPOST_RELAY_WHEEL_PROFILE=static-dev CALLPOST_RELAY_TARGET_DIR=target/static \
  bash scripts/python-env.sh
PY=target/venv/bin/python

step "packages ready to publish (scripts/check-packages.sh: cargo package of the core and the relay; the wheels' platform tags against auditwheel, twine check)"
bash scripts/check-packages.sh

step "relay image (relay/deploy/image.sh: the static binary the relay wheel holds, and its image, with buildah; skopeo and umoci, for the tests to unpack it)"
missing=()
command -v skopeo >/dev/null || missing+=(skopeo)
command -v umoci >/dev/null || missing+=(umoci)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
CALLPOST_RELAY_IMAGE=$(CARGO_TARGET_DIR=target/static bash relay/deploy/image.sh --profile static-dev)
export CALLPOST_RELAY_IMAGE

step "python tests (shared vectors, real HTTP/HTTPS servers on 127.0.0.1, client, fork, atexit, segment drop-in, receivers in every framework, the docs' code blocks)"
# Two workers (pytest-xdist): the suites wait on real servers, processes
# and timers far more than they compute, so two at once take about half
# the time on 2 cores.
(cd python && "../$PY" -m pytest tests -q -p no:cacheprovider -n 2)

step "relay end-to-end: its Segment SDKs (npm: @segment/analytics-node, @segment/analytics-next, playwright-core) and Debian chromium"
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
(cd relay/tests/e2e/sdk && npm ci --no-audit --no-fund --loglevel=error)

step "relay end-to-end: pg_auto_failover (Debian's pg-auto-failover-cli and the extension for the installed Postgres), for the failover test"
pg_major=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1 | cut -d/ -f5)
if ! command -v pg_autoctl >/dev/null || [ ! -f "/usr/share/postgresql/$pg_major/extension/pgautofailover.control" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pg-auto-failover-cli "postgresql-$pg_major-auto-failover" >/dev/null
fi

step "relay end-to-end tests (the built relay as real processes on SQLite and Postgres: real Segment SDKs, headless Chromium, kill -9, several relays on one database, Postgres restarted mid-run, a Postgres failover under load; its image run from its root filesystem; its systemd unit)"
# CALLPOST_FAILOVER=1: the failover test fails, rather than skips, when a
# part it needs is missing (everything it needs is installed above).
(cd relay/tests/e2e && CALLPOST_FAILOVER=1 CALLPOST_RELAY_BIN="$RELAY_BIN" "../../../$PY" -m pytest . -q -p no:cacheprovider -n 2)

step "python lint and types: ruff format --check, ruff check, mypy --strict (package, tests, the relay's end-to-end tests, typed example, benches' scripts), stubtest"
# Every Python file in the repository, with python/pyproject.toml's settings.
# mypy is handed the tracked .py files of benches/ and scripts/ by name: it
# refuses a directory with none (scripts/ has none today). The relay's
# end-to-end tests are checked apart (each suite has a conftest), with the
# package tests' servers module on the path, as their conftest puts it;
# the benches with the end-to-end tests' relay_config on it, as the relay
# benchmark imports it.
(cd python && "../$PY" -m ruff format --check --config pyproject.toml python tests typecheck ../benches ../scripts ../relay/tests/e2e && \
  "../$PY" -m ruff check --config pyproject.toml python tests typecheck ../benches ../scripts ../relay/tests/e2e && \
  "../$PY" -m mypy --strict -p callpost --cache-dir ../target/mypy && \
  "../$PY" -m mypy --strict tests typecheck $(git ls-files -- ../scripts | grep '\.py$') --cache-dir ../target/mypy && \
  MYPYPATH=../relay/tests/e2e "../$PY" -m mypy --strict $(git ls-files -- ../benches | grep '\.py$') --cache-dir ../target/mypy-benches && \
  MYPYPATH=tests "../$PY" -m mypy --strict ../relay/tests/e2e --cache-dir ../target/mypy-e2e && \
  "../$PY" -m mypy.stubtest callpost._callpost)

step "python: the abi3 wheel imports and passes the shared vectors on CPython 3.10 and 3.13 (3.9 is end-of-life)"
for v in 3.10 3.13; do
  pybin=$(ls -d "$HOME"/.pyenv/versions/"$v".*/bin/python 2>/dev/null | tail -n 1 || true)
  if [ -z "$pybin" ]; then echo "CPython $v is not installed (pyenv); the brief lists 3.9-3.13 on every machine; we support 3.10+"; exit 1; fi
  venv=target/venv-$v
  [ -x "$venv/bin/python" ] || "$pybin" -m venv "$venv"
  "$venv/bin/pip" install -q "pytest>=8" "httpx>=0.27,<1" "standardwebhooks>=1.0,<2"
  "$venv/bin/pip" install -q --force-reinstall --no-deps target/wheels/callpost-*.whl
  (cd python && "../$venv/bin/python" -m pytest tests/test_vectors.py tests/test_api.py -q -p no:cacheprovider)
done

step "js: tools (wasm-bindgen-cli 0.2.130, npm packages)"
if ! wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen 0.2.130"; then
  # Without --locked: the webpki-roots version its lock file names is
  # missing from the registry, and the locked install fails. --debug: it
  # builds in half the time, and processes a module this size in a second.
  cargo install wasm-bindgen-cli --version 0.2.130 --debug
fi
(cd wasm && npm ci --no-audit --no-fund --loglevel=error)

step "js: build the npm package (cargo → wasm-bindgen → npm's wasm-opt), pack it, install the tarball"
(cd wasm && npm run build)
rm -f target/callpost-*.tgz
(cd wasm/pkg && npm pack --silent --pack-destination ../../target >/dev/null)
(cd wasm && npm install --no-save --no-audit --no-fund --loglevel=error ../target/callpost-*.tgz)

step "js: the receivers' runtimes, frameworks and bundlers from npm (Node 22 and 24, Deno, Bun, workerd, Next.js, Vite, webpack, esbuild, Express, Fastify, Hono, attw, publint), with the packed callpost"
# npm install (from the lock file) rather than npm ci: the runtimes list
# other platforms' binaries as optional dependencies, which this registry
# does not serve, and npm ci refuses a lock file without them.
(cd wasm/test/runtimes && npm install --no-save --no-audit --no-fund --loglevel=error && \
  npm install --no-save --no-audit --no-fund --loglevel=error ../../../target/callpost-*.tgz)

step "js tests over the installed package (vectors, JSON.stringify corpus, real HTTP/HTTPS, client, headless Chromium with Vite, webpack and esbuild builds, receivers in every runtime and Next.js) and tsc (node16, bundler, workerd, edge-light)"
(cd wasm && npm test && npm run typecheck)

step "js: the package's shape (publint --strict, @arethetypeswrong/cli)"
(cd wasm && npm run check-package)

step "fuzz: every cargo-fuzz target for 10 s, corpora seeded from testdata/ (installs cargo-fuzz if missing)"
# --dev: unoptimised builds, a minute less to build; 10 s each is a smoke.
bash core/fuzz/run.sh 10 --dev

step "benches: compile the criterion benches and smoke-run the peer comparisons (no timed assertions)"
bash benches/run.sh --smoke >/dev/null

step "demos run"
cargo run --locked -q -p callpost-core --example demo >/dev/null
"$PY" -m callpost demo >/dev/null
"$PY" -m callpost demo --direct >/dev/null
echo "all tests passed"
