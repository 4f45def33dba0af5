# `v7fill migrate --switch` and `--reverse` (issue 21), through a small C program built against
# libv7fill.a (migrate_switch_helper.c) until the migrate command lands: a caught-up migration is
# built by SQL (public.orders bigserial -> public.orders_v7 RANGE (id) with legacy_id, the map, a
# child with order_id_uuid, the capture's publication and slot).  The switch refuses a capture far
# behind; renames old -> orders_legacy, new -> orders; gives legacy_id the old sequence as default;
# a concurrent writer and reader never wait longer than the lock timeout (+ margin), and during a
# slow catch-up the writer waits and the reader does not; a rerun says it is switched.  The way
# back copies inserts, updates and deletes of the new table into the legacy one exactly once (a
# rerun applies nothing, nor after kill -9); a change the legacy table refuses in the middle of a
# group is named, by id, and its group undone; --follow until SIGINT; switching back restores the
# names with both tables equal and fills order_id of child rows written after the switch with
# only order_id_uuid.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"

build_helper helper "$V7FILL_ROOT/tests/integration/migrate_switch_helper.c"
hx() { local want=$1; shift; run_expect "$want" ./helper "$@"; }
cleanup_slots() { q "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND NOT active" >/dev/null; }
trap 'cleanup_slots >/dev/null 2>&1 || true; rm -rf "$T_TMP"' EXIT
# differ: rows of the new table (by legacy_id) and of the legacy table (by id) that differ
# (WHERE $3 on both sides when given)
differ() {
    local w=${3:-true}
    q "SELECT count(*) FROM ((SELECT legacy_id, created_at, note FROM $1 WHERE $w
                              EXCEPT SELECT id, created_at, note FROM $2 WHERE $w)
       UNION ALL (SELECT id, created_at, note FROM $2 WHERE $w EXCEPT SELECT legacy_id, created_at, note FROM $1 WHERE $w)) d"
}
margin=1500  # lock timeout 1000 ms + 500 ms
# waited_less FILE WHAT: the hammer in FILE never waited $margin ms and no statement failed
waited_less() {
    local max
    max=$(sed -n 's/.*max_ms=\([0-9]*\).*/\1/p' "$1")
    [ "$max" -lt "$margin" ] || fail "$2: a statement waited ${max} ms (limit $margin)"
    assert_contains "$(cat "$1")" "errors=0" "$2: no statement failed across the rename"
}

q "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
   INSERT INTO orders (created_at, note)
       SELECT '2024-01-01'::timestamptz + g * interval '1 hour', 'n' || g FROM generate_series(1, 2000) g;
   DELETE FROM orders WHERE id % 7 = 0;
   CREATE TABLE order_items (item_id serial PRIMARY KEY, order_id bigint REFERENCES orders (id),
                             order_id_uuid uuid, qty int);
   INSERT INTO order_items (order_id, qty) SELECT id, 1 FROM orders WHERE id % 3 = 0;
   CREATE TABLE orders_v7 (legacy_id bigint NOT NULL, id uuid PRIMARY KEY, created_at timestamptz NOT NULL,
                           note text) PARTITION BY RANGE (id);
   CREATE TABLE orders_v7_a PARTITION OF orders_v7
       FOR VALUES FROM ('00000000-0000-0000-0000-000000000000') TO ('80000000-0000-0000-0000-000000000000');
   CREATE TABLE orders_v7_b PARTITION OF orders_v7
       FOR VALUES FROM ('80000000-0000-0000-0000-000000000000') TO (MAXVALUE);
   CREATE TABLE orders_v7_id_map (legacy_id bigint PRIMARY KEY, id uuid NOT NULL UNIQUE);
   INSERT INTO orders_v7_id_map SELECT id, gen_random_uuid() FROM orders;
   INSERT INTO orders_v7 SELECT m.legacy_id, m.id, o.created_at, o.note
       FROM orders o JOIN orders_v7_id_map m ON m.legacy_id = o.id;
   UPDATE order_items i SET order_id_uuid = m.id FROM orders_v7_id_map m WHERE m.legacy_id = i.order_id;
   ALTER TABLE order_items ADD FOREIGN KEY (order_id_uuid) REFERENCES orders_v7 (id) NOT VALID;
   CREATE PUBLICATION v7fill_orders_v7 FOR TABLE orders, order_items;" >/dev/null
q "SELECT pg_create_logical_replication_slot('v7fill_orders_v7', 'pgoutput')" >/dev/null
rows=$(q "SELECT count(*) FROM orders")

