# v7fill on a Citus distributed target (tests/citus.sh: coordinator + two workers on this
# machine), against the same imports into the plain cluster of this run: the bundled example
# and a 200,000-row file land the same rows (count and a hash of all columns); a rerun inserts
# nothing; the lookup is distributed on its key, colocated with the target; kill -9 five times
# then rerun loses and doubles nothing; report counts the rows on the shards; maintain retires
# a window on every shard; a one-month id range prunes to that month on every shard; a refused
# partition (a worker down) fails with a hint and leaves nothing half-created; import --jobs 2
# survives the kills; a stream copies (--jobs 2) and applies inserts, updates and deletes;
# migrate from another database into a target distributed on id (its map distributed on
# legacy_id, an expand-mode child, changes between runs, --verify, a rerun) and into a target it
# creates (local, a migrate-mode child); migrate-mode children of a distributed target refused.
source "$(dirname "$0")/lib.sh"
if ! "$V7FILL_ROOT/tests/citus.sh" installed; then
    echo "skipped: Citus not installed"
    exit 0
fi
cd "$T_TMP"
export PGTZ=UTC
CITUS_PORT=${CITUS_PORT:-$((57000 + RANDOM % 2000 * 3))} \
    "$V7FILL_ROOT/tests/citus.sh" start >citus.env 2> >(grep -v "could not change directory" >&2)
CDIR=$(eval "$(cat citus.env)"; echo "$CITUS_DIR")
trap '"$V7FILL_ROOT/tests/citus.sh" stop "$CDIR"; rm -rf "$T_TMP"' EXIT
trap 'exit 143' TERM   # the EXIT trap then stops the three servers
trap 'exit 130' INT
# c CMD...: run CMD against the coordinator (the plain cluster stays in PG*)
c() { (eval "$(cat citus.env)"; "$@"); }
cq() { c psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
for run in "" c; do
    $run psql -X -q -v ON_ERROR_STOP=1 -f "$V7FILL_ROOT/examples/schema.sql" >/dev/null
    $run psql -X -q -v ON_ERROR_STOP=1 -f "$V7FILL_ROOT/contrib/sql/v7fill_uuid7.sql" >/dev/null
    $run psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE TABLE big (id uuid PRIMARY KEY, created_at timestamptz NOT NULL, account_id bigint NOT NULL,
                  kind text NOT NULL, amount numeric(12,2), note text) PARTITION BY RANGE (id);
CREATE TABLE k (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL,
                note text) PARTITION BY RANGE (id);
SQL
done
cq "SELECT create_distributed_table(t, 'id') FROM unnest(ARRAY['events', 'big', 'k']) t" >/dev/null
assert_eq 2 "$(cq "SELECT count(*) FROM pg_dist_node WHERE groupid > 0")" "two workers"

echo "$(date +%T) ---"
# --- the bundled example: the same rows as in the plain target
imp() { "$@" "$V7FILL" import events "$V7FILL_ROOT/examples/events.csv.zst" --id-column id --no-progress; }
run_expect 0 imp
plain_out=$OUT
run_expect 0 imp c
assert_contains "$OUT" "read=4044 inserted=4000 duplicates=40 rejected=4" "distributed: counts"
assert_contains "$plain_out" "read=4044 inserted=4000 duplicates=40 rejected=4" "plain: counts"
# Minted ids depend on each database's own key (v7fill.id_key): all columns but id, and the
# month each id falls in.
sig="SELECT count(*), md5(string_agg(concat_ws('|', date_trunc('month', uuid7_time(id)), created_at,
     account_id, kind, amount, payload, note), E'\n' ORDER BY created_at, account_id, kind, note))
     FROM events"
assert_eq "$(q "$sig")" "$(cq "$sig")" "example: distributed rows = plain rows"
assert_eq 35 "$(cq "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'events\_\_%'")" \
    "every partition distributed"
assert_eq "h|t" "$(cq "SELECT d.partmethod, d.colocationid = (SELECT colocationid FROM pg_dist_partition
                       WHERE logicalrelid = 'events'::regclass)
                       FROM pg_dist_partition d WHERE d.logicalrelid = 'events_source_ref'::regclass")" \
    "the lookup is hash-distributed, colocated with the target"
