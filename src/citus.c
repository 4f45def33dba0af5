/*
 * Citus: detecting a distributed target, distributing the lookup with it, and
 * reading row estimates from the shards (see citus.h).
 *
 * Everything else works on a distributed parent as on a plain one, as seen
 * with Citus 13.2: the lock-light CREATE + CHECK + ATTACH distributes the new
 * partition (Citus distributes a table attached to a distributed parent,
 * colocated with it), DETACH and DROP remove its shards, COPY and the probes
 * route through the coordinator to the shards.
 */
#include "v7fill/citus.h"

#include <stdlib.h>
#include <string.h>

#include "v7fill/log.h"
#include "v7fill/mem.h"

bool
citus_installed(PgConn *c, bool *out, Err *err)
{
    PGresult *res;

    /* pg_dist_partition exists only with the extension; to_regclass keeps the
     * query valid on a plain server. */
    if (!pg_query(c,
                  "SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL "
                  "   AND EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus')",
                  0, NULL, &res, err))
        return false;
    *out = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return true;
}

bool
citus_detect(PgConn *c, TargetTable *t, Err *err)
{
    char oid[16];
    const char *params[1] = {oid};
    PGresult *res;
    bool citus;

    if (!citus_installed(c, &citus, err))
        return false;
    if (!citus)
        return true;
    (void) snprintf(oid, sizeof oid, "%u", t->oid);
    if (!pg_query(c,
                  "SELECT d.partmethod::text, a.attname, "
                  "       pg_catalog.format_type(a.atttypid, a.atttypmod) "
                  "  FROM pg_catalog.pg_dist_partition d "
                  "  LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = d.logicalrelid "
                  "   AND d.partkey IS NOT NULL "
                  "   AND a.attname = pg_catalog.column_to_column_name(d.logicalrelid, d.partkey) "
                  " WHERE d.logicalrelid = $1::oid",
                  1, params, &res, err))
    {
        err_prefix(err, "could not read how Citus distributes %s.%s", t->schema, t->name);
        return false;
    }
    if (PQntuples(res) == 1)
    {
        t->distributed = true;
        t->dist_method = PQgetvalue(res, 0, 0)[0];
        if (!PQgetisnull(res, 0, 1))
        {
            t->dist_column = xstrdup(PQgetvalue(res, 0, 1));
            t->dist_type = xstrdup(PQgetvalue(res, 0, 2));
        }
        log_debug("%s.%s is a Citus table (method %c, column %s)", t->schema, t->name,
                  t->dist_method, t->dist_column ? t->dist_column : "none");
    }
    PQclear(res);
    return true;
}

