/*
 * Unit tests for timeparse.c.  Expected instants were computed independently
 * with GNU date, e.g. `date -u -d 2026-07-01T00:00:00Z +%s` = 1782864000, and
 * zone transitions checked with `zdump -v -c 2026,2027 America/New_York`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "v7fill/civil.h"
#include "v7fill/timeparse.h"

#define S(x) ((int64_t) (x) * INT64_C(1000000))

/* 2026-07-01T00:00:00Z */
#define T0 INT64_C(1782864000000000)
/* 2026-07-01T12:00:00Z */
#define T_NOON (T0 + 12 * US_PER_HOUR)

static TimeParser *
new_parser(const char *format, const char *tz)
{
    TimeParser *p = NULL;
    Err err = {0};

    if (!time_parser_new(format, tz, &p, &err))
        fail_msg("time_parser_new(%s, %s): %s", format ? format : "NULL", tz ? tz : "NULL",
                 err.msg);
    return p;
}

static int64_t
parse_ok(const TimeParser *p, const char *text)
{
    Err err = {0};
    int64_t us = INT64_MIN;

    if (!time_parse(p, text, strlen(text), &us, &err))
        fail_msg("parse of \"%s\" failed: %s", text, err.msg);
    return us;
}

/* Parse must fail with EC_FORMAT; the message is returned in *err. */
static void
parse_fails(const TimeParser *p, const char *text, Err *err)
{
    int64_t us = 42;

    memset(err, 0, sizeof *err);
    if (time_parse(p, text, strlen(text), &us, err))
        fail_msg("parse of \"%s\" succeeded with %lld, expected an error", text, (long long) us);
    assert_int_equal(err->code, EC_FORMAT);
    assert_int_equal(us, 42);
}

static void
assert_contains(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) == NULL)
        fail_msg("\"%s\" does not contain \"%s\"", haystack, needle);
}

static void
assert_new_fails(const char *format, const char *tz, ErrCode code, const char *needle)
{
    TimeParser *p = (TimeParser *) 1;
    Err err = {0};

    if (time_parser_new(format, tz, &p, &err))
        fail_msg("time_parser_new(%s, %s) succeeded, expected an error", format ? format : "NULL",
                 tz ? tz : "NULL");
    assert_null(p);
    assert_int_equal(err.code, code);
    if (needle != NULL)
        assert_contains(err.msg, needle);
}

/* ------------------------------------------------------------------- ISO */

/* One parser remembers the last date it checked: a run of times on one date,
 * then others, must give what a fresh parser gives for each, and an invalid
 * date is refused however often it comes and whatever came before. */
static void
test_date_cache_changes_no_result(void **state)
{
    static const char *const texts[] = {
        "2024-02-29 10:00:00Z", "2024-02-29 23:59:59.999999Z", "2024-03-01 00:00:00Z",
        "2023-03-01 00:00:00Z", "2024-02-29 00:00:01+01",      "1970-01-01 00:00:00Z",
        "2024-02-29 10:00:00Z",
    };
    static const char *const invalid[] = {
        "2023-02-29 10:00:00Z", "2023-02-29 10:00:00Z", "2024-02-30 00:00:00Z", "2024-13-01",
    };
    TimeParser *p = new_parser("iso", NULL);
    (void) state;

    for (size_t round = 0; round < 2; round++)
    {
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        {
            TimeParser *fresh = new_parser("iso", NULL);

            assert_int_equal(parse_ok(p, texts[i]), parse_ok(fresh, texts[i]));
            time_parser_free(fresh);
        }
        for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        {
            Err err;

            (void) parse_ok(p, "2023-02-28 10:00:00Z"); /* the month and day before */
            parse_fails(p, invalid[i], &err);
        }
    }
    time_parser_free(p);
}

static void
test_iso_utc_times_give_the_known_instants(void **state)
{
    TimeParser *p = new_parser("iso", NULL);

    (void) state;
    assert_int_equal(parse_ok(p, "2026-07-01T00:00:00Z"), T0);
    assert_int_equal(parse_ok(p, "2000-01-01T00:00:00Z"), S(946684800));
    assert_int_equal(parse_ok(p, "1970-01-01T00:00:00Z"), 0);
    assert_int_equal(parse_ok(p, "1969-12-31T23:59:59Z"), S(-1));
    assert_int_equal(parse_ok(p, "0001-01-01T00:00:00Z"), S(-62135596800));
    assert_int_equal(parse_ok(p, "9999-12-31T23:59:59Z"), S(253402300799));
    assert_int_equal(parse_ok(p, "10000-01-01T00:00:00Z"), S(253402300800));
    assert_int_equal(parse_ok(p, "2026-07-01T12:34:56Z"), S(1782909296));
    time_parser_free(p);
}

static void
test_zone_names_beyond_utc_stay_errors(void **state)
{
    TimeParser *berlin = new_parser(NULL, "Europe/Berlin");
    Err err;

    (void) state;
    /* " UTC" is an offset: the input zone does not apply */
    assert_int_equal(parse_ok(berlin, "2026-07-01 12:00:00 UTC"), T_NOON);
    /* other zone names stay errors: their offsets are not in the text */
    parse_fails(berlin, "2026-07-01 12:00:00 CET", &err);
    assert_contains(err.msg, "after the time");
    parse_fails(berlin, "2026-07-01 12:00:00 UTCX", &err);
    parse_fails(berlin, "2026-07-01 12:00:00 UTC ", &err);
    time_parser_free(berlin);
}

