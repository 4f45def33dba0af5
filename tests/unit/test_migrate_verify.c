/*
 * Unit tests for migrate_verify.c's output: the verdict table (columns by
 * characters, one line per check even when a detail holds a newline, the
 * verdict line) and the JSON.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/migrate_verify.h"

static VerifyCheck checks[2] = {
    {"public.ünï", "rows", 343, 341, true, "2 rejected with a reason"},
    {"public.o", "values", 1, 1, false, "changed 1 (legacy keys \"42\")\n"},
};

static char *
printed(const VerifyReport *r)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);

    assert_non_null(f);
    verify_report_print(f, r);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void
test_print_one_line_per_check_and_the_verdict(void **state)
{
    VerifyReport r = {checks, 2, false};
    char *out = printed(&r);

    (void) state;
    assert_string_equal(out,
                        "TABLE       CHECK         SOURCE        TARGET  VERDICT   DETAIL\n"
                        "public.ünï  rows             343           341  OK        2 rejected with a reason\n"
                        "public.o    values             1             1  MISMATCH  changed 1 (legacy keys \"42\") \n"
                        "verdict: MISMATCH (1 of 2 checks)\n");
    free(out);
    r.n = 1;
    r.ok = true;
    out = printed(&r);
    assert_non_null(strstr(out, "\nverdict: OK\n"));
    free(out);
}

static void
test_json_escapes_and_keeps_numbers(void **state)
{
    VerifyReport r = {checks, 2, false};
    Buf b;

    (void) state;
    buf_init(&b);
    assert_true(verify_report_json(&r, &b));
    assert_string_equal(b.data,
                        "{\"ok\":false,\"checks\":[{\"table\":\"public.ünï\",\"check\":\"rows\","
                        "\"source\":343,\"target\":341,\"ok\":true,\"detail\":\"2 rejected with a "
                        "reason\"},{\"table\":\"public.o\",\"check\":\"values\",\"source\":1,"
                        "\"target\":1,\"ok\":false,\"detail\":\"changed 1 (legacy keys "
                        "\\\"42\\\")\\u000a\"}]}");
    buf_free(&b);
}

static void
test_keys_intersect_keeps_the_common_keys(void **state)
{
    int64_t a[] = {-5, 1, 3, 7, 9, 12};
    const int64_t b[] = {1, 2, 7, 12, 40};
    size_t n;

    (void) state;
    n = verify_keys_intersect(a, 6, b, 5);
    assert_int_equal(3, n);
    assert_int_equal(1, a[0]);
    assert_int_equal(7, a[1]);
    assert_int_equal(12, a[2]);
    assert_int_equal(0, verify_keys_intersect(a, 3, b, 0));
}

/* A lagging check settles when no key still differs; a key still differing is named; a check
 * that lag cannot explain (map) stays a mismatch. */
static void
test_settle_the_lagging_checks_only(void **state)
{
    VerifyCheck c[3] = {
        {"public.o", "values", 10, 8, false, "changed 2 (legacy keys 4, 9)"},
        {"public.o", "rows", 10, 9, false, ""},
        {"public.o", "map", 9, 9, true, ""},
    };
    VerifyReport r = {c, 3, false, NULL, 0};
    const int64_t still[] = {9};

    (void) state;
    verify_report_settle(&r, NULL, 0, 2);
    assert_true(r.ok);
    assert_true(c[0].ok && c[1].ok);
    assert_non_null(strstr(c[0].detail, "settled: differed only while the capture lagged (2 rounds)"));

    c[0].ok = c[1].ok = false;
    c[0].detail[0] = '\0';
    verify_report_settle(&r, still, 1, 3);
    assert_false(r.ok);
    assert_false(c[0].ok);
    assert_non_null(strstr(c[0].detail, "still differing: 1 (legacy keys 9)"));

    c[0].ok = c[1].ok = true;
    c[2].ok = false;
    verify_report_settle(&r, NULL, 0, 3);
    assert_false(r.ok);
    assert_false(c[2].ok);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print_one_line_per_check_and_the_verdict),
        cmocka_unit_test(test_json_escapes_and_keeps_numbers),
        cmocka_unit_test(test_keys_intersect_keeps_the_common_keys),
        cmocka_unit_test(test_settle_the_lagging_checks_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
