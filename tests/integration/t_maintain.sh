# v7fill maintain: creates windows ahead, detaches and drops exactly the windows whose upper
# bound is older than now - retention, refuses windows that received rows within the quiet
# period (and keeps, undropped, a window whose rows arrived while it was being detached),
# --detach-only keeps the tables, --dry-run changes nothing, a DEFAULT partition means plain
# DETACH, a half-done DETACH CONCURRENTLY is finalized, the retention comes from the store.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC
sqlf -f "$V7FILL_ROOT/examples/schema.sql"
sqlf -f "$V7FILL_ROOT/contrib/sql/v7fill_uuid7.sql"
month0=$(date -u +%Y-%m-01)
mon() { date -u -d "$month0 $1 months" +%Y-%m-%d; }   # first day of month0 + N months
name() { date -u -d "$month0 $1 months" +events__%Y_%m; }
run_expect 0 "$V7FILL" partitions events --from "$(mon -6)" --to "$(mon 1)"
# A row in the middle of every window.
for k in -6 -5 -4 -3 -2 -1 0; do
    q "INSERT INTO events (id, created_at, account_id, kind)
       SELECT uuid7_floor(t), t, 1, 'k' FROM (SELECT '$(mon "$k")'::timestamptz + interval '14 days' AS t) s" >/dev/null
