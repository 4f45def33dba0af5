# v7fill report counts streamed rows (issue 19): the stream records the rows it applied in
# v7fill.run (command stream) with their delays, a segment every --record-every seconds
# while it runs and the rest when it ends (SIGINT, --until-caught-up), so that the report
# counts every streamed row exactly once: rows per window, near-cutoff and late (expired)
# rows, across several stream runs.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db

# Day windows, retention 30d: a row 28.5 days old is near the cutoff (its window retires
# within 3 days), one 40 days old is past it (expired: counted, not inserted), one an
# hour old is on time.
qs "CREATE TABLE events (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    CREATE PUBLICATION pub FOR TABLE events;"
q "CREATE TABLE events_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, note text)
   PARTITION BY RANGE (id)"
run_expect 0 "$V7FILL" partitions events_v7 -g day --from "$(date -u -d '-35 days' +%Y-%m-%d)" \
    --to "$(date -u -d '+3 days' +%Y-%m-%d)"

next_id=1
# add N AGE: N source rows AGE old (a PostgreSQL interval), in one transaction.
add() {
    qs "INSERT INTO events SELECT g, now() - interval '$2', 'r' || g
          FROM generate_series($next_id, $next_id + $1 - 1) g"
    next_id=$((next_id + $1))
}
stream() {
    "$V7FILL" stream events_v7 --source "dbname=$SRC" --from public.events --publication pub \
        --slot "$SLOT" --map id=legacy_id --retention 30d "$@"
}
# counts: "on_time near_cutoff expired written windows-off runs" from the JSON report:
# written = the rows written per window, summed; windows-off = the windows where that is not
# the number of rows the partition holds.
counts() {
    "$V7FILL" report events_v7 --retention 30d --json >rep.json || fail "report --json failed"
    q "SELECT c.relname || ' ' || count(e.*) FROM events_v7 e JOIN pg_class c ON c.oid = e.tableoid
       GROUP BY c.relname" >held.txt
    python3 - <<'PY'
import json
d = json.load(open("rep.json"))
c = d["delay"]["counts"]
held = dict(l.split() for l in open("held.txt").read().split("\n") if l)
written, off = 0, 0
for w in d["windows"]:
    n = w["written_on_time"] + w["written_near_cutoff"] + w["written_expired"]
    written += n
    off += n != int(held.get(w["name"], 0))
print(c["on_time"], c["near_cutoff"], c["expired"], written, off, d["runs"]["count"])
PY
}
# expect ON NEAR LATE WHAT: the report's classes, every inserted row in its window once.
expect() {
    local got
    got=$(counts)
    assert_eq "$1 $2 $3 $(($1 + $2)) 0" "$(echo "$got" | cut -d' ' -f1-5)" "$4 (report: $got)"
}

# ---- run 1: the initial copy and changes, --until-caught-up
add 5 '1 hour'
add 3 '28 days 12 hours'
add 2 '40 days'
run_expect 0 stream --until-caught-up
echo "$OUT"
assert_eq "8" "$(q "SELECT count(*) FROM events_v7")" "the copy inserted the rows within the retention"
# The copy found expired rows: their delays are recorded with the copy's end, in a row of its
# own (status copying, with the copy's rows, committed with the phase switch), then the end.
assert_eq "2 10 8|copying 10 8 2" "$(q "SELECT concat_ws(' ', count(*), sum(rows_read), sum(inserted)) FROM v7fill.run WHERE command = 'stream'")|$(
    q "SELECT concat_ws(' ', status, rows_read, inserted, stats -> 'counts' ->> 'expired') FROM v7fill.run WHERE command = 'stream' AND status = 'copying'")" \
    "the run is recorded: the copy's end and the run's, every row read once"
expect 5 3 2 "after a stream --until-caught-up"

# ---- run 2: a long-lived stream; a periodic segment shows up while it runs
"$V7FILL" stream events_v7 --source "dbname=$SRC" --from public.events --publication pub \
    --slot "$SLOT" --map id=legacy_id --retention 30d --record-every 1 >run2.log 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; drop_slots; rm -rf "$T_TMP"' EXIT
