# v7fill maintain killed between a window's detach and its drop (DETACH CONCURRENTLY commits on
# its own): the window is no partition any more, and before, no later run saw it again, so its
# expired rows stayed for good.  Now the window carries a marker from before its detach; a
# --detach-only run leaves it (and marks nothing of its own), the next run drops it, saying so,
# and leaves the tables --detach-only kept.  A marker left on a partition still attached (a run
# stopped before or during its detach) is cleared by the next run, so that a later detach by
# hand is never taken for v7fill's; a marked table whose window is not past the cutoff now is
# kept.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC
sqlf -f "$V7FILL_ROOT/examples/schema.sql"
sqlf -f "$V7FILL_ROOT/contrib/sql/v7fill_uuid7.sql"
month0=$(date -u +%Y-%m-01)
mon() { date -u -d "$month0 $1 months" +%Y-%m-%d; }
name() { date -u -d "$month0 $1 months" +events__%Y_%m; }
run_expect 0 "$V7FILL" partitions events --from "$(mon -8)" --to "$(mon 1)"
for k in -8 -7 -6 -5 -4 -3 -2 -1 0; do
    q "INSERT INTO events (id, created_at, account_id, kind)
       SELECT uuid7_floor(t), t, 1, 'k' FROM (SELECT '$(mon "$k")'::timestamptz + interval '14 days' AS t) s" >/dev/null
done
W=$(name -8)
ispart() { q "SELECT coalesce((SELECT relispartition::text FROM pg_class WHERE oid = to_regclass('public.$1')), 'gone')"; }
marker() { q "SELECT coalesce(obj_description('public.$1'::regclass, 'pg_class'), '-')"; }
q "COMMENT ON TABLE $(name -7) IS 'kept by the detach-only run';
   COMMENT ON TABLE $W IS 'the oldest; one; two'" >/dev/null
pid=
trap 'kill -9 ${pid:-} 2>/dev/null || true; rm -rf "$T_TMP"' EXIT

# The first DROP TABLE waits (an event trigger, while the table hold has a row): v7fill is
# killed there, after the detach committed.
q "CREATE TABLE hold (x int);
   INSERT INTO hold VALUES (1);
   CREATE FUNCTION wait_drop() RETURNS event_trigger LANGUAGE plpgsql AS \$\$
   BEGIN
       IF EXISTS (SELECT 1 FROM hold) THEN PERFORM pg_sleep(60); END IF;
   END \$\$;
   CREATE EVENT TRIGGER wait_drop ON ddl_command_start WHEN TAG IN ('DROP TABLE') EXECUTE FUNCTION wait_drop()" >/dev/null
"$V7FILL" maintain events --retention 150d >run1.log 2>&1 &
pid=$!
poll_until "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep')" \
    "maintain's DROP of $W waiting" 60
assert_eq false "$(ispart "$W")" "$W detached before the kill"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=
q "DELETE FROM hold;
   SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'" >/dev/null
poll_until "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep')" \
    "the killed run's session gone" 30
assert_eq false "$(ispart "$W")" "after the kill $W is a standalone table"
assert_contains "$(marker "$W")" "v7fill maintain: retiring from parent" "$W carries the retirement marker"
assert_contains "$(marker "$W")" "; comment before: the oldest; one; two" "the marker keeps $W's own comment"

run_expect 0 "$V7FILL" maintain events --retention 150d --detach-only
echo "$OUT"
assert_contains "$OUT" "an earlier run detached it to drop it and stopped before the drop" "--detach-only names $W"
assert_eq false "$(ispart "$W")" "--detach-only leaves $W"
assert_eq "false|kept by the detach-only run" "$(ispart "$(name -7)")|$(marker "$(name -7)")" \
    "--detach-only detached $(name -7) and kept its comment (no marker)"

# A marker of a run that stopped before or during a detach (by hand here): on a partition still
# attached, and on a table detached by someone else whose window is not past the cutoff.
oid=$(q "SELECT 'events'::regclass::oid")
us() { q "SELECT (extract(epoch FROM '$1'::timestamptz) * 1000000)::int8"; }
mark() { echo "v7fill maintain: retiring from parent $oid; window $(us "$(mon "$1")") $(us "$(mon $(($1 + 1)))"); last insert before the detach: none"; }
A=$(name -2); D=$(name -1)
q "COMMENT ON TABLE $A IS '$(mark -2); comment before: March''s orders; checked';
   ALTER TABLE events DETACH PARTITION $D; COMMENT ON TABLE $D IS '$(mark -1)'" >/dev/null
run_expect 0 "$V7FILL" maintain events --retention 150d --dry-run
assert_contains "$OUT" "would drop public.$W (its retirement stopped after the detach)" "--dry-run says it would drop $W"
assert_contains "$OUT" "$D: an earlier run detached it to drop it and stopped before the drop, but its window is not past the retention cutoff now: would keep it" \
    "--dry-run: a marked table whose window is not past the cutoff would be kept"
assert_eq false "$(ispart "$W")" "--dry-run dropped nothing"

run_expect 0 "$V7FILL" maintain events --retention 150d
echo "$OUT"
assert_contains "$OUT" "dropped public.$W (its retirement had stopped after the detach)" "the next run drops $W, saying why"
assert_eq "March's orders; checked" "$(marker "$A")" \
    "a marker left on a partition still attached is cleared, the table's own comment put back"
assert_eq "false|-" "$(ispart "$D")|$(marker "$D")" "a marked table whose window is not past the cutoff is kept, its marker cleared"
q "ALTER TABLE events DETACH PARTITION $A" >/dev/null
run_expect 0 "$V7FILL" maintain events --retention 150d
assert_eq false "$(ispart "$A")" "a partition detached by hand after its marker was cleared is left alone"
assert_eq gone "$(ispart "$W")" "$W dropped"
assert_eq false "$(ispart "$(name -7)")" "the table --detach-only kept stays"
assert_contains "$OUT" "detached=0 dropped=0 issues=0" "a run after that drops nothing more"
echo "ok t_maintain_kill"
