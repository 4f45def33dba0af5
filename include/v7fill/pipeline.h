/*
 * The pipeline: pull records from a Source, mint ids, route (ensure the
 * windows a batch needs), write batches through the sink, track counts.
 * Every command that moves rows configures it; a new source is a new Source
 * plus the hooks below, not a new loop.
 *
 * Contract, in order of calls:
 *
 *   pipeline_open      the target, retention, tracker
 *   pipeline_setup     v7fill's tables, the id key, the lookup
 *   pipeline_attach    a Source (its columns mapped, the sink built for them)
 *     ...the owner may seek/resume the source now...
 *   pipeline_run       records → batches until the source ends: one transaction
 *                      per batch on a writer thread (--jobs: N writer threads, each
 *                      with its own connection, batches dealt in reading order and
 *                      committed in that order), reconnect with backoff,
 *                      interrupt, progress; inside each transaction the hooks
 *                      make the rejects durable and store the resume position
 *   pipeline_finish    (plan DDL; warnings)   pipeline_close, pipeline_free
 *
 * The pipeline never looks inside a SourcePosition: it takes it from the
 * source after a batch's last record and hands it to the hooks (the file
 * import stores offset, line and content hash; a stream would store its commit
 * LSN).  A record's origin (Record.line, BatchRow.src_line) is likewise a
 * 64-bit handle only the hooks format ("orders.csv:12"; an LSN and relation).
 *
 * Accounting holds at every commit and across crashes and resumes:
 *   read = inserted + duplicates + rejected + expired
 *          + updated + deleted + missing_deletes
 * (import_stats_balanced).  Every row record (insert, update, delete) is read
 * once and ends in exactly one of these; `missing` is not a term of its own:
 * an update of a row the target does not have is counted in inserted (its
 * tuple was complete) or rejected, and in `missing` too; a delete of such a
 * row only in missing_deletes (of missing).  Truncates and boundaries are not
 * rows: not read.
 * The pipeline fills ImportStats; it never calls the report (import_report.c
 * reads the statistics).
 */
#ifndef V7FILL_PIPELINE_H
#define V7FILL_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/catalog.h"
#include "v7fill/err.h"
#include "v7fill/mem.h"
#include "v7fill/partitions.h"
#include "v7fill/pg.h"
#include "v7fill/sink.h"
#include "v7fill/source.h"

typedef struct ColumnMap
{
    const char *from; /* source column */
    const char *to;   /* target column */
} ColumnMap;

/* What every source shares. */
typedef struct PipelineOptions
{
    const char *table;
    const char *time_column;  /* NULL: the target's created_at when the source has it */
    const char *time_format;  /* NULL = iso */
    const char *input_tz;     /* NULL = UTC */
    const char *source_ref;   /* template, NULL = hash of the whole record */
    const char *id_column;    /* source column carrying ids (kept if UUIDv7) */
    const ColumnMap *maps;
    size_t nmaps;
    const char *const *ignore;
    size_t nignore;
    size_t batch_rows;        /* default 10000 */
    size_t batch_bytes;       /* a batch is also full at this many bytes of COPY data and
                                 raw input (default 64 MiB, at most BATCH_MAX_BYTES) */
    uint64_t max_rejects;     /* UINT64_MAX = unlimited */
    double max_rejects_pct;   /* < 0 = unused */
    int64_t max_future_us;    /* allowed clock skew ahead of now */
    const char *lookup_table; /* NULL → <table>_source_ref (<table>_id_map with key_map_column) */
    /* The typed key map as the lookup (LOOKUP_LEGACY_ID): the source column (its
     * name in the source, before --map) holding a signed 64-bit integer key.  The
     * row's reference is that integer in decimal (ids minted from it and the time
     * as from any reference); source_ref must be NULL (EC_USAGE otherwise), and
     * so keep_ref_text false.  A NULL, non-integer or out-of-range value rejects
     * the row ("key column id: not an integer: 'abc'"). */
    const char *key_map_column;
    const char *key_map_type; /* legacy_id of a new map: smallint, integer, bigint (NULL) */
    bool keep_ref_text;       /* store the reference text in the lookup table */
    LookupKeys lookup_keys;   /* a new lookup's keys; an existing one's must match */
    bool plan;                /* read and classify only: no writes at all */
    bool progress;            /* progress on stderr */
    Granularity granularity;
    const char *window_tz;    /* --window-tz: new windows start at local midnight */
    int lock_timeout_ms;
    int reconnect_attempts;   /* after a lost connection (default 5) */
    int jobs;                 /* writer connections (--jobs, default 1): batches dealt in
                                 reading order, committed in that order */
    int64_t now_us;           /* 0 = the real clock (tests inject a time) */
    const char *retention;    /* --retention; NULL: stored (v7fill retention), else
                                 pg_partman's, else none (every row is on time) */
    int64_t near_cutoff_us;   /* 0 = 10% of the retention, at least one window */
    bool keep_expired;        /* insert rows whose window is retired anyway */
    bool analyze;             /* the load's closing ANALYZE of the target and VACUUM of its
                                 lookup (load_analyze.h; default on): an import's end, a
                                 stream's or a migration's initial copy */
} PipelineOptions;

