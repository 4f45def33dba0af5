/*
 * Timestamp and duration parsing, hand-written and locale-independent.
 *
 * Why not strptime/strtod: both follow LC_TIME / LC_NUMERIC, glibc's strptime
 * silently accepts impossible dates and does not know offsets like "+05:30",
 * and both are several times slower than the ISO path below, which runs once
 * per input row.
 *
 * Every parse fills a Fields struct first (no validation beyond syntax), then
 * fields_to_us() validates the calendar values and converts, so that ISO and
 * pattern input give the same errors for the same impossible dates.
 *
 * Time zones other than UTC use the system tz database through the TZ
 * environment variable and localtime_r().  The process therefore has ONE
 * zone at a time: zone_activate() points TZ at the zone of the parser being
 * used whenever a lookup is needed, under zone_mu, so parsers with different
 * zones give correct answers even in different threads (the import's reader
 * parses input times while its writer computes window edges).  Any other code
 * that calls localtime() sees whatever zone was activated last.  TZ is put
 * into the environment when the first zoned parser is made, so that later
 * switches replace its value instead of growing the environment under a
 * getenv() in another thread.  Offsets found for a local day are cached per
 * parser, so most parses of zoned input never reach libc.
 */
#include "v7fill/timeparse.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "v7fill/civil.h"
#include "v7fill/mem.h"

#define ZONEINFO_DIR    "/usr/share/zoneinfo"
#define ZONE_NAME_MAX   255
#define QUOTE_MAX       64 /* input bytes quoted in an error message */
#define QUOTE_SIZE      (QUOTE_MAX * 4 + 8)
#define SEC_PER_DAY     INT64_C(86400)
#define ZONE_CACHE_SIZE 2048 /* local days; a power of two */

typedef enum TimeKind
{
    TK_ISO,
    TK_EPOCH_S,
    TK_EPOCH_MS,
    TK_EPOCH_US,
    TK_PATTERN,
} TimeKind;

typedef enum PatOpKind
{
    PO_LITERAL,
    PO_YEAR,         /* %Y */
    PO_MONTH,        /* %m */
    PO_DAY,          /* %d */
    PO_DAY_SPACE,    /* %e */
    PO_HOUR,         /* %H */
    PO_MINUTE,       /* %M */
    PO_SECOND,       /* %S */
    PO_FRACTION,     /* %f */
    PO_OFFSET,       /* %z */
    PO_MONTH_NAME,   /* %b %h %B */
    PO_WEEKDAY_NAME, /* %a %A */
    PO_DAY_OF_YEAR,  /* %j */
} PatOpKind;

typedef struct PatOp
{
    PatOpKind kind;
    char literal;
} PatOp;

/* One cached local day: every wall time of `day` maps to local - offset. */
typedef struct ZoneSlot
{
    int64_t day; /* days since 1970-01-01, INT64_MIN = empty */
    int32_t offset;
} ZoneSlot;

typedef struct ZoneCache
{
    ZoneSlot slot[ZONE_CACHE_SIZE];
} ZoneCache;

/* Rows of a file come in time order more often than not: consecutive times
 * share their date, which then needs no checking and no day count again. */
typedef struct DateCache
{
    int year;
    int month; /* 0 = empty (no valid date has it) */
    int day;
    int64_t days;
} DateCache;

struct TimeParser
{
    TimeKind kind;
    PatOp *ops;
    size_t nops;
    char *pattern; /* for messages */
    char *zone;    /* NULL = UTC (no libc calls at all) */
    bool first_occurrence; /* an overlap reads as its first occurrence */
    /* Mutable through a const parser: a cache does not change results.  Not
     * thread-safe, like the TZ switching it avoids. */
    ZoneCache *cache;
    DateCache *date; /* the last valid date and its day number (NULL: none) */
};

typedef struct Fields
{
    int year;
    int month;
    int day;
    int hour;
    int minute;
    int second;
    int usec;
    int yday; /* 1..366 from %j, 0 = not given */
    int wday; /* ISO 1..7 from %a, 0 = not given */
    bool has_offset;
    int32_t offset; /* seconds east of UTC */
} Fields;

static const char *const month_names[12] = {
    "January", "February", "March",     "April",   "May",      "June",
    "July",    "August",   "September", "October", "November", "December",
};

static const char *const weekday_names[7] = {
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
};

static const int32_t pow10_32[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};

/* The parser behind time_parse_iso(): ISO text, UTC. */
static const TimeParser utc_iso_parser = {.kind = TK_ISO};

/* ---------------------------------------------------------------- helpers */

/* Digit value, or > 9 for anything else (unsigned wrap-around does the range
 * check in one comparison). */
static inline unsigned
digit_of(char c)
{
    return (unsigned) (unsigned char) c - '0';
}

/* Two digits at s[i]; false when the text ends or they are not digits. */
static inline bool
two_digits(const char *s, size_t len, size_t i, int *v)
{
    unsigned a, b;

    if (len - i < 2)
        return false;
    a = digit_of(s[i]);
    b = digit_of(s[i + 1]);
    if (a > 9 || b > 9)
        return false;
    *v = (int) (a * 10 + b);
    return true;
}

/* Read min..max digits at *pi into *v. */
static bool
read_digits(const char *s, size_t len, size_t *pi, int min, int max, int *v)
{
    size_t i = *pi;
    int n = 0;
    int acc = 0;
    unsigned d;

    while (n < max && i < len && (d = digit_of(s[i])) <= 9)
    {
        acc = acc * 10 + (int) d;
        i++;
        n++;
    }
    if (n < min)
        return false;
    *pi = i;
    *v = acc;
    return true;
}

/* A fraction of a second: one or more digits, the first six kept, the rest
 * truncated so a time never moves into the next microsecond. */
static bool
read_fraction(const char *s, size_t len, size_t *pi, int *usec)
{
    size_t i = *pi;
    int n = 0;
    int acc = 0;
    unsigned d;

    while (i < len && (d = digit_of(s[i])) <= 9)
    {
        if (n < 6)
        {
            acc = acc * 10 + (int) d;
            n++;
        }
        i++;
    }
    if (i == *pi)
        return false;
    *usec = acc * pow10_32[6 - n];
    *pi = i;
    return true;
}

static inline char
ascii_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : c;
}