static void
test_iso_accepts_every_offset_form(void **state)
{
    static const struct
    {
        const char *text;
        int64_t us;
    } cases[] = {
        {"2026-07-01T12:00:00Z", T_NOON},
        {"2026-07-01T12:00:00z", T_NOON},
        {"2026-07-01T12:00:00+00", T_NOON},
        {"2026-07-01T12:00:00-00:00", T_NOON},
        {"2026-07-01T12:00:00+02", S(1782900000)},
        {"2026-07-01T12:00:00+0200", S(1782900000)},
        {"2026-07-01T12:00:00+02:00", S(1782900000)},
        {"2026-07-01T12:00:00 +0200", S(1782900000)},
        {"2026-07-01T12:00:00+02:00:00", S(1782900000)},
        {"2026-07-01T12:00:00-05:30", S(1782927000)},
        {"2026-07-01T12:00:00-0530", S(1782927000)},
        {"2026-07-01T12:00:00+05:45", S(1782886500)},
        {"2026-07-01T12:00+05:45", S(1782886500)},
        {"2026-07-01T12:00:00+00:00:30", T_NOON - S(30)},
        /* a zone name for UTC after a space, as Ruby's Time#to_s writes it */
        {"2026-07-01 12:00:00 UTC", T_NOON},
        {"2026-07-01 12:00:00 utc", T_NOON},
        {"2026-07-01 12:00:00 GMT", T_NOON},
        {"2026-07-01 12:00:00 Z", T_NOON},
        {"2026-07-01 12:00:00.25 UTC", T_NOON + 250000},
    };
    TimeParser *p = new_parser(NULL, NULL);

    (void) state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
        int64_t got = parse_ok(p, cases[i].text);

        if (got != cases[i].us)
            fail_msg("\"%s\": got %lld, expected %lld", cases[i].text, (long long) got,
                     (long long) cases[i].us);
    }
    time_parser_free(p);
}

static void
test_iso_accepts_t_lowercase_t_and_space_as_separator(void **state)
{
    TimeParser *p = new_parser("iso", NULL);

    (void) state;
    assert_int_equal(parse_ok(p, "2026-07-01T12:00:00Z"), T_NOON);
    assert_int_equal(parse_ok(p, "2026-07-01t12:00:00Z"), T_NOON);
    assert_int_equal(parse_ok(p, "2026-07-01 12:00:00Z"), T_NOON);
    time_parser_free(p);
}

static void
test_iso_seconds_are_optional_and_no_offset_means_utc(void **state)
{
    TimeParser *p = new_parser("iso", "UTC");

    (void) state;
    assert_int_equal(parse_ok(p, "2026-07-01T12:00Z"), T_NOON);
    assert_int_equal(parse_ok(p, "2026-07-01T12:00"), T_NOON);
    assert_int_equal(parse_ok(p, "2026-07-01 12:00:00"), T_NOON);
    time_parser_free(p);
}

static void
test_iso_fraction_digits_are_scaled_to_microseconds(void **state)
{
    TimeParser *p = new_parser("iso", NULL);

    (void) state;
    assert_int_equal(parse_ok(p, "2026-07-01T00:00:00.5Z"), T0 + 500000);
    assert_int_equal(parse_ok(p, "2026-07-01T00:00:00.05Z"), T0 + 50000);
    assert_int_equal(parse_ok(p, "2026-07-01T00:00:00.123Z"), T0 + 123000);
    assert_int_equal(parse_ok(p, "2026-07-01T00:00:00.000001Z"), T0 + 1);
    assert_int_equal(parse_ok(p, "2026-07-01T00:00:00.123456Z"), T0 + 123456);
    assert_int_equal(parse_ok(p, "2026-07-01T00:00:00,25Z"), T0 + 250000);
    time_parser_free(p);
}

static void
test_iso_truncates_fraction_digits_beyond_six(void **state)
{
    TimeParser *p = new_parser("iso", NULL);

    (void) state;
    assert_int_equal(parse_ok(p, "2026-07-01T00:00:00.1234567Z"), T0 + 123456);
    assert_int_equal(parse_ok(p, "2026-07-01T00:00:00.0000009Z"), T0);
    /* never rounded into the next second */
    assert_int_equal(parse_ok(p, "2026-06-30T23:59:59.99999999999Z"), T0 - 1);
    /* before the epoch, truncating digits also moves toward the past */
    assert_int_equal(parse_ok(p, "1969-12-31T23:59:59.9999999Z"), -1);
    time_parser_free(p);
}

static void
test_iso_reads_postgresql_text_output(void **state)
{
    TimeParser *p = new_parser("iso", NULL);

    (void) state;
    /* 12:00 at +02 is 10:00Z = 1782900000 */
    assert_int_equal(parse_ok(p, "2026-07-01 12:00:00.5+02"), S(1782900000) + 500000);
    assert_int_equal(parse_ok(p, "2026-07-01 00:00:00+00"), T0);
    assert_int_equal(parse_ok(p, "2026-07-01 12:00:00.123456+00"), T_NOON + 123456);
    time_parser_free(p);
}

static void
test_iso_date_only_means_midnight(void **state)
{
    TimeParser *p = new_parser("iso", NULL);

    (void) state;
    assert_int_equal(parse_ok(p, "2026-07-01"), T0);
    assert_int_equal(parse_ok(p, "2026-01-01"), S(1767225600));
    time_parser_free(p);
}

static void
test_iso_hour_24_is_the_next_midnight(void **state)
{
    TimeParser *p = new_parser("iso", NULL);

    (void) state;
    assert_int_equal(parse_ok(p, "2026-06-30T24:00:00Z"), T0);
    assert_int_equal(parse_ok(p, "2026-06-30T24:00Z"), T0);
    assert_int_equal(parse_ok(p, "2026-06-30T24:00:00.000Z"), T0);
    assert_int_equal(parse_ok(p, "2025-12-31T24:00:00Z"), S(1767225600));
    time_parser_free(p);
}

static void
test_iso_accepts_february_29_only_in_leap_years(void **state)
{
    TimeParser *p = new_parser("iso", NULL);
    Err err;

    (void) state;
    assert_int_equal(parse_ok(p, "2024-02-29"), S(1709164800));
    assert_int_equal(parse_ok(p, "2000-02-29"), S(951782400));
    parse_fails(p, "2025-02-29", &err);
    assert_string_equal(err.msg,
                        "invalid time \"2025-02-29\": day 29 does not exist in February 2025");
    parse_fails(p, "1900-02-29T00:00:00Z", &err);
    assert_contains(err.msg, "day 29 does not exist in February 1900");
    time_parser_free(p);
}

