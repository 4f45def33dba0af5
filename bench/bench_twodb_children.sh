#!/usr/bin/env bash
# Expand-mode children between two databases (docs/migrating-children.md#two-databases): what the
# passes over the child cost, beside a baseline binary, in one run.
#
#   V7FILL=build/v7fill V7FILL_BASE=/path/to/old/v7fill bench/bench_twodb_children.sh
#
# One throwaway cluster; per binary (V7FILL_BASE first, when given) a source database (a parent
# of BENCH_TC_PARENT rows, default 20000; a child of BENCH_TC_CHILD rows, default 1000000,
# indexed on its key) and a target database; `v7fill migrate --source` (copy, fill), then:
#   1. `migrate --follow` while a writer makes BENCH_TC_FOLLOW_S * 10 (default 300) writes, each
#      a child row of an existing parent inserted and an existing child row moved to another
#      parent, then sleeps 0.1 s (each psql call adds its own time); then SIGINT.  Prints the passes' summary line (their count, time in all and the
#      longest), how many of the rows written are still without order_id_uuid, and how many
#      rows name a parent other than their order_id's (stale: a key changed, its uuid not),
#      there and again after the switch.
#   2. `migrate --switch`, then BENCH_TC_WRITES (default 1000) parents written in the target,
#      each with a child written on the source with only order_id_uuid, `migrate --reverse`, as
#      many again, and `migrate --switch` back: its "lock held" line and how many of those
#      children are still without order_id.  A second child, payments (BENCH_TC_PAY rows,
#      default 100000, order_id NOT NULL), has BENCH_TC_PMOVES (default 10000) rows moved to
#      another parent by order_id_uuid alone after the switch: how many name another parent
#      by order_id than by order_id_uuid after switching back (stale).
#   3. What the child's trigger costs the application: an UPDATE moving BENCH_TC_MOVES rows
#      (default 100000) to another parent, and one naming order_id without changing it (as an
#      ORM writes every column), each timed with the table's triggers enabled and disabled in
#      turn, three times (the baseline binary makes no trigger: both are its figure).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
V7FILL=${V7FILL:-$root/build/v7fill}
PARENT=${BENCH_TC_PARENT:-20000}
CHILD=${BENCH_TC_CHILD:-1000000}
FOLLOW_S=${BENCH_TC_FOLLOW_S:-30}
WRITES=${BENCH_TC_WRITES:-1000}
MOVES=${BENCH_TC_MOVES:-100000}
PAY=${BENCH_TC_PAY:-100000}
PMOVES=${BENCH_TC_PMOVES:-10000}
eval "$(PGTMP_PORT=${BENCH_TC_PORT:-54352} "$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

writes() { # writes SRC TGT TAG: WRITES parents in the target, a child each on the source by uuid
    local i at
    for i in $(seq 1 "$WRITES"); do
        at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
        echo "INSERT INTO orders_v7 (id, created_at, note) VALUES ('$("$V" uuid new --at "$at")', '$at', '$3');"
    done | q -d "$2" >/dev/null
    q -d "$2" -c "SELECT id FROM orders_v7 WHERE note = '$3'" |
        sed "s/.*/INSERT INTO items (order_id_uuid, qty) VALUES ('&', -1);/" | q -d "$1" >/dev/null
}

map_copy() { # map_copy SRC TGT: the target's map copied into the source as map_copy
    q -d "$1" -c "SET client_min_messages = warning; DROP TABLE IF EXISTS map_copy; CREATE TABLE map_copy (legacy_id bigint PRIMARY KEY, id uuid)"
    q -d "$2" -c "COPY orders_v7_id_map TO STDOUT" | q -d "$1" -c "COPY map_copy FROM STDIN"
}

stale() { # stale SRC TGT [TABLE]: child rows whose order_id_uuid is not their order_id's parent's id
    map_copy "$1" "$2"
    q -d "$1" -c "SELECT count(*) FROM ${3:-items} c JOIN map_copy m ON m.legacy_id = c.order_id
                  WHERE c.order_id_uuid <> m.id"
}

