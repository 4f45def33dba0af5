/*
 * The window calculus of the route stage: which day / ISO week / month /
 * quarter / year holds an instant, what the partition for it is called, which
 * parts of a window existing partitions leave uncovered, and which
 * granularity a table already uses.  Pure: no I/O and no clock.
 *
 * Windows are computed on the proleptic Gregorian calendar of civil.c.  In
 * UTC that is plain day arithmetic.  For local calendars (--window-tz) the
 * edges are the first instants of local days, found through the time parser
 * of timeparse.c: parsing a bare date in a zone gives exactly that instant
 * (midnight, or the end of a DST gap that swallows midnight; the first
 * occurrence when midnight happens twice), and it brings the zone cache and
 * the tz database handling along instead of repeating them here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/civil.h"
#include "v7fill/mem.h"
#include "v7fill/partitions.h"

#define NAME_MAX_BYTES 63 /* NAMEDATALEN - 1: longer names the server would truncate */

static const struct
{
    const char *name;
    Granularity g;
} granularity_names[] = {
    {"auto", GRAN_AUTO},       {"day", GRAN_DAY},         {"daily", GRAN_DAY},
    {"week", GRAN_WEEK},       {"weekly", GRAN_WEEK},     {"month", GRAN_MONTH},
    {"monthly", GRAN_MONTH},   {"quarter", GRAN_QUARTER}, {"quarterly", GRAN_QUARTER},
    {"year", GRAN_YEAR},       {"yearly", GRAN_YEAR},
};

bool
granularity_parse(const char *text, Granularity *out, Err *err)
{
    for (size_t i = 0; i < sizeof granularity_names / sizeof granularity_names[0]; i++)
    {
        if (strcmp(text, granularity_names[i].name) == 0)
        {
            *out = granularity_names[i].g;
            return true;
        }
    }
    err_set(err, EC_USAGE, "unknown granularity \"%.64s\"", text);
    err_hint(err, "Use day, week, month, quarter, year or auto.");
    return false;
}

const char *
granularity_name(Granularity g)
{
    switch (g)
    {
        case GRAN_AUTO:
            return "auto";
        case GRAN_DAY:
            return "day";
        case GRAN_WEEK:
            return "week";
        case GRAN_MONTH:
            return "month";
        case GRAN_QUARTER:
            return "quarter";
        case GRAN_YEAR:
            return "year";
    }
    return "?";
}


/* First and next-first day numbers of the window of g holding day `days`. */
static void
window_days(Granularity g, int64_t days, int64_t *lo, int64_t *hi)
{
    int y, m, d;
    int qm;

    civil_date_from_days(days, &y, &m, &d);
    switch (g)
    {
        case GRAN_DAY:
            *lo = days;
            *hi = days + 1;
            return;
        case GRAN_WEEK:
            *lo = days - (civil_iso_weekday(days) - 1);
            *hi = *lo + 7;
            return;
        case GRAN_QUARTER:
            qm = (m - 1) / 3 * 3 + 1;
            *lo = civil_days_from_date(y, qm, 1);
            *hi = qm == 10 ? civil_days_from_date(y + 1, 1, 1) : civil_days_from_date(y, qm + 3, 1);
            return;
        case GRAN_YEAR:
            *lo = civil_days_from_date(y, 1, 1);
            *hi = civil_days_from_date(y + 1, 1, 1);
            return;
        case GRAN_AUTO:
        case GRAN_MONTH:
            break;
    }
    *lo = civil_days_from_date(y, m, 1);
    *hi = m == 12 ? civil_days_from_date(y + 1, 1, 1) : civil_days_from_date(y, m + 1, 1);
}

void
window_of(Granularity g, int64_t us, int64_t *lower, int64_t *upper)
{
    int64_t lo, hi;

    window_days(g, civil_floor_div(us, US_PER_DAY), &lo, &hi);
    *lower = lo * US_PER_DAY;
    *upper = hi * US_PER_DAY;
}

/* Calendar fields of the window whose first (local) day is `days`. */
static void
window_fields(Window *w, int64_t days)
{
    int64_t monday = days - (civil_iso_weekday(days) - 1);
    int64_t thursday = monday + 3;
    int ty, tm, td;

    civil_date_from_days(days, &w->year, &w->month, &w->day);
    w->yday = (int) (days - civil_days_from_date(w->year, 1, 1)) + 1;
    w->quarter = (w->month - 1) / 3 + 1;
    /* ISO 8601: a week belongs to the year of its Thursday. */
    civil_date_from_days(thursday, &ty, &tm, &td);
    w->iso_year = ty;
    w->iso_week = (int) ((thursday - civil_days_from_date(ty, 1, 1)) / 7) + 1;
}