static void
test_iso_rejects_impossible_dates(void **state)
{
    static const struct
    {
        const char *text;
        const char *why;
    } cases[] = {
        {"2026-02-30", "day 30 does not exist in February 2026"},
        {"2026-04-31T00:00:00Z", "day 31 does not exist in April 2026"},
        {"2026-13-01", "month 13 is out of range"},
        {"2026-00-10", "month 0 is out of range"},
        {"2026-01-00", "day 0 is out of range"},
        {"2026-01-32", "day 32 is out of range"},
    };
    TimeParser *p = new_parser("iso", NULL);
    Err err;

    (void) state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
        parse_fails(p, cases[i].text, &err);
        assert_contains(err.msg, cases[i].why);
    }
    time_parser_free(p);
}

static void
test_iso_rejects_impossible_times(void **state)
{
    static const struct
    {
        const char *text;
        const char *why;
    } cases[] = {
        {"2026-07-01T24:01:00Z", "hour 24 is only allowed as 24:00:00"},
        {"2026-07-01T24:00:01Z", "hour 24 is only allowed as 24:00:00"},
        {"2026-07-01T24:00:00.5Z", "hour 24 is only allowed as 24:00:00"},
        {"2026-07-01T25:00:00Z", "hour 25 is out of range"},
        {"2026-07-01T23:60:00Z", "minute 60 is out of range"},
        {"2026-07-01T23:60Z", "minute 60 is out of range"},
        {"2026-06-30T23:59:60Z", "leap second"},
        {"2026-06-30T23:59:61Z", "second 61 is out of range"},
        {"2026-07-01T12:00:00+24:00", "UTC offset +24:00 is out of range"},
        {"2026-07-01T12:00:00+02:60", "UTC offset +02:60 is out of range"},
    };
    TimeParser *p = new_parser("iso", NULL);
    Err err;

    (void) state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
        parse_fails(p, cases[i].text, &err);
        assert_contains(err.msg, cases[i].why);
    }
    time_parser_free(p);
}

static void
test_iso_rejects_malformed_text(void **state)
{
    static const char *const cases[] = {
        "2026-7-01",
        "2026/07/01",
        "26-07-01",
        "123456-07-01",
        "2026-07-1",
        "2026-07-01T1200",
        "2026-07-01T12",
        "2026-07-01T12:0",
        "2026-07-01T12:00:0Z",
        "2026-07-01T12:00:00.Z",
        "2026-07-01T12:00:00+2",
        "2026-07-01T12:00:00+02:0",
        "2026-07-01T",
        "2026-07-01 ",
        " 2026-07-01",
        "T12:00:00Z",
        "now",
    };
    TimeParser *p = new_parser("iso", NULL);
    Err err;

    (void) state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        parse_fails(p, cases[i], &err);
    time_parser_free(p);
}

static void
test_iso_rejects_trailing_junk(void **state)
{
    TimeParser *p = new_parser("iso", NULL);
    Err err;

    (void) state;
    parse_fails(p, "2026-07-01T00:00:00Zjunk", &err);
    assert_string_equal(err.msg,
                        "invalid time \"2026-07-01T00:00:00Zjunk\": unexpected \"junk\" after "
                        "the time");
    parse_fails(p, "2026-07-01x", &err);
    assert_contains(err.msg, "unexpected \"x\" after the date");
    parse_fails(p, "2026-07-01T00:00:00+02:00x", &err);
    parse_fails(p, "2026-07-01T00:00:00Z ", &err);
    parse_fails(p, "2026-07-01T00:00:00.5.5Z", &err);
    time_parser_free(p);
}

