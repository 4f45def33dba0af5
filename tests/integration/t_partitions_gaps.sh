#!/usr/bin/env bash
# Irregular existing partitions (a catch-all, a yearly one among monthly ones): only the
# gaps are filled, nothing overlaps, every instant of the range ends up covered.
# pg_partman-style bare bounds are kept.  A name taken by something else, or one longer
# than 63 bytes, is an error before anything is created.
source "$(dirname "$0")/lib.sh"

jsql() { printf '%s\n' "SELECT $2 FROM (SELECT :'j'::json AS j) s;" | psql -X -q -At -v ON_ERROR_STOP=1 -v j="$1"; }
f() { "$V7FILL" uuid floor "$1"; }
fb() { "$V7FILL" uuid floor --bare "$1"; }

sqlf <<SQL
CREATE TABLE events (id uuid PRIMARY KEY, v int) PARTITION BY RANGE (id);
CREATE TABLE events_old PARTITION OF events FOR VALUES FROM (MINVALUE) TO ('$(f 2026-03-15)');
CREATE TABLE events__2026_05 PARTITION OF events FOR VALUES FROM ('$(f 2026-05-01)') TO ('$(f 2026-06-01)');
CREATE TABLE events__2026_06 PARTITION OF events FOR VALUES FROM ('$(f 2026-06-01)') TO ('$(f 2026-07-01)');
CREATE TABLE events__2027 PARTITION OF events FOR VALUES FROM ('$(f 2027-01-01)') TO ('$(f 2028-01-01)');
SQL

# months are inferred (two monthly, one yearly, a catch-all)
run_expect 0 "$V7FILL" partitions events --from 2026-02-01 --to 2027-03-01
# 13 windows: Feb (catch-all), May, Jun, Jan-Feb 2027 (yearly) skipped; March partly
# covered; April and July-December created whole
assert_contains "$OUT" "created=7 skipped=5 gaps_filled=1 issues=0" "summary"
assert_contains "$OUT" "events__2026_03_p1  [2026-03-15T00:00:00Z, 2026-04-01T00:00:00Z)" "March gap"
assert_eq "FOR VALUES FROM ('$(f 2026-03-15)') TO ('$(f 2026-04-01)')" \
    "$(q "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = 'events__2026_03_p1'")" "gap bounds"
assert_eq "" "$(q "SELECT relname FROM pg_class WHERE relname IN ('events__2026_03', 'events__2027_01', 'events__2027_02')")" \
    "no partition for covered windows"
assert_eq 7 "$(q "SELECT count(*) FROM pg_class WHERE relname ~ '^events__2026_(04|07|08|09|10|11|12)$'")" "whole windows"

# complete coverage, no gaps, from the catch-all to 2028
run_expect 0 "$V7FILL" partitions events --list --json
json=$OUT
assert_eq 0 "$(jsql "$json" "json_array_length(j->'gaps')")" "no gaps left"
# every day of the range has a partition: insert one row per day
q "INSERT INTO events (id, v) SELECT ('$(f 2026-02-01)'::text)::uuid, 0" >/dev/null
for d in 2026-02-10 2026-03-14 2026-03-15 2026-03-31 2026-04-15 2026-07-31 2026-12-31T23:59:59Z 2027-02-28; do
    q "INSERT INTO events (id, v) VALUES ('$("$V7FILL" uuid new --at "$d")', 1)" >/dev/null
done
assert_eq 9 "$(q "SELECT count(*) FROM events")" "rows everywhere"

# idempotent
run_expect 0 "$V7FILL" partitions events --from 2026-02-01 --to 2027-03-01
assert_contains "$OUT" "created=0 skipped=13 gaps_filled=0 issues=0" "re-run"

# a yearly granularity over monthly partitions: only the year's gaps, as pieces
sqlf <<SQL
CREATE TABLE y (id uuid) PARTITION BY RANGE (id);
CREATE TABLE y__2026_03 PARTITION OF y FOR VALUES FROM ('$(f 2026-03-01)') TO ('$(f 2026-04-01)');
CREATE TABLE y__2026_09 PARTITION OF y FOR VALUES FROM ('$(f 2026-09-01)') TO ('$(f 2026-10-01)');
SQL
run_expect 0 "$V7FILL" partitions y --from 2026-01-01 --to 2027-01-01 --granularity year
assert_contains "$OUT" "created=0 skipped=0 gaps_filled=1 issues=0" "yearly gaps"
assert_eq "y__2026_p1|FOR VALUES FROM ('$(f 2026-01-01)') TO ('$(f 2026-03-01)')
y__2026_p2|FOR VALUES FROM ('$(f 2026-04-01)') TO ('$(f 2026-09-01)')
y__2026_p3|FOR VALUES FROM ('$(f 2026-10-01)') TO ('$(f 2027-01-01)')" \
    "$(q "SELECT relname || '|' || pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname LIKE 'y\_\_2026\_p%' ORDER BY 1")" "pieces"

