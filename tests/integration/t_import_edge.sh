# Input paths with bad or unusual input: each gives a clear error or reject,
# and nothing is lost (read = inserted + duplicates + rejected).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC
sqlf <<'SQL'
CREATE TABLE e (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, v text)
    PARTITION BY RANGE (id);
SQL
balanced() { python3 -c "import json,sys; r=json.load(open('$1')); sys.exit(0 if r['balanced'] and r['read']==$2 else 1)" \
    || fail "$1: not balanced or read != $2: $(cat "$1")"; }

# stdin, epoch-ms times
printf 'created_at,v\n1782864000123,a\n1782864000456,b\n' | \
    run_expect 0 "$V7FILL" import e - --time-format epoch-ms --no-progress --report-json s.json --rejects r0.csv
balanced s.json 2
assert_eq "2026-07-01 00:00:00.123+00" "$(q "SELECT created_at FROM e WHERE v = 'a'")" "epoch-ms stored as the instant"
assert_eq "$("$V7FILL" uuid floor 2026-07-01T00:00:00.123Z | cut -c1-13)" "$(q "SELECT left(id::text, 13) FROM e WHERE v = 'a'")" "id time = event time"

# local times in a named zone, strptime pattern
printf 'created_at,v\n01/07/2026 02:00:00,tz\n' >tz.csv
run_expect 0 "$V7FILL" import e tz.csv --time-format '%d/%m/%Y %H:%M:%S' --input-timezone Europe/Berlin --no-progress --rejects r1.csv
assert_eq "2026-07-01 00:00:00+00" "$(q "SELECT created_at FROM e WHERE v = 'tz'")" "Berlin summer time is UTC+2"
run_expect 3 "$V7FILL" import e tz.csv --input-timezone Mars/Olympus --no-progress
assert_contains "$OUT" "Mars/Olympus" "unknown zone named"

# an unknown column is an error with a hint, before anything is written
printf 'created_at,v,extra\n2026-07-01,x,y\n' >extra.csv
run_expect 2 "$V7FILL" import e extra.csv --no-progress
assert_contains "$OUT" "has no target column \"extra\"" "unknown column named"
assert_contains "$OUT" "--ignore-column extra" "hint"
run_expect 0 "$V7FILL" import e extra.csv --ignore-column extra --no-progress --rejects r2.csv

# a name the header repeats: refused with a hint, unless --ignore-column
# drops every copy of it (then the rows import, balanced); not for a name
# that picks one column (time, id, --source-ref placeholder)
printf 'created_at,v,note,note\n2026-07-05,dup,n1,n2\n2026-07-05,dup2,n3,n4\n' >dupname.csv
run_expect 4 "$V7FILL" import e dupname.csv --no-progress --rejects rdup0.csv
assert_contains "$OUT" 'duplicate column name "note" in header (columns 3 and 4)' "duplicate named"
assert_contains "$OUT" "--ignore-column note" "hint names the way out"
run_expect 0 "$V7FILL" import e dupname.csv --ignore-column note --no-progress --rejects rdup.csv --report-json dup.json
balanced dup.json 2
assert_eq "dup,dup2" "$(q "SELECT string_agg(v, ',' ORDER BY v) FROM e WHERE v LIKE 'dup%'")" "rows with an ignored repeated column imported"
run_expect 4 "$V7FILL" import e dupname.csv --ignore-column note --source-ref 'x:{note}' --no-progress --rejects rdup1.csv
assert_contains "$OUT" 'duplicate column name "note"' "a repeated name in --source-ref stays refused"
printf 'created_at,v,created_at\n2026-07-05,dupt,2026-07-06\n' >duptime.csv
run_expect 4 "$V7FILL" import e duptime.csv --ignore-column created_at --no-progress --rejects rdup2.csv
assert_contains "$OUT" 'duplicate column name "created_at"' "a repeated time column stays refused"

# the partition key cannot be written by accident
printf 'id,created_at,v\n,2026-07-01,x\n' >idcol.csv
run_expect 2 "$V7FILL" import e idcol.csv --no-progress
assert_contains "$OUT" "--id-column id" "hint to use --id-column"

# ids carried by the input: uuid4 rejected, v7 kept, empty minted
v7=$("$V7FILL" uuid new --at 2026-07-02T00:00:00Z)
printf 'id,created_at,v\nf47ac10b-58cc-4372-a567-0e02b2c3d479,2026-07-01,u4\n%s,2026-07-02,v7\n,2026-07-03,none\nnot-a-uuid,2026-07-03,bad\n' "$v7" >ids.csv
run_expect 0 "$V7FILL" import e ids.csv --id-column id --no-progress --rejects rid.csv --report-json ids.json
balanced ids.json 4
assert_contains "$(cat rid.csv)" "not a UUIDv7 (version 4)" "uuid4 rejected by name"
assert_contains "$(cat rid.csv)" "invalid UUID" "garbage id rejected"
assert_eq "$v7" "$(q "SELECT id FROM e WHERE v = 'v7'")" "valid v7 kept"
assert_eq 1 "$(q "SELECT count(*) FROM e WHERE v = 'none'")" "empty id minted"

