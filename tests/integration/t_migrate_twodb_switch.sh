# v7fill migrate between two databases through the command (issue 21): copy with an expand-mode
# child, --switch (the source table renamed <from>_legacy there, the target keeps its name), then
# --verify and --status read the tables under their names after the switch: the source's legacy
# table against the target (before, --verify stopped with "the source table public.orders does
# not exist" and --status counted nothing on the source).  A row the application writes in the
# target after the switch has no legacy key and no map row: --verify names it, until the way back
# (--reverse, two databases: read from the target's slot, written into the source's legacy
# table) gives it the next key of the legacy table's own sequence and a map row; the application's
# update and delete of older rows reach the legacy table too, each once; so do, in one
# transaction, a row inserted with legacy_id NULL and updated (its key looked up after its
# insert, not by the way back's look-up ahead), an update and a delete.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
SRC_DB="${PGDATABASE}_src"
INTO=orders_2db
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$SRC_DB\"" >/dev/null
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC_DB" -c "$1"; }
drop_slots() {
    qs "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
         WHERE slot_name LIKE 'v7fill\_${INTO}%' AND NOT active" >/dev/null 2>&1 || true
}
trap 'drop_slots; psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null 2>&1; rm -rf "$T_TMP"' EXIT
drop_slots
qs "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    INSERT INTO orders (created_at, note)
      SELECT timestamptz '2024-01-01' + g * interval '7 hours', 'n' || g FROM generate_series(1, 2000) g;
    CREATE TABLE items (id serial PRIMARY KEY, order_id bigint REFERENCES orders (id), qty int);
    INSERT INTO items (order_id, qty) SELECT g % 2000 + 1, g FROM generate_series(1, 3000) g;
    CREATE TABLE payments (id serial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders (id), paid int);
    INSERT INTO payments (order_id, paid) SELECT g % 2000 + 1, g FROM generate_series(1, 500) g" >/dev/null
mig() { run_expect "$1" "$V7FILL" migrate --into "$INTO" "${@:2}"; }
mig 0 --source "dbname=$SRC_DB" --from public.orders --key id --time-column created_at \
    --child 'public.items(order_id)' --child 'public.payments(order_id)'
assert_contains "$OUT" "phase follow" "the copy finished"
# Child rows the application writes after the last run: no trigger reaches them between two
# databases; the switch's pass before its lock sets their order_id_uuid.  A child whose key the
# application changes: the trigger on the child makes its order_id_uuid NULL at once (the map
# is out of its reach), so the same pass gives it the new parent's id (before, it kept the old
# parent's until a run without --switch read every row again).
qs "INSERT INTO items (order_id, qty) VALUES (3, -1), (4, -2);
    UPDATE items SET order_id = 6 WHERE id = 1" >/dev/null
assert_eq "" "$(qs "SELECT order_id_uuid FROM items WHERE id = 1")" "a changed key leaves no uuid of the old parent"
mig 0 --switch
echo "$OUT"
assert_contains "$OUT" "phase switched" "switched"
assert_contains "$OUT" "children's <fk>_uuid: 3 rows set before the lock" "the switch's pass over the children"
assert_eq "2" "$(qs "SELECT count(*) FROM items WHERE qty < 0 AND order_id_uuid IS NOT NULL")" \
    "the child rows written after the last run have their uuid"
assert_eq "$(q "SELECT id FROM $INTO WHERE legacy_id = 6")" "$(qs "SELECT order_id_uuid FROM items WHERE id = 1")" \
    "the child whose key changed has its new parent's id"
assert_contains "$OUT" "filled for new rows by DEFAULT nextval of public.${INTO}_legacy_id_seq, which goes on from public.orders_id_seq on the source" \
    "the switch names the target's legacy_id sequence"
assert_contains "$OUT" "way back: v7fill migrate --into public.$INTO --reverse" "the switch names the way back"
assert_eq "|orders_legacy" "$(qs "SELECT to_regclass('orders'), to_regclass('orders_legacy')")" \
    "the source table renamed there"
