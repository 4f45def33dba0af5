# Input edge cases of issue 16 (#6, #10-#13): each bad input costs one row or
# gives a clear error up front, and nothing is lost (read = inserted +
# duplicates + rejected).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC
sqlf <<'SQL'
CREATE TABLE e (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, a text, b text, c text)
    PARTITION BY RANGE (id);
CREATE TABLE mp (id uuid NOT NULL PRIMARY KEY, created_at timestamptz, a text, raw_ts text)
    PARTITION BY RANGE (id);
SQL

# #10: years 10000-10889 are UUIDv7 times no window covers: one reject each,
# the batch-mates land
printf 'created_at,a,b,c\n2024-01-01T00:00:00Z,ok,,\n10000-01-01T00:00:00Z,typo,,\n2024-01-02T00:00:00Z,ok2,,\n' >y.csv
run_expect 0 "$V7FILL" import e y.csv --max-future 9000y --no-progress --rejects y.rej
assert_eq 2 "$(q "SELECT count(*) FROM e WHERE a IN ('ok', 'ok2')")" "year 10000: batch-mates imported"
assert_contains "$(cat y.rej)" '"y.csv",3,"time out of range: ' "year 10000: one reject, line 3"
printf 'created_at,a,b,c\n1700000000000,okms,,\n281474976710655,max48,,\n' >ym.csv
run_expect 0 "$V7FILL" import e ym.csv --time-format epoch-ms --max-future 100000y --no-progress --rejects ym.rej
assert_eq 1 "$(q "SELECT count(*) FROM e WHERE a = 'okms'")" "epoch-ms 2^48-1: batch-mate imported"
assert_contains "$(cat ym.rej)" '"ym.csv",3,"time out of range: ' "epoch-ms 2^48-1: one reject"

# #11: the time column mapped to a text column keeps its text there, and
# created_at still gets the event time
printf 'ts,a\n2024-01-01T00:00:00+02:00,x\n' >mp.csv
run_expect 0 "$V7FILL" import mp mp.csv --time-column ts --map ts=raw_ts --no-progress --rejects mp.rej
assert_eq "2023-12-31 22:00:00+00|2024-01-01T00:00:00+02:00" "$(q "SELECT created_at, raw_ts FROM mp")" \
    "--map ts=raw_ts: created_at gets the event time"

# #6: a corrupt zstd frame: nothing decoded from it is committed (the whole
# input is checked before its first row), the error names the file; a good
# .zst still imports; the same from stdin; a truncated one as well
awk 'BEGIN{print "created_at,a,b,c"; for(i=0;i<50000;i++) printf "2024-%02d-%02dT%02d:%02d:%02d.%06dZ,%d,\"b%d\",c\n", 1+i%12, 1+i%28, i%24, i%60, (i*7)%60, i, i, i}' >z.csv
zstd -q -f z.csv -o z.csv.zst
python3 -c "
d=bytearray(open('z.csv.zst','rb').read())
for i in range(90000,90050): d[i]^=0x55
open('bad.csv.zst','wb').write(d)
open('cut.csv.zst','wb').write(d[:100000])"
sqlf -c "CREATE TABLE zc (LIKE e INCLUDING ALL) PARTITION BY RANGE (id)"
run_expect 4 "$V7FILL" import zc bad.csv.zst --no-progress --rejects zc.rej
assert_contains "$OUT" "corrupt zstd data in bad.csv.zst" "corrupt zstd: the file is named"
assert_contains "$OUT" "nothing from it was imported" "corrupt zstd: says nothing was imported"
assert_eq 0 "$(q "SELECT count(*) FROM zc")" "corrupt zstd: no row committed"
set +e; OUT=$("$V7FILL" import zc - --no-progress --rejects zc.rej <bad.csv.zst 2>&1); rc=$?; set -e
assert_eq 4 "$rc" "corrupt zstd on stdin: exit 4"
assert_contains "$OUT" "corrupt zstd data in stdin" "corrupt zstd on stdin: named"
assert_eq 0 "$(q "SELECT count(*) FROM zc")" "corrupt zstd on stdin: no row committed"
run_expect 4 "$V7FILL" import zc cut.csv.zst --no-progress --rejects zc.rej
assert_contains "$OUT" "unexpected end of compressed data in cut.csv.zst" "truncated zstd named"
assert_eq 0 "$(q "SELECT count(*) FROM zc")" "truncated zstd: no row committed"
run_expect 0 "$V7FILL" import zc z.csv.zst --no-progress --rejects zc.rej
assert_eq 50000 "$(q "SELECT count(*) FROM zc")" "a good .zst imports"
sqlf -c "TRUNCATE zc, zc_source_ref"
set +e; OUT=$("$V7FILL" import zc - --no-progress --rejects zc.rej <z.csv.zst 2>&1); rc=$?; set -e
assert_eq 0 "$rc" "a good .zst on stdin: exit 0 ($OUT)"
assert_eq 50000 "$(q "SELECT count(*) FROM zc")" "a good .zst on stdin imports"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.checkpoint WHERE target_table = 'zc' AND file_identity LIKE 'stdin:%' AND finished")" \
    "standard input read to its end leaves no checkpoint (it cannot be resumed)"

