#!/usr/bin/env bash
# Secrets: a password given in the connection string (URI or key=value) or in PGPASSWORD
# never appears in anything v7fill writes: stdout, stderr at every log level (-v -v logs
# every SQL statement), error messages, --report-json / --json reports, the rejects file,
# v7fill.run, v7fill.checkpoint, the lookup table.
#
# The throwaway cluster trusts the socket, so this test makes password authentication
# real for one role: it prepends a scram-sha-256 line for that role to the cluster's
# pg_hba.conf and reloads (restored on exit).  Checked: successful runs (import, plan,
# partitions) with the password in a URI and in key=value form; the same under trust
# auth; failed connections: wrong password, unknown database, unknown role, unreachable
# host; and malformed connection strings that hold the password (libpq quotes the
# offending part of the string in its error message).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

ROLE=v7fill_pw_role
PW='pw@Hunter2%Secret'           # the secret; "Hunter2" is what the checks look for
PW_URI='pw%40Hunter2%25Secret'
HBA="$PGTMP_DIR/data/pg_hba.conf"
cp -p "$HBA" "$T_TMP/pg_hba.conf.orig"
restore() {
    cat "$T_TMP/pg_hba.conf.orig" >"$HBA"
    psql -X -q -d postgres -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
    psql -X -q -c "DROP OWNED BY $ROLE" >/dev/null 2>&1 || true
    psql -X -q -d postgres -c "DROP ROLE IF EXISTS $ROLE" >/dev/null 2>&1 || true
    rm -rf "$T_TMP"
}
trap restore EXIT
psql -X -q -d postgres -c "DROP ROLE IF EXISTS $ROLE" >/dev/null
psql -X -q -d postgres -v pw="$PW" <<SQL >/dev/null
SET password_encryption = 'scram-sha-256';
CREATE ROLE $ROLE LOGIN SUPERUSER PASSWORD :'pw';
SQL
{ echo "local all $ROLE scram-sha-256"; cat "$T_TMP/pg_hba.conf.orig"; } >"$HBA"
psql -X -q -d postgres -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.3

sqlf <<'SQL'
CREATE TABLE s (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, v text) PARTITION BY RANGE (id);
SQL
printf 'created_at,v\n2024-01-01,a\n2024-01-02,b\nnot-a-time,rejected\n2024-02-01,c\n' >s.csv

LEAKS=()
# leak_check WHAT TEXT: the password (or a telling part of it) must not be in TEXT
leak_check() {
    local what=$1 text=$2
    for needle in "$PW" "$PW_URI" "Hunter2" "Hunter" "Secret" "unter2%"; do
        case "$text" in *"$needle"*)
            LEAKS+=("$what: contains \"$needle\": $(printf '%s' "$text" | grep -m1 -F "$needle" | cut -c1-200)")
            return ;;
        esac
    done
}
# run_leak WHAT STATUS CMD...: run, check status and that output holds no secret
run_leak() {
    local what=$1 want=$2; shift 2
    set +e
    OUT=$("$@" 2>&1)
    local got=$?
    set -e
    [ "$got" = "$want" ] || fail "$what: exit status $got, expected $want: $OUT"
    leak_check "$what (output)" "$OUT"
}
db_state() {
    q "SELECT r::text FROM v7fill.run r" 2>/dev/null
    q "SELECT c::text FROM v7fill.checkpoint c" 2>/dev/null
    q "SELECT l::text FROM s_source_ref l" 2>/dev/null
    q "SELECT setting FROM pg_settings WHERE name = 'application_name'" 2>/dev/null
}
URI="postgresql://$ROLE:$PW_URI@/$PGDATABASE?host=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1], safe=""))' "$PGHOST")&port=$PGPORT"
KV="host='$PGHOST' port=$PGPORT dbname='$PGDATABASE' user=$ROLE password='$PW'"

# password authentication is really in force for the role
set +e; PGPASSWORD= psql -X -w -U "$ROLE" -c "SELECT 1" >/dev/null 2>&1; st=$?; set -e
[ "$st" != 0 ] || fail "the role could connect without a password: pg_hba.conf change not in force"

# ---- successful runs, password in a URI and key=value, at debug level -----------------
run_leak "import, URI, -v -v" 0 "$V7FILL" -v -v -d "$URI" import s s.csv --no-progress --rejects rej.csv \
    --report-json rep.json --keep-ref-text
