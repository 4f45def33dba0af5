/*
 * `v7fill report`: a target's windows against its retention, and the delay
 * distribution of the rows v7fill wrote, merged from the statistics of the
 * runs in v7fill.run.  Three renderings of one Report: terminal text with
 * Unicode bar charts, JSON (jansson), and one self-contained HTML page
 * (inline CSS and SVG, no scripts, no external assets).
 */
#ifndef V7FILL_REPORT_H
#define V7FILL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "v7fill/catalog.h"
#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/retention.h"
#include "v7fill/tracker.h"

typedef struct ReportOptions
{
    const char *table;       /* as in SQL: schema-qualified or through search_path */
    bool since_set;          /* only runs finished at or after since_us */
    int64_t since_us;
    const char *retention;   /* --retention; NULL: stored, then pg_partman's */
    int64_t near_cutoff_us;  /* 0: 10% of the retention, at least the window's length */
    bool exact;              /* count(*) per partition instead of the planner's estimate */
    int64_t now_us;          /* 0 = the server's clock */
} ReportOptions;

typedef enum WindowState
{
    WSTATE_NO_RETENTION, /* never retired */
    WSTATE_LIVE,         /* retires later than the near-cutoff horizon */
    WSTATE_NEAR_CUTOFF,  /* retires within the near-cutoff horizon */
    WSTATE_PAST_CUTOFF,  /* past the cutoff, still attached: maintenance retires it */
} WindowState;

typedef struct ReportWindow
{
    char *schema;
    char *name;
    int64_t lower_us;        /* INT64_MIN = MINVALUE */
    int64_t upper_us;        /* INT64_MAX = MAXVALUE */
    double rows;             /* exact or estimated; < 0 = unknown (never analyzed) */
    bool rows_exact;
    WindowState state;
    int64_t retires_at_us;   /* upper + retention; INT64_MAX when never */
    int64_t time_left_us;    /* retires_at − now; INT64_MAX when never */
    int64_t near_cutoff_us;  /* the horizon used for this window */
    uint64_t run_rows[3];    /* rows v7fill wrote here by class (from the runs' statistics) */
    uint64_t run_rows_at_insert; /* and rows whose class could not be judged again */
} ReportWindow;

/* A partition left "detach pending" (TargetTable.pending): no window, shown
 * apart with the SQL that settles it. */
typedef struct ReportPending
{
    char *schema;
    char *name;
    int64_t lower_us;        /* INT64_MIN = MINVALUE */
    int64_t upper_us;        /* INT64_MAX = MAXVALUE */
    double rows;             /* rows queries do not see; < 0 = unknown */
    bool rows_exact;
    char *finalize_sql;      /* ALTER TABLE parent DETACH PARTITION p FINALIZE */
    char *attach_sql;        /* after it, to restore its rows: ATTACH PARTITION p FOR VALUES ... */
} ReportPending;

typedef struct Report
{
    char *schema;
    char *table;
    KeyKind key_kind;
    int64_t now_us;
    Retention retention;
    PartmanInfo partman;
    int64_t near_cutoff_us;  /* as given, 0 = default (per window) */
    int64_t cutoff_us;       /* now − retention (INT64_MIN without retention) */
    bool since_set;
    int64_t since_us;
    bool exact;
    size_t nwindows;
    ReportWindow *windows;   /* by lower bound; the DEFAULT partition is not among them */
    size_t npending;
    ReportPending *pending;  /* detach-pending partitions, by lower bound; not among windows */
    bool has_default;
    char *default_name;
    double default_rows;     /* < 0 = unknown */
    Tracker *stats;          /* merged statistics of the runs */
    size_t runs;             /* runs merged */
    size_t runs_skipped;     /* runs whose statistics could not be read */
    int64_t first_run_us;    /* finished_at of the first and last merged run */
    int64_t last_run_us;
    bool verdict_known;      /* retention and at least one delay */
    bool verdict_ok;         /* retention exceeds the largest observed delay */
    char verdict[512];
} Report;

/* Read everything: catalog, retention, row counts, runs.  Reads only. */
V7FILL_MUST_CHECK bool report_build(PgConn *c, const ReportOptions *o, Report **out, Err *err);
void report_free(Report *r);

/* Terminal text with two Unicode bar charts (rows per window with the
 * cutoff marked; the delay histogram). */
void report_print(FILE *out, const Report *r);
/* The report as one JSON document; caller frees. */
char *report_json(const Report *r);
/* One self-contained HTML page (also carries the JSON document in a
 * <script type="application/json" id="v7fill-report"> element). */
V7FILL_MUST_CHECK bool report_write_html(const Report *r, const char *path, Err *err);

/* Short state name: "no_retention", "live", "near_cutoff", "past_cutoff". */
const char *window_state_name(WindowState s);

/* Shared by the terminal and HTML renderers: a bound as a date (midnight) or
 * "YYYY-MM-DD HH:MM" + suffix, MINVALUE/MAXVALUE; a count with thousands
 * separators ("?" when negative). */
void report_fmt_date(int64_t us, const char *suffix, char *out, size_t size);
void report_fmt_count(double v, char *out, size_t size);
/* Time left in days as every rendering shows it (text, HTML tables, JSON's
 * days_left): rounded to a tenth of a day, halves away from zero.  The value
 * in tenths, and its text ("28.2", "-3.0"). */
/* The classes of the delay counts and the largest delays, as every rendering
 * words them: "judged under 30d" when every run judged under the report's
 * retention; "judged again under 30d; 1 run judged under 120d at insert"
 * when some were judged again.  at_insert: the words for rows or delays that
 * kept their class from insert, "as judged at insert under 120d". */
void report_fmt_class_note(const Report *r, char *out, size_t size, char *at_insert,
                           size_t at_size);
/* A largest delay's origin as every rendering shows it: "orders.csv:12", or
 * "(origin not recorded)" for runs of versions that did not record it.  The
 * terminal cuts it to REPORT_ORIGIN_COLUMNS. */
#define REPORT_ORIGIN_COLUMNS 60
const char *report_largest_origin(const TrackerLargest *l);
/* A retention as a short duration: "120d", "36h", else duration_format's. */
void report_fmt_retention_us(int64_t us, char *out, size_t size);
int64_t report_days_left_tenths(int64_t us);
void report_fmt_days_left(int64_t us, char *out, size_t size);

#endif /* V7FILL_REPORT_H */
