# `v7fill migrate` children in expand mode (issue 21), through a small C program built against
# the libv7fill.a next to the binary under test (migrate_child_helper.c) until the command calls
# migrate_child.h: <fk>_uuid added and kept current by a trigger; the fill sets every non-orphan
# row's uuid to the map's id while a concurrent writer's statements stay under 1 s, counts
# orphans and NULL keys exactly and names the first orphans; a child written while the capture
# deletes its parent is left without a uuid, not refused; a child written before its
# parent's map row gets its uuid on the next fill; a fill that meets a row lock retries; the
# foreign key is added NOT VALID, validated and enforced; every step rerun changes nothing;
# two databases: fill passes, a trigger that only makes a changed key's uuid NULL, no foreign
# key (refused with the reason).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
MAPDB="${PGDATABASE}_map"
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$MAPDB\"" >/dev/null
psql -X -q -d postgres -c "CREATE DATABASE \"$MAPDB\"" >/dev/null
BG=()
cleanup() {
    for p in "${BG[@]}"; do kill "$p" 2>/dev/null || true; done
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$MAPDB\"" >/dev/null 2>&1 || true
    rm -rf "$T_TMP"
}
trap cleanup EXIT

build_helper helper "$V7FILL_ROOT/tests/integration/migrate_child_helper.c"
# child STATUS STEP [TABLE] [MAP_CONNINFO]: the helper on public.TABLE(order_id) -> orders_v7
child() {
    local want=$1 step=$2 table=${3:-order_items}; shift 3 || shift $#
    run_expect "$want" ./helper "$step" public "$table" order_id public orders_v7 orders_v7_id_map bigint "$@"
}
stat() { sed -n "s/^$1=\(.*\)$/\1/p" <<<"$OUT"; }

# --- the map, the partitioned target, a child of 50,000 rows --------------------------------
# Parents 1..10000 except multiples of 97 (their children are orphans); every 50th child has
# a NULL key.
q "CREATE TABLE orders_v7 (id uuid PRIMARY KEY, legacy_id bigint NOT NULL, created_at timestamptz)
     PARTITION BY RANGE (id);
   CREATE TABLE orders_v7_lo PARTITION OF orders_v7
     FOR VALUES FROM (MINVALUE) TO ('80000000-0000-0000-0000-000000000000');
   CREATE TABLE orders_v7_hi PARTITION OF orders_v7
     FOR VALUES FROM ('80000000-0000-0000-0000-000000000000') TO (MAXVALUE);
   CREATE TABLE orders_v7_id_map (legacy_id bigint PRIMARY KEY, id uuid NOT NULL UNIQUE);
   INSERT INTO orders_v7_id_map SELECT g, gen_random_uuid() FROM generate_series(1, 10000) g
     WHERE g % 97 <> 0;
   INSERT INTO orders_v7 SELECT id, legacy_id, now() FROM orders_v7_id_map;
   CREATE TABLE order_items (id bigint PRIMARY KEY, order_id bigint, qty int NOT NULL DEFAULT 1);
   INSERT INTO order_items
     SELECT g, CASE WHEN g % 50 = 0 THEN NULL ELSE g % 10000 + 1 END, 1
       FROM generate_series(1, 50000) g;
   CREATE SEQUENCE writer_ids START 1000001;
   ANALYZE" >/dev/null
# Expected from the rows alone: keys g % 10000 + 1 divisible by 97, g not divisible by 50.
orphans0=$(q "SELECT count(*) FROM generate_series(1, 50000) g WHERE g % 50 <> 0 AND (g % 10000 + 1) % 97 = 0")
assert_eq 1000 "$(q "SELECT count(*) FROM order_items WHERE order_id IS NULL")" "NULL keys set up"

# --- prepare: the column and the trigger, rerun changes nothing ---------------------------
child 0 prepare
assert_eq "uuid" "$(q "SELECT format_type(atttypid, atttypmod) FROM pg_attribute
                      WHERE attrelid = 'order_items'::regclass AND attname = 'order_id_uuid'")" "order_id_uuid added"
assert_eq "v7fill_order_id_uuid,v7fill_order_id_uuid_back" "$(q "SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger WHERE tgrelid = 'order_items'::regclass AND NOT tgisinternal")" \
    "the trigger keeping it current, and the way back's rule"
