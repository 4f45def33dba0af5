/*
 * monotime.c: the clocks of measuring and waiting (monotime.h).
 */
#include "v7fill/monotime.h"

int64_t
monotime_ms(void)
{
    struct timespec ts;

    (void) clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double
monotime_s(void)
{
    struct timespec ts;

    (void) clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

void
monotime_deadline(struct timespec *out, int64_t ms)
{
    (void) clock_gettime(CLOCK_REALTIME, out);
    out->tv_sec += (time_t) (ms / 1000);
    out->tv_nsec += (long) (ms % 1000) * 1000000L;
    if (out->tv_nsec >= 1000000000L)
    {
        out->tv_sec++;
        out->tv_nsec -= 1000000000L;
    }
}
