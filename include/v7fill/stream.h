/*
 * The stream: a live source table of another PostgreSQL database, copied
 * once under a slot's exported snapshot and then followed over logical
 * replication (pgoutput), exactly once, into the UUIDv7 target.  Both phases
 * are sources of the shared pipeline (pipeline.h): the copy is a CSV Source
 * over COPY TO (source_snapshot.h), the changes a Source over the slot
 * (source_pgoutput.h).  This module owns what is the stream's alone: the
 * source's preflight, the slot, the stream's state row in the target (its
 * position, written in the same transaction as the rows), the quarantine of
 * rows the target refuses, and the feedback that moves the slot only over
 * what the target committed.
 */
#ifndef V7FILL_STREAM_H
#define V7FILL_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/pipeline.h"

typedef enum StreamOnDelete
{
    STREAM_DELETE_APPLY = 0,
    STREAM_DELETE_IGNORE,
} StreamOnDelete;

typedef enum StreamOnTruncate
{
    STREAM_TRUNCATE_STOP = 0,
    STREAM_TRUNCATE_APPLY,
    STREAM_TRUNCATE_IGNORE,
} StreamOnTruncate;

/* One table of a stream of several (--from SCHEMA.TABLE=TARGET). */
typedef struct StreamTable
{
    const char *from;   /* SCHEMA.TABLE on the source */
    const char *target; /* its target table */
} StreamTable;

typedef struct StreamOptions
{
    PipelineOptions common;     /* table = the target */
    const char *source_conninfo;
    const char *from;           /* SCHEMA.TABLE on the source */
    /* Several tables of one slot (ntables > 0; then from and common.table are
     * not used): each into its own target, with its own row in v7fill.stream;
     * the slot confirms the least position the targets committed.
     * --time-column, --map and --ignore-column apply to the tables that have
     * the column; --key-map and --resnapshot take one table. */
    const StreamTable *tables;
    size_t ntables;
    const char *publication;
    const char *slot;
    StreamOnDelete on_delete;
    StreamOnTruncate on_truncate;
    int ahead;                  /* windows ensured ahead of now (default 2) */
    size_t group_rows;          /* a target transaction ends after this many rows ... */
    int group_ms;               /* ... or this long after its first (default 10000, 200) */
    bool no_snapshot;           /* no initial copy: stream from the slot's start */
    bool resnapshot;            /* the stream's slot invalidated (lost) or gone: drop it,
                                   create it again and copy anew, keeping the counts */
    bool until_caught_up;       /* exit once what the source committed before the start is applied */
    /* Protocol 2 with streaming on (a source of PostgreSQL 14 or later): a
     * large source transaction arrives while it is in progress and is applied
     * as it arrives (one --from table), or spooled to a temporary file and
     * applied at its commit (source_pgoutput.h; always with several --from
     * tables).  Off: protocol 1, each transaction sent whole at its commit. */
    bool streaming;
    int status_interval_s;      /* the one-line status on stderr (default 10; 0 = never) */
    const char *metrics_listen; /* ADDR:PORT of the metrics endpoint, or NULL */
    uint64_t warn_retained;     /* warn when the slot retains more WAL (default 5 GiB; 0 never) */
    int record_every_s;         /* a run row (v7fill.run) for the rows applied since the last,
                                   every this many seconds (default 60; 0 = only at exit) */
    /* With until_caught_up (NULL: none): called once, from the reader's thread, when
     * everything up to the stop position is committed in the target; it may move
     * *stop_lsn further: the stream then applies up to there and ends (the switch takes
     * its lock here, so the lock never covers the stream's start).  false: the stream
     * ends with its err. */
    bool (*on_caught_up)(void *ctx, uint64_t *stop_lsn, Err *err);
    void *caught_up_ctx;
    /* NULL, or a deferred foreign key of the target that another capture's
     * delete, applied at the same moment, can fail at a commit (migrate's
     * child captures caught up side by side for the switch): a 23503 naming
     * it rolls that transaction back and applies it again from the stored
     * position (the parent's row is gone then), up to 10 times in a row.
     * A fallback: the child's trigger reads the map row FOR KEY SHARE, so the
     * parent's delete waits for the child's commit in the race known. */
    const char *retry_constraint;
} StreamOptions;

void stream_options_default(StreamOptions *o);

typedef struct StreamStats
{
    ImportStats rows;           /* the pipeline's counts, both phases */
    uint64_t copied;            /* of rows.read: rows of the initial copy */
    uint64_t transactions;      /* source transactions applied */
    uint64_t skipped_transactions; /* already applied (at or below the stored position) */
    uint64_t deletes_ignored;   /* --on-delete ignore */
    uint64_t truncates_ignored; /* --on-truncate ignore */
    uint64_t quarantined;
    uint64_t bytes_received;
    uint64_t reconnects;
    uint64_t streamed_direct;   /* large transactions applied as they streamed in */
    uint64_t streamed_spooled;  /* ... spooled and applied at their commit */
    uint64_t streamed_aborted;  /* ... rolled back whole on the source */
    uint64_t streamed_to_spool; /* a direct one given up in place: went on in a spool */
    uint64_t streamed_restarts; /* a direct one given up: received again, spooled */
    uint64_t start_lsn;         /* where this run started streaming */
    uint64_t applied_lsn;       /* the last source commit committed in the target */
} StreamStats;

/* The --from values given (n of them; has_target: the TABLE argument was
 * given): one SCHEMA.TABLE → *nout 0 (one table into TABLE); each
 * SCHEMA.TABLE=TARGET → the tables (free with stream_tables_free).  Mixed
 * forms, several plain ones, TABLE with the =TARGET forms, or one target twice
 * → EC_USAGE naming --from. */
V7FILL_MUST_CHECK bool stream_tables_parse(const char *const *froms, size_t n, bool has_target,
                                           StreamTable **out, size_t *nout, Err *err);
void stream_tables_free(StreamTable *t, size_t n);

/* Run a stream until interrupted (SIGINT/SIGTERM: the current group is
 * committed, exit status 0), until caught up (--until-caught-up), or until an
 * error that reconnecting cannot cure. */
V7FILL_MUST_CHECK bool stream_run(PgConn *target, const StreamOptions *o, StreamStats *st,
                                  Err *err);

#endif /* V7FILL_STREAM_H */
