# kill -9 of v7fill migrate at 10 random moments (setup, copy, capture) while a
# writer inserts, updates and deletes on the source (the same database): the
# same command afterwards finishes, and the target equals the source through
# legacy_id, each row once, the map one row per target row.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_kill
SLOT=v7fill_orders_kill
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('$SLOT', '${SLOT}_rev') AND NOT active" >/dev/null || true
}
drop_slot
writer=
trap '[ -z "$writer" ] || kill "$writer" 2>/dev/null || true; drop_slot; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
   CREATE INDEX ON orders (amount);
   INSERT INTO orders SELECT g * 2, timestamptz '2024-01-01' + g * interval '17 minutes', g, 'n' || g
     FROM generate_series(1, 40000) g"
digest_src() { q "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY id)) FROM orders"; }
digest_dst() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY legacy_id)) FROM $INTO"; }
args=(-q migrate --from public.orders --key id --time-column created_at --into "$INTO" --batch-rows 2000)

cat >writer.sql <<'SQL'
\set k random(1, 40000)
BEGIN;
INSERT INTO orders VALUES (1000000 + :k * 10 + (random() * 9)::int, now() - interval '1 minute', 1, 'w') ON CONFLICT DO NOTHING;
UPDATE orders SET amount = amount + 1, note = note || 'u' WHERE id = :k * 2;
DELETE FROM orders WHERE id = (:k + 3) * 2;
COMMIT;
SQL
"$PGBIN/pgbench" -n -c 2 -R 100 -T 600 -f writer.sql "$PGDATABASE" >writer.log 2>&1 &
writer=$!

for i in $(seq 1 10); do
    "$V7FILL" "${args[@]}" --follow >"run$i.log" 2>&1 &
    pid=$!   # v7fill itself, not a subshell: kill -9 must reach it
    sleep "$(python3 -c 'import random; print(round(random.uniform(0.2, 4.0), 2))')"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
kill "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
writer=
# The killed walsender may take a moment to let the slot go.
poll_until "SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = '$SLOT' AND active" \
    "the killed walsender to let the slot go" 30
run_expect 0 "$V7FILL" "${args[@]}"
echo "$OUT"
assert_contains "$OUT" "phase follow" "the rerun finishes the copy"
assert_eq "$(digest_src)" "$(digest_dst)" "after 10 kills and a rerun the target equals the source"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM $INTO GROUP BY 1 HAVING count(*) > 1) d")" "no row twice"
assert_eq "$(q "SELECT count(*) FROM $INTO")" "$(q "SELECT count(*) FROM ${INTO}_id_map" 2>/dev/null ||
                                                q "SELECT count(*) FROM ${INTO}_source_ref")" "one map row per target row"
assert_eq 1 "$(q "SELECT count(*) FROM v7fill.migration WHERE into_table = '$INTO'")" "one state row"
assert_eq 1 "$(q "SELECT count(*) FROM pg_publication WHERE pubname = '$SLOT'")" "one publication"
drop_slot
