/*
 * Batch writer: dedup through the lookup table, COPY, isolate refused rows.
 * See sink.h for the transaction shape and why it is exact.
 */
#include "v7fill/sink.h"

#include <endian.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/civil.h"
#include "v7fill/copy_encode.h"
#include "v7fill/log.h"
#include "v7fill/sink_waves.h"
#include "v7fill/sortkey.h"
#include "v7fill/source.h"

struct Sink
{
    PgConn *conn;
    SinkConfig cfg;
    char *lookup_copy_sql;
    char *target_copy_sql;
    char *probe_sql;
    char *target_probe_sql;
    char *target_ids_sql; /* the exact probe, after a unique violation */
    unsigned target_probe_skip; /* batches to go before the target is probed again */
    bool probe_first; /* last batch met duplicates: probe before writing */
    SinkStats stats;
    Buf copy;         /* COPY payload being built */
    Buf param;        /* probe array literal */
    BatchRow **scratch;
    size_t scratch_cap;
    BatchRow **rest;    /* rows a probe of the target left undecided */
    size_t rest_cap;
    BatchRow **expired; /* the batch's expired inserts, by hash (sink_probe_expired) */
    bool *expired_there; /* for each: its reference in the target at that point of the batch */
    size_t expired_cap;
    SortWork sort;
    char *unref_sql;  /* delete the lookup rows of rows that did not land */
    Err refused;      /* the error the last row refused alone had */
    int refused_run;  /* rows in a row refused alone with it (non-value errors) */
    /* Row operations (sink_apply_change) */
    char *ref_find_sql;   /* a reference's id, as a scalar subquery of $1 */
    char *ref_drop_sql;   /* delete a reference, returning its id */
    char *ref_move_sql;   /* a reference's lookup row to another reference */
    char *row_delete_sql; /* a reference's lookup row and target row */
    char *ref_stale_sql;  /* was a reference's lookup row written before xid $2? */
    char *truncate_sql;   /* the target and its lookup */
    Buf update_sql;       /* the UPDATE of the row at hand */
    Buf values;           /* its decoded values, NUL-terminated one after the other */
    /* Set-wise runs (sink_apply_set) */
    char *set_resolve_sql;  /* the ids (and lookup ctids) of an array of keys */
    char *set_delete_sql;   /* the lookup rows (by ctid) and the target rows (by id) */
    char *set_tdelete_sql;  /* distributed: the target rows by id (the lookup: unref_sql) */
    char *set_table;        /* the session's temp table of new values */
    char *set_table_sql;    /* its CREATE */
    int set_pid;            /* the backend that has it (0: not known) */
    bool set_off;           /* set-wise failed as a statement: row by row from now on */
    bool set_no_table;      /* the temp table could not be made: updates row by row */
    struct SetRow *set;     /* the run's rows in hash order */
    struct SetRow **set_by_id; /* those the lookup has, by id */
    size_t set_cap;
    uint64_t *seen_slot;    /* open-addressed set of a run's keys: gen << 32 | 1 + row */
    size_t seen_cap;
    uint32_t seen_gen;
    Buf set_param;          /* a second array parameter */
    /* Waves (sink_write_waves) */
    Waves waves;
    BatchRow **list;        /* the rows of a run or of a wave's kind of operation */
    size_t list_cap;
    bool strict;            /* applying waves: an error that may be a row's fails the
                             * waves (applied again in reading order), no row is refused */
    uint64_t merges;        /* key changes merged (sink_update_row), for their log */
};

/* A row of a set-wise run: its id and lookup row, once resolved. */
typedef struct SetRow
{
    BatchRow *r;
    Uuid id;
    uint8_t tid[6];   /* the lookup row's ctid (non-distributed) */
    bool found;       /* the lookup has the reference */
    uint32_t group;   /* update: the statement of its set of columns sent */
} SetRow;

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
    b->keep_position = false;
    b->txn_continues = false;
    b->txn_piece = false;
    b->commit_doubt = false;
    buf_reset(&b->data);
    buf_reset(&b->aux);
    b->by_hash_n = 0;
    b->nchanges = 0;
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
    if (shape == LOOKUP_LEGACY_ID)
        return "legacy_id";
    return shape == LOOKUP_REF_KEY ? "ref_key" : "ref_hash";
}

void
lookup_map_key_encode(int64_t v, uint8_t key[REF_HASH_LEN])
{
    uint64_t u = (uint64_t) v ^ (UINT64_C(1) << 63);

    memset(key, 0, REF_HASH_LEN);
    for (int i = 0; i < 8; i++)
        key[i] = (uint8_t) (u >> (56 - 8 * i));
}

int64_t
lookup_map_key_decode(const uint8_t key[REF_HASH_LEN])
{
    uint64_t u = 0;

    for (int i = 0; i < 8; i++)
        u = (u << 8) | key[i];
    u ^= UINT64_C(1) << 63;
    /* two's complement back to signed without implementation-defined casts */
    return u <= (uint64_t) INT64_MAX ? (int64_t) u : -(int64_t) (~u) - 1;
}

int
lookup_map_type_bits(const char *type)
{
    if (type == NULL)
        return 0;
    if (strcmp(type, "smallint") == 0 || strcmp(type, "int2") == 0)
        return 16;
    if (strcmp(type, "integer") == 0 || strcmp(type, "int4") == 0 || strcmp(type, "int") == 0)
        return 32;
    if (strcmp(type, "bigint") == 0 || strcmp(type, "int8") == 0)
        return 64;
    return 0;
}

const char *
lookup_map_type_name(int bits)
{
    return bits == 16 ? "smallint" : bits == 32 ? "integer" : "bigint";
}

bool
lookup_map_key_parse(const char *column, const char *data, size_t len, bool is_null, int bits,
                     int64_t *v, uint8_t key[REF_HASH_LEN], char *reason, size_t reason_size)
{
    /* the magnitude allowed: 2^(bits-1) for a negative value, one less otherwise */
    uint64_t limit = UINT64_C(1) << (bits - 1);
    uint64_t mag = 0;
    bool neg = false;
    bool range = true;
    size_t i = 0;

    if (is_null)
    {
        (void) snprintf(reason, reason_size, "key column %s: NULL (the key map needs an integer)",
                        column);
        return false;
    }
    if (i < len && (data[i] == '-' || data[i] == '+'))
        neg = data[i++] == '-';
    if (i == len)
        goto not_integer;
    for (; i < len; i++)
    {
        unsigned d = (unsigned char) data[i] - '0';

        if (d > 9)
            goto not_integer;
        if (mag > (UINT64_MAX - d) / 10)
            range = false;
        else
            mag = mag * 10 + d;
    }
    if (!range || mag > (neg ? limit : limit - 1))
    {
        (void) snprintf(reason, reason_size, "key column %s: out of range for %s: '%.*s'", column,
                        lookup_map_type_name(bits), len > 64 ? 64 : (int) len, data);
        return false;
    }
    *v = !neg ? (int64_t) mag : mag == limit ? INT64_MIN >> (64 - bits) : -(int64_t) mag;
    lookup_map_key_encode(*v, key);
    return true;
not_integer:
    (void) snprintf(reason, reason_size, "key column %s: not an integer: '%.*s'", column,
                    len > 64 ? 64 : (int) len, data);
    return false;
}

/* The statements of set-wise runs (kt: the lookup key's SQL type). */
static void
sink_new_set(Sink *s, const char *kt)
{
    static atomic_uint tables;
    const SinkConfig *cfg = &s->cfg;
    const char *key_col = lookup_key_column(cfg->lookup_shape);
    size_t cols_len = strlen(cfg->copy_cols);

    /* As the probe: one index descent per key (a LATERAL subquery), where
     * "= ANY" may be planned as a scan of the whole lookup; Citus cannot push
     * that down, and gets the array (pruned to the shards it names). */
    if (!cfg->distributed)
        s->set_resolve_sql =
            xasprintf("SELECT u.h, l.id, l.ctid FROM unnest($1::%s[]) AS u(h) CROSS JOIN LATERAL "
                      "(SELECT r.id, r.ctid FROM %s AS r WHERE r.%s = u.h OFFSET 0) AS l",
                      kt, cfg->lookup_q, key_col);
    else
        s->set_resolve_sql = xasprintf("SELECT r.%s::%s, r.id, NULL::tid FROM %s AS r "
                                       "WHERE r.%s = ANY ($1::%s[])",
                                       key_col, kt, cfg->lookup_q, key_col, kt);
    /* The target's rows by id: a join with the ids, run as a nested loop
     * (sink_query_nestloop), one index descent in the one partition each id
     * routes to.  "id = ANY ($1)" is tried on every partition with the whole
     * array: once the ids of a batch span the table's windows (updates and
     * deletes of old rows), the plan became a sequential scan of every
     * partition per statement (5M rows, 4,000 ids: 1.3-2.1 s against 0.2 s). */
    s->set_delete_sql =
        xasprintf("WITH l AS (DELETE FROM %s WHERE ctid = ANY ($1::tid[])) "
                  "DELETE FROM %s AS t USING unnest($2::uuid[]) AS u(id) WHERE t.%s = u.id "
                  "RETURNING t.%s",
                  cfg->lookup_q, cfg->target_q, cfg->key_q, cfg->key_q);
    /* Citus prunes shards by the array; there "= ANY" stays. */
    s->set_tdelete_sql = xasprintf("DELETE FROM %s WHERE %s = ANY ($1::uuid[]) RETURNING %s",
                                   cfg->target_q, cfg->key_q, cfg->key_q);
    /* The COPY line's columns with their types, and the statement number;
     * no constraint (unsent values travel as NULL). */
    s->set_table = xasprintf("pg_temp.v7fill_set_%u", atomic_fetch_add(&tables, 1));
    s->set_table_sql = xasprintf("CREATE TEMP TABLE IF NOT EXISTS %s AS SELECT %.*s, "
                                 "0 AS v7fill_g FROM %s WITH NO DATA",
                                 s->set_table + strlen("pg_temp."), (int) (cols_len - 2),
                                 cfg->copy_cols + 1, cfg->target_q);
    buf_init(&s->set_param);
}

