/*
 * Calendar arithmetic (days <-> civil date) using the era-based algorithm
 * for the proleptic Gregorian calendar; exact for every int32 year.
 */
#include "v7fill/civil.h"

#include <stdio.h>

int64_t
civil_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

int64_t
civil_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

int64_t
civil_sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b > 0 ? INT64_MIN : INT64_MAX;
    return r;
}

int64_t
civil_sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
    return r;
}

bool
civil_is_leap(int year)
{
    return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

int
civil_days_in_month(int year, int month)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month < 1 || month > 12)
        return 0;
    if (month == 2 && civil_is_leap(year))
        return 29;
    return days[month - 1];
}

int64_t
civil_days_from_date(int year, int month, int day)
{
    int64_t y = (int64_t) year - (month <= 2);
    int64_t era = civil_floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t mp = (month + 9) % 12;
    int64_t doy = (153 * mp + 2) / 5 + day - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void
civil_date_from_days(int64_t days, int *year, int *month, int *day)
{
    int64_t z = days + 719468;
    int64_t era = civil_floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;

    *year = (int) (y + (m <= 2));
    *month = (int) m;
    *day = (int) d;
}

int
civil_iso_weekday(int64_t days)
{
    /* 1970-01-01 was a Thursday (4). */
    int64_t w = civil_floor_div(days + 3, 7);
    return (int) (days + 3 - w * 7) + 1;
}

void
civil_from_us(int64_t us, CivilTime *ct)
{
    int64_t days = civil_floor_div(us, US_PER_DAY);
    int64_t rem = us - days * US_PER_DAY;

    civil_date_from_days(days, &ct->year, &ct->month, &ct->day);
    ct->hour = (int) (rem / US_PER_HOUR);
    rem %= US_PER_HOUR;
    ct->minute = (int) (rem / US_PER_MIN);
    rem %= US_PER_MIN;
    ct->second = (int) (rem / US_PER_SEC);
    ct->usec = (int) (rem % US_PER_SEC);
}

int64_t
civil_to_us(const CivilTime *ct)
{
    return civil_days_from_date(ct->year, ct->month, ct->day) * US_PER_DAY +
           (int64_t) ct->hour * US_PER_HOUR + (int64_t) ct->minute * US_PER_MIN +
           (int64_t) ct->second * US_PER_SEC + ct->usec;
}

void
civil_format_rfc3339(int64_t us, bool micro, char *out, size_t size)
{
    CivilTime ct;

    civil_from_us(us, &ct);
    if (micro)
        (void) snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", ct.year, ct.month,
                        ct.day, ct.hour, ct.minute, ct.second, ct.usec);
    else
        (void) snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", ct.year, ct.month,
                        ct.day, ct.hour, ct.minute, ct.second, ct.usec / 1000);
}

bool
civil_format_day_bound(int64_t us, char *out, size_t size)
{
    CivilTime ct;

    if (us == INT64_MIN || us == INT64_MAX)
    {
        (void) snprintf(out, size, "%s", us == INT64_MIN ? "MINVALUE" : "MAXVALUE");
        return true;
    }
    civil_from_us(us, &ct);
    if (ct.hour != 0 || ct.minute != 0 || ct.second != 0 || ct.usec != 0)
        return false;
    (void) snprintf(out, size, "%04d-%02d-%02d", ct.year, ct.month, ct.day);
    return true;
}

void
civil_format_instant(int64_t us, char *out, size_t size)
{
    if (us == INT64_MIN)
        (void) snprintf(out, size, "MINVALUE");
    else if (us == INT64_MAX)
        (void) snprintf(out, size, "MAXVALUE");
    else if (us % US_PER_SEC == 0)
    {
        CivilTime ct;
        civil_from_us(us, &ct);
        (void) snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02dZ", ct.year, ct.month, ct.day,
                        ct.hour, ct.minute, ct.second);
    }
    else
        civil_format_rfc3339(us, us % 1000 != 0, out, size);
}
