/*
 * The initial copy of a stream: one source table read under the slot's
 * exported snapshot (shared docs pgoutput.md §2.4) with COPY ... TO STDOUT in
 * CSV, handed to the CSV source through a read callback.  The wrapper only
 * owns the connection and the name; records, columns and positions are the
 * CSV source's.
 */
#include "v7fill/source_snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/pg.h"
#include "v7fill/pgoutput.h"
#include "v7fill/source_csv.h"

typedef struct SnapSource
{
    Source base; /* first */
    PgConn *conn;
    Source *csv;
    char *name;
    bool copy_done;
    char *chunk; /* the CopyData row being handed on (PQfreemem) */
    size_t chunk_len;
    size_t chunk_off;
} SnapSource;

static const SourceOps snap_ops;

/* CsvReadFn over PQgetCopyData: blocking, one row of COPY data at a time. */
static bool
snap_read(void *ctx, void *dst, size_t cap, size_t *got, Err *err)
{
    SnapSource *s = ctx;
    PGconn *conn = pg_raw(s->conn);

    *got = 0;
    while (s->chunk_off == s->chunk_len)
    {
        char *data = NULL;
        int n;

        if (s->copy_done)
            return true;
        if (s->chunk)
        {
            PQfreemem(s->chunk);
            s->chunk = NULL;
        }
        s->chunk_len = s->chunk_off = 0;
        n = PQgetCopyData(conn, &data, 0);
        if (n > 0)
        {
            s->chunk = data;
            s->chunk_len = (size_t) n;
        }
        else if (n == -1)
        {
            PGresult *res = PQgetResult(conn);
            bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

            if (!ok)
                pg_err_from_result(err, s->conn, res, "initial copy failed");
            PQclear(res);
            while ((res = PQgetResult(conn)) != NULL)
                PQclear(res);
            s->copy_done = true;
            if (!ok)
            {
                err_prefix(err, "%s", s->name);
                return false;
            }
        }
        else
        {
            pg_err_from_result(err, s->conn, NULL, "initial copy failed");
            err_prefix(err, "%s", s->name);
            s->copy_done = true;
            return false;
        }
    }
    *got = s->chunk_len - s->chunk_off;
    if (*got > cap)
        *got = cap;
    memcpy(dst, s->chunk + s->chunk_off, *got);
    s->chunk_off += *got;
    return true;
}

/* The COPY statement: quoted columns (or all of them) of the quoted table. */
static char *
copy_sql(PgConn *c, const ReplTable *t, const char *const *cols, size_t ncols)
{
    char *table = pg_qualified(c, t->schema, t->name);
    Buf b;

    if (table == NULL)
        return NULL;
    buf_init(&b);
    buf_puts(&b, "COPY (SELECT ");
    if (cols == NULL || ncols == 0)
        buf_puts(&b, "*");
    for (size_t i = 0; cols && i < ncols; i++)
    {
        char *q = pg_ident(c, cols[i]);

        if (q == NULL)
        {
            buf_free(&b);
            free(table);
            return NULL;
        }
        buf_printf(&b, "%s%s", i ? ", " : "", q);
        free(q);
    }
    buf_printf(&b, " FROM %s) TO STDOUT (FORMAT csv, HEADER true)", table);
    free(table);
    return b.data;
}

/* A fresh view's first statement, which takes it: the WAL insert position
 * read under it.  A transaction the view sees had its commit record
 * inserted before the view was taken, so before this position. */
static bool
snap_view_lsn(SnapSource *s, uint64_t *view_lsn, Err *err)
{
    PGresult *res;
    bool ok;

    if (!pg_query(s->conn, "SELECT pg_current_wal_insert_lsn()::text", 0, NULL, &res, err))
    {
        err_prefix(err, "%s: could not read the source's WAL position", s->name);
        return false;
    }
    ok = PQntuples(res) == 1 && pgo_lsn_parse(PQgetvalue(res, 0, 0), view_lsn);
    PQclear(res);
    if (!ok)
        err_set(err, EC_PG_QUERY, "%s: the source's WAL position is not an LSN", s->name);
    return ok;
}

/* BEGIN, the snapshot (or a fresh view and its position), the COPY: the
 * connection is left in COPY OUT. */
