#!/usr/bin/env bash
# Fault injection: the target cluster is restarted with `pg_ctl restart -m immediate`
# (every backend killed, crash recovery on start) three times while an import runs.
# v7fill reconnects with backoff (or exits resumably); after at most one rerun the target
# holds exactly the expected rows, compared by source reference and content, the
# rejects file holds every expected reject exactly once, and the counts balance.
#
# The throwaway cluster runs with synchronous_commit = off (tests/pgtmp.sh), under which
# an immediate shutdown may discard transactions the server already acknowledged.  That
# is a server-side loss no client can see, so this test turns synchronous_commit on for
# its own database: what is under test is v7fill's reconnect and resume.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

restart_immediate() {
    pg_ctl_ -m immediate -w -t 60 restart
    wait_ready
}

q "ALTER DATABASE \"$PGDATABASE\" SET synchronous_commit = on" >/dev/null
sqlf <<'SQL'
CREATE TABLE f (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL,
                note text) PARTITION BY RANGE (id);
SQL

# 150,000 rows over 48 months; every 1000th row + 17 has an unparsable time (client
# reject), every 1000th + 503 a non-integer n (server reject, found by splitting).
N=150000
python3 - "$N" <<'PY'
import sys
n = int(sys.argv[1])
exp = open("expected.txt", "w")
rej = open("expected_rejects.txt", "w")
with open("f.csv", "w") as f:
    f.write("n,created_at,note\n")
    for i in range(n):
        t = f"20{22 + i % 4}-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}+00"
        note = f"note {i}, \"quoted\""
        line = i + 2
        if i % 1000 == 17:
            f.write(f"{i},not a time,\"{note.replace(chr(34), chr(34) * 2)}\"\n")
            rej.write(f"{line}\n")
            continue
        if i % 1000 == 503:
            f.write(f"x{i},{t},\"{note.replace(chr(34), chr(34) * 2)}\"\n")
            rej.write(f"{line}\n")
            continue
        f.write(f"{i},{t},\"{note.replace(chr(34), chr(34) * 2)}\"\n")
        # source reference (template f:{n}) | n | created_at (UTC, PostgreSQL text) | note
        exp.write(f"f:{i}|{i}|{t[:19]}+00|{note}\n")
PY
sort expected.txt >expected.sorted
sort -n expected_rejects.txt >expected_rejects.sorted
expected_rows=$(wc -l <expected.sorted | tr -d ' ')
expected_rej=$(wc -l <expected_rejects.sorted | tr -d ' ')

import_cmd=("$V7FILL" import f f.csv --batch-rows 1000 --source-ref 'f:{n}' --keep-ref-text
            --rejects rej.csv --no-progress --no-analyze --report-json final.json)

started=$(date +%s)
"${import_cmd[@]}" >run1.out 2>&1 &
pid=$!
restarts=0
for r in 1 2 3; do
    # wait until at least one more batch has committed since the last restart
    before=$(q "SELECT coalesce(sum(records), 0) FROM v7fill.checkpoint" 2>/dev/null || echo 0)
    for _ in $(seq 1 200); do
        kill -0 "$pid" 2>/dev/null || break
        now=$(q "SELECT coalesce(sum(records), 0) FROM v7fill.checkpoint" 2>/dev/null || echo 0)
        [ "$now" -gt "$before" ] && break
        sleep 0.05
    done
    kill -0 "$pid" 2>/dev/null || break
    sleep "0.$((RANDOM % 9))"
    restart_immediate
    restarts=$((restarts + 1))
    echo "restart $r done at $(( $(date +%s) - started ))s"
done
set +e
wait "$pid"
st=$?
set -e
cat run1.out
echo "first run: exit status $st after $restarts restarts, $(( $(date +%s) - started ))s"
[ "$restarts" -ge 2 ] || fail "the import finished before the cluster could be restarted twice"
assert_contains "$(cat run1.out)" "reconnect" "v7fill says it reconnects"
if [ "$st" != 0 ]; then
    # exits resumably: status 5 (database) with the error named, never a crash
    [ "$st" = 5 ] || fail "first run: unexpected exit status $st"
    run_expect 0 "${import_cmd[@]}"
    echo "$OUT"
fi

# the exact expected set, by source reference and content
q "SELECT l.ref || '|' || f.n || '|' || f.created_at || '|' || f.note
     FROM f JOIN f_source_ref l ON l.id = f.id" | sort >actual.sorted
if ! cmp -s expected.sorted actual.sorted; then
    diff expected.sorted actual.sorted | head -20
    fail "the target does not hold exactly the expected rows"
fi
assert_eq "$expected_rows" "$(q "SELECT count(*) FROM f")" "row count"
assert_eq "$expected_rows" "$(q "SELECT count(*) FROM f_source_ref")" "one lookup row per row"
# rejects: every expected line exactly once
tail -n +2 rej.csv | python3 -c '
import csv, sys
for row in csv.reader(sys.stdin):
    print(row[1])' | sort -n >actual_rejects.sorted
if ! cmp -s expected_rejects.sorted actual_rejects.sorted; then
    diff expected_rejects.sorted actual_rejects.sorted | head -20
    fail "rejects file is not exactly the expected rejects"
fi
assert_eq $((N / 1000)) "$(grep -c ',22P02,' rej.csv)" "server rejects carry SQLSTATE 22P02"
python3 - "$N" "$expected_rows" "$expected_rej" <<'PY' || fail "final report does not balance: $(cat final.json)"
import json, sys
n, rows, rej = map(int, sys.argv[1:])
r = json.load(open("final.json"))
assert r["balanced"], r
assert r["read"] == n, r
assert r["inserted"] + r["duplicates"] == rows, r
assert r["rejected"] == rej, r
PY
assert_eq t "$(q "SELECT bool_and(finished) FROM v7fill.checkpoint")" "checkpoint finished"
echo "ok: $restarts restarts, $expected_rows rows, $expected_rej rejects"
