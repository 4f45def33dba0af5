/*
 * Following pg_partman (4.7 as Debian ships it, and 5.x for timestamp keys)
 * for a table in its part_config.
 *
 * pg_partman names a window <parent>_p<to_char(lower, datetime_string)>,
 * cutting the parent's name so that the whole fits in 63 characters
 * (check_name_length), starts windows at midnight of the TimeZone its
 * maintenance runs with (the database's), and gives new partitions the
 * properties of part_config.template_table (inherit_template_properties(),
 * called before ATTACH).  Read, never written; every refusal says why.
 */
#include "v7fill/partman.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/civil.h"
#include "v7fill/mem.h"
#include "v7fill/retention.h"
#include "v7fill/timeparse.h"

typedef struct Naming
{
    const char *interval;        /* partition_interval as interval text */
    const char *datetime_string; /* as create_parent() stores it */
    Granularity g;
    const char *suffix;          /* window_name escapes */
    size_t suffix_chars;         /* length of to_char()'s output */
} Naming;

static const Naming namings[] = {
    {"1 day", "YYYY_MM_DD", GRAN_DAY, "%Y_%m_%d", 10},
    {"7 days", "IYYY\"w\"IW", GRAN_WEEK, "%Gw%V", 7},
    {"1 mon", "YYYY_MM", GRAN_MONTH, "%Y_%m", 7},
    {"3 mons", "YYYY\"q\"Q", GRAN_QUARTER, "%Yq%q", 6},
    {"1 year", "YYYY", GRAN_YEAR, "%Y", 4},
};

/* Bytes of the first `chars` UTF-8 characters of s. */
static size_t
utf8_prefix_bytes(const char *s, size_t chars)
{
    size_t i = 0;

    for (size_t n = 0; s[i] && n <= chars; i++)
        if (((unsigned char) s[i] & 0xC0) != 0x80 && n++ == chars)
            break;
    return i;
}

static size_t
utf8_chars(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        n += ((unsigned char) *s & 0xC0) != 0x80;
    return n;
}

bool
partman_naming(const char *interval, const char *datetime_string, const char *table,
               Granularity *g, char *pattern, size_t size, Err *err)
{
    const Naming *nm = NULL;
    size_t keep;
    Buf b;

    for (size_t i = 0; i < sizeof namings / sizeof namings[0]; i++)
        if (strcmp(interval, namings[i].interval) == 0)
            nm = &namings[i];
    if (nm == NULL)
        return err_set(err, EC_CONFIG, "pg_partman's partition_interval \"%s\" is not one of "
                                       "v7fill's windows (1 day, 1 week, 1 month, 3 months, "
                                       "1 year)",
                       interval);
    if (strcmp(datetime_string, nm->datetime_string) != 0)
        return err_set(err, EC_CONFIG, "pg_partman's datetime_string \"%s\" is not the one "
                                       "pg_partman 4.7's create_parent() gives a %s interval "
                                       "(\"%s\"), which v7fill follows",
                       datetime_string, interval, nm->datetime_string);
    /* check_name_length(parent, suffix, true): 61 characters for the parent
     * and the suffix, plus "_p" */
    keep = utf8_chars(table);
    if (keep + nm->suffix_chars >= 61)
        keep = 61 - nm->suffix_chars;
    keep = utf8_prefix_bytes(table, keep);
    buf_init(&b);
    for (size_t i = 0; i < keep; i++)
        buf_puts(&b, table[i] == '%' ? "%%" : (char[]){table[i], '\0'});
    buf_printf(&b, "_p%s", nm->suffix);
    if (b.len >= size)
    {
        buf_free(&b);
        return err_set(err, EC_CONFIG, "the name of table \"%s\" is too long to follow "
                                       "pg_partman's partition names",
                       table);
    }
    memcpy(pattern, b.data, b.len + 1);
    buf_free(&b);
    *g = nm->g;
    return true;
}

/* A refusal: what could not be followed, why v7fill creates nothing. */
static bool
cannot_follow(Err *err, const TargetTable *t, const PartmanInfo *pm)
{
    char why[sizeof err->msg];

    memcpy(why, err->msg, sizeof why);
    err_clear(err);
    err_set(err, EC_CONFIG, "pg_partman manages %s.%s in a way v7fill cannot follow: %s", t->schema,
            t->name, why);
    err_detail(err, "%s.part_config (pg_partman %s) has a row for the table.  v7fill creates its "
                    "partitions only as pg_partman would (same windows, names and template); "
                    "nothing was created.",
               pm->schema, pm->version);
    err_hint(err, "Let pg_partman create them: SELECT %s.run_maintenance('%s.%s') (raise "
                  "part_config.premake for more windows ahead), or %s.create_partition_time("
                  "'%s.%s', ARRAY['2026-07-01'::timestamptz]) for the windows of given times.",
             pm->schema, t->schema, t->name, pm->schema, t->schema, t->name);
    return false;
}

/* The config row: parent_table, control, interval, datetime_string,
 * template_table, sub-partitioned. */
static bool
read_config(PgConn *c, const TargetTable *t, const PartmanInfo *pm, PGresult **res, Err *err)
{
    char *q_config = pg_qualified(c, pm->schema, "part_config");
    char *q_sub = pg_qualified(c, pm->schema, "part_config_sub");
    char *plain = xasprintf("%s.%s", t->schema, t->name);
    char *qs = pg_ident(c, t->schema);
    char *qt = pg_ident(c, t->name);
    char *quoted = xasprintf("%s.%s", qs, qt);
    const char *params[2] = {plain, quoted};
    char *sql = xasprintf("SELECT p.parent_table, p.control, p.partition_interval::interval::text, "
                          "       coalesce(p.datetime_string, ''), p.template_table, "
                          "       EXISTS (SELECT FROM %s s WHERE s.sub_parent = p.parent_table) "
                          "  FROM %s p WHERE p.parent_table IN ($1, $2) LIMIT 1",
                          q_sub, q_config);
    bool ok = pg_query(c, sql, 2, params, res, err);

    free(sql);
    free(quoted);
    free(qt);
    free(qs);
    free(plain);
    free(q_sub);
    free(q_config);
    return ok;
}

