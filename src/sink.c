/*
 * Batch writer: dedup through the lookup table, COPY, isolate refused rows.
 * See sink.h for the transaction shape and why it is exact.
 */
#include "v7fill/sink.h"

#include <endian.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/log.h"
#include "v7fill/sortkey.h"

struct Sink
{
    PgConn *conn;
    SinkConfig cfg;
    char *lookup_copy_sql;
    char *target_copy_sql;
    char *probe_sql;
    char *target_probe_sql;
    unsigned target_probe_skip; /* batches to go before the target is probed again */
    bool probe_first; /* last batch met duplicates: probe before writing */
    SinkStats stats;
    Buf copy;         /* COPY payload being built */
    Buf param;        /* probe array literal */
    BatchRow **scratch;
    size_t scratch_cap;
    BatchRow **rest;    /* rows a probe of the target left undecided */
    size_t rest_cap;
    SortWork sort;
    char *unref_sql;  /* delete the lookup rows of rows that did not land */
    Err refused;      /* the error the last row refused alone had */
    int refused_run;  /* rows in a row refused alone with it (non-value errors) */
};

void
batch_init(Batch *b)
{
    memset(b, 0, sizeof *b);
    buf_init(&b->data);
    buf_init(&b->aux);
}

void
batch_reset(Batch *b)
{
    b->nrows = 0;
    buf_reset(&b->data);
    buf_reset(&b->aux);
    b->by_hash_n = 0;
}

void
batch_free(Batch *b)
{
    free(b->rows);
    free(b->by_hash);
    buf_free(&b->data);
    buf_free(&b->aux);
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
    r->reason_off = UINT32_MAX;
    return r;
}

size_t
batch_store(Batch *b, const void *p, size_t len)
{
    size_t off = b->aux.len;
    buf_append(&b->aux, p, len);
    return off;
}

void
batch_reject(Batch *b, BatchRow *r, const char *reason, const char *sqlstate)
{
    r->outcome = ROW_REJECTED;
    r->reason_off = (uint32_t) batch_store(b, reason, strlen(reason) + 1);
    (void) snprintf(r->sqlstate, sizeof r->sqlstate, "%s", sqlstate ? sqlstate : "");
}

const char *
batch_reason(const Batch *b, const BatchRow *r)
{
    return r->reason_off == UINT32_MAX ? "" : b->aux.data + r->reason_off;
}

const char *
lookup_key_column(LookupShape shape)
{
    return shape == LOOKUP_REF_KEY ? "ref_key" : "ref_hash";
}

Sink *
sink_new(PgConn *c, const SinkConfig *cfg)
{
    Sink *s = xcalloc(1, sizeof *s);
    const char *key_col = lookup_key_column(cfg->lookup_shape);
    const char *key_type = cfg->lookup_shape == LOOKUP_REF_HASH_BYTEA ? "bytea" : "uuid";

    s->conn = c;
    s->cfg = *cfg;
    s->lookup_copy_sql = xasprintf("COPY %s (%s, id, ref) FROM STDIN (FORMAT binary)",
                                   cfg->lookup_q, key_col);
    s->target_copy_sql = xasprintf("COPY %s %s FROM STDIN", cfg->target_q, cfg->copy_cols);
    /* One index probe per hash, whatever the statistics say: with the array's
     * values at plan time, "ref_hash = ANY ($1)" was planned as a (parallel)
     * sequential scan of the whole lookup once it held a million rows, every
     * batch.  A LATERAL subquery can only run as a parameterized index scan.
     * The answer is the positions (1-based) of the hashes found, so marking
     * the duplicates needs no search on this side. */
    if (!cfg->distributed)
        s->probe_sql = xasprintf("SELECT u.i FROM unnest($1::%s[]) WITH ORDINALITY AS u(h, i) "
                                 "CROSS JOIN LATERAL (SELECT FROM %s AS r "
                                 "WHERE r.%s = u.h OFFSET 0) AS l",
                                 key_type, cfg->lookup_q, key_col);
    else
        /* Citus cannot push that LATERAL down (OFFSET beside a table function).
         * It runs the IN subquery on the shards the array prunes to (an index
         * scan on each), then matches the positions on the coordinator. */
        s->probe_sql = xasprintf("SELECT u.i FROM unnest($1::%s[]) WITH ORDINALITY AS u(h, i) "
                                 "WHERE u.h IN (SELECT r.%s FROM %s AS r "
                                 "WHERE r.%s = ANY ($1::%s[]))",
                                 key_type, key_col, cfg->lookup_q, key_col, key_type);
    /* The target first: a minted id is a function of the reference and its time,
     * so an id already there is a reference already imported.  The ids of a
     * batch read in time order lie close together: one ordered index range
     * scan answers for all of them, where the lookup needs a descent per
     * hash.  LIMIT bounds what a batch spread over years would read. */
    s->target_probe_sql = xasprintf("SELECT %s FROM %s WHERE %s BETWEEN $1::uuid AND $2::uuid "
                                    "ORDER BY %s LIMIT $3::bigint",
                                    cfg->key_q, cfg->target_q, cfg->key_q, cfg->key_q);
    s->unref_sql = xasprintf("DELETE FROM %s WHERE %s = ANY ($1::%s[])", cfg->lookup_q, key_col,
                             key_type);
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
    free(s->target_probe_sql);
    free(s->unref_sql);
    buf_free(&s->copy);
    buf_free(&s->param);
    free(s->scratch);
    sortwork_free(&s->sort);
    free(s->rest);
    free(s);
}

