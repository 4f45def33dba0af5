# Row operations through the shared pipeline (issues 18, 19): a test source
# (ops_source.c) emits inserts, updates, deletes, truncates and boundaries;
# what a user checks is the target table and its lookup: rows updated in place
# by their id (never re-minted), unchanged columns keeping their value (1 MB),
# updates moving the time counted in time_changed, updates and deletes of rows
# the target does not have inserted, rejected or counted, delete then re-insert
# of one key in one batch, a truncate in the middle of a batch, a value the
# server refuses in an UPDATE costing that row only, the accounting balanced.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
export PGTZ=UTC

# The helper, against the library the tool under test was built from.
build_helper ops_source "$V7FILL_ROOT/tests/integration/ops_source.c"

day=$(date -u +%Y-%m-01)
t1="${day}T10:00:00.000Z"
t1b="${day}T10:00:00.000400Z" # the same millisecond
t2="${day}T11:30:00.000Z"

mk() {
    q "CREATE TABLE $1 (id uuid NOT NULL PRIMARY KEY, ref text NOT NULL,
         created_at timestamptz NOT NULL, v text CHECK (v IS DISTINCT FROM 'bad'))
       PARTITION BY RANGE (id)" >/dev/null
}
# ops TABLE [BATCH_ROWS] < script: run it; $OUT holds rejects and statistics
ops() {
    local t=$1; shift
    cat >script
    run_expect 0 ./ops_source "$t" script "$@"
    echo "$OUT"
}
stat() { sed -n "s/^$1=\([0-9]*\)$/\1/p" <<<"$OUT"; }
balanced() { assert_eq 1 "$(stat balanced)" "$1: read = inserted + duplicates + rejected + expired + updated + deleted + missing deletes"; }

# --- updates by id, time_changed, deletes, a missing delete -------------------------------
mk a
ops a <<EOF
I,r1,$t1,one
I,r2,$t1,two
I,r3,$t1,three
EOF
id1=$(q "SELECT id FROM a WHERE ref = 'r1'")
id2=$(q "SELECT id FROM a WHERE ref = 'r2'")
ops a <<EOF
U,r1,$t2,one-b
U,r2,u,two-b
U,r3,$t1b,three-b
D,r3
D,nothere
EOF
assert_eq "$id1|one-b|$day 11:30:00+00" "$(q "SELECT id, v, created_at FROM a WHERE ref = 'r1'")" \
    "r1 updated in place by its id, its time moved"
assert_eq "$id2|two-b|$day 10:00:00+00" "$(q "SELECT id, v, created_at FROM a WHERE ref = 'r2'")" \
    "r2: v updated, the unchanged time kept"
assert_eq 0 "$(q "SELECT count(*) FROM a WHERE ref = 'r3'")" "r3 deleted"
assert_eq 2 "$(q "SELECT count(*) FROM a_source_ref")" "the lookup lost r3 only"
assert_eq "5 3 1 1 1 1" \
    "$(stat read) $(stat updated) $(stat deleted) $(stat missing) $(stat missing_deletes) $(stat time_changed)" \
    "read updated deleted missing missing_deletes time_changed"
balanced "updates and deletes"
assert_contains "$OUT" "updated=3 deleted=1 missing=1 (deletes 1) time_changed=1 truncates=0 (balanced: read = inserted + duplicates + rejected + expired + updated + deleted + missing deletes)" \
    "the summary shows the row operations and the balance with them"

# --- an unchanged 1 MB value keeps its value; incomplete and complete missing updates -------
mk b
ops b <<EOF
I,big,$t1,~1048576
B
U,big,$t2,u
U,m1,$t1,new
U,m2,$t1,u
U,m3,u,x
EOF
assert_eq "1048576|$day 11:30:00+00" "$(q "SELECT length(v), created_at FROM b WHERE ref = 'big'")" \
    "the 1 MB value left unchanged is still there"
assert_eq "new" "$(q "SELECT v FROM b WHERE ref = 'm1'")" "a complete update of a missing row is inserted"
assert_eq 0 "$(q "SELECT count(*) FROM b WHERE ref IN ('m2', 'm3')")" "incomplete missing updates not written"
assert_contains "$OUT" "reject 5: update of a row the target does not have (the tuple is incomplete: unchanged TOAST values)" "m2 rejected"
assert_contains "$OUT" "reject 6: update of a row the target does not have" "m3 rejected"
assert_contains "$OUT" "update of a row the target does not have 2   e.g. ops:5: update of a row" \
    "the summary counts them under their own reason"
