#!/usr/bin/env bash
# Fault injection: the target cluster goes away (pg_ctl stop -m immediate) mid-import.
#  1. A short outage (~4 s): v7fill retries with backoff (1, 2, 4 s ...) and carries on
#     once the server is back; the log shows the attempts with growing delays.
#  2. An outage longer than the whole backoff (1+2+4+8+16 s): v7fill gives up with exit
#     status 5, says that committed batches are kept and that rerunning resumes; the
#     rerun (server back) completes with exactly the expected rows and rejects.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

# whatever happens, leave the cluster running for the tests after this one
trap '"$PGBIN/pg_isready" -q -h "$PGHOST" -p "$PGPORT" || pg_ctl_ -w -t 60 start; rm -rf "$T_TMP"' EXIT
committed() { q "SELECT coalesce(sum(records), 0) FROM v7fill.checkpoint" 2>/dev/null || echo 0; }
wait_committed_beyond() { # N PID
    for _ in $(seq 1 400); do
        [ "$(committed)" -gt "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

q "ALTER DATABASE \"$PGDATABASE\" SET synchronous_commit = on" >/dev/null
sqlf <<'SQL'
CREATE TABLE o (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
SQL
N=120000
python3 - "$N" <<'PY'
import sys
n = int(sys.argv[1])
with open("o.csv", "w") as f, open("expected.txt", "w") as e:
    f.write("n,created_at\n")
    for i in range(n):
        if i % 5000 == 77:
            f.write(f"{i},yesterday\n")           # rejected: unparsable time
            continue
        t = f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} 08:{i % 60:02d}:00+00"
        f.write(f"{i},{t}\n")
        e.write(f"{i}|{t}\n")
PY
sort expected.txt >expected.sorted
expected_rows=$(wc -l <expected.sorted | tr -d ' ')
import_cmd=("$V7FILL" import o o.csv --batch-rows 500 --source-ref 'o:{n}' --rejects rej.csv
            --no-progress --no-analyze --report-json final.json)

# 1. short outage
t0=$(date +%s)
"${import_cmd[@]}" >run1.out 2>&1 &
pid=$!
wait_committed_beyond 5000 "$pid" || fail "import did not get going: $(cat run1.out)"
pg_ctl_ -m immediate -w -t 60 stop
# down until the import has announced its third attempt (backoff 1 s, 2 s, then 4 s)
for _ in $(seq 1 300); do
    grep -q "attempt 3 of 5" run1.out && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
pg_ctl_ -w -t 60 start
wait_ready
# 2. long outage, while the same import is still running
c=$(committed)
if wait_committed_beyond "$c" "$pid"; then
    pg_ctl_ -m immediate -w -t 60 stop
    down_at=$(date +%s)
    set +e
    wait "$pid"
    st=$?
    set -e
    gave_up_after=$(( $(date +%s) - down_at ))
    pg_ctl_ -w -t 60 start
    wait_ready
    cat run1.out
    out=$(cat run1.out)
    assert_contains "$out" "attempt 3 of 5" "short outage: retried with backoff"
    assert_contains "$out" "reconnecting in 4 s" "the delay doubles"
    assert_contains "$out" "reconnected" "short outage survived"
    assert_contains "$out" "reconnecting in 16 s (attempt 5 of 5)" "long outage: every attempt made"
    assert_eq 5 "$st" "long outage: database error exit status"
    assert_contains "$out" "run the same command again to resume" "says how to resume"
    [ "$gave_up_after" -ge 29 ] && [ "$gave_up_after" -le 45 ] ||
        fail "gave up after ${gave_up_after}s, expected 1+2+4+8+16 s of backoff"
    echo "gave up after ${gave_up_after}s"
else
    wait "$pid" || true
    cat run1.out
    fail "the import finished before the second outage"
fi
# rerun: resumes and completes exactly
run_expect 0 "${import_cmd[@]}"
echo "$OUT"
assert_contains "$OUT" "resuming after line" "the rerun resumes"
q "SELECT n || '|' || created_at FROM o" | sort >actual.sorted
cmp -s expected.sorted actual.sorted || { diff expected.sorted actual.sorted | head; fail "not exactly the expected rows"; }
assert_eq "$expected_rows" "$(q "SELECT count(*) FROM o")" "no row twice"
assert_eq $((N / 5000)) "$(tail -n +2 rej.csv | wc -l | tr -d ' ')" "every reject once"
assert_eq $((N / 5000)) "$(tail -n +2 rej.csv | sort -u | wc -l | tr -d ' ')" "no reject twice"
python3 - "$N" "$expected_rows" <<'PY' || fail "final report: $(cat final.json)"
import json, sys
n, rows = map(int, sys.argv[1:])
r = json.load(open("final.json"))
assert r["balanced"] and r["read"] == n and r["inserted"] + r["duplicates"] == rows, r
assert r["rejected"] == n - rows, r
PY
echo "ok ($(( $(date +%s) - t0 ))s)"