# A rerun of the switch while a reader holds the target's table: it says switched and queues no
# lock there (before, it asked for ACCESS EXCLUSIVE to make legacy_id nullable again and failed
# on the lock timeout).
hold_lock "$PGDATABASE" "$INTO" "ACCESS SHARE" 3
mig 0 --switch --lock-timeout 300
assert_contains "$OUT" "already switched" "a rerun of the switch under a reader says switched"
wait "$HOLDER" || true
# Killed between the source's commit and storing the phase (the phase put back by hand), with a
# child row written just before the lock (no uuid): the rerun finds the names, stores the phase
# and gives that row its uuid (before, it ran the capture into the renamed table and failed).
q "UPDATE v7fill.migration SET phase = 'follow' WHERE into_table = '$INTO'"
qs "INSERT INTO items (order_id, qty) VALUES (8, 900001)" >/dev/null
mig 0 --switch
assert_contains "$OUT" "already switched" "a rerun with the phase not stored says switched"
assert_eq switched "$(q "SELECT phase FROM v7fill.migration WHERE into_table = '$INTO'")" "the phase stored by the rerun"
assert_eq "$(q "SELECT id FROM $INTO WHERE legacy_id = 8")" "$(qs "SELECT order_id_uuid FROM items WHERE qty = 900001")" \
    "the child row written before the lock has its parent's id"

mig 0 --verify
echo "$OUT"
assert_contains "$OUT" "verdict: OK" "--verify after the switch: the legacy table against the target"
assert_contains "$OUT" "public.$INTO  rows                      2000          2000  OK" "every row counted on both sides"
mig 0 --status
assert_contains "$OUT" "rows in source     2000 (public.orders_legacy)" "--status counts the legacy table"
assert_contains "$OUT" "rows in target     2000 (public.$INTO)" "--status counts the target"
mig 0 --status --json
assert_eq "public.orders_legacy 2000 public.$INTO 2000" \
    "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["source_table"], d["source_rows"], d["target_table"], d["target_rows"])' <<<"$OUT")" \
    "--status --json: the tables counted, under their names now"

# The application writes in the target after the switch: its legacy key from the target's
# sequence, which goes on from the source's; no map row.
at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
q "INSERT INTO $INTO (id, created_at, note) VALUES ('$("$V7FILL" uuid new --at "$at")', '$at', 'after the switch')" >/dev/null
assert_eq "2001" "$(q "SELECT legacy_id FROM $INTO WHERE note = 'after the switch'")" "the new row's legacy_id goes on from the source's sequence"
qs "DELETE FROM items WHERE order_id = 7; DELETE FROM payments WHERE order_id = 7" >/dev/null
q "UPDATE $INTO SET note = 'changed after the switch' WHERE legacy_id = 5;
   DELETE FROM $INTO WHERE legacy_id = 7" >/dev/null
mig 1 --verify
assert_contains "$OUT" "target rows not in the map: 1 (legacy keys 2001)" "--verify names the row written after the switch"
assert_contains "$(qs "SELECT note FROM orders_legacy WHERE id = 5")" "n5" "before the way back the legacy table has the old value"

mig 0 --reverse
echo "$OUT"
assert_contains "$OUT" "inserted=1 updated=1 deleted=1 missing=0" "the way back applied each change once"
assert_contains "$OUT" "phase reverse" "phase reverse"
assert_eq "2001|after the switch" "$(qs "SELECT id, note FROM orders_legacy WHERE id > 2000")" \
    "the new row has the next key of the legacy sequence"
assert_eq "2001" "$(q "SELECT m.legacy_id FROM ${INTO}_id_map m JOIN $INTO t USING (id) WHERE t.note = 'after the switch'")" \
    "its map row in the target"
