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
cd "$T_TMP"
INTO=orders_v7
SLOT=v7fill_orders_v7
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('$SLOT', '${SLOT}_rev') AND NOT active" >/dev/null || true
}
drop_slot
writer=
trap '[ -z "$writer" ] || kill "$writer" 2>/dev/null || true; drop_slot; rm -rf "$T_TMP"' EXIT

# (the key's sequence: after the switch it numbers legacy_id of the application's new rows)
q "CREATE SEQUENCE orders_id_seq START 3000000;
   CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT nextval('orders_id_seq'), created_at timestamptz,
                        amount int NOT NULL, note text);
   ALTER SEQUENCE orders_id_seq OWNED BY orders.id;
   INSERT INTO orders SELECT g * 3 + (g % 2),
          timestamptz '2023-01-01' + g * interval '946 seconds' + (g % 997) * interval '1.001 ms', g % 1000, 'n' || g
     FROM generate_series(1, 100000) g;
   UPDATE orders SET created_at = NULL WHERE id IN (30, 34, 60);
   UPDATE orders SET created_at = timestamptz '1969-12-31 23:59:59.999' - (id || ' days')::interval
    WHERE id IN (SELECT g * 3 + g % 2 FROM generate_series(30, 34) g);
   CREATE TABLE items (id serial PRIMARY KEY, order_id bigint, qty int);
   INSERT INTO items (order_id, qty) SELECT CASE WHEN g % 500 = 0 THEN NULL WHEN g % 777 = 0 THEN 5000000 + g
                                                 ELSE (g + 100) * 3 + ((g + 100) % 2) END, g
     FROM generate_series(1, 20000) g;
   INSERT INTO items (order_id, qty) VALUES (30, 1), (90, 1);
   CREATE INDEX ON items (order_id);
   -- no foreign key on items: the writer's deletes of parents leave its rows orphaned
   CREATE TABLE payments (id serial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
                          paid int);
   INSERT INTO payments (order_id, paid) SELECT (g + 200) * 3 + ((g + 200) % 2), g FROM generate_series(1, 10000) g;
   CREATE INDEX ON payments (order_id)" >/dev/null
args=(migrate --from public.orders --key id --time-column created_at --into "$INTO"
      --child 'public.items(order_id)' --child 'public.payments(order_id)' --batch-rows 10000)
# --child-mode migrate (the child as its own UUIDv7 table) is built elsewhere: its run of this
# scenario goes here (CHILD_MODE=migrate: the same steps with the child tables' checks).
digest_src() { q "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||amount||'|'||coalesce(note, '-'), ',' ORDER BY id))
                  FROM orders WHERE created_at >= 'epoch'"; }
digest_dst() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||amount||'|'||coalesce(note, '-'), ',' ORDER BY legacy_id))
                  FROM $INTO"; }

# ---- the writer: parent and child rows inserted, updated, deleted for the whole migration
cat >writer.sql <<'SQL'
\set k random(1, 100000)
BEGIN;
INSERT INTO orders VALUES (1000000 + :k * 10 + (random() * 9)::int, now() - interval '1 minute', 1, 'w') ON CONFLICT DO NOTHING;
UPDATE orders SET amount = amount + 1, note = note || 'u' WHERE id = :k * 3 + (:k % 2) AND created_at >= 'epoch';
DELETE FROM orders WHERE id = (:k + 7) * 3 + ((:k + 7) % 2) AND created_at >= 'epoch';
INSERT INTO items (order_id, qty) SELECT id, -1 FROM orders WHERE id = :k * 3 + (:k % 2) AND created_at >= 'epoch';
UPDATE items SET qty = qty + 1 WHERE id = :k % 20000 + 1;
DELETE FROM items WHERE id = (:k + 11) % 20000 + 1;
INSERT INTO payments (order_id, paid) SELECT id, -1 FROM orders WHERE id = (:k + 3) * 3 + ((:k + 3) % 2);
UPDATE payments SET paid = paid + 1 WHERE id = :k % 10000 + 1;
COMMIT;
SQL
"$PGBIN/pgbench" -n -c 2 -R 10 -T 900 -f writer.sql "$PGDATABASE" >writer.log 2>&1 &
writer=$!

# ---- kill -9 at 10 random points (setup, copy, capture, child fill), then the same command
for i in $(seq 1 10); do
    "$V7FILL" -q "${args[@]}" --follow >"run$i.log" 2>&1 &
    pid=$!   # v7fill itself: kill -9 must reach it
    sleep "$(python3 -c 'import random; print(round(random.uniform(0.3, 3.5), 2))')"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
for _ in $(seq 1 50); do   # the killed walsender lets the slot go
    [ "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT' AND active")" = 0 ] && break
    sleep 0.2
