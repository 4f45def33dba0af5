/*
 * The changes of one source table, read from a logical replication slot
 * (pgoutput, protocol 1, text values), as a Source of the pipeline.
 *
 * Each insert, update and delete is a record (Record.op) with the table's
 * columns in the order given at open; a truncate is a REC_TRUNCATE record
 * (or an error / nothing, per the policy).  Records of one source
 * transaction hold the batch open (Record.batch_hold: a large one goes to the
 * target in pieces of one target transaction); after a commit, once
 * group_rows rows or group_ms have gone by, a REC_BOUNDARY ends the batch on
 * that commit.
 *
 * The position (SourcePosition.lsn) is the end LSN of the last whole
 * transaction handed out; txn_lsn/txn_changes stay 0.  Transactions at or
 * below the resume position are skipped, and of the transaction a position
 * stored by an older version was inside (resume_txn_lsn), the changes it had
 * applied.
 *
 * Feedback: the flush position sent to the server is only ever what the
 * owner reports committed (source_pgoutput_committed, from any thread), or an
 * idle position the owner persisted first (persist_idle).  A status goes out
 * at least every 10 s, and at once when the server asks.
 */
#ifndef V7FILL_SOURCE_PGOUTPUT_H
#define V7FILL_SOURCE_PGOUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/replconn.h"
#include "v7fill/source.h"

typedef enum PgoTruncatePolicy
{
    PGO_TRUNCATE_STOP = 0,
    PGO_TRUNCATE_APPLY,
    PGO_TRUNCATE_IGNORE,
} PgoTruncatePolicy;

typedef struct PgoSourceConfig
{
    ReplConn *repl;              /* START_REPLICATION done (CopyBoth); stays the caller's */
    /* A connection shared by several tables (repl unused): the frames come
     * from recv (each malloc'd, freed by the source; *len 0: nothing within
     * timeout_ms), and no status is sent: the owner reports to the server the
     * least position its tables committed (or stored idle: persist_idle), and
     * answers the server's keepalives itself. */
    bool (*recv)(void *recv_ctx, int timeout_ms, char **buf, int *len, Err *err);
    void *recv_ctx;
    const char *schema;          /* the source table */
    const char *table;
    const char *const *columns;  /* the record's fields, in this order (names of the source) */
    size_t ncolumns;
    uint64_t resume_lsn;         /* skip transactions whose commit is below this end LSN */
    uint64_t resume_txn_lsn;     /* of the transaction committed here ... */
    uint64_t resume_txn_changes; /* ... skip this many changes (applied already) */
    uint64_t stop_lsn;           /* end once everything up to here is handed out (0: never) */
    bool stop_before;            /* with stop_lsn: a transaction committing at or after it is
                                    not handed out (the source ends at its begin), so two
                                    slots stopped at one position end on the same commits;
                                    with on_caught_up, handed out from that begin after all
                                    when the hook moves the stop past its commit (the owner
                                    commits each group before asking for the next record) */
    size_t group_rows;
    int group_ms;
    bool ignore_deletes;
    uint64_t tolerate_columns_until; /* a column the stream did not start with, in a
                                    relation message of a transaction committed below this
                                    LSN, is passed over (the
                                    catalog dropped it since); elsewhere the source stops:
                                    relation_changed (0: nowhere) */
    const uint32_t *column_types; /* per column: the type OID the catalog had at the start,
                                    which the target was checked against (0 or NULL: not
                                    known); a change to it within the session goes on */
    PgoTruncatePolicy on_truncate;
    /* Store an idle position (no transaction pending) as the stream's
     * position before it is acknowledged (*stored false: the owner's row
     * does not hold it, so it is not acknowledged either); NULL: idle
     * positions are not acknowledged. */
    bool (*persist_idle)(void *ctx, uint64_t lsn, bool *stored, Err *err);
    /* Every status_interval_ms (0: never): the one-line status, from the
     * reader's thread.  lag_bytes: the server's position less the committed
     * one; idle: caught up (nothing pending). */
    void (*status)(void *ctx, uint64_t committed_lsn, uint64_t lag_bytes, bool idle);
    int status_interval_ms;
    /* Every second (NULL: never), from the reader's thread, with the same
     * values as status: for metrics and the slot's checks. */
    void (*tick)(void *ctx, uint64_t committed_lsn, uint64_t lag_bytes, bool idle);
    /* Once, when idle at stop_lsn (NULL: never): may move *stop_lsn further. */
    bool (*on_caught_up)(void *ctx, uint64_t *stop_lsn, Err *err);
    /* on_caught_up called again at each stop it moved to; one that leaves
     * the stop where it is ends the source there (rounds kept open). */
    bool caught_up_repeat;
    void *ctx;
    /* The connection asked for streamed transactions (protocol 2, streaming
     * on): a large source transaction arrives in blocks while it is in
     * progress.  The first one open while no other is is applied as it
     * arrives, into one target transaction that commits at its Stream Commit
     * (direct); any other is spooled to a temporary file and applied whole at
     * its commit (a subtransaction's rollback cuts its changes out).  A
     * direct one rolled back whole hands out REC_ABANDON (its pieces are
     * rolled back in the target).  Its messages are kept in a spool as they
     * arrive (up to 1 GiB): one that another transaction interleaves with,
     * whose subtransaction rolls back, or that an earlier run applied, hands
     * out REC_ABANDON and goes on in that spool in place.  Without a spool
     * kept it ends the source with st.demote_xid set: the owner starts again
     * from its stored position, that xid listed in spool_xids (one with no
     * change of the table yet is spooled in place instead, with no restart).
     * When the source ends otherwise while one is applied directly (a
     * failure, a new column), st.direct_xid names it: the owner lists it
     * too. */
    bool streamed;
    const uint32_t *spool_xids;  /* streamed transactions to spool, not apply directly */
    size_t nspool_xids;
    double direct_after;         /* monotime_s: none applied directly before (a demotion
                                    was recent) */
    bool spool_all;              /* every streamed one spooled from its start, none applied
                                    directly (several tables' sources on one connection) */
} PgoSourceConfig;

