# v7fill report: windows with rows and retirement dates, near-cutoff windows, the delay
# distribution merged over runs (percentiles checked against a sort of the same delays),
# the largest delays named by file:line, id and source reference (the record's values as
# CSV without a template; "(origin not recorded)" for older statistics), --since, the
# verdict both ways and without retention, --json, and --html (one self-contained page that
# parses and carries the numbers of the JSON report).
#
# Data comes from a real import when the import records statistics in v7fill.run;
# otherwise from v7fill.run rows written here in the tracker's JSON format.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC
sqlf -f "$V7FILL_ROOT/examples/schema.sql"
month0=$(date -u +%Y-%m-01)
from=$(date -u -d "$month0 -7 months" +%Y-%m-%d)
to=$(date -u -d "$month0 +2 months" +%Y-%m-%d)
run_expect 0 "$V7FILL" partitions events --from "$from" --to "$to"

jfield() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# Rows with known delays (seconds), each named by its note: run 1 has the long tail
# (the largest, 45 days, is "r0"), run 2 only short delays.
python3 - <<'PY'
import csv, random, time, json
random.seed(7)
now = time.time()
def rows(prefix, delays):
    out = []
    for i, d in enumerate(delays):
        ts = now - d
        # One reference with markup in it: the HTML page must escape it.
        out.append((prefix + str(i) + ('<i>&"q' if prefix == "s" and i == 0 else ""), d, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".%03dZ" % int((ts % 1) * 1000)))
    return out
d1 = [45 * 86400] + [random.uniform(3600, 2 * 86400) for _ in range(240)] \
     + [random.uniform(2 * 86400, 20 * 86400) for _ in range(50)] \
     + [random.uniform(20 * 86400, 40 * 86400) for _ in range(9)]
d2 = [7 * 3600] + [random.uniform(3600, 6 * 3600) for _ in range(99)]
for name, rs in (("run1", rows("r", d1)), ("run2", rows("s", d2))):
    with open(name + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["created_at", "account_id", "kind", "amount", "payload", "note"])
        for note, d, ts in rs:
            w.writerow([ts, 1, "k", "1.00", "{}", note])
    json.dump([[note, d, ts] for note, d, ts in rs], open(name + ".json", "w"))
json.dump({"now": now}, open("gen.json", "w"))
PY

# Try the real import first (T_REPORT_CRAFTED=1 forces the crafted rows, to test that path).
real=no
if [ "${T_REPORT_CRAFTED:-0}" != 1 ] && "$V7FILL" import events run1.csv --retention 90d --source-ref 'legacy.orders:{note}' \
        --no-progress >import1.log 2>&1 \
   && [ "$(q "SELECT count(*) FROM v7fill.run r WHERE r.stats ->> 'format' LIKE 'v7fill-tracker/%'
              OR EXISTS (SELECT 1 FROM jsonb_each(r.stats) e WHERE e.value ->> 'format' LIKE 'v7fill-tracker/%')")" = 1 ]; then
    run_expect 0 "$V7FILL" import events run2.csv --retention 90d --source-ref 'legacy.orders:{note}' --no-progress
    real=yes
    echo "data: real imports (the import records statistics)"
else
    echo "data: crafted v7fill.run rows (the import records no statistics, or T_REPORT_CRAFTED=1)"
    # The rows themselves, so that windows have counts.
    q "TRUNCATE events" >/dev/null
    q "DELETE FROM v7fill.run" >/dev/null 2>&1 || true
    sqlf -f "$V7FILL_ROOT/contrib/sql/v7fill_uuid7.sql"
    for f in run1 run2; do
        python3 -c '
import csv, json, sys
w = csv.writer(sys.stdout)
for note, d, ts in json.load(open(sys.argv[1])):
    w.writerow([note, ts])' "$f.json" >"$f.rows"
        psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE TEMP TABLE x (note text, ts timestamptz);
\copy x FROM '$T_TMP/$f.rows' WITH (FORMAT csv)
INSERT INTO events (id, created_at, account_id, kind, amount, payload, note)
SELECT uuid7_floor(ts), ts, 1, 'k', 1.00, '{}', note FROM x;
SQL
    done
    q "ANALYZE events" >/dev/null
    # v7fill's schema (state_setup) through a command that creates it.
    run_expect 0 "$V7FILL" retention events set 1d
    run_expect 0 "$V7FILL" retention events clear
    for f in run1 run2; do
        python3 - "$f" >"$f.stats" <<'PY'
import json, sys, time, calendar
name = sys.argv[1]
now = json.load(open("gen.json"))["now"]
rows = json.load(open(name + ".json"))
def fine(v):
    v = max(0, v)
    if v < 256: return v
    e = v.bit_length() - 1
    return 256 + (e - 8) * 128 + ((v >> (e - 7)) & 127)
