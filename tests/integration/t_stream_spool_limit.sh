# A source transaction applied as it streams in keeps a spool of what it received, so that,
# given up, it goes on in place; that spool is kept up to 1 GiB. Past it the spool goes (one
# log line says so), and a give-up then restarts the stream, which receives the transaction
# again, spools it from its start and applies it once at its commit, after the transaction
# that made it give up.
# The 1.1 GiB are 1,100 rows with a 1 MiB note each: compressed in the source's TOAST (a small
# WAL), sent whole by the decoder; the target has no note column (--ignore-column note), so
# only the stream carries the bytes.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db
SRCINFO="dbname=$SRC options='-c logical_decoding_work_mem=64kB'"
qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int) PARTITION BY RANGE (id)"
mkdir spool
stream() {
    TMPDIR=$T_TMP/spool "$V7FILL" stream orders_v7 --source "$SRCINFO" --from public.orders \
        --publication pub --slot "$SLOT" --map id=legacy_id --ignore-column note "$@"
}
counter() { sed -n "s/.*[ ]$1=\([0-9]*\).*/\1/p" <<<"$OUT" | tail -1; }
digest_src() { qs "SELECT count(*), coalesce(sum(id), 0), coalesce(sum(amount), 0) FROM orders"; }
digest_tgt() { q "SELECT count(*), coalesce(sum(legacy_id), 0), coalesce(sum(amount), 0) FROM orders_v7"; }

qs "INSERT INTO orders SELECT g, now() - g * interval '1 minute', g, 'seed' FROM generate_series(1, 100) g"
run_expect 0 stream --until-caught-up
assert_eq "$(digest_src)" "$(digest_tgt)" "the initial copy"

# 1,100 rows of 1 MiB (a distinct value each), then another session commits one row, then the
# large transaction commits: the stream meets that commit after the spool passed 1 GiB.
cat >big.sql <<EOF
BEGIN;
INSERT INTO orders SELECT g, now(), g, repeat(md5(g::text), 32768) FROM generate_series(1001, 2100) g;
\! psql -X -q -d "$SRC" -c "INSERT INTO orders VALUES (900001, now(), 7, 'other')"
COMMIT;
EOF
sqlf -d "$SRC" -f big.sql
assert_eq 1048576 "$(qs "SELECT length(note) FROM orders WHERE id = 2100")" "a note is 1 MiB"
assert_eq 1 "$(qs "SELECT (sum(pg_column_size(note)) < 100 * 1024 * 1024)::int FROM orders")" \
    "the notes are compressed in the source (the WAL stays small)"

run_expect 0 stream --until-caught-up -v
assert_contains "$OUT" "its spool passed 1 GiB and is no longer kept" "the spool's end is logged ($OUT)"
assert_contains "$OUT" "met a transaction that committed meanwhile" "the give-up says why ($OUT)"
assert_eq 1 "$(counter streamed_restarts)" "given up without its spool, the stream restarted once ($OUT)"
assert_eq 1 "$(counter streamed_spooled)" "received again, it was spooled and applied at its commit ($OUT)"
assert_eq 0 "$(counter streamed_to_spool)" "it did not go on in place ($OUT)"
assert_eq "$(digest_src)" "$(digest_tgt)" "the target equals the source"
assert_eq 1100 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id BETWEEN 1001 AND 2100")" \
    "every row of the large transaction, once"
assert_eq 1 "$(q "SELECT count(*) FROM orders_v7 WHERE legacy_id = 900001")" "the other transaction's row"
assert_eq "" "$(ls -A spool)" "no spool file is left behind"

# Nothing more to apply: the next run finds the target current.
run_expect 0 stream --until-caught-up
assert_eq "$(digest_src)" "$(digest_tgt)" "a rerun changes nothing"
echo ok
