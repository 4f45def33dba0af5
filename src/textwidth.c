/*
 * Terminal columns of UTF-8 text (see textwidth.h).
 */
#include "v7fill/textwidth.h"

#include <stdint.h>

/* One character at s: its byte length (at least 1) and its code point. */
static int
utf8_next(const unsigned char *s, uint32_t *cp)
{
    int n = 0;

    if (s[0] < 0x80)
        n = 1;
    else if (s[0] >= 0xC2 && s[0] <= 0xDF)
        n = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        n = 3;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        n = 4;
    if (n == 0)
    {
        *cp = 0xFFFD;
        return 1;
    }
    *cp = n == 1 ? s[0] : s[0] & (0x7F >> n);
    for (int i = 1; i < n; i++)
    {
        if ((s[i] & 0xC0) != 0x80)
        {
            *cp = 0xFFFD;
            return 1;
        }
        *cp = *cp << 6 | (s[i] & 0x3F);
    }
    return n;
}

static int
cp_width(uint32_t c)
{
    if ((c >= 0x0300 && c <= 0x036F) || (c >= 0x200B && c <= 0x200F) || c == 0xFE0F)
        return 0; /* combining marks, zero-width spaces and joiners, VS16 */
    if ((c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF && c != 0x303F) ||
        (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
        (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
        (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
        (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD))
        return 2;
    return 1;
}

int
text_width(const char *s)
{
    const unsigned char *p = (const unsigned char *) s;
    int w = 0;

    while (*p)
    {
        uint32_t c;

        p += utf8_next(p, &c);
        w += cp_width(c);
    }
    return w;
}

void
text_pad(FILE *out, const char *s, int width, int max)
{
    const unsigned char *p = (const unsigned char *) s;
    int w = 0;

    while (*p)
    {
        uint32_t c;
        int n = utf8_next(p, &c);
        int cw = cp_width(c);

        if (max >= 0 && w + cw > max)
            break;
        (void) fwrite(p, 1, (size_t) n, out);
        p += n;
        w += cw;
    }
    for (; w < width; w++)
        fputc(' ', out);
}
