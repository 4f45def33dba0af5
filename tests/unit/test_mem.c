/* Unit tests: src/mem.c's JSON string, the quarantine's and the reports' only encoder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/mem.h"

static void
json_of(Buf *b, const char *p, size_t n)
{
    buf_reset(b);
    buf_put_json_string(b, p, n);
}

static void
test_plain_and_empty(void **state)
{
    Buf b;

    (void) state;
    buf_init(&b);
    json_of(&b, "", 0);
    assert_string_equal(b.data, "\"\"");
    json_of(&b, NULL, 0);
    assert_string_equal(b.data, "\"\"");
    json_of(&b, "note 42, é\x7f", strlen("note 42, é\x7f"));
    assert_string_equal(b.data, "\"note 42, é\x7f\"");
    assert_int_equal(b.len, strlen(b.data));
    buf_free(&b);
}

/* Escapes at the start, in the middle, in a row and at the end: the plain runs
 * between them are kept whole and in order. */
static void
test_escapes_between_runs(void **state)
{
    static const char in[] = "\"a\\b\"\"c\n\x01z\x1f";
    Buf b;

    (void) state;
    buf_init(&b);
    json_of(&b, in, sizeof in - 1);
    assert_string_equal(b.data, "\"\\\"a\\\\b\\\"\\\"c\\u000a\\u0001z\\u001f\"");
    buf_free(&b);
}

/* n bytes, not up to a NUL: a NUL inside is escaped, bytes after n are not read. */
static void
test_counted_bytes(void **state)
{
    static const char in[] = {'x', '\0', 'y', 'Q'};
    Buf b;

    (void) state;
    buf_init(&b);
    json_of(&b, in, 3);
    assert_string_equal(b.data, "\"x\\u0000y\"");
    buf_free(&b);
}

/* Appends to what the buffer holds; a long value grows it. */
static void
test_appends_and_grows(void **state)
{
    char big[70000];
    Buf b;

    (void) state;
    memset(big, 'v', sizeof big);
    big[35000] = '"';
    buf_init(&b);
    buf_puts(&b, "{\"k\":");
    buf_put_json_string(&b, big, sizeof big);
    buf_putc(&b, '}');
    assert_int_equal(b.len, 5 + 1 + sizeof big + 1 + 1 + 1);
    assert_memory_equal(b.data, "{\"k\":\"vvv", 9);
    assert_memory_equal(b.data + 6 + 35000, "\\\"v", 3);
    assert_string_equal(b.data + b.len - 3, "v\"}");
    buf_free(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_empty),
        cmocka_unit_test(test_escapes_between_runs),
        cmocka_unit_test(test_counted_bytes),
        cmocka_unit_test(test_appends_and_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
