# v7fill stream --jobs N applies the changes on N target connections: batches
# commit in source order, a batch that touches a row a batch in flight touches
# waits for it (inserts then updates and deletes of the same rows in the next
# transactions, primary keys moved, rows deleted and inserted again), the
# pieces of one large source transaction stay in one target transaction, and a
# truncate waits for every batch before it.  The target equals the source after
# each catch-up, no update or delete misses its row, and the stored position
# and the slot agree.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
    INSERT INTO orders SELECT g, now() - (g || ' minutes')::interval, g, 'n' FROM generate_series(1, 3000) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int, note text)
   PARTITION BY RANGE (id)"
digest_src() { qs "SELECT count(*), md5(coalesce(string_agg(id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY id), '')) FROM orders"; }
digest_dst() { q "SELECT count(*), md5(coalesce(string_agg(legacy_id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY legacy_id), '')) FROM orders_v7"; }
# Groups of one or two source transactions: many small batches, several in
# flight at once on the writer connections.
stream() {
    "$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub \
        --slot "$SLOT" --map id=legacy_id --group-rows 8 --group-ms 5 --until-caught-up "$@"
}
slot_agrees() {
    local confirmed stored
    confirmed=$(q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
    stored=$(q "SELECT end_lsn FROM v7fill.stream WHERE slot = '$SLOT'")
    assert_eq t "$(q "SELECT '$confirmed'::pg_lsn <= '$stored'::pg_lsn")" "$1: the slot is not ahead of the stored position"
}

run_expect 0 stream --jobs 2
assert_eq "$(digest_src)" "$(digest_dst)" "after the copy the target equals the source"

# ---- a backlog of small transactions, each touching the rows of the ones just
# before it: without the wait, an update or delete would run beside the batch
# that inserts its row and miss it.
qs "DO \$\$ BEGIN
      FOR i IN 1..400 LOOP
        INSERT INTO orders VALUES (100000 + i, now() - interval '1 hour', i, 'new');
        IF i > 1 THEN
          UPDATE orders SET amount = amount + 1000, note = note || 'u' WHERE id = 100000 + i - 1;
        END IF;
        IF i > 2 THEN
          DELETE FROM orders WHERE id = 100000 + i - 2;
          INSERT INTO orders VALUES (100000 + i - 2, now() - interval '2 hours', -i, 'again');
        END IF;
        UPDATE orders SET id = 200000 + i WHERE id = i;
        UPDATE orders SET amount = amount + 1 WHERE id = 200000 + i;
        COMMIT;
      END LOOP;
    END \$\$"
run_expect 0 stream --jobs 2
echo "$OUT"
assert_contains "$OUT" "changes applied on 2 writer connections" "the changes ran on two writers"
assert_eq "$(digest_src)" "$(digest_dst)" "after the backlog on two writers the target equals the source"
assert_contains "$OUT" "missing=0" "no update or delete missed its row"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM orders_v7 GROUP BY 1 HAVING count(*) > 1) d")" "no row twice"
slot_agrees "small transactions"

# ---- a large transaction between small ones (written in pieces of 500 rows,
# one target transaction), then a truncate and rows after it, on three writers.
qs "DO \$\$ BEGIN
      FOR i IN 1..30 LOOP
        UPDATE orders SET amount = amount + 1 WHERE id = 200000 + i;
        COMMIT;
      END LOOP;
    END \$\$"
qs "BEGIN;
    INSERT INTO orders SELECT g, now() - interval '3 hours', g, 'big' FROM generate_series(300001, 306000) g;
    UPDATE orders SET note = 'big-u' WHERE id BETWEEN 300001 AND 300100;
    DELETE FROM orders WHERE id BETWEEN 200001 AND 200010;
    COMMIT;"
qs "UPDATE orders SET amount = 0 WHERE id BETWEEN 300001 AND 300050"
run_expect 0 stream --jobs 3 --batch-rows 500
echo "$OUT"
assert_eq "$(digest_src)" "$(digest_dst)" "after a large transaction in pieces the target equals the source"
assert_contains "$OUT" "missing=0" "the large transaction's updates found their rows"
slot_agrees "large transaction"

