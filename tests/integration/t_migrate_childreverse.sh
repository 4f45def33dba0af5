# v7fill migrate --reverse with a --child-mode migrate child (issue 21): after the switch a writer
# inserts (a child in its new parent's transaction, by order_id_uuid only), updates (a child moved
# to another parent by its uuid alone) and deletes parent and child rows in the new tables; a
# --reverse --follow is killed with -9, another stopped with SIGINT, then --reverse until caught
# up: the legacy parent and child equal the new ones through the maps (counts and a digest of
# every row, the child's order_id the parent map's legacy key of its order_id_uuid), rows created
# after the switch got their legacy keys from the old sequences and map rows, no legacy child
# names a legacy parent that is missing; a rerun changes nothing; --status shows both ways back.
# Switching back: killed with -9 while a lock makes it retry (nothing renamed), then, after more
# writes the way back has not applied, under a writer (updating a parent and a child row by
# columns both shapes have) and a reader (no statement waits 2 s): the old names hold the legacy
# tables again with every write (digests through the maps; the writer's rows counted), both ways
# back's slots dropped, the switch's defaults gone and the map's trigger back, the UUIDv7 child's
# order_id the legacy one's again, phases follow, and the application writes by integer keys
# again; a switch back killed after its commit finishes; the printed command resumes the capture.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_cr
CINTO=items_cr_v7
slots() { q "SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'v7fill_%_cr%'"; }
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'v7fill_%_cr%' AND NOT active" >/dev/null || true
}
drop_slot
writer=
trap '[ -z "$writer" ] || kill "$writer" 2>/dev/null || true; drop_slot; rm -rf "$T_TMP"' EXIT

