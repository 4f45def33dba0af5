# `v7fill migrate --verify` (issue 21): migrate_verify() on a migrated state built by SQL alone
# (a parent with gaps in its key, a partitioned target with legacy_id and UUIDv7 ids minted from
# created_at, the map, a child with order_id_uuid, two quarantined rows), through the helper
# migrate_verify_main.c until the CLI exists (then: v7fill migrate --into X --verify).  In one
# database and in two: the state verifies OK (quarantined rows and an orphan child key listed,
# not failing); a changed target column, a missed source update, a deleted map row, an id whose
# time is not its row's, a wrong order_id_uuid and a NULL key with a uuid are each a MISMATCH
# naming the legacy key.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

build_helper verify "$V7FILL_ROOT/tests/integration/migrate_verify_main.c"

SRC_DB="${PGDATABASE}_src"
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$SRC_DB\"" >/dev/null
trap 'psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null 2>&1; rm -rf "$T_TMP"' EXIT
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1" -d "$SRC_DB"; }

# The parent: keys 1..400 without multiples of 7, a created_at with milliseconds, a text, a
# numeric and a nullable column.  Key 5 was rejected by the stream (a JSON row naming it), key 10
# by the copy (its line): neither is in the target.
ORDERS="CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL,
          customer text NOT NULL, amount numeric(10,2) NOT NULL, note text);
        INSERT INTO orders SELECT g, timestamptz '2024-01-01' + g * interval '37 min 1.234 s',
               'cust ' || (g % 17), g * 1.5, CASE WHEN g % 3 = 0 THEN NULL ELSE 'n' || g END
          FROM generate_series(1, 400) g WHERE g % 7 <> 0;
        UPDATE orders SET created_at = '1969-12-31 23:00:00+00' WHERE id = 10;"
# An id of v7fill's layout: uuid7_floor(created_at) (the SQL helpers) with the key in rand_b.
ID="(left(replace(uuid7_floor(o.created_at)::text, '-', ''), 16) || '8' || lpad(to_hex(o.id), 15, '0'))::uuid"
TARGET="CREATE TABLE orders_v7 (id uuid NOT NULL, legacy_id bigint NOT NULL,
          created_at timestamptz NOT NULL, customer text NOT NULL, amount numeric(10,2) NOT NULL,
          note text, PRIMARY KEY (id)) PARTITION BY RANGE (id);
        CREATE TABLE orders_v7_a PARTITION OF orders_v7
          FOR VALUES FROM (MINVALUE) TO (uuid7_floor('2024-01-05 00:00:00+00'));
        CREATE TABLE orders_v7_b PARTITION OF orders_v7
          FOR VALUES FROM (uuid7_floor('2024-01-05 00:00:00+00')) TO (MAXVALUE);
        CREATE TABLE orders_v7_id_map (legacy_id bigint PRIMARY KEY, id uuid NOT NULL UNIQUE);
        INSERT INTO orders_v7 (id, legacy_id, created_at, customer, amount, note)
          SELECT $ID, o.id, o.created_at, o.customer, o.amount, o.note FROM orders o
           WHERE o.id NOT IN (5, 10);
        INSERT INTO orders_v7_id_map SELECT legacy_id, id FROM orders_v7;
        CREATE SCHEMA v7fill;
        CREATE TABLE v7fill.stream_quarantine (
          id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(),
          slot text NOT NULL, target text NOT NULL, source_lsn pg_lsn, relation text NOT NULL,
          reason text NOT NULL, sqlstate text, row jsonb);
        INSERT INTO v7fill.stream_quarantine (slot, target, relation, reason, row) VALUES
          ('v7fill_orders_v7', 'public.orders_v7', 'public.orders', 'amount: out of range',
           '{\"id\": \"5\", \"amount\": \"1e12\"}'),
          ('v7fill_orders_v7', 'public.orders_v7', 'public.orders', 'created_at before 1970',
           '\"10,1969-12-31 23:00:00+00,cust 10,15.00,n10\"'),
          ('other_slot', 'public.x', 'public.orders', 'not ours', '{\"id\": \"11\"}');"
# The child (expand mode): order_id with order_id_uuid filled from the ids; a NULL key and an
# orphan key (no parent) without a uuid.  The rejected orders 5 and 10 have items: child rows of
# rejected parents, listed apart (not orphans, not a join-pair mismatch).
CHILD="CREATE TABLE order_items (item_id serial PRIMARY KEY, order_id bigint, qty int,
          order_id_uuid uuid);
        CREATE INDEX ON order_items (order_id);
        INSERT INTO order_items (order_id, qty)
          SELECT o.id, n FROM orders o, generate_series(1, 2) n ORDER BY o.id, n;
        INSERT INTO order_items (order_id, qty) VALUES (NULL, 1), (100000, 1);
        UPDATE order_items c SET order_id_uuid = $ID FROM orders o
         WHERE o.id = c.order_id AND o.id NOT IN (5, 10);"

