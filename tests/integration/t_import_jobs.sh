# --jobs N: parallel writers give the table one writer gives (every column, the
# ids too), the same counts and the same rejects file; a reference repeated in
# a later batch counts once and the earlier row is the one kept; a rerun
# inserts nothing; --jobs beyond what the server allows is refused; and kill -9
# of --jobs 2 and --jobs 4 imports at 20 random moments, then a rerun, leaves
# no row twice and none missing.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE j (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL,
                note text) PARTITION BY RANGE (id);
SQL
# ROWS rows over 72 months (every batch needs windows: the lanes create them
# concurrently); every 700th row repeats the reference of a row 250 earlier
# (the batch before, often still in flight), with another note and time;
# client- and server-side rejects.
gen() { # file rows
    python3 - "$1" "$2" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("n,created_at,note\n")
    for i in range(int(sys.argv[2])):
        t = f"20{20 + i % 6}-{1 + i * 7 % 12:02d}-{1 + i % 28:02d} 10:{i % 60:02d}:00+00"
        n, note = str(i), f"note {i}"
        if i % 700 == 699:
            n, note = str(i - 250), f"repeat of {i - 250}"
            t = f"2021-06-{1 + i % 28:02d} 11:00:00+00"
        if i % 1000 == 17:
            t = "not a time"                     # client-side reject
        if i % 1000 == 503:
            n = f"x{i}"                          # server-side reject
        f.write(f"{n},{t},\"{note}\"\n")
PY
}
gen j.csv 20000
repeats=$((20000 / 700))
read_rows=20000
rejected=40
inserted=$((read_rows - rejected - repeats))
table_hash() {
    q "SELECT count(*) || ' ' || md5(string_agg(format('%s|%s|%s|%s', id, created_at, n, note), ','
                                       ORDER BY id)) FROM j"
}
# Back to an empty table with the same id key: rows, partitions, lookup, checkpoints.
reset_table() {
    sqlf <<'SQL'
SELECT format('DROP TABLE %s', inhrelid::regclass) FROM pg_inherits
 WHERE inhparent = 'j'::regclass \gexec
TRUNCATE j_source_ref;
DELETE FROM v7fill.checkpoint;
SQL
}
report() {
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))
print(r["read"], r["inserted"], r["duplicates"], r["rejected"], r["balanced"])' "$1"
}
import_jobs() { # jobs, then more options
    local jobs=$1; shift
    "$V7FILL" import j "${CSV:-j.csv}" --jobs "$jobs" --batch-rows 200 --source-ref 'j:{n}' \
        --rejects rej.csv --no-progress --no-analyze "$@"
}

t0=$(date +%s%N)
run_expect 0 import_jobs 1 --report-json r1.json
one_ms=$(( ($(date +%s%N) - t0) / 1000000 ))  # scales the kills below to this machine and build
one=$(table_hash)
assert_eq "$inserted $((inserted))" "$(q "SELECT count(*), count(DISTINCT n) FROM j" | tr '|' ' ')" \
    "--jobs 1: one row per reference"
assert_eq 0 "$(q "SELECT count(*) FROM j WHERE note LIKE 'repeat of %'")" \
    "--jobs 1: the earlier row of a reference is kept"
assert_eq "$read_rows $inserted $repeats $rejected True" "$(report r1.json)" "--jobs 1 counts"
cp rej.csv rej1.csv
assert_eq "$rejected" "$(tail -n +2 rej1.csv | wc -l | tr -d ' ')" "--jobs 1 rejects file"

for jobs in 2 4; do
    reset_table
    rm -f rej.csv
    run_expect 0 import_jobs "$jobs" --report-json "r$jobs.json"
    # a batch sharing a reference with one in flight waits for it: nothing is
    # written twice (no batch rolled back and written again)
    assert_not_contains "$OUT" "WARNING" "--jobs $jobs: no warning"
    assert_eq "$one" "$(table_hash)" "--jobs $jobs: the same rows, ids and values as --jobs 1"
    assert_eq "$read_rows $inserted $repeats $rejected True" "$(report "r$jobs.json")" \
        "--jobs $jobs: read = inserted + duplicates + rejected, repeats counted once"
    cmp -s rej1.csv rej.csv || fail "--jobs $jobs: the rejects file differs from --jobs 1's"
    assert_eq "$read_rows|$((inserted + repeats))|$rejected|t" \
        "$(q "SELECT rows_read, inserted + duplicates, rejected, finished FROM v7fill.checkpoint")" \
        "--jobs $jobs: the checkpoint covers the whole file"
