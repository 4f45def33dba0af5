/*
 * Unit tests for the pure parts of the route stage: window calculus
 * (windows.c), bound codec (catalog.c) and planning against a partition list
 * built in memory (partitions.c, no server).  Expected instants were computed
 * independently with GNU date (`date -u -d 2026-07-01 +%s` = 1782864000) and
 * zone transitions with zdump.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/catalog.h"
#include "v7fill/civil.h"
#include "v7fill/mem.h"
#include "v7fill/partitions.h"
#include "v7fill/partman.h"
#include "v7fill/timeparse.h"

static int64_t
D(int y, int m, int d)
{
    return civil_days_from_date(y, m, d) * US_PER_DAY;
}

static void
assert_window(Granularity g, int64_t us, int64_t lo, int64_t hi)
{
    Window w;
    Err err = {0};
    int64_t a, b;

    assert_true(window_at(g, NULL, us, &w, &err));
    assert_int_equal(w.lower_us, lo);
    assert_int_equal(w.upper_us, hi);
    window_of(g, us, &a, &b);
    assert_int_equal(a, lo);
    assert_int_equal(b, hi);
}

static void
test_month_window_holds_its_first_and_last_microsecond(void **state)
{
    (void) state;
    assert_int_equal(D(2026, 7, 1), INT64_C(1782864000000000));
    assert_window(GRAN_MONTH, D(2026, 7, 1), D(2026, 7, 1), D(2026, 8, 1));
    assert_window(GRAN_MONTH, D(2026, 8, 1) - 1, D(2026, 7, 1), D(2026, 8, 1));
    assert_window(GRAN_MONTH, D(2026, 12, 31) + 5, D(2026, 12, 1), D(2027, 1, 1));
    assert_window(GRAN_AUTO, D(2026, 7, 15), D(2026, 7, 1), D(2026, 8, 1));
    /* before the epoch: floor, not truncation */
    assert_window(GRAN_MONTH, -1, D(1969, 12, 1), D(1970, 1, 1));
}

static void
test_february_has_29_days_in_leap_years_only(void **state)
{
    (void) state;
    assert_window(GRAN_MONTH, D(2024, 2, 10), D(2024, 2, 1), D(2024, 3, 1));
    assert_int_equal(D(2024, 3, 1) - D(2024, 2, 1), 29 * US_PER_DAY);
    assert_int_equal(D(2026, 3, 1) - D(2026, 2, 1), 28 * US_PER_DAY);
    assert_int_equal(D(2100, 3, 1) - D(2100, 2, 1), 28 * US_PER_DAY);
    assert_int_equal(D(2000, 3, 1) - D(2000, 2, 1), 29 * US_PER_DAY);
    assert_window(GRAN_DAY, D(2024, 2, 29) + 1, D(2024, 2, 29), D(2024, 3, 1));
    assert_window(GRAN_YEAR, D(2024, 6, 1), D(2024, 1, 1), D(2025, 1, 1));
    assert_int_equal(D(2025, 1, 1) - D(2024, 1, 1), 366 * US_PER_DAY);
}

static void
test_quarters_start_in_january_april_july_october(void **state)
{
    (void) state;
    assert_window(GRAN_QUARTER, D(2026, 1, 1), D(2026, 1, 1), D(2026, 4, 1));
    assert_window(GRAN_QUARTER, D(2026, 5, 10), D(2026, 4, 1), D(2026, 7, 1));
    assert_window(GRAN_QUARTER, D(2026, 9, 30), D(2026, 7, 1), D(2026, 10, 1));
    assert_window(GRAN_QUARTER, D(2026, 12, 31), D(2026, 10, 1), D(2027, 1, 1));
}

static void
test_weeks_start_on_monday_and_carry_the_iso_week(void **state)
{
    Window w;
    Err err = {0};
    (void) state;

    /* 2026-07-01 is a Wednesday: week 27 runs from Monday 2026-06-29 */
    assert_window(GRAN_WEEK, D(2026, 7, 1), D(2026, 6, 29), D(2026, 7, 6));
    assert_true(window_at(GRAN_WEEK, NULL, D(2026, 7, 1), &w, &err));
    assert_int_equal(w.iso_year, 2026);
    assert_int_equal(w.iso_week, 27);
    /* Sunday belongs to the week before */
    assert_window(GRAN_WEEK, D(2026, 7, 5) + US_PER_HOUR, D(2026, 6, 29), D(2026, 7, 6));
}

static void
test_iso_week_53_and_weeks_across_new_year(void **state)
{
    Window w;
    Err err = {0};
    (void) state;

    /* 2026 starts on a Thursday: it has 53 ISO weeks; 2027-01-01 (Friday) is in 2026-W53 */
    assert_true(window_at(GRAN_WEEK, NULL, D(2027, 1, 1), &w, &err));
    assert_int_equal(w.lower_us, D(2026, 12, 28));
    assert_int_equal(w.iso_year, 2026);
    assert_int_equal(w.iso_week, 53);
    /* 2020 (leap, starts Wednesday) has week 53 too; 2021-01-03 belongs to it */
    assert_true(window_at(GRAN_WEEK, NULL, D(2021, 1, 3), &w, &err));
    assert_int_equal(w.iso_year, 2020);
    assert_int_equal(w.iso_week, 53);
    /* 2024-12-30 (Monday) starts 2025-W01 */
    assert_true(window_at(GRAN_WEEK, NULL, D(2024, 12, 31), &w, &err));
    assert_int_equal(w.lower_us, D(2024, 12, 30));
    assert_int_equal(w.iso_year, 2025);
    assert_int_equal(w.iso_week, 1);
}