# Parents 1..500 (the last 60 days), 2,000 children: every 40th key NULL, every 25th an orphan.
q "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
   INSERT INTO orders SELECT g, now() - g * interval '3 hours' + (g % 97) * interval '1.001 ms', g, 'n' || g
     FROM generate_series(1, 500) g;
   SELECT setval('orders_id_seq', 500);
   CREATE TABLE items_cr (id bigserial PRIMARY KEY, order_id bigint, created_at timestamptz NOT NULL, qty int, label text);
   INSERT INTO items_cr (order_id, created_at, qty, label)
     SELECT CASE WHEN g % 40 = 0 THEN NULL WHEN g % 25 = 0 THEN 100000 + g ELSE g % 500 + 1 END,
            now() - g * interval '41 minutes' + (g % 91) * interval '1.003 ms', g, 'l' || g
       FROM generate_series(1, 2000) g;
   CREATE FUNCTION t_uuid7() RETURNS uuid LANGUAGE sql VOLATILE AS \$\$
     SELECT (lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7'
             || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid \$\$"
kill9_wait() {
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for _ in $(seq 1 50); do
        [ "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'v7fill_%_cr%' AND active")" = 0 ] && break
        sleep 0.2
    done
}

run_expect 0 "$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" \
    --child 'public.items_cr(order_id)' --child-mode migrate
assert_contains "$OUT" "phase follow" "the migration is caught up"
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
echo "$OUT"
assert_contains "$OUT" "phase switched" "switched"
assert_contains "$OUT" "way back: v7fill migrate --into public.$INTO --reverse" "the switch gives the way back"
assert_contains "$OUT" "slot \"v7fill_${CINTO}_rev\"" "the switch names the child's way-back slot"
assert_not_contains "$OUT" "no way back in this version" "no refusal any more"
assert_eq "v7fill_${CINTO}_rev,v7fill_${INTO}_rev" "$(q "SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots WHERE slot_name LIKE '%_rev' AND database = current_database()")" \
    "a way-back slot for the parent and one for the child"
assert_eq 0 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = '${INTO}_id_map'::regclass")" \
    "the switch drops the map's trigger (the way back writes the map; it would touch live child rows)"

# ---- after the switch: the application writes the new tables, the child by order_id_uuid only
cat >writer.sql <<'SQL'
\set k random(1, 500)
\set c random(1, 2000)
\set d random(1, 3)
BEGIN;
WITH p AS (INSERT INTO orders (id, created_at, amount, note) VALUES (t_uuid7(), now(), 1, 'r') RETURNING id)
  INSERT INTO items_cr (id, order_id_uuid, created_at, qty, label) SELECT t_uuid7(), p.id, now(), 1, 'r' FROM p;
INSERT INTO items_cr (id, order_id_uuid, created_at, qty, label) SELECT t_uuid7(), id, now(), 2, 'r2' FROM orders WHERE legacy_id = :k;
UPDATE orders SET amount = amount + 1, note = note || 'u' WHERE legacy_id = :k;
UPDATE items_cr SET qty = qty + 1, order_id_uuid = (SELECT id FROM orders WHERE legacy_id = (:k % 500) + 1) WHERE legacy_id = :c;
UPDATE items_cr SET qty = qty + 10, label = label || 'u' WHERE id = (SELECT id FROM items_cr WHERE label LIKE 'r2%' ORDER BY id DESC LIMIT 1);
DELETE FROM items_cr WHERE legacy_id = :c + 7;
DELETE FROM orders WHERE legacy_id = (:k * 7) % 500 + 1;
\if :d = 1
DELETE FROM orders WHERE id = (SELECT id FROM orders WHERE note = 'r' ORDER BY id LIMIT 1);
\endif
COMMIT;
SQL
"$PGBIN/pgbench" -n -c 1 -R 40 -T 600 -f writer.sql "$PGDATABASE" >writer.log 2>&1 &
writer=$!
sleep 1

# ---- --reverse --follow killed with -9, then one stopped with SIGINT, while the writer writes
"$V7FILL" migrate --into "$INTO" --reverse --follow >rev1.log 2>&1 &
pid=$!
sleep 3
kill9_wait "$pid"
"$V7FILL" migrate --into "$INTO" --reverse --follow >rev2.log 2>&1 &
pid=$!
# Its rounds (every 0.5 s) keep each way back's stream open: the walsenders serving the
# parent's and the child's reverse slots stay the same ones (before, every round opened both
# streams again, and each new walsender decoded the WAL since its slot's restart point again).
walsenders() { q "SELECT string_agg(coalesce(active_pid::text, '-'), ',' ORDER BY slot_name) FROM pg_replication_slots
                   WHERE slot_name IN ('v7fill_${INTO}_rev', 'v7fill_${CINTO}_rev')"; }
poll_until "SELECT count(*) = 2 FROM pg_replication_slots WHERE slot_name IN ('v7fill_${INTO}_rev', 'v7fill_${CINTO}_rev') AND active"     "both ways back streaming" 30
ws1=$(walsenders)
sleep 2
ws2=$(walsenders)
assert_eq "$ws1" "$ws2" "the ways back's walsenders over 2 s of --follow rounds (the streams stay open)"
sleep 1
kill -INT "$pid"
st=0; wait "$pid" || st=$?
cat rev2.log
assert_eq 0 "$st" "--reverse --follow stops on SIGINT"
sleep 1
kill "$writer" 2>/dev/null || true; wait "$writer" 2>/dev/null || true
writer=
sed -n 1,8p writer.log
[ "$(q "SELECT count(*) FROM orders WHERE note = 'r'")" -gt 5 ] || fail "the writer wrote after the switch"
# The application clears a child's link (order_id_uuid = NULL; its parent stays): the legacy
# child's order_id becomes NULL, not the stale integer the new row still carries.  A row whose
# order_id still names that same parent: the writer moves children by order_id_uuid (order_id
# then names the old parent, which it may delete, and such a key is kept by design).
cleared=$(q "SELECT c.legacy_id FROM items_cr c JOIN orders o ON o.id = c.order_id_uuid AND o.legacy_id = c.order_id ORDER BY c.legacy_id LIMIT 1")
q "UPDATE items_cr SET order_id_uuid = NULL WHERE legacy_id = $cleared" >/dev/null

run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
echo "$OUT"
assert_contains "$OUT" "phase reverse" "--reverse until caught up"

pdigest_old() { q "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY id)) FROM orders_legacy"; }
pdigest_new() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY legacy_id)) FROM orders"; }
# child_diff NEW LEGACY [FILTER]: rows of the UUIDv7 child NEW and the legacy child LEGACY that
# differ (the first ones printed, their count the output).  The legacy order_id expected: the
# parent map's legacy key of order_id_uuid; with order_id_uuid NULL, NULL when order_id names a
# mapped parent (the link was cleared, or its parent deleted while order_id named a live one),
# else order_id (NULL keys, orphans).  One case depends on the order of events, not on the end
# state: order_id_uuid NULL and order_id naming a parent deleted since; the legacy order_id is
# then order_id (deleted first) or NULL (unlinked first), both right, and both accepted.
child_diff() {
    local w=${3:-true}
    local sel="SELECT n.id, n.e, n.amb, n.raw, n.u, l.order_id AS l_order_id FROM
        (SELECT c.legacy_id AS id, c.order_id AS raw, c.order_id_uuid AS u, c.created_at, c.qty, c.label,
                CASE WHEN c.order_id_uuid IS NOT NULL THEN coalesce(pm.legacy_id, c.order_id)
                     WHEN EXISTS (SELECT 1 FROM ${INTO}_id_map x WHERE x.legacy_id = c.order_id) THEN NULL
                     ELSE c.order_id END AS e,
                (c.order_id_uuid IS NULL AND c.order_id BETWEEN 1 AND 500
                 AND NOT EXISTS (SELECT 1 FROM ${INTO}_id_map x WHERE x.legacy_id = c.order_id)) AS amb
           FROM $1 c LEFT JOIN ${INTO}_id_map pm ON pm.id = c.order_id_uuid WHERE $w) n
        FULL JOIN (SELECT * FROM $2 c WHERE $w) l USING (id)
        WHERE row(CASE WHEN n.amb AND l.order_id IS NULL THEN NULL ELSE n.e END, n.created_at, n.qty, n.label)
              IS DISTINCT FROM row(l.order_id, l.created_at, l.qty, l.label)"
    q "SELECT 'differs', d.* FROM ($sel) d ORDER BY 2 LIMIT 8" >&2
    q "SELECT count(*) FROM ($sel) d"
}
cdigest_old() { q "SELECT count(*), md5(string_agg(id||'|'||coalesce(order_id::text, '-')||'|'||created_at||'|'||qty||'|'||label, ',' ORDER BY id)) FROM items_cr_legacy"; }
assert_eq "$(pdigest_new)" "$(pdigest_old)" "the legacy parent equals the new one through legacy_id"
# printed: the first child rows that differ (none when the digests agree)
assert_eq 0 "$(child_diff items_cr items_cr_legacy)" "the legacy child equals the new one (order_id through the parent's map)"
assert_eq "1|" "$(q "SELECT count(*) || '|' || coalesce(max(order_id)::text, '') FROM items_cr_legacy WHERE id = $cleared")" \
    "a child whose link the application cleared has no parent in the legacy child either"
