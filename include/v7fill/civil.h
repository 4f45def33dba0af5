/*
 * Proleptic Gregorian calendar arithmetic in UTC, shared by the time parser,
 * the uuid commands and the partition windows.  Times are int64 microseconds
 * since 1970-01-01T00:00:00Z.
 */
#ifndef V7FILL_CIVIL_H
#define V7FILL_CIVIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define US_PER_SEC  INT64_C(1000000)
#define US_PER_MS   INT64_C(1000)
#define US_PER_MIN  (60 * US_PER_SEC)
#define US_PER_HOUR (60 * US_PER_MIN)
#define US_PER_DAY  (24 * US_PER_HOUR)

typedef struct CivilTime
{
    int year;
    int month; /* 1..12 */
    int day;   /* 1..31 */
    int hour;
    int minute;
    int second;
    int usec; /* 0..999999 */
} CivilTime;

/* Saturating arithmetic on microsecond values: results clamp to INT64_MIN /
 * INT64_MAX (the MINVALUE / MAXVALUE of partition bounds) instead of wrapping. */
int64_t civil_sat_add(int64_t a, int64_t b);
int64_t civil_sat_sub(int64_t a, int64_t b);
int64_t civil_sat_mul(int64_t a, int64_t b);

/* a / b rounded toward negative infinity (b > 0). */
int64_t civil_floor_div(int64_t a, int64_t b);

/* Days since 1970-01-01 of a (valid) date. */
int64_t civil_days_from_date(int year, int month, int day);
/* Inverse of civil_days_from_date. */
void civil_date_from_days(int64_t days, int *year, int *month, int *day);
int civil_days_in_month(int year, int month);
bool civil_is_leap(int year);
/* ISO weekday of a day number: 1 = Monday .. 7 = Sunday. */
int civil_iso_weekday(int64_t days);

/* Split / join microseconds since epoch in UTC (floor semantics for negatives). */
void civil_from_us(int64_t us, CivilTime *ct);
int64_t civil_to_us(const CivilTime *ct);

/*
 * Format as RFC 3339 UTC: "2026-07-01T00:00:00.000Z", with 6 fraction digits
 * instead of 3 when `micro` is true.  `out` must hold 32 bytes.
 */
void civil_format_rfc3339(int64_t us, bool micro, char *out, size_t size);
/* A partition bound that reads as a day: "MINVALUE" / "MAXVALUE" for the open
 * ends (INT64_MIN / INT64_MAX), "YYYY-MM-DD" for a midnight.  False, out
 * untouched, for any other instant (the caller picks how to show a time). */
bool civil_format_day_bound(int64_t us, char *out, size_t size);
/* An instant as "YYYY-MM-DDTHH:MM:SSZ", with a fraction only when it has one
 * (milliseconds, or microseconds when needed); "MINVALUE" / "MAXVALUE" for
 * INT64_MIN / INT64_MAX. */
void civil_format_instant(int64_t us, char *out, size_t size);

#endif /* V7FILL_CIVIL_H */
