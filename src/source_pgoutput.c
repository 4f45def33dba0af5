/*
 * source_pgoutput.c: one source table's changes from a logical replication
 * slot, as pipeline records (see source_pgoutput.h).
 *
 * The apply state machine of the shared docs (pgoutput.md §6), on the
 * reader side: relation cache (one table; other relations of the
 * publication are passed over), transaction framing and the resume skip,
 * tuple → fields, keepalives and status updates, streamed transactions
 * (applied as they arrive, or spooled; cfg.streamed).  The flush position
 * reported to the server only ever moves to what the owner says the target
 * committed, or to an idle position the owner stored first.
 */
#include "v7fill/source_pgoutput.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/monotime.h"
#include "v7fill/pgoutput.h"

#define STATUS_INTERVAL_MS 10000
#define PING_INTERVAL_MS 1000
/* After on_caught_up moved the stop (the switch holds its lock meanwhile):
 * how long a group waits for more, and how often the server is asked where
 * it stands, until the stop is reached.  The default group wait (--group-ms)
 * and ping held the lock about 400 ms per capture for a few rows. */
#define FINAL_WAIT_MS 2
#define FINAL_PING_MS 5
/* The frames of a transaction applied as it arrives are kept in a spool too,
 * up to this size: given up, it goes on from that spool in place (no
 * restart).  Past it the spool goes, and a give-up restarts the stream. */
#define DIRECT_KEEP_MAX ((uint64_t) 1 << 30)

/* A streamed transaction received into a temporary file: its changes'
 * frames without their xid (as a transaction sent at its commit carries
 * them), each after its length; where each subtransaction's first change
 * begins, to cut a rolled-back one out. */
typedef struct Spool
{
    uint32_t xid;
    FILE *f;
    uint64_t size;
    uint32_t *subxids;
    uint64_t *suboff;
    size_t nsub, subcap;
} Spool;

typedef struct PgoSource
{
    Source base;
    PgoSourceConfig cfg;
    char name[256];
    PgoDecoder *dec;

    /* the table's relation, as last described */
    uint32_t relid;          /* 0: not seen yet */
    size_t nrelcols;
    int *relcol_field;       /* relation column → field index, or -1 (a new column) */
    int *field_relcol;       /* field → relation column */
    uint32_t *field_type;    /* field → type OID first seen (0: not yet) */
    uint32_t *start_type;    /* field → type OID at the start (cfg.column_types' copy) */
    char **warned_new;       /* added columns already warned about */
    size_t nwarned;
    uint32_t *other_relids;  /* relations of the publication that are not the table */
    size_t nother;

    /* the transaction being read */
    bool in_txn;
    bool skip_txn;
    uint64_t final_lsn;
    int64_t commit_time_us;
    uint64_t ordinal;        /* changes of this transaction seen (our table's) */
    uint64_t skip_changes;   /* of them, applied by an earlier run */
    uint64_t emitted_in_txn;

    /* positions */
    uint64_t last_end;       /* end LSN of the last whole transaction read */
    int64_t last_end_time_us; /* its commit time */
    double last_report_ms;
    double last_tick_ms;
    uint64_t handed_end;     /* ... of the last one that handed out a record */
    _Atomic uint64_t committed; /* the owner's committed position */
    uint64_t flushed;        /* the last flush position sent */
    uint64_t idle_stored;    /* the last idle position persisted */
    uint64_t server_end;     /* from keepalives */
    uint64_t received;

    /* grouping */
    size_t rows_open;        /* rows handed out since the last boundary */
    double first_open_ms;    /* when the first of them was */

    double last_status_ms;
    double last_ping_ms;
    double last_idle_ms;
    bool caught_up_called;   /* cfg.on_caught_up was called */

    Field *fields;
    Field *old_fields;
    Buf raw;
    char *payload;           /* the frame being handed out (freed at the next call) */
    PgoSourceStats st;
    bool ended;
    bool past_stop;              /* stop_before: a transaction committing past the stop began */
    uint64_t held_final;         /* ... its commit, while on_caught_up may still move the stop */
    int64_t held_time_us;        /* ... and its commit time */
    bool payload_own;            /* payload is malloc'd here (a spooled frame) */

    /* streamed transactions (cfg.streamed) */
    uint32_t direct_xid;         /* the one applied as it arrives (0: none) */
    bool direct_kept;            /* ... its frames kept in its spool too, as received */
    Spool *spools;
    size_t nspools;
    Spool *block_spool;          /* inside a block of this spooled one */
    Spool *replay;               /* applied from its spool now (committed) */
    uint64_t replay_end;         /* its end LSN */
} PgoSource;

void
source_pgoutput_origin(const char *schema, const char *table, uint64_t lsn, char *out,
                       size_t size)
{
    char at[PGO_LSN_TEXT_SIZE];

    pgo_lsn_format(lsn, at);
    (void) snprintf(out, size, "%s %s.%s", at, schema, table);
}

/* A frame from the connection (libpq's), from the owner's recv (malloc'd),
 * or from a spool (own: malloc'd here). */
static void
frame_free(PgoSource *s, char *buf, bool own)
{
    if (own || s->cfg.recv)
        free(buf);
    else
        replconn_freemem(buf);
}

static bool
send_status(PgoSource *s, bool reply, Err *err)
{
    uint64_t flush = atomic_load(&s->committed);

    if (s->idle_stored > flush)
        flush = s->idle_stored;
    if (flush < s->flushed)
        flush = s->flushed; /* never backwards */
    if (s->cfg.recv)
    {
        /* A shared connection: its owner reports the least of its tables'. */
        s->flushed = s->st.flushed_lsn = flush;
        s->last_status_ms = monotime_s() * 1000.0;
        if (reply)
            s->last_ping_ms = s->last_status_ms;
        return true;
    }
    if (!replconn_send_status(s->cfg.repl, s->received > flush ? s->received : flush, flush,
                              flush, reply, err))
        return false;
    s->flushed = flush;
    s->st.flushed_lsn = flush;
    s->last_status_ms = monotime_s() * 1000.0;
    if (reply)
        s->last_ping_ms = s->last_status_ms;
    return true;
}

/* Nothing read is waiting for the target: every transaction handed out is
 * committed there. */
static bool
idle(PgoSource *s)
{
    return !s->in_txn && s->rows_open == 0 && atomic_load(&s->committed) >= s->handed_end;
}

/* Applying up to a stop on_caught_up moved: someone waits for the end. */
static bool
final_apply(const PgoSource *s)
{
    return s->caught_up_called && s->cfg.stop_lsn > 0;
}

/* Status on time; when idle, the position advances over what the server
 * passed (transactions of other tables, empty ones) once it is stored. */