assert_eq "0|4000" "$(cq "SELECT pg_relation_size('events_source_ref'), sum(result::int8)
                         FROM run_command_on_shards('events_source_ref', 'SELECT count(*) FROM %s')")" \
    "the lookup's rows are on the shards, not on the coordinator"
run_expect 0 imp c
assert_contains "$OUT" "inserted=0 duplicates=4040 rejected=4" "rerun inserts nothing"
assert_eq 4000 "$(cq "SELECT count(*) FROM events")" "still 4000 rows"

echo "$(date +%T) ---"
# --- a table distributed after a first import: its local lookup is distributed by the next one
cq "CREATE TABLE m (LIKE events INCLUDING ALL) PARTITION BY RANGE (id)"
printf 'created_at,account_id,kind,note\n2025-03-01 10:00:00+00,1,a,x\n2025-03-02 10:00:00+00,2,b,y\n2025-03-03 10:00:00+00,3,c,z\n' >m.csv
run_expect 0 c "$V7FILL" import m m.csv --no-progress
assert_eq "f|3" "$(cq "SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'm_source_ref'::regclass),
                     (SELECT count(*) FROM m_source_ref)")" "a local target gets a local lookup"
cq "SELECT create_distributed_table('m', 'id'); SELECT truncate_local_data_after_distributing_table('m')" >/dev/null
run_expect 0 c "$V7FILL" import m m.csv --no-progress
assert_contains "$OUT" "inserted=0 duplicates=3" "the moved lookup still knows the rows"
assert_eq "t|0|3" "$(cq "SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'm_source_ref'::regclass),
                        pg_relation_size('m_source_ref'), sum(result::int8)
                        FROM run_command_on_shards('m_source_ref', 'SELECT count(*) FROM %s')")" \
    "the lookup moved to the shards, the coordinator's copy emptied"
# the key map (--key-map): distributed on legacy_id, not colocated with the uuid target
printf 'created_at,account_id,kind,note\n2025-03-04 10:00:00+00,11,a,x\n2025-03-05 10:00:00+00,-12,b,y\n2025-03-06 10:00:00+00,13,c,z\n' >km.csv
run_expect 0 c "$V7FILL" import m km.csv --key-map account_id --no-progress
assert_contains "$OUT" "inserted=3 duplicates=0" "key map: the rows land"
assert_eq "h|legacy_id|f|3" "$(cq "SELECT d.partmethod, column_to_column_name(d.logicalrelid, d.partkey),
                                 d.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'm'::regclass),
                                 (SELECT count(*) FROM m_id_map)
                            FROM pg_dist_partition d WHERE d.logicalrelid = 'm_id_map'::regclass")" \
    "key map: hash-distributed on legacy_id, in a colocation group of its own"
run_expect 0 c "$V7FILL" import m km.csv --key-map account_id --no-progress
assert_contains "$OUT" "inserted=0 duplicates=3" "key map: a rerun finds every key"

echo "$(date +%T) ---"
# --- plan and partitions --list on the distributed target
run_expect 0 c "$V7FILL" plan events "$V7FILL_ROOT/examples/events.csv.zst" --id-column id
assert_contains "$OUT" "4040" "plan sees the rows already imported"
run_expect 0 c "$V7FILL" partitions events --list
assert_contains "$OUT" "events__2024_06" "partitions --list"

echo "$(date +%T) ---"
# --- report: row counts from the shards (the coordinator's partitions are empty shells)
run_expect 0 c "$V7FILL" report events --json
echo "$OUT" >report.json
python3 - <<'PY' || fail "report does not count the rows on the shards"
import json
r = json.load(open("report.json"))
rows = [w["rows"] for w in r["windows"]]
assert len(rows) == 35, rows
assert abs(sum(rows) - 4000) <= 40 and min(rows) > 50, rows
PY
run_expect 0 c "$V7FILL" report events --exact --json
echo "$OUT" >report.json
python3 -c 'import json; r = json.load(open("report.json")); assert sum(w["rows"] for w in r["windows"]) == 4000' \
    || fail "report --exact"

