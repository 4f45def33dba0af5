#!/usr/bin/env bash
# contrib/sql/v7fill_uuid7.sql: uuid7_floor / uuid7_time / uuid7_is_v7 agree with the C side
# (`v7fill uuid floor|new|time`) on thousands of instants, and a time range written as an id
# range prunes partitions, at plan time with constants and at executor start with parameters.
source "$(dirname "$0")/lib.sh"

# Literals without an offset are UTC, in psql as in the CLI.
export PGTZ=UTC
SQL_FILE=${V7FILL_ROOT:-.}/contrib/sql/v7fill_uuid7.sql
[ -f "$SQL_FILE" ] || fail "$SQL_FILE not found"

# psql with a script on stdin, unaligned tuples only, stops at the first error.
qs() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# bulk SUBCOMMAND... < LINES > OUT: answer every line.  floor and time use the CLI's
# --stdin mode (one process, "ERROR<TAB>message" for a bad line); other subcommands run
# `$V7FILL uuid SUBCOMMAND... LINE` per line, printing ERROR for a failed call.
bulk() {
    case "$1" in
    floor|time)
        "$V7FILL" uuid "$@" --stdin 2>/dev/null || true
        ;;
    *)
        while IFS= read -r arg; do
            "$V7FILL" uuid "$@" "$arg" 2>/dev/null || echo ERROR
        done
        ;;
    esac
}

started=$(date +%s.%N)
elapsed() { awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1fs", b - a }'; }

# --- install (twice: the file must be re-runnable) --------------------------------------------
qs -f "$SQL_FILE" >/dev/null
qs -f "$SQL_FILE" >/dev/null

# --- declared properties and inlining ---------------------------------------------------------
assert_eq "uuid7_floor(timestamp with time zone)|i|f|s|sql
uuid7_is_v7(uuid)|i|t|s|sql
uuid7_time(uuid)|i|f|s|sql" \
    "$(q "SELECT p.oid::regprocedure, provolatile, proisstrict, proparallel, l.lanname
            FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
           WHERE proname IN ('uuid7_floor', 'uuid7_time', 'uuid7_is_v7') ORDER BY proname")" \
    "volatility / strictness / parallel safety / language"
q "CREATE TABLE inl (id uuid, ts timestamptz)"
plan=$(q "EXPLAIN (VERBOSE, COSTS OFF) SELECT uuid7_floor(ts), uuid7_time(id), uuid7_is_v7(id) FROM inl")
assert_not_contains "$plan" "uuid7_floor(" "uuid7_floor is inlined"
assert_not_contains "$plan" "uuid7_time(" "uuid7_time is inlined"
assert_not_contains "$plan" "uuid7_is_v7(" "uuid7_is_v7 is inlined"
# Inlined bodies call the raise helpers schema-qualified: a caller whose search_path lacks the
# install schema still works.
assert_eq "019f1af9-b400-7000-8000-000000000000|2026-07-01 00:00:00+00|t" \
    "$(qs <<'SQL'
CREATE TABLE qual (ts timestamptz);
INSERT INTO qual VALUES ('2026-07-01 00:00:00+00');
SET search_path = pg_catalog;
SELECT public.uuid7_floor(ts), public.uuid7_time(public.uuid7_floor(ts)),
       public.uuid7_is_v7(public.uuid7_floor(ts)) FROM public.qual;
SQL
)" "functions called with a search_path without their schema"

# --- known answers ----------------------------------------------------------------------------
assert_eq "019f1af9-b400-7000-8000-000000000000
019fba9e-d800-7000-8000-000000000000
01a05a43-fc00-7000-8000-000000000000
01a0f4c2-c400-7000-8000-000000000000
00000000-0000-7000-8000-000000000000
00000000-0000-7000-8000-000000000000
00000000-0001-7000-8000-000000000000
ffffffff-ffff-7000-8000-000000000000
017f22e2-79b0-7000-8000-000000000000" \
    "$(q "SELECT uuid7_floor(t::timestamptz) FROM unnest(ARRAY[
            '2026-07-01T00:00Z', '2026-08-01', '2026-09-01', '2026-10-01 02:00:00+02',
            '1970-01-01T00:00:00Z', '1970-01-01T00:00:00.000999Z', '1970-01-01T00:00:00.001Z',
            '10889-08-02T05:31:50.655999Z', '2022-02-22T19:22:22Z']) WITH ORDINALITY AS a(t, n)
          ORDER BY n")" \
    "uuid7_floor known answers (DESIGN.md, epoch, 48-bit limit, RFC 9562 A.6)"
