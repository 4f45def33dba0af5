# The bundled example end to end: counts, rejects with reasons, re-run inserts
# nothing, ids carry the event time and sit in the right partition, zstd and
# plain input give the same ids, plan writes nothing.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf -f "$V7FILL_ROOT/examples/schema.sql"
zstd -q -dc "$V7FILL_ROOT/examples/events.csv.zst" >events.csv
total=$(( $(python3 - <<'PY'
import csv
with open("events.csv", newline="") as f:
    print(sum(1 for _ in csv.reader(f)))
PY
) - 1 ))

# plan first: nothing may be written
run_expect 0 "$V7FILL" plan events "$V7FILL_ROOT/examples/events.csv.zst" --id-column id
assert_contains "$OUT" "plan (nothing was written)" "plan header"
assert_contains "$OUT" "would be created" "plan lists new partitions"
assert_contains "$OUT" "CREATE TABLE" "plan shows DDL"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass")" "plan created no partition"
assert_eq "" "$(q "SELECT to_regclass('v7fill.checkpoint')")" "plan created no state"
assert_eq "" "$(q "SELECT to_regclass('events_source_ref')")" "plan created no lookup"

run_expect 0 "$V7FILL" import events "$V7FILL_ROOT/examples/events.csv.zst" --id-column id \
    --rejects rejects.csv --report-json report.json --no-progress
echo "$OUT"
read_=$(python3 -c 'import json;print(json.load(open("report.json"))["read"])')
ins=$(python3 -c 'import json;print(json.load(open("report.json"))["inserted"])')
dup=$(python3 -c 'import json;print(json.load(open("report.json"))["duplicates"])')
rej=$(python3 -c 'import json;print(json.load(open("report.json"))["rejected"])')
assert_eq "$total" "$read_" "rows read = records in the file"
assert_eq 40 "$dup" "the 40 exact duplicate lines are duplicates"
assert_eq 4 "$rej" "uuid4, future, malformed, refused value rejected"
assert_eq $((total - 44)) "$ins" "the rest inserted"
assert_eq "$ins" "$(q "SELECT count(*) FROM events")" "rows in the table"
assert_eq "$ins" "$(q "SELECT count(*) FROM events_source_ref")" "lookup rows"
assert_contains "$OUT" "balanced" "invariant printed"

# rejects: each with file, line, reason
assert_eq 5 "$(wc -l <rejects.csv | tr -d ' ')" "header + 4 rejects"
assert_contains "$(cat rejects.csv)" "not a UUIDv7 (version 4)" "uuid4 reason"
assert_contains "$(cat rejects.csv)" "clock ahead" "future reason"
assert_contains "$(cat rejects.csv)" "expected 7 fields, found 6" "malformed reason"
assert_contains "$(cat rejects.csv)" "22P02" "server refusal carries SQLSTATE"
assert_contains "$(cat rejects.csv)" "events.csv.zst" "rejects name the file"

# every row: id time = event time to the ms, and in the partition of its window
bad=$(q "SELECT count(*) FROM events e
         WHERE (('x' || substr(replace(e.id::text, '-', ''), 1, 12))::bit(48)::bigint)
               <> floor(extract(epoch FROM e.created_at) * 1000)::bigint")
assert_eq 0 "$bad" "ids carry the event time to the millisecond"
misplaced=$(q "SELECT count(*) FROM events e JOIN pg_class p ON p.oid = e.tableoid
               WHERE p.relname <> 'events__' || to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY_MM')")
assert_eq 0 "$misplaced" "every row sits in its month's partition"
nparts=$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass")
months=$(q "SELECT count(DISTINCT date_trunc('month', created_at AT TIME ZONE 'UTC')) FROM events")
assert_eq 35 "$months" "the example spans 35 months (2023-12 .. 2026-10)"
assert_eq "$months" "$nparts" "one monthly partition per month with rows, none for rejected rows"
# kept ids: the input's UUIDv7 ids are kept as they are
kept=$(python3 - <<'PY'
import csv
with open("events.csv", newline="") as f:
    r = csv.DictReader(f)
    print(",".join(sorted({"'%s'" % x["id"] for x in r if x["id"] and x["id"][14] == "7"})))
PY
)
assert_eq "$(echo "$kept" | tr ',' '\n' | wc -l)" "$(q "SELECT count(*) FROM events WHERE id IN ($kept)")" "input UUIDv7 ids kept"

# ANALYZE ran on the parent (autovacuum never does)
assert_eq t "$(q "SELECT count(*) > 0 FROM pg_stats WHERE tablename = 'events'")" "parent analyzed"
# ... said so, and the report says how long it took
assert_contains "$OUT" "ANALYZE done in" "closing ANALYZE logged"
assert_contains "$OUT" "VACUUM done in" "closing VACUUM logged"
assert_contains "$OUT" "the closing ANALYZE and VACUUM" "report gives the closing time"
python3 -c 'import json,sys; r=json.load(open("report.json")); sys.exit(not (0 < r["closing_s"] <= r["elapsed_s"]))' ||
    fail "closing_s not within elapsed_s: $(cat report.json)"

# re-run: nothing written, all duplicates
q "SELECT id FROM events ORDER BY id" >ids1.txt
run_expect 0 "$V7FILL" import events "$V7FILL_ROOT/examples/events.csv.zst" --id-column id \
    --rejects rejects2.csv --report-json report2.json --no-progress
# nothing inserted: no closing ANALYZE, and the report says none
assert_eq 0.0 "$(python3 -c 'import json;print(float(json.load(open("report2.json"))["closing_s"]))')" "no closing step after a run that inserted nothing"
if grep -q "ANALYZE done" <<<"$OUT"; then fail "ANALYZE ran after a run that inserted nothing"; fi
assert_eq 0 "$(python3 -c 'import json;print(json.load(open("report2.json"))["inserted"])')" "re-run inserts nothing"
assert_eq $((total - 4)) "$(python3 -c 'import json;print(json.load(open("report2.json"))["duplicates"])')" "re-run: all duplicates"
assert_eq "$ins" "$(q "SELECT count(*) FROM events")" "row count unchanged"

# plain input gives the same ids as zstd input (same key, same references)
q "TRUNCATE events; TRUNCATE events_source_ref; DELETE FROM v7fill.checkpoint" >/dev/null
run_expect 0 "$V7FILL" import events events.csv --id-column id --rejects rejects3.csv --no-progress
q "SELECT id FROM events ORDER BY id" >ids2.txt
cmp -s ids1.txt ids2.txt || fail "plain and zstd imports minted different ids"

# the run history records each run
assert_eq 3 "$(q "SELECT count(*) FROM v7fill.run WHERE target_table = 'events'")" "runs recorded"
