# v7fill stream --window-tz: a target whose windows were made at local midnight
# (`partitions --window-tz Europe/Berlin`) gets its windows ahead in the same zone.  Without the
# option the stream refuses to make UTC windows next to them (exit 3, naming --window-tz); with
# it the copy and the windows ahead go on, every window's lower bound at Berlin midnight.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
cleanup_slots() { q "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND NOT active" >/dev/null; }
trap 'cleanup_slots >/dev/null 2>&1 || true; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE src (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, v text);
   INSERT INTO src SELECT g, now() - g * interval '1 hour', 'x' || g FROM generate_series(1, 100) g;
   CREATE PUBLICATION p FOR TABLE src;
   CREATE TABLE dst (id uuid PRIMARY KEY, legacy_id bigint, created_at timestamptz NOT NULL, v text) PARTITION BY RANGE (id)"
# Windows from 40 days ago to now's: the stream's windows ahead (the next 2) are missing.
run_expect 0 "$V7FILL" partitions dst --from "$(date -u -d '-40 days' +%F)" --to "$(date -u +%F)" --window-tz Europe/Berlin
before=$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'dst'::regclass")
stream() { "$V7FILL" stream dst --source "dbname=$PGDATABASE" --from public.src --publication p --slot s_wtz --map id=legacy_id --until-caught-up "$@"; }

run_expect 3 stream
assert_contains "$OUT" "not at a midnight in UTC" "without --window-tz: UTC windows next to Berlin ones are refused"
assert_contains "$OUT" "--window-tz" "the error names the option"
run_expect 2 stream --window-tz localtime
assert_contains "$OUT" "zone of the machine" "--window-tz localtime is a usage error"

run_expect 0 stream --window-tz Europe/Berlin
assert_eq 100 "$(q "SELECT count(*) FROM dst")" "every source row copied"
after=$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'dst'::regclass")
[ "$after" -ge $((before + 2)) ] || fail "the windows ahead were not created: $before partitions before, $after after"
# Every partition's lower bound (a UUIDv7: its first 48 bits are Unix milliseconds) is a midnight
# in Europe/Berlin.
assert_eq "0 $after" "$(q "SELECT count(*) FILTER (WHERE (to_timestamp(('x' || substr(replace(lo, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)
                                AT TIME ZONE 'Europe/Berlin')::time <> '00:00') || ' ' || count(*)
    FROM (SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1] AS lo
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'dst'::regclass) b")" \
    "every window, the new ones too, starts at Berlin midnight"
q "INSERT INTO src VALUES (1000, now(), 'live')"
run_expect 0 stream --window-tz Europe/Berlin
assert_eq 1 "$(q "SELECT count(*) FROM dst WHERE v = 'live'")" "a change after the copy is applied"
cleanup_slots
echo "ok t_stream_windowtz"
