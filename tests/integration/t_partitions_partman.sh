#!/usr/bin/env bash
# Tables pg_partman manages (a row in its part_config): v7fill creates none of their
# partitions (partitions --from/--ahead, --dry-run, import, plan: exit 3 naming pg_partman
# and what to run), because a partition under v7fill's name stops pg_partman's
# run_maintenance() for every table it manages.  --list, report and windows that exist
# already still work.  Needs pg_partman (postgresql-15-partman); skipped, said so, without it.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"

if ! q "CREATE SCHEMA partman; CREATE EXTENSION pg_partman SCHEMA partman" >/dev/null 2>&1; then
    echo "skipped: pg_partman is not installed (apt-get install postgresql-15-partman)"
    exit 0
fi
m0=$(date -u +%Y-%m-01)
sqlf <<SQL
CREATE TABLE pt (id bigserial, ts timestamptz NOT NULL DEFAULT now()) PARTITION BY RANGE (ts);
SELECT partman.create_parent('public.pt', 'ts', 'native', 'monthly', p_premake := 2);
UPDATE partman.part_config SET premake = 4, infinite_time_partitions = true WHERE parent_table = 'public.pt';
SQL
before=$(q "SELECT string_agg(relname, ' ' ORDER BY relname) FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid WHERE i.inhparent = 'pt'::regclass")

# creating windows: refused, nothing created, pg_partman's maintenance still runs
run_expect 3 "$V7FILL" partitions pt --ahead 3
assert_contains "$OUT" "pg_partman manages public.pt: v7fill does not create its partitions" "--ahead refused"
assert_contains "$OUT" "partman.run_maintenance('public.pt')" "hint: run_maintenance"
assert_contains "$OUT" "partman.create_partition_time('public.pt'" "hint: create_partition_time"
assert_contains "$OUT" "issues=1" "counted as an issue"
run_expect 3 "$V7FILL" partitions pt --from "$(date -u -d "$m0 +6 months" +%Y-%m-%d)" --to "$(date -u -d "$m0 +7 months" +%Y-%m-%d)" --dry-run
assert_contains "$OUT" "pg_partman manages public.pt" "--dry-run refused"
assert_eq "$before" "$(q "SELECT string_agg(relname, ' ' ORDER BY relname) FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid WHERE i.inhparent = 'pt'::regclass")" "no partition created"
q "SELECT partman.run_maintenance()" >/dev/null || fail "partman.run_maintenance() fails after v7fill partitions"
assert_eq 1 "$(q "SELECT count(*) FROM pg_class WHERE relname = 'pt_p$(date -u -d "$m0 +4 months" +%Y_%m)'")" "pg_partman created its premake window"

# reading works; a range pg_partman covers already is fine
run_expect 0 "$V7FILL" partitions pt --list
assert_contains "$OUT" "pt_p$(date -u +%Y_%m)" "--list"
run_expect 0 "$V7FILL" partitions pt --from "$m0" --to "$(date -u -d "$m0 +1 month" +%Y-%m-%d)"
assert_contains "$OUT" "created=0 skipped=1" "covered window: nothing to create, no refusal"
run_expect 0 "$V7FILL" report pt

# import and plan on a uuid-keyed table in part_config: refused when a window is missing
sqlf <<'SQL'
CREATE TABLE pu (id uuid PRIMARY KEY, created_at timestamptz, v text) PARTITION BY RANGE (id);
INSERT INTO partman.part_config (parent_table, control, partition_interval, partition_type, datetime_string)
VALUES ('public.pu', 'id', '1 month', 'native', 'YYYY_MM');
SQL
printf 'created_at,v\n%sT12:00:00Z,a\n' "$(date -u -d "$m0 -1 month +4 days" +%Y-%m-%d)" >pu.csv
run_expect 3 "$V7FILL" plan pu pu.csv
assert_contains "$OUT" "pg_partman manages public.pu" "plan refused"
run_expect 3 "$V7FILL" import pu pu.csv --no-progress
assert_contains "$OUT" "pg_partman manages public.pu" "import refused"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'pu'::regclass")" "import created no partition"
echo "ok"
