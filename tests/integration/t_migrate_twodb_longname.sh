# A two-database switch (issue 21) into a table whose name is too long for "<into>_legacy_id_seq"
# to stay an identifier of 63 bytes (52 bytes here; partitions named <into>__YYYY_MM allow 54):
# the target's legacy_id sequence gets a name cut before its suffix with a hash of the whole
# name, so it still ends in _legacy_id_seq (before, the name was cut inside its suffix:
# "<into>_legacy_id_"); the switch prints that name and it is the sequence legacy_id owns; a row
# the application writes on the target gets the next legacy key after the source's.  A second
# migration whose name shares the first 50 bytes gets a sequence of its own.  Long and
# multibyte names of a child's key column: see the end.
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
A=orders_migrated_into_uuidv7_from_the_legacy_dbase_a1
B=orders_migrated_into_uuidv7_from_the_legacy_dbase_b2
source_db_fresh
trap 'psql -X -q -At -d "$SRC" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE '"'"'v7fill\_orders\_migrated%'"'"' AND NOT active" >/dev/null 2>&1;
      psql -X -q -At -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE '"'"'v7fill\_orders\_migrated%'"'"' AND NOT active" >/dev/null 2>&1;
      rm -rf "$T_TMP"' EXIT
qs "CREATE TABLE orders_a (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    CREATE TABLE orders_b (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, note text);
    INSERT INTO orders_a (created_at, note)
      SELECT timestamptz '2025-01-01' + g * interval '3 hours', 'a' || g FROM generate_series(1, 300) g;
    INSERT INTO orders_b (created_at, note)
      SELECT timestamptz '2025-01-01' + g * interval '3 hours', 'b' || g FROM generate_series(1, 700) g" >/dev/null
for t in a b; do
    into=$A; [ $t = b ] && into=$B
    run_expect 0 "$V7FILL" migrate --into "$into" --source "dbname=$SRC" --from public.orders_$t --key id --time-column created_at
    run_expect 0 "$V7FILL" migrate --into "$into" --switch
    assert_contains "$OUT" "phase switched" "$into switched"
    seq=$(echo "$OUT" | sed -n 's/.*DEFAULT nextval of \([^,]*\), which goes on.*/\1/p')
    [ -n "$seq" ] || fail "the switch names legacy_id's sequence: $OUT"
    [ ${#seq} -le $((7 + 63)) ] || fail "the printed sequence name is longer than an identifier: $seq"
    case "$seq" in *_legacy_id_seq) ;; *) fail "the sequence's name ends in _legacy_id_seq: $seq" ;; esac
    assert_eq "$seq" "$(q "SELECT pg_get_serial_sequence('$into', 'legacy_id')")" \
        "the printed sequence of $into is the one its legacy_id owns"
    eval "seq_$t=\$seq"
done
[ "$seq_a" != "$seq_b" ] || fail "two migrations whose names share 50 bytes share a sequence: $seq_a"
q "INSERT INTO $A (id, created_at, note) VALUES ('01943a1c-6000-7000-8000-000000000001', '2025-01-02', 'app');
   INSERT INTO $B (id, created_at, note) VALUES ('01943a1c-6000-7000-8000-000000000002', '2025-01-02', 'app')" >/dev/null
assert_eq "301|701" "$(q "SELECT (SELECT legacy_id FROM $A WHERE note = 'app') || '|' || (SELECT legacy_id FROM $B WHERE note = 'app')")" \
    "a row the application writes on the target gets the key after the source's, each from its own sequence"

# An expand-mode child whose key column has a name of 58 bytes ending in a two-byte character:
# the index of its rows still NULL is named "items_<col>_uuid_unset" cut to 63 bytes by the
# server, on a character (before, the name was cut inside the character by v7fill, and the
# run failed on it: invalid byte sequence).  Run again, the index is found, not built twice.
# A second child whose index name is taken by a table: a warning, the run goes on.
col=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaé
qs "CREATE TABLE orders_c (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL);
    INSERT INTO orders_c (created_at) SELECT timestamptz '2024-01-01' + g * interval '7 hours' FROM generate_series(1, 50) g;
    CREATE TABLE items (id serial PRIMARY KEY, \"$col\" bigint, qty int);
    INSERT INTO items (\"$col\", qty) SELECT g % 50 + 1, g FROM generate_series(1, 80) g;
    CREATE TABLE notes (id serial PRIMARY KEY, order_id bigint);
    INSERT INTO notes (order_id) SELECT g FROM generate_series(1, 20) g;
    CREATE TABLE notes_order_id_uuid_unset (x int)" >/dev/null
mb=(migrate --into orders_c_v7 --source "dbname=$SRC" --from public.orders_c --key id --time-column created_at
    --child "public.items($col)" --child 'public.notes(order_id)')
run_expect 0 "$V7FILL" "${mb[@]}"
assert_eq 80 "$(qs "SELECT count(\"${col}_uuid\") FROM items")" "the child with a long multibyte key column filled"
assert_eq "t|62" "$(qs "SELECT i.indisvalid, octet_length(x.relname) FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
                         WHERE i.indrelid = 'items'::regclass AND x.relname LIKE 'items_aaa%'")" \
    "its index of the rows still NULL, under the name the server cut before the character (62 bytes)"
assert_contains "$OUT" "no index notes_order_id_uuid_unset was made (another relation of the schema has that name)" \
    "a name taken: a warning"
run_expect 0 "$V7FILL" "${mb[@]}"
assert_not_contains "$OUT" "building index items_" "the index found by the rerun"
echo "ok t_migrate_twodb_longname"
