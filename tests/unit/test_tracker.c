/*
 * Unit tests for tracker.c: classification at the cutoff boundary, time
 * left, percentiles against a sort of the same rows, the largest delays,
 * windows, and the JSON round trip / merge.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>

#include "v7fill/civil.h"
#include "v7fill/tracker.h"

/* 2026-07-01T00:00:00Z and 2026-08-01T00:00:00Z: the July window. */
#define JUL INT64_C(1782864000000000)
#define AUG INT64_C(1785542400000000)
#define RET (30 * US_PER_DAY)

/* splitmix64: fixed seeds, so a failure reproduces. */
static uint64_t
rnd_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double
rnd_unit(uint64_t *s)
{
    return (double) (rnd_next(s) >> 11) / 9007199254740992.0; /* [0, 1) */
}

static void
test_classify_boundary(void **state)
{
    Tracker *t = tracker_new(RET, 0);
    int64_t left = 0;
    int64_t retire = AUG + RET; /* the July window retires at 2026-08-31T00:00Z */

    (void) state;
    assert_int_equal(tracker_retention(t), RET);
    assert_int_equal(tracker_near_cutoff(t), 3 * US_PER_DAY); /* default: 10% */

    /* Exactly at the cutoff: upper == now − retention → expired, nothing left. */
    assert_int_equal(tracker_classify(t, AUG, retire, &left), DELAY_EXPIRED);
    assert_int_equal(left, 0);
    /* One ms before: still there, one ms left, and near the cutoff. */
    assert_int_equal(tracker_classify(t, AUG, retire - US_PER_MS, &left), DELAY_NEAR_CUTOFF);
    assert_int_equal(left, US_PER_MS);
    /* One ms after: expired, one ms past. */
    assert_int_equal(tracker_classify(t, AUG, retire + US_PER_MS, &left), DELAY_EXPIRED);
    assert_int_equal(left, -US_PER_MS);

    /* The near-cutoff edge: exactly near_cutoff left is near, 1 ms more is on time. */
    assert_int_equal(tracker_classify(t, AUG, retire - 3 * US_PER_DAY, &left), DELAY_NEAR_CUTOFF);
    assert_int_equal(left, 3 * US_PER_DAY);
    assert_int_equal(tracker_classify(t, AUG, retire - 3 * US_PER_DAY - US_PER_MS, &left),
                     DELAY_ON_TIME);
    assert_int_equal(left, 3 * US_PER_DAY + US_PER_MS);
    assert_int_equal(tracker_classify(t, AUG, JUL, NULL), DELAY_ON_TIME);

    /* A MAXVALUE bound saturates instead of wrapping. */
    assert_int_equal(tracker_classify(t, INT64_MAX, retire, &left), DELAY_ON_TIME);
    assert_true(left > 0);
    tracker_free(t);

    /* An explicit near cutoff wins over the default. */
    t = tracker_new(RET, 7 * US_PER_DAY);
    assert_int_equal(tracker_near_cutoff(t), 7 * US_PER_DAY);
    assert_int_equal(tracker_classify(t, AUG, retire - 7 * US_PER_DAY, NULL), DELAY_NEAR_CUTOFF);
    assert_int_equal(tracker_classify(t, AUG, retire - 7 * US_PER_DAY - 1000, NULL), DELAY_ON_TIME);
    tracker_free(t);

    /* No retention: always on time, unlimited time left. */
    t = tracker_new(0, 0);
    assert_int_equal(tracker_classify(t, 0, INT64_C(4000000000000000), &left), DELAY_ON_TIME);
    assert_int_equal(left, INT64_MAX);
    tracker_free(t);
}

