/*
 * Target introspection: resolve a table name the way SQL does, check that it
 * is something v7fill can fill (RANGE on one uuid / timestamptz / timestamp /
 * bigint-ms column), and read its columns, privileges and partitions with
 * their bounds decoded to times.
 *
 * Names are resolved by the server ($1::regclass with the name as a
 * parameter), so quoting, search_path and case folding follow PostgreSQL's
 * own rules; afterwards only oids are used.  Bounds are read from
 * pg_get_expr(relpartbound), which prints them as literals under the session
 * settings pg_connect pins (DateStyle ISO, TimeZone UTC); the parser below
 * accepts any offset anyway, so a different TimeZone would not misread them.
 */
#include "v7fill/catalog.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/citus.h"
#include "v7fill/civil.h"
#include "v7fill/mem.h"
#include "v7fill/uuid7.h"

/* Every name is schema-qualified: a user's search_path must not be able to
 * redirect catalog reads. */
static const char *const q_resolve =
    "SELECT c.oid, n.nspname, c.relname, c.relkind, c.relispartition, "
    "       pg_catalog.pg_get_userbyid(c.relowner), ts.spcname, c.relacl::text, "
    "       (SELECT i.inhparent::pg_catalog.regclass::text FROM pg_catalog.pg_inherits i "
    "         WHERE i.inhrelid = c.oid LIMIT 1) "
    "  FROM pg_catalog.pg_class c "
    "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "  LEFT JOIN pg_catalog.pg_tablespace ts ON ts.oid = c.reltablespace "
    " WHERE c.oid = $1::pg_catalog.regclass";

/* No pg_get_partkeydef() and no pg_get_expr() with a relation: both take
 * ACCESS SHARE on the table, and a catalog read must not queue behind an
 * ALTER TABLE holding ACCESS EXCLUSIVE (it would wait without lock_timeout). */
static const char *const q_key =
    "SELECT p.partstrat, p.partnatts, p.partattrs[0], "
    "       CASE p.partstrat WHEN 'r' THEN 'RANGE' WHEN 'l' THEN 'LIST' WHEN 'h' THEN 'HASH' "
    "                        ELSE p.partstrat::text END || ' (' || "
    "       (SELECT string_agg(CASE WHEN k.attnum = 0 THEN '(expression)' "
    "                               ELSE pg_catalog.quote_ident(a2.attname) END, ', ' "
    "                          ORDER BY k.ord) "
    "          FROM unnest(p.partattrs::int2[]) WITH ORDINALITY AS k(attnum, ord) "
    "          LEFT JOIN pg_catalog.pg_attribute a2 "
    "                 ON a2.attrelid = p.partrelid AND a2.attnum = k.attnum) || ')', "
    "       a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
    "       CASE a.atttypid WHEN 'pg_catalog.uuid'::pg_catalog.regtype THEN 'uuid' "
    "                       WHEN 'pg_catalog.timestamptz'::pg_catalog.regtype THEN 'timestamptz' "
    "                       WHEN 'pg_catalog.timestamp'::pg_catalog.regtype THEN 'timestamp' "
    "                       WHEN 'pg_catalog.int8'::pg_catalog.regtype THEN 'int8' END, "
    "       coalesce(opc.opcdefault, false), opc.opcname "
    "  FROM pg_catalog.pg_partitioned_table p "
    "  LEFT JOIN pg_catalog.pg_attribute a "
    "         ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0] "
    "  LEFT JOIN pg_catalog.pg_opclass opc ON opc.oid = p.partclass[0] "
    " WHERE p.partrelid = $1";

static const char *const q_columns =
    "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, "
    "       a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '', a.attgenerated <> '' "
    "  FROM pg_catalog.pg_attribute a "
    " WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped "
    " ORDER BY a.attnum";

/* The owner's own entries are left out: a new partition's owner has them
 * implicitly after ALTER TABLE ... OWNER TO. */
static const char *const q_grants =
    "SELECT NULL::text, CASE WHEN x.grantee = 0 THEN NULL "
    "                        ELSE pg_catalog.pg_get_userbyid(x.grantee)::text END, "
    "       x.privilege_type, x.is_grantable "
    "  FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) x "
    " WHERE c.oid = $1 AND x.grantee <> c.relowner "
    "UNION ALL "
    "SELECT a.attname::text, CASE WHEN x.grantee = 0 THEN NULL "
    "                             ELSE pg_catalog.pg_get_userbyid(x.grantee)::text END, "
    "       x.privilege_type, x.is_grantable "
    "  FROM pg_catalog.pg_class c "
    "  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid, "
    "       pg_catalog.aclexplode(a.attacl) x "
    " WHERE c.oid = $1 AND a.attnum > 0 AND NOT a.attisdropped AND x.grantee <> c.relowner "
    " ORDER BY 1 NULLS FIRST, 2 NULLS FIRST, 3";

/* pg_get_expr(relpartbound, 0): a bound has no column references, and with a
 * relation oid the function would lock every partition (see q_key).  The
 * last column: detach pending (pg_inherits.inhdetachpending, PostgreSQL 14+;
 * `false` is substituted for older servers). */
#define Q_PARTITIONS(pending)                                                                  \
    "SELECT c.oid, n.nspname, c.relname, c.relkind, "                                          \
    "       pg_catalog.pg_get_expr(c.relpartbound, 0), c.reltuples::float8, "                  \
    "       c.xmin::text::int8, " pending " "                                                  \
    "  FROM pg_catalog.pg_inherits i "                                                         \
    "  JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid "                                      \
    "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "                              \
    " WHERE i.inhparent = $1"