# RFC 9562 A.6: ms 0x017F22E279B0 = 2022-02-22T19:22:22.000Z, rand_a 0xCC3 -> 798 µs
assert_eq "2022-02-22 19:22:22.000798+00|2022-02-22T19:22:22.000798Z" \
    "$(q "SELECT uuid7_time('017F22E2-79B0-7CC3-98C4-DC0C0C07398F')")|$(
        "$V7FILL" uuid time 017F22E2-79B0-7CC3-98C4-DC0C0C07398F)" \
    "RFC 9562 A.6 example decoded by SQL and CLI"

# --- thousands of instants: SQL floor == C floor ---------------------------------------------
# Deterministic (setseed) mix: uniform over 1970..9999, dense 2000..2040, millisecond edges
# (.xxx000, .xxx001, .xxx999), month starts and the microsecond before them over many years,
# the first seconds after the epoch, the last instants before the 48-bit limit, leap days,
# the known values, and texts with offsets / short fractions / date only, which the CLI and
# PostgreSQL must read alike.
qs >"$T_TMP/instants" <<'SQL'
SELECT setseed(0.4242) \g /dev/null
CREATE TEMP TABLE g (n serial, src text, t text);
CREATE FUNCTION pg_temp.z(us bigint) RETURNS text LANGUAGE sql IMMUTABLE AS
  $$ SELECT to_char(timestamp '1970-01-01' + (us / 1000000) * interval '1 second'
                    + (us % 1000000) * interval '1 microsecond', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $$;
-- 1970-01-01 .. 9999-12-31T23:59:59.999999
INSERT INTO g (src, t) SELECT 'uniform', pg_temp.z((random() * 253402300799999999)::bigint)
  FROM generate_series(1, 1200);
-- 2000 .. 2040
INSERT INTO g (src, t) SELECT 'recent', pg_temp.z(946684800000000 + (random() * 1262304000000000)::bigint)
  FROM generate_series(1, 1100);
-- millisecond edges, 1970 .. 2100
INSERT INTO g (src, t) SELECT 'ms-edge', pg_temp.z(ms * 1000 + e)
  FROM (SELECT (random() * 4102444800000)::bigint AS ms FROM generate_series(1, 300)) r,
       unnest(ARRAY[0, 1, 999]) e;
-- month starts and the microsecond before, 1970 .. 2300 (every 7th month)
INSERT INTO g (src, t) SELECT 'month-edge', to_char(m - d, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
  FROM generate_series(timestamp '1970-02-01', '2300-01-01', interval '7 months') m,
       unnest(ARRAY[interval '0', interval '1 microsecond']) d;
-- just after the epoch
INSERT INTO g (src, t) SELECT 'epoch', pg_temp.z(us)
  FROM unnest(ARRAY[0, 1, 999, 1000, 1001, 999999, 1000000]::bigint[]) us;
INSERT INTO g (src, t) SELECT 'epoch', pg_temp.z((random() * 5000000)::bigint) FROM generate_series(1, 100);
-- the last encodable instants (48-bit limit, year 10889)
INSERT INTO g (src, t) SELECT 'limit', pg_temp.z(281474976710655999 - (random() * 10000000)::bigint)
  FROM generate_series(1, 50);
INSERT INTO g (src, t) VALUES ('limit', '10889-08-02T05:31:50.655999Z'), ('limit', '10889-08-02T05:31:50.655000Z');
-- leap days, ends of years, known values
INSERT INTO g (src, t) VALUES ('fixed', '2000-02-29T12:00:00Z'), ('fixed', '2024-02-29T23:59:59.999999Z'),
  ('fixed', '2100-03-01T00:00:00Z'), ('fixed', '1972-12-31T23:59:59.999999Z'),
  ('fixed', '9999-12-31T23:59:59.999999Z'), ('fixed', '1970-01-01T00:00:00Z'),
  ('fixed', '2026-07-01T00:00Z'), ('fixed', '2026-08-01'), ('fixed', '2026-09-01'), ('fixed', '2026-10-01');
-- other text forms (offsets, short fractions, space separator, date only)
INSERT INTO g (src, t) SELECT 'offset', to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS.US') || o
  FROM (SELECT timestamp '1971-01-01' + random() * interval '60 years' AS ts FROM generate_series(1, 25)) r,
       unnest(ARRAY['+02:00', '-08:00', '+05:30', '+0545', '-03', 'Z', '+00:00', '-09:30']) o;
INSERT INTO g (src, t) SELECT 'short', to_char(timestamp '1980-01-01' + random() * interval '50 years',
                                      'YYYY-MM-DD HH24:MI:SS') || f
  FROM generate_series(1, 40), unnest(ARRAY['', '.5', '.25', '.125', '.0001', '.99999']) f;
INSERT INTO g (src, t) SELECT 'date', to_char(date '1970-01-01' + (random() * 2900000)::int, 'YYYY-MM-DD')
  FROM generate_series(1, 100);
SELECT t FROM g ORDER BY n;
SQL
n_inst=$(wc -l <"$T_TMP/instants")
[ "$n_inst" -ge 5000 ] || fail "only $n_inst instants generated"
echo "instants: $n_inst ($(elapsed))"

bulk floor <"$T_TMP/instants" >"$T_TMP/c_floor"
assert_eq "$n_inst" "$(wc -l <"$T_TMP/c_floor")" "one C floor per instant"
echo "C floors: done ($(elapsed))"
paste "$T_TMP/instants" "$T_TMP/c_floor" >"$T_TMP/floors.tsv"
q "CREATE TABLE cmp (n serial, t text, c_floor text, ts timestamptz)"
qs -c "\\copy cmp (t, c_floor) FROM '$T_TMP/floors.tsv'"
q "UPDATE cmp SET ts = t::timestamptz"   # read under TimeZone UTC, like the CLI
assert_eq "$n_inst" "$(q "SELECT count(*) FROM cmp")" "rows loaded"
assert_eq "0" "$(q "SELECT count(*) FROM cmp WHERE c_floor LIKE 'ERROR%'")" "the CLI accepted every instant"
mismatch=$(q "SELECT t || ': sql ' || uuid7_floor(t::timestamptz) || ', cli ' || c_floor
                FROM cmp WHERE uuid7_floor(t::timestamptz)::text IS DISTINCT FROM c_floor ORDER BY n LIMIT 10")
assert_eq "" "$mismatch" "uuid7_floor vs v7fill uuid floor"

# Round trip: the time of a floor is the instant truncated to its millisecond.
assert_eq "" "$(q "SELECT t FROM cmp
                    WHERE uuid7_time(uuid7_floor(t::timestamptz)) <> date_trunc('milliseconds', t::timestamptz)
                    ORDER BY n LIMIT 10")" "uuid7_time(uuid7_floor(t)) = date_trunc('milliseconds', t)"
assert_eq "$n_inst" "$(q "SELECT count(*) FROM cmp WHERE uuid7_is_v7(uuid7_floor(t::timestamptz))")" \
    "every floor is a UUIDv7"

# Independent of the session TimeZone (the functions are declared IMMUTABLE).
digest() {
    PGTZ=$1 q "SELECT md5(string_agg(uuid7_floor(ts)::text || '/' || uuid7_time(uuid7_floor(ts)) AT TIME ZONE 'UTC',
                                     ',' ORDER BY n)) FROM cmp"
}
d_utc=$(digest UTC)
for tz in Asia/Kolkata America/St_Johns Africa/Monrovia Pacific/Chatham America/Los_Angeles; do
    assert_eq "$d_utc" "$(digest "$tz")" "results under TimeZone $tz"
done

# --- uuid7_time of ids the CLI minted keeps the microseconds ----------------------------------
# Every 20th instant (the µs fractions, ms edges, month edges and limits among them).
q "SELECT t FROM cmp WHERE n % 20 = 0 ORDER BY n" >"$T_TMP/at"
n_at=$(wc -l <"$T_TMP/at")
bulk new --count 1 --at <"$T_TMP/at" >"$T_TMP/c_new"
paste "$T_TMP/at" "$T_TMP/c_new" >"$T_TMP/new.tsv"
q "CREATE TABLE minted (t text, id text)"
qs -c "\\copy minted FROM '$T_TMP/new.tsv'"
assert_eq "$n_at" "$(q "SELECT count(*) FROM minted WHERE id <> 'ERROR'")" "the CLI minted an id per instant"
assert_eq "" "$(q "SELECT t || ' -> ' || id || ' -> ' || uuid7_time(id::uuid) FROM minted
                    WHERE uuid7_time(id::uuid) <> t::timestamptz LIMIT 10")" \
    "uuid7_time(v7fill uuid new --at T) = T to the microsecond"
assert_eq "" "$(q "SELECT t || ' ' || id FROM minted
                    WHERE NOT uuid7_is_v7(id::uuid)
                       OR id::uuid < uuid7_floor(t::timestamptz)
                       OR left(id, 13) <> left(uuid7_floor(t::timestamptz)::text, 13)
                    LIMIT 10")" \
    "minted ids are v7 and share the millisecond bits of their floor"
echo "C minted ids: $n_at ($(elapsed))"

# --- uuid7_time == v7fill uuid time, every rand_a edge ----------------------------------------
# rand_a 4092..4095 are never minted by v7fill (999 µs -> 4091) but other generators may
# produce them; both sides decode ceil(rand_a * 1000 / 4096) alike.
qs >"$T_TMP/ids" <<'SQL'
SELECT setseed(0.1717) \g /dev/null
SELECT lpad(to_hex(ms), 12, '0') || '7' || lpad(to_hex(ra), 3, '0') || to_hex(8 + (random() * 3)::int)
       || lpad(to_hex((random() * 4095)::int), 3, '0') || lpad(to_hex((random() * 2147483647)::bigint), 12, '0')
  FROM (SELECT (random() * 281474976710655)::bigint AS ms FROM generate_series(1, 15)) m,
       unnest(ARRAY[0, 1, 2, 3, 4, 5, 1024, 2048, 4090, 4091, 4092, 4095]) ra
UNION ALL
SELECT lpad(to_hex((random() * 4102444800000)::bigint), 12, '0') || '7'
       || lpad(to_hex((random() * 4095)::int), 3, '0') || '8000' || '000000000000'
  FROM generate_series(1, 30);
SQL
n_ids=$(wc -l <"$T_TMP/ids")
# canonical 8-4-4-4-12 for the CLI
sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12})$/\1-\2-\3-\4-\5/' "$T_TMP/ids" >"$T_TMP/ids.canon"
bulk time <"$T_TMP/ids.canon" >"$T_TMP/c_time"
paste "$T_TMP/ids.canon" "$T_TMP/c_time" >"$T_TMP/time.tsv"
q "CREATE TABLE times (id text, c_time text)"
qs -c "\\copy times FROM '$T_TMP/time.tsv'"
assert_eq "$n_ids" "$(q "SELECT count(*) FROM times WHERE c_time NOT LIKE 'ERROR%'")" "the CLI decoded every id"
assert_eq "" "$(q "SELECT id || ': sql ' || uuid7_time(id::uuid) || ', cli ' || c_time FROM times
                    WHERE uuid7_time(id::uuid) <> c_time::timestamptz LIMIT 10")" \
    "uuid7_time vs v7fill uuid time"