echo "$(date +%T) ---"
# --- a file of 200,000 rows (ids given) over a year, in 4 batches that create its 12 monthly
# partitions: the same rows as in the plain target.  CITUS_BIG_ROWS=1000000 gives the file of
# docs/scaling.md's throughput figures (what is checked does not depend on the size; under
# ASan, making, importing twice and hashing 1M rows took 70 s of a loaded run).
BIG_ROWS=${CITUS_BIG_ROWS:-200000}
BIG_ROWS=$BIG_ROWS python3 - <<'PY'
import datetime as dt, os, random
random.seed(23)
n = int(os.environ["BIG_ROWS"])
t0 = int(dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
step = 365 * 86400 * 1000 // n
with open("big.csv", "w") as f:
    f.write("id,created_at,account_id,kind,amount,note\n")
    for i in range(n):
        ms = t0 + i * step
        b = bytearray(ms.to_bytes(6, "big") + random.randbytes(10))
        b[6] = 0x70 | (b[6] & 0x0F); b[8] = 0x80 | (b[8] & 0x3F)
        h = b.hex()
        u = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        ts = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        f.write(f"{u},{ts}+00,{i % 977},k{i % 7},{i % 10000}.{i % 100:02d},\"n {i}\"\n")
PY
bigimp() { "$@" "$V7FILL" import big big.csv --id-column id --batch-rows 50000 --no-progress; }
s=$(date +%s%N); run_expect 0 bigimp; plain_ms=$((($(date +%s%N) - s) / 1000000))
s=$(date +%s%N); run_expect 0 bigimp c; dist_ms=$((($(date +%s%N) - s) / 1000000))
assert_contains "$OUT" "read=$BIG_ROWS inserted=$BIG_ROWS duplicates=0 rejected=0" "$BIG_ROWS rows: distributed counts"
echo "$BIG_ROWS rows: plain ${plain_ms} ms, distributed (3 nodes, one machine) ${dist_ms} ms"
bsig="SELECT count(*), md5(string_agg(b::text, E'\n' ORDER BY id)) FROM big b"
assert_eq "$(q "$bsig")" "$(cq "$bsig")" "$BIG_ROWS rows: distributed rows = plain rows"

echo "$(date +%T) ---"
# --- a one-month id range prunes to that month on every shard
plan=$(cq "SET citus.explain_all_tasks = on;
           EXPLAIN (COSTS OFF) SELECT count(*) FROM big
            WHERE id >= uuid7_floor('2025-03-01') AND id < uuid7_floor('2025-04-01')")
grep -q "Task Count: 4" <<<"$plan" || fail "one task per shard: $plan"
assert_eq 4 "$(echo "$plan" | grep -Ec 'Scan.* on big__2025_03_[0-9]+')" "March's shard scanned on every shard"
assert_eq 0 "$(echo "$plan" | grep -E 'Scan.* on big__' | grep -vc 'big__2025_03_')" "no other month scanned"

echo "$(date +%T) ---"
# --- kill -9 five times with --jobs 2 (mid-import: after a random number of further batches), then rerun
# (100,000 rows: the five targets take at most 15,000, and under a sanitizer build on a loaded
# machine the progress polls lag far behind the import; with 30,000 a run once finished before
# its kill)
python3 - <<'PY'
with open("k.csv", "w") as f:
    f.write("n,created_at,note\n")
    for i in range(100000):
        f.write(f"{i},2025-{1 + i % 12:02d}-{1 + i % 28:02d} 10:{i % 60:02d}:00+00,\"note {i}\"\n")
PY
run_expect 0 c "$V7FILL" partitions k --from 2025-01-01 --to 2026-01-01
kread() { cq "SELECT coalesce(max(rows_read), 0) FROM v7fill.checkpoint WHERE target_table = 'k'"; }
kills=0
for attempt in $(seq 1 5); do
    target=$(($(kread) + 500 + RANDOM % 2500))
    c "$V7FILL" import k k.csv --batch-rows 500 --jobs 2 --no-progress --no-analyze >run.out 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && [ "$(kread)" -lt "$target" ]; do sleep 0.02; done
    sleep "0.0$((RANDOM % 10))"
    kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    wait "$pid" 2>/dev/null || true
done
echo "killed $kills times; $(cq "SELECT count(*) FROM k") rows in before the rerun"
[ "$kills" -ge 5 ] || fail "only $kills kills landed"
run_expect 0 c "$V7FILL" import k k.csv --batch-rows 500 --jobs 2 --no-progress
assert_eq "100000|100000" "$(cq "SELECT count(*), count(DISTINCT n) FROM k")" "every row once after kills"
assert_eq "100000|100000|0|t" "$(cq "SELECT rows_read, inserted + duplicates, rejected, finished
                                   FROM v7fill.checkpoint WHERE target_table = 'k'")" \
    "checkpoint balances across the kills"

echo "$(date +%T) ---"
# --- stream into a distributed target (the source: a database of the plain cluster): the copy
# on two writers, then inserts, updates and deletes found through the distributed lookup
SRCDB="${PGDATABASE}_src"
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$SRCDB\"" >/dev/null
psql -X -q -d postgres -c "CREATE DATABASE \"$SRCDB\"" >/dev/null
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRCDB" -c "$1"; }
qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount numeric(12,2), note text);
    INSERT INTO orders SELECT g, timestamptz '2025-01-01' + g * interval '1 hour', g, 'n' || g
      FROM generate_series(1, 3000) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
cq "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                            created_at timestamptz NOT NULL, amount numeric(12,2), note text)
    PARTITION BY RANGE (id)" 
cq "SELECT create_distributed_table('orders_v7', 'id')" >/dev/null
src="dbname=$SRCDB host=$PGHOST port=$PGPORT"
cstream() { c "$V7FILL" stream orders_v7 --source "$src" --from public.orders --publication pub \
                --slot s_citus --map id=legacy_id --until-caught-up "$@"; }
sdigest="SELECT count(*), md5(string_agg(concat_ws('|', id, created_at, amount, note), ',' ORDER BY id)) FROM orders"
tdigest="SELECT count(*), md5(string_agg(concat_ws('|', legacy_id, created_at, amount, note), ',' ORDER BY legacy_id)) FROM orders_v7"
run_expect 0 cstream --jobs 2 --batch-rows 500
assert_eq "$(qs "$sdigest")" "$(cq "$tdigest")" "stream: the copy into the distributed target equals the source"
qs "INSERT INTO orders SELECT g, timestamptz '2025-06-01' + g * interval '1 minute', g, 'new'
      FROM generate_series(3001, 3200) g;
    UPDATE orders SET amount = -amount, note = 'upd' WHERE id % 10 = 0;
    DELETE FROM orders WHERE id % 7 = 0"
run_expect 0 cstream
assert_contains "$OUT" "updated=" "stream: updates applied"
assert_not_contains "$OUT" "set-wise updates and deletes refused" "stream: set-wise updates and deletes run on the shards"
assert_eq "$(qs "$sdigest")" "$(cq "$tdigest")" "stream: inserts, updates, deletes applied on the shards"
assert_eq "$(cq "SELECT count(*) FROM orders_v7")" \
    "$(cq "SELECT sum(result::int8) FROM run_command_on_shards('orders_v7_source_ref', 'SELECT count(*) FROM %s')")" \
    "stream: the distributed lookup holds one row per target row"
run_expect 0 cstream
assert_eq "$(qs "$sdigest")" "$(cq "$tdigest")" "stream: a rerun changes nothing"
psql -X -q -d postgres -c "SELECT pg_drop_replication_slot('s_citus')" >/dev/null

echo "$(date +%T) ---"
# --- migrate (two databases: the source in $SRCDB, the target on the coordinator). A target
# distributed on id before the first run (from --dry-run's DDL, as docs/scaling.md says) is
# used as it is, its map distributed on legacy_id; a target migrate creates stays local.
drop_src_slots() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                                   WHERE database = '$SRCDB' AND NOT active" >/dev/null 2>&1 || true
}
trap 'drop_src_slots; "$V7FILL_ROOT/tests/citus.sh" stop "$CDIR"; rm -rf "$T_TMP"' EXIT
# 3,000 parents with gaps in the key; 2 NULL and 3 pre-1970 times (rejected with a reason);
# 6,000 children, every 100th with a NULL key, some of rejected parents
qs "CREATE TABLE parents (id integer PRIMARY KEY, created_at timestamptz, amount numeric(12,2), note text);
    INSERT INTO parents SELECT g * 3 + g % 2, timestamptz '2024-01-01' + g * interval '3 hours 7 minutes 1.001 s',
                               g % 100, 'p' || g FROM generate_series(1, 3000) g;
    UPDATE parents SET created_at = NULL WHERE id IN (30, 34);
    UPDATE parents SET created_at = timestamptz '1969-06-01' WHERE id IN (60, 64, 66);
    CREATE TABLE kids (id serial PRIMARY KEY, parent_id integer REFERENCES parents (id) ON DELETE CASCADE, qty int);
    INSERT INTO kids (parent_id, qty)
      SELECT CASE WHEN g % 100 = 0 THEN NULL ELSE (g % 3000 + 1) * 3 + (g % 3000 + 1) % 2 END, g
        FROM generate_series(1, 6000) g"
