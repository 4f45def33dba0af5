#!/usr/bin/env bash
# Hostile and unusual names: spaces, mixed case, double quotes, semicolons, a would-be
# injection, unicode, schemas through search_path.  They work or fail cleanly; nothing
# is ever injected.
source "$(dirname "$0")/lib.sh"

sqlf <<'SQL'
CREATE TABLE victim (x int);
CREATE SCHEMA "Sales; Dept";
CREATE TABLE "Events 2026" (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE "ev""il" (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE "Sales; Dept"."x""; DROP TABLE victim; --" (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE "Zeitreihe_Ä€" (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
CREATE SCHEMA hidden;
CREATE TABLE hidden.evs (id uuid) PARTITION BY RANGE (id);
SQL

run_expect 0 "$V7FILL" partitions '"Events 2026"' --from 2026-07-01 --to 2026-09-01
assert_contains "$OUT" "created=2" "spaces and case"
assert_eq 2 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = '\"Events 2026\"'::regclass")" "spaces and case"
assert_eq "Events 2026__2026_07" "$(q "SELECT relname FROM pg_class WHERE relname LIKE 'Events 2026\_\_2026\_07'")" "name"

run_expect 0 "$V7FILL" partitions '"ev""il"' --from 2026-07-01 --to 2026-08-01
assert_eq 'ev"il__2026_07' "$(q "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                                  WHERE i.inhparent = '\"ev\"\"il\"'::regclass")" "double quote"

run_expect 0 "$V7FILL" partitions '"Sales; Dept"."x""; DROP TABLE victim; --"' --from 2026-07-01 --to 2026-08-01
assert_contains "$OUT" "created=1" "semicolon"
assert_eq 1 "$(q "SELECT count(*) FROM pg_tables WHERE tablename = 'victim'")" "victim survives"
assert_eq 'x"; DROP TABLE victim; --__2026_07' "$(q "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
       WHERE i.inhparent = '\"Sales; Dept\".\"x\"\"; DROP TABLE victim; --\"'::regclass")" "injection stays a name"
run_expect 0 "$V7FILL" partitions '"Sales; Dept"."x""; DROP TABLE victim; --"' --list --json
assert_contains "$OUT" '"name": "x\"; DROP TABLE victim; --__2026_07"' "JSON escapes by jansson"

run_expect 0 "$V7FILL" partitions '"Zeitreihe_Ä€"' --from 2026-07-01 --to 2026-08-01
assert_contains "$OUT" "Zeitreihe_Ä€__2026_07" "unicode"
# a dry run prints DDL that runs as printed, hostile names included
run_expect 0 "$V7FILL" partitions '"Sales; Dept"."x""; DROP TABLE victim; --"' --from 2026-08-01 --to 2026-09-01 --dry-run
printf '%s\n' "$OUT" | psql -X -q -v ON_ERROR_STOP=1 >/dev/null
assert_eq 2 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = '\"Sales; Dept\".\"x\"\"; DROP TABLE victim; --\"'::regclass")" "dry-run DDL with hostile names"
assert_eq 1 "$(q "SELECT count(*) FROM pg_tables WHERE tablename = 'victim'")" "victim survives the DDL"

# names are read as in SQL: unquoted folds to lower case, search_path applies
run_expect 3 "$V7FILL" partitions 'Events 2026' --list
assert_contains "$OUT" "invalid table name" "unquoted space"
run_expect 3 "$V7FILL" partitions 'EVENTS_2026' --list
assert_contains "$OUT" 'table "EVENTS_2026" does not exist' "folded"
assert_contains "$OUT" "SQLSTATE: 42P01" "sqlstate"
run_expect 3 "$V7FILL" partitions evs --list
# (PGOPTIONS would not do: pg_connect sets its own options)
q "ALTER DATABASE \"$PGDATABASE\" SET search_path = hidden, public" >/dev/null
run_expect 0 "$V7FILL" partitions evs --from 2026-07-01 --to 2026-08-01
assert_eq 1 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'hidden.evs'::regclass")" "search_path"
run_expect 3 "$V7FILL" partitions 'nosuchschema.evs' --list
run_expect 3 "$V7FILL" partitions "evs'; DROP TABLE victim; --" --list
assert_eq 1 "$(q "SELECT count(*) FROM pg_tables WHERE tablename = 'victim'")" "victim survives a hostile argument"
echo "ok"
