/*
 * The closing ANALYZE of a load (an import's end, a stream's or a migration's
 * initial copy): ANALYZE of the target, then VACUUM (ANALYZE) of its lookup
 * (the map, for a migration).
 *
 * Autovacuum analyzes each partition once enough rows have changed, but never
 * a partitioned parent: without this, the planner estimates a join of the
 * whole table from defaults.  Measured: --verify's join of a migrated 2M-row
 * child and its 1M-row parent (both partitioned) was estimated at 4.2 billion
 * rows and run as a nested loop of index probes, about 17 s, against a hash
 * join of about 1.4 s once analyzed; the whole --verify 45.9-46.9 s against
 * 26.4-26.9 s (two rounds).  ANALYZE of a
 * partitioned table analyzes every partition as well (PostgreSQL < 18 has no
 * ANALYZE ONLY).  VACUUM sets the lookup's visibility map, so duplicate probes
 * become index-only scans.
 *
 * A signal (SIGINT/SIGTERM) cancels the statement under way: a warning, and
 * true (every row is committed; a partition analyzed keeps its statistics).
 * A lost connection is reconnected as the load's batches are, and both run
 * again (up to 5 times): they can run any number of times.
 */
#ifndef V7FILL_LOAD_ANALYZE_H
#define V7FILL_LOAD_ANALYZE_H

#include <stdbool.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/pipeline.h"

/* conn: the pipeline's own connection (the one pipeline_reconnect restores);
 * done: what holds whatever happens, for the messages ("every row is
 * imported"); *secs: the time it took.  Says how to skip it (skip_hint,
 * e.g. "--no-analyze"). */
V7FILL_MUST_CHECK bool load_analyze(Pipeline *pl, PgConn *conn, const char *done,
                                    const char *skip_hint, double *secs, Err *err);

#endif /* V7FILL_LOAD_ANALYZE_H */
