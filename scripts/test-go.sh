#!/usr/bin/env bash
# The C ABI (capi/) and the Go module (go/): installs Go when it is missing
# (Debian's golang-go, Go 1.19, the oldest Go the module supports), builds
# the C ABI once (debug, in the shared target/), runs the C test against the
# static and the shared library, then gofmt, go vet, go test -race (the
# shared vectors, the drop-ins, the middleware, the relay end to end with
# the analytics-go v2 and v3 example programs, the docs' Go blocks, one
# iteration of every benchmark) and a short fuzz run of FuzzVerify.
#
# scripts/test.sh calls it after its relay build (CALLPOST_RELAY_BIN);
# alone, it builds the relay when CALLPOST_RELAY_BIN is unset. The C ABI's
# header check (capi/tests/header.rs) runs in cargo test --workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Each step shows the seconds since the script started: its budget is about
# three minutes on a fresh 2-core machine.
step() { printf '\n== [%ss] %s\n' "$SECONDS" "$*"; }

step "go: toolchain (Debian's golang-go, installed when go is missing)"
if ! command -v go >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
fi
go version

step "capi: the C ABI's debug build (static and shared library)"
cargo build --locked -p callpost-capi

step "capi: the C test, against the static and against the shared library"
mkdir -p target/capi-test
cflags=(-std=c99 -Wall -Wextra -Werror -pedantic -Icapi/include)
cc "${cflags[@]}" capi/tests/c/test.c target/debug/libcallpost_capi.a -ldl -lpthread -lm \
  -o target/capi-test/test-static
target/capi-test/test-static
cc "${cflags[@]}" capi/tests/c/test.c -Ltarget/debug -lcallpost_capi -o target/capi-test/test-shared
LD_LIBRARY_PATH=target/debug target/capi-test/test-shared

if [ -z "${CALLPOST_RELAY_BIN:-}" ]; then
  step "relay: the build the end-to-end test runs"
  cargo build --locked -p callpost-relay
  export CALLPOST_RELAY_BIN="$root/target/debug/callpost-relay"
fi

step "go: the library the Go tests link (the debug build without its debug info: half the size, linked faster)"
mkdir -p target/capi-go
objcopy --strip-debug target/debug/libcallpost_capi.a target/capi-go/libcallpost_capi.a
export CGO_LDFLAGS="-L$root/target/capi-go"
# Go's build cache does not see a C library change; the library's digest
# among the flags makes a changed one rebuild and relink what uses it.
CGO_CPPFLAGS="-DCALLPOST_CAPI_DIGEST=$(sha256sum target/capi-go/libcallpost_capi.a | cut -c1-16)"
export CGO_CPPFLAGS
# Standard library and cgo only: no module is fetched.
export GOFLAGS=-mod=mod GOPROXY=off GOWORK=off
cd go

step "go: gofmt, go vet"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted"
  exit 1
fi
go vet ./...

step "go: go test -race (vectors, drop-ins, middleware, the relay end to end, the examples and the docs' Go blocks), and one iteration of every benchmark (nothing timed is checked)"
go test -race -count=1 -bench . -benchtime 1x ./... | grep -v '^Benchmark'

step "go: fuzz FuzzVerify for 4 s"
go test -run '^$' -fuzz FuzzVerify -fuzztime 4s ./callpost
echo "go: all tests passed in ${SECONDS}s"
