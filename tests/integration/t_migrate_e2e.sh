# Issue 21's scenario end to end, through the v7fill command only (expand mode): a parent of
# 100,000 rows (gaps in the key, created_at over 3 years to the ms, 3 NULL and 5 pre-1970 times
# that are rejected with their reason) and two children (items: NULL and orphan keys, a row of a
# rejected parent; payments: a foreign key), a writer inserting, updating and deleting parent and
# child rows for the whole migration; kill -9 of `v7fill migrate` at 10 random points, then the
# same command with --verify finishes (the writer's lag settles: verdict OK); verify fails naming
# the row on a changed column and on a deleted map row (restored after); the switch under a
# concurrent reader and writer (no statement waits longer than the lock timeout + 1 s); the way
# back after the switch, then switching back: both tables equal; each id carries its created_at
# to the millisecond.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/migrate_e2e_lib.sh"
cd "$T_TMP"
e2e_source
args=(migrate --from public.orders --key id --time-column created_at --into "$INTO"
      --child 'public.items(order_id)' --child 'public.payments(order_id)' --batch-rows 10000)
# (--child-mode migrate: t_migrate_e2e_childtable.sh, the same scenario with the child tables')
e2e_writer_start new-child
# (new-child: items inserted in their new parent's transaction, whose uuid the map's trigger sets)
# ---- kill -9 at 10 random points (setup, copy, capture, child fill), then the same command
e2e_kills 10 3.5 -q "${args[@]}"
e2e_rerun_verify "${args[@]}"
maptrig() { q "SELECT count(*) FROM pg_trigger WHERE tgrelid = '${INTO}_id_map'::regclass AND tgname LIKE 'v7fill\_child\_%'"; }
assert_eq 2 "$(maptrig)" "a trigger on the map per child sets the uuid of items inserted with their new parent"
writer_stop
run_expect 0 "$V7FILL" "${args[@]}"
assert_eq "$(e2e_digest orders id "$ORDER_COLS" "created_at >= 'epoch'")" "$(e2e_digest $INTO legacy_id "$ORDER_COLS")" "the target equals the source through legacy_id (every non-key column)"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM $INTO GROUP BY 1 HAVING count(*) > 1) d")" "no row twice"
assert_eq 0 "$(e2e_time_off $INTO)" "each id carries its created_at to the ms"
for c in items payments; do
    assert_eq 0 "$(q "SELECT count(*) FROM $c c JOIN ${INTO}_id_map m ON m.legacy_id = c.order_id
                       WHERE c.order_id_uuid IS DISTINCT FROM m.id")" "$c: every key with a parent has its uuid"
done
# items has no key of its own: the new key must not fail on rows whose parent the writer deleted
assert_eq "items n|payments c" "$(q "SELECT string_agg(conrelid::regclass::text || ' ' || confdeltype::text, '|' ORDER BY 1)
                                     FROM pg_constraint WHERE contype = 'f' AND confrelid = '$INTO'::regclass
                                      AND convalidated")" \
    "the uuid keys validated, ON DELETE SET NULL without a legacy key, CASCADE like payments' own"
assert_eq 0 "$(q "SELECT count(*) FROM items i WHERE order_id IS NOT NULL AND NOT EXISTS
                   (SELECT 1 FROM orders o WHERE o.id = i.order_id) AND order_id_uuid IS NOT NULL")" \
    "items of a deleted parent have no uuid (orphans)"
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
assert_contains "$OUT" "verdict: OK" "--verify once the writer stopped"
assert_contains "$OUT" "keys without a parent: " "items: the orphan keys listed"

# ---- verify fails naming the row: a changed column, a deleted map row (restored after)
e2e_verify_names_rows $INTO amount

# ---- the switch under a concurrent reader and writer (both work before and after the rename)
# (the writer's row: amount + 1 per statement, before the switch in the legacy table through the
# capture, after it in the new table; absent when the writer above deleted or renamed it)
n4242() { q "SELECT count(*) || ' ' || coalesce(sum(amount), 0) FROM orders WHERE note = 'n4242'"; }
read -r rows amount0 <<<"$(n4242)"
switch_under_load "UPDATE orders SET amount = amount + 1 WHERE note = 'n4242'" \
    "SELECT count(*) FROM orders WHERE note = 'n4243'" migrate --into "$INTO" --switch
