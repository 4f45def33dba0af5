/*
 * Maintenance: windows ahead (through partitions_ensure_range) and
 * retirement of windows past the retention cutoff, guarded by the quiet
 * period recorded in v7fill.window_activity.
 *
 * The guard has two halves.  Before a detach, a window with an insert
 * recorded within the quiet period is refused.  An import batch may still
 * start writing into the window between that check and the detach; the
 * detach then waits for the batch's transaction (DETACH CONCURRENTLY waits
 * for every transaction using the parent, plain DETACH for its lock), and
 * the batch records its activity in that same transaction.  So the record is
 * read again after the detach: if it moved, the detached table holds rows
 * that just arrived and is kept, not dropped.
 */
#include "v7fill/maintain.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/civil.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/run_history.h"
#include "v7fill/state.h"
#include "v7fill/timeparse.h"

static const char *const create_sql =
    "CREATE TABLE IF NOT EXISTS v7fill.window_activity ("
    "  target_schema text NOT NULL, target_table text NOT NULL,"
    "  partition_name text NOT NULL, last_insert_at timestamptz NOT NULL,"
    "  PRIMARY KEY (target_schema, target_table, partition_name))";

/* A partition past the cutoff, copied out of the catalog list (which is
 * refreshed while we work). */
typedef struct Candidate
{
    char *schema;
    char *name;
    unsigned int oid;
    int64_t lower_us;
    int64_t upper_us;
    bool pending;     /* detach pending: only the FINALIZE is left */
} Candidate;

/* What the retirement of one window reads about its activity. */
typedef struct Activity
{
    bool found;
    bool recent;      /* within the quiet period */
    int64_t last_us;  /* last_insert_at */
    int64_t age_us;   /* now() − last_insert_at */
    char last[48];    /* last_insert_at as text */
} Activity;

void
maintain_options_default(MaintainOptions *o)
{
    memset(o, 0, sizeof *o);
    o->ahead = MAINTAIN_DEFAULT_AHEAD;
    o->quiet_period_us = MAINTAIN_DEFAULT_QUIET;
    o->granularity = GRAN_AUTO;
    o->lock_timeout_ms = 5000;
    o->fold_history = true;
}

void
maintain_result_format(const MaintainResult *r, char *out, size_t size)
{
    (void) snprintf(out, size, "created=%d detached=%d dropped=%d issues=%d", r->created,
                    r->detached, r->dropped, r->issues);
}

bool
maintain_setup(PgConn *c, Err *err)
{
    return state_setup(c, err) &&
           state_create_once(c, "SELECT to_regclass('v7fill.window_activity') IS NOT NULL", create_sql,
                             "v7fill.window_activity", err);
}

/* A text[] literal: every element double-quoted, " and \ escaped, so any
 * name survives; it travels as a parameter. */
static void
text_array(Buf *b, const char *const *items, size_t n)
{
    buf_putc(b, '{');
    for (size_t i = 0; i < n; i++)
    {
        if (i)
            buf_putc(b, ',');
        buf_putc(b, '"');
        for (const char *s = items[i]; *s; s++)
        {
            if (*s == '"' || *s == '\\')
                buf_putc(b, '\\');
            buf_putc(b, *s);
        }
        buf_putc(b, '"');
    }
    buf_putc(b, '}');
}

bool
maintain_note_activity(PgConn *c, const char *schema, const char *table,
                       const char *const *partitions, size_t n, Err *err)
{
    const char *params[3];
    Buf arr;
    bool ok;

    if (n == 0)
        return true;
    buf_init(&arr);
    text_array(&arr, partitions, n);
    params[0] = schema;
    params[1] = table;
    params[2] = arr.data;
    /* Every batch writes its time: a record skipped now would make the quiet
     * period look older than it is.  The NOT EXISTS only skips a window a
     * concurrent batch already stamped later; DISTINCT because ON CONFLICT
     * may touch a row once per statement; ORDER BY so that concurrent
     * batches lock rows in one order. */
    ok = pg_exec_params(
        c,
        "INSERT INTO v7fill.window_activity AS a "
        "(target_schema, target_table, partition_name, last_insert_at) "
        "SELECT DISTINCT $1::text, $2::text, u.p, statement_timestamp() "
        "  FROM unnest($3::text[]) AS u(p) "
        " WHERE NOT EXISTS (SELECT 1 FROM v7fill.window_activity w "
        "                    WHERE w.target_schema = $1 AND w.target_table = $2 "
        "                      AND w.partition_name = u.p "
        "                      AND w.last_insert_at >= statement_timestamp()) "
        " ORDER BY u.p "
        "ON CONFLICT (target_schema, target_table, partition_name) DO UPDATE "
        "SET last_insert_at = GREATEST(a.last_insert_at, EXCLUDED.last_insert_at)",
        3, params, err);
    buf_free(&arr);
    if (!ok)
        err_prefix(err, "could not record the windows written to in v7fill.window_activity");
    return ok;
}

/* ---------------------------------------------------------------- events */

typedef struct Ctx
{
    PgConn *conn;
    TargetTable *t;
    const MaintainOptions *o;
    MaintainResult *r;
    int64_t now_us;
    int64_t cutoff_us;
    bool have_activity; /* v7fill.window_activity exists */
    bool concurrently;
    IncomingFk *fks;    /* foreign keys of other tables referencing the parent */
    size_t nfks;
    char qparent[600];
    char retention[48];
    char quiet[48];
    /* The detach-pending partition the windows ahead stopped at (reported
     * then, so not again by report_pending); "" when none. */
    char held_by[128];
    Window held_window;
} Ctx;

