/*
 * A set of 16-byte reference keys (the lookup's keys, sink.h): what plan
 * counted as inserted so far in the run, so that a reference met again in a
 * later batch or file counts as a duplicate, as import's lookup would have it.
 *
 * Open addressing with linear probing over 16-byte slots, kept at most three
 * quarters full and doubled when it would be more: 21 to 43 bytes per
 * distinct key, up to 64 for a moment while it doubles.  The keys may be
 * ordered (led by an integer), so slots are found by a mix of all 16 bytes.
 */
#ifndef V7FILL_REFSET_H
#define V7FILL_REFSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REFSET_KEY_LEN 16

typedef struct RefSet RefSet;

RefSet *refset_new(void);
void refset_free(RefSet *s);
/* Add a key; true if it was not in the set before. */
bool refset_add(RefSet *s, const uint8_t key[REFSET_KEY_LEN]);
/* Is the key in the set? */
bool refset_has(const RefSet *s, const uint8_t key[REFSET_KEY_LEN]);
/* Empty the set, keeping its room. */
void refset_clear(RefSet *s);
/* Keys in the set. */
size_t refset_count(const RefSet *s);
/* Bytes the set holds now. */
size_t refset_bytes(const RefSet *s);

#endif /* V7FILL_REFSET_H */
