/*
 * Source interface: anything that yields records (CSV files, later a pgoutput
 * stream or a table of another database).  The pipeline pulls records one at a
 * time, copies what it keeps into its batch, and asks for the position after
 * the last record it committed, to resume there.
 *
 * A record the source could read but not make valid (wrong field count,
 * invalid UTF-8) is still returned, with `error` set: the pipeline rejects it
 * with that reason, so nothing read is ever lost.  A failure that makes
 * reading further impossible (I/O error, truncated zstd frame, unterminated
 * quote at end of file) is returned as false + Err.
 */
#ifndef V7FILL_SOURCE_H
#define V7FILL_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"

/* What a record asks of the target.  A file import only inserts. */
typedef enum RecordOp
{
    REC_INSERT = 0, /* a new row: minted, deduplicated by its reference, written */
    REC_UPDATE,     /* the row found by its reference gets the columns sent */
    REC_DELETE,     /* the row found by its reference goes, with its lookup row */
    REC_TRUNCATE,   /* not a row: empties the target and its lookup, in order with
                     * the batch's rows (counted in `truncates`, not in `read`) */
    REC_BOUNDARY,   /* not a row: "nothing arrived for a while": the pipeline ends
                     * the current batch now if it holds anything, counts nothing */
    REC_ABANDON,    /* not a row: the source transaction whose changes came since the
                     * last commit boundary was rolled back at its source: the pipeline
                     * rolls back its open target transaction and drops the batch's
                     * rows (only ever inside a source transaction, so they are all
                     * of it); nothing of it is counted */
} RecordOp;

typedef struct Field
{
    const char *data; /* NULL when is_null */
    size_t len;
    bool is_null;
    bool unchanged;   /* UPDATE: the source did not send this column (pgoutput 'u'):
                       * the target keeps its value; never written as NULL or a
                       * placeholder.  Read only in REC_UPDATE records */
} Field;

typedef struct Record
{
    size_t nfields;
    const Field *fields; /* borrowed: valid until the next call on the source */
    const char *raw;     /* the record's bytes as read (for the rejects output) */
    size_t raw_len;
    uint64_t line;       /* the record's origin: for line-based sources the 1-based line
                          * where it starts; another source puts any 64-bit handle here
                          * (an LSN) that its owner's hooks format (pipeline.h) */
    const char *error;   /* non-NULL: reason the record is invalid (borrowed) */
    bool copy_plain;     /* no field holds a byte COPY text escapes (backslash, tab,
                          * CR, LF): fields may be copied as they are (false: unknown) */
    bool batch_end;      /* the pipeline ends its batch after this record */
    bool batch_hold;     /* inside one source transaction: a full batch is only a piece of
                          * one target transaction, committed after the transaction's last
                          * record (pipeline.h).  The pipeline clears both before each
                          * next(): a source that never sets them is batched by size alone */
    uint8_t op;          /* RecordOp; 0 = insert, as every source did so far */
    const Field *old_fields; /* UPDATE whose key changed: the old key's fields (same
                          * columns, non-key ones null); the row is found by the old
                          * reference and its lookup entry moves to the new one.
                          * NULL otherwise (borrowed like fields) */
} Record;

/* Where a source stands: enough to reopen it and continue after the last
 * record handed out.  `identity` names what was read (path, size and a
 * fingerprint of the first bytes), so a checkpoint is never applied to a
 * different file. */
typedef struct SourcePosition
{
    char identity[256];
    uint64_t offset; /* bytes of (decompressed) input consumed */
    uint64_t line;   /* lines consumed */
    uint64_t records;
    /* The input's first content_len bytes (decompressed; at least offset)
     * hash to content_hash (XXH3-64): the bytes read, not only the file's
     * name and start.  content_len 0: not known (standard input). */
    uint64_t content_len;
    uint64_t content_hash;
    /* A stream's position (zero for files): the end LSN of the last source
     * transaction whose every change was handed out.  txn_lsn/txn_changes:
     * of a transaction in progress (its commit LSN; 0: none) how many changes
     * were: only in positions stored by older versions, which committed a
     * large transaction in several target transactions; read, not written. */
    uint64_t lsn;
    uint64_t txn_lsn;
    uint64_t txn_changes;
    int64_t commit_time_us; /* the source's commit time of the transaction ending at lsn */
} SourcePosition;

typedef struct Source Source;

typedef struct SourceOps
{
    /* Next record; *eof = true and no record at the end. */
    bool (*next)(Source *s, Record *rec, bool *eof, Err *err);
    /* Column names (from the header or given); borrowed. */
    const char *const *(*columns)(Source *s, size_t *ncolumns);
    /* Position after the last record returned by next. */
    void (*position)(Source *s, SourcePosition *pos);
    /* Skip to a position saved earlier; error if the identity differs. */
    bool (*seek)(Source *s, const SourcePosition *pos, Err *err);
    /* Like seek, but first check that the input's bytes are those the position
     * was taken over (when pos->content_len > 0): if they differ (or the
     * position is not a record boundary of this input) *same = false and the
     * source is back before its first record. */
    bool (*resume)(Source *s, const SourcePosition *pos, bool *same, Err *err);
    /* Progress: input bytes read so far and the total (0 if unknown). */
    void (*progress)(Source *s, uint64_t *done, uint64_t *total);
    /* A short name for messages: "orders.csv.zst", "stdin". */
    const char *(*name)(Source *s);
    void (*close)(Source *s);
} SourceOps;

struct Source
{
    const SourceOps *ops;
};

static inline bool
source_next(Source *s, Record *rec, bool *eof, Err *err)
{
    return s->ops->next(s, rec, eof, err);
}

static inline void
source_close(Source *s)
{
    if (s)
        s->ops->close(s);
}

#endif /* V7FILL_SOURCE_H */