# #12: a lone CR inside a quoted field is data, not a line: line numbers in
# the rejects file match grep -n
printf 'created_at,a,b,c\n2024-01-01T00:00:00Z,"x\ry",b,c\n2024-01-01T00:00:01Z,"p\r\nq\rr",b,c\nbad,1,2,3\n' >cr.csv
run_expect 0 "$V7FILL" import e cr.csv --no-progress --rejects cr.rej
assert_eq "$(grep -n '^bad' cr.csv | cut -d: -f1)" "$(python3 -c "import csv; print([r[1] for r in csv.reader(open('cr.rej')) if r[0]=='cr.csv'][0])")" \
    "lone CR in quotes: the reject's line is grep -n's"
assert_eq 5 "$(grep -n '^bad' cr.csv | cut -d: -f1)" "the file has bad on line 5"

# #13: option checks before anything is read
printf 'created_at,a,b,c\n2024-03-01T00:00:00Z,x,y,z\n' >o.csv
run_expect 2 "$V7FILL" import e o.csv --map a=b --ignore-column a --no-progress
assert_contains "$OUT" "--ignore-column a conflicts with --map a=" "a column mapped and ignored: usage error"
run_expect 2 "$V7FILL" import e o.csv --ignore-column nosuchcol --no-progress
assert_contains "$OUT" "--ignore-column nosuchcol: o.csv has no column" "ignoring a missing column: usage error"
run_expect 2 "$V7FILL" import e o.csv --rejects - --no-progress
assert_contains "$OUT" "--rejects must name a file" "--rejects - refused"
[ ! -e ./- ] || fail "--rejects - created a file named '-'"
run_expect 2 "$V7FILL" import e o.csv --delimiter '"' --no-progress
assert_contains "$OUT" "delimiter and quote must differ" "--delimiter '\"': usage error"
run_expect 2 "$V7FILL" import e o.csv --quote ',' --no-progress
run_expect 1 "$V7FILL" import e o.csv --report-json /nonexistent/x --no-progress
assert_contains "$OUT" 'could not write report "/nonexistent/x"' "unwritable --report-json named"
assert_eq 0 "$(q "SELECT count(*) FROM e WHERE a = 'x'")" "unwritable --report-json: checked before reading"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.checkpoint WHERE source_name = 'o.csv'")" "unwritable --report-json: no checkpoint"
run_expect 0 "$V7FILL" import e o.csv --max-future 0 --no-progress --rejects o.rej
assert_eq 1 "$(q "SELECT count(*) FROM e WHERE a = 'x'")" "--max-future 0 accepted"
# --report-json -: stdout is the JSON alone (with or without --json)
printf 'created_at,a,b,c\n2024-03-01T00:00:01Z,rj,y,z\n' >rj.csv
"$V7FILL" import e rj.csv --report-json - --no-progress --rejects o.rej >rj.out 2>rj.err
python3 -c "import json; r=json.load(open('rj.out')); assert r['read']==1" || fail "--report-json -: stdout is not one JSON document: $(cat rj.out)"
assert_contains "$(cat rj.err)" "rows read" "--report-json -: the table goes to stderr"
"$V7FILL" import e rj.csv --report-json - --json --no-progress --rejects o.rej >rj2.out 2>/dev/null
python3 -c "import json; json.load(open('rj2.out'))" || fail "--report-json - --json: stdout is not one JSON document"
# non-tty progress: no "0 rows read" line at the start
awk 'BEGIN{print "created_at,a,b,c"; for(i=0;i<3000;i++) printf "2024-03-02T00:00:00.%06dZ,pg%d,y,z\n", i, i}' >pg.csv
"$V7FILL" import e pg.csv --batch-rows 1000 --rejects o.rej >/dev/null 2>pg.err
assert_contains "$(cat pg.err)" "pg.csv: 3000 rows read" "non-tty progress: the final line is there"
assert_not_contains "$(cat pg.err)" ": 0 rows read" "non-tty progress: no first line before any row"

