#!/usr/bin/env bash
# The switch's lock-held time with a large expand-mode child, beside a baseline binary, and the
# cost of a map row insert with the map's trigger (docs/migrating-children.md).
#
#   V7FILL=build/v7fill V7FILL_BASE=/path/to/old/v7fill bench/bench_switch_children.sh
#
# One throwaway cluster; per binary (V7FILL_BASE first, when given) its own database: a parent
# of BENCH_SC_PARENT rows (default 20000), a child of BENCH_SC_CHILD rows (default 1000000,
# indexed on its key) of which BENCH_SC_NULL (default 300) are orphans and as many have a NULL
# key (their <fk>_uuid stays NULL); `v7fill migrate` (copy, fill, foreign key), then
# `migrate --switch` without a writer; prints the switch's "lock held" line.  With V7FILL only:
# before the switch, a transaction writing BENCH_SC_MAP (default 20000) map rows and their new
# rows, each with a child inserted before it (NULL uuid), timed with the map's trigger and with
# it disabled (BENCH_SC_MAP=0: not; then both binaries run the same steps).
#
# BENCH_SC_MODE=migrate (default expand): --child-mode migrate, the child its own UUIDv7 table
# with its own slot; no map-cost step; just before the switch, each v7fill slot's lag
# (pg_current_wal_lsn() - restart_lsn, and - confirmed_flush_lsn).
#
# BENCH_SC_BACK=1 (either mode): then the way back and the switch back: after the switch,
# BENCH_SC_WRITES (default 1000) parent rows with a child each inserted into the new tables, `migrate
# --reverse` (caught up), as many again, and `migrate --switch` (back): its "lock held" line.
# BENCH_SC_HELD=1 (with BENCH_SC_BACK=1): the second batch is written in a transaction held open
# until the switch back waits for its lock, so the way back applies it under the lock (and the
# UUIDv7 child's key fill runs there: the rows it wrote, or the whole child before that fill was
# narrowed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
V7FILL=${V7FILL:-$root/build/v7fill}
PARENT=${BENCH_SC_PARENT:-20000}
CHILD=${BENCH_SC_CHILD:-1000000}
NULLS=${BENCH_SC_NULL:-300}
MAPROWS=${BENCH_SC_MAP:-20000}
MODE=${BENCH_SC_MODE:-expand}
BACK=${BENCH_SC_BACK:-0}
WRITES=${BENCH_SC_WRITES:-1000}
HELD=${BENCH_SC_HELD:-0}
case "$MODE" in expand|migrate) ;; *) echo "BENCH_SC_MODE: expand or migrate" >&2; exit 2;; esac
eval "$(PGTMP_PORT=${BENCH_SC_PORT:-54351} "$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
ms() { date +%s%3N; }

setup() { # setup DB CHILD
    local ct=$2
    psql -X -q -d postgres -c "CREATE DATABASE $1" >/dev/null
    q -d "$1" -c "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
        INSERT INTO orders (created_at, note)
          SELECT timestamptz '2024-01-01' + g * interval '17 minutes', 'n' || g FROM generate_series(1, $PARENT) g;
        CREATE TABLE $ct (id serial PRIMARY KEY, order_id bigint, qty int);
        INSERT INTO $ct (order_id, qty) SELECT g % $PARENT + 1, g FROM generate_series(1, $CHILD - 2 * $NULLS) g;
        INSERT INTO $ct (order_id, qty) SELECT 900000000 + g, 0 FROM generate_series(1, $NULLS) g;
        INSERT INTO $ct (order_id, qty) SELECT NULL, 0 FROM generate_series(1, $NULLS) g;
        CREATE INDEX ON $ct (order_id); ANALYZE orders, $ct"
    [ "$MODE" = expand ] || q -d "$1" -c "ALTER TABLE $ct ADD COLUMN created_at timestamptz NOT NULL
        DEFAULT timestamptz '2024-01-01'; ALTER TABLE $ct ALTER COLUMN created_at DROP DEFAULT"
}

map_cost() { # map_cost DB INTO: the map rows' transaction with the trigger, then without
    local db=$1 into=$2 trg t0 with without
    trg=$(q -d "$db" -c "SELECT tgname FROM pg_trigger WHERE tgrelid = '${into}_id_map'::regclass AND tgname LIKE 'v7fill\_child\_%'")
    [ -n "$trg" ] || { echo "no trigger on ${into}_id_map" >&2; exit 1; }
    q -d "$db" -c "CREATE TABLE nw AS SELECT 800000000 + row_number() OVER () AS legacy_id,
                          (left(id::text, 24) || left(md5(id::text), 12))::uuid AS id, created_at
                     FROM $into LIMIT $MAPROWS"
    for mode in with without; do
        q -d "$db" -c "INSERT INTO items (order_id, qty) SELECT legacy_id, -1 FROM nw"
        [ "$mode" = with ] || q -d "$db" -c "ALTER TABLE ${into}_id_map DISABLE TRIGGER \"$trg\""
        t0=$(ms)
        q -d "$db" -c "BEGIN; INSERT INTO ${into}_id_map SELECT legacy_id, id FROM nw;
                       INSERT INTO $into (legacy_id, id, created_at) SELECT legacy_id, id, created_at FROM nw; COMMIT"
        eval "$mode=$(( $(ms) - t0 ))"
        [ "$mode" = with ] || q -d "$db" -c "ALTER TABLE ${into}_id_map ENABLE TRIGGER \"$trg\""
        [ "$mode" = without ] || [ "$(q -d "$db" -c "SELECT count(*) FROM items WHERE qty = -1 AND order_id_uuid IS NULL")" = 0 ] \
            || { echo "the trigger did not set the children" >&2; exit 1; }
        q -d "$db" -c "DELETE FROM items WHERE qty = -1; DELETE FROM ${into}_id_map WHERE legacy_id > 800000000;
                       DELETE FROM $into WHERE legacy_id > 800000000"
    done
    q -d "$db" -c "DROP TABLE nw"
    echo "map rows: $MAPROWS in one transaction with their new rows, each with a child: ${with} ms with the trigger, ${without} ms without ($(( (with - without) * 1000 / MAPROWS )) us a row for the trigger)"
}