echo "C decoded ids: $n_ids ($(elapsed))"

# --- uuid7_is_v7 truth table ------------------------------------------------------------------
assert_eq "true|false|false|false|false|false|false|true|" \
    "$(q "SELECT string_agg(coalesce(uuid7_is_v7(u::uuid)::text, ''), '|' ORDER BY n)
            FROM unnest(ARRAY['019f1af9-b400-7abc-bdef-0123456789ab',   -- v7, variant 10
                              '019f1af9-b400-7abc-cdef-0123456789ab',   -- variant 110
                              '019f1af9-b400-7abc-0def-0123456789ab',   -- variant 0
                              '019f1af9-b400-4abc-8def-0123456789ab',   -- version 4
                              '019f1af9-b400-8abc-8def-0123456789ab',   -- version 8
                              '00000000-0000-0000-0000-000000000000',   -- nil
                              'ffffffff-ffff-ffff-ffff-ffffffffffff',   -- max
                              '00000000-0000-7000-8000-000000000000',
                              NULL]) WITH ORDINALITY AS a(u, n)")" \
    "uuid7_is_v7 truth table"
assert_eq "0" "$(q "SELECT count(*) FROM generate_series(1, 1000) WHERE uuid7_is_v7(gen_random_uuid())")" \
    "no uuid4 is a UUIDv7"