done

# A rerun with --jobs 4 inserts nothing.
run_expect 0 import_jobs 4 --report-json rerun.json
assert_eq "$read_rows 0 $((read_rows - rejected)) $rejected True" "$(report rerun.json)" \
    "rerun with --jobs 4: nothing inserted"
assert_eq "$one" "$(table_hash)" "rerun with --jobs 4: the table unchanged"

# --jobs 0, and more writers than the server takes (max_connections = 100).
run_expect 2 "$V7FILL" import j j.csv --jobs 0
assert_contains "$OUT" "--jobs" "--jobs 0 is a usage error naming the option"
run_expect 3 "$V7FILL" import j j.csv --jobs 500 --no-progress
assert_contains "$OUT" "max_connections" "--jobs 500: the error names max_connections"
assert_eq "$one" "$(table_hash)" "a refused --jobs writes nothing"

# kill -9 at 20 random moments (0.05 s to an eighth of the time --jobs 1 took for
# 20000 rows into a run, 0.02 s once half the input is in: from before its first
# commit to several batches in) of
# --jobs 2 and --jobs 4 imports, then a rerun.
# The partitions stay (emptied): creating 72 of them would outlast the kills.
sqlf -c "TRUNCATE j, j_source_ref" -c "DELETE FROM v7fill.checkpoint"
rm -f rej.csv
gen k.csv 100000
export CSV=k.csv
read_rows=100000
repeats=$((100000 / 700))
rejected=200
inserted=$((read_rows - rejected - repeats))
kills=0
for attempt in $(seq 1 20); do
    jobs=$((attempt % 2 ? 2 : 4))
    # the binary itself in the background (a function would be a subshell the
    # kill leaves the import running under)
    "$V7FILL" import j k.csv --jobs "$jobs" --batch-rows 200 --source-ref 'j:{n}' \
        --rejects rej.csv --no-progress --no-analyze >run.out 2>&1 &
    pid=$!
    # The runs resume each other, so the later ones have less left to do: late in the
    # input, kill at the earliest moment, or a run ends before its kill on a slow
    # (loaded) machine, whose --jobs 1 timing made the window wide.
    ms=$((50 + RANDOM % (one_ms / 8 + 1)))
    done_now=$(q "SELECT coalesce(max(rows_read), 0) FROM v7fill.checkpoint")
    if [ "$done_now" -ge $((read_rows / 2)) ]; then
        ms=20
    elif [ "$done_now" = 0 ] && [ "$attempt" -gt 10 ]; then
        # Half the kills done and none after a commit: a slow build (TSan) was still starting
        # --jobs 2 or 4 when each window ended; the rest wait a quarter of the timing more.
        ms=$((ms + one_ms / 4))
    fi
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    if kill -9 "$pid" 2>/dev/null; then
        kills=$((kills + 1))
        wait "$pid" 2>/dev/null || true
    else
        wait "$pid" || { cat run.out; fail "--jobs $jobs import failed by itself"; }
        break
    fi
done
echo "killed $kills times"
[ "$kills" = 20 ] || fail "only $kills kills landed before the import finished"
done_rows=$(q "SELECT coalesce(max(rows_read), 0) FROM v7fill.checkpoint")
echo "the killed runs committed $done_rows of $read_rows rows"
[ "$done_rows" -gt 0 ] || fail "no kill landed after a commit"
run_expect 0 import_jobs 4
assert_eq "$inserted $inserted 0" \
    "$(q "SELECT count(*), count(DISTINCT n), count(*) FILTER (WHERE note LIKE 'repeat of %')
          FROM j" | tr '|' ' ')" \
    "after kills and a rerun: no row twice, none missing, the earlier row of each reference"
assert_eq "$read_rows|$((inserted + repeats))|$rejected|t" \
    "$(q "SELECT rows_read, inserted + duplicates, rejected, finished FROM v7fill.checkpoint")" \
    "after kills: the checkpoint balances across the runs"
assert_eq "$rejected $rejected" \
    "$(tail -n +2 rej.csv | wc -l | tr -d ' ') $(tail -n +2 rej.csv | sort -u | wc -l | tr -d ' ')" \
    "after kills: every reject once in the rejects file"
echo "ok"
