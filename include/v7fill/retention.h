/*
 * The retention of a target table and where it comes from.  In order:
 *
 *   1. a value given on the command line (--retention DURATION);
 *   2. a retention v7fill stored for the table (`v7fill retention TABLE set`),
 *      in v7fill.retention;
 *   3. pg_partman's part_config.retention, when pg_partman is installed and
 *      manages the table;
 *   4. none: windows are never retired.
 *
 * The rule the retention drives (pg_partman's): the window [lower, upper)
 * retires at upper + retention.  Maintenance retires it once now > upper +
 * retention; a row whose window has upper + retention <= now is expired.
 *
 * All calls run their own statements: call them with no transaction open
 * (a failed read would otherwise abort the caller's transaction).
 */
#ifndef V7FILL_RETENTION_H
#define V7FILL_RETENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"

typedef enum RetentionSource
{
    RETENTION_NONE = 0,
    RETENTION_CLI,     /* --retention on the command line */
    RETENTION_STORED,  /* v7fill.retention (`v7fill retention TABLE set`) */
    RETENTION_PARTMAN, /* pg_partman's part_config.retention */
} RetentionSource;

typedef struct Retention
{
    RetentionSource source;
    int64_t us;       /* > 0, or 0 with RETENTION_NONE */
    char text[128];   /* as written at the source: "90d", "30 days" */
    char where[256];  /* "--retention", "v7fill.retention", "partman.part_config (pg_partman 4.7.2)" */
} Retention;

/* What pg_partman knows about a table. */
typedef struct PartmanInfo
{
    bool installed;          /* the extension exists in this database */
    bool manages;            /* its part_config has a row for the table */
    char schema[64];         /* the extension's schema ("partman", "public", ...) */
    char version[32];
    bool has_retention;      /* part_config.retention is set (and an interval) */
    char retention[128];     /* as stored, e.g. "30 days" */
    int64_t retention_us;    /* the interval's length: 1 month = 30 days, 1 year = 365.25 days */
    char interval[64];       /* part_config.partition_interval, "" when unknown */
} PartmanInfo;

/* "--retention", "stored by v7fill", "pg_partman", "none". */
const char *retention_source_name(RetentionSource s);

/* "90d (--retention)", "30 days (pg_partman, partman.part_config)", "none". */
void retention_describe(const Retention *r, char *out, size_t size);

/* Parse a command-line retention ("90d", "P30D", ...): > 0, else EC_USAGE. */
V7FILL_MUST_CHECK bool retention_parse(const char *text, Retention *out, Err *err);

/* The retention in force for schema.table.  `cli_value` (NULL = not given)
 * wins; then the stored one; then pg_partman's.  Reads only: nothing is
 * created (a plan may call it).  A pg_partman retention that is not an
 * interval, or a part_config that cannot be read, is an error whose hint
 * says to pass --retention. */
V7FILL_MUST_CHECK bool retention_resolve(PgConn *c, const char *schema, const char *table,
                                         const char *cli_value, Retention *out, Err *err);

/* Create v7fill.retention (and the rest of the v7fill schema) if missing. */
V7FILL_MUST_CHECK bool retention_setup(PgConn *c, Err *err);

/* The stored retention; out->source is RETENTION_NONE when there is none
 * (or the table v7fill.retention does not exist). */
V7FILL_MUST_CHECK bool retention_stored_get(PgConn *c, const char *schema, const char *table,
                                            Retention *out, Err *err);
/* Store (replace) the retention of schema.table; `text` is parsed as a
 * duration (> 0, else EC_USAGE).  Creates v7fill.retention when missing. */
V7FILL_MUST_CHECK bool retention_stored_set(PgConn *c, const char *schema, const char *table,
                                            const char *text, Retention *out, Err *err);
/* Remove it; *existed (may be NULL) tells whether there was one. */
V7FILL_MUST_CHECK bool retention_stored_clear(PgConn *c, const char *schema, const char *table,
                                              bool *existed, Err *err);

/* Read pg_partman's view of schema.table.  Not installed, or a part_config
 * without the columns this needs (parent_table), is not an error: out says
 * what was found. */
V7FILL_MUST_CHECK bool retention_partman(PgConn *c, const char *schema, const char *table,
                                         PartmanInfo *out, Err *err);

#endif /* V7FILL_RETENTION_H */
