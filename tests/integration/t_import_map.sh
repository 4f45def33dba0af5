# --key-map: the lookup is the typed key map <table>_id_map (legacy_id bigint
# PRIMARY KEY, id uuid NOT NULL UNIQUE).  It holds exactly (legacy_id, id) of
# every row inserted, a rerun inserts nothing, a key that is not an integer is
# rejected with a reason naming the column, the whole bigint range works, and
# two importers on overlapping files insert each key once.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE m (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL,
                legacy_id bigint NOT NULL, note text) PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
def write(name, keys, extra=""):
    with open(name, "w") as f:
        f.write("id,created_at,note\n")
        for i in keys:
            f.write(f"{i},2024-{1 + abs(i) % 12:02d}-{1 + abs(i) % 28:02d}T08:00:{abs(i) % 60:02d}Z,n{i}\n")
        f.write(extra)
write("a.csv", range(1, 3001),
      "abc,2024-01-01T00:00:00Z,bad\n,2024-01-01T00:00:00Z,empty\n"
      "-42,2024-02-02T00:00:00Z,negative\n4611686018427387904,2024-03-03T00:00:00Z,big\n"
      "9223372036854775808,2024-03-03T00:00:00Z,over\n")
write("b.csv", range(1, 20001))
write("c.csv", range(10001, 30001))
PY
imp() { run_expect 0 "$V7FILL" import m "$@" --key-map id --map id=legacy_id --batch-rows 700 \
    --rejects rej.csv --no-progress --report-json r.json; }
field() { python3 -c "import json;print(json.load(open('${2:-r.json}'))['$1'])"; }

imp a.csv
assert_eq "3005 3002 0 3" "$(field read) $(field inserted) $(field duplicates) $(field rejected)" \
    "first import: counts balance (3 keys rejected)"
assert_eq "legacy_id bigint id uuid" \
    "$(q "SELECT string_agg(attname || ' ' || format_type(atttypid, NULL), ' ' ORDER BY attnum)
          FROM pg_attribute WHERE attrelid = 'm_id_map'::regclass AND attnum > 0 AND NOT attisdropped")" \
    "the map's columns: no hash, no reference text"
assert_eq 2 "$(q "SELECT count(*) FROM pg_index WHERE indrelid = 'm_id_map'::regclass AND indisunique")" \
    "legacy_id PRIMARY KEY and id UNIQUE"
map_vs_target() {
    q "SELECT (SELECT count(*) FROM (SELECT legacy_id, id FROM m_id_map EXCEPT ALL SELECT legacy_id, id FROM m) x)
            + (SELECT count(*) FROM (SELECT legacy_id, id FROM m EXCEPT ALL SELECT legacy_id, id FROM m_id_map) x)"
}
assert_eq 0 "$(map_vs_target)" "the map holds exactly (legacy_id, id) of every row"
assert_eq "negative big" \
    "$(q "SELECT string_agg(note, ' ' ORDER BY legacy_id) FROM m WHERE legacy_id < 0 OR legacy_id > 1000000")" \
    "a negative key and 2^62 work with bigint"
rej=$(cat rej.csv)
assert_contains "$rej" "key column id: not an integer: 'abc'" "a non-integer key: its reason"
assert_contains "$rej" "key column id: NULL" "an empty key: its reason"
assert_contains "$rej" "key column id: out of range for bigint: '9223372036854775808'" \
    "a key past bigint: its reason"
# a rerun inserts nothing: every key is in the map
imp a.csv
assert_eq "3005 0 3002 3" "$(field read) $(field inserted) $(field duplicates) $(field rejected)" \
    "rerun: duplicates = rows"
assert_eq 3002 "$(q "SELECT count(*) FROM m")" "rerun: nothing new in the target"
# a row deleted from the target stays known to the map: still a duplicate
q "DELETE FROM m WHERE legacy_id = 5" >/dev/null
q "DELETE FROM v7fill.checkpoint" >/dev/null
imp a.csv
assert_eq "0 3002" "$(field inserted) $(field duplicates)" "the map alone decides"