edges = [0, 1000, 10**4, 10**5, 10**6, 10**7, 60 * 10**6, 600 * 10**6, 3600 * 10**6,
         6 * 3600 * 10**6] + [d * 86400 * 10**6 for d in (1, 2, 7, 14, 30, 60, 90, 180, 365)]
labels = ["<1ms", "1ms", "10ms", "100ms", "1s", "10s", "1min", "10min", "1h", "6h", "1d", "2d",
          "7d", "14d", "30d", "60d", "90d", "180d", "365d"]
ins = int(now * 1e6)
hist, disp, wins, items = {}, [0] * len(edges), {}, []
for note, d, ts in rows:
    dus = int(round(d * 1e6))
    hist[fine(dus)] = hist.get(fine(dus), 0) + 1
    disp[max(i for i in range(len(edges)) if dus >= edges[i])] += 1
    t = time.gmtime(ins / 1e6 - d)
    lo = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0))
    hi = calendar.timegm((t.tm_year + (t.tm_mon == 12), t.tm_mon % 12 + 1, 1, 0, 0, 0))
    w = wins.setdefault(lo, {"lower_us": lo * 10**6, "upper_us": hi * 10**6, "on_time": 0,
                             "near_cutoff": 0, "expired": 0})
    w["on_time"] += 1
    items.append((dus, note))
items.sort(key=lambda x: -x[0])
doc = {"format": "v7fill-tracker/1", "retention_us": 90 * 86400 * 10**6,
       "counts": {"on_time": len(rows), "near_cutoff": 0, "expired": 0},
       "delay_us": {"min": min(x[0] for x in items), "max": max(x[0] for x in items)},
       "histogram": {"layout": "log2-sub128-us", "buckets": sorted([k, v] for k, v in hist.items())},
       "display": [{"ge_us": edges[i], "label": labels[i], "count": disp[i]} for i in range(len(edges))],
       "largest": [{"delay_us": dus, "id_us": ins - dus, "inserted_us": ins, "class": "on_time",
                    "ref": "legacy.orders:" + note, "ref_truncated": False} for dus, note in items[:10]],
       "windows": [wins[k] for k in sorted(wins)]}
print(json.dumps(doc))
PY
        psql -X -q -v ON_ERROR_STOP=1 -v stats="$(cat "$f.stats")" >/dev/null <<'SQL'
INSERT INTO v7fill.run (target_schema, target_table, command, status, elapsed_s, rows_read,
                        inserted, duplicates, rejected, partitions_created, stats)
VALUES ('public', 'events', 'import', 'done', 1, 0, 0, 0, 0, 0, :'stats'::jsonb);
SQL
    done
fi
assert_eq 400 "$(q "SELECT count(*) FROM events")" "rows in the table"

# --- JSON report: windows, rows, retirement, near cutoff ---------------------------------
"$V7FILL" report events --retention 90d --exact --json >r90.json || fail "report --json failed"
python3 - <<'PY' || fail "windows of the JSON report"
import json, subprocess, datetime
d = json.load(open("r90.json"))
now = datetime.datetime.fromisoformat(d["now"].replace("Z", "+00:00")).timestamp() * 1e6
R = 90 * 86400 * 1e6
counts = dict(line.split("|") for line in subprocess.run(
    ["psql", "-X", "-At", "-c", "SELECT tableoid::regclass::text, count(*) FROM events GROUP BY 1"],
    capture_output=True, text=True, check=True).stdout.split())
assert d["retention"]["source"] == "--retention", d["retention"]
assert len(d["windows"]) == 9, len(d["windows"])
near = []
for w in d["windows"]:
    assert w["rows"] == int(counts.get(w["name"], 0)), (w["name"], w["rows"], counts)
    assert w["rows_exact"]
    left = w["upper_us"] + R - now
    horizon = max(R / 10, w["upper_us"] - w["lower_us"])
    state = "past_cutoff" if left < 0 else "near_cutoff" if left <= horizon else "live"
    assert abs(w["time_left_us"] - left) < 2e6, (w["name"], w["time_left_us"], left)
    assert w["state"] == state, (w["name"], w["state"], state)
    if state == "near_cutoff":
        near.append(w["name"])
assert d["near_cutoff_windows"] == near, (d["near_cutoff_windows"], near)
assert near, "some window is near the cutoff with 90d and monthly windows"
PY

# --- the delay distribution against a sort of the same delays ----------------------------
python3 - "$real" <<'PY' || fail "delay distribution"
import json, math, sys
real = sys.argv[1] == "yes"
d = json.load(open("r90.json"))
delays = sorted(int(round(x[1] * 1e6)) for f in ("run1", "run2") for x in json.load(open(f + ".json")))
st = d["delay"]
assert st["rows"] == len(delays) == 400, st["rows"]
assert d["runs"]["count"] == 2, d["runs"]
# A real import inserts some seconds after the rows were generated.
slack = 120e6 if real else 0
for p in (50, 90, 99):
    want = delays[math.ceil(p / 100 * len(delays)) - 1]
    got = st["delay_us"]["p%d" % p]
    assert abs(got - want) <= 0.01 * want + slack, (p, got, want)
