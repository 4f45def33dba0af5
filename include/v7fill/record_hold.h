/*
 * Records kept past the next call on their source: a Record's fields are
 * borrowed until then (source.h), so a consumer that reads ahead (the way
 * back of a migration between two databases looks up a chunk's keys in one
 * query before applying it) copies each one here.  Each held record owns its
 * bytes (fields, old_fields, line, op; not raw, error or the batch flags);
 * record_hold_get hands one back as a Record whose pointers stay valid until
 * record_hold_clear.
 */
#ifndef V7FILL_RECORD_HOLD_H
#define V7FILL_RECORD_HOLD_H

#include <stddef.h>

#include "v7fill/source.h"

typedef struct HeldRecord HeldRecord;

typedef struct RecordHold
{
    HeldRecord *v;
    size_t n, cap;
    size_t bytes;      /* the held fields' bytes */
} RecordHold;

/* A copy of rec at the end (every field's bytes, NULLs and unchanged flags as they are). */
void record_hold_add(RecordHold *h, const Record *rec);
/* The i-th held record (i < h->n). */
Record record_hold_get(const RecordHold *h, size_t i);
/* Every record dropped (the memory of the array kept for the next ones). */
void record_hold_clear(RecordHold *h);
void record_hold_free(RecordHold *h);

#endif /* V7FILL_RECORD_HOLD_H */
