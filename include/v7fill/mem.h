/*
 * Allocation that exits on out-of-memory (sizes from input are checked
 * against limits before they reach here), and a growable byte buffer.
 */
#ifndef V7FILL_MEM_H
#define V7FILL_MEM_H

#include <stddef.h>

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
void buf_reserve(Buf *b, size_t extra);
void buf_append(Buf *b, const void *p, size_t n);
void buf_putc(Buf *b, char c);
void buf_puts(Buf *b, const char *s);
void buf_printf(Buf *b, const char *fmt, ...) V7FILL_PRINTF(2, 3);

#endif /* V7FILL_MEM_H */
