#!/usr/bin/env bash
# Tables pg_partman manages (a row in its part_config), against the real extension
# (pg_partman 4.7.2, postgresql-15-partman): v7fill creates their partitions as pg_partman
# would (its windows, its zone's midnight, its <parent>_p<datetime_string> names, its
# template table's indexes), so that history pg_partman never made can be filled and
# partman.run_maintenance() keeps working.  A configuration v7fill cannot follow (a uuid
# key) is refused when a window is missing; report reads part_config's retention; maintain
# leaves retirement to pg_partman.  Skipped, said so, without pg_partman.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"

if ! q "CREATE SCHEMA partman; CREATE EXTENSION pg_partman SCHEMA partman" >/dev/null 2>&1; then
    echo "skipped: pg_partman is not installed (contrib/install-deps.sh, postgresql-15-partman)"
    exit 0
fi
children() { q "SELECT string_agg(c.relname, ' ' ORDER BY c.relname) FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid WHERE i.inhparent = '$1'::regclass"; }
bound() { q "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = '$1'"; }
m0=$(date -u +%Y-%m-01)
mon() { date -u -d "$m0 $1 months" +%Y-%m-%d; }
name() { echo "pt_p$(date -u -d "$m0 $1 months" +%Y_%m)"; }
sqlf <<SQL
CREATE TABLE pt (id bigserial, ts timestamptz NOT NULL DEFAULT now(), v text) PARTITION BY RANGE (ts);
SELECT partman.create_parent('public.pt', 'ts', 'native', 'monthly', p_premake := 2);
UPDATE partman.part_config SET premake = 4, infinite_time_partitions = true WHERE parent_table = 'public.pt';
CREATE UNIQUE INDEX pt_template_id ON partman.template_public_pt (id);
SQL
before=$(children pt)

# --dry-run: pg_partman's names, nothing created
run_expect 0 "$V7FILL" partitions pt --from "$(mon -6)" --to "$(mon -3)" --dry-run
assert_contains "$OUT" "$(name -6)" "--dry-run plans pg_partman's name"
assert_contains "$OUT" "inherit_template_properties" "--dry-run applies pg_partman's template"
assert_eq "$before" "$(children pt)" "--dry-run created nothing"

# history pg_partman never made: its windows, names and template
run_expect 0 "$V7FILL" partitions pt --from "$(mon -6)" --to "$(mon -3)"
assert_contains "$OUT" "created=3 skipped=0" "three history windows created"
for k in -6 -5 -4; do
    assert_eq "FOR VALUES FROM ('$(mon $k) 00:00:00+00') TO ('$(mon $((k + 1))) 00:00:00+00')" \
        "$(bound "$(name $k)")" "$(name $k): pg_partman's name and monthly bounds"
done
assert_eq 1 "$(q "SELECT count(*) FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid WHERE c.relname = '$(name -5)' AND x.indisunique")" "template's unique index on the new partition"
assert_eq 0 "$(q "SELECT count(*) FROM pg_class WHERE relname LIKE 'pt\\_\\_%'")" "no partition under v7fill's own names"

# pg_partman's maintenance still runs and makes its next windows, next to v7fill's
q "SELECT partman.run_maintenance()" >/dev/null || fail "partman.run_maintenance() fails after v7fill partitions"
assert_eq 1 "$(q "SELECT count(*) FROM pg_class WHERE relname = '$(name 4)'")" "pg_partman created its premake window"
q "SELECT partman.run_maintenance('public.pt')" >/dev/null || fail "partman.run_maintenance('public.pt') fails"
assert_eq "" "$(q "SELECT string_agg(p.partition_tablename, ' ') FROM partman.show_partitions('public.pt') p WHERE p.partition_tablename NOT LIKE 'pt\\_p____\\___'")" "every partition in pg_partman's pattern"
run_expect 0 "$V7FILL" partitions pt --list
assert_contains "$OUT" "$(name -5)" "--list"
assert_contains "$OUT" "$(name 4)" "--list shows pg_partman's window"
run_expect 0 "$V7FILL" partitions pt --from "$m0" --to "$(mon +1)"
assert_contains "$OUT" "created=0 skipped=1" "covered window: nothing to create"

run_expect 2 "$V7FILL" partitions pt --from "$(mon -12)" --to "$(mon -11)" --name-pattern '%t_%Y%m'
assert_contains "$OUT" "not by --name-pattern" "--name-pattern refused"

# report reads part_config's retention; maintain leaves retirement to pg_partman
q "UPDATE partman.part_config SET retention = '3 months' WHERE parent_table = 'public.pt'" >/dev/null
run_expect 0 "$V7FILL" report pt
assert_contains "$OUT" "manages this table (partman.part_config), retention 3 months" "report: pg_partman's retention"
run_expect 3 "$V7FILL" maintain pt
assert_contains "$OUT" "pg_partman manages public.pt" "maintain refused"