const SinkStats *
sink_stats(const Sink *s)
{
    return &s->stats;
}

/*
 * Rows are sorted by their hash (lookup order: the same lock order in every
 * importer, and neighbouring index pages one after the other) or by their id
 * (target order).  Both are 16 bytes compared as unsigned big-endian; the keys
 * are loaded once into a flat array, so the sort itself neither chases
 * pointers nor swaps bytes, and input already in order (a time-ordered file,
 * by id) is not sorted at all.
 */
void
batch_rows_sort(SortWork *w, BatchRow **rows, size_t n, size_t key_offset)
{
    bool sorted = true;

    sortwork_reserve(w, n);
    for (size_t i = 0; i < n; i++)
    {
        w->keys[i] = sortkey_load((const uint8_t *) rows[i] + key_offset, rows[i]);
        if (i > 0 && sorted && sortkey_cmp(&w->keys[i - 1], &w->keys[i]) > 0)
            sorted = false;
    }
    if (sorted)
        return;
    sortkey_sort(w->keys, w->tmp, n);
    for (size_t i = 0; i < n; i++)
        rows[i] = w->keys[i].item;
}


static void
put_be16(Buf *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t) (v >> 8), (uint8_t) v};
    buf_append(b, x, 2);
}

static void
put_be32(Buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t) (v >> 24), (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v};
    buf_append(b, x, 4);
}

static const int probe_formats[1] = {1};

/* The hashes travel as one binary uuid[] (or bytea[]) parameter and come back
 * as binary positions: no text to build or parse on either side.  Sorted by
 * hash, the probes walk the index from left to right. */
static void
sink_probe_param(Sink *s, BatchRow **rows, size_t n)
{
    batch_rows_sort(&s->sort, rows, n, BATCH_BY_HASH);
    buf_reset(&s->param);
    put_be32(&s->param, 1);  /* dimensions */
    put_be32(&s->param, 0);  /* no NULLs */
    put_be32(&s->param, s->cfg.lookup_shape == LOOKUP_REF_HASH_BYTEA ? 17 : 2950); /* bytea/uuid */
    put_be32(&s->param, (uint32_t) n);
    put_be32(&s->param, 1);  /* lower bound */
    for (size_t i = 0; i < n; i++)
    {
        put_be32(&s->param, REF_HASH_LEN);
        buf_append(&s->param, rows[i]->hash, REF_HASH_LEN);
    }
}

