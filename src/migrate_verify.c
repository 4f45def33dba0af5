/*
 * migrate_verify.c: the checks of `v7fill migrate --verify` (see
 * migrate_verify.h).  Only reads.
 *
 * The row-by-row comparison walks the source's keys in ranges [lo, hi) of
 * range_keys keys (the boundaries found on the key's index first); the map
 * and the target are reached through the map's primary key (legacy_id) and
 * the target's (id), so no statement reads more than a range of rows.
 */
#include "v7fill/migrate_verify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "v7fill/citus.h"
#include "v7fill/interrupt.h"
#include "v7fill/mem.h"
#include "v7fill/textwidth.h"

#define KEY_MIN_TEXT "-9223372036854775808"

/* The first keys of one kind of difference, and how many there were. */
typedef struct Keys
{
    uint64_t n;       /* rows */
    size_t listed;    /* distinct keys in key[] */
    bool more;        /* more keys than listed */
    char key[VERIFY_DETAIL_KEYS][48];
} Keys;

typedef struct Ctx
{
    PgConn *src;
    PgConn *dst;
    bool same;                /* one connection: compare in the server */
    bool dist;                /* the target is a Citus distributed table (and so its map) */
    int64_t key_min, key_max; /* the key type's range */
    const MigrateSpec *spec;
    size_t range_keys;
    VerifyReport *rep;
    char table[130];          /* the parent's checks are named after the target */
    char relation[130];       /* schema.table of the source, as the quarantine names it */
    char *S, *T, *M, *K, *TC; /* source, target, map, key, time column (quoted) */
    Buf srow, trow;           /* ROW(s."a", ...) and ROW(t."a", ...): the non-key columns */
    int64_t *bounds;          /* ranges [b0, b1 - 1], ... [bn-1, INT64_MAX] */
    size_t nbounds;
    int64_t *qkeys;           /* keys the quarantine names that the source still has */
    size_t nqkeys;
    Buf qarray;               /* the same as an array literal "{1,2}" */
    uint64_t q_unidentified;  /* quarantined rows that name no key (the copy's lines) */
    VerifyCheck rejected;     /* the "rejected" check, reported after "rows" */
    uint64_t source_rows;     /* the source's row count (the "rows" check) */
    int64_t *hi;              /* a re-check: range i is [bounds[i], hi[i]] */
} Ctx;

/* ---- the report -------------------------------------------------------------------------- */

static VerifyCheck *
add_check(Ctx *x, const char *table, const char *check)
{
    VerifyReport *r = x->rep;
    VerifyCheck *c;

    r->checks = xrealloc(r->checks, (r->n + 1) * sizeof *r->checks);
    c = &r->checks[r->n++];
    memset(c, 0, sizeof *c);
    (void) snprintf(c->table, sizeof c->table, "%s", table);
    (void) snprintf(c->check, sizeof c->check, "%s", check);
    c->ok = true;
    return c;
}

static void detail_add(VerifyCheck *c, const char *fmt, ...) V7FILL_PRINTF(2, 3);

/* Append to the detail, "; " between parts (truncated at its size). */
static void
detail_add(VerifyCheck *c, const char *fmt, ...)
{
    size_t len = strlen(c->detail);
    va_list ap;

    if (len && len + 2 < sizeof c->detail)
    {
        memcpy(c->detail + len, "; ", 3);
        len += 2;
    }
    if (len + 1 >= sizeof c->detail)
        return;
    va_start(ap, fmt);
    (void) vsnprintf(c->detail + len, sizeof c->detail - len, fmt, ap);
    va_end(ap);
}

/* Count one more; list the key unless it is the last one listed (rows come
 * ordered by key: a key with several rows is named once). */
static void
keys_add(Keys *k, const char *key)
{
    k->n++;
    if (k->listed && strcmp(k->key[k->listed - 1], key) == 0)
        return;
    if (k->listed < VERIFY_DETAIL_KEYS)
        (void) snprintf(k->key[k->listed++], sizeof k->key[0], "%s", key);
    else
        k->more = true;
}

/* "<what> N (legacy keys a, b, c, ...)"; nothing when there are none. */
static void
keys_detail(VerifyCheck *c, const char *what, const char *noun, const Keys *k)
{
    char list[VERIFY_DETAIL_KEYS * 50] = "";
    size_t len = 0;

    if (k->n == 0)
        return;
    for (size_t i = 0; i < k->listed; i++)
        len += (size_t) snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", k->key[i]);
    detail_add(c, "%s %" PRIu64 " (%s %s%s)", what, k->n, noun, list, k->more ? ", ..." : "");
}

/* ---- small query helpers ------------------------------------------------------------------- */

static bool
query(PgConn *c, const char *what, const char *sql, int n, const char *const *params,
      PGresult **res, Err *err)
{
    if (pg_query(c, sql, n, params, res, err))
        return true;
    err_prefix(err, "verify: %s", what);
    return false;
}

static bool
query_u64(PgConn *c, const char *what, const char *sql, int n, const char *const *params,
          uint64_t *out, Err *err)
{
    PGresult *res;

    if (!query(c, what, sql, n, params, &res, err))
        return false;
    *out = PQntuples(res) ? strtoull(PQgetvalue(res, 0, 0), NULL, 10) : 0;
    PQclear(res);
    return true;
}

/* A check over the target listing "legacy key, count(*) OVER ()" of its
 * first offenders: *n the count, keys the first of them. */
static bool
query_keys(PgConn *c, const char *what, const char *sql, int n, const char *const *params,
           Keys *keys, Err *err)
{
    PGresult *res;

    if (!query(c, what, sql, n, params, &res, err))
        return false;
    memset(keys, 0, sizeof *keys);
    for (int i = 0; i < PQntuples(res); i++)
        keys_add(keys, PQgetisnull(res, i, 0) ? "NULL" : PQgetvalue(res, i, 0));
    if (PQntuples(res))
        keys->n = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
    keys->more = keys->n > keys->listed;
    PQclear(res);
    return true;
}

static bool
count_rows(PgConn *c, const char *qualified, uint64_t *out, Err *err)
{
    char *sql = xasprintf("SELECT count(*) FROM %s", qualified);
    bool ok = query_u64(c, "counting rows", sql, 0, NULL, out, err);

    free(sql);
    return ok;
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a;
    int64_t y = *(const int64_t *) b;

    return (x > y) - (x < y);
}

static bool
quarantined(const Ctx *x, const char *key)
{
    int64_t k = strtoll(key, NULL, 10);

    return x->nqkeys && bsearch(&k, x->qkeys, x->nqkeys, sizeof k, cmp_i64) != NULL;
}

/* ---- setup: names, columns, ranges, the quarantine ---------------------------------------- */

/* Does `table` (quoted, qualified) exist on c?  err names it when not. */
static bool
table_exists(PgConn *c, const char *side, const char *schema, const char *name, Err *err)
{
    char qual[140];
    const char *params[1] = {qual};
    PGresult *res;
    bool found;
    char *q = pg_qualified(c, schema, name);

    (void) snprintf(qual, sizeof qual, "%s", q);
    free(q);
    if (!query(c, "looking up a table", "SELECT to_regclass($1) IS NOT NULL", 1, params, &res, err))
        return false;
    found = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    if (!found)
        return err_set(err, EC_CONFIG, "verify: the %s table %s.%s does not exist", side, schema,
                       name);
    return true;
}

