/*
 * Metrics registry and its text exposition (Prometheus format 0.0.4).
 *
 * Values live in atomics on each series: a counter or gauge in one 64-bit
 * word (a gauge's double by its bits), a histogram as one non-cumulative
 * counter per bucket plus the sum's bits.  Families and series form singly
 * linked lists that only grow (under the registry mutex) and are freed with
 * the registry; their names and label values never change once linked, so
 * a scrape copies the values under the mutex and formats after releasing it.
 */
#include "v7fill/metrics.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"

struct MetricSeries
{
    MetricFamily *fam;
    char **values;             /* fam->nlabels label values */
    _Atomic uint64_t word;     /* counter value, or a gauge's double bits */
    _Atomic uint64_t sum_bits; /* histogram: the sum's double bits */
    _Atomic uint64_t *buckets; /* histogram: nbounds + 1 counts, not cumulative */
    MetricSeries *next;
};

struct MetricFamily
{
    Metrics *reg;
    MetricType type;
    MetricUnit unit;
    char *name;
    char *help;
    size_t nlabels;
    char *labels[METRIC_MAX_LABELS];
    size_t nbounds;
    double *bounds;
    MetricSeries *first;
    MetricSeries *last;
    size_t nseries;
    MetricFamily *next;
};

struct Metrics
{
    pthread_mutex_t mu; /* guards the lists, not the values */
    MetricFamily *first;
    MetricFamily *last;
    size_t nseries; /* over all families */
};

/* ---- doubles in atomic words ---- */