# the map and a source-reference lookup are not each other
run_expect 3 "$V7FILL" import m a.csv --lookup-table m_id_map --map id=legacy_id --no-progress
assert_contains "$OUT" "is a key map (legacy_id bigint), not a source-reference lookup" \
    "a key map where a hashed lookup is expected"
q "CREATE TABLE m_refs (ref_key uuid PRIMARY KEY, id uuid NOT NULL, ref text)" >/dev/null
run_expect 3 "$V7FILL" import m a.csv --key-map id --lookup-table m_refs --map id=legacy_id --no-progress
assert_contains "$OUT" "is a source-reference lookup (ref_key), not a key map (legacy_id)" \
    "a hashed lookup where a key map is expected"
q "CREATE TABLE m_numeric (legacy_id numeric PRIMARY KEY, id uuid NOT NULL)" >/dev/null
run_expect 3 "$V7FILL" import m a.csv --key-map id --lookup-table m_numeric --map id=legacy_id --no-progress
assert_contains "$OUT" "legacy_id of type numeric: a key map's must be smallint, integer or bigint" \
    "a legacy_id of another type"
run_expect 2 "$V7FILL" import m a.csv --key-map id --source-ref 'x:{id}' --map id=legacy_id --no-progress
assert_contains "$OUT" "--key-map and --source-ref do not go together" "--source-ref with --key-map"
run_expect 2 "$V7FILL" import m a.csv --key-map nope --map id=legacy_id --no-progress
assert_contains "$OUT" "--key-map nope: " "a key column the file lacks"

# an integer map: a key past its range is rejected, the rest land
sqlf <<'SQL'
CREATE TABLE s (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL,
                legacy_id bigint NOT NULL, note text) PARTITION BY RANGE (id);
CREATE TABLE s_id_map (legacy_id smallint PRIMARY KEY, id uuid NOT NULL UNIQUE);
SQL
printf 'id,created_at,note\n32767,2024-01-01T00:00:00Z,top\n-32768,2024-01-01T00:00:01Z,bottom\n32768,2024-01-01T00:00:02Z,over\n' >s.csv
run_expect 0 "$V7FILL" import s s.csv --key-map id --map id=legacy_id --rejects srej.csv --no-progress \
    --report-json sr.json
assert_eq "2 1" "$(field inserted sr.json) $(field rejected sr.json)" "smallint map: the range of smallint"
assert_contains "$(cat srej.csv)" "key column id: out of range for smallint: '32768'" \
    "smallint map: the reason names the type"
assert_eq "-32768 32767" "$(q "SELECT string_agg(legacy_id::text, ' ' ORDER BY legacy_id) FROM s_id_map")" \
    "smallint map: both ends"

# two importers at once on overlapping files: each key once
q "TRUNCATE m" >/dev/null
q "DROP TABLE m_id_map" >/dev/null
q "DELETE FROM v7fill.checkpoint" >/dev/null
"$V7FILL" import m b.csv --key-map id --map id=legacy_id --batch-rows 1000 --rejects rb.csv \
    --no-progress --report-json jb.json >b.out 2>&1 &
p1=$!
"$V7FILL" import m c.csv --key-map id --map id=legacy_id --batch-rows 700 --rejects rc.csv \
    --no-progress --report-json jc.json >c.out 2>&1 &
p2=$!
wait $p1 || { cat b.out; fail "import b failed"; }
wait $p2 || { cat c.out; fail "import c failed"; }
assert_eq "30000 30000" "$(q "SELECT count(*) || ' ' || count(DISTINCT legacy_id) FROM m")" \
    "concurrent: every key once"
assert_eq 30000 "$(q "SELECT count(*) FROM m_id_map JOIN m USING (legacy_id, id)")" \
    "concurrent: the map matches the target"
assert_eq "30000 10000" \
    "$(($(field inserted jb.json) + $(field inserted jc.json))) $(($(field duplicates jb.json) + $(field duplicates jc.json)))" \
    "concurrent: the overlap counted as duplicates"
