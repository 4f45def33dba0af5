/*
 * The sink: writes one batch in one transaction.
 *
 *   BEGIN
 *   [probe: the target for the batch's minted ids (one range scan, local in
 *    time), then the lookup table for the reference hashes still undecided]
 *   COPY lookup (ref_hash, id[, ref])  -- new references only (binary), once
 *   COPY target (...)                  -- rows whose reference was new
 *   DELETE lookup rows of rows refused -- then the next row of their reference
 *                                         (a repeat in the batch) is written
 *   before_commit hook (rejects durable, checkpoint row)
 *   COMMIT
 *
 * A batch with row operations (BatchRow.op) is written in waves
 * (sink_waves.h), between truncates (each applied alone, in its place): a
 * row's wave is one after the last earlier row of the batch that shares its
 * reference (its old one, for a key change; its id, when given), so within a
 * wave every reference is distinct and the operations commute.  Each wave,
 * under one savepoint for them all: its deletes, then its updates, then its
 * inserts (a delete or update that frees a value of another unique column
 * comes before an insert that takes it), each kind set-wise when there are at
 * least 8 (inserts through the rounds above; key changes one by one).  Any
 * error that may be a row's rolls the waves back to that savepoint, and the
 * rows are written again in reading order, as runs, which isolate the row:
 *
 * Runs: the inserts up to the next other operation go through the rounds
 * above, then the operations up to the next insert.  Among those, a set-wise
 * run is at least 8 consecutive updates (that keep their key) or deletes,
 * whose references are all distinct (a repeated reference, a key change, a
 * truncate or a change of kind ends it); under one savepoint:
 *
 *   SELECT key, id, ctid FROM lookup (one index descent per key)  -- ids
 *   deletes: WITH (DELETE lookup rows by ctid) DELETE target WHERE id = ANY
 *            RETURNING id   (distributed: the lookup by key, then the target)
 *   updates: COPY the new values, with the ids found, into a session temp
 *            table; one UPDATE target FROM it per set of columns sent
 *            (WHERE id = the temp row's AND id = ANY: partitions pruned)
 *            RETURNING id; rows not returned are missing (a stale lookup
 *            row deleted, a complete tuple inserted, an incomplete rejected)
 *
 * The other operations, under one savepoint: an update sets the columns sent
 * on the row whose id the lookup has (one UPDATE, the id found by a
 * subquery), a delete takes the lookup row and the target row by its id (one
 * statement), a truncate empties both.  When a run (set-wise or not) fails in
 * a way that may be a row's, it is rolled back to its savepoint and applied
 * row by row, each under its own: a value the server refuses rejects that row
 * alone.  A set-wise statement the server refuses as a statement (a
 * distributed target that cannot plan it) turns set-wise off for the sink,
 * with a warning.  A file import is one run of inserts.
 *
 * Exactness under concurrency comes from the lookup table's primary key: a
 * reference another process committed meanwhile makes the lookup COPY fail
 * with 23505, the batch part is rolled back to its savepoint, probed, and
 * written again without those rows.  Lookup rows are sent in hash order, in
 * one COPY per attempt, before any target row: two importers always lock in
 * the same order (no deadlock), refused rows or not.
 *
 * A target COPY error that may be a row's (anything but connection, session,
 * schema, permission and resource errors) rolls back to a savepoint and the
 * rows are split in halves until the offending rows are found; they are
 * marked rejected with the server's message and SQLSTATE, and their
 * batch-mates land.  A unique violation first probes the target for the ids:
 * rows already there (their lookup rows lost) are duplicates.
 */
#ifndef V7FILL_SINK_H
#define V7FILL_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/mem.h"
#include "v7fill/pg.h"
#include "v7fill/sortkey.h"
#include "v7fill/uuid7.h"

#define REF_HASH_LEN 16