static uint64_t
dbl_bits(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static double
bits_dbl(uint64_t u)
{
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* atomic_add_dbl: add delta to the double held in *w (compare-and-swap loop). */
static void
atomic_add_dbl(_Atomic uint64_t *w, double delta)
{
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(w, &old, dbl_bits(bits_dbl(old) + delta),
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

/* ---- validation ---- */

static bool
is_name_char(char c, bool first, bool colon)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
        return true;
    if (colon && c == ':')
        return true;
    return !first && c >= '0' && c <= '9';
}

/* valid_name: a metric name (colon allowed) or a label name. */
static bool
valid_name(const char *s, bool colon)
{
    if (s == NULL || *s == '\0')
        return false;
    for (size_t i = 0; s[i] != '\0'; i++)
        if (!is_name_char(s[i], i == 0, colon))
            return false;
    return true;
}

static bool
ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* check_def: the naming rules of metrics.h, and the buckets. */
static bool
check_def(const MetricDef *d, Err *err)
{
    if (!valid_name(d->name, true))
        return err_set(err, EC_INTERNAL, "metric name \"%s\" is not valid", d->name ? d->name : "");
    if (d->help == NULL || d->help[0] == '\0')
        return err_set(err, EC_INTERNAL, "metric %s has no help text", d->name);
    if (d->type != METRIC_COUNTER && d->type != METRIC_GAUGE && d->type != METRIC_HISTOGRAM)
        return err_set(err, EC_INTERNAL, "metric %s has an unknown type", d->name);
    size_t len = strlen(d->name);
    if (d->type == METRIC_COUNTER)
    {
        if (!ends_with(d->name, len, "_total"))
            return err_set(err, EC_INTERNAL, "counter %s does not end in _total", d->name);
        len -= strlen("_total");
    }
    else if (ends_with(d->name, len, "_total"))
        return err_set(err, EC_INTERNAL, "metric %s ends in _total but is not a counter", d->name);
    if (d->type == METRIC_HISTOGRAM
        && (ends_with(d->name, len, "_bucket") || ends_with(d->name, len, "_sum")
            || ends_with(d->name, len, "_count")))
        return err_set(err, EC_INTERNAL, "histogram %s ends in a suffix of its samples", d->name);
    bool says_seconds = ends_with(d->name, len, "_seconds");
    bool says_bytes = ends_with(d->name, len, "_bytes");
    if ((d->unit == METRIC_UNIT_SECONDS) != says_seconds || (d->unit == METRIC_UNIT_BYTES) != says_bytes)
        return err_set(err, EC_INTERNAL, "metric %s: its name and its unit disagree", d->name);
    if (d->nlabels > METRIC_MAX_LABELS)
        return err_set(err, EC_INTERNAL, "metric %s has more than %d labels", d->name, METRIC_MAX_LABELS);
    for (size_t i = 0; i < d->nlabels; i++)
    {
        const char *l = d->labels[i];
        if (!valid_name(l, false) || strncmp(l, "__", 2) == 0 || strcmp(l, "le") == 0)
            return err_set(err, EC_INTERNAL, "metric %s: label name \"%s\" is not valid", d->name,
                           l ? l : "");
        for (size_t j = 0; j < i; j++)
            if (strcmp(l, d->labels[j]) == 0)
                return err_set(err, EC_INTERNAL, "metric %s: label %s twice", d->name, l);
    }
    if (d->type != METRIC_HISTOGRAM)
        return d->nbuckets == 0
                   ? true
                   : err_set(err, EC_INTERNAL, "metric %s has buckets but is no histogram", d->name);
    if (d->nbuckets == 0 || d->nbuckets > METRIC_MAX_BUCKETS || d->buckets == NULL)
        return err_set(err, EC_INTERNAL, "histogram %s needs 1 to %d buckets", d->name, METRIC_MAX_BUCKETS);
    for (size_t i = 0; i < d->nbuckets; i++)
        if (!isfinite(d->buckets[i]) || (i > 0 && !(d->buckets[i] > d->buckets[i - 1])))
            return err_set(err, EC_INTERNAL, "histogram %s: bucket bounds must be finite and increasing",
                           d->name);
    return true;
}

/* ---- text ---- */

/* utf8_len: the length of the valid UTF-8 sequence starting at s (1 to 4),
 * or 0 when s does not start one (overlong forms, surrogates and code points
 * above U+10FFFF are not valid). */
static size_t
utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (s[0] < 0xC2 || s[0] > 0xF4)
        return 0;
    if (s[0] == 0xE0)
        lo = 0xA0;
    else if (s[0] == 0xED)
        hi = 0x9F;
    else if (s[0] == 0xF0)
        lo = 0x90;
    else if (s[0] == 0xF4)
        hi = 0x8F;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* utf8_dup: a copy of s in which each byte that does not start a valid
 * UTF-8 sequence is U+FFFD (a scraper rejects the whole page otherwise). */
static char *
utf8_dup(const char *s)
{
    Buf b;
    buf_init(&b);
    buf_reserve(&b, strlen(s));
    b.data[0] = '\0';
    for (const unsigned char *p = (const unsigned char *) s; *p != '\0';)
    {
        size_t n = utf8_len(p);
        if (n == 0)
        {
            buf_puts(&b, "\xEF\xBF\xBD");
            p++;
            continue;
        }
        buf_append(&b, p, n);
        p += n;
    }
    return b.data;
}

/* ---- registry ---- */

Metrics *
metrics_new(void)
{
    Metrics *m = xcalloc(1, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

static void
series_free(MetricSeries *s, size_t nlabels)
{
    for (size_t i = 0; i < nlabels; i++)
        free(s->values[i]);
    free(s->values);
    free(s->buckets);
    free(s);
}

static void
family_free(MetricFamily *f)
{
    MetricSeries *s = f->first;
    while (s != NULL)
    {
        MetricSeries *snext = s->next;
        series_free(s, f->nlabels);
        s = snext;
    }
    for (size_t i = 0; i < f->nlabels; i++)
        free(f->labels[i]);
    free(f->name);
    free(f->help);
    free(f->bounds);
    free(f);
}

void
metrics_free(Metrics *m)
{
    if (m == NULL)
        return;
    MetricFamily *f = m->first;
    while (f != NULL)
    {
        MetricFamily *fnext = f->next;
        family_free(f);
        f = fnext;
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static MetricFamily *
family_find(Metrics *m, const char *name)
{
    for (MetricFamily *f = m->first; f != NULL; f = f->next)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

/* values_dup: the label values as they will be shown (valid UTF-8). */
static char **
values_dup(const MetricFamily *f, const char *const *values)
{
    char **v = xcalloc(f->nlabels > 0 ? f->nlabels : 1, sizeof *v);
    for (size_t i = 0; i < f->nlabels; i++)
        v[i] = utf8_dup(values[i]);
    return v;
}

/* series_add: a new series at 0, owning values (from values_dup); caller
 * holds the mutex. */
static MetricSeries *
series_add(MetricFamily *f, char **values)
{
    MetricSeries *s = xcalloc(1, sizeof *s);
    s->fam = f;
    s->values = values;
    atomic_init(&s->word, f->type == METRIC_GAUGE ? dbl_bits(0.0) : 0);
    atomic_init(&s->sum_bits, dbl_bits(0.0));
    if (f->type == METRIC_HISTOGRAM)
    {
        s->buckets = xcalloc(f->nbounds + 1, sizeof *s->buckets);
        for (size_t i = 0; i <= f->nbounds; i++)
            atomic_init(&s->buckets[i], 0);
    }
    if (f->last != NULL)
        f->last->next = s;
    else
        f->first = s;
    f->last = s;
    f->nseries++;
    f->reg->nseries++;
    return s;
}

bool
metrics_define(Metrics *m, const MetricDef *def, MetricFamily **out, Err *err)
{
    if (!check_def(def, err))
        return false;
    MetricFamily *f = xcalloc(1, sizeof *f);
    f->reg = m;
    f->type = def->type;
    f->unit = def->unit;
    f->name = xstrdup(def->name);
    f->help = utf8_dup(def->help);
    f->nlabels = def->nlabels;
    for (size_t i = 0; i < def->nlabels; i++)
        f->labels[i] = xstrdup(def->labels[i]);
    if (def->type == METRIC_HISTOGRAM)
    {
        f->nbounds = def->nbuckets;
        f->bounds = xmalloc(def->nbuckets * sizeof *f->bounds);
        memcpy(f->bounds, def->buckets, def->nbuckets * sizeof *f->bounds);
    }

    pthread_mutex_lock(&m->mu);
    if (family_find(m, def->name) != NULL)
    {
        pthread_mutex_unlock(&m->mu);
        family_free(f);
        return err_set(err, EC_INTERNAL, "metric %s is defined twice", def->name);
    }
    if (f->nlabels == 0)
        series_add(f, values_dup(f, NULL));
    if (m->last != NULL)
        m->last->next = f;
    else
        m->first = f;
    m->last = f;
    pthread_mutex_unlock(&m->mu);
    *out = f;
    return true;
}

MetricFamily *
metrics_family(Metrics *m, const char *name)
{
    pthread_mutex_lock(&m->mu);
    MetricFamily *f = family_find(m, name);
    pthread_mutex_unlock(&m->mu);
    return f;
}

bool
metrics_series(MetricFamily *f, const char *const *values, size_t nvalues, MetricSeries **out, Err *err)
{
    if (nvalues != f->nlabels)
        return err_set(err, EC_INTERNAL, "metric %s takes %zu label values, not %zu", f->name, f->nlabels,
                       nvalues);
    for (size_t i = 0; i < nvalues; i++)
        if (values[i] == NULL)
            return err_set(err, EC_INTERNAL, "metric %s: label %s has no value", f->name, f->labels[i]);
    /* compared as shown: two values that differ only in invalid bytes are
     * one series, never two with the same labels */
    char **shown = values_dup(f, values);
    pthread_mutex_lock(&f->reg->mu);
    MetricSeries *s = f->first;
    for (; s != NULL; s = s->next)
    {
        size_t i = 0;
        while (i < nvalues && strcmp(s->values[i], shown[i]) == 0)
            i++;
        if (i == nvalues)
            break;
    }
    bool full = s == NULL && f->nseries >= METRIC_MAX_SERIES;
    if (s == NULL && !full)
    {
        s = series_add(f, shown);
        shown = NULL;
    }
    pthread_mutex_unlock(&f->reg->mu);
    if (shown != NULL)
    {
        for (size_t i = 0; i < nvalues; i++)
            free(shown[i]);
        free(shown);
    }
    if (full)
        return err_set(err, EC_LIMIT, "metric %s has reached %d label combinations", f->name,
                       METRIC_MAX_SERIES);
    *out = s;
    return true;
}

MetricSeries *
metrics_only(MetricFamily *f)
{
    /* created with the family and never changed: no lock needed */
    return f != NULL && f->nlabels == 0 ? f->first : NULL;
}

/* ---- updates ---- */

void
metrics_counter_add(MetricSeries *s, uint64_t delta)
{
    if (s != NULL && s->fam->type == METRIC_COUNTER)
        atomic_fetch_add_explicit(&s->word, delta, memory_order_relaxed);
}

void
metrics_counter_raise(MetricSeries *s, uint64_t v)
{
    if (s == NULL || s->fam->type != METRIC_COUNTER)
        return;
    uint64_t old = atomic_load_explicit(&s->word, memory_order_relaxed);
    while (old < v
           && !atomic_compare_exchange_weak_explicit(&s->word, &old, v, memory_order_relaxed,
                                                     memory_order_relaxed))
        ;
}

void
metrics_gauge_set(MetricSeries *s, double v)
{
    if (s != NULL && s->fam->type == METRIC_GAUGE)
        atomic_store_explicit(&s->word, dbl_bits(v), memory_order_relaxed);
}

void
metrics_gauge_add(MetricSeries *s, double delta)
{
    if (s != NULL && s->fam->type == METRIC_GAUGE)
        atomic_add_dbl(&s->word, delta);
}

void
metrics_histogram_observe(MetricSeries *s, double v)
{
    if (s == NULL || s->fam->type != METRIC_HISTOGRAM || isnan(v))
        return;
    const MetricFamily *f = s->fam;
    size_t lo = 0, hi = f->nbounds; /* first bound >= v, or nbounds (+Inf) */
    while (lo < hi)
    {
        size_t mid = lo + (hi - lo) / 2;
        if (v <= f->bounds[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    atomic_fetch_add_explicit(&s->buckets[lo], 1, memory_order_relaxed);
    atomic_add_dbl(&s->sum_bits, v);
}

void
metrics_histogram_add(MetricSeries *s, const uint64_t *counts, size_t ncounts, double sum)
{
    if (s == NULL || s->fam->type != METRIC_HISTOGRAM || ncounts != s->fam->nbounds + 1 ||
        isnan(sum))
        return;
    for (size_t i = 0; i < ncounts; i++)
        if (counts[i] > 0)
            atomic_fetch_add_explicit(&s->buckets[i], counts[i], memory_order_relaxed);
    atomic_add_dbl(&s->sum_bits, sum);
}

void
metrics_gauge_set_others(MetricFamily *f, const MetricSeries *keep, double v)
{
    if (f == NULL || f->type != METRIC_GAUGE)
        return;
    pthread_mutex_lock(&f->reg->mu);
    for (MetricSeries *s = f->first; s != NULL; s = s->next)
        if (s != keep)
            atomic_store_explicit(&s->word, dbl_bits(v), memory_order_relaxed);
    pthread_mutex_unlock(&f->reg->mu);
}

uint64_t
metrics_counter_value(const MetricSeries *s)
{
    return s != NULL && s->fam->type == METRIC_COUNTER
               ? atomic_load_explicit(&((MetricSeries *) s)->word, memory_order_relaxed)
               : 0;
}

double
metrics_gauge_value(const MetricSeries *s)
{
    return s != NULL && s->fam->type == METRIC_GAUGE
               ? bits_dbl(atomic_load_explicit(&((MetricSeries *) s)->word, memory_order_relaxed))
               : 0.0;
}

uint64_t
metrics_histogram_count(const MetricSeries *s, double *sum, uint64_t *counts)
{
    if (sum != NULL)
        *sum = 0.0;
    if (s == NULL || s->fam->type != METRIC_HISTOGRAM)
        return 0;
    MetricSeries *w = (MetricSeries *) s;
    uint64_t total = 0;
    for (size_t i = 0; i <= s->fam->nbounds; i++)
    {
        total += atomic_load_explicit(&w->buckets[i], memory_order_relaxed);
        if (counts != NULL)
            counts[i] = total;
    }
    if (sum != NULL)
        *sum = bits_dbl(atomic_load_explicit(&w->sum_bits, memory_order_relaxed));
    return total;
}

/* ---- rendering ---- */

/* One series' values, copied under the mutex. */
typedef struct Snap
{
    const MetricFamily *fam;
    const MetricSeries *series; /* NULL: the family has no series yet */
    uint64_t word;
    double sum;
    uint64_t *counts; /* histogram: cumulative, nbounds + 1 */
} Snap;

/* put_double: the shortest of %.15g..%.17g that reads back as v. */
static void
put_double(Buf *b, double v)
{
    char tmp[40];
    if (isnan(v))
        snprintf(tmp, sizeof tmp, "NaN");
    else if (isinf(v))
        snprintf(tmp, sizeof tmp, v > 0 ? "+Inf" : "-Inf");
    else if (v == trunc(v) && fabs(v) < 1e15)
        snprintf(tmp, sizeof tmp, "%.0f", v == 0.0 ? 0.0 : v); /* no "-0" */
    else
    {
        for (int prec = 15; prec <= 17; prec++)
        {
            snprintf(tmp, sizeof tmp, "%.*g", prec, v);
            if (strtod(tmp, NULL) == v)
                break;
        }
    }
    buf_puts(b, tmp);
}

static void
put_u64(Buf *b, uint64_t v)
{
    buf_printf(b, "%" PRIu64, v);
}

/* put_escaped: s with \ and newline escaped, and " too when quote. */
static void
put_escaped(Buf *b, const char *s, bool quote)
{
    for (; *s != '\0'; s++)
    {
        if (*s == '\\')
            buf_puts(b, "\\\\");
        else if (*s == '\n')
            buf_puts(b, "\\n");
        else if (*s == '"' && quote)
            buf_puts(b, "\\\"");
        else
            buf_putc(b, *s);
    }
}

/* put_sample_name: name+suffix{labels[,le="…"]} and a space. */
static void
put_sample_name(Buf *b, const Snap *sn, const char *suffix, const double *le)
{
    const MetricFamily *f = sn->fam;
    buf_puts(b, f->name);
    buf_puts(b, suffix);
    if (f->nlabels > 0 || le != NULL)
    {
        buf_puts(b, "{");
        for (size_t i = 0; i < f->nlabels; i++)
        {
            if (i > 0)
                buf_puts(b, ",");
            buf_puts(b, f->labels[i]);
            buf_puts(b, "=\"");
            put_escaped(b, sn->series->values[i], true);
            buf_puts(b, "\"");
        }
        if (le != NULL)
        {
            buf_puts(b, f->nlabels > 0 ? ",le=\"" : "le=\"");
            put_double(b, *le);
            buf_puts(b, "\"");
        }
        buf_puts(b, "}");
    }
    buf_puts(b, " ");
}

static void
render_snap(Buf *b, const Snap *sn)
{
    const MetricFamily *f = sn->fam;
    switch (f->type)
    {
    case METRIC_COUNTER:
        put_sample_name(b, sn, "", NULL);
        put_u64(b, sn->word);
        buf_puts(b, "\n");
        break;
    case METRIC_GAUGE:
        put_sample_name(b, sn, "", NULL);
        put_double(b, bits_dbl(sn->word));
        buf_puts(b, "\n");
        break;
    case METRIC_HISTOGRAM:
        for (size_t i = 0; i <= f->nbounds; i++)
        {
            double le = i < f->nbounds ? f->bounds[i] : INFINITY;
            put_sample_name(b, sn, "_bucket", &le);
            put_u64(b, sn->counts[i]);
            buf_puts(b, "\n");
        }
        put_sample_name(b, sn, "_sum", NULL);
        put_double(b, sn->sum);
        buf_puts(b, "\n");
        put_sample_name(b, sn, "_count", NULL);
        put_u64(b, sn->counts[f->nbounds]);
        buf_puts(b, "\n");
        break;
    }
}

static const char *
type_name(MetricType t)
{
    switch (t)
    {
    case METRIC_COUNTER:
        return "counter";
    case METRIC_GAUGE:
        return "gauge";
    case METRIC_HISTOGRAM:
        return "histogram";
    }
    return "untyped";
}

char *
metrics_render(Metrics *m, size_t *len)
{
    /* copy under the mutex: plain loads and a few small allocations */
    pthread_mutex_lock(&m->mu);
    size_t nfam = 0;
    for (MetricFamily *f = m->first; f != NULL; f = f->next)
        nfam++;
    size_t cap = m->nseries + nfam, n = 0;
    Snap *snaps = xcalloc(cap > 0 ? cap : 1, sizeof *snaps);
    for (MetricFamily *f = m->first; f != NULL; f = f->next)
    {
        if (f->first == NULL)
            snaps[n++] = (Snap) {.fam = f};
        for (MetricSeries *s = f->first; s != NULL; s = s->next)
        {
            Snap *sn = &snaps[n++];
            sn->fam = f;
            sn->series = s;
            if (f->type == METRIC_HISTOGRAM)
            {
                sn->counts = xmalloc((f->nbounds + 1) * sizeof *sn->counts);
                metrics_histogram_count(s, &sn->sum, sn->counts);
            }
            else
                sn->word = atomic_load_explicit(&s->word, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock(&m->mu);

    Buf b;
    buf_init(&b);
    const MetricFamily *cur = NULL;
    for (size_t i = 0; i < n; i++)
    {
        const Snap *sn = &snaps[i];
        if (sn->fam != cur)
        {
            cur = sn->fam;
            buf_puts(&b, "# HELP ");
            buf_puts(&b, cur->name);
            buf_puts(&b, " ");
            put_escaped(&b, cur->help, false);
            buf_puts(&b, "\n# TYPE ");
            buf_puts(&b, cur->name);
            buf_puts(&b, " ");
            buf_puts(&b, type_name(cur->type));
            buf_puts(&b, "\n");
        }
        if (sn->series != NULL)
            render_snap(&b, sn);
        free(sn->counts);
    }
    free(snaps);
    if (len != NULL)
        *len = b.len;
    return b.data != NULL ? b.data : xstrdup("");
}
