/*
 * The source table of a migration, described from its catalog, and the DDL
 * of its UUIDv7 target: the source's columns with the integer key kept as
 * legacy_id (same type, NOT NULL, no default), a new id uuid PRIMARY KEY,
 * PARTITION BY RANGE (id); the source's indexes and CHECK constraints
 * recreated where a partitioned table allows it, with a note for each that
 * is not (or not as it was).
 */
#ifndef V7FILL_MIGRATE_DDL_H
#define V7FILL_MIGRATE_DDL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/mem.h"
#include "v7fill/pg.h"

typedef struct MigrateColumn
{
    char name[64];
    char type[128];       /* format_type */
    bool not_null;
    char *default_expr;   /* NULL: none */
} MigrateColumn;

typedef struct MigrateSource
{
    char schema[64];
    char table[64];
    MigrateColumn *cols;
    size_t ncols;
    size_t key;           /* index into cols: the single-column integer PRIMARY KEY */
    size_t time;          /* index into cols: timestamptz, timestamp or date */
    char key_type[32];    /* smallint | integer | bigint */
    Buf index_ddl;        /* CREATE INDEX statements for the target ("%1$s": its name) */
    Buf check_ddl;        /* ALTER TABLE ... ADD CONSTRAINT ... CHECK */
    Buf notes;            /* one line each: what is not recreated (or differently), why */
    size_t nchildren_fk;  /* foreign keys referencing the source (children) */
    Buf children_fk;      /* "schema.table(col)" of each, one a line */
} MigrateSource;

/* Describe src_schema.src_table on the source: EC_CONFIG when it does not
 * exist, the key is not its single-column smallint/integer/bigint PRIMARY
 * KEY, or the time column is not timestamptz, timestamp or date. */
V7FILL_MUST_CHECK bool migrate_ddl_describe(PgConn *src, const char *src_schema,
                                            const char *src_table, const char *key,
                                            const char *time_column, MigrateSource *out,
                                            Err *err);
void migrate_source_free(MigrateSource *s);

/* The target's DDL (CREATE TABLE, its indexes and CHECKs), one statement a
 * line, each ending in ';'.  q quotes identifiers (any connection). */
void migrate_ddl_target(PgConn *q, const MigrateSource *s, const char *into_schema,
                        const char *into_table, Buf *out);
/* The map's DDL: map (legacy_id <key type> PRIMARY KEY, id uuid NOT NULL [UNIQUE]);
 * without UNIQUE on a Citus target (the map is distributed on legacy_id there). */
void migrate_ddl_map(PgConn *q, const MigrateSource *s, const char *into_schema,
                     const char *map_table, bool id_unique, Buf *out);
/* An existing target: id uuid, legacy_id of the key's type, and every other
 * source column with the same type (EC_CONFIG naming the first that is not).
 * It must be partitioned by RANGE (id). */
V7FILL_MUST_CHECK bool migrate_ddl_check_target(PgConn *target, const MigrateSource *s,
                                                const char *into_schema, const char *into_table,
                                                Err *err);

#endif /* V7FILL_MIGRATE_DDL_H */
