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
printf 'created_at,account_id,kind,note\n2026-01-07,3,nulltest,-q\n' >null.csv
run_expect 0 "$V7FILL" import events null.csv --null -q --rejects r2.csv
assert_contains "$OUT" "INFO:" "--null -q: -q was the value, not --quiet"
assert_eq "t" "$(q "SELECT note IS NULL FROM events WHERE kind = 'nulltest'")" "--null -q: the field -q stored as NULL"
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

# Bash completion (contrib/v7fill.bash-completion), as `make install` puts
# it: sourced in a plain bash, the function called as bash calls it.
inst=$T_TMP/inst
env -u MAKEFLAGS -u MAKELEVEL make -s -C "$V7FILL_ROOT" install-completion DESTDIR="$inst" PREFIX=/usr/local
comp=$inst/usr/local/share/bash-completion/completions/v7fill
[ -f "$comp" ] || fail "make install-completion did not install $comp"
assert_contains "$(env -u MAKEFLAGS -u MAKELEVEL make -s -n -C "$V7FILL_ROOT" install DESTDIR=/x PREFIX=/usr/local)" \
    "/x/usr/local/share/bash-completion/completions/v7fill" "make install installs the completion"
# complete WORD... (the last is the one being completed): the candidates, one a line
complete_words() {
    bash -c 'source "$1"; shift
             [ "$(complete -p v7fill)" = "complete -F _v7fill v7fill" ] || exit 9
             COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _v7fill
             ((${#COMPREPLY[@]} == 0)) || printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" "$@" | sort | tr '\n' ' '
}
assert_eq "import " "$(complete_words v7fill im)" "command"
assert_eq "import " "$(complete_words v7fill -d x -v im)" "command after global options"
assert_eq "floor new time " "$(complete_words v7fill uuid '')" "uuid subcommands"
assert_eq "--time-column --time-format " "$(complete_words v7fill import -v --time-)" "import options after -v"
assert_eq "--quiet --quiet-period " "$(complete_words v7fill maintain --qu)" "maintain's own and the global option"
assert_eq "--quiet --quiet-period " "$(complete_words v7fill partitions events --maintain --qu)" "partitions --maintain takes maintain's options"
assert_eq "month " "$(complete_words v7fill partitions events --granularity mo)" "--granularity values"
assert_eq "epoch-ms epoch-s epoch-us " "$(complete_words v7fill import --time-format = epo)" "--time-format=VALUE"
assert_eq "clear set show " "$(complete_words v7fill retention events '')" "retention actions"
assert_eq "migrate " "$(complete_words v7fill mig)" "migrate is a command"
assert_eq "expand migrate " "$(complete_words v7fill migrate --child-mode '')" "--child-mode values"
assert_eq "--switch --switch-attempts " "$(complete_words v7fill migrate --into t --swi)" "migrate --switch-attempts"
assert_eq "--window-tz " "$(complete_words v7fill stream t --win)" "stream --window-tz"
assert_eq "--window-tz " "$(complete_words v7fill migrate --win)" "migrate --window-tz"
printf 'x\n' >events-2026.csv
assert_eq "events-2026.csv " "$(complete_words v7fill import events events-)" "import: files after TABLE"
# TABLE from the database through the hidden `v7fill __complete-tables` (no
# psql): RANGE-partitioned targets only, quoted as TABLE is typed; -d given
# on the line is used
sqlf <<'SQL'
CREATE TABLE evs_two (id uuid NOT NULL, created_at timestamptz NOT NULL) PARTITION BY RANGE (id);
CREATE TABLE evs_list (id uuid NOT NULL) PARTITION BY LIST (id);
CREATE TABLE evs_plain (id uuid NOT NULL);
CREATE SCHEMA s2;
CREATE TABLE s2."Mixed Case" (id uuid NOT NULL) PARTITION BY RANGE (id);
SQL
assert_eq "events evs_two " "$(complete_words "$V7FILL" report ev)" "report: partitioned tables by prefix"
assert_eq 's2.\"Mixed\ Case\" ' "$(complete_words "$V7FILL" import s2)" "quoted name, escaped for the shell"
assert_eq "events evs_two " "$(PGDATABASE=no_such_db complete_words "$V7FILL" -d "dbname=$db" maintain e)" "-d on the line picks the database"
assert_eq "" "$(PGDATABASE=no_such_db complete_words "$V7FILL" maintain e)" "control: no such database, no names and no error text"
run_expect 0 "$V7FILL" --help
assert_not_contains "$OUT" "__complete" "the helper command is hidden from --help"
# every long option a command's getopt table has is offered, and only those
for src in import:cmd_import maintain:cmd_maintain partitions:cmd_partitions report:cmd_report migrate:cmd_migrate stream:cmd_stream; do
    want=$( (grep -oE '\{"[a-z-]+", (no|required)_argument' "$V7FILL_ROOT/src/cli/${src#*:}.c" \
        | sed -E 's/\{"([a-z-]+)".*/--\1/'; printf '%s\n' --dbname --verbose --quiet --version) | grep -vx -- --help | sort -u | tr '\n' ' ')
    [ "${src%%:*}" = partitions ] && want=$(printf '%s\n' $want --maintain | sort -u | tr '\n' ' ')
    got=$(complete_words v7fill "${src%%:*}" -- | tr ' ' '\n' | grep -vx -- --help | grep . | sort -u | tr '\n' ' ')
    assert_eq "$want" "$got" "options of ${src%%:*} = its getopt table"
done

# stream: bad flags are usage errors (exit 2) that name the flag, before anything is created
run_expect 2 "$V7FILL" stream t --source "dbname=x" --from public.o --publication p
assert_contains "$OUT" "--slot" "a missing --slot is named"
run_expect 2 "$V7FILL" stream t --source "dbname=x" --from public.o --publication p --slot s --on-truncate maybe
assert_contains "$OUT" "--on-truncate" "a bad --on-truncate is named"
run_expect 2 "$V7FILL" stream t --source "dbname=x" --from public.o --publication p --slot s --group-ms 0
assert_contains "$OUT" "--group-ms" "a bad --group-ms is named"
run_expect 2 "$V7FILL" stream t --source "dbname=x" --from public.o --publication p --slot s --jobs 0
assert_contains "$OUT" "--jobs" "stream --jobs 0 is named"
run_expect 2 "$V7FILL" migrate --from public.o --key id --time-column t --into t --jobs 0
assert_contains "$OUT" "--jobs" "migrate --jobs 0 is named"
# the options the pipeline shares take the same values in every command
for cmd in "import t f.csv" "stream t --source dbname=x --from public.o --publication p --slot s" \
           "migrate --from public.o --key id --time-column t --into t"; do
    run_expect 2 "$V7FILL" $cmd --batch-rows 2000000
    assert_contains "$OUT" "invalid value \"2000000\" for --batch-rows: expected an integer from 1 to 1000000" \
        "${cmd%% *} --batch-rows takes what the other commands take"
done
run_expect 2 "$V7FILL" migrate --into t --switch --lock-timeout 5
assert_contains "$OUT" "--lock-timeout" "migrate --lock-timeout below 10 ms is named"
run_expect 2 "$V7FILL" migrate --into t --switch --switch-attempts 0
assert_contains "$OUT" "--switch-attempts" "migrate --switch-attempts 0 is named"
run_expect 2 "$V7FILL" stream t --source "dbname=$PGDATABASE" --from public.o --publication p --slot s --window-tz ''
assert_contains "$OUT" "--window-tz is empty" "stream --window-tz '' is refused"
run_expect 2 "$V7FILL" migrate --from public.o --key id --time-column t --into o_v7 --window-tz localtime
assert_contains "$OUT" "--window-tz localtime is the zone of the machine" "migrate --window-tz localtime is refused"
run_expect 2 "$V7FILL" stream t --source "dbname=$PGDATABASE" --from . --publication p --slot s
assert_contains "$OUT" "SCHEMA.TABLE" "a malformed --from says what it takes"

# Every long option a command's --help lists is in the man page (its roff form, \-\-name).
missing=
for cmd in "" import plan partitions retention maintain report uuid stream migrate; do
    # shellcheck disable=SC2086
    for opt in $("$V7FILL" $cmd --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
        grep -qF -- "$(printf '%s' "$opt" | sed 's/-/\\-/g')" "$V7FILL_ROOT/docs/v7fill.1" || missing="$missing ${cmd:-global}:$opt"
    done
done
assert_eq "" "$missing" "options of --help missing from docs/v7fill.1"
