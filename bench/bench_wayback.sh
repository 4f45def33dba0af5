#!/usr/bin/env bash
# The way back's rate (`migrate --reverse`), in one database and between two, beside a baseline
# binary when given.
#
#   V7FILL=build/v7fill V7FILL_BASE=/path/to/old/v7fill bench/bench_wayback.sh
#
# One throwaway cluster with fsync and synchronous_commit on (a commit costs what it costs in
# production).  BENCH_WB_ROUNDS (default 2) rounds; in each, per binary (V7FILL_BASE first) and
# per layout (one database, then two), fresh databases: orders with BENCH_WB_ROWS rows (default
# 100000) migrated and switched, then the application's changes in the UUIDv7 table, in one
# transaction: BENCH_WB_NEW new rows (default 20000, a UUIDv7 minted at each row's time) and an
# update of every tenth row; then `migrate --reverse` until caught up, timed.  Prints the
# changes applied per second per run, then per binary and layout the median.  A baseline binary
# without the two-database way back prints "refused" there.
#
# BENCH_WB_EACH=1: the application's transaction updates each new row right after inserting it
# (as an ORM that inserts, then sets a field), instead of the update of every tenth row: each
# update is read ahead with its row's insert, whose map row the look-up ahead cannot find.
#
# BENCH_WB_NULL=1: between two databases, the new rows are inserted with legacy_id NULL (as an
# ORM that writes every column sends them), so the way back gives each the next value of the
# target's sequence; in one database (legacy_id NOT NULL) they keep the default.
#
# BENCH_WB_CHILD=1 adds a --child-mode migrate child, items (BENCH_WB_ROWS rows, one per order):
# the application's transaction also inserts an item for each new order, by order_id_uuid
# alone, and updates every tenth item's quantity; the way back translates each item's
# order_id_uuid through the parent's map (in two databases, looked up on the target
# ahead, in one query per group of changes read ahead).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
V7FILL=${V7FILL:-$root/build/v7fill}
ROUNDS=${BENCH_WB_ROUNDS:-2}
ROWS=${BENCH_WB_ROWS:-100000}
NEW=${BENCH_WB_NEW:-20000}
CHILD=${BENCH_WB_CHILD:-0}
EACH=${BENCH_WB_EACH:-0}
NULLKEY=${BENCH_WB_NULL:-0}
eval "$("$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR" >/dev/null' EXIT
psql -qX -d postgres -c "ALTER SYSTEM SET fsync = on" -c "ALTER SYSTEM SET synchronous_commit = on" \
    -c "SELECT pg_reload_conf()" >/dev/null
binaries=("$V7FILL")
[ -z "${V7FILL_BASE:-}" ] || binaries=("$V7FILL_BASE" "$V7FILL")
declare -A rates

