# v7fill migrate --child-mode migrate --switch: the parent's and the child's captures run side by
# side before the switch's lock, so a child's insert can read its parent's map row while the
# parent's capture is about to delete that parent.  The child's trigger reads the map row FOR
# KEY SHARE, so the delete waits for the child's commit and then sets the child's
# order_id_uuid NULL: no foreign key error, nothing applied again, and the switch goes on.
# Test-only triggers on the new tables order the two captures so that the race happens every
# time (and raise when the order they wait for does not come).  First, --lock-timeout and
# --switch-attempts against a held lock, and a child's capture failing for another reason in
# the same phase.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_sr
CINTO=items_sr_v7
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('v7fill_$INTO', 'v7fill_$CINTO', 'v7fill_${INTO}_rev', 'v7fill_${CINTO}_rev') AND NOT active" >/dev/null || true
}
drop_slot
trap 'drop_slot; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, note text);
   INSERT INTO orders SELECT g, timestamptz '2025-01-01' + g * interval '1 day', 'n' || g FROM generate_series(1, 100) g;
   CREATE TABLE items_sr (id bigserial PRIMARY KEY, order_id bigint, created_at timestamptz NOT NULL, qty int);
   INSERT INTO items_sr (order_id, created_at, qty)
     SELECT g % 100 + 1, timestamptz '2025-02-01' + g * interval '1 hour', g FROM generate_series(1, 500) g"
run_expect 0 "$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" \
    --child 'public.items_sr(order_id)' --child-mode migrate
assert_contains "$OUT" "foreign_key=added" "the child's foreign key is there before the race"

# --lock-timeout and --switch-attempts: a transaction holding orders (until the switch has
# exited) makes every attempt time out; the switch gives up after the attempts asked for and
# changes nothing.
hold_open orders "LOCK TABLE orders IN ROW EXCLUSIVE MODE"
run_expect 5 "$V7FILL" migrate --into "$INTO" --switch --lock-timeout 200 --switch-attempts 2
hold_close orders
assert_contains "$OUT" "could not take its lock in 2 attempts of 200 ms" "the switch gives up after the attempts asked for"
assert_eq "follow" "$(q "SELECT phase FROM v7fill.migration WHERE into_table = '$INTO'")" "nothing switched"
run_expect 2 "$V7FILL" migrate --into "$INTO" --status --switch-attempts 2
assert_contains "$OUT" "--switch-attempts goes with --switch" "--switch-attempts without --switch is refused"
# The attempts made the way back's slots; the steps below wait for the switch to make them.
drop_rev() {
    q "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE slot_name IN ('v7fill_${INTO}_rev', 'v7fill_${CINTO}_rev')" >/dev/null
}
drop_rev
# commit_at_way_back SQL: in the background (its pid in wpid), a transaction runs SQL and commits
# once the switch has begun to make the way back's slot: after its catch-ups one after the
# other, so the change reaches the captures while they run side by side.
commit_at_way_back() {
    psql -X -q -v ON_ERROR_STOP=1 >writer.log 2>&1 <<SQL &
BEGIN;
$1;
DO \$\$ BEGIN
  FOR i IN 1..600 LOOP
    EXIT WHEN EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = 'v7fill_${INTO}_rev');
    PERFORM pg_sleep(0.1);
  END LOOP;
END \$\$;
COMMIT;
SQL
    wpid=$!
}

# A child's capture failing for another reason while the captures run side by side (a test-only
# trigger on the child's new table refuses the marked row with SQLSTATE 55000, which no row
# retry covers) stops the switch with that capture's own error and exit code (exit 70 and the
# error only as a warning before), and switches nothing.  The transaction that inserts the row
# commits once the switch has begun to make the way back's slot, as in the race below.
q "CREATE FUNCTION refuse_child() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN
     IF NEW.qty = -2 THEN
       RAISE EXCEPTION 'test trigger refuses the child row with qty -2' USING ERRCODE = '55000';
     END IF;
     RETURN NEW;
   END \$\$;
   CREATE TRIGGER zz_refuse BEFORE INSERT ON $CINTO FOR EACH ROW EXECUTE FUNCTION refuse_child()"
commit_at_way_back "INSERT INTO items_sr (order_id, created_at, qty) VALUES (8, timestamptz '2025-02-11', -2)"
run_expect 5 "$V7FILL" migrate --into "$INTO" --switch
wait "$wpid" || fail "the refused row's transaction: $(cat writer.log)"
assert_contains "$OUT" "the capture into public.$CINTO" "the switch's error names the child's capture"
assert_contains "$OUT" "test trigger refuses the child row with qty -2" "the switch's error is the capture's own"
assert_contains "$OUT" "55000" "the error carries the server's SQLSTATE"
assert_not_contains "$OUT" "ended before it was caught up" "not the old generic failure"
assert_eq "follow" "$(q "SELECT phase FROM v7fill.migration WHERE into_table = '$INTO'")" "nothing switched"
assert_eq "0|0" "$(q "SELECT (SELECT count(*) FROM pg_class WHERE relname = 'orders_legacy'), (SELECT count(*) FROM pg_class WHERE relname = 'items_sr_legacy')")" \
    "no table renamed"
