# A connection lost exactly at a COMMIT (issue 19): v7fill reaches the target through
# commit_proxy.py, which cuts one batch's connection either after the server committed it,
# before its answer reaches v7fill ("ack": the batch had committed), or before the COMMIT
# reaches the server ("send": it had not, and is written again).  Either way every row is in
# the target once and its delay is counted once: the import's --report-json and `v7fill report`
# (what the run stored in v7fill.run); for a stream, /metrics' insert delay histogram and its
# summary.  Import with one writer and with --jobs 2; stream with small
# transactions and with a large one applied in pieces.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db
proxy=
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; [ -n "$proxy" ] && kill "$proxy" 2>/dev/null; drop_slots; rm -rf "$T_TMP"' EXIT
jfield() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }


# report_delays TABLE ROWS WHAT [NEAR]: `v7fill report` counts ROWS delays and per-window
# rows (NEAR of them written near their window's cutoff).
report_delays() {
    "$V7FILL" report "$1" --retention 400d --json >"rep_$1.json" 2>rep.err || fail "report $1: $(cat rep.err)"
    assert_eq "$2" "$(jfield "rep_$1.json" 'd["delay"]["rows"]')" "$3: rows in the report's delay statistics"
    assert_eq "$2" "$(jfield "rep_$1.json" 'sum(w["written_on_time"] + w["written_near_cutoff"] + w["written_expired"] for w in d["windows"])')" \
        "$3: rows written per window in the report"
    [ "$#" -lt 4 ] || assert_eq "$4" "$(jfield "rep_$1.json" 'sum(w["written_near_cutoff"] for w in d["windows"])')" \
        "$3: rows written near their window's cutoff in the report"
}

# Times relative to now: every twelfth row 395 days old, so that under --retention 400d its
# window retires within the near-cutoff margin (40 days) and is not expired; the others up
# to 330 days old.
python3 - <<'PY'
import datetime
now = datetime.datetime.now(datetime.timezone.utc)
with open("r.csv", "w") as f:
    f.write("n,created_at\n")
    for i in range(3000):
        age = datetime.timedelta(days=395) if i % 12 == 0 else datetime.timedelta(days=30 * (i % 12))
        t = now - age - datetime.timedelta(seconds=60 + i % 3600, milliseconds=i % 1000)
        f.write(f"{i},{t.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z\n")
PY

# import_case TABLE MODE JOBS: import r.csv (six batches of 500) through a proxy that cuts the
# third batch's COMMIT (MODE), then check the rows, the log and the delays.
import_case() {
    local t=$1 mode=$2 jobs=$3
    q "CREATE TABLE $t (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
       PARTITION BY RANGE (id)"
    proxy_start "p_$t" "$mode" 3
    TARGET="$PROXY dbname=$PGDATABASE"
    run_expect 0 "$V7FILL" -d "$TARGET" import "$t" r.csv --batch-rows 500 --jobs "$jobs" \
        --source-ref "$t:{n}" --retention 400d --rejects "rej_$t.csv" --no-progress --report-json "$t.json"
    proxy_stop
    echo "$OUT" | grep -E "reconnect|committed|lost" || true
    [ -s "p_$t/fired" ] || fail "$t: the proxy never cut a COMMIT: $(cat "p_$t/proxy.log")"
    assert_contains "$OUT" "reconnect" "$t: the tool reconnects"
    if [ "$mode" = ack ]; then
        assert_contains "$OUT" "had committed" "$t: the log says the batch had committed"
    else
        assert_not_contains "$OUT" "had committed" "$t: a COMMIT that never reached the server"
    fi
    assert_eq "3000 3000" "$(q "SELECT count(*) || ' ' || count(DISTINCT n) FROM $t")" "$t: every row once"
    python3 - "$t.json" <<'PY' || fail "$t: the import's report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["balanced"] and r["read"] == 3000 and r["inserted"] == 3000, r
assert sum(w["rows"] for w in r["windows"]) == 3000, [(w["partition"], w["rows"]) for w in r["windows"]]
assert r["delay"]["rows"] == 3000, r["delay"]
# January's window retires within the near-cutoff margin of 400d: its 250 rows.
assert r["near_cutoff"] == 250 and r["delay"]["counts"]["near_cutoff"] == 250, (r["near_cutoff"], r["delay"]["counts"])
assert sum(w["near_cutoff"] for w in r["windows"]) == 250, r["windows"]
PY
    report_delays "$t" 3000 "$t" 250
}