/* The columns of a table in order (attnum > 0, not dropped); caller PQclears. */
static bool
columns_of(PgConn *c, const char *qualified, PGresult **res, Err *err)
{
    const char *params[1] = {qualified};

    return query(c, "reading the columns",
                 "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                 "WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped "
                 "ORDER BY a.attnum",
                 1, params, res, err);
}

static int
column_index(const PGresult *res, const char *name)
{
    for (int i = 0; i < PQntuples(res); i++)
        if (strcmp(PQgetvalue(res, i, 0), name) == 0)
            return i;
    return -1;
}

/* srow/trow from the source's non-key columns the target also has; a
 * column the target lacks or types differently is a "columns" mismatch. */
static bool
load_columns(Ctx *x, Err *err)
{
    PGresult *sc = NULL;
    PGresult *tc = NULL;
    Keys missing = {0};
    Keys retyped = {0};
    size_t n = 0;
    bool ok = false;

    if (!columns_of(x->src, x->S, &sc, err) || !columns_of(x->dst, x->T, &tc, err))
        goto out;
    if (column_index(sc, x->spec->key) < 0)
    {
        err_set(err, EC_CONFIG, "verify: the source table %s has no column %s", x->S,
                x->spec->key);
        goto out;
    }
    if (column_index(tc, "legacy_id") < 0 || column_index(tc, "id") < 0 ||
        column_index(tc, x->spec->time_column) < 0)
    {
        err_set(err, EC_CONFIG, "verify: the target table %s lacks legacy_id, id or %s",
                x->table, x->spec->time_column);
        goto out;
    }
    buf_puts(&x->srow, "ROW(");
    buf_puts(&x->trow, "ROW(");
    for (int i = 0; i < PQntuples(sc); i++)
    {
        const char *name = PQgetvalue(sc, i, 0);
        int t = column_index(tc, name);
        char *qs;

        if (strcmp(name, x->spec->key) == 0)
            continue;
        if (t < 0)
        {
            keys_add(&missing, name);
            continue;
        }
        if (strcmp(PQgetvalue(sc, i, 1), PQgetvalue(tc, t, 1)) != 0)
            keys_add(&retyped, name);
        qs = pg_ident(x->src, name);
        buf_printf(&x->srow, "%ss.%s", n ? ", " : "", qs);
        buf_printf(&x->trow, "%st.%s", n ? ", " : "", qs);
        free(qs);
        n++;
    }
    buf_putc(&x->srow, ')');
    buf_putc(&x->trow, ')');
    if (missing.n || retyped.n)
    {
        VerifyCheck *c = add_check(x, x->table, "columns");

        c->source = (uint64_t) PQntuples(sc) - 1;
        c->target = n;
        c->ok = false;
        keys_detail(c, "not in the target:", "columns", &missing);
        keys_detail(c, "another type in the target:", "columns", &retyped);
    }
    ok = true;
out:
    PQclear(sc);
    PQclear(tc);
    return ok;
}

/* The range boundaries: after every range_keys-th source key. */
static bool
load_bounds(Ctx *x, Err *err)
{
    char *sql = xasprintf("SELECT s.%s FROM %s s WHERE s.%s > $1::bigint ORDER BY s.%s "
                          "OFFSET $2::bigint - 1 LIMIT 1",
                          x->K, x->S, x->K, x->K);
    char step[24];
    char last[24];
    bool ok = true;

    (void) snprintf(step, sizeof step, "%zu", x->range_keys);
    (void) snprintf(last, sizeof last, "%" PRId64, INT64_MIN);
    x->bounds = xmalloc(sizeof *x->bounds);
    x->bounds[x->nbounds++] = INT64_MIN;
    for (;;)
    {
        const char *params[2] = {last, step};
        PGresult *res;
        int64_t key;

        if (!(ok = query(x->src, "finding the key ranges", sql, 2, params, &res, err)))
            break;
        if (PQntuples(res) == 0)
        {
            PQclear(res);
            break;
        }
        key = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        (void) snprintf(last, sizeof last, "%s", PQgetvalue(res, 0, 0));
        PQclear(res);
        if (key == INT64_MAX)
            break;
        x->bounds = xrealloc(x->bounds, (x->nbounds + 1) * sizeof *x->bounds);
        x->bounds[x->nbounds++] = key + 1;
    }
    free(sql);
    return ok;
}

/* Between two ranges: a SIGINT or SIGTERM stops the verify (it only reads). */
static bool
stop_requested(Err *err)
{
    if (interrupt_signal() == 0)
        return false;
    err_set(err, EC_INTERRUPTED, "verify interrupted by %s", interrupt_name());
    return true;
}

/* A statement run once per range, prepared once on its connection (SQL
 * PREPARE name (bigint, bigint), $1 and $2 the range's first and last key):
 * planned for all ranges rather than for each (a target of many partitions
 * costs its planning every time).  Always closed with range_close. */
typedef struct RangeStmt
{
    PgConn *c;
    char name[48];
    bool prepared;
} RangeStmt;

#define RANGE_WHERE(col) col " BETWEEN $1 AND $2"

static bool
range_prepare(RangeStmt *st, PgConn *c, const char *name, const char *sql, Err *err)
{
    char *prep = xasprintf("PREPARE %s (bigint, bigint) AS %s", name, sql);
    bool ok = pg_exec(c, prep, err);

    free(prep);
    st->c = c;
    (void) snprintf(st->name, sizeof st->name, "%s", name);
    st->prepared = ok;
    if (!ok)
        err_prefix(err, "verify: preparing %s", name);
    return ok;
}

/* Range i's rows (stops first on SIGINT / SIGTERM); caller PQclears. */
static bool
range_exec(const Ctx *x, const RangeStmt *st, size_t i, const char *what, PGresult **res,
           Err *err)
{
    char sql[128];
    int64_t lo = x->bounds[i];
    int64_t hi = x->hi ? x->hi[i] : i + 1 < x->nbounds ? x->bounds[i + 1] - 1 : INT64_MAX;

    if (stop_requested(err))
        return false;
    /* Within the key's type: Citus prunes a distributed map's shards by the bounds
     * converted to its legacy_id's type (an integer's range cannot hold INT64_MIN). */
    lo = lo < x->key_min ? x->key_min : lo;
    hi = hi > x->key_max ? x->key_max : hi;
    if (lo > hi)
    {
        lo = 1; /* an empty range */
        hi = 0;
    }
    (void) snprintf(sql, sizeof sql, "EXECUTE %s (%" PRId64 ", %" PRId64 ")", st->name, lo, hi);
    return query(st->c, what, sql, 0, NULL, res, err);
}

static void
range_close(RangeStmt *st)
{
    Err ignored = {0};
    char sql[80];

    if (!st->prepared)
        return;
    st->prepared = false;
    (void) snprintf(sql, sizeof sql, "DEALLOCATE %s", st->name);
    if (!pg_exec(st->c, sql, &ignored))
        return; /* a broken connection: nothing left to free */
}

/* Citus: the map's rows that cond selects (m) and their target rows (j: the map's legacy_id,
 * the target row's legacy_id tl and, with hash, its row hash h), each materialized on the
 * coordinator.  The distributed map (on legacy_id) and target (on id) are not colocated: Citus
 * cannot join them in one statement; m joined with the target runs on the shards (m sent to
 * each), the rest of the statement on the coordinator over the two results. */
