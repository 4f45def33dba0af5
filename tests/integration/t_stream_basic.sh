# v7fill stream end to end, source and target two databases of one cluster:
# the initial copy under the slot's snapshot, then inserts, updates (a TOASTed
# column left unchanged keeps its value; the id never changes), deletes, the
# --on-truncate modes, a restart that skips what was applied, the preflight
# errors, and a CSV dump imported first then streamed: each row once.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
SRC="${PGDATABASE}_src"
SLOT="s_${T_NAME}"
drop_slots() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 's_${T_NAME}%'" >/dev/null
}
drop_slots
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$SRC\"" >/dev/null
psql -X -q -d postgres -c "CREATE DATABASE \"$SRC\"" >/dev/null
trap 'drop_slots; rm -rf "$T_TMP"' EXIT
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC" -c "$1"; }

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL,
                         amount numeric(12,2), note text);
    ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL;
    INSERT INTO orders SELECT g, now() - (g || ' minutes')::interval, g * 1.5, 'n' || g
      FROM generate_series(1, 2000) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount numeric(12,2), note text)
   PARTITION BY RANGE (id)"

stream() {
    "$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub \
        --slot "$SLOT" --map id=legacy_id --until-caught-up "$@"
}
# Target rows as the source has them: legacy key, time, amount, note (md5).
digest_src() { qs "SELECT count(*), coalesce(sum(id),0), md5(coalesce(string_agg(id||'|'||created_at||'|'||coalesce(amount::text,'')||'|'||md5(coalesce(note,'')), ',' ORDER BY id),''))
                   FROM orders"; }
digest_dst() { q "SELECT count(*), coalesce(sum(legacy_id),0), md5(coalesce(string_agg(legacy_id||'|'||created_at||'|'||coalesce(amount::text,'')||'|'||md5(coalesce(note,'')), ',' ORDER BY legacy_id),''))
                  FROM orders_v7"; }

# ---- preflight errors name what to run
run_expect 3 "$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.orders \
    --publication nopub --slot "$SLOT" --map id=legacy_id --until-caught-up
assert_contains "$OUT" "CREATE PUBLICATION" "a missing publication says what to run"
qs "CREATE TABLE other (id int PRIMARY KEY)"
run_expect 3 "$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.other \
    --publication pub --slot "$SLOT" --until-caught-up
assert_contains "$OUT" "ALTER PUBLICATION" "a table outside the publication says what to run"
assert_eq 0 "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT'")" "no slot left by a refused start"

# ---- initial copy (--jobs 2), with a writer inserting meanwhile
( for i in $(seq 1 40); do
      qs "INSERT INTO orders SELECT g, now() - interval '1 hour', 1, 'w' FROM generate_series(100000 + $i * 10, 100000 + $i * 10 + 9) g" || exit 1
      sleep 0.05
  done ) &
writer=$!
# The copy on two writer connections (batches of 300: seven batches), the changes on one.
run_expect 0 stream --jobs 2 --batch-rows 300
echo "$OUT"
assert_contains "$OUT" "on 2 writer connections" "the copy ran on two writers"
assert_match "$OUT" "of elapsed, [0-9.]+s the ANALYZE and VACUUM after the initial copy" "the summary says what they took"
wait $writer
run_expect 0 stream
assert_eq "$(digest_src)" "$(digest_dst)" "after the copy and catch-up the target equals the source"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM orders_v7 GROUP BY 1 HAVING count(*) > 1) d")" "no row twice"
assert_eq 0 "$(q "SELECT count(*) FROM orders_v7 WHERE ('x' || lpad(substr(replace(id::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint
                                      <> floor(extract(epoch FROM created_at) * 1000)")" \
    "every id carries its row's time to the ms"
assert_eq "stream" "$(q "SELECT phase FROM v7fill.stream WHERE slot = '$SLOT'")" "the copy is done"
assert_eq t "$(q "SELECT count(*) > 0 FROM pg_stats WHERE tablename = 'orders_v7' AND inherited AND attname = 'legacy_id'")" \
    "the partitioned target analyzed after the initial copy (autovacuum never analyzes it)"
confirmed=$(q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
stored=$(q "SELECT end_lsn FROM v7fill.stream WHERE slot = '$SLOT'")
assert_eq t "$(q "SELECT '$confirmed'::pg_lsn <= '$stored'::pg_lsn")" "the slot never ahead of the stored position"

# ---- changes: inserts, updates (TOAST unchanged), deletes
qs "UPDATE orders SET note = repeat('x', 1048576) WHERE id = 7"
run_expect 0 stream
id7=$(q "SELECT id FROM orders_v7 WHERE legacy_id = 7")
qs "BEGIN;
    INSERT INTO orders VALUES (5000, now() - interval '2 days', 10, 'new');
    UPDATE orders SET amount = 99.99 WHERE id = 7;
    UPDATE orders SET amount = amount + 1 WHERE id BETWEEN 10 AND 19;
    DELETE FROM orders WHERE id BETWEEN 20 AND 29;
    COMMIT;
    UPDATE orders SET created_at = created_at - interval '1 day' WHERE id = 30;"
run_expect 0 stream
echo "$OUT"
assert_eq "$(digest_src)" "$(digest_dst)" "after inserts, updates and deletes the target equals the source"
assert_eq "$id7" "$(q "SELECT id FROM orders_v7 WHERE legacy_id = 7")" "an update keeps the id"
assert_eq 1048576 "$(q "SELECT length(note) FROM orders_v7 WHERE legacy_id = 7")" "the unchanged TOASTed value is kept"
assert_eq 99.99 "$(q "SELECT amount FROM orders_v7 WHERE legacy_id = 7")" "the sent column is updated"
assert_contains "$OUT" "time_changed=1" "an update moving the time column is counted"
assert_contains "$OUT" "deleted=10" "ten deletes"

# ---- restart: nothing applied twice
before=$(digest_dst)
run_expect 0 stream
assert_contains "$OUT" "inserted=0 updated=0 deleted=0" "a rerun with nothing new applies nothing"
assert_eq "$before" "$(digest_dst)" "unchanged target"

# ---- --on-delete ignore keeps rows (archives)
qs "DELETE FROM orders WHERE id = 31"
run_expect 0 stream --on-delete ignore
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 31")" "--on-delete ignore keeps the row"
assert_contains "$OUT" "deletes_ignored=1" "and counts it"
q "DELETE FROM orders_v7 WHERE legacy_id = 31"

# ---- a refused value is quarantined, the stream goes on
qs "INSERT INTO orders VALUES (6000, now() - interval '1 hour', 1, 'ok'), (6001, now() - interval '1 hour', 2, 'ok')"
q "ALTER TABLE orders_v7 ADD CONSTRAINT amount_small CHECK (amount <> 2)"
run_expect 0 stream
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id IN (6000, 6001)")" "the good row lands"
assert_eq 1 "$(q "SELECT count(*) FROM v7fill.stream_quarantine WHERE slot = '$SLOT' AND row->>'id' = '6001' AND sqlstate = '23514'")" \
    "the refused row is in the quarantine with its SQLSTATE and the row as JSON"
q "ALTER TABLE orders_v7 DROP CONSTRAINT amount_small"
q "DELETE FROM v7fill.stream_quarantine"
qs "DELETE FROM orders WHERE id = 6001"
run_expect 0 stream

# ---- truncate: stop (default), then apply
qs "TRUNCATE orders"
run_expect 3 stream
assert_contains "$OUT" "--on-truncate apply" "a TRUNCATE stops the stream and says how to go on"
assert_eq "$(qs "SELECT 0")" "$(qs "SELECT count(*) FROM orders")" "source empty"
run_expect 0 stream --on-truncate apply
assert_eq 0 "$(q "SELECT count(*) FROM orders_v7")" "--on-truncate apply empties the target"
assert_eq 0 "$(q "SELECT count(*) FROM orders_v7_source_ref")" "and its lookup"
qs "INSERT INTO orders VALUES (1, now() - interval '3 days', 1, 'again')"
run_expect 0 stream
assert_eq "$(digest_src)" "$(digest_dst)" "a row inserted after the truncate lands (its key again)"

# ---- --on-truncate ignore: counted, the target keeps its rows
qs "TRUNCATE orders"
run_expect 0 stream --on-truncate ignore
assert_contains "$OUT" "truncates_ignored=1" "an ignored TRUNCATE is counted"
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7")" "and the target keeps its rows"
q "DELETE FROM orders_v7; DELETE FROM orders_v7_source_ref"

# ---- a second table in the publication is passed over
qs "ALTER PUBLICATION pub ADD TABLE other; INSERT INTO other VALUES (1), (2)"
qs "INSERT INTO orders VALUES (2, now() - interval '1 day', 5, 'two')"
run_expect 0 stream
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7")" "only the streamed table's rows"

# ---- ALTER TABLE ADD COLUMN mid-stream: mapped when the target has it, else ignored with a warning
q "ALTER TABLE orders_v7 ADD COLUMN region text"
qs "BEGIN;
    INSERT INTO orders VALUES (3, now() - interval '1 day', 6, 'before');
    ALTER TABLE orders ADD COLUMN region text, ADD COLUMN internal int;
    INSERT INTO orders VALUES (4, now() - interval '1 day', 7, 'after', 'eu', 42);
    COMMIT;
    UPDATE orders SET region = 'us' WHERE id = 3;"
run_expect 0 stream
echo "$OUT"
assert_eq "eu" "$(q "SELECT region FROM orders_v7 WHERE legacy_id = 4")" "a column added on the source with a target column is mapped"
assert_eq "us" "$(q "SELECT region FROM orders_v7 WHERE legacy_id = 3")" "and updated"
assert_contains "$OUT" "\"internal\"" "a column the target lacks is named in a warning"
assert_eq "$(qs "SELECT count(*) FROM orders")" "$(q "SELECT count(*) FROM orders_v7")" "every row"

# ---- a column dropped while the stream runs stops it, naming the column
"$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub \
    --slot "$SLOT" --map id=legacy_id --group-ms 20 >dropped.log 2>&1 &
streamer=$!
qs "INSERT INTO orders VALUES (7, now(), 1, 'seen', 'eu', 1)"
# Drop the column only once the streamer runs and applied row 7 (its start checks the columns:
# a drop before that would stop it there, before row 7).
for _ in $(seq 1 1200); do
    [ "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 7")" = 1 ] && break
    kill -0 $streamer 2>/dev/null || fail "the stream exited before applying row 7: $(cat dropped.log)"
    sleep 0.05
done
if [ "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 7")" != 1 ]; then
    kill $streamer; fail "the stream did not apply row 7 within 60 s: $(cat dropped.log)"
fi
qs "ALTER TABLE orders DROP COLUMN note; INSERT INTO orders VALUES (5, now(), 1, 'x', 1)"
for _ in $(seq 1 100); do kill -0 $streamer 2>/dev/null || break; sleep 0.2; done
if kill -0 $streamer 2>/dev/null; then kill $streamer; fail "the stream did not stop at the dropped column"; fi
set +e; wait $streamer; rc=$?; set -e
assert_eq 3 "$rc" "a dropped column stops the stream (exit 3)"
assert_contains "$(cat dropped.log)" "\"note\"" "the error names the dropped column"
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 7")" "what came before it is applied"
q "ALTER TABLE orders_v7 DROP COLUMN note"
run_expect 0 stream
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 5")" "after the target follows, the stream goes on"

# ---- a column dropped, or its type changed, while the stream was stopped: the
# next start compares the columns it last ran with (v7fill.stream.columns)
# with the source's and stops, naming the column, until the target follows
assert_contains "$(q "SELECT columns::text FROM v7fill.stream WHERE slot = '$SLOT'")" '"name": "region"' "the columns are stored"
qs "ALTER TABLE orders DROP COLUMN region; INSERT INTO orders VALUES (8, now(), 1, 1)"
run_expect 3 stream
assert_contains "$OUT" 'column "region" of public.orders is gone on the source' "a column dropped while stopped is named"
assert_contains "$OUT" 'RENAME COLUMN "region"' "with what to do"
assert_eq 0 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 8")" "nothing after it is applied"
q "ALTER TABLE orders_v7 RENAME COLUMN region TO region_was"
run_expect 0 stream
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 8")" "after the target follows, the stream goes on"
assert_eq "eu" "$(q "SELECT region_was FROM orders_v7 WHERE legacy_id = 4")" "the renamed column keeps its values"
# (row 10 before the change, not applied yet: replayed after the target follows, its relation
# message still shows the old type; the stream went back to the stop for good before)
qs "INSERT INTO orders VALUES (10, now(), 10, 1)"
qs "ALTER TABLE orders ALTER COLUMN amount TYPE text; INSERT INTO orders VALUES (9, now(), 'n/a', 1)"
run_expect 3 stream
assert_contains "$OUT" 'column "amount" of public.orders changed its type on the source' "a type changed while stopped is named"
assert_contains "$OUT" 'TYPE text' "with what to do"
assert_eq 0 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 9")" "nothing after it is applied"
q "ALTER TABLE orders_v7 ALTER COLUMN amount TYPE text"
run_expect 0 stream
assert_eq "n/a" "$(q "SELECT amount FROM orders_v7 WHERE legacy_id = 9")" "after the target follows, the stream goes on"
assert_eq "10.00" "$(q "SELECT amount FROM orders_v7 WHERE legacy_id = 10")" "the row made before the type change too"

# ---- a slot someone else advanced: the stream refuses to skip silently
qs "INSERT INTO orders VALUES (6, now(), 1, 1)"
psql -X -q -At -d "$SRC" -c "SELECT pg_replication_slot_advance('$SLOT', pg_current_wal_lsn())" >/dev/null
run_expect 3 stream
assert_contains "$OUT" "past the position the target stored" "a slot ahead of the target is an error"
