# An import records its rows for `v7fill report` as it goes (v7fill.run, status importing,
# every --record-every seconds), so a kill -9 after hours loses at most that much of the
# report's figures; the resumed run's records count its own rows only (not those the killed
# run accounted for, which the checkpoint resumes after), and every run row adds up:
# the report counts the killed run's recorded rows and the rerun's.  A run row that cannot be
# written is carried by the next.  maintain folds periodic run rows by the hour.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
trap 'kill -9 ${pid:-} 2>/dev/null || true; proxy_stop; rm -rf "$T_TMP"' EXIT
export PGTZ=UTC

python3 - <<'PY'
import datetime as dt
now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
with open("ev.csv", "w") as f:
    f.write("created_at,n\n")
    for n in range(1, 30001):
        t = "not a time" if n == 5 else (now - dt.timedelta(minutes=n)).isoformat()
        f.write(f"{t},{n}\n")
PY
# The batch holding row 20000 waits while the table hold has a row (the one holding row 10000
# waits 1.2 s: the import records a run row after it).
q "CREATE TABLE ev (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n int NOT NULL)
       PARTITION BY RANGE (id);
   CREATE TABLE hold (x int);
   INSERT INTO hold VALUES (1);
   CREATE FUNCTION wait_20000() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN
       IF NEW.n = 20000 AND EXISTS (SELECT 1 FROM hold) THEN PERFORM pg_sleep(60); END IF;
       IF NEW.n = 10000 AND EXISTS (SELECT 1 FROM hold) THEN PERFORM pg_sleep(1.2); END IF;
       RETURN NEW;
   END \$\$;
   CREATE TRIGGER wait_20000 BEFORE INSERT ON ev FOR EACH ROW EXECUTE FUNCTION wait_20000()" >/dev/null
args=(import ev ev.csv --batch-rows 1000 --record-every 1 --no-progress --retention 400d)

"$V7FILL" "${args[@]}" >run1.log 2>&1 &
pid=$!
wait_held "$pid" run1.log "the batch of row 20000"
committed=$(q "SELECT count(*) FROM ev")
[ "$committed" -ge 10999 ] || fail "batches before the held one committed: $committed rows"
recorded=$(q "SELECT coalesce(sum(inserted), 0) FROM v7fill.run WHERE command = 'import' AND status = 'importing'")
[ "$recorded" -ge 9999 ] || fail "the import recorded its rows for the report as it went: $recorded rows"
assert_eq "0|t" "$(q "SELECT count(*) FILTER (WHERE stats ->> 'format' NOT LIKE 'v7fill-tracker/%'),
                            sum(inserted) = sum((stats ->> 'rows')::int8)
                       FROM v7fill.run WHERE status = 'importing'")" \
    "each run row carries the tracker document of its rows"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=
q "DELETE FROM hold;
   SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'" >/dev/null
last=$(q "SELECT coalesce(max(run_id), 0) FROM v7fill.run")

run_expect 0 "$V7FILL" "${args[@]}"
echo "$OUT"
resumed=$(printf '%s\n' "$OUT" | sed -n 's/.*resuming after line [0-9]* (\([0-9]*\) rows already accounted for).*/\1/p')
[ -n "$resumed" ] && [ "$resumed" -ge "$committed" ] || fail "the rerun resumes after the committed rows: '$resumed'"
assert_contains "$OUT" "read=30000 inserted=29999 duplicates=0 rejected=1" "the summary counts the whole file"
assert_contains "$OUT" "rows per window (this run's: the earlier runs' rows are not in it):" \
    "the summary's windows say they count this run's rows"
assert_eq "29999|29999" "$(q "SELECT count(*), count(DISTINCT n) FROM ev")" "every row once"
assert_eq "$((30000 - resumed))|$((29999 - committed))|0|done|$resumed" \
    "$(q "SELECT sum(rows_read), sum(inserted), sum(rejected),
                 (array_agg(status ORDER BY run_id DESC))[1],
                 (array_agg(stats ->> 'read_resumed' ORDER BY run_id DESC))[1]
            FROM v7fill.run WHERE run_id > $last")" \
    "the rerun's run rows count the rows it read and inserted, not those the killed run accounted for"
