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
    /* Added for the route stage: */
    unsigned int oid;  /* 0 for a planned (dry-run) partition */
    char *lower_text;  /* bound value in canonical text (uuid, "2026-07-01 00:00:00+00", */
    char *upper_text;  /* "1782864000000"); NULL for MINVALUE/MAXVALUE and DEFAULT */
    double reltuples;  /* planner's row estimate; -1 = never vacuumed/analyzed */
    bool planned;      /* added by a dry run: would be created, not in the catalog */
    bool detach_pending; /* in TargetTable.pending: a DETACH ... CONCURRENTLY stopped half-way */
} Partition;

/* A privilege on the parent (aclexplode of relacl / attacl), copied to new partitions. */
typedef struct Grant
{
    char *column;    /* NULL: table-level privilege */
    char *grantee;   /* NULL: PUBLIC */
    char *privilege; /* SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER */
    bool grantable;  /* WITH GRANT OPTION */
} Grant;

/* Cheap fingerprint of the partition list: count, sum of oids and sum of the
 * pg_class xmins of the partitions.  Attaching, detaching or altering a
 * partition changes it; comparing it is how v7fill knows whether its copy of
 * the list is still true without re-reading every bound. */
typedef struct CatalogStamp
{
    int64_t count;
    int64_t oid_sum;
    int64_t xmin_sum;
} CatalogStamp;

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
    Partition *partitions; /* sorted by lower bound; the DEFAULT partition, if any, last.
                            * Only what PostgreSQL routes to: no detach-pending partition */
    size_t npending;
    Partition *pending;    /* partitions left "detach pending" (PostgreSQL 14+): queries do
                            * not see them, no row is routed to them, yet their range cannot
                            * be attached again until the detach is finalized; by lower bound */
    bool has_default;
    char *owner;
    char *tablespace;     /* NULL = database default */
    /* Added for the route stage: */
    char *key_type;       /* format_type() of the key column */
    char *partkeydef;     /* e.g. "RANGE (id)", from pg_partitioned_table (no locks taken) */
    char *relacl;         /* the parent's ACL as text; NULL = default privileges */
    size_t ngrants;
    Grant *grants;        /* the parent's table and column privileges, owner's own excluded */
    CatalogStamp stamp;   /* of `partitions` as last read (not of `pending`) */
    bool stamp_valid;     /* false: the list must be re-read before it is trusted */
    /* Citus (citus.h): a distributed table, its partitions distributed with it */
    bool distributed;     /* in pg_dist_partition */
    char dist_method;     /* 'h' hash, 'n' reference, 'a'/'r' append/range; 0 if not */
    char *dist_column;    /* distribution column; NULL for a reference table */
    char *dist_type;      /* format_type() of dist_column */
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

/* The tables catalog_load_target can take, as TABLE is typed (regclass text:
 * schema-qualified when off the search_path, quoted when needed), in name
 * order: RANGE-partitioned on one column of a supported key type, not
 * themselves partitions.  For shell completion.  *out is an array of *n
 * strings; free each and the array. */
V7FILL_MUST_CHECK bool catalog_list_targets(PgConn *c, char ***out, size_t *n, Err *err);

/* Column index by name, or -1. */
int catalog_column_index(const TargetTable *t, const char *name);

/* The non-default partition whose range holds `us`, or NULL. */
const Partition *catalog_partition_for(const TargetTable *t, int64_t us);

/* Insert *p into t's partition list, keeping the order; takes over p's
 * strings (p is zeroed). */
void catalog_add_partition(TargetTable *t, Partition *p);

/* Fingerprint of the target's partitions now (one cheap query). */
V7FILL_MUST_CHECK bool catalog_read_stamp(PgConn *c, const TargetTable *t, CatalogStamp *out,
                                          Err *err);

/* A foreign key of another table that references a partitioned parent. */
typedef struct IncomingFk
{
    char *schema;    /* the referencing table's */
    char *table;
    char *name;      /* the constraint, as declared (not a partition's copy) */
    size_t ncols;
    char **cols;     /* referencing columns */
    char **refcols;  /* the parent's columns they reference, in the same order */
} IncomingFk;

