/*
 * Source references: template rendering and the default encoding.
 */
#include "v7fill/srcref.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct SrcrefPart
{
    size_t off;    /* literal: offset into lit */
    size_t len;    /* literal: length; 0 for a column */
    size_t column; /* SIZE_MAX for a literal */
} SrcrefPart;

struct SrcrefTemplate
{
    SrcrefPart *parts;
    size_t nparts;
    char *lit; /* the literal pieces, braces unescaped */
};

bool
srcref_template_uses(const SrcrefTemplate *t, size_t column)
{
    for (size_t i = 0; i < t->nparts; i++)
        if (t->parts[i].len == 0 && t->parts[i].column == column)
            return true;
    return false;
}

static void
tmpl_add(SrcrefTemplate *t, size_t *cap, size_t off, size_t len, size_t column)
{
    if (t->nparts == *cap)
    {
        *cap = *cap ? *cap * 2 : 8;
        t->parts = xrealloc(t->parts, *cap * sizeof *t->parts);
    }
    t->parts[t->nparts].off = off;
    t->parts[t->nparts].len = len;
    t->parts[t->nparts].column = column;
    t->nparts++;
}

bool
srcref_template_compile(const char *tmpl, const char *const *columns, size_t ncolumns,
                        SrcrefTemplate **out, Err *err)
{
    SrcrefTemplate *t = xcalloc(1, sizeof *t);
    size_t cap = 0;
    size_t n = strlen(tmpl);
    size_t o = 0;     /* length of lit so far */
    size_t lit0 = 0;  /* start of the pending literal in lit */
    size_t i = 0;
    bool has_column = false;

    *out = NULL;
    t->lit = xmalloc(n + 1);
    while (i < n)
    {
        char c = tmpl[i];
        size_t start;
        size_t col;

        if (c == '}')
        {
            if (tmpl[i + 1] != '}')
            {
                err_set(err, EC_USAGE,
                        "invalid source reference template \"%.200s\": single '}' at position %zu "
                        "(write \"}}\" for a literal brace)",
                        tmpl, i + 1);
                srcref_template_free(t);
                return false;
            }
            t->lit[o++] = '}';
            i += 2;
            continue;
        }
        if (c != '{')
        {
            t->lit[o++] = c;
            i++;
            continue;
        }
        if (tmpl[i + 1] == '{')
        {
            t->lit[o++] = '{';
            i += 2;
            continue;
        }
        /* A placeholder: the name runs to the next '}'. */
        start = ++i;
        while (i < n && tmpl[i] != '}' && tmpl[i] != '{')
            i++;
        if (i == n || tmpl[i] == '{')
        {
            err_set(err, EC_USAGE,
                    "invalid source reference template \"%.200s\": unclosed '{' at position %zu",
                    tmpl, start);
            srcref_template_free(t);
            return false;
        }
        if (i == start)
        {
            err_set(err, EC_USAGE,
                    "invalid source reference template \"%.200s\": empty column name at "
                    "position %zu",
                    tmpl, start);
            srcref_template_free(t);
            return false;
        }
        for (col = 0; col < ncolumns; col++)
            if (strlen(columns[col]) == i - start &&
                memcmp(columns[col], tmpl + start, i - start) == 0)
                break;
        if (col == ncolumns)
        {
            err_set(err, EC_CONFIG,
                    "source reference template \"%.200s\" names column \"%.*s\", which the input "
                    "does not have",
                    tmpl, (int) (i - start > 100 ? 100 : i - start), tmpl + start);
            err_hint(err, "A template names the input's columns, as its header spells them "
                          "(before any --map).");
            srcref_template_free(t);
            return false;
        }
        if (o > lit0)
            tmpl_add(t, &cap, lit0, o - lit0, SIZE_MAX);
        lit0 = o;
        tmpl_add(t, &cap, 0, 0, col);
        has_column = true;
        i++; /* the '}' */
    }
    if (o > lit0)
        tmpl_add(t, &cap, lit0, o - lit0, SIZE_MAX);
    t->lit[o] = '\0';
    if (!has_column)
    {
        /* Every row would get the same reference and all but the first
         * would be skipped as already imported. */
        err_set(err, EC_USAGE,
                "invalid source reference template \"%.200s\": it names no column, so every row "
                "would get the same reference",
                tmpl);
        srcref_template_free(t);
        return false;
    }
    *out = t;
    return true;
}

/* A value with its backslashes doubled, so that \N stays the NULL marker's. */
static void
append_escaped(Buf *out, const char *p, size_t n)
{
    while (n > 0)
    {
        const char *bs = memchr(p, '\\', n);
        size_t run = bs ? (size_t) (bs - p) + 1 : n;

        buf_append(out, p, run);
        if (bs)
            buf_putc(out, '\\');
        p += run;
        n -= run;
    }
}

void
srcref_build(const SrcrefTemplate *t, const Field *fields, size_t nfields, Buf *out)
{
    buf_reset(out);
    buf_reserve(out, 0); /* data is never NULL, even for an empty rendering */
    for (size_t i = 0; i < t->nparts; i++)
    {
        const SrcrefPart *part = &t->parts[i];
        const Field *f;

        if (part->column == SIZE_MAX)
        {
            buf_append(out, t->lit + part->off, part->len);
            continue;
        }
        f = part->column < nfields ? &fields[part->column] : NULL;
        if (f == NULL || f->is_null)
            buf_append(out, "\\N", 2);
        else
            append_escaped(out, f->data, f->len);
    }
}

