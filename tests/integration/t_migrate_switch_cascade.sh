# The switch, and the switch back, while the application deletes a parent whose children go
# with it (ON DELETE CASCADE), one database, an expand-mode child.  The delete's transaction is
# open when the switch asks for its lock and commits after the capture caught up, so the
# capture applies it under the switch's lock: the new table's key on the child (made
# ON DELETE CASCADE like the legacy one) deletes from the child.  Before, the switch held the
# child locked on its own session and the capture's delete waited for that lock forever (all
# writers blocked, SIGTERM ignored).  The child is now locked after the capture's last change;
# the switch and the switch back finish, and the tables are equal (the switch back, run as a
# superuser here, writes as a replica: no ON DELETE action runs there).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=sc_orders_v7
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'v7fill\_sc\_orders%' AND NOT active" >/dev/null || true
}
drop_slot
app=
trap '[ -z "$app" ] || kill "$app" 2>/dev/null || true; drop_slot; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE sc_orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
   INSERT INTO sc_orders (created_at, note) SELECT now() - g * interval '5 hours', 'n' || g FROM generate_series(1, 200) g;
   CREATE TABLE sc_items (id bigserial PRIMARY KEY,
                          order_id bigint REFERENCES sc_orders (id) ON DELETE CASCADE, qty int);
   INSERT INTO sc_items (order_id, qty) SELECT g % 200 + 1, g FROM generate_series(1, 400) g"
run_expect 0 "$V7FILL" migrate --from public.sc_orders --key id \
    --time-column created_at --into "$INTO" --child 'public.sc_items(order_id)'
assert_contains "$(q "SELECT pg_get_constraintdef(oid) FROM pg_constraint
                       WHERE conrelid = 'sc_items'::regclass AND contype = 'f' AND conname LIKE '%uuid%'")" \
    "ON DELETE CASCADE" "the child's new key cascades as the legacy one does"

# app_delete ID: the application deletes parent ID (its children with it) in a transaction
# that stays open 3 s; returns once it holds its locks.
app_delete() {
    psql -X -q -At -c "BEGIN; DELETE FROM $1 WHERE id = $2; SELECT pg_sleep(3); COMMIT" >app.log 2>&1 &
    app=$!
    poll_until "SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE 'BEGIN; DELETE FROM $1%' AND wait_event = 'PgSleep'" \
        "the application's delete" 10
}

# A first --switch fails on a lock the application holds (no transaction id: the way back's
# slot, made first, does not wait for it), so the slot exists when the next one runs, and
# that one's catch-up before the lock does not wait for the delete below either.
# (The holder sleeps long enough for a slow machine and is ended once the switch gave up.)
hold_lock "$PGDATABASE" sc_orders "ROW EXCLUSIVE" 60
"$V7FILL" migrate --into "$INTO" --switch --lock-timeout 300 --switch-attempts 2 >first.log 2>&1 &&
    fail "the switch took a lock the application held: $(cat first.log)"
assert_contains "$(cat first.log)" "could not take its lock" "the first switch could not take its lock"
assert_eq 1 "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'v7fill_sc_orders_v7_rev'")" \
    "the way back's slot was made"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 't_holder'" >/dev/null
wait "$HOLDER" || true

app_delete sc_orders 5
timeout -s KILL 120 "$V7FILL" migrate --into "$INTO" --switch --lock-timeout 10000 >switch.log 2>&1 ||
    fail "the switch did not finish (exit $?): $(tail -n 5 switch.log)"
wait "$app" || fail "the application's delete failed: $(cat app.log)"
app=
cat switch.log
assert_contains "$(cat switch.log)" "phase switched" "switched"
assert_eq "0|0" "$(q "SELECT (SELECT count(*) FROM sc_orders_legacy WHERE id = 5), (SELECT count(*) FROM sc_orders WHERE legacy_id = 5)")" \
    "the parent deleted during the switch is gone from both tables"
assert_eq 0 "$(q "SELECT count(*) FROM sc_items WHERE order_id = 5")" "its children are gone"
assert_eq "$(q "SELECT count(*) FROM sc_orders_legacy")" "$(q "SELECT count(*) FROM sc_orders")" "the tables hold the same rows"

# The way back, then the switch back while the application deletes another parent of the
# new table (its children with it, through the new key).
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
app_delete sc_orders "(SELECT id FROM sc_orders WHERE legacy_id = 6)"
timeout -s KILL 120 "$V7FILL" migrate --into "$INTO" --switch --lock-timeout 10000 >back.log 2>&1 ||
    fail "the switch back did not finish (exit $?): $(tail -n 5 back.log)"
wait "$app" || fail "the application's delete failed: $(cat app.log)"
app=
cat back.log
assert_contains "$(cat back.log)" "switched back" "switched back"
assert_eq "0|0" "$(q "SELECT (SELECT count(*) FROM sc_orders WHERE id = 6), (SELECT count(*) FROM $INTO WHERE legacy_id = 6)")" \
    "the parent deleted during the switch back is gone from both tables"
assert_eq 0 "$(q "SELECT count(*) FROM sc_items WHERE order_id = 6")" "its children are gone"
assert_eq "$(q "SELECT count(*) FROM $INTO")" "$(q "SELECT count(*) FROM sc_orders")" "the tables hold the same rows"
