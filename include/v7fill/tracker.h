/*
 * Delay tracking: for every row, the delay between the time its id carries
 * and the moment it was inserted, classified against the table's retention.
 *
 * Retention rule (pg_partman's): a window is retired once its upper bound is
 * older than now - retention.  A row is
 *   expired      when its window is retired or would be at once
 *                (upper <= now - retention);
 *   near cutoff  when its window retires within near_cutoff
 *                (upper - (now - retention) <= near_cutoff);
 *   on time      otherwise (and always, when there is no retention).
 *
 * Aggregation is in memory and bounded: counts per class, a log-spaced delay
 * histogram (percentiles from it, within 1% relative error), the N largest
 * delays with their origins, ids and source references, rows and near-cutoff
 * rows per window.
 * One JSON document per run is stored in v7fill.run.stats and merged by the
 * report.
 */
#ifndef V7FILL_TRACKER_H
#define V7FILL_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"

typedef enum DelayClass
{
    DELAY_ON_TIME = 0,
    DELAY_NEAR_CUTOFF,
    DELAY_EXPIRED,
} DelayClass;

typedef struct Tracker Tracker;

/* retention_us 0 = no retention.  near_cutoff_us 0 = default: 10% of the
 * retention (callers raise it to at least one window). */
Tracker *tracker_new(int64_t retention_us, int64_t near_cutoff_us);
void tracker_free(Tracker *t);

int64_t tracker_retention(const Tracker *t);
int64_t tracker_near_cutoff(const Tracker *t);

/* Classify a row whose window ends at window_upper_us, inserted at now_us;
 * *time_left_us (may be NULL) = time until the window retires (negative when
 * past; INT64_MAX without retention). */
DelayClass tracker_classify(const Tracker *t, int64_t window_upper_us, int64_t now_us,
                            int64_t *time_left_us);

/* Record one row: id time, insert time, class, its window, its source
 * reference (copied only if it ranks among the largest delays). */
void tracker_add(Tracker *t, int64_t id_us, int64_t insert_us, DelayClass c,
                 int64_t window_lower_us, int64_t window_upper_us, const char *ref, size_t ref_len);

/* What names a row among the largest delays: where it came from, its id,
 * its reference as a person reads it.  Texts are copied (cut to the sizes of
 * TrackerLargest); NULL = not known. */
typedef struct TrackerRowName
{
    const char *origin; /* "orders.csv:12", as the source's origin hook formats it */
    const char *id;     /* the row's id as text */
    const char *ref;
    size_t ref_len;
    bool ref_cut;    /* ref is the start of a longer reference */
    bool ref_values; /* ref is the record's values as CSV (the default reference) */
} TrackerRowName;

/* Whether a row of this id time inserted at insert_us would enter the
 * largest delays now: a comparison, so that callers format a row's name only
 * for the rows that rank (then tracker_add_named, before any other add). */
bool tracker_ranks(const Tracker *t, int64_t id_us, int64_t insert_us);
/* tracker_add with the row's name (name NULL: nothing known). */
void tracker_add_named(Tracker *t, int64_t id_us, int64_t insert_us, DelayClass c,
                       int64_t window_lower_us, int64_t window_upper_us,
                       const TrackerRowName *name);

/* Naming deferred to the end of a batch, so that rows arriving in rising
 * delay (a file exported newest first: every row ranks, then drops out) are
 * not named only to be pushed out: tracker_add_pending records the row and,
 * if it ranks, keeps `tag` (the caller's handle, e.g. its index in the
 * batch) in its entry; tracker_name_pending then calls name() once for each
 * entry still waiting, which points out's texts at buffers of its own
 * (copied before the next call).  Call it before the tags mean nothing. */
typedef void (*TrackerNameFn)(void *ctx, uint64_t tag, TrackerRowName *out);
void tracker_add_pending(Tracker *t, int64_t id_us, int64_t insert_us, DelayClass c,
                         int64_t window_lower_us, int64_t window_upper_us, uint64_t tag);
void tracker_name_pending(Tracker *t, TrackerNameFn name, void *ctx);

/* dst's aggregates (everything tracker_add and the merges change: counts,
 * histograms, largest delays, windows) become src's; dst's retention
 * settings stay.  A copy taken before rows are added and copied back after
 * takes those rows out exactly (a rolled-back transaction's). */
void tracker_copy_into(Tracker *dst, const Tracker *src);

uint64_t tracker_count(const Tracker *t, DelayClass c);
/* Delay percentile (0 < p <= 100) in µs; 0 when empty. */
int64_t tracker_percentile(const Tracker *t, double p);
int64_t tracker_min(const Tracker *t);
int64_t tracker_max(const Tracker *t);

/* The run's statistics as JSON (jansson); caller frees. */
char *tracker_to_json(const Tracker *t);

/* ------------------------------------------------------------------------
 * Added for the report: read access to the aggregates, and merging of the
 * JSON documents of many runs.
 */

