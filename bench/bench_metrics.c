/*
 * bench_metrics: what metrics cost the thread that counts, and what a scrape
 * costs, with the stream's metrics for 4 tables (4 ops each, a delay
 * histogram each).
 *
 *   updates        ns of the counting thread's CPU per update (a counter add
 *                  and a histogram observe), without a scrape (the baseline)
 *                  and while another thread renders the registry in a loop;
 *   series lookup  p50 / p99 / p99.9 of metrics_series calls (the one update
 *                  path that takes the registry mutex), without and with the
 *                  scraping thread: how long a scrape holds up the owner
 *                  (wall time: on a loaded machine it includes preemption);
 *   render         µs per metrics_render and the size of the text.
 *
 * Each figure is the best of TRIALS runs.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "v7fill/metrics.h"
#include "v7fill/stream_metrics.h"

#define TRIALS  3
#define UPDATES 2000000
#define LOOKUPS 200000
#define TABLES  4

static double
clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static double
now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

typedef struct Bench
{
    Metrics *m;
    StreamMetrics sm;
    MetricSeries *rows[TABLES][4];
    MetricSeries *delay[TABLES];
    atomic_bool stop;
    uint64_t scrapes;
} Bench;

static const char *const tables[TABLES] = {"orders", "events", "payments", "sessions"};
static const char *const ops[4] = {"insert", "update", "delete", "truncate"};

static void
setup(Bench *b)
{
    Err err = {0};
    b->m = metrics_new();
    if (!stream_metrics_define(b->m, &b->sm, &err))
        exit((fprintf(stderr, "%s\n", err.msg), 1));
    for (int t = 0; t < TABLES; t++)
    {
        for (int o = 0; o < 4; o++)
            if (!stream_metrics_series(&b->sm, SM_ROWS_APPLIED, (const char *[]) {tables[t], ops[o]}, 2,
                                       &b->rows[t][o], &err))
                exit((fprintf(stderr, "%s\n", err.msg), 1));
        if (!stream_metrics_series(&b->sm, SM_INSERT_DELAY, &tables[t], 1, &b->delay[t], &err))
            exit((fprintf(stderr, "%s\n", err.msg), 1));
    }
}

static void *
scraper(void *arg)
{
    Bench *b = arg;
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed))
    {
        free(metrics_render(b->m, NULL));
        b->scrapes++;
    }
    return NULL;
}

/* run_updates: ns per update. */
static double
run_updates(Bench *b)
{
    double t0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (uint32_t i = 0; i < UPDATES; i++)
    {
        metrics_counter_add(b->rows[i % TABLES][0], 1);
        metrics_histogram_observe(b->delay[i % TABLES], (double) (i % 1000) * 0.01);
    }
    return (clock_s(CLOCK_THREAD_CPUTIME_ID) - t0) * 1e9 / UPDATES;
}

/* run_lookups: p50, p99, p99.9 of metrics_series calls, in µs. */
static void
run_lookups(Bench *b, double pct[3])
{
    static double d[LOOKUPS];
    Err err = {0};
    for (uint32_t i = 0; i < LOOKUPS; i++)
    {
        MetricSeries *s;
        double t0 = now_s();
        if (!stream_metrics_series(&b->sm, SM_ROWS_APPLIED, (const char *[]) {tables[i % TABLES], ops[i % 4]}, 2,
                                   &s, &err))
            exit(1);
        d[i] = (now_s() - t0) * 1e6;
    }
    qsort(d, LOOKUPS, sizeof d[0], cmp_double);
    pct[0] = d[LOOKUPS / 2];
    pct[1] = d[LOOKUPS * 99 / 100];
    pct[2] = d[LOOKUPS * 999 / 1000];
}

static void
measure(Bench *b, bool with_scraper, double *upd_ns, double lookup_us[3])
{
    *upd_ns = 1e30;
    for (int k = 0; k < 3; k++)
        lookup_us[k] = 1e30;
    for (int trial = 0; trial < TRIALS; trial++)
    {
        pthread_t th;
        atomic_store(&b->stop, false);
        if (with_scraper)
            pthread_create(&th, NULL, scraper, b);
        double u = run_updates(b);
        double l[3];
        run_lookups(b, l);
        atomic_store(&b->stop, true);
        if (with_scraper)
            pthread_join(th, NULL);
        if (u < *upd_ns)
            *upd_ns = u;
        for (int k = 0; k < 3; k++)
            if (l[k] < lookup_us[k])
                lookup_us[k] = l[k];
    }
}

int
main(void)
{
    Bench b = {0};
    setup(&b);

    double base_upd, base_lookup[3], scr_upd, scr_lookup[3];
    measure(&b, false, &base_upd, base_lookup);
    measure(&b, true, &scr_upd, scr_lookup);

    double best_render = 1e30;
    size_t len = 0;
    for (int i = 0; i < 200; i++)
    {
        double t0 = now_s();
        char *text = metrics_render(b.m, &len);
        double d = now_s() - t0;
        free(text);
        if (d < best_render)
            best_render = d;
    }

    printf("bench_metrics (stream metrics, %d tables)\n", TABLES);
    printf("  update (counter add + histogram observe), CPU: %.1f ns; while scraped in a loop: %.1f ns (%" PRIu64
           " scrapes)\n",
           base_upd, scr_upd, b.scrapes);
    printf("  series lookup (takes the registry mutex) p50/p99/p99.9: %.2f/%.2f/%.2f us; while scraped: "
           "%.2f/%.2f/%.2f us\n",
           base_lookup[0], base_lookup[1], base_lookup[2], scr_lookup[0], scr_lookup[1], scr_lookup[2]);
    printf("  render: %.1f us for %zu bytes\n", best_render * 1e6, len);
    metrics_free(b.m);
    return 0;
}
