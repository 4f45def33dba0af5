# v7fill migrate --window-tz: the target's windows (and a migrate-mode child's) start at local
# midnight of the zone, as `partitions --window-tz` makes them.  The zone is stored with the
# migration: a rerun without the option, the capture's windows and the switch keep it; a rerun
# naming another zone is refused; a zone the system does not know is refused before anything is
# stored; later forms refuse the option.  A first run into a target whose windows are another
# zone's stops (exit 3) and can be run again with that zone.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_wtz
CINTO=items_wtz_v7
drop_slots() {
    q "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE database = current_database() AND NOT active" >/dev/null
}
trap 'drop_slots >/dev/null 2>&1 || true; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, note text);
   INSERT INTO orders SELECT g, now() - g * interval '7 hours', 'n' || g FROM generate_series(1, 300) g;
   CREATE TABLE items_wtz (id bigserial PRIMARY KEY, order_id bigint REFERENCES orders, created_at timestamptz NOT NULL, qty int);
   INSERT INTO items_wtz (order_id, created_at, qty) SELECT g % 300 + 1, now() - g * interval '5 hours', g FROM generate_series(1, 400) g"
# Every partition's lower bound (a UUIDv7: its first 48 bits are Unix milliseconds) that is not a
# midnight in Europe/Berlin, and the partitions in all.
off_midnight() {
    q "SELECT count(*) FILTER (WHERE (to_timestamp(('x' || substr(replace(lo, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)
                                      AT TIME ZONE 'Europe/Berlin')::time <> '00:00') || ' ' || count(*)
         FROM (SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1] AS lo
                 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = '$1'::regclass) b"
}
migrate() { "$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" "$@"; }

run_expect 0 migrate --child 'public.items_wtz(order_id)' --child-mode migrate --window-tz Europe/Berlin --dry-run
assert_contains "$OUT" "each starting at midnight in Europe/Berlin (--window-tz)" "--dry-run names the windows' zone"

# An unknown zone: refused before anything is made or stored.
run_expect 3 migrate --window-tz Mars/Olympus
assert_contains "$OUT" "--window-tz" "the error names the option"
assert_eq "" "$(q "SELECT to_regclass('public.$INTO')")" "no target made for an unknown zone"

run_expect 0 migrate --child 'public.items_wtz(order_id)' --child-mode migrate --window-tz Europe/Berlin
assert_eq 300 "$(q "SELECT count(*) FROM $INTO")" "every parent row copied"
assert_eq 400 "$(q "SELECT count(*) FROM $CINTO")" "every child row copied"
for t in "$INTO" "$CINTO"; do
    read -r off all <<<"$(off_midnight "$t")"
    [ "$all" -ge 3 ] || fail "$t: $all partitions (the rows span about 3 months)"
    assert_eq 0 "$off" "$t: every window starts at Berlin midnight"
done
assert_eq "Europe/Berlin Europe/Berlin" "$(q "SELECT string_agg(window_tz, ' ' ORDER BY into_table) FROM v7fill.migration")" \
    "the zone is stored with the parent's and the child's migration"
# After each copy: ANALYZE of the partitioned table (autovacuum never analyzes one) and VACUUM of its map
for t in "$INTO" "$CINTO"; do
    assert_eq t "$(q "SELECT count(*) > 0 FROM pg_stats WHERE schemaname = 'public' AND tablename = '$t' AND inherited
                       AND attname = 'legacy_id'")" "$t: analyzed after its copy (the partitioned table's own statistics)"
    assert_eq t "$(q "SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relid = '${t}_id_map'::regclass")" \
        "${t}_id_map: vacuumed after the copy"
done
assert_contains "$OUT" "ANALYZE done in" "the ANALYZE after the copy is logged"
assert_match "$OUT" "of elapsed, [0-9.]+s the ANALYZE and VACUUM after the copy" "the summary says what they took"