static void
fmt_bound(int64_t us, char *out, size_t size)
{
    if (!civil_format_day_bound(us, out, size))
        civil_format_rfc3339(us, us % 1000 != 0, out, size);
}

/* "events__2026_05 [2026-05-01, 2026-06-01)" */
static void
label(const char *name, int64_t lower, int64_t upper, char *out, size_t size)
{
    char a[48];
    char b[48];

    fmt_bound(lower, a, sizeof a);
    fmt_bound(upper, b, sizeof b);
    (void) snprintf(out, size, "%s [%s, %s)", name, a, b);
}

static void emit(const Ctx *x, MaintainAction action, const char *schema, const char *name,
                 int64_t lower, int64_t upper, const char *fmt, ...) V7FILL_PRINTF(7, 8);

static void
emit(const Ctx *x, MaintainAction action, const char *schema, const char *name, int64_t lower,
     int64_t upper, const char *fmt, ...)
{
    MaintainEvent ev;
    char msg[2048];
    va_list ap;

    if (x->o->on_event == NULL)
        return;
    va_start(ap, fmt);
    (void) vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memset(&ev, 0, sizeof ev);
    ev.action = action;
    ev.dry_run = x->o->dry_run;
    ev.schema = schema;
    ev.partition = name;
    ev.lower_us = lower;
    ev.upper_us = upper;
    ev.message = msg;
    x->o->on_event(x->o->on_event_arg, &ev);
}

/* Count an issue; the first one is kept whole in r->issue. */
static void
issue(Ctx *x, const Err *e)
{
    if (x->r->issues++ == 0)
        x->r->issue = *e;
}

/* ----------------------------------------------------------------- ahead */

static void
on_window(void *arg, const WindowReport *w)
{
    Ctx *x = arg;

    if (w->action == WINDOW_ISSUE && w->held_by != NULL)
    {
        (void) snprintf(x->held_by, sizeof x->held_by, "%s", w->held_by);
        x->held_window = w->window;
    }
    if (w->action != WINDOW_CREATED && w->action != WINDOW_GAPS_FILLED)
        return;
    for (size_t i = 0; i < w->npieces; i++)
    {
        char l[200];

        label(w->pieces[i].name, w->pieces[i].lower_us, w->pieces[i].upper_us, l, sizeof l);
        emit(x, MAINTAIN_CREATED, x->t->schema, w->pieces[i].name, w->pieces[i].lower_us,
             w->pieces[i].upper_us, "%s %s", w->dry_run ? "would create" : "created", l);
    }
}

/* Now's window (the window of `now`) and the next o->ahead. */
static bool
ensure_ahead(Ctx *x, int64_t now, Err *err)
{
    const MaintainOptions *o = x->o;
    EnsureOptions eo;
    EnsureResult er;
    Granularity g;
    TimeParser *zone = NULL;
    int64_t to = now;
    bool ok = true;

    ensure_options_default(&eo);
    eo.granularity = o->granularity;
    eo.dry_run = o->dry_run;
    eo.window_tz = o->window_tz;
    eo.name_pattern = o->name_pattern;
    eo.lock_timeout_ms = o->lock_timeout_ms;
    eo.on_window = on_window;
    eo.on_window_arg = x;
    if (!partitions_effective_granularity(x->t, &eo, &g, err))
        return false;
    if (o->window_tz && !time_parser_new_window(o->window_tz, &zone, err))
        return false;
    /* Now's window and the next `ahead`, as `partitions --ahead` counts. */
    for (int i = 0; i <= o->ahead && ok; i++)
    {
        Window w;

        ok = window_at(g, zone, to, &w, err);
        to = w.upper_us;
    }
    time_parser_free(zone);
    if (!ok)
        return false;
    memset(&er, 0, sizeof er);
    if (!partitions_ensure_range(x->conn, x->t, now, to, &eo, &er, err))
    {
        x->r->created += er.partitions_created;
        err_prefix(err, "could not create the windows ahead");
        return false;
    }
    x->r->created += er.partitions_created;
    if (er.issues > 0)
    {
        emit(x, MAINTAIN_ISSUE, x->t->schema, "", 0, 0, "%s", er.issue.msg);
        x->r->issues += er.issues - 1;
        issue(x, &er.issue);
    }
    return true;
}

/* ---------------------------------------------------------------- retire */

static bool
read_activity(Ctx *x, const char *name, Activity *a, Err *err)
{
    char window[48];
    const char *params[4];
    PGresult *res;

    memset(a, 0, sizeof *a);
    if (!x->have_activity)
        return true;
    (void) snprintf(window, sizeof window, "%" PRId64 " microseconds", x->o->quiet_period_us);
    params[0] = x->t->schema;
    params[1] = x->t->name;
    params[2] = name;
    params[3] = window;
    /* The server's clock on both sides: the quiet period is about real
     * inserts happening now, also when maintenance pretends another now. */
    if (!pg_query(x->conn,
                  "SELECT last_insert_at::text, "
                  "       (extract(epoch FROM last_insert_at) * 1000000)::int8, "
                  "       last_insert_at > now() - $4::interval, "
                  "       (extract(epoch FROM now() - last_insert_at) * 1000000)::int8 "
                  "  FROM v7fill.window_activity "
                  " WHERE target_schema = $1 AND target_table = $2 AND partition_name = $3",
                  4, params, &res, err))
    {
        err_prefix(err, "could not read v7fill.window_activity");
        return false;
    }
    if (PQntuples(res) == 1)
    {
        a->found = true;
        (void) snprintf(a->last, sizeof a->last, "%s", PQgetvalue(res, 0, 0));
        a->last_us = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
        a->recent = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
        a->age_us = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
    }
    PQclear(res);
    return true;
}

