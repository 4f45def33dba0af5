/*
 * COPY text encoding: every byte that needs an escape is escaped wherever it
 * falls (the scan goes eight bytes at a time), everything else is copied.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/copy_encode.h"
#include "v7fill/mem.h"

/* The rule, one byte at a time. */
static void
reference(Buf *out, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        switch (p[i])
        {
            case '\\':
                buf_append(out, "\\\\", 2);
                break;
            case '\t':
                buf_append(out, "\\t", 2);
                break;
            case '\n':
                buf_append(out, "\\n", 2);
                break;
            case '\r':
                buf_append(out, "\\r", 2);
                break;
            default:
                buf_putc(out, p[i]);
        }
}

static void
check(const char *p, size_t n)
{
    Buf got;
    Buf want;

    buf_init(&got);
    buf_init(&want);
    buf_append(&got, "x", 1); /* appends after what is there */
    buf_append(&want, "x", 1);
    copy_encode_field(&got, p, n, false);
    reference(&want, p, n);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);
    buf_free(&got);
    buf_free(&want);
}

static void
test_specials_at_every_position(void **state)
{
    const char specials[] = {'\\', '\t', '\n', '\r'};
    char s[40];

    (void) state;
    for (size_t len = 0; len <= sizeof s; len++)
        for (size_t at = 0; at < len; at++)
            for (size_t k = 0; k < sizeof specials; k++)
            {
                memset(s, 'a', len);
                s[at] = specials[k];
                check(s, len);
            }
}

static void
test_random_bytes(void **state)
{
    uint32_t x = 12345;
    char s[300];

    (void) state;
    for (int round = 0; round < 2000; round++)
    {
        size_t len = (size_t) (round % 300);
        for (size_t i = 0; i < len; i++)
        {
            x = x * 1103515245u + 12345u;
            /* bytes near the specials and high bytes, where a word trick could slip */
            if ((x >> 16) % 5 == 0)
                s[i] = "\\\t\n\r\x80\x08\x0b\x5b\x5d\xff"[(x >> 8) % 10];
            else
                s[i] = (char) (x >> 20);
        }
        check(s, len);
    }
}

static void
test_null_and_empty(void **state)
{
    Buf b;

    (void) state;
    buf_init(&b);
    copy_encode_field(&b, NULL, 0, true);
    assert_string_equal(b.data, "\\N");
    buf_reset(&b);
    copy_encode_field(&b, "", 0, false);
    assert_int_equal(b.len, 0);
    buf_free(&b);
}

/* Decoding gives back what was encoded, field by field, NULLs included
 * ("\\N" as a value is not a NULL). */
static void
test_decode_round_trip(void **state)
{
    const char *values[] = {"plain", "", NULL, "a\\b\tc\nd\re", "\\N", "\\", "x\t"};
    const size_t n = sizeof values / sizeof values[0];
    Buf line;
    Buf out;
    size_t off = 0;

    (void) state;
    buf_init(&line);
    buf_init(&out);
    for (size_t i = 0; i < n; i++)
    {
        if (i > 0)
            copy_encode_sep(&line);
        copy_encode_field(&line, values[i], values[i] ? strlen(values[i]) : 0, values[i] == NULL);
    }
    copy_encode_eol(&line);
    for (size_t i = 0; i < n; i++)
    {
        bool is_null;

        off += copy_decode_field(line.data + off, line.len - off, &out, &is_null);
        assert_int_equal(is_null, values[i] == NULL);
        if (values[i])
        {
            assert_int_equal(out.len, strlen(values[i]));
            assert_memory_equal(out.data, values[i], out.len);
        }
    }
    assert_int_equal(off, line.len);
    buf_free(&line);
    buf_free(&out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_specials_at_every_position),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_null_and_empty),
        cmocka_unit_test(test_decode_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
