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
echo "ok t_migrate_switch_noseq"