assert_contains "$OUT" "DEBUG" "debug logging on"
assert_contains "$OUT" "inserted       3" "the import ran"
leak_check "report JSON" "$(cat rep.json)"
leak_check "rejects file" "$(cat rej.csv)"
run_leak "import --json, key=value, -v -v" 0 "$V7FILL" -v -v -d "$KV" import s s.csv --json --rejects rej.csv
assert_contains "$OUT" '"duplicates": 3' "second run"
run_leak "plan, URI, -v -v" 0 "$V7FILL" -v -v -d "$URI" plan s s.csv --json
run_leak "partitions --list, key=value, -v -v" 0 "$V7FILL" -v -v -d "$KV" partitions s --list --json
run_leak "partitions --ahead, URI, -v -v" 0 "$V7FILL" -v -v -d "$URI" partitions s --ahead 1 --dry-run
run_leak "PGPASSWORD, -v -v" 0 env PGPASSWORD="$PW" PGUSER="$ROLE" "$V7FILL" -v -v import s s.csv --no-progress --rejects rej.csv
# under trust auth (the postgres role): libpq never needs the password
run_leak "trust auth, URI with a password" 0 "$V7FILL" -v -v \
    -d "postgresql://postgres:$PW_URI@/$PGDATABASE?host=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1], safe=""))' "$PGHOST")&port=$PGPORT" \
    import s s.csv --no-progress --rejects rej.csv --report-json rep2.json
leak_check "report JSON (trust)" "$(cat rep2.json)"
assert_eq 3 "$(q "SELECT count(*) FROM s")" "rows imported once"

# ---- failed connections ------------------------------------------------------------------
WRONG='pw@WrongHunter2%Secret'
run_leak "wrong password (URI)" 5 "$V7FILL" -v -v -d "${URI/$PW_URI/pw%40WrongHunter2%25Secret}" import s s.csv --no-progress --rejects rej.csv
assert_contains "$OUT" "password authentication failed for user \"$ROLE\"" "says what failed"
run_leak "wrong password (key=value)" 5 "$V7FILL" -v -v -d "${KV/$PW/$WRONG}" plan s s.csv
run_leak "unknown database" 5 "$V7FILL" -v -v -d "${KV/dbname=\'$PGDATABASE\'/dbname=nosuchdb}" import s s.csv --no-progress --rejects rej.csv
assert_contains "$OUT" "nosuchdb" "names the database"
run_leak "unknown role" 5 "$V7FILL" -v -v -d "${KV/user=$ROLE/user=nosuchrole}" import s s.csv --no-progress --rejects rej.csv
run_leak "unreachable host" 5 "$V7FILL" -v -v -d "host=127.0.0.1 port=1 connect_timeout=2 dbname=x user=$ROLE password='$PW'" \
    partitions s --list

# ---- malformed connection strings that hold the password --------------------------------
run_leak "bad percent-encoding in the password" 5 "$V7FILL" -d "postgresql://$ROLE:pw%zzHunter2Secret@/$PGDATABASE" import s s.csv --no-progress --rejects rej.csv
run_leak "unclosed IPv6 bracket in a URI with a password" 5 "$V7FILL" -d "postgresql://$ROLE:$PW_URI@[::1/$PGDATABASE" import s s.csv --no-progress --rejects rej.csv
run_leak "unquoted space in a key=value password" 5 "$V7FILL" -d "host=$PGHOST password=pw Hunter2Secret dbname=x" import s s.csv --no-progress --rejects rej.csv
# a password with a character that a URI needs percent-encoded, left as typed: libpq reads
# part of it as the port or the host, and would quote that part in its error
run_leak "unencoded / in a URI password" 5 "$V7FILL" -d "postgresql://$ROLE:pwHunter2/Secret@localhost:5432/$PGDATABASE" import s s.csv --no-progress --rejects rej.csv
run_leak "unencoded @ in a URI password" 5 "$V7FILL" -d "postgresql://$ROLE:pw@Hunter2Secret@localhost:5432/$PGDATABASE" import s s.csv --no-progress --rejects rej.csv
run_leak "bad port in a URI with a password" 5 "$V7FILL" -d "postgresql://$ROLE:$PW_URI@localhost:12x/$PGDATABASE" import s s.csv --no-progress --rejects rej.csv

# ---- what v7fill stored -----------------------------------------------------------------
leak_check "v7fill.run / v7fill.checkpoint / lookup" "$(db_state)"
leak_check "rejects file (final)" "$(cat rej.csv)"

if [ "${#LEAKS[@]}" -gt 0 ]; then
    printf 'LEAK: %s\n' "${LEAKS[@]}"
    fail "${#LEAKS[@]} place(s) show the password"
fi
echo "ok"
