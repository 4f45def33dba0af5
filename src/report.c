/*
 * `v7fill report`: gather (catalog, retention, row counts, run statistics),
 * judge (the verdict), and render as terminal text or JSON.  The HTML page
 * is in report_html.c.
 *
 * Row counts are catalog_estimate_rows() (the planner's estimate scaled to
 * the current size, as `partitions --list` shows it); --exact counts instead.
 */
#include "v7fill/report.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/civil.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/textwidth.h"
#include "v7fill/timeparse.h"

#define RUN_PAGE 100 /* run statistics fetched per query: memory stays bounded */
#define RUN_CLOCK_SLACK_US (2 * US_PER_SEC)
#define STR_(x)  #x
#define STR(x)   STR_(x)

const char *
window_state_name(WindowState s)
{
    switch (s)
    {
        case WSTATE_NO_RETENTION:
            return "no_retention";
        case WSTATE_LIVE:
            return "live";
        case WSTATE_NEAR_CUTOFF:
            return "near_cutoff";
        case WSTATE_PAST_CUTOFF:
            return "past_cutoff";
    }
    return "?";
}

void
report_free(Report *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->nwindows; i++)
    {
        free(r->windows[i].schema);
        free(r->windows[i].name);
    }
    free(r->windows);
    for (size_t i = 0; i < r->npending; i++)
    {
        free(r->pending[i].schema);
        free(r->pending[i].name);
        free(r->pending[i].finalize_sql);
        free(r->pending[i].attach_sql);
    }
    free(r->pending);
    free(r->schema);
    free(r->table);
    free(r->default_name);
    tracker_free(r->stats);
    free(r);
}

/* ---------------------------------------------------------------- gather */

static bool
count_rows(PgConn *c, const char *schema, const char *name, double *rows, Err *err)
{
    char *q = pg_qualified(c, schema, name);
    char *sql = xasprintf("SELECT count(*) FROM %s", q);
    PGresult *res;
    bool ok = pg_query(c, sql, 0, NULL, &res, err);

    if (ok)
    {
        *rows = strtod(PQgetvalue(res, 0, 0), NULL);
        PQclear(res);
    }
    else
        err_prefix(err, "could not count the rows of %s", q);
    free(sql);
    free(q);
    return ok;
}

static void
window_judge(Report *r, ReportWindow *w)
{
    int64_t len;

    w->retires_at_us = INT64_MAX;
    w->time_left_us = INT64_MAX;
    w->near_cutoff_us = 0;
    if (r->retention.us <= 0 || w->upper_us == INT64_MAX)
    {
        w->state = WSTATE_NO_RETENTION;
        return;
    }
    w->retires_at_us = civil_sat_add(w->upper_us, r->retention.us);
    w->time_left_us = w->retires_at_us - r->now_us;
    /* Default horizon: 10% of the retention, but at least the window itself:
     * a month-long window of a 90-day retention is "near" for its last month. */
    len = w->lower_us == INT64_MIN ? 0 : w->upper_us - w->lower_us;
    w->near_cutoff_us = r->near_cutoff_us > 0 ? r->near_cutoff_us : r->retention.us / 10;
    if (r->near_cutoff_us <= 0 && len > w->near_cutoff_us)
        w->near_cutoff_us = len;
    /* Maintenance retires a window once now > upper + retention. */
    if (w->time_left_us < 0)
        w->state = WSTATE_PAST_CUTOFF;
    else if (w->time_left_us <= w->near_cutoff_us)
        w->state = WSTATE_NEAR_CUTOFF;
    else
        w->state = WSTATE_LIVE;
}

/* The rows of p: counted (exact), else from the estimates; *rows < 0 unknown. */
static bool
partition_rows(PgConn *c, const Partition *p, bool exact, const RowEstimate *est, size_t nest,
               double *rows, bool *rows_exact, Err *err)
{
    *rows = -1;
    *rows_exact = false;
    if (exact)
    {
        *rows_exact = true;
        return count_rows(c, p->schema, p->name, rows, err);
    }
    for (size_t k = 0; k < nest; k++)
        if (est[k].oid == p->oid)
        {
            *rows = est[k].rows;
            *rows_exact = est[k].exact;
        }
    return true;
}

/* Partitions left "detach pending": shown apart, with the SQL that settles
 * each (finalize; then drop it, or attach it again to restore its rows). */
static bool
gather_pending(PgConn *c, const TargetTable *t, Report *r, bool exact, const RowEstimate *est,
               size_t nest, Err *err)
{
    if (t->npending == 0)
        return true;
    r->pending = xcalloc(t->npending, sizeof *r->pending);
    for (size_t i = 0; i < t->npending; i++)
    {
        const Partition *p = &t->pending[i];
        ReportPending *rp = &r->pending[r->npending++];

        rp->schema = xstrdup(p->schema);
        rp->name = xstrdup(p->name);
        rp->lower_us = p->lower_us;
        rp->upper_us = p->upper_us;
        catalog_pending_sql(c, t->schema, t->name, p, &rp->finalize_sql, &rp->attach_sql);
        if (!partition_rows(c, p, exact, est, nest, &rp->rows, &rp->rows_exact, err))
            return false;
    }
    return true;
}