done
attached() { q "SELECT string_agg(c.relname, ' ' ORDER BY c.relname) FROM pg_inherits i
                JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass"; }
exists() { q "SELECT count(*) FROM pg_class WHERE relname = '$1' AND relkind = 'r'"; }

# The windows 60 days retire: upper bound (the next month's first day) older than now - 60d.
expected=$(python3 - "$month0" <<'PY'
import sys, datetime as dt
m0 = dt.datetime.strptime(sys.argv[1], "%Y-%m-%d").replace(tzinfo=dt.timezone.utc)
now = dt.datetime.now(dt.timezone.utc)
def add(d, k):
    y, m = divmod(d.month - 1 + k, 12)
    return d.replace(year=d.year + y, month=m + 1)
print(" ".join(add(m0, k).strftime("events__%Y_%m") for k in range(-6, 1)
               if add(m0, k + 1) < now - dt.timedelta(days=60)))
PY
)
nexp=$(echo "$expected" | wc -w)
echo "expected to retire: $expected"
[ "$nexp" -ge 4 ] || fail "test setup: expected at least 4 windows past a 60d cutoff, got [$expected]"
newest_old=$(echo "$expected" | tr ' ' '\n' | tail -n 1)

# --- usage ---------------------------------------------------------------------------------
run_expect 2 "$V7FILL" maintain events --drop --detach-only
run_expect 2 "$V7FILL" maintain events --retention 0s
run_expect 2 "$V7FILL" maintain events --ahead -1
run_expect 0 "$V7FILL" maintain --help
assert_contains "$OUT" "--quiet-period" "help"

# --- dry run: says everything, changes nothing ----------------------------------------------
before=$(attached)
run_expect 0 "$V7FILL" maintain events --retention 60d --ahead 2 --dry-run
echo "$OUT"
for w in $expected; do
    assert_contains "$OUT" "would detach $w" "dry run: $w"
    assert_contains "$OUT" "would drop public.$w" "dry run drops $w"
done
assert_contains "$OUT" "would create $(name 1)" "dry run: ahead"
assert_contains "$OUT" "created=2 detached=$nexp dropped=$nexp issues=0 (dry run: nothing was changed)" "dry-run summary"
assert_eq "$before" "$(attached)" "dry run changed nothing"

# --- --now is a preview: refused without --dry-run, nothing changes (Issue 17 #1) ------------
before=$(attached)
rows=$(q "SELECT count(*) FROM events")
run_expect 2 "$V7FILL" maintain events --retention 30d --now "$(mon 4)T00:00:00Z"
assert_contains "$OUT" "--now previews a policy and needs --dry-run" "--now without --dry-run refused"
assert_eq "$before" "$(attached)" "a refused --now run changed no partition"
assert_eq "$rows" "$(q "SELECT count(*) FROM events")" "nor any row"
run_expect 0 "$V7FILL" maintain events --retention 30d --ahead 1 --dry-run --now "$(mon 4)T00:00:00Z"
assert_contains "$OUT" "would detach $(name 0)" "the preview judges the cutoff from T"
assert_contains "$OUT" "would create $(name 5)" "and the windows ahead from T"
assert_eq "$before" "$(attached)" "the preview changed nothing"

# --- a window that received rows within the quiet period is refused -------------------------
run_expect 0 "$V7FILL" retention events set 1d   # creates the v7fill schema
run_expect 0 "$V7FILL" retention events clear
sqlf <<SQL
CREATE TABLE IF NOT EXISTS v7fill.window_activity (target_schema text NOT NULL,
    target_table text NOT NULL, partition_name text NOT NULL, last_insert_at timestamptz NOT NULL,
    PRIMARY KEY (target_schema, target_table, partition_name));
INSERT INTO v7fill.window_activity VALUES ('public', 'events', '$newest_old', now() - interval '10 minutes');
SQL
run_expect 3 "$V7FILL" maintain events --retention 60d --ahead 2
echo "$OUT"
assert_contains "$OUT" "refused to retire $newest_old" "refusal names the window"
assert_contains "$OUT" "within the quiet period of 1h" "refusal says why"
assert_contains "$OUT" "a late row is arriving there right now" "refusal explains"
assert_contains "$OUT" "created=2 detached=$((nexp - 1)) dropped=$((nexp - 1)) issues=1" "summary with the refusal"
assert_contains "$(attached)" "$newest_old" "refused window still attached"
for w in $expected; do
    [ "$w" = "$newest_old" ] && continue
    assert_not_contains "$(attached)" "$w" "$w detached"
    assert_eq 0 "$(exists "$w")" "$w dropped"
done
assert_contains "$(attached)" "$(name 1)" "window ahead 1 created"
assert_contains "$(attached)" "$(name 2)" "window ahead 2 created"
assert_not_contains "$(attached)" "$(name 3)" "not more than --ahead"
assert_eq $((7 - nexp + 1)) "$(q "SELECT count(*) FROM events")" "the rows of the dropped windows are gone"

# a shorter quiet period lets it go
run_expect 0 "$V7FILL" maintain events --retention 60d --ahead 2 --quiet-period 5m
assert_contains "$OUT" "detached $newest_old" "retired after the quiet period"
assert_contains "$OUT" "created=0 detached=1 dropped=1 issues=0" "second run summary"
assert_eq 0 "$(exists "$newest_old")" "dropped"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.window_activity WHERE partition_name = '$newest_old'")" "activity row of a dropped window removed"
# nothing left to do
run_expect 0 "$V7FILL" maintain events --retention 60d --ahead 2
assert_contains "$OUT" "created=0 detached=0 dropped=0 issues=0" "idempotent"

# The sections below each add an old window (more than 730 days past) and retire it with
# --retention 730d by the real clock: a real run never pretends another now.
old_window() {   # old_window K: create month0+K's window with one row in it
    run_expect 0 "$V7FILL" partitions events --from "$(mon "$1")" --to "$(mon $(($1 + 1)))"
    q "INSERT INTO events (id, created_at, account_id, kind)
       SELECT uuid7_floor(t), t, 1, 'k' FROM (SELECT '$(mon "$1")'::timestamptz + interval '14 days' AS t) s" >/dev/null
}

# --- --detach-only keeps the table ------------------------------------------------------------
w=$(name -40)
old_window -40
run_expect 0 "$V7FILL" maintain events --retention 730d --ahead 0 --detach-only --quiet-period 0s
echo "$OUT"
assert_contains "$OUT" "kept public.$w as a standalone table (--detach-only)" "detach-only says so"
assert_not_contains "$(attached)" "$w" "detached"
assert_eq 1 "$(exists "$w")" "table kept"
assert_eq f "$(q "SELECT relispartition FROM pg_class WHERE relname = '$w'")" "no longer a partition"
assert_eq 1 "$(q "SELECT count(*) FROM $w")" "its row kept"
assert_not_contains "$OUT" "dropped public." "nothing dropped"

# --- rows arriving while the window is detached: kept, not dropped ----------------------------
w=$(name -39)
old_window -39
wts="$(mon -39)T12:00:00Z"
# An import batch writes into $w and stays open; maintain (its quiet-period check sees nothing
# committed) starts its DETACH ... CONCURRENTLY, which waits for the batch; only then does the
# batch commit.
hold_open batch "INSERT INTO events (id, created_at, account_id, kind) VALUES (uuid7_floor('$wts'::timestamptz + interval '1 day'), '$wts'::timestamptz + interval '1 day', 2, 'late');
INSERT INTO v7fill.window_activity VALUES ('public', 'events', '$w', now())
    ON CONFLICT (target_schema, target_table, partition_name) DO UPDATE SET last_insert_at = EXCLUDED.last_insert_at"
"$V7FILL" maintain events --retention 730d --ahead 0 >maintain.out 2>&1 &
v7=$!
poll_until "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
              AND query LIKE 'ALTER TABLE%DETACH%' AND wait_event_type = 'Lock')" \
    "maintain's DETACH to wait for the open batch"
