# How a re-import finds what is already there: the target by id first (one
# range scan per batch read in time order), then the lookup by reference hash
# for what the target cannot answer.  Each source decides on its own: rows
# deleted from the target stay duplicates (the lookup remembers them), rows
# whose lookup entry is gone are still duplicates (their id is in the target),
# and an id given by the input is never taken as proof (a different record
# with the same id is refused by the server, not silently dropped).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf <<'SQL'
CREATE TABLE d (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
SQL
python3 - <<'PY'
import random
rows = [(i, f"2024-{1 + i * 12 // 30000:02d}-{1 + i % 28:02d}T08:{i % 60:02d}:{i % 59:02d}.{i % 997:03d}Z")
        for i in range(30000)]
rows.sort(key=lambda r: r[1])
with open("ordered.csv", "w") as f:
    f.write("n,created_at\n")
    for n, t in rows:
        f.write(f"{n},{t}\n")
random.seed(7)
random.shuffle(rows)
with open("shuffled.csv", "w") as f:
    f.write("n,created_at\n")
    for n, t in rows:
        f.write(f"{n},{t}\n")
PY
imp() { run_expect 0 "$V7FILL" import d "$1" --batch-rows 2000 --source-ref 'n:{n}' \
    --rejects rej.csv --no-progress --report-json r.json; }
field() { python3 -c "import json;print(json.load(open('r.json'))['$1'])"; }

imp ordered.csv
assert_eq 30000 "$(field inserted)" "fresh import"
# the reference's integer leads its lookup key, so the lookup is in key order
lead48() { echo "('x' || left(replace($1::text, '-', ''), 12))::bit(48)::bigint"; }
assert_eq 30000 "$(q "SELECT count(*) FROM d_source_ref r JOIN d USING (id) WHERE $(lead48 r.ref_key) = d.n")" \
    "each lookup key starts with its reference's integer"
# plan tells how many references end in an integer, and what to do when none does
run_expect 0 "$V7FILL" plan d ordered.csv --source-ref 'n:{n}' --no-progress --report-json p.json
assert_contains "$OUT" "lookup keys    ordered: 30000 of 30000 rows' references end in an integer" \
    "plan: every reference ends in its integer"
assert_eq "ordered 30000" "$(python3 -c "import json;j=json.load(open('p.json'));print(j['lookup_keys'], j['references_ending_in_integer'])")" \
    "plan: the same in JSON"
run_expect 0 "$V7FILL" plan d ordered.csv --source-ref '{n}:d' --no-progress
assert_contains "$OUT" "ordered: 0 of 30000 rows' references end in an integer (a --source-ref ending in the source's serial key, if it has one, would order the lookup)" \
    "plan: a template ending in text is pointed out"
assert_eq ordered "$(field lookup_keys)" "import report: the key kind in JSON"
# the target's time column holds the input's instant, to the microsecond, on every day
sqlf -c "CREATE TEMP TABLE src (n integer, created_at timestamptz)" \
     -c "\\copy src FROM 'ordered.csv' (FORMAT csv, HEADER)" \
     -c "CREATE TABLE src_copy AS SELECT * FROM src"
assert_eq 0 "$(q "SELECT count(*) FROM src_copy s JOIN d USING (n) WHERE d.created_at <> s.created_at")" \
    "created_at as in the input"
assert_eq 30000 "$(q "SELECT count(*) FROM src_copy s JOIN d USING (n)")" "every input row there"
ids_kept() { q "SELECT md5(string_agg(id::text, ',' ORDER BY n)) FROM d WHERE n % 300 <> 0"; }
ids_before=$(ids_kept)

imp ordered.csv
assert_eq 0 "$(field inserted)" "re-import (time order) inserts nothing"
assert_eq 30000 "$(field duplicates)" "re-import (time order): all duplicates"

imp shuffled.csv
assert_eq 0 "$(field inserted)" "re-import (random order) inserts nothing"
assert_eq 30000 "$(field duplicates)" "re-import (random order): all duplicates"

# rows deleted from the target: the lookup still knows them
q "DELETE FROM d WHERE n % 300 = 0" >/dev/null
imp ordered.csv
assert_eq 0 "$(field inserted)" "deleted rows are not imported again"
assert_eq 30000 "$(field duplicates)" "deleted rows count as duplicates"
assert_eq 29900 "$(q "SELECT count(*) FROM d")" "the deleted rows stay deleted"

# lookup entries gone, target rows kept: the target knows them
q "DELETE FROM d_source_ref r USING d WHERE r.id = d.id AND d.n % 300 = 1" >/dev/null
assert_eq 29900 "$(q "SELECT count(*) FROM d_source_ref")" "100 lookup entries removed"
imp ordered.csv
assert_eq 0 "$(field inserted)" "rows still in the target are not imported again"
assert_eq 30000 "$(field duplicates)" "rows still in the target count as duplicates"
assert_eq 0 "$(field rejected)" "and are not refused by the server"
assert_eq 29900 "$(q "SELECT count(*) FROM d")" "no row twice"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT n FROM d GROUP BY n HAVING count(*) > 1) x")" \
    "every n once"