static bool
gather_windows(PgConn *c, const TargetTable *t, Report *r, bool exact, Err *err)
{
    RowEstimate *est = NULL;
    size_t nest = 0;

    if (!exact && !catalog_estimate_rows(c, t, &est, &nest, err))
        return false;
    r->windows = xcalloc(t->npartitions ? t->npartitions : 1, sizeof *r->windows);
    for (size_t i = 0; i < t->npartitions; i++)
    {
        const Partition *p = &t->partitions[i];
        double rows;
        bool rows_exact;

        if (!partition_rows(c, p, exact, est, nest, &rows, &rows_exact, err))
        {
            free(est);
            return false;
        }
        if (p->is_default)
        {
            r->has_default = true;
            r->default_name = xasprintf("%s.%s", p->schema, p->name);
            r->default_rows = rows;
            continue;
        }
        {
            ReportWindow *w = &r->windows[r->nwindows++];

            w->schema = xstrdup(p->schema);
            w->name = xstrdup(p->name);
            w->lower_us = p->lower_us;
            w->upper_us = p->upper_us;
            w->rows = rows;
            w->rows_exact = rows_exact;
            window_judge(r, w);
        }
    }
    if (!gather_pending(c, t, r, exact, est, nest, err))
    {
        free(est);
        return false;
    }
    free(est);
    return true;
}

/* The run history of one table, a page at a time ($1 schema, $2 table, $3
 * --since or NULL, $4 the last run_id read).  The tracker document is the
 * stats column itself, or (tolerated) one of its top-level members. */
#define RUNS_SELECT                                                                             \
    "SELECT r.run_id, (extract(epoch FROM r.finished_at) * 1000000)::int8, "                    \
    "       CASE WHEN r.stats ->> 'format' IS NOT NULL THEN r.stats::text "                     \
    "            ELSE (SELECT e.value::text FROM jsonb_each(CASE WHEN "                         \
    "                    jsonb_typeof(r.stats) = 'object' THEN r.stats "                        \
    "                    ELSE '{}'::jsonb END) e "                                              \
    "                   WHERE e.value ->> 'format' LIKE 'v7fill-tracker/%' "                    \
    "                   LIMIT 1) END, "                                                         \
    "       (extract(epoch FROM r.finished_at) * 1000000 - r.elapsed_s * 1000000)::int8, "     \
    "       r.status IN ('importing', 'copying', 'streaming') "                                \
    "  FROM v7fill.run r "                                                                      \
    " WHERE r.target_schema = $1 AND r.target_table = $2 "                                      \
    "   AND r.stats IS NOT NULL "                                                               \
    "   AND ($3::timestamptz IS NULL OR r.finished_at >= $3::timestamptz) "                     \
    "   AND r.run_id > $4::int8 "
#define RUNS_ORDER " ORDER BY r.run_id LIMIT " STR(RUN_PAGE)
#define RUN_FOLD_HINT 1440

static bool
gather_runs(PgConn *c, const ReportOptions *o, Report *r, Err *err)
{
    char since[48];
    char after[24] = "0";
    const char *params[4];
    PGresult *res;
    Err first = {0};
    bool by_oid;
    size_t periodic = 0;

    if (!pg_query(c,
                  "SELECT to_regclass('v7fill.run') IS NOT NULL, "
                  "EXISTS (SELECT 1 FROM pg_catalog.pg_attribute "
                  "WHERE attrelid = to_regclass('v7fill.run') AND attname = 'target_oid')",
                  0, NULL, &res, err))
        return false;
    if (strcmp(PQgetvalue(res, 0, 0), "t") != 0)
    {
        PQclear(res);
        return true;
    }
    /* Runs into an earlier table of this name (dropped, made again) are not
     * this table's; runs recorded before v7fill kept the table's oid are. */
    by_oid = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    PQclear(res);
    if (o->since_set)
        civil_format_rfc3339(o->since_us, true, since, sizeof since);
    params[0] = r->schema;
    params[1] = r->table;
    params[2] = o->since_set ? since : NULL;
    params[3] = after;
    /* Pages by run_id keep memory bounded however many runs there are. */
    for (;;)
    {
        int n;

        if (!pg_query(c,
                      by_oid ? RUNS_SELECT " AND (r.target_oid IS NULL OR r.target_oid = "
                                            "to_regclass(format('%I.%I', $1::text, $2::text))::oid) "
                                            RUNS_ORDER
                             : RUNS_SELECT RUNS_ORDER,
                      4, params, &res, err))
        {
            err_prefix(err, "could not read the run history (v7fill.run)");
            return false;
        }
        n = PQntuples(res);
        for (int i = 0; i < n; i++)
        {
            Err e = {0};
            int64_t finished = strtoll(PQgetvalue(res, i, 1), NULL, 10);
            int64_t started = strtoll(PQgetvalue(res, i, 3), NULL, 10);

            if (PQgetvalue(res, i, 4)[0] == 't')
                periodic++;

            /* Rows were inserted while the run ran; the slack covers the
             * client's clock against the server's. */
            if (PQgetisnull(res, i, 2) ||
                !tracker_merge_run(r->stats, PQgetvalue(res, i, 2), started - RUN_CLOCK_SLACK_US,
                                   finished + RUN_CLOCK_SLACK_US, &e))
            {
                if (r->runs_skipped++ == 0)
                {
                    first = e;
                    if (!first.msg[0])
                        (void) snprintf(first.msg, sizeof first.msg,
                                        "no v7fill tracker document in the stats column");
                    (void) snprintf(first.detail, sizeof first.detail, "run %s",
                                    PQgetvalue(res, i, 0));
                }
                continue;
            }
            /* by time: folded rows (run_history.h) come after later ones by run_id */
            if (r->runs++ == 0 || finished < r->first_run_us)
                r->first_run_us = finished;
            if (finished > r->last_run_us)
                r->last_run_us = finished;
        }
        if (n > 0)
            (void) snprintf(after, sizeof after, "%s", PQgetvalue(res, n - 1, 0));
        PQclear(res);
        if (n < RUN_PAGE)
            break;
    }
    if (r->runs_skipped)
        log_warn("statistics of %zu run%s skipped (first: %s: %s)", r->runs_skipped,
                 r->runs_skipped == 1 ? "" : "s", first.detail, first.msg);
    /* a day of one stream's rows, unfolded (run_history.h) */
    if (periodic > RUN_FOLD_HINT)
        log_info("%zu periodic run rows read (every --record-every seconds); v7fill maintain "
                 "%s.%s folds those of past hours into one per hour, which this report reads "
                 "faster",
                 periodic, r->schema, r->table);
    return true;
}