helpers=$V7FILL_ROOT/contrib/sql/v7fill_uuid7.sql
# One database: everything in $PGDATABASE.
psql -X -q -v ON_ERROR_STOP=1 -f "$helpers" >/dev/null
q "$ORDERS $TARGET $CHILD" >/dev/null
# Two databases: the source and its child in $SRC_DB, the target, map and quarantine here in
# db2 (built from a copy of the same rows, dropped afterwards).
DB2="${PGDATABASE}_tgt"
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$DB2\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$DB2\"" >/dev/null
trap 'psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null 2>&1; psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$DB2\"" >/dev/null 2>&1; rm -rf "$T_TMP"' EXIT
psql -X -q -v ON_ERROR_STOP=1 -d "$SRC_DB" -f "$helpers" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$DB2" -f "$helpers" >/dev/null
qs "$ORDERS $CHILD" >/dev/null
psql -X -q -At -v ON_ERROR_STOP=1 -d "$DB2" -c "$ORDERS $TARGET DROP TABLE orders;" >/dev/null
q2() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1" -d "$DB2"; }

ARGS=(--from public.orders --key id --time-column created_at --into public.orders_v7
      --slot v7fill_orders_v7 --child 'public.order_items(order_id)' --range-keys 50)
# one: verify in one database; two: source $SRC_DB, target $DB2.  $OUT holds the table.
one() { run_expect "$1" ./verify -d "dbname=$PGDATABASE" "${ARGS[@]}"; }
two() { run_expect "$1" ./verify -d "dbname=$DB2" --source "dbname=$SRC_DB" "${ARGS[@]}"; }
# line CHECK [TABLE]: the verdict line of a check
line() { grep -E "^${2:-public.orders_v7} +$1 " <<<"$OUT" || fail "no line for check $1 in: $OUT"; }