import_case imp_ack ack 1
import_case imp_ack_jobs ack 2
import_case imp_send send 1

# Standard input: the first batch's COMMIT never reaches the server.  No checkpoint was written
# before it (standard input writes none), so the reconnect finds none: the batch is written
# again, not taken for commits the server lost (exit 5 before, 0 rows).
q "CREATE TABLE imp_stdin (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
   PARTITION BY RANGE (id)"
proxy_start p_stdin send 1
run_expect 0 "$V7FILL" -d "$PROXY dbname=$PGDATABASE" import imp_stdin - --batch-rows 500 \
    --source-ref 'imp_stdin:{n}' --retention 400d --no-progress <r.csv
proxy_stop
[ -s p_stdin/fired ] || fail "stdin: the proxy never cut a COMMIT: $(cat p_stdin/proxy.log)"
assert_not_contains "$OUT" "lost transactions" "stdin: a COMMIT that never reached the server is not a lost commit"
assert_eq "3000 3000" "$(q "SELECT count(*) || ' ' || count(DISTINCT n) FROM imp_stdin")" "stdin: every row once"

# A file of exactly six batches ends in a seventh, empty one: it only marks the checkpoint
# finished.  Its COMMIT never reaches the server (the proxy cuts the eighth transaction that
# writes the checkpoint, the first being the starting one): at the same position as the
# sixth, the checkpoint is not finished, so the batch is written again; --skip-finished then
# skips the file (before, the lost COMMIT was taken as landed and the file stayed "not
# finished").
q "CREATE TABLE imp_last (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
   PARTITION BY RANGE (id)"
proxy_start p_last send 8 "INSERT INTO v7fill.checkpoint"
run_expect 0 "$V7FILL" -d "$PROXY dbname=$PGDATABASE" import imp_last r.csv --batch-rows 500 \
    --source-ref 'imp_last:{n}' --retention 400d --no-progress
proxy_stop
grep -q "number 8" p_last/proxy.log && [ -s p_last/fired ] || fail "last: the proxy never cut the eighth checkpoint COMMIT: $(cat p_last/proxy.log)"
assert_eq "3000 3000" "$(q "SELECT count(*) || ' ' || count(DISTINCT n) FROM imp_last")" "last: every row once"
assert_eq "true 3000" "$(q "SELECT finished || ' ' || inserted FROM v7fill.checkpoint WHERE target_table = 'imp_last'")" \
    "last: the checkpoint is finished, with the file's rows"
run_expect 0 "$V7FILL" import imp_last r.csv --batch-rows 500 --source-ref 'imp_last:{n}' \
    --retention 400d --no-progress --skip-finished
assert_contains "$OUT" "skipped" "last: --skip-finished skips the file"

# ---- stream: the slot made (nothing to copy), then changes in small source transactions
qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id)"
sargs=(orders_v7 --source "dbname=$SRC" --from public.orders --publication pub --slot "$SLOT"
       --map id=legacy_id --retention 400d --batch-rows 500 --group-rows 500)
run_expect 0 "$V7FILL" stream "${sargs[@]}" --until-caught-up
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
metric() { awk -v k="$1" '$1 == k { print $2 }' scrape.txt; }
T='table="orders_v7"'

