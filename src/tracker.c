/*
 * Delay tracking: classification against the retention and bounded
 * aggregation of every row's delay (insert time − id time).
 *
 * The fine histogram is HDR-style: values below 256 µs have a bucket each;
 * above, every power of two is split into 128 equal sub-buckets.  A bucket
 * is at most 1/128 of its lower edge wide, so reporting its midpoint is
 * within 1/256 (0.4%) of any value in it.  7296 counters cover every
 * non-negative int64, whatever the input size.
 */
#include "v7fill/tracker.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/civil.h"
#include "v7fill/mem.h"

#define FINE_SUB_BITS 7
#define FINE_SUB      (1 << FINE_SUB_BITS)
#define FINE_LINEAR   (2 * FINE_SUB)
/* Octaves 2^8 .. 2^62: the highest bit of a positive int64 is at most 62. */
#define FINE_BUCKETS  (FINE_LINEAR + (63 - 8) * FINE_SUB)
#define FINE_LAYOUT   "log2-sub128-us"
#define FORMAT_NAME   "v7fill-tracker/1"

/* Day windows for 270 years; more than any real table has, and it keeps a
 * run's statistics (and its jsonb row) bounded. */
#define TRACKER_MAX_WINDOWS 100000

/* Display edges: roughly log-spaced, on units a person reads at a glance,
 * finer in the day range where retentions live. */
#define MS  US_PER_MS
#define SEC US_PER_SEC
#define MIN US_PER_MIN
#define HR  US_PER_HOUR
#define DAY US_PER_DAY
static const int64_t display_edges[] = {
    0,       MS,       10 * MS,  100 * MS, SEC,      10 * SEC,  MIN,       10 * MIN,
    HR,      6 * HR,   DAY,      2 * DAY,  7 * DAY,  14 * DAY,  30 * DAY,  60 * DAY,
    90 * DAY, 180 * DAY, 365 * DAY,
};
static const char *const display_labels[] = {
    "<1ms", "1ms", "10ms", "100ms", "1s",  "10s", "1min", "10min", "1h",   "6h",
    "1d",   "2d",  "7d",   "14d",   "30d", "60d", "90d",  "180d",  "365d",
};
#define NDISPLAY (sizeof display_edges / sizeof display_edges[0])

struct Tracker
{
    int64_t retention_us;
    int64_t near_cutoff_us; /* as given; 0 = default */
    uint64_t counts[3];
    uint64_t negative;
    int64_t min_us;
    int64_t max_us;
    uint64_t *fine; /* FINE_BUCKETS counters */
    TrackerBucket display[NDISPLAY];
    TrackerLargest largest[TRACKER_LARGEST];
    size_t nlargest;
    TrackerWindow *windows; /* sorted by lower_us */
    size_t nwindows;
    size_t cap_windows;
    size_t last_window; /* rows arrive clustered: try the last window first */
    uint64_t untracked_window_rows;
    uint64_t at_insert[3];   /* rows that kept the class of another retention */
    size_t other_runs;       /* runs judged under another retention */
    int64_t other_min_us;    /* and the range of those retentions */
    int64_t other_max_us;
};

static size_t
fine_index(int64_t delay_us)
{
    uint64_t v = delay_us > 0 ? (uint64_t) delay_us : 0;
    int e;

    if (v < FINE_LINEAR)
        return (size_t) v;
    e = 63 - __builtin_clzll(v);
    return (size_t) (FINE_LINEAR + (e - 8) * FINE_SUB +
                     (int) ((v >> (e - FINE_SUB_BITS)) & (FINE_SUB - 1)));
}

/* The value a bucket stands for: itself in the exact range, otherwise the
 * midpoint (half the bucket width is the worst error either way). */
static int64_t
fine_value(size_t i)
{
    size_t k;
    int e;
    uint64_t m;

    if (i < FINE_LINEAR)
        return (int64_t) i;
    k = i - FINE_LINEAR;
    e = 8 + (int) (k / FINE_SUB);
    m = FINE_SUB + k % FINE_SUB;
    return (int64_t) ((m << (e - FINE_SUB_BITS)) + ((uint64_t) 1 << (e - FINE_SUB_BITS - 1)));
}

static size_t
display_index(int64_t delay_us)
{
    size_t i = NDISPLAY - 1;

    while (i > 0 && delay_us < display_edges[i])
        i--;
    return i;
}

const char *
delay_class_name(DelayClass c)
{
    switch (c)
    {
        case DELAY_ON_TIME:
            return "on_time";
        case DELAY_NEAR_CUTOFF:
            return "near_cutoff";
        case DELAY_EXPIRED:
            return "expired";
    }
    return "?";
}

static bool
delay_class_parse(const char *s, DelayClass *out)
{
    for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
        if (strcmp(s, delay_class_name((DelayClass) c)) == 0)
        {
            *out = (DelayClass) c;
            return true;
        }
    return false;
}

