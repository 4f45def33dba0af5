/*
 * libFuzzer target for source references.  Input: a template, a NUL byte,
 * then field values separated by 0x01 (a value of exactly 0x02 is NULL).
 * Beyond "no crash", it checks the promises of srcref.h:
 *
 * - the default encoding decodes back to exactly the fields (so two
 *   different rows can never share a reference), and reads back as CSV
 *   (srcref_default_csv) whole, or cut without writing past its output;
 * - a template renders a NULL differently from every text value;
 * - a compiled template renders its literal text with braces unescaped;
 * - a lookup key is ordered only by the integer the reference ends in, and
 *   keeps 80 bits of the hash either way.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"
#include "v7fill/srcref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_FIELDS 64

static const char *const columns[] = {"id", "a", "b", "x y", "{", "é"};

/* Decode "len:bytes," / "N," and compare with the fields. */
static bool
same(const Buf *a, const Buf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static void
check_default_decodes(const Buf *b, const Field *f, size_t n)
{
    size_t i = 0;
    size_t k = 0;

    while (i < b->len)
    {
        size_t len = 0;

        if (k >= n)
            abort();
        if (b->data[i] == 'N')
        {
            if (!f[k].is_null || i + 1 >= b->len || b->data[i + 1] != ',')
                abort();
            i += 2;
            k++;
            continue;
        }
        if (f[k].is_null)
            abort();
        while (i < b->len && b->data[i] >= '0' && b->data[i] <= '9')
            len = len * 10 + (size_t) (b->data[i++] - '0');
        if (i >= b->len || b->data[i] != ':' || len != f[k].len || b->len - i - 1 < len + 1)
            abort();
        i++;
        if (memcmp(b->data + i, f[k].data, len) != 0 || b->data[i + len] != ',')
            abort();
        i += len + 1;
        k++;
    }
    if (k != n)
        abort();
}

/* srcref_default_csv: a whole reference reads back whole when the output
 * has room for the worst case (every byte a doubled quote, every value
 * quoted); cut references and small outputs stay inside the output (heap
 * buffers of the exact size, for ASan) and NUL-terminated. */
static void
check_csv(const Buf *b, size_t n)
{
    size_t room = 2 * b->len + 3 * n + 1;
    char *out = xmalloc(room);

    if (!srcref_default_csv(b->data, b->len, out, room) || strlen(out) >= room)
        abort();
    free(out);
    for (size_t cut = 0; cut <= b->len; cut += 1 + b->len / 64)
        for (size_t size = 1; size <= 9; size += 4)
        {
            out = xmalloc(size);
            (void) srcref_default_csv(b->data, cut, out, size);
            if (strlen(out) >= size)
                abort();
            free(out);
        }
}

/* srcref_order and srcref_key on a rendered reference. */
static void
check_key(const Buf *ref)
{
    uint8_t mac[32];
    uint8_t key[16];
    uint64_t v = 0;
    size_t start = ref->len;
    char digits[24];
    bool ordered;

    for (int i = 0; i < 32; i++)
        mac[i] = (uint8_t) (i * 37 + 11);
    while (start > 0 && ref->data[start - 1] >= '0' && ref->data[start - 1] <= '9')
        start--;
    ordered = srcref_key(ref->data, ref->len, mac, true, key);

    if (ordered != srcref_order(ref->data, ref->len, &v))
        abort();
    if (!ordered)
    {
        if (memcmp(key, mac, 16) != 0)
            abort(); /* no order: the hash alone */
        return;
    }
    if (v >= SRCREF_ORDER_LIMIT || start == ref->len || ref->len - start > SRCREF_ORDER_DIGITS)
        abort();
    while (start + 1 < ref->len && ref->data[start] == '0')
        start++; /* leading zeros */
    (void) snprintf(digits, sizeof digits, "%llu", (unsigned long long) v);
    if (strlen(digits) != ref->len - start || memcmp(digits, ref->data + start, strlen(digits)) != 0)
        abort(); /* not the integer the reference ends in */
    if (memcmp(key + 6, mac, 10) != 0)
        abort();
    for (int i = 0; i < 6; i++)
        if (key[i] != (uint8_t) (v >> (40 - 8 * i)))
            abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    char *tmpl;
    Field fields[FUZZ_MAX_FIELDS];
    size_t nfields = 0;
    SrcrefTemplate *t = NULL;
    Err err = {0};
    Buf b;
    Buf other;

    if (nul == NULL)
        return 0;
    tmpl = xstrndup((const char *) data, (size_t) (nul - data));
    for (const uint8_t *p = nul + 1, *end = data + size; p <= end && nfields < FUZZ_MAX_FIELDS;)
    {
        const uint8_t *sep = memchr(p, 1, (size_t) (end - p));
        size_t len = sep ? (size_t) (sep - p) : (size_t) (end - p);

        if (len == 1 && p[0] == 2)
            fields[nfields] = (Field){NULL, 0, true};
        else
            fields[nfields] = (Field){(const char *) p, len, false};
        nfields++;
        if (sep == NULL)
            break;
        p = sep + 1;
    }

    buf_init(&b);
    buf_init(&other);
    srcref_default(fields, nfields, &b);
    check_default_decodes(&b, fields, nfields);
    check_csv(&b, nfields);
    check_key(&b);

    if (srcref_template_compile(tmpl, columns, sizeof columns / sizeof columns[0], &t, &err))
    {
        for (size_t i = 0; i < nfields && i < sizeof columns / sizeof columns[0]; i++)
        {
            static const Field texts[] = {{"\\N", 2, false}, {"", 0, false}, {"N", 1, false}};
            static const Field null = {NULL, 0, true};
            Field saved = fields[i];

            /* Is column i in the template?  Then two texts render apart. */
            fields[i] = (Field){"p1", 2, false};
            srcref_build(t, fields, nfields, &b);
            check_key(&b);
            fields[i] = (Field){"p2", 2, false};
            srcref_build(t, fields, nfields, &other);
            if (!same(&b, &other))
            {
                fields[i] = null;
                srcref_build(t, fields, nfields, &b);
                for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
                {
                    fields[i] = texts[k];
                    srcref_build(t, fields, nfields, &other);
                    if (same(&b, &other))
                        abort(); /* NULL rendered like a text value */
                }
            }
            fields[i] = saved;
        }
        srcref_template_free(t);
    }
    else if (t != NULL || err.code == EC_OK || err.msg[0] == '\0')
        abort(); /* failure must leave no template and say why */

    buf_free(&b);
    buf_free(&other);
    free(tmpl);
    return 0;
}
