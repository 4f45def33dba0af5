#!/usr/bin/env bash
# v7fill migrate: a row the copy rejects (NULL time, time before 1970) is quarantined naming
# its key; once fixed on the source, as the docs advise, the capture brings it over and
# --verify counts it as migrated, not still as rejected (it said "source - target - rejected
# = -1": the copy's quarantined row was a bare CSV line, naming no key).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_rf
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'v7fill_$INTO' AND NOT active" >/dev/null || true
}
drop_slot
trap 'drop_slot; rm -rf "$T_TMP"' EXIT
q "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz, note text);
   INSERT INTO orders SELECT g, timestamptz '2025-01-01' + g * interval '1 day', 'n,' || g FROM generate_series(1, 200) g;
   UPDATE orders SET created_at = NULL WHERE id IN (5, 6);
   UPDATE orders SET created_at = '1960-01-01' WHERE id = 7"
mig() { "$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" "$@"; }
run_expect 0 mig
assert_eq 197 "$(q "SELECT count(*) FROM $INTO")" "the copy leaves the three rejected rows out"
assert_eq "5 6 7" "$(q "SELECT string_agg(row ->> 'id', ' ' ORDER BY (row ->> 'id')::int) FROM v7fill.stream_quarantine WHERE slot = 'v7fill_$INTO'")" \
    "each rejected row is kept naming its key"
assert_eq "n,5" "$(q "SELECT row ->> 'note' FROM v7fill.stream_quarantine WHERE slot = 'v7fill_$INTO' AND row ->> 'id' = '5'")" \
    "... with its other columns"
assert_eq "" "$(q "SELECT row ->> 'created_at' FROM v7fill.stream_quarantine WHERE slot = 'v7fill_$INTO' AND row ->> 'id' = '5'")" \
    "... a NULL as JSON null"
assert_eq "null" "$(q "SELECT jsonb_typeof(row -> 'created_at') FROM v7fill.stream_quarantine WHERE slot = 'v7fill_$INTO' AND row ->> 'id' = '5'")" \
    "... typed null"
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
assert_contains "$OUT" "verdict: OK" "the rejected rows are listed, the verdict holds"

# Fixed on the source: the capture inserts them (the target never had them); verify agrees.
q "UPDATE orders SET created_at = timestamptz '2025-06-01' + id * interval '1 hour' WHERE id IN (5, 7)"
run_expect 0 mig
assert_eq 199 "$(q "SELECT count(*) FROM $INTO")" "the fixed rows came over"
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
assert_contains "$OUT" "verdict: OK" "verify after the fix"
assert_not_contains "$OUT" "= -1" "no row counted both migrated and rejected"
drop_slot
echo "ok t_migrate_rejectfix"
