#!/usr/bin/env bash
# Hostile identifiers for `import` and `plan` (t_partitions_names.sh covers `partitions`):
# schema, table, column, lookup-table names with double and single quotes, semicolons,
# spaces, unicode, exactly 63 bytes and 64 bytes.  Each works or fails cleanly, and
# nothing is injected:
#  - a canary table (with a row) must survive every step unchanged;
#  - no unexpected object appears: every relation, column, schema, function, trigger,
#    rule, role or grant that was not there before must be v7fill's own (schema v7fill),
#    a partition of a target (or its index), or a lookup table (ref_key, id, ref) and
#    its index;
#  - `plan` changes nothing at all;
#  - with log_statement = all for the role v7fill runs as, the server log proves that
#    the --source-ref template, --map names, CSV header names and values never reach SQL
#    text: markers planted in them occur in no statement except inside a correctly
#    double-quoted identifier (header/map names are identifiers), and the template and
#    values occur in no statement at all (they travel as parameters or COPY data).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

ROLE=v7fill_hostile_logged
cleanup() {
    psql -X -q -c "DROP OWNED BY $ROLE" >/dev/null 2>&1 || true
    psql -X -q -d postgres -c "DROP ROLE IF EXISTS $ROLE" >/dev/null 2>&1 || true
    rm -rf "$T_TMP"
}
trap cleanup EXIT
psql -X -q -d postgres -c "DROP ROLE IF EXISTS $ROLE" >/dev/null
psql -X -q -d postgres -c "CREATE ROLE $ROLE LOGIN SUPERUSER" >/dev/null
psql -X -q -d postgres -c "ALTER ROLE $ROLE IN DATABASE \"$PGDATABASE\" SET log_statement = 'all'" >/dev/null
LOG="$PGTMP_DIR/server.log"
log_start=$(stat -c %s "$LOG")
v7() { PGUSER=$ROLE "$V7FILL" "$@"; }

S63=$(python3 -c "print('ß' * 31 + 's')")           # 63 bytes (2-byte characters)
T63=$(python3 -c "print('Ä' * 30 + 'abc')")         # 63 bytes
C63=$(python3 -c "print('c' * 61 + 'é')")           # 63 bytes
C64=$(python3 -c "print('d' * 64)")                 # 64 bytes: the server truncates it to 63
L64=$(python3 -c "print('L' * 64)")
for n in "$S63" "$T63" "$C63"; do assert_eq 63 "$(printf %s "$n" | wc -c | tr -d ' ')" "63-byte name"; done

psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE SCHEMA audit;
CREATE TABLE canary (x int, note text);
INSERT INTO canary VALUES (42, 'still here');
CREATE SCHEMA "Sales; Dept";
CREATE TABLE "Sales; Dept"."x""; DROP TABLE canary; --" (
    id uuid NOT NULL PRIMARY KEY,
    "created at" timestamptz NOT NULL,
    "v""; DROP TABLE canary; -- HDRMARK" text,
    "Größe € ✓" text,
    "'); DELETE FROM canary; -- MAPMARK" text
) PARTITION BY RANGE (id);
CREATE TABLE "Events 2026" (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, "select" text)
    PARTITION BY RANGE (id);
CREATE SCHEMA "$S63";
CREATE TABLE "$S63"."$T63" (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, "$C63" text)
    PARTITION BY RANGE (id);
CREATE TABLE "$L64" (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, "$C64" text)
    PARTITION BY RANGE (id);
-- every object in the database, and whether v7fill may have made it
CREATE VIEW audit.objects AS
WITH ours AS (
    SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname IN ('v7fill', 'audit')
        OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
        OR (c.relkind = 'r' AND (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
                                  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
                                 = ARRAY['ref_key', 'id', 'ref'])
), ours_idx AS (
    SELECT x.indexrelid AS oid FROM pg_index x WHERE x.indrelid IN (SELECT oid FROM ours)
)
SELECT 'rel ' || c.oid::regclass::text || ' ' || c.relkind::text AS obj,
       c.oid IN (SELECT oid FROM ours UNION ALL SELECT oid FROM ours_idx) AS allowed
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
UNION ALL
SELECT 'col ' || a.attrelid::regclass::text || '.' || quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod),
       a.attrelid IN (SELECT oid FROM ours UNION ALL SELECT oid FROM ours_idx)
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE a.attnum > 0 AND NOT a.attisdropped AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
UNION ALL
SELECT 'acl ' || c.oid::regclass::text || ' ' || coalesce(c.relacl::text, '-') || ' owner ' || c.relowner::regrole::text,
       c.oid IN (SELECT oid FROM ours UNION ALL SELECT oid FROM ours_idx)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