typedef enum RowOutcome
{
    ROW_PENDING = 0, /* to be written */
    ROW_INSERTED,
    ROW_DUPLICATE,   /* reference already imported (or twice in this batch) */
    ROW_REJECTED,    /* client-side or server-side, with a reason */
    ROW_EXPIRED,     /* too late for the retention (not written) */
    ROW_UPDATED,     /* REC_UPDATE: the row found by its reference, updated by its id */
    ROW_DELETED,     /* REC_DELETE: the row and its lookup row deleted */
    ROW_MISSING,     /* REC_DELETE of a row the target does not have (nothing to do) */
    ROW_APPLIED,     /* REC_TRUNCATE done (not a row) */
} RowOutcome;

/* A batch's COPY data and aux stay under 4 GiB, so rows keep 32-bit offsets:
 * the importer ends a batch at --batch-bytes (at most this), and one record
 * adds at most a few hundred MiB. */
#define BATCH_MAX_BYTES ((size_t) 1 << 30)

typedef struct BatchRow
{
    uint8_t hash[REF_HASH_LEN];
    Uuid id;
    int64_t time_us;
    int64_t window_lower_us;   /* the id's window */
    int64_t window_upper_us;
    uint64_t src_line;
    uint32_t copy_off, copy_len; /* target COPY line in data */
    uint32_t ref_off, ref_len;   /* source reference in aux */
    uint32_t raw_off, raw_len;   /* raw input record in aux */
    uint32_t reason_off;         /* NUL-terminated reason in aux (rejects) */
    uint8_t outcome;             /* RowOutcome */
    uint8_t delay_class;         /* DelayClass (tracker.h) */
    bool client_decided;  /* outcome decided before the sink (kept when a batch is redone) */
    bool id_given;        /* the id came with the input (else minted from ref and time) */
    bool in_copy;         /* sink: part of the lookup COPY being built */
    bool key_ordered;     /* the lookup key is led by the reference's integer (srcref.h) */
    bool repeat;          /* a later row of the batch with the reference of an earlier one:
                           * a duplicate unless every row before it fails to land */
    bool in_lookup;       /* sink: its reference and id were COPYed into the lookup */
    bool expired_found;   /* sink: expired, but its reference is in the lookup: a
                           * DUPLICATE (EXPIRED again when the batch is redone) */
    char sqlstate[6];
    uint32_t repeat_next; /* 1 + index of the next row with the same reference; 0: none */
    /* Row operations (source.h RecordOp; 0 = insert).  The sink writes a batch in
     * waves, or as runs in reading order (see the top of this file).  Repeats
     * chain only within one insert run. */
    uint8_t op;
    bool complete;        /* UPDATE: every column sent and the id minted: a missing row
                           * can be inserted */
    bool has_old;         /* UPDATE: found by old_hash, whose lookup row moves to hash */
    bool time_sent;       /* UPDATE: the time column was sent (time_us is its value) */
    bool missing;         /* sink: an UPDATE of a row the target did not have */
    bool time_changed;    /* sink: an UPDATE that moved the time off the id's ms */
    uint32_t run;         /* the insert run the row belongs to (change rows before it) */
    uint32_t sent_off;    /* UPDATE: bitmap of the COPY line's fields sent (bit i = field
                           * i, 0 the id) in aux; UINT32_MAX: all sent */
    uint8_t old_hash[REF_HASH_LEN];
} BatchRow;

typedef struct Batch
{
    BatchRow *rows;
    size_t nrows;
    size_t cap;
    Buf data; /* the rows' target COPY lines, in reading order */
    Buf aux;  /* raw records, references, reasons (batch_store) */
    /* Optional: rows in reference-hash order (the lookup COPY's order), set by
     * whoever sorted them already; by_hash_n = 0 when not. */
    BatchRow **by_hash;
    size_t by_hash_n;
    size_t by_hash_cap;
    /* Commit the batch even when it holds no row: the source's position moved
     * past rows an earlier batch wrote (a REC_BOUNDARY with batch_end). */
    bool keep_position;
    /* One source transaction written in pieces inside one target transaction
     * (pipeline.h, "Large source transactions"): txn_continues: the
     * transaction is open already (an earlier piece): no BEGIN; txn_piece: it
     * stays open after this batch: before_commit runs, COMMIT does not.  A
     * failure rolls the whole transaction back, earlier pieces too. */
    bool txn_continues;
    bool txn_piece;
    /* sink_write failed at its COMMIT with the connection lost: the commit
     * may have landed, so the rows keep the outcomes of that transaction
     * until the caller knows (sink_forget_outcomes if it did not land). */
    bool commit_doubt;
    uint32_t nchanges; /* rows that are not inserts (BatchRow.op): 0 for a file import */
} Batch;

