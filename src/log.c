/*
 * stderr logger: "2026-11-29 20:00:00.123 UTC [pid] LEVEL: message".
 * Timestamps are shown from -v upwards (detail/debug), or when stderr is not
 * a terminal, so that log files carry them and interactive use stays quiet.
 * A message is written under stderr's lock (flockfile): threads' lines (the
 * captures migrate runs side by side, a stream's reader) never interleave.
 */
#include "v7fill/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

LogLevel log_current_level = LOG_LEVEL_INFO;

static const char *const level_names[] = {"ERROR", "WARNING", "INFO", "DETAIL", "DEBUG"};

void
log_set_level(LogLevel level)
{
    log_current_level = level;
}

static void
log_prefix(LogLevel level)
{
    if (!isatty(STDERR_FILENO) || log_current_level >= LOG_LEVEL_DETAIL)
    {
        struct timeval tv;
        struct tm tm;
        char buf[32];

        gettimeofday(&tv, NULL);
        gmtime_r(&tv.tv_sec, &tm);
        strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
        fprintf(stderr, "%s.%03d UTC [%d] ", buf, (int) (tv.tv_usec / 1000), (int) getpid());
    }
    fprintf(stderr, "%s: ", level_names[level]);
}

void
log_write(LogLevel level, const char *fmt, ...)
{
    va_list ap;

    flockfile(stderr);
    log_prefix(level);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    funlockfile(stderr);
}

void
log_err(const Err *e)
{
    flockfile(stderr);
    log_prefix(LOG_LEVEL_ERROR);
    fprintf(stderr, "%s\n", e->msg[0] ? e->msg : "unknown error");
    if (e->sqlstate[0])
        fprintf(stderr, "SQLSTATE: %s\n", e->sqlstate);
    if (e->detail[0])
        fprintf(stderr, "DETAIL: %s\n", e->detail);
    if (e->hint[0])
        fprintf(stderr, "HINT: %s\n", e->hint);
    funlockfile(stderr);
}