[ "$(q "SELECT count(*) FROM items_cr_legacy WHERE label = 'r' AND order_id IS NOT NULL")" -gt 0 ] ||
    fail "child rows created after the switch with their new parent reached the legacy child with its key"
[ "$(q "SELECT count(*) FROM items_cr_legacy WHERE label LIKE 'r2%u%'")" -gt 0 ] ||
    fail "updates of child rows created after the switch reached the legacy child"
assert_eq 0 "$(q "SELECT count(*) FROM items_cr_legacy WHERE label IN ('r', 'r2') AND order_id IS NOT NULL
                   AND order_id NOT IN (SELECT id FROM orders_legacy)")" "no legacy child row made after the switch names a missing legacy parent"
assert_eq "$(q "SELECT count(*) FROM orders")" "$(q "SELECT count(*) FROM orders o JOIN ${INTO}_id_map m USING (legacy_id, id)")" \
    "the parent's map: one row per parent"
assert_eq "$(q "SELECT count(*) FROM items_cr")" "$(q "SELECT count(*) FROM items_cr c JOIN ${CINTO}_id_map m USING (legacy_id, id)")" \
    "the child's map: one row per child, those made after the switch too"
assert_eq 0 "$(q "SELECT count(*) FROM items_cr WHERE legacy_id <= 2000 AND label IN ('r', 'r2')")" \
    "child rows made after the switch have legacy keys from the old sequence"
