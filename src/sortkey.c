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

/* Radix passes on at most this many bytes of hi: the most significant bytes
 * that differ between keys.  Four bytes order random keys (hashes) all but
 * completely for any batch size; the rare keys they leave tied are put in
 * order by comparison afterwards. */
#define RADIX_BYTES 4

void
sortkey_sort(SortKey *k, SortKey *tmp, size_t n)
{
    uint64_t any = 0;
    uint64_t all = UINT64_MAX;
    uint64_t varying;
    uint64_t mask = 0;
    unsigned shifts[8];
    unsigned nshifts = 0;
    SortKey *src = k;
    SortKey *dst = tmp;

    for (size_t i = 0; i < n; i++)
    {
        any |= k[i].hi;
        all &= k[i].hi;
    }
    /* The bytes of hi that differ somewhere, most significant first. */
    varying = any ^ all;
    for (int shift = 56; shift >= 0 && nshifts < RADIX_BYTES; shift -= 8)
        if ((varying >> shift) & 0xff)
        {
            shifts[nshifts++] = (unsigned) shift;
            mask |= UINT64_C(0xff) << shift;
        }
    /* Least significant of them first (LSD). */
    for (unsigned p = nshifts; p-- > 0;)
    {
        unsigned shift = shifts[p];
        size_t count[256] = {0};
        size_t sum = 0;

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
    /* Keys equal in the sorted bytes (the bytes above them are equal in all
     * keys) are ordered by the whole key. */
    for (size_t i = 0; i < n;)
    {
        size_t j = i + 1;
        while (j < n && (k[j].hi & mask) == (k[i].hi & mask))
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