static void
refuse(Ctx *x, const Candidate *cd, const Activity *a)
{
    char l[200];
    char age[48];
    Err e;

    label(cd->name, cd->lower_us, cd->upper_us, l, sizeof l);
    duration_format(a->age_us > 0 ? a->age_us : 0, age, sizeof age);
    emit(x, MAINTAIN_REFUSED, cd->schema, cd->name, cd->lower_us, cd->upper_us,
         "refused to retire %s: it received rows %s ago (%s), within the quiet period of %s: a "
         "late row is arriving there right now",
         l, age, a->last, x->quiet);
    memset(&e, 0, sizeof e);
    err_set(&e, EC_CONFIG, "refused to retire window %s of %s.%s: it received rows %s ago, "
                           "within the quiet period of %s",
            l, x->t->schema, x->t->name, age, x->quiet);
    err_detail(&e, "The window is past the retention cutoff (its upper bound is older than now "
                   "minus %s), but v7fill.window_activity records an insert at %s: a late row "
                   "is arriving there right now.",
               x->retention, a->last);
    err_hint(&e, "Find out why rows still arrive for that window (retention must exceed the "
                 "longest delivery delay: see \"v7fill report\").  Maintenance retires it once "
                 "it has been quiet for --quiet-period.");
    issue(x, &e);
}

static bool attach_state(Ctx *x, const Candidate *cd, int *state, Err *err);

/* The incoming foreign keys whose rows reference rows of cd's partition
 * ("public.r (foreign key r_pid_fkey), ..."; empty: none): DETACH PARTITION
 * refuses (23503) while they exist.  A key whose rows cannot be read is
 * named as well, saying so. */
static void
referencing_fks(Ctx *x, const Candidate *cd, char *out, size_t size)
{
    size_t len = 0;

    out[0] = '\0';
    for (size_t i = 0; i < x->nfks && len < size; i++)
    {
        const IncomingFk *f = &x->fks[i];
        char *qref = pg_qualified(x->conn, f->schema, f->table);
        char *qchild = pg_qualified(x->conn, cd->schema, cd->name);
        Buf sql;
        PGresult *res;
        Err e = {0};
        const char *why = NULL;
        int w;

        buf_init(&sql);
        buf_printf(&sql, "SELECT EXISTS (SELECT 1 FROM %s r WHERE (", qref);
        for (size_t k = 0; k < f->ncols; k++)
        {
            char *col = pg_ident(x->conn, f->cols[k]);

            buf_printf(&sql, "%sr.%s", k ? ", " : "", col);
            free(col);
        }
        buf_puts(&sql, ") IN (SELECT ");
        for (size_t k = 0; k < f->ncols; k++)
        {
            char *col = pg_ident(x->conn, f->refcols[k]);

            buf_printf(&sql, "%sp.%s", k ? ", " : "", col);
            free(col);
        }
        buf_printf(&sql, " FROM %s p))", qchild);
        if (!pg_query(x->conn, sql.data, 0, NULL, &res, &e))
            why = "its rows could not be checked";
        else
        {
            if (strcmp(PQgetvalue(res, 0, 0), "t") != 0)
                why = "";
            PQclear(res);
        }
        buf_free(&sql);
        free(qref);
        free(qchild);
        if (why != NULL && why[0] == '\0')
            continue;
        w = snprintf(out + len, size - len, "%s%s.%s (foreign key %s%s%s)", len ? ", " : "",
                     f->schema, f->table, f->name, why ? ": " : "", why ? why : "");
        if (w < 0)
            break;
        len += (size_t) w;
    }
}

/* The hint of a failed DETACH: what state it left the partition in, and
 * what to do. */
static void
detach_hint(Ctx *x, const Candidate *cd, Err *e)
{
    char fks[1024];
    int state = 1;
    Err ignored = {0};
    bool timeout = strcmp(e->sqlstate, "55P03") == 0;

    if (!attach_state(x, cd, &state, &ignored))
        state = -1;
    if (state == 2)
        err_hint(e, "%s%s.%s is now \"detach pending\": the DETACH ... CONCURRENTLY stopped "
                    "half-way; queries no longer see its rows and rows for its window have no "
                    "partition.  The next maintenance run finalizes it (ALTER TABLE %s DETACH "
                    "PARTITION ... FINALIZE).",
                 timeout ? "Another session held a conflicting lock for longer than "
                           "--lock-timeout.  "
                         : "",
                 cd->schema, cd->name, x->qparent);
    else if (strcmp(e->sqlstate, "23503") == 0)
    {
        referencing_fks(x, cd, fks, sizeof fks);
        if (!fks[0])
            catalog_incoming_fks_describe(x->fks, x->nfks, fks, sizeof fks);
        err_hint(e, "Rows of %s reference rows of the window, and DETACH PARTITION refuses "
                    "while they exist.  %s.%s is still attached.  Delete those rows (or drop "
                    "the foreign key) before the window can retire.",
                 fks[0] ? fks : "another table", cd->schema, cd->name);
    }
    else if (timeout)
        err_hint(e, "Another session held a conflicting lock for longer than --lock-timeout; "
                    "%s.%s is still attached.  Run maintenance again later.",
                 cd->schema, cd->name);
}

/* A statement the server refused for one window: an issue, not the end of
 * the run.  A lost connection is the end. */
