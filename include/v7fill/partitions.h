/*
 * Windows (day/week/month/quarter/year) and lock-light creation of the
 * partitions they need: standalone table LIKE the parent, CHECK equal to the
 * bounds, ATTACH PARTITION (SHARE UPDATE EXCLUSIVE on the parent), DROP the
 * CHECK.  Serialised between v7fill processes by an advisory lock per parent;
 * the catalog is re-read after taking it.
 */
#ifndef V7FILL_PARTITIONS_H
#define V7FILL_PARTITIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/catalog.h"
#include "v7fill/err.h"
#include "v7fill/mem.h"
#include "v7fill/pg.h"
#include "v7fill/timeparse.h"

typedef enum Granularity
{
    GRAN_AUTO = 0, /* inferred from existing partitions, else month */
    GRAN_DAY,
    GRAN_WEEK,     /* ISO weeks, Monday */
    GRAN_MONTH,
    GRAN_QUARTER,
    GRAN_YEAR,
} Granularity;

V7FILL_MUST_CHECK bool granularity_parse(const char *text, Granularity *out, Err *err);
const char *granularity_name(Granularity g);

/* The window [*lower, *upper) of granularity g holding `us` (UTC). */
void window_of(Granularity g, int64_t us, int64_t *lower, int64_t *upper);

/* A window with the calendar fields its name is made of. */
typedef struct Window
{
    int64_t lower_us; /* first instant */
    int64_t upper_us; /* first instant of the next window */
    int year;         /* local calendar date of the first day */
    int month;
    int day;
    int yday;         /* 1..366 */
    int quarter;      /* 1..4 */
    int iso_year;     /* ISO 8601 week-numbering year and week of the first day */
    int iso_week;     /* 1..53 */
} Window;

/* 10000-01-01T00:00:00Z: windows cover times before it. */
#define WINDOW_MAX_US INT64_C(253402300800000000)

/* The window of granularity g (GRAN_AUTO: month) holding `us`.  `zone`:
 * NULL = UTC; otherwise a parser from time_parser_new("iso", tz, ...), whose
 * zone puts window edges at local midnight (the first instant of the local
 * day when midnight falls in a DST gap).  Times outside years 1..9999 →
 * EC_FORMAT. */
V7FILL_MUST_CHECK bool window_at(Granularity g, const TimeParser *zone, int64_t us, Window *w,
                                 Err *err);

/* Name patterns: %t table name, %Y year, %m month, %d day, %j day of year,
 * %q quarter, %G ISO year, %V ISO week, %% a percent sign.  Defaults:
 * day %t__%Y_%m_%d, week %t__%G_w%V, month %t__%Y_%m, quarter %t__%Y_q%q,
 * year %t__%Y. */
const char *window_default_pattern(Granularity g);
/* The pattern must tell every window of g apart (month: %Y and %m, ...). */
V7FILL_MUST_CHECK bool window_pattern_check(Granularity g, const char *pattern, Err *err);
/* Expand `pattern` (NULL: the default of g) for w.  More than 63 bytes (the
 * server's identifier limit) → EC_CONFIG; out must hold 64 bytes. */
V7FILL_MUST_CHECK bool window_name(Granularity g, const char *pattern, const char *table,
                                   const Window *w, char *out, size_t size, Err *err);

/* A half-open span of time. */
typedef struct Span
{
    int64_t lower_us;
    int64_t upper_us;
    const char *lower_text; /* the bound of the partition the span starts or ends */
    const char *upper_text; /* at (borrowed from t), NULL at an edge of the range */
} Span;

/* Parts of [lower, upper) that no non-default partition of t covers, in
 * order; *out is allocated (free()), the count returned.  Pure.  Bounds are
 * compared exactly (catalog_bound_cmp): a partition inside one millisecond
 * or microsecond is seen; a gap too narrow to hold any id v7fill mints (no
 * whole microsecond) is left out. */
size_t partitions_uncovered(const TargetTable *t, int64_t lower, int64_t upper, Span **out);

/* The granularity most existing partitions have exactly (catch-alls and odd
 * sizes ignored, ties to the newest), GRAN_MONTH when none; windows in
 * `zone` (NULL = UTC).  Pure. */
V7FILL_MUST_CHECK bool partitions_infer_granularity(const TargetTable *t, const TimeParser *zone,
                                                    Granularity *out, Err *err);

/* One partition to create: a whole window or one uncovered piece of it. */
typedef struct WindowPiece
{
    int64_t lower_us;
    int64_t upper_us;
    char *lower_text; /* bound literals (unquoted canonical text); an edge that */
    char *upper_text; /* meets an existing partition reuses that partition's bound */
    char name[64];
} WindowPiece;

typedef enum WindowAction
{
    WINDOW_SKIPPED,     /* already fully covered */
    WINDOW_CREATED,     /* created whole */
    WINDOW_GAPS_FILLED, /* partly covered; the uncovered pieces were created */
    WINDOW_ISSUE,       /* not created: see EnsureResult.issue */
} WindowAction;

/* What ensure did (or, in a dry run, would do) with one window. */
typedef struct WindowReport
{
    WindowAction action;
    Window window;
    const char *name;          /* the window's name by the pattern */
    size_t npieces;
    const WindowPiece *pieces; /* created / planned; borrowed for the callback */
    int64_t default_rows;      /* rows of the window found in the DEFAULT partition */
    const char *held_by;       /* WINDOW_ISSUE: the detach-pending partition holding the
                                * window (EnsureResult.issue says more); NULL otherwise */
    bool dry_run;
} WindowReport;

