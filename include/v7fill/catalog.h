/*
 * What v7fill knows about a target table, read from the catalog: its
 * partitioning, key, columns and partitions (with bounds decoded to times).
 */
#ifndef V7FILL_CATALOG_H
#define V7FILL_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"

typedef enum KeyKind
{
    KEY_UUID7,       /* uuid key, UUIDv7 bounds */
    KEY_TIMESTAMPTZ, /* timestamptz key */
    KEY_TIMESTAMP,   /* timestamp without time zone (read as UTC) */
    KEY_BIGINT_MS,   /* bigint holding epoch milliseconds */
} KeyKind;

typedef enum BoundStyle
{
    BOUND_STYLE_MIN_V7, /* ...-7000-8000-000000000000 (v7fill's default) */
    BOUND_STYLE_BARE,   /* ...-0000-0000-000000000000 (pg_partman 5.2+) */
} BoundStyle;

typedef struct Column
{
    char *name;
    char *type;        /* format_type(), e.g. "timestamp with time zone" */
    bool not_null;
    bool has_default;  /* a DEFAULT, identity or generated expression */
    bool generated;    /* GENERATED ALWAYS AS ... STORED: never written */
} Column;

typedef struct Partition
{
    char *schema;
    char *name;
    bool is_default;
    int64_t lower_us;  /* bounds as times, [lower, upper); MINVALUE/MAXVALUE as INT64_MIN/MAX */
    int64_t upper_us;
    char *bound_expr;  /* pg_get_expr(relpartbound) as the server printed it */
} Partition;

typedef struct TargetTable
{
    char *schema;
    char *name;
    unsigned int oid;
    KeyKind key_kind;
    char *key_column;
    BoundStyle bound_style;
    size_t ncolumns;
    Column *columns;
    size_t npartitions;
    Partition *partitions; /* sorted by lower bound; the DEFAULT partition, if any, last */
    bool has_default;
    char *owner;
    char *tablespace;     /* NULL = database default */
} TargetTable;

/* Resolve `table` (schema-qualified or through search_path; as typed in SQL,
 * so "Mixed Case" needs its quotes) and read everything above.  Unsupported
 * tables (not partitioned, LIST/HASH, multi-column or expression key, an
 * unsupported key type) → EC_CONFIG error saying what is supported. */
V7FILL_MUST_CHECK bool catalog_load_target(PgConn *c, const char *table, TargetTable **out,
                                           Err *err);
/* Re-read the partitions of an already loaded target. */
V7FILL_MUST_CHECK bool catalog_refresh_partitions(PgConn *c, TargetTable *t, Err *err);
void catalog_target_free(TargetTable *t);

/* Column index by name, or -1. */
int catalog_column_index(const TargetTable *t, const char *name);

/* The non-default partition whose range holds `us`, or NULL. */
const Partition *catalog_partition_for(const TargetTable *t, int64_t us);

#endif /* V7FILL_CATALOG_H */
