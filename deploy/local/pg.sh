#!/usr/bin/env bash
# The private PostgreSQL: `pg.sh start` (initdb on first use, start, create the database, print the DSN),
# `pg.sh stop`, `pg.sh dsn`. Listens only on a unix socket inside its own directory, so it never collides
# with another PostgreSQL on this machine. Runs as $GANTRY_PG_USER because initdb refuses root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u "$GANTRY_PG_USER" -- "$@"; else "$@"; fi
}

# The data directory must be reachable by the postgres user and the socket path short enough (107 bytes).
pg_dir="$GANTRY_PG_DIR"
mkdir -p "$pg_dir"
if [[ $(id -u) -eq 0 ]]; then
  chown "$GANTRY_PG_USER" "$pg_dir"
  if ! runuser -u "$GANTRY_PG_USER" -- test -w "$pg_dir" || ((${#pg_dir} > 80)); then
    pg_dir="/tmp/gantry-pg-$(echo -n "$GANTRY_PG_DIR" | sha256sum | cut -c1-12)"
    mkdir -p "$pg_dir" && chown "$GANTRY_PG_USER" "$pg_dir"
  fi
fi
data="$pg_dir/data"
sock="$pg_dir/run"
dsn="host=$sock port=5432 dbname=$GANTRY_PG_DB user=$GANTRY_PG_USER"

case "${1:-}" in
  start)
    if [[ ! -f "$data/PG_VERSION" ]]; then
      as_pg "$GANTRY_PG_BIN/initdb" -D "$data" -U "$GANTRY_PG_USER" --auth=trust -E UTF8 >"$pg_dir/initdb.log" 2>&1 ||
        { cat "$pg_dir/initdb.log"; exit 1; }
    fi
    as_pg mkdir -p "$sock"
    if ! as_pg "$GANTRY_PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
      as_pg "$GANTRY_PG_BIN/pg_ctl" -D "$data" -l "$pg_dir/server.log" -w -t 60 \
        -o "-c listen_addresses='' -k $sock -p 5432 -c fsync=on -c max_connections=200" start >/dev/null ||
        { tail -20 "$pg_dir/server.log"; exit 1; }
    fi
    if ! as_pg psql -h "$sock" -p 5432 -U "$GANTRY_PG_USER" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname='$GANTRY_PG_DB'" | grep -q 1; then
      as_pg "$GANTRY_PG_BIN/createdb" -h "$sock" -p 5432 -U "$GANTRY_PG_USER" "$GANTRY_PG_DB"
    fi
    echo "$dsn"
    ;;
  stop)
    if [[ -f "$data/PG_VERSION" ]]; then
      as_pg "$GANTRY_PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    ;;
  dsn) echo "$dsn" ;;
  *) echo "usage: pg.sh start|stop|dsn" >&2; exit 2 ;;
esac
