#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the relay's tests and benchmarks, under
# target/pg (CALLPOST_PG_DIR), on a private port (CALLPOST_PG_PORT, 25432:
# below Linux's ephemeral range, 32768-60999, where an outgoing connection
# of the tests could hold the port when the server binds it);
# no system service is used or started.
#   bash scripts/postgres.sh start   prints the URL of its "postgres" database
#   bash scripts/postgres.sh stop
# Installs Debian's postgresql package when no server binaries are found.
# Runs the server as the "postgres" user when started as root (initdb
# refuses root).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${CALLPOST_PG_PORT:-25432}
DIR=${CALLPOST_PG_DIR:-$PWD/target/pg}
bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(bin)" ]; then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
BIN=$(bin)
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "${1:-}" in
  start)
    mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$DIR"
    if [ ! -f "$DIR/data/PG_VERSION" ]; then
      as_pg "$BIN/initdb" -D "$DIR/data" -A trust -U postgres --no-sync -E UTF8 >"$DIR/initdb.log"
    fi
    if ! as_pg "$BIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
      as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start \
        -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c max_connections=300" >/dev/null
    fi
    echo "postgresql://postgres@127.0.0.1:$PORT/postgres"
    ;;
  stop)
    if [ -f "$DIR/data/PG_VERSION" ]; then
      as_pg "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
