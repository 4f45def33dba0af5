#!/usr/bin/env bash
# Fault injection at one exact point: kill -9 after a batch's rejects are durable (written
# and fsynced) but before its transaction commits.  The point is made deterministic by
# holding a lock on v7fill.checkpoint, so the batch's checkpoint update (its last
# statement) waits; v7fill is killed while it waits.  t_import_kill.sh covers random
# points; this covers the window between "rejects fsynced" and COMMIT, for the first
# batch of a file (no checkpoint yet) and for a later batch.
# Asserted after the rerun: exactly the expected rows, every reject exactly once, the
# rejects file valid CSV, the counts balance.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

sqlf <<'SQL'
CREATE TABLE kc (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
CREATE TABLE other (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL)
    PARTITION BY RANGE (id);
SQL
# v7fill's own tables exist after any first import
printf 'created_at\n2024-01-01\n' >other.csv
run_expect 0 "$V7FILL" import other other.csv --rejects other.rej --no-progress

N=20000
python3 - "$N" <<'PY'
import sys
n = int(sys.argv[1])
with open("kc.csv", "w") as f, open("expected.txt", "w") as e, open("expected_rej.txt", "w") as r:
    f.write("n,created_at\n")
    for i in range(n):
        if i % 50 == 7:
            f.write(f"{i},no-time-{i}\n")
            r.write(f"{i + 2}\n")
        else:
            t = f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} 10:{i % 60:02d}:00+00"
            f.write(f"{i},{t}\n")
            e.write(f"{i}|{t}\n")
PY
sort expected.txt >expected.sorted
sort -n expected_rej.txt >expected_rej.sorted

# hold_lock: a session that locks v7fill.checkpoint until $T_TMP/release exists
hold_lock() {
    rm -f locked release
    psql -X -q -v ON_ERROR_STOP=1 >locker.out 2>&1 <<SQL &
BEGIN;
LOCK TABLE v7fill.checkpoint IN EXCLUSIVE MODE;
\! touch $T_TMP/locked
\! i=0; while [ ! -f $T_TMP/release ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done
COMMIT;
SQL
    locker=$!
    for _ in $(seq 1 100); do [ -f locked ] && return 0; sleep 0.1; done
    fail "locker did not start: $(cat locker.out)"
}
release_lock() { touch release; wait "$locker" || true; }
# wait until the import waits for the lock (its rejects are then fsynced)
wait_blocked() {
    for _ in $(seq 1 200); do
        [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'v7fill'
                AND datname = current_database() AND wait_event_type = 'Lock'")" -gt 0 ] && return 0
        kill -0 "$1" 2>/dev/null || fail "the import ended instead of waiting for the lock"
        sleep 0.05
    done
    fail "the import never waited for the lock"
}
rejects_lines() { # FILE -> sorted line numbers, after checking the file is valid CSV
    python3 - "$1" <<'PY' || fail "rejects file $1 is not valid CSV"
import csv, sys
with open(sys.argv[1], newline="") as f:
    rows = list(csv.reader(f))
assert rows[0] == ["source", "line", "reason", "sqlstate", "record"], rows[0]
for row in rows[1:]:
    assert len(row) == 5 and row[4] == f"{int(row[1]) - 2},no-time-{int(row[1]) - 2}", row
print("\n".join(sorted((r[1] for r in rows[1:]), key=int)))
PY
}
import_cmd=("$V7FILL" import kc kc.csv --source-ref 'kc:{n}' --rejects rej.csv --no-progress --no-analyze
            --report-json final.json)

for case in first later; do
    q "TRUNCATE kc; DROP TABLE IF EXISTS kc_source_ref; DELETE FROM v7fill.checkpoint WHERE target_table = 'kc'" >/dev/null
    rm -f rej.csv
    if [ "$case" = first ]; then
        hold_lock
        "${import_cmd[@]}" --batch-rows 1000 >run.out 2>&1 &
        pid=$!
    else
        "${import_cmd[@]}" --batch-rows 200 >run.out 2>&1 &
        pid=$!
        for _ in $(seq 1 200); do
            [ "$(q "SELECT coalesce(max(records), 0) FROM v7fill.checkpoint WHERE target_table = 'kc'")" -gt 0 ] && break
            sleep 0.02
        done
        hold_lock
    fi
    wait_blocked "$pid"
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    release_lock
    cp_records=$(q "SELECT coalesce(max(records), 0) FROM v7fill.checkpoint WHERE target_table = 'kc'")
    on_disk=$(( $(rejects_lines rej.csv | wc -l) ))
    echo "$case batch: killed with $cp_records records committed, $on_disk rejects on disk"
    if [ "$case" = first ]; then
        assert_eq 0 "$cp_records" "first batch: nothing committed"
        [ "$on_disk" -gt 0 ] || fail "first batch: its rejects should have been fsynced before the kill"
    else
        [ "$cp_records" -gt 0 ] || fail "later batch: an earlier batch should have committed"
    fi
    assert_eq "$(awk -F'|' -v k="$cp_records" '$1 < k' expected.sorted | wc -l | tr -d ' ')" \
        "$(q "SELECT count(*) FROM kc")" "$case batch: only committed batches' rows in the table"
    run_expect 0 "${import_cmd[@]}" --batch-rows 1000
    q "SELECT n || '|' || created_at FROM kc" | sort >actual.sorted
    cmp -s expected.sorted actual.sorted || { diff expected.sorted actual.sorted | head -5; fail "$case batch: not exactly the expected rows"; }
    rejects_lines rej.csv >actual_rej.sorted
    if ! cmp -s expected_rej.sorted actual_rej.sorted; then
        echo "duplicated: $(uniq -d actual_rej.sorted | wc -l) lines, e.g. $(uniq -d actual_rej.sorted | head -3 | tr '\n' ' ')"
        fail "$case batch: the rejects file does not hold every reject exactly once"
    fi
    python3 - "$N" <<'PY' || fail "$case batch: final report: $(cat final.json)"
import json, sys
n = int(sys.argv[1])
r = json.load(open("final.json"))
assert r["balanced"] and r["read"] == n and r["rejected"] == n // 50, r
PY
done
echo "ok"
