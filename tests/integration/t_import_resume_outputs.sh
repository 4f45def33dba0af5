#!/usr/bin/env bash
# A resume cuts the rejects and late-rows files back only where they hold what the
# resumed import wrote and did not commit (issue 16 #1, #9):
#  1. rejects another, complete import appended to the same file after the first one
#     stopped survive the first one's resume;
#  2. a resume with --late-rows naming another file leaves that file's bytes alone;
#  3. the rejects file moved away after a stop: the resume goes on in a new file, says
#     so, exit 0, and the two files together hold every reject once;
#  4. the resumed import's own uncommitted rejects are still cut (no reject twice);
#  5. a checkpoint written by the earlier version (no file identity) still resumes;
#  6. a batch whose late rows were written and whose COMMIT failed: the resume cuts them
#     from the late-rows file (which quotes the line field) as from the rejects file;
#  7. two inputs of the same basename (d1/events.csv, d2/events.csv): the rejects d2 committed
#     after d1 stopped survive d1's resume, though their source and lines look like d1's;
#  8. one command of two files, killed (kill -9) in the second after a batch of it wrote its
#     rejects and late rows and before that batch committed: the same command again reads the
#     first (finished) file again, which appends its rows first, then resumes the second; the
#     second's uncommitted rows are cut before any file is read: each of its rows once;
#  9. the same with the second file's rejects all committed (its COMMIT fails in a batch
#     without rejects): nothing to cut, each reject once, and no warning about another import.
# 10. before any input is read, only an input whose size and path an unfinished checkpoint names
#     is opened: a run resuming A10.csv that stops there (--max-rejects) has not read B10.csv
#     (another size) nor sub/A10.csv (A10.csv's bytes under another path), by their access time.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

mk() {
    q "SET client_min_messages = warning; DROP TABLE IF EXISTS $1 CASCADE; DROP TABLE IF EXISTS $1_source_ref;
       CREATE TABLE $1 (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL,
                        a text, b text, c text) PARTITION BY RANGE (id);" >/dev/null
}
# rows of the rejects/late file per source, e.g. "A.csv:300 B.csv:30"
per_source() {
    python3 -c "import csv,sys,collections
r=list(csv.reader(open(sys.argv[1], newline='')))[1:]
c=collections.Counter(x[0] for x in r)
print(' '.join('%s:%d' % (k, c[k]) for k in sorted(c)))" "$1"
}
# how many (source, line) pairs appear more than once
twice() {
    python3 -c "import csv,sys,collections
r=list(csv.reader(open(sys.argv[1], newline='')))[1:]
print(sum(1 for v in collections.Counter((x[0], x[1]) for x in r).values() if v > 1))" "$1"
}
gen() { # gen FILE ROWS MONTH: 1 bad time per 100 rows
    awk -v n="$2" -v m="$3" 'BEGIN{print "created_at,a,b,c"; for(i=0;i<n;i++) printf "%s,%d,x,y\n", (i%100==7?"bad":sprintf("2024-%s-01T00:00:00.%06dZ",m,i)), i}' >"$1"
}

# 1. another import's rejects survive the resume
gen A.csv 30000 01
gen B.csv 3000 02
mk r1
run_expect 6 "$V7FILL" -q import r1 A.csv --max-rejects 150
assert_eq "A.csv:200" "$(per_source r1.rejects.csv)" "rejects after A stopped"
run_expect 0 "$V7FILL" -q import r1 B.csv
assert_eq "A.csv:200 B.csv:30" "$(per_source r1.rejects.csv)" "rejects after B"
run_expect 0 "$V7FILL" -q import r1 A.csv
assert_eq "A.csv:300 B.csv:30" "$(per_source r1.rejects.csv)" "B's rejects kept by A's resume"
assert_eq 0 "$(twice r1.rejects.csv)" "rejects written twice"
assert_contains "$OUT" "another import appended" "the resume says why it cut nothing"
assert_eq 32670 "$(q 'SELECT count(*) FROM r1')" "rows in r1"

