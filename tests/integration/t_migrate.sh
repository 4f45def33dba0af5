# v7fill migrate in one database (the usual case): a 100,000-row parent keyed
# by bigint with gaps, created_at over 3 years, 3 NULL and 5 pre-1970 times;
# usage and configuration errors; --dry-run changes nothing; the setup, the
# copy and the capture while a writer inserts, updates and deletes; then the
# target equals the source through legacy_id (count and md5 of every non-key
# column), each id carries its created_at to the ms, the rejected rows are
# listed with their reason, a rerun changes nothing, --status tells it all.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_mig
SLOT=v7fill_orders_mig
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('$SLOT', '${SLOT}_rev') AND NOT active" >/dev/null || true
}
drop_slot
writer=
trap '[ -z "$writer" ] || kill "$writer" 2>/dev/null || true; drop_slot; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz, amount numeric(12,2) NOT NULL DEFAULT 0
                        CHECK (amount >= 0), status text, note text, CHECK (id > 0));
   CREATE UNIQUE INDEX orders_note ON orders (note);
   CREATE INDEX orders_recent ON orders (created_at DESC) WHERE status = 'open';
   INSERT INTO orders SELECT g * 3 + (g % 2), timestamptz '2023-01-01' + g * interval '946 seconds' + (g % 997) * interval '1.001 ms',
                             g % 1000, CASE WHEN g % 4 = 0 THEN 'open' ELSE 'done' END, 'n' || g
     FROM generate_series(1, 100000) g;
   UPDATE orders SET created_at = NULL WHERE id IN (30, 34, 60);
   UPDATE orders SET created_at = timestamptz '1969-12-31 23:59:59.999' - (id || ' days')::interval WHERE id IN (SELECT g * 3 + g % 2 FROM generate_series(30, 34) g);
   CREATE TABLE items (id serial PRIMARY KEY, order_id bigint REFERENCES orders (id) ON DELETE CASCADE, qty int);
   INSERT INTO items (order_id, qty) SELECT CASE WHEN g % 500 = 0 THEN NULL ELSE (g + 100) * 3 + ((g + 100) % 2) END, g
     FROM generate_series(1, 20000) g"
mig() { "$V7FILL" migrate --from public.orders --key id --time-column created_at --into "$INTO" "$@"; }
# The source's rows that must reach the target (not rejected), and the target's, by legacy key.
digest_src() { q "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||amount||'|'||status||'|'||note, ',' ORDER BY id))
                  FROM orders WHERE created_at >= '1970-01-01'"; }
digest_dst() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||amount||'|'||status||'|'||note, ',' ORDER BY legacy_id))
                  FROM $INTO"; }

# ---- usage and configuration errors name the flag / the problem
run_expect 2 "$V7FILL" migrate --from public.orders --time-column created_at --into "$INTO"
assert_contains "$OUT" "--key" "a missing --key is named"
run_expect 2 mig --child 'items(order_id)'
assert_contains "$OUT" "--child takes" "a malformed --child is named"
run_expect 2 mig --child-mode sideways
assert_contains "$OUT" "--child-mode" "a bad --child-mode is named"
run_expect 2 "$V7FILL" migrate --into "$INTO" --json
assert_contains "$OUT" "--json goes with --status" "--json alone"
run_expect 2 "$V7FILL" migrate --into "$INTO" --status --from public.orders
assert_contains "$OUT" "take only" "--status with the run's flags"
run_expect 3 "$V7FILL" migrate --from public.orders --key amount --time-column created_at --into "$INTO"
assert_contains "$OUT" "not the primary key" "the key must be the primary key"
run_expect 3 "$V7FILL" migrate --from public.orders --key id --time-column note --into "$INTO"
assert_contains "$OUT" "timestamptz, timestamp or date" "the time column's type"
run_expect 3 "$V7FILL" migrate --from public.nosuch --key id --time-column created_at --into "$INTO"
assert_contains "$OUT" "no such table" "a missing source table"
run_expect 3 "$V7FILL" migrate --into "$INTO" --status
assert_contains "$OUT" "no migration into" "--status before any run"

