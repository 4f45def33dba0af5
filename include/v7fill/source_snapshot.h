/*
 * The initial copy of `v7fill stream` as a Source: one source table read on
 * its own ordinary connection, under the snapshot exported by the slot's
 * creation (replconn_create_slot), through COPY ... TO STDOUT (FORMAT csv)
 * and the CSV source over the COPY OUT bytes.
 */
#ifndef V7FILL_SOURCE_SNAPSHOT_H
#define V7FILL_SOURCE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/replconn.h"
#include "v7fill/source.h"

/* A new ordinary connection to the source: BEGIN ISOLATION LEVEL REPEATABLE
 * READ, READ ONLY; SET TRANSACTION SNAPSHOT '<snapshot>' (NULL: no snapshot, a
 * plain repeatable-read view, and *view_lsn the source's WAL insert position
 * read under it: every transaction the view sees committed before it; 0 with
 * a snapshot); COPY (SELECT cols FROM schema.table) TO STDOUT
 * (FORMAT csv, HEADER true), identifiers quoted.  The columns are the CSV
 * header, the rows the records (NULL fields as SQL NULL).  source_name() says
 * "public.orders (snapshot)".  The snapshot is imported before this returns,
 * so the replication connection may be used again then.  Closing ends the
 * transaction (and cancels a COPY still running). */
V7FILL_MUST_CHECK bool source_snapshot_open(const char *conninfo, const char *snapshot,
                                            const ReplTable *t, const char *const *cols,
                                            size_t ncols, uint64_t *view_lsn, Source **out,
                                            Err *err);

#endif /* V7FILL_SOURCE_SNAPSHOT_H */
