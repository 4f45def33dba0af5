/*
 * stream.c: `v7fill stream`, a source table followed over logical
 * replication into the UUIDv7 target (see stream.h).
 *
 *   preflight on the source (publication, wal_level, role, replica identity)
 *   the slot: created with an exported snapshot and the stream's row in the
 *     target written (phase "copy", position = the slot's consistent point),
 *     or found, with the row that says where the target stands
 *   the initial copy (phase "copy"): COPY TO under that snapshot through the
 *     pipeline; an interrupted copy is redone under a fresh view (the lookup
 *     deduplicates what the first attempt wrote; the slot's changes, replayed
 *     from its start, converge on the source's state)
 *   the changes (phase "stream"): START_REPLICATION at the stored position,
 *     records through the pipeline, position + counts + quarantined rows
 *     written in each batch's transaction, the flush position sent to the
 *     source only after that COMMIT; a lost source or target connection is
 *     reconnected with backoff and the stream resumes from the stored position
 */
#include "v7fill/stream.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <csv.h>

#include "v7fill/catalog.h"
#include "v7fill/interrupt.h"
#include "v7fill/load_analyze.h"
#include "v7fill/log.h"
#include "v7fill/maintain.h"
#include "v7fill/mem.h"
#include "v7fill/pgoutput.h"
#include "v7fill/replconn.h"
#include "v7fill/run_history.h"
#include "v7fill/source_pgoutput.h"
#include "v7fill/source_snapshot.h"
#include "v7fill/srcref.h"
#include "v7fill/state.h"
#include "v7fill/stream_admin.h"
#include "v7fill/stream_columns.h"
#include "v7fill/stream_observe.h"
#include "v7fill/stream_state.h"
#include "v7fill/timeparse.h"
#include "v7fill/monotime.h"

/* The servers' clocks over ours (µs), set and read together.  Several
 * targets share one source and one target server: the first's pair serves
 * them all, measured at each start and with the slot's checks every minute. */
typedef struct StreamClocks
{
    pthread_mutex_t mu;
    int64_t source_us, target_us;
} StreamClocks;

#define SPOOL_XIDS 32

typedef struct Streamer
{
    PgConn *conn;        /* the target (the pipeline's writer uses it) */
    PgConn *side;        /* the target again: idle positions, windows ahead */
    PgConn *src_sql;     /* the source, ordinary connection */
    ReplConn *repl;
    const StreamOptions *o;
    StreamStats *st;
    Pipeline *pl;
    ReplTable from;
    char relation[160];  /* schema.table, for messages and the quarantine */
    ReplTableInfo info;
    char *ref_template;
    ReplSystem sys;
    bool streaming;      /* phase: changes (else the initial copy) */
    Source *src;
    StreamState state;   /* as committed */
    StreamState next;    /* what the batch in flight stores */
    QuarantineRow *quar;
    size_t nquar;
    /* Written by the writer's thread after each commit, read by the status line. */
    _Atomic uint64_t applied_rows[4]; /* inserted, updated, deleted, quarantined */
    _Atomic int64_t applied_commit_us; /* source commit time of the last applied transaction */
    time_t ahead_at;     /* when the windows ahead were last ensured */
    double fold_at;      /* when its run history was last folded (monotime_s; 0: not yet) */
    bool fold_off;       /* not this role's to fold, or no index to fold by */
    PipelineOptions *po; /* the pipeline's options (it keeps the pointer) */
    const char **ignore; /* --ignore-column, and source columns the target lacks */
    bool relation_changed;
    /* Streamed transactions that are spooled, not applied as they arrive
     * (a direct one given up: demote_xid); none applied directly until
     * direct_after (monotime_s). */
    uint32_t demote_xid;
    uint32_t spool_xids[SPOOL_XIDS]; /* the last ones (a ring) */
    size_t nspool_xids, spool_next;
    double direct_after;
    bool multi_streamed; /* one of several tables on a connection asking for protocol 2 */
    int relation_restarts; /* in a row, without progress */
    uint64_t tolerate_until; /* columns not in the catalog passed over below here (source LSN) */
    uint32_t *col_types;   /* per info.cols: its type OID when the columns were checked */
    uint64_t relation_at;
    StreamObserver *ob;  /* metrics, readiness, the slot's WAL */
    PgConn *mon;         /* the source again, for the slot's checks (reader thread) */
    /* The servers' clocks (clocks_own's, or the first target's with several):
     * written on the readers' (or, during the copy, the writer's) threads. */
    StreamClocks clocks_own;
    StreamClocks *clocks;
    time_t slot_at;      /* when the slot's WAL was last checked */
    BatchCounts run_base; /* the stored counts when this process started */
    _Atomic bool target_down; /* the pipeline is reconnecting to the target */
    bool caught_up_done;  /* o->on_caught_up was called ... */
    uint64_t caught_up_stop; /* ... and moved the stop here (again after a reconnect) */
    /* Several tables of one slot (stream_multi.c): the stream's row is the
     * slot's and this target's (NULL: the slot's only row); the frames come
     * from the shared reader; what is shared is not this streamer's to free. */
    const char *row_target;
    struct FrameQueue *queue;
    bool borrowed;
    _Atomic uint64_t flush_pos; /* committed in the target, or stored idle */
    RunRowPending pending; /* a run row whose answer was lost (run_history.h) */
} Streamer;

/* ---- several tables of one slot: the frames each table's source reads ----- */

#define QUEUE_SLOTS 4096
#define QUEUE_BYTES ((size_t) 64 << 20)

/* One table's frames, copied by the reader of the shared connection; bounded
 * (the reader waits for a slow table), dropped once the table's stream ended. */
typedef struct FrameQueue
{
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *buf[QUEUE_SLOTS];
    int len[QUEUE_SLOTS];
    size_t head, count, bytes;
    bool closed;  /* the table's stream ended: frames are dropped */
    bool stopped; /* no more frames: recv fails with `why` once empty */
    Err why;
} FrameQueue;

static void
frame_queue_init(FrameQueue *q)
{
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
}

static void
frame_queue_destroy(FrameQueue *q)
{
    for (size_t i = 0; i < q->count; i++)
        free(q->buf[(q->head + i) % QUEUE_SLOTS]);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}

/* A copy of one frame queued, waiting while the queue is full for at most
 * wait_ms: false when it is still full then (the reader talks to the
 * source meanwhile and tries again).  A table whose stream ended or was
 * stopped takes no more frames: dropped, true. */
