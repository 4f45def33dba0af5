# Operating a stream (issue 20): --metrics-listen refused at start before any slot is
# touched (bad address: exit 2, port in use: exit 1); /metrics scraped during a run passes
# the exposition-format checker and its counters equal the rows applied; /readyz (503
# while the source or the target is reconnected); the slot's WAL warnings; --status
# (running and stopped, text and JSON) with the conninfo stored without its password;
# --drop (asks, refuses without a terminal, stops the walsender).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
SRC="${PGDATABASE}_src"
SLOT="s_${T_NAME}"
drop_slots() {
    psql -X -q -At -d postgres -c "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name LIKE 's_${T_NAME}%' AND active" >/dev/null
    sleep 0.3
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 's_${T_NAME}%'" >/dev/null
}
pid=
drop_slots
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$SRC\"" >/dev/null
psql -X -q -d postgres -c "CREATE DATABASE \"$SRC\"" >/dev/null
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; drop_slots; rm -rf "$T_TMP"' EXIT
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC" -c "$1"; }

cc -std=c11 -D_GNU_SOURCE -o expo_check "$V7FILL_ROOT/tests/integration/expo_check_main.c" -lm 2>cc.log \
    || fail "could not compile the format checker: $(head -n 5 cc.log)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# metric NAME{LABELS}: its value on the last scrape (scrape.txt)
metric() { awk -v k="$1" '$1 == k { print $2 }' scrape.txt; }

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    INSERT INTO orders SELECT g, now() - (g || ' minutes')::interval, g FROM generate_series(1, 500) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id)"
args=(orders_v7 --source "dbname=$SRC password=s3cret-pw" --from public.orders --publication pub
      --slot "$SLOT" --map id=legacy_id --retention 400d)
slot_count() { q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT'"; }

# ---- a bad address or a port in use: refused before the slot exists
run_expect 2 "$V7FILL" stream "${args[@]}" --metrics-listen localhost:9187
assert_contains "$OUT" "--metrics-listen" "the error names the option"
PORT=$(free_port)
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); open("held", "w").close(); time.sleep(60)' "$PORT" &
holder=$!
for _ in $(seq 1 100); do [ -e held ] && break; sleep 0.1; done
run_expect 1 "$V7FILL" stream "${args[@]}" --metrics-listen "127.0.0.1:$PORT" --until-caught-up
kill "$holder"; wait "$holder" 2>/dev/null || true
assert_contains "$OUT" "127.0.0.1:$PORT" "the error names the address in use"
assert_eq 0 "$(slot_count)" "no slot created by a refused start"
assert_eq 0 "$(q "SELECT count(*) FROM pg_tables WHERE schemaname = 'v7fill' AND tablename = 'stream'")" "no state written either"
run_expect 3 "$V7FILL" stream orders_v7 --status --slot "$SLOT" --source "dbname=$SRC"
assert_contains "$OUT" "no stream with slot \"$SLOT\"" "--status of a stream that does not exist"
assert_eq 0 "$(q "SELECT count(*) FROM pg_tables WHERE schemaname = 'v7fill' AND tablename = 'stream'")" "--status only reads"