static void
test_iso_rejects_empty_input(void **state)
{
    TimeParser *p = new_parser("iso", NULL);
    Err err = {0};
    int64_t us;

    (void) state;
    parse_fails(p, "", &err);
    assert_string_equal(err.msg, "invalid time \"\": empty input");
    assert_false(time_parse(p, NULL, 0, &us, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_false(time_parse_iso("", &us, &err));
    assert_int_equal(err.code, EC_FORMAT);
    time_parser_free(p);
}

static void
test_iso_rejects_postgresql_bc_and_infinity(void **state)
{
    TimeParser *p = new_parser("iso", NULL);
    Err err;

    (void) state;
    parse_fails(p, "0044-03-15 12:00:00+00 BC", &err);
    assert_contains(err.msg, "(BC) are not supported");
    parse_fails(p, "0044-03-15 BC", &err);
    assert_contains(err.msg, "(BC) are not supported");
    parse_fails(p, "infinity", &err);
    assert_contains(err.msg, "infinite timestamps are not supported");
    parse_fails(p, "-infinity", &err);
    assert_contains(err.msg, "infinite timestamps are not supported");
    time_parser_free(p);
}

static void
test_error_messages_quote_the_text_and_name_the_problem(void **state)
{
    TimeParser *p = new_parser("iso", NULL);
    Err err;

    (void) state;
    parse_fails(p, "2026-02-30", &err);
    assert_string_equal(err.msg,
                        "invalid time \"2026-02-30\": day 30 does not exist in February 2026");
    parse_fails(p, "2026-07-01T25:00Z", &err);
    assert_string_equal(err.msg,
                        "invalid time \"2026-07-01T25:00Z\": hour 25 is out of range (0-23)");
    parse_fails(p, "2026-07-01T12-00", &err);
    assert_string_equal(err.msg, "invalid time \"2026-07-01T12-00\": expected \":\" after the "
                                 "hour, found \"-00\"");
    time_parser_free(p);
}

static void
test_error_messages_truncate_long_text(void **state)
{
    TimeParser *p = new_parser("iso", NULL);
    char text[400];
    char expect[128];
    Err err;

    (void) state;
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    memcpy(text, "2026-07-01T00:00:00Z", 20);
    parse_fails(p, text, &err);
    /* the first 64 bytes, then "..." */
    (void) snprintf(expect, sizeof expect, "\"%.64s...\"", text);
    assert_contains(err.msg, expect);
    assert_true(strlen(err.msg) < 300);
    time_parser_free(p);
}

static void
test_error_messages_escape_quotes_and_control_bytes(void **state)
{
    TimeParser *p = new_parser("iso", NULL);
    Err err = {0};
    int64_t us;

    (void) state;
    parse_fails(p, "2026-07-01\n", &err);
    assert_contains(err.msg, "\"2026-07-01\\x0a\"");
    parse_fails(p, "2026-07-01\"", &err);
    assert_contains(err.msg, "\"2026-07-01\\\"\"");
    assert_false(time_parse(p, "2026\0-07-01", 11, &us, &err));
    assert_contains(err.msg, "\"2026\\x00-07-01\"");
    time_parser_free(p);
}

static void
test_time_parse_reads_only_len_bytes(void **state)
{
    TimeParser *p = new_parser("iso", NULL);
    Err err = {0};
    int64_t us = 0;

    (void) state;
    assert_true(time_parse(p, "2026-07-01T00:00:00Zjunk", 20, &us, &err));
    assert_int_equal(us, T0);
    assert_true(time_parse(p, "2026-07-01T00:00:00.5", 19, &us, &err));
    assert_int_equal(us, T0);
    time_parser_free(p);
}

static void
test_time_parse_iso_reads_utc_without_a_parser(void **state)
{
    Err err = {0};
    int64_t us = 0;

    (void) state;
    assert_true(time_parse_iso("2026-07-01", &us, &err));
    assert_int_equal(us, T0);
    assert_true(time_parse_iso("2026-07-01 12:00:00.5+02", &us, &err));
    assert_int_equal(us, S(1782900000) + 500000);
    assert_false(time_parse_iso("2026-02-30", &us, &err));
    assert_int_equal(err.code, EC_FORMAT);
}

/* ---------------------------------------------------------------- epochs */

static void
test_epoch_seconds_accept_a_fraction_and_a_sign(void **state)
{
    TimeParser *p = new_parser("epoch-s", NULL);

    (void) state;
    assert_int_equal(parse_ok(p, "1782864000"), T0);
    assert_int_equal(parse_ok(p, "1782864000.5"), T0 + 500000);
    assert_int_equal(parse_ok(p, "1782864000.000001"), T0 + 1);
    assert_int_equal(parse_ok(p, "1782864000.1234567"), T0 + 123456);
    assert_int_equal(parse_ok(p, "0"), 0);
    assert_int_equal(parse_ok(p, "-0"), 0);
    assert_int_equal(parse_ok(p, "-1.5"), -1500000);
    /* digits below 1 µs move toward the past, as with ISO text */
    assert_int_equal(parse_ok(p, "-0.0000015"), -2);
    assert_int_equal(parse_ok(p, "-0.0000010"), -1);
    time_parser_free(p);
}

static void
test_epoch_milliseconds_and_microseconds_scale_correctly(void **state)
{
    TimeParser *ms = new_parser("epoch-ms", NULL);
    TimeParser *us = new_parser("epoch-us", "Europe/Berlin");

    (void) state;
    assert_int_equal(parse_ok(ms, "1782864000000"), T0);
    assert_int_equal(parse_ok(ms, "1782864000000.25"), T0 + 250);
    assert_int_equal(parse_ok(ms, "1782864000001.9999"), T0 + 1999);
    assert_int_equal(parse_ok(ms, "-1"), -1000);
    /* the zone does not matter for absolute numbers */
    assert_int_equal(parse_ok(us, "1782864000000000"), T0);
    assert_int_equal(parse_ok(us, "5.9"), 5);
    assert_int_equal(parse_ok(us, "-5.9"), -6);
    assert_int_equal(parse_ok(us, "9223372036854775807"), INT64_MAX);
    assert_int_equal(parse_ok(us, "-9223372036854775807"), -INT64_MAX);
    time_parser_free(ms);
    time_parser_free(us);
}

static void
test_epoch_overflow_is_an_error_not_a_wrap(void **state)
{
    TimeParser *s = new_parser("epoch-s", NULL);
    TimeParser *ms = new_parser("epoch-ms", NULL);
    TimeParser *us = new_parser("epoch-us", NULL);
    Err err;

    (void) state;
    assert_int_equal(parse_ok(s, "9223372036854"), S(INT64_C(9223372036854)));
    parse_fails(s, "9223372036855", &err);
    assert_contains(err.msg, "out of range");
    parse_fails(s, "-9223372036855", &err);
    parse_fails(ms, "9223372036854776", &err);
    parse_fails(us, "9223372036854775808", &err);
    parse_fails(us, "18446744073709551616", &err);
    parse_fails(us, "99999999999999999999999999", &err);
    time_parser_free(s);
    time_parser_free(ms);
    time_parser_free(us);
}

static void
test_epoch_rejects_junk_and_empty_input(void **state)
{
    static const char *const cases[] = {"", "-", "+1", " 1", "1 ", "1.", ".5", "12a", "1e9",
                                        "1,5", "--1", "0x10"};
    TimeParser *p = new_parser("epoch-s", NULL);
    Err err;

    (void) state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        parse_fails(p, cases[i], &err);
    parse_fails(p, "12a", &err);
    assert_string_equal(err.msg, "invalid time \"12a\": unexpected \"a\" after the number");
    time_parser_free(p);
}

/* -------------------------------------------------------------- patterns */

static void
test_pattern_reads_day_month_year_and_time(void **state)
{
    TimeParser *p = new_parser("%d/%m/%Y %H:%M:%S", NULL);

    (void) state;
    assert_int_equal(parse_ok(p, "01/07/2026 12:00:00"), T_NOON);
    /* one-digit fields, as strptime allows */
    assert_int_equal(parse_ok(p, "1/7/2026 12:0:0"), T_NOON);
    time_parser_free(p);
}

static void
test_pattern_reads_month_names_case_insensitively(void **state)
{
    TimeParser *b = new_parser("%b %e %T %Y", NULL);
    TimeParser *full = new_parser("%d %B %Y", NULL);
    Err err;

    (void) state;
    assert_int_equal(parse_ok(b, "Jul  1 12:00:00 2026"), T_NOON);
    assert_int_equal(parse_ok(b, "JUL 1 12:00:00 2026"), T_NOON);
    assert_int_equal(parse_ok(b, "jul 01 12:00:00 2026"), T_NOON);
    assert_int_equal(parse_ok(full, "01 July 2026"), T0);
    assert_int_equal(parse_ok(full, "01 jul 2026"), T0);
    assert_int_equal(parse_ok(full, "1 january 2026"), S(1767225600));
    parse_fails(full, "01 Juli 2026", &err);
    parse_fails(full, "01 Jux 2026", &err);
    assert_contains(err.msg, "expected an English month name (%b), found \"Jux 2026\"");
    time_parser_free(b);
    time_parser_free(full);
}

static void
test_pattern_reads_fraction_and_every_offset_form(void **state)
{
    TimeParser *p = new_parser("%F %T.%f%z", NULL);
    TimeParser *q = new_parser("%Y%m%dT%H%M%S%z", NULL);

    (void) state;
    assert_int_equal(parse_ok(p, "2026-07-01 12:00:00.5Z"), T_NOON + 500000);
    assert_int_equal(parse_ok(p, "2026-07-01 12:00:00.1234567+02"), S(1782900000) + 123456);
    assert_int_equal(parse_ok(p, "2026-07-01 12:00:00.000001+0200"), S(1782900000) + 1);
    assert_int_equal(parse_ok(p, "2026-07-01 12:00:00.25-05:30"), S(1782927000) + 250000);
    assert_int_equal(parse_ok(q, "20260701T120000+0200"), S(1782900000));
    time_parser_free(p);
    time_parser_free(q);
}

static void
test_pattern_reads_day_of_year(void **state)
{
    TimeParser *p = new_parser("%Y-%j", NULL);
    Err err;

    (void) state;
    assert_int_equal(parse_ok(p, "2026-182"), T0);
    assert_int_equal(parse_ok(p, "2026-1"), S(1767225600));
    assert_int_equal(parse_ok(p, "2024-366"), S(1735603200));
    parse_fails(p, "2025-366", &err);
    assert_contains(err.msg, "day of year 366 does not exist in 2025");
    parse_fails(p, "2025-000", &err);
    time_parser_free(p);
}

static void
test_pattern_matches_literals_and_percent_signs(void **state)
{
    TimeParser *p = new_parser("at %Y%m%d %%%H", NULL);
    Err err;

    (void) state;
    assert_int_equal(parse_ok(p, "at 20260701 %12"), T_NOON);
    parse_fails(p, "at 20260701 12", &err);
    assert_contains(err.msg, "expected \"%\" (from the time format), found \"12\"");
    parse_fails(p, "At 20260701 %12", &err);
    time_parser_free(p);
}

static void
test_pattern_checks_the_weekday_against_the_date(void **state)
{
    TimeParser *p = new_parser("%a, %d %b %Y %T %z", NULL);
    Err err;

    (void) state;
    assert_int_equal(parse_ok(p, "Wed, 01 Jul 2026 12:00:00 +0000"), T_NOON);
    assert_int_equal(parse_ok(p, "wednesday, 01 Jul 2026 12:00:00 +0000"), T_NOON);
    parse_fails(p, "Mon, 01 Jul 2026 12:00:00 +0000", &err);
    assert_contains(err.msg, "July 1 2026 is a Wednesday, not a Monday");
    time_parser_free(p);
}

static void
test_pattern_rejects_impossible_dates_and_junk(void **state)
{
    TimeParser *p = new_parser("%Y-%m-%d %H:%M", NULL);
    Err err;

    (void) state;
    parse_fails(p, "2026-02-30 00:00", &err);
    assert_string_equal(err.msg, "invalid time \"2026-02-30 00:00\": day 30 does not exist in "
                                 "February 2026");
    parse_fails(p, "2026-07-01 24:30", &err);
    assert_contains(err.msg, "hour 24 is only allowed");
    parse_fails(p, "2026-07-01 23:60", &err);
    parse_fails(p, "2026-07-01 12:00x", &err);
    assert_contains(err.msg, "unexpected \"x\" after the end of the time format");
    parse_fails(p, "2026-07-01", &err);
    assert_contains(err.msg, "text ends early");
    parse_fails(p, "", &err);
    parse_fails(p, "26-07-01 12:00", &err);
    time_parser_free(p);
}

static void
test_pattern_errors_are_caught_when_the_parser_is_made(void **state)
{
    (void) state;
    assert_new_fails("%Y-%Q", NULL, EC_CONFIG, "\"%Q\"");
    assert_new_fails("%d/%m/%y", NULL, EC_CONFIG, "\"%y\"");
    assert_new_fails("%H:%M", NULL, EC_CONFIG, "has no year");
    assert_new_fails("%Y-%m-%d %", NULL, EC_CONFIG, "lone");
    assert_new_fails("%Y %j %m", NULL, EC_CONFIG, "%j");
    assert_new_fails("rfc2822", NULL, EC_CONFIG, "unknown time format \"rfc2822\"");
}

/* ------------------------------------------------------------ time zones */

static void
test_zone_new_york_reads_standard_and_daylight_time(void **state)
{
    TimeParser *p = new_parser("iso", "America/New_York");

    (void) state;
    /* `TZ=America/New_York date -d "2026-01-15 09:00" +%s` */
    assert_int_equal(parse_ok(p, "2026-01-15 09:00"), S(1768485600));
    assert_int_equal(parse_ok(p, "2026-07-15T09:00:00"), S(1784120400));
    /* an explicit offset wins over the zone */
    assert_int_equal(parse_ok(p, "2026-07-01T12:00:00Z"), T_NOON);
    assert_int_equal(parse_ok(p, "2026-07-01T12:00:00+02"), S(1782900000));
    /* date only is local midnight: 2026-07-01 00:00 EDT = 04:00Z */
    assert_int_equal(parse_ok(p, "2026-07-01"), T0 + 4 * US_PER_HOUR);
    time_parser_free(p);
}

static void
test_zone_new_york_gap_reads_with_the_offset_before_the_transition(void **state)
{
    TimeParser *p = new_parser("iso", "America/New_York");

    (void) state;
    /* 2026-03-08 02:30 does not exist; EST (-5) puts it at 07:30Z = 03:30 EDT */
    assert_int_equal(parse_ok(p, "2026-03-08 02:30"), S(1772955000));
    assert_int_equal(parse_ok(p, "2026-03-08 02:00"), S(1772953200));
    /* edges: the last EST second and the first EDT minute */
    assert_int_equal(parse_ok(p, "2026-03-08 01:59:59"), S(1772953199));
    assert_int_equal(parse_ok(p, "2026-03-08 03:00"), S(1772953200));
    time_parser_free(p);
}

static void
test_zone_new_york_overlap_reads_the_first_occurrence(void **state)
{
    TimeParser *p = new_parser("iso", "America/New_York");

    (void) state;
    /* 2026-11-01 01:30 happens at 05:30Z (EDT) and again at 06:30Z (EST);
     * PostgreSQL reads it as the second (the values are what
     * timestamp '...' AT TIME ZONE 'America/New_York' gives on PG 15) */
    assert_int_equal(parse_ok(p, "2026-11-01 01:30"), S(1793514600));
    assert_int_equal(parse_ok(p, "2026-11-01 01:00"), S(1793512800));
    assert_int_equal(parse_ok(p, "2026-11-01 00:59:59"), S(1793509199));
    assert_int_equal(parse_ok(p, "2026-11-01 02:00"), S(1793516400));
    time_parser_free(p);
}

static void
test_zone_berlin_reads_summer_winter_gap_and_overlap(void **state)
{
    TimeParser *p = new_parser("%Y-%m-%d %H:%M", "Europe/Berlin");
    TimeParser *iso = new_parser("iso", "Europe/Berlin");

    (void) state;
    assert_int_equal(parse_ok(p, "2026-07-01 12:00"), S(1782900000));
    assert_int_equal(parse_ok(p, "2026-01-01 12:00"), S(1767265200));
    /* gap: 02:30 CET -> 01:30Z = 03:30 CEST */
    assert_int_equal(parse_ok(p, "2026-03-29 02:30"), S(1774747800));
    /* overlap: second occurrence as in PostgreSQL, 02:30 CET = 01:30Z */
    assert_int_equal(parse_ok(p, "2026-10-25 02:30"), S(1792891800));
    assert_int_equal(parse_ok(p, "2026-10-25 02:00"), S(1792890000));
    /* 2026-01-01 00:00 CET = 2025-12-31T23:00Z */
    assert_int_equal(parse_ok(iso, "2026-01-01"), S(1767222000));
    /* 24:00 is the next local midnight */
    assert_int_equal(parse_ok(iso, "2025-12-31T24:00:00"), S(1767222000));
    time_parser_free(p);
    time_parser_free(iso);
}

/*
 * Every local wall time of 2026, every 15 minutes, formatted with libc and
 * parsed back: the result is the instant it came from, except the first
 * occurrence in an overlap, which reads as the second one (an hour later), as
 * PostgreSQL reads it.
 */
static void
check_zone_round_trip(const char *zone)
{
    TimeParser *p = new_parser("iso", zone);
    int64_t start = 1767225600; /* 2026-01-01T00:00:00Z */
    int overlaps = 0;

    (void) setenv("TZ", zone, 1);
    tzset();
    for (int64_t t = start; t < start + 366 * 86400; t += 900)
    {
        time_t tt = (time_t) t;
        time_t later = (time_t) (t + 3600);
        struct tm tm;
        struct tm tm_later;
        char text[32];
        char text_later[32];
        int64_t got;

        assert_non_null(localtime_r(&tt, &tm));
        assert_non_null(localtime_r(&later, &tm_later));
        (void) strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
        (void) strftime(text_later, sizeof text_later, "%Y-%m-%d %H:%M:%S", &tm_later);
        got = parse_ok(p, text);
        if (strcmp(text, text_later) == 0)
        {
            overlaps++;
            if (got != S(t + 3600))
                fail_msg("%s %s: got %lld, expected the second occurrence %lld", zone, text,
                         (long long) got, (long long) S(t + 3600));
        }
        else if (got != S(t))
            fail_msg("%s %s: got %lld, expected %lld", zone, text, (long long) got,
                     (long long) S(t));
    }
    /* one overlap hour in the year: four quarter hours */
    assert_int_equal(overlaps, 4);
    time_parser_free(p);
}

static void
test_zone_round_trips_every_quarter_hour_of_a_year(void **state)
{
    (void) state;
    check_zone_round_trip("America/New_York");
    check_zone_round_trip("Europe/Berlin");
    check_zone_round_trip("Australia/Sydney");
}

static void
test_zone_parsers_with_different_zones_can_alternate(void **state)
{
    TimeParser *ny = new_parser("iso", "America/New_York");
    TimeParser *berlin = new_parser("iso", "Europe/Berlin");

    (void) state;
    /* distinct days each time so that the per-day cache is missed and the TZ
     * switch is really exercised */
    for (int i = 0; i < 3; i++)
    {
        assert_int_equal(parse_ok(ny, "2026-03-08 02:30"), S(1772955000));
        assert_int_equal(parse_ok(berlin, "2026-03-29 02:30"), S(1774747800));
        assert_int_equal(parse_ok(ny, "2026-11-01 01:30"), S(1793514600));
        assert_int_equal(parse_ok(berlin, "2026-10-25 02:30"), S(1792891800));
        assert_int_equal(parse_ok(ny, "2026-01-15 09:00"), S(1768485600));
        assert_int_equal(parse_ok(berlin, "2026-07-01 12:00"), S(1782900000));
    }
    time_parser_free(ny);
    time_parser_free(berlin);
}

static void
test_zone_utc_spellings_take_the_utc_path(void **state)
{
    static const char *const names[] = {"UTC", "utc", "Etc/UTC", NULL};

    (void) state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    {
        TimeParser *p = new_parser("iso", names[i]);

        assert_int_equal(parse_ok(p, "2026-07-01 12:00"), T_NOON);
        time_parser_free(p);
    }
}

static void
test_zone_unknown_or_unsafe_names_are_config_errors(void **state)
{
    (void) state;
    assert_new_fails("iso", "Mars/Olympus_Mons", EC_CONFIG, "unknown time zone");
    assert_new_fails("iso", "Europe/Berlim", EC_CONFIG, "\"Europe/Berlim\"");
    assert_new_fails("iso", "Europe", EC_CONFIG, "unknown time zone");
    assert_new_fails("iso", "zone.tab", EC_CONFIG, "unknown time zone");
    assert_new_fails("iso", "../../../etc/passwd", EC_CONFIG, "invalid time zone name");
    assert_new_fails("iso", "Europe/../UTC", EC_CONFIG, "invalid time zone name");
    assert_new_fails("iso", "/usr/share/zoneinfo/UTC", EC_CONFIG, "invalid time zone name");
    assert_new_fails("iso", "", EC_CONFIG, "empty");
    assert_new_fails("iso", "EST5EDT,M3.2.0,M11.1.0", EC_CONFIG, "unknown time zone");
}

/* ------------------------------------------------------------- durations */

static void
test_durations_accept_units_words_and_iso_8601(void **state)
{
    static const struct
    {
        const char *text;
        int64_t us;
    } cases[] = {
        {"90d", 90 * US_PER_DAY},
        {"36h", 36 * US_PER_HOUR},
        {"15min", 15 * US_PER_MIN},
        {"30s", 30 * US_PER_SEC},
        {"500ms", 500 * US_PER_MS},
        {"250us", 250},
        {"2w", 14 * US_PER_DAY},
        {"3 months", 90 * US_PER_DAY},
        {"1 year", 365 * US_PER_DAY},
        {"2mo", 60 * US_PER_DAY},
        {"500 \xc2\xb5s", 500}, /* µs */
        {"1d12h", 36 * US_PER_HOUR},
        {"1d 12h", 36 * US_PER_HOUR},
        {"7 days", 7 * US_PER_DAY},
        {"1 day", US_PER_DAY},
        {"10 minutes", 10 * US_PER_MIN},
        {"2 hours", 2 * US_PER_HOUR},
        {"1h30m", 90 * US_PER_MIN},
        {"1 Hour 30 Minutes", 90 * US_PER_MIN},
        {"1.5h", 90 * US_PER_MIN},
        {"0.25s", 250 * US_PER_MS},
        {"0s", 0},
        {"0", 0}, /* zero needs no unit */
        {" 0.0 ", 0},
        {"  5 m  ", 5 * US_PER_MIN},
        {"P30D", 30 * US_PER_DAY},
        {"PT12H", 12 * US_PER_HOUR},
        {"P1DT2H", 26 * US_PER_HOUR},
        {"PT0.5S", 500 * US_PER_MS},
        {"P1M", 30 * US_PER_DAY},
        {"PT1M", US_PER_MIN},
        {"p2w", 14 * US_PER_DAY},
        {"P1Y2M3W4DT5H6M7S", 365 * US_PER_DAY + 60 * US_PER_DAY + 21 * US_PER_DAY +
                                 4 * US_PER_DAY + 5 * US_PER_HOUR + 6 * US_PER_MIN +
                                 7 * US_PER_SEC},
    };
    Err err = {0};

    (void) state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
        int64_t us = -1;

        if (!duration_parse(cases[i].text, &us, &err))
            fail_msg("duration \"%s\": %s", cases[i].text, err.msg);
        if (us != cases[i].us)
            fail_msg("duration \"%s\": got %lld, expected %lld", cases[i].text, (long long) us,
                     (long long) cases[i].us);
    }
}

static void
test_durations_reject_negative_empty_overflow_and_junk(void **state)
{
    static const struct
    {
        const char *text;
        const char *why;
    } cases[] = {
        {"", "empty input"},
        {"   ", "empty input"},
        {"-5d", "negative"},
        {"1d -2h", "negative"},
        {"5", "needs a unit"},
        {"0.5", "needs a unit"},
        {"1d 0", "needs a unit"},
        {"5x", "unknown unit \"x\""},
        {"5 fortnights", "unknown unit"},
        {"d", "expected a number"},
        {"1..5h", "digit after the decimal point"},
        {"P", "no components"},
        {"PT", "no components"},
        {"P1DT", "T must be followed by hours, minutes or seconds"},
        {"P1DT", "drop the T for days only (P1D)"},
        {"P1H", "designators"},
        {"PT1D", "designators"},
        {"P1D2Y", "out of order"},
        {"P 1D", "expected a number"},
        {"99999999999999999999d", "too large"},
        {"300000y", "too large"},
        {"106751991d 5h", "too large"},
    };
    Err err;

    (void) state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
        int64_t us = 42;

        memset(&err, 0, sizeof err);
        if (duration_parse(cases[i].text, &us, &err))
            fail_msg("duration \"%s\" was accepted as %lld", cases[i].text, (long long) us);
        assert_int_equal(err.code, EC_FORMAT);
        assert_int_equal(us, 42);
        assert_contains(err.msg, cases[i].why);
    }
    memset(&err, 0, sizeof err);
    {
        int64_t us;

        assert_false(duration_parse("5x", &us, &err));
        assert_string_equal(err.msg, "invalid duration \"5x\": unknown unit \"x\" (use us, ms, "
                                     "s, min, h, d, w, months, years)");
    }
}

