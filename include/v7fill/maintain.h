/*
 * Maintenance, the other half of retention: make sure now's window and the
 * next N exist, and retire the windows past the cutoff.
 *
 * A window [lower, upper) is retired once now > upper + retention (its upper
 * bound is older than now − retention: pg_partman's rule).  Retiring is
 *   ALTER TABLE parent DETACH PARTITION p CONCURRENTLY   (PostgreSQL 14+, no
 *                                                        DEFAULT partition)
 *   ALTER TABLE parent DETACH PARTITION p                (otherwise; said so)
 *   DROP TABLE p                                         (unless detach-only)
 * A window that received rows during the last quiet period is not retired:
 * a late row is arriving there right now.  v7fill knows that from
 * v7fill.window_activity, which every import batch updates (below).
 */
#ifndef V7FILL_MAINTAIN_H
#define V7FILL_MAINTAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/catalog.h"
#include "v7fill/err.h"
#include "v7fill/partitions.h"
#include "v7fill/pg.h"

#define MAINTAIN_DEFAULT_AHEAD 4 /* pg_partman's premake default */
#define MAINTAIN_DEFAULT_QUIET (INT64_C(3600) * 1000000)

typedef enum MaintainAction
{
    MAINTAIN_CREATED,  /* a partition created ahead (or planned, in a dry run) */
    MAINTAIN_DETACHED, /* detached (would be, in a dry run) */
    MAINTAIN_DROPPED,  /* dropped after the detach (would be, in a dry run) */
    MAINTAIN_KEPT,     /* detached and kept (detach-only) */
    MAINTAIN_REFUSED,  /* not retired: rows arrived within the quiet period (an issue) */
    MAINTAIN_ISSUE,    /* something else a person must look at */
    MAINTAIN_NOTE,     /* how something was done, e.g. DETACH without CONCURRENTLY */
} MaintainAction;

typedef struct MaintainEvent
{
    MaintainAction action;
    bool dry_run;
    const char *schema;    /* the partition's */
    const char *partition; /* its name */
    int64_t lower_us;      /* its window; INT64_MIN/MAX for MINVALUE/MAXVALUE */
    int64_t upper_us;
    const char *message;   /* one line for a person, no trailing period */
} MaintainEvent;

typedef void (*MaintainEventFn)(void *arg, const MaintainEvent *ev);

typedef struct MaintainOptions
{
    int64_t retention_us;     /* 0 = retire nothing (only create ahead) */
    int ahead;                /* windows after now's that must exist (default 4) */
    bool detach_only;         /* keep detached tables instead of dropping them */
    int64_t quiet_period_us;  /* default 1 hour */
    bool dry_run;             /* change nothing; events and counts say what would happen */
    int64_t now_us;           /* 0 = the server's clock; else a pretended now, honoured only
                               * in a dry run (a preview): a real run counts the windows ahead
                               * from the server's clock and judges the cutoff by the earlier
                               * of the two; the quiet period always uses the server's clock */
    Granularity granularity;  /* for windows created ahead; GRAN_AUTO: as the partitions */
    const char *window_tz;    /* NULL = UTC */
    const char *name_pattern; /* NULL = the granularity's default */
    int lock_timeout_ms;      /* per statement (default 5000) */
    MaintainEventFn on_event; /* optional */
    void *on_event_arg;
    bool fold_history;        /* fold the table's periodic run rows (run_history.h); default
                                 true (a stream's windows ahead: false) */
} MaintainOptions;

typedef struct MaintainResult
{
    int created;  /* partitions created ahead */
    int detached;
    int dropped;
    int issues;   /* windows refused or left half-done, DEFAULT-partition problems */
    Err issue;    /* the first issue (EC_CONFIG, with detail and hint) */
} MaintainResult;

void maintain_options_default(MaintainOptions *o);

/* Run maintenance on t (as loaded by catalog_load_target; its partition list
 * is refreshed).  Needs no transaction open: DETACH ... CONCURRENTLY cannot
 * run in one.  Issues (a refused window, a detach that timed out) are
 * counted in r and do not stop the run; false only for errors that do
 * (connection lost, catalog unreadable). */
V7FILL_MUST_CHECK bool maintain_run(PgConn *c, TargetTable *t, const MaintainOptions *o,
                                    MaintainResult *r, Err *err);

/* "created=N detached=N dropped=N issues=N" (out >= 96 bytes). */
void maintain_result_format(const MaintainResult *r, char *out, size_t size);

/* Create v7fill.window_activity (and the rest of the v7fill schema) if
 * missing; under the same advisory lock as state_setup.  Call it once before
 * the first maintain_note_activity, with no transaction open. */
V7FILL_MUST_CHECK bool maintain_setup(PgConn *c, Err *err);

/*
 * Record that rows were just written to these partitions (names without
 * schema, partitions of schema.table; duplicates fine; n = 0 does nothing).
 *
 * Contract for the import:
 * - call maintain_setup() once before the first batch;
 * - call this inside each batch transaction, after the COPY and as the last
 *   statement before COMMIT, with the partitions the batch wrote to: the
 *   record commits (or rolls back) with the rows, and a DETACH waiting for
 *   that transaction sees it afterwards;
 * - last_insert_at = statement_timestamp() of this call, i.e. the moment the
 *   batch's rows are in, moments before its COMMIT; every batch writes it
 *   (never moved back), so the quiet period is honoured exactly.  The row
 *   lock is taken by the last statement and held only until COMMIT;
 *   concurrent batches lock rows in name order (no deadlock).
 */
V7FILL_MUST_CHECK bool maintain_note_activity(PgConn *c, const char *schema, const char *table,
                                              const char *const *partitions, size_t n, Err *err);

#endif /* V7FILL_MAINTAIN_H */