assert_eq "reverse|reverse" "$(q "SELECT string_agg(phase, '|' ORDER BY into_table) FROM v7fill.migration WHERE into_table IN ('$INTO', '$CINTO')")" \
    "the parent's and the child's phases stored as reverse"

# ---- a rerun changes nothing
before="$(pdigest_old) $(cdigest_old)"
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
assert_contains "$OUT" "inserted=0 updated=0 deleted=0" "a rerun applies nothing"
assert_eq "$before" "$(pdigest_old) $(cdigest_old)" "a rerun leaves the legacy tables as they were"

# ---- --status shows both ways back
run_expect 0 "$V7FILL" migrate --into "$INTO" --status
echo "$OUT"
assert_contains "$OUT" "way back           public.orders_legacy up to" "--status: the parent's way back"
assert_contains "$OUT" "way back           public.items_cr_legacy up to" "--status: the child's way back"
assert_contains "$OUT" "v7fill_${CINTO}_rev" "--status names the child's slot"

# ---- the child alone refuses
run_expect 3 "$V7FILL" migrate --into "$CINTO" --reverse
assert_contains "$OUT" "goes with its parent's migration" "a child's own --reverse refuses"

# ---- switching back killed with -9 inside its transaction (a lock on the legacy child makes it
# retry), then nothing is renamed
PGAPPNAME=t_blocker psql -X -q -At -c "BEGIN; LOCK TABLE items_cr_legacy IN ACCESS SHARE MODE; SELECT pg_sleep(120); COMMIT" >blocker.log 2>&1 &
blocker=$!
for _ in $(seq 1 50); do
    [ "$(q "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 't_blocker' AND l.granted AND l.relation = 'items_cr_legacy'::regclass")" = 1 ] && break
    sleep 0.1
done
"$V7FILL" migrate --into "$INTO" --switch >back_kill.log 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q "switch attempt 1 of 10" back_kill.log && break; sleep 0.1; done
kill9_wait "$pid"
cat back_kill.log
assert_contains "$(cat back_kill.log)" "switch attempt 1 of 10" "the switch back was retrying its lock when killed"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 't_blocker'" >/dev/null
wait "$blocker" || true
assert_eq "uuid|uuid|items_cr_legacy" "$(q "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id'")|$(q "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'items_cr'::regclass AND attname = 'id'")|$(q "SELECT to_regclass('items_cr_legacy')")" \
    "the killed switch back renamed nothing"

# ---- more writes the way back has not applied yet (inserts, updates, deletes of both tables)
"$PGBIN/pgbench" -n -c 1 -R 40 -T 2 -f writer.sql "$PGDATABASE" >writer2.log 2>&1 || { cat writer2.log; fail "the writer before the switch back"; }
[ "$(pdigest_new)" != "$(pdigest_old)" ] || fail "writes pending for the switch back"
[ "$(child_diff items_cr items_cr_legacy 2>/dev/null)" != 0 ] || fail "child writes pending for the switch back"