static void
test_near_cutoff_time_left(void **state)
{
    Tracker *t = tracker_new(RET, 0);
    /* Inserted 2026-08-29T12:00Z: 1.5 days before the July window retires. */
    int64_t now = AUG + RET - 36 * US_PER_HOUR;
    int64_t left = 0;
    const TrackerWindow *w;
    DelayClass c;

    (void) state;
    c = tracker_classify(t, AUG, now, &left);
    assert_int_equal(c, DELAY_NEAR_CUTOFF);
    assert_int_equal(left, 36 * US_PER_HOUR);
    tracker_add(t, JUL + US_PER_DAY, now, c, JUL, AUG, "orders:1", 8);
    /* A later row of the same window has less time left. */
    c = tracker_classify(t, AUG, now + US_PER_HOUR, &left);
    tracker_add(t, JUL + 2 * US_PER_DAY, now + US_PER_HOUR, c, JUL, AUG, "orders:2", 8);
    /* An on-time row of the next window. */
    c = tracker_classify(t, AUG + 31 * US_PER_DAY, now, NULL);
    assert_int_equal(c, DELAY_ON_TIME);
    tracker_add(t, AUG + US_PER_DAY, now, c, AUG, AUG + 31 * US_PER_DAY, "orders:3", 8);

    assert_int_equal(tracker_count(t, DELAY_NEAR_CUTOFF), 2);
    assert_int_equal(tracker_count(t, DELAY_ON_TIME), 1);
    assert_int_equal(tracker_count(t, DELAY_EXPIRED), 0);
    assert_int_equal(tracker_windows(t, &w), 2);
    assert_int_equal(w[0].lower_us, JUL);
    assert_int_equal(w[0].rows[DELAY_NEAR_CUTOFF], 2);
    assert_int_equal(w[0].min_time_left_us, 35 * US_PER_HOUR);
    assert_int_equal(w[1].lower_us, AUG);
    assert_int_equal(w[1].rows[DELAY_ON_TIME], 1);
    assert_int_equal(w[1].min_time_left_us, 31 * US_PER_DAY + RET - (now - AUG));
    tracker_free(t);
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a;
    int64_t y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

typedef enum Dist
{
    DIST_UNIFORM_SMALL, /* 0..300 µs: the exact range and its edge */
    DIST_UNIFORM,       /* 0..10 min */
    DIST_EXPONENTIAL,   /* mean 2 h */
    DIST_LOGNORMAL,     /* median 1 h, heavy tail to months */
    DIST_BIMODAL,       /* seconds (live) and weeks (history) */
    DIST_YEARS,         /* 1..20 years */
    DIST_CONSTANT,
} Dist;

static int64_t
draw(Dist d, uint64_t *s)
{
    double u = rnd_unit(s);

    switch (d)
    {
        case DIST_UNIFORM_SMALL:
            return (int64_t) (u * 300);
        case DIST_UNIFORM:
            return (int64_t) (u * 600e6);
        case DIST_EXPONENTIAL:
            return (int64_t) (-log(1.0 - u) * 7200e6);
        case DIST_LOGNORMAL:
        {
            /* Box-Muller for a standard normal. */
            double v = rnd_unit(s);
            double z = sqrt(-2.0 * log(1.0 - u)) * cos(2 * M_PI * v);
            return (int64_t) (3600e6 * exp(2.5 * z));
        }
        case DIST_BIMODAL:
            return rnd_next(s) % 10 < 8 ? (int64_t) (u * 30e6)
                                        : (int64_t) (14 * 86400e6 + u * 28 * 86400e6);
        case DIST_YEARS:
            return (int64_t) (365 * 86400e6 * (1 + 19 * u));
        case DIST_CONSTANT:
            return 123456789;
    }
    return 0;
}

static void
check_percentiles(Dist d, size_t n, uint64_t seed)
{
    static const double ps[] = {0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 100};
    int64_t *v = malloc(n * sizeof *v);
    Tracker *t = tracker_new(0, 0);
    uint64_t s = seed;
    int64_t insert = INT64_C(1790000000000000);

    for (size_t i = 0; i < n; i++)
    {
        v[i] = draw(d, &s);
        tracker_add(t, insert - v[i], insert, DELAY_ON_TIME, JUL, AUG, "r", 1);
    }
    qsort(v, n, sizeof *v, cmp_i64);
    assert_int_equal(tracker_total(t), n);
    assert_int_equal(tracker_min(t), v[0]);
    assert_int_equal(tracker_max(t), v[n - 1]);
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++)
    {
        /* Nearest rank, as the tracker documents it. */
        size_t rank = (size_t) ceil(ps[k] / 100.0 * (double) n);
        int64_t want = v[(rank ? rank : 1) - 1];
        int64_t got = tracker_percentile(t, ps[k]);
        double tol = want < 256 ? 0 : 0.01 * (double) want;

        if (fabs((double) (got - want)) > tol)
            fail_msg("distribution %d, p%g: histogram %lld, sorted %lld (tolerance %.0f)", (int) d,
                     ps[k], (long long) got, (long long) want, tol);
    }
    free(v);
    tracker_free(t);
}

