/*
 * v7fill schema management, id keys, checkpoints and run history.
 */
#include "v7fill/state.h"

#include <inttypes.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"
#include "v7fill/run_history.h"

/* Advisory lock key for creating v7fill's own objects: "v7fS" "etup". */
#define STATE_SETUP_LOCK "7665318803486371184"

static const char *const setup_sql =
    "CREATE SCHEMA IF NOT EXISTS v7fill;"
    "CREATE TABLE IF NOT EXISTS v7fill.id_key ("
    "  target_schema text NOT NULL, target_table text NOT NULL,"
    "  key bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),"
    "  PRIMARY KEY (target_schema, target_table));"
    "CREATE TABLE IF NOT EXISTS v7fill.checkpoint ("
    "  target_schema text NOT NULL, target_table text NOT NULL, file_identity text NOT NULL,"
    "  source_name text NOT NULL, byte_offset bigint NOT NULL, line bigint NOT NULL,"
    "  records bigint NOT NULL, rows_read bigint NOT NULL, inserted bigint NOT NULL,"
    "  duplicates bigint NOT NULL, rejected bigint NOT NULL, expired bigint NOT NULL DEFAULT 0,"
    "  rejects_path text, rejects_size bigint NOT NULL DEFAULT 0,"
    "  late_size bigint NOT NULL DEFAULT 0,"
    "  finished boolean NOT NULL DEFAULT false, updated_at timestamptz NOT NULL DEFAULT now(),"
    "  PRIMARY KEY (target_schema, target_table, file_identity));"
    /* the target table the position is in: a table of the same name created
     * since (dropped and made again) holds none of those rows */
    "ALTER TABLE v7fill.checkpoint ADD COLUMN IF NOT EXISTS target_oid oid;"
    /* which rejects and late-rows files the sizes are of ("dev:ino"), so that a
     * resume cuts back only its own file; how much of the input the position
     * is after (a hash of its bytes), and the options that decided its rows and
     * the source-reference template: a checkpoint resumes only the same import.
     * NULL in checkpoints of earlier versions: not checked. */
    "ALTER TABLE v7fill.checkpoint ADD COLUMN IF NOT EXISTS rejects_file text,"
    "  ADD COLUMN IF NOT EXISTS late_path text, ADD COLUMN IF NOT EXISTS late_file text,"
    "  ADD COLUMN IF NOT EXISTS content_len bigint, ADD COLUMN IF NOT EXISTS content_hash text,"
    "  ADD COLUMN IF NOT EXISTS options text, ADD COLUMN IF NOT EXISTS source_ref text;"
    "CREATE TABLE IF NOT EXISTS v7fill.run ("
    "  run_id bigserial PRIMARY KEY, target_schema text NOT NULL, target_table text NOT NULL,"
    "  command text NOT NULL, status text NOT NULL, finished_at timestamptz NOT NULL DEFAULT now(),"
    "  elapsed_s double precision NOT NULL, rows_read bigint NOT NULL, inserted bigint NOT NULL,"
    "  duplicates bigint NOT NULL, rejected bigint NOT NULL, partitions_created bigint NOT NULL,"
    "  stats jsonb);"
    /* the run's table: the report leaves out runs into an earlier table of
     * the same name */
    "ALTER TABLE v7fill.run ADD COLUMN IF NOT EXISTS target_oid oid;"
    /* folding reads each table's rows by time (run_history.c) */
    RUN_INDEX_SQL ";"
    "REVOKE ALL ON v7fill.id_key FROM PUBLIC;";

bool
state_create_once(PgConn *c, const char *exists_sql, const char *create_sql, const char *what,
                  Err *err)
{
    PGresult *res;
    bool exists;

    /* Fast path: everything there already (no lock, no DDL). */
    if (!pg_query(c, exists_sql, 0, NULL, &res, err))
        return false;
    exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (exists)
        return true;
    if (!pg_exec(c, "BEGIN", err))
        return false;
    if (!pg_exec(c, "SELECT pg_advisory_xact_lock(" STATE_SETUP_LOCK ")", err) ||
        !pg_exec(c, create_sql, err))
    {
        Err ignored;
        if (!pg_exec(c, "ROLLBACK", &ignored))
            (void) 0;
        err_prefix(err, "could not create %s", what);
        if (!err->hint[0])
            err_hint(err, "The first run needs CREATE on the database; later runs only need "
                          "write access to the v7fill schema.");
        return false;
    }
    return pg_exec(c, "COMMIT", err);
}

