/*
 * migrate_ddl.c: a migration's source described from its catalog, and its
 * target's DDL (see migrate_ddl.h).
 */
#include "v7fill/migrate_ddl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each index of the source: name, unique, primary, exclusion, method, the key
 * columns (the key column renamed legacy_id, direction and NULLS order kept),
 * the INCLUDE columns, the predicate, and whether an expression or the
 * predicate uses the key (those cannot follow the rename). */
static const char *const q_indexes =
    "SELECT c.relname, i.indisunique, i.indisprimary, i.indisexclusion, am.amname,"
    "  (SELECT string_agg(CASE WHEN k.attnum = 0"
    "                          THEN '(' || pg_get_indexdef(i.indexrelid, k.ord::int, true) || ')'"
    "                          WHEN k.attnum = $2::int2 THEN 'legacy_id'"
    "                          ELSE quote_ident(a.attname) END"
    "       || CASE WHEN (i.indoption[k.ord - 1] & 1) = 1 THEN ' DESC' ELSE '' END"
    "       || CASE (i.indoption[k.ord - 1] & 3) WHEN 2 THEN ' NULLS FIRST'"
    "                                            WHEN 1 THEN ' NULLS LAST' ELSE '' END,"
    "       ', ' ORDER BY k.ord)"
    "     FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)"
    "     LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
    "    WHERE k.ord <= i.indnkeyatts),"
    "  (SELECT string_agg(CASE WHEN k.attnum = $2::int2 THEN 'legacy_id'"
    "                          ELSE quote_ident(a.attname) END, ', ' ORDER BY k.ord)"
    "     FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)"
    "     JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
    "    WHERE k.ord > i.indnkeyatts),"
    "  pg_get_expr(i.indpred, i.indrelid, true),"
    "  (coalesce(i.indexprs::text, '') || coalesce(i.indpred::text, ''))"
    "     LIKE '%:varattno ' || $2 || ' %'"
    " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam"
    " WHERE i.indrelid = $1::oid ORDER BY c.relname";

void
migrate_source_free(MigrateSource *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->ncols; i++)
        free(s->cols[i].default_expr);
    free(s->cols);
    buf_free(&s->index_ddl);
    buf_free(&s->check_ddl);
    buf_free(&s->notes);
    buf_free(&s->children_fk);
    memset(s, 0, sizeof *s);
}

static bool
describe_columns(PgConn *src, const char *oid, MigrateSource *out, Err *err)
{
    const char *params[1] = {oid};
    PGresult *res;

    if (!pg_query(src,
                  "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,"
                  "  pg_get_expr(d.adbin, d.adrelid), a.attgenerated <> '' FROM pg_attribute a"
                  "  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
                  " WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped"
                  " ORDER BY a.attnum",
                  1, params, &res, err))
        return false;
    out->ncols = (size_t) PQntuples(res);
    out->cols = xcalloc(out->ncols ? out->ncols : 1, sizeof *out->cols);
    for (size_t i = 0; i < out->ncols; i++)
    {
        MigrateColumn *c = &out->cols[i];
        bool generated = PQgetvalue(res, (int) i, 4)[0] == 't';

        (void) snprintf(c->name, sizeof c->name, "%s", PQgetvalue(res, (int) i, 0));
        (void) snprintf(c->type, sizeof c->type, "%s", PQgetvalue(res, (int) i, 1));
        c->not_null = PQgetvalue(res, (int) i, 2)[0] == 't';
        if (!PQgetisnull(res, (int) i, 3) && !generated)
            c->default_expr = xstrdup(PQgetvalue(res, (int) i, 3));
        if (generated)
            buf_printf(&out->notes,
                       "column %s is generated on the source: a plain column in the target "
                       "(its values are copied)\n",
                       c->name);
    }
    PQclear(res);
    return true;
}

static bool
find_column(const MigrateSource *s, const char *name, size_t *at)
{
    for (size_t i = 0; i < s->ncols; i++)
        if (strcmp(s->cols[i].name, name) == 0)
        {
            *at = i;
            return true;
        }
    return false;
}