assert abs(st["delay_us"]["max"] - delays[-1]) <= slack, (st["delay_us"]["max"], delays[-1])
assert st["largest"][0]["ref"] == "legacy.orders:r0", st["largest"][0]
assert len(st["largest"]) == 10
assert sum(b["count"] for b in st["display"]) == 400
assert d["verdict"]["ok"] is True, d["verdict"]
PY
verdict=$(jfield r90.json 'd["verdict"]["text"]')
assert_contains "$verdict" "retention 90d exceeds the largest observed delay 45d 0h" "verdict ok"
case "$verdict" in
    *" by 45d 0h 00m" | *" by 44d 23h 5"?m) ;;
    *) fail "verdict margin (90d - 45d, a little less when real): $verdict" ;;
esac

# --- terminal output ----------------------------------------------------------------------
run_expect 0 "$V7FILL" report events --retention 90d
sed -n 1,60p <<<"$OUT"
assert_contains "$OUT" "Retention: 90d (--retention)" "terminal: retention"
assert_contains "$OUT" "retention cutoff: now − 90d" "terminal: cutoff marked"
assert_contains "$OUT" "█" "terminal: bars"
assert_contains "$OUT" "NEAR CUTOFF" "terminal: near-cutoff window"
assert_contains "$OUT" "past the cutoff since" "terminal: windows past the cutoff"
assert_contains "$OUT" "◀ retention 90d" "terminal: retention on the delay histogram"
assert_contains "$OUT" "Windows near the cutoff: " "terminal: near-cutoff list"
assert_contains "$OUT" "days left" "terminal: days left"
assert_contains "$OUT" "legacy.orders:r0" "terminal: largest delay's reference"
assert_contains "$OUT" "verdict: retention 90d exceeds the largest observed delay 45d" "terminal: verdict"

# --- the largest delays name their rows: file:line, id, reference -------------------------
# check_largest JSON TEXT: the 10 largest delays are run1.csv's 10 latest rows, each named
# by its line in the file (header on line 1) and the id the row has in the table, in the
# JSON report and in the terminal's "Largest delays".
check_largest() {
    python3 - "$1" "$2" <<'PY'
import json, re, subprocess, sys
d = json.load(open(sys.argv[1]))["delay"]["largest"]
text = open(sys.argv[2], encoding="utf-8").read().split("\n")
rows = json.load(open("run1.json"))
want = sorted(((r[1], i + 2, r[0]) for i, r in enumerate(rows)), key=lambda x: -x[0])[:10]
assert len(d) == 10, len(d)
for (delay, line, note), got in zip(want, d):
    assert got["origin"] == "run1.csv:%d" % line, (got, line, note)
    assert got["ref"] == "legacy.orders:" + note and "ref_values" not in got, got
    in_table = subprocess.run(["psql", "-X", "-At", "-c", "SELECT note FROM events WHERE id = '%s'"
                               % got["id"]], capture_output=True, text=True, check=True).stdout
    assert in_table.strip() == note, (got["id"], in_table, note)
    at = [k for k, l in enumerate(text)
          if re.fullmatch(r"  \S.{13} run1\.csv:%d +on_time +legacy\.orders:%s" % (line, note), l)]
    assert len(at) == 1, ("text line of", line, note, text)
    assert re.fullmatch(r" {17}id %s  id time \S+  inserted \S+" % got["id"], text[at[0] + 1]), \
        ("id line", text[at[0] + 1])
PY
}
if [ "$real" = yes ]; then
    printf '%s\n' "$OUT" >largest.txt
    check_largest r90.json largest.txt || fail "largest delays named by file:line: $OUT"
else
    assert_contains "$OUT" "(origin not recorded)" "crafted statistics have no origins"
fi

# --- the warning, and no retention --------------------------------------------------------
run_expect 0 "$V7FILL" report events --retention 30d
assert_contains "$OUT" "WARNING: retention 30d does not exceed the largest observed delay 45d" "warning verdict"
assert_contains "$OUT" "retention must exceed the longest delivery delay" "warning says why"
run_expect 0 "$V7FILL" report events --retention 30d --json
assert_eq False "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["verdict"]["ok"])' "$OUT")" "json: verdict not ok"
run_expect 0 "$V7FILL" report events
assert_contains "$OUT" "Retention: none" "no retention"
assert_contains "$OUT" "verdict: no retention: windows are never retired" "verdict without retention"
assert_not_contains "$OUT" "retention cutoff" "no cutoff line without retention"
# stored retention is used
run_expect 0 "$V7FILL" retention events set 60d
run_expect 0 "$V7FILL" report events
assert_contains "$OUT" "Retention: 60d (stored by v7fill, v7fill.retention)" "stored retention used"
run_expect 0 "$V7FILL" retention events clear

