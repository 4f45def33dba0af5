# v7fill migrate --child-mode migrate (issue 21): a parent of 3,000 rows and a child with NULL
# and orphan keys (no foreign key on the source) become their own UUIDv7 tables while a writer
# inserts, updates and deletes parent and child rows (a child inserted in the same transaction
# as its new parent); a kill -9 mid-run, a --follow run, then a rerun: the child target equals
# the source child through its own map, each child id carries its created_at to the ms, every
# order_id_uuid is the parent map's id of its legacy order_id (NULL for NULL keys and orphans),
# the foreign key to the parent's target exists; a child row applied before its parent's map
# row gets its uuid when the map row arrives (the map's trigger); --verify, --status of the
# child; --reverse before the switch refuses (exit 3).  --switch (after a kill -9 in a first one) under a writer
# inserting by the old names (it stops at the switch) and a reader: no statement waits 2 s, both
# names point to the UUIDv7 tables, each as many rows as its _legacy table through legacy_id,
# every order_id_uuid resolves, both phases stored switched; a rerun says already switched;
# --reverse then runs.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_ct
CINTO=items_ct_v7
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('v7fill_$INTO', 'v7fill_$CINTO') AND NOT active" >/dev/null || true
}
drop_slot
writer=
trap '[ -z "$writer" ] || kill "$writer" 2>/dev/null || true; drop_slot; rm -rf "$T_TMP"' EXIT

# Parents 1..3000 (times over 2 years); 12,000 children: every 40th key NULL, every 25th an
# orphan (a parent key that does not exist: 100000+).
q "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
   INSERT INTO orders SELECT g, timestamptz '2024-01-01' + g * interval '5 hours' + (g % 997) * interval '1.001 ms', g, 'n' || g
     FROM generate_series(1, 3000) g;
   CREATE SEQUENCE orders_w START 500000;
   CREATE TABLE items_ct (id bigserial PRIMARY KEY, order_id bigint, created_at timestamptz NOT NULL, qty int, label text);
   INSERT INTO items_ct (order_id, created_at, qty, label)
     SELECT CASE WHEN g % 40 = 0 THEN NULL WHEN g % 25 = 0 THEN 100000 + g ELSE g % 3000 + 1 END,
            timestamptz '2024-02-01' + g * interval '71 minutes' + (g % 991) * interval '1.003 ms', g, 'l' || g
       FROM generate_series(1, 12000) g"
# kill9_wait PID: kill -9, then wait until the slots are released
kill9_wait() {
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for _ in $(seq 1 50); do
        [ "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'v7fill_%_ct%' AND active")" = 0 ] && break
        sleep 0.2
    done
}
mig() { "$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" "$@"; }
CHILD=(--child 'public.items_ct(order_id)' --child-mode migrate)
digest_src() { q "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY id)) FROM orders"; }
digest_dst() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY legacy_id)) FROM $INTO"; }
cdigest_src() { q "SELECT count(*), md5(string_agg(id||'|'||coalesce(order_id::text, '-')||'|'||created_at||'|'||qty||'|'||label, ',' ORDER BY id)) FROM items_ct"; }
cdigest_dst() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||coalesce(order_id::text, '-')||'|'||created_at||'|'||qty||'|'||label, ',' ORDER BY legacy_id)) FROM $CINTO"; }

# ---- refused with the reason: a child without a time column of the parent's name
q "CREATE TABLE notime (id int PRIMARY KEY, order_id bigint)"
run_expect 3 mig --child 'public.notime(order_id)' --child-mode migrate --dry-run
assert_contains "$OUT" "no column created_at to mint its ids from" "a child without a time column"
assert_contains "$OUT" "public.notime(order_id):COLUMN" "the hint names the :COLUMN form"
run_expect 2 mig --child 'public.items_ct(order_id):' --child-mode migrate
assert_contains "$OUT" "--child takes" "an empty :TIMECOL"
run_expect 0 mig --child 'public.items_ct(order_id):created_at' --child-mode migrate --dry-run
assert_contains "$OUT" "child public.items_ct (--child-mode migrate): its own target public.$CINTO (key id kept as legacy_id, ids minted from created_at)" \
    "--dry-run prints the child's plan"