static inline char
ascii_upper(char c)
{
    return (c >= 'a' && c <= 'z') ? (char) (c - 'a' + 'A') : c;
}

/* Case-insensitive (ASCII only, no locale) prefix match of `word` at s[i]. */
static bool
match_word(const char *s, size_t len, size_t i, const char *word, size_t wlen)
{
    if (len - i < wlen)
        return false;
    for (size_t k = 0; k < wlen; k++)
        if (ascii_lower(s[i + k]) != ascii_lower(word[k]))
            return false;
    return true;
}

static bool
equals_word(const char *s, size_t len, const char *word)
{
    return len == strlen(word) && match_word(s, len, 0, word, len);
}

/* English month or weekday name at *pi, full or three-letter; 1-based index. */
static bool
read_name(const char *s, size_t len, size_t *pi, const char *const *names, int count, int *v)
{
    for (int k = 0; k < count; k++)
    {
        size_t full = strlen(names[k]);

        if (match_word(s, len, *pi, names[k], full))
        {
            *pi += full;
            *v = k + 1;
            return true;
        }
    }
    for (int k = 0; k < count; k++)
    {
        if (match_word(s, len, *pi, names[k], 3))
        {
            *pi += 3;
            *v = k + 1;
            return true;
        }
    }
    return false;
}

static int64_t
floor_div_day(int64_t secs)
{
    int64_t q = secs / SEC_PER_DAY;

    if (secs % SEC_PER_DAY < 0)
        q--;
    return q;
}

/* ----------------------------------------------------------------- errors */

/*
 * Quote input for a message: printable ASCII as is, '"' and '\\' escaped,
 * every other byte as \xNN (input may be binary garbage or cut UTF-8), at
 * most QUOTE_MAX input bytes followed by "..." so a huge field cannot flood
 * the log.
 */
static void
quote_text(const char *s, size_t len, char *out, size_t size)
{
    size_t o = 0;
    size_t n = len > QUOTE_MAX ? QUOTE_MAX : len;

    for (size_t i = 0; i < n && o + 5 < size; i++)
    {
        unsigned char c = (unsigned char) s[i];

        if (c == '"' || c == '\\')
        {
            out[o++] = '\\';
            out[o++] = (char) c;
        }
        else if (c >= 0x20 && c < 0x7f)
            out[o++] = (char) c;
        else
            o += (size_t) snprintf(out + o, size - o, "\\x%02x", c);
    }
    if (n < len && o + 4 < size)
    {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static bool text_error(Err *err, const char *what, const char *s, size_t len, const char *fmt,
                       va_list ap) V7FILL_PRINTF(5, 0);

static bool
text_error(Err *err, const char *what, const char *s, size_t len, const char *fmt, va_list ap)
{
    char q[QUOTE_SIZE];
    char reason[512];

    quote_text(s, len, q, sizeof q);
    if (vsnprintf(reason, sizeof reason, fmt, ap) < 0)
        reason[0] = '\0';
    return err_set(err, EC_FORMAT, "invalid %s \"%s\": %s", what, q, reason);
}

/* Errors are the cold path: keep them out of the parse loops. */
static bool time_error(Err *err, const char *s, size_t len, const char *fmt, ...)
    V7FILL_PRINTF(4, 5) __attribute__((cold, noinline));

static bool
time_error(Err *err, const char *s, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void) text_error(err, "time", s, len, fmt, ap);
    va_end(ap);
    return false;
}

static bool dur_error(Err *err, const char *s, const char *fmt, ...) V7FILL_PRINTF(3, 4)
    __attribute__((cold, noinline));

static bool
dur_error(Err *err, const char *s, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void) text_error(err, "duration", s, s ? strlen(s) : 0, fmt, ap);
    va_end(ap);
    return false;
}

/* "expected <what>, found "<rest>"" or "... ends early". */
static bool __attribute__((cold, noinline))
expect_error(Err *err, const char *s, size_t len, size_t i, const char *what)
{
    char rest[QUOTE_SIZE];

    if (i >= len)
        return time_error(err, s, len, "text ends early, expected %s", what);
    quote_text(s + i, len - i, rest, sizeof rest);
    return time_error(err, s, len, "expected %s, found \"%s\"", what, rest);
}

/* Text left over after a complete time.  PostgreSQL's " BC" gets its own
 * message because it is valid PostgreSQL output, not garbage. */
static bool __attribute__((cold, noinline))
trailing_error(Err *err, const char *s, size_t len, size_t i, const char *after)
{
    char rest[QUOTE_SIZE];

    if (equals_word(s + i, len - i, " BC"))
        return time_error(err, s, len, "dates before the Common Era (BC) are not supported");
    quote_text(s + i, len - i, rest, sizeof rest);
    return time_error(err, s, len, "unexpected \"%s\" after %s", rest, after);
}

/* ------------------------------------------------------------- time zones */

/*
 * glibc treats an unknown TZ name as UTC without any error, so the name is
 * checked here: a regular file under /usr/share/zoneinfo that starts with the
 * TZif magic (zone.tab, leapseconds etc. are regular files too).  Absolute
 * paths and ".." are refused so a setting cannot read outside the database.
 */
static bool
zone_validate(const char *name, Err *err)
{
    char path[sizeof ZONEINFO_DIR + ZONE_NAME_MAX + 2];
    char magic[4];
    struct stat st;
    int fd;

    if (name[0] == '\0')
        return err_set(err, EC_CONFIG, "time zone name is empty");
    if (strlen(name) > ZONE_NAME_MAX || name[0] == '/' || strstr(name, "..") != NULL)
    {
        err_set(err, EC_CONFIG, "invalid time zone name \"%.64s\"", name);
        err_hint(err, "Use an IANA time zone name such as Europe/Berlin or America/New_York.");
        return false;
    }
    (void) snprintf(path, sizeof path, "%s/%s", ZONEINFO_DIR, name);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
    {
        err_set(err, EC_CONFIG, "unknown time zone \"%s\"", name);
        err_hint(err, "Time zone names come from the tz database in %s, e.g. Europe/Berlin.",
                 ZONEINFO_DIR);
        return false;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || read(fd, magic, 4) != 4 ||
        memcmp(magic, "TZif", 4) != 0)
    {
        (void) close(fd);
        err_set(err, EC_CONFIG, "unknown time zone \"%s\"", name);
        err_detail(err, "%s/%s is not a time zone file.", ZONEINFO_DIR, name);
        return false;
    }
    (void) close(fd);
    return true;
}