# ---- a running stream, scraped
PORT=$(free_port)
"$V7FILL" stream "${args[@]}" --metrics-listen "127.0.0.1:$PORT" --warn-retained 1 >run.out 2>run.err &
pid=$!
for _ in $(seq 1 100); do
    [ "$(curl -s "http://127.0.0.1:$PORT/readyz" -o /dev/null -w '%{http_code}')" = 200 ] && break
    sleep 0.2
done
assert_eq 200 "$(curl -s "http://127.0.0.1:$PORT/readyz" -o /dev/null -w '%{http_code}')" "ready once streaming"
qs "INSERT INTO orders SELECT g, now(), g FROM generate_series(1001, 1100) g;
    UPDATE orders SET amount = -amount WHERE id <= 30;
    DELETE FROM orders WHERE id BETWEEN 31 AND 40;"
before=$(qs "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
qs "INSERT INTO orders VALUES (2000, now(), 1)"
after=$(qs "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
for _ in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 2000")" = 1 ] && break
    sleep 0.2
done
T='table="orders_v7"'
# a tick after the last commit (both source transactions counted, no lag), every row counted
streamed_all() {
    [ "$(metric v7fill_stream_source_transactions_total)" = 2 ] && [ "$(metric v7fill_stream_apply_lag_seconds)" = 0 ] \
        && [ "$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")" = 601 ] \
        && [ "$(metric "v7fill_stream_insert_delay_seconds_count{$T}")" = 601 ]
}
scrape_until streamed_all
./expo_check <scrape.txt 2>check.err || fail "the scrape breaks the format: $(cat check.err)"
assert_eq 601 "$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")" "inserts counted = rows inserted (500 copied + 101)"
assert_eq "$(q "SELECT count(*) + 10 FROM orders_v7")" "$(( $(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}") ))" "the target holds the inserts less the deletes"
assert_eq 30 "$(metric "v7fill_stream_rows_applied_total{$T,op=\"update\"}")" "updates counted"
assert_eq 10 "$(metric "v7fill_stream_rows_applied_total{$T,op=\"delete\"}")" "deletes counted"
assert_eq 0 "$(metric "v7fill_stream_duplicates_total{$T}")" "no duplicates"
assert_eq 500 "$(metric "v7fill_stream_initial_copy_rows_total{$T}")" "the initial copy's rows"
assert_eq 0 "$(metric v7fill_stream_initial_copy_running)" "the copy is over"
assert_eq 601 "$(metric "v7fill_stream_insert_delay_seconds_count{$T}")" "each inserted row observed once in the delay histogram"
assert_eq 1 "$(metric "v7fill_stream_slot_wal_status{status=\"reserved\"}")" "the slot's wal_status"
assert_eq +Inf "$(metric v7fill_stream_slot_safe_wal_size_bytes)" "safe_wal_size unlimited"
[ "$(metric v7fill_stream_slot_retained_wal_bytes)" -gt 0 ] || fail "retained WAL measured"
assert_eq 2 "$(metric v7fill_stream_source_transactions_total)" "two source transactions (one psql -c each)"
[ "$(metric v7fill_stream_received_bytes_total)" -gt 0 ] || fail "bytes received counted"
assert_eq 0 "$(metric v7fill_stream_apply_lag_seconds)" "caught up: no lag in seconds"
off=$(metric v7fill_stream_clock_offset_seconds)
awk -v v="$off" 'BEGIN { exit !(v != "" && v > -0.5 && v < 0.5) }' \
    || fail "the source's clock offset to the target's (one machine): [$off] not within 0.5 s of 0"
# The last applied LSN is the end of the last source commit; the stored position is that, or
# an idle position the stream stored after it (every 10 s: a slow run gets there).
applied=$(metric v7fill_stream_last_applied_lsn)
stored=$(q "SELECT end_lsn - '0/0'::pg_lsn FROM v7fill.stream WHERE slot = '$SLOT'")
[ "$applied" -gt "$before" ] && [ "$applied" -le "$after" ] \
    || fail "last applied LSN $applied is not the last source commit's end (in $before..$after]"
[ "$applied" -le "$stored" ] || fail "last applied LSN $applied is ahead of the stored position $stored"
assert_contains "$(cat run.err)" "max_slot_wal_keep_size is unlimited" "the unlimited keep size is said"
assert_contains "$(cat run.err)" "above --warn-retained" "retained WAL above the threshold is said"

# ---- --status while it runs: the stored conninfo has no password
stored_ci=$(q "SELECT source_conninfo FROM v7fill.stream WHERE slot = '$SLOT'")
assert_contains "$stored_ci" "dbname='$SRC'" "the source's conninfo is stored"
assert_not_contains "$stored_ci" "s3cret" "without its password"
run_expect 0 "$V7FILL" stream orders_v7 --status --slot "$SLOT"
assert_contains "$OUT" "active (walsender pid" "the slot is shown active"
assert_contains "$OUT" "public.orders -> orders_v7" "the tables"
assert_not_contains "$OUT" "s3cret" "no password shown"
run_expect 0 "$V7FILL" stream orders_v7 --status --json --slot "$SLOT"
echo "$OUT" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["active"] is True and d["slot_exists"] is True, d
assert d["quarantined"] == 0 and d["inserted"] == 601, d
assert d["stored_position"] and d["confirmed_lsn"] and d["restart_lsn"], d
assert d["retained_wal_bytes"] > 0, d
' || fail "--status --json: $OUT"

# ---- a row past the retention (quarantined, late) and one near its cutoff (inserted)
qs "INSERT INTO orders VALUES (3001, now() - interval '500 days', 1), (3002, now() - interval '385 days', 1)"
for _ in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM v7fill.stream_quarantine WHERE slot = '$SLOT'")" = 1 ] && break
    sleep 0.2
done
late_counted() {
    [ "$(metric "v7fill_stream_late_rows_total{$T}")" = 1 ] && [ "$(metric "v7fill_stream_quarantined_rows_total{$T,reason=\"late\"}")" = 1 ] \
        && [ "$(metric "v7fill_stream_near_cutoff_rows_total{$T}")" = 1 ] \
        && [ "$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")" = 602 ]
}
scrape_until late_counted
./expo_check <scrape.txt 2>check.err || fail "the scrape breaks the format: $(cat check.err)"
assert_eq 1 "$(metric "v7fill_stream_late_rows_total{$T}")" "the row past the retention is late"
assert_eq 1 "$(metric "v7fill_stream_quarantined_rows_total{$T,reason=\"late\"}")" "... and quarantined as late"
assert_eq 0 "$(metric "v7fill_stream_quarantined_rows_total{$T,reason=\"rejected\"}")" "none rejected"
assert_eq 1 "$(metric "v7fill_stream_near_cutoff_rows_total{$T}")" "the row near its window's cutoff"
assert_eq 602 "$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")" "the near-cutoff row is inserted"
run_expect 0 "$V7FILL" stream orders_v7 --status --json --slot "$SLOT"
assert_contains "$OUT" '"quarantined": 1' "--status counts the quarantined row"