run() { # run LABEL BINARY
    local label=$1 V=$2 src="src_$1" tgt="tgt_$1" fpid n0
    psql -X -q -d postgres -c "CREATE DATABASE $src" -c "CREATE DATABASE $tgt" >/dev/null
    q -d "$src" -c "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
        INSERT INTO orders (created_at, note)
          SELECT timestamptz '2024-01-01' + g * interval '17 minutes', 'n' || g FROM generate_series(1, $PARENT) g;
        CREATE TABLE items (id serial PRIMARY KEY, order_id bigint, qty int);
        INSERT INTO items (order_id, qty) SELECT g % $PARENT + 1, g FROM generate_series(1, $CHILD) g;
        CREATE INDEX ON items (order_id);
        CREATE TABLE payments (id serial PRIMARY KEY, order_id bigint NOT NULL, paid int);
        INSERT INTO payments (order_id, paid) SELECT g % $PARENT + 1, g FROM generate_series(1, $PAY) g;
        ANALYZE orders, items, payments"
    export PGDATABASE=$tgt
    "$V" migrate --source "dbname=$src" --from public.orders --key id --time-column created_at \
        --into orders_v7 --child 'public.items(order_id)' --child 'public.payments(order_id)' \
        >"$label.migrate.log" 2>&1
    n0=$(q -d "$src" -c "SELECT max(id) FROM items")
    "$V" migrate --source "dbname=$src" --from public.orders --key id --time-column created_at \
        --into orders_v7 --child 'public.items(order_id)' --child 'public.payments(order_id)' \
        --follow >"$label.follow.log" 2>&1 &
    fpid=$!
    sleep 2
    for _ in $(seq 1 $((FOLLOW_S * 10))); do
        q -d "$src" -c "INSERT INTO items (order_id, qty) VALUES ((random() * ($PARENT - 1))::int + 1, -9);
            UPDATE items SET order_id = (random() * ($PARENT - 1))::int + 1
             WHERE id = (random() * ($CHILD - 1))::int + 1"
        sleep 0.1
    done
    kill -INT "$fpid"; wait "$fpid" || true
    echo "$label follow: $(grep -o 'children during --follow.*' "$label.follow.log" || echo 'no passes during --follow')"
    echo "$label follow: rows written during --follow still without order_id_uuid: $(q -d "$src" -c "SELECT count(*) FILTER (WHERE order_id_uuid IS NULL) || ' of ' || count(*) FROM items WHERE id > $n0")"
    echo "$label follow: child rows naming another parent than their order_id's (stale) at the stop: $(stale "$src" "$tgt")"
    "$V" migrate --into orders_v7 --switch >"$label.switch.log" 2>&1
    echo "$label switch: stale child rows after the switch: $(stale "$src" "$tgt")"
    map_copy "$src" "$tgt"
    t0=$(date +%s%N)
    q -d "$src" -c "UPDATE payments p SET order_id_uuid = m.id FROM map_copy m
                    WHERE m.legacy_id = p.order_id % $PARENT + 1 AND p.id <= $PMOVES"
    echo "$label payments: $PMOVES moved by order_id_uuid alone after the switch in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    writes "$src" "$tgt" before
    "$V" migrate --into orders_v7 --reverse >"$label.reverse.log" 2>&1
    writes "$src" "$tgt" after
    "$V" migrate --into orders_v7 --switch >"$label.back.log" 2>&1
    echo "$label switch back: $(grep -o 'lock held [0-9]* ms[^;]*; [0-9]* child rows got their legacy key from the map' "$label.back.log" || grep -o 'lock held [0-9]* ms[^;]*' "$label.back.log" | head -1)"
    echo "$label switch back: children written with only order_id_uuid still without order_id: $(q -d "$src" -c "SELECT count(*) FILTER (WHERE order_id IS NULL) || ' of ' || count(*) FROM items WHERE qty = -1")"
    echo "$label switch back: payments (order_id NOT NULL) naming another parent by order_id than by order_id_uuid: $(stale "$src" "$tgt" payments) of $PMOVES moved"
    for k in 1 2 3; do
        for trig in ENABLE DISABLE; do
            q -d "$src" -c "ALTER TABLE items $trig TRIGGER USER" -c "VACUUM items"
            t0=$(date +%s%N)
            q -d "$src" -c "UPDATE items SET order_id = order_id % $PARENT + 1 WHERE id <= $MOVES"
            echo "$label moves: UPDATE of order_id on $MOVES child rows, user triggers ${trig}D ($k of 3): $(( ($(date +%s%N) - t0) / 1000000 )) ms"
            t0=$(date +%s%N)
            q -d "$src" -c "UPDATE items SET order_id = order_id, qty = qty + 1 WHERE id <= $MOVES"
            echo "$label same: UPDATE naming order_id unchanged on $MOVES child rows, user triggers ${trig}D ($k of 3): $(( ($(date +%s%N) - t0) / 1000000 )) ms"
        done
    done
    q -d "$src" -c "ALTER TABLE items ENABLE TRIGGER USER"
    # Slots are the cluster's: the next binary's migration makes them again under the same names.
    q -d postgres -c "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots
                      WHERE database IN ('$src', '$tgt') AND NOT active" >/dev/null
    unset PGDATABASE
}

echo "== two databases, a child of $CHILD rows, a parent of $PARENT; $(date -u +%FT%TZ), $(nproc) cores"
cd "$(mktemp -d)"
[ -z "${V7FILL_BASE:-}" ] || run base "$V7FILL_BASE"
run new "$V7FILL"
