# The way back between two databases (issue 21) under kill -9: after the switch, an application
# writer inserts, updates and deletes in the target while `migrate --reverse --follow` is killed
# at random moments and started again; a last `--reverse` catches up.  Then the source's legacy
# table holds exactly the target's rows (legacy key, time, note), every change applied once (no
# update or delete found its row missing), the target's map pairs exactly the target's rows (a
# map row the way back added before a kill is reused, one it removes after the legacy commit is
# removed by the next run), and the source's sequence is past every legacy key.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_k2
source_db_fresh
writer=
trap '[ -z "$writer" ] || kill "$writer" 2>/dev/null; pkill -9 -f "migrate --into $INTO --reverse" 2>/dev/null || true;
      psql -X -q -At -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE '"'"'v7fill\_${INTO}%'"'"' AND NOT active" >/dev/null 2>&1;
      psql -X -q -At -d "$SRC" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE '"'"'v7fill\_${INTO}%'"'"' AND NOT active" >/dev/null 2>&1;
      rm -rf "$T_TMP"' EXIT
qs "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    INSERT INTO orders (created_at, note)
      SELECT timestamptz '2025-01-01' + g * interval '3 hours', 'n' || g FROM generate_series(1, 3000) g" >/dev/null
mig() { run_expect "$1" "$V7FILL" migrate --into "$INTO" "${@:2}"; }
mig 0 --source "dbname=$SRC" --from public.orders --key id --time-column created_at
mig 0 --switch
assert_contains "$OUT" "phase switched" "switched"

# The application: a UUIDv7 minted at the row's own time, as it mints them.
sqlf -c "CREATE FUNCTION app_uuid7(at timestamptz) RETURNS uuid LANGUAGE sql AS \$\$
  SELECT (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7'
          || substr(md5(random()::text), 1, 3) || to_hex(8 + floor(random() * 4)::int)
          || substr(md5(random()::text), 1, 15))::uuid \$\$"
cat >writer.sql <<EOF
\set k random(1, 3300)
WITH t AS (SELECT date_trunc('milliseconds', clock_timestamp()) AS at)
  INSERT INTO $INTO (id, created_at, note) SELECT app_uuid7(at), at, 'w' FROM t;
UPDATE $INTO SET note = note || 'u' WHERE legacy_id = :k;
DELETE FROM $INTO WHERE legacy_id = :k + 7;
EOF
"$PGBIN/pgbench" -n -c 2 -R 80 -T 600 --max-tries=10 -f writer.sql "$PGDATABASE" >writer.log 2>&1 &
writer=$!
for i in 1 2 3 4 5 6; do
    "$V7FILL" migrate --into "$INTO" --reverse --follow >"rev$i.log" 2>&1 &
    rpid=$!
    sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.6 + rand() * 1.6 }')"
    kill -9 "$rpid"
    set +e; wait "$rpid"; set -e
done
writer_stop
applied_before=$(q "SELECT applied FROM v7fill.migrate_reverse WHERE into_table = 'public.$INTO'")
mig 0 --reverse
echo "$OUT" | tail -n 1
echo "changes applied before the last run: $applied_before"
[ "$applied_before" -gt 0 ] || fail "the killed runs applied nothing: the test did not test the kills"
! grep -h "found no row" rev*.log || fail "an update or delete found its legacy row missing"
assert_contains "$OUT" "missing=0" "the last run found every row"

qs "SELECT id, created_at, note FROM orders_legacy ORDER BY id" >legacy.txt
q "SELECT legacy_id, created_at, note FROM $INTO ORDER BY legacy_id" >target.txt
[ "$(wc -l <target.txt)" -gt 3000 ] || fail "the writer inserted nothing"
diff legacy.txt target.txt >diff.txt || fail "the legacy table differs from the target: $(head -n 6 diff.txt)"
assert_eq "0" "$(q "SELECT count(*) FROM ((SELECT legacy_id, id FROM ${INTO}_id_map EXCEPT SELECT legacy_id, id FROM $INTO)
                     UNION ALL (SELECT legacy_id, id FROM $INTO EXCEPT SELECT legacy_id, id FROM ${INTO}_id_map)) d")" \
    "the map pairs exactly the target's rows"
assert_eq "0" "$(qs "SELECT count(*) FROM v7fill.migrate_reverse_gone")" "no map row left to remove"
assert_eq "t" "$(qs "SELECT last_value >= (SELECT max(id) FROM orders_legacy) FROM orders_id_seq")" \
    "the source's sequence is past every legacy key"
echo "ok"
