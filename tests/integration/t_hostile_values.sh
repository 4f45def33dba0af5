#!/usr/bin/env bash
# Hostile values and files (beyond t_import_edge.sh): NUL bytes, invalid UTF-8 of every
# kind, a 50 MB field, 10,000 columns, empty files, header-only files (plain and zstd),
# CRLF / LF / CR mixes, BOMs, files that are not CSV at all.  Each gives a clear error
# naming the file, or per-row rejects with a reason; and nothing is lost: in every report
# read = inserted + duplicates + rejected, and read is the number of records in the file.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

sqlf <<'SQL'
CREATE TABLE v (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, a text, b text)
    PARTITION BY RANGE (id);
SQL
# report FILE READ [INSERTED REJECTED]: balanced, with these counts
report() {
    python3 - "$@" <<'PY' || fail "report $1: $(head -c 600 "$1")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["balanced"], "unbalanced"
assert r["read"] == r["inserted"] + r["duplicates"] + r["rejected"] + r["expired"], "sum"
assert r["read"] == int(sys.argv[2]), ("read", r["read"])
if len(sys.argv) > 3:
    assert r["inserted"] + r["duplicates"] == int(sys.argv[3]), ("inserted+duplicates", r["inserted"], r["duplicates"])
    assert r["rejected"] == int(sys.argv[4]), ("rejected", r["rejected"])
PY
}
# rejected_lines REJECTS: the line numbers in a rejects file, one per line
rejected_lines() { python3 -c '
import csv, sys
csv.field_size_limit(1 << 30)
rows = list(csv.reader(open(sys.argv[1], newline="", encoding="utf-8", errors="surrogateescape")))
assert rows[0] == ["source", "line", "reason", "sqlstate", "record"]
print(" ".join(r[1] for r in rows[1:]))' "$1"; }
reset() { q "TRUNCATE v; DROP TABLE IF EXISTS v_source_ref; DELETE FROM v7fill.checkpoint" >/dev/null 2>&1 || true; }

# ---- NUL bytes and invalid UTF-8: per-row rejects, field and byte named -----------------
printf 'created_at,a,b\n2024-01-01,n\x00ul,x\n2024-01-02,"q\x00uoted",x\n2024-01\x00-03,t,x\n2024-01-04,ok,x\n2024-01-05,\xc0\xaf,x\n2024-01-06,\xed\xa0\x80,x\n2024-01-07,\xf4\x90\x80\x80,x\n2024-01-08,\x80,x\n2024-01-09,tr\xe2\x82,x\n2024-01-10,caf\xe9,x\n2024-01-11,\xf0\x9f\x98\x80 4-byte,x\n2024-01-12,bom\xef\xbb\xbfinside,x\n2024-01-13,ok,\xe2\x82\n' >bad.csv
run_expect 0 "$V7FILL" import v bad.csv --no-progress --rejects rb.csv --report-json b.json
report b.json 13 3 10
assert_eq "2 3 4 6 7 8 9 10 11 14" "$(rejected_lines rb.csv)" "exactly the bad rows rejected"
r=$(cat -v rb.csv)
assert_contains "$r" '"bad.csv",2,"NUL byte in field 2 (byte offset 1)"' "NUL unquoted"
assert_contains "$r" '"bad.csv",3,"NUL byte in field 2 (byte offset 1)"' "NUL quoted"
assert_contains "$r" '"bad.csv",4,"NUL byte in field 1 (byte offset 7)"' "NUL in the time"
assert_contains "$r" '"bad.csv",6,"invalid UTF-8 in field 2 (byte offset 0)"' "overlong"
assert_contains "$r" '"bad.csv",7,"invalid UTF-8 in field 2' "surrogate"
assert_contains "$r" '"bad.csv",8,"invalid UTF-8 in field 2' "past U+10FFFF"
assert_contains "$r" '"bad.csv",9,"invalid UTF-8 in field 2' "lone continuation byte"
assert_contains "$r" '"bad.csv",10,"invalid UTF-8 in field 2 (byte offset 2)"' "truncated sequence"
assert_contains "$r" '"bad.csv",11,"invalid UTF-8 in field 2 (byte offset 3)"' "Latin-1"
assert_contains "$r" '"bad.csv",14,"invalid UTF-8 in field 3 (byte offset 0)"' "truncated at the end of the last field"
assert_eq "$(printf 'ok\n\xf0\x9f\x98\x80 4-byte\nbom\xef\xbb\xbfinside')" "$(q "SELECT a FROM v ORDER BY created_at")" "valid rows kept byte for byte"
# the rejects file keeps the raw bytes (here a NUL) of the rejected record
python3 -c 'import sys; d=open("rb.csv","rb").read(); sys.exit(0 if b"2024-01-01,n\x00ul,x" in d and b"caf\xe9" in d else 1)' ||
    fail "rejects file does not keep the raw record"
# the reasons are classified as what they are
python3 - <<'PY' || fail "rejected_by_reason: $(python3 -c 'import json;print(json.load(open("b.json"))["rejected_by_reason"])')"
import json
r = {x["reason"]: x["count"] for x in json.load(open("b.json"))["rejected_by_reason"]}
assert r == {"NUL byte": 3, "invalid UTF-8": 7}, r
PY
# in the header: a clear error, exit 4
printf 'created\x00_at,a\n2024-01-01,x\n' >nulhdr.csv
run_expect 4 "$V7FILL" import v nulhdr.csv --no-progress --rejects r.csv
assert_contains "$OUT" "nulhdr.csv:1: column name 1 in header" "NUL in the header"
printf 'created_at,\xe9t\xe9\n2024-01-01,x\n' >l1hdr.csv
run_expect 4 "$V7FILL" import v l1hdr.csv --no-progress --rejects r.csv
assert_contains "$OUT" "l1hdr.csv:1: column name 2 in header is not valid UTF-8 text" "Latin-1 header"

# ---- a 50 MB field: inserted byte for byte, and rejected whole; memory stays bounded ---
reset
python3 - <<'PY'
import hashlib
big = b"x" * (50 * 1024 * 1024 - 3) + "€".encode()
with open("big.csv", "wb") as f:
    f.write(b"created_at,a,b\n2024-03-01," + big + b",big\nnot-a-time,\"" + big + b"\",rejected\n2024-03-02,small,s\n")
open("big.md5", "w").write(hashlib.md5(big).hexdigest())
PY
# peak RSS, unless /usr/bin/time is missing or the binary carries ASan (shadow memory, quarantine)
if [ -x /usr/bin/time ] && ! grep -q __asan_init "$V7FILL"; then timed=(/usr/bin/time -f "%M" -o big.rss); else timed=(); fi
run_expect 0 "${timed[@]}" "$V7FILL" import v big.csv --batch-rows 1 --no-progress --rejects rbig.csv --report-json big.json
report big.json 3 2 1
assert_eq "52428800|$(cat big.md5)" "$(q "SELECT octet_length(a) || '|' || md5(a) FROM v WHERE b = 'big'")" "50 MB value intact"
assert_eq "3" "$(rejected_lines rbig.csv)" "the 50 MB row with a bad time rejected"
[ "$(stat -c %s rbig.csv)" -gt 52428800 ] || fail "the rejects file lacks the 50 MB record"
if [ -f big.rss ]; then
    rss_mb=$(( $(tail -n1 big.rss) / 1024 ))
    echo "peak RSS with a 50 MB field: ${rss_mb} MB"
    [ "$rss_mb" -lt 1024 ] || fail "peak RSS ${rss_mb} MB for a 50 MB field"
fi
# a record longer than the limit would be an error naming the line, not an allocation failure
# (the limit is 256 MiB; not exercised here to keep the test fast)

# ---- 10,000 columns ---------------------------------------------------------------------
reset
python3 - <<'PY'
cols = ["created_at", "a", "b"] + [f"x{i}" for i in range(3, 10000)]
with open("wide.csv", "w") as f:
    f.write(",".join(cols) + "\n")
    for r in range(5):
        f.write(",".join([f"2024-04-0{r + 1}", f"a{r}", f"b{r}"] + [str(i) for i in range(3, 10000)]) + "\n")
with open("widerow.csv", "w") as f:
    f.write("created_at,a,b\n2024-04-10,ok,ok\n")
    f.write(",".join(["2024-04-11"] + ["f"] * 9999) + "\n")
    f.write("2024-04-12,ok2,ok2\n")
with open("hugehdr.csv", "w") as f:
    f.write(",".join(f"c{i}" for i in range(100001)) + "\n")
PY
start=$(date +%s)
run_expect 2 "$V7FILL" import v wide.csv --no-progress --rejects rw.csv
assert_contains "$OUT" 'has no target column "x3"' "the first unknown of 9,997 columns named"
ign=(); for i in $(seq 3 9999); do ign+=(--ignore-column "x$i"); done
run_expect 0 "$V7FILL" import v wide.csv "${ign[@]}" --no-progress --rejects rw.csv --report-json w.json
report w.json 5 5 0
run_expect 0 "$V7FILL" plan v wide.csv "${ign[@]}" --no-progress
assert_contains "$OUT" "duplicates     5" "plan with 10,000 columns"
run_expect 0 "$V7FILL" import v widerow.csv --no-progress --rejects rwr.csv --report-json wr.json
report wr.json 3 2 1
assert_contains "$(head -c 300 rwr.csv)" '"widerow.csv",3,"expected 3 fields, found 10000"' "a 10,000-field record rejected"
run_expect 4 "$V7FILL" import v hugehdr.csv --no-progress --rejects r.csv
assert_contains "$OUT" "hugehdr.csv:1: header has more than 100000 columns" "column limit"
[ $(( $(date +%s) - start )) -lt 20 ] || fail "wide inputs took $(( $(date +%s) - start ))s"

# ---- empty files ------------------------------------------------------------------------
: >empty.csv
run_expect 4 "$V7FILL" import v empty.csv --no-progress --rejects r.csv --report-json e.json
assert_contains "$OUT" "empty.csv is empty: expected a header line" "empty file"
report e.json 0
: | zstd -q -c >empty.csv.zst
run_expect 4 "$V7FILL" import v empty.csv.zst --no-progress --rejects r.csv
assert_contains "$OUT" "empty.csv.zst is empty" "empty zstd frame"
printf '\xef\xbb\xbf\n\n\r\n' >blank.csv
run_expect 4 "$V7FILL" import v blank.csv --no-progress --rejects r.csv
assert_contains "$OUT" "blank.csv is empty" "only a BOM and blank lines"
run_expect 4 "$V7FILL" import v /dev/null --no-progress --rejects r.csv
assert_contains "$OUT" "is empty" "/dev/null"

# ---- header-only files ------------------------------------------------------------------
for f in 'created_at,a,b' 'created_at,a,b\r\n' 'created_at,a,b\n\n\n'; do
    printf "$f" >ho.csv
    run_expect 0 "$V7FILL" import v ho.csv --no-progress --rejects r.csv --report-json ho.json
    report ho.json 0 0 0
    printf "$f" | zstd -q -c >ho.csv.zst
    run_expect 0 "$V7FILL" import v ho.csv.zst --no-progress --rejects r.csv --report-json ho.json
    report ho.json 0 0 0
    run_expect 0 "$V7FILL" plan v ho.csv.zst --no-progress
done

# ---- CRLF / LF / CR mixes and BOMs ------------------------------------------------------
reset
# the same five rows three ways: mixed line ends with a BOM, pure LF, zstd of the mix
printf '\xef\xbb\xbfcreated_at,a,b\r\n2024-05-01,crlf,"multi\r\nline"\n2024-05-02,lf,"x\ny"\r2024-05-03,cr,z\r\n\r\n2024-05-04,after-blank,"\xef\xbb\xbf"\n2024-05-05,"no,final",eol' >mix.csv
printf 'created_at,a,b\n2024-05-01,crlf,"multi\r\nline"\n2024-05-02,lf,"x\ny"\n2024-05-03,cr,z\n2024-05-04,after-blank,"\xef\xbb\xbf"\n"2024-05-05","no,final","eol"\n' >lf.csv
zstd -q -c mix.csv >mix.csv.zst
run_expect 0 "$V7FILL" import v mix.csv --no-progress --rejects rm.csv --report-json m.json
report m.json 5 5 0
assert_eq "crlf|6d756c74690d0a6c696e65 lf|780a79 cr|7a after-blank|efbbbf no,final|656f6c" \
    "$(q "SELECT string_agg(a || '|' || encode(convert_to(b, 'UTF8'), 'hex'), ' ' ORDER BY created_at) FROM v")" \
    "values exact: CRLF inside quotes kept, line ends outside dropped, a BOM inside a value kept"
# the same rows with other line ends, quoting or compression are the same rows
for f in lf.csv mix.csv.zst; do
    run_expect 0 "$V7FILL" import v "$f" --no-progress --rejects rm.csv --report-json m2.json
    python3 -c 'import json,sys; r=json.load(open("m2.json")); sys.exit(0 if r["read"]==5 and r["duplicates"]==5 else 1)' ||
        fail "$f: the same rows were not recognised as duplicates: $(cat m2.json)"
done
assert_eq 5 "$(q "SELECT count(*) FROM v")" "no row twice"
# a BOM before the header of a zstd file; a UTF-16 file (its BOM is not UTF-8)
printf '\xef\xbb\xbfcreated_at,a\n2024-05-06,zbom\n' | zstd -q -c >bom.csv.zst
run_expect 0 "$V7FILL" import v bom.csv.zst --no-progress --rejects r.csv --report-json bz.json
report bz.json 1 1 0
printf 'created_at,a\n2024-05-07,x\n' | iconv -f UTF-8 -t UTF-16 >u16.csv
run_expect 4 "$V7FILL" import v u16.csv --no-progress --rejects r.csv
assert_contains "$OUT" "u16.csv:1: column name 1 in header is not valid UTF-8 text" "UTF-16"

# ---- files that are not CSV at all -------------------------------------------------------
cp "$(type -P true)" elf.bin
gzip -c /etc/services >gz.csv.gz
printf '{"created_at": "2024-01-01", "a": [1, 2]}\n' >j.json
printf '<!DOCTYPE html>\n<html><body><p class="x">created_at,a</p></body></html>\n' >page.html
printf 'created_at,a\n2024-06-01,ok\n' >plain.zst          # .zst without the magic
head -c 100000 /dev/urandom >rand.bin
printf '\x28\xb5\x2f\xfd' >magic.csv; head -c 5000 /dev/urandom >>magic.csv   # zstd magic, garbage
for f in elf.bin gz.csv.gz j.json page.html plain.zst rand.bin magic.csv; do
    set +e
    out=$("$V7FILL" import v "$f" --no-progress --rejects "r-$f.csv" --report-json "r-$f.json" 2>&1)
    st=$?
    set -e
    case "$st" in
        0) report "r-$f.json" "$(python3 -c "import json;print(json.load(open('r-$f.json'))['read'])")" ;;
        2 | 4) assert_contains "$out" "$f" "$f: the error names the file" ;;
        *) fail "$f: exit status $st: $out" ;;
    esac
    echo "$f: exit $st: $(echo "$out" | grep -m1 ERROR | sed 's/^.*ERROR: //' | cut -c1-100)"