void pipeline_options_default(PipelineOptions *o);

typedef struct ReasonCount
{
    char reason[96];
    uint64_t count;
    char example[256]; /* first full message, with the record's origin */
} ReasonCount;

typedef struct WindowCount
{
    int64_t lower_us;
    int64_t upper_us;
    char partition[128]; /* "" when the partition does not exist (plan) */
    uint64_t rows;       /* inserted (import) / would be written (plan) */
    uint64_t near_cutoff; /* of which near the retention cutoff */
    int64_t time_left_us; /* until the window retires (INT64_MAX: no retention) */
    bool created;        /* created by this run (import) / would be created (plan) */
} WindowCount;

/* The statistics of a run.  The pipeline fills all but the fields marked
 * "owner": the command that configures it (the file import) fills those. */
typedef struct ImportStats
{
    uint64_t files;         /* owner */
    uint64_t files_resumed; /* owner */
    uint64_t files_skipped; /* owner: --skip-finished: finished by an earlier run, not read */
    uint64_t read;
    uint64_t read_resumed; /* of read: rows that interrupted earlier runs accounted for */
    uint64_t inserted;
    uint64_t duplicates;
    uint64_t rejected;
    uint64_t expired;
    uint64_t updated;         /* rows updated in place by their id (REC_UPDATE) */
    uint64_t deleted;         /* rows deleted by their id (REC_DELETE) */
    uint64_t missing;         /* updates and deletes of rows the target did not have */
    uint64_t missing_deletes; /* of missing: the deletes (nothing else counts them) */
    uint64_t time_changed;    /* of updated: the time column moved off the id's ms (the id
                                 stays: ids are references) */
    uint64_t truncates;       /* REC_TRUNCATE applied (not rows: not in read) */
    uint64_t near_cutoff;     /* inserted, in windows that retire within --near-cutoff */
    uint64_t expired_kept;    /* expired rows inserted anyway (--keep-expired) */
    uint64_t batches;
    uint64_t partitions_created;
    double elapsed_s;
    double closing_s;     /* owner: of elapsed_s, the closing ANALYZE and VACUUM (0: not run) */
    size_t nreasons;
    ReasonCount *reasons;
    size_t nwindows;
    WindowCount *windows;
    Buf ddl;              /* plan: partitions that would be created */
    char rejects_path[1024]; /* owner */
    char late_path[1024];    /* owner */
    int64_t retention_us;     /* 0 = none */
    char retention_from[256]; /* where it came from, for the report */
    int64_t near_cutoff_us;
    char *delay_json;     /* the tracker's statistics (tracker_to_json), or NULL */
    char lookup_table[256];
    bool lookup_keys_ordered; /* the lookup's keys are (or would be) ordered */
    uint64_t keys_ordered;    /* rows read in this run whose key came out ordered */
    SinkStats sink;
} ImportStats;

void import_stats_free(ImportStats *st);
/* The accounting invariant; false means a bug (the tool checks it itself). */
bool import_stats_balanced(const ImportStats *st);
/* Rows per second of this run: the rows it read over its elapsed time (rows
 * that earlier runs accounted for, read_resumed, are not this run's work). */
double import_stats_rate(const ImportStats *st);
/* b's counts of rows, batches, partitions and the closing ANALYZE's time
 * added to a's (not elapsed_s: two runs side by side and one after the other
 * add it differently; nor the owner's files, reasons and paths). */
void import_stats_add_counts(ImportStats *a, const ImportStats *b);

/* Counts of one batch (or of what a resume position accounts for). */
typedef struct BatchCounts
{
    uint64_t read, inserted, duplicates, rejected, expired;
    /* Row operations (zero for a file import); the same meaning as in ImportStats. */
    uint64_t updated, deleted, missing, missing_deletes, time_changed, truncates;
} BatchCounts;

/* *a += *b, field by field. */
void batch_counts_add(BatchCounts *a, const BatchCounts *b);

/* A row the retention calls late (near its cutoff, or expired), for the
 * owner's late-rows output. */