done
# the writer still writing: the run's own verify re-checks what differs after a catch-up
run_expect 0 "$V7FILL" "${args[@]}" --verify
echo "$OUT"
assert_contains "$OUT" "phase follow" "after 10 kills the rerun finishes the copy"
assert_contains "$OUT" "rejected: 8 rows" "the NULL and pre-1970 times are rejected"
assert_contains "$OUT" "missing event time" "the NULL time's reason"
assert_contains "$OUT" "before 1970-01-01" "the pre-1970 time's reason"
assert_contains "$OUT" "verify after the run: " "the run verifies after itself"
assert_contains "$OUT" "verdict: OK" "verify passes after the run while the writer writes"
assert_contains "$OUT" "child rows of rejected parents: 2 (keys 30, 90)" "the child rows of rejected parents named apart"
kill "$writer"; wait "$writer" 2>/dev/null || true
writer=
run_expect 0 "$V7FILL" "${args[@]}"
assert_eq "$(digest_src)" "$(digest_dst)" "the target equals the source through legacy_id (every non-key column)"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM $INTO GROUP BY 1 HAVING count(*) > 1) d")" "no row twice"
assert_eq 0 "$(q "SELECT count(*) FROM $INTO WHERE ('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint
                   <> floor(extract(epoch FROM created_at) * 1000)::bigint")" "each id carries its created_at to the ms"
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
# fails_naming WHAT NAMED: --verify exits 1 with MISMATCH and NAMED in its table
fails_naming() {
    run_expect 1 "$V7FILL" migrate --into "$INTO" --verify
    assert_contains "$OUT" "MISMATCH" "$1 fails --verify"
    assert_contains "$OUT" "$2" "$1: the row named ($2)"
}
k=$(q "SELECT min(legacy_id) FROM $INTO WHERE legacy_id > 5000")
q "UPDATE $INTO SET amount = amount + 100 WHERE legacy_id = $k" >/dev/null
fails_naming "a changed column" "changed 1 (legacy keys $k)"
q "UPDATE $INTO SET amount = amount - 100 WHERE legacy_id = $k" >/dev/null
m=$(q "SELECT min(legacy_id) FROM ${INTO}_id_map WHERE legacy_id > 7000")
mid=$(q "SELECT id FROM ${INTO}_id_map WHERE legacy_id = $m")
q "DELETE FROM ${INTO}_id_map WHERE legacy_id = $m" >/dev/null
fails_naming "a deleted map row" "legacy keys $m"
q "INSERT INTO ${INTO}_id_map VALUES ($m, '$mid')" >/dev/null
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
assert_contains "$OUT" "verdict: OK" "restored: verify passes again"

# ---- the switch under a concurrent reader and writer (both work before and after the rename)
switch_under_load "UPDATE orders SET amount = amount + 1 WHERE note = 'n4242'" \
    "SELECT count(*) FROM orders WHERE note = 'n4243'" migrate --into "$INTO" --switch
echo "$OUT"
assert_contains "$OUT" "phase switched" "--switch"
assert_eq "uuid" "$(q "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id'")" \
    "orders is the UUIDv7 table"

# ---- the way back: the application writes to the new table; the legacy table kept current
new1=$("$V7FILL" uuid new)
q "INSERT INTO orders (id, created_at, amount, note) VALUES ('$new1', now(), 7, 'after the switch');
   UPDATE orders SET note = 'changed after' WHERE legacy_id IN (SELECT legacy_id FROM orders ORDER BY legacy_id LIMIT 3 OFFSET 100);
   DELETE FROM orders o WHERE legacy_id % 89 = 0 AND NOT EXISTS (SELECT 1 FROM items i WHERE i.order_id_uuid = o.id)
                              AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id_uuid = o.id)" >/dev/null
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
echo "$OUT"
assert_contains "$OUT" "phase reverse" "--reverse"
assert_contains "$OUT" "missing=0" "every change found its legacy row"
both_equal() {
    assert_eq "$(q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||amount||'|'||coalesce(note, '-'), ',' ORDER BY legacy_id)) FROM $1")" \
              "$(q "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||amount||'|'||coalesce(note, '-'), ',' ORDER BY id)) FROM $2 WHERE created_at >= 'epoch'")" \
              "$3"
}
both_equal orders orders_legacy "after the way back the legacy table equals the new one"

# ---- switching back (--switch in phase reverse, as docs/migrating-switch.md says)
q "UPDATE orders SET amount = amount + 5 WHERE note = 'after the switch'" >/dev/null
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
echo "$OUT"
assert_contains "$OUT" "switched back" "switched back"
assert_eq "bigint" "$(q "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id'")" \
    "orders is the legacy table again"
both_equal "$INTO" orders "after switching back both tables are equal"
drop_slot