static bool
maybe_status(PgoSource *s, Err *err)
{
    double now = monotime_s() * 1000.0;
    uint64_t committed = atomic_load(&s->committed);
    bool due = now - s->last_status_ms >= STATUS_INTERVAL_MS || committed > s->flushed;

    if (idle(s) && s->cfg.persist_idle)
    {
        uint64_t pos = s->server_end > s->last_end ? s->server_end : s->last_end;
        uint64_t have = committed > s->idle_stored ? committed : s->idle_stored;

        if (pos > have && (now - s->last_idle_ms >= STATUS_INTERVAL_MS ||
                           (s->cfg.stop_lsn > 0 && pos >= s->cfg.stop_lsn)))
        {
            bool stored = true;

            if (!s->cfg.persist_idle(s->cfg.ctx, pos, &stored, err))
                return false;
            if (stored)
                s->idle_stored = pos;
            s->last_idle_ms = now;
            due = true;
        }
    }
    if (s->cfg.status && s->cfg.status_interval_ms > 0 &&
        now - s->last_report_ms >= s->cfg.status_interval_ms)
    {
        uint64_t at = committed > s->idle_stored ? committed : s->idle_stored;
        uint64_t end = s->server_end > s->received ? s->server_end : s->received;

        s->last_report_ms = now;
        s->cfg.status(s->cfg.ctx, at, end > at ? end - at : 0, idle(s));
    }
    if (s->cfg.tick && now - s->last_tick_ms >= 1000)
    {
        uint64_t at = committed > s->idle_stored ? committed : s->idle_stored;
        uint64_t end = s->server_end > s->received ? s->server_end : s->received;

        s->last_tick_ms = now;
        s->cfg.tick(s->cfg.ctx, at, end > at ? end - at : 0, idle(s));
    }
    /* Waiting to be caught up: ask the server where it stands (also while
     * only a transaction streaming in is open: it may commit past the stop). */
    if (s->cfg.stop_lsn > 0 &&
        (idle(s) || (s->direct_xid != 0 && committed >= s->handed_end)) &&
        now - s->last_ping_ms >= (final_apply(s) ? FINAL_PING_MS : PING_INTERVAL_MS))
        return send_status(s, true, err);
    return due ? send_status(s, false, err) : true;
}

static bool
relation_is_other(const PgoSource *s, uint32_t relid)
{
    for (size_t i = 0; i < s->nother; i++)
        if (s->other_relids[i] == relid)
            return true;
    return false;
}

static void
relation_other(PgoSource *s, uint32_t relid)
{
    if (relation_is_other(s, relid))
        return;
    s->other_relids = xrealloc(s->other_relids, (s->nother + 1) * sizeof(uint32_t));
    s->other_relids[s->nother++] = relid;
}

static void
relation_not_other(PgoSource *s, uint32_t relid)
{
    for (size_t i = 0; i < s->nother; i++)
        if (s->other_relids[i] == relid)
            s->other_relids[i--] = s->other_relids[--s->nother];
}

static void
warn_new_column(PgoSource *s, const char *name, bool tolerated)
{
    for (size_t i = 0; i < s->nwarned; i++)
        if (strcmp(s->warned_new[i], name) == 0)
            return;
    s->warned_new = xrealloc(s->warned_new, (s->nwarned + 1) * sizeof *s->warned_new);
    s->warned_new[s->nwarned++] = xstrdup(name);
    if (tolerated)
        log_warn("column \"%s\" of %s.%s on the source is not in its catalog any more: its "
                 "values are not streamed",
                 name, s->cfg.schema, s->cfg.table);
    else
        log_info("column \"%s\" was added to %s.%s on the source: the stream reads the "
                 "table's columns anew and goes on from its stored position",
                 name, s->cfg.schema, s->cfg.table);
}

static bool
on_relation(PgoSource *s, const PgoMessage *m, uint64_t lsn, Err *err)
{
    char at[PGO_LSN_TEXT_SIZE];

    if (strcmp(m->nspname, s->cfg.schema) != 0 || strcmp(m->relname, s->cfg.table) != 0)
    {
        if (m->relid == s->relid)
        {
            /* The table renamed away: its changes from here are another's. */
            pgo_lsn_format(lsn, at);
            log_warn("%s.%s was renamed to %s.%s on the source (at %s): its changes from "
                     "there are not streamed; a table given that name again is",
                     s->cfg.schema, s->cfg.table, m->nspname, m->relname, at);
            s->relid = 0;
        }
        relation_other(s, m->relid);
        return true;
    }
    pgo_lsn_format(lsn, at);
    relation_not_other(s, m->relid);
    s->relid = m->relid;
    s->nrelcols = m->ncols;
    s->relcol_field = xrealloc(s->relcol_field, (m->ncols ? m->ncols : 1) * sizeof(int));
    for (size_t f = 0; f < s->cfg.ncolumns; f++)
        s->field_relcol[f] = -1;
    for (size_t i = 0; i < m->ncols; i++)
    {
        s->relcol_field[i] = -1;
        for (size_t f = 0; f < s->cfg.ncolumns; f++)
            if (strcmp(m->cols[i].name, s->cfg.columns[f]) == 0)
            {
                s->relcol_field[i] = (int) f;
                s->field_relcol[f] = (int) i;
                /* A change to the type the stream started with: the target was
                 * checked against it then (an earlier type's values came first,
                 * replayed from before the change). */
                if (s->field_type[f] != 0 && s->field_type[f] != m->cols[i].type_oid &&
                    s->start_type[f] != m->cols[i].type_oid)
                {
                    err_set(err, EC_CONFIG,
                            "column \"%s\" of %s.%s changed its type on the source (relation "
                            "message at %s): the stream stops",
                            m->cols[i].name, s->cfg.schema, s->cfg.table, at);
                    err_hint(err, "Change the target column to match, then run the stream "
                                  "again: it resumes at the change.");
                    return false;
                }
                s->field_type[f] = m->cols[i].type_oid;
                break;
            }
        if (s->relcol_field[i] < 0)
        {
            /* A column the stream did not start with: the owner restarts
             * the stream from its stored position with the table's columns
             * read anew (mapped if the target has the column). */
            /* (a relation message's frame carries 0/0: its transaction's
             * commit position says when it was made) */
            bool tolerated = (s->in_txn ? s->final_lsn : lsn) < s->cfg.tolerate_columns_until;

            warn_new_column(s, m->cols[i].name, tolerated);
            if (tolerated)
                continue;
            s->st.relation_changed = true;
            return err_set(err, EC_CONFIG,
                           "column \"%s\" was added to %s.%s on the source (relation message "
                           "at %s)",
                           m->cols[i].name, s->cfg.schema, s->cfg.table, at);
        }
    }
    /* A column of the stream's list missing here: dropped if this session
     * saw it before; else not added yet at this point of the stream (the
     * list is read from the catalog as it is now): absent, NULL in an insert
     * and left as it is by an update. */
    for (size_t f = 0; f < s->cfg.ncolumns; f++)
        if (s->field_relcol[f] < 0 && s->field_type[f] != 0)
        {
            err_set(err, EC_CONFIG,
                    "column \"%s\" of %s.%s is gone on the source (dropped or renamed; relation "
                    "message at %s): the stream stops",
                    s->cfg.columns[f], s->cfg.schema, s->cfg.table, at);
            err_hint(err, "Drop or rename the target column it goes to (renaming keeps its "
                          "values), or add the column back on the source; then run the stream "
                          "again.");
            return false;
        }
    return true;
}

