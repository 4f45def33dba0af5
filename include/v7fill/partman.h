/*
 * Following pg_partman for a table in its part_config: the granularity,
 * names, zone and template it creates partitions with, so that the windows
 * v7fill creates (history pg_partman never made, windows an import needs)
 * are the ones pg_partman would have made and its run_maintenance() goes on.
 */
#ifndef V7FILL_PARTMAN_H
#define V7FILL_PARTMAN_H

#include <stdbool.h>
#include <stddef.h>

#include "v7fill/catalog.h"
#include "v7fill/err.h"
#include "v7fill/partitions.h"
#include "v7fill/pg.h"

typedef struct PartmanFollow
{
    bool follows;          /* pg_partman manages the table: the fields below apply */
    Granularity g;
    char pattern[160];     /* window_name pattern giving pg_partman's names */
    char zone[64];         /* the zone its windows start at midnight of; "" = UTC */
    char schema[64];       /* the extension's schema */
    char parent[160];      /* part_config.parent_table as stored */
    bool has_template;     /* part_config.template_table is set */
} PartmanFollow;

/* Granularity and name pattern for pg_partman's partition_interval (as
 * interval text, "1 mon") and datetime_string ("YYYY_MM") of `table`,
 * truncated as pg_partman 4.7's check_name_length() does.  Anything else →
 * false with EC_CONFIG saying why.  Pure. */
V7FILL_MUST_CHECK bool partman_naming(const char *interval, const char *datetime_string,
                                      const char *table, Granularity *g, char *pattern,
                                      size_t size, Err *err);

/* Read pg_partman's configuration for t.  Not managed → out->follows false.
 * Managed in a way v7fill can follow → out filled; `window_tz` (the user's
 * --window-tz, NULL if none) wins over the database's TimeZone, and the zone
 * must put every existing bound of t at a window edge.  Otherwise EC_CONFIG
 * saying why v7fill creates no partition there. */
V7FILL_MUST_CHECK bool partman_follow_read(PgConn *c, const TargetTable *t, const char *window_tz,
                                           PartmanFollow *out, Err *err);

#endif /* V7FILL_PARTMAN_H */
