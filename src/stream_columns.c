/*
 * stream_columns.c: the source columns a stream last applied with (see
 * stream_columns.h).
 */
#include "v7fill/stream_columns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"

void
stream_columns_free(StreamColumns *c)
{
    for (size_t i = 0; i < c->n; i++)
    {
        free(c->cols[i].name);
        free(c->cols[i].type);
    }
    free(c->cols);
    c->cols = NULL;
    c->n = 0;
}

/* Rows of (name, type oid, type name) into *out. */
static bool
columns_from(PgConn *c, const char *sql, int nparams, const char *const *params,
             StreamColumns *out, Err *err)
{
    PGresult *res;
    int n;

    memset(out, 0, sizeof *out);
    if (!pg_query(c, sql, nparams, params, &res, err))
        return false;
    n = PQntuples(res);
    out->cols = xcalloc(n > 0 ? (size_t) n : 1, sizeof *out->cols);
    for (int i = 0; i < n; i++)
    {
        out->cols[i].name = xstrdup(PQgetvalue(res, i, 0));
        out->cols[i].type_oid = (uint32_t) strtoul(PQgetvalue(res, i, 1), NULL, 10);
        out->cols[i].type = xstrdup(PQgetvalue(res, i, 2));
    }
    out->n = (size_t) n;
    PQclear(res);
    return true;
}

bool
stream_columns_read_source(PgConn *src, const char *schema, const char *table,
                           StreamColumns *out, Err *err)
{
    const char *params[2] = {schema, table};

    if (!columns_from(src,
                      "SELECT a.attname, a.atttypid, pg_catalog.format_type(a.atttypid, "
                      "a.atttypmod) FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c "
                      "ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = "
                      "c.relnamespace WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 "
                      "AND NOT a.attisdropped ORDER BY a.attnum",
                      2, params, out, err))
    {
        err_prefix(err, "could not read the columns of %s.%s on the source", schema, table);
        return false;
    }
    return true;
}

bool
stream_columns_get(PgConn *target, const char *slot, const char *table, StreamColumns *out,
                   Err *err)
{
    const char *params[2] = {slot, table};

    return columns_from(target,
                        "SELECT e->>'name', e->>'type_oid', e->>'type' FROM v7fill.stream s, "
                        "jsonb_array_elements(coalesce(s.columns, '[]')) WITH ORDINALITY "
                        "AS x(e, i) WHERE s.slot = $1 AND ($2::text IS NULL OR s.target = $2) "
                        "ORDER BY x.i",
                        2, params, out, err);
}

bool
stream_columns_put(PgConn *target, const char *slot, const char *table,
                   const StreamColumns *cols, Err *err)
{
    Buf json;
    const char *params[3];
    bool ok;

    buf_init(&json);
    buf_putc(&json, '[');
    for (size_t i = 0; i < cols->n; i++)
    {
        const StreamColumn *c = &cols->cols[i];

        buf_puts(&json, i ? ",{\"name\":" : "{\"name\":");
        buf_put_json_string(&json, c->name, strlen(c->name));
        buf_printf(&json, ",\"type_oid\":%u,\"type\":", (unsigned) c->type_oid);
        buf_put_json_string(&json, c->type, strlen(c->type));
        buf_putc(&json, '}');
    }
    buf_putc(&json, ']');
    buf_putc(&json, '\0');
    params[0] = slot;
    params[1] = json.data;
    params[2] = table;
    ok = pg_exec_params(target,
                        "UPDATE v7fill.stream SET columns = $2::jsonb WHERE slot = $1 AND "
                        "($3::text IS NULL OR target = $3)",
                        3, params, err);
    buf_free(&json);
    return ok;
}

static const StreamColumn *
find_column(const StreamColumns *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->cols[i].name, name) == 0)
            return &c->cols[i];
    return NULL;
}

bool
stream_columns_check(const StreamColumns *stored, const StreamColumns *now, StreamColumnTarget to,
                     void *ctx, const char *relation, const char *target, Err *err)
{
    for (size_t i = 0; i < stored->n; i++)
    {
        const StreamColumn *was = &stored->cols[i];
        const StreamColumn *is = find_column(now, was->name);
        const char *column = NULL;
        const char *type = NULL;

        if (is && is->type_oid == was->type_oid)
            continue;
        if (!to(ctx, was->name, &column, &type))
            continue; /* its values go nowhere in the target */
        if (is == NULL)
        {
            err_set(err, EC_CONFIG,
                    "column \"%s\" of %s is gone on the source (dropped or renamed since the "
                    "stream last applied it); its values went to column \"%s\" of %s: the "
                    "stream stops",
                    was->name, relation, column, target);
            err_hint(err, "Drop or rename that target column (ALTER TABLE %s RENAME COLUMN "
                          "\"%s\" TO ... keeps its values), or add the column back on the "
                          "source; then run the stream again.",
                     target, column);
            return false;
        }
        if (strcmp(type, is->type) == 0)
            continue; /* the target column follows the new type already */
        err_set(err, EC_CONFIG,
                "column \"%s\" of %s changed its type on the source since the stream last "
                "applied it (%s, now %s); its values go to column \"%s\" of %s (%s): the "
                "stream stops",
                was->name, relation, was->type, is->type, column, target, type);
        err_hint(err, "Change the target column to the new type (ALTER TABLE %s ALTER COLUMN "
                      "\"%s\" TYPE %s), then run the stream again.",
                 target, column, is->type);
        return false;
    }
    return true;
}