# one_run BIN LAYOUT: prints the changes applied per second (or "refused")
one_run() {
    local bin=$1 layout=$2 src=wb_tgt new_table=orders new_child=items t0 t1 out
    for db in wb_tgt wb_src; do
        psql -qX -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null
        psql -qX -d postgres -c "CREATE DATABASE $db" >/dev/null
    done
    psql -qX -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots" >/dev/null
    export PGDATABASE=wb_tgt
    [ "$layout" = one ] || { src=wb_src; new_table=orders_v7; new_child=items_v7; }
    psql -qX -v ON_ERROR_STOP=1 -d "$src" -c "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
        INSERT INTO orders (created_at, note)
          SELECT timestamptz '2025-01-01' + g * interval '1 minute', 'n' FROM generate_series(1, $ROWS) g;
        CREATE TABLE items (id bigserial PRIMARY KEY, order_id bigint, created_at timestamptz NOT NULL, qty int);
        INSERT INTO items (order_id, created_at, qty)
          SELECT g, timestamptz '2025-01-01' + g * interval '1 minute', g FROM generate_series(1, $ROWS) g
          WHERE $CHILD = 1" >/dev/null
    local srcopt=() childopt=()
    [ "$layout" = one ] || srcopt=(--source "dbname=$src")
    [ "$CHILD" != 1 ] || childopt=(--child 'public.items(order_id)' --child-mode migrate)
    "$bin" migrate "${srcopt[@]}" --from public.orders --key id --time-column created_at --into orders_v7 \
        "${childopt[@]}" >/dev/null 2>&1
    "$bin" migrate --into orders_v7 --switch >/dev/null 2>&1
    local lcol="" lval=""
    [ "$NULLKEY" != 1 ] || [ "$layout" = one ] || { lcol=", legacy_id"; lval=", NULL"; }
    local app="INSERT INTO $new_table (id$lcol, created_at, note)
        SELECT app_uuid7(t)$lval, t, 'new' FROM (SELECT timestamptz '2025-02-01' + g * interval '1 second' t
                                            FROM generate_series(1, $NEW) g) s;
      UPDATE $new_table SET note = 'changed' WHERE legacy_id % 10 = 0;"
    [ "$EACH" != 1 ] || app="DO \$\$ DECLARE u uuid; BEGIN
        FOR g IN 1..$NEW LOOP
          INSERT INTO $new_table (id$lcol, created_at, note)
            VALUES (app_uuid7(timestamptz '2025-02-01' + g * interval '1 second')$lval,
                    timestamptz '2025-02-01' + g * interval '1 second', 'new') RETURNING id INTO u;
          UPDATE $new_table SET note = 'new' || g WHERE id = u;
        END LOOP; END \$\$;"
    psql -qX -v ON_ERROR_STOP=1 -c "CREATE FUNCTION app_uuid7(at timestamptz) RETURNS uuid LANGUAGE sql AS \$\$
        SELECT (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7'
                || substr(md5(random()::text), 1, 3) || to_hex(8 + floor(random() * 4)::int)
                || substr(md5(random()::text), 1, 15))::uuid \$\$;
      BEGIN;
      $app
      COMMIT" >/dev/null
    [ "$CHILD" != 1 ] || psql -qX -v ON_ERROR_STOP=1 -c "BEGIN;
      INSERT INTO $new_child (id, order_id_uuid, created_at, qty)
        SELECT app_uuid7(created_at), id, created_at, -1 FROM $new_table WHERE note LIKE 'new%';
      UPDATE $new_child SET qty = qty + 1 WHERE legacy_id % 10 = 0;
      COMMIT" >/dev/null
    t0=$(date +%s%N)
    if ! out=$("$bin" migrate --into orders_v7 --reverse 2>&1); then
        echo "refused"
        return
    fi
    t1=$(date +%s%N)
    local n
    n=$(sed -n 's/.*inserted=\([0-9]*\) updated=\([0-9]*\) deleted=\([0-9]*\).*/\1 \2 \3/p' <<<"$out" | awk '{print $1 + $2 + $3}')
    [ "$n" -ge $((NEW * (1 + CHILD * 2))) ] || { echo "FAIL: the way back applied $n changes: $out" >&2; exit 1; }
    if [ "$EACH" = 1 ]; then
        local unset
        unset=$(psql -qX -At -d "$src" -c "SELECT count(*) FROM orders_legacy WHERE note = 'new'")
        [ "$unset" = 0 ] || { echo "FAIL: $unset new orders lack their update in the legacy table" >&2; exit 1; }
    fi
    if [ "$CHILD" = 1 ]; then
        local stale
        stale=$(psql -qX -At -d "$src" -c "SELECT count(*) FROM items_legacy i JOIN orders_legacy o ON o.id = i.order_id WHERE i.qty = -1 AND o.note NOT LIKE 'new%'")
        [ "$stale" = 0 ] || { echo "FAIL: $stale new items name an old order in the legacy table" >&2; exit 1; }
    fi
    awk -v n="$n" -v ns=$((t1 - t0)) 'BEGIN { printf "%d\n", n / (ns / 1e9) }'
}

for round in $(seq 1 "$ROUNDS"); do
    for bin in "${binaries[@]}"; do
        for layout in one two; do
            r=$(one_run "$bin" "$layout")
            echo "round $round  $(basename "$(dirname "$(dirname "$bin")")")/$(basename "$bin")  $layout database(s): $r changes/s"
            rates["$bin|$layout"]+="$r "
        done
    done
done
echo "median changes/s (each run: $NEW inserts and $([ "$EACH" = 1 ] && echo "an update of each right after it" || echo "an update of every tenth row"), one source transaction$([ "$CHILD" != 1 ] || echo "; then $NEW items and an update of every tenth, another"):"
for bin in "${binaries[@]}"; do
    for layout in one two; do
        printf '  %-40s %-4s %s\n' "$bin" "$layout" \
            "$(tr ' ' '\n' <<<"${rates["$bin|$layout"]}" | grep -v '^$' | sort -n |
               awk '{a[NR]=$1} END {if (a[1] == "refused" || NR == 0) print "refused"; else print a[int((NR + 1) / 2)]}')"
    done
done