# stream_case NAME MODE N ROWS QUARANTINED SQL: SQL (one transaction a line) inserts ROWS
# rows on the source, and QUARANTINED more dated years ahead (the quarantine takes them); the
# stream (through a proxy cutting the Nth batch COMMIT, MODE) applies them; its metrics and
# its summary count each row once.
# With MARK, the proxy cuts the Nth COMMIT of a run row instead (--record-every 1): the stream's
# run rows count each row once too.
stream_case() {
    local name=$1 mode=$2 n=$3 rows=$4 quar=$5 sql=$6 mark=${7:-} total port st=0 deadline last
    local extra=()
    psql -X -q -v ON_ERROR_STOP=1 -d "$SRC" <<<"$sql" >/dev/null
    total=$(qs "SELECT count(*) FROM orders WHERE created_at < now()")
    last=$(q "SELECT coalesce(max(run_id), 0) FROM v7fill.run")
    if [ -n "$mark" ]; then
        proxy_start "p_$name" "$mode" "$n" "$mark"
        extra=(--record-every 1)
    else
        proxy_start "p_$name" "$mode" "$n"
    fi
    TARGET="$PROXY dbname=$PGDATABASE"
    port=$(free_port)
    "$V7FILL" -d "$TARGET" stream "${sargs[@]}" "${extra[@]}" --metrics-listen "127.0.0.1:$port" >"$name.out" 2>&1 &
    spid=$!
    for _ in $(seq 1 300); do
        [ "$(q "SELECT count(*) FROM orders_v7")" = "$total" ] && break
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.2
    done
    # the counters move right after each target commit: scraped until every insert and its
    # delay are counted (30 s at most; the assertions below check the last scrape)
    deadline=$((SECONDS + 30))
    while :; do
        curl -sf "http://127.0.0.1:$port/metrics" -o scrape.txt || { cat "$name.out"; fail "$name: scrape failed"; }
        [ "$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")" = "$rows" ] \
            && [ "$(metric "v7fill_stream_insert_delay_seconds_count{$T}")" = "$rows" ] && break
        [ "$SECONDS" -lt "$deadline" ] || break
        sleep 0.2
    done
    for _ in $(seq 1 100); do [ -e "p_$name/fired" ] && break; sleep 0.1; done
    kill -TERM "$spid"
    wait "$spid" || st=$?
    spid=
    proxy_stop
    grep -E "reconnect|committed|lost|^stream:" "$name.out" || true
    assert_eq 0 "$st" "$name: the stream stops cleanly"
    [ -s "p_$name/fired" ] || fail "$name: the proxy never cut a COMMIT: $(cat "p_$name/proxy.log")"
    if [ "$mode" = ack ] && [ -z "$mark" ]; then
        assert_contains "$(cat "$name.out")" "had committed" "$name: the log says the batch had committed"
    fi
    assert_eq "$rows" "$(q "SELECT sum(inserted) FROM v7fill.run WHERE command = 'stream' AND run_id > $last")" \
        "$name: the stream's run rows count each row once"
    assert_eq "$total $total" "$(q "SELECT count(*) || ' ' || count(DISTINCT legacy_id) FROM orders_v7")" "$name: every row once"
    assert_eq "$rows" "$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")" "$name: inserts applied"
    assert_eq "$rows" "$(metric "v7fill_stream_insert_delay_seconds_count{$T}")" "$name: each inserted row's delay observed once"
    assert_contains "$(cat "$name.out")" "inserted=$rows " "$name: the summary counts each row once"
    assert_contains "$(cat "$name.out")" "quarantined=$quar " "$name: the summary counts each quarantined row once"
}
# txns FIRST LAST: one source transaction a line of 500 rows each, keys from FIRST*500+1, the
# last row of each dated ten years ahead.
txns() {
    local i
    for i in $(seq "$1" "$2"); do
        echo "INSERT INTO orders SELECT g, CASE WHEN g % 500 = 0 THEN now() + interval '10 years'
              ELSE now() - (g || ' minutes')::interval END, g FROM generate_series($((i * 500 + 1)), $((i * 500 + 500))) g;" | tr -d '\n'
        echo
    done
}

# Six source transactions: the answer to the second batch's COMMIT is lost.
stream_case s_ack ack 2 2994 6 "$(txns 0 5)"
# The second batch's COMMIT never reaches the server: written again, counted once.
stream_case s_send send 2 2994 6 "$(txns 6 11)"
# One source transaction of 1,800 rows, applied in four pieces in one target transaction
# (batches of 500): the answer to its COMMIT is lost.
stream_case s_ack_pieces ack 1 1800 0 \
    "INSERT INTO orders SELECT g, now() - (g || ' minutes')::interval, g FROM generate_series(6001, 7800) g"
# The answer to the first run row's COMMIT is lost: the row had landed, and is not carried.
stream_case s_ack_runrow ack 1 998 2 "$(txns 16 17)" "INSERT INTO v7fill.run"
