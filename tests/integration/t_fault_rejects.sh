#!/usr/bin/env bash
# Fault injection on the rejects file.
#  1. A rejects path whose directory does not exist, or lies on a read-only file system:
#     a clear error naming the file (exit status 1) before anything is written.
#  2. Disk full mid-import: the rejects file is on a small tmpfs and the input rejects
#     enough rows to fill it after some batches.  The import stops with a clear error
#     naming the file; the batch whose rejects could not be written is not committed
#     (its rows are absent, v7fill.checkpoint stops at the batch before); the counts of
#     what did commit balance.  After freeing space, the rerun completes exactly: every
#     expected row once, every reject exactly once, the rejects file valid CSV.
#  3. Disk full in the very first batch (no checkpoint yet): likewise.
# Mounting needs root; otherwise parts 2 and 3 print "skipped: not root".
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

MOUNTS=()
cleanup() {
    for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
    chmod -R u+w "$T_TMP" 2>/dev/null || true
    rm -rf "$T_TMP"
}
trap cleanup EXIT
can_mount=0
if [ "$(id -u)" = 0 ]; then
    mkdir -p probe && mount -t tmpfs -o size=64k tmpfs probe 2>/dev/null && { umount probe; can_mount=1; }
fi

sqlf <<'SQL'
CREATE TABLE d (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, n integer NOT NULL,
                note text) PARTITION BY RANGE (id);
SQL
# N rows; every 10th has an unparsable time and a 2 KB note: ~2.1 KB of rejects file each
N=3000
python3 - "$N" <<'PY'
import sys
n = int(sys.argv[1])
pad = "p" * 2000
with open("d.csv", "w") as f, open("expected.txt", "w") as e, open("expected_rej.txt", "w") as r:
    f.write("n,created_at,note\n")
    for i in range(n):
        if i % 10 == 3:
            f.write(f"{i},broken-time-{i},{pad}\n")
            r.write(f"{i + 2}\n")
        else:
            t = f"2024-{1 + i % 12:02d}-{1 + i % 28:02d} 10:{i % 60:02d}:00+00"
            f.write(f"{i},{t},note {i}\n")
            e.write(f"{i}|{t}|note {i}\n")
PY
sort expected.txt >expected.sorted
sort -n expected_rej.txt >expected_rej.sorted
rows_in_table() { q "SELECT n || '|' || created_at || '|' || note FROM d" | sort; }
check_rejects_exact() { # FILE WHAT
    python3 - "$1" <<'PY' >actual_rej.sorted || fail "$2: rejects file is not valid CSV"
import csv, sys
with open(sys.argv[1], newline="") as f:
    rows = list(csv.reader(f))
assert rows[0] == ["source", "line", "reason", "sqlstate", "record"], rows[0]
for row in rows[1:]:
    assert len(row) == 5, row[:4]
    assert row[2].startswith("unparsable time"), row[:4]
    assert row[4].startswith(f"{int(row[1]) - 2},broken-time-"), row[:4]
    assert len(row[4]) > 2000, row[:4]
lines = sorted(int(r[1]) for r in rows[1:])
print("\n".join(map(str, lines)))
PY
    if ! cmp -s expected_rej.sorted actual_rej.sorted; then
        echo "missing:   $(comm -23 expected_rej.sorted actual_rej.sorted | head -5 | tr '\n' ' ')"
        echo "duplicate: $(uniq -d actual_rej.sorted | head -5 | tr '\n' ' ')"
        fail "$2: the rejects file does not hold every expected reject exactly once"
    fi
}
check_exact() { # WHAT
    rows_in_table >actual.sorted
    cmp -s expected.sorted actual.sorted || { diff expected.sorted actual.sorted | head -5; fail "$1: not exactly the expected rows"; }
}

# ---- 1. unusable rejects paths: clear error, nothing written --------------------------
run_expect 1 "$V7FILL" import d d.csv --rejects "$T_TMP/no/such/dir/rej.csv" --no-progress
assert_contains "$OUT" "could not open rejects file \"$T_TMP/no/such/dir/rej.csv\"" "names the file"
assert_contains "$OUT" "No such file or directory" "says why"
assert_eq "" "$(q "SELECT to_regclass('v7fill.checkpoint')")" "nothing written: no v7fill schema"
assert_eq "" "$(q "SELECT to_regclass('d_source_ref')")" "nothing written: no lookup table"
assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'd'::regclass")" "nothing written: no partition"
mkdir -p rodir
if [ "$can_mount" = 1 ]; then
    mount -t tmpfs -o ro,size=64k tmpfs rodir; MOUNTS+=("$T_TMP/rodir")
else
    chmod 555 rodir
fi
if [ "$(id -u)" = 0 ] && [ "$can_mount" = 0 ]; then
    echo "skipped: read-only directory (root ignores permissions and cannot mount here)"
else
    run_expect 1 "$V7FILL" import d d.csv --rejects "$T_TMP/rodir/rej.csv" --no-progress
    assert_contains "$OUT" "could not open rejects file \"$T_TMP/rodir/rej.csv\"" "read-only: names the file"
    case "$OUT" in *"Read-only file system"* | *"Permission denied"*) ;; *) fail "read-only: does not say why: $OUT" ;; esac
    assert_eq "" "$(q "SELECT to_regclass('v7fill.checkpoint')")" "read-only: no v7fill schema"
    assert_eq 0 "$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'd'::regclass")" "read-only: no partition"
