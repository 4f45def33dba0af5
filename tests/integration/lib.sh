# Helpers sourced by integration tests.  Each test gets a fresh database named
# after the test file; PG* variables point at the throwaway cluster.
set -euo pipefail
V7FILL=${V7FILL:?}
T_NAME=$(basename "${BASH_SOURCE[1]}" .sh)
export PGDATABASE="db_${T_NAME}"
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$PGDATABASE\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$PGDATABASE\"" >/dev/null
T_TMP=$(mktemp -d)
trap 'rm -rf "$T_TMP"' EXIT

# q SQL: run a query, print unaligned tuples only.
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
# sql FILE-or-text via stdin
sqlf() { psql -X -q -v ON_ERROR_STOP=1 "$@" >/dev/null; }

fail() { echo "FAIL: $*" >&2; exit 1; }
# assert_eq EXPECTED ACTUAL WHAT
assert_eq() { [ "$1" == "$2" ] || fail "$3: expected [$1], got [$2]"; }
# assert_contains HAYSTACK NEEDLE WHAT
assert_contains() { case "$1" in *"$2"*) ;; *) fail "$3: [$2] not found in: $1" ;; esac; }
assert_not_contains() { case "$1" in *"$2"*) fail "$3: [$2] unexpectedly in: $1" ;; *) ;; esac; }
# assert_match HAYSTACK ERE WHAT: some line of HAYSTACK matches the extended regular expression
assert_match() { grep -Eq -- "$2" <<<"$1" || fail "$3: no line matches [$2] in: $1"; }
# run_expect STATUS CMD...: run, capture stdout+stderr in $OUT, check exit status
run_expect() {
    local want=$1; shift
    set +e
    OUT=$("$@" 2>&1)
    local got=$?
    set -e
    [ "$got" = "$want" ] || fail "exit status of [$*]: expected $want, got $got; output: $OUT"
}