static void
test_percentiles_brute_force(void **state)
{
    (void) state;
    for (Dist d = DIST_UNIFORM_SMALL; d <= DIST_CONSTANT; d++)
    {
        check_percentiles(d, 100000, 42 + (uint64_t) d);
        check_percentiles(d, 7, 7 + (uint64_t) d); /* few rows: ranks are coarse */
    }
    {
        Tracker *t = tracker_new(0, 0);
        assert_int_equal(tracker_percentile(t, 50), 0);
        assert_int_equal(tracker_min(t), 0);
        assert_int_equal(tracker_max(t), 0);
        tracker_free(t);
    }
}

static void
test_largest_and_refs(void **state)
{
    Tracker *t = tracker_new(RET, 0);
    const TrackerLargest *l;
    char ref[64];
    char longref[400];
    size_t n;

    (void) state;
    for (int i = 0; i < 50; i++)
    {
        int len = snprintf(ref, sizeof ref, "orders:%d", i);
        /* Delays 0..49 hours, shuffled by a stride coprime to 50. */
        int h = (i * 17) % 50;
        tracker_add(t, JUL, JUL + h * US_PER_HOUR, DELAY_ON_TIME, JUL, AUG, ref, (size_t) len);
    }
    n = tracker_largest(t, &l);
    assert_int_equal(n, TRACKER_LARGEST);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(l[i].delay_us, (int64_t) (49 - i) * US_PER_HOUR);
    /* 49 h came from the i with i*17 % 50 == 49: i = 47. */
    assert_string_equal(l[0].ref, "orders:47");

    /* A long reference of 2-byte characters is cut at a character boundary. */
    for (size_t i = 0; i < 200; i++)
        memcpy(longref + 2 * i, "\xC3\xA9", 2); /* é */
    tracker_add(t, 0, 1000 * US_PER_DAY, DELAY_EXPIRED, 0, US_PER_DAY, longref, 400);
    n = tracker_largest(t, &l);
    assert_true(l[0].ref_truncated);
    assert_int_equal(strlen(l[0].ref), 200);
    assert_int_equal(l[0].cls, DELAY_EXPIRED);

    /* Invalid UTF-8 and NUL bytes are replaced, so JSON and jsonb accept it. */
    tracker_add(t, 0, 2000 * US_PER_DAY, DELAY_EXPIRED, 0, US_PER_DAY, "a\xFF\x00z", 4);
    n = tracker_largest(t, &l);
    assert_string_equal(l[0].ref, "a\xEF\xBF\xBD\xEF\xBF\xBDz");
    assert_false(l[0].ref_truncated);
    tracker_free(t);
}

/* A row among the largest delays is named (origin, id, reference as shown);
 * tracker_ranks says beforehand which rows will be, so callers format only
 * those; the names survive JSON and a merge; documents written before names
 * were load with none. */