# --- a capture far behind: refused, nothing renamed ------------------------------------------
q "CREATE TABLE junk AS SELECT g, repeat('x', 900) AS pad FROM generate_series(1, 25000) g" >/dev/null
hx 3 switch "" follow
assert_contains "$OUT" "MB behind the source" "a lagging capture is refused"
assert_eq "orders_v7" "$(q "SELECT to_regclass('orders_v7')")" "nothing renamed after the refusal"
q "DROP TABLE junk; SELECT pg_replication_slot_advance('v7fill_orders_v7', pg_current_wal_lsn())" >/dev/null

# --- baseline: the writer's and the reader's longest statement with no switch ----------------
wsql="UPDATE orders SET note = 'w' || clock_timestamp() WHERE created_at = '2024-01-01 05:00:00+00'"
rsql="SELECT count(*) FROM orders"
./helper hammer "" 2 "$wsql" >base_w.out &
./helper hammer "" 2 "$rsql" >base_r.out
wait
echo "baseline: writer $(cat base_w.out), reader $(cat base_r.out)"

# --- the switch under a concurrent writer and reader ------------------------------------------
# under_load PHASE PREFIX [WRITER_SQL]: the switch while the reader (and the writer) hammer the
# table for 4 s; their results in PREFIX_r.out (PREFIX_w.out), the switch's output in $OUT
under_load() {
    local pids=()
    if [ $# -ge 3 ]; then ./helper hammer "" 4 "$3" >"$2_w.out" & pids+=($!); fi
    ./helper hammer "" 4 "$rsql" >"$2_r.out" &
    pids+=($!)
    sleep 1
    hx 0 switch "" "$1"
    wait "${pids[@]}"
}
# A catch-up of 1 s: the writer waits for it (no write slips past the final LSN), the reader does
# not (the parent is locked IN SHARE ROW EXCLUSIVE MODE until the renames).
# MSW_FLUSHED: a transaction commits asynchronously just before the lock; under the lock the
# WAL is on disk up to the final position (a walsender sends nothing unflushed: the capture would
# wait for the WAL writer, wal_writer_delay, while writers wait for the lock).
export CATCHUP_MS=1000 MSW_FLUSHED=1
under_load follow sw "$wsql"
unset CATCHUP_MS MSW_FLUSHED
sw_out=$OUT
assert_contains "$sw_out" "final_flushed=t" "under the lock, the WAL up to the final position is flushed"
echo "switch: $(grep -o 'attempts=[0-9]* lock_held_ms=[0-9]*' <<<"$sw_out"); writer $(cat sw_w.out), reader $(cat sw_r.out)"
assert_contains "$sw_out" "phase=switched legacy=orders_legacy" "the spec says switched"
assert_contains "$sw_out" "the application must change" "the notes for the application"
assert_contains "$sw_out" "public.orders.id is uuid now (was bigint id)" "the id type named"
assert_contains "$sw_out" "order_id_uuid" "the child's uuid column named"
assert_contains "$sw_out" "order_items_order_id_fkey of order_items now references public.orders_legacy" \
    "the child's old foreign key named"
margin=2500 waited_less sw_w.out "the writer during the switch (1 s catch-up + lock timeout + 0.5 s)"
wmax=$(sed -n 's/.*max_ms=\([0-9]*\).*/\1/p' sw_w.out)
[ "$wmax" -ge 1000 ] || fail "the writer never waited for the 1 s catch-up (longest ${wmax} ms): writes went on"
margin=1000 waited_less sw_r.out "the reader during the switch (not blocked by the 1 s catch-up)"
assert_eq "uuid|bigint" "$(q "SELECT (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
    WHERE attrelid = 'orders'::regclass AND attname = 'id'), (SELECT format_type(atttypid, atttypmod)
    FROM pg_attribute WHERE attrelid = 'orders_legacy'::regclass AND attname = 'id')")" \
    "orders is the uuid table, orders_legacy the bigint one"
assert_eq "" "$(q "SELECT to_regclass('orders_v7')")" "orders_v7 is gone as a name"
assert_eq "orders_v7_id_map" "$(q "SELECT to_regclass('orders_v7_id_map')")" "the map keeps its name"
assert_eq "nextval('orders_id_seq'::regclass)" "$(q "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef d
    JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
    WHERE d.adrelid = 'orders'::regclass AND a.attname = 'legacy_id'")" "legacy_id takes the old sequence"
# (the writer kept updating its row in the new table after the switch: the way back copies that)
assert_eq "2" "$(differ orders orders_legacy)" "only the writer's row differs after the switch (both ways)"
assert_eq "$rows|$rows" "$(q "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM orders_legacy)")" \
    "nothing dropped"

