# The way back between two databases (issue 21) under kill -9: after the switch, an application
# writer inserts, updates and deletes in the target while `migrate --reverse --follow` is killed
# at random moments and started again; a last `--reverse` catches up.  Then the source's legacy
# table holds exactly the target's rows (legacy key, time, note), every change applied once (no
# update or delete found its row missing), the target's map pairs exactly the target's rows (a
# map row the way back added before a kill is reused, one it removes after the legacy commit is
# removed by the next run), and the source's sequence is past every legacy key.  Then the window
# between the two databases' commits is forced, each way, by a failure instead of a kill.
# A quarter of the writer's transactions are an ORM's: a row inserted with every column, so
# legacy_id NULL (the way back takes its key from the sequence, ahead, with others), then
# updated by its id in the same transaction (answered by the key its insert was given).
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
cat >orm.sql <<EOF
BEGIN;
INSERT INTO $INTO (id, legacy_id, created_at, note)
  SELECT app_uuid7(at), NULL, at, 'orm' FROM (SELECT date_trunc('milliseconds', clock_timestamp()) AS at) t
  RETURNING id AS orm_id \gset
UPDATE $INTO SET note = note || 'u' WHERE id = :orm_id;
COMMIT;
EOF
"$PGBIN/pgbench" -n -M extended -c 2 -R 80 -T 600 --max-tries=10 -f writer.sql@3 -f orm.sql@1 "$PGDATABASE" >writer.log 2>&1 &
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

# (a row the application inserted with legacy_id NULL keeps it NULL in the target: its legacy
# key is its map row's)
qs "SELECT id, created_at, note FROM orders_legacy ORDER BY id" >legacy.txt
q "SELECT coalesce(t.legacy_id, m.legacy_id) AS k, t.created_at, t.note
   FROM $INTO t LEFT JOIN ${INTO}_id_map m ON m.id = t.id ORDER BY k" >target.txt
[ "$(wc -l <target.txt)" -gt 3000 ] || fail "the writer inserted nothing"
diff legacy.txt target.txt >diff.txt || fail "the legacy table differs from the target: $(head -n 6 diff.txt)"
orm=$(q "SELECT count(*) FROM $INTO WHERE legacy_id IS NULL AND note = 'ormu'")
[ "$orm" -gt 0 ] || fail "the writer inserted no row with legacy_id NULL"
echo "rows inserted with legacy_id NULL, then updated: $orm"
assert_eq "$orm" "$(qs "SELECT count(*) FROM orders_legacy WHERE note = 'ormu'")" \
    "every row inserted with legacy_id NULL reached the legacy table once, with its update"
assert_eq "0" "$(q "SELECT count(*) FROM ((SELECT legacy_id, id FROM ${INTO}_id_map EXCEPT
                                          SELECT coalesce(t.legacy_id, m.legacy_id), t.id FROM $INTO t LEFT JOIN ${INTO}_id_map m ON m.id = t.id)
                     UNION ALL (SELECT legacy_id, id FROM $INTO WHERE legacy_id IS NOT NULL EXCEPT SELECT legacy_id, id FROM ${INTO}_id_map)
                     UNION ALL (SELECT NULL, id FROM $INTO WHERE id NOT IN (SELECT id FROM ${INTO}_id_map))) d")" \
    "the map pairs exactly the target's rows"
assert_eq "$(q "SELECT count(*) FROM ${INTO}_id_map")" "$(q "SELECT count(DISTINCT legacy_id) FROM ${INTO}_id_map")" \
    "no legacy key given twice"
assert_eq "0" "$(qs "SELECT count(*) FROM v7fill.migrate_reverse_gone")" "no map row left to remove"
assert_eq "t" "$(qs "SELECT last_value >= (SELECT max(id) FROM orders_legacy) FROM orders_id_seq")" \
    "the source's sequence is past every legacy key"

# The window between the two databases' commits, forced (the kills above fall there only by
# chance).  (1) The map rows commit on the target, then the legacy commit fails (a deferred
# trigger that fires under session_replication_role = replica too): the rerun inserts the row
# the application gave legacy_id NULL under the key its map row already has, and takes no second
# value from the sequence.
sqlf -d "$SRC" -c "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
      \$\$ BEGIN RAISE EXCEPTION 'refused at commit'; END \$\$;
    CREATE CONSTRAINT TRIGGER refuse_commit AFTER INSERT ON orders_legacy
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
    ALTER TABLE orders_legacy ENABLE ALWAYS TRIGGER refuse_commit"
at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
q "INSERT INTO $INTO (id, legacy_id, created_at, note) VALUES ('$("$V7FILL" uuid new --at "$at")', NULL, '$at', 'window 1')" >/dev/null
seq_before=$(q "SELECT last_value FROM ${INTO}_legacy_id_seq")
mig 5 --reverse
assert_contains "$OUT" "refused at commit" "the legacy commit failed"
k=$(q "SELECT m.legacy_id FROM ${INTO}_id_map m JOIN $INTO t USING (id) WHERE t.note = 'window 1'")
[ -n "$k" ] || fail "the map row did not commit before the legacy rows"
assert_eq "0" "$(qs "SELECT count(*) FROM orders_legacy WHERE note = 'window 1'")" "the legacy row did not commit"
sqlf -d "$SRC" -c "DROP TRIGGER refuse_commit ON orders_legacy"
mig 0 --reverse
assert_contains "$OUT" "inserted=1 updated=0 deleted=0 missing=0" "the rerun applied the row once"
assert_eq "$k" "$(qs "SELECT id FROM orders_legacy WHERE note = 'window 1'")" "under the key its map row had"
assert_eq "$((seq_before + 1))" "$(q "SELECT last_value FROM ${INTO}_legacy_id_seq")" "one value taken from the sequence, not two"

# (2) The legacy delete commits, then removing the map row on the target fails: the key stays
# listed on the source, and the next run removes the map row before anything else.
victim=$(q "SELECT legacy_id FROM $INTO WHERE legacy_id IS NOT NULL ORDER BY legacy_id LIMIT 1")
sqlf -c "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
      \$\$ BEGIN RAISE EXCEPTION 'map delete refused'; END \$\$;
    CREATE TRIGGER refuse_delete BEFORE DELETE ON ${INTO}_id_map FOR EACH ROW EXECUTE FUNCTION refuse();
    DELETE FROM $INTO WHERE legacy_id = $victim"
mig 5 --reverse
assert_contains "$OUT" "map delete refused" "removing the map row failed"
assert_eq "0|1" "$(qs "SELECT (SELECT count(*) FROM orders_legacy WHERE id = $victim),
                              (SELECT count(*) FROM v7fill.migrate_reverse_gone)")" \
    "the legacy delete committed, its key listed"
assert_eq "1" "$(q "SELECT count(*) FROM ${INTO}_id_map WHERE legacy_id = $victim")" "the map row is still there"
sqlf -c "DROP TRIGGER refuse_delete ON ${INTO}_id_map"
mig 0 --reverse
assert_contains "$OUT" "inserted=0 updated=0 deleted=0 missing=0" "nothing applied again"
assert_eq "0|0" "$(q "SELECT count(*) FROM ${INTO}_id_map WHERE legacy_id = $victim")|$(qs "SELECT count(*) FROM v7fill.migrate_reverse_gone")" \
    "the next run removed the map row and the list"
echo "ok"