mig() { c "$V7FILL" migrate --source "$src" --from public.parents --key id --time-column created_at --into parents_v7 "$@"; }
psd="SELECT count(*), md5(string_agg(concat_ws('|', id, created_at, amount, note), ',' ORDER BY id))
     FROM parents WHERE created_at >= 'epoch'"
ptd="SELECT count(*), md5(string_agg(concat_ws('|', legacy_id, created_at, amount, note), ',' ORDER BY legacy_id))
     FROM parents_v7"
# each kid's parent_id_uuid is the map's id of its parent_id (rows of rejected parents: none)
kids_pairs() {
    local keys
    keys=$(qs "SELECT string_agg(DISTINCT parent_id::text, ',') FROM kids WHERE parent_id_uuid IS NOT NULL")
    assert_eq "$(qs "SELECT md5(string_agg(p, ',' ORDER BY p)) FROM (SELECT DISTINCT parent_id || ':' || parent_id_uuid AS p
                     FROM kids WHERE parent_id_uuid IS NOT NULL) x")" \
        "$(cq "SELECT md5(string_agg(legacy_id || ':' || id, ',' ORDER BY legacy_id || ':' || id))
               FROM parents_v7_id_map WHERE legacy_id IN ($keys)")" "$1: each child key's uuid is its parent's in the map"
    assert_eq "$(qs "SELECT count(*) FROM kids k JOIN parents p ON p.id = k.parent_id
                     WHERE p.created_at IS NULL OR p.created_at < 'epoch'")" \
        "$(qs "SELECT count(*) FROM kids WHERE parent_id IS NOT NULL AND parent_id_uuid IS NULL")" \
        "$1: only the children of rejected parents have no uuid"
}
run_expect 0 mig --dry-run
# (sed reads a here-string: sed quitting early must not cut an echo writing to it, SIGPIPE under
# pipefail ending the test with no message)
sed -n '/^-- the map/q;/^CREATE TABLE/,$p' <<<"$OUT" | grep -v '^--' >parents_v7.sql
assert_contains "$(cat parents_v7.sql)" "PARTITION BY RANGE (id)" "migrate --dry-run: the target's DDL"
c psql -X -q -v ON_ERROR_STOP=1 -f parents_v7.sql >/dev/null
cq "SELECT create_distributed_table('parents_v7', 'id')" >/dev/null
run_expect 3 mig --child 'public.kids(parent_id)' --child-mode migrate
assert_contains "$OUT" "Citus distributed table, and --child-mode migrate" "migrate: migrate-mode children refused on a distributed target, saying why"
assert_eq "" "$(cq "SELECT to_regclass('parents_v7_id_map')")" "migrate: a refused run makes nothing"
run_expect 0 mig --child 'public.kids(parent_id)' --batch-rows 500
echo "$OUT"
assert_contains "$OUT" "phase follow" "migrate: the copy into the distributed target finished"
assert_contains "$OUT" "rejected: 5 rows" "migrate: the NULL and pre-1970 times rejected"
assert_contains "$OUT" "missing event time" "migrate: the NULL time's reason"
assert_contains "$OUT" "before 1970-01-01" "migrate: the pre-1970 time's reason"
assert_contains "$OUT" "child public.kids(parent_id): rows=6000 filled=" "migrate: the child filled"
assert_contains "$OUT" "null_keys=60 orphans=" "migrate: the child's NULL keys counted apart"
assert_eq "$(qs "$psd")" "$(cq "$ptd")" "migrate: the distributed target equals the source (count and hash)"
kids_pairs "migrate"
# a writer: inserts, updates, deletes (children deleted with their parents), new children
qs "INSERT INTO parents SELECT g, timestamptz '2025-06-01' + g * interval '1 minute', 1, 'new' FROM generate_series(20001, 20100) g;
    UPDATE parents SET amount = amount + 1000, note = 'upd' WHERE id % 10 = 1;
    DELETE FROM parents WHERE id % 13 = 0;
    INSERT INTO kids (parent_id, qty) SELECT g, 1 FROM generate_series(20001, 20050) g WHERE g % 13 <> 0"