static char *
dist_with(const Ctx *x, const char *cond, bool hash)
{
    char *h = hash ? xasprintf("md5(%s::text)", x->trow.data) : xstrdup("NULL::text");
    char *sql = xasprintf("WITH m AS MATERIALIZED (SELECT legacy_id, id FROM %s WHERE %s), "
                          "j AS MATERIALIZED (SELECT m.legacy_id, t.legacy_id AS tl, %s AS h "
                          "FROM m JOIN %s t ON t.id = m.id) ",
                          x->M, cond, h, x->T);

    free(h);
    return sql;
}

/* The quarantine of the slot: keys it names (still in the source, not in
 * the target) and the rows that name none; the "rejected" check lists them. */
static bool
load_quarantine(Ctx *x, uint64_t *rejected, Err *err)
{
    const char *params[3] = {x->spec->slot, x->relation, x->spec->key};
    PGresult *res;
    uint64_t total = 0;
    VerifyCheck *c;
    char sql[1024];
    bool have;

    *rejected = 0;
    if (!query(x->dst, "looking up the quarantine",
               "SELECT to_regclass('v7fill.stream_quarantine') IS NOT NULL", 0, NULL, &res, err))
        return false;
    have = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    c = &x->rejected;
    (void) snprintf(c->table, sizeof c->table, "%s", x->table);
    (void) snprintf(c->check, sizeof c->check, "rejected");
    c->ok = true;
    buf_puts(&x->qarray, "{}");
    if (!have)
    {
        detail_add(c, "no quarantine (v7fill.stream_quarantine)");
        return true;
    }
    /* Rows quarantined are JSON objects naming the key (an older version's
     * copy kept its bare CSV line: "unidentified" below). */
    if (!query(x->dst, "reading the quarantine",
               "SELECT DISTINCT (row ->> $3)::bigint FROM v7fill.stream_quarantine WHERE slot = "
               "$1 AND relation = $2 AND jsonb_typeof(row) = 'object' AND row ->> $3 ~ "
               "'^-?[0-9]{1,18}$' ORDER BY 1",
               3, params, &res, err))
        return false;
    buf_reset(&x->qarray);
    buf_putc(&x->qarray, '{');
    for (int i = 0; i < PQntuples(res); i++)
        buf_printf(&x->qarray, "%s%s", i ? "," : "", PQgetvalue(res, i, 0));
    buf_putc(&x->qarray, '}');
    PQclear(res);
    /* Only the keys the source still has and the target lacks are rejected rows. */
    {
        const char *p1[1] = {x->qarray.data};
        char *w = x->dist ? dist_with(x, "legacy_id = ANY ($1::bigint[])", false) : NULL;
        char *csql;
        bool ok;

        (void) snprintf(sql, sizeof sql,
                        "SELECT k FROM unnest($1::bigint[]) k WHERE EXISTS (SELECT 1 FROM %s s "
                        "WHERE s.%s = k) ORDER BY k",
                        x->S, x->K);
        if (!query(x->src, "reading the quarantine", sql, 1, p1, &res, err))
        {
            free(w);
            return false;
        }
        buf_reset(&x->qarray);
        buf_putc(&x->qarray, '{');
        x->qkeys = xmalloc(((size_t) PQntuples(res) + 1) * sizeof *x->qkeys);
        for (int i = 0; i < PQntuples(res); i++)
        {
            buf_printf(&x->qarray, "%s%s", i ? "," : "", PQgetvalue(res, i, 0));
            x->qkeys[x->nqkeys++] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        }
        buf_putc(&x->qarray, '}');
        PQclear(res);
        if (w)
            csql = xasprintf("%sSELECT count(*) FROM unnest($1::bigint[]) k WHERE NOT EXISTS "
                             "(SELECT 1 FROM j WHERE j.legacy_id = k AND j.tl = k)",
                             w);
        else
            csql = xasprintf("SELECT count(*) FROM unnest($1::bigint[]) k WHERE NOT EXISTS "
                             "(SELECT 1 FROM %s m JOIN %s t ON t.id = m.id AND t.legacy_id = "
                             "m.legacy_id WHERE m.legacy_id = k)",
                             x->M, x->T);
        ok = query_u64(x->dst, "reading the quarantine", csql, 1, p1, rejected, err);
        free(csql);
        free(w);
        if (!ok)
            return false;
    }
    if (!query(x->dst, "reading the quarantine",
               "SELECT count(*), count(*) FILTER (WHERE jsonb_typeof(row) <> 'object' OR NOT "
               "coalesce(row ->> $3 ~ '^-?[0-9]{1,18}$', false)) FROM "
               "v7fill.stream_quarantine WHERE slot = $1 AND relation = $2",
               3, params, &res, err))
        return false;
    total = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    x->q_unidentified = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    *rejected += x->q_unidentified;
    c->source = total;
    c->target = 0;
    if (total == 0)
        return true;
    detail_add(c, "%" PRIu64 " rows in v7fill.stream_quarantine (slot %s)", total, x->spec->slot);
    if (!query(x->dst, "reading the quarantine",
               "SELECT coalesce(CASE WHEN jsonb_typeof(row) = 'object' THEN 'key ' || (row ->> "
               "$3) END, left(row #>> '{}', 40)), left(reason, 80) FROM v7fill.stream_quarantine "
               "WHERE slot = $1 AND relation = $2 ORDER BY id LIMIT 5",
               3, params, &res, err))
        return false;
    for (int i = 0; i < PQntuples(res); i++)
        detail_add(c, "%s: %s", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
    PQclear(res);
    return true;
}

/* ---- rows and values -------------------------------------------------------------------- */

static bool
check_rows(Ctx *x, uint64_t rejected, Err *err)
{
    VerifyCheck *c = add_check(x, x->table, "rows");

    if (!count_rows(x->src, x->S, &c->source, err) || !count_rows(x->dst, x->T, &c->target, err))
        return false;
    x->source_rows = c->source;
    c->ok = c->source == c->target + rejected;
    detail_add(c, "%" PRIu64 " rejected with a reason", rejected);
    if (!c->ok)
        detail_add(c, "source - target - rejected = %" PRId64,
                   (int64_t) (c->source - c->target - rejected));
    *add_check(x, x->table, "rejected") = x->rejected;
    return true;
}

/* Differences found in the value ranges. */
typedef struct ValueDiffs
{
    Keys changed, missing, extra, excused;
    uint64_t unexcused_missing;
} ValueDiffs;

/* Every differing key, for a settling verify (migrate_verify.h). */
static void
diff_key(const Ctx *x, const char *key)
{
    VerifyReport *r = x->rep;

    if (r->ndiff_keys % 256 == 0)
        r->diff_keys = xrealloc(r->diff_keys, (r->ndiff_keys + 256) * sizeof *r->diff_keys);
    r->diff_keys[r->ndiff_keys++] = strtoll(key, NULL, 10);
}

/* One differing key: kind 'c'hanged, 'm'issing (source only), 'e'xtra. */
static void
value_diff(const Ctx *x, ValueDiffs *d, char kind, const char *key)
{
    if (!quarantined(x, key))
        diff_key(x, key);
    if (kind == 'e')
        keys_add(&d->extra, key);
    else if (quarantined(x, key))
        keys_add(&d->excused, key);
    else if (kind == 'c')
        keys_add(&d->changed, key);
    else
    {
        keys_add(&d->missing, key);
        d->unexcused_missing++;
    }
}

/* The per-range row hashes of each side, as sub-selects (k, h) over
 * RANGE_WHERE: the target's h is "no target row" or "legacy_id N" when the
 * map's id leads nowhere or to another row.  The target is reached row by row
 * through LATERAL ... LIMIT 1 (kept from being flattened into a join): an
 * index probe of the one partition the id falls in, where a plain join lets
 * the planner hash the whole target for every range. */
static char *
source_side(const Ctx *x)
{
    return xasprintf("SELECT s.%s AS k, md5(%s::text) AS h FROM %s s WHERE s.%s BETWEEN $1 AND "
                     "$2",
                     x->K, x->srow.data, x->S, x->K);
}

static char *
target_side(const Ctx *x)
{
    if (x->dist)
        return xstrdup("SELECT m.legacy_id AS k, CASE WHEN j.legacy_id IS NULL THEN 'no target "
                       "row' WHEN j.tl IS DISTINCT FROM m.legacy_id THEN 'legacy_id ' || "
                       "coalesce(j.tl::text, 'NULL') ELSE j.h END AS h FROM m LEFT JOIN j ON "
                       "j.legacy_id = m.legacy_id");
    return xasprintf("SELECT m.legacy_id AS k, CASE WHEN t.id IS NULL THEN 'no target row' WHEN "
                     "t.legacy_id IS DISTINCT FROM m.legacy_id THEN 'legacy_id ' || "
                     "coalesce(t.legacy_id::text, 'NULL') ELSE t.h END AS h FROM %s m LEFT JOIN "
                     "LATERAL (SELECT t.id, t.legacy_id, md5(%s::text) AS h FROM %s t WHERE t.id = "
                     "m.id LIMIT 1) t ON true WHERE " RANGE_WHERE("m.legacy_id"),
                     x->M, x->trow.data, x->T);
}

/* One database: each range one join, the differing keys back. */
static bool
values_same(Ctx *x, ValueDiffs *d, Err *err)
{
    char *ss = source_side(x);
    char *ts = target_side(x);
    char *sql = xasprintf("SELECT coalesce(s.k, t.k)::text, CASE WHEN s.k IS NULL THEN 'e' WHEN "
                          "t.k IS NULL OR t.h = 'no target row' THEN 'm' ELSE 'c' END FROM (%s) "
                          "s FULL JOIN (%s) t ON s.k = t.k WHERE s.h IS DISTINCT FROM t.h ORDER "
                          "BY coalesce(s.k, t.k)",
                          ss, ts);
    RangeStmt st = {0};
    bool ok = range_prepare(&st, x->src, "v7fill_verify_values", sql, err);

    for (size_t i = 0; ok && i < x->nbounds; i++)
    {
        PGresult *res;

        if (!(ok = range_exec(x, &st, i, "comparing rows", &res, err)))
            break;
        for (int r = 0; r < PQntuples(res); r++)
            value_diff(x, d, PQgetvalue(res, r, 1)[0], PQgetvalue(res, r, 0));
        PQclear(res);
    }
    range_close(&st);
    free(sql);
    free(ss);
    free(ts);
    return ok;
}

/* Range i of two statements (the source's, the target's); both results or none. */
static bool
range_pair(const Ctx *x, const RangeStmt *a, const RangeStmt *b, size_t i, const char *what,
           PGresult **ra, PGresult **rb, Err *err)
{
    if (!range_exec(x, a, i, what, ra, err))
        return false;
    if (range_exec(x, b, i, what, rb, err))
        return true;
    PQclear(*ra);
    return false;
}

/* Merge a range's (key, hash) rows of the source (a) and the target (b). */
static void
values_merge(const Ctx *x, PGresult *a, PGresult *b, ValueDiffs *d)
{
    int p = 0;
    int q = 0;

    while (p < PQntuples(a) || q < PQntuples(b))
    {
        int64_t ka = p < PQntuples(a) ? strtoll(PQgetvalue(a, p, 0), NULL, 10) : INT64_MAX;
        int64_t kb = q < PQntuples(b) ? strtoll(PQgetvalue(b, q, 0), NULL, 10) : INT64_MAX;

        if (p < PQntuples(a) && (q >= PQntuples(b) || ka < kb))
            value_diff(x, d, 'm', PQgetvalue(a, p++, 0));
        else if (p >= PQntuples(a) || kb < ka)
            value_diff(x, d, 'e', PQgetvalue(b, q++, 0));
        else
        {
            if (strcmp(PQgetvalue(b, q, 1), "no target row") == 0)
                value_diff(x, d, 'm', PQgetvalue(a, p, 0));
            else if (strcmp(PQgetvalue(a, p, 1), PQgetvalue(b, q, 1)) != 0)
                value_diff(x, d, 'c', PQgetvalue(a, p, 0));
            p++;
            q++;
        }
    }
}

/* Two databases: a range's aggregate hash on each side; a range that
 * differs is fetched from both, ordered by key, and merged here. */
static bool
values_two(Ctx *x, ValueDiffs *d, Err *err)
{
    char *ss = source_side(x);
    char *ts = target_side(x);
    char *tw = x->dist ? dist_with(x, RANGE_WHERE("legacy_id"), true) : xstrdup("");
    char *sagg = xasprintf("SELECT count(*), md5(coalesce(string_agg(k::text || ':' || h, ',' "
                           "ORDER BY k), '')) FROM (%s) x", ss);
    char *tagg = xasprintf("%sSELECT count(*), md5(coalesce(string_agg(k::text || ':' || h, ',' "
                           "ORDER BY k), '')) FROM (%s) x", tw, ts);
    char *srows = xasprintf("SELECT k::text, h FROM (%s) x ORDER BY k", ss);
    char *trows = xasprintf("%sSELECT k::text, h FROM (%s) x ORDER BY k", tw, ts);
    RangeStmt sa = {0};
    RangeStmt ta = {0};
    RangeStmt sr = {0};
    RangeStmt tr = {0};
    bool ok = range_prepare(&sa, x->src, "v7fill_verify_source_hash", sagg, err) &&
              range_prepare(&ta, x->dst, "v7fill_verify_target_hash", tagg, err) &&
              range_prepare(&sr, x->src, "v7fill_verify_source_rows", srows, err) &&
              range_prepare(&tr, x->dst, "v7fill_verify_target_rows", trows, err);

    for (size_t i = 0; ok && i < x->nbounds; i++)
    {
        PGresult *a;
        PGresult *b;
        bool same;

        if (!(ok = range_pair(x, &sa, &ta, i, "hashing a range", &a, &b, err)))
            break;
        same = strcmp(PQgetvalue(a, 0, 0), PQgetvalue(b, 0, 0)) == 0 &&
               strcmp(PQgetvalue(a, 0, 1), PQgetvalue(b, 0, 1)) == 0;
        PQclear(a);
        PQclear(b);
        if (same)
            continue;
        if (!(ok = range_pair(x, &sr, &tr, i, "reading a range", &a, &b, err)))
            break;
        values_merge(x, a, b, d);
        PQclear(a);
        PQclear(b);
    }
    range_close(&sa);
    range_close(&ta);
    range_close(&sr);
    range_close(&tr);
    free(sagg);
    free(tagg);
    free(srows);
    free(trows);
    free(ss);
    free(ts);
    free(tw);
    return ok;
}

static bool
check_values(Ctx *x, Err *err)
{
    ValueDiffs d;
    VerifyCheck *c;

    memset(&d, 0, sizeof d);
    if (!(x->same ? values_same(x, &d, err) : values_two(x, &d, err)))
        return false;
    c = add_check(x, x->table, "values");
    /* Source: its rows compared; target: those whose target row is equal. */
    c->source = x->source_rows;
    c->target = x->source_rows - d.changed.n - d.missing.n - d.excused.n;
    c->ok = d.changed.n == 0 && d.extra.n == 0 && d.unexcused_missing <= x->q_unidentified;
    keys_detail(c, "changed", "legacy keys", &d.changed);
    keys_detail(c, "missing", "legacy keys", &d.missing);
    keys_detail(c, "not in the source", "legacy keys", &d.extra);
    keys_detail(c, "quarantined", "legacy keys", &d.excused);
    if (c->ok && d.missing.n)
        detail_add(c, "the missing rows are the quarantined lines of the copy");
    if (c->ok)
        detail_add(c, "every other non-key column equal (%zu ranges)", x->nbounds);
    return true;
}

/* ---- map and id times ----------------------------------------------------------------------- */

/* Citus: the (legacy_id, id) pairs of the map and of the target, each counted and hashed on
 * its shards (a sum of the server's 64-bit text hash: order free); equal when both agree. */
static bool
dist_map_same(Ctx *x, bool *same, Err *err)
{
#define PAIRS_SUM                                                                          \
    "SELECT count(*), coalesce(sum(hashtextextended(legacy_id::text || ',' || id::text, 0)), " \
    "0)::text FROM %s"
    char *ms = xasprintf(PAIRS_SUM, x->M);
    char *ts = xasprintf(PAIRS_SUM, x->T);
#undef PAIRS_SUM
    PGresult *a = NULL;
    PGresult *b = NULL;
    bool ok = query(x->dst, "checking the map", ms, 0, NULL, &a, err) &&
              query(x->dst, "checking the map", ts, 0, NULL, &b, err);

    if (ok)
        *same = strcmp(PQgetvalue(a, 0, 0), PQgetvalue(b, 0, 0)) == 0 &&
                strcmp(PQgetvalue(a, 0, 1), PQgetvalue(b, 0, 1)) == 0;
    PQclear(a);
    PQclear(b);
    free(ms);
    free(ts);
    return ok;
}

static bool
check_map(Ctx *x, Err *err)
{
    VerifyCheck *c = add_check(x, x->table, "map");
    Keys unmapped;
    Keys orphaned;
    char *sql;
    /* Citus cannot join the map and the target (not colocated): their pairs are compared
     * by hash on the shards, and only when they differ are both read to the coordinator
     * (materialized) to name the rows. */
    const char *T = x->dist ? "tt" : x->T;
    const char *M = x->dist ? "mm" : x->M;
    char *w;
    bool ok, same = false;

    if (!count_rows(x->dst, x->M, &c->source, err) || !count_rows(x->dst, x->T, &c->target, err))
        return false;
    if (x->dist)
    {
        if (!dist_map_same(x, &same, err))
            return false;
        if (same)
            return true;
    }
    w = x->dist ? xasprintf("WITH tt AS MATERIALIZED (SELECT legacy_id, id FROM %s), mm AS "
                            "MATERIALIZED (SELECT legacy_id, id FROM %s) ",
                            x->T, x->M)
                : xstrdup("");
    sql = xasprintf("%sSELECT t.legacy_id::text, count(*) OVER () FROM %s t WHERE NOT EXISTS "
                    "(SELECT 1 FROM %s m WHERE m.id = t.id AND m.legacy_id = t.legacy_id) ORDER "
                    "BY t.legacy_id LIMIT %d",
                    w, T, M, VERIFY_DETAIL_KEYS);
    ok = query_keys(x->dst, "checking the map", sql, 0, NULL, &unmapped, err);
    free(sql);
    if (!ok)
    {
        free(w);
        return false;
    }
    sql = xasprintf("%sSELECT m.legacy_id::text, count(*) OVER () FROM %s m WHERE NOT EXISTS "
                    "(SELECT 1 FROM %s t WHERE t.id = m.id AND t.legacy_id = m.legacy_id) ORDER "
                    "BY m.legacy_id LIMIT %d",
                    w, M, T, VERIFY_DETAIL_KEYS);
    free(w);
    ok = query_keys(x->dst, "checking the map", sql, 0, NULL, &orphaned, err);
    free(sql);
    if (!ok)
        return false;
    c->ok = unmapped.n == 0 && orphaned.n == 0;
    keys_detail(c, "target rows not in the map:", "legacy keys", &unmapped);
    keys_detail(c, "map rows without their target row:", "legacy keys", &orphaned);
    return true;
}

static bool
check_times(Ctx *x, Err *err)
{
    VerifyCheck *c = add_check(x, x->table, "id time");
    Keys off;
    char *sql;
    bool ok;

    if (!count_rows(x->dst, x->T, &c->source, err))
        return false;
    sql = xasprintf("SELECT t.legacy_id::text, count(*) OVER () FROM %s t WHERE "
                    "('x' || substr(replace(t.id::text, '-', ''), 1, 12))::bit(48)::bigint IS "
                    "DISTINCT FROM floor(extract(epoch FROM t.%s) * 1000)::bigint ORDER BY "
                    "t.legacy_id LIMIT %d",
                    x->T, x->TC, VERIFY_DETAIL_KEYS);
    ok = query_keys(x->dst, "checking the ids' times", sql, 0, NULL, &off, err);
    free(sql);
    if (!ok)
        return false;
    c->target = c->source - off.n;
    c->ok = off.n == 0;
    keys_detail(c, "id's milliseconds are not the time column's:", "legacy keys", &off);
    return true;
}

/* ---- children (expand mode) ----------------------------------------------------------- */

typedef struct Child
{
    char name[130];
    char *C, *FK, *FKU; /* child, key, <key>_uuid (quoted) */
    char *PK;           /* the row's identity: its primary key as text (an expression) */
} Child;

typedef struct ChildTally
{
    uint64_t keys, resolved, nulls, nulls_with_uuid;
    Keys orphans, wrong;
    Keys rejected; /* child rows of a parent rejected (quarantined, or its time NULL or before
                      1970): orphans by rejection, not a mismatch */
    uint64_t old_pairs, new_pairs, old_hash, new_hash; /* two databases: pairs hashed here */
} ChildTally;

/* The child's primary key as one text expression over c (its ctid when it has none). */
static bool
child_identity(Ctx *x, const MigrateChild *mc, Child *ch, Err *err)
{
    char *qual = pg_qualified(x->src, mc->schema, mc->table);
    const char *params[1] = {qual};
    PGresult *res;
    Buf b;

    if (!query(x->src, "reading the child's primary key",
               "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
               "AND a.attnum = ANY (i.indkey) WHERE i.indrelid = $1::regclass AND i.indisprimary "
               "ORDER BY array_position(i.indkey::int2[], a.attnum)",
               1, params, &res, err))
    {
        free(qual);
        return false;
    }
    free(qual);
    buf_init(&b);
    if (PQntuples(res) == 0)
        buf_puts(&b, "c.ctid::text");
    else
    {
        buf_puts(&b, "ROW(");
        for (int i = 0; i < PQntuples(res); i++)
        {
            char *q = pg_ident(x->src, PQgetvalue(res, i, 0));

            buf_printf(&b, "%sc.%s", i ? ", " : "", q);
            free(q);
        }
        buf_puts(&b, ")::text");
    }
    PQclear(res);
    ch->PK = b.data;
    return true;
}

static void
pair_add(uint64_t *count, uint64_t *hash, const char *pk, const char *key)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s\x1f%s", pk, key);

    (*count)++;
    *hash += XXH3_64bits(buf, n < 0 ? 0 : (size_t) n < sizeof buf ? (size_t) n : sizeof buf - 1);
}