static void
test_largest_named_rows(void **state)
{
    Tracker *t = tracker_new(RET, 0);
    Tracker *m = tracker_new(RET, 0);
    const TrackerLargest *l;
    Err err = {0};
    char *j;
    char *j2;
    char origin[32];
    char id[40];
    json_t *doc;
    json_t *first;
    size_t ranked = 0;
    TrackerRowName name = {.origin = origin, .id = id, .ref = "2025-01-01,\"a,b\"", .ref_len = 16,
                           .ref_values = true};

    (void) state;
    /* Delays 1..30 hours, rising: every row ranks when it comes. */
    for (int h = 1; h <= 30; h++)
    {
        assert_true(tracker_ranks(t, JUL, JUL + h * US_PER_HOUR));
        (void) snprintf(origin, sizeof origin, "orders.csv:%d", h + 1);
        (void) snprintf(id, sizeof id, "01a00000-0000-7000-8000-%012d", h);
        tracker_add_named(t, JUL, JUL + h * US_PER_HOUR, DELAY_ON_TIME, JUL, AUG, &name);
    }
    /* Now only a delay above the 10th largest (21 h) ranks; equal does not. */
    for (int h = 1; h <= 30; h++)
        ranked += tracker_ranks(t, JUL, JUL + h * US_PER_HOUR);
    assert_int_equal(ranked, 9);
    assert_false(tracker_ranks(t, JUL, JUL + 21 * US_PER_HOUR));
    assert_true(tracker_ranks(t, JUL, JUL + 21 * US_PER_HOUR + 1));
    /* A row added without a name among named ones. */
    tracker_add_named(t, JUL, JUL + 40 * US_PER_HOUR, DELAY_ON_TIME, JUL, AUG, NULL);
    assert_int_equal(tracker_largest(t, &l), TRACKER_LARGEST);
    assert_string_equal(l[0].origin, "");
    assert_string_equal(l[0].id, "");
    assert_string_equal(l[1].origin, "orders.csv:31");
    assert_string_equal(l[1].id, "01a00000-0000-7000-8000-000000000030");
    assert_string_equal(l[1].ref, "2025-01-01,\"a,b\"");
    assert_true(l[1].ref_values);
    assert_string_equal(l[9].origin, "orders.csv:23");

    /* Through JSON and a merge: the same names; none is null in JSON. */
    j = tracker_to_json(t);
    if (!tracker_merge_json(m, j, &err))
        fail_msg("merge: %s", err.msg);
    j2 = tracker_to_json(m);
    assert_string_equal(j, j2);
    doc = json_loads(j, 0, NULL);
    first = json_array_get(json_object_get(doc, "largest"), 0);
    assert_true(json_is_null(json_object_get(first, "origin")));
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(doc, "largest"), 1),
                                          "origin")),
        "orders.csv:31");
    /* A document from before names: no origin, id or ref_values at all. */
    json_object_del(first, "origin");
    json_object_del(first, "id");
    free(j);
    j = json_dumps(doc, JSON_COMPACT);
    tracker_free(m);
    m = tracker_new(RET, 0);
    if (!tracker_merge_json(m, j, &err))
        fail_msg("merge of an old document: %s", err.msg);
    assert_int_equal(tracker_largest(m, &l), TRACKER_LARGEST);
    assert_string_equal(l[0].origin, "");
    assert_string_equal(l[1].origin, "orders.csv:31");
    /* A name that is not a string is refused. */
    json_object_set_new(first, "origin", json_integer(3));
    free(j);
    j = json_dumps(doc, JSON_COMPACT);
    assert_false(tracker_merge_json(m, j, &err));
    json_decref(doc);
    free(j);
    free(j2);
    tracker_free(t);
    tracker_free(m);
}

/* Names for test_pending_named_at_batch_end: "f.csv:<tag+2>", and a count
 * of the calls. */
typedef struct Namer
{
    int calls;
    char origin[32];
} Namer;

static void
name_by_tag(void *ctx, uint64_t tag, TrackerRowName *out)
{
    Namer *n = ctx;

    n->calls++;
    (void) snprintf(n->origin, sizeof n->origin, "f.csv:%d", (int) tag + 2);
    out->origin = n->origin;
    out->id = "01a00000-0000-7000-8000-000000000000";
    out->ref = "r";
    out->ref_len = 1;
}

/* Rows in rising delay all rank and drop out again: named at the end of the
 * batch, only the 10 left are, each with its own tag. */
