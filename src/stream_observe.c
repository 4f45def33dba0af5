/*
 * stream_observe.c: the stream's metrics and readiness, and the slot's WAL
 * (see stream_observe.h).
 */
#include "v7fill/stream_observe.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "v7fill/http_metrics.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/pgoutput.h"
#include "v7fill/stream_metrics.h"
#include "v7fill/tracker.h"

enum
{
    OP_INSERT,
    OP_UPDATE,
    OP_DELETE,
    OP_TRUNCATE,
    OP_COUNT
};

/* What the targets of one stream share: the registry, the endpoint, the
 * slot's and the source connection's series. */
typedef struct ObserverShared
{
    Metrics *reg;
    StreamMetrics sm;
    HttpMetrics *http;
    StreamObserver *views; /* one per target; views[0] is the one start returned */
    size_t nviews;
    MetricSeries *bytes, *retained, *safe, *reconnects_source, *clock;
} ObserverShared;

/* One target's view: its series and its readiness. */
struct StreamObserver
{
    ObserverShared *sh;
    char *table;
    HttpReadyState ready;
    MetricSeries *applied[OP_COUNT];
    MetricSeries *duplicates, *quar_rejected, *quar_late, *txns, *commits;
    MetricSeries *lag_bytes, *lag_s, *delay, *late, *near;
    MetricSeries *last_lsn, *copy_running, *copy_rows;
    MetricSeries *reconnects_target; /* its own target connection's */
    /* The delays of rows written in a target transaction not committed yet
     * (the pieces of a large source transaction): published by the commit,
     * dropped by a rollback.  Only the thread counting the target's rows
     * touches them (under the pipeline's lock). */
    struct
    {
        uint64_t buckets[METRIC_MAX_BUCKETS + 1]; /* not cumulative; the last +Inf */
        double sum;
        uint64_t rows, near, late;
    } pending;
};

/* The series of which with these label values: the target's table first for
 * a target's family (the family takes as many as it has; reconnects_total
 * takes the table only with several targets: reconnects() gives its values). */
static bool
series(ObserverShared *sh, StreamMetric which, const char *a, const char *b, MetricSeries **out,
       Err *err)
{
    const char *v[2] = {a, b};

    return stream_metrics_series(&sh->sm, which, v, stream_metrics_nlabels(&sh->sm, which), out,
                                 err);
}

/* reconnects_total{side}: with several targets {table, side}, the source
 * connection (one for the stream) with table "" (Prometheus: no label), each
 * target's own connection with its table. */
static bool
reconnects(ObserverShared *sh, const char *table, const char *side, MetricSeries **out, Err *err)
{
    return sh->sm.several ? series(sh, SM_RECONNECTS, table, side, out, err)
                          : series(sh, SM_RECONNECTS, side, NULL, out, err);
}

static bool
shared_series(ObserverShared *sh, Err *err)
{
    return series(sh, SM_RECEIVED_BYTES, NULL, NULL, &sh->bytes, err) &&
           series(sh, SM_SLOT_RETAINED_WAL, NULL, NULL, &sh->retained, err) &&
           series(sh, SM_SLOT_SAFE_WAL_SIZE, NULL, NULL, &sh->safe, err) &&
           reconnects(sh, "", "source", &sh->reconnects_source, err) &&
           series(sh, SM_CLOCK_OFFSET, NULL, NULL, &sh->clock, err);
}

static bool
target_series(StreamObserver *ob, Err *err)
{
    static const char *const ops[OP_COUNT] = {"insert", "update", "delete", "truncate"};
    ObserverShared *sh = ob->sh;
    const char *t = ob->table;

    for (int i = 0; i < OP_COUNT; i++)
        if (!series(sh, SM_ROWS_APPLIED, t, ops[i], &ob->applied[i], err))
            return false;
    return series(sh, SM_DUPLICATES, t, NULL, &ob->duplicates, err) &&
           series(sh, SM_QUARANTINED, t, "rejected", &ob->quar_rejected, err) &&
           series(sh, SM_QUARANTINED, t, "late", &ob->quar_late, err) &&
           series(sh, SM_SOURCE_TXNS, t, NULL, &ob->txns, err) &&
           series(sh, SM_TARGET_COMMITS, t, NULL, &ob->commits, err) &&
           series(sh, SM_APPLY_LAG_BYTES, t, NULL, &ob->lag_bytes, err) &&
           series(sh, SM_APPLY_LAG_SECONDS, t, NULL, &ob->lag_s, err) &&
           series(sh, SM_INSERT_DELAY, t, NULL, &ob->delay, err) &&
           series(sh, SM_LATE_ROWS, t, NULL, &ob->late, err) &&
           series(sh, SM_NEAR_CUTOFF_ROWS, t, NULL, &ob->near, err) &&
           series(sh, SM_LAST_APPLIED_LSN, t, NULL, &ob->last_lsn, err) &&
           series(sh, SM_INITIAL_COPY_RUNNING, t, NULL, &ob->copy_running, err) &&
           series(sh, SM_INITIAL_COPY_ROWS, t, NULL, &ob->copy_rows, err) &&
           reconnects(sh, t, "target", &ob->reconnects_target, err);
}

