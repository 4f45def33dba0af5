# Command-line habits: the global options (-d, -v, -q, --version) follow the
# command too, as pg_dump/psql users type them, without taking a command
# option's value for one and without breaking the commands' own options.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf -f "$V7FILL_ROOT/examples/schema.sql"
db=$PGDATABASE

# -d after the command (and after its operand) names the database; the
# environment points elsewhere
run_expect 0 env PGDATABASE=no_such_db "$V7FILL" partitions -d "dbname=$db" events --from 2026-01-01 --to 2026-03-01
assert_contains "$OUT" "events__2026_02" "partitions -d after the command created the windows"
assert_eq 2 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass")" "two windows in the -d database"
run_expect 0 env PGDATABASE=no_such_db "$V7FILL" report events --dbname="dbname=$db"
assert_contains "$OUT" "public.events" "report TABLE --dbname=..."
run_expect 0 env PGDATABASE=no_such_db "$V7FILL" retention events show -d "dbname=$db"
assert_contains "$OUT" "retention of public.events: none" "retention TABLE show -d ..."
run_expect 5 env PGDATABASE=no_such_db "$V7FILL" report events
assert_contains "$OUT" "no_such_db" "control: without -d the environment's database is used"

printf 'created_at,account_id,kind,note\n2026-01-05,1,a,-q\n2026-01-06,2,b,x\n' >in.csv
# -q after the command: no INFO lines (the control run below has them)
run_expect 0 "$V7FILL" import events in.csv -q --rejects r1.csv
assert_not_contains "$OUT" "INFO:" "import -q logs no INFO lines"
assert_contains "$OUT" "inserted       2" "import -q still prints its report"
# a command option's value is never taken for a global option: --null -q
# makes "-q" the NULL string, and the run is not quiet
run_expect 0 "$V7FILL" import events in.csv --null -q --rejects r2.csv
assert_contains "$OUT" "INFO:" "--null -q: -q was the value, not --quiet"
assert_eq "t" "$(q "SELECT note IS NULL FROM events WHERE kind = 'a' ORDER BY id DESC LIMIT 1")" "--null -q: the field -q stored as NULL"
# -v -v after the command: debug (every SQL statement)
run_expect 0 "$V7FILL" plan events in.csv -v -v --rejects r3.csv
assert_contains "$OUT" "DEBUG:" "plan -v -v logs SQL at debug level"
# before the command as ever; -q wins over -v wherever each is
run_expect 0 "$V7FILL" -v import events in.csv -q --rejects r4.csv
assert_not_contains "$OUT" "INFO:" "-v before, -q after: quiet"

# the commands' own short options still work beside them
run_expect 0 "$V7FILL" partitions events -l -q
assert_contains "$OUT" "events__2026_01" "partitions -l -q lists"
run_expect 0 "$V7FILL" maintain events -n -g month --retention 3650d --quiet-period 5m -v
assert_contains "$OUT" "(dry run: nothing was changed)" "maintain -n -g with --quiet-period and -v"
run_expect 0 "$V7FILL" uuid new -q -n 3
assert_eq 3 "$(printf '%s\n' "$OUT" | wc -l)" "uuid new -q -n 3: three ids"
run_expect 0 "$V7FILL" import --version
assert_contains "$OUT" "v7fill " "--version after the command"
