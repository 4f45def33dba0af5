/*
 * Pipelined statements (pg_pipe.h).  The results are read a chunk behind:
 * a Sync goes after every PIPE_CHUNK statements, and once two Syncs are
 * unread the older one's results are read.  So the server works on one
 * chunk while the client reads the one before and sends the next, and
 * neither side's socket buffer can fill (a chunk's results are a few
 * kilobytes).  A Sync inside the caller's BEGIN does not commit; after an
 * error the server skips to the next Sync, and the transaction stays failed.
 */
#include "v7fill/pg_pipe.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "v7fill/log.h"
#include "v7fill/mem.h"

#define PIPE_CHUNK 128 /* statements between two Syncs */
#define PIPE_CACHE 32  /* statement texts prepared per pipe; others go unnamed */

typedef struct Prepared
{
    uint64_t hash;
    char *sql;
    char name[32];
    bool confirmed; /* the server said it prepared it */
} Prepared;

typedef enum PendingKind
{
    PENDING_STATEMENT,
    PENDING_PREPARE,
    PENDING_SYNC,
} PendingKind;

typedef struct Pending
{
    PendingKind kind;
    int prepared; /* PENDING_PREPARE: its entry in the cache */
    bool keep;    /* pg_pipe_query's: its result kept for the caller */
    PgPipeNote note;
} Pending;

struct PgPipe
{
    PgConn *c;
    PgPipeCounted counted;
    PgPipeDescribe describe;
    void *ctx;
    bool open;
    Prepared cache[PIPE_CACHE];
    int ncache;
    Pending *q; /* a ring: qlen entries from qhead */
    size_t qcap, qhead, qlen;
    int unsynced; /* statements sent since the last Sync */
    int syncs;    /* Syncs sent and not read */
    bool failed;  /* a statement was refused, or the connection lost */
    bool broken;  /* nothing more can be read */
    Err first;    /* the first failure */
    PGresult *kept; /* pg_pipe_query's result, once read */
};

PgPipe *
pg_pipe_new(PgConn *c, PgPipeCounted counted, PgPipeDescribe describe, void *ctx)
{
    PgPipe *p = xcalloc(1, sizeof *p);

    p->c = c;
    p->counted = counted;
    p->describe = describe;
    p->ctx = ctx;
    return p;
}

void
pg_pipe_free(PgPipe *p)
{
    PGconn *conn;
    PGTransactionStatusType ts;

    if (p == NULL)
        return;
    if (p->open)
        pg_pipe_abandon(p);
    conn = pg_raw(p->c);
    ts = conn && !pg_is_broken(p->c) ? PQtransactionStatus(conn) : PQTRANS_UNKNOWN;
    for (int i = 0; i < p->ncache; i++)
    {
        /* Not in a failed transaction, which refuses even this. */
        if (p->cache[i].confirmed && (ts == PQTRANS_IDLE || ts == PQTRANS_INTRANS))
        {
            Err e = {0};
            char *name_q = pg_ident(p->c, p->cache[i].name);
            char *sql = xasprintf("DEALLOCATE %s", name_q);

            if (!pg_exec(p->c, sql, &e))
                log_debug("%s: %s", sql, e.msg);
            free(sql);
            free(name_q);
        }
        free(p->cache[i].sql);
    }
    free(p->q);
    free(p);
}

bool
pg_pipe_open(const PgPipe *p)
{
    return p->open;
}

static void
push(PgPipe *p, PendingKind kind, int prepared, const PgPipeNote *note)
{
    Pending *e;

    if (p->qlen == p->qcap)
    {
        size_t cap = p->qcap ? p->qcap * 2 : 2 * PIPE_CHUNK + 8;
        Pending *q = xcalloc(cap, sizeof *q);

        for (size_t i = 0; i < p->qlen; i++)
            q[i] = p->q[(p->qhead + i) % p->qcap];
        free(p->q);
        p->q = q;
        p->qcap = cap;
        p->qhead = 0;
    }
    e = &p->q[(p->qhead + p->qlen) % p->qcap];
    e->kind = kind;
    e->prepared = prepared;
    e->keep = false;
    if (note)
        e->note = *note;
    else
        memset(&e->note, 0, sizeof e->note);
    p->qlen++;
}

