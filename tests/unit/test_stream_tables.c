/*
 * Unit tests for stream_tables_parse (stream.c): the --from values of
 * `v7fill stream`, one SCHEMA.TABLE with the TABLE argument or one
 * SCHEMA.TABLE=TARGET per table without it; every other mix is a usage error
 * naming --from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/stream.h"

static void
test_one_plain_from_is_one_table(void **state)
{
    const char *f[] = {"public.orders"};
    StreamTable *t = (StreamTable *) 1;
    size_t n = 9;
    Err err = {0};

    (void) state;
    assert_true(stream_tables_parse(f, 1, true, &t, &n, &err));
    assert_null(t);
    assert_int_equal(n, 0);
}

static void
test_targets_are_split_at_the_equals_sign(void **state)
{
    const char *f[] = {"public.orders=orders_v7", "shop.items=app.items_v7"};
    StreamTable *t;
    size_t n;
    Err err = {0};

    (void) state;
    assert_true(stream_tables_parse(f, 2, false, &t, &n, &err));
    assert_int_equal(n, 2);
    assert_string_equal(t[0].from, "public.orders");
    assert_string_equal(t[0].target, "orders_v7");
    assert_string_equal(t[1].from, "shop.items");
    assert_string_equal(t[1].target, "app.items_v7");
    stream_tables_free(t, n);
}

static void
refused(const char *const *f, size_t nf, bool has_target, const char *msg)
{
    StreamTable *t = NULL;
    size_t n = 0;
    Err err = {0};

    assert_false(stream_tables_parse(f, nf, has_target, &t, &n, &err));
    assert_int_equal(err.code, EC_USAGE);
    assert_non_null(strstr(err.msg, msg));
    assert_null(t);
    assert_int_equal(n, 0);
}

static void
test_mixes_are_usage_errors(void **state)
{
    const char *two_plain[] = {"public.orders", "public.items"};
    const char *mixed[] = {"public.orders=orders_v7", "public.items"};
    const char *named[] = {"public.orders=orders_v7", "public.items=items_v7"};
    const char *twice[] = {"public.orders=orders_v7", "public.items=orders_v7"};
    const char *empty[] = {"public.orders=", "public.items=items_v7"};
    const char *no_table[] = {"=orders_v7"};

    (void) state;
    refused(two_plain, 2, true, "--from given 2 times");
    refused(mixed, 2, false, "--from: either one SCHEMA.TABLE");
    refused(named, 2, true, "no TABLE argument");
    refused(twice, 2, false, "target orders_v7 given twice");
    refused(empty, 2, false, "--from takes SCHEMA.TABLE=TARGET, got \"public.orders=\"");
    refused(no_table, 1, false, "--from takes SCHEMA.TABLE=TARGET");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_plain_from_is_one_table),
        cmocka_unit_test(test_targets_are_split_at_the_equals_sign),
        cmocka_unit_test(test_mixes_are_usage_errors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
