#!/usr/bin/env bash
# make demo: the main job on the bundled example, in a throwaway cluster that is
# removed at the end.  Shows: plan, import, the report, a re-run that inserts
# nothing, the partitions, and an id range query that touches one partition.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
V7FILL=${V7FILL:-$root/build/v7fill}
data=$root/examples/events.csv.zst
work=$(mktemp -d)
eval "$("$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"; rm -rf "$work"' EXIT
cd "$work"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "throwaway cluster at $PGHOST; example schema (examples/schema.sql)"
psql -X -q -v ON_ERROR_STOP=1 -f "$root/examples/schema.sql"
psql -X -q -c '\d events'

step "v7fill plan events events.csv.zst --id-column id   (reads everything, writes nothing)"
"$V7FILL" plan events "$data" --id-column id | sed -n '1,12p'
echo "   ..."

step "v7fill import events events.csv.zst --id-column id"
"$V7FILL" import events "$data" --id-column id --rejects events.rejects.csv

step "v7fill report events --retention 2y   (windows vs retention, delays, verdict)"
"$V7FILL" report events --retention 2y --html report.html
echo "(also written as one self-contained HTML page: report.html)"

step "the rejects file: file, line, reason, SQLSTATE, raw record"
cat events.rejects.csv

step "again: a re-run inserts nothing"
"$V7FILL" import events "$data" --id-column id --rejects events.rejects-2.csv --no-progress | tail -n 1

step "v7fill partitions events --list"
"$V7FILL" partitions events --list | tail -n 8

step "one month of events as an id range: only that month's partition is scanned"
from=$("$V7FILL" uuid floor 2025-06-01)
to=$("$V7FILL" uuid floor 2025-07-01)
echo "SELECT count(*) FROM events WHERE id >= '$from' AND id < '$to';"
psql -X -q -At -c "SELECT count(*) FROM events WHERE id >= '$from' AND id < '$to'"
psql -X -q -c "EXPLAIN (COSTS OFF) SELECT count(*) FROM events WHERE id >= '$from' AND id < '$to'"
step "done; the cluster is removed"