static void
test_pending_named_at_batch_end(void **state)
{
    Tracker *t = tracker_new(RET, 0);
    const TrackerLargest *l;
    Namer n = {0};

    (void) state;
    for (int i = 0; i < 1000; i++)
        tracker_add_pending(t, JUL, JUL + i * US_PER_SEC, DELAY_ON_TIME, JUL, AUG, (uint64_t) i);
    assert_int_equal(tracker_largest(t, &l), TRACKER_LARGEST);
    assert_true(l[0].pending);
    tracker_name_pending(t, name_by_tag, &n);
    assert_int_equal(n.calls, TRACKER_LARGEST);
    for (int k = 0; k < TRACKER_LARGEST; k++)
    {
        char want[32];

        (void) snprintf(want, sizeof want, "f.csv:%d", 999 - k + 2);
        assert_string_equal(l[k].origin, want);
        assert_false(l[k].pending);
    }
    /* The next batch names only its own rows that rank. */
    n.calls = 0;
    tracker_add_pending(t, JUL, JUL + 5000 * US_PER_SEC, DELAY_ON_TIME, JUL, AUG, 7);
    tracker_add_pending(t, JUL, JUL + 1 * US_PER_SEC, DELAY_ON_TIME, JUL, AUG, 8);
    tracker_name_pending(t, name_by_tag, &n);
    assert_int_equal(n.calls, 1);
    assert_string_equal(l[0].origin, "f.csv:9");
    assert_string_equal(l[1].origin, "f.csv:1001");
    tracker_free(t);
}

/* Fill a tracker with a mix of classes, windows and delays. */
static void
fill(Tracker *t, uint64_t seed, size_t n)
{
    uint64_t s = seed;
    char ref[32];

    for (size_t i = 0; i < n; i++)
    {
        int64_t delay = draw(DIST_LOGNORMAL, &s);
        int64_t id = JUL + (int64_t) (rnd_next(&s) % (uint64_t) (90 * US_PER_DAY));
        int64_t lower = JUL + (id - JUL) / (30 * US_PER_DAY) * 30 * US_PER_DAY;
        int64_t upper = lower + 30 * US_PER_DAY;
        int len = snprintf(ref, sizeof ref, "src:%zu", i);
        DelayClass c = tracker_classify(t, upper, id + delay, NULL);

        tracker_add(t, id, id + delay, c, lower, upper, ref, (size_t) len);
    }
}

static void
test_json_round_trip(void **state)
{
    Tracker *a = tracker_new(RET, 0);
    Tracker *b = tracker_new(RET, 0);
    Err err = {0};
    char *ja;
    char *jb;
    json_t *doc;
    json_error_t jerr;

    (void) state;
    fill(a, 1, 5000);
    tracker_add(a, JUL + US_PER_SEC, JUL, DELAY_ON_TIME, JUL, AUG, "ahead", 5); /* negative */
    ja = tracker_to_json(a);
    assert_non_null(ja);
    if (!tracker_merge_json(b, ja, &err))
        fail_msg("merge: %s", err.msg);
    jb = tracker_to_json(b);
    assert_string_equal(ja, jb);
    assert_int_equal(tracker_negative(b), 1);
    assert_int_equal(tracker_min(b), -US_PER_SEC);

    /* The document has what the report reads. */
    doc = json_loads(ja, 0, &jerr);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(doc, "rows")), 5001);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "delay_us"), "p99")),
                     tracker_percentile(a, 99));
    assert_int_equal(json_array_size(json_object_get(doc, "largest")), TRACKER_LARGEST);
    assert_int_equal(json_array_size(json_object_get(doc, "windows")), 4); /* 3 + July */
    json_decref(doc);
    free(ja);
    free(jb);
    tracker_free(a);
    tracker_free(b);
}

