/*
 * Looking after a stream from outside it: `v7fill stream TABLE --status` and
 * `--drop`.  Both work whether the stream runs or not: the target's
 * v7fill.stream row says where the target stands, the source's
 * pg_replication_slots what the slot holds.  The source is reached with the
 * conninfo the stream stored in v7fill.stream.source_conninfo (without its
 * password: libpq's ~/.pgpass, PGPASSFILE or PGPASSWORD supplies it), or
 * with --source.
 */
#ifndef V7FILL_STREAM_ADMIN_H
#define V7FILL_STREAM_ADMIN_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/stream_observe.h"
#include "v7fill/stream_state.h"

/* conninfo with the password keyword left out (key='value' form, quoted);
 * newly allocated.  NULL or "" → "". */
char *stream_conninfo_without_password(const char *conninfo);

/* Store the source's conninfo (password-free) in the stream's row, adding
 * the column v7fill.stream.source_conninfo first when it is missing. */
V7FILL_MUST_CHECK bool stream_admin_remember_source(PgConn *target, const char *slot,
                                                    const char *conninfo, Err *err);

typedef struct StreamStatus
{
    StreamState state;        /* the row in the target (state.found false: none) */
    char updated_at[40];      /* when the row was last written */
    double since_update_s;    /* now - updated_at (the target's clock) */
    uint64_t quarantined;     /* rows of this slot in v7fill.stream_quarantine */
    char source[512];         /* the conninfo used (password-free); "" = libpq environment */
    bool source_ok;           /* the source answered; else source_error says why */
    char source_error[512];
    SlotWal slot;             /* valid when source_ok */
    uint64_t lag_bytes;       /* source end of WAL - stored position */
    double lag_s;             /* 0 when caught up; else now - the applied commit's source time,
                                 the source's clock offset taken out (lag_s_exact), or, for a
                                 row written before commit times were stored, the time since
                                 the position was stored (an upper bound) */
    bool lag_s_exact;
    int64_t source_offset_us; /* the source's clock - this host's (when source_ok) */
} StreamStatus;

/* What --status shows.  A slot with neither a row in the target nor a slot
 * on the source: EC_CONFIG.  An unreachable source is not an error:
 * source_ok false. */
V7FILL_MUST_CHECK bool stream_admin_status(PgConn *target, const char *slot,
                                           const char *source_conninfo, StreamStatus *out,
                                           Err *err);

/* --drop after the owner said what it does (from st): the slot's walsender
 * terminated when the slot is active and is this stream's (a pgoutput slot
 * with the stream's row), the slot dropped, then the row in v7fill.stream
 * deleted.  The quarantine rows, the target's rows and the lookup stay. */
V7FILL_MUST_CHECK bool stream_admin_drop(PgConn *target, const char *slot,
                                         const char *source_conninfo, const StreamStatus *st,
                                         Err *err);

#endif /* V7FILL_STREAM_ADMIN_H */