/* The key: the table's PRIMARY KEY, that one column, an integer type. */
static bool
check_key(PgConn *src, const char *oid, const char *key, MigrateSource *out, Err *err)
{
    const char *params[1] = {oid};
    PGresult *res;
    const char *type = out->cols[out->key].type;
    bool ok;

    if (!pg_query(src,
                  "SELECT string_agg(a.attname, ', ' ORDER BY k.ord) FROM pg_constraint p,"
                  "  unnest(p.conkey) WITH ORDINALITY k(attnum, ord)"
                  "  JOIN pg_attribute a ON a.attnum = k.attnum"
                  " WHERE p.conrelid = $1::oid AND p.contype = 'p' AND a.attrelid = $1::oid",
                  1, params, &res, err))
        return false;
    if (PQgetisnull(res, 0, 0))
        ok = err_set(err, EC_CONFIG, "%s.%s has no PRIMARY KEY: --key %s must be its primary key",
                     out->schema, out->table, key);
    else if (strcmp(PQgetvalue(res, 0, 0), key) != 0)
        ok = err_set(err, EC_CONFIG,
                     "--key %s is not the primary key of %s.%s: its primary key is (%s)", key,
                     out->schema, out->table, PQgetvalue(res, 0, 0));
    else if (strcmp(type, "smallint") != 0 && strcmp(type, "integer") != 0 &&
             strcmp(type, "bigint") != 0)
        ok = err_set(err, EC_CONFIG,
                     "--key %s of %s.%s is %s: migrate takes a smallint, integer or bigint key",
                     key, out->schema, out->table, type);
    else
        ok = true;
    PQclear(res);
    if (ok)
        (void) snprintf(out->key_type, sizeof out->key_type, "%s", type);
    return ok;
}

static bool
describe_indexes(PgConn *src, const char *oid, const char *keynum, MigrateSource *out,
                 Err *err)
{
    const char *params[2] = {oid, keynum};
    PGresult *res;

    if (!pg_query(src, q_indexes, 2, params, &res, err))
        return false;
    for (int i = 0; i < PQntuples(res); i++)
    {
        const char *name = PQgetvalue(res, i, 0);
        bool unique = PQgetvalue(res, i, 1)[0] == 't';

        if (PQgetvalue(res, i, 2)[0] == 't')
            continue; /* the key's own: legacy_id gets an index of its own */
        if (PQgetvalue(res, i, 3)[0] == 't')
        {
            buf_printf(&out->notes,
                       "index %s not recreated: an exclusion constraint on a table partitioned "
                       "by id must include id\n",
                       name);
            continue;
        }
        if (PQgetvalue(res, i, 8)[0] == 't')
        {
            buf_printf(&out->notes,
                       "index %s not recreated: its expression or predicate uses the key, "
                       "which is legacy_id in the target\n",
                       name);
            continue;
        }
        if (unique)
            buf_printf(&out->notes,
                       "index %s is UNIQUE: recreated as a plain index (a unique index on a "
                       "table partitioned by id must include id, so the uniqueness of its "
                       "columns is not enforced by the target)\n",
                       name);
        buf_printf(&out->index_ddl, "USING %s (%s)", PQgetvalue(res, i, 4),
                   PQgetvalue(res, i, 5));
        if (!PQgetisnull(res, i, 6))
            buf_printf(&out->index_ddl, " INCLUDE (%s)", PQgetvalue(res, i, 6));
        if (!PQgetisnull(res, i, 7))
            buf_printf(&out->index_ddl, " WHERE %s", PQgetvalue(res, i, 7));
        buf_putc(&out->index_ddl, '\n');
    }
    PQclear(res);
    return true;
}

