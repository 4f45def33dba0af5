# The stream's clock measurement (issue 19) with a source whose clock really differs: the
# source is its own throwaway cluster run under libfaketime (FAKETIME=+1h, through
# PGTMP_ENV), the target is the suite's cluster on this machine's clock.  A user then sees:
# v7fill_stream_clock_offset_seconds about +3600 (one series, also with several targets, whose
# lag reads the first target's measurement, also the one taken again after the source's clock
# is stepped back to +50 min); v7fill_stream_apply_lag_seconds, while a target
# is held back, and --status's lag_seconds after a commit, counting real seconds since the
# applied commit (without the correction a source ahead hides them: they read 0); every row
# once, each id's time its row's time column; the insert delays taken from this host's clock
# and the rows' times, not from the source's clock; and a row stamped with the source's
# now() quarantined as "clock ahead" (it is an hour ahead of the target's now), which the
# start says.  Then a source 10 minutes behind: offset -600, lags not 600 s too many.
# Skipped (said) only when libfaketime cannot be loaded (contrib/install-deps.sh installs it).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"

FT_LIB=${V7FILL_FAKETIME_LIB:-}
for f in /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 /usr/lib/*/faketime/libfaketime.so.1; do
    [ -z "$FT_LIB" ] && [ -r "$f" ] && FT_LIB=$f
done
if [ -z "$FT_LIB" ] || [ -n "$(LD_PRELOAD=$FT_LIB /bin/true 2>&1)" ]; then
    echo "skipped: libfaketime cannot be loaded (${FT_LIB:-no libfaketime.so.1}); apt-get install faketime"
    exit 0
fi
shift_s=$(( $(LD_PRELOAD=$FT_LIB FAKETIME=+1h date +%s) - $(date +%s) ))
[ "$shift_s" -ge 3595 ] && [ "$shift_s" -le 3605 ] \
    || fail "libfaketime loads but FAKETIME=+1h does not shift date: $shift_s s"

# the metrics format checker, compiled while the source cluster starts
cc -std=c11 -D_GNU_SOURCE -o expo_check "$V7FILL_ROOT/tests/integration/expo_check_main.c" -lm 2>cc.log &
ccpid=$!

# ---- the source cluster, its clock an hour ahead ------------------------------------------
# Its skew in a file libfaketime reads again every second, to move it while a stream runs;
# the monotonic clocks (PostgreSQL's timeouts) stay real.
chmod 755 "$T_TMP"
echo "+1h" >skew.rc
chmod 644 skew.rc
FT_ENV="LD_PRELOAD=$FT_LIB FAKETIME_DONT_FAKE_MONOTONIC=1"
src_env=$(cd / && PGTMP_PORT=54349 PGTMP_ENV="$FT_ENV FAKETIME_TIMESTAMP_FILE=$T_TMP/skew.rc FAKETIME_CACHE_DURATION=1" \
              "$V7FILL_ROOT/tests/pgtmp.sh" start) \
    || fail "PostgreSQL does not start under libfaketime: $src_env"
SRC_DIR=$(printf '%s\n' "$src_env" | sed -n "s/^export PGTMP_DIR='\(.*\)'$/\1/p")
SRC_CONN="host=$SRC_DIR/sock port=54349 user=postgres dbname=postgres"
pid=""
opid=""
bpid=""
locker=""
BEHIND_DIR=""
trap '[ -z "$pid" ] || kill $pid 2>/dev/null; [ -z "$opid" ] || kill $opid 2>/dev/null; [ -z "$bpid" ] || kill $bpid 2>/dev/null; [ -z "$locker" ] || kill $locker 2>/dev/null
      "$V7FILL_ROOT/tests/pgtmp.sh" stop "$SRC_DIR"
      [ -z "$BEHIND_DIR" ] || "$V7FILL_ROOT/tests/pgtmp.sh" stop "$BEHIND_DIR"; rm -rf "$T_TMP"' EXIT
qs() { psql -X -q -At -v ON_ERROR_STOP=1 "$SRC_CONN" -c "$1"; }
skew=$(( $(qs "SELECT extract(epoch FROM now())::int8") - $(date +%s) ))
[ "$skew" -ge 3590 ] && [ "$skew" -le 3610 ] \
    || fail "the source's now() is not an hour ahead under libfaketime: $skew s"
skew=$(( $(qs "SELECT extract(epoch FROM clock_timestamp())::int8") - $(q "SELECT extract(epoch FROM clock_timestamp())::int8") ))
[ "$skew" -ge 3590 ] && [ "$skew" -le 3610 ] || fail "source's clock - target's: $skew s, not about 3600"

# Times from this host's (and the target's) real clock, 2 minutes ago: the rows' time column,
# hence their ids' times, never come from the source's clock here.
past() { echo "'$(date -u -d '-2 min' +'%F %T.%6N+00')'::timestamptz"; }
qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, n int);
    CREATE TABLE items (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, n int);
    CREATE TABLE tick (x int);
    INSERT INTO orders SELECT g, $(past) - (g || ' ms')::interval, g FROM generate_series(1, 300) g;
    INSERT INTO items SELECT g, $(past) - (g || ' ms')::interval, g FROM generate_series(1, 200) g;
    CREATE PUBLICATION pub FOR TABLE orders, items;"
for t in one_v7 orders_v7 items_v7; do
    q "CREATE TABLE $t (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                        created_at timestamptz NOT NULL, n int) PARTITION BY RANGE (id)"
done
common=(--source "$SRC_CONN" --publication pub --map id=legacy_id)

wait "$ccpid" || fail "could not compile the format checker: $(head -n 5 cc.log)"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
metric() { awk -v k="$1" '$1 == k { print $2 }' scrape.txt; }
# within NAME VALUE LO HI: LO <= VALUE <= HI
inside() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'; }
within() { inside "$2" "$3" "$4" || fail "$1: [$2] not within [$3, $4] ($(grep -v '^#' scrape.txt | grep -e clock -e apply_lag | tr '\n' ' '))"; }
# no_lag [TABLE...]: apply_lag_seconds 0 (of each TABLE's series, or the one series)
no_lag() {
    local t
    [ $# -gt 0 ] || { [ "$(metric v7fill_stream_apply_lag_seconds)" = 0 ]; return; }
    for t in "$@"; do [ "$(metric "v7fill_stream_apply_lag_seconds{table=\"$t\"}")" = 0 ] || return 1; done
}
# lag_within SERIES LO HI: the apply_lag_seconds SERIES within [LO, HI]
lag_within() { inside "$(metric "$1")" "$2" "$3"; }
# inserted TABLE: TABLE's rows_applied_total of inserts
inserted() { metric "v7fill_stream_rows_applied_total{table=\"$1\",op=\"insert\"}"; }
# delays_counted TABLE...: each TABLE's inserts applied all observed in its delay histogram
delays_counted() {
    local t ins
    for t in "$@"; do
        ins=$(inserted "$t")
        [ -n "$ins" ] && [ "$ins" = "$(metric "v7fill_stream_insert_delay_seconds_count{table=\"$t\"}")" ] || return 1
    done
}
wait_ready() {
    for _ in $(seq 1 300); do
        [ "$(curl -s "http://127.0.0.1:$PORT/readyz" -o /dev/null -w '%{http_code}')" = 200 ] && return
        sleep 0.1
    done
    fail "the stream is not ready: $(tail -n 5 run.log)"
}
# landed TARGET SOURCE_TABLE: wait until the target has the source table's rows
landed() {
    for _ in $(seq 1 300); do
        [ "$(q "SELECT count(*) FROM $1")" = "$(qs "SELECT count(*) FROM $2")" ] && return
        sleep 0.1
    done
}
# hold TARGET: a transaction on the target holds TARGET's ACCESS EXCLUSIVE lock until release
hold() {
    rm -f lock.fifo; mkfifo lock.fifo
    psql -X -q -v ON_ERROR_STOP=1 <lock.fifo >locker.log 2>&1 &
    locker=$!
    exec 3>lock.fifo
    echo "BEGIN; LOCK TABLE $1 IN ACCESS EXCLUSIVE MODE;" >&3
    for _ in $(seq 1 100); do
        [ "$(q "SELECT count(*) FROM pg_locks WHERE relation = '$1'::regclass AND mode = 'AccessExclusiveLock' AND granted")" = 1 ] && return
        sleep 0.1
    done
    fail "could not lock $1: $(cat locker.log)"
}
release() { echo "COMMIT;" >&3; exec 3>&-; wait $locker; locker=""; }
# blocked TARGET: wait until a session waits for TARGET's lock (the stream's writer)
blocked() {
    for _ in $(seq 1 100); do
        [ "$(q "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                WHERE d.datname = current_database() AND NOT l.granted")" -ge 1 ] && return
        sleep 0.1
    done
    fail "the stream's writer never waited for $1's lock: $(tail -n 5 run.log)"
}
# id_time_ok TARGET: no row whose id's time (its first 48 bits, ms) is not its created_at's ms
id_time_ok() {
    assert_eq 0 "$(q "SELECT count(*) FROM $1
                      WHERE ('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::int8
                            <> floor(extract(epoch FROM created_at) * 1000)::int8")" \
        "$1: each id's time is its row's created_at (to the ms)"
}
# once TARGET SOURCE_TABLE: the target has each source row once
once() {
    assert_eq "$(qs "SELECT count(*), sum(id), md5(string_agg(id || '|' || created_at, ',' ORDER BY id)) FROM $2")" \
        "$(q "SELECT count(*), sum(legacy_id), md5(string_agg(legacy_id || '|' || created_at, ',' ORDER BY legacy_id)) FROM $1")" \
        "$1 equals $2"
    assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM $1 GROUP BY 1 HAVING count(*) > 1) d")" "$1: no row twice"
}
# status_lag TARGET SLOT: stopped, a commit on the source a while after the applied one: the
# lag in seconds is the real time since the applied commit (>= the sleep), not that less the
# hour the source is ahead (0, clamped) nor more
status_lag() {
    sleep 2
    qs "SET synchronous_commit = on; INSERT INTO tick VALUES (1)" # its WAL written now
    run_expect 0 "$V7FILL" stream "$1" --status --json --slot "$2"
    echo "$OUT" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["lag_bytes"] > 0, d
assert d["lag_seconds_exact"] is True, d
assert 2.0 <= d["lag_seconds"] < 300, d
print("--status lag_seconds", d["lag_seconds"])
' || fail "$1: --status --json lag after a commit while stopped: $OUT"
}

# ---- one target ------------------------------------------------------------------------------
# (one_target runs while the stream of several targets below waits for its slot's check, a
# minute after its start, before the source's clock moves: its own slot, target and metrics
# port, its files in $T_TMP/one.)
one_target() {
    local PORT
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$T_TMP/one"
    cd "$T_TMP/one"
    "$V7FILL" stream one_v7 "${common[@]}" --from public.orders --slot s_clocks_one \
        --metrics-listen "127.0.0.1:$PORT" >run.log 2>&1 &
    opid=$!
    wait_ready
    qs "INSERT INTO orders SELECT g, $(past), g FROM generate_series(1001, 1100) g"
    landed one_v7 orders
    scrape_until no_lag # a tick after the last commit
    "$T_TMP/expo_check" <scrape.txt 2>check.err || fail "the scrape breaks the format: $(cat check.err)"
    echo "one target, caught up: $(grep -e '^v7fill_stream_clock' -e '^v7fill_stream_apply_lag_seconds' scrape.txt | tr '\n' ' ')"
    within "one target: clock_offset_seconds (source − target)" "$(metric v7fill_stream_clock_offset_seconds)" 3595 3605
    assert_eq 0 "$(metric v7fill_stream_apply_lag_seconds)" "one target, caught up: no lag in seconds"
    assert_contains "$(cat run.log)" "the source's clock is 3600" "the skew is logged at start"
    assert_contains "$(cat run.log)" "ahead of the target's" "the skew's direction is logged"
    assert_contains "$(cat run.log)" "more than --max-future (5m" "the start says the skew is beyond --max-future"
    assert_contains "$(cat run.log)" "the source's now() are quarantined as \"clock ahead\"" "and what that does to rows stamped with the source's now()"
    # The target held back: a commit handed out, not applied; the gauge (once a tick has it) is the
    # real time since the last applied commit (the 100 rows, >= 2 s ago), not that minus an hour.
    hold one_v7
    qs "INSERT INTO orders VALUES (1101, $(past), 1)"
    blocked one_v7
    scrape_until lag_within v7fill_stream_apply_lag_seconds 2 300
    echo "one target, held back: $(grep -e '^v7fill_stream_clock' -e '^v7fill_stream_apply_lag_seconds' scrape.txt | tr '\n' ' ')"
    within "one target held back: apply_lag_seconds" "$(metric v7fill_stream_apply_lag_seconds)" 2 300
    release
    landed one_v7 orders
    one_counted() { [ "$(inserted one_v7)" = 401 ] && delays_counted one_v7; }
    scrape_until one_counted
    # Delays: this host's clock − the ids' times (2 minutes ago), in the (1 min, 10 min] buckets.
    T='table="one_v7"'
    ins=$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")
    assert_eq 401 "$ins" "one target: every row inserted (300 copied + 101)"
    assert_eq "$ins" "$(metric "v7fill_stream_insert_delay_seconds_count{$T}")" "each row's delay observed once"
    assert_eq 0 "$(metric "v7fill_stream_insert_delay_seconds_bucket{$T,le=\"60\"}")" "no delay under a minute (the rows are 2 minutes old)"
    assert_eq "$ins" "$(metric "v7fill_stream_insert_delay_seconds_bucket{$T,le=\"600\"}")" \
        "every delay within 10 minutes: not shifted by the source's hour"
    # A row stamped with the source's now() is an hour ahead of the target's now: beyond
    # --max-future (5 min), so quarantined as clock ahead, and the stream goes on.
    qs "INSERT INTO orders VALUES (1102, now(), 1); INSERT INTO orders VALUES (1103, $(past), 1)"
    for _ in $(seq 1 300); do [ "$(q "SELECT count(*) FROM one_v7 WHERE legacy_id = 1103")" = 1 ] && break; sleep 0.1; done
    assert_eq 1 "$(q "SELECT count(*) FROM v7fill.stream_quarantine WHERE slot = 's_clocks_one' AND row->>'id' = '1102' AND reason LIKE 'clock ahead%'")" \
        "a row stamped with the source's now() is quarantined as clock ahead ($(q "SELECT reason FROM v7fill.stream_quarantine"))"
    kill -TERM $opid
    wait $opid || fail "the stream did not stop with status 0: $(tail -n 5 run.log)"
    opid=""
    qs "DELETE FROM orders WHERE id = 1102"
    once one_v7 orders
    id_time_ok one_v7
    status_lag one_v7 s_clocks_one
    cd "$T_TMP"
}

# ---- a source whose clock is 10 minutes behind: the skew would add 600 s that never clear ---
# (behind_source runs while the stream of several targets below waits for its slot's check, a
# minute after its start, and is idle: its own cluster, slot, target and metrics port, its
# files in $T_TMP/behind.)
behind_source() {
    local SRC_CONN PORT
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$T_TMP/behind"
    cd "$T_TMP/behind"
    src_env=$(cd / && PGTMP_PORT=54350 PGTMP_ENV="$FT_ENV FAKETIME=-10m" "$V7FILL_ROOT/tests/pgtmp.sh" start) \
        || fail "PostgreSQL does not start under libfaketime (-10m): $src_env"
    BEHIND_DIR=$(printf '%s\n' "$src_env" | sed -n "s/^export PGTMP_DIR='\(.*\)'$/\1/p")
    SRC_CONN="host=$BEHIND_DIR/sock port=54350 user=postgres dbname=postgres"
    skew=$(( $(qs "SELECT extract(epoch FROM clock_timestamp())::int8") - $(q "SELECT extract(epoch FROM clock_timestamp())::int8") ))
    [ "$skew" -ge -610 ] && [ "$skew" -le -590 ] || fail "source's clock - target's: $skew s, not about -600"
    qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, n int);
        CREATE TABLE tick (x int);
        INSERT INTO orders SELECT g, $(past), g FROM generate_series(1, 100) g;
        CREATE PUBLICATION pub FOR TABLE orders;"
    q "CREATE TABLE behind_v7 (LIKE one_v7 INCLUDING ALL) PARTITION BY RANGE (id)"
    "$V7FILL" stream behind_v7 --source "$SRC_CONN" --publication pub --map id=legacy_id --from public.orders \
        --slot s_clocks_behind --metrics-listen "127.0.0.1:$PORT" >run.log 2>&1 &
    bpid=$!
    wait_ready
    qs "INSERT INTO orders SELECT g, $(past), g FROM generate_series(101, 150) g"
    landed behind_v7 orders
    scrape_until no_lag
    within "source behind: clock_offset_seconds" "$(metric v7fill_stream_clock_offset_seconds)" -605 -595
    assert_eq 0 "$(metric v7fill_stream_apply_lag_seconds)" "source behind, caught up: no lag in seconds"
    assert_contains "$(cat run.log)" "the source's clock is 600" "the skew is logged at start"
    assert_contains "$(cat run.log)" "behind the target's" "the skew's direction is logged"
    assert_not_contains "$(cat run.log)" "more than --max-future" "a source behind is not ahead"
    hold behind_v7
    qs "INSERT INTO orders VALUES (151, $(past), 1)"
    blocked behind_v7
    scrape_until lag_within v7fill_stream_apply_lag_seconds 2 300
    echo "source behind, held back: $(grep -e '^v7fill_stream_clock' -e '^v7fill_stream_apply_lag_seconds' scrape.txt | tr '\n' ' ')"
    within "source behind, held back: apply_lag_seconds" "$(metric v7fill_stream_apply_lag_seconds)" 2 300
    release
    landed behind_v7 orders
    kill -TERM $bpid
    wait $bpid || fail "the stream did not stop with status 0: $(tail -n 5 run.log)"
    bpid=""
    once behind_v7 orders
    id_time_ok behind_v7
    status_lag behind_v7 s_clocks_behind
    cd "$T_TMP"
}

# ---- several targets: the first measures, the second reads the same pair ---------------------
"$V7FILL" stream "${common[@]}" --from public.orders=orders_v7 --from public.items=items_v7 \
    --slot s_clocks_multi --metrics-listen "127.0.0.1:$PORT" >run.log 2>&1 &
pid=$!
wait_ready
one_target # (while the slot's check is not due yet; before this stream's own rows)
qs "INSERT INTO orders SELECT g, $(past), g FROM generate_series(2001, 2050) g;
    INSERT INTO items SELECT g, $(past), g FROM generate_series(2001, 2030) g"
landed orders_v7 orders
landed items_v7 items
scrape_until no_lag orders_v7 items_v7
./expo_check <scrape.txt 2>check.err || fail "the scrape breaks the format: $(cat check.err)"
assert_eq 1 "$(grep -c '^v7fill_stream_clock_offset_seconds ' scrape.txt)" "one clock offset series, the slot's"
within "several targets: clock_offset_seconds" "$(metric v7fill_stream_clock_offset_seconds)" 3595 3605
for t in orders_v7 items_v7; do
    assert_eq 0 "$(metric "v7fill_stream_apply_lag_seconds{table=\"$t\"}")" "$t caught up: no lag in seconds"
done
# items_v7, the second target, corrects its lag with the first's measurement.
hold items_v7
qs "INSERT INTO items VALUES (2031, $(past), 1)"
blocked items_v7
scrape_until lag_within 'v7fill_stream_apply_lag_seconds{table="items_v7"}' 2 300
echo "two targets, items_v7 held back: $(grep -e '^v7fill_stream_clock' -e '^v7fill_stream_apply_lag_seconds' scrape.txt | tr '\n' ' ')"
within "items_v7 (second target) held back: apply_lag_seconds" "$(metric 'v7fill_stream_apply_lag_seconds{table="items_v7"}')" 2 300
release
landed items_v7 items
# The source's clock steps back to +50 min (as NTP might set it): the first target measures
# again with the slot's checks (every minute) and items_v7's lag uses that new pair too.
echo "+50m" >skew.rc
sleep 2
skew=$(( $(qs "SELECT extract(epoch FROM clock_timestamp())::int8") - $(date +%s) ))
[ "$skew" -ge 2990 ] && [ "$skew" -le 3010 ] || fail "the source's clock did not move to +50 min: $skew s"
behind_source # (while the slot's check is not due yet)
for _ in $(seq 1 150); do
    scrape
    inside "$(metric v7fill_stream_clock_offset_seconds)" 2990 3010 && break
    sleep 1
done
within "several targets, the source's clock moved: clock_offset_seconds (measured again)" \
    "$(metric v7fill_stream_clock_offset_seconds)" 2995 3005
# (a commit stamped before the step is 10 minutes off until one stamped after it is applied)
qs "INSERT INTO items VALUES (2032, $(past), 1)"
landed items_v7 items
hold items_v7
qs "INSERT INTO items VALUES (2033, $(past), 1)"
blocked items_v7
scrape_until lag_within 'v7fill_stream_apply_lag_seconds{table="items_v7"}' 2 300
echo "two targets, source moved to +50m, items_v7 held back: $(grep -e '^v7fill_stream_clock' -e '^v7fill_stream_apply_lag_seconds' scrape.txt | tr '\n' ' ')"
within "items_v7 held back after the source's clock moved: apply_lag_seconds" "$(metric 'v7fill_stream_apply_lag_seconds{table="items_v7"}')" 2 300
release
landed items_v7 items
scrape_until delays_counted orders_v7 items_v7
for t in orders_v7 items_v7; do
    T="table=\"$t\""
    ins=$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")
    assert_eq "$ins" "$(metric "v7fill_stream_insert_delay_seconds_count{$T}")" "$t: each row's delay observed once"
    assert_eq 0 "$(metric "v7fill_stream_insert_delay_seconds_bucket{$T,le=\"60\"}")" "$t: no delay under a minute"
    assert_eq "$ins" "$(metric "v7fill_stream_insert_delay_seconds_bucket{$T,le=\"600\"}")" "$t: every delay within 10 minutes"
done
kill -TERM $pid
wait $pid || fail "the stream of two targets did not stop with status 0: $(tail -n 5 run.log)"
pid=""
once orders_v7 orders
once items_v7 items
id_time_ok orders_v7
id_time_ok items_v7
status_lag items_v7 s_clocks_multi