Sink *
sink_new(PgConn *c, const SinkConfig *cfg)
{
    Sink *s = xcalloc(1, sizeof *s);
    const char *key_col = lookup_key_column(cfg->lookup_shape);
    bool map = cfg->lookup_shape == LOOKUP_LEGACY_ID;
    const char *key_type = cfg->lookup_shape == LOOKUP_REF_HASH_BYTEA ? "bytea"
                           : map                                      ? "int8"
                                                                      : "uuid";

    s->conn = c;
    s->cfg = *cfg;
    if (map)
        s->cfg.keep_ref_text = false; /* the key map has no reference text */
    s->lookup_copy_sql = xasprintf("COPY %s (%s, id%s) FROM STDIN (FORMAT binary)",
                                   cfg->lookup_q, key_col, map ? "" : ", ref");
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
     * batch read in time order lie close together: one index range scan
     * answers for all of them, where the lookup needs a descent per hash.
     * LIMIT bounds what a batch spread over years would read; a row it cuts
     * off is asked of the lookup instead.  No ORDER BY: right after a load,
     * with no statistics and no visibility map yet, the planner answers it
     * with a bitmap scan and a sort of the whole range, twice the time of the
     * scan alone; the client finds each id by binary search instead. */
    s->target_probe_sql = xasprintf("SELECT %s FROM %s WHERE %s BETWEEN $1::uuid AND $2::uuid "
                                    "LIMIT $3::bigint",
                                    cfg->key_q, cfg->target_q, cfg->key_q);
    /* After a unique violation, which the range probe's LIMIT may have hidden
     * (a range dense with other sources' rows): every id asked for, one
     * index descent each. */
    s->target_ids_sql = xasprintf("SELECT %s FROM %s WHERE %s = ANY ($1::uuid[])", cfg->key_q,
                                  cfg->target_q, cfg->key_q);
    s->unref_sql = xasprintf("DELETE FROM %s WHERE %s = ANY ($1::%s[])", cfg->lookup_q, key_col,
                             key_type);
    {
        const char *kt = key_type;

        s->ref_find_sql = xasprintf("(SELECT id FROM %s WHERE %s = $1::%s)", cfg->lookup_q,
                                    key_col, kt);
        s->ref_drop_sql = xasprintf("DELETE FROM %s WHERE %s = $1::%s RETURNING id",
                                    cfg->lookup_q, key_col, kt);
        s->ref_move_sql =
            s->cfg.keep_ref_text
                ? xasprintf("UPDATE %s SET %s = $2::%s, ref = $3::text WHERE %s = $1::%s",
                            cfg->lookup_q, key_col, kt, key_col, kt)
                : xasprintf("UPDATE %s SET %s = $2::%s WHERE %s = $1::%s", cfg->lookup_q,
                            key_col, kt, key_col, kt);
        /* One statement: the lookup row, then the target row by the id it had
         * (a scalar subquery: an initplan, so partitions are pruned at run time). */
        s->row_delete_sql = xasprintf("WITH l AS (DELETE FROM %s WHERE %s = $1::%s RETURNING id) "
                                      "DELETE FROM %s WHERE %s = (SELECT id FROM l)",
                                      cfg->lookup_q, key_col, kt, cfg->target_q, cfg->key_q);
        s->truncate_sql = xasprintf("TRUNCATE %s, %s", cfg->target_q, cfg->lookup_q);
        /* xmin precedes $2 as the server orders transaction ids: the 32-bit
         * distance from $2 to xmin, as a signed number, is negative.  A row
         * written in this transaction or a later one (a savepoint's
         * subtransaction, another writer) is not; one 2^31 transactions or
         * more older looks younger and is not merged, the safe way. */
        s->ref_stale_sql = xasprintf(
            "SELECT FROM %s AS l WHERE l.%s = $1::%s AND (l.xmin::text::int8 - $2::int8 %% "
            "4294967296 + 4294967296) %% 4294967296 >= 2147483648",
            cfg->lookup_q, key_col, kt);
        sink_new_set(s, kt);
    }
    buf_init(&s->copy);
    buf_init(&s->param);
    buf_init(&s->update_sql);
    buf_init(&s->values);
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
    free(s->target_ids_sql);
    free(s->expired);
    free(s->expired_there);
    free(s->unref_sql);
    free(s->ref_find_sql);
    free(s->ref_drop_sql);
    free(s->ref_move_sql);
    free(s->row_delete_sql);
    free(s->ref_stale_sql);
    free(s->truncate_sql);
    free(s->set_resolve_sql);
    free(s->set_delete_sql);
    free(s->set_tdelete_sql);
    free(s->set_table);
    free(s->set_table_sql);
    free(s->set);
    free(s->set_by_id);
    free(s->seen_slot);
    free(s->list);
    waves_free(&s->waves);
    buf_free(&s->set_param);
    buf_free(&s->update_sql);
    buf_free(&s->values);
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

/* A binary one-dimensional array parameter's header (elements follow, each
 * its length then its bytes). */
static void
put_array_header(Buf *p, uint32_t elem_oid, size_t n)
{
    buf_reset(p);
    put_be32(p, 1); /* dimensions */
    put_be32(p, 0); /* no NULLs */
    put_be32(p, elem_oid);
    put_be32(p, (uint32_t) n);
    put_be32(p, 1); /* lower bound */
}

static void
put_array_elem(Buf *p, const void *data, uint32_t len)
{
    put_be32(p, len);
    buf_append(p, data, len);
}

static const int probe_formats[1] = {1};

/* A key map's key as a binary int8 (its hash with the sign bit flipped back). */
static void
map_key_int8(const uint8_t key[REF_HASH_LEN], uint8_t out[8])
{
    memcpy(out, key, 8);
    out[0] ^= 0x80;
}

/* A lookup key as one binary parameter: the 16 bytes of a hash, or a key
 * map's int8 (into buf, 8 bytes); *len its length. */
static const char *
sink_key_param(const Sink *s, const uint8_t key[REF_HASH_LEN], uint8_t buf[REF_HASH_LEN],
               int *len)
{
    if (s->cfg.lookup_shape != LOOKUP_LEGACY_ID)
    {
        *len = REF_HASH_LEN;
        return (const char *) key;
    }
    map_key_int8(key, buf);
    *len = 8;
    return (const char *) buf;
}

/* The hashes travel as one binary uuid[] (or bytea[], or a key map's int8[])
 * parameter and come back as binary positions: no text to build or parse on
 * either side.  Sorted by hash, the probes walk the index from left to
 * right. */
static void
sink_probe_param(Sink *s, BatchRow **rows, size_t n)
{
    bool map = s->cfg.lookup_shape == LOOKUP_LEGACY_ID;

    batch_rows_sort(&s->sort, rows, n, BATCH_BY_HASH);
    put_array_header(&s->param,
                     map                                            ? 20   /* int8 */
                     : s->cfg.lookup_shape == LOOKUP_REF_HASH_BYTEA ? 17   /* bytea */
                                                                    : 2950, /* uuid */
                     n);
    for (size_t i = 0; i < n; i++)
    {
        uint8_t k8[REF_HASH_LEN];
        int len;
        const char *k = sink_key_param(s, rows[i]->hash, k8, &len);

        put_array_elem(&s->param, k, (uint32_t) len);
    }
}

/* One key map row in binary COPY: legacy_id in its column's width, the id. */
static void
sink_copy_map_row(Sink *s, const BatchRow *r)
{
    size_t bytes = s->cfg.map_bits == 16 ? 2 : s->cfg.map_bits == 32 ? 4 : 8;
    uint8_t k8[8];

    map_key_int8(r->hash, k8);
    put_be16(&s->copy, 2);
    put_be32(&s->copy, (uint32_t) bytes);
    buf_append(&s->copy, k8 + 8 - bytes, bytes); /* in range: checked when read */
    put_be32(&s->copy, (uint32_t) sizeof r->id.b);
    buf_append(&s->copy, r->id.b, sizeof r->id.b);
}

/* Row i of a lookup probe's answer: the position (1..n) of a reference the
 * lookup holds in the probe's array of n; 0 if none. */
static size_t
probe_position(PGresult *res, int i, size_t n)
{
    uint64_t pos;

    if (PQgetlength(res, i, 0) != 8)
        return 0;
    memcpy(&pos, PQgetvalue(res, i, 0), 8);
    pos = be64toh(pos);
    return pos >= 1 && pos <= n ? (size_t) pos : 0;
}

/* The lookup probe of rows[0..n) (sorted by hash on return). */
static bool
sink_lookup_probe(Sink *s, BatchRow **rows, size_t n, PGresult **res, Err *err)
{
    const char *values[1];
    int lengths[1];

    sink_probe_param(s, rows, n);
    values[0] = s->param.data;
    lengths[0] = (int) s->param.len;
    s->stats.probes++;
    return pg_query_ex(s->conn, s->probe_sql, 1, NULL, values, lengths, probe_formats, 1, res,
                       err);
}

/* Mark the rows whose positions in the probe's array came back as DUPLICATE. */
static size_t
sink_probe_mark(PGresult *res, BatchRow **rows, size_t n)
{
    size_t ndup = 0;

    for (int i = 0; i < PQntuples(res); i++)
    {
        size_t pos = probe_position(res, i, n);

        if (pos > 0 && rows[pos - 1]->outcome == ROW_PENDING)
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

/* Mark rows[first..last] (sorted by id) whose id res (one binary uuid
 * column, in any order) holds as DUPLICATE; *found counts them. */
static void
sink_mark_found(PGresult *res, BatchRow **rows, size_t first, size_t last, size_t *found)
{
    size_t next = first;

    for (int j = 0; j < PQntuples(res); j++)
    {
        Uuid u;
        size_t i = first; /* becomes the first of rows[first..last] not below u */
        size_t end = last + 1;

        if (PQgetlength(res, j, 0) != (int) sizeof u.b)
            continue;
        memcpy(u.b, PQgetvalue(res, j, 0), sizeof u.b);
        /* The answer comes in the heap's order, mostly the ids' own: gallop
         * on from where the last id was found before a binary search. */
        if (next > first && uuid_compare(&rows[next - 1]->id, &u) < 0)
        {
            size_t step = 1;

            i = next;
            while (i + step <= last && uuid_compare(&rows[i + step - 1]->id, &u) < 0)
            {
                i += step;
                step *= 2;
            }
            end = i + step < end ? i + step : end;
        }
        while (i < end)
        {
            size_t mid = i + (end - i) / 2;
            if (uuid_compare(&rows[mid]->id, &u) < 0)
                i = mid + 1;
            else
                end = mid;
        }
        for (; i <= last && uuid_compare(&rows[i]->id, &u) == 0; i++)
            if (!rows[i]->id_given && rows[i]->outcome == ROW_PENDING)
            {
                rows[i]->outcome = ROW_DUPLICATE;
                (*found)++;
            }
        next = i;
    }
}

/*
 * Mark rows[0..n) whose minted id is in the target as DUPLICATE (*found of
 * them); rows end up sorted by id.  By one range scan (bounded by LIMIT: a
 * row it cuts off is not found), or with exact, by asking for each id.
 */
static bool
sink_probe_target(Sink *s, BatchRow **rows, size_t n, bool exact, size_t *found, Err *err)
{
    static const int result_binary = 1;
    char lo[UUID_TEXT_SIZE];
    char hi[UUID_TEXT_SIZE];
    char limit[32];
    size_t first = n;
    size_t last = 0;
    size_t asked = 0;
    PGresult *res;
    bool ok;

    *found = 0;
    batch_rows_sort(&s->sort, rows, n, BATCH_BY_ID);
    for (size_t k = 0; k < n; k++)
        if (!rows[k]->id_given)
        {
            if (first == n)
                first = k;
            last = k;
            asked += rows[k]->outcome == ROW_PENDING;
        }
    if (first == n || asked == 0)
        return true;
    if (exact)
    {
        const char *values[1];
        int lengths[1];

        put_array_header(&s->param, 2950 /* uuid */, asked);
        for (size_t k = first; k <= last; k++)
            if (!rows[k]->id_given && rows[k]->outcome == ROW_PENDING)
                put_array_elem(&s->param, rows[k]->id.b, sizeof rows[k]->id.b);
        values[0] = s->param.data;
        lengths[0] = (int) s->param.len;
        ok = pg_query_ex(s->conn, s->target_ids_sql, 1, NULL, values, lengths, probe_formats,
                         result_binary, &res, err);
    }
    else
    {
        const char *params[3] = {lo, hi, limit};

        uuid_format(&rows[first]->id, lo);
        uuid_format(&rows[last]->id, hi);
        (void) snprintf(limit, sizeof limit, "%zu", 4 * n + 16);
        ok = pg_query_ex(s->conn, s->target_probe_sql, 3, NULL, params, NULL, NULL,
                         result_binary, &res, err);
    }
    if (!ok)
        return false;
    sink_mark_found(res, rows, first, last, found);
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
    size_t found = 0;

    *ndup = 0;
    if (n == 0)
        return true;
    if (s->target_probe_skip > 0)
        s->target_probe_skip--;
    else if (s->cfg.probe_target)
    {
        if (!sink_probe_target(s, rows, n, false, &found, err))
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
    if (!sink_lookup_probe(s, rows, n, &res, err))
        return false;
    *ndup += sink_probe_mark(res, rows, n);
    PQclear(res);
    return true;
}

/*
 * Rows past the retention (ROW_EXPIRED: not written) whose row is in the
 * target already, written when its window had not retired yet (by an earlier
 * run, or by an earlier row of this batch), are duplicates, as any row found
 * again is: not expired a second time, nor a late row, nor quarantined, again.
 * Decided as the batch's rows come, in reading order, as with --batch-rows 1:
 * sink_probe_expired asks the lookup, before the batch's writes, which of their
 * references it holds (expired_found); sink_settle_expired, after the writes,
 * follows the batch's own rows of those references.  One probe, made only for
 * a batch that has expired rows: the others pay nothing.
 */
static size_t
sink_probe_expired(Sink *s, Batch *b, Err *err)
{
    PGresult *res;
    size_t n = 0;

    for (size_t i = 0; i < b->nrows; i++)
        if (b->rows[i].outcome == ROW_EXPIRED && b->rows[i].op == REC_INSERT)
        {
            if (n == s->expired_cap)
            {
                s->expired_cap = s->expired_cap ? 2 * s->expired_cap : 64;
                s->expired = xrealloc(s->expired, s->expired_cap * sizeof *s->expired);
                s->expired_there =
                    xrealloc(s->expired_there, s->expired_cap * sizeof *s->expired_there);
            }
            b->rows[i].expired_found = false;
            s->expired[n++] = &b->rows[i];
        }
    if (n == 0)
        return 0;
    if (!sink_lookup_probe(s, s->expired, n, &res, err)) /* sorts them by hash */
        return SIZE_MAX;
    for (int i = 0; i < PQntuples(res); i++)
    {
        size_t pos = probe_position(res, i, n);

        if (pos > 0)
            s->expired[pos - 1]->expired_found = true;
    }
    PQclear(res);
    return n;
}

/* The first of s->expired[0..n) (by hash) with r's reference, or n. */
static size_t
sink_expired_find(const Sink *s, size_t n, const BatchRow *r)
{
    size_t lo = 0;
    size_t hi = n;

    while (lo < hi)
    {
        size_t mid = lo + (hi - lo) / 2;

        if (memcmp(s->expired[mid]->hash, r->hash, REF_HASH_LEN) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && memcmp(s->expired[lo]->hash, r->hash, REF_HASH_LEN) == 0 ? lo : n;
}

/*
 * sink_settle_expired: the batch written, its n expired rows (s->expired, by
 * hash, probed) in reading order: one whose reference the target holds at that
 * point (there before the batch, or inserted by a row of the batch read before
 * it, and not deleted or truncated since) becomes a DUPLICATE (expired_found
 * stays set: sink_reset_outcomes makes it EXPIRED again).  A reference that a
 * key change moved is followed by the lookup probe only.
 */
static void
sink_settle_expired(Sink *s, Batch *b, size_t n)
{
    if (n == 0)
        return;
    for (size_t k = 0; k < n;)
    {
        /* a reference's state: the probe's, for the first of its rows */
        size_t j = k + 1;

        while (j < n && memcmp(s->expired[j]->hash, s->expired[k]->hash, REF_HASH_LEN) == 0)
            j++;
        s->expired_there[k] = s->expired[k]->expired_found;
        k = j;
    }
    for (size_t i = 0; i < b->nrows; i++)
    {
        BatchRow *r = &b->rows[i];
        size_t k;

        if (r->op == REC_TRUNCATE && r->outcome == ROW_APPLIED)
        {
            for (size_t m = 0; m < n; m++)
                s->expired_there[m] = false;
            continue;
        }
        if (r->outcome != ROW_EXPIRED && r->outcome != ROW_INSERTED &&
            r->outcome != ROW_DELETED)
            continue;
        k = sink_expired_find(s, n, r);
        if (k == n)
            continue;
        if (r->outcome == ROW_EXPIRED)
        {
            r->expired_found = r->op == REC_INSERT && s->expired_there[k];
            if (r->expired_found)
                r->outcome = ROW_DUPLICATE;
        }
        else
            s->expired_there[k] = r->outcome == ROW_INSERTED;
    }
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

        if (s->cfg.lookup_shape == LOOKUP_LEGACY_ID)
        {
            sink_copy_map_row(s, r);
            continue;
        }
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

/*
 * A statement joining the target with a set of ids, planned as a nested loop
 * from the ids: one index descent each, in the partition the id routes to
 * (pruned at run time).  The planner would otherwise hash the set and read
 * every partition, or probe every partition for every id.  No JIT: the join's
 * estimate (ids times rows per id, unknown) passes jit_above_cost, and
 * compiling took 160 ms of a 2,000-row delete's 340.  The settings hold
 * for this statement only (SET LOCAL, then RESET; on an error the transaction
 * or its savepoint rolls them back with it).  A distributed target plans its
 * own shards: left alone.
 */
static bool
sink_query_nestloop(Sink *s, const char *sql, int nparams, const char *const *values,
                    const int *lengths, const int *formats, PGresult **res, Err *err)
{
    bool plain = s->cfg.distributed;

    if (!plain && !sink_exec(s,
                             "SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; "
                             "SET LOCAL jit = off",
                             err))
        return false;
    if (!pg_query_ex(s->conn, sql, nparams, NULL, values, lengths, formats, 1, res, err))
        return false;
    if (!plain && !sink_exec(s, "RESET enable_hashjoin; RESET enable_mergejoin; RESET jit", err))
    {
        PQclear(*res);
        *res = NULL;
        return false;
    }
    return true;
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
            if (!sink_probe_target(s, rows, n, true, &found, err))
                return false;
            probe_gap = found > 0;
            if (found > 0)
            {
                sink_note_lookup_gap(s, found);
                n = compact_pending(rows, n);
                continue;
            }
        }
        if (s->strict)
        {
            *err = copy_err; /* the waves are applied again, in reading order */
            return false;
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
sink_reset_outcomes(Batch *b, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
    {
        BatchRow *r = &b->rows[i];

        r->in_lookup = false;
        r->missing = false;
        r->time_changed = false;
        if (r->expired_found)
        {
            r->outcome = ROW_EXPIRED; /* the probe is made again with the batch */
            r->expired_found = false;
        }
        else if (r->repeat)
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

static void
sink_reserve_scratch(Sink *s, size_t n)
{
    if (s->scratch_cap < n)
    {
        s->scratch_cap = n;
        s->scratch = xrealloc(s->scratch, s->scratch_cap * sizeof *s->scratch);
    }
    if (s->list_cap < n)
    {
        s->list_cap = n;
        s->list = xrealloc(s->list, s->list_cap * sizeof *s->list);
    }
}

/* The pending inserts of rows [from, to) into s->scratch (reserved for the
 * batch). */
static size_t
sink_collect_pending(Sink *s, Batch *b, size_t from, size_t to)
{
    size_t n = 0;

    for (size_t i = from; i < to; i++)
        if (b->rows[i].outcome == ROW_PENDING && b->rows[i].op == REC_INSERT)
            s->scratch[n++] = &b->rows[i];
    return n;
}

/*
 * sink_insert_rounds writes the inserts s->scratch[0..n) (pending): a probe
 * first when the last batch met duplicates (*ndup of them), then rounds: the
 * rows, then the next row of each reference whose row was refused.
 */
static bool
sink_insert_rounds(Sink *s, Batch *b, size_t n, size_t *ndup, Err *err)
{
    bool ok = true;

    *ndup = 0;
    if (s->probe_first && n > 0)
    {
        ok = sink_probe(s, s->scratch, n, ndup, err);
        n = compact_pending(s->scratch, n);
    }
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
    return ok;
}

/* ---- row operations ------------------------------------------------------ */

/* Run sql with binary parameters (16-byte keys and ids, text as its bytes;
 * NULL values are SQL NULL), binary results. */
static bool
sink_query_bin(Sink *s, const char *sql, int n, const char *const *values, const int *lengths,
               PGresult **res, Err *err)
{
    static const int binary[3] = {1, 1, 1};

    return pg_query_ex(s->conn, sql, n, NULL, values, lengths, binary, 1, res, err);
}

/* Delete a lookup row; *found: it was there, with the id *id. */
static bool
sink_ref_drop(Sink *s, const uint8_t key[REF_HASH_LEN], bool *found, Uuid *id, Err *err)
{
    uint8_t k8[REF_HASH_LEN];
    const char *values[1];
    int lengths[1];
    PGresult *res;

    values[0] = sink_key_param(s, key, k8, &lengths[0]);
    if (!sink_query_bin(s, s->ref_drop_sql, 1, values, lengths, &res, err))
        return false;
    *found = PQntuples(res) > 0 && PQgetlength(res, 0, 0) == (int) sizeof id->b;
    if (*found)
        memcpy(id->b, PQgetvalue(res, 0, 0), sizeof id->b);
    PQclear(res);
    return true;
}

/* The lookup row and the target row of reference key, in one statement;
 * *deleted: there was one. */
static bool
sink_delete_key(Sink *s, const uint8_t key[REF_HASH_LEN], bool *deleted, Err *err)
{
    uint8_t k8[REF_HASH_LEN];
    const char *values[1];
    int lengths[1];
    PGresult *res;

    values[0] = sink_key_param(s, key, k8, &lengths[0]);
    if (!sink_query_bin(s, s->row_delete_sql, 1, values, lengths, &res, err))
        return false;
    *deleted = strtoull(PQcmdTuples(res), NULL, 10) > 0;
    PQclear(res);
    return true;
}

/* Is key's lookup row there, written before SinkConfig.merge_before_xid and
 * not since? */
static bool
sink_ref_stale(Sink *s, const uint8_t key[REF_HASH_LEN], bool *stale, Err *err)
{
    uint8_t k8[REF_HASH_LEN];
    char before[24];
    const char *values[2];
    int lengths[2] = {0, 0};
    static const int formats[2] = {1, 0};
    PGresult *res;

    values[0] = sink_key_param(s, key, k8, &lengths[0]);
    (void) snprintf(before, sizeof before, "%" PRIu64, s->cfg.merge_before_xid);
    values[1] = before;
    if (!pg_query_ex(s->conn, s->ref_stale_sql, 2, NULL, values, lengths, formats, 1, &res, err))
        return false;
    *stale = PQntuples(res) > 0;
    PQclear(res);
    return true;
}

static bool
sink_delete_row(Sink *s, BatchRow *r, Err *err)
{
    bool deleted;

    if (!sink_delete_key(s, r->hash, &deleted, err))
        return false;
    r->outcome = deleted ? ROW_DELETED : ROW_MISSING;
    return true;
}

static bool
field_sent(const Batch *b, const BatchRow *r, size_t i)
{
    return r->sent_off == UINT32_MAX ||
           ((const uint8_t *) b->aux.data)[r->sent_off + i / 8] & (1u << (i % 8));
}

/*
 * sink_set_row: UPDATE target SET (the fields sent, the id never) WHERE the id
 * is the one the lookup has for key; *touched: the row was there, its id in
 * *id.  One statement per row, its values decoded from the row's COPY line as
 * text parameters (the server casts them as COPY would).
 */
static bool
sink_set_row(Sink *s, const Batch *b, const BatchRow *r, const uint8_t key[REF_HASH_LEN],
             Uuid *id, bool *touched, Err *err)
{
    const char *line = b->data.data + r->copy_off;
    size_t len = r->copy_len;
    size_t off = 0;
    size_t nset = 0;
    size_t *starts = xmalloc((s->cfg.ncols + 1) * sizeof *starts);
    const char **values = xmalloc((s->cfg.ncols + 1) * sizeof *values);
    int *lengths = xcalloc(s->cfg.ncols + 1, sizeof *lengths);
    int *formats = xcalloc(s->cfg.ncols + 1, sizeof *formats);
    uint8_t k8[REF_HASH_LEN];
    Buf field;
    PGresult *res;
    bool ok;

    buf_init(&field);
    buf_reset(&s->values);
    buf_reset(&s->update_sql);
    buf_printf(&s->update_sql, "UPDATE %s SET ", s->cfg.target_q);
    for (size_t i = 0; i < s->cfg.ncols && off < len; i++)
    {
        bool is_null;

        off += copy_decode_field(line + off, len - off, &field, &is_null);
        if (i == 0 || !field_sent(b, r, i))
            continue; /* the id never changes; unsent columns keep their value */
        starts[nset] = is_null ? SIZE_MAX : s->values.len;
        if (!is_null)
            buf_append(&s->values, field.data, field.len + 1);
        buf_printf(&s->update_sql, "%s%s = $%zu", nset > 0 ? ", " : "", s->cfg.cols_q[i],
                   nset + 2);
        nset++;
    }
    buf_free(&field);
    if (nset == 0)
    {
        /* Nothing sent but the key: the row stays as it is, if it is there. */
        buf_reset(&s->update_sql);
        buf_printf(&s->update_sql, "SELECT %s FROM %s", s->cfg.key_q, s->cfg.target_q);
    }
    buf_printf(&s->update_sql, " WHERE %s = %s%s%s", s->cfg.key_q, s->ref_find_sql,
               nset > 0 ? " RETURNING " : "", nset > 0 ? s->cfg.key_q : "");
    values[0] = sink_key_param(s, key, k8, &lengths[0]);
    formats[0] = 1;
    for (size_t k = 0; k < nset; k++)
        values[k + 1] = starts[k] == SIZE_MAX ? NULL : s->values.data + starts[k];
    *touched = false;
    ok = pg_query_ex(s->conn, s->update_sql.data, (int) nset + 1, NULL, values, lengths, formats,
                     1, &res, err);
    if (ok)
    {
        *touched = PQntuples(res) > 0 && PQgetlength(res, 0, 0) == (int) sizeof id->b;
        if (*touched)
            memcpy(id->b, PQgetvalue(res, 0, 0), sizeof id->b);
        PQclear(res);
    }
    free(starts);
    free(values);
    free(lengths);
    free(formats);
    return ok;
}

#define REASON_MISSING_INCOMPLETE                                                                 \
    "update of a row the target does not have (the tuple is incomplete: unchanged TOAST values)"

/* Key changes merged that the log names one by one. */
#define SINK_MERGES_NAMED 10

/*
 * sink_update_row: the row found through the lookup by its reference (the old
 * one when the key changed, whose lookup row then moves to the new one) gets
 * the fields sent.  A row the target does not have is inserted when the tuple
 * is complete (as an insert: its minted id), rejected otherwise.
 */
static bool
sink_update_row(Sink *s, Batch *b, BatchRow *r, Err *err)
{
    const uint8_t *key = r->has_old ? r->old_hash : r->hash;
    bool found;
    Uuid id;
    bool touched;
    size_t ndup;

    if (r->has_old && r->src_line <= s->cfg.merge_key_moves_upto)
    {
        bool stale;

        /* Decided here on every write of the batch (a batch written again
         * after a rollback decides again), never kept in the row. */
        if (!sink_ref_stale(s, r->old_hash, &stale, err))
            return false;
        touched = false;
        if (stale && !sink_set_row(s, b, r, r->hash, &id, &touched, err))
            return false;
        if (touched)
        {
            bool deleted;

            if (!sink_delete_key(s, r->old_hash, &deleted, err))
                return false;
            r->outcome = ROW_UPDATED;
            r->time_changed = r->time_sent && civil_floor_div(r->time_us, US_PER_MS) !=
                                                  civil_floor_div(uuid7_us(&id), US_PER_MS);
            /* The first few by name, so a bulk renumbering does not write a
             * line per row (a batch written again logs again). */
            s->merges++;
            if (s->merges <= SINK_MERGES_NAMED)
                log_info("%s: a key change to %.*s, replayed after the initial copy was "
                         "redone, went to the row that copy wrote under the new key; the row "
                         "the first copy wrote under the old key was %s%s",
                         s->cfg.target_q, (int) r->ref_len, b->aux.data + r->ref_off,
                         deleted ? "deleted" : "gone already",
                         s->merges == SINK_MERGES_NAMED
                             ? " (further ones are not named; the count of updates has them)"
                             : "");
            return true;
        }
    }
    if (!sink_set_row(s, b, r, key, &id, &touched, err))
        return false;
    if (touched)
    {
        r->outcome = ROW_UPDATED;
        r->time_changed = r->time_sent && civil_floor_div(r->time_us, US_PER_MS) !=
                                              civil_floor_div(uuid7_us(&id), US_PER_MS);
        if (r->has_old)
        {
            uint8_t old8[REF_HASH_LEN];
            uint8_t new8[REF_HASH_LEN];
            const char *values[3];
            int lengths[3] = {0, 0, (int) r->ref_len};
            PGresult *res;

            values[0] = sink_key_param(s, r->old_hash, old8, &lengths[0]);
            values[1] = sink_key_param(s, r->hash, new8, &lengths[1]);
            values[2] = b->aux.data + r->ref_off;

            if (!sink_query_bin(s, s->ref_move_sql, s->cfg.keep_ref_text ? 3 : 2, values,
                                lengths, &res, err))
                return false;
            PQclear(res);
        }
        return true;
    }
    r->missing = true;
    if (!sink_ref_drop(s, key, &found, &id, err)) /* a lookup row without its row: stale */
        return false;
    if (!r->complete)
    {
        batch_reject(b, r, REASON_MISSING_INCOMPLETE, NULL);
        return true;
    }
    s->scratch[0] = r;
    return sink_insert_rounds(s, b, 1, &ndup, err);
}

/* One row operation other than an insert. */
static bool
sink_apply_one(Sink *s, Batch *b, BatchRow *r, Err *err)
{
    if (r->outcome != ROW_PENDING)
        return true;
    bool ok;

    if (r->op == REC_TRUNCATE)
    {
        if (!sink_exec(s, s->truncate_sql, err))
        {
            err_prefix(err, "applying a TRUNCATE");
            return false;
        }
        r->outcome = ROW_APPLIED;
        return true;
    }
    ok = r->op == REC_DELETE ? sink_delete_row(s, r, err) : sink_update_row(s, b, r, err);
    if (!ok)
        err_prefix(err, "applying %s", r->op == REC_DELETE ? "a delete" : "an update");
    return ok;
}

/* Undo what the server decided for rows[0..n) (rolled back). */
static void
sink_reset_rows(BatchRow **rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
    {
        BatchRow *r = rows[i];

        if (r->client_decided)
            continue;
        r->outcome = ROW_PENDING;
        r->reason_off = UINT32_MAX;
        r->sqlstate[0] = '\0';
        r->missing = false;
        r->time_changed = false;
        r->in_lookup = false;
    }
}

/*
 * sink_apply_change applies one row operation other than an insert, under a
 * savepoint: an error that may be the row's (a value the server refuses)
 * rejects that row only.
 */
static bool
sink_apply_change(Sink *s, Batch *b, BatchRow *r, Err *err)
{
    Err row_err = {0};
    bool ok;

    if (r->outcome != ROW_PENDING)
        return true;
    if (s->strict)
        return sink_apply_one(s, b, r, err);
    if (!sink_exec(s, "SAVEPOINT v7fill_change", err))
        return false;
    ok = sink_apply_one(s, b, r, &row_err);
    if (ok)
    {
        if (r->outcome != ROW_REJECTED)
            s->refused_run = 0;
        return sink_exec(s, "RELEASE SAVEPOINT v7fill_change", err);
    }
    if (is_statement_error(&row_err))
    {
        *err = row_err;
        return false;
    }
    if (!sink_rollback_to(s, "v7fill_change", err))
        return false;
    sink_reset_rows(&r, 1);
    return sink_refuse(s, b, r, &row_err, err);
}

/*
 * sink_apply_rows: the operations of rows[0..n) (no inserts among them) in
 * order, under one savepoint; when one fails in a way that may be a row's,
 * they are rolled back and applied again one by one, each under its own
 * savepoint (sink_apply_change), so that it costs that row only.  Strict
 * (waves): one after the other, the first error fails.
 */
static bool
sink_apply_rows(Sink *s, Batch *b, BatchRow **rows, size_t n, Err *err)
{
    Err row_err = {0};
    bool ok;

    if (n == 1 || s->strict)
    {
        for (size_t i = 0; i < n; i++)
            if (!sink_apply_change(s, b, rows[i], err))
                return false;
        return true;
    }
    if (!sink_exec(s, "SAVEPOINT v7fill_changes", err))
        return false;
    ok = true;
    for (size_t i = 0; ok && i < n; i++)
        ok = sink_apply_one(s, b, rows[i], &row_err);
    if (ok)
        return sink_exec(s, "RELEASE SAVEPOINT v7fill_changes", err);
    if (is_statement_error(&row_err))
    {
        *err = row_err;
        return false;
    }
    if (!sink_rollback_to(s, "v7fill_changes", err))
        return false;
    sink_reset_rows(rows, n);
    for (size_t i = 0; i < n; i++)
        if (!sink_apply_change(s, b, rows[i], err))
            return false;
    return true;
}

/* ---- set-wise runs -------------------------------------------------------- */

/* A run shorter than this goes row by row (a few statements either way). */
#define SINK_SET_MIN 8

/* The lookup key a row's operation goes by. */
static const uint8_t *
row_key(const BatchRow *r)
{
    return r->has_old ? r->old_hash : r->hash;
}

/* Add row i's key to the run's set; false: the run has it already. */
static bool
seen_add(Sink *s, const Batch *b, size_t i)
{
    const uint8_t *key = row_key(&b->rows[i]);
    size_t mask = s->seen_cap - 1;

    for (size_t h = sink_key_slot(key) & mask;; h = (h + 1) & mask)
    {
        uint64_t v = s->seen_slot[h];

        if ((uint32_t) (v >> 32) != s->seen_gen)
        {
            s->seen_slot[h] = (uint64_t) s->seen_gen << 32 | (uint64_t) (i + 1);
            return true;
        }
        if (memcmp(row_key(&b->rows[(uint32_t) v - 1]), key, REF_HASH_LEN) == 0)
            return false;
    }
}

/* Can r be part of a set-wise run (an update that keeps its key, a delete)? */
static bool
set_eligible(const BatchRow *r)
{
    return r->outcome == ROW_PENDING &&
           ((r->op == REC_UPDATE && !r->has_old) || r->op == REC_DELETE);
}

/*
 * sink_run_end: where the set-wise run starting at row i ends (before to):
 * consecutive pending operations of one kind whose references are all
 * distinct; rows decided already (rejected before the sink) go along.  A row
 * that cannot be part of one is a run of its own (i + 1).  *n: its pending
 * rows.
 */
static size_t
sink_run_end(Sink *s, const Batch *b, size_t i, size_t to, size_t *n)
{
    uint8_t op = b->rows[i].op;
    size_t j;

    *n = 0;
    if (s->set_off || !set_eligible(&b->rows[i]) || (op == REC_UPDATE && s->set_no_table))
        return i + 1;
    if (s->seen_cap < 2 * (to - i))
    {
        free(s->seen_slot);
        for (s->seen_cap = 64; s->seen_cap < 2 * (to - i);)
            s->seen_cap *= 2;
        s->seen_slot = xcalloc(s->seen_cap, sizeof *s->seen_slot);
        s->seen_gen = 0;
    }
    if (++s->seen_gen == 0) /* wrapped: old stamps could pass for new ones */
    {
        memset(s->seen_slot, 0, s->seen_cap * sizeof *s->seen_slot);
        s->seen_gen = 1;
    }
    for (j = i; j < to; j++)
    {
        const BatchRow *r = &b->rows[j];

        if (r->outcome != ROW_PENDING)
            continue;
        if (r->op != op || !set_eligible(r) || !seen_add(s, b, j))
            break;
        (*n)++;
    }
    return j;
}

static int
setrow_cmp_id(const void *a, const void *b)
{
    const SetRow *x = *(const SetRow *const *) a;
    const SetRow *y = *(const SetRow *const *) b;

    return uuid_compare(&x->id, &y->id);
}

static SetRow *
set_find_id(Sink *s, size_t nfound, const char *data, int len)
{
    SetRow key;
    SetRow *kp = &key;
    SetRow **hit;

    if (len != (int) sizeof key.id.b)
        return NULL;
    memcpy(key.id.b, data, sizeof key.id.b);
    hit = bsearch(&kp, s->set_by_id, nfound, sizeof *s->set_by_id, setrow_cmp_id);
    return hit ? *hit : NULL;
}

/* A key as the resolve query returns it (16 bytes, or a key map's int8) back
 * into a row hash. */
static bool
set_result_key(const Sink *s, const char *data, int len, uint8_t key[REF_HASH_LEN])
{
    if (s->cfg.lookup_shape == LOOKUP_LEGACY_ID)
    {
        if (len != 8)
            return false;
        memset(key, 0, REF_HASH_LEN);
        memcpy(key, data, 8);
        key[0] ^= 0x80;
        return true;
    }
    if (len != REF_HASH_LEN)
        return false;
    memcpy(key, data, REF_HASH_LEN);
    return true;
}

static int
setrow_cmp_key(const void *k, const void *e)
{
    return memcmp(k, row_key(((const SetRow *) e)->r), REF_HASH_LEN);
}

/*
 * sink_set_resolve: the pending rows of rows[0..nrows) into s->set (hash
 * order), each with the id and lookup row its reference has, in one query.
 * *nfound: those the lookup has, in s->set_by_id by id.
 */
static bool
sink_set_resolve(Sink *s, BatchRow **rows, size_t nrows, size_t *n, size_t *nfound, Err *err)
{
    const char *values[1];
    int lengths[1];
    PGresult *res;

    *n = 0;
    for (size_t i = 0; i < nrows; i++)
        if (rows[i]->outcome == ROW_PENDING)
            s->scratch[(*n)++] = rows[i];
    if (s->set_cap < *n)
    {
        s->set_cap = *n;
        s->set = xrealloc(s->set, *n * sizeof *s->set);
        s->set_by_id = xrealloc(s->set_by_id, *n * sizeof *s->set_by_id);
    }
    sink_probe_param(s, s->scratch, *n); /* no key changes here: row_key is the hash */
    for (size_t i = 0; i < *n; i++)
    {
        memset(&s->set[i], 0, sizeof s->set[i]);
        s->set[i].r = s->scratch[i];
    }
    values[0] = s->param.data;
    lengths[0] = (int) s->param.len;
    if (!pg_query_ex(s->conn, s->set_resolve_sql, 1, NULL, values, lengths, probe_formats, 1,
                     &res, err))
        return false;
    *nfound = 0;
    for (int j = 0; j < PQntuples(res); j++)
    {
        uint8_t key[REF_HASH_LEN];
        SetRow *e;

        if (!set_result_key(s, PQgetvalue(res, j, 0), PQgetlength(res, j, 0), key) ||
            PQgetlength(res, j, 1) != (int) sizeof e->id.b)
            continue;
        e = bsearch(key, s->set, *n, sizeof *s->set, setrow_cmp_key);
        if (e == NULL || e->found)
            continue;
        e->found = true;
        memcpy(e->id.b, PQgetvalue(res, j, 1), sizeof e->id.b);
        if (PQgetlength(res, j, 2) == (int) sizeof e->tid)
            memcpy(e->tid, PQgetvalue(res, j, 2), sizeof e->tid);
        s->set_by_id[(*nfound)++] = e;
    }
    PQclear(res);
    qsort(s->set_by_id, *nfound, sizeof *s->set_by_id, setrow_cmp_id);
    return true;
}

/* Delete the lookup rows of rows[0..n) by their keys (rows sorted by hash). */
static bool
sink_unref(Sink *s, BatchRow **rows, size_t n, Err *err)
{
    const char *values[1];
    int lengths[1];
    PGresult *res;

    sink_probe_param(s, rows, n);
    values[0] = s->param.data;
    lengths[0] = (int) s->param.len;
    if (!pg_query_ex(s->conn, s->unref_sql, 1, NULL, values, lengths, probe_formats, 0, &res,
                     err))
        return false;
    PQclear(res);
    return true;
}

/* The ids of the found rows of group g (UINT32_MAX: all) as a uuid[] in p. */
static size_t
set_ids_param(Sink *s, Buf *p, size_t nfound, uint32_t g)
{
    size_t k = 0;

    for (size_t i = 0; i < nfound; i++)
        k += g == UINT32_MAX || s->set_by_id[i]->group == g;
    put_array_header(p, 2950, k);
    for (size_t i = 0; i < nfound; i++)
        if (g == UINT32_MAX || s->set_by_id[i]->group == g)
            put_array_elem(p, s->set_by_id[i]->id.b, sizeof s->set_by_id[i]->id.b);
    return k;
}

/* Mark the rows whose ids res returned (column 0) as done: outcome. */
static void
set_mark_returned(Sink *s, PGresult *res, size_t nfound, RowOutcome outcome)
{
    for (int j = 0; j < PQntuples(res); j++)
    {
        SetRow *e = set_find_id(s, nfound, PQgetvalue(res, j, 0), PQgetlength(res, j, 0));

        if (e == NULL || e->r->outcome != ROW_PENDING)
            continue;
        e->r->outcome = outcome;
        if (outcome == ROW_UPDATED)
            e->r->time_changed = e->r->time_sent &&
                                 civil_floor_div(e->r->time_us, US_PER_MS) !=
                                     civil_floor_div(uuid7_us(&e->id), US_PER_MS);
    }
}

/* A set-wise run of deletes: the lookup rows and the target rows in one
 * statement (two on a distributed target); those the target did not have
 * are missing. */
static bool
sink_set_delete(Sink *s, BatchRow **rows, size_t nrows, Err *err)
{
    static const int binary2[2] = {1, 1};
    size_t n;
    size_t nfound;
    const char *values[2];
    int lengths[2];
    PGresult *res;

    if (!sink_set_resolve(s, rows, nrows, &n, &nfound, err))
        return false;
    set_ids_param(s, &s->set_param, nfound, UINT32_MAX);
    if (!s->cfg.distributed)
    {
        put_array_header(&s->param, 27, nfound); /* tid[] */
        for (size_t i = 0; i < nfound; i++)
            put_array_elem(&s->param, s->set_by_id[i]->tid, sizeof s->set_by_id[i]->tid);
        values[0] = s->param.data;
        lengths[0] = (int) s->param.len;
        values[1] = s->set_param.data;
        lengths[1] = (int) s->set_param.len;
        if (!sink_query_nestloop(s, s->set_delete_sql, 2, values, lengths, binary2, &res, err))
            return false;
    }
    else
    {
        for (size_t i = 0; i < nfound; i++)
            s->scratch[i] = s->set_by_id[i]->r;
        if (!sink_unref(s, s->scratch, nfound, err))
            return false;
        values[0] = s->set_param.data;
        lengths[0] = (int) s->set_param.len;
        if (!pg_query_ex(s->conn, s->set_tdelete_sql, 1, NULL, values, lengths, probe_formats,
                         1, &res, err))
            return false;
    }
    set_mark_returned(s, res, nfound, ROW_DELETED);
    PQclear(res);
    for (size_t i = 0; i < n; i++)
        if (s->set[i].r->outcome == ROW_PENDING)
            s->set[i].r->outcome = ROW_MISSING;
    return true;
}

/* Number the found rows' statements by the set of columns they sent; returns
 * how many there are. */
static uint32_t
set_group(Sink *s, const Batch *b, size_t nfound)
{
    size_t nbytes = (s->cfg.ncols + 7) / 8;
    uint32_t ngroups = 0;
    size_t *first = xmalloc((nfound + 1) * sizeof *first); /* a row of each group */

    for (size_t i = 0; i < nfound; i++)
    {
        const BatchRow *r = s->set_by_id[i]->r;
        uint32_t g;

        for (g = 0; g < ngroups; g++)
        {
            const BatchRow *o = s->set_by_id[first[g]]->r;

            if (r->sent_off == o->sent_off ||
                (r->sent_off != UINT32_MAX && o->sent_off != UINT32_MAX &&
                 memcmp(b->aux.data + r->sent_off, b->aux.data + o->sent_off, nbytes) == 0))
                break;
        }
        if (g == ngroups)
            first[ngroups++] = i;
        s->set_by_id[i]->group = g;
    }
    free(first);
    return ngroups;
}

/* The found rows' new values into the temp table: each COPY line with the id
 * the lookup has in place of its own, and its statement number. */
static bool
sink_set_fill(Sink *s, const Batch *b, size_t nfound, Err *err)
{
    char sql[160];
    bool ok;

    (void) snprintf(sql, sizeof sql, "TRUNCATE %s", s->set_table);
    if (!sink_exec(s, sql, err))
        return false;
    buf_reset(&s->copy);
    for (size_t i = 0; i < nfound; i++)
    {
        const SetRow *e = s->set_by_id[i];
        char idtext[UUID_TEXT_SIZE];

        uuid_format(&e->id, idtext);
        buf_append(&s->copy, idtext, UUID_TEXT_LEN);
        /* the line after its id, without its newline */
        buf_append(&s->copy, b->data.data + e->r->copy_off + UUID_TEXT_LEN,
                   e->r->copy_len - UUID_TEXT_LEN - 1);
        buf_printf(&s->copy, "\t%u\n", e->group);
    }
    (void) snprintf(sql, sizeof sql, "COPY %s FROM STDIN", s->set_table);
    ok = pg_copy_begin(s->conn, sql, err) && pg_copy_put(s->conn, s->copy.data, s->copy.len, err) &&
         pg_copy_end(s->conn, err);
    return ok;
}

/* One UPDATE of group g: the columns its rows sent, from the temp table, on
 * the rows with their ids: a nested loop from the temp table, each id pruned
 * to its partition at run time (on Citus, the ids also as an array: shards
 * pruned). */
static bool
sink_set_update_group(Sink *s, const Batch *b, size_t nfound, uint32_t g, Err *err)
{
    const BatchRow *r = NULL;
    size_t nset = 0;
    const char *values[1];
    int lengths[1];
    PGresult *res;

    for (size_t i = 0; i < nfound && r == NULL; i++)
        if (s->set_by_id[i]->group == g)
            r = s->set_by_id[i]->r;
    if (r == NULL || set_ids_param(s, &s->set_param, nfound, g) == 0)
        return true;
    buf_reset(&s->update_sql);
    buf_printf(&s->update_sql, "UPDATE %s AS t SET ", s->cfg.target_q);
    for (size_t i = 1; i < s->cfg.ncols; i++) /* the id never changes */
        if (field_sent(b, r, i))
        {
            buf_printf(&s->update_sql, "%s%s = s.%s", nset > 0 ? ", " : "", s->cfg.cols_q[i],
                       s->cfg.cols_q[i]);
            nset++;
        }
    if (nset > 0 && s->cfg.distributed)
        buf_printf(&s->update_sql,
                   " FROM %s AS s WHERE t.%s = s.%s AND s.v7fill_g = %u AND t.%s = ANY "
                   "($1::uuid[]) RETURNING t.%s",
                   s->set_table, s->cfg.key_q, s->cfg.key_q, g, s->cfg.key_q, s->cfg.key_q);
    else if (nset > 0)
        buf_printf(&s->update_sql,
                   " FROM %s AS s WHERE t.%s = s.%s AND s.v7fill_g = %u RETURNING t.%s",
                   s->set_table, s->cfg.key_q, s->cfg.key_q, g, s->cfg.key_q);
    else
    {
        /* Nothing sent but the key: the rows stay as they are, if they are there. */
        buf_reset(&s->update_sql);
        if (s->cfg.distributed)
            buf_printf(&s->update_sql, "SELECT %s FROM %s WHERE %s = ANY ($1::uuid[])",
                       s->cfg.key_q, s->cfg.target_q, s->cfg.key_q);
        else
            buf_printf(&s->update_sql,
                       "SELECT t.%s FROM unnest($1::uuid[]) AS u(id) JOIN %s AS t ON t.%s = u.id",
                       s->cfg.key_q, s->cfg.target_q, s->cfg.key_q);
    }
    values[0] = s->set_param.data;
    lengths[0] = (int) s->set_param.len;
    if (!sink_query_nestloop(s, s->update_sql.data, nset > 0 && !s->cfg.distributed ? 0 : 1,
                             values, lengths, probe_formats, &res, err))
        return false;
    set_mark_returned(s, res, nfound, ROW_UPDATED);
    PQclear(res);
    return true;
}

/*
 * A set-wise run of updates (no key change): the ids resolved, the new values
 * COPYed into the temp table, one UPDATE per set of columns sent.  The rows
 * the target does not have are missing: a stale lookup row goes, a complete
 * tuple is inserted (as an insert), an incomplete one rejected.
 */
static bool
sink_set_update(Sink *s, Batch *b, BatchRow **rows, size_t nrows, Err *err)
{
    size_t n;
    size_t nfound;
    size_t nstale = 0;
    size_t nins = 0;
    size_t ndup;
    uint32_t ngroups;

    if (!sink_set_resolve(s, rows, nrows, &n, &nfound, err))
        return false;
    ngroups = set_group(s, b, nfound);
    if (nfound > 0 && !sink_set_fill(s, b, nfound, err))
        return false;
    for (uint32_t g = 0; g < ngroups; g++)
        if (!sink_set_update_group(s, b, nfound, g, err))
            return false;
    /* Found in the lookup, not in the target: stale lookup rows. */
    for (size_t i = 0; i < nfound; i++)
        if (s->set_by_id[i]->r->outcome == ROW_PENDING)
            s->scratch[nstale++] = s->set_by_id[i]->r;
    if (nstale > 0 && !sink_unref(s, s->scratch, nstale, err))
        return false;
    for (size_t i = 0; i < n; i++)
    {
        BatchRow *r = s->set[i].r;

        if (r->outcome != ROW_PENDING)
            continue;
        r->missing = true;
        if (!r->complete)
            batch_reject(b, r, REASON_MISSING_INCOMPLETE, NULL);
        else
            s->scratch[nins++] = r;
    }
    return nins == 0 || sink_insert_rounds(s, b, nins, &ndup, err);
}

/* An error after which nothing is tried again in this transaction: the
 * connection, a deadlock or serialization failure (the caller retries the
 * batch), an operator's intervention, or one of v7fill's own. */
static bool
is_fatal_error(const Err *e)
{
    return pg_err_is_connection(e) || e->sqlstate[0] == '\0' ||
           strncmp(e->sqlstate, "40", 2) == 0 || strncmp(e->sqlstate, "57", 2) == 0;
}

/*
 * sink_apply_set applies the run rows[0..n) set-wise under a savepoint.  When
 * it fails in a way that may be a row's, the run is rolled back and applied
 * row by row (sink_apply_change): one bad row costs one row.  A statement the
 * server cannot run at all (a distributed target that refuses the shape)
 * turns set-wise runs off for this sink.  Strict (waves): no savepoint of its
 * own, an error fails.
 */
static bool
sink_apply_set(Sink *s, Batch *b, BatchRow **rows, size_t n, Err *err)
{
    Err row_err = {0};
    uint8_t op = REC_UPDATE;
    bool ok;

    for (size_t i = 0; i < n; i++) /* the run's kind: its first pending row's */
        if (rows[i]->outcome == ROW_PENDING)
        {
            op = rows[i]->op;
            break;
        }
    /* The temp table outside the run's savepoint: a rollback to it keeps the
     * table.  A role that may not create one (no TEMP privilege) gets its
     * updates row by row. */
    if (op == REC_UPDATE && s->set_pid != PQbackendPID(pg_raw(s->conn)))
    {
        Err table_err = {0};

        if (!sink_exec(s, "SAVEPOINT v7fill_set_table", err))
            return false;
        if (!sink_exec(s, s->set_table_sql, &table_err))
        {
            if (pg_err_is_connection(&table_err))
            {
                *err = table_err;
                return false;
            }
            if (!sink_rollback_to(s, "v7fill_set_table", err))
                return false;
            log_warn("%s: could not create a temp table for set-wise updates (%s); applying "
                     "updates row by row",
                     s->cfg.target_q, table_err.msg);
            s->set_no_table = true;
            return sink_apply_rows(s, b, rows, n, err);
        }
        if (!sink_exec(s, "RELEASE SAVEPOINT v7fill_set_table", err))
            return false;
        s->set_pid = PQbackendPID(pg_raw(s->conn));
    }
    if (s->strict)
        return op == REC_DELETE ? sink_set_delete(s, rows, n, err)
                                : sink_set_update(s, b, rows, n, err);
    if (!sink_exec(s, "SAVEPOINT v7fill_set", err))
        return false;
    ok = op == REC_DELETE ? sink_set_delete(s, rows, n, &row_err)
                          : sink_set_update(s, b, rows, n, &row_err);
    if (ok)
    {
        s->refused_run = 0;
        return sink_exec(s, "RELEASE SAVEPOINT v7fill_set", err);
    }
    if (is_fatal_error(&row_err))
    {
        *err = row_err;
        return false;
    }
    if (!sink_rollback_to(s, "v7fill_set", err))
        return false;
    sink_reset_rows(rows, n);
    if (is_statement_error(&row_err) && !s->set_off)
    {
        log_warn("%s: set-wise updates and deletes refused (%s); applying them row by row",
                 s->cfg.target_q, row_err.msg);
        s->set_off = true;
    }
    for (size_t i = 0; i < n; i++)
        if (!sink_apply_change(s, b, rows[i], err))
            return false;
    return true;
}

/* Rows [from, to) into s->list; returns it. */
static BatchRow **
sink_list_range(Sink *s, Batch *b, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        s->list[i - from] = &b->rows[i];
    return s->list;
}

/*
 * sink_apply_changes: the operations of rows [from, to) (no inserts among
 * them) in order: runs of at least SINK_SET_MIN updates (or deletes) of
 * distinct references set-wise, what lies between them row by row.
 */
static bool
sink_apply_changes(Sink *s, Batch *b, size_t from, size_t to, Err *err)
{
    size_t seg = from;

    for (size_t i = from; i < to;)
    {
        size_t n;
        size_t end = sink_run_end(s, b, i, to, &n);

        if (n >= SINK_SET_MIN)
        {
            if ((seg < i && !sink_apply_rows(s, b, sink_list_range(s, b, seg, i), i - seg, err)) ||
                !sink_apply_set(s, b, sink_list_range(s, b, i, end), end - i, err))
                return false;
            seg = end;
        }
        i = end;
    }
    return seg >= to || sink_apply_rows(s, b, sink_list_range(s, b, seg, to), to - seg, err);
}

/*
 * sink_write_runs: rows [from, to) in reading order, as runs: the inserts up
 * to the next other operation, then the operations up to the next insert (a
 * file import: one run, the whole batch).  *ndup: duplicates the inserts met.
 */
static bool
sink_write_runs(Sink *s, Batch *b, size_t from, size_t to, size_t *ndup, Err *err)
{
    bool ok = true;

    while (ok && from < to)
    {
        size_t ins_end = from;
        size_t end;
        size_t run_dup = 0;

        while (ins_end < to && b->rows[ins_end].op == REC_INSERT)
            ins_end++;
        if (ins_end > from)
        {
            ok = sink_insert_rounds(s, b, sink_collect_pending(s, b, from, ins_end), &run_dup,
                                    err);
            *ndup += run_dup;
        }
        for (end = ins_end; end < to && b->rows[end].op != REC_INSERT;)
            end++;
        if (ok && end > ins_end)
            ok = sink_apply_changes(s, b, ins_end, end, err);
        from = end;
    }
    return ok;
}

/* The pending rows of idx[0..n) that match: into s->list; returns how many. */
static size_t
wave_pick(Sink *s, Batch *b, const uint32_t *idx, size_t n, uint8_t op, bool moves)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
    {
        BatchRow *r = &b->rows[idx[i]];

        if (r->outcome == ROW_PENDING && r->op == op && (op != REC_UPDATE || r->has_old == moves))
            s->list[k++] = r;
    }
    return k;
}

/* Deletes, or updates that keep their key, of one wave (s->list[0..n)):
 * set-wise when there are enough of them. */
static bool
wave_apply_kind(Sink *s, Batch *b, size_t n, uint8_t op, Err *err)
{
    if (n >= SINK_SET_MIN && !s->set_off && (op == REC_DELETE || !s->set_no_table))
        return sink_apply_set(s, b, s->list, n, err);
    return sink_apply_rows(s, b, s->list, n, err);
}

/*
 * sink_apply_wave: one wave (rows idx[0..n), every key distinct): its
 * deletes, then its updates, then its inserts, so that a delete or an update
 * that frees a value of another unique column comes before an insert that
 * takes it.
 */
static bool
sink_apply_wave(Sink *s, Batch *b, const uint32_t *idx, size_t n, size_t *ndup, Err *err)
{
    size_t k;
    size_t run_dup = 0;

    k = wave_pick(s, b, idx, n, REC_DELETE, false);
    if (k > 0 && !wave_apply_kind(s, b, k, REC_DELETE, err))
        return false;
    k = wave_pick(s, b, idx, n, REC_UPDATE, false);
    if (k > 0 && !wave_apply_kind(s, b, k, REC_UPDATE, err))
        return false;
    k = wave_pick(s, b, idx, n, REC_UPDATE, true); /* key changes: one by one */
    if (k > 0 && !sink_apply_rows(s, b, s->list, k, err))
        return false;
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (b->rows[idx[i]].outcome == ROW_PENDING && b->rows[idx[i]].op == REC_INSERT)
            s->scratch[k++] = &b->rows[idx[i]];
    if (k > 0 && !sink_insert_rounds(s, b, k, &run_dup, err))
        return false;
    *ndup += run_dup;
    return true;
}

/*
 * sink_write_waves: rows [from, to) (no truncate among them) as waves
 * (sink_waves.h), each set-wise, under one savepoint.  When a wave fails in
 * a way that may be a row's, everything since the savepoint is rolled back
 * and the rows are written again in reading order (sink_write_runs), which
 * isolates the row.
 */
static bool
sink_write_waves(Sink *s, Batch *b, size_t from, size_t to, size_t *ndup, Err *err)
{
    Err wave_err = {0};
    int pid_before = s->set_pid;
    size_t nwaves = waves_compute(&s->waves, b->rows, from, to);
    const size_t *start = s->waves.start;
    bool ok = true;

    if (nwaves == 0)
        return true;
    if (!sink_exec(s, "SAVEPOINT v7fill_waves", err))
        return false;
    s->strict = true;
    for (size_t w = 0; ok && w < nwaves; w++)
        ok = sink_apply_wave(s, b, s->waves.order + start[w], start[w + 1] - start[w], ndup,
                             &wave_err);
    s->strict = false;
    if (ok)
    {
        s->refused_run = 0;
        return sink_exec(s, "RELEASE SAVEPOINT v7fill_waves", err);
    }
    if (is_fatal_error(&wave_err))
    {
        *err = wave_err;
        return false;
    }
    if (!sink_rollback_to(s, "v7fill_waves", err))
        return false;
    if (s->set_pid != pid_before)
        s->set_pid = 0; /* the temp table was made since the savepoint: gone */
    sink_reset_outcomes(b, from, to);
    s->stats.wave_replays++;
    log_debug("%s: %zu rows in %zu waves refused (%s%s%s); applying them in reading order",
              s->cfg.target_q, s->waves.nrows, nwaves, wave_err.sqlstate,
              wave_err.sqlstate[0] ? ": " : "", wave_err.msg);
    return sink_write_runs(s, b, from, to, ndup, err);
}

bool
sink_write(Sink *s, Batch *b, SinkHook before_commit, void *ctx, Err *err)
{
    uint64_t conflicts_before = s->stats.conflicts;
    size_t ndup = 0;
    size_t nexpired = 0;
    bool ok;
    bool committing = false;

    b->commit_doubt = false;
    s->refused_run = 0;
    sink_reserve_scratch(s, b->nrows);
    if (b->nchanges > 0)
        b->by_hash_n = 0; /* runs sort their own rows */
    ok = b->txn_continues || sink_exec(s, "BEGIN", err);
    if (ok)
    {
        /* before the writes: the lookup as the batch found it */
        nexpired = sink_probe_expired(s, b, err);
        ok = nexpired != SIZE_MAX;
    }
    if (ok && b->nchanges == 0)
        ok = sink_write_runs(s, b, 0, b->nrows, &ndup, err); /* one run of inserts */
    /* With row operations: waves between truncates, each truncate alone. */
    for (size_t from = 0; ok && b->nchanges > 0 && from < b->nrows;)
    {
        size_t t = from;

        while (t < b->nrows && b->rows[t].op != REC_TRUNCATE)
            t++;
        ok = sink_write_waves(s, b, from, t, &ndup, err) &&
             (t == b->nrows || sink_apply_change(s, b, &b->rows[t], err));
        from = t + 1;
    }
    if (ok)
        sink_settle_expired(s, b, nexpired);
    if (ok && before_commit)
        ok = before_commit(ctx, b, err);
    if (ok && !b->txn_piece)
    {
        committing = true;
        ok = sink_exec(s, "COMMIT", err);
    }
    if (!ok)
    {
        /* The COMMIT went and its answer was lost with the connection: the
         * transaction may have committed, with these outcomes. */
        b->commit_doubt = committing && (pg_is_broken(s->conn) || pg_err_is_connection(err));
        sink_rollback(s);
        if (!b->commit_doubt)
            sink_reset_outcomes(b, 0, b->nrows);
        return false;
    }
    /* Probe first next time only while duplicates keep showing up: a fresh import
     * pays nothing, a re-import of the same file writes nothing. */
    s->probe_first = ndup > 0 || s->stats.conflicts > conflicts_before;
    return true;
}

void
sink_rollback(Sink *s)
{
    pg_rollback_quietly(s->conn);
    s->set_pid = 0; /* a temp table made in this transaction is gone */
}

void
sink_forget_outcomes(Batch *b)
{
    sink_reset_outcomes(b, 0, b->nrows);
    b->commit_doubt = false;
}

bool
sink_probe_only(Sink *s, Batch *b, Err *err)
{
    size_t n;

    sink_reserve_scratch(s, b->nrows);
    n = sink_collect_pending(s, b, 0, b->nrows);
    size_t ndup;
    /* expired rows: expired_found when the lookup holds their references */
    return sink_probe(s, s->scratch, n, &ndup, err) && sink_probe_expired(s, b, err) != SIZE_MAX;
}
