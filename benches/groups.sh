#!/usr/bin/env bash
# The ceilings of shard groups (relay/examples/bench_groups.rs says what it
# measures): three throwaway Postgres servers under target/bench-groups, one
# of them with a synchronous standby, all on this machine.
#   bash benches/groups.sh [CALLS]     (20,000 calls by default; about 2 minutes)
# Installs Debian's postgresql when no server binaries are found. Run it on a
# quiet machine: the relay, the servers and the receiver share the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS=${1:-20000}
DIR=$PWD/target/bench-groups
bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(bin)" ]; then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
BIN=$(bin)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cargo build --locked --profile relay -p callpost-relay --example bench_groups
stop_all() {
  for n in one two primary standby; do
    [ -f "$DIR/$n/PG_VERSION" ] && as_pg "$BIN/pg_ctl" -D "$DIR/$n" -m immediate -w stop >/dev/null 2>&1 || true
  done
}
trap stop_all EXIT
stop_all
rm -rf "$DIR"
mkdir -p "$DIR"
[ "$(id -u)" = 0 ] && chown postgres "$DIR"
# The relay's own settings for a server: durable commits (the default), room
# for the benchmark's connections.
start() { # name port [extra -c settings]
  local name=$1 port=$2
  shift 2
  as_pg "$BIN/pg_ctl" -D "$DIR/$name" -l "$DIR/$name.log" -w -t 60 start \
    -o "-p $port -k $DIR -c listen_addresses=127.0.0.1 -c max_connections=200 $*" >/dev/null
}
for n in one two primary; do
  as_pg "$BIN/initdb" -D "$DIR/$n" -A trust -U postgres -E UTF8 >/dev/null
done
start one 25551
start two 25552
start primary 25553 "-c synchronous_standby_names=* -c synchronous_commit=on"
# The standby: a base backup of the primary that streams from it (-R writes
# primary_conninfo and standby.signal); the primary's commits wait for it.
as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p 25553 -U postgres -D "$DIR/standby" -R -X stream -c fast >/dev/null
start standby 25554
for _ in $(seq 1 100); do
  as_pg "$BIN/psql" -h 127.0.0.1 -p 25553 -U postgres -Atc \
    "SELECT sync_state FROM pg_stat_replication" 2>/dev/null | grep -qx sync && break
  sleep 0.1
done
echo "standby: $(as_pg "$BIN/psql" -h 127.0.0.1 -p 25553 -U postgres -Atc 'SELECT sync_state FROM pg_stat_replication')"
target/relay/examples/bench_groups "$CALLS" \
  postgresql://postgres@127.0.0.1:25551/postgres \
  postgresql://postgres@127.0.0.1:25553/postgres \
  postgresql://postgres@127.0.0.1:25552/postgres
