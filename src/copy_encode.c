/*
 * COPY text encoding.  Fields are scanned for the four bytes that need an
 * escape; the common case (none) is a single memcpy.
 */
#include "v7fill/copy_encode.h"

#include <string.h>

static bool
needs_escape(unsigned char c)
{
    return c == '\\' || c == '\t' || c == '\n' || c == '\r';
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
    for (size_t i = 0; i < len; i++)
    {
        unsigned char c = (unsigned char) data[i];
        if (!needs_escape(c))
            continue;
        buf_append(out, data + start, i - start);
        switch (c)
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
        start = i + 1;
    }
    buf_append(out, data + start, len - start);
}

void
copy_encode_sep(Buf *out)
{
    buf_putc(out, '\t');
}

void
copy_encode_eol(Buf *out)
{
    buf_putc(out, '\n');
}