static void
test_durations_format_compactly_and_truncate(void **state)
{
    static const struct
    {
        int64_t us;
        const char *text;
    } cases[] = {
        {0, "0s"},
        {750, "750us"},
        {250 * US_PER_MS, "250ms"},
        {250 * US_PER_MS + 999, "250ms"},
        {1500 * US_PER_MS, "1.500s"},
        {30 * US_PER_SEC, "30s"},
        {5 * US_PER_MIN + 3 * US_PER_SEC, "5m 03s"},
        {4 * US_PER_HOUR + 5 * US_PER_MIN + 6 * US_PER_SEC, "4h 05m 06s"},
        {3 * US_PER_DAY + 4 * US_PER_HOUR + 5 * US_PER_MIN + 59 * US_PER_SEC, "3d 4h 05m"},
        {90 * US_PER_DAY, "90d 0h 00m"},
        {-250 * US_PER_MS, "-250ms"},
        {INT64_MAX, "106751991d 4h 00m"},
        {INT64_MIN, "-106751991d 4h 00m"},
    };
    char out[48];

    (void) state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
        memset(out, 'x', sizeof out);
        duration_format(cases[i].us, out, sizeof out);
        assert_string_equal(out, cases[i].text);
    }
    /* a short buffer is truncated, never overflowed */
    memset(out, 'x', sizeof out);
    duration_format(3 * US_PER_DAY, out, 4);
    assert_string_equal(out, "3d ");
    assert_int_equal(out[4], 'x');
}