static pthread_mutex_t zone_mu = PTHREAD_MUTEX_INITIALIZER;

/* Make TZ name the zone that localtime_r() uses.  localtime_r() does not
 * re-read TZ by itself, hence the explicit tzset().  Caller holds zone_mu. */
static void
zone_activate(const char *zone)
{
    static char active[ZONE_NAME_MAX + 1];
    const char *cur = getenv("TZ");

    if (cur != NULL && strcmp(cur, zone) == 0 && strcmp(active, zone) == 0)
        return;
    (void) setenv("TZ", zone, 1);
    tzset();
    (void) snprintf(active, sizeof active, "%s", zone);
}

/* UTC offset (seconds east) in force at instant t. */
static bool
zone_offset_at(int64_t t, int32_t *off)
{
    time_t tt = (time_t) t;
    struct tm tm;

    if ((int64_t) tt != t || localtime_r(&tt, &tm) == NULL)
        return false;
    *off = (int32_t) tm.tm_gmtoff;
    return true;
}

/* No transition near local time L: the offsets a day before and a day after
 * agree and L - offset really has that offset. */
static bool
zone_stable_at(int64_t local, int32_t *off, bool *ok)
{
    int32_t a, b, c;

    *ok = zone_offset_at(local - SEC_PER_DAY, &a) && zone_offset_at(local + SEC_PER_DAY, &b) &&
          zone_offset_at(local - a, &c);
    if (!*ok)
        return false;
    *off = a;
    return a == b && c == a;
}

/*
 * Local wall time L (seconds, read as if UTC) -> instant, the general way.
 * oA / oB are the offsets a day before / after; t = L - o is a valid reading
 * when the offset at t really is o.  Both cases follow PostgreSQL (appendix
 * B.2 of its manual), so a local time reads as `timestamp 'L' AT TIME ZONE`
 * would read it on the server:
 *   both valid, different (overlap): L - oB, the offset in force after the
 *       transition, i.e. the second occurrence of the wall time (window
 *       edges ask for the first: `first`);
 *   none valid (gap): L - oA, the offset in force before the transition, so
 *       02:30 in a spring-forward gap reads as 03:30 of the new offset.
 */
static bool
zone_resolve_slow(int64_t local, bool first, int64_t *utc)
{
    int32_t oa, ob, ca, cb;

    if (!zone_offset_at(local - SEC_PER_DAY, &oa) || !zone_offset_at(local + SEC_PER_DAY, &ob) ||
        !zone_offset_at(local - oa, &ca) || !zone_offset_at(local - ob, &cb))
        return false;
    if (cb == ob && !(first && ca == oa))
        *utc = local - ob;
    else
        *utc = local - oa;
    return true;
}

static bool
zone_resolve(const TimeParser *p, int64_t local, int64_t *utc, const char *s, size_t len,
             Err *err)
{
    int64_t day = floor_div_day(local);
    ZoneSlot *slot = &p->cache->slot[(uint64_t) day & (ZONE_CACHE_SIZE - 1)];
    int32_t o0, o1;
    bool ok0, ok1;
    bool resolved;

    if (slot->day == day)
    {
        *utc = local - slot->offset;
        return true;
    }
    (void) pthread_mutex_lock(&zone_mu);
    zone_activate(p->zone);
    /* A day with no transition within a day of its first and last second is
     * cached whole; days near a transition always take the slow path. */
    if (zone_stable_at(day * SEC_PER_DAY, &o0, &ok0) &&
        zone_stable_at(day * SEC_PER_DAY + SEC_PER_DAY - 1, &o1, &ok1) && o0 == o1)
    {
        (void) pthread_mutex_unlock(&zone_mu);
        slot->day = day;
        slot->offset = o0;
        *utc = local - o0;
        return true;
    }
    resolved = zone_resolve_slow(local, p->first_occurrence, utc);
    (void) pthread_mutex_unlock(&zone_mu);
    if (!resolved)
        return time_error(err, s, len, "out of range for time zone %s", p->zone);
    return true;
}

/* -------------------------------------------------------------- validation */

/* Check a calendar date; its day number since 1970-01-01 into *days. */
static bool
date_to_days(const TimeParser *p, const Fields *f, const char *s, size_t len, int64_t *days,
             Err *err)
{
    if (f->month < 1 || f->month > 12)
        return time_error(err, s, len, "month %d is out of range (1-12)", f->month);
    if (f->day < 1 || f->day > civil_days_in_month(f->year, f->month))
    {
        if (f->day >= 1 && f->day <= 31)
            return time_error(err, s, len, "day %d does not exist in %s %d", f->day,
                              month_names[f->month - 1], f->year);
        return time_error(err, s, len, "day %d is out of range (1-31)", f->day);
    }
    *days = civil_days_from_date(f->year, f->month, f->day);
    if (p->date != NULL)
    {
        p->date->year = f->year;
        p->date->month = f->month;
        p->date->day = f->day;
        p->date->days = *days;
    }
    return true;
}

