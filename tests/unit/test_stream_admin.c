/*
 * Unit tests for stream_admin.c: the source conninfo stored in the target
 * keeps every setting but the password, quoted so that libpq reads it back
 * the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "v7fill/stream_admin.h"

/* The value of keyword in conninfo as libpq parses it, or NULL (caller frees). */
static char *
parsed(const char *conninfo, const char *keyword)
{
    PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
    char *v = NULL;

    assert_non_null(opts);
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (strcmp(o->keyword, keyword) == 0 && o->val)
            v = strdup(o->val);
    PQconninfoFree(opts);
    return v;
}

static void
has_value(const char *conninfo, const char *keyword, const char *want)
{
    char *v = parsed(conninfo, keyword);

    if (want == NULL)
        assert_null(v);
    else
        assert_string_equal(v, want);
    free(v);
}

static void
test_password_left_out_keywords(void **state)
{
    char *c = stream_conninfo_without_password("host=db1 port=5433 dbname=shop user=repl "
                                               "password=s3cret sslmode=require");

    (void) state;
    assert_null(strstr(c, "s3cret"));
    assert_null(strstr(c, "password"));
    has_value(c, "host", "db1");
    has_value(c, "port", "5433");
    has_value(c, "dbname", "shop");
    has_value(c, "user", "repl");
    has_value(c, "sslmode", "require");
    has_value(c, "password", NULL);
    free(c);
}

static void
test_password_left_out_uri(void **state)
{
    char *c = stream_conninfo_without_password("postgresql://repl:s3cret@db1:5433/shop?application_name=x");

    (void) state;
    assert_null(strstr(c, "s3cret"));
    has_value(c, "user", "repl");
    has_value(c, "host", "db1");
    has_value(c, "dbname", "shop");
    has_value(c, "application_name", "x");
    has_value(c, "password", NULL);
    free(c);
}

static void
test_values_quoted_round_trip(void **state)
{
    char *c = stream_conninfo_without_password("dbname='my shop' user='o\\'brien' "
                                               "options='-c search_path=a\\\\b' password='p w'");

    (void) state;
    has_value(c, "dbname", "my shop");
    has_value(c, "user", "o'brien");
    has_value(c, "options", "-c search_path=a\\b");
    has_value(c, "password", NULL);
    free(c);
}

static void
test_empty_and_unparsable(void **state)
{
    char *a = stream_conninfo_without_password(NULL);
    char *b = stream_conninfo_without_password("");
    char *u = stream_conninfo_without_password("host='unterminated password=x");

    (void) state;
    assert_string_equal(a, "");
    assert_string_equal(b, "");
    assert_string_equal(u, ""); /* never the raw text, which holds the password */
    free(a);
    free(b);
    free(u);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_password_left_out_keywords),
        cmocka_unit_test(test_password_left_out_uri),
        cmocka_unit_test(test_values_quoted_round_trip),
        cmocka_unit_test(test_empty_and_unparsable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
