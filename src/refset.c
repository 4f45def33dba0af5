/*
 * Set of 16-byte reference keys (plan's memory of the references counted).
 */
#include "v7fill/refset.h"

#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"

struct RefSet
{
    uint8_t (*slot)[REFSET_KEY_LEN]; /* all-zero: empty (the zero key is kept apart) */
    size_t cap;                      /* a power of two */
    size_t count;                    /* keys in slots */
    bool has_zero;
};

static const uint8_t zero_key[REFSET_KEY_LEN];

static uint64_t
load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Both halves, mixed (the finalizer of a 64-bit hash): ordered keys differ
 * first in their leading bytes, hashed ones anywhere. */
static size_t
refset_home(const RefSet *s, const uint8_t *key)
{
    uint64_t h = load64(key) ^ (load64(key + 8) * UINT64_C(0x9e3779b97f4a7c15));

    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return (size_t) h & (s->cap - 1);
}

/* The slot holding key, or the empty one where it would go. */
static size_t
refset_find(const RefSet *s, const uint8_t *key)
{
    size_t i = refset_home(s, key);

    while (memcmp(s->slot[i], zero_key, REFSET_KEY_LEN) != 0 &&
           memcmp(s->slot[i], key, REFSET_KEY_LEN) != 0)
        i = (i + 1) & (s->cap - 1);
    return i;
}

static void
refset_grow(RefSet *s)
{
    uint8_t (*old)[REFSET_KEY_LEN] = s->slot;
    size_t old_cap = s->cap;

    s->cap = old_cap ? old_cap * 2 : 1024;
    s->slot = xcalloc(s->cap, REFSET_KEY_LEN);
    for (size_t i = 0; i < old_cap; i++)
        if (memcmp(old[i], zero_key, REFSET_KEY_LEN) != 0)
            memcpy(s->slot[refset_find(s, old[i])], old[i], REFSET_KEY_LEN);
    free(old);
}

RefSet *
refset_new(void)
{
    RefSet *s = xcalloc(1, sizeof *s);
    refset_grow(s);
    return s;
}

void
refset_free(RefSet *s)
{
    if (s == NULL)
        return;
    free(s->slot);
    free(s);
}

bool
refset_add(RefSet *s, const uint8_t key[REFSET_KEY_LEN])
{
    size_t i;

    if (memcmp(key, zero_key, REFSET_KEY_LEN) == 0)
    {
        bool added = !s->has_zero;
        s->has_zero = true;
        return added;
    }
    if (4 * (s->count + 1) > 3 * s->cap)
        refset_grow(s);
    i = refset_find(s, key);
    if (memcmp(s->slot[i], key, REFSET_KEY_LEN) == 0)
        return false;
    memcpy(s->slot[i], key, REFSET_KEY_LEN);
    s->count++;
    return true;
}

bool
refset_has(const RefSet *s, const uint8_t key[REFSET_KEY_LEN])
{
    if (memcmp(key, zero_key, REFSET_KEY_LEN) == 0)
        return s->has_zero;
    return memcmp(s->slot[refset_find(s, key)], key, REFSET_KEY_LEN) == 0;
}

void
refset_clear(RefSet *s)
{
    if (s->count > 0)
        memset(s->slot, 0, s->cap * REFSET_KEY_LEN);
    s->count = 0;
    s->has_zero = false;
}

size_t
refset_count(const RefSet *s)
{
    return s->count + (s->has_zero ? 1 : 0);
}

size_t
refset_bytes(const RefSet *s)
{
    return sizeof *s + s->cap * REFSET_KEY_LEN;
}