static bool
window_failed(Ctx *x, const Candidate *cd, const char *what, Err *err)
{
    char l[200];
    Err e;

    if (err->code == EC_PG_CONNECT)
        return false;
    label(cd->name, cd->lower_us, cd->upper_us, l, sizeof l);
    e = *err;
    err_clear(err);
    emit(x, MAINTAIN_ISSUE, cd->schema, cd->name, cd->lower_us, cd->upper_us,
         "could not %s %s: %s%s%s%s", what, l, e.msg, e.sqlstate[0] ? " (SQLSTATE " : "",
         e.sqlstate, e.sqlstate[0] ? ")" : "");
    err_prefix(&e, "could not %s %s of %s.%s", what, l, x->t->schema, x->t->name);
    if (!e.hint[0] && strcmp(what, "detach") == 0)
        detach_hint(x, cd, &e);
    else if (strcmp(e.sqlstate, "55P03") == 0 && !e.hint[0])
        err_hint(&e, "Another session held a conflicting lock for longer than --lock-timeout; "
                     "run maintenance again later.");
    e.code = EC_CONFIG;
    issue(x, &e);
    return true;
}

/* Attached: 1, pending detach: 2, no longer a partition: 0. */
static bool
attach_state(Ctx *x, const Candidate *cd, int *state, Err *err)
{
    char child[16];
    char parent[16];
    const char *params[2] = {child, parent};
    PGresult *res;

    (void) snprintf(child, sizeof child, "%u", cd->oid);
    (void) snprintf(parent, sizeof parent, "%u", x->t->oid);
    if (!pg_query(x->conn,
                  PQserverVersion(pg_raw(x->conn)) >= 140000
                      ? "SELECT inhdetachpending FROM pg_catalog.pg_inherits "
                        "WHERE inhrelid = $1::oid AND inhparent = $2::oid"
                      : "SELECT false FROM pg_catalog.pg_inherits "
                        "WHERE inhrelid = $1::oid AND inhparent = $2::oid",
                  2, params, &res, err))
        return false;
    *state = PQntuples(res) == 0 ? 0 : strcmp(PQgetvalue(res, 0, 0), "t") == 0 ? 2 : 1;
    PQclear(res);
    return true;
}

/* One v7fill process changes a parent's partitions at a time; the same key
 * partitions_ensure_* takes.  Session-level, because DETACH CONCURRENTLY runs
 * outside a transaction. */
static bool
lock_parent(Ctx *x, Err *err)
{
    char sql[96];

    (void) snprintf(sql, sizeof sql, "SELECT pg_catalog.pg_advisory_lock(%" PRId64 ")",
                    partitions_lock_key(x->t->oid));
    return pg_exec(x->conn, sql, err);
}

/* Every lock a run waits for is bounded by --lock-timeout (reset: the
 * session's own again). */
static bool
bound_lock_waits(Ctx *x, Err *err)
{
    char sql[64];

    (void) snprintf(sql, sizeof sql, "SET lock_timeout = '%dms'", x->o->lock_timeout_ms);
    return pg_exec(x->conn, sql, err);
}

static void
unbound_lock_waits(Ctx *x)
{
    Err ignored;

    if (!pg_exec(x->conn, "RESET lock_timeout", &ignored))
        (void) 0;
}

static void
unlock_parent(Ctx *x)
{
    char sql[96];
    Err ignored;

    (void) snprintf(sql, sizeof sql, "SELECT pg_catalog.pg_advisory_unlock(%" PRId64 ")",
                    partitions_lock_key(x->t->oid));
    if (!pg_exec(x->conn, sql, &ignored))
        (void) 0;
}

/* A window being retired carries a comment saying so from before its
 * detach until its drop, with what the drop's check needs (the parent, the
 * window, the last insert recorded before the detach): a run killed between
 * the two (DETACH CONCURRENTLY commits on its own) or whose DROP failed
 * leaves a table that is no partition any more, which the next run finds by
 * that comment and drops (finish_retiring).  The marker ends with the
 * table's earlier comment, if it had one (RETIRING_BEFORE), which is put back
 * when the window is not dropped after all, also by a later run that clears
 * the marker of a stopped one. */
#define RETIRING "v7fill maintain: retiring from parent "
#define RETIRING_BEFORE "; comment before: "

/* The comment a marker says the table had before (NULL: none). */
static const char *
marker_before(const char *marker)
{
    const char *p = strstr(marker, RETIRING_BEFORE);

    return p ? p + strlen(RETIRING_BEFORE) : NULL;
}

static bool
comment_on(Ctx *x, const char *qchild, const char *text, Err *err)
{
    char *lit = text ? pg_literal(x->conn, text) : NULL;
    char *sql = xasprintf("COMMENT ON TABLE %s IS %s", qchild, lit ? lit : "NULL");
    bool ok = pg_exec(x->conn, sql, err);

    free(sql);
    free(lit);
    return ok;
}

/* *orig: the comment before (NULL: none; an earlier run's marker gives the
 * one it kept). */