# pg_partman 5.2+ bare bounds: detected and kept
sqlf <<SQL
CREATE TABLE pm (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE pm_p20260601 PARTITION OF pm FOR VALUES FROM ('$(fb 2026-06-01)') TO ('$(fb 2026-07-01)');
CREATE TABLE pm_default PARTITION OF pm DEFAULT;
SQL
run_expect 0 "$V7FILL" partitions pm --list
assert_contains "$OUT" "bare (pg_partman) convention" "bare detected"
run_expect 0 "$V7FILL" partitions pm --from 2026-05-01 --to 2026-09-01
assert_contains "$OUT" "created=3 skipped=1" "bare windows"
assert_eq "FOR VALUES FROM ('$(fb 2026-05-01)') TO ('$(fb 2026-06-01)')
FOR VALUES FROM ('$(fb 2026-07-01)') TO ('$(fb 2026-08-01)')
FOR VALUES FROM ('$(fb 2026-08-01)') TO ('$(fb 2026-09-01)')" \
    "$(q "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname LIKE 'pm\_\_%' AND relkind = 'r' ORDER BY relname")" "bare bounds kept"
id=$("$V7FILL" uuid new --at 2026-07-01T00:00:00Z)
q "INSERT INTO pm VALUES ('$id')" >/dev/null
assert_eq pm__2026_07 "$(q "SELECT tableoid::regclass FROM pm")" "v7 id in a bare window"

# an empty table gets the minimum-v7 convention
sqlf <<'SQL'
CREATE TABLE fresh (id uuid) PARTITION BY RANGE (id);
SQL
run_expect 0 "$V7FILL" partitions fresh --from 2026-07-01 --to 2026-07-02
assert_eq "FOR VALUES FROM ('019f1af9-b400-7000-8000-000000000000') TO ('019fba9e-d800-7000-8000-000000000000')" \
    "$(q "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = 'fresh__2026_07'")" "min-v7 on empty table"

# a non-partition relation holding a wanted name: clear error, nothing created at all
sqlf <<'SQL'
CREATE TABLE clash (id uuid) PARTITION BY RANGE (id);
CREATE TABLE clash__2026_09 (x int);
SQL
run_expect 3 "$V7FILL" partitions clash --from 2026-07-01 --to 2026-10-01
assert_contains "$OUT" "a table named public.clash__2026_09 already exists and is not a partition of public.clash" "name clash"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'clash'::regclass")" "nothing created on clash"
# the refusal is counted in the summary and is a JSON document with --json
assert_contains "$OUT" "created=0 skipped=0 gaps_filled=0 issues=1" "clash counted in issues="
json_refusal() {  # json_refusal WHAT CMD...: exit 3, stdout one JSON document naming the issue
    local what=$1 rc; shift
    set +e; J=$("$@" --json 2>/dev/null); rc=$?; set -e
    assert_eq 3 "$rc" "$what: exit status with --json"
    assert_eq 1 "$(jsql "$J" "j->>'issues'")" "$what: --json issues"
}
json_refusal "clash" "$V7FILL" partitions clash --from 2026-07-01 --to 2026-10-01
assert_contains "$(jsql "$J" "j->'issue'->>'message'")" "already exists and is not a partition" "clash in --json"

# a name longer than 63 bytes: error before anything is created
long=t_$(printf 'x%.0s' $(seq 1 53))  # 55 bytes: yearly names fit, monthly ones do not
sqlf <<SQL
CREATE TABLE $long (id uuid) PARTITION BY RANGE (id);
SQL
run_expect 0 "$V7FILL" partitions "$long" --from 2026-07-01 --to 2026-08-01 --granularity year
run_expect 3 "$V7FILL" partitions "$long" --from 2028-01-01 --to 2028-03-01 --granularity month
assert_contains "$OUT" "PostgreSQL names hold at most 63" "long name"
assert_contains "$OUT" "issues=1" "long name counted in issues="
json_refusal "long name" "$V7FILL" partitions "$long" --from 2028-01-01 --to 2028-03-01 --granularity month
assert_contains "$(jsql "$J" "j->'issue'->>'message'")" "PostgreSQL names hold at most 63" "long name in --json"
assert_eq 1 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = '$long'::regclass")" "nothing created for too-long names"
run_expect 0 "$V7FILL" partitions "$long" --from 2028-01-01 --to 2028-03-01 --granularity month --name-pattern 'p_%Y_%m'
assert_contains "$OUT" "p_2028_01" "--name-pattern"
echo "ok"