/* /readyz: ready when every target is; else the first that is not says why
 * (with its table's name when there are several). */
static bool
ready_all(void *arg, char *reason, size_t size)
{
    ObserverShared *sh = arg;

    for (size_t i = 0; i < sh->nviews; i++)
    {
        char why[256];

        if (http_ready_state_cb(&sh->views[i].ready, why, sizeof why))
            continue;
        if (sh->nviews > 1)
            (void) snprintf(reason, size, "%s: %s", sh->views[i].table, why);
        else
            (void) snprintf(reason, size, "%s", why);
        return false;
    }
    return true;
}

static void
shared_free(ObserverShared *sh)
{
    http_metrics_stop(sh->http);
    for (size_t i = 0; i < sh->nviews; i++)
    {
        http_ready_state_deinit(&sh->views[i].ready);
        free(sh->views[i].table);
    }
    free(sh->views);
    metrics_free(sh->reg);
    free(sh);
}

bool
stream_observer_start(const char *listen, const char *const *tables, size_t ntables,
                      StreamObserver **out, Err *err)
{
    ObserverShared *sh = xcalloc(1, sizeof *sh);
    bool ok;

    *out = NULL;
    sh->reg = metrics_new();
    sh->views = xcalloc(ntables, sizeof *sh->views);
    sh->nviews = ntables;
    for (size_t i = 0; i < ntables; i++)
    {
        sh->views[i].sh = sh;
        sh->views[i].table = xstrdup(tables[i]);
        http_ready_state_init(&sh->views[i].ready, "starting");
    }
    ok = stream_metrics_define_for(sh->reg, &sh->sm, ntables > 1, err) && shared_series(sh, err);
    for (size_t i = 0; i < ntables && ok; i++)
        ok = target_series(&sh->views[i], err);
    if (!ok || (listen && !http_metrics_start(listen, sh->reg, ready_all, sh, &sh->http, err)))
    {
        if (listen)
            err_prefix(err, "--metrics-listen");
        shared_free(sh);
        return false;
    }
    if (sh->http)
        log_info("metrics on http://%s/metrics (readiness: /readyz)", listen);
    *out = &sh->views[0];
    return true;
}

StreamObserver *
stream_observer_target(StreamObserver *ob, size_t i)
{
    return ob && i < ob->sh->nviews ? &ob->sh->views[i] : NULL;
}

void
stream_observer_free(StreamObserver *ob)
{
    if (ob == NULL || ob != &ob->sh->views[0])
        return;
    shared_free(ob->sh);
}

uint16_t
stream_observer_port(const StreamObserver *ob)
{
    return ob && ob->sh->http ? http_metrics_port(ob->sh->http) : 0;
}

void
stream_observer_ready(StreamObserver *ob, bool ready, const char *reason)
{
    if (ob)
        http_ready_state_set(&ob->ready, ready, reason);
}

void
stream_observer_commit(StreamObserver *ob, const BatchCounts *run, uint64_t applied_lsn)
{
    if (ob == NULL)
        return;
    metrics_counter_raise(ob->applied[OP_INSERT], run->inserted);
    metrics_counter_raise(ob->applied[OP_UPDATE], run->updated);
    metrics_counter_raise(ob->applied[OP_DELETE], run->deleted);
    metrics_counter_raise(ob->applied[OP_TRUNCATE], run->truncates);
    metrics_counter_raise(ob->duplicates, run->duplicates);
    metrics_counter_raise(ob->quar_rejected, run->rejected);
    metrics_counter_raise(ob->quar_late, run->expired);
    metrics_counter_add(ob->commits, 1);
    if (applied_lsn > 0)
        metrics_gauge_set(ob->last_lsn, (double) applied_lsn);
    if (ob->pending.rows > 0)
    {
        const double *bounds;
        size_t nb = stream_metrics_delay_buckets(&bounds);

        metrics_histogram_add(ob->delay, ob->pending.buckets, nb + 1, ob->pending.sum);
        metrics_counter_add(ob->near, ob->pending.near);
        metrics_counter_add(ob->late, ob->pending.late);
    }
    stream_observer_rollback(ob);
}