/* The pages of run rows in one snapshot: a fold (run_history.h) committing
 * meanwhile replaces rows by one with a later run_id, which a page read after
 * it would count again. */
static bool
gather_runs_once(PgConn *c, const ReportOptions *o, Report *r, Err *err)
{
    Err ignored;
    bool ok;

    if (!pg_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err))
        return false;
    ok = gather_runs(c, o, r, err);
    if (ok)
        return pg_exec(c, "COMMIT", err);
    if (!pg_exec(c, "ROLLBACK", &ignored))
        log_debug("rollback: %s", ignored.msg);
    return false;
}

/* Rows per window from the run statistics, onto the catalog's windows. */
static void
match_run_windows(Report *r)
{
    const TrackerWindow *tw;
    size_t n = tracker_windows(r->stats, &tw);

    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < r->nwindows; k++)
        {
            ReportWindow *w = &r->windows[k];

            if (tw[i].lower_us >= w->lower_us && tw[i].lower_us < w->upper_us)
            {
                for (int c = 0; c < 3; c++)
                    w->run_rows[c] += tw[i].rows[c];
                w->run_rows_at_insert += tw[i].not_rejudged;
                break;
            }
        }
}

static void
judge(Report *r)
{
    char rt[128];
    char d[48];
    char x[48];
    int64_t max;

    if (r->retention.source == RETENTION_NONE)
    {
        (void) snprintf(r->verdict, sizeof r->verdict,
                        "no retention: windows are never retired, so no row is ever too late "
                        "(none given with --retention, none stored by v7fill, no pg_partman "
                        "retention)");
        return;
    }
    (void) snprintf(rt, sizeof rt, "%s", r->retention.text);
    if (tracker_total(r->stats) == 0)
    {
        (void) snprintf(r->verdict, sizeof r->verdict,
                        "retention %s; no delays recorded%s: the verdict needs the statistics "
                        "of at least one run",
                        rt, r->since_set ? " since --since" : " (no runs with statistics)");
        return;
    }
    max = tracker_max(r->stats);
    if (max < 0)
        max = 0;
    duration_format(max, d, sizeof d);
    r->verdict_known = true;
    r->verdict_ok = r->retention.us > max;
    if (r->verdict_ok)
    {
        duration_format(r->retention.us - max, x, sizeof x);
        (void) snprintf(r->verdict, sizeof r->verdict,
                        "retention %s exceeds the largest observed delay %s by %s", rt, d, x);
    }
    else
        (void) snprintf(r->verdict, sizeof r->verdict,
                        "retention %s does not exceed the largest observed delay %s: retention "
                        "must exceed the longest delivery delay",
                        rt, d);
}