assert_eq "changed after the switch|0" "$(qs "SELECT (SELECT note FROM orders_legacy WHERE id = 5), count(*) FROM orders_legacy WHERE id = 7")" \
    "the update and the delete reached the legacy table"
assert_eq "0" "$(q "SELECT count(*) FROM ${INTO}_id_map WHERE legacy_id = 7")" "the deleted row's map row is gone"
assert_eq "2001" "$(qs "SELECT last_value FROM orders_id_seq")" "the source's sequence moved past the key the way back inserted"
assert_eq "$(qs "SELECT end_lsn FROM v7fill.migrate_reverse")" "$(q "SELECT end_lsn FROM v7fill.migrate_reverse")" \
    "the position committed with the legacy rows, and shown on the target"

mig 0 --reverse
assert_contains "$OUT" "inserted=0 updated=0 deleted=0 missing=0" "a second run applies nothing again"
q "UPDATE $INTO SET note = 'again' WHERE note = 'after the switch'" >/dev/null
mig 0 --reverse
assert_contains "$OUT" "inserted=0 updated=1 deleted=0 missing=0" "a later update once, found through the map"
assert_eq "again" "$(qs "SELECT note FROM orders_legacy WHERE id = 2001")" "the row the way back keyed"
# The way back reads a group's changes ahead and looks their legacy keys up in one query first:
# a row inserted with legacy_id NULL (its key from the target's sequence, in its map row only)
# and updated in the same transaction is looked up after its insert, not from that query.
at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
qs "DELETE FROM items WHERE order_id = 13; DELETE FROM payments WHERE order_id = 13" >/dev/null
q "BEGIN;
   INSERT INTO $INTO (id, legacy_id, created_at, note) VALUES ('$("$V7FILL" uuid new --at "$at")', NULL, '$at', 'ahead');
   UPDATE $INTO SET note = 'ahead, updated' WHERE note = 'ahead';
   UPDATE $INTO SET note = 'twelve' WHERE legacy_id = 12;
   DELETE FROM $INTO WHERE legacy_id = 13;
   COMMIT" >/dev/null
