/*
 * The pipeline: source -> record -> mint -> route -> sink -> track.
 *
 * One batch at a time: records are classified and encoded into a Batch
 * (bounded by --batch-rows and --batch-bytes, or ended by the source), the
 * windows they need are ensured, the sink writes the batch in one transaction
 * whose last statements, through the owner's hooks, make its rejects durable
 * and store its resume position.  A lost connection is retried; whether the
 * batch committed is asked of the owner (it reads its resume position back),
 * so nothing is counted or written twice.
 */
#include "v7fill/pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "v7fill/catalog.h"
#include "v7fill/citus.h"
#include "v7fill/civil.h"
#include "v7fill/copy_encode.h"
#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/maintain.h"
#include "v7fill/monotime.h"
#include "v7fill/refset.h"
#include "v7fill/retention.h"
#include "v7fill/srcref.h"
#include "v7fill/sortkey.h"
#include "v7fill/state.h"
#include "v7fill/timeparse.h"
#include "v7fill/tracker.h"
#include "v7fill/uuid7.h"

#include <pthread.h>

#define DEFAULT_BATCH_ROWS 10000
#define DEFAULT_BATCH_BYTES ((size_t) 64 << 20)

/* What happens to each source column. */
typedef struct SourceColumn
{
    int target;       /* target column index, -1 = not written */
    bool is_time;     /* the event time column */
    bool is_id;       /* the id column */
    bool format_time; /* write the parsed time (UTC text) instead of the raw text */
} SourceColumn;

/* The date part of the last time written ("YYYY-MM-DD "): rows come in runs
 * of the same day. */
typedef struct DayCache
{
    int64_t day; /* days since the epoch; INT64_MIN = empty */
    char text[11];
} DayCache;

/*
 * The writers: --jobs lanes, each a thread with its own connection and sink,
 * write batches (windows, probe, COPY, checkpoint, commit) while the reader
 * parses the next one into a free buffer.  Batches are dealt in reading
 * order, numbered by seq.  A lane's COPY work overlaps the others', but its
 * COMMIT waits for its turn: every batch before it committed.  So the last
 * statements of a transaction (rejects, late rows, the owner's single resume
 * position, the partitions' activity), the COMMIT and the counting run one
 * batch at a time, in reading order: the checkpoint stays exact, the hooks
 * see one batch at a time as with one writer.
 *
 * Two lanes never write the same reference (or given id) at once: a batch
 * sharing one with a batch still in flight waits for it before it is dealt
 * (writer_deal), so its probe finds the earlier row committed, as with one
 * writer.  A lane whose COMMIT waits for an earlier batch that waits for one
 * of its locks (another unique key) rolls back and writes its batch again.
 *
 * Under Writer.mu: the lanes' hand-off fields, seq bookkeeping, and the
 * statistics (lanes count in turn; the reader reads them for progress and the
 * rejects limit).  The target's catalog is read by lanes (classify, count,
 * activity) and changed by partition creation: catalog_lock.
 */
typedef struct Lane
{
    Pipeline *pl;
    pthread_t thread;
    PgConn *conn;   /* lane 0: the pipeline's own; the others opened by writer_start */
    Sink *sink;     /* lane 0: pl->sink */
    SortWork sort;  /* in-batch dedup: sorting by hash */
    RefSet *keys;   /* jobs > 1: references and given ids of its batch (reader's) */
    bool barrier;   /* jobs > 1: its batch truncates, or goes on a source transaction begun by
                     * an earlier piece: no batch goes beside it (reader's) */
    int pid;        /* its server process (under mu) */
    bool busy;      /* a batch was handed over and is not written yet (under mu) */
    Batch *b;
    SourcePosition pos;
    bool finished;
    uint64_t seq;
    /* A source transaction written in pieces: its target transaction is open
     * on conn (writer's), holding these counts of the pieces written so far;
     * the run's stats counted them already (txn_run: the stats' other counts
     * they raised), and take them back if the transaction is rolled back. */
    bool txn_open;
    BatchCounts txn_counts;
    struct
    {
        uint64_t near_cutoff, expired_kept, keys_ordered;
    } txn_run;
    /* The tracker's aggregates and the run's windows as they were before the
     * open transaction's first piece was counted: put back if it is rolled
     * back (the delays and per-window rows then count what the target holds).
     * txn_tracker stays allocated for the next transaction. */
    Tracker *txn_tracker;
    WindowCount *txn_windows;
    size_t txn_nwindows;
} Lane;

typedef struct Writer
{
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool running;
    bool quit;
    size_t nlanes;      /* lanes writing */
    size_t nalloc;      /* lanes allocated: --jobs */
    Lane *lanes;
    uint64_t next_seq;  /* the next batch dealt */
    uint64_t committed; /* every batch before this one committed */
    uint64_t fail_seq;  /* the first batch that failed (UINT64_MAX: none): none after commits */
    Err err;            /* its error */
    bool reported;      /* writer_wait returned it */
    size_t nstarted;    /* threads running */
    /* the reader's: the next batch's keys, and scratch for writer_deal */
    RefSet *spare;
    bool spare_barrier; /* the next batch truncates */
    Lane *pin; /* the lane whose target transaction holds the pieces of a source
                * transaction so far: its next batch goes there */
    bool *hit;
    uint64_t *busy_seq;
} Writer;

struct Pipeline
{
    PgConn *conn;
    const PipelineOptions *o;
    const PipelineInputs *inputs;
    ImportStats *st;
    TargetTable *target;
    char *target_q;
    char *lookup_name;
    char *lookup_q;
    char *copy_cols;
    char **cols_q;      /* the COPY line's columns one by one, quoted (the key first) */
    size_t ncols_q;
    char *key_q;        /* quoted key column */
    IdKeyer *keyer;
    TimeParser *tparser;
    Tracker *tracker;  /* the rows counted since the last segment taken */
    Tracker *taken;    /* the segments taken before (NULL: none): the run's, with tracker */
    PipelineSegment seg_base; /* the run's counts when the last segment was taken (with
                                 those that earlier runs accounted for) */
    double seg_at;            /* when it was taken (monotime_s; pipeline_open at first) */
    PipelineSegment returned; /* taken but not recorded (pipeline_return_segment): the next
                                 segment taken carries it; its delays in returned_delays */
    Tracker *returned_delays;
    Tracker *held;   /* pipeline_hold_expired: the expired rows (not inserted) counted since,
                        out of every segment until pipeline_release_held (NULL: none held) */
    double held_at;  /* when holding began (monotime_s) */
    Granularity gran;  /* window size for rows whose partition does not exist yet */
    TimeParser *wzone; /* --window-tz of those windows (NULL: UTC) */
    Sink *sink;
    PgConn *ddl_conn;    /* partitions while a piece's transaction is open (lazily) */
    SinkConfig sink_cfg; /* the attached source's, for the other lanes' sinks */
    uint64_t merge_key_moves_upto; /* pipeline_merge_key_moves (SinkConfig) */
    uint64_t merge_before_xid;
    Batch *bufs;        /* jobs + 1: one filling, one with each lane */
    size_t nbufs;
    Batch *batch;       /* the batch being filled */
    Writer w;
    pthread_rwlock_t catalog_lock; /* target's partitions: written by partition creation */
    Buf ref;
    EnsureOptions ensure;
    int64_t now_us;
    DayCache day_cache;
    bool lookup_exists;
    LookupShape lookup_shape; /* the lookup's key column (ordered keys only in ref_key) */
    int map_bits;             /* LOOKUP_LEGACY_ID: legacy_id's width (16, 32, 64) */
    SinkStats sink_total;
    /* per source */
    Source *src;
    const char *src_name;
    bool unnamed_last;
    PipelineHooks hooks;
    SourceColumn *cols;
    size_t ncols;
    int time_idx;
    int id_idx;
    int key_map_idx; /* --key-map's source column; -1: none */
    int unnamed_idx; /* the header's unnamed last column, neither ignored nor mapped; -1 */
    int time_target; /* created_at, given the event time when no input column of that
                        name stores it; -1: none */
    SrcrefTemplate *tmpl;
    RefSet *plan_seen;  /* plan: the references counted as inserted so far (writer) */
    int64_t *times;
    size_t times_cap;
    /* progress */
    double started;
    double last_progress;
    double src_started; /* when reading of the current source began (after any resume seek) */
    uint64_t src_done0; /* the source's progress position then */
};

static int64_t
wall_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void
pipeline_options_default(PipelineOptions *o)
{
    memset(o, 0, sizeof *o);
    o->batch_rows = DEFAULT_BATCH_ROWS;
    o->batch_bytes = DEFAULT_BATCH_BYTES;
    o->max_rejects = UINT64_MAX;
    o->max_rejects_pct = -1;
    o->max_future_us = 5 * US_PER_MIN;
    o->granularity = GRAN_AUTO;
    o->lock_timeout_ms = 5000;
    o->reconnect_attempts = 5;
    o->jobs = 1;
    o->analyze = true;
}

bool
import_stats_balanced(const ImportStats *st)
{
    return st->read == st->inserted + st->duplicates + st->rejected + st->expired + st->updated +
                           st->deleted + st->missing_deletes;
}

void
import_stats_add_counts(ImportStats *a, const ImportStats *b)
{
    a->read += b->read;
    a->inserted += b->inserted;
    a->duplicates += b->duplicates;
    a->rejected += b->rejected;
    a->expired += b->expired;
    a->updated += b->updated;
    a->deleted += b->deleted;
    a->missing += b->missing;
    a->missing_deletes += b->missing_deletes;
    a->time_changed += b->time_changed;
    a->truncates += b->truncates;
    a->batches += b->batches;
    a->partitions_created += b->partitions_created;
    a->closing_s += b->closing_s;
}

double
import_stats_rate(const ImportStats *st)
{
    if (st->elapsed_s <= 0)
        return 0;
    return (double) (st->read - st->read_resumed) / st->elapsed_s;
}

void
import_stats_free(ImportStats *st)
{
    free(st->reasons);
    free(st->windows);
    free(st->delay_json);
    buf_free(&st->ddl);
    memset(st, 0, sizeof *st);
}

/* ---- statistics ---------------------------------------------------------- */

static void
stats_reason(ImportStats *st, const char *category, const char *example)
{
    for (size_t i = 0; i < st->nreasons; i++)
    {
        if (strcmp(st->reasons[i].reason, category) == 0)
        {
            st->reasons[i].count++;
            return;
        }
    }
    st->reasons = xrealloc(st->reasons, (st->nreasons + 1) * sizeof *st->reasons);
    memset(&st->reasons[st->nreasons], 0, sizeof *st->reasons);
    (void) snprintf(st->reasons[st->nreasons].reason, sizeof st->reasons[0].reason, "%s",
                    category);
    (void) snprintf(st->reasons[st->nreasons].example, sizeof st->reasons[0].example, "%s",
                    example);
    st->reasons[st->nreasons].count = 1;
    st->nreasons++;
}

/* The window of `us` when no partition holds it yet: the one it would be
 * created as (granularity and --window-tz as the partitions stage uses). */
static void
pipeline_window_of(const Pipeline *pl, int64_t us, int64_t *lo, int64_t *hi)
{
    Window w;
    Err ignored = {0};

    if (pl->wzone != NULL && window_at(pl->gran, pl->wzone, us, &w, &ignored))
    {
        *lo = w.lower_us;
        *hi = w.upper_us;
        return;
    }
    window_of(pl->gran, us, lo, hi);
}

static WindowCount *
stats_window(Pipeline *pl, int64_t us)
{
    ImportStats *st = pl->st;
    const Partition *p = catalog_partition_for(pl->target, us);
    int64_t lo;
    int64_t hi;
    size_t a = 0;
    size_t b = st->nwindows;

    if (p)
    {
        lo = p->lower_us;
        hi = p->upper_us;
    }
    else
        pipeline_window_of(pl, us, &lo, &hi);
    while (a < b)
    {
        size_t m = (a + b) / 2;
        if (st->windows[m].lower_us < lo)
            a = m + 1;
        else
            b = m;
    }
    if (a < st->nwindows && st->windows[a].lower_us == lo)
        return &st->windows[a];
    st->windows = xrealloc(st->windows, (st->nwindows + 1) * sizeof *st->windows);
    memmove(&st->windows[a + 1], &st->windows[a], (st->nwindows - a) * sizeof *st->windows);
    memset(&st->windows[a], 0, sizeof *st->windows);
    st->windows[a].lower_us = lo;
    st->windows[a].upper_us = hi;
    if (p)
        (void) snprintf(st->windows[a].partition, sizeof st->windows[a].partition, "%s", p->name);
    else
        st->windows[a].created = true; /* plan: no partition yet, it would be created */
    st->nwindows++;
    return &st->windows[a];
}

/* ---- mapping ------------------------------------------------------------- */

static bool
name_listed(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0)
            return true;
    return false;
}

static bool
is_timestamp_type(const char *type)
{
    return strncmp(type, "timestamp", 9) == 0;
}

/*
 * pipeline_map_columns decides, for each source column, which target column
 * receives it, and builds the COPY column list: the key column first, then the
 * mapped columns in source order.
 */
static void
pipeline_free_cols_q(Pipeline *pl)
{
    for (size_t i = 0; i < pl->ncols_q; i++)
        free(pl->cols_q[i]);
    free(pl->cols_q);
    pl->cols_q = NULL;
    pl->ncols_q = 0;
}

