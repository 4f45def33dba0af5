/*
 * Allocation wrappers and Buf.
 */
#include "v7fill/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
mem_oom(size_t n)
{
    fprintf(stderr, "v7fill: out of memory (requested %zu bytes)\n", n);
    abort();
}

void *
xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        mem_oom(n);
    return p;
}

void *
xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p == NULL)
        mem_oom(count * size);
    return p;
}

void *
xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        mem_oom(n);
    return q;
}

char *
xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *
xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_list ap2;
    int n;
    char *p;

    va_start(ap, fmt);
    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        mem_oom(0);
    p = xmalloc((size_t) n + 1);
    (void) vsnprintf(p, (size_t) n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void
buf_init(Buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void
buf_free(Buf *b)
{
    free(b->data);
    buf_init(b);
}

void
buf_reset(Buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void
buf_grow(Buf *b, size_t need)
{
    size_t cap = b->cap ? b->cap : 256;

    while (cap < need)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void
buf_puts(Buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

void
buf_printf(Buf *b, const char *fmt, ...)
{
    va_list ap;
    va_list ap2;
    int n;

    va_start(ap, fmt);
    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0)
    {
        buf_reserve(b, (size_t) n);
        (void) vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap2);
        b->len += (size_t) n;
    }
    va_end(ap2);
}

void
buf_put_json_string(Buf *b, const char *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0; /* p[run..i) needs no escape: appended in one go */

    buf_putc(b, '"');
    for (size_t i = 0; i < n; i++)
    {
        unsigned char c = (unsigned char) p[i];

        if (c != '"' && c != '\\' && c >= 0x20)
            continue;
        if (i > run)
            buf_append(b, p + run, i - run);
        run = i + 1;
        if (c == '"' || c == '\\')
        {
            buf_putc(b, '\\');
            buf_putc(b, (char) c);
        }
        else
        {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buf_append(b, esc, sizeof esc);
        }
    }
    if (n > run)
        buf_append(b, p + run, n - run); /* (p may be NULL when n is 0) */
    buf_putc(b, '"');
}
