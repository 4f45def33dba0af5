/*
 * Unit tests for monotime.c: the monotonic milliseconds and the deadline of a
 * timed wait.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "v7fill/monotime.h"

static int64_t
realtime_ms(void)
{
    struct timespec ts;

    (void) clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
test_mono_ms_moves_forward_with_a_sleep(void **state)
{
    struct timespec ten = {0, 10 * 1000000L};
    int64_t a, b;

    (void) state;
    a = monotime_ms();
    (void) nanosleep(&ten, NULL);
    b = monotime_ms();
    assert_true(b - a >= 10);
    assert_true(b - a < 5000);
}

/* Every remainder of a second, including one that carries into tv_sec:
 * normalized, and ms ahead of the realtime clock. */
static void
test_deadline_is_normalized_and_ms_ahead(void **state)
{
    static const int64_t cases[] = {0, 1, 999, 1000, 1001, 1999, 2500, 123456};

    (void) state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
        struct timespec d;
        int64_t before = realtime_ms(), at;

        monotime_deadline(&d, cases[i]);
        at = (int64_t) d.tv_sec * 1000 + d.tv_nsec / 1000000;
        assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
        assert_true(at >= before + cases[i]);
        assert_true(at <= realtime_ms() + cases[i] + 1);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mono_ms_moves_forward_with_a_sleep),
        cmocka_unit_test(test_deadline_is_normalized_and_ms_ahead),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
