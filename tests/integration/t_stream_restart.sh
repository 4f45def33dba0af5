# The source in its own cluster: while a writer inserts and updates, the
# walsender is killed (pg_terminate_backend), the source is restarted
# (pg_ctl restart -m fast) and then the target: the stream reconnects by
# itself each time, and once caught up the target equals the source.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
# The source cluster: a second throwaway cluster on its own port.
src_env=$(PGTMP_PORT=54339 "$V7FILL_ROOT/tests/pgtmp.sh" start)
SRC_DIR=$(printf '%s\n' "$src_env" | sed -n "s/^export PGTMP_DIR='\(.*\)'$/\1/p")
SRC_CONN="host=$SRC_DIR/sock port=54339 user=postgres dbname=postgres"
trap 'kill $streamer $writer 2>/dev/null || true; "$V7FILL_ROOT/tests/pgtmp.sh" stop "$SRC_DIR"; rm -rf "$T_TMP"' EXIT
streamer=""
writer=""
qs() { psql -X -q -At -v ON_ERROR_STOP=1 "$SRC_CONN" -c "$1"; }
src_ctl() { as_cluster_owner "$PGBIN/pg_ctl" -D "$SRC_DIR/data" -l "$SRC_DIR/server.log" "$@" >/dev/null; }

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    INSERT INTO orders SELECT g, now() - (g || ' seconds')::interval, g FROM generate_series(1, 5000) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id)"
digest_src() { qs "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||amount, ',' ORDER BY id)) FROM orders"; }
digest_dst() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||amount, ',' ORDER BY legacy_id)) FROM orders_v7"; }

( i=100000
  while :; do
      psql -X -q "$SRC_CONN" -c "INSERT INTO orders SELECT g, now(), 1 FROM generate_series($i, $i + 4) g;
                                 UPDATE orders SET amount = amount + 1 WHERE id = $((i % 5000 + 1))" >/dev/null 2>&1 || true
      i=$((i + 5))
      sleep 0.02
  done ) &
writer=$!
"$V7FILL" stream orders_v7 --source "$SRC_CONN" --from public.orders --publication pub \
    --slot s_restart --map id=legacy_id --group-ms 50 >stream.log 2>&1 &
streamer=$!
# streaming: the copy done and the slot read (each event below lands on a stream that runs)
streaming() {
    local i
    for i in $(seq 1 600); do
        [ "$(q "SELECT count(*) FROM v7fill.stream WHERE slot = 's_restart' AND phase = 'stream'" 2>/dev/null)" = 1 ] &&
            [ "$(qs "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 's_restart' AND active" 2>/dev/null)" = 1 ] &&
            return 0
        sleep 0.1
    done
    fail "waited 60 s for the stream to stream ($1): $(tail -3 stream.log)"
}
streaming "at start"
sleep 1
qs "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 's_restart'" >/dev/null
sleep 1
streaming "after its walsender was ended"
src_ctl restart -m fast -w
sleep 1
streaming "after the source's restart"
pg_ctl_ restart -m fast -w
wait_ready
sleep 1
streaming "after the target's restart"
sleep 2
kill $writer; wait $writer 2>/dev/null || true
writer=""
kill -TERM $streamer
set +e; wait $streamer; rc=$?; set -e
streamer=""
cat stream.log
assert_eq 0 "$rc" "SIGTERM ends the stream with exit status 0"
reconnects=$(sed -n 's/.*reconnects=\([0-9]*\).*/\1/p' stream.log | tail -1)
[ "${reconnects:-0}" -ge 2 ] || fail "the stream reconnected by itself (reconnects=${reconnects:-none})"
run_expect 0 "$V7FILL" stream orders_v7 --source "$SRC_CONN" --from public.orders --publication pub \
    --slot s_restart --map id=legacy_id --until-caught-up
assert_eq "$(digest_src)" "$(digest_dst)" "after the restarts the target equals the source"

# A position an older version stored inside a large transaction (txn_lsn =
# its commit LSN, txn_changes = the changes it had applied in earlier target
# transactions) still resumes: those changes are skipped, the rest applied.
# synchronous_commit on: the test cluster commits asynchronously, and a peek
# decodes only WAL already flushed, so it could miss a commit just made.
qs "SET synchronous_commit = on; INSERT INTO orders SELECT g, now(), 7 FROM generate_series(900001, 900010) g"
for _ in $(seq 1 50); do   # the last run's walsender lets the slot go (peek needs it free)
    [ "$(qs "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 's_restart' AND active")" = 0 ] && break
    sleep 0.2
done
hex=$(qs "SELECT encode(substr(data, 2, 8), 'hex') FROM pg_logical_slot_peek_binary_changes('s_restart',
          NULL, NULL, 'proto_version', '1', 'publication_names', 'pub') WHERE get_byte(data, 0) = 66
          ORDER BY lsn DESC LIMIT 1")
[ -n "$hex" ] || fail "no BEGIN message of the 10-row transaction in the slot"
final=$(printf '%X/%X' "0x${hex:0:8}" "0x${hex:8:8}")
q "UPDATE v7fill.stream SET txn_lsn = '$final', txn_changes = 4 WHERE slot = 's_restart'"
run_expect 0 "$V7FILL" stream orders_v7 --source "$SRC_CONN" --from public.orders --publication pub \
    --slot s_restart --map id=legacy_id --until-caught-up
assert_eq "0 6" "$(q "SELECT count(*) FILTER (WHERE legacy_id <= 900004), count(*) FILTER (WHERE legacy_id > 900004)
                       FROM orders_v7 WHERE legacy_id > 900000" | tr '|' ' ')" "an old position inside a transaction: the changes it had applied are skipped"
assert_eq "0/0" "$(q "SELECT txn_lsn FROM v7fill.stream WHERE slot = 's_restart'")" "and no position inside a transaction is stored any more"
qs "SELECT pg_drop_replication_slot('s_restart')" >/dev/null