/* Check calendar fields and turn them into µs since the epoch. */
static bool
fields_to_us(const TimeParser *p, Fields *f, const char *s, size_t len, int64_t *us, Err *err)
{
    int64_t days = 0;
    int64_t secs;
    int64_t utc = 0;

    if (f->yday != 0)
    {
        int ylen = civil_is_leap(f->year) ? 366 : 365;

        if (f->yday > ylen)
            return time_error(err, s, len, "day of year %d does not exist in %d", f->yday,
                              f->year);
        civil_date_from_days(civil_days_from_date(f->year, 1, 1) + f->yday - 1, &f->year,
                             &f->month, &f->day);
    }
    if (p->date != NULL && f->year == p->date->year && f->month == p->date->month &&
        f->day == p->date->day)
        days = p->date->days;
    else if (!date_to_days(p, f, s, len, &days, err))
        return false;
    if (f->hour > 23)
    {
        if (f->hour != 24)
            return time_error(err, s, len, "hour %d is out of range (0-23)", f->hour);
        if (f->minute != 0 || f->second != 0 || f->usec != 0)
            return time_error(err, s, len,
                              "hour 24 is only allowed as 24:00:00 (the end of the day)");
    }
    if (f->minute > 59)
        return time_error(err, s, len, "minute %d is out of range (0-59)", f->minute);
    if (f->second == 60)
        return time_error(err, s, len, "leap second (second 60) is not supported");
    if (f->second > 60)
        return time_error(err, s, len, "second %d is out of range (0-59)", f->second);

    if (f->wday != 0 && civil_iso_weekday(days) != f->wday)
        return time_error(err, s, len, "%s %d %d is a %s, not a %s", month_names[f->month - 1],
                          f->day, f->year, weekday_names[civil_iso_weekday(days) - 1],
                          weekday_names[f->wday - 1]);

    /* hour 24 adds a whole day by itself: 24:00 is the next midnight.  Years
     * have at most five digits, so none of this can overflow int64 µs. */
    secs = days * SEC_PER_DAY + f->hour * 3600 + f->minute * 60 + f->second;
    if (f->has_offset)
        utc = secs - f->offset;
    else if (p->zone == NULL)
        utc = secs;
    else if (!zone_resolve(p, secs, &utc, s, len, err))
        return false;
    *us = utc * US_PER_SEC + f->usec;
    return true;
}

/* ------------------------------------------------------------------- ISO */

/* "Z", "+HH", "+HHMM", "+HH:MM", and "+HH:MM:SS" (PostgreSQL prints seconds
 * for historical local-mean-time offsets).  s[*pi] is the sign. */
static bool
read_offset(const char *s, size_t len, size_t *pi, int32_t *off, Err *err)
{
    size_t i = *pi;
    int sign = s[i] == '-' ? -1 : 1;
    int hh;
    int mm = 0;
    int ss = 0;

    i++;
    if (!two_digits(s, len, i, &hh))
        return expect_error(err, s, len, i, "a two-digit UTC offset hour");
    i += 2;
    if (i < len && s[i] == ':')
    {
        if (!two_digits(s, len, i + 1, &mm))
            return expect_error(err, s, len, i + 1, "two-digit UTC offset minutes");
        i += 3;
        if (i < len && s[i] == ':')
        {
            if (!two_digits(s, len, i + 1, &ss))
                return expect_error(err, s, len, i + 1, "two-digit UTC offset seconds");
            i += 3;
        }
    }
    else if (i < len && digit_of(s[i]) <= 9)
    {
        if (!two_digits(s, len, i, &mm))
            return expect_error(err, s, len, i, "two-digit UTC offset minutes");
        i += 2;
    }
    if (hh > 23 || mm > 59 || ss > 59)
        return time_error(err, s, len, "UTC offset %.*s is out of range", (int) (i - *pi),
                          s + *pi);
    *off = sign * (hh * 3600 + mm * 60 + ss);
    *pi = i;
    return true;
}

static bool __attribute__((cold, noinline))
year_error(Err *err, const char *s, size_t len, size_t i)
{
    if (equals_word(s, len, "infinity") || equals_word(s, len, "-infinity") ||
        equals_word(s, len, "+infinity"))
        return time_error(err, s, len, "infinite timestamps are not supported");
    if (len == 0)
        return time_error(err, s, len, "empty input");
    if (i > 5)
        return time_error(err, s, len, "year has more than five digits");
    return expect_error(err, s, len, 0, "a four-digit year");
}

/*
 * YYYY-MM-DD[(T|t| )HH:MM[:SS[(.|,)F...]][Z|z|[ ]+-HH[[:]MM[:SS]]| UTC| GMT| Z]]
 * Straight-line code: this is the hot path for CSV input.
 */
static bool
iso_fields(const char *s, size_t len, Fields *f, Err *err)
{
    size_t i = 0;
    int year = 0;
    unsigned d;
    char c;

    while (i < len && i < 6 && (d = digit_of(s[i])) <= 9)
    {
        year = year * 10 + (int) d;
        i++;
    }
    if (i < 4 || i > 5)
        return year_error(err, s, len, i);
    f->year = year;
    if (i >= len || s[i] != '-')
        return expect_error(err, s, len, i, "\"-\" after the year");
    if (!two_digits(s, len, i + 1, &f->month))
        return expect_error(err, s, len, i + 1, "a two-digit month");
    i += 3;
    if (i >= len || s[i] != '-')
        return expect_error(err, s, len, i, "\"-\" after the month");
    if (!two_digits(s, len, i + 1, &f->day))
        return expect_error(err, s, len, i + 1, "a two-digit day");
    i += 3;
    if (i == len)
        return true;

    c = s[i];
    if (!(c == 'T' || c == 't' || (c == ' ' && i + 1 < len && digit_of(s[i + 1]) <= 9)))
        return trailing_error(err, s, len, i, "the date");
    i++;
    if (!two_digits(s, len, i, &f->hour))
        return expect_error(err, s, len, i, "a two-digit hour");
    i += 2;
    if (i >= len || s[i] != ':')
        return expect_error(err, s, len, i, "\":\" after the hour");
    if (!two_digits(s, len, i + 1, &f->minute))
        return expect_error(err, s, len, i + 1, "two-digit minutes");
    i += 3;
    if (i < len && s[i] == ':')
    {
        if (!two_digits(s, len, i + 1, &f->second))
            return expect_error(err, s, len, i + 1, "two-digit seconds");
        i += 3;
        if (i < len && (s[i] == '.' || s[i] == ','))
        {
            i++;
            if (!read_fraction(s, len, &i, &f->usec))
                return expect_error(err, s, len, i, "a digit after the decimal point");
        }
    }
    if (i == len)
        return true;

    c = s[i];
    if (c == 'Z' || c == 'z')
    {
        f->has_offset = true;
        f->offset = 0;
        i++;
    }
    else if (c == ' ' && (equals_word(s + i + 1, len - i - 1, "UTC") ||
                          equals_word(s + i + 1, len - i - 1, "GMT") ||
                          equals_word(s + i + 1, len - i - 1, "Z")))
    {
        /* "2026-07-01 12:00:00 UTC", as Ruby's Time#to_s writes it */
        f->has_offset = true;
        f->offset = 0;
        i = len;
    }
    else if (c == '+' || c == '-' ||
             (c == ' ' && i + 1 < len && (s[i + 1] == '+' || s[i + 1] == '-')))
    {
        /* A space before the sign ("12:00:00 +0200") is common in logs. */
        if (c == ' ')
            i++;
        f->has_offset = true;
        if (!read_offset(s, len, &i, &f->offset, err))
            return false;
    }
    if (i != len)
        return trailing_error(err, s, len, i, "the time");
    return true;
}