# --- --since ------------------------------------------------------------------------------
q "UPDATE v7fill.run SET finished_at = now() - interval '10 days' WHERE run_id = (SELECT min(run_id) FROM v7fill.run)" >/dev/null
"$V7FILL" report events --retention 90d --since 5d --json >since.json || fail "report --since failed"
assert_eq 1 "$(jfield since.json 'd["runs"]["count"]')" "--since 5d: one run"
assert_eq 100 "$(jfield since.json 'd["delay"]["rows"]')" "--since 5d: the second run's rows"
assert_eq "legacy.orders:s" "$(jfield since.json 'd["delay"]["largest"][0]["ref"][:15]')" "--since: run 2's references"
since_time=$(date -u -d '-20 days' +%Y-%m-%dT%H:%M:%SZ)
run_expect 0 "$V7FILL" report events --retention 90d --since "$since_time" --json
assert_eq 2 "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["runs"]["count"])' "$OUT")" "--since a time"
run_expect 2 "$V7FILL" report events --since yesterday-ish
run_expect 2 "$V7FILL" report events --near-cutoff 0s
run_expect 3 "$V7FILL" report no_such_table

# --- near cutoff horizon given explicitly --------------------------------------------------
run_expect 0 "$V7FILL" report events --retention 90d --near-cutoff 400d --json
python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert all(w["state"] in ("near_cutoff", "past_cutoff") for w in d["windows"]), d["windows"]
' "$OUT" || fail "--near-cutoff 400d makes every live window near"

# --- HTML ---------------------------------------------------------------------------------
"$V7FILL" report events --retention 90d --exact --html report.html --json >html_run.json \
    || fail "report --html --json failed"
[ -s report.html ] || fail "no HTML written"
python3 - <<'PY' || fail "HTML page"
import json, re, html.parser
page = open("report.html", encoding="utf-8").read()
d = json.load(open("html_run.json"))
VOID = {"meta", "br", "img", "input", "link", "hr", "col", "wbr", "area", "base", "source"}
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.data, self.json, self.svgs, self.attrs = [], [], None, 0, []
        self.in_json = False
        self.verdict = None
        self.in_verdict = False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.attrs.append((tag, a))
        if tag == "svg":
            self.svgs += 1
        if tag == "script":
            assert a.get("type") == "application/json", "only a JSON data block, no scripts"
            self.in_json = True
        if tag == "div" and a.get("id") == "verdict":
            self.in_verdict = True
            self.verdict = ""
        if tag not in VOID:
            self.stack.append(tag)
    def handle_startendtag(self, tag, attrs):
        self.attrs.append((tag, dict(attrs)))
    def handle_endtag(self, tag):
        if tag in VOID:
            return
        assert self.stack and self.stack[-1] == tag, ("unbalanced", tag, self.stack[-5:])
        self.stack.pop()
        if tag == "script":
            self.in_json = False
        if tag == "div":
            self.in_verdict = False
    def handle_data(self, data):
        if self.in_json:
            self.json = (self.json or "") + data
        elif self.in_verdict:
            self.verdict += data
        self.data.append(data)
p = P()
p.feed(page)
p.close()
assert not p.stack, ("unclosed", p.stack)
assert p.svgs == 2, p.svgs
# self-contained: no external assets or links
for tag, a in p.attrs:
    for k in ("src", "href"):
        assert k not in a, (tag, a)
    assert tag not in ("link", "img", "iframe", "object"), tag
assert "@import" not in page and "url(" not in page
assert re.sub(r'xmlns="http://www.w3.org/2000/svg"', "", page).count("http") == 0
# the embedded JSON is the report
emb = json.loads(p.json)
assert emb["windows"] == d["windows"] or [w["rows"] for w in emb["windows"]] == [w["rows"] for w in d["windows"]]
assert emb["delay"]["delay_us"] == d["delay"]["delay_us"]
assert emb["verdict"]["text"] == d["verdict"]["text"]
# and the visible numbers are those of the JSON report
text = "".join(p.data)
rows_attr = {a.get("data-rows") for t, a in p.attrs if "data-rows" in a}
for w in d["windows"]:
    assert str(w["rows"]) in rows_attr, (w["name"], w["rows"])
    assert w["name"] in text
us_attr = {a.get("data-us") for t, a in p.attrs if "data-us" in a}
for k in ("min", "p50", "p90", "p99", "max"):
    assert str(d["delay"]["delay_us"][k]) in us_attr, k
assert str(d["delay"]["rows"]) in {a.get("data-value") for t, a in p.attrs if "data-value" in a}
assert d["verdict"]["text"] in p.verdict, (p.verdict, d["verdict"]["text"])
assert "legacy.orders:r0" in text
assert "retention cutoff: now − 90d" in text
for name in d["near_cutoff_windows"]:
    assert name in text
