/*
 * Batch writer: dedup through the lookup table, COPY, isolate refused rows.
 * See sink.h for the transaction shape and why it is exact.
 */
#include "v7fill/sink.h"

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/copy_encode.h"
#include "v7fill/log.h"

struct Sink
{
    PgConn *conn;
    SinkConfig cfg;
    char *lookup_copy_sql;
    char *target_copy_sql;
    char *probe_sql;
    bool probe_first; /* last batch met duplicates: probe before writing */
    SinkStats stats;
    Buf copy;         /* COPY payload being built */
    Buf param;        /* probe array literal */
    BatchRow **scratch;
    size_t scratch_cap;
    /* probe ahead */
    Batch *probe_inflight;   /* batch whose probe was sent and not collected */
    Batch *probed;           /* batch whose duplicates are already marked */
    BatchRow **probe_rows;   /* its pending rows, sorted by hash */
    size_t probe_nrows;
    size_t probe_cap;
    size_t probe_ndup;       /* duplicates the collected probe found */
};

void
batch_init(Batch *b)
{
    memset(b, 0, sizeof *b);
    buf_init(&b->data);
}

void
batch_reset(Batch *b)
{
    b->nrows = 0;
    buf_reset(&b->data);
}

void
batch_free(Batch *b)
{
    free(b->rows);
    buf_free(&b->data);
    memset(b, 0, sizeof *b);
}

BatchRow *
batch_add(Batch *b)
{
    BatchRow *r;

    if (b->nrows == b->cap)
    {
        b->cap = b->cap ? b->cap * 2 : 1024;
        b->rows = xrealloc(b->rows, b->cap * sizeof *b->rows);
    }
    r = &b->rows[b->nrows++];
    memset(r, 0, sizeof *r);
    r->reason_off = SIZE_MAX;
    return r;
}

size_t
batch_store(Batch *b, const void *p, size_t len)
{
    size_t off = b->data.len;
    buf_append(&b->data, p, len);
    return off;
}

void
batch_reject(Batch *b, BatchRow *r, const char *reason, const char *sqlstate)
{
    r->outcome = ROW_REJECTED;
    r->reason_off = batch_store(b, reason, strlen(reason) + 1);
    (void) snprintf(r->sqlstate, sizeof r->sqlstate, "%s", sqlstate ? sqlstate : "");
}

const char *
batch_reason(const Batch *b, const BatchRow *r)
{
    return r->reason_off == SIZE_MAX ? "" : b->data.data + r->reason_off;
}

Sink *
sink_new(PgConn *c, const SinkConfig *cfg)
{
    Sink *s = xcalloc(1, sizeof *s);

    s->conn = c;
    s->cfg = *cfg;
    s->lookup_copy_sql = xasprintf("COPY %s (ref_hash, id, ref) FROM STDIN", cfg->lookup_q);
    s->target_copy_sql = xasprintf("COPY %s %s FROM STDIN", cfg->target_q, cfg->copy_cols);
    s->probe_sql = xasprintf("SELECT ref_hash FROM %s WHERE ref_hash = ANY ($1::bytea[])",
                             cfg->lookup_q);
    buf_init(&s->copy);
    buf_init(&s->param);
    return s;
}

void
sink_free(Sink *s)
{
    if (s == NULL)
        return;
    free(s->lookup_copy_sql);
    free(s->target_copy_sql);
    free(s->probe_sql);
    buf_free(&s->copy);
    buf_free(&s->param);
    free(s->scratch);
    free(s->probe_rows);
    free(s);
}

const SinkStats *
sink_stats(const Sink *s)
{
    return &s->stats;
}

static const char hexdigits[] = "0123456789abcdef";

static void
put_hex(Buf *b, const uint8_t *p, size_t n)
{
    buf_reserve(b, 2 * n);
    for (size_t i = 0; i < n; i++)
    {
        b->data[b->len++] = hexdigits[p[i] >> 4];
        b->data[b->len++] = hexdigits[p[i] & 15];
    }
    b->data[b->len] = '\0';
}

/* Byte order of the hashes, compared as two big-endian words (qsort and
 * bsearch call this ~14 times per row of a probed batch). */