bool
state_setup(PgConn *c, Err *err)
{
    return state_create_once(c,
                             "SELECT to_regclass('v7fill.id_key') IS NOT NULL AND "
                             "to_regclass('v7fill.checkpoint') IS NOT NULL AND "
                             "to_regclass('v7fill.run') IS NOT NULL AND "
                             "EXISTS (SELECT 1 FROM pg_catalog.pg_attribute "
                             "WHERE attrelid = to_regclass('v7fill.checkpoint') "
                             "AND attname = 'target_oid') AND "
                             "EXISTS (SELECT 1 FROM pg_catalog.pg_attribute "
                             "WHERE attrelid = to_regclass('v7fill.checkpoint') "
                             "AND attname = 'source_ref') AND "
                             "EXISTS (SELECT 1 FROM pg_catalog.pg_attribute "
                             "WHERE attrelid = to_regclass('v7fill.run') "
                             "AND attname = 'target_oid')",
                             setup_sql, "v7fill's own tables (schema v7fill)", err);
}

bool
state_id_key(PgConn *c, const char *schema, const char *table, uint8_t key[ID_KEY_LEN], Err *err)
{
    uint8_t fresh[ID_KEY_LEN];
    char hex[2 * ID_KEY_LEN + 3];
    const char *params[3];
    PGresult *res;
    size_t len = 0;
    unsigned char *raw;

    if (RAND_bytes(fresh, sizeof fresh) != 1)
        return err_set(err, EC_INTERNAL, "OpenSSL RAND_bytes failed");
    hex[0] = '\\';
    hex[1] = 'x';
    for (size_t i = 0; i < ID_KEY_LEN; i++)
        (void) snprintf(hex + 2 + 2 * i, 3, "%02x", fresh[i]);
    params[0] = schema;
    params[1] = table;
    params[2] = hex;
    /* Insert-if-absent then read: two concurrent first runs agree on one key. */
    if (!pg_exec_params(c,
                        "INSERT INTO v7fill.id_key (target_schema, target_table, key) "
                        "VALUES ($1, $2, $3::bytea) ON CONFLICT DO NOTHING",
                        3, params, err))
        return false;
    memset(hex, 0, sizeof hex);
    memset(fresh, 0, sizeof fresh);
    if (!pg_query(c,
                  "SELECT key FROM v7fill.id_key WHERE target_schema = $1 AND target_table = $2",
                  2, params, &res, err))
        return false;
    if (PQntuples(res) != 1)
    {
        PQclear(res);
        return err_set(err, EC_INTERNAL, "id key of %s.%s not found after creating it", schema,
                       table);
    }
    raw = PQunescapeBytea((const unsigned char *) PQgetvalue(res, 0, 0), &len);
    PQclear(res);
    if (raw == NULL || len != ID_KEY_LEN)
    {
        PQfreemem(raw);
        return err_set(err, EC_CONFIG, "id key of %s.%s in v7fill.id_key is not %d bytes", schema,
                       table, ID_KEY_LEN);
    }
    memcpy(key, raw, ID_KEY_LEN);
    memset(raw, 0, len);
    PQfreemem(raw);
    return true;
}

bool
state_lookup_name(const char *table, const char *override, char **out, Err *err)
{
    char *name = override ? xstrdup(override) : xasprintf("%s_source_ref", table);

    if (strlen(name) > 63)
    {
        err_set(err, EC_CONFIG, "lookup table name \"%s\" is longer than 63 bytes", name);
        err_hint(err, "Name it with --lookup-table.");
        free(name);
        return false;
    }
    *out = name;
    return true;
}

bool
state_lookup_kind_check(const char *q, bool want_map, LookupShape shape, int map_bits, Err *err)
{
    if (want_map == (shape == LOOKUP_LEGACY_ID))
        return true;
    if (want_map)
        err_set(err, EC_CONFIG,
                "lookup table %s is a source-reference lookup (%s), not a key map (legacy_id)", q,
                lookup_key_column(shape));
    else
        err_set(err, EC_CONFIG,
                "lookup table %s is a key map (legacy_id %s), not a source-reference lookup", q,
                lookup_map_type_name(map_bits));
    err_hint(err, want_map ? "Name another lookup table with --lookup-table, or leave --key-map "
                             "out."
                           : "Use it with --key-map COLUMN, or name another lookup table with "
                             "--lookup-table.");
    return false;
}

