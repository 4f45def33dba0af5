#!/usr/bin/env bash
# Updates and deletes from a backlog, before and after, in one run: one throwaway cluster;
# for each binary (V7FILL_BEFORE if set, then V7FILL): a stream of a 2N-row table copied, then
# N updates (transactions of 1000) caught up, then N deletes (transactions of 1000) caught up,
# each timed (changes/s over the command's wall time, and the stream's own elapsed); then
# migrate's catch-up (a P-row table migrated, then M changes in transactions of 1000: 40%
# inserts, 40% updates, 20% deletes, as bench_migrate.py) timed, then M more changes of the
# same mix interleaved within each transaction (insert, insert, update, update, delete) timed.  The target must equal the
# source after each step.  BENCH_CHANGES_ROWS (N, default 100000), BENCH_CHANGES_MIGRATE_ROWS
# (P, default 100000), BENCH_CHANGES_MIGRATE_CHANGES (M, default 50000).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
N=${BENCH_CHANGES_ROWS:-100000}
P=${BENCH_CHANGES_MIGRATE_ROWS:-100000}
M=${BENCH_CHANGES_MIGRATE_CHANGES:-50000}
eval "$("$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT
export PGTZ=UTC
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
now() { date +%s.%N; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN { printf "%.0f", n / (b - a) }'; }
elapsed() { sed -n 's/.*elapsed=\([0-9.]*\)s.*/\1/p' <<<"$1" | head -1; }

bins=()
[ -n "${V7FILL_BEFORE:-}" ] && bins+=("before=$V7FILL_BEFORE")
bins+=("after=${V7FILL:-$root/build/v7fill}")
echo "machine: $(nproc) cores, $(uptime)"
for entry in "${bins[@]}"; do
    label=${entry%%=*} bin=${entry#*=}
    src=src_$label dst=dst_$label slot=bench_$label
    q postgres "CREATE DATABASE $src" && q postgres "CREATE DATABASE $dst"
    q "$src" "CREATE TABLE items (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, n integer, note text);
              INSERT INTO items SELECT g, now() - (g || ' seconds')::interval, g, md5(g::text) FROM generate_series(1, 2 * $N) g;
              CREATE PUBLICATION pub FOR TABLE items"
    q "$dst" "CREATE TABLE items_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL,
                 created_at timestamptz NOT NULL, n integer, note text) PARTITION BY RANGE (id)"
    stream() { "$bin" -d "dbname=$dst" stream items_v7 --source "dbname=$src" --from public.items \
                   --publication pub --slot "$slot" --map id=legacy_id --until-caught-up 2>&1; }
    digest_src() { q "$src" "SELECT count(*), md5(string_agg(id||'|'||n||'|'||note, ',' ORDER BY id)) FROM items"; }
    digest_dst() { q "$dst" "SELECT count(*), md5(string_agg(legacy_id||'|'||n||'|'||note, ',' ORDER BY legacy_id)) FROM items_v7"; }
    out=$(stream) || { echo "$out"; exit 1; }
    q "$src" "DO \$\$ BEGIN FOR t IN 0..$((N / 1000 - 1)) LOOP
                 UPDATE items SET n = n + 1 WHERE id BETWEEN t * 1000 + 1 AND t * 1000 + 1000; COMMIT;
               END LOOP; END \$\$"
    t0=$(now); out=$(stream); t1=$(now)
    [ "$(digest_src)" = "$(digest_dst)" ] || { echo "$label: target differs after the updates"; exit 1; }
    echo "$label stream updates: $N in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s: $(rate "$N" "$t0" "$t1") changes/s (stream elapsed $(elapsed "$out") s)"
    q "$src" "DO \$\$ BEGIN FOR t IN 0..$((N / 1000 - 1)) LOOP
                 DELETE FROM items WHERE id BETWEEN $N + t * 1000 + 1 AND $N + t * 1000 + 1000; COMMIT;
               END LOOP; END \$\$"
    t0=$(now); out=$(stream); t1=$(now)
    [ "$(digest_src)" = "$(digest_dst)" ] || { echo "$label: target differs after the deletes"; exit 1; }
    echo "$label stream deletes: $N in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s: $(rate "$N" "$t0" "$t1") changes/s (stream elapsed $(elapsed "$out") s)"
    q "$src" "DROP PUBLICATION pub"
    q postgres "SELECT pg_drop_replication_slot('$slot')" >/dev/null

    # migrate's catch-up, one database
    mdb=mig_$label
    q postgres "CREATE DATABASE $mdb"
    q "$mdb" "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, customer_id bigint,
                 status text, amount numeric(12,2), note text);
              INSERT INTO orders (created_at, customer_id, status, amount, note)
                SELECT now() - (g || ' minutes')::interval, g % 1000, 'new', g / 100.0, 'n' || g FROM generate_series(1, $P) g"
    migrate() { "$bin" -d "dbname=$mdb" migrate --from public.orders --key id --time-column created_at --into orders_v7 2>&1; }
    out=$(migrate) || { echo "$out"; exit 1; }
    per=1000 ins=400 upd=400 del=200
    q "$mdb" "DO \$\$ DECLARE base bigint := (SELECT max(id) FROM orders) + 1000; BEGIN
                FOR t IN 0..$((M / per - 1)) LOOP
                  INSERT INTO orders SELECT base + t * $ins + g, now() - interval '1 day', g, 'new', 1.00, 'catch-up'
                    FROM generate_series(1, $ins) g;
                  UPDATE orders SET amount = amount + 1, status = 'upd'
                    WHERE id IN (SELECT 1 + ((t * $upd + g) * 7919::bigint) % $P FROM generate_series(1, $upd) g);
                  DELETE FROM orders WHERE id > base + t * $ins AND id <= base + t * $ins + $del;
                  COMMIT;
                END LOOP; END \$\$"
    t0=$(now); out=$(migrate); t1=$(now)
    echo "$label migrate catch-up: $M changes in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s: $(rate "$M" "$t0" "$t1") changes/s (elapsed $(elapsed "$out") s: $(rate "$M" 0 "$(elapsed "$out")") changes/s)"
    grep -m1 "read=" <<<"$out" || true
    # the same mix interleaved within each transaction (insert, insert, update, update, delete
    # of a row inserted earlier in it): runs of one or two operations of a kind
    q "$mdb" "DO \$\$ DECLARE base bigint := (SELECT max(id) FROM orders) + 1000; ni int; nd int; BEGIN
                FOR t IN 0..$((M / per - 1)) LOOP
                  ni := 0; nd := 0;
                  FOR g IN 1..$per LOOP
                    CASE g % 5
                      WHEN 0, 1 THEN
                        ni := ni + 1;
                        INSERT INTO orders VALUES (base + t * $ins + ni, now() - interval '1 day', g, 'new', 1.00, 'mixed');
                      WHEN 2, 3 THEN
                        UPDATE orders SET amount = amount + 1, status = 'mix' WHERE id = 1 + ((t * $per + g) * 7919::bigint) % $P;
                      ELSE
                        nd := nd + 1;
                        DELETE FROM orders WHERE id = base + t * $ins + nd;
                    END CASE;
                  END LOOP;
                  COMMIT;
                END LOOP; END \$\$"
    t0=$(now); out=$(migrate); t1=$(now)
    echo "$label migrate catch-up interleaved: $M changes in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s: $(rate "$M" "$t0" "$t1") changes/s (elapsed $(elapsed "$out") s: $(rate "$M" 0 "$(elapsed "$out")") changes/s)"
    grep -m1 "read=" <<<"$out" || true
    q postgres "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '$mdb'" >/dev/null
    for db in $src $dst $mdb; do q postgres "DROP DATABASE $db"; done
done
echo "machine after: $(uptime)"
