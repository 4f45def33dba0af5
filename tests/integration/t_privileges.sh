#!/usr/bin/env bash
# Least privilege (docs/security.md): roles holding exactly the documented privileges can
# run each command, and each privilege of a later import is needed (revoking any one gives
# a clear error with SQLSTATE 42501 and nothing half-written).
#   uuid          no database at all
#   plan          USAGE on the target's schema; once v7fill has run: USAGE on schema
#                 v7fill, SELECT on v7fill.id_key and on the lookup table
#   import, first run: owner of the target, USAGE + CREATE on its schema, CREATE on the
#                 database (schema v7fill)
#   import, later runs: USAGE on both schemas, INSERT on the target, SELECT + INSERT on
#                 the lookup table and v7fill.id_key, SELECT + INSERT + UPDATE on
#                 v7fill.checkpoint, INSERT on v7fill.run and USAGE on its sequence,
#                 SELECT + INSERT + UPDATE on v7fill.window_activity (where it exists)
#   a later import that needs a new partition without ownership: SQLSTATE 42501, the
#                 partition and the missing privilege named, nothing created; after the
#                 owner creates the windows (`v7fill partitions`), the rerun resumes.
#   partitions    USAGE + CREATE on the schema, and ownership of the parent (membership
#                 in the owning role is enough)
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

OWNER=v7fill_priv_owner
IMP=v7fill_priv_importer
RO=v7fill_priv_planner
PART=v7fill_priv_partitioner
ROLES=("$OWNER" "$IMP" "$RO" "$PART")
cleanup() {
    for r in "${ROLES[@]}"; do psql -X -q -c "DROP OWNED BY $r CASCADE" >/dev/null 2>&1 || true; done
    for r in "${ROLES[@]}"; do psql -X -q -d postgres -c "DROP ROLE IF EXISTS $r" >/dev/null 2>&1 || true; done
    rm -rf "$T_TMP"
}
trap cleanup EXIT
for r in "${ROLES[@]}"; do
    psql -X -q -d postgres -c "DROP ROLE IF EXISTS $r" >/dev/null
    psql -X -q -d postgres -c "CREATE ROLE $r LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT" >/dev/null
done
psql -X -q -d postgres -c "ALTER ROLE $PART INHERIT" >/dev/null
sqlf <<SQL
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE CREATE, TEMPORARY ON DATABASE "$PGDATABASE" FROM PUBLIC;
CREATE SCHEMA app;
GRANT USAGE, CREATE ON SCHEMA app TO $OWNER;
GRANT CREATE ON DATABASE "$PGDATABASE" TO $OWNER;
CREATE TABLE app.events (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, v text)
    PARTITION BY RANGE (id);
ALTER TABLE app.events OWNER TO $OWNER;
SQL
as() { local role=$1; shift; PGUSER=$role "$@"; }
csv() { local f=$1; shift; { echo "created_at,v"; printf '%s\n' "$@"; } >"$f"; }
objects() { q "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname IN ('app', 'v7fill')"; }
rows() { q "SELECT count(*) FROM app.events"; }

# ---- uuid: no database needed ------------------------------------------------------------
PGHOST=/nonexistent PGPORT=1 run_expect 0 "$V7FILL" uuid floor 2026-07-01
assert_eq "019f1af9-b400-7000-8000-000000000000" "$OUT" "uuid floor without a database"
PGHOST=/nonexistent PGPORT=1 run_expect 0 "$V7FILL" uuid new --count 2
PGHOST=/nonexistent PGPORT=1 run_expect 0 "$V7FILL" uuid time 019f1af9-b400-7000-8000-000000000000

# ---- plan before any import: USAGE on the target's schema ------------------------------
csv a.csv 2024-01-05,a1 2024-02-05,a2 2024-03-05,a3
run_expect 5 as "$RO" "$V7FILL" plan app.events a.csv
assert_contains "$OUT" "SQLSTATE: 42501" "plan without USAGE: permission denied"
assert_contains "$OUT" "permission denied for schema app" "names the schema"
q "GRANT USAGE ON SCHEMA app TO $RO" >/dev/null
n0=$(objects)
run_expect 0 as "$RO" "$V7FILL" plan app.events a.csv
assert_contains "$OUT" "would be created" "plan with USAGE only"
assert_eq "$n0" "$(objects)" "plan wrote nothing"
run_expect 0 as "$RO" "$V7FILL" partitions app.events --list
run_expect 0 as "$RO" "$V7FILL" partitions app.events --from 2024-01-01 --to 2024-02-01 --dry-run
assert_contains "$OUT" "ATTACH PARTITION" "partitions --dry-run with USAGE only"
assert_eq "$n0" "$(objects)" "the dry run wrote nothing"