# ---- switching back under a writer and a reader; the writer's parent and child rows by their times
PT=$(q "SELECT created_at FROM orders WHERE legacy_id <= 500 ORDER BY legacy_id LIMIT 1")
CT=$(q "SELECT created_at FROM items_cr WHERE legacy_id <= 2000 ORDER BY legacy_id LIMIT 1")
a0=$(q "SELECT amount FROM orders WHERE created_at = '$PT'")
q0=$(q "SELECT qty FROM items_cr WHERE created_at = '$CT'")
# baseline: the same writer and reader for 3 s without a switch
wsql="WITH p AS (UPDATE orders SET amount = amount + 1 WHERE created_at = '$PT' RETURNING 1) UPDATE items_cr SET qty = qty + 1 WHERE created_at = '$CT'"
rsql="SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM items_cr)"
timed_start base_w "$wsql"; timed_start base_r "$rsql"; sleep 3
echo "baseline: writer $(timed_stop base_w); reader $(timed_stop base_r)"
a0=$((a0 + $(grep -c '^Time: ' base_w.log)))
q0=$((q0 + $(grep -c '^Time: ' base_w.log)))
switch_under_load "$wsql" "$rsql" migrate --into "$INTO" --switch
echo "$OUT"
assert_contains "$OUT" "switched back: public.orders is the legacy table again" "switched back"
assert_contains "$OUT" "child public.items_cr is the legacy table again" "the child named in the advice"
assert_contains "$OUT" "phase follow" "phase follow again"
nw=$(grep -c '^Time: ' sw_w.log)
assert_eq "bigint|bigint|uuid|uuid" "$(q "SELECT string_agg(format_type(atttypid, NULL), '|' ORDER BY attrelid::regclass::text <> 'orders', attrelid::regclass::text <> 'items_cr', attrelid::regclass::text)
    FROM pg_attribute WHERE attrelid IN ('orders'::regclass, 'items_cr'::regclass, '$INTO'::regclass, '$CINTO'::regclass) AND attname = 'id'")" \
    "the old names hold the integer-keyed tables, the _v7/into names the UUIDv7 ones"
assert_eq "||" "$(q "SELECT to_regclass('orders_legacy')")|$(q "SELECT to_regclass('items_cr_legacy')")|" "no _legacy names left"
assert_eq "$((a0 + nw))|$((q0 + nw))" "$(q "SELECT amount FROM orders WHERE created_at = '$PT'")|$(q "SELECT qty FROM items_cr WHERE created_at = '$CT'")" \
    "every one of the writer's $nw statements reached the legacy rows (before and after the switch back)"
[ "$(q "SELECT amount FROM orders WHERE created_at = '$PT'")" -gt "$(q "SELECT amount FROM $INTO WHERE created_at = '$PT'")" ] ||
    fail "the writer wrote the legacy table after the switch back"
pdig() { q "SELECT count(*), md5(string_agg($2||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY $2)) FROM $1 WHERE created_at <> '$PT'"; }
assert_eq "$(pdig "$INTO" legacy_id)" "$(pdig orders id)" "the legacy parent holds every write made to the new one (through legacy_id)"
assert_eq 0 "$(child_diff "$CINTO" items_cr "c.created_at <> '$CT'")" "the legacy child holds every write made to the new one (order_id through the parent's map)"
assert_eq 0 "$(q "SELECT count(*) FROM $CINTO c JOIN items_cr l ON l.id = c.legacy_id WHERE c.order_id IS DISTINCT FROM l.order_id AND NOT (l.order_id IS NULL AND c.order_id_uuid IS NULL AND c.order_id BETWEEN 1 AND 500 AND NOT EXISTS (SELECT 1 FROM ${INTO}_id_map x WHERE x.legacy_id = c.order_id))")" \
    "the UUIDv7 child's order_id is the legacy child's again (rows the application wrote or moved by order_id_uuid)"
assert_contains "$OUT" "resume the capture to keep the UUIDv7 table current: v7fill migrate --from public.orders --key id --time-column created_at --into public.$INTO --child 'public.items_cr(order_id)' --child-mode migrate" \
    "the command resuming the capture"
assert_eq "" "$(q "SELECT string_agg(slot_name, ',') FROM pg_replication_slots WHERE slot_name LIKE '%_rev' AND database = current_database()")" "both ways back's slots dropped"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.migrate_reverse WHERE into_table IN ('public.$INTO', 'public.$CINTO')")" "both ways back's states deleted"
assert_eq "follow|follow" "$(q "SELECT string_agg(phase, '|' ORDER BY into_table) FROM v7fill.migration WHERE into_table IN ('$INTO', '$CINTO')")" \
    "the parent's and the child's phases stored as follow"
assert_eq 0 "$(q "SELECT count(*) FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
    WHERE d.adrelid IN ('$INTO'::regclass, '$CINTO'::regclass) AND a.attname = 'legacy_id'")" "the switch's legacy_id defaults dropped"
assert_eq 1 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = '${INTO}_id_map'::regclass AND NOT tgisinternal")" \
    "the trigger on the parent's map made again"