# Rerun while another session holds a lock that ALTER TABLE would wait for: nothing to do, no wait.
hold_open reader "SELECT count(*) FROM order_items"
t0=$(date +%s%N)
child 0 prepare
took=$(( ($(date +%s%N) - t0) / 1000000 ))
hold_close reader
[ "$took" -lt 3000 ] || fail "prepare rerun waited ${took} ms behind a reader: it should change nothing"
# A trigger function an earlier version made (its map read without the lock) is made again.
fnsrc() { q "SELECT p.prosrc FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
             WHERE t.tgrelid = 'order_items'::regclass AND t.tgname = 'v7fill_order_id_uuid'"; }
assert_contains "$(fnsrc)" "FOR KEY SHARE" "the map row is read FOR KEY SHARE"
fn=$(q "SELECT t.tgfoid::regproc FROM pg_trigger t WHERE t.tgrelid = 'order_items'::regclass AND t.tgname = 'v7fill_order_id_uuid'")
q "CREATE OR REPLACE FUNCTION $fn() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN RETURN NEW; END \$\$" >/dev/null
child 0 prepare
assert_contains "$(fnsrc)" "FOR KEY SHARE" "a rerun makes an earlier function again"
# A child prepared by a version without the way back's rule gets it from the next prepare; before
# the switch it does nothing (v7fill's fills write order_id_uuid then).
q "DROP TRIGGER v7fill_order_id_uuid_back ON order_items" >/dev/null
child 0 prepare
assert_eq 1 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'order_items'::regclass AND tgname = 'v7fill_order_id_uuid_back'")" \
    "the way back's rule made on a child prepared without it"
q "UPDATE order_items SET order_id_uuid = gen_random_uuid() WHERE id = 3;
   UPDATE order_items SET order_id_uuid = gen_random_uuid() WHERE id = 3" >/dev/null
assert_eq "4" "$(q "SELECT order_id FROM order_items WHERE id = 3")" "before the switch the way back's rule changes no key"
q "UPDATE order_items SET order_id_uuid = NULL WHERE id = 3" >/dev/null

# --- fill under a concurrent writer ---------------------------------------------------------
# writer OUTFILE: one psql session timing each statement (inserts, key changes, other updates
# of random child rows) until ./stop exists.
writer() {
    rm -f stop
    {
        echo '\timing on'
        while [ ! -e stop ]; do
            r1=$(( (RANDOM << 15 | RANDOM) % 50000 + 1 ))
            r2=$(( (RANDOM << 15 | RANDOM) % 50000 + 1 ))
            k=$(( RANDOM % 10000 + 1 ))
            echo "INSERT INTO order_items (id, order_id) VALUES (nextval('writer_ids'), $k);"
            echo "UPDATE order_items SET order_id = $k WHERE id = $r1;"
            echo "UPDATE order_items SET qty = qty + 1 WHERE id = $r2;"
        done
    } | psql -X -q >"$1" 2>&1
}
max_ms() { awk '/^Time: /{ if ($2 + 0 > m) m = $2 + 0 } END { printf "%d\n", m }' "$1"; }
count_stmts() { grep -c '^Time: ' "$1"; }

# Baseline: the writer alone for 3 s.
writer base.out & BG+=($!)
sleep 3; touch stop; wait "${BG[-1]}"
base_max=$(max_ms base.out)
base_n=$(count_stmts base.out)

writer during.out & BG+=($!)
sleep 1
fill_t0=$(q "SELECT now()")
t0=$(date +%s%N)
child 0 fill
fill_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
fill1=$OUT
sleep 0.5; touch stop; wait "${BG[-1]}"
during_max=$(max_ms during.out)
during_n=$(count_stmts during.out)
echo "writer alone: $base_n statements in 3 s, longest ${base_max} ms; during the fill: $during_n statements, longest ${during_max} ms"
echo "fill under the writer: ${fill_ms} ms; $(tr '\n' ' ' <<<"$fill1")"
[ "$during_n" -gt 100 ] || fail "the writer ran only $during_n statements during the fill"
grep -q ERROR during.out && fail "the writer met an error: $(grep -m1 ERROR during.out)"
[ "$during_max" -lt 1000 ] || fail "a writer statement took ${during_max} ms during the fill (limit 1000)"
assert_eq 50000 "$(OUT=$fill1 stat rows | awk '{print ($1 >= 50000) ? 50000 : $1}')" "the first pass read every row"
# Every keyed, non-orphan row of the 50,000 is the fill's to set, less those the writer reached
# first (its key changes go through the trigger; at most one row per writer statement).
min_filled=$(( 50000 - 1000 - orphans0 - during_n ))
[ "$(OUT=$fill1 stat filled)" -ge "$min_filled" ] \
    || fail "fill set $(OUT=$fill1 stat filled) rows, fewer than $min_filled"

# The fill analyzed the column it wrote: the setup's ANALYZE knew no order_id_uuid, and without
# statistics of it a later pass read its batches through the index on order_id_uuid.
assert_eq t "$(q "SELECT last_analyze >= '$fill_t0'::timestamptz FROM pg_stat_user_tables WHERE relid = 'order_items'::regclass")" \
    "the fill analyzed the child once it had filled order_id_uuid"
assert_eq t "$(q "SELECT null_frac < 0.2 FROM pg_stats WHERE tablename = 'order_items' AND attname = 'order_id_uuid'")" \
    "order_id_uuid's statistics are those of the filled column"

# Every row with a parent in the map carries its id; NULL keys and orphans carry none.
wrong() {
    q "SELECT count(*) FROM order_items c LEFT JOIN orders_v7_id_map m ON m.legacy_id = c.order_id
        WHERE c.order_id_uuid IS DISTINCT FROM m.id"
}
assert_eq 0 "$(wrong)" "rows whose order_id_uuid is not the map's id of order_id"
assert_eq 0 "$(q "SELECT count(*) FROM order_items WHERE order_id_uuid IS NOT NULL
                  AND (order_id IS NULL OR order_id NOT IN (SELECT legacy_id FROM orders_v7_id_map))")" \
    "NULL keys and orphans have no uuid"

# Rerun, nothing writing: nothing to set, the counts exact, the first orphans named.
rows=$(q "SELECT count(*) FROM order_items")
nulls=$(q "SELECT count(*) FROM order_items WHERE order_id IS NULL")
orphans=$(q "SELECT count(*) FROM order_items c WHERE order_id IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM orders_v7_id_map m WHERE m.legacy_id = c.order_id)")
first=$(q "SELECT string_agg(order_id::text, ',') FROM (SELECT order_id FROM order_items c
           WHERE order_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM orders_v7_id_map m WHERE m.legacy_id = c.order_id)
           ORDER BY id LIMIT 3) f")
