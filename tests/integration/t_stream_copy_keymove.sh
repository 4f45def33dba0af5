# An initial copy killed while its batch of row 20000 waits, then redone under a fresh view
# after the source moved a copied row's key: the redone copy writes the row under its new key,
# and the key change, replayed from the slot's start, finds that row there already.
#  a. Default --on-delete: the change goes to the row under the new key and the row the first
#     copy wrote under the old key is deleted (before: the change was quarantined and the old
#     row stayed, 30,001 rows for 30,000).  A key the first copy never wrote, taken by another
#     row before the second view (25000 -> 100002, then 26000 -> 25000, its TOASTed note
#     unchanged): the row under it is the second copy's, of that other row, and stays.
#     The run that copies again is killed while the change's UPDATE waits, after the copy
#     ended: the next run merges it, from the view it reads back from v7fill.stream.  Twelve
#     more keys moved: the log names the first ten merges only.
#  b. --on-delete ignore, the new key freed by a delete: the target keeps the deleted row under
#     that key, so the change is quarantined and both rows stay as they are (merging would
#     overwrite the kept row).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db
trap 'kill -9 ${pid:-} 2>/dev/null || true; drop_slots; rm -rf "$T_TMP"' EXIT

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
    INSERT INTO orders SELECT g, now() - (g || ' minutes')::interval, g FROM generate_series(1, 30000) g;
    UPDATE orders SET note = (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 2000) g) WHERE id IN (26000, 28000);
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE hold (id bigint, op text);
   CREATE FUNCTION wait_held_row() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN
       IF EXISTS (SELECT 1 FROM hold WHERE id = NEW.legacy_id AND coalesce(op, TG_OP) = TG_OP) THEN
           PERFORM pg_sleep(60);
       END IF;
       RETURN NEW;
   END \$\$;" >/dev/null

# killed_run ROW [OP]: the stream (args) killed while the batch of ROW waits (writing it, or
# only by OP: INSERT or UPDATE).
killed_run() {
    q "INSERT INTO hold VALUES ($1, nullif('${2:-}', ''))" >/dev/null
    "$V7FILL" "${args[@]}" >"copy.log" 2>&1 &
    pid=$!
    wait_held "$pid" copy.log "the batch of row $1"
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=
    q "DELETE FROM hold;
       SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'" >/dev/null
}
# redo TARGET SLOT SOURCE_SQL [ARGS...]: the first copy into TARGET killed while row 20000's
# batch waits, SOURCE_SQL run on the source, the stream run again to caught up.
redo() {
    local target=$1 slot=$2 change=$3
    shift 3
    q "CREATE TABLE $target (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                             created_at timestamptz NOT NULL, amount int, note text)
           PARTITION BY RANGE (id);
       CREATE TRIGGER wait_held_row BEFORE INSERT OR UPDATE ON $target FOR EACH ROW EXECUTE FUNCTION wait_held_row()" >/dev/null
    args=(stream "$target" --source "dbname=$SRC" --from public.orders --publication pub
          --slot "$slot" --map id=legacy_id --batch-rows 1000 --until-caught-up "$@")
    killed_run 20000
    # between the slot's consistent point and the second copy's view
    qs "$change"
    if [ -n "${second:-}" ]; then
        killed_run "$second"
        second=
        assert_eq "$after_second" "$(q "$after_second_sql")" "the second copy wrote it"
    fi
    if [ -n "${replay_held:-}" ]; then
        killed_run "$replay_held" UPDATE
        replay_held=
        assert_eq stream "$(q "SELECT phase FROM v7fill.stream WHERE slot = '$slot'")" "the copy ended before the kill"
    fi
    run_expect 0 "$V7FILL" "${args[@]}"
}

replay_held=100001
redo orders_v7 "$SLOT" "UPDATE orders SET id = 100001, amount = -1 WHERE id = 5000;
                        UPDATE orders SET id = 100002 WHERE id = 25000;
                        UPDATE orders SET id = 25000, amount = -2 WHERE id = 26000;
                        UPDATE orders SET id = id + 200000 WHERE id BETWEEN 1001 AND 1012"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.stream_quarantine WHERE slot = '$SLOT' AND row::text LIKE '%100001%'")" \
    "a: the change of row 5000 not quarantined"