/* The database's own TimeZone (ALTER DATABASE ... SET TimeZone), "" when it
 * has none: v7fill's sessions pin UTC, pg_partman's run with the database's. */
static bool
database_zone(PgConn *c, char *out, size_t size, Err *err)
{
    PGresult *res;

    out[0] = '\0';
    if (!pg_query(c,
                  "SELECT substr(s, strpos(s, '=') + 1) "
                  "  FROM pg_catalog.pg_db_role_setting d, pg_catalog.unnest(d.setconfig) s "
                  " WHERE d.setrole = 0 AND d.setdatabase = (SELECT oid FROM pg_catalog.pg_database "
                  "        WHERE datname = pg_catalog.current_database()) "
                  "   AND pg_catalog.lower(pg_catalog.split_part(s, '=', 1)) = 'timezone'",
                  0, NULL, &res, err))
        return false;
    if (PQntuples(res) > 0)
        (void) snprintf(out, size, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return true;
}

/* Every bound of t a window edge of g in `zone`. */
static bool
bounds_fit(const TargetTable *t, Granularity g, const char *zone, Err *err)
{
    TimeParser *tp = NULL;
    bool ok = true;

    if (zone[0] && !time_parser_new_window(zone, &tp, err))
        return false;
    for (size_t i = 0; i < t->npartitions && ok; i++)
    {
        const Partition *p = &t->partitions[i];
        int64_t edges[2] = {p->lower_us, p->upper_us};

        if (p->is_default || p->planned)
            continue;
        for (int k = 0; k < 2 && ok; k++)
        {
            Window w;

            if (edges[k] == INT64_MIN || edges[k] == INT64_MAX || edges[k] >= WINDOW_MAX_US)
                continue;
            if (!window_at(g, tp, edges[k], &w, err))
                ok = false;
            else if (w.lower_us != edges[k])
            {
                char at[48];

                civil_format_instant(edges[k], at, sizeof at);
                ok = err_set(err, EC_CONFIG, "pg_partman manages %s.%s: its partition %s.%s %s at "
                                             "%s, not at the start of a %s in %s",
                             t->schema, t->name, p->schema, p->name, k == 0 ? "starts" : "ends",
                             at, granularity_name(g), zone[0] ? zone : "UTC");
                err_detail(err, "v7fill creates the partitions of such a table as pg_partman "
                                "would, at midnight of the zone its windows show; nothing was "
                                "created.");
            }
        }
    }
    time_parser_free(tp);
    return ok;
}

bool
partman_follow_read(PgConn *c, const TargetTable *t, const char *window_tz, PartmanFollow *out,
                    Err *err)
{
    PartmanInfo pm;
    PGresult *res;
    bool ok = true;

    memset(out, 0, sizeof *out);
    if (!retention_partman(c, t->schema, t->name, &pm, err))
    {
        /* a retention v7fill cannot read is no reason to refuse partitions */
        if (!pm.manages || err->code != EC_CONFIG)
            return false;
        err_clear(err);
    }
    if (!pm.manages)
        return true;
    if (!read_config(c, t, &pm, &res, err))
    {
        err_prefix(err, "could not read %s.part_config", pm.schema);
        return cannot_follow(err, t, &pm);
    }
    if (PQntuples(res) == 0)
    {
        PQclear(res);
        return true;
    }
    (void) snprintf(out->schema, sizeof out->schema, "%s", pm.schema);
    (void) snprintf(out->parent, sizeof out->parent, "%s", PQgetvalue(res, 0, 0));
    out->has_template = !PQgetisnull(res, 0, 4);
    if (t->key_kind != KEY_TIMESTAMPTZ && t->key_kind != KEY_TIMESTAMP)
        ok = err_set(err, EC_CONFIG, "its key \"%s\" is %s; v7fill follows pg_partman's "
                                     "time-based sets on a timestamptz or timestamp key only",
                     t->key_column, catalog_key_sql_type(t->key_kind));
    else if (strcmp(PQgetvalue(res, 0, 1), t->key_column) != 0)
        ok = err_set(err, EC_CONFIG, "its control column \"%s\" is not the partition key \"%s\"",
                     PQgetvalue(res, 0, 1), t->key_column);
    else if (strcmp(PQgetvalue(res, 0, 5), "t") == 0)
        ok = err_set(err, EC_CONFIG, "it is sub-partitioned (%s.part_config_sub)", pm.schema);
    else
        ok = partman_naming(PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3), t->name, &out->g,
                            out->pattern, sizeof out->pattern, err);
    PQclear(res);
    if (!ok)
        return cannot_follow(err, t, &pm);
    if (t->key_kind == KEY_TIMESTAMPTZ)
    {
        if (window_tz)
            (void) snprintf(out->zone, sizeof out->zone, "%s", window_tz);
        else if (!database_zone(c, out->zone, sizeof out->zone, err))
            return false;
        if (strcmp(out->zone, "UTC") == 0)
            out->zone[0] = '\0';
    }
    if (!bounds_fit(t, out->g, out->zone, err))
    {
        if (err->code == EC_CONFIG)
            err_hint(err, "pg_partman starts windows at midnight of the TimeZone its maintenance "
                          "runs with; give that zone with --window-tz (e.g. --window-tz "
                          "Europe/Berlin).");
        return false;
    }
    out->follows = true;
    return true;
}
