/*
 * 128-bit key sort: see sortkey.h.
 */
#include "v7fill/sortkey.h"

#include "v7fill/mem.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

SortKey
sortkey_load(const uint8_t *p, void *item)
{
    SortKey k;
    uint64_t v;

    memcpy(&v, p, sizeof v);
    k.hi = be64toh(v);
    memcpy(&v, p + 8, sizeof v);
    k.lo = be64toh(v);
    k.item = item;
    return k;
}

int
sortkey_cmp(const SortKey *a, const SortKey *b)
{
    if (a->hi != b->hi)
        return a->hi < b->hi ? -1 : 1;
    return (a->lo > b->lo) - (a->lo < b->lo);
}

static int
sortkey_qcmp(const void *a, const void *b)
{
    return sortkey_cmp(a, b);
}

void
sortkey_sort(SortKey *k, SortKey *tmp, size_t n)
{
    uint64_t any = 0;
    uint64_t all = UINT64_MAX;
    SortKey *src = k;
    SortKey *dst = tmp;

    for (size_t i = 0; i < n; i++)
    {
        any |= k[i].hi;
        all &= k[i].hi;
    }
    for (unsigned shift = 0; shift < 64; shift += 8)
    {
        size_t count[256] = {0};
        size_t sum = 0;

        if ((((any ^ all) >> shift) & 0xff) == 0)
            continue;
        for (size_t i = 0; i < n; i++)
            count[(src[i].hi >> shift) & 0xff]++;
        for (size_t b = 0; b < 256; b++)
        {
            size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i].hi >> shift) & 0xff]++] = src[i];
        dst = src;
        src = dst == k ? tmp : k;
    }
    if (src != k)
        memcpy(k, src, n * sizeof *k);
    for (size_t i = 0; i < n;)
    {
        size_t j = i + 1;
        while (j < n && k[j].hi == k[i].hi)
            j++;
        if (j - i > 1)
            qsort(k + i, j - i, sizeof *k, sortkey_qcmp);
        i = j;
    }
}

void
sortwork_reserve(SortWork *w, size_t n)
{
    if (w->cap >= n)
        return;
    w->cap = n;
    w->keys = xrealloc(w->keys, n * sizeof *w->keys);
    w->tmp = xrealloc(w->tmp, n * sizeof *w->tmp);
}

void
sortwork_free(SortWork *w)
{
    free(w->keys);
    free(w->tmp);
    w->keys = w->tmp = NULL;
    w->cap = 0;
}