# ---- the source's walsender killed: not ready while reconnecting, then ready again
readyz() { curl -s "http://127.0.0.1:$PORT/readyz" -o readyz.txt -w '%{http_code}'; }
# not_ready_then_ready SIDE: /readyz 503 saying it reconnects to SIDE, then 200 again
not_ready_then_ready() {
    local code=
    for _ in $(seq 1 100); do code=$(readyz); [ "$code" = 503 ] && break; sleep 0.05; done
    assert_eq 503 "$code" "not ready while the $1 is reconnected"
    assert_contains "$(cat readyz.txt)" "not ready: reconnecting to the $1" "/readyz says why"
    for _ in $(seq 1 100); do code=$(readyz); [ "$code" = 200 ] && break; sleep 0.2; done
    assert_eq 200 "$code" "ready again once the $1 is back"
}
qs "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '$SLOT'" >/dev/null
not_ready_then_ready source
scrape
assert_eq 1 "$(metric 'v7fill_stream_reconnects_total{side="source"}')" "the reconnect counted on the source side"
assert_eq 0 "$(metric 'v7fill_stream_reconnects_total{side="target"}')" "none on the target side"

# ---- the target's connections killed (the writer's is retried by the pipeline itself): not
# ready while it reconnects, then ready again; the change made meanwhile is applied once
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'" >/dev/null
qs "INSERT INTO orders VALUES (4000, now(), 4)"
not_ready_then_ready target
for _ in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 4000")" = 1 ] && break
    sleep 0.2
done
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 4000")" "the row written across the target reconnect"
scrape
assert_eq 1 "$(metric 'v7fill_stream_reconnects_total{side="target"}')" "the reconnect counted on the target side"

# ---- stopped (SIGTERM: exit 0), then --status still answers
kill -TERM "$pid"
wait "$pid" || fail "the stream did not stop with status 0: $(tail -n 5 run.err)"
pid=
run_expect 0 "$V7FILL" stream orders_v7 --status --slot "$SLOT"
assert_contains "$OUT" "inactive (the stream is stopped)" "stopped: inactive"
assert_contains "$OUT" "its source commit: " "the applied commit's source time is shown"
run_expect 3 "$V7FILL" stream other_table --status --slot "$SLOT"
assert_contains "$OUT" "streams into orders_v7" "--status checks the table"
# A commit on the source while stopped: the lag in seconds is now - the applied commit's source
# time (stored with the position), not a bound.
sleep 1.2
qs "CREATE TABLE lagtick (x int); INSERT INTO lagtick VALUES (1)"  # WAL the stream has not applied
run_expect 0 "$V7FILL" stream orders_v7 --status --json --slot "$SLOT"
echo "$OUT" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["lag_bytes"] > 0, d
assert d["lag_seconds_exact"] is True, d
assert 1.0 <= d["lag_seconds"] < 300, d
assert d["last_commit_time"], d
' || fail "--status --json lag while stopped: $OUT"
run_expect 0 "$V7FILL" stream orders_v7 --status --slot "$SLOT"
assert_not_contains "$OUT" "at most" "the lag in seconds is not a bound"

# ---- --drop: refuses without a terminal, drops with --yes while running
"$V7FILL" stream "${args[@]}" >run2.out 2>run2.err &
pid=$!
for _ in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT' AND active")" = 1 ] && break
    sleep 0.2
done
run_expect 2 "$V7FILL" stream orders_v7 --drop --slot "$SLOT" </dev/null
assert_contains "$OUT" "--yes" "without a terminal --drop says to add --yes"
assert_eq 1 "$(slot_count)" "nothing dropped without the answer"
run_expect 0 "$V7FILL" stream orders_v7 --drop --yes --slot "$SLOT"
assert_contains "$OUT" "terminate its walsender" "it says it stops the walsender"
assert_contains "$OUT" "Kept: the rows of orders_v7" "it says what stays"
assert_eq 0 "$(slot_count)" "the slot is gone"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.stream WHERE slot = '$SLOT'")" "the stream's row is gone"
assert_eq 603 "$(q "SELECT count(*) + 10 FROM orders_v7")" "the target's rows stay"
set +e; wait "$pid"; rc=$?; set -e
pid=
[ "$rc" != 0 ] || fail "the stream whose slot was dropped stops with an error"
run_expect 3 "$V7FILL" stream orders_v7 --status --slot "$SLOT"
assert_contains "$OUT" "no stream with slot" "after --drop there is no such stream"
echo "ok"
