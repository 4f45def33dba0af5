# Issue 21's end-to-end migrate scenario, shared by t_migrate_e2e.sh (--child-mode expand) and
# t_migrate_e2e_childtable.sh (--child-mode migrate).  Sourced after lib.sh (which names the
# test's database after the script sourcing it); not a test of its own (no t_ prefix).
INTO=orders_v7

# e2e_drop_slots: the scenario's slots (parent, children, the way back), when no one uses them
e2e_drop_slots() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                                    WHERE slot_name LIKE 'v7fill\_%' AND NOT active" >/dev/null || true
}
e2e_drop_slots
writer=
trap '[ -z "$writer" ] || kill "$writer" 2>/dev/null || true; e2e_drop_slots; rm -rf "$T_TMP"' EXIT

# e2e_source: orders, 100,000 rows with gaps in the key and created_at over 3 years to the ms,
# 3 NULL and 5 pre-1970 times; items (every 500th key NULL, every 777th an orphan, two rows of
# rejected parents 30 and 90; no foreign key: the writer's deletes of parents leave orphans)
# and payments (a foreign key ON DELETE CASCADE).  The children have a created_at of their own
# (migrate mode mints their ids from it; expand mode ignores it).  The key's sequence numbers
# legacy_id of the application's new rows after the switch.
e2e_source() {
    q "CREATE SEQUENCE orders_id_seq START 3000000;
       CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT nextval('orders_id_seq'), created_at timestamptz,
                            amount int NOT NULL, note text);
       ALTER SEQUENCE orders_id_seq OWNED BY orders.id;
       INSERT INTO orders SELECT g * 3 + (g % 2),
              timestamptz '2023-01-01' + g * interval '946 seconds' + (g % 997) * interval '1.001 ms', g % 1000, 'n' || g
         FROM generate_series(1, 100000) g;
       UPDATE orders SET created_at = NULL WHERE id IN (30, 34, 60);
       UPDATE orders SET created_at = timestamptz '1969-12-31 23:59:59.999' - (id || ' days')::interval
        WHERE id IN (SELECT g * 3 + g % 2 FROM generate_series(30, 34) g);
       CREATE TABLE items (id serial PRIMARY KEY, order_id bigint, qty int,
                           created_at timestamptz NOT NULL DEFAULT now());
       INSERT INTO items (order_id, qty, created_at)
         SELECT CASE WHEN g % 500 = 0 THEN NULL WHEN g % 777 = 0 THEN 5000000 + g
                     ELSE (g + 100) * 3 + ((g + 100) % 2) END, g,
                timestamptz '2023-02-01' + g * interval '71 minutes' + (g % 991) * interval '1.003 ms'
           FROM generate_series(1, 20000) g;
       INSERT INTO items (order_id, qty) VALUES (30, 1), (90, 1);
       CREATE INDEX ON items (order_id);
       CREATE TABLE payments (id serial PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
                              paid int, created_at timestamptz NOT NULL DEFAULT now());
       INSERT INTO payments (order_id, paid, created_at)
         SELECT (g + 200) * 3 + ((g + 200) % 2), g, timestamptz '2023-03-01' + g * interval '97 minutes'
           FROM generate_series(1, 10000) g;
       CREATE INDEX ON payments (order_id)" >/dev/null
}

# e2e_writer_start [new-child]: parent and child rows inserted (with new-child, also an item of
# the new parent in its transaction), updated, deleted, 10 transactions a second over 2
# clients, until writer_stop (lib.sh), which fails when one of its statements failed (a deadlock
# between its two clients is retried, as an application would; a payment's parent is locked
# against the other client's delete, as the legacy foreign key checks it).  (Such an item gets
# its parent's uuid from the trigger on the map when the capture writes the map row, in both
# child modes: the run's verify re-checks without a fill.)
e2e_writer_start() {
    cat >writer.sql <<'SQL'
\set k random(1, 100000)
\set n 1000000 + :k * 10 + random(0, 9)
BEGIN;
INSERT INTO orders VALUES (:n, now() - interval '1 minute', 1, 'w') ON CONFLICT DO NOTHING;
UPDATE orders SET amount = amount + 1, note = note || 'u' WHERE id = :k * 3 + (:k % 2) AND created_at >= 'epoch';
DELETE FROM orders WHERE id = (:k + 7) * 3 + ((:k + 7) % 2) AND created_at >= 'epoch';
INSERT INTO items (order_id, qty) SELECT id, -1 FROM orders WHERE id = :k * 3 + (:k % 2) AND created_at >= 'epoch';
UPDATE items SET qty = qty + 1 WHERE id = :k % 20000 + 1;
DELETE FROM items WHERE id = (:k + 11) % 20000 + 1;
INSERT INTO payments (order_id, paid) SELECT id, -1 FROM orders WHERE id = (:k + 3) * 3 + ((:k + 3) % 2) FOR KEY SHARE;
UPDATE payments SET paid = paid + 1 WHERE id = :k % 10000 + 1;
COMMIT;
SQL
    [ "${1:-}" != new-child ] ||
        sed -i '/^INSERT INTO orders VALUES/a INSERT INTO items (order_id, qty) VALUES (:n, -2);' writer.sql
    "$PGBIN/pgbench" -n -c 2 -R 10 -T 900 --max-tries=10 -f writer.sql "$PGDATABASE" >writer.log 2>&1 &
    writer=$!
}