static int
cmp_row_hash(const void *a, const void *b)
{
    const BatchRow *x = *(BatchRow *const *) a;
    const BatchRow *y = *(BatchRow *const *) b;
    uint64_t xa, ya;

    memcpy(&xa, x->hash, 8);
    memcpy(&ya, y->hash, 8);
    xa = be64toh(xa);
    ya = be64toh(ya);
    if (xa != ya)
        return xa < ya ? -1 : 1;
    memcpy(&xa, x->hash + 8, 8);
    memcpy(&ya, y->hash + 8, 8);
    xa = be64toh(xa);
    ya = be64toh(ya);
    return xa < ya ? -1 : xa > ya;
}

static int
cmp_row_id(const void *a, const void *b)
{
    const BatchRow *x = *(BatchRow *const *) a;
    const BatchRow *y = *(BatchRow *const *) b;
    return uuid_compare(&x->id, &y->id);
}

/*
 * sink_probe marks rows[0..n) whose hash is in the lookup as DUPLICATE.  rows
 * is sorted by hash here so answers can be matched by binary search.
 */
static void
put_be32(Buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t) (v >> 24), (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v};
    buf_append(b, x, 4);
}

static const Oid probe_types[1] = {1001}; /* bytea[] */
static const int probe_formats[1] = {1};

/* The hashes travel as one binary bytea[] parameter and come back binary: no
 * hex text to build or parse on either side.  rows get sorted by hash. */
static void
sink_probe_param(Sink *s, BatchRow **rows, size_t n)
{
    qsort(rows, n, sizeof *rows, cmp_row_hash);
    buf_reset(&s->param);
    put_be32(&s->param, 1);  /* dimensions */
    put_be32(&s->param, 0);  /* no NULLs */
    put_be32(&s->param, 17); /* element type bytea */
    put_be32(&s->param, (uint32_t) n);
    put_be32(&s->param, 1);  /* lower bound */
    for (size_t i = 0; i < n; i++)
    {
        put_be32(&s->param, REF_HASH_LEN);
        buf_append(&s->param, rows[i]->hash, REF_HASH_LEN);
    }
}

/* Mark rows (sorted by hash) found in the probe's answer as DUPLICATE. */
static size_t
sink_probe_mark(PGresult *res, BatchRow **rows, size_t n)
{
    size_t ndup = 0;

    for (int i = 0; i < PQntuples(res); i++)
    {
        BatchRow key;
        BatchRow *keyp = &key;
        BatchRow **hit;

        if (PQgetlength(res, i, 0) != REF_HASH_LEN)
            continue;
        memcpy(key.hash, PQgetvalue(res, i, 0), REF_HASH_LEN);
        hit = bsearch(&keyp, rows, n, sizeof *rows, cmp_row_hash);
        if (hit && (*hit)->outcome == ROW_PENDING)
        {
            (*hit)->outcome = ROW_DUPLICATE;
            ndup++;
        }
    }
    return ndup;
}

static bool
sink_probe(Sink *s, BatchRow **rows, size_t n, size_t *ndup, Err *err)
{
    PGresult *res;
    const char *values[1];
    int lengths[1];

    *ndup = 0;
    if (n == 0)
        return true;
    sink_probe_param(s, rows, n);
    values[0] = s->param.data;
    lengths[0] = (int) s->param.len;
    s->stats.probes++;
    if (!pg_query_ex(s->conn, s->probe_sql, 1, probe_types, values, lengths, probe_formats, 1,
                     &res, err))
        return false;
    *ndup = sink_probe_mark(res, rows, n);
    PQclear(res);
    return true;
}

bool
sink_wants_probe(const Sink *s)
{
    return s->probe_first;
}

bool
sink_probe_send(Sink *s, Batch *b, Err *err)
{
    const char *values[1];
    int lengths[1];
    size_t n = 0;

    if (s->probe_cap < b->nrows)
    {
        s->probe_cap = b->nrows;
        s->probe_rows = xrealloc(s->probe_rows, s->probe_cap * sizeof *s->probe_rows);
    }
    for (size_t i = 0; i < b->nrows; i++)
        if (b->rows[i].outcome == ROW_PENDING)
            s->probe_rows[n++] = &b->rows[i];
    s->probe_nrows = n;
    if (n == 0)
    {
        s->probed = b;
        return true;
    }
    sink_probe_param(s, s->probe_rows, n);
    values[0] = s->param.data;
    lengths[0] = (int) s->param.len;
    s->stats.probes++;
    if (!pg_send_query_ex(s->conn, s->probe_sql, 1, probe_types, values, lengths, probe_formats,
                          1, err))
        return false;
    s->probe_inflight = b;
    return true;
}

