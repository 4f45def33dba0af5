#!/usr/bin/env bash
# A checkpoint resumes only the same import (issue 16 #8): "fix and run again" must
# import the fixed rows.
#  1. a wrong option caught by --max-rejects, then corrected: the file is read from the
#     start (the message names the option), every row lands, the earlier run's rejects
#     do not count against --max-rejects;
#  2. the input fixed in place (same size, first 64 KiB untouched): read from the start,
#     every row lands;
#  3. an unchanged (zstd) input with only --max-rejects raised still resumes: not read
#     again.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

mk() {
    q "SET client_min_messages = warning; DROP TABLE IF EXISTS $1 CASCADE;
       DROP TABLE IF EXISTS $1_source_ref;
       CREATE TABLE $1 (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL,
                        a text, b text, c text) PARTITION BY RANGE (id);" >/dev/null
}

# 1. forgot --time-format: the safety net trips; corrected, every row goes in
awk 'BEGIN{print "created_at,a,b,c"; for(i=0;i<50000;i++) printf "%d,%d,x,y\n", 1700000000+i, i}' >EP.csv
mk ep
run_expect 6 "$V7FILL" -q import ep EP.csv --max-rejects 1%
run_expect 0 "$V7FILL" -q import ep EP.csv --max-rejects 1% --time-format epoch-s
assert_contains "$OUT" '--time-format (was "iso", now "epoch-s") changed' "the message names the option"
assert_contains "$OUT" "reading it from the start" "the message says what happens"
assert_contains "$OUT" "read=50000 inserted=50000 duplicates=0 rejected=0" "counts"
assert_eq 50000 "$(q 'SELECT count(*) FROM ep')" "rows in ep"

# 2. the input fixed in place, same size, beyond the first 64 KiB
awk 'BEGIN{print "created_at,a,b,c"; for(i=0;i<30000;i++) printf "%s,%d,x,y\n", (i%100==7 && i>3000 ? "2024-13-01T00:00:00Z" : sprintf("2024-01-01T00:00:%02dZ", i%60)), i}' >FX.csv
mk fx
run_expect 6 "$V7FILL" -q import fx FX.csv --max-rejects 50
sed -i 's/^2024-13-01/2024-12-01/' FX.csv
run_expect 0 "$V7FILL" -q import fx FX.csv --max-rejects 50
assert_contains "$OUT" "its content changed since the earlier run stopped" "the message says why"
assert_contains "$OUT" "read=30000 inserted=20070 duplicates=9930 rejected=0" "counts"
assert_eq 30000 "$(q 'SELECT count(*) FROM fx')" "rows in fx"

# 3. unchanged input, only --max-rejects raised: resumed, not read again
awk 'BEGIN{print "created_at,a,b,c"; for(i=0;i<30000;i++) printf "%s,%d,x,y\n", (i%100==7?"bad":sprintf("2024-01-01T00:00:%02dZ",i%60)), i}' >MR.csv
zstd -q -f MR.csv -o MR.csv.zst
mk mr
run_expect 6 "$V7FILL" -q import mr MR.csv.zst --max-rejects 150
run_expect 0 "$V7FILL" import mr MR.csv.zst --max-rejects 1000 --no-progress
assert_contains "$OUT" "resuming after line 20001" "resumed"
assert_not_contains "$OUT" "from the start" "not read again"
assert_eq 20000 "$(q "SELECT coalesce((stats->>'read_resumed')::bigint, -1) FROM v7fill.run WHERE target_table = 'mr' ORDER BY run_id DESC LIMIT 1")" "rows resumed"
assert_eq 29700 "$(q 'SELECT count(*) FROM mr')" "rows in mr"
echo "ok"
