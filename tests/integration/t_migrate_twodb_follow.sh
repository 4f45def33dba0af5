# v7fill migrate --follow between two databases with an expand-mode child (issue 21): no trigger
# can reach the child rows the application writes while the parent is followed (the child is on
# the source, the map on the target), so a pass over the rows whose order_id_uuid is still NULL
# runs every few seconds beside the stream.  A child row of an old parent and one of a parent
# written in the same transaction get their order_id_uuid while --follow runs, each the id the
# target gave its parent; a row of no parent keeps NULL; SIGINT stops both, exit 0, and the log
# counts the passes.  (Before, such rows kept NULL until the next run or the switch.)  A key the
# application changes makes order_id_uuid NULL at once (a trigger on the child: before, the row
# kept the old parent's id through --follow and the switch) and a pass gives it the new parent's.
# SIGINT while a pass waits on a row lock ends the run at once (the pass's statement is cancelled).
# The passes read the rows still NULL through a partial index of them, built after the first fill
# (an interrupted build, left INVALID, is built again by the next run).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=orders_2dbf
source_db_fresh
drop_mig_slots() {
    qs "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
         WHERE slot_name LIKE 'v7fill\_${INTO}%' AND NOT active" >/dev/null 2>&1 || true
}
trap '[ -z "$fpid" ] || kill -9 "$fpid" 2>/dev/null || true; drop_mig_slots; psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$SRC\"" >/dev/null 2>&1; rm -rf "$T_TMP"' EXIT
fpid=
qs "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    INSERT INTO orders (created_at, note)
      SELECT timestamptz '2024-01-01' + g * interval '7 hours', 'n' || g FROM generate_series(1, 500) g;
    CREATE TABLE items (id serial PRIMARY KEY, order_id bigint REFERENCES orders (id), qty int);
    INSERT INTO items (order_id, qty) SELECT g % 500 + 1, g FROM generate_series(1, 800) g" >/dev/null
"$V7FILL" migrate --source "dbname=$SRC" --from public.orders --key id --time-column created_at \
    --into "$INTO" --child 'public.items(order_id)' --follow >follow.out 2>&1 &
fpid=$!
# sigint_timed HOLD: SIGINT to the run ($fpid), its exit status in st and the ms it took to end
# in took; then the transaction HOLD (hold_open) closed.
sigint_timed() {
    local t0
    t0=$(date +%s%3N)
    kill -INT "$fpid"
    set +e; wait "$fpid"; st=$?; set -e
    took=$(( $(date +%s%3N) - t0 ))
    fpid=
    hold_close "$1"
}
src_until() { # SQL WHAT: poll SQL on the source (a boolean query) for 30 s
    for _ in $(seq 1 300); do
        [ "$(qs "$1" 2>/dev/null)" = t ] && return 0
        kill -0 "$fpid" 2>/dev/null || fail "--follow ended early: $(cat follow.out)"
        sleep 0.1
    done
    fail "waited 30 s for $2: $(cat follow.out)"
}
src_until "SELECT count(*) = 800 FROM items WHERE order_id_uuid IS NOT NULL" "the first run's fill"
qs "INSERT INTO items (order_id, qty) VALUES (3, -1);
    BEGIN;
    WITH o AS (INSERT INTO orders (created_at, note) VALUES ('2026-01-01', 'during follow') RETURNING id)
    INSERT INTO items (order_id, qty) SELECT id, -2 FROM o;
    COMMIT" >/dev/null
# Keys the application changes: the trigger on the child makes order_id_uuid NULL (never the
# old parent's id), a pass gives it the new parent's; a key set NULL leaves it NULL.
old10=$(qs "SELECT order_id_uuid FROM items WHERE id = 10")
[ -n "$old10" ] || fail "item 10 has a uuid before its key changes"
qs "UPDATE items SET order_id = 7 WHERE id = 10; UPDATE items SET order_id = NULL WHERE id = 11" >/dev/null
qs "ALTER TABLE items DROP CONSTRAINT items_order_id_fkey; INSERT INTO items (order_id, qty) VALUES (99999, -3)" >/dev/null
src_until "SELECT count(*) = 2 FROM items WHERE qty IN (-1, -2) AND order_id_uuid IS NOT NULL" \
    "the child rows written during --follow to get order_id_uuid"
src_until "SELECT order_id_uuid IS NOT NULL FROM items WHERE id = 10" "the changed key's row to get its uuid again"
kill -0 "$fpid" || fail "--follow is still running"
while read -r legacy uuid; do
    assert_eq "$uuid" "$(q "SELECT id FROM $INTO WHERE legacy_id = $legacy")" "the child of parent $legacy has the id the target gave it"
