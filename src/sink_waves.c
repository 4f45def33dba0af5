/*
 * Waves of a batch's row operations (see sink_waves.h).
 */
#include "v7fill/sink_waves.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"
#include "v7fill/source.h"

/* A key: a reference hash (kind 0) or a given id (kind 1), and the highest
 * wave of a row that had it so far. */
typedef struct WaveKey
{
    uint8_t bytes[REF_HASH_LEN];
    uint8_t kind;
    uint32_t wave;
} WaveKey;

void
waves_init(Waves *w)
{
    memset(w, 0, sizeof *w);
}

void
waves_free(Waves *w)
{
    free(w->order);
    free(w->start);
    free(w->wave);
    free(w->slot);
    free(w->keys);
    memset(w, 0, sizeof *w);
}

uint64_t
sink_key_slot(const uint8_t key[REF_HASH_LEN])
{
    uint64_t a;
    uint64_t c;

    memcpy(&a, key, 8);
    memcpy(&c, key + 8, 8);
    return ((a ^ (c * UINT64_C(0xff51afd7ed558ccd))) * UINT64_C(0x9e3779b97f4a7c15)) >> 17;
}

/* The key's entry, added (wave 0) when new. */
static WaveKey *
key_find(Waves *w, size_t *nkeys, const uint8_t bytes[REF_HASH_LEN], uint8_t kind)
{
    size_t mask = w->slot_cap - 1;

    for (size_t h = (sink_key_slot(bytes) ^ kind) & mask;; h = (h + 1) & mask)
    {
        WaveKey *k;

        if (w->slot[h] == 0)
        {
            k = &w->keys[(*nkeys)++];
            memcpy(k->bytes, bytes, REF_HASH_LEN);
            k->kind = kind;
            k->wave = 0;
            w->slot[h] = *nkeys;
            return k;
        }
        k = &w->keys[w->slot[h] - 1];
        if (k->kind == kind && memcmp(k->bytes, bytes, REF_HASH_LEN) == 0)
            return k;
    }
}

static void
waves_reserve(Waves *w, size_t n)
{
    size_t need = 1;

    while (need < 6 * n + 8) /* at most 3 keys a row, the table half full */
        need *= 2;
    if (w->slot_cap < need)
    {
        free(w->slot);
        w->slot = xmalloc(need * sizeof *w->slot);
        w->slot_cap = need;
    }
    memset(w->slot, 0, w->slot_cap * sizeof *w->slot);
    if (w->keys_cap < 3 * n)
    {
        w->keys_cap = 3 * n;
        w->keys = xrealloc(w->keys, w->keys_cap * sizeof *w->keys);
    }
    if (w->wave_cap < n)
    {
        w->wave_cap = n;
        w->wave = xrealloc(w->wave, n * sizeof *w->wave);
        w->order = xrealloc(w->order, n * sizeof *w->order);
    }
}

size_t
waves_compute(Waves *w, const BatchRow *rows, size_t from, size_t to)
{
    size_t n = to - from;
    size_t nkeys = 0;
    size_t nwaves = 0;

    w->nwaves = 0;
    w->nrows = 0;
    if (n == 0)
        return 0;
    waves_reserve(w, n);
    for (size_t i = 0; i < n; i++)
    {
        const BatchRow *r = &rows[from + i];
        WaveKey *k[3];
        size_t nk = 0;
        uint32_t wave = 0;

        w->wave[i] = 0;
        if (r->outcome != ROW_PENDING || r->op == REC_TRUNCATE)
            continue;
        k[nk++] = key_find(w, &nkeys, r->hash, 0);
        if (r->op == REC_UPDATE && r->has_old)
            k[nk++] = key_find(w, &nkeys, r->old_hash, 0);
        if (r->id_given)
            k[nk++] = key_find(w, &nkeys, r->id.b, 1);
        for (size_t j = 0; j < nk; j++)
            if (k[j]->wave > wave)
                wave = k[j]->wave;
        wave++;
        for (size_t j = 0; j < nk; j++)
            k[j]->wave = wave;
        w->wave[i] = wave;
        if (wave > nwaves)
            nwaves = wave;
    }
    /* Counting sort by wave, stable: reading order within a wave. */
    if (w->start_cap < nwaves + 2)
    {
        w->start_cap = nwaves + 2;
        w->start = xrealloc(w->start, w->start_cap * sizeof *w->start);
    }
    memset(w->start, 0, (nwaves + 2) * sizeof *w->start);
    for (size_t i = 0; i < n; i++)
        if (w->wave[i] > 0)
            w->start[w->wave[i]]++; /* wave v (1-based) counted at start[v] */
    for (size_t v = 1; v <= nwaves + 1; v++)
        w->start[v] += w->start[v - 1];
    /* start[v] is now the end of wave v (1-based) = the start of 0-based wave v */
    for (size_t i = 0; i < n; i++)
        if (w->wave[i] > 0)
            w->order[w->start[w->wave[i] - 1]++] = (uint32_t) (from + i);
    /* Each start[v - 1] advanced to the end of wave v: shift back. */
    for (size_t v = nwaves; v > 0; v--)
        w->start[v] = w->start[v - 1];
    w->start[0] = 0;
    w->nwaves = nwaves;
    w->nrows = w->start[nwaves];
    return nwaves;
}
