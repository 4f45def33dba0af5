# v7fill stream applies a batch of interleaved inserts, updates and deletes in
# waves (a row's wave: one after the last earlier row with its reference), each
# wave set-wise: deletes, then updates, then inserts.  One source transaction
# (one batch) interleaves, row after row, inserts of new rows, updates (two of
# rows whose 1 MB TOAST value stays unchanged), deletes, and updates of rows
# inserted a moment before; then a row inserted, updated, deleted and inserted
# again; a primary key change then an update under the new key; a delete that
# frees a value of another unique column which an insert then takes, and an
# update that frees one.  The target equals the source, the counts are the
# source's, the updates and deletes went set-wise, and no wave had to be
# applied again in reading order (it would if an insert came before the
# delete or update that frees its unique value).  A second transaction of the
# same shape with one value the target refuses: that row quarantined alone,
# the rest applied (the waves rolled back and applied again in reading order).
# Both lookup shapes: the hashed source reference and the typed key map.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db

T0="timestamptz '2026-01-15 12:00:00+00'"
for shape in hashed map; do
echo "$(date +%T) --- $shape"
SLOT="s_${T_NAME}_$shape"
if [ $shape = map ]; then
    lookup=items_v7_id_map; extra=(--key-map id)
else
    lookup=items_v7_source_ref; extra=()
fi
qs "SET client_min_messages = warning; DROP PUBLICATION IF EXISTS pub; DROP TABLE IF EXISTS items;
    CREATE TABLE items (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, n integer,
                        code text UNIQUE, note text);
    ALTER TABLE items ALTER COLUMN note SET STORAGE EXTERNAL;
    INSERT INTO items SELECT g, $T0 + g * interval '1 second', g, 'c' || g, 'n' || g
      FROM generate_series(1, 1000) g;
    UPDATE items SET note = repeat('t', 1048576) WHERE id IN (7, 8);
    CREATE PUBLICATION pub FOR TABLE items;"
q "SET client_min_messages = warning; DROP TABLE IF EXISTS items_v7, items_v7_source_ref, items_v7_id_map;
   CREATE TABLE items_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                          created_at timestamptz NOT NULL, n integer CHECK (n >= 0), code text,
                          note text)
   PARTITION BY RANGE (id)"
stream() {
    "$V7FILL" stream items_v7 --source "dbname=$SRC" --from public.items --publication pub \
        --slot "$SLOT" --map id=legacy_id --until-caught-up "${extra[@]}" "$@"
}
digest_src() { qs "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||coalesce(n::text,'')||'|'||code||'|'||md5(coalesce(note,'')), ',' ORDER BY id))
                   FROM items WHERE id NOT IN ($1)"; }
digest_dst() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||coalesce(n::text,'')||'|'||code||'|'||md5(coalesce(note,'')), ',' ORDER BY legacy_id))
                  FROM items_v7 WHERE legacy_id NOT IN ($1)"; }
run_expect 0 stream
assert_eq "$(digest_src 0)" "$(digest_dst 0)" "$shape: after the copy the target equals the source"
# The other unique column, on the target too (a partitioned table takes it per partition:
# every row of this test lies in one window).
q "DO \$\$ DECLARE p regclass; BEGIN
     FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'items_v7'::regclass LOOP
       EXECUTE format('CREATE UNIQUE INDEX ON %s (code)', p);
     END LOOP; END \$\$"
assert_eq 1 "$(q "SELECT count(DISTINCT tableoid) FROM items_v7")" "$shape: the rows lie in one partition"