/* The row as a JSON object (the quarantine keeps it): unchanged values are
 * left out. */
static void
row_json(PgoSource *s, const Field *fields)
{
    bool first = true;

    buf_reset(&s->raw);
    buf_putc(&s->raw, '{');
    for (size_t f = 0; f < s->cfg.ncolumns; f++)
    {
        if (fields[f].unchanged)
            continue;
        if (!first)
            buf_putc(&s->raw, ',');
        first = false;
        buf_put_json_string(&s->raw, s->cfg.columns[f], strlen(s->cfg.columns[f]));
        buf_putc(&s->raw, ':');
        if (fields[f].is_null)
            buf_puts(&s->raw, "null");
        else
            buf_put_json_string(&s->raw, fields[f].data, fields[f].len);
    }
    buf_putc(&s->raw, '}');
}

static bool
tuple_fields(PgoSource *s, const PgoTuple *t, Field *out, uint64_t lsn, Err *err)
{
    char at[PGO_LSN_TEXT_SIZE];

    if (t->ncols != s->nrelcols)
    {
        pgo_lsn_format(lsn, at);
        return err_set(err, EC_FORMAT,
                       "pgoutput: a change of %s.%s at %s has %u columns, its relation %zu",
                       s->cfg.schema, s->cfg.table, at, t->ncols, s->nrelcols);
    }
    for (size_t f = 0; f < s->cfg.ncolumns; f++)
        if (s->field_relcol[f] < 0)
        {
            out[f].is_null = true;
            out[f].unchanged = true;
            out[f].data = NULL;
            out[f].len = 0;
        }
    for (size_t i = 0; i < t->ncols; i++)
    {
        const PgoValue *v = &t->values[i];
        int f = s->relcol_field[i];

        if (f < 0)
            continue;
        out[f].unchanged = v->kind == 'u';
        out[f].is_null = v->kind == 'n' || v->kind == 'u';
        out[f].data = v->kind == 't' ? v->data : NULL;
        out[f].len = v->kind == 't' ? v->len : 0;
        if (v->kind == 'b')
        {
            pgo_lsn_format(lsn, at);
            return err_set(err, EC_FORMAT,
                           "pgoutput: a binary value in column \"%s\" at %s (the stream asks "
                           "for text)",
                           s->cfg.columns[f], at);
        }
    }
    return true;
}

/* An update's key: K (key changed, or stored out of line) or O (FULL). */
static bool
update_fields(PgoSource *s, const PgoMessage *m, uint64_t lsn, Record *rec, Err *err)
{
    bool key_moved = false;

    if (!tuple_fields(s, &m->new_tuple, s->fields, lsn, err))
        return false;
    rec->old_fields = NULL;
    if (m->old_kind == 0)
        return true;
    if (!tuple_fields(s, &m->old_tuple, s->old_fields, lsn, err))
        return false;
    for (size_t i = 0; i < s->nrelcols; i++)
    {
        int f = s->relcol_field[i];
        Field *nf, *of;

        if (f < 0)
            continue;
        nf = &s->fields[f];
        of = &s->old_fields[f];
        /* The old row fills what the new one left unchanged (FULL, or a key
         * stored out of line). */
        if (nf->unchanged && !of->unchanged && (m->old_kind == 'O' || !of->is_null))
            *nf = *of;
        if (m->old_kind == 'K' && i < m->old_tuple.ncols && m->old_tuple.values[i].kind == 't' &&
            !(nf->len == of->len && !nf->is_null && memcmp(nf->data, of->data, nf->len) == 0))
            key_moved = true;
    }
    /* FULL: the old row is whole, and the reference may be built from any
     * column; the pipeline finds whether it moved (it compares the two). */
    if (key_moved || m->old_kind == 'O')
        rec->old_fields = s->old_fields;
    return true;
}

static bool
on_change(PgoSource *s, const PgoMessage *m, uint64_t lsn, Record *rec, bool *got, Err *err)
{
    char at[PGO_LSN_TEXT_SIZE];

    *got = false;
    if (m->relid != s->relid)
    {
        if (relation_is_other(s, m->relid))
            return true;
        pgo_lsn_format(lsn, at);
        return err_set(err, EC_FORMAT,
                       "pgoutput: a change at %s names relation %u, which no relation message "
                       "described",
                       at, m->relid);
    }
    if (!s->in_txn)
    {
        pgo_lsn_format(lsn, at);
        return err_set(err, EC_FORMAT, "pgoutput: a change at %s outside a transaction", at);
    }
    s->ordinal++;
    if (s->skip_txn || s->ordinal <= s->skip_changes)
        return true;
    memset(rec, 0, sizeof *rec);
    memset(s->fields, 0, s->cfg.ncolumns * sizeof *s->fields);
    switch (m->type)
    {
        case 'I':
            rec->op = REC_INSERT;
            if (!tuple_fields(s, &m->new_tuple, s->fields, lsn, err))
                return false;
            break;
        case 'U':
            rec->op = REC_UPDATE;
            memset(s->old_fields, 0, s->cfg.ncolumns * sizeof *s->old_fields);
            if (!update_fields(s, m, lsn, rec, err))
                return false;
            break;
        default: /* 'D' */
            if (s->cfg.ignore_deletes)
            {
                s->st.deletes_ignored++;
                return true;
            }
            rec->op = REC_DELETE;
            if (!tuple_fields(s, &m->old_tuple, s->fields, lsn, err))
                return false;
            break;
    }
    if (rec->op != REC_UPDATE)
        for (size_t f = 0; f < s->cfg.ncolumns; f++)
            s->fields[f].unchanged = false; /* absent from an insert: NULL */
    row_json(s, s->fields);
    rec->nfields = s->cfg.ncolumns;
    rec->fields = s->fields;
    rec->raw = s->raw.data;
    rec->raw_len = s->raw.len;
    rec->line = lsn;
    s->emitted_in_txn++;
    /* The batch stays open to the commit; a large transaction goes to the
     * target in pieces inside one target transaction (pipeline.h). */
    rec->batch_hold = true;
    if (s->rows_open++ == 0)
        s->first_open_ms = monotime_s() * 1000.0;
    *got = true;
    return true;
}

