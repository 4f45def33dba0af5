/*
 * Err helpers.  Messages are truncated, never overflowed.
 */
#include "v7fill/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void V7FILL_PRINTF(3, 0)
err_vformat(char *dst, size_t size, const char *fmt, va_list ap)
{
    int n = vsnprintf(dst, size, fmt, ap);
    if (n < 0)
        dst[0] = '\0';
}

bool
err_set(Err *e, ErrCode code, const char *fmt, ...)
{
    va_list ap;

    if (e == NULL)
        return false;
    err_clear(e);
    e->code = code;
    va_start(ap, fmt);
    err_vformat(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return false;
}

bool
err_errno(Err *e, ErrCode code, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    size_t len;

    if (e == NULL)
        return false;
    err_clear(e);
    e->code = code;
    va_start(ap, fmt);
    err_vformat(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    len = strlen(e->msg);
    (void) snprintf(e->msg + len, sizeof e->msg - len, ": %s", strerror(saved));
    return false;
}

void
err_prefix(Err *e, const char *fmt, ...)
{
    char ctx[512];
    char old[sizeof e->msg];
    va_list ap;

    if (e == NULL)
        return;
    va_start(ap, fmt);
    err_vformat(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    (void) snprintf(e->msg, sizeof e->msg, "%s: %s", ctx, old);
}

void
err_detail(Err *e, const char *fmt, ...)
{
    va_list ap;

    if (e == NULL)
        return;
    va_start(ap, fmt);
    err_vformat(e->detail, sizeof e->detail, fmt, ap);
    va_end(ap);
}

void
err_hint(Err *e, const char *fmt, ...)
{
    va_list ap;

    if (e == NULL)
        return;
    va_start(ap, fmt);
    err_vformat(e->hint, sizeof e->hint, fmt, ap);
    va_end(ap);
}

void
err_clear(Err *e)
{
    if (e == NULL)
        return;
    e->code = EC_OK;
    e->sqlstate[0] = '\0';
    e->msg[0] = '\0';
    e->detail[0] = '\0';
    e->hint[0] = '\0';
    e->constraint[0] = '\0';
}

const char *
err_printable(const char *text, char *buf, size_t size)
{
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *) text; *p && o + 5 < size && o < 200;
         p++)
    {
        if (*p < 0x20 || *p == 0x7f)
            o += (size_t) snprintf(buf + o, size - o, "\\x%02x", *p);
        else
            buf[o++] = (char) *p;
    }
    buf[o < size ? o : size - 1] = '\0';
    return buf;
}

int
err_exit_status(ErrCode code)
{
    switch (code)
    {
        case EC_OK:
            return 0;
        case EC_USAGE:
            return 2;
        case EC_CONFIG:
            return 3;
        case EC_FORMAT:
            return 4;
        case EC_PG_CONNECT:
        case EC_PG_QUERY:
            return 5;
        case EC_LIMIT:
            return 6;
        case EC_IO:
            return 1;
        case EC_INTERRUPTED:
            return 130;
        case EC_INTERNAL:
            return 70;
    }
    return 1;
}