qs "BEGIN;
    DO \$\$ BEGIN
      FOR i IN 1..200 LOOP
        INSERT INTO items VALUES (10000 + i, $T0 + (2000 + i) * interval '1 second', i, 'new' || i, 'fresh' || i);
        UPDATE items SET n = n + 1000 WHERE id = i;
        DELETE FROM items WHERE id = 300 + i;
        IF i % 4 = 0 THEN UPDATE items SET note = 'u' || i WHERE id = 10000 + i - 1; END IF;
      END LOOP;
    END \$\$;
    INSERT INTO items VALUES (20000, $T0 + interval '3000 s', 1, 'k20000', 'first');
    UPDATE items SET n = 2 WHERE id = 20000;
    DELETE FROM items WHERE id = 20000;
    INSERT INTO items VALUES (20000, $T0 + interval '3000 s', 3, 'k20000', 'second');
    UPDATE items SET id = 30001 WHERE id = 900;
    UPDATE items SET n = 4 WHERE id = 30001;
    DELETE FROM items WHERE id = 950;
    INSERT INTO items VALUES (40000, $T0 + interval '3001 s', 5, 'c950', 'took c950');
    UPDATE items SET code = 'x951' WHERE id = 951;
    INSERT INTO items VALUES (40001, $T0 + interval '3002 s', 6, 'c951', 'took c951');
    COMMIT;"
run_expect 0 stream -vv
echo "$OUT" | grep -v "^\S* *\(DEBUG\|debug\)" | tail -2
assert_eq "$(digest_src 0)" "$(digest_dst 0)" "$shape: the target equals the source (every column)"
# 200 + 20000 twice + 40000, 40001; 200 + 50 + 20000 + 900 (key change) + 30001 + 951;
# 200 + 20000 + 950.
assert_contains "$OUT" "inserted=204 updated=254 deleted=202" "$shape: the counts"
assert_contains "$OUT" "missing=0" "$shape: nothing missing"
count() { echo "$OUT" | grep -c "$1" || true; }
assert_eq 0 "$(count 'applying them in reading order')" "$shape: no wave applied again in reading order"
[ "$(count 'UPDATE \S*items_v7\S* AS t SET .* FROM pg_temp.v7fill_set')" -ge 1 ] || fail "$shape: interleaved updates applied set-wise"
[ "$(count 'DELETE FROM "public"."items_v7" AS t USING unnest')" -ge 1 ] || fail "$shape: interleaved deletes applied set-wise"
assert_eq "1048576 1048576" "$(q "SELECT string_agg(length(note)::text, ' ' ORDER BY legacy_id) FROM items_v7 WHERE legacy_id IN (7, 8)")" \
    "$shape: unchanged TOAST values kept"
assert_eq "3 second" "$(q "SELECT n || ' ' || note FROM items_v7 WHERE legacy_id = 20000")" "$shape: inserted, updated, deleted, inserted again"
assert_eq 1 "$(q "SELECT count(*) FROM $lookup l JOIN items_v7 t USING (id) WHERE t.legacy_id = 30001")" "$shape: the key change moved the lookup row"
assert_eq 0 "$(q "SELECT count(*) FROM $lookup l WHERE NOT EXISTS (SELECT FROM items_v7 t WHERE t.id = l.id)")" "$shape: no lookup row without its row"
assert_eq "$(qs "SELECT count(*) FROM items")" "$(q "SELECT count(*) FROM $lookup")" "$shape: a lookup row per row"

# One refused value among interleaved operations: that row alone is quarantined.
qs "DO \$\$ BEGIN
      FOR i IN 1..100 LOOP
        UPDATE items SET n = CASE WHEN i = 50 THEN -1 ELSE n + 1 END WHERE id = 600 + i;
        INSERT INTO items VALUES (50000 + i, $T0 + (4000 + i) * interval '1 second', i, 'w' || i, 'w');
        DELETE FROM items WHERE id = 700 + i;
      END LOOP;
    END \$\$"
run_expect 0 stream -vv
assert_contains "$OUT" "inserted=100 updated=99 deleted=100" "$shape: refused row: the counts"
assert_eq 1 "$(count 'applying them in reading order')" "$shape: the waves applied again in reading order"
assert_eq "650 23514" "$(q "SELECT string_agg(row->>'id' || ' ' || sqlstate, ',') FROM v7fill.stream_quarantine WHERE slot = '$SLOT'")" \
    "$shape: the refused value is quarantined, nothing else"
assert_eq "$(digest_src 650)" "$(digest_dst 650)" "$shape: the target equals the source but for the refused row"
qs "UPDATE items SET n = 1 WHERE id = 650"
run_expect 0 stream
assert_eq "$(digest_src 0)" "$(digest_dst 0)" "$shape: after the fix the target equals the source"
drop_slots
q "DELETE FROM v7fill.stream_quarantine"
done