UNION ALL
SELECT 'con ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid),
       conrelid IN (SELECT oid FROM ours)
  FROM pg_constraint WHERE connamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
UNION ALL SELECT 'nsp ' || quote_ident(nspname) || ' ' || coalesce(nspacl::text, '-'), nspname = 'v7fill' FROM pg_namespace
UNION ALL SELECT 'fn ' || p.oid::regprocedure::text, false FROM pg_proc p
  WHERE p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
UNION ALL SELECT 'trg ' || tgname, false FROM pg_trigger WHERE NOT tgisinternal
UNION ALL SELECT 'rule ' || schemaname || '.' || rulename, false FROM pg_rules WHERE schemaname <> 'pg_catalog'
UNION ALL SELECT 'evt ' || evtname, false FROM pg_event_trigger
UNION ALL SELECT 'role ' || rolname || ' ' || rolsuper, false FROM pg_roles
UNION ALL SELECT 'db ' || datname || ' ' || coalesce(datacl::text, '-'), false FROM pg_database
UNION ALL SELECT 'pub ' || pubname, false FROM pg_publication
UNION ALL SELECT 'canary ' || x || ' ' || note, false FROM canary;
CREATE TABLE audit.baseline AS SELECT obj FROM audit.objects;
SQL
unexpected() { q "SELECT obj FROM audit.objects WHERE NOT allowed EXCEPT SELECT obj FROM audit.baseline
                  UNION ALL
                  SELECT 'GONE: ' || obj FROM (SELECT obj FROM audit.baseline EXCEPT SELECT obj FROM audit.objects) g
                  ORDER BY 1"; }
check_clean() { # WHAT
    local u
    u=$(unexpected)
    [ -z "$u" ] || fail "$1: unexpected changes to the database: $u"
    assert_eq "42|still here" "$(q "SELECT x || '|' || note FROM canary")" "$1: canary intact"
}
snapshot() { q "SELECT obj FROM audit.objects ORDER BY 1" >"$1"; }

# ---- hostile schema, table, column names; hostile values -------------------------------
HT='"Sales; Dept"."x""; DROP TABLE canary; --"'
python3 - <<'PY'
import csv
vals = [
    "'); DROP TABLE canary; -- VALMARK",
    "$$; DROP TABLE canary; $$ VALMARK",
    "\\.",                       # COPY's end-of-data marker, as a value
    "\\N",                       # COPY's NULL, as text
    "tab\there VALMARK",
    "line\nbreak\r\nVALMARK",
    "back\\slash VALMARK",
    "\"dq\" VALMARK",
]
with open("h.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["created at", "v\"; DROP TABLE canary; -- HDRMARK", "Größe € ✓", "src col MAPMARK"])
    for i, v in enumerate(vals):
        w.writerow([f"2024-0{1 + i % 3}-1{i} 10:00:00+00", v, f"{i} ✓ {v}", f"m{i} {v}"])
PY
MAP="src col MAPMARK='); DELETE FROM canary; -- MAPMARK"
SREF="SRCMARK'); DROP TABLE canary; -- {Größe € ✓}|{created at}"
before_plan=$T_TMP/before_plan.txt
snapshot "$before_plan"
run_expect 0 v7 plan "$HT" h.csv --time-column 'created at' --map "$MAP" --source-ref "$SREF" --no-progress
assert_contains "$OUT" "plan (nothing was written)" "plan on hostile names"
snapshot after_plan.txt
cmp -s "$before_plan" after_plan.txt || { diff "$before_plan" after_plan.txt; fail "plan changed the database"; }

run_expect 0 v7 -v import "$HT" h.csv --time-column 'created at' --map "$MAP" --source-ref "$SREF" \
    --keep-ref-text --lookup-table 'lk"; DROP TABLE canary; --' --rejects rej.csv --no-progress --report-json h.json
check_clean "import into hostile names"
assert_eq 8 "$(q "SELECT count(*) FROM $HT")" "all hostile rows imported"
python3 - <<'PY' || fail "values did not arrive byte for byte"
import csv, subprocess
rows = list(csv.reader(open("h.csv", newline="")))[1:]
out = subprocess.run(["psql", "-X", "-At", "-F", "\x1f", "-R", "\x1e", "-c",
    """SELECT "v""; DROP TABLE canary; -- HDRMARK", "Größe € ✓", "'); DELETE FROM canary; -- MAPMARK" """
    """FROM "Sales; Dept"."x""; DROP TABLE canary; --" ORDER BY "Größe € ✓" """],
    capture_output=True, check=True).stdout.decode("utf-8")
