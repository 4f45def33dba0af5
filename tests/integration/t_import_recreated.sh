# A checkpoint belongs to the table it was written for: after the target is
# dropped and made again under the same name, a rerun reads every file from
# the start (a resume would skip rows the new table never got; --skip-finished
# would skip whole files).  Checkpoints that name no table (earlier versions)
# still resume.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
mk() {
    sqlf -c "DROP TABLE IF EXISTS r, r_source_ref CASCADE"
    sqlf -c "CREATE TABLE r (id uuid NOT NULL, created_at timestamptz NOT NULL, v text,
                             PRIMARY KEY (id)) PARTITION BY RANGE (id)"
}
python3 - <<'PY'
with open("r.csv", "w") as f:
    f.write("created_at,v\n")
    for i in range(1, 3001):
        t = "not a time" if i == 2000 else f"2025-03-{1 + i % 28:02d} 10:{i % 60:02d}:00"
        f.write(f"{t},row{i}\n")
PY
mk
# stops after the batch holding the bad row (rows 1501-2000): 2000 of 3000 read
run_expect 6 "$V7FILL" import r r.csv --max-rejects 0 --batch-rows 500 --no-progress \
    --rejects r.rejects
assert_eq 1999 "$(q "SELECT count(*) FROM r")" "first run stopped part way"

mk
run_expect 0 "$V7FILL" import r r.csv --batch-rows 500 --no-progress --rejects r.rejects \
    --report-json r.json
assert_contains "$OUT" "written for an earlier table named public.r" "the stale checkpoint is named"
assert_not_contains "$OUT" "resuming after line" "no resume into the new table"
assert_eq 2999 "$(q "SELECT count(*) FROM r")" "every good row in the new table"
assert_eq "3000 2999 0 1" "$(python3 -c 'import json;d=json.load(open("r.json"));print(d["read"],d["inserted"],d["duplicates"],d["rejected"])')" \
    "the counts are this table's"

# finished, then the table made again: --skip-finished must not skip the file
mk
run_expect 0 "$V7FILL" import r r.csv --skip-finished --no-progress --rejects r.rejects \
    --report-json r.json
assert_eq 0 "$(python3 -c 'import json;print(json.load(open("r.json"))["files_skipped"])')" \
    "a file finished into the old table is read again"
assert_eq 2999 "$(q "SELECT count(*) FROM r")" "every good row again"
# and into the same table it is skipped
run_expect 0 "$V7FILL" import r r.csv --skip-finished --no-progress --rejects r.rejects \
    --report-json r.json
assert_eq 1 "$(python3 -c 'import json;print(json.load(open("r.json"))["files_skipped"])')" \
    "the same table: skipped"

# a checkpoint without a table (written by an earlier version) still resumes
mk
run_expect 6 "$V7FILL" import r r.csv --max-rejects 0 --batch-rows 500 --no-progress \
    --rejects r.rejects
q "UPDATE v7fill.checkpoint SET target_oid = NULL WHERE target_table = 'r'" >/dev/null
run_expect 0 "$V7FILL" import r r.csv --batch-rows 500 --no-progress --rejects r.rejects
assert_contains "$OUT" "resuming after line 2001" "an old checkpoint resumes"
assert_eq 2999 "$(q "SELECT count(*) FROM r")" "and finishes the table"

# the target made again but its lookup kept: the rows would all be duplicates
# of rows the new table does not have; v7fill says so and what to do
sqlf -c "DROP TABLE r"
sqlf -c "CREATE TABLE r (id uuid NOT NULL, created_at timestamptz NOT NULL, v text,
                         PRIMARY KEY (id)) PARTITION BY RANGE (id)"
run_expect 0 "$V7FILL" import r r.csv --no-progress --rejects r.rejects --report-json r.json
assert_contains "$OUT" "\"public\".\"r\" is empty, but its lookup \"public\".\"r_source_ref\" remembers rows" \
    "the orphaned lookup is named"
assert_contains "$OUT" "DROP TABLE \"public\".\"r_source_ref\"" "and what to do"
assert_eq 0 "$(q "SELECT count(*) FROM r")" "(as warned: nothing inserted)"
sqlf -c "DROP TABLE r_source_ref"
run_expect 0 "$V7FILL" import r r.csv --no-progress --rejects r.rejects
assert_not_contains "$OUT" "remembers rows" "no warning for a fresh lookup"
assert_eq 2999 "$(q "SELECT count(*) FROM r")" "after the advice, every row"
run_expect 0 "$V7FILL" import r r.csv --no-progress --rejects r.rejects
assert_not_contains "$OUT" "remembers rows" "no warning when the table has rows"

# the delay report counts only the runs into this table, not into the
# earlier tables named r
assert_gt() { [ "$1" -gt "$2" ] || fail "$3: $1 is not more than $2"; }
assert_gt "$(q "SELECT count(*) FROM v7fill.run WHERE target_table = 'r'")" 3 "runs into earlier r's"
run_expect 0 "$V7FILL" report r --json
assert_eq "3 2999" "$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print(d["runs"]["count"], d["delay"]["rows"] if "rows" in d["delay"] else d["delay"])' "$OUT")" \
    "the report's runs and rows are this table's"