static bool
mark_retiring(Ctx *x, const Candidate *cd, const char *qchild, const Activity *before,
              char **orig, Err *err)
{
    char oid[16], last[32];
    const char *params[1] = {oid};
    PGresult *res;
    char *text;
    bool ok;

    *orig = NULL;
    (void) snprintf(oid, sizeof oid, "%u", cd->oid);
    if (!pg_query(x->conn, "SELECT pg_catalog.obj_description($1::oid, 'pg_class')", 1, params,
                  &res, err))
        return false;
    if (!PQgetisnull(res, 0, 0))
    {
        const char *now = PQgetvalue(res, 0, 0);

        if (strncmp(now, RETIRING, strlen(RETIRING)) != 0)
            *orig = xstrdup(now);
        else if (marker_before(now))
            *orig = xstrdup(marker_before(now));
    }
    PQclear(res);
    if (before->found)
        (void) snprintf(last, sizeof last, "%" PRId64, before->last_us);
    else
        (void) snprintf(last, sizeof last, "none");
    text = xasprintf(RETIRING "%u; window %" PRId64 " %" PRId64 "; last insert before the detach: "
                              "%s%s%s",
                     x->t->oid, cd->lower_us, cd->upper_us, last, *orig ? RETIRING_BEFORE : "",
                     *orig ? *orig : "");
    ok = comment_on(x, qchild, text, err);
    free(text);
    if (!ok)
    {
        free(*orig);
        *orig = NULL;
    }
    return ok;
}

/* Detach (or finalize a pending detach of) one partition.  *done: it is no
 * longer a partition of the parent because of us. */
static bool
detach(Ctx *x, const Candidate *cd, const char *qchild, const Activity *before, bool *done,
       bool *marked, char **orig, Err *err)
{
    char l[200];
    char *sql;
    int state;
    bool ok;

    *done = false;
    *marked = false;
    label(cd->name, cd->lower_us, cd->upper_us, l, sizeof l);
    if (!attach_state(x, cd, &state, err))
        return window_failed(x, cd, "detach", err);
    if (state == 0)
    {
        emit(x, MAINTAIN_NOTE, cd->schema, cd->name, cd->lower_us, cd->upper_us,
             "%s is no longer a partition of %s.%s (detached by another session); left alone",
             l, x->t->schema, x->t->name);
        return true;
    }
    /* Still ours to retire (attached or pending): marked, to be dropped. */
    if (!x->o->detach_only)
    {
        if (!mark_retiring(x, cd, qchild, before, orig, err))
            return window_failed(x, cd, "mark for retirement", err);
        *marked = true;
    }
    if (state == 2)
    {
        /* An earlier DETACH ... CONCURRENTLY stopped half-way. */
        sql = xasprintf("ALTER TABLE %s DETACH PARTITION %s FINALIZE", x->qparent, qchild);
        ok = pg_exec(x->conn, sql, err);
        free(sql);
        if (!ok)
            return window_failed(x, cd, "finalize the pending detach of", err);
        *done = true;
        x->r->detached++;
        emit(x, MAINTAIN_DETACHED, cd->schema, cd->name, cd->lower_us, cd->upper_us,
             "detached %s (finalized a DETACH CONCURRENTLY that had stopped half-way)", l);
        return true;
    }
    sql = xasprintf("ALTER TABLE %s DETACH PARTITION %s%s", x->qparent, qchild,
                    x->concurrently ? " CONCURRENTLY" : "");
    ok = pg_exec(x->conn, sql, err);
    free(sql);
    if (!ok)
        return window_failed(x, cd, "detach", err);
    *done = true;
    x->r->detached++;
    emit(x, MAINTAIN_DETACHED, cd->schema, cd->name, cd->lower_us, cd->upper_us, "detached %s%s",
         l, x->concurrently ? " (CONCURRENTLY)" : "");
    return true;
}

/* Detached, but rows arrived during the detach: the table is kept. */
static void
arrived(Ctx *x, const Candidate *cd, const Activity *after)
{
    char l[200];
    Err e;

    label(cd->name, cd->lower_us, cd->upper_us, l, sizeof l);
    emit(x, MAINTAIN_ISSUE, cd->schema, cd->name, cd->lower_us, cd->upper_us,
         "detached %s but did not drop it: rows arrived during the detach (at %s); the table "
         "is kept as %s.%s",
         l, after->last, cd->schema, cd->name);
    memset(&e, 0, sizeof e);
    err_set(&e, EC_CONFIG, "detached window %s of %s.%s but kept the table: rows arrived in it "
                           "during the detach",
            l, x->t->schema, x->t->name);
    err_detail(&e, "v7fill.window_activity records an insert at %s, after the quiet period "
                   "check.  The rows are in %s.%s, which is no longer a partition.",
               after->last, cd->schema, cd->name);
    err_hint(&e, "Look at the rows, then re-attach the table or drop it yourself.");
    issue(x, &e);
}

/* The detached table of a window dropped, and its activity row with it. */
static bool
drop_window(Ctx *x, const Candidate *cd, const char *qchild, const char *why, Err *err)
{
    char *sql = xasprintf("DROP TABLE %s", qchild);
    const char *params[3] = {x->t->schema, x->t->name, cd->name};
    bool ok = true;

    if (!pg_exec(x->conn, sql, err))
        ok = window_failed(x, cd, "drop the detached table of", err);
    else
    {
        x->r->dropped++;
        emit(x, MAINTAIN_DROPPED, cd->schema, cd->name, cd->lower_us, cd->upper_us,
             "dropped %s.%s%s", cd->schema, cd->name, why);
        if (x->have_activity &&
            !pg_exec_params(x->conn,
                            "DELETE FROM v7fill.window_activity WHERE target_schema = $1 AND "
                            "target_table = $2 AND partition_name = $3",
                            3, params, err))
            ok = false;
    }
    free(sql);
    return ok;
}

/* The parent's tables carrying its retirement marker: no partition any more
 * (stray: 0), or still attached or detach pending (1). */
