/*
 * Metrics registry: counters, gauges and histograms, with labels, rendered in
 * the Prometheus text exposition format 0.0.4.
 *
 * Thread safety.  Any thread may update a series at any time: updates are
 * lock-free atomics on the series, so a scrape never holds up the thread that
 * counts.  Defining a family and looking up or creating a series take the
 * registry's mutex, which a scrape holds only while it copies the current
 * values (no formatting, no I/O under it).  A series handle stays valid until
 * metrics_free, so the hot path looks a series up once and keeps the handle.
 *
 * Naming (checked when a family is defined; a violation is a bug, EC_INTERNAL):
 * names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*
 * and do not start with "__" nor are "le"; a counter's name ends in "_total";
 * a family in seconds or bytes has "_seconds" / "_bytes" as the last part of
 * its name (before "_total"), and a name with such a part declares the unit.
 *
 * Rendering: families in the order defined, series in the order created;
 * "# HELP" (\ and newline escaped) and "# TYPE" before the samples; label
 * values with \, " and newline escaped; histograms as cumulative _bucket
 * samples with le="..." up to le="+Inf", then _sum and _count (_count is the
 * +Inf bucket, so the two always agree).  Values print as integers when they
 * are integers, else with 17 significant digits; +Inf, -Inf, NaN as such.
 */
#ifndef V7FILL_METRICS_H
#define V7FILL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"

typedef struct Metrics Metrics;           /* the registry; opaque */
typedef struct MetricFamily MetricFamily; /* one name, its HELP, TYPE and label names */
typedef struct MetricSeries MetricSeries; /* one combination of label values */

typedef enum MetricType
{
    METRIC_COUNTER = 0,
    METRIC_GAUGE,
    METRIC_HISTOGRAM,
} MetricType;

typedef enum MetricUnit
{
    METRIC_UNIT_NONE = 0, /* a count, a ratio, a state, an LSN */
    METRIC_UNIT_SECONDS,
    METRIC_UNIT_BYTES,
} MetricUnit;

#define METRIC_MAX_LABELS  4     /* label names per family */
#define METRIC_MAX_BUCKETS 64    /* finite bucket bounds per histogram */
#define METRIC_MAX_SERIES  10000 /* label combinations per family (EC_LIMIT beyond) */

/* A family's definition; the strings are copied. */
typedef struct MetricDef
{
    MetricType type;
    const char *name;
    const char *help; /* one sentence (escaped when rendered; invalid UTF-8 as U+FFFD) */
    MetricUnit unit;
    size_t nlabels;
    const char *labels[METRIC_MAX_LABELS];
    /* histograms only: the finite upper bounds (le), strictly increasing,
     * finite; +Inf is added */
    size_t nbuckets;
    const double *buckets;
} MetricDef;

Metrics *metrics_new(void);  /* never NULL (exits on out-of-memory) */
void metrics_free(Metrics *m); /* NULL-safe; every family and series handle dies with it */

/* Define a family.  A bad definition (name, labels, unit, buckets) or a name
 * already defined → EC_INTERNAL.  *out belongs to m. */
V7FILL_MUST_CHECK bool metrics_define(Metrics *m, const MetricDef *def, MetricFamily **out, Err *err);

/* The family called name, or NULL. */
MetricFamily *metrics_family(Metrics *m, const char *name);

/* The series of family f with these label values (nvalues must equal the
 * family's label count, else EC_INTERNAL), created at 0 on first use.  Values
 * are any text, empty included; a byte that does not start a valid UTF-8
 * sequence is shown (and compared) as U+FFFD, since a scraper refuses the
 * whole page for one invalid label value.  More than METRIC_MAX_SERIES
 * combinations → EC_LIMIT.  *out belongs to the registry. */
V7FILL_MUST_CHECK bool metrics_series(MetricFamily *f, const char *const *values, size_t nvalues,
                                      MetricSeries **out, Err *err);
/* The one series of a family without labels (NULL for a family with labels). */
MetricSeries *metrics_only(MetricFamily *f);

/* Updates.  All are NULL-safe (a NULL series is a no-op, so code runs the
 * same without a registry) and lock-free; calling one of another type than
 * the series' family (e.g. counter_add on a gauge) is a no-op. */
void metrics_counter_add(MetricSeries *s, uint64_t delta);
/* Raise a counter to v; a v below the current value is ignored (a counter
 * never goes down).  For an owner that keeps its own running total. */
void metrics_counter_raise(MetricSeries *s, uint64_t v);
void metrics_gauge_set(MetricSeries *s, double v);
void metrics_gauge_add(MetricSeries *s, double delta);
void metrics_histogram_observe(MetricSeries *s, double v); /* v <= bound counts in that bucket; NaN ignored */
/* Many observations at once: counts[i] in bucket i (not cumulative; ncounts is
 * the family's bucket count + 1, the last +Inf; another count: a no-op), their
 * values summing to sum.  Each bucket is added atomically, not all together. */
void metrics_histogram_add(MetricSeries *s, const uint64_t *counts, size_t ncounts, double sum);
/* Set every series of gauge family f except keep (may be NULL) to v: with
 * keep set to 1 first, a state exposed as one series per state (1 = current). */
void metrics_gauge_set_others(MetricFamily *f, const MetricSeries *keep, double v);

/* Current values (for tests and for the owner's own logic). */
uint64_t metrics_counter_value(const MetricSeries *s);
double metrics_gauge_value(const MetricSeries *s);
/* Observations and their sum; cumulative bucket counts into counts[] (room
 * for nbuckets + 1, the last being +Inf) when counts is not NULL. */
uint64_t metrics_histogram_count(const MetricSeries *s, double *sum, uint64_t *counts);

/* The whole registry in the text exposition format 0.0.4; newly allocated,
 * caller frees; *len (may be NULL) its length. */
char *metrics_render(Metrics *m, size_t *len);

/* The Content-Type of metrics_render's output. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif /* V7FILL_METRICS_H */