print("html ok:", len(page), "bytes")
PY
# A reference with markup in it (run 2's largest delay) is escaped, not interpreted.
run_expect 0 "$V7FILL" report events --retention 90d --since 5d --html since.html
assert_contains "$(cat since.html)" 'legacy.orders:s0&lt;i&gt;&amp;&quot;q' "reference escaped in HTML"
assert_not_contains "$(cat since.html)" 's0<i>' "no raw markup from data"
[ -n "${V7FILL_REPORT_HTML_OUT:-}" ] && cp report.html "$V7FILL_REPORT_HTML_OUT"
run_expect 1 "$V7FILL" report events --retention 90d --html /nonexistent/dir/r.html
assert_contains "$OUT" "could not write /nonexistent/dir/r.html" "unwritable HTML path"

# --- days left: one number, one value in text, HTML and JSON (#7) -------------------------
# 48 one-hour windows ending 30 to 32 days ago: with 30d their fractions of a day step by
# 1/24, so some lie where rounding and flooring to a tenth differ.
q "CREATE TABLE dl (id uuid PRIMARY KEY) PARTITION BY RANGE (id)" >/dev/null
h0=$(date -u -d "$(date -u +%Y-%m-%dT%H:00:00Z) -32 days" +%s)
for i in $(seq 0 47); do
    lo=$(date -u -d "@$((h0 + i * 3600))" +%Y-%m-%dT%H:%M:%SZ)
    hi=$(date -u -d "@$((h0 + i * 3600 + 3600))" +%Y-%m-%dT%H:%M:%SZ)
    q "CREATE TABLE dl_$i PARTITION OF dl FOR VALUES FROM ('$("$V7FILL" uuid floor "$lo")')
       TO ('$("$V7FILL" uuid floor "$hi")')" >/dev/null
done
# The windows end on the hour and the retention is whole days, so a window's time left crosses a
# rounding boundary (a twentieth of a day, 4,320 s, past a tenth) whenever the epoch second is a
# multiple of 720: the three reports below, each reading the clock, must not straddle one (in one
# rehearsal they ran at 17:24:00 and dl_3 showed 0.2 in the text, 0.1 in the HTML).
r=$(( $(date -u +%s) % 720 ))
[ "$r" -lt 690 ] || sleep $((720 - r + 2))
"$V7FILL" report dl --retention 32d >dl.txt || fail "report dl failed"
"$V7FILL" report dl --retention 32d --json >dl.json || fail "report dl --json failed"
"$V7FILL" report dl --retention 32d --html dl.html >/dev/null || fail "report dl --html failed"
python3 - <<'PY' || fail "days left differ between text, HTML and JSON"
import json, re
raw = open("dl.json").read()
d = json.loads(raw)
page = open("dl.html", encoding="utf-8").read()
emb = json.loads(re.search(r'id="v7fill-report">\n(.*)\n</script>', page, re.S).group(1))
# JSON reals as written, without 17-digit noise: one decimal
noisy = re.findall(r'"days_left": (-?[0-9.e+-]+)', raw)
assert len(noisy) == 48 and all(re.fullmatch(r"-?\d+\.\d", v) for v in noisy), noisy
text = {}
for line in open("dl.txt", encoding="utf-8"):
    m = re.match(r"\s+(dl_\d+)\s.*\((-?\d+\.\d) days left\)", line)
    if m:
        text[m.group(1)] = m.group(2)
html = dict(re.findall(r"<code>(dl_\d+)</code>.*?<td class=\"num\">(-?\d+\.\d)</td></tr>", page))
ew = {w["name"]: w for w in emb["windows"]}
differ = 0
for w in d["windows"]:
    n = w["name"]
    exact = w["time_left_us"] / 864e8
    want = "%.1f" % (int(abs(exact) * 10 + 0.5) / 10 * (1 if exact >= 0 else -1))
    differ += "%.1f" % (int(exact * 10) / 10) != want
    shown = (text.get(n), html.get(n), "%.1f" % w["days_left"], "%.1f" % ew[n]["days_left"])
    assert shown == (want,) * 4, (n, exact, shown, want)
assert differ > 0, "no window where flooring and rounding differ: the test proves nothing"
print("days left agree:", len(d["windows"]), "windows,", differ, "where floor and round differ")
PY

# rows_csv FILE SECONDS...: a CSV (created_at, note) with a row that many seconds old for
# each argument, noted n0, n1, ...
rows_csv() {
    python3 - "$@" <<'PY'
import csv, sys, time
now = time.time()
with open(sys.argv[1], "w", newline="") as f:
    c = csv.writer(f)
    c.writerow(["created_at", "note"])
    for i, d in enumerate(sys.argv[2:]):
        c.writerow([time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - int(d))), "n%d" % i])