static bool
on_truncate(PgoSource *s, const PgoMessage *m, uint64_t lsn, Record *rec, bool *got, Err *err)
{
    char at[PGO_LSN_TEXT_SIZE];
    bool ours = false;

    *got = false;
    for (uint32_t i = 0; i < m->nrelids; i++)
        ours = ours || (s->relid != 0 && m->relids[i] == s->relid);
    if (!ours)
        return true;
    s->ordinal++;
    if (s->skip_txn || s->ordinal <= s->skip_changes)
        return true;
    pgo_lsn_format(lsn, at);
    switch (s->cfg.on_truncate)
    {
        case PGO_TRUNCATE_IGNORE:
            s->st.truncates_ignored++;
            log_warn("TRUNCATE of %s.%s at %s ignored (--on-truncate ignore): the target keeps "
                     "its rows",
                     s->cfg.schema, s->cfg.table, at);
            return true;
        case PGO_TRUNCATE_APPLY:
            memset(rec, 0, sizeof *rec);
            rec->op = REC_TRUNCATE;
            rec->line = lsn;
            rec->raw = "{}";
            rec->raw_len = 2;
            rec->batch_hold = true;
            s->emitted_in_txn++;
            if (s->rows_open++ == 0)
                s->first_open_ms = monotime_s() * 1000.0;
            *got = true;
            log_info("TRUNCATE of %s.%s at %s: the target and its lookup are emptied in the "
                     "same transaction (--on-truncate apply)",
                     s->cfg.schema, s->cfg.table, at);
            return true;
        default:
            err_set(err, EC_CONFIG,
                    "TRUNCATE of %s.%s on the source (at %s): the stream stops there "
                    "(--on-truncate stop); the changes before it are applied",
                    s->cfg.schema, s->cfg.table, at);
            err_hint(err, "Run again with --on-truncate apply to empty the target too, or "
                          "--on-truncate ignore to keep its rows; either goes on from the "
                          "TRUNCATE.");
            return false;
    }
}

/* ------------------------------------------------ streamed transactions */

/* The XLogData header (25 bytes) and the message's type byte come before a
 * streamed message's xid. */
#define XID_AT 26

static Spool *
spool_find(PgoSource *s, uint32_t xid)
{
    for (size_t i = 0; i < s->nspools; i++)
        if (s->spools[i].xid == xid)
            return &s->spools[i];
    return NULL;
}

/* The spool's file: in $TMPDIR (else /tmp), unlinked at once, so that it
 * goes when the stream exits however it exits. */
static bool
spool_new(PgoSource *s, uint32_t xid, Spool **out, Err *err)
{
    const char *dir = getenv("TMPDIR");
    char *path = xasprintf("%s/v7fill-spool-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w+") : NULL;
    Spool *sp;

    if (fd >= 0)
        (void) unlink(path);
    if (f == NULL)
    {
        err_set(err, EC_IO,
                "could not make a temporary file in %s for source transaction %u (a streamed "
                "transaction is spooled there until its commit): %s",
                dir && dir[0] ? dir : "/tmp", xid, strerror(errno));
        if (fd >= 0)
            (void) close(fd);
        free(path);
        return false;
    }
    free(path);
    /* Written in large pieces: a streamed transaction is often hundreds of MB. */
    (void) setvbuf(f, NULL, _IOFBF, (size_t) 1 << 20);
    s->spools = xrealloc(s->spools, (s->nspools + 1) * sizeof *s->spools);
    sp = &s->spools[s->nspools++];
    memset(sp, 0, sizeof *sp);
    sp->xid = xid;
    sp->f = f;
    *out = sp;
    return true;
}

/* Forget a spool (its file goes with it: unlinked already, spool_new). */
static void
spool_drop(PgoSource *s, Spool *sp)
{
    size_t i = (size_t) (sp - s->spools);

    if (s->block_spool == sp)
        s->block_spool = NULL;
    (void) fclose(sp->f);
    free(sp->subxids);
    free(sp->suboff);
    s->spools[i] = s->spools[--s->nspools];
    if (s->block_spool == &s->spools[s->nspools])
        s->block_spool = &s->spools[i];
}

/* Where a subtransaction's first message of the spool begins (xid: of the
 * message at hand, written next). */
static void
spool_note_xid(Spool *sp, uint32_t xid)
{
    bool known = xid == sp->xid;

    for (size_t i = sp->nsub; !known && i > 0; i--)
        known = sp->subxids[i - 1] == xid;
    if (known)
        return;
    if (sp->nsub == sp->subcap)
    {
        sp->subcap = sp->subcap ? sp->subcap * 2 : 8;
        sp->subxids = xrealloc(sp->subxids, sp->subcap * sizeof *sp->subxids);
        sp->suboff = xrealloc(sp->suboff, sp->subcap * sizeof *sp->suboff);
    }
    sp->subxids[sp->nsub] = xid;
    sp->suboff[sp->nsub++] = sp->size;
}

/* One message of a spooled transaction's block, without its xid. */
static bool
spool_append(Spool *sp, const PgoMessage *m, const char *buf, size_t len, Err *err)
{
    uint32_t n = (uint32_t) (len - 4);

    spool_note_xid(sp, m->xid);
    if (fwrite(&n, sizeof n, 1, sp->f) != 1 || fwrite(buf, 1, XID_AT, sp->f) != XID_AT ||
        fwrite(buf + XID_AT + 4, 1, len - XID_AT - 4, sp->f) != len - XID_AT - 4)
        return err_set(err, EC_IO, "could not write the spool of source transaction %u: %s",
                       sp->xid, strerror(errno));
    sp->size += sizeof n + n;
    return true;
}

/* A subtransaction rolled back: its changes (and those of subtransactions
 * after it) are cut out of the spool. */
static bool
spool_cut(Spool *sp, uint32_t subxid, Err *err)
{
    for (size_t i = 0; i < sp->nsub; i++)
        if (sp->subxids[i] == subxid)
        {
            if (fflush(sp->f) != 0 || ftruncate(fileno(sp->f), (off_t) sp->suboff[i]) != 0 ||
                fseeko(sp->f, (off_t) sp->suboff[i], SEEK_SET) != 0)
                return err_set(err, EC_IO,
                               "could not cut a rolled-back subtransaction out of the spool "
                               "of source transaction %u: %s",
                               sp->xid, strerror(errno));
            sp->size = sp->suboff[i];
            sp->nsub = i;
            break;
        }
    return true;
}

