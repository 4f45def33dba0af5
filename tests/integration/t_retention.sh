# Retention from each of its sources, in order: --retention, stored by v7fill
# (`v7fill retention TABLE set|show|clear`), pg_partman's part_config.retention
# (timestamptz-keyed target: Debian's pg_partman 4.7 predates UUID keys), none.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf -f "$V7FILL_ROOT/examples/schema.sql"
run_expect 0 "$V7FILL" partitions events --from 2026-01-01 --to 2026-04-01

# jfield JSON PYTHON-EXPR: evaluate an expression over the parsed document `d`.
jfield() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }

# none
run_expect 0 "$V7FILL" retention events show
assert_contains "$OUT" "retention of public.events: none" "no retention at first"
assert_contains "$OUT" "never retired" "show explains no retention"
run_expect 0 "$V7FILL" report events --json
assert_eq "none" "$(jfield "$OUT" 'd["retention"]["source"]')" "report: no retention"
assert_contains "$(jfield "$OUT" 'd["verdict"]["text"]')" "no retention" "verdict says there is none"
assert_eq "" "$(q "SELECT to_regclass('v7fill.retention')")" "show/report created nothing"

# stored by v7fill
run_expect 0 "$V7FILL" retention events set 90d
assert_contains "$OUT" "retention of public.events set to 90d (90d 0h 00m)" "set"
assert_eq "public|events|7776000000000|90d" \
    "$(q "SELECT target_schema, target_table, retention_us, retention_text FROM v7fill.retention")" "stored row"
run_expect 0 "$V7FILL" retention events show
assert_contains "$OUT" "retention of public.events: 90d (stored by v7fill, v7fill.retention)" "show stored"
run_expect 0 "$V7FILL" report events --json
assert_eq "stored by v7fill" "$(jfield "$OUT" 'd["retention"]["source"]')" "report: stored"
assert_eq 7776000000000 "$(jfield "$OUT" 'd["retention"]["us"]')" "report: stored value"
# setting again replaces
run_expect 0 "$V7FILL" retention public.events set '1 year'
assert_eq "31536000000000|1 year" "$(q "SELECT retention_us, retention_text FROM v7fill.retention")" "replaced"

# --retention wins over the stored one
run_expect 0 "$V7FILL" report events --retention 30d --json
assert_eq "--retention" "$(jfield "$OUT" 'd["retention"]["source"]')" "report: CLI wins"
assert_eq 2592000000000 "$(jfield "$OUT" 'd["retention"]["us"]')" "report: CLI value"

# bad values are usage errors and change nothing
run_expect 2 "$V7FILL" retention events set 0s
assert_contains "$OUT" "longer than zero" "zero refused"
run_expect 2 "$V7FILL" retention events set soon
run_expect 2 "$V7FILL" retention events frobnicate
run_expect 2 "$V7FILL" report events --retention never
assert_eq "1 year" "$(q "SELECT retention_text FROM v7fill.retention")" "unchanged by bad input"
run_expect 3 "$V7FILL" retention no_such_table show

# clear
run_expect 0 "$V7FILL" retention events clear
assert_contains "$OUT" "stored retention cleared" "clear"
run_expect 0 "$V7FILL" retention events clear
assert_contains "$OUT" "no retention was stored" "clear twice"
run_expect 0 "$V7FILL" retention events show
assert_contains "$OUT" "retention of public.events: none" "none after clear"

