/*
 * UUIDv7 layout, bounds, text form, version checks and keyed/random bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "v7fill/civil.h"
#include "v7fill/uuid7.h"

static void
assert_floor(int year, int month, const char *expected)
{
    Err err = {0};
    Uuid u;
    char text[UUID_TEXT_SIZE];
    int64_t us = civil_days_from_date(year, month, 1) * US_PER_DAY;

    assert_true(uuid7_floor(us, &u, &err));
    uuid_format(&u, text);
    assert_string_equal(text, expected);
}

static void
test_floor_of_month_starts_matches_known_bounds(void **state)
{
    (void) state;
    assert_floor(2026, 7, "019f1af9-b400-7000-8000-000000000000");
    assert_floor(2026, 8, "019fba9e-d800-7000-8000-000000000000");
    assert_floor(2026, 9, "01a05a43-fc00-7000-8000-000000000000");
    assert_floor(2026, 10, "01a0f4c2-c400-7000-8000-000000000000");
}

static void
test_bare_floor_has_version_and_variant_zero(void **state)
{
    Err err = {0};
    Uuid u;
    char text[UUID_TEXT_SIZE];
    (void) state;

    assert_true(uuid7_floor_bare(civil_days_from_date(2026, 7, 1) * US_PER_DAY, &u, &err));
    uuid_format(&u, text);
    assert_string_equal(text, "019f1af9-b400-0000-0000-000000000000");
}

static void
test_rfc9562_example_carries_its_milliseconds(void **state)
{
    Err err = {0};
    Uuid u;
    const char *ex = "017F22E2-79B0-7CC3-98C4-DC0C0C07398F";
    char text[UUID_TEXT_SIZE];
    (void) state;

    assert_true(uuid_parse(ex, strlen(ex), &u, &err));
    assert_int_equal(uuid7_ms(&u), INT64_C(0x017F22E279B0));
    assert_int_equal(uuid_version(&u), 7);
    assert_true(uuid_variant_rfc(&u));
    uuid_format(&u, text);
    assert_string_equal(text, "017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
}

static void
test_sub_millisecond_fraction_round_trips_for_every_microsecond(void **state)
{
    Err err = {0};
    int64_t base = civil_days_from_date(2026, 7, 1) * US_PER_DAY + 123000;
    Uuid prev;
    (void) state;

    for (int f = 0; f < 1000; f++)
    {
        Uuid u;
        assert_true(uuid7_from_us(base + f, UINT64_MAX, &u, &err));
        assert_int_equal(uuid7_rand_a(&u), (unsigned) (f * 4096 / 1000));
        assert_int_equal(uuid7_us(&u), base + f);
        assert_int_equal(uuid7_ms(&u), (base + f) / 1000);
        if (f > 0)
            assert_true(uuid_compare(&prev, &u) < 0); /* ids of one ms sort by time */
        prev = u;
    }
}

static void
test_rand_a_beyond_minted_range_stays_in_its_millisecond(void **state)
{
    Err err = {0};
    Uuid u;
    const char *text = "019f1af9-b400-7fff-8000-000000000000"; /* rand_a = 4095 */
    (void) state;

    assert_true(uuid_parse(text, strlen(text), &u, &err));
    assert_int_equal(uuid7_rand_a(&u), 4095);
    assert_int_equal(uuid7_us(&u), uuid7_ms(&u) * 1000 + 999);
}

static void
test_minted_id_has_version_variant_and_caller_bits(void **state)
{
    Err err = {0};
    Uuid u;
    uint64_t lo = 0;
    (void) state;

    assert_true(uuid7_from_us(1, UINT64_C(0x123456789abcdef0), &u, &err));
    assert_int_equal(uuid_version(&u), 7);
    assert_true(uuid_variant_rfc(&u));
    for (int i = 8; i < 16; i++)
        lo = (lo << 8) | u.b[i];
    assert_int_equal(lo & UUID7_RAND_MASK, UINT64_C(0x123456789abcdef0) & UUID7_RAND_MASK);
    assert_true(uuid7_check(&u, &err));
}

