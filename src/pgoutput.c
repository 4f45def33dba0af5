/*
 * pgoutput decoding and the Standby Status Update (see pgoutput.h).
 *
 * Every read goes through a cursor (Rd) that knows the bounds, the message
 * being read and the frame's LSN, so that every error names them.  Offsets in
 * messages are relative to the pgoutput message (its type byte is offset 0);
 * offsets in a frame header are relative to the payload.
 */
#include "v7fill/pgoutput.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"

#define XLOGDATA_HEADER 25
#define KEEPALIVE_SIZE  18

struct PgoDecoder
{
    bool in_stream;
    PgoValue old_values[PGO_MAX_COLUMNS];
    PgoValue new_values[PGO_MAX_COLUMNS];
    PgoColumn cols[PGO_MAX_COLUMNS];
    uint32_t *relids;
    size_t relids_cap;
};

/* A bounds-checked big-endian reader over one message or frame header. */
typedef struct Rd
{
    const uint8_t *p;
    size_t len;
    size_t off;
    const char *what; /* "Update", "XLogData header" */
    bool message;     /* what is a message's name: " message" follows it */
    bool has_lsn;
    uint64_t lsn;
    Err *err;
} Rd;

PgoDecoder *
pgo_decoder_new(void)
{
    return xcalloc(1, sizeof(PgoDecoder));
}

void
pgo_decoder_free(PgoDecoder *d)
{
    if (d == NULL)
        return;
    free(d->relids);
    free(d);
}

void
pgo_decoder_reset(PgoDecoder *d)
{
    d->in_stream = false;
}

bool
pgo_decoder_in_stream(const PgoDecoder *d)
{
    return d->in_stream;
}

const char *
pgo_message_name(char type)
{
    switch (type)
    {
    case 'B': return "Begin";
    case 'C': return "Commit";
    case 'O': return "Origin";
    case 'R': return "Relation";
    case 'Y': return "Type";
    case 'I': return "Insert";
    case 'U': return "Update";
    case 'D': return "Delete";
    case 'T': return "Truncate";
    case 'M': return "Message";
    case 'S': return "Stream Start";
    case 'E': return "Stream Stop";
    case 'c': return "Stream Commit";
    case 'A': return "Stream Abort";
    case 'b': return "Begin Prepare";
    case 'P': return "Prepare";
    case 'K': return "Commit Prepared";
    case 'r': return "Rollback Prepared";
    case 'p': return "Stream Prepare";
    default: return "unknown";
    }
}

const char *
pgo_lsn_format(uint64_t lsn, char out[PGO_LSN_TEXT_SIZE])
{
    snprintf(out, PGO_LSN_TEXT_SIZE, "%" PRIX32 "/%" PRIX32, (uint32_t) (lsn >> 32),
             (uint32_t) lsn);
    return out;
}

/* 1..8 hex digits ending at `stop`; returns the position after them or NULL. */
static const char *
parse_hex32(const char *s, char stop, uint32_t *out)
{
    uint32_t v = 0;
    int n = 0;

    for (; *s != stop; s++, n++)
    {
        unsigned char c = (unsigned char) *s;
        if (!isxdigit(c) || n == 8)
            return NULL;
        v = (v << 4) | (uint32_t) (isdigit(c) ? c - '0' : tolower(c) - 'a' + 10);
    }
    if (n == 0)
        return NULL;
    *out = v;
    return s;
}

bool
pgo_lsn_parse(const char *s, uint64_t *out)
{
    uint32_t hi, lo;

    if (s == NULL || (s = parse_hex32(s, '/', &hi)) == NULL)
        return false;
    if (parse_hex32(s + 1, '\0', &lo) == NULL)
        return false;
    *out = ((uint64_t) hi << 32) | lo;
    return true;
}

static void
put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t) v;
}