add 4 '2 hours'
add 1 '28 days 6 hours'
add 1 '45 days'
# The segment holding those 6 rows (no deadline asserted: the stream records it within a
# second or so of applying them).
for i in $(seq 1 600); do
    [ "$(q "SELECT coalesce(sum(rows_read), 0) FROM v7fill.run WHERE command = 'stream' AND status = 'streaming'")" = 6 ] && break
    kill -0 $pid 2>/dev/null || { cat run2.log; fail "the stream ended"; }
    sleep 0.1
done
assert_eq 6 "$(q "SELECT coalesce(sum(rows_read), 0) FROM v7fill.run WHERE command = 'stream' AND status = 'streaming'")" \
    "a segment recorded while the stream runs: $(cat run2.log)"
kill -0 $pid || fail "the stream still runs"
expect 9 4 3 "while the stream runs"
add 2 '3 hours'
add 1 '28 days 18 hours'
# SIGINT: the rest is recorded as the stream ends (whether a segment took them first or not).
for i in $(seq 1 600); do
    [ "$(q "SELECT count(*) FROM events_v7")" = 16 ] && break
    sleep 0.1
done
assert_eq 16 "$(q "SELECT count(*) FROM events_v7")" "the stream applied the rows added last"
kill -INT $pid
for i in $(seq 1 600); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
wait $pid || { cat run2.log; fail "the stream did not exit 0 on SIGINT"; }
cat run2.log
assert_eq "19 16" "$(q "SELECT concat_ws(' ', sum(rows_read), sum(inserted)) FROM v7fill.run WHERE command = 'stream'")" \
    "the runs sum to every row read once"
assert_eq 1 "$(q "SELECT count(*) FROM v7fill.run WHERE command = 'stream' AND status LIKE 'stopped by SIGINT%'")" \
    "the end of the stream is recorded"
expect 11 5 3 "after SIGINT"

# ---- run 3: --until-caught-up again, no segment on the way (--record-every 0)
add 3 '30 minutes'
add 2 '50 days'
run_expect 0 stream --until-caught-up --record-every 0
expect 14 5 5 "after a second --until-caught-up: nothing counted twice"
got=$(counts)
runs=$(q "SELECT count(*) FROM v7fill.run WHERE command = 'stream'")
assert_eq "$runs" "${got##* }" "the report merges every stream run"
# the terminal report says the same
run_expect 0 "$V7FILL" report events_v7 --retention 30d
echo "$OUT"
assert_contains "$OUT" "on time 14, near cutoff 5, expired 5" "terminal report: the streamed rows' classes"
# a stream that applies nothing adds nothing (its run row holds no rows)
run_expect 0 stream --until-caught-up
expect 14 5 5 "a rerun with nothing new"

# ---- a running stream folds its own run history (no cron maintain): the periodic rows of an
# hour that ended more than an hour ago (here moved back there) become one row, status folded,
# soon after its first record; the report reads the same figures.
q "UPDATE v7fill.run SET finished_at = date_trunc('hour', now()) - interval '150 minutes' + run_id * interval '1 second'
   WHERE command = 'stream' AND target_table = 'events_v7'"
periodic=$(q "SELECT count(*) FROM v7fill.run WHERE command = 'stream' AND status IN ('copying', 'streaming')")
[ "$periodic" -ge 2 ] || fail "periodic rows to fold: $periodic"
before=$(counts)
"$V7FILL" -v -v stream events_v7 --source "dbname=$SRC" --from public.events --publication pub \
    --slot "$SLOT" --map id=legacy_id --retention 30d --record-every 1 >run4.log 2>&1 &
pid=$!
add 1 '10 minutes'
for i in $(seq 1 600); do
    [ "$(q "SELECT count(*) FROM v7fill.run WHERE status = 'folded'")" = 1 ] && break
    kill -0 $pid 2>/dev/null || { cat run4.log; fail "the stream ended"; }
    sleep 0.1
done
kill -INT $pid
wait $pid || { cat run4.log; fail "the stream did not exit 0 on SIGINT"; }
assert_eq "1 0" "$(q "SELECT count(*) FILTER (WHERE status = 'folded') || ' ' || count(*) FILTER (WHERE status IN ('copying', 'streaming') AND finished_at < now() - interval '1 hour') FROM v7fill.run WHERE command = 'stream'")" \
    "the stream folded its $periodic periodic rows of that hour into one: $(grep -i 'fold' run4.log)"
