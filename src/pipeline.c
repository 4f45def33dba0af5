/*
 * Import pipeline: source -> record -> mint -> route -> sink -> track.
 *
 * One batch at a time: records are classified and encoded into a Batch
 * (bounded by --batch-rows), the windows they need are ensured, the sink
 * writes the batch in one transaction whose last statements make the rejects
 * durable and advance the checkpoint.  A lost connection is retried; whether
 * the batch committed is read back from the checkpoint, so nothing is counted
 * or written twice.
 */
#include "v7fill/pipeline.h"

#include <inttypes.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "v7fill/catalog.h"
#include "v7fill/civil.h"
#include "v7fill/copy_encode.h"
#include "v7fill/import_report.h"
#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/maintain.h"
#include "v7fill/refset.h"
#include "v7fill/rejects.h"
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
 * The writer thread writes batch N (windows, probe, COPY, checkpoint, commit)
 * while the reader parses batch N+1 into the other buffer.  The two meet only
 * in writer_submit and writer_wait, under the mutex: while a batch is with
 * the writer, the reader touches nothing but its own batch, the source and
 * the in-batch dedup set; the writer owns the connection and everything it
 * updates (stats, checkpoint, tracker, rejects and late-rows files).
 */
typedef struct Writer
{
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool running;
    bool busy;          /* a batch was handed over and is not written yet */
    bool quit;
    Batch *b;
    SourcePosition pos;
    bool ok;            /* outcome of the last batch written */
    Err err;
} Writer;

typedef struct Importer
{
    PgConn *conn;
    const ImportOptions *o;
    ImportStats *st;
    TargetTable *target;
    char *target_q;
    char *lookup_name;
    char *lookup_q;
    char *copy_cols;
    char *key_q;        /* quoted key column */
    IdKeyer *keyer;
    TimeParser *tparser;
    Rejects *rejects;
    Rejects *late;     /* late-rows output (expired and near-cutoff rows) */
    Tracker *tracker;
    Granularity gran;  /* window size for rows whose partition does not exist yet */
    TimeParser *wzone; /* --window-tz of those windows (NULL: UTC) */
    Sink *sink;
    Batch bufs[2];      /* double buffer: one filling, one with the writer */
    Batch *batch;       /* the batch being filled */
    Writer w;
    Buf ref;
    EnsureOptions ensure;
    int64_t now_us;
    DayCache day_cache;
    /* per file */
    Source *src;
    const char *src_name;
    SourceColumn *cols;
    size_t ncols;
    int time_idx;
    int id_idx;
    int unnamed_idx; /* the header's unnamed last column, neither ignored nor mapped; -1 */
    int time_target; /* created_at, given the event time when no input column of that
                        name stores it; -1: none */
    SrcrefTemplate *tmpl;
    bool lookup_exists;
    LookupShape lookup_shape; /* the lookup's key column (ordered keys only in ref_key) */
    SinkStats sink_total;
    char identity[256];
    bool use_checkpoint;
    char *options_text; /* the options that decide rows and ids (importer_options_text) */
    Checkpoint cp;    /* committed state of the current file */
    uint64_t file_read, file_inserted, file_duplicates, file_rejected, file_expired;
    SortWork sort;      /* in-batch dedup (writer): sorting by hash */
    RefSet *plan_seen;  /* plan: the references counted as inserted so far (writer) */
    int64_t *times;
    size_t times_cap;
    /* progress */
    double started;
    double last_progress;
    double file_started; /* when reading of the current file began (after any resume seek) */
    uint64_t file_done0; /* the source's progress position then */
    size_t files_done;   /* files this run read to their end */
    bool checkpoints;    /* v7fill.checkpoint can be read (plan creates nothing) */
    bool all_known;      /* every file's size is known (regular files): all_bytes is true */
    uint64_t all_bytes;  /* the sizes of all the files (as the sources count progress) */
    uint64_t files_bytes;     /* sizes of the files finished by this run */
    uint64_t files_bytes_run; /* what they took of this run's reading (less any resumed part) */
    size_t files_empty;       /* 0-byte files passed over (several files, with a header) */
    char first_empty[256];    /* the first of them, printable */
} Importer;

static double
mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int64_t
wall_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void
import_options_default(ImportOptions *o)
{
    memset(o, 0, sizeof *o);
    csv_options_default(&o->csv);
    o->batch_rows = DEFAULT_BATCH_ROWS;
    o->batch_bytes = DEFAULT_BATCH_BYTES;
    o->max_rejects = UINT64_MAX;
    o->max_rejects_pct = -1;
    o->max_future_us = 5 * US_PER_MIN;
    o->analyze = true;
    o->granularity = GRAN_AUTO;
    o->lock_timeout_ms = 5000;
    o->reconnect_attempts = 5;
}

bool
import_stats_balanced(const ImportStats *st)
{
    return st->read == st->inserted + st->duplicates + st->rejected + st->expired;
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
importer_window_of(const Importer *im, int64_t us, int64_t *lo, int64_t *hi)
{
    Window w;
    Err ignored = {0};

    if (im->wzone != NULL && window_at(im->gran, im->wzone, us, &w, &ignored))
    {
        *lo = w.lower_us;
        *hi = w.upper_us;
        return;
    }
    window_of(im->gran, us, lo, hi);
}

static WindowCount *
stats_window(Importer *im, int64_t us)
{
    ImportStats *st = im->st;
    const Partition *p = catalog_partition_for(im->target, us);
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
        importer_window_of(im, us, &lo, &hi);
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
 * importer_map_columns decides, for each source column, which target column
 * receives it, and builds the COPY column list: the key column first, then the
 * mapped columns in source order.
 */
static bool
importer_map_columns(Importer *im, Err *err)
{
    const ImportOptions *o = im->o;
    TargetTable *t = im->target;
    size_t ncols = 0;
    const char *const *names = im->src->ops->columns(im->src, &ncols);
    bool *written = xcalloc(t->ncolumns, sizeof *written);
    int key_idx = catalog_column_index(t, t->key_column);
    Buf cols;
    bool ok = false;

    free(im->cols);
    im->cols = xcalloc(ncols ? ncols : 1, sizeof *im->cols);
    im->ncols = ncols;
    im->time_idx = -1;
    im->id_idx = -1;
    im->unnamed_idx = -1;
    im->time_target = -1;

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
                    err_printable(o->maps[m].to, pt, sizeof pt), im->src_name, pf);
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
                    err_printable(o->ignore[k], pn, sizeof pn), im->src_name, pn);
            goto out;
        }
    }
    for (size_t i = 0; i < ncols; i++)
    {
        const char *to = names[i];
        int ti;
        char pn[256]; /* names[i] fit for a message: header names are untrusted */

        err_printable(names[i], pn, sizeof pn);
        im->cols[i].target = -1;
        if (o->time_column ? strcmp(names[i], o->time_column) == 0
                           : strcmp(names[i], "created_at") == 0)
        {
            im->cols[i].is_time = true;
            im->time_idx = (int) i;
        }
        if (o->id_column && strcmp(names[i], o->id_column) == 0)
        {
            im->cols[i].is_id = true;
            im->id_idx = (int) i;
            continue;
        }
        if (name_listed(names[i], o->ignore, o->nignore))
            continue;
        for (size_t m = 0; m < o->nmaps; m++)
            if (strcmp(o->maps[m].from, names[i]) == 0)
                to = o->maps[m].to;
        if (to == names[i] && i + 1 == ncols && source_csv_unnamed_last(im->src))
        {
            /* "a,b,c," in the header: rows must leave the column empty. */
            im->unnamed_idx = (int) i;
            continue;
        }
        ti = catalog_column_index(t, to);
        if (ti < 0)
        {
            if (im->cols[i].is_time)
                continue; /* the event time need not be stored */
            char pt[256];
            err_set(err, EC_USAGE, "column \"%s\" of %s has no target column \"%s\" in %s.%s", pn,
                    im->src_name, err_printable(to, pt, sizeof pt), t->schema, t->name);
            err_hint(err, "Map it with --map %s=TARGET_COLUMN or skip it with --ignore-column %s.",
                     pn, pn);
            goto out;
        }
        if (ti == key_idx)
        {
            err_set(err, EC_USAGE,
                    "column \"%s\" of %s would write the partition key \"%s\", which v7fill mints",
                    pn, im->src_name, t->key_column);
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
        im->cols[i].target = ti;
        im->cols[i].format_time = im->cols[i].is_time && is_timestamp_type(t->columns[ti].type);
    }
    if (o->time_column && im->time_idx < 0)
    {
        err_set(err, EC_USAGE, "--time-column %s: %s has no such column", o->time_column,
                im->src_name);
        goto out;
    }
    if (im->time_idx < 0 && im->id_idx < 0)
    {
        err_set(err, EC_USAGE, "%s has no event time column", im->src_name);
        err_hint(err, "Name it with --time-column (the default is created_at), or give ids "
                      "with --id-column.");
        goto out;
    }
    if (o->id_column && im->id_idx < 0)
    {
        err_set(err, EC_USAGE, "--id-column %s: %s has no such column", o->id_column,
                im->src_name);
        goto out;
    }
    if (im->time_idx < 0 || !im->cols[im->time_idx].format_time)
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
            im->time_target = ti;
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
                    t->columns[ti].name, im->src_name);
            err_hint(err, "Map a source column to it with --map SOURCE=%s.", t->columns[ti].name);
            goto out;
        }
    }
    buf_init(&cols);
    buf_putc(&cols, '(');
    free(im->key_q);
    im->key_q = pg_ident(im->conn, t->key_column);
    buf_puts(&cols, im->key_q);
    for (size_t i = 0; i < ncols; i++)
    {
        if (im->cols[i].target >= 0)
        {
            char *q = pg_ident(im->conn, t->columns[im->cols[i].target].name);
            buf_puts(&cols, ", ");
            buf_puts(&cols, q);
            free(q);
        }
    }
    if (im->time_target >= 0)
    {
        char *q = pg_ident(im->conn, t->columns[im->time_target].name);
        buf_puts(&cols, ", ");
        buf_puts(&cols, q);
        free(q);
    }
    buf_putc(&cols, ')');
    free(im->copy_cols);
    im->copy_cols = cols.data;
    srcref_template_free(im->tmpl);
    im->tmpl = NULL;
    if (o->source_ref && !srcref_template_compile(o->source_ref, names, ncols, &im->tmpl, err))
        goto out;
    ok = true;
