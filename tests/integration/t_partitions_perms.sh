#!/usr/bin/env bash
# Permission denied comes back with SQLSTATE 42501 and a sentence naming the missing
# privilege, and nothing is half-created: no stray table, no partition.  Lock timeouts
# are retried and then reported with 55P03 and what to do.
source "$(dirname "$0")/lib.sh"

at() { "$V7FILL" uuid new --at "$1"; }
relations_in() { q "SELECT count(*) FROM pg_class WHERE relnamespace = '$1'::regnamespace"; }

sqlf <<'SQL'
DROP ROLE IF EXISTS part_nocreate;
DROP ROLE IF EXISTS part_notowner;
CREATE ROLE part_nocreate LOGIN;
CREATE ROLE part_notowner LOGIN;
CREATE SCHEMA locked;
GRANT USAGE ON SCHEMA locked TO part_nocreate;
CREATE TABLE locked.events (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
ALTER TABLE locked.events OWNER TO part_nocreate;
CREATE SCHEMA open;
GRANT USAGE, CREATE ON SCHEMA open TO part_notowner;
CREATE TABLE open.events (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
GRANT SELECT ON open.events TO part_notowner;
SQL

# owner of the table, but no CREATE on its schema
n0=$(relations_in locked)
PGUSER=part_nocreate run_expect 5 "$V7FILL" partitions locked.events --from 2026-07-01 --to 2026-09-01
assert_contains "$OUT" "SQLSTATE: 42501" "sqlstate"
assert_contains "$OUT" "permission denied for schema locked" "server message"
assert_contains "$OUT" "could not create partition locked.events__2026_07" "what failed"
assert_contains "$OUT" "needs CREATE on schema locked" "which privilege"
assert_contains "$OUT" "created=0 skipped=0 gaps_filled=0 issues=0" "summary"
assert_eq "$n0" "$(relations_in locked)" "nothing half-created"
q "GRANT CREATE ON SCHEMA locked TO part_nocreate" >/dev/null
PGUSER=part_nocreate run_expect 0 "$V7FILL" partitions locked.events --from 2026-07-01 --to 2026-09-01
assert_contains "$OUT" "created=2" "with CREATE"

# CREATE on the schema but not the owner: the table would be created, then refused
n0=$(relations_in open)
PGUSER=part_notowner run_expect 5 "$V7FILL" partitions open.events --from 2026-07-01 --to 2026-09-01
assert_contains "$OUT" "SQLSTATE: 42501" "sqlstate"
assert_contains "$OUT" "run v7fill as that role or as a member of it" "what to do"
assert_eq "$n0" "$(relations_in open)" "the created table was rolled back"
# a dry run only reads: it works for anyone who can read the catalog
PGUSER=part_notowner run_expect 0 "$V7FILL" partitions open.events --from 2026-07-01 --to 2026-09-01 --dry-run
assert_contains "$OUT" "ATTACH PARTITION" "dry run as another role"

# lock timeout: an ACCESS EXCLUSIVE holder makes every attempt time out
PGAPPNAME=v7fill_test_locker psql -X -q -v ON_ERROR_STOP=1 >"$T_TMP/locker.out" 2>&1 <<SQL &
BEGIN;
LOCK TABLE open.events IN ACCESS EXCLUSIVE MODE;
\! touch $T_TMP/locked
\! i=0; while [ ! -f $T_TMP/release ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
COMMIT;
SQL
locker=$!
for _ in $(seq 100); do [ -f "$T_TMP/locked" ] && break; sleep 0.1; done
[ -f "$T_TMP/locked" ] || fail "locker did not start: $(cat "$T_TMP/locker.out")"
run_expect 5 "$V7FILL" partitions open.events --from 2026-07-01 --to 2026-08-01 --lock-timeout 100 --lock-retries 2
assert_contains "$OUT" "SQLSTATE: 55P03" "lock timeout sqlstate"
assert_contains "$OUT" "within 100 ms, 3 attempts" "retried"
assert_contains "$OUT" "raise --lock-timeout" "what to do"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'open.events'::regclass")" "nothing created under the lock"
# released while v7fill retries: it succeeds
( sleep 0.5; touch "$T_TMP/release" ) &
run_expect 0 "$V7FILL" partitions open.events --from 2026-07-01 --to 2026-08-01 --lock-timeout 300 --lock-retries 10
assert_contains "$OUT" "created=1" "after the lock is released"
wait $locker
echo "ok"
