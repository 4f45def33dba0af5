/*
 * Sorting 128-bit keys (reference hashes, UUIDs) held as two big-endian
 * halves, each key carrying a pointer to its item.
 */
#ifndef V7FILL_SORTKEY_H
#define V7FILL_SORTKEY_H

#include <stddef.h>
#include <stdint.h>

typedef struct SortKey
{
    uint64_t hi, lo;
    void *item;
} SortKey;

/* The 16 bytes at p, as a key (unsigned big-endian order = byte order). */
SortKey sortkey_load(const uint8_t *p, void *item);

/* -1, 0, 1 by (hi, lo). */
int sortkey_cmp(const SortKey *a, const SortKey *b);

/* Sort keys[0..n) ascending; tmp is work space for n keys.  Radix on the
 * four most significant bytes of hi that differ between keys (a byte a pass;
 * bytes every key shares, as the time prefix of a batch's ids, cost nothing),
 * then each run of keys tied in those bytes by comparison of the whole key.
 * Not stable for equal keys. */
void sortkey_sort(SortKey *keys, SortKey *tmp, size_t n);

/* Work space for sorting n keys, grown on demand and kept between sorts. */
typedef struct SortWork
{
    SortKey *keys;
    SortKey *tmp;
    size_t cap;
} SortWork;

void sortwork_reserve(SortWork *w, size_t n);
void sortwork_free(SortWork *w);

#endif /* V7FILL_SORTKEY_H */
