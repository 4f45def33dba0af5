/*
 * Watching a running stream: its metrics (stream_metrics.h) set from the real
 * values, the /readyz state, and the source slot's WAL (retained bytes,
 * wal_status, safe_wal_size) with the warnings an operator needs.
 *
 * Threads: stream_observer_commit, _delay and _rollback are called on the
 * pipeline's writer thread, stream_observer_progress and
 * stream_observer_slot on the reader's, the rest on the main thread; every
 * update is a lock-free atomic of the registry, and the HTTP server answers
 * on its own thread, so a scrape never waits for the stream nor the stream
 * for a scrape.
 */
#ifndef V7FILL_STREAM_OBSERVE_H
#define V7FILL_STREAM_OBSERVE_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/pipeline.h"

typedef struct StreamObserver StreamObserver;

/* The metrics of the stream into the target tables (ntables >= 1; one slot),
 * each target's series labelled with its name (stream_metrics.h: with several
 * targets every family of a target has the label table, the slot's are one
 * series); *out is the first target's observer (stream_observer_target for
 * the others).  With listen (ADDR:PORT, see http_metrics.h) the endpoint is
 * bound before this returns (a bad address: EC_USAGE; in use / not this
 * host's: EC_IO), every target's readiness "starting".  listen NULL: the
 * values are kept, nothing listens. */
V7FILL_MUST_CHECK bool stream_observer_start(const char *listen, const char *const *tables,
                                             size_t ntables, StreamObserver **out, Err *err);
/* Target i's observer (0: ob itself), or NULL; it dies with ob.  Any of them
 * sets the slot's series (stream_observer_slot, _clock, a source-side
 * _reconnect, the bytes of _progress) for the whole stream. */
StreamObserver *stream_observer_target(StreamObserver *ob, size_t i);
/* Stops the endpoint and frees every target's observer: given the one that
 * stream_observer_start returned (another is a no-op); NULL-safe. */
void stream_observer_free(StreamObserver *ob);
uint16_t stream_observer_port(const StreamObserver *ob); /* 0 without an endpoint */

/* This target's readiness.  /readyz: 200 when every target is ready, else 503
 * "not ready: reason" of the first target that is not (prefixed "TABLE: "
 * with several targets). */
void stream_observer_ready(StreamObserver *ob, bool ready, const char *reason);

/* After a target commit: the counts this run applied (cumulative since the
 * start of the process), the applied commit's end LSN (0: the initial copy);
 * the delays given since the last commit are published. */
void stream_observer_commit(StreamObserver *ob, const BatchCounts *run, uint64_t applied_lsn);
/* One row inserted (or expired) with its id → insert delay and class
 * (DelayClass), in the target transaction being written: kept apart until
 * stream_observer_commit publishes it (insert_delay_seconds, late_rows_total,
 * near_cutoff_rows_total), or stream_observer_rollback drops it.  Called on
 * the thread that commits (both under the pipeline's lock). */
void stream_observer_delay(StreamObserver *ob, int64_t delay_us, int delay_class);
/* The target transaction being written was rolled back (a large source
 * transaction's pieces lost with their connection): its delays are dropped,
 * so the histogram counts what the target holds. */
void stream_observer_rollback(StreamObserver *ob);
void stream_observer_copy(StreamObserver *ob, bool running, uint64_t rows);
/* A reconnection: of the source connection (the stream's one), or of this
 * target's own connection (target_side; with several targets, its series). */
void stream_observer_reconnect(StreamObserver *ob, bool target_side);
/* From the reader: source transactions and bytes so far (this process), the
 * lag in bytes, and in seconds (already clock-corrected; 0 when caught up). */
void stream_observer_progress(StreamObserver *ob, uint64_t transactions, uint64_t bytes,
                              uint64_t lag_bytes, double lag_s);

/* The slot's WAL as the source sees it. */
typedef struct SlotWal
{
    bool exists;
    bool active;
    int active_pid;
    char plugin[64];
    uint64_t retained;      /* pg_current_wal_lsn() - restart_lsn */
    char wal_status[16];    /* "" when NULL */
    bool safe_known;        /* safe_wal_size not NULL */
    int64_t safe_wal_size;
    int64_t keep_size_mb;   /* max_slot_wal_keep_size in MB, -1 unlimited */
    uint64_t restart_lsn, confirmed_lsn, current_lsn;
} SlotWal;

/* Read it on an ordinary connection to the source. */
V7FILL_MUST_CHECK bool stream_slot_wal(PgConn *src, const char *slot, SlotWal *out, Err *err);
/* Set the slot metrics from w and log what an operator must know: retained
 * WAL above warn_bytes (0: no warning), a status other than reserved, and
 * (once per process, first) an unlimited max_slot_wal_keep_size. */
void stream_observer_slot(StreamObserver *ob, const char *slot, const SlotWal *w,
                          uint64_t warn_bytes);

/* The offset of a server's clock over this host's, in µs: its
 * clock_timestamp() minus this host's clock at the middle of the round trip
 * (stream_clock_offset_at). */
V7FILL_MUST_CHECK bool stream_clock_offset(PgConn *c, int64_t *offset_us, Err *err);

/* The clocks' arithmetic (pure).  A server's clock read as server_us between
 * before_us and after_us on this host's clock: its offset over this host,
 * server_us minus the middle of the round trip. */
int64_t stream_clock_offset_at(int64_t server_us, int64_t before_us, int64_t after_us);
/* Apply lag in seconds, on the target's clock: now there (host_now_us +
 * target_offset_us) minus the applied commit's source time moved to the
 * target's clock (commit_us minus the source's offset to the target,
 * source_offset_us - target_offset_us).  Offsets are over this host's clock.
 * 0 when commit_us <= 0 (nothing applied yet) or the result is negative. */
double stream_lag_seconds(int64_t host_now_us, int64_t source_offset_us, int64_t target_offset_us,
                          int64_t commit_us);
/* clock_offset_seconds: the source's clock minus the target's, in µs. */
void stream_observer_clock(StreamObserver *ob, int64_t source_to_target_us);

#endif /* V7FILL_STREAM_OBSERVE_H */