static bool
pipeline_map_columns(Pipeline *pl, Err *err)
{
    const PipelineOptions *o = pl->o;
    TargetTable *t = pl->target;
    size_t ncols = 0;
    const char *const *names = pl->src->ops->columns(pl->src, &ncols);
    bool *written = xcalloc(t->ncolumns, sizeof *written);
    int key_idx = catalog_column_index(t, t->key_column);
    Buf cols;
    bool ok = false;

    free(pl->cols);
    pl->cols = xcalloc(ncols ? ncols : 1, sizeof *pl->cols);
    pl->ncols = ncols;
    pl->time_idx = -1;
    pl->id_idx = -1;
    pl->key_map_idx = -1;
    pl->unnamed_idx = -1;
    pl->time_target = -1;

    for (size_t m = 0; m < o->nmaps; m++)
    {
        bool found = false;
        for (size_t i = 0; i < ncols; i++)
            found = found || strcmp(names[i], o->maps[m].from) == 0;
        if (!found)
        {
            char pf[256];
            char pt[256];
            err_set(err, EC_USAGE, "--map %s=%s: %s has no column \"%s\"",
                    err_printable(o->maps[m].from, pf, sizeof pf),
                    err_printable(o->maps[m].to, pt, sizeof pt), pl->src_name, pf);
            goto out;
        }
    }
    for (size_t k = 0; k < o->nignore; k++)
    {
        bool found = false;
        for (size_t i = 0; i < ncols; i++)
            found = found || strcmp(names[i], o->ignore[k]) == 0;
        if (!found)
        {
            char pn[256];
            err_set(err, EC_USAGE, "--ignore-column %s: %s has no column \"%s\"",
                    err_printable(o->ignore[k], pn, sizeof pn), pl->src_name, pn);
            goto out;
        }
    }
    for (size_t i = 0; i < ncols; i++)
    {
        const char *to = names[i];
        int ti;
        char pn[256]; /* names[i] fit for a message: header names are untrusted */

        err_printable(names[i], pn, sizeof pn);
        pl->cols[i].target = -1;
        if (o->time_column ? strcmp(names[i], o->time_column) == 0
                           : strcmp(names[i], "created_at") == 0)
        {
            pl->cols[i].is_time = true;
            pl->time_idx = (int) i;
        }
        if (o->key_map_column && pl->key_map_idx < 0 && strcmp(names[i], o->key_map_column) == 0)
            pl->key_map_idx = (int) i;
        if (o->id_column && strcmp(names[i], o->id_column) == 0)
        {
            pl->cols[i].is_id = true;
            pl->id_idx = (int) i;
            continue;
        }
        if (name_listed(names[i], o->ignore, o->nignore))
            continue;
        for (size_t m = 0; m < o->nmaps; m++)
            if (strcmp(o->maps[m].from, names[i]) == 0)
                to = o->maps[m].to;
        if (to == names[i] && i + 1 == ncols && pl->unnamed_last)
        {
            /* "a,b,c," in the header: rows must leave the column empty. */
            pl->unnamed_idx = (int) i;
            continue;
        }
        ti = catalog_column_index(t, to);
        if (ti < 0)
        {
            if (pl->cols[i].is_time)
                continue; /* the event time need not be stored */
            char pt[256];
            err_set(err, EC_USAGE, "column \"%s\" of %s has no target column \"%s\" in %s.%s", pn,
                    pl->src_name, err_printable(to, pt, sizeof pt), t->schema, t->name);
            err_hint(err, "Map it with --map %s=TARGET_COLUMN or skip it with --ignore-column %s.",
                     pn, pn);
            goto out;
        }
        if (ti == key_idx)
        {
            err_set(err, EC_USAGE,
                    "column \"%s\" of %s would write the partition key \"%s\", which v7fill mints",
                    pn, pl->src_name, t->key_column);
            err_hint(err, "Use --id-column %s to keep valid UUIDv7 ids from the input, "
                          "--map %s=COLUMN to keep it in another column (a legacy integer key, "
                          "say), or --ignore-column %s.",
                     pn, pn, pn);
            goto out;
        }
        if (t->columns[ti].generated)
        {
            err_set(err, EC_USAGE, "target column \"%s\" is generated and cannot be written",
                    t->columns[ti].name);
            goto out;
        }
        if (written[ti])
        {
            err_set(err, EC_USAGE, "target column \"%s\" receives two source columns", to);
            goto out;
        }
        written[ti] = true;
        pl->cols[i].target = ti;
        pl->cols[i].format_time = pl->cols[i].is_time && is_timestamp_type(t->columns[ti].type);
    }
    if (o->time_column && pl->time_idx < 0)
    {
        err_set(err, EC_USAGE, "--time-column %s: %s has no such column", o->time_column,
                pl->src_name);
        goto out;
    }
    if (pl->time_idx < 0 && pl->id_idx < 0)
    {
        err_set(err, EC_USAGE, "%s has no event time column", pl->src_name);
        err_hint(err, "Name it with --time-column (the default is created_at), or give ids "
                      "with --id-column.");
        goto out;
    }
    if (o->key_map_column && pl->key_map_idx < 0)
    {
        char pn[256];
        err_set(err, EC_USAGE, "--key-map %s: %s has no such column",
                err_printable(o->key_map_column, pn, sizeof pn), pl->src_name);
        goto out;
    }
    if (o->id_column && pl->id_idx < 0)
    {
        err_set(err, EC_USAGE, "--id-column %s: %s has no such column", o->id_column,
                pl->src_name);
        goto out;
    }
    if (pl->time_idx < 0 || !pl->cols[pl->time_idx].format_time)
    {
        /* The event time is not stored as an instant (ids alone,
         * --time-column naming a column the target lacks, or one mapped to a
         * text column): the target's own time column, created_at, gets it
         * when no input column fills it. */
        int ti = catalog_column_index(t, "created_at");

        if (ti >= 0 && ti != key_idx && !written[ti] && !t->columns[ti].generated &&
            is_timestamp_type(t->columns[ti].type))
        {
            written[ti] = true;
            pl->time_target = ti;
        }
    }
    for (size_t ti = 0; ti < t->ncolumns; ti++)
    {
        if ((int) ti == key_idx || written[ti])
            continue;
        if (t->columns[ti].not_null && !t->columns[ti].has_default)
        {
            err_set(err, EC_USAGE,
                    "target column \"%s\" is NOT NULL without a default and %s has no value "
                    "for it",
                    t->columns[ti].name, pl->src_name);
            err_hint(err, "Map a source column to it with --map SOURCE=%s.", t->columns[ti].name);
            goto out;
        }
    }
    buf_init(&cols);
    buf_putc(&cols, '(');
    free(pl->key_q);
    pl->key_q = pg_ident(pl->conn, t->key_column);
    buf_puts(&cols, pl->key_q);
    pipeline_free_cols_q(pl);
    pl->cols_q = xcalloc(ncols + 2, sizeof *pl->cols_q);
    pl->cols_q[pl->ncols_q++] = xstrdup(pl->key_q);
    for (size_t i = 0; i < ncols; i++)
    {
        if (pl->cols[i].target >= 0)
        {
            char *q = pg_ident(pl->conn, t->columns[pl->cols[i].target].name);
            buf_puts(&cols, ", ");
            buf_puts(&cols, q);
            pl->cols_q[pl->ncols_q++] = q;
        }
    }
    if (pl->time_target >= 0)
    {
        char *q = pg_ident(pl->conn, t->columns[pl->time_target].name);
        buf_puts(&cols, ", ");
        buf_puts(&cols, q);
        pl->cols_q[pl->ncols_q++] = q;
    }
    buf_putc(&cols, ')');
    free(pl->copy_cols);
    pl->copy_cols = cols.data;
    srcref_template_free(pl->tmpl);
    pl->tmpl = NULL;
    if (o->source_ref && !srcref_template_compile(o->source_ref, names, ncols, &pl->tmpl, err))
        goto out;
    ok = true;
out:
    free(written);
    return ok;
}

/* ---- per record ---------------------------------------------------------- */

/* A record longer than this has its default reference hashed in pieces
 * when only a prefix of the text is kept (pipeline_add_record). */
#define REF_STREAM_MIN ((size_t) 1 << 20)
/* The prefix kept: what the tracker's examples show, a UTF-8 sequence, and
 * one byte more: a reference kept at this length was cut (pipeline_track). */
#define REF_PREFIX_MAX (TRACKER_REF_MAX + 5)

typedef struct RefStream
{
    IdKeyer *keyer;
    Buf *prefix;
} RefStream;

static void
ref_stream_piece(void *ctx, const char *data, size_t len)
{
    RefStream *rs = ctx;

    id_keyer_hmac_add(rs->keyer, data, len);
    if (len > 0 && rs->prefix->len < REF_PREFIX_MAX)
        buf_append(rs->prefix, data,
                   len < REF_PREFIX_MAX - rs->prefix->len ? len : REF_PREFIX_MAX - rs->prefix->len);
}

static const char *
reject_category(const char *reason)
{
    /* Prefixes the pipeline writes first, then what the sources say. */
    static const char *const prefixes[] = {
        "unparsable time", "missing event time", "clock ahead", "time out of range",
        "update of a row the target does not have",
    };
    static const char *const known[] = {
        "not a UUIDv7", "invalid UUID", "nil UUID", "invalid UTF-8", "NUL byte", "quote character",
        "the header leaves unnamed",
    };

    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(reason, prefixes[i], strlen(prefixes[i])) == 0)
            return prefixes[i];
    if (strncmp(reason, "expected ", 9) == 0 && strstr(reason, " fields, found "))
        return "wrong field count";
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strstr(reason, known[i]))
            return known[i];
    return "invalid record";
}

static void
pipeline_client_reject(Pipeline *pl, BatchRow *r, const char *category, const char *reason)
{
    char full[512];
    (void) category;
    (void) snprintf(full, sizeof full, "%s", reason);
    batch_reject(pl->batch, r, full, NULL);
    r->client_decided = true;
}

/* Rows of one reference in reading order (the batch's rows are in an array). */
static int
row_cmp_address(const void *a, const void *b)
{
    const BatchRow *x = *(BatchRow *const *) a;
    const BatchRow *y = *(BatchRow *const *) b;
    return x < y ? -1 : x > y;
}

/*
 * pipeline_mark_repeats: rows of the batch with the same reference are one
 * row.  The first one read is written; each later one waits behind the one
 * read before it (repeat_next) as a duplicate, and takes its place if that
 * one does not land (refused by the server: sink_settle).  Rows expired or
 * rejected already take no part, and so do row operations other than inserts:
 * repeats chain only inserts of one run (BatchRow.run, no other operation
 * between them).  Found by sorting the pending rows by hash (writer thread:
 * the reader keeps no set).
 */
static void
pipeline_mark_repeats(SortWork *sort, Batch *b)
{
    size_t n = 0;

    if (b->by_hash_cap < b->nrows)
    {
        b->by_hash_cap = b->nrows;
        b->by_hash = xrealloc(b->by_hash, b->by_hash_cap * sizeof *b->by_hash);
    }
    for (size_t i = 0; i < b->nrows; i++)
        if (b->rows[i].outcome == ROW_PENDING && b->rows[i].op == REC_INSERT)
            b->by_hash[n++] = &b->rows[i];
    batch_rows_sort(sort, b->by_hash, n, BATCH_BY_HASH);
    b->by_hash_n = n;
    for (size_t i = 0; i < n;)
    {
        size_t j = i + 1;

        while (j < n && memcmp(b->by_hash[j]->hash, b->by_hash[i]->hash, REF_HASH_LEN) == 0)
            j++;
        if (j - i > 1)
            qsort(b->by_hash + i, j - i, sizeof *b->by_hash, row_cmp_address);
        for (size_t k = i + 1; k < j; k++)
        {
            BatchRow *repeat = b->by_hash[k];

            if (repeat->run != b->by_hash[k - 1]->run)
                continue; /* another insert run: an operation between them decides */
            b->by_hash[k - 1]->repeat_next = (uint32_t) (repeat - b->rows) + 1;
            repeat->outcome = ROW_DUPLICATE;
            repeat->client_decided = true;
            repeat->repeat = true;
        }
        i = j;
    }
}

static char *
put_digits(char *p, int value, int width)
{
    for (int i = width - 1; i >= 0; i--)
    {
        p[i] = (char) ('0' + value % 10);
        value /= 10;
    }
    return p + width;
}

#define DIGIT_PAIRS(d) d "0" d "1" d "2" d "3" d "4" d "5" d "6" d "7" d "8" d "9"
/* "00" to "99": two digits by one lookup, for the parts of a time */
static const char digit_pairs[201] = DIGIT_PAIRS("0") DIGIT_PAIRS("1") DIGIT_PAIRS("2")
    DIGIT_PAIRS("3") DIGIT_PAIRS("4") DIGIT_PAIRS("5") DIGIT_PAIRS("6") DIGIT_PAIRS("7")
        DIGIT_PAIRS("8") DIGIT_PAIRS("9");

/* value in 0..99 as two digits */
static inline char *
put2(char *p, int value)
{
    memcpy(p, digit_pairs + 2 * value, 2);
    return p + 2;
}

/* "YYYY-MM-DD HH:MM:SS.ffffff+00": on the hot path of every row with a time
 * column, so written without snprintf. */
static void
format_event_time(Buf *out, int64_t us, DayCache *dc)
{
    int64_t day = civil_floor_div(us, US_PER_DAY);
    int64_t rem = us - day * US_PER_DAY;
    char *p;

    if (day != dc->day)
    {
        CivilTime ct;

        civil_from_us(us, &ct);
        if (ct.year < 0 || ct.year > 9999)
        {
            char text[48];
            civil_format_rfc3339(us, true, text, sizeof text);
            buf_puts(out, text);
            return;
        }
        p = put_digits(dc->text, ct.year, 4);
        *p++ = '-';
        p = put_digits(p, ct.month, 2);
        *p++ = '-';
        p = put_digits(p, ct.day, 2);
        *p = ' ';
        dc->day = day;
    }
    buf_reserve(out, 32);
    p = out->data + out->len;
    memcpy(p, dc->text, sizeof dc->text);
    p += sizeof dc->text;
    {
        int sec = (int) (rem / US_PER_SEC);
        int frac = (int) (rem % US_PER_SEC);

        p = put2(p, sec / 3600);
        *p++ = ':';
        p = put2(p, sec / 60 % 60);
        *p++ = ':';
        p = put2(p, sec % 60);
        *p++ = '.';
        p = put2(p, frac / 10000);
        p = put2(p, frac / 100 % 100);
        p = put2(p, frac % 100);
    }
    memcpy(p, "+00", 3);
    p += 3;
    out->len = (size_t) (p - out->data);
    out->data[out->len] = '\0';
}

/* The old reference of an update whose key changed (Record.old_fields): its
 * lookup key; *has_old = true. */
/* The key map's key of a record's fields (--key-map): its hash, and its
 * reference (the integer in decimal) in pl->ref; false: reason says why the
 * row is rejected. */
static bool
pipeline_map_key(Pipeline *pl, const Field *fields, uint8_t hash[REF_HASH_LEN], char *reason,
                 size_t reason_size)
{
    const Field *f = &fields[pl->key_map_idx];
    char pn[128];
    int64_t v;

    buf_reset(&pl->ref);
    if (!lookup_map_key_parse(err_printable(pl->o->key_map_column, pn, sizeof pn), f->data,
                              f->len, f->is_null, pl->map_bits, &v, hash, reason, reason_size))
        return false;
    /* The decimal text by hand: printf's was an eighth of the client's work per row. */
    {
        char digits[24];
        char *p = digits + sizeof digits;
        uint64_t mag = v < 0 ? -(uint64_t) v : (uint64_t) v;

        do
            *--p = (char) ('0' + mag % 10);
        while ((mag /= 10) != 0);
        if (v < 0)
            *--p = '-';
        buf_append(&pl->ref, p, (size_t) (digits + sizeof digits - p));
    }
    return true;
}

static bool
pipeline_old_ref(Pipeline *pl, const Record *rec, uint8_t hash[REF_HASH_LEN], bool *has_old,
                 Err *err)
{
    uint8_t mac[32];

    buf_reset(&pl->ref);
    if (pl->tmpl)
        srcref_build(pl->tmpl, rec->old_fields, rec->nfields, &pl->ref);
    else
        srcref_default(rec->old_fields, rec->nfields, &pl->ref);
    if (!id_keyer_hmac(pl->keyer, pl->ref.data, pl->ref.len, mac, err))
        return false;
    (void) srcref_key(pl->ref.data, pl->ref.len, mac, pl->lookup_shape == LOOKUP_REF_KEY, hash);
    *has_old = true;
    return true;
}

/* An update's map of the COPY line's fields sent (BatchRow.sent_off), all set
 * to start with; NULL (sent_off UINT32_MAX: all of them) when every field came. */
static uint8_t *
pipeline_sent_map(Pipeline *pl, const Record *rec, BatchRow *r)
{
    size_t nfields = 1 + (pl->time_target >= 0 ? 1 : 0);
    bool all = r->complete;
    size_t off;

    r->sent_off = UINT32_MAX;
    for (size_t i = 0; i < pl->ncols; i++)
        if (pl->cols[i].target >= 0)
        {
            nfields++;
            all = all && !rec->fields[i].unchanged;
        }
    if (all)
        return NULL;
    off = pl->batch->aux.len;
    buf_reserve(&pl->batch->aux, (nfields + 7) / 8);
    memset(pl->batch->aux.data + off, 0xff, (nfields + 7) / 8);
    pl->batch->aux.len += (nfields + 7) / 8;
    r->sent_off = (uint32_t) off;
    return (uint8_t *) pl->batch->aux.data + off;
}

/*
 * pipeline_copy_line: the row's COPY line (its id, then the mapped fields).
 * minted: r->id and us are the row's (an update without its time has
 * neither: its time columns are not sent).
 */
