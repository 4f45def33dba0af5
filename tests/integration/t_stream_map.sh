# v7fill stream --key-map: the lookup is the typed key map <table>_id_map,
# legacy_id of the source key's type.  The copy, inserts, updates (one changing
# the key: its map row moves, the id stays), deletes (the map row goes), a
# rerun that applies nothing; the map equals the target's (legacy_id, id).
source "$(dirname "$0")/lib.sh"
cd "$T_TMP"
stream_source_db

qs "CREATE TABLE accounts (id integer PRIMARY KEY, created_at timestamptz NOT NULL,
                         balance numeric(12,2), owner text, region text DEFAULT 'eu');
    INSERT INTO accounts SELECT g, now() - (g || ' minutes')::interval, g * 1.5, 'n' || g
      FROM generate_series(1, 500) g;
    CREATE PUBLICATION pub FOR TABLE accounts;"
q "CREATE TABLE accounts_v7 (legacy_id bigint NOT NULL, id uuid NOT NULL PRIMARY KEY,
                           created_at timestamptz NOT NULL, balance numeric(12,2), owner text, region text)
   PARTITION BY RANGE (id)"

stream() {
    "$V7FILL" stream accounts_v7 --source "dbname=$SRC" --from public.accounts --publication pub \
        --slot "$SLOT" --map id=legacy_id --key-map id --until-caught-up "$@"
}
digest_src() { qs "SELECT count(*), coalesce(sum(id),0), md5(coalesce(string_agg(id||'|'||created_at||'|'||coalesce(balance::text,'')||'|'||owner, ',' ORDER BY id),''))
                   FROM accounts"; }
digest_dst() { q "SELECT count(*), coalesce(sum(legacy_id),0), md5(coalesce(string_agg(legacy_id||'|'||created_at||'|'||coalesce(balance::text,'')||'|'||owner, ',' ORDER BY legacy_id),''))
                  FROM accounts_v7"; }
# rows of the map not in the target plus rows of the target not in the map
map_vs_target() {
    q "SELECT (SELECT count(*) FROM (SELECT legacy_id, id FROM accounts_v7_id_map EXCEPT ALL SELECT legacy_id, id FROM accounts_v7) x)
            + (SELECT count(*) FROM (SELECT legacy_id, id FROM accounts_v7 EXCEPT ALL SELECT legacy_id, id FROM accounts_v7_id_map) x)"
}

# ---- a key column that cannot key a map is refused before anything is made
run_expect 3 stream --key-map owner
assert_contains "$OUT" "--key-map owner: column owner of public.accounts is text" "a text key column"
run_expect 2 stream --source-ref 'x:{id}'
assert_contains "$OUT" "--key-map and --source-ref do not go together" "--source-ref with --key-map"

# ---- the copy
run_expect 0 stream
assert_eq "$(digest_src)" "$(digest_dst)" "after the copy the target equals the source"
assert_eq integer "$(q "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'accounts_v7_id_map'::regclass AND attname = 'legacy_id'")" \
    "the map's legacy_id has the source key's type"
assert_eq 500 "$(q "SELECT count(*) FROM accounts_v7_id_map")" "a map row per row"
assert_eq 0 "$(map_vs_target)" "after the copy the map equals the target's (legacy_id, id)"
assert_eq f "$(q "SELECT to_regclass('accounts_v7_source_ref') IS NOT NULL")" "no hashed lookup"

# ---- inserts, updates (one changing the key), deletes
id7=$(q "SELECT id FROM accounts_v7 WHERE legacy_id = 7")
id8=$(q "SELECT id FROM accounts_v7 WHERE legacy_id = 8")
qs "BEGIN;
    INSERT INTO accounts VALUES (5000, now() - interval '2 days', 10, 'new');
    UPDATE accounts SET balance = 99.99 WHERE id = 7;
    UPDATE accounts SET id = 9008, owner = 'moved' WHERE id = 8;
    DELETE FROM accounts WHERE id BETWEEN 20 AND 29;
    COMMIT;"
run_expect 0 stream
echo "$OUT"
assert_eq "$(digest_src)" "$(digest_dst)" "after the changes the target equals the source"
assert_contains "$OUT" "deleted=10" "ten deletes"
assert_eq "$id7" "$(q "SELECT id FROM accounts_v7 WHERE legacy_id = 7")" "an update keeps the id"
assert_eq "$id8" "$(q "SELECT id FROM accounts_v7_id_map WHERE legacy_id = 9008")" \
    "a key change moves the map row: the new key has the row's id"
assert_eq 0 "$(q "SELECT count(*) FROM accounts_v7_id_map WHERE legacy_id = 8 OR legacy_id BETWEEN 20 AND 29")" \
    "the old key and the deleted keys are gone from the map"
assert_eq 0 "$(map_vs_target)" "after the changes the map equals the target's (legacy_id, id)"

# ---- a rerun applies nothing
before=$(digest_dst)
run_expect 0 stream
assert_contains "$OUT" "inserted=0 updated=0 deleted=0" "a rerun with nothing new applies nothing"
assert_eq "$before" "$(digest_dst)" "unchanged target"

# ---- a key deleted then inserted again lands again (its map row went with it)
qs "DELETE FROM accounts WHERE id = 30; INSERT INTO accounts VALUES (30, now() - interval '1 hour', 3, 'again')"
run_expect 0 stream
assert_eq "$(digest_src)" "$(digest_dst)" "a key deleted and inserted again"
assert_eq 0 "$(map_vs_target)" "the map equals the target's (legacy_id, id) at the end"