void
pgo_status_update(uint8_t out[PGO_STATUS_UPDATE_SIZE], uint64_t write, uint64_t flush,
                  uint64_t apply, int64_t now_unix_us, bool reply_requested)
{
    int64_t pg_us = now_unix_us < INT64_MIN + PGO_EPOCH_OFFSET_US
                        ? INT64_MIN
                        : now_unix_us - PGO_EPOCH_OFFSET_US;

    out[0] = 'r';
    put_u64(out + 1, write);
    put_u64(out + 9, flush);
    put_u64(out + 17, apply);
    put_u64(out + 25, (uint64_t) pg_us);
    out[33] = reply_requested ? 1 : 0;
}

/* pg-epoch µs to UNIX µs, saturating instead of overflowing. */
static int64_t
pg_to_unix_us(uint64_t raw)
{
    int64_t pg_us = (int64_t) raw;
    if (pg_us > INT64_MAX - PGO_EPOCH_OFFSET_US)
        return INT64_MAX;
    return pg_us + PGO_EPOCH_OFFSET_US;
}

/* 'x' or 0x01: a byte from the input fit for a message. */
static const char *
byte_text(uint8_t b, char out[16])
{
    if (b >= 0x20 && b < 0x7f)
        snprintf(out, 16, "'%c'", (char) b);
    else
        snprintf(out, 16, "0x%02X", (unsigned) b);
    return out;
}

static const char *
rd_where(const Rd *r, char out[PGO_LSN_TEXT_SIZE + 4])
{
    char lsn[PGO_LSN_TEXT_SIZE];

    if (!r->has_lsn)
        return "";
    pgo_lsn_format(r->lsn, lsn);
    snprintf(out, PGO_LSN_TEXT_SIZE + 4, " at %s", lsn);
    return out;
}

/* "pgoutput: bad Update message at 0/16B3F00: <detail>" */
static bool rd_bad(Rd *r, const char *fmt, ...) V7FILL_PRINTF(2, 3);