# 2. --late-rows naming another file: that file is not cut
gen R.csv 30000 01
mk r2
run_expect 6 "$V7FILL" -q import r2 R.csv --retention 30d --max-rejects 150
[ -s r2.late.csv ] || fail "no late rows written by the first run"
seq 1 1000000 >other.txt
size=$(wc -c <other.txt)
run_expect 0 "$V7FILL" -q import r2 R.csv --retention 30d --late-rows other.txt
assert_eq 1000000 "$(grep -c '^[0-9]*$' other.txt)" "lines of other.txt kept"
assert_eq "$(seq 1 1000000 | md5sum)" "$(head -c "$size" other.txt | md5sum)" "other.txt's bytes"
assert_contains "$(sed -n 1000001p other.txt)" '"R.csv",' "late rows start on a line of their own"
assert_contains "$OUT" 'wrote to the late-rows file "r2.late.csv"' "the resume names the earlier file"
assert_not_contains "$OUT" "rejects file \"other.txt\"" "other.txt called a rejects file"

# 3. the rejects file moved away after a stop
gen M.csv 30000 01
mk r3
run_expect 6 "$V7FILL" -q import r3 M.csv --max-rejects 150
mv r3.rejects.csv round1.csv
run_expect 0 "$V7FILL" -q import r3 M.csv --max-rejects 1000
assert_contains "$OUT" 'the rejects file "r3.rejects.csv" is a new file' "the resume says so"
assert_eq "M.csv:200" "$(per_source round1.csv)" "first round's rejects"
assert_eq "M.csv:100" "$(per_source r3.rejects.csv)" "the rest in the new file"
assert_eq 29700 "$(q 'SELECT count(*) FROM r3')" "rows in r3"

# 4. own uncommitted rejects (written, then killed before the commit) are cut
mk r4
run_expect 6 "$V7FILL" -q import r4 A.csv --max-rejects 150
line=$(q "SELECT line FROM v7fill.checkpoint WHERE target_table = 'r4'")
printf '"A.csv",%d,"unparsable time: uncommitted",,"bad,%d,x,y"\n' $((line + 7)) $((line + 5)) >>r4.rejects.csv
run_expect 0 "$V7FILL" -q import r4 A.csv
assert_eq "A.csv:300" "$(per_source r4.rejects.csv)" "own uncommitted reject cut"
assert_eq 0 "$(twice r4.rejects.csv)" "rejects written twice"
assert_not_contains "$OUT" "WARNING" "nothing to warn about"

# 5. a checkpoint of the earlier version (no file identity, options or content hash)
mk r5
run_expect 6 "$V7FILL" -q import r5 A.csv --max-rejects 150
q "UPDATE v7fill.checkpoint SET rejects_file = NULL, late_path = NULL, late_file = NULL,
     content_len = NULL, content_hash = NULL, options = NULL, source_ref = NULL
   WHERE target_table = 'r5'" >/dev/null
run_expect 0 "$V7FILL" import r5 A.csv --no-progress
assert_contains "$OUT" "resuming after line" "old checkpoint resumed"
assert_eq "A.csv:300" "$(per_source r5.rejects.csv)" "rejects after the resume"
assert_eq 29700 "$(q 'SELECT count(*) FROM r5')" "rows in r5"

# 6. the late rows of a batch whose COMMIT failed are cut by the resume
mk r6
q "CREATE FUNCTION r6_boom() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN
     IF NEW.target_table = 'r6' AND NEW.line > 12000 THEN RAISE EXCEPTION 'boom at commit'; END IF;
     RETURN NEW; END\$\$;
   CREATE CONSTRAINT TRIGGER r6_boom AFTER INSERT OR UPDATE ON v7fill.checkpoint
     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION r6_boom();" >/dev/null
run_expect 5 "$V7FILL" -q import r6 R.csv --retention 30d --batch-rows 5000
assert_eq "R.csv:14850" "$(per_source r6.late.csv)" "late rows written before the failed COMMIT"
q "DROP TRIGGER r6_boom ON v7fill.checkpoint" >/dev/null
run_expect 0 "$V7FILL" -q import r6 R.csv --retention 30d --batch-rows 5000
assert_eq "R.csv:29700" "$(per_source r6.late.csv)" "late rows after the resume"
assert_eq 0 "$(twice r6.late.csv)" "late rows written twice"
assert_eq "R.csv:300" "$(per_source r6.rejects.csv)" "rejects after the resume"
assert_eq 0 "$(twice r6.rejects.csv)" "rejects written twice"
assert_not_contains "$OUT" "another import appended" "the late rows taken for another import's"

