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