static bool
rd_bad(Rd *r, const char *fmt, ...)
{
    char where[PGO_LSN_TEXT_SIZE + 4];
    char detail[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return err_set(r->err, EC_FORMAT, "pgoutput: bad %s%s%s: %s", r->what,
                   r->message ? " message" : "", rd_where(r, where), detail);
}

static bool
rd_truncated(Rd *r, size_t n)
{
    char where[PGO_LSN_TEXT_SIZE + 4];

    return err_set(r->err, EC_FORMAT,
                   "pgoutput: truncated %s%s%s (needs %zu bytes at offset %zu, has %zu)", r->what,
                   r->message ? " message" : "", rd_where(r, where), n, r->off, r->len - r->off);
}

/* Every field of every message passes here: the error's text is made apart. */
static inline bool
rd_need(Rd *r, size_t n)
{
    return r->len - r->off >= n || rd_truncated(r, n);
}

static bool
rd_u8(Rd *r, uint8_t *v)
{
    if (!rd_need(r, 1))
        return false;
    *v = r->p[r->off++];
    return true;
}

static bool
rd_u16(Rd *r, uint16_t *v)
{
    if (!rd_need(r, 2))
        return false;
    *v = (uint16_t) ((r->p[r->off] << 8) | r->p[r->off + 1]);
    r->off += 2;
    return true;
}

static bool
rd_u32(Rd *r, uint32_t *v)
{
    if (!rd_need(r, 4))
        return false;
    *v = ((uint32_t) r->p[r->off] << 24) | ((uint32_t) r->p[r->off + 1] << 16) |
         ((uint32_t) r->p[r->off + 2] << 8) | r->p[r->off + 3];
    r->off += 4;
    return true;
}

static bool
rd_u64(Rd *r, uint64_t *v)
{
    uint32_t hi, lo;

    if (!rd_need(r, 8))
        return false;
    (void) rd_u32(r, &hi);
    (void) rd_u32(r, &lo);
    *v = ((uint64_t) hi << 32) | lo;
    return true;
}

static bool
rd_time(Rd *r, int64_t *us)
{
    uint64_t raw;

    if (!rd_u64(r, &raw))
        return false;
    *us = pg_to_unix_us(raw);
    return true;
}

/* A NUL-terminated string inside the buffer; the pointer borrows it. */
static bool
rd_str(Rd *r, const char *field, const char **s)
{
    const uint8_t *start = r->p + r->off;
    const uint8_t *nul = memchr(start, '\0', r->len - r->off);

    if (nul == NULL)
        return rd_bad(r, "%s at offset %zu has no terminating NUL within the %zu bytes left",
                      field, r->off, r->len - r->off);
    *s = (const char *) start;
    r->off += (size_t) (nul - start) + 1;
    return true;
}

static bool
rd_unknown_marker(Rd *r, const char *field, const char *allowed, uint8_t b)
{
    char shown[16];

    return rd_bad(r, "unknown %s %s at offset %zu (expected one of %s)", field,
                  byte_text(b, shown), r->off - 1, allowed);
}

/* A byte that must be one of `allowed`. */
static bool
rd_marker(Rd *r, const char *field, const char *allowed, char *v)
{
    uint8_t b;

    if (!rd_u8(r, &b))
        return false;
    if (b == 0 || strchr(allowed, (char) b) == NULL)
        return rd_unknown_marker(r, field, allowed, b);
    *v = (char) b;
    return true;
}

/* A flags byte with no bits outside `mask`. */
static bool
rd_flags(Rd *r, uint8_t mask, uint8_t *v)
{
    size_t at = r->off;

    if (!rd_u8(r, v))
        return false;
    if (*v & ~mask)
        return rd_bad(r, "flags 0x%02X at offset %zu (allowed bits 0x%02X)", (unsigned) *v, at,
                      (unsigned) mask);
    return true;
}

static bool
rd_ncols(Rd *r, uint16_t *n)
{
    size_t at = r->off;

    if (!rd_u16(r, n))
        return false;
    if (*n > PGO_MAX_COLUMNS)
        return rd_bad(r, "%u columns at offset %zu (at most %d)", (unsigned) *n, at,
                      PGO_MAX_COLUMNS);
    return true;
}

static bool
rd_tuple(Rd *r, PgoValue *values, PgoTuple *t)
{
    if (!rd_ncols(r, &t->ncols))
        return false;
    for (uint16_t i = 0; i < t->ncols; i++)
    {
        PgoValue *v = &values[i];
        uint32_t n;
        uint8_t kind;

        v->data = NULL;
        v->len = 0;
        /* rd_marker's check, spelt out: this runs for every column of every row */
        if (!rd_u8(r, &kind))
            return false;
        if (kind != 't' && kind != 'n' && kind != 'u' && kind != 'b')
            return rd_unknown_marker(r, "column kind", "nutb", kind);
        v->kind = (char) kind;
        if (v->kind == 'n' || v->kind == 'u')
            continue;
        if (!rd_u32(r, &n) || !rd_need(r, n))
            return false;
        v->data = (const char *) r->p + r->off;
        v->len = n;
        r->off += n;
    }
    t->values = values;
    return true;
}

static bool
decode_relation(PgoDecoder *d, Rd *r, PgoMessage *m)
{
    if (!rd_u32(r, &m->relid) || !rd_str(r, "schema name", &m->nspname) ||
        !rd_str(r, "relation name", &m->relname) ||
        !rd_marker(r, "replica identity", "dnfi", &m->replident) || !rd_ncols(r, &m->ncols))
        return false;
    if (m->nspname[0] == '\0')
        m->nspname = "pg_catalog";
    for (uint16_t i = 0; i < m->ncols; i++)
    {
        PgoColumn *c = &d->cols[i];
        uint8_t flags;
        uint32_t typmod;

        /* only bit 0 (replica identity key) is defined; others are ignored as the server's reader does */
        if (!rd_u8(r, &flags) || !rd_str(r, "column name", &c->name) ||
            !rd_u32(r, &c->type_oid) || !rd_u32(r, &typmod))
            return false;
        c->key = (flags & 1) != 0;
        c->typmod = (int32_t) typmod;
    }
    m->cols = d->cols;
    return true;
}

static bool
decode_truncate(PgoDecoder *d, Rd *r, PgoMessage *m)
{
    if (!rd_u32(r, &m->nrelids) || !rd_flags(r, 3, &m->truncate_flags))
        return false;
    if ((r->len - r->off) / 4 < m->nrelids)
        return rd_need(r, (size_t) m->nrelids * 4);
    if (m->nrelids > d->relids_cap)
    {
        d->relids = xrealloc(d->relids, (size_t) m->nrelids * sizeof(uint32_t));
        d->relids_cap = m->nrelids;
    }
    for (uint32_t i = 0; i < m->nrelids; i++)
        (void) rd_u32(r, &d->relids[i]);
    m->relids = d->relids;
    return true;
}

static bool
decode_change(PgoDecoder *d, Rd *r, PgoMessage *m)
{
    char marker;

    if (!rd_u32(r, &m->relid))
        return false;
    switch (m->type)
    {
    case 'I':
        return rd_marker(r, "tuple marker", "N", &marker) &&
               rd_tuple(r, d->new_values, &m->new_tuple);
    case 'U':
        if (!rd_marker(r, "tuple marker", "KON", &marker))
            return false;
        if (marker != 'N')
        {
            m->old_kind = marker;
            if (!rd_tuple(r, d->old_values, &m->old_tuple) ||
                !rd_marker(r, "new tuple marker", "N", &marker))
                return false;
        }
        return rd_tuple(r, d->new_values, &m->new_tuple);
    default: /* 'D' */
        return rd_marker(r, "tuple marker", "KO", &m->old_kind) &&
               rd_tuple(r, d->old_values, &m->old_tuple);
    }
}

static bool
decode_message_body(PgoDecoder *d, Rd *r, PgoMessage *m, bool *in_stream)
{
    uint8_t flags;

    switch (m->type)
    {
    case 'B':
        return rd_u64(r, &m->final_lsn) && rd_time(r, &m->commit_time_us) &&
               rd_u32(r, &m->xid);
    case 'C':
        return rd_flags(r, 0, &flags) && rd_u64(r, &m->commit_lsn) &&
               rd_u64(r, &m->end_lsn) && rd_time(r, &m->commit_time_us);
    case 'O':
        return rd_u64(r, &m->origin_lsn) && rd_str(r, "origin name", &m->origin_name);
    case 'R':
        return decode_relation(d, r, m);
    case 'Y':
        if (!rd_u32(r, &m->type_oid) || !rd_str(r, "type schema name", &m->type_nspname) ||
            !rd_str(r, "type name", &m->type_name))
            return false;
        if (m->type_nspname[0] == '\0')
            m->type_nspname = "pg_catalog";
        return true;
    case 'I':
    case 'U':
    case 'D':
        return decode_change(d, r, m);
    case 'T':
        return decode_truncate(d, r, m);
    case 'M':
        if (!rd_flags(r, 1, &flags) || !rd_u64(r, &m->message_lsn) ||
            !rd_str(r, "prefix", &m->prefix) || !rd_u32(r, &m->content_len) ||
            !rd_need(r, m->content_len))
            return false;
        m->transactional = flags & 1;
        m->content = (const char *) r->p + r->off;
        r->off += m->content_len;
        return true;
    case 'S':
        if (!rd_u32(r, &m->xid) || !rd_flags(r, 1, &flags))
            return false;
        m->first_segment = flags == 1;
        *in_stream = true;
        return true;
    case 'E':
        *in_stream = false;
        return true;
    case 'c':
        return rd_u32(r, &m->xid) && rd_flags(r, 0, &flags) && rd_u64(r, &m->commit_lsn) &&
               rd_u64(r, &m->end_lsn) && rd_time(r, &m->commit_time_us);
    default: /* 'A' */
        return rd_u32(r, &m->xid) && rd_u32(r, &m->subxid);
    }
}

/* Messages that carry the xid field inside a stream block. */
static bool
takes_stream_xid(char type)
{
    return strchr("RYIUDTM", type) != NULL;
}

static bool
decode_message(PgoDecoder *d, const uint8_t *p, size_t len, uint64_t lsn, PgoMessage *m,
               Err *err)
{
    char shown[16];
    char lsn_text[PGO_LSN_TEXT_SIZE]; /* made only for an error: this runs for every message */
    bool in_stream = d->in_stream;
    Rd r = {p, len, 0, "pgoutput message", false, true, lsn, err};
    uint8_t type;

    if (!rd_u8(&r, &type))
        return false;
    m->type = (char) type;
    if (strchr("bPKrp", m->type) != NULL && type != 0)
    {
        pgo_lsn_format(lsn, lsn_text);
        err_set(err, EC_FORMAT, "pgoutput: two-phase %s message at %s is not supported",
                pgo_message_name(m->type), lsn_text);
        err_hint(err, "Create the replication slot without two_phase.");
        return false;
    }
    if (type == 0 || strchr("BCORYIUDTMSEcA", m->type) == NULL)
        return err_set(err, EC_FORMAT, "pgoutput: unknown message type %s at %s",
                       byte_text(type, shown), pgo_lsn_format(lsn, lsn_text));
    r.what = pgo_message_name(m->type);
    r.message = true;

    /* Origin may follow Stream Start (a streamed transaction's first block), without an xid */
    if (d->in_stream ? strchr("BCScA", m->type) != NULL : m->type == 'E')
        return err_set(err, EC_FORMAT, "pgoutput: %s message at %s %s a Stream Start..Stop block",
                       pgo_message_name(m->type), pgo_lsn_format(lsn, lsn_text),
                       d->in_stream ? "inside" : "outside");
    if (d->in_stream && takes_stream_xid(m->type))
    {
        if (!rd_u32(&r, &m->xid))
            return false;
        m->has_xid = true;
    }
    if (!decode_message_body(d, &r, m, &in_stream))
        return false;
    if (r.off != r.len)
        return err_set(err, EC_FORMAT,
                       "pgoutput: %zu trailing bytes after %s message at %s (message ends at "
                       "offset %zu)",
                       r.len - r.off, r.what, pgo_lsn_format(lsn, lsn_text), r.off);
    d->in_stream = in_stream;
    return true;
}

bool
pgo_decode(PgoDecoder *d, const char *buf, size_t len, PgoFrame *out, Err *err)
{
    const uint8_t *p = (const uint8_t *) buf;
    char shown[16];
    uint64_t send_time;
    uint8_t kind, reply;
    Rd r = {p, len, 0, "replication frame", false, false, 0, err};

    memset(out, 0, sizeof *out);
    if (!rd_u8(&r, &kind))
        return false;
    out->kind = (char) kind;
    if (kind == 'k')
    {
        r.what = "primary keepalive";
        if (!rd_u64(&r, &out->wal_end) || !rd_u64(&r, &send_time) || !rd_u8(&r, &reply))
            return false;
        out->send_time_us = pg_to_unix_us(send_time);
        out->reply_requested = reply != 0;
        if (r.off != len)
            return err_set(err, EC_FORMAT,
                           "pgoutput: %zu trailing bytes after a primary keepalive (%d bytes)",
                           len - r.off, KEEPALIVE_SIZE);
        return true;
    }
    if (kind != 'w')
        return err_set(err, EC_FORMAT,
                       "pgoutput: unknown replication frame type %s (expected 'w' or 'k')",
                       byte_text(kind, shown));
    r.what = "XLogData header";
    if (!rd_u64(&r, &out->data_start) || !rd_u64(&r, &out->wal_end) ||
        !rd_u64(&r, &send_time))
        return false;
    out->send_time_us = pg_to_unix_us(send_time);
    return decode_message(d, p + XLOGDATA_HEADER, len - XLOGDATA_HEADER, out->data_start,
                          &out->msg, err);
}