run_expect 0 mig --verify
echo "$OUT"
assert_contains "$OUT" "verdict: OK" "migrate --verify on Citus: OK"
assert_eq 1 "$(echo "$OUT" | grep -cE '^public\.parents_v7 +values +[0-9]+ +[0-9]+ +OK')" "migrate --verify: the values compared"
assert_eq 1 "$(echo "$OUT" | grep -cE '^public\.kids +join pairs +[0-9]+ +[0-9]+ +OK')" "migrate --verify: the child's join pairs"
assert_eq "$(qs "$psd")" "$(cq "$ptd")" "migrate: inserts, updates, deletes applied on the shards"
kids_pairs "migrate after the writer"
assert_eq "$(cq "SELECT count(*) FROM parents_v7")" \
    "$(cq "SET citus.enable_repartition_joins = on; SELECT count(*) FROM parents_v7 t JOIN parents_v7_id_map m USING (legacy_id, id)")" \
    "migrate: one map row per target row"
before=$(cq "$ptd")
run_expect 0 mig
assert_contains "$OUT" "read=0 " "migrate: a rerun reads nothing"
assert_eq "$before" "$(cq "$ptd")" "migrate: a rerun changes nothing"
run_expect 0 c "$V7FILL" migrate --into parents_v7 --verify
assert_contains "$OUT" "verdict: OK" "migrate --into --verify"
k=$(cq "SELECT min(legacy_id) FROM parents_v7 WHERE legacy_id > 1000")
cq "UPDATE parents_v7 SET note = 'changed' WHERE legacy_id = $k"
run_expect 1 c "$V7FILL" migrate --into parents_v7 --verify
assert_contains "$OUT" "changed 1 (legacy keys $k)" "migrate --verify on Citus: a changed column names its row"
cq "UPDATE parents_v7 SET note = $(qs "SELECT quote_literal(note) FROM parents WHERE id = $k") WHERE legacy_id = $k"
# distributed as docs/scaling.md says: the target and every partition on id, the map on
# legacy_id in a colocation group of its own, without UNIQUE on id, its rows on the shards
assert_eq "h|id" "$(cq "SELECT partmethod, column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition
                        WHERE logicalrelid = 'parents_v7'::regclass")" "migrate: the target hash-distributed on id"