/* One range of child rows (ordered by key) against the same range of the map. */
static void
child_merge(const Ctx *x, PGresult *cr, PGresult *mr, ChildTally *t)
{
    int m = 0;

    for (int r = 0; r < PQntuples(cr); r++)
    {
        const char *key = PQgetvalue(cr, r, 0);
        int64_t k = strtoll(key, NULL, 10);
        const char *uuid = PQgetisnull(cr, r, 1) ? NULL : PQgetvalue(cr, r, 1);
        const char *pk = PQgetvalue(cr, r, 2);
        bool parent = PQgetvalue(cr, r, 3)[0] == 't';
        bool rejected = parent && (PQgetvalue(cr, r, 4)[0] == 't' || quarantined(x, key));

        while (m < PQntuples(mr) && strtoll(PQgetvalue(mr, m, 0), NULL, 10) < k)
            m++;
        t->keys++;
        if (parent && !rejected)
            pair_add(&t->old_pairs, &t->old_hash, pk, key);
        if (m < PQntuples(mr) && strtoll(PQgetvalue(mr, m, 0), NULL, 10) == k)
        {
            bool target_row = PQgetvalue(mr, m, 2)[0] == 't';

            if (uuid && strcmp(uuid, PQgetvalue(mr, m, 1)) == 0)
            {
                t->resolved++;
                if (target_row)
                    pair_add(&t->new_pairs, &t->new_hash, pk, key);
            }
            else
            {
                keys_add(&t->wrong, key);
                diff_key(x, key);
                if (uuid) /* it leads to another parent, or none: not this pair */
                    pair_add(&t->new_pairs, &t->new_hash, pk, uuid);
            }
        }
        else
        {
            keys_add(rejected ? &t->rejected : &t->orphans, key);
            if (uuid)
            {
                keys_add(&t->wrong, key);
                diff_key(x, key);
                pair_add(&t->new_pairs, &t->new_hash, pk, uuid);
            }
        }
    }
}