child 0 fill
assert_eq 0 "$(stat filled)" "rerun sets nothing"
assert_eq 0 "$(stat batches)" "rerun writes nothing"
assert_eq 1 "$(stat passes)" "rerun: one pass"
assert_eq "$rows" "$(stat rows)" "rows read"
assert_eq "$nulls" "$(stat null_keys)" "NULL keys counted"
assert_eq "$orphans" "$(stat orphans)" "orphans counted"
[ "$orphans" -ge "$orphans0" ] || fail "fewer orphans ($orphans) than set up ($orphans0)"
assert_contains "$(stat orphan_examples)," "$first," "the first orphan keys as examples"

# --- the trigger: rows written now get their uuid at once -----------------------------------
q "INSERT INTO order_items (id, order_id) VALUES (900001, 42), (900002, NULL), (900003, 97)" >/dev/null
assert_eq "t|t|t" "$(q "SELECT bool_and(order_id_uuid = (SELECT id FROM orders_v7_id_map WHERE legacy_id = 42)) FILTER (WHERE id = 900001),
                             bool_and(order_id_uuid IS NULL) FILTER (WHERE id = 900002),
                             bool_and(order_id_uuid IS NULL) FILTER (WHERE id = 900003)
                        FROM order_items WHERE id > 900000")" "inserted rows: parent's id, NULL key, orphan"
q "INSERT INTO order_items (id, order_id, order_id_uuid)
   SELECT 900004, NULL, id FROM orders_v7_id_map WHERE legacy_id = 45" >/dev/null