# ids in every text form PostgreSQL reads (upper case, no hyphens, braces) are
# kept; with no time column the event time is the id's, and created_at (NOT
# NULL, no default) gets it to the millisecond
v7b=$("$V7FILL" uuid new --at 2026-07-04T01:02:03.456Z)
v7c=$("$V7FILL" uuid new --at 2026-07-04T01:02:04Z)
v7d=$("$V7FILL" uuid new --at 2026-07-04T01:02:05Z)
printf 'id,v
%s,upper
%s,nohyphen
{%s},braces
' "$(echo "$v7b" | tr a-f A-F)" \
    "$(echo "$v7c" | tr -d -)" "$v7d" >idforms.csv
run_expect 0 "$V7FILL" import e idforms.csv --id-column id --no-progress --rejects rif.csv \
    --report-json if.json
assert_eq "3 0" "$(python3 -c 'import json;d=json.load(open("if.json"));print(d["inserted"],d["rejected"])')" \
    "every form kept"
assert_eq "$v7b|2026-07-04 01:02:03.456+00" "$(q "SELECT id, created_at FROM e WHERE v = 'upper'")" \
    "upper-case id kept, created_at its time"
assert_eq "$v7c" "$(q "SELECT id FROM e WHERE v = 'nohyphen'")" "hyphenless id kept"
assert_eq "$v7d" "$(q "SELECT id FROM e WHERE v = 'braces'")" "id in braces kept"
# --time-column naming a column the target lacks: created_at gets the event time
printf 'ts,v\n2026-07-06 07:08:09.123456Z,ts\n' >ts.csv
run_expect 0 "$V7FILL" import e ts.csv --time-column ts --no-progress --rejects rts.csv
assert_eq "2026-07-06 07:08:09.123456+00" "$(q "SELECT created_at FROM e WHERE v = 'ts'")" \
    "created_at holds the event time of --time-column ts"

# impossible and pre-1970 times, clock ahead
printf 'created_at,v\n2026-02-30,feb30\n1969-12-31T23:59:59Z,old\n2999-01-01,future\n,missing\n2026-07-01,ok\n' >times.csv
run_expect 0 "$V7FILL" import e times.csv --no-progress --rejects rt.csv --report-json t.json
balanced t.json 5
assert_contains "$(cat rt.csv)" "February" "impossible date explained"
assert_contains "$(cat rt.csv)" "before 1970" "pre-1970 explained"
assert_contains "$(cat rt.csv)" "clock ahead" "future explained"
assert_contains "$(cat rt.csv)" "missing event time" "missing time explained"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'e'::regclass AND c.relname LIKE 'e__2999%'")" "no far-future partition"

# --max-rejects: stop with status 6, committed batches stay
python3 -c "
print('created_at,v')
for i in range(50): print(f'2026-07-{1 + i % 28:02d},ok{i}')
for i in range(10): print(f'garbage{i},bad{i}')
" >many.csv
run_expect 6 "$V7FILL" import e many.csv --max-rejects 5 --batch-rows 25 --no-progress --rejects rm.csv
assert_contains "$OUT" "too many rejected rows" "limit message"
assert_eq 50 "$(q "SELECT count(*) FROM e WHERE v ~ '^ok[0-9]+$'")" "batches before the limit committed"
# A limit reached mid-file, then a rerun with a higher limit: it resumes, its report counts
# the earlier run's rows as read and says so, and its rows/s is this run's rows over its time.
python3 -c "
print('created_at,v')
for i in range(50): print(f'2026-07-{1 + i % 28:02d},m{i}')
for i in range(10): print(f'garbage{i},mbad{i}')
for i in range(50, 100): print(f'2026-07-{1 + i % 28:02d},m{i}')
" >mid.csv
run_expect 6 "$V7FILL" import e mid.csv --max-rejects 5 --batch-rows 25 --no-progress --rejects rmid.csv
before=$(q "SELECT rows_read FROM v7fill.checkpoint WHERE source_name LIKE '%mid.csv' AND NOT finished")
[ -n "$before" ] && [ "$before" -gt 0 ] && [ "$before" -lt 110 ] || fail "the stopped run left no mid-file checkpoint"
run_expect 0 "$V7FILL" import e mid.csv --max-rejects 100 --batch-rows 25 --no-progress \
    --rejects rmid.csv --report-json resumed.json
assert_contains "$OUT" "rows read      110   ($before of them accounted for by earlier, interrupted runs)" \
    "resumed report line"
assert_eq 100 "$(q "SELECT count(*) FROM e WHERE v ~ '^m[0-9]+$'")" "every good row of the resumed file once"
assert_eq 10 "$(grep -c mbad rmid.csv)" "every reject of the resumed file once"
python3 - "$before" <<'PY' || fail "resumed report: $(cat resumed.json)"
import json, sys
r = json.load(open("resumed.json"))
before = int(sys.argv[1])
assert r["read"] == 110 and r["read_resumed"] == before and r["files_resumed"] == 1, r
assert r["balanced"], r
# this run read 110 - before rows
assert abs(r["rows_per_s"] * r["elapsed_s"] - (110 - before)) < 0.01, r
PY