got = [r.split("\x1f") for r in out.rstrip("\x1e\n").split("\x1e")]
want = sorted(([r[1], r[2], r[3]] for r in rows), key=lambda r: r[1])
assert got == want, (got, want)
PY
assert_eq 8 "$(q "SELECT count(*) FROM \"Sales; Dept\".\"lk\"\"; DROP TABLE canary; --\" WHERE ref LIKE 'SRCMARK''); DROP TABLE canary; -- %'")" \
    "the lookup table has the hostile name and the references as data"
assert_eq 0 "$(q "SELECT count(*) FROM $HT WHERE \"v\"\"; DROP TABLE canary; -- HDRMARK\" IS NULL")" "\\N stays text"
# rerun: all duplicates, nothing else changes
snapshot before_rerun.txt
run_expect 0 v7 import "$HT" h.csv --time-column 'created at' --map "$MAP" --source-ref "$SREF" \
    --lookup-table 'lk"; DROP TABLE canary; --' --rejects rej.csv --no-progress --report-json h2.json
assert_eq 8 "$(python3 -c 'import json;print(json.load(open("h2.json"))["duplicates"])')" "rerun: duplicates"
check_clean "rerun"

# a --map or header naming no target column: clean usage error, nothing written.  (The
# lookup table of the earlier run is named: v7fill creates its state and the lookup
# table before it reads a file's header, so a first run failing on the header leaves
# them behind.)
run_expect 2 v7 import "$HT" h.csv --time-column 'created at' --map "src col MAPMARK=\"; DROP TABLE canary; --" \
    --lookup-table 'lk"; DROP TABLE canary; --' --rejects rej.csv --no-progress
assert_contains "$OUT" 'has no target column ""; DROP TABLE canary; --"' "unknown map target named"
printf '"created at","x""); DROP TABLE canary; --"\n2024-01-01,1\n' >badhdr.csv
run_expect 2 v7 import "$HT" badhdr.csv --time-column 'created at' --lookup-table 'lk"; DROP TABLE canary; --' --rejects rej.csv --no-progress
assert_contains "$OUT" "has no target column" "unknown header column named"
run_expect 2 v7 import "$HT" h.csv --time-column "created at'; DROP TABLE canary; --" --lookup-table 'lk"; DROP TABLE canary; --' --rejects rej.csv --no-progress
run_expect 3 v7 import '"Sales; Dept".x"; DROP TABLE canary; --' h.csv --lookup-table 'lk"; DROP TABLE canary; --' --rejects rej.csv --no-progress
assert_contains "$OUT" "invalid table name" "a malformed table argument is read as a name, never as SQL"
run_expect 3 v7 plan "canary'; DROP TABLE canary; --" h.csv --no-progress
check_clean "failed attempts"
diff <(sort before_rerun.txt) <(q "SELECT obj FROM audit.objects ORDER BY 1" | sort) ||
    fail "failed attempts changed the database"

# a quoted keyword as a column, a space in the table name
printf 'created_at,select\n2024-03-01,kw\n' >kw.csv
run_expect 0 v7 import '"Events 2026"' kw.csv --rejects rej.csv --no-progress
assert_eq kw "$(q 'SELECT "select" FROM "Events 2026"')" "keyword column"
run_expect 3 v7 import 'Events 2026' kw.csv --rejects rej.csv --no-progress
assert_contains "$OUT" "invalid table name" "unquoted space"

# ---- 63-byte names ----------------------------------------------------------------------
T="\"$S63\".\"$T63\""
printf 'created_at,"%s"\n2024-01-05,a\n2024-02-05,b\n' "$C63" >n63.csv
# the default lookup name (<table>_source_ref) would be 74 bytes: refused, with the way out
run_expect 3 v7 import "$T" n63.csv --rejects rej.csv --no-progress
assert_contains "$OUT" "is longer than 63 bytes" "long lookup name refused"
assert_contains "$OUT" "--lookup-table" "hint"
# the default partition name (<table>__YYYY_MM) would be 72 bytes: refused, nothing created
run_expect 3 v7 import "$T" n63.csv --lookup-table lk63 --rejects rej.csv --no-progress
assert_contains "$OUT" "is 72 bytes long; PostgreSQL names hold at most 63" "long partition name refused"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = '$T'::regclass")" "nothing created"
assert_eq 0 "$(q "SELECT count(*) FROM $T")" "nothing imported"
run_expect 3 v7 plan "$T" n63.csv --lookup-table lk63 --no-progress
# with partitions named by a short pattern (created beforehand), the import works
run_expect 0 v7 partitions "$T" --from 2024-01-01 --to 2024-03-01 --name-pattern 'p%Y_%m'
run_expect 0 v7 import "$T" n63.csv --lookup-table lk63 --rejects rej.csv --no-progress
assert_eq "a|b" "$(q "SELECT string_agg(\"$C63\", '|' ORDER BY created_at) FROM $T")" "63-byte names work"
run_expect 0 v7 plan "$T" n63.csv --lookup-table lk63 --no-progress
assert_contains "$OUT" "duplicates     2" "plan sees the 63-byte lookup's rows"
check_clean "63-byte names"

