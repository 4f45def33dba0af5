# One bad value in the middle of a 10,000-row batch: 9,999 land, 1 is rejected
# with the server's message and SQLSTATE; a NOT NULL violation likewise.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE m (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL,
                label text CHECK (label <> 'forbidden')) PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
with open("poison.csv", "w") as f:
    f.write("created_at,n,label\n")
    for i in range(10000):
        n = "not-a-number" if i == 5000 else str(i)
        label = "forbidden" if i == 7777 else f"row {i}"
        n = "" if i == 123 else n
        f.write(f"2026-03-{1 + i % 28:02d} 12:00:{i % 60:02d}.{i:06d}+00,{n},{label}\n")
PY
run_expect 0 "$V7FILL" import m poison.csv --batch-rows 10000 --rejects rej.csv --no-progress \
    --report-json r.json
assert_eq 9997 "$(q "SELECT count(*) FROM m")" "batch-mates of the bad rows land"
assert_eq 3 "$(python3 -c 'import json;print(json.load(open("r.json"))["rejected"])')" "three rejected"
assert_eq 1 "$(python3 -c 'import json;print(json.load(open("r.json"))["batches"])')" "one batch"
rej=$(cat rej.csv)
assert_contains "$rej" "22P02" "invalid integer SQLSTATE"
assert_contains "$rej" "invalid input syntax for type integer" "server message"
assert_contains "$rej" "23502" "not-null SQLSTATE"
assert_contains "$rej" "23514" "check violation SQLSTATE"
assert_contains "$rej" "poison.csv\",5002," "line of the bad value (header is line 1)"
assert_eq 0 "$(q "SELECT count(*) FROM m WHERE n IN (123, 5000, 7777)")" "the bad rows are not in the table"
assert_eq 9997 "$(q "SELECT count(*) FROM m_source_ref")" "rejected rows leave no lookup entry"
# a rerun after fixing nothing: the rejected rows are rejected again, nothing else written
run_expect 0 "$V7FILL" import m poison.csv --rejects rej2.csv --no-progress --report-json r2.json
assert_eq 3 "$(python3 -c 'import json;print(json.load(open("r2.json"))["rejected"])')" "rejected again"
assert_eq 9997 "$(python3 -c 'import json;print(json.load(open("r2.json"))["duplicates"])')" "others duplicates"