/* --------------------------------------------------------------- epochs */

/*
 * [-]digits[.digits]: the integer part counts units of `scale` µs and the
 * first `fdigits` fraction digits fill the part below one unit.  Digits past
 * 1 µs are dropped rounding toward the past (floor) so that, as with ISO
 * text, a time never moves into the next microsecond; for negative values
 * that is away from zero ("-0.0000015" s is -2 µs).
 */
static bool
epoch_parse(const char *s, size_t len, int fdigits, int64_t scale, int64_t *us, Err *err)
{
    size_t i = 0;
    bool neg = false;
    bool dropped = false;
    uint64_t ival = 0;
    int64_t frac = 0;
    int kept = 0;
    unsigned d;
    int64_t v;

    if (len == 0)
        return time_error(err, s, len, "empty input");
    if (s[0] == '-')
    {
        neg = true;
        i = 1;
    }
    if (i >= len || digit_of(s[i]) > 9)
        return expect_error(err, s, len, i, "a decimal number");
    while (i < len && (d = digit_of(s[i])) <= 9)
    {
        if (ival > (UINT64_MAX - 9) / 10)
            return time_error(err, s, len, "number is out of range");
        ival = ival * 10 + d;
        i++;
    }
    if (i < len && s[i] == '.')
    {
        size_t start = ++i;

        while (i < len && (d = digit_of(s[i])) <= 9)
        {
            if (kept < fdigits)
            {
                frac = frac * 10 + d;
                kept++;
            }
            else if (d != 0)
                dropped = true;
            i++;
        }
        if (i == start)
            return expect_error(err, s, len, i, "a digit after the decimal point");
        for (; kept < fdigits; kept++)
            frac *= 10;
    }
    if (i != len)
        return trailing_error(err, s, len, i, "the number");
    if (ival > (uint64_t) (INT64_MAX - frac) / (uint64_t) scale)
        return time_error(err, s, len, "number is out of range");
    v = (int64_t) ival * scale + frac;
    if (neg)
        v = -v - (dropped ? 1 : 0); /* v >= -INT64_MAX, so -1 stays in range */
    *us = v;
    return true;
}

/* -------------------------------------------------------------- patterns */

static bool
pattern_compile(TimeParser *p, const char *fmt, Err *err)
{
    size_t n = strlen(fmt);
    bool year = false;
    bool monthday = false;
    bool yday = false;

    /* %F and %T expand to five ops from two characters. */
    p->ops = xmalloc((n * 3 + 1) * sizeof *p->ops);
    p->nops = 0;
    for (size_t i = 0; i < n; i++)
    {
        bool expand = false;
        PatOpKind kind = PO_LITERAL;

        if (fmt[i] != '%')
        {
            p->ops[p->nops++] = (PatOp) {.kind = PO_LITERAL, .literal = fmt[i]};
            continue;
        }
        if (++i == n)
            return err_set(err, EC_CONFIG, "time format \"%s\" ends with a lone \"%%\"", fmt);
        switch (fmt[i])
        {
        case 'Y':
            kind = PO_YEAR;
            year = true;
            break;
        case 'm':
            kind = PO_MONTH;
            monthday = true;
            break;
        case 'd':
            kind = PO_DAY;
            monthday = true;
            break;
        case 'e':
            kind = PO_DAY_SPACE;
            monthday = true;
            break;
        case 'H':
            kind = PO_HOUR;
            break;
        case 'M':
            kind = PO_MINUTE;
            break;
        case 'S':
            kind = PO_SECOND;
            break;
        case 'f':
            kind = PO_FRACTION;
            break;
        case 'z':
            kind = PO_OFFSET;
            break;
        case 'b':
        case 'h':
        case 'B':
            kind = PO_MONTH_NAME;
            monthday = true;
            break;
        case 'a':
        case 'A':
            kind = PO_WEEKDAY_NAME;
            break;
        case 'j':
            kind = PO_DAY_OF_YEAR;
            yday = true;
            break;
        case 'T':
            expand = true;
            break;
        case 'F':
            expand = true;
            year = true;
            monthday = true;
            break;
        case '%':
            p->ops[p->nops++] = (PatOp) {.kind = PO_LITERAL, .literal = '%'};
            continue;
        case 'y':
            err_set(err, EC_CONFIG, "unsupported conversion \"%%y\" in time format \"%s\"", fmt);
            err_hint(err, "Two-digit years are ambiguous; use %%Y.");
            return false;
        default:
            err_set(err, EC_CONFIG, "unknown conversion \"%%%c\" in time format \"%s\"", fmt[i],
                    fmt);
            err_hint(err, "Supported: %%Y %%m %%d %%e %%H %%M %%S %%f %%z %%b %%B %%a %%j %%F "
                          "%%T %%%%.");
            return false;
        }
        if (!expand)
        {
            p->ops[p->nops++] = (PatOp) {.kind = kind};
            continue;
        }
        /* %T = %H:%M:%S, %F = %Y-%m-%d */
        {
            char sep = fmt[i] == 'T' ? ':' : '-';
            PatOpKind k[3];

            if (fmt[i] == 'T')
            {
                k[0] = PO_HOUR;
                k[1] = PO_MINUTE;
                k[2] = PO_SECOND;
            }
            else
            {
                k[0] = PO_YEAR;
                k[1] = PO_MONTH;
                k[2] = PO_DAY;
            }
            for (int j = 0; j < 3; j++)
            {
                if (j > 0)
                    p->ops[p->nops++] = (PatOp) {.kind = PO_LITERAL, .literal = sep};
                p->ops[p->nops++] = (PatOp) {.kind = k[j]};
            }
        }
    }
    if (!year)
    {
        err_set(err, EC_CONFIG, "time format \"%s\" has no year", fmt);
        err_hint(err, "Add %%Y (or %%F); a time without a year cannot be placed.");
        return false;
    }
    if (yday && monthday)
        return err_set(err, EC_CONFIG,
                       "time format \"%s\" has both a day of year (%%j) and a month or day",
                       fmt);
    return true;
}