static bool
marked_tables(Ctx *x, bool partitions, PGresult **res, Err *err)
{
    char pat[64];
    const char *params[2] = {pat, partitions ? "t" : "f"};

    (void) snprintf(pat, sizeof pat, RETIRING "%u;%%", x->t->oid);
    return pg_query(x->conn,
                    "SELECT n.nspname, c.relname, d.description, "
                    "       pg_catalog.to_regclass('v7fill.window_activity') IS NOT NULL "
                    "  FROM pg_catalog.pg_description d "
                    "  JOIN pg_catalog.pg_class c ON c.oid = d.objoid "
                    "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                    " WHERE d.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass "
                    "   AND d.objsubid = 0 AND d.description LIKE $1 AND c.relkind = 'r' "
                    "   AND c.relispartition = $2::bool ORDER BY 1, 2",
                    2, params, res, err);
}

/* Windows whose retirement stopped after their detach (a kill, a failed
 * DROP): tables that are no partition any more and carry this parent's
 * marker, dropped now if their window is past the cutoff and no rows arrived
 * during that detach.  Under the parent's lock, first: a marker on a table
 * that is still a partition was left by a run that stopped before or during
 * its detach, and is cleared (retire marks again what it retires), so that
 * a later detach by someone else, or by --detach-only, is never taken for
 * ours.  Only with a retention (the stream's windows ahead never get here). */
static bool
finish_retiring(Ctx *x, Err *err)
{
    PGresult *res = NULL;
    bool ok = true, locked = false;

    if (!x->o->dry_run)
    {
        /* bounded by --lock-timeout, as retire's own */
        if (!bound_lock_waits(x, err))
            return false;
        ok = lock_parent(x, err);
        locked = ok;
        if (ok && (ok = marked_tables(x, true, &res, err)))
        {
            for (int i = 0; ok && i < PQntuples(res); i++)
            {
                char *q = pg_qualified(x->conn, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));

                ok = comment_on(x, q, marker_before(PQgetvalue(res, i, 2)), err);
                free(q);
            }
            PQclear(res);
            res = NULL;
        }
    }
    if (ok)
        ok = marked_tables(x, false, &res, err);
    for (int i = 0; ok && i < PQntuples(res); i++)
    {
        Candidate cd = {PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), 0, 0, 0, false};
        char last[32] = "", *qchild;
        unsigned int parent;
        Activity after;
        bool came;

        x->have_activity = PQgetvalue(res, i, 3)[0] == 't';
        if (sscanf(PQgetvalue(res, i, 2),
                   RETIRING "%u; window %" SCNd64 " %" SCNd64 "; last insert before the detach: "
                            "%31[^;]",
                   &parent, &cd.lower_us, &cd.upper_us, last) != 4)
        {
            log_warn("%s.%s: a retirement marker v7fill cannot read: %s", cd.schema, cd.name,
                     PQgetvalue(res, i, 2));
            continue;
        }
        if (x->o->detach_only)
        {
            emit(x, MAINTAIN_NOTE, cd.schema, cd.name, cd.lower_us, cd.upper_us,
                 "%s.%s: an earlier run detached it to drop it and stopped before the drop; "
                 "left as it is (--detach-only), a run without --detach-only drops it",
                 cd.schema, cd.name);
            continue;
        }
        if (!read_activity(x, cd.name, &after, err))
        {
            ok = false;
            break;
        }
        came = after.found && (strcmp(last, "none") == 0 || after.last_us > strtoll(last, NULL, 10));
        if (cd.upper_us >= x->cutoff_us || came)
        {
            /* not past the retention now, or rows came during that detach: kept */
            if (came)
                arrived(x, &cd, &after);
            else
                emit(x, MAINTAIN_NOTE, cd.schema, cd.name, cd.lower_us, cd.upper_us,
                     "%s.%s: an earlier run detached it to drop it and stopped before the "
                     "drop, but its window is not past the retention cutoff now: %s",
                     cd.schema, cd.name,
                     x->o->dry_run ? "would keep it" : "kept as a standalone table");
            if (!x->o->dry_run)
            {
                Err e = {0};

                qchild = pg_qualified(x->conn, cd.schema, cd.name);
                if (!comment_on(x, qchild, marker_before(PQgetvalue(res, i, 2)), &e))
                    log_warn("%s.%s: could not put its comment back: %s", cd.schema, cd.name,
                             e.msg);
                free(qchild);
            }
            continue;
        }
        if (x->o->dry_run)
        {
            x->r->dropped++;
            emit(x, MAINTAIN_DROPPED, cd.schema, cd.name, cd.lower_us, cd.upper_us,
                 "would drop %s.%s (its retirement stopped after the detach)", cd.schema,
                 cd.name);
            continue;
        }
        qchild = pg_qualified(x->conn, cd.schema, cd.name);
        ok = drop_window(x, &cd, qchild, " (its retirement had stopped after the detach)", err);
        free(qchild);
    }
    PQclear(res);
    if (!x->o->dry_run)
    {
        unbound_lock_waits(x);
        if (locked)
            unlock_parent(x);
    }
    return ok;
}