/* Mark the rows whose positions in the probe's array came back as DUPLICATE. */
static size_t
sink_probe_mark(PGresult *res, BatchRow **rows, size_t n)
{
    size_t ndup = 0;

    for (int i = 0; i < PQntuples(res); i++)
    {
        uint64_t pos;

        if (PQgetlength(res, i, 0) != 8)
            continue;
        memcpy(&pos, PQgetvalue(res, i, 0), 8);
        pos = be64toh(pos);
        if (pos >= 1 && pos <= n && rows[pos - 1]->outcome == ROW_PENDING)
        {
            rows[pos - 1]->outcome = ROW_DUPLICATE;
            ndup++;
        }
    }
    return ndup;
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

/* Mark rows[0..n) whose minted id is in the target as DUPLICATE (*found of
 * them); rows end up sorted by id. */
static bool
sink_probe_target(Sink *s, BatchRow **rows, size_t n, size_t *found, Err *err)
{
    static const int result_binary = 1;
    char lo[UUID_TEXT_SIZE];
    char hi[UUID_TEXT_SIZE];
    char limit[32];
    const char *params[3] = {lo, hi, limit};
    size_t first = n;
    size_t last = 0;
    size_t i = 0;
    PGresult *res;

    *found = 0;
    batch_rows_sort(&s->sort, rows, n, BATCH_BY_ID);
    for (size_t k = 0; k < n; k++)
        if (!rows[k]->id_given)
        {
            if (first == n)
                first = k;
            last = k;
        }
    if (first == n)
        return true;
    uuid_format(&rows[first]->id, lo);
    uuid_format(&rows[last]->id, hi);
    (void) snprintf(limit, sizeof limit, "%zu", 4 * n + 16);
    if (!pg_query_ex(s->conn, s->target_probe_sql, 3, NULL, params, NULL, NULL, result_binary,
                     &res, err))
        return false;
    for (int j = 0; j < PQntuples(res); j++)
    {
        Uuid u;

        if (PQgetlength(res, j, 0) != (int) sizeof u.b)
            continue;
        memcpy(u.b, PQgetvalue(res, j, 0), sizeof u.b);
        while (i < n && uuid_compare(&rows[i]->id, &u) < 0)
            i++;
        for (; i < n && uuid_compare(&rows[i]->id, &u) == 0; i++)
            if (!rows[i]->id_given && rows[i]->outcome == ROW_PENDING)
            {
                rows[i]->outcome = ROW_DUPLICATE;
                (*found)++;
            }
    }
    PQclear(res);
    return true;
}

/*
 * sink_probe marks rows[0..n) already imported as DUPLICATE: first those whose
 * id the target holds (while that keeps paying: a batch in time order), then
 * those whose reference hash the lookup holds.  rows is reordered (a
 * permutation: the caller compacts it).
 */
static bool
sink_probe(Sink *s, BatchRow **rows, size_t n, size_t *ndup, Err *err)
{
    PGresult *res;
    const char *values[1];
    int lengths[1];
    size_t found = 0;

    *ndup = 0;
    if (n == 0)
        return true;
    if (s->target_probe_skip > 0)
        s->target_probe_skip--;
    else if (s->cfg.probe_target)
    {
        if (!sink_probe_target(s, rows, n, &found, err))
            return false;
        /* Less than half found: the batch is spread in time, or its rows are
         * in the lookup only.  Try again 16 batches later. */
        if (2 * found < n)
            s->target_probe_skip = 16;
        *ndup = found;
        if (found > 0)
        {
            /* The rest, apart: rows itself stays a permutation for the caller. */
            if (s->rest_cap < n)
            {
                s->rest_cap = n;
                s->rest = xrealloc(s->rest, n * sizeof *s->rest);
            }
            memcpy(s->rest, rows, n * sizeof *rows);
            rows = s->rest;
            n = compact_pending(rows, n);
            if (n == 0)
                return true;
        }
    }
    sink_probe_param(s, rows, n);
    values[0] = s->param.data;
    lengths[0] = (int) s->param.len;
    s->stats.probes++;
    if (!pg_query_ex(s->conn, s->probe_sql, 1, NULL, values, lengths, probe_formats, 1, &res,
                     err))
        return false;
    *ndup += sink_probe_mark(res, rows, n);
    PQclear(res);
    return true;
}

/* The lookup rows in binary COPY format: the hash and the id as 16 raw bytes
 * each (uuid and bytea take the same), the reference text as it is. */
static bool
sink_copy_lookup(Sink *s, const Batch *b, BatchRow **rows, size_t n, Err *err)
{
    static const char header[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
    BatchRow **sorted = xmalloc(n * sizeof *sorted);
    bool ok;

    if (b->by_hash_n > 0)
    {
        /* Already in hash order: take the rows being written from there. */
        size_t k = 0;

        for (size_t i = 0; i < n; i++)
            rows[i]->in_copy = true;
        for (size_t i = 0; i < b->by_hash_n && k < n; i++)
            if (b->by_hash[i]->in_copy)
            {
                b->by_hash[i]->in_copy = false;
                sorted[k++] = b->by_hash[i];
            }
        if (k != n) /* not all of them there: sort after all */
        {
            for (size_t i = 0; i < n; i++)
                rows[i]->in_copy = false;
            memcpy(sorted, rows, n * sizeof *sorted);
            batch_rows_sort(&s->sort, sorted, n, BATCH_BY_HASH);
        }
    }
    else
    {
        memcpy(sorted, rows, n * sizeof *sorted);
        batch_rows_sort(&s->sort, sorted, n, BATCH_BY_HASH);
    }
    buf_reset(&s->copy);
    buf_append(&s->copy, header, sizeof header);
    for (size_t i = 0; i < n; i++)
    {
        /* field count 3, then length 16 + hash, length 16 + id: one fixed shape */
        static const uint8_t head[6] = {0, 3, 0, 0, 0, 16};
        static const uint8_t len16[4] = {0, 0, 0, 16};
        const BatchRow *r = sorted[i];
        char *p;

        buf_reserve(&s->copy, 42);
        p = s->copy.data + s->copy.len;
        memcpy(p, head, sizeof head);
        memcpy(p + 6, r->hash, REF_HASH_LEN);
        memcpy(p + 22, len16, sizeof len16);
        memcpy(p + 26, r->id.b, sizeof r->id.b);
        s->copy.len += 42;
        if (s->cfg.keep_ref_text)
        {
            put_be32(&s->copy, (uint32_t) r->ref_len);
            buf_append(&s->copy, b->aux.data + r->ref_off, r->ref_len);
        }
        else
            put_be32(&s->copy, UINT32_MAX); /* NULL */
    }
    put_be16(&s->copy, UINT16_MAX); /* end of data */
    free(sorted);
    ok = pg_copy_begin(s->conn, s->lookup_copy_sql, err) &&
         pg_copy_put(s->conn, s->copy.data, s->copy.len, err) && pg_copy_end(s->conn, err);
    return ok;
}

/* The rows' COPY lines, each run of lines that lie one after the other in the
 * batch (all of them, for a time-ordered file without duplicates) sent as is. */
static bool
sink_copy_target(Sink *s, const Batch *b, BatchRow **rows, size_t n, Err *err)
{
    if (!pg_copy_begin(s->conn, s->target_copy_sql, err))
        return false;
    for (size_t i = 0; i < n;)
    {
        size_t start = rows[i]->copy_off;
        size_t end = start + rows[i]->copy_len;

        for (i++; i < n && rows[i]->copy_off == end; i++)
            end += rows[i]->copy_len;
        if (!pg_copy_put(s->conn, b->data.data + start, end - start, err))
            return false;
    }
    return pg_copy_end(s->conn, err);
}

/* A statement error that stops the import: the connection, the session or
 * the schema (permissions included), resources, the server itself; and a
 * deadlock or serialization failure, which the caller retries as a whole.
 * Anything else may belong to one row (a value, a constraint, a trigger's
 * RAISE, an index row too large): the rows are split to find it. */
static bool
is_statement_error(const Err *e)
{
    static const char stop[][3] = {"0A", "25", "28", "2D", "3D", "3F", "40", "42",
                                   "53", "55", "57", "58", "F0", "HV", "XX"};

    if (pg_err_is_connection(e) || e->sqlstate[0] == '\0')
        return true;
    for (size_t i = 0; i < sizeof stop / sizeof stop[0]; i++)
        if (strncmp(e->sqlstate, stop[i], 2) == 0)
            return true;
    return false;
}

/* Class 22 (data exception) and 23 (integrity): always the row's own. */
static bool
is_value_error(const Err *e)
{
    return strncmp(e->sqlstate, "22", 2) == 0 || strncmp(e->sqlstate, "23", 2) == 0;
}

/* Citus's COPY relays an error a worker raised (a unique or check violation on
 * a shard) with its message but without its SQLSTATE: XX000.  On a distributed
 * target such an error may be a row's (or a duplicate's) and is looked into. */
static bool
citus_copy_row_error(const Sink *s, const Err *e)
{
    return s->cfg.distributed && strcmp(e->sqlstate, "XX000") == 0 && !pg_err_is_connection(e);
}

/* A unique violation, or what may be one on a distributed target. */
static bool
copy_unique_violation(const Sink *s, const Err *e)
{
    return strcmp(e->sqlstate, "23505") == 0 || citus_copy_row_error(s, e);
}

static bool
sink_exec(Sink *s, const char *sql, Err *err)
{
    return pg_exec(s->conn, sql, err);
}

static bool
sink_rollback_to(Sink *s, const char *savepoint, Err *err)
{
    char sql[96];

    (void) snprintf(sql, sizeof sql, "ROLLBACK TO SAVEPOINT %s", savepoint);
    if (!sink_exec(s, sql, err))
        return false;
    (void) snprintf(sql, sizeof sql, "RELEASE SAVEPOINT %s", savepoint);
    return sink_exec(s, sql, err);
}

/*
 * sink_record_refs COPYs the references of rows[0..*n) into the lookup, once,
 * in key order: the only place the batch takes the lookup's index entries, so
 * two importers always take them in the same order, whatever the server
 * refuses later.  References another importer committed meanwhile are probed
 * and their rows dropped as duplicates (*n shrinks).
 */
static bool
sink_record_refs(Sink *s, Batch *b, BatchRow **rows, size_t *n, Err *err)
{
    while (*n > 0)
    {
        Err copy_err = {0};
        size_t ndup = 0;

        if (!sink_exec(s, "SAVEPOINT v7fill_refs", err))
            return false;
        if (sink_copy_lookup(s, b, rows, *n, &copy_err))
        {
            for (size_t i = 0; i < *n; i++)
                rows[i]->in_lookup = true;
            return sink_exec(s, "RELEASE SAVEPOINT v7fill_refs", err);
        }
        if (!copy_unique_violation(s, &copy_err) || pg_err_is_connection(&copy_err))
        {
            *err = copy_err;
            err_prefix(err, "could not record source references");
            return false;
        }
        /* Another importer committed some of these references meanwhile. */
        s->stats.conflicts++;
        if (!sink_rollback_to(s, "v7fill_refs", err) || !sink_probe(s, rows, *n, &ndup, err))
            return false;
        *n = compact_pending(rows, *n);
        if (ndup == 0 && citus_copy_row_error(s, &copy_err))
        {
            *err = copy_err; /* not a duplicate after all: the worker's own error */
            err_prefix(err, "could not record source references");
            return false;
        }
        if (ndup == 0)
            return err_set(err, EC_INTERNAL,
                           "lookup table reported a duplicate reference that a probe did not "
                           "find");
    }
    return true;
}

/* Ids already in the target while the lookup did not know their references:
 * the lookup was dropped, emptied or restored apart, or another one is named.
 * They are duplicates; the lookup rows just written for them stay, so the
 * lookup learns them again. */
static void
sink_note_lookup_gap(Sink *s, size_t found)
{
    if (s->stats.lookup_gap == 0)
        log_warn("rows already in %s were missing from its lookup table %s (dropped, emptied, "
                 "restored apart, or another --lookup-table): they count as duplicates, and "
                 "their references are written to the lookup again",
                 s->cfg.target_q, s->cfg.lookup_q);
    s->stats.lookup_gap += found;
}

/* A row refused alone.  An error that is not a value's (22/23) and that every
 * row hits alike (a trigger refusing everything, say) is the statement's:
 * after SINK_SAME_REFUSALS rows in a row refused with it and none landed, it
 * stops the import instead of rejecting the whole batch row by row. */
#define SINK_SAME_REFUSALS 32

static bool
sink_refuse(Sink *s, Batch *b, BatchRow *r, const Err *copy_err, Err *err)
{
    if (is_value_error(copy_err) || strcmp(copy_err->sqlstate, s->refused.sqlstate) != 0 ||
        strcmp(copy_err->msg, s->refused.msg) != 0)
        s->refused_run = 0;
    if (!is_value_error(copy_err) && ++s->refused_run >= SINK_SAME_REFUSALS)
    {
        *err = *copy_err;
        err_detail(err, "%d rows in a row were refused with this error one by one, and none "
                        "landed: it is not one row's.", SINK_SAME_REFUSALS);
        return false;
    }
    s->refused = *copy_err;
    batch_reject(b, r, copy_err->msg, copy_err->sqlstate);
    return true;
}

/*
 * sink_write_target COPYs rows[0..n) (sorted by id) into the target under a
 * savepoint.  A statement error stops; any other error splits the rows in
 * halves until the refused rows are found.  At the top (probe_gap), a unique
 * violation first looks for the rows' ids in the target (sink_note_lookup_gap).
 */
static bool
sink_write_target(Sink *s, Batch *b, BatchRow **rows, size_t n, bool probe_gap, Err *err)
{
    while (n > 0)
    {
        Err copy_err = {0};
        size_t half;
        size_t found = 0;

        if (!sink_exec(s, "SAVEPOINT v7fill_rows", err))
            return false;
        if (sink_copy_target(s, b, rows, n, &copy_err))
        {
            for (size_t i = 0; i < n; i++)
                rows[i]->outcome = ROW_INSERTED;
            s->refused_run = 0;
            return sink_exec(s, "RELEASE SAVEPOINT v7fill_rows", err);
        }
        if (is_statement_error(&copy_err) && !citus_copy_row_error(s, &copy_err))
        {
            *err = copy_err;
            return false;
        }
        if (!sink_rollback_to(s, "v7fill_rows", err))
            return false;
        if (probe_gap && s->cfg.probe_target && copy_unique_violation(s, &copy_err))
        {
            if (!sink_probe_target(s, rows, n, &found, err))
                return false;
            probe_gap = found > 0;
            if (found > 0)
            {
                sink_note_lookup_gap(s, found);
                n = compact_pending(rows, n);
                continue;
            }
        }
        s->stats.splits++;
        if (n == 1)
            return sink_refuse(s, b, rows[0], &copy_err, err);
        half = n / 2;
        return sink_write_target(s, b, rows, half, false, err) &&
               sink_write_target(s, b, rows + half, n - half, false, err);
    }
    return true;
}

/*
 * sink_settle: of rows[0..*n), whose references the lookup now holds, those
 * that did not land give their reference back (deleted from the lookup, in the
 * same transaction), and the next row of the batch with that reference takes
 * their place: rows[0..*n) becomes those rows (the next round).  So a reference
 * counts as seen only once a row carrying it is in the target.
 */
static bool
sink_settle(Sink *s, Batch *b, BatchRow **rows, size_t *n, Err *err)
{
    size_t dead = 0;
    size_t next = 0;
    PGresult *res;
    const char *values[1];
    int lengths[1];

    if (s->rest_cap < *n)
    {
        s->rest_cap = *n;
        s->rest = xrealloc(s->rest, *n * sizeof *s->rest);
    }
    for (size_t i = 0; i < *n; i++)
    {
        BatchRow *r = rows[i];

        if (r->outcome != ROW_REJECTED)
            continue;
        s->rest[dead++] = r;
        if (r->repeat_next > 0)
        {
            BatchRow *heir = &b->rows[r->repeat_next - 1];

            heir->outcome = ROW_PENDING;
            heir->client_decided = false;
            rows[next++] = heir;
        }
    }
    *n = next;
    if (dead == 0)
        return true;
    sink_probe_param(s, s->rest, dead);
    values[0] = s->param.data;
    lengths[0] = (int) s->param.len;
    if (!pg_query_ex(s->conn, s->unref_sql, 1, NULL, values, lengths, probe_formats, 0, &res,
                     err))
    {
        err_prefix(err, "could not remove the references of refused rows");
        return false;
    }
    PQclear(res);
    return true;
}

static void
sink_reset_outcomes(Batch *b)
{
    for (size_t i = 0; i < b->nrows; i++)
    {
        BatchRow *r = &b->rows[i];

        r->in_lookup = false;
        if (r->repeat)
        {
            /* Back to waiting behind the row read before it. */
            r->outcome = ROW_DUPLICATE;
            r->client_decided = true;
            r->reason_off = UINT32_MAX;
            r->sqlstate[0] = '\0';
        }
        /* Everything the server decided is undone with the transaction. */
        else if (!r->client_decided && r->outcome != ROW_PENDING)
        {
            r->outcome = ROW_PENDING;
            r->reason_off = UINT32_MAX;
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

    s->refused_run = 0;
    ok = sink_exec(s, "BEGIN", err);
    if (ok && s->probe_first && n > 0)
    {
        ok = sink_probe(s, s->scratch, n, &ndup, err);
        n = compact_pending(s->scratch, n);
    }
    /* Rounds: the rows, then the next row of each reference whose row was refused. */
    for (bool first = true; ok && n > 0; first = false)
    {
        ok = sink_record_refs(s, b, s->scratch, &n, err);
        if (ok && n > 0)
        {
            batch_rows_sort(&s->sort, s->scratch, n, BATCH_BY_ID);
            ok = sink_write_target(s, b, s->scratch, n, first, err) &&
                 sink_settle(s, b, s->scratch, &n, err);
        }
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