assert_eq "-1" "$(q "SELECT amount FROM orders_v7 WHERE legacy_id = 100001")" "a: the moved row has the update's values"
assert_eq 0 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 5000")" "a: the old key is gone (the source has no row 5000)"
assert_eq "-2|64000" "$(q "SELECT amount, length(note) FROM orders_v7 WHERE legacy_id = 25000")" \
    "a: the row the second copy wrote under a key taken again stays, its note too"
assert_eq 25000 "$(q "SELECT amount FROM orders_v7 WHERE legacy_id = 100002")" "a: the row that left that key"
assert_eq "30000|30000" "$(q "SELECT count(*), count(DISTINCT legacy_id) FROM orders_v7")" "a: one row per source row"
assert_contains "$OUT" "the row the first copy wrote under the old key was deleted" "a: the merge logged"
assert_eq "0|12" "$(q "SELECT count(*) FILTER (WHERE legacy_id BETWEEN 1001 AND 1012),
                             count(*) FILTER (WHERE legacy_id BETWEEN 201001 AND 201012) FROM orders_v7")" \
    "a: twelve more keys moved, each row under its new key only"
# thirteen merges (the batch is written more than once): the first ten named, no more
assert_eq 10 "$(grep -c 'the row the first copy wrote under the old key was' <<<"$OUT")" "a: ten merges named"
assert_contains "$OUT" "(further ones are not named; the count of updates has them)" "a: the last named says so"
assert_eq 1 "$(q "SELECT count(*) FROM v7fill.stream WHERE slot = '$SLOT' AND copy_view_lsn > '0/0'")" \
    "the redone copy's view stored"

redo orders_arch "${SLOT}_b" "DELETE FROM orders WHERE id = 100;
                              UPDATE orders SET id = 100, amount = -2 WHERE id = 6000" --on-delete ignore
assert_eq 1 "$(q "SELECT count(*) FROM v7fill.stream_quarantine WHERE slot = '${SLOT}_b' AND source_lsn IS NOT NULL")" \
    "b: the key change quarantined"
assert_eq 100 "$(q "SELECT amount FROM orders_arch WHERE legacy_id = 100")" "b: the deleted row kept as it was"
assert_eq 6000 "$(q "SELECT amount FROM orders_arch WHERE legacy_id = 6000")" "b: the row under the old key stays"
assert_eq "30000|30000" "$(q "SELECT count(*), count(DISTINCT legacy_id) FROM orders_arch")" "b: no row lost"

# c. A copy redone twice: the second copy (under a fresh view) is killed after it wrote the
#    row that took a key again (28000 -> 27000, after 27000 -> 100003) and before the new rows
#    at the table's end; the third copy finds it a duplicate.  That row is not an earlier
#    copy's row of the row leaving 27000 (whose change is replayed after it): it stays.
second=301999 after_second="-3" after_second_sql="SELECT amount FROM orders_c WHERE legacy_id = 27000"
redo orders_c "${SLOT}_c" "UPDATE orders SET id = 100003 WHERE id = 27000;
                           UPDATE orders SET id = 27000, amount = -3 WHERE id = 28000;
                           INSERT INTO orders SELECT g, now(), g FROM generate_series(300000, 301999) g"
assert_eq "-3|64000" "$(q "SELECT amount, length(note) FROM orders_c WHERE legacy_id = 27000")" \
    "c: the row that took the key again stays, its note too"
assert_eq 27000 "$(q "SELECT amount FROM orders_c WHERE legacy_id = 100003")" "c: the row that left that key"
assert_eq "$(qs "SELECT count(*) FROM orders")|$(qs "SELECT count(*) FROM orders")" \
    "$(q "SELECT count(*), count(DISTINCT legacy_id) FROM orders_c")" "c: one row per source row"

