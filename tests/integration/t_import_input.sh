# Input edge cases of issue 16 (#6, #10-#13): each bad input costs one row or
# gives a clear error up front, and nothing is lost (read = inserted +
# duplicates + rejected).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC
sqlf <<'SQL'
CREATE TABLE e (id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, a text, b text, c text)
    PARTITION BY RANGE (id);
CREATE TABLE mp (id uuid NOT NULL PRIMARY KEY, created_at timestamptz, a text, raw_ts text)
    PARTITION BY RANGE (id);
SQL

# #10: years 10000-10889 are UUIDv7 times no window covers: one reject each,
# the batch-mates land
printf 'created_at,a,b,c\n2024-01-01T00:00:00Z,ok,,\n10000-01-01T00:00:00Z,typo,,\n2024-01-02T00:00:00Z,ok2,,\n' >y.csv
run_expect 0 "$V7FILL" import e y.csv --max-future 9000y --no-progress --rejects y.rej
assert_eq 2 "$(q "SELECT count(*) FROM e WHERE a IN ('ok', 'ok2')")" "year 10000: batch-mates imported"
assert_contains "$(cat y.rej)" '"y.csv",3,"time out of range: ' "year 10000: one reject, line 3"
printf 'created_at,a,b,c\n1700000000000,okms,,\n281474976710655,max48,,\n' >ym.csv
run_expect 0 "$V7FILL" import e ym.csv --time-format epoch-ms --max-future 100000y --no-progress --rejects ym.rej
assert_eq 1 "$(q "SELECT count(*) FROM e WHERE a = 'okms'")" "epoch-ms 2^48-1: batch-mate imported"
assert_contains "$(cat ym.rej)" '"ym.csv",3,"time out of range: ' "epoch-ms 2^48-1: one reject"

# #11: the time column mapped to a text column keeps its text there, and
# created_at still gets the event time
printf 'ts,a\n2024-01-01T00:00:00+02:00,x\n' >mp.csv
run_expect 0 "$V7FILL" import mp mp.csv --time-column ts --map ts=raw_ts --no-progress --rejects mp.rej
assert_eq "2023-12-31 22:00:00+00|2024-01-01T00:00:00+02:00" "$(q "SELECT created_at, raw_ts FROM mp")" \
    "--map ts=raw_ts: created_at gets the event time"