# ---- a large transaction whose last piece is slow to write (a trigger waits 3 s on its last
# row), then a delete and an update of rows its first piece wrote: they wait for its commit
# instead of going beside it on another writer, where those rows are not visible yet (missed
# before: the deleted row stayed, the update was lost, counted missing).
q "CREATE FUNCTION slow_last() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN IF NEW.note = 'slow' THEN PERFORM pg_sleep(3); END IF; RETURN NEW; END \$\$;
   CREATE TRIGGER slow_last BEFORE INSERT ON orders_v7 FOR EACH ROW EXECUTE FUNCTION slow_last()"
qs "BEGIN;
    INSERT INTO orders SELECT g, now() - interval '3 hours', g, 'big2' FROM generate_series(310001, 312000) g;
    INSERT INTO orders VALUES (319999, now() - interval '3 hours', 0, 'slow');
    COMMIT;"
qs "DELETE FROM orders WHERE id = 310001; UPDATE orders SET amount = -1 WHERE id = 310002"
run_expect 0 stream --jobs 2 --batch-rows 500
echo "$OUT"
q "DROP TRIGGER slow_last ON orders_v7"
assert_eq "0|-1" "$(q "SELECT (SELECT count(*) FROM orders_v7 WHERE legacy_id = 310001),
                              (SELECT amount FROM orders_v7 WHERE legacy_id = 310002)")" \
    "the delete and the update after the large transaction found its rows"
assert_contains "$OUT" "missing=0" "no change after the large transaction missed its row"
assert_eq "$(digest_src)" "$(digest_dst)" "after a slow large transaction the target equals the source"
slot_agrees "slow large transaction"

# ---- a large transaction whose third piece is rolled back by a deadlock (a trigger raises
# 40P01 the first time each): its target transaction is lost, and the stream applies it again whole from the
# stored position instead of stopping (one writer and two).
q "CREATE SEQUENCE boom_once;
   CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN
       IF NEW.note = 'boom' AND nextval('boom_once') % 2 = 1 THEN
           RAISE EXCEPTION 'deadlock detected (test)' USING ERRCODE = '40P01';
       END IF;
       RETURN NEW;
   END \$\$;
   CREATE TRIGGER boom BEFORE INSERT ON orders_v7 FOR EACH ROW EXECUTE FUNCTION boom()"
for jobs in 1 2; do
    qs "BEGIN;
        INSERT INTO orders SELECT g, now() - interval '3 hours', g, 'big3' FROM generate_series(320001 + $jobs * 10000, 321200 + $jobs * 10000) g;
        INSERT INTO orders VALUES (329000 + $jobs, now() - interval '3 hours', 0, 'boom');
        INSERT INTO orders SELECT g, now() - interval '3 hours', g, 'big3' FROM generate_series(321201 + $jobs * 10000, 322000 + $jobs * 10000) g;
        COMMIT;"
    run_expect 0 stream --jobs "$jobs" --batch-rows 500
    echo "$OUT"
    assert_contains "$OUT" "applying it again from the stored position (attempt 1 of 5)" \
        "--jobs $jobs: the rolled-back large transaction is applied again"
    assert_eq "$(digest_src)" "$(digest_dst)" "--jobs $jobs: after the deadlock the target equals the source"
    assert_contains "$OUT" "duplicates=0" "--jobs $jobs: nothing of the lost target transaction was there"
    slot_agrees "deadlock in a large transaction ($jobs)"
done
q "DROP TRIGGER boom ON orders_v7"

qs "DO \$\$ BEGIN
      FOR i IN 1..50 LOOP
        UPDATE orders SET amount = amount + 1 WHERE id = 300000 + i;
        COMMIT;
      END LOOP;
    END \$\$"
qs "TRUNCATE orders;
    INSERT INTO orders SELECT g, now() - interval '4 hours', g, 'after' FROM generate_series(1, 200) g;
    UPDATE orders SET amount = -1 WHERE id <= 10;"
run_expect 0 stream --jobs 2 --on-truncate apply
echo "$OUT"
assert_eq "$(digest_src)" "$(digest_dst)" "after a truncate between batches the target equals the source"
assert_eq 200 "$(q "SELECT count(*) FROM orders_v7")" "only the rows written after the truncate"
slot_agrees "truncate"

# ---- rerun: nothing applied twice
before=$(digest_dst)
run_expect 0 stream --jobs 2
assert_contains "$OUT" "inserted=0 updated=0 deleted=0" "a rerun applies nothing"
assert_eq "$before" "$(digest_dst)" "unchanged target"
drop_slots