static const char *const q_partitions = Q_PARTITIONS("i.inhdetachpending");
static const char *const q_partitions_13 = Q_PARTITIONS("false");

/* Declared foreign keys only (conparentid = 0: not the copies on partitions),
 * one row per column pair, in key order. */
static const char *const q_incoming_fks =
    "SELECT c.oid, n.nspname, r.relname, c.conname, a.attname, fa.attname "
    "  FROM pg_catalog.pg_constraint c "
    "  JOIN pg_catalog.pg_class r ON r.oid = c.conrelid "
    "  JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace "
    "  CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(att, fatt, ord) "
    "  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.att "
    "  JOIN pg_catalog.pg_attribute fa ON fa.attrelid = c.confrelid AND fa.attnum = k.fatt "
    " WHERE c.contype = 'f' AND c.confrelid = $1 AND c.conparentid = 0 "
    " ORDER BY n.nspname, r.relname, c.conname, c.oid, k.ord";

/* Must add up exactly as catalog_refresh_partitions does in C: over the
 * partitions that are not detach pending (a detach that starts changes it). */
#define Q_STAMP(where)                                                                         \
    "SELECT count(*), coalesce(sum(c.oid::int8), 0)::int8, "                                   \
    "       coalesce(sum(c.xmin::text::int8), 0)::int8 "                                       \
    "  FROM pg_catalog.pg_inherits i "                                                         \
    "  JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid "                                      \
    " WHERE i.inhparent = $1" where
static const char *const q_stamp = Q_STAMP(" AND NOT i.inhdetachpending");
static const char *const q_stamp_13 = Q_STAMP("");

static bool
server_has_detach_pending(PgConn *c)
{
    return PQserverVersion(pg_raw(c)) >= 140000;
}

static const char *const supported_detail =
    "v7fill fills tables partitioned BY RANGE on a single column of type uuid (UUIDv7 ids), "
    "timestamptz, timestamp or bigint (epoch milliseconds).";

const char *
catalog_key_kind_name(KeyKind kind)
{
    switch (kind)
    {
        case KEY_UUID7:
            return "uuid7";
        case KEY_TIMESTAMPTZ:
            return "timestamptz";
        case KEY_TIMESTAMP:
            return "timestamp";
        case KEY_BIGINT_MS:
            return "bigint-ms";
    }
    return "?";
}

const char *
catalog_bound_style_name(BoundStyle style)
{
    return style == BOUND_STYLE_BARE ? "bare" : "min-v7";
}

const char *
catalog_key_sql_type(KeyKind kind)
{
    switch (kind)
    {
        case KEY_UUID7:
            return "pg_catalog.uuid";
        case KEY_TIMESTAMPTZ:
            return "pg_catalog.timestamptz";
        case KEY_TIMESTAMP:
            return "pg_catalog.timestamp";
        case KEY_BIGINT_MS:
            return "pg_catalog.int8";
    }
    return "?";
}

/* ------------------------------------------------------------ bound codec */

/* n digits at *s (n = 0: one or more), advancing *s. */
static bool
read_digits(const char **s, int min, int max, int64_t *v)
{
    int n = 0;

    *v = 0;
    while (**s >= '0' && **s <= '9' && n < max)
    {
        if (*v > INT64_MAX / 10 - 10)
            return false;
        *v = *v * 10 + (**s - '0');
        (*s)++;
        n++;
    }
    return n >= min;
}

/*
 * A timestamp as the server prints it under DateStyle ISO:
 *   YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM[:SS]]][ BC], 'infinity', '-infinity'
 * Years may have more than four digits.
 */
static bool
parse_server_timestamp(const char *text, bool with_offset, int64_t *us, Err *err)
{
    const char *s = text;
    int64_t year, month, day, hour, minute, second;
    int64_t frac = 0;
    int64_t offset = 0;
    int64_t days;
    int64_t v;

    if (strcmp(text, "infinity") == 0)
    {
        *us = INT64_MAX;
        return true;
    }
    if (strcmp(text, "-infinity") == 0)
    {
        *us = INT64_MIN;
        return true;
    }
    if (!read_digits(&s, 1, 9, &year) || *s++ != '-' || !read_digits(&s, 2, 2, &month) ||
        *s++ != '-' || !read_digits(&s, 2, 2, &day) || *s++ != ' ' ||
        !read_digits(&s, 2, 2, &hour) || *s++ != ':' || !read_digits(&s, 2, 2, &minute) ||
        *s++ != ':' || !read_digits(&s, 2, 2, &second))
        goto bad;
    if (*s == '.')
    {
        int64_t scale = 100000;
        s++;
        if (*s < '0' || *s > '9')
            goto bad;
        while (*s >= '0' && *s <= '9')
        {
            frac += (*s - '0') * scale;
            scale /= 10;
            s++;
        }
    }
    if (with_offset)
    {
        int sign;
        if (*s != '+' && *s != '-')
            goto bad;
        sign = *s++ == '-' ? -1 : 1;
        if (!read_digits(&s, 2, 2, &v))
            goto bad;
        offset = v * 3600;
        if (*s == ':')
        {
            s++;
            if (!read_digits(&s, 2, 2, &v))
                goto bad;
            offset += v * 60;
            if (*s == ':')
            {
                s++;
                if (!read_digits(&s, 2, 2, &v))
                    goto bad;
                offset += v;
            }
        }
        offset *= sign;
    }
    if (strcmp(s, " BC") == 0)
    {
        year = 1 - year; /* astronomical numbering: 1 BC is year 0 */
        s += 3;
    }
    if (*s != '\0' || month < 1 || month > 12 || day < 1 ||
        day > civil_days_in_month((int) year, (int) month) || hour > 23 || minute > 59 ||
        second > 60)
        goto bad;
    days = civil_days_from_date((int) year, (int) month, (int) day);
    *us = civil_sat_mul(days, US_PER_DAY);
    *us = civil_sat_add(*us, hour * US_PER_HOUR + minute * US_PER_MIN + second * US_PER_SEC + frac);
    *us = civil_sat_add(*us, -offset * US_PER_SEC);
    return true;

bad:
    return err_set(err, EC_FORMAT, "unexpected timestamp \"%.64s\" in a partition bound", text);
}

