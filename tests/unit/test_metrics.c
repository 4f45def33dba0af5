/*
 * Unit tests for metrics.c and stream_metrics.c: the exact text exposition
 * (HELP/TYPE, escaping of help and label values, number formats, histogram
 * buckets, _sum and _count), the naming rules, and the stream's definitions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>
#include <pthread.h>

#include "v7fill/metrics.h"
#include "v7fill/stream_metrics.h"
#include "v7fill/tracker.h"

static MetricFamily *
define_ok(Metrics *m, MetricDef d)
{
    MetricFamily *f = NULL;
    Err err = {0};
    if (!metrics_define(m, &d, &f, &err))
        fail_msg("define %s: %s", d.name, err.msg);
    return f;
}

static MetricSeries *
series_ok(MetricFamily *f, const char *const *values, size_t n)
{
    MetricSeries *s = NULL;
    Err err = {0};
    if (!metrics_series(f, values, n, &s, &err))
        fail_msg("series: %s", err.msg);
    return s;
}

static void
assert_rendered(Metrics *m, const char *want)
{
    size_t len;
    char *got = metrics_render(m, &len);
    assert_int_equal(len, strlen(got));
    assert_string_equal(got, want);
    free(got);
}

static void
test_counter_and_gauge_text(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    MetricFamily *rows = define_ok(m, (MetricDef) {METRIC_COUNTER, "app_rows_total", "Rows done.",
                                                   METRIC_UNIT_NONE, 2, {"table", "op"}});
    MetricFamily *lag = define_ok(m, (MetricDef) {METRIC_GAUGE, "app_lag_seconds", "Lag.", METRIC_UNIT_SECONDS});
    MetricSeries *ins = series_ok(rows, (const char *[]) {"t1", "insert"}, 2);
    MetricSeries *del = series_ok(rows, (const char *[]) {"t1", "delete"}, 2);
    metrics_counter_add(ins, 5);
    metrics_counter_add(ins, 2);
    metrics_counter_add(del, 1);
    /* the same label values give the same series */
    assert_ptr_equal(series_ok(rows, (const char *[]) {"t1", "insert"}, 2), ins);
    metrics_gauge_set(metrics_only(lag), 1.5);
    metrics_gauge_add(metrics_only(lag), 0.25);
    assert_rendered(m, "# HELP app_rows_total Rows done.\n"
                       "# TYPE app_rows_total counter\n"
                       "app_rows_total{table=\"t1\",op=\"insert\"} 7\n"
                       "app_rows_total{table=\"t1\",op=\"delete\"} 1\n"
                       "# HELP app_lag_seconds Lag.\n"
                       "# TYPE app_lag_seconds gauge\n"
                       "app_lag_seconds 1.75\n");
    assert_int_equal(metrics_counter_value(ins), 7);
    metrics_free(m);
}

static void
test_escaping(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    MetricFamily *f = define_ok(m, (MetricDef) {METRIC_COUNTER, "esc_total", "A \\ back\nslash \"quoted\".",
                                                METRIC_UNIT_NONE, 1, {"table"}});
    metrics_counter_add(series_ok(f, (const char *[]) {"a\\b\"c\nd"}, 1), 3);
    series_ok(f, (const char *[]) {""}, 1);
    assert_rendered(m, "# HELP esc_total A \\\\ back\\nslash \"quoted\".\n"
                       "# TYPE esc_total counter\n"
                       "esc_total{table=\"a\\\\b\\\"c\\nd\"} 3\n"
                       "esc_total{table=\"\"} 0\n");
    metrics_free(m);
}

static void
test_invalid_utf8(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    MetricFamily *f = define_ok(m, (MetricDef) {METRIC_COUNTER, "u_total", "Bad \xff byte.", METRIC_UNIT_NONE,
                                                1, {"table"}});
    const char *vals[] = {
        "\xc3\xbc\xf0\x9f\x98\x80", /* ü and an emoji: kept */
        "a\xff",                     /* a byte that starts nothing */
        "b\xc3",                     /* a cut sequence */
        "c\xc0\xaf",                 /* overlong */
        "d\xed\xa0\x80",             /* a surrogate */
        "e\xf4\x90\x80\x80",         /* above U+10FFFF */
    };
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        metrics_counter_add(series_ok(f, &vals[i], 1), i + 1);
    /* shown alike: the same series */
    MetricSeries *a = series_ok(f, (const char *[]) {"a\xfe"}, 1);
    assert_int_equal(metrics_counter_value(a), 2);
    assert_rendered(m, "# HELP u_total Bad \xef\xbf\xbd byte.\n"
                       "# TYPE u_total counter\n"
                       "u_total{table=\"\xc3\xbc\xf0\x9f\x98\x80\"} 1\n"
                       "u_total{table=\"a\xef\xbf\xbd\"} 2\n"
                       "u_total{table=\"b\xef\xbf\xbd\"} 3\n"
                       "u_total{table=\"c\xef\xbf\xbd\xef\xbf\xbd\"} 4\n"
                       "u_total{table=\"d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"} 5\n"
                       "u_total{table=\"e\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"} 6\n");
    metrics_free(m);
}