static bool
describe_constraints(PgConn *src, const char *oid, const char *keynum, MigrateSource *out,
                     Err *err)
{
    const char *params[2] = {oid, keynum};
    PGresult *res;

    if (!pg_query(src,
                  "SELECT contype, conname, pg_get_constraintdef(oid, true),"
                  "  $2::int2 = ANY (conkey), conrelid::regclass::text,"
                  "  (SELECT string_agg(quote_ident(a.attname), ', ') FROM pg_attribute a"
                  "    WHERE a.attrelid = conrelid AND a.attnum = ANY (conkey)),"
                  "  conrelid = $1::oid"
                  " FROM pg_constraint WHERE (conrelid = $1::oid AND contype IN ('c', 'f'))"
                  "    OR (confrelid = $1::oid AND contype = 'f')"
                  " ORDER BY contype, conname",
                  2, params, &res, err))
        return false;
    for (int i = 0; i < PQntuples(res); i++)
    {
        const char *type = PQgetvalue(res, i, 0);
        const char *name = PQgetvalue(res, i, 1);
        const char *def = PQgetvalue(res, i, 2);
        bool on_key = PQgetvalue(res, i, 3)[0] == 't';

        if (type[0] == 'c' && on_key)
            buf_printf(&out->notes,
                       "check %s not copied: it uses the key, which is legacy_id in the target "
                       "(%s)\n",
                       name, def);
        else if (type[0] == 'c')
        {
            buf_printf(&out->check_ddl, "%s\n", name);
            buf_printf(&out->check_ddl, "%s\n", def);
        }
        else if (PQgetvalue(res, i, 6)[0] != 't')
        {
            /* a child's foreign key to the source */
            out->nchildren_fk++;
            buf_printf(&out->children_fk, "%s(%s)\n", PQgetvalue(res, i, 4),
                       PQgetvalue(res, i, 5));
        }
        else
            buf_printf(&out->notes,
                       "foreign key %s not recreated (%s): add it to the target once the "
                       "copy is caught up\n",
                       name, def);
    }
    PQclear(res);
    return true;
}

