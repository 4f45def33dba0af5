/*
 * Allocation that exits on out-of-memory (sizes from input are checked
 * against limits before they reach here), and a growable byte buffer.
 */
#ifndef V7FILL_MEM_H
#define V7FILL_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "v7fill/err.h"

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Formatted, newly allocated string; caller frees. */
char *xasprintf(const char *fmt, ...) V7FILL_PRINTF(1, 2);

/* Growable byte buffer; data is always NUL-terminated after len. */
typedef struct Buf
{
    char *data;
    size_t len;
    size_t cap;
} Buf;

void buf_init(Buf *b);
void buf_free(Buf *b);
void buf_reset(Buf *b);
/* Grow so that `need` bytes fit (the out-of-line half of buf_reserve). */
void buf_grow(Buf *b, size_t need);
void buf_puts(Buf *b, const char *s);

/* memcpy for the short pieces a row is made of (fields, ids, references):
 * up to 16 bytes in two overlapping loads and stores, no call.  The buffers
 * must not overlap. */
static inline void
mem_copy(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;

    if (n >= 8 && n <= 16)
    {
        uint64_t a;
        uint64_t b;

        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    }
    else if (n >= 4 && n < 8)
    {
        uint32_t a;
        uint32_t b;

        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    }
    else if (n < 4)
    {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    }
    else
        memcpy(d, s, n);
}

/* The three below run for every field of every row: inline, growth apart. */
static inline void
buf_reserve(Buf *b, size_t extra)
{
    if (b->len + extra + 1 > b->cap)
        buf_grow(b, b->len + extra + 1);
}

static inline void
buf_append(Buf *b, const void *p, size_t n)
{
    buf_reserve(b, n);
    mem_copy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static inline void
buf_putc(Buf *b, char c)
{
    buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}
void buf_printf(Buf *b, const char *fmt, ...) V7FILL_PRINTF(2, 3);
/* Append n bytes as a JSON string: quoted, '"' '\\' and control bytes
 * escaped (the bytes are taken to be UTF-8). */
void buf_put_json_string(Buf *b, const char *p, size_t n);

#endif /* V7FILL_MEM_H */