# --- rerun: already switched (also when the caller did not store the phase) -------------------
hx 0 switch "" switched
assert_contains "$OUT" "already switched" "a rerun says it is switched"
hx 0 switch "" follow
assert_contains "$OUT" "already=1" "a rerun after a kill before the phase was stored"
assert_contains "$OUT" "phase=switched" "the phase recovered from the catalog"

# --- the way back: inserts, updates, deletes of the new table into the legacy one -------------
# (the writer's updates after the switch are in the new table only so far)
q "INSERT INTO orders (id, created_at, note) VALUES (gen_random_uuid(), '2025-01-01', 'after1'),
       (gen_random_uuid(), '2025-01-02', 'after2'), (gen_random_uuid(), '2025-01-03', 'after3');
   UPDATE orders SET note = 'changed' WHERE legacy_id IN (1, 3);
   UPDATE orders SET note = 'changed-after' WHERE note = 'after2';
   DELETE FROM orders WHERE legacy_id = 2;
   DELETE FROM orders WHERE note = 'after1';" >/dev/null
[ "$(differ orders orders_legacy)" -gt 0 ] || fail "the test's changes should differ before the way back"
hx 0 reverse ""
echo "reverse: $OUT"
assert_contains "$OUT" "inserted=3" "three rows inserted in the legacy table"
assert_contains "$OUT" "deleted=2" "two rows deleted"
assert_contains "$OUT" "missing=0" "every change found its legacy row"
assert_contains "$OUT" "phase=reverse" "phase reverse"
assert_eq "0" "$(differ orders orders_legacy)" "after the way back both tables hold the same rows"
assert_eq "0" "$(q "SELECT count(*) FROM orders o FULL JOIN orders_v7_id_map m ON m.id = o.id
    WHERE m.id IS NULL OR o.id IS NULL OR m.legacy_id <> o.legacy_id")" "the map matches the new table"
hx 0 reverse ""
assert_contains "$OUT" "transactions=0 inserted=0 updated=0 deleted=0" "a rerun applies nothing (exactly once)"

# --- a change the legacy table refuses, in the middle of a group sent without waiting for each
# statement: the error names it, nothing of the group stays; a legacy row gone is counted missing
gone=$(q "SELECT legacy_id FROM orders WHERE note = 'after3'")
q "DELETE FROM orders_legacy WHERE id = $gone;
   ALTER TABLE orders_legacy ADD CONSTRAINT no_refused CHECK (note IS DISTINCT FROM 'refused') NOT VALID" >/dev/null
before=$(q "SELECT applied FROM v7fill.migrate_reverse WHERE into_table = 'public.orders_v7'")
q "BEGIN;
   INSERT INTO orders (id, created_at, note)
       SELECT gen_random_uuid(), '2025-03-01'::timestamptz + g * interval '1 minute', 'grp' || g
       FROM generate_series(1, 300) g;
   INSERT INTO orders (id, created_at, note) VALUES ('018f0000-0000-7000-8000-00000000bad1', '2025-03-02', 'refused');
   INSERT INTO orders (id, created_at, note)
       SELECT gen_random_uuid(), '2025-03-03'::timestamptz + g * interval '1 minute', 'grp' || g
       FROM generate_series(301, 600) g;
   UPDATE orders SET created_at = created_at + interval '1 second' WHERE note = 'after3';
   COMMIT" >/dev/null
hx 5 reverse ""
assert_contains "$OUT" "the insert of public.orders" "the refused change is named"
assert_contains "$OUT" "(id 018f0000-0000-7000-8000-00000000bad1)" "by its id"
assert_contains "$OUT" "no_refused" "with the server's reason"
assert_contains "$OUT" "SQLSTATE 23514" "and its SQLSTATE"
assert_eq "0|$before" "$(q "SELECT (SELECT count(*) FROM orders_legacy WHERE note LIKE 'grp%'),
    (SELECT applied FROM v7fill.migrate_reverse WHERE into_table = 'public.orders_v7')")" \
    "nothing of the refused change's group stays, and the position did not move"
