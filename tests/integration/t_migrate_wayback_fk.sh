# The way back (issue 21) with legacy foreign keys from --child-mode migrate children to their
# parent: one NO ACTION, one RESTRICT, one ON DELETE CASCADE.  After the switch the application
# deletes children, then their parent (the round applies the parent's delete first: the legacy
# keys would refuse it), inserts parents with children, moves a child to another parent by its
# uuid, updates; the new CASCADE child key (the switch's advice) deletes that child's rows.
# `--reverse` writes with session_replication_role = replica: a role without the right to set it
# is refused up front (exit 3, naming the key and the GRANT), the same role with GRANT SET ON
# PARAMETER applies it all; the legacy tables equal the new ones row by row (each child's
# order_id the parent map's legacy key of its order_id_uuid), the CASCADE child's rows deleted by
# its own way back with their map rows, no trigger of the legacy parent fired, a rerun applies
# nothing; --status --json shows each table's way back as v7fill.migrate_reverse holds it.  More
# writes of the same kind, then the switch back (its catch-up on its own connection): the legacy
# tables hold every write, their foreign keys still validated, no legacy child names a missing
# parent.  A fourth child, payments with a NOT NULL order_id: after the switch the application
# inserts a parent and payments by order_id_uuid alone (order_id NULL), then deletes a payment
# and its parent, and another parent alone (the payments' new CASCADE key deletes its payment),
# all in one round: the parent's way back inserts and deletes that parent (and its map row)
# before the payments' way back inserts their rows, whose legacy order_id must still be that
# parent's key (before, it was the NULL order_id: SQLSTATE 23502 on every --reverse, exit 5 from
# the switch back).  Before that switch back a transaction its LOCK waits for clears a payment's
# order_id_uuid: the fill under the lock (by the ids the way back wrote there) gives it its
# parent's uuid again, its order_id kept on both sides.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=wb_orders_v7
ROLE=wb_reverser
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'v7fill_wb_%' AND NOT active" >/dev/null || true
}
drop_role() {
    q "DROP OWNED BY $ROLE" >/dev/null 2>&1 || true
    psql -X -q -d postgres -c "DROP ROLE IF EXISTS $ROLE" >/dev/null 2>&1 || true
}
drop_slot
drop_role
trap 'drop_slot; drop_role; rm -rf "$T_TMP"' EXIT