void batch_init(Batch *b);
void batch_reset(Batch *b);
void batch_free(Batch *b);
/* Append a row (zeroed except what the caller fills); returns it. */
BatchRow *batch_add(Batch *b);
/* Store bytes in the batch's aux buffer; returns their offset there. */
size_t batch_store(Batch *b, const void *p, size_t len);
/* Mark a row rejected with a reason (copied into the batch). */
void batch_reject(Batch *b, BatchRow *r, const char *reason, const char *sqlstate);
const char *batch_reason(const Batch *b, const BatchRow *r);

#define BATCH_BY_HASH offsetof(BatchRow, hash)
#define BATCH_BY_ID offsetof(BatchRow, id)
/* Sort rows by their reference hash or id (BATCH_BY_*: 16 bytes, unsigned
 * big-endian); rows already in order are left as they are. */
void batch_rows_sort(SortWork *w, BatchRow **rows, size_t n, size_t key_offset);

/* The lookup table's key column, by the version of v7fill that created it. */
typedef enum LookupShape
{
    LOOKUP_REF_KEY = 0,    /* ref_key uuid: the key of srcref.h (ordered when it can be) */
    LOOKUP_REF_HASH_UUID,  /* ref_hash uuid: the hash's first 16 bytes, never ordered */
    LOOKUP_REF_HASH_BYTEA, /* ref_hash bytea: the same bytes, the oldest shape */
    LOOKUP_LEGACY_ID,      /* the typed key map (--key-map, migrate): legacy_id smallint,
                            * integer or bigint PRIMARY KEY, id uuid NOT NULL UNIQUE; no
                            * hash, no reference text (lookup_map_key_*) */
} LookupShape;

/* The name of the key column in a lookup of this shape. */
const char *lookup_key_column(LookupShape shape);

/*
 * The typed key map's key.  A row's BatchRow.hash is its integer key with the
 * sign bit flipped, big-endian, in bytes 0..7, zeros after: hash order is key
 * order (the lookup COPY and the probes stay sorted, the map's index fills at
 * its right edge).  bits: 16, 32 or 64, the width of legacy_id (smallint,
 * integer, bigint).
 */
void lookup_map_key_encode(int64_t v, uint8_t key[REF_HASH_LEN]);
int64_t lookup_map_key_decode(const uint8_t key[REF_HASH_LEN]);
/* Parse a key value (optional sign, decimal digits, nothing else) into *v and
 * its key; false: reason says why, naming the column ("key column id: not an
 * integer: 'abc'", "... is NULL", "... out of range for smallint: '70000'"). */
bool lookup_map_key_parse(const char *column, const char *data, size_t len, bool is_null,
                          int bits, int64_t *v, uint8_t key[REF_HASH_LEN], char *reason,
                          size_t reason_size);
/* The width of a legacy_id type ("smallint", "integer", "bigint" and their
 * aliases int2, int4, int, int8); 0 for any other. */
int lookup_map_type_bits(const char *type);
/* The SQL name of a width: "smallint", "integer", "bigint". */
const char *lookup_map_type_name(int bits);

/* What a lookup's keys are made of (--lookup-keys): chosen when it is created. */
typedef enum LookupKeys
{
    LOOKUP_KEYS_AS_FOUND = 0, /* a new lookup ordered; an existing one as it is */
    LOOKUP_KEYS_ORDERED,      /* led by the integer a reference ends in (ref_key) */
    LOOKUP_KEYS_HASHED,       /* the keyed hash alone: nothing of a reference in the clear
                               * (created as ref_hash uuid, the unordered shape) */
} LookupKeys;