static bool
snap_start(SnapSource *s, const char *snapshot, const ReplTable *t, const char *const *cols,
           size_t ncols, uint64_t *view_lsn, Err *err)
{
    PGconn *conn = pg_raw(s->conn);
    char *sql;
    PGresult *res;

    /* The stream's text form of intervals (replconn pins it there too). */
    if (!pg_exec(s->conn, "SET intervalstyle = postgres", err) ||
        !pg_exec(s->conn, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", err))
        return false;
    if (snapshot)
    {
        char *lit = PQescapeLiteral(conn, snapshot, strlen(snapshot));
        bool ok;

        if (lit == NULL)
            return pg_err_from_result(err, s->conn, NULL, "could not quote the snapshot name");
        sql = xasprintf("SET TRANSACTION SNAPSHOT %s", lit);
        PQfreemem(lit);
        ok = pg_exec(s->conn, sql, err);
        free(sql);
        if (!ok)
        {
            err_prefix(err, "could not import snapshot %s", snapshot);
            err_hint(err, "The replication connection that created the slot must stay idle "
                          "until every copier has imported its snapshot.");
            return false;
        }
    }
    else if (!snap_view_lsn(s, view_lsn, err))
        return false;
    sql = copy_sql(s->conn, t, cols, ncols);
    if (sql == NULL)
        return pg_err_from_result(err, s->conn, NULL, "could not quote an identifier");
    log_debug("[%d] %s", PQbackendPID(conn), sql);
    res = PQexec(conn, sql);
    free(sql);
    if (PQresultStatus(res) != PGRES_COPY_OUT)
    {
        pg_err_from_result(err, s->conn, res, "initial copy failed");
        err_prefix(err, "%s", s->name);
        PQclear(res);
        return false;
    }
    PQclear(res);
    return true;
}

bool
source_snapshot_open(const char *conninfo, const char *snapshot, const ReplTable *t,
                     const char *const *cols, size_t ncols, uint64_t *view_lsn, Source **out,
                     Err *err)
{
    SnapSource *s = xcalloc(1, sizeof *s);
    CsvOptions opts;
    char schema[128];
    char name[128];

    *out = NULL;
    s->base.ops = &snap_ops;
    s->name = xasprintf("%s.%s (snapshot)", err_printable(t->schema, schema, sizeof schema),
                        err_printable(t->name, name, sizeof name));
    *view_lsn = 0;
    if (!pg_connect(conninfo, &s->conn, err) ||
        !snap_start(s, snapshot, t, cols, ncols, view_lsn, err))
    {
        snap_ops.close(&s->base);
        return false;
    }
    csv_options_default(&opts);
    opts.header = true;
    if (!source_csv_open_reader(s->name, snap_read, s, &opts, &s->csv, err))
    {
        snap_ops.close(&s->base);
        return false;
    }
    *out = &s->base;
    return true;
}

static bool
snap_next(Source *src, Record *rec, bool *eof, Err *err)
{
    return source_next(((SnapSource *) src)->csv, rec, eof, err);
}

static const char *const *
snap_columns(Source *src, size_t *ncolumns)
{
    Source *csv = ((SnapSource *) src)->csv;
    return csv->ops->columns(csv, ncolumns);
}

static void
snap_position(Source *src, SourcePosition *pos)
{
    Source *csv = ((SnapSource *) src)->csv;
    csv->ops->position(csv, pos);
}

static bool
snap_seek(Source *src, const SourcePosition *pos, Err *err)
{
    Source *csv = ((SnapSource *) src)->csv;
    return csv->ops->seek(csv, pos, err);
}

static bool
snap_resume(Source *src, const SourcePosition *pos, bool *same, Err *err)
{
    Source *csv = ((SnapSource *) src)->csv;
    return csv->ops->resume(csv, pos, same, err);
}

static void
snap_progress(Source *src, uint64_t *done, uint64_t *total)
{
    Source *csv = ((SnapSource *) src)->csv;
    csv->ops->progress(csv, done, total);
}

static const char *
snap_name(Source *src)
{
    return ((SnapSource *) src)->name;
}

static void
snap_close(Source *src)
{
    SnapSource *s = (SnapSource *) src;

    source_close(s->csv);
    if (s->chunk)
        PQfreemem(s->chunk);
    /* A COPY still running ends with the connection; the transaction was read-only. */
    pg_close(s->conn);
    free(s->name);
    free(s);
}

static const SourceOps snap_ops = {
    .next = snap_next,
    .columns = snap_columns,
    .position = snap_position,
    .seek = snap_seek,
    .resume = snap_resume,
    .progress = snap_progress,
    .name = snap_name,
    .close = snap_close,
};