# e2e_kills N MAX_S ARGS...: N times `v7fill ARGS --follow` killed -9 after a random 0.3..MAX_S
# seconds (where it was: each run's last log line but warnings, printed and appended to
# $E2E_KILL_LOG when set); then waits until the killed walsenders let the slots go
e2e_kills() {
    local n=$1 max=$2 i pid
    shift 2
    for i in $(seq 1 "$n"); do
        "$V7FILL" "$@" --follow >"run$i.log" 2>&1 &
        pid=$!   # v7fill itself: kill -9 must reach it
        sleep "$(rand_secs 0.3 "$max")"
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        echo "kill $i: $(grep -v WARNING "run$i.log" | tail -n 1 | cut -c1-150)" | tee -a "${E2E_KILL_LOG:-/dev/null}"
    done
    poll_until "SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name LIKE 'v7fill\_%'
                  AND database = current_database() AND active" "the killed runs' walsenders to let their slots go" 30
}

# e2e_rerun_verify ARGS...: after the kills, `v7fill ARGS --verify` while the writer still writes
# (the run's own verify re-checks what differs after a catch-up): it finishes the copy, rejects
# the NULL and pre-1970 times with their reasons, names the child rows of rejected parents
# apart, and its verdict is OK; its output in OUT
e2e_rerun_verify() {
    run_expect 0 "$V7FILL" "$@" --verify
    echo "$OUT"
    assert_contains "$OUT" "phase follow" "after 10 kills the rerun finishes the copy"
    assert_contains "$OUT" "rejected: 8 rows" "the NULL and pre-1970 times are rejected"
    assert_contains "$OUT" "missing event time" "the NULL time's reason"
    assert_contains "$OUT" "before 1970-01-01" "the pre-1970 time's reason"
    assert_contains "$OUT" "verify after the run: " "the run verifies after itself"
    assert_contains "$OUT" "verdict: OK" "verify passes after the run while the writer writes"
    assert_contains "$OUT" "child rows of rejected parents: 2 (keys 30, 90)" "the child rows of rejected parents named apart"
}

# e2e_digest TABLE KEY COLUMNS WHERE: count and md5 of KEY and COLUMNS of every row, by KEY
e2e_digest() {
    local cols=$2 c
    for c in $3; do cols="$cols||'|'||coalesce($c::text, '-')"; done
    q "SELECT count(*), md5(string_agg($cols, ',' ORDER BY $2)) FROM $1 WHERE ${4:-true}"
}
ORDER_COLS="created_at amount note"
# e2e_time_off TABLE: rows whose id does not carry their created_at to the ms
e2e_time_off() {
    q "SELECT count(*) FROM $1 WHERE ('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint
                                    <> floor(extract(epoch FROM created_at) * 1000)::bigint"
}

# fails_naming WHAT TABLE NAMED...: --verify exits 1 with MISMATCH, and a line of TABLE's (each
# TABLE NAMED pair) names NAMED
fails_naming() {
    local what=$1
    shift
    run_expect 1 "$V7FILL" migrate --into "$INTO" --verify
    assert_contains "$OUT" "MISMATCH" "$what fails --verify"
    while [ $# -gt 0 ]; do
        grep -E "^public\.$1 " <<<"$OUT" | grep -qF "$2" || fail "$what: $1's row named ($2) in: $OUT"
        shift 2
    done
}
# e2e_verify_names_rows TABLE COL [TABLE COL ...]: --verify fails naming the row on a changed
# COL of each TABLE, then on a deleted row of each TABLE's map (each restored after; verify
# passes again).  The tables are broken together, each named on its own line: one --verify
# per kind of damage, not one per table.
e2e_verify_names_rows() {
    local t k m mid changed=() unmapped=() change=() unchange=() unmap=() remap=()
    while [ $# -gt 0 ]; do
        t=$1
        k=$(q "SELECT min(legacy_id) FROM $t WHERE legacy_id > 5000")
        m=$(q "SELECT min(legacy_id) FROM ${t}_id_map WHERE legacy_id > 7000")
        mid=$(q "SELECT id FROM ${t}_id_map WHERE legacy_id = $m")
        changed+=("$t" "changed 1 (legacy keys $k)")
        unmapped+=("$t" "legacy keys $m")
        change+=("UPDATE $t SET $2 = $2 + 100 WHERE legacy_id = $k")
        unchange+=("UPDATE $t SET $2 = $2 - 100 WHERE legacy_id = $k")
        unmap+=("DELETE FROM ${t}_id_map WHERE legacy_id = $m")
        remap+=("INSERT INTO ${t}_id_map VALUES ($m, '$mid')")
        shift 2
    done
    for k in "${change[@]}"; do q "$k" >/dev/null; done
    fails_naming "a changed column" "${changed[@]}"
    for k in "${unchange[@]}" "${unmap[@]}"; do q "$k" >/dev/null; done
    fails_naming "a deleted map row" "${unmapped[@]}"
    for k in "${remap[@]}"; do q "$k" >/dev/null; done
    run_expect 0 "$V7FILL" migrate --into "$INTO" --verify
    assert_contains "$OUT" "verdict: OK" "restored: verify passes again"
}
