/*
 * v7fill partitions TABLE --list | --from T1 --to T2 | --ahead N
 *
 * Lists a target's windows, or makes sure the windows of a time range exist,
 * lock-light (see src/partitions.c).  The output of a run ends with the
 * summary line "created=N skipped=N gaps_filled=N issues=N"; --json prints
 * one JSON document instead (jansson, never hand-escaped).
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "v7fill/catalog.h"
#include "v7fill/civil.h"
#include "v7fill/mem.h"
#include "v7fill/partitions.h"
#include "v7fill/partman.h"
#include "v7fill/pg.h"
#include "v7fill/textwidth.h"
#include "v7fill/timeparse.h"

static void
partitions_usage(FILE *out)
{
    fprintf(out,
            "Usage:\n"
            "  v7fill partitions TABLE --list [--json]\n"
            "  v7fill partitions TABLE --from T1 --to T2 [OPTION]...\n"
            "  v7fill partitions TABLE --ahead N [OPTION]...\n"
            "  v7fill partitions TABLE --maintain [--retention R] [--ahead N] [--drop|--detach-only]\n"
            "                    [--quiet-period D] [--dry-run]\n"
            "\n"
            "List the time windows (partitions) of TABLE, or make sure every window of\n"
            "[T1, T2) exists, or the current window and the next N (for cron).  Partitions\n"
            "are created lock-light: a plain table like TABLE, a CHECK equal to the bounds,\n"
            "ATTACH PARTITION (SHARE UPDATE EXCLUSIVE on TABLE: reads and writes go on),\n"
            "then the CHECK is dropped.  Windows partly covered by existing partitions get\n"
            "only their gaps, as <window name>_p1, _p2, ...\n"
            "\n"
            "TABLE is read as in SQL: schema-qualified or through search_path; quote mixed\n"
            "case or spaces ('\"Events 2026\"').  T1/T2: RFC 3339 / ISO 8601 or PostgreSQL\n"
            "text, e.g. 2026-07-01 or '2026-07-01 12:00:00+02'; without an offset they are\n"
            "local times of --window-tz (UTC without it).\n"
            "\n"
            "Options:\n"
            "  -l, --list               windows with bounds as times, row estimates (as in\n"
            "                           report; ? when unknown), gaps\n"
            "      --from=T1 --to=T2    ensure every window intersecting [T1, T2)\n"
            "      --ahead=N            ensure now's window and the next N\n"
            "  -g, --granularity=G      day, week (ISO, Monday), month, quarter, year; default\n"
            "                           (auto): what most existing partitions use, else month\n"
            "      --window-tz=TZ       window edges at local midnight of TZ (IANA name, not\n"
            "                           empty, not localtime or posixrules); default UTC,\n"
            "                           the clock of UUIDv7 ids\n"
            "      --name-pattern=P     partition names: %%t table, %%Y year, %%m month, %%d day,\n"
            "                           %%j day of year, %%q quarter, %%G ISO year, %%V ISO week;\n"
            "                           default %%t__%%Y_%%m (month), %%t__%%Y (year),\n"
            "                           %%t__%%Y_%%m_%%d (day), %%t__%%G_w%%V (week),\n"
            "                           %%t__%%Y_q%%q (quarter)\n"
            "  -n, --dry-run            print the exact SQL instead of running it\n"
            "      --move-from-default  move rows of new windows out of the DEFAULT partition\n"
            "                           (otherwise such a window is reported and the run stops)\n"
            "      --lock-timeout=MS    lock_timeout per attempt (default 5000)\n"
            "      --lock-retries=N     attempts after a lock timeout or deadlock (default 5)\n"
            "      --json               JSON output\n"
            "      --maintain           ensure now's window and the next --ahead N (default 4),\n"
            "                           and retire the windows whose upper bound is older than\n"
            "                           now - retention: DETACH ... CONCURRENTLY (plain DETACH\n"
            "                           when a DEFAULT partition exists), then DROP; prints\n"
            "                           \"created=N detached=N dropped=N issues=N\" (same as\n"
            "                           \"v7fill maintain\"; see its --help for every option)\n"
            "      --retention=R        retention for --maintain (default: the one stored with\n"
            "                           \"v7fill retention TABLE set\"; without one nothing is\n"
            "                           retired; a table pg_partman manages is refused)\n"
            "      --drop               drop retired windows after detaching them (default)\n"
            "      --detach-only        detach retired windows and keep them as tables\n"
            "      --quiet-period=D     do not retire a window that received rows within D\n"
            "                           (default 1h): a late row is arriving there right now\n"
            "  -h, --help               this help\n"
            "\n"
            "A table pg_partman manages gets the partitions pg_partman would create: its\n"
            "interval, its names (TABLE_p + datetime_string), midnight of the database's\n"
            "TimeZone (or --window-tz), its template table's properties.\n"
            "\n"
            "Exit status: 0 done; 2 usage; 3 unsupported table, a name clash, a table\n"
            "pg_partman manages in a way v7fill cannot follow, or windows left\n"
            "uncreated because the DEFAULT partition holds their rows (issues>0);\n"
            "5 database error (SQLSTATE shown); 70 internal error.\n");
}

typedef struct PartOpts
{
    const char *table;
    bool list;
    const char *from;
    const char *to;
    long ahead;
    bool json;
    EnsureOptions ensure;
} PartOpts;

static void
fmt_time(int64_t us, char *out, size_t size)
{
    CivilTime ct;

    if (us == INT64_MIN)
    {
        (void) snprintf(out, size, "MINVALUE");
        return;
    }
    if (us == INT64_MAX)
    {
        (void) snprintf(out, size, "MAXVALUE");
        return;
    }
    civil_from_us(us, &ct);
    if (ct.usec == 0)
        (void) snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02dZ", ct.year, ct.month, ct.day,
                        ct.hour, ct.minute, ct.second);
    else
        civil_format_rfc3339(us, ct.usec % 1000 != 0, out, size);
}

/* Widen *w to hold `us` as fmt_time prints it (a bound inside a millisecond
 * takes 27 characters). */