PY
}

# --- classes under the retention shown, not the one of the import (#6) -------------------
# Imported under 120d; a row 100 days late is expired under 30d (its window ended more than
# 30 days ago), whatever today's date.
q "CREATE TABLE late (id uuid PRIMARY KEY, created_at timestamptz, note text) PARTITION BY RANGE (id)" >/dev/null
run_expect 0 "$V7FILL" partitions late --from "$(date -u -d "$month0 -5 months" +%Y-%m-%d)" \
    --to "$(date -u -d "$month0 +1 month" +%Y-%m-%d)"
rows_csv late.csv 60 $((100 * 86400))
run_expect 0 "$V7FILL" import late late.csv --retention 120d --source-ref 'late:{note}' --no-progress
if [ "$real" = yes ]; then
    run_expect 0 "$V7FILL" report late --retention 120d
    assert_contains "$OUT" "expired 0 (judged under 120d)" "classes under the import's own retention"
    run_expect 0 "$V7FILL" report late --retention 30d
    assert_contains "$OUT" "WARNING: retention 30d does not exceed" "warning under 30d"
    assert_contains "$OUT" "(judged again under 30d; 1 run judged under 120d at insert)" \
        "terminal says under which retention the classes are"
    assert_contains "$OUT" "Largest delays (class judged again under 30d; 1 run judged under 120d at insert)" \
        "largest delays say it too"
    printf '%s\n' "$OUT" | grep -Eq '^  on time [0-9]+, near cutoff [0-9]+, expired [1-9]' \
        || fail "the 100-day-late row is expired under 30d: $OUT"
    printf '%s\n' "$OUT" | grep -Eq '^  100d 0h 00m +late\.csv:3  +expired +late:n1$' \
        || fail "largest delay classed under 30d, named by file:line: $OUT"
    "$V7FILL" report late --retention 30d --json >late.json || fail "report late --json"
    "$V7FILL" report late --retention 30d --html late.html >/dev/null || fail "report late --html"
    python3 - <<'PY' || fail "JSON and HTML classes under 30d"
import json, re
d = json.load(open("late.json"))["delay"]
assert d["counts"]["expired"] >= 1 and sum(d["counts"].values()) == 2, d["counts"]
o = d["judged_at_insert_under_other_retention"]
assert o["runs"] == 1 and o["retention_us_min"] == o["retention_us_max"] == 120 * 86400 * 10**6, o
assert d["largest"][0]["ref"] == "late:n1" and d["largest"][0]["class"] == "expired", d["largest"][0]
page = open("late.html", encoding="utf-8").read()
assert 'id="class-note">judged again under 30d; 1 run judged under 120d at insert<' in page
assert re.search(r'<tr><td>expired</td><td class="num" data-value="[1-9]', page), "HTML expired count"
assert re.search(r'100d 0h 00m</td><td class="ref">late.csv:3</td><td>expired</td>', page), "HTML class"
PY
fi

# --- HTML charts: small counts, a retention past the last bucket, now and cutoff at one
# x, a rotated label with a time, windows of unknown rows (#12) ----------------------------
q "CREATE TABLE hc (id uuid PRIMARY KEY, created_at timestamptz, note text) PARTITION BY RANGE (id)" >/dev/null
run_expect 0 "$V7FILL" partitions hc --from "$(date -u -d "$month0 -3 months" +%Y-%m-%d)" \
    --to "$(date -u -d "$month0 +1 month" +%Y-%m-%d)"
rows_csv hc.csv 60 3600 7200 $((50 * 86400))
run_expect 0 "$V7FILL" import hc hc.csv --source-ref 'hc:{note}' --no-progress
"$V7FILL" report hc --retention 2y --exact --html hc.html >/dev/null || fail "report hc --html"
# windows only in the future: now and the cutoff both before the first window
q "CREATE TABLE hf (id uuid PRIMARY KEY) PARTITION BY RANGE (id)" >/dev/null
run_expect 0 "$V7FILL" partitions hf --from "$(date -u -d "$month0 +2 months" +%Y-%m-%d)" \
    --to "$(date -u -d "$month0 +4 months" +%Y-%m-%d)"
"$V7FILL" report hf --retention 30d --html hf.html >/dev/null || fail "report hf --html"
# a lower bound with a time, and a window whose rows were never analyzed
q "CREATE TABLE ht (id uuid PRIMARY KEY) PARTITION BY RANGE (id)" >/dev/null
q "CREATE TABLE ht_a PARTITION OF ht FOR VALUES FROM ('$("$V7FILL" uuid floor 2026-03-01)')
   TO ('$("$V7FILL" uuid floor 2026-03-20T12:00:00Z)')" >/dev/null
q "CREATE TABLE ht_b PARTITION OF ht FOR VALUES FROM ('$("$V7FILL" uuid floor 2026-03-20T12:00:00Z)')
   TO ('$("$V7FILL" uuid floor 2026-04-01)')" >/dev/null