typedef struct SinkConfig
{
    const char *target_q;   /* quoted schema.table */
    const char *copy_cols;  /* "(col, col, ...)" quoted */
    const char *lookup_q;   /* quoted schema.lookup */
    const char *key_q;      /* the target's quoted partition key (id) column */
    bool keep_ref_text;     /* store the reference text in the lookup */
    LookupShape lookup_shape; /* the lookup's key column, and so its type */
    bool probe_target;      /* may read the target's ids (SELECT on the key column) */
    /* The COPY line's columns one by one, quoted (cols_q[0] the key): the SET
     * list of an update.  Needed only for batches with REC_UPDATE rows. */
    const char *const *cols_q;
    size_t ncols;
    bool distributed;       /* a Citus target: the lookup probe in a form Citus plans */
    int map_bits;           /* LOOKUP_LEGACY_ID: legacy_id's width (16, 32, 64) */
    /* A stream's changes replayed over an initial copy redone under a fresh
     * view (0: none): a key change at a source position (BatchRow.src_line)
     * at most merge_key_moves_upto, whose old reference's lookup row was
     * written before the first fresh copy began (its xmin precedes
     * merge_before_xid, as the server orders transaction ids: so by the copy
     * under the slot's snapshot) and not touched since, and whose new
     * reference's row is in the target already, goes to that row (the copy
     * wrote it, its view later than the change), and the row under the old
     * reference (that first copy's, of the same source row: a change replayed
     * before would have touched its lookup row otherwise) is deleted.  Never
     * with --on-delete ignore (the new reference's row may be a deleted row
     * kept) nor on a distributed target (xmin is a shard's). */
    uint64_t merge_key_moves_upto;
    uint64_t merge_before_xid;
} SinkConfig;

typedef bool (*SinkHook)(void *ctx, Batch *b, Err *err);

typedef struct SinkStats
{
    uint64_t probes;       /* batches that probed the lookup */
    uint64_t conflicts;    /* lookup COPYs that hit a concurrent reference */
    uint64_t splits;       /* savepoint rollbacks while isolating bad rows */
    uint64_t lookup_gap;   /* rows found in the target whose reference the lookup lacked */
    uint64_t wave_replays; /* segments whose waves failed and were written in reading order */
} SinkStats;

typedef struct Sink Sink;

Sink *sink_new(PgConn *c, const SinkConfig *cfg);
void sink_free(Sink *s);
const SinkStats *sink_stats(const Sink *s);

/* Write the batch's pending rows in one transaction (or a piece of one:
 * Batch.txn_continues, Batch.txn_piece), in reading order; on
 * success every pending row is INSERTED, DUPLICATE, REJECTED (an insert or an
 * update), UPDATED, DELETED, MISSING (a delete) or APPLIED (a truncate) (a repeat of a refused row is written
 * in its place: BatchRow.repeat_next) and `before_commit` ran inside the
 * transaction.  On failure the transaction is rolled back (or the connection
 * is gone: check pg_err_is_connection) and row outcomes of server-side
 * decisions are reset to pending, except when the COMMIT itself lost its
 * connection (Batch.commit_doubt): the outcomes stay those of the
 * transaction, for the caller to count if it committed. */
V7FILL_MUST_CHECK bool sink_write(Sink *s, Batch *b, SinkHook before_commit, void *ctx,
                                  Err *err);
/* The transaction open on the sink's connection (the pieces of a source
 * transaction, Batch.txn_continues) is rolled back: what it made goes with
 * it (the temporary table of set-wise updates and deletes). */
void sink_rollback(Sink *s);

/* The batch whose COMMIT was in doubt did not commit: its outcomes of
 * server-side decisions reset to pending, as after a rollback. */
void sink_forget_outcomes(Batch *b);

/* Read-only: mark pending rows whose reference is already in the lookup as
 * DUPLICATE (plan). */
V7FILL_MUST_CHECK bool sink_probe_only(Sink *s, Batch *b, Err *err);

#endif /* V7FILL_SINK_H */