#define TRACKER_LARGEST 10  /* largest delays kept, with their references */
#define TRACKER_REF_MAX 200 /* bytes of a reference kept (cut at a UTF-8 boundary) */
#define TRACKER_ORIGIN_MAX 200 /* bytes of an origin kept (same) */
#define TRACKER_ID_MAX 40      /* bytes of an id's text kept */

/* One of the largest delays. */
typedef struct TrackerLargest
{
    int64_t delay_us;
    int64_t id_us;
    int64_t insert_us;
    DelayClass cls;
    /* cls is the class judged at insert under cls_retention_us (another
     * retention than the tracker's): it could not be judged again */
    bool cls_at_insert;
    int64_t cls_retention_us;
    bool ref_truncated;               /* the reference was longer than TRACKER_REF_MAX */
    char ref[TRACKER_REF_MAX + 1];    /* valid UTF-8, no NUL inside (U+FFFD replaces bad bytes) */
    bool ref_values;                  /* ref is the record's values as CSV */
    /* Where the row came from ("orders.csv:12") and its id; "" = not
     * recorded (runs of versions before they were).  Valid UTF-8 as ref. */
    char origin[TRACKER_ORIGIN_MAX + 1];
    char id[TRACKER_ID_MAX + 1];
    bool pending; /* added by tracker_add_pending, not named yet */
    uint64_t tag; /* its tag then */
} TrackerLargest;

/* Rows per window, by class.  min_time_left_us: the smallest time left (window
 * retirement − insert) any of its rows had when it was added; INT64_MAX
 * without retention. */
typedef struct TrackerWindow
{
    int64_t lower_us;
    int64_t upper_us;
    uint64_t rows[3]; /* indexed by DelayClass */
    int64_t min_time_left_us;
    uint64_t not_rejudged; /* rows not in rows[]: see tracker_merge_run */
} TrackerWindow;

/* A bucket of the coarse display histogram: delays in [lower_us, upper_us)
 * (the first bucket also holds negative delays, the last has upper INT64_MAX). */
typedef struct TrackerBucket
{
    int64_t lower_us;
    int64_t upper_us;
    const char *label; /* its lower edge: "<1ms", "1ms", "10ms", ..., "1h", "1d", "30d", "365d" */
    uint64_t count;
} TrackerBucket;

/* Rows of all classes, those not judged again (tracker_merge_run) included. */
uint64_t tracker_total(const Tracker *t);
/* Rows whose id time was after their insert time (clock ahead); counted as
 * delay 0 in the histograms and percentiles, exact in min. */
uint64_t tracker_negative(const Tracker *t);

/* The largest delays, largest first (at most TRACKER_LARGEST); borrowed. */
size_t tracker_largest(const Tracker *t, const TrackerLargest **out);
/* The windows rows went to, by lower bound; borrowed.  The number of windows
 * is capped (TRACKER_MAX_WINDOWS in tracker.c); rows of windows beyond the cap
 * are counted by tracker_untracked_window_rows. */
size_t tracker_windows(const Tracker *t, const TrackerWindow **out);
uint64_t tracker_untracked_window_rows(const Tracker *t);
/* The display histogram (its bucket count is fixed); borrowed. */
size_t tracker_display(const Tracker *t, const TrackerBucket **out);

/* Add the statistics of one run (a document from tracker_to_json, possibly
 * re-serialised by jsonb) into t: counts, histograms, largest delays and
 * windows add up; t's retention settings are kept.  A document that is not
 * v7fill's tracker format → EC_FORMAT, t unchanged. */
V7FILL_MUST_CHECK bool tracker_merge_json(Tracker *t, const char *json, Err *err);

/* The same for a run whose rows were all inserted within [insert_from_us,
 * insert_to_us], and whose classes must be those of t's retention.  A run that
 * judged its rows under another retention (or another given near-cutoff
 * horizon) is judged again, window by window: the horizon is t's near-cutoff
 * if given, else max(retention / 10, the window's length), as the report's;
 * the latest insert into a window is known exactly (its min_time_left_us),
 * the earliest is insert_from_us.  When both give one class, the window's
 * rows take it; otherwise (the class changes during the run), and for rows of
 * untracked windows, the rows keep the class judged at insert and are counted
 * apart (tracker_count_at_insert).  The largest delays are judged again from
 * their own insert time and the window of the run holding their id time. */
V7FILL_MUST_CHECK bool tracker_merge_run(Tracker *t, const char *json, int64_t insert_from_us,
                                         int64_t insert_to_us, Err *err);

/* Rows of merged runs that kept the class judged at insert under another
 * retention (see tracker_merge_run), by that class; not in tracker_count. */
uint64_t tracker_count_at_insert(const Tracker *t, DelayClass c);
/* Runs judged under another retention than t's, and the smallest and largest
 * of those retentions (0 = none); false when there were none. */
bool tracker_other_retentions(const Tracker *t, size_t *runs, int64_t *min_us, int64_t *max_us);

const char *delay_class_name(DelayClass c); /* "on_time", "near_cutoff", "expired" */

#endif /* V7FILL_TRACKER_H */