static void
test_number_formats(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    MetricFamily *f = define_ok(m, (MetricDef) {METRIC_GAUGE, "num", "Numbers.", METRIC_UNIT_NONE, 1, {"k"}});
    const struct
    {
        const char *k;
        double v;
    } cases[] = {
        {"zero", 0.0},  {"negzero", -0.0}, {"int", 123456789.0}, {"frac", 0.1},       {"neg", -2.5},
        {"pinf", INFINITY}, {"ninf", -INFINITY}, {"nan", NAN},   {"big", 18446744073709551616.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        metrics_gauge_set(series_ok(f, &cases[i].k, 1), cases[i].v);
    assert_rendered(m, "# HELP num Numbers.\n"
                       "# TYPE num gauge\n"
                       "num{k=\"zero\"} 0\n"
                       "num{k=\"negzero\"} 0\n"
                       "num{k=\"int\"} 123456789\n"
                       "num{k=\"frac\"} 0.1\n"
                       "num{k=\"neg\"} -2.5\n"
                       "num{k=\"pinf\"} +Inf\n"
                       "num{k=\"ninf\"} -Inf\n"
                       "num{k=\"nan\"} NaN\n"
                       "num{k=\"big\"} 1.8446744073709552e+19\n");
    metrics_free(m);
}

static void
test_histogram_text(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    const double bounds[] = {0.001, 0.5, 60};
    MetricFamily *f = define_ok(m, (MetricDef) {METRIC_HISTOGRAM, "delay_seconds", "Delay.", METRIC_UNIT_SECONDS,
                                                1, {"table"}, 3, bounds});
    MetricSeries *s = series_ok(f, (const char *[]) {"t"}, 1);
    metrics_histogram_observe(s, 0.001); /* on the bound: in it */
    metrics_histogram_observe(s, 0.25);
    metrics_histogram_observe(s, 0.5);
    metrics_histogram_observe(s, 3600);
    metrics_histogram_observe(s, NAN); /* ignored */
    assert_rendered(m, "# HELP delay_seconds Delay.\n"
                       "# TYPE delay_seconds histogram\n"
                       "delay_seconds_bucket{table=\"t\",le=\"0.001\"} 1\n"
                       "delay_seconds_bucket{table=\"t\",le=\"0.5\"} 3\n"
                       "delay_seconds_bucket{table=\"t\",le=\"60\"} 3\n"
                       "delay_seconds_bucket{table=\"t\",le=\"+Inf\"} 4\n"
                       "delay_seconds_sum{table=\"t\"} 3600.751\n"
                       "delay_seconds_count{table=\"t\"} 4\n");
    uint64_t counts[4];
    double sum;
    assert_int_equal(metrics_histogram_count(s, &sum, counts), 4);
    assert_int_equal(counts[1], 3);
    metrics_free(m);

    /* without labels: le is the only label */
    m = metrics_new();
    f = define_ok(m, (MetricDef) {METRIC_HISTOGRAM, "size_bytes", "Size.", METRIC_UNIT_BYTES, 0, {NULL}, 1,
                                  (const double[]) {1024}});
    metrics_histogram_observe(metrics_only(f), 10);
    assert_rendered(m, "# HELP size_bytes Size.\n"
                       "# TYPE size_bytes histogram\n"
                       "size_bytes_bucket{le=\"1024\"} 1\n"
                       "size_bytes_bucket{le=\"+Inf\"} 1\n"
                       "size_bytes_sum 10\n"
                       "size_bytes_count 1\n");
    metrics_free(m);
}

static void
test_empty_family_and_raise(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    MetricFamily *f = define_ok(m, (MetricDef) {METRIC_COUNTER, "r_total", "R.", METRIC_UNIT_NONE, 1, {"side"}});
    assert_null(metrics_only(f));
    assert_rendered(m, "# HELP r_total R.\n# TYPE r_total counter\n");
    MetricSeries *s = series_ok(f, (const char *[]) {"source"}, 1);
    metrics_counter_raise(s, 10);
    metrics_counter_raise(s, 4); /* never down */
    assert_int_equal(metrics_counter_value(s), 10);
    metrics_gauge_set(s, 99.0); /* another type's update: no-op */
    assert_int_equal(metrics_counter_value(s), 10);
    metrics_counter_add(NULL, 1); /* NULL-safe */
    metrics_gauge_set(NULL, 1);
    metrics_histogram_observe(NULL, 1);
    assert_ptr_equal(metrics_family(m, "r_total"), f);
    assert_null(metrics_family(m, "nope_total"));
    metrics_free(m);
    metrics_free(NULL);
}

static void
expect_bad_def(MetricDef d, const char *msg_part)
{
    Metrics *m = metrics_new();
    MetricFamily *f = NULL;
    Err err = {0};
    assert_false(metrics_define(m, &d, &f, &err));
    assert_int_equal(err.code, EC_INTERNAL);
    if (strstr(err.msg, msg_part) == NULL)
        fail_msg("\"%s\" lacks \"%s\"", err.msg, msg_part);
    metrics_free(m);
}

static void
test_naming_rules(void **state)
{
    (void) state;
    expect_bad_def((MetricDef) {METRIC_COUNTER, "rows", "x."}, "_total");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "rows_total", "x."}, "not a counter");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "9rows", "x."}, "not valid");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "ro-ws", "x."}, "not valid");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "rows", ""}, "help");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "lag_seconds", "x."}, "unit");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "lag", "x.", METRIC_UNIT_SECONDS}, "unit");
    expect_bad_def((MetricDef) {METRIC_COUNTER, "in_bytes_total", "x."}, "unit");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "g", "x.", METRIC_UNIT_NONE, 1, {"le"}}, "label name");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "g", "x.", METRIC_UNIT_NONE, 1, {"__x"}}, "label name");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "g", "x.", METRIC_UNIT_NONE, 1, {"a:b"}}, "label name");
    expect_bad_def((MetricDef) {METRIC_GAUGE, "g", "x.", METRIC_UNIT_NONE, 2, {"a", "a"}}, "twice");
    expect_bad_def((MetricDef) {METRIC_HISTOGRAM, "h", "x.", METRIC_UNIT_NONE, 0, {NULL}, 2,
                                (const double[]) {2, 1}},
                   "increasing");
    expect_bad_def((MetricDef) {METRIC_HISTOGRAM, "h", "x.", METRIC_UNIT_NONE, 0, {NULL}, 1,
                                (const double[]) {INFINITY}},
                   "finite");
    expect_bad_def((MetricDef) {METRIC_HISTOGRAM, "h", "x."}, "buckets");
    expect_bad_def((MetricDef) {METRIC_HISTOGRAM, "h_count", "x.", METRIC_UNIT_NONE, 0, {NULL}, 1,
                                (const double[]) {1}},
                   "suffix");

    Metrics *m = metrics_new();
    MetricFamily *f = define_ok(m, (MetricDef) {METRIC_GAUGE, "g", "x.", METRIC_UNIT_NONE, 1, {"a"}});
    MetricFamily *again = NULL;
    Err err = {0};
    assert_false(metrics_define(m, &(MetricDef) {METRIC_GAUGE, "g", "y."}, &again, &err));
    assert_non_null(strstr(err.msg, "twice"));
    MetricSeries *s = NULL;
    assert_false(metrics_series(f, (const char *[]) {"x", "y"}, 2, &s, &err));
    assert_int_equal(err.code, EC_INTERNAL);
    metrics_free(m);
}