# the stored retention follows the table, not its name: after a rename and a new table
# of the old name, the renamed table keeps it and the new one does not get it (warned)
sqlf <<'SQL'
CREATE TABLE rr (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
SQL
run_expect 0 "$V7FILL" retention rr set 7d
sqlf <<'SQL'
ALTER TABLE rr RENAME TO rr_old;
CREATE TABLE rr (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
SQL
run_expect 0 "$V7FILL" retention rr show
assert_contains "$OUT" "retention of public.rr: none" "a new table of the old name gets no policy"
assert_contains "$OUT" "stored for public.rr when that name belonged to another table (now rr_old)" "warned, naming it"
run_expect 0 "$V7FILL" maintain rr --dry-run
assert_contains "$OUT" "no retention" "maintain of the new table retires nothing"
run_expect 0 "$V7FILL" retention rr_old show
assert_contains "$OUT" "retention of public.rr_old: 7d (stored by v7fill" "the renamed table keeps its policy"
run_expect 0 "$V7FILL" retention rr set 30d
run_expect 0 "$V7FILL" retention rr_old show
assert_contains "$OUT" "retention of public.rr_old: 7d" "setting the new table leaves the renamed one's"
run_expect 0 "$V7FILL" retention rr_old clear
run_expect 0 "$V7FILL" retention rr show
assert_contains "$OUT" "retention of public.rr: 30d" "clearing the renamed one leaves the new one's"
# a row stored by an earlier version (keyed by name, no oid) still applies and gets the oid
sqlf <<'SQL'
CREATE TABLE lg (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
ALTER TABLE v7fill.retention DROP COLUMN target_oid;
ALTER TABLE v7fill.retention ADD PRIMARY KEY (target_schema, target_table);
INSERT INTO v7fill.retention (target_schema, target_table, retention_us, retention_text)
VALUES ('public', 'lg', 86400000000, '1d');
SQL
run_expect 0 "$V7FILL" retention lg show
assert_contains "$OUT" "retention of public.lg: 1d (stored by v7fill" "an earlier version's row applies"
assert_eq "lg" "$(q "SELECT target_oid::regclass FROM v7fill.retention WHERE target_table = 'lg'")" "its oid recorded"
sqlf <<'SQL'
DELETE FROM v7fill.retention;
SQL

# pg_partman: installed on demand where apt can, skipped (said so) where not.
partman_available() {
    [ -f "$(pg_config --sharedir 2>/dev/null || echo /usr/share/postgresql/15)/extension/pg_partman.control" ] && return 0
    ls /usr/share/postgresql/*/extension/pg_partman.control >/dev/null 2>&1 && return 0
    return 1
}
if ! partman_available && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing postgresql-15-partman"
    apt-get install -y -qq postgresql-15-partman >/dev/null 2>&1 || true
fi
if ! partman_available || ! q "CREATE EXTENSION IF NOT EXISTS pg_partman SCHEMA public" >/dev/null 2>&1; then
    echo "skipped: pg_partman is not installed and could not be (apt-get install postgresql-15-partman)"
    exit 0
fi
q "DROP EXTENSION pg_partman" >/dev/null
# In its usual schema, with a timestamptz-keyed, monthly table.
sqlf <<'SQL'
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
CREATE TABLE public.metrics (ts timestamptz NOT NULL, v int) PARTITION BY RANGE (ts);
SELECT partman.create_parent('public.metrics', 'ts', 'native', 'monthly');
SQL
pm_version=$(q "SELECT extversion FROM pg_extension WHERE extname = 'pg_partman'")
echo "pg_partman $pm_version"
run_expect 0 "$V7FILL" retention metrics show
assert_contains "$OUT" "manages this table (partman.part_config), no retention" "managed, no retention yet"
assert_contains "$OUT" "retention of public.metrics: none" "none in force"

q "UPDATE partman.part_config SET retention = '30 days' WHERE parent_table = 'public.metrics'" >/dev/null
run_expect 0 "$V7FILL" retention metrics show
assert_contains "$OUT" "retention of public.metrics: 30 days (pg_partman, partman.part_config (pg_partman $pm_version))" "pg_partman retention"
run_expect 0 "$V7FILL" report metrics --json
assert_eq "pg_partman" "$(jfield "$OUT" 'd["retention"]["source"]')" "report: partman"
assert_eq 2592000000000 "$(jfield "$OUT" 'd["retention"]["us"]')" "30 days converted by the server"
assert_eq "True" "$(jfield "$OUT" 'd["pg_partman"]["manages"]')" "report knows pg_partman manages it"
assert_eq "timestamptz" "$(jfield "$OUT" 'd["table"]["key"]')" "timestamptz key"

# Months are the server's idea of a month (30 days), as pg_partman sees them.
q "UPDATE partman.part_config SET retention = '2 mons' WHERE parent_table = 'public.metrics'" >/dev/null
run_expect 0 "$V7FILL" report metrics --json
assert_eq 5184000000000 "$(jfield "$OUT" 'd["retention"]["us"]')" "2 months = 60 days"

# The stored retention wins over pg_partman's; clearing it brings pg_partman's back.
run_expect 0 "$V7FILL" retention metrics set 10d
assert_contains "$OUT" "pg_partman manages this table with retention 2 mons" "set notes pg_partman"
run_expect 0 "$V7FILL" report metrics --json
assert_eq "stored by v7fill" "$(jfield "$OUT" 'd["retention"]["source"]')" "stored wins over partman"
run_expect 0 "$V7FILL" retention metrics clear
run_expect 0 "$V7FILL" report metrics --json
assert_eq "pg_partman" "$(jfield "$OUT" 'd["retention"]["source"]')" "partman again"

# A retention that is not an interval (id-based sets keep a number) is an error with a way out.
q "UPDATE partman.part_config SET retention = '1000' WHERE parent_table = 'public.metrics'" >/dev/null
run_expect 3 "$V7FILL" report metrics
assert_contains "$OUT" "is not an interval" "non-interval retention"
assert_contains "$OUT" "--retention" "hint names --retention"
run_expect 0 "$V7FILL" report metrics --retention 45d --json
assert_eq "--retention" "$(jfield "$OUT" 'd["retention"]["source"]')" "--retention bypasses pg_partman"
q "UPDATE partman.part_config SET retention = '30 days' WHERE parent_table = 'public.metrics'" >/dev/null

# v7fill leaves a pg_partman-managed table's maintenance to pg_partman.
run_expect 3 "$V7FILL" maintain metrics --retention 30d
assert_contains "$OUT" "pg_partman manages public.metrics" "maintain refuses"
assert_contains "$OUT" "partman.run_maintenance()" "maintain points at pg_partman"

# pg_partman in another schema, in another database: found through pg_extension.
db2="${PGDATABASE}_other"
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$db2\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$db2\"" >/dev/null
PGDATABASE=$db2 sqlf <<'SQL'
CREATE SCHEMA util;
CREATE EXTENSION pg_partman SCHEMA util;
CREATE SCHEMA app;
CREATE TABLE app."Readings" (ts timestamptz NOT NULL, v int) PARTITION BY RANGE (ts);
SELECT util.create_parent('app.Readings', 'ts', 'native', 'daily');
UPDATE util.part_config SET retention = '14 days';
SQL
run_expect 0 env PGDATABASE="$db2" "$V7FILL" retention 'app."Readings"' show
assert_contains "$OUT" "14 days (pg_partman, util.part_config" "another schema, a quoted table name"
psql -q -X -d postgres -c "DROP DATABASE \"$db2\"" >/dev/null
echo "pg_partman interop checked"