# 7. another input of the same basename: its committed rejects survive the resume
mkdir d1 d2
cp A.csv d1/events.csv
awk 'BEGIN{print "created_at,a,b,c"; for(i=0;i<21000;i++) printf "%s,%d,d2,y\n", (i>=20500 && i%100==7?"bad":sprintf("2024-03-01T00:00:00.%06dZ",i)), i}' >d2/events.csv
# rejects per input (told apart by the record) and distinct rows, e.g. "d1:300 d2:5 distinct:305"
per_input() {
    python3 -c "import csv,sys
r=list(csv.reader(open(sys.argv[1], newline='')))[1:]
d2=sum(1 for x in r if x[4].endswith(',d2,y'))
print('d1:%d d2:%d distinct:%d' % (len(r) - d2, d2, len(set(map(tuple, r)))))" "$1"
}
mk r7
run_expect 6 "$V7FILL" -q import r7 d1/events.csv --max-rejects 150
run_expect 0 "$V7FILL" -q import r7 d2/events.csv
assert_eq "d1:200 d2:5 distinct:205" "$(per_input r7.rejects.csv)" "rejects after d2"
run_expect 0 "$V7FILL" -q import r7 d1/events.csv
assert_eq "d1:300 d2:5 distinct:305" "$(per_input r7.rejects.csv)" "d2's rejects after d1's resume"
assert_contains "$OUT" "another import appended" "the resume says why it cut nothing"
assert_eq 50695 "$(q 'SELECT count(*) FROM r7')" "rows in r7"

# rows of FILE's SOURCE that appear more than once (by source and line)
twice_of() {
    python3 -c "import csv,sys,collections
r=list(csv.reader(open(sys.argv[1], newline='')))[1:]
print(sum(1 for v in collections.Counter(x[1] for x in r if x[0] == sys.argv[2]).values() if v > 1))" "$1" "$2"
}
# the report's counts: read, inserted + duplicates + rejected + expired, rejected
balance() {
    python3 -c "import json,sys
r=json.load(open(sys.argv[1]))
print(r['read'], r['inserted'] + r['duplicates'] + r['rejected'] + r['expired'], r['rejected'])" "$1"
}

# 8. kill -9 in the second file of a command, its last batch's rejects and late rows written
gen X.csv 12000 01
gen Y.csv 15000 02
mk r8
# The batch ending past line 11000 of Y.csv (its third) waits in its checkpoint's statement,
# after its rejects and late rows were written and fsynced.
q "CREATE FUNCTION r8_stall() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN
     IF NEW.target_table = 'r8' AND NEW.source_name = 'Y.csv' AND NEW.line > 11000 THEN
       PERFORM pg_sleep(600); END IF;
     RETURN NEW; END\$\$;
   CREATE TRIGGER r8_stall BEFORE INSERT OR UPDATE ON v7fill.checkpoint
     FOR EACH ROW EXECUTE FUNCTION r8_stall();" >/dev/null
stalled() { q "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'"; }
"$V7FILL" -q import r8 X.csv Y.csv --retention 30d --batch-rows 5000 >r8.out 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    [ "$(stalled)" = 1 ] && break
    kill -0 "$pid" 2>/dev/null || { wait "$pid" || true; fail "import r8 ended before the stall: $(cat r8.out)"; }
    sleep 0.1
done
[ "$(stalled)" = 1 ] || fail "import r8 did not reach Y.csv's third batch"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
   WHERE datname = current_database() AND wait_event = 'PgSleep'" >/dev/null
q "DROP TRIGGER r8_stall ON v7fill.checkpoint" >/dev/null
assert_eq "X.csv:120 Y.csv:150" "$(per_source r8.rejects.csv)" "rejects when killed (Y's last 50 uncommitted)"
assert_eq "X.csv:11880 Y.csv:14850" "$(per_source r8.late.csv)" "late rows when killed"
assert_eq "10001|100" "$(q "SELECT line, rejected FROM v7fill.checkpoint WHERE target_table = 'r8' AND source_name = 'Y.csv'")" \
    "Y.csv's checkpoint (two batches committed)"