/* The next frame of the spool being applied (malloc'd); *len 0 at its end. */
static bool
replay_next(PgoSource *s, char **buf, int *len, Err *err)
{
    Spool *sp = s->replay;
    uint32_t n;

    *buf = NULL;
    *len = 0;
    if (fread(&n, sizeof n, 1, sp->f) != 1)
    {
        if (ferror(sp->f))
            return err_set(err, EC_IO, "could not read the spool of source transaction %u: %s",
                           sp->xid, strerror(errno));
        return true;
    }
    *buf = xmalloc(n ? n : 1);
    if (fread(*buf, 1, n, sp->f) != n)
    {
        free(*buf);
        *buf = NULL;
        return err_set(err, EC_IO, "the spool of source transaction %u ends in a frame",
                       sp->xid);
    }
    *len = (int) n;
    return true;
}

/* The direct transaction cannot be applied as it arrives after all: the
 * source ends, and its owner starts again with xid spooled. */
static bool
demote(PgoSource *s, const char *why, Err *err)
{
    s->st.demote_xid = s->direct_xid;
    return err_set(err, EC_CONFIG,
                   "source transaction %u, applied as it streamed in, %s: rolled back in the "
                   "target, it is received again into a spool file and applied at its commit",
                   s->direct_xid, why);
}

/* The direct transaction ends here unapplied: its pieces (if any were
 * handed out) are rolled back in the target (rec: REC_ABANDON, *got). */
static void
direct_abandon(PgoSource *s, Record *rec, bool *got)
{
    if (s->emitted_in_txn > 0)
    {
        memset(rec, 0, sizeof *rec);
        rec->op = REC_ABANDON;
        *got = true;
    }
    s->direct_xid = 0;
    s->direct_kept = false;
    s->in_txn = false;
    s->rows_open = 0;
}

/* The direct transaction cannot go on as it arrives (why).  Nothing of
 * the table's in it yet (other tables' changes only, so far): it is spooled
 * from here on, in place, and the frame at hand is handled as usual (true).
 * Its frames kept in a spool (direct_kept): its pieces are rolled back in
 * the target (rec: REC_ABANDON, *got) and it goes on in that spool, in
 * place, applied at its commit (ending: the source ends at once, the
 * spool with it).  Else the source ends (demote). */
static bool
give_up_direct(PgoSource *s, const char *why, bool ending, Record *rec, bool *got, Err *err)
{
    uint32_t xid = s->direct_xid;
    bool kept = s->direct_kept;
    Spool *sp;

    if (s->ordinal > 0 && !kept)
        return demote(s, why, err);
    direct_abandon(s, rec, got);
    if (kept)
    {
        sp = spool_find(s, xid);
        if (!ending)
        {
            s->st.streamed_to_spool++;
            /* A busy source: the next ones are spooled from their start
             * (the owner keeps that past a reconnect). */
            s->cfg.direct_after = s->st.direct_after = monotime_s() + 60.0;
        }
        log_info("source transaction %u, applied as it streamed in, %s: its %" PRIu64
                 " changes written so far are rolled back in the target; %s",
                 xid, why, s->emitted_in_txn,
                 ending ? "the next run applies it whole, once it commits"
                        : "it goes on in a spool file of what was received, applied at its "
                          "commit");
    }
    else
    {
        if (!spool_new(s, xid, &sp, err))
            return false;
        log_debug("source transaction %u %s before any change of %s.%s: spooled from here on",
                  xid, why, s->cfg.schema, s->cfg.table);
    }
    if (pgo_decoder_in_stream(s->dec))
        s->block_spool = sp; /* the rest of its block */
    return true;
}

/* The direct transaction's frames are no longer kept (it ended, or its
 * spool grew too large or failed: why). */
static void
direct_unkeep(PgoSource *s, const char *why)
{
    Spool *sp = s->direct_kept ? spool_find(s, s->direct_xid) : NULL;

    if (sp != NULL)
        spool_drop(s, sp);
    if (sp != NULL && why != NULL)
        log_info("source transaction %u, applied as it streams in: %s; if it must be given "
                 "up, the stream restarts and receives it again",
                 s->direct_xid, why);
    s->direct_kept = false;
}

/* A frame of the direct transaction's block (m: its message), kept. */
static void
direct_keep(PgoSource *s, const PgoMessage *m, const char *buf, size_t len)
{
    Spool *sp = spool_find(s, s->direct_xid);
    Err e = {0};

    if (!spool_append(sp, m, buf, len, &e))
        direct_unkeep(s, e.msg);
    else if (sp->size > DIRECT_KEEP_MAX)
        direct_unkeep(s, "its spool passed 1 GiB and is no longer kept");
}

static bool
xid_listed(const PgoSource *s, uint32_t xid)
{
    for (size_t i = 0; i < s->cfg.nspool_xids; i++)
        if (s->cfg.spool_xids[i] == xid)
            return true;
    return false;
}

/* A transaction's changes all handed out: it is done (end_lsn: its end). */
static void
end_txn(PgoSource *s, uint64_t end_lsn)
{
    s->in_txn = false;
    if (end_lsn > s->last_end)
    {
        s->last_end = end_lsn;
        s->last_end_time_us = s->commit_time_us;
    }
    if (s->skip_txn)
        s->st.skipped_transactions++;
    else
        s->st.transactions++;
    if (s->emitted_in_txn > 0)
        s->handed_end = s->last_end;
    s->st.last_commit_time_us = s->commit_time_us;
}

/* The start of a transaction's changes (final_lsn: its commit, UINT64_MAX
 * while not known). */
static void
begin_txn(PgoSource *s, uint64_t final_lsn, int64_t commit_time_us)
{
    s->in_txn = true;
    s->final_lsn = final_lsn;
    s->commit_time_us = commit_time_us;
    s->ordinal = 0;
    s->emitted_in_txn = 0;
    /* Committed below the resume position: applied already. */
    s->skip_txn = final_lsn < s->cfg.resume_lsn;
    s->skip_changes = final_lsn == s->cfg.resume_txn_lsn ? s->cfg.resume_txn_changes : 0;
}

