# Two imports of overlapping files at the same time: no row twice, none missing.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE c (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
def write(name, lo, hi):
    with open(name, "w") as f:
        f.write("n,created_at\n")
        for i in range(lo, hi):
            f.write(f"{i},2024-{1 + i % 12:02d}-{1 + i % 28:02d}T08:00:{i % 60:02d}Z\n")
write("a.csv", 0, 30000)
write("b.csv", 10000, 40000)
PY
for round in 1 2; do
    q "TRUNCATE c" >/dev/null
    q "DROP TABLE IF EXISTS c_source_ref" >/dev/null
    q "DELETE FROM v7fill.checkpoint" >/dev/null 2>&1 || true
    "$V7FILL" import c a.csv --batch-rows 1000 --source-ref 'n:{n}' --rejects ra.csv --no-progress --report-json ja.json >a.out 2>&1 &
    p1=$!
    "$V7FILL" import c b.csv --batch-rows 700 --source-ref 'n:{n}' --rejects rb.csv --no-progress --report-json jb.json >b.out 2>&1 &
    p2=$!
    wait $p1 || { cat a.out; fail "import a failed"; }
    wait $p2 || { cat b.out; fail "import b failed"; }
    assert_eq 40000 "$(q "SELECT count(*) FROM c")" "round $round: every row"
    assert_eq 40000 "$(q "SELECT count(DISTINCT n) FROM c")" "round $round: no row twice"
    total_ins=$(python3 -c 'import json;print(json.load(open("ja.json"))["inserted"]+json.load(open("jb.json"))["inserted"])')
    total_dup=$(python3 -c 'import json;print(json.load(open("ja.json"))["duplicates"]+json.load(open("jb.json"))["duplicates"])')
    assert_eq 40000 "$total_ins" "round $round: inserted adds up"
    assert_eq 20000 "$total_dup" "round $round: the overlap counted as duplicates"
done
