#!/usr/bin/env bash
# `v7fill partitions` on a uuid-keyed target: exact UUIDv7 bounds (compared with
# `v7fill uuid floor`), contiguity, idempotent re-run, a row of each window inserts,
# a one-month id range prunes to one partition, new partitions carry the parent's
# indexes, owner and privileges, --dry-run changes nothing, --list/--json, --ahead.
source "$(dirname "$0")/lib.sh"

# jsql JSON EXPR: evaluate EXPR over the JSON document `j` in SQL (psql interpolates
# :'j' only in input it reads, not in -c).
jsql() { printf '%s\n' "SELECT $2 FROM (SELECT :'j'::json AS j) s;" | psql -X -q -At -v ON_ERROR_STOP=1 -v j="$1"; }

sqlf <<'SQL'
CREATE ROLE part_owner;
CREATE ROLE part_reader;
CREATE TABLE events (
    id uuid PRIMARY KEY,
    kind text NOT NULL DEFAULT 'x' CHECK (kind <> ''),
    n int GENERATED ALWAYS AS (length(kind)) STORED
) PARTITION BY RANGE (id);
CREATE INDEX events_kind ON events (kind);
COMMENT ON COLUMN events.kind IS 'what happened';
ALTER TABLE events OWNER TO part_owner;
GRANT SELECT ON events TO part_reader;
GRANT UPDATE (kind) ON events TO part_reader;
SQL

# --dry-run: the DDL, and nothing created
run_expect 0 "$V7FILL" partitions events --from 2026-06-01 --to 2026-10-01 --dry-run
assert_contains "$OUT" "ATTACH PARTITION \"public\".\"events__2026_06\"" "dry-run DDL"
assert_contains "$OUT" "pg_advisory_xact_lock(" "dry-run takes the advisory lock"
assert_contains "$OUT" "INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED" "LIKE options"
assert_not_contains "$OUT" "INCLUDING INDEXES" "LIKE options"
assert_not_contains "$OUT" "PARTITION OF" "never CREATE TABLE ... PARTITION OF"
assert_contains "$OUT" "created=4 skipped=0 gaps_filled=0 issues=0" "dry-run summary"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass")" "dry run created nothing"
# the printed DDL is exactly what would run: feed it to psql
printf '%s\n' "$OUT" | psql -X -q -v ON_ERROR_STOP=1 >/dev/null
assert_eq 4 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass")" "dry-run DDL runs as printed"
q "SELECT format('DROP TABLE %s;', inhrelid::regclass) FROM pg_inherits WHERE inhparent = 'events'::regclass" | psql -X -q >/dev/null

# the real thing
run_expect 0 "$V7FILL" partitions events --from 2026-06-01 --to 2026-10-01
assert_eq "created=4 skipped=0 gaps_filled=0 issues=0" "$(printf '%s\n' "$OUT" | tail -n1)" "summary"

# exact bounds: each window's bounds are `uuid floor` of its first instants
months=(2026-06-01 2026-07-01 2026-08-01 2026-09-01 2026-10-01)
for i in 0 1 2 3; do
    name="events__${months[$i]:0:4}_${months[$i]:5:2}"
    lo=$("$V7FILL" uuid floor "${months[$i]}")
    hi=$("$V7FILL" uuid floor "${months[$((i + 1))]}")
    got=$(q "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = '$name'")
    assert_eq "FOR VALUES FROM ('$lo') TO ('$hi')" "$got" "bounds of $name"
done
assert_eq "FOR VALUES FROM ('019f1af9-b400-7000-8000-000000000000') TO ('019fba9e-d800-7000-8000-000000000000')" \
    "$(q "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = 'events__2026_07'")" "known July bounds"

# contiguity: every upper bound is the next partition's lower bound
bounds=$(q "SELECT string_agg(b, ' ' ORDER BY b) FROM (
              SELECT substring(pg_get_expr(relpartbound, oid) from 'FROM \(''([^'']*)') AS b
                FROM pg_class WHERE relispartition AND relname LIKE 'events\_\_%' AND relkind = 'r'
              UNION ALL
              SELECT substring(pg_get_expr(relpartbound, oid) from 'TO \(''([^'']*)')
                FROM pg_class WHERE relispartition AND relname LIKE 'events\_\_%' AND relkind = 'r') s")
# 4 partitions, contiguous: 5 distinct bounds, 3 of them appearing twice
assert_eq 5 "$(printf '%s\n' $bounds | sort -u | wc -l)" "contiguous bounds"

# idempotent
run_expect 0 "$V7FILL" partitions events --from 2026-06-01 --to 2026-10-01
assert_contains "$OUT" "created=0 skipped=4 gaps_filled=0 issues=0" "re-run"

# a row with an id of each window inserts, into that window
for m in 2026-06-15 2026-07-01T00:00:00Z 2026-08-31T23:59:59.999Z 2026-09-10; do
    id=$("$V7FILL" uuid new --at "$m")
    q "INSERT INTO events (id) VALUES ('$id')" >/dev/null
    want="events__${m:0:4}_${m:5:2}"
    assert_eq "$want" "$(q "SELECT tableoid::regclass FROM events WHERE id = '$id'")" "row of $m"
done

# uuid new: a batch is strictly increasing (RFC 9562 6.2), also inside one tick,
# and every id keeps the time it was minted at
"$V7FILL" uuid new --count 100000 >"$PGTMP_DIR/ids.txt"
LC_ALL=C sort -c "$PGTMP_DIR/ids.txt" 2>/dev/null || fail "uuid new --count 100000 is not sorted"
assert_eq 100000 "$(LC_ALL=C sort -u "$PGTMP_DIR/ids.txt" | wc -l)" "uuid new --count 100000: distinct ids"
ids=$("$V7FILL" uuid new --at 2026-07-01T00:00:00Z --count 5)
assert_eq "$ids" "$(printf '%s\n' "$ids" | LC_ALL=C sort -u)" "uuid new --at T --count 5 sorted and distinct"
assert_eq "$(printf '2026-07-01T00:00:00.000Z\n%.0s' 1 2 3 4 5)" \
    "$(printf '%s\n' "$ids" | "$V7FILL" uuid time --stdin)" "uuid new --at T: every id carries T"