static void
test_times_outside_48_bit_range_are_errors(void **state)
{
    Err err = {0};
    Uuid u;
    (void) state;

    assert_false(uuid7_from_us(-1, 0, &u, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_non_null(strstr(err.msg, "before 1970"));
    assert_non_null(strstr(err.msg, "1969-12-31T23:59:59.999999Z"));
    assert_false(uuid7_floor(UUID7_MAX_US + 1, &u, &err));
    assert_non_null(strstr(err.msg, "48-bit"));
    assert_true(uuid7_floor(UUID7_MAX_US, &u, &err));
    assert_int_equal(uuid7_ms(&u), UUID7_MAX_MS);
    assert_true(uuid7_floor(0, &u, &err));
    assert_int_equal(uuid7_ms(&u), 0);
}

static void
test_uuid4_is_rejected_naming_its_version(void **state)
{
    Err err = {0};
    Uuid u;
    const char *v4 = "f47ac10b-58cc-4372-a567-0e02b2c3d479";
    (void) state;

    assert_true(uuid_parse(v4, strlen(v4), &u, &err));
    assert_false(uuid7_check(&u, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_non_null(strstr(err.msg, "not a UUIDv7 (version 4)"));

    const char *nil = "00000000-0000-0000-0000-000000000000";
    assert_true(uuid_parse(nil, strlen(nil), &u, &err));
    assert_false(uuid7_check(&u, &err));
    assert_non_null(strstr(err.msg, "nil UUID"));

    const char *badvar = "019f1af9-b400-7000-c000-000000000000";
    assert_true(uuid_parse(badvar, strlen(badvar), &u, &err));
    assert_false(uuid7_check(&u, &err));
    assert_non_null(strstr(err.msg, "variant"));
}

/* The forms PostgreSQL's uuid input accepts, one value. */
static void
test_every_form_postgresql_accepts_reads_the_same_value(void **state)
{
    static const char *forms[] = {
        "019f1af9-b400-7abc-8def-0123456789ab",
        "019F1AF9-B400-7ABC-8DEF-0123456789AB",
        "019f1af9b4007abc8def0123456789ab",
        "{019f1af9-b400-7abc-8def-0123456789ab}",
        "{019f1af9b4007abc8def0123456789ab}",
        "019f-1af9-b400-7abc-8def-0123-4567-89ab",
        "019f1af9-b4007abc-8def0123-456789ab",
    };
    Uuid want;
    Err err = {0};
    (void) state;

    assert_true(uuid_parse(forms[0], strlen(forms[0]), &want, &err));
    for (size_t i = 1; i < sizeof forms / sizeof forms[0]; i++)
    {
        Uuid u;
        if (!uuid_parse(forms[i], strlen(forms[i]), &u, &err))
            fail_msg("\"%s\": %s", forms[i], err.msg);
        assert_memory_equal(u.b, want.b, 16);
    }
}

static void
test_malformed_text_is_rejected_with_the_text_quoted(void **state)
{
    static const char *bad[] = {
        "019f1af9-b400-7000-8000-00000000000",
        "019f1af9b4007000800000000000000",
        "{019f1af9-b400-7000-8000-000000000000",
        "019f1af9-b400-7000-8000-000000000000}",
        "-019f1af9-b400-7000-8000-000000000000",
        "019f1af9-b400-7000-8000-000000000000-",
        "019f1af9--b400-7000-8000-000000000000",
        "019-f1af9-b400-7000-8000-000000000000",
        "019f1af9-b400-7000-8000-0000000000000",
        "019f1af9-b400-7000-8000-00000000000g",
        "019f1af9+b400-7000-8000-000000000000",
        "",
    };
    (void) state;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
        Err err = {0};
        Uuid u;
        assert_false(uuid_parse(bad[i], strlen(bad[i]), &u, &err));
        assert_int_equal(err.code, EC_FORMAT);
        assert_non_null(strstr(err.msg, "invalid UUID"));
    }
}

static void
test_keyed_bits_are_reproducible_and_depend_on_key_and_reference(void **state)
{
    Err err = {0};
    IdKeyer *k1;
    IdKeyer *k1b;
    IdKeyer *k2;
    uint64_t a, b, c, d;
    const uint8_t key1[32] = {1, 2, 3};
    const uint8_t key2[32] = {1, 2, 4};
    (void) state;

    assert_true(id_keyer_new(key1, sizeof key1, &k1, &err));
    assert_true(id_keyer_new(key1, sizeof key1, &k1b, &err));
    assert_true(id_keyer_new(key2, sizeof key2, &k2, &err));
    assert_true(id_keyer_bits(k1, "orders:1", 8, &a, &err));
    assert_true(id_keyer_bits(k1b, "orders:1", 8, &b, &err));
    assert_true(id_keyer_bits(k2, "orders:1", 8, &c, &err));
    assert_true(id_keyer_bits(k1, "orders:2", 8, &d, &err));
    assert_int_equal(a, b);
    assert_int_not_equal(a, c);
    assert_int_not_equal(a, d);
    assert_true(a <= UUID7_RAND_MASK);
    /* Reusing the keyer gives the same answer again (contexts are reset per call). */
    assert_true(id_keyer_bits(k1, "orders:1", 8, &b, &err));
    assert_int_equal(a, b);
    id_keyer_free(k1);
    id_keyer_free(k1b);
    id_keyer_free(k2);
}

static void
test_keyed_hmac_matches_rfc4231_test_case_2(void **state)
{
    /* RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?" */
    static const uint8_t expected[32] = {
        0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
        0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
        0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43,
    };
    Err err = {0};
    IdKeyer *k;
    uint8_t mac[32];
    const char *data = "what do ya want for nothing?";
    (void) state;

    assert_true(id_keyer_new((const uint8_t *) "Jefe", 4, &k, &err));
    assert_true(id_keyer_hmac(k, data, strlen(data), mac, &err));
    assert_memory_equal(mac, expected, 32);
    id_keyer_free(k);
}

static void
test_keyed_hmac_accepts_keys_longer_than_a_block(void **state)
{
    /* RFC 4231 test case 6: 131 bytes of 0xaa, "Test Using Larger Than Block-Size Key - Hash Key First" */
    static const uint8_t expected[32] = {
        0x60, 0xe4, 0x31, 0x59, 0x1e, 0xe0, 0xb6, 0x7f, 0x0d, 0x8a, 0x26,
        0xaa, 0xcb, 0xf5, 0xb7, 0x7f, 0x8e, 0x0b, 0xc6, 0x21, 0x37, 0x28,
        0xc5, 0x14, 0x05, 0x46, 0x04, 0x0f, 0x0e, 0xe3, 0x7f, 0x54,
    };
    uint8_t key[131];
    Err err = {0};
    IdKeyer *k;
    uint8_t mac[32];
    const char *data = "Test Using Larger Than Block-Size Key - Hash Key First";
    (void) state;

    memset(key, 0xaa, sizeof key);
    assert_true(id_keyer_new(key, sizeof key, &k, &err));
    assert_true(id_keyer_hmac(k, data, strlen(data), mac, &err));
    assert_memory_equal(mac, expected, 32);
    id_keyer_free(k);
}

static void
test_keyed_hmac_matches_openssl_at_every_length(void **state)
{
    /* References that fit one block with SHA-256's padding (up to 55 bytes)
     * take a shorter path than longer ones: both must agree with OpenSSL's
     * own HMAC, at and around the boundary and across several blocks. */
    uint8_t key[32];
    uint8_t msg[300];
    Err err = {0};
    IdKeyer *k;
    (void) state;

    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (uint8_t) (i * 7 + 1);
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t) (i * 31 + 3);
    assert_true(id_keyer_new(key, sizeof key, &k, &err));
    for (size_t len = 0; len <= sizeof msg; len++)
    {
        uint8_t mac[32];
        uint8_t want[EVP_MAX_MD_SIZE];
        unsigned int want_len = 0;

        assert_true(id_keyer_hmac(k, msg, len, mac, &err));
        assert_non_null(HMAC(EVP_sha256(), key, sizeof key, msg, len, want, &want_len));
        assert_int_equal(want_len, 32);
        assert_memory_equal(mac, want, 32);
        /* in pieces (one byte, then the rest in 3 uneven parts): the same */
        id_keyer_hmac_begin(k);
        for (size_t at = 0, step = 1; at < len; at += step, step = step * 3 + 2)
            id_keyer_hmac_add(k, msg + at, step < len - at ? step : len - at);
        assert_true(id_keyer_hmac_end(k, mac, &err));
        assert_memory_equal(mac, want, 32);
    }
    id_keyer_free(k);
}

static void
test_random_bits_differ_and_stay_within_62_bits(void **state)
{
    Err err = {0};
    IdRandom *r = id_random_new();
    uint64_t prev = 0;
    int same = 0;
    uint64_t ored = 0;
    (void) state;

    /* More than one 4 KiB block, to cross a refill. */
    for (int i = 0; i < 2000; i++)
    {
        uint64_t v;
        assert_true(id_random_bits(r, &v, &err));
        assert_true(v <= UUID7_RAND_MASK);
        if (v == prev)
            same++;
        prev = v;
        ored |= v;
    }
    assert_int_equal(same, 0);
    assert_int_equal(ored, UUID7_RAND_MASK); /* every bit position seen set */
    id_random_free(r);
}

static void
test_next_in_one_tick_increases_and_keeps_the_time(void **state)
{
    Err err = {0};
    Uuid prev;
    Uuid u;
    int64_t at = civil_days_from_date(2026, 7, 1) * US_PER_DAY + 123;
    /* the largest draws: biggest first tail and biggest step */
    uint64_t big = UUID7_RAND_MASK;
    (void) state;

    assert_true(uuid7_next(NULL, at, big, &prev, &err));
    for (int i = 0; i < 1000; i++)
    {
        /* every other draw small, so a random tail below the previous one is tried */
        assert_true(uuid7_next(&prev, at, i % 2 ? big : (uint64_t) i, &u, &err));
        assert_true(uuid_compare(&prev, &u) < 0);
        assert_true(uuid7_check(&u, &err));
        assert_int_equal(uuid7_us(&u), at);
        prev = u;
    }
}

static void
test_next_in_a_new_tick_draws_a_fresh_tail(void **state)
{
    Err err = {0};
    Uuid prev;
    Uuid u;
    Uuid fresh;
    int64_t at = civil_days_from_date(2026, 7, 1) * US_PER_DAY;
    (void) state;

    assert_true(uuid7_next(NULL, at, UUID7_RAND_MASK, &prev, &err));
    assert_true(uuid7_next(&prev, at + 1, 5, &u, &err));
    assert_true(uuid7_from_us(at + 1, 5, &fresh, &err));
    assert_memory_equal(u.b, fresh.b, 16);
    assert_true(uuid_compare(&prev, &u) < 0);
}

static void
test_next_refuses_when_the_tail_is_used_up(void **state)
{
    Err err = {0};
    Uuid last;
    Uuid u;
    char text[UUID_TEXT_SIZE];
    (void) state;

    /* the largest id of its tick: nothing can follow it in the same tick */
    assert_true(uuid7_from_us(1000, UUID7_RAND_MASK, &last, &err));
    assert_false(uuid7_next(&last, 1000, 0, &u, &err));
    assert_int_equal(err.code, EC_LIMIT);
    uuid_format(&last, text);
    assert_non_null(strstr(err.msg, text));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floor_of_month_starts_matches_known_bounds),
        cmocka_unit_test(test_bare_floor_has_version_and_variant_zero),
        cmocka_unit_test(test_rfc9562_example_carries_its_milliseconds),
        cmocka_unit_test(test_sub_millisecond_fraction_round_trips_for_every_microsecond),
        cmocka_unit_test(test_rand_a_beyond_minted_range_stays_in_its_millisecond),
        cmocka_unit_test(test_minted_id_has_version_variant_and_caller_bits),
        cmocka_unit_test(test_times_outside_48_bit_range_are_errors),
        cmocka_unit_test(test_uuid4_is_rejected_naming_its_version),
        cmocka_unit_test(test_every_form_postgresql_accepts_reads_the_same_value),
        cmocka_unit_test(test_malformed_text_is_rejected_with_the_text_quoted),
        cmocka_unit_test(test_keyed_bits_are_reproducible_and_depend_on_key_and_reference),
        cmocka_unit_test(test_keyed_hmac_matches_rfc4231_test_case_2),
        cmocka_unit_test(test_keyed_hmac_accepts_keys_longer_than_a_block),
        cmocka_unit_test(test_keyed_hmac_matches_openssl_at_every_length),
        cmocka_unit_test(test_random_bits_differ_and_stay_within_62_bits),
        cmocka_unit_test(test_next_in_one_tick_increases_and_keeps_the_time),
        cmocka_unit_test(test_next_in_a_new_tick_draws_a_fresh_tail),
        cmocka_unit_test(test_next_refuses_when_the_tail_is_used_up),
    };
    return cmocka_run_group_tests_name("uuid7", tests, NULL, NULL);
}
