#!/usr/bin/env bash
# The switch's lock under a writer, with a --child-mode migrate child, beside a baseline binary.
#
#   V7FILL=build/v7fill V7FILL_BASE=/path/to/old/v7fill bench/bench_switch_writer.sh
#
# One throwaway cluster.  BENCH_SW_CYCLES (default 6) cycles per binary, the binaries alternating
# (V7FILL_BASE first, when given), each cycle in a fresh database: orders (BENCH_SW_ROWS rows,
# default 20000) and items (three per order, ON DELETE CASCADE to orders), `v7fill migrate
# --child 'public.items(order_id)' --child-mode migrate`, then `migrate --switch` while a writer
# runs every 25 ms one transaction that inserts an order and two items, deletes a random order
# (its items go with it), half the time deletes the order it inserted just before, and updates
# an item, and a reader counts both tables.  Per cycle: the switch's "lock held" time, the
# writer's and the reader's longest statement, and whether a child's capture applied a
# transaction again (the race of docs/migrating-children.md).  Then per binary the median and
# the largest of each.  BENCH_SW_OUT=DIR keeps each switch's output there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
V7FILL=${V7FILL:-$root/build/v7fill}
CYCLES=${BENCH_SW_CYCLES:-6}
ROWS=${BENCH_SW_ROWS:-20000}
eval "$("$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT
export V7FILL V7FILL_ROOT=$root
# the tests' helpers: q, run_expect, timed_start/timed_stop, switch_under_load
# shellcheck source=/dev/null
source "$root/tests/integration/lib.sh"
# lib.sh set its own EXIT trap: the cluster is stopped there too
trap 'cd /; "$root/tests/pgtmp.sh" stop "$PGTMP_DIR"; rm -rf "$T_TMP"' EXIT
cd "$T_TMP"

binaries=("$V7FILL")
[ -z "${V7FILL_BASE:-}" ] || binaries=("$V7FILL_BASE" "$V7FILL")
declare -A held writer reader again
for cycle in $(seq 1 "$CYCLES"); do
    for bin in "${binaries[@]}"; do
        export PGDATABASE=bench_sw
        psql -q -X -d postgres -c "DROP DATABASE IF EXISTS bench_sw" >/dev/null
        psql -q -X -d postgres -c "CREATE DATABASE bench_sw" >/dev/null
        q "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
           INSERT INTO orders (created_at, note)
             SELECT now() - g * interval '5 minutes', 'n' || g FROM generate_series(1, $ROWS) g;
           CREATE TABLE items (id bigserial PRIMARY KEY, order_id bigint REFERENCES orders ON DELETE CASCADE,
                               created_at timestamptz NOT NULL, qty int);
           INSERT INTO items (order_id, created_at, qty)
             SELECT g % $ROWS + 1, now() - g * interval '2 minutes', g FROM generate_series(1, $((ROWS * 3))) g;
           CREATE INDEX ON items (order_id)"
        V7FILL=$bin
        run_expect 0 "$V7FILL" -q migrate --from public.orders --key id --time-column created_at \
            --into orders_v7 --child 'public.items(order_id)' --child-mode migrate
        wsql="DO \$\$ DECLARE o bigint; BEGIN LOCK TABLE orders, items IN ROW EXCLUSIVE MODE;
          IF (SELECT atttypid FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'id') = 'bigint'::regtype THEN
            EXECUTE 'INSERT INTO orders (created_at, note) VALUES (now(), ''w'') RETURNING id' INTO o;
            EXECUTE 'INSERT INTO items (order_id, created_at, qty) VALUES (\$1, now(), 1), (\$1, now(), 2)' USING o;
            EXECUTE 'DELETE FROM orders WHERE id = \$1' USING (floor(random() * $ROWS) + 1)::bigint;
            IF random() < 0.5 THEN EXECUTE 'DELETE FROM orders WHERE id = \$1' USING o - 1; END IF;
            EXECUTE 'UPDATE items SET qty = qty + 1 WHERE id = \$1' USING (floor(random() * $ROWS) + 1)::bigint;
          END IF; END \$\$"
        rsql="SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM items)"
        # shellcheck disable=SC2086
        switch_under_load "$wsql" "$rsql" ${BENCH_SW_V:-} migrate --into orders_v7 --switch >sw.line
        line=$(tail -n 1 sw.line)
        h=$(sed -n 's/.*lock held \([0-9]*\) ms.*/\1/p' <<<"$line")
        w=$(sed -n 's/.*writer max_ms=\([0-9]*\).*/\1/p' <<<"$line")
        r=$(sed -n 's/.*reader max_ms=\([0-9]*\).*/\1/p' <<<"$line")
        a=$(grep -c "applying it again" <<<"$OUT" || true)
        [ -z "${BENCH_SW_OUT:-}" ] || printf '%s\n' "$OUT" >"$BENCH_SW_OUT/cycle$cycle-$(basename "$(dirname "$(dirname "$bin")")").log"
        for t in orders items; do
            assert_eq "$(q "SELECT count(*) FROM ${t}_legacy")" "$(q "SELECT count(*) FROM $t")" "$t: as many rows as ${t}_legacy"
        done
        held[$bin]+="$h "
        writer[$bin]+="$w "
        reader[$bin]+="$r "
        again[$bin]=$(( ${again[$bin]:-0} + a ))
        printf 'cycle %d  %-40s lock held %5d ms  writer %5d ms  reader %5d ms  applied again %d\n' \
            "$cycle" "$bin" "$h" "$w" "$r" "$a"
        q "SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_replication_slots WHERE database = 'bench_sw' AND NOT active" >/dev/null
        export PGDATABASE=postgres
    done
done
# median and largest of a list of integers
stats() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR]=$1} END{printf "median %d, largest %d", v[int((NR+1)/2)], v[NR]}'; }
for bin in "${binaries[@]}"; do
    echo "== $bin ($CYCLES cycles): lock held $(stats "${held[$bin]}") ms; writer's longest statement $(stats "${writer[$bin]}") ms; reader's $(stats "${reader[$bin]}") ms; transactions applied again ${again[$bin]}"
done