bool
report_build(PgConn *c, const ReportOptions *o, Report **out, Err *err)
{
    TargetTable *t = NULL;
    Report *r;
    Err perr = {0};

    *out = NULL;
    if (!catalog_load_target(c, o->table, &t, err))
        return false;
    r = xcalloc(1, sizeof *r);
    r->schema = xstrdup(t->schema);
    r->table = xstrdup(t->name);
    r->key_kind = t->key_kind;
    r->since_set = o->since_set;
    r->since_us = o->since_us;
    r->exact = o->exact;
    r->near_cutoff_us = o->near_cutoff_us;
    r->default_rows = -1;
    if (o->now_us)
        r->now_us = o->now_us;
    else if (!pg_server_now_us(c, &r->now_us, err))
        goto fail;
    if (!retention_resolve(c, t->schema, t->name, o->retention, &r->retention, err))
        goto fail;
    /* For the page only: a problem reading pg_partman matters when its
     * retention is the one in force, and then resolve has failed already. */
    if (!retention_partman(c, t->schema, t->name, &r->partman, &perr))
        log_detail("pg_partman: %s", perr.msg);
    r->cutoff_us = r->retention.us > 0 ? r->now_us - r->retention.us : INT64_MIN;
    r->stats = tracker_new(r->retention.us, o->near_cutoff_us);
    if (!gather_windows(c, t, r, o->exact, err) || !gather_runs_once(c, o, r, err))
        goto fail;
    match_run_windows(r);
    judge(r);
    catalog_target_free(t);
    *out = r;
    return true;
fail:
    catalog_target_free(t);
    report_free(r);
    return false;
}

/* -------------------------------------------------------------- terminal */

void
report_fmt_date(int64_t us, const char *suffix, char *out, size_t size)
{
    CivilTime ct;

    if (civil_format_day_bound(us, out, size))
        return;
    civil_from_us(us, &ct);
    (void) snprintf(out, size, "%04d-%02d-%02d %02d:%02d%s", ct.year, ct.month, ct.day, ct.hour,
                    ct.minute, suffix);
}

