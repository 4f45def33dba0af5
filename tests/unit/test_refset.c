/*
 * The set plan keeps of the references it counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/refset.h"

/* A key led by a 6-byte integer, as ordered lookup keys are, the rest fixed:
 * only the leading bytes differ between keys. */
static void
ordered_key(uint64_t n, uint8_t key[REFSET_KEY_LEN])
{
    memset(key, 0xab, REFSET_KEY_LEN);
    for (int i = 0; i < 6; i++)
        key[i] = (uint8_t) (n >> (8 * (5 - i)));
}

static void
test_a_key_is_new_once(void **state)
{
    RefSet *s = refset_new();
    uint8_t a[REFSET_KEY_LEN];
    uint8_t b[REFSET_KEY_LEN];

    (void) state;
    ordered_key(1, a);
    ordered_key(2, b);
    assert_true(refset_add(s, a));
    assert_false(refset_add(s, a));
    assert_true(refset_add(s, b));
    assert_false(refset_add(s, b));
    assert_int_equal(2, refset_count(s));
    refset_free(s);
}

static void
test_the_all_zero_key_is_a_key(void **state)
{
    RefSet *s = refset_new();
    uint8_t zero[REFSET_KEY_LEN] = {0};

    (void) state;
    assert_true(refset_add(s, zero));
    assert_false(refset_add(s, zero));
    assert_int_equal(1, refset_count(s));
    refset_free(s);
}

static void
test_many_ordered_keys_survive_growth_within_the_documented_memory(void **state)
{
    RefSet *s = refset_new();
    uint8_t k[REFSET_KEY_LEN];
    const uint64_t n = 300000;

    (void) state;
    for (uint64_t i = 0; i < n; i++)
    {
        ordered_key(i * 7, k);
        assert_true(refset_add(s, k));
    }
    for (uint64_t i = 0; i < n; i++)
    {
        ordered_key(i * 7, k);
        assert_false(refset_add(s, k));
        ordered_key(i * 7 + 3, k);
        assert_true(refset_add(s, k));
    }
    assert_int_equal(2 * n, refset_count(s));
    assert_true(refset_bytes(s) <= 43 * refset_count(s) + 64);
    refset_free(s);
}

/* The writers' in-flight sets: asked, emptied for the next batch, reused. */
static void
test_has_answers_without_adding_and_clear_empties(void **state)
{
    RefSet *s = refset_new();
    uint8_t a[REFSET_KEY_LEN];
    uint8_t b[REFSET_KEY_LEN];
    uint8_t zero[REFSET_KEY_LEN] = {0};

    (void) state;
    ordered_key(1, a);
    ordered_key(2, b);
    assert_true(refset_add(s, a));
    assert_true(refset_add(s, zero));
    assert_true(refset_has(s, a));
    assert_true(refset_has(s, zero));
    assert_false(refset_has(s, b));
    assert_int_equal(2, refset_count(s));
    refset_clear(s);
    assert_int_equal(0, refset_count(s));
    assert_false(refset_has(s, a));
    assert_false(refset_has(s, zero));
    assert_true(refset_add(s, a));
    refset_free(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_key_is_new_once),
        cmocka_unit_test(test_the_all_zero_key_is_a_key),
        cmocka_unit_test(test_many_ordered_keys_survive_growth_within_the_documented_memory),
        cmocka_unit_test(test_has_answers_without_adding_and_clear_empties),
    };
    return cmocka_run_group_tests_name("refset", tests, NULL, NULL);
}