static void
test_json_merge_equals_one_run(void **state)
{
    Tracker *whole = tracker_new(RET, 0);
    Tracker *part1 = tracker_new(RET, 0);
    Tracker *part2 = tracker_new(RET, 0);
    Tracker *merged = tracker_new(RET, 0);
    Err err = {0};
    char *j1;
    char *j2;
    char *jw;
    char *jm;

    (void) state;
    /* The same rows, once in one tracker and once split over two runs. */
    fill(whole, 9, 3000);
    fill(whole, 10, 2000);
    fill(part1, 9, 3000);
    fill(part2, 10, 2000);
    j1 = tracker_to_json(part1);
    j2 = tracker_to_json(part2);
    if (!tracker_merge_json(merged, j1, &err) || !tracker_merge_json(merged, j2, &err))
        fail_msg("merge: %s", err.msg);
    jw = tracker_to_json(whole);
    jm = tracker_to_json(merged);
    assert_string_equal(jw, jm);
    for (double p = 1; p <= 100; p += 7)
        assert_int_equal(tracker_percentile(whole, p), tracker_percentile(merged, p));
    free(j1);
    free(j2);
    free(jw);
    free(jm);
    tracker_free(whole);
    tracker_free(part1);
    tracker_free(part2);
    tracker_free(merged);
}

static void
test_json_merge_jsonb_style(void **state)
{
    /* jsonb reorders keys and may print integers as 5.0 after arithmetic. */
    static const char doc[] =
        "{\"rows\": 2, \"counts\": {\"expired\": 0, \"on_time\": 1, \"near_cutoff\": 1},"
        " \"format\": \"v7fill-tracker/1\", \"display\": [{\"count\": 2.0, \"ge_us\": 3600000000}],"
        " \"largest\": [{\"ref\": \"x:1\", \"class\": \"near_cutoff\", \"id_us\": 1, "
        "\"delay_us\": 7200000000, \"inserted_us\": 7200000001}],"
        " \"windows\": [{\"lower_us\": 0, \"upper_us\": 86400000000, \"on_time\": 1, "
        "\"near_cutoff\": 1, \"expired\": 0, \"min_time_left_us\": 5}],"
        " \"delay_us\": {\"max\": 7200000000, \"min\": 3600000000},"
        " \"histogram\": {\"layout\": \"log2-sub128-us\", \"buckets\": [[3200, 1], [3300, 1]]}}";
    Tracker *t = tracker_new(RET, 0);
    Err err = {0};
    const TrackerWindow *w;
    const TrackerBucket *b;
    size_t nb;

    (void) state;
    if (!tracker_merge_json(t, doc, &err))
        fail_msg("merge: %s", err.msg);
    assert_int_equal(tracker_total(t), 2);
    assert_int_equal(tracker_max(t), 7200000000);
    assert_int_equal(tracker_windows(t, &w), 1);
    assert_int_equal(w[0].min_time_left_us, 5);
    nb = tracker_display(t, &b);
    for (size_t i = 0; i < nb; i++)
        if (strcmp(b[i].label, "1h") == 0)
            assert_int_equal(b[i].count, 2);
    tracker_free(t);
}

/* One run under 120d at insert time `ins`: a row in June, two in July, one in
 * August (ids 5 days into their window), as the importer classifies them. */
static char *
run_under_120d(int64_t ins)
{
    static const int64_t lowers[] = {JUL - 30 * US_PER_DAY, JUL, JUL, AUG};
    Tracker *run = tracker_new(120 * US_PER_DAY, 31 * US_PER_DAY);
    char *json;

    for (size_t i = 0; i < sizeof lowers / sizeof lowers[0]; i++)
    {
        int64_t lo = lowers[i];
        int64_t up = lo == AUG ? AUG + 31 * US_PER_DAY : lo == JUL ? AUG : JUL;
        int64_t id = lo + 5 * US_PER_DAY + (int64_t) i;

        tracker_add(run, id, ins, tracker_classify(run, up, ins, NULL), lo, up, "r", 1);
    }
    json = tracker_to_json(run);
    tracker_free(run);
    return json;
}

