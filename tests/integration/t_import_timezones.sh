# --input-timezone reads a local time as PostgreSQL reads it in that zone
# (timestamp 'L' AT TIME ZONE z): every quarter hour of the day before, of and
# after each UTC-offset change of 2005-2025, in zones with ordinary DST, a
# 30-minute DST, DST at midnight, a two-hour DST, a change between two standard
# offsets, a skipped calendar day, and one without DST; the server is the oracle.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
sqlf -c "CREATE TABLE tz (id uuid NOT NULL, created_at timestamptz NOT NULL, zone text,
                          local timestamp, PRIMARY KEY (id)) PARTITION BY RANGE (id)"

zones="America/New_York Europe/Berlin Australia/Lord_Howe America/Sao_Paulo Antarctica/Troll
       Europe/Moscow Pacific/Apia Asia/Kolkata"
expected=0
for z in $zones; do
    f="$(echo "$z" | tr / _).csv"
    # The days on which the zone's offset changes, by the server's reading, the
    # day either side, and for a zone that never changes a few ordinary days.
    psql -X -q -v ON_ERROR_STOP=1 -v zone="$z" >"$f" <<'SQL'
COPY (
  WITH days AS (
    SELECT d::date AS d FROM generate_series(timestamp '2005-01-01', timestamp '2025-12-30', '1 day') d
    WHERE ((d + interval '1 day') AT TIME ZONE :'zone') - (d AT TIME ZONE :'zone')
          <> interval '24 hours'
    UNION SELECT date '2024-01-15' UNION SELECT date '2024-07-15'),
  around AS (SELECT DISTINCT d + k AS d FROM days, generate_series(-1, 1) k)
  SELECT DISTINCT to_char(t, 'YYYY-MM-DD HH24:MI:SS') AS created_at, :'zone' AS zone,
         to_char(t, 'YYYY-MM-DD HH24:MI:SS') AS local
  FROM around, generate_series(d::timestamp, d::timestamp + interval '23 hours 45 minutes',
                               interval '15 minutes') t
  ORDER BY 1
) TO STDOUT (FORMAT csv, HEADER)
SQL
    rows=$(( $(wc -l <"$f") - 1 ))
    [ "$rows" -ge 192 ] || fail "$z: only $rows local times generated"
    expected=$((expected + rows))
    run_expect 0 "$V7FILL" -q import tz "$f" --input-timezone "$z" --granularity year \
        --no-progress --no-analyze --rejects "$f.rejects" --report-json "$f.json"
    assert_eq "$rows" "$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["inserted"])' "$f.json")" \
        "$z: every local time inserted"
done