assert_eq "" "$(q "SELECT to_regclass('$CINTO')")" "--dry-run creates no child target"

# ---- the writer: parents and children inserted (one child in its parent's transaction),
# updated (a child's key moved to another parent), deleted
cat >writer.sql <<'SQL'
\set k random(1, 3000)
\set c random(1, 12000)
BEGIN;
INSERT INTO orders VALUES (nextval('orders_w'), now() - interval '1 minute', 1, 'w');
INSERT INTO items_ct (order_id, created_at, qty, label) VALUES (currval('orders_w'), now(), 1, 'w');
INSERT INTO items_ct (order_id, created_at, qty, label) VALUES (:k, now(), 2, 'w2');
UPDATE orders SET amount = amount + 1, note = note || 'u' WHERE id = :k;
UPDATE items_ct SET qty = qty + 1, order_id = (:k % 3000) + 1 WHERE id = :c;
DELETE FROM items_ct WHERE id = :c + 7;
DELETE FROM orders WHERE id = (:k * 7) % 3000 + 1;
COMMIT;
SQL
"$PGBIN/pgbench" -n -c 2 -R 40 -T 600 --max-tries=10 -f writer.sql "$PGDATABASE" >writer.log 2>&1 &
writer=$!
sleep 0.5

# ---- kill -9 mid-run, then --follow for a while (rounds of parent and child), then stop
# v7fill itself in the background, not a subshell running mig: the signals must reach it.
"$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" "${CHILD[@]}" \
    --follow --batch-rows 500 >run1.log 2>&1 &
pid=$!
sleep 2.5
kill9_wait "$pid"
"$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" "${CHILD[@]}" \
    --follow >run2.log 2>&1 &
pid=$!
sleep 8
kill -INT "$pid"
wait "$pid" || true
cat run2.log
writer_stop

# ---- the final run (children taken from the stored migration)
run_expect 0 mig
echo "$OUT"
assert_contains "$OUT" "phase follow" "the rerun finishes"
assert_contains "$OUT" "child public.items_ct(order_id) -> public.$CINTO:" "the child's line names its target"
assert_eq "$(digest_src)" "$(digest_dst)" "the parent target equals the source"
assert_eq "$(cdigest_src)" "$(cdigest_dst)" "the child target equals the source child through legacy_id"
assert_eq "$(q "SELECT count(*) FROM $CINTO")" "$(q "SELECT count(*) FROM ${CINTO}_id_map m JOIN $CINTO t USING (legacy_id, id)")" \
    "the child's own map: one row per child target row"
