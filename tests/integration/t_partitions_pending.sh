# A partition left "detach pending" (a DETACH ... CONCURRENTLY that stopped half-way) is not a
# window: PostgreSQL routes no row to it and queries do not see it.  --list shows it apart,
# partitions/import stop with an issue naming it and the SQL (PostgreSQL refuses a partition
# overlapping it), report does not count it, maintain reports it while its window is not past
# the cutoff and finalizes it once it is; the 55P03 hint of the detach that left it says so, and
# the dry run says what the real run does (Issue 17 #2).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC
sqlf -f "$V7FILL_ROOT/contrib/sql/v7fill_uuid7.sql"
sqlf <<'SQL'
CREATE TABLE dp (id uuid PRIMARY KEY, created_at timestamptz, v text) PARTITION BY RANGE (id);
SQL
m0=$(date -u +%Y-%m-01)
mon() { date -u -d "$m0 $1 months" +%Y-%m-%d; }
# An old window (retired by 730d) and the recent ones (never retired by it).
run_expect 0 "$V7FILL" partitions dp --from "$(mon -40)" --to "$(mon -39)"
run_expect 0 "$V7FILL" partitions dp --from "$(mon -2)" --to "$(mon 1)"
w=$(date -u -d "$m0 -40 months" +dp__%Y_%m)
q "INSERT INTO dp SELECT uuid7_floor(t), t, 'old' FROM (SELECT '$(mon -40)'::timestamptz + interval '3 days' AS t) s" >/dev/null

# --- maintain's detach stops half-way: the hint says the partition is now detach pending ------
# A reader of dp stays open until maintain has exited: the detach's wait for it times out.
hold_open reader "SELECT count(*) FROM dp"
run_expect 3 "$V7FILL" maintain dp --retention 730d --ahead 0 --lock-timeout 1000
hold_close reader
echo "$OUT"
assert_contains "$OUT" "SQLSTATE 55P03" "test setup: the detach timed out"
assert_contains "$OUT" "public.$w is now \"detach pending\"" "the 55P03 hint says the partition is now detach pending"
assert_eq t "$(q "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = '$w'::regclass")" "test setup: detach pending"
assert_eq 0 "$(q "SELECT count(*) FROM dp WHERE v = 'old'")" "test setup: queries no longer see its row"

# --- --list shows it apart, never as a window ---------------------------------------------------
run_expect 0 "$V7FILL" partitions dp --list
echo "$OUT"
assert_contains "$OUT" "$w (detach pending)" "--list marks it"
assert_contains "$OUT" "partitions=3 default=0 gaps=0 detach_pending=1" "not counted as a window"
run_expect 0 "$V7FILL" partitions dp --list --json
assert_eq "$w" "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["detach_pending"][0]["name"])' "$OUT")" "--json lists it under detach_pending"
assert_not_contains "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(" ".join(p["name"] for p in d["partitions"]))' "$OUT")" "$w" "not among the partitions"

# --- a longer retention: maintain reports it (dry run and real run alike), leaves it ------------
run_expect 0 "$V7FILL" retention dp set '10 years'
run_expect 3 "$V7FILL" maintain dp --ahead 0 --dry-run
dry=$(echo "$OUT" | grep "^ISSUE:.*detach pending")
assert_contains "$dry" "$w" "dry run reports the pending partition"
run_expect 3 "$V7FILL" maintain dp --ahead 0
echo "$OUT"
assert_eq "$dry" "$(echo "$OUT" | grep "^ISSUE:.*detach pending")" "the real run says what the dry run said"
assert_contains "$OUT" "DETACH PARTITION \"public\".\"$w\" FINALIZE" "the hint gives the SQL"
assert_eq t "$(q "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = '$w'::regclass")" "left pending"

# --- partitions: the window is not covered; an issue names the partition and the SQL ------------
run_expect 3 "$V7FILL" partitions dp --from "$(mon -40)" --to "$(mon -39)"
echo "$OUT"
assert_contains "$OUT" "held by $w, detach pending" "not 'already covered'"
assert_contains "$OUT" "is held by partition public.$w, which is \"detach pending\"" "the issue names it"
assert_contains "$OUT" "ATTACH PARTITION \"public\".\"$w\" FOR VALUES FROM" "the hint says how to restore it"
run_expect 3 "$V7FILL" partitions dp --from "$(mon -40)" --to "$(mon -39)" --dry-run
assert_contains "$OUT" "not created, a detach-pending partition holds it" "the dry run says the same"

# --- import: stops with the same issue instead of rejecting every row with 23514 ----------------
printf 'created_at,v\n%sT12:00:00Z,late row\n' "$(date -u -d "$(mon -40) +10 days" +%Y-%m-%d)" >late.csv
run_expect 3 "$V7FILL" import dp late.csv --no-progress --rejects late.rej
assert_contains "$OUT" "held by partition public.$w, which is \"detach pending\"" "import names it"
assert_not_contains "$OUT" "23514" "no row rejected as unroutable"

