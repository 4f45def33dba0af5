/*
 * Records kept past their source's next call (record_hold.h): the copy owns
 * its bytes, NULLs, unchanged flags and old fields as they were.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/record_hold.h"

static Field
text(char *s)
{
    Field f = {s, strlen(s), false, false};

    return f;
}

static void
test_copies_outlive_the_source_buffers(void **state)
{
    char a[] = "018f0000-0000-7000-8000-000000000001", b[] = "42", c[] = "";
    Field fields[4] = {text(a), text(b), {NULL, 0, true, false}, text(c)};
    Field old[4] = {text(b), {NULL, 0, true, false}, {NULL, 0, true, false}, {NULL, 0, true, false}};
    Record rec = {0};
    RecordHold h = {0};
    Record got;

    (void) state;
    fields[3].unchanged = true;
    rec.op = REC_UPDATE;
    rec.line = 0x1234;
    rec.nfields = 4;
    rec.fields = fields;
    rec.old_fields = old;
    record_hold_add(&h, &rec);
    rec.op = REC_INSERT;
    rec.old_fields = NULL;
    record_hold_add(&h, &rec);
    /* the source reuses its buffers */
    memset(a, 'x', sizeof a - 1);
    b[0] = '9';
    assert_int_equal(h.n, 2);
    assert_int_equal(h.bytes, 2 * (36 + 2) + 2);
    got = record_hold_get(&h, 0);
    assert_int_equal(got.op, REC_UPDATE);
    assert_int_equal(got.line, 0x1234);
    assert_int_equal(got.nfields, 4);
    assert_memory_equal(got.fields[0].data, "018f0000-0000-7000-8000-000000000001", 36);
    assert_int_equal(got.fields[0].len, 36);
    assert_memory_equal(got.fields[1].data, "42", 2);
    assert_true(got.fields[2].is_null);
    assert_null(got.fields[2].data);
    assert_true(got.fields[3].unchanged);
    assert_int_equal(got.fields[3].len, 0);
    assert_non_null(got.old_fields);
    assert_memory_equal(got.old_fields[0].data, "42", 2);
    assert_true(got.old_fields[1].is_null);
    got = record_hold_get(&h, 1);
    assert_int_equal(got.op, REC_INSERT);
    assert_null(got.old_fields);
    assert_memory_equal(got.fields[1].data, "42", 2);
    record_hold_clear(&h);
    assert_int_equal(h.n, 0);
    assert_int_equal(h.bytes, 0);
    /* many: the array grows, each record its own */
    for (int i = 0; i < 1000; i++)
    {
        char n[16];

        (void) snprintf(n, sizeof n, "%d", i);
        fields[1] = text(n);
        record_hold_add(&h, &rec);
    }
    for (int i = 0; i < 1000; i += 111)
    {
        char n[16];

        (void) snprintf(n, sizeof n, "%d", i);
        got = record_hold_get(&h, (size_t) i);
        assert_int_equal(got.fields[1].len, strlen(n));
        assert_memory_equal(got.fields[1].data, n, strlen(n));
    }
    record_hold_free(&h);
    assert_null(h.v);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies_outlive_the_source_buffers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