echo "$OUT"
assert_contains "$OUT" "phase switched" "--switch"
assert_eq "$rows $((amount0 + rows * SW_WRITES))" "$(n4242)" \
    "the switch-time writer's row in the new table: each of its $SW_WRITES updates counted once"
assert_eq 0 "$(maptrig)" "the switch dropped the map's triggers (the way back writes the map)"
assert_eq "uuid" "$(q "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id'")" \
    "orders is the UUIDv7 table"

# ---- the way back: the application writes to the new table; the legacy table kept current
# (a UUIDv7 minted at the row's created_at, as the application mints them)
at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
new1=$("$V7FILL" uuid new --at "$at")
q "INSERT INTO orders (id, created_at, amount, note) VALUES ('$new1', '$at', 7, 'after the switch');
   UPDATE orders SET note = 'changed after' WHERE legacy_id IN (SELECT legacy_id FROM orders ORDER BY legacy_id LIMIT 3 OFFSET 100);
   DELETE FROM orders o WHERE legacy_id % 89 = 0 AND NOT EXISTS (SELECT 1 FROM items i WHERE i.order_id_uuid = o.id)
                              AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id_uuid = o.id)" >/dev/null
# --source naming another database for a migration kept in one: refused, saying so
run_expect 3 "$V7FILL" migrate --into "$INTO" --reverse --source "dbname=postgres"
assert_contains "$OUT" "has the legacy table in the target's own: run --reverse without --source" \
    "--reverse --source on a one-database migration"
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
echo "$OUT"
assert_contains "$OUT" "phase reverse" "--reverse"
assert_contains "$OUT" "missing=0" "every change found its legacy row"
# both_equal NEW LEGACY WHAT: the same rows (legacy key, created_at, amount, note); on a difference
# the first differing rows are printed (new | legacy)
both_equal() {
    local a b
    a=$(q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||amount||'|'||coalesce(note, '-'), ',' ORDER BY legacy_id)) FROM $1")
    b=$(q "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||amount||'|'||coalesce(note, '-'), ',' ORDER BY id)) FROM $2 WHERE created_at >= 'epoch'")
    [ "$a" == "$b" ] ||
        q "SELECT coalesce(n.legacy_id, l.id), n.created_at, n.amount, n.note, '|', l.created_at, l.amount, l.note
             FROM $1 n FULL JOIN (SELECT * FROM $2 WHERE created_at >= 'epoch') l ON l.id = n.legacy_id
            WHERE (n.created_at, n.amount, n.note) IS DISTINCT FROM (l.created_at, l.amount, l.note) ORDER BY 1 LIMIT 5" >&2
    assert_eq "$a" "$b" "$3"
}
both_equal orders orders_legacy "after the way back the legacy table equals the new one"
# --verify and --status after the switch read the tables under their new names: the legacy
# table against the UUIDv7 one
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
assert_contains "$OUT" "verdict: OK" "--verify after the switch and the way back"
assert_contains "$OUT" "public.orders  " "--verify names the UUIDv7 table by its name now"
run_expect 0 "$V7FILL" migrate --into "$INTO" --status
assert_contains "$OUT" "(public.orders_legacy)" "--status counts the legacy table"
assert_contains "$(grep 'rows in target' <<<"$OUT")" "(public.orders)" "--status counts the UUIDv7 table"

