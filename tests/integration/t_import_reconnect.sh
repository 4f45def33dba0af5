# The server drops the import's connection mid-import (pg_terminate_backend):
# v7fill reconnects with backoff and finishes with the exact set.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE r (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
with open("r.csv", "w") as f:
    f.write("n,created_at\n")
    for i in range(80000):
        f.write(f"{i},2025-{1 + i % 12:02d}-{1 + i % 28:02d}T08:00:{i % 60:02d}.{i % 1000:03d}Z\n")
PY
"$V7FILL" import r r.csv --batch-rows 500 --source-ref 'r:{n}' --rejects rej.csv --no-progress \
    --report-json r.json >run.out 2>&1 &
pid=$!
# Mid-import: the first batch has committed (a lost connection while setting up,
# before any batch, is not retried: the rerun starts over).
for i in $(seq 1 200); do
    [ -n "$(q "SELECT to_regclass('v7fill.checkpoint')")" ] &&
        [ "$(q "SELECT count(*) FROM v7fill.checkpoint")" -gt 0 ] && break
    sleep 0.05
done
terminated=0
for i in $(seq 1 50); do
    sleep 0.1
    t=$(q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
           WHERE application_name = 'v7fill' AND datname = current_database()")
    if [ "$t" -gt 0 ]; then terminated=$((terminated + t)); [ "$terminated" -ge 2 ] && break; sleep 1.5; fi
done
wait "$pid" || { cat run.out; fail "import did not survive the lost connection"; }
cat run.out
[ "$terminated" -ge 1 ] || fail "no backend was terminated (import too fast?)"
assert_contains "$(cat run.out)" "reconnect" "the tool says it reconnects"
assert_eq 80000 "$(q "SELECT count(*) FROM r")" "every row after reconnecting"
assert_eq 80000 "$(q "SELECT count(DISTINCT n) FROM r")" "no row twice"
python3 - <<'PY' || fail "report does not balance"
import json
r = json.load(open("r.json"))
assert r["balanced"] and r["read"] == 80000 and r["inserted"] == 80000, r
PY

# The connection is lost after the last batch committed, during the closing VACUUM of
# the lookup (held up by a lock another session keeps until the test lets go): v7fill
# reconnects, runs ANALYZE and VACUUM again, and the import ends well (exit 0).
python3 - <<'PY'
with open("r2.csv", "w") as f:
    f.write("n,created_at\n")
    for i in range(80000, 82000):
        f.write(f"{i},2025-06-{1 + i % 28:02d}T09:00:00Z\n")
PY
psql -X -q -v ON_ERROR_STOP=1 >/dev/null 2>&1 <<'SQL' &
SET application_name = 'v7fill_test_locker';
BEGIN;
LOCK TABLE r_source_ref IN SHARE UPDATE EXCLUSIVE MODE;
SELECT pg_sleep(120);
COMMIT;
SQL
locker=$!
for i in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
            WHERE c.relname = 'r_source_ref' AND l.granted AND l.mode = 'ShareUpdateExclusiveLock'")" = 1 ] && break
    sleep 0.05
done
"$V7FILL" import r r2.csv --source-ref 'r:{n}' --rejects rej2.csv --no-progress >run2.out 2>&1 &
pid=$!
killed=0
for i in $(seq 1 1200); do
    sleep 0.05
    t=$(q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
           WHERE application_name = 'v7fill' AND datname = current_database()
             AND query LIKE 'VACUUM%' AND wait_event_type = 'Lock'")
    if [ "$t" -gt 0 ]; then killed=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
done
# Let go of the lock a little after the reconnect began: the second VACUUM waits, then runs.
sleep 1.5
q "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity
   WHERE application_name = 'v7fill_test_locker'" >/dev/null
wait "$locker" || true
status=0
wait "$pid" || status=$?
cat run2.out
[ "$killed" = 1 ] || fail "the closing VACUUM was never seen waiting"
assert_eq 0 "$status" "exit status after a connection lost in the closing VACUUM"
assert_contains "$(cat run2.out)" "reconnect" "the tool says it reconnects"
assert_eq 82000 "$(q "SELECT count(*) FROM r")" "every row of both files"
assert_eq 1 "$(q "SELECT count(*) FROM pg_stat_user_tables WHERE relname = 'r_source_ref'
                  AND vacuum_count > 0")" "the lookup was vacuumed after reconnecting"
