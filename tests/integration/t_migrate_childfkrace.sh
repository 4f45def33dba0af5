# v7fill migrate --child-mode migrate: a child's insert applied after its parent's delete.
# On the source txn1 inserts 10,000 children of an existing parent, txn2 deletes them and the
# parent.  The parent's capture applies txn2 first (the parent's delete takes its map row with
# it); the child's capture then commits txn1 in a target transaction of its own (10,000 rows:
# the default --group-rows ends its group there), before txn2's deletes.  Those children must
# get a NULL order_id_uuid (their parent is gone), not the old map's id: else the deferred
# foreign key fails that commit.  The rerun exits 0, no such child is left, --verify passes.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_fr
CINTO=items_fr_v7
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('v7fill_$INTO', 'v7fill_$CINTO') AND NOT active" >/dev/null || true
}
drop_slot
trap 'drop_slot; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, note text);
   INSERT INTO orders SELECT g, timestamptz '2025-01-01' + g * interval '1 day', 'n' || g FROM generate_series(1, 100) g;
   CREATE TABLE items_fr (id bigserial PRIMARY KEY, order_id bigint, created_at timestamptz NOT NULL, qty int);
   INSERT INTO items_fr (order_id, created_at, qty)
     SELECT g % 100 + 1, timestamptz '2025-02-01' + g * interval '1 hour', g FROM generate_series(1, 500) g"
mig() { "$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" "$@"; }
run_expect 0 mig --child 'public.items_fr(order_id)' --child-mode migrate
assert_contains "$OUT" "foreign_key=added" "the child's foreign key is there before the race"

q "INSERT INTO items_fr (order_id, created_at, qty) SELECT 7, timestamptz '2025-03-01' + g * interval '1 s', g FROM generate_series(1, 10000) g"
q "DELETE FROM items_fr WHERE order_id = 7; DELETE FROM orders WHERE id = 7"
run_expect 0 mig
assert_not_contains "$OUT" "violates foreign key constraint" "a child applied after its parent's delete"
assert_eq 0 "$(q "SELECT count(*) FROM $CINTO WHERE order_id = 7")" "the deleted children are gone from the child target"
assert_eq 0 "$(q "SELECT count(*) FROM $INTO WHERE legacy_id = 7")" "the deleted parent is gone from the parent target"
assert_eq 0 "$(q "SELECT count(*) FROM ${INTO}_id_map WHERE legacy_id = 7")" "the deleted parent's map row is gone"
assert_eq "$(q "SELECT count(*) FROM items_fr")" "$(q "SELECT count(*) FROM $CINTO")" "the child target has the source child's rows"
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
assert_contains "$OUT" "verdict: OK" "--verify after the race"
drop_slot
echo "ok t_migrate_childfkrace"