q "ALTER TABLE orders_legacy DROP CONSTRAINT no_refused" >/dev/null
hx 0 reverse ""
assert_contains "$OUT" "inserted=601 updated=0 deleted=0 missing=1" "then all of it applies, the update of a gone row missing"
assert_contains "$OUT" "an update of public.orders at" "the missing row is named"
assert_contains "$OUT" "found no row in public.orders_legacy" "as missing from the legacy table"
q "INSERT INTO orders_legacy (id, created_at, note) SELECT legacy_id, created_at, note FROM orders
   WHERE note = 'after3'" >/dev/null
assert_eq "0" "$(differ orders orders_legacy)" "both tables equal again"

# --- --follow: keeps applying until SIGINT ----------------------------------------------------
./helper reverse "" follow >follow.out 2>&1 &
fpid=$!
sleep 1
q "INSERT INTO orders (id, created_at, note) VALUES (gen_random_uuid(), '2025-02-01', 'followed')" >/dev/null
for _ in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM orders_legacy WHERE note = 'followed'")" = 1 ] && break
    sleep 0.1
done
assert_eq "1" "$(q "SELECT count(*) FROM orders_legacy WHERE note = 'followed'")" "--follow applied a new row"
kill -INT $fpid
set +e; wait $fpid; st=$?; set -e
assert_eq "0" "$st" "--follow stops on SIGINT with status 0 ($(cat follow.out))"

# --- kill -9 in the middle of the way back, then again: every change applied exactly once -----
applied() { q "SELECT applied FROM v7fill.migrate_reverse WHERE into_table = 'public.orders_v7'"; }
before=$(applied)
for i in $(seq 1 200); do
    echo "INSERT INTO orders (id, created_at, note) VALUES (gen_random_uuid(), '2025-02-02', 'k$i');"
    echo "UPDATE orders SET note = 'k$i-u' WHERE note = 'k$i';"
done >changes.sql
./helper reverse "" follow >kill.out 2>&1 &
fpid=$!
psql -X -q -v ON_ERROR_STOP=1 -f changes.sql >/dev/null &
cpid=$!
for _ in $(seq 1 200); do
    [ "$(applied)" -gt $((before + 40)) ] && break
    sleep 0.05
done
kill -9 $fpid
wait $cpid
set +e; wait $fpid; set -e
got=$(applied)
echo "kill -9 after $((got - before)) of 400 changes applied"
[ "$got" -lt $((before + 400)) ] || echo "note: the way back had applied all changes before kill -9 ($got)"
hx 0 reverse ""
assert_eq "$((before + 400))" "$(applied)" "400 changes applied exactly once across kill -9"
assert_contains "$OUT" "missing=0" "nothing applied twice or lost"
assert_eq "0" "$(differ orders orders_legacy)" "both tables equal after kill -9 and a rerun"

# --- switching back: changes not yet applied are applied under the lock ----------------------
q "UPDATE orders SET note = 'last' WHERE legacy_id = 4;
   INSERT INTO orders (id, created_at, note) VALUES (gen_random_uuid(), '2025-03-01', 'late');
   INSERT INTO order_items (order_id_uuid, qty) SELECT id, 7 FROM orders WHERE note IN ('after3', 'late')" >/dev/null
under_load reverse back "$wsql"
back_out=$OUT
echo "switch back: $(grep -o 'lock held [0-9]* ms.*under it' <<<"$back_out"); writer $(cat back_w.out), reader $(cat back_r.out)"
assert_contains "$back_out" "back=1" "switched back"
assert_eq "1|1" "$(q "SELECT (SELECT count(*) FROM orders WHERE note = 'late'),
    (SELECT count(*) FROM orders WHERE id = 4 AND note = 'last')")" "the two pending changes reached the legacy table"
assert_contains "$back_out" "phase=follow" "phase follow again"
assert_contains "$back_out" "2 child rows got their legacy key" "child rows written with only order_id_uuid"
assert_eq "2" "$(q "SELECT count(*) FROM order_items i JOIN orders_v7_id_map m ON m.id = i.order_id_uuid
    WHERE i.qty = 7 AND i.order_id = m.legacy_id")" "their order_id is the parent's legacy key"
waited_less back_r.out "the reader during the switch back"
waited_less back_w.out "the writer during the switch back"
assert_eq "bigint|uuid" "$(q "SELECT (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
    WHERE attrelid = 'orders'::regclass AND attname = 'id'), (SELECT format_type(atttypid, atttypmod)
    FROM pg_attribute WHERE attrelid = 'orders_v7'::regclass AND attname = 'id')")" "the names are back"