static bool
retire_one(Ctx *x, const Candidate *cd, Err *err)
{
    Activity before;
    Activity after;
    char l[200];
    char *qchild;
    char *orig = NULL;
    bool done = false, marked = false, keep = false;
    bool ok = true;

    label(cd->name, cd->lower_us, cd->upper_us, l, sizeof l);
    if (!read_activity(x, cd->name, &before, err))
        return false;
    if (before.recent)
    {
        refuse(x, cd, &before);
        return true;
    }
    if (x->o->dry_run && x->nfks > 0 && !cd->pending)
    {
        char fks[1024];

        referencing_fks(x, cd, fks, sizeof fks);
        if (fks[0])
        {
            Err e;

            emit(x, MAINTAIN_ISSUE, cd->schema, cd->name, cd->lower_us, cd->upper_us,
                 "could not detach %s: rows of %s reference it", l, fks);
            memset(&e, 0, sizeof e);
            err_set(&e, EC_CONFIG, "could not detach %s of %s.%s: rows of %s reference it", l,
                    x->t->schema, x->t->name, fks);
            err_detail(&e, "DETACH PARTITION fails (SQLSTATE 23503) while rows of another table "
                           "reference rows of the partition through a foreign key.");
            err_hint(&e, "Delete those rows (or drop the foreign key) before the window can "
                         "retire; a real run would leave %s.%s attached.",
                     cd->schema, cd->name);
            issue(x, &e);
            return true;
        }
    }
    if (x->o->dry_run)
    {
        x->r->detached++;
        if (cd->pending)
            emit(x, MAINTAIN_DETACHED, cd->schema, cd->name, cd->lower_us, cd->upper_us,
                 "would detach %s (finalize a DETACH CONCURRENTLY that had stopped half-way)",
                 l);
        else
            emit(x, MAINTAIN_DETACHED, cd->schema, cd->name, cd->lower_us, cd->upper_us,
                 "would detach %s%s", l, x->concurrently ? " (CONCURRENTLY)" : "");
        if (x->o->detach_only)
            emit(x, MAINTAIN_KEPT, cd->schema, cd->name, cd->lower_us, cd->upper_us,
                 "would keep %s.%s as a standalone table (--detach-only)", cd->schema, cd->name);
        else
        {
            x->r->dropped++;
            emit(x, MAINTAIN_DROPPED, cd->schema, cd->name, cd->lower_us, cd->upper_us,
                 "would drop %s.%s", cd->schema, cd->name);
        }
        return true;
    }

    if (!lock_parent(x, err))
        return window_failed(x, cd, "lock the partitions for retiring", err);
    qchild = pg_qualified(x->conn, cd->schema, cd->name);
    if (!detach(x, cd, qchild, &before, &done, &marked, &orig, err))
        ok = false;
    else if (!done)
        keep = marked; /* not detached: its comment back */
    else if (done)
    {
        /* See the top of the file: a batch that wrote into the window while
         * the detach waited for it has committed its activity by now. */
        if (!read_activity(x, cd->name, &after, err))
            ok = false;
        else if (after.found && (!before.found || after.last_us > before.last_us))
        {
            arrived(x, cd, &after);
            keep = marked;
        }
        else if (x->o->detach_only)
            emit(x, MAINTAIN_KEPT, cd->schema, cd->name, cd->lower_us, cd->upper_us,
                 "kept %s.%s as a standalone table (--detach-only)", cd->schema, cd->name);
        else
            ok = drop_window(x, cd, qchild, "", err);
    }
    if (keep)
    {
        Err e = {0};

        if (!comment_on(x, qchild, orig, &e))
            log_warn("%s.%s: could not put its comment back: %s", cd->schema, cd->name, e.msg);
    }
    free(orig);
    free(qchild);
    unlock_parent(x);
    return ok;
}

/* pg_partman's rule: retired once the upper bound is older than now −
 * retention (strictly). */
static bool
past_cutoff(const Ctx *x, const Partition *p)
{
    return !p->is_default && !p->planned && p->upper_us != INT64_MAX &&
           x->o->retention_us > 0 && p->upper_us < x->cutoff_us;
}

/* Partitions left "detach pending" whose window is not past the cutoff:
 * queries do not see their rows, rows for their window have no partition,
 * and nothing retires them.  Each is an issue saying how to settle it (the
 * ones past the cutoff are finalized by retire), once: the one the windows
 * ahead stopped at has been reported by ensure_ahead already. */
/* p is the partition ensure_ahead reported holding a window ahead.  Two
 * detach-pending partitions of one table never overlap (PostgreSQL refuses
 * it), so its name and the window tell it. */
static bool
held_ahead(const Ctx *x, const Partition *p)
{
    return strcmp(p->name, x->held_by) == 0 && p->lower_us < x->held_window.upper_us &&
           x->held_window.lower_us < p->upper_us;
}

static void
report_pending(Ctx *x)
{
    for (size_t i = 0; i < x->t->npending; i++)
    {
        const Partition *p = &x->t->pending[i];
        char l[200];
        char *finalize;
        char *attach;
        Err e = {0};

        if (past_cutoff(x, p) || held_ahead(x, p))
            continue;
        label(p->name, p->lower_us, p->upper_us, l, sizeof l);
        err_set(&e, EC_CONFIG, "partition %s of %s.%s is detach pending, and its window is not "
                               "past the retention cutoff",
                l, x->t->schema, x->t->name);
        err_detail(&e, "A DETACH ... CONCURRENTLY of it stopped half-way (cancelled, timed out, "
                       "or run under a shorter retention).  Its rows are invisible to queries, "
                       "and no partition can be created for its window until the detach is "
                       "finalized.");
        catalog_pending_sql(x->conn, x->t->schema, x->t->name, p, &finalize, &attach);
        err_hint(&e, "Finalize it: %s; then drop it, or restore its rows: %s;", finalize, attach);
        free(finalize);
        free(attach);
        emit(x, MAINTAIN_ISSUE, p->schema, p->name, p->lower_us, p->upper_us,
             "%s is detach pending but not past the cutoff: queries do not see its rows and "
             "rows for its window have no partition; left as it is",
             l);
        issue(x, &e);
    }
}

