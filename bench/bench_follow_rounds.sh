#!/usr/bin/env bash
# What `migrate --reverse --follow` with a --child-mode migrate child costs the server while it
# follows a steady writer, beside a baseline binary (docs/migrating-children.md).
#
#   V7FILL=build/v7fill V7FILL_BASE=/path/to/old/v7fill bench/bench_follow_rounds.sh
#
# One throwaway cluster; per binary (V7FILL_BASE first, when given) its own database: a parent
# of BENCH_FR_PARENT rows (default 20000) and a child of BENCH_FR_CHILD (default 200000), then
# `v7fill migrate --child-mode migrate`, `--switch`, and after the switch a writer inserting
# BENCH_FR_RATE parents a second (default 50, a child each, by order_id_uuid only) into the new
# tables for BENCH_FR_SECONDS (default 20) while `migrate --reverse --follow` runs; then SIGINT.
# Prints the server's CPU time over that window (every backend and walsender, the exited ones
# too: the postmaster's reaped children plus the live ones), the walsender processes started
# for the two way-back slots (from the server log), and the rows the legacy tables got.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
V7FILL=${V7FILL:-$root/build/v7fill}
PARENT=${BENCH_FR_PARENT:-20000}
CHILD=${BENCH_FR_CHILD:-200000}
RATE=${BENCH_FR_RATE:-50}
SECS=${BENCH_FR_SECONDS:-20}
eval "$(PGTMP_PORT=${BENCH_FR_PORT:-54354} "$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
psql -X -q -d postgres -c "ALTER SYSTEM SET log_replication_commands = on" -c "SELECT pg_reload_conf()" >/dev/null
postmaster=$(head -1 "$PGTMP_DIR/data/postmaster.pid")
tck=$(getconf CLK_TCK)

# server_ticks: CPU ticks of the postmaster's exited children and of its live ones
server_ticks() {
    local t s
    s=$(awk '{print $16 + $17}' "/proc/$postmaster/stat")
    for t in $(pgrep -P "$postmaster"); do
        s=$(( s + $(awk '{print $14 + $15}' "/proc/$t/stat" 2>/dev/null || echo 0) ))
    done
    echo "$s"
}

run() { # run NAME BINARY
    local db=bench_$1 into=orders_$1 ct=items_$1 t0 t1 w f log0 starts
    psql -X -q -d postgres -c "CREATE DATABASE $db" >/dev/null
    q -d "$db" -c "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
        INSERT INTO orders (created_at, note)
          SELECT now() - g * interval '1 minute', 'n' || g FROM generate_series(1, $PARENT) g;
        CREATE TABLE $ct (id serial PRIMARY KEY, order_id bigint, qty int, created_at timestamptz NOT NULL);
        INSERT INTO $ct (order_id, qty, created_at)
          SELECT g % $PARENT + 1, g, now() - g * interval '5 seconds' FROM generate_series(1, $CHILD) g;
        CREATE INDEX ON $ct (order_id); ANALYZE orders, $ct"
    PGDATABASE=$db "$2" -q migrate --from public.orders --key id --time-column created_at --into "$into" \
        --child "public.$ct(order_id)" --child-mode migrate >"$db.run.log" 2>&1 || { cat "$db.run.log"; exit 1; }
    PGDATABASE=$db "$2" -q migrate --into "$into" --switch >"$db.switch.log" 2>&1 || { cat "$db.switch.log"; exit 1; }
    # the writer: RATE parents a second, a child each by its parent's uuid
    (
        end=$(( $(date +%s) + SECS + 3 ))
        while [ "$(date +%s)" -lt "$end" ]; do
            q -d "$db" -c "WITH p AS (INSERT INTO orders (id, created_at, note)
                SELECT (lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7'
                        || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid,
                       now(), 'w' FROM generate_series(1, $RATE) RETURNING id, created_at)
                INSERT INTO $ct (id, order_id_uuid, qty, created_at)
                SELECT (lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7'
                        || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid,
                       id, 1, created_at FROM p" 2>/dev/null || true
            sleep 1
        done
    ) & w=$!
    sleep 2
    log0=$(wc -l <"$PGTMP_DIR/server.log")
    t0=$(server_ticks)
    PGDATABASE=$db "$2" migrate --into "$into" --reverse --follow >"$db.follow.log" 2>&1 & f=$!
    sleep "$SECS"
    kill -INT "$f"
    wait "$f" || { echo "$1: --follow exited $?"; tail -5 "$db.follow.log"; }
    t1=$(server_ticks)
    wait "$w" || true
    starts=$(tail -n +"$((log0 + 1))" "$PGTMP_DIR/server.log" | grep -c 'starting logical decoding for slot "v7fill_[a-z_0-9]*_rev"' || true)
    echo "$1: ${SECS} s of --reverse --follow, writer $RATE parents + $RATE children a second:" \
         "server CPU $(( (t1 - t0) * 1000 / tck )) ms, way-back streams started: $starts," \
         "legacy rows $(q -d "$db" -c "SELECT (SELECT count(*) FROM orders_legacy) || ' parents, ' || (SELECT count(*) FROM ${ct}_legacy) || ' children'")"
}

cd "$(mktemp -d)"
echo "logs in $PWD"
echo "parent $PARENT rows, child $CHILD rows, --child-mode migrate"
[ -z "${V7FILL_BASE:-}" ] || run base "$V7FILL_BASE"
run new "$V7FILL"
