/*
 * Unit tests for stream_columns_check: a column the stream last applied into
 * a target column, gone from the source or of another type now, stops the
 * stream with an error naming it; columns whose values go nowhere, and a type
 * change the target column follows already, do not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/stream_columns.h"

static StreamColumn was_cols[] = {
    {"id", 20, "bigint"},
    {"amount", 23, "integer"},
    {"note", 25, "text"},
};
static const StreamColumns was = {3, was_cols};

/* The target: id → legacy_id (bigint), amount (bigint), note (text, unless
 * the test says it is gone). */
static bool note_in_target = true;

static bool
target_of(void *ctx, const char *source_column, const char **column, const char **type)
{
    (void) ctx;
    if (strcmp(source_column, "id") == 0)
        *column = "legacy_id", *type = "bigint";
    else if (strcmp(source_column, "amount") == 0)
        *column = "amount", *type = "bigint";
    else if (strcmp(source_column, "note") == 0 && note_in_target)
        *column = "note", *type = "text";
    else
        return false;
    return true;
}

static bool
check(const StreamColumns *now, Err *err)
{
    memset(err, 0, sizeof *err);
    return stream_columns_check(&was, now, target_of, NULL, "public.orders", "orders_v7", err);
}

static void
test_same_columns_pass(void **state)
{
    Err err;

    (void) state;
    note_in_target = true;
    assert_true(check(&was, &err));
}

static void
test_dropped_mapped_column_stops(void **state)
{
    StreamColumn now_cols[] = {{"id", 20, "bigint"}, {"amount", 23, "integer"}};
    StreamColumns now = {2, now_cols};
    Err err;

    (void) state;
    note_in_target = true;
    assert_false(check(&now, &err));
    assert_int_equal(err.code, EC_CONFIG);
    assert_non_null(strstr(err.msg, "column \"note\" of public.orders is gone"));
    assert_non_null(strstr(err.hint, "RENAME COLUMN \"note\""));
    /* the target column dropped too: nothing needs it any more */
    note_in_target = false;
    assert_true(check(&now, &err));
}

static void
test_type_change_stops_until_target_follows(void **state)
{
    StreamColumn now_cols[] = {{"id", 20, "bigint"}, {"amount", 1700, "numeric"}, {"note", 25, "text"}};
    StreamColumn now2_cols[] = {{"id", 20, "bigint"}, {"amount", 20, "bigint"}, {"note", 25, "text"}};
    StreamColumns now = {3, now_cols};
    StreamColumns now2 = {3, now2_cols};
    Err err;

    (void) state;
    note_in_target = true;
    assert_false(check(&now, &err));
    assert_int_equal(err.code, EC_CONFIG);
    assert_non_null(strstr(err.msg, "column \"amount\""));
    assert_non_null(strstr(err.msg, "integer, now numeric"));
    assert_non_null(strstr(err.hint, "TYPE numeric"));
    /* integer → bigint: the target column is bigint already */
    assert_true(check(&now2, &err));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_columns_pass),
        cmocka_unit_test(test_dropped_mapped_column_stops),
        cmocka_unit_test(test_type_change_stops_until_target_follows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
