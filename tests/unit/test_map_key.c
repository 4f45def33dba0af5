/*
 * The typed key map's key (sink.h lookup_map_key_*): the integer with its sign
 * bit flipped, big-endian, then zeros, so that the 16 bytes sort as the keys;
 * the parse that rejects a row with a reason naming the column.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/sink.h"

/* What the last parse gave. */
static int64_t v;
static uint8_t key[REF_HASH_LEN];
static char reason[200];

static bool
parse(const char *text, int bits)
{
    return lookup_map_key_parse("id", text, strlen(text), false, bits, &v, key, reason,
                                sizeof reason);
}

static void
test_key_bytes_sort_as_the_integers(void **state)
{
    static const int64_t keys[] = {INT64_MIN, INT64_MIN + 1, -4294967296, -65536, -256, -1, 0,
                                   1,         255,           256,          65535,  INT64_MAX - 1,
                                   INT64_MAX};
    uint8_t prev[REF_HASH_LEN];
    uint8_t zeros[8] = {0};

    (void) state;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    {
        lookup_map_key_encode(keys[i], key);
        assert_memory_equal(zeros, key + 8, 8);
        assert_true(lookup_map_key_decode(key) == keys[i]);
        if (i > 0)
            assert_true(memcmp(prev, key, REF_HASH_LEN) < 0);
        memcpy(prev, key, sizeof prev);
    }
}

static void
test_sign_bit_flipped_big_endian(void **state)
{
    static const uint8_t zero[8] = {0x80, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t minus_one[8] = {0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t x0102[8] = {0x80, 0, 0, 0, 0, 0, 0x01, 0x02};

    (void) state;
    lookup_map_key_encode(0, key);
    assert_memory_equal(zero, key, 8);
    lookup_map_key_encode(-1, key);
    assert_memory_equal(minus_one, key, 8);
    lookup_map_key_encode(0x0102, key);
    assert_memory_equal(x0102, key, 8);
}

static void
test_range_per_type(void **state)
{
    (void) state;
    assert_true(parse("32767", 16));
    assert_true(v == 32767);
    assert_true(parse("-32768", 16));
    assert_true(v == -32768);
    assert_false(parse("32768", 16));
    assert_string_equal("key column id: out of range for smallint: '32768'", reason);
    assert_false(parse("-32769", 16));
    assert_true(parse("2147483647", 32));
    assert_true(parse("-2147483648", 32));
    assert_true(v == INT32_MIN);
    assert_false(parse("2147483648", 32));
    assert_string_equal("key column id: out of range for integer: '2147483648'", reason);
    assert_true(parse("9223372036854775807", 64));
    assert_true(v == INT64_MAX);
    assert_true(parse("-9223372036854775808", 64));
    assert_true(v == INT64_MIN);
    assert_true(lookup_map_key_decode(key) == INT64_MIN);
    assert_false(parse("9223372036854775808", 64));
    assert_string_equal("key column id: out of range for bigint: '9223372036854775808'", reason);
    assert_false(parse("99999999999999999999999", 64));
    assert_true(parse("+42", 64));
    assert_true(v == 42);
    assert_true(parse("4611686018427387904", 64));
    assert_true(v == INT64_C(4611686018427387904));
}

static void
test_rejection_text(void **state)
{
    (void) state;
    assert_false(parse("abc", 64));
    assert_string_equal("key column id: not an integer: 'abc'", reason);
    assert_false(parse("", 64));
    assert_string_equal("key column id: not an integer: ''", reason);
    assert_false(parse("-", 64));
    assert_false(parse("1.5", 64));
    assert_false(parse(" 1", 64));
    assert_false(parse("1e3", 64));
    assert_false(lookup_map_key_parse("legacy", "7", 1, true, 64, &v, key, reason, sizeof reason));
    assert_string_equal("key column legacy: NULL (the key map needs an integer)", reason);
}

static void
test_type_names(void **state)
{
    (void) state;
    assert_int_equal(16, lookup_map_type_bits("smallint"));
    assert_int_equal(32, lookup_map_type_bits("integer"));
    assert_int_equal(64, lookup_map_type_bits("bigint"));
    assert_int_equal(64, lookup_map_type_bits("int8"));
    assert_int_equal(0, lookup_map_type_bits("numeric"));
    assert_int_equal(0, lookup_map_type_bits(NULL));
    assert_string_equal("integer", lookup_map_type_name(32));
    assert_string_equal("legacy_id", lookup_key_column(LOOKUP_LEGACY_ID));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_bytes_sort_as_the_integers),
        cmocka_unit_test(test_sign_bit_flipped_big_endian),
        cmocka_unit_test(test_range_per_type),
        cmocka_unit_test(test_rejection_text),
        cmocka_unit_test(test_type_names),
    };
    return cmocka_run_group_tests_name("map_key", tests, NULL, NULL);
}