static void
fit_time(int64_t us, int *w)
{
    char text[48];

    fmt_time(us, text, sizeof text);
    if ((int) strlen(text) > *w)
        *w = (int) strlen(text);
}

static json_t *
json_time(int64_t us)
{
    char text[48];

    if (us == INT64_MIN || us == INT64_MAX)
        return json_null();
    fmt_time(us, text, sizeof text);
    return json_string(text);
}

static json_t *
json_str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static int
print_json(json_t *doc, Err *err)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

    json_decref(doc);
    if (text == NULL)
    {
        err_set(err, EC_INTERNAL, "could not encode JSON (invalid UTF-8 in a name?)");
        return 70;
    }
    puts(text);
    free(text);
    return 0;
}

/* -------------------------------------------------------------- --list */

/* The granularity whose window is exactly p's range, or NULL. */
static const char *
regular_window(const Partition *p, const TimeParser *zone)
{
    static const Granularity gs[] = {GRAN_DAY, GRAN_WEEK, GRAN_MONTH, GRAN_QUARTER, GRAN_YEAR};

    if (p->lower_us == INT64_MIN || p->upper_us == INT64_MAX)
        return NULL;
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++)
    {
        Window w;
        Err ignored = {0};

        if (!window_at(gs[i], zone, p->lower_us, &w, &ignored))
            return NULL;
        if (w.lower_us == p->lower_us && w.upper_us == p->upper_us)
            return granularity_name(gs[i]);
    }
    return NULL;
}

/* p's rows as report shows them (catalog_estimate_rows); < 0 unknown. */
static double
rows_of(const Partition *p, const RowEstimate *est, size_t nest)
{
    for (size_t k = 0; k < nest; k++)
        if (est[k].oid == p->oid)
            return est[k].rows;
    return -1;
}

static void
rows_text(double rows, char *out, size_t size)
{
    if (rows < 0)
        (void) snprintf(out, size, "?");
    else
        (void) snprintf(out, size, "%.0f", rows);
}

