/*
 * Allocation that exits on out-of-memory (sizes from input are checked
 * against limits before they reach here), and a growable byte buffer.
 */
#ifndef V7FILL_MEM_H
#define V7FILL_MEM_H

#include <stddef.h>
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
    memcpy(b->data + b->len, p, n);
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

#endif /* V7FILL_MEM_H */