Tracker *
tracker_new(int64_t retention_us, int64_t near_cutoff_us)
{
    Tracker *t = xcalloc(1, sizeof *t);

    t->retention_us = retention_us > 0 ? retention_us : 0;
    t->near_cutoff_us = near_cutoff_us > 0 ? near_cutoff_us : 0;
    t->min_us = INT64_MAX;
    t->max_us = INT64_MIN;
    t->fine = xcalloc(FINE_BUCKETS, sizeof *t->fine);
    for (size_t i = 0; i < NDISPLAY; i++)
    {
        t->display[i].lower_us = display_edges[i];
        t->display[i].upper_us = i + 1 < NDISPLAY ? display_edges[i + 1] : INT64_MAX;
        t->display[i].label = display_labels[i];
    }
    return t;
}

void
tracker_free(Tracker *t)
{
    if (t == NULL)
        return;
    free(t->fine);
    free(t->windows);
    free(t);
}

int64_t
tracker_retention(const Tracker *t)
{
    return t->retention_us;
}

int64_t
tracker_near_cutoff(const Tracker *t)
{
    if (t->near_cutoff_us > 0)
        return t->near_cutoff_us;
    return t->retention_us / 10;
}

DelayClass
tracker_classify(const Tracker *t, int64_t window_upper_us, int64_t now_us, int64_t *time_left_us)
{
    int64_t left;

    if (t->retention_us == 0)
    {
        if (time_left_us)
            *time_left_us = INT64_MAX;
        return DELAY_ON_TIME;
    }
    /* The window retires at upper + retention; computed as upper − (now −
     * retention) so that MAXVALUE bounds saturate instead of wrapping. */
    left = civil_sat_sub(window_upper_us, civil_sat_sub(now_us, t->retention_us));
    if (time_left_us)
        *time_left_us = left;
    if (left <= 0)
        return DELAY_EXPIRED;
    if (left <= tracker_near_cutoff(t))
        return DELAY_NEAR_CUTOFF;
    return DELAY_ON_TIME;
}

/* Copy at most max bytes of ref (a reference, an origin) as valid UTF-8 without NULs:
 * the text ends up in JSON (jansson refuses invalid UTF-8) and in jsonb
 * (which refuses \u0000).  Bad bytes become U+FFFD; a sequence that would
 * not fit is cut whole. */