# --- report does not count rows queries cannot see, and shows the partition apart ----------------
run_expect 0 "$V7FILL" report dp --exact
echo "$OUT"
assert_not_contains "$(grep -v '^  detach pending: ' <<<"$OUT")" "$w" "report: the pending partition is no window"
fin="ALTER TABLE \"public\".\"dp\" DETACH PARTITION \"public\".\"$w\" FINALIZE"
assert_contains "$OUT" "  detach pending: public.$w [$(mon -40), $(mon -39)): not a window; rows there are invisible to queries (1); finalize: $fin;" \
    "report: the text shows it as detach pending, with its rows and the SQL"
run_expect 0 "$V7FILL" report dp --exact --html report.html
run_expect 0 "$V7FILL" report dp --exact --json
assert_eq "$w|$(mon -40)T00:00:00.000Z|1|$fin" \
    "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); p=d["detach_pending"]; assert len(p) == 1; p=p[0]; print(p["name"], p["lower"], p["rows"], p["finalize_sql"], sep="|")' "$OUT")" \
    "report --json: a detach_pending entry with its range, rows and the SQL"
assert_not_contains "$(python3 -c 'import json,sys; print(" ".join(w["name"] for w in json.loads(sys.argv[1])["windows"]))' "$OUT")" "$w" \
    "report --json: not among the windows"
html=$(python3 - <<'PY'
import html, re
page = open("report.html", encoding="utf-8").read()
for id_ in ("detach-pending-note", "detach-pending", "windows"):
    m = re.search(r'<(\w+) id="%s"[^>]*>(.*?)</\1>' % id_, page, re.S)
    print(id_ + ":", " ".join(html.unescape(re.sub(r"<[^>]+>", " ", m.group(2))).split()) if m else "")
PY
)
echo "$html"
assert_contains "$html" "1 partition is left \"detach pending\"" "report --html: a note says it is detach pending"
assert_contains "$html" "public.$w $(mon -40) $(mon -39) 1 finalize: $fin;" "report --html: the partition, its range, rows and the SQL"
assert_not_contains "$(grep '^windows:' <<<"$html")" "$w" "report --html: not among the windows"

# --- following the hint restores the window ------------------------------------------------------
bound=$(q "SELECT pg_get_expr(relpartbound, 0) FROM pg_class WHERE relname = '$w'")
q "ALTER TABLE dp DETACH PARTITION $w FINALIZE" >/dev/null
q "ALTER TABLE dp ATTACH PARTITION $w $bound" >/dev/null
assert_eq 1 "$(q "SELECT count(*) FROM dp WHERE v = 'old'")" "its row is back"

# --- past the cutoff: the dry run says it would finalize, the real run does -----------------------
# A DETACH ... CONCURRENTLY of partition $1 that a reader makes stop half-way.
leave_pending() {
    hold_open reader "SELECT count(*) FROM dp"
    psql -X -q -c "SET statement_timeout = '1s'" -c "ALTER TABLE dp DETACH PARTITION $1 CONCURRENTLY" >/dev/null 2>&1 || true
    hold_close reader
    assert_eq t "$(q "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = '$1'::regclass")" "test setup: $1 detach pending"
}
leave_pending "$w"
run_expect 0 "$V7FILL" maintain dp --retention 730d --ahead 0 --dry-run
assert_contains "$OUT" "would detach $w" "dry run: retired"
assert_contains "$OUT" "(finalize a DETACH CONCURRENTLY that had stopped half-way)" "dry run: by finalizing"
run_expect 0 "$V7FILL" maintain dp --retention 730d --ahead 0
assert_contains "$OUT" "finalized a DETACH CONCURRENTLY" "real run finalizes"
assert_contains "$OUT" "dropped public.$w" "and drops"
assert_eq 0 "$(q "SELECT count(*) FROM pg_class WHERE relname = '$w'")" "gone"

# --- a pending partition in a window ahead: maintain reports it once, not from both the windows
# --- ahead and its pending check ---------------------------------------------------------------
run_expect 0 "$V7FILL" partitions dp --from "$(mon 1)" --to "$(mon 2)"
a=$(date -u -d "$m0 +1 months" +dp__%Y_%m)
leave_pending "$a"
for dry in --dry-run ""; do
    run_expect 3 "$V7FILL" maintain dp --ahead 2 $dry
    echo "$OUT"
    assert_eq 1 "$(grep -c "^ISSUE:.*$a" <<<"$OUT")" "maintain $dry: the pending partition ahead is reported once"
    assert_contains "$OUT" "issues=1" "maintain $dry: counted once"
done
