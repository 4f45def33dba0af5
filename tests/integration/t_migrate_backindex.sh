# Switching back, expand-mode children: the rows the application wrote after the switch with
# only <fk>_uuid get their <fk> from the map, read through the partial index <child>_<fk>_unset
# (rows whose <fk> is NULL and <fk>_uuid is not) that the migration's fill builds.  Before, the
# reads looked for <fk> IS NULL alone, which also met every row without a parent: on a child
# with many NULL keys that was all of them, under the switch back's lock too in one database.
# One database, then two; each child has 6,000 rows without a parent beside 2,000 with one.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
cleanup() {
    for db in "$PGDATABASE" "$SRC"; do
        psql -X -q -At -d "$db" -c "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots
            WHERE database = current_database() AND NOT active" >/dev/null 2>&1 || true
    done
}
trap 'cleanup; rm -rf "$T_TMP"' EXIT
# uuid7 TIME_SQL: a UUIDv7 of that time, in SQL (the new table's windows route it)
uuid7() { echo "(lpad(to_hex((extract(epoch FROM $1) * 1000)::bigint), 12, '0') || '7' ||
                 left(md5(random()::text), 3) || '8' || left(md5(random()::text), 15))::uuid"; }
schema_sql="CREATE TABLE bo (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    INSERT INTO bo (created_at, note) SELECT timestamptz '2024-01-01' + g * interval '1 hour', 'p'
      FROM generate_series(1, 500) g;
    CREATE TABLE bi (id bigserial PRIMARY KEY, order_id bigint REFERENCES bo (id), qty int);
    INSERT INTO bi (order_id, qty) SELECT g % 500 + 1, g FROM generate_series(1, 2000) g;
    INSERT INTO bi (order_id, qty) SELECT NULL, 0 FROM generate_series(1, 6000) g"
# scans DBFN [ABOVE]: idx_scan of bi_order_id_unset (DBFN: q or qs), once over ABOVE (the
# statistics come in within a second or so; 4 s at most)
scans() {
    local i v
    for i in $(seq 1 40); do
        v=$("$1" "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = 'bi_order_id_unset'")
        [ "$v" -gt "${2:--1}" ] && break
        sleep 0.1
    done
    echo "$v"
}
# check_index DBFN WHERE: the index is there, valid, on the rows switching back gives a key
check_index() {
    assert_eq "true|CREATE INDEX bi_order_id_unset ON public.bi USING btree (order_id_uuid) WHERE ((order_id IS NULL) AND (order_id_uuid IS NOT NULL))" \
        "$("$1" "SELECT i.indisvalid || '|' || pg_get_indexdef(i.indexrelid) FROM pg_index i
                  WHERE i.indexrelid = 'bi_order_id_unset'::regclass")" "the fill built ${2}'s index of the rows switching back gives a key"
}

# ---- one database ----------------------------------------------------------------------------
q "$schema_sql" >/dev/null
run_expect 0 "$V7FILL" migrate --from public.bo --key id --time-column created_at --into bo_v7 \
    --child 'public.bi(order_id)'
check_index q "one database"
run_expect 0 "$V7FILL" migrate --into bo_v7 --switch
# the application after the switch: 40 new parents, an item each by order_id_uuid alone (the
# legacy table does not have the parents yet: order_id stays NULL until switching back)
q "WITH p AS (INSERT INTO bo (id, created_at, note)
                SELECT $(uuid7 t), t, 'new' FROM (SELECT timestamptz '2024-01-10' + g * interval '1 minute' AS t
                                                   FROM generate_series(1, 40) g) s RETURNING id)
   INSERT INTO bi (order_id_uuid, qty) SELECT id, -1 FROM p" >/dev/null
assert_eq "40" "$(q "SELECT count(*) FROM bi WHERE qty = -1 AND order_id IS NULL")" "the new items have no legacy key yet"
q "ANALYZE bi" >/dev/null
run_expect 0 "$V7FILL" migrate --into bo_v7 --reverse
before=$(scans q)
run_expect 0 "$V7FILL" migrate --into bo_v7 --switch
assert_contains "$OUT" "switched back" "switched back"
assert_eq "40" "$(q "SELECT count(*) FROM bi i JOIN bo_v7_id_map m ON m.id = i.order_id_uuid
                     WHERE i.qty = -1 AND i.order_id = m.legacy_id")" "the 40 items got their parents' legacy keys"
assert_eq "6000" "$(q "SELECT count(*) FROM bi WHERE order_id IS NULL AND order_id_uuid IS NULL")" \
    "the rows without a parent are as they were"
[ "$(scans q "$before")" -gt "$before" ] || fail "switching back read the rows through bi_order_id_unset"
cleanup

# ---- two databases: the children on the source, the map on the target ------------------------
source_db_fresh
qs "$schema_sql" >/dev/null
run_expect 0 "$V7FILL" migrate --source "dbname=$SRC" --from public.bo --key id --time-column created_at \
    --into bo_2db --child 'public.bi(order_id)'
check_index qs "two databases: the source"
run_expect 0 "$V7FILL" migrate --into bo_2db --switch
q "INSERT INTO bo_2db (id, created_at, note)
     SELECT $(uuid7 t), t, 'new' FROM (SELECT timestamptz '2024-01-10' + g * interval '1 minute' AS t
                                        FROM generate_series(1, 40) g) s" >/dev/null
qs "INSERT INTO bi (order_id_uuid, qty) VALUES $(q "SELECT string_agg(format('(%L, -1)', id), ', ') FROM bo_2db WHERE note = 'new'")" >/dev/null
qs "ANALYZE bi" >/dev/null
run_expect 0 "$V7FILL" migrate --into bo_2db --reverse
before=$(scans qs)
run_expect 0 "$V7FILL" migrate --into bo_2db --switch
assert_contains "$OUT" "switched back" "two databases: switched back"
assert_eq "$(q "SELECT string_agg(m.legacy_id::text, ',' ORDER BY m.legacy_id) FROM bo_2db_id_map m JOIN bo_2db b ON b.id = m.id WHERE b.note = 'new'")" \
    "$(qs "SELECT string_agg(order_id::text, ',' ORDER BY order_id) FROM bi WHERE qty = -1")" \
    "two databases: the 40 items got their parents' legacy keys"
assert_eq "6000" "$(qs "SELECT count(*) FROM bi WHERE order_id IS NULL AND order_id_uuid IS NULL")" \
    "two databases: the rows without a parent are as they were"
[ "$(scans qs "$before")" -gt "$before" ] || fail "two databases: switching back read the rows through bi_order_id_unset"
