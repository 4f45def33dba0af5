# The source side of `v7fill stream` (issue 19), through a small C program built against the
# libv7fill.a next to the binary under test (stream_source_helper.c): a slot's exported snapshot
# copies exactly the rows committed before it and the stream delivers the rest; a status update
# moves the slot's confirmed_flush_lsn; the preflight and connection errors say what to run; a
# second consumer of a slot gets "active for PID"; a password never reaches a message.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"

build_helper helper "$V7FILL_ROOT/tests/integration/stream_source_helper.c"
# hx STATUS ARGS...: run the helper, output in $OUT, check its exit status
hx() { local want=$1; shift; run_expect "$want" ./helper "$@"; }
slotq() { q "SELECT $2 FROM pg_replication_slots WHERE slot_name = '$1'"; }
cleanup_slots() { q "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND NOT active" >/dev/null; }
trap 'cleanup_slots >/dev/null 2>&1 || true; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE public.orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, note text,
                               twice bigint GENERATED ALWAYS AS (id * 2) STORED);
   INSERT INTO orders VALUES (1, '2024-01-02 03:04:05+00', 'a,b'), (2, '2024-01-03', '\"q\"'),
                             (3, '2024-01-04', NULL), (4, '2024-01-05', '');
   CREATE TABLE nokey (a int);
   CREATE TABLE other (id int PRIMARY KEY);
   CREATE TABLE byindex (id int NOT NULL, v text);
   CREATE UNIQUE INDEX byindex_id ON byindex (id);
   ALTER TABLE byindex REPLICA IDENTITY USING INDEX byindex_id;
   CREATE PUBLICATION pub FOR TABLE orders, nokey, byindex;" >/dev/null

# --- table info: attnum order, no generated column, the key ---------------------------------
hx 0 info public orders
assert_eq "replident=d
id bigint key=1 pk=1
created_at timestamp with time zone key=0 pk=0
note text key=0 pk=0" "$OUT" "columns and key of orders"
hx 0 info public byindex
assert_contains "$OUT" "replident=i" "replica identity using index"
assert_contains "$OUT" "id integer key=1 pk=0" "the replica identity index is the key"

# --- slot + snapshot copy + stream: no gap, no overlap ---------------------------------------
hx 0 copy s_copy public orders pub "psql -X -q -c \"INSERT INTO orders VALUES (100, now(), 'after the slot')\""
echo "$OUT"
assert_contains "$OUT" "name: public.orders (snapshot)" "source name"
assert_contains "$OUT" "columns: id created_at note" "the copy's columns"
rows=$(echo "$OUT" | grep '^row:')
assert_eq 'row: 1 2024-01-02 03:04:05+00 a,b
row: 2 2024-01-03 00:00:00+00 "q"
row: 3 2024-01-04 00:00:00+00 NULL
row: 4 2024-01-05 00:00:00+00 ' "$rows" "the copy has exactly the rows committed before the slot (NULL apart from '')"
assert_eq "w B
w R
w I
w C" "$(echo "$OUT" | grep '^w ')" "the insert after the slot arrives on the stream, once"
consistent=$(echo "$OUT" | sed -n 's/^consistent=//p')
acked=$(echo "$OUT" | sed -n 's/^acked=//p')
[ -n "$acked" ] && [ "$acked" != "$consistent" ] || fail "acked [$acked] vs consistent point [$consistent]"
assert_eq "$acked" "$(slotq s_copy confirmed_flush_lsn)" "the status update moved confirmed_flush_lsn"
assert_contains "$OUT" "slot: exists=1 plugin=pgoutput active=0 confirmed=$acked wal_status=reserved" "slot info"
sysid=$(psql -X -At -c "SELECT system_identifier FROM pg_control_system()")
assert_contains "$OUT" "systemid=$sysid timeline=1" "IDENTIFY_SYSTEM"

# --- a slot already there ---------------------------------------------------------------------
hx 5 copy s_copy public orders pub true
assert_contains "$OUT" 'replication slot "s_copy" already exists' "create twice"
assert_contains "$OUT" "pg_drop_replication_slot('s_copy')" "says how to drop it"

# --- slot creation waits for running transactions, and says so -------------------------------
# A writer's transaction held open until the helper said it waits for it (logged after 2 s).
hold_open w1 "INSERT INTO other VALUES (1)"
./helper copy s_wait public orders pub "psql -X -q -c \"INSERT INTO orders VALUES (102, now(), 'w')\"" >wait.out 2>&1 &
creator=$!
for _ in $(seq 1 1200); do
    grep -q "waiting for running transactions" wait.out && break
    kill -0 "$creator" 2>/dev/null || break
    sleep 0.05