assert_eq 0 "$(cq "SELECT count(*) FROM pg_inherits i WHERE inhparent = 'parents_v7'::regclass
                   AND NOT EXISTS (SELECT FROM pg_dist_partition d WHERE d.logicalrelid = i.inhrelid)")" \
    "migrate: every partition distributed"
assert_eq "h|legacy_id|f|0" "$(cq "SELECT d.partmethod, column_to_column_name(d.logicalrelid, d.partkey),
        d.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'parents_v7'::regclass),
        (SELECT count(*) FROM pg_constraint WHERE conrelid = d.logicalrelid AND contype = 'u')
        FROM pg_dist_partition d WHERE d.logicalrelid = 'parents_v7_id_map'::regclass")" \
    "migrate: the map hash-distributed on legacy_id, colocated with nothing, no UNIQUE on id"
assert_eq "0|$(cq "SELECT count(*) FROM parents_v7")" "$(cq "SELECT pg_relation_size('parents_v7_id_map'),
        sum(result::int8) FROM run_command_on_shards('parents_v7_id_map', 'SELECT count(*) FROM %s')")" \
    "migrate: the map's rows on the shards"
run_expect 0 c "$V7FILL" migrate --into parents_v7 --status
grep -qE '^ +phase +follow$' <<<"$OUT" || fail "migrate --status: $OUT"
# --switch between two databases renames the source table only; a distributed target has no way back
run_expect 0 c "$V7FILL" migrate --into parents_v7 --switch
assert_contains "$OUT" "the source table is now public.parents_legacy" "migrate --switch between two databases: the source renamed"
run_expect 3 c "$V7FILL" migrate --into parents_v7 --reverse
assert_contains "$OUT" "it is a Citus distributed table" "migrate --reverse between two databases, a distributed target: refused, saying why"

