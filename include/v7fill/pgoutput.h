/*
 * The pgoutput wire format (PostgreSQL 15, protocol versions 1 and 2): a pure
 * decoder of one CopyData payload of a logical replication stream, and the
 * encoder of the client's Standby Status Update.  No libpq, no I/O.
 *
 * A payload is either an XLogData frame ('w': 25-byte header, then exactly
 * one pgoutput message) or a primary keepalive ('k', 18 bytes).  Layouts are
 * in docs/pgoutput.md of the shared docs (sections 3.3 and 4).
 *
 * The decoder keeps one piece of state between calls: whether it is inside a
 * Stream Start .. Stream Stop block, because only there do Relation, Type,
 * Insert, Update, Delete, Truncate and Message carry an xid field (Origin may
 * follow a Stream Start, without one; Begin, Commit, Stream Commit/Abort and
 * a second Stream Start are errors there, Stream Stop outside).  It checks
 * the message itself (bounds, kinds, flags, trailing bytes, the stream-block
 * rules); the order of transactions and the relation cache are the caller's.
 *
 * Timestamps are returned as UNIX microseconds (the PostgreSQL epoch of
 * 2000-01-01 is converted), LSNs as uint64.
 */
#ifndef V7FILL_PGOUTPUT_H
#define V7FILL_PGOUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"

/* MaxTupleAttributeNumber: no tuple or relation has more columns. */
#define PGO_MAX_COLUMNS      1664
/* Microseconds from 1970-01-01 to 2000-01-01 (the PostgreSQL epoch). */
#define PGO_EPOCH_OFFSET_US  INT64_C(946684800000000)
#define PGO_STATUS_UPDATE_SIZE 34
#define PGO_LSN_TEXT_SIZE    24

typedef struct PgoValue
{
    char kind;        /* 'n' null, 'u' unchanged toast, 't' text, 'b' binary */
    const char *data; /* 't'/'b': borrows the payload, NOT NUL-terminated; else NULL */
    uint32_t len;
} PgoValue;

typedef struct PgoTuple
{
    uint16_t ncols;
    const PgoValue *values;
} PgoTuple;

typedef struct PgoColumn
{
    bool key;         /* flag bit 0: part of the replica identity */
    const char *name;
    uint32_t type_oid;
    int32_t typmod;
} PgoColumn;

typedef struct PgoMessage
{
    char type; /* 'B','C','O','R','Y','I','U','D','T','M','S','E','c','A' */
    bool has_xid;
    uint32_t xid; /* the xid field inside a streamed block; B/S/c/A fill xid too */
    /* B: final_lsn, commit_time_us, xid.  C / c: commit_lsn, end_lsn, commit_time_us (c: xid) */
    uint64_t final_lsn, commit_lsn, end_lsn;
    int64_t commit_time_us; /* UNIX microseconds (pg epoch converted) */
    /* O */
    uint64_t origin_lsn;
    const char *origin_name;
    /* R (relid also for I/U/D) */
    uint32_t relid;
    const char *nspname; /* "" -> "pg_catalog" already substituted */
    const char *relname;
    char replident; /* 'd' default, 'n' nothing, 'f' full, 'i' index */
    uint16_t ncols;
    const PgoColumn *cols;
    /* Y */
    uint32_t type_oid;
    const char *type_nspname, *type_name; /* "" -> "pg_catalog" substituted */
    /* I/U/D: relid; old_kind 'K','O' or 0; old (if old_kind), new_tuple (I, U) or old (D) */
    char old_kind;
    PgoTuple old_tuple, new_tuple;
    /* T */
    uint32_t nrelids;
    const uint32_t *relids;
    uint8_t truncate_flags; /* 1 cascade 2 restart */
    /* M: content borrows the payload (not NUL-terminated) */
    bool transactional;
    uint64_t message_lsn;
    const char *prefix;
    const char *content;
    uint32_t content_len;
    /* S */
    bool first_segment;
    /* A */
    uint32_t subxid;
} PgoMessage;

typedef struct PgoFrame
{
    char kind; /* 'w' or 'k' */
    uint64_t data_start, wal_end;
    int64_t send_time_us; /* UNIX microseconds */
    bool reply_requested; /* 'k' */
    PgoMessage msg;       /* 'w' */
} PgoFrame;

/* Scratch arrays + whether inside a Stream Start..Stop block. */
typedef struct PgoDecoder PgoDecoder;

PgoDecoder *pgo_decoder_new(void);
void pgo_decoder_free(PgoDecoder *d);
/* Forget the stream-block state (after a reconnect). */
void pgo_decoder_reset(PgoDecoder *d);
/* True between a Stream Start and its Stream Stop. */
bool pgo_decoder_in_stream(const PgoDecoder *d);

/*
 * Decode one CopyData payload.  Pointers in *out borrow buf and the decoder's
 * scratch: valid until the next call.  A broken payload is EC_FORMAT with a
 * message naming the frame's LSN, the message type and the byte offset within
 * the message, e.g. "pgoutput: truncated Update message at 0/16B3F00 (needs 4
 * bytes at offset 23, has 2)".  Unknown frame, message or tuple kinds,
 * trailing bytes, stream-block violations, ncols > PGO_MAX_COLUMNS and the
 * two-phase messages ('b','P','K','r','p': not supported) are errors.  On
 * error the decoder's state is unchanged.
 */
bool pgo_decode(PgoDecoder *d, const char *buf, size_t len, PgoFrame *out,
                Err *err) V7FILL_MUST_CHECK;

/* The 34-byte Standby Status Update: 'r', write, flush, apply, client time
 * (UNIX µs converted to the pg epoch), reply flag. */
void pgo_status_update(uint8_t out[PGO_STATUS_UPDATE_SIZE], uint64_t write, uint64_t flush,
                       uint64_t apply, int64_t now_unix_us, bool reply_requested);

/* "16/B374D848" (upper-case hex, as PostgreSQL prints it) in out; returns out. */
const char *pgo_lsn_format(uint64_t lsn, char out[PGO_LSN_TEXT_SIZE]);
/* "X/X", each half 1..8 hex digits, nothing else; false if malformed. */
bool pgo_lsn_parse(const char *s, uint64_t *out);

/* "Update", "Stream Start", ... for a message type byte; "unknown" otherwise. */
const char *pgo_message_name(char type);

#endif /* V7FILL_PGOUTPUT_H */