/*
 * Where a uuid bound sits among UUIDv7 ids, exactly: the smallest UUIDv7 at
 * or above it, as (milliseconds, rand_a, rand_b).  pg_partman's bare floor
 * and v7fill's minimum v7 of a millisecond are the same place; a bound inside
 * a millisecond keeps its fraction.  hi = ms << 16 | rand_a, lo = rand_b.
 */
static void
uuid_bound_key(const Uuid *u, uint64_t *hi, uint64_t *lo)
{
    uint64_t ms = (uint64_t) uuid7_ms(u);
    unsigned version = u->b[6] >> 4;
    unsigned variant = u->b[8] >> 6;
    uint64_t ra = uuid7_rand_a(u);
    uint64_t rb = u->b[8] & 0x3f;

    for (int i = 9; i < 16; i++)
        rb = (rb << 8) | u->b[i];
    if (version != 7 || variant != 2)
        rb = 0;
    if (version != 7)
        ra = 0;
    if (version > 7 || (version == 7 && variant > 2 && ++ra == 4096))
    {
        ra = 0;
        ms++;
    }
    *hi = ms << 16 | ra;
    *lo = rb;
}

/* The first microsecond whose v7fill ids (rand_a = floor(µs fraction × 4.096))
 * all lie at or above the bound: exact for a bound on a rand_a step, rounded
 * up inside one; a bound past the last fraction minted starts the next
 * millisecond.  As `v7fill uuid time` reads it. */
static int64_t
uuid_bound_us(const Uuid *u)
{
    uint64_t hi, lo;
    int64_t steps;
    int64_t frac;

    uuid_bound_key(u, &hi, &lo);
    steps = (int64_t) (hi & 0xffff) + (lo != 0 ? 1 : 0);
    frac = (steps * 1000 + 4095) / 4096;
    return (int64_t) (hi >> 16) * 1000 + (frac > 1000 ? 1000 : frac);
}

int
catalog_bound_cmp(int64_t us_a, const char *text_a, int64_t us_b, const char *text_b)
{
    Uuid a, b;
    Err ignored = {0};
    uint64_t ah, al, bh, bl;

    if (us_a != us_b)
        return us_a < us_b ? -1 : 1;
    /* Equal times: only uuid bounds (a millisecond or less apart) can differ.
     * Without text, a finite time is a window edge: the floor of its
     * millisecond. */
    if (us_a == INT64_MIN || us_a == INT64_MAX || (text_a == NULL && text_b == NULL))
        return 0;
    if (text_a ? !uuid_parse(text_a, strlen(text_a), &a, &ignored)
               : !uuid7_floor(civil_floor_div(us_a, 1000) * 1000, &a, &ignored))
        return 0;
    if (text_b ? !uuid_parse(text_b, strlen(text_b), &b, &ignored)
               : !uuid7_floor(civil_floor_div(us_b, 1000) * 1000, &b, &ignored))
        return 0;
    uuid_bound_key(&a, &ah, &al);
    uuid_bound_key(&b, &bh, &bl);
    if (ah != bh)
        return ah < bh ? -1 : 1;
    return al < bl ? -1 : al > bl;
}

/* One bound value: MINVALUE, MAXVALUE or a quoted literal; *s advanced past it. */
static bool
parse_bound_value(KeyKind kind, const char **s, int64_t *us, char **text, Err *err)
{
    const char *p = *s;
    Buf lit;

    *text = NULL;
    if (strncmp(p, "MINVALUE", 8) == 0 || strncmp(p, "MAXVALUE", 8) == 0)
    {
        *us = p[1] == 'I' ? INT64_MIN : INT64_MAX;
        *s = p + 8;
        return true;
    }
    if (*p != '\'')
        return err_set(err, EC_FORMAT, "unexpected partition bound value at \"%.32s\"", p);
    buf_init(&lit);
    for (p++;; p++)
    {
        if (*p == '\0')
        {
            buf_free(&lit);
            return err_set(err, EC_FORMAT, "unterminated literal in a partition bound");
        }
        if (*p == '\'')
        {
            if (p[1] != '\'')
                break;
            p++;
        }
        buf_putc(&lit, *p);
    }
    *s = p + 1;
    if (lit.data == NULL)
        buf_putc(&lit, '\0');

    switch (kind)
    {
        case KEY_UUID7:
        {
            Uuid u;
            char canon[UUID_TEXT_SIZE];

            if (!uuid_parse(lit.data, lit.len, &u, err))
                break;
            *us = uuid_bound_us(&u);
            uuid_format(&u, canon);
            *text = xstrdup(canon);
            buf_free(&lit);
            return true;
        }
        case KEY_TIMESTAMPTZ:
        case KEY_TIMESTAMP:
            if (!parse_server_timestamp(lit.data, kind == KEY_TIMESTAMPTZ, us, err))
                break;
            *text = lit.data; /* the server's own text: valid input under any DateStyle */
            return true;
        case KEY_BIGINT_MS:
        {
            char *end = NULL;
            long long v;

            errno = 0;
            v = strtoll(lit.data, &end, 10);
            if (errno != 0 || end == lit.data || *end != '\0')
            {
                err_set(err, EC_FORMAT, "unexpected bigint \"%.32s\" in a partition bound",
                        lit.data);
                break;
            }
            *us = civil_sat_mul((int64_t) v, 1000);
            *text = lit.data;
            return true;
        }
    }
    buf_free(&lit);
    return false;
}