/* The connection is gone: nothing more will come. */
static void
lost(PgPipe *p, const PGresult *res)
{
    if (!p->failed)
    {
        pg_err_from_result(&p->first, p->c, res, "the pipelined statements failed");
        p->failed = true;
    }
    p->broken = true;
    p->qlen = 0;
    p->syncs = 0;
    p->unsynced = 0;
}

/* A statement's or a Prepare's result, then the NULL that ends it. */
static void
read_statement(PgPipe *p, const Pending *e)
{
    PGconn *conn = pg_raw(p->c);
    PGresult *res = PQgetResult(conn);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

    if (res == NULL)
    {
        lost(p, NULL);
        return;
    }
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
    {
        if (e->kind == PENDING_PREPARE)
            p->cache[e->prepared].confirmed = true;
        else if (e->keep)
        {
            p->kept = res;
            res = NULL;
        }
        else if (e->note.kind != 0 && p->counted)
            p->counted(p->ctx, &e->note, strtoull(PQcmdTuples(res), NULL, 10));
    }
    else if (st != PGRES_PIPELINE_ABORTED) /* aborted: skipped after an earlier failure */
    {
        if (!p->failed)
        {
            char what[256] = "";

            pg_err_from_result(&p->first, p->c, res, "statement failed");
            if (p->describe && e->kind == PENDING_STATEMENT)
                p->describe(p->ctx, &e->note, what, sizeof what);
            else if (e->kind == PENDING_PREPARE)
                (void) snprintf(what, sizeof what, "preparing %.200s",
                                p->cache[e->prepared].sql);
            if (what[0])
                err_prefix(&p->first, "%s", what);
            p->failed = true;
        }
        if (pg_is_broken(p->c))
        {
            PQclear(res);
            lost(p, NULL);
            return;
        }
    }
    PQclear(res);
    /* The end of this statement's results. */
    while ((res = PQgetResult(conn)) != NULL)
    {
        PQclear(res);
        if (pg_is_broken(p->c))
        {
            lost(p, NULL);
            return;
        }
    }
}

/* Read up to and including the oldest unread Sync. */
static void
read_through_sync(PgPipe *p)
{
    while (p->qlen > 0 && !p->broken)
    {
        Pending e = p->q[p->qhead];

        p->qhead = (p->qhead + 1) % p->qcap;
        p->qlen--;
        if (e.kind != PENDING_SYNC)
        {
            read_statement(p, &e);
            continue;
        }
        {
            PGresult *res = PQgetResult(pg_raw(p->c));
            ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

            if (st != PGRES_PIPELINE_SYNC)
            {
                lost(p, res);
                PQclear(res);
                return;
            }
            PQclear(res);
            p->syncs--;
            return;
        }
    }
}

static bool
sync(PgPipe *p)
{
    if (p->broken)
        return false;
    if (PQpipelineSync(pg_raw(p->c)) != 1)
    {
        lost(p, NULL);
        return false;
    }
    push(p, PENDING_SYNC, -1, NULL);
    p->syncs++;
    p->unsynced = 0;
    return true;
}

static bool
failure(PgPipe *p, Err *err)
{
    *err = p->first;
    return false;
}

bool
pg_pipe_begin(PgPipe *p, Err *err)
{
    PGconn *conn = pg_raw(p->c);

    if (p->open)
        return err_set(err, EC_INTERNAL, "a pipeline begun twice");
    if (conn == NULL || PQenterPipelineMode(conn) != 1)
        return pg_err_from_result(err, p->c, NULL, "could not enter pipeline mode");
    /* A Prepare an earlier failure skipped: its text gets a new name. */
    for (int i = 0; i < p->ncache;)
    {
        if (p->cache[i].confirmed)
        {
            i++;
            continue;
        }
        free(p->cache[i].sql);
        p->cache[i] = p->cache[--p->ncache];
    }
    p->open = true;
    p->failed = p->broken = false;
    p->unsynced = p->syncs = 0;
    p->qhead = p->qlen = 0;
    memset(&p->first, 0, sizeof p->first);
    return true;
}