# ---- 64-byte names ----------------------------------------------------------------------
# SQL truncates a 64-byte identifier to 63 bytes (with a NOTICE); v7fill reads a table
# argument as SQL does, but never truncates a column name or a lookup name silently.
printf 'created_at,"%s"\n2024-01-05,x\n' "$C64" >n64.csv
run_expect 2 v7 import "\"$L64\"" n64.csv --lookup-table lk64 --rejects rej.csv --no-progress
assert_contains "$OUT" "has no target column \"$C64\"" "a 64-byte header name does not match the truncated column"
run_expect 2 v7 import "\"$L64\"" n64.csv --lookup-table lk64 --map "$C64=$C64" --rejects rej.csv --no-progress
run_expect 3 v7 import "\"$L64\"" n64.csv --lookup-table "$L64" --rejects rej.csv --no-progress
assert_contains "$OUT" "is longer than 63 bytes" "a 64-byte --lookup-table is refused"
C63T=${C64:0:63}
printf 'created_at,"%s"\n2024-01-05,x\n' "$C63T" >n64b.csv
run_expect 0 v7 partitions "\"$L64\"" --from 2024-01-01 --to 2024-02-01 --name-pattern 'q%Y_%m'
run_expect 0 v7 import "\"$L64\"" n64b.csv --lookup-table lk64 --rejects rej.csv --no-progress
assert_eq x "$(q "SELECT \"$C63T\" FROM \"${L64:0:63}\"")" "a 64-byte table argument names the truncated table, as in SQL"
check_clean "64-byte names"

# ---- the server log: what reached SQL text ---------------------------------------------
sleep 0.5
tail -c +"$((log_start + 1))" "$LOG" >server.log
grep -q "HDRMARK" server.log || fail "log_statement did not log v7fill's statements (test broken)"
python3 - <<'PY' || fail "input reached SQL text (see above)"
import re, sys
text = open("server.log", encoding="utf-8", errors="replace").read()
# log entries start with the timestamp of log_line_prefix
entries = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", text)
stmts = []
for e in entries:
    m = re.search(r"LOG:  (?:statement|execute [^:]*): (.*)", e, re.S)
    if m:
        stmts.append(m.group(1))
assert len(stmts) > 50, len(stmts)
bad = []
for s in stmts:
    outside = re.sub(r'"(?:[^"]|"")*"', '""', s)   # drop well-formed quoted identifiers
    for mark in ("SRCMARK", "VALMARK"):
        if mark in s:
            bad.append((mark, "in SQL text at all", s[:300]))
    for mark in ("HDRMARK", "MAPMARK", "DROP TABLE canary", "DELETE FROM canary"):
        if mark in outside:
            bad.append((mark, "outside a quoted identifier", s[:300]))
for b in bad:
    print("INJECTION:", b)
print(f"{len(stmts)} statements checked")
sys.exit(1 if bad else 0)
PY
# ---- names in messages cannot forge log lines or drive the terminal ------------------------
# A header name is untrusted text: printed in an error, a newline in it must not start what
# looks like another log line, and control characters (ESC) must not reach the terminal raw
# (the time parser already shows values this way: "\x0a", "\x1b").
printf 'created_at,"x\n2026-01-01 00:00:00.000 UTC [1] INFO: FORGED all rows inserted\033[2K"\n2024-01-01,1\n' >forge.csv
run_expect 2 v7 import "$HT" forge.csv --lookup-table 'lk"; DROP TABLE canary; --' --rejects rej.csv --no-progress
assert_not_contains "$OUT" $'\n2026-01-01 00:00:00.000 UTC [1] INFO: FORGED' "a header name forges a log line"
assert_not_contains "$OUT" $'\033' "a raw ESC from a header name reaches the terminal"
echo "ok"