static void
test_series_limit(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    MetricFamily *f = define_ok(m, (MetricDef) {METRIC_GAUGE, "g", "x.", METRIC_UNIT_NONE, 1, {"k"}});
    char v[16];
    const char *vp = v;
    for (int i = 0; i < METRIC_MAX_SERIES; i++)
    {
        snprintf(v, sizeof v, "%d", i);
        series_ok(f, &vp, 1);
    }
    MetricSeries *s = NULL;
    Err err = {0};
    snprintf(v, sizeof v, "one more");
    assert_false(metrics_series(f, &vp, 1, &s, &err));
    assert_int_equal(err.code, EC_LIMIT);
    snprintf(v, sizeof v, "7"); /* an existing one still works */
    assert_true(metrics_series(f, &vp, 1, &s, &err));
    metrics_free(m);
}

/* Updates from two threads while a third renders: every increment counts
 * (run under TSan for the data-race side). */
typedef struct Hammer
{
    MetricSeries *c;
    MetricSeries *h;
} Hammer;

static void *
hammer(void *arg)
{
    Hammer *hm = arg;
    for (int i = 0; i < 100000; i++)
    {
        metrics_counter_add(hm->c, 1);
        metrics_histogram_observe(hm->h, (double) (i % 3));
    }
    return NULL;
}

