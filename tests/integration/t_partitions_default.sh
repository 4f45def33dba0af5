#!/usr/bin/env bash
# DEFAULT partition: without rows of the new windows creation just works; with such rows
# the window is reported (issues=1, exit 3) and nothing is created from it on;
# --move-from-default moves exactly those rows, in one transaction, and nothing else.
source "$(dirname "$0")/lib.sh"

f() { "$V7FILL" uuid floor "$1"; }
at() { "$V7FILL" uuid new --at "$1"; }

sqlf <<SQL
CREATE TABLE events (id uuid PRIMARY KEY, v int NOT NULL) PARTITION BY RANGE (id);
CREATE TABLE events__2026_06 PARTITION OF events FOR VALUES FROM ('$(f 2026-06-01)') TO ('$(f 2026-07-01)');
CREATE TABLE events_default PARTITION OF events DEFAULT;
SQL

# rows in DEFAULT, but none of the windows asked for
q "INSERT INTO events VALUES ('$(at 2030-01-15)', 1), ('$(at 2030-02-15)', 2)" >/dev/null
run_expect 0 "$V7FILL" partitions events --from 2026-07-01 --to 2026-09-01
assert_contains "$OUT" "created=2 skipped=0 gaps_filled=0 issues=0" "no conflicting rows"
assert_eq 2 "$(q "SELECT count(*) FROM events_default")" "default untouched"

# rows of September and October sit in DEFAULT (their windows do not exist yet)
sep1=$(at 2026-09-01T00:00:00Z)
sep2=$(at 2026-09-30T23:59:59.999Z)
oct1=$(at 2026-10-10)
q "INSERT INTO events VALUES ('$sep1', 10), ('$sep2', 11), ('$oct1', 12)" >/dev/null
assert_eq 5 "$(q "SELECT count(*) FROM events_default")" "rows in default"

# without --move-from-default: reported, exit 3, September not created, October not looked at
run_expect 3 "$V7FILL" partitions events --from 2026-08-01 --to 2026-11-01
assert_contains "$OUT" "created=0 skipped=1 gaps_filled=0 issues=1" "issue summary"
assert_contains "$OUT" "holds 2 rows of window events__2026_09" "how many rows"
assert_contains "$OUT" "--move-from-default" "what to do"
assert_eq 0 "$(q "SELECT count(*) FROM pg_class WHERE relname IN ('events__2026_09', 'events__2026_10')")" "nothing created"
assert_eq 5 "$(q "SELECT count(*) FROM events_default")" "default unchanged"
# --dry-run says the same without touching anything
run_expect 3 "$V7FILL" partitions events --from 2026-08-01 --to 2026-11-01 --dry-run
assert_contains "$OUT" "not created, the DEFAULT partition holds 2 of its rows" "dry-run issue"

# --dry-run --move-from-default shows the move
run_expect 0 "$V7FILL" partitions events --from 2026-09-01 --to 2026-11-01 --dry-run --move-from-default
assert_contains "$OUT" "WITH moved AS (DELETE FROM ONLY \"public\".\"events_default\"" "move DDL"
assert_contains "$OUT" "LOCK TABLE ONLY \"public\".\"events_default\" IN SHARE ROW EXCLUSIVE MODE" "lock in DDL"

# --move-from-default: exactly those rows move, the 2030 rows stay
before=$(q "SELECT string_agg(id::text || ':' || v, ',' ORDER BY id) FROM events")
run_expect 0 "$V7FILL" partitions events --from 2026-08-01 --to 2026-11-01 --move-from-default
assert_contains "$OUT" "created=2 skipped=1 gaps_filled=0 issues=0" "moved"
assert_contains "$OUT" "rows moved from DEFAULT" "reported"
assert_eq "$before" "$(q "SELECT string_agg(id::text || ':' || v, ',' ORDER BY id) FROM events")" "same rows, none lost or doubled"
assert_eq "events__2026_09:2 events__2026_10:1 events_default:2" \
    "$(q "SELECT string_agg(t || ':' || n, ' ' ORDER BY t) FROM (SELECT tableoid::regclass::text AS t, count(*) AS n FROM events GROUP BY 1) s")" \
    "rows where they belong"
assert_eq "$sep1 $sep2" "$(q "SELECT string_agg(id::text, ' ' ORDER BY id) FROM events__2026_09")" "the September rows"
assert_eq 1 "$(q "SELECT count(*) FROM pg_index WHERE indrelid = 'events__2026_09'::regclass")" "primary key built over the moved rows"
run_expect 0 "$V7FILL" partitions events --from 2026-08-01 --to 2026-11-01
assert_contains "$OUT" "created=0 skipped=3" "re-run"
echo "ok"
