/*
 * replconn's pure parts: LSN text and the 34-byte Standby Status Update.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/replconn.h"

static void
test_lsn_text_round_trips(void **state)
{
    static const uint64_t lsns[] = {0, 0x15177D8, UINT64_C(0x100000000), UINT64_C(0xFFFFFFFF00000001),
                                    UINT64_MAX};
    (void) state;
    for (size_t i = 0; i < sizeof lsns / sizeof lsns[0]; i++)
    {
        char text[32];
        uint64_t back = 42;

        replconn_lsn_format(lsns[i], text, sizeof text);
        assert_true(replconn_lsn_parse(text, &back));
        assert_true(back == lsns[i]);
    }
    {
        char text[32];
        replconn_lsn_format(UINT64_C(0x10000000A), text, sizeof text);
        assert_string_equal(text, "1/A");
    }
}

static void
test_lsn_parse_takes_server_forms_and_rejects_the_rest(void **state)
{
    static const char *const bad[] = {"", "0", "/", "0/", "/0", "1/2/3", "-1/0", "0/-1", "x/0",
                                      "0/0 ", " 0/0", "100000000/0", "0/100000000", "+1/0"};
    uint64_t v = 0;

    (void) state;
    assert_true(replconn_lsn_parse("16/B374D848", &v));
    assert_true(v == UINT64_C(0x16B374D848));
    assert_true(replconn_lsn_parse("0/0", &v));
    assert_true(v == 0);
    assert_true(replconn_lsn_parse("ffffffff/ffffffff", &v));
    assert_true(v == UINT64_MAX);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
        v = 7;
        assert_false(replconn_lsn_parse(bad[i], &v));
        assert_true(v == 7);
    }
    assert_false(replconn_lsn_parse(NULL, &v));
}

/* 'r', write, flush, apply, clock: big-endian; the reply flag last. */
static void
test_status_update_layout(void **state)
{
    unsigned char m[34];
    static const unsigned char want[34] = {
        'r',  0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* write */
        0x00, 0x00, 0x00, 0x00, 0x16, 0xB3, 0x74, 0xD8,       /* flush */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,       /* apply */
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE,       /* clock -2 */
        0x01};

    (void) state;
    assert_int_equal(replconn_status_encode(m, UINT64_C(0x0102030405060708), 0x16B374D8, 0, -2,
                                            true),
                     34);
    assert_memory_equal(m, want, 34);
    replconn_status_encode(m, 0, 0, 0, 0, false);
    assert_int_equal(m[33], 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lsn_text_round_trips),
        cmocka_unit_test(test_lsn_parse_takes_server_forms_and_rejects_the_rest),
        cmocka_unit_test(test_status_update_layout),
    };
    return cmocka_run_group_tests_name("replconn", tests, NULL, NULL);
}
