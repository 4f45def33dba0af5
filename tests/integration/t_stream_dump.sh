# History from dumps, then the live stream: a CSV dump of the source table
# imported with the template the stream uses by default, then the table
# streamed (copy + changes): every row once, the dumped ones duplicates.
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
trap 'drop_slots; rm -rf "$T_TMP"' EXIT
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC" -c "$1"; }

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    INSERT INTO orders SELECT g, now() - (g || ' hours')::interval, g FROM generate_series(1, 3000) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id)"
psql -X -q -d "$SRC" -c "\\copy (SELECT * FROM orders WHERE id <= 2000 ORDER BY id) TO 'dump.csv' WITH (FORMAT csv, HEADER)"
run_expect 0 "$V7FILL" import orders_v7 dump.csv --source-ref 'public.orders:{id}' --map id=legacy_id --no-progress
assert_eq 2000 "$(q "SELECT count(*) FROM orders_v7")" "the dump imported"
qs "INSERT INTO orders SELECT g, now() - interval '1 minute', g FROM generate_series(3001, 3100) g"
run_expect 0 "$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub \
    --slot "$SLOT" --map id=legacy_id --until-caught-up
echo "$OUT"
assert_contains "$OUT" "inserted=1100" "the copy inserts only what the dump did not have"
assert_contains "$OUT" "duplicates=2000" "the dumped rows are duplicates to the stream"
qs "INSERT INTO orders VALUES (5000, now(), 1)"
run_expect 0 "$V7FILL" stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub \
    --slot "$SLOT" --map id=legacy_id --until-caught-up
assert_eq 3101 "$(q "SELECT count(*) FROM orders_v7")" "each source row once"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM orders_v7 GROUP BY 1 HAVING count(*) > 1) d")" "no row twice"
assert_eq "$(qs "SELECT sum(id) FROM orders")" "$(q "SELECT sum(legacy_id) FROM orders_v7")" "the same keys"