bool
sink_probe_collect(Sink *s, Err *err)
{
    PGresult *res;
    Batch *b = s->probe_inflight;

    if (b == NULL)
        return true;
    s->probe_inflight = NULL;
    if (!pg_collect(s->conn, &res, err))
        return false;
    s->probe_ndup = sink_probe_mark(res, s->probe_rows, s->probe_nrows);
    PQclear(res);
    s->probed = b;
    return true;
}

/* Keep only pending rows; returns the new count. */
static size_t
compact_pending(BatchRow **rows, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i]->outcome == ROW_PENDING)
            rows[k++] = rows[i];
    return k;
}

static bool
sink_copy_lookup(Sink *s, const Batch *b, BatchRow **rows, size_t n, Err *err)
{
    BatchRow **sorted = xmalloc(n * sizeof *sorted);
    bool ok;

    memcpy(sorted, rows, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_row_hash);
    buf_reset(&s->copy);
    for (size_t i = 0; i < n; i++)
    {
        char idtext[UUID_TEXT_SIZE];

        buf_append(&s->copy, "\\\\x", 3);
        put_hex(&s->copy, sorted[i]->hash, REF_HASH_LEN);
        copy_encode_sep(&s->copy);
        uuid_format(&sorted[i]->id, idtext);
        buf_append(&s->copy, idtext, UUID_TEXT_LEN);
        copy_encode_sep(&s->copy);
        copy_encode_field(&s->copy, b->data.data + sorted[i]->ref_off, sorted[i]->ref_len,
                          !s->cfg.keep_ref_text);
        copy_encode_eol(&s->copy);
    }
    free(sorted);
    ok = pg_copy_begin(s->conn, s->lookup_copy_sql, err) &&
         pg_copy_put(s->conn, s->copy.data, s->copy.len, err) && pg_copy_end(s->conn, err);
    return ok;
}

static bool
sink_copy_target(Sink *s, const Batch *b, BatchRow **rows, size_t n, Err *err)
{
    buf_reset(&s->copy);
    for (size_t i = 0; i < n; i++)
        buf_append(&s->copy, b->data.data + rows[i]->copy_off, rows[i]->copy_len);
    return pg_copy_begin(s->conn, s->target_copy_sql, err) &&
           pg_copy_put(s->conn, s->copy.data, s->copy.len, err) && pg_copy_end(s->conn, err);
}

static bool
is_row_error(const Err *e)
{
    return !pg_err_is_connection(e) && (strncmp(e->sqlstate, "22", 2) == 0 ||
                                        strncmp(e->sqlstate, "23", 2) == 0);
}

static bool
sink_exec(Sink *s, const char *sql, Err *err)
{
    return pg_exec(s->conn, sql, err);
}

/*
 * sink_write_rows writes rows[0..n) (sorted by id) under a savepoint, splitting
 * on refused values and re-probing on concurrent references.
 */