static bool
on_stream_start(PgoSource *s, const PgoMessage *m, uint64_t lsn, Record *rec, bool *got,
                Err *err)
{
    char at[PGO_LSN_TEXT_SIZE];
    Spool *sp;

    if (s->direct_xid != 0 && m->xid != s->direct_xid &&
        !give_up_direct(s, "met another streamed transaction", false, rec, got, err))
        return false;
    if (m->xid == s->direct_xid)
        return true;
    sp = spool_find(s, m->xid);
    if (sp != NULL)
    {
        s->block_spool = sp;
        return true;
    }
    if (!m->first_segment)
    {
        pgo_lsn_format(lsn, at);
        return err_set(err, EC_FORMAT,
                       "pgoutput: source transaction %u streams on at %s without its first "
                       "block",
                       m->xid, at);
    }
    if (s->cfg.spool_all || monotime_s() < s->cfg.direct_after || s->nspools > 0 ||
        xid_listed(s, m->xid))
    {
        if (!spool_new(s, m->xid, &sp, err))
            return false;
        s->block_spool = sp;
        return true;
    }
    /* Applied as it arrives, in a target transaction of its own: the group
     * read before it goes first. */
    if (s->rows_open > 0)
    {
        memset(rec, 0, sizeof *rec);
        rec->op = REC_BOUNDARY;
        rec->batch_end = true;
        s->rows_open = 0;
        *got = true;
    }
    s->direct_xid = m->xid;
    begin_txn(s, UINT64_MAX, 0);
    /* Its frames are kept in a spool as well, so that a give-up goes on in
     * place; without one (no file can be made), a give-up restarts. */
    {
        Err e = {0};

        s->direct_kept = spool_new(s, m->xid, &sp, &e);
        if (!s->direct_kept)
            log_debug("%s", e.msg);
    }
    return true;
}

static bool
on_stream_commit(PgoSource *s, const PgoMessage *m, Record *rec, bool *got, Err *err)
{
    Spool *sp;

    /* Applied by an earlier run: spooled in place if nothing of ours is in it
     * (then skipped below, as a spooled one), else the source ends. */
    if (m->xid == s->direct_xid && s->direct_xid != 0 && m->commit_lsn < s->cfg.resume_lsn &&
        !give_up_direct(s, "was applied by an earlier run", false, rec, got, err))
        return false;
    if (m->xid == s->direct_xid && s->direct_xid != 0)
    {
        direct_unkeep(s, NULL);
        s->final_lsn = m->commit_lsn;
        s->commit_time_us = m->commit_time_us;
        s->direct_xid = 0;
        s->st.streamed_direct++;
        end_txn(s, m->end_lsn);
        return true;
    }
    /* (The server streams one transaction at a time: another's commit is
     * not expected here, but it must not end the direct one.) */
    if (s->direct_xid != 0 &&
        !give_up_direct(s, "met another transaction's commit", false, rec, got, err))
        return false;
    sp = spool_find(s, m->xid);
    if (sp == NULL)
    {
        /* Nothing of it was streamed to us: an empty transaction. */
        begin_txn(s, m->commit_lsn, m->commit_time_us);
        end_txn(s, m->end_lsn);
        return true;
    }
    if (fflush(sp->f) != 0 || fseeko(sp->f, 0, SEEK_SET) != 0)
        return err_set(err, EC_IO, "could not read the spool of source transaction %u: %s",
                       sp->xid, strerror(errno));
    begin_txn(s, m->commit_lsn, m->commit_time_us);
    s->replay = sp;
    s->replay_end = m->end_lsn;
    return true;
}

static bool
on_stream_abort(PgoSource *s, const PgoMessage *m, Record *rec, bool *got, Err *err)
{
    Spool *sp;

    if (m->xid == s->direct_xid && s->direct_xid != 0 && m->subxid == m->xid)
    {
        /* Rolled back whole: so is its target transaction, in place (its
         * target transaction holds nothing else); the stream goes on. */
        log_info("source transaction %u, applied as it streamed in, was rolled back on the "
                 "source: so are its %" PRIu64 " changes in the target",
                 s->direct_xid, s->emitted_in_txn);
        direct_unkeep(s, NULL);
        direct_abandon(s, rec, got);
        s->st.streamed_aborted++;
        return true;
    }
    if (m->xid == s->direct_xid && s->direct_xid != 0 &&
        !give_up_direct(s, "had a subtransaction rolled back", false, rec, got, err))
        return false;
    sp = spool_find(s, m->xid);
    if (sp == NULL)
        return true;
    if (m->subxid != m->xid)
        return spool_cut(sp, m->subxid, err);
    s->st.streamed_aborted++;
    spool_drop(s, sp);
    return true;
}

/* One frame (buf, len: as received); *got when it made a record. */
static bool
on_frame(PgoSource *s, const PgoFrame *fr, const char *buf, size_t len, Record *rec, bool *got,
         Err *err)
{
    const PgoMessage *m = &fr->msg;
    char at[PGO_LSN_TEXT_SIZE];

    *got = false;
    if (fr->kind == 'k')
    {
        if (fr->wal_end > s->server_end)
            s->server_end = fr->wal_end;
        s->st.server_lsn = s->server_end;
        return fr->reply_requested ? send_status(s, false, err) : true;
    }
    if (fr->data_start > s->received)
        s->received = s->st.received_lsn = fr->data_start;
    /* Inside a block of a spooled transaction: its changes wait in the spool
     * (an origin message carries no xid and says nothing to us). */
    if (s->block_spool != NULL && m->has_xid)
    {
        /* A change of a table the publication's relation messages named as
         * another: not kept (its subtransaction is noted where it would
         * be, for a cut).  A relation message here is read only at the
         * commit, but it precedes its relation's first change in the
         * transaction: one naming another table marks it other from here,
         * one naming the table makes its relid ours again (a table
         * renamed into its place). */
        if ((m->type == 'I' || m->type == 'U' || m->type == 'D') && m->relid != s->relid &&
            relation_is_other(s, m->relid))
        {
            spool_note_xid(s->block_spool, m->xid);
            return true;
        }
        if (m->type == 'R')
        {
            if (strcmp(m->nspname, s->cfg.schema) == 0 && strcmp(m->relname, s->cfg.table) == 0)
                relation_not_other(s, m->relid);
            else if (m->relid != s->relid)
                relation_other(s, m->relid);
        }
        return spool_append(s->block_spool, m, buf, len, err);
    }
    /* A change (or relation) of the direct one's block: kept, and handled. */
    if (s->direct_kept && m->has_xid && m->type != 'S' && pgo_decoder_in_stream(s->dec))
        direct_keep(s, m, buf, len);
    if (!s->cfg.streamed && (m->type == 'S' || m->type == 'E' || m->type == 'c' || m->type == 'A'))
    {
        pgo_lsn_format(fr->data_start, at);
        return err_set(err, EC_FORMAT,
                       "pgoutput: unexpected '%c' message at %s (the stream did not ask for "
                       "streamed transactions)",
                       m->type, at);
    }
    switch (m->type)
    {
        case 'S':
            return on_stream_start(s, m, fr->data_start, rec, got, err);
        case 'E':
            s->block_spool = NULL;
            return true;
        case 'c':
            return on_stream_commit(s, m, rec, got, err);
        case 'A':
            return on_stream_abort(s, m, rec, got, err);
        case 'B':
            if (s->direct_xid != 0 &&
                !give_up_direct(s, "met a transaction that committed meanwhile", false, rec,
                                got, err))
                return false;
            if (s->in_txn)
            {
                pgo_lsn_format(m->final_lsn, at);
                return err_set(err, EC_FORMAT,
                               "pgoutput: a transaction began (commit at %s) inside another",
                               at);
            }
            if (s->cfg.stop_before && s->cfg.stop_lsn > 0 && m->final_lsn >= s->cfg.stop_lsn)
            {
                /* Not handed out: the source ends here, unless on_caught_up
                 * moves the stop past its commit (caught_up_hook). */
                s->past_stop = true;
                s->held_final = m->final_lsn;
                s->held_time_us = m->commit_time_us;
                return true;
            }
            begin_txn(s, m->final_lsn, m->commit_time_us);
            return true;
        case 'C':
            if (!s->in_txn || m->commit_lsn != s->final_lsn)
            {
                pgo_lsn_format(m->commit_lsn, at);
                return err_set(err, EC_FORMAT,
                               "pgoutput: a commit at %s that no begin announced", at);
            }
            end_txn(s, m->end_lsn);
            return true;
        case 'R':
            return on_relation(s, m, fr->data_start, err);
        case 'I':
        case 'U':
        case 'D':
            return on_change(s, m, fr->data_start, rec, got, err);
        case 'T':
            return on_truncate(s, m, fr->data_start, rec, got, err);
        case 'Y':
        case 'O':
        case 'M':
            return true;
        default:
            pgo_lsn_format(fr->data_start, at);
            return err_set(err, EC_FORMAT, "pgoutput: unexpected '%c' message at %s", m->type,
                           at);
    }
}

