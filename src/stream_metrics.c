/*
 * The stream's metric definitions.  The insert-delay buckets are taken from
 * the tracker's display histogram at run time, so the two never drift apart.
 */
#include "v7fill/stream_metrics.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "v7fill/tracker.h"

#define L1(a)    1, {a}
#define L2(a, b) 2, {a, b}

static const MetricDef defs[SM_COUNT] = {
    [SM_ROWS_APPLIED] = {METRIC_COUNTER, "v7fill_stream_rows_applied_total",
                         "Rows applied to the target table, by operation (a TRUNCATE counts 1).",
                         METRIC_UNIT_NONE, L2("table", "op")},
    [SM_DUPLICATES] = {METRIC_COUNTER, "v7fill_stream_duplicates_total",
                       "Inserts not applied because the row was already in the target.", METRIC_UNIT_NONE,
                       L1("table")},
    [SM_QUARANTINED] = {METRIC_COUNTER, "v7fill_stream_quarantined_rows_total",
                        "Rows set aside in the quarantine table instead of the target, by reason.",
                        METRIC_UNIT_NONE, L2("table", "reason")},
    [SM_SOURCE_TXNS] = {METRIC_COUNTER, "v7fill_stream_source_transactions_total",
                        "Source transactions applied to the target.", METRIC_UNIT_NONE},
    [SM_TARGET_COMMITS] = {METRIC_COUNTER, "v7fill_stream_target_commits_total",
                           "Transactions committed in the target (each holds one or more source transactions).",
                           METRIC_UNIT_NONE},
    [SM_RECEIVED_BYTES] = {METRIC_COUNTER, "v7fill_stream_received_bytes_total",
                           "Bytes of replication messages received from the source.", METRIC_UNIT_BYTES},
    [SM_APPLY_LAG_BYTES] = {METRIC_GAUGE, "v7fill_stream_apply_lag_bytes",
                            "Source end of WAL minus the last applied commit's LSN.", METRIC_UNIT_BYTES},
    [SM_APPLY_LAG_SECONDS] = {METRIC_GAUGE, "v7fill_stream_apply_lag_seconds",
                              "Now minus the source commit time of the last applied transaction, corrected "
                              "for the clock offset between the servers; 0 when caught up.",
                              METRIC_UNIT_SECONDS},
    [SM_SLOT_RETAINED_WAL] = {METRIC_GAUGE, "v7fill_stream_slot_retained_wal_bytes",
                              "WAL the source keeps for the slot: pg_current_wal_lsn() minus restart_lsn.",
                              METRIC_UNIT_BYTES},
    [SM_SLOT_WAL_STATUS] = {METRIC_GAUGE, "v7fill_stream_slot_wal_status",
                            "The slot's wal_status: 1 for the current status, 0 for the others.",
                            METRIC_UNIT_NONE, L1("status")},
    [SM_SLOT_SAFE_WAL_SIZE] = {METRIC_GAUGE, "v7fill_stream_slot_safe_wal_size_bytes",
                               "WAL that can still be written before the slot is lost (safe_wal_size); "
                               "+Inf when max_slot_wal_keep_size is unlimited.",
                               METRIC_UNIT_BYTES},
    [SM_INSERT_DELAY] = {METRIC_HISTOGRAM, "v7fill_stream_insert_delay_seconds",
                         "Delay from the time a row's id carries to its insert into the target.",
                         METRIC_UNIT_SECONDS, L1("table")},
    [SM_LATE_ROWS] = {METRIC_COUNTER, "v7fill_stream_late_rows_total",
                      "Rows whose time window was already past the retention cutoff when they arrived.",
                      METRIC_UNIT_NONE, L1("table")},
    [SM_NEAR_CUTOFF_ROWS] = {METRIC_COUNTER, "v7fill_stream_near_cutoff_rows_total",
                             "Rows whose time window retires within the near-cutoff horizon.",
                             METRIC_UNIT_NONE, L1("table")},
    [SM_RECONNECTS] = {METRIC_COUNTER, "v7fill_stream_reconnects_total",
                       "Reconnections after a lost connection, by side (source or target).", METRIC_UNIT_NONE,
                       L1("side")},
    [SM_LAST_APPLIED_LSN] = {METRIC_GAUGE, "v7fill_stream_last_applied_lsn",
                             "End LSN of the last applied source commit, as a number.", METRIC_UNIT_NONE},
    [SM_INITIAL_COPY_RUNNING] = {METRIC_GAUGE, "v7fill_stream_initial_copy_running",
                                 "1 while the initial copy of the source table runs, else 0.",
                                 METRIC_UNIT_NONE},
    [SM_INITIAL_COPY_ROWS] = {METRIC_COUNTER, "v7fill_stream_initial_copy_rows_total",
                              "Rows copied into the target by the initial copy.", METRIC_UNIT_NONE,
                              L1("table")},
    [SM_CLOCK_OFFSET] = {METRIC_GAUGE, "v7fill_stream_clock_offset_seconds",
                         "The source server's clock minus the target server's, each read at the "
                         "middle of a round trip from this host.",
                         METRIC_UNIT_SECONDS},
};

