# One slot, several tables (issue 19): `--from SCHEMA.TABLE=TARGET` twice.  A
# writer changes both tables inside the same source transactions (and some
# transactions touch only one) during the copy and the stream; v7fill is
# killed (-9) several times and run again; after a catch-up each target
# equals its source (count, key sum, md5 of every column), no row twice, each
# target's stored position is at or past the slot's confirmed_flush_lsn (the
# slot confirms only the least position of all the targets), and the usage
# errors of the several-tables form name the flag or the table; SIGTERM exits 0;
# after the copies no restart replays what a target has (no duplicates); streamed transactions
# (protocol 2) are spooled by each table's stream and applied whole at their commit.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
    CREATE TABLE items (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, qty int, label text);
    CREATE TABLE outside (id bigint PRIMARY KEY, created_at timestamptz NOT NULL);
    INSERT INTO orders SELECT g, now() - (g || ' seconds')::interval, g, 'n' FROM generate_series(1, 20000) g;
    INSERT INTO items SELECT g, now() - (g || ' seconds')::interval, g % 7, 'i' FROM generate_series(1, 15000) g;
    CREATE PUBLICATION pub FOR TABLE orders, items;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int, note text)
   PARTITION BY RANGE (id);
   CREATE TABLE items_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                          created_at timestamptz NOT NULL, qty int, label text)
   PARTITION BY RANGE (id)"
digest_src() { qs "SELECT count(*), sum(id), md5(string_agg(id||'|'||created_at||'|'||$2||'|'||$3, ',' ORDER BY id)) FROM $1"; }
digest_dst() { q "SELECT count(*), sum(legacy_id), md5(string_agg(legacy_id||'|'||created_at||'|'||$2||'|'||$3, ',' ORDER BY legacy_id)) FROM $1"; }
common=(--source "dbname=$SRC" --publication pub --map id=legacy_id)
args=(-q stream "${common[@]}" --slot "$SLOT" --from public.orders=orders_v7 --from public.items=items_v7
      --group-rows 300 --group-ms 50 --batch-rows 2000)

# ---- usage and configuration errors --------------------------------------------
run_expect 2 "$V7FILL" stream orders_v7 "${common[@]}" --slot "${SLOT}_e" --from public.orders=orders_v7 --from public.items=items_v7
assert_contains "$OUT" "--from SCHEMA.TABLE=TARGET names the targets: no TABLE argument" "a TABLE with =TARGET forms"
run_expect 2 "$V7FILL" stream orders_v7 "${common[@]}" --slot "${SLOT}_e" --from public.orders --from public.items
assert_contains "$OUT" "--from given 2 times" "two --from without =TARGET"
run_expect 2 "$V7FILL" stream "${common[@]}" --slot "${SLOT}_e" --from public.orders=orders_v7 --from public.items
assert_contains "$OUT" "--from: either one SCHEMA.TABLE" "mixed --from forms"
run_expect 2 "$V7FILL" stream "${common[@]}" --slot "${SLOT}_e" --from public.orders=orders_v7 --from public.items=orders_v7
assert_contains "$OUT" "target orders_v7 given twice" "one target twice"
run_expect 3 "$V7FILL" stream "${common[@]}" --slot "${SLOT}_e" --from public.orders=orders_v7 --from public.outside=items_v7
assert_contains "$OUT" "outside" "a table not in the publication is named"
run_expect 2 "$V7FILL" stream "${common[@]}" --slot "${SLOT}_e" --from public.orders=orders_v7 --from public.items=items_v7 --map nosuch=amount
assert_contains "$OUT" "--map nosuch" "a --map column no table has"
run_expect 2 "$V7FILL" stream --source "dbname=$SRC" --publication pub --slot "${SLOT}_e" --from public.orders=orders_v7 --from public.items=items_v7 --key-map id
assert_contains "$OUT" "--key-map takes one --from" "--key-map with several tables"
assert_eq 0 "$(psql -X -At -d postgres -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '${SLOT}_e'")" "no slot made by a refused run"