static bool
should_end(PgoSource *s)
{
    if (s->in_txn || s->cfg.stop_lsn == 0)
        return false;
    if (s->past_stop)
        return true;
    return s->last_end >= s->cfg.stop_lsn ||
           (s->server_end >= s->cfg.stop_lsn && idle(s) && s->received <= s->server_end);
}

/* At the stop position, once: the owner's on_caught_up may move it on (true:
 * keep reading, not the end yet). */
static bool
caught_up_hook(PgoSource *s, bool *more, Err *err)
{
    uint64_t stop = s->cfg.stop_lsn;

    *more = false;
    if (!s->cfg.on_caught_up || (s->caught_up_called && !s->cfg.caught_up_repeat) ||
        interrupt_signal() != 0)
        return true;
    *more = true;
    if (!idle(s))
        return true; /* the last group is committing */
    s->caught_up_called = true;
    if (!s->cfg.on_caught_up(s->cfg.ctx, &stop, err))
        return false;
    if (stop > s->cfg.stop_lsn)
        s->cfg.stop_lsn = stop;
    else if (s->cfg.caught_up_repeat)
        *more = false; /* not moved on: the end */
    /* The transaction whose begin stopped the source commits before the new
     * stop: handed out from its begin on. */
    if (s->past_stop && s->held_final < s->cfg.stop_lsn)
    {
        s->past_stop = false;
        begin_txn(s, s->held_final, s->held_time_us);
    }
    else if (s->past_stop)
        *more = false; /* the end after all: its changes are not read */
    s->last_ping_ms = 0; /* ask the server where it stands now */
    return true;
}

static bool
pgo_next(Source *src, Record *rec, bool *eof, Err *err)
{
    PgoSource *s = (PgoSource *) src;

    *eof = false;
    if (s->payload)
    {
        frame_free(s, s->payload, s->payload_own);
        s->payload = NULL;
    }
    for (;;)
    {
        char *buf = NULL;
        int len = 0;
        int timeout = 1000;
        PgoFrame fr;
        bool got, more = false, own = false;

        if (s->direct_xid != 0 && interrupt_signal() != 0)
            return err_set(err, EC_INTERRUPTED, "interrupted by %s", interrupt_name());
        /* Everything committed before the stop is applied (the server
         * decoded past it), only the transaction streaming in is not: it
         * commits later, if ever, and is not waited for. */
        if (s->direct_xid != 0 && s->cfg.stop_lsn > 0 && s->server_end >= s->cfg.stop_lsn &&
            s->replay == NULL && atomic_load(&s->committed) >= s->handed_end)
        {
            got = false;
            if (!give_up_direct(s, "is still open at the stop position", true, rec, &got, err))
                return false;
            if (got)
                return true;
            continue;
        }
        if (s->replay != NULL)
        {
            /* A spooled transaction, committed: its changes, then its end. */
            if (!maybe_status(s, err) || !replay_next(s, &buf, &len, err))
                return false;
            if (len == 0)
            {
                s->st.streamed_spooled++;
                end_txn(s, s->replay_end);
                spool_drop(s, s->replay);
                s->replay = NULL;
                continue;
            }
            own = true;
            goto decode;
        }

        if (!s->ended && should_end(s) && s->rows_open == 0 && !caught_up_hook(s, &more, err))
            return false;
        /* Caught up: the idle position is stored first (a table the last
         * transactions did not touch still ends at the stop position). */
        if (!s->ended && should_end(s) && s->rows_open == 0 && !more && !maybe_status(s, err))
            return false;
        if (s->ended || (should_end(s) && s->rows_open == 0 && !more) ||
            (!s->in_txn && interrupt_signal() != 0 && s->rows_open == 0))
        {
            if (!s->ended)
                log_debug("stream source ends: last_end=%" PRIX64 " server_end=%" PRIX64
                          " stop=%" PRIX64 " received=%" PRIX64 " committed=%" PRIX64
                          " handed=%" PRIX64,
                          s->last_end, s->server_end, s->cfg.stop_lsn, s->received,
                          (uint64_t) atomic_load(&s->committed), s->handed_end);
            s->ended = true;
            s->st.stopped_at_stop_lsn = s->cfg.stop_lsn > 0 && interrupt_signal() == 0;
            *eof = true;
            return true;
        }
        /* A group ends on a commit: after enough rows, after enough time, or
         * when the source has nothing more for now. */
        if (!s->in_txn && s->rows_open > 0)
        {
            double open_for = monotime_s() * 1000.0 - s->first_open_ms;

            if (s->rows_open >= s->cfg.group_rows || open_for >= s->cfg.group_ms ||
                should_end(s) || interrupt_signal() != 0)
            {
                memset(rec, 0, sizeof *rec);
                rec->op = REC_BOUNDARY;
                /* The position is stored even if the size limit already ended
                 * the batch holding these rows (a large transaction cut right
                 * at its last change): else the slot would wait for it. */
                rec->batch_end = true;
                s->rows_open = 0;
                return true;
            }
            timeout = (int) (s->cfg.group_ms - open_for) + 1;
            if (timeout > 1000)
                timeout = 1000;
        }
        if (final_apply(s) && timeout > FINAL_WAIT_MS)
            timeout = FINAL_WAIT_MS;
        if (!maybe_status(s, err))
            return false;
        if (s->cfg.recv ? !s->cfg.recv(s->cfg.recv_ctx, timeout, &buf, &len, err)
                        : !replconn_recv(s->cfg.repl, timeout, &buf, &len, err))
            return false;
        if (len <= 0)
        {
            /* Nothing for a while: the open group ends at its last commit.
             * With nothing open, the consumer gets a turn (an empty boundary):
             * a writer's failure must not wait for the source's next change. */
            if (!s->in_txn && s->rows_open > 0)
                s->first_open_ms = 0;
            else if (!s->in_txn)
            {
                memset(rec, 0, sizeof *rec);
                rec->op = REC_BOUNDARY;
                return true;
            }
            continue;
        }
        s->st.bytes += (uint64_t) len;
decode:
        if (!pgo_decode(s->dec, buf, (size_t) len, &fr, err) ||
            !on_frame(s, &fr, buf, (size_t) len, rec, &got, err))
        {
            frame_free(s, buf, own);
            return false;
        }
        if (got)
        {
            s->payload = buf; /* the record borrows it */
            s->payload_own = own;
            return true;
        }
        frame_free(s, buf, own);
    }
}

