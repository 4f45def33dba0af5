# An initial copy killed (kill -9) after it recorded some of its rows for the report, then the
# same command: the copy runs again under a fresh view and reads every row again.  The rows
# already past the retention (expired: not inserted, quarantined, counted) must be counted by
# `v7fill report` once each, as the source holds them, not once by the killed copy's records
# and again by the copy run again (before: 300 expired rows in the source, about 400 in the
# report; the largest delays named some rows twice).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db
trap 'kill -9 ${pid:-} 2>/dev/null || true; drop_slots; rm -rf "$T_TMP"' EXIT

# 30,000 rows; every 100th is 40 days old, the oldest first (past a 30d retention: 300 expired
# rows, spread over the whole copy, the largest delays among the first), the others minutes old.
qs "CREATE TABLE events (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    INSERT INTO events SELECT g, CASE WHEN g % 100 = 0 THEN now() - interval '40 days' - ((30000 - g) || ' seconds')::interval
                                      ELSE now() - (g % 600 || ' seconds')::interval END, g
                         FROM generate_series(1, 30000) g;
    CREATE PUBLICATION pub FOR TABLE events;"
expired=$(qs "SELECT count(*) FROM events WHERE created_at < now() - interval '31 days'")
assert_eq 300 "$expired" "the source's expired rows"
# The target (day windows): the batch holding row 20000 waits while the table hold has a row;
# the one holding row 10000 takes 1.2 s, so that the copy records a segment after it.
q "CREATE TABLE events_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id);"
hold_inserts events_v7 20001 10001
run_expect 0 "$V7FILL" partitions events_v7 -g day --from "$(date -u -d '-2 days' +%Y-%m-%d)" \
    --to "$(date -u -d '+3 days' +%Y-%m-%d)"
args=(stream events_v7 --source "dbname=$SRC" --from public.events --publication pub
      --slot "$SLOT" --map id=legacy_id --batch-rows 1000 --until-caught-up --record-every 1
      --retention 30d)

"$V7FILL" "${args[@]}" >run1.log 2>&1 &
pid=$!
wait_held "$pid" run1.log "the batch of row 20001"
assert_eq copy "$(q "SELECT phase FROM v7fill.stream WHERE slot = '$SLOT'")" "killed during the copy"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=
cat run1.log
recorded=$(q "SELECT coalesce(sum(rows_read), 0) FROM v7fill.run WHERE command = 'stream' AND status = 'copying'")
[ "$recorded" -ge 10000 ] || fail "the killed copy recorded rows for the report as it went: $recorded rows"
q "DELETE FROM hold;
   SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'" >/dev/null

run_expect 0 "$V7FILL" "${args[@]}"
echo "$OUT"
assert_contains "$OUT" "copying again under a fresh view" "the rerun copies again"
assert_eq "29700|29700" "$(q "SELECT count(*), count(DISTINCT legacy_id) FROM events_v7")" \
    "every row within the retention in the target once"
assert_eq "$expired|$expired" "$(q "SELECT count(*), count(DISTINCT row ->> 'source_ref') FROM v7fill.stream_quarantine
                                     WHERE slot = '$SLOT' AND reason LIKE 'expired%'")" \
    "each expired row in the quarantine once"
assert_eq "$expired|t" "$(q "SELECT expired, read = inserted + duplicates + rejected + expired FROM v7fill.stream WHERE slot = '$SLOT'")" \
    "the stream's stored counts: each expired row once"
# What the user checks: the report's expired rows are the source's, each once, and no row is
# named twice among the largest delays (the expired rows are the largest).
"$V7FILL" report events_v7 --retention 30d --json >rep.json 2>rep.err || fail "report: $(cat rep.err)"
assert_eq "$expired" "$(python3 -c 'import json; print(json.load(open("rep.json"))["delay"]["counts"]["expired"])')" \
    "the report's expired rows: each of the source's once"
assert_eq "" "$(python3 -c '
import json, collections
d = json.load(open("rep.json"))
refs = collections.Counter(x["ref"] for x in d["delay"]["largest"])
print(" ".join(sorted(k for k, n in refs.items() if n > 1)))')" "no row named twice among the largest delays"
run_expect 0 "$V7FILL" report events_v7 --retention 30d
echo "$OUT"
assert_contains "$OUT" "expired $expired (" "the terminal report says the same"

# A row in the target whose window retired since is a duplicate when read again, not expired:
# 10 rows 25 days old, streamed in under 30d; the slot gone, --resnapshot under 20d copies the
# table anew, where their windows are past the retention.  They are in the target (the lookup
# holds them): duplicates, not quarantined, not counted expired (before: 310 expired, 10 of
# them in the target and in the quarantine).
qs "INSERT INTO events SELECT g, now() - interval '25 days', g FROM generate_series(30001, 30010) g"
run_expect 0 "$V7FILL" "${args[@]}"
assert_eq 10 "$(q "SELECT count(*) FROM events_v7 WHERE legacy_id > 30000")" "the 25-day rows streamed in"
qs "SELECT pg_drop_replication_slot('$SLOT')" >/dev/null
last_run=$(q "SELECT max(run_id) FROM v7fill.run")
args=("${args[@]/30d/20d}")
run_expect 0 "$V7FILL" "${args[@]}" --resnapshot
echo "$OUT"
assert_eq "29710|29710" "$(q "SELECT count(*), count(DISTINCT legacy_id) FROM events_v7")" \
    "the target unchanged"
assert_eq "$expired|0" "$(q "SELECT count(*), count(*) FILTER (WHERE split_part(row ->> 'source_ref', ':', 2)::bigint > 30000) FROM v7fill.stream_quarantine
                             WHERE slot = '$SLOT' AND reason LIKE 'expired%'")" \
    "the rows in the target are not quarantined: only the rows never inserted"
assert_eq "$expired|t" "$(q "SELECT expired, read = inserted + duplicates + rejected + expired FROM v7fill.stream WHERE slot = '$SLOT'")" \
    "the stream's stored counts: the rows in the target are not expired"
assert_eq "30010|0|29710" "$(q "SELECT sum(rows_read), sum(inserted), sum(duplicates) FROM v7fill.run
                                 WHERE command = 'stream' AND run_id > $last_run" | tr -d ' ')" \
    "the copy again: the rows in the target are duplicates"
assert_eq "$expired" "$(q "SELECT sum((stats -> 'counts' ->> 'expired')::bigint) FROM v7fill.run
                          WHERE command = 'stream' AND run_id > $last_run")" \
    "the copy again counts the rows never inserted only as expired"
drop_slots