mig 0 --reverse
assert_contains "$OUT" "inserted=1 updated=2 deleted=1 missing=0" "the read-ahead group applied each change once"
assert_eq "ahead, updated|twelve|0" "$(qs "SELECT (SELECT note FROM orders_legacy WHERE id = $(q "SELECT m.legacy_id FROM ${INTO}_id_map m
        JOIN $INTO t USING (id) WHERE t.note = 'ahead, updated'")), (SELECT note FROM orders_legacy WHERE id = 12),
        (SELECT count(*) FROM orders_legacy WHERE id = 13)")" \
    "the row inserted without a legacy key, updated in its transaction, is in the legacy table under its map row's key"
# An application whose ORM writes every column sends legacy_id NULL for each new row: each gets
# the next value of the target's sequence (taken ahead, one query for the group's such rows), the
# log names the first ten, the summary counts them all, and nothing is taken for nothing.
seq0=$(q "SELECT last_value FROM ${INTO}_legacy_id_seq")
vals=$("$V7FILL" uuid new --at "$at" --count 12 | awk -v at="$at" '{printf "%s(%s%s%s, NULL, %s%s%s, %sorm %d%s)", (NR > 1 ? ", " : ""), q, $1, q, q, at, q, q, NR, q}' q="'")
q "INSERT INTO $INTO (id, legacy_id, created_at, note) VALUES $vals" >/dev/null
mig 0 --reverse
assert_contains "$OUT" "inserted=12 updated=0 deleted=0 missing=0" "the ORM's rows applied once each"
assert_contains "$OUT" "keys_given=12" "the summary counts the keys given"
assert_eq 10 "$(grep -c 'with legacy_id NULL: the way back gives it' <<<"$OUT")" "the log names the first ten"
assert_contains "$OUT" "the next ones are counted, not logged" "and says the rest are counted"
assert_eq "$((seq0 + 12))" "$(q "SELECT last_value FROM ${INTO}_legacy_id_seq")" "twelve values taken from the sequence"
assert_eq "12|12" "$(qs "SELECT count(*), count(DISTINCT id) FROM orders_legacy WHERE note LIKE 'orm %' AND id > $seq0 AND id <= $((seq0 + 12))")" \
    "each in the legacy table under a key of its own from the sequence"
assert_eq 0 "$(q "SELECT count(*) FROM $INTO t JOIN ${INTO}_id_map m USING (id) WHERE t.note LIKE 'orm %' AND m.legacy_id NOT BETWEEN $((seq0 + 1)) AND $((seq0 + 12))")" \
    "the map pairs each with its key"
assert_eq 12 "$(q "SELECT count(*) FROM $INTO t JOIN ${INTO}_id_map m USING (id) WHERE t.note LIKE 'orm %'")" "every one in the map"
q "UPDATE $INTO t SET legacy_id = m.legacy_id FROM ${INTO}_id_map m WHERE m.id = t.id AND t.legacy_id IS NULL" >/dev/null
mig 0 --verify
echo "$OUT"
assert_contains "$OUT" "verdict: OK" "--verify after the way back"
mig 0 --status
echo "$OUT"
assert_contains "$OUT" "way back" "--status shows the way back"

# Switching back between two databases: the target's table locked against writes, the legacy
# table caught up under that lock (a change made just before is not lost), renamed back on the
# source; the way back's slot and state gone; the capture resumed takes the legacy
# application's next row (its key past the ones the way back inserted).
# A writer and a reader on the target's table throughout: none of their statements waits
# longer than the lock timeout plus 1 s (switch_under_load).
q "UPDATE $INTO SET note = 'just before switching back' WHERE legacy_id = 9" >/dev/null
# Child rows the application writes with only order_id_uuid (as an application switched to the
# UUIDv7 table does): one of a parent the way back already took, one of a parent written just
# now, which only the catch-up of the switch back takes; a third of a parent that never reached
# the map.  The switch back gives the first two their order_id from the map (the map is on the
# target, the children on the source); the third keeps it NULL.
at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
u_old=$(q "SELECT id FROM $INTO WHERE legacy_id = 2001")
u_new=$(q "INSERT INTO $INTO (id, created_at, note) VALUES ('$("$V7FILL" uuid new --at "$at")', '$at', 'just before back') RETURNING id")
k_new=$(q "SELECT legacy_id FROM $INTO WHERE id = '$u_new'")
qs "INSERT INTO items (order_id_uuid, qty) VALUES ('$u_old', -3), ('$u_new', -4),
      ('$("$V7FILL" uuid new --at "$at")', -5)" >/dev/null
# The application moves a child to another parent by order_id_uuid alone, and clears another's:
# the child's way-back rule makes order_id NULL at once (the map is out of its reach), and the
# switch back gives the moved one its new parent's key (before, it kept the old parent's, and the
# legacy application saw the old parent).
assert_eq "21|22" "$(qs "SELECT string_agg(order_id::text, '|' ORDER BY id) FROM items WHERE id IN (20, 21)")" "items 20 and 21 before"
qs "UPDATE items SET order_id_uuid = '$(q "SELECT id FROM $INTO WHERE legacy_id = 30")' WHERE id = 20;
    UPDATE items SET order_id_uuid = NULL WHERE id = 21" >/dev/null
assert_eq "|" "$(qs "SELECT string_agg(coalesce(order_id::text, ''), '|' ORDER BY id) FROM items WHERE id IN (20, 21)")" \
    "moved or cleared by order_id_uuid alone: order_id NULL at once"
# payments.order_id is NOT NULL: a payment moved by order_id_uuid alone keeps its order_id (it
# cannot be NULL), the rule records the new uuid on the source, and the switch back sets the
# key from the map (before, the payment kept its old parent's key for good).
u31=$(q "SELECT id FROM $INTO WHERE legacy_id = 31")
qs "UPDATE payments SET order_id_uuid = '$u31' WHERE id = 5" >/dev/null
assert_eq "6|$u31" "$(qs "SELECT order_id || '|' || order_id_uuid FROM payments WHERE id = 5")" \
    "a payment moved by order_id_uuid alone keeps its NOT NULL order_id meanwhile"
assert_eq "$u31" "$(qs "SELECT string_agg(id::text, ',') FROM v7fill.child_moved WHERE relid = 'payments'::regclass")" \
    "its new uuid is recorded on the source"
switch_under_load "UPDATE $INTO SET note = 'w' WHERE legacy_id = 11" \
    "SELECT count(*) FROM $INTO WHERE legacy_id <= 50" migrate --into "$INTO" --switch
echo "$OUT"
assert_eq "w" "$(qs "SELECT note FROM orders WHERE id = 11")" "the writer's update reached the legacy table"
assert_contains "$OUT" "switched back" "switched back"
assert_contains "$OUT" "keeps its name and takes writes" "switching back between two databases warns of writes still sent to the target"
assert_contains "$OUT" "phase follow" "phase follow again"
assert_eq "orders|" "$(qs "SELECT to_regclass('orders'), to_regclass('orders_legacy')")" "the legacy table has its name again"
assert_eq "just before switching back" "$(qs "SELECT note FROM orders WHERE id = 9")" "the last change applied under the lock"
assert_contains "$OUT" "4 child rows got their legacy key from the map" "the switch back counts the child keys it set (3 items, 1 payment)"
assert_eq "31|$u31|0" "$(qs "SELECT order_id || '|' || order_id_uuid || '|' || (SELECT count(*) FROM v7fill.child_moved) FROM payments WHERE id = 5")" \
    "switched back: the moved payment under its new parent's key, its uuid kept, the record cleared"
assert_eq "30|" "$(qs "SELECT string_agg(coalesce(order_id::text, ''), '|' ORDER BY id) FROM items WHERE id IN (20, 21)")" \
    "switched back: the moved child under its new parent, the cleared one without"
assert_eq "-5:|-4:$k_new|-3:2001" "$(qs "SELECT string_agg(qty || ':' || coalesce(order_id::text, ''), '|' ORDER BY qty) FROM items WHERE qty <= -3")" \
    "child rows written with only order_id_uuid got order_id from the map; one without a map row kept it NULL"
assert_eq "0|0" "$(q "SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'v7fill_${INTO}_rev'),
                            (SELECT count(*) FROM v7fill.migrate_reverse)")" "the way back's slot and state are gone"
assert_eq "$((k_new + 1))" "$(qs "INSERT INTO orders (created_at, note) VALUES (now(), 'legacy again') RETURNING id")" \
    "the legacy application's next key is past the way back's"
mig 0 --source "dbname=$SRC_DB" --from public.orders --key id --time-column created_at \
    --child 'public.items(order_id)' --child 'public.payments(order_id)'
assert_eq "1" "$(q "SELECT count(*) FROM $INTO WHERE legacy_id = $((k_new + 1)) AND note = 'legacy again'")" "the capture resumed"
mig 1 --verify
assert_contains "$OUT" "NULL keys                    2             1  MISMATCH  1 rows with a NULL key have a order_id_uuid" \
    "--verify names the child row whose order_id_uuid has no parent (the other NULL key: item 21, cleared)"
qs "DELETE FROM items WHERE qty = -5" >/dev/null
mig 0 --verify
assert_contains "$OUT" "verdict: OK" "--verify after switching back"
qs "UPDATE items SET order_id_uuid = NULL WHERE id = 20" >/dev/null
assert_eq "30" "$(qs "SELECT order_id FROM items WHERE id = 20")" "switched back, the rule is off: order_id_uuid alone changes no key"
echo "ok"