hold_close batch
set +e; wait "$v7"; rc=$?; set -e
OUT=$(cat maintain.out)
echo "$OUT"
assert_eq 3 "$rc" "exit status of maintain with rows arriving during the detach"
assert_contains "$OUT" "detached $w" "detached after waiting for the batch"
assert_contains "$OUT" "but did not drop it: rows arrived during the detach" "kept because rows arrived"
assert_eq 1 "$(exists "$w")" "table kept"
assert_eq 2 "$(q "SELECT count(*) FROM $w")" "with the late row"
assert_eq "" "$(q "SELECT obj_description('$w'::regclass, 'pg_class')")" \
    "the kept table carries no retirement marker (its comment as before: none)"
run_expect 0 "$V7FILL" maintain events --retention 730d --ahead 0
assert_eq 1 "$(exists "$w")" "the next run does not drop the kept table"
q "DROP TABLE $w; DELETE FROM v7fill.window_activity" >/dev/null

# --- a DEFAULT partition means plain DETACH (said) ----------------------------------------------
w=$(name -38)
old_window -38
q "CREATE TABLE events_default PARTITION OF events DEFAULT" >/dev/null
run_expect 0 "$V7FILL" maintain events --retention 730d --ahead 0 --quiet-period 0s
echo "$OUT"
assert_contains "$OUT" "using plain DETACH PARTITION on public.events: it has a DEFAULT partition" "plain detach said"
assert_contains "$OUT" "detached $w" "detached without CONCURRENTLY"
assert_eq 0 "$(exists "$w")" "and dropped"
assert_contains "$(attached)" "events_default" "DEFAULT never retired"
q "DROP TABLE events_default" >/dev/null

# --- a DETACH CONCURRENTLY that stopped half-way is finalized ------------------------------------
w=$(name -37)
old_window -37
hold_open reader "SELECT count(*) FROM events"
psql -X -q -c "SET statement_timeout = '1s'" -c "ALTER TABLE events DETACH PARTITION $w CONCURRENTLY" >/dev/null 2>&1 || true
hold_close reader
assert_eq t "$(q "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = '$w'::regclass")" "test setup: detach pending"
run_expect 0 "$V7FILL" maintain events --retention 730d --ahead 0 --quiet-period 0s
echo "$OUT"
assert_contains "$OUT" "finalized a DETACH CONCURRENTLY" "pending detach finalized"
assert_eq 0 "$(exists "$w")" "then dropped"

# --- the quiet period is honoured exactly (Issue 17 #0) --------------------------------------------
# An import writes into an old window; 2 s later a quiet period of 1m refuses it, 1s retires it.
w=$(name -30)
run_expect 0 "$V7FILL" partitions events --from "$(mon -30)" --to "$(mon -29)"
printf 'created_at,account_id,kind\n%sT12:00:00Z,7,k\n' "$(mon -30)" >quiet.csv
run_expect 0 "$V7FILL" import events quiet.csv --no-progress
assert_eq 1 "$(q "SELECT count(*) FROM $w")" "test setup: the import wrote into $w"
sleep 2
run_expect 3 "$V7FILL" maintain events --retention 730d --ahead 0 --quiet-period 1m
assert_contains "$OUT" "refused to retire $w" "a quiet period longer than the time since the import refuses"
assert_eq 1 "$(exists "$w")" "refused window kept"
run_expect 0 "$V7FILL" maintain events --retention 730d --ahead 0 --quiet-period 1s
assert_contains "$OUT" "detached $w" "a quiet period shorter than the time since the import's last batch retires"
assert_eq 0 "$(exists "$w")" "and drops it"