static void
assert_name(Granularity g, const char *pattern, int64_t us, const char *expected)
{
    Window w;
    Err err = {0};
    char name[64];

    assert_true(window_at(g, NULL, us, &w, &err));
    assert_true(window_name(g, pattern, "events", &w, name, sizeof name, &err));
    assert_string_equal(name, expected);
}

static void
test_default_names_per_granularity(void **state)
{
    (void) state;
    assert_name(GRAN_MONTH, NULL, D(2026, 7, 9), "events__2026_07");
    assert_name(GRAN_YEAR, NULL, D(2026, 7, 9), "events__2026");
    assert_name(GRAN_DAY, NULL, D(2026, 7, 9), "events__2026_07_09");
    assert_name(GRAN_WEEK, NULL, D(2027, 1, 1), "events__2026_w53");
    assert_name(GRAN_WEEK, NULL, D(2026, 1, 7), "events__2026_w02");
    assert_name(GRAN_QUARTER, NULL, D(2026, 7, 9), "events__2026_q3");
}

static void
test_name_patterns_expand_every_escape(void **state)
{
    (void) state;
    assert_name(GRAN_DAY, "%t_%Y%j", D(2026, 2, 1), "events_2026032");
    assert_name(GRAN_MONTH, "p%Y%m_100%%", D(2026, 7, 9), "p202607_100%");
    assert_name(GRAN_QUARTER, "%t_%Y_%m", D(2026, 8, 9), "events_2026_07");
}

static void
test_patterns_that_cannot_tell_windows_apart_are_refused(void **state)
{
    Err err = {0};
    (void) state;

    assert_false(window_pattern_check(GRAN_MONTH, "%t_%Y", &err));
    assert_int_equal(err.code, EC_USAGE);
    assert_non_null(strstr(err.msg, "does not tell month windows apart"));
    assert_false(window_pattern_check(GRAN_WEEK, "%t_%Y_%V", &err));
    assert_false(window_pattern_check(GRAN_DAY, "%t_%Y_%m", &err));
    assert_true(window_pattern_check(GRAN_DAY, "%t_%Y_%j", &err));
    assert_false(window_pattern_check(GRAN_MONTH, "%t_%Y_%m_%x", &err));
    assert_non_null(strstr(err.msg, "unknown escape"));
    assert_false(window_pattern_check(GRAN_MONTH, "%t_%Y_%m%", &err));
}

static void
test_names_longer_than_63_bytes_are_an_error(void **state)
{
    Window w;
    Err err = {0};
    char name[64];
    /* 56 bytes + "__2026_07" = 65 */
    const char *table = "a_table_name_that_is_long_enough_to_overflow_the_limit__";
    (void) state;

    assert_true(window_at(GRAN_MONTH, NULL, D(2026, 7, 1), &w, &err));
    assert_false(window_name(GRAN_MONTH, NULL, table, &w, name, sizeof name, &err));
    assert_int_equal(err.code, EC_CONFIG);
    assert_non_null(strstr(err.msg, "at most 63"));
    /* exactly 63 is fine: 54 + 9 */
    assert_true(window_name(GRAN_MONTH, NULL,
                            "a_table_name_that_is_long_enough_to_just_fit_the_limit", &w, name,
                            sizeof name, &err));
    assert_int_equal(strlen(name), 63);
}

static void
test_granularity_names_round_trip(void **state)
{
    Granularity g;
    Err err = {0};
    (void) state;

    assert_true(granularity_parse("quarter", &g, &err));
    assert_int_equal(g, GRAN_QUARTER);
    assert_true(granularity_parse("weekly", &g, &err));
    assert_int_equal(g, GRAN_WEEK);
    assert_string_equal(granularity_name(GRAN_DAY), "day");
    assert_false(granularity_parse("fortnight", &g, &err));
    assert_int_equal(err.code, EC_USAGE);
}

static void
test_local_windows_start_at_local_midnight(void **state)
{
    TimeParser *zone = NULL;
    Window w;
    Err err = {0};
    (void) state;

    assert_true(time_parser_new_window("Europe/Berlin", &zone, &err));
    /* July in Berlin (CEST, +02): 2026-06-30T22:00Z .. 2026-07-31T22:00Z */
    assert_true(window_at(GRAN_MONTH, zone, D(2026, 7, 15), &w, &err));
    assert_int_equal(w.lower_us, D(2026, 6, 30) + 22 * US_PER_HOUR);
    assert_int_equal(w.upper_us, D(2026, 7, 31) + 22 * US_PER_HOUR);
    assert_int_equal(w.month, 7);
    /* 2026-06-30T23:00Z is already July 1st in Berlin */
    assert_true(window_at(GRAN_MONTH, zone, D(2026, 6, 30) + 23 * US_PER_HOUR, &w, &err));
    assert_int_equal(w.month, 7);
    /* the day clocks go forward (2026-03-29) has 23 hours */
    assert_true(window_at(GRAN_DAY, zone, D(2026, 3, 29) + 12 * US_PER_HOUR, &w, &err));
    assert_int_equal(w.lower_us, D(2026, 3, 28) + 23 * US_PER_HOUR);
    assert_int_equal(w.upper_us - w.lower_us, 23 * US_PER_HOUR);
    /* and the day they go back (2026-10-25) 25 */
    assert_true(window_at(GRAN_DAY, zone, D(2026, 10, 25) + 12 * US_PER_HOUR, &w, &err));
    assert_int_equal(w.upper_us - w.lower_us, 25 * US_PER_HOUR);
    time_parser_free(zone);
}