static void
test_merge_run_judges_again_under_the_reports_retention(void **state)
{
    /* inserted Aug 21: under 30d June is expired, July near (10d left, horizon
     * a month), August on time (41d left); under 120d all were on time */
    int64_t ins = AUG + 20 * US_PER_DAY;
    char *doc = run_under_120d(ins);
    Tracker *t = tracker_new(RET, 0);
    Tracker *same = tracker_new(120 * US_PER_DAY, 0);
    const TrackerLargest *l;
    const TrackerWindow *w;
    Err err = {0};
    size_t runs;
    int64_t lo;
    int64_t hi;

    (void) state;
    if (!tracker_merge_run(t, doc, ins - US_PER_SEC, ins + US_PER_SEC, &err) ||
        !tracker_merge_run(same, doc, ins - US_PER_SEC, ins + US_PER_SEC, &err))
        fail_msg("merge: %s", err.msg);
    assert_int_equal(tracker_count(t, DELAY_ON_TIME), 1);
    assert_int_equal(tracker_count(t, DELAY_NEAR_CUTOFF), 2);
    assert_int_equal(tracker_count(t, DELAY_EXPIRED), 1);
    assert_int_equal(tracker_total(t), 4);
    for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
        assert_int_equal(tracker_count_at_insert(t, (DelayClass) c), 0);
    assert_true(tracker_other_retentions(t, &runs, &lo, &hi));
    assert_int_equal(runs, 1);
    assert_int_equal(lo, 120 * US_PER_DAY);
    assert_int_equal(hi, 120 * US_PER_DAY);
    /* the largest delay is June's row: expired under 30d, judged again */
    assert_int_equal(tracker_largest(t, &l), 4);
    assert_int_equal(l[0].cls, DELAY_EXPIRED);
    assert_false(l[0].cls_at_insert);
    assert_int_equal(tracker_windows(t, &w), 3);
    assert_int_equal(w[1].rows[DELAY_NEAR_CUTOFF], 2);
    assert_int_equal(w[1].min_time_left_us, 10 * US_PER_DAY);
    /* the same retention: the classes as stored, no note */
    assert_int_equal(tracker_count(same, DELAY_ON_TIME), 4);
    assert_false(tracker_other_retentions(same, &runs, &lo, &hi));
    free(doc);
    tracker_free(t);
    tracker_free(same);
}

static void
test_merge_run_keeps_the_class_at_insert_when_it_changes_during_the_run(void **state)
{
    /* the run inserted from Jul 27 to Aug 21: July's rows were on time under
     * 30d at its start, near at its end; June's near, then expired */
    int64_t ins = AUG + 20 * US_PER_DAY;
    char *doc = run_under_120d(ins);
    Tracker *t = tracker_new(RET, 0);
    const TrackerWindow *w;
    Err err = {0};

    (void) state;
    if (!tracker_merge_run(t, doc, ins - 25 * US_PER_DAY, ins, &err))
        fail_msg("merge: %s", err.msg);
    assert_int_equal(tracker_count(t, DELAY_ON_TIME), 1);
    assert_int_equal(tracker_count(t, DELAY_NEAR_CUTOFF), 0);
    assert_int_equal(tracker_count(t, DELAY_EXPIRED), 0);
    assert_int_equal(tracker_count_at_insert(t, DELAY_ON_TIME), 3);
    assert_int_equal(tracker_total(t), 4);
    assert_int_equal(tracker_windows(t, &w), 3);
    assert_int_equal(w[0].not_rejudged, 1);
    assert_int_equal(w[1].not_rejudged, 2);
    assert_int_equal(w[2].not_rejudged, 0);
    free(doc);
    tracker_free(t);
}

static void
test_json_merge_rejects(void **state)
{
    static const char *const bad[] = {
        "not json",
        "[1, 2]",
        "{\"format\": \"something-else/9\"}",
        /* the histogram does not add up to the counts */
        "{\"format\": \"v7fill-tracker/1\", \"counts\": {\"on_time\": 2, \"near_cutoff\": 0, "
        "\"expired\": 0}, \"delay_us\": {\"min\": 1, \"max\": 2}, \"histogram\": {\"layout\": "
        "\"log2-sub128-us\", \"buckets\": [[1, 1]]}, \"display\": [], \"largest\": [], "
        "\"windows\": []}",
        /* a bucket index out of range */
        "{\"format\": \"v7fill-tracker/1\", \"counts\": {\"on_time\": 1, \"near_cutoff\": 0, "
        "\"expired\": 0}, \"delay_us\": {\"min\": 1, \"max\": 1}, \"histogram\": {\"layout\": "
        "\"log2-sub128-us\", \"buckets\": [[99999, 1]]}, \"display\": [], \"largest\": [], "
        "\"windows\": []}",
    };
    Tracker *t = tracker_new(0, 0);
    char *before;
    char *after;

    (void) state;
    fill(t, 3, 100);
    before = tracker_to_json(t);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
        Err err = {0};

        assert_false(tracker_merge_json(t, bad[i], &err));
        assert_int_equal(err.code, EC_FORMAT);
    }
    after = tracker_to_json(t);
    assert_string_equal(before, after); /* untouched */
    free(before);
    free(after);
    tracker_free(t);
}

