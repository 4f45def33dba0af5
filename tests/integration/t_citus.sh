# v7fill on a Citus distributed target (tests/citus.sh: coordinator + two workers on this
# machine), against the same imports into the plain cluster of this run: the bundled example
# and a 1M-row file land the same rows (count and a hash of all columns); a rerun inserts
# nothing; the lookup is distributed on its key, colocated with the target; kill -9 five times
# then rerun loses and doubles nothing; report counts the rows on the shards; maintain retires
# a window on every shard; a one-month id range prunes to that month on every shard; a refused
# partition (a worker down) fails with a hint and leaves nothing half-created; import --jobs 2
# survives the kills; a stream copies (--jobs 2) and applies inserts, updates and deletes.
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
# --- a 1M-row file (ids given): the same rows as in the plain target
python3 - <<'PY'
import datetime as dt, random
random.seed(23)
t0 = int(dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)
step = 365 * 86400 * 1000 // 1000000
with open("big.csv", "w") as f:
    f.write("id,created_at,account_id,kind,amount,note\n")
    for i in range(1000000):
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
assert_contains "$OUT" "read=1000000 inserted=1000000 duplicates=0 rejected=0" "1M: distributed counts"
echo "1M rows: plain ${plain_ms} ms, distributed (3 nodes, one machine) ${dist_ms} ms"
bsig="SELECT count(*), md5(string_agg(b::text, E'\n' ORDER BY id)) FROM big b"
assert_eq "$(q "$bsig")" "$(cq "$bsig")" "1M: distributed rows = plain rows"

echo "$(date +%T) ---"
# --- a one-month id range prunes to that month on every shard
plan=$(cq "SET citus.explain_all_tasks = on;
           EXPLAIN (COSTS OFF) SELECT count(*) FROM big
            WHERE id >= uuid7_floor('2025-03-01') AND id < uuid7_floor('2025-04-01')")
echo "$plan" | grep -q "Task Count: 4" || fail "one task per shard: $plan"
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