assert_eq "$expected" "$(q "SELECT count(*) FROM tz")" "rows in the table"
# The gaps and overlaps are where the two readings could differ; show any.
diff=$(q "SELECT zone || ' ' || local || ': v7fill ' || created_at || ', PostgreSQL '
                 || (local AT TIME ZONE zone)
          FROM tz WHERE created_at <> local AT TIME ZONE zone ORDER BY zone, local LIMIT 10")
assert_eq "" "$diff" "every local time reads as PostgreSQL reads it"
# the comparison covered transitions: some local times fell in a gap or an overlap
assert_eq t "$(q "SELECT count(*) >= 8 FROM tz
                  WHERE (local AT TIME ZONE zone) AT TIME ZONE zone <> local")" "gaps covered"
assert_eq t "$(q "SELECT count(*) >= 8 FROM tz, (VALUES (interval '30 minutes'), (interval '1 hour'),
                                                 (interval '2 hours')) k(k)
                  WHERE ((local AT TIME ZONE zone) - k) AT TIME ZONE zone = local")" "overlaps covered"
# and each id carries its row's time to the millisecond
assert_eq 0 "$(q "SELECT count(*) FROM tz WHERE
    ('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint
    <> floor(extract(epoch FROM created_at) * 1000)::bigint")" "id time = event time"
echo "ok: $expected local times in $(echo $zones | wc -w) zones read as PostgreSQL reads them"

# --- windows in a local zone: a table whose partitions were made with
# --window-tz Europe/Berlin gets its new windows in Berlin with the same
# option, and an import without it stops before making a partition that
# would not meet them.  The input is in New York time: the reader parses
# New York while the writer computes Berlin windows (two zones, two threads).
sqlf -c "CREATE TABLE lw (id uuid NOT NULL, created_at timestamptz NOT NULL, local timestamp,
                          PRIMARY KEY (id)) PARTITION BY RANGE (id)"
run_expect 0 "$V7FILL" -q partitions lw --from 2024-01-01 --to 2024-07-31 --granularity month \
    --window-tz Europe/Berlin
python3 - <<'PY'
import datetime as dt
with open("lw.csv", "w") as f:
    f.write("created_at,local\n")
    t = dt.datetime(2024, 6, 1)
    while t < dt.datetime(2024, 10, 1):
        s = t.strftime("%Y-%m-%d %H:%M:%S")
        f.write(f"{s},{s}\n")
        t += dt.timedelta(minutes=37)
    # 19:30 in New York on July 31st is 01:30 on August 1st in Berlin
    f.write("2024-07-31 19:30:00,2024-07-31 19:30:00\n")
PY
lw_rows=$(( $(wc -l <lw.csv) - 1 ))
parts_before=$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'lw'::regclass")
run_expect 3 "$V7FILL" import lw lw.csv --input-timezone America/New_York --no-progress \
    --batch-rows 500 --rejects lw.rejects
assert_contains "$OUT" "not at a midnight in UTC" "the error says why"
assert_contains "$OUT" "UTC+02:00" "the error names the offset"
assert_contains "$OUT" "--window-tz" "the error says what to give"
assert_eq "$parts_before" "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'lw'::regclass")" \
    "no partition made in UTC"
run_expect 0 "$V7FILL" plan lw lw.csv --input-timezone America/New_York --window-tz Europe/Berlin \
    --no-progress
assert_contains "$OUT" "lw__2024_08 [2024-07-31T22:00:00Z, 2024-08-31T22:00:00Z)" "plan: August in Berlin"
run_expect 0 "$V7FILL" import lw lw.csv --input-timezone America/New_York --window-tz Europe/Berlin \
    --no-progress --batch-rows 500 --rejects lw.rejects --report-json lw.json
assert_contains "$OUT" "[2024-07-31T22:00:00Z, 2024-08-31T22:00:00Z) lw__2024_08" \
    "the report shows a local window's instants"
assert_eq "$lw_rows" "$(q "SELECT count(*) FROM lw")" "every row"
assert_eq 0 "$(q "SELECT count(*) FROM lw WHERE created_at <> local AT TIME ZONE 'America/New_York'")" \
    "New York times read as PostgreSQL reads them"
# every partition is a whole Berlin month, none a sliver: January to July made
# first, August to October by the import (September 30th's last New York
# evening is October 1st in Berlin)
run_expect 0 "$V7FILL" partitions lw --list --window-tz Europe/Berlin --json
assert_eq "10 0" "$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
ps = d["partitions"]
print(len(ps), sum(1 for p in ps if p["window"] != "month"))' "$OUT")" "ten Berlin months, nothing irregular"
# each row sits in the Berlin month of its time
assert_eq 0 "$(q "SELECT count(*) FROM lw
    WHERE tableoid::regclass::text
          <> 'lw__' || to_char(created_at AT TIME ZONE 'Europe/Berlin', 'YYYY_MM')")" \
    "rows in their Berlin month"
# a --window-tz that names no zone: refused before anything is read or written
rows_now=$(q "SELECT count(*) FROM lw")
run_expect 3 "$V7FILL" import lw lw.csv --window-tz Mars/Olympus_Mons --no-progress \
    --rejects lw.rejects
assert_contains "$OUT" "Mars/Olympus_Mons" "the bad zone is named"
assert_eq "$rows_now" "$(q "SELECT count(*) FROM lw")" "nothing written"