static json_t *
json_rows(double rows)
{
    return rows < 0 ? json_null() : json_integer((json_int_t) rows);
}

/* Partitions left "detach pending": not windows (queries do not see them,
 * no row is routed to them), listed apart. */
static json_t *
pending_json(const TargetTable *t)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < t->npending; i++)
    {
        json_t *jp = json_object();

        json_object_set_new(jp, "schema", json_string(t->pending[i].schema));
        json_object_set_new(jp, "name", json_string(t->pending[i].name));
        json_object_set_new(jp, "from", json_time(t->pending[i].lower_us));
        json_object_set_new(jp, "to", json_time(t->pending[i].upper_us));
        json_array_append_new(arr, jp);
    }
    return arr;
}

static int
list_partitions(PgConn *c, const TargetTable *t, const PartOpts *o, const TimeParser *zone,
                Granularity g, Err *err)
{
    const Partition *def = t->has_default ? &t->partitions[t->npartitions - 1] : NULL;
    size_t nregular = t->npartitions - (def ? 1 : 0);
    int ngaps = 0;
    RowEstimate *est = NULL;
    size_t nest = 0;
    int status;

    if (!catalog_estimate_rows(c, t, &est, &nest, err))
        return err_exit_status(err->code);

    if (o->json)
    {
        json_t *doc = json_object();
        json_t *tab = json_object();
        json_t *parts = json_array();
        json_t *gaps = json_array();

        json_object_set_new(tab, "schema", json_string(t->schema));
        json_object_set_new(tab, "name", json_string(t->name));
        json_object_set_new(tab, "oid", json_integer(t->oid));
        json_object_set_new(tab, "partition_key", json_string(t->partkeydef));
        json_object_set_new(tab, "key_column", json_string(t->key_column));
        json_object_set_new(tab, "key_type", json_string(t->key_type));
        json_object_set_new(tab, "key_kind", json_string(catalog_key_kind_name(t->key_kind)));
        json_object_set_new(tab, "bound_style",
                            t->key_kind == KEY_UUID7
                                ? json_string(catalog_bound_style_name(t->bound_style))
                                : json_null());
        json_object_set_new(tab, "owner", json_string(t->owner));
        json_object_set_new(tab, "tablespace", json_str_or_null(t->tablespace));
        json_object_set_new(tab, "privileges", json_str_or_null(t->relacl));
        json_object_set_new(doc, "table", tab);
        json_object_set_new(doc, "granularity", json_string(granularity_name(g)));
        json_object_set_new(doc, "granularity_inferred",
                            json_boolean(o->ensure.granularity == GRAN_AUTO));
        json_object_set_new(doc, "window_tz", json_str_or_null(o->ensure.window_tz));
        for (size_t i = 0; i < nregular; i++)
        {
            const Partition *p = &t->partitions[i];
            json_t *jp = json_object();
            const char *win = regular_window(p, zone);

            json_object_set_new(jp, "schema", json_string(p->schema));
            json_object_set_new(jp, "name", json_string(p->name));
            json_object_set_new(jp, "from", json_time(p->lower_us));
            json_object_set_new(jp, "to", json_time(p->upper_us));
            json_object_set_new(jp, "lower_bound",
                                json_string(p->lower_text ? p->lower_text : "MINVALUE"));
            json_object_set_new(jp, "upper_bound",
                                json_string(p->upper_text ? p->upper_text : "MAXVALUE"));
            json_object_set_new(jp, "rows_estimate", json_rows(rows_of(p, est, nest)));
            json_object_set_new(jp, "window", json_str_or_null(win));
            json_array_append_new(parts, jp);
            if (i + 1 < nregular && p->upper_us < t->partitions[i + 1].lower_us)
            {
                json_t *gap = json_object();
                json_object_set_new(gap, "from", json_time(p->upper_us));
                json_object_set_new(gap, "to", json_time(t->partitions[i + 1].lower_us));
                json_array_append_new(gaps, gap);
            }
        }
        json_object_set_new(doc, "partitions", parts);
        if (def)
        {
            json_t *jd = json_object();
            json_object_set_new(jd, "schema", json_string(def->schema));
            json_object_set_new(jd, "name", json_string(def->name));
            json_object_set_new(jd, "rows_estimate", json_rows(rows_of(def, est, nest)));
            json_object_set_new(doc, "default", jd);
        }
        else
            json_object_set_new(doc, "default", json_null());
        json_object_set_new(doc, "gaps", gaps);
        json_object_set_new(doc, "detach_pending", pending_json(t));
        status = print_json(doc, err);
        free(est);
        return status;
    }

    {
        int width = 9;
        int timew = 24; /* the from and to columns: as wide as the widest bound */
        char a[48], b[48], rows[32];

        for (size_t i = 0; i < t->npartitions; i++)
        {
            int len = text_width(t->partitions[i].name) + (t->partitions[i].is_default ? 10 : 0);
            if (len > width)
                width = len;
        }
        for (size_t i = 0; i < t->npending; i++)
            if (text_width(t->pending[i].name) + 17 > width)
                width = text_width(t->pending[i].name) + 17;
        for (size_t i = 0; i < nregular; i++)
        {
            fit_time(t->partitions[i].lower_us, &timew);
            fit_time(t->partitions[i].upper_us, &timew);
        }
        for (size_t i = 0; i < t->npending; i++)
        {
            fit_time(t->pending[i].lower_us, &timew);
            fit_time(t->pending[i].upper_us, &timew);
        }
        printf("table        %s.%s\n", t->schema, t->name);
        printf("key          %s %s (%s)", t->key_column, t->key_type, t->partkeydef);
        if (t->key_kind == KEY_UUID7)
            printf(", UUIDv7 bounds, %s convention",
                   t->bound_style == BOUND_STYLE_BARE ? "bare (pg_partman)" : "minimum v7");
        else if (t->key_kind == KEY_BIGINT_MS)
            printf(", epoch milliseconds");
        printf("\n");
        printf("granularity  %s%s%s%s\n", granularity_name(g),
               o->ensure.granularity == GRAN_AUTO ? " (inferred)" : "",
               o->ensure.window_tz ? ", windows in " : ", windows in UTC",
               o->ensure.window_tz ? o->ensure.window_tz : "");
        printf("owner        %s\n", t->owner);
        printf("tablespace   %s\n", t->tablespace ? t->tablespace : "(database default)");
        printf("\n%-*s  %-*s  %-*s  %11s  %s\n", width, "partition", timew, "from", timew, "to",
               "rows (est.)", "window");
        for (size_t i = 0; i < nregular; i++)
        {
            const Partition *p = &t->partitions[i];
            const char *win = regular_window(p, zone);

            fmt_time(p->lower_us, a, sizeof a);
            fmt_time(p->upper_us, b, sizeof b);
            rows_text(rows_of(p, est, nest), rows, sizeof rows);
            text_pad(stdout, p->name, width, -1); /* by columns: names may be multibyte */
            printf("  %-*s  %-*s  %11s  %s\n", timew, a, timew, b, rows, win ? win : "irregular");
            if (i + 1 < nregular && p->upper_us < t->partitions[i + 1].lower_us)
            {
                fmt_time(p->upper_us, a, sizeof a);
                fmt_time(t->partitions[i + 1].lower_us, b, sizeof b);
                printf("%-*s  %-*s  %-*s  %11s  %s\n", width, "(gap)", timew, a, timew, b, "", "");
                ngaps++;
            }
        }
        if (def)
        {
            char label[128];
            (void) snprintf(label, sizeof label, "%s (DEFAULT)", def->name);
            rows_text(rows_of(def, est, nest), rows, sizeof rows);
            text_pad(stdout, label, width, -1);
            printf("  %-*s  %-*s  %11s\n", timew, "", timew, "", rows);
        }
        for (size_t i = 0; i < t->npending; i++)
        {
            const Partition *p = &t->pending[i];
            char label[128];

            (void) snprintf(label, sizeof label, "%s (detach pending)", p->name);
            fmt_time(p->lower_us, a, sizeof a);
            fmt_time(p->upper_us, b, sizeof b);
            text_pad(stdout, label, width, -1);
            printf("  %-*s  %-*s  %11s  %s\n", timew, a, timew, b, "-",
                   "not a window: finalize its detach");
        }
        printf("partitions=%zu default=%d gaps=%d", nregular, def ? 1 : 0, ngaps);
        if (t->npending > 0)
            printf(" detach_pending=%zu", t->npending);
        printf("\n");
    }
    free(est);
    return 0;
}