static bool
child_keys(Ctx *x, const Child *ch, ChildTally *t, Err *err)
{
    char *csql = xasprintf("SELECT c.%s::text, c.%s::text, %s, p.k IS NOT NULL, coalesce(p.r, "
                           "false) FROM %s c LEFT JOIN LATERAL (SELECT p.%s AS k, (p.%s IS NULL "
                           "OR p.%s < 'epoch') AS r FROM %s p WHERE p.%s = c.%s LIMIT 1) p ON "
                           "true WHERE c.%s BETWEEN $1 AND $2 ORDER BY c.%s",
                           ch->FK, ch->FKU, ch->PK, ch->C, x->K, x->TC, x->TC, x->S, x->K, ch->FK,
                           ch->FK, ch->FK);
    char *w = x->dist ? dist_with(x, RANGE_WHERE("legacy_id"), false) : NULL;
    char *msql = w ? xasprintf("%sSELECT m.legacy_id::text, m.id::text, j.legacy_id IS NOT NULL "
                               "FROM m LEFT JOIN j ON j.legacy_id = m.legacy_id AND j.tl = "
                               "m.legacy_id ORDER BY m.legacy_id",
                               w)
                   : xasprintf("SELECT m.legacy_id::text, m.id::text, t.id IS NOT NULL FROM %s m "
                               "LEFT JOIN LATERAL (SELECT t.id FROM %s t WHERE t.id = m.id AND "
                               "t.legacy_id = m.legacy_id LIMIT 1) t ON true WHERE "
                               RANGE_WHERE("m.legacy_id") " ORDER BY m.legacy_id",
                               x->M, x->T);
    char *nsql = xasprintf("SELECT count(*), count(*) FILTER (WHERE c.%s IS NOT NULL) FROM %s c "
                           "WHERE c.%s IS NULL",
                           ch->FKU, ch->C, ch->FK);
    RangeStmt cs = {0};
    RangeStmt ms = {0};
    bool ok = range_prepare(&cs, x->src, "v7fill_verify_child", csql, err) &&
              range_prepare(&ms, x->dst, "v7fill_verify_map", msql, err);
    PGresult *res;

    for (size_t i = 0; ok && i < x->nbounds; i++)
    {
        PGresult *cr;
        PGresult *mr;

        if (!(ok = range_pair(x, &cs, &ms, i, "reading the child's keys and the map", &cr, &mr,
                              err)))
            break;
        child_merge(x, cr, mr, t);
        PQclear(cr);
        PQclear(mr);
    }
    range_close(&cs);
    range_close(&ms);
    if (ok && (ok = query(x->src, "counting the child's NULL keys", nsql, 0, NULL, &res, err)))
    {
        t->nulls = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
        t->nulls_with_uuid = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
        PQclear(res);
    }
    free(csql);
    free(msql);
    free(nsql);
    free(w);
    return ok;
}