# --- a DETACH refused by a foreign key: the dry run and the hint name it (Issue 17 #10) ----------
sqlf <<'SQL'
CREATE TABLE fkp (id uuid PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE fkr (pid uuid REFERENCES fkp (id));
SQL
w=$(date -u -d "$month0 -40 months" +fkp__%Y_%m)
run_expect 0 "$V7FILL" partitions fkp --from "$(mon -40)" --to "$(mon -39)"
q "INSERT INTO fkp SELECT uuid7_floor('$(mon -40)'::timestamptz + interval '3 days');
   INSERT INTO fkr SELECT id FROM fkp" >/dev/null
run_expect 3 "$V7FILL" maintain fkp --retention 730d --ahead 0 --dry-run
echo "$OUT"
assert_contains "$OUT" "could not detach $w" "dry run: the detach would be refused"
assert_contains "$OUT" "rows of public.fkr (foreign key fkr_pid_fkey) reference it" "dry run names the foreign key"
assert_not_contains "$OUT" "would drop" "dry run promises no drop"
run_expect 3 "$V7FILL" maintain fkp --retention 730d --ahead 0
echo "$OUT"
assert_contains "$OUT" "SQLSTATE 23503" "real run: refused by the foreign key"
assert_contains "$OUT" "HINT: Rows of public.fkr (foreign key fkr_pid_fkey) reference rows of the window" "hint names the referencing table and key"
assert_not_contains "$OUT" "finalizes it" "no false detach-pending hint"
assert_eq f "$(q "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = '$w'::regclass")" "still attached, not pending"
q "DELETE FROM fkr" >/dev/null
run_expect 0 "$V7FILL" maintain fkp --retention 730d --ahead 0 --dry-run
assert_contains "$OUT" "would drop public.$w" "without referencing rows it would retire"

# --- retention from the store; none means nothing is retired ------------------------------------
run_expect 0 "$V7FILL" maintain events --ahead 3
assert_contains "$OUT" "no retention" "no retention said"
assert_contains "$OUT" "detached=0 dropped=0" "nothing retired without retention"
run_expect 0 "$V7FILL" retention events set 1d
run_expect 0 "$V7FILL" maintain events --ahead 0 --dry-run --now "$(date -u -d "$month0 +5 months" +%Y-%m-%d)T00:00:00Z"
assert_contains "$OUT" "retention 1d (stored by v7fill, v7fill.retention)" "stored retention used"
assert_contains "$OUT" "would detach $(name 2)" "stored retention applied"

# --- the import records window activity (once the pipeline calls maintain_note_activity) -------
cat >late.csv <<CSV
created_at,account_id,kind
$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ),9,k
CSV
q "DELETE FROM v7fill.window_activity" >/dev/null
if "$V7FILL" import events late.csv --no-progress >import.log 2>&1 \
   && [ "$(q "SELECT count(*) FROM v7fill.window_activity")" != 0 ]; then
    cur=$(date -u +events__%Y_%m)
    assert_eq 1 "$(q "SELECT count(*) FROM v7fill.window_activity WHERE partition_name = '$cur' AND last_insert_at > now() - interval '5 minutes'")" "import noted its window"
    run_expect 3 "$V7FILL" maintain events --retention 1d --ahead 0 --dry-run --now "$(mon 9)T00:00:00Z"
    assert_contains "$OUT" "refused to retire $cur" "window the import just wrote is refused"
    echo "import activity: checked"
else
    echo "skipped: the import does not record window activity yet ($(tail -n 1 import.log))"
fi

