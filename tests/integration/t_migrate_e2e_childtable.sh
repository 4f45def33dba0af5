# Issue 21's scenario end to end with --child-mode migrate (each child its own UUIDv7 table),
# through the v7fill command only: the source of t_migrate_e2e (a parent of 100,000 rows with
# gaps, created_at over 3 years to the ms, 3 NULL and 5 pre-1970 times rejected with their
# reason; items with NULL and orphan keys and rows of rejected parents, payments with a foreign
# key), the same writer on parent and children for the whole migration; kill -9 of `v7fill
# migrate` at 10 random points of the copy and follow, then the same command with --verify
# finishes (verdict OK while the writer writes); the parent and both child targets equal their
# sources through legacy_id, each id carries its created_at to the ms; verify fails naming the
# row on a changed child column and on a deleted child-map row; the switch of the parent and its
# children under a concurrent reader and writer (no statement waits longer than the lock timeout
# + 1 s); after it, the new tables equal the legacy ones through the maps and the joins through
# the uuid columns give the same pairs as the joins through the integer keys.  (--reverse of
# migrate-mode children is not in this version: the scenario stops at the switch.)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/migrate_e2e_lib.sh"
cd "$T_TMP"
e2e_source
args=(migrate --from public.orders --key id --time-column created_at --into "$INTO"
      --child 'public.items(order_id)' --child 'public.payments(order_id)' --child-mode migrate
      --batch-rows 10000)
ITEM_COLS="order_id created_at qty"
PAY_COLS="order_id created_at paid"

e2e_writer_start new-child
# ---- kill -9 at 10 random points (setup, the parent's copy and capture, the children's), rerun
e2e_kills 10 5 "${args[@]}"
e2e_rerun_verify "${args[@]}"
assert_contains "$OUT" "child public.items(order_id) -> public.items_v7:" "the child's line names its target"
assert_contains "$OUT" "child public.payments(order_id) -> public.payments_v7:" "the second child's line"
# a child's link broken while the writer writes: the run's verify re-checks it after catching
# up and, as it stays, fails naming it (the parent's settling must not excuse it)
kb=$(q "SELECT min(legacy_id) FROM items_v7 WHERE legacy_id > 20002 AND order_id_uuid IS NOT NULL")
ob=$(q "SELECT order_id FROM items_v7 WHERE legacy_id = $kb")
q "UPDATE items_v7 SET order_id_uuid = NULL WHERE legacy_id = $kb" >/dev/null
run_expect 1 "$V7FILL" "${args[@]}" --verify
assert_contains "$OUT" "MISMATCH" "a broken child link fails the run's verify while the writer writes"
assert_contains "$OUT" "rows whose uuid is not the map's: keys {$ob}" "the broken link named"
q "UPDATE items_v7 SET order_id = order_id WHERE legacy_id = $kb" >/dev/null
writer_stop
run_expect 0 "$V7FILL" "${args[@]}"

# ---- each target equals its source through legacy_id, each id carries its created_at
assert_eq "$(e2e_digest orders id "$ORDER_COLS" "created_at >= 'epoch'")" "$(e2e_digest $INTO legacy_id "$ORDER_COLS")" \
    "the parent target equals the source through legacy_id"
assert_eq "$(e2e_digest items id "$ITEM_COLS")" "$(e2e_digest items_v7 legacy_id "$ITEM_COLS")" "items_v7 equals items through legacy_id"
assert_eq "$(e2e_digest payments id "$PAY_COLS")" "$(e2e_digest payments_v7 legacy_id "$PAY_COLS")" "payments_v7 equals payments through legacy_id"
for t in $INTO items_v7 payments_v7; do
    assert_eq 0 "$(e2e_time_off $t)" "$t: each id carries its created_at to the ms"
    assert_eq "$(q "SELECT count(*) FROM $t")" "$(q "SELECT count(*) FROM ${t}_id_map m JOIN $t t USING (legacy_id, id)")" \
        "$t: its map has each of its rows"