q "INSERT INTO ht VALUES ('$("$V7FILL" uuid new --at 2026-03-25)'), ('$("$V7FILL" uuid new --at 2026-03-26)')" >/dev/null
"$V7FILL" report ht --retention 2y --html ht.html >/dev/null || fail "report ht --html"
python3 - <<'PY' || fail "HTML charts"
import re
def svgs(name):
    return re.findall(r"<svg .*?</svg>", open(name, encoding="utf-8").read(), re.S)
def texts(svg):
    return [(float(x), float(y), t) for x, y, t in
            re.findall(r'<text x="([-0-9.]+)" y="([-0-9.]+)"[^>]*>([^<]*)</text>', svg)]
# y axes: labels distinct (not 0, 0, 1, 2, 2 for a maximum of 2)
for svg in svgs("hc.html"):
    ys = [t for x, y, t in texts(svg) if x == 62.0]
    assert len(ys) >= 2 and len(ys) == len(set(ys)), ("repeated y labels", ys)
# a 2y retention is past the 365d edge: drawn at the right end and said to be off the scale
delay = svgs("hc.html")[1]
edge = [x for x, y, t in texts(delay) if t == "365d"]
ret = [(x, t) for x, y, t in texts(delay) if t.startswith("retention 2y")]
assert edge and ret, (edge, ret)
assert "off the scale" in ret[0][1] and "beyond 365d" in ret[0][1], ret
assert ret[0][0] > edge[0] + 20, ("retention drawn on the 365d tick", ret, edge)
# now and the cutoff at one x: their labels do not overlap and say where they are
win = svgs("hf.html")[0]
now = [(x, y, t) for x, y, t in texts(win) if t.startswith("now")]
cut = [(x, y, t) for x, y, t in texts(win) if t.startswith("retention cutoff")]
assert now and cut and abs(now[0][1] - cut[0][1]) >= 12, ("labels on top of each other", now, cut)
assert "(before the first window)" in now[0][2] and "(before the first window)" in cut[0][2], (now, cut)
# a rotated label with a time fits in the picture (about 6.2 px a character at 45°)
win = svgs("ht.html")[0]
vx, vy, vw, vh = map(float, re.search(r'viewBox="([^"]+)"', win).group(1).split())
rot = re.findall(r'translate\(([-0-9.]+) ([-0-9.]+)\) rotate\(-45\)"[^>]*>([^<]*)<', win)
assert any("12:00" in t for x, y, t in rot), rot
for x, y, t in rot:
    reach = len(t) * 6.2 * 0.7071
    assert float(y) + reach <= vy + vh and float(x) - reach >= vx, ("label clipped", t, x, y, vx, vh)
# unknown rows are not drawn as an empty window
page = open("ht.html", encoding="utf-8").read()
assert "~? rows" not in page, "tooltip reads ~? rows"
assert "ht_b [2026-03-20 12:00 UTC, 2026-04-01): rows unknown" in page, "unknown rows said"
assert re.search(r'class="rows-unknown"', win) and any(t == "?" for x, y, t in texts(win)), "? drawn"
PY

# --- terminal tables align by columns: a multibyte name, a bound with a time (#14) -------
q "CREATE TABLE \"ht_ü€\" PARTITION OF ht FOR VALUES FROM ('$("$V7FILL" uuid floor 2026-04-01)')
   TO ('$("$V7FILL" uuid floor 2026-05-01)')" >/dev/null
