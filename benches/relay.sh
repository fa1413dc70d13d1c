#!/usr/bin/env bash
# The relay benchmark (benches/relay/bench.py says what it measures): wrk and
# bench_load send, the native relay stores and delivers, a Node receiver
# verifies; a native echo server and the receiver alone are the ceilings,
# the Python relay's last numbers (BENCHMARKS.md) the before.
#   bash benches/relay.sh              full run (20 s a step; about 6 minutes)
#   bash benches/relay.sh --smoke      every step for 2 s (about a minute)
#   bash benches/relay.sh --postgres   also Postgres (scripts/postgres.sh), 1 and 2 relays
#   bash benches/relay.sh --profile    also the relay's CPU by part (Linux perf)
#   bash benches/relay.sh --static     also the static build and the image (relay/deploy/image.sh) on SQLite
#   bash benches/relay.sh --sealed     also SQLite with the relay sealing what it stores (a secret key)
# CALLPOST_BENCH_RELAY=path measures another build of the relay.
# CALLPOST_BENCH_SECONDS sets the length of a step of the full run.
# Installs wrk (Debian) when missing. Run it on a quiet machine: every
# process shares the same cores.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
case " $* " in
  *" --profile "*)
    if ! command -v perf >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
    fi ;;
esac
# The relay as it ships (profile "relay"), and the benchmark's own echo
# server and open-loop sender, built with it.
cargo build --locked --profile relay -p callpost-relay \
  --bin callpost-relay --example bench_echo --example bench_load --example bench_answer \
  --example bench_destinations --example bench_sealing
case " $* " in
  *" --static "*) bash relay/deploy/image.sh >/dev/null ;;
esac
# The receiver's Node environment (callpost's npm package, for
# verifyRequest).
bash benches/node-env.sh >/dev/null
python3 benches/relay/bench.py "$@"
# Answers whose body comes in a second write, beside answers in one: the
# ratio is the cost of the wait (x1 when none).
echo "== answers written apart (relay/examples/bench_answer.rs)"
case " $* " in
  *" --smoke "*) target/relay/examples/bench_answer 200 ;;
  *) target/relay/examples/bench_answer 2000 ;;
esac
# Three destinations per source beside one: the same calls, SQLite FULL,
# deliveries per second of each and their ratio.
echo "== three destinations per source (relay/examples/bench_destinations.rs)"
case " $* " in
  *" --smoke "*) target/relay/examples/bench_destinations 500 ;;
  *) target/relay/examples/bench_destinations 5000 ;;
esac
# Sealed at rest beside plain: the same calls, SQLite FULL, stored/s and
# delivered/s of each and their ratio.
echo "== sealed at rest (relay/examples/bench_sealing.rs)"
case " $* " in
  *" --smoke "*) target/relay/examples/bench_sealing 1000 1 ;;
  *) target/relay/examples/bench_sealing 10000 3 ;;
esac
