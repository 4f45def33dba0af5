# kill -9 of v7fill stream at 20 random moments (half of them with --jobs 2)
# while a writer inserts,
# updates and deletes on the source: after the last restart catches up, the
# target equals the source exactly (no row twice, none missing, every update
# and delete applied once), and a monitor sampling the slot's
# confirmed_flush_lsn never saw it ahead of the position stored in the target.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
SRC="${PGDATABASE}_src"
SLOT="s_${T_NAME}"
drop_slots() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$SLOT' AND NOT active" >/dev/null || true
}
drop_slots
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$SRC\"" >/dev/null
psql -X -q -d postgres -c "CREATE DATABASE \"$SRC\"" >/dev/null
qs() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$SRC" -c "$1"; }

qs "CREATE TABLE orders (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, amount int, note text);
    INSERT INTO orders SELECT g, now() - (g || ' seconds')::interval, g, 'n' FROM generate_series(1, 20000) g;
    CREATE PUBLICATION pub FOR TABLE orders;"
q "CREATE TABLE orders_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                           created_at timestamptz NOT NULL, amount int, note text)
   PARTITION BY RANGE (id)"
digest_src() { qs "SELECT count(*), md5(string_agg(id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY id)) FROM orders"; }
digest_dst() { q "SELECT count(*), md5(string_agg(legacy_id||'|'||created_at||'|'||amount||'|'||note, ',' ORDER BY legacy_id)) FROM orders_v7"; }
args=(-q stream orders_v7 --source "dbname=$SRC" --from public.orders --publication pub
      --slot "$SLOT" --map id=legacy_id --group-rows 300 --group-ms 50 --batch-rows 2000)

# The writer: transactions of inserts, updates and deletes, some large.
cat >writer.sql <<'SQL'
\set k random(1, 40000)
BEGIN;
INSERT INTO orders SELECT g, now() - interval '5 minutes', 1, 'w' FROM generate_series(:k * 10 + 100000, :k * 10 + 100004) g ON CONFLICT DO NOTHING;
UPDATE orders SET amount = amount + 1, note = note || 'u' WHERE id = :k;
DELETE FROM orders WHERE id = :k + 1;
INSERT INTO orders VALUES (:k + 1, now() - interval '1 minute', 7, 'again') ON CONFLICT DO NOTHING;
COMMIT;
SQL
"$PGBIN/pgbench" -n -c 2 -T 600 -f writer.sql "$SRC" >writer.log 2>&1 &
writer=$!

# The monitor: the slot's confirmed position never ahead of the stored one.
( while :; do
      c=$(psql -X -At -d postgres -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'" 2>/dev/null)
      # (a row of phase "new" has no position yet: recorded before its slot was made)
      s=$(q "SELECT end_lsn FROM v7fill.stream WHERE slot = '$SLOT' AND phase <> 'new'" 2>/dev/null || true)
      if [ -n "$c" ] && [ -n "$s" ]; then
          [ "$(q "SELECT '$c'::pg_lsn <= '$s'::pg_lsn")" = t ] || echo "confirmed $c ahead of stored $s" >>violations
      fi
      sleep 0.1
  done ) &
monitor=$!
trap 'kill $writer $monitor 2>/dev/null || true; drop_slots; rm -rf "$T_TMP"' EXIT

# Every other run applies on two writer connections (--jobs 2): batches commit
# in source order there too, so a kill leaves a contiguous prefix committed.
for i in $(seq 1 20); do
    jobs=$((1 + i % 2))
    "$V7FILL" "${args[@]}" --jobs "$jobs" >"run$i.log" 2>&1 &
    pid=$!   # v7fill itself, not a subshell: kill -9 must reach it
    sleep "$(rand_secs 0.3 2.5)"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
kill $writer 2>/dev/null || true
wait $writer 2>/dev/null || true
run_expect 0 "$V7FILL" "${args[@]}" --jobs 2 --until-caught-up
echo "$OUT"
kill $monitor 2>/dev/null || true
assert_eq "$(digest_src)" "$(digest_dst)" "after 20 kills and a catch-up the target equals the source"
assert_eq 0 "$(q "SELECT count(*) FROM (SELECT legacy_id FROM orders_v7 GROUP BY 1 HAVING count(*) > 1) d")" "no row twice"
[ ! -s violations ] || fail "the slot ran ahead of the target: $(head -3 violations)"
drop_slots