bool
citus_table_of(PgConn *c, const char *schema, const char *table, TargetTable *out, Err *err)
{
    const char *params[2] = {schema, table};
    PGresult *res;
    bool ok;

    memset(out, 0, sizeof *out);
    if (!pg_query(c,
                  "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                  "ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
                  2, params, &res, err))
        return false;
    if (PQntuples(res) == 0)
    {
        PQclear(res);
        return true;
    }
    out->oid = (unsigned int) strtoul(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    out->schema = xstrdup(schema);
    out->name = xstrdup(table);
    ok = citus_detect(c, out, err);
    if (!ok)
        citus_table_clear(out);
    return ok;
}

void
citus_table_clear(TargetTable *t)
{
    free(t->schema);
    free(t->name);
    free(t->dist_column);
    free(t->dist_type);
    memset(t, 0, sizeof *t);
}

bool
citus_is_distributed(PgConn *c, const char *schema, const char *table, bool *out, Err *err)
{
    TargetTable t;

    *out = false;
    if (!citus_table_of(c, schema, table, &t, err))
        return false;
    *out = t.distributed;
    citus_table_clear(&t);
    return true;
}

/* What to do when Citus refuses to distribute the lookup. */
static void
lookup_refused(Err *err, const char *q, const char *key_col)
{
    err_prefix(err, "could not distribute lookup table %s", q);
    err_hint(err, "Distribute it by hand (SELECT create_distributed_table('%s', '%s')), or "
                  "name another lookup table with --lookup-table; see docs/scaling.md.",
             q, key_col);
}

/* A key map made on a local target (a later distributed one) has UNIQUE (id), which
 * Citus cannot keep on a table distributed on legacy_id: dropped (q: the map, quoted). */
static bool
map_drop_unique_id(PgConn *c, const char *q, Err *err)
{
    const char *params[1] = {q};
    PGresult *res;
    bool ok = true;

    if (!pg_query(c,
                  "SELECT k.conname FROM pg_catalog.pg_constraint k "
                  " WHERE k.conrelid = $1::pg_catalog.regclass AND k.contype = 'u' "
                  "   AND k.conkey = ARRAY[(SELECT a.attnum FROM pg_catalog.pg_attribute a "
                  "        WHERE a.attrelid = $1::pg_catalog.regclass AND a.attname = 'id')]",
                  1, params, &res, err))
        return false;
    for (int i = 0; ok && i < PQntuples(res); i++)
    {
        char *name = pg_ident(c, PQgetvalue(res, i, 0));
        char *sql = xasprintf("ALTER TABLE %s DROP CONSTRAINT %s", q, name);

        log_info("dropping UNIQUE (id) of key map %s: Citus cannot keep it on a table "
                 "distributed on legacy_id",
                 q);
        ok = pg_exec(c, sql, err);
        free(sql);
        free(name);
    }
    PQclear(res);
    return ok;
}

bool
citus_distribute_lookup(PgConn *c, const TargetTable *t, const char *lookup, const char *key_col,
                        Err *err)
{
    char *q = pg_qualified(c, t->schema, lookup);
    char *target = pg_qualified(c, t->schema, t->name);
    const char *params[3] = {q, key_col, NULL};
    PGresult *res;
    bool ok;

    if (!t->distributed)
    {
        free(q);
        free(target);
        return true;
    }
    ok = pg_query(c,
                  "SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition "
                  "                WHERE logicalrelid = $1::pg_catalog.regclass)",
                  1, params, &res, err);
    if (!ok)
        lookup_refused(err, q, key_col);
    else
    {
        bool done = strcmp(PQgetvalue(res, 0, 0), "t") == 0;

        PQclear(res);
        if (!done)
        {
            /* Colocated with the target when Citus can (same key type, hash);
             * otherwise with whatever Citus picks for a uuid key.  A key map
             * (legacy_id, an integer) cannot be colocated with a uuid target. */
            bool map = strcmp(key_col, "legacy_id") == 0;
            bool colocate = !map && t->dist_method == 'h' && t->dist_type &&
                            strcmp(t->dist_type, "uuid") == 0;

            params[2] = colocate ? target : map ? "none" : "default";
            log_info("distributing lookup table %s on %s (Citus)", q, key_col);
            /* Rows of a lookup an earlier run left local are copied to the shards;
             * the coordinator's copy is then only dead weight: emptied. */
            ok = (!map || map_drop_unique_id(c, q, err)) &&
                 pg_exec_params(c,
                                "SELECT pg_catalog.create_distributed_table($1::pg_catalog.regclass, "
                                "$2, colocate_with => $3)",
                                3, params, err) &&
                 pg_exec_params(c,
                                "SELECT pg_catalog.truncate_local_data_after_distributing_table("
                                "$1::pg_catalog.regclass)",
                                1, params, err);
            if (!ok)
                lookup_refused(err, q, key_col);
        }
    }
    free(q);
    free(target);
    return ok;
}

bool
citus_estimate_rows(PgConn *c, const TargetTable *t, RowEstimate **out, size_t *n, Err *err)
{
    char oid[16];
    const char *params[1] = {oid};
    PGresult *res;

    /* Per shard, on its worker: reltuples, relpages and the size now.  Summed
     * per partition with the planner's scaling (as catalog_estimate_rows does
     * for a local table); NULL (unknown) when any shard is unknown. */
    (void) snprintf(oid, sizeof oid, "%u", t->oid);
    if (!pg_query(c,
                  "WITH s AS ("
                  "  SELECT i.inhrelid AS oid, r.success, "
                  "         CASE WHEN r.success THEN split_part(r.result, ' ', 1)::float8 END AS tup, "
                  "         CASE WHEN r.success THEN split_part(r.result, ' ', 2)::float8 END AS pages, "
                  "         CASE WHEN r.success THEN split_part(r.result, ' ', 3)::float8 / 8192 END "
                  "           AS now_pages "
                  "    FROM pg_catalog.pg_inherits i "
                  "    JOIN pg_catalog.pg_dist_partition d ON d.logicalrelid = i.inhrelid "
                  "    CROSS JOIN LATERAL pg_catalog.run_command_on_shards(i.inhrelid::regclass, "
                  "      $cmd$SELECT c.reltuples::float8 || ' ' || c.relpages || ' ' || "
                  "             pg_catalog.pg_relation_size(c.oid) FROM pg_catalog.pg_class c "
                  "             WHERE c.oid = %L::pg_catalog.regclass$cmd$) r "
                  "   WHERE i.inhparent = $1::oid) "
                  "SELECT oid, coalesce(bool_and(success AND now_pages = 0), true), "
                  "       CASE WHEN bool_and(success AND (now_pages = 0 OR (tup >= 0 AND pages > 0))) "
                  "            THEN sum(CASE WHEN now_pages = 0 THEN 0 "
                  "                          ELSE floor(tup / pages * now_pages + 0.5) END) END "
                  "  FROM s GROUP BY oid",
                  1, params, &res, err))
    {
        err_prefix(err, "could not read the size of the shards of %s.%s", t->schema, t->name);
        return false;
    }
    *n = (size_t) PQntuples(res);
    *out = xcalloc(*n ? *n : 1, sizeof **out);
    for (size_t i = 0; i < *n; i++)
    {
        RowEstimate *e = &(*out)[i];

        e->oid = (unsigned int) strtoul(PQgetvalue(res, (int) i, 0), NULL, 10);
        e->exact = strcmp(PQgetvalue(res, (int) i, 1), "t") == 0;
        e->rows = PQgetisnull(res, (int) i, 2) ? -1 : strtod(PQgetvalue(res, (int) i, 2), NULL);
        if (e->exact)
            e->rows = 0;
    }
    PQclear(res);
    return true;
}
