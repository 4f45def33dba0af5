/*
 * Where a table's retention comes from: the command line, v7fill's own
 * v7fill.retention, or pg_partman's part_config (read, never written).
 *
 * pg_partman is read defensively: its schema is whatever CREATE EXTENSION
 * chose, and part_config's columns differ across versions, so the schema
 * comes from pg_extension and the columns from pg_attribute before anything
 * is selected.  Its retention is interval text; the server converts it, so
 * '1 mon' or '30 days 12:00' mean exactly what they mean to pg_partman.
 */
#include "v7fill/retention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/state.h"
#include "v7fill/timeparse.h"

static const char *const create_sql =
    "CREATE TABLE IF NOT EXISTS v7fill.retention ("
    "  target_schema text NOT NULL, target_table text NOT NULL,"
    "  retention_us bigint NOT NULL CHECK (retention_us > 0),"
    "  retention_text text NOT NULL,"
    "  updated_at timestamptz NOT NULL DEFAULT now());"
    /* The policy follows the table, not its name (as runs and checkpoints do):
     * keyed by the table's oid.  Rows stored by earlier versions have none
     * until they are next read; the names are only what the table was called
     * (earlier versions keyed the rows by them: that primary key goes). */
    "ALTER TABLE v7fill.retention ADD COLUMN IF NOT EXISTS target_oid oid;"
    "ALTER TABLE v7fill.retention DROP CONSTRAINT IF EXISTS retention_pkey;"
    "CREATE UNIQUE INDEX IF NOT EXISTS retention_target_oid ON v7fill.retention (target_oid)";

/* v7fill.retention has the target_oid column (SQL boolean expression). */
#define HAS_TARGET_OID                                                                          \
    "EXISTS (SELECT 1 FROM pg_catalog.pg_attribute "                                            \
    "WHERE attrelid = to_regclass('v7fill.retention') "                                         \
    "AND attname = 'target_oid' AND NOT attisdropped)"

/* Whether v7fill.retention exists ("t"/"f") and has the target_oid column. */
static const char *const q_retention_state =
    "SELECT to_regclass('v7fill.retention') IS NOT NULL, " HAS_TARGET_OID;

