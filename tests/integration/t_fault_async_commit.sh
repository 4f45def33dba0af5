#!/usr/bin/env bash
# Fault injection: the server loses transactions it had acknowledged.  With
# synchronous_commit = off (or after a failover to an asynchronous standby) an immediate
# shutdown discards the last commits; the database stays consistent (each batch's rows,
# lookup entries and checkpoint vanish together) but is *behind* what v7fill was told.
#
# v7fill must notice when it reconnects: the checkpoint it reads back is neither the
# batch in flight nor the last batch it saw commit.  It may resume from the server's
# checkpoint, or stop and let a rerun resume; it must not carry on from its own memory,
# which silently skips the lost batches and reports them as inserted.
# Asserted: after the first run (and, if it exited non-zero, one rerun) the target holds
# exactly the expected rows and the final report's counts match the table.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

# A lazy WAL writer makes the loss certain rather than likely; restored on exit.
restore() {
    psql -X -q -d postgres -c "ALTER SYSTEM RESET wal_writer_delay" >/dev/null 2>&1 &&
        psql -X -q -d postgres -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
    rm -rf "$T_TMP"
}
trap restore EXIT
psql -X -q -d postgres -c "ALTER SYSTEM SET wal_writer_delay = '5s'" >/dev/null
psql -X -q -d postgres -c "SELECT pg_reload_conf()" >/dev/null
q "ALTER DATABASE \"$PGDATABASE\" SET synchronous_commit = off" >/dev/null

sqlf <<'SQL'
CREATE TABLE a (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
SQL
N=100000
python3 - "$N" <<'PY'
import sys
n = int(sys.argv[1])
with open("a.csv", "w") as f:
    f.write("n,created_at\n")
    for i in range(n):
        f.write(f"{i},2025-{1 + i % 12:02d}-{1 + i % 28:02d}T08:{i % 60:02d}:00Z\n")
PY
import_cmd=("$V7FILL" import a a.csv --batch-rows 1000 --source-ref 'a:{n}' --rejects rej.csv
            --no-progress --no-analyze --report-json final.json)

"${import_cmd[@]}" >run1.out 2>&1 &
pid=$!
for _ in $(seq 1 200); do
    [ "$(q "SELECT coalesce(sum(records), 0) FROM v7fill.checkpoint" 2>/dev/null || echo 0)" -ge 20000 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
kill -0 "$pid" 2>/dev/null || fail "the import finished before the restart"
before=$(q "SELECT records FROM v7fill.checkpoint")
pg_ctl_ -m immediate -w -t 60 restart
wait_ready
after=$(q "SELECT records FROM v7fill.checkpoint")
echo "checkpoint before the restart: $before records; after recovery: $after"
set +e
wait "$pid"
st=$?
set -e
cat run1.out
if [ "$st" != 0 ]; then
    echo "first run stopped with status $st; rerunning"
    run_expect 0 "${import_cmd[@]}"
fi
assert_eq "$N" "$(q "SELECT count(DISTINCT n) FROM a")" "every row once after the lost commits (rows lost: $((N - $(q "SELECT count(DISTINCT n) FROM a"))))"
assert_eq "$N" "$(q "SELECT count(*) FROM a")" "no row twice"
python3 - "$N" <<'PY' || fail "final report wrong: $(cat final.json)"
import json, sys
r = json.load(open("final.json"))
assert r["balanced"] and r["read"] == int(sys.argv[1]), r
assert r["inserted"] + r["duplicates"] == int(sys.argv[1]), r
PY
echo "ok"