assert_eq "t" "$(q "SELECT order_id_uuid = (SELECT id FROM orders_v7_id_map WHERE legacy_id = 45) FROM order_items WHERE id = 900004")" \
    "an insert giving the uuid and no key keeps it (the application after the switch)"
q "DELETE FROM order_items WHERE id = 900004" >/dev/null
q "UPDATE order_items SET order_id = 43 WHERE id = 900001" >/dev/null
assert_eq "t" "$(q "SELECT order_id_uuid = (SELECT id FROM orders_v7_id_map WHERE legacy_id = 43) FROM order_items WHERE id = 900001")" \
    "a changed key changes the uuid"
q "UPDATE order_items SET order_id = NULL WHERE id = 900001" >/dev/null
assert_eq "t" "$(q "SELECT order_id_uuid IS NULL FROM order_items WHERE id = 900001")" "a NULLed key NULLs the uuid"

# A child written before its parent's map row: NULL until the next fill pass.
q "INSERT INTO order_items (id, order_id) VALUES (900010, 20001)" >/dev/null
assert_eq "t" "$(q "SELECT order_id_uuid IS NULL FROM order_items WHERE id = 900010")" "no map row yet"
q "INSERT INTO orders_v7_id_map VALUES (20001, gen_random_uuid());
   INSERT INTO orders_v7 SELECT id, legacy_id, now() FROM orders_v7_id_map WHERE legacy_id = 20001" >/dev/null
child 0 fill
assert_eq 1 "$(stat filled)" "the late parent's child set by the next fill"
assert_eq 0 "$(wrong)" "every row right after the late parent"

