/*
 * The source table's columns a stream last applied with, kept in the target
 * (v7fill.stream.columns), so that a column dropped, or a type changed, while
 * the stream was stopped is noticed when it starts again: the first Relation
 * message after a restart only shows the table as it is then.
 *
 *   at start, and when the stream reads the table's columns anew: the stored
 *     list is compared with the source's catalog (stream_columns_check),
 *     then the catalog's list is stored
 *   while streaming: the source compares each Relation message with the
 *     ones before it in the session (source_pgoutput.c)
 */
#ifndef V7FILL_STREAM_COLUMNS_H
#define V7FILL_STREAM_COLUMNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"

typedef struct StreamColumn
{
    char *name;
    uint32_t type_oid;
    char *type; /* format_type(), for messages */
} StreamColumn;

typedef struct StreamColumns
{
    size_t n;
    StreamColumn *cols;
} StreamColumns;

void stream_columns_free(StreamColumns *c);
/* The source table's columns as its catalog has them now, in attnum order. */
V7FILL_MUST_CHECK bool stream_columns_read_source(PgConn *src, const char *schema,
                                                  const char *table, StreamColumns *out,
                                                  Err *err);
/* The list stored for the slot (n = 0: none yet: a new stream, or one an
 * older version ran). */
/* table: the stream's target (several tables on one slot), NULL: the slot's row. */
V7FILL_MUST_CHECK bool stream_columns_get(PgConn *target, const char *slot, const char *table,
                                          StreamColumns *out, Err *err);
/* Store the list (a statement of its own). */
V7FILL_MUST_CHECK bool stream_columns_put(PgConn *target, const char *slot, const char *table,
                                          const StreamColumns *cols, Err *err);

/* Where a source column's values go: the target column's name and type
 * (format_type) in *column and *type; false: nowhere (ignored, or the target
 * has no such column). */
typedef bool (*StreamColumnTarget)(void *ctx, const char *source_column, const char **column,
                                   const char **type);

/* Each stored column whose values go to a target column must still be in
 * `now` with the same type: else EC_CONFIG naming the column and what to do.
 * A type change is accepted once the target column has the new type.
 * relation: "schema.table" of the source; target: the target table. */
V7FILL_MUST_CHECK bool stream_columns_check(const StreamColumns *stored, const StreamColumns *now,
                                            StreamColumnTarget to, void *ctx,
                                            const char *relation, const char *target, Err *err);

#endif /* V7FILL_STREAM_COLUMNS_H */