static void
test_local_day_whose_midnight_falls_in_a_dst_gap_starts_after_it(void **state)
{
    TimeParser *zone = NULL;
    Window w;
    Err err = {0};
    (void) state;

    /* Sao Paulo, 2018-11-04: 00:00 -03 became 01:00 -02, i.e. 03:00Z */
    assert_true(time_parser_new_window("America/Sao_Paulo", &zone, &err));
    assert_true(window_at(GRAN_DAY, zone, D(2018, 11, 4) + 12 * US_PER_HOUR, &w, &err));
    assert_int_equal(w.lower_us, D(2018, 11, 4) + 3 * US_PER_HOUR);
    assert_int_equal(w.upper_us, D(2018, 11, 5) + 2 * US_PER_HOUR);
    /* the previous day ends exactly there */
    assert_true(window_at(GRAN_DAY, zone, D(2018, 11, 4) + 2 * US_PER_HOUR, &w, &err));
    assert_int_equal(w.upper_us, D(2018, 11, 4) + 3 * US_PER_HOUR);
    time_parser_free(zone);

    /* Apia skipped 2011-12-30 entirely: 29th and 31st still meet */
    assert_true(time_parser_new_window("Pacific/Apia", &zone, &err));
    assert_true(window_at(GRAN_DAY, zone, D(2011, 12, 30) + 9 * US_PER_HOUR, &w, &err));
    assert_int_equal(w.day, 29);
    assert_int_equal(w.upper_us, D(2011, 12, 30) + 10 * US_PER_HOUR);
    assert_true(window_at(GRAN_DAY, zone, D(2011, 12, 30) + 10 * US_PER_HOUR, &w, &err));
    assert_int_equal(w.day, 31);
    assert_int_equal(w.lower_us, D(2011, 12, 30) + 10 * US_PER_HOUR);
    time_parser_free(zone);
}

static void
test_local_day_whose_midnight_happens_twice_starts_at_the_first(void **state)
{
    TimeParser *zone = NULL;
    TimeParser *import = NULL;
    Window w;
    Err err = {0};
    int64_t us = 0;
    (void) state;

    /* Havana, 2024-11-03: 01:00 CDT (-04, 05:00Z) went back to 00:00 CST
     * (-05), so local 00:00-00:59 happened from 04:00Z and again from 05:00Z.
     * The day starts at the first: an instant at 04:30Z shows the 3rd. */
    assert_true(time_parser_new_window("America/Havana", &zone, &err));
    assert_true(window_at(GRAN_DAY, zone, D(2024, 11, 3) + 4 * US_PER_HOUR + 30 * US_PER_MIN, &w,
                          &err));
    assert_int_equal(w.day, 3);
    assert_int_equal(w.lower_us, D(2024, 11, 3) + 4 * US_PER_HOUR);
    assert_int_equal(w.upper_us - w.lower_us, 25 * US_PER_HOUR);
    assert_true(window_at(GRAN_DAY, zone, D(2024, 11, 3) + 4 * US_PER_HOUR - 1, &w, &err));
    assert_int_equal(w.day, 2);
    assert_int_equal(w.upper_us, D(2024, 11, 3) + 4 * US_PER_HOUR);
    /* an imported local time reads as PostgreSQL reads it: the second */
    assert_true(time_parser_new("iso", "America/Havana", &import, &err));
    assert_true(time_parse(import, "2024-11-03 00:00", 16, &us, &err));
    assert_int_equal(us, D(2024, 11, 3) + 5 * US_PER_HOUR);
    assert_true(time_parse(zone, "2024-11-03 00:00", 16, &us, &err));
    assert_int_equal(us, D(2024, 11, 3) + 4 * US_PER_HOUR);
    time_parser_free(zone);
    time_parser_free(import);
}

