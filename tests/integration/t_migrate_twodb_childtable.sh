# v7fill migrate between two databases with a --child-mode migrate child (issue 21): the copy and
# the capture of parent and child (the child's UUIDv7 table on the target, its order_id_uuid from
# the parent's map there), --switch (the source's parent and child renamed <name>_legacy in one
# short transaction; the target keeps its names; the child target's legacy_id gets a sequence of
# its own going on from the source's) killed once while retrying its lock, failing once with the
# source's session ended between the target's commit and the source's (nothing renamed, said
# with what to run; the next capture run makes the map's trigger again), and then run under the
# application's writer and a reader on the source (nothing lost, no statement waits 2 s), then
# the application writes the target: a new parent with
# a child by order_id_uuid only, a child moved to another parent by its uuid alone, a child
# unlinked, a child and a parent deleted.  --reverse (read from the target's slots, written into
# the source's legacy tables, the child's order_id translated through the parent's map on the
# target) makes the legacy tables equal the new ones through the maps; a rerun applies nothing.
# Switching back (killed once while retrying, then retrying its lock on the source while a
# reader holds it, with the target's transaction failing after the source's commit) restores the source's names, the child target's order_id follows its
# uuid, the map's trigger is back, both ways back's slots are gone, and the legacy application
# writes by integer keys again.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
SRC_DB="${PGDATABASE}_srcct"
INTO=orders_2ct
CINTO=items_2ct_v7
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$SRC_DB\"" >/dev/null
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC_DB" -c "$1"; }
drop_slots() {
    qs "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
         WHERE (slot_name LIKE 'v7fill\_${INTO}%' OR slot_name LIKE 'v7fill\_${CINTO}%') AND NOT active" >/dev/null 2>&1 || true
}
trap 'drop_slots; psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null 2>&1; rm -rf "$T_TMP"' EXIT
drop_slots
# Parents 1..300, 900 children: every 30th key NULL, every 45th an orphan.
qs "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    INSERT INTO orders (created_at, note)
      SELECT timestamptz '2024-01-01' + g * interval '7 hours', 'n' || g FROM generate_series(1, 300) g;
    CREATE TABLE items_2ct (id bigserial PRIMARY KEY, order_id bigint, created_at timestamptz NOT NULL, qty int);
    INSERT INTO items_2ct (order_id, created_at, qty)
      SELECT CASE WHEN g % 30 = 0 THEN NULL WHEN g % 45 = 0 THEN 100000 + g ELSE g % 300 + 1 END,
             timestamptz '2024-01-02' + g * interval '3 hours', g FROM generate_series(1, 900) g;
    CREATE TABLE notes_2ct (id serial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders (id), created_at timestamptz NOT NULL, body text);
    INSERT INTO notes_2ct (order_id, created_at, body)
      SELECT g % 200 + 100, timestamptz '2024-01-03' + g * interval '5 hours', 'b' || g FROM generate_series(1, 400) g" >/dev/null
mig() { run_expect "$1" "$V7FILL" migrate --into "$INTO" "${@:2}"; }
# kill_while_blocked TABLE: a session on the source holds TABLE (ACCESS SHARE: the switch's
# rename of it waits), --switch runs until its first retry, is killed with -9, the blocker goes.
kill_while_blocked() {
    PGAPPNAME=t_blocker psql -X -q -At -d "$SRC_DB" -c "BEGIN; LOCK TABLE $1 IN ACCESS SHARE MODE; SELECT pg_sleep(120); COMMIT" >blocker.log 2>&1 &
    local blocker=$! pid
    for _ in $(seq 1 50); do
        [ "$(qs "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 't_blocker' AND l.granted AND l.relation = '$1'::regclass")" = 1 ] && break
        sleep 0.1
    done
    "$V7FILL" migrate --into "$INTO" --switch --lock-timeout 300 >kill.log 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do grep -q "switch attempt 1 of 10" kill.log && break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    assert_contains "$(cat kill.log)" "switch attempt 1 of 10" "the switch was retrying its lock on $1 when killed"
    qs "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 't_blocker'" >/dev/null
    wait "$blocker" || true
    for _ in $(seq 1 50); do
        [ "$(q "SELECT count(*) FROM pg_replication_slots WHERE active")" = 0 ] && break
        sleep 0.2
    done
}
mig 0 --source "dbname=$SRC_DB" --from public.orders --key id --time-column created_at \
    --child 'public.items_2ct(order_id)' --child 'public.notes_2ct(order_id)' --child-mode migrate