assert_eq "5 2 1 2 3 2" \
    "$(stat read) $(stat inserted) $(stat updated) $(stat rejected) $(stat missing) $(stat batches)" \
    "read inserted updated rejected missing batches (a boundary ended the first batch)"
balanced "missing updates"
# The missing row got the id an insert would have had (ids are keyed per target).
idm=$(q "SELECT id FROM b WHERE ref = 'm1'")
ops b <<EOF
D,m1
I,m1,$t1,again
EOF
assert_eq "$idm" "$(q "SELECT id FROM b WHERE ref = 'm1'")" "minted as an insert"

# --- delete then re-insert of one key in one batch; a repeat within a run -------------------
mk c
ops c <<EOF
I,k,$t1,one
I,k,$t1,one-again
D,k
I,k,$t1,two
U,k,u,three
EOF
assert_eq "1|three" "$(q "SELECT count(*), max(v) FROM c")" "the key present once, with its last value"
assert_eq 1 "$(q "SELECT count(*) FROM c_source_ref")" "its lookup row once"
assert_eq "2 1 1 1 1" "$(stat inserted) $(stat duplicates) $(stat deleted) $(stat updated) $(stat batches)" \
    "inserted duplicates deleted updated batches"
balanced "delete and re-insert"

# --- a truncate in the middle of a batch ----------------------------------------------------
mk d
ops d <<EOF
I,p,$t1,x
B
I,q,$t1,x
I,r,$t1,x
T
I,s,$t1,x
U,s,u,y
EOF
assert_eq "s|y" "$(q "SELECT string_agg(ref || '|' || v, ',') FROM d")" "rows before the truncate are gone, the one after landed"
assert_eq 1 "$(q "SELECT count(*) FROM d_source_ref")" "the lookup emptied with it"
assert_eq "5 1 4 1" "$(stat read) $(stat truncates) $(stat inserted) $(stat updated)" "read truncates inserted updated"
balanced "truncate"
# A later insert of a truncated reference lands again.
ops d <<EOF
I,p,$t1,back
EOF
assert_eq "1 back" "$(stat inserted) $(q "SELECT v FROM d WHERE ref = 'p'")" "re-inserted after the truncate"

# --- a value the server refuses in an UPDATE rejects only its row ---------------------------
mk e
ops e <<EOF
I,g1,$t1,ok
I,g2,$t1,ok
B
U,g1,$t1,bad
U,g2,$t1,fine
EOF
assert_eq "g1=ok g2=fine" "$(q "SELECT string_agg(ref || '=' || v, ' ' ORDER BY ref) FROM e")" "only the refused row kept its value"
assert_contains "$OUT" "reject 4:" "the refused update is rejected"
assert_contains "$OUT" "SQLSTATE 23514" "with the server's SQLSTATE"
assert_eq "1 1" "$(stat rejected) $(stat updated)" "rejected updated"
balanced "refused update"

# --- an update whose key changed: found by the old reference, the lookup moves ---------------
mk f
ops f <<EOF
I,o1,$t1,x
EOF
idf=$(q "SELECT id FROM f")
ops f <<EOF
M,o1,n1,$t1,y
I,o1,$t2,z
EOF
assert_eq "$idf|n1|y" "$(q "SELECT id, ref, v FROM f WHERE v = 'y'")" "the row keeps its id under its new key"
assert_eq 2 "$(q "SELECT count(*) FROM f")" "the old key is free again: its insert landed"
ops f <<EOF
D,n1
EOF
assert_eq "1 0" "$(stat deleted) $(q "SELECT count(*) FROM f WHERE ref = 'n1'")" "the new key finds the row"
balanced "key change"
# --- a batch that starts with an update of a missing row (nothing inserted before) ----------
mk g
ops g <<EOF
U,first,$t1,v
EOF
assert_eq "1 1 1" "$(stat inserted) $(stat missing) $(q "SELECT count(*) FROM g")" "inserted, missing, rows"
balanced "first record a missing update"
echo "all row operation checks passed"