# A rerun naming another zone after the copy finished is refused; one without the option keeps the stored zone, also for
# the windows the capture makes (rows far in the past, in months without a window yet).
run_expect 2 migrate --window-tz UTC
assert_contains "$OUT" "makes its windows at midnight in Europe/Berlin" "another zone on a rerun is refused, naming the stored one"
assert_contains "$OUT" "Its copy has finished" "the refusal says why"
q "INSERT INTO orders VALUES (1000, now() - interval '400 days', 'old'), (1001, now() - interval '700 days', 'older');
   INSERT INTO items_wtz (order_id, created_at, qty) VALUES (1000, now() - interval '500 days', -1)"
before=$(off_midnight "$INTO")
run_expect 0 migrate
assert_eq 302 "$(q "SELECT count(*) FROM $INTO")" "the rerun applied the new parents"
assert_eq 401 "$(q "SELECT count(*) FROM $CINTO")" "the rerun applied the new child"
for t in "$INTO" "$CINTO"; do
    read -r off all <<<"$(off_midnight "$t")"
    assert_eq 0 "$off" "$t: the windows the capture made start at Berlin midnight too"
done
[ "${before#* }" -lt "$(off_midnight "$INTO" | cut -d' ' -f2)" ] || fail "the capture made no window for the old rows"

# Later forms take the stored zone and refuse the option; --status shows it.
run_expect 0 "$V7FILL" migrate --into "$INTO" --status
assert_contains "$OUT" "start at midnight in Europe/Berlin" "--status shows the windows' zone"
run_expect 0 "$V7FILL" migrate --into "$INTO" --status --json
assert_contains "$OUT" '"window_tz": "Europe/Berlin"' "--status --json: window_tz"
run_expect 2 "$V7FILL" migrate --into "$INTO" --status --window-tz Europe/Berlin
assert_contains "$OUT" "stored by the first run" "--window-tz on a later form is refused"
q "INSERT INTO orders VALUES (1002, now() - interval '900 days', 'oldest')"
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
assert_contains "$OUT" "phase switched" "the switch goes through"
assert_eq 1 "$(q "SELECT count(*) FROM orders WHERE note = 'oldest'")" "the switch's catch-up applied the last row"
read -r off all <<<"$(off_midnight orders)"
assert_eq 0 "$off" "after the switch (the new table now named orders) every window starts at Berlin midnight"

# A target made beforehand with Berlin windows (`partitions --window-tz`): without the option
# migrate refuses to put UTC windows next to them (exit 3, naming --window-tz); with it, it
# migrates into them.
q "CREATE TABLE shipments (id bigint PRIMARY KEY, created_at timestamptz NOT NULL);
   INSERT INTO shipments SELECT g, now() - g * interval '3 hours' FROM generate_series(1, 100) g;
   CREATE TABLE shipments_v7 (id uuid PRIMARY KEY, legacy_id bigint NOT NULL, created_at timestamptz NOT NULL) PARTITION BY RANGE (id)"
run_expect 0 "$V7FILL" partitions shipments_v7 --from "$(date -u -d '-20 days' +%F)" --to "$(date -u +%F)" --window-tz Europe/Berlin
ship() { "$V7FILL" migrate --from public.shipments --key id --time-column created_at --into shipments_v7 "$@"; }
run_expect 3 ship
assert_contains "$OUT" "--window-tz" "without --window-tz: the error names the option"
# The first run stored the migration (UTC); its copy did not finish, so the zone can change.
run_expect 0 ship --window-tz Europe/Berlin --no-analyze
assert_contains "$OUT" "start at midnight in Europe/Berlin from now on, not in UTC" "the change of zone is said"
assert_eq "Europe/Berlin" "$(q "SELECT window_tz FROM v7fill.migration WHERE into_table = 'shipments_v7'")" "the new zone is stored"
assert_eq 100 "$(q "SELECT count(*) FROM shipments_v7")" "with --window-tz the rows go into the Berlin windows"
assert_eq 0 "$(q "SELECT count(*) FROM pg_stats WHERE tablename = 'shipments_v7' AND inherited")" "--no-analyze: not analyzed after the copy"
assert_not_contains "$OUT" "the ANALYZE and VACUUM after" "--no-analyze: none in the summary"
read -r off all <<<"$(off_midnight shipments_v7)"
assert_eq 0 "$off" "every window of the target made beforehand starts at Berlin midnight"
drop_slots
echo "ok t_migrate_windowtz"