assert_contains "$OUT" "phase follow" "the copy finished"
assert_eq 900 "$(q "SELECT count(*) FROM $CINTO")" "the child's UUIDv7 table on the target"
assert_eq 0 "$(q "SELECT count(*) FROM $CINTO c JOIN ${INTO}_id_map m ON m.legacy_id = c.order_id WHERE c.order_id_uuid IS DISTINCT FROM m.id")" \
    "each child's order_id_uuid is its parent's id"
# Written on the source after the copy: the capture brings them before the switch.
qs "INSERT INTO orders (created_at, note) VALUES ('2024-06-01', 'late');
    INSERT INTO items_2ct (order_id, created_at, qty) VALUES (currval('orders_id_seq'), '2024-06-01', -1);
    UPDATE items_2ct SET order_id = 7 WHERE id = 1" >/dev/null
# Killed inside the switch's transaction (the parent renamed, the child's rename waiting): nothing
# is renamed, and the same command then switches.
kill_while_blocked items_2ct
assert_eq "orders||items_2ct|" \
    "$(qs "SELECT to_regclass('orders'), to_regclass('orders_legacy'), to_regclass('items_2ct'), to_regclass('items_2ct_legacy')")" \
    "the killed switch renamed nothing"
# The source's commit lost after the target's: a test trigger on the target ends the switch's
# session on the source when the parent's way back is recorded there, the last step before the
# source's commit.  The source keeps its names and takes the
# application's writes; the switch says what committed where and what to run; the next capture
# run makes the map's trigger again, so a child written with its parent in one transaction gets
# the parent's id.
q "CREATE FUNCTION t_cut_source() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN
     PERFORM pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE datname = '$SRC_DB' AND backend_type = 'client backend' AND state = 'idle in transaction';
     RETURN NULL; END \$\$;
   CREATE TRIGGER t_cut_source AFTER INSERT OR UPDATE ON v7fill.migrate_reverse FOR EACH ROW
     WHEN (NEW.slot = 'v7fill_${INTO}_rev') EXECUTE FUNCTION t_cut_source()" >/dev/null
rc=0; "$V7FILL" migrate --into "$INTO" --switch >cut.log 2>&1 || rc=$?
OUT=$(cat cut.log)
echo "$OUT"
q "DROP TRIGGER t_cut_source ON v7fill.migrate_reverse" >/dev/null
assert_eq 5 "$rc" "the switch whose source commit was lost exits with the database error's status"
assert_contains "$OUT" "did not commit on the source: nothing is renamed there" "the lost source commit is said"
assert_contains "$OUT" "Run --switch again" "... with what to run"
assert_contains "$OUT" "drop_replication_slot('v7fill_notes_2ct_v7_rev')" "the way back's slots kept are said, with how to drop them"
assert_eq "orders||items_2ct||notes_2ct|" \
    "$(qs "SELECT to_regclass('orders'), to_regclass('orders_legacy'), to_regclass('items_2ct'), to_regclass('items_2ct_legacy'), to_regclass('notes_2ct'), to_regclass('notes_2ct_legacy')")" \
    "the source's names stand"
assert_eq 0 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = '${INTO}_id_map'::regclass")" \
    "the target's part committed (the map's triggers dropped)"
qs "INSERT INTO orders (created_at, note) VALUES ('2024-06-02', 'cut');
    INSERT INTO items_2ct (order_id, created_at, qty) VALUES (currval('orders_id_seq'), '2024-06-02', -3)" >/dev/null