static void
ref_copy(char *out, size_t max, const char *ref, size_t len, bool *truncated)
{
    static const char repl[] = "\xEF\xBF\xBD";
    const unsigned char *s = (const unsigned char *) ref;
    size_t o = 0;
    size_t i = 0;

    *truncated = false;
    while (i < len)
    {
        size_t n = 0;
        unsigned char b = s[i];

        if (b >= 0x01 && b < 0x80)
            n = 1;
        else if (b >= 0xC2 && b <= 0xDF)
            n = 2;
        else if (b >= 0xE0 && b <= 0xEF)
            n = 3;
        else if (b >= 0xF0 && b <= 0xF4)
            n = 4;
        if (n > 1)
        {
            if (i + n > len)
                n = 0;
            for (size_t k = 1; k < n; k++)
                if ((s[i + k] & 0xC0) != 0x80)
                    n = 0;
            /* Overlong, surrogate and above-U+10FFFF forms. */
            if (n == 3 && ((b == 0xE0 && s[i + 1] < 0xA0) || (b == 0xED && s[i + 1] > 0x9F)))
                n = 0;
            if (n == 4 && ((b == 0xF0 && s[i + 1] < 0x90) || (b == 0xF4 && s[i + 1] > 0x8F)))
                n = 0;
        }
        if (n == 0)
        {
            if (o + 3 > max)
            {
                *truncated = true;
                break;
            }
            memcpy(out + o, repl, 3);
            o += 3;
            i++;
            continue;
        }
        if (o + n > max)
        {
            *truncated = true;
            break;
        }
        memcpy(out + o, s + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
}

/* Whether a delay enters the largest delays (largest_slot gives it a slot). */
static bool
largest_ranks(const Tracker *t, int64_t delay_us)
{
    return t->nlargest < TRACKER_LARGEST || delay_us > t->largest[TRACKER_LARGEST - 1].delay_us;
}

/* Rank among the largest delays; equal delays keep the one seen first, so
 * merging runs in order gives the same list as one long run. */
static TrackerLargest *
largest_slot(Tracker *t, int64_t delay_us)
{
    size_t pos;

    if (!largest_ranks(t, delay_us))
        return NULL;
    pos = t->nlargest < TRACKER_LARGEST ? t->nlargest : TRACKER_LARGEST - 1;
    while (pos > 0 && t->largest[pos - 1].delay_us < delay_us)
        pos--;
    if (t->nlargest < TRACKER_LARGEST)
        t->nlargest++;
    memmove(&t->largest[pos + 1], &t->largest[pos],
            (t->nlargest - 1 - pos) * sizeof t->largest[0]);
    return &t->largest[pos];
}

/* The window [lower, upper), created if new; NULL past the cap. */
static TrackerWindow *
window_slot(Tracker *t, int64_t lower_us, int64_t upper_us)
{
    size_t lo = 0;
    size_t hi = t->nwindows;
    TrackerWindow *w;

    if (t->last_window < t->nwindows && t->windows[t->last_window].lower_us == lower_us &&
        t->windows[t->last_window].upper_us == upper_us)
        return &t->windows[t->last_window];
    while (lo < hi)
    {
        size_t mid = lo + (hi - lo) / 2;
        const TrackerWindow *m = &t->windows[mid];

        if (m->lower_us < lower_us || (m->lower_us == lower_us && m->upper_us < upper_us))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->nwindows && t->windows[lo].lower_us == lower_us &&
        t->windows[lo].upper_us == upper_us)
    {
        t->last_window = lo;
        return &t->windows[lo];
    }
    if (t->nwindows == TRACKER_MAX_WINDOWS)
        return NULL;
    if (t->nwindows == t->cap_windows)
    {
        t->cap_windows = t->cap_windows ? t->cap_windows * 2 : 16;
        t->windows = xrealloc(t->windows, t->cap_windows * sizeof *t->windows);
    }
    memmove(&t->windows[lo + 1], &t->windows[lo], (t->nwindows - lo) * sizeof *t->windows);
    t->nwindows++;
    w = &t->windows[lo];
    memset(w, 0, sizeof *w);
    w->lower_us = lower_us;
    w->upper_us = upper_us;
    w->min_time_left_us = INT64_MAX;
    t->last_window = lo;
    return w;
}

/* A name's text into one of the entry's fields ("" when not known). */
static void
name_copy(char *out, size_t max, const char *text)
{
    bool cut;

    ref_copy(out, max, text ? text : "", text ? strlen(text) : 0, &cut);
}

bool
tracker_ranks(const Tracker *t, int64_t id_us, int64_t insert_us)
{
    return largest_ranks(t, civil_sat_sub(insert_us, id_us));
}

void
tracker_add(Tracker *t, int64_t id_us, int64_t insert_us, DelayClass c, int64_t window_lower_us,
            int64_t window_upper_us, const char *ref, size_t ref_len)
{
    TrackerRowName name = {.ref = ref, .ref_len = ref_len};

    tracker_add_named(t, id_us, insert_us, c, window_lower_us, window_upper_us, &name);
}

/* The texts of an entry from a row's name (NULL: none known). */
static void
largest_name(TrackerLargest *l, const TrackerRowName *name)
{
    static const TrackerRowName none = {0};

    if (name == NULL)
        name = &none;
    ref_copy(l->ref, TRACKER_REF_MAX, name->ref ? name->ref : "", name->ref ? name->ref_len : 0,
             &l->ref_truncated);
    l->ref_truncated |= name->ref_cut;
    l->ref_values = name->ref_values;
    name_copy(l->origin, TRACKER_ORIGIN_MAX, name->origin);
    name_copy(l->id, TRACKER_ID_MAX, name->id);
    l->pending = false;
    l->tag = 0;
}

/* Counts, histograms and the window of one row; its entry among the largest
 * delays (times and class only) when it ranks, else NULL. */
static TrackerLargest *
track_row(Tracker *t, int64_t id_us, int64_t insert_us, DelayClass c, int64_t window_lower_us,
          int64_t window_upper_us)
{
    int64_t delay = civil_sat_sub(insert_us, id_us);
    TrackerLargest *l;
    TrackerWindow *w;

    if ((unsigned) c > DELAY_EXPIRED)
        c = DELAY_ON_TIME;
    t->counts[c]++;
    if (delay < 0)
        t->negative++;
    if (delay < t->min_us)
        t->min_us = delay;
    if (delay > t->max_us)
        t->max_us = delay;
    t->fine[fine_index(delay)]++;
    t->display[display_index(delay)].count++;

    l = largest_slot(t, delay);
    if (l)
    {
        l->delay_us = delay;
        l->id_us = id_us;
        l->insert_us = insert_us;
        l->cls = c;
        l->cls_at_insert = false;
        l->cls_retention_us = 0;
    }

    w = window_slot(t, window_lower_us, window_upper_us);
    if (w == NULL)
    {
        t->untracked_window_rows++;
        return l;
    }
    w->rows[c]++;
    if (t->retention_us > 0)
    {
        int64_t left = civil_sat_sub(civil_sat_add(window_upper_us, t->retention_us), insert_us);

        if (left < w->min_time_left_us)
            w->min_time_left_us = left;
    }
    return l;
}

void
tracker_add_named(Tracker *t, int64_t id_us, int64_t insert_us, DelayClass c,
                  int64_t window_lower_us, int64_t window_upper_us, const TrackerRowName *name)
{
    TrackerLargest *l = track_row(t, id_us, insert_us, c, window_lower_us, window_upper_us);

    if (l)
        largest_name(l, name);
}

void
tracker_add_pending(Tracker *t, int64_t id_us, int64_t insert_us, DelayClass c,
                    int64_t window_lower_us, int64_t window_upper_us, uint64_t tag)
{
    TrackerLargest *l = track_row(t, id_us, insert_us, c, window_lower_us, window_upper_us);

    if (l)
    {
        l->pending = true;
        l->tag = tag;
    }
}

void
tracker_name_pending(Tracker *t, TrackerNameFn name, void *ctx)
{
    for (size_t i = 0; i < t->nlargest; i++)
        if (t->largest[i].pending)
        {
            TrackerRowName n = {0};

            name(ctx, t->largest[i].tag, &n);
            largest_name(&t->largest[i], &n);
        }
}

void
tracker_copy_into(Tracker *dst, const Tracker *src)
{
    if (dst == src)
        return;
    memcpy(dst->counts, src->counts, sizeof dst->counts);
    dst->negative = src->negative;
    dst->min_us = src->min_us;
    dst->max_us = src->max_us;
    memcpy(dst->fine, src->fine, FINE_BUCKETS * sizeof *dst->fine);
    for (size_t i = 0; i < NDISPLAY; i++)
        dst->display[i].count = src->display[i].count;
    memcpy(dst->largest, src->largest, sizeof dst->largest);
    dst->nlargest = src->nlargest;
    if (dst->cap_windows < src->nwindows)
    {
        dst->cap_windows = src->nwindows;
        dst->windows = xrealloc(dst->windows, dst->cap_windows * sizeof *dst->windows);
    }
    if (src->nwindows > 0)
        memcpy(dst->windows, src->windows, src->nwindows * sizeof *dst->windows);
    dst->nwindows = src->nwindows;
    dst->last_window = 0;
    dst->untracked_window_rows = src->untracked_window_rows;
    memcpy(dst->at_insert, src->at_insert, sizeof dst->at_insert);
    dst->other_runs = src->other_runs;
    dst->other_min_us = src->other_min_us;
    dst->other_max_us = src->other_max_us;
}

uint64_t
tracker_count(const Tracker *t, DelayClass c)
{
    return (unsigned) c <= DELAY_EXPIRED ? t->counts[c] : 0;
}

uint64_t
tracker_total(const Tracker *t)
{
    return t->counts[0] + t->counts[1] + t->counts[2] + t->at_insert[0] + t->at_insert[1] +
           t->at_insert[2];
}

uint64_t
tracker_count_at_insert(const Tracker *t, DelayClass c)
{
    return (unsigned) c <= DELAY_EXPIRED ? t->at_insert[c] : 0;
}

bool
tracker_other_retentions(const Tracker *t, size_t *runs, int64_t *min_us, int64_t *max_us)
{
    *runs = t->other_runs;
    *min_us = t->other_min_us;
    *max_us = t->other_max_us;
    return t->other_runs > 0;
}

/* The class of a row of window [lower, upper) inserted at insert_us under t's
 * retention, with the report's horizon: t's near-cutoff if given, otherwise
 * max(retention / 10, the window's length). */
static DelayClass
judge_in_window(const Tracker *t, int64_t lower_us, int64_t upper_us, int64_t insert_us)
{
    int64_t near = t->near_cutoff_us;
    int64_t left;

    if (t->retention_us == 0)
        return DELAY_ON_TIME;
    if (near == 0)
    {
        int64_t len = lower_us == INT64_MIN ? 0 : civil_sat_sub(upper_us, lower_us);

        near = t->retention_us / 10 > len ? t->retention_us / 10 : len;
    }
    left = civil_sat_sub(civil_sat_add(upper_us, t->retention_us), insert_us);
    if (left <= 0)
        return DELAY_EXPIRED;
    return left <= near ? DELAY_NEAR_CUTOFF : DELAY_ON_TIME;
}

uint64_t
tracker_negative(const Tracker *t)
{
    return t->negative;
}

int64_t
tracker_min(const Tracker *t)
{
    return tracker_total(t) ? t->min_us : 0;
}

int64_t
tracker_max(const Tracker *t)
{
    return tracker_total(t) ? t->max_us : 0;
}

/* Nearest rank: the smallest delay with at least p% of the rows at or below
 * it, taken from its bucket and kept within the observed [min, max]. */
int64_t
tracker_percentile(const Tracker *t, double p)
{
    uint64_t n = tracker_total(t);
    uint64_t rank;
    uint64_t seen = 0;
    int64_t v = 0;
    int64_t lo;

    if (n == 0 || !(p > 0))
        return 0;
    if (p >= 100)
        return t->max_us;
    rank = (uint64_t) ceil(p / 100.0 * (double) n);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    for (size_t i = 0; i < FINE_BUCKETS; i++)
    {
        seen += t->fine[i];
        if (seen >= rank)
        {
            v = fine_value(i);
            break;
        }
    }
    lo = t->min_us > 0 ? t->min_us : 0;
    if (v < lo)
        v = lo;
    if (v > t->max_us)
        v = t->max_us;
    return v;
}

size_t
tracker_largest(const Tracker *t, const TrackerLargest **out)
{
    *out = t->largest;
    return t->nlargest;
}

size_t
tracker_windows(const Tracker *t, const TrackerWindow **out)
{
    *out = t->windows;
    return t->nwindows;
}

uint64_t
tracker_untracked_window_rows(const Tracker *t)
{
    return t->untracked_window_rows;
}

size_t
tracker_display(const Tracker *t, const TrackerBucket **out)
{
    *out = t->display;
    return NDISPLAY;
}

/* ------------------------------------------------------------------ JSON */

static json_t *
json_time(int64_t us)
{
    char text[48];

    /* Years 1970..9999 only: MINVALUE/MAXVALUE bounds have no date. */
    if (us < 0 || us >= INT64_C(253402300800000000))
        return json_null();
    civil_format_rfc3339(us, false, text, sizeof text);
    return json_string(text);
}

static json_t *
json_i64(int64_t v)
{
    return json_integer((json_int_t) v);
}

static json_t *
json_u64(uint64_t v)
{
    return json_integer(v > (uint64_t) INT64_MAX ? (json_int_t) INT64_MAX : (json_int_t) v);
}

char *
tracker_to_json(const Tracker *t)
{
    json_t *root = json_object();
    json_t *counts = json_object();
    json_t *delay = json_object();
    json_t *fine = json_object();
    json_t *buckets = json_array();
    json_t *display = json_array();
    json_t *largest = json_array();
    json_t *windows = json_array();
    uint64_t total = tracker_total(t);
    char *text;

    json_object_set_new(root, "format", json_string(FORMAT_NAME));
    json_object_set_new(root, "retention_us", json_i64(t->retention_us));
    json_object_set_new(root, "near_cutoff_us", json_i64(tracker_near_cutoff(t)));
    json_object_set_new(root, "rows", json_u64(total));
    for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
        json_object_set_new(counts, delay_class_name((DelayClass) c), json_u64(t->counts[c]));
    json_object_set_new(root, "counts", counts);
    if (t->other_runs > 0)
    {
        /* merged runs judged under other retentions: counts are judged again
         * under retention_us; what could not be stays apart */
        json_t *o = json_object();
        json_t *ai = json_object();

        json_object_set_new(o, "runs", json_u64(t->other_runs));
        json_object_set_new(o, "retention_us_min", json_i64(t->other_min_us));
        json_object_set_new(o, "retention_us_max", json_i64(t->other_max_us));
        for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
            json_object_set_new(ai, delay_class_name((DelayClass) c), json_u64(t->at_insert[c]));
        json_object_set_new(o, "counts_as_judged_at_insert", ai);
        json_object_set_new(root, "judged_at_insert_under_other_retention", o);
    }
    json_object_set_new(root, "negative_delays", json_u64(t->negative));

    if (total > 0)
    {
        json_object_set_new(delay, "min", json_i64(t->min_us));
        json_object_set_new(delay, "p50", json_i64(tracker_percentile(t, 50)));
        json_object_set_new(delay, "p90", json_i64(tracker_percentile(t, 90)));
        json_object_set_new(delay, "p99", json_i64(tracker_percentile(t, 99)));
        json_object_set_new(delay, "max", json_i64(t->max_us));
    }
    json_object_set_new(root, "delay_us", delay);

    /* Sparse [index, count] pairs: a run touches few buckets. */
    for (size_t i = 0; i < FINE_BUCKETS; i++)
        if (t->fine[i])
        {
            json_t *pair = json_array();
            json_array_append_new(pair, json_integer((json_int_t) i));
            json_array_append_new(pair, json_u64(t->fine[i]));
            json_array_append_new(buckets, pair);
        }
    json_object_set_new(fine, "layout", json_string(FINE_LAYOUT));
    json_object_set_new(fine, "buckets", buckets);
    json_object_set_new(root, "histogram", fine);

    for (size_t i = 0; i < NDISPLAY; i++)
    {
        json_t *b = json_object();
        json_object_set_new(b, "ge_us", json_i64(t->display[i].lower_us));
        if (t->display[i].upper_us != INT64_MAX)
            json_object_set_new(b, "lt_us", json_i64(t->display[i].upper_us));
        json_object_set_new(b, "label", json_string(t->display[i].label));
        json_object_set_new(b, "count", json_u64(t->display[i].count));
        json_array_append_new(display, b);
    }
    json_object_set_new(root, "display", display);

    for (size_t i = 0; i < t->nlargest; i++)
    {
        const TrackerLargest *l = &t->largest[i];
        json_t *o = json_object();

        json_object_set_new(o, "delay_us", json_i64(l->delay_us));
        json_object_set_new(o, "id_us", json_i64(l->id_us));
        json_object_set_new(o, "id_time", json_time(l->id_us));
        json_object_set_new(o, "inserted_us", json_i64(l->insert_us));
        json_object_set_new(o, "inserted_at", json_time(l->insert_us));
        json_object_set_new(o, "class", json_string(delay_class_name(l->cls)));
        if (l->cls_at_insert)
            json_object_set_new(o, "class_as_judged_at_insert_under_us",
                                json_i64(l->cls_retention_us));
        json_object_set_new(o, "origin", l->origin[0] ? json_string(l->origin) : json_null());
        json_object_set_new(o, "id", l->id[0] ? json_string(l->id) : json_null());
        json_object_set_new(o, "ref", json_string(l->ref));
        json_object_set_new(o, "ref_truncated", json_boolean(l->ref_truncated));
        if (l->ref_values)
            json_object_set_new(o, "ref_values", json_true());
        json_array_append_new(largest, o);
    }
    json_object_set_new(root, "largest", largest);

    for (size_t i = 0; i < t->nwindows; i++)
    {
        const TrackerWindow *w = &t->windows[i];
        json_t *o = json_object();

        json_object_set_new(o, "lower_us", json_i64(w->lower_us));
        json_object_set_new(o, "upper_us", json_i64(w->upper_us));
        json_object_set_new(o, "lower", json_time(w->lower_us));
        json_object_set_new(o, "upper", json_time(w->upper_us));
        json_object_set_new(o, "rows", json_u64(w->rows[0] + w->rows[1] + w->rows[2]));
        for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
            json_object_set_new(o, delay_class_name((DelayClass) c), json_u64(w->rows[c]));
        if (w->min_time_left_us != INT64_MAX)
            json_object_set_new(o, "min_time_left_us", json_i64(w->min_time_left_us));
        if (w->not_rejudged)
            json_object_set_new(o, "as_judged_at_insert", json_u64(w->not_rejudged));
        json_array_append_new(windows, o);
    }
    json_object_set_new(root, "windows", windows);
    json_object_set_new(root, "untracked_window_rows", json_u64(t->untracked_window_rows));

    /* jansson's default allocator is malloc, so the caller's free() fits. */
    text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

/* ----------------------------------------------------------------- merge */

/* A JSON number that is an integer (jsonb may print 5 as 5 or, after
 * arithmetic, 5.0; both are accepted). */
static bool
get_i64(const json_t *o, const char *key, int64_t *out)
{
    const json_t *v = json_object_get(o, key);

    if (json_is_integer(v))
    {
        *out = (int64_t) json_integer_value(v);
        return true;
    }
    if (json_is_real(v))
    {
        double d = json_real_value(v);
        if (d != floor(d) || fabs(d) > 9.2e18)
            return false;
        *out = (int64_t) d;
        return true;
    }
    return false;
}

static bool
get_u64(const json_t *o, const char *key, uint64_t *out)
{
    int64_t v;

    if (!get_i64(o, key, &v) || v < 0)
        return false;
    *out = (uint64_t) v;
    return true;
}

static bool
value_i64(const json_t *v, int64_t *out)
{
    if (json_is_integer(v))
    {
        *out = (int64_t) json_integer_value(v);
        return true;
    }
    return false;
}

/* Everything a merge needs, read and checked before t is touched. */
typedef struct Parsed
{
    uint64_t counts[3];
    uint64_t negative;
    int64_t min_us;
    int64_t max_us;
    uint64_t untracked;
    json_t *buckets;
    json_t *display;
    json_t *largest;
    json_t *windows;
} Parsed;

/* An optional text member: absent, null or a string. */
static bool
string_or_null(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    return v == NULL || json_is_null(v) || json_is_string(v);
}

static bool
bad(Err *err, const char *what)
{
    err_set(err, EC_FORMAT, "run statistics are not in v7fill's tracker format: %s", what);
    err_hint(err, "They come from another version of v7fill or were edited by hand.");
    return false;
}

static bool
parse_doc(json_t *root, Parsed *p, Err *err)
{
    const json_t *counts = json_object_get(root, "counts");
    const json_t *delay = json_object_get(root, "delay_us");
    const json_t *fine = json_object_get(root, "histogram");
    const char *format = json_string_value(json_object_get(root, "format"));
    const char *layout;
    uint64_t total;
    size_t i;
    json_t *v;

    memset(p, 0, sizeof p[0]);
    if (!json_is_object(root))
        return bad(err, "not a JSON object");
    if (format == NULL || strcmp(format, FORMAT_NAME) != 0)
        return bad(err, "unknown \"format\"");
    if (!json_is_object(counts))
        return bad(err, "no \"counts\"");
    for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
        if (!get_u64(counts, delay_class_name((DelayClass) c), &p->counts[c]))
            return bad(err, "bad \"counts\"");
    if (json_object_get(root, "negative_delays") &&
        !get_u64(root, "negative_delays", &p->negative))
        return bad(err, "bad \"negative_delays\"");
    if (json_object_get(root, "untracked_window_rows") &&
        !get_u64(root, "untracked_window_rows", &p->untracked))
        return bad(err, "bad \"untracked_window_rows\"");
    total = p->counts[0] + p->counts[1] + p->counts[2];
    if (total > 0 && (!json_is_object(delay) || !get_i64(delay, "min", &p->min_us) ||
                      !get_i64(delay, "max", &p->max_us) || p->min_us > p->max_us))
        return bad(err, "bad \"delay_us\"");
    if (!json_is_object(fine))
        return bad(err, "no \"histogram\"");
    layout = json_string_value(json_object_get(fine, "layout"));
    if (layout == NULL || strcmp(layout, FINE_LAYOUT) != 0)
        return bad(err, "unknown histogram layout");
    p->buckets = json_object_get(fine, "buckets");
    if (!json_is_array(p->buckets))
        return bad(err, "bad histogram buckets");
    {
        uint64_t sum = 0;

        json_array_foreach(p->buckets, i, v)
        {
            int64_t idx;
            int64_t cnt;

            if (!json_is_array(v) || json_array_size(v) != 2 ||
                !value_i64(json_array_get(v, 0), &idx) || !value_i64(json_array_get(v, 1), &cnt) ||
                idx < 0 || idx >= FINE_BUCKETS || cnt < 0)
                return bad(err, "bad histogram bucket");
            sum += (uint64_t) cnt;
        }
        if (sum != total)
            return bad(err, "histogram does not add up to the counts");
    }
    p->display = json_object_get(root, "display");
    if (!json_is_array(p->display))
        return bad(err, "no \"display\" histogram");
    json_array_foreach(p->display, i, v)
    {
        int64_t ge;
        uint64_t cnt;

        if (!json_is_object(v) || !get_i64(v, "ge_us", &ge) || !get_u64(v, "count", &cnt))
            return bad(err, "bad display bucket");
    }
    p->largest = json_object_get(root, "largest");
    if (!json_is_array(p->largest))
        return bad(err, "no \"largest\"");
    json_array_foreach(p->largest, i, v)
    {
        int64_t x;
        DelayClass c;
        const char *cls = json_string_value(json_object_get(v, "class"));

        if (!json_is_object(v) || !get_i64(v, "delay_us", &x) || !get_i64(v, "id_us", &x) ||
            !get_i64(v, "inserted_us", &x) || cls == NULL || !delay_class_parse(cls, &c) ||
            !json_is_string(json_object_get(v, "ref")) || !string_or_null(v, "origin") ||
            !string_or_null(v, "id"))
            return bad(err, "bad entry in \"largest\"");
    }
    p->windows = json_object_get(root, "windows");
    if (!json_is_array(p->windows))
        return bad(err, "no \"windows\"");
    json_array_foreach(p->windows, i, v)
    {
        int64_t x;
        uint64_t u;

        if (!json_is_object(v) || !get_i64(v, "lower_us", &x) || !get_i64(v, "upper_us", &x))
            return bad(err, "bad window");
        for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
            if (!get_u64(v, delay_class_name((DelayClass) c), &u))
                return bad(err, "bad window counts");
        if (json_object_get(v, "min_time_left_us") && !get_i64(v, "min_time_left_us", &x))
            return bad(err, "bad window time left");
    }
    return true;
}

/* Judging a run's rows again under t's retention (tracker_merge_run). */
typedef struct Rejudge
{
    bool on;
    int64_t ret_us;  /* the run's retention */
    int64_t from_us; /* its first insert */
    int64_t to_us;   /* its last insert */
} Rejudge;

/* The window of a run's document holding id_us; false when none does. */
static bool
doc_window_of(const json_t *windows, int64_t id_us, int64_t *lower, int64_t *upper)
{
    size_t i;
    json_t *v;

    json_array_foreach(windows, i, v)
    {
        if (get_i64(v, "lower_us", lower) && get_i64(v, "upper_us", upper) && id_us >= *lower &&
            id_us < *upper)
            return true;
    }
    return false;
}

/* Rows of one window of a judged-again run: one class when its earliest and
 * latest insert agree; else they keep their classes, counted apart. */
static void
rejudge_window(Tracker *t, const Rejudge *rj, TrackerWindow *w, int64_t lower, int64_t upper,
               int64_t *left, const uint64_t rows[3])
{
    int64_t last = rj->to_us;
    uint64_t n = rows[0] + rows[1] + rows[2];
    DelayClass first;

    if (*left != INT64_MAX && rj->ret_us > 0)
        last = civil_sat_sub(civil_sat_add(upper, rj->ret_us), *left);
    first = judge_in_window(t, lower, upper, rj->from_us);
    *left = t->retention_us > 0 ? civil_sat_sub(civil_sat_add(upper, t->retention_us), last)
                                : INT64_MAX;
    if (w != NULL && first == judge_in_window(t, lower, upper, last))
    {
        t->counts[first] += n;
        w->rows[first] += n;
        return;
    }
    for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
        t->at_insert[c] += rows[c];
    if (w != NULL)
        w->not_rejudged += n;
    else
        t->untracked_window_rows += n;
}

static bool
merge(Tracker *t, const char *json, Rejudge *rj, Err *err)
{
    json_error_t jerr;
    json_t *root = json_loads(json, 0, &jerr);
    Parsed p;
    size_t i;
    json_t *v;
    uint64_t rest[3];

    if (root == NULL)
    {
        err_set(err, EC_FORMAT, "run statistics are not valid JSON: %s (line %d, column %d)",
                jerr.text, jerr.line, jerr.column);
        return false;
    }
    if (!parse_doc(root, &p, err))
    {
        json_decref(root);
        return false;
    }
    if (p.counts[0] + p.counts[1] + p.counts[2] == 0)
    {
        json_decref(root);
        return true;
    }

    if (rj->on)
    {
        int64_t near = -1;

        rj->ret_us = -1;
        (void) get_i64(root, "retention_us", &rj->ret_us);
        (void) get_i64(root, "near_cutoff_us", &near);
        rj->on = rj->ret_us != t->retention_us || (t->near_cutoff_us > 0 && near != t->near_cutoff_us);
    }
    if (rj->on)
    {
        if (rj->ret_us < 0)
            rj->ret_us = 0;
        if (t->other_runs++ == 0 || rj->ret_us < t->other_min_us)
            t->other_min_us = rj->ret_us;
        if (rj->ret_us > t->other_max_us)
            t->other_max_us = rj->ret_us;
    }
    /* Judged again: counts come window by window; rows left over are those of
     * windows the run did not track. */
    for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
    {
        rest[c] = p.counts[c];
        if (!rj->on)
            t->counts[c] += p.counts[c];
    }
    t->negative += p.negative;
    t->untracked_window_rows += p.untracked;
    if (p.min_us < t->min_us)
        t->min_us = p.min_us;
    if (p.max_us > t->max_us)
        t->max_us = p.max_us;
    json_array_foreach(p.buckets, i, v)
    {
        int64_t idx = 0;
        int64_t cnt = 0;

        (void) value_i64(json_array_get(v, 0), &idx);
        (void) value_i64(json_array_get(v, 1), &cnt);
        t->fine[idx] += (uint64_t) cnt;
    }
    /* Display buckets by their lower edge; an edge this version does not
     * have goes to the bucket that contains it. */
    json_array_foreach(p.display, i, v)
    {
        int64_t ge = 0;
        uint64_t cnt = 0;

        (void) get_i64(v, "ge_us", &ge);
        (void) get_u64(v, "count", &cnt);
        t->display[display_index(ge)].count += cnt;
    }
    json_array_foreach(p.largest, i, v)
    {
        int64_t delay = 0;
        TrackerLargest *l;

        (void) get_i64(v, "delay_us", &delay);
        l = largest_slot(t, delay);
        if (l)
        {
            const char *ref = json_string_value(json_object_get(v, "ref"));
            bool cut;

            int64_t lower;
            int64_t upper;

            l->delay_us = delay;
            (void) get_i64(v, "id_us", &l->id_us);
            (void) get_i64(v, "inserted_us", &l->insert_us);
            (void) delay_class_parse(json_string_value(json_object_get(v, "class")), &l->cls);
            l->cls_at_insert = false;
            l->cls_retention_us = 0;
            l->pending = false;
            l->tag = 0;
            if (rj->on && doc_window_of(p.windows, l->id_us, &lower, &upper))
                l->cls = judge_in_window(t, lower, upper, l->insert_us);
            else if (rj->on)
            {
                l->cls_at_insert = true;
                l->cls_retention_us = rj->ret_us;
            }
            ref_copy(l->ref, TRACKER_REF_MAX, ref, json_string_length(json_object_get(v, "ref")),
                     &cut);
            l->ref_truncated = cut || json_is_true(json_object_get(v, "ref_truncated"));
            l->ref_values = json_is_true(json_object_get(v, "ref_values"));
            name_copy(l->origin, TRACKER_ORIGIN_MAX,
                      json_string_value(json_object_get(v, "origin")));
            name_copy(l->id, TRACKER_ID_MAX, json_string_value(json_object_get(v, "id")));
        }
    }
    json_array_foreach(p.windows, i, v)
    {
        int64_t lower = 0;
        int64_t upper = 0;
        int64_t left = INT64_MAX;
        uint64_t rows[3] = {0, 0, 0};
        TrackerWindow *w;

        (void) get_i64(v, "lower_us", &lower);
        (void) get_i64(v, "upper_us", &upper);
        for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
            (void) get_u64(v, delay_class_name((DelayClass) c), &rows[c]);
        if (json_object_get(v, "min_time_left_us"))
            (void) get_i64(v, "min_time_left_us", &left);
        w = window_slot(t, lower, upper);
        if (rj->on)
        {
            for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
                rest[c] -= rows[c] < rest[c] ? rows[c] : rest[c];
            rejudge_window(t, rj, w, lower, upper, &left, rows);
        }
        else if (w == NULL)
            t->untracked_window_rows += rows[0] + rows[1] + rows[2];
        else
            for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED; c++)
                w->rows[c] += rows[c];
        if (w != NULL && left < w->min_time_left_us)
            w->min_time_left_us = left;
    }
    for (int c = DELAY_ON_TIME; c <= DELAY_EXPIRED && rj->on; c++)
        t->at_insert[c] += rest[c];
    json_decref(root);
    return true;
}

bool
tracker_merge_json(Tracker *t, const char *json, Err *err)
{
    Rejudge rj = {0};

    return merge(t, json, &rj, err);
}

bool
tracker_merge_run(Tracker *t, const char *json, int64_t insert_from_us, int64_t insert_to_us,
                  Err *err)
{
    Rejudge rj = {.on = true, .from_us = insert_from_us, .to_us = insert_to_us};

    return merge(t, json, &rj, err);
}