void
srcref_default(const Field *fields, size_t nfields, Buf *out)
{
    size_t need = 0;
    char *p;

    /* One reservation per row: at most 20 digits, ':' and ',' per field. */
    for (size_t i = 0; i < nfields; i++)
        need += (fields[i].is_null ? 0 : fields[i].len) + 22;
    buf_reset(out);
    buf_reserve(out, need);
    p = out->data;
    for (size_t i = 0; i < nfields; i++)
    {
        const Field *f = &fields[i];
        char digits[24];
        size_t nd = 0;
        size_t len = f->len;

        if (f->is_null)
        {
            *p++ = 'N';
            *p++ = ',';
            continue;
        }
        do
        {
            digits[nd++] = (char) ('0' + len % 10);
            len /= 10;
        } while (len > 0);
        while (nd > 0)
            *p++ = digits[--nd];
        *p++ = ':';
        if (f->len > 0)
            memcpy(p, f->data, f->len);
        p += f->len;
        *p++ = ',';
    }
    out->len = (size_t) (p - out->data);
    out->data[out->len] = '\0';
}

void
srcref_default_each(const Field *fields, size_t nfields, SrcrefPieceFn fn, void *ctx)
{
    for (size_t i = 0; i < nfields; i++)
    {
        const Field *f = &fields[i];
        char head[24];
        int n;

        if (f->is_null)
        {
            fn(ctx, "N,", 2);
            continue;
        }
        n = snprintf(head, sizeof head, "%zu:", f->len);
        fn(ctx, head, (size_t) n);
        fn(ctx, f->data, f->len);
        fn(ctx, ",", 1);
    }
}

bool
srcref_order(const char *ref, size_t len, uint64_t *v)
{
    size_t start = len;
    uint64_t x = 0;

    while (start > 0 && len - start <= SRCREF_ORDER_DIGITS &&
           (unsigned char) ref[start - 1] - (unsigned) '0' <= 9)
        start--;
    if (start == len || len - start > SRCREF_ORDER_DIGITS)
        return false;
    for (size_t i = start; i < len; i++)
        x = x * 10 + (uint64_t) (ref[i] - '0');
    if (x >= SRCREF_ORDER_LIMIT)
        return false;
    *v = x;
    return true;
}

bool
srcref_key(const char *ref, size_t len, const uint8_t mac[32], bool may_order, uint8_t key[16])
{
    uint64_t v = 0;

    if (!may_order || !srcref_order(ref, len, &v))
    {
        memcpy(key, mac, 16);
        return false;
    }
    for (int i = 0; i < 6; i++)
        key[i] = (uint8_t) (v >> (40 - 8 * i));
    memcpy(key + 6, mac, 10);
    return true;
}

/* Bounded output of srcref_default_values: false once a byte does not fit. */
typedef struct CsvOut
{
    char *p;
    size_t n;
    size_t size;
} CsvOut;

static bool
csv_put(CsvOut *o, const char *s, size_t len)
{
    if (o->n + len >= o->size)
        return false;
    memcpy(o->p + o->n, s, len);
    o->n += len;
    o->p[o->n] = '\0';
    return true;
}

/* One value, quoted when it must be; false when `o` filled up first. */
static bool
csv_value(CsvOut *o, const char *v, size_t len)
{
    bool quote = len == 0 || memchr(v, ',', len) || memchr(v, '"', len) ||
                 memchr(v, '\r', len) || memchr(v, '\n', len);

    if (quote && !csv_put(o, "\"", 1))
        return false;
    for (size_t i = 0; i < len; i++)
        if ((v[i] == '"' && !csv_put(o, "\"", 1)) || !csv_put(o, v + i, 1))
            return false;
    return !quote || csv_put(o, "\"", 1);
}

bool
srcref_default_values(const char *ref, size_t len, char *out, size_t size)
{
    CsvOut o = {out, 0, size};
    size_t i = 0;

    if (size == 0)
        return false;
    out[0] = '\0';
    while (i < len)
    {
        size_t n = 0;
        size_t digits = 0;

        if (i > 0 && !csv_put(&o, ",", 1))
            return false;
        if (ref[i] == 'N')
        {
            if (i + 1 >= len || ref[i + 1] != ',')
                return false;
            i += 2;
            continue;
        }
        while (i < len && ref[i] >= '0' && ref[i] <= '9' && digits < 19)
        {
            n = n * 10 + (size_t) (ref[i++] - '0');
            digits++;
        }
        if (digits == 0 || i >= len || ref[i] != ':')
            return false;
        i++;
        if (n > len - i)
        {
            (void) csv_value(&o, ref + i, len - i); /* cut short: what there is */
            return false;
        }
        if (!csv_value(&o, ref + i, n))
            return false;
        i += n;
        if (i >= len || ref[i] != ',')
            return false;
        i++;
    }
    return true;
}

void
srcref_template_free(SrcrefTemplate *t)
{
    if (t == NULL)
        return;
    free(t->parts);
    free(t->lit);
    free(t);
}