static bool
pipeline_copy_line(Pipeline *pl, const Record *rec, BatchRow *r, int64_t us, bool minted,
                   Err *err)
{
    Batch *b = pl->batch;

    /* The target's COPY line: id, then the mapped fields. */
    {
        Buf *d = &b->data;
        char idtext[UUID_TEXT_SIZE];
        size_t start = d->len;
        size_t fi = 0; /* the field's number in the line (0: the id) */
        uint8_t *sent = NULL;

        if (rec->op == REC_UPDATE)
        {
            r->complete = minted;
            sent = pipeline_sent_map(pl, rec, r);
        }
        uuid_format(&r->id, idtext);
        buf_append(d, idtext, UUID_TEXT_LEN);
        for (size_t i = 0; i < pl->ncols; i++)
        {
            const Field *f = &rec->fields[i];
            if (pl->cols[i].target < 0)
                continue;
            copy_encode_sep(d);
            fi++;
            if (sent && (f->unchanged || (pl->cols[i].format_time && !minted)))
            {
                /* not sent: the target keeps its value (only an update has these) */
                buf_append(d, "\\N", 2);
                sent[fi / 8] &= (uint8_t) ~(1u << (fi % 8));
                r->complete = false;
            }
            else if (pl->cols[i].format_time)
                format_event_time(d, us, &pl->day_cache);
            else if (rec->copy_plain && !f->is_null)
                buf_append(d, f->data, f->len); /* nothing to escape: the source said so */
            else
                copy_encode_field(d, f->data, f->len, f->is_null);
        }
        if (pl->time_target >= 0 && !minted)
        {
            copy_encode_sep(d);
            buf_append(d, "\\N", 2);
            fi++;
            sent[fi / 8] &= (uint8_t) ~(1u << (fi % 8)); /* !minted: an update's map */
        }
        else if (pl->time_target >= 0)
        {
            /* An id's time to the millisecond: below it, ids made elsewhere
             * may carry random bits rather than a fraction (RFC 9562). */
            copy_encode_sep(d);
            format_event_time(d,
                              pl->time_idx < 0 ? civil_floor_div(us, US_PER_MS) * US_PER_MS : us,
                              &pl->day_cache);
        }
        copy_encode_eol(d);
        r->copy_off = (uint32_t) start;
        r->copy_len = (uint32_t) (d->len - start);
    }
    /* A batch is full before BATCH_MAX_BYTES; one record (at most 256 MiB of
     * input, twice that escaped) cannot carry it past 32-bit offsets. */
    if (b->data.len > UINT32_MAX || b->aux.len > UINT32_MAX)
    {
        char at[300];
        pl->hooks.origin(pl->hooks.ctx, rec->line, at, sizeof at);
        return err_set(err, EC_INTERNAL, "%s: a batch outgrew 4 GiB", at);
    }
    return true;
}

/*
 * pipeline_add_record classifies one record into the batch: a client-side
 * reject, an in-batch duplicate, or a pending row with its id and COPY line.
 */
static bool
pipeline_add_record(Pipeline *pl, const Record *rec, Err *err)
{
    Batch *b = pl->batch;
    BatchRow *r = batch_add(b);
    Err rerr; /* 2.5 KiB: set by whatever fails, not cleared for every row */
    uint8_t mac[32];
    uint64_t bits = 0;
    int64_t us = 0;
    bool have_time = false;

    r->src_line = rec->line;
    r->raw_off = (uint32_t) batch_store(b, rec->raw ? rec->raw : "", rec->raw ? rec->raw_len : 0);
    r->raw_len = (uint32_t) (rec->raw ? rec->raw_len : 0);
    r->op = rec->op;
    r->run = b->nchanges;
    if (rec->op != REC_INSERT)
    {
        b->nchanges++;
        if (rec->op == REC_TRUNCATE)
            return true; /* not a row: the sink empties the target there */
        if (rec->op != REC_UPDATE && rec->op != REC_DELETE)
            return err_set(err, EC_INTERNAL, "%s: unknown record operation %u", pl->src_name,
                           (unsigned) rec->op);
    }

    if (rec->error)
    {
        pipeline_client_reject(pl, r, NULL, rec->error);
        return true;
    }
    if (pl->unnamed_idx >= 0 && rec->fields[pl->unnamed_idx].len > 0)
    {
        char reason[200];
        (void) snprintf(reason, sizeof reason,
                        "a value in column %d, which the header leaves unnamed "
                        "(--ignore-column c%d drops it, --map c%d=COLUMN keeps it)",
                        pl->unnamed_idx + 1, pl->unnamed_idx + 1, pl->unnamed_idx + 1);
        pipeline_client_reject(pl, r, NULL, reason);
        return true;
    }
    /* A delete needs only its reference; an update its time only when sent. */
    if (pl->time_idx >= 0 && rec->op != REC_DELETE &&
        !(rec->op == REC_UPDATE && rec->fields[pl->time_idx].unchanged))
    {
        const Field *f = &rec->fields[pl->time_idx];
        if (f->is_null || f->len == 0)
        {
            pipeline_client_reject(pl, r, NULL, "missing event time");
            return true;
        }
        if (!time_parse(pl->tparser, f->data, f->len, &us, &rerr))
        {
            char reason[sizeof rerr.msg + 32];
            (void) snprintf(reason, sizeof reason, "unparsable time: %s", rerr.msg);
            pipeline_client_reject(pl, r, NULL, reason);
            return true;
        }
        have_time = true;
        r->time_sent = rec->op == REC_UPDATE;
    }
    if (rec->op == REC_UPDATE && rec->old_fields && pl->key_map_idx >= 0)
    {
        char reason[200];

        if (!pipeline_map_key(pl, rec->old_fields, r->old_hash, reason, sizeof reason))
        {
            pipeline_client_reject(pl, r, NULL, reason);
            return true;
        }
        r->has_old = true;
    }
    else if (rec->op == REC_UPDATE && rec->old_fields &&
             !pipeline_old_ref(pl, rec, r->old_hash, &r->has_old, err))
        return false;

    /* Source reference → keyed hash: the lookup key and the id's random bits.
     * Its text is read again only by the lookup (--keep-ref-text) and the
     * late-rows output (a retention); otherwise the tracker's examples keep a
     * prefix, and the default reference of a long record is hashed in
     * pieces: a record of 50 MB is not copied twice more. */
    bool ref_prefix = !pl->o->keep_ref_text && pl->st->retention_us == 0;
    buf_reset(&pl->ref);
    if (pl->key_map_idx >= 0)
    {
        /* The key map: the key is the integer, the reference its decimal text. */
        char reason[200];

        if (!pipeline_map_key(pl, rec->fields, r->hash, reason, sizeof reason))
        {
            pipeline_client_reject(pl, r, NULL, reason);
            return true;
        }
        if (!id_keyer_hmac(pl->keyer, pl->ref.data, pl->ref.len, mac, err))
            return false;
        r->key_ordered = true;
    }
    else if (ref_prefix && !pl->tmpl && rec->raw_len > REF_STREAM_MIN)
    {
        RefStream rs = {pl->keyer, &pl->ref};

        id_keyer_hmac_begin(pl->keyer);
        srcref_default_each(rec->fields, rec->nfields, ref_stream_piece, &rs);
        if (!id_keyer_hmac_end(pl->keyer, mac, err))
            return false;
        /* It ends in ',': never an ordered key. */
        r->key_ordered = srcref_key(NULL, 0, mac, false, r->hash);
    }
    else
    {
        if (pl->tmpl)
            srcref_build(pl->tmpl, rec->fields, rec->nfields, &pl->ref);
        else
            srcref_default(rec->fields, rec->nfields, &pl->ref);
        if (!id_keyer_hmac(pl->keyer, pl->ref.data, pl->ref.len, mac, err))
            return false;
        r->key_ordered = srcref_key(pl->ref.data, pl->ref.len, mac,
                                    pl->lookup_shape == LOOKUP_REF_KEY, r->hash);
    }
    for (int i = 0; i < 8; i++)
        bits = (bits << 8) | mac[REF_HASH_LEN + i];
    {
        size_t keep = pl->ref.len;
        if (ref_prefix && keep > REF_PREFIX_MAX)
            keep = REF_PREFIX_MAX;
        r->ref_off = (uint32_t) batch_store(b, pl->ref.data, keep);
        r->ref_len = (uint32_t) keep;
    }
    if (r->has_old)
        r->has_old = memcmp(r->old_hash, r->hash, REF_HASH_LEN) != 0;
    if (rec->op == REC_DELETE)
        return true; /* found by its reference alone */

    bool keep_id = false;
    if (pl->id_idx >= 0 && !(rec->fields[pl->id_idx].is_null || rec->fields[pl->id_idx].len == 0))
    {
        /* The input carries an id: keep it if it is a UUIDv7, reject it otherwise.
         * An empty id is minted like any row without one. */
        const Field *f = &rec->fields[pl->id_idx];
        if (!uuid_parse(f->data, f->len, &r->id, &rerr) || !uuid7_check(&r->id, &rerr))
        {
            pipeline_client_reject(pl, r, NULL, rerr.msg);
            return true;
        }
        keep_id = true;
        r->id_given = true;
        if (!have_time)
            us = uuid7_us(&r->id);
        have_time = true;
    }
    if (!have_time && rec->op == REC_UPDATE)
        return pipeline_copy_line(pl, rec, r, us, false, err); /* found by its reference */
    if (!have_time)
    {
        pipeline_client_reject(pl, r, NULL, "missing event time: no time column and no id");
        return true;
    }
    if (us > pl->now_us + pl->o->max_future_us)
    {
        char t[48];
        char reason[160];
        civil_format_rfc3339(us, true, t, sizeof t);
        (void) snprintf(reason, sizeof reason,
                        "clock ahead: event time %s is beyond now + --max-future", t);
        pipeline_client_reject(pl, r, NULL, reason);
        return true;
    }
    if (!keep_id && !uuid7_from_us(us, bits, &r->id, &rerr))
    {
        char reason[sizeof rerr.msg + 32];
        (void) snprintf(reason, sizeof reason, "time out of range: %s", rerr.msg);
        pipeline_client_reject(pl, r, NULL, reason);
        return true;
    }
    r->time_us = keep_id ? uuid7_us(&r->id) : us;
    if (r->time_us >= WINDOW_MAX_US)
    {
        /* Valid UUIDv7 times up to year 10889, but no partition window
         * covers them: one row's typo must not stop its batch. */
        char t[48];
        char reason[160];
        civil_format_rfc3339(r->time_us, true, t, sizeof t);
        (void) snprintf(reason, sizeof reason,
                        "time out of range: time %s is past the year 9999 that windows cover", t);
        pipeline_client_reject(pl, r, NULL, reason);
        return true;
    }

    if (rec->op == REC_UPDATE)
        r->time_us = us;
    return pipeline_copy_line(pl, rec, r, us, true, err);
}

/* ---- retention ----------------------------------------------------------- */

/*
 * pipeline_classify puts every pending row of the batch in its window and
 * classifies it against the retention.  Expired rows are not written (unless
 * --keep-expired) and so never cause a partition to be created.
 */
static void
pipeline_classify(Pipeline *pl, Batch *b)
{
    int64_t now = pl->o->now_us ? pl->o->now_us : wall_now_us();
    /* the window of the row before, and its class: rows come in runs */
    int64_t lo = 0;
    int64_t hi = 0;
    DelayClass c = DELAY_ON_TIME;

    pthread_rwlock_rdlock(&pl->catalog_lock);
    for (size_t i = 0; i < b->nrows; i++)
    {
        BatchRow *r = &b->rows[i];

        /* An update only where its row may be inserted (missing), and never expired:
         * the row it finds is updated wherever it is. */
        if (r->outcome != ROW_PENDING || (r->op != REC_INSERT && !r->complete))
            continue;
        if (r->time_us >= lo && r->time_us < hi)
        {
            r->window_lower_us = lo;
            r->window_upper_us = hi;
        }
        else
        {
            const Partition *p = catalog_partition_for(pl->target, r->time_us);

            if (p)
            {
                r->window_lower_us = p->lower_us;
                r->window_upper_us = p->upper_us;
            }
            else
                pipeline_window_of(pl, r->time_us, &r->window_lower_us, &r->window_upper_us);
            c = tracker_classify(pl->tracker, r->window_upper_us, now, NULL);
            /* Only a partition's bounds are reused: a window without one may
             * still hold a partition covering part of it. */
            lo = p ? p->lower_us : 0;
            hi = p ? p->upper_us : 0;
        }
        r->delay_class = (uint8_t) c;
        if (c == DELAY_EXPIRED && !pl->o->keep_expired && r->op == REC_INSERT)
        {
            r->outcome = ROW_EXPIRED;
            r->client_decided = true;
        }
    }
    pthread_rwlock_unlock(&pl->catalog_lock);
}

/* Late rows to the owner's output (inside the batch's transaction). */
static bool
pipeline_write_late(Pipeline *pl, const Batch *b, Err *err)
{
    int64_t now = pl->o->now_us ? pl->o->now_us : wall_now_us();

    for (size_t i = 0; i < b->nrows; i++)
    {
        const BatchRow *r = &b->rows[i];
        char id[UUID_TEXT_SIZE];
        char event[48];
        char delay[48];
        char left[48];
        char *ref;
        LateRow row;
        bool ok;
        int64_t time_left;

        if (r->delay_class == DELAY_ON_TIME ||
            (r->outcome != ROW_INSERTED && r->outcome != ROW_EXPIRED))
            continue;
        (void) tracker_classify(pl->tracker, r->window_upper_us, now, &time_left);
        uuid_format(&r->id, id);
        civil_format_rfc3339(r->time_us, true, event, sizeof event);
        duration_format(now - r->time_us, delay, sizeof delay);
        duration_format(time_left, left, sizeof left);
        ref = xstrndup(b->aux.data + r->ref_off, r->ref_len);
        row.origin = r->src_line;
        row.delay_class = r->delay_class == DELAY_EXPIRED
                              ? (r->outcome == ROW_INSERTED ? "expired (kept)" : "expired")
                              : "near cutoff";
        row.id = id;
        row.event_time = event;
        row.delay = delay;
        row.time_left = left;
        row.source_ref = ref;
        ok = pl->hooks.late(pl->hooks.ctx, &row, err);
        free(ref);
        if (!ok)
            return false;
    }
    return true;
}

/* ---- batch commit -------------------------------------------------------- */

static void
batch_totals(const Batch *b, BatchCounts *t)
{
    memset(t, 0, sizeof *t);
    t->read = b->nrows;
    for (size_t i = 0; i < b->nrows; i++)
    {
        const BatchRow *r = &b->rows[i];

        t->missing += r->missing;
        t->time_changed += r->time_changed;
        switch (r->outcome)
        {
            case ROW_INSERTED:
                t->inserted++;
                break;
            case ROW_DUPLICATE:
                t->duplicates++;
                break;
            case ROW_REJECTED:
                t->rejected++;
                break;
            case ROW_EXPIRED:
                t->expired++;
                break;
            case ROW_UPDATED:
                t->updated++;
                break;
            case ROW_DELETED:
                t->deleted++;
                break;
            case ROW_MISSING:
                t->missing++;
                t->missing_deletes++;
                break;
            case ROW_APPLIED:
                t->truncates++;
                t->read--; /* not a row */
                break;
            case ROW_PENDING:
                if (r->op == REC_TRUNCATE)
                    t->read--;
                break;
        }
    }
}

void
batch_counts_add(BatchCounts *a, const BatchCounts *b)
{
    a->read += b->read;
    a->inserted += b->inserted;
    a->duplicates += b->duplicates;
    a->rejected += b->rejected;
    a->expired += b->expired;
    a->updated += b->updated;
    a->deleted += b->deleted;
    a->missing += b->missing;
    a->missing_deletes += b->missing_deletes;
    a->time_changed += b->time_changed;
    a->truncates += b->truncates;
}