static const char *const *
pgo_columns(Source *src, size_t *n)
{
    PgoSource *s = (PgoSource *) src;

    *n = s->cfg.ncolumns;
    return s->cfg.columns;
}

static void
pgo_position(Source *src, SourcePosition *pos)
{
    PgoSource *s = (PgoSource *) src;

    memset(pos, 0, sizeof *pos);
    /* An idle position stored (and acknowledged) counts too: the stored
     * position never goes back behind what the slot confirmed. */
    pos->lsn = s->last_end > s->cfg.resume_lsn ? s->last_end : s->cfg.resume_lsn;
    if (s->idle_stored > pos->lsn)
        pos->lsn = s->idle_stored;
    /* txn_lsn/txn_changes stay 0: a transaction is committed in the target
     * whole (a position inside one, stored by an older version, is still
     * resumed: cfg.resume_txn_lsn). */
    pos->commit_time_us = s->last_end_time_us;
    pos->records = s->st.transactions;
}

static bool
pgo_seek(Source *src, const SourcePosition *pos, Err *err)
{
    (void) src;
    (void) pos;
    return err_set(err, EC_INTERNAL, "a stream resumes where its slot stands, not by seeking");
}

static bool
pgo_resume(Source *src, const SourcePosition *pos, bool *same, Err *err)
{
    *same = false;
    return pgo_seek(src, pos, err);
}

static void
pgo_progress(Source *src, uint64_t *done, uint64_t *total)
{
    PgoSource *s = (PgoSource *) src;

    *done = s->st.bytes;
    *total = 0;
}

static const char *
pgo_name(Source *src)
{
    return ((PgoSource *) src)->name;
}

static void
pgo_close(Source *src)
{
    PgoSource *s = (PgoSource *) src;

    if (s->payload)
        frame_free(s, s->payload, s->payload_own);
    while (s->nspools > 0)
        spool_drop(s, &s->spools[s->nspools - 1]);
    free(s->spools);
    pgo_decoder_free(s->dec);
    free(s->relcol_field);
    free(s->field_relcol);
    free(s->field_type);
    free(s->start_type);
    for (size_t i = 0; i < s->nwarned; i++)
        free(s->warned_new[i]);
    free(s->warned_new);
    free(s->other_relids);
    free(s->fields);
    free(s->old_fields);
    buf_free(&s->raw);
    free(s);
}

static const SourceOps pgo_ops = {
    .next = pgo_next,
    .columns = pgo_columns,
    .position = pgo_position,
    .seek = pgo_seek,
    .resume = pgo_resume,
    .progress = pgo_progress,
    .name = pgo_name,
    .close = pgo_close,
};

bool
source_pgoutput_open(const PgoSourceConfig *cfg, Source **out, Err *err)
{
    PgoSource *s;
    size_t n = cfg->ncolumns ? cfg->ncolumns : 1;

    if (cfg->ncolumns == 0)
        return err_set(err, EC_INTERNAL, "a stream source needs the table's columns");
    s = xcalloc(1, sizeof *s);
    s->base.ops = &pgo_ops;
    s->cfg = *cfg;
    if (s->cfg.group_rows == 0)
        s->cfg.group_rows = 10000;
    if (s->cfg.group_ms <= 0)
        s->cfg.group_ms = 200;
    (void) snprintf(s->name, sizeof s->name, "%s.%s (stream)", cfg->schema, cfg->table);
    s->dec = pgo_decoder_new();
    s->field_relcol = xmalloc(n * sizeof(int));
    s->field_type = xcalloc(n, sizeof(uint32_t));
    s->start_type = xcalloc(n, sizeof(uint32_t));
    if (cfg->column_types)
        memcpy(s->start_type, cfg->column_types, cfg->ncolumns * sizeof(uint32_t));
    s->cfg.column_types = s->start_type;
    s->fields = xcalloc(n, sizeof(Field));
    s->old_fields = xcalloc(n, sizeof(Field));
    buf_init(&s->raw);
    atomic_init(&s->committed, cfg->resume_lsn);
    s->flushed = 0;
    s->last_end = cfg->resume_lsn;
    s->handed_end = cfg->resume_lsn;
    s->last_status_ms = monotime_s() * 1000.0;
    s->last_report_ms = s->last_status_ms;
    *out = &s->base;
    return true;
}

void
source_pgoutput_committed(Source *src, uint64_t lsn)
{
    PgoSource *s = (PgoSource *) src;
    uint64_t was = atomic_load(&s->committed);

    while (lsn > was && !atomic_compare_exchange_weak(&s->committed, &was, lsn))
        ;
}

bool
source_pgoutput_feedback(Source *src, Err *err)
{
    return send_status((PgoSource *) src, false, err);
}

void
source_pgoutput_stats(Source *src, PgoSourceStats *out)
{
    const PgoSource *s = (const PgoSource *) src;

    *out = s->st;
    out->direct_xid = s->direct_xid;
}