# ---- --dry-run: the DDL and the plan, nothing made
run_expect 0 mig --dry-run
echo "$OUT"
assert_contains "$OUT" "legacy_id bigint NOT NULL" "the key kept as legacy_id"
assert_contains "$OUT" ") PARTITION BY RANGE (id);" "partitioned by the uuid"
assert_contains "$OUT" "PRIMARY KEY (id)" "id is the primary key"
assert_contains "$OUT" "(legacy_id bigint PRIMARY KEY, id uuid NOT NULL UNIQUE)" "the map's DDL"
assert_contains "$OUT" "CREATE PUBLICATION \"$SLOT\"" "the publication to create"
assert_contains "$OUT" "pg_create_logical_replication_slot('$SLOT'" "the slot to create"
assert_contains "$OUT" "index orders_note is UNIQUE" "a unique index that cannot stay unique is named"
assert_contains "$OUT" "check orders_id_check not copied" "a CHECK on the key is named"
assert_contains "$OUT" "ADD CONSTRAINT \"orders_amount_check\" CHECK (amount >= 0::numeric)" "other CHECKs copied"
assert_contains "$OUT" "WHERE status = 'open'::text" "a partial index keeps its predicate"
assert_contains "$OUT" "items(order_id)" "the tables referencing the source are listed"
assert_contains "$OUT" "rows: 100000, created_at from 1969-" "row count and time range"
assert_contains "$OUT" "3 with a NULL created_at, 5 before 1970-01-01" "rows that would be rejected"
assert_eq "" "$(q "SELECT to_regclass('$INTO')")" "--dry-run creates no table"
assert_eq 0 "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT'")" "--dry-run creates no slot"
assert_eq 0 "$(q "SELECT count(*) FROM pg_publication WHERE pubname = '$SLOT'")" "--dry-run creates no publication"

# ---- the migration, with a writer inserting, updating and deleting meanwhile
cat >writer.sql <<'SQL'
\set k random(1, 100000)
BEGIN;
INSERT INTO orders VALUES (1000000 + :k * 10 + (random() * 9)::int, now() - interval '1 minute', 1, 'open', 'w' || :k || '-' || (random() * 1e9)::bigint) ON CONFLICT DO NOTHING;
UPDATE orders SET amount = amount + 1, status = 'upd' WHERE id = :k * 3 + (:k % 2) AND created_at >= '1970-01-01';
DELETE FROM orders WHERE id = (:k + 7) * 3 + ((:k + 7) % 2) AND created_at >= '1970-01-01';
COMMIT;
SQL
"$PGBIN/pgbench" -n -c 2 -R 60 -T 600 --max-tries=10 -f writer.sql "$PGDATABASE" >writer.log 2>&1 &
writer=$!
sleep 1
# The copy on two writer connections (batches of 20,000 rows), the changes on one.  (The run's
# own --verify under a writer: t_migrate_e2e; this writer's 60 transactions/s can outpace the
# capture on a loaded machine, and then no re-check settles.)
run_expect 0 mig --child 'public.items(order_id)' --jobs 2 --batch-rows 20000
echo "$OUT"
assert_contains "$OUT" "on 2 writer connections" "the copy ran on two writers"
assert_contains "$OUT" "phase follow" "the copy finished: phase follow"
assert_contains "$OUT" "child public.items(order_id): rows=" "the child is filled"
assert_contains "$OUT" "null_keys=40 orphans=0" "the child's NULL keys counted apart"
assert_contains "$OUT" "foreign_key=validated" "the child's foreign key to the target"
assert_contains "$OUT" "rejected: 8 rows" "the NULL and pre-1970 times are rejected"
assert_contains "$OUT" "missing event time" "the NULL time's reason"
assert_contains "$OUT" "before 1970-01-01" "the pre-1970 time's reason"
sleep 2
writer_stop
run_expect 0 mig
echo "$OUT"
assert_eq "$(digest_src)" "$(digest_dst)" "the target equals the source through legacy_id (every non-key column)"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM $INTO GROUP BY 1 HAVING count(*) > 1) d")" "no row twice"
assert_eq 0 "$(q "SELECT count(*) FROM $INTO WHERE ('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint
                   <> floor(extract(epoch FROM created_at) * 1000)::bigint")" "each id carries its created_at to the ms"
assert_eq 8 "$(q "SELECT count(*) FROM v7fill.stream_quarantine WHERE slot = '$SLOT'")" "8 rows quarantined with a reason"
assert_eq follow "$(q "SELECT phase FROM v7fill.migration WHERE into_table = '$INTO'")" "the stored phase"
assert_eq "" "$(q "SELECT source_conninfo FROM v7fill.migration WHERE into_table = '$INTO'")" "the source is the target's database"
assert_eq 0 "$(q "SELECT count(*) FROM pg_publication_tables WHERE pubname = '$SLOT' AND tablename LIKE '$INTO%'")" "the target and its map are not published"
nt=$(q "SELECT count(*) FROM $INTO")
assert_eq "$nt" "$(q "SELECT count(*) FROM ${INTO}_id_map m JOIN $INTO t USING (legacy_id, id)" 2>/dev/null ||
                  q "SELECT count(*) FROM ${INTO}_source_ref")" "one map row per target row"