mig 0 --source "dbname=$SRC_DB" --from public.orders --key id --time-column created_at \
    --child 'public.items_2ct(order_id)' --child 'public.notes_2ct(order_id)' --child-mode migrate
assert_eq 2 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = '${INTO}_id_map'::regclass")" \
    "the capture run after it makes the map's triggers again"
assert_eq "$(q "SELECT id FROM $INTO WHERE note = 'cut'")" "$(q "SELECT order_id_uuid FROM $CINTO WHERE qty = -3")" \
    "a child written with its parent in one transaction after the lost switch has the parent's id"
# The switch under the application's writer on the source (an order with an item, an item's
# update, in a loop) and a reader: each statement timed by the shell, the ones that fail
# included; none waits longer than the lock timeout and a margin; once the tables are renamed
# the statements fail, as they must.
load_loop() {
    local who=$1 i=0 t0 r
    shift
    while [ ! -e stop.flag ]; do
        i=$((i + 1))
        t0=$(date +%s%N)
        if psql -X -q -d "$SRC_DB" -v ON_ERROR_STOP=1 "$@" -v i=$((i % 300 + 1)) >/dev/null 2>>"$who.err"; then r=ok; else r=err; fi
        echo "$r $(( ($(date +%s%N) - t0) / 1000000 ))" >>"$who.lat"
        sleep 0.02
    done
}
rm -f stop.flag
load_loop writer -c "WITH o AS (INSERT INTO orders (created_at, note) VALUES ('2024-03-05', 'w') RETURNING id)
                     INSERT INTO items_2ct (order_id, created_at, qty) SELECT id, '2024-03-05', 5 FROM o" \
                 -c "UPDATE items_2ct SET qty = qty + 1 WHERE id = (SELECT max(id) FROM items_2ct WHERE qty = 5)" &
writer=$!
load_loop reader -c "SELECT count(*) FROM items_2ct i JOIN orders o ON o.id = i.order_id" &
reader=$!
sleep 1
mig 0 --switch
echo "$OUT"
sleep 0.5
touch stop.flag
wait "$writer" "$reader"
for who in writer reader; do
    echo "$who: $(grep -c '^ok' $who.lat) statements done, $(grep -c '^err' $who.lat) failed, longest $(awk '{ if ($2 > m) m = $2 } END { print m }' $who.lat) ms"
    [ "$(grep -c '^ok' $who.lat)" -ge 5 ] || fail "the $who ran before the switch"
    grep -q 'does not exist' $who.err || { cat $who.err; fail "the $who's statements fail once the source tables are renamed"; }
    [ "$(awk '{ if ($2 > m) m = $2 } END { print m }' $who.lat)" -lt 2000 ] || fail "the $who waited 2 s or more (lock timeout 1000 ms)"
done
assert_contains "$OUT" "phase switched" "switched"
assert_eq "|notes_2ct_legacy" "$(qs "SELECT to_regclass('notes_2ct'), to_regclass('notes_2ct_legacy')")" "the second child renamed too"
assert_eq "f|v7fill_order_id_or_uuid" "$(q "SELECT attnotnull FROM pg_attribute WHERE attrelid = 'notes_2ct_v7'::regclass AND attname = 'order_id'")|$(q "SELECT conname FROM pg_constraint WHERE conrelid = 'notes_2ct_v7'::regclass AND contype = 'c'")" \
    "the UUIDv7 notes' order_id (NOT NULL on the source) is nullable, one of order_id and order_id_uuid required"
run_expect 1 psql -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO notes_2ct_v7 (id, created_at, body) VALUES ('018df74f-8400-7000-8000-000000000001', '2024-03-01', 'no parent')"
assert_contains "$OUT" "v7fill_order_id_or_uuid" "a note with no parent at all is refused (its legacy table needs a key)"
assert_eq "$(qs "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', id, created_at, note), ',' ORDER BY id)) FROM orders_legacy")" \
    "$(q "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', legacy_id, created_at, note), ',' ORDER BY legacy_id)) FROM $INTO")" \
    "every order the writer committed before the switch is in the target"
