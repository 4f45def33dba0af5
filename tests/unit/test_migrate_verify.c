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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print_one_line_per_check_and_the_verdict),
        cmocka_unit_test(test_json_escapes_and_keeps_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
