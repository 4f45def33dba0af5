# v7fill stream applies updates and deletes set-wise (runs of one kind, distinct
# references: one UPDATE ... FROM a temp table per set of columns sent, one
# DELETE), with the semantics of row by row.  One source transaction (so one
# batch) mixes: a run of 500 updates with a value the target refuses in the
# middle (that row quarantined, the 499 others applied), an update then a delete
# of the same row, a delete then an insert of the same key, updates of rows the
# target lacks (inserted; one with an unchanged TOAST value: quarantined), a key
# change, a TOAST value left unchanged in a run, a time moved off its id (counted, the
# id kept), a run of deletes with one
# missing row.  The target then equals the source but for the refused rows, and
# equals it once they are fixed on the source.  Both lookup shapes: the hashed
# source reference and the typed key map (--key-map).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db

for shape in hashed map; do
echo "$(date +%T) --- $shape"
SLOT="s_${T_NAME}_$shape"
if [ $shape = map ]; then
    lookup=items_v7_id_map; key=legacy_id; extra=(--key-map id)
else
    lookup=items_v7_source_ref; extra=()
fi
qs "SET client_min_messages = warning; DROP PUBLICATION IF EXISTS pub; DROP TABLE IF EXISTS items;
    CREATE TABLE items (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, n integer,
                        note text);
    ALTER TABLE items ALTER COLUMN note SET STORAGE EXTERNAL;
    INSERT INTO items SELECT g, now() - (g || ' minutes')::interval, g, 'n' || g
      FROM generate_series(1, 1200) g;
    UPDATE items SET note = repeat('t', 1048576) WHERE id IN (7, 8);
    CREATE PUBLICATION pub FOR TABLE items;"
q "SET client_min_messages = warning; DROP TABLE IF EXISTS items_v7, items_v7_source_ref, items_v7_id_map;
   CREATE TABLE items_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                          created_at timestamptz NOT NULL, n integer CHECK (n >= 0), note text)
   PARTITION BY RANGE (id)"
stream() {
    "$V7FILL" stream items_v7 --source "dbname=$SRC" --from public.items --publication pub \
        --slot "$SLOT" --map id=legacy_id --until-caught-up "${extra[@]}" "$@"
}
digest_src() { qs "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||coalesce(n::text,'')||'|'||md5(coalesce(note,'')), ',' ORDER BY id))
                   FROM items WHERE id NOT IN ($1)"; }
digest_dst() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||coalesce(n::text,'')||'|'||md5(coalesce(note,'')), ',' ORDER BY legacy_id))
                  FROM items_v7 WHERE legacy_id NOT IN ($1)"; }