static void
test_window_cap(void **state)
{
    Tracker *t = tracker_new(0, 0);
    const TrackerWindow *w;
    size_t n;

    (void) state;
    /* Day windows far more than the cap: memory stays bounded, rows counted. */
    for (int64_t d = 0; d < 100010; d++)
        tracker_add(t, d * US_PER_DAY, d * US_PER_DAY + 1, DELAY_ON_TIME, d * US_PER_DAY,
                    (d + 1) * US_PER_DAY, NULL, 0);
    n = tracker_windows(t, &w);
    assert_int_equal(n, 100000);
    assert_int_equal(tracker_untracked_window_rows(t), 10);
    assert_int_equal(tracker_total(t), 100010);
    for (size_t i = 1; i < n; i++)
        assert_true(w[i - 1].lower_us < w[i].lower_us);
    tracker_free(t);
}

/* A copy taken before rows are added, copied back after: the tracker is as
 * before them, counts, histograms, largest delays (with their names) and
 * windows (a large source transaction's rolled-back pieces). */
static void
test_copy_into_takes_rows_out(void **state)
{
    Tracker *t = tracker_new(RET, 0);
    Tracker *saved = tracker_new(RET, 0);
    uint64_t seed = 7;
    char *before;
    char *after;

    (void) state;
    for (int i = 0; i < 500; i++)
    {
        int64_t id = JUL + (int64_t) (rnd_unit(&seed) * (double) (AUG - JUL));

        tracker_add(t, id, AUG + (int64_t) (rnd_unit(&seed) * 3600e6), DELAY_ON_TIME, JUL, AUG,
                    "before", 6);
    }
    tracker_copy_into(saved, t);
    before = tracker_to_json(t);
    /* rolled-back rows: larger delays (they rank), a new window, another class */
    for (int i = 0; i < 300; i++)
        tracker_add(t, JUL - RET, AUG + i, i % 2 ? DELAY_EXPIRED : DELAY_NEAR_CUTOFF, JUL - RET,
                    JUL - RET + US_PER_DAY, "rolled back", 11);
    after = tracker_to_json(t);
    assert_string_not_equal(before, after);
    free(after);
    tracker_copy_into(t, saved);
    after = tracker_to_json(t);
    assert_string_equal(before, after);
    assert_int_equal(tracker_total(t), 500);
    /* and it goes on counting from there */
    tracker_add(t, JUL, AUG, DELAY_ON_TIME, JUL, AUG, "next", 4);
    assert_int_equal(tracker_total(t), 501);
    free(before);
    free(after);
    tracker_free(t);
    tracker_free(saved);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_boundary),
        cmocka_unit_test(test_near_cutoff_time_left),
        cmocka_unit_test(test_percentiles_brute_force),
        cmocka_unit_test(test_largest_and_refs),
        cmocka_unit_test(test_largest_named_rows),
        cmocka_unit_test(test_pending_named_at_batch_end),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_merge_equals_one_run),
        cmocka_unit_test(test_json_merge_jsonb_style),
        cmocka_unit_test(test_merge_run_judges_again_under_the_reports_retention),
        cmocka_unit_test(test_merge_run_keeps_the_class_at_insert_when_it_changes_during_the_run),
        cmocka_unit_test(test_json_merge_rejects),
        cmocka_unit_test(test_window_cap),
        cmocka_unit_test(test_copy_into_takes_rows_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