/* Partition bounds that read as days: open ends by name, midnights as dates,
 * anything else left to the caller. */
static void
test_day_bounds(void **state)
{
    char out[32];
    (void) state;

    assert_true(civil_format_day_bound(INT64_MIN, out, sizeof out));
    assert_string_equal(out, "MINVALUE");
    assert_true(civil_format_day_bound(INT64_MAX, out, sizeof out));
    assert_string_equal(out, "MAXVALUE");
    assert_true(civil_format_day_bound(INT64_C(1782864000000000), out, sizeof out));
    assert_string_equal(out, "2026-07-01");
    assert_true(civil_format_day_bound(-INT64_C(86400000000), out, sizeof out));
    assert_string_equal(out, "1969-12-31");
    strcpy(out, "untouched");
    assert_false(civil_format_day_bound(INT64_C(1782864000000001), out, sizeof out));
    assert_false(civil_format_day_bound(INT64_C(1782864000000000) + 3600000000, out, sizeof out));
    assert_string_equal(out, "untouched");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iso_utc_times_give_the_known_instants),
        cmocka_unit_test(test_date_cache_changes_no_result),
        cmocka_unit_test(test_iso_accepts_every_offset_form),
        cmocka_unit_test(test_zone_names_beyond_utc_stay_errors),
        cmocka_unit_test(test_iso_accepts_t_lowercase_t_and_space_as_separator),
        cmocka_unit_test(test_iso_seconds_are_optional_and_no_offset_means_utc),
        cmocka_unit_test(test_iso_fraction_digits_are_scaled_to_microseconds),
        cmocka_unit_test(test_iso_truncates_fraction_digits_beyond_six),
        cmocka_unit_test(test_iso_reads_postgresql_text_output),
        cmocka_unit_test(test_iso_date_only_means_midnight),
        cmocka_unit_test(test_iso_hour_24_is_the_next_midnight),
        cmocka_unit_test(test_iso_accepts_february_29_only_in_leap_years),
        cmocka_unit_test(test_iso_rejects_impossible_dates),
        cmocka_unit_test(test_iso_rejects_impossible_times),
        cmocka_unit_test(test_iso_rejects_malformed_text),
        cmocka_unit_test(test_iso_rejects_trailing_junk),
        cmocka_unit_test(test_iso_rejects_empty_input),
        cmocka_unit_test(test_iso_rejects_postgresql_bc_and_infinity),
        cmocka_unit_test(test_error_messages_quote_the_text_and_name_the_problem),
        cmocka_unit_test(test_error_messages_truncate_long_text),
        cmocka_unit_test(test_error_messages_escape_quotes_and_control_bytes),
        cmocka_unit_test(test_time_parse_reads_only_len_bytes),
        cmocka_unit_test(test_time_parse_iso_reads_utc_without_a_parser),
        cmocka_unit_test(test_epoch_seconds_accept_a_fraction_and_a_sign),
        cmocka_unit_test(test_epoch_milliseconds_and_microseconds_scale_correctly),
        cmocka_unit_test(test_epoch_overflow_is_an_error_not_a_wrap),
        cmocka_unit_test(test_epoch_rejects_junk_and_empty_input),
        cmocka_unit_test(test_pattern_reads_day_month_year_and_time),
        cmocka_unit_test(test_pattern_reads_month_names_case_insensitively),
        cmocka_unit_test(test_pattern_reads_fraction_and_every_offset_form),
        cmocka_unit_test(test_pattern_reads_day_of_year),
        cmocka_unit_test(test_pattern_matches_literals_and_percent_signs),
        cmocka_unit_test(test_pattern_checks_the_weekday_against_the_date),
        cmocka_unit_test(test_pattern_rejects_impossible_dates_and_junk),
        cmocka_unit_test(test_pattern_errors_are_caught_when_the_parser_is_made),
        cmocka_unit_test(test_zone_new_york_reads_standard_and_daylight_time),
        cmocka_unit_test(test_zone_new_york_gap_reads_with_the_offset_before_the_transition),
        cmocka_unit_test(test_zone_new_york_overlap_reads_the_first_occurrence),
        cmocka_unit_test(test_zone_berlin_reads_summer_winter_gap_and_overlap),
        cmocka_unit_test(test_zone_round_trips_every_quarter_hour_of_a_year),
        cmocka_unit_test(test_zone_parsers_with_different_zones_can_alternate),
        cmocka_unit_test(test_zone_utc_spellings_take_the_utc_path),
        cmocka_unit_test(test_zone_unknown_or_unsafe_names_are_config_errors),
        cmocka_unit_test(test_durations_accept_units_words_and_iso_8601),
        cmocka_unit_test(test_durations_reject_negative_empty_overflow_and_junk),
        cmocka_unit_test(test_durations_format_compactly_and_truncate),
        cmocka_unit_test(test_day_bounds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
