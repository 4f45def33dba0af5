/*
 * COPY text encoding.  Fields are scanned for the four bytes that need an
 * escape; the common case (none) is a single memcpy.
 */
#include "v7fill/copy_encode.h"

#include <stdint.h>
#include <string.h>

static bool
needs_escape(unsigned char c)
{
    return c == '\\' || c == '\t' || c == '\n' || c == '\r';
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Non-zero if a byte of w equals the byte repeated in rep (exact as a yes/no). */
static uint64_t
has_byte(uint64_t w, uint64_t rep)
{
    uint64_t x = w ^ rep;
    return (x - ONES) & ~x & HIGHS;
}

/* Length of the prefix of p[0..len) that needs no escape, eight bytes at a
 * time while it can. */
static size_t
plain_prefix(const char *p, size_t len)
{
    size_t i = 0;

    for (; i + 8 <= len; i += 8)
    {
        uint64_t w;

        memcpy(&w, p + i, sizeof w);
        if (has_byte(w, '\\' * ONES) | has_byte(w, '\t' * ONES) | has_byte(w, '\n' * ONES) |
            has_byte(w, '\r' * ONES))
            break;
    }
    while (i < len && !needs_escape((unsigned char) p[i]))
        i++;
    return i;
}

void
copy_encode_field(Buf *out, const char *data, size_t len, bool is_null)
{
    size_t start = 0;

    if (is_null)
    {
        buf_append(out, "\\N", 2);
        return;
    }
    buf_reserve(out, len);
    for (;;)
    {
        size_t end = start + plain_prefix(data + start, len - start);

        buf_append(out, data + start, end - start);
        if (end == len)
            return;
        switch (data[end])
        {
            case '\\':
                buf_append(out, "\\\\", 2);
                break;
            case '\t':
                buf_append(out, "\\t", 2);
                break;
            case '\n':
                buf_append(out, "\\n", 2);
                break;
            default:
                buf_append(out, "\\r", 2);
                break;
        }
        start = end + 1;
    }
}

size_t
copy_decode_field(const char *line, size_t len, Buf *out, bool *is_null)
{
    size_t i = 0;

    buf_reset(out);
    *is_null = false;
    if (len >= 2 && line[0] == '\\' && line[1] == 'N' && (len == 2 || line[2] == '\t' ||
                                                         line[2] == '\n'))
        i = 2, *is_null = true;
    while (!*is_null && i < len && line[i] != '\t' && line[i] != '\n')
    {
        size_t end = i;

        while (end < len && line[end] != '\\' && line[end] != '\t' && line[end] != '\n')
            end++;
        buf_append(out, line + i, end - i);
        i = end;
        if (i < len && line[i] == '\\' && i + 1 < len)
        {
            char c = line[i + 1];

            buf_putc(out, c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : c);
            i += 2;
        }
        else if (i < len && line[i] == '\\')
            i++; /* a lone backslash at the end: not written by the encoder */
    }
    buf_putc(out, '\0');
    out->len--;
    return i < len ? i + 1 : i;
}
