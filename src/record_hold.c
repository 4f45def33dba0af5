/*
 * record_hold.c: records kept past their source's next call (record_hold.h).
 */
#include "v7fill/record_hold.h"

#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"

struct HeldRecord
{
    uint8_t op;
    uint64_t line;
    size_t nfields;
    Field *fields;     /* nfields, then (old_fields) nfields more */
    bool has_old;
    char *bytes;       /* every field's data, one after the other */
};

static size_t
bytes_of(const Field *f, size_t n)
{
    size_t total = 0;

    for (size_t i = 0; f && i < n; i++)
        if (!f[i].is_null && f[i].data)
            total += f[i].len;
    return total;
}

static char *
copy_fields(Field *to, const Field *from, size_t n, char *at)
{
    for (size_t i = 0; i < n; i++)
    {
        to[i] = from[i];
        if (from[i].is_null || from[i].data == NULL)
        {
            to[i].data = NULL;
            continue;
        }
        if (from[i].len > 0)
            memcpy(at, from[i].data, from[i].len);
        to[i].data = at;
        at += from[i].len;
    }
    return at;
}

void
record_hold_add(RecordHold *h, const Record *rec)
{
    HeldRecord *r;
    size_t nf = rec->nfields;
    size_t total = bytes_of(rec->fields, nf) + bytes_of(rec->old_fields, nf);
    char *at;

    if (h->n == h->cap)
    {
        h->cap = h->cap ? h->cap * 2 : 64;
        h->v = xrealloc(h->v, h->cap * sizeof *h->v);
    }
    r = &h->v[h->n++];
    r->op = rec->op;
    r->line = rec->line;
    r->nfields = nf;
    r->has_old = rec->old_fields != NULL;
    r->fields = xcalloc(nf * (r->has_old ? 2 : 1) + 1, sizeof *r->fields);
    r->bytes = xmalloc(total + 1);
    h->bytes += total;
    at = copy_fields(r->fields, rec->fields, nf, r->bytes);
    if (r->has_old)
        (void) copy_fields(r->fields + nf, rec->old_fields, nf, at);
}

Record
record_hold_get(const RecordHold *h, size_t i)
{
    const HeldRecord *r = &h->v[i];
    Record rec;

    memset(&rec, 0, sizeof rec);
    rec.op = r->op;
    rec.line = r->line;
    rec.nfields = r->nfields;
    rec.fields = r->fields;
    rec.old_fields = r->has_old ? r->fields + r->nfields : NULL;
    return rec;
}

void
record_hold_clear(RecordHold *h)
{
    for (size_t i = 0; i < h->n; i++)
    {
        free(h->v[i].fields);
        free(h->v[i].bytes);
    }
    h->n = 0;
    h->bytes = 0;
}

void
record_hold_free(RecordHold *h)
{
    record_hold_clear(h);
    free(h->v);
    h->v = NULL;
    h->cap = 0;
}
