#!/usr/bin/env bash
# timestamptz-, timestamp- and bigint-ms-keyed targets: exact bounds, contiguity,
# idempotent re-runs, rows of every window insert; day/week/quarter/year windows;
# --window-tz puts edges at local midnight; unsupported tables fail clearly.
source "$(dirname "$0")/lib.sh"
export PGTZ=UTC

sqlf <<'SQL'
CREATE TABLE ev_tz (at timestamptz NOT NULL, v int) PARTITION BY RANGE (at);
CREATE TABLE ev_ts (at timestamp NOT NULL, v int) PARTITION BY RANGE (at);
CREATE TABLE ev_ms (at_ms bigint NOT NULL, v int) PARTITION BY RANGE (at_ms);
CREATE TABLE ev_local (at timestamptz NOT NULL) PARTITION BY RANGE (at);
SQL

# bounds of every partition of $1, "lower|upper" per line, in order
bounds() {
    q "SELECT substring(b from 'FROM \(''?([^'')]*)') || '|' || substring(b from 'TO \(''?([^'')]*)')
         FROM (SELECT pg_get_expr(relpartbound, oid) AS b FROM pg_class
                WHERE oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = '$1'::regclass)) s
        ORDER BY 1"
}
# contiguous: each upper bound is the next lower bound
assert_contiguous() {
    local prev="" line
    while IFS='|' read -r lo hi; do
        [ -z "$prev" ] || [ "$prev" = "$lo" ] || fail "$1: $prev then $lo is not contiguous"
        prev=$hi
    done < <(bounds "$1")
}

# timestamptz, months
run_expect 0 "$V7FILL" partitions ev_tz --from 2026-07-01 --to 2026-10-01
assert_contains "$OUT" "created=3 skipped=0 gaps_filled=0 issues=0" "timestamptz"
assert_eq "2026-07-01 00:00:00+00|2026-08-01 00:00:00+00
2026-08-01 00:00:00+00|2026-09-01 00:00:00+00
2026-09-01 00:00:00+00|2026-10-01 00:00:00+00" "$(bounds ev_tz)" "timestamptz bounds"
run_expect 0 "$V7FILL" partitions ev_tz --from 2026-07-01 --to 2026-10-01
assert_contains "$OUT" "created=0 skipped=3" "timestamptz re-run"
q "INSERT INTO ev_tz VALUES ('2026-07-01 00:00:00+00', 1), ('2026-09-30 23:59:59.999999+00', 2), ('2026-08-15 12:00+02', 3)" >/dev/null
assert_eq "ev_tz__2026_07 ev_tz__2026_08 ev_tz__2026_09" \
    "$(q "SELECT string_agg(tableoid::regclass::text, ' ' ORDER BY at) FROM ev_tz")" "timestamptz rows"

# timestamp without time zone, quarters
run_expect 0 "$V7FILL" partitions ev_ts --from 2026-11-15 --to 2027-04-01 --granularity quarter
assert_contains "$OUT" "created=2" "timestamp quarters"
assert_eq "2026-10-01 00:00:00|2027-01-01 00:00:00
2027-01-01 00:00:00|2027-04-01 00:00:00" "$(bounds ev_ts)" "timestamp bounds"
assert_eq "ev_ts__2026_q4 ev_ts__2027_q1" \
    "$(q "SELECT string_agg(relname, ' ' ORDER BY relname) FROM pg_class WHERE relname LIKE 'ev\_ts\_\_%' AND relkind = 'r'")" "quarter names"
# quarters are inferred from now on
run_expect 0 "$V7FILL" partitions ev_ts --from 2027-04-01 --to 2027-04-02
assert_contains "$OUT" "ev_ts__2027_q2" "inferred quarter"

# wall-clock timestamps have no zone to put windows in
run_expect 2 "$V7FILL" partitions ev_ts --from 2027-04-01 --to 2027-04-02 --window-tz Europe/Berlin
assert_contains "$OUT" "timestamp without time zone" "--window-tz on a timestamp key"