run_expect 0 stream
assert_eq "$(digest_src 0)" "$(digest_dst 0)" "$shape: after the copy the target equals the source"
ids() { q "SELECT md5(string_agg(legacy_id||'='||id, ',' ORDER BY legacy_id)) FROM items_v7
          WHERE legacy_id BETWEEN 1 AND 699 AND legacy_id NOT IN (8, 100, 101)"; }
ids_before=$(ids)

# Rows the target lacks: 100 (its lookup row left: stale), 101 (lookup row gone too),
# 8 (1 MB note that the update leaves unchanged: the tuple is incomplete), 800 (a delete).
q "WITH d AS (DELETE FROM items_v7 WHERE legacy_id IN (8, 100, 101, 800) RETURNING id, legacy_id)
   DELETE FROM $lookup WHERE id IN (SELECT id FROM d WHERE legacy_id = 101)"
qs "BEGIN;
    UPDATE items SET n = CASE WHEN id = 450 THEN -1 ELSE n + 1000 END WHERE id BETWEEN 200 AND 699;
    UPDATE items SET n = 77 WHERE id = 1000;
    DELETE FROM items WHERE id = 1000;
    DELETE FROM items WHERE id = 1001;
    INSERT INTO items VALUES (1001, now() - interval '3 hours', 5, 'again');
    UPDATE items SET n = n + 2000, created_at = created_at - CASE WHEN id = 5 THEN interval '1 day' ELSE interval '0' END
      WHERE id BETWEEN 1 AND 150;
    UPDATE items SET id = 5002 WHERE id = 1002;
    DELETE FROM items WHERE id BETWEEN 750 AND 850;
    COMMIT;"
run_expect 0 stream -vv
echo "$OUT" | grep -v "^\S* *\(DEBUG\|debug\)" | tail -3
updates=$(echo "$OUT" | grep -c "UPDATE \S*items_v7\S* AS t SET .* FROM pg_temp.v7fill_set" || true)
[ "$updates" -ge 2 ] || fail "$shape: updates applied set-wise (UPDATE ... FROM the temp table): $updates"
assert_contains "$OUT" "DELETE FROM \"public\".\"items_v7\" AS t USING unnest" "$shape: deletes applied set-wise, joined with their ids"
# 500 + 150 + 1 updates; of the 150, 8 quarantined, 100 and 101 inserted (missing);
# 450 quarantined; 1000 updated then deleted; 101 deletes (800 missing) + 1000 + 1001.
assert_contains "$OUT" "inserted=3 updated=648 deleted=102" "$shape: the counts"
assert_contains "$OUT" "missing=4" "$shape: three missing updates and a missing delete"
assert_contains "$OUT" "time_changed=1" "$shape: the update that moved the time column off its id's ms is counted"
assert_eq "2 | 8 -,450 23514" "$(q "SELECT count(*) || ' | ' || string_agg(row->>'id' || ' ' || coalesce(nullif(sqlstate, ''), '-'), ',' ORDER BY (row->>'id')::int) FROM v7fill.stream_quarantine WHERE slot = '$SLOT'")" \
    "$shape: the refused value and the incomplete missing row are quarantined, nothing else"
assert_eq "$(digest_src '8, 450')" "$(digest_dst '8, 450')" "$shape: the target equals the source but for the two refused rows"
assert_eq 450 "$(q "SELECT n FROM items_v7 WHERE legacy_id = 450")" "$shape: the refused row keeps its old value"
assert_eq 1048576 "$(q "SELECT length(note) FROM items_v7 WHERE legacy_id = 7")" "$shape: an unchanged TOAST value is kept in a set-wise run"
assert_eq "$ids_before" "$(ids)" "$shape: updates keep the ids"
assert_eq 0 "$(q "SELECT count(*) FROM items_v7 WHERE legacy_id = 1002")" "$shape: the key change moved the row"
assert_eq 1 "$(q "SELECT count(*) FROM $lookup l JOIN items_v7 t USING (id) WHERE t.legacy_id = 5002")" "$shape: and its lookup row"
assert_eq 0 "$(q "SELECT count(*) FROM $lookup l WHERE NOT EXISTS (SELECT FROM items_v7 t WHERE t.id = l.id)")" "$shape: no lookup row without its row"

# Fixed on the source, the two rows land: the target equals the source.
qs "UPDATE items SET n = 1, note = note || '' WHERE id IN (8, 450)"
run_expect 0 stream
assert_eq "$(digest_src 0)" "$(digest_dst 0)" "$shape: after the fix the target equals the source"
drop_slots
q "DELETE FROM v7fill.stream_quarantine"
done

# A target role that may not create temp tables: updates go row by row, with a warning,
# and still land (deletes stay set-wise).
echo "$(date +%T) --- no TEMP privilege"
NT=nt_${T_NAME}
DST="${PGDATABASE}_nt"
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$DST\"" 2>/dev/null
psql -X -q -d postgres -c "DROP ROLE IF EXISTS $NT" 2>/dev/null
trap 'drop_slots; psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$DST\"" 2>/dev/null; psql -X -q -d postgres -c "DROP ROLE IF EXISTS $NT" 2>/dev/null; rm -rf "$T_TMP"' EXIT
psql -X -q -d postgres -c "CREATE ROLE $NT LOGIN"
psql -X -q -d postgres -c "CREATE DATABASE \"$DST\" OWNER $NT"
psql -X -q -d "$DST" -c "REVOKE TEMP ON DATABASE \"$DST\" FROM PUBLIC, $NT"
psql -X -q -U "$NT" -d "$DST" -c "CREATE TABLE items_v7 (id uuid PRIMARY KEY, legacy_id bigint NOT NULL,
                                  created_at timestamptz NOT NULL, n integer, note text) PARTITION BY RANGE (id)"
SLOT="s_${T_NAME}_nt"
nt_stream() {
    "$V7FILL" -d "dbname=$DST user=$NT" stream items_v7 --source "dbname=$SRC" --from public.items \
        --publication pub --slot "$SLOT" --map id=legacy_id --until-caught-up "$@"
}
nt_digest() { psql -X -q -At -U "$NT" -d "$DST" -c "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||coalesce(n::text,'')||'|'||md5(coalesce(note,'')), ',' ORDER BY legacy_id)) FROM items_v7"; }
run_expect 0 nt_stream
qs "UPDATE items SET n = n + 1 WHERE id BETWEEN 1 AND 300; DELETE FROM items WHERE id BETWEEN 301 AND 400"
run_expect 0 nt_stream
assert_contains "$OUT" "could not create a temp table for set-wise updates" "no TEMP: the warning says why"
assert_contains "$OUT" "updated=300 deleted=100" "no TEMP: the changes counted"
assert_eq "$(digest_src 0)" "$(nt_digest)" "no TEMP: the target equals the source"