/* -------------------------------------------------------------- ensure */

typedef struct RunOutput
{
    bool json;
    bool dry_run;
    json_t *windows; /* --json */
} RunOutput;

static const char *
action_name(WindowAction a)
{
    switch (a)
    {
        case WINDOW_SKIPPED:
            return "skipped";
        case WINDOW_CREATED:
            return "created";
        case WINDOW_GAPS_FILLED:
            return "gaps_filled";
        case WINDOW_ISSUE:
            return "issue";
    }
    return "?";
}

static void
on_window(void *arg, const WindowReport *r)
{
    RunOutput *out = arg;
    char a[48], b[48];

    if (out->json)
    {
        json_t *jw = json_object();
        json_t *pieces = json_array();

        json_object_set_new(jw, "window", json_string(r->name));
        json_object_set_new(jw, "from", json_time(r->window.lower_us));
        json_object_set_new(jw, "to", json_time(r->window.upper_us));
        json_object_set_new(jw, "action", json_string(action_name(r->action)));
        for (size_t i = 0; i < r->npieces; i++)
        {
            json_t *jp = json_object();
            json_object_set_new(jp, "name", json_string(r->pieces[i].name));
            json_object_set_new(jp, "from", json_time(r->pieces[i].lower_us));
            json_object_set_new(jp, "to", json_time(r->pieces[i].upper_us));
            json_object_set_new(jp, "lower_bound", json_string(r->pieces[i].lower_text));
            json_object_set_new(jp, "upper_bound", json_string(r->pieces[i].upper_text));
            json_array_append_new(pieces, jp);
        }
        json_object_set_new(jw, "partitions", pieces);
        json_object_set_new(jw, "default_rows", json_integer((json_int_t) r->default_rows));
        if (r->held_by)
            json_object_set_new(jw, "detach_pending", json_string(r->held_by));
        json_array_append_new(out->windows, jw);
        return;
    }
    if (out->dry_run)
        return; /* the SQL, with a comment per window, is the output */
    fmt_time(r->window.lower_us, a, sizeof a);
    fmt_time(r->window.upper_us, b, sizeof b);
    switch (r->action)
    {
        case WINDOW_SKIPPED:
            printf("skipped      %s  [%s, %s)  already covered\n", r->name, a, b);
            break;
        case WINDOW_CREATED:
            printf("created      %s  [%s, %s)%s\n", r->name, a, b,
                   r->default_rows > 0 ? "  rows moved from DEFAULT" : "");
            break;
        case WINDOW_GAPS_FILLED:
            printf("gaps filled  %s  [%s, %s)\n", r->name, a, b);
            for (size_t i = 0; i < r->npieces; i++)
            {
                fmt_time(r->pieces[i].lower_us, a, sizeof a);
                fmt_time(r->pieces[i].upper_us, b, sizeof b);
                printf("  created    %s  [%s, %s)\n", r->pieces[i].name, a, b);
            }
            break;
        case WINDOW_ISSUE:
            if (r->held_by)
                printf("issue        %s  [%s, %s)  held by %s, detach pending\n", r->name, a, b,
                       r->held_by);
            else
                printf("issue        %s  [%s, %s)  %" PRId64 " row%s in the DEFAULT partition\n",
                       r->name, a, b, r->default_rows, r->default_rows == 1 ? "" : "s");
            break;
    }
}

