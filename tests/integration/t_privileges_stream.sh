#!/usr/bin/env bash
# Least privilege for `v7fill stream` (docs/security.md): a source role with only REPLICATION
# and SELECT on the table, the first run as the target's owner (as import's first run), later
# runs as a role holding exactly the documented privileges, through inserts, updates, deletes
# and an applied TRUNCATE; each of those privileges revoked in turn gives a clear error naming
# it with SQLSTATE 42501, and, granted again, the rerun applies every change once.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC
stream_source_db

OWNER=v7fill_sp_owner
STR=v7fill_sp_streamer
REPL=v7fill_sp_repl
NOREPL=v7fill_sp_norepl
ROLES=("$OWNER" "$STR" "$REPL" "$NOREPL")
cleanup() {
    drop_slots
    for r in "${ROLES[@]}"; do
        psql -X -q -c "DROP OWNED BY $r CASCADE" >/dev/null 2>&1 || true
        psql -X -q -d "$SRC" -c "DROP OWNED BY $r CASCADE" >/dev/null 2>&1 || true
    done
    for r in "${ROLES[@]}"; do psql -X -q -d postgres -c "DROP ROLE IF EXISTS $r" >/dev/null 2>&1 || true; done
    rm -rf "$T_TMP"
}
trap cleanup EXIT
for r in "${ROLES[@]}"; do
    psql -X -q -d postgres -c "DROP ROLE IF EXISTS $r" >/dev/null
    psql -X -q -d postgres -c "CREATE ROLE $r LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT" >/dev/null
done
psql -X -q -d postgres -c "ALTER ROLE $REPL REPLICATION" >/dev/null

# The source: the table and its publication are the application's (made by a superuser here);
# the stream's role can only read the table and replicate.
qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    INSERT INTO orders SELECT g, timestamptz '2026-11-01' + g * interval '1 minute', 'n' || g
      FROM generate_series(1, 500) g;
    CREATE PUBLICATION pub FOR TABLE orders;
    REVOKE CREATE ON SCHEMA public FROM PUBLIC;
    GRANT SELECT ON orders TO $REPL, $NOREPL;"
# The target: an owner who may create schema v7fill, nothing for anyone else.
sqlf <<SQL
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE CREATE, TEMPORARY ON DATABASE "$PGDATABASE" FROM PUBLIC;
CREATE SCHEMA app;
GRANT USAGE, CREATE ON SCHEMA app TO $OWNER;
GRANT CREATE ON DATABASE "$PGDATABASE" TO $OWNER;
CREATE TABLE app.orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                            created_at timestamptz NOT NULL, note text) PARTITION BY RANGE (id);
ALTER TABLE app.orders_v7 OWNER TO $OWNER;
SQL

stream_as() {
    local role=$1 src_role=$2; shift 2
    PGUSER=$role timeout 120 "$V7FILL" stream app.orders_v7 --source "dbname=$SRC user=$src_role" \
        --from public.orders --publication pub --slot "$SLOT" --map id=legacy_id \
        --on-truncate apply --until-caught-up "$@"
}
digest_src() { qs "SELECT count(*), md5(coalesce(string_agg(id || '|' || created_at || '|' || coalesce(note, ''), ',' ORDER BY id), '')) FROM orders"; }
digest_dst() { q "SELECT count(*), md5(coalesce(string_agg(legacy_id || '|' || created_at || '|' || coalesce(note, ''), ',' ORDER BY legacy_id), '')) FROM app.orders_v7"; }

# ---- a source role without REPLICATION: a clear error saying what to run, no slot
run_expect 3 stream_as "$OWNER" "$NOREPL"
assert_contains "$OUT" "REPLICATION" "a source role without REPLICATION is named"
assert_contains "$OUT" "ALTER ROLE" "the error says what to run"
assert_eq 0 "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT'")" "no slot made"

# ---- the first run, as the target's owner: the slot, the copy, schema v7fill
run_expect 0 stream_as "$OWNER" "$REPL"
assert_eq "$(digest_src)" "$(digest_dst)" "the first run copies every row"