run_expect 0 "$V7FILL" -q import r8 X.csv Y.csv --retention 30d --batch-rows 5000 --report-json r8.json
# X.csv was finished: read again from the start, its rejects and late rows are listed again.
assert_eq "X.csv:240 Y.csv:150" "$(per_source r8.rejects.csv)" "rejects after the rerun"
assert_eq 0 "$(twice_of r8.rejects.csv Y.csv)" "Y.csv's rejects written twice"
assert_eq "X.csv:23760 Y.csv:14850" "$(per_source r8.late.csv)" "late rows after the rerun"
assert_eq 0 "$(twice_of r8.late.csv Y.csv)" "Y.csv's late rows written twice"
assert_not_contains "$OUT" "another import appended" "the rerun's own rows taken for another import's"
assert_eq "27000 27000 270" "$(balance r8.json)" "read = inserted + duplicates + rejected + expired"
assert_eq "150" "$(q "SELECT rejected FROM v7fill.checkpoint WHERE target_table = 'r8' AND source_name = 'Y.csv'")" \
    "Y.csv's rejected count (its rows in the rejects file)"

# 9. the second file's rejects all committed when its import stops
gen X9.csv 12000 01
awk 'BEGIN{print "created_at,a,b,c"; for(i=0;i<15000;i++) printf "%s,%d,x,y\n", (i<10000 && i%100==7?"bad":sprintf("2024-02-01T00:00:00.%06dZ",i)), i}' >Z.csv
mk r9
q "CREATE FUNCTION r9_boom() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN
     IF NEW.target_table = 'r9' AND NEW.source_name = 'Z.csv' AND NEW.line > 11000 THEN
       RAISE EXCEPTION 'boom at commit'; END IF;
     RETURN NEW; END\$\$;
   CREATE CONSTRAINT TRIGGER r9_boom AFTER INSERT OR UPDATE ON v7fill.checkpoint
     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION r9_boom();" >/dev/null
run_expect 5 "$V7FILL" -q import r9 X9.csv Z.csv --batch-rows 5000
q "DROP TRIGGER r9_boom ON v7fill.checkpoint" >/dev/null
assert_eq "X9.csv:120 Z.csv:100" "$(per_source r9.rejects.csv)" "rejects when stopped"
run_expect 0 "$V7FILL" -q import r9 X9.csv Z.csv --batch-rows 5000 --report-json r9.json
assert_eq "X9.csv:240 Z.csv:100" "$(per_source r9.rejects.csv)" "rejects after the rerun"
assert_eq 0 "$(twice_of r9.rejects.csv Z.csv)" "Z.csv's rejects written twice"
assert_not_contains "$OUT" "WARNING" "nothing to warn about"
assert_eq "27000 27000 220" "$(balance r9.json)" "read = inserted + duplicates + rejected"
assert_eq 26780 "$(q 'SELECT count(*) FROM r9')" "rows in r9"

# 10. inputs no unfinished checkpoint names are not read before their turn
# (told by the access time: reading a file whose atime is years old updates it under relatime,
# strictatime and lazytime; not under noatime, where this case cannot tell and is passed over)
echo x >atime.probe
touch -a -d '2001-01-01 00:00:00' atime.probe
old_atime=$(stat -c %X atime.probe)
cat atime.probe >/dev/null
if [ "$(stat -c %X atime.probe)" = "$old_atime" ]; then
    echo "case 10 passed over: reading a file does not update its access time here" >&2
else
    gen A10.csv 30000 01
    gen B10.csv 3000 02
    mkdir sub
    cp A10.csv sub/A10.csv
    mk r10
    run_expect 6 "$V7FILL" -q import r10 A10.csv --max-rejects 150
    assert_eq "f" "$(q "SELECT finished FROM v7fill.checkpoint WHERE target_table = 'r10'")" \
        "A10.csv's checkpoint unfinished"
    touch -a -d '2001-01-01 00:00:00' B10.csv sub/A10.csv
    # A10.csv's resume stops at once (its 200 rejects are over 150): no other input's turn comes.
    run_expect 6 "$V7FILL" -q import r10 A10.csv B10.csv sub/A10.csv --max-rejects 150
    assert_contains "$OUT" "too many rejected rows" "the rerun stops in A10.csv"
    assert_eq "$old_atime $old_atime" "$(stat -c %X B10.csv sub/A10.csv | tr '\n' ' ' | sed 's/ $//')" \
        "access times of B10.csv and sub/A10.csv (read before their turn?)"
fi
echo "ok"