static int64_t
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* [from, to) for --ahead N: now's window and the next N. */
static bool
ahead_range(const TargetTable *t, const PartOpts *o, int64_t *from, int64_t *to, Err *err)
{
    Granularity g;
    TimeParser *zone = NULL;
    int64_t us = now_us();
    bool ok = true;

    if (!partitions_effective_granularity(t, &o->ensure, &g, err))
        return false;
    if (o->ensure.window_tz && !time_parser_new_window(o->ensure.window_tz, &zone, err))
        return false;
    *from = us;
    for (long i = 0; i <= o->ahead && ok; i++)
    {
        Window w;
        ok = window_at(g, zone, us, &w, err);
        us = w.upper_us;
    }
    *to = us;
    time_parser_free(zone);
    return ok;
}

/* pg_partman's windows (its granularity, midnight of its zone) for --list,
 * --ahead and T1/T2 of a table it manages, unless --window-tz was given;
 * ensure itself checks them and refuses what it cannot follow.  pf holds the
 * zone's text. */
static void
partman_defaults(PgConn *c, const TargetTable *t, EnsureOptions *o, PartmanFollow *pf)
{
    Err ignored = {0};

    memset(pf, 0, sizeof *pf);
    if (o->window_tz || o->window_tz_given || !partman_follow_read(c, t, NULL, pf, &ignored) ||
        !pf->follows)
        return;
    o->window_tz = pf->zone[0] ? pf->zone : NULL;
    if (o->granularity == GRAN_AUTO)
        o->granularity = pf->g;
}