# The report: the killed run's recorded rows and the rerun's; lost are only the rows the killed
# run committed after its last record (not tracked again: the rerun resumes after them).
"$V7FILL" report ev --retention 400d --json >rep.json 2>rep.err || fail "report: $(cat rep.err)"
assert_eq "$((recorded + 29999 - committed))" \
    "$(python3 -c 'import json; print(json.load(open("rep.json"))["delay"]["rows"])')" \
    "the report counts the killed run's recorded rows and the rerun's"
assert_eq "$((recorded + 29999 - committed))" "$(q "SELECT sum(inserted) FROM v7fill.run")" \
    "the run rows add up to the same"

# A run row that cannot be written (its connection terminated after the first one) is carried
# by the next: the rows of a run that ends add up to every row it inserted, none left out.
q "CREATE TABLE ev2 (LIKE ev INCLUDING ALL) PARTITION BY RANGE (id);
   CREATE FUNCTION slow_5000() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN
       IF NEW.n % 5000 = 0 THEN PERFORM pg_sleep(1.2); END IF;
       RETURN NEW;
   END \$\$;
   CREATE TRIGGER slow_5000 BEFORE INSERT ON ev2 FOR EACH ROW EXECUTE FUNCTION slow_5000()" >/dev/null
last=$(q "SELECT coalesce(max(run_id), 0) FROM v7fill.run")
"$V7FILL" import ev2 ev.csv --batch-rows 1000 --record-every 1 --no-progress --retention 400d >run3.log 2>&1 &
pid=$!
poll_until "SELECT EXISTS (SELECT 1 FROM v7fill.run WHERE run_id > $last AND status = 'importing')" "the first run row" 30
# (the run rows' connection is the import's newest: opened when the first row is due)
assert_eq 1 "$(q "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
                   WHERE datname = current_database() AND application_name = 'v7fill'
                   ORDER BY backend_start DESC LIMIT 1) s")" "the run rows' connection terminated"
wait "$pid" || fail "the import failed: $(cat run3.log)"
pid=
cat run3.log
assert_contains "$(cat run3.log)" "could not record the rows imported so far in v7fill.run" "the failed row is said"
assert_eq "29999|29999|1" \
    "$(q "SELECT (SELECT count(*) FROM ev2), sum(inserted), count(*) FILTER (WHERE status = 'done')
            FROM v7fill.run WHERE run_id > $last")" \
    "the run rows add up to every row inserted: the failed one was carried"
[ "$(q "SELECT count(*) FROM v7fill.run WHERE run_id > $last AND status = 'importing'")" -ge 2 ] ||
    fail "rows recorded after the reconnect"

# A run row whose COMMIT landed but whose answer was lost (the connection cut by a proxy right
# after the server said COMMIT) is not carried as if it had failed: the next row looks it up
# by its key, so the rows of the run still add up to every row inserted, none twice.
q "CREATE TABLE ev3 (LIKE ev INCLUDING ALL) PARTITION BY RANGE (id);
   CREATE TRIGGER slow_5000 BEFORE INSERT ON ev3 FOR EACH ROW EXECUTE FUNCTION slow_5000()" >/dev/null
last=$(q "SELECT coalesce(max(run_id), 0) FROM v7fill.run")
proxy_start proxy ack 1 "INSERT INTO v7fill.run"
"$V7FILL" -d "$PROXY dbname=$PGDATABASE" import ev3 ev.csv --batch-rows 1000 --record-every 1 \
    --no-progress --retention 400d >run4.log 2>&1 || fail "the import failed: $(cat run4.log)"
proxy_stop
[ -e proxy/fired ] || fail "the proxy cut no run row's answer: $(cat proxy/proxy.log)"
assert_contains "$(cat run4.log)" "could not record the rows imported so far in v7fill.run" "the lost answer is said"
assert_eq "29999|29999|1" \
    "$(q "SELECT (SELECT count(*) FROM ev3), sum(inserted), count(*) FILTER (WHERE status = 'done')
            FROM v7fill.run WHERE run_id > $last")" \
    "the run rows add up to every row inserted: the row whose answer was lost is counted once"
