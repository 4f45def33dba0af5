# kill -9 at 20 random points of a multi-batch import, then rerun: the target
# holds exactly the expected rows, the rejects file exactly the expected
# rejects (none twice, none missing), and the counts balance across resumes.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE k (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL,
                note text) PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
with open("k.csv", "w") as f:
    f.write("n,created_at,note\n")
    for i in range(60000):
        t = f"20{22 + i % 4}-{1 + i % 12:02d}-{1 + i % 28:02d} 10:{i % 60:02d}:00+00"
        if i % 1000 == 17:
            t = "not a time"                     # client-side reject
        n = "x" if i % 1000 == 503 else str(i)   # server-side reject
        f.write(f"{n},{t},\"note {i}\"\n")
PY
expected_rows=$((60000 - 60 - 60))
kills=0
finished=0
finished_by_itself=0
for attempt in $(seq 1 20); do
    # A kill can land after the last batch committed (while the process reports and
    # exits): then the import is done, and running it again would re-read a finished
    # file (all duplicates, its rejects written again) -- not what this test is about.
    if [ "$(q "SELECT coalesce(bool_and(finished), false) FROM v7fill.checkpoint" 2>/dev/null || echo f)" = t ]; then
        finished=1
        break
    fi
    done_rows=$(q "SELECT coalesce(max(rows_read), 0) FROM v7fill.checkpoint" 2>/dev/null || echo 0)
    "$V7FILL" import k k.csv --batch-rows 500 --rejects rej.csv --source-ref 'k:{note}' \
        --no-progress --no-analyze --report-json final.json >run.out 2>&1 &
    pid=$!
    # Kill once a random number of further rows (1 to 6 batches) has committed,
    # then a random few ms later: mid-import on a fast machine and a slow one
    # (a fixed sleep let a fast machine finish after three kills).
    target=$((done_rows + 500 + RANDOM % 2500))
    while kill -0 "$pid" 2>/dev/null; do
        now_rows=$(q "SELECT coalesce(max(rows_read), 0) FROM v7fill.checkpoint" 2>/dev/null || echo 0)
        [ "$now_rows" -ge "$target" ] && break
        sleep 0.01
    done
    sleep "0.00$((RANDOM % 10))"
    if kill -9 "$pid" 2>/dev/null; then
        kills=$((kills + 1))
        wait "$pid" 2>/dev/null || true
    else
        wait "$pid" || { cat run.out; fail "import failed by itself"; }
        finished=1
        finished_by_itself=1
        break
    fi
done
echo "killed $kills times"
# The last kill, too, can land after the last batch committed (see above).
if [ "$finished" = 0 ] &&
    [ "$(q "SELECT coalesce(bool_and(finished), false) FROM v7fill.checkpoint")" = t ]; then
    finished=1
fi
[ "$kills" -ge 5 ] || fail "only $kills kills landed before the import finished"
if [ "$finished" = 0 ]; then
    run_expect 0 "$V7FILL" import k k.csv --batch-rows 500 --rejects rej.csv --source-ref 'k:{note}' \
        --no-progress --report-json final.json
    finished_by_itself=1
fi
cnt=$(q "SELECT count(*) FROM k")
assert_eq "$expected_rows" "$cnt" "exact row count after kills and resume"
assert_eq "$expected_rows" "$(q "SELECT count(DISTINCT n) FROM k")" "no row twice"
assert_eq 0 "$(q "SELECT count(*) FROM k WHERE n % 1000 IN (17, 503)")" "rejected rows absent"
assert_eq 120 "$(tail -n +2 rej.csv | wc -l | tr -d ' ')" "every reject once in the rejects file"
assert_eq 120 "$(tail -n +2 rej.csv | sort -u | wc -l | tr -d ' ')" "no reject twice"
# the file's accounting across all the killed runs (the checkpoint is cumulative)
assert_eq "60000|59880|120|t" "$(q "SELECT rows_read, inserted + duplicates, rejected, finished FROM v7fill.checkpoint")" \
    "checkpoint: read = inserted + duplicates + rejected across kills and resumes"
if [ -f final.json ] && [ "$finished_by_itself" = 1 ]; then
    python3 - <<'PY' || fail "final report does not balance or misses rows"
import json
r = json.load(open("final.json"))
assert r["balanced"], r
assert r["read"] == 60000, r
assert r["inserted"] + r["duplicates"] == 59880, r
assert r["rejected"] == 120, r
PY
fi