static int
run_ensure(PgConn *c, TargetTable *t, const PartOpts *po, Err *err)
{
    EnsureOptions o = po->ensure;
    PartOpts pc = *po;
    PartmanFollow pf;
    EnsureResult res = {0};
    RunOutput out = {po->json, o.dry_run, NULL};
    Buf ddl;
    int64_t from, to;
    Granularity g;
    int status = 0;
    bool ok;

    partman_defaults(c, t, &o, &pf);
    pc.ensure = o;
    if (po->from)
    {
        /* Without an offset T1/T2 are dates and times of the windows' zone:
         * --window-tz Europe/Berlin --from 2026-03-01 starts at Berlin's
         * midnight, not at UTC's (which is still February 28 there). */
        TimeParser *zone = NULL;
        bool parsed = o.window_tz ? time_parser_new_window(o.window_tz, &zone, err) &&
                                        time_parse(zone, po->from, strlen(po->from), &from, err) &&
                                        time_parse(zone, po->to, strlen(po->to), &to, err)
                                  : time_parse_iso(po->from, &from, err) &&
                                        time_parse_iso(po->to, &to, err);

        time_parser_free(zone);
        if (!parsed)
        {
            err_prefix(err, "--from/--to");
            return err_exit_status(err->code);
        }
        if (from >= to)
            return cli_usage_error(err, "partitions", "--from must be before --to");
    }
    else if (!ahead_range(t, &pc, &from, &to, err))
        return err_exit_status(err->code);
    if (!partitions_effective_granularity(t, &o, &g, err))
        return err_exit_status(err->code);

    buf_init(&ddl);
    o.ddl_out = &ddl;
    o.on_window = on_window;
    o.on_window_arg = &out;
    if (po->json)
        out.windows = json_array();
    ok = partitions_ensure_range(c, t, from, to, &o, &res, err);
    /* A refusal (a name too long or taken, another zone's windows, ...) is an
     * issue like DEFAULT rows: counted in the summary and shown in --json.
     * What was done before it stays done; say so. */
    if (!ok && err->code == EC_CONFIG)
    {
        res.issues++;
        res.issue = *err;
    }
    if (po->json)
    {
        json_t *doc = json_object();

        json_t *tab = json_object();

        json_object_set_new(tab, "schema", json_string(t->schema));
        json_object_set_new(tab, "name", json_string(t->name));
        json_object_set_new(doc, "table", tab);
        json_object_set_new(doc, "granularity", json_string(granularity_name(g)));
        json_object_set_new(doc, "window_tz", json_str_or_null(o.window_tz));
        json_object_set_new(doc, "dry_run", json_boolean(o.dry_run));
        json_object_set_new(doc, "from", json_time(from));
        json_object_set_new(doc, "to", json_time(to));
        json_object_set_new(doc, "windows", out.windows);
        json_object_set_new(doc, "ddl", json_string(ddl.data ? ddl.data : ""));
        json_object_set_new(doc, "created", json_integer(res.created));
        json_object_set_new(doc, "skipped", json_integer(res.skipped));
        json_object_set_new(doc, "gaps_filled", json_integer(res.gaps_filled));
        json_object_set_new(doc, "issues", json_integer(res.issues));
        json_object_set_new(doc, "partitions_created", json_integer(res.partitions_created));
        if (res.issues > 0 || !ok)
        {
            const Err *e = res.issues > 0 ? &res.issue : err;
            json_t *ji = json_object();
            json_object_set_new(ji, "message", json_string(e->msg));
            json_object_set_new(ji, "detail", json_string(e->detail));
            json_object_set_new(ji, "hint", json_string(e->hint));
            json_object_set_new(ji, "sqlstate", json_string(e->sqlstate));
            json_object_set_new(doc, res.issues > 0 ? "issue" : "error", ji);
        }
        if (!ok)
        {
            Err saved = *err;

            /* the error still goes to stderr and decides the exit status */
            (void) print_json(doc, err);
            *err = saved;
            buf_free(&ddl);
            return err_exit_status(err->code);
        }
        status = print_json(doc, err);
        if (status != 0)
        {
            buf_free(&ddl);
            return status;
        }
    }
    else if (o.dry_run)
    {
        if (ddl.len)
            fputs(ddl.data, stdout);
        printf("-- dry run, nothing was changed: created=%d skipped=%d gaps_filled=%d issues=%d\n",
               res.created, res.skipped, res.gaps_filled, res.issues);
    }
    else
        printf("created=%d skipped=%d gaps_filled=%d issues=%d\n", res.created, res.skipped,
               res.gaps_filled, res.issues);
    if (!ok)
    {
        buf_free(&ddl);
        return err_exit_status(err->code);
    }
    buf_free(&ddl);
    if (res.issues > 0)
    {
        *err = res.issue;
        return err_exit_status(err->code);
    }
    return 0;
}