static bool
pattern_fields(const TimeParser *p, const char *s, size_t len, Fields *f, Err *err)
{
    size_t i = 0;

    if (len == 0)
        return time_error(err, s, len, "empty input");
    f->month = 1;
    f->day = 1;
    for (size_t k = 0; k < p->nops; k++)
    {
        const PatOp *op = &p->ops[k];

        switch (op->kind)
        {
        case PO_LITERAL:
            if (i >= len || s[i] != op->literal)
            {
                char what[QUOTE_SIZE + 32];
                char q[8];

                quote_text(&op->literal, 1, q, sizeof q);
                (void) snprintf(what, sizeof what, "\"%s\" (from the time format)", q);
                return expect_error(err, s, len, i, what);
            }
            i++;
            break;
        case PO_YEAR:
            if (!read_digits(s, len, &i, 4, 4, &f->year))
                return expect_error(err, s, len, i, "a four-digit year (%Y)");
            break;
        case PO_MONTH:
            if (!read_digits(s, len, &i, 1, 2, &f->month))
                return expect_error(err, s, len, i, "a month number (%m)");
            break;
        case PO_DAY_SPACE:
            if (i < len && s[i] == ' ')
                i++;
            if (!read_digits(s, len, &i, 1, 2, &f->day))
                return expect_error(err, s, len, i, "a day of the month (%e)");
            break;
        case PO_DAY:
            if (!read_digits(s, len, &i, 1, 2, &f->day))
                return expect_error(err, s, len, i, "a day of the month (%d)");
            break;
        case PO_HOUR:
            if (!read_digits(s, len, &i, 1, 2, &f->hour))
                return expect_error(err, s, len, i, "an hour (%H)");
            break;
        case PO_MINUTE:
            if (!read_digits(s, len, &i, 1, 2, &f->minute))
                return expect_error(err, s, len, i, "minutes (%M)");
            break;
        case PO_SECOND:
            if (!read_digits(s, len, &i, 1, 2, &f->second))
                return expect_error(err, s, len, i, "seconds (%S)");
            break;
        case PO_FRACTION:
            if (!read_fraction(s, len, &i, &f->usec))
                return expect_error(err, s, len, i, "fraction digits (%f)");
            break;
        case PO_OFFSET:
            if (i < len && (s[i] == 'Z' || s[i] == 'z'))
            {
                i++;
                f->has_offset = true;
                f->offset = 0;
            }
            else if (i < len && (s[i] == '+' || s[i] == '-'))
            {
                f->has_offset = true;
                if (!read_offset(s, len, &i, &f->offset, err))
                    return false;
            }
            else
                return expect_error(err, s, len, i, "a UTC offset (%z)");
            break;
        case PO_MONTH_NAME:
            if (!read_name(s, len, &i, month_names, 12, &f->month))
                return expect_error(err, s, len, i, "an English month name (%b)");
            break;
        case PO_WEEKDAY_NAME:
            if (!read_name(s, len, &i, weekday_names, 7, &f->wday))
                return expect_error(err, s, len, i, "an English weekday name (%a)");
            break;
        case PO_DAY_OF_YEAR:
            if (!read_digits(s, len, &i, 1, 3, &f->yday))
                return expect_error(err, s, len, i, "a day of the year (%j)");
            if (f->yday == 0)
                return time_error(err, s, len, "day of year 0 is out of range (1-366)");
            break;
        }
    }
    if (i != len)
        return trailing_error(err, s, len, i, "the end of the time format");
    return true;
}

/* ------------------------------------------------------------------- API */

bool
time_parser_new(const char *format, const char *tz, TimeParser **out, Err *err)
{
    TimeParser *p = xcalloc(1, sizeof *p);

    *out = NULL;
    if (format == NULL || strcmp(format, "iso") == 0)
        p->kind = TK_ISO;
    else if (strcmp(format, "epoch-s") == 0)
        p->kind = TK_EPOCH_S;
    else if (strcmp(format, "epoch-ms") == 0)
        p->kind = TK_EPOCH_MS;
    else if (strcmp(format, "epoch-us") == 0)
        p->kind = TK_EPOCH_US;
    else if (strchr(format, '%') != NULL)
    {
        p->kind = TK_PATTERN;
        p->pattern = xstrdup(format);
        if (!pattern_compile(p, format, err))
            goto fail;
    }
    else
    {
        err_set(err, EC_CONFIG, "unknown time format \"%s\"", format);
        err_hint(err, "Use iso, epoch-s, epoch-ms, epoch-us, or a pattern such as "
                      "\"%%Y-%%m-%%d %%H:%%M:%%S\".");
        goto fail;
    }

    p->date = xcalloc(1, sizeof *p->date);
    /* UTC spellings take the fast path: no tz database, no libc calls. */
    if (tz != NULL && !equals_word(tz, strlen(tz), "UTC") && strcmp(tz, "Etc/UTC") != 0)
    {
        if (!zone_validate(tz, err))
            goto fail;
        p->zone = xstrdup(tz);
        (void) pthread_mutex_lock(&zone_mu);
        zone_activate(p->zone);
        (void) pthread_mutex_unlock(&zone_mu);
        p->cache = xmalloc(sizeof *p->cache);
        for (size_t k = 0; k < ZONE_CACHE_SIZE; k++)
            p->cache->slot[k].day = INT64_MIN;
    }
    *out = p;
    return true;

fail:
    time_parser_free(p);
    return false;
}

bool
time_parser_new_window(const char *tz, TimeParser **out, Err *err)
{
    if (!time_parser_new("iso", tz, out, err))
        return false;
    (*out)->first_occurrence = true;
    return true;
}

void
time_parser_free(TimeParser *p)
{
    if (p == NULL)
        return;
    free(p->ops);
    free(p->pattern);
    free(p->zone);
    free(p->cache);
    free(p->date);
    free(p);
}