assert_eq "$ids_before" "$(ids_kept)" "the ids are the ones of the first import"

# The target's answer to a batch's probe comes in the heap's order, not the
# ids': a table loaded from the shuffled file holds each partition's rows in
# 2,000-row runs.  With half its lookup gone, the time-ordered re-import needs
# the target's answer for those rows: a row the probe failed to match would be
# noticed only by the lookup's unique violation ("missing from its lookup").
sqlf -c "CREATE TABLE d2 (LIKE d INCLUDING ALL) PARTITION BY RANGE (id)" \
     -c "CREATE TABLE d3 (LIKE d INCLUDING ALL) PARTITION BY RANGE (id)"
run_expect 0 "$V7FILL" import d2 shuffled.csv --batch-rows 2000 --source-ref 'n:{n}' --no-progress
q "DELETE FROM d2_source_ref r USING d2 WHERE r.id = d2.id AND d2.n % 2 = 1" >/dev/null
run_expect 0 "$V7FILL" import d2 ordered.csv --batch-rows 2000 --source-ref 'n:{n}' \
    --rejects rej2.csv --no-progress --report-json r.json
assert_eq "0 30000 0" "$(field inserted) $(field duplicates) $(field rejected)" \
    "re-import, the target's rows in another order: all duplicates"
assert_not_contains "$OUT" "missing from its lookup" "each found by the target's probe"
# A table holding every other row gets three rows in four: the probe must match
# exactly the rows there, never a new row whose id lies next to one.
awk -F, 'NR == 1 || $1 % 2 == 0' ordered.csv >even.csv
awk -F, 'NR == 1 || $1 % 4 != 2' ordered.csv >some.csv
run_expect 0 "$V7FILL" import d3 even.csv --batch-rows 2000 --source-ref 'n:{n}' --no-progress
run_expect 0 "$V7FILL" import d3 some.csv --batch-rows 2000 --source-ref 'n:{n}' \
    --rejects rej3.csv --no-progress --report-json r.json
assert_eq "15000 7500 0" "$(field inserted) $(field duplicates) $(field rejected)" \
    "every other row there: the new ones inserted, none taken for a duplicate"
assert_eq "30000|30000" "$(q "SELECT count(*), count(DISTINCT n) FROM d3")" "each row once"
# Two sources in one table, the second's lookup rows gone: its re-import's
# ranges hold mostly the first source's rows, more than the range probe
# returns.  The rows' unique violation asks the target for each id.
sqlf -c "CREATE TABLE d5 (LIKE d INCLUDING ALL, src text NOT NULL) PARTITION BY RANGE (id)"
python3 - <<'PY'
import random
random.seed(3)
span = 20 * 86400
def ts():
    t = random.randrange(span)
    return f"2024-01-{1 + t // 86400:02d}T{t % 86400 // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}.{random.randrange(1000):03d}Z"