/* First instant of local day `days` in the parser's zone. */
static bool
zone_day_start(const TimeParser *zone, int64_t days, int64_t *us, Err *err)
{
    char text[32];
    int y, m, d;
    int n;

    civil_date_from_days(days, &y, &m, &d);
    if (y < 1 || y > 9999)
        return err_set(err, EC_FORMAT, "window edge in year %d is outside years 1 to 9999", y);
    n = snprintf(text, sizeof text, "%04d-%02d-%02d", y, m, d);
    return time_parse(zone, text, (size_t) n, us, err);
}

bool
window_at(Granularity g, const TimeParser *zone, int64_t us, Window *w, Err *err)
{
    static const int64_t min_us = INT64_C(-62135596800000000); /* 0001-01-01T00:00:00Z */
    int64_t days;
    int64_t lo, hi;

    memset(w, 0, sizeof *w);
    if (us < min_us || us >= WINDOW_MAX_US)
    {
        char text[48];
        civil_format_rfc3339(us, false, text, sizeof text);
        return err_set(err, EC_FORMAT, "time %s is outside the years 1 to 9999 that windows cover",
                       text);
    }
    days = civil_floor_div(us, US_PER_DAY);
    if (zone == NULL)
    {
        window_days(g, days, &lo, &hi);
        w->lower_us = lo * US_PER_DAY;
        w->upper_us = hi * US_PER_DAY;
        window_fields(w, lo);
        return true;
    }

    /* The local date is within a day of the UTC date (offsets stay below 24
     * hours): the latest day that has started by `us`. */
    {
        int64_t start;

        if (!zone_day_start(zone, days + 1, &start, err))
            return false;
        if (start <= us)
            days++;
        else
        {
            if (!zone_day_start(zone, days, &start, err))
                return false;
            if (start > us)
                days--;
        }
    }
    window_days(g, days, &lo, &hi);
    if (!zone_day_start(zone, lo, &w->lower_us, err) ||
        !zone_day_start(zone, hi, &w->upper_us, err))
        return false;
    window_fields(w, lo);
    return true;
}

const char *
window_default_pattern(Granularity g)
{
    switch (g)
    {
        case GRAN_DAY:
            return "%t__%Y_%m_%d";
        case GRAN_WEEK:
            return "%t__%G_w%V";
        case GRAN_QUARTER:
            return "%t__%Y_q%q";
        case GRAN_YEAR:
            return "%t__%Y";
        case GRAN_AUTO:
        case GRAN_MONTH:
            break;
    }
    return "%t__%Y_%m";
}

bool
window_pattern_check(Granularity g, const char *pattern, Err *err)
{
    bool has[128] = {false};
    bool ok;

    for (const char *p = pattern; *p; p++)
    {
        if (*p != '%')
            continue;
        p++;
        if (*p == '\0' || strchr("tYmdjqGV%", *p) == NULL)
        {
            err_set(err, EC_USAGE, "name pattern \"%.64s\" has an unknown escape \"%%%c\"", pattern,
                    *p ? *p : ' ');
            err_hint(err, "Escapes: %%t table, %%Y year, %%m month, %%d day, %%j day of year, "
                          "%%q quarter, %%G ISO year, %%V ISO week, %%%% percent sign.");
            return false;
        }
        has[(unsigned char) *p] = true;
    }
    switch (g)
    {
        case GRAN_DAY:
            ok = has['Y'] && (has['j'] || (has['m'] && has['d']));
            break;
        case GRAN_WEEK:
            ok = has['G'] && has['V'];
            break;
        case GRAN_QUARTER:
            ok = has['Y'] && (has['q'] || has['m']);
            break;
        case GRAN_YEAR:
            ok = has['Y'];
            break;
        case GRAN_AUTO:
        case GRAN_MONTH:
        default:
            ok = has['Y'] && has['m'];
            break;
    }
    if (!ok)
    {
        err_set(err, EC_USAGE, "name pattern \"%.64s\" does not tell %s windows apart", pattern,
                granularity_name(g));
        err_hint(err, "A %s pattern needs %s, e.g. \"%s\".", granularity_name(g),
                 g == GRAN_DAY       ? "%Y with %m and %d (or %j)"
                 : g == GRAN_WEEK    ? "%G and %V"
                 : g == GRAN_QUARTER ? "%Y and %q"
                 : g == GRAN_YEAR    ? "%Y"
                                     : "%Y and %m",
                 window_default_pattern(g));
        return false;
    }
    return true;
}