assert_eq "$(qs "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', id, order_id, qty), ',' ORDER BY id)) FROM items_2ct_legacy")" \
    "$(q "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', legacy_id, order_id, qty), ',' ORDER BY legacy_id)) FROM $CINTO")" \
    "every item the writer committed, updated or deleted before the switch is so in the target"
assert_eq "|orders_legacy||items_2ct_legacy" \
    "$(qs "SELECT to_regclass('orders'), to_regclass('orders_legacy'), to_regclass('items_2ct'), to_regclass('items_2ct_legacy')")" \
    "the source's parent and child renamed there"
assert_eq "$(q "SELECT id FROM $INTO WHERE legacy_id = 7")" "$(q "SELECT order_id_uuid FROM $CINTO WHERE legacy_id = 1")" \
    "the child moved on the source before the switch names its new parent"
assert_eq 1 "$(q "SELECT count(*) FROM $CINTO WHERE qty = -1 AND order_id_uuid IS NOT NULL")" \
    "the child written before the switch has its parent's id"
assert_eq "v7fill_${CINTO}_rev,v7fill_notes_2ct_v7_rev,v7fill_${INTO}_rev" \
    "$(q "SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots WHERE slot_name LIKE '%_rev' AND database = current_database()")" \
    "a way-back slot on the target for the parent and one for each child"
assert_eq 0 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = '${INTO}_id_map'::regclass")" \
    "the switch drops the map's trigger (the way back writes the map)"
assert_contains "$(q "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = '$CINTO'::regclass AND adnum = (SELECT attnum FROM pg_attribute WHERE attrelid = '$CINTO'::regclass AND attname = 'legacy_id')")" \
    "nextval" "the child target's legacy_id numbered by a sequence of its own"

mig 0 --verify
assert_contains "$OUT" "verdict: OK" "--verify after the switch reads the source's legacy tables"
assert_contains "$OUT" "public.$CINTO  rows" "... the child's too"