/* The foreign keys referencing table `oid` (ATTACH takes SHARE ROW EXCLUSIVE
 * on their tables; DETACH refuses while their rows reference the partition).
 * *n = 0 when there are none.  Free with catalog_incoming_fks_free. */
V7FILL_MUST_CHECK bool catalog_incoming_fks(PgConn *c, unsigned int oid, IncomingFk **out,
                                            size_t *n, Err *err);
void catalog_incoming_fks_free(IncomingFk *fks, size_t n);

/* The SQL that settles partition p of schema.table left "detach pending":
 * *finalize ends the detach (the rows leave the table); *attach puts it back
 * with its bounds (its rows count again).  Both quoted, caller frees. */
void catalog_pending_sql(PgConn *c, const char *schema, const char *table, const Partition *p,
                         char **finalize, char **attach);
/* "public.r (foreign key r_pid_fkey), ..." into out (truncated to size). */
void catalog_incoming_fks_describe(const IncomingFk *fks, size_t n, char *out, size_t size);

/* Parse pg_get_expr(relpartbound) of a partition of a `kind`-keyed table
 * ("FOR VALUES FROM ('...') TO (MAXVALUE)", "DEFAULT") into p's is_default,
 * lower_us/upper_us and lower_text/upper_text (allocated; freed by the caller
 * or catalog_target_free).  uuid bounds map to the first microsecond whose
 * v7fill ids all lie at or above them (the floor of a millisecond, pg_partman's
 * bare one too, to the millisecond; a bound inside one to the microsecond
 * `v7fill uuid time` shows, rounded up);
 * timestamptz/timestamp text is read as printed under DateStyle ISO, any
 * offset; bigint is epoch milliseconds.  Anything else → EC_FORMAT. */
V7FILL_MUST_CHECK bool catalog_parse_bound(KeyKind kind, const char *expr, Partition *p,
                                           Err *err);

/* Order of two bounds, exactly: by time, and bounds of one microsecond (uuid
 * bounds inside a millisecond) by where they sit among UUIDv7 ids.  A NULL
 * text with a finite time is the floor of its millisecond (a window edge);
 * MINVALUE/MAXVALUE are INT64_MIN/MAX.  <0, 0, >0. */
int catalog_bound_cmp(int64_t us_a, const char *text_a, int64_t us_b, const char *text_b);

/* Bound value for time `us` as canonical text (unquoted): the UUIDv7 floor in
 * `style`, "2026-07-01 00:00:00+00" (timestamptz, explicit offset so the DDL
 * means the same under any TimeZone), "2026-07-01 00:00:00" (timestamp) or
 * epoch milliseconds.  `us` must be representable (uuid: 1970..10889, whole
 * milliseconds for uuid/bigint); otherwise EC_FORMAT.  Caller frees. */
V7FILL_MUST_CHECK bool catalog_bound_literal(KeyKind kind, BoundStyle style, int64_t us,
                                             char **out, Err *err);

/* Rows of a partition as `report` and `partitions --list` show them. */
typedef struct RowEstimate
{
    unsigned int oid;
    double rows; /* < 0 unknown: analyzed empty (or never) and holding rows now */
    bool exact;  /* a partition of zero bytes: exactly 0 */
} RowEstimate;

/* Estimated rows of every partition of t (one query, no locks): reltuples
 * scaled to the current size as the planner does, 0 for an empty file, -1
 * when unknown rather than a stale 0.  *out (free()) holds *n entries, by oid. */
V7FILL_MUST_CHECK bool catalog_estimate_rows(PgConn *c, const TargetTable *t, RowEstimate **out,
                                             size_t *n, Err *err);

/* "uuid7", "timestamptz", "timestamp", "bigint-ms" / "min-v7", "bare". */
const char *catalog_key_kind_name(KeyKind kind);
const char *catalog_bound_style_name(BoundStyle style);
/* The SQL type of the key for casts in DDL: "pg_catalog.uuid", ... */
const char *catalog_key_sql_type(KeyKind kind);

#endif /* V7FILL_CATALOG_H */