# rand_secs LO HI: a random number of seconds from LO to HI (decimals, to the hundredth), e.g.
# `sleep "$(rand_secs 0.3 2.5)"`: uniform as python's round(random.uniform(LO, HI), 2), without
# starting a process (python3 takes up to seconds to start on a loaded machine).
rand_secs() {
    local x f c=()
    for x in "$1" "$2"; do
        f=00; [[ $x == *.* ]] && f=${x#*.}00
        c+=($(( 10#${x%%.*} * 100 + 10#${f:0:2} )))
    done
    x=$(( c[0] + (RANDOM * 32768 + RANDOM) % (c[1] - c[0] + 1) ))
    printf '%d.%02d\n' $((x / 100)) $((x % 100))
}

# Controlling the throwaway cluster itself (fault-injection tests).  PGBIN as in pgtmp.sh;
# pg_ctl runs as the cluster's owner (the server refuses root).
PGBIN=${PGBIN:-}
if [ -z "$PGBIN" ]; then
    for d in /usr/lib/postgresql/*/bin; do [ -x "$d/pg_ctl" ] && PGBIN=$d; done
fi
as_cluster_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$(stat -c %U "$PGTMP_DIR/data")" -- "$@"; else "$@"; fi
}
pg_ctl_() { as_cluster_owner "$PGBIN/pg_ctl" -D "$PGTMP_DIR/data" -l "$PGTMP_DIR/server.log" "$@" >/dev/null; }
wait_ready() {
    for _ in $(seq 1 100); do
        "$PGBIN/pg_isready" -q -h "$PGHOST" -p "$PGPORT" && return 0
        sleep 0.1
    done
    fail "the cluster did not accept connections again"
}

# A stream test's source: the database $SRC (PGDATABASE_src) of the same cluster; qs SQL runs
# a query there (unaligned tuples only); source_db_fresh makes it afresh; stream_source_db also
# names the slot $SLOT and drops the test's slots now and when the test exits.
SRC="${PGDATABASE}_src"
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC" -c "$1"; }
drop_slots() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 's_${T_NAME}%'" >/dev/null
}
source_db_fresh() {
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$SRC\"" >/dev/null
    psql -X -q -d postgres -c "CREATE DATABASE \"$SRC\"" >/dev/null
}
stream_source_db() {
    SLOT="s_${T_NAME}"
    drop_slots
    source_db_fresh
    trap 'drop_slots; rm -rf "$T_TMP"' EXIT
}

# proxy_start DIR MODE N [MARK]: commit_proxy.py (which see) in the background, its files in
# DIR, its pid in $proxy; $PROXY is the conninfo through it without dbname.  proxy_stop ends it.
proxy_start() {
    mkdir -p "$1"
    python3 "$V7FILL_ROOT/tests/integration/commit_proxy.py" "$1/port" "$PGHOST/.s.PGSQL.$PGPORT" \
        "${@:2}" 2>"$1/proxy.log" &
    proxy=$!
    for _ in $(seq 1 100); do [ -s "$1/port" ] && break; sleep 0.05; done
    [ -s "$1/port" ] || fail "the proxy did not start: $(cat "$1/proxy.log")"
    PROXY="host=127.0.0.1 port=$(cat "$1/port") user=$PGUSER sslmode=disable gssencmode=disable"
}
proxy_stop() { kill "$proxy" 2>/dev/null || true; wait "$proxy" 2>/dev/null || true; proxy=; }

# hold_inserts TABLE KEY [SLOW_KEY]: while the table hold has a row, the insert into TABLE of the
# row whose legacy_id is KEY waits 60 s (a copy stopped there, to be killed), and the one of
# SLOW_KEY takes 1.2 s (a segment recorded after it); DELETE FROM hold lets them through.
hold_inserts() {
    q "CREATE TABLE hold (x int);
       INSERT INTO hold VALUES (1);
       CREATE FUNCTION t_hold_inserts() RETURNS trigger LANGUAGE plpgsql AS \$\$
       BEGIN
           IF NEW.legacy_id = $2 AND EXISTS (SELECT 1 FROM hold) THEN PERFORM pg_sleep(60); END IF;
           IF NEW.legacy_id = ${3:-0} AND EXISTS (SELECT 1 FROM hold) THEN PERFORM pg_sleep(1.2); END IF;
           RETURN NEW;
       END \$\$;
       CREATE TRIGGER t_hold_inserts BEFORE INSERT ON $1 FOR EACH ROW EXECUTE FUNCTION t_hold_inserts()" >/dev/null
}

# until_waited_sql "'REL'::regclass[, ...]": a DO block that returns once a lock on one of
# the relations is waited for (at most 30 s): a transaction ending with it commits just
# after another session (a switch's LOCK) began to wait for it.
until_waited_sql() {
    cat <<SQL
DO \$\$ BEGIN
  FOR i IN 1..3000 LOOP
    EXIT WHEN EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND relation IN ($1));
    PERFORM pg_sleep(0.01);
  END LOOP;
END \$\$;
SQL
}

# hold_lock DB TABLE MODE SECONDS: a session of DB (application_name t_holder) holds TABLE in
# MODE for SECONDS in the background, its pid in $HOLDER; returns once the lock is granted.
hold_lock() {
    PGAPPNAME=t_holder psql -X -q -At -d "$1" -c "BEGIN; LOCK TABLE $2 IN $3 MODE; SELECT pg_sleep($4); COMMIT" >holder.log 2>&1 &
    HOLDER=$!
    for _ in $(seq 1 100); do
        [ "$(psql -X -At -d "$1" -c "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 't_holder' AND l.granted AND l.relation = '$2'::regclass")" = 1 ] && return 0
        sleep 0.1
    done
    fail "the session holding $2 in $1 did not get its lock: $(cat holder.log)"
}

# build_helper OUT FILE.c: compile a test's helper program against the libv7fill.a next to the
# binary under test (with the sanitizers when that library was built with them).
build_helper() {
    local lib=$(dirname "$V7FILL")/libv7fill.a san=()
    case "$lib" in *build-san*) san=(-fsanitize=address,undefined) ;; esac
    # shellcheck disable=SC2046
    cc -std=c11 -D_GNU_SOURCE "${san[@]}" -I"$V7FILL_ROOT/include" $(pkg-config --cflags libpq) \
        -o "$1" "$2" "$lib" \
        $(pkg-config --libs libpq libzstd libcrypto jansson libxxhash libmicrohttpd) -lcsv -lm -pthread 2>cc.log \
        || fail "could not compile the helper $2: $(head -n 5 cc.log)"
}

# timed_start NAME SQL: SQL about every 25 ms through one psql session (\timing) in the
# background until timed_stop NAME, which prints "max_ms=N statements=N errors=N" (the longest
# statement in whole ms: a statement waiting for a lock shows here) once psql ran every
# statement sent (those queued while it waited or lagged too: they are writes like the others).
timed_start() {
    rm -f "$1.stop" "$1.done"
    ( { echo '\timing on'; while [ ! -e "$1.stop" ]; do echo "$2;"; sleep 0.025; done; } |
        psql -X -q -At >"$1.log" 2>&1
      touch "$1.done" ) &
}
# (timed_stop is called in $(...), where `wait` returns at once: a subshell's wait does not
# wait for its parent's jobs; hence the .done file.)
timed_stop() {
    local i
    touch "$1.stop"
    for i in $(seq 1 1200); do [ -e "$1.done" ] && break; sleep 0.05; done
    [ -e "$1.done" ] || fail "timed_stop $1: psql still running 60 s after the stop"
    awk '/^Time: /{ms=$2+0; if(ms>max)max=ms; n++} /ERROR/{e++}
         END{printf "max_ms=%d statements=%d errors=%d\n", max, n, e+0}' "$1.log"
}
# writer_stop: stops the background pgbench whose pid is in $writer and whose output is in
# writer.log; fails when it had ended before (each of its clients aborted) or when one of its
# statements failed: the application's write refused while v7fill worked.
writer_stop() {
    local alive=0
    ! kill "$writer" 2>/dev/null || alive=1
    wait "$writer" 2>/dev/null || true
    writer=
    [ "$alive" = 1 ] || fail "the writer (pgbench) ended before it was stopped: $(grep -E "error|ERROR" writer.log | head -n 3; tail -n 5 writer.log)"
    ! grep -q -E "aborted|ERROR" writer.log ||
        fail "a statement of the writer (the application) failed: $(grep -E "aborted|ERROR" writer.log | head -n 3)"
}

# switch_under_load WRITER_SQL READER_SQL ARGS...: v7fill ARGS (exit 0, its output in OUT) while
# a writer and a reader run their statement every 25 ms; fails when one of their statements
# waited 2000 ms (a lock timeout of 1000 ms + 1 s) or failed.  Returns once both ran their last
# statement; how many statements the writer ran in SW_WRITES.
switch_under_load() {
    local w r x ms limit held
    timed_start sw_w "$1"
    timed_start sw_r "$2"
    shift 2
    sleep 1
    run_expect 0 "$V7FILL" "$@"
    sleep 0.5
    w=$(timed_stop sw_w)
    r=$(timed_stop sw_r)
    SW_WRITES=$(sed 's/.*statements=\([0-9]*\).*/\1/' <<<"$w")
    echo "switch: $(grep -o 'lock held [0-9]* ms' <<<"$OUT" | head -n 1); writer $w; reader $r; load $(cut -d' ' -f1-3 /proc/loadavg)"
    # Under a sanitizer (2-5x slower) the switch's own lock hold can pass 1 s: the bound is then
    # that hold + 1 s, as measured by the switch itself.
    limit=2000
    if grep -qa -e __asan_init -e __tsan_init "$V7FILL"; then
        held=$(grep -o 'lock held [0-9]* ms' <<<"$OUT" | head -n 1 | tr -dc '0-9')
        [ -n "$held" ] && [ $((held + 1000)) -gt "$limit" ] && limit=$((held + 1000))
    fi
    for x in "writer $w" "reader $r"; do
        ms=$(sed -n 's/.*max_ms=\([0-9]*\).*/\1/p' <<<"$x")
        [ "$ms" -lt "$limit" ] || fail "the $x: a statement waited ${ms} ms (lock timeout 1000 ms + 1 s; limit ${limit} ms)"
        assert_contains "$x" "errors=0" "no statement failed across it ($x)"
    done
}

# hold_open NAME SQL: one psql session in the background runs BEGIN and SQL, then keeps its
# transaction (and its locks) open until hold_close NAME, which commits it and waits for the
# session.  Returns once SQL has run.  The session's application_name is hold_NAME (for
# pg_locks / pg_stat_activity).  A holder not released within 120 s commits on its own.
hold_open() {
    local name=$1 i
    rm -f "$T_TMP/$name.held" "$T_TMP/$name.release"
    PGAPPNAME="hold_$name" psql -X -q -v ON_ERROR_STOP=1 >"$T_TMP/$name.holdlog" 2>&1 <<SQL &
BEGIN;
$2;
\! touch $T_TMP/$name.held
\! i=0; while [ ! -f $T_TMP/$name.release ] && [ \$i -lt 2400 ]; do sleep 0.05; i=\$((i + 1)); done
COMMIT;
SQL
    eval "HOLD_PID_$name=$!"
    for i in $(seq 1 1200); do
        [ -f "$T_TMP/$name.held" ] && return 0
        kill -0 "$!" 2>/dev/null || break
        sleep 0.05
    done
    fail "hold_open $name: the holding transaction did not start: $(cat "$T_TMP/$name.holdlog")"
}
hold_close() {
    local pid
    eval "pid=\$HOLD_PID_$1"
    touch "$T_TMP/$1.release"
    wait "$pid" || fail "hold_open $1: the holding transaction failed: $(cat "$T_TMP/$1.holdlog")"
}
# wait_held PID LOG WHAT: waits (30 s at most) until a session of this database has slept in
# pg_sleep for over 2 s (a trigger holding a batch: a statement waiting 1.2 s does not count),
# failing naming WHAT when the command PID (its output in LOG) ends first or it never happens.
wait_held() {
    local waiting=0 i
    for i in $(seq 1 600); do
        waiting=$(q "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                       AND wait_event = 'PgSleep' AND now() - query_start > interval '2 seconds'")
        [ "$waiting" = 1 ] && return 0
        kill -0 "$1" 2>/dev/null || fail "the first run ended before $3: $(cat "$2")"
        sleep 0.05
    done
    fail "$3 never waited: $(cat "$2")"
}
# poll_until SQL WHAT [SECONDS]: poll SQL (a boolean query) every 50 ms until it returns t;
# fails naming WHAT after SECONDS (default 60).
poll_until() {
    local i n=$(( ${3:-60} * 20 ))
    for i in $(seq 1 "$n"); do
        [ "$(q "$1")" = t ] && return 0
        sleep 0.05
    done
    fail "waited ${3:-60} s for $2"
}
# scrape: the stream's /metrics (--metrics-listen 127.0.0.1:$PORT) into scrape.txt.
# scrape_until CMD...: scrape every 0.2 s until CMD (reading scrape.txt) holds, 30 s at most,
# then return either way, so the assertions that follow fail with their own message: the
# counters move right after each target commit, the gauges on the reader's tick (about a
# second, up to ~2 s apart; slower under ASan or load).
scrape() { curl -sf "http://127.0.0.1:$PORT/metrics" -o scrape.txt || fail "scrape failed"; }
scrape_until() {
    local deadline=$((SECONDS + 30))
    while :; do
        scrape
        "$@" && return 0
        [ "$SECONDS" -lt "$deadline" ] || return 0
        sleep 0.2
    done
}
