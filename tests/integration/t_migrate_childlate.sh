# Expand mode's children at the switch (issue 21): an item inserted in its new parent's
# transaction gets its order_id_uuid from the trigger on the map when the capture writes the
# parent's map row, also when that happens under the switch's lock (the child is locked after
# the capture's last change).  (When the trigger cannot take the child's row at once, it records
# the key and the switch sets those items only, by the index on order_id, built by the run when
# missing, instead of scanning the child under its lock.)
# Rows left NULL otherwise (a fill cut short) are set before the lock, without one.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_late
drop_slots_late() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                                    WHERE slot_name LIKE 'v7fill\_orders\_late%' AND NOT active" >/dev/null || true
}
drop_slots_late
app=
trap '[ -z "$app" ] || kill "$app" 2>/dev/null || true; drop_slots_late; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
   INSERT INTO orders (created_at, note)
     SELECT timestamptz '2024-01-01' + g * interval '1 hour', 'n' || g FROM generate_series(1, 2000) g;
   CREATE TABLE items (id serial PRIMARY KEY, order_id bigint, qty int);
   INSERT INTO items (order_id, qty)
     SELECT CASE WHEN g % 100 = 0 THEN NULL WHEN g % 77 = 0 THEN 900000 + g ELSE g % 2000 + 1 END, g
       FROM generate_series(1, 6000) g" >/dev/null
wal0=$(q "SELECT pg_current_wal_lsn()")
run_expect 0 "$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" \
    --child 'public.items(order_id)'
# The fill rewrote the items (its WAL lies in front of the slot): the run caught up past it before
# it stopped, as it says, so that the next run or the switch does not decode it first.  Measured
# against the run's own WAL: the cluster's other WAL (autovacuum of the other tests' databases,
# written while the last catch-up ran or since) is some kB to a few hundred, and the code before
# the fix left about two thirds of the run's WAL (2.4 of 3.8 MB) in front of the slot.
run_wal=$(q "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal0')")
behind=$(q "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) FROM pg_replication_slots
            WHERE slot_name = 'v7fill_$INTO'")
[ "$((behind * 8))" -lt "$run_wal" ] || fail "the slot is $behind bytes behind the end of WAL after the run, an eighth of its WAL ($run_wal bytes) or more"
fk_index() { q "SELECT count(*) FROM pg_index WHERE indrelid = 'items'::regclass AND indisvalid
                 AND indkey[0] = (SELECT attnum FROM pg_attribute WHERE attrelid = 'items'::regclass AND attname = 'order_id')"; }
assert_eq 1 "$(fk_index)" "the run built an index on items(order_id) (the map's trigger and the switch look items up by it)"
unset_uuids() { q "SELECT count(*) FROM items i JOIN ${INTO}_id_map m ON m.legacy_id = i.order_id
                    WHERE i.order_id_uuid IS DISTINCT FROM m.id"; }
assert_eq 0 "$(unset_uuids)" "every item with a parent has its uuid after the run"

# Rows a fill cut short left NULL (cleared here by hand: the child's trigger fires on order_id only).
q "UPDATE items SET order_id_uuid = NULL WHERE id % 40 = 3 AND order_id <= 2000" >/dev/null
cleared=$(unset_uuids)
[ "$cleared" -gt 100 ] || fail "only $cleared rows cleared"

# The application holds orders and items against the switch's lock (no transaction id yet: the
# switch's slot for the way back is made before its lock and waits for those).
mkfifo app.in
psql -X -q -v ON_ERROR_STOP=1 <app.in >app.out 2>&1 &
app=$!
exec 3>app.in
echo "BEGIN; LOCK TABLE orders, items IN ROW EXCLUSIVE MODE; SELECT 1;" >&3
"$V7FILL" migrate --into "$INTO" --switch >switch.out 2>&1 &
sw=$!
wait_for() { # wait_for SQL: until it returns 1 (20 s)
    for _ in $(seq 1 400); do [ "$(q "$1")" = 1 ] && return 0; sleep 0.05; done
    fail "timed out waiting for: $1 (switch: $(cat switch.out))"
}
wait_for "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'v7fill_orders_late_rev'"
# An order and its item in one transaction: the item gets NULL from the child's trigger (the map
# has no row for the order yet).
echo "INSERT INTO orders (created_at, note) VALUES (now(), 'late');
      INSERT INTO items (order_id, qty) VALUES (currval('orders_id_seq'), -4242);" >&3
# Commit while an attempt of the switch has just started waiting for its lock (lock_timeout 1 s):
# it gets the lock, and the capture applies the order under it.
wait_for "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE NOT l.granted AND l.relation = 'orders'::regclass
             AND clock_timestamp() - a.query_start < interval '300 ms'"
echo "COMMIT;" >&3
exec 3>&-
wait "$app"
app=
set +e; wait "$sw"; st=$?; set -e
OUT=$(cat switch.out)
echo "$OUT"
assert_eq 0 "$st" "--switch: $OUT"
assert_contains "$OUT" "phase switched" "--switch"
assert_eq 1 "$(q "SELECT count(*) FROM items i JOIN ${INTO}_id_map m ON m.legacy_id = i.order_id
                   WHERE i.qty = -4242 AND i.order_id_uuid = m.id")" \
    "the item inserted with its order (applied under the switch's lock) has the order's uuid"
assert_eq 0 "$(unset_uuids)" "every item with a parent has its uuid after the switch"
assert_contains "$OUT" "$cleared rows set before the lock" "the rows left NULL were set before the lock"
# (the child is locked only after the capture's last change, t_migrate_switch_cascade.sh: the
# map's trigger set the item itself, nothing was left to set under the lock)
assert_contains "$OUT" ", 0 under it" "under the lock, nothing left: the trigger set the item when the capture applied its order"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.child_late")" "no key left recorded"
assert_eq 0 "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = '${INTO}_id_map'::regclass AND tgname LIKE 'v7fill\_child\_%'")" \
    "the switch dropped the map's trigger"
assert_eq "uuid" "$(q "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id'")" \
    "orders is the UUIDv7 table"
echo "ok"