/* Create the lookup with sql (its CREATE TABLE IF NOT EXISTS) unless it
 * exists; its shape (and a key map's width) read back. */
static bool
lookup_create(PgConn *c, const char *schema, const char *lookup, const char *q, const char *sql,
              LookupShape *shape, int *map_bits, Err *err)
{
    bool exists = false;
    bool ok;

    ok = state_lookup_inspect(c, schema, lookup, &exists, shape, map_bits, err);
    if (ok && !exists)
    {
        /* Created here, or by whoever got the lock first: its type read back. */
        ok = pg_exec(c, "BEGIN", err) &&
             pg_exec(c, "SELECT pg_advisory_xact_lock(" STATE_SETUP_LOCK ")", err) &&
             pg_exec(c, sql, err) && pg_exec(c, "COMMIT", err) &&
             state_lookup_inspect(c, schema, lookup, &exists, shape, map_bits, err);
        if (!ok)
        {
            Err ignored;
            if (!pg_exec(c, "ROLLBACK", &ignored))
                (void) 0;
            err_prefix(err, "could not create lookup table %s", q);
        }
    }
    return ok;
}

bool
state_lookup_create_map(PgConn *c, const char *schema, const char *lookup, const char *map_type,
                        bool id_unique, LookupShape *shape, int *map_bits, Err *err)
{
    char *q = pg_qualified(c, schema, lookup);
    int bits = lookup_map_type_bits(map_type ? map_type : "bigint");
    char *sql;
    bool ok;

    if (bits == 0)
    {
        err_set(err, EC_USAGE, "key map type \"%s\" is not smallint, integer or bigint",
                map_type);
        free(q);
        return false;
    }
    /* Written like the hashed lookup (bulk inserts, VACUUMed at the end). */
    sql = xasprintf("CREATE TABLE IF NOT EXISTS %s (legacy_id %s PRIMARY KEY, "
                    "id uuid NOT NULL%s) WITH (autovacuum_vacuum_insert_threshold = -1)",
                    q, lookup_map_type_name(bits), id_unique ? " UNIQUE" : "");
    ok = lookup_create(c, schema, lookup, q, sql, shape, map_bits, err) &&
         state_lookup_kind_check(q, true, *shape, *map_bits, err);
    free(sql);
    free(q);
    return ok;
}

bool
state_lookup_create(PgConn *c, const char *schema, const char *lookup, LookupShape create_as,
                    LookupShape *shape, Err *err)
{
    char *q = pg_qualified(c, schema, lookup);
    /* Rows are only ever inserted, in bulk, by imports that VACUUM the table
     * when they finish; insert-triggered autovacuum during a long import would
     * scan the whole index again and again for nothing.  The 16-byte key
     * (srcref.h) is stored as uuid, not bytea: a fixed-size type whose
     * comparisons skip the varlena handling, and a third smaller index
     * (probes measured 18% faster). */
    char *sql = xasprintf("CREATE TABLE IF NOT EXISTS %s ("
                          "%s uuid PRIMARY KEY, id uuid NOT NULL, ref text) "
                          "WITH (autovacuum_vacuum_insert_threshold = -1)",
                          q, lookup_key_column(create_as));
    int map_bits = 0;
    bool ok = lookup_create(c, schema, lookup, q, sql, shape, &map_bits, err) &&
              state_lookup_kind_check(q, false, *shape, map_bits, err);

    free(sql);
    free(q);
    return ok;
}

bool
state_lookup_exists(PgConn *c, const char *schema, const char *lookup, bool *exists,
                    LookupShape *shape, Err *err)
{
    return state_lookup_inspect(c, schema, lookup, exists, shape, NULL, err);
}