# --- a fill that meets a writer's row lock retries, the writer waits under 1 s ---------------
q "UPDATE order_items SET order_id_uuid = NULL WHERE id <= 200" >/dev/null
resolvable=$(q "SELECT count(*) FROM order_items c JOIN orders_v7_id_map m ON m.legacy_id = c.order_id WHERE c.id <= 200")
# The writer's row lock on id 5 is held until the fill's UPDATE has been seen waiting for it in
# two attempts (two query_start values: one timed out after 300 ms and was retried).
hold_open row5 "UPDATE order_items SET qty = qty + 1 WHERE id = 5"
LOCK_TIMEOUT_MS=300 ./helper fill public order_items order_id public orders_v7 orders_v7_id_map bigint >fill.out 2>&1 &
fill=$!
BG+=($fill)
first_wait=""
for i in $(seq 1 1200); do
    kill -0 "$fill" 2>/dev/null || fail "the fill exited before it was seen retrying: $(cat fill.out)"
    s=$(q "SELECT max(query_start)::text FROM pg_stat_activity WHERE datname = current_database()
             AND application_name = 'v7fill' AND query LIKE 'UPDATE %order_items%' AND wait_event_type = 'Lock'")
    [ -n "$s" ] && [ -n "$first_wait" ] && [ "$s" != "$first_wait" ] && break
    [ -n "$s" ] && first_wait=$s
    sleep 0.05
done
[ -n "$s" ] && [ -n "$first_wait" ] && [ "$s" != "$first_wait" ] \
    || fail "waited 60 s for the fill's UPDATE to wait for the row lock in two attempts (seen: [$first_wait])"
hold_close row5
set +e; wait "$fill"; rc=$?; set -e
OUT=$(cat fill.out)
assert_eq 0 "$rc" "exit status of the fill that met the row lock; output: $OUT"
assert_eq "$resolvable" "$(stat filled)" "rows set once the lock was released"
[ "$(stat lock_retries)" -ge 1 ] || fail "the fill should have met the row lock: $OUT"
assert_eq 0 "$(wrong)" "every row right after the retries"

# --- constrain: NOT VALID, validated, enforced; rerun keeps the one key ---------------------
child 0 constrain
assert_eq 1 "$(stat fk_added)" "foreign key added"
assert_eq 1 "$(stat fk_validated)" "foreign key validated"
fks() { q "SELECT string_agg(conname || ':' || convalidated, ' ') FROM pg_constraint
           WHERE conrelid = 'order_items'::regclass AND contype = 'f' AND conparentid = 0"; }
assert_eq "order_items_order_id_uuid_fkey:true" "$(fks)" "one validated foreign key"
uuid_idx() { q "SELECT string_agg(c.relname || ':' || i.indisvalid, ' ') FROM pg_index i
               JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_attribute a
                 ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
               WHERE i.indrelid = 'order_items'::regclass AND a.attname = 'order_id_uuid'
                 AND i.indpred IS NULL"; }  # (not the partial order_items_order_id_unset)
assert_eq "order_items_order_id_uuid_idx:true" "$(uuid_idx)" \
    "an index on order_id_uuid (a delete in the new table finds its children by it)"
child 0 constrain
assert_eq "order_items_order_id_uuid_idx:true" "$(uuid_idx)" "constrain rerun builds no second index"
assert_eq "order_items_order_id_uuid_fkey:true" "$(fks)" "constrain rerun adds nothing"
run_expect 1 psql -X -q -v ON_ERROR_STOP=1 -c "UPDATE order_items SET order_id_uuid = gen_random_uuid() WHERE id = 1"
assert_contains "$OUT" "order_items_order_id_uuid_fkey" "the foreign key is enforced"
q "INSERT INTO order_items (id, order_id) VALUES (900020, 44)" >/dev/null
assert_eq 0 "$(wrong)" "rows written after the constraint"
# The capture deletes a parent's map row and its row in one transaction.  A child of that key
# written while the transaction is open (an insert, a key changed to it) waits for it and is
# left without a uuid, as the delete leaves the others; it is not refused by the foreign key
# (the legacy child has none: the application's write must go through).
hold_open capture "DELETE FROM orders_v7_id_map WHERE legacy_id IN (45, 46); DELETE FROM orders_v7 WHERE legacy_id IN (45, 46)"
psql -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO order_items (id, order_id) VALUES (900021, 45)" \
     -c "UPDATE order_items SET order_id = 46 WHERE id = 900020" >app.log 2>&1 &
app=$!
poll_until "SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'
              AND query LIKE 'INSERT INTO order_items%'" "the insert waiting for the capture's transaction"
hold_close capture
wait "$app" || fail "the application's writes of children of parents deleted meanwhile: $(cat app.log)"
assert_eq "46:|45:" "$(q "SELECT string_agg(order_id || ':' || coalesce(order_id_uuid::text, ''), '|' ORDER BY id)
                         FROM order_items WHERE id IN (900020, 900021)")" "the two rows have no uuid (their parents are gone)"
assert_eq 0 "$(q "SELECT count(*) FROM order_items WHERE order_id IN (45, 46) AND order_id_uuid IS NOT NULL")" \
    "the parents' other children lost theirs with the delete"
child 0 all
assert_eq 0 "$(stat filled)" "prepare, fill and constrain rerun change nothing"

# A NOT VALID key left by an interrupted run is validated, not added again.
q "CREATE TABLE items_nv (id int PRIMARY KEY, order_id bigint)" >/dev/null
q "INSERT INTO items_nv SELECT g, g FROM generate_series(1, 300) g" >/dev/null
child 0 all items_nv
q "ALTER TABLE items_nv DROP CONSTRAINT items_nv_order_id_uuid_fkey;
   ALTER TABLE items_nv ADD CONSTRAINT my_fk FOREIGN KEY (order_id_uuid) REFERENCES orders_v7 (id) NOT VALID" >/dev/null
child 0 constrain items_nv
assert_eq "my_fk:true" "$(q "SELECT string_agg(conname || ':' || convalidated, ' ') FROM pg_constraint
                            WHERE conrelid = 'items_nv'::regclass AND contype = 'f' AND conparentid = 0")" "the existing NOT VALID key validated"
# A uuid that points nowhere (its parent deleted before the key existed, or written by hand)
# is set from the map again before the validation, which then passes.
q "ALTER TABLE items_nv DROP CONSTRAINT my_fk; UPDATE items_nv SET order_id_uuid = '00000000-0000-0000-0000-000000000001' WHERE id = 7" >/dev/null
child 0 constrain items_nv
assert_contains "$OUT" "1 rows named a missing parent" "the repair is logged"
assert_eq "t" "$(q "SELECT i.order_id_uuid IS NOT DISTINCT FROM (SELECT id FROM orders_v7_id_map WHERE legacy_id = i.order_id)
                     FROM items_nv i WHERE id = 7")" "its uuid set from the map again"
assert_eq "items_nv_order_id_uuid_fkey:true" "$(q "SELECT string_agg(conname || ':' || convalidated, ' ') FROM pg_constraint
                            WHERE conrelid = 'items_nv'::regclass AND contype = 'f' AND conparentid = 0")" "validated"

# --- errors name the table and column -------------------------------------------------------
child 3 prepare no_such_table
assert_contains "$OUT" "child table public.no_such_table does not exist" "missing child"
run_expect 3 ./helper prepare public items_nv order_id public orders_v7 no_such_map bigint
assert_contains "$OUT" "the map public.no_such_map does not exist" "no trigger reading a missing map"
q "CREATE TABLE items_nopk (order_id bigint)" >/dev/null
child 3 prepare items_nopk
assert_contains "$OUT" "child table public.items_nopk has no primary key" "a child without primary key"
assert_eq 0 "$(q "SELECT count(*) FROM pg_attribute WHERE attrelid = 'items_nopk'::regclass AND attname = 'order_id_uuid'")" \
    "a child refused is left unchanged"

# Hostile names (quotes, spaces, the dollar-quote tag) and a partitioned child: filled and kept
# current like any other; PostgreSQL 15 gives a partitioned table no NOT VALID foreign key.
q "CREATE TABLE \"it\"\"ems \$v7fill\$\" (id int PRIMARY KEY, \"Order Id\" bigint);
   INSERT INTO \"it\"\"ems \$v7fill\$\" SELECT g, g FROM generate_series(1, 500) g;
   CREATE TABLE items_part (id int, order_id bigint, PRIMARY KEY (id)) PARTITION BY RANGE (id);
   CREATE TABLE items_part_1 PARTITION OF items_part FOR VALUES FROM (0) TO (1000);
   CREATE TABLE items_part_2 PARTITION OF items_part FOR VALUES FROM (1000) TO (4000);
   INSERT INTO items_part SELECT g, g FROM generate_series(0, 2999) g" >/dev/null
run_expect 0 ./helper all public 'it"ems $v7fill$' 'Order Id' public orders_v7 orders_v7_id_map bigint
assert_eq 0 "$(q "SELECT count(*) FROM \"it\"\"ems \$v7fill\$\" c LEFT JOIN orders_v7_id_map m ON m.legacy_id = c.\"Order Id\"
                  WHERE c.\"Order Id_uuid\" IS DISTINCT FROM m.id")" "hostile names: every uuid the map's"
q "INSERT INTO \"it\"\"ems \$v7fill\$\" VALUES (501, 501)" >/dev/null
assert_eq t "$(q "SELECT \"Order Id_uuid\" = (SELECT id FROM orders_v7_id_map WHERE legacy_id = 501) FROM \"it\"\"ems \$v7fill\$\" WHERE id = 501")" \
    "hostile names: the trigger"
child 0 prepare items_part
child 0 fill items_part
q "INSERT INTO items_part VALUES (3500, 12); UPDATE items_part SET order_id = 13 WHERE id = 1500" >/dev/null
assert_eq 0 "$(q "SELECT count(*) FROM items_part c LEFT JOIN orders_v7_id_map m ON m.legacy_id = c.order_id
                  WHERE c.order_id_uuid IS DISTINCT FROM m.id")" "partitioned child: filled and kept current"
child 3 constrain items_part
assert_contains "$OUT" "cannot add a NOT VALID foreign key on public.items_part" "partitioned child: refused"

# --- two databases: the map elsewhere; composite primary key --------------------------------
psql -X -q -v ON_ERROR_STOP=1 -d "$MAPDB" -c "CREATE TABLE orders_v7_id_map (legacy_id bigint PRIMARY KEY, id uuid NOT NULL UNIQUE)"
psql -X -q -v ON_ERROR_STOP=1 -c "\copy orders_v7_id_map TO 'map.csv' CSV"
psql -X -q -v ON_ERROR_STOP=1 -d "$MAPDB" -c "\copy orders_v7_id_map FROM 'map.csv' CSV"
q "CREATE TABLE items2 (order_no int, line int, order_id bigint, PRIMARY KEY (order_no, line));
   INSERT INTO items2 SELECT g / 3, g % 3, CASE WHEN g % 40 = 0 THEN NULL ELSE g % 10050 + 1 END
     FROM generate_series(0, 20999) g" >/dev/null
child 0 prepare items2 "dbname=$MAPDB"
assert_eq "v7fill_order_id_uuid,v7fill_order_id_uuid_back" "$(q "SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger WHERE tgrelid = 'items2'::regclass AND NOT tgisinternal")" \
    "two databases: the triggers (a changed key's uuid made NULL; the way back's rule)"
child 0 fill items2 "dbname=$MAPDB"
wrong2() {
    q "SELECT count(*) FROM items2 c LEFT JOIN orders_v7_id_map m ON m.legacy_id = c.order_id
        WHERE c.order_id_uuid IS DISTINCT FROM m.id"
}
assert_eq 0 "$(wrong2)" "two databases: every row's uuid is the map's"
assert_eq 21000 "$(stat rows)" "two databases: rows"
assert_eq "$(q "SELECT count(*) FROM items2 WHERE order_id IS NULL")" "$(stat null_keys)" "two databases: NULL keys"
assert_eq "$(q "SELECT count(*) FROM items2 c WHERE order_id IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM orders_v7_id_map m WHERE m.legacy_id = c.order_id)")" "$(stat orphans)" "two databases: orphans"
# A key changed after the fill: the trigger cannot read the map in this form, so it makes the
# uuid NULL (never the old parent's), and the next pass sets it.  A key set where there was
# none keeps the uuid the row has (the way back fills the key of rows written by uuid only).
q "UPDATE items2 SET order_id = 7 WHERE order_no = 100 AND line = 1" >/dev/null
assert_eq "" "$(q "SELECT order_id_uuid FROM items2 WHERE order_no = 100 AND line = 1")" "two databases: a changed key's uuid is NULL at once"
q "UPDATE items2 SET order_id_uuid = (SELECT id FROM orders_v7_id_map WHERE legacy_id = 5) WHERE order_no = 13 AND line = 1;
   UPDATE items2 SET order_id = 5 WHERE order_no = 13 AND line = 1" >/dev/null