done
for c in items_v7 payments_v7; do
    assert_eq 0 "$(q "SELECT count(*) FROM $c c LEFT JOIN ${INTO}_id_map m ON m.legacy_id = c.order_id
                       WHERE c.order_id_uuid IS DISTINCT FROM m.id")" "$c: every order_id_uuid is the parent map's id of its order_id"
done
assert_eq "$(q "SELECT count(*) FROM items i WHERE order_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = i.order_id AND o.created_at >= 'epoch')")" \
    "$(q "SELECT count(*) FROM items_v7 WHERE order_id IS NOT NULL AND order_id_uuid IS NULL")" \
    "items_v7: the orphans (and rows of rejected parents) are exactly the source's"
[ "$(q "SELECT count(*) FROM items_v7 WHERE qty = -2 AND order_id_uuid IS NOT NULL")" -gt 0 ] ||
    fail "children inserted with their new parent have their uuid"
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
echo "$OUT"
assert_contains "$OUT" "verdict: OK" "--verify once the writer stopped"
assert_eq 1 "$(echo "$OUT" | grep -cE "^public\.items_v7 +join pairs +[0-9]+ +[0-9]+ +OK")" "--verify checks the child's join pairs"
assert_contains "$OUT" "keys with no parent: " "items: the orphan keys listed"

# ---- verify fails naming the row: a changed child column, a deleted child-map row
e2e_verify_names_rows items_v7 qty payments_v7 paid