# (the writer's statements after the switch back went to the legacy table: the capture's part)
assert_eq "0" "$(differ orders_v7 orders "created_at <> '2024-01-01 05:00:00+00'")" \
    "both tables equal after switching back"
assert_eq "" "$(q "SELECT to_regclass('orders_legacy')")" "no orders_legacy any more"
assert_eq "0" "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'v7fill_orders_v7_rev'")" \
    "the way back's slot dropped"
assert_eq "" "$(q "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef d
    JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
    WHERE d.adrelid = 'orders_v7'::regclass AND a.attname = 'legacy_id'")" "legacy_id's default removed"
q "INSERT INTO orders (created_at, note) VALUES ('2025-04-01', 'legacy again')" >/dev/null
hx 0 switch "" reverse
assert_contains "$OUT" "already switched back" "a rerun of the switch back"
# --- two databases: the source table renamed <from>_legacy there, nothing renamed on the target --
srcdb="${PGDATABASE}_src"
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$srcdb\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$srcdb\"" >/dev/null
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$srcdb" -c "$1"; }
qs "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    CREATE TABLE order_items (item_id serial PRIMARY KEY, order_id bigint REFERENCES orders (id), order_id_uuid uuid);  -- prepared, as migrate leaves it
    INSERT INTO orders (created_at, note) VALUES ('2024-01-01', 'a');
    CREATE PUBLICATION v7fill_orders_v7 FOR TABLE orders, order_items;" >/dev/null
q "SELECT pg_drop_replication_slot('v7fill_orders_v7')" >/dev/null  # slot names are per cluster
qs "SELECT pg_create_logical_replication_slot('v7fill_orders_v7', 'pgoutput')" >/dev/null
trap 'qs "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active" >/dev/null 2>&1 || true; cleanup_slots >/dev/null 2>&1 || true; rm -rf "$T_TMP"' EXIT
MSW_SOURCE="dbname=$srcdb" hx 0 switch "" follow
assert_contains "$OUT" "connect to the target database and use public.orders_v7" "two databases: what to change"
assert_eq "|orders_legacy" "$(qs "SELECT to_regclass('orders'), to_regclass('orders_legacy')")" \
    "two databases: the source table renamed"
assert_eq "orders_v7|orders" "$(q "SELECT to_regclass('orders_v7'), to_regclass('orders')")" \
    "two databases: nothing renamed on the target"
# The application's new rows there get their legacy key from the target's own sequence, which
# goes on from the source's (the old sequence is the source's); a row given NULL is taken too.
assert_contains "$OUT" "DEFAULT nextval of public.orders_v7_legacy_id_seq, which goes on from public.orders_id_seq" \
    "two databases: the output names legacy_id's sequence"
# (this target's map holds the keys of the one-database run above, so it goes on from those)
top=$(q "SELECT max(legacy_id) FROM orders_v7_id_map")
q "INSERT INTO orders_v7 (id, created_at, note) VALUES ('$("$V7FILL" uuid new)', now(), 'after the switch')"
assert_eq "$((top + 1))" "$(q "SELECT legacy_id FROM orders_v7 WHERE note = 'after the switch'")" \
    "two databases: a new row's legacy_id goes on from the source's sequence"
q "INSERT INTO orders_v7 (id, legacy_id, created_at, note) VALUES ('$("$V7FILL" uuid new)', NULL, now(), 'no key')"
MSW_SOURCE="dbname=$srcdb" hx 0 switch "" follow
assert_contains "$OUT" "already switched" "two databases: a rerun"
# The way back between two databases: the row given NULL gets the next value of that sequence
# in the legacy table and the map (the target's row keeps its NULL), and the source's sequence
# moves past both.
MSW_SOURCE="dbname=$srcdb" hx 0 reverse ""
assert_contains "$OUT" "inserted=2 updated=0 deleted=0 missing=0" "two databases: the way back"
assert_eq "$((top + 1))|after the switch,$((top + 2))|no key" "$(qs "SELECT string_agg(id || '|' || note, ',' ORDER BY id) FROM orders_legacy WHERE id > 1")" \
    "two databases: the legacy table has both rows"
assert_eq "$((top + 2))|" "$(q "SELECT m.legacy_id, t.legacy_id FROM orders_v7 t JOIN orders_v7_id_map m USING (id) WHERE t.note = 'no key'")" \
    "two databases: the row given NULL keeps it, the map pairs it"
assert_eq "$((top + 3))" "$(qs "SELECT nextval('orders_id_seq')")" "two databases: the source's sequence past the keys the way back inserted"
echo "ok"
