/*
 * The metrics of `v7fill stream`, defined in one place so that the stream
 * only sets values.  Every name starts with v7fill_stream_; docs/operating.md
 * explains each one and gives alert rules.
 *
 *   name (type; labels)                                 meaning
 *   rows_applied_total (counter; table, op)             rows applied to the target; op is insert,
 *                                                       update, delete, or truncate (1 per TRUNCATE)
 *   duplicates_total (counter; table)                   inserts whose row was already there
 *   quarantined_rows_total (counter; table, reason)     rows set aside in the quarantine table
 *   source_transactions_total (counter)                 source transactions applied
 *   target_commits_total (counter)                      target transactions committed
 *   received_bytes_total (counter, bytes)               replication bytes received from the source
 *   apply_lag_bytes (gauge, bytes)                      source end of WAL − applied LSN
 *   apply_lag_seconds (gauge, seconds)                  now − applied commit's source time (clock
 *                                                       offset corrected), 0 when caught up
 *   slot_retained_wal_bytes (gauge, bytes)              pg_current_wal_lsn() − the slot's restart_lsn
 *   slot_wal_status (gauge; status)                     1 for the slot's current wal_status, 0 else
 *   slot_safe_wal_size_bytes (gauge, bytes)             the slot's safe_wal_size; +Inf when unlimited
 *   insert_delay_seconds (histogram, seconds; table)    id time → insert time, the tracker's buckets
 *   late_rows_total (counter; table)                    rows whose window was already past retention
 *   near_cutoff_rows_total (counter; table)             rows whose window retires within near-cutoff
 *   reconnects_total (counter; side)                    reconnections; side is source or target
 *                                                       (several targets: table, side)
 *   last_applied_lsn (gauge)                            the last applied commit's end LSN, as a number
 *   initial_copy_running (gauge)                        1 while the initial copy runs, else 0
 *   initial_copy_rows_total (counter; table)            rows copied by the initial copy
 *   clock_offset_seconds (gauge, seconds)               the source server's clock minus the
 *                                                       target server's (stream_clock_offset)
 *
 * Several targets of one slot (stream --from S.T=TARGET ...): the families
 * of one target's applying that have no label table for one target
 * (source_transactions_total, target_commits_total, apply_lag_bytes,
 * apply_lag_seconds, last_applied_lsn, initial_copy_running, and
 * reconnects_total before its side) get the label table, so every family of
 * a target has one series per target; reconnects_total{side="source"} (the
 * one source connection) has table="" (Prometheus reads an empty label as no
 * label); the slot's (received bytes, the slot's WAL, the clock offset) stay
 * one series for the stream.  One target: the families exactly as in the
 * table above.
 */
#ifndef V7FILL_STREAM_METRICS_H
#define V7FILL_STREAM_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/metrics.h"

typedef enum StreamMetric
{
    SM_ROWS_APPLIED = 0,
    SM_DUPLICATES,
    SM_QUARANTINED,
    SM_SOURCE_TXNS,
    SM_TARGET_COMMITS,
    SM_RECEIVED_BYTES,
    SM_APPLY_LAG_BYTES,
    SM_APPLY_LAG_SECONDS,
    SM_SLOT_RETAINED_WAL,
    SM_SLOT_WAL_STATUS,
    SM_SLOT_SAFE_WAL_SIZE,
    SM_INSERT_DELAY,
    SM_LATE_ROWS,
    SM_NEAR_CUTOFF_ROWS,
    SM_RECONNECTS,
    SM_LAST_APPLIED_LSN,
    SM_INITIAL_COPY_RUNNING,
    SM_INITIAL_COPY_ROWS,
    SM_CLOCK_OFFSET,
    SM_COUNT,
} StreamMetric;

/* The definition of one (name, help, type, unit, labels; the histogram's
 * buckets are those of stream_metrics_delay_buckets). */
const MetricDef *stream_metric_def(StreamMetric which);

/* The insert-delay histogram's upper bounds in seconds: the upper edges of
 * the tracker's display buckets (tracker_display), 1 ms to 365 days. */
size_t stream_metrics_delay_buckets(const double **bounds);

/* The families of one stream, defined in m by stream_metrics_define. */
typedef struct StreamMetrics
{
    Metrics *reg; /* borrowed */
    MetricFamily *fam[SM_COUNT];
    bool several; /* several targets: a target's families all have the label table */
} StreamMetrics;

/* Define every stream metric in m (EC_INTERNAL if one is already there), for
 * one target. */
V7FILL_MUST_CHECK bool stream_metrics_define(Metrics *m, StreamMetrics *sm, Err *err);
/* The same, for several targets when several is true (see above). */
V7FILL_MUST_CHECK bool stream_metrics_define_for(Metrics *m, StreamMetrics *sm, bool several,
                                                 Err *err);
/* The label names of a family as sm defined it: its definition's, with
 * "table" first for a target's family of a stream of several targets. */
size_t stream_metrics_nlabels(const StreamMetrics *sm, StreamMetric which);

/* The series of a family with the given label values (in the order of the
 * table above), e.g. stream_metrics_series(sm, SM_ROWS_APPLIED, (const char *[]) {"t", "insert"},
 * 2, &s, err).  Look it up once and keep it: updates through it are lock-free. */
V7FILL_MUST_CHECK bool stream_metrics_series(StreamMetrics *sm, StreamMetric which, const char *const *values,
                                             size_t nvalues, MetricSeries **out, Err *err);

/* slot_wal_status: 1 for status ("reserved", "extended", "unreserved",
 * "lost", or any other the server reports), 0 for every other status seen or
 * known; NULL (no slot) sets them all to 0. */
V7FILL_MUST_CHECK bool stream_metrics_set_wal_status(StreamMetrics *sm, const char *status, Err *err);

#endif /* V7FILL_STREAM_METRICS_H */