run() { # run NAME BINARY
    local db=bench_$1 into=orders_$1 ct=items t0 out
    # migrate mode: the child's slot is named after its table, and slots are the cluster's
    [ "$MODE" = expand ] || ct=items_$1
    setup "$db" "$ct"
    t0=$(ms)
    PGDATABASE=$db "$2" -q migrate --from public.orders --key id --time-column created_at --into "$into" \
        --child "public.$ct(order_id)" --child-mode "$MODE" >"$db.run.log" 2>&1 || { cat "$db.run.log"; exit 1; }
    echo "$1: migrate (copy, fill of $CHILD child rows, foreign key) $(( $(ms) - t0 )) ms"
    if [ "$MODE" = migrate ]; then
        q -d "$db" -c "SELECT '$1: slot ' || slot_name || ': restart_lsn ' ||
                              pg_size_pretty(pg_current_wal_lsn() - restart_lsn) || ' behind, confirmed_flush_lsn ' ||
                              pg_size_pretty(pg_current_wal_lsn() - confirmed_flush_lsn)
                         FROM pg_replication_slots WHERE database = '$db' ORDER BY slot_name"
    elif [ "$1" != base ] && [ "$MAPROWS" != 0 ]; then
        map_cost "$db" "$into"
    fi
    out=$(PGDATABASE=$db "$2" migrate --into "$into" --switch 2>&1) || { echo "$out"; exit 1; }
    printf '%s\n' "$out" >"$db.switch.log"
    echo "$1: $(grep -E '^ *lock held|^ *children' <<<"$out" | sed 's/^ *//' | tr '\n' ' ')"
    [ "$BACK" = 1 ] || return 0
    new_writes "$db" "$ct"
    PGDATABASE=$db "$2" -q migrate --into "$into" --reverse >"$db.reverse.log" 2>&1 || { cat "$db.reverse.log"; exit 1; }
    local held=
    if [ "$HELD" = 1 ]; then new_writes "$db" "$ct" held & held=$!; else new_writes "$db" "$ct"; fi
    out=$(PGDATABASE=$db "$2" migrate --into "$into" --switch 2>&1) || { echo "$out"; exit 1; }
    [ -z "$held" ] || wait "$held"
    printf '%s\n' "$out" >"$db.back.log"
    local rows want=$(( PARENT + 2 * WRITES ))
    rows=$(q -d "$db" -c "SELECT count(*) FROM orders")
    echo "$1: switch back: $(grep -oE 'lock held [0-9]+ ms \(attempt [0-9]+\), [0-9]+ changes applied under it' <<<"$out" | head -1)$(grep -oE '; the fill under the lock [^;]*|; no fill under the lock' <<<"$out" | head -1); legacy parent rows $rows (want $want)"
}

new_writes() { # new_writes DB CHILD [held]: WRITES parents and a child each, in the switched
    # tables; the new ids are UUIDv7 of their times, inside the copied windows (a migrate-mode
    # child's rows get their own); held: in a transaction that commits once a lock on the parent
    # is waited for (the switch back's)
    uuid7() { echo "(lpad(to_hex((extract(epoch FROM $1) * 1000)::bigint), 12, '0') || '7' ||
                     left(md5(random()::text), 3) || '8' || left(md5(random()::text), 15))::uuid"; }
    local u cols="order_id_uuid, qty" vals="id, 1"
    u=$(uuid7 t)
    [ "$MODE" = expand ] || { cols="id, order_id_uuid, qty, created_at"; vals="$(uuid7 created_at), id, 1, created_at"; }
    local sql="WITH p AS (INSERT INTO orders (id, created_at, note)
                            SELECT $u, t, 'w'
                              FROM (SELECT timestamptz '2024-01-01' + g * interval '1 second' AS t
                                      FROM generate_series(1, $WRITES) g) s
                          RETURNING id, created_at)
               INSERT INTO $2 ($cols) SELECT $vals FROM p"
    if [ "${3:-}" = held ]; then
        q -d "$1" -c "BEGIN" -c "$sql" -c "DO \$\$ BEGIN FOR i IN 1..12000 LOOP
            EXIT WHEN EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND relation = 'orders'::regclass);
            PERFORM pg_sleep(0.005); END LOOP; END \$\$" -c "COMMIT"
    else
        q -d "$1" -c "$sql"
    fi
}

cd "$(mktemp -d)"
echo "logs in $PWD"
echo "parent $PARENT rows, child $CHILD rows ($NULLS orphans, $NULLS NULL keys), --child-mode $MODE"
[ -z "${V7FILL_BASE:-}" ] || run base "$V7FILL_BASE"
run new "$V7FILL"