# ---- first import: needs CREATE on the database; the owner's run creates everything ----
q "GRANT USAGE ON SCHEMA app TO $IMP; GRANT INSERT ON app.events TO $IMP" >/dev/null
run_expect 5 as "$IMP" "$V7FILL" import app.events a.csv --no-progress --rejects "$T_TMP/r.csv"
assert_contains "$OUT" "SQLSTATE: 42501" "first run without CREATE on the database"
assert_contains "$OUT" "needs CREATE on the database" "says which privilege"
assert_eq "$n0" "$(objects)" "nothing created by the refused first run"
run_expect 0 as "$OWNER" "$V7FILL" import app.events a.csv --no-progress --rejects "$T_TMP/r.csv"
assert_eq 3 "$(rows)" "first run by the owner"
assert_eq t "$(q "SELECT count(*) > 0 FROM pg_stats WHERE schemaname = 'app' AND tablename = 'events'")" "the owner's run analyzed the parent"

# ---- plan after the first run: + USAGE on v7fill, SELECT on id_key and the lookup -------
csv b.csv 2024-01-05,a1 2024-01-06,b1 2024-02-06,b2 2024-03-06,b3
run_expect 5 as "$RO" "$V7FILL" plan app.events b.csv
assert_contains "$OUT" "SQLSTATE: 42501" "plan without access to v7fill"
q "GRANT USAGE ON SCHEMA v7fill TO $RO; GRANT SELECT ON v7fill.id_key TO $RO" >/dev/null
run_expect 5 as "$RO" "$V7FILL" plan app.events b.csv
assert_contains "$OUT" "permission denied for table events_source_ref" "plan without SELECT on the lookup"
q "GRANT SELECT ON app.events_source_ref TO $RO" >/dev/null
n1=$(objects)
run_expect 0 as "$RO" "$V7FILL" plan app.events b.csv
assert_contains "$OUT" "duplicates     1" "plan sees the imported row"
assert_eq "$n1" "$(objects)" "plan wrote nothing"

# ---- later imports with exactly the documented privileges ------------------------------
GRANTS=(
    "USAGE ON SCHEMA v7fill"
    "SELECT ON v7fill.id_key"
    "INSERT ON v7fill.id_key"
    "SELECT ON app.events_source_ref"
    "INSERT ON app.events_source_ref"
    "INSERT ON app.events"
    "SELECT ON v7fill.checkpoint"
    "INSERT ON v7fill.checkpoint"
    "UPDATE ON v7fill.checkpoint"
    "INSERT ON v7fill.run"
    "USAGE ON SEQUENCE v7fill.run_run_id_seq"
)
# the quiet-period record of `v7fill maintain`, written by every import batch
if [ -n "$(q "SELECT to_regclass('v7fill.window_activity')")" ]; then
    GRANTS+=("SELECT ON v7fill.window_activity" "INSERT ON v7fill.window_activity"
             "UPDATE ON v7fill.window_activity")
fi
q "REVOKE INSERT ON app.events FROM $IMP" >/dev/null
for g in "${GRANTS[@]}"; do q "GRANT $g TO $IMP" >/dev/null; done
q "SELECT grantee, privilege_type, table_schema || '.' || table_name FROM information_schema.role_table_grants
   WHERE grantee = '$IMP' ORDER BY 3, 2"
runs_before=$(q "SELECT count(*) FROM v7fill.run")
run_expect 0 as "$IMP" "$V7FILL" import app.events b.csv --no-progress --rejects "$T_TMP/r.csv" --report-json b.json
assert_contains "$OUT" "inserted       3" "later import by the least-privileged role"
assert_contains "$OUT" "duplicates     1" "its duplicate found (SELECT on the lookup)"
assert_eq 6 "$(rows)" "rows after the later import"
assert_eq $((runs_before + 1)) "$(q "SELECT count(*) FROM v7fill.run")" "the run is recorded"
assert_eq done "$(q "SELECT status FROM v7fill.run ORDER BY run_id DESC LIMIT 1")" "with status done"
# ANALYZE needs ownership: the role's import skips it (the server's warning, at -v)
csv b2.csv 2024-01-07,b4
run_expect 0 as "$IMP" "$V7FILL" -v import app.events b2.csv --no-progress --rejects "$T_TMP/r.csv"
assert_contains "$OUT" "only table or database owner can analyze it" "ANALYZE skipped for a non-owner (shown at -v)"

