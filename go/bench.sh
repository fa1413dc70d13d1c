#!/usr/bin/env bash
# The Go rows of BENCHMARKS.md: the benchmarks of go/callpost and
# go/analytics/v3 against the C ABI's release build. Each fixture's
# candidates run one after the other, the whole set ROUNDS times (default
# 5, each benchmark BENCHTIME long, default 1s); the table gives the
# medians and the baseline's median over callpost's (above 1: callpost
# takes less CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --release -p callpost-capi
export CGO_LDFLAGS="-L$PWD/target/release" GOFLAGS=-mod=mod GOPROXY=off GOWORK=off
# A changed library must relink (Go's cache does not see it).
CGO_CPPFLAGS="-DCALLPOST_CAPI_DIGEST=$(sha256sum target/release/libcallpost_capi.a | cut -c1-16)"
export CGO_CPPFLAGS
cd go
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT
go test -c -o "$bins/callpost.test" ./callpost
go test -c -o "$bins/analytics.test" ./analytics/v3
for _ in $(seq "${ROUNDS:-5}"); do
  (cd callpost && "$bins/callpost.test" -test.run '^$' -test.bench . -test.benchtime "${BENCHTIME:-1s}")
  (cd analytics/v3 && "$bins/analytics.test" -test.run '^$' -test.bench . -test.benchtime "${BENCHTIME:-1s}")
done | tee /dev/stderr | python3 -c '
import re, statistics, sys
runs = {}
for line in sys.stdin:
    m = re.match(r"Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op", line)
    if m:
        runs.setdefault(m[1], []).append(float(m[2]))
med = {k: statistics.median(v) for k, v in runs.items()}
def us(ns):
    return f"{ns / 1000:.2f} µs" if ns >= 1000 else f"{ns:.0f} ns"
def row(cells):
    print("| " + " | ".join(cells) + " |")
fixtures = lambda kind: list(dict.fromkeys(k.split("/")[1] for k in med if k.startswith(kind + "/")))
print()
row(["enqueue: fixture", "callpost", "plain Go", "ratio"])
row(["---"] * 4)
for f in fixtures("Enqueue"):
    c, b = med[f"Enqueue/{f}/callpost"], med[f"Enqueue/{f}/baseline"]
    row([f"`{f}`", us(c), us(b), f"{b / c:.2f}"])
print()
row(["verify: fixture", "callpost", "callpost + decode", "plain Go", "ratio", "ratio with decode"])
row(["---"] * 6)
for f in fixtures("Verify"):
    c, d, b = (med[f"Verify/{f}/{k}"] for k in ("callpost", "callpost+decode", "baseline"))
    row([f"`{f}`", us(c), us(d), us(b), f"{b / c:.2f}", f"{b / d:.2f}"])
print()
print("one cgo crossing:", us(med["CgoCrossing"]))
'
