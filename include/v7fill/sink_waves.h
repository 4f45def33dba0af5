/*
 * Waves: a batch's row operations regrouped so that each group can be applied
 * set-wise, whatever their interleaving in the source.
 *
 * A row's keys are its reference hash, its old hash (an update that moves its
 * reference: BatchRow.has_old) and its id when it came with the input
 * (BatchRow.id_given).  A row's wave is 1 + the highest wave of any earlier
 * row of the range that shares one of its keys (1 when none does): within a
 * wave every key is distinct, so its operations commute with respect to the
 * reference, and a row's wave is after those of every earlier row it depends
 * on.  Only pending rows take part (decided rows, repeats waiting behind
 * their first row, are left out).  A truncate is not a row: the caller splits
 * the batch at truncates and computes the waves of each segment.
 *
 * Pure: no connection, no allocation but the Waves' own arrays.
 */
#ifndef V7FILL_SINK_WAVES_H
#define V7FILL_SINK_WAVES_H

#include <stddef.h>
#include <stdint.h>

#include "v7fill/sink.h"

typedef struct Waves
{
    uint32_t *order;  /* row indexes, by wave, in reading order within a wave */
    size_t *start;    /* wave w (0-based) is order[start[w] .. start[w + 1]) */
    size_t nwaves;
    size_t nrows;     /* rows in order */
    /* working storage, kept between calls */
    uint32_t *wave;   /* per row of the range: its wave (0: not taking part) */
    uint64_t *slot;   /* open-addressed keys: 1 + index of the key in keys */
    size_t slot_cap;
    struct WaveKey *keys;
    size_t keys_cap;
    size_t order_cap;
    size_t start_cap;
    size_t wave_cap;
} Waves;

/* A 16-byte key's (a reference hash's, an id's) hash for the sink's
 * open-addressed tables: here and the run's seen set (sink.c). */
uint64_t sink_key_slot(const uint8_t key[REF_HASH_LEN]);

void waves_init(Waves *w);
void waves_free(Waves *w);

/* The waves of rows[from, to) (no truncate among them); returns nwaves. */
size_t waves_compute(Waves *w, const BatchRow *rows, size_t from, size_t to);

#endif /* V7FILL_SINK_WAVES_H */