# ---- the switch of the parent and its children under a concurrent reader and writer.  The
# writer inserts a parent with a child in each table and updates a parent, by the old names and
# types, up to the switch: it takes its locks first (the names are resolved again once granted)
# and writes only while orders.id is still bigint (the legacy tables have no way back in this
# version: a write after the switch would make them differ).
wsql="DO \$\$ BEGIN LOCK TABLE orders, items, payments IN ROW EXCLUSIVE MODE;
  IF (SELECT atttypid FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id') = 'bigint'::regtype THEN
    EXECUTE 'INSERT INTO orders (created_at, amount, note) VALUES (now(), 3, ''sw'')';
    EXECUTE 'INSERT INTO items (order_id, qty) VALUES (currval(''orders_id_seq''), 3)';
    EXECUTE 'INSERT INTO payments (order_id, paid) VALUES (currval(''orders_id_seq''), 3)';
    EXECUTE 'UPDATE orders SET amount = amount + 1 WHERE note = ''n4242''';
  END IF; END \$\$"
switch_under_load "$wsql" "SELECT (SELECT count(*) FROM orders WHERE note = 'n4243') + (SELECT count(*) FROM items WHERE qty = 4243)" \
    migrate --into "$INTO" --switch
echo "$OUT"
assert_contains "$OUT" "phase switched" "--switch"
assert_eq "uuid|uuid|uuid" "$(q "SELECT string_agg(format_type(atttypid, NULL), '|' ORDER BY attrelid::regclass::text) FROM pg_attribute
                                  WHERE attrelid IN ('orders'::regclass, 'items'::regclass, 'payments'::regclass) AND attname = 'id'")" \
    "orders, items and payments are the UUIDv7 tables"
assert_eq "switched|switched|switched" "$(q "SELECT string_agg(phase, '|' ORDER BY into_table) FROM v7fill.migration
                                            WHERE into_table IN ('$INTO', 'items_v7', 'payments_v7')")" "every phase stored as switched"

# ---- after the switch: the new tables equal the legacy ones through the maps
assert_eq "$(e2e_digest orders_legacy id "$ORDER_COLS" "created_at >= 'epoch'")" \
    "$(e2e_digest "orders n JOIN ${INTO}_id_map m USING (id, legacy_id)" legacy_id "$ORDER_COLS")" "orders equals orders_legacy through its map"
assert_eq "$(e2e_digest items_legacy id "$ITEM_COLS")" \
    "$(e2e_digest "items n JOIN items_v7_id_map m USING (id, legacy_id)" legacy_id "$ITEM_COLS")" "items equals items_legacy through its map"
assert_eq "$(e2e_digest payments_legacy id "$PAY_COLS")" \
    "$(e2e_digest "payments n JOIN payments_v7_id_map m USING (id, legacy_id)" legacy_id "$PAY_COLS")" "payments equals payments_legacy through its map"
# pairs (child's legacy key, parent's legacy key): through the uuid columns against the integer keys
for c in items payments; do
    assert_eq "$(q "SELECT count(*), md5(string_agg(c.id || ',' || p.id, ';' ORDER BY c.id)) FROM ${c}_legacy c
                     JOIN orders_legacy p ON p.id = c.order_id WHERE p.created_at >= 'epoch'")" \
              "$(q "SELECT count(*), md5(string_agg(c.legacy_id || ',' || p.legacy_id, ';' ORDER BY c.legacy_id)) FROM $c c
                     JOIN orders p ON p.id = c.order_id_uuid")" "$c: the joins through the uuids give the legacy joins' pairs"
done
sw=$(q "SELECT count(*) FROM orders_legacy WHERE note = 'sw'")
[ "$sw" -gt 0 ] || fail "the writer wrote during the switch"
assert_eq "$sw|$sw|$sw" "$(q "SELECT (SELECT count(*) FROM orders WHERE note = 'sw') || '|' || (SELECT count(*) FROM items c JOIN orders p
                               ON p.id = c.order_id_uuid WHERE p.note = 'sw') || '|' || (SELECT count(*) FROM payments c JOIN orders p
                               ON p.id = c.order_id_uuid WHERE p.note = 'sw')")" \
    "the parents and children written up to the switch are in the new tables, joined through the uuids"
# --verify after the switch reads every table under its new name: each legacy table against its
# UUIDv7 table, the children's keys against the parent's map
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
echo "$OUT"
assert_contains "$OUT" "verdict: OK" "--verify after the switch"
assert_eq 1 "$(echo "$OUT" | grep -cE "^public\.items +join pairs +[0-9]+ +[0-9]+ +OK")" "--verify checks the child's join pairs under its new name"
# The application writes a payment by order_id_uuid alone: payments.order_id was NOT NULL on the
# source, and the switch made it nullable in the UUIDv7 payments (before, the insert failed).
q "INSERT INTO payments (id, order_id_uuid, paid, created_at)
     SELECT (lpad(to_hex(floor(extract(epoch FROM now()) * 1000)::bigint), 12, '0') || '7'
             || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid,
            id, 4242, now() FROM orders WHERE note = 'sw' LIMIT 1" >/dev/null
assert_eq 1 "$(q "SELECT count(*) FROM payments WHERE paid = 4242 AND order_id IS NULL AND order_id_uuid IS NOT NULL")" \
    "a payment written by order_id_uuid alone after the switch"
# A payment whose uuid the application clears: the legacy payments' order_id is NOT NULL, so the
# way back keeps its key there (before, it wrote NULL and stopped on every run with SQLSTATE
# 23502); the payment written by its uuid alone gets its key from the map.
pk=$(q "SELECT min(legacy_id) FROM payments WHERE order_id_uuid IS NOT NULL")
pkey=$(q "SELECT order_id FROM payments WHERE legacy_id = $pk")
q "UPDATE payments SET order_id_uuid = NULL, paid = 4343 WHERE legacy_id = $pk" >/dev/null
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
assert_eq "$pkey|4343" "$(q "SELECT order_id || '|' || paid FROM payments_legacy WHERE id = $pk")" \
    "a payment whose uuid was cleared keeps its key in the legacy table"
assert_eq "$(q "SELECT p.legacy_id FROM payments c JOIN orders p ON p.id = c.order_id_uuid WHERE c.paid = 4242 AND c.order_id IS NULL")" \
    "$(q "SELECT l.order_id FROM payments_legacy l JOIN payments c ON c.legacy_id = l.id WHERE c.paid = 4242 AND c.order_id IS NULL")" \
    "the payment written by its uuid alone has its parent's key in the legacy table"
e2e_drop_slots
echo "ok t_migrate_e2e_childtable"