# ---- the writer: both tables in one transaction, or one of them --------------------
cat >both.sql <<'SQL'
\set k random(1, 40000)
BEGIN;
INSERT INTO orders SELECT g, now() - interval '5 minutes', 1, 'w' FROM generate_series(:k * 10 + 100000, :k * 10 + 100004) g ON CONFLICT DO NOTHING;
INSERT INTO items SELECT g, now() - interval '4 minutes', 2, 'w' FROM generate_series(:k * 10 + 100000, :k * 10 + 100002) g ON CONFLICT DO NOTHING;
UPDATE orders SET amount = amount + 1, note = note || 'u' WHERE id = :k;
UPDATE items SET qty = qty + 1, label = label || 'u' WHERE id = :k + 2;
DELETE FROM orders WHERE id = :k + 1;
DELETE FROM items WHERE id = :k + 3;
INSERT INTO orders VALUES (:k + 1, now() - interval '1 minute', 7, 'again') ON CONFLICT DO NOTHING;
COMMIT;
SQL
cat >orders_only.sql <<'SQL'
\set k random(1, 40000)
BEGIN;
UPDATE orders SET amount = amount + 3 WHERE id = :k;
INSERT INTO orders VALUES (:k * 10 + 700000, now() - interval '2 minutes', 9, 'o') ON CONFLICT DO NOTHING;
COMMIT;
SQL
"$PGBIN/pgbench" -n -c 2 -T 600 -f both.sql@3 -f orders_only.sql@1 "$SRC" >writer.log 2>&1 &
writer=$!