# A target left local by a first run, distributed afterwards: the next run distributes its map
# (dropping its UNIQUE (id)); a smallint key
qs "CREATE TABLE solo (id smallint PRIMARY KEY, created_at timestamptz NOT NULL, v text);
    INSERT INTO solo SELECT g, timestamptz '2024-01-01' + g * interval '1 day', 'v' || g FROM generate_series(1, 200) g"
solo() { c "$V7FILL" migrate --source "$src" --from public.solo --key id --time-column created_at --into solo_v7 "$@"; }
run_expect 0 solo
cq "SET client_min_messages = warning; SELECT create_distributed_table('solo_v7', 'id')" >/dev/null
qs "UPDATE solo SET v = 'u' WHERE id < 20; DELETE FROM solo WHERE id > 190"
run_expect 0 solo --verify
assert_contains "$OUT" "verdict: OK" "migrate into a target distributed after its first run: verify OK"
assert_eq "$(qs "SELECT count(*), md5(string_agg(concat_ws('|', id, created_at, v), ',' ORDER BY id)) FROM solo")" \
    "$(cq "SELECT count(*), md5(string_agg(concat_ws('|', legacy_id, created_at, v), ',' ORDER BY legacy_id)) FROM solo_v7")" \
    "migrate into a target distributed after its first run: equal to the source"
assert_eq "h|legacy_id|0" "$(cq "SELECT partmethod, column_to_column_name(logicalrelid, partkey),
        (SELECT count(*) FROM pg_constraint WHERE conrelid = logicalrelid AND contype = 'u')
        FROM pg_dist_partition WHERE logicalrelid = 'solo_v7_id_map'::regclass")" \
    "migrate: the map of a target distributed later is distributed on legacy_id, its UNIQUE (id) dropped"

# In one database (the source a local table on the coordinator) into a distributed target:
# copy, --verify and the switch run; the way back is refused (the coordinator's slot sees none
# of a distributed table's changes), as is a source that is itself a Citus table
cq "CREATE TABLE ord (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, v text);
    INSERT INTO ord SELECT g, timestamptz '2024-01-01' + g * interval '1 hour', 'v' || g FROM generate_series(1, 300) g;
    CREATE TABLE dsrc (id bigint PRIMARY KEY, created_at timestamptz NOT NULL)"
cq "SELECT create_distributed_table('dsrc', 'id')" >/dev/null
run_expect 3 c "$V7FILL" migrate --from public.dsrc --key id --time-column created_at --into dsrc_v7
assert_contains "$OUT" "the source public.dsrc is a Citus table" "migrate from a distributed source: refused, saying why"
omig() { c "$V7FILL" migrate --from public.ord --key id --time-column created_at --into ord_v7 "$@"; }
run_expect 0 omig --dry-run
sed -n '/^-- the map/q;/^CREATE TABLE/,$p' <<<"$OUT" | grep -v '^--' | c psql -X -q -v ON_ERROR_STOP=1 >/dev/null
cq "SELECT create_distributed_table('ord_v7', 'id')" >/dev/null
cq "UPDATE ord SET v = 'u' WHERE id < 10"
run_expect 0 omig --verify
assert_contains "$OUT" "verdict: OK" "migrate in one database into a distributed target: verify OK"
run_expect 0 c "$V7FILL" migrate --into ord_v7 --switch
assert_contains "$OUT" "switched public.ord: it is the UUIDv7 table now" "migrate --switch in one database on Citus"
assert_contains "$OUT" "way back: none" "migrate --switch of a distributed target: one way, said so"
assert_eq 0 "$(c psql -X -At -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%_rev'")" \
    "migrate --switch of a distributed target: no way back's slot keeping WAL"
run_expect 3 c "$V7FILL" migrate --into ord_v7 --reverse
assert_contains "$OUT" "it is a Citus distributed table" "migrate --reverse from a distributed table: refused, saying why"

# A target migrate creates: local on the coordinator (as import and stream leave a local target),
# its map local; a child in --child-mode migrate
qs "CREATE TABLE things (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, name text);
    INSERT INTO things SELECT g * 2, timestamptz '2024-03-01' + g * interval '1 day', 't' || g FROM generate_series(1, 300) g;
    CREATE TABLE parts (id bigint PRIMARY KEY, thing_id bigint REFERENCES things (id), created_at timestamptz NOT NULL);
    INSERT INTO parts SELECT g, (g % 300 + 1) * 2, timestamptz '2024-03-02' + g * interval '1 hour' FROM generate_series(1, 900) g"