# Parents 1..200 (the last 30 days); per child 600 rows, three per parent.  An audit trigger on
# the parent (the application's own): the way back's writes must not fire it.
q "CREATE TABLE wb_orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
   INSERT INTO wb_orders SELECT g, now() - g * interval '3 hours' + (g % 97) * interval '1.001 ms', g, 'n' || g
     FROM generate_series(1, 200) g;
   SELECT setval('wb_orders_id_seq', 200);
   CREATE TABLE wb_items_na (id bigserial PRIMARY KEY, order_id bigint REFERENCES wb_orders (id),
                             created_at timestamptz NOT NULL, qty int);
   CREATE TABLE wb_items_rs (id bigserial PRIMARY KEY, order_id bigint REFERENCES wb_orders (id) ON DELETE RESTRICT,
                             created_at timestamptz NOT NULL, qty int);
   CREATE TABLE wb_items_cc (id bigserial PRIMARY KEY, order_id bigint REFERENCES wb_orders (id) ON DELETE CASCADE,
                             created_at timestamptz NOT NULL, qty int);
   INSERT INTO wb_items_na (order_id, created_at, qty)
     SELECT g % 200 + 1, now() - g * interval '41 minutes' + (g % 91) * interval '1.003 ms', g FROM generate_series(1, 600) g;
   INSERT INTO wb_items_rs (order_id, created_at, qty) SELECT order_id, created_at, qty + 1 FROM wb_items_na ORDER BY id;
   INSERT INTO wb_items_cc (order_id, created_at, qty) SELECT order_id, created_at, qty + 2 FROM wb_items_na ORDER BY id;
   CREATE TABLE wb_items_nn (id bigserial PRIMARY KEY, order_id bigint NOT NULL REFERENCES wb_orders (id),
                             created_at timestamptz NOT NULL, qty int);
   INSERT INTO wb_items_nn (order_id, created_at, qty) SELECT order_id, created_at, qty + 3 FROM wb_items_na ORDER BY id;
   CREATE TABLE wb_audit (tbl text, op text);
   CREATE FUNCTION wb_audit() RETURNS trigger LANGUAGE plpgsql AS \$\$
     BEGIN INSERT INTO wb_audit VALUES (TG_TABLE_NAME, TG_OP); RETURN NULL; END \$\$;
   CREATE TRIGGER wb_audit AFTER INSERT OR UPDATE OR DELETE ON wb_orders FOR EACH ROW EXECUTE FUNCTION wb_audit();
   CREATE FUNCTION t_uuid7() RETURNS uuid LANGUAGE sql VOLATILE AS \$\$
     SELECT (lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7'
             || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid \$\$" >/dev/null

run_expect 0 "$V7FILL" migrate --from public.wb_orders --key id --time-column created_at --into "$INTO" \
    --child 'public.wb_items_na(order_id)' --child 'public.wb_items_rs(order_id)' \
    --child 'public.wb_items_cc(order_id)' --child 'public.wb_items_nn(order_id)' --child-mode migrate
assert_contains "$OUT" "phase follow" "the migration is caught up"
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
assert_contains "$OUT" "phase switched" "switched"
for c in na rs cc nn; do
    assert_eq 1 "$(q "SELECT count(*) FROM pg_constraint WHERE conrelid = 'wb_items_${c}_legacy'::regclass AND contype = 'f'
                      AND confrelid = 'wb_orders_legacy'::regclass AND convalidated")" "the legacy child wb_items_$c keeps its key"
done
# The application's rule for the CASCADE child's and the payments' new keys, as the switch advises.
for c in cc nn; do
    q "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'wb_items_$c'::regclass AND contype = 'f'"
    for fk in $(q "SELECT conname FROM pg_constraint WHERE conrelid = 'wb_items_$c'::regclass AND contype = 'f' AND confrelid = 'wb_orders'::regclass"); do
        q "ALTER TABLE wb_items_$c DROP CONSTRAINT $fk" >/dev/null
    done
    q "ALTER TABLE wb_items_$c ADD FOREIGN KEY (order_id_uuid) REFERENCES wb_orders (id) ON DELETE CASCADE" >/dev/null
done

# app_writes LO: the application after the switch, on the new tables, parents LO..LO+9 deleted.
app_writes() {
    local lo=$1 hi=$(($1 + 4)) lo2=$(($1 + 5)) hi2=$(($1 + 9))
    psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
-- children, then their parent, in one transaction (the CASCADE child's rows go with the parent)
BEGIN;
DELETE FROM wb_items_na WHERE order_id_uuid IN (SELECT id FROM wb_orders WHERE legacy_id BETWEEN $lo AND $hi);
DELETE FROM wb_items_rs WHERE order_id_uuid IN (SELECT id FROM wb_orders WHERE legacy_id BETWEEN $lo AND $hi);
DELETE FROM wb_orders WHERE legacy_id BETWEEN $lo AND $hi;
COMMIT;
-- and in three transactions
DELETE FROM wb_items_na WHERE order_id_uuid IN (SELECT id FROM wb_orders WHERE legacy_id BETWEEN $lo2 AND $hi2);
DELETE FROM wb_items_rs WHERE order_id_uuid IN (SELECT id FROM wb_orders WHERE legacy_id BETWEEN $lo2 AND $hi2);
DELETE FROM wb_orders WHERE legacy_id BETWEEN $lo2 AND $hi2;
-- new parents, each with a child in every table
BEGIN;
CREATE TEMP TABLE p ON COMMIT DROP AS SELECT t_uuid7() AS id, g FROM generate_series(1, 5) g;
INSERT INTO wb_orders (id, created_at, amount, note) SELECT id, now(), g, 'new' FROM p;
INSERT INTO wb_items_na (id, order_id_uuid, created_at, qty) SELECT t_uuid7(), id, now(), 1000 + g FROM p;
INSERT INTO wb_items_rs (id, order_id_uuid, created_at, qty) SELECT t_uuid7(), id, now(), 2000 + g FROM p;
INSERT INTO wb_items_cc (id, order_id_uuid, created_at, qty) SELECT t_uuid7(), id, now(), 3000 + g FROM p;
INSERT INTO wb_items_nn (id, order_id_uuid, created_at, qty) SELECT t_uuid7(), id, now(), 4000 + g FROM p;
COMMIT;
-- parents with payments by order_id_uuid alone (order_id NULL, NOT NULL in the legacy payments),
-- deleted again in the same round: a payment, then its parent; another parent alone (its payment
-- by the CASCADE key)
BEGIN;
CREATE TEMP TABLE g ON COMMIT DROP AS SELECT t_uuid7() AS id, g FROM generate_series(1, 3) g;
INSERT INTO wb_orders (id, created_at, amount, note) SELECT id, now(), g, 'gone' FROM g;
INSERT INTO wb_items_nn (id, order_id_uuid, created_at, qty) SELECT t_uuid7(), id, now(), 5000 + g FROM g;
COMMIT;
DELETE FROM wb_items_nn WHERE order_id_uuid = (SELECT id FROM wb_orders WHERE note = 'gone' AND amount = 1);
DELETE FROM wb_orders WHERE note = 'gone' AND amount = 1;
DELETE FROM wb_orders WHERE note = 'gone' AND amount = 2;
-- updates: parents, a child moved to another parent by its uuid alone, a new child
UPDATE wb_orders SET amount = amount + 100, note = note || 'u' WHERE legacy_id BETWEEN $lo + 20 AND $lo + 40;
UPDATE wb_items_na SET qty = qty + 5, order_id_uuid = (SELECT id FROM wb_orders WHERE legacy_id = $lo + 50)
 WHERE legacy_id BETWEEN $lo + 100 AND $lo + 104;
UPDATE wb_items_rs SET qty = qty + 7 WHERE order_id_uuid = (SELECT id FROM wb_orders WHERE note = 'new' ORDER BY id DESC LIMIT 1);
-- a new parent deleted again, its children first
BEGIN;
DELETE FROM wb_items_na WHERE order_id_uuid = (SELECT id FROM wb_orders WHERE note = 'new' ORDER BY id LIMIT 1);
DELETE FROM wb_items_rs WHERE order_id_uuid = (SELECT id FROM wb_orders WHERE note = 'new' ORDER BY id LIMIT 1);
DELETE FROM wb_orders WHERE id = (SELECT id FROM wb_orders WHERE note = 'new' ORDER BY id LIMIT 1);
COMMIT;
SQL
}
# pdiff NEW LEGACY / cdiff NEW LEGACY: rows that differ between a UUIDv7 table and its legacy
# table (the first ones printed, their count the output); a child's expected legacy order_id is
# the parent map's legacy key of its order_id_uuid.
pdiff() {
    local sel="SELECT * FROM (SELECT legacy_id AS id, created_at, amount, note FROM $1) n
        FULL JOIN (SELECT id, created_at, amount, note FROM $2) l USING (id)
        WHERE row(n.created_at, n.amount, n.note) IS DISTINCT FROM row(l.created_at, l.amount, l.note)"
    q "SELECT 'differs', d.* FROM ($sel) d ORDER BY 2 LIMIT 5" >&2
    q "SELECT count(*) FROM ($sel) d"
}
cdiff() {
    local sel="SELECT * FROM (SELECT c.legacy_id AS id, m.legacy_id AS order_id, c.created_at, c.qty
                                FROM $1 c LEFT JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid) n
        FULL JOIN (SELECT id, order_id, created_at, qty FROM $2) l USING (id)
        WHERE row(n.order_id, n.created_at, n.qty) IS DISTINCT FROM row(l.order_id, l.created_at, l.qty)"
    q "SELECT 'differs', d.* FROM ($sel) d ORDER BY 2 LIMIT 5" >&2
    q "SELECT count(*) FROM ($sel) d"
}

app_writes 5
[ "$(pdiff wb_orders wb_orders_legacy 2>/dev/null)" -gt 20 ] || fail "the application's writes are pending for the way back"
assert_eq 0 "$(q "SELECT count(*) FROM wb_items_cc c JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid WHERE m.legacy_id BETWEEN 5 AND 14")" \
    "the new CASCADE key deleted the new children of the deleted parents"

# ---- a role that may not set session_replication_role: refused up front, naming the key
psql -X -q -d postgres -c "CREATE ROLE $ROLE LOGIN REPLICATION NOSUPERUSER" >/dev/null
q "GRANT USAGE ON SCHEMA v7fill TO $ROLE; GRANT SELECT ON ALL TABLES IN SCHEMA v7fill TO $ROLE" >/dev/null
before=$(q "SELECT end_lsn FROM v7fill.migrate_reverse ORDER BY into_table")
PGUSER=$ROLE run_expect 3 "$V7FILL" migrate --into "$INTO" --reverse
echo "$OUT"
assert_contains "$OUT" "GRANT SET ON PARAMETER session_replication_role TO \"$ROLE\";" "the refusal says what to grant"
assert_contains "$OUT" "public.wb_items_na_legacy" "the refusal names the legacy child"
assert_eq "$before" "$(q "SELECT end_lsn FROM v7fill.migrate_reverse ORDER BY into_table")" "the refused run applied nothing"

# ---- the same role with GRANT SET ON PARAMETER: --reverse applies it all
q "GRANT SET ON PARAMETER session_replication_role TO $ROLE;
   GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public, v7fill TO $ROLE" >/dev/null
PGUSER=$ROLE run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
echo "$OUT"
assert_contains "$OUT" "session_replication_role = replica" "the way back says it writes as a replica"
assert_contains "$OUT" "phase reverse" "--reverse until caught up"
assert_eq 0 "$(pdiff wb_orders wb_orders_legacy)" "the legacy parent equals the new one row by row"
for c in na rs cc nn; do
    assert_eq 0 "$(cdiff wb_items_$c wb_items_${c}_legacy)" "the legacy child wb_items_$c equals the new one (order_id through the parent's map)"
done
assert_eq 0 "$(q "SELECT count(*) FROM wb_orders_legacy WHERE id BETWEEN 5 AND 14")" "the deleted parents are gone from the legacy parent"
assert_eq 0 "$(q "SELECT count(*) FROM wb_items_cc_legacy WHERE order_id BETWEEN 5 AND 14")" \
    "the CASCADE child's legacy rows of the deleted parents deleted by its own way back"
assert_eq 0 "$(q "SELECT count(*) FROM wb_items_cc_v7_id_map m WHERE NOT EXISTS (SELECT 1 FROM wb_items_cc c WHERE c.id = m.id)")" \
    "with their child-map rows"
assert_eq 4 "$(q "SELECT count(*) FROM wb_orders_legacy WHERE note = 'new' AND id > 200")" "the new parents reached the legacy parent under the old sequence's keys"
assert_eq "1|1" "$(q "SELECT count(*) || '|' || count(*) FILTER (WHERE n.order_id = o.id) FROM wb_items_nn_legacy n JOIN wb_orders_legacy o ON o.note = 'gone' AND o.amount = 3 WHERE n.qty > 5000")" \
    "of the payments of parents inserted and deleted in one round, the one whose parent stays names it"
assert_eq 0 "$(q "SELECT count(*) FROM wb_audit WHERE tbl = 'wb_orders_legacy'")" "no trigger of the legacy parent fired for the way back's writes"
run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
assert_contains "$OUT" "inserted=0 updated=0 deleted=0" "a rerun applies nothing"

# ---- --status --json: the parent's way back and each child's (as v7fill.migrate_reverse holds them)
json=$("$V7FILL" migrate --into "$INTO" --status --json 2>status.err) || { cat status.err; fail "--status --json"; }
sed -n 1,40p <<<"$json"
assert_eq 4 "$(jq '.children | length' <<<"$json")" "--status --json lists the four children"
for t in wb_orders wb_items_na wb_items_rs wb_items_cc wb_items_nn; do
    k=public.${t}_v7
    want=$(q "SELECT 'public.${t}_legacy|' || slot || '|' || end_lsn || '|' || applied || '|true|number'
              FROM v7fill.migrate_reverse WHERE into_table = '$k'")
    got=$(jq -r --arg k "$k" '[., .children[]] | map(select(.into == $k))[0].way_back
              | "\(.legacy_table)|\(.slot)|\(.applied_lsn)|\(.rows_applied)|\(.slot_exists)|\(.lag_bytes | type)"' <<<"$json")
    assert_eq "$want" "$got" "--status --json: the way back of $k"
done
[ "$(jq '.way_back.rows_applied' <<<"$json")" -gt 20 ] || fail "--status --json: the parent's way back counts its rows"

# ---- more writes, then the switch back (their catch-up on its own connection, as a replica)
app_writes 30
[ "$(pdiff wb_orders wb_orders_legacy 2>/dev/null)" -gt 20 ] || fail "writes pending for the switch back"
# A transaction the switch back's LOCK waits for clears a payment's order_id_uuid (its order_id
# stays: the legacy payments' order_id is NOT NULL, so the way back keeps it there): the way back
# applies it under the lock, and the fill under the lock (by the ids the way back wrote) gives
# the payment its parent's uuid again, so both sides name the same parent.
read -r nn_id nn_key <<<"$(q "SELECT c.id, c.order_id FROM wb_items_nn c JOIN ${INTO}_id_map m ON m.id = c.order_id_uuid
    WHERE c.order_id = m.legacy_id ORDER BY c.legacy_id LIMIT 1" | tr '|' ' ')"
[ -n "$nn_key" ] || fail "a payment naming its parent by both keys"
cat >held.sql <<SQL
BEGIN;
UPDATE wb_items_nn SET order_id_uuid = NULL, qty = qty + 1 WHERE id = '$nn_id';
UPDATE wb_orders SET amount = amount + 1 WHERE legacy_id = $nn_key;
$(until_waited_sql "'wb_orders'::regclass, 'wb_items_nn'::regclass")
COMMIT;
SQL
psql -X -q -At -v ON_ERROR_STOP=1 -f held.sql >held.log 2>&1 &
held=$!
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
wait "$held" || { cat held.log; fail "the transaction held open across the switch back"; }
echo "$OUT"
assert_contains "$OUT" "switched back: public.wb_orders is the legacy table again" "switched back"
assert_contains "$OUT" "the fill under the lock read only the rows of the 1 ids the way back wrote there" \
    "the fill under the lock read the one payment the way back wrote under it"
assert_eq "$nn_key|$nn_key|true" "$(q "SELECT c.order_id || '|' || l.order_id || '|' || (c.order_id_uuid = m.id)
    FROM wb_items_nn_v7 c JOIN wb_items_nn l ON l.id = c.legacy_id JOIN ${INTO}_id_map m ON m.legacy_id = $nn_key
    WHERE c.id = '$nn_id'")" \
    "the payment whose order_id_uuid was cleared under the lock names its parent again on both sides"
assert_eq 0 "$(pdiff "$INTO" wb_orders)" "the legacy parent holds every write made to the new one"
for c in na rs cc nn; do
    assert_eq 0 "$(cdiff wb_items_${c}_v7 wb_items_$c)" "the legacy child wb_items_$c holds every write made to the new one"
    assert_eq 1 "$(q "SELECT count(*) FROM pg_constraint WHERE conrelid = 'wb_items_$c'::regclass AND contype = 'f'
                      AND confrelid = 'wb_orders'::regclass AND convalidated")" "wb_items_$c's key to its parent is back with its table"
    assert_eq 0 "$(q "SELECT count(*) FROM wb_items_$c c WHERE NOT EXISTS (SELECT 1 FROM wb_orders p WHERE p.id = c.order_id)")" \
        "no row of wb_items_$c names a missing parent"
done
assert_eq 0 "$(q "SELECT count(*) FROM wb_orders WHERE id BETWEEN 30 AND 39")" "the parents deleted before the switch back are gone"
assert_eq 0 "$(q "SELECT count(*) FROM wb_audit WHERE tbl = 'wb_orders_legacy'")" "no trigger of the legacy parent fired for the switch back's catch-up"
drop_slot
echo "ok t_migrate_wayback_fk"