# #13: one empty (0-byte) file among several: the others are imported, the
# empty one is named, exit status 4
: >empty.csv
printf 'created_at,a,b,c\n2024-03-03T00:00:00Z,em1,y,z\n' >em1.csv
printf 'created_at,a,b,c\n2024-03-03T00:00:01Z,em2,y,z\n' >em2.csv
run_expect 4 "$V7FILL" import e em1.csv empty.csv em2.csv --no-progress --rejects o.rej
assert_contains "$OUT" "empty.csv is empty" "the empty file is named"
assert_contains "$OUT" "the others were imported" "says the others were imported"
assert_eq 2 "$(q "SELECT count(*) FROM e WHERE a IN ('em1', 'em2')")" "the files around an empty one are imported"

# #13: plan on a file with an unterminated quote at its end prints its
# report (the rows before), then the error, as import does
printf 'created_at,a,b,c\n2024-03-04T00:00:00Z,uq,y,z\n2024-03-04T00:00:01Z,"open,y,z\n' >uq.csv
"$V7FILL" plan e uq.csv --no-progress >uq.out 2>uq.err && fail "plan of an unterminated quote: exit 0"
assert_contains "$(cat uq.out)" "read=1 " "plan prints its report before the error"
assert_contains "$(cat uq.err)" "unterminated quoted field" "plan names the error"

# #13: a header ending in a delimiter: rows whose last field is empty land,
# a row with a value there is one reject; --ignore-column c5 takes it too
printf 'created_at,a,b,c,\n2024-03-05T00:00:00Z,td1,y,z,\n2024-03-05T00:00:01Z,td2,y,z,oops\n' >td.csv
run_expect 0 "$V7FILL" import e td.csv --no-progress --rejects td.rej
assert_eq 1 "$(q "SELECT count(*) FROM e WHERE a = 'td1'")" "trailing delimiter in the header: the row lands"
assert_contains "$(cat td.rej)" '"td.csv",3,"a value in column 5, which the header leaves unnamed' "a value there: one reject"
printf 'created_at,a,b,c,\n2024-03-05T00:00:02Z,td3,y,z,kept\n' >td2.csv
run_expect 0 "$V7FILL" import e td2.csv --ignore-column c5 --no-progress --rejects td.rej
assert_eq 1 "$(q "SELECT count(*) FROM e WHERE a = 'td3'")" "--ignore-column c5 drops the unnamed column"

# #13: one 30 MB field with --batch-bytes 1MB: peak memory stays near a
# small multiple of the record (window, fields, COPY line, raw copy), not
# six times it
python3 -c "
f=open('wide.csv','w'); f.write('created_at,a,b,c\n2024-03-06T00:00:00Z,'+'w'*30000000+',b,c\n2024-03-06T00:00:01Z,small,b,c\n')"
# (peak RSS unless /usr/bin/time is missing or the binary carries a sanitizer)
if [ -x /usr/bin/time ] && ! grep -q -e __asan_init -e __tsan_init "$V7FILL"; then
    timed=(/usr/bin/time -f '%M' -o wide.rss)
else
    timed=()
fi
"${timed[@]}" "$V7FILL" -q import e wide.csv --batch-bytes 1MB --no-progress --rejects o.rej >/dev/null \
    || fail "the 30 MB field did not import"
assert_eq 30000000 "$(q "SELECT length(a) FROM e WHERE created_at = '2024-03-06T00:00:00Z'")" "the 30 MB field is imported whole"
if [ -f wide.rss ]; then
    rss_mb=$(( $(tail -n1 wide.rss) / 1024 ))
    echo "peak RSS with a 30 MB field: ${rss_mb} MB"
    [ "$rss_mb" -lt 150 ] || fail "a 30 MB record took $rss_mb MB of memory (at most 150 MB, 5x the record)"
fi
