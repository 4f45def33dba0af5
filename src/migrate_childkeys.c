/*
 * migrate_childkeys.c: the legacy keys of expand-mode child rows written
 * with only <fk>_uuid, set from the map when switching back
 * (migrate_childkeys.h).
 */
#include "v7fill/migrate_childkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"

/* One database: the child joined with the map in one statement. */
static bool
keys_same(PgConn *conn, const MigrateSpec *spec, const char *cq, const char *fk, const char *fku,
          const char *legacy_q, uint64_t *rows, Err *err)
{
    char *map = pg_qualified(conn, spec->into_schema, spec->map_table);
    char *key = pg_ident(conn, spec->key);
    char *sql = xasprintf("WITH u AS (UPDATE %s c SET %s = m.legacy_id FROM %s m WHERE c.%s IS "
                          "NULL AND c.%s = m.id AND EXISTS (SELECT 1 FROM %s l WHERE l.%s = "
                          "m.legacy_id) RETURNING 1) SELECT count(*) FROM u",
                          cq, fk, map, fk, fku, legacy_q, key);
    PGresult *res = NULL;
    bool ok = pg_query(conn, sql, 0, NULL, &res, err);

    if (ok && PQntuples(res) == 1)
        *rows += strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    free(sql);
    free(key);
    free(map);
    return ok;
}

/* Two databases: the distinct uuids still without a key, read along the
 * uuid up to MIGRATE_CHILDKEYS_SCAN at a time (each read is a scan of the
 * child when <fk> has no index: one per 5,000 uuids made a switch back with
 * a million such rows read the child 200 times), each 5,000 of them looked
 * up in the map on its own connection and the keys written back as two
 * arrays. */
static bool
keys_two(PgConn *conn, PgConn *mapc, const MigrateSpec *spec, const char *cq, const char *fk,
         const char *fku, const char *legacy_q, uint64_t *rows, Err *err)
{
    char *map = pg_qualified(mapc, spec->into_schema, spec->map_table);
    char *key = pg_ident(conn, spec->key);
    char *read = xasprintf("SELECT DISTINCT c.%s FROM %s c WHERE c.%s IS NULL AND c.%s > "
                           "$1::uuid ORDER BY 1 LIMIT %d",
                           fku, cq, fk, fku, MIGRATE_CHILDKEYS_SCAN);
    char *look = xasprintf("SELECT array_agg(id ORDER BY id)::text, array_agg(legacy_id ORDER BY "
                           "id)::text FROM %s WHERE id = ANY ($1::uuid[])",
                           map);
    /* key_type: the source key's type as the catalog printed it. */
    char *write = xasprintf("WITH u AS (UPDATE %s c SET %s = v.l FROM unnest($1::uuid[], "
                            "$2::%s[]) AS v (id, l) WHERE c.%s IS NULL AND c.%s = v.id AND "
                            "EXISTS (SELECT 1 FROM %s lt WHERE lt.%s = v.l) RETURNING 1) "
                            "SELECT count(*) FROM u",
                            cq, fk, spec->key_type, fk, fku, legacy_q, key);
    char *after = xstrdup("00000000-0000-0000-0000-000000000000");
    bool ok = true, more = true;

    while (ok && more)
    {
        PGresult *r = NULL;
        const char *p1[1] = {after};
        int n;

        ok = pg_query(conn, read, 1, p1, &r, err);
        n = ok ? PQntuples(r) : 0;
        more = n == MIGRATE_CHILDKEYS_SCAN;
        for (int from = 0; ok && from < n; from += MIGRATE_CHILDKEYS_BATCH)
        {
            int to = from + MIGRATE_CHILDKEYS_BATCH < n ? from + MIGRATE_CHILDKEYS_BATCH : n;
            const char **vals = xcalloc((size_t) (to - from), sizeof *vals);
            char *ids;
            const char *p2[1];
            PGresult *m = NULL, *w = NULL;

            for (int k = from; k < to; k++)
                vals[k - from] = PQgetvalue(r, k, 0);
            ids = pg_array_literal(vals, to - from);
            free(vals);
            p2[0] = ids;

            ok = pg_query(mapc, look, 1, p2, &m, err);
            if (ok && !PQgetisnull(m, 0, 0))
            {
                const char *p3[2] = {PQgetvalue(m, 0, 0), PQgetvalue(m, 0, 1)};

                ok = pg_query(conn, write, 2, p3, &w, err);
                if (ok)
                    *rows += strtoull(PQgetvalue(w, 0, 0), NULL, 10);
            }
            free(ids);
            PQclear(m);
            PQclear(w);
        }
        if (ok && n > 0)
        {
            free(after);
            after = xstrdup(PQgetvalue(r, n - 1, 0));
        }
        PQclear(r);
    }
    free(after);
    free(write);
    free(look);
    free(read);
    free(key);
    free(map);
    return ok;
}

bool
migrate_child_keys_back(PgConn *conn, PgConn *map, const MigrateSpec *spec,
                        const MigrateChild *ch, const char *legacy_q, uint64_t *rows, Err *err)
{
    char uuidcol[80];
    char *cq = pg_qualified(conn, ch->schema, ch->table);
    const char *p[2] = {cq, uuidcol};
    PGresult *res = NULL;
    bool ok, has;

    (void) snprintf(uuidcol, sizeof uuidcol, "%s_uuid", ch->fk_column);
    ok = pg_query(conn,
                  "SELECT count(*) FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass "
                  "AND attname = $2 AND NOT attisdropped",
                  2, p, &res, err);
    has = ok && strcmp(PQgetvalue(res, 0, 0), "1") == 0;
    PQclear(res);
    if (ok && has)
    {
        char *fk = pg_ident(conn, ch->fk_column);
        char *fku = pg_ident(conn, uuidcol);

        ok = map == NULL ? keys_same(conn, spec, cq, fk, fku, legacy_q, rows, err)
                         : keys_two(conn, map, spec, cq, fk, fku, legacy_q, rows, err);
        free(fk);
        free(fku);
    }
    if (!ok)
        err_prefix(err, "the legacy keys of %s.%s", ch->schema, ch->table);
    free(cq);
    return ok;
}