# ---- a rerun of a child filled and constrained reads only its rows still NULL: a row whose
# order_id_uuid was cleared by hand is set again, the counts stay exact, no full pass
k1=$(q "SELECT min(id) FROM items WHERE order_id_uuid IS NOT NULL")
q "UPDATE items SET order_id_uuid = NULL WHERE id = $k1"
run_expect 0 "$V7FILL" -v migrate --from public.orders --key id --time-column created_at --into "$INTO"
echo "$OUT" | grep -E 'child|filling'
child_line=$(grep '^child public.items(order_id):' <<<"$OUT")
assert_contains "$OUT" "pass 1, 1 rows read, 1 set" "only the row still NULL is read"
assert_contains "$child_line" "full_pass=no" "a rerun makes no full pass over the child"
assert_contains "$child_line" "filled=1 " "the row cleared by hand is set again"
assert_contains "$child_line" "rows=$(q "SELECT count(*) FROM items") filled=1 null_keys=$(q "SELECT count(*) FROM items WHERE order_id IS NULL") orphans=0 passes=1 " \
    "the child's counts stay exact"
assert_eq t "$(q "SELECT i.order_id_uuid = m.id FROM items i JOIN ${INTO}_id_map m ON m.legacy_id = i.order_id WHERE i.id = $k1")" \
    "its uuid is the map's again"
run_expect 0 mig --full-fill
assert_contains "$(grep '^child public.items(order_id):' <<<"$OUT")" "filled=0 null_keys=40 orphans=0 passes=1 full_pass=yes" \
    "--full-fill reads every row"
# A key changed while the child's trigger was gone leaves a stale uuid the foreign key accepts.
# Making the trigger again makes the key NOT VALID again (a run killed right after its prepare,
# here the prepare alone), and the next run reads every row and corrects it.
k2=$(q "SELECT max(id) FROM items WHERE order_id_uuid IS NOT NULL")
q "DROP TRIGGER v7fill_order_id_uuid ON items;
   UPDATE items SET order_id = (SELECT order_id FROM items WHERE id = $k1) WHERE id = $k2"
build_helper helper "$V7FILL_ROOT/tests/integration/migrate_child_helper.c"
run_expect 0 ./helper prepare public items order_id public "$INTO" "${INTO}_id_map" bigint
assert_contains "$OUT" "made NOT VALID again" "prepare says why the key is no longer validated"
assert_eq "1|f" "$(q "SELECT count(*), bool_and(convalidated) FROM pg_constraint WHERE conrelid = 'items'::regclass
                      AND contype = 'f' AND conparentid = 0 AND conkey = ARRAY[(SELECT attnum FROM pg_attribute
                      WHERE attrelid = 'items'::regclass AND attname = 'order_id_uuid')]")" \
    "the trigger made again: the key on order_id_uuid is NOT VALID"
run_expect 0 mig
assert_contains "$(grep '^child public.items(order_id):' <<<"$OUT")" "filled=1 null_keys=40 orphans=0 passes=2 full_pass=yes" \
    "a remade trigger: a full pass corrects the stale uuid"
assert_contains "$(grep '^child public.items(order_id):' <<<"$OUT")" "foreign_key=validated" "and validates the key again"
assert_eq 0 "$(q "SELECT count(*) FROM items i JOIN ${INTO}_id_map m ON m.legacy_id = i.order_id WHERE i.order_id_uuid IS DISTINCT FROM m.id")" \
    "every child key has its uuid after the trigger was remade"
run_expect 0 mig
assert_contains "$(grep '^child public.items(order_id):' <<<"$OUT")" "full_pass=no" "then reruns read only the rows still NULL"

# ---- a rerun does nothing
before=$(digest_dst)
run_expect 0 mig
assert_contains "$OUT" "read=0 " "a rerun reads nothing"
assert_contains "$OUT" "inserted=0 " "a rerun inserts nothing"
assert_not_contains "$OUT" "created the target" "a rerun creates nothing"
assert_eq "$before" "$(digest_dst)" "a rerun leaves the target as it was"