assert_eq t "$(q "SELECT bool_and(a < b) FROM (SELECT id AS a, lead(id) OVER (ORDER BY n) AS b
                 FROM unnest('{$(printf '%s' "$ids" | tr '\n' ,)}'::uuid[]) WITH ORDINALITY u(id, n)) s
                 WHERE b IS NOT NULL")" "uuid new batch increases in PostgreSQL's uuid order"

# pruning: a one-month id range touches exactly one partition
plan=$(q "EXPLAIN (COSTS OFF) SELECT * FROM events
          WHERE id >= '$("$V7FILL" uuid floor 2026-07-01)' AND id < '$("$V7FILL" uuid floor 2026-08-01)'")
assert_contains "$plan" "events__2026_07" "pruned plan"
assert_eq 1 "$(printf '%s\n' "$plan" | grep -oE 'events__[0-9]{4}_[0-9]{2}\b' | sort -u | wc -l)" "one partition scanned: $plan"

# parent's indexes (built by ATTACH), owner, privileges, defaults, comments
assert_eq 2 "$(q "SELECT count(*) FROM pg_index WHERE indrelid = 'events__2026_07'::regclass")" "indexes"
assert_eq 0 "$(q "SELECT count(*) FROM pg_constraint WHERE conrelid = 'events__2026_07'::regclass AND conname = 'v7fill_window_bounds'")" "CHECK dropped"
assert_eq part_owner "$(q "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'events__2026_07'::regclass")" "owner"
assert_eq "$(q "SELECT relacl::text FROM pg_class WHERE oid = 'events'::regclass")" \
    "$(q "SELECT relacl::text FROM pg_class WHERE oid = 'events__2026_07'::regclass")" "table privileges"
assert_eq "$(q "SELECT attacl::text FROM pg_attribute WHERE attrelid = 'events'::regclass AND attname = 'kind'")" \
    "$(q "SELECT attacl::text FROM pg_attribute WHERE attrelid = 'events__2026_07'::regclass AND attname = 'kind'")" "column privileges"
assert_eq "what happened" "$(q "SELECT col_description('events__2026_07'::regclass, 2)")" "comments"
assert_eq 1 "$(q "SELECT n FROM events__2026_07 LIMIT 1")" "generated column"

# --list: bounds as times, windows, no gaps
run_expect 0 "$V7FILL" partitions events --list
assert_contains "$OUT" "events__2026_07" "list"
assert_contains "$OUT" "2026-07-01T00:00:00Z" "list shows times"
assert_contains "$OUT" "partitions=4 default=0 gaps=0" "list summary"
run_expect 0 "$V7FILL" partitions events --list --json
json=$OUT
assert_eq "month|uuid7|min-v7|4|0|2026-07-01T00:00:00Z" \
    "$(jsql "$json" "concat_ws('|', j->>'granularity', j->'table'->>'key_kind',
            j->'table'->>'bound_style', json_array_length(j->'partitions'), json_array_length(j->'gaps'),
            j->'partitions'->1->>'from')")" "list --json"

# --ahead: now's window and the next two (monthly, inferred)
run_expect 0 "$V7FILL" partitions events --ahead 2 --json
json=$OUT
assert_eq "3|0" "$(jsql "$json" "(j->>'created')::int + (j->>'skipped')::int, (j->>'issues')::int")" \
    "--ahead 2 covers three windows"
id=$("$V7FILL" uuid new)
q "INSERT INTO events (id) VALUES ('$id')" >/dev/null
assert_eq "events__$(date -u +%Y_%m)" "$(q "SELECT tableoid::regclass FROM events WHERE id = '$id'")" "a row minted now inserts"
run_expect 0 "$V7FILL" partitions events --ahead 2
assert_contains "$OUT" "created=0 skipped=3" "--ahead re-run"

# the parent's tablespace is the new partitions' tablespace
ts_dir="${PGTMP_DIR:?}/ts_t_partitions_uuid"
mkdir -p "$ts_dir"
[ "$(id -u)" != 0 ] || chown "${PGTMP_USER:-postgres}" "$ts_dir"
q "DROP TABLESPACE IF EXISTS part_ts" >/dev/null 2>&1 || true
q "CREATE TABLESPACE part_ts LOCATION '$ts_dir'" >/dev/null
sqlf <<'SQL'
CREATE TABLE spaced (id uuid PRIMARY KEY) PARTITION BY RANGE (id) TABLESPACE part_ts;
SQL
run_expect 0 "$V7FILL" partitions spaced --from 2026-07-01 --to 2026-08-01
assert_eq part_ts "$(q "SELECT t.spcname FROM pg_class c JOIN pg_tablespace t ON t.oid = c.reltablespace
                         WHERE c.oid = 'spaced__2026_07'::regclass")" "tablespace"
q "DROP TABLE spaced" >/dev/null

# usage errors
run_expect 2 "$V7FILL" partitions events
run_expect 2 "$V7FILL" partitions events --from 2026-07-01
run_expect 2 "$V7FILL" partitions events --list --ahead 1
run_expect 2 "$V7FILL" partitions events --ahead 1 --granularity fortnight
run_expect 0 "$V7FILL" partitions --help
assert_contains "$OUT" "--move-from-default" "help"
echo "ok"