run_expect 0 c "$V7FILL" migrate --source "$src" --from public.things --key id --time-column created_at --into things_v7 \
    --child 'public.parts(thing_id)' --child-mode migrate --verify
echo "$OUT"
assert_contains "$OUT" "created the target public.things_v7" "migrate: a new target"
assert_contains "$OUT" "verdict: OK" "migrate --child-mode migrate into a local target on Citus: verify OK"
assert_eq "300|900" "$(cq "SELECT (SELECT count(*) FROM things_v7), (SELECT count(*) FROM parts_v7 WHERE thing_id_uuid IS NOT NULL)")" \
    "migrate: the parent and the child migrated, every child key resolved"
assert_eq 0 "$(cq "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text IN ('things_v7', 'things_v7_id_map', 'parts_v7', 'parts_v7_id_map')
                   OR logicalrelid::text LIKE 'things\_v7\_\_%'")" "migrate: a target migrate creates stays local, its map too"
drop_src_slots

echo "$(date +%T) ---"
# --- maintain retires a window on every shard
shards() { cq "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid::text = '$1'"; }
on_workers() {
    local n=0 d
    for d in w1 w2; do
        # Citus hides shards from pg_class unless asked
        n=$((n + $(PGOPTIONS="-c citus.override_table_visibility=off" psql -X -At -h "$CDIR/$d/sock" -p "$(( $(cat "$CDIR/port") + ${d#w} ))" \
            -d postgres -c "SELECT count(*) FROM pg_class WHERE relname LIKE '$1\_%' AND relkind = 'r'")))
    done
    echo "$n"
}
assert_eq 4 "$(shards events__2023_12)" "the oldest window has its shards"
assert_eq 4 "$(on_workers events__2023_12)" "its shard tables on the workers"
run_expect 0 c "$V7FILL" maintain events --retention 365d --ahead 0 --quiet-period 0s --detach-only --dry-run
assert_contains "$OUT" "Citus does not support DETACH CONCURRENTLY" "maintain says why plain DETACH"
old_rows=$(cq "SELECT count(*) FROM events WHERE id < uuid7_floor(date_trunc('month', now() - interval '365 days'))")
total=$(cq "SELECT count(*) FROM events")
run_expect 0 c "$V7FILL" maintain events --retention 365d --ahead 0 --quiet-period 0s
assert_contains "$OUT" "dropped public.events__2023_12" "maintain drops the oldest window"
assert_eq 0 "$(shards events__2023_12)" "no shard left in the metadata"
assert_eq 0 "$(on_workers events__2023_12)" "no shard table left on the workers"
assert_eq $((total - old_rows)) "$(cq "SELECT count(*) FROM events")" "only the retired windows' rows gone"

echo "$(date +%T) ---"
# --- Citus refuses (a worker is down): a clear error, no half-created partition
w2_data="$CDIR/w2/data"
runuser -u "$(stat -c %U "$w2_data")" -- "$PGBIN/pg_ctl" -D "$w2_data" -m fast -w stop >/dev/null
before=$(cq "SELECT count(*) FROM pg_inherits WHERE inhparent = 'k'::regclass")
run_expect 5 c "$V7FILL" partitions k --from 2030-01-01 --to 2030-02-01
assert_contains "$OUT" "Citus refused this step on the distributed table public.k" "the hint"
assert_eq "$before" "$(cq "SELECT count(*) FROM pg_inherits WHERE inhparent = 'k'::regclass")" "nothing attached"
assert_eq 0 "$(cq "SELECT count(*) FROM pg_class WHERE relname = 'k__2030_01'")" "no table left behind"
runuser -u "$(stat -c %U "$w2_data")" -- "$PGBIN/pg_ctl" -D "$w2_data" -l "$CDIR/w2/server.log" -w start >/dev/null
run_expect 0 c "$V7FILL" partitions k --from 2030-01-01 --to 2030-02-01
assert_eq 4 "$(shards k__2030_01)" "created and distributed once the worker is back"