assert_eq "$(q "SELECT id FROM orders_v7_id_map WHERE legacy_id = 5")" "$(q "SELECT order_id_uuid FROM items2 WHERE order_no = 13 AND line = 1")" \
    "two databases: a key set where there was none keeps the uuid"
child 0 fill items2 "dbname=$MAPDB"
assert_eq 1 "$(stat filled)" "two databases: the changed key set by the next pass"
assert_eq 0 "$(wrong2)" "two databases: every row right after the change"
# --follow's passes stop between batches when told (the stream stopped on an error): 12,000
# rows NULL, the pass told to stop after two batches (at most 1,000 + 5,000 rows) ends
# interrupted with rows left; the next pass sets them.
q "UPDATE items2 SET order_id_uuid = NULL WHERE order_no < 4000 AND order_id IS NOT NULL" >/dev/null
nulled=$(q "SELECT count(*) FROM items2 WHERE order_id_uuid IS NULL AND order_id IS NOT NULL")
STOP_AFTER_BATCHES=2 child 130 settle items2 "dbname=$MAPDB"
assert_contains "$OUT" "stopped" "two databases: a pass told to stop says so"
left=$(q "SELECT count(*) FROM items2 WHERE order_id_uuid IS NULL AND order_id IS NOT NULL")
[ "$left" -ge $((nulled - 6000)) ] && [ "$left" -lt "$nulled" ] ||
    fail "two databases: a pass told to stop ends after its second batch ($left of $nulled rows left)"