typedef struct LateRow
{
    uint64_t origin;
    const char *delay_class; /* "near cutoff", "expired", "expired (kept)" */
    const char *id;
    const char *event_time;
    const char *delay;
    const char *time_left;
    const char *source_ref;
} LateRow;

typedef enum CommitCheck
{
    COMMIT_NOT_DONE, /* the batch did not commit: write it again */
    COMMIT_DONE,     /* it committed: *counts are what it added */
    COMMIT_LOST,     /* neither it nor the batch before is there: the server lost
                        commits it had acknowledged; err says so */
} CommitCheck;

/*
 * What the owner of a source plugs in.  All but origin() are called on a
 * writer thread, one batch at a time and in reading order (with several
 * writers, from the commit turn of the batch: every batch before it
 * committed), while the reader does not touch the owner's state.  origin()
 * is called on the reader and the writers (the reader's messages; reject
 * examples and the largest delays, for rows that rank among them), so it may
 * only read what stays fixed while the source is read (its name): no lock.
 * origin and where are required; any other may be NULL
 * (nothing to write, no position to keep).  Today only the file import
 * exercises them: after_commit has no use there beyond keeping its
 * checkpoint; the stream source sets Record.batch_end and batch_hold.
 */
typedef struct PipelineHooks
{
    void *ctx;
    /* "orders.csv:12": a record's origin handle, for messages and reasons. */
    void (*origin)(void *ctx, uint64_t origin, char *out, size_t size);
    /* "line 12": where a position stands, for messages. */
    void (*where)(void *ctx, const SourcePosition *pos, char *out, size_t size);
    /* Inside the batch's transaction, before COMMIT: a rejected row, then a
     * late one, then outputs_sync makes both durable. */
    bool (*reject)(void *ctx, uint64_t origin, const char *reason, const char *sqlstate,
                   const char *raw, size_t raw_len, Err *err);
    bool (*late)(void *ctx, const LateRow *row, Err *err);
    bool (*outputs_sync)(void *ctx, Err *err);
    /* Before the first attempt of a batch: remember where the outputs stand;
     * outputs_rewind cuts them back there when the batch is written again. */
    void (*outputs_mark)(void *ctx);
    bool (*outputs_rewind)(void *ctx, Err *err);
    /* The last statements of the batch's transaction: store the resume
     * position with the batch's counts (finished: the source ended there). */
    bool (*save_position)(void *ctx, PgConn *c, const SourcePosition *pos,
                          const BatchCounts *counts, bool finished, Err *err);
    /* After a lost connection and a reconnect: did the batch ending at pos
     * (finished: the input's last, as save_position was told) commit?  COMMIT_DONE fills *counts with what it added (with the
     * earlier pieces of its source transaction); when the COMMIT itself lost
     * its answer and the rows' outcomes add up to it, the batch is counted
     * from them as after an answered COMMIT (delays, per-window rows,
     * row_delay), then after_commit.  false: it could not be asked (a
     * connection error is retried after a reconnect). */
    bool (*check_commit)(void *ctx, PgConn *c, const SourcePosition *pos, bool finished,
                         CommitCheck *out, BatchCounts *counts, Err *err);
    /* After the batch committed and was counted (a stream confirms its flush
     * position to its server from here). */
    void (*after_commit)(void *ctx, const SourcePosition *pos);
    /* Each row of a committed batch the tracker counts (inserted, or expired):
     * its id → insert delay in µs and its DelayClass, for live metrics. */
    void (*row_delay)(void *ctx, int64_t delay_us, int delay_class);
    /* The rows given to row_delay since the last after_commit were rolled
     * back (the open target transaction of a large source transaction was
     * lost or given up: none of it is in the target, and it comes again):
     * forget them.  Under the same lock as row_delay and after_commit. */
    void (*rows_rolled_back)(void *ctx);
    /* A writer's connection to the target lost (lost true, why: the error),
     * then, once the pipeline's own retries got it back, found again (lost
     * false, why NULL): readiness while it retries.  From the writer's thread. */
    void (*target_connection)(void *ctx, bool lost, const char *why);
    /* On the reading thread, before each full batch goes to its writer, no
     * lock held: periodic work of the source's own connections (a stream's
     * copy records its segments and checks its slot from here). */
    void (*between_batches)(void *ctx);
    /* Where the rejects go and what to do, for the --max-rejects error. */
    const char *rejects_where;
    const char *rejects_hint;
} PipelineHooks;

/* Several inputs in one run (a list of files): progress says "(file 2 of 5)"
 * and an ETA for all of them when their sizes are known.  Kept by the owner,
 * read by the pipeline's progress. */
