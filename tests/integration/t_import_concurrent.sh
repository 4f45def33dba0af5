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

# Two imports of the same file with rows the server refuses: the refused rows
# are isolated while both hold lookup keys, yet neither deadlocks (one key
# order on every path) and every good row lands once.
sqlf <<'SQL'
CREATE TABLE sj (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, k int, payload jsonb)
    PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
good = 0
with open("sj.csv", "w") as f:
    f.write("created_at,k,payload\n")
    for i in range(200000):
        t = "bad" if i % 700 == 5 else f"2024-{1 + i % 12:02d}-01T00:{i // 60 % 60:02d}:{i % 60:02d}.{i:06d}Z"
        f.write(f"{t},{i},{'{bad' if i % 500 == 3 else '{}'}\n")
        good += i % 700 != 5 and i % 500 != 3
open("sj.good", "w").write(str(good))
PY
"$V7FILL" import sj sj.csv --rejects sja.csv --no-progress >sja.out 2>&1 &
p1=$!
"$V7FILL" import sj sj.csv --rejects sjb.csv --no-progress >sjb.out 2>&1 &
p2=$!
wait $p1 || { cat sja.out; fail "same file twice: import a failed"; }
wait $p2 || { cat sjb.out; fail "same file twice: import b failed"; }
assert_not_contains "$(cat sja.out sjb.out)" "40P01" "same file twice: no deadlock, not even a retried one"
assert_eq "$(cat sj.good)" "$(q "SELECT count(*) FROM sj")" "same file twice: every good row"
assert_eq "$(cat sj.good)" "$(q "SELECT count(DISTINCT k) FROM sj")" "same file twice: no row twice"
assert_eq "$(cat sj.good) $(cat sj.good)" "$(q "SELECT count(*) || ' ' || count(sj.id) FROM sj_source_ref r LEFT JOIN sj USING (id)")" \
    "same file twice: one lookup row per row, none for refused rows"