child 0 settle items2 "dbname=$MAPDB"
assert_eq 0 "$(wrong2)" "two databases: the next pass sets the rest"
# --follow's passes stopped while one waits on the map's database (a session holds the map):
# the stop cancels the statement there too and returns at once, not when the lock goes.
q "UPDATE items2 SET order_id_uuid = NULL WHERE order_no < 500 AND order_id IS NOT NULL" >/dev/null
PGAPPNAME=t_mapblock psql -X -q -At -d "$MAPDB" -c "BEGIN; LOCK TABLE orders_v7_id_map IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60); COMMIT" >mapblock.log 2>&1 &
mapblock=$!
for _ in $(seq 1 50); do
    [ "$(psql -X -At -d "$MAPDB" -c "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 't_mapblock' AND l.granted AND l.relation = 'orders_v7_id_map'::regclass")" = 1 ] && break
    sleep 0.1
done
LOCK_TIMEOUT_MS=60000 KEEP_MS=5000 ./helper keep public items2 order_id public orders_v7 orders_v7_id_map bigint "dbname=$MAPDB" >keep.out 2>&1 &
keeper=$!
waited=0
for _ in $(seq 1 100); do
    [ "$(psql -X -At -d "$MAPDB" -c "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'orders_v7_id_map'::regclass")" -ge 1 ] && { waited=1; break; }
    sleep 0.1
