# The switch between two databases (issue 21) when its connection to the source is lost at the
# COMMIT of the switch's transaction there (commit_proxy.py, which cuts the connection of the
# transaction that renames): v7fill reads on a new connection whether the names stand switched,
# after ending the old session.
# - "send": the COMMIT never reached the source; nothing is renamed there: exit 5, says so and
#   what to run; the next --switch goes through.
# - "ack": the source committed, the answer was lost: the switch says so and goes on (phase
#   switched, the way back works, the application's later write reaches the legacy table).
# - "ack" with the source unreachable after the cut: whether it committed cannot be read: exit 5,
#   says so; the next --switch says "already switched" and stores the phase.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
source_db_fresh
proxy=
trap '[ -n "$proxy" ] && kill "$proxy" 2>/dev/null;
      psql -X -q -At -d "$SRC" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE '"'"'v7fill\_lc\_%'"'"' AND NOT active" >/dev/null 2>&1;
      rm -rf "$T_TMP"' EXIT
for t in send ack unknown; do
    qs "CREATE TABLE o_$t (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
        INSERT INTO o_$t (created_at, note)
          SELECT timestamptz '2025-01-01' + g * interval '5 hours', 'n' || g FROM generate_series(1, 300) g" >/dev/null
    run_expect 0 "$V7FILL" migrate --into "lc_$t" --source "dbname=$SRC" --from "public.o_$t" --key id --time-column created_at
    assert_contains "$OUT" "phase follow" "lc_$t: the copy finished"
done
names() { qs "SELECT coalesce(to_regclass('o_$1')::text, '-') || ' ' || coalesce(to_regclass('o_$1_legacy')::text, '-')"; }
phase() { q "SELECT phase FROM v7fill.migration WHERE into_schema = 'public' AND into_table = 'lc_$1'"; }

# ---- send: the COMMIT lost on its way to the source
proxy_start p_send send 1 "RENAME TO"
run_expect 5 "$V7FILL" migrate --into lc_send --switch --source "$PROXY dbname=$SRC"
proxy_stop
echo "$OUT"
assert_eq send "$(cat p_send/fired)" "the proxy cut the switch's COMMIT"
assert_contains "$OUT" "did not commit on the source: nothing is renamed there" "send: the switch says it did not commit"
assert_contains "$OUT" "Run --switch again" "send: ... and what to run"
assert_eq "o_send -" "$(names send)" "send: the source's names stand"
assert_eq follow "$(phase send)" "send: the phase stays follow"
run_expect 0 "$V7FILL" migrate --into lc_send --switch
assert_contains "$OUT" "phase switched" "send: the next --switch goes through"
assert_eq "- o_send_legacy" "$(names send)" "send: switched on the source after the rerun"

# ---- ack: the source committed, the answer lost
proxy_start p_ack ack 1 "RENAME TO"
run_expect 0 "$V7FILL" migrate --into lc_ack --switch --source "$PROXY dbname=$SRC"
proxy_stop
echo "$OUT"
assert_eq ack "$(cat p_ack/fired)" "the proxy cut the answer to the switch's COMMIT"
assert_contains "$OUT" "got no answer" "ack: the lost answer is said"
assert_contains "$OUT" "the tables stand switched: it committed" "ack: ... and that it committed"
assert_contains "$OUT" "phase switched" "ack: switched"
assert_eq "- o_ack_legacy" "$(names ack)" "ack: the source table renamed"
assert_eq switched "$(phase ack)" "ack: the phase stored"
at=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
q "INSERT INTO lc_ack (id, created_at, note) VALUES ('$("$V7FILL" uuid new --at "$at")', '$at', 'after')" >/dev/null
run_expect 0 "$V7FILL" migrate --into lc_ack --reverse
assert_contains "$OUT" "phase reverse" "ack: the way back runs"
assert_eq "301|after" "$(qs "SELECT id || '|' || note FROM o_ack_legacy WHERE id > 300")" \
    "ack: the application's write after the switch reaches the legacy table with the next key"

# ---- unknown: the answer lost and the source unreachable after
proxy_start p_unknown ack 1 "RENAME TO"
touch p_unknown/refuse
run_expect 5 "$V7FILL" migrate --into lc_unknown --switch --source "$PROXY dbname=$SRC"
proxy_stop
echo "$OUT"
assert_contains "$OUT" "whether it committed could not be read" "unknown: said"
assert_contains "$OUT" "it says \"already switched\" if it did" "unknown: ... with what to run"
assert_not_contains "$OUT" "not switched:" "unknown: no claim that nothing was switched"
assert_eq "- o_unknown_legacy" "$(names unknown)" "unknown: it had committed on the source"
assert_eq follow "$(phase unknown)" "unknown: the phase not stored"
run_expect 0 "$V7FILL" migrate --into lc_unknown --switch
assert_contains "$OUT" "already switched" "unknown: the next --switch reads the names"
assert_eq switched "$(phase unknown)" "unknown: ... and stores the phase"
run_expect 0 "$V7FILL" migrate --into lc_unknown --verify
assert_contains "$OUT" "verdict: OK" "unknown: --verify after"
echo "ok t_migrate_twodb_lostcommit"