# ---- --verify: OK now; a changed target column is a mismatch naming the row
run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
echo "$OUT"
assert_contains "$OUT" "verdict: OK" "--verify after the catch-up"
assert_eq 1 "$(echo "$OUT" | grep -cE '^public\.items +join pairs +[0-9]+ +[0-9]+ +OK')" "--verify checks the child's join pairs"
k=$(q "SELECT min(legacy_id) FROM $INTO")
q "UPDATE $INTO SET note = 'changed' WHERE legacy_id = $k"
run_expect 1 "$V7FILL" migrate --into "$INTO" --verify
assert_contains "$OUT" "MISMATCH" "a changed column fails --verify"
assert_contains "$OUT" "legacy keys $k" "the mismatch names the row"
q "UPDATE $INTO t SET note = o.note FROM orders o WHERE o.id = t.legacy_id AND t.legacy_id = $k"
assert_eq 0 "$(q "SELECT count(*) FROM items i JOIN ${INTO}_id_map m ON m.legacy_id = i.order_id WHERE i.order_id_uuid IS DISTINCT FROM m.id")" "every child key has its uuid"

# ---- --status
run_expect 0 "$V7FILL" migrate --into "$INTO" --status
echo "$OUT"
assert_contains "$OUT" "phase              follow" "--status: the phase"
assert_contains "$OUT" "rows in source     $(q "SELECT count(*) FROM orders")" "--status: source rows"
assert_contains "$OUT" "rows in target     $nt" "--status: target rows"
assert_contains "$OUT" "rejected           8" "--status: rejected rows"
assert_contains "$OUT" "slot state         inactive" "--status: the slot"
run_expect 0 "$V7FILL" migrate --into "public.$INTO" --status --json
assert_eq "follow $nt 8" "$(echo "$OUT" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["phase"], d["target_rows"], d["rejected"])')" "--status --json"

# ---- an existing target is checked; another migration into it is refused
q "CREATE TABLE wrong_v7 (id uuid NOT NULL, legacy_id int NOT NULL, created_at timestamptz) PARTITION BY RANGE (id)"
run_expect 3 "$V7FILL" migrate --from public.orders --key id --time-column created_at --into wrong_v7 --dry-run
assert_contains "$OUT" "its column legacy_id is integer, not bigint" "an existing target's column types are checked"
q "CREATE TABLE other (k int PRIMARY KEY, t date)"
run_expect 3 "$V7FILL" migrate --from public.other --key k --time-column t --into "$INTO"
assert_contains "$OUT" "target of another migration" "one migration per target"
# in the same database a publication that holds the target is refused, before anything is made
q "CREATE PUBLICATION v7fill_pub_v7 FOR ALL TABLES"
run_expect 3 "$V7FILL" migrate --from public.orders --key id --time-column created_at --into pub_v7
assert_contains "$OUT" "holds the target public.pub_v7 or its map" "a publication of the target is refused"
assert_eq "" "$(q "SELECT to_regclass('pub_v7')")" "nothing made before the refusal"
q "DROP PUBLICATION v7fill_pub_v7"

# ---- --switch under a writer and a reader (their statements work before and after the rename):
# the lock is taken only once the capture runs caught up, so no statement waits longer than the
# lock timeout (1000 ms) + 1 s; then --reverse keeps the legacy table current
switch_under_load "UPDATE orders SET amount = amount + 0 WHERE note = 'n12'" \
    "SELECT count(*) FROM orders WHERE note = 'n12'" migrate --into "$INTO" --switch
echo "$OUT"
assert_contains "$OUT" "phase switched" "--switch"
assert_eq "p" "$(q "SELECT relkind FROM pg_class WHERE oid = 'public.orders'::regclass")" "orders is the partitioned table now"
assert_eq "r" "$(q "SELECT relkind FROM pg_class WHERE oid = 'public.orders_legacy'::regclass")" "the old table is orders_legacy"
run_expect 3 mig
assert_contains "$OUT" "is switched" "a run after the switch is refused"
q "UPDATE orders SET amount = amount + 1, note = note || 'r' WHERE legacy_id % 97 = 0;
   DELETE FROM orders o WHERE legacy_id % 89 = 0 AND NOT EXISTS (SELECT 1 FROM items i WHERE i.order_id_uuid = o.id)"
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
echo "$OUT"
assert_contains "$OUT" "phase reverse" "--reverse"
assert_eq "$(q "SELECT count(*), md5(string_agg(legacy_id||'|'||amount||'|'||note, ',' ORDER BY legacy_id)) FROM orders")" \
          "$(q "SELECT count(*), md5(string_agg(id||'|'||amount||'|'||note, ',' ORDER BY id)) FROM orders_legacy WHERE created_at >= '1970-01-01'")" \
          "after --reverse the legacy table equals the new one"
drop_slot
