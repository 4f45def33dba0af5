# Large and long source transactions: a 2M-row single transaction is applied
# with bounded memory (peak RSS under 200 MB) and every row once; a
# transaction that stays open across several keepalives while others commit
# is applied whole, nothing skipped.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
SRC="${PGDATABASE}_src"
SLOT="s_${T_NAME}"
drop_slots() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$SLOT'" >/dev/null || true
}
drop_slots
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$SRC\"" >/dev/null
psql -X -q -d postgres -c "CREATE DATABASE \"$SRC\"" >/dev/null
reset_timeout() { psql -X -q -d postgres -c "ALTER SYSTEM RESET wal_sender_timeout" -c "SELECT pg_reload_conf()" >/dev/null; }
trap 'reset_timeout; drop_slots; rm -rf "$T_TMP"' EXIT
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC" -c "$1"; }
qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id)"
stream() {
    "$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub \
        --slot "$SLOT" --map id=legacy_id --until-caught-up "$@"
}
run_expect 0 stream
# A transaction open across several keepalives while others commit: with
# wal_sender_timeout at 2 s the server asks for a reply every second; the
# stream answers each and stays connected (reconnects=0), and nothing is skipped.
psql -X -q -d postgres -c "ALTER SYSTEM SET wal_sender_timeout = '2s'" -c "SELECT pg_reload_conf()" >/dev/null
psql -X -q -d "$SRC" -c "BEGIN; INSERT INTO orders VALUES (-1, now(), 1); SELECT pg_sleep(7);
                         INSERT INTO orders VALUES (-2, now(), 2); COMMIT;" >/dev/null &
long=$!
"$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub \
    --slot "$SLOT" --map id=legacy_id >long.log 2>&1 &
streamer=$!
for i in $(seq 1 10); do qs "INSERT INTO orders VALUES ($i, now(), $i)"; sleep 0.5; done
wait $long
sleep 2
kill -TERM $streamer
set +e; wait $streamer; rc=$?; set -e
cat long.log
assert_eq 0 "$rc" "the stream ran through the keepalives and stopped cleanly"
assert_contains "$(cat long.log)" "reconnects=0" "no timeout, no reconnect"
reset_timeout
assert_eq 12 "$(q "SELECT count(*) FROM orders_v7")" "the long transaction and the short ones, nothing skipped"

qs "INSERT INTO orders SELECT g, now() - (g % 100000 || ' seconds')::interval, 1 FROM generate_series(100, 2000099) g"
run_expect 0 stream
echo "$OUT"
assert_eq 2000012 "$(q "SELECT count(*) FROM orders_v7")" "the 2M-row transaction, every row once"
rss=$(printf '%s\n' "$OUT" | sed -n 's/.*peak_rss=\([0-9]*\)MB.*/\1/p')
if grep -qa -e __asan_init -e __tsan_init "$V7FILL"; then
    # A sanitizer keeps freed memory in quarantine and adds shadow memory: its
    # RSS says nothing of v7fill's own (59 MB here in a plain build).
    echo "peak RSS not checked under a sanitizer build (${rss:-?} MB)"
else
    [ -n "$rss" ] && [ "$rss" -lt 200 ] || fail "peak RSS of a 2M-row transaction: ${rss:-?} MB (limit 200)"
fi

# A transaction of exactly ten batches (cut by the size limit right at its
# last change), then other WAL: the position still moves past it, so
# --until-caught-up ends and the slot is confirmed past the transaction.
qs "CREATE TABLE unpublished (i int); INSERT INTO orders SELECT g, now(), 1 FROM generate_series(3000000, 3099999) g"
qs "INSERT INTO unpublished SELECT generate_series(1, 1000)"
set +e
OUT=$(timeout 300 "$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub \
      --slot "$SLOT" --map id=legacy_id --until-caught-up --batch-rows 10000 2>&1)
rc=$?
set -e
assert_eq 0 "$rc" "--until-caught-up ends after a transaction cut at its last change (output: $OUT)"
assert_eq 2100012 "$(q "SELECT count(*) FROM orders_v7")" "its rows, once"
assert_eq "0/0" "$(q "SELECT txn_lsn FROM v7fill.stream WHERE slot = '$SLOT'")" "the stored position is past the transaction"