assert_eq "t|t" "$(q "SELECT uuid7_floor(NULL) IS NULL, uuid7_time(NULL) IS NULL")" \
    "NULL in, NULL out"

# --- errors -----------------------------------------------------------------------------------
u4=$(q "SELECT gen_random_uuid()")
run_expect 1 psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT uuid7_time('$u4')"
assert_contains "$OUT" "$u4 is not a UUIDv7 (version 4)" "uuid7_time of a uuid4"
run_expect 1 psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT uuid7_time(u) FROM (VALUES (gen_random_uuid())) v(u)"
assert_contains "$OUT" "is not a UUIDv7 (version 4)" "uuid7_time of a uuid4 column"
run_expect 1 psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT uuid7_time('019f1af9-b400-8abc-8def-0123456789ab')"
assert_contains "$OUT" "is not a UUIDv7 (version 8)" "uuid7_time of a uuid8"
run_expect 1 psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT uuid7_time('019f1af9-b400-7abc-cdef-0123456789ab')"
assert_contains "$OUT" "is not a UUIDv7 (variant bits are not 10)" "uuid7_time of a wrong variant"
run_expect 1 psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT uuid7_time('00000000-0000-0000-0000-000000000000')"
assert_contains "$OUT" "is the nil UUID, not a UUIDv7" "uuid7_time of the nil uuid"
# the CLI says the same
if OUT=$("$V7FILL" uuid time "$u4" 2>&1); then fail "v7fill uuid time $u4 succeeded: $OUT"; fi
assert_contains "$OUT" "$u4 is not a UUIDv7 (version 4)" "v7fill uuid time of a uuid4"

