#!/usr/bin/env bash
# Importing the same input again with another --source-ref would insert every row a
# second time under new references (issue 16 #13): refused (exit 3) with both templates
# and --new-source-ref named, for a finished and for a stopped import; --new-source-ref
# does it; another file may use another template.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

sqlf <<'SQL'
CREATE TABLE st (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL,
                 a text, b text, c text) PARTITION BY RANGE (id);
SQL
awk 'BEGIN{print "created_at,a,b,c"; for(i=0;i<30000;i++) printf "%s,%d,x,y\n", (i%100==7?"bad":sprintf("2024-01-01T00:00:%02dZ",i%60)), i}' >MR.csv
awk 'BEGIN{print "created_at,a,b,c"; for(i=0;i<3000;i++) printf "2024-02-01T00:00:%02dZ,%d,x,y\n", i%60, i}' >B.csv

# 1. finished with the default reference, then another template: refused
run_expect 0 "$V7FILL" -q import st MR.csv
run_expect 3 "$V7FILL" -q import st MR.csv --source-ref 'mr:{a}'
assert_contains "$OUT" "MR.csv was imported into public.st with the default source reference; with --source-ref 'mr:{a}' every row would be inserted again" "message"
assert_contains "$OUT" "--new-source-ref" "the hint names the flag"
assert_eq 29700 "$(q 'SELECT count(*) FROM st')" "rows after the refusal"

# 2. another file may use another template
run_expect 0 "$V7FILL" -q import st B.csv --source-ref 'b:{a}'
assert_eq 32700 "$(q 'SELECT count(*) FROM st')" "rows after B"
# ... and the same one again with it: no refusal, nothing new
run_expect 0 "$V7FILL" -q import st B.csv --source-ref 'b:{a}'
assert_contains "$OUT" "inserted=0 duplicates=3000" "B again"

# 3. said so: imported again under the new references
run_expect 0 "$V7FILL" -q import st MR.csv --source-ref 'mr:{a}' --new-source-ref
assert_eq 62400 "$(q 'SELECT count(*) FROM st')" "rows after --new-source-ref"
# the checkpoint now names the new template: the old one is refused in turn
run_expect 3 "$V7FILL" -q import st MR.csv
assert_contains "$OUT" "with --source-ref 'mr:{a}'; with the default source reference" "message"

# 4. a stopped import, resumed with another template: refused too
sqlf <<'SQL'
CREATE TABLE st2 (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL,
                  a text, b text, c text) PARTITION BY RANGE (id);
SQL
run_expect 6 "$V7FILL" -q import st2 MR.csv --source-ref 'x:{a}' --max-rejects 150
run_expect 3 "$V7FILL" -q import st2 MR.csv --source-ref 'y:{a}' --max-rejects 1000
assert_contains "$OUT" "MR.csv was imported into public.st2 up to line 20001 with --source-ref 'x:{a}'; with --source-ref 'y:{a}'" "message"
run_expect 0 "$V7FILL" -q import st2 MR.csv --source-ref 'x:{a}' --max-rejects 1000
assert_eq 29700 "$(q 'SELECT count(*) FROM st2')" "rows in st2"
echo "ok"
