# --resnapshot (issue 20): a slot invalidated for real on the source (max_slot_wal_keep_size
# small, WAL switched past it, CHECKPOINT: wal_status lost) stops the stream with an error
# naming --resnapshot; --resnapshot drops it, creates it again and copies anew: target =
# source, no row twice, the duplicates counted and the stream's counts going on and balancing.
# The same for a slot dropped under a stopped stream; a valid slot is kept.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
SLOT="s_${T_NAME}"
drop_slots() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$SLOT' AND NOT active" >/dev/null
}
# keep_size 1MB | keep_size RESET: max_slot_wal_keep_size of the cluster (the source's)
keep_size() {
    local set="SET max_slot_wal_keep_size = '$1'"
    [ "$1" = RESET ] && set="RESET max_slot_wal_keep_size"
    psql -X -q -d postgres -c "ALTER SYSTEM $set" -c "SELECT pg_reload_conf()" >/dev/null
}
drop_slots
source_db_fresh
trap 'keep_size RESET; drop_slots; rm -rf "$T_TMP"' EXIT

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int);
    INSERT INTO orders SELECT g, now() - (g || ' minutes')::interval, g FROM generate_series(1, 500) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id)"
args=(orders_v7 --source "dbname=$SRC" --from public.orders --publication pub --slot "$SLOT"
      --map id=legacy_id --until-caught-up)
wal_status() { q "SELECT coalesce((SELECT wal_status FROM pg_replication_slots WHERE slot_name = '$SLOT'), 'none')"; }
src_sum() { qs "SELECT count(*) || ' ' || md5(string_agg(id || ',' || amount || ',' || created_at, ';' ORDER BY id)) FROM orders"; }
tgt_sum() { q "SELECT count(*) || ' ' || md5(string_agg(legacy_id || ',' || amount || ',' || created_at, ';' ORDER BY legacy_id)) FROM orders_v7"; }
# the stream's counts: read = inserted + duplicates + rejected + expired (inserts only here)
counts() { q "SELECT read, inserted, duplicates, rejected + expired FROM v7fill.stream WHERE slot = '$SLOT'"; }
balanced() {
    local c; c=$(counts)
    IFS='|' read -r r i d x <<<"$c"
    assert_eq "$r" "$((i + d + x))" "$1: rows read = inserted + duplicates + rejected ($c)"
}
no_twice() { assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM orders_v7 GROUP BY 1 HAVING count(*) > 1) d")" "$1: no row twice"; }

run_expect 0 "$V7FILL" stream "${args[@]}"
assert_eq "$(src_sum)" "$(tgt_sum)" "the first copy: target = source"

# ---- the slot invalidated for real while the stream is stopped
qs "INSERT INTO orders SELECT g, now() - (g || ' seconds')::interval, g FROM generate_series(501, 600) g"
keep_size 1MB
for _ in $(seq 1 10); do
    qs "CREATE TABLE IF NOT EXISTS filler (x text); INSERT INTO filler SELECT repeat('x', 500) FROM generate_series(1, 2000); SELECT pg_switch_wal()" >/dev/null
    qs "SELECT pg_switch_wal()" >/dev/null
    q "CHECKPOINT"
    [ "$(wal_status)" = lost ] && break
done
assert_eq lost "$(wal_status)" "the slot is invalidated on the source"
keep_size RESET

run_expect 3 "$V7FILL" stream "${args[@]}"
assert_contains "$OUT" "invalidated" "the stream stops on the invalidated slot"
assert_contains "$OUT" "--resnapshot" "the error names --resnapshot"
assert_eq lost "$(wal_status)" "without --resnapshot the slot is left alone"

run_expect 0 "$V7FILL" stream "${args[@]}" --resnapshot
assert_contains "$OUT" "dropped the invalidated slot" "--resnapshot says what it did"
assert_eq reserved "$(wal_status)" "the slot was created again"
assert_eq "$(src_sum)" "$(tgt_sum)" "after --resnapshot: target = source"
no_twice "after --resnapshot"
assert_eq "1100|600|500|0" "$(counts)" "the counts go on: 500 + 600 read, the 500 already there are duplicates"
balanced "after --resnapshot"

# ---- the stream goes on streaming from the new slot
qs "INSERT INTO orders VALUES (700, now(), 7)"
run_expect 0 "$V7FILL" stream "${args[@]}"
assert_eq "$(src_sum)" "$(tgt_sum)" "changes after --resnapshot are streamed"
assert_eq "1101|601|500|0" "$(counts)" "... and counted once"

# ---- a valid slot: --resnapshot keeps it and copies nothing
run_expect 0 "$V7FILL" stream "${args[@]}" --resnapshot
assert_contains "$OUT" "is valid" "--resnapshot says the slot is kept"
assert_eq "1101|601|500|0" "$(counts)" "nothing copied again"

# ---- a slot lost altogether (dropped under the stopped stream)
drop_slots
assert_eq none "$(wal_status)" "the slot is gone"
qs "INSERT INTO orders SELECT g, now(), g FROM generate_series(801, 850) g"
run_expect 3 "$V7FILL" stream "${args[@]}"
assert_contains "$OUT" "--resnapshot" "the error for a missing slot names --resnapshot"
run_expect 0 "$V7FILL" stream "${args[@]}" --resnapshot
assert_eq "$(src_sum)" "$(tgt_sum)" "a lost slot re-created: target = source"
no_twice "after the second --resnapshot"
assert_eq "1752|651|1101|0" "$(counts)" "the second copy: 651 read, 601 duplicates, 50 inserted"
balanced "after the second --resnapshot"

run_expect 2 "$V7FILL" stream "${args[@]}" --resnapshot --no-snapshot
assert_contains "$OUT" "--no-snapshot" "--resnapshot with --no-snapshot is a usage error"
echo "ok"