done
hold_close w1
set +e; wait "$creator"; st=$?; set -e
OUT=$(cat wait.out)
assert_eq 0 "$st" "exit status of the waiting slot creation: $OUT"
assert_contains "$OUT" "waiting for running transactions" "long slot creation is logged"
assert_contains "$OUT" "row: 100 " "the copy sees the rows committed before"
assert_not_contains "$OUT" "row: 102 " "and not those after"

# --- SIGINT while the slot creation waits: cancelled, exit 130, no slot left behind -------------
hold_open w2 "INSERT INTO other VALUES (2)"
./helper copy s_int public orders pub true >int.out 2>&1 &
creator=$!
# The slot is listed while its creation waits for the writer.
for _ in $(seq 1 1200); do
    [ "$(slotq s_int 1)" = 1 ] && break
    kill -0 "$creator" 2>/dev/null || break
    sleep 0.05
done
[ "$(slotq s_int 1)" = 1 ] || { kill "$creator" 2>/dev/null; fail "the slot creation did not start waiting: $(cat int.out)"; }
kill -INT "$creator"
set +e; wait "$creator"; st=$?; set -e
assert_eq 130 "$st" "exit status of an interrupted slot creation: $(cat int.out)"
assert_contains "$(cat int.out)" 'interrupted by SIGINT (Ctrl-C) while creating replication slot "s_int"' "says so"
assert_eq "" "$(slotq s_int 1)" "no slot left behind"
hold_close w2

# --- a second consumer: active for PID --------------------------------------------------------
./helper hold s_copy pub 8 >hold.out 2>&1 &
holder=$!
for _ in $(seq 1 50); do grep -q streaming hold.out && break; sleep 0.1; done
grep -q streaming hold.out || fail "the first consumer did not start: $(cat hold.out)"
pid=$(slotq s_copy active_pid)
hx 5 start s_copy pub
assert_contains "$OUT" "replication slot \"s_copy\" is active for PID $pid" "second consumer"
assert_contains "$OUT" "SELECT pg_terminate_backend($pid);" "says how to end a dead one"
assert_contains "$OUT" "SQLSTATE: 55006" "the server's SQLSTATE"
q "INSERT INTO orders VALUES (101, now(), 'while holding')" >/dev/null
wait "$holder" || fail "the holder failed: $(cat hold.out)"
assert_contains "$(cat hold.out)" "stopped" "clean stop while data was in flight"

# --- drop ---------------------------------------------------------------------------------------
hx 0 drop s_copy
assert_eq "" "$(slotq s_copy 1)" "dropped"
hx 5 drop s_copy
assert_contains "$OUT" 'replication slot "s_copy" does not exist' "drop twice"
hx 2 start 'Bad-Name' pub
assert_contains "$OUT" 'replication slot name "Bad-Name" is invalid' "slot name checked"

# --- preflight ----------------------------------------------------------------------------------
hx 0 preflight pub public.orders public.byindex
hx 3 preflight nopub public.orders
assert_contains "$OUT" 'publication "nopub" does not exist on the source; run: CREATE PUBLICATION nopub FOR TABLE public.orders;' "no publication"
hx 3 preflight pub public.orders public.other
assert_contains "$OUT" 'table public.other is not in publication "pub" on the source; run: ALTER PUBLICATION pub ADD TABLE public.other;' "table not in the publication"
hx 3 preflight pub public.nokey
assert_contains "$OUT" "table public.nokey has no usable replica identity on the source (no primary key)" "no replica identity"
assert_contains "$OUT" "run: ALTER TABLE public.nokey REPLICA IDENTITY FULL;" "says what to run"
q "CREATE PUBLICATION inserts_only FOR TABLE nokey WITH (publish = 'insert')" >/dev/null
hx 0 preflight inserts_only public.nokey   # no updates or deletes published: no identity needed
q "CREATE PUBLICATION some_rows FOR TABLE orders WHERE (id > 2);
   CREATE PUBLICATION some_cols FOR TABLE orders (id, created_at)" >/dev/null