typedef void (*WindowReportFn)(void *arg, const WindowReport *r);

typedef struct EnsureOptions
{
    Granularity granularity;   /* GRAN_AUTO: inferred */
    bool dry_run;              /* only collect the DDL in `ddl_out` */
    bool move_from_default;    /* move DEFAULT-partition rows of new windows */
    int lock_timeout_ms;       /* per attempt (default 5000) */
    int lock_retries;          /* attempts after a lock timeout (default 5) */
    Buf *ddl_out;              /* optional: every statement run (or planned), ";\n" separated */
    /* Added for the route stage: */
    const char *window_tz;     /* IANA zone for local-calendar windows; NULL = UTC */
    bool window_tz_given;      /* the user named the zone, UTC included (window_tz may
                                  still be NULL): see plan_window's edge check */
    const char *name_pattern;  /* NULL: window_default_pattern() */
    WindowReportFn on_window;  /* optional: called once per window considered */
    void *on_window_arg;
    /* Set by ensure itself for a table pg_partman manages (see partman.h): */
    const char *partman_schema; /* the extension's schema */
    const char *partman_parent; /* part_config.parent_table */
    bool partman_template;      /* call its inherit_template_properties() */
} EnsureOptions;

typedef struct EnsureResult
{
    int created;
    int skipped;     /* windows already fully covered */
    int gaps_filled; /* windows only partly covered, of which the gaps were created */
    int issues;      /* problems reported (e.g. DEFAULT rows without --move-from-default) */
    /* Added for the route stage: */
    int partitions_created; /* tables created (a gap-filled window may need several) */
    Err issue;              /* the first issue (EC_CONFIG, with detail and hint) */
} EnsureResult;

void ensure_options_default(EnsureOptions *o);

/* --window-tz names a zone every machine reads the same: not empty (EC_USAGE;
 * leave the option out for UTC), not "localtime"/"posixrules" (the machine's
 * own zone).  NULL is fine (UTC).  The planner checks it too. */
V7FILL_MUST_CHECK bool window_tz_check(const char *tz, Err *err);

/* Make sure every window intersecting [from_us, to_us) exists.  Runs its own
 * transactions: call with no transaction open.  Refreshes t's partition list. */
V7FILL_MUST_CHECK bool partitions_ensure_range(PgConn *c, TargetTable *t, int64_t from_us,
                                               int64_t to_us, const EnsureOptions *opts,
                                               EnsureResult *res, Err *err);

/* Make sure the windows holding each of `times` exist (any order, duplicates
 * fine); cheap when they are all covered already (no round trip). */
V7FILL_MUST_CHECK bool partitions_ensure_times(PgConn *c, TargetTable *t, const int64_t *times,
                                               size_t n, const EnsureOptions *opts,
                                               EnsureResult *res, Err *err);

/*
 * Notes on the two calls above:
 * - Each window runs in its own short transaction: advisory lock on the
 *   parent (key partitions_lock_key()), re-check of the partition list,
 *   CREATE TABLE ... (LIKE parent ...), owner, grants, CHECK, ATTACH
 *   PARTITION, DROP the CHECK.  Lock timeouts (55P03) and deadlocks are
 *   retried opts->lock_retries times.
 * - A window whose rows sit in the DEFAULT partition is an issue (res->issue,
 *   res->issues++) and ends the call with true: later windows are not
 *   touched.  With move_from_default the rows are moved instead.
 * - In a dry run nothing is written; the statements go to ddl_out and the
 *   planned partitions are added to t (Partition.planned) so that repeated
 *   calls plan each window once and catalog_partition_for() finds them.
 */

/* The granularity ensure uses for t: opts->granularity, or the inferred one. */
V7FILL_MUST_CHECK bool partitions_effective_granularity(const TargetTable *t,
                                                        const EnsureOptions *opts,
                                                        Granularity *out, Err *err);

/* A window and the pieces ensure would create for it (none: covered). */
typedef struct WindowPlan
{
    Window window;
    char name[64];
    bool partial; /* partly covered: the pieces are its gaps */
    size_t npieces;
    WindowPiece *pieces;
} WindowPlan;

/* Pure planning against t's current partition list, no round trip: every
 * window intersecting [from_us, to_us) (plan_range, covered ones included),
 * or the windows of `times` that need something (plan_times).  Names are
 * checked for length; clashes with relations that are not partitions are
 * only found by ensure itself.  Free with window_plans_free. */
V7FILL_MUST_CHECK bool partitions_plan_range(const TargetTable *t, int64_t from_us, int64_t to_us,
                                             const EnsureOptions *opts, WindowPlan **out,
                                             size_t *nout, Err *err);
V7FILL_MUST_CHECK bool partitions_plan_times(const TargetTable *t, const int64_t *times, size_t n,
                                             const EnsureOptions *opts, WindowPlan **out,
                                             size_t *nout, Err *err);
void window_plans_free(WindowPlan *plans, size_t n);

/* The advisory lock key v7fill takes (pg_advisory_xact_lock(bigint)) before
 * changing the partitions of the table with this oid:
 * (x'7637666c'::bigint << 32) | oid  ("v7fl" in the high half). */
int64_t partitions_lock_key(unsigned int parent_oid);

#endif /* V7FILL_PARTITIONS_H */