/* Record, with the batch, which partitions received rows (maintenance will
 * not retire a window that did within its quiet period).  Last statement
 * before COMMIT, as maintain.h asks. */
static bool
pipeline_note_activity(Pipeline *pl, PgConn *conn, const Batch *b, Err *err)
{
    const char *names[64];
    size_t n = 0;
    bool ok = true;
    const Partition *last = NULL;

    pthread_rwlock_rdlock(&pl->catalog_lock);

    for (size_t i = 0; i < b->nrows; i++)
    {
        const Partition *p;
        bool seen = false;
        int64_t t = b->rows[i].time_us;

        if (b->rows[i].outcome != ROW_INSERTED)
            continue;
        if (last && t >= last->lower_us && t < last->upper_us)
            continue; /* the partition of the row before, already listed */
        p = catalog_partition_for(pl->target, t);
        if (p == NULL)
            continue;
        last = p;
        for (size_t k = 0; k < n && !seen; k++)
            seen = names[k] == p->name;
        if (seen)
            continue;
        names[n++] = p->name;
        if (n == sizeof names / sizeof names[0])
        {
            ok = maintain_note_activity(conn, pl->target->schema, pl->target->name, names, n, err);
            n = 0;
            if (!ok)
                break;
        }
    }
    ok = ok && maintain_note_activity(conn, pl->target->schema, pl->target->name, names, n, err);
    pthread_rwlock_unlock(&pl->catalog_lock);
    return ok;
}

typedef struct CommitCtx
{
    Pipeline *pl;
    Lane *lane;
    uint64_t seq;
    SourcePosition pos;
    bool finished;
    bool marked; /* outputs_mark was called for this batch */
} CommitCtx;

static bool lane_await_turn(Lane *lane, uint64_t seq, Err *err);
static void lane_note_pid(Lane *lane);

/* Inside the batch's transaction: the owner's outputs durable, then its
 * resume position (with the counts of the transaction's earlier pieces; not
 * after a piece: the transaction goes on), then the partitions' activity.
 * The outputs are marked once per target transaction. */
static bool
pipeline_before_commit(void *arg, Batch *b, Err *err)
{
    CommitCtx *cc = arg;
    Pipeline *pl = cc->pl;
    const PipelineHooks *h = &pl->hooks;
    BatchCounts t;

    /* From here to the count after COMMIT, one batch at a time in reading
     * order: the outputs and the resume position are the owner's. */
    if (!lane_await_turn(cc->lane, cc->seq, err))
        return false;
    if (h->outputs_mark && !cc->marked && !b->txn_continues)
        h->outputs_mark(h->ctx);
    cc->marked = true;
    for (size_t i = 0; i < b->nrows && h->reject; i++)
    {
        const BatchRow *r = &b->rows[i];
        if (r->outcome != ROW_REJECTED)
            continue;
        if (!h->reject(h->ctx, r->src_line, batch_reason(b, r), r->sqlstate,
                       b->aux.data + r->raw_off, r->raw_len, err))
            return false;
    }
    if ((h->late && !pipeline_write_late(pl, b, err)) ||
        (h->outputs_sync && !h->outputs_sync(h->ctx, err)))
        return false;
    batch_totals(b, &t);
    batch_counts_add(&t, &cc->lane->txn_counts);
    if (h->save_position && !b->txn_piece &&
        !h->save_position(h->ctx, cc->lane->conn, &cc->pos, &t, cc->finished, err))
        return false;
    return pipeline_note_activity(pl, cc->lane->conn, b, err);
}

static bool
pipeline_reconnect_conn(Pipeline *pl, PgConn *conn, Err *err)
{
    int delay = 1;

    if (pl->hooks.target_connection)
        pl->hooks.target_connection(pl->hooks.ctx, true, err->msg);
    for (int attempt = 1; attempt <= pl->o->reconnect_attempts; attempt++)
    {
        Err rerr = {0};

        log_warn("connection lost (%s); reconnecting in %d s (attempt %d of %d)", err->msg, delay,
                 attempt, pl->o->reconnect_attempts);
        /* in steps, so that a signal stops the wait whichever thread it lands in */
        for (int step = 0; step < delay * 10 && interrupt_signal() == 0; step++)
        {
            struct timespec ts = {0, 100 * 1000 * 1000};
            (void) nanosleep(&ts, NULL);
        }
        if (interrupt_signal() != 0)
        {
            err_set(err, EC_INTERRUPTED, "interrupted by %s while reconnecting",
                    interrupt_name());
            err_hint(err, "Committed batches are kept: run the same command again to resume.");
            return false;
        }
        if (pg_reconnect(conn, &rerr))
        {
            log_info("reconnected; continuing from the last committed batch");
            if (pl->hooks.target_connection)
                pl->hooks.target_connection(pl->hooks.ctx, false, NULL);
            return true;
        }
        delay = delay < 16 ? delay * 2 : 30;
    }
    err_hint(err, "The server could not be reached again.  Committed batches are kept: run "
                  "the same command again to resume.");
    return false;
}

/* The counts of row operations other than inserts. */
static void
stats_add_ops(ImportStats *st, const BatchCounts *t)
{
    st->updated += t->updated;
    st->deleted += t->deleted;
    st->missing += t->missing;
    st->missing_deletes += t->missing_deletes;
    st->time_changed += t->time_changed;
    st->truncates += t->truncates;
}

/* Names a batch's row that is among the largest delays after the batch was
 * counted (tracker_name_pending): its origin through the owner's hook, its
 * id, its reference as a person reads it (a default reference as the
 * record's values, comma-separated).  The other rows cost a comparison each, and rows
 * pushed out within the batch are never named.  On the writer thread (the
 * reader, for a plan), as the origin hook allows. */
typedef struct RowNamer
{
    Pipeline *pl;
    const Batch *b;
    char origin[TRACKER_ORIGIN_MAX + 1];
    char id[UUID_TEXT_SIZE];
    char values[2 * REF_PREFIX_MAX + 8];
} RowNamer;

static void
pipeline_name_row(void *ctx, uint64_t tag, TrackerRowName *out)
{
    RowNamer *rn = ctx;
    const BatchRow *r = &rn->b->rows[tag];
    const char *ref = rn->b->aux.data + r->ref_off;

    rn->pl->hooks.origin(rn->pl->hooks.ctx, r->src_line, rn->origin, sizeof rn->origin);
    uuid_format(&r->id, rn->id);
    out->origin = rn->origin;
    out->id = rn->id;
    out->ref = ref;
    out->ref_len = r->ref_len;
    if (!rn->pl->tmpl)
    {
        size_t n = r->ref_len < REF_PREFIX_MAX ? r->ref_len : REF_PREFIX_MAX - 1;

        out->ref_cut = !srcref_default_values(ref, n, rn->values, sizeof rn->values) ||
                       n < r->ref_len;
        out->ref = rn->values;
        out->ref_len = strlen(rn->values);
        out->ref_values = true;
    }
}

bool
pipeline_reconnect(Pipeline *pl, Err *err)
{
    return pipeline_reconnect_conn(pl, pl->conn, err);
}

static void
pipeline_count_committed(Pipeline *pl, const Batch *b)
{
    ImportStats *st = pl->st;
    int64_t now = pl->o->now_us ? pl->o->now_us : wall_now_us();
    WindowCount *w = NULL; /* the window of the row before (rows come in runs) */
    BatchCounts ops;
    RowNamer rn = {.pl = pl, .b = b}; /* names the batch's rows among the largest delays */

    pthread_rwlock_rdlock(&pl->catalog_lock);
    for (size_t i = 0; i < b->nrows; i++)
    {
        const BatchRow *r = &b->rows[i];

        if (r->op == REC_TRUNCATE)
            continue; /* not a row */
        st->read++;
        st->keys_ordered += r->key_ordered;
        if (r->outcome == ROW_INSERTED || r->outcome == ROW_EXPIRED)
        {
            tracker_add_pending(r->outcome == ROW_EXPIRED && pl->held ? pl->held : pl->tracker,
                                r->time_us, now, (DelayClass) r->delay_class,
                                r->window_lower_us, r->window_upper_us, i);
            if (pl->hooks.row_delay)
                pl->hooks.row_delay(pl->hooks.ctx, now - r->time_us, r->delay_class);
        }
        switch (r->outcome)
        {
            case ROW_INSERTED:
            {
                if (!(w && r->time_us >= w->lower_us && r->time_us < w->upper_us))
                    w = stats_window(pl, r->time_us);
                st->inserted++;
                w->rows++;
                if (r->delay_class == DELAY_NEAR_CUTOFF)
                {
                    st->near_cutoff++;
                    w->near_cutoff++;
                }
                else if (r->delay_class == DELAY_EXPIRED)
                    st->expired_kept++;
                (void) tracker_classify(pl->tracker, r->window_upper_us, now, &w->time_left_us);
                break;
            }
            case ROW_DUPLICATE:
                st->duplicates++;
                break;
            case ROW_REJECTED:
            {
                char example[256];
                const char *reason = batch_reason(b, r);
                char category[96];

                if (r->sqlstate[0])
                    (void) snprintf(category, sizeof category, "server: SQLSTATE %s", r->sqlstate);
                else
                    (void) snprintf(category, sizeof category, "%s", reject_category(reason));
                char at[300];

                pl->hooks.origin(pl->hooks.ctx, r->src_line, at, sizeof at);
                (void) snprintf(example, sizeof example, "%s: %s", at, reason);
                st->rejected++;
                stats_reason(st, category, example);
                break;
            }
            case ROW_EXPIRED:
                st->expired++;
                break;
            default: /* row operations: counted below */
                break;
        }
    }
    if (b->nchanges > 0)
    {
        batch_totals(b, &ops);
        stats_add_ops(st, &ops);
    }
    tracker_name_pending(pl->tracker, pipeline_name_row, &rn);
    if (pl->held)
        tracker_name_pending(pl->held, pipeline_name_row, &rn);
    pthread_rwlock_unlock(&pl->catalog_lock);
}

static bool
pipeline_ensure_locked(Pipeline *pl, PgConn *conn, Batch *b, size_t *n_out, EnsureResult *res,
                       Err *err)
{
    size_t n = 0;

    if (pl->times_cap < b->nrows)
    {
        pl->times_cap = b->nrows;
        pl->times = xrealloc(pl->times, pl->times_cap * sizeof *pl->times);
    }
    for (size_t i = 0; i < b->nrows; i++)
    {
        const BatchRow *r = &b->rows[i];

        /* Inserts, and updates that may be inserted (their row missing) */
        if (r->outcome == ROW_PENDING &&
            (r->op == REC_INSERT ||
             (r->op == REC_UPDATE && r->complete && r->delay_class != DELAY_EXPIRED)))
            pl->times[n++] = uuid7_us(&r->id);
    }
    *n_out = n;
    if (n == 0)
        return true;
    if (!partitions_ensure_times(conn, pl->target, pl->times, n, &pl->ensure, res, err))
        return false;
    pl->st->partitions_created += (uint64_t) res->partitions_created;
    return true;
}

static bool
pipeline_ensure_windows(Pipeline *pl, PgConn *conn, Batch *b, Err *err)
{
    size_t n = 0;
    EnsureResult res = {0};
    bool ok;

    /* Inside a source transaction's open target transaction (its later
     * pieces), windows are created on a connection of their own: each
     * commits by itself (ATTACH PARTITION's SHARE UPDATE EXCLUSIVE does not
     * wait for the open transaction's ROW EXCLUSIVE). */
    if (b->txn_continues)
    {
        if (pl->ddl_conn == NULL && !pg_connect_again(conn, &pl->ddl_conn, err))
            return false;
        if (pg_is_broken(pl->ddl_conn) && !pg_reconnect(pl->ddl_conn, err))
            return false;
        conn = pl->ddl_conn;
    }
    /* The lanes' windows one lane at a time (the times buffer is shared):
     * the catalog changes under the lanes that read it. */
    pthread_rwlock_wrlock(&pl->catalog_lock);
    ok = pipeline_ensure_locked(pl, conn, b, &n, &res, err);
    pthread_rwlock_unlock(&pl->catalog_lock);
    if (!ok || n == 0)
        return ok;
    if (res.issues > 0)
    {
        *err = res.issue;
        if (err->code == EC_OK)
            err_set(err, EC_CONFIG, "partitions could not be created for this batch");
        return false;
    }
    return true;
}

/* Plan: classify the batch without writing; windows that would be created.
 * A reference counted as inserted earlier in the run (another batch, another
 * source) is a duplicate, as import's lookup would make it. */
static bool
pipeline_plan_batch(Pipeline *pl, Batch *b, Err *err)
{

    if (pl->sink && !sink_probe_only(pl->sink, b, err))
        return false;
    if (pl->plan_seen == NULL)
        pl->plan_seen = refset_new();
    for (size_t i = 0; i < b->nrows; i++)
    {
        BatchRow *r = &b->rows[i];
        /* Expired, but its reference in the lookup (sink_probe_expired) or
         * counted as inserted before it: a duplicate, as import makes it. */
        if (r->outcome == ROW_EXPIRED && r->op == REC_INSERT &&
            (r->expired_found || refset_has(pl->plan_seen, r->hash)))
            r->outcome = ROW_DUPLICATE;
        if (r->outcome != ROW_PENDING)
            continue;
        if (r->op == REC_INSERT) /* would be inserted, unless counted already */
            r->outcome = refset_add(pl->plan_seen, r->hash) ? ROW_INSERTED : ROW_DUPLICATE;
        else /* other operations: as if their row were there */
            r->outcome = r->op == REC_UPDATE   ? ROW_UPDATED
                         : r->op == REC_DELETE ? ROW_DELETED
                                               : ROW_APPLIED;
    }
    pipeline_count_committed(pl, b);
    return true;
}

/* Batch seq committed and counted: the next one may commit. */
static void lane_pass_turn(Lane *lane, uint64_t seq);

/* Before the first piece of a source transaction is counted (under w.mu):
 * what its rows will change, kept to be put back by lane_txn_restore. */
static void
lane_txn_save(Pipeline *pl, Lane *lane)
{
    ImportStats *st = pl->st;

    if (pl->tracker)
    {
        if (lane->txn_tracker == NULL)
            lane->txn_tracker =
                tracker_new(tracker_retention(pl->tracker), tracker_near_cutoff(pl->tracker));
        tracker_copy_into(lane->txn_tracker, pl->tracker);
    }
    lane->txn_windows = xrealloc(lane->txn_windows,
                                 (st->nwindows ? st->nwindows : 1) * sizeof *st->windows);
    if (st->nwindows)
        memcpy(lane->txn_windows, st->windows, st->nwindows * sizeof *st->windows);
    lane->txn_nwindows = st->nwindows;
}

/* The open transaction rolled back (under w.mu): the tracker (delays, largest
 * delays, windows) and the run's per-window rows as before its first piece;
 * the owner forgets the delays it was given for them. */
static void
lane_txn_restore(Pipeline *pl, Lane *lane)
{
    ImportStats *st = pl->st;

    if (pl->tracker && lane->txn_tracker)
        tracker_copy_into(pl->tracker, lane->txn_tracker);
    st->windows = xrealloc(st->windows,
                           (lane->txn_nwindows ? lane->txn_nwindows : 1) * sizeof *st->windows);
    if (lane->txn_nwindows)
        memcpy(st->windows, lane->txn_windows, lane->txn_nwindows * sizeof *st->windows);
    st->nwindows = lane->txn_nwindows;
    if (pl->hooks.rows_rolled_back)
        pl->hooks.rows_rolled_back(pl->hooks.ctx);
}

/* Forget the lane's open transaction (its pieces were rolled back): the
 * run's counts of them are taken back, so that what the run says it applied
 * is what the target holds (the source sends the transaction again whole). */