/* 1234567 → "1,234,567". */
void
report_fmt_count(double v, char *out, size_t size)
{
    char digits[32];
    size_t n;
    size_t o = 0;

    if (v < 0)
    {
        (void) snprintf(out, size, "?");
        return;
    }
    (void) snprintf(digits, sizeof digits, "%.0f", v);
    n = strlen(digits);
    for (size_t i = 0; i < n && o + 2 < size; i++)
    {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
}

void
report_fmt_retention_us(int64_t us, char *out, size_t size)
{
    if (us <= 0)
        (void) snprintf(out, size, "no retention");
    else if (us % US_PER_DAY == 0)
        (void) snprintf(out, size, "%" PRId64 "d", us / US_PER_DAY);
    else if (us % US_PER_HOUR == 0)
        (void) snprintf(out, size, "%" PRId64 "h", us / US_PER_HOUR);
    else
        duration_format(us, out, size);
}

void
report_fmt_class_note(const Report *r, char *out, size_t size, char *at_insert, size_t at_size)
{
    char shown[64];
    char lo[48];
    char hi[48];
    char other[112];
    size_t runs;
    int64_t min_us;
    int64_t max_us;

    (void) snprintf(shown, sizeof shown, "%s%s", r->retention.us > 0 ? "under " : "with ",
                    r->retention.us > 0 ? r->retention.text : "no retention");
    if (!tracker_other_retentions(r->stats, &runs, &min_us, &max_us))
    {
        (void) snprintf(out, size, "judged %s", shown);
        (void) snprintf(at_insert, at_size, "%s", "");
        return;
    }
    report_fmt_retention_us(min_us, lo, sizeof lo);
    report_fmt_retention_us(max_us, hi, sizeof hi);
    if (min_us == max_us && min_us == r->retention.us)
        (void) snprintf(other, sizeof other, "under %s with another near-cutoff horizon", lo);
    else if (min_us == max_us)
        (void) snprintf(other, sizeof other, "%s%s", min_us > 0 ? "under " : "with ", lo);
    else
        (void) snprintf(other, sizeof other, "under %s to %s", lo, hi);
    (void) snprintf(out, size, "judged again %s; %zu run%s judged %s at insert", shown,
                    runs, runs == 1 ? "" : "s", other);
    (void) snprintf(at_insert, at_size, "as judged at insert %s", other);
}

int64_t
report_days_left_tenths(int64_t us)
{
    /* in integers: exact, and no overflow near INT64_MAX */
    const int64_t tenth = US_PER_DAY / 10;
    int64_t q = us / tenth;
    int64_t rem = us % tenth;

    if (rem >= tenth - rem)
        q++;
    else if (-rem >= tenth + rem)
        q--;
    return q;
}

void
report_fmt_days_left(int64_t us, char *out, size_t size)
{
    int64_t t = report_days_left_tenths(us);
    int64_t a = t < 0 ? -t : t;

    (void) snprintf(out, size, "%s%" PRId64 ".%" PRId64, t < 0 ? "-" : "", a / 10, a % 10);
}

static void
fmt_days(int64_t us, char *out, size_t size)
{
    char d[32];

    report_fmt_days_left(us, d, sizeof d);
    (void) snprintf(out, size, "%s days", d);
}

/* A bar of `frac` × width cells in eighths of a block; always width cells. */
static void
bar(FILE *out, double frac, int width)
{
    static const char *const eighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
    long units = frac > 0 ? lround(frac * width * 8) : 0;
    int cells;

    if (frac > 0 && units == 0)
        units = 1; /* something is there: show it */
    if (units > (long) width * 8)
        units = (long) width * 8;
    for (long i = 0; i < units / 8; i++)
        fputs("█", out);
    fputs(eighths[units % 8], out);
    cells = (int) (units / 8) + (units % 8 ? 1 : 0);
    for (int i = cells; i < width; i++)
        fputc(' ', out);
}

static void
print_windows(FILE *out, const Report *r)
{
    double max = 0;
    int namew = 6;
    int lowerw = 10; /* a date; "2026-03-20 12:00" when a bound has a time */
    bool cutoff_shown = r->retention.us <= 0;
    bool any_estimate = false;
    bool any_unknown = false;
    char cut[48];

    for (size_t i = 0; i < r->nwindows; i++)
    {
        int len = text_width(r->windows[i].name);
        char lower[32];

        report_fmt_date(r->windows[i].lower_us, "", lower, sizeof lower);
        if ((int) strlen(lower) > lowerw)
            lowerw = (int) strlen(lower);
        if (r->windows[i].rows > max)
            max = r->windows[i].rows;
        if (len > namew)
            namew = len;
        any_estimate |= !r->windows[i].rows_exact;
        any_unknown |= r->windows[i].rows < 0;
    }
    if (namew > 40)
        namew = 40;
    report_fmt_date(r->cutoff_us, "", cut, sizeof cut);
    fprintf(out, "Rows per window%s%s\n",
            any_estimate ? " (planner estimates; --exact counts them)" : "",
            any_unknown ? "; ? = not analyzed since rows arrived" : "");
    if (r->nwindows == 0)
        fprintf(out, "  (no partitions)\n");
    for (size_t i = 0; i < r->nwindows; i++)
    {
        const ReportWindow *w = &r->windows[i];
        char lower[32];
        char rows[32];
        char when[32];
        char left[48];

        if (!cutoff_shown && w->upper_us >= r->cutoff_us)
        {
            fprintf(out, "  ┄┄┄┄┄┄ retention cutoff: now − %s = %s ┄┄┄┄┄┄\n", r->retention.text,
                    cut);
            cutoff_shown = true;
        }
        report_fmt_date(w->lower_us, "", lower, sizeof lower);
        report_fmt_count(w->rows, rows, sizeof rows);
        /* padded by columns, not bytes: names may be multibyte */
        fputs("  ", out);
        text_pad(out, w->name, namew, namew);
        fprintf(out, " %-*s ", lowerw, lower);
        bar(out, max > 0 && w->rows > 0 ? w->rows / max : 0, 30);
        fprintf(out, " %s%11s", w->rows_exact || w->rows < 0 ? " " : "~", rows);
        switch (w->state)
        {
            case WSTATE_NO_RETENTION:
                break;
            case WSTATE_PAST_CUTOFF:
                report_fmt_date(w->retires_at_us, "", when, sizeof when);
                fprintf(out, "  past the cutoff since %s: maintenance retires it", when);
                break;
            case WSTATE_NEAR_CUTOFF:
            case WSTATE_LIVE:
                report_fmt_date(w->retires_at_us, "", when, sizeof when);
                fmt_days(w->time_left_us, left, sizeof left);
                fprintf(out, "  retires %s (%s left)%s", when, left,
                        w->state == WSTATE_NEAR_CUTOFF ? "  NEAR CUTOFF" : "");
                break;
        }
        if (r->now_us >= w->lower_us && r->now_us < w->upper_us)
            fputs("  ◀ now", out);
        fputc('\n', out);
    }
    if (!cutoff_shown)
        fprintf(out, "  ┄┄┄┄┄┄ retention cutoff: now − %s = %s ┄┄┄┄┄┄\n", r->retention.text, cut);
    if (r->has_default)
    {
        char rows[32];

        report_fmt_count(r->default_rows, rows, sizeof rows);
        fprintf(out, "  DEFAULT partition %s: %s rows (never retired)\n", r->default_name, rows);
    }
    for (size_t i = 0; i < r->npending; i++)
    {
        const ReportPending *p = &r->pending[i];
        char lower[32];
        char upper[32];
        char rows[32];

        report_fmt_date(p->lower_us, "", lower, sizeof lower);
        report_fmt_date(p->upper_us, "", upper, sizeof upper);
        report_fmt_count(p->rows, rows, sizeof rows);
        fprintf(out,
                "  detach pending: %s.%s [%s, %s): not a window; rows there are invisible to "
                "queries (%s%s); finalize: %s; then drop it, or restore its rows: %s\n",
                p->schema, p->name, lower, upper, p->rows_exact || p->rows < 0 ? "" : "~", rows,
                p->finalize_sql, p->attach_sql);
    }
}

static void
print_near(FILE *out, const Report *r)
{
    size_t n = 0;

    if (r->retention.us <= 0)
        return;
    for (size_t i = 0; i < r->nwindows; i++)
        n += r->windows[i].state == WSTATE_NEAR_CUTOFF;
    fprintf(out, "\nWindows near the cutoff: %zu\n", n);
    for (size_t i = 0; i < r->nwindows; i++)
    {
        const ReportWindow *w = &r->windows[i];
        char lower[32];
        char upper[32];
        char when[32];
        char left[48];
        char horizon[48];

        if (w->state != WSTATE_NEAR_CUTOFF)
            continue;
        report_fmt_date(w->lower_us, "", lower, sizeof lower);
        report_fmt_date(w->upper_us, "", upper, sizeof upper);
        report_fmt_date(w->retires_at_us, "", when, sizeof when);
        fmt_days(w->time_left_us, left, sizeof left);
        duration_format(w->near_cutoff_us, horizon, sizeof horizon);
        fprintf(out, "  %s [%s, %s): retires %s, %s left (horizon %s)", w->name, lower, upper,
                when, left, horizon);
        if (w->run_rows[DELAY_NEAR_CUTOFF])
            fprintf(out, "; %" PRIu64 " near-cutoff rows written", w->run_rows[DELAY_NEAR_CUTOFF]);
        fputc('\n', out);
    }
}

static void
print_delays(FILE *out, const Report *r)
{
    const TrackerBucket *b;
    size_t nb = tracker_display(r->stats, &b);
    uint64_t total = tracker_total(r->stats);
    uint64_t max = 0;
    size_t first = nb;
    size_t last = 0;
    char since[48] = "";
    char v[5][48];
    char note[256];
    char at_insert[160];

    if (r->since_set)
    {
        report_fmt_date(r->since_us, "", v[0], sizeof v[0]);
        (void) snprintf(since, sizeof since, " since %s", v[0]);
    }
    fprintf(out, "\nDelay, id time to insert: %" PRIu64 " rows from %zu run%s%s\n", total, r->runs,
            r->runs == 1 ? "" : "s", since);
    if (total == 0)
    {
        fprintf(out, "  (no delays recorded)\n");
        return;
    }
    report_fmt_class_note(r, note, sizeof note, at_insert, sizeof at_insert);
    fprintf(out, "  on time %" PRIu64 ", near cutoff %" PRIu64 ", expired %" PRIu64 " (%s)\n",
            tracker_count(r->stats, DELAY_ON_TIME), tracker_count(r->stats, DELAY_NEAR_CUTOFF),
            tracker_count(r->stats, DELAY_EXPIRED), note);
    if (tracker_count_at_insert(r->stats, DELAY_ON_TIME) +
            tracker_count_at_insert(r->stats, DELAY_NEAR_CUTOFF) +
            tracker_count_at_insert(r->stats, DELAY_EXPIRED) >
        0)
        fprintf(out,
                "  and, %s (their class changed while the run inserted them, or their window "
                "was not tracked): on time %" PRIu64 ", near cutoff %" PRIu64 ", expired %" PRIu64
                "\n",
                at_insert, tracker_count_at_insert(r->stats, DELAY_ON_TIME),
                tracker_count_at_insert(r->stats, DELAY_NEAR_CUTOFF),
                tracker_count_at_insert(r->stats, DELAY_EXPIRED));
    for (size_t i = 0; i < nb; i++)
        if (b[i].count)
        {
            if (first == nb)
                first = i;
            last = i;
            if (b[i].count > max)
                max = b[i].count;
        }
    /* Reach the retention's bucket too: where it sits is the point. */
    for (size_t i = 0; i < nb && r->retention.us > 0; i++)
        if (r->retention.us >= b[i].lower_us && r->retention.us < b[i].upper_us)
        {
            if (i < first)
                first = i;
            if (i > last)
                last = i;
        }
    for (size_t i = first; i <= last; i++)
    {
        char count[32];
        bool has_ret = r->retention.us > 0 && r->retention.us >= b[i].lower_us &&
                       r->retention.us < b[i].upper_us;

        report_fmt_count((double) b[i].count, count, sizeof count);
        fprintf(out, "  %-6s ", b[i].label);
        bar(out, max ? (double) b[i].count / (double) max : 0, 30);
        fprintf(out, " %11s %5.1f%%", count, 100.0 * (double) b[i].count / (double) total);
        if (has_ret)
            fprintf(out, "  ◀ retention %s", r->retention.text);
        fputc('\n', out);
    }
    duration_format(tracker_min(r->stats), v[0], sizeof v[0]);
    duration_format(tracker_percentile(r->stats, 50), v[1], sizeof v[1]);
    duration_format(tracker_percentile(r->stats, 90), v[2], sizeof v[2]);
    duration_format(tracker_percentile(r->stats, 99), v[3], sizeof v[3]);
    duration_format(tracker_max(r->stats), v[4], sizeof v[4]);
    fprintf(out, "  min %s   p50 %s   p90 %s   p99 %s   max %s\n", v[0], v[1], v[2], v[3], v[4]);
}

static void
print_largest(FILE *out, const Report *r)
{
    const TrackerLargest *l;
    size_t n = tracker_largest(r->stats, &l);

    char note[256];
    char at_insert[160];
    int owidth = 0;

    if (n == 0)
        return;
    for (size_t i = 0; i < n; i++)
    {
        int w = text_width(report_largest_origin(&l[i]));

        owidth = w > owidth ? w : owidth;
    }
    if (owidth > REPORT_ORIGIN_COLUMNS)
        owidth = REPORT_ORIGIN_COLUMNS;
    report_fmt_class_note(r, note, sizeof note, at_insert, sizeof at_insert);
    fprintf(out, "\nLargest delays (class %s)\n", note);
    for (size_t i = 0; i < n; i++)
    {
        char d[48];
        char id[48];
        char ins[48];
        char cls[160];

        duration_format(l[i].delay_us, d, sizeof d);
        civil_format_rfc3339(l[i].id_us, false, id, sizeof id);
        civil_format_rfc3339(l[i].insert_us, false, ins, sizeof ins);
        if (l[i].cls_at_insert)
        {
            char ret[48];

            report_fmt_retention_us(l[i].cls_retention_us, ret, sizeof ret);
            (void) snprintf(cls, sizeof cls, "%s (as judged at insert under %s)",
                            delay_class_name(l[i].cls), ret);
        }
        else
            (void) snprintf(cls, sizeof cls, "%s", delay_class_name(l[i].cls));
        /* Where it came from and its reference, then its id and times. */
        fprintf(out, "  %-14s ", d);
        text_pad(out, report_largest_origin(&l[i]), owidth, REPORT_ORIGIN_COLUMNS);
        fprintf(out, "  %-11s %s%s\n", cls, l[i].ref, l[i].ref_truncated ? "…" : "");
        fprintf(out, "  %-14s %s%s%sid time %s  inserted %s\n", "", l[i].id[0] ? "id " : "",
                l[i].id, l[i].id[0] ? "  " : "", id, ins);
    }
}

const char *
report_largest_origin(const TrackerLargest *l)
{
    return l->origin[0] ? l->origin : "(origin not recorded)";
}

void
report_print(FILE *out, const Report *r)
{
    char ret[512];
    char now[48];

    report_fmt_date(r->now_us, "", now, sizeof now);
    retention_describe(&r->retention, ret, sizeof ret);
    fprintf(out, "Report for %s.%s (%s key) at %s\n", r->schema, r->table,
            catalog_key_kind_name(r->key_kind), now);
    fprintf(out, "Retention: %s\n", ret);
    if (r->partman.manages)
        fprintf(out, "pg_partman %s manages this table (%s.part_config)%s%s\n", r->partman.version,
                r->partman.schema, r->partman.has_retention ? ", retention " : "",
                r->partman.has_retention ? r->partman.retention : "");
    fputc('\n', out);
    print_windows(out, r);
    print_near(out, r);
    print_delays(out, r);
    print_largest(out, r);
    fprintf(out, "\n%s%s\n", r->verdict_known && !r->verdict_ok ? "WARNING: " : "verdict: ",
            r->verdict);
}

/* ------------------------------------------------------------------ JSON */

static json_t *
jtime(int64_t us)
{
    char text[48];

    if (us == INT64_MIN || us == INT64_MAX)
        return json_null();
    civil_format_rfc3339(us, false, text, sizeof text);
    return json_string(text);
}

static json_t *
jbound_us(int64_t us)
{
    return us == INT64_MIN || us == INT64_MAX ? json_null() : json_integer((json_int_t) us);
}

static json_t *
jrows(double rows)
{
    return rows < 0 ? json_null() : json_integer((json_int_t) rows);
}

/* Partitions left "detach pending": not windows, each with the SQL that
 * settles it. */
static json_t *
pending_json(const Report *r)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < r->npending; i++)
    {
        const ReportPending *p = &r->pending[i];
        json_t *o = json_object();

        json_object_set_new(o, "schema", json_string(p->schema));
        json_object_set_new(o, "name", json_string(p->name));
        json_object_set_new(o, "lower", jtime(p->lower_us));
        json_object_set_new(o, "upper", jtime(p->upper_us));
        json_object_set_new(o, "lower_us", jbound_us(p->lower_us));
        json_object_set_new(o, "upper_us", jbound_us(p->upper_us));
        json_object_set_new(o, "rows", jrows(p->rows));
        json_object_set_new(o, "rows_exact", json_boolean(p->rows_exact));
        json_object_set_new(o, "finalize_sql", json_string(p->finalize_sql));
        json_object_set_new(o, "attach_sql", json_string(p->attach_sql));
        json_array_append_new(arr, o);
    }
    return arr;
}

