# Retention at insert: an expired row is not inserted and creates no partition,
# a near-cutoff row is inserted and reported with its time left, both go to
# the late-rows file; --keep-expired inserts anyway; a stored retention is used
# when --retention is not given; the accounting still balances.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE r (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, v text)
    PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
import datetime as dt
now = dt.datetime.now(dt.timezone.utc)
def day(d): return (now - dt.timedelta(days=d)).strftime("%Y-%m-%dT%H:%M:%SZ")
with open("r.csv", "w") as f:
    f.write("created_at,v\n")
    f.write(f"{day(120)},expired\n")
    f.write(f"{day(85)},near\n")
    f.write(f"{day(10)},fresh\n")
PY
run_expect 0 "$V7FILL" import r r.csv --granularity day --retention 90d --no-progress \
    --rejects rej.csv --late-rows late.csv --report-json j.json
echo "$OUT"
j() { python3 -c "import json;print(json.load(open('j.json'))$1)"; }
assert_eq 3 "$(j '["read"]')" "read"
assert_eq 2 "$(j '["inserted"]')" "near + fresh inserted"
assert_eq 1 "$(j '["expired"]')" "one expired"
assert_eq 1 "$(j '["near_cutoff"]')" "one near cutoff"
assert_eq True "$(j '["balanced"]')" "balanced with expired"
assert_eq 0 "$(q "SELECT count(*) FROM r WHERE v = 'expired'")" "expired row not inserted"
assert_eq 2 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'r'::regclass")" "no partition for the expired row"
assert_contains "$(cat late.csv)" '"expired"' "expired row in the late file"
assert_contains "$(cat late.csv)" '"near cutoff"' "near row in the late file"
assert_eq 3 "$(wc -l <late.csv | tr -d ' ')" "header + 2 late rows"
assert_contains "$OUT" "near cutoff" "report mentions near cutoff"
# the run's statistics carry the delay distribution
assert_eq 3 "$(q "SELECT stats->'delay'->>'rows' FROM v7fill.run ORDER BY run_id DESC LIMIT 1")" "delay stats of all three rows recorded"
assert_eq 2 "$(q "SELECT count(*) FROM v7fill.window_activity WHERE target_table = 'r'")" "window activity noted for the two filled windows"

# --keep-expired: inserted anyway, with a warning
q "TRUNCATE r; TRUNCATE r_source_ref; DELETE FROM v7fill.checkpoint" >/dev/null
run_expect 0 "$V7FILL" import r r.csv --granularity day --retention 90d --keep-expired --no-progress \
    --rejects rej2.csv --late-rows late2.csv --report-json j2.json
assert_contains "$OUT" "retention will drop them" "warning"
assert_eq 3 "$(q "SELECT count(*) FROM r")" "all three inserted"
assert_eq 1 "$(python3 -c "import json;print(json.load(open('j2.json'))['expired_kept'])")" "expired kept"
assert_contains "$(cat late2.csv)" "expired (kept)" "kept expired row in the late file"

# a stored retention applies without --retention
q "TRUNCATE r; TRUNCATE r_source_ref; DELETE FROM v7fill.checkpoint" >/dev/null
run_expect 0 "$V7FILL" retention r set 90d
run_expect 0 "$V7FILL" import r r.csv --granularity day --no-progress --rejects rej3.csv \
    --late-rows late3.csv --report-json j3.json
assert_eq 1 "$(python3 -c "import json;print(json.load(open('j3.json'))['expired'])")" "stored retention used"

# partitions --maintain is maintain: the window that --keep-expired filled above is past the
# cutoff but received rows seconds ago, so it is not retired (quiet period)
run_expect 3 "$V7FILL" partitions r --maintain --retention 90d --ahead 2 --dry-run
assert_contains "$OUT" "refused to retire window r__" "quiet period protects the late window"
assert_contains "$OUT" "issues=1" "summary line of --maintain"