static void
lane_txn_forget(Pipeline *pl, Lane *lane)
{
    ImportStats *st = pl->st;
    const BatchCounts *t = &lane->txn_counts;

    pthread_mutex_lock(&pl->w.mu);
    if (lane->txn_open)
        lane_txn_restore(pl, lane);
    st->read -= t->read;
    st->inserted -= t->inserted;
    st->duplicates -= t->duplicates;
    st->rejected -= t->rejected;
    st->expired -= t->expired;
    st->updated -= t->updated;
    st->deleted -= t->deleted;
    st->missing -= t->missing;
    st->missing_deletes -= t->missing_deletes;
    st->time_changed -= t->time_changed;
    st->truncates -= t->truncates;
    st->near_cutoff -= lane->txn_run.near_cutoff;
    st->expired_kept -= lane->txn_run.expired_kept;
    st->keys_ordered -= lane->txn_run.keys_ordered;
    lane->txn_open = false; /* under w.mu: pipeline_take_segment reads it */
    pthread_mutex_unlock(&pl->w.mu);
    memset(&lane->txn_counts, 0, sizeof lane->txn_counts);
    memset(&lane->txn_run, 0, sizeof lane->txn_run);
}

/* The target transaction holding the earlier pieces of a source transaction
 * was rolled back with the failed batch: a retry of this batch alone cannot
 * bring them back.  The attempt fails (a connection error stays one: a
 * stream reconnects and the source sends the whole transaction again from
 * the committed position). */
static bool
pipeline_txn_lost(Lane *lane, Err *err)
{
    err_prefix(err,
               "a large source transaction applied in pieces lost its target transaction "
               "(%" PRIu64 " changes written in it before, rolled back)",
               lane->txn_counts.read + lane->txn_counts.truncates);
    err_hint(err, "Nothing of that source transaction is in the target: it is applied again "
                  "whole from the position committed last.");
    lane_txn_forget(lane->pl, lane);
    return false;
}

/* The batch failed for good: a COMMIT whose fate stayed unknown did not
 * land as far as this run counts (its outcomes are reset); a source
 * transaction in pieces lost its target transaction. */
static bool
pipeline_flush_failed(Lane *lane, Batch *b, Err *err)
{
    if (b->commit_doubt)
        sink_forget_outcomes(b);
    if (b->txn_continues)
        return pipeline_txn_lost(lane, err);
    return false;
}

/* A batch whose COMMIT lost its answer had committed, adding *got (read
 * from the owner's stored position): do the outcomes it kept add up to
 * it (with the counts of its transaction's earlier pieces)?  Then the
 * batch is counted as if the COMMIT had answered: its rows' delays, the
 * per-window rows, the reasons, the owner's live delays. */
static bool
pipeline_doubt_matches(const Lane *lane, const Batch *b, const BatchCounts *got)
{
    BatchCounts t;

    if (!b->commit_doubt)
        return false;
    batch_totals(b, &t);
    batch_counts_add(&t, &lane->txn_counts);
    return t.read == got->read && t.inserted == got->inserted &&
           t.duplicates == got->duplicates && t.rejected == got->rejected &&
           t.expired == got->expired && t.updated == got->updated && t.deleted == got->deleted &&
           t.missing == got->missing && t.missing_deletes == got->missing_deletes &&
           t.time_changed == got->time_changed && t.truncates == got->truncates;
}

/* The lane the reader writes on itself, every lane idle: the one holding
 * the pieces of a source transaction, if any. */
static Lane *
writer_reader_lane(Pipeline *pl)
{
    return pl->w.pin ? pl->w.pin : &pl->w.lanes[0];
}

/* A source transaction given up half read (the input broke inside it, or
 * it was rolled back at its source: why): its open target transaction is
 * rolled back, nothing of it lands. */
static void
pipeline_txn_abandon(Pipeline *pl, const char *why)
{
    Lane *lane = writer_reader_lane(pl);

    pl->w.pin = NULL;
    if (!lane->txn_open)
        return;
    /* (After writer_stop a lane's sink is gone; its connection is not.) */
    if (lane->sink != NULL)
        sink_rollback(lane->sink);
    else
        pg_rollback_quietly(lane->conn);
    if (why != NULL)
        log_info("the source transaction in progress %s: the %" PRIu64
                 " changes of it written so far are rolled back in the target",
                 why, lane->txn_counts.read + lane->txn_counts.truncates);
    else
        log_info("the source transaction in progress was not applied (%" PRIu64
                 " changes of it rolled back): it is applied whole when the stream resumes",
                 lane->txn_counts.read + lane->txn_counts.truncates);
    lane_txn_forget(pl, lane);
}

/*
 * pipeline_flush writes batch b, whose last record ends at *pos, in one
 * transaction on the lane's connection (or classifies it, for a plan); the
 * batch is number seq of the run.
 */
static bool
pipeline_flush(Pipeline *pl, Lane *lane, uint64_t seq, Batch *b, const SourcePosition *pos,
               bool finished, Err *err)
{
    CommitCtx cc = {0};
    const PipelineHooks *h = &pl->hooks;
    char at[256];
    int attempts = 0;
    int retries = 0; /* after a deadlock or a serialization failure */

    if (b->nrows == 0 && !finished && !b->keep_position && !lane->txn_open)
    {
        lane_pass_turn(lane, seq);
        return true;
    }
    b->txn_continues = lane->txn_open;
    cc.pos = *pos;
    cc.pl = pl;
    cc.lane = lane;
    cc.seq = seq;
    cc.finished = finished;
    h->where(h->ctx, pos, at, sizeof at);
    /* Expired rows first: an expired row does not stand for its reference. */
    pipeline_classify(pl, b);
    pipeline_mark_repeats(&lane->sort, b);
    if (pl->o->plan)
    {
        bool ok = pipeline_plan_batch(pl, b, err);
        batch_reset(b);
        return ok;
    }
    for (bool check_commit = false;;)
    {
        bool ok;

        if (check_commit)
        {
            /* Did the batch commit before the connection went?  The owner's
             * resume position says, once every batch before it committed. */
            CommitCheck done = COMMIT_NOT_DONE;
            BatchCounts got = {0};

            if (!lane_await_turn(lane, seq, err))
                return pipeline_flush_failed(lane, b, err);
            if (h->check_commit &&
                !h->check_commit(h->ctx, lane->conn, &cc.pos, cc.finished, &done, &got, err))
            {
                /* Lost again before we could tell: reconnect and ask again. */
                if (!pg_err_is_connection(err) || ++attempts > 5 ||
                    !pipeline_reconnect_conn(pl, lane->conn, err))
                    return pipeline_flush_failed(lane, b, err);
                lane_note_pid(lane);
                continue;
            }
            if (done == COMMIT_LOST)
                return pipeline_flush_failed(lane, b, err); /* the owner said why, in err */
            check_commit = false;
            if (done == COMMIT_DONE && pipeline_doubt_matches(lane, b, &got))
            {
                /* The rows kept what that transaction decided: counted as
                 * after an answered COMMIT (delays and per-window rows too). */
                log_info("the batch ending at %s had committed", at);
                b->commit_doubt = false;
                break;
            }
            if (done == COMMIT_DONE)
            {
                /* Outcomes not known (they were reset with the failure):
                 * the committed counts only; its rows' delays are not. */
                log_warn("the batch ending at %s had committed, but its rows' outcomes were "
                         "not kept as it committed them: its counts are the stored ones, its "
                         "rows' delays are not counted",
                         at);
                if (lane->txn_open)
                    lane_txn_forget(pl, lane); /* got counts its earlier pieces too */
                pthread_mutex_lock(&pl->w.mu);
                pl->st->read += got.read;
                pl->st->inserted += got.inserted;
                pl->st->duplicates += got.duplicates;
                pl->st->rejected += got.rejected;
                pl->st->expired += got.expired;
                stats_add_ops(pl->st, &got);
                pl->st->batches++;
                if (h->after_commit)
                    h->after_commit(h->ctx, &cc.pos);
                pthread_mutex_unlock(&pl->w.mu);
                lane_pass_turn(lane, seq);
                batch_reset(b);
                return true;
            }
            /* Not committed: written again (a piece's transaction cannot be). */
            if (b->txn_continues)
                return pipeline_flush_failed(lane, b, err);
            if (b->commit_doubt)
                sink_forget_outcomes(b);
            if (cc.marked && h->outputs_rewind && !h->outputs_rewind(h->ctx, err))
                return false;
        }
        if (pg_is_broken(lane->conn))
        {
            if (!pg_err_is_connection(err))
                err_set(err, EC_PG_CONNECT, "the connection to the server was lost");
            ok = false;
        }
        else
            ok = pipeline_ensure_windows(pl, lane->conn, b, err) &&
                 sink_write(lane->sink, b, pipeline_before_commit, &cc, err);
        if (ok)
            break;
        /* A source transaction in pieces is lost with its target
         * transaction, unless its COMMIT went (asked after a reconnect). */
        if (b->txn_continues && !b->commit_doubt)
            return pipeline_txn_lost(lane, err);
        if ((strcmp(err->sqlstate, "40P01") == 0 || strcmp(err->sqlstate, "40001") == 0) &&
            ++retries <= 5)
        {
            /* Rolled back whole: write it again, as if for the first time. */
            log_warn("the batch ending at %s was rolled back (%s, SQLSTATE %s); "
                     "writing it again (attempt %d of 5)",
                     at, err->msg, err->sqlstate, retries);
            if (cc.marked && h->outputs_rewind && !h->outputs_rewind(h->ctx, err))
                return false;
            continue;
        }
        if (!pg_err_is_connection(err) || ++attempts > 5)
            return pipeline_flush_failed(lane, b, err);
        if (!pipeline_reconnect_conn(pl, lane->conn, err))
            return pipeline_flush_failed(lane, b, err);
        lane_note_pid(lane);
        check_commit = true;
    }
    if (b->txn_piece)
    {
        /* Written, not committed: the source transaction goes on in the next
         * batch, in the same target transaction.  Counted now (the batch's
         * rows are not kept); stored with the position at the COMMIT. */
        BatchCounts t;
        uint64_t near, kept, ordered;

        batch_totals(b, &t);
        batch_counts_add(&lane->txn_counts, &t);
        pthread_mutex_lock(&pl->w.mu);
        if (!lane->txn_open)
            lane_txn_save(pl, lane);
        lane->txn_open = true;
        near = pl->st->near_cutoff;
        kept = pl->st->expired_kept;
        ordered = pl->st->keys_ordered;
        pipeline_count_committed(pl, b);
        lane->txn_run.near_cutoff += pl->st->near_cutoff - near;
        lane->txn_run.expired_kept += pl->st->expired_kept - kept;
        lane->txn_run.keys_ordered += pl->st->keys_ordered - ordered;
        pthread_mutex_unlock(&pl->w.mu);
        lane_pass_turn(lane, seq);
        batch_reset(b);
        return true;
    }
    memset(&lane->txn_counts, 0, sizeof lane->txn_counts);
    memset(&lane->txn_run, 0, sizeof lane->txn_run);
    pthread_mutex_lock(&pl->w.mu);
    lane->txn_open = false;
    pipeline_count_committed(pl, b);
    if (b->nrows > 0 || b->txn_continues)
        pl->st->batches++;
    if (h->after_commit)
        h->after_commit(h->ctx, &cc.pos);
    pthread_mutex_unlock(&pl->w.mu);
    lane_pass_turn(lane, seq);
    batch_reset(b);
    return true;
}

/* ---- progress ------------------------------------------------------------ */

/* "ETA 1h02m03s": secs to go, as a person reads it */
static void
format_eta(char *out, size_t size, double secs)
{
    long s = secs < 0 ? 0 : secs > 1e8 ? 100000000L : (long) secs;

    if (s >= 3600)
        (void) snprintf(out, size, "ETA %ldh%02ldm%02lds", s / 3600, s / 60 % 60, s % 60);
    else
        (void) snprintf(out, size, "ETA %ldm%02lds", s / 60, s % 60);
}

/*
 * Progress: on a terminal a line redrawn twice a second, otherwise a log line
 * every 10 s.  Rates and the ETA count this run's rows, bytes and time only: a
 * resumed input's earlier part is neither work done nor work to do.  With
 * several inputs whose sizes are known, the ETA is for all of them.
 */
static void
pipeline_progress(Pipeline *pl, bool final)
{
    double now = monotime_s();
    uint64_t done = 0;
    uint64_t total = 0;
    double rate;
    bool tty = pl->o->progress && isatty(2) /* stderr */;
    const PipelineInputs *in = pl->inputs;
    bool many = in->count > 1;
    char eta[48] = "";
    char which[48] = "";
    const char *verb = pl->o->plan ? "would be inserted" : "inserted";

    /* A log's first line comes 10 s in, not at the start (nothing to say yet). */
    if (!tty && pl->last_progress == 0)
        pl->last_progress = pl->started;
    if (!final && now - pl->last_progress < (tty ? 0.5 : 10.0))
        return;
    if (!tty && log_current_level < LOG_LEVEL_INFO)
        return;
    pl->last_progress = now;
    pl->src->ops->progress(pl->src, &done, &total);
    rate = (double) (pl->st->read - pl->st->read_resumed) /
           (now - pl->started > 0.001 ? now - pl->started : 0.001);
    if (many && in->all_known)
    {
        uint64_t run = in->run_bytes + (done - pl->src_done0);
        uint64_t left = in->all_bytes > in->done_bytes + done
                            ? in->all_bytes - in->done_bytes - done
                            : 0;

        if (run > 0 && left > 0)
        {
            format_eta(eta, sizeof eta, (now - pl->started) * (double) left / (double) run);
            (void) snprintf(eta + strlen(eta), sizeof eta - strlen(eta), " for all %zu %ss",
                            in->count, in->noun);
        }
    }
    else if (total > 0 && done > pl->src_done0 && done < total && now > pl->src_started)
        format_eta(eta, sizeof eta,
                   (now - pl->src_started) * (double) (total - done) /
                       (double) (done - pl->src_done0));
    if (many)
        (void) snprintf(which, sizeof which, " (%s %" PRIu64 " of %zu)", in->noun, in->current,
                        in->count);
    if (tty)
    {
        fprintf(stderr, "\r%s%s: %.1f/%.1f MB  %" PRIu64 " rows  %.0f rows/s%s%s   ",
                pl->src_name, which, (double) done / 1e6, (double) total / 1e6, pl->st->read, rate,
                eta[0] ? "  " : "", eta);
        if (final)
            fputc('\n', stderr);
    }
    else if (pl->o->progress && total > 0)
        log_info("%s%s: %" PRIu64 " rows read, %" PRIu64 " %s, %.0f rows/s, %.1f of %.1f MB "
                 "(%.0f%%)%s%s",
                 pl->src_name, which, pl->st->read, pl->st->inserted, verb, rate,
                 (double) done / 1e6, (double) total / 1e6, 100.0 * (double) done / (double) total,
                 eta[0] ? ", " : "", eta);
    else if (pl->o->progress)
        log_info("%s%s: %" PRIu64 " rows read, %" PRIu64 " %s, %.0f rows/s", pl->src_name,
                 which, pl->st->read, pl->st->inserted, verb, rate);
}

/* Free a sink, its statistics added to the run's. */
static void
pipeline_free_sink(Pipeline *pl, Sink **sink)
{
    if (*sink == NULL)
        return;
    pl->sink_total.probes += sink_stats(*sink)->probes;
    pl->sink_total.conflicts += sink_stats(*sink)->conflicts;
    pl->sink_total.splits += sink_stats(*sink)->splits;
    pl->sink_total.lookup_gap += sink_stats(*sink)->lookup_gap;
    sink_free(*sink);
    *sink = NULL;
}