bool
migrate_ddl_describe(PgConn *src, const char *src_schema, const char *src_table, const char *key,
                     const char *time_column, MigrateSource *out, Err *err)
{
    const char *params[2] = {src_schema, src_table};
    PGresult *res;
    char oid[16];
    char keynum[16];
    const char *tt;

    memset(out, 0, sizeof *out);
    buf_init(&out->index_ddl);
    buf_init(&out->check_ddl);
    buf_init(&out->notes);
    buf_init(&out->children_fk);
    (void) snprintf(out->schema, sizeof out->schema, "%s", src_schema);
    (void) snprintf(out->table, sizeof out->table, "%s", src_table);
    if (!pg_query(src,
                  "SELECT c.oid, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = "
                  "c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
                  2, params, &res, err))
        return false;
    if (PQntuples(res) != 1 || PQgetvalue(res, 0, 1)[0] != 'r')
    {
        bool none = PQntuples(res) != 1;

        PQclear(res);
        return err_set(err, EC_CONFIG, "--from %s.%s: %s", src_schema, src_table,
                       none ? "no such table on the source"
                            : "not a plain table (migrate takes an unpartitioned table)");
    }
    (void) snprintf(oid, sizeof oid, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    if (!describe_columns(src, oid, out, err))
        return false;
    if (!find_column(out, key, &out->key))
        return err_set(err, EC_CONFIG, "--key %s: %s.%s has no such column", key, src_schema,
                       src_table);
    if (!find_column(out, time_column, &out->time))
        return err_set(err, EC_CONFIG, "--time-column %s: %s.%s has no such column", time_column,
                       src_schema, src_table);
    tt = out->cols[out->time].type;
    if (strcmp(tt, "timestamp with time zone") != 0 &&
        strcmp(tt, "timestamp without time zone") != 0 && strcmp(tt, "date") != 0 &&
        strncmp(tt, "timestamp(", 10) != 0)
        return err_set(err, EC_CONFIG,
                       "--time-column %s of %s.%s is %s: it must be timestamptz, timestamp or date",
                       time_column, src_schema, src_table, tt);
    if (!check_key(src, oid, key, out, err))
        return false;
    if (strcmp(out->cols[out->key].name, "legacy_id") != 0 && find_column(out, "legacy_id", &(size_t){0}))
        return err_set(err, EC_CONFIG,
                       "%s.%s already has a column legacy_id: the target keeps --key %s under "
                       "that name",
                       src_schema, src_table, key);
    if (find_column(out, "id", &(size_t){0}) && strcmp(key, "id") != 0)
        return err_set(err, EC_CONFIG,
                       "%s.%s has a column id that is not the key: the target's uuid key is "
                       "named id",
                       src_schema, src_table);
    /* attnum of the key */
    {
        const char *p2[2] = {oid, key};

        if (!pg_query(src, "SELECT attnum FROM pg_attribute WHERE attrelid = $1::oid AND attname = $2",
                      2, p2, &res, err))
            return false;
        (void) snprintf(keynum, sizeof keynum, "%s", PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    return describe_indexes(src, oid, keynum, out, err) &&
           describe_constraints(src, oid, keynum, out, err);
}

void
migrate_ddl_target(PgConn *q, const MigrateSource *s, const char *into_schema,
                   const char *into_table, Buf *out)
{
    char *t = pg_qualified(q, into_schema, into_table);
    const char *p;

    buf_printf(out, "CREATE TABLE %s (\n    id uuid NOT NULL", t);
    for (size_t i = 0; i < s->ncols; i++)
    {
        const MigrateColumn *c = &s->cols[i];
        char *name = pg_ident(q, c->name);

        if (i == s->key)
            buf_printf(out, ",\n    legacy_id %s NOT NULL", c->type);
        else
        {
            buf_printf(out, ",\n    %s %s", name, c->type);
            if (c->not_null)
                buf_puts(out, " NOT NULL");
            if (c->default_expr)
                buf_printf(out, " DEFAULT %s", c->default_expr);
        }
        free(name);
    }
    buf_puts(out, ",\n    PRIMARY KEY (id)\n) PARTITION BY RANGE (id);\n");
    buf_printf(out, "CREATE INDEX ON %s (legacy_id);\n", t);
    for (p = s->index_ddl.data; p && *p;)
    {
        const char *nl = strchr(p, '\n');

        buf_printf(out, "CREATE INDEX ON %s %.*s;\n", t, (int) (nl - p), p);
        p = nl + 1;
    }
    for (p = s->check_ddl.data; p && *p;)
    {
        const char *nl = strchr(p, '\n');
        const char *def = nl + 1;
        const char *nl2 = strchr(def, '\n');
        char name[128];
        char *qn;

        (void) snprintf(name, sizeof name, "%.*s", (int) (nl - p), p);
        qn = pg_ident(q, name);
        buf_printf(out, "ALTER TABLE %s ADD CONSTRAINT %s %.*s;\n", t, qn, (int) (nl2 - def), def);
        free(qn);
        p = nl2 + 1;
    }
    free(t);
}

void
migrate_ddl_map(PgConn *q, const MigrateSource *s, const char *into_schema,
                const char *map_table, bool id_unique, Buf *out)
{
    char *m = pg_qualified(q, into_schema, map_table);

    buf_printf(out, "CREATE TABLE %s (legacy_id %s PRIMARY KEY, id uuid NOT NULL%s);\n", m,
               s->key_type, id_unique ? " UNIQUE" : "");
    free(m);
}

bool
migrate_ddl_check_target(PgConn *target, const MigrateSource *s, const char *into_schema,
                         const char *into_table, Err *err)
{
    const char *params[2] = {into_schema, into_table};
    PGresult *res;
    bool ok = true;

    if (!pg_query(target,
                  "SELECT a.attname, format_type(a.atttypid, a.atttypmod),"
                  "  (SELECT pg_get_partkeydef(c.oid)) FROM pg_class c"
                  "  JOIN pg_namespace n ON n.oid = c.relnamespace"
                  "  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
                  " WHERE n.nspname = $1 AND c.relname = $2",
                  2, params, &res, err))
        return false;
    if (PQntuples(res) > 0 && strcmp(PQgetvalue(res, 0, 2), "RANGE (id)") != 0)
        ok = err_set(err, EC_CONFIG, "--into %s.%s exists but is not partitioned by RANGE (id) (%s)",
                     into_schema, into_table,
                     PQgetvalue(res, 0, 2)[0] ? PQgetvalue(res, 0, 2) : "not partitioned");
    for (size_t i = 0; ok && i <= s->ncols; i++)
    {
        const char *want = i == s->ncols ? "id" : i == s->key ? "legacy_id" : s->cols[i].name;
        const char *type = i == s->ncols ? "uuid" : s->cols[i].type;
        int r;

        for (r = 0; r < PQntuples(res); r++)
            if (strcmp(PQgetvalue(res, r, 0), want) == 0)
                break;
        if (r == PQntuples(res))
            ok = err_set(err, EC_CONFIG, "--into %s.%s exists but has no column %s (%s)",
                         into_schema, into_table, want, type);
        else if (strcmp(PQgetvalue(res, r, 1), type) != 0)
            ok = err_set(err, EC_CONFIG, "--into %s.%s exists but its column %s is %s, not %s",
                         into_schema, into_table, want, PQgetvalue(res, r, 1), type);
    }
    PQclear(res);
    return ok;
}
