/*
 * Unit tests for the clocks' arithmetic of stream_observe.c: a server's
 * offset taken at the middle of the round trip, and the apply lag on the
 * target's clock with the source's offset to it taken out, whatever the
 * skew of either server or of this host.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "v7fill/stream_observe.h"

#define S 1000000 /* µs in a second */

static void
test_offset_at_the_middle_of_the_round_trip(void **state)
{
    (void) state;
    /* asked at 100 s, answered at 100.2 s (this host): the server said 105.1 s */
    assert_int_equal(stream_clock_offset_at(105 * (int64_t) S + 100000, 100 * (int64_t) S,
                                            100 * (int64_t) S + 200000),
                     5 * S);
    /* a server behind this host */
    assert_int_equal(stream_clock_offset_at(90 * (int64_t) S, 100 * (int64_t) S,
                                            100 * (int64_t) S + 2 * S),
                     -11 * S);
    /* today's epoch in µs: no overflow in the middle */
    assert_int_equal(stream_clock_offset_at(INT64_C(1796000000000000) + 7,
                                            INT64_C(1796000000000000) - 10,
                                            INT64_C(1796000000000000) + 10),
                     7);
}

/* A commit made real_ago seconds before now, timestamped on the source's
 * clock, seen from this host with the servers' given offsets. */
static double
lag_of(int64_t real_ago_us, int64_t source_off_us, int64_t target_off_us)
{
    const int64_t host_now = INT64_C(1796000000000000);
    int64_t commit_source = host_now - real_ago_us + source_off_us;

    return stream_lag_seconds(host_now, source_off_us, target_off_us, commit_source);
}

static void
test_lag_is_the_real_delay_whatever_the_skews(void **state)
{
    (void) state;
    assert_float_equal(lag_of(2 * S, 0, 0), 2.0, 1e-9);
    /* the source 30 s ahead of this host: no 30 s of phantom lag */
    assert_float_equal(lag_of(2 * S, 30 * S, 0), 2.0, 1e-9);
    /* the source 30 s behind: the lag is not hidden (clamped to 0) either */
    assert_float_equal(lag_of(2 * S, -30 * S, 0), 2.0, 1e-9);
    /* the target's clock off too, and the two servers off from each other */
    assert_float_equal(lag_of(2 * S, 30 * S, -45 * S), 2.0, 1e-9);
    assert_float_equal(lag_of(1500000, -7 * S, 12 * S), 1.5, 1e-9);
}

static void
test_lag_never_negative_nor_without_a_commit(void **state)
{
    (void) state;
    /* a commit "in the future" after a measurement error: 0, not negative */
    assert_float_equal(lag_of(-S, 5 * S, 0), 0.0, 0);
    /* nothing applied yet */
    assert_float_equal(stream_lag_seconds(INT64_C(1796000000000000), 5 * S, 3 * S, 0), 0.0, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offset_at_the_middle_of_the_round_trip),
        cmocka_unit_test(test_lag_is_the_real_delay_whatever_the_skews),
        cmocka_unit_test(test_lag_never_negative_nor_without_a_commit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
