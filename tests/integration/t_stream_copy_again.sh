# An initial copy interrupted after some of its batches committed (kill -9 while a later batch
# waits on the target), then the same command: the copy runs again under a fresh view, and each
# row the target refuses (a NULL time, a pre-1970 time) is in the quarantine once, not once per
# attempt (and the stream's stored counts say 3 rejected, balancing); every other row is in the
# target once.  The copy records its rows for the report every --record-every seconds as it
# goes: the killed copy's records stay in the report.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db
trap 'kill -9 ${pid:-} 2>/dev/null || true; drop_slots; rm -rf "$T_TMP"' EXIT

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz, amount int);
    INSERT INTO orders SELECT g, CASE WHEN g IN (5, 7) THEN NULL WHEN g = 9 THEN '1969-07-20 20:17:40+00'
                                      ELSE now() - (g || ' minutes')::interval END, g
                         FROM generate_series(1, 30000) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
# The target: the batch holding row 20000 waits while the table hold has a row (the one holding
# row 10000 for 1.2 s: the copy records a segment after it).
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id);"
hold_inserts orders_v7 20000 10000
args=(stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub
      --slot "$SLOT" --map id=legacy_id --batch-rows 1000 --until-caught-up --record-every 1)

"$V7FILL" "${args[@]}" >run1.log 2>&1 &
pid=$!
wait_held "$pid" run1.log "the batch of row 20000"
assert_eq copy "$(q "SELECT phase FROM v7fill.stream WHERE slot = '$SLOT'")" "killed during the copy"
committed=$(q "SELECT count(*) FROM orders_v7")
[ "$committed" -gt 1000 ] || fail "batches before the held one committed: $committed rows"
assert_eq 3 "$(q "SELECT count(*) FROM v7fill.stream_quarantine WHERE slot = '$SLOT'")" \
    "the first attempt quarantined rows 5, 7, 9 with its first batch"
# the copy's rows recorded for the report as it goes (here after the batch that took 1.2 s)
recorded=$(q "SELECT coalesce(sum(inserted), 0) FROM v7fill.run WHERE command = 'stream' AND status = 'copying'")
[ "$recorded" -ge 9997 ] || fail "the copy recorded its rows for the report as it went: $recorded rows"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=
q "DELETE FROM hold;
   SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'" >/dev/null

run_expect 0 "$V7FILL" "${args[@]}"
echo "$OUT"
assert_contains "$OUT" "copying again under a fresh view" "the rerun copies again"
assert_contains "$OUT" "3 rows the earlier copy of public.orders quarantined are forgotten (3 refused, 0 expired)" \
    "the rerun says what it forgot"
assert_eq "5 missing event time|7 missing event time|9 time out of range" \
    "$(q "SELECT string_agg((row ->> 'id') || ' ' || split_part(reason, ':', 1), '|' ORDER BY (row ->> 'id')::int)
            FROM v7fill.stream_quarantine WHERE slot = '$SLOT'")" \
    "each refused row in the quarantine once, with its reason"
assert_eq "29997|29997" "$(q "SELECT count(*), count(DISTINCT legacy_id) FROM orders_v7")" \
    "every other row in the target once"
assert_eq "3|t" "$(q "SELECT rejected, read = inserted + duplicates + rejected + expired FROM v7fill.stream WHERE slot = '$SLOT'")" \
    "the stream's stored counts: 3 rejected, as the quarantine holds, and read balances"
# The report: the killed copy's recorded rows and the rerun's; lost are only the rows the killed
# copy committed after its last record (found again as duplicates, which are not tracked).
"$V7FILL" report orders_v7 --retention 400d --json >rep.json 2>rep.err || fail "report: $(cat rep.err)"
assert_eq "$((recorded + 29997 - committed))" \
    "$(python3 -c 'import json; print(json.load(open("rep.json"))["delay"]["rows"])')" \
    "the report counts the killed copy's recorded rows and the rerun's"
drop_slots
