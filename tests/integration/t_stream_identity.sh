# The replica identity decides what a stream's updates and deletes carry.  REPLICA IDENTITY
# FULL sends the whole old row: an update that changes the primary key is followed to the
# row (its id kept, the lookup moved; before, the row was not found and a second one was
# inserted), with the default reference, with --key-map, and with a --source-ref over a column
# outside the key.  With the default identity, a --source-ref over a column outside it is
# refused up front (its deletes, and the updates that change it, would not find their rows).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db

qs "CREATE TABLE full_pk (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    ALTER TABLE full_pk REPLICA IDENTITY FULL;
    INSERT INTO full_pk SELECT g, now() - (g || ' minutes')::interval, g FROM generate_series(1, 10) g;
    CREATE TABLE full_code (id bigint PRIMARY KEY, code text NOT NULL UNIQUE, created_at timestamptz NOT NULL);
    ALTER TABLE full_code REPLICA IDENTITY FULL;
    INSERT INTO full_code SELECT g, 'c' || g, now() - (g || ' minutes')::interval FROM generate_series(1, 10) g;
    CREATE TABLE keyed_code (id bigint PRIMARY KEY, code text NOT NULL UNIQUE, created_at timestamptz NOT NULL);
    CREATE PUBLICATION pub FOR TABLE full_pk, full_code, keyed_code;"
for t in full_pk full_pk_map; do
    q "CREATE TABLE $t (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                       created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id)"
done
for t in full_code keyed_code; do
    q "CREATE TABLE $t (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL, code text NOT NULL,
                       created_at timestamptz NOT NULL) PARTITION BY RANGE (id)"
done
stream() {
    local target=$1 from=$2 slot=$3
    shift 3
    "$V7FILL" stream "$target" --source "dbname=$SRC" --from "$from" --publication pub \
        --slot "$slot" --map id=legacy_id --until-caught-up "$@"
}
keys() { q "SELECT string_agg(legacy_id || ':' || $2, ',' ORDER BY legacy_id) FROM $1"; }

# ---- a FULL table, the default reference and --key-map
run_expect 0 stream full_pk public.full_pk "${SLOT}_a"
run_expect 0 stream full_pk_map public.full_pk "${SLOT}_b" --key-map id
id1=$(q "SELECT id FROM full_pk WHERE legacy_id = 1")
idm1=$(q "SELECT id FROM full_pk_map WHERE legacy_id = 1")
qs "UPDATE full_pk SET id = 1001 WHERE id = 1;
    UPDATE full_pk SET amount = 99 WHERE id = 2;
    DELETE FROM full_pk WHERE id = 3;
    UPDATE full_pk SET id = 1004, amount = -4 WHERE id = 4"
want=$(qs "SELECT string_agg(id || ':' || amount, ',' ORDER BY id) FROM full_pk")
run_expect 0 stream full_pk public.full_pk "${SLOT}_a"
echo "$OUT"
assert_eq "$want" "$(keys full_pk amount)" "FULL: the target equals the source after key changes"
assert_contains "$OUT" "missing=0" "FULL: every update and delete found its row"
assert_eq "$id1" "$(q "SELECT id FROM full_pk WHERE legacy_id = 1001")" "FULL: the moved row keeps its id"
run_expect 0 stream full_pk public.full_pk "${SLOT}_a"
assert_contains "$OUT" "inserted=0 updated=0 deleted=0" "FULL: a rerun applies nothing"
run_expect 0 stream full_pk_map public.full_pk "${SLOT}_b" --key-map id
assert_eq "$want" "$(keys full_pk_map amount)" "FULL, --key-map: the target equals the source"
assert_contains "$OUT" "missing=0" "FULL, --key-map: every update and delete found its row"
assert_eq "$idm1" "$(q "SELECT id FROM full_pk_map_id_map WHERE legacy_id = 1001")" \
    "FULL, --key-map: the map row moved with the key"
assert_eq 0 "$(q "SELECT count(*) FROM full_pk_map_id_map WHERE legacy_id IN (1, 3, 4)")" \
    "FULL, --key-map: no map row for the old keys"

# ---- a FULL table, a reference over a column outside the key
ref=(--source-ref 'public.full_code:{code}')
run_expect 0 stream full_code public.full_code "${SLOT}_c" "${ref[@]}"
qs "UPDATE full_code SET code = 'x2' WHERE id = 2; DELETE FROM full_code WHERE id = 1"
run_expect 0 stream full_code public.full_code "${SLOT}_c" "${ref[@]}"
echo "$OUT"
assert_eq "$(qs "SELECT string_agg(id || ':' || code, ',' ORDER BY id) FROM full_code")" "$(keys full_code code)" \
    "FULL, --source-ref {code}: the target equals the source"
assert_contains "$OUT" "missing=0" "FULL, --source-ref {code}: the update and the delete found their rows"

# ---- the default identity (the primary key): a reference over another column is refused
run_expect 3 stream keyed_code public.keyed_code "${SLOT}_d" --source-ref 'public.keyed_code:{code}'
assert_contains "$OUT" "column code is not in the replica identity of public.keyed_code" "the column is named"
assert_contains "$OUT" "ALTER TABLE public.keyed_code REPLICA IDENTITY FULL" "and what to run"
assert_eq 0 "$(qs "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '${SLOT}_d'")" \
    "refused before the slot is made"
run_expect 0 stream keyed_code public.keyed_code "${SLOT}_d" --source-ref 'public.keyed_code:{id}'
for s in a b c d; do qs "SELECT pg_drop_replication_slot('${SLOT}_$s')" >/dev/null; done