bool
state_lookup_inspect(PgConn *c, const char *schema, const char *lookup, bool *exists,
                     LookupShape *shape, int *map_bits, Err *err)
{
    const char *params[2] = {schema, lookup};
    PGresult *res;
    const char *col;
    LookupShape found = LOOKUP_REF_KEY;
    int bits = 0;

    /* 'ref_key' sorts after 'ref_hash', both after 'legacy_id': a table with
     * both ref_ columns is a current one. */
    if (!pg_query(c,
                  "SELECT (SELECT a.attname || ' ' || format_type(a.atttypid, NULL) "
                  "FROM pg_attribute a WHERE a.attrelid = k.oid "
                  "AND a.attname IN ('ref_key', 'ref_hash', 'legacy_id') AND NOT a.attisdropped "
                  "ORDER BY a.attname DESC LIMIT 1) "
                  "FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace "
                  "WHERE n.nspname = $1 AND k.relname = $2",
                  2, params, &res, err))
        return false;
    *exists = PQntuples(res) > 0;
    col = *exists ? PQgetvalue(res, 0, 0) : "ref_key uuid";
    if (strcmp(col, "ref_key uuid") == 0)
        found = LOOKUP_REF_KEY;
    else if (strcmp(col, "ref_hash uuid") == 0)
        found = LOOKUP_REF_HASH_UUID;
    else if (strcmp(col, "ref_hash bytea") == 0)
        found = LOOKUP_REF_HASH_BYTEA;
    else if (strncmp(col, "legacy_id ", 10) == 0 && (bits = lookup_map_type_bits(col + 10)) > 0)
        found = LOOKUP_LEGACY_ID;
    else if (strncmp(col, "legacy_id ", 10) == 0)
    {
        err_set(err, EC_CONFIG,
                "key map %s.%s has legacy_id of type %s: a key map's must be smallint, integer "
                "or bigint",
                schema, lookup, col + 10);
        err_hint(err, "Name another lookup table with --lookup-table.");
        PQclear(res);
        return false;
    }
    else
    {
        err_set(err, EC_CONFIG,
                "table %s.%s is not a v7fill lookup: it has no ref_key uuid (or ref_hash) column "
                "(nor a key map's legacy_id)%s%s",
                schema, lookup, col[0] ? "; found " : "", col);
        err_hint(err, "Name another lookup table with --lookup-table.");
        PQclear(res);
        return false;
    }
    PQclear(res);
    if (shape)
        *shape = found;
    if (map_bits)
        *map_bits = bits;
    return true;
}

static uint64_t
state_u64(const PGresult *res, int row, int col)
{
    return (uint64_t) strtoull(PQgetvalue(res, row, col), NULL, 10);
}

bool
state_checkpoint_get(PgConn *c, const char *schema, const char *table, unsigned int target_oid,
                     const char *identity, Checkpoint *cp, Err *err)
{
    const char *params[3] = {schema, table, identity};
    PGresult *res;

    memset(cp, 0, sizeof *cp);
    if (!pg_query(c,
                  "SELECT finished, byte_offset, line, records, rows_read, inserted, duplicates, "
                  "rejected, expired, rejects_size, coalesce(rejects_path, ''), late_size, "
                  "coalesce(target_oid::text, ''), coalesce(rejects_file, ''), "
                  "coalesce(late_path, ''), coalesce(late_file, ''), coalesce(content_len, 0), "
                  "coalesce(content_hash, ''), options, source_ref "
                  "FROM v7fill.checkpoint "
                  "WHERE target_schema = $1 AND target_table = $2 AND file_identity = $3",
                  3, params, &res, err))
        return false;
    /* Written for another table of this name (checkpoints of earlier versions
     * name none): that position is not this table's. */
    if (PQntuples(res) == 1 && PQgetvalue(res, 0, 12)[0] != '\0' &&
        strtoul(PQgetvalue(res, 0, 12), NULL, 10) != target_oid)
        cp->stale = true;
    else if (PQntuples(res) == 1)
    {
        cp->found = true;
        cp->finished = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        cp->offset = state_u64(res, 0, 1);
        cp->line = state_u64(res, 0, 2);
        cp->records = state_u64(res, 0, 3);
        cp->read = state_u64(res, 0, 4);
        cp->inserted = state_u64(res, 0, 5);
        cp->duplicates = state_u64(res, 0, 6);
        cp->rejected = state_u64(res, 0, 7);
        cp->expired = state_u64(res, 0, 8);
        cp->rejects_size = state_u64(res, 0, 9);
        (void) snprintf(cp->rejects_path, sizeof cp->rejects_path, "%s", PQgetvalue(res, 0, 10));
        cp->late_size = state_u64(res, 0, 11);
        (void) snprintf(cp->rejects_file, sizeof cp->rejects_file, "%s", PQgetvalue(res, 0, 13));
        (void) snprintf(cp->late_path, sizeof cp->late_path, "%s", PQgetvalue(res, 0, 14));
        (void) snprintf(cp->late_file, sizeof cp->late_file, "%s", PQgetvalue(res, 0, 15));
        cp->content_len = state_u64(res, 0, 16);
        cp->content_hash = strtoull(PQgetvalue(res, 0, 17), NULL, 16);
        cp->has_options = !PQgetisnull(res, 0, 18);
        (void) snprintf(cp->options, sizeof cp->options, "%s", PQgetvalue(res, 0, 18));
        cp->has_source_ref = !PQgetisnull(res, 0, 19);
        (void) snprintf(cp->source_ref, sizeof cp->source_ref, "%s", PQgetvalue(res, 0, 19));
    }
    PQclear(res);
    return true;
}