void
stream_observer_rollback(StreamObserver *ob)
{
    if (ob)
        memset(&ob->pending, 0, sizeof ob->pending);
}

void
stream_observer_delay(StreamObserver *ob, int64_t delay_us, int delay_class)
{
    const double *bounds;
    size_t lo = 0, hi;
    double v;

    if (ob == NULL)
        return;
    v = (double) (delay_us < 0 ? 0 : delay_us) / 1e6;
    hi = stream_metrics_delay_buckets(&bounds); /* the first bound >= v, or +Inf */
    while (lo < hi)
    {
        size_t mid = lo + (hi - lo) / 2;

        if (v <= bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    ob->pending.buckets[lo]++;
    ob->pending.sum += v;
    ob->pending.rows++;
    if (delay_class == DELAY_NEAR_CUTOFF)
        ob->pending.near++;
    else if (delay_class == DELAY_EXPIRED)
        ob->pending.late++;
}

void
stream_observer_copy(StreamObserver *ob, bool running, uint64_t rows)
{
    if (ob == NULL)
        return;
    metrics_counter_raise(ob->copy_rows, rows);
    metrics_gauge_set(ob->copy_running, running ? 1 : 0);
}

void
stream_observer_reconnect(StreamObserver *ob, bool target_side)
{
    if (ob)
        metrics_counter_add(target_side ? ob->reconnects_target : ob->sh->reconnects_source, 1);
}

void
stream_observer_progress(StreamObserver *ob, uint64_t transactions, uint64_t bytes,
                         uint64_t lag_bytes, double lag_s)
{
    if (ob == NULL)
        return;
    metrics_counter_raise(ob->txns, transactions);
    metrics_counter_raise(ob->sh->bytes, bytes);
    metrics_gauge_set(ob->lag_bytes, (double) lag_bytes);
    metrics_gauge_set(ob->lag_s, lag_s);
}

bool
stream_slot_wal(PgConn *src, const char *slot, SlotWal *out, Err *err)
{
    PGresult *res;
    const char *params[1] = {slot};

    memset(out, 0, sizeof *out);
    out->keep_size_mb = -1;
    if (!pg_query(src,
                  "SELECT s.slot_name IS NOT NULL, coalesce(s.active, false), "
                  "coalesce(s.active_pid, 0), "
                  "coalesce(pg_current_wal_lsn() - s.restart_lsn, 0)::int8, "
                  "coalesce(s.wal_status, ''), s.safe_wal_size IS NOT NULL, "
                  "coalesce(s.safe_wal_size, 0), "
                  "(SELECT setting::int8 FROM pg_settings WHERE name = 'max_slot_wal_keep_size'), "
                  "coalesce(s.restart_lsn, '0/0')::text, "
                  "coalesce(s.confirmed_flush_lsn, '0/0')::text, pg_current_wal_lsn()::text, "
                  "coalesce(s.plugin, '') FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1",
                  1, params, &res, err))
    {
        err_prefix(err, "could not read replication slot \"%s\" on the source", slot);
        return false;
    }
    out->exists = PQgetvalue(res, 0, 0)[0] == 't';
    out->active = PQgetvalue(res, 0, 1)[0] == 't';
    out->active_pid = atoi(PQgetvalue(res, 0, 2));
    out->retained = strtoull(PQgetvalue(res, 0, 3), NULL, 10);
    (void) snprintf(out->wal_status, sizeof out->wal_status, "%s", PQgetvalue(res, 0, 4));
    out->safe_known = PQgetvalue(res, 0, 5)[0] == 't';
    out->safe_wal_size = strtoll(PQgetvalue(res, 0, 6), NULL, 10);
    out->keep_size_mb = strtoll(PQgetvalue(res, 0, 7), NULL, 10);
    (void) pgo_lsn_parse(PQgetvalue(res, 0, 8), &out->restart_lsn);
    (void) pgo_lsn_parse(PQgetvalue(res, 0, 9), &out->confirmed_lsn);
    (void) pgo_lsn_parse(PQgetvalue(res, 0, 10), &out->current_lsn);
    (void) snprintf(out->plugin, sizeof out->plugin, "%s", PQgetvalue(res, 0, 11));
    PQclear(res);
    return true;
}

static void
human(uint64_t bytes, char *out, size_t size)
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    double v = (double) bytes;
    int u = 0;

    while (v >= 1024 && u < 4)
    {
        v /= 1024;
        u++;
    }
    (void) snprintf(out, size, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* true the first time this process asks for slot: one warning per slot, however
 * many streams (migrate runs several, some on threads) read it. */
static bool
first_for_slot(const char *slot)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char seen[32][64];
    static size_t n;
    bool first = true;

    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < n && first; i++)
        first = strcmp(seen[i], slot) != 0;
    if (first && n < sizeof seen / sizeof seen[0])
        (void) snprintf(seen[n++], sizeof seen[0], "%s", slot);
    pthread_mutex_unlock(&mu);
    return first;
}

void
stream_observer_slot(StreamObserver *ob, const char *slot, const SlotWal *w, uint64_t warn_bytes)
{
    char a[32], b[32];

    if (ob)
    {
        Err err = {0};

        metrics_gauge_set(ob->sh->retained, w->exists ? (double) w->retained : 0);
        metrics_gauge_set(ob->sh->safe, !w->exists ? 0 : w->safe_known ? (double) w->safe_wal_size
                                                                   : INFINITY);
        if (!stream_metrics_set_wal_status(&ob->sh->sm, w->exists && w->wal_status[0] ? w->wal_status
                                                                                 : NULL,
                                           &err))
            log_warn("slot metrics: %s", err.msg);
    }
    if (!w->exists)
        return;
    if (w->keep_size_mb < 0 && first_for_slot(slot))
        log_warn("max_slot_wal_keep_size is unlimited (-1) on the source: while this stream is "
                 "stopped, slot \"%s\" keeps every WAL segment and can fill the source's disk; "
                 "set a limit there (ALTER SYSTEM SET max_slot_wal_keep_size = '50GB'; SELECT "
                 "pg_reload_conf();) and drop the slot when the stream is no longer wanted "
                 "(v7fill stream TABLE --drop --slot %s)",
                 slot, slot);
    human(w->retained, a, sizeof a);
    if (warn_bytes > 0 && w->retained > warn_bytes)
    {
        human(warn_bytes, b, sizeof b);
        log_warn("slot \"%s\" retains %s of WAL on the source (above --warn-retained %s)", slot,
                 a, b);
    }
    if (w->wal_status[0] && strcmp(w->wal_status, "reserved") != 0)
    {
        human(w->safe_known && w->safe_wal_size > 0 ? (uint64_t) w->safe_wal_size : 0, b,
              sizeof b);
        log_warn("slot \"%s\": wal_status is %s (retained %s, %s more before it is lost)", slot,
                 w->wal_status, a, w->safe_known ? b : "no limit");
    }
}

void
stream_observer_clock(StreamObserver *ob, int64_t source_to_target_us)
{
    if (ob)
        metrics_gauge_set(ob->sh->clock, (double) source_to_target_us / 1e6);
}

int64_t
stream_clock_offset_at(int64_t server_us, int64_t before_us, int64_t after_us)
{
    /* the middle without overflow: before + (after - before) / 2 */
    return server_us - (before_us + (after_us - before_us) / 2);
}

double
stream_lag_seconds(int64_t host_now_us, int64_t source_offset_us, int64_t target_offset_us,
                   int64_t commit_us)
{
    int64_t source_to_target = source_offset_us - target_offset_us;
    int64_t target_now = host_now_us + target_offset_us;
    int64_t commit_on_target = commit_us - source_to_target;
    double lag_s;

    if (commit_us <= 0)
        return 0;
    lag_s = (double) (target_now - commit_on_target) / 1e6;
    return lag_s > 0 ? lag_s : 0;
}

static int64_t
realtime_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000 + (int64_t) ts.tv_nsec / 1000;
}

bool
stream_clock_offset(PgConn *c, int64_t *offset_us, Err *err)
{
    PGresult *res;
    int64_t before, after;

    before = realtime_us();
    if (!pg_query(c, "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8", 0, NULL,
                  &res, err))
        return false;
    after = realtime_us();
    *offset_us = stream_clock_offset_at(strtoll(PQgetvalue(res, 0, 0), NULL, 10), before, after);
    PQclear(res);
    return true;
}
