/*
 * COPY text-format encoding (the only place that knows its escaping rules):
 * backslash, tab, newline and carriage return are escaped, NULL is \N,
 * columns are tab-separated, rows end with a newline.
 */
#ifndef V7FILL_COPY_ENCODE_H
#define V7FILL_COPY_ENCODE_H

#include <stdbool.h>
#include <stddef.h>

#include "v7fill/mem.h"

/* Append one field (is_null → \N). */
void copy_encode_field(Buf *out, const char *data, size_t len, bool is_null);
/* Append the column separator / the row terminator. */
static inline void
copy_encode_sep(Buf *out)
{
    buf_putc(out, '\t');
}

static inline void
copy_encode_eol(Buf *out)
{
    buf_putc(out, '\n');
}

/* The inverse, for one field of a line this encoder wrote: decode the field
 * at line[0..len) up to its separator (tab) or the row's end (newline, or
 * len) into out, NUL-terminated (*is_null for \N, out then empty).  Returns
 * the bytes consumed, the separator included. */
size_t copy_decode_field(const char *line, size_t len, Buf *out, bool *is_null);

#endif /* V7FILL_COPY_ENCODE_H */
