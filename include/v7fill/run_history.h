/*
 * run_history.h: keeping v7fill.run small for tables written for months.
 *
 * Imports and streams record a run row every --record-every seconds (60 by
 * default): a stream running for a year leaves half a million rows per
 * target, each with its tracker document, and `v7fill report` reads them
 * all.  Folding merges the periodic rows of one table that finished in the
 * same hour, more than an hour ago, under the same retention settings, into
 * one row (status "folded") whose counts are their sums, whose tracker
 * document is their merge (tracker_merge_json, as the report merges them:
 * under the retention they were recorded with it reads the same figures),
 * and whose finished_at and elapsed_s bracket all of their inserts.  What
 * depends on a row's times becomes as coarse as the hour: a report under
 * another retention re-judges the hour's rows together, and --since counts
 * the hour by its last row.  Rows saying how a run ended, and import runs'
 * last rows (their report), are kept as they are.
 */
#ifndef V7FILL_RUN_HISTORY_H
#define V7FILL_RUN_HISTORY_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/catalog.h"
#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/pipeline.h"

/* The index of v7fill.run that folding reads by (each table's rows by time). */
#define RUN_INDEX "run_target_finished"
#define RUN_INDEX_SQL                                                                            \
    "CREATE INDEX IF NOT EXISTS " RUN_INDEX " ON v7fill.run (target_schema, target_table, "      \
    "finished_at)"

typedef struct RunFold
{
    uint64_t rows;   /* run rows folded (dry run: that would be) */
    uint64_t into;   /* the rows they became */
    bool denied;     /* the role may not fold (SELECT, INSERT, DELETE on v7fill.run) */
    bool no_index;   /* a slice (max_hours > 0) found no RUN_INDEX: nothing done */
} RunFold;

/*
 * A periodic run row that could not be written is carried by the next one
 * (pipeline_return_segment).  When the connection was lost while writing it,
 * it may have landed all the same (its COMMIT done, the answer lost): carried,
 * its rows would count twice.  Such a row is kept aside with the key it was
 * written with, and looked up before the next row is written: found, it is
 * dropped; not found, carried.
 */
typedef struct RunRowPending
{
    bool set;
    char key[33];         /* hex of 16 random bytes */
    PipelineSegment seg;
} RunRowPending;

/* A fresh key for a run row (false, key "": no randomness to make one). */
bool run_row_key(char key[33]);
/* The row written with `key` (seg: its segment) failed on c: kept aside when
 * c is broken (it may have landed), else carried at once. */
void run_row_failed(RunRowPending *p, Pipeline *pl, PgConn *c, const char *key,
                    PipelineSegment *seg);
/* Before writing the next row on c (connected): a row kept aside is looked up,
 * dropped if it landed, else carried.  False (still kept) when the lookup
 * failed.  final: carried rather than kept when it fails (the last row). */
V7FILL_MUST_CHECK bool run_row_settle(RunRowPending *p, Pipeline *pl, PgConn *c,
                                      const TargetTable *t, bool final, Err *err);
/* Frees a row still kept (at exit). */
void run_row_pending_free(RunRowPending *p);

/* Fold t's run rows (no transaction open; each hour in a transaction of its
 * own).  dry_run: count only.  max_hours 0: up to 1000 hours, and the owner
 * of v7fill.run creates RUN_INDEX when it is missing (v7fill maintain);
 * max_hours > 0: a slice of that many hours at most, only through the index
 * (out->no_index without it), never building it: short enough for a stream's
 * reader thread. */
V7FILL_MUST_CHECK bool run_history_fold(PgConn *c, const TargetTable *t, bool dry_run,
                                        int max_hours, RunFold *out, Err *err);

#endif /* V7FILL_RUN_HISTORY_H */