static void
test_concurrent_updates(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    MetricFamily *c = define_ok(m, (MetricDef) {METRIC_COUNTER, "c_total", "C."});
    MetricFamily *h = define_ok(m, (MetricDef) {METRIC_HISTOGRAM, "h", "H.", METRIC_UNIT_NONE, 0, {NULL}, 2,
                                                (const double[]) {0, 1}});
    Hammer hm = {metrics_only(c), metrics_only(h)};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, hammer, &hm);
    pthread_create(&t2, NULL, hammer, &hm);
    for (int i = 0; i < 50; i++)
        free(metrics_render(m, NULL));
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(metrics_counter_value(hm.c), 200000);
    double sum;
    assert_int_equal(metrics_histogram_count(hm.h, &sum, NULL), 200000);
    assert_true(sum == 2.0 * (33333.0 * 1 + 33333.0 * 2));
    metrics_free(m);
}

static void
test_stream_metrics(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    StreamMetrics sm;
    Err err = {0};
    assert_true(stream_metrics_define(m, &sm, &err));
    for (int i = 0; i < SM_COUNT; i++)
    {
        const MetricDef *d = stream_metric_def((StreamMetric) i);
        assert_non_null(d);
        assert_int_equal(strncmp(d->name, "v7fill_stream_", 14), 0);
        assert_ptr_equal(metrics_family(m, d->name), sm.fam[i]);
    }
    assert_null(stream_metric_def(SM_COUNT));

    /* the delay buckets are the tracker's display edges, in seconds */
    const double *b;
    size_t nb = stream_metrics_delay_buckets(&b);
    Tracker *t = tracker_new(0, 0);
    const TrackerBucket *tb;
    size_t ntb = tracker_display(t, &tb);
    assert_int_equal(nb, ntb - 1);
    for (size_t i = 0; i < nb; i++)
        assert_true(b[i] * 1e6 == (double) tb[i].upper_us);
    tracker_free(t);
    assert_true(b[0] == 0.001);
    assert_true(b[nb - 1] == 365.0 * 86400);

    /* wal_status: exactly one series at 1 */
    assert_true(stream_metrics_set_wal_status(&sm, "extended", &err));
    assert_true(stream_metrics_set_wal_status(&sm, "lost", &err));
    char *text = metrics_render(m, NULL);
    assert_non_null(strstr(text, "v7fill_stream_slot_wal_status{status=\"reserved\"} 0\n"
                                 "v7fill_stream_slot_wal_status{status=\"extended\"} 0\n"
                                 "v7fill_stream_slot_wal_status{status=\"unreserved\"} 0\n"
                                 "v7fill_stream_slot_wal_status{status=\"lost\"} 1\n"));
    free(text);
    assert_true(stream_metrics_set_wal_status(&sm, "new_status", &err));
    assert_true(stream_metrics_set_wal_status(&sm, NULL, &err));
    text = metrics_render(m, NULL);
    assert_null(strstr(text, "wal_status{status=\"lost\"} 1"));
    assert_non_null(strstr(text, "wal_status{status=\"new_status\"} 0\n"));
    free(text);

    MetricSeries *s;
    assert_true(stream_metrics_series(&sm, SM_ROWS_APPLIED, (const char *[]) {"ev", "insert"}, 2, &s, &err));
    metrics_counter_add(s, 3);
    text = metrics_render(m, NULL);
    assert_non_null(strstr(text, "\nv7fill_stream_rows_applied_total{table=\"ev\",op=\"insert\"} 3\n"));
    free(text);
    assert_false(stream_metrics_define(m, &sm, &err)); /* defined twice */
    metrics_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_and_gauge_text),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_number_formats),
        cmocka_unit_test(test_histogram_text),
        cmocka_unit_test(test_empty_family_and_raise),
        cmocka_unit_test(test_naming_rules),
        cmocka_unit_test(test_series_limit),
        cmocka_unit_test(test_concurrent_updates),
        cmocka_unit_test(test_stream_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