static void
pipeline_drop_sink(Pipeline *pl)
{
    pipeline_free_sink(pl, &pl->sink);
    pl->w.lanes[0].sink = NULL;
}

/* May this role read the target's key column?  Then re-imports are answered
 * from the target's index first; without it (import needs only INSERT on the
 * target) the lookup answers alone. */
static bool
pipeline_may_read_keys(Pipeline *pl, bool *out, Err *err)
{
    char oid[16];
    const char *params[2] = {oid, pl->target->key_column};
    PGresult *res;

    (void) snprintf(oid, sizeof oid, "%u", pl->target->oid);
    if (!pg_query(pl->conn, "SELECT has_column_privilege($1::oid, $2, 'SELECT')", 2, params,
                  &res, err))
        return false;
    *out = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return true;
}

static bool
pipeline_check_rejects_limit(Pipeline *pl, Err *err)
{
    const ImportStats *st = pl->st;
    bool over = st->rejected > pl->o->max_rejects;

    if (pl->o->max_rejects_pct >= 0 && st->read >= 100)
        over = over || (double) st->rejected * 100.0 / (double) st->read > pl->o->max_rejects_pct;
    if (!over)
        return true;
    err_set(err, EC_LIMIT, "too many rejected rows: %" PRIu64 " of %" PRIu64 " read", st->rejected,
            st->read);
    err_detail(err, "The rejected rows and their reasons are in \"%s\".  Batches committed so far "
                    "are kept.",
               pl->hooks.rejects_where ? pl->hooks.rejects_where : "");
    if (pl->hooks.rejects_hint)
        err_hint(err, "%s", pl->hooks.rejects_hint);
    return false;
}

/* ---- the writers ----------------------------------------------------------- */

/* The lane's server process, for the others' lock check (after a reconnect). */
static void
lane_note_pid(Lane *lane)
{
    int pid = pg_is_broken(lane->conn) ? 0 : PQbackendPID(pg_raw(lane->conn));

    pthread_mutex_lock(&lane->pl->w.mu);
    lane->pid = pid;
    pthread_mutex_unlock(&lane->pl->w.mu);
}

/* Does an earlier batch's lane wait for a lock this lane holds (a unique key
 * other than the reference's: it waits for us, we wait for its COMMIT)?
 * pids: "{p1,p2}" of the lanes of earlier batches. */
static bool
lane_blocks_earlier(Lane *lane, const char *pids, bool *out, Err *err)
{
    PGresult *res;
    const char *params[1] = {pids};

    if (!pg_query(lane->conn,
                  "SELECT EXISTS (SELECT 1 FROM unnest($1::int[]) AS p "
                  "WHERE pg_catalog.pg_blocking_pids(p) @> ARRAY[pg_catalog.pg_backend_pid()])",
                  1, params, &res, err))
        return false;
    *out = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return true;
}

/*
 * lane_await_turn: wait until every batch before seq committed.  false when
 * an earlier batch failed (this one must not commit: the resume position
 * covers a contiguous prefix of batches), or when an earlier batch waits for
 * a lock this lane holds: 40P01, the batch is rolled back and written again.
 */
static bool
lane_await_turn(Lane *lane, uint64_t seq, Err *err)
{
    Writer *w = &lane->pl->w;

    for (;;)
    {
        Buf pids;
        bool blocks = false;
        bool timed_out = false;
        bool ok;

        pthread_mutex_lock(&w->mu);
        while (w->committed != seq && w->fail_seq > seq && !timed_out)
        {
            struct timespec until;

            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            timed_out = pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT;
        }
        if (w->fail_seq < seq)
        {
            pthread_mutex_unlock(&w->mu);
            return err_set(err, EC_INTERNAL, "an earlier batch failed: this one is not committed");
        }
        if (w->committed == seq)
        {
            pthread_mutex_unlock(&w->mu);
            return true;
        }
        buf_init(&pids);
        buf_putc(&pids, '{');
        for (size_t i = 0; i < w->nlanes; i++)
        {
            const Lane *o = &w->lanes[i];
            if (o != lane && o->busy && o->seq < seq && o->pid > 0)
                buf_printf(&pids, "%s%d", pids.len > 1 ? "," : "", o->pid);
        }
        buf_putc(&pids, '}');
        pthread_mutex_unlock(&w->mu);
        ok = pids.len <= 2 || lane_blocks_earlier(lane, pids.data, &blocks, err);
        buf_free(&pids);
        if (!ok)
            return false;
        if (blocks)
        {
            err_set(err, EC_PG_QUERY,
                    "an earlier batch waits for a row this batch wrote (a unique key "
                    "other than the source reference)");
            (void) snprintf(err->sqlstate, sizeof err->sqlstate, "40P01");
            return false;
        }
    }
}