# TIME|which error (before = before 1970, past = past the 48-bit range)|CLI rejects it too
for row in '1969-12-31T23:59:59.999999Z|before|cli' '1900-01-01|before|cli' \
    '10889-08-02T05:31:50.656Z|past|cli' '20000-01-01T00:00:00Z|past|cli' \
    'infinity|past|' '-infinity|before|'; do
    IFS='|' read -r t kind cli <<<"$row"
    run_expect 1 psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT uuid7_floor('$t')"
    if [ "$kind" = before ]; then
        assert_contains "$OUT" "is before 1970-01-01T00:00:00Z and cannot be a UUIDv7" "uuid7_floor('$t')"
    else
        assert_contains "$OUT" "is past the 48-bit millisecond range of UUIDv7" "uuid7_floor('$t')"
    fi
    if [ -n "$cli" ]; then
        if OUT=$("$V7FILL" uuid floor "$t" 2>&1); then fail "v7fill uuid floor $t succeeded: $OUT"; fi
        assert_contains "$OUT" "UUIDv7" "v7fill uuid floor $t fails too"
    fi
done
# a year before the Common Era is written with BC, as PostgreSQL writes it
run_expect 1 psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT uuid7_floor('2500-01-01 00:00+00 BC')"
assert_contains "$OUT" "time 2500-01-01T00:00:00.000000Z BC is before 1970-01-01T00:00:00Z" "uuid7_floor of a BC time"
run_expect 1 psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT uuid7_floor('0001-01-01 00:00+00')"
assert_contains "$OUT" "time 0001-01-01T00:00:00.000000Z is before" "uuid7_floor of year 1 AD: no BC"
# a column argument takes the same path (no plan-time folding)
run_expect 1 psql -X -q -At -v ON_ERROR_STOP=1 \
    -c "SELECT uuid7_floor(ts) FROM (VALUES (timestamptz '1969-06-30 12:00:00.25+00')) v(ts)"
assert_contains "$OUT" "time 1969-06-30T12:00:00.250000Z is before 1970-01-01T00:00:00Z" "floor of a column"
# an error branch is not evaluated while planning a query that does not reach it
assert_eq "2" "$(q "SELECT count(*) FROM (VALUES (timestamptz '2026-07-01+00'), ('2026-08-01+00')) v(ts)
                     WHERE uuid7_floor(ts) IS NOT NULL")" "no plan-time error for valid rows"

# --- partition pruning ------------------------------------------------------------------------
qs <<'SQL'
CREATE TABLE ev (id uuid PRIMARY KEY, note text) PARTITION BY RANGE (id);
DO $$
BEGIN
    FOR m IN 1..12 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF ev FOR VALUES FROM (%L) TO (%L)',
                       'ev_2026_' || lpad(m::text, 2, '0'),
                       uuid7_floor(make_timestamptz(2026, m, 1, 0, 0, 0, 'UTC')),
                       uuid7_floor(make_timestamptz(2026, 1, 1, 0, 0, 0, 'UTC') + make_interval(months => m)));
    END LOOP;
END
$$;
INSERT INTO ev SELECT uuid7_floor(ts) , 'hourly'
  FROM generate_series(timestamptz '2026-01-01 00:00:00+00', '2026-12-31 23:00:00+00', interval '1 hour') ts;
