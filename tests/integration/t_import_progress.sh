# Progress output as the user sees it.
#  - Not on a terminal: INFO log lines naming the file, which of how many, rows read and
#    inserted, rows/s, bytes and percentage of the file; the last line of each file at 100%.
#  - On a terminal (a pseudo-terminal through script(1)): a redrawn line with MB and rows/s.
#  - plan says "would be inserted".
#  - --no-progress and -q silence it; the report still prints.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE p (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
for name, lo in (("a.csv", 0), ("b.csv", 3000), ("c.csv", 6000)):
    with open(name, "w") as f:
        f.write("n,created_at\n")
        for i in range(lo, lo + 3000):
            f.write(f"{i},2026-0{1 + i % 6}-{1 + i % 28:02d} 10:00:{i % 60:02d}+00\n")
PY

# two files, stderr a file: log lines
"$V7FILL" import p a.csv b.csv --batch-rows 500 --source-ref 'p:{n}' --rejects r1.csv \
    >out1.txt 2>err1.txt || fail "import failed: $(cat out1.txt err1.txt)"
assert_contains "$(cat err1.txt)" "a.csv (file 1 of 2): 3000 rows read, 3000 inserted," "file 1's last line"
assert_contains "$(cat err1.txt)" "b.csv (file 2 of 2): 6000 rows read, 6000 inserted," "file 2's last line"
grep -Eq 'a.csv \(file 1 of 2\): 3000 rows read, 3000 inserted, [0-9]+ rows/s, [0-9.]+ of [0-9.]+ MB \(100%\)' err1.txt ||
    fail "file 1 does not end at 100% with its rate: $(cat err1.txt)"
grep -Eq 'b.csv \(file 2 of 2\): 6000 rows read, 6000 inserted, [0-9]+ rows/s, [0-9.]+ of [0-9.]+ MB \(100%\)' err1.txt ||
    fail "file 2 does not end at 100% with its rate: $(cat err1.txt)"
assert_contains "$(cat out1.txt)" "read=6000 inserted=6000" "report still printed"

# one file: no "file i of n"
"$V7FILL" import p c.csv --source-ref 'p:{n}' --rejects r2.csv >out2.txt 2>err2.txt ||
    fail "import failed: $(cat out2.txt err2.txt)"
assert_contains "$(cat err2.txt)" "c.csv: 3000 rows read, 3000 inserted," "single file line"
if grep -q "of 1)" err2.txt; then fail "a single file is numbered: $(cat err2.txt)"; fi

# plan: the same lines, but nothing is inserted
python3 -c "
print('n,created_at')
for i in range(9000, 9100): print(f'{i},2026-02-03 10:00:00+00')
" >d.csv
"$V7FILL" plan p d.csv --source-ref 'p:{n}' >outp.txt 2>errp.txt || fail "plan failed: $(cat errp.txt)"
assert_contains "$(cat errp.txt)" "d.csv: 100 rows read, 100 would be inserted," "plan's progress line"
if grep -Eq "[0-9] inserted," errp.txt; then fail "plan's progress says inserted: $(cat errp.txt)"; fi

# --no-progress and -q: no progress lines
"$V7FILL" import p a.csv --source-ref 'p:{n}' --rejects r3.csv --no-progress >out3.txt 2>err3.txt ||
    fail "import failed: $(cat err3.txt)"
if grep -q "rows read," err3.txt; then fail "--no-progress still logs progress: $(cat err3.txt)"; fi
assert_contains "$(cat out3.txt)" "duplicates=3000" "--no-progress still reports"
"$V7FILL" -q import p a.csv --source-ref 'p:{n}' --rejects r4.csv >out4.txt 2>err4.txt ||
    fail "import failed: $(cat err4.txt)"
if grep -q "rows read," err4.txt; then fail "-q still logs progress: $(cat err4.txt)"; fi

# on a terminal: the redrawn line
if command -v script >/dev/null; then
    script -qec "'$V7FILL' import p b.csv --source-ref 'p:{n}' --rejects r5.csv" /dev/null \
        >tty.txt 2>&1 || fail "import on a terminal failed: $(cat tty.txt)"
    grep -q $'\r'"b.csv: .* MB  3000 rows  [0-9]* rows/s" tty.txt ||
        fail "no progress line on the terminal: $(cat -v tty.txt)"
else
    echo "skipped: script(1) not installed"
fi