typedef struct PgoSourceStats
{
    uint64_t transactions;
    uint64_t skipped_transactions;
    uint64_t deletes_ignored;
    uint64_t truncates_ignored;
    uint64_t bytes;
    uint64_t received_lsn;   /* the furthest LSN the server sent */
    uint64_t server_lsn;     /* the server's position from its last keepalive */
    uint64_t flushed_lsn;    /* the last flush position reported */
    int64_t last_commit_time_us; /* source commit time of the last transaction handed out */
    bool stopped_at_stop_lsn;
    bool relation_changed;   /* stopped at a column the stream did not start with */
    /* streamed transactions (cfg.streamed) */
    uint64_t streamed_direct;  /* committed, applied as they arrived */
    uint64_t streamed_spooled; /* committed, applied from the spool at their commit */
    uint64_t streamed_aborted; /* rolled back on the source (whole) */
    uint64_t streamed_to_spool; /* applied as they arrived, given up: went on in a spool */
    double direct_after;        /* monotime_s: none applied directly before (0: not set) */
    uint32_t demote_xid;       /* stopped: apply this one from a spool (see cfg.streamed) */
    uint32_t direct_xid;       /* the one applied directly when the source ended (0: none) */
} PgoSourceStats;

V7FILL_MUST_CHECK bool source_pgoutput_open(const PgoSourceConfig *cfg, Source **out, Err *err);
/* The owner committed everything up to this position in the target (any
 * thread): the next status reports it as flushed. */
void source_pgoutput_committed(Source *s, uint64_t lsn);
/* Send a status now with the committed position (before closing). */
V7FILL_MUST_CHECK bool source_pgoutput_feedback(Source *s, Err *err);
void source_pgoutput_stats(Source *s, PgoSourceStats *out);
/* "0/16B3F00 public.orders": a record's origin (Record.line is the change's LSN). */
void source_pgoutput_origin(const char *schema, const char *table, uint64_t lsn, char *out,
                            size_t size);

#endif /* V7FILL_SOURCE_PGOUTPUT_H */