assert_eq 0 "$(q "SELECT count(*) FROM $CINTO WHERE ('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint
                   <> floor(extract(epoch FROM created_at) * 1000)::bigint")" "each child id carries its created_at to the ms"
assert_eq 0 "$(q "SELECT count(*) FROM $CINTO c LEFT JOIN ${INTO}_id_map m ON m.legacy_id = c.order_id
                   WHERE c.order_id_uuid IS DISTINCT FROM m.id")" "every order_id_uuid is the parent map's id of its order_id"
assert_eq "$(q "SELECT count(*) FROM items_ct WHERE order_id IS NOT NULL AND order_id NOT IN (SELECT id FROM orders)")" \
    "$(q "SELECT count(*) FROM $CINTO WHERE order_id IS NOT NULL AND order_id_uuid IS NULL")" "orphans: exactly the source's"
[ "$(q "SELECT count(*) FROM $CINTO WHERE order_id >= 500000 AND order_id_uuid IS NOT NULL")" -gt 0 ] ||
    fail "children inserted with their new parent have their uuid"
assert_eq 1 "$(q "SELECT count(*) FROM pg_constraint WHERE conrelid = '$CINTO'::regclass AND contype = 'f'
                   AND confrelid = '$INTO'::regclass")" "the foreign key to the parent's target"
assert_eq "migrate" "$(q "SELECT child_mode FROM v7fill.migration WHERE into_table = '$INTO'")" "the mode is stored"
assert_eq "$CINTO" "$(q "SELECT children->0->>'into_table' FROM v7fill.migration WHERE into_table = '$INTO'")" "the child's target is stored"
assert_eq "follow" "$(q "SELECT phase FROM v7fill.migration WHERE into_table = '$CINTO'")" "the child's own migration row"
nulls=$(q "SELECT count(*) FROM items_ct WHERE order_id IS NULL")
assert_contains "$OUT" "null_keys=$nulls " "the NULL keys counted"

# ---- a child row applied before its parent's map row: the child's slot alone first
q "BEGIN; INSERT INTO orders VALUES (900001, now(), 5, 'late'); INSERT INTO items_ct (order_id, created_at, qty, label) VALUES (900001, now(), 9, 'early'); COMMIT"
run_expect 0 "$V7FILL" migrate --from public.items_ct --key id --time-column created_at --into "$CINTO"
assert_eq "1|" "$(q "SELECT count(*), max(order_id_uuid::text) FROM $CINTO WHERE order_id = 900001")" "the child came first: no uuid yet"
run_expect 0 mig
assert_eq "$(q "SELECT id FROM ${INTO}_id_map WHERE legacy_id = 900001")" "$(q "SELECT order_id_uuid FROM $CINTO WHERE order_id = 900001")" \
    "the parent's map row, when it arrives, gives the child its uuid"

# ---- a rerun changes nothing
before="$(digest_dst) $(cdigest_dst)"
run_expect 0 mig
assert_not_contains "$OUT" "created the" "a rerun creates nothing"
assert_eq "$before" "$(digest_dst) $(cdigest_dst)" "a rerun leaves both targets as they were"

# ---- --verify, --status
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
echo "$OUT"
assert_contains "$OUT" "verdict: OK" "--verify"
assert_eq 1 "$(echo "$OUT" | grep -cE "^public\.$CINTO +join pairs +[0-9]+ +[0-9]+ +OK")" "--verify checks the child's join pairs"
k=$(q "SELECT min(c.legacy_id) FROM $CINTO c JOIN ${INTO}_id_map m ON m.legacy_id = c.order_id")
q "UPDATE $CINTO SET order_id_uuid = NULL WHERE legacy_id = $k"
run_expect 1 "$V7FILL" migrate --into "$INTO" --verify
assert_contains "$OUT" "MISMATCH" "a child row without its uuid fails --verify"
q "UPDATE $CINTO SET order_id = order_id WHERE legacy_id = $k"
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
run_expect 0 "$V7FILL" migrate --into "$INTO" --status
echo "$OUT"
assert_contains "$OUT" "child public.items_ct" "--status lists the child"
assert_contains "$OUT" "$CINTO" "--status names the child's target"

# ---- --reverse needs the switch first, a child's own migration is not switched alone
run_expect 3 "$V7FILL" migrate --into "$INTO" --reverse
assert_contains "$OUT" "--reverse follows --switch" "--reverse before the switch refuses with the reason"
run_expect 3 "$V7FILL" migrate --into "$CINTO" --switch
assert_contains "$OUT" "child of the migration into public.$INTO" "the child's own migration is not switched alone"
assert_eq "follow" "$(q "SELECT phase FROM v7fill.migration WHERE into_table = '$INTO'")" "nothing switched"
assert_eq "items_ct" "$(q "SELECT relname FROM pg_class WHERE relname = 'items_ct'")" "nothing renamed"

# ---- --switch: the parent and the child together.  The writer inserts a parent and its child
# by the OLD names and types, and stops at the switch: it takes its locks first (the names are
# resolved again once granted), then writes only while orders.id is still bigint.
wsql="DO \$\$ BEGIN LOCK TABLE orders, items_ct IN ROW EXCLUSIVE MODE;
  IF (SELECT atttypid FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id') = 'bigint'::regtype THEN
    EXECUTE 'INSERT INTO orders (id, created_at, amount, note) VALUES (nextval(''orders_w''), now(), 3, ''sw'')';
    EXECUTE 'INSERT INTO items_ct (order_id, created_at, qty, label) VALUES (currval(''orders_w''), now(), 3, ''sw'')';
  END IF; END \$\$"
rsql="SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM items_ct)"
# A kill -9 in the middle of a switch first, then the switch under load finishes it.  The kill
# lands while the switch waits for its lock (a transaction holds items_ct), after its catch-ups
# and the way back's slots: a switch takes well under a second, a fixed sleep could miss it.
PGAPPNAME=holder psql -X -q -c "BEGIN; LOCK TABLE items_ct IN ROW EXCLUSIVE MODE; SELECT pg_sleep(60); COMMIT" >/dev/null 2>&1 &
holder=$!
"$V7FILL" migrate --into "$INTO" --switch >kill.log 2>&1 &
pid=$!
for _ in $(seq 1 400); do
    [ "$(q "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'items_ct'::regclass")" = 1 ] && break
    sleep 0.05
done
[ "$(q "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'items_ct'::regclass")" = 1 ] ||
    fail "the switch did not wait for its lock: $(cat kill.log)"
kill9_wait "$pid"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'holder'" >/dev/null
wait "$holder" || true
switch_under_load "$wsql" "$rsql" migrate --into "$INTO" --switch
echo "$OUT"
[ "$(q "SELECT count(*) FROM orders_legacy WHERE note = 'sw'")" -gt 0 ] || fail "the writer wrote during the test"
assert_contains "$OUT" "phase switched" "--switch with a migrate-mode child"
assert_contains "$OUT" "lock held" "the lock hold time printed"
assert_contains "$OUT" "child public.items_ct is its UUIDv7 table now" "the notes name the child"
assert_contains "$OUT" "order_id_uuid" "the notes name the child's uuid column"
assert_contains "$OUT" "ON DELETE SET NULL" "the notes name the foreign key's rule to change"
assert_eq "uuid|uuid" "$(q "SELECT (SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id')
    || '|' || (SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'items_ct'::regclass AND attname = 'id')")" \
    "orders and items_ct name the UUIDv7 tables"
assert_eq "" "$(q "SELECT coalesce(to_regclass('$INTO')::text, '') || coalesce(to_regclass('$CINTO')::text, '')")" "the _v7 names are gone"
for t in orders items_ct; do
    n=$(q "SELECT count(*) FROM $t")
    assert_eq "$n" "$(q "SELECT count(*) FROM ${t}_legacy")" "$t: as many rows as ${t}_legacy"
    assert_eq "$n" "$(q "SELECT count(*) FROM $t n JOIN ${t}_legacy l ON l.id = n.legacy_id")" "$t: every row is a ${t}_legacy row through legacy_id"
done
assert_eq 0 "$(q "SELECT count(*) FROM items_ct WHERE order_id_uuid IS NOT NULL AND order_id_uuid NOT IN (SELECT id FROM orders)")" \
    "every order_id_uuid resolves to an orders id"
assert_eq 0 "$(q "SELECT count(*) FROM items_ct WHERE order_id IN (SELECT id FROM orders_legacy) AND order_id_uuid IS NULL")" \
    "every child row of a legacy parent has its order_id_uuid"
assert_eq "switched|switched" "$(q "SELECT string_agg(phase, '|' ORDER BY into_table) FROM v7fill.migration WHERE into_table IN ('$INTO', '$CINTO')")" \
    "the parent's and the child's phases are stored as switched"
assert_eq "items_ct_legacy" "$(q "SELECT legacy_table FROM v7fill.migration WHERE into_table = '$CINTO'")" "the child's legacy table stored"
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
assert_contains "$OUT" "already switched" "a rerun of the switch says so"
# a kill -9 between the switch's commit and storing the phases: the rerun finds the names
q "UPDATE v7fill.migration SET phase = 'follow' WHERE into_table IN ('$INTO', '$CINTO')"
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
assert_contains "$OUT" "already switched" "a rerun with the phases not stored says switched"
assert_eq "switched|switched" "$(q "SELECT string_agg(phase, '|' ORDER BY into_table) FROM v7fill.migration WHERE into_table IN ('$INTO', '$CINTO')")" \
    "the phases stored by the rerun"
# the way back of the parent and the child (t_migrate_childreverse.sh tests it under a writer)
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
assert_contains "$OUT" "phase reverse" "--reverse after the switch"
for t in orders items_ct; do
    assert_eq "$(q "SELECT count(*) FROM $t")" "$(q "SELECT count(*) FROM ${t}_legacy")" "$t: as many rows as ${t}_legacy after --reverse"
done
q "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('v7fill_${INTO}_rev', 'v7fill_${CINTO}_rev')" >/dev/null
drop_slot
echo "ok t_migrate_childtable"
