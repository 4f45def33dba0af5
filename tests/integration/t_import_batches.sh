# Batch boundaries lose nothing: a header with tiny batches, quoted multi-line
# records straddling boundaries, CRLF; every source row arrives exactly once
# with its exact value.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE b (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, k integer NOT NULL,
                body text) PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
import random
random.seed(3)
with open("b.csv", "w", newline="") as f:
    f.write("k,created_at,body\r\n")
    for i in range(997):
        if i % 3 == 0:
            body = '"line one\nline two, with comma\r\nand ""quotes"""'
        elif i % 3 == 1:
            body = ""  # NULL
        else:
            body = '""'  # empty string
        eol = "\r\n" if i % 2 else "\n"
        f.write(f"{i},2025-0{1 + i % 9}-1{i % 10}T0{i % 10}:00:00Z,{body}{eol}")
PY
for batch in 1 2 7 64; do
    q "DROP TABLE IF EXISTS b_source_ref; TRUNCATE b" >/dev/null
    q "DELETE FROM v7fill.checkpoint" >/dev/null 2>&1 || true
    run_expect 0 "$V7FILL" import b b.csv --time-column created_at --batch-rows $batch --no-progress \
        --rejects rej.csv --source-ref 'b:{k}'
    assert_eq 997 "$(q "SELECT count(DISTINCT k) FROM b")" "batch $batch: every row once"
    assert_eq 997 "$(q "SELECT count(*) FROM b")" "batch $batch: no row twice"
    assert_eq 332 "$(q "SELECT count(*) FROM b WHERE body IS NULL")" "batch $batch: NULLs"
    assert_eq 332 "$(q "SELECT count(*) FROM b WHERE body = ''")" "batch $batch: empty strings"
    assert_eq 333 "$(q "SELECT count(*) FROM b WHERE body = E'line one\nline two, with comma\r\nand \"quotes\"'")" \
        "batch $batch: multi-line values exact"
done

# --batch-bytes: wide rows end a batch early, long before --batch-rows, and
# still every row lands once.  500 rows of ~3 kB hold ~6 kB each in a batch
# (COPY line and raw record), so 64 kB makes batches of about 11 rows.
python3 - <<'PY'
with open("wide.csv", "w") as f:
    f.write("k,created_at,body\n")
    for i in range(500):
        f.write(f"{i},2025-03-0{1 + i % 9}T00:00:00Z,{'x' * 3000}{i}\n")
PY
q "DROP TABLE IF EXISTS b_source_ref; TRUNCATE b" >/dev/null
run_expect 0 "$V7FILL" import b wide.csv --time-column created_at --batch-bytes 64kB --no-progress \
    --rejects rej.csv --source-ref 'w:{k}' --report-json wide.json
assert_eq 500 "$(q "SELECT count(DISTINCT k) FROM b WHERE length(body) > 3000")" "batch-bytes: every row once"
batches=$(python3 -c 'import json; print(json.load(open("wide.json"))["batches"])')
if [ "$batches" -lt 40 ] || [ "$batches" -gt 55 ]; then
    fail "batch-bytes 64kB: $batches batches, expected about 46"
fi
q "DROP TABLE IF EXISTS b_source_ref; TRUNCATE b; DELETE FROM v7fill.checkpoint" >/dev/null
run_expect 0 "$V7FILL" import b wide.csv --time-column created_at --no-progress \
    --rejects rej.csv --source-ref 'w:{k}' --report-json wide.json
assert_eq 1 "$(python3 -c 'import json; print(json.load(open("wide.json"))["batches"])')" \
    "the default 64MB holds all 500 wide rows in one batch"

for bad in 10 2GB 64XB -1 ''; do
    run_expect 2 "$V7FILL" import b wide.csv --batch-bytes "$bad" --no-progress
    assert_contains "$OUT" "--batch-bytes" "--batch-bytes '$bad' refused naming the option"
done
