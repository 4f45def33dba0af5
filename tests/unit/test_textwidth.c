/*
 * Unit tests for textwidth.c: columns of UTF-8 text and padding by columns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "v7fill/textwidth.h"

static void
test_width_counts_characters_not_bytes(void **state)
{
    (void) state;
    assert_int_equal(text_width(""), 0);
    assert_int_equal(text_width("events__2026_07"), 15);
    assert_int_equal(text_width("--\xc3\xbcn\xc3\xaf"), 5);       /* --ünï */
    assert_int_equal(text_width("\xe2\x82\xac"), 1);              /* € */
    assert_int_equal(text_width("e\xcc\x81"), 1);                 /* e + combining acute */
    assert_int_equal(text_width("\xe6\x97\xa5\xe6\x9c\xac"), 4);  /* 日本: wide */
    assert_int_equal(text_width("a\xff" "b"), 3);                 /* a bad byte: one column */
    assert_int_equal(text_width("a\xc3"), 2);                     /* cut sequence at the end */
}

static void
test_pad_fills_columns_and_cuts_at_a_character(void **state)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);

    (void) state;
    assert_non_null(f);
    text_pad(f, "\xc3\xbcn\xc3\xaf", 5, -1); /* ünï + 2 spaces */
    fputc('|', f);
    text_pad(f, "\xc3\xbcn\xc3\xafx", 4, 2); /* cut to ün, padded to 4 */
    fputc('|', f);
    text_pad(f, "\xe6\x97\xa5\xe6\x9c\xac", 3, 3); /* 日 only: 本 would need a 4th column */
    fputc('|', f);
    assert_int_equal(fclose(f), 0);
    assert_string_equal(buf, "\xc3\xbcn\xc3\xaf  |\xc3\xbcn  |\xe6\x97\xa5 |");
    free(buf);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_width_counts_characters_not_bytes),
        cmocka_unit_test(test_pad_fills_columns_and_cuts_at_a_character),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
