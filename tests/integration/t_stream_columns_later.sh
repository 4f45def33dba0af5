# A column dropped on the source while the stream was stopped, with changes made before the
# drop not applied yet: once the target drops it too, the replayed relation messages still
# name it, and the stream passes over it there (restarted twice without progress).  That only
# holds for the changes made before that restart: a column added later, in the same process,
# on both sides, is streamed (its values were dropped for good before, with a warning that it
# was "not in its catalog any more").
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db
trap 'kill ${pid:-} 2>/dev/null || true; drop_slots; rm -rf "$T_TMP"' EXIT
qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
    INSERT INTO orders SELECT g, now(), g, 'n' FROM generate_series(1, 10) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int, note text) PARTITION BY RANGE (id)"
args=(stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub --slot "$SLOT" --map id=legacy_id)
run_expect 0 "$V7FILL" "${args[@]}" --until-caught-up
# while stopped: a row, the drop, a row
qs "INSERT INTO orders VALUES (11, now(), 11, 'n')"
qs "ALTER TABLE orders DROP COLUMN note; INSERT INTO orders VALUES (12, now(), 12)"
run_expect 3 "$V7FILL" "${args[@]}" --until-caught-up
assert_contains "$OUT" 'column "note" of public.orders is gone on the source' "the drop is named"
q "ALTER TABLE orders_v7 DROP COLUMN note"
"$V7FILL" "${args[@]}" >run.log 2>&1 &
pid=$!
poll_until "SELECT count(*) = 12 FROM orders_v7" "rows 11 and 12" 30
assert_contains "$(cat run.log)" 'column "note" of public.orders on the source is not in its catalog any more' \
    "the dropped column is passed over in the changes made before the drop"
# later, in the same process: a new column on both sides, an insert and an update using it
q "ALTER TABLE orders_v7 ADD COLUMN region text"
qs "ALTER TABLE orders ADD COLUMN region text; INSERT INTO orders VALUES (13, now(), 13, 'eu')"
qs "UPDATE orders SET region = 'us' WHERE id = 1"
poll_until "SELECT count(*) = 1 FROM orders_v7 WHERE legacy_id = 13" "row 13" 30
sleep 1  # the update of row 1, committed after row 13
kill -TERM "$pid"
wait "$pid" || fail "the stream failed: $(cat run.log)"
pid=
assert_eq "1|us,13|eu" \
    "$(q "SELECT string_agg(legacy_id || '|' || coalesce(region, 'NULL'), ',' ORDER BY legacy_id) FROM orders_v7 WHERE legacy_id IN (1, 13)")" \
    "the column added later is streamed"
assert_contains "$(cat run.log)" 'column "region" was added to public.orders on the source' "the new column is read anew"