/* The wal_status values of PostgreSQL 13 to 17, shown at 0 from the start. */
static const char *const wal_statuses[] = {"reserved", "extended", "unreserved", "lost"};

static double delay_bounds[METRIC_MAX_BUCKETS];
static size_t ndelay_bounds;
static pthread_once_t delay_once = PTHREAD_ONCE_INIT;

/* init_delay_bounds: the tracker's display bucket upper edges, in seconds. */
static void
init_delay_bounds(void)
{
    Tracker *t = tracker_new(0, 0);
    const TrackerBucket *b;
    size_t nb = tracker_display(t, &b);
    for (size_t i = 0; i < nb && ndelay_bounds < METRIC_MAX_BUCKETS; i++)
        if (b[i].upper_us != INT64_MAX)
            delay_bounds[ndelay_bounds++] = (double) b[i].upper_us / 1e6;
    tracker_free(t);
}

size_t
stream_metrics_delay_buckets(const double **bounds)
{
    pthread_once(&delay_once, init_delay_bounds);
    *bounds = delay_bounds;
    return ndelay_bounds;
}

const MetricDef *
stream_metric_def(StreamMetric which)
{
    return which < SM_COUNT ? &defs[which] : NULL;
}

/* A target's families without the label table for one target: with several
 * targets they get it, first (reconnects: before side). */
static bool
per_target_unlabeled(StreamMetric which)
{
    switch (which)
    {
        case SM_SOURCE_TXNS:
        case SM_TARGET_COMMITS:
        case SM_APPLY_LAG_BYTES:
        case SM_APPLY_LAG_SECONDS:
        case SM_LAST_APPLIED_LSN:
        case SM_INITIAL_COPY_RUNNING:
        case SM_RECONNECTS:
            return true;
        default:
            return false;
    }
}

size_t
stream_metrics_nlabels(const StreamMetrics *sm, StreamMetric which)
{
    if (which >= SM_COUNT)
        return 0;
    return defs[which].nlabels + (sm->several && per_target_unlabeled(which) ? 1 : 0);
}

bool
stream_metrics_define(Metrics *m, StreamMetrics *sm, Err *err)
{
    return stream_metrics_define_for(m, sm, false, err);
}

bool
stream_metrics_define_for(Metrics *m, StreamMetrics *sm, bool several, Err *err)
{
    memset(sm, 0, sizeof *sm);
    sm->reg = m;
    sm->several = several;
    for (size_t i = 0; i < SM_COUNT; i++)
    {
        MetricDef d = defs[i];
        if (d.type == METRIC_HISTOGRAM)
            d.nbuckets = stream_metrics_delay_buckets(&d.buckets);
        if (several && per_target_unlabeled((StreamMetric) i))
        {
            for (size_t k = d.nlabels; k > 0; k--)
                d.labels[k] = d.labels[k - 1];
            d.labels[0] = "table";
            d.nlabels++;
        }
        if (!metrics_define(m, &d, &sm->fam[i], err))
            return false;
    }
    for (size_t i = 0; i < sizeof wal_statuses / sizeof wal_statuses[0]; i++)
    {
        MetricSeries *s;
        if (!metrics_series(sm->fam[SM_SLOT_WAL_STATUS], &wal_statuses[i], 1, &s, err))
            return false;
    }
    return true;
}

bool
stream_metrics_series(StreamMetrics *sm, StreamMetric which, const char *const *values, size_t nvalues,
                      MetricSeries **out, Err *err)
{
    if (which >= SM_COUNT || sm->fam[which] == NULL)
        return err_set(err, EC_INTERNAL, "stream metric %d is not defined", (int) which);
    return metrics_series(sm->fam[which], values, nvalues, out, err);
}

bool
stream_metrics_set_wal_status(StreamMetrics *sm, const char *status, Err *err)
{
    MetricFamily *f = sm->fam[SM_SLOT_WAL_STATUS];
    MetricSeries *cur = NULL;
    if (status != NULL)
    {
        if (!metrics_series(f, &status, 1, &cur, err))
            return false;
        metrics_gauge_set(cur, 1.0); /* first: a scrape never sees no current status */
    }
    metrics_gauge_set_others(f, cur, 0.0);
    return true;
}