out:
    free(written);
    return ok;
}

/* ---- per record ---------------------------------------------------------- */

/* A record longer than this has its default reference hashed in pieces
 * when only a prefix of the text is kept (importer_add_record). */
#define REF_STREAM_MIN ((size_t) 1 << 20)
/* The prefix kept: what the tracker's examples show, and a UTF-8 sequence. */
#define REF_PREFIX_MAX (TRACKER_REF_MAX + 4)

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
    /* Prefixes the pipeline writes first, then what the CSV source says. */
    static const char *const prefixes[] = {
        "unparsable time", "missing event time", "clock ahead", "time out of range",
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
importer_client_reject(Importer *im, BatchRow *r, const char *category, const char *reason)
{
    char full[512];
    (void) category;
    (void) snprintf(full, sizeof full, "%s", reason);
    batch_reject(im->batch, r, full, NULL);
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
 * importer_mark_repeats: rows of the batch with the same reference are one
 * row.  The first one read is written; each later one waits behind the one
 * read before it (repeat_next) as a duplicate, and takes its place if that
 * one does not land (refused by the server: sink_settle).  Rows expired or
 * rejected already take no part.  Found by sorting the pending rows by hash
 * (writer thread: the reader keeps no set).
 */
static void
importer_mark_repeats(Importer *im, Batch *b)
{
    size_t n = 0;

    if (b->by_hash_cap < b->nrows)
    {
        b->by_hash_cap = b->nrows;
        b->by_hash = xrealloc(b->by_hash, b->by_hash_cap * sizeof *b->by_hash);
    }
    for (size_t i = 0; i < b->nrows; i++)
        if (b->rows[i].outcome == ROW_PENDING)
            b->by_hash[n++] = &b->rows[i];
    batch_rows_sort(&im->sort, b->by_hash, n, BATCH_BY_HASH);
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

/*
 * importer_add_record classifies one record into the batch: a client-side
 * reject, an in-batch duplicate, or a pending row with its id and COPY line.
 */
static bool
importer_add_record(Importer *im, const Record *rec, Err *err)
{
    Batch *b = im->batch;
    BatchRow *r = batch_add(b);
    Err rerr; /* 2.5 KiB: set by whatever fails, not cleared for every row */
    uint8_t mac[32];
    uint64_t bits = 0;
    int64_t us = 0;
    bool have_time = false;

    r->src_line = rec->line;
    r->raw_off = (uint32_t) batch_store(b, rec->raw ? rec->raw : "", rec->raw ? rec->raw_len : 0);
    r->raw_len = (uint32_t) (rec->raw ? rec->raw_len : 0);

    if (rec->error)
    {
        importer_client_reject(im, r, NULL, rec->error);
        return true;
    }
    if (im->unnamed_idx >= 0 && rec->fields[im->unnamed_idx].len > 0)
    {
        char reason[200];
        (void) snprintf(reason, sizeof reason,
                        "a value in column %d, which the header leaves unnamed "
                        "(--ignore-column c%d drops it, --map c%d=COLUMN keeps it)",
                        im->unnamed_idx + 1, im->unnamed_idx + 1, im->unnamed_idx + 1);
        importer_client_reject(im, r, NULL, reason);
        return true;
    }
    if (im->time_idx >= 0)
    {
        const Field *f = &rec->fields[im->time_idx];
        if (f->is_null || f->len == 0)
        {
            importer_client_reject(im, r, NULL, "missing event time");
            return true;
        }
        if (!time_parse(im->tparser, f->data, f->len, &us, &rerr))
        {
            char reason[sizeof rerr.msg + 32];
            (void) snprintf(reason, sizeof reason, "unparsable time: %s", rerr.msg);
            importer_client_reject(im, r, NULL, reason);
            return true;
        }
        have_time = true;
    }

    /* Source reference → keyed hash: the lookup key and the id's random bits.
     * Its text is read again only by the lookup (--keep-ref-text) and the
     * late-rows file (a retention); otherwise the tracker's examples keep a
     * prefix, and the default reference of a long record is hashed in
     * pieces: a record of 50 MB is not copied twice more. */
    bool ref_prefix = !im->o->keep_ref_text && im->st->retention_us == 0;
    buf_reset(&im->ref);
    if (ref_prefix && !im->tmpl && rec->raw_len > REF_STREAM_MIN)
    {
        RefStream rs = {im->keyer, &im->ref};

        id_keyer_hmac_begin(im->keyer);
        srcref_default_each(rec->fields, rec->nfields, ref_stream_piece, &rs);
        if (!id_keyer_hmac_end(im->keyer, mac, err))
            return false;
        /* It ends in ',': never an ordered key. */
        r->key_ordered = srcref_key(NULL, 0, mac, false, r->hash);
    }
    else
    {
        if (im->tmpl)
            srcref_build(im->tmpl, rec->fields, rec->nfields, &im->ref);
        else
            srcref_default(rec->fields, rec->nfields, &im->ref);
        if (!id_keyer_hmac(im->keyer, im->ref.data, im->ref.len, mac, err))
            return false;
        r->key_ordered = srcref_key(im->ref.data, im->ref.len, mac,
                                    im->lookup_shape == LOOKUP_REF_KEY, r->hash);
    }
    for (int i = 0; i < 8; i++)
        bits = (bits << 8) | mac[REF_HASH_LEN + i];
    {
        size_t keep = im->ref.len;
        if (ref_prefix && keep > REF_PREFIX_MAX)
            keep = REF_PREFIX_MAX;
        r->ref_off = (uint32_t) batch_store(b, im->ref.data, keep);
        r->ref_len = (uint32_t) keep;
    }

    bool keep_id = false;
    if (im->id_idx >= 0 && !(rec->fields[im->id_idx].is_null || rec->fields[im->id_idx].len == 0))
    {
        /* The input carries an id: keep it if it is a UUIDv7, reject it otherwise.
         * An empty id is minted like any row without one. */
        const Field *f = &rec->fields[im->id_idx];
        if (!uuid_parse(f->data, f->len, &r->id, &rerr) || !uuid7_check(&r->id, &rerr))
        {
            importer_client_reject(im, r, NULL, rerr.msg);
            return true;
        }
        keep_id = true;
        r->id_given = true;
        if (!have_time)
            us = uuid7_us(&r->id);
        have_time = true;
    }
    if (!have_time)
    {
        importer_client_reject(im, r, NULL, "missing event time: no time column and no id");
        return true;
    }
    if (us > im->now_us + im->o->max_future_us)
    {
        char t[48];
        char reason[160];
        civil_format_rfc3339(us, true, t, sizeof t);
        (void) snprintf(reason, sizeof reason,
                        "clock ahead: event time %s is beyond now + --max-future", t);
        importer_client_reject(im, r, NULL, reason);
        return true;
    }
    if (!keep_id && !uuid7_from_us(us, bits, &r->id, &rerr))
    {
        char reason[sizeof rerr.msg + 32];
        (void) snprintf(reason, sizeof reason, "time out of range: %s", rerr.msg);
        importer_client_reject(im, r, NULL, reason);
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
        importer_client_reject(im, r, NULL, reason);
        return true;
    }

    /* The target's COPY line: id, then the mapped fields. */
    {
        Buf *d = &b->data;
        char idtext[UUID_TEXT_SIZE];
        size_t start = d->len;

        uuid_format(&r->id, idtext);
        buf_append(d, idtext, UUID_TEXT_LEN);
        for (size_t i = 0; i < im->ncols; i++)
        {
            const Field *f = &rec->fields[i];
            if (im->cols[i].target < 0)
                continue;
            copy_encode_sep(d);
            if (im->cols[i].format_time)
                format_event_time(d, us, &im->day_cache);
            else if (rec->copy_plain && !f->is_null)
                buf_append(d, f->data, f->len); /* nothing to escape: the source said so */
            else
                copy_encode_field(d, f->data, f->len, f->is_null);
        }
        if (im->time_target >= 0)
        {
            /* An id's time to the millisecond: below it, ids made elsewhere
             * may carry random bits rather than a fraction (RFC 9562). */
            copy_encode_sep(d);
            format_event_time(d,
                              im->time_idx < 0 ? civil_floor_div(us, US_PER_MS) * US_PER_MS : us,
                              &im->day_cache);
        }
        copy_encode_eol(d);
        r->copy_off = (uint32_t) start;
        r->copy_len = (uint32_t) (d->len - start);
    }
    /* A batch is full before BATCH_MAX_BYTES; one record (at most 256 MiB of
     * CSV, twice that escaped) cannot carry it past 32-bit offsets. */
    if (b->data.len > UINT32_MAX || b->aux.len > UINT32_MAX)
        return err_set(err, EC_INTERNAL, "%s:%" PRIu64 ": a batch outgrew 4 GiB", im->src_name,
                       rec->line);
    return true;
}

/* ---- retention ----------------------------------------------------------- */

/*
 * importer_classify puts every pending row of the batch in its window and
 * classifies it against the retention.  Expired rows are not written (unless
 * --keep-expired) and so never cause a partition to be created.
 */
static void
importer_classify(Importer *im, Batch *b)
{
    int64_t now = im->o->now_us ? im->o->now_us : wall_now_us();
    /* the window of the row before, and its class: rows come in runs */
    int64_t lo = 0;
    int64_t hi = 0;
    DelayClass c = DELAY_ON_TIME;

    for (size_t i = 0; i < b->nrows; i++)
    {
        BatchRow *r = &b->rows[i];

        if (r->outcome != ROW_PENDING)
            continue;
        if (r->time_us >= lo && r->time_us < hi)
        {
            r->window_lower_us = lo;
            r->window_upper_us = hi;
        }
        else
        {
            const Partition *p = catalog_partition_for(im->target, r->time_us);

            if (p)
            {
                r->window_lower_us = p->lower_us;
                r->window_upper_us = p->upper_us;
            }
            else
                importer_window_of(im, r->time_us, &r->window_lower_us, &r->window_upper_us);
            c = tracker_classify(im->tracker, r->window_upper_us, now, NULL);
            /* Only a partition's bounds are reused: a window without one may
             * still hold a partition covering part of it. */
            lo = p ? p->lower_us : 0;
            hi = p ? p->upper_us : 0;
        }
        r->delay_class = (uint8_t) c;
        if (c == DELAY_EXPIRED && !im->o->keep_expired)
        {
            r->outcome = ROW_EXPIRED;
            r->client_decided = true;
        }
    }
}

static bool
importer_write_late(Importer *im, const Batch *b, Err *err)
{
    int64_t now = im->o->now_us ? im->o->now_us : wall_now_us();

    for (size_t i = 0; i < b->nrows; i++)
    {
        const BatchRow *r = &b->rows[i];
        char line[24];
        char id[UUID_TEXT_SIZE];
        char event[48];
        char delay[48];
        char left[48];
        char *ref;
        const char *fields[8];
        bool ok;
        int64_t time_left;

        if (r->delay_class == DELAY_ON_TIME ||
            (r->outcome != ROW_INSERTED && r->outcome != ROW_EXPIRED))
            continue;
        (void) tracker_classify(im->tracker, r->window_upper_us, now, &time_left);
        (void) snprintf(line, sizeof line, "%" PRIu64, r->src_line);
        uuid_format(&r->id, id);
        civil_format_rfc3339(r->time_us, true, event, sizeof event);
        duration_format(now - r->time_us, delay, sizeof delay);
        duration_format(time_left, left, sizeof left);
        ref = xstrndup(b->aux.data + r->ref_off, r->ref_len);
        fields[0] = im->src_name;
        fields[1] = line;
        fields[2] = r->delay_class == DELAY_EXPIRED
                        ? (r->outcome == ROW_INSERTED ? "expired (kept)" : "expired")
                        : "near cutoff";
        fields[3] = id;
        fields[4] = event;
        fields[5] = delay;
        fields[6] = left;
        fields[7] = ref;
        ok = rejects_write_row(im->late, fields, 8, err);
        free(ref);
        if (!ok)
            return false;
    }
    return rejects_sync(im->late, err);
}

/* ---- batch commit -------------------------------------------------------- */

typedef struct BatchTotals
{
    uint64_t read, inserted, duplicates, rejected, expired;
} BatchTotals;

static void
batch_totals(const Batch *b, BatchTotals *t)
{
    memset(t, 0, sizeof *t);
    t->read = b->nrows;
    for (size_t i = 0; i < b->nrows; i++)
    {
        switch (b->rows[i].outcome)
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
            case ROW_PENDING:
                break;
        }
    }
}

typedef struct CommitCtx
{
    Importer *im;
    SourcePosition pos;
    bool finished;
    Checkpoint next; /* checkpoint as of this batch's commit */
} CommitCtx;

/* Record, with the batch, which partitions received rows (maintenance will
 * not retire a window that did within its quiet period).  Last statement
 * before COMMIT, as maintain.h asks. */
static bool
importer_note_activity(Importer *im, const Batch *b, Err *err)
{
    const char *names[64];
    size_t n = 0;
    bool ok = true;
    const Partition *last = NULL;

    for (size_t i = 0; i < b->nrows; i++)
    {
        const Partition *p;
        bool seen = false;
        int64_t t = b->rows[i].time_us;

        if (b->rows[i].outcome != ROW_INSERTED)
            continue;
        if (last && t >= last->lower_us && t < last->upper_us)
            continue; /* the partition of the row before, already listed */
        p = catalog_partition_for(im->target, t);
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
            ok = maintain_note_activity(im->conn, im->target->schema, im->target->name, names, n,
                                        err);
            n = 0;
            if (!ok)
                return false;
        }
    }
    return maintain_note_activity(im->conn, im->target->schema, im->target->name, names, n, err);
}

/* Where the rejects and late-rows files stand, for the checkpoint: a resume
 * cuts back to there only the file it names, and only the rows past it that
 * are the input's own (rejects_resume). */
static void
importer_note_outputs(const Importer *im, Checkpoint *cp)
{
    bool late = rejects_file_id(im->late)[0] != '\0';

    cp->rejects_size = rejects_size(im->rejects);
    (void) snprintf(cp->rejects_path, sizeof cp->rejects_path, "%s", rejects_path(im->rejects));
    (void) snprintf(cp->rejects_file, sizeof cp->rejects_file, "%s",
                    rejects_file_id(im->rejects));
    cp->late_size = rejects_size(im->late);
    (void) snprintf(cp->late_path, sizeof cp->late_path, "%s", late ? rejects_path(im->late) : "");
    (void) snprintf(cp->late_file, sizeof cp->late_file, "%s", rejects_file_id(im->late));
}

/* Inside the batch's transaction: rejects durable, then the checkpoint. */
static bool
importer_before_commit(void *arg, Batch *b, Err *err)
{
    CommitCtx *cc = arg;
    Importer *im = cc->im;
    BatchTotals t;

    for (size_t i = 0; i < b->nrows; i++)
    {
        const BatchRow *r = &b->rows[i];
        if (r->outcome != ROW_REJECTED)
            continue;
        if (!rejects_write(im->rejects, im->src_name, r->src_line, batch_reason(b, r),
                           r->sqlstate, b->aux.data + r->raw_off, r->raw_len, err))
            return false;
    }
    if (!rejects_sync(im->rejects, err) || !importer_write_late(im, b, err))
        return false;
    batch_totals(b, &t);
    cc->next = im->cp;
    cc->next.offset = cc->pos.offset;
    cc->next.line = cc->pos.line;
    cc->next.records = cc->pos.records;
    cc->next.read += t.read;
    cc->next.inserted += t.inserted;
    cc->next.duplicates += t.duplicates;
    cc->next.rejected += t.rejected;
    cc->next.expired += t.expired;
    cc->next.content_len = cc->pos.content_len;
    cc->next.content_hash = cc->pos.content_hash;
    importer_note_outputs(im, &cc->next);
    cc->next.finished = cc->finished;
    if (im->use_checkpoint &&
        !state_checkpoint_put(im->conn, im->target->schema, im->target->name, im->target->oid,
                              im->identity, im->src_name, &cc->next, err))
        return false;
    return importer_note_activity(im, b, err);
}

static bool
importer_reconnect(Importer *im, Err *err)
{
    int delay = 1;

    for (int attempt = 1; attempt <= im->o->reconnect_attempts; attempt++)
    {
        Err rerr = {0};

        log_warn("connection lost (%s); reconnecting in %d s (attempt %d of %d)", err->msg, delay,
                 attempt, im->o->reconnect_attempts);
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
        if (pg_reconnect(im->conn, &rerr))
        {
            log_info("reconnected; continuing from the last committed batch");
            return true;
        }
        delay = delay < 16 ? delay * 2 : 30;
    }
    err_hint(err, "The server could not be reached again.  Committed batches are kept: run "
                  "the same command again to resume.");
    return false;
}

static void
importer_count_committed(Importer *im, const Batch *b)
{
    ImportStats *st = im->st;
    int64_t now = im->o->now_us ? im->o->now_us : wall_now_us();
    WindowCount *w = NULL; /* the window of the row before (rows come in runs) */

    for (size_t i = 0; i < b->nrows; i++)
    {
        const BatchRow *r = &b->rows[i];
        st->read++;
        st->keys_ordered += r->key_ordered;
        if (r->outcome == ROW_INSERTED || r->outcome == ROW_EXPIRED)
            tracker_add(im->tracker, r->time_us, now, (DelayClass) r->delay_class,
                        r->window_lower_us, r->window_upper_us, b->aux.data + r->ref_off,
                        r->ref_len);
        switch (r->outcome)
        {
            case ROW_INSERTED:
            {
                if (!(w && r->time_us >= w->lower_us && r->time_us < w->upper_us))
                    w = stats_window(im, r->time_us);
                st->inserted++;
                w->rows++;
                if (r->delay_class == DELAY_NEAR_CUTOFF)
                {
                    st->near_cutoff++;
                    w->near_cutoff++;
                }
                else if (r->delay_class == DELAY_EXPIRED)
                    st->expired_kept++;
                (void) tracker_classify(im->tracker, r->window_upper_us, now, &w->time_left_us);
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
                (void) snprintf(example, sizeof example, "%s:%" PRIu64 ": %s", im->src_name,
                                r->src_line, reason);
                st->rejected++;
                stats_reason(st, category, example);
                break;
            }
            case ROW_EXPIRED:
                st->expired++;
                break;
            case ROW_PENDING:
                break;
        }
    }
}

static bool
importer_ensure_windows(Importer *im, Batch *b, Err *err)
{
    size_t n = 0;
    EnsureResult res = {0};

    if (im->times_cap < b->nrows)
    {
        im->times_cap = b->nrows;
        im->times = xrealloc(im->times, im->times_cap * sizeof *im->times);
    }
    for (size_t i = 0; i < b->nrows; i++)
        if (b->rows[i].outcome == ROW_PENDING)
            im->times[n++] = uuid7_us(&b->rows[i].id);
    if (n == 0)
        return true;
    if (!partitions_ensure_times(im->conn, im->target, im->times, n, &im->ensure, &res, err))
        return false;
    im->st->partitions_created += (uint64_t) res.partitions_created;
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
 * file) is a duplicate, as import's lookup would make it. */
static bool
importer_plan_batch(Importer *im, Batch *b, Err *err)
{

    if (im->sink && !sink_probe_only(im->sink, b, err))
        return false;
    if (im->plan_seen == NULL)
        im->plan_seen = refset_new();
    for (size_t i = 0; i < b->nrows; i++)
    {
        BatchRow *r = &b->rows[i];
        if (r->outcome == ROW_PENDING) /* would be inserted, unless counted already */
            r->outcome = refset_add(im->plan_seen, r->hash) ? ROW_INSERTED : ROW_DUPLICATE;
    }
    importer_count_committed(im, b);
    return true;
}

/*
 * importer_flush writes batch b, whose last record ends at *pos, in one
 * transaction (or classifies it, for a plan).
 */
static bool
importer_flush(Importer *im, Batch *b, const SourcePosition *pos, bool finished, Err *err)
{
    CommitCtx cc = {0};
    uint64_t rejects_before = rejects_size(im->rejects);
    uint64_t late_before = rejects_size(im->late);
    int attempts = 0;
    int retries = 0; /* after a deadlock or a serialization failure */

    if (b->nrows == 0 && !finished)
        return true;
    cc.pos = *pos;
    cc.im = im;
    cc.finished = finished;
    /* Expired rows first: an expired row does not stand for its reference. */
    importer_classify(im, b);
    importer_mark_repeats(im, b);
    if (im->o->plan)
    {
        bool ok = importer_plan_batch(im, b, err);
        batch_reset(b);
        return ok;
    }
    for (bool check_commit = false;;)
    {
        bool ok;

        if (check_commit)
        {
            /* Did the batch commit before the connection went?  The checkpoint says. */
            Checkpoint now;

            if (!state_checkpoint_get(im->conn, im->target->schema, im->target->name,
                                      im->target->oid, im->identity, &now, err))
            {
                /* Lost again before we could tell: reconnect and ask again. */
                if (!pg_err_is_connection(err) || ++attempts > 5 || !importer_reconnect(im, err))
                    return false;
                continue;
            }
            check_commit = false;
            if (now.found && now.records == cc.pos.records && now.offset == cc.pos.offset)
            {
                log_info("the batch ending at line %" PRIu64 " had committed", cc.pos.line);
                /* Outcomes were reset with the failure; take the committed counts. */
                im->st->read += now.read - im->cp.read;
                im->st->inserted += now.inserted - im->cp.inserted;
                im->st->duplicates += now.duplicates - im->cp.duplicates;
                im->st->rejected += now.rejected - im->cp.rejected;
                im->st->expired += now.expired - im->cp.expired;
                im->cp = now;
                im->st->batches++;
                batch_reset(b);
                return true;
            }
            if (!now.found || now.records != im->cp.records || now.offset != im->cp.offset)
            {
                /* Neither this batch nor the last one the server acknowledged: it
                 * lost commits (synchronous_commit = off, or a failover to an
                 * asynchronous standby).  What it kept is consistent; resuming from
                 * its checkpoint is the only way to lose nothing. */
                err_set(err, EC_PG_CONNECT,
                        "the server lost transactions it had acknowledged: its checkpoint "
                        "for %s is at line %" PRIu64 ", v7fill had committed up to line %" PRIu64,
                        im->src_name, now.found ? now.line : 0, im->cp.line);
                err_detail(err, "This happens with synchronous_commit = off or after a failover "
                                "to an asynchronous standby.  The batches the server kept are "
                                "consistent.");
                err_hint(err, "Run the same command again: it resumes from what the server "
                              "kept and inserts the lost batches.");
                return false;
            }
            if (!rejects_truncate(im->rejects, rejects_before, err) ||
                !rejects_truncate(im->late, late_before, err))
                return false;
        }
        if (pg_is_broken(im->conn))
        {
            if (!pg_err_is_connection(err))
                err_set(err, EC_PG_CONNECT, "the connection to the server was lost");
            ok = false;
        }
        else
            ok = importer_ensure_windows(im, b, err) &&
                 sink_write(im->sink, b, importer_before_commit, &cc, err);
        if (ok)
            break;
        if ((strcmp(err->sqlstate, "40P01") == 0 || strcmp(err->sqlstate, "40001") == 0) &&
            ++retries <= 5)
        {
            /* Rolled back whole: write it again, as if for the first time. */
            log_warn("the batch ending at line %" PRIu64 " was rolled back (%s, SQLSTATE %s); "
                     "writing it again (attempt %d of 5)",
                     cc.pos.line, err->msg, err->sqlstate, retries);
            if (!rejects_truncate(im->rejects, rejects_before, err) ||
                !rejects_truncate(im->late, late_before, err))
                return false;
            continue;
        }
        if (!pg_err_is_connection(err) || ++attempts > 5)
            return false;
        if (!importer_reconnect(im, err))
            return false;
        check_commit = true;
    }
    importer_count_committed(im, b);
    im->cp = cc.next;
    if (b->nrows > 0)
        im->st->batches++;
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
 * resumed file's earlier part is neither work done nor work to do.  With
 * several files whose sizes are known, the ETA is for all of them.
 */
static void
importer_progress(Importer *im, bool final)
{
    double now = mono_now();
    uint64_t done = 0;
    uint64_t total = 0;
    double rate;
    bool tty = im->o->progress && isatty(STDERR_FILENO);
    bool many = im->o->nfiles > 1;
    char eta[48] = "";
    char which[48] = "";
    const char *verb = im->o->plan ? "would be inserted" : "inserted";

    /* A log's first line comes 10 s in, not at the start (nothing to say yet). */
    if (!tty && im->last_progress == 0)
        im->last_progress = im->started;
    if (!final && now - im->last_progress < (tty ? 0.5 : 10.0))
        return;
    if (!tty && log_current_level < LOG_LEVEL_INFO)
        return;
    im->last_progress = now;
    im->src->ops->progress(im->src, &done, &total);
    rate = (double) (im->st->read - im->st->read_resumed) /
           (now - im->started > 0.001 ? now - im->started : 0.001);
    if (many && im->all_known)
    {
        uint64_t run = im->files_bytes_run + (done - im->file_done0);
        uint64_t left = im->all_bytes > im->files_bytes + done
                            ? im->all_bytes - im->files_bytes - done
                            : 0;

        if (run > 0 && left > 0)
        {
            format_eta(eta, sizeof eta, (now - im->started) * (double) left / (double) run);
            (void) snprintf(eta + strlen(eta), sizeof eta - strlen(eta), " for all %zu files",
                            im->o->nfiles);
        }
    }
    else if (total > 0 && done > im->file_done0 && done < total && now > im->file_started)
        format_eta(eta, sizeof eta,
                   (now - im->file_started) * (double) (total - done) /
                       (double) (done - im->file_done0));
    if (many)
        (void) snprintf(which, sizeof which, " (file %" PRIu64 " of %zu)", im->st->files,
                        im->o->nfiles); /* st->files counts the current one */
    if (tty)
    {
        fprintf(stderr, "\r%s%s: %.1f/%.1f MB  %" PRIu64 " rows  %.0f rows/s%s%s   ",
                im->src_name, which, (double) done / 1e6, (double) total / 1e6, im->st->read, rate,
                eta[0] ? "  " : "", eta);
        if (final)
            fputc('\n', stderr);
    }
    else if (im->o->progress && total > 0)
        log_info("%s%s: %" PRIu64 " rows read, %" PRIu64 " %s, %.0f rows/s, %.1f of %.1f MB "
                 "(%.0f%%)%s%s",
                 im->src_name, which, im->st->read, im->st->inserted, verb, rate,
                 (double) done / 1e6, (double) total / 1e6, 100.0 * (double) done / (double) total,
                 eta[0] ? ", " : "", eta);
    else if (im->o->progress)
        log_info("%s%s: %" PRIu64 " rows read, %" PRIu64 " %s, %.0f rows/s", im->src_name,
                 which, im->st->read, im->st->inserted, verb, rate);
}

/* ---- files --------------------------------------------------------------- */

/* plan --skip-finished: can the checkpoints be read (plan creates nothing, so
 * v7fill's schema may not exist yet)? */
static bool
importer_checkpoints_exist(Importer *im, bool *out, Err *err)
{
    PGresult *res;

    if (!pg_query(im->conn, "SELECT to_regclass('v7fill.checkpoint') IS NOT NULL", 0, NULL, &res,
                  err))
        return false;
    *out = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return true;
}

/* The total size of the input, for an ETA across files: known when every file
 * is a regular file (zstd files count compressed bytes, as their progress does). */
static void
importer_size_files(Importer *im)
{
    im->all_known = true;
    im->all_bytes = 0;
    for (size_t f = 0; f < im->o->nfiles && im->all_known; f++)
    {
        struct stat st;

        if (strcmp(im->o->files[f], "-") == 0 || stat(im->o->files[f], &st) != 0 ||
            !S_ISREG(st.st_mode))
            im->all_known = false;
        else
            im->all_bytes += (uint64_t) st.st_size;
    }
}

static void
importer_drop_sink(Importer *im)
{
    if (im->sink == NULL)
        return;
    im->sink_total.probes += sink_stats(im->sink)->probes;
    im->sink_total.conflicts += sink_stats(im->sink)->conflicts;
    im->sink_total.splits += sink_stats(im->sink)->splits;
    im->sink_total.lookup_gap += sink_stats(im->sink)->lookup_gap;
    sink_free(im->sink);
    im->sink = NULL;
}

/* May this role read the target's key column?  Then re-imports are answered
 * from the target's index first; without it (import needs only INSERT on the
 * target) the lookup answers alone. */
static bool
importer_may_read_keys(Importer *im, bool *out, Err *err)
{
    char oid[16];
    const char *params[2] = {oid, im->target->key_column};
    PGresult *res;

    (void) snprintf(oid, sizeof oid, "%u", im->target->oid);
    if (!pg_query(im->conn, "SELECT has_column_privilege($1::oid, $2, 'SELECT')", 2, params,
                  &res, err))
        return false;
    *out = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return true;
}

/* The options that decide which rows go in and their ids, one "--option=value"
 * a line: a checkpoint resumes only an import with the same. */
static char *
importer_options_text(const ImportOptions *o)
{
    Buf b;
    char *text;
    const char chars[3] = {o->csv.delimiter, o->csv.quote, o->csv.escape};
    static const char *const names[3] = {"--delimiter", "--quote", "--escape"};

    buf_init(&b);
    buf_printf(&b, "--header=%s\n", o->csv.header ? "yes" : "no");
    for (int i = 0; i < 3; i++)
    {
        unsigned char ch = (unsigned char) chars[i];

        if (ch > ' ' && ch < 0x7f)
            buf_printf(&b, "%s=%c\n", names[i], ch);
        else
            buf_printf(&b, "%s=\\x%02x\n", names[i], ch);
    }
    buf_printf(&b, "--null=%s\n", o->csv.null_string ? o->csv.null_string : "");
    buf_printf(&b, "--time-column=%s\n", o->time_column ? o->time_column : "");
    buf_printf(&b, "--time-format=%s\n", o->time_format ? o->time_format : "iso");
    buf_printf(&b, "--input-timezone=%s\n", o->input_tz ? o->input_tz : "UTC");
    buf_printf(&b, "--id-column=%s\n", o->id_column ? o->id_column : "");
    buf_puts(&b, "--map=");
    for (size_t i = 0; i < o->nmaps; i++)
        buf_printf(&b, "%s%s=%s", i ? " " : "", o->maps[i].from, o->maps[i].to);
    buf_puts(&b, "\n--ignore-column=");
    for (size_t i = 0; i < o->nignore; i++)
        buf_printf(&b, "%s%s", i ? " " : "", o->ignore[i]);
    buf_printf(&b, "\n--source-ref=%s\n", o->source_ref ? o->source_ref : "");
    buf_printf(&b, "--lookup-table=%s\n", o->lookup_table ? o->lookup_table : "");
    buf_printf(&b, "--window-tz=%s\n", o->window_tz ? o->window_tz : "UTC");
    buf_printf(&b, "--max-future=%" PRId64 "us\n", o->max_future_us);
    buf_printf(&b, "--retention=%s\n", o->retention ? o->retention : "");
    buf_printf(&b, "--keep-expired=%s\n", o->keep_expired ? "yes" : "no");
    text = xstrndup(b.data, b.len);
    buf_free(&b);
    return text;
}

/* The first option in which `now` differs from `was` (both as made by
 * importer_options_text), as "--option (was "...", now "...")"; "" if none. */
static void
importer_option_changed(const char *was, const char *now, char *out, size_t size)
{
    out[0] = '\0';
    while (*was || *now)
    {
        size_t lw = strcspn(was, "\n");
        size_t ln = strcspn(now, "\n");
        size_t kw = strcspn(was, "=");
        size_t kn = strcspn(now, "=");

        if (lw != ln || memcmp(was, now, lw) != 0)
        {
            if (kw < lw && kn < ln && kw == kn && memcmp(was, now, kw) == 0)
                (void) snprintf(out, size, "%.*s (was \"%.*s\", now \"%.*s\")", (int) kw, was,
                                (int) (lw - kw - 1), was + kw + 1, (int) (ln - kn - 1),
                                now + kn + 1);
            else
                (void) snprintf(out, size, "the options");
            return;
        }
        was += lw + (was[lw] == '\n');
        now += ln + (now[ln] == '\n');
    }
}

/* Resume an output file where the checkpoint left it: cut back only what the
 * earlier run of this file wrote and did not commit; say what else is found. */
static bool
importer_resume_output(Importer *im, Rejects *r, const char *path, const char *file_id,
                       uint64_t size, const char *what, Err *err)
{
    RejectsResume how;

    if (!rejects_resume(r, path, file_id, size, im->src_name, im->cp.line, &how, err))
        return false;
    if (how == REJECTS_OTHER_FILE && path && path[0] && strcmp(path, rejects_path(r)) != 0)
        log_warn("%s: the earlier run of this file wrote to the %s \"%s\", this one goes on in "
                 "\"%s\": nothing cut",
                 im->src_name, what, path, rejects_path(r));
    else if (how == REJECTS_OTHER_FILE)
        log_warn("%s: the %s \"%s\" is a new file, not the one the earlier run of this file "
                 "wrote to (moved or deleted since?): going on in the new one; the rows the "
                 "earlier run wrote are not in it",
                 im->src_name, what, rejects_path(r));
    else if (how == REJECTS_SHORTER)
        log_warn("%s: the %s \"%s\" is shorter than when the earlier run of this file stopped: "
                 "appending to it, nothing cut",
                 im->src_name, what, rejects_path(r));
    else if (how == REJECTS_FOREIGN)
        log_warn("%s: the %s \"%s\" has rows another import appended after this file's last "
                 "commit: kept, nothing cut (rows for lines after %" PRIu64
                 " may be in it twice)",
                 im->src_name, what, rejects_path(r), im->cp.line);
    return true;
}

/* The options and the --source-ref template of this run, for the checkpoint. */
static void
importer_note_options(Importer *im)
{
    im->cp.has_options = true;
    (void) snprintf(im->cp.options, sizeof im->cp.options, "%s", im->options_text);
    im->cp.has_source_ref = true;
    (void) snprintf(im->cp.source_ref, sizeof im->cp.source_ref, "%s",
                    im->o->source_ref ? im->o->source_ref : "");
}

/* A file imported before with another --source-ref: every row would go in a
 * second time under new references.  Refused, unless --new-source-ref, when
 * it is the same input (the bytes the checkpoint hashed; the source is then
 * past them) -- other bytes are another input (the source is back at its
 * start).  Checkpoints of earlier versions recorded no template. */
static bool
importer_check_source_ref(Importer *im, const SourcePosition *start, Err *err)
{
    const char *now = im->o->source_ref ? im->o->source_ref : "";
    const char *was = im->cp.source_ref;
    SourcePosition at = *start;
    bool same = false;
    char upto[48] = "";

    if (!im->cp.has_source_ref || im->cp.records == 0 || strcmp(was, now) == 0 ||
        im->o->new_source_ref)
        return true;
    at.offset = im->cp.offset;
    at.line = im->cp.line;
    at.records = im->cp.records;
    at.content_len = im->cp.content_len;
    at.content_hash = im->cp.content_hash;
    if (!im->src->ops->resume(im->src, &at, &same, err))
        return false;
    if (!same)
        return true;
    if (!im->cp.finished)
        (void) snprintf(upto, sizeof upto, " up to line %" PRIu64, im->cp.line);
    err_set(err, EC_CONFIG,
            "%s was imported into %s.%s%s with %s%s%s; with %s%s%s every row would be inserted "
            "again under new references",
            im->src_name, im->target->schema, im->target->name, upto,
            was[0] ? "--source-ref '" : "", was[0] ? was : "the default source reference",
            was[0] ? "'" : "", now[0] ? "--source-ref '" : "",
            now[0] ? now : "the default source reference", now[0] ? "'" : "");
    err_hint(err, "Give the file the --source-ref it was imported with, or add --new-source-ref "
                  "to import it again under the new references.");
    return false;
}

/* Go on from the checkpoint of the current file (the source is there). */
static bool
importer_resume_file(Importer *im, Err *err)
{
    if (!importer_resume_output(im, im->rejects, im->cp.rejects_path, im->cp.rejects_file,
                                im->cp.rejects_size, "rejects file", err))
        return false;
    /* The late-rows file the checkpoint names; earlier versions named none but
     * recorded a length when there was one. */
    if ((im->cp.late_path[0] || (!im->cp.has_options && im->cp.late_size > 0)) &&
        !importer_resume_output(im, im->late, im->cp.late_path, im->cp.late_file,
                                im->cp.late_size, "late-rows file", err))
        return false;
    if (im->cp.records > 0)
    {
        log_info("%s: resuming after line %" PRIu64 " (%" PRIu64 " rows already accounted for)",
                 im->src_name, im->cp.line, im->cp.read);
        im->st->files_resumed++;
    }
    im->st->read += im->cp.read;
    im->st->read_resumed += im->cp.read;
    im->st->inserted += im->cp.inserted;
    im->st->duplicates += im->cp.duplicates;
    im->st->rejected += im->cp.rejected;
    im->st->expired += im->cp.expired;
    /* From here on the checkpoint is this run's, with its options. */
    importer_note_options(im);
    return true;
}

static bool
importer_open_file(Importer *im, const char *path, bool *skipped, Err *err)
{
    SourcePosition pos;
    bool is_stdin;

    if (!source_csv_open(path, &im->o->csv, &im->src, err))
        return false;
    im->src_name = im->src->ops->name(im->src);
    im->src->ops->position(im->src, &pos);
    memset(&im->cp, 0, sizeof im->cp);
    im->use_checkpoint = !im->o->plan;
    is_stdin = strncmp(pos.identity, "stdin", 5) == 0;
    if (is_stdin)
    {
        /* stdin cannot be resumed; a per-run identity still tells after a lost
         * connection whether a batch committed. */
        uint8_t rnd[8];
        if (RAND_bytes(rnd, sizeof rnd) != 1)
            return err_set(err, EC_INTERNAL, "OpenSSL RAND_bytes failed");
        (void) snprintf(im->identity, sizeof im->identity, "stdin:%02x%02x%02x%02x%02x%02x%02x%02x",
                        rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    }
    else
    {
        (void) snprintf(im->identity, sizeof im->identity, "%s", pos.identity);
        if (im->checkpoints &&
            !state_checkpoint_get(im->conn, im->target->schema, im->target->name, im->target->oid,
                                  im->identity, &im->cp, err))
            return false;
        if (im->cp.stale)
            log_warn("%s: its checkpoint was written for an earlier table named %s.%s (dropped "
                     "or renamed since): reading it from the start",
                     im->src_name, im->target->schema, im->target->name);
        /* Before the columns are mapped: a skipped file costs one query. */
        if (im->o->skip_finished && im->cp.found && im->cp.finished)
        {
            *skipped = true;
            return true;
        }
    }
    if (!importer_map_columns(im, err))
        return false;
    /* The COPY column list follows this file's columns. */
    importer_drop_sink(im);
    if (!(im->o->plan && !im->lookup_exists))
    {
        SinkConfig sc = {im->target_q, im->copy_cols, im->lookup_q, im->key_q,
                         im->o->keep_ref_text, im->lookup_shape, false};
        if (!importer_may_read_keys(im, &sc.probe_target, err))
            return false;
        im->sink = sink_new(im->conn, &sc);
    }
    if (is_stdin || !im->use_checkpoint)
    {
        memset(&im->cp, 0, sizeof im->cp); /* plan read it only to skip */
        return true;
    }
    if (im->cp.found && !importer_check_source_ref(im, &pos, err))
        return false;
    if (im->cp.found && !im->cp.finished)
    {
        SourcePosition at = pos;
        bool same = true;
        char changed[1024] = "";

        at.offset = im->cp.offset;
        at.line = im->cp.line;
        at.records = im->cp.records;
        at.content_len = im->cp.content_len;
        at.content_hash = im->cp.content_hash;
        /* Only the same import resumes: the same options (checkpoints of
         * earlier versions recorded none) and the same bytes before the
         * position.  Any other reads the file again; dedup keeps it exact. */
        if (im->cp.has_options)
            importer_option_changed(im->cp.options, im->options_text, changed, sizeof changed);
        if (changed[0])
        {
            log_warn("%s: %s changed since the earlier run stopped at line %" PRIu64
                     ": reading it from the start",
                     im->src_name, changed, im->cp.line);
            same = false;
        }
        else if (im->cp.records > 0 && !im->src->ops->resume(im->src, &at, &same, err))
            return false;
        else if (!same)
            log_warn("%s: its content changed since the earlier run stopped at line %" PRIu64
                     " (other bytes before it): reading it from the start",
                     im->src_name, im->cp.line);
        if (same)
            return importer_resume_file(im, err);
    }
    /* Starting this file afresh: record where the rejects and late-rows files
     * stand now, so that a crash before the first commit can cut them back. */
    memset(&im->cp, 0, sizeof im->cp);
    im->cp.offset = pos.offset;
    im->cp.line = pos.line;
    im->cp.content_len = pos.content_len;
    im->cp.content_hash = pos.content_hash;
    importer_note_outputs(im, &im->cp);
    importer_note_options(im);
    return state_checkpoint_put(im->conn, im->target->schema, im->target->name, im->target->oid,
                                im->identity, im->src_name, &im->cp, err);
}

static bool
importer_check_rejects_limit(Importer *im, Err *err)
{
    const ImportStats *st = im->st;
    bool over = st->rejected > im->o->max_rejects;

    if (im->o->max_rejects_pct >= 0 && st->read >= 100)
        over = over || (double) st->rejected * 100.0 / (double) st->read > im->o->max_rejects_pct;
    if (!over)
        return true;
    err_set(err, EC_LIMIT, "too many rejected rows: %" PRIu64 " of %" PRIu64 " read", st->rejected,
            st->read);
    err_detail(err, "The rejected rows and their reasons are in \"%s\".  Batches committed so far "
                    "are kept.",
               rejects_path(im->rejects));
    err_hint(err, "Fix the input or the options, or raise --max-rejects, then run the command "
                  "again: it resumes, or reads the file from the start if its content or an "
                  "option that decides its rows changed.");
    return false;
}

/* ---- the writer thread ----------------------------------------------------- */

static void *
writer_main(void *arg)
{
    Importer *im = arg;
    Writer *w = &im->w;

    pthread_mutex_lock(&w->mu);
    for (;;)
    {
        Batch *b;
        SourcePosition pos;
        Err e = {0};
        bool ok;

        while (!w->busy && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->busy)
            break;
        b = w->b;
        pos = w->pos;
        pthread_mutex_unlock(&w->mu);
        ok = importer_flush(im, b, &pos, false, &e);
        pthread_mutex_lock(&w->mu);
        w->ok = ok;
        w->err = e;
        w->busy = false;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static bool
writer_start(Importer *im, Err *err)
{
    Writer *w = &im->w;
    int rc;

    memset(w, 0, sizeof *w);
    w->ok = true;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    rc = pthread_create(&w->thread, NULL, writer_main, im);
    if (rc != 0)
    {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        return err_set(err, EC_IO, "could not start the writer thread: %s", strerror(rc));
    }
    w->running = true;
    return true;
}

/* Wait until the writer is idle; false with its error if its last batch failed
 * (reported once). */
static bool
writer_wait(Importer *im, Err *err)
{
    Writer *w = &im->w;
    bool ok;

    if (!w->running)
        return true;
    pthread_mutex_lock(&w->mu);
    while (w->busy)
        pthread_cond_wait(&w->cv, &w->mu);
    ok = w->ok;
    if (!ok)
        *err = w->err;
    w->ok = true;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

static void
writer_submit(Importer *im, Batch *b, const SourcePosition *pos)
{
    Writer *w = &im->w;

    pthread_mutex_lock(&w->mu);
    w->b = b;
    w->pos = *pos;
    w->busy = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Stop the writer after its current batch; its outcome, if not yet taken,
 * is logged. */
static void
writer_stop(Importer *im)
{
    Writer *w = &im->w;
    Err e = {0};

    if (!w->running)
        return;
    if (!writer_wait(im, &e))
        log_warn("%s", e.msg);
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    w->running = false;
}

/*
 * importer_batch_full: the filling batch is full.  Once the writer is done
 * with the previous one (its rejects counted, progress shown), the batch goes
 * to the writer and the reader goes on into the other buffer.  Without a
 * writer (plan) it is handled here.
 */
static bool
importer_batch_full(Importer *im, Err *err)
{
    Batch *b = im->batch;
    SourcePosition pos;

    im->src->ops->position(im->src, &pos);
    if (!writer_wait(im, err) || !importer_check_rejects_limit(im, err))
        return false;
    importer_progress(im, false);
    if (!im->w.running)
        return importer_flush(im, b, &pos, false, err);
    writer_submit(im, b, &pos);
    im->batch = b == &im->bufs[0] ? &im->bufs[1] : &im->bufs[0];
    batch_reset(im->batch);
    return true;
}

static bool
importer_file(Importer *im, const char *path, Err *err)
{
    bool ok = true;
    bool skipped = false;
    struct stat sb;

    if (im->o->nfiles > 1 && im->o->csv.header && strcmp(path, "-") != 0 &&
        stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0)
    {
        /* No header and no rows: nothing to lose, so the other files go on;
         * the run still ends with exit status 4 naming it (import_run). */
        char shown[256];
        err_printable(path, shown, sizeof shown);
        log_warn("%s is empty (0 bytes, no header line): passed over, the other files are "
                 "imported",
                 shown);
        if (im->files_empty++ == 0)
            memcpy(im->first_empty, shown, sizeof shown);
        return true;
    }
    if (!importer_open_file(im, path, &skipped, err))
        return false;
    im->st->files++;
    if (skipped)
    {
        uint64_t done;
        uint64_t total;

        log_info("%s: skipped: an earlier run imported all of it (--skip-finished)",
                 im->src_name);
        im->st->files_skipped++;
        im->src->ops->progress(im->src, &done, &total);
        im->files_bytes += total;
        source_close(im->src);
        im->src = NULL;
        return true;
    }
    {
        uint64_t total;

        im->file_started = mono_now();
        im->src->ops->progress(im->src, &im->file_done0, &total);
    }
    if (!im->o->plan && !writer_start(im, err))
    {
        source_close(im->src);
        im->src = NULL;
        return false;
    }
    for (;;)
    {
        Record rec;
        bool eof = false;

        if (interrupt_signal() != 0)
        {
            err_set(err, EC_INTERRUPTED, "interrupted by %s", interrupt_name());
            ok = false;
            break;
        }
        if (!source_next(im->src, &rec, &eof, err))
        {
            ok = false;
            break;
        }
        if (eof)
            break;
        if (!importer_add_record(im, &rec, err))
        {
            ok = false;
            break;
        }
        if ((im->batch->nrows >= im->o->batch_rows ||
             im->batch->data.len + im->batch->aux.len >= im->o->batch_bytes) &&
            !importer_batch_full(im, err))
        {
            ok = false;
            break;
        }
    }
    if (ok)
    {
        SourcePosition pos;
        ok = writer_wait(im, err);
        im->src->ops->position(im->src, &pos);
        ok = ok && importer_flush(im, im->batch, &pos, true, err) &&
             importer_check_rejects_limit(im, err);
    }
    else if (err->code == EC_FORMAT || err->code == EC_INTERRUPTED)
    {
        /* The input broke mid-file, or we were asked to stop: keep what was
         * read before (plan: count it, so that its report shows it). */
        Err ferr = {0};
        SourcePosition pos;

        im->src->ops->position(im->src, &pos);
        if (!writer_wait(im, &ferr) ||
            (im->batch->nrows > 0 && !importer_flush(im, im->batch, &pos, false, &ferr)))
            log_warn("could not commit the rows read before the %s: %s",
                     err->code == EC_INTERRUPTED ? "interruption" : "error", ferr.msg);
        else if (err->code == EC_INTERRUPTED && !im->o->plan)
        {
            err_detail(err, "Every row read before it is committed: %s up to line %" PRIu64
                            ", %" PRIu64 " rows in all.",
                       im->src_name, pos.line, im->st->read);
            err_hint(err, "Run the same command again to go on from there.");
        }
    }
    writer_stop(im);
    importer_progress(im, true);
    {
        uint64_t done;
        uint64_t total;

        im->src->ops->progress(im->src, &done, &total);
        im->files_bytes += total;
        im->files_bytes_run += done - im->file_done0;
        if (ok)
            im->files_done++;
    }
    source_close(im->src);
    im->src = NULL;
    return ok;
}

static bool
interrupted(void)
{
    return interrupt_signal() != 0;
}

/* "VERB relation", cancelled by Ctrl-C (*cancelled then): on a large table
 * the closing statements can take minutes. */
static bool
importer_closing_exec(Importer *im, const char *verb, const char *rel, bool *cancelled, Err *err)
{
    char *sql = xasprintf("%s %s", verb, rel);
    bool ok = pg_exec_cancellable(im->conn, sql, interrupted, cancelled, err);

    free(sql);
    return ok;
}

static bool
importer_analyze_once(Importer *im, Err *err)
{
    /* ANALYZE of a partitioned table also analyzes every partition (PostgreSQL
     * < 18 has no ANALYZE ONLY), so one statement covers the partitions filled
     * and gives the parent the statistics autovacuum never collects for it. */
    double t0 = mono_now();
    bool cancelled;

    log_info("ANALYZE %s and its partitions (--no-analyze skips this)", im->target_q);
    /* Cancelled, each partition analyzed so far keeps its statistics. */
    if (!importer_closing_exec(im, "ANALYZE", im->target_q, &cancelled, err))
        return false;
    if (cancelled)
    {
        log_warn("interrupted: the closing ANALYZE cancelled after %.1f s and VACUUM "
                 "(ANALYZE) %s skipped; every row is imported (ANALYZE %s gives the "
                 "parent its statistics)",
                 mono_now() - t0, im->lookup_q, im->target_q);
        return true;
    }
    if (interrupt_signal() != 0)
    {
        log_warn("interrupted: VACUUM (ANALYZE) %s skipped; every row is imported", im->lookup_q);
        return true;
    }
    log_info("ANALYZE done in %.1f s; VACUUM (ANALYZE) %s", mono_now() - t0, im->lookup_q);
    t0 = mono_now();
    /* VACUUM sets the lookup's visibility map, so the next run's duplicate
     * probes are index-only scans (measured: 10,000 probes 55 ms -> 37 ms). */
    if (!importer_closing_exec(im, "VACUUM (ANALYZE)", im->lookup_q, &cancelled, err))
        return false;
    if (cancelled)
    {
        log_warn("interrupted: VACUUM (ANALYZE) %s cancelled; every row is imported",
                 im->lookup_q);
        return true;
    }
    log_info("VACUUM done in %.1f s", mono_now() - t0);
    return true;
}

/* The closing ANALYZE and VACUUM, after every row has committed: a lost
 * connection is reconnected as during the batches and both run again (they
 * can run any number of times). */
static bool
importer_analyze(Importer *im, Err *err)
{
    double t0 = mono_now();

    for (int attempts = 0;; attempts++)
    {
        if (importer_analyze_once(im, err))
        {
            im->st->closing_s = mono_now() - t0;
            return true;
        }
        if (!pg_err_is_connection(err) || attempts >= 5 || !importer_reconnect(im, err))
        {
            err_prefix(err, "every row is committed, but the closing ANALYZE and VACUUM did "
                            "not complete");
            return false;
        }
    }
}

/* Plan: the DDL of every window that would be created, once each. */
static bool
importer_plan_ddl(Importer *im, Err *err)
{
    ImportStats *st = im->st;
    int64_t *times = xmalloc((st->nwindows ? st->nwindows : 1) * sizeof *times);
    size_t n = 0;
    EnsureResult res = {0};
    bool ok;

    for (size_t i = 0; i < st->nwindows; i++)
        if (st->windows[i].created)
            times[n++] = st->windows[i].lower_us;
    ok = n == 0 || partitions_ensure_times(im->conn, im->target, times, n, &im->ensure, &res, err);
    free(times);
    return ok;
}

static void
importer_free(Importer *im)
{
    catalog_target_free(im->target);
    free(im->target_q);
    free(im->lookup_name);
    free(im->lookup_q);
    free(im->copy_cols);
    free(im->key_q);
    id_keyer_free(im->keyer);
    time_parser_free(im->tparser);
    time_parser_free(im->wzone);
    rejects_close(im->rejects);
    rejects_close(im->late);
    tracker_free(im->tracker);
    batch_free(&im->bufs[0]);
    batch_free(&im->bufs[1]);
    buf_free(&im->ref);
    free(im->cols);
    srcref_template_free(im->tmpl);
    free(im->options_text);
    sortwork_free(&im->sort);
    refset_free(im->plan_seen);
    free(im->times);
    source_close(im->src);
}

/* A lookup that remembers rows for a target that holds none: after the target
 * was dropped and made again without its lookup, every row would count as a
 * duplicate of one the new table does not have.  Said, not refused: a table
 * whose windows all retired is the same picture, and there it is right. */
static bool
importer_warn_orphan_lookup(Importer *im, Err *err)
{
    PGresult *res;
    bool lookup_rows;
    bool target_rows;
    char *sql;
    bool ok;
    const char *params[1] = {im->target_q};

    if (!pg_query(im->conn, "SELECT has_table_privilege($1::regclass, 'SELECT')", 1, params, &res,
                  err))
        return false;
    ok = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!ok)
        return true;
    sql = xasprintf("SELECT EXISTS (SELECT 1 FROM %s), EXISTS (SELECT 1 FROM %s)", im->lookup_q,
                    im->target_q);
    ok = pg_query(im->conn, sql, 0, NULL, &res, err);
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
                 im->target_q, im->lookup_q, im->target_q, im->lookup_q);
    return true;
}

/* --lookup-keys can choose a new lookup's keys, not change an existing one's:
 * its entries would no longer be found. */
static bool
importer_check_lookup_keys(const Importer *im, Err *err)
{
    bool ordered = im->lookup_shape == LOOKUP_REF_KEY;
    LookupKeys want = im->o->lookup_keys;

    if (want == LOOKUP_KEYS_AS_FOUND || (want == LOOKUP_KEYS_ORDERED) == ordered)
        return true;
    err_set(err, EC_CONFIG,
            "lookup table %s has %s keys; --lookup-keys=%s cannot change that, or the "
            "references it holds would not be found again",
            im->lookup_q, ordered ? "ordered" : "hashed", ordered ? "hashed" : "ordered");
    err_hint(err, "Leave --lookup-keys out to use the lookup as it is, or name a new lookup "
                  "with --lookup-table.");
    return false;
}

bool
import_run(PgConn *c, const ImportOptions *o, ImportStats *st, Err *err)
{
    Importer im;
    uint8_t key[ID_KEY_LEN];
    bool ok = false;
    bool lookup_exists = true;
    /* the shape of a lookup this run would create */
    LookupShape new_shape =
        o->lookup_keys == LOOKUP_KEYS_HASHED ? LOOKUP_REF_HASH_UUID : LOOKUP_REF_KEY;

    memset(&im, 0, sizeof im);
    memset(st, 0, sizeof *st);
    buf_init(&st->ddl);
    im.conn = c;
    im.o = o;
    im.st = st;
    im.started = mono_now();
    im.now_us = o->now_us ? o->now_us : wall_now_us();
    im.day_cache.day = INT64_MIN;
    batch_init(&im.bufs[0]);
    batch_init(&im.bufs[1]);
    im.batch = &im.bufs[0];
    buf_init(&im.ref);
    ensure_options_default(&im.ensure);
    im.ensure.granularity = o->granularity;
    im.ensure.window_tz = o->window_tz;
    im.ensure.lock_timeout_ms = o->lock_timeout_ms;
    if (o->plan)
    {
        im.ensure.dry_run = true;
        im.ensure.ddl_out = &st->ddl;
    }

    if (!catalog_load_target(c, o->table, &im.target, err))
        goto out;
    if (im.target->key_kind != KEY_UUID7)
    {
        err_set(err, EC_CONFIG, "import needs a target partitioned on a uuid key; %s.%s is "
                                "partitioned on \"%s\" (not uuid)",
                im.target->schema, im.target->name, im.target->key_column);
        goto out;
    }
    im.target_q = pg_qualified(c, im.target->schema, im.target->name);
    if (!state_lookup_name(im.target->name, o->lookup_table, &im.lookup_name, err))
        goto out;
    im.lookup_q = pg_qualified(c, im.target->schema, im.lookup_name);
    (void) snprintf(st->lookup_table, sizeof st->lookup_table, "%s.%s", im.target->schema,
                    im.lookup_name);
    if (!time_parser_new(o->time_format, o->input_tz, &im.tparser, err))
        goto out;
    if (!partitions_effective_granularity(im.target, &im.ensure, &im.gran, err))
        goto out;
    if (im.ensure.window_tz && strcmp(im.ensure.window_tz, "UTC") != 0 &&
        !time_parser_new_window(im.ensure.window_tz, &im.wzone, err))
        goto out;
    {
        /* Near cutoff: 10% of the retention by default, but at least one window. */
        Retention ret;
        int64_t near = o->near_cutoff_us;
        int64_t lo;
        int64_t hi;

        if (!retention_resolve(c, im.target->schema, im.target->name, o->retention, &ret, err))
            goto out;
        st->retention_us = ret.source == RETENTION_NONE ? 0 : ret.us;
        retention_describe(&ret, st->retention_from, sizeof st->retention_from);
        importer_window_of(&im, im.now_us, &lo, &hi);
        if (near == 0 && st->retention_us > 0)
            near = st->retention_us / 10 > hi - lo ? st->retention_us / 10 : hi - lo;
        im.tracker = tracker_new(st->retention_us, near);
        st->near_cutoff_us = near;
    }

    if (o->plan)
    {
        /* Read-only: a target never imported into has no key yet; any key gives
         * the same windows and classifications. */
        bool have_state = false;
        PGresult *res;
        const char *params[2] = {im.target->schema, im.target->name};

        if (!pg_query(c, "SELECT to_regclass('v7fill.id_key') IS NOT NULL", 0, NULL, &res, err))
            goto out;
        have_state = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        PQclear(res);
        memset(key, 0, sizeof key);
        if (have_state)
        {
            if (!pg_query(c,
                          "SELECT encode(key, 'hex') FROM v7fill.id_key "
                          "WHERE target_schema = $1 AND target_table = $2",
                          2, params, &res, err))
                goto out;
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
        if (!state_lookup_exists(c, im.target->schema, im.lookup_name, &lookup_exists,
                                 &im.lookup_shape, err))
            goto out;
        if (!rejects_open(NULL, &im.rejects, err) || !rejects_open(NULL, &im.late, err))
            goto out;
    }
    else
    {
        char *path = o->rejects_path ? xstrdup(o->rejects_path)
                                     : xasprintf("%s.rejects.csv", im.target->name);
        (void) snprintf(st->rejects_path, sizeof st->rejects_path, "%s", path);
        ok = rejects_open(path, &im.rejects, err);
        free(path);
        if (!ok)
            goto out;
        /* Rows can only be late when there is a retention to be late for. */
        path = st->retention_us == 0 ? NULL
               : o->late_path       ? xstrdup(o->late_path)
                                    : xasprintf("%s.late.csv", im.target->name);
        if (path)
            (void) snprintf(st->late_path, sizeof st->late_path, "%s", path);
        ok = rejects_open_csv(path,
                              "source,line,class,id,event_time,delay,time_left,source_ref\n",
                              "late-rows file", &im.late, err);
        free(path);
        if (!ok)
            goto out;
        ok = false;
        if (!state_setup(c, err) || !maintain_setup(c, err) ||
            !state_id_key(c, im.target->schema, im.target->name, key, err) ||
            !state_lookup_create(c, im.target->schema, im.lookup_name, new_shape,
                                 &im.lookup_shape, err))
            goto out;
    }
    if (!lookup_exists)
        im.lookup_shape = new_shape; /* plan: what would be created */
    if (!importer_check_lookup_keys(&im, err))
        goto out;
    st->lookup_keys_ordered = im.lookup_shape == LOOKUP_REF_KEY;
    if (!id_keyer_new(key, sizeof key, &im.keyer, err))
        goto out;
    memset(key, 0, sizeof key);

    im.lookup_exists = lookup_exists;
    if (lookup_exists && !importer_warn_orphan_lookup(&im, err))
        goto out;
    im.checkpoints = !o->plan;
    im.options_text = importer_options_text(o);
    if (o->plan && o->skip_finished && !importer_checkpoints_exist(&im, &im.checkpoints, err))
        goto out;
    importer_size_files(&im);
    for (size_t f = 0; f < o->nfiles; f++)
        if (!importer_file(&im, o->files[f], err))
            goto out;
    if (o->plan && !importer_plan_ddl(&im, err))
        goto out;
    if (st->expired_kept > 0)
        log_warn("%" PRIu64 " rows were inserted into windows already past the retention "
                 "(--keep-expired): retention will drop them",
                 st->expired_kept);
    if (!o->plan && o->analyze && st->inserted > 0 && interrupt_signal() != 0)
        log_warn("interrupted: the closing ANALYZE and VACUUM skipped; every row is imported "
                 "(ANALYZE %s gives the parent its statistics)",
                 im.target_q);
    else if (!o->plan && o->analyze && st->inserted > 0 && !importer_analyze(&im, err))
        goto out;
    ok = true;
out:
    st->elapsed_s = mono_now() - im.started;
    importer_drop_sink(&im);
    st->sink = im.sink_total;
    if (im.tracker)
        st->delay_json = tracker_to_json(im.tracker);
    if (ok && !import_stats_balanced(st))
    {
        err_set(err, EC_INTERNAL,
                "accounting does not balance: read %" PRIu64 " != inserted %" PRIu64
                " + duplicates %" PRIu64 " + rejected %" PRIu64 " + expired %" PRIu64,
                st->read, st->inserted, st->duplicates, st->rejected, st->expired);
        ok = false;
    }
    if (!ok && !o->plan && !o->skip_finished && im.files_done > 0 && o->nfiles > 1)
        log_info("%zu of the %zu files were imported completely before this stopped; a rerun "
                 "with --skip-finished does not read them again",
                 im.files_done, o->nfiles);
    if (!o->plan && im.target && !pg_is_broken(c))
    {
        /* Run history: one row per run, also for failed runs (status = the error). */
        Err rerr = {0};
        char *json = import_report_json(st, false);
        bool setup_done = ok || err->code != EC_PG_CONNECT;

        if (setup_done && !state_run_record(c, im.target->schema, im.target->name,
                                            im.target->oid, "import",
                                            ok ? "done" : err->msg, st->elapsed_s, st->read,
                                            st->inserted, st->duplicates, st->rejected,
                                            st->partitions_created, json, &rerr))
            log_debug("could not record the run in v7fill.run: %s", rerr.msg);
        free(json);
    }
    if (ok && im.files_empty > 0)
    {
        err_set(err, EC_FORMAT, "%s is empty: expected a header line", im.first_empty);
        err_detail(err, "%zu of the %zu files %s empty (0 bytes) and passed over; the others "
                        "were imported.",
                   im.files_empty, o->nfiles, im.files_empty == 1 ? "was" : "were");
        ok = false;
    }
    importer_free(&im);
    return ok;
}