# import and plan on a uuid-keyed table in part_config: not followed, refused when a window is missing
sqlf <<'SQL'
CREATE TABLE pu (id uuid PRIMARY KEY, created_at timestamptz, v text) PARTITION BY RANGE (id);
INSERT INTO partman.part_config (parent_table, control, partition_interval, partition_type, datetime_string)
VALUES ('public.pu', 'id', '1 month', 'native', 'YYYY_MM');
SQL
printf 'created_at,v\n%sT12:00:00Z,a\n' "$(date -u -d "$m0 -1 month +4 days" +%Y-%m-%d)" >pu.csv
run_expect 3 "$V7FILL" plan pu pu.csv
assert_contains "$OUT" "pg_partman manages public.pu in a way v7fill cannot follow" "plan refused"
run_expect 3 "$V7FILL" import pu pu.csv --no-progress
assert_contains "$OUT" "pg_partman manages public.pu in a way v7fill cannot follow" "import refused"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'pu'::regclass")" "import created no partition"

# a database whose TimeZone is not UTC: pg_partman's weeks start at its midnight
q "ALTER DATABASE \"$PGDATABASE\" SET TimeZone = 'Europe/Berlin'" >/dev/null
sqlf <<'SQL'
CREATE TABLE pw (ts timestamptz NOT NULL) PARTITION BY RANGE (ts);
SELECT partman.create_parent('public.pw', 'ts', 'native', 'weekly', p_premake := 2);
UPDATE partman.part_config SET premake = 3, infinite_time_partitions = true WHERE parent_table = 'public.pw';
SQL
run_expect 0 "$V7FILL" partitions pw --from 2025-01-06 --to 2025-01-20
assert_contains "$OUT" "created=2 skipped=0" "two weeks created"
assert_eq "FOR VALUES FROM ('2025-01-06 00:00:00+01') TO ('2025-01-13 00:00:00+01')" "$(bound pw_p2025w02)" "pw_p2025w02: Monday midnight in Berlin"
assert_eq 1 "$(q "SELECT count(*) FROM pg_class WHERE relname = 'pw_p2025w03'")" "ISO week name"
run_expect 3 "$V7FILL" partitions pw --from 2025-02-03 --to 2025-02-10 --window-tz UTC
assert_contains "$OUT" "not at the start of a week in UTC" "UTC windows next to Berlin's refused"
run_expect 0 "$V7FILL" partitions pw --list
assert_contains "$OUT" "granularity  week, windows in Europe/Berlin" "--list: pg_partman's windows"
run_expect 0 "$V7FILL" partitions pw --ahead 6
assert_contains "$OUT" "created      pw_p$(TZ=Europe/Berlin date -d '+6 weeks' +%Gw%V)" "--ahead: pg_partman's weeks"
q "SELECT partman.run_maintenance()" >/dev/null || fail "partman.run_maintenance() fails after v7fill's weeks"

# daily on a timestamp key (no zone), quarterly: pg_partman's names and windows
sqlf <<'SQL'
CREATE TABLE pd (ts timestamp NOT NULL) PARTITION BY RANGE (ts);
SELECT partman.create_parent('public.pd', 'ts', 'native', 'daily');
CREATE TABLE pq (ts timestamptz NOT NULL) PARTITION BY RANGE (ts);
SELECT partman.create_parent('public.pq', 'ts', 'native', 'quarterly');
SQL
run_expect 0 "$V7FILL" partitions pd --from 2025-01-01 --to 2025-01-03
assert_eq "FOR VALUES FROM ('2025-01-02 00:00:00') TO ('2025-01-03 00:00:00')" "$(bound pd_p2025_01_02)" "daily name and bounds"
run_expect 0 "$V7FILL" partitions pq --from 2025-01-01 --to 2025-07-01
assert_eq "FOR VALUES FROM ('2025-04-01 00:00:00+02') TO ('2025-07-01 00:00:00+02')" "$(bound pq_p2025q2)" "quarterly name and bounds"
q "SELECT partman.run_maintenance()" >/dev/null || fail "partman.run_maintenance() fails after v7fill's days and quarters"

# what v7fill cannot follow (hourly windows) is refused, saying why, when a window is missing
sqlf <<'SQL'
CREATE TABLE ph (ts timestamptz NOT NULL) PARTITION BY RANGE (ts);
SELECT partman.create_parent('public.ph', 'ts', 'native', 'hourly');
SQL
before=$(children ph)
run_expect 3 "$V7FILL" partitions ph --from 2025-01-01 --to 2025-01-02
assert_contains "$OUT" "pg_partman manages public.ph in a way v7fill cannot follow: pg_partman's partition_interval \"01:00:00\"" "hourly refused"
assert_contains "$OUT" "run_maintenance('public.ph')" "hint: run_maintenance"
assert_eq "$before" "$(children ph)" "nothing created"
echo "ok"