# --- maintain_note_activity, the import's side of the contract, through a tiny C program -------
# compiled against the libv7fill.a next to the binary under test.
cat >note.c <<'C'
#include <stdio.h>
#include "v7fill/maintain.h"
int
main(int argc, char **argv)
{
    PgConn *c = NULL;
    Err err = {0};

    if (!pg_connect(NULL, &c, &err) || !maintain_setup(c, &err) || !pg_exec(c, "BEGIN", &err) ||
        !maintain_note_activity(c, argv[1], argv[2], (const char *const *) argv + 3,
                                (size_t) (argc - 3), &err) ||
        !pg_exec(c, argc > 3 && argv[3][0] == '!' ? "ROLLBACK" : "COMMIT", &err))
    {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    pg_close(c);
    return 0;
}
C
lib=$(dirname "$V7FILL")/libv7fill.a
libs="$(pkg-config --libs libpq libzstd libcrypto jansson) -lcsv -lm"
cflags="-std=c11 -D_GNU_SOURCE -I$V7FILL_ROOT/include $(pkg-config --cflags libpq)"
if cc $cflags -o note note.c "$lib" $libs 2>cc.log \
   || cc $cflags -fsanitize=address,undefined -o note note.c "$lib" $libs -fsanitize=address,undefined 2>cc.log; then
    q "DELETE FROM v7fill.window_activity" >/dev/null
    ./note public events events__a 'we"ird\,{name}' events__a || fail "note_activity failed"
    assert_eq 'events__a|t
we"ird\,{name}|t' "$(q "SELECT partition_name, last_insert_at > now() - interval '1 minute' FROM v7fill.window_activity ORDER BY 1")" "noted, duplicates once, any name"
    # a rolled-back batch leaves no trace
    ./note public events '!rolled_back' || fail "note_activity failed"
    assert_eq 0 "$(q "SELECT count(*) FROM v7fill.window_activity WHERE partition_name = '!rolled_back'")" "rolled back with its batch"
    # refreshed by every batch (a record seconds old too: the quiet period is exact), never moved back
    q "UPDATE v7fill.window_activity SET last_insert_at = now() - interval '2 minutes' WHERE partition_name = 'events__a';
       UPDATE v7fill.window_activity SET last_insert_at = now() - interval '30 seconds' WHERE partition_name <> 'events__a'" >/dev/null
    ./note public events events__a 'we"ird\,{name}' || fail "note_activity failed"
    assert_eq 'true|true' "$(q "SELECT string_agg((last_insert_at > now() - interval '10 seconds')::text, '|' ORDER BY partition_name) FROM v7fill.window_activity")" "every batch refreshes"
    q "UPDATE v7fill.window_activity SET last_insert_at = now() + interval '1 hour' WHERE partition_name = 'events__a'" >/dev/null
    ./note public events events__a || fail "note_activity failed"
    assert_eq t "$(q "SELECT last_insert_at > now() + interval '50 minutes' FROM v7fill.window_activity WHERE partition_name = 'events__a'")" "never moved back"
    ./note public events || fail "no partitions: nothing to do"
else
    echo "skipped: could not compile the maintain_note_activity helper ($(head -n 2 cc.log))"
fi

# --- the library's real path ignores a pretended now (Issue 17 #1) ------------------------------
# maintain_run with now_us four months ahead and no dry run: it must neither retire the window
# live by the real clock nor create windows around the pretended now.
cat >guard.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "v7fill/maintain.h"
int
main(int argc, char **argv)
{
    PgConn *c = NULL;
    TargetTable *t = NULL;
    MaintainOptions o;
    MaintainResult r;
    Err err = {0};

    (void) argc;
    maintain_options_default(&o);
    o.now_us = strtoll(argv[2], NULL, 10);
    o.retention_us = INT64_C(30) * 86400 * 1000000;
    o.ahead = 1;
    o.quiet_period_us = 0;
    if (!pg_connect(NULL, &c, &err) || !catalog_load_target(c, argv[1], &t, &err) ||
        !maintain_run(c, t, &o, &r, &err))
    {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    catalog_target_free(t);
    pg_close(c);
    return 0;
}
C
if cc $cflags -o guard guard.c "$lib" $libs 2>cc.log \
   || cc $cflags -fsanitize=address,undefined -o guard guard.c "$lib" $libs -fsanitize=address,undefined 2>cc.log; then
    q "INSERT INTO events (id, created_at, account_id, kind) VALUES (uuid7_floor(now()), now(), 3, 'now')" >/dev/null
    rows=$(q "SELECT count(*) FROM $(name 0)")
    ./guard events "$(( $(date -u -d "$(mon 4)" +%s) * 1000000 ))" || fail "maintain_run failed"
    assert_contains "$(attached)" "$(name 0)" "the real current window is not retired"
    assert_eq "$rows" "$(q "SELECT count(*) FROM $(name 0)")" "none of its rows lost"
    assert_contains "$(attached)" "$(name 1)" "windows ahead counted from the real now"
    assert_not_contains "$(attached)" "$(name 4)" "no window created around the pretended now"
else
    echo "skipped: could not compile the maintain_note_activity helper ($(head -n 2 cc.log))"
fi
