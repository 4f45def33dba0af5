/*
 * A stream's state in the target (schema v7fill): one row per slot and
 * target in v7fill.stream (a slot streaming several tables has one per target) holding its position (written in the same transaction as the
 * rows it covers) and cumulative counts, and v7fill.stream_quarantine, the
 * rows the target refused or that came too late, with their reason.
 */
#ifndef V7FILL_STREAM_STATE_H
#define V7FILL_STREAM_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/pipeline.h"

typedef struct StreamState
{
    bool found;
    char target[256];         /* schema.table as typed, when created */
    char source_table[256];
    char publication[128];
    char system_id[32];       /* the source cluster's IDENTIFY_SYSTEM systemid */
    char phase[16];           /* "copy" (initial copy not finished) or "stream" */
    uint64_t end_lsn;         /* the last source transaction applied whole */
    uint64_t txn_lsn;         /* the one in progress (its commit LSN), 0: none */
    uint64_t txn_changes;     /* of it, changes applied */
    uint64_t batches;         /* target transactions committed (a reconnect asks it) */
    int64_t commit_time_us;   /* the source commit time of the last transaction applied
                                 (0: unknown; kept when a batch does not say) */
    BatchCounts counts;       /* cumulative, both phases */
    /* The last initial copy's view when it was redone under a fresh one (the
     * source's WAL insert position read under it: every transaction it saw
     * committed before), 0: a copy under the slot's exported snapshot.  The
     * changes replayed from the slot's start up to it may be in that copy
     * already (SinkConfig.merge_key_moves_upto). */
    uint64_t copy_view_lsn;
    /* ... and the target's next transaction id when it began: every lookup
     * row an earlier copy wrote has an older one (0 with copy_view_lsn 0). */
    uint64_t copy_view_xid;
} StreamState;

typedef struct QuarantineRow
{
    uint64_t lsn;             /* 0: the initial copy */
    char *reason;
    char sqlstate[6];
    char *row_json;
} QuarantineRow;

V7FILL_MUST_CHECK bool stream_state_setup(PgConn *c, Err *err);
/* The rows of slot (and target, unless NULL), ordered by target: *out
 * (free()) holds *n of them. */
V7FILL_MUST_CHECK bool stream_state_list(PgConn *c, const char *slot, const char *target,
                                         StreamState **out, size_t *n, Err *err);
/* The row of slot and target (target NULL: the slot's first row by target). */
V7FILL_MUST_CHECK bool stream_state_get(PgConn *c, const char *slot, const char *target,
                                        StreamState *out, Err *err);
/* A new row (phase "copy" or "stream", position lsn). */
V7FILL_MUST_CHECK bool stream_state_create(PgConn *c, const char *slot, const StreamState *s,
                                           Err *err);
/* Inside a batch's transaction: the position, the counts, the batch number
 * (of the row of slot and s->target). */
V7FILL_MUST_CHECK bool stream_state_put(PgConn *c, const char *slot, const StreamState *s,
                                        Err *err);
/* An idle position (no transaction pending), alone in its transaction; never
 * moves the position back.  *stored: the row stands at lsn or past it with
 * no transaction pending (false: a row mid-transaction, or none: the flush
 * position sent to the source must not move to lsn). */
/* The target's next transaction id (pg_current_snapshot()'s xmax): every
 * transaction begun from now on has this one or a later one. */
V7FILL_MUST_CHECK bool stream_state_next_xid(PgConn *c, uint64_t *xid, Err *err);
V7FILL_MUST_CHECK bool stream_state_put_idle(PgConn *c, const char *slot, const char *target,
                                             uint64_t lsn, bool *stored, Err *err);
/* Before an initial copy again: the rows an earlier copy (interrupted, or before --resnapshot) of
 * relation into target quarantined (source_lsn NULL; not those kept in the
 * target although expired) are forgotten, and the stored counts (read,
 * rejected, expired) made less by them, as that copy's rows are read again
 * and a row refused again is quarantined again: once per row, not once per
 * attempt.  *rejected, *expired: how many of each were forgotten. */
V7FILL_MUST_CHECK bool stream_state_quarantine_forget_copy(PgConn *c, const char *slot,
                                                           const char *target,
                                                           const char *relation,
                                                           uint64_t *rejected, uint64_t *expired,
                                                           Err *err);
V7FILL_MUST_CHECK bool stream_state_quarantine(PgConn *c, const char *slot, const char *target,
                                               const char *relation, const QuarantineRow *rows,
                                               size_t n, Err *err);
V7FILL_MUST_CHECK bool stream_state_drop(PgConn *c, const char *slot, Err *err);

#endif /* V7FILL_STREAM_STATE_H */