bool
window_name(Granularity g, const char *pattern, const char *table, const Window *w, char *out,
            size_t size, Err *err)
{
    Buf b;

    if (pattern == NULL)
        pattern = window_default_pattern(g);
    if (!window_pattern_check(g, pattern, err))
        return false;
    buf_init(&b);
    for (const char *p = pattern; *p; p++)
    {
        if (*p != '%')
        {
            buf_putc(&b, *p);
            continue;
        }
        switch (*++p)
        {
            case 't':
                buf_puts(&b, table);
                break;
            case 'Y':
                buf_printf(&b, "%04d", w->year);
                break;
            case 'm':
                buf_printf(&b, "%02d", w->month);
                break;
            case 'd':
                buf_printf(&b, "%02d", w->day);
                break;
            case 'j':
                buf_printf(&b, "%03d", w->yday);
                break;
            case 'q':
                buf_printf(&b, "%d", w->quarter);
                break;
            case 'G':
                buf_printf(&b, "%04d", w->iso_year);
                break;
            case 'V':
                buf_printf(&b, "%02d", w->iso_week);
                break;
            default: /* '%', the only other escape window_pattern_check lets through */
                buf_putc(&b, '%');
                break;
        }
    }
    if (b.len > NAME_MAX_BYTES || b.len >= size)
    {
        err_set(err, EC_CONFIG, "partition name \"%s\" is %zu bytes long; PostgreSQL names hold at "
                                "most %d",
                b.data, b.len, NAME_MAX_BYTES);
        err_detail(err, "The server would silently truncate it, and truncated names of different "
                        "windows can collide.  Nothing was created.");
        err_hint(err, "Choose a shorter --name-pattern, e.g. \"p%%Y_%%m\" instead of "
                      "\"%%t__%%Y_%%m\".");
        buf_free(&b);
        return false;
    }
    memcpy(out, b.data ? b.data : "", b.len + 1);
    buf_free(&b);
    return true;
}

static void
span_push(Span **spans, size_t *n, size_t *cap, int64_t lo, const char *lo_text, int64_t hi,
          const char *hi_text)
{
    /* Nothing v7fill mints falls between two bounds of one microsecond. */
    if (lo >= hi)
        return;
    if (*n == *cap)
    {
        *cap *= 2;
        *spans = xrealloc(*spans, *cap * sizeof **spans);
    }
    (*spans)[*n].lower_us = lo;
    (*spans)[*n].upper_us = hi;
    (*spans)[*n].lower_text = lo_text;
    (*spans)[*n].upper_text = hi_text;
    (*n)++;
}

size_t
partitions_uncovered(const TargetTable *t, int64_t lower, int64_t upper, Span **out)
{
    size_t n = 0;
    size_t cap = 4;
    Span *spans = xmalloc(cap * sizeof *spans);
    int64_t cur = lower;
    const char *cur_text = NULL; /* NULL: the range's own edge */

    for (size_t i = 0; i < t->npartitions && catalog_bound_cmp(cur, cur_text, upper, NULL) < 0;
         i++)
    {
        const Partition *p = &t->partitions[i];

        if (p->is_default ||
            catalog_bound_cmp(p->lower_us, p->lower_text, p->upper_us, p->upper_text) >= 0 ||
            catalog_bound_cmp(p->upper_us, p->upper_text, cur, cur_text) <= 0)
            continue;
        if (catalog_bound_cmp(p->lower_us, p->lower_text, upper, NULL) >= 0)
            break;
        if (catalog_bound_cmp(p->lower_us, p->lower_text, cur, cur_text) > 0)
            span_push(&spans, &n, &cap, cur, cur_text, p->lower_us, p->lower_text);
        cur = p->upper_us;
        cur_text = p->upper_text;
    }
    if (catalog_bound_cmp(cur, cur_text, upper, NULL) < 0)
        span_push(&spans, &n, &cap, cur, cur_text, upper, NULL);
    *out = spans;
    return n;
}

bool
partitions_infer_granularity(const TargetTable *t, const TimeParser *zone, Granularity *out,
                             Err *err)
{
    static const Granularity candidates[] = {GRAN_DAY, GRAN_WEEK, GRAN_MONTH, GRAN_QUARTER,
                                             GRAN_YEAR};
    int count[GRAN_YEAR + 1] = {0};
    int64_t newest[GRAN_YEAR + 1];
    Granularity best = GRAN_MONTH;

    (void) err;
    for (size_t k = 0; k <= GRAN_YEAR; k++)
        newest[k] = INT64_MIN;
    for (size_t i = 0; i < t->npartitions; i++)
    {
        const Partition *p = &t->partitions[i];

        if (p->is_default || p->lower_us == INT64_MIN || p->upper_us == INT64_MAX)
            continue;
        for (size_t k = 0; k < sizeof candidates / sizeof candidates[0]; k++)
        {
            Granularity g = candidates[k];
            Window w;
            Err ignored = {0};

            /* Bounds outside the years windows cover (a catch-all from 4713 BC) are
             * simply no window of any granularity. */
            if (!window_at(g, zone, p->lower_us, &w, &ignored))
                break;
            if (w.lower_us == p->lower_us && w.upper_us == p->upper_us)
            {
                count[g]++;
                if (p->lower_us > newest[g])
                    newest[g] = p->lower_us;
                break;
            }
        }
    }
    for (size_t k = 0; k < sizeof candidates / sizeof candidates[0]; k++)
    {
        Granularity g = candidates[k];

        if (count[g] == 0)
            continue;
        if (count[g] > count[best] || (count[g] == count[best] && newest[g] > newest[best]))
            best = g;
    }
    *out = best;
    return true;
}
