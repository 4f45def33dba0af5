/*
 * 128-bit key sort: agrees with a plain comparison sort on random keys, on
 * keys sharing their high bytes (a batch's ids), on runs of equal hi and on
 * duplicates; items travel with their keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/sortkey.h"

static uint64_t rng = 88172645463325252ULL;

static uint64_t
next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int
qcmp(const void *a, const void *b)
{
    return sortkey_cmp(a, b);
}

/* Sort keys[0..n) both ways and compare; every item must keep its key. */
static void
check_sort(SortKey *keys, size_t n)
{
    SortKey *expect = malloc((n ? n : 1) * sizeof *expect);
    SortKey *tmp = malloc((n ? n : 1) * sizeof *tmp);

    for (size_t i = 0; i < n; i++)
        keys[i].item = (void *) (uintptr_t) (keys[i].hi ^ (keys[i].lo * 3));
    memcpy(expect, keys, n * sizeof *keys);
    qsort(expect, n, sizeof *expect, qcmp);
    sortkey_sort(keys, tmp, n);
    for (size_t i = 0; i < n; i++)
    {
        assert_int_equal(keys[i].hi, expect[i].hi);
        assert_int_equal(keys[i].lo, expect[i].lo);
        assert_ptr_equal(keys[i].item, (void *) (uintptr_t) (keys[i].hi ^ (keys[i].lo * 3)));
    }
    free(expect);
    free(tmp);
}

static void
test_random_keys(void **state)
{
    (void) state;
    for (size_t n = 0; n < 3000; n = n * 2 + 1)
    {
        SortKey *k = malloc((n ? n : 1) * sizeof *k);
        for (size_t i = 0; i < n; i++)
        {
            k[i].hi = next_rand();
            k[i].lo = next_rand();
        }
        check_sort(k, n);
        free(k);
    }
}

static void
test_shared_prefix(void **state)
{
    /* ids of one batch: the same first bytes (time), differing low bits */
    SortKey k[5000];

    (void) state;
    for (size_t i = 0; i < 5000; i++)
    {
        k[i].hi = 0x019a2b3c00007000ULL | (next_rand() & 0xfff);
        k[i].lo = next_rand();
    }
    check_sort(k, 5000);
}

static void
test_equal_hi_runs_and_duplicates(void **state)
{
    /* a date-only time column: thousands of keys with the same hi */
    SortKey k[4000];

    (void) state;
    for (size_t i = 0; i < 4000; i++)
    {
        k[i].hi = i % 3 == 0 ? 42 : 7;
        k[i].lo = next_rand() % 500; /* duplicates too */
    }
    check_sort(k, 4000);
}

static void
test_ties_in_the_radix_bytes(void **state)
{
    /* Only the four most significant bytes of hi that vary get radix passes.
     * Here they are bytes 7..4, and one key makes 6..4 vary while all others
     * have them zero: most keys tie there and differ only further down, in
     * bytes 1..0 of hi and in lo. */
    SortKey k[3000];

    (void) state;
    for (size_t i = 0; i < 3000; i++)
    {
        k[i].hi = ((uint64_t) (i % 4) << 56) | (next_rand() & 0xffff);
        k[i].lo = next_rand() % 7;
    }
    k[1234].hi |= 0x00ffffff00000000ULL;
    check_sort(k, 3000);
}

static void
test_load_is_byte_order(void **state)
{
    uint8_t a[16] = {0x00, 0xff};
    uint8_t b[16] = {0x01, 0x00};
    uint8_t c[16] = {0x01, 0x00, 0, 0, 0, 0, 0, 0, 0x80};
    SortKey ka = sortkey_load(a, NULL);
    SortKey kb = sortkey_load(b, NULL);
    SortKey kc = sortkey_load(c, NULL);

    (void) state;
    assert_true(sortkey_cmp(&ka, &kb) < 0);
    assert_true(sortkey_cmp(&kb, &kc) < 0);
    assert_int_equal(sortkey_cmp(&kc, &kc), 0);
    assert_int_equal(kc.lo, 0x8000000000000000ULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_keys),
        cmocka_unit_test(test_shared_prefix),
        cmocka_unit_test(test_equal_hi_runs_and_duplicates),
        cmocka_unit_test(test_ties_in_the_radix_bytes),
        cmocka_unit_test(test_load_is_byte_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
