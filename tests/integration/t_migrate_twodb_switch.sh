# v7fill migrate between two databases through the command (issue 21): copy with an expand-mode
# child, --switch (the source table renamed <from>_legacy there, the target keeps its name), then
# --verify and --status read the tables under their names after the switch: the source's legacy
# table against the target (before, --verify stopped with "the source table public.orders does
# not exist" and --status counted nothing on the source).  A row the application writes in the
# target after the switch has no legacy key and no map row: --verify names it.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
SRC_DB="${PGDATABASE}_src"
INTO=orders_2db
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$SRC_DB\"" >/dev/null
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC_DB" -c "$1"; }
drop_slots() {
    qs "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
         WHERE slot_name LIKE 'v7fill\_${INTO}%' AND NOT active" >/dev/null 2>&1 || true
}
trap 'drop_slots; psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null 2>&1; rm -rf "$T_TMP"' EXIT
drop_slots
qs "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    INSERT INTO orders (created_at, note)
      SELECT timestamptz '2024-01-01' + g * interval '7 hours', 'n' || g FROM generate_series(1, 2000) g;
    CREATE TABLE items (id serial PRIMARY KEY, order_id bigint REFERENCES orders (id), qty int);
    INSERT INTO items (order_id, qty) SELECT g % 2000 + 1, g FROM generate_series(1, 3000) g" >/dev/null
mig() { run_expect "$1" "$V7FILL" migrate --into "$INTO" "${@:2}"; }
mig 0 --source "dbname=$SRC_DB" --from public.orders --key id --time-column created_at \
    --child 'public.items(order_id)'
assert_contains "$OUT" "phase follow" "the copy finished"
mig 0 --switch
assert_contains "$OUT" "phase switched" "switched"
assert_eq "|orders_legacy" "$(qs "SELECT to_regclass('orders'), to_regclass('orders_legacy')")" \
    "the source table renamed there"

mig 0 --verify
echo "$OUT"
assert_contains "$OUT" "verdict: OK" "--verify after the switch: the legacy table against the target"
assert_contains "$OUT" "public.$INTO  rows                      2000          2000  OK" "every row counted on both sides"
mig 0 --status
assert_contains "$OUT" "rows in source     2000 (public.orders_legacy)" "--status counts the legacy table"
assert_contains "$OUT" "rows in target     2000 (public.$INTO)" "--status counts the target"
mig 0 --status --json
assert_eq "public.orders_legacy 2000 public.$INTO 2000" \
    "$(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["source_table"], d["source_rows"], d["target_table"], d["target_rows"])' <<<"$OUT")" \
    "--status --json: the tables counted, under their names now"

# The application writes in the target after the switch: no legacy key, no map row.
q "INSERT INTO $INTO (id, created_at, note) VALUES ('$("$V7FILL" uuid new)', now(), 'after the switch')" >/dev/null
mig 1 --verify
assert_contains "$OUT" "target rows not in the map: 1 (legacy keys NULL)" "--verify names the row written after the switch"
echo "ok"
