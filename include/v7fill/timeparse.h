/*
 * Text -> microseconds since the Unix epoch (UTC), locale-independent.
 *
 * Formats:
 *   iso       RFC 3339 / ISO 8601 and PostgreSQL's text output:
 *             "2026-07-01T12:00:00Z", "2026-07-01 12:00:00.5+02", "...+0530",
 *             "...-05:30", "2026-07-01" (date only = midnight), fraction up to
 *             6 digits; further digits are truncated (never rounded), so a
 *             time never moves into the next microsecond.
 *   epoch-s / epoch-ms / epoch-us
 *             a decimal number of seconds / milliseconds / microseconds, with
 *             an optional fraction (truncated below 1 µs).
 *   anything else: a strptime-style pattern (%Y %m %d %H %M %S %f %z %b %j %%
 *             ...), parsed by v7fill itself (no locale).
 * A time without an offset is read in the parser's time zone (IANA name from
 * the system tz database, default UTC).  DST gap (a local time that does not
 * exist): read with the offset in force before the transition, so it lands
 * after the gap (02:30 in a spring-forward gap becomes 03:30 local).  DST
 * overlap (a local time that happens twice): the second occurrence (the
 * offset in force after the transition).  Both as PostgreSQL reads local
 * times (its manual, appendix B.2), so an imported time equals the server's
 * `timestamp '...' AT TIME ZONE tz`.
 */
#ifndef V7FILL_TIMEPARSE_H
#define V7FILL_TIMEPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"

typedef struct TimeParser TimeParser;

/* `format`: "iso" (or NULL), "epoch-s", "epoch-ms", "epoch-us", or a strptime
 * pattern containing '%'.  `tz`: IANA zone name or NULL/"UTC".  An unknown
 * zone or a bad pattern is an EC_CONFIG error. */
V7FILL_MUST_CHECK bool time_parser_new(const char *format, const char *tz, TimeParser **out,
                                       Err *err);
void time_parser_free(TimeParser *p);

/* An "iso" parser for window edges in zone `tz` (--window-tz): the same,
 * except that a local time that happens twice reads as its first occurrence,
 * so that parsing a date gives the first instant that shows it. */
V7FILL_MUST_CHECK bool time_parser_new_window(const char *tz, TimeParser **out, Err *err);

/* Parse `len` bytes of `text` (not necessarily NUL-terminated).  Impossible
 * dates, trailing junk and empty input are EC_FORMAT errors that quote the
 * text. */
V7FILL_MUST_CHECK bool time_parse(const TimeParser *p, const char *text, size_t len, int64_t *us,
                                  Err *err);

/* ISO / PostgreSQL text in UTC (no parser object): the CLI's TIME arguments. */
V7FILL_MUST_CHECK bool time_parse_iso(const char *text, int64_t *us, Err *err);

/* Durations: "90d", "36h", "15min", "30s", "500ms", "2w", "3 months" (30 days
 * each, documented), "1 year" (365 days), and combinations "1d12h"; also ISO
 * 8601 "P30D" / "PT12H".  Result in microseconds, >= 0. */
V7FILL_MUST_CHECK bool duration_parse(const char *text, int64_t *us, Err *err);

/* Format a duration compactly: "3d 4h 05m", "250ms". out >= 48 bytes. */
void duration_format(int64_t us, char *out, size_t size);

#endif /* V7FILL_TIMEPARSE_H */