q "DROP TRIGGER zz_refuse ON $CINTO; DROP FUNCTION refuse_child()"
drop_rev

# The race, made certain by two test-only triggers.  The child's insert of the marked row, after
# v7fill's own BEFORE trigger (v7fill_fk_uuid: triggers fire in name order) has read the parent's
# map row, takes advisory lock 7001 and waits until the parent's delete of a map row waits for
# it; the parent's delete (a statement trigger on the map: before any row is locked) waits until
# someone holds that lock.  Before the child's trigger read the map row FOR KEY SHARE, the
# parent's delete committed here, between the child's read and its commit, the deferred foreign
# key failed the child's commit (23503) and its capture applied the transaction again.  Now the
# delete waits for the child's commit and then sets the child's order_id_uuid NULL: no error,
# nothing applied again.  Each trigger raises when what it waits for does not come in 30 s.
q "CREATE FUNCTION hold_child() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN
     IF NEW.qty = -1 THEN
       PERFORM pg_advisory_xact_lock(7001);
       FOR i IN 1..300 LOOP
         PERFORM pg_stat_clear_snapshot();
         IF EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.query LIKE '%DELETE FROM \"public\".\"${INTO}_id_map\"%'
                       AND pg_backend_pid() = ANY (pg_blocking_pids(a.pid))) THEN
           RETURN NEW;
         END IF;
         PERFORM pg_sleep(0.1);
       END LOOP;
       RAISE EXCEPTION 'test trigger: in 30 s the parent''s delete did not wait for the child''s transaction';
     END IF;
     RETURN NEW;
   END \$\$;
   CREATE TRIGGER zz_hold BEFORE INSERT ON $CINTO FOR EACH ROW EXECUTE FUNCTION hold_child();
   CREATE FUNCTION hold_parent() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN
     FOR i IN 1..300 LOOP
       IF EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = 7001 AND granted) THEN
         RETURN NULL;
       END IF;
       PERFORM pg_sleep(0.1);
     END LOOP;
     RAISE EXCEPTION 'test trigger: in 30 s the child''s insert did not read the map row';
   END \$\$;
   CREATE TRIGGER zz_hold BEFORE DELETE ON ${INTO}_id_map FOR EACH STATEMENT EXECUTE FUNCTION hold_parent()"
# The changes must reach the captures when they run side by side, i.e. after the switch's two
# passes one after the other: the transaction that inserts the marked child of order 7 and
# deletes order 7 (its time in a month the child target has a partition for: creating one would
# wait for the parent's transaction) commits once the switch has begun to create the way back's slot, which comes
# between the two (and waits for this transaction).
commit_at_way_back "INSERT INTO items_sr (order_id, created_at, qty) VALUES (7, timestamptz '2025-02-10', -1);
   DELETE FROM orders WHERE id = 7"
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
echo "$OUT" | grep -v max_slot_wal
wait "$wpid" || fail "the racing transaction: $(cat writer.log)"
assert_not_contains "$OUT" "applying it again" "the child's read of the map row held the parent's delete back: no foreign key error"
assert_contains "$OUT" "phase switched" "the switch goes on after the race"
# The switch starts each capture several times: the unlimited max_slot_wal_keep_size is said
# once per slot.
for slot in "v7fill_$INTO" "v7fill_$CINTO"; do
    assert_eq 1 "$(grep -c "slot \"$slot\" keeps every WAL segment" <<<"$OUT")" "the keep-size warning for $slot, once"
done
assert_eq "1|t" "$(q "SELECT count(*), bool_and(order_id_uuid IS NULL) FROM items_sr WHERE qty = -1")" \
    "the raced child row is in the switched child table, its parent gone (NULL order_id_uuid)"
assert_eq 0 "$(q "SELECT count(*) FROM orders WHERE legacy_id = 7")" "the deleted parent is gone from the switched parent table"
assert_eq 1 "$(q "SELECT count(*) FROM items_sr i JOIN orders o ON o.id = i.order_id_uuid WHERE i.qty = -2 AND o.legacy_id = 8")" \
    "the row the failed switch's capture refused is applied by the next switch, with its parent's uuid"
assert_eq 0 "$(q "SELECT count(*) FROM items_sr WHERE order_id_uuid IS NOT NULL AND order_id_uuid NOT IN (SELECT id FROM orders)")" \
    "every order_id_uuid resolves to an orders id"
for t in orders items_sr; do
    assert_eq "$(q "SELECT count(*) FROM ${t}_legacy")" "$(q "SELECT count(*) FROM $t")" "$t: as many rows as ${t}_legacy"
done
drop_slot
echo "ok t_migrate_childswitchrace"
