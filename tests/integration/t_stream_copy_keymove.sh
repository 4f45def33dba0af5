# An initial copy killed after it committed row 5000, and redone under a fresh view after the
# source moved that row's key (5000 -> 100001): the redone copy writes 100001; the key change,
# replayed from the slot's start, then finds the new reference in the lookup already.  The row
# under the old one is a stale copy: deleted, the update applied to the new row.  Before, the
# lookup move failed on its primary key, the update was quarantined and row 5000 stayed (30,001
# rows for 30,000).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db
trap 'kill -9 ${pid:-} 2>/dev/null || true; drop_slots; rm -rf "$T_TMP"' EXIT

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    INSERT INTO orders SELECT g, now() - (g || ' minutes')::interval, g FROM generate_series(1, 30000) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id);"
hold_inserts orders_v7 20000
args=(stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub
      --slot "$SLOT" --map id=legacy_id --batch-rows 1000 --until-caught-up)

"$V7FILL" "${args[@]}" >run1.log 2>&1 &
pid=$!
wait_held "$pid" run1.log "the batch of row 20000"
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 5000")" "row 5000 copied by the first attempt"
kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=
q "DELETE FROM hold;
   SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'" >/dev/null
# between the slot's consistent point and the second copy's view: row 5000's key moves
qs "UPDATE orders SET id = 100001, amount = -1 WHERE id = 5000"

run_expect 0 "$V7FILL" "${args[@]}"
echo "$OUT"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.stream_quarantine")" "nothing quarantined"
assert_eq "-1" "$(q "SELECT amount FROM orders_v7 WHERE legacy_id = 100001")" "the moved row has the update's values"
assert_eq "30000|30000" "$(q "SELECT count(*), count(DISTINCT legacy_id) FROM orders_v7")" "one row per source row"
assert_eq 0 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 5000")" "the old key is gone (the source has no row 5000)"
