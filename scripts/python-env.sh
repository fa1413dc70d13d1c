#!/usr/bin/env bash
# Builds the callpost wheel once and installs it, with the test tools, into a
# virtualenv at target/venv (CPython 3.11). Idempotent: rebuilds the wheel
# every run (maturin's own build cache keeps that fast), reuses the venv.
# CALLPOST_WHEEL_PROFILE=<cargo profile> builds both wheels in that profile
# (scripts/test.sh: dev); unset, each wheel's own (pyproject.toml: the
# extension "release", the relay "relay"), as shipped.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${CALLPOST_PYTHON:-python3}
VENV=target/venv
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
# ruff is held to one minor version: its formatter's style may change with
# each, and `ruff format --check` in scripts/test.sh must mean the same.
# schemathesis is pinned: what it generates and checks changes from release
# to release, and 4.30.1 is the last that runs on CPython 3.10.
"$VENV/bin/pip" install -q "maturin>=1.16,<2" "pytest>=8" "pytest-xdist>=3.6,<4" "mypy>=1.10" "ruff>=0.17,<0.18" "httpx>=0.27,<1" \
  "uvicorn[standard]>=0.30,<1" "psycopg[binary]>=3.2,<4" "segment-analytics-python>=2.3,<3" \
  "flask>=3,<4" "django>=5,<6" "fastapi>=0.115,<1" "starlette>=0.40,<1" "standardwebhooks>=1.0,<2" \
  "schemathesis==4.30.1" "auditwheel>=6.1,<7" "twine>=6,<7"
rm -rf target/wheels
profile_args=
if [ -n "${CALLPOST_WHEEL_PROFILE:-}" ]; then
  profile_args="--profile $CALLPOST_WHEEL_PROFILE"
fi
# --compatibility pypi: the manylinux tag the extension's glibc symbols
# allow (python/pyproject.toml says the same to `maturin build`; a PEP 517
# build through pip would otherwise get the local-only linux_x86_64).
PATH="$PWD/$VENV/bin:$PATH" MATURIN_PEP517_ARGS="$profile_args --compatibility pypi" \
  "$VENV/bin/pip" wheel -q --no-deps --no-build-isolation -w target/wheels ./python
# The relay's wheel: the callpost-relay binary (cargo profile "relay"),
# which `python -m callpost relay` runs. On x86-64 Linux it is the static
# build (x86_64-unknown-linux-musl, as relay/deploy/image.sh builds it: the
# same cargo build, made once), which needs no particular libc, so the
# wheel carries the manylinux2014 and musllinux_1_2 tags together (the
# wheel check in scripts/check-packages.sh agrees with auditwheel's);
# musl-tools is installed when missing (the C compiler for SQLite and ring).
# CALLPOST_RELAY_WHEEL_PROFILE: the relay's wheel in another profile than
# the extension's (scripts/test.sh: static-dev).
relay_args=$profile_args
if [ -n "${CALLPOST_RELAY_WHEEL_PROFILE:-}" ]; then
  relay_args="--profile $CALLPOST_RELAY_WHEEL_PROFILE"
fi
if [ "$(uname -sm)" = "Linux x86_64" ]; then
  command -v musl-gcc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null; }
  rustup target list --installed | grep -qx x86_64-unknown-linux-musl || rustup target add x86_64-unknown-linux-musl
  relay_args="$relay_args --target x86_64-unknown-linux-musl --compatibility manylinux_2_17 musllinux_1_2"
fi
# CALLPOST_RELAY_TARGET_DIR: the relay's wheel from a cargo target directory
# of its own (scripts/test.sh builds the static relay there in the
# background, while other steps hold the default one's lock).
# Absolute: maturin runs cargo from relay/, where a relative one would be
# another directory (and another build).
relay_env=()
if [ -n "${CALLPOST_RELAY_TARGET_DIR:-}" ]; then
  case "$CALLPOST_RELAY_TARGET_DIR" in
    /*) relay_env=("CARGO_TARGET_DIR=$CALLPOST_RELAY_TARGET_DIR") ;;
    *) relay_env=("CARGO_TARGET_DIR=$PWD/$CALLPOST_RELAY_TARGET_DIR") ;;
  esac
fi
env "${relay_env[@]}" PATH="$PWD/$VENV/bin:$PATH" MATURIN_PEP517_ARGS="$relay_args" \
  "$VENV/bin/pip" wheel -q --no-deps --no-build-isolation -w target/wheels ./relay
"$VENV/bin/pip" install -q --force-reinstall --no-deps target/wheels/callpost-*.whl target/wheels/callpost_relay-*.whl