# ---- the application writes by integer keys again (the old sequences go on past every legacy_id)
newid=$(q "INSERT INTO orders (created_at, amount, note) VALUES (now(), 7, 'legacy again') RETURNING id")
[ "$newid" -gt "$(q "SELECT max(legacy_id) FROM $INTO")" ] || fail "the old sequence numbers past every legacy_id ($newid)"
q "INSERT INTO items_cr (order_id, created_at, qty, label) VALUES ($newid, now(), 7, 'legacy again');
   UPDATE items_cr SET qty = 8 WHERE order_id = $newid; UPDATE orders SET amount = 8 WHERE id = $newid" >/dev/null
assert_eq "8|8" "$(q "SELECT o.amount || '|' || c.qty FROM orders o JOIN items_cr c ON c.order_id = o.id WHERE o.id = $newid")" \
    "a parent and its child written by integer keys"

# ---- killed after the commit, before the phases were stored: the rerun finishes
q "UPDATE v7fill.migration SET phase = 'reverse', legacy_table = CASE into_table WHEN '$INTO' THEN 'orders_legacy' ELSE 'items_cr_legacy' END
   WHERE into_table IN ('$INTO', '$CINTO')" >/dev/null
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
assert_contains "$OUT" "already switched back" "a rerun of the switch back"
assert_eq "follow|follow" "$(q "SELECT string_agg(phase || legacy_table, '|' ORDER BY into_table) FROM v7fill.migration WHERE into_table IN ('$INTO', '$CINTO')")" \
    "the rerun stores both phases as follow"

# ---- the printed command resumes the capture: the rows written by integer keys reach the UUIDv7 tables
run_expect 0 "$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" \
    --child 'public.items_cr(order_id)' --child-mode migrate
assert_eq "8|8|true" "$(q "SELECT o.amount || '|' || c.qty || '|' || (c.order_id_uuid = o.id) FROM $INTO o JOIN $CINTO c ON c.order_id = o.legacy_id WHERE o.legacy_id = $newid")" \
    "the parent and child written by integer keys after the switch back are in the UUIDv7 tables, linked by uuid"

# ---- a second cycle without a writer: switch, children written by order_id_uuid only before
# and after --reverse, switch back.  The switch back's key fill updates the UUIDv7 child (its
# order_id from the map); those updates are changes its way back reads: applied before the lock,
# so nothing is left for it (they used to be applied under the lock, which then scanned the
# child again).
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
assert_contains "$OUT" "phase switched" "switched forward again after a switch back"
child_writes() {
    q "WITH p AS (INSERT INTO orders (id, created_at, amount, note)
                    SELECT t_uuid7(), now(), 1, '$1' FROM generate_series(1, 50) RETURNING id)
       INSERT INTO items_cr (id, order_id_uuid, created_at, qty, label) SELECT t_uuid7(), id, now(), 1, '$1' FROM p" >/dev/null
}
child_writes c2a
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
child_writes c2b
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
echo "$OUT"
assert_contains "$OUT" "switched back: public.orders is the legacy table again" "switched back a second time"
assert_contains "$OUT" "100 child rows got their legacy key from the map" "the key fill found the 100 children written by uuid"
assert_contains "$OUT" ", 0 changes applied under it" \
    "the key fill's own updates were applied before the lock: nothing left to apply under it"
assert_eq 100 "$(q "SELECT count(*) FROM items_cr c JOIN orders o ON o.id = c.order_id WHERE c.label IN ('c2a', 'c2b') AND o.note = c.label")" \
    "the legacy child rows of the second cycle name their legacy parents"
assert_eq 100 "$(q "SELECT count(*) FROM $CINTO c JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid WHERE c.label IN ('c2a', 'c2b') AND c.order_id = m.legacy_id")" \
    "the UUIDv7 child rows of the second cycle carry their parents' legacy keys"