hx 3 preflight some_rows public.orders
assert_contains "$OUT" 'publication "some_rows" publishes only the rows of public.orders where (id > 2), so the stream would not match the initial copy; run: ALTER PUBLICATION some_rows DROP TABLE public.orders; ALTER PUBLICATION some_rows ADD TABLE public.orders;' "row filter"
hx 3 preflight some_cols public.orders
assert_contains "$OUT" 'publication "some_cols" leaves columns of public.orders out (note)' "column list"
hx 3 preflight pub public.missing
assert_contains "$OUT" "table public.missing does not exist on the source" "missing table"
q "DROP ROLE IF EXISTS norepl; CREATE ROLE norepl LOGIN" >/dev/null
PGUSER=norepl hx 3 preflight pub public.orders
assert_contains "$OUT" "role norepl has no REPLICATION attribute on the source; run: ALTER ROLE norepl REPLICATION;" "role without REPLICATION (preflight)"
PGUSER=norepl hx 3 open ""
assert_contains "$OUT" "role norepl may not open a replication connection to the source; run: ALTER ROLE norepl REPLICATION;" "role without REPLICATION (connection)"

# --- a password never reaches a message ---------------------------------------------------------
for ci in "host=$PGHOST port=1 user=postgres password=secret" \
          "postgresql://postgres:secret@/postgres?host=$PGHOST&port=1" \
          "postgresql://postgres:secret@/postgres?bogus=1" \
          "host=$PGHOST password='secret"; do
    hx 5 open "$ci"
    assert_contains "$OUT" "could not open a replication connection to the source" "connection error"
    assert_not_contains "$OUT" "secret" "password in [$OUT]"
done
q "DROP ROLE norepl" >/dev/null

# --- an invalidated slot: wal_status lost, and the option that re-creates it --------------------
# max_slot_wal_keep_size is the cluster's: set for these few statements only.
trap '{ q "ALTER SYSTEM RESET max_slot_wal_keep_size"; q "SELECT pg_reload_conf()"; cleanup_slots; } >/dev/null 2>&1 || true; rm -rf "$T_TMP"' EXIT
q "SELECT pg_create_logical_replication_slot('s_lost', 'pgoutput')" >/dev/null
q "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
for i in 1 2 3 4; do
    q "INSERT INTO other VALUES (100 + $i)" >/dev/null
    q "SELECT pg_switch_wal()" >/dev/null
done
q "CHECKPOINT" >/dev/null
q "ALTER SYSTEM RESET max_slot_wal_keep_size" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
assert_eq lost "$(slotq s_lost wal_status)" "test setup: the slot is invalidated"
hx 3 start s_lost pub
assert_contains "$OUT" 'replication slot "s_lost" is invalidated (wal_status lost)' "invalidated slot"
assert_contains "$OUT" "run the stream again with --resnapshot" "names the option that re-creates it"
# --- a source with wal_level replica and a pg_hba.conf without this database: its own cluster ---
src2=$(PGTMP_PORT=$((PGPORT + 11)) "$V7FILL_ROOT/tests/pgtmp.sh" start)
src2dir=$(eval "$src2"; echo "$PGTMP_DIR")
trap '{ q "ALTER SYSTEM RESET max_slot_wal_keep_size"; q "SELECT pg_reload_conf()"; cleanup_slots; "$V7FILL_ROOT/tests/pgtmp.sh" stop "$src2dir"; } >/dev/null 2>&1 || true; rm -rf "$T_TMP"' EXIT
(
    eval "$src2"
    owner=$(stat -c %U "$PGTMP_DIR/data")
    psql -X -q -d postgres -c "CREATE DATABASE other_db" >/dev/null
    echo "wal_level = replica" >>"$PGTMP_DIR/data/postgresql.conf"
    echo "local postgres all trust" >"$PGTMP_DIR/data/pg_hba.conf"
    runuser -u "$owner" -- "$PGBIN/pg_ctl" -D "$PGTMP_DIR/data" -l "$PGTMP_DIR/server.log" -w restart >/dev/null
    PGDATABASE=postgres hx 3 open ""
    assert_contains "$OUT" "wal_level is replica on the source; run: ALTER SYSTEM SET wal_level = logical; then restart it" "wal_level (connection)"
    PGDATABASE=postgres hx 3 preflight pub public.orders
    assert_contains "$OUT" "wal_level is replica on the source; run: ALTER SYSTEM SET wal_level = logical; then restart it" "wal_level (preflight)"
    PGDATABASE=other_db hx 3 open ""
    assert_contains "$OUT" "pg_hba.conf does not let role postgres in" "pg_hba"
    assert_contains "$OUT" "matched by its database name" "says how a logical replication connection is matched"
) || exit 1
"$V7FILL_ROOT/tests/pgtmp.sh" stop "$src2dir"
echo "t_stream_source: all checks passed"