/* One database: the two joins themselves, counted and hashed in the server. */
static bool
child_pairs_same(Ctx *x, const Child *ch, ChildTally *t, Err *err)
{
    const char *params[1] = {x->qarray.data};
    /* Pairs hashed with the server's own 64-bit text hash (both joins run in
     * the one server), summed: independent of the order the rows come in. */
    char *old_sql = xasprintf("SELECT count(*), coalesce(sum(hashtextextended(%s || ',' || "
                              "p.%s::text, 0)), 0)::text FROM %s c JOIN %s p ON p.%s = c.%s "
                              "WHERE p.%s <> ALL ($1::bigint[]) AND p.%s >= 'epoch'",
                              ch->PK, x->K, ch->C, x->S, x->K, ch->FK, x->K, x->TC);
    char *new_sql = xasprintf("SELECT count(*), coalesce(sum(hashtextextended(%s || ',' || "
                              "t.legacy_id::text, 0)), 0)::text FROM %s c JOIN %s t ON t.id = "
                              "c.%s",
                              ch->PK, ch->C, x->T, ch->FKU);
    PGresult *a = NULL;
    PGresult *b = NULL;
    bool ok;

    ok = query(x->src, "joining the child through its old key", old_sql, 1, params, &a, err) &&
         query(x->src, "joining the child through its uuid", new_sql, 0, NULL, &b, err);
    if (ok)
    {
        t->old_pairs = strtoull(PQgetvalue(a, 0, 0), NULL, 10);
        t->new_pairs = strtoull(PQgetvalue(b, 0, 0), NULL, 10);
        /* The sums are numeric; equal text, equal hash.  Folded to 64 bits for the tally. */
        t->old_hash = XXH3_64bits(PQgetvalue(a, 0, 1), strlen(PQgetvalue(a, 0, 1)));
        t->new_hash = XXH3_64bits(PQgetvalue(b, 0, 1), strlen(PQgetvalue(b, 0, 1)));
    }
    PQclear(a);
    PQclear(b);
    free(old_sql);
    free(new_sql);
    return ok;
}