typedef struct PipelineInputs
{
    const char *noun;     /* "file" */
    size_t count;         /* inputs in the run */
    uint64_t current;     /* 1-based number of the input being read */
    bool all_known;       /* every input's size is known: all_bytes is true */
    uint64_t all_bytes;   /* the sizes of all the inputs (as the sources count progress) */
    uint64_t done_bytes;  /* sizes of the inputs finished by this run */
    uint64_t run_bytes;   /* what they took of this run's reading (less any resumed part) */
} PipelineInputs;

typedef struct Pipeline Pipeline;

/* Sources attached from now on: key changes at source positions up to upto
 * (0: none) may merge into a redone initial copy's row, the copy having begun
 * at the target's transaction id before_xid (SinkConfig.merge_key_moves_upto;
 * not on a distributed target). */
void pipeline_merge_key_moves(Pipeline *p, uint64_t upto, uint64_t before_xid);

/* Load and check the target, its lookup and id key, the retention; plan:
 * nothing is created.  *st is reset and filled from here on. */
V7FILL_MUST_CHECK bool pipeline_open(PgConn *c, const PipelineOptions *o,
                                     const PipelineInputs *inputs, ImportStats *st,
                                     Pipeline **out, Err *err);
/* After pipeline_open, once the owner has opened its outputs: v7fill's own
 * tables, the id key and the lookup (plan: only read), checked against the
 * options. */
V7FILL_MUST_CHECK bool pipeline_setup(Pipeline *p, Err *err);
/* The next source: its columns are mapped to the target's (errors name the
 * source), the sink is built for them.  unnamed_last: the source's last
 * column has no name, its values must be empty.  The source stays the
 * caller's. */
V7FILL_MUST_CHECK bool pipeline_attach(Pipeline *p, Source *src, bool unnamed_last,
                                       const PipelineHooks *hooks, Err *err);
/* Read the attached source to its end in batches.  On an interrupt or a
 * broken input the rows read before are committed (counted, for a plan)
 * first; the error is returned. */
V7FILL_MUST_CHECK bool pipeline_run(Pipeline *p, Err *err);
/* Plan: compute the DDL of the windows that would be created.  Warnings. */
V7FILL_MUST_CHECK bool pipeline_finish(Pipeline *p, Err *err);
/* After a lost connection: reconnect with backoff (interruptible). */
V7FILL_MUST_CHECK bool pipeline_reconnect(Pipeline *p, Err *err);
const TargetTable *pipeline_target(const Pipeline *p);
/* The target's columns read again on c (a column added since the open), for
 * the next pipeline_attach; between attaches only.  An error when the table
 * is another one now (dropped and made again). */
V7FILL_MUST_CHECK bool pipeline_reload_columns(Pipeline *p, PgConn *c, Err *err);
const char *pipeline_target_q(const Pipeline *p); /* quoted, schema-qualified */
const char *pipeline_lookup_q(const Pipeline *p);
/* Seconds since pipeline_open (monotonic clock). */
double pipeline_elapsed(const Pipeline *p);
/* A segment of the run, for a run row of its own (v7fill stream and import
 * record one every --record-every): the rows counted since the last segment
 * taken (or pipeline_open), the seconds it spans, and their delays
 * (tracker_to_json; caller frees).  The pipeline's tracker starts afresh; the
 * run's delays (pipeline_close's delay_json) still cover every segment.
 * False (nothing taken) while a source transaction's pieces are counted but
 * not committed, or without a tracker: take it later. */
typedef struct PipelineSegment
{
    uint64_t read, inserted, duplicates, rejected, partitions_created;
    double elapsed_s;
    char *delay_json;
} PipelineSegment;
bool pipeline_take_segment(Pipeline *p, PipelineSegment *out);
/* A segment taken that could not be recorded: the next one taken carries it
 * (its counts, seconds and delays); frees seg->delay_json. */
void pipeline_return_segment(Pipeline *p, PipelineSegment *seg);
/* From now on the rows found expired and not inserted are counted (the run's
 * counts) but their delays are held out of every segment taken, until
 * pipeline_drop_held: a stream's initial copy records its expired rows only
 * with its end, since a copy that does not finish is read again whole by the
 * next run, expired rows included (the rows it inserted are duplicates then,
 * not counted again). */
void pipeline_hold_expired(Pipeline *p);
/* *with = seg with the rows held added (their delays, and a span reaching
 * back to pipeline_hold_expired); with->delay_json is the caller's to free,
 * seg is left as it is.  *rows: how many.  False (*with empty): none held. */
bool pipeline_segment_with_held(Pipeline *p, const PipelineSegment *seg, PipelineSegment *with,
                                uint64_t *rows);