bool
state_checkpoint_put(PgConn *c, const char *schema, const char *table, unsigned int target_oid,
                     const char *identity, const char *source_name, const Checkpoint *cp,
                     Err *err)
{
    char nums[10][24];
    char oid[16];
    char clen[24];
    char chash[24];
    const char *params[24];
    uint64_t vals[10] = {cp->offset,     cp->line,       cp->records,  cp->read,
                         cp->inserted,   cp->duplicates, cp->rejected, cp->expired,
                         cp->rejects_size, cp->late_size};

    for (int i = 0; i < 10; i++)
        (void) snprintf(nums[i], sizeof nums[i], "%" PRIu64, vals[i]);
    params[0] = schema;
    params[1] = table;
    params[2] = identity;
    params[3] = source_name;
    for (int i = 0; i < 9; i++)
        params[4 + i] = nums[i];
    params[13] = cp->rejects_path[0] ? cp->rejects_path : NULL;
    params[14] = cp->finished ? "true" : "false";
    params[15] = nums[9];
    (void) snprintf(oid, sizeof oid, "%u", target_oid);
    params[16] = oid;
    params[17] = cp->rejects_file[0] ? cp->rejects_file : NULL;
    params[18] = cp->late_path[0] ? cp->late_path : NULL;
    params[19] = cp->late_file[0] ? cp->late_file : NULL;
    (void) snprintf(clen, sizeof clen, "%" PRIu64, cp->content_len);
    (void) snprintf(chash, sizeof chash, "%016" PRIx64, cp->content_hash);
    params[20] = cp->content_len ? clen : NULL;
    params[21] = cp->content_len ? chash : NULL;
    params[22] = cp->has_options ? cp->options : NULL;
    params[23] = cp->has_source_ref ? cp->source_ref : NULL;
    return pg_exec_params(
        c,
        "INSERT INTO v7fill.checkpoint (target_schema, target_table, file_identity, source_name, "
        "byte_offset, line, records, rows_read, inserted, duplicates, rejected, expired, "
        "rejects_size, rejects_path, finished, late_size, target_oid, rejects_file, late_path, "
        "late_file, content_len, content_hash, options, source_ref, updated_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, "
        "$18, $19, $20, $21, $22, $23, $24, now()) "
        "ON CONFLICT (target_schema, target_table, file_identity) DO UPDATE SET "
        "source_name = EXCLUDED.source_name, byte_offset = EXCLUDED.byte_offset, "
        "line = EXCLUDED.line, records = EXCLUDED.records, rows_read = EXCLUDED.rows_read, "
        "inserted = EXCLUDED.inserted, duplicates = EXCLUDED.duplicates, "
        "rejected = EXCLUDED.rejected, expired = EXCLUDED.expired, "
        "rejects_size = EXCLUDED.rejects_size, rejects_path = EXCLUDED.rejects_path, "
        "finished = EXCLUDED.finished, late_size = EXCLUDED.late_size, "
        "target_oid = EXCLUDED.target_oid, rejects_file = EXCLUDED.rejects_file, "
        "late_path = EXCLUDED.late_path, late_file = EXCLUDED.late_file, "
        "content_len = EXCLUDED.content_len, content_hash = EXCLUDED.content_hash, "
        "options = EXCLUDED.options, source_ref = EXCLUDED.source_ref, updated_at = now()",
        24, params, err);
}

