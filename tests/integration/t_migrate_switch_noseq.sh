# v7fill migrate --switch of a table whose integer key has no sequence (the application gave
# the keys): legacy_id stays NOT NULL, since the way back needs a legacy key for every row, and
# the switch's output says the application gives it (it said new rows "get no legacy key",
# while their inserts failed on NOT NULL).  With a sequence, new rows get the next key from it.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
cleanup_slots() { q "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE database = current_database() AND NOT active" >/dev/null; }
trap 'cleanup_slots >/dev/null 2>&1 || true; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE o (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, note text);
   INSERT INTO o SELECT g, now() - g * interval '1 hour', 'x' FROM generate_series(1, 20) g;
   CREATE TABLE s (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
   INSERT INTO s (created_at, note) SELECT now() - g * interval '1 hour', 'x' FROM generate_series(1, 20) g"
declare -A SW
for t in o s; do
    run_expect 0 "$V7FILL" migrate --from "public.$t" --key id --time-column created_at --into "${t}_v7"
    run_expect 0 "$V7FILL" migrate --into "${t}_v7" --switch
    SW[$t]=$OUT
done
assert_contains "${SW[o]}" "the application gives new rows their legacy_id" "no sequence: the output says who gives legacy_id"
assert_contains "${SW[o]}" "ALTER TABLE public.o ALTER COLUMN legacy_id DROP NOT NULL" "and how to drop it when no way back is wanted"
set +e; err=$(q "INSERT INTO o (id, created_at, note) VALUES ('$("$V7FILL" uuid new)', now(), 'new')" 2>&1); set -e
assert_contains "$err" "null value in column \"legacy_id\"" "no sequence: an insert without legacy_id is refused, as the output says"
q "INSERT INTO o (id, legacy_id, created_at, note) VALUES ('$("$V7FILL" uuid new)', 1000, now(), 'new')"
run_expect 0 "$V7FILL" migrate --into o_v7 --reverse
assert_eq "new" "$(q "SELECT note FROM o_legacy WHERE id = 1000")" "the way back copies the row under the legacy key the application gave"
assert_contains "${SW[s]}" "filled for new rows by DEFAULT nextval" "with a sequence: legacy_id comes from it"
q "INSERT INTO s (id, created_at, note) VALUES ('$("$V7FILL" uuid new)', now(), 'new')"
assert_eq "1|21" "$(q "SELECT count(*), min(legacy_id) FROM s WHERE note = 'new'")" \
    "with a sequence: the new row gets the next key"
cleanup_slots

# Two databases, a key without a sequence: the target's legacy_id may be NULL after the switch
# (the source's table keeps the keys); a row the application gives one is copied back under it;
# a row given none stops the way back, naming the row and saying how to give it a key; done so,
# the rerun goes on from that row, keyed through the map, and switching back leaves both tables
# equal.
SRC_DB="${PGDATABASE}_noseq_src"
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$SRC_DB\"" >/dev/null
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC_DB" -c "$1"; }
trap 'cleanup_slots >/dev/null 2>&1 || true; psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC_DB\"" >/dev/null 2>&1; rm -rf "$T_TMP"' EXIT
qs "CREATE TABLE p (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    INSERT INTO p SELECT g, now() - g * interval '1 hour', 'x' FROM generate_series(1, 20) g" >/dev/null
run_expect 0 "$V7FILL" migrate --source "dbname=$SRC_DB" --from public.p --key id --time-column created_at --into p_2db
run_expect 0 "$V7FILL" migrate --into p_2db --switch
assert_contains "$OUT" "id had no sequence: the application gives new rows their legacy_id" \
    "two databases, no sequence: the output says who gives legacy_id"
assert_contains "$OUT" "a row given NULL stops the way back, naming the row" "and what a row without one does"
q "INSERT INTO p_2db (id, legacy_id, created_at, note) VALUES ('$("$V7FILL" uuid new)', 500, now(), 'given')"
u=$("$V7FILL" uuid new)
q "INSERT INTO p_2db (id, created_at, note) VALUES ('$u', now(), 'none given')"
run_expect 3 "$V7FILL" migrate --into p_2db --reverse
assert_contains "$OUT" "(id $u) has no legacy_id, and no sequence numbers that column" "the way back stops at the row without a key, naming it"
assert_contains "$OUT" "INSERT INTO public.p_2db_id_map (legacy_id, id) VALUES (<a key the legacy table does not have>, '$u')" \
    "and says how to give it one"
assert_eq "0" "$(qs "SELECT count(*) FROM p_legacy WHERE note = 'none given'")" "the row without a key was not"
q "INSERT INTO p_2db_id_map (legacy_id, id) VALUES (501, '$u'); UPDATE p_2db SET legacy_id = 501 WHERE id = '$u'"
run_expect 0 "$V7FILL" migrate --into p_2db --reverse
assert_eq "500:given|501:none given" "$(qs "SELECT string_agg(id || ':' || note, '|' ORDER BY id) FROM p_legacy WHERE id >= 500")" \
    "the rerun copied both back, the second under the key given in the map"
run_expect 0 "$V7FILL" migrate --into p_2db --switch
assert_contains "$OUT" "switched back" "switched back"
assert_eq "$(q "SELECT string_agg(legacy_id || ':' || note, ',' ORDER BY legacy_id) FROM p_2db")" \
    "$(qs "SELECT string_agg(id || ':' || note, ',' ORDER BY id) FROM p")" "both tables hold the same rows"
cleanup_slots
echo "ok t_migrate_switch_noseq"