for mode in one two; do
    echo "== $mode database(s)"
    if [ $mode = one ]; then P=q; S=q; else P=q2; S=qs; fi
    # --- the migrated state verifies ----------------------------------------------------------
    $mode 0
    echo "$OUT"
    assert_contains "$OUT" "verdict: OK" "$mode: verdict"
    # 343 source rows (400 - 57 multiples of 7) = 341 in the target + 2 rejected
    assert_contains "$(line rows)" "343           341  OK        2 rejected with a reason" "$mode: rows"
    assert_contains "$(line rejected)" "2 rows in v7fill.stream_quarantine (slot v7fill_orders_v7)" "$mode: rejected"
    assert_contains "$(line rejected)" "key 5: amount: out of range" "$mode: the stream's reject listed"
    assert_contains "$(line rejected)" "10,1969-12-31" "$mode: the copy's reject listed"
    assert_not_contains "$OUT" "not ours" "$mode: another slot's quarantine"
    assert_contains "$(line values)" "343           341  OK        missing 1 (legacy keys 10); quarantined 1 (legacy keys 5); the missing rows are the quarantined lines of the copy; every other non-key column equal (7 ranges)" "$mode: values in ranges"
    assert_contains "$(line map)" "OK" "$mode: map"
    assert_contains "$(line 'id time')" "341           341  OK" "$mode: id time"
    assert_contains "$(line 'child keys' public.order_items)" "   687           682  OK" "$mode: child keys"
    assert_contains "$(line orphans public.order_items)" "keys without a parent: 1 (keys 100000)" "$mode: orphans listed"
    assert_contains "$(line 'rejected parents' public.order_items)" "OK        child rows of rejected parents: 4 (keys 5, 10)" \
        "$mode: child rows of rejected parents listed apart"
    assert_contains "$(line 'NULL keys' public.order_items)" "1             1  OK" "$mode: NULL keys"
    assert_contains "$(line 'join pairs' public.order_items)" "682           682  OK" "$mode: join pairs"
    run_expect 0 ./verify -d "dbname=$([ $mode = one ] && echo "$PGDATABASE" || echo "$DB2")" \
        $([ $mode = two ] && echo --source "dbname=$SRC_DB") "${ARGS[@]}" --json
    assert_contains "$OUT" '{"ok":true,"checks":[{"table":"public.orders_v7","check":"rows","source":343,"target":341,"ok":true' "$mode: JSON"

    # --- a changed target column (one row) ------------------------------------------------------
    $P "UPDATE orders_v7 SET note = 'changed' WHERE legacy_id = 142" >/dev/null
    $mode 1
    assert_contains "$(line values)" "343           340  MISMATCH  changed 1 (legacy keys 142)" "$mode: changed column"
    assert_contains "$OUT" "verdict: MISMATCH (1 of 10 checks)" "$mode: one check fails"
    $P "UPDATE orders_v7 SET note = 'n142' WHERE legacy_id = 142" >/dev/null
    # NULL against '' is a change too
    $P "UPDATE orders_v7 SET note = '' WHERE legacy_id = 3" >/dev/null
    $mode 1
    assert_contains "$(line values)" "changed 1 (legacy keys 3)" "$mode: NULL became ''"
    $P "UPDATE orders_v7 SET note = NULL WHERE legacy_id = 3" >/dev/null

    # --- a missed update on the source: found, not only a missed row -------------------------------
    $S "UPDATE orders SET amount = amount + 1 WHERE id IN (57 + 1, 390)" >/dev/null
    $mode 1
    assert_contains "$(line values)" "changed 2 (legacy keys 58, 390)" "$mode: missed updates"
    $S "UPDATE orders SET amount = amount - 1 WHERE id IN (58, 390)" >/dev/null
    $mode 0

    # --- a deleted map row ---------------------------------------------------------------------
    $P "DELETE FROM orders_v7_id_map WHERE legacy_id = 78" >/dev/null
    $mode 1
    assert_contains "$(line map)" "MISMATCH  target rows not in the map: 1 (legacy keys 78)" "$mode: deleted map row"
    assert_contains "$(line values)" "missing 2 (legacy keys 10, 78)" "$mode: its row unreachable"
    assert_contains "$(line 'child keys' public.order_items)" "wrong or missing uuid: 2 (keys 78)" "$mode: its children"
    $P "INSERT INTO orders_v7_id_map SELECT legacy_id, id FROM orders_v7 WHERE legacy_id = 78" >/dev/null
    # a map row pointing to another key's target row
    $P "BEGIN; DELETE FROM orders_v7_id_map WHERE legacy_id IN (79, 80);
        INSERT INTO orders_v7_id_map VALUES (80, (SELECT id FROM orders_v7 WHERE legacy_id = 79));
        COMMIT" >/dev/null
    $mode 1
    assert_contains "$(line values)" "changed 1 (legacy keys 80); missing 2 (legacy keys 10, 79)" "$mode: map row to another row"
    assert_contains "$(line map)" "target rows not in the map: 2 (legacy keys 79, 80)" "$mode: map pairs"
    assert_contains "$(line map)" "map rows without their target row: 1 (legacy keys 80)" "$mode: map pairs"
    $P "DELETE FROM orders_v7_id_map WHERE legacy_id = 80;
        INSERT INTO orders_v7_id_map SELECT legacy_id, id FROM orders_v7 WHERE legacy_id IN (79, 80)" >/dev/null
    $mode 0

    # --- an id whose milliseconds are not its time's --------------------------------------------
    $P "UPDATE orders_v7 SET created_at = created_at + interval '1 ms' WHERE legacy_id = 200" >/dev/null
    $S "UPDATE orders SET created_at = created_at + interval '1 ms' WHERE id = 200" >/dev/null
    $mode 1
    assert_contains "$(line 'id time')" "MISMATCH  id's milliseconds are not the time column's: 1 (legacy keys 200)" "$mode: id time"
    assert_contains "$(line values)" "341  OK        missing 1" "$mode: the values still equal"
    $P "UPDATE orders_v7 SET created_at = created_at - interval '1 ms' WHERE legacy_id = 200" >/dev/null
    $S "UPDATE orders SET created_at = created_at - interval '1 ms' WHERE id = 200" >/dev/null

    # --- children: a wrong order_id_uuid, a NULL key with a uuid ----------------------------------
    $S "UPDATE order_items SET order_id_uuid = (SELECT order_id_uuid FROM order_items WHERE order_id = 2 LIMIT 1)
         WHERE item_id = (SELECT min(item_id) FROM order_items WHERE order_id = 3)" >/dev/null
    $mode 1
    assert_contains "$(line 'child keys' public.order_items)" "MISMATCH  wrong or missing uuid: 1 (keys 3)" "$mode: wrong uuid"
    assert_contains "$(line 'join pairs' public.order_items)" "MISMATCH" "$mode: join pairs differ"
    $S "UPDATE order_items SET order_id_uuid = NULL WHERE order_id IS NULL OR order_id = 3" >/dev/null
    $S "UPDATE order_items c SET order_id_uuid = p.order_id_uuid FROM (SELECT DISTINCT order_id_uuid FROM order_items WHERE order_id = 4) p
         WHERE c.order_id IS NULL" >/dev/null
    $mode 1
    assert_contains "$(line 'NULL keys' public.order_items)" "MISMATCH  1 rows with a NULL key have a order_id_uuid" "$mode: NULL key with a uuid"
    assert_contains "$(line 'child keys' public.order_items)" "wrong or missing uuid: 2 (keys 3)" "$mode: missing uuid"
done

# --- a child not expanded, a target without the map: an error, not a verdict --------------------
run_expect 3 ./verify -d "dbname=$PGDATABASE" "${ARGS[@]}" --child 'public.order_items(qty)'
assert_contains "$OUT" "the child public.order_items has no column qty or qty_uuid" "child not expanded"
q "ALTER TABLE orders_v7_id_map RENAME TO gone" >/dev/null
run_expect 3 ./verify -d "dbname=$PGDATABASE" "${ARGS[@]}"
assert_contains "$OUT" "the map table public.orders_v7_id_map does not exist" "missing map"
echo "ok"