# The monitor: the slot's confirmed position never ahead of any target's stored one.
( while :; do
      c=$(psql -X -At -d postgres -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'" 2>/dev/null)
      if [ -n "$c" ]; then
          bad=$(q "SELECT string_agg(target || ' at ' || end_lsn, ', ') FROM v7fill.stream WHERE slot = '$SLOT' AND end_lsn < '$c'::pg_lsn" 2>/dev/null || true)
          [ -z "$bad" ] || echo "confirmed $c ahead of $bad" >>violations
      fi
      sleep 0.1
  done ) &
monitor=$!
trap 'kill $writer $monitor 2>/dev/null || true; drop_slots; rm -rf "$T_TMP"' EXIT

# The first run copies both tables while the writer runs; killed once both
# stream.  From then on a restart must replay nothing a target has: no insert
# comes again as a duplicate (the writer never inserts a key twice).
"$V7FILL" "${args[@]}" >run0.log 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    [ "$(q "SELECT count(*) FROM v7fill.stream WHERE slot = '$SLOT' AND phase = 'stream'" 2>/dev/null || echo 0)" = 2 ] && break
    sleep 0.1
done
sleep 1
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
assert_eq 2 "$(q "SELECT count(*) FROM v7fill.stream WHERE slot = '$SLOT' AND phase = 'stream'")" "both initial copies done ($(tail -3 run0.log))"
dups0=$(q "SELECT target || '=' || duplicates FROM v7fill.stream WHERE slot = '$SLOT' ORDER BY target" | tr '\n' ' ')
for i in $(seq 1 8); do
    "$V7FILL" "${args[@]}" >"run$i.log" 2>&1 &
    pid=$!
    sleep "$(rand_secs 0.5 3.0)"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
# One run long enough for the idle positions to move (a target whose table a
# transaction did not touch still advances).
"$V7FILL" "${args[@]}" >run_long.log 2>&1 &
pid=$!
sleep 12
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
# SIGTERM while the writer runs: every target commits its group, exit 0.
"$V7FILL" "${args[@]}" >run_term.log 2>&1 &
pid=$!
sleep 4
kill -TERM "$pid"
set +e; wait "$pid"; rc=$?; set -e
assert_eq 0 "$rc" "SIGTERM stops the stream of every table with exit status 0 ($(tail -3 run_term.log))"
kill $writer 2>/dev/null || true
wait $writer 2>/dev/null || true
run_expect 0 "$V7FILL" "${args[@]}" --until-caught-up
echo "$OUT"
kill $monitor 2>/dev/null || true
wait $monitor 2>/dev/null || true

assert_eq 2 "$(q "SELECT count(*) FROM v7fill.stream WHERE slot = '$SLOT'")" "one stream row per target"
# the source columns each target last ran with (checked for drops at the next start) are its own table's
assert_eq "items_v7:id,created_at,qty,label orders_v7:id,created_at,amount,note" \
    "$(q "SELECT string_agg(target || ':' || (SELECT string_agg(e->>'name', ',' ORDER BY i)
                                              FROM jsonb_array_elements(columns) WITH ORDINALITY x(e, i)), ' ' ORDER BY target)
          FROM v7fill.stream WHERE slot = '$SLOT'")" "each target's stored source columns are its own table's"
assert_eq "$(digest_src orders amount note)" "$(digest_dst orders_v7 amount note)" "orders_v7 equals orders"
assert_eq "$(digest_src items qty label)" "$(digest_dst items_v7 qty label)" "items_v7 equals items"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM orders_v7 GROUP BY 1 HAVING count(*) > 1) d")" "no order twice"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM items_v7 GROUP BY 1 HAVING count(*) > 1) d")" "no item twice"
c=$(psql -X -At -d postgres -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
assert_eq 2 "$(q "SELECT count(*) FROM v7fill.stream WHERE slot = '$SLOT' AND end_lsn >= '$c'::pg_lsn")" "each target's stored LSN >= the slot's confirmed_flush_lsn ($c)"
[ ! -s violations ] || fail "the slot ran ahead of a target: $(head -3 violations)"
assert_eq "$dups0" "$(q "SELECT target || '=' || duplicates FROM v7fill.stream WHERE slot = '$SLOT' ORDER BY target" | tr '\n' ' ')" "no restart replayed a transaction its target had (duplicates per target)"

# A transaction touching only orders moves items_v7's position too.
before=$(qs "SELECT pg_current_wal_lsn()")
qs "UPDATE orders SET amount = amount + 1 WHERE id = 5"
run_expect 0 "$V7FILL" "${args[@]}" --until-caught-up
assert_eq 2 "$(q "SELECT count(*) FROM v7fill.stream WHERE slot = '$SLOT' AND end_lsn > '$before'::pg_lsn")" "both targets past a commit that touched only orders"
assert_eq "$(digest_src orders amount note)" "$(digest_dst orders_v7 amount note)" "orders_v7 still equals orders"

# --status of either target: its own row, and one line per target.
run_expect 0 "$V7FILL" stream items_v7 --status --slot "$SLOT" --source "dbname=$SRC"
assert_contains "$OUT" "public.items -> items_v7 (publication pub, phase stream)" "--status of items_v7 shows its row"
assert_contains "$OUT" "public.orders -> orders_v7 phase stream position" "--status lists every target"
run_expect 0 "$V7FILL" stream orders_v7 --status --json --slot "$SLOT"
assert_contains "$OUT" '"target": "items_v7"' "--status --json lists every target"
# each target's object carries its own position and counts, as v7fill.stream holds them
assert_eq "$(q "SELECT string_agg(concat_ws(',', target, end_lsn, inserted, updated, deleted, duplicates), ' ' ORDER BY target) FROM v7fill.stream WHERE slot = '$SLOT'")" \
    "$(python3 -c 'import json, sys; print(" ".join(",".join(str(t[k]) for k in ("target", "stored_lsn", "inserted", "updated", "deleted", "duplicates")) for t in sorted(json.load(sys.stdin)["targets"], key=lambda t: t["target"])))' <<<"$OUT")" \
    "--status --json: each target's position and counts"

# --metrics-listen with two targets (a new slot, fresh targets): every target's series with its
# table label, its counts equal to its table's rows; the slot's series once; one HELP and TYPE
# per family; /readyz names the target that is not ready yet, and is ready once both stream.
# A large transaction of items (the second target), applied in pieces of --batch-rows 1000,
# loses its target connection in the middle: the reconnect is counted for items_m7 alone, and
# each target's delay histogram counts each of its inserted rows once (not the rolled-back pieces).
# (The piece holding item 3,050,000 waits while the table hold has a row: the transaction is
# open for sure when its connection is ended, however fast the pieces go.)
q "CREATE TABLE orders_m7 (LIKE orders_v7 INCLUDING ALL) PARTITION BY RANGE (id);
   CREATE TABLE items_m7 (LIKE items_v7 INCLUDING ALL) PARTITION BY RANGE (id);
   CREATE TABLE hold (x int);
   INSERT INTO hold VALUES (1);
   CREATE FUNCTION wait_big() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN
       IF NEW.legacy_id = 3050000 AND EXISTS (SELECT 1 FROM hold) THEN PERFORM pg_sleep(60); END IF;
       RETURN NEW;
   END \$\$;
   CREATE TRIGGER wait_big BEFORE INSERT ON items_m7 FOR EACH ROW EXECUTE FUNCTION wait_big()" >/dev/null
cc -std=c11 -D_GNU_SOURCE -o expo_check "$V7FILL_ROOT/tests/integration/expo_check_main.c" -lm 2>cc.log \
    || fail "could not compile the format checker: $(head -n 5 cc.log)"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
metric() { awk -v k="$1" '$1 == k { print $2 }' scrape.txt; }
# counted: each target's /metrics counts are its stored ones, each insert's delay observed
counted() {
    local t T ins
    for t in orders_m7 public.items_m7; do
        T="table=\"$t\""
        ins=$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")
        [ "$(q "SELECT inserted || ' ' || updated || ' ' || deleted FROM v7fill.stream WHERE slot = '${SLOT}_m' AND target = '$t'")" \
          = "$ins $(metric "v7fill_stream_rows_applied_total{$T,op=\"update\"}") $(metric "v7fill_stream_rows_applied_total{$T,op=\"delete\"}")" ] \
            && [ "$ins" = "$(metric "v7fill_stream_insert_delay_seconds_count{$T}")" ] || return 1
    done
}
"$V7FILL" stream "${common[@]}" --slot "${SLOT}_m" --from public.orders=orders_m7 \
    --from public.items=public.items_m7 --metrics-listen "127.0.0.1:$PORT" --batch-rows 1000 >run_m.log 2>&1 &
mpid=$!
trap 'kill $mpid 2>/dev/null || true; drop_slots; rm -rf "$T_TMP"' EXIT
: >readyz.txt
for _ in $(seq 1 1200); do
    rm -f readyz1.txt
    code=$(curl -s "http://127.0.0.1:$PORT/readyz" -o readyz1.txt -w '%{http_code}' || true)
    [ ! -e readyz1.txt ] || cat readyz1.txt >>readyz.txt
    [ "$code" = 200 ] && break
    sleep 0.05
done
assert_eq 200 "$code" "/readyz: ready once both targets stream ($(tail -3 run_m.log))"
grep -q -e '^not ready: orders_m7: ' -e '^not ready: public.items_m7: ' readyz.txt \
    || fail "/readyz before ready names the target that is not ready: $(sort -u readyz.txt | head -5)"
# the rows copied: the source is quiet (the writer stopped)
copied="$(qs "SELECT count(*) FROM orders") $(qs "SELECT count(*) FROM items")"
# (the writer never deleted items 1 to 3: its deletes are of ids from 4; its keys stay below
# 1,100,001: orders_only's reach 1,100,000)
qs "INSERT INTO orders SELECT g, now(), 1, 'm' FROM generate_series(2000001, 2000010) g;
    INSERT INTO items SELECT g, now(), 1, 'm' FROM generate_series(2000001, 2000005) g;
    UPDATE items SET qty = qty + 1 WHERE id IN (1, 2, 3);
    DELETE FROM orders WHERE id IN (2000001, 2000002)"
synced() {
    for _ in $(seq 1 600); do
        [ "$(q "SELECT (SELECT count(*) FROM orders_m7) || ' ' || (SELECT count(*) FROM items_m7)")" \
          = "$(qs "SELECT (SELECT count(*) FROM orders) || ' ' || (SELECT count(*) FROM items)")" ] && return
        sleep 0.1
    done
}
synced
qs "INSERT INTO items SELECT g, now(), 1, 'big' FROM generate_series(3000001, 3100000) g"
poll_until "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep')" \
    "the piece of the large items transaction that waits ($(tail -3 run_m.log))"
assert_eq t "$(q "DELETE FROM hold;
                  SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM pg_stat_activity
                   WHERE datname = current_database() AND wait_event = 'PgSleep'")" \
    "the target transaction of the large items transaction ended in its middle"
synced
scrape_until counted
kill -TERM $mpid
wait $mpid || fail "the stream with --metrics-listen did not stop with status 0: $(tail -5 run_m.log)"
./expo_check <scrape.txt 2>check.err || fail "the scrape breaks the format: $(cat check.err)"
assert_eq "" "$(grep -E '^# (HELP|TYPE) ' scrape.txt | cut -d' ' -f2,3 | sort | uniq -d)" "one HELP and one TYPE per family"
for t in orders_m7:orders public.items_m7:items; do
    T="table=\"${t%%:*}\""
    rows=$(q "SELECT count(*) FROM ${t%%:*}")
    assert_eq "$(qs "SELECT count(*) FROM ${t#*:}")" "$rows" "${t%%:*} equals ${t#*:}"
    ins=$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")
    del=$(metric "v7fill_stream_rows_applied_total{$T,op=\"delete\"}")
    [ -n "$ins" ] && [ -n "$del" ] || fail "${t%%:*}: no rows_applied_total series with $T"
    assert_eq "$rows" "$(( ins - del ))" "${t%%:*}: its inserts less its deletes in /metrics = its rows"
    assert_eq "$(q "SELECT inserted || ' ' || updated || ' ' || deleted FROM v7fill.stream WHERE slot = '${SLOT}_m' AND target = '${t%%:*}'")" \
        "$ins $(metric "v7fill_stream_rows_applied_total{$T,op=\"update\"}") $del" "${t%%:*}: /metrics counts = its stored counts"
    [ "$(metric "v7fill_stream_target_commits_total{$T}")" -gt 0 ] 2>/dev/null || fail "${t%%:*}: its own target commits"
    [ -n "$(metric "v7fill_stream_last_applied_lsn{$T}")" ] || fail "${t%%:*}: its own last applied LSN"
    assert_eq 0 "$(metric "v7fill_stream_initial_copy_running{$T}")" "${t%%:*}: its copy is over"
done
assert_eq "2 3 $copied" "$(metric 'v7fill_stream_rows_applied_total{table="orders_m7",op="delete"}') $(metric 'v7fill_stream_rows_applied_total{table="public.items_m7",op="update"}') $(metric 'v7fill_stream_initial_copy_rows_total{table="orders_m7"}') $(metric 'v7fill_stream_initial_copy_rows_total{table="public.items_m7"}')" \
    "each target's deletes, updates and copied rows are its own"
assert_contains "$(cat run_m.log)" "lost its target transaction" "the large items transaction lost its target connection"
for T in 'table="orders_m7"' 'table="public.items_m7"'; do
    assert_eq "$(metric "v7fill_stream_rows_applied_total{$T,op=\"insert\"}")" "$(metric "v7fill_stream_insert_delay_seconds_count{$T}")" \
        "$T: the delay histogram counts each inserted row once (the rolled-back pieces are out)"
done
assert_eq "1 0 0" "$(metric 'v7fill_stream_reconnects_total{table="public.items_m7",side="target"}') $(metric 'v7fill_stream_reconnects_total{table="orders_m7",side="target"}') $(metric 'v7fill_stream_reconnects_total{table="",side="source"}')" \
    "the reconnect is items_m7's own target connection's (items, orders, source)"
assert_eq 1 "$(grep -c '^v7fill_stream_slot_retained_wal_bytes ' scrape.txt)" "the slot's retained WAL once, without a table"
assert_eq 1 "$(grep -c '^v7fill_stream_received_bytes_total ' scrape.txt)" "the bytes received once"
[ "$(metric v7fill_stream_received_bytes_total)" -gt 0 ] || fail "bytes received counted"

# Streamed transactions with two tables on one slot (protocol 2, streaming on): a source whose
# logical_decoding_work_mem is 64kB sends a transaction of a few hundred rows in blocks before
# its commit. Each table's stream spools it and applies it at its commit (never as it
# arrives: the tables commit apart); one touching both tables with a savepoint rolled back and
# another commit interleaved lands whole in both targets, a rolled-back one leaves nothing.
q "CREATE TABLE orders_s7 (LIKE orders_v7 INCLUDING ALL) PARTITION BY RANGE (id);
   CREATE TABLE items_s7 (LIKE items_v7 INCLUDING ALL) PARTITION BY RANGE (id)" >/dev/null
sargs=(stream --source "dbname=$SRC options='-c logical_decoding_work_mem=64kB'" --publication pub
       --map id=legacy_id --slot "${SLOT}_s" --from public.orders=orders_s7 --from public.items=items_s7)
run_expect 0 "$V7FILL" "${sargs[@]}" --until-caught-up
cat >streamed.sql <<EOF
BEGIN;
INSERT INTO orders SELECT g, now(), g, 'streamed' FROM generate_series(5000001, 5020000) g;
\! psql -X -q -d "$SRC" -c "INSERT INTO orders VALUES (5900001, now(), 1, 'meanwhile')"
INSERT INTO items SELECT g, now(), g % 7, 'streamed' FROM generate_series(5000001, 5015000) g;
SAVEPOINT s1;
INSERT INTO items SELECT g, now(), 1, 'rolled back' FROM generate_series(5100001, 5105000) g;
ROLLBACK TO SAVEPOINT s1;
UPDATE orders SET note = 'streamed update' WHERE id BETWEEN 5000001 AND 5000100;
COMMIT;
BEGIN;
INSERT INTO items SELECT g, now(), 1, 'aborted' FROM generate_series(5200001, 5220000) g;
ROLLBACK;
EOF
sqlf -d "$SRC" -f streamed.sql
run_expect 0 "$V7FILL" "${sargs[@]}" --until-caught-up
assert_contains "$OUT" "streamed_direct=0 streamed_spooled=2 streamed_aborted=2" \
    "each table's stream spooled the committed one and dropped the rolled-back one"
assert_eq "$(digest_src orders amount note)" "$(digest_dst orders_s7 amount note)" "streamed: orders_s7 equals orders"
assert_eq "$(digest_src items qty label)" "$(digest_dst items_s7 qty label)" "streamed: items_s7 equals items"
assert_eq 0 "$(q "SELECT count(*) FROM items_s7 WHERE label IN ('rolled back', 'aborted')")" "nothing rolled back landed"
run_expect 0 "$V7FILL" "${sargs[@]}" --until-caught-up --streaming off
assert_eq "$(digest_src items qty label)" "$(digest_dst items_s7 qty label)" "--streaming off after it: nothing twice"

# A new table for an existing slot is refused, naming it.
q "CREATE TABLE extra_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL, created_at timestamptz NOT NULL) PARTITION BY RANGE (id)"
qs "ALTER PUBLICATION pub ADD TABLE outside"
run_expect 3 "$V7FILL" "${args[@]}" --from public.outside=extra_v7 --until-caught-up
assert_contains "$OUT" "extra_v7 has no stream with that slot" "a table the slot was not created with"
drop_slots
