# One slot, two tables (issue 19), one target stalled: a session holds items_v7 locked for 6 s
# while 20,000 source transactions arrive, so that table's queue of frames fills up.  The
# reader of the shared replication connection goes on sending the source its status (and
# answering keepalives) while it waits for room, so the walsender, here with
# wal_sender_timeout = 2s, never ends the connection: no reconnect, and once the lock goes both
# targets catch up exactly.  (Before, the reader waited for room without a word, the source ended
# the connection after 2 s and the stream reconnected.)  Then a column added and dropped again
# on the source while the stream was stopped (below).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db
locker=
spid=
trap '[ -z "$locker" ] || kill "$locker" 2>/dev/null; [ -z "$spid" ] || kill -9 "$spid" 2>/dev/null; drop_slots; rm -rf "$T_TMP"' EXIT
qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    CREATE TABLE items (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, qty int);
    CREATE PUBLICATION pub FOR TABLE orders, items"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL, created_at timestamptz NOT NULL, amount int)
     PARTITION BY RANGE (id);
   CREATE TABLE items_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL, created_at timestamptz NOT NULL, qty int)
     PARTITION BY RANGE (id)"
args=(stream --source "dbname=$SRC options='-c wal_sender_timeout=2s'" --publication pub --map id=legacy_id
      --slot "$SLOT" --from public.orders=orders_v7 --from public.items=items_v7 --group-rows 50 --batch-rows 200)
run_expect 0 "$V7FILL" "${args[@]}" --until-caught-up
"$V7FILL" "${args[@]}" >stream.log 2>&1 &
spid=$!
for _ in $(seq 1 100); do
    [ "$(psql -X -At -d postgres -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT' AND active")" = 1 ] && break
    sleep 0.1
done
hold_lock "$PGDATABASE" items_v7 "ACCESS EXCLUSIVE" 6
locker=$HOLDER
# 20,000 one-row transactions on items (more frames than a table's queue and its batch hold),
# 1,000 on orders.
qs "DO \$\$ BEGIN
      FOR i IN 1..20000 LOOP
        INSERT INTO items VALUES (i, now() - interval '1 minute', i % 5);
        IF i % 20 = 0 THEN INSERT INTO orders VALUES (i, now() - interval '1 minute', i); END IF;
        COMMIT;
      END LOOP;
    END \$\$"
wait "$locker" || true
locker=
for _ in $(seq 1 300); do
    [ "$(q "SELECT (SELECT count(*) FROM items_v7) || '|' || (SELECT count(*) FROM orders_v7)")" = "20000|1000" ] && break
    sleep 0.1
done
kill -TERM "$spid"
wait "$spid" || fail "the stream did not exit 0 on SIGTERM: $(tail -n 5 stream.log)"
spid=
grep -v "^ *$" stream.log | tail -n 4
assert_eq "20000|1000" "$(q "SELECT (SELECT count(*) FROM items_v7) || '|' || (SELECT count(*) FROM orders_v7)")" "both targets caught up"
assert_eq "$(qs "SELECT sum(id) || '|' || sum(qty) FROM items")" "$(q "SELECT sum(legacy_id) || '|' || sum(qty) FROM items_v7")" "the stalled target equals its source"
grep -q "reconnecting in" stream.log && fail "the stream reconnected while one target was stalled"
assert_contains "$(cat stream.log)" "reconnects=0" "no reconnect counted"
# A column added on the source and dropped again while the stream was stopped, a row written in
# between: the relation message of that row names a column the catalog no longer has.  The stream
# of several tables restarts for it as the stream of one does, and on the second restart with no
# progress passes over it (before, it restarted for it forever).
qs "ALTER TABLE orders ADD COLUMN extra int; INSERT INTO orders VALUES (900001, now() - interval '1 minute', 1, 5);
    ALTER TABLE orders DROP COLUMN extra; INSERT INTO orders VALUES (900002, now() - interval '1 minute', 2)"
run_expect 0 timeout 60 "$V7FILL" "${args[@]}" --until-caught-up
assert_eq "1|2" "$(q "SELECT string_agg(amount::text, '|' ORDER BY legacy_id) FROM orders_v7 WHERE legacy_id > 900000")" \
    "the rows written around the column's life are applied"
echo "ok t_stream_multi_stall"