assert_eq "0" "$(q "SELECT count(*) - count(DISTINCT stats ->> 'row_key') FROM v7fill.run WHERE run_id > $last")" \
    "each run row has a key of its own"

# Folding (maintain): ev2's periodic run rows, moved two hours back into one hour, become one
# row per hour; v7fill report reads the same figures from it; the row saying how the run
# ended stays.  A dry run says what it would fold and folds nothing.
q "UPDATE v7fill.run SET finished_at = date_trunc('hour', now()) - interval '2 hours' + run_id * interval '1 second'
    WHERE target_table = 'ev2'" >/dev/null
periodic=$(q "SELECT count(*) FROM v7fill.run WHERE target_table = 'ev2' AND status = 'importing'")
[ "$periodic" -ge 2 ] || fail "ev2 has periodic run rows to fold: $periodic"
"$V7FILL" report ev2 --retention 400d --json >before.json 2>rep.err || fail "report: $(cat rep.err)"
run_expect 0 "$V7FILL" maintain ev2 --dry-run
assert_contains "$OUT" "public.ev2: run history: would fold $periodic periodic run rows into 1" "the dry run says what it would fold"
assert_eq "$periodic" "$(q "SELECT count(*) FROM v7fill.run WHERE target_table = 'ev2' AND status = 'importing'")" \
    "the dry run folded nothing"
# Folding reads each hour through an index that v7fill's schema has from its creation.  A
# schema made by an earlier version has none: a role that may fold (SELECT, INSERT, DELETE on
# v7fill.run) but does not own it folds without it and says what to run; the owner's maintain
# creates it.  A role without DELETE folds nothing.
assert_eq "t" "$(q "SELECT to_regclass('v7fill.run_target_finished') IS NOT NULL")" \
    "v7fill's schema is created with the run history's index"
q "DROP INDEX v7fill.run_target_finished;
   DO \$\$ BEGIN
       IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rec_folder') THEN
           CREATE ROLE rec_folder LOGIN;
       END IF;
   END \$\$;
   GRANT USAGE ON SCHEMA v7fill TO rec_folder;
   GRANT SELECT, INSERT ON v7fill.run TO rec_folder;
   GRANT USAGE ON SEQUENCE v7fill.run_run_id_seq TO rec_folder;
   GRANT SELECT ON ev2 TO rec_folder" >/dev/null
PGUSER=rec_folder run_expect 0 "$V7FILL" -v -v maintain ev2 --ahead 0
assert_contains "$OUT" "the run history is not folded: this role lacks SELECT, INSERT or DELETE on v7fill.run" \
    "a role without DELETE is told (at -v -v) why it does not fold"
assert_eq "$periodic" "$(q "SELECT count(*) FROM v7fill.run WHERE target_table = 'ev2' AND status = 'importing'")" \
    "a role without DELETE folded nothing"
q "GRANT DELETE ON v7fill.run TO rec_folder" >/dev/null
PGUSER=rec_folder run_expect 0 "$V7FILL" maintain ev2 --ahead 0
assert_contains "$OUT" "public.ev2: run history: folded $periodic periodic run rows into 1" "maintain folds them"
assert_contains "$OUT" "v7fill.run has no index for folding" "a role that does not own v7fill.run folds without its index"
assert_contains "$OUT" "as the owner of v7fill.run: CREATE INDEX IF NOT EXISTS run_target_finished ON v7fill.run" \
    "and says what the owner runs"
assert_eq "f" "$(q "SELECT to_regclass('v7fill.run_target_finished') IS NOT NULL")" "no index made by a role that cannot"
run_expect 0 "$V7FILL" maintain ev2
assert_contains "$OUT" "created the index v7fill.run_target_finished on v7fill.run" "the owner's maintain creates it"
assert_eq "t" "$(q "SELECT to_regclass('v7fill.run_target_finished') IS NOT NULL")" "the index is there"
assert_eq "folded|1|done|1" "$(q "SELECT string_agg(status || '|' || n, '|' ORDER BY status DESC)
                                  FROM (SELECT status, count(*) n FROM v7fill.run WHERE target_table = 'ev2' GROUP BY 1) s")" \
    "one folded row, and the run's last row kept"