# bigint epoch milliseconds, ISO weeks over new year (2026 has a week 53)
run_expect 0 "$V7FILL" partitions ev_ms --from 2026-12-20 --to 2027-01-12 --granularity week
assert_contains "$OUT" "created=5" "bigint weeks (2026-12-20 is a Sunday of w51)"
assert_contains "$OUT" "ev_ms__2026_w53" "ISO week 53"
assert_contiguous ev_ms
w53=$(q "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = 'ev_ms__2026_w53'")
# Monday 2026-12-28 .. Monday 2027-01-04 in epoch ms (date -u -d 2026-12-28 +%s)
assert_eq "FOR VALUES FROM ('$(( $(date -u -d 2026-12-28 +%s) * 1000 ))') TO ('$(( $(date -u -d 2027-01-04 +%s) * 1000 ))')" "$w53" "week 53 bounds"
q "INSERT INTO ev_ms VALUES ($(( $(date -u -d 2027-01-01T12:00:00Z +%s) * 1000 )), 1)" >/dev/null
assert_eq ev_ms__2026_w53 "$(q "SELECT tableoid::regclass FROM ev_ms")" "bigint row"
run_expect 0 "$V7FILL" partitions ev_ms --from 2026-12-20 --to 2027-01-12
assert_contains "$OUT" "created=0 skipped=5" "bigint re-run (weeks inferred)"

# days in a local calendar: edges at local midnight, DST day has 23 hours
run_expect 0 "$V7FILL" partitions ev_local --from 2026-03-28T12:00:00+01:00 --to 2026-03-30T12:00:00+02:00 \
    --granularity day --window-tz Europe/Berlin
assert_contains "$OUT" "created=3" "local days"
assert_eq "2026-03-27 23:00:00+00|2026-03-28 23:00:00+00
2026-03-28 23:00:00+00|2026-03-29 22:00:00+00
2026-03-29 22:00:00+00|2026-03-30 22:00:00+00" "$(bounds ev_local)" "local midnight bounds"
assert_contains "$(q "SELECT string_agg(relname, ' ') FROM pg_class WHERE relname LIKE 'ev\_local\_\_%'")" \
    "ev_local__2026_03_29" "local day names"
run_expect 0 "$V7FILL" partitions ev_local --list --window-tz Europe/Berlin
assert_contains "$OUT" "granularity  day (inferred), windows in Europe/Berlin" "inferred in the zone"
# UTC windows next to them are refused: counted in issues=, and a JSON document with --json
run_expect 3 "$V7FILL" partitions ev_local --from 2026-03-31 --to 2026-04-01 --granularity day
assert_contains "$OUT" "would not meet it" "another zone's windows refused"
assert_contains "$OUT" "issues=1" "zone refusal counted in issues="
set +e; J=$("$V7FILL" partitions ev_local --from 2026-03-31 --to 2026-04-01 --granularity day --json 2>/dev/null); rc=$?; set -e
assert_eq 3 "$rc" "zone refusal with --json: exit status"
assert_eq "1|t" "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["issues"], "would not meet" in d["issue"]["message"], sep="|")' "$J" | sed 's/True/t/')" "zone refusal in --json"
run_expect 3 "$V7FILL" partitions ev_local --from 2026-04-01 --to 2026-04-02 --window-tz Mars/Olympus_Mons
assert_contains "$OUT" "unknown time zone" "bad zone"

