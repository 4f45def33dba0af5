/*
 * The pipeline: pull records from a source, mint ids, route (ensure
 * partitions), write batches through the sink, track counts.  Every command
 * that moves rows configures it; a new source is a new Source implementation,
 * not a new loop.
 *
 * Accounting holds at every commit and across crashes and resumes:
 *   read = inserted + duplicates + rejected (+ expired)
 */
#ifndef V7FILL_PIPELINE_H
#define V7FILL_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/mem.h"
#include "v7fill/partitions.h"
#include "v7fill/pg.h"
#include "v7fill/sink.h"
#include "v7fill/source_csv.h"

typedef struct ColumnMap
{
    const char *from; /* source column */
    const char *to;   /* target column */
} ColumnMap;

typedef struct ImportOptions
{
    const char *table;
    const char *const *files; /* "-" = stdin */
    size_t nfiles;
    CsvOptions csv;
    const char *time_column;  /* NULL: the target's created_at when the source has it */
    const char *time_format;  /* NULL = iso */
    const char *input_tz;     /* NULL = UTC */
    const char *source_ref;   /* template, NULL = hash of the whole record */
    bool new_source_ref;      /* allow another template than the one a file was imported with */
    const char *id_column;    /* source column carrying ids (kept if UUIDv7) */
    const ColumnMap *maps;
    size_t nmaps;
    const char *const *ignore;
    size_t nignore;
    size_t batch_rows;        /* default 10000 */
    size_t batch_bytes;       /* a batch is also full at this many bytes of COPY data and
                                 raw input (default 64 MiB, at most BATCH_MAX_BYTES) */
    const char *rejects_path; /* NULL → "<table>.rejects.csv" */
    uint64_t max_rejects;     /* UINT64_MAX = unlimited */
    double max_rejects_pct;   /* < 0 = unused */
    int64_t max_future_us;    /* allowed clock skew ahead of now */
    const char *lookup_table; /* NULL → <table>_source_ref */
    bool keep_ref_text;       /* store the reference text in the lookup table */
    LookupKeys lookup_keys;   /* a new lookup's keys; an existing one's must match */
    bool analyze;             /* ANALYZE filled partitions and the parent */
    bool plan;                /* read and classify only: no writes at all */
    bool skip_finished;       /* skip files an earlier run imported completely */
    bool progress;            /* progress on stderr */
    Granularity granularity;
    const char *window_tz;    /* --window-tz: new windows start at local midnight */
    int lock_timeout_ms;
    int reconnect_attempts;   /* after a lost connection (default 5) */
    int64_t now_us;           /* 0 = the real clock (tests inject a time) */
    const char *retention;    /* --retention; NULL: stored (v7fill retention), else
                                 pg_partman's, else none (every row is on time) */
    int64_t near_cutoff_us;   /* 0 = 10% of the retention, at least one window */
    bool keep_expired;        /* insert rows whose window is retired anyway */
    const char *late_path;    /* late-rows output; NULL → "<table>.late.csv" */
} ImportOptions;

void import_options_default(ImportOptions *o);

typedef struct ReasonCount
{
    char reason[96];
    uint64_t count;
    char example[256]; /* first full message, with file:line */
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

typedef struct ImportStats
{
    uint64_t files;
    uint64_t files_resumed;
    uint64_t files_skipped; /* --skip-finished: finished by an earlier run, not read */
    uint64_t read;
    uint64_t read_resumed; /* of read: rows that interrupted earlier runs accounted for */
    uint64_t inserted;
    uint64_t duplicates;
    uint64_t rejected;
    uint64_t expired;
    uint64_t near_cutoff;     /* inserted, in windows that retire within --near-cutoff */
    uint64_t expired_kept;    /* expired rows inserted anyway (--keep-expired) */
    uint64_t batches;
    uint64_t partitions_created;
    double elapsed_s;
    double closing_s;     /* of elapsed_s: the closing ANALYZE and VACUUM (0: not run) */
    size_t nreasons;
    ReasonCount *reasons;
    size_t nwindows;
    WindowCount *windows;
    Buf ddl;              /* plan: partitions that would be created */
    char rejects_path[1024];
    char late_path[1024];
    int64_t retention_us;     /* 0 = none */
    char retention_from[256]; /* where it came from, for the report */
    int64_t near_cutoff_us;
    char *delay_json;     /* the tracker's statistics (tracker_to_json), or NULL */
    char lookup_table[256];
    bool lookup_keys_ordered; /* the lookup's keys are (or would be) ordered */
    uint64_t keys_ordered;    /* rows read in this run whose key came out ordered */
    SinkStats sink;
} ImportStats;

/* Run an import (or a plan).  Counts are filled even on failure, covering what
 * was committed. */
V7FILL_MUST_CHECK bool import_run(PgConn *c, const ImportOptions *o, ImportStats *st, Err *err);
void import_stats_free(ImportStats *st);

/* The accounting invariant; false means a bug (the tool checks it itself). */
bool import_stats_balanced(const ImportStats *st);
/* Rows per second of this run: the rows it read over its elapsed time (rows
 * that earlier runs accounted for, read_resumed, are not this run's work). */
double import_stats_rate(const ImportStats *st);

#endif /* V7FILL_PIPELINE_H */