# same_report TABLE: v7fill report TABLE reads the same figures as in before.json.
same_report() {
    "$V7FILL" report "$1" --retention 400d --json >after.json 2>rep.err || fail "report: $(cat rep.err)"
    python3 - <<'PY' || fail "the report of $1 reads other figures after the folding"
import json
b, a = json.load(open("before.json")), json.load(open("after.json"))
assert b["delay"] == a["delay"], (b["delay"], a["delay"])
# per window, the rows written by class (maintain made windows ahead, and time goes on)
w = lambda r: {x["name"]: [x[k] for k in ("written_on_time", "written_near_cutoff", "written_expired")]
               for x in r["windows"] if any(x[k] for k in ("written_on_time", "written_near_cutoff", "written_expired"))}
assert w(b) == w(a) and sum(sum(v) for v in w(a).values()) == 29999, (w(b), w(a))
# the first and last runs by time (the folded row has the latest run_id, not the latest time;
# it finished when the hour's last row did)
assert a["runs"]["last"] == b["runs"]["last"] and b["runs"]["first"] <= a["runs"]["first"] <= a["runs"]["last"], (b["runs"], a["runs"])
PY
}
same_report ev2
run_expect 0 "$V7FILL" maintain ev2
assert_not_contains "$OUT" "run history" "nothing more to fold"
assert_not_contains "$OUT" "index" "the index is made once"

# An hour holding a single periodic run row is folded too, into a folded row of one (left as
# it was, it stayed the first hour not folded, and every later fold read all the history after
# it again); folded once, it is not folded again.  ev3's first periodic row alone in an hour:
hour1="status, rows_read, inserted, finished_at FROM v7fill.run WHERE target_table = 'ev3'
       AND finished_at < date_trunc('hour', now()) - interval '1 hour'"
q "UPDATE v7fill.run SET finished_at = date_trunc('hour', now()) - interval '150 minutes'
    WHERE run_id = (SELECT min(run_id) FROM v7fill.run WHERE target_table = 'ev3' AND status = 'importing')" >/dev/null
alone=$(q "SELECT $hour1")
assert_eq importing "${alone%%|*}" "one periodic row of ev3 alone in an hour that ended over an hour ago"
"$V7FILL" report ev3 --retention 400d --json >before.json 2>rep.err || fail "report: $(cat rep.err)"
run_expect 0 "$V7FILL" maintain ev3 --ahead 0
assert_eq "folded|${alone#*|}" "$(q "SELECT $hour1")" \
    "the hour's single periodic row is folded, its figures and time kept (maintain said: $OUT)"
assert_contains "$OUT" "public.ev3: run history: folded 1 periodic run rows into 1" "maintain says so"
same_report ev3
run_expect 0 "$V7FILL" maintain ev3 --ahead 0
assert_not_contains "$OUT" "run history" "a folded row of one is not folded again"

# More than a day of one stream's periodic rows unfolded: the report says maintain folds them.
q "INSERT INTO v7fill.run (target_schema, target_table, command, status, elapsed_s, rows_read, inserted,
                          duplicates, rejected, partitions_created, stats, target_oid, finished_at)
   SELECT target_schema, target_table, command, status, elapsed_s, 0, 0, 0, 0, 0, stats, target_oid,
          finished_at - g * interval '1 minute'
     FROM (SELECT * FROM v7fill.run WHERE target_table = 'ev' AND status = 'importing' LIMIT 1) r,
          generate_series(1, 1500) g" >/dev/null
"$V7FILL" report ev --retention 400d >rep.txt 2>&1 || fail "report: $(cat rep.txt)"
assert_contains "$(cat rep.txt)" "periodic run rows read (every --record-every seconds); v7fill maintain public.ev folds" \
    "the report points at maintain when it reads many unfolded rows"