# with --window-tz, --from/--to without an offset are local dates of that zone
sqlf <<'SQL'
CREATE TABLE ev_be (at timestamptz NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE ev_sp (at timestamptz NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE ev_mon (at timestamptz NOT NULL) PARTITION BY RANGE (at);
SQL
run_expect 0 "$V7FILL" partitions ev_be --window-tz Europe/Berlin --from 2026-03-01 --to 2026-05-01
assert_contains "$OUT" "created=2 " "Berlin March and April, not May"
assert_eq "2026-02-28 23:00:00+00|2026-03-31 22:00:00+00
2026-03-31 22:00:00+00|2026-04-30 22:00:00+00" "$(bounds ev_be)" "Berlin months"
run_expect 0 "$V7FILL" partitions ev_sp -g day --window-tz America/Sao_Paulo --from 2018-11-03 --to 2018-11-05
assert_contains "$OUT" "created=2 " "Sao Paulo 11-03 and 11-04"
assert_not_contains "$OUT" "ev_sp__2018_11_02" "not 11-02"
# an offset that is not a quarter hour (Monrovia 1971, -0:44:30) is another zone's midnight
# too: UTC days next to it are refused, not made as a sliver
run_expect 0 "$V7FILL" partitions ev_mon -g day --window-tz Africa/Monrovia --from 1971-01-03 --to 1971-01-04
assert_eq "1971-01-03 00:44:30+00|1971-01-04 00:44:30+00" "$(bounds ev_mon)" "Monrovia day"
run_expect 3 "$V7FILL" partitions ev_mon -g day --from 1971-01-04 --to 1971-01-05
assert_contains "$OUT" "UTC-00:44:30" "the refusal names the offset"
assert_eq 1 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'ev_mon'::regclass")" "no sliver"
# a zone every machine reads the same: not empty, not the machine's own
run_expect 2 "$V7FILL" partitions ev_be --window-tz '' --ahead 0
assert_contains "$OUT" "--window-tz is empty" "empty zone refused"
run_expect 2 "$V7FILL" partitions ev_be --window-tz localtime --ahead 0
assert_contains "$OUT" "the zone of the machine" "localtime refused"

# unsupported tables: clear errors, exit 3
sqlf <<'SQL'
CREATE TABLE plain (id uuid);
CREATE TABLE by_list (id uuid, region text) PARTITION BY LIST (region);
CREATE TABLE by_hash (id uuid) PARTITION BY HASH (id);
CREATE TABLE two_cols (a uuid, b uuid) PARTITION BY RANGE (a, b);
CREATE TABLE by_expr (a timestamp) PARTITION BY RANGE ((a::date));
CREATE TABLE by_int (a int) PARTITION BY RANGE (a);
CREATE TABLE by_seconds (a bigint) PARTITION BY RANGE (a);
CREATE TABLE by_seconds_1 PARTITION OF by_seconds FOR VALUES FROM (1782864000) TO (1785542400);
CREATE TABLE sub (id uuid) PARTITION BY RANGE (id);
CREATE TABLE sub_1 PARTITION OF sub FOR VALUES FROM (MINVALUE) TO (MAXVALUE) PARTITION BY RANGE (id);
SQL
run_expect 3 "$V7FILL" partitions plain --list
assert_contains "$OUT" "table public.plain is not partitioned" "plain"
run_expect 3 "$V7FILL" partitions by_list --list
assert_contains "$OUT" "is partitioned LIST (region); v7fill supports RANGE" "list"
run_expect 3 "$V7FILL" partitions by_hash --list
assert_contains "$OUT" "supports RANGE" "hash"
run_expect 3 "$V7FILL" partitions two_cols --list
assert_contains "$OUT" "several columns" "multi-column"
run_expect 3 "$V7FILL" partitions by_expr --list
assert_contains "$OUT" "an expression" "expression"
run_expect 3 "$V7FILL" partitions by_int --list
assert_contains "$OUT" "has type integer" "int key"
run_expect 3 "$V7FILL" partitions by_seconds --list
assert_contains "$OUT" "look like epoch seconds" "bigint seconds"
run_expect 3 "$V7FILL" partitions sub --list
assert_contains "$OUT" "itself partitioned" "sub-partitioned child"
run_expect 3 "$V7FILL" partitions sub_1 --list
assert_contains "$OUT" "sub-partitioning" "sub-partition named"
echo "ok"
