# The way back (issue 21) losing its writing connection in the middle of a group whose
# statements it sends without waiting for each answer (pg_pipe): after the switch the application
# writes 30,000 new rows and 3,000 updates in one transaction; `migrate --reverse` is started and
# its backend terminated (pg_terminate_backend) while it applies that transaction.  It must stop
# within seconds (no hang on the broken pipeline), exit 5 naming the lost connection, leave
# nothing of the group in the legacy table and its position where it was; the rerun applies
# every change exactly once (the legacy table equals the new one, the map pairs them all) and a
# second rerun applies nothing.  Then once more with a --follow run terminated the same way.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
INTO=lo_orders_v7
drop_slot() {
    psql -X -q -At -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'v7fill_lo_%' AND NOT active" >/dev/null || true
}
drop_slot
trap 'drop_slot; rm -rf "$T_TMP"' EXIT

q "CREATE TABLE lo_orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
   INSERT INTO lo_orders (created_at, note)
     SELECT now() - g * interval '1 hour', 'n' || g FROM generate_series(1, 2000) g;
   CREATE FUNCTION lo_uuid7(at timestamptz) RETURNS uuid LANGUAGE sql VOLATILE AS \$\$
     SELECT (lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7'
             || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid \$\$" >/dev/null
run_expect 0 "$V7FILL" migrate --from public.lo_orders --key id --time-column created_at --into "$INTO"
run_expect 0 "$V7FILL" migrate --into "$INTO" --switch
assert_contains "$OUT" "phase switched" "switched"

# differ: rows of the new table (by legacy_id) and of the legacy table (by id) that differ
differ() {
    q "SELECT count(*) FROM ((SELECT legacy_id, created_at, note FROM lo_orders
                              EXCEPT SELECT id, created_at, note FROM lo_orders_legacy)
       UNION ALL (SELECT id, created_at, note FROM lo_orders_legacy
                  EXCEPT SELECT legacy_id, created_at, note FROM lo_orders)) d"
}
applied() { q "SELECT applied FROM v7fill.migrate_reverse WHERE into_table = 'public.$INTO'"; }
# write TAG: one application transaction of 30,000 new rows and 3,000 updates
write() {
    q "BEGIN;
       INSERT INTO lo_orders (id, created_at, note)
         SELECT lo_uuid7(t), t, '$1' || g FROM (SELECT g, now() - g * interval '1 second' t
                                                FROM generate_series(1, 30000) g) s;
       UPDATE lo_orders SET note = note || '-u' WHERE note LIKE '$1%' AND legacy_id % 10 = 0;
       COMMIT" >/dev/null
}
# terminated TAG [ARGS...]: --reverse ARGS in the background, its writing backend terminated once
# it is inside its transaction of TAG's rows; the run must end within 60 s, exit 5
terminated() {
    local tag=$1 pid killed=0 st
    shift
    "$V7FILL" migrate --into "$INTO" --reverse "$@" >rev_$tag.out 2>&1 &
    pid=$!
    for _ in $(seq 1 400); do
        # the way back's backend (not its walsender) once it has written in its transaction
        if [ "$(q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                   WHERE datname = current_database() AND backend_type = 'client backend'
                     AND application_name = 'v7fill' AND backend_xid IS NOT NULL")" = t ]; then
            killed=1
            break
        fi
        sleep 0.02
    done
    [ "$killed" = 1 ] || { kill -9 $pid 2>/dev/null || true; fail "$tag: never saw the way back's transaction"; }
    for _ in $(seq 1 600); do
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 $pid 2>/dev/null; then
        kill -9 $pid
        fail "$tag: the way back still ran 60 s after its connection was terminated: $(cat rev_$tag.out)"
    fi
    set +e; wait $pid; st=$?; set -e
    assert_eq 5 "$st" "$tag: exit 5 after the lost connection ($(tail -n 3 rev_$tag.out))"
    echo "$tag: $(grep -m 1 -i 'error' rev_$tag.out)"
    grep -q -e "terminating connection due to administrator command" \
        -e "server closed the connection unexpectedly" rev_$tag.out ||
        fail "$tag: the error does not say the connection was lost: $(cat rev_$tag.out)"
}

for tag in once follow; do
    before=$(applied)
    write "$tag"
    if [ "$tag" = follow ]; then terminated "$tag" --follow; else terminated "$tag"; fi
    assert_eq "0|$before" "$(q "SELECT count(*) FROM lo_orders_legacy WHERE note LIKE '$tag%'")|$(applied)" \
        "$tag: nothing of the group in the legacy table, the position where it was"
    run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
    assert_eq "$((before + 33000))" "$(applied)" "$tag: the rerun applied 33,000 changes exactly once"
    assert_eq "0" "$(differ)" "$tag: the legacy table equals the new one"
    assert_eq "0" "$(q "SELECT count(*) FROM lo_orders o FULL JOIN ${INTO}_id_map m ON m.id = o.id
        WHERE m.id IS NULL OR o.id IS NULL OR m.legacy_id <> o.legacy_id")" "$tag: the map pairs them all"
    run_expect 0 "$V7FILL" migrate --into "$INTO" --reverse
    assert_eq "$((before + 33000))" "$(applied)" "$tag: a second rerun applies nothing"
done