# --skip-finished: three files, the third stops at --max-rejects.  The run says how many
# files were finished and how to skip them; the rerun with --skip-finished reads only the
# third (resumed), plan --skip-finished reads nothing, a changed file is read again.
python3 -c "
for name, lo in (('sx.csv', 0), ('sy.csv', 100), ('sz.csv', 200)):
    with open(name, 'w') as f:
        f.write('created_at,v\\n')
        for i in range(lo, lo + 100):
            f.write(f'2026-06-{1 + i % 28:02d},s{i}\\n')
            if name == 'sz.csv' and i == lo + 40:
                for j in range(10): f.write(f'garbage{j},sbad{j}\\n')
"
run_expect 6 "$V7FILL" import e sx.csv sy.csv sz.csv --max-rejects 5 --batch-rows 25 \
    --rejects rs.csv --source-ref 's:{v}'
assert_contains "$OUT" "2 of the 3 files were imported completely before this stopped; a rerun with --skip-finished" \
    "failed run points to --skip-finished"
run_expect 0 "$V7FILL" import e sx.csv sy.csv sz.csv --max-rejects 100 --batch-rows 25 \
    --rejects rs.csv --source-ref 's:{v}' --skip-finished --report-json skip.json
assert_contains "$OUT" "sx.csv: skipped: an earlier run imported all of it" "first file skipped"
assert_contains "$OUT" "files          3 (1 resumed) (2 skipped: imported completely by an earlier run)" \
    "report names skipped files"
python3 - <<'PY' || fail "skip report: $(cat skip.json)"
import json
r = json.load(open("skip.json"))
assert r["files"] == 3 and r["files_skipped"] == 2 and r["files_resumed"] == 1, r
assert r["read"] == 110 and r["rejected"] == 10 and r["duplicates"] == 0, r
assert r["balanced"], r
PY
assert_eq 300 "$(q "SELECT count(*) FROM e WHERE v ~ '^s[0-9]+$'")" "every row of the three files once"
assert_eq 10 "$(grep -c sbad rs.csv)" "every reject once"
run_expect 0 "$V7FILL" plan e sx.csv sy.csv sz.csv --source-ref 's:{v}' --skip-finished --json
python3 -c "
import json, sys
r = json.loads(sys.argv[1][sys.argv[1].index('{'):])
assert r['files_skipped'] == 3 and r['read'] == 0, r
" "$OUT" || fail "plan --skip-finished: $OUT"
echo "2026-06-03,s300" >>sx.csv
run_expect 0 "$V7FILL" import e sx.csv sy.csv --rejects rs.csv --source-ref 's:{v}' --skip-finished \
    --report-json changed.json
python3 - <<'PY' || fail "changed file: $(cat changed.json)"
import json
r = json.load(open("changed.json"))
assert r["files_skipped"] == 1 and r["read"] == 101 and r["inserted"] == 1 and r["duplicates"] == 100, r
PY

# a header-only file and a file that is not CSV at all
printf 'created_at,v\n' >hdr.csv
run_expect 0 "$V7FILL" import e hdr.csv --no-progress --rejects rh.csv --report-json h.json
balanced h.json 0
head -c 3000 /dev/urandom >binary.csv
set +e; "$V7FILL" import e binary.csv --no-progress --rejects rb.csv >bin.out 2>&1; st=$?; set -e
[ "$st" = 0 ] || [ "$st" = 2 ] || [ "$st" = 4 ] || fail "binary input: unexpected status $st: $(cat bin.out)"
grep -q "ERROR\|rejected" bin.out || fail "binary input: no clear message: $(cat bin.out)"

# a truncated zstd file: error naming the file, rows before the break kept or none, exit 4
python3 -c "
print('created_at,v')
for i in range(20000): print(f'2026-08-{1 + i % 28:02d}T00:00:{i % 60:02d}Z,z{i}')
" | zstd -q -c >z.csv.zst
head -c 20000 z.csv.zst >trunc.csv.zst
run_expect 4 "$V7FILL" import e trunc.csv.zst --no-progress --rejects rz.csv
assert_contains "$OUT" "trunc.csv.zst" "error names the file"

# injection attempts through the template and the header never reach SQL text
printf 'created_at,v\n2026-07-05,inj\n' >inj.csv
run_expect 0 "$V7FILL" import e inj.csv --source-ref "x'); DROP TABLE e; --{v}" --no-progress --rejects ri.csv
assert_eq t "$(q "SELECT to_regclass('e') IS NOT NULL")" "table still there"
printf 'created_at,"v""; DROP TABLE e; --"\n2026-07-05,inj2\n' >inj2.csv
run_expect 2 "$V7FILL" import e inj2.csv --no-progress --rejects ri2.csv
assert_eq t "$(q "SELECT to_regclass('e') IS NOT NULL")" "table still there after hostile header"

# a password in the connection string never appears in output
run_expect 5 "$V7FILL" -d "host=$PGHOST port=$PGPORT dbname=nosuchdb user=postgres password=Sup3rSecret" import e inj.csv --no-progress
assert_not_contains "$OUT" "Sup3rSecret" "password not echoed"