done < <(qs "SELECT order_id, order_id_uuid FROM items WHERE qty IN (-1, -2) OR id = 10" | tr '|' ' ')
assert_eq "|" "$(qs "SELECT order_id, order_id_uuid FROM items WHERE id = 11")" "a key set NULL leaves no uuid"
assert_eq "" "$(qs "SELECT order_id_uuid FROM items WHERE qty = -3")" "a row of no parent keeps NULL"
kill -INT "$fpid"
set +e; wait "$fpid"; st=$?; set -e
fpid=
cat follow.out
assert_eq "0" "$st" "--follow stops on SIGINT with status 0"
assert_contains "$(cat follow.out)" "rows written during --follow given their order_id_uuid" "the pass that set them is logged"
assert_contains "$(cat follow.out)" "children during --follow: 3 rows given their <fk>_uuid in" "the passes counted at the end"
# The passes read the rows still NULL through a partial index of them, not along the whole child.
assert_eq "t|CREATE INDEX items_order_id_uuid_unset ON public.items USING btree (id) WHERE ((order_id IS NOT NULL) AND (order_id_uuid IS NULL))" \
    "$(qs "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
            WHERE x.relname = 'items_order_id_uuid_unset'")" "the index of the rows still NULL"
assert_contains "$(cat follow.out)" "index items_order_id_uuid_unset built on the rows whose order_id_uuid is still NULL" "its build logged"
assert_eq t "$(qs "SELECT idx_scan > 0 FROM pg_stat_user_indexes WHERE indexrelname = 'items_order_id_uuid_unset'")" \
    "the passes read through it"

# A build of that index interrupted (a kill during it; here a statement timeout while a writer
# holds the child) leaves it INVALID: the next run drops it and builds it again.
qs "DROP INDEX items_order_id_uuid_unset" >/dev/null
PGDATABASE=$SRC hold_open wr "UPDATE items SET qty = qty WHERE id = 1"
PGOPTIONS="-c statement_timeout=1000" qs "CREATE INDEX CONCURRENTLY items_order_id_uuid_unset ON items (id)
    WHERE order_id IS NOT NULL AND order_id_uuid IS NULL" >/dev/null 2>&1 && fail "the index build was not interrupted"
assert_eq f "$(qs "SELECT indisvalid FROM pg_index WHERE indexrelid = 'items_order_id_uuid_unset'::regclass")" \
    "the interrupted build left the index invalid"
# The run's own build waits for that writer too: SIGINT cancels it (exit 130), at once.
"$V7FILL" migrate --source "dbname=$SRC" --from public.orders --key id --time-column created_at \
    --into "$INTO" --child 'public.items(order_id)' >build.out 2>&1 &
fpid=$!
for _ in $(seq 1 300); do grep -q "building index items_order_id_uuid_unset" build.out && break; sleep 0.1; done
poll_until "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = '$SRC' AND query LIKE '%INDEX CONCURRENTLY%'
            AND wait_event_type = 'Lock'" "the run's index build to wait for the writer" 20
sigint_timed wr
assert_eq 130 "$st" "SIGINT during the index build: exit 130 ($(cat build.out))"
[ "$took" -lt 5000 ] || fail "the run took $took ms to stop: the index build was not cancelled"
assert_contains "$(cat build.out)" "(Ctrl-C) while building index items_order_id_uuid_unset" "the interruption said"

# SIGINT while a pass waits: the pass's statement is cancelled, not waited for.  A row the pass
# must write is held locked by another session; with --lock-timeout 60000 the pass would wait
# a minute for it (a pass over a large child reads it for seconds just the same).
"$V7FILL" migrate --source "dbname=$SRC" --from public.orders --key id --time-column created_at \
    --into "$INTO" --child 'public.items(order_id)' --follow --lock-timeout 60000 >follow2.out 2>&1 &
fpid=$!
src_until "SELECT count(*) = 0 FROM items WHERE qty IN (-1, -2) AND order_id_uuid IS NULL" "the second run"
sleep 1
PGDATABASE=$SRC hold_open lk "COMMIT; INSERT INTO items (order_id, qty) VALUES (5, -7); BEGIN;
    SELECT * FROM items WHERE qty = -7 FOR UPDATE"
poll_until "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = '$SRC' AND wait_event_type = 'Lock'" \
    "the pass to wait for the locked row" 20
sigint_timed lk
cat follow2.out
assert_eq "0" "$st" "--follow stops on SIGINT with status 0 while a pass waits"
[ "$took" -lt 10000 ] || fail "--follow took $took ms to stop: the waiting pass was not cancelled"
assert_not_contains "$(cat follow2.out)" "failed (" "the cancelled pass is not reported as a failure"
assert_contains "$(cat follow2.out)" "index items_order_id_uuid_unset built" "the invalid index built again"
assert_eq t "$(qs "SELECT indisvalid FROM pg_index WHERE indexrelid = 'items_order_id_uuid_unset'::regclass")" \
    "the index valid again"
echo "stopped $took ms after SIGINT while a pass waited on a lock"
echo ok