static bool
frame_queue_push(FrameQueue *q, const char *data, int len, int wait_ms)
{
    struct timespec until;
    bool full = false;

    monotime_deadline(&until, wait_ms);
    pthread_mutex_lock(&q->mu);
    for (;;)
    {
        full = !q->closed && !q->stopped && q->count > 0 &&
               (q->count == QUEUE_SLOTS || q->bytes + (size_t) len > QUEUE_BYTES);
        if (!full || pthread_cond_timedwait(&q->cv, &q->mu, &until) != 0)
            break;
    }
    if (!full && !q->closed && !q->stopped)
    {
        size_t at = (q->head + q->count) % QUEUE_SLOTS;

        q->buf[at] = xmalloc((size_t) len);
        memcpy(q->buf[at], data, (size_t) len);
        q->len[at] = len;
        q->count++;
        q->bytes += (size_t) len;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return !full;
}

/* No more frames after those queued: the table's source fails with why. */
static void
frame_queue_stop(FrameQueue *q, const Err *why)
{
    pthread_mutex_lock(&q->mu);
    if (!q->stopped)
    {
        q->stopped = true;
        q->why = *why;
    }
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static void
frame_queue_close(FrameQueue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* PgoSourceConfig.recv */
static bool
frame_queue_recv(void *ctx, int timeout_ms, char **buf, int *len, Err *err)
{
    FrameQueue *q = ctx;
    struct timespec until;
    bool ok;

    *buf = NULL;
    *len = 0;
    monotime_deadline(&until, timeout_ms);
    pthread_mutex_lock(&q->mu);
    while (q->count == 0 && !q->stopped)
        if (pthread_cond_timedwait(&q->cv, &q->mu, &until) != 0)
            break;
    if (q->count > 0)
    {
        *buf = q->buf[q->head];
        *len = q->len[q->head];
        q->head = (q->head + 1) % QUEUE_SLOTS;
        q->count--;
        q->bytes -= (size_t) *len;
        pthread_cond_broadcast(&q->cv);
    }
    ok = *len > 0 || !q->stopped;
    if (!ok)
        *err = q->why;
    pthread_mutex_unlock(&q->mu);
    return ok;
}

void
stream_options_default(StreamOptions *o)
{
    memset(o, 0, sizeof *o);
    pipeline_options_default(&o->common);
    o->ahead = 2;
    o->group_rows = 10000;
    o->group_ms = 200;
    o->status_interval_s = 10;
    o->warn_retained = (uint64_t) 5 << 30;
    o->record_every_s = 60;
}

/* ---- the hooks: what a batch's transaction does for the stream ----------- */

static void
hook_origin(void *ctx, uint64_t origin, char *out, size_t size)
{
    Streamer *s = ctx;

    if (s->streaming)
        source_pgoutput_origin(s->from.schema, s->from.name, origin, out, size);
    else
        (void) snprintf(out, size, "%s (initial copy) line %" PRIu64, s->relation, origin);
}

static void
hook_where(void *ctx, const SourcePosition *pos, char *out, size_t size)
{
    Streamer *s = ctx;
    char at[PGO_LSN_TEXT_SIZE];

    if (!s->streaming)
    {
        (void) snprintf(out, size, "line %" PRIu64 " of the initial copy", pos->line);
        return;
    }
    pgo_lsn_format(pos->lsn, at);
    (void) snprintf(out, size, "LSN %s", at);
}

static void
quarantine_clear(Streamer *s)
{
    for (size_t i = 0; i < s->nquar; i++)
    {
        free(s->quar[i].reason);
        free(s->quar[i].row_json);
    }
    s->nquar = 0;
}

/* A CSV line of the copy as a JSON object, by the copy's columns (a NULL as
 * null), as the stream keeps its rows: the quarantine names the row's key. */
typedef struct CopyLine
{
    const Streamer *s;
    Buf *out;
    size_t n;      /* fields so far */
    size_t rows;   /* records so far */
} CopyLine;

static void
copy_line_field(void *data, size_t len, void *ctx)
{
    CopyLine *c = ctx;

    if (c->n < c->s->info.ncols)
    {
        const char *col = c->s->info.cols[c->n];

        buf_putc(c->out, c->n ? ',' : '{');
        buf_put_json_string(c->out, col, strlen(col));
        buf_putc(c->out, ':');
        if (data == NULL)
            buf_puts(c->out, "null");
        else
            buf_put_json_string(c->out, data, len);
    }
    c->n++;
}

static void
copy_line_row(int term, void *ctx)
{
    (void) term;
    ((CopyLine *) ctx)->rows++;
}

/* false: not one record of exactly the copy's columns (the caller keeps the
 * line as a JSON string). */
static bool
copy_line_json(const Streamer *s, const char *raw, size_t len, Buf *out)
{
    struct csv_parser p;
    CopyLine c = {s, out, 0, 0};
    bool ok;

    if (s->info.ncols == 0 ||
        csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL | CSV_EMPTY_IS_NULL) != 0)
        return false;
    ok = csv_parse(&p, raw, len, copy_line_field, copy_line_row, &c) == len &&
         csv_fini(&p, copy_line_field, copy_line_row, &c) == 0;
    csv_free(&p);
    if (!ok || c.rows != 1 || c.n != s->info.ncols)
        return false;
    buf_putc(out, '}');
    return true;
}

static void
quarantine_add(Streamer *s, uint64_t origin, const char *reason, const char *sqlstate,
               const char *raw, size_t raw_len)
{
    QuarantineRow *q;
    Buf b;

    s->quar = xrealloc(s->quar, (s->nquar + 1) * sizeof *s->quar);
    q = &s->quar[s->nquar++];
    memset(q, 0, sizeof *q);
    q->lsn = s->streaming ? origin : 0;
    q->reason = xstrdup(reason);
    if (sqlstate)
        (void) snprintf(q->sqlstate, sizeof q->sqlstate, "%s", sqlstate);
    buf_init(&b);
    if (s->streaming)
        buf_append(&b, raw, raw_len); /* the source made it JSON */
    else if (!copy_line_json(s, raw, raw_len, &b))
    {
        buf_reset(&b);
        buf_put_json_string(&b, raw, raw_len); /* a CSV line of the copy, kept as it is */
    }
    buf_putc(&b, '\0');
    q->row_json = b.data;
}

static bool
hook_reject(void *ctx, uint64_t origin, const char *reason, const char *sqlstate,
            const char *raw, size_t raw_len, Err *err)
{
    (void) err;
    quarantine_add(ctx, origin, reason, sqlstate, raw, raw_len);
    return true;
}

static bool
hook_late(void *ctx, const LateRow *row, Err *err)
{
    Streamer *s = ctx;
    char reason[256];

    (void) err;
    if (strncmp(row->delay_class, "expired", 7) != 0)
        return true;
    (void) snprintf(reason, sizeof reason, "%s: event time %s is past the retention (delay %s)",
                    row->delay_class, row->event_time, row->delay);
    /* No raw bytes here: the reference names the row. */
    {
        Buf b;

        buf_init(&b);
        buf_puts(&b, "{\"source_ref\":");
        buf_put_json_string(&b, row->source_ref, strlen(row->source_ref));
        buf_puts(&b, ",\"id\":");
        buf_put_json_string(&b, row->id, strlen(row->id));
        buf_putc(&b, '}');
        s->quar = xrealloc(s->quar, (s->nquar + 1) * sizeof *s->quar);
        memset(&s->quar[s->nquar], 0, sizeof *s->quar);
        s->quar[s->nquar].lsn = s->streaming ? row->origin : 0;
        s->quar[s->nquar].reason = xstrdup(reason);
        buf_putc(&b, '\0');
        s->quar[s->nquar].row_json = b.data;
        s->nquar++;
    }
    return true;
}

static void
hook_outputs_mark(void *ctx)
{
    quarantine_clear(ctx);
}

static bool
hook_outputs_rewind(void *ctx, Err *err)
{
    (void) err;
    quarantine_clear(ctx);
    return true;
}

static void
counts_sub(BatchCounts *out, const BatchCounts *a, const BatchCounts *b)
{
    out->read = a->read - b->read;
    out->inserted = a->inserted - b->inserted;
    out->duplicates = a->duplicates - b->duplicates;
    out->rejected = a->rejected - b->rejected;
    out->expired = a->expired - b->expired;
    out->updated = a->updated - b->updated;
    out->deleted = a->deleted - b->deleted;
    out->missing = a->missing - b->missing;
    out->missing_deletes = a->missing_deletes - b->missing_deletes;
    out->time_changed = a->time_changed - b->time_changed;
    out->truncates = a->truncates - b->truncates;
}

/* The last statements of the batch's transaction: quarantined rows, then the
 * position with the counts. */
static bool
hook_save_position(void *ctx, PgConn *c, const SourcePosition *pos, const BatchCounts *t,
                   bool finished, Err *err)
{
    Streamer *s = ctx;

    (void) finished;
    s->next = s->state;
    s->next.batches++;
    batch_counts_add(&s->next.counts, t);
    if (s->streaming)
    {
        s->next.end_lsn = pos->lsn;
        s->next.txn_lsn = pos->txn_lsn;
        s->next.txn_changes = pos->txn_changes;
        if (pos->commit_time_us > 0)
            s->next.commit_time_us = pos->commit_time_us;
    }
    return stream_state_quarantine(c, s->o->slot, s->o->common.table, s->relation, s->quar,
                                   s->nquar, err) &&
           stream_state_put(c, s->o->slot, &s->next, err);
}

static bool
hook_check_commit(void *ctx, PgConn *c, const SourcePosition *pos, bool finished,
                  CommitCheck *out, BatchCounts *counts, Err *err)
{
    Streamer *s = ctx;

    (void) finished; /* a stream's position alone says */
    StreamState now;

    (void) pos;
    if (!stream_state_get(c, s->o->slot, s->row_target, &now, err))
        return false;
    if (now.found && now.batches == s->state.batches + 1)
    {
        /* Its quarantined rows are counted by after_commit, which follows. */
        counts_sub(counts, &now.counts, &s->state.counts);
        s->state = now;
        s->next = now;
        *out = COMMIT_DONE;
        return true;
    }
    if (now.found && now.batches == s->state.batches)
    {
        *out = COMMIT_NOT_DONE;
        return true;
    }
    err_set(err, EC_PG_CONNECT,
            "the target lost transactions it had acknowledged: the stream's row says %" PRIu64
            " batches, v7fill had committed %" PRIu64,
            now.batches, s->state.batches);
    err_hint(err, "Run the stream again: it resumes from what the target kept.");
    *out = COMMIT_LOST;
    return true;
}

static void watch_slot(Streamer *s, PgConn **conn);

/* The metrics after a commit: what this process applied. */
static void
observe_commit(Streamer *s)
{
    BatchCounts run;

    counts_sub(&run, &s->state.counts, &s->run_base);
    stream_observer_commit(s->ob, &run, s->streaming ? s->state.end_lsn : 0);
    if (!s->streaming)
        stream_observer_copy(s->ob, true, run.read);
}

/* What this target has (committed, or stored idle) reaches lsn. */
static void
flush_raise(Streamer *s, uint64_t lsn)
{
    uint64_t was = atomic_load(&s->flush_pos);

    while (lsn > was && !atomic_compare_exchange_weak(&s->flush_pos, &was, lsn))
        ;
}

static void
hook_after_commit(void *ctx, const SourcePosition *pos)
{
    Streamer *s = ctx;

    s->st->quarantined += s->nquar;
    quarantine_clear(s);
    s->state = s->next;
    atomic_store(&s->applied_rows[0], s->state.counts.inserted);
    atomic_store(&s->applied_rows[1], s->state.counts.updated);
    atomic_store(&s->applied_rows[2], s->state.counts.deleted);
    atomic_store(&s->applied_rows[3], s->state.counts.rejected + s->state.counts.expired);
    if (s->streaming)
    {
        if (pos->commit_time_us > 0)
            atomic_store(&s->applied_commit_us, pos->commit_time_us);
        s->st->applied_lsn = s->state.end_lsn;
        source_pgoutput_committed(s->src, pos->lsn);
        flush_raise(s, pos->lsn);
    }
    observe_commit(s);
}

static void
hook_row_delay(void *ctx, int64_t delay_us, int delay_class)
{
    stream_observer_delay(((Streamer *) ctx)->ob, delay_us, delay_class);
}

static void
hook_rows_rolled_back(void *ctx)
{
    stream_observer_rollback(((Streamer *) ctx)->ob);
}

/* The pipeline retrying its target connection: not ready meanwhile. */
static void
hook_target_connection(void *ctx, bool lost, const char *why)
{
    Streamer *s = ctx;
    char reason[300];

    atomic_store(&s->target_down, lost);
    if (lost)
    {
        (void) snprintf(reason, sizeof reason, "reconnecting to the target: %s", why);
        stream_observer_ready(s->ob, false, reason);
        return;
    }
    s->st->reconnects++;
    stream_observer_reconnect(s->ob, true);
    stream_observer_ready(s->ob, s->streaming, s->streaming ? NULL : "initial copy running");
}

static void hook_between_batches(void *ctx);

static void
stream_hooks(Streamer *s, PipelineHooks *h)
{
    memset(h, 0, sizeof *h);
    h->ctx = s;
    h->origin = hook_origin;
    h->where = hook_where;
    h->reject = hook_reject;
    h->late = hook_late;
    h->outputs_mark = hook_outputs_mark;
    h->outputs_rewind = hook_outputs_rewind;
    h->save_position = hook_save_position;
    h->check_commit = hook_check_commit;
    h->after_commit = hook_after_commit;
    h->row_delay = hook_row_delay;
    h->rows_rolled_back = hook_rows_rolled_back;
    h->target_connection = hook_target_connection;
    h->between_batches = hook_between_batches;
    h->rejects_where = "v7fill.stream_quarantine";
    h->rejects_hint = "SELECT reason, row FROM v7fill.stream_quarantine ORDER BY id";
}

static bool
persist_idle(void *ctx, uint64_t lsn, bool *stored_out, Err *err)
{
    Streamer *s = ctx;
    bool stored = false;

    if (pg_is_broken(s->side) && !pg_reconnect(s->side, err))
        return false;
    if (!stream_state_put_idle(s->side, s->o->slot, s->o->common.table, lsn, &stored, err))
    {
        /* Found lost by this very statement: once more on a new connection. */
        if (!pg_err_is_connection(err))
            return false;
        err_clear(err);
        if (!pg_reconnect(s->side, err) ||
            !stream_state_put_idle(s->side, s->o->slot, s->o->common.table, lsn, &stored, err))
            return false;
    }
    /* Only a position the target holds goes to the source. */
    *stored_out = stored;
    if (stored)
        flush_raise(s, lsn);
    else
    {
        char at[PGO_LSN_TEXT_SIZE];

        pgo_lsn_format(lsn, at);
        log_debug("%s: the idle position %s is not stored (the stored row is inside a "
                  "transaction, or missing): not sent to the source",
                  s->o->common.table, at);
    }
    return true;
}

static bool ensure_ahead(Streamer *s, Err *err);

/* s's clocks as owner's (owner == s: its own). */
static void
clocks_share(Streamer *s, Streamer *owner)
{
    if (owner == s)
        pthread_mutex_init(&s->clocks_own.mu, NULL);
    s->clocks = &owner->clocks_own;
}

static void
clocks_get(Streamer *s, int64_t *source_us, int64_t *target_us)
{
    pthread_mutex_lock(&s->clocks->mu);
    *source_us = s->clocks->source_us;
    *target_us = s->clocks->target_us;
    pthread_mutex_unlock(&s->clocks->mu);
}

/* now − the applied commit's source time, on the target's clock with the
 * source's offset to it taken out (stream_lag_seconds); 0 when idle. */
static double
lag_seconds(Streamer *s, bool idle, const struct timespec *ts)
{
    int64_t so, to;

    if (idle)
        return 0;
    clocks_get(s, &so, &to);
    return stream_lag_seconds((int64_t) ts->tv_sec * 1000000 + (int64_t) ts->tv_nsec / 1000, so,
                              to, atomic_load(&s->applied_commit_us));
}

/* Both servers' clocks against ours (the source's on src, the target's on
 * tgt); the source's offset to the target in the metrics. */
static bool
measure_clocks(Streamer *s, PgConn *src, PgConn *tgt, Err *err)
{
    int64_t so, to;

    if (!stream_clock_offset(src, &so, err))
    {
        err_prefix(err, "could not read the source's clock");
        return false;
    }
    if (!stream_clock_offset(tgt, &to, err))
    {
        err_prefix(err, "could not read the target's clock");
        return false;
    }
    pthread_mutex_lock(&s->clocks->mu);
    s->clocks->source_us = so;
    s->clocks->target_us = to;
    pthread_mutex_unlock(&s->clocks->mu);
    stream_observer_clock(s->ob, so - to);
    return true;
}

/* The slot's WAL, on the monitor connection to the source (reader thread). */
static void
watch_slot(Streamer *s, PgConn **conn)
{
    SlotWal w;
    Err err = {0};

    s->slot_at = time(NULL);
    if ((*conn == NULL && !pg_connect(s->o->source_conninfo, conn, &err)) ||
        (pg_is_broken(*conn) && !pg_reconnect(*conn, &err)) ||
        !stream_slot_wal(*conn, s->o->slot, &w, &err))
    {
        log_warn("could not check the slot's WAL on the source: %s", err.msg);
        return;
    }
    stream_observer_slot(s->ob, s->o->slot, &w, s->o->warn_retained);
    if ((pg_is_broken(s->side) && !pg_reconnect(s->side, &err)) ||
        !measure_clocks(s, *conn, s->side, &err))
        log_warn("%s", err.msg);
}

/* The rows applied since the last segment as a run of their own in
 * v7fill.run (command "stream"), with their delays in the import's tracker
 * format: `v7fill report` counts streamed rows, and the segments of a run add
 * up to it, each row once.  On the side connection (the reader's thread while
 * streaming, the main thread at exit).  A periodic segment without rows is
 * not recorded; the final one always is (how the run ended); status:
 * "streaming", or how it ended.
 * Its rows were inserted after the segment began and before the INSERT: its
 * finished_at and elapsed_s bracket them. */
static void
record_segment(Streamer *s, const char *status, bool final)
{
    PipelineSegment seg;
    const TargetTable *t;
    char key[33] = "";
    Err e = {0};

    if (s->pl == NULL || s->side == NULL)
        return;
    if (pg_is_broken(s->side) && !pg_reconnect(s->side, &e))
    {
        /* the segment stays open: the next one records its rows */
        log_debug("%s: could not record the run in v7fill.run: %s", s->relation, e.msg);
        return;
    }
    /* an earlier row whose answer was lost: dropped if it landed, else carried */
    if (!run_row_settle(&s->pending, s->pl, s->side, pipeline_target(s->pl), final, &e) && !final)
    {
        log_debug("%s: could not record the run in v7fill.run: %s", s->relation, e.msg);
        return;
    }
    if (!pipeline_take_segment(s->pl, &seg))
        return;
    if (seg.read == 0 && !final)
    {
        /* nothing to record: kept for the next segment (partitions created, seconds) */
        pipeline_return_segment(s->pl, &seg);
        return;
    }
    t = pipeline_target(s->pl);
    if ((seg.read > 0 || final) &&
        !state_run_record(s->side, t->schema, t->name, t->oid, "stream", status,
                          seg.elapsed_s, seg.read, seg.inserted,
                          seg.duplicates, seg.rejected, seg.partitions_created, seg.delay_json,
                          run_row_key(key) ? key : NULL, true, &e))
    {
        log_at(seg.read > 0 ? LOG_LEVEL_WARN : LOG_LEVEL_DEBUG,
               "%s: could not record the rows applied in the last %.0f s in v7fill.run (the "
               "rows are applied; %s): %s",
               s->relation, seg.elapsed_s,
               final ? "v7fill report leaves them out" : "the next record counts them", e.msg);
        if (!final)
        {
            run_row_failed(&s->pending, s->pl, s->side, key, &seg);
            return;
        }
    }
    free(seg.delay_json);
}

/* The last segment, once the pipeline is closed. */
static void
record_end(Streamer *s, bool ok, const Err *err)
{
    char status[300];

    if (ok && interrupt_signal() != 0)
        (void) snprintf(status, sizeof status, "stopped by %s", interrupt_name());
    else
        (void) snprintf(status, sizeof status, "%s", ok ? "done" : err->msg);
    record_segment(s, status, true);
}

/* The copy's reading thread between its batches (the reader's tick takes
 * over once streaming): the slot's WAL every minute (it holds WAL during a
 * long copy too), and the copy's rows as segments every --record-every
 * seconds, so that a copy killed after hours loses at most that much of the
 * report's figures (it finds those rows again as duplicates, which are not
 * tracked). */
static void
hook_between_batches(void *ctx)
{
    Streamer *s = ctx;

    if (s->streaming)
        return;
    if (time(NULL) - s->slot_at >= 60)
        watch_slot(s, &s->mon);
    if (s->o->record_every_s > 0 &&
        pipeline_segment_age(s->pl) >= (double) s->o->record_every_s)
        record_segment(s, "copying", false);
}

/* A stream folds its own run history (run_history.h), a few hours at a time
 * every ten minutes: a year's stream needs no cron `maintain` for its run rows
 * to stay one per hour.  On the reader's thread, so only through the fold's
 * index and in slices (each hour ~50 ms for 60 rows): the replies to the
 * source are not held back.  A role that may not fold, or a schema without the
 * index, is told once (v7fill maintain folds, and makes the index). */
static void
fold_own_history(Streamer *s)
{
    const TargetTable *t = pipeline_target(s->pl);
    RunFold f;
    Err e = {0};
    double now = monotime_s();

    if (s->fold_off || t == NULL || pg_is_broken(s->side) ||
        (s->fold_at > 0 && now - s->fold_at < 600))
        return;
    s->fold_at = now;
    if (!run_history_fold(s->side, t, false, 3, &f, &e))
    {
        log_debug("%s", e.msg);
        return;
    }
    if (f.denied || f.no_index)
    {
        s->fold_off = true;
        log_info("%s.%s: the stream does not fold its run history (%s); v7fill maintain %s.%s "
                 "does",
                 t->schema, t->name,
                 f.denied ? "this role lacks SELECT, INSERT or DELETE on v7fill.run"
                          : "v7fill.run has no index " RUN_INDEX " to fold by",
                 t->schema, t->name);
        return;
    }
    if (f.rows > 0)
        log_debug("%s.%s: run history: folded %" PRIu64 " periodic run rows into %" PRIu64,
                  t->schema, t->name, f.rows, f.into);
}

/* Every second from the reader: the metrics it knows; every minute the slot
 * (its WAL, the clocks, the bytes received: the first target's, with several;
 * the others read the clocks it measures). */
static void
tick(void *ctx, uint64_t committed, uint64_t lag_bytes, bool idle)
{
    Streamer *s = ctx;
    struct timespec ts;
    PgoSourceStats ps;

    (void) committed;
    clock_gettime(CLOCK_REALTIME, &ts);
    source_pgoutput_stats(s->src, &ps);
    stream_observer_progress(s->ob, s->st->transactions + ps.transactions,
                             s->borrowed ? 0 : s->st->bytes_received + ps.bytes, lag_bytes,
                             lag_seconds(s, idle, &ts));
    if (!atomic_load(&s->target_down))
        stream_observer_ready(s->ob, true, NULL);
    if (!s->borrowed && ts.tv_sec - s->slot_at >= 60)
        watch_slot(s, &s->mon);
    if (s->o->record_every_s > 0 &&
        pipeline_segment_age(s->pl) >= (double) s->o->record_every_s)
    {
        record_segment(s, "streaming", false);
        fold_own_history(s);
    }
}

static void
status_line(void *ctx, uint64_t committed, uint64_t lag_bytes, bool idle)
{
    Streamer *s = ctx;
    char at[PGO_LSN_TEXT_SIZE];
    struct timespec ts;
    double lag_s;

    clock_gettime(CLOCK_REALTIME, &ts);
    lag_s = lag_seconds(s, idle, &ts);
    /* Windows ahead: again every hour (a window is a day or more), from
     * this thread, which owns the side connection. */
    if (ts.tv_sec - s->ahead_at >= 3600)
    {
        Err aerr = {0};

        s->ahead_at = ts.tv_sec;
        if (!ensure_ahead(s, &aerr))
            log_warn("could not create the windows ahead: %s", aerr.msg);
    }
    pgo_lsn_format(committed, at);
    log_info("stream %s: inserted=%" PRIu64 " updated=%" PRIu64 " deleted=%" PRIu64
             " quarantined=%" PRIu64 " lag=%" PRIu64 " bytes %.1fs position=%s%s",
             s->relation, atomic_load(&s->applied_rows[0]), atomic_load(&s->applied_rows[1]),
             atomic_load(&s->applied_rows[2]), atomic_load(&s->applied_rows[3]), lag_bytes,
             lag_s, at, idle ? " (caught up)" : "");
}

/* ---- setup ------------------------------------------------------------------ */

static bool
parse_from(const char *from, ReplTable *t, Err *err)
{
    const char *dot = strchr(from, '.');
    const char *name = dot ? dot + 1 : from;
    size_t slen = dot ? (size_t) (dot - from) : 6;

    if ((dot && slen == 0) || *name == '\0' || slen >= sizeof t->schema ||
        strlen(name) >= sizeof t->name)
        return err_set(err, EC_USAGE, "--from takes SCHEMA.TABLE, got \"%s\"", from);
    (void) snprintf(t->schema, sizeof t->schema, "%.*s", (int) slen, dot ? from : "public");
    (void) snprintf(t->name, sizeof t->name, "%s", name);
    return true;
}

static void
put_literal(Buf *b, const char *text)
{
    for (const char *p = text; *p; p++)
    {
        if (*p == '{' || *p == '}')
            buf_putc(b, *p);
        buf_putc(b, *p);
    }
}

/* SCHEMA.TABLE:{pk}: the reference a dump of the table imported with the same
 * template gives too, ending in the legacy key (so the lookup stays ordered). */
static bool
default_template(Streamer *s, Err *err)
{
    Buf b;
    bool any = false;
    const bool *which = s->info.pk;

    for (size_t i = 0; i < s->info.ncols && !any; i++)
        any = s->info.pk[i];
    if (!any)
        which = s->info.key;
    buf_init(&b);
    put_literal(&b, s->relation);
    buf_putc(&b, ':');
    any = false;
    for (size_t i = 0; i < s->info.ncols; i++)
        if (which[i])
        {
            if (any)
                buf_putc(&b, ',');
            buf_putc(&b, '{');
            put_literal(&b, s->info.cols[i]);
            buf_putc(&b, '}');
            any = true;
        }
    if (!any)
    {
        buf_free(&b);
        err_set(err, EC_CONFIG,
                "%s has no primary key or replica identity index to name its rows by",
                s->relation);
        err_hint(err, "Give --source-ref a template of columns that identify a row, e.g. "
                      "--source-ref '%s:{code}'.",
                 s->relation);
        return false;
    }
    buf_putc(&b, '\0');
    s->ref_template = b.data;
    return true;
}

/* --key-map: the map's legacy_id takes the source column's type (smallint,
 * integer or bigint), and the column must name the rows in their updates and
 * deletes: a column of the replica identity (or any, with REPLICA IDENTITY
 * FULL). */
static bool
key_map_type(Streamer *s, const char **type, Err *err)
{
    const char *col = s->po->key_map_column;

    for (size_t i = 0; i < s->info.ncols; i++)
    {
        if (strcmp(s->info.cols[i], col) != 0)
            continue;
        if (lookup_map_type_bits(s->info.types[i]) == 0)
        {
            err_set(err, EC_CONFIG,
                    "--key-map %s: column %s of %s is %s; a key map's key is smallint, integer "
                    "or bigint",
                    col, col, s->relation, s->info.types[i]);
            return false;
        }
        if (!s->info.key[i] && s->info.replident != 'f')
        {
            err_set(err, EC_CONFIG,
                    "--key-map %s: column %s is not in the replica identity of %s, so its "
                    "updates and deletes would not carry it",
                    col, col, s->relation);
            err_hint(err, "Key the map by the primary key's column, or ALTER TABLE %s REPLICA "
                          "IDENTITY FULL on the source.",
                     s->relation);
            return false;
        }
        if (*type == NULL) /* the caller's (migrate) wins */
            *type = s->info.types[i];
        return true;
    }
    return err_set(err, EC_USAGE, "--key-map %s: %s has no such column", col, s->relation);
}

/* --source-ref: deletes carry the replica identity's columns only (the others
 * NULL), and an update that changes another column carries no old key: a
 * template over such a column would build another reference than the row's,
 * and the row would not be found (a delete lost, an update inserted anew). */
static bool
template_in_identity(Streamer *s, const char *tmpl, Err *err)
{
    SrcrefTemplate *t = NULL;
    bool ok = true, any = false;

    /* FULL: any column; no identity (NOTHING, or no primary key): the source
     * refuses updates and deletes of a table published with them */
    for (size_t i = 0; i < s->info.ncols; i++)
        any = any || s->info.key[i];
    if (s->info.replident == 'f' || !any)
        return true;
    if (!srcref_template_compile(tmpl, (const char *const *) s->info.cols, s->info.ncols, &t,
                                 err))
        return false;
    for (size_t i = 0; ok && i < s->info.ncols; i++)
        if (!s->info.key[i] && srcref_template_uses(t, i))
        {
            ok = false;
            err_set(err, EC_CONFIG,
                    "--source-ref %s: column %s is not in the replica identity of %s, so its "
                    "deletes, and its updates that change %s, do not carry it: those rows would "
                    "not be found in the target",
                    tmpl, s->info.cols[i], s->relation, s->info.cols[i]);
            err_hint(err, "Build the reference from the primary key's columns (the default "
                          "does), or ALTER TABLE %s REPLICA IDENTITY FULL on the source.",
                     s->relation);
        }
    srcref_template_free(t);
    return ok;
}

/* Now's window and the next --ahead ones exist before the first row needs them. */
static bool
ensure_ahead(Streamer *s, Err *err)
{
    TargetTable *t = NULL;
    MaintainOptions mo;
    MaintainResult r = {0};
    bool ok;

    if (s->o->ahead <= 0)
        return true;
    if (!catalog_load_target(s->side, s->o->common.table, &t, err))
        return false;
    maintain_options_default(&mo);
    mo.retention_us = 0;
    mo.ahead = s->o->ahead;
    mo.granularity = s->o->common.granularity;
    mo.window_tz = s->o->common.window_tz;
    mo.lock_timeout_ms = s->o->common.lock_timeout_ms;
    /* not on the reader's thread: a long fold would hold back the replies to
     * the source (v7fill maintain folds) */
    mo.fold_history = false;
    ok = maintain_run(s->side, t, &mo, &r, err);
    s->ahead_at = time(NULL);
    catalog_target_free(t);
    if (ok && r.created > 0)
        log_info("created %d window(s) ahead of now (--ahead %d)", r.created, s->o->ahead);
    if (ok && r.issues > 0)
        log_warn("windows ahead: %s", r.issue.msg);
    return ok;
}

/* The source's columns the target has no column for (after --map) are not
 * streamed: said once, and ignored; --ignore-column's stay ignored. */
static bool
read_columns(Streamer *s, Err *err)
{
    const TargetTable *t = pipeline_target(s->pl);
    size_t n = 0;

    replconn_table_free(&s->info);
    memset(&s->info, 0, sizeof s->info);
    if (!replconn_table_info(s->src_sql, &s->from, &s->info, err))
        return false;
    free(s->ignore);
    s->ignore = xcalloc(s->o->common.nignore + s->info.ncols + 1, sizeof *s->ignore);
    for (size_t i = 0; i < s->o->common.nignore; i++)
        s->ignore[n++] = s->o->common.ignore[i];
    for (size_t i = 0; i < s->info.ncols; i++)
    {
        const char *to = s->info.cols[i];
        bool listed = false;

        for (size_t m = 0; m < s->o->common.nmaps; m++)
            if (strcmp(s->o->common.maps[m].from, to) == 0)
                to = s->o->common.maps[m].to;
        for (size_t k = 0; k < s->o->common.nignore; k++)
            listed = listed || strcmp(s->o->common.ignore[k], s->info.cols[i]) == 0;
        if (listed || catalog_column_index(t, to) >= 0)
            continue;
        log_warn("column \"%s\" of %s has no column in %s: not streamed", s->info.cols[i],
                 s->relation, s->o->common.table);
        s->ignore[n++] = s->info.cols[i];
    }
    s->po->ignore = s->ignore;
    s->po->nignore = n;
    return true;
}

/* Where source column `name` goes in the target (StreamColumnTarget). */
static bool
column_target(void *ctx, const char *name, const char **column, const char **type)
{
    Streamer *s = ctx;
    const TargetTable *t = pipeline_target(s->pl);
    const char *to = name;
    int idx;

    for (size_t k = 0; k < s->o->common.nignore; k++)
        if (strcmp(s->o->common.ignore[k], name) == 0)
            return false;
    for (size_t m = 0; m < s->o->common.nmaps; m++)
        if (strcmp(s->o->common.maps[m].from, name) == 0)
            to = s->o->common.maps[m].to;
    if ((idx = catalog_column_index(t, to)) < 0)
        return false;
    *column = t->columns[idx].name;
    *type = t->columns[idx].type;
    return true;
}

/* Before streaming (and after the columns were read anew): the columns the
 * stream last ran with (stored in the target) against the source's catalog
 * now: a column gone or of another type whose values go to a target column
 * stops the stream.  Then the catalog's list is stored.  (Relation messages
 * of changes made before such DDL still show the table as it was then; they
 * are compared in the session, as before.) */
static bool
check_columns(Streamer *s, Err *err)
{
    StreamColumns stored = {0}, now = {0};
    bool ok;

    ok = stream_columns_get(s->conn, s->o->slot, s->row_target, &stored, err) &&
         stream_columns_read_source(s->src_sql, s->from.schema, s->from.name, &now, err) &&
         stream_columns_check(&stored, &now, column_target, s, s->relation, s->o->common.table,
                              err) &&
         stream_columns_put(s->conn, s->o->slot, s->row_target, &now, err);
    /* The types the target was checked against, for the relation messages
     * (source_pgoutput.h: column_types). */
    free(s->col_types);
    s->col_types = xcalloc(s->info.ncols ? s->info.ncols : 1, sizeof *s->col_types);
    for (size_t i = 0; ok && i < s->info.ncols; i++)
        for (size_t j = 0; j < now.n; j++)
            if (strcmp(s->info.cols[i], now.cols[j].name) == 0)
                s->col_types[i] = now.cols[j].type_oid;
    stream_columns_free(&stored);
    stream_columns_free(&now);
    return ok;
}

/* Where "everything committed on the source before the start" ends: the
 * flush position once everything committed is flushed (pg_flush_wal). */
static bool
source_flushed_lsn(Streamer *s, uint64_t *out, Err *err)
{
    if (pg_flush_wal(s->src_sql, out, err))
        return true;
    err_prefix(err, "could not read the source's WAL position");
    return false;
}

static bool
open_source(Streamer *s, Err *err)
{
    if (s->repl)
        replconn_close(s->repl);
    s->repl = NULL;
    if (!replconn_open(s->o->source_conninfo, &s->repl, err))
        return false;
    {
        ReplSystem now;

        if (!replconn_identify(s->repl, &now, err))
            return false;
        if (s->sys.systemid[0] && strcmp(now.systemid, s->sys.systemid) != 0)
            return err_set(err, EC_CONFIG,
                           "the source is another cluster now (system id %s, was %s): the "
                           "stream's position means nothing there",
                           now.systemid, s->sys.systemid);
        s->sys = now;
    }
    return true;
}

static bool
slot_checks_basic(Streamer *s, const ReplSlotInfo *slot, Err *err)
{
    if (strcmp(slot->wal_status, "lost") == 0)
    {
        err_set(err, EC_CONFIG,
                "replication slot \"%s\" was invalidated on the source (wal_status = lost): the "
                "WAL it needed was removed (max_slot_wal_keep_size)",
                s->o->slot);
        err_hint(err, "Run the stream again with --resnapshot: it drops the slot, creates it "
                      "again with a fresh snapshot and copies the table anew (rows already in "
                      "%s count as duplicates; the stream's counts go on).  Or drop both (v7fill "
                      "stream %s --drop --slot %s) and start a new stream.",
                 s->o->common.table, s->o->common.table, s->o->slot);
        return false;
    }
    if (strcmp(slot->plugin, "pgoutput") != 0)
        return err_set(err, EC_CONFIG,
                       "replication slot \"%s\" uses the plugin \"%s\", not pgoutput: it is "
                       "not this stream's",
                       s->o->slot, slot->plugin);
    if (s->state.system_id[0] && strcmp(s->state.system_id, s->sys.systemid) != 0)
        return err_set(err, EC_CONFIG,
                       "the stream's row in the target was written for source cluster %s, "
                       "this source is %s",
                       s->state.system_id, s->sys.systemid);
    return true;
}

static bool
slot_checks(Streamer *s, const ReplSlotInfo *slot, Err *err)
{
    char a[PGO_LSN_TEXT_SIZE], b[PGO_LSN_TEXT_SIZE];

    if (!slot_checks_basic(s, slot, err))
        return false;
    if (slot->confirmed_flush_lsn > s->state.end_lsn)
    {
        pgo_lsn_format(slot->confirmed_flush_lsn, a);
        pgo_lsn_format(s->state.end_lsn, b);
        err_set(err, EC_CONFIG,
                "replication slot \"%s\" has confirmed %s, past the position the target "
                "stored (%s): changes between the two were taken by someone else and would be "
                "missing",
                s->o->slot, a, b);
        err_hint(err, "Another consumer used this slot.  Recreate it: drop the slot and the "
                      "stream's row (DELETE FROM v7fill.stream WHERE slot = '%s';) and run the "
                      "stream again.",
                 s->o->slot);
        return false;
    }
    return true;
}

/* A new stream: its row first (phase "new"), then the slot with its exported
 * snapshot, then the row's position: a crash in between leaves a row that
 * says so, never a slot nobody claims.  --resnapshot keeps the row's counts
 * and batches (the row itself is updated, not replaced). */
static bool
state_new(Streamer *s, Err *err)
{
    BatchCounts counts = s->state.found ? s->state.counts : (BatchCounts) {0};
    uint64_t batches = s->state.found ? s->state.batches : 0;

    memset(&s->state, 0, sizeof s->state);
    s->state.counts = counts;
    s->state.batches = batches;
    s->state.found = true;
    (void) snprintf(s->state.target, sizeof s->state.target, "%s", s->o->common.table);
    (void) snprintf(s->state.source_table, sizeof s->state.source_table, "%s", s->relation);
    (void) snprintf(s->state.publication, sizeof s->state.publication, "%s", s->o->publication);
    (void) snprintf(s->state.system_id, sizeof s->state.system_id, "%s", s->sys.systemid);
    (void) snprintf(s->state.phase, sizeof s->state.phase, "new");
    return stream_state_create(s->conn, s->o->slot, &s->state, err);
}

static bool
create_slot(Streamer *s, char *snapshot, size_t snapsize, bool *copy, Err *err)
{
    char at[PGO_LSN_TEXT_SIZE];

    if (!state_new(s, err))
        return false;
    log_info("creating replication slot \"%s\" on the source (waits for transactions running "
             "there to finish)",
             s->o->slot);
    if (!replconn_create_slot(s->repl, s->o->slot, &s->state.end_lsn, snapshot, snapsize, err))
        return false;
    (void) snprintf(s->state.phase, sizeof s->state.phase, "%s",
                    s->o->no_snapshot ? "stream" : "copy");
    if (!stream_state_create(s->conn, s->o->slot, &s->state, err))
        return false;
    pgo_lsn_format(s->state.end_lsn, at);
    log_info("slot \"%s\" created at %s", s->o->slot, at);
    *copy = !s->o->no_snapshot;
    return true;
}

/* The stream's row names the same tables as this run. */
static bool
same_tables(Streamer *s, Err *err)
{
    if (strcmp(s->state.target, s->o->common.table) != 0 ||
        strcmp(s->state.source_table, s->relation) != 0)
        return err_set(err, EC_CONFIG, "slot \"%s\" streams %s into %s, not %s into %s",
                       s->o->slot, s->state.source_table, s->state.target, s->relation,
                       s->o->common.table);
    return true;
}

/* --resnapshot: the stream's slot, invalidated, is dropped (only a pgoutput
 * slot of this stream's source cluster, not in use); a valid one is kept. */
static bool
resnapshot_drop(Streamer *s, ReplSlotInfo *slot, Err *err)
{
    const char *params[1] = {s->o->slot};

    if (!slot->exists)
    {
        log_info("--resnapshot: slot \"%s\" is gone from the source; creating it again and "
                 "copying %s anew",
                 s->o->slot, s->relation);
        return true;
    }
    if (strcmp(slot->wal_status, "lost") != 0)
    {
        log_info("--resnapshot: slot \"%s\" is valid (wal_status %s): kept, nothing to redo",
                 s->o->slot, slot->wal_status[0] ? slot->wal_status : "unknown");
        return true;
    }
    if (strcmp(slot->plugin, "pgoutput") != 0 ||
        (s->state.system_id[0] && strcmp(s->state.system_id, s->sys.systemid) != 0))
        return err_set(err, EC_CONFIG,
                       "--resnapshot: replication slot \"%s\" on the source is not this "
                       "stream's (plugin %s, source cluster %s, the stream's %s): not dropped",
                       s->o->slot, slot->plugin, s->sys.systemid, s->state.system_id);
    if (slot->active)
        return err_set(err, EC_CONFIG,
                       "--resnapshot: replication slot \"%s\" is in use by process %d on the "
                       "source: not dropped (is another v7fill stream running with it?)",
                       s->o->slot, slot->active_pid);
    if (!pg_exec_params(s->src_sql, "SELECT pg_catalog.pg_drop_replication_slot($1)", 1, params,
                        err))
    {
        err_prefix(err, "--resnapshot: could not drop the invalidated slot \"%s\"", s->o->slot);
        return false;
    }
    log_info("--resnapshot: dropped the invalidated slot \"%s\" (wal_status lost); creating it "
             "again and copying %s anew (rows already in %s count as duplicates)",
             s->o->slot, s->relation, s->o->common.table);
    slot->exists = false;
    return true;
}

/* The slot and the stream's row: created together, or both found. */
static bool
setup_slot(Streamer *s, char *snapshot, size_t snapsize, bool *copy, Err *err)
{
    ReplSlotInfo slot;
    char at[PGO_LSN_TEXT_SIZE];

    *copy = false;
    snapshot[0] = '\0';
    if (!stream_state_get(s->conn, s->o->slot, s->row_target, &s->state, err) ||
        !replconn_slot_info(s->repl, s->o->slot, &slot, err))
        return false;
    if (s->o->resnapshot && s->state.found && strcmp(s->state.phase, "new") != 0)
    {
        if (!same_tables(s, err))
            return false;
        if (!resnapshot_drop(s, &slot, err))
            return false;
        if (!slot.exists)
            return create_slot(s, snapshot, snapsize, copy, err);
    }
    /* A run that died between recording the stream and creating its slot
     * (phase "new"): no slot yet, create it now; the slot there, its start
     * is its confirmed position and the copy runs under a fresh view. */
    if (s->state.found && strcmp(s->state.phase, "new") == 0)
    {
        if (!slot.exists)
            return create_slot(s, snapshot, snapsize, copy, err);
        if (!slot_checks_basic(s, &slot, err))
            return false;
        s->state.end_lsn = slot.confirmed_flush_lsn;
        (void) snprintf(s->state.phase, sizeof s->state.phase, "%s",
                        s->o->no_snapshot ? "stream" : "copy");
        *copy = !s->o->no_snapshot;
        return stream_state_create(s->conn, s->o->slot, &s->state, err);
    }
    if (!slot.exists && s->state.found)
    {
        pgo_lsn_format(s->state.end_lsn, at);
        err_set(err, EC_CONFIG,
                "replication slot \"%s\" does not exist on the source, but the target holds "
                "this stream's position (%s): the changes made since are not available any more",
                s->o->slot, at);
        err_hint(err, "Run the stream again with --resnapshot: it creates the slot again and "
                      "copies the table anew (rows already there count as duplicates and are "
                      "kept as they are; the stream's counts go on).");
        return false;
    }
    if (slot.exists && !s->state.found)
    {
        err_set(err, EC_CONFIG,
                "replication slot \"%s\" exists on the source, but the target has no stream "
                "with that slot: it belongs to something else",
                s->o->slot);
        err_hint(err, "Choose another --slot, or drop that one on the source if it is unused: "
                      "SELECT pg_drop_replication_slot('%s');",
                 s->o->slot);
        return false;
    }
    if (slot.exists)
    {
        if (!slot_checks(s, &slot, err))
            return false;
        if (!same_tables(s, err))
            return false;
        *copy = strcmp(s->state.phase, "copy") == 0;
        if (*copy)
            log_info("the initial copy of %s did not finish: copying again under a fresh "
                     "view (rows already in the target are duplicates)",
                     s->relation);
        return true;
    }
    return create_slot(s, snapshot, snapsize, copy, err);
}

static void
counts_less(uint64_t *v, uint64_t n)
{
    *v = *v > n ? *v - n : 0;
}

/* The copy done: phase "stream".  When the copy found expired rows, whose
 * delays were held out of its records so far (pipeline_hold_expired), in one
 * transaction with a run row (status "copying") holding them and the copy's
 * rows since its last record.  A copy that does not get here is read again
 * whole by the next run: the rows it inserted are duplicates then (not
 * counted again), the expired ones are counted then, once.  A run row refused
 * (no INSERT on v7fill.run) is carried as record_segment carries one; the
 * phase is stored all the same. */
static bool
copy_done(Streamer *s, Err *err)
{
    const TargetTable *t = pipeline_target(s->pl);
    PipelineSegment seg, with;
    char key[33] = "";
    uint64_t expired = 0;
    bool held;
    Err e = {0};
    Err put = {0};
    Err ignored;

    if (!run_row_settle(&s->pending, s->pl, s->conn, t, false, &e))
        log_debug("%s: could not look up the run row whose answer was lost: %s", s->relation,
                  e.msg);
    if (!pipeline_take_segment(s->pl, &seg))
    {
        pipeline_drop_held(s->pl);
        return stream_state_put(s->conn, s->o->slot, &s->state, err);
    }
    held = pipeline_segment_with_held(s->pl, &seg, &with, &expired);
    pipeline_drop_held(s->pl);
    if (!held)
    {
        /* nothing held: the next record carries the copy's last rows, as before */
        pipeline_return_segment(s->pl, &seg);
        return stream_state_put(s->conn, s->o->slot, &s->state, err);
    }
    e = (Err) {0};
    if (pg_exec(s->conn, "BEGIN", &put) &&
        state_run_record(s->conn, t->schema, t->name, t->oid, "stream", "copying",
                         with.elapsed_s, with.read, with.inserted, with.duplicates, with.rejected,
                         with.partitions_created, with.delay_json,
                         run_row_key(key) ? key : NULL, false, &e) &&
        stream_state_put(s->conn, s->o->slot, &s->state, &put) && pg_exec(s->conn, "COMMIT", &put))
    {
        log_debug("%s: the initial copy's %" PRIu64 " expired rows recorded with its end",
                  s->relation, expired);
        free(seg.delay_json);
        free(with.delay_json);
        return true;
    }
    if (pg_is_broken(s->conn))
    {
        /* Landed or not, the next run tells (phase "copy": the copy again,
         * which counts the expired rows then).  Not carried, so that no row
         * is counted twice (the inserted rows' delays may be lost, as with a
         * kill). */
        *err = put.msg[0] ? put : e;
        free(seg.delay_json);
        free(with.delay_json);
        return false;
    }
    if (!pg_exec(s->conn, "ROLLBACK", &ignored))
        log_debug("rollback: %s", ignored.msg);
    if (put.msg[0])
    {
        /* the phase is not stored: the next run copies again, expired rows too */
        *err = put;
        free(with.delay_json);
        pipeline_return_segment(s->pl, &seg);
        return false;
    }
    log_warn("%s: could not record the initial copy's last rows in v7fill.run (the rows are "
             "applied; the next record counts them): %s",
             s->relation, e.msg);
    free(seg.delay_json);
    pipeline_return_segment(s->pl, &with);
    return stream_state_put(s->conn, s->o->slot, &s->state, err);
}

/* The copy's rows, committed and stored as such: the target's statistics (a
 * partitioned parent has none until someone analyzes it: load_analyze.h),
 * before the changes.  The stream does not depend on them: a failure only
 * warns (the phase is stored; no later run analyzes again). */
static void
analyze_copy(Streamer *s)
{
    Err e = {0};
    double secs = 0;

    if (!s->o->common.analyze || s->st->copied == 0 || interrupt_signal() != 0)
        return;
    if (load_analyze(s->pl, s->conn, "the initial copy is complete", "--no-analyze", &secs, &e))
        s->st->rows.closing_s += secs;
    else
        log_warn("%s: %s; the stream goes on (ANALYZE %s gives the table its statistics)",
                 s->relation, e.msg, pipeline_target_q(s->pl));
}

static bool
run_copy(Streamer *s, const char *snapshot, Err *err)
{
    Source *src = NULL;
    PipelineHooks h;
    uint64_t forgot_r = 0, forgot_e = 0;
    bool ok;

    s->streaming = false;
    stream_observer_copy(s->ob, true, 0);
    stream_observer_ready(s->ob, false, "initial copy running");
    /* A copy again (some batches of an earlier one committed): its rows
     * come again.  (Not on a first copy: a later run's role needs DELETE on
     * the quarantine only here.)  The stored counts lose them too: read
     * again, they are counted again. */
    if (s->state.batches > 0)
    {
        if (!stream_state_quarantine_forget_copy(s->conn, s->o->slot, s->o->common.table,
                                                 s->relation, &forgot_r, &forgot_e, err))
            return false;
        /* as the stored row now; nothing applied by this process yet */
        counts_less(&s->state.counts.read, forgot_r + forgot_e);
        counts_less(&s->state.counts.rejected, forgot_r);
        counts_less(&s->state.counts.expired, forgot_e);
        s->run_base = s->state.counts;
        if (forgot_r + forgot_e > 0)
            log_info("%" PRIu64 " rows the earlier copy of %s quarantined are forgotten (%"
                     PRIu64 " refused, %" PRIu64 " expired) and taken off the stream's counts: "
                     "the copy reads them again and quarantines each once more if refused again",
                     forgot_r + forgot_e, s->relation, forgot_r, forgot_e);
    }
    if (!source_snapshot_open(s->o->source_conninfo, snapshot[0] ? snapshot : NULL, &s->from,
                              (const char *const *) s->info.cols, s->info.ncols,
                              &s->state.copy_view_lsn, &src, err))
        return false;
    /* The rows a key change may merge over are those of a copy under the
     * slot's snapshot, whose view is where the changes replayed begin.  An
     * earlier copy under a fresh view (it committed batches: its start is
     * stored) wrote rows as of a view later than that: a key it wrote may
     * have been left and taken again before it, by changes replayed after
     * those rows were there.  So the start of the first fresh copy is kept. */
    if (s->state.copy_view_lsn == 0)
        s->state.copy_view_xid = 0;
    else if (s->state.copy_view_xid == 0 &&
             !stream_state_next_xid(s->conn, &s->state.copy_view_xid, err))
    {
        source_close(src);
        return false;
    }
    stream_hooks(s, &h);
    pipeline_hold_expired(s->pl); /* recorded with the copy's end (copy_done) */
    ok = pipeline_attach(s->pl, src, false, &h, err) && pipeline_run(s->pl, err);
    source_close(src);
    if (!ok)
        return false;
    s->st->copied = s->state.counts.read - s->run_base.read;
    stream_observer_copy(s->ob, false, s->st->copied);
    (void) snprintf(s->state.phase, sizeof s->state.phase, "stream");
    if (!copy_done(s, err))
        return false;
    log_info("initial copy of %s done: %" PRIu64 " rows on %d writer connection%s; streaming "
             "changes from the slot",
             s->relation, s->st->copied, s->po->jobs > 1 ? s->po->jobs : 1,
             s->po->jobs > 1 ? "s" : "");
    analyze_copy(s);
    return true;
}

/* At start: the clock offset, the source's conninfo for --status, the slot's WAL. */
static bool
start_watch(Streamer *s, Err *err)
{
    int64_t off, so, to;

    s->run_base = s->state.counts;
    if (!measure_clocks(s, s->src_sql, s->conn, err) ||
        !stream_admin_remember_source(s->conn, s->o->slot, s->o->source_conninfo, err))
        return false;
    clocks_get(s, &so, &to);
    off = so - to;
    if (off > 1000000 || off < -1000000)
        log_warn("the source's clock is %.1f s %s the target's: lag in seconds is corrected for it",
                 (double) (off < 0 ? -off : off) / 1e6, off < 0 ? "behind" : "ahead of");
    /* Rows are checked against this host's clock (--max-future): those
     * stamped with the source's now() carry its skew, and nothing corrects
     * a row's time (its id is its time column's). */
    if (so > s->o->common.max_future_us)
    {
        char ahead[48];

        duration_format(s->o->common.max_future_us, ahead, sizeof ahead);
        log_warn("the source's clock is %.1f s ahead of this host's, more than --max-future (%s): "
                 "rows whose time column is the source's now() are quarantined as \"clock ahead\" "
                 "(set the source's clock right, or raise --max-future)",
                 (double) so / 1e6, ahead);
    }
    watch_slot(s, &s->src_sql);
    return true;
}

/* o->on_caught_up once; after a reconnect its stop position again. */
static bool
caught_up(void *ctx, uint64_t *stop_lsn, Err *err)
{
    Streamer *s = ctx;

    if (!s->caught_up_done)
    {
        if (!s->o->on_caught_up(s->o->caught_up_ctx, stop_lsn, err))
            return false;
        s->caught_up_done = true;
        s->caught_up_stop = *stop_lsn;
    }
    else if (s->caught_up_stop > *stop_lsn)
        *stop_lsn = s->caught_up_stop;
    return true;
}

/* A streamed transaction to spool, not apply as it arrives, from the next
 * run on (the last SPOOL_XIDS are kept). */
static void
spool_xid(Streamer *s, uint32_t xid)
{
    s->spool_xids[s->spool_next++ % SPOOL_XIDS] = xid;
    if (s->nspool_xids < SPOOL_XIDS)
        s->nspool_xids++;
}

/* One connection's worth of streaming: true at the end (caught up or
 * interrupted), false with err on a failure. */
static bool
run_changes(Streamer *s, uint64_t stop_lsn, Err *err)
{
    PgoSourceConfig cfg;
    PipelineHooks h;
    PgoSourceStats ps;
    bool ok, streamed;

    if (!stream_state_get(s->conn, s->o->slot, s->row_target, &s->state, err))
        return false;
    /* Not with a position stored inside a transaction by an older version
     * (its changes are counted from the begin, which a streamed one lacks). */
    streamed = s->queue ? s->multi_streamed
                        : s->o->streaming && s->state.txn_lsn == 0 &&
                              replconn_server_version(s->repl) >= 140000;
    if (!s->queue && !replconn_start(s->repl, s->o->slot, s->state.end_lsn, s->o->publication,
                                     streamed ? 2 : 1, streamed, err))
        return false;
    memset(&cfg, 0, sizeof cfg);
    cfg.repl = s->queue ? NULL : s->repl;
    cfg.recv = s->queue ? frame_queue_recv : NULL;
    cfg.recv_ctx = s->queue;
    cfg.schema = s->from.schema;
    cfg.table = s->from.name;
    cfg.columns = (const char *const *) s->info.cols;
    cfg.ncolumns = s->info.ncols;
    cfg.resume_lsn = s->state.end_lsn;
    cfg.resume_txn_lsn = s->state.txn_lsn;
    cfg.resume_txn_changes = s->state.txn_changes;
    cfg.stop_lsn = stop_lsn;
    cfg.group_rows = s->o->group_rows;
    cfg.group_ms = s->o->group_ms;
    cfg.ignore_deletes = s->o->on_delete == STREAM_DELETE_IGNORE;
    /* Restarted for a new column twice with no progress: the column is gone
     * from the catalog again; pass over it, in the changes made before the
     * restart (a column added later is read anew, as always). */
    cfg.tolerate_columns_until = s->relation_restarts >= 2 ? s->tolerate_until : 0;
    cfg.column_types = s->col_types;
    cfg.on_truncate = (PgoTruncatePolicy) s->o->on_truncate;
    cfg.persist_idle = persist_idle;
    cfg.status = status_line;
    cfg.status_interval_ms = s->o->status_interval_s * 1000;
    cfg.tick = tick; /* each target's metrics; the slot's from the first */
    cfg.on_caught_up = s->o->on_caught_up && stop_lsn > 0 ? caught_up : NULL;
    cfg.ctx = s;
    cfg.streamed = streamed;
    cfg.spool_xids = s->spool_xids;
    cfg.nspool_xids = s->nspool_xids;
    cfg.direct_after = s->direct_after;
    /* Several tables: each spools what the others may commit apart. */
    cfg.spool_all = s->queue != NULL;
    if (!source_pgoutput_open(&cfg, &s->src, err))
        return false;
    s->streaming = true;
    atomic_store(&s->target_down, false);
    stream_observer_ready(s->ob, true, NULL);
    stream_hooks(s, &h);
    s->st->start_lsn = s->state.end_lsn;
    /* After a copy redone under a fresh view, the changes replayed up to it
     * may be in it already: a key change finds the row under its new key
     * (sink.h).  Not with --on-delete ignore: a row kept there although
     * deleted may hold the new key. */
    pipeline_merge_key_moves(s->pl,
                             s->o->on_delete == STREAM_DELETE_IGNORE ? 0 : s->state.copy_view_lsn,
                             s->state.copy_view_xid);
    ok = pipeline_attach(s->pl, s->src, false, &h, err) && pipeline_run(s->pl, err);
    if (!ok && err->code == EC_INTERRUPTED)
    {
        log_info("%s: stopping", err->msg);
        err_clear(err);
        ok = true;
    }
    if (ok && !s->queue)
    {
        Err ferr = {0};

        if (!source_pgoutput_feedback(s->src, &ferr) || !replconn_stop(s->repl, &ferr))
            log_debug("closing the replication connection: %s", ferr.msg);
    }
    source_pgoutput_stats(s->src, &ps);
    s->st->transactions += ps.transactions;
    s->st->skipped_transactions += ps.skipped_transactions;
    s->st->deletes_ignored += ps.deletes_ignored;
    s->st->truncates_ignored += ps.truncates_ignored;
    s->st->bytes_received += ps.bytes;
    s->st->streamed_direct += ps.streamed_direct;
    s->st->streamed_spooled += ps.streamed_spooled;
    s->st->streamed_aborted += ps.streamed_aborted;
    s->st->streamed_to_spool += ps.streamed_to_spool;
    if (ps.direct_after > s->direct_after)
        s->direct_after = ps.direct_after;
    s->relation_changed = !ok && ps.relation_changed;
    s->demote_xid = ok ? 0 : ps.demote_xid;
    /* Stopped while one was applied as it streamed in (a lost target
     * connection, a new column): the next run spools it, so that the same
     * failure does not cost the whole transaction again and again, and a
     * column it names is judged by its commit position, as for others. */
    if (!ok && ps.demote_xid == 0 && ps.direct_xid != 0)
        spool_xid(s, ps.direct_xid);
    source_close(s->src);
    s->src = NULL;
    return ok;
}

static bool
reconnect_wait(Streamer *s, int attempt, const Err *why, Err *err)
{
    int delay = attempt < 6 ? 1 << attempt : 60;

    log_warn("%s; reconnecting in %d s (attempt %d of %d)", why->msg, delay, attempt,
             s->o->common.reconnect_attempts);
    for (int step = 0; step < delay * 10; step++)
    {
        if (interrupt_signal() != 0)
            return err_set(err, EC_INTERRUPTED, "interrupted by %s while reconnecting",
                           interrupt_name());
        (void) usleep(100000);
    }
    if (pg_is_broken(s->conn) && !pg_reconnect(s->conn, err))
        return false;
    return open_source(s, err);
}

/* After a lost connection (why): reconnect with backoff.  false: given up
 * (err); *stop: interrupted while waiting. */
static bool
reconnect_retry(Streamer *s, int *attempt, Err *why, bool several, bool *stop, Err *err)
{
    *stop = false;
    for (;;)
    {
        Err rerr = {0};

        if (++*attempt > s->o->common.reconnect_attempts)
        {
            *err = *why;
            err_hint(err, "The stream gave up after %d attempts; run it again: it resumes "
                          "from the position%s stored in the target%s.",
                     s->o->common.reconnect_attempts, several ? "s" : "", several ? "s" : "");
            return false;
        }
        if (reconnect_wait(s, *attempt, why, &rerr))
            return true;
        if (rerr.code == EC_INTERRUPTED)
        {
            *stop = true;
            return true;
        }
        *why = rerr;
    }
}

/* /readyz while a lost connection is reconnected: not ready, saying which. */
static void
not_ready_reconnecting(Streamer *s, const Err *why)
{
    char reason[300];

    (void) snprintf(reason, sizeof reason, "reconnecting to the %s: %s",
                    pg_is_broken(s->conn) ? "target" : "source", why->msg);
    stream_observer_ready(s->ob, false, reason);
}

/* why is the race o->retry_constraint describes, met fewer than 10 times in
 * a row (*races counts them; progress resets it). */
static bool
constraint_race(const Streamer *s, const Err *why, uint64_t *race_at, int *races)
{
    const char *name = s->o->retry_constraint;

    if (name == NULL || strcmp(why->sqlstate, "23503") != 0 || strcmp(why->constraint, name) != 0)
        return false;
    *races = s->st->applied_lsn == *race_at ? *races + 1 : 1;
    *race_at = s->st->applied_lsn;
    return *races <= 10;
}

/* A relation message named a column the stream did not start with: its
 * columns read anew.  The second time in a row without progress, the column
 * is gone from the catalog again (dropped since those changes were made):
 * the relation messages of changes made before now pass over it. */
static bool
relation_restart(Streamer *s, Err *err)
{
    uint64_t at = s->st->applied_lsn;

    s->relation_restarts = at == s->relation_at ? s->relation_restarts + 1 : 1;
    s->relation_at = at;
    if (s->relation_restarts == 2 && !source_flushed_lsn(s, &s->tolerate_until, err))
        return false;
    /* the target's too: the column may have been added there meanwhile */
    if (pg_is_broken(s->side) && !pg_reconnect(s->side, err))
        return false;
    return pipeline_reload_columns(s->pl, s->side, err) && read_columns(s, err) &&
           check_columns(s, err);
}

/* why is a deadlock or a serialization failure that rolled back what the
 * pipeline could not write again itself (a large source transaction's
 * pieces, or a batch after its own retries), met fewer than 5 times in a row
 * (*n counts them; progress resets it). */
static bool
rolled_back(const Streamer *s, const Err *why, uint64_t *at, int *n)
{
    if (strcmp(why->sqlstate, "40P01") != 0 && strcmp(why->sqlstate, "40001") != 0)
        return false;
    *n = s->st->applied_lsn == *at ? *n + 1 : 1;
    *at = s->st->applied_lsn;
    return *n <= 5;
}

static bool
stream_changes(Streamer *s, uint64_t stop_lsn, Err *err)
{
    int attempt = 0, races = 0, rollbacks = 0;
    uint64_t race_at = 0, rollback_at = 0;
    bool stop;

    for (;;)
    {
        Err why = {0};
        uint64_t at_start = s->st->applied_lsn;

        if (run_changes(s, stop_lsn, &why))
            return true;
        if (s->demote_xid != 0)
        {
            /* Not a failure: a transaction applied as it streamed in is
             * rolled back in the target and spooled this time; none is
             * applied directly for a minute (the source is busy). */
            s->st->streamed_restarts++;
            spool_xid(s, s->demote_xid);
            s->direct_after = monotime_s() + 60.0;
        }
        if (s->demote_xid != 0 && !s->relation_changed)
        {
            log_info("%s", why.msg);
            if (!open_source(s, err))
                return false;
            continue;
        }
        if (s->relation_changed)
        {
            /* Not a failure: the table has a new column; again from the
             * stored position with its columns read anew. */
            if (!relation_restart(s, err) || !open_source(s, err))
                return false;
            continue;
        }
        if (constraint_race(s, &why, &race_at, &races))
        {
            /* Rolled back: the row that failed it read a row another capture
             * deleted and committed meanwhile; applied again, it reads what
             * is there now. */
            log_warn("%s: %s (a row another capture deleted at the same moment); applying it "
                     "again from the stored position",
                     s->o->common.table, why.msg);
            if (!open_source(s, err))
                return false;
            continue;
        }
        if (rolled_back(s, &why, &rollback_at, &rollbacks))
        {
            /* Nothing of it is in the target: applied again from the stored
             * position, as after a reconnect. */
            log_warn("%s: %s (SQLSTATE %s); applying it again from the stored position "
                     "(attempt %d of 5)",
                     s->o->common.table, why.msg, why.sqlstate, rollbacks);
            if (!open_source(s, err))
                return false;
            continue;
        }
        if (!pg_err_is_connection(&why) && why.code != EC_PG_CONNECT &&
            strcmp(why.sqlstate, "55006") != 0 /* slot still active for the old walsender */)
        {
            *err = why;
            return false;
        }
        s->st->reconnects++;
        stream_observer_reconnect(s->ob, pg_is_broken(s->conn));
        not_ready_reconnecting(s, &why);
        if (!reconnect_retry(s, &attempt, &why, false, &stop, err))
            return false;
        if (stop)
            return true;
        /* A run that applied something: the attempts count from zero (one
         * that failed at its start again and again gives up). */
        if (s->st->applied_lsn != at_start)
            attempt = 0;
    }
}

/* A target's side of the stream, its source table's columns read: the
 * pipeline's options (po, kept by the pipeline), the pipeline, v7fill's
 * tables, the windows ahead. */
static bool
target_open(Streamer *s, PipelineOptions *po, PipelineInputs *inputs, Err *err)
{
    *po = s->o->common;
    s->po = po;
    if (po->key_map_column)
    {
        if (!key_map_type(s, &po->key_map_type, err))
            return false;
    }
    else if (po->source_ref == NULL)
    {
        if (!default_template(s, err))
            return false;
        po->source_ref = s->ref_template;
    }
    else if (!template_in_identity(s, po->source_ref, err))
        return false;
    /* The copy shows the pipeline's progress; the changes their status line. */
    po->progress = s->o->common.progress;
    inputs->noun = "source";
    inputs->count = 1;
    return pg_connect_again(s->conn, &s->side, err) &&
           pipeline_open(s->conn, po, inputs, &s->st->rows, &s->pl, err) &&
           stream_state_setup(s->conn, err) && pipeline_setup(s->pl, err) &&
           read_columns(s, err) && ensure_ahead(s, err);
}

static void
streamer_free(Streamer *s)
{
    quarantine_clear(s);
    free(s->quar);
    run_row_pending_free(&s->pending);
    free(s->col_types);
    if (s->src)
        source_close(s->src);
    pg_close(s->side);
    if (!s->borrowed)
    {
        if (s->repl)
            replconn_close(s->repl);
        stream_observer_free(s->ob);
    }
    pg_close(s->src_sql);
    pg_close(s->mon);
    if (s->clocks == &s->clocks_own)
        pthread_mutex_destroy(&s->clocks_own.mu);
    replconn_table_free(&s->info);
    free(s->ignore);
    free(s->ref_template);
}

/* ---- several tables of one slot ---------------------------------------------
 *
 * One Streamer per target, each with its own pipeline (the only writer) and
 * its own row in v7fill.stream.  The first owns the shared connections (the
 * source's, the replication connection) and the observer; the others borrow
 * them (each target has its own view of the observer: its series, its
 * readiness).  The slot is created once: each table is copied under its snapshot
 * in turn (the replication connection runs nothing meanwhile), then one
 * reader (multi_read) receives the slot's frames and hands a copy to each
 * table's source (PgoSourceConfig.recv), which keeps its own table's changes
 * and skips what its target has; each target's thread runs its pipeline.
 * The flush position sent is the least of what the targets committed. */

typedef struct MultiTarget
{
    Streamer s;
    StreamOptions o;
    PipelineOptions po;
    PipelineInputs inputs;
    StreamStats st;
    ColumnMap *maps;
    const char **ignore;
    FrameQueue q;
    pthread_t thread;
    bool started;
    _Atomic bool done;
    bool ok;
    uint64_t stop_lsn;
    Err err;
} MultiTarget;

static void *
multi_thread(void *arg)
{
    MultiTarget *t = arg;

    t->ok = run_changes(&t->s, t->stop_lsn, &t->err);
    frame_queue_close(&t->q);
    atomic_store(&t->done, true);
    return NULL;
}

static bool
column_in(const ReplTableInfo *info, const char *name)
{
    for (size_t i = 0; i < info->ncols; i++)
        if (strcmp(info->cols[i], name) == 0)
            return true;
    return false;
}

/* The options of one table: --time-column, --map and --ignore-column where
 * its columns have them. */
static void
multi_options(MultiTarget *t, const StreamOptions *o)
{
    PipelineOptions *c = &t->o.common;
    size_t n = 0;

    if (c->time_column && !column_in(&t->s.info, c->time_column))
        c->time_column = NULL;
    t->maps = xcalloc(o->common.nmaps + 1, sizeof *t->maps);
    for (size_t i = 0; i < o->common.nmaps; i++)
        if (column_in(&t->s.info, o->common.maps[i].from))
            t->maps[n++] = o->common.maps[i];
    c->maps = t->maps;
    c->nmaps = n;
    n = 0;
    t->ignore = xcalloc(o->common.nignore + 1, sizeof *t->ignore);
    for (size_t i = 0; i < o->common.nignore; i++)
        if (column_in(&t->s.info, o->common.ignore[i]))
            t->ignore[n++] = o->common.ignore[i];
    c->ignore = t->ignore;
    c->nignore = n;
}

/* A --map or --ignore-column naming a column of no table is a mistake. */
static bool
multi_columns_check(MultiTarget *ts, size_t n, const StreamOptions *o, Err *err)
{
    for (size_t i = 0; i < o->common.nmaps + o->common.nignore; i++)
    {
        bool map = i < o->common.nmaps;
        const char *col = map ? o->common.maps[i].from : o->common.ignore[i - o->common.nmaps];
        bool any = false;

        for (size_t k = 0; k < n && !any; k++)
            any = column_in(&ts[k].s.info, col);
        if (!any)
            return err_set(err, EC_USAGE, "%s %s: no table of the stream has a column \"%s\"",
                           map ? "--map" : "--ignore-column", col, col);
    }
    return true;
}

/* The slot and each target's row: created together, or found. */
static bool
multi_setup_slot(MultiTarget *ts, size_t n, char *snapshot, size_t snapsize, bool *copy,
                 Err *err)
{
    Streamer *first = &ts[0].s;
    ReplSlotInfo slot;
    size_t have = 0, fresh = 0;

    snapshot[0] = '\0';
    for (size_t i = 0; i < n; i++)
    {
        Streamer *s = &ts[i].s;

        copy[i] = false;
        if (!stream_state_get(s->conn, s->o->slot, s->row_target, &s->state, err))
            return false;
        have += s->state.found;
        fresh += s->state.found && strcmp(s->state.phase, "new") == 0;
    }
    if (!replconn_slot_info(first->repl, first->o->slot, &slot, err))
        return false;
    if (!slot.exists)
    {
        if (have > fresh)
        {
            for (size_t i = 0; i < n; i++)
                if (ts[i].s.state.found && strcmp(ts[i].s.state.phase, "new") != 0)
                    return err_set(err, EC_CONFIG,
                                   "replication slot \"%s\" does not exist on the source, but "
                                   "%s holds this stream's position: the changes made since "
                                   "are not available any more",
                                   first->o->slot, ts[i].s.o->common.table);
        }
        for (size_t i = 0; i < n; i++)
            if (!state_new(&ts[i].s, err))
                return false;
        log_info("creating replication slot \"%s\" on the source for %zu tables (waits for "
                 "transactions running there to finish)",
                 first->o->slot, n);
        if (!replconn_create_slot(first->repl, first->o->slot, &first->state.end_lsn, snapshot,
                                  snapsize, err))
            return false;
        for (size_t i = 0; i < n; i++)
        {
            Streamer *s = &ts[i].s;

            s->state.end_lsn = first->state.end_lsn;
            (void) snprintf(s->state.phase, sizeof s->state.phase, "%s",
                            s->o->no_snapshot ? "stream" : "copy");
            if (!stream_state_create(s->conn, s->o->slot, &s->state, err))
                return false;
            copy[i] = !s->o->no_snapshot;
        }
        return true;
    }
    for (size_t i = 0; i < n; i++)
    {
        Streamer *s = &ts[i].s;

        if (!s->state.found)
        {
            err_set(err, EC_CONFIG,
                    "replication slot \"%s\" exists on the source, but %s has no stream with "
                    "that slot (the tables of a slot are those it was created with)",
                    s->o->slot, s->o->common.table);
            err_hint(err, "Choose another --slot for a new set of tables.");
            return false;
        }
        if (strcmp(s->state.phase, "new") == 0)
        {
            if (!slot_checks_basic(s, &slot, err))
                return false;
            s->state.end_lsn = slot.confirmed_flush_lsn;
            (void) snprintf(s->state.phase, sizeof s->state.phase, "%s",
                            s->o->no_snapshot ? "stream" : "copy");
            copy[i] = !s->o->no_snapshot;
            if (!stream_state_create(s->conn, s->o->slot, &s->state, err))
                return false;
            continue;
        }
        if (!slot_checks(s, &slot, err) || !same_tables(s, err))
            return false;
        copy[i] = strcmp(s->state.phase, "copy") == 0;
        if (copy[i])
            log_info("the initial copy of %s did not finish: copying again under a fresh view "
                     "(rows already in %s are duplicates)",
                     s->relation, s->o->common.table);
    }
    return true;
}

static void
multi_status(MultiTarget *ts, size_t n, uint64_t *sent, bool reply)
{
    uint64_t flush = UINT64_MAX;
    Err err = {0};

    for (size_t i = 0; i < n; i++)
    {
        uint64_t f = atomic_load(&ts[i].s.flush_pos);

        if (f < flush)
            flush = f;
    }
    if (flush < *sent)
        flush = *sent; /* never backwards */
    if (!replconn_send_status(ts[0].s.repl, flush, flush, flush, reply, &err))
        log_debug("status to the source: %s", err.msg);
    else
        *sent = flush;
}

/* The reader of the shared connection, until every table's stream ended.
 * false with why: the connection failed (the tables' streams were stopped). */
static bool
multi_read(MultiTarget *ts, size_t n, uint64_t stop_lsn, Err *why)
{
    uint64_t sent = 0;
    double last = 0;
    bool broken = false, stopping = false;

    for (;;)
    {
        size_t running = 0;
        double ms;
        char *buf = NULL;
        int len = 0;

        for (size_t i = 0; i < n; i++)
        {
            running += !atomic_load(&ts[i].done);
            if (atomic_load(&ts[i].done) && !ts[i].ok && !stopping)
            {
                Err stop = {0};

                /* One table's stream failed: the others stop too (what they
                 * read is committed; the next run goes on from there). */
                stopping = true;
                err_set(&stop, EC_INTERRUPTED, "the stream of %s stopped",
                        ts[i].s.o->common.table);
                for (size_t k = 0; k < n; k++)
                    frame_queue_stop(&ts[k].q, &stop);
            }
        }
        if (running == 0)
            break;
        if (broken)
        {
            (void) usleep(20000);
            continue;
        }
        ms = (double) monotime_ms();
        if (ms - last >= 1000)
        {
            /* Every second: the least committed position; waiting to be
             * caught up, asking where the server stands. */
            multi_status(ts, n, &sent, stop_lsn > 0);
            last = ms;
        }
        if (!replconn_recv(ts[0].s.repl, 100, &buf, &len, why))
        {
            broken = true;
            for (size_t k = 0; k < n; k++)
                frame_queue_stop(&ts[k].q, why);
            continue;
        }
        if (len <= 0)
            continue;
        /* A keepalive asking for a reply gets it now (the committed
         * position), not after a slow table took the frame. */
        if (buf[0] == 'k' && len >= 18 && buf[17])
            multi_status(ts, n, &sent, false);
        for (size_t k = 0; k < n; k++)
            while (!frame_queue_push(&ts[k].q, buf, len, 1000))
            {
                /* That table is behind and its queue full: the source still
                 * hears from us (wal_sender_timeout). */
                multi_status(ts, n, &sent, false);
                last = (double) monotime_ms();
            }
        replconn_freemem(buf);
    }
    if (!broken)
    {
        Err ferr = {0};

        multi_status(ts, n, &sent, false);
        if (!replconn_stop(ts[0].s.repl, &ferr))
            log_debug("closing the replication connection: %s", ferr.msg);
    }
    return !broken;
}

/* One connection's worth of streaming for every table. */
static bool
multi_run_once(MultiTarget *ts, size_t n, uint64_t stop_lsn, bool *relation_changed, Err *why)
{
    uint64_t start = UINT64_MAX;
    bool read_ok;
    bool streamed = ts[0].s.o->streaming && replconn_server_version(ts[0].s.repl) >= 140000;

    *relation_changed = false;
    for (size_t i = 0; i < n; i++)
    {
        Streamer *s = &ts[i].s;

        if (!stream_state_get(s->conn, s->o->slot, s->row_target, &s->state, why))
            return false;
        if (s->state.end_lsn < start)
            start = s->state.end_lsn;
        atomic_store(&s->flush_pos, s->state.end_lsn);
        /* Not with a position stored inside a transaction (run_changes). */
        streamed = streamed && s->state.txn_lsn == 0;
    }
    /* The slot's start is the least position; each table's source skips
     * what its own target has. */
    if (!replconn_start(ts[0].s.repl, ts[0].s.o->slot, start, ts[0].s.o->publication,
                        streamed ? 2 : 1, streamed, why))
        return false;
    for (size_t i = 0; i < n; i++)
    {
        ts[i].s.multi_streamed = streamed;
        frame_queue_init(&ts[i].q);
        ts[i].s.queue = &ts[i].q;
        ts[i].stop_lsn = stop_lsn;
        ts[i].ok = false;
        err_clear(&ts[i].err);
        atomic_store(&ts[i].done, false);
        ts[i].started = pthread_create(&ts[i].thread, NULL, multi_thread, &ts[i]) == 0;
        if (!ts[i].started)
        {
            err_set(&ts[i].err, EC_INTERNAL, "could not start a thread for %s",
                    ts[i].s.o->common.table);
            frame_queue_close(&ts[i].q);
            atomic_store(&ts[i].done, true);
        }
    }
    read_ok = multi_read(ts, n, stop_lsn, why);
    for (size_t i = 0; i < n; i++)
    {
        if (ts[i].started)
            (void) pthread_join(ts[i].thread, NULL);
        ts[i].started = false;
        frame_queue_destroy(&ts[i].q);
        ts[i].s.queue = NULL;
    }
    if (!read_ok)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!ts[i].ok && ts[i].s.relation_changed)
            *relation_changed = true;
    for (size_t i = 0; i < n; i++)
        if (!ts[i].ok && !ts[i].s.relation_changed && ts[i].err.code != EC_INTERRUPTED)
        {
            *why = ts[i].err;
            return false;
        }
    for (size_t i = 0; i < n; i++)
        if (!ts[i].ok && !ts[i].s.relation_changed)
        {
            *why = ts[i].err;
            return false;
        }
    return true;
}

/* A reconnect of every table's stream, counted where the connection was
 * lost: each target whose own connection broke, else the source's (one for
 * the stream, counted once). */
static void
multi_count_reconnect(MultiTarget *ts, size_t n)
{
    bool target = false;

    for (size_t i = 0; i < n; i++)
        if (pg_is_broken(ts[i].s.conn))
        {
            ts[i].s.st->reconnects++;
            stream_observer_reconnect(ts[i].s.ob, true);
            target = true;
        }
    if (!target)
    {
        ts[0].s.st->reconnects++;
        stream_observer_reconnect(ts[0].s.ob, false);
    }
}

/* The changes of every table until the end (caught up, interrupted), with
 * reconnects as for one table. */
static bool
multi_changes(MultiTarget *ts, size_t n, uint64_t stop_lsn, Err *err)
{
    Streamer *first = &ts[0].s;
    int attempt = 0;
    bool stop;

    for (;;)
    {
        Err why = {0};
        bool relation_changed = false;
        uint64_t before = 0, after = 0;

        for (size_t i = 0; i < n; i++)
            before += atomic_load(&ts[i].s.flush_pos);
        if (multi_run_once(ts, n, stop_lsn, &relation_changed, &why))
        {
            if (!relation_changed)
                return true;
            for (size_t i = 0; i < n; i++)
            {
                Streamer *s = &ts[i].s;

                /* as for one table */
                if (s->relation_changed && !relation_restart(s, err))
                    return false;
            }
            if (!open_source(first, err))
                return false;
            continue;
        }
        if (!pg_err_is_connection(&why) && why.code != EC_PG_CONNECT &&
            strcmp(why.sqlstate, "55006") != 0)
        {
            *err = why;
            return false;
        }
        /* A run that moved any target on: the attempts count from zero. */
        for (size_t i = 0; i < n; i++)
            after += atomic_load(&ts[i].s.flush_pos);
        if (after != before)
            attempt = 0;
        multi_count_reconnect(ts, n);
        for (size_t i = 0; i < n; i++)
            not_ready_reconnecting(&ts[i].s, &why);
        if (!reconnect_retry(first, &attempt, &why, true, &stop, err))
            return false;
        if (stop)
            return true;
        for (size_t i = 1; i < n; i++)
        {
            ts[i].s.repl = first->repl;
            if (pg_is_broken(ts[i].s.conn) && !pg_reconnect(ts[i].s.conn, &why))
            {
                /* Not back yet: the next run fails on it, counted and waited
                 * for as above. */
                log_warn("%s: %s", ts[i].s.o->common.table, why.msg);
                break;
            }
        }
    }
}

static void
stats_add(StreamStats *a, const StreamStats *b)
{
    import_stats_add_counts(&a->rows, &b->rows);
    if (b->rows.elapsed_s > a->rows.elapsed_s)
        a->rows.elapsed_s = b->rows.elapsed_s;
    a->copied += b->copied;
    a->transactions += b->transactions;
    a->skipped_transactions += b->skipped_transactions;
    a->deletes_ignored += b->deletes_ignored;
    a->truncates_ignored += b->truncates_ignored;
    a->quarantined += b->quarantined;
    a->bytes_received += b->bytes_received;
    a->reconnects += b->reconnects;
    a->streamed_direct += b->streamed_direct;
    a->streamed_spooled += b->streamed_spooled;
    a->streamed_aborted += b->streamed_aborted;
    a->streamed_to_spool += b->streamed_to_spool;
    a->streamed_restarts += b->streamed_restarts;
    if (a->start_lsn == 0 || (b->start_lsn && b->start_lsn < a->start_lsn))
        a->start_lsn = b->start_lsn;
    if (a->applied_lsn == 0 || b->applied_lsn < a->applied_lsn)
        a->applied_lsn = b->applied_lsn;
}

static bool
stream_run_multi(PgConn *c, const StreamOptions *o, StreamStats *st, Err *err)
{
    size_t n = o->ntables;
    MultiTarget *ts = xcalloc(n, sizeof *ts);
    ReplTable *tables = xcalloc(n, sizeof *tables);
    char snapshot[128];
    bool *copy = xcalloc(n, sizeof *copy);
    bool ok = false;
    uint64_t stop_lsn = 0;
    Streamer *first = &ts[0].s;

    memset(st, 0, sizeof *st);
    if (o->common.key_map_column)
    {
        err_set(err, EC_USAGE, "--key-map takes one --from: a typed key map names one table's "
                               "rows");
        goto out;
    }
    if (o->resnapshot)
    {
        err_set(err, EC_USAGE, "--resnapshot takes one --from");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
    {
        MultiTarget *t = &ts[i];

        if (!parse_from(o->tables[i].from, &tables[i], err))
            goto out;
        for (size_t k = 0; k < i; k++)
            if (strcmp(o->tables[k].target, o->tables[i].target) == 0 ||
                (strcmp(tables[k].schema, tables[i].schema) == 0 &&
                 strcmp(tables[k].name, tables[i].name) == 0))
            {
                err_set(err, EC_USAGE, "--from %s: %s given twice", o->tables[i].from,
                        strcmp(o->tables[k].target, o->tables[i].target) == 0 ? "the target"
                                                                               : "the table");
                goto out;
            }
        t->o = *o;
        t->o.from = o->tables[i].from;
        t->o.common.table = o->tables[i].target;
        t->o.tables = NULL;
        t->o.ntables = 0;
        t->s.o = &t->o;
        t->s.st = &t->st;
        t->s.from = tables[i];
        t->s.row_target = o->tables[i].target;
        t->s.borrowed = i > 0;
        clocks_share(&t->s, first);
        (void) snprintf(t->s.relation, sizeof t->s.relation, "%s.%s", tables[i].schema,
                        tables[i].name);
    }
    {
        const char **targets = xcalloc(n, sizeof *targets);

        for (size_t i = 0; i < n; i++)
            targets[i] = o->tables[i].target;
        ok = stream_observer_start(o->metrics_listen, targets, n, &first->ob, err);
        free(targets);
        if (!ok)
            goto out;
        ok = false;
        for (size_t i = 1; i < n; i++)
            ts[i].s.ob = stream_observer_target(first->ob, i);
    }
    if (!pg_connect(o->source_conninfo, &first->src_sql, err))
    {
        err_prefix(err, "the source");
        goto out;
    }
    if (!replconn_preflight(first->src_sql, o->publication, tables, n, err))
        goto out;
    for (size_t i = 0; i < n; i++)
    {
        /* Each table's own: its thread re-reads its columns on a new one while
         * the first's watches the slot (a connection is one thread's). */
        if (i > 0 && !pg_connect(o->source_conninfo, &ts[i].s.src_sql, err))
        {
            err_prefix(err, "the source");
            goto out;
        }
        if (!replconn_table_info(ts[i].s.src_sql, &ts[i].s.from, &ts[i].s.info, err))
            goto out;
    }
    if (!multi_columns_check(ts, n, o, err))
        goto out;
    for (size_t i = 0; i < n; i++)
    {
        MultiTarget *t = &ts[i];

        multi_options(t, o);
        if (i == 0)
            t->s.conn = c;
        else if (!pg_connect_again(c, &t->s.conn, err))
            goto out;
        if (!target_open(&t->s, &t->po, &t->inputs, err))
            goto out;
    }
    if (!open_source(first, err))
        goto out;
    for (size_t i = 1; i < n; i++)
    {
        ts[i].s.repl = first->repl;
        ts[i].s.sys = first->sys;
    }
    if (o->until_caught_up && !source_flushed_lsn(first, &stop_lsn, err))
        goto out;
    if (!multi_setup_slot(ts, n, snapshot, sizeof snapshot, copy, err))
        goto out;
    for (size_t i = 0; i < n; i++)
        if (!check_columns(&ts[i].s, err))
            goto out;
    for (size_t i = 0; i < n; i++)
        if (!start_watch(&ts[i].s, err))
            goto out;
    /* Every copy under the one snapshot: the replication connection runs
     * nothing until the last is done. */
    for (size_t i = 0; i < n; i++)
        if (copy[i] && !run_copy(&ts[i].s, snapshot, err))
            goto out;
    for (size_t i = 0; i < n; i++)
        ts[i].po.progress = false;
    if (!multi_changes(ts, n, stop_lsn, err))
        goto out;
    ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = pipeline_finish(ts[i].s.pl, err);
out:
    for (size_t i = 0; i < n; i++)
    {
        MultiTarget *t = &ts[i];

        if (t->s.pl)
        {
            Err cerr = {0};

            if (!pipeline_close(t->s.pl, ok, &cerr) && ok)
            {
                ok = false;
                *err = cerr;
            }
            record_end(&t->s, ok, err);
        }
        pipeline_free(t->s.pl);
        stats_add(st, &t->st);
        import_stats_free(&t->st.rows);
    }
    for (size_t i = n; i-- > 0;)
    {
        MultiTarget *t = &ts[i];

        streamer_free(&t->s);
        if (i > 0)
            pg_close(t->s.conn);
        free(t->maps);
        free(t->ignore);
    }
    free(ts);
    free(tables);
    free(copy);
    return ok;
}

bool
stream_tables_parse(const char *const *froms, size_t n, bool has_target, StreamTable **out,
                    size_t *nout, Err *err)
{
    size_t named = 0;
    StreamTable *t;

    *out = NULL;
    *nout = 0;
    for (size_t i = 0; i < n; i++)
        named += strchr(froms[i], '=') != NULL;
    if (named == 0)
    {
        if (n > 1)
            return err_set(err, EC_USAGE,
                           "--from given %zu times: several tables take --from "
                           "SCHEMA.TABLE=TARGET each (and no TABLE argument)",
                           n);
        return true;
    }
    if (named < n)
        return err_set(err, EC_USAGE,
                       "--from: either one SCHEMA.TABLE (with the TABLE argument) or each "
                       "--from as SCHEMA.TABLE=TARGET, not both");
    if (has_target)
        return err_set(err, EC_USAGE,
                       "--from SCHEMA.TABLE=TARGET names the targets: no TABLE argument");
    t = xcalloc(n, sizeof *t);
    for (size_t i = 0; i < n; i++)
    {
        const char *eq = strchr(froms[i], '=');

        if (eq == froms[i] || eq[1] == '\0')
        {
            stream_tables_free(t, i);
            return err_set(err, EC_USAGE, "--from takes SCHEMA.TABLE=TARGET, got \"%s\"",
                           froms[i]);
        }
        t[i].from = xstrndup(froms[i], (size_t) (eq - froms[i]));
        t[i].target = xstrdup(eq + 1);
        for (size_t k = 0; k < i; k++)
            if (strcmp(t[k].target, t[i].target) == 0)
            {
                err_set(err, EC_USAGE, "--from %s: target %s given twice", froms[i],
                        t[i].target);
                stream_tables_free(t, i + 1);
                return false;
            }
    }
    *out = t;
    *nout = n;
    return true;
}

void
stream_tables_free(StreamTable *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
    {
        free((char *) t[i].from);
        free((char *) t[i].target);
    }
    free(t);
}

bool
stream_run(PgConn *c, const StreamOptions *o, StreamStats *st, Err *err)
{
    Streamer s;
    PipelineOptions po;
    PipelineInputs inputs = {0};
    char snapshot[128];
    bool copy = false;
    bool ok = false;
    uint64_t stop_lsn = 0;

    if (o->ntables > 0)
        return stream_run_multi(c, o, st, err);
    memset(&s, 0, sizeof s);
    memset(st, 0, sizeof *st);
    s.conn = c;
    s.o = o;
    s.st = st;
    clocks_share(&s, &s);
    if (!parse_from(o->from, &s.from, err))
        return false;
    (void) snprintf(s.relation, sizeof s.relation, "%s.%s", s.from.schema, s.from.name);
    /* The endpoint first: a bad --metrics-listen touches nothing. */
    if (!stream_observer_start(o->metrics_listen, &o->common.table, 1, &s.ob, err))
        return false;
    if (!pg_connect(o->source_conninfo, &s.src_sql, err))
    {
        err_prefix(err, "the source");
        goto out;
    }
    if (!replconn_preflight(s.src_sql, o->publication, &s.from, 1, err) ||
        !replconn_table_info(s.src_sql, &s.from, &s.info, err) ||
        !target_open(&s, &po, &inputs, err) || !open_source(&s, err))
        goto out;
    if (o->until_caught_up && !source_flushed_lsn(&s, &stop_lsn, err))
        goto out;
    if (!setup_slot(&s, snapshot, sizeof snapshot, &copy, err) || !check_columns(&s, err) ||
        !start_watch(&s, err))
        goto out;
    if (copy && !run_copy(&s, snapshot, err))
        goto out;
    po.progress = false; /* pipeline_open keeps a pointer to po */
    /* Changes on --jobs connections too: batches commit in source order, and
     * one that touches a row a batch in flight touches waits for it. */
    if (po.jobs > 1)
        log_info("%s: changes applied on %d writer connections, committed in source order",
                 s.relation, po.jobs);
    /* The exported snapshot is no longer needed: the replication connection
     * may take commands again. */
    if (!stream_changes(&s, stop_lsn, err) || !pipeline_finish(s.pl, err))
        goto out;
    ok = true;
out:
    if (s.pl)
    {
        ok = pipeline_close(s.pl, ok, err);
        record_end(&s, ok, err);
    }
    pipeline_free(s.pl);
    streamer_free(&s);
    return ok;
}
