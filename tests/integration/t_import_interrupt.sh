# Ctrl-C (SIGINT) or SIGTERM during an import: v7fill stops at the next
# record, commits what it has read, says so and how to go on, exits 130; the
# rerun finishes with every row once.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
# signal_and_wait SIG PID: send it, wait for the process; $st its exit status,
# $took the seconds it took to end.
signal_and_wait() {
    local t0
    t0=$(date +%s)
    kill -"$1" "$2"
    set +e
    wait "$2"
    st=$?
    set -e
    took=$(( $(date +%s) - t0 ))
}
sqlf -c "CREATE TABLE it (id uuid NOT NULL, created_at timestamptz NOT NULL, v text,
                          PRIMARY KEY (id)) PARTITION BY RANGE (id)"
python3 - <<'PY'
with open("it.csv", "w") as f:
    f.write("created_at,v\n")
    for i in range(400000):
        f.write(f"2025-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:{i % 59:02d},row{i}\n")
PY
for sig in INT TERM; do
    q "TRUNCATE it" >/dev/null
    q "DROP TABLE IF EXISTS it_source_ref" >/dev/null
    q "DELETE FROM v7fill.checkpoint WHERE target_table = 'it'" >/dev/null 2>&1 || true
    out=$(python3 - "$V7FILL" "$sig" <<'PY'
import os, signal, subprocess, sys, time
v7, sig = sys.argv[1], sys.argv[2]
env = dict(os.environ)
p = subprocess.Popen([v7, "import", "it", "it.csv", "--batch-rows", "2000", "--no-progress",
                      "--rejects", "it.rejects", "--report-json", "it.json"],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
# after the first commit, while plenty is left to read
def committed():
    r = subprocess.run(["psql", "-X", "-At", "-c",
                        "SELECT coalesce(max(records), 0) FROM v7fill.checkpoint "
                        "WHERE target_table = 'it'"], capture_output=True, text=True)
    return int(r.stdout.strip() or 0) if r.returncode == 0 else 0
deadline = time.time() + 60
while committed() == 0 and p.poll() is None and time.time() < deadline:
    time.sleep(0.02)
p.send_signal(signal.SIGINT if sig == "INT" else signal.SIGTERM)
out, _ = p.communicate()
print(f"rc={p.returncode}")
print(out)
PY
)
    assert_contains "$out" "rc=130" "SIG$sig: exit status 130"
    assert_contains "$out" "interrupted by SIG$sig" "SIG$sig: says what stopped it"
    assert_contains "$out" "Run the same command again" "SIG$sig: says how to go on"
    read_=$(python3 -c 'import json;print(json.load(open("it.json"))["read"])')
    ins=$(python3 -c 'import json;print(json.load(open("it.json"))["inserted"])')
    [ "$read_" -lt 400000 ] || fail "SIG$sig: the import stopped before the end ($read_ read)"
    assert_eq "$ins" "$(q "SELECT count(*) FROM it")" "SIG$sig: every row it read is committed"
    assert_eq "$read_" "$(q "SELECT max(rows_read) FROM v7fill.checkpoint WHERE target_table = 'it'")" \
        "SIG$sig: the checkpoint is where it stopped reading"
    run_expect 0 "$V7FILL" import it it.csv --batch-rows 2000 --no-progress --rejects it.rejects
    assert_contains "$OUT" "resuming after line $((read_ + 1))" "SIG$sig: the rerun goes on from there"
    assert_eq "400000|400000" "$(q "SELECT count(*), count(DISTINCT v) FROM it")" \
        "SIG$sig: every row once"
done

# SIGTERM while v7fill waits for a server that went away: it stops waiting at
# once (not after the whole backoff), keeps what was committed, and the rerun
# (server back) finishes with every row once.
trap '"$PGBIN/pg_isready" -q -h "$PGHOST" -p "$PGPORT" || pg_ctl_ -w -t 60 start; rm -rf "$T_TMP"' EXIT
q "TRUNCATE it" >/dev/null
q "DROP TABLE IF EXISTS it_source_ref" >/dev/null
q "DELETE FROM v7fill.checkpoint WHERE target_table = 'it'" >/dev/null
"$V7FILL" import it it.csv --batch-rows 2000 --no-progress --rejects it.rejects >down.out 2>&1 &
pid=$!
# a batch must have committed before the outage (slow sanitizer builds take a while)
for _ in $(seq 1 1200); do
    [ "$(q "SELECT coalesce(max(records), 0) FROM v7fill.checkpoint WHERE target_table = 'it'")" -gt 0 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
[ "$(q "SELECT coalesce(max(records), 0) FROM v7fill.checkpoint WHERE target_table = 'it'")" -gt 0 ] ||
    fail "no batch committed before the outage: $(cat down.out)"
pg_ctl_ -m immediate -w -t 60 stop
for _ in $(seq 1 200); do
    grep -q "reconnecting in" down.out && break
    sleep 0.05
done
grep -q "reconnecting in" down.out || fail "no reconnect attempt: $(cat down.out)"
signal_and_wait TERM "$pid"
pg_ctl_ -w -t 60 start
wait_ready
cat down.out
assert_eq 130 "$st" "SIGTERM while reconnecting: exit status 130"
assert_contains "$(cat down.out)" "interrupted by SIGTERM while reconnecting" "says where it was"
[ "$took" -le 3 ] || fail "took ${took}s to stop after the signal"
run_expect 0 "$V7FILL" import it it.csv --batch-rows 2000 --no-progress --rejects it.rejects
assert_contains "$OUT" "resuming after line" "the rerun resumes"
assert_eq "400000|400000" "$(q "SELECT count(*), count(DISTINCT v) FROM it")" "every row once"

# Ctrl-C while the closing ANALYZE waits (here for a lock another session
# holds; on a large table it is minutes of work): the ANALYZE is cancelled at
# once, v7fill says so, and every row is imported.  Before, it waited for the
# ANALYZE to finish, however long that took.
sqlf -c "CREATE TABLE ia (id uuid NOT NULL, created_at timestamptz NOT NULL, v text,
                          PRIMARY KEY (id)) PARTITION BY RANGE (id)"
head -20001 it.csv >ia.csv
run_expect 0 "$V7FILL" partitions ia --from 2025-01-01 --to 2026-01-01 --granularity month
psql -X -q -c "BEGIN; LOCK TABLE ia IN SHARE UPDATE EXCLUSIVE MODE; SELECT pg_sleep(120)" \
    >/dev/null 2>&1 &
blocker=$!
"$V7FILL" import ia ia.csv --no-progress --rejects ia.rejects >ia.out 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
    [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'ANALYZE%ia%' AND wait_event_type = 'Lock'")" = 1 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'ANALYZE%ia%' AND wait_event_type = 'Lock'")" = 1 ] ||
    fail "the closing ANALYZE never waited for the lock: $(cat ia.out)"
signal_and_wait INT "$pid"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(120)%' AND pid <> pg_backend_pid()" >/dev/null
wait "$blocker" 2>/dev/null || true
cat ia.out
[ "$took" -le 3 ] || fail "took ${took}s to stop after Ctrl-C during the closing ANALYZE"
assert_eq 0 "$st" "Ctrl-C during the closing ANALYZE: every row was in, exit status 0"
assert_contains "$(cat ia.out)" "closing ANALYZE cancelled" "says the ANALYZE was cancelled"
assert_contains "$(cat ia.out)" "every row is imported" "says nothing is missing"
assert_eq "20000" "$(q "SELECT count(*) FROM ia")" "every row imported"
assert_eq 0 "$(q "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'ANALYZE%ia%'")" \
    "no ANALYZE left running on the server"