# each privilege is needed: without it, a clear error with SQLSTATE 42501 and no rows
i=0
for g in "${GRANTS[@]}"; do
    i=$((i + 1))
    [ "$g" = "INSERT ON v7fill.run" ] || [ "$g" = "USAGE ON SEQUENCE v7fill.run_run_id_seq" ] && continue
    q "REVOKE $g FROM $IMP" >/dev/null
    # a new row, and a row imported before (so that the lookup is probed)
    csv "n$i.csv" "2024-01-2$((i % 8)) 0$((i % 10)):00:00+00,n$i" 2024-01-05,a1
    before=$(rows)
    set +e; out=$(PGUSER=$IMP "$V7FILL" import app.events "n$i.csv" --no-progress --rejects "$T_TMP/r.csv" 2>&1); st=$?; set -e
    q "GRANT $g TO $IMP" >/dev/null
    [ "$st" = 5 ] || fail "without $g: exit status $st, expected 5: $out"
    assert_contains "$out" "SQLSTATE: 42501" "without $g"
    assert_eq "$before" "$(rows)" "without $g: nothing inserted"
    echo "without $g: $(echo "$out" | grep -m1 ERROR | sed 's/.*ERROR: //')"
done
# without the v7fill.run grants the import still succeeds, but the run is not recorded
q "REVOKE INSERT ON v7fill.run FROM $IMP" >/dev/null
csv r.csv 2024-01-25,r1
runs_before=$(q "SELECT count(*) FROM v7fill.run")
run_expect 0 as "$IMP" "$V7FILL" -v -v import app.events r.csv --no-progress --rejects "$T_TMP/r.csv"
assert_contains "$OUT" "could not record the run in v7fill.run" "said at debug level"
assert_eq "$runs_before" "$(q "SELECT count(*) FROM v7fill.run")" "no run row"
q "GRANT INSERT ON v7fill.run TO $IMP" >/dev/null

# ---- a new partition needed without ownership -------------------------------------------
csv c.csv 2024-02-10,c1 2024-05-10,c-new-window 2024-02-11,c2
before=$(rows); n2=$(objects)
run_expect 5 as "$IMP" "$V7FILL" import app.events c.csv --no-progress --rejects "$T_TMP/r.csv"
assert_contains "$OUT" "could not create partition app.events__2024_05" "names the partition"
assert_contains "$OUT" "SQLSTATE: 42501" "SQLSTATE 42501"
assert_contains "$OUT" "CREATE on schema app" "names the missing privilege"
assert_eq "$before" "$(rows)" "nothing of the batch inserted"
assert_eq "$n2" "$(objects)" "nothing half-created"
# CREATE on the schema and SELECT on the parent, still not the owner: ownership named
q "GRANT CREATE ON SCHEMA app TO $IMP; GRANT SELECT ON app.events TO $IMP" >/dev/null
run_expect 5 as "$IMP" "$V7FILL" import app.events c.csv --no-progress --rejects "$T_TMP/r.csv"
assert_contains "$OUT" "SQLSTATE: 42501" "not the owner: 42501"
assert_contains "$OUT" "$OWNER" "names the owner to run as"
assert_eq "$n2" "$(objects)" "not the owner: the created table was rolled back"
q "REVOKE CREATE ON SCHEMA app FROM $IMP; REVOKE SELECT ON app.events FROM $IMP" >/dev/null
# the owner's `partitions` run creates the windows ahead; the importer's rerun completes
run_expect 0 as "$OWNER" "$V7FILL" partitions app.events --from 2024-05-01 --to 2024-07-01
run_expect 0 as "$IMP" "$V7FILL" import app.events c.csv --no-progress --rejects "$T_TMP/r.csv" --report-json c.json
assert_eq $((before + 3)) "$(rows)" "the rerun completes"
assert_eq 1 "$(q "SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = '$IMP'
    AND table_schema = 'app' AND table_name = 'events__2024_05' AND privilege_type = 'INSERT'")" \
    "new partitions carry the parent's grants"

# ---- partitions: CREATE on the schema + membership in the owning role ------------------
q "GRANT USAGE, CREATE ON SCHEMA app TO $PART" >/dev/null
run_expect 0 as "$PART" "$V7FILL" partitions app.events --list
run_expect 5 as "$PART" "$V7FILL" partitions app.events --from 2024-07-01 --to 2024-08-01
assert_contains "$OUT" "SQLSTATE: 42501" "partitions without ownership"
q "GRANT $OWNER TO $PART" >/dev/null
run_expect 0 as "$PART" "$V7FILL" partitions app.events --from 2024-07-01 --to 2024-08-01
assert_contains "$OUT" "created=1" "a member of the owning role creates partitions"
assert_eq "$OWNER" "$(q "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'app.events__2024_07'::regclass")" \
    "the new partition belongs to the parent's owner"
echo "ok"
