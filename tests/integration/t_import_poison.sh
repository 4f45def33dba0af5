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

# Row errors outside classes 22/23 cost one row too: an index row too large
# (54000) and a validation trigger's RAISE (P0001) go to the rejects file with
# their SQLSTATE while their batch-mates land.
sqlf <<'SQL'
CREATE TABLE w (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL,
                label text) PARTITION BY RANGE (id);
CREATE INDEX ON w (label);
CREATE FUNCTION w_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.label = 'refuse me' THEN RAISE EXCEPTION 'refused by trigger: %', NEW.n; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER w_check BEFORE INSERT ON w FOR EACH ROW EXECUTE FUNCTION w_check();
SQL
python3 - <<'PY'
import random, string
random.seed(5)
with open("wide.csv", "w") as f:
    f.write("created_at,n,label\n")
    for i in range(5000):
        label = f"row {i}"
        if i == 2500:
            label = "".join(random.choice(string.ascii_letters) for _ in range(2800))
        if i in (100, 4321):
            label = "refuse me"
        f.write(f"2026-03-{1 + i % 28:02d} 12:00:{i % 60:02d}.{i:06d}+00,{i},{label}\n")
PY
run_expect 0 "$V7FILL" import w wide.csv --rejects wrej.csv --no-progress --report-json w.json
assert_eq 4997 "$(q "SELECT count(*) FROM w")" "54000/P0001: the batch-mates land"
assert_eq "5000 4997 0 3" "$(python3 -c 'import json;j=json.load(open("w.json"));print(j["read"],j["inserted"],j["duplicates"],j["rejected"])')" \
    "54000/P0001: read = inserted + duplicates + rejected"
assert_eq "54000 1 P0001 2" "$(python3 -c '
import csv, collections
c = collections.Counter(r[3] for r in list(csv.reader(open("wrej.csv")))[1:])
print(" ".join(f"{k} {v}" for k, v in sorted(c.items())))')" "54000/P0001: rejected with their SQLSTATE"
assert_contains "$(cat wrej.csv)" "wide.csv\",4323,\"COPY failed: refused by trigger: 4321\",P0001" \
    "the trigger's row, its line and message"
# An error every row meets alike is the statement's: it stops at once, nothing lands.
sqlf -c "CREATE OR REPLACE FUNCTION w_check() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN RAISE EXCEPTION 'table w is read-only'; END \$\$"
python3 -c "
with open('more.csv', 'w') as f:
    f.write('created_at,n,label\n')
    for i in range(10000):
        f.write(f'2026-04-{1 + i % 28:02d} 12:00:{i % 60:02d}.{i:06d}+00,{i},more {i}\n')"
start=$(date +%s)
run_expect 5 "$V7FILL" import w more.csv --rejects wrej2.csv --no-progress
assert_contains "$OUT" "table w is read-only" "the statement's error is reported"
assert_contains "$OUT" "P0001" "with its SQLSTATE"
[ $(($(date +%s) - start)) -le 10 ] || fail "an error of every row stops quickly"
assert_eq 4997 "$(q "SELECT count(*) FROM w")" "nothing of more.csv landed"
assert_eq 0 "$(tail -n +2 wrej2.csv 2>/dev/null | wc -l)" "and nothing of it was rejected"