static void
test_times_outside_years_1_to_9999_are_refused(void **state)
{
    Window w;
    Err err = {0};
    (void) state;

    assert_false(window_at(GRAN_MONTH, NULL, D(10000, 1, 1), &w, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_true(window_at(GRAN_MONTH, NULL, D(9999, 12, 31), &w, &err));
}

/* ------------------------------------------------------------ bound codec */

static void
test_uuid_bounds_decode_to_their_millisecond(void **state)
{
    Partition p;
    Err err = {0};
    (void) state;

    memset(&p, 0, sizeof p);
    assert_true(catalog_parse_bound(KEY_UUID7,
                                    "FOR VALUES FROM ('019f1af9-b400-7000-8000-000000000000') TO "
                                    "('019fba9e-d800-0000-0000-000000000000')",
                                    &p, &err));
    assert_false(p.is_default);
    assert_int_equal(p.lower_us, D(2026, 7, 1));
    assert_int_equal(p.upper_us, D(2026, 8, 1));
    assert_string_equal(p.lower_text, "019f1af9-b400-7000-8000-000000000000");
    assert_string_equal(p.upper_text, "019fba9e-d800-0000-0000-000000000000");
    free(p.lower_text);
    free(p.upper_text);

    /* a bound inside a millisecond: only the next millisecond starts cleanly */
    assert_true(catalog_parse_bound(KEY_UUID7,
                                    "FOR VALUES FROM (MINVALUE) TO "
                                    "('019f1af9-b400-7fff-bfff-ffffffffffff')",
                                    &p, &err));
    assert_int_equal(p.lower_us, INT64_MIN);
    assert_null(p.lower_text);
    assert_int_equal(p.upper_us, D(2026, 7, 1) + 1000);
    free(p.upper_text);

    /* ... at the first microsecond whose ids all lie above it (rand_a 0x123 =
     * 291: v7fill mints it for 72 µs, as `v7fill uuid time` reads it) */
    assert_true(catalog_parse_bound(KEY_UUID7,
                                    "FOR VALUES FROM ('019f1af9-b400-7123-8000-000000000000') TO "
                                    "('019f1af9-b400-7124-0000-000000000000')",
                                    &p, &err));
    assert_int_equal(p.lower_us, D(2026, 7, 1) + 72);
    assert_int_equal(p.upper_us, D(2026, 7, 1) + 72);
    /* one microsecond, yet two different bounds, in this order */
    assert_true(catalog_bound_cmp(p.lower_us, p.lower_text, p.upper_us, p.upper_text) < 0);
    assert_true(catalog_bound_cmp(p.upper_us, p.upper_text, p.lower_us, p.lower_text) > 0);
    /* pg_partman's bare floor and the minimum v7 are one place */
    assert_int_equal(catalog_bound_cmp(D(2026, 7, 1), "019f1af9-b400-0000-0000-000000000000",
                                       D(2026, 7, 1), "019f1af9-b400-7000-8000-000000000000"),
                     0);
    assert_int_equal(catalog_bound_cmp(D(2026, 7, 1), NULL, D(2026, 7, 1),
                                       "019f1af9-b400-0000-0000-000000000000"),
                     0);
    free(p.lower_text);
    free(p.upper_text);
}

static void
test_timestamp_bounds_read_any_offset_bc_and_infinity(void **state)
{
    Partition p;
    Err err = {0};
    (void) state;

    memset(&p, 0, sizeof p);
    assert_true(catalog_parse_bound(KEY_TIMESTAMPTZ,
                                    "FOR VALUES FROM ('2026-06-30 22:00:00+00') TO "
                                    "('2026-08-01 00:00:00.5+05:30')",
                                    &p, &err));
    assert_int_equal(p.lower_us, D(2026, 6, 30) + 22 * US_PER_HOUR);
    assert_int_equal(p.upper_us, D(2026, 7, 31) + 18 * US_PER_HOUR + 30 * US_PER_MIN + 500000);
    free(p.lower_text);
    free(p.upper_text);

    assert_true(catalog_parse_bound(KEY_TIMESTAMPTZ,
                                    "FOR VALUES FROM ('0044-03-15 00:00:00+00 BC') TO ('infinity')",
                                    &p, &err));
    assert_int_equal(p.lower_us, D(-43, 3, 15));
    assert_int_equal(p.upper_us, INT64_MAX);
    free(p.lower_text);
    free(p.upper_text);

    assert_true(catalog_parse_bound(KEY_TIMESTAMP,
                                    "FOR VALUES FROM ('2026-07-01 00:00:00') TO ('2026-08-01 "
                                    "00:00:00.25')",
                                    &p, &err));
    assert_int_equal(p.upper_us, D(2026, 8, 1) + 250000);
    free(p.lower_text);
    free(p.upper_text);

    /* a timestamp without offset is not a timestamptz bound */
    assert_false(catalog_parse_bound(KEY_TIMESTAMPTZ,
                                     "FOR VALUES FROM ('2026-07-01 00:00:00') TO (MAXVALUE)", &p,
                                     &err));
    assert_int_equal(err.code, EC_FORMAT);
}

static void
test_bigint_bounds_are_epoch_milliseconds(void **state)
{
    Partition p;
    Err err = {0};
    (void) state;

    memset(&p, 0, sizeof p);
    assert_true(catalog_parse_bound(KEY_BIGINT_MS,
                                    "FOR VALUES FROM ('1782864000000') TO ('9223372036854775807')",
                                    &p, &err));
    assert_int_equal(p.lower_us, D(2026, 7, 1));
    assert_int_equal(p.upper_us, INT64_MAX); /* clamped, like MAXVALUE */
    assert_string_equal(p.upper_text, "9223372036854775807");
    free(p.lower_text);
    free(p.upper_text);
}

static void
test_default_and_malformed_bounds(void **state)
{
    Partition p;
    Err err = {0};
    (void) state;

    memset(&p, 0, sizeof p);
    assert_true(catalog_parse_bound(KEY_UUID7, "DEFAULT", &p, &err));
    assert_true(p.is_default);
    assert_false(catalog_parse_bound(KEY_UUID7, "FOR VALUES IN ('a')", &p, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_false(catalog_parse_bound(KEY_UUID7, "FOR VALUES FROM ('not-a-uuid') TO (MAXVALUE)",
                                     &p, &err));
    assert_false(catalog_parse_bound(KEY_BIGINT_MS, "FOR VALUES FROM ('12x') TO (MAXVALUE)", &p,
                                     &err));
    assert_false(catalog_parse_bound(KEY_UUID7, "FOR VALUES FROM ('019f1af9-b400-7000-8000-",
                                     &p, &err));
}

static void
test_bound_literals_per_key_kind(void **state)
{
    char *s = NULL;
    Err err = {0};
    (void) state;

    assert_true(catalog_bound_literal(KEY_UUID7, BOUND_STYLE_MIN_V7, D(2026, 9, 1), &s, &err));
    assert_string_equal(s, "01a05a43-fc00-7000-8000-000000000000");
    free(s);
    assert_true(catalog_bound_literal(KEY_UUID7, BOUND_STYLE_BARE, D(2026, 10, 1), &s, &err));
    assert_string_equal(s, "01a0f4c2-c400-0000-0000-000000000000");
    free(s);
    assert_true(
        catalog_bound_literal(KEY_TIMESTAMPTZ, BOUND_STYLE_MIN_V7, D(2026, 7, 1), &s, &err));
    assert_string_equal(s, "2026-07-01 00:00:00+00");
    free(s);
    assert_true(catalog_bound_literal(KEY_TIMESTAMP, BOUND_STYLE_MIN_V7, D(2026, 7, 1) + 1500000,
                                      &s, &err));
    assert_string_equal(s, "2026-07-01 00:00:01.5");
    free(s);
    assert_true(catalog_bound_literal(KEY_BIGINT_MS, BOUND_STYLE_MIN_V7, D(2026, 7, 1), &s, &err));
    assert_string_equal(s, "1782864000000");
    free(s);
    /* uuid keys cannot hold times before 1970 */
    assert_false(catalog_bound_literal(KEY_UUID7, BOUND_STYLE_MIN_V7, D(1969, 12, 1), &s, &err));
    assert_null(s);
}

/* ------------------------------------------- planning without a server */

static void
add_part(TargetTable *t, const char *name, int64_t lo, int64_t hi)
{
    Partition p;
    Err err = {0};

    memset(&p, 0, sizeof p);
    p.schema = xstrdup("public");
    p.name = xstrdup(name);
    p.lower_us = lo;
    p.upper_us = hi;
    if (lo != INT64_MIN)
        assert_true(catalog_bound_literal(t->key_kind, t->bound_style, lo, &p.lower_text, &err));
    if (hi != INT64_MAX)
        assert_true(catalog_bound_literal(t->key_kind, t->bound_style, hi, &p.upper_text, &err));
    p.bound_expr = xstrdup("(test)");
    catalog_add_partition(t, &p);
}

static TargetTable *
new_target(KeyKind kind, BoundStyle style)
{
    TargetTable *t = xcalloc(1, sizeof *t);

    t->schema = xstrdup("public");
    t->name = xstrdup("events");
    t->key_kind = kind;
    t->key_column = xstrdup("id");
    t->bound_style = style;
    t->owner = xstrdup("postgres");
    return t;
}

static void
test_uncovered_parts_of_a_window(void **state)
{
    TargetTable *t = new_target(KEY_UUID7, BOUND_STYLE_MIN_V7);
    Span *s = NULL;
    size_t n;
    (void) state;

    add_part(t, "events_old", INT64_MIN, D(2026, 3, 15));
    add_part(t, "events__2026_05", D(2026, 5, 1), D(2026, 6, 1));
    n = partitions_uncovered(t, D(2026, 1, 1), D(2027, 1, 1), &s);
    assert_int_equal(n, 2);
    assert_int_equal(s[0].lower_us, D(2026, 3, 15));
    assert_int_equal(s[0].upper_us, D(2026, 5, 1));
    assert_int_equal(s[1].lower_us, D(2026, 6, 1));
    assert_int_equal(s[1].upper_us, D(2027, 1, 1));
    free(s);
    n = partitions_uncovered(t, D(2026, 5, 1), D(2026, 6, 1), &s);
    assert_int_equal(n, 0);
    free(s);
    assert_non_null(catalog_partition_for(t, D(2026, 5, 31)));
    assert_null(catalog_partition_for(t, D(2026, 6, 1)));
    assert_string_equal(catalog_partition_for(t, 0)->name, "events_old");
    catalog_target_free(t);

    /* a partition inside one microsecond is seen, and the gaps meet its bounds */
    t = new_target(KEY_UUID7, BOUND_STYLE_MIN_V7);
    {
        Partition p;
        Err err = {0};

        memset(&p, 0, sizeof p);
        assert_true(catalog_parse_bound(KEY_UUID7,
                                        "FOR VALUES FROM ('019f1af9-b400-7001-8000-000000000000') "
                                        "TO ('019f1af9-b400-7002-0000-000000000000')",
                                        &p, &err));
        p.schema = xstrdup("public");
        p.name = xstrdup("tiny");
        p.bound_expr = xstrdup("(test)");
        catalog_add_partition(t, &p);
    }
    n = partitions_uncovered(t, D(2026, 7, 1), D(2026, 7, 2), &s);
    assert_int_equal(n, 2);
    assert_int_equal(s[0].lower_us, D(2026, 7, 1));
    assert_null(s[0].lower_text);
    assert_string_equal(s[0].upper_text, "019f1af9-b400-7001-8000-000000000000");
    assert_string_equal(s[1].lower_text, "019f1af9-b400-7002-0000-000000000000");
    assert_int_equal(s[1].upper_us, D(2026, 7, 2));
    assert_null(s[1].upper_text);
    free(s);
    catalog_target_free(t);
}

static void
test_granularity_is_inferred_from_regular_partitions(void **state)
{
    TargetTable *t = new_target(KEY_UUID7, BOUND_STYLE_MIN_V7);
    Granularity g;
    Err err = {0};
    (void) state;

    assert_true(partitions_infer_granularity(t, NULL, &g, &err));
    assert_int_equal(g, GRAN_MONTH); /* empty: month */
    add_part(t, "events_old", INT64_MIN, D(2026, 1, 1));
    add_part(t, "w1", D(2026, 6, 29), D(2026, 7, 6));
    add_part(t, "w2", D(2026, 7, 6), D(2026, 7, 13));
    add_part(t, "y", D(2027, 1, 1), D(2028, 1, 1));
    assert_true(partitions_infer_granularity(t, NULL, &g, &err));
    assert_int_equal(g, GRAN_WEEK); /* two weeks beat one year; the catch-all is ignored */
    catalog_target_free(t);
}

static void
test_plan_fills_only_gaps_and_reuses_neighbour_bounds(void **state)
{
    TargetTable *t = new_target(KEY_UUID7, BOUND_STYLE_BARE);
    EnsureOptions o;
    WindowPlan *plans = NULL;
    size_t n = 0;
    Err err = {0};
    (void) state;

    add_part(t, "events_old", INT64_MIN, D(2026, 3, 15));
    t->bound_style = BOUND_STYLE_MIN_V7;
    add_part(t, "events__2026_05", D(2026, 5, 1), D(2026, 6, 1));
    t->bound_style = BOUND_STYLE_BARE; /* events_old bare, May min-v7, the table's style bare */
    ensure_options_default(&o);
    o.granularity = GRAN_MONTH;
    assert_true(partitions_plan_range(t, D(2026, 3, 1), D(2026, 7, 1), &o, &plans, &n, &err));
    assert_int_equal(n, 4);
    /* March: only [15th, April) is missing */
    assert_string_equal(plans[0].name, "events__2026_03");
    assert_true(plans[0].partial);
    assert_int_equal(plans[0].npieces, 1);
    assert_string_equal(plans[0].pieces[0].name, "events__2026_03_p1");
    assert_int_equal(plans[0].pieces[0].lower_us, D(2026, 3, 15));
    /* the edge meeting events_old reuses its (bare) bound */
    assert_string_equal(plans[0].pieces[0].lower_text, "019ceeca-e400-0000-0000-000000000000");
    /* April: whole; its lower edge in the table's (bare) style, its upper edge
     * meets May and takes May's min-v7 bound */
    assert_false(plans[1].partial);
    assert_string_equal(plans[1].pieces[0].name, "events__2026_04");
    assert_string_equal(plans[1].pieces[0].lower_text, "019d4657-0000-0000-0000-000000000000");
    assert_string_equal(plans[1].pieces[0].upper_text, "019de0d5-c800-7000-8000-000000000000");
    /* May: covered */
    assert_int_equal(plans[2].npieces, 0);
    assert_int_equal(plans[3].npieces, 1);
    window_plans_free(plans, n);

    /* the same for times: only windows that need something */
    {
        int64_t times[] = {D(2026, 5, 3), D(2026, 6, 2), D(2026, 6, 20), D(2026, 4, 1)};
        assert_true(partitions_plan_times(t, times, 4, &o, &plans, &n, &err));
        assert_int_equal(n, 2);
        assert_string_equal(plans[0].name, "events__2026_04");
        assert_string_equal(plans[1].name, "events__2026_06");
        window_plans_free(plans, n);
    }
    catalog_target_free(t);
}

static void
test_plan_refuses_a_window_name_a_partition_with_other_bounds_has(void **state)
{
    TargetTable *t = new_target(KEY_TIMESTAMPTZ, BOUND_STYLE_MIN_V7);
    EnsureOptions o;
    WindowPlan *plans = NULL;
    size_t n = 0;
    Err err = {0};
    (void) state;

    add_part(t, "events__2026_07", D(2026, 6, 1), D(2026, 7, 1));
    ensure_options_default(&o);
    o.granularity = GRAN_MONTH;
    assert_false(partitions_plan_range(t, D(2026, 7, 1), D(2026, 8, 1), &o, &plans, &n, &err));
    assert_int_equal(err.code, EC_CONFIG);
    assert_non_null(strstr(err.msg, "other bounds"));
    catalog_target_free(t);
}

static void
test_plan_refuses_to_fill_around_local_windows_unless_a_zone_is_given(void **state)
{
    TargetTable *t = new_target(KEY_UUID7, BOUND_STYLE_MIN_V7);
    EnsureOptions o;
    WindowPlan *plans = NULL;
    size_t n = 0;
    Err err = {0};
    int64_t aug = D(2026, 8, 15);
    (void) state;

    /* June and July in Berlin (+02): made with --window-tz Europe/Berlin */
    add_part(t, "events__2026_06", D(2026, 5, 31) + 22 * US_PER_HOUR,
             D(2026, 6, 30) + 22 * US_PER_HOUR);
    add_part(t, "events__2026_07", D(2026, 6, 30) + 22 * US_PER_HOUR,
             D(2026, 7, 31) + 22 * US_PER_HOUR);
    ensure_options_default(&o);
    o.granularity = GRAN_MONTH;
    /* in UTC, August would leave [July 31st 22:00Z, August 1st) to a later
     * two-hour sliver, and the last hours of July 31st would make one now:
     * both refused, saying why */
    assert_false(partitions_plan_times(t, &aug, 1, &o, &plans, &n, &err));
    assert_int_equal(err.code, EC_CONFIG);
    /* the partition nearest August, and its edge nearest August */
    assert_non_null(strstr(err.msg, "events__2026_07"));
    assert_non_null(strstr(err.msg, "2026-07-31T22:00:00Z"));
    assert_non_null(strstr(err.detail, "UTC+02:00"));
    assert_non_null(strstr(err.hint, "--window-tz"));
    {
        int64_t late_july = D(2026, 7, 31) + 23 * US_PER_HOUR;

        memset(&err, 0, sizeof err);
        assert_false(partitions_plan_times(t, &late_july, 1, &o, &plans, &n, &err));
        assert_int_equal(err.code, EC_CONFIG);
    }
    /* a time its partitions cover needs no window: no error */
    {
        int64_t mid_july = D(2026, 7, 15);

        assert_true(partitions_plan_times(t, &mid_july, 1, &o, &plans, &n, &err));
        assert_int_equal(n, 0);
    }
    /* the zone they were made with: August whole, from local midnight */
    o.window_tz = "Europe/Berlin";
    assert_true(partitions_plan_times(t, &aug, 1, &o, &plans, &n, &err));
    assert_int_equal(n, 1);
    assert_false(plans[0].partial);
    assert_int_equal(plans[0].pieces[0].lower_us, D(2026, 7, 31) + 22 * US_PER_HOUR);
    assert_int_equal(plans[0].pieces[0].upper_us, D(2026, 8, 31) + 22 * US_PER_HOUR);
    window_plans_free(plans, n);
    /* UTC on purpose: UTC windows, and the sliver where they meet */
    o.window_tz = NULL;
    o.window_tz_given = true;
    assert_true(partitions_plan_times(t, &aug, 1, &o, &plans, &n, &err));
    assert_int_equal(n, 1);
    assert_false(plans[0].partial);
    assert_int_equal(plans[0].pieces[0].lower_us, D(2026, 8, 1));
    window_plans_free(plans, n);
    {
        int64_t late_july = D(2026, 7, 31) + 23 * US_PER_HOUR;

        assert_true(partitions_plan_times(t, &late_july, 1, &o, &plans, &n, &err));
        assert_int_equal(n, 1);
        assert_true(plans[0].partial);
        assert_int_equal(plans[0].pieces[0].lower_us, D(2026, 7, 31) + 22 * US_PER_HOUR);
        assert_int_equal(plans[0].pieces[0].upper_us, D(2026, 8, 1));
        window_plans_free(plans, n);
    }
    catalog_target_free(t);

    /* a catch-all up to a zone-like edge: only cutting a window there is refused */
    t = new_target(KEY_UUID7, BOUND_STYLE_MIN_V7);
    add_part(t, "old", INT64_MIN, D(2026, 7, 31) + 22 * US_PER_HOUR);
    o.window_tz_given = false;
    assert_true(partitions_plan_times(t, &aug, 1, &o, &plans, &n, &err));
    assert_int_equal(n, 1);
    assert_false(plans[0].partial);
    window_plans_free(plans, n);
    {
        int64_t late_july = D(2026, 7, 31) + 23 * US_PER_HOUR;

        memset(&err, 0, sizeof err);
        assert_false(partitions_plan_times(t, &late_july, 1, &o, &plans, &n, &err));
        assert_int_equal(err.code, EC_CONFIG);
        assert_non_null(strstr(err.msg, "public.old"));
        assert_non_null(strstr(err.msg, "2026-07-31T22:00:00Z"));
    }
    catalog_target_free(t);

    /* an edge a millisecond after midnight is no zone's
     * midnight: gaps next to it are filled as before */
    t = new_target(KEY_UUID7, BOUND_STYLE_MIN_V7);
    add_part(t, "odd", D(2026, 7, 1), D(2026, 8, 1) + 1000);
    o.window_tz_given = false;
    if (!partitions_plan_times(t, &aug, 1, &o, &plans, &n, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(n, 1);
    assert_true(plans[0].partial);
    window_plans_free(plans, n);
    catalog_target_free(t);

    /* an offset that is not a quarter hour (Africa/Monrovia until 1972,
     * -0:44:30) is a zone's midnight all the same: refused, not a sliver */
    t = new_target(KEY_UUID7, BOUND_STYLE_MIN_V7);
    add_part(t, "mon__1971_01_03", D(1971, 1, 3) + 44 * US_PER_MIN + 30 * US_PER_SEC,
             D(1971, 1, 4) + 44 * US_PER_MIN + 30 * US_PER_SEC);
    o.granularity = GRAN_DAY;
    {
        int64_t next_day = D(1971, 1, 4) + 12 * US_PER_HOUR;

        memset(&err, 0, sizeof err);
        assert_false(partitions_plan_times(t, &next_day, 1, &o, &plans, &n, &err));
        assert_int_equal(err.code, EC_CONFIG);
        assert_non_null(strstr(err.detail, "UTC-00:44:30"));
    }
    catalog_target_free(t);

    /* --window-tz must name a zone every machine reads the same */
    memset(&err, 0, sizeof err);
    assert_false(window_tz_check("", &err));
    assert_int_equal(err.code, EC_USAGE);
    memset(&err, 0, sizeof err);
    assert_false(window_tz_check("localtime", &err));
    assert_int_equal(err.code, EC_USAGE);
    assert_true(window_tz_check("Europe/Berlin", &err));
    assert_true(window_tz_check(NULL, &err));
}

static void
test_lock_key_is_tag_and_oid(void **state)
{
    (void) state;
    /* (x'7637666c'::bigint << 32) | 16384 */
    assert_int_equal(partitions_lock_key(16384), INT64_C(8518389834237083648) + 16384);
}

/* pg_partman 4.7.2's names: create_parent()'s datetime_string per interval,
 * and check_name_length(): parent cut to 61 - suffix characters, then "_p". */
static void
expect_partman_name(const char *interval, const char *dts, const char *table, const Window *w,
                    Granularity want_g, const char *want)
{
    Granularity g;
    char pattern[160];
    char name[64];
    Err err = {0};

    assert_true(partman_naming(interval, dts, table, &g, pattern, sizeof pattern, &err));
    assert_int_equal(g, want_g);
    assert_true(window_name(g, pattern, table, w, name, sizeof name, &err));
    assert_string_equal(name, want);
}

static void
test_partman_naming_follows_pg_partman(void **state)
{
    Window w;
    Err err = {0};
    Granularity g;
    char pattern[160];
    /* 61 characters: cut to 54 before "_p2027_03" as check_name_length() does */
    const char *long_name = "a_table_name_of_sixty_two_characters_for_the_name_cut_xxxxxxx";

    (void) state;
    assert_true(window_at(GRAN_MONTH, NULL, D(2027, 3, 10), &w, &err));
    expect_partman_name("1 mon", "YYYY_MM", "pt", &w, GRAN_MONTH, "pt_p2027_03");
    expect_partman_name("1 mon", "YYYY_MM", "p%t", &w, GRAN_MONTH, "p%t_p2027_03");
    expect_partman_name("1 mon", "YYYY_MM", long_name, &w, GRAN_MONTH,
                        "a_table_name_of_sixty_two_characters_for_the_name_cut__p2027_03");
    assert_true(window_at(GRAN_DAY, NULL, D(2027, 3, 10), &w, &err));
    expect_partman_name("1 day", "YYYY_MM_DD", "pt", &w, GRAN_DAY, "pt_p2027_03_10");
    assert_true(window_at(GRAN_WEEK, NULL, D(2027, 3, 10), &w, &err));
    expect_partman_name("7 days", "IYYY\"w\"IW", "pt", &w, GRAN_WEEK, "pt_p2027w10");
    assert_true(window_at(GRAN_QUARTER, NULL, D(2027, 3, 10), &w, &err));
    expect_partman_name("3 mons", "YYYY\"q\"Q", "pt", &w, GRAN_QUARTER, "pt_p2027q1");
    assert_true(window_at(GRAN_YEAR, NULL, D(2027, 3, 10), &w, &err));
    expect_partman_name("1 year", "YYYY", "pt", &w, GRAN_YEAR, "pt_p2027");
    /* what v7fill cannot follow is refused, saying what */
    assert_false(partman_naming("01:00:00", "YYYY_MM_DD_HH24MI", "pt", &g, pattern,
                                sizeof pattern, &err));
    assert_int_equal(err.code, EC_CONFIG);
    assert_non_null(strstr(err.msg, "\"01:00:00\""));
    assert_false(partman_naming("1 mon", "YYYY_MM_DD", "pt", &g, pattern, sizeof pattern, &err));
    assert_non_null(strstr(err.msg, "datetime_string \"YYYY_MM_DD\""));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_month_window_holds_its_first_and_last_microsecond),
        cmocka_unit_test(test_february_has_29_days_in_leap_years_only),
        cmocka_unit_test(test_quarters_start_in_january_april_july_october),
        cmocka_unit_test(test_weeks_start_on_monday_and_carry_the_iso_week),
        cmocka_unit_test(test_iso_week_53_and_weeks_across_new_year),
        cmocka_unit_test(test_default_names_per_granularity),
        cmocka_unit_test(test_name_patterns_expand_every_escape),
        cmocka_unit_test(test_patterns_that_cannot_tell_windows_apart_are_refused),
        cmocka_unit_test(test_names_longer_than_63_bytes_are_an_error),
        cmocka_unit_test(test_granularity_names_round_trip),
        cmocka_unit_test(test_local_windows_start_at_local_midnight),
        cmocka_unit_test(test_local_day_whose_midnight_falls_in_a_dst_gap_starts_after_it),
        cmocka_unit_test(test_local_day_whose_midnight_happens_twice_starts_at_the_first),
        cmocka_unit_test(test_times_outside_years_1_to_9999_are_refused),
        cmocka_unit_test(test_uuid_bounds_decode_to_their_millisecond),
        cmocka_unit_test(test_timestamp_bounds_read_any_offset_bc_and_infinity),
        cmocka_unit_test(test_bigint_bounds_are_epoch_milliseconds),
        cmocka_unit_test(test_default_and_malformed_bounds),
        cmocka_unit_test(test_bound_literals_per_key_kind),
        cmocka_unit_test(test_uncovered_parts_of_a_window),
        cmocka_unit_test(test_granularity_is_inferred_from_regular_partitions),
        cmocka_unit_test(test_plan_fills_only_gaps_and_reuses_neighbour_bounds),
        cmocka_unit_test(test_plan_refuses_a_window_name_a_partition_with_other_bounds_has),
        cmocka_unit_test(test_plan_refuses_to_fill_around_local_windows_unless_a_zone_is_given),
        cmocka_unit_test(test_lock_key_is_tag_and_oid),
        cmocka_unit_test(test_partman_naming_follows_pg_partman),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