for name, n in (("a", 20000), ("b", 3000)):
    rows = sorted(((i, ts()) for i in range(n)), key=lambda r: r[1])
    with open(f"{name}.csv", "w") as f:
        f.write("n,created_at,src\n")
        for i, t in rows:
            f.write(f"{i},{t},{name}\n")
PY
run_expect 0 "$V7FILL" import d5 a.csv --source-ref 'a:{n}' --no-progress
run_expect 0 "$V7FILL" import d5 b.csv --source-ref 'b:{n}' --no-progress
q "DELETE FROM d5_source_ref r USING d5 WHERE r.id = d5.id AND d5.src = 'b'" >/dev/null
run_expect 0 "$V7FILL" import d5 b.csv --source-ref 'b:{n}' --rejects rej5.csv --no-progress \
    --report-json r.json
assert_eq "0 3000 0" "$(field inserted) $(field duplicates) $(field rejected)" \
    "a source whose lookup rows are gone, among another's rows: all duplicates, none refused"
q "DELETE FROM d5_source_ref r USING d5 WHERE r.id = d5.id AND d5.src = 'b'" >/dev/null
run_expect 0 "$V7FILL" import d5 b.csv --source-ref 'b:{n}' --batch-rows 100 --rejects rej5.csv \
    --no-progress --report-json r.json
assert_eq "0 3000 0" "$(field inserted) $(field duplicates) $(field rejected)" \
    "the same in batches of 100"

# ids given by the input: an id in the target does not make a different record
# a duplicate
sqlf <<'SQL'
CREATE TABLE g (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, v text NOT NULL)
    PARTITION BY RANGE (id);
SQL
id1=$("$V7FILL" uuid new --at 2024-05-01T00:00:00Z)
id2=$("$V7FILL" uuid new --at 2024-05-02T00:00:00Z)
printf 'id,created_at,v\n%s,2024-05-01T00:00:00Z,first\n' "$id1" >g1.csv
printf 'id,created_at,v\n%s,2024-05-01T00:00:00Z,first\n%s,2024-05-01T00:00:00Z,other record, same id\n%s,2024-05-02T00:00:00Z,new\n' \
    "$id1" "$id1" "$id2" | sed 's/other record, same id/"other record, same id"/' >g2.csv
run_expect 0 "$V7FILL" import g g1.csv --id-column id --no-progress --rejects g1r.csv
run_expect 0 "$V7FILL" import g g2.csv --id-column id --batch-rows 1 --no-progress \
    --rejects g2r.csv --report-json g.json
assert_eq 1 "$(python3 -c "import json;print(json.load(open('g.json'))['duplicates'])")" \
    "the exact repeat is a duplicate"
assert_eq 1 "$(python3 -c "import json;print(json.load(open('g.json'))['rejected'])")" \
    "a different record with a taken id is rejected"
assert_contains "$(cat g2r.csv)" "23505" "with the server's SQLSTATE"
assert_eq 1 "$(python3 -c "import json;print(json.load(open('g.json'))['inserted'])")" "the new row lands"
assert_eq "first" "$(q "SELECT v FROM g WHERE id = '$id1'")" "the first record is kept"

# lookups made by earlier v7fill (ref_hash bytea, then ref_hash uuid) keep
# working, probes included, with keys that are the hash alone (never ordered)
for shape in bytea uuid; do
    sqlf <<SQL
