/*
 * migrate_childkeys.c: the legacy keys of expand-mode child rows written
 * with only <fk>_uuid, set from the map when switching back
 * (migrate_childkeys.h).
 */
#include "v7fill/migrate_childkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/migrate_child.h"

/* One database: the child joined with the map in one statement. */
static bool
keys_same(PgConn *conn, const MigrateSpec *spec, const char *cq, const char *fk, const char *fku,
          const char *legacy_q, uint64_t *rows, Err *err)
{
    char *map = pg_qualified(conn, spec->into_schema, spec->map_table);
    char *key = pg_ident(conn, spec->key);
    /* "<fku> IS NOT NULL" spelled out: the planner then reads the rows
     * through <child>_<fk>_unset (migrate_child_back_index). */
    char *sql = xasprintf("WITH u AS (UPDATE %s c SET %s = m.legacy_id FROM %s m WHERE c.%s IS "
                          "NULL AND c.%s IS NOT NULL AND c.%s = m.id AND EXISTS (SELECT 1 FROM %s "
                          "l WHERE l.%s = m.legacy_id) RETURNING 1) SELECT count(*) FROM u",
                          cq, fk, map, fk, fku, fku, legacy_q, key);
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

/* The map's ids and legacy keys of the uuids in column 0 of r's rows [from,
 * to): *m's one row holds them as two array texts in the same order (NULL
 * when the map has none of them). */
static bool
map_lookup(PgConn *mapc, const MigrateSpec *spec, const PGresult *r, int from, int to,
           PGresult **m, Err *err)
{
    char *map = pg_qualified(mapc, spec->into_schema, spec->map_table);
    char *look = xasprintf("SELECT array_agg(id ORDER BY id)::text, array_agg(legacy_id ORDER BY "
                           "id)::text FROM %s WHERE id = ANY ($1::uuid[])",
                           map);
    const char **vals = xcalloc((size_t) (to - from), sizeof *vals);
    const char *p[1];
    char *ids;
    bool ok;

    for (int k = from; k < to; k++)
        vals[k - from] = PQgetvalue(r, k, 0);
    ids = pg_array_literal(vals, to - from);
    p[0] = ids;
    ok = pg_query(mapc, look, 1, p, m, err);
    free(ids);
    free(vals);
    free(look);
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
    char *key = pg_ident(conn, spec->key);
    char *read = xasprintf("SELECT DISTINCT c.%s FROM %s c WHERE c.%s IS NULL AND c.%s IS NOT "
                           "NULL AND c.%s > $1::uuid ORDER BY 1 LIMIT %d",
                           fku, cq, fk, fku, fku, MIGRATE_CHILDKEYS_SCAN);
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
            PGresult *m = NULL, *w = NULL;

            ok = map_lookup(mapc, spec, r, from, to, &m, err);
            if (ok && !PQgetisnull(m, 0, 0))
            {
                const char *p3[2] = {PQgetvalue(m, 0, 0), PQgetvalue(m, 0, 1)};

                ok = pg_query(conn, write, 2, p3, &w, err);
                if (ok)
                    *rows += strtoull(PQgetvalue(w, 0, 0), NULL, 10);
            }
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
    free(read);
    free(key);
    return ok;
}

/* One batch of recorded uuids (ids, legacy: the map's arrays of them) in
 * one transaction (or the caller's): the rows holding them get the key where
 * it differs and the legacy table has it; the uuid those rows had is put back
 * where the child's own trigger made it NULL (two databases: a changed key's
 * uuid is NULL until a pass; here the key is the uuid's); the uuids resolved
 * are struck from the record. */
static bool
moved_batch(PgConn *conn, const char *const sql[3], const char *ids, const char *legacy,
            uint64_t *rows, Err *err)
{
    bool own = PQtransactionStatus(pg_raw(conn)) == PQTRANS_IDLE;
    const char *p[2] = {ids, legacy};
    PGresult *u = NULL;
    bool ok = !own || pg_exec(conn, "BEGIN", err);

    ok = ok && pg_query(conn, sql[0], 2, p, &u, err);
    if (ok && PQntuples(u) == 1 && !PQgetisnull(u, 0, 1))
    {
        const char *p2[2] = {PQgetvalue(u, 0, 1), PQgetvalue(u, 0, 2)};

        *rows += strtoull(PQgetvalue(u, 0, 0), NULL, 10);
        ok = pg_exec_params(conn, sql[1], 2, p2, err);
    }
    ok = ok && pg_exec_params(conn, sql[2], 2, p, err);
    PQclear(u);
    if (own)
    {
        Err ignored = {0};

        if (ok)
            ok = pg_exec(conn, "COMMIT", err);
        else if (!pg_exec(conn, "ROLLBACK", &ignored))
            log_debug("rollback: %s", ignored.msg);
    }
    return ok;
}

/* The uuids the way back's rule recorded for rows whose NOT NULL <fk> it
 * could not set (MIGRATE_CHILD_MOVED_TABLE), MIGRATE_CHILDKEYS_BATCH at a
 * time along the record's key, looked up in the map (mapc: the map's
 * database, may be conn).  A uuid whose key the legacy table lacks stays
 * recorded, and is counted in *left. */
static bool
keys_moved(PgConn *conn, PgConn *mapc, const MigrateSpec *spec, const char *cq, const char *fk,
           const char *fku, const char *legacy_q, uint64_t *rows, uint64_t *left, Err *err)
{
    const char *p[1] = {cq};
    PGresult *res = NULL;
    char relid[16];
    bool ok, has;

    ok = pg_query(conn,
                  "SELECT $1::regclass::oid::text, pg_catalog.to_regclass('" MIGRATE_CHILD_MOVED_TABLE
                  "') IS NOT NULL",
                  1, p, &res, err);
    has = ok && PQgetvalue(res, 0, 1)[0] == 't';
    if (ok)
        (void) snprintf(relid, sizeof relid, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    if (!ok || !has)
        return ok;
    {
        char *key = pg_ident(conn, spec->key);
        char *read = xasprintf("SELECT id::text FROM " MIGRATE_CHILD_MOVED_TABLE
                               " WHERE relid = %s AND id > $1::uuid ORDER BY id LIMIT %d",
                               relid, MIGRATE_CHILDKEYS_BATCH);
        char *sql[3];
        char *after = xstrdup("00000000-0000-0000-0000-000000000000");
        bool more = true;

        /* The key set (the child's trigger sees <fk> change under the same
         * uuid); which rows, with the uuid each had. */
        sql[0] = xasprintf("WITH u AS (UPDATE %s c SET %s = v.l FROM unnest($1::uuid[], "
                           "$2::%s[]) AS v (id, l) WHERE c.%s = v.id AND c.%s IS DISTINCT FROM "
                           "v.l AND EXISTS (SELECT 1 FROM %s lt WHERE lt.%s = v.l) "
                           "RETURNING c.ctid, v.id) "
                           "SELECT count(*), array_agg(ctid)::text, array_agg(id)::text FROM u",
                           cq, fk, spec->key_type, fku, fk, legacy_q, key);
        sql[1] = xasprintf("UPDATE %s c SET %s = v.id FROM unnest($1::tid[], $2::uuid[]) AS v "
                           "(t, id) WHERE c.ctid = v.t AND c.%s IS NULL",
                           cq, fku, fku);
        sql[2] = xasprintf("DELETE FROM " MIGRATE_CHILD_MOVED_TABLE " r USING unnest($1::uuid[], "
                           "$2::%s[]) AS v (id, l) WHERE r.relid = %s AND r.id = v.id AND "
                           "EXISTS (SELECT 1 FROM %s lt WHERE lt.%s = v.l)",
                           spec->key_type, relid, legacy_q, key);
        while (ok && more)
        {
            PGresult *r = NULL, *m = NULL;
            const char *p1[1] = {after};
            int n;

            ok = pg_query(conn, read, 1, p1, &r, err);
            n = ok ? PQntuples(r) : 0;
            more = n == MIGRATE_CHILDKEYS_BATCH;
            if (ok && n > 0)
            {
                ok = map_lookup(mapc, spec, r, 0, n, &m, err);
                if (ok && !PQgetisnull(m, 0, 0))
                    ok = moved_batch(conn, (const char *const *) sql, PQgetvalue(m, 0, 0),
                                     PQgetvalue(m, 0, 1), rows, err);
                free(after);
                after = xstrdup(PQgetvalue(r, n - 1, 0));
            }
            PQclear(m);
            PQclear(r);
        }
        if (ok)
        {
            char *count = xasprintf("SELECT count(*) FROM " MIGRATE_CHILD_MOVED_TABLE
                                    " WHERE relid = %s",
                                    relid);

            ok = pg_query(conn, count, 0, NULL, &res, err);
            if (ok)
                *left += strtoull(PQgetvalue(res, 0, 0), NULL, 10);
            PQclear(res);
            free(count);
        }
        for (int i = 0; i < 3; i++)
            free(sql[i]);
        free(after);
        free(read);
        free(key);
    }
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

        uint64_t left = 0;

        ok = map == NULL ? keys_same(conn, spec, cq, fk, fku, legacy_q, rows, err)
                         : keys_two(conn, map, spec, cq, fk, fku, legacy_q, rows, err);
        ok = ok && keys_moved(conn, map ? map : conn, spec, cq, fk, fku, legacy_q, rows, &left,
                              err);
        if (ok && left > 0)
            log_warn("child %s.%s: %llu parent ids its rows were moved to by %s alone have no "
                     "legacy key in %s (the parent deleted since?): the rows holding them keep "
                     "their old %s; the ids stay in " MIGRATE_CHILD_MOVED_TABLE,
                     ch->schema, ch->table, (unsigned long long) left, uuidcol, legacy_q,
                     ch->fk_column);
        free(fk);
        free(fku);
    }
    if (!ok)
        err_prefix(err, "the legacy keys of %s.%s", ch->schema, ch->table);
    free(cq);
    return ok;
}