static bool
check_child(Ctx *x, const MigrateChild *mc, Err *err)
{
    Child ch;
    ChildTally t;
    VerifyCheck *c;
    char fku[80];
    bool ok = false;

    memset(&ch, 0, sizeof ch);
    memset(&t, 0, sizeof t);
    (void) snprintf(ch.name, sizeof ch.name, "%s.%s", mc->schema, mc->table);
    if (x->spec->child_mode != MIGRATE_CHILD_EXPAND)
    {
        c = add_check(x, ch.name, "child keys");
        detail_add(c, "not checked: child mode migrate");
        return true;
    }
    (void) snprintf(fku, sizeof fku, "%s_uuid", mc->fk_column);
    if (!table_exists(x->src, "child", mc->schema, mc->table, err))
        return false;
    ch.C = pg_qualified(x->src, mc->schema, mc->table);
    {
        PGresult *cols;
        bool have;

        if (!columns_of(x->src, ch.C, &cols, err))
            goto out;
        have = column_index(cols, mc->fk_column) >= 0 && column_index(cols, fku) >= 0;
        PQclear(cols);
        if (!have)
        {
            err_set(err, EC_CONFIG, "verify: the child %s has no column %s or %s", ch.name,
                    mc->fk_column, fku);
            goto out;
        }
    }
    ch.FK = pg_ident(x->src, mc->fk_column);
    ch.FKU = pg_ident(x->src, fku);
    if (!child_identity(x, mc, &ch, err) || !child_keys(x, &ch, &t, err) ||
        (x->same && !child_pairs_same(x, &ch, &t, err)))
        goto out;

    c = add_check(x, ch.name, "child keys");
    c->source = t.keys;
    c->target = t.resolved;
    c->ok = t.wrong.n == 0;
    if (c->ok)
        detail_add(c, "every key with a parent has its %s", fku);
    keys_detail(c, "wrong or missing uuid:", "keys", &t.wrong);

    c = add_check(x, ch.name, "orphans");
    c->source = t.orphans.n;
    keys_detail(c, "keys without a parent:", "keys", &t.orphans);

    c = add_check(x, ch.name, "rejected parents");
    c->source = t.rejected.n;
    keys_detail(c, "child rows of rejected parents:", "keys", &t.rejected);

    c = add_check(x, ch.name, "NULL keys");
    c->source = t.nulls;
    c->target = t.nulls - t.nulls_with_uuid;
    c->ok = t.nulls_with_uuid == 0;
    if (t.nulls_with_uuid)
        detail_add(c, "%" PRIu64 " rows with a NULL key have a %s", t.nulls_with_uuid, fku);

    c = add_check(x, ch.name, "join pairs");
    c->source = t.old_pairs;
    c->target = t.new_pairs;
    c->ok = t.old_pairs == t.new_pairs && t.old_hash == t.new_hash;
    detail_add(c, "%s through %s", x->same ? "joined" : "derived from the key merge", fku);
    if (t.old_pairs == t.new_pairs && t.old_hash != t.new_hash)
        detail_add(c, "the same count, other pairs");
    ok = true;
out:
    free(ch.C);
    free(ch.FK);
    free(ch.FKU);
    free(ch.PK);
    return ok;
}

/* ---- the whole ------------------------------------------------------------------------------- */

static void
ctx_free(Ctx *x)
{
    free(x->S);
    free(x->T);
    free(x->M);
    free(x->K);
    free(x->TC);
    buf_free(&x->srow);
    buf_free(&x->trow);
    buf_free(&x->qarray);
    free(x->bounds);
    free(x->hi);
    free(x->qkeys);
}

/* diff_keys sorted, unique, without the source rows no UUIDv7 can carry (time NULL or before
 * 1970: always rejected, rightly absent from the target). */