/* Batch seq committed and was counted: the next one may commit. */
static void
lane_pass_turn(Lane *lane, uint64_t seq)
{
    Writer *w = &lane->pl->w;

    pthread_mutex_lock(&w->mu);
    if (w->committed == seq)
        w->committed = seq + 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void *
writer_main(void *arg)
{
    Lane *lane = arg;
    Pipeline *pl = lane->pl;
    Writer *w = &pl->w;

    pthread_mutex_lock(&w->mu);
    for (;;)
    {
        Batch *b;
        SourcePosition pos;
        uint64_t seq;
        bool finished;
        bool doomed;
        Err e = {0};
        bool ok;

        while (!lane->busy && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!lane->busy)
            break;
        b = lane->b;
        pos = lane->pos;
        seq = lane->seq;
        finished = lane->finished;
        doomed = w->fail_seq < seq;
        pthread_mutex_unlock(&w->mu);
        ok = !doomed && pipeline_flush(pl, lane, seq, b, &pos, finished, &e);
        pthread_mutex_lock(&w->mu);
        if (!ok && seq < w->fail_seq)
        {
            w->fail_seq = seq;
            w->err = e;
        }
        lane->busy = false;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Wait until every lane is idle; false with the error of the first batch that
 * failed (reported once). */
static bool
writer_wait(Pipeline *pl, Err *err)
{
    Writer *w = &pl->w;
    bool busy = true;
    bool ok;

    if (!w->running)
        return true;
    pthread_mutex_lock(&w->mu);
    while (busy)
    {
        busy = false;
        for (size_t i = 0; i < w->nlanes; i++)
            busy = busy || w->lanes[i].busy;
        if (busy)
            pthread_cond_wait(&w->cv, &w->mu);
    }
    ok = w->fail_seq == UINT64_MAX || w->reported;
    if (!ok)
        *err = w->err;
    w->reported = w->fail_seq != UINT64_MAX;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

/* A batch failed on a writer lane: false with its error (once every lane is
 * idle).  The reader asks between records, so that a failure is seen while the
 * source is quiet too (a stream waiting for its next change). */
static bool
writer_check(Pipeline *pl, Err *err)
{
    Writer *w = &pl->w;
    bool failed;

    if (!w->running)
        return true;
    pthread_mutex_lock(&w->mu);
    failed = w->fail_seq != UINT64_MAX && !w->reported;
    pthread_mutex_unlock(&w->mu);
    if (!failed)
        return true;
    return writer_wait(pl, err) ? err_set(err, EC_INTERNAL, "a batch failed without an error")
                                : false;
}

/* The number of a batch the reader writes itself (every lane idle). */
static uint64_t
writer_next_seq(Pipeline *pl)
{
    uint64_t seq;

    pthread_mutex_lock(&pl->w.mu);
    seq = pl->w.next_seq++;
    pthread_mutex_unlock(&pl->w.mu);
    return seq;
}

/* The batch's references and given ids into the spare set; which lanes with a
 * batch in flight (seq in busy[], UINT64_MAX: none) share one: those keep
 * their seq in busy[], the others get UINT64_MAX. */
static void
writer_conflicts(Writer *w, const Batch *b, uint64_t *busy)
{
    bool *hit = w->hit;
    bool truncates = false;

    refset_clear(w->spare);
    memset(hit, 0, w->nlanes * sizeof *hit);
    for (size_t i = 0; i < b->nrows; i++)
    {
        const BatchRow *r = &b->rows[i];

        truncates = truncates || r->op == REC_TRUNCATE;
        if (r->outcome != ROW_PENDING || r->op == REC_TRUNCATE)
            continue;
        /* The reference, the one an update moves it from, a given id. */
        for (int k = 0; k < 3; k++)
        {
            const uint8_t *key = k == 0 ? r->hash : k == 1 ? r->old_hash : r->id.b;

            if ((k == 1 && !r->has_old) || (k == 2 && !r->id_given))
                continue;

            if (!refset_add(w->spare, key))
                continue;
            for (size_t l = 0; l < w->nlanes; l++)
                hit[l] = hit[l] || (busy[l] != UINT64_MAX && refset_has(w->lanes[l].keys, key));
        }
    }
    /* A truncate waits for every batch before it, and every batch after it
     * waits for it. */
    for (size_t l = 0; l < w->nlanes; l++)
        if (!hit[l] && !truncates && !w->lanes[l].barrier)
            busy[l] = UINT64_MAX;
    w->spare_barrier = truncates;
}

/*
 * writer_deal: hand the full batch to a lane, once one is idle and no batch in
 * flight shares a reference with it, after the rejects limit and progress;
 * the reader goes on in a free buffer.  false: a batch failed (its error) or
 * the rejects limit was reached.
 */
static bool
writer_deal(Pipeline *pl, Batch *b, const SourcePosition *pos, Err *err)
{
    Writer *w = &pl->w;
    uint64_t *busy = w->busy_seq;
    Lane *lane = NULL;
    bool ok;

    if (w->nlanes > 1)
    {
        pthread_mutex_lock(&w->mu);
        for (size_t l = 0; l < w->nlanes; l++)
            busy[l] = w->lanes[l].busy ? w->lanes[l].seq : UINT64_MAX;
        pthread_mutex_unlock(&w->mu);
        /* Only the reader changes the lanes' key sets: read without the lock. */
        writer_conflicts(w, b, busy);
    }
    pthread_mutex_lock(&w->mu);
    for (;;)
    {
        bool wait = false;

        lane = NULL;
        for (size_t l = 0; l < w->nlanes; l++)
        {
            const Lane *o = &w->lanes[l];

            if (w->nlanes > 1 && busy[l] != UINT64_MAX && o->busy && o->seq == busy[l])
                wait = true; /* shares a reference with this batch */
            if (!o->busy && lane == NULL && (w->pin == NULL || w->pin == o))
                lane = &w->lanes[l];
        }
        if (w->fail_seq != UINT64_MAX || (!wait && lane != NULL))
            break;
        pthread_cond_wait(&w->cv, &w->mu);
    }
    if (w->fail_seq != UINT64_MAX)
    {
        pthread_mutex_unlock(&w->mu);
        ok = writer_wait(pl, err);
        return ok ? err_set(err, EC_INTERNAL, "a batch failed without an error") : false;
    }
    ok = pipeline_check_rejects_limit(pl, err);
    if (ok)
    {
        pipeline_progress(pl, false);
        if (w->nlanes > 1)
        {
            RefSet *keys = lane->keys;

            lane->keys = w->spare;
            w->spare = keys;
            /* A piece after the first of a source transaction (its last one
             * too): the lane's key set holds this batch's references only,
             * while the target transaction holds the earlier pieces' rows,
             * uncommitted.  A batch after it on another lane would not see
             * them (a delete or update of one of those rows found missing):
             * every later batch waits for this one, as for a truncate. */
            lane->barrier = w->spare_barrier || w->pin == lane;
        }
        /* The next piece of a source transaction goes on in its target
         * transaction, on this lane. */
        w->pin = b->txn_piece ? lane : NULL;
        lane->b = b;
        lane->pos = *pos;
        lane->finished = false;
        lane->seq = w->next_seq++;
        lane->busy = true;
        pthread_cond_broadcast(&w->cv);
        /* The reader's next buffer: one no lane holds. */
        for (size_t i = 0; i < pl->nbufs; i++)
        {
            bool held = false;

            for (size_t l = 0; l < w->nlanes; l++)
                held = held || (w->lanes[l].busy && w->lanes[l].b == &pl->bufs[i]);
            if (!held)
            {
                pl->batch = &pl->bufs[i];
                break;
            }
        }
    }
    pthread_mutex_unlock(&w->mu);
    if (ok)
        batch_reset(pl->batch);
    return ok;
}

/* The other lanes' connections (kept for the next source) and sinks. */
static bool
writer_open_lanes(Pipeline *pl, Err *err)
{
    Writer *w = &pl->w;

    w->lanes[0].conn = pl->conn;
    w->lanes[0].sink = pl->sink;
    for (size_t l = 1; l < w->nlanes; l++)
    {
        Lane *lane = &w->lanes[l];

        if (lane->conn == NULL && !pg_connect_again(pl->conn, &lane->conn, err))
        {
            err_prefix(err, "--jobs %d: could not open writer connection %zu", pl->o->jobs,
                       l + 1);
            if (strcmp(err->sqlstate, "53300") == 0)
                err_hint(err, "The server has no connection slot left for it: lower --jobs, or "
                              "raise max_connections.");
            return false;
        }
        /* Lost with the stream's target, which was opened again. */
        if (pg_is_broken(lane->conn) && !pg_reconnect(lane->conn, err))
            return false;
        if (lane->sink == NULL)
            lane->sink = sink_new(lane->conn, &pl->sink_cfg);
    }
    for (size_t l = 0; l < w->nlanes; l++)
    {
        w->lanes[l].pid = pg_is_broken(w->lanes[l].conn) ? 0 : PQbackendPID(pg_raw(w->lanes[l].conn));
        if (w->lanes[l].keys)
            refset_clear(w->lanes[l].keys);
    }
    return true;
}

static void writer_stop(Pipeline *pl);

static bool
writer_start(Pipeline *pl, Err *err)
{
    Writer *w = &pl->w;

    w->quit = false;
    w->next_seq = 0;
    w->committed = 0;
    w->fail_seq = UINT64_MAX;
    w->reported = false;
    w->pin = NULL;
    if (!writer_open_lanes(pl, err))
        return false;
    w->running = true;
    for (size_t l = 0; l < w->nlanes; l++)
    {
        int rc = pthread_create(&w->lanes[l].thread, NULL, writer_main, &w->lanes[l]);

        if (rc != 0)
        {
            w->nstarted = l;
            writer_stop(pl);
            return err_set(err, EC_IO, "could not start writer thread %zu: %s", l + 1,
                           strerror(rc));
        }
    }
    w->nstarted = w->nlanes;
    return true;
}

/* Stop the writers after their current batches; an outcome not yet taken
 * is logged.  The other lanes' sinks go (their statistics kept). */
static void
writer_stop(Pipeline *pl)
{
    Writer *w = &pl->w;
    Err e = {0};

    if (!w->running)
        return;
    if (!writer_wait(pl, &e))
        log_warn("%s", e.msg);
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (size_t l = 0; l < w->nstarted; l++)
        pthread_join(w->lanes[l].thread, NULL);
    w->running = false;
    for (size_t l = 1; l < w->nlanes; l++)
        pipeline_free_sink(pl, &w->lanes[l].sink);
}

/*
 * pipeline_batch_full: the filling batch is full.  It goes to a writer lane
 * and the reader goes on into a free buffer.  Without writers (plan) it is
 * handled here.
 */
static bool
pipeline_batch_full(Pipeline *pl, Err *err)
{
    Batch *b = pl->batch;
    SourcePosition pos;

    if (pl->hooks.between_batches)
        pl->hooks.between_batches(pl->hooks.ctx);
    pl->src->ops->position(pl->src, &pos);
    if (pl->w.running)
        return writer_deal(pl, b, &pos, err);
    if (!pipeline_check_rejects_limit(pl, err))
        return false;
    pipeline_progress(pl, false);
    return pipeline_flush(pl, &pl->w.lanes[0], 0, b, &pos, false, err);
}

bool
pipeline_run(Pipeline *pl, Err *err)
{
    bool ok = true;
    uint64_t total;
    Record rec = {0};
    bool in_txn = false; /* the last record held the batch open: inside a source transaction */
    bool piece_due = false; /* the batch is full inside a source transaction */

    pl->src_started = monotime_s();
    pl->src->ops->progress(pl->src, &pl->src_done0, &total);
    if (!pl->o->plan && !writer_start(pl, err))
        return false;
    for (;;)
    {
        bool eof = false;
        bool full;

        /* Not inside a source transaction (the last record held the batch
         * open): a stream stops on a commit boundary. */
        if (interrupt_signal() != 0 && !in_txn)
        {
            err_set(err, EC_INTERRUPTED, "interrupted by %s", interrupt_name());
            ok = false;
            break;
        }
        rec.batch_end = false;
        rec.batch_hold = false;
        rec.op = REC_INSERT;
        rec.old_fields = NULL;
        if (!source_next(pl->src, &rec, &eof, err))
        {
            ok = false;
            break;
        }
        if (eof)
            break;
        if (rec.op == REC_ABANDON)
        {
            /* Rolled back at the source: its pieces and the rows not yet
             * written go, the stream goes on. */
            if (!writer_wait(pl, err))
            {
                ok = false;
                break;
            }
            pipeline_txn_abandon(pl, "was given up by the stream (its reason above)");
            batch_reset(pl->batch);
            in_txn = false;
            piece_due = false;
            continue;
        }
        /* The batch filled up inside a source transaction and another change
         * of it follows: the batch is a piece (pipeline.h).  Its commit
         * instead ends the batch as usual: a transaction that exactly fills
         * a batch is no piece, so the next batch may go to another lane. */
        if (piece_due && rec.op != REC_BOUNDARY)
        {
            pl->batch->txn_piece = true;
            if (!pipeline_batch_full(pl, err))
            {
                ok = false;
                break;
            }
        }
        piece_due = false;
        in_txn = rec.op != REC_BOUNDARY && rec.batch_hold;
        if (rec.op == REC_BOUNDARY)
        {
            /* Nothing arrived for a while: what the batch holds goes now.
             * With batch_end, the position goes even with no row (the rows
             * before it went in a batch the size limit ended). */
            pl->batch->keep_position = rec.batch_end;
            if (((pl->batch->nrows > 0 || rec.batch_end) && !pipeline_batch_full(pl, err)) ||
                !writer_check(pl, err))
            {
                ok = false;
                break;
            }
            continue;
        }
        if (!pipeline_add_record(pl, &rec, err))
        {
            ok = false;
            break;
        }
        full = pl->batch->nrows >= pl->o->batch_rows ||
               pl->batch->data.len + pl->batch->aux.len >= pl->o->batch_bytes;
        /* Inside a source transaction, a full batch becomes a piece once the
         * next change of it arrives (above): written, the target transaction
         * left open for the rest, whose pieces follow on the same lane
         * (writer_deal). */
        piece_due = full && rec.batch_hold;
        if (!piece_due && (full || rec.batch_end) && !pipeline_batch_full(pl, err))
        {
            ok = false;
            break;
        }
    }
    if (ok)
    {
        SourcePosition pos;
        ok = writer_wait(pl, err);
        pl->src->ops->position(pl->src, &pos);
        ok = ok &&
             pipeline_flush(pl, writer_reader_lane(pl), writer_next_seq(pl), pl->batch, &pos,
                            true, err) &&
             pipeline_check_rejects_limit(pl, err);
    }
    else if (err->code == EC_FORMAT || err->code == EC_INTERRUPTED)
    {
        /* The input broke, or we were asked to stop: keep what was read
         * before (plan: count it, so that its report shows it). */
        Err ferr = {0};
        SourcePosition pos;

        pl->src->ops->position(pl->src, &pos);
        if (writer_wait(pl, &ferr) && in_txn)
        {
            /* Broke inside a source transaction: none of it is committed. */
            pipeline_txn_abandon(pl, NULL);
            batch_reset(pl->batch);
        }
        else if (ferr.code != EC_OK ||
                 ((pl->batch->nrows > 0 || writer_reader_lane(pl)->txn_open) &&
                  !pipeline_flush(pl, writer_reader_lane(pl), writer_next_seq(pl), pl->batch,
                                  &pos, false, &ferr)))
            log_warn("could not commit the rows read before the %s: %s",
                     err->code == EC_INTERRUPTED ? "interruption" : "error", ferr.msg);
        else if (err->code == EC_INTERRUPTED && !pl->o->plan)
        {
            char at[256];

            pl->hooks.where(pl->hooks.ctx, &pos, at, sizeof at);
            err_detail(err, "Every row read before it is committed: %s up to %s, %" PRIu64
                            " rows in all.",
                       pl->src_name, at, pl->st->read);
            err_hint(err, "Run the same command again to go on from there.");
        }
    }
    writer_stop(pl);
    if (!ok)
        pipeline_txn_abandon(pl, NULL);
    pipeline_progress(pl, true);
    return ok;
}

/* Plan: the DDL of every window that would be created, once each. */
static bool
pipeline_plan_ddl(Pipeline *pl, Err *err)
{
    ImportStats *st = pl->st;
    int64_t *times = xmalloc((st->nwindows ? st->nwindows : 1) * sizeof *times);
    size_t n = 0;
    EnsureResult res = {0};
    bool ok;

    for (size_t i = 0; i < st->nwindows; i++)
        if (st->windows[i].created)
            times[n++] = st->windows[i].lower_us;
    ok = n == 0 || partitions_ensure_times(pl->conn, pl->target, times, n, &pl->ensure, &res, err);
    free(times);
    return ok;
}

bool
pipeline_reload_columns(Pipeline *pl, PgConn *c, Err *err)
{
    TargetTable *now = NULL;
    size_t n;
    Column *cols;

    if (!catalog_load_target(c, pl->o->table, &now, err))
        return false;
    if (now->oid != pl->target->oid)
    {
        err_set(err, EC_CONFIG, "%s.%s is another table now (dropped and made again)",
                pl->target->schema, pl->target->name);
        catalog_target_free(now);
        return false;
    }
    /* the columns only: the partitions stay as this run knows them */
    n = pl->target->ncolumns;
    cols = pl->target->columns;
    pl->target->ncolumns = now->ncolumns;
    pl->target->columns = now->columns;
    now->ncolumns = n;
    now->columns = cols;
    catalog_target_free(now);
    return true;
}

void
pipeline_free(Pipeline *pl)
{
    if (pl == NULL)
        return;
    catalog_target_free(pl->target);
    free(pl->target_q);
    free(pl->lookup_name);
    free(pl->lookup_q);
    free(pl->copy_cols);
    pipeline_free_cols_q(pl);
    free(pl->key_q);
    id_keyer_free(pl->keyer);
    time_parser_free(pl->tparser);
    time_parser_free(pl->wzone);
    tracker_free(pl->tracker);
    tracker_free(pl->taken);
    tracker_free(pl->returned_delays);
    tracker_free(pl->held);
    for (size_t i = 0; i < pl->nbufs; i++)
        batch_free(&pl->bufs[i]);
    free(pl->bufs);
    for (size_t l = 0; l < pl->w.nalloc; l++)
    {
        Lane *lane = &pl->w.lanes[l];

        if (l > 0)
        {
            pipeline_free_sink(pl, &lane->sink);
            pg_close(lane->conn);
        }
        sortwork_free(&lane->sort);
        refset_free(lane->keys);
        tracker_free(lane->txn_tracker);
        free(lane->txn_windows);
    }
    free(pl->w.lanes);
    refset_free(pl->w.spare);
    free(pl->w.hit);
    free(pl->w.busy_seq);
    pthread_cond_destroy(&pl->w.cv);
    pthread_mutex_destroy(&pl->w.mu);
    pthread_rwlock_destroy(&pl->catalog_lock);
    pg_close(pl->ddl_conn);
    buf_free(&pl->ref);
    free(pl->cols);
    srcref_template_free(pl->tmpl);
    refset_free(pl->plan_seen);
    free(pl->times);
    free(pl);
}

/* A lookup that remembers rows for a target that holds none: after the target
 * was dropped and made again without its lookup, every row would count as a
 * duplicate of one the new table does not have.  Said, not refused: a table
 * whose windows all retired is the same picture, and there it is right. */
static bool
pipeline_warn_orphan_lookup(Pipeline *pl, Err *err)
{
    PGresult *res;
    bool lookup_rows;
    bool target_rows;
    char *sql;
    bool ok;
    const char *params[1] = {pl->target_q};

    if (!pg_query(pl->conn, "SELECT has_table_privilege($1::regclass, 'SELECT')", 1, params, &res,
                  err))
        return false;
    ok = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!ok)
        return true;
    sql = xasprintf("SELECT EXISTS (SELECT 1 FROM %s), EXISTS (SELECT 1 FROM %s)", pl->lookup_q,
                    pl->target_q);
    ok = pg_query(pl->conn, sql, 0, NULL, &res, err);
    free(sql);
    if (!ok)
        return false;
    lookup_rows = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    target_rows = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    PQclear(res);
    if (lookup_rows && !target_rows)
        log_warn("%s is empty, but its lookup %s remembers rows imported before: they count as "
                 "duplicates and are not inserted again.  If %s was dropped and made again, drop "
                 "the lookup too (DROP TABLE %s) and run again",
                 pl->target_q, pl->lookup_q, pl->target_q, pl->lookup_q);
    return true;
}

/* --lookup-keys can choose a new lookup's keys, not change an existing one's:
 * its entries would no longer be found. */
static bool
pipeline_check_lookup_keys(const Pipeline *pl, Err *err)
{
    bool ordered = pl->lookup_shape == LOOKUP_REF_KEY || pl->lookup_shape == LOOKUP_LEGACY_ID;
    LookupKeys want = pl->o->lookup_keys;

    if (want == LOOKUP_KEYS_AS_FOUND || (want == LOOKUP_KEYS_ORDERED) == ordered)
        return true;
    err_set(err, EC_CONFIG,
            "lookup table %s has %s keys; --lookup-keys=%s cannot change that, or the "
            "references it holds would not be found again",
            pl->lookup_q, ordered ? "ordered" : "hashed", ordered ? "hashed" : "ordered");
    err_hint(err, "Leave --lookup-keys out to use the lookup as it is, or name a new lookup "
                  "with --lookup-table.");
    return false;
}

/* Read-only (plan): a target never imported into has no key yet; any key gives
 * the same windows and classifications. */
static bool
pipeline_plan_key(Pipeline *pl, uint8_t key[ID_KEY_LEN], Err *err)
{
    bool have_state = false;
    PGresult *res;
    const char *params[2] = {pl->target->schema, pl->target->name};

    if (!pg_query(pl->conn, "SELECT to_regclass('v7fill.id_key') IS NOT NULL", 0, NULL, &res,
                  err))
        return false;
    have_state = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    memset(key, 0, ID_KEY_LEN);
    if (have_state)
    {
        if (!pg_query(pl->conn,
                      "SELECT encode(key, 'hex') FROM v7fill.id_key "
                      "WHERE target_schema = $1 AND target_table = $2",
                      2, params, &res, err))
            return false;
        if (PQntuples(res) == 1)
        {
            const char *hex = PQgetvalue(res, 0, 0);
            for (size_t i = 0; i < ID_KEY_LEN && hex[2 * i]; i++)
            {
                unsigned v = 0;
                (void) sscanf(hex + 2 * i, "%2x", &v);
                key[i] = (uint8_t) v;
            }
        }
        PQclear(res);
    }
    return state_lookup_inspect(pl->conn, pl->target->schema, pl->lookup_name,
                                &pl->lookup_exists, &pl->lookup_shape, &pl->map_bits, err);
}

/* The lanes (--jobs), their buffers and locks; connections come with
 * writer_start. */
static void
pipeline_init_writers(Pipeline *pl)
{
    Writer *w = &pl->w;
    size_t n = pl->o->jobs > 1 && !pl->o->plan ? (size_t) pl->o->jobs : 1;

    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    pthread_rwlock_init(&pl->catalog_lock, NULL);
    w->nlanes = n;
    w->nalloc = n;
    w->lanes = xcalloc(n, sizeof *w->lanes);
    w->fail_seq = UINT64_MAX;
    for (size_t l = 0; l < n; l++)
    {
        w->lanes[l].pl = pl;
        if (n > 1)
            w->lanes[l].keys = refset_new();
    }
    w->lanes[0].conn = pl->conn;
    if (n > 1)
        w->spare = refset_new();
    w->hit = xcalloc(n, sizeof *w->hit);
    w->busy_seq = xcalloc(n, sizeof *w->busy_seq);
    pl->nbufs = n + 1;
    pl->bufs = xcalloc(pl->nbufs, sizeof *pl->bufs);
    for (size_t i = 0; i < pl->nbufs; i++)
        batch_init(&pl->bufs[i]);
    pl->batch = &pl->bufs[0];
}

/* --jobs N needs N connections: more than the server allows is refused before
 * anything is written. */
static bool
pipeline_check_jobs(Pipeline *pl, Err *err)
{
    PGresult *res;
    long max;
    long reserved;
    long used;
    int jobs = pl->o->jobs;

    if (jobs <= 1 || pl->o->plan)
        return true;
    if (!pg_query(pl->conn,
                  "SELECT current_setting('max_connections')::int, "
                  "current_setting('superuser_reserved_connections')::int, "
                  "(SELECT count(*) FROM pg_catalog.pg_stat_activity "
                  "WHERE backend_type = 'client backend')",
                  0, NULL, &res, err))
        return false;
    max = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    reserved = strtol(PQgetvalue(res, 0, 1), NULL, 10);
    used = strtol(PQgetvalue(res, 0, 2), NULL, 10);
    PQclear(res);
    if (jobs > max - reserved)
    {
        err_set(err, EC_CONFIG,
                "--jobs %d needs %d connections; the server's max_connections = %ld (%ld of them "
                "reserved for superusers) allows at most %ld",
                jobs, jobs, max, reserved, max - reserved);
        err_hint(err, "Lower --jobs, or raise max_connections on the server.");
        return false;
    }
    if (jobs - 1 > max - reserved - used)
    {
        err_set(err, EC_CONFIG,
                "--jobs %d needs %d more connections; the server has %ld of max_connections = "
                "%ld in use (%ld reserved for superusers)",
                jobs, jobs - 1, used, max, reserved);
        err_hint(err, "Lower --jobs, or run it when fewer clients are connected.");
        return false;
    }
    return true;
}

/* --key-map's options that cannot go together. */
static bool
pipeline_check_key_map(const PipelineOptions *o, Err *err)
{
    if (!o->key_map_column)
        return true;
    if (o->source_ref)
    {
        err_set(err, EC_USAGE, "--key-map and --source-ref do not go together: with a key map "
                               "the row's reference is its key");
        return false;
    }
    if (o->keep_ref_text)
    {
        err_set(err, EC_USAGE, "--key-map and --keep-ref-text do not go together: the key map "
                               "stores the key itself, no reference text");
        return false;
    }
    if (o->key_map_type && lookup_map_type_bits(o->key_map_type) == 0)
    {
        err_set(err, EC_USAGE, "key map type \"%s\": smallint, integer or bigint",
                o->key_map_type);
        return false;
    }
    return true;
}

bool
pipeline_open(PgConn *c, const PipelineOptions *o, const PipelineInputs *inputs, ImportStats *st,
              Pipeline **out, Err *err)
{
    Pipeline *pl = xcalloc(1, sizeof *pl);

    *out = pl;
    memset(st, 0, sizeof *st);
    buf_init(&st->ddl);
    pl->conn = c;
    pl->o = o;
    pl->inputs = inputs;
    pl->st = st;
    pl->started = monotime_s();
    pl->seg_at = pl->started;
    pl->now_us = o->now_us ? o->now_us : wall_now_us();
    pl->day_cache.day = INT64_MIN;
    pipeline_init_writers(pl);
    buf_init(&pl->ref);
    ensure_options_default(&pl->ensure);
    pl->ensure.granularity = o->granularity;
    pl->ensure.window_tz = o->window_tz;
    pl->ensure.lock_timeout_ms = o->lock_timeout_ms;
    pl->lookup_exists = true;
    if (o->plan)
    {
        pl->ensure.dry_run = true;
        pl->ensure.ddl_out = &st->ddl;
    }

    if (!pipeline_check_jobs(pl, err) || !catalog_load_target(c, o->table, &pl->target, err))
        return false;
    if (pl->target->key_kind != KEY_UUID7)
        return err_set(err, EC_CONFIG,
                       "import needs a target partitioned on a uuid key; %s.%s is "
                       "partitioned on \"%s\" (not uuid)",
                       pl->target->schema, pl->target->name, pl->target->key_column);
    pl->target_q = pg_qualified(c, pl->target->schema, pl->target->name);
    if (!pipeline_check_key_map(o, err))
        return false;
    {
        /* the key map's default name: <table>_id_map */
        char *map_name = o->key_map_column && !o->lookup_table
                             ? xasprintf("%s_id_map", pl->target->name)
                             : NULL;
        bool named = state_lookup_name(pl->target->name, map_name ? map_name : o->lookup_table,
                                       &pl->lookup_name, err);

        free(map_name);
        if (!named)
            return false;
    }
    pl->lookup_q = pg_qualified(c, pl->target->schema, pl->lookup_name);
    (void) snprintf(st->lookup_table, sizeof st->lookup_table, "%s.%s", pl->target->schema,
                    pl->lookup_name);
    if (!time_parser_new(o->time_format, o->input_tz, &pl->tparser, err))
        return false;
    if (!partitions_effective_granularity(pl->target, &pl->ensure, &pl->gran, err))
        return false;
    if (pl->ensure.window_tz && strcmp(pl->ensure.window_tz, "UTC") != 0 &&
        !time_parser_new_window(pl->ensure.window_tz, &pl->wzone, err))
        return false;
    {
        /* Near cutoff: 10% of the retention by default, but at least one window. */
        Retention ret;
        int64_t near = o->near_cutoff_us;
        int64_t lo;
        int64_t hi;

        if (!retention_resolve(c, pl->target->schema, pl->target->name, o->retention, &ret, err))
            return false;
        st->retention_us = ret.source == RETENTION_NONE ? 0 : ret.us;
        retention_describe(&ret, st->retention_from, sizeof st->retention_from);
        pipeline_window_of(pl, pl->now_us, &lo, &hi);
        if (near == 0 && st->retention_us > 0)
            near = st->retention_us / 10 > hi - lo ? st->retention_us / 10 : hi - lo;
        pl->tracker = tracker_new(st->retention_us, near);
        st->near_cutoff_us = near;
    }
    return true;
}

bool
pipeline_setup(Pipeline *pl, Err *err)
{
    PgConn *c = pl->conn;
    uint8_t key[ID_KEY_LEN];
    /* the shape of a lookup this run would create */
    bool map = pl->o->key_map_column != NULL;
    LookupShape new_shape = map                                        ? LOOKUP_LEGACY_ID
                            : pl->o->lookup_keys == LOOKUP_KEYS_HASHED ? LOOKUP_REF_HASH_UUID
                                                                       : LOOKUP_REF_KEY;

    if (pl->o->plan)
    {
        if (!pipeline_plan_key(pl, key, err))
            return false;
    }
    else if (!state_setup(c, err) || !maintain_setup(c, err) ||
             !state_id_key(c, pl->target->schema, pl->target->name, key, err) ||
             !(map ? state_lookup_create_map(c, pl->target->schema, pl->lookup_name,
                                             pl->o->key_map_type, !pl->target->distributed,
                                             &pl->lookup_shape, &pl->map_bits, err)
                   : state_lookup_create(c, pl->target->schema, pl->lookup_name, new_shape,
                                         &pl->lookup_shape, err)) ||
             !citus_distribute_lookup(c, pl->target, pl->lookup_name,
                                      lookup_key_column(pl->lookup_shape), err))
        return false;
    if (!pl->lookup_exists)
    {
        pl->lookup_shape = new_shape; /* plan: what would be created */
        pl->map_bits = map ? lookup_map_type_bits(pl->o->key_map_type ? pl->o->key_map_type
                                                                      : "bigint")
                           : 0;
    }
    if (!state_lookup_kind_check(pl->lookup_q, map, pl->lookup_shape, pl->map_bits, err) ||
        !pipeline_check_lookup_keys(pl, err))
        return false;
    pl->st->lookup_keys_ordered =
        pl->lookup_shape == LOOKUP_REF_KEY || pl->lookup_shape == LOOKUP_LEGACY_ID;
    if (!id_keyer_new(key, sizeof key, &pl->keyer, err))
        return false;
    memset(key, 0, sizeof key);
    return !pl->lookup_exists || pipeline_warn_orphan_lookup(pl, err);
}

bool
pipeline_attach(Pipeline *pl, Source *src, bool unnamed_last, const PipelineHooks *hooks,
                Err *err)
{
    pl->src = src;
    pl->src_name = src->ops->name(src);
    pl->unnamed_last = unnamed_last;
    /* A run that failed (a stream's lost source) may have left records of a
     * batch that never committed: the next source hands them out again. */
    batch_reset(pl->batch);
    pl->hooks = *hooks;
    if (!pipeline_map_columns(pl, err))
        return false;
    /* The COPY column list follows this source's columns. */
    pipeline_drop_sink(pl);
    if (!(pl->o->plan && !pl->lookup_exists))
    {
        SinkConfig sc = {pl->target_q, pl->copy_cols, pl->lookup_q, pl->key_q,
                         pl->o->keep_ref_text, pl->lookup_shape, false,
                         (const char *const *) pl->cols_q, pl->ncols_q,
                         pl->target->distributed, pl->map_bits};
        if (!pipeline_may_read_keys(pl, &sc.probe_target, err))
            return false;
        if (!pl->target->distributed)
        {
            sc.merge_key_moves_upto = pl->merge_key_moves_upto;
            sc.merge_before_xid = pl->merge_before_xid;
        }
        pl->sink = sink_new(pl->conn, &sc);
        pl->sink_cfg = sc;
        pl->w.lanes[0].sink = pl->sink;
    }
    return true;
}

bool
pipeline_finish(Pipeline *pl, Err *err)
{
    ImportStats *st = pl->st;

    if (pl->o->plan && !pipeline_plan_ddl(pl, err))
        return false;
    if (st->expired_kept > 0)
        log_warn("%" PRIu64 " rows were inserted into windows already past the retention "
                 "(--keep-expired): retention will drop them",
                 st->expired_kept);
    return true;
}

/* The whole run's delays as JSON: the segments taken and the rows since. */
static char *
pipeline_run_delays(Pipeline *pl)
{
    Tracker *all;
    char *json = tracker_to_json(pl->tracker);
    Err e = {0};

    if (pl->taken == NULL || json == NULL)
        return json;
    all = tracker_new(tracker_retention(pl->tracker), tracker_near_cutoff(pl->tracker));
    tracker_copy_into(all, pl->taken);
    if (!tracker_merge_json(all, json, &e))
    {
        log_debug("the run's delays: %s", e.msg);
        tracker_free(all);
        return json;
    }
    free(json);
    json = tracker_to_json(all);
    tracker_free(all);
    return json;
}

bool
pipeline_take_segment(Pipeline *pl, PipelineSegment *out)
{
    const ImportStats *st = pl->st;
    PipelineSegment now;
    Tracker *empty;
    double taken_at;
    Err e = {0};

    memset(out, 0, sizeof *out);
    if (pl->tracker == NULL)
        return false;
    pthread_mutex_lock(&pl->w.mu);
    for (size_t l = 0; l < pl->w.nalloc; l++)
        if (pl->w.lanes[l].txn_open)
        {
            pthread_mutex_unlock(&pl->w.mu);
            return false;
        }
    now.read = st->read;
    now.inserted = st->inserted;
    now.duplicates = st->duplicates;
    now.rejected = st->rejected;
    pthread_rwlock_rdlock(&pl->catalog_lock); /* partition creation writes it */
    now.partitions_created = st->partitions_created;
    pthread_rwlock_unlock(&pl->catalog_lock);
    out->read = now.read - pl->seg_base.read;
    out->inserted = now.inserted - pl->seg_base.inserted;
    out->duplicates = now.duplicates - pl->seg_base.duplicates;
    out->rejected = now.rejected - pl->seg_base.rejected;
    out->partitions_created = now.partitions_created - pl->seg_base.partitions_created;
    taken_at = monotime_s();
    out->elapsed_s = taken_at - pl->seg_at;
    out->delay_json = tracker_to_json(pl->tracker);
    if (out->delay_json == NULL)
    {
        pthread_mutex_unlock(&pl->w.mu);
        return false;
    }
    if (pl->taken == NULL)
        pl->taken = tracker_new(tracker_retention(pl->tracker), tracker_near_cutoff(pl->tracker));
    if (!tracker_merge_json(pl->taken, out->delay_json, &e) ||
        (pl->returned_delays && !tracker_merge_json(pl->returned_delays, out->delay_json, &e)))
    {
        /* not expected (the tracker's own document): the segment stays open */
        log_debug("could not take the segment's delays: %s", e.msg);
        pthread_mutex_unlock(&pl->w.mu);
        free(out->delay_json);
        memset(out, 0, sizeof *out);
        return false;
    }
    if (pl->returned_delays)
    {
        /* a segment given back before: this one carries it (it is in taken already) */
        free(out->delay_json);
        out->delay_json = tracker_to_json(pl->returned_delays);
        tracker_free(pl->returned_delays);
        pl->returned_delays = NULL;
        out->read += pl->returned.read;
        out->inserted += pl->returned.inserted;
        out->duplicates += pl->returned.duplicates;
        out->rejected += pl->returned.rejected;
        out->partitions_created += pl->returned.partitions_created;
        out->elapsed_s += pl->returned.elapsed_s;
        memset(&pl->returned, 0, sizeof pl->returned);
    }
    empty = tracker_new(tracker_retention(pl->tracker), tracker_near_cutoff(pl->tracker));
    tracker_copy_into(pl->tracker, empty);
    tracker_free(empty);
    now.delay_json = NULL;
    pl->seg_base = now;
    pl->seg_at = taken_at;
    pthread_mutex_unlock(&pl->w.mu);
    return true;
}

void
pipeline_return_segment(Pipeline *pl, PipelineSegment *seg)
{
    Err e = {0};

    pthread_mutex_lock(&pl->w.mu);
    if (pl->returned_delays == NULL)
        pl->returned_delays =
            tracker_new(tracker_retention(pl->tracker), tracker_near_cutoff(pl->tracker));
    if (seg->delay_json && !tracker_merge_json(pl->returned_delays, seg->delay_json, &e))
        log_debug("could not keep the segment's delays: %s", e.msg);
    pl->returned.read += seg->read;
    pl->returned.inserted += seg->inserted;
    pl->returned.duplicates += seg->duplicates;
    pl->returned.rejected += seg->rejected;
    pl->returned.partitions_created += seg->partitions_created;
    pl->returned.elapsed_s += seg->elapsed_s;
    pthread_mutex_unlock(&pl->w.mu);
    free(seg->delay_json);
    memset(seg, 0, sizeof *seg);
}

void
pipeline_merge_key_moves(Pipeline *pl, uint64_t upto, uint64_t before_xid)
{
    pl->merge_key_moves_upto = upto;
    pl->merge_before_xid = before_xid;
}

void
pipeline_hold_expired(Pipeline *pl)
{
    if (pl->tracker == NULL)
        return;
    pthread_mutex_lock(&pl->w.mu);
    tracker_free(pl->held);
    pl->held = tracker_new(tracker_retention(pl->tracker), tracker_near_cutoff(pl->tracker));
    pl->held_at = monotime_s();
    pthread_mutex_unlock(&pl->w.mu);
}

bool
pipeline_segment_with_held(Pipeline *pl, const PipelineSegment *seg, PipelineSegment *with,
                           uint64_t *rows)
{
    Tracker *all;
    char *json;
    Err e = {0};
    bool ok;

    *rows = 0;
    memset(with, 0, sizeof *with);
    pthread_mutex_lock(&pl->w.mu);
    if (pl->held == NULL || tracker_total(pl->held) == 0)
    {
        pthread_mutex_unlock(&pl->w.mu);
        return false;
    }
    all = tracker_new(tracker_retention(pl->held), tracker_near_cutoff(pl->held));
    tracker_copy_into(all, pl->held);
    *rows = tracker_total(pl->held);
    /* Its span covers their inserts too (a run row's finished_at and
     * elapsed_s bracket the insert times of its rows). */
    *with = *seg;
    if (monotime_s() - pl->held_at > with->elapsed_s)
        with->elapsed_s = monotime_s() - pl->held_at;
    pthread_mutex_unlock(&pl->w.mu);
    ok = seg->delay_json == NULL || tracker_merge_json(all, seg->delay_json, &e);
    json = ok ? tracker_to_json(all) : NULL;
    tracker_free(all);
    if (json == NULL)
    {
        log_warn("the delays of %" PRIu64 " expired rows could not be counted: %s", *rows,
                 ok ? "out of memory" : e.msg);
        memset(with, 0, sizeof *with);
        *rows = 0;
        return false;
    }
    with->delay_json = json;
    return true;
}

void
pipeline_drop_held(Pipeline *pl)
{
    pthread_mutex_lock(&pl->w.mu);
    tracker_free(pl->held);
    pl->held = NULL;
    pthread_mutex_unlock(&pl->w.mu);
}

double
pipeline_segment_age(const Pipeline *pl)
{
    return monotime_s() - pl->seg_at;
}

void
pipeline_segment_exclude(Pipeline *pl, const PipelineSegment *earlier)
{
    pthread_mutex_lock(&pl->w.mu);
    pl->seg_base.read += earlier->read;
    pl->seg_base.inserted += earlier->inserted;
    pl->seg_base.duplicates += earlier->duplicates;
    pl->seg_base.rejected += earlier->rejected;
    pthread_mutex_unlock(&pl->w.mu);
}

bool
pipeline_close(Pipeline *pl, bool ok, Err *err)
{
    ImportStats *st = pl->st;

    st->elapsed_s = monotime_s() - pl->started;
    pipeline_drop_sink(pl);
    st->sink = pl->sink_total;
    if (pl->tracker)
        st->delay_json = pipeline_run_delays(pl);
    if (ok && !import_stats_balanced(st))
    {
        err_set(err, EC_INTERNAL,
                "accounting does not balance: read %" PRIu64 " != inserted %" PRIu64
                " + duplicates %" PRIu64 " + rejected %" PRIu64 " + expired %" PRIu64,
                st->read, st->inserted, st->duplicates, st->rejected, st->expired);
        ok = false;
    }
    return ok;
}

const TargetTable *
pipeline_target(const Pipeline *pl)
{
    return pl->target;
}

const char *
pipeline_target_q(const Pipeline *pl)
{
    return pl->target_q;
}

const char *
pipeline_lookup_q(const Pipeline *pl)
{
    return pl->lookup_q;
}

double
pipeline_elapsed(const Pipeline *pl)
{
    return monotime_s() - pl->started;
}