DROP TABLE IF EXISTS o, o_source_ref;
CREATE TABLE o (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
CREATE TABLE o_source_ref (ref_hash $shape PRIMARY KEY, id uuid NOT NULL, ref text);
SQL
    impo() { run_expect 0 "$V7FILL" import o "$1" --batch-rows 2000 --source-ref 'n:{n}' \
        --rejects reo.csv --no-progress --report-json r.json; }
    impo ordered.csv
    assert_eq 30000 "$(field inserted)" "$shape lookup: fresh import"
    hex=$([ "$shape" = bytea ] && echo "encode(ref_hash, 'hex')" || echo "replace(ref_hash::text, '-', '')")
    assert_eq "30000 16" "$(q "SELECT count(*) || ' ' || min(length($hex) / 2) FROM o_source_ref")" \
        "$shape lookup: one 16-byte hash per row"
    assert_eq 0 "$(q "SELECT count(*) FROM o_source_ref r JOIN o USING (id)
                      WHERE left($hex, 12) = lpad(to_hex(o.n), 12, '0')")" \
        "$shape lookup: keys are the hash alone, never ordered"
    q "DELETE FROM o WHERE n % 300 = 0" >/dev/null
    impo shuffled.csv
    assert_eq 0 "$(field inserted)" "$shape lookup: rows only the lookup knows stay out"
    assert_eq 30000 "$(field duplicates)" "$shape lookup: all duplicates"
    assert_eq 29900 "$(q "SELECT count(*) FROM o")" "$shape lookup: no row came back"
done

# --lookup-keys=hashed: a new lookup keeps nothing of a reference in the clear
# (created in the unordered ref_hash shape); later runs use it as it is, and
# neither choice can be changed on an existing lookup
sqlf <<'SQL'
CREATE TABLE h (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
SQL
run_expect 0 "$V7FILL" plan h ordered.csv --source-ref 'n:{n}' --lookup-keys hashed --no-progress
assert_eq 0 "$(q "SELECT count(*) FROM pg_class WHERE relname = 'h_source_ref'")" "plan creates no lookup"
run_expect 0 "$V7FILL" import h ordered.csv --batch-rows 2000 --source-ref 'n:{n}' --lookup-keys hashed \
    --rejects reh.csv --no-progress --report-json r.json
assert_eq 30000 "$(field inserted)" "hashed keys: fresh import"
assert_eq hashed "$(field lookup_keys)" "hashed keys: the report says so"
assert_eq "ref_hash uuid" "$(q "SELECT attname || ' ' || format_type(atttypid, NULL) FROM pg_attribute
                              WHERE attrelid = 'h_source_ref'::regclass AND attnum = 1")" \
    "hashed keys: the lookup is created in the ref_hash shape"
assert_eq 0 "$(q "SELECT count(*) FROM h_source_ref r JOIN h USING (id)
                  WHERE left(replace(ref_hash::text, '-', ''), 12) = lpad(to_hex(h.n), 12, '0')")" \
    "hashed keys: no key shows its reference's integer"
run_expect 0 "$V7FILL" import h shuffled.csv --batch-rows 2000 --source-ref 'n:{n}' \
    --rejects reh.csv --no-progress --report-json r.json
assert_eq 30000 "$(field duplicates)" "hashed keys: a later run without the option finds every row"
run_expect 3 "$V7FILL" import h ordered.csv --source-ref 'n:{n}' --lookup-keys ordered \
    --rejects reh.csv --no-progress
assert_contains "$OUT" "has hashed keys; --lookup-keys=ordered cannot change that" "hashed stays hashed"
run_expect 3 "$V7FILL" import d ordered.csv --source-ref 'n:{n}' --lookup-keys hashed \
    --rejects rej.csv --no-progress
assert_contains "$OUT" "has ordered keys; --lookup-keys=hashed cannot change that" "ordered stays ordered"
run_expect 2 "$V7FILL" import h ordered.csv --lookup-keys sorted --no-progress
assert_contains "$OUT" '--lookup-keys: "sorted" is not ordered or hashed' "a bad value is named"

# a table in the lookup's place that is not one: a clear error, nothing written
sqlf <<'SQL'
CREATE TABLE w (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
CREATE TABLE w_source_ref (n integer PRIMARY KEY, note text);
SQL
run_expect 3 "$V7FILL" import w ordered.csv --source-ref 'n:{n}' --no-progress --rejects rew.csv
assert_contains "$OUT" "w_source_ref is not a v7fill lookup: it has no ref_key uuid (or ref_hash) column" \
    "a foreign table where the lookup goes is named"
assert_contains "$OUT" "--lookup-table" "with the way out"
assert_eq 0 "$(q "SELECT count(*) FROM w")" "nothing written to the target"

# references that do not end in an integer below 2^48 get hash-only keys; the
# same integer written two ways is two references; all dedup exactly
sqlf <<'SQL'
CREATE TABLE e (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, v text)
    PARTITION BY RANGE (id);
SQL
{
    echo "v,created_at"
    for v in 7 007 0 281474976710655 281474976710656 99999999999999999999 -3 abc ""; do
        echo "$v,2024-03-01T00:00:00Z"
    done
} >e.csv
impe() { run_expect 0 "$V7FILL" import e e.csv --source-ref 'e:{v}' --rejects ree.csv \
    --no-progress --report-json r.json; }
impe
assert_eq 9 "$(field inserted)" "nine references, nine rows (7 and 007 are two)"
assert_eq "0 3 7 7 281474976710655" \
    "$(q "SELECT string_agg($(lead48 r.ref_key)::text, ' ' ORDER BY $(lead48 r.ref_key)) FROM e_source_ref r JOIN e USING (id)
          WHERE e.v IN ('0', '7', '007', '281474976710655', '-3')")" \
    "the integer a reference ends in leads its key (e:-3 ends in 3)"
impe
assert_eq 9 "$(field duplicates)" "re-import: all nine are duplicates"
assert_eq 9 "$(q "SELECT count(*) FROM e")" "no row twice"

# the target probe names the key column: a hostile key column name is quoted
sqlf <<'SQL'
CREATE TABLE k ("the id""; DROP TABLE d; --" uuid NOT NULL PRIMARY KEY,
                created_at timestamptz NOT NULL, n integer NOT NULL) PARTITION BY RANGE ("the id""; DROP TABLE d; --");
SQL
impk() { run_expect 0 "$V7FILL" import k ordered.csv --batch-rows 2000 --source-ref 'n:{n}' \
    --rejects rek.csv --no-progress --report-json r.json; }
impk
assert_eq 30000 "$(field inserted)" "hostile key column: fresh import"
impk
assert_eq 30000 "$(field duplicates)" "hostile key column: re-import, all duplicates"
assert_eq 29900 "$(q "SELECT count(*) FROM d")" "nothing injected"

# Rows of one reference in one batch: a row that does not land never claims
# its reference.  When the first is refused by the server (bad JSON) or
# expired (retention), the next one takes its place, as with --batch-rows 1.
counts() { python3 -c "import json;j=json.load(open('r.json'));print(*(j[k] for k in '$*'.split()))"; }
sqlf <<'SQL'
CREATE TABLE dj (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, k int, payload jsonb)
    PARTITION BY RANGE (id);
SQL
cat >dj.csv <<'CSV'
created_at,k,payload
2024-01-01T00:00:00Z,1,{bad
2024-01-01T00:00:05Z,1,"{""fixed"":true}"
2024-01-01T00:00:01Z,2,{}
2024-01-01T00:00:02Z,3,{bad
2024-01-01T00:00:03Z,3,{still bad
2024-01-01T00:00:04Z,3,"{""third"":true}"
2024-01-01T00:00:06Z,3,"{""fourth"":true}"
2024-01-01T00:00:07Z,4,{bad
CSV
impdj() { run_expect 0 "$V7FILL" import dj dj.csv --source-ref 'legacy:{k}' --rejects "$1" \
    --no-progress --report-json r.json; }
impdj djr.csv
assert_eq "8 3 1 4" "$(counts read inserted duplicates rejected)" \
    "refused first row: read = inserted + duplicates + rejected"
assert_eq '1 {"fixed": true}|2 {}|3 {"third": true}' \
    "$(q "SELECT string_agg(k || ' ' || payload, '|' ORDER BY k) FROM dj")" \
    "refused first row: the next row of its reference lands"
assert_eq "1 2 3" "$(q "SELECT string_agg(d.k::text, ' ' ORDER BY d.k) FROM dj_source_ref r JOIN dj d USING (id)")" \
    "refused first row: the lookup points at the rows that landed, and knows nothing of k=4"
assert_eq 3 "$(q "SELECT count(*) FROM dj_source_ref")" "no lookup row for a reference none of whose rows landed"
assert_eq 4 "$(($(wc -l <djr.csv) - 1))" "the refused rows are in the rejects file"
impdj djr2.csv
assert_eq 0 "$(field inserted)" "refused first row: a rerun adds nothing"
assert_eq 3 "$(q "SELECT count(*) FROM dj")" "refused first row: no row twice"
sqlf <<'SQL'
CREATE TABLE ex (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, k int, v text)
    PARTITION BY RANGE (id);
SQL
printf 'created_at,k,v\n2020-01-01T00:00:00Z,1,old\n%s,1,new\n' "$(date -u -d '1 day ago' +%Y-%m-%dT%H:%M:%SZ)" >ex.csv
run_expect 0 "$V7FILL" import ex ex.csv --source-ref 'k:{k}' --retention 90d --rejects exr.csv \
    --late-rows exl.csv --no-progress --report-json r.json
assert_eq "2 1 0 1" "$(counts read inserted duplicates expired)" \
    "expired first row: the recent row of its reference is inserted"
assert_eq new "$(q "SELECT string_agg(v, ',') FROM ex")" "expired first row: the recent row is in the target"

# The lookup lost (dropped) while the target keeps the rows: a re-import counts
# them as duplicates, not as 23505 rejects, says so naming the lookup, and
# writes the lookup rows again.
sqlf <<'SQL'
CREATE TABLE lk (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL)
    PARTITION BY RANGE (id);
SQL
implk() { run_expect 0 "$V7FILL" import lk "$1" --batch-rows 2000 --rejects lkr.csv --no-progress --report-json r.json; }
implk ordered.csv
q "DROP TABLE lk_source_ref" >/dev/null
rm -f lkr.csv
implk shuffled.csv
assert_eq "30000 0 30000 0" "$(counts read inserted duplicates rejected)" \
    "lookup dropped: every row a duplicate, none rejected"
assert_contains "$OUT" 'were missing from its lookup table "public"."lk_source_ref"' "lookup dropped: a warning names the lookup"
assert_eq 1 "$(wc -l <lkr.csv)" "lookup dropped: the rejects file has its header only"
assert_eq 30000 "$(q "SELECT count(*) FROM lk_source_ref r JOIN lk USING (id)")" "lookup dropped: its rows are written again"
implk ordered.csv
assert_eq 30000 "$(field duplicates)" "lookup restored: the next re-import finds every row"
assert_not_contains "$OUT" "were missing from its lookup" "lookup restored: no warning"

# plan counts what import would count, across batches and files: a reference
# it counted once is a duplicate when it comes again.
python3 - <<'PY'
rows = [f"2024-01-01T00:00:00.{i:06d}Z,{i},x,y\n" for i in range(15000)]
open("rep.csv", "w").write("created_at,a,b,c\n" + "".join(rows + rows))
open("p1.csv", "w").write("created_at,a,b,c\n" + "".join(rows[:10000]))
open("p2.csv", "w").write("created_at,a,b,c\n" + "".join(rows[5000:15000]))
PY
sqlf <<'SQL'
CREATE TABLE rp (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, a text, b text, c text)
    PARTITION BY RANGE (id);
CREATE TABLE rp2 (LIKE rp INCLUDING ALL) PARTITION BY RANGE (id);
SQL
for case in "rp rep.csv" "rp2 p1.csv p2.csv"; do
    # shellcheck disable=SC2086
    run_expect 0 "$V7FILL" plan $case --rejects rpr.csv --no-progress --report-json r.json
    planned=$(counts read inserted duplicates rejected)
    # shellcheck disable=SC2086
    run_expect 0 "$V7FILL" import $case --rejects rpr.csv --no-progress --report-json r.json
    assert_eq "$(counts read inserted duplicates rejected)" "$planned" "plan = import for $case"
done
assert_eq "20000 15000 5000 0" "$planned" "two overlapping files: the overlap is duplicates"