bool
catalog_parse_bound(KeyKind kind, const char *expr, Partition *p, Err *err)
{
    const char *s = expr;

    p->is_default = false;
    p->lower_text = NULL;
    p->upper_text = NULL;
    if (strcmp(expr, "DEFAULT") == 0)
    {
        p->is_default = true;
        p->lower_us = INT64_MIN;
        p->upper_us = INT64_MAX;
        return true;
    }
    if (strncmp(s, "FOR VALUES FROM (", 17) != 0)
        goto bad;
    s += 17;
    if (!parse_bound_value(kind, &s, &p->lower_us, &p->lower_text, err))
        goto fail;
    if (strncmp(s, ") TO (", 6) != 0)
        goto bad;
    s += 6;
    if (!parse_bound_value(kind, &s, &p->upper_us, &p->upper_text, err))
        goto fail;
    if (strcmp(s, ")") != 0)
        goto bad;
    return true;

bad:
    err_set(err, EC_FORMAT, "unexpected partition bound \"%.200s\"", expr);
    err_detail(err, "Expected FOR VALUES FROM (x) TO (y) with one value each, or DEFAULT.");
fail:
    free(p->lower_text);
    free(p->upper_text);
    p->lower_text = p->upper_text = NULL;
    return false;
}

bool
catalog_bound_literal(KeyKind kind, BoundStyle style, int64_t us, char **out, Err *err)
{
    CivilTime ct;
    char text[64];
    char frac[16] = "";

    *out = NULL;
    switch (kind)
    {
        case KEY_UUID7:
        {
            Uuid u;

            if (us % 1000 != 0)
                return err_set(err, EC_INTERNAL, "uuid bound at a fraction of a millisecond");
            if (!(style == BOUND_STYLE_BARE ? uuid7_floor_bare(us, &u, err)
                                             : uuid7_floor(us, &u, err)))
                return false;
            uuid_format(&u, text);
            *out = xstrdup(text);
            return true;
        }
        case KEY_BIGINT_MS:
            if (us % 1000 != 0)
                return err_set(err, EC_INTERNAL, "bigint bound at a fraction of a millisecond");
            *out = xasprintf("%" PRId64, us / 1000);
            return true;
        case KEY_TIMESTAMPTZ:
        case KEY_TIMESTAMP:
            break;
    }
    civil_from_us(us, &ct);
    if (ct.year < 1 || ct.year > 9999)
        return err_set(err, EC_FORMAT, "bound in year %d is outside years 1 to 9999", ct.year);
    if (ct.usec != 0)
    {
        size_t n;
        (void) snprintf(frac, sizeof frac, ".%06d", ct.usec);
        n = strlen(frac);
        while (frac[n - 1] == '0')
            frac[--n] = '\0';
    }
    *out = xasprintf("%04d-%02d-%02d %02d:%02d:%02d%s%s", ct.year, ct.month, ct.day, ct.hour,
                     ct.minute, ct.second, frac, kind == KEY_TIMESTAMPTZ ? "+00" : "");
    return true;
}

/* ------------------------------------------------------------- the target */

static char *
dup_or_null(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? NULL : xstrdup(PQgetvalue(r, row, col));
}