bool
time_parse(const TimeParser *p, const char *text, size_t len, int64_t *us, Err *err)
{
    Fields f = {0};

    if (text == NULL)
        text = "";
    switch (p->kind)
    {
    case TK_ISO:
        return iso_fields(text, len, &f, err) && fields_to_us(p, &f, text, len, us, err);
    case TK_EPOCH_S:
        return epoch_parse(text, len, 6, US_PER_SEC, us, err);
    case TK_EPOCH_MS:
        return epoch_parse(text, len, 3, US_PER_MS, us, err);
    case TK_EPOCH_US:
        return epoch_parse(text, len, 0, 1, us, err);
    case TK_PATTERN:
        return pattern_fields(p, text, len, &f, err) && fields_to_us(p, &f, text, len, us, err);
    }
    return err_set(err, EC_INTERNAL, "time parser has an unknown kind %d", (int) p->kind);
}

bool
time_parse_iso(const char *text, int64_t *us, Err *err)
{
    if (text == NULL)
        text = "";
    return time_parse(&utc_iso_parser, text, strlen(text), us, err);
}

/* -------------------------------------------------------------- durations */

typedef struct DurUnit
{
    const char *name;
    int64_t us;
} DurUnit;

/* "m" is minutes (as in systemd and PostgreSQL); months need "mo"/"mon". */
static const DurUnit dur_units[] = {
    {"us", 1},
    {"usec", 1},
    {"usecs", 1},
    {"\xc2\xb5s", 1}, /* µs */
    {"microsecond", 1},
    {"microseconds", 1},
    {"ms", US_PER_MS},
    {"msec", US_PER_MS},
    {"msecs", US_PER_MS},
    {"millisecond", US_PER_MS},
    {"milliseconds", US_PER_MS},
    {"s", US_PER_SEC},
    {"sec", US_PER_SEC},
    {"secs", US_PER_SEC},
    {"second", US_PER_SEC},
    {"seconds", US_PER_SEC},
    {"m", US_PER_MIN},
    {"min", US_PER_MIN},
    {"mins", US_PER_MIN},
    {"minute", US_PER_MIN},
    {"minutes", US_PER_MIN},
    {"h", US_PER_HOUR},
    {"hr", US_PER_HOUR},
    {"hrs", US_PER_HOUR},
    {"hour", US_PER_HOUR},
    {"hours", US_PER_HOUR},
    {"d", US_PER_DAY},
    {"day", US_PER_DAY},
    {"days", US_PER_DAY},
    {"w", 7 * US_PER_DAY},
    {"wk", 7 * US_PER_DAY},
    {"wks", 7 * US_PER_DAY},
    {"week", 7 * US_PER_DAY},
    {"weeks", 7 * US_PER_DAY},
    {"mo", 30 * US_PER_DAY},
    {"mon", 30 * US_PER_DAY},
    {"mons", 30 * US_PER_DAY},
    {"month", 30 * US_PER_DAY},
    {"months", 30 * US_PER_DAY},
    {"y", 365 * US_PER_DAY},
    {"yr", 365 * US_PER_DAY},
    {"yrs", 365 * US_PER_DAY},
    {"year", 365 * US_PER_DAY},
    {"years", 365 * US_PER_DAY},
};

typedef struct DurNumber
{
    int64_t ival;
    int64_t frac; /* first `fdigits` fraction digits */
    int fdigits;
} DurNumber;

static bool __attribute__((cold, noinline))
dur_overflow(Err *err, const char *s)
{
    return dur_error(err, s, "value is too large (the limit is about 292000 years)");
}

/* "found ..." part of a message: the rest of the text, quoted. */
static bool __attribute__((cold, noinline))
dur_expect(Err *err, const char *s, size_t len, size_t i, const char *what)
{
    char rest[QUOTE_SIZE];

    if (i >= len)
        return dur_error(err, s, "text ends early, expected %s", what);
    quote_text(s + i, len - i, rest, sizeof rest);
    return dur_error(err, s, "expected %s, found \"%s\"", what, rest);
}

typedef enum DurRead
{
    DR_NONE, /* no digit here; nothing set in err */
    DR_OK,
    DR_ERROR, /* err is set */
} DurRead;

/* digits[(.|,)digits].  Fraction digits past the sixth are dropped: below
 * 1 µs for seconds, and for larger units 1e-6 of the unit is still far below
 * anything a duration setting needs. */
static DurRead
dur_number(const char *s, size_t len, size_t *pi, DurNumber *n, Err *err)
{
    size_t i = *pi;
    unsigned d;

    n->ival = 0;
    n->frac = 0;
    n->fdigits = 0;
    if (i >= len || digit_of(s[i]) > 9)
        return DR_NONE;
    while (i < len && (d = digit_of(s[i])) <= 9)
    {
        if (n->ival > (INT64_MAX - 9) / 10)
        {
            (void) dur_overflow(err, s);
            return DR_ERROR;
        }
        n->ival = n->ival * 10 + d;
        i++;
    }
    if (i < len && (s[i] == '.' || s[i] == ','))
    {
        size_t start = ++i;

        while (i < len && (d = digit_of(s[i])) <= 9)
        {
            if (n->fdigits < 6)
            {
                n->frac = n->frac * 10 + d;
                n->fdigits++;
            }
            i++;
        }
        if (i == start)
        {
            (void) dur_error(err, s, "expected a digit after the decimal point");
            return DR_ERROR;
        }
    }
    *pi = i;
    return DR_OK;
}

/* total += n * unit, checked.  The fraction is split so that nothing
 * overflows: unit * f / 10^k = (unit / 10^k) * f + (unit % 10^k) * f / 10^k. */
static bool
dur_add(int64_t *total, const DurNumber *n, int64_t unit)
{
    int64_t v;

    if (n->ival > INT64_MAX / unit)
        return false;
    v = n->ival * unit;
    if (n->fdigits > 0)
    {
        int64_t p10 = pow10_32[n->fdigits];
        int64_t fv = (unit / p10) * n->frac + (unit % p10) * n->frac / p10;

        if (v > INT64_MAX - fv)
            return false;
        v += fv;
    }
    if (*total > INT64_MAX - v)
        return false;
    *total += v;
    return true;
}