static void
add_candidate(Candidate **cands, size_t *n, const Partition *p)
{
    Candidate *cd;

    *cands = xrealloc(*cands, (*n + 1) * sizeof **cands);
    cd = &(*cands)[(*n)++];
    cd->schema = xstrdup(p->schema);
    cd->name = xstrdup(p->name);
    cd->oid = p->oid;
    cd->lower_us = p->lower_us;
    cd->upper_us = p->upper_us;
    cd->pending = p->detach_pending;
}

static bool
retire(Ctx *x, Err *err)
{
    Candidate *cands = NULL;
    size_t n = 0;
    PGresult *res;
    bool ok = true;

    for (size_t i = 0; i < x->t->npartitions; i++)
        if (past_cutoff(x, &x->t->partitions[i]))
            add_candidate(&cands, &n, &x->t->partitions[i]);
    for (size_t i = 0; i < x->t->npending; i++)
        if (past_cutoff(x, &x->t->pending[i]))
            add_candidate(&cands, &n, &x->t->pending[i]);
    if (n == 0)
        return true;

    if (!pg_query(x->conn, "SELECT to_regclass('v7fill.window_activity') IS NOT NULL", 0, NULL,
                  &res, err))
    {
        ok = false;
        goto out;
    }
    x->have_activity = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!catalog_incoming_fks(x->conn, x->t->oid, &x->fks, &x->nfks, err))
    {
        ok = false;
        goto out;
    }
    x->concurrently = PQserverVersion(pg_raw(x->conn)) >= 140000 && !x->t->has_default &&
                      !x->t->distributed;
    if (!x->concurrently)
    {
        const char *why = x->t->has_default
                              ? "it has a DEFAULT partition, which rules out CONCURRENTLY"
                          : x->t->distributed
                              ? "it is a Citus distributed table, and Citus does not support "
                                "DETACH CONCURRENTLY"
                              : "the server is older than PostgreSQL 14";

        emit(x, MAINTAIN_NOTE, x->t->schema, x->t->name, 0, 0,
             "%s plain DETACH PARTITION on %s.%s: %s; it takes an ACCESS EXCLUSIVE lock on the "
             "parent for the detach",
             x->o->dry_run ? "would use" : "using", x->t->schema, x->t->name, why);
    }
    if (!x->o->dry_run && !bound_lock_waits(x, err))
    {
        ok = false;
        goto out;
    }
    for (size_t i = 0; i < n && ok; i++)
        ok = retire_one(x, &cands[i], err);
    if (!x->o->dry_run)
    {
        unbound_lock_waits(x);
        if (ok)
            ok = catalog_refresh_partitions(x->conn, x->t, err);
    }
out:
    for (size_t i = 0; i < n; i++)
    {
        free(cands[i].schema);
        free(cands[i].name);
    }
    free(cands);
    catalog_incoming_fks_free(x->fks, x->nfks);
    x->fks = NULL;
    x->nfks = 0;
    return ok;
}

/* The table's run history folded by the hour (run_history.h).  A problem is
 * said, never a reason to stop: the history only grows. */
static void
fold_history(Ctx *x)
{
    RunFold f;
    Err e = {0};

    if (!run_history_fold(x->conn, x->t, x->o->dry_run, 0, &f, &e))
    {
        log_warn("%s", e.msg);
        return;
    }
    if (f.denied)
        log_debug("%s.%s: the run history is not folded: this role lacks SELECT, INSERT or "
                  "DELETE on v7fill.run (a role that has them folds it with v7fill maintain)",
                  x->t->schema, x->t->name);
    if (f.rows > 0)
        log_info("%s.%s: run history: %s %" PRIu64 " periodic run rows into %" PRIu64
                 " (one per hour; v7fill report reads the same figures)",
                 x->t->schema, x->t->name, x->o->dry_run ? "would fold" : "folded", f.rows,
                 f.into);
}

bool
maintain_run(PgConn *c, TargetTable *t, const MaintainOptions *o, MaintainResult *r, Err *err)
{
    MaintainOptions opts = *o;
    Ctx x;
    int64_t real_now;
    char *q;

    memset(r, 0, sizeof *r);
    if (opts.ahead < 0)
        opts.ahead = 0;
    if (opts.quiet_period_us < 0)
        opts.quiet_period_us = 0;
    if (opts.lock_timeout_ms <= 0)
        opts.lock_timeout_ms = 5000;
    memset(&x, 0, sizeof x);
    x.conn = c;
    x.t = t;
    x.o = &opts;
    x.r = r;
    if (!pg_server_now_us(c, &real_now, err))
        return false;
    /* A pretended now only previews.  A real run counts the windows ahead
     * from the real now and never retires a window the real clock does not
     * retire (a pretended now later than the real one is ignored). */
    x.now_us = opts.now_us != 0 && (opts.dry_run || opts.now_us < real_now) ? opts.now_us
                                                                           : real_now;
    q = pg_qualified(c, t->schema, t->name);
    (void) snprintf(x.qparent, sizeof x.qparent, "%s", q);
    free(q);
    duration_format(opts.retention_us, x.retention, sizeof x.retention);
    duration_format(opts.quiet_period_us, x.quiet, sizeof x.quiet);

    if (!ensure_ahead(&x, opts.dry_run ? x.now_us : real_now, err))
        return false;
    if (opts.fold_history)
        fold_history(&x);
    if (opts.retention_us > 0)
        x.cutoff_us = x.now_us - opts.retention_us;
    report_pending(&x);
    if (opts.retention_us <= 0)
        return true;
    if (!finish_retiring(&x, err))
        return false;
    return retire(&x, err);
}
