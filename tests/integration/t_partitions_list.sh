#!/usr/bin/env bash
# `partitions --list`: row estimates are report's (the planner's estimate scaled to the
# partition's current size, "?" / null when unknown, never a stale 0), bounds inside a
# millisecond are shown exactly, and gap filling next to them meets them exactly.
source "$(dirname "$0")/lib.sh"

jsql() { printf '%s\n' "SELECT $2 FROM (SELECT :'j'::json AS j) s;" | psql -X -q -At -v ON_ERROR_STOP=1 -v j="$1"; }

# a partition analyzed empty, then given 5000 rows without another ANALYZE
sqlf <<'SQL'
CREATE TABLE ls (id uuid PRIMARY KEY, v int) PARTITION BY RANGE (id);
SQL
run_expect 0 "$V7FILL" partitions ls --from 2026-07-01 --to 2026-09-01
sqlf <<SQL
ANALYZE ls;
ALTER TABLE ls__2026_07 SET (autovacuum_enabled = false);
ALTER TABLE ls__2026_08 SET (autovacuum_enabled = false);
INSERT INTO ls SELECT (left('$("$V7FILL" uuid floor 2026-07-01)', 24) || lpad(to_hex(g), 12, '0'))::uuid, g
  FROM generate_series(1, 5000) g;
SQL
run_expect 0 "$V7FILL" partitions ls --list
line=$(grep '^ls__2026_07 ' <<<"$OUT")
assert_eq "?" "$(awk '{print $4}' <<<"$line")" "--list: rows unknown, not a stale 0 ($line)"
assert_eq "0" "$(awk '{print $4}' <<<"$(grep '^ls__2026_08 ' <<<"$OUT")")" "--list: an empty partition has 0 rows"
run_expect 0 "$V7FILL" partitions ls --list --json
assert_eq "null|0" "$(jsql "$OUT" "coalesce(j->'partitions'->0->>'rows_estimate', 'null') || '|' || (j->'partitions'->1->>'rows_estimate')")" "--json: null when unknown"
# analyzed with rows, then grown: the same size-scaled figure as report
sqlf <<SQL
ANALYZE ls__2026_07;
INSERT INTO ls SELECT (left('$("$V7FILL" uuid floor 2026-07-02)', 24) || lpad(to_hex(g), 12, '0'))::uuid, g
  FROM generate_series(1, 5000) g;
SQL
run_expect 0 "$V7FILL" partitions ls --list --json
list_rows=$(jsql "$OUT" "j->'partitions'->0->>'rows_estimate'")
run_expect 0 "$V7FILL" report ls --json
report_rows=$(jsql "$OUT" "(j->'windows'->0->>'rows')::numeric::bigint")
assert_eq "$report_rows" "$list_rows" "--list and report give the same estimate"
[ "$list_rows" -gt 9000 ] || fail "the estimate follows the partition's size: $list_rows (10000 rows)"

# a partition inside one millisecond, and one inside one microsecond: --list shows the
# lower bound where `v7fill uuid time` puts it, gap filling sees both and meets them exactly
sqlf <<'SQL'
CREATE TABLE ob (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE ob_a PARTITION OF ob FOR VALUES FROM ('019d0000-0000-7123-8000-000000000000') TO ('019d0000-0001-7000-8000-000000000000');
CREATE TABLE oc (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE oc_a PARTITION OF oc FOR VALUES FROM ('019d0000-0000-7001-8000-000000000000') TO ('019d0000-0000-7002-0000-000000000000');
SQL
run_expect 0 "$V7FILL" partitions ob --list
assert_eq "$("$V7FILL" uuid time 019d0000-0000-7123-8000-000000000000)" "$(awk '$1 == "ob_a" {print $2}' <<<"$OUT")" "--list: exact lower bound"
run_expect 0 "$V7FILL" partitions ob -g day --from 2026-03-18 --to 2026-03-19
assert_contains "$OUT" "gaps_filled=1" "the gaps around a sub-millisecond partition"
# bounds with microseconds (27 characters) keep the columns in line: "to" starts, and the row
# count ends, at one display column on the header and every partition line
run_expect 0 "$V7FILL" partitions ob --list
echo "$OUT"
assert_contains "$OUT" ".248072Z" "test setup: a bound printed with microseconds"
cols=$(python3 - "$OUT" <<'PY'
import re, sys
lines = [l for l in sys.argv[1].splitlines() if l.startswith(("partition ", "ob_a ", "ob__"))]
assert len(lines) == 4, lines
toks = [[*re.finditer(r"\S+", l)] for l in lines]
# the header's "rows (est.)" is two words
print(" ".join(sorted({"%d/%d" % (t[2].start(), t[4 if i == 0 else 3].end()) for i, t in enumerate(toks)})))
PY
)
assert_eq 1 "$(wc -w <<<"$cols")" "--list: \"to\" starts and rows end at one column on every line ($cols)"
assert_eq "ob__2026_03_18_p1|019cfe3d-f800-7000-8000-000000000000|019d0000-0000-7123-8000-000000000000
ob__2026_03_18_p2|019d0000-0001-7000-8000-000000000000|019d0364-5400-7000-8000-000000000000
ob_a|019d0000-0000-7123-8000-000000000000|019d0000-0001-7000-8000-000000000000" \
    "$(q "SELECT relname || '|' || substring(b from 'FROM \(''([^'']*)') || '|' || substring(b from 'TO \(''([^'']*)')
            FROM (SELECT relname, pg_get_expr(relpartbound, oid) b FROM pg_class WHERE relname LIKE 'ob%' AND relkind = 'r') s ORDER BY 1")" \
    "pieces meet ob_a exactly"
run_expect 0 "$V7FILL" partitions oc -g day --from 2026-03-18 --to 2026-03-19
assert_contains "$OUT" "gaps_filled=1" "the gaps around a sub-microsecond partition"
assert_eq "019d0000-0000-7001-8000-000000000000|019d0000-0000-7002-0000-000000000000" \
    "$(q "SELECT string_agg(b, '|' ORDER BY b) FROM (SELECT substring(pg_get_expr(relpartbound, oid) from 'TO \(''([^'']*)') b FROM pg_class WHERE relname = 'oc__2026_03_18_p1'
          UNION ALL SELECT substring(pg_get_expr(relpartbound, oid) from 'FROM \(''([^'']*)') FROM pg_class WHERE relname = 'oc__2026_03_18_p2') s")" \
    "pieces meet oc_a exactly"
q "INSERT INTO oc SELECT '$("$V7FILL" uuid new --at 2026-03-18T12:00:00Z)'" >/dev/null
echo "ok"