/* The cache entry of sql (prepared in this pipeline if new), or -1: the
 * cache is full, the statement goes unnamed. */
static int
prepared(PgPipe *p, const char *sql, int nparams)
{
    uint64_t h = XXH3_64bits(sql, strlen(sql));
    Prepared *e;

    for (int i = 0; i < p->ncache; i++)
        if (p->cache[i].hash == h && strcmp(p->cache[i].sql, sql) == 0)
            return i;
    if (p->ncache == PIPE_CACHE)
        return -1;
    e = &p->cache[p->ncache];
    pg_statement_name(p->c, e->name, sizeof e->name);
    if (PQsendPrepare(pg_raw(p->c), e->name, sql, nparams, NULL) != 1)
        return -2;
    log_debug("[%d] (prepared as %s) %s", PQbackendPID(pg_raw(p->c)), e->name, sql);
    e->hash = h;
    e->sql = xstrdup(sql);
    e->confirmed = false;
    push(p, PENDING_PREPARE, p->ncache, NULL);
    return p->ncache++;
}

/* Sends sql (queued, its note kept): false once the pipe failed. */
static bool
send_statement(PgPipe *p, const char *sql, int nparams, const char *const *params,
               const PgPipeNote *note, bool keep, Err *err)
{
    PGconn *conn = pg_raw(p->c);
    int i;
    int sent;

    if (!p->open)
        return err_set(err, EC_INTERNAL, "a statement sent to a pipeline not begun");
    if (p->failed)
        return failure(p, err);
    /* A statement without parameters (BEGIN, COMMIT) is not worth a name. */
    i = nparams > 0 ? prepared(p, sql, nparams) : -1;
    if (i == -2)
        sent = 0;
    else if (i >= 0)
        sent = PQsendQueryPrepared(conn, p->cache[i].name, nparams, params, NULL, NULL, 0);
    else
        sent = PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
    if (sent != 1)
    {
        lost(p, NULL);
        return failure(p, err);
    }
    push(p, PENDING_STATEMENT, -1, note);
    p->q[(p->qhead + p->qlen - 1) % p->qcap].keep = keep;
    p->unsynced++;
    return true;
}

bool
pg_pipe_send(PgPipe *p, const char *sql, int nparams, const char *const *params,
             const PgPipeNote *note, Err *err)
{
    if (!send_statement(p, sql, nparams, params, note, false, err))
        return false;
    if (p->unsynced >= PIPE_CHUNK && sync(p))
        while (p->syncs > 1 && !p->broken)
            read_through_sync(p);
    return p->failed ? failure(p, err) : true;
}

bool
pg_pipe_query(PgPipe *p, const char *sql, int nparams, const char *const *params,
              PGresult **res, Err *err)
{
    *res = NULL;
    if (!send_statement(p, sql, nparams, params, NULL, true, err))
        return false;
    if (sync(p))
        while (p->qlen > 0 && !p->broken)
            read_through_sync(p);
    if (p->failed || p->kept == NULL)
    {
        PQclear(p->kept);
        p->kept = NULL;
        if (!p->failed)
            return err_set(err, EC_INTERNAL, "a pipelined query returned no result");
        return failure(p, err);
    }
    *res = p->kept;
    p->kept = NULL;
    return true;
}

/* Everything read; the pipeline mode left when the connection allows. */
static void
close_pipe(PgPipe *p)
{
    if (!p->broken && p->unsynced > 0)
        (void) sync(p);
    while (p->qlen > 0 && !p->broken)
        read_through_sync(p);
    if (!p->broken && PQexitPipelineMode(pg_raw(p->c)) != 1)
        lost(p, NULL);
    p->open = false;
}

bool
pg_pipe_end(PgPipe *p, Err *err)
{
    if (!p->open)
        return err_set(err, EC_INTERNAL, "a pipeline ended without being begun");
    close_pipe(p);
    if (p->failed)
        return failure(p, err);
    return true;
}

void
pg_pipe_abandon(PgPipe *p)
{
    if (!p->open)
        return;
    close_pipe(p);
}