/* The oid of schema.table as text ("0" when there is none). */
static bool
table_oid(PgConn *c, const char *schema, const char *table, char *out, size_t size, Err *err)
{
    const char *params[2] = {schema, table};
    PGresult *res;

    if (!pg_query(c,
                  "SELECT coalesce((SELECT c.oid FROM pg_catalog.pg_class c "
                  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                  " WHERE n.nspname = $1 AND c.relname = $2), 0)::text",
                  2, params, &res, err))
        return false;
    (void) snprintf(out, size, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return true;
}

/* Whether v7fill.retention exists and has target_oid; an old one without it
 * is brought up to date first.  `need_oid`: failing that is an error; else
 * (a role that may only read) the rows are read by name as before. */
static bool
retention_table_ready(PgConn *c, bool need_oid, bool *exists, bool *has_oid, Err *err)
{
    PGresult *res;

    if (!pg_query(c, q_retention_state, 0, NULL, &res, err))
        return false;
    *exists = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    *has_oid = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    PQclear(res);
    if (!*exists || *has_oid)
        return true;
    if (retention_setup(c, err))
    {
        *has_oid = true;
        return true;
    }
    if (need_oid)
        return false;
    log_debug("v7fill.retention read by name: %s", err->msg);
    err_clear(err);
    return true;
}

const char *
retention_source_name(RetentionSource s)
{
    switch (s)
    {
        case RETENTION_NONE:
            return "none";
        case RETENTION_CLI:
            return "--retention";
        case RETENTION_STORED:
            return "stored by v7fill";
        case RETENTION_PARTMAN:
            return "pg_partman";
    }
    return "?";
}

void
retention_describe(const Retention *r, char *out, size_t size)
{
    if (r->source == RETENTION_NONE)
        (void) snprintf(out, size, "none");
    else if (r->source == RETENTION_CLI)
        (void) snprintf(out, size, "%s (--retention)", r->text);
    else
        (void) snprintf(out, size, "%s (%s, %s)", r->text, retention_source_name(r->source),
                        r->where);
}

bool
retention_parse(const char *text, Retention *out, Err *err)
{
    int64_t us;

    memset(out, 0, sizeof *out);
    if (!duration_parse(text, &us, err))
    {
        err_prefix(err, "invalid retention");
        err->code = EC_USAGE;
        return false;
    }
    if (us <= 0)
    {
        err_set(err, EC_USAGE, "invalid retention \"%s\": it must be longer than zero", text);
        err_hint(err, "Without retention windows are never retired; leave the option out.");
        return false;
    }
    out->source = RETENTION_CLI;
    out->us = us;
    (void) snprintf(out->text, sizeof out->text, "%s", text);
    (void) snprintf(out->where, sizeof out->where, "--retention");
    return true;
}

bool
retention_setup(PgConn *c, Err *err)
{
    return state_setup(c, err) &&
           state_create_once(c,
                             "SELECT to_regclass('v7fill.retention') IS NOT NULL AND "
                             HAS_TARGET_OID,
                             create_sql, "v7fill.retention", err);
}

bool
retention_stored_get(PgConn *c, const char *schema, const char *table, Retention *out, Err *err)
{
    char oid[16];
    const char *params[3] = {schema, table, oid};
    PGresult *res;
    bool exists;
    bool has_oid;
    int mine = -1;

    memset(out, 0, sizeof *out);
    /* A plan must not create anything: a missing table means none stored. */
    if (!retention_table_ready(c, false, &exists, &has_oid, err))
    {
        err_prefix(err, "could not read the retention stored for %s.%s", schema, table);
        return false;
    }
    if (!exists)
        return true;
    if (!table_oid(c, schema, table, oid, sizeof oid, err))
        return false;
    /* The row of this table (by oid, whatever its name was), else one stored
     * under its name: by an earlier version (no oid: it applies, and the oid
     * is recorded), or for another table since renamed or dropped (not
     * applied). */
    if (!pg_query(c,
                  has_oid
                      ? "SELECT r.retention_us, r.retention_text, r.target_oid IS NULL, "
                        "       r.target_oid = $3::oid, "
                        "       coalesce((SELECT c.oid::pg_catalog.regclass::text FROM "
                        "                 pg_catalog.pg_class c WHERE c.oid = r.target_oid), '') "
                        "  FROM v7fill.retention r "
                        " WHERE r.target_oid = $3::oid "
                        "    OR (r.target_schema = $1 AND r.target_table = $2) "
                        " ORDER BY r.target_oid = $3::oid DESC NULLS LAST, "
                        "          r.target_oid IS NULL DESC"
                      : "SELECT retention_us, retention_text, true, NULL, '' "
                        "  FROM v7fill.retention WHERE target_schema = $1 AND target_table = $2",
                  has_oid ? 3 : 2, params, &res, err))
    {
        err_prefix(err, "could not read the retention stored for %s.%s", schema, table);
        return false;
    }
    for (int i = 0; i < PQntuples(res) && mine < 0; i++)
        if (PQgetvalue(res, i, 3)[0] == 't' || PQgetvalue(res, i, 2)[0] == 't')
            mine = i;
    if (mine < 0 && PQntuples(res) > 0)
    {
        const char *now = PQgetvalue(res, 0, 4);

        log_warn("v7fill.retention holds a retention (%s) stored for %s.%s when that name "
                 "belonged to another table (%s%s); it is not applied to this one",
                 PQgetvalue(res, 0, 1), schema, table, now[0] ? "now " : "since dropped",
                 now);
    }
    if (mine >= 0)
    {
        bool legacy = PQgetvalue(res, mine, 2)[0] == 't';

        out->source = RETENTION_STORED;
        out->us = strtoll(PQgetvalue(res, mine, 0), NULL, 10);
        (void) snprintf(out->text, sizeof out->text, "%s", PQgetvalue(res, mine, 1));
        (void) snprintf(out->where, sizeof out->where, "v7fill.retention");
        PQclear(res);
        /* The table's current name; the oid of a row an earlier version stored. */
        if (has_oid && !pg_exec_params(c,
                            "UPDATE v7fill.retention SET target_oid = $3::oid, "
                            "target_schema = $1, target_table = $2 "
                            "WHERE (target_oid = $3::oid OR (target_oid IS NULL AND "
                            "target_schema = $1 AND target_table = $2)) "
                            "AND (target_oid IS NULL OR target_schema <> $1 OR target_table <> $2)",
                            3, params, err))
        {
            /* A role that may only read: the row applies all the same. */
            log_debug("could not record the oid of the retention of %s.%s (%s): %s", schema,
                      table, legacy ? "stored by an earlier version" : "renamed", err->msg);
            err_clear(err);
        }
        return true;
    }
    PQclear(res);
    return true;
}

bool
retention_stored_set(PgConn *c, const char *schema, const char *table, const char *text,
                     Retention *out, Err *err)
{
    char us[24];
    char oid[16];
    const char *params[5];

    if (!retention_parse(text, out, err))
        return false;
    if (!retention_setup(c, err))
        return false;
    if (!table_oid(c, schema, table, oid, sizeof oid, err))
        return false;
    (void) snprintf(us, sizeof us, "%lld", (long long) out->us);
    params[0] = schema;
    params[1] = table;
    params[2] = us;
    params[3] = text;
    params[4] = oid;
    /* Replaces the table's row (by oid) and one an earlier version stored
     * under its name; a row of another table that had this name stays. */
    if (!pg_exec_params(c,
                        "WITH legacy AS (DELETE FROM v7fill.retention WHERE target_oid IS NULL "
                        "AND target_schema = $1 AND target_table = $2) "
                        "INSERT INTO v7fill.retention (target_schema, target_table, "
                        "retention_us, retention_text, target_oid) VALUES ($1, $2, $3, $4, $5) "
                        "ON CONFLICT (target_oid) DO UPDATE SET "
                        "target_schema = EXCLUDED.target_schema, "
                        "target_table = EXCLUDED.target_table, "
                        "retention_us = EXCLUDED.retention_us, "
                        "retention_text = EXCLUDED.retention_text, updated_at = now()",
                        5, params, err))
    {
        err_prefix(err, "could not store the retention of %s.%s", schema, table);
        return false;
    }
    out->source = RETENTION_STORED;
    (void) snprintf(out->where, sizeof out->where, "v7fill.retention");
    return true;
}

bool
retention_stored_clear(PgConn *c, const char *schema, const char *table, bool *existed, Err *err)
{
    char oid[16];
    const char *params[3] = {schema, table, oid};
    PGresult *res;
    bool exists;
    bool has_oid;

    if (existed)
        *existed = false;
    if (!retention_table_ready(c, true, &exists, &has_oid, err))
        return false;
    if (!exists)
        return true;
    if (!table_oid(c, schema, table, oid, sizeof oid, err))
        return false;
    if (!pg_query(c,
                  "DELETE FROM v7fill.retention WHERE target_oid = $3::oid OR "
                  "(target_oid IS NULL AND target_schema = $1 AND target_table = $2)",
                  3, params, &res, err))
    {
        err_prefix(err, "could not clear the retention of %s.%s", schema, table);
        return false;
    }
    if (existed)
        *existed = strcmp(PQcmdTuples(res), "0") != 0;
    PQclear(res);
    return true;
}

/* ------------------------------------------------------------ pg_partman */

static bool
partman_columns(PgConn *c, const char *regclass_text, bool *parent, bool *retention,
                bool *interval, Err *err)
{
    const char *params[1] = {regclass_text};
    PGresult *res;

    *parent = *retention = *interval = false;
    if (!pg_query(c,
                  "SELECT a.attname FROM pg_catalog.pg_attribute a "
                  "WHERE a.attrelid = $1::pg_catalog.regclass AND a.attnum > 0 "
                  "AND NOT a.attisdropped",
                  1, params, &res, err))
        return false;
    for (int i = 0; i < PQntuples(res); i++)
    {
        const char *name = PQgetvalue(res, i, 0);

        if (strcmp(name, "parent_table") == 0)
            *parent = true;
        else if (strcmp(name, "retention") == 0)
            *retention = true;
        else if (strcmp(name, "partition_interval") == 0)
            *interval = true;
    }
    PQclear(res);
    return true;
}

static bool
partman_err(Err *err, const PartmanInfo *p)
{
    err_prefix(err, "could not read pg_partman's configuration (%s.part_config)", p->schema);
    if (!err->hint[0])
        err_hint(err, "Pass the retention explicitly with --retention, which is used without "
                      "looking at pg_partman.");
    return false;
}

bool
retention_partman(PgConn *c, const char *schema, const char *table, PartmanInfo *out, Err *err)
{
    PGresult *res;
    char *q_config;
    char *sql;
    char *plain;
    char *quoted_s;
    char *quoted_t;
    char *quoted;
    const char *params[2];
    bool has_parent;
    bool has_retention;
    bool has_interval;
    bool ok;

    memset(out, 0, sizeof *out);
    if (!pg_query(c,
                  "SELECT n.nspname, e.extversion, "
                  "       pg_catalog.to_regclass(pg_catalog.quote_ident(n.nspname) || "
                  "'.part_config')::pg_catalog.oid::text "
                  "  FROM pg_catalog.pg_extension e "
                  "  JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
                  " WHERE e.extname = 'pg_partman'",
                  0, NULL, &res, err))
        return false;
    if (PQntuples(res) == 0)
    {
        PQclear(res);
        return true;
    }
    out->installed = true;
    (void) snprintf(out->schema, sizeof out->schema, "%s", PQgetvalue(res, 0, 0));
    (void) snprintf(out->version, sizeof out->version, "%s", PQgetvalue(res, 0, 1));
    if (PQgetisnull(res, 0, 2))
    {
        /* An extension without part_config is not a pg_partman we know. */
        PQclear(res);
        return true;
    }
    {
        char oid[16];

        (void) snprintf(oid, sizeof oid, "%s", PQgetvalue(res, 0, 2));
        PQclear(res);
        if (!partman_columns(c, oid, &has_parent, &has_retention, &has_interval, err))
            return partman_err(err, out);
    }
    if (!has_parent)
        return true;

    q_config = pg_qualified(c, out->schema, "part_config");
    sql = xasprintf("SELECT %s, %s FROM %s WHERE parent_table IN ($1, $2) LIMIT 1",
                    has_retention ? "retention::text" : "NULL::text",
                    has_interval ? "partition_interval::text" : "NULL::text", q_config);
    /* pg_partman keeps parent_table as 'schema.table' as it was given to
     * create_parent(): plain for ordinary names, quoted for names that need
     * it.  Both spellings are tried. */
    plain = xasprintf("%s.%s", schema, table);
    quoted_s = pg_ident(c, schema);
    quoted_t = pg_ident(c, table);
    quoted = xasprintf("%s.%s", quoted_s, quoted_t);
    params[0] = plain;
    params[1] = quoted;
    ok = pg_query(c, sql, 2, params, &res, err);
    free(sql);
    free(q_config);
    free(plain);
    free(quoted_s);
    free(quoted_t);
    free(quoted);
    if (!ok)
        return partman_err(err, out);
    if (PQntuples(res) == 0)
    {
        PQclear(res);
        return true;
    }
    out->manages = true;
    if (!PQgetisnull(res, 0, 1))
        (void) snprintf(out->interval, sizeof out->interval, "%s", PQgetvalue(res, 0, 1));
    if (!PQgetisnull(res, 0, 0) && PQgetvalue(res, 0, 0)[0] != '\0')
    {
        (void) snprintf(out->retention, sizeof out->retention, "%s", PQgetvalue(res, 0, 0));
        out->has_retention = true;
    }
    PQclear(res);
    if (!out->has_retention)
        return true;

    /* A bare number is an id-based retention (a count of ids), which the
     * server would happily read as seconds. */
    if (strspn(out->retention, "0123456789 ") == strlen(out->retention))
    {
        err_set(err, EC_CONFIG,
                "pg_partman's retention \"%s\" for %s.%s is not an interval", out->retention,
                schema, table);
        err_detail(err, "A bare number is the retention of an id-based partition set.");
        err_hint(err, "v7fill understands time-based retention only; pass --retention.");
        return false;
    }
    params[0] = out->retention;
    if (!pg_query(c, "SELECT extract(epoch FROM $1::interval)::float8", 1, params, &res, err))
    {
        char msg[sizeof err->msg];

        memcpy(msg, err->msg, sizeof msg);
        err_set(err, EC_CONFIG,
                "pg_partman's retention \"%s\" for %s.%s is not an interval", out->retention,
                schema, table);
        err_detail(err, "%s", msg);
        err_hint(err, "v7fill understands time-based retention only; pass --retention.");
        return false;
    }
    {
        double s = strtod(PQgetvalue(res, 0, 0), NULL);

        PQclear(res);
        if (!(s > 0) || s > 9.2e12)
        {
            err_set(err, EC_CONFIG, "pg_partman's retention \"%s\" for %s.%s is not a positive "
                                    "length of time",
                    out->retention, schema, table);
            err_hint(err, "Fix part_config.retention, or pass --retention.");
            return false;
        }
        out->retention_us = llround(s * 1e6);
    }
    return true;
}

bool
retention_resolve(PgConn *c, const char *schema, const char *table, const char *cli_value,
                  Retention *out, Err *err)
{
    PartmanInfo pm;

    if (cli_value)
        return retention_parse(cli_value, out, err);
    if (!retention_stored_get(c, schema, table, out, err))
        return false;
    if (out->source == RETENTION_STORED)
        return true;
    if (!retention_partman(c, schema, table, &pm, err))
        return false;
    memset(out, 0, sizeof *out);
    if (pm.manages && pm.has_retention)
    {
        out->source = RETENTION_PARTMAN;
        out->us = pm.retention_us;
        (void) snprintf(out->text, sizeof out->text, "%s", pm.retention);
        (void) snprintf(out->where, sizeof out->where, "%s.part_config (pg_partman %s)",
                        pm.schema, pm.version);
    }
    return true;
}