static int64_t
get_int64(const PGresult *r, int row, int col)
{
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static bool
get_bool(const PGresult *r, int row, int col)
{
    return PQgetvalue(r, row, col)[0] == 't';
}

static void
partition_clear(Partition *p)
{
    free(p->schema);
    free(p->name);
    free(p->bound_expr);
    free(p->lower_text);
    free(p->upper_text);
    memset(p, 0, sizeof *p);
}

static int
partition_order(const void *a, const void *b)
{
    const Partition *x = a;
    const Partition *y = b;

    int c;

    if (x->is_default != y->is_default)
        return x->is_default ? 1 : -1;
    if ((c = catalog_bound_cmp(x->lower_us, x->lower_text, y->lower_us, y->lower_text)) != 0 ||
        (c = catalog_bound_cmp(x->upper_us, x->upper_text, y->upper_us, y->upper_text)) != 0)
        return c;
    return strcmp(x->name, y->name);
}

static void
free_partitions(Partition *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        partition_clear(&parts[i]);
    free(parts);
}

/* The convention most uuid bounds follow; ties go to the newest partition. */
static BoundStyle
detect_bound_style(const Partition *parts, size_t n)
{
    int v7 = 0;
    int bare = 0;
    BoundStyle newest = BOUND_STYLE_MIN_V7;

    for (size_t i = 0; i < n; i++)
    {
        const char *texts[2] = {parts[i].lower_text, parts[i].upper_text};

        for (int k = 0; k < 2; k++)
        {
            Uuid u;
            Err ignored = {0};

            if (texts[k] == NULL || !uuid_parse(texts[k], strlen(texts[k]), &u, &ignored))
                continue;
            if (uuid_version(&u) == 7)
            {
                v7++;
                newest = BOUND_STYLE_MIN_V7;
            }
            else if (uuid_version(&u) == 0 && (u.b[8] & 0xc0) == 0 && uuid7_ms(&u) != 0)
            {
                bare++;
                newest = BOUND_STYLE_BARE;
            }
        }
    }
    if (v7 == bare)
        return newest;
    return bare > v7 ? BOUND_STYLE_BARE : BOUND_STYLE_MIN_V7;
}

bool
catalog_refresh_partitions(PgConn *c, TargetTable *t, Err *err)
{
    char oid[16];
    const char *params[1] = {oid};
    PGresult *r;
    Partition *parts;
    Partition *pending;
    size_t n;
    size_t nparts = 0;
    size_t npending = 0;
    CatalogStamp stamp = {0};
    bool has_default = false;

    (void) snprintf(oid, sizeof oid, "%u", t->oid);
    if (!pg_query(c, server_has_detach_pending(c) ? q_partitions : q_partitions_13, 1, params, &r,
                  err))
    {
        err_prefix(err, "could not read the partitions of %s.%s", t->schema, t->name);
        return false;
    }
    n = (size_t) PQntuples(r);
    parts = xcalloc(n ? n : 1, sizeof *parts);
    pending = xcalloc(n ? n : 1, sizeof *pending);
    for (size_t i = 0; i < n; i++)
    {
        int row = (int) i;
        bool is_pending = get_bool(r, row, 7);
        Partition *p = is_pending ? &pending[npending++] : &parts[nparts++];

        p->oid = (unsigned int) strtoul(PQgetvalue(r, row, 0), NULL, 10);
        p->schema = xstrdup(PQgetvalue(r, row, 1));
        p->name = xstrdup(PQgetvalue(r, row, 2));
        p->bound_expr = xstrdup(PQgetvalue(r, row, 4));
        p->reltuples = strtod(PQgetvalue(r, row, 5), NULL);
        p->detach_pending = is_pending;
        if (!is_pending)
        {
            stamp.count++;
            stamp.oid_sum += (int64_t) p->oid;
            stamp.xmin_sum += get_int64(r, row, 6);
        }
        if (PQgetvalue(r, row, 3)[0] == 'p')
        {
            err_set(err, EC_CONFIG, "partition %s.%s of %s.%s is itself partitioned", p->schema,
                    p->name, t->schema, t->name);
            err_detail(err, "%s  Sub-partitioned tables are not supported.", supported_detail);
            goto fail;
        }
        if (!catalog_parse_bound(t->key_kind, p->bound_expr, p, err))
        {
            err_prefix(err, "partition %s.%s of %s.%s", p->schema, p->name, t->schema, t->name);
            goto fail;
        }
        has_default |= p->is_default && !is_pending;
    }
    PQclear(r);
    r = NULL;
    qsort(parts, nparts, sizeof *parts, partition_order);
    qsort(pending, npending, sizeof *pending, partition_order);

    free_partitions(t->partitions, t->npartitions);
    free_partitions(t->pending, t->npending);
    t->partitions = parts;
    t->npartitions = nparts;
    t->pending = pending;
    t->npending = npending;
    t->has_default = has_default;
    t->stamp = stamp;
    t->stamp_valid = true;
    if (t->key_kind == KEY_UUID7)
        t->bound_style = detect_bound_style(parts, nparts);
    return true;

fail:
    PQclear(r);
    free_partitions(parts, nparts);
    free_partitions(pending, npending);
    return false;
}

bool
catalog_read_stamp(PgConn *c, const TargetTable *t, CatalogStamp *out, Err *err)
{
    char oid[16];
    const char *params[1] = {oid};
    PGresult *r;

    (void) snprintf(oid, sizeof oid, "%u", t->oid);
    if (!pg_query(c, server_has_detach_pending(c) ? q_stamp : q_stamp_13, 1, params, &r, err))
        return false;
    out->count = get_int64(r, 0, 0);
    out->oid_sum = get_int64(r, 0, 1);
    out->xmin_sum = get_int64(r, 0, 2);
    PQclear(r);
    return true;
}

/* bigint keys must hold epoch milliseconds.  Bounds that only make sense as
 * seconds or microseconds (every one of them in Jan-Apr 1970 or past year
 * 11000 when read as ms) would make v7fill create windows nobody wants. */
static bool
check_bigint_unit(const TargetTable *t, Err *err)
{
    int seconds_like = 0;
    int micros_like = 0;
    int considered = 0;

    for (size_t i = 0; i < t->npartitions; i++)
    {
        const char *texts[2] = {t->partitions[i].lower_text, t->partitions[i].upper_text};

        for (int k = 0; k < 2; k++)
        {
            long long v;

            if (texts[k] == NULL)
                continue;
            v = strtoll(texts[k], NULL, 10);
            if (v == 0 || v >= INT64_C(100000000000000000) || v <= -INT64_C(100000000000000000))
                continue; /* 0 and huge sentinels say nothing about the unit */
            considered++;
            if (v >= INT64_C(300000000) && v < INT64_C(10000000000))
                seconds_like++;
            else if (v >= INT64_C(300000000000000) && v < INT64_C(10000000000000000))
                micros_like++;
        }
    }
    if (considered == 0 || (seconds_like != considered && micros_like != considered))
        return true;
    err_set(err, EC_CONFIG, "the bigint partition bounds of %s.%s look like epoch %s, not "
                            "milliseconds",
            t->schema, t->name, seconds_like ? "seconds" : "microseconds");
    err_detail(err, "%s", supported_detail);
    return false;
}

static bool
load_key(PgConn *c, TargetTable *t, const char *oid, Err *err)
{
    const char *params[1] = {oid};
    PGresult *r;
    char strat;
    const char *type;
    bool ok = false;

    if (!pg_query(c, q_key, 1, params, &r, err))
        return false;
    if (PQntuples(r) != 1)
    {
        err_set(err, EC_CONFIG, "%s.%s has no partition key", t->schema, t->name);
        goto out;
    }
    t->partkeydef = xstrdup(PQgetvalue(r, 0, 3));
    strat = PQgetvalue(r, 0, 0)[0];
    if (strat != 'r')
    {
        err_set(err, EC_CONFIG, "%s.%s is partitioned %s; v7fill supports RANGE partitioning",
                t->schema, t->name, t->partkeydef);
        err_detail(err, "%s", supported_detail);
        goto out;
    }
    if (strcmp(PQgetvalue(r, 0, 1), "1") != 0)
    {
        err_set(err, EC_CONFIG, "%s.%s is partitioned on several columns (%s); v7fill supports a "
                                "single key column",
                t->schema, t->name, t->partkeydef);
        err_detail(err, "%s", supported_detail);
        goto out;
    }
    if (strcmp(PQgetvalue(r, 0, 2), "0") == 0 || PQgetisnull(r, 0, 4))
    {
        err_set(err, EC_CONFIG, "%s.%s is partitioned on an expression (%s); v7fill supports a "
                                "plain column",
                t->schema, t->name, t->partkeydef);
        err_detail(err, "%s", supported_detail);
        goto out;
    }
    t->key_column = xstrdup(PQgetvalue(r, 0, 4));
    t->key_type = xstrdup(PQgetvalue(r, 0, 5));
    type = PQgetvalue(r, 0, 6);
    if (strcmp(type, "uuid") == 0)
        t->key_kind = KEY_UUID7;
    else if (strcmp(type, "timestamptz") == 0)
        t->key_kind = KEY_TIMESTAMPTZ;
    else if (strcmp(type, "timestamp") == 0)
        t->key_kind = KEY_TIMESTAMP;
    else if (strcmp(type, "int8") == 0)
        t->key_kind = KEY_BIGINT_MS;
    else
    {
        err_set(err, EC_CONFIG, "partition key \"%s\" of %s.%s has type %s, which v7fill does not "
                                "support",
                t->key_column, t->schema, t->name, t->key_type);
        err_detail(err, "%s", supported_detail);
        goto out;
    }
    if (!get_bool(r, 0, 7))
    {
        err_set(err, EC_CONFIG, "partition key \"%s\" of %s.%s uses operator class %s, not the "
                                "default ordering of %s",
                t->key_column, t->schema, t->name, PQgetvalue(r, 0, 8), t->key_type);
        err_detail(err, "v7fill computes bounds in the type's natural order.");
        goto out;
    }
    ok = true;
out:
    PQclear(r);
    return ok;
}

static bool
load_columns(PgConn *c, TargetTable *t, const char *oid, Err *err)
{
    const char *params[1] = {oid};
    PGresult *r;

    if (!pg_query(c, q_columns, 1, params, &r, err))
        return false;
    t->ncolumns = (size_t) PQntuples(r);
    t->columns = xcalloc(t->ncolumns ? t->ncolumns : 1, sizeof *t->columns);
    for (size_t i = 0; i < t->ncolumns; i++)
    {
        Column *col = &t->columns[i];
        int row = (int) i;

        col->name = xstrdup(PQgetvalue(r, row, 0));
        col->type = xstrdup(PQgetvalue(r, row, 1));
        col->not_null = get_bool(r, row, 2);
        col->has_default = get_bool(r, row, 3);
        col->generated = get_bool(r, row, 4);
    }
    PQclear(r);
    return true;
}

static bool
load_grants(PgConn *c, TargetTable *t, const char *oid, Err *err)
{
    const char *params[1] = {oid};
    PGresult *r;

    if (!pg_query(c, q_grants, 1, params, &r, err))
        return false;
    t->ngrants = (size_t) PQntuples(r);
    t->grants = xcalloc(t->ngrants ? t->ngrants : 1, sizeof *t->grants);
    for (size_t i = 0; i < t->ngrants; i++)
    {
        Grant *g = &t->grants[i];
        int row = (int) i;

        g->column = dup_or_null(r, row, 0);
        g->grantee = dup_or_null(r, row, 1);
        g->privilege = xstrdup(PQgetvalue(r, row, 2));
        g->grantable = get_bool(r, row, 3);
    }
    PQclear(r);
    return true;
}

/* Turn the server's refusal of the name into a configuration error that
 * says how names are read. */
static bool
resolve_error(Err *err, const char *table)
{
    if (strcmp(err->sqlstate, "42P01") == 0 || strcmp(err->sqlstate, "3F000") == 0 ||
        strcmp(err->sqlstate, "42602") == 0 || strcmp(err->sqlstate, "42704") == 0)
    {
        char sqlstate[6];

        memcpy(sqlstate, err->sqlstate, sizeof sqlstate);
        if (strcmp(sqlstate, "42602") == 0)
            err_set(err, EC_CONFIG, "invalid table name \"%.200s\"", table);
        else
            err_set(err, EC_CONFIG, "table \"%.200s\" does not exist", table);
        memcpy(err->sqlstate, sqlstate, sizeof sqlstate);
        err_hint(err, "The name is read as in SQL: schema-qualify it (sales.events) or check "
                      "search_path, and double-quote mixed case, spaces or dots "
                      "('\"Events 2026\"').");
    }
    else
        err_prefix(err, "could not look up table \"%.200s\"", table);
    return false;
}

bool
catalog_load_target(PgConn *c, const char *table, TargetTable **out, Err *err)
{
    const char *params[1] = {table};
    PGresult *r;
    TargetTable *t;
    char relkind;
    char oid[16];

    *out = NULL;
    if (!pg_query(c, q_resolve, 1, params, &r, err))
        return resolve_error(err, table);
    if (PQntuples(r) != 1)
    {
        PQclear(r);
        return err_set(err, EC_CONFIG, "table \"%.200s\" does not exist", table);
    }
    t = xcalloc(1, sizeof *t);
    t->oid = (unsigned int) strtoul(PQgetvalue(r, 0, 0), NULL, 10);
    t->schema = xstrdup(PQgetvalue(r, 0, 1));
    t->name = xstrdup(PQgetvalue(r, 0, 2));
    relkind = PQgetvalue(r, 0, 3)[0];
    t->owner = xstrdup(PQgetvalue(r, 0, 5));
    t->tablespace = dup_or_null(r, 0, 6);
    t->relacl = dup_or_null(r, 0, 7);
    t->bound_style = BOUND_STYLE_MIN_V7;
    if (relkind != 'p')
    {
        if (relkind == 'r' && get_bool(r, 0, 4))
        {
            err_set(err, EC_CONFIG, "%s.%s is a partition of %s, not a partitioned table",
                    t->schema, t->name, PQgetvalue(r, 0, 8));
            err_hint(err, "Name the partitioned table itself.");
        }
        else if (relkind == 'r')
        {
            err_set(err, EC_CONFIG, "table %s.%s is not partitioned", t->schema, t->name);
            err_detail(err, "%s", supported_detail);
            err_hint(err, "Create it with PARTITION BY RANGE (id); see docs/partitioning.md.");
        }
        else
        {
            err_set(err, EC_CONFIG, "%s.%s is not a table (relkind '%c')", t->schema, t->name,
                    relkind);
            err_detail(err, "%s", supported_detail);
        }
        goto fail;
    }
    if (get_bool(r, 0, 4))
    {
        err_set(err, EC_CONFIG, "%s.%s is itself a partition of %s (sub-partitioning)", t->schema,
                t->name, PQgetvalue(r, 0, 8));
        err_detail(err, "%s  Sub-partitioned tables are not supported.", supported_detail);
        goto fail;
    }
    PQclear(r);
    r = NULL;
    (void) snprintf(oid, sizeof oid, "%u", t->oid);
    if (!load_key(c, t, oid, err) || !load_columns(c, t, oid, err) ||
        !load_grants(c, t, oid, err) || !catalog_refresh_partitions(c, t, err) ||
        !citus_detect(c, t, err))
        goto fail;
    if (t->key_kind == KEY_BIGINT_MS && !check_bigint_unit(t, err))
        goto fail;
    *out = t;
    return true;

fail:
    PQclear(r);
    catalog_target_free(t);
    return false;
}

void
catalog_target_free(TargetTable *t)
{
    if (t == NULL)
        return;
    free(t->schema);
    free(t->name);
    free(t->key_column);
    for (size_t i = 0; i < t->ncolumns; i++)
    {
        free(t->columns[i].name);
        free(t->columns[i].type);
    }
    free(t->columns);
    free_partitions(t->partitions, t->npartitions);
    free_partitions(t->pending, t->npending);
    free(t->owner);
    free(t->tablespace);
    free(t->key_type);
    free(t->partkeydef);
    free(t->relacl);
    free(t->dist_column);
    free(t->dist_type);
    for (size_t i = 0; i < t->ngrants; i++)
    {
        free(t->grants[i].column);
        free(t->grants[i].grantee);
        free(t->grants[i].privilege);
    }
    free(t->grants);
    free(t);
}

int
catalog_column_index(const TargetTable *t, const char *name)
{
    for (size_t i = 0; i < t->ncolumns; i++)
        if (strcmp(t->columns[i].name, name) == 0)
            return (int) i;
    return -1;
}

const Partition *
catalog_partition_for(const TargetTable *t, int64_t us)
{
    size_t n = t->npartitions - (t->has_default ? 1 : 0);
    size_t lo = 0;
    size_t hi = n;
    const Partition *p;

    /* Partitions never overlap and are sorted by lower bound (DEFAULT last):
     * the candidate is the last one starting at or before `us`. */
    while (lo < hi)
    {
        size_t mid = lo + (hi - lo) / 2;
        if (t->partitions[mid].lower_us <= us)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    p = &t->partitions[lo - 1];
    return us < p->upper_us ? p : NULL;
}

void
catalog_add_partition(TargetTable *t, Partition *p)
{
    size_t pos = 0;

    while (pos < t->npartitions && partition_order(&t->partitions[pos], p) < 0)
        pos++;
    t->partitions = xrealloc(t->partitions, (t->npartitions + 1) * sizeof *t->partitions);
    memmove(&t->partitions[pos + 1], &t->partitions[pos],
            (t->npartitions - pos) * sizeof *t->partitions);
    t->partitions[pos] = *p;
    t->npartitions++;
    memset(p, 0, sizeof *p);
}

bool
catalog_incoming_fks(PgConn *c, unsigned int oid, IncomingFk **out, size_t *n, Err *err)
{
    char param[16];
    const char *params[1] = {param};
    PGresult *r;
    IncomingFk *fks = NULL;
    size_t count = 0;
    const char *last = NULL;

    *out = NULL;
    *n = 0;
    (void) snprintf(param, sizeof param, "%u", oid);
    if (!pg_query(c, q_incoming_fks, 1, params, &r, err))
    {
        err_prefix(err, "could not read the foreign keys that reference the table");
        return false;
    }
    for (int row = 0; row < PQntuples(r); row++)
    {
        IncomingFk *f;

        if (last == NULL || strcmp(last, PQgetvalue(r, row, 0)) != 0)
        {
            fks = xrealloc(fks, (count + 1) * sizeof *fks);
            f = &fks[count++];
            memset(f, 0, sizeof *f);
            f->schema = xstrdup(PQgetvalue(r, row, 1));
            f->table = xstrdup(PQgetvalue(r, row, 2));
            f->name = xstrdup(PQgetvalue(r, row, 3));
            last = PQgetvalue(r, row, 0);
        }
        f = &fks[count - 1];
        f->cols = xrealloc(f->cols, (f->ncols + 1) * sizeof *f->cols);
        f->refcols = xrealloc(f->refcols, (f->ncols + 1) * sizeof *f->refcols);
        f->cols[f->ncols] = xstrdup(PQgetvalue(r, row, 4));
        f->refcols[f->ncols] = xstrdup(PQgetvalue(r, row, 5));
        f->ncols++;
    }
    PQclear(r);
    *out = fks;
    *n = count;
    return true;
}

static void
free_strings(char **v, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(v[k]);
    free(v);
}

void
catalog_pending_sql(PgConn *c, const char *schema, const char *table, const Partition *p,
                    char **finalize, char **attach)
{
    char *qparent = pg_qualified(c, schema, table);
    char *qchild = pg_qualified(c, p->schema, p->name);

    *finalize = xasprintf("ALTER TABLE %s DETACH PARTITION %s FINALIZE", qparent, qchild);
    *attach = xasprintf("ALTER TABLE %s ATTACH PARTITION %s %s", qparent, qchild, p->bound_expr);
    free(qparent);
    free(qchild);
}

void
catalog_incoming_fks_free(IncomingFk *fks, size_t n)
{
    for (size_t i = 0; i < n; i++)
    {
        IncomingFk *f = &fks[i];

        free_strings(f->cols, f->ncols);
        free_strings(f->refcols, f->ncols);
        free(f->schema);
        free(f->table);
        free(f->name);
    }
    free(fks);
}

void
catalog_incoming_fks_describe(const IncomingFk *fks, size_t n, char *out, size_t size)
{
    size_t len = 0;

    if (size == 0)
        return;
    out[0] = '\0';
    for (size_t i = 0; i < n && len < size; i++)
    {
        int w = snprintf(out + len, size - len, "%s%s.%s (foreign key %s)", i ? ", " : "",
                         fks[i].schema, fks[i].table, fks[i].name);
        if (w < 0)
            break;
        len += (size_t) w;
    }
}

/* The planner's estimate scaled to the table's current size (reltuples /
 * relpages × pages now, as the planner does): cheap, and close enough for a
 * chart.  A partition of zero bytes has exactly zero rows. */
bool
catalog_estimate_rows(PgConn *c, const TargetTable *t, RowEstimate **out, size_t *n, Err *err)
{
    char oid[16];
    const char *params[1] = {oid};
    PGresult *res;

    if (t->distributed)
        return citus_estimate_rows(c, t, out, n, err);
    (void) snprintf(oid, sizeof oid, "%u", t->oid);
    if (!pg_query(c,
                  "SELECT c.oid, c.reltuples::float8, c.relpages::int8, "
                  "       CASE WHEN c.relkind IN ('r', 'm') "
                  "            THEN pg_catalog.pg_relation_size(c.oid) END "
                  "  FROM pg_catalog.pg_inherits i "
                  "  JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid "
                  " WHERE i.inhparent = $1::oid",
                  1, params, &res, err))
    {
        err_prefix(err, "could not read the size of the partitions of %s.%s", t->schema, t->name);
        return false;
    }
    *n = (size_t) PQntuples(res);
    *out = xcalloc(*n ? *n : 1, sizeof **out);
    for (size_t i = 0; i < *n; i++)
    {
        RowEstimate *e = &(*out)[i];
        double reltuples = strtod(PQgetvalue(res, (int) i, 1), NULL);
        double relpages = strtod(PQgetvalue(res, (int) i, 2), NULL);

        e->oid = (unsigned int) strtoul(PQgetvalue(res, (int) i, 0), NULL, 10);
        e->rows = -1;
        if (!PQgetisnull(res, (int) i, 3))
        {
            double pages = strtod(PQgetvalue(res, (int) i, 3), NULL) / 8192.0;

            if (pages == 0)
            {
                e->rows = 0;
                e->exact = true;
                continue;
            }
            if (reltuples >= 0 && relpages > 0)
                e->rows = floor(reltuples / relpages * pages + 0.5);
            /* Otherwise it was analyzed empty (or never) and has rows now:
             * unknown, rather than a stale 0. */
            continue;
        }
        if (reltuples >= 0)
            e->rows = reltuples;
    }
    PQclear(res);
    return true;
}

static const char *const q_targets =
    "SELECT c.oid::pg_catalog.regclass::text "
    "  FROM pg_catalog.pg_class c "
    "  JOIN pg_catalog.pg_partitioned_table p ON p.partrelid = c.oid "
    "  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = p.partattrs[0] "
    " WHERE c.relkind = 'p' AND NOT c.relispartition AND p.partstrat = 'r' "
    "   AND p.partnatts = 1 "
    "   AND a.atttypid IN ('pg_catalog.uuid'::pg_catalog.regtype, "
    "                      'pg_catalog.timestamptz'::pg_catalog.regtype, "
    "                      'pg_catalog.timestamp'::pg_catalog.regtype, "
    "                      'pg_catalog.int8'::pg_catalog.regtype) "
    " ORDER BY 1";

bool
catalog_list_targets(PgConn *c, char ***out, size_t *n, Err *err)
{
    PGresult *res;

    *out = NULL;
    *n = 0;
    if (!pg_query(c, q_targets, 0, NULL, &res, err))
        return false;
    *n = (size_t) PQntuples(res);
    *out = xcalloc(*n ? *n : 1, sizeof **out);
    for (size_t i = 0; i < *n; i++)
        (*out)[i] = xstrdup(PQgetvalue(res, (int) i, 0));
    PQclear(res);
    return true;
}