static bool
sink_write_rows(Sink *s, Batch *b, BatchRow **rows, size_t n, Err *err)
{
    while (n > 0)
    {
        Err copy_err = {0};

        if (!sink_exec(s, "SAVEPOINT v7fill_rows", err))
            return false;
        if (!sink_copy_lookup(s, b, rows, n, &copy_err))
        {
            size_t ndup = 0;

            if (strcmp(copy_err.sqlstate, "23505") != 0 || pg_err_is_connection(&copy_err))
            {
                *err = copy_err;
                err_prefix(err, "could not record source references");
                return false;
            }
            /* Another importer committed some of these references meanwhile. */
            s->stats.conflicts++;
            if (!sink_exec(s, "ROLLBACK TO SAVEPOINT v7fill_rows", err) ||
                !sink_exec(s, "RELEASE SAVEPOINT v7fill_rows", err))
                return false;
            if (!sink_probe(s, rows, n, &ndup, err))
                return false;
            n = compact_pending(rows, n);
            qsort(rows, n, sizeof *rows, cmp_row_id);
            if (ndup == 0)
                return err_set(err, EC_INTERNAL,
                               "lookup table reported a duplicate reference that a probe did "
                               "not find");
            continue;
        }
        if (!sink_copy_target(s, b, rows, n, &copy_err))
        {
            size_t half;

            if (!is_row_error(&copy_err))
            {
                *err = copy_err;
                return false;
            }
            s->stats.splits++;
            if (!sink_exec(s, "ROLLBACK TO SAVEPOINT v7fill_rows", err) ||
                !sink_exec(s, "RELEASE SAVEPOINT v7fill_rows", err))
                return false;
            if (n == 1)
            {
                batch_reject(b, rows[0], copy_err.msg, copy_err.sqlstate);
                return true;
            }
            half = n / 2;
            if (!sink_write_rows(s, b, rows, half, err))
                return false;
            return sink_write_rows(s, b, rows + half, n - half, err);
        }
        if (!sink_exec(s, "RELEASE SAVEPOINT v7fill_rows", err))
            return false;
        for (size_t i = 0; i < n; i++)
            rows[i]->outcome = ROW_INSERTED;
        return true;
    }
    return true;
}

static void
sink_reset_outcomes(Batch *b)
{
    for (size_t i = 0; i < b->nrows; i++)
    {
        BatchRow *r = &b->rows[i];
        /* Everything the server decided is undone with the transaction. */
        if (!r->client_decided && r->outcome != ROW_PENDING)
        {
            r->outcome = ROW_PENDING;
            r->reason_off = SIZE_MAX;
            r->sqlstate[0] = '\0';
        }
    }
}

static size_t
sink_collect_pending(Sink *s, Batch *b)
{
    size_t n = 0;

    if (s->scratch_cap < b->nrows)
    {
        s->scratch_cap = b->nrows;
        s->scratch = xrealloc(s->scratch, s->scratch_cap * sizeof *s->scratch);
    }
    for (size_t i = 0; i < b->nrows; i++)
        if (b->rows[i].outcome == ROW_PENDING)
            s->scratch[n++] = &b->rows[i];
    return n;
}

bool
sink_write(Sink *s, Batch *b, SinkHook before_commit, void *ctx, Err *err)
{
    size_t n = sink_collect_pending(s, b);
    uint64_t conflicts_before = s->stats.conflicts;
    size_t ndup = 0;
    bool ok;

    if (s->probed == b)
    {
        /* Probed ahead, outside the transaction: duplicates are marked already. */
        ndup = s->probe_ndup;
        s->probed = NULL;
        s->probe_ndup = 0;
        ok = sink_exec(s, "BEGIN", err);
    }
    else
    {
        ok = sink_exec(s, "BEGIN", err);
        if (ok && s->probe_first && n > 0)
        {
            ok = sink_probe(s, s->scratch, n, &ndup, err);
            n = compact_pending(s->scratch, n);
        }
    }
    if (ok && n > 0)
    {
        qsort(s->scratch, n, sizeof *s->scratch, cmp_row_id);
        ok = sink_write_rows(s, b, s->scratch, n, err);
    }
    if (ok && before_commit)
        ok = before_commit(ctx, b, err);
    if (ok)
        ok = sink_exec(s, "COMMIT", err);
    if (!ok)
    {
        if (!pg_is_broken(s->conn))
        {
            Err ignored;
            if (!pg_exec(s->conn, "ROLLBACK", &ignored))
                log_debug("rollback failed: %s", ignored.msg);
        }
        sink_reset_outcomes(b);
        return false;
    }
    /* Probe first next time only while duplicates keep showing up: a fresh import
     * pays nothing, a re-import of the same file writes nothing. */
    s->probe_first = ndup > 0 || s->stats.conflicts > conflicts_before;
    return true;
}

bool
sink_probe_only(Sink *s, Batch *b, Err *err)
{
    size_t n = sink_collect_pending(s, b);
    size_t ndup;
    return sink_probe(s, s->scratch, n, &ndup, err);
}