bool
state_checkpoint_delete(PgConn *c, const char *schema, const char *table, const char *identity,
                        Err *err)
{
    const char *params[3] = {schema, table, identity};

    return pg_exec_params(c,
                          "DELETE FROM v7fill.checkpoint WHERE target_schema = $1 AND "
                          "target_table = $2 AND file_identity = $3",
                          3, params, err);
}

bool
state_checkpoint_unfinished(PgConn *c, const char *schema, const char *table,
                            unsigned int target_oid, char ***identities, size_t *n, Err *err)
{
    char oid[16];
    const char *params[3] = {schema, table, oid};
    PGresult *res;
    int rows;

    (void) snprintf(oid, sizeof oid, "%u", target_oid);
    *identities = NULL;
    *n = 0;
    if (!pg_query(c,
                  "SELECT file_identity FROM v7fill.checkpoint WHERE target_schema = $1 "
                  "AND target_table = $2 AND NOT finished AND file_identity NOT LIKE 'stdin:%' "
                  "AND (target_oid IS NULL OR target_oid = $3::oid)",
                  3, params, &res, err))
        return false;
    rows = PQntuples(res);
    if (rows > 0)
        *identities = xcalloc((size_t) rows, sizeof **identities);
    for (int r = 0; r < rows; r++)
        (*identities)[r] = xstrdup(PQgetvalue(res, r, 0));
    *n = (size_t) rows;
    PQclear(res);
    return true;
}

bool
state_checkpoint_others_size(PgConn *c, const char *schema, const char *table,
                             const char *identity, const char *file_id, uint64_t *size, Err *err)
{
    const char *params[4] = {schema, table, identity, file_id};
    PGresult *res;

    *size = 0;
    if (!pg_query(c,
                  "SELECT coalesce(max(greatest(CASE WHEN rejects_file = $4 THEN rejects_size END, "
                  "CASE WHEN late_file = $4 THEN late_size END)), 0) "
                  "FROM v7fill.checkpoint WHERE (rejects_file = $4 OR late_file = $4) "
                  "AND NOT (target_schema = $1 AND target_table = $2 AND file_identity = $3)",
                  4, params, &res, err))
        return false;
    *size = state_u64(res, 0, 0); /* an aggregate: one row */
    PQclear(res);
    return true;
}

bool
state_run_record(PgConn *c, const char *schema, const char *table, unsigned int target_oid,
                 const char *command, const char *status, double elapsed_s, uint64_t read,
                 uint64_t inserted, uint64_t duplicates, uint64_t rejected,
                 uint64_t partitions_created, const char *stats_json, const char *row_key,
                 bool own_txn, Err *err)
{
    char nums[6][32];
    char oid[16];
    const char *params[13];
    Err ignored;

    (void) snprintf(nums[0], sizeof nums[0], "%.3f", elapsed_s);
    (void) snprintf(nums[1], sizeof nums[1], "%" PRIu64, read);
    (void) snprintf(nums[2], sizeof nums[2], "%" PRIu64, inserted);
    (void) snprintf(nums[3], sizeof nums[3], "%" PRIu64, duplicates);
    (void) snprintf(nums[4], sizeof nums[4], "%" PRIu64, rejected);
    (void) snprintf(nums[5], sizeof nums[5], "%" PRIu64, partitions_created);
    params[0] = schema;
    params[1] = table;
    params[2] = command;
    params[3] = status;
    for (int i = 0; i < 6; i++)
        params[4 + i] = nums[i];
    params[10] = stats_json;
    (void) snprintf(oid, sizeof oid, "%u", target_oid);
    params[11] = oid;
    params[12] = row_key;
    /* own_txn: in a transaction of its own, whose COMMIT is the moment it
     * lands (the fault tests cut the connection there). */
    if (own_txn && !pg_exec(c, "BEGIN", err))
        return false;
    if (pg_exec_params(c,
                       "INSERT INTO v7fill.run (target_schema, target_table, command, status, "
                       "elapsed_s, rows_read, inserted, duplicates, rejected, "
                       "partitions_created, stats, target_oid) "
                       "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
                       "  CASE WHEN $13::text IS NULL THEN $11::jsonb "
                       "  ELSE $11::jsonb || jsonb_build_object('row_key', $13::text) END, $12)",
                       13, params, err))
        return !own_txn || pg_exec(c, "COMMIT", err);
    if (own_txn && !pg_is_broken(c) && !pg_exec(c, "ROLLBACK", &ignored))
        (void) 0;
    return false;
}
