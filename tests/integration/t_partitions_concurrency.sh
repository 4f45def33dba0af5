#!/usr/bin/env bash
# Concurrency: two `v7fill partitions` over the same range at once create every window
# exactly once and both exit 0 (advisory lock + re-read).  A session with an open
# transaction that has read and written other partitions does not hold creation up, and
# its own queries are not blocked (the lock level is SHARE UPDATE EXCLUSIVE, not ACCESS
# EXCLUSIVE: a plain CREATE TABLE ... PARTITION OF times out in the same situation).
source "$(dirname "$0")/lib.sh"

at() { "$V7FILL" uuid new --at "$1"; }
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }

sqlf <<'SQL'
CREATE TABLE race (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
SQL

# two processes, 59 daily windows
"$V7FILL" partitions race --from 2026-01-01 --to 2026-03-01 --granularity day >"$T_TMP/a.out" 2>&1 &
pa=$!
"$V7FILL" partitions race --from 2026-01-01 --to 2026-03-01 --granularity day >"$T_TMP/b.out" 2>&1 &
pb=$!
sa=0; wait $pa || sa=$?
sb=0; wait $pb || sb=$?
assert_eq 0 "$sa" "first process: $(cat "$T_TMP/a.out")"
assert_eq 0 "$sb" "second process: $(cat "$T_TMP/b.out")"
assert_eq 59 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'race'::regclass")" "59 windows"
assert_eq 0 "$(q "SELECT count(*) FROM pg_class WHERE relname ~ '^race__.*_p[0-9]+$'")" "no gap pieces"
ca=$(tail -n1 "$T_TMP/a.out" | sed -E 's/^created=([0-9]+) skipped=([0-9]+).*/\1 \2/')
cb=$(tail -n1 "$T_TMP/b.out" | sed -E 's/^created=([0-9]+) skipped=([0-9]+).*/\1 \2/')
read -r ca_c ca_s <<<"$ca"
read -r cb_c cb_s <<<"$cb"
assert_eq 59 "$((ca_c + cb_c))" "each window created once ($ca / $cb)"
assert_eq 59 "$((ca_c + ca_s))" "first process saw every window"
assert_eq 59 "$((cb_c + cb_s))" "second process saw every window"
echo "race: $ca_c + $cb_c created"

# an open transaction that read and wrote another partition
sqlf <<SQL
CREATE TABLE events (id uuid PRIMARY KEY, v int) PARTITION BY RANGE (id);
CREATE TABLE events__2026_06 PARTITION OF events
    FOR VALUES FROM ('$("$V7FILL" uuid floor 2026-06-01)') TO ('$("$V7FILL" uuid floor 2026-07-01)');
SQL
june=$(at 2026-06-10)
july=$(at 2026-07-10)
PGAPPNAME=v7fill_test_open_tx psql -X -q -v ON_ERROR_STOP=1 >"$T_TMP/bg.out" 2>&1 <<SQL &
BEGIN;
SELECT count(*) FROM events;
INSERT INTO events VALUES ('$june', 1);
UPDATE events SET v = 2 WHERE id = '$june';
\! touch $T_TMP/ready
\! i=0; while [ ! -f $T_TMP/done ] && [ \$i -lt 150 ]; do sleep 0.1; i=\$((i + 1)); done
SELECT 'after:' || count(*) FROM events;
INSERT INTO events VALUES ('$july', 3);
COMMIT;
SQL
bg=$!
for _ in $(seq 100); do [ -f "$T_TMP/ready" ] && break; sleep 0.1; done
[ -f "$T_TMP/ready" ] || fail "background session did not start: $(cat "$T_TMP/bg.out")"
assert_eq "idle in transaction" \
    "$(q "SELECT state FROM pg_stat_activity WHERE application_name = 'v7fill_test_open_tx'")" "open transaction"
assert_contains "$(q "SELECT string_agg(l.mode, ',') FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                       WHERE a.application_name = 'v7fill_test_open_tx' AND l.relation = 'events'::regclass")" \
    "RowExclusiveLock" "it holds locks on the parent"

# control: the classic way waits for that transaction (and times out here)
run_expect 1 psql -X -q -v ON_ERROR_STOP=1 -c "SET lock_timeout = '300ms'" -c "CREATE TABLE control PARTITION OF events
    FOR VALUES FROM ('$("$V7FILL" uuid floor 2027-01-01)') TO ('$("$V7FILL" uuid floor 2027-02-01)')"
assert_contains "$OUT" "lock timeout" "PARTITION OF needs ACCESS EXCLUSIVE"

# v7fill: no waiting, no retries needed
t0=$(ms_now)
run_expect 0 "$V7FILL" partitions events --from 2026-07-01 --to 2026-10-01 --lock-timeout 2000 --lock-retries 0
elapsed=$(( $(ms_now) - t0 ))
assert_contains "$OUT" "created=3 skipped=0 gaps_filled=0 issues=0" "created while the transaction is open"
[ "$elapsed" -lt 2000 ] || fail "creation took ${elapsed} ms: it waited for a lock"
assert_eq "idle in transaction" \
    "$(q "SELECT state FROM pg_stat_activity WHERE application_name = 'v7fill_test_open_tx'")" "still open meanwhile"
echo "created 3 windows in ${elapsed} ms beside an open writing transaction"

# the open session goes on: reads the parent, writes into a brand-new partition, commits
t0=$(ms_now)
touch "$T_TMP/done"
bs=0; wait $bg || bs=$?
assert_eq 0 "$bs" "background session: $(cat "$T_TMP/bg.out")"
[ $(( $(ms_now) - t0 )) -lt 5000 ] || fail "the open session was blocked"
assert_contains "$(cat "$T_TMP/bg.out")" "after:1" "its read after the creation"
assert_eq "events__2026_06 events__2026_07" \
    "$(q "SELECT string_agg(tableoid::regclass::text, ' ' ORDER BY id) FROM events")" "both rows landed"
echo "ok"

# A table that references the parent: ATTACH takes SHARE ROW EXCLUSIVE on it, so an open
# writer there holds window creation up; the 55P03 hint names that table and its foreign key
# (Issue 17 #5).
sqlf <<'SQL'
CREATE TABLE par (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE par_ref (rid serial PRIMARY KEY, pid uuid REFERENCES par (id));
SQL
run_expect 0 "$V7FILL" partitions par --from 2026-07-01 --to 2026-08-01
hold_open par_ref "INSERT INTO par_ref (pid) VALUES (NULL)"
"$V7FILL" partitions par --from 2026-08-01 --to 2026-09-01 --lock-timeout 2500 --lock-retries 0 >"$T_TMP/fk.out" 2>&1 &
v7=$!
poll_until "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = 'par_ref'::regclass AND NOT granted)" "v7fill to wait for a lock on par_ref"
assert_eq "ShareRowExclusiveLock" "$(q "SELECT string_agg(mode, ',') FROM pg_locks WHERE relation = 'par_ref'::regclass AND NOT granted")" "ATTACH waits for SHARE ROW EXCLUSIVE on the referencing table"
set +e; wait "$v7"; rc=$?; set -e
hold_close par_ref
cat "$T_TMP/fk.out"
assert_eq 5 "$rc" "lock timeout: exit status"
assert_contains "$(cat "$T_TMP/fk.out")" "SHARE ROW EXCLUSIVE on the tables that reference public.par, public.par_ref (foreign key par_ref_pid_fkey)" "55P03 hint names the referencing table"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'par'::regclass AND inhrelid::regclass::text LIKE 'par__2026_08%'")" "window not created"
