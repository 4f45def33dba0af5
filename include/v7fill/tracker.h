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
 * delays with their source references, rows and near-cutoff rows per window.
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

uint64_t tracker_count(const Tracker *t, DelayClass c);
/* Delay percentile (0 < p <= 100) in µs; 0 when empty. */
int64_t tracker_percentile(const Tracker *t, double p);
int64_t tracker_min(const Tracker *t);
int64_t tracker_max(const Tracker *t);

/* The run's statistics as JSON (jansson); caller frees. */
char *tracker_to_json(const Tracker *t);

#endif /* V7FILL_TRACKER_H */