# ---- a third cycle: writes the way back applies under the switch back's lock (a transaction the
# switch's LOCK waits for: 20 parents with a child each by order_id_uuid only, and a child moved
# to another parent by its uuid alone), and a first attempt that fails after its key fill (a
# reader holds the legacy parent, which the renames need, past the lock timeout): that fill is
# rolled back with the attempt, the way back's writes are not.  The fill under the lock of the
# attempt that succeeds reads the 21 child rows the way back wrote under the first one (by id),
# not every row of the child, and sets their keys.
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
assert_contains "$OUT" "phase switched" "switched forward a third time"
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
read -r mv_id to_uuid to_key <<<"$(q "SELECT c.id, p.id, p.legacy_id FROM items_cr c, orders p
    WHERE c.order_id_uuid IS NOT NULL AND p.legacy_id IS NOT NULL AND p.id <> c.order_id_uuid
    ORDER BY c.legacy_id, p.legacy_id LIMIT 1" | tr '|' ' ')"
[ -n "$to_key" ] || fail "a child to move and a parent to move it to"
cat >held.sql <<SQL
BEGIN;
WITH p AS (INSERT INTO orders (id, created_at, amount, note)
             SELECT t_uuid7(), now(), 1, 'c3' FROM generate_series(1, 20) RETURNING id)
INSERT INTO items_cr (id, order_id_uuid, created_at, qty, label) SELECT t_uuid7(), id, now(), 1, 'c3' FROM p;
UPDATE items_cr SET order_id_uuid = '$to_uuid' WHERE id = '$mv_id';
$(until_waited_sql "'orders'::regclass")
COMMIT;
SQL
psql -X -q -At -v ON_ERROR_STOP=1 -f held.sql >held.log 2>&1 &
held=$!
hold_lock "$PGDATABASE" orders_legacy "ACCESS SHARE" 120
( # the reader ends 1 s after the switch first waited for it: the first attempt has timed out
    for _ in $(seq 1 1200); do
        [ "$(q "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'orders_legacy'::regclass")" -ge 1 ] && break
        sleep 0.05
    done
    sleep 1
    q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 't_holder'" >/dev/null
) &
ender=$!
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch --lock-timeout 300
wait "$held" || { cat held.log; fail "the transaction held open across the switch back"; }
wait "$ender" || true
wait "$HOLDER" || true
echo "$OUT"
assert_contains "$OUT" "switched back: public.orders is the legacy table again" "switched back a third time"
assert_contains "$OUT" "switch attempt 1 of 10" "the first attempt of the switch back failed on the reader's lock"
assert_contains "$OUT" "; 21 child rows got their legacy key from the map" \
    "the rows the fill set are counted once (the first attempt's fill was rolled back)"
assert_contains "$OUT" "the fill under the lock read only the rows of the 21 ids the way back wrote there" \
    "the fill under the lock read the 21 child rows the way back wrote under the first attempt, not the whole child"
assert_eq 20 "$(q "SELECT count(*) FROM items_cr c JOIN orders o ON o.id = c.order_id WHERE c.label = 'c3' AND o.note = 'c3'")" \
    "the legacy child rows of the third cycle name their legacy parents"
assert_eq 20 "$(q "SELECT count(*) FROM $CINTO c JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid WHERE c.label = 'c3' AND c.order_id = m.legacy_id")" \
    "the UUIDv7 child rows of the third cycle carry their parents' legacy keys (set by the attempt that committed)"
assert_eq "$to_key|$to_key" "$(q "SELECT c.order_id || '|' || l.order_id FROM $CINTO c JOIN items_cr l ON l.id = c.legacy_id WHERE c.id = '$mv_id'")" \
    "the child moved by its uuid alone names its new parent's legacy key on both sides"
assert_eq 0 "$(q "SELECT count(*) FROM $CINTO c JOIN items_cr l ON l.id = c.legacy_id WHERE c.order_id IS DISTINCT FROM l.order_id AND NOT (l.order_id IS NULL AND c.order_id_uuid IS NULL AND c.order_id BETWEEN 1 AND 500 AND NOT EXISTS (SELECT 1 FROM ${INTO}_id_map x WHERE x.legacy_id = c.order_id))")" \
    "after the third cycle the UUIDv7 child's order_id is the legacy child's everywhere"
drop_slot
echo "ok t_migrate_childreverse"