done
# the page is read as CSV with a header "<!DOCTYPE html>": no such column, a usage error
run_expect 2 "$V7FILL" import v page.html --no-progress --rejects r.csv
run_expect 4 "$V7FILL" import v plain.zst --no-progress --rejects r.csv
assert_contains "$OUT" "plain.zst is not zstd-compressed" ".zst without the magic number"
run_expect 4 "$V7FILL" import v magic.csv --no-progress --rejects r.csv
assert_contains "$OUT" "magic.csv" "corrupt zstd data named"
run_expect 1 "$V7FILL" import v "$T_TMP" --no-progress --rejects r.csv
assert_contains "$OUT" "is a directory" "a directory"
run_expect 1 "$V7FILL" import v nosuch.csv --no-progress --rejects r.csv
assert_contains "$OUT" 'could not open "nosuch.csv": No such file or directory' "a missing file"
assert_eq 5 "$(q "SELECT count(*) FROM v WHERE created_at >= '2024-05-01' AND created_at < '2024-05-06'")" "nothing else changed"
# ---- the reason categories: a time parse error is not a "wrong field count" ------------
reset
printf 'created_at,a,b\nnot-a-time,x,y\n2024-01-01,only-two\n' >cat.csv
run_expect 0 "$V7FILL" import v cat.csv --no-progress --rejects rc.csv --report-json c.json
report c.json 2 0 2
python3 - <<'PY' || fail "rejected_by_reason: $(python3 -c 'import json;print(json.load(open("c.json"))["rejected_by_reason"])')"
import json
r = {x["reason"]: x["count"] for x in json.load(open("c.json"))["rejected_by_reason"]}
assert r == {"unparsable time": 1, "wrong field count": 1}, r
PY

echo "ok"