assert_contains "$(cat run4.log)" "folded $periodic periodic run rows into 1" "it says so at -v -v"
expect 15 5 5 "after the stream folded its history (one more row on time)"

# ---- several --from on one slot: a run row per target, each report counts its own rows
qs "CREATE TABLE a (id bigint PRIMARY KEY, created_at timestamptz NOT NULL);
    CREATE TABLE b (id bigint PRIMARY KEY, created_at timestamptz NOT NULL);
    CREATE PUBLICATION pub2 FOR TABLE a, b;
    INSERT INTO a SELECT g, now() - interval '1 hour' FROM generate_series(1, 3) g;
    INSERT INTO a VALUES (4, now() - interval '28 days 12 hours');
    INSERT INTO b SELECT g, now() - interval '2 hours' FROM generate_series(1, 2) g;
    INSERT INTO b VALUES (3, now() - interval '40 days');"
for t in a_v7 b_v7; do
    q "CREATE TABLE $t (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                        created_at timestamptz NOT NULL) PARTITION BY RANGE (id)"
    run_expect 0 "$V7FILL" partitions $t -g day --from "$(date -u -d '-35 days' +%Y-%m-%d)" \
        --to "$(date -u -d '+3 days' +%Y-%m-%d)"
done
run_expect 0 "$V7FILL" stream --source "dbname=$SRC" --from public.a=a_v7 --from public.b=b_v7 \
    --publication pub2 --slot "${SLOT}_m" --map id=legacy_id --retention 30d --until-caught-up
# (b's copy found an expired row: its end is recorded in a row of its own, status copying)
assert_eq "a_v7 4 4 done|b_v7 3 2 copying,done" "$(q "SELECT string_agg(concat_ws(' ', target_table, r, i, s), '|' ORDER BY target_table)
                                   FROM (SELECT target_table, sum(rows_read) r, sum(inserted) i, string_agg(status, ',' ORDER BY run_id) s
                                           FROM v7fill.run WHERE command = 'stream' AND target_table IN ('a_v7', 'b_v7')
                                          GROUP BY target_table) x")" \
    "the run rows of each target"
"$V7FILL" report a_v7 --retention 30d --json >a.json || fail "report a_v7"
"$V7FILL" report b_v7 --retention 30d --json >b.json || fail "report b_v7"
assert_eq "3 1 0|2 0 1" "$(python3 -c '
import json
r = []
for f in ("a.json", "b.json"):
    c = json.load(open(f))["delay"]["counts"]
    r.append("%d %d %d" % (c["on_time"], c["near_cutoff"], c["expired"]))
print("|".join(r))')" "each target's report counts its streamed rows"

# ---- an error exit after rows were applied: recorded with the error as its status
qs "INSERT INTO a SELECT g, now() - interval '1 hour' FROM generate_series(5, 6) g;
    INSERT INTO a VALUES (7, now() - interval '28 days 12 hours')"
qs "TRUNCATE a"
# (--group-rows 1: the rows before the TRUNCATE are committed before it stops the stream)
run_expect 3 "$V7FILL" stream --source "dbname=$SRC" --from public.a=a_v7 --from public.b=b_v7 \
    --publication pub2 --slot "${SLOT}_m" --map id=legacy_id --retention 30d --until-caught-up \
    --group-rows 1
echo "$OUT"
assert_eq 7 "$(q "SELECT count(*) FROM a_v7")" "the rows before the TRUNCATE are applied"
assert_contains "$OUT" "--on-truncate" "the stream stops at the TRUNCATE"
assert_eq "7 1" "$(q "SELECT concat_ws(' ', sum(rows_read), count(*) FILTER (WHERE status LIKE '%TRUNCATE%'))
                     FROM v7fill.run WHERE command = 'stream' AND target_table = 'a_v7'")" \
    "the failed run's rows are recorded, with its error"
"$V7FILL" report a_v7 --retention 30d --json >a.json || fail "report a_v7"
assert_eq "5 2 0" "$(python3 -c '
import json
c = json.load(open("a.json"))["delay"]["counts"]
print(c["on_time"], c["near_cutoff"], c["expired"])')" "the report counts the rows applied before the error"