done
wait "$keeper" || { cat keep.out; fail "the keeper's run"; }
OUT=$(cat keep.out)
psql -X -q -d "$MAPDB" -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 't_mapblock'" >/dev/null
wait "$mapblock" || true
assert_eq 1 "$waited" "two databases: a pass waited on the map's database"
[ "$(stat stop_ms)" -lt 3000 ] || fail "two databases: stopping the passes cancels the map's statement (the stop took $(stat stop_ms) ms)"
assert_eq 0 "$(stat keeper_passes)" "two databases: the pass that waited did not finish"
child 0 settle items2 "dbname=$MAPDB"
assert_eq 0 "$(wrong2)" "two databases: the next pass sets the rows"
# Switching back, two databases: rows written with only order_id_uuid get order_id from the map
# where the legacy table (legacy2 here) has the key; 9,000 distinct uuids, so the map is asked
# in two batches of at most 5,000.  A key the legacy table lacks stays NULL.
q "CREATE TABLE legacy2 (id bigint PRIMARY KEY); INSERT INTO legacy2 SELECT g FROM generate_series(1, 9000) g WHERE g <> 77;
   INSERT INTO items2 (order_no, line, order_id_uuid)
     SELECT 100000 + legacy_id, 9, id FROM orders_v7_id_map WHERE legacy_id <= 9000" >/dev/null
want_back=$(q "SELECT count(*) - 1 FROM items2 WHERE line = 9")
LEGACY_TABLE=public.legacy2 run_expect 0 ./helper keysback public items2 order_id public orders_v7 orders_v7_id_map bigint "dbname=$MAPDB"
assert_eq "$want_back" "$(stat keys_set)" "two databases, switching back: every key the legacy table has set"
assert_eq "0" "$(q "SELECT count(*) FROM items2 c JOIN orders_v7_id_map m ON m.id = c.order_id_uuid
                    WHERE c.line = 9 AND c.order_id IS DISTINCT FROM m.legacy_id AND m.legacy_id <> 77")" \
    "two databases, switching back: each the map's legacy key of its uuid"
assert_eq "1" "$(q "SELECT count(*) FROM items2 c JOIN orders_v7_id_map m ON m.id = c.order_id_uuid
                    WHERE c.line = 9 AND c.order_id IS NULL AND m.legacy_id = 77")" \
    "two databases, switching back: a key the legacy table lacks stays NULL"
q "DELETE FROM items2 WHERE line = 9" >/dev/null
# A child prepared by a version that made no trigger in this form (the column there, no
# trigger): the next prepare adds it.
q "DROP TRIGGER v7fill_order_id_uuid ON items2" >/dev/null
child 0 prepare items2 "dbname=$MAPDB"
assert_eq 1 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'items2'::regclass AND tgname = 'v7fill_order_id_uuid'")" \
    "two databases: the trigger made again on a column already there"
child 3 constrain items2 "dbname=$MAPDB"
assert_contains "$OUT" "cannot add a foreign key from public.items2 to public.orders_v7" "two databases: no foreign key"
assert_contains "$OUT" "do not cross databases" "two databases: the reason"