# column of a word on each line that names one of ht's windows (characters = columns here)
columns() { python3 -c '
import sys
lines = [l for l in sys.stdin.read().splitlines() if l.lstrip().startswith("ht_")]
print(len(lines), sorted({l.index(sys.argv[1]) for l in lines}))' "$1"; }
run_expect 0 "$V7FILL" report ht --retention 2y
assert_eq "3 [$(printf '%s\n' "$OUT" | grep -m1 '^  ht_a ' | python3 -c 'import sys; print(sys.stdin.read().index("retires"))')]" \
    "$(printf '%s\n' "$OUT" | columns retires)" "report: rows and retirement in one column on every line: $OUT"
run_expect 0 "$V7FILL" partitions ht --list
assert_eq "3 [$(printf '%s\n' "$OUT" | grep -m1 '^ht_a ' | python3 -c 'import sys; print(sys.stdin.read().index("2026-"))')]" \
    "$(printf '%s\n' "$OUT" | columns 2026-)" "--list: bounds in one column on every line: $OUT"

# --- a re-run: its report still names the largest delays by file:line ---------------------
if [ "$real" = yes ]; then
    for f in run1 run2; do
        run_expect 0 "$V7FILL" import events $f.csv --retention 90d \
            --source-ref 'legacy.orders:{note}' --no-progress
        assert_contains "$OUT" "inserted=0" "re-run of $f inserts nothing"
    done
    "$V7FILL" report events --retention 90d --json >rerun.json || fail "report after re-run"
    "$V7FILL" report events --retention 90d >rerun.txt || fail "report after re-run (text)"
    check_largest rerun.json rerun.txt || fail "largest delays after a re-run: $(cat rerun.txt)"
fi

# --- without a template: file:line and the record's values as CSV -------------------------
q "CREATE TABLE dv (id uuid PRIMARY KEY, created_at timestamptz, note text) PARTITION BY RANGE (id)" >/dev/null
run_expect 0 "$V7FILL" partitions dv --from "$(date -u -d "$month0 -3 months" +%Y-%m-%d)" \
    --to "$(date -u -d "$month0 +1 month" +%Y-%m-%d)"
old1=$(date -u -d '-50 days' +%Y-%m-%dT%H:%M:%SZ)
old2=$(date -u -d '-40 days' +%Y-%m-%dT%H:%M:%SZ)
printf 'created_at,note\n%s,fresh\n%s,"a ""b"", c"\n%s,\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "$old1" "$old2" >dv.csv
run_expect 0 "$V7FILL" import dv dv.csv --no-progress
run_expect 0 "$V7FILL" report dv --retention 90d
printf '%s\n' "$OUT" | grep -Fxq "  $(printf '%-14s' '50d 0h 00m') dv.csv:3  on_time     $old1,\"a \"\"b\"\", c\"" \
    || fail "default reference shown as the record's values, with file:line: $OUT"
printf '%s\n' "$OUT" | grep -Eq "^  40d 0h 00m +dv\.csv:4  on_time +$old2,$" \
    || fail "a NULL value shown empty: $OUT"
run_expect 0 "$V7FILL" report dv --retention 90d --json
python3 - "$old1" "$OUT" <<'PY' || fail "JSON: default reference as values"
import json, sys
l = json.loads(sys.argv[2])["delay"]["largest"]
assert l[0]["origin"] == "dv.csv:3" and l[0]["ref"] == sys.argv[1] + ',"a ""b"", c"', l[0]
assert l[0]["ref_values"] is True and len(l[0]["id"]) == 36, l[0]
assert [x["origin"] for x in l] == ["dv.csv:3", "dv.csv:4", "dv.csv:2"], l
PY

# --- statistics stored before origins were: loaded and said so ----------------------------
python3 - >old.stats <<'PY'
import json, time
d = 3600 * 10**6
e = d.bit_length() - 1
ins = int(time.time() * 1e6)
print(json.dumps({"format": "v7fill-tracker/1", "retention_us": 0,
    "counts": {"on_time": 1, "near_cutoff": 0, "expired": 0},
    "delay_us": {"min": d, "max": d},
    "histogram": {"layout": "log2-sub128-us",
                  "buckets": [[256 + (e - 8) * 128 + ((d >> (e - 7)) & 127), 1]]},
    "display": [{"ge_us": d, "label": "1h", "count": 1}],
    "largest": [{"delay_us": d, "id_us": ins - d, "inserted_us": ins, "class": "on_time",
                 "ref": "old:1", "ref_truncated": False}],
    "windows": []}))
PY
psql -X -q -v ON_ERROR_STOP=1 -v stats="$(cat old.stats)" >/dev/null <<'SQL'
INSERT INTO v7fill.run (target_schema, target_table, command, status, elapsed_s, rows_read,
                        inserted, duplicates, rejected, partitions_created, stats)
VALUES ('public', 'dv', 'import', 'done', 1, 0, 0, 0, 0, 0, :'stats'::jsonb);
SQL
run_expect 0 "$V7FILL" report dv --retention 90d
printf '%s\n' "$OUT" | grep -Eq '^  1h 00m 00s +\(origin not recorded\)  on_time .*old:1$' \
    || fail "old statistics: (origin not recorded): $OUT"
printf '%s\n' "$OUT" | grep -Eq '^  50d 0h 00m +dv\.csv:3 ' || fail "new runs still named: $OUT"
run_expect 0 "$V7FILL" report dv --retention 90d --json
python3 -c '
import json, sys
l = json.loads(sys.argv[1])["delay"]["largest"]
old = [x for x in l if x["ref"] == "old:1"]
assert len(l) == 4 and len(old) == 1 and old[0]["origin"] is None and old[0]["id"] is None, l
' "$OUT" || fail "old statistics in JSON: origin null"
"$V7FILL" report dv --retention 90d --html dv.html >/dev/null || fail "report dv --html"
assert_contains "$(cat dv.html)" '<td class="muted">(origin not recorded)</td><td>on_time' \
    "old statistics in HTML"
assert_contains "$(cat dv.html)" '<td class="ref">dv.csv:3</td><td>on_time</td><td class="ref">' "HTML origin"