# ---- the application writes the target, its ids UUIDv7 of their created_at
q "CREATE FUNCTION t_uuid7(ts timestamptz) RETURNS uuid LANGUAGE sql VOLATILE AS \$\$
     SELECT (lpad(to_hex(floor(extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7'
             || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid \$\$" >/dev/null
q "WITH p AS (INSERT INTO $INTO (id, created_at, note) VALUES (t_uuid7('2024-03-01'), '2024-03-01', 'new') RETURNING id)
     INSERT INTO $CINTO (id, order_id_uuid, created_at, qty) SELECT t_uuid7('2024-03-01'), p.id, '2024-03-01', -77 FROM p;
   UPDATE $CINTO SET order_id_uuid = (SELECT id FROM $INTO WHERE legacy_id = 9), qty = qty + 1000 WHERE legacy_id = 2;
   UPDATE $CINTO SET order_id_uuid = NULL WHERE legacy_id = 3;
   DELETE FROM $CINTO WHERE legacy_id = 4;
   DELETE FROM $CINTO WHERE order_id_uuid = (SELECT id FROM $INTO WHERE legacy_id = 20);
   DELETE FROM $INTO WHERE legacy_id = 20;
   UPDATE $INTO SET note = 'changed' WHERE legacy_id = 5;
   INSERT INTO notes_2ct_v7 (id, order_id_uuid, created_at, body) SELECT t_uuid7('2024-03-01'), id, '2024-03-01', 'new note' FROM $INTO WHERE note = 'new';
   UPDATE notes_2ct_v7 SET order_id_uuid = (SELECT id FROM $INTO WHERE legacy_id = 150), body = 'moved' WHERE legacy_id = 1;
   UPDATE notes_2ct_v7 SET order_id_uuid = NULL, body = 'cleared' WHERE legacy_id = 2" >/dev/null
# A --reverse --follow killed with -9 while the application writes (a parent deleted with its
# children kept: the foreign key's ON DELETE SET NULL clears their order_id_uuid), then the
# same command until caught up: nothing applied twice, nothing missing.
"$V7FILL" migrate --into "$INTO" --reverse --follow >follow.log 2>&1 &
fpid=$!
for i in $(seq 1 20); do
    q "INSERT INTO $INTO (id, created_at, note) VALUES (t_uuid7('2024-03-03'), '2024-03-03', 'w$i');
       INSERT INTO $CINTO (id, order_id_uuid, created_at, qty) SELECT t_uuid7('2024-03-03'), id, '2024-03-03', -1000 - $i FROM $INTO WHERE note = 'w$i';
       UPDATE $CINTO SET qty = qty + 1 WHERE legacy_id = 100 + $i" >/dev/null
    [ "$i" = 10 ] && q "DELETE FROM $INTO WHERE legacy_id = 21" >/dev/null
    sleep 0.05
done
kill -9 "$fpid" 2>/dev/null || true
wait "$fpid" 2>/dev/null || true
grep -q 'ERROR' follow.log && { cat follow.log; fail "the killed --reverse --follow had failed before the kill"; }
q "UPDATE $CINTO SET qty = qty + 1 WHERE legacy_id = 130" >/dev/null
# A parent and a note by its uuid alone (order_id NULL, NOT NULL in the legacy notes), the note
# and the parent deleted again, all in the next --reverse's round: the parent's way back inserts
# and deletes that parent (its map row removed after the source's commit) before the notes' way
# back inserts the note, which must still get that parent's legacy key (before, the NULL order_id:
# SQLSTATE 23502 on every run).
q "WITH p AS (INSERT INTO $INTO (id, created_at, note) VALUES (t_uuid7('2024-03-04'), '2024-03-04', 'gone') RETURNING id)
     INSERT INTO notes_2ct_v7 (id, order_id_uuid, created_at, body) SELECT t_uuid7('2024-03-04'), id, '2024-03-04', 'gone note' FROM p" >/dev/null
q "DELETE FROM notes_2ct_v7 WHERE body = 'gone note'; DELETE FROM $INTO WHERE note = 'gone'" >/dev/null
for _ in $(seq 1 50); do
    [ "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%_rev' AND database = current_database() AND active")" = 0 ] && break
    sleep 0.2
done
mig 0 --reverse
echo "$OUT"
assert_eq 20 "$(qs "SELECT count(*) FROM items_2ct_legacy WHERE qty <= -1000")" "every child written during the killed run reached the legacy table once"
digest_new() {
    q "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', c.legacy_id, m.legacy_id, c.created_at, c.qty), ',' ORDER BY c.legacy_id))
         FROM $CINTO c LEFT JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid"
}
digest_new_keys() {
    q "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', c.legacy_id, c.order_id, c.created_at, c.qty), ',' ORDER BY c.legacy_id)) FROM $CINTO c"
}
digest_old() {
    qs "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', id, order_id, created_at, qty), ',' ORDER BY id)) FROM $1"
}
pdigest_new() { q "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', legacy_id, created_at, note), ',' ORDER BY legacy_id)) FROM $INTO"; }
pdigest_old() { qs "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', id, created_at, note), ',' ORDER BY id)) FROM $1"; }
# Orphans and NULL keys keep their order_id on both sides: compare through the map where the
# new row has a uuid, else by the order_id it keeps.
digest_new_mixed() {
    q "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', c.legacy_id, CASE WHEN c.order_id_uuid IS NULL THEN CASE WHEN EXISTS (SELECT 1 FROM ${INTO}_id_map x WHERE x.legacy_id = c.order_id) THEN NULL ELSE c.order_id END ELSE m.legacy_id END, c.created_at, c.qty), ',' ORDER BY c.legacy_id))
         FROM $CINTO c LEFT JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid"
}
newkey=$(q "SELECT legacy_id FROM $INTO WHERE note = 'new'")
ndigest_new() {
    q "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', c.legacy_id, coalesce(m.legacy_id, c.order_id), c.created_at, c.body), ',' ORDER BY c.legacy_id))
         FROM notes_2ct_v7 c LEFT JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid"
}
ndigest_old() { qs "SELECT count(*) || ':' || md5(string_agg(concat_ws('|', id, order_id, created_at, body), ',' ORDER BY id)) FROM $1"; }
assert_eq "$(pdigest_new)" "$(pdigest_old orders_legacy)" "the legacy parent equals the new one through the map"
assert_eq "$(ndigest_new)" "$(ndigest_old notes_2ct_legacy)" "the second legacy child equals its new table through the parent's map"
assert_eq "150|moved" "$(qs "SELECT order_id || '|' || body FROM notes_2ct_legacy WHERE id = 1")" "a note moved by its uuid alone"
assert_eq "$newkey" "$(qs "SELECT order_id FROM notes_2ct_legacy WHERE body = 'new note'")" "a note of the new parent"
# The legacy notes' order_id is NOT NULL: a note whose uuid the application cleared keeps its old
# parent there (before, the way back wrote NULL and stopped on every run with SQLSTATE 23502).
assert_eq "102|cleared" "$(qs "SELECT order_id || '|' || body FROM notes_2ct_legacy WHERE id = 2")" \
    "a note whose uuid was cleared keeps its key in the legacy table"
assert_eq "$(digest_new_mixed)" "$(digest_old items_2ct_legacy)" "the legacy child equals the new one, its order_id through the parent's map"
[ -n "$newkey" ] && [ "$newkey" -gt 301 ] || fail "the new parent got a legacy key past the old ones: [$newkey]"
assert_eq "$newkey" "$(qs "SELECT order_id FROM items_2ct_legacy WHERE qty = -77")" \
    "the new child names its new parent's legacy key in the legacy table"
assert_eq 9 "$(qs "SELECT order_id FROM items_2ct_legacy WHERE id = 2")" "a child moved by its uuid alone: order_id follows"
assert_eq "" "$(qs "SELECT order_id FROM items_2ct_legacy WHERE id = 3")" "a child unlinked by its uuid: order_id NULL"
assert_eq 0 "$(qs "SELECT count(*) FROM items_2ct_legacy WHERE id = 4 OR order_id = 20")" "the deleted children are gone"
assert_eq 0 "$(qs "SELECT count(*) FROM orders_legacy WHERE id = 20")" "the deleted parent is gone"
assert_eq "0|0" "$(qs "SELECT count(*) FROM notes_2ct_legacy WHERE body = 'gone note'")|$(qs "SELECT count(*) FROM orders_legacy WHERE note = 'gone'")" \
    "a note and its parent inserted and deleted in one round: applied, and gone"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.migrate_reverse_kept")" "the parent's map rows kept for the round are cleared after it"
mig 0 --reverse
assert_contains "$OUT" "0 inserted, 0 updated, 0 deleted" "a rerun applies nothing"
mig 0 --status
echo "$OUT"
assert_contains "$OUT" "v7fill_${CINTO}_rev" "--status shows the child's way back"

# ---- switching back
q "INSERT INTO $CINTO (id, order_id_uuid, created_at, qty) SELECT t_uuid7('2024-03-02'), id, '2024-03-02', -88 FROM $INTO WHERE legacy_id = 11" >/dev/null
kill_while_blocked items_2ct_legacy
assert_eq "|orders_legacy||items_2ct_legacy" \
    "$(qs "SELECT to_regclass('orders'), to_regclass('orders_legacy'), to_regclass('items_2ct'), to_regclass('items_2ct_legacy')")" \
    "the killed switch back renamed nothing"
assert_eq 0 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = '${INTO}_id_map'::regclass")" \
    "... and made no trigger on the map"
# The target's transaction fails after the source's committed (a test trigger refuses the
# delete of its way-back state): the UUIDv7 children's order_id and the map's trigger are set
# again outside it.
q "CREATE FUNCTION t_refuse() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN RAISE EXCEPTION 'refused by the test'; END \$\$;
   CREATE TRIGGER t_refuse BEFORE DELETE ON v7fill.migrate_reverse FOR EACH ROW EXECUTE FUNCTION t_refuse()" >/dev/null
# ... and a reader holds the source's legacy parent until the switch back has waited for it
# once: the source's lock is retried (before, the first attempt's aborted transaction failed
# the next with SQLSTATE 25P02).  The reader is ended once a lock request on it was seen
# waiting (however slow the machine is to get there).
hold_lock "$SRC_DB" orders_legacy "ACCESS SHARE" 120
(
    for _ in $(seq 1 1200); do
        [ "$(psql -X -At -d "$SRC_DB" -c "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'orders_legacy'::regclass")" -ge 1 ] && break
        sleep 0.05
    done
    sleep 0.5
    psql -X -At -d "$SRC_DB" -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 't_holder'" >/dev/null
) &
ender=$!
mig 0 --switch --lock-timeout 300
echo "$OUT"
wait "$ender" || true
wait "$HOLDER" || true
assert_contains "$OUT" "switch attempt 1 of 10" "the switch back waited for the reader's lock on the source"
q "DROP TRIGGER t_refuse ON v7fill.migrate_reverse" >/dev/null
assert_contains "$OUT" "the target's transaction failed" "the lost target transaction is said"
assert_contains "$OUT" "switched back" "switched back"
assert_eq "orders||items_2ct|" \
    "$(qs "SELECT to_regclass('orders'), to_regclass('orders_legacy'), to_regclass('items_2ct'), to_regclass('items_2ct_legacy')")" \
    "the source's names restored"
assert_eq 11 "$(qs "SELECT order_id FROM items_2ct WHERE qty = -88")" "a child written just before switching back reached the legacy table"
assert_eq "$(digest_new_mixed)" "$(digest_old items_2ct)" "the legacy child equals the new one"
assert_eq "$(ndigest_new)" "$(ndigest_old notes_2ct)" "the second legacy child equals its new table"
assert_eq "102" "$(q "SELECT m.legacy_id FROM notes_2ct_v7 c JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid WHERE c.legacy_id = 2")" \
    "the note whose uuid was cleared names its parent by uuid again after switching back"
assert_eq "notes_2ct|" "$(qs "SELECT to_regclass('notes_2ct'), to_regclass('notes_2ct_legacy')")" "the second child's name restored"
assert_eq 0 "$(q "SELECT count(*) FROM $CINTO c JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid WHERE c.order_id IS DISTINCT FROM m.legacy_id")" \
    "the child target's order_id follows its uuid again"
assert_eq 2 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = '${INTO}_id_map'::regclass")" "the map's triggers are back, one per child"
assert_eq 0 "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%_rev' AND database = current_database()")" "both ways back's slots dropped"
assert_eq "" "$(qs "SELECT string_agg(into_table, ',') FROM v7fill.migrate_reverse")" "no way-back state left on the source"
qs "INSERT INTO orders (created_at, note) VALUES ('2024-08-01', 'after');
    INSERT INTO items_2ct (order_id, created_at, qty) VALUES (currval('orders_id_seq'), '2024-08-01', -99)" >/dev/null
assert_contains "$OUT" "--child 'public.items_2ct(order_id)' --child 'public.notes_2ct(order_id)' --child-mode migrate" "switching back prints the command that resumes the capture"
mig 0 --source "dbname=$SRC_DB" --from public.orders --key id --time-column created_at \
    --child 'public.items_2ct(order_id)' --child 'public.notes_2ct(order_id)' --child-mode migrate
assert_contains "$OUT" "phase follow" "the capture resumes after switching back"
assert_eq 1 "$(q "SELECT count(*) FROM $CINTO c JOIN $INTO p ON p.id = c.order_id_uuid WHERE c.qty = -99 AND p.note = 'after'")" \
    "the legacy application's new parent and child reach the target, linked"
mig 0 --verify
assert_contains "$OUT" "verdict: OK" "--verify after switching back and resuming"
echo "ok t_migrate_twodb_childtable"