/* The rows held are forgotten; expired rows are counted as before. */
void pipeline_drop_held(Pipeline *p);
/* Seconds since the last segment was taken (or pipeline_open). */
double pipeline_segment_age(const Pipeline *p);
/* Counts added to the run's that earlier runs accounted for (a resumed
 * import's checkpoint): no segment of this run counts them. */
void pipeline_segment_exclude(Pipeline *p, const PipelineSegment *earlier);
/* Final statistics (sink, delays, elapsed); false with EC_INTERNAL when the
 * accounting does not balance (only checked when ok). */
V7FILL_MUST_CHECK bool pipeline_close(Pipeline *p, bool ok, Err *err);
/* Frees everything pipeline_open made (the stats stay); NULL is fine. */
void pipeline_free(Pipeline *p);

/*
 * Row operations (Record.op; a file import only inserts).  Operations apply as
 * if in the order read, inside the batch's one transaction: operations on
 * distinct references commute, so the sink groups them in waves, each applied
 * set-wise (deletes, then updates, then inserts of one wave), and applies them
 * in the order read when a wave fails in a way that may be a row's (sink.h).
 *
 * - UPDATE: the row is found through the lookup by its source reference (the
 *   template evaluated on the record's fields as for an insert; on
 *   Record.old_fields when the key changed, and the lookup entry then moves to
 *   the new reference).  It is updated in place by its id: only the columns
 *   sent (not Field.unchanged) are set; the id column never changes.  An update
 *   that moves the time column off the id's millisecond keeps the id and counts
 *   in time_changed.  An update is never counted expired (the row it finds
 *   is updated wherever it is).  A row the target does not have: a complete tuple (no
 *   unchanged field, a valid time) is inserted with the id an insert would have
 *   had (inserted, and missing); otherwise it is rejected with "update of a row
 *   the target does not have (the tuple is incomplete: unchanged TOAST values)"
 *   (the reject hook is where a stream quarantines it; missing too).  A value
 *   the server refuses rejects that row only.
 * - DELETE: the target row (by its id) and its lookup row go, so a later insert
 *   of the reference lands again.  Only the reference's fields are needed (a
 *   NULL time is fine).  A row the target does not have: missing and
 *   missing_deletes, not an error.
 * - TRUNCATE: empties the target and its lookup in the batch's transaction;
 *   rows before it in the batch are truncated too, rows after it land.
 * - BOUNDARY: ends the current batch if it holds anything.
 *
 * The typed key map (PipelineOptions.key_map_column: --key-map, migrate): the
 * lookup is <table>_id_map (legacy_id smallint|integer|bigint PRIMARY KEY, id
 * uuid NOT NULL UNIQUE), LookupShape LOOKUP_LEGACY_ID.  The row's reference
 * is its integer key in decimal; BatchRow.hash (and old_hash) is that integer
 * encoded by lookup_map_key_encode, so dedup, repeats, updates (a key change
 * moves the map row), deletes and truncates are the same operations as with
 * the hashed lookup; probes and the lookup COPY go by legacy_id.
 *
 * Batch boundaries: Record.batch_end ends the batch after the record; the
 * file import sets neither.
 *
 * Large source transactions: Record.batch_hold says the record is inside one
 * source transaction.  A batch full there is a piece: written (windows,
 * COPY, changes, rejects and late rows through the hooks) in a target
 * transaction left open, not committed, its counts kept; the batches after it
 * go on in the same transaction until one ends outside a source transaction
 * (batch_end, or full after a record without batch_hold), which commits with
 * save_position given the counts of all the pieces.  Memory holds one batch
 * per lane.  With several lanes, the pieces of one source transaction follow
 * each other on one lane; batches commit in reading order on any number of
 * lanes, and a batch waits for those in flight that share a reference, a
 * given id, or a truncate with it.  Windows a later piece needs
 * are created on a second connection (the open transaction cannot).  A
 * failure after the first piece cannot be retried (the earlier pieces were
 * rolled back with it), unless the connection went at the final COMMIT and
 * check_commit says it landed (then it is counted as committed):
 * pipeline_run returns the error ("lost its target
 * transaction"; a lost connection stays a connection error) and the owner
 * starts again from its committed position; an input that breaks, or an
 * error, inside a source transaction rolls its open transaction back.  The
 * pipeline's statistics count a piece's rows when it is written; a rolled-back
 * transaction's pieces are taken out again (the counts, the tracker's delays
 * and largest delays, the per-window rows, and through rows_rolled_back the
 * owner's delays), so a transaction written again counts once, as
 * save_position stores it.
 */

#endif /* V7FILL_PIPELINE_H */