# ---- later runs: exactly the privileges docs/security.md lists for `stream`, later runs
PRIVS=(
    "SELECT (id) ON app.orders_v7"
    "INSERT ON app.orders_v7"
    "UPDATE ON app.orders_v7"
    "DELETE ON app.orders_v7"
    "TRUNCATE ON app.orders_v7, app.orders_v7_source_ref"
    "SELECT, INSERT, DELETE ON app.orders_v7_source_ref"
    "SELECT, INSERT ON v7fill.id_key"
    "SELECT, UPDATE ON v7fill.stream"
    "SELECT, INSERT, UPDATE ON v7fill.window_activity"
    "INSERT ON v7fill.run"
    "USAGE ON SEQUENCE v7fill.run_run_id_seq"
)
sqlf -c "GRANT USAGE ON SCHEMA app, v7fill TO $STR"
# Needed only to quarantine a row (not exercised here: no row is refused).
sqlf -c "GRANT INSERT ON v7fill.stream_quarantine TO $STR"
for p in "${PRIVS[@]:1}"; do sqlf -c "GRANT $p TO $STR"; done

change_source() { # $1: a round number; one insert, one update, one delete
    local n=$1
    qs "INSERT INTO orders VALUES (1000 + $n, timestamptz '2026-11-20' + $n * interval '1 hour', 'new $n');
        UPDATE orders SET note = 'upd $n' WHERE id = 10 + $n;
        DELETE FROM orders WHERE id = 100 + $n;"
}
change_source 0
# Without SELECT on the target's id an update or delete is refused: the run stops with the
# error, it does not wait for the source's next change (it did: the writer's failure went
# unseen while the source was quiet).
run_expect 5 stream_as "$STR" "$REPL"
assert_contains "$OUT" "permission denied for table orders_v7" "without SELECT on the target's id: the error"
sqlf -c "GRANT ${PRIVS[0]} TO $STR"
run_expect 0 stream_as "$STR" "$REPL"
assert_eq "$(digest_src)" "$(digest_dst)" "a later run with the documented privileges applies every change"

# Each privilege revoked in turn: the run stops with 42501 naming the object, loses nothing;
# granted again, the rerun applies every change once.
round=1
for p in "${PRIVS[@]}"; do
    case "$p" in TRUNCATE*) qs "TRUNCATE orders; INSERT INTO orders VALUES (1, timestamptz '2026-11-02', 'after truncate')" ;;
                 *) change_source "$round" ;; esac
    sqlf -c "REVOKE ${p/ ON / ON } FROM $STR"
    set +e
    OUT=$(stream_as "$STR" "$REPL" 2>&1)
    st=$?
    set -e
    obj=${p##* ON }; obj=${obj#SEQUENCE }; obj=${obj%%,*}
    case "$p" in
        *v7fill.run*)
            # The run history only: the rows are applied, a warning says what is missing.
            [ "$st" = 0 ] || fail "without [$p] the rows are still applied; exit $st: $OUT"
            assert_contains "$OUT" "could not record the rows applied" "without [$p]: the warning"
            assert_eq "$(digest_src)" "$(digest_dst)" "without [$p]: every change applied" ;;
        *)
            [ "$st" = 5 ] || fail "without [$p] the run should stop with exit 5; it exited $st: $OUT"
            assert_contains "$OUT" "SQLSTATE: 42501" "without [$p]: the SQLSTATE"
            assert_contains "$OUT" "permission denied for table ${obj##*.}" "without [$p]: the table named" ;;
    esac
    sqlf -c "GRANT $p TO $STR"
    run_expect 0 stream_as "$STR" "$REPL"
    assert_eq "$(digest_src)" "$(digest_dst)" "without [$p], then granted again: every change applied once"
    round=$((round + 1))
done
# Nothing more than those: no ownership, no CREATE anywhere.
assert_eq "f" "$(q "SELECT has_schema_privilege('$STR', 'app', 'CREATE') OR has_schema_privilege('$STR', 'v7fill', 'CREATE')")" "the streamer creates nothing"
echo "ok: stream with least privilege"