char *
report_json(const Report *r)
{
    json_t *root = json_object();
    json_t *tab = json_object();
    json_t *ret = json_object();
    json_t *windows = json_array();
    json_t *near = json_array();
    json_t *runs = json_object();
    json_t *verdict = json_object();
    json_t *stats;
    char *text;

    json_object_set_new(tab, "schema", json_string(r->schema));
    json_object_set_new(tab, "name", json_string(r->table));
    json_object_set_new(tab, "key", json_string(catalog_key_kind_name(r->key_kind)));
    json_object_set_new(root, "table", tab);
    json_object_set_new(root, "now", jtime(r->now_us));

    json_object_set_new(ret, "source", json_string(retention_source_name(r->retention.source)));
    if (r->retention.source != RETENTION_NONE)
    {
        json_object_set_new(ret, "text", json_string(r->retention.text));
        json_object_set_new(ret, "us", json_integer((json_int_t) r->retention.us));
        json_object_set_new(ret, "where", json_string(r->retention.where));
        json_object_set_new(ret, "cutoff", jtime(r->cutoff_us));
    }
    json_object_set_new(root, "retention", ret);
    if (r->partman.installed)
    {
        json_t *pm = json_object();

        json_object_set_new(pm, "schema", json_string(r->partman.schema));
        json_object_set_new(pm, "version", json_string(r->partman.version));
        json_object_set_new(pm, "manages", json_boolean(r->partman.manages));
        if (r->partman.has_retention)
            json_object_set_new(pm, "retention", json_string(r->partman.retention));
        json_object_set_new(root, "pg_partman", pm);
    }
    json_object_set_new(root, "near_cutoff_us",
                        r->near_cutoff_us > 0 ? json_integer((json_int_t) r->near_cutoff_us)
                                              : json_null());
    json_object_set_new(root, "rows_exact", json_boolean(r->exact));

    for (size_t i = 0; i < r->nwindows; i++)
    {
        const ReportWindow *w = &r->windows[i];
        json_t *o = json_object();

        json_object_set_new(o, "schema", json_string(w->schema));
        json_object_set_new(o, "name", json_string(w->name));
        json_object_set_new(o, "lower", jtime(w->lower_us));
        json_object_set_new(o, "upper", jtime(w->upper_us));
        json_object_set_new(o, "lower_us", jbound_us(w->lower_us));
        json_object_set_new(o, "upper_us", jbound_us(w->upper_us));
        json_object_set_new(o, "rows", jrows(w->rows));
        json_object_set_new(o, "rows_exact", json_boolean(w->rows_exact));
        json_object_set_new(o, "state", json_string(window_state_name(w->state)));
        if (w->state != WSTATE_NO_RETENTION)
        {
            json_object_set_new(o, "retires_at", jtime(w->retires_at_us));
            json_object_set_new(o, "time_left_us", json_integer((json_int_t) w->time_left_us));
            json_object_set_new(o, "days_left",
                                json_real((double) report_days_left_tenths(w->time_left_us) / 10));
            json_object_set_new(o, "near_cutoff_us", json_integer((json_int_t) w->near_cutoff_us));
        }
        json_object_set_new(o, "written_on_time",
                            json_integer((json_int_t) w->run_rows[DELAY_ON_TIME]));
        json_object_set_new(o, "written_near_cutoff",
                            json_integer((json_int_t) w->run_rows[DELAY_NEAR_CUTOFF]));
        json_object_set_new(o, "written_expired",
                            json_integer((json_int_t) w->run_rows[DELAY_EXPIRED]));
        if (w->run_rows_at_insert)
            json_object_set_new(o, "written_as_judged_at_insert",
                                json_integer((json_int_t) w->run_rows_at_insert));
        if (w->state == WSTATE_NEAR_CUTOFF)
            json_array_append_new(near, json_string(w->name));
        json_array_append_new(windows, o);
    }
    json_object_set_new(root, "windows", windows);
    json_object_set_new(root, "near_cutoff_windows", near);
    json_object_set_new(root, "detach_pending", pending_json(r));
    if (r->has_default)
    {
        json_t *d = json_object();

        json_object_set_new(d, "name", json_string(r->default_name));
        json_object_set_new(d, "rows", jrows(r->default_rows));
        json_object_set_new(root, "default_partition", d);
    }

    json_object_set_new(runs, "count", json_integer((json_int_t) r->runs));
    json_object_set_new(runs, "skipped", json_integer((json_int_t) r->runs_skipped));
    json_object_set_new(runs, "since", r->since_set ? jtime(r->since_us) : json_null());
    json_object_set_new(runs, "first", r->runs ? jtime(r->first_run_us) : json_null());
    json_object_set_new(runs, "last", r->runs ? jtime(r->last_run_us) : json_null());
    json_object_set_new(root, "runs", runs);

    text = tracker_to_json(r->stats);
    stats = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    json_object_set_new(root, "delay", stats ? stats : json_null());

    json_object_set_new(verdict, "ok", r->verdict_known ? json_boolean(r->verdict_ok) : json_null());
    json_object_set_new(verdict, "text", json_string(r->verdict));
    if (r->verdict_known)
    {
        int64_t max = tracker_max(r->stats) > 0 ? tracker_max(r->stats) : 0;

        json_object_set_new(verdict, "largest_delay_us", json_integer((json_int_t) max));
        json_object_set_new(verdict, "margin_us", json_integer((json_int_t) (r->retention.us - max)));
    }
    json_object_set_new(root, "verdict", verdict);

    /* 15 significant digits: reals as written (28.1), not 28.100000000000001 */
    text = json_dumps(root, JSON_INDENT(2) | JSON_ESCAPE_SLASH | JSON_REAL_PRECISION(15));
    json_decref(root);
    return text;
}
