/*
 * Time for measuring and waiting: a monotonic clock in milliseconds, and the
 * absolute deadline pthread_cond_timedwait takes (CLOCK_REALTIME, the
 * default clock of a condition variable).
 */
#ifndef V7FILL_MONOTIME_H
#define V7FILL_MONOTIME_H

#include <stdint.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC (an arbitrary origin: for differences only). */
int64_t monotime_ms(void);
/* The same clock in seconds, to the nanosecond (elapsed times, rates). */
double monotime_s(void);

/* *out: now on CLOCK_REALTIME plus ms (>= 0), normalized. */
void monotime_deadline(struct timespec *out, int64_t ms);

#endif /* V7FILL_MONOTIME_H */