/* ISO 8601: P[nY][nM][nW][nD][T[nH][nM][nS]], designators in this order. */
static bool
dur_parse_iso(const char *s, size_t len, size_t i, int64_t *us, Err *err)
{
    static const char date_units[] = "YMWD";
    static const char time_units[] = "HMS";
    static const int64_t date_us[] = {365 * US_PER_DAY, 30 * US_PER_DAY, 7 * US_PER_DAY,
                                      US_PER_DAY};
    static const int64_t time_us[] = {US_PER_HOUR, US_PER_MIN, US_PER_SEC};
    int64_t total = 0;
    bool in_time = false;
    int next = 0; /* index of the first designator still allowed */
    int parts = 0;
    int time_parts = 0;

    i++; /* 'P' */
    while (i < len)
    {
        DurNumber n;
        const char *units = in_time ? time_units : date_units;
        const char *hit;
        char c;

        if (!in_time && (s[i] == 'T' || s[i] == 't'))
        {
            in_time = true;
            next = 0;
            i++;
            continue;
        }
        switch (dur_number(s, len, &i, &n, err))
        {
        case DR_OK:
            break;
        case DR_NONE:
            return dur_expect(err, s, len, i, "a number");
        case DR_ERROR:
            return false;
        }
        c = i < len ? ascii_upper(s[i]) : '\0';
        hit = c != '\0' ? strchr(units, c) : NULL;
        if (hit == NULL)
            return dur_error(err, s, "expected one of the designators %s after the number",
                             in_time ? "H, M, S" : "Y, M, W, D (or T before hours)");
        if ((int) (hit - units) < next)
            return dur_error(err, s, "designator %c is out of order", c);
        next = (int) (hit - units) + 1;
        if (!dur_add(&total, &n, in_time ? time_us[hit - units] : date_us[hit - units]))
            return dur_overflow(err, s);
        i++;
        parts++;
        if (in_time)
            time_parts++;
    }
    if (in_time && time_parts == 0 && parts > 0)
        return dur_error(err, s,
                         "T must be followed by hours, minutes or seconds (as in P1DT12H); "
                         "drop the T for days only (P1D)");
    if (parts == 0 || (in_time && time_parts == 0))
        return dur_error(err, s, "the ISO 8601 duration has no components");
    *us = total;
    return true;
}

static bool
is_space(char c)
{
    return c == ' ' || c == '\t';
}

bool
duration_parse(const char *text, int64_t *us, Err *err)
{
    const char *s = text != NULL ? text : "";
    size_t len = strlen(s);
    size_t i = 0;
    int64_t total = 0;

    while (i < len && is_space(s[i]))
        i++;
    while (len > i && is_space(s[len - 1]))
        len--;
    if (i == len)
        return dur_error(err, s, "empty input");
    if (s[i] == '-')
        return dur_error(err, s, "negative durations are not allowed");
    if (s[i] == 'P' || s[i] == 'p')
        return dur_parse_iso(s, len, i, us, err);

    for (bool first = true; i < len; first = false)
    {
        DurNumber n;
        size_t u0;
        const DurUnit *unit = NULL;

        switch (dur_number(s, len, &i, &n, err))
        {
        case DR_OK:
            break;
        case DR_NONE:
            if (s[i] == '-')
                return dur_error(err, s, "negative durations are not allowed");
            return dur_expect(err, s, len, i, "a number");
        case DR_ERROR:
            return false;
        }
        while (i < len && is_space(s[i]))
            i++;
        u0 = i;
        while (i < len && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                           (unsigned char) s[i] >= 0x80))
            i++;
        if (i == u0)
        {
            /* Zero is zero in any unit: a bare "0" (alone) needs none. */
            if (i == len && first && n.ival == 0 && n.frac == 0)
            {
                *us = 0;
                return true;
            }
            return dur_error(err, s, "a number needs a unit, as in 90d, 36h, 15min or 500ms");
        }
        for (size_t k = 0; k < sizeof dur_units / sizeof dur_units[0]; k++)
        {
            if (equals_word(s + u0, i - u0, dur_units[k].name))
            {
                unit = &dur_units[k];
                break;
            }
        }
        if (unit == NULL)
        {
            char q[QUOTE_SIZE];

            quote_text(s + u0, i - u0, q, sizeof q);
            return dur_error(err, s,
                             "unknown unit \"%s\" (use us, ms, s, min, h, d, w, months, years)",
                             q);
        }
        if (!dur_add(&total, &n, unit->us))
            return dur_overflow(err, s);
        while (i < len && is_space(s[i]))
            i++;
    }
    *us = total;
    return true;
}

/*
 * Two or three units, largest first, the smaller ones zero-padded so columns
 * line up in progress output: "3d 4h 05m", "4h 05m 06s", "5m 03s", "1.500s",
 * "250ms", "750us".  Always truncated, never rounded up.
 */
void
duration_format(int64_t us, char *out, size_t size)
{
    const char *sign = "";
    uint64_t u;
    uint64_t sec;

    if (size == 0)
        return;
    if (us < 0)
    {
        sign = "-";
        u = (uint64_t) (-(us + 1)) + 1; /* INT64_MIN has no positive twin */
    }
    else
        u = (uint64_t) us;
    sec = u / (uint64_t) US_PER_SEC;

    if (u == 0)
        (void) snprintf(out, size, "0s");
    else if (sec >= 86400)
        (void) snprintf(out, size, "%s%" PRIu64 "d %" PRIu64 "h %02" PRIu64 "m", sign,
                        sec / 86400, sec / 3600 % 24, sec / 60 % 60);
    else if (sec >= 3600)
        (void) snprintf(out, size, "%s%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", sign,
                        sec / 3600, sec / 60 % 60, sec % 60);
    else if (sec >= 60)
        (void) snprintf(out, size, "%s%" PRIu64 "m %02" PRIu64 "s", sign, sec / 60, sec % 60);
    else if (sec >= 1)
    {
        uint64_t ms = u / (uint64_t) US_PER_MS % 1000;

        if (ms == 0)
            (void) snprintf(out, size, "%s%" PRIu64 "s", sign, sec);
        else
            (void) snprintf(out, size, "%s%" PRIu64 ".%03" PRIu64 "s", sign, sec, ms);
    }
    else if (u >= (uint64_t) US_PER_MS)
        (void) snprintf(out, size, "%s%" PRIu64 "ms", sign, u / (uint64_t) US_PER_MS);
    else
        (void) snprintf(out, size, "%s%" PRIu64 "us", sign, u);
}