fi
# a directory where the file should be
mkdir adir
run_expect 1 "$V7FILL" import d d.csv --rejects "$T_TMP/adir" --no-progress
assert_contains "$OUT" "could not open rejects file \"$T_TMP/adir\"" "a directory: names the file"
assert_eq 0 "$(q "SELECT count(*) FROM d")" "nothing imported"

if [ "$can_mount" = 0 ]; then
    [ "$(id -u)" = 0 ] && echo "skipped: disk full (cannot mount a tmpfs)" || echo "skipped: not root"
    echo "ok"
    exit 0
fi

# ---- 2. disk full mid-import ------------------------------------------------------------
# 160 KiB holds the header and ~75 rejects; batches of 100 rows carry 10 rejects each, so
# the rejects of about the 8th batch no longer fit.
mkdir small
mount -t tmpfs -o size=160k tmpfs small; MOUNTS+=("$T_TMP/small")
import_cmd=("$V7FILL" import d d.csv --batch-rows 100 --source-ref 'd:{n}' --rejects "$T_TMP/small/rej.csv"
            --no-progress --no-analyze --report-json "$T_TMP/full.json")
run_expect 1 "${import_cmd[@]}"
awk '!/^    \[/ && n++ < 20' <<<"$OUT"
assert_contains "$OUT" "rejects file \"$T_TMP/small/rej.csv\"" "the error names the rejects file"
assert_contains "$OUT" "No space left on device" "the error says why"
cp_records=$(q "SELECT records FROM v7fill.checkpoint WHERE target_table = 'd'")
cp_line=$(q "SELECT line FROM v7fill.checkpoint WHERE target_table = 'd'")
echo "checkpoint after disk full: $cp_records records, line $cp_line"
[ "$cp_records" -gt 0 ] && [ "$cp_records" -lt "$N" ] || fail "disk full should strike mid-import (checkpoint at $cp_records)"
assert_eq 0 $((cp_records % 100)) "the checkpoint is at a batch boundary"
assert_eq f "$(q "SELECT finished FROM v7fill.checkpoint WHERE target_table = 'd'")" "not finished"
# exactly the rows of the committed batches: nothing of the failed batch (or later)
committed_rows=$(awk -F'|' -v k="$cp_records" '$1 < k' expected.sorted | wc -l | tr -d ' ')
assert_eq "$committed_rows" "$(q "SELECT count(*) FROM d")" "rows of the committed batches only"
assert_eq 0 "$(q "SELECT count(*) FROM d WHERE n >= $cp_records")" "rows of the batch whose rejects failed are absent"
assert_eq "$committed_rows" "$(q "SELECT count(*) FROM d_source_ref")" "no lookup entry of the failed batch"
assert_eq $((cp_records / 10)) "$(q "SELECT rejected FROM v7fill.checkpoint WHERE target_table = 'd'")" "checkpoint's reject count"
python3 - "$cp_records" <<'PY' || fail "the failed run's report: $(cat full.json)"
import json, sys
k = int(sys.argv[1])
r = json.load(open("full.json"))
assert r["read"] == k and r["inserted"] + r["duplicates"] + r["rejected"] == k, r
PY
assert_contains "$(q "SELECT status FROM v7fill.run WHERE target_table = 'd' ORDER BY run_id DESC LIMIT 1")" \
    "No space left on device" "v7fill.run records why the run stopped"
# free space, rerun: resumes and completes exactly
mount -o remount,size=16m "$T_TMP/small"
run_expect 0 "${import_cmd[@]}"
assert_contains "$OUT" "resuming after line $cp_line" "the rerun resumes at the checkpoint"
check_exact "after disk full"
check_rejects_exact "$T_TMP/small/rej.csv" "after disk full"
python3 - "$N" <<'PY' || fail "final report: $(cat full.json)"
import json, sys
n = int(sys.argv[1])
r = json.load(open("full.json"))
assert r["balanced"] and r["read"] == n and r["rejected"] == n // 10, r
assert r["inserted"] + r["duplicates"] == n - n // 10, r
PY

# ---- 3. disk full in the first batch ---------------------------------------------------
q "TRUNCATE d; DROP TABLE d_source_ref; DELETE FROM v7fill.checkpoint" >/dev/null
rm -f "$T_TMP/small/rej.csv"
mount -o remount,size=16k "$T_TMP/small"        # the header fits, ~6 rejects do not
import_cmd=("$V7FILL" import d d.csv --batch-rows 1000 --source-ref 'd:{n}' --rejects "$T_TMP/small/rej.csv"
            --no-progress --no-analyze --report-json "$T_TMP/first.json")
run_expect 1 "${import_cmd[@]}"
assert_contains "$OUT" "No space left on device" "first batch: the error says why"
assert_eq 0 "$(q "SELECT count(*) FROM d")" "first batch: nothing committed"
assert_eq 0 "$(q "SELECT count(*) FROM v7fill.checkpoint WHERE target_table = 'd' AND records > 0")" "first batch: no checkpoint progress"
mount -o remount,size=16m "$T_TMP/small"
run_expect 0 "${import_cmd[@]}"
check_exact "after disk full in the first batch"
check_rejects_exact "$T_TMP/small/rej.csv" "after disk full in the first batch"
echo "ok"
