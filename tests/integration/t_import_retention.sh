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

# A row already imported whose window has retired since is a duplicate, not expired: the same
# file again under a shorter retention (its checkpoint's options changed: read from the start).
# The rows 395 days old went in as near the cutoff under 400d; under 390d their windows are past
# it, but they are in the target (the lookup holds them): duplicates, not counted expired again,
# not in the late-rows file again.  The row 500 days old was never inserted: expired both times.
sqlf <<'SQL'
CREATE TABLE h (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, v text)
    PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
import datetime as dt
now = dt.datetime.now(dt.timezone.utc)
def day(d): return (now - dt.timedelta(days=d)).strftime("%Y-%m-%dT%H:%M:%SZ")
with open("h.csv", "w") as f:
    f.write("created_at,v\n")
    f.write(f"{day(500)},gone\n")
    f.write(f"{day(395)},near1\n")
    f.write(f"{day(395)},near2\n")
    f.write(f"{day(1)},fresh\n")
PY
hj() { python3 -c "import json;d=json.load(open('$1'));print(' '.join(str(d[k]) for k in ('read','inserted','duplicates','expired','near_cutoff')))"; }
run_expect 0 "$V7FILL" import h h.csv --granularity day --retention 400d --no-progress \
    --late-rows hlate1.csv --report-json h1.json
assert_eq "4 3 0 1 2" "$(hj h1.json)" "400d: read inserted duplicates expired near"
run_expect 0 "$V7FILL" plan h h.csv --granularity day --retention 390d --no-progress --json
echo "$OUT" >hplan.json
assert_eq "3 1" "$(python3 -c "import json;d=json.load(open('hplan.json'));print(d['duplicates'],d['expired'])")" \
    "plan under 390d: the rows imported are duplicates, only the row never inserted expired"
run_expect 0 "$V7FILL" import h h.csv --granularity day --retention 390d --no-progress \
    --late-rows hlate2.csv --report-json h2.json
echo "$OUT"
assert_eq "4 0 3 1 0" "$(hj h2.json)" "390d, again: the rows in the target are duplicates, not expired"
assert_eq 3 "$(q "SELECT count(*) FROM h")" "the target unchanged"
assert_eq "gone" "$(tail -n +2 hlate2.csv | grep -o 'gone\|near[12]' | tr '\n' ' ' | sed 's/ $//')" \
    "late rows of the second run: only the row never inserted"
assert_eq 2 "$(wc -l <hlate2.csv | tr -d ' ')" "header + 1 late row"
# the run history: each row of the target counted once (the report judges every run under 400d)
"$V7FILL" report h --retention 400d --json >hrep.json 2>hrep.err || fail "report: $(cat hrep.err)"
assert_eq "1 2" "$(python3 -c "import json;c=json.load(open('hrep.json'))['delay']['counts'];print(c['on_time'],c['near_cutoff'])")" \
    "report: the rows inserted counted once"
# In one batch, in reading order (as with --batch-rows 1): a reference inserted by a row read
# before the expired row makes it a duplicate; an expired row read first stays expired
# (t_import_dedup.sh: the recent row of its reference is inserted after it).
sqlf <<'SQL'
CREATE TABLE hb (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, k int, v text)
    PARTITION BY RANGE (id);
SQL
printf 'created_at,k,v\n%s,1,new\n2020-01-01T00:00:00Z,1,old\n2020-01-01T00:00:00Z,2,old\n' \
    "$(date -u -d '1 day ago' +%Y-%m-%dT%H:%M:%SZ)" >hb.csv
run_expect 0 "$V7FILL" import hb hb.csv --source-ref 'k:{k}' --retention 90d --granularity day \
    --late-rows hblate.csv --no-progress --report-json hb.json
assert_eq "3 1 1 1 0" "$(hj hb.json)" "an expired row after the row of its reference that landed: a duplicate"
assert_eq "k:2" "$(tail -n +2 hblate.csv | grep -o 'k:[0-9]*')" "late rows: only the expired row of a reference never inserted"