int
cmd_partitions(int argc, char **argv, GlobalOpts *g, Err *err)
{
    /* --maintain is `v7fill maintain` with the same options. */
    for (int i = 1; i < argc; i++)
    {
        if (strcmp(argv[i], "--maintain") == 0)
        {
            memmove(&argv[i], &argv[i + 1], (size_t) (argc - i) * sizeof *argv);
            return cmd_maintain(argc - 1, argv, g, err);
        }
    }

    enum
    {
        OPT_FROM = 256,
        OPT_TO,
        OPT_AHEAD,
        OPT_TZ,
        OPT_PATTERN,
        OPT_JSON,
        OPT_MOVE,
        OPT_LOCK_TIMEOUT,
        OPT_LOCK_RETRIES,
    };
    static const struct option longopts[] = {
        {"list", no_argument, NULL, 'l'},
        {"from", required_argument, NULL, OPT_FROM},
        {"to", required_argument, NULL, OPT_TO},
        {"ahead", required_argument, NULL, OPT_AHEAD},
        {"granularity", required_argument, NULL, 'g'},
        {"window-tz", required_argument, NULL, OPT_TZ},
        {"name-pattern", required_argument, NULL, OPT_PATTERN},
        {"dry-run", no_argument, NULL, 'n'},
        {"json", no_argument, NULL, OPT_JSON},
        {"move-from-default", no_argument, NULL, OPT_MOVE},
        {"lock-timeout", required_argument, NULL, OPT_LOCK_TIMEOUT},
        {"lock-retries", required_argument, NULL, OPT_LOCK_RETRIES},
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    PartOpts po;
    PgConn *c = NULL;
    TargetTable *t = NULL;
    bool ahead_given = false;
    int status;
    int opt;
    long v;

    memset(&po, 0, sizeof po);
    ensure_options_default(&po.ensure);
    while ((opt = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "lg:nh", longopts, NULL)) != -1)
    {
        switch (opt)
        {
            case 'l':
                po.list = true;
                break;
            case OPT_FROM:
                po.from = optarg;
                break;
            case OPT_TO:
                po.to = optarg;
                break;
            case OPT_AHEAD:
                if (!cli_parse_long("partitions", "--ahead", optarg, 0, 10000, &po.ahead, err))
                    return 2;
                ahead_given = true;
                break;
            case 'g':
                if (!granularity_parse(optarg, &po.ensure.granularity, err))
                {
                    err_hint(err, "Use day, week, month, quarter, year or auto; try \"v7fill "
                                  "partitions --help\".");
                    return 2;
                }
                break;
            case OPT_TZ:
                po.ensure.window_tz = optarg;
                break;
            case OPT_PATTERN:
                po.ensure.name_pattern = optarg;
                break;
            case 'n':
                po.ensure.dry_run = true;
                break;
            case OPT_JSON:
                po.json = true;
                break;
            case OPT_MOVE:
                po.ensure.move_from_default = true;
                break;
            case OPT_LOCK_TIMEOUT:
                if (!cli_parse_long("partitions", "--lock-timeout", optarg, 1, 3600000, &v, err))
                    return 2;
                po.ensure.lock_timeout_ms = (int) v;
                break;
            case OPT_LOCK_RETRIES:
                if (!cli_parse_long("partitions", "--lock-retries", optarg, 0, 1000, &v, err))
                    return 2;
                po.ensure.lock_retries = (int) v;
                break;
            CLI_GLOBAL_CASES(opt, g, return 0);
            case 'h':
                partitions_usage(stdout);
                return 0;
            default:
                return cli_usage_error(err, "partitions", "unknown or incomplete option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(err, "partitions", "\"partitions\" takes exactly one TABLE");
    po.table = argv[optind];
    if ((po.list ? 1 : 0) + (po.from || po.to ? 1 : 0) + (ahead_given ? 1 : 0) != 1)
        return cli_usage_error(err, "partitions",
                               "give exactly one of --list, --from/--to or --ahead");
    if ((po.from == NULL) != (po.to == NULL))
        return cli_usage_error(err, "partitions", "--from and --to go together");
    if (po.list && (po.ensure.dry_run || po.ensure.move_from_default))
        return cli_usage_error(err, "partitions", "--list changes nothing; --dry-run and "
                                                  "--move-from-default apply to --from/--ahead");
    if (!window_tz_check(po.ensure.window_tz, err))
        return 2;
    po.ensure.window_tz_given = po.ensure.window_tz != NULL;
    if (po.ensure.window_tz && strcmp(po.ensure.window_tz, "UTC") == 0)
        po.ensure.window_tz = NULL;
    if (po.ensure.name_pattern && po.ensure.granularity != GRAN_AUTO &&
        !window_pattern_check(po.ensure.granularity, po.ensure.name_pattern, err))
        return 2;

    if (!pg_connect(g->conninfo, &c, err))
        return err_exit_status(err->code);
    if (!catalog_load_target(c, po.table, &t, err))
    {
        pg_close(c);
        return err_exit_status(err->code);
    }
    if (po.list)
    {
        TimeParser *zone = NULL;
        PartmanFollow pf;
        Granularity gran;

        partman_defaults(c, t, &po.ensure, &pf);
        if (!partitions_effective_granularity(t, &po.ensure, &gran, err) ||
            (po.ensure.window_tz && !time_parser_new_window(po.ensure.window_tz, &zone, err)))
            status = err_exit_status(err->code);
        else
            status = list_partitions(c, t, &po, zone, gran, err);
        time_parser_free(zone);
    }
    else
        status = run_ensure(c, t, &po, err);
    catalog_target_free(t);
    pg_close(c);
    return status;
}