ANALYZE ev;
SQL
assert_eq "019f1af9-b400-7000-8000-000000000000|019fba9e-d800-7000-8000-000000000000" \
    "$(q "SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = 'ev_2026_07'" |
        sed -E "s/^FOR VALUES FROM \('([^']*)'\) TO \('([^']*)'\)$/\1|\2/")" \
    "bounds of the July partition"
# ids the CLI minted inside July (with µs) land in July
"$V7FILL" uuid new --at '2026-07-31T23:59:59.999999Z' --count 3 >"$T_TMP/july"
"$V7FILL" uuid new --at '2026-07-01T00:00:00.000001Z' --count 3 >>"$T_TMP/july"
while read -r id; do q "INSERT INTO ev VALUES ('$id', 'cli')"; done <"$T_TMP/july"
assert_eq "6" "$(q "SELECT count(*) FROM ev_2026_07 WHERE note = 'cli'")" "CLI-minted July ids route to July"

# partitions a plan scans: distinct ev_2026_MM names on scan lines (index names end in _pkey)
scanned() { grep -oE ' on ev_2026_[0-9]{2}( |$)' | awk '{ print $2 }' | sort -u | paste -sd, -; }

plan=$(q "EXPLAIN (COSTS OFF) SELECT * FROM ev
           WHERE id >= uuid7_floor('2026-07-01') AND id < uuid7_floor('2026-08-01')")
assert_eq "ev_2026_07" "$(scanned <<<"$plan")" "constant range: one partition, pruned at plan time"
assert_not_contains "$plan" "Subplans Removed" "constant range: nothing left to prune at run time"
assert_contains "$plan" "019f1af9-b400-7000-8000-000000000000" "constant range: bound folded to a uuid"
plan=$(q "EXPLAIN (COSTS OFF) SELECT * FROM ev
           WHERE id >= uuid7_floor('2026-07-15') AND id < uuid7_floor('2026-08-15')")
assert_eq "ev_2026_07,ev_2026_08" "$(scanned <<<"$plan")" "constant range over a month edge: two partitions"
plan=$(q "EXPLAIN (COSTS OFF) SELECT * FROM ev
           WHERE uuid7_time(id) >= '2026-07-01' AND uuid7_time(id) < '2026-08-01'")
assert_eq "12" "$(scanned <<<"$plan" | tr ',' '\n' | wc -l)" "filtering on uuid7_time(id) prunes nothing"

plan=$(qs <<'SQL'
SET plan_cache_mode = force_generic_plan;
PREPARE r(timestamptz, timestamptz) AS
  SELECT * FROM ev WHERE id >= uuid7_floor($1) AND id < uuid7_floor($2);
EXPLAIN (COSTS OFF) EXECUTE r('2026-07-01', '2026-08-01');
SQL
)
assert_contains "$plan" "Subplans Removed: 11" "generic plan: 11 partitions removed at executor start"
assert_eq "ev_2026_07" "$(scanned <<<"$plan")" "generic plan: one partition scanned"
plan=$(qs <<'SQL'
SET plan_cache_mode = force_generic_plan;
PREPARE r(timestamptz, timestamptz) AS
  SELECT * FROM ev WHERE id >= uuid7_floor($1) AND id < uuid7_floor($2);
EXPLAIN (COSTS OFF) EXECUTE r('2026-07-15', '2026-08-15');
SQL
)
assert_contains "$plan" "Subplans Removed: 10" "generic plan over a month edge: 10 removed"
assert_eq "ev_2026_07,ev_2026_08" "$(scanned <<<"$plan")" "generic plan over a month edge: two scanned"

# same rows whichever way the range is written
assert_eq "$(q "SELECT count(*) FROM ev WHERE uuid7_time(id) >= '2026-07-01' AND uuid7_time(id) < '2026-08-01'")" \
    "$(qs <<'SQL'
SET plan_cache_mode = force_generic_plan;
PREPARE r(timestamptz, timestamptz) AS
  SELECT count(*) FROM ev WHERE id >= uuid7_floor($1) AND id < uuid7_floor($2);
EXECUTE r('2026-07-01', '2026-08-01');
SQL
)" "id range and time range select the same rows"
assert_eq "750" "$(q "SELECT count(*) FROM ev WHERE id >= uuid7_floor('2026-07-01') AND id < uuid7_floor('2026-08-01')")" \
    "July: 744 hourly rows + 6 CLI ids"

echo "ok: $n_inst floors, $n_at minted ids, $n_ids decoded ids compared with the CLI ($(elapsed))"