# ---- the application moves children to other parents by order_id_uuid alone (as an application
# switched to the uuid keys does), or clears it: the child's way-back rule makes order_id follow at
# once (before, it kept the old parent's key, and switched back the legacy application saw the
# old parent).  payments.order_id is NOT NULL: a cleared uuid leaves it as it was rather than fail
# the application's write.
other() { # other LEGACY_ID: a parent in both tables other than LEGACY_ID
    q "SELECT o.legacy_id FROM orders o JOIN orders_legacy l ON l.id = o.legacy_id
        WHERE o.legacy_id <> $1 ORDER BY o.legacy_id LIMIT 1"
}
read -r mv from <<<"$(q "SELECT id, order_id FROM items WHERE order_id_uuid IS NOT NULL AND order_id IS NOT NULL ORDER BY id LIMIT 1" | tr '|' ' ')"
to=$(other "$from")
q "UPDATE items SET order_id_uuid = (SELECT id FROM orders WHERE legacy_id = $to) WHERE id = $mv" >/dev/null
assert_eq "$to" "$(q "SELECT order_id FROM items WHERE id = $mv")" "a child moved by order_id_uuid alone: order_id follows"
clr=$(q "SELECT id FROM items WHERE order_id_uuid IS NOT NULL AND id <> $mv ORDER BY id LIMIT 1")
q "UPDATE items SET order_id_uuid = NULL WHERE id = $clr" >/dev/null
assert_eq "" "$(q "SELECT order_id FROM items WHERE id = $clr")" "a child whose order_id_uuid is cleared: order_id NULL too"
read -r pmv pfrom <<<"$(q "SELECT id, order_id FROM payments ORDER BY id LIMIT 1" | tr '|' ' ')"
pto=$(other "$pfrom")
q "UPDATE payments SET order_id_uuid = (SELECT id FROM orders WHERE legacy_id = $pto), paid = paid WHERE id = $pmv" >/dev/null
assert_eq "$pto" "$(q "SELECT order_id FROM payments WHERE id = $pmv")" "a payment moved by order_id_uuid alone: order_id follows"
pu=$(q "SELECT order_id_uuid FROM payments WHERE id = $pmv")
q "UPDATE payments SET order_id_uuid = NULL WHERE id = $pmv" >/dev/null
assert_eq "$pto" "$(q "SELECT order_id FROM payments WHERE id = $pmv")" "payments.order_id NOT NULL: a cleared uuid leaves it"
q "UPDATE payments SET order_id_uuid = '$pu' WHERE id = $pmv" >/dev/null
# an ORM writes every column: order_id named unchanged, the uuid moved
q "UPDATE items SET order_id = order_id, order_id_uuid = (SELECT id FROM orders WHERE legacy_id = $from), qty = qty WHERE id = $mv" >/dev/null
assert_eq "$from" "$(q "SELECT order_id FROM items WHERE id = $mv")" "an update naming order_id unchanged and moving the uuid: order_id follows"
q "UPDATE items SET order_id_uuid = (SELECT id FROM orders WHERE legacy_id = $to) WHERE id = $mv" >/dev/null
# A payment moved to a parent written just now, which neither the map nor the legacy table has
# until the way back takes it: its NOT NULL order_id keeps its value, the rule records the new
# uuid, and switching back (its catch-up copies the parent first) gives the payment that
# parent's key.  Before, it kept the old parent's key for good.
at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
newp=$("$V7FILL" uuid new --at "$at")
q "INSERT INTO orders (id, created_at, amount, note) VALUES ('$newp', '$at', 9, 'a new parent')" >/dev/null
read -r pmv2 pfrom2 <<<"$(q "SELECT id, order_id FROM payments WHERE id <> $pmv ORDER BY id LIMIT 1" | tr '|' ' ')"
q "UPDATE payments SET order_id_uuid = '$newp' WHERE id = $pmv2" >/dev/null
assert_eq "$pfrom2|$newp" "$(q "SELECT order_id || '|' || (SELECT string_agg(id::text, ',') FROM v7fill.child_moved) FROM payments WHERE id = $pmv2")" \
    "a payment moved to a parent the legacy table lacks yet: order_id kept, the uuid recorded"

# ---- switching back (--switch in phase reverse, as docs/migrating-switch.md says)
q "UPDATE orders SET amount = amount + 5 WHERE note = 'after the switch'" >/dev/null
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
echo "$OUT"
assert_contains "$OUT" "switched back" "switched back"
assert_eq "bigint" "$(q "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id'")" \
    "orders is the legacy table again"
both_equal "$INTO" orders "after switching back both tables are equal"
assert_eq "$to|$pto" "$(q "SELECT (SELECT order_id FROM items WHERE id = $mv) || '|' || (SELECT order_id FROM payments WHERE id = $pmv)")" \
    "switched back: the legacy application finds the moved children under their new parents"
assert_eq "$(q "SELECT legacy_id FROM $INTO WHERE id = '$newp'")|0" \
    "$(q "SELECT order_id || '|' || (SELECT count(*) FROM v7fill.child_moved) FROM payments WHERE id = $pmv2")" \
    "switched back: the payment recorded gets its new parent's key, the record cleared"
q "UPDATE items SET order_id_uuid = (SELECT id FROM ${INTO}_id_map WHERE legacy_id = $from) WHERE id = $mv" >/dev/null
assert_eq "$to" "$(q "SELECT order_id FROM items WHERE id = $mv")" "switched back, the rule is off: order_id_uuid alone changes no key"
e2e_drop_slots