static bool
diff_keys_final(Ctx *x, Err *err)
{
    VerifyReport *r = x->rep;
    size_t n = r->ndiff_keys ? 1 : 0;
    Buf arr;
    PGresult *res;
    char *sql;
    bool ok;

    if (r->ndiff_keys > 1)
        qsort(r->diff_keys, r->ndiff_keys, sizeof *r->diff_keys, cmp_i64);
    for (size_t i = 1; i < r->ndiff_keys; i++)
        if (r->diff_keys[i] != r->diff_keys[n - 1])
            r->diff_keys[n++] = r->diff_keys[i];
    r->ndiff_keys = n;
    if (n == 0)
        return true;
    buf_init(&arr);
    buf_putc(&arr, '{');
    for (size_t i = 0; i < n; i++)
        buf_printf(&arr, "%s%" PRId64, i ? "," : "", r->diff_keys[i]);
    buf_putc(&arr, '}');
    sql = xasprintf("SELECT k FROM unnest($1::bigint[]) k WHERE NOT EXISTS (SELECT 1 FROM %s s "
                    "WHERE s.%s = k AND (s.%s IS NULL OR s.%s < 'epoch')) ORDER BY k",
                    x->S, x->K, x->TC, x->TC);
    {
        const char *p[1] = {arr.data};

        ok = query(x->src, "listing the differing keys", sql, 1, p, &res, err);
    }
    if (ok)
    {
        r->ndiff_keys = (size_t) PQntuples(res);
        for (int i = 0; i < PQntuples(res); i++)
            r->diff_keys[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        PQclear(res);
    }
    free(sql);
    buf_free(&arr);
    return ok;
}

/* Keys at most this far apart share a re-check range: VERIFY_RECHECK_GAP, or more so that
 * there are at most VERIFY_RECHECK_RANGES ranges (queries per check). */
static int64_t
recheck_gap(const int64_t *keys, size_t n)
{
    int64_t *gaps, gap = VERIFY_RECHECK_GAP;

    if (n <= VERIFY_RECHECK_RANGES)
        return gap;
    gaps = xmalloc(n * sizeof *gaps);
    for (size_t i = 1; i < n; i++)
        gaps[i - 1] = keys[i] - keys[i - 1];
    qsort(gaps, n - 1, sizeof *gaps, cmp_i64);
    /* at most VERIFY_RECHECK_RANGES - 1 gaps wider than this */
    if (gaps[n - VERIFY_RECHECK_RANGES] > gap)
        gap = gaps[n - VERIFY_RECHECK_RANGES];
    free(gaps);
    return gap;
}

/* The whole verify, or (recheck) the values and child keys of those keys only. */
static bool
verify_run(PgConn *source, PgConn *target, const MigrateSpec *spec, size_t range_keys,
           const int64_t *recheck, size_t nrecheck, VerifyReport *out, Err *err)
{
    Ctx x;
    MigrateLiveNames live;
    uint64_t rejected = 0;
    bool ok = false;

    memset(out, 0, sizeof *out);
    memset(&x, 0, sizeof x);
    x.src = source;
    x.dst = target;
    x.same = source == target;
    x.spec = spec;
    x.range_keys = range_keys ? range_keys : VERIFY_RANGE_KEYS;
    x.key_min = strcmp(spec->key_type, "smallint") == 0  ? INT16_MIN
                : strcmp(spec->key_type, "integer") == 0 ? INT32_MIN
                                                         : INT64_MIN;
    x.key_max = strcmp(spec->key_type, "smallint") == 0  ? INT16_MAX
                : strcmp(spec->key_type, "integer") == 0 ? INT32_MAX
                                                         : INT64_MAX;
    x.rep = out;
    buf_init(&x.srow);
    buf_init(&x.trow);
    buf_init(&x.qarray);
    /* After the switch: the legacy table against the UUIDv7 table, under their new names. */
    migrate_live_names(spec, &live);
    (void) snprintf(x.table, sizeof x.table, "%s.%s", live.new_schema, live.new_table);
    /* The quarantine names the source table as it was named when its rows were read. */
    (void) snprintf(x.relation, sizeof x.relation, "%s.%s", spec->from_schema, spec->from_table);
    if (!table_exists(source, "source", live.src_schema, live.src_table, err) ||
        !table_exists(target, "target", live.new_schema, live.new_table, err) ||
        !table_exists(target, "map", spec->into_schema, spec->map_table, err))
        goto out;
    if (!citus_is_distributed(target, live.new_schema, live.new_table, &x.dist, err))
        goto out;
    /* On Citus the target's side is read apart (its own statements), also in one database. */
    x.same = x.same && !x.dist;
    x.S = pg_qualified(source, live.src_schema, live.src_table);
    x.T = pg_qualified(target, live.new_schema, live.new_table);
    x.M = pg_qualified(target, spec->into_schema, spec->map_table);
    x.K = pg_ident(source, spec->key);
    x.TC = pg_ident(target, spec->time_column);
    if (recheck)
    {
        /* Keys close together share a range (one query); a range's other rows are not
         * re-checked (the caller keeps only the keys it asked for). */
        int64_t gap = recheck_gap(recheck, nrecheck);

        x.bounds = xmalloc((nrecheck + 1) * sizeof *x.bounds);
        x.hi = xmalloc((nrecheck + 1) * sizeof *x.hi);
        for (size_t i = 0; i < nrecheck; i++)
        {
            if (x.nbounds > 0 && recheck[i] - x.hi[x.nbounds - 1] <= gap)
                x.hi[x.nbounds - 1] = recheck[i];
            else
            {
                x.bounds[x.nbounds] = recheck[i];
                x.hi[x.nbounds++] = recheck[i];
            }
        }
    }
    if (!load_columns(&x, err) || (!recheck && !load_bounds(&x, err)) ||
        !load_quarantine(&x, &rejected, err) || (!recheck && !check_rows(&x, rejected, err)) ||
        !check_values(&x, err) || (!recheck && (!check_map(&x, err) || !check_times(&x, err))))
        goto out;
    for (size_t i = 0; i < spec->nchildren; i++)
        if (!check_child(&x, &spec->children[i], err))
            goto out;
    ok = true;
out:
    out->ok = ok;
    for (size_t i = 0; i < out->n; i++)
        out->ok = out->ok && out->checks[i].ok;
    if (ok && !diff_keys_final(&x, err))
        ok = out->ok = false;
    ctx_free(&x);
    return ok;
}

bool
migrate_verify_ex(PgConn *source, PgConn *target, const MigrateSpec *spec, size_t range_keys,
                  VerifyReport *out, Err *err)
{
    return verify_run(source, target, spec, range_keys, NULL, 0, out, err);
}

bool
migrate_verify_keys(PgConn *source, PgConn *target, const MigrateSpec *spec,
                    const int64_t *keys, size_t nkeys, VerifyReport *out, Err *err)
{
    static const int64_t none = 0;
    bool ok = verify_run(source, target, spec, 0, nkeys ? keys : &none, nkeys, out, err);

    out->ndiff_keys = verify_keys_intersect(out->diff_keys, out->ndiff_keys, keys, nkeys);
    return ok;
}

bool
migrate_verify(PgConn *source, PgConn *target, const MigrateSpec *spec, VerifyReport *out,
               Err *err)
{
    return migrate_verify_ex(source, target, spec, 0, out, err);
}

/* ---- output -------------------------------------------------------------------------------- */

void
verify_report_print(FILE *f, const VerifyReport *r)
{
    int wt = text_width("TABLE");
    int wc = text_width("CHECK");
    size_t bad = 0;

    for (size_t i = 0; i < r->n; i++)
    {
        int a = text_width(r->checks[i].table);
        int b = text_width(r->checks[i].check);

        wt = a > wt ? a : wt;
        wc = b > wc ? b : wc;
        bad += !r->checks[i].ok;
    }
    text_pad(f, "TABLE", wt + 2, -1);
    text_pad(f, "CHECK", wc + 2, -1);
    fprintf(f, "%12s  %12s  %-8s  %s\n", "SOURCE", "TARGET", "VERDICT", "DETAIL");
    for (size_t i = 0; i < r->n; i++)
    {
        const VerifyCheck *c = &r->checks[i];

        text_pad(f, c->table, wt + 2, -1);
        text_pad(f, c->check, wc + 2, -1);
        fprintf(f, "%12" PRIu64 "  %12" PRIu64 "  %-8s  ", c->source, c->target,
                c->ok ? "OK" : "MISMATCH");
        /* One line per check: a reason or a quarantined line may hold a newline. */
        for (const char *p = c->detail; *p; p++)
            fputc((unsigned char) *p < 0x20 || *p == 0x7f ? ' ' : *p, f);
        fputc('\n', f);
    }
    if (r->ok)
        fprintf(f, "verdict: OK\n");
    else
        fprintf(f, "verdict: MISMATCH (%zu of %zu checks)\n", bad, r->n);
}

bool
verify_report_json(const VerifyReport *r, Buf *out)
{
    buf_printf(out, "{\"ok\":%s,\"checks\":[", r->ok ? "true" : "false");
    for (size_t i = 0; i < r->n; i++)
    {
        const VerifyCheck *c = &r->checks[i];

        buf_puts(out, i ? ",{\"table\":" : "{\"table\":");
        buf_put_json_string(out, c->table, strlen(c->table));
        buf_puts(out, ",\"check\":");
        buf_put_json_string(out, c->check, strlen(c->check));
        buf_printf(out, ",\"source\":%" PRIu64 ",\"target\":%" PRIu64 ",\"ok\":%s,\"detail\":",
                   c->source, c->target, c->ok ? "true" : "false");
        buf_put_json_string(out, c->detail, strlen(c->detail));
        buf_putc(out, '}');
    }
    buf_puts(out, "]}");
    return true;
}

void
verify_report_free(VerifyReport *r)
{
    free(r->checks);
    r->checks = NULL;
    r->n = 0;
    free(r->diff_keys);
    r->diff_keys = NULL;
    r->ndiff_keys = 0;
}

/* ---- settling (a verify after a run while the application writes) ------------------------- */

bool
verify_check_settles(const VerifyCheck *c)
{
    static const char *const lagging[] = {"rows", "values", "child keys", "join pairs"};

    for (size_t i = 0; i < sizeof lagging / sizeof lagging[0]; i++)
        if (strcmp(c->check, lagging[i]) == 0)
            return true;
    return false;
}

size_t
verify_keys_intersect(int64_t *a, size_t na, const int64_t *b, size_t nb)
{
    size_t i = 0, j = 0, n = 0;

    while (i < na && j < nb)
    {
        if (a[i] < b[j])
            i++;
        else if (a[i] > b[j])
            j++;
        else
        {
            a[n++] = a[i];
            i++;
            j++;
        }
    }
    return n;
}

void
verify_report_settle(VerifyReport *r, const int64_t *still, size_t nstill, int rounds)
{
    r->ok = true;
    for (size_t i = 0; i < r->n; i++)
    {
        VerifyCheck *c = &r->checks[i];

        if (!c->ok && verify_check_settles(c))
        {
            if (nstill == 0)
            {
                c->ok = true;
                detail_add(c, "settled: differed only while the capture lagged (%d rounds)",
                           rounds);
            }
            else
            {
                Keys k;

                memset(&k, 0, sizeof k);
                for (size_t j = 0; j < nstill; j++)
                {
                    char t[32];

                    (void) snprintf(t, sizeof t, "%" PRId64, still[j]);
                    keys_add(&k, t);
                }
                keys_detail(c, "still differing:", "legacy keys", &k);
                detail_add(c, "(%d rounds)", rounds);
            }
        }
        r->ok = r->ok && c->ok;
    }
}
