# Helpers sourced by integration tests.  Each test gets a fresh database named
# after the test file; PG* variables point at the throwaway cluster.
set -euo pipefail
V7FILL=${V7FILL:?}
T_NAME=$(basename "${BASH_SOURCE[1]}" .sh)
export PGDATABASE="db_${T_NAME}"
psql -q -X -d postgres -c "DROP DATABASE IF EXISTS \"$PGDATABASE\"" >/dev/null
psql -q -X -d postgres -c "CREATE DATABASE \"$PGDATABASE\"" >/dev/null
T_TMP=$(mktemp -d)
trap 'rm -rf "$T_TMP"' EXIT

# q SQL: run a query, print unaligned tuples only.
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
# sql FILE-or-text via stdin
sqlf() { psql -X -q -v ON_ERROR_STOP=1 "$@" >/dev/null; }

fail() { echo "FAIL: $*" >&2; exit 1; }
# assert_eq EXPECTED ACTUAL WHAT
assert_eq() { [ "$1" == "$2" ] || fail "$3: expected [$1], got [$2]"; }
# assert_contains HAYSTACK NEEDLE WHAT
assert_contains() { case "$1" in *"$2"*) ;; *) fail "$3: [$2] not found in: $1" ;; esac; }
assert_not_contains() { case "$1" in *"$2"*) fail "$3: [$2] unexpectedly in: $1" ;; *) ;; esac; }
# run_expect STATUS CMD...: run, capture stdout+stderr in $OUT, check exit status
run_expect() {
    local want=$1; shift
    set +e
    OUT=$("$@" 2>&1)
    local got=$?
    set -e
    [ "$got" = "$want" ] || fail "exit status of [$*]: expected $want, got $got; output: $OUT"
}

# Controlling the throwaway cluster itself (fault-injection tests).  PGBIN as in pgtmp.sh;
# pg_ctl runs as the cluster's owner (the server refuses root).
PGBIN=${PGBIN:-}
if [ -z "$PGBIN" ]; then
    for d in /usr/lib/postgresql/*/bin; do [ -x "$d/pg_ctl" ] && PGBIN=$d; done
fi
as_cluster_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$(stat -c %U "$PGTMP_DIR/data")" -- "$@"; else "$@"; fi
}
pg_ctl_() { as_cluster_owner "$PGBIN/pg_ctl" -D "$PGTMP_DIR/data" -l "$PGTMP_DIR/server.log" "$@" >/dev/null; }
wait_ready() {
    for _ in $(seq 1 100); do
        "$PGBIN/pg_isready" -q -h "$PGHOST" -p "$PGPORT" && return 0
        sleep 0.1
    done
    fail "the cluster did not accept connections again"
}

# A stream test's source: the database $SRC (made afresh), the slot name $SLOT,
# qs SQL (on the source), drop_slots; the slots go when the test exits.
drop_slots() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 's_${T_NAME}%'" >/dev/null
}
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC" -c "$1"; }
stream_source_db() {
    SRC="${PGDATABASE}_src"
    SLOT="s_${T_NAME}"
    drop_slots
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$SRC\"" >/dev/null
    psql -X -q -d postgres -c "CREATE DATABASE \"$SRC\"" >/dev/null
    trap 'drop_slots; rm -rf "$T_TMP"' EXIT
}
