/*
 * Making sure the windows rows need exist, without blocking the people who
 * use the table.
 *
 * CREATE TABLE ... PARTITION OF takes ACCESS EXCLUSIVE on the parent and so
 * blocks every reader.  Instead, per window and in one short transaction:
 *
 *   BEGIN; SET LOCAL lock_timeout = '5000ms';
 *   SELECT pg_advisory_xact_lock(key)          -- v7fill processes queue here
 *   (re-check the partition list)              -- someone may have been faster
 *   CREATE TABLE new (LIKE parent INCLUDING ...) [TABLESPACE ts];
 *   ALTER TABLE new OWNER TO parent_owner;  GRANT ... (the parent's ACL);
 *   ALTER TABLE new ADD CONSTRAINT v7fill_window_bounds CHECK (key bounds);
 *   ALTER TABLE parent ATTACH PARTITION new FOR VALUES FROM (lo) TO (hi);
 *   ALTER TABLE new DROP CONSTRAINT v7fill_window_bounds;
 *   COMMIT;
 *
 * ATTACH takes SHARE UPDATE EXCLUSIVE on the parent (readers and writers go
 * on), ACCESS EXCLUSIVE on the new table (nobody sees it yet) and, if there is
 * one, ACCESS EXCLUSIVE on the DEFAULT partition, which it also scans.  The
 * CHECK lets ATTACH skip scanning the new table.  ATTACH creates the parent's
 * indexes, foreign keys and row triggers on the new table itself.
 *
 * Values never reach SQL text from input: identifiers go through
 * PQescapeIdentifier, bound literals are v7fill's own canonical text (or the
 * server's, parsed and checked) through PQescapeLiteral, and queries take
 * parameters.  DDL cannot take parameters, hence the literals there.
 */
#include "v7fill/partitions.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "v7fill/civil.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/partman.h"
#include "v7fill/retention.h"

#define CHECK_NAME       "v7fill_window_bounds"
#define LOCK_TAG         UINT64_C(0x7637666c) /* "v7fl" */
#define MAX_WINDOWS      100000               /* per call: --granularity day over ages */
#define MAX_PIECE_SUFFIX 1000

static const char *const q_relation_by_name =
    "SELECT c.relkind, c.relispartition, "
    "       coalesce((SELECT i.inhparent FROM pg_catalog.pg_inherits i "
    "                  WHERE i.inhrelid = c.oid LIMIT 1), 0), "
    "       coalesce((SELECT i.inhparent::pg_catalog.regclass::text FROM pg_catalog.pg_inherits i "
    "                  WHERE i.inhrelid = c.oid LIMIT 1), ''), "
    "       coalesce(pg_catalog.pg_get_expr(c.relpartbound, 0), '') "
    "  FROM pg_catalog.pg_class c "
    "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    " WHERE n.nspname = $1 AND c.relname = $2";

static const char *const q_new_partition =
    "SELECT c.oid, c.xmin::text::int8 FROM pg_catalog.pg_class c "
    " WHERE c.oid = $1::pg_catalog.regclass";

void
ensure_options_default(EnsureOptions *o)
{
    memset(o, 0, sizeof *o);
    o->granularity = GRAN_AUTO;
    o->lock_timeout_ms = 5000;
    o->lock_retries = 5;
}

int64_t
partitions_lock_key(unsigned int parent_oid)
{
    return (int64_t) ((LOCK_TAG << 32) | (uint64_t) parent_oid);
}

/* ---------------------------------------------------------------- helpers */

typedef struct StrList
{
    char **v;
    size_t n;
    size_t cap;
} StrList;

static void
strlist_add(StrList *l, char *s)
{
    if (l->n == l->cap)
    {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = s;
}

static void
strlist_free(StrList *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* pg_exec's generic "statement failed: " says nothing here: the context
 * replaces it. */
static void
drop_generic_prefix(Err *err)
{
    static const char *const generic[] = {"statement failed: ", "query failed: "};

    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++)
    {
        size_t n = strlen(generic[i]);
        if (strncmp(err->msg, generic[i], n) == 0)
        {
            memmove(err->msg, err->msg + n, strlen(err->msg + n) + 1);
            return;
        }
    }
}

static void
piece_clear(WindowPiece *p)
{
    free(p->lower_text);
    free(p->upper_text);
    memset(p, 0, sizeof *p);
}

void
window_plans_free(WindowPlan *plans, size_t n)
{
    if (plans == NULL)
        return;
    for (size_t i = 0; i < n; i++)
    {
        for (size_t k = 0; k < plans[i].npieces; k++)
            piece_clear(&plans[i].pieces[k]);
        free(plans[i].pieces);
    }
    free(plans);
}

/* ---------------------------------------------------------------- planner */

/* A partition edge that could be a local midnight but is not one in UTC: a
 * whole second other than midnight.  Zone offsets are whole seconds, not
 * always quarter hours (Africa/Monrovia until 1972: -0:44:30); a bound inside
 * a millisecond (another generator's, or a person's) is not a whole second
 * and stays an ordinary edge, met exactly. */
static bool
zone_like_edge(int64_t us)
{
    return us != INT64_MIN && us != INT64_MAX && us % US_PER_SEC == 0 && us % US_PER_DAY != 0;
}

typedef struct Planner
{
    const TargetTable *t;
    Granularity g;
    const char *pattern;
    TimeParser *zone; /* NULL = UTC */
    bool zone_given;  /* --window-tz was given (UTC included) */
} Planner;

bool
window_tz_check(const char *tz, Err *err)
{
    if (tz == NULL)
        return true;
    if (tz[0] == '\0')
    {
        err_set(err, EC_USAGE, "--window-tz is empty");
        err_hint(err, "Name the zone, e.g. --window-tz Europe/Berlin, or --window-tz UTC; "
                      "without the option windows are in UTC.");
        return false;
    }
    if (strcmp(tz, "localtime") == 0 || strcmp(tz, "posixrules") == 0)
    {
        err_set(err, EC_USAGE, "--window-tz %s is the zone of the machine v7fill runs on", tz);
        err_detail(err, "Window edges are fixed in the partitions' bounds; a zone that differs "
                        "between machines would make windows that do not meet.");
        err_hint(err, "Name the zone, e.g. --window-tz Europe/Berlin.");
        return false;
    }
    return true;
}

static void
planner_free(Planner *pl)
{
    time_parser_free(pl->zone);
    memset(pl, 0, sizeof *pl);
}

static bool
planner_init(Planner *pl, const TargetTable *t, const EnsureOptions *o, Err *err)
{
    memset(pl, 0, sizeof *pl);
    pl->t = t;
    pl->zone_given = o->window_tz_given || o->window_tz != NULL;
    if (!window_tz_check(o->window_tz, err))
        return false;
    if (o->window_tz && strcmp(o->window_tz, "UTC") != 0)
    {
        if (!time_parser_new_window(o->window_tz, &pl->zone, err))
        {
            err_prefix(err, "--window-tz");
            return false;
        }
    }
    if (pl->zone && t->key_kind == KEY_TIMESTAMP)
    {
        err_set(err, EC_USAGE, "--window-tz does not apply to %s.%s: its key \"%s\" is a "
                               "timestamp without time zone",
                t->schema, t->name, t->key_column);
        err_detail(err, "Such values are wall-clock times already; their windows start at "
                        "midnight of the values themselves.");
        goto fail;
    }
    pl->g = o->granularity;
    if (pl->g == GRAN_AUTO && !partitions_infer_granularity(t, pl->zone, &pl->g, err))
        goto fail;
    pl->pattern = o->name_pattern ? o->name_pattern : window_default_pattern(pl->g);
    if (!window_pattern_check(pl->g, pl->pattern, err))
        goto fail;
    return true;
fail:
    planner_free(pl);
    return false;
}

bool
partitions_effective_granularity(const TargetTable *t, const EnsureOptions *opts, Granularity *out,
                                 Err *err)
{
    Planner pl;

    /* planner_init checks the options against the table (--window-tz on a
     * timestamp key, the name pattern) before anything is read */
    if (!planner_init(&pl, t, opts, err))
        return false;
    *out = pl.g;
    planner_free(&pl);
    return true;
}

static bool
name_used_by_partition(const TargetTable *t, const char *name)
{
    for (size_t i = 0; i < t->npartitions; i++)
        if (strcmp(t->partitions[i].name, name) == 0 &&
            strcmp(t->partitions[i].schema, t->schema) == 0)
            return true;
    return false;
}

/* A piece edge that meets an existing partition takes that partition's bound
 * text, so the two meet exactly even when its bound is not what v7fill would
 * write (pg_partman's bare uuids, a bound inside a millisecond).  `text`: the
 * bound the uncovered span starts or ends at, if a partition's.  At a window
 * edge, of the partitions ending (starting) in that microsecond the nearest
 * one is met: nothing lies between. */
static bool
edge_literal(const TargetTable *t, int64_t us, const char *text, bool lower_edge, char **out,
             Err *err)
{
    const char *best = NULL;

    if (text)
    {
        *out = xstrdup(text);
        return true;
    }
    for (size_t i = 0; i < t->npartitions; i++)
    {
        const Partition *p = &t->partitions[i];
        const char *b = lower_edge ? p->upper_text : p->lower_text;

        if (p->is_default || b == NULL || (lower_edge ? p->upper_us : p->lower_us) != us)
            continue;
        if (best == NULL || (catalog_bound_cmp(us, b, us, best) > 0) == lower_edge)
            best = b;
    }
    if (best)
    {
        *out = xstrdup(best);
        return true;
    }
    return catalog_bound_literal(t->key_kind, t->bound_style, us, out, err);
}

static bool
piece_suffix_name(const char *base, int k, char *out, size_t size, Err *err)
{
    int n = snprintf(out, size, "%s_p%d", base, k);

    if (n < 0 || n > 63 || (size_t) n >= size)
    {
        err_set(err, EC_CONFIG, "partition name \"%s_p%d\" is %d bytes long; PostgreSQL names hold "
                                "at most 63",
                base, k, n);
        err_detail(err, "Gap pieces are named after their window with a _pN suffix.  Nothing was "
                        "created.");
        err_hint(err, "Choose a shorter --name-pattern.");
        return false;
    }
    return true;
}

/* The existing partition with an edge at `us`. */
static const Partition *
partition_with_edge(const TargetTable *t, int64_t us)
{
    for (size_t i = 0; i < t->npartitions; i++)
        if (!t->partitions[i].is_default &&
            (t->partitions[i].lower_us == us || t->partitions[i].upper_us == us))
            return &t->partitions[i];
    return NULL;
}

/*
 * Windows in UTC (no --window-tz) next to partitions that were made as
 * windows of a local zone (v7fill partitions --window-tz, or pg_partman in a
 * database whose TimeZone is not UTC) would not meet them: August in UTC
 * after July in Berlin leaves two hours uncovered, filled later by a sliver
 * of a partition, and every later window is off by the offset.  So unless
 * the user named the zone, a window is not planned when a partition runs
 * from one zone-like edge to another, or when the window would have to be
 * cut at such an edge; the error says whose midnight the edge is.
 */
static bool
check_zone_edges(const Planner *pl, const Window *w, const Span *spans, size_t nspans, Err *err)
{
    const TargetTable *t = pl->t;
    const Partition *p = NULL;
    int64_t edge = 0;
    char at[48];
    char a[48];
    char b[48];
    int64_t into;
    int64_t offset;
    int64_t abs_off;

    if (pl->zone_given || pl->zone != NULL || t->key_kind == KEY_TIMESTAMP)
        return true;
    /* the nearest partition that runs from one zone-like edge to another */
    for (size_t i = 0; i < t->npartitions; i++)
    {
        const Partition *q = &t->partitions[i];
        int64_t e = q->upper_us <= w->lower_us ? q->upper_us : q->lower_us;

        if (q->is_default || !zone_like_edge(q->lower_us) || !zone_like_edge(q->upper_us))
            continue;
        if (p == NULL || (e > w->lower_us ? e - w->lower_us : w->lower_us - e) <
                             (edge > w->lower_us ? edge - w->lower_us : w->lower_us - edge))
        {
            p = q;
            edge = e;
        }
    }
    for (size_t i = 0; p == NULL && i < nspans; i++)
    {
        if (spans[i].lower_us != w->lower_us && zone_like_edge(spans[i].lower_us))
            edge = spans[i].lower_us;
        else if (spans[i].upper_us != w->upper_us && zone_like_edge(spans[i].upper_us))
            edge = spans[i].upper_us;
        else
            continue;
        p = partition_with_edge(t, edge);
    }
    if (p == NULL)
        return true;
    civil_format_instant(edge, at, sizeof at);
    civil_format_instant(w->lower_us, a, sizeof a);
    civil_format_instant(w->upper_us, b, sizeof b);
    /* local midnight at `edge`: an offset of minus its time of day, taken
     * between -12 and +12 hours */
    into = edge - civil_floor_div(edge, US_PER_DAY) * US_PER_DAY;
    offset = into > US_PER_DAY / 2 ? US_PER_DAY - into : -into;
    abs_off = offset < 0 ? -offset : offset;
    err_set(err, EC_CONFIG,
            "partition %s.%s of %s.%s starts or ends at %s, not at a midnight in UTC: window "
            "[%s, %s) in UTC would not meet it",
            p->schema, p->name, t->schema, t->name, at, a, b);
    {
        char secs[8] = "";

        if (abs_off % US_PER_MIN != 0)
            (void) snprintf(secs, sizeof secs, ":%02d", (int) (abs_off % US_PER_MIN / US_PER_SEC));
        err_detail(err, "The partitions look like windows of a local time zone, whose midnight is "
                        "at UTC%c%02d:%02d%s there.",
                   offset < 0 ? '-' : '+', (int) (abs_off / US_PER_HOUR),
                   (int) (abs_off % US_PER_HOUR / US_PER_MIN), secs);
    }
    err_hint(err, "Give the --window-tz they were made with (e.g. --window-tz Europe/Berlin, or "
                  "the database's TimeZone for pg_partman's); --window-tz UTC makes UTC windows "
                  "next to them anyway.");
    return false;
}

/* Plan one window against pl->t as it is now. */
static bool
plan_window(const Planner *pl, const Window *w, WindowPlan *plan, Err *err)
{
    const TargetTable *t = pl->t;
    Span *spans = NULL;
    size_t nspans;
    int suffix = 0;

    memset(plan, 0, sizeof *plan);
    plan->window = *w;
    if (!window_name(pl->g, pl->pattern, t->name, w, plan->name, sizeof plan->name, err))
        return false;
    nspans = partitions_uncovered(t, w->lower_us, w->upper_us, &spans);
    if (nspans == 0)
    {
        free(spans);
        return true;
    }
    plan->partial = !(nspans == 1 && spans[0].lower_us == w->lower_us &&
                      spans[0].upper_us == w->upper_us);
    if (!check_zone_edges(pl, w, spans, nspans, err))
    {
        free(spans);
        return false;
    }
    if (!plan->partial && name_used_by_partition(t, plan->name))
    {
        free(spans);
        err_set(err, EC_CONFIG, "partition %s.%s of %s.%s has the name of window [%s) but other "
                                "bounds",
                t->schema, plan->name, t->schema, t->name, plan->name);
        err_hint(err, "Rename that partition, or pick other names with --name-pattern.");
        return false;
    }
    plan->pieces = xcalloc(nspans, sizeof *plan->pieces);
    for (size_t i = 0; i < nspans; i++)
    {
        WindowPiece *pc = &plan->pieces[i];

        plan->npieces++;
        pc->lower_us = spans[i].lower_us;
        pc->upper_us = spans[i].upper_us;
        if (!edge_literal(t, pc->lower_us, spans[i].lower_text, true, &pc->lower_text, err) ||
            !edge_literal(t, pc->upper_us, spans[i].upper_text, false, &pc->upper_text, err))
            goto fail;
        if (!plan->partial)
        {
            memcpy(pc->name, plan->name, sizeof pc->name);
            continue;
        }
        do
        {
            if (!piece_suffix_name(plan->name, ++suffix, pc->name, sizeof pc->name, err))
                goto fail;
        } while (name_used_by_partition(t, pc->name));
    }
    free(spans);
    return true;

fail:
    free(spans);
    for (size_t i = 0; i < plan->npieces; i++)
        piece_clear(&plan->pieces[i]);
    free(plan->pieces);
    plan->pieces = NULL;
    plan->npieces = 0;
    return false;
}

static void
plans_push(WindowPlan **plans, size_t *n, size_t *cap, const WindowPlan *p)
{
    if (*n == *cap)
    {
        *cap = *cap ? *cap * 2 : 8;
        *plans = xrealloc(*plans, *cap * sizeof **plans);
    }
    (*plans)[(*n)++] = *p;
}

static bool
plan_range(const Planner *pl, int64_t from_us, int64_t to_us, WindowPlan **out, size_t *nout,
           Err *err)
{
    WindowPlan *plans = NULL;
    size_t n = 0;
    size_t cap = 0;
    int64_t us = from_us;

    *out = NULL;
    *nout = 0;
    if (from_us >= to_us)
        return err_set(err, EC_USAGE, "the range is empty: --from must be before --to");
    while (us < to_us)
    {
        Window w;
        WindowPlan p;

        if (n >= MAX_WINDOWS)
        {
            window_plans_free(plans, n);
            err_set(err, EC_USAGE, "the range holds more than %d %s windows", MAX_WINDOWS,
                    granularity_name(pl->g));
            err_hint(err, "Narrow --from/--to or use a coarser --granularity.");
            return false;
        }
        if (!window_at(pl->g, pl->zone, us, &w, err) || !plan_window(pl, &w, &p, err))
        {
            window_plans_free(plans, n);
            return false;
        }
        plans_push(&plans, &n, &cap, &p);
        us = w.upper_us;
    }
    *out = plans;
    *nout = n;
    return true;
}

static int
cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a;
    int64_t y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

static bool
plan_times(const Planner *pl, const int64_t *times, size_t n, WindowPlan **out, size_t *nout,
           Err *err)
{
    int64_t *todo = NULL;
    size_t ntodo = 0;
    WindowPlan *plans = NULL;
    size_t np = 0;
    size_t cap = 0;
    int64_t upper = INT64_MIN;

    *out = NULL;
    *nout = 0;
    for (size_t i = 0; i < n; i++)
    {
        if (catalog_partition_for(pl->t, times[i]) != NULL)
            continue;
        if (todo == NULL)
            todo = xmalloc(n * sizeof *todo);
        todo[ntodo++] = times[i];
    }
    if (ntodo == 0)
        return true;
    qsort(todo, ntodo, sizeof *todo, cmp_int64);
    for (size_t i = 0; i < ntodo; i++)
    {
        Window w;
        WindowPlan p;

        if (todo[i] < upper)
            continue; /* same window as the previous time */
        if (!window_at(pl->g, pl->zone, todo[i], &w, err) || !plan_window(pl, &w, &p, err))
        {
            free(todo);
            window_plans_free(plans, np);
            return false;
        }
        upper = w.upper_us;
        plans_push(&plans, &np, &cap, &p);
    }
    free(todo);
    *out = plans;
    *nout = np;
    return true;
}

bool
partitions_plan_range(const TargetTable *t, int64_t from_us, int64_t to_us,
                      const EnsureOptions *opts, WindowPlan **out, size_t *nout, Err *err)
{
    Planner pl;
    bool ok;

    *out = NULL;
    *nout = 0;
    if (!planner_init(&pl, t, opts, err))
        return false;
    ok = plan_range(&pl, from_us, to_us, out, nout, err);
    planner_free(&pl);
    return ok;
}

bool
partitions_plan_times(const TargetTable *t, const int64_t *times, size_t n,
                      const EnsureOptions *opts, WindowPlan **out, size_t *nout, Err *err)
{
    Planner pl;
    bool ok;

    *out = NULL;
    *nout = 0;
    if (!planner_init(&pl, t, opts, err))
        return false;
    ok = plan_times(&pl, times, n, out, nout, err);
    planner_free(&pl);
    return ok;
}

/* ------------------------------------------------------------------- DDL */

static const Partition *
default_partition(const TargetTable *t)
{
    if (!t->has_default || t->npartitions == 0)
        return NULL;
    return &t->partitions[t->npartitions - 1];
}

/* Only the privilege keywords aclexplode() reports ever reach GRANT. */
static bool
privilege_keyword(const char *p)
{
    static const char *const known[] = {"SELECT",     "INSERT",  "UPDATE", "DELETE", "TRUNCATE",
                                        "REFERENCES", "TRIGGER", NULL};
    for (size_t i = 0; known[i]; i++)
        if (strcmp(p, known[i]) == 0)
            return true;
    return false;
}

static bool
same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/* GRANTs reproducing the parent's ACL (owner's own entries excluded), one
 * statement per grantee, column list and grant option. */
static void
grant_statements(PgConn *c, const TargetTable *t, const char *qnew, StrList *out)
{
    for (size_t i = 0; i < t->ngrants;)
    {
        const Grant *g = &t->grants[i];
        size_t j = i;
        Buf b;
        bool first = true;
        char *grantee = g->grantee ? pg_ident(c, g->grantee) : xstrdup("PUBLIC");
        char *col = g->column ? pg_ident(c, g->column) : NULL;

        buf_init(&b);
        buf_puts(&b, "GRANT ");
        for (; j < t->ngrants && same_str(t->grants[j].column, g->column) &&
               same_str(t->grants[j].grantee, g->grantee) &&
               t->grants[j].grantable == g->grantable;
             j++)
        {
            if (!privilege_keyword(t->grants[j].privilege))
                continue;
            buf_printf(&b, "%s%s", first ? "" : ", ", t->grants[j].privilege);
            if (col)
                buf_printf(&b, " (%s)", col);
            first = false;
        }
        buf_printf(&b, " ON TABLE %s TO %s%s", qnew, grantee,
                   g->grantable ? " WITH GRANT OPTION" : "");
        if (!first)
            strlist_add(out, b.data);
        else
            buf_free(&b);
        free(grantee);
        free(col);
        i = j;
    }
}

/* What each statement of a piece does, for error messages and hints. */
typedef enum StmtKind
{
    STMT_CREATE,
    STMT_OWNER,
    STMT_GRANT,
    STMT_TEMPLATE,
    STMT_CHECK,
    STMT_MOVE,
    STMT_ATTACH,
    STMT_DROP_CHECK,
} StmtKind;

typedef struct PieceSql
{
    StrList sql;
    StmtKind kinds[64];
} PieceSql;

static void
piece_add(PieceSql *ps, StmtKind kind, char *sql)
{
    if (ps->sql.n < sizeof ps->kinds / sizeof ps->kinds[0])
        ps->kinds[ps->sql.n] = kind;
    strlist_add(&ps->sql, sql);
}

static void
piece_statements(PgConn *c, const TargetTable *t, const WindowPiece *pc, bool move,
                 const EnsureOptions *o, PieceSql *ps)
{
    char *qnew = pg_qualified(c, t->schema, pc->name);
    char *qparent = pg_qualified(c, t->schema, t->name);
    char *key = pg_ident(c, t->key_column);
    char *lo = pg_literal(c, pc->lower_text);
    char *hi = pg_literal(c, pc->upper_text);
    const char *type = catalog_key_sql_type(t->key_kind);
    char *ts = t->tablespace ? pg_ident(c, t->tablespace) : NULL;
    StrList grants = {0};

    memset(ps, 0, sizeof *ps);
    /* Not INCLUDING INDEXES: ATTACH builds the partitioned indexes' partitions
     * itself and links them; copies made here would end up as duplicates.  Not
     * INCLUDING IDENTITY: the parent's sequence serves every partition. */
    piece_add(ps, STMT_CREATE,
              xasprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
                        "INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMMENTS INCLUDING "
                        "COMPRESSION)%s%s",
                        qnew, qparent, ts ? " TABLESPACE " : "", ts ? ts : ""));
    {
        char *owner = pg_ident(c, t->owner);
        piece_add(ps, STMT_OWNER, xasprintf("ALTER TABLE %s OWNER TO %s", qnew, owner));
        free(owner);
    }
    grant_statements(c, t, qnew, &grants);
    for (size_t i = 0; i < grants.n; i++)
    {
        piece_add(ps, STMT_GRANT, grants.v[i]);
        grants.v[i] = NULL;
    }
    strlist_free(&grants);
    /* pg_partman's template (indexes the parent cannot have, storage
     * options, UNLOGGED): its own function, before ATTACH as it calls it. */
    if (o->partman_template)
    {
        char *fn = pg_qualified(c, o->partman_schema, "inherit_template_properties");
        char *parent = pg_literal(c, o->partman_parent);
        char *schema = pg_literal(c, t->schema);
        char *name = pg_literal(c, pc->name);

        piece_add(ps, STMT_TEMPLATE,
                  xasprintf("SELECT %s(%s, %s, %s)", fn, parent, schema, name));
        free(fn);
        free(parent);
        free(schema);
        free(name);
    }
    /* The same shape as the partition constraint PostgreSQL derives, so that
     * ATTACH proves it implied and skips the validation scan. */
    piece_add(ps, STMT_CHECK,
              xasprintf("ALTER TABLE %s ADD CONSTRAINT %s CHECK (%s IS NOT NULL AND %s >= %s::%s "
                        "AND %s < %s::%s)",
                        qnew, CHECK_NAME, key, key, lo, type, key, hi, type));
    if (move)
    {
        const Partition *d = default_partition(t);
        char *qdef = pg_qualified(c, d->schema, d->name);
        Buf cols;

        buf_init(&cols);
        for (size_t i = 0; i < t->ncolumns; i++)
        {
            char *q;
            if (t->columns[i].generated)
                continue; /* computed again on insert */
            q = pg_ident(c, t->columns[i].name);
            buf_printf(&cols, "%s%s", cols.len ? ", " : "", q);
            free(q);
        }
        piece_add(ps, STMT_MOVE,
                  xasprintf("WITH moved AS (DELETE FROM ONLY %s WHERE %s >= %s::%s AND %s < %s::%s "
                            "RETURNING %s) INSERT INTO %s (%s) SELECT %s FROM moved",
                            qdef, key, lo, type, key, hi, type, cols.data, qnew, cols.data,
                            cols.data));
        buf_free(&cols);
        free(qdef);
    }
    piece_add(ps, STMT_ATTACH,
              xasprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)", qparent,
                        qnew, lo, hi));
    piece_add(ps, STMT_DROP_CHECK,
              xasprintf("ALTER TABLE %s DROP CONSTRAINT %s", qnew, CHECK_NAME));
    free(qnew);
    free(qparent);
    free(key);
    free(lo);
    free(hi);
    free(ts);
}

static void
begin_statements(const EnsureOptions *o, const TargetTable *t, StrList *out)
{
    strlist_add(out, xstrdup("BEGIN"));
    strlist_add(out, xasprintf("SET LOCAL lock_timeout = '%dms'", o->lock_timeout_ms));
    strlist_add(out, xasprintf("SELECT pg_catalog.pg_advisory_xact_lock(%" PRId64 ")",
                               partitions_lock_key(t->oid)));
}

static void
ddl_append(const EnsureOptions *o, const char *sql)
{
    if (o->ddl_out)
    {
        buf_puts(o->ddl_out, sql);
        buf_puts(o->ddl_out, ";\n");
    }
}

static void
ddl_comment(const EnsureOptions *o, const char *text)
{
    if (o->ddl_out)
    {
        buf_puts(o->ddl_out, "-- ");
        buf_puts(o->ddl_out, text);
        buf_putc(o->ddl_out, '\n');
    }
}

/* ------------------------------------------------------------- reporting */

static void report_held(const EnsureOptions *o, WindowAction action, const WindowPlan *plan,
                        int64_t default_rows, const char *held_by);

static void
report(const EnsureOptions *o, WindowAction action, const WindowPlan *plan, int64_t default_rows)
{
    report_held(o, action, plan, default_rows, NULL);
}

static void
report_held(const EnsureOptions *o, WindowAction action, const WindowPlan *plan,
            int64_t default_rows, const char *held_by)
{
    WindowReport r;

    if (o->on_window == NULL)
        return;
    memset(&r, 0, sizeof r);
    r.action = action;
    r.window = plan->window;
    r.name = plan->name;
    r.npieces = action == WINDOW_SKIPPED || action == WINDOW_ISSUE ? 0 : plan->npieces;
    r.pieces = plan->pieces;
    r.default_rows = default_rows;
    r.held_by = held_by;
    r.dry_run = o->dry_run;
    o->on_window(o->on_window_arg, &r);
}

static void
count_done(EnsureResult *res, const WindowPlan *plan)
{
    if (plan->partial)
        res->gaps_filled++;
    else
        res->created++;
    res->partitions_created += (int) plan->npieces;
}

static void
window_label(const WindowPlan *plan, char *out, size_t size)
{
    char a[48], b[48];

    civil_format_instant(plan->window.lower_us, a, sizeof a);
    civil_format_instant(plan->window.upper_us, b, sizeof b);
    (void) snprintf(out, size, "%s [%s, %s)", plan->name, a, b);
}

static void
default_issue(EnsureResult *res, const TargetTable *t, const WindowPlan *plan, int64_t rows)
{
    const Partition *d = default_partition(t);
    char label[200];

    window_label(plan, label, sizeof label);
    res->issues++;
    if (res->issue.code != EC_OK)
        return;
    err_set(&res->issue, EC_CONFIG,
            "the DEFAULT partition %s.%s holds %" PRId64 " row%s of window %s", d->schema, d->name,
            rows, rows == 1 ? "" : "s", label);
    err_detail(&res->issue, "ATTACH PARTITION would fail on them, so the window was not created; "
                            "windows after it were not looked at.");
    err_hint(&res->issue, "Run again with --move-from-default to move exactly those rows into the "
                          "new partition (one transaction; the DEFAULT partition is locked "
                          "ACCESS EXCLUSIVE meanwhile).");
}

/* A detach-pending partition overlapping the window, or NULL: PostgreSQL
 * creates or attaches nothing that overlaps it ("would overlap partition")
 * until its detach is finalized, yet routes no row to it. */
static const Partition *
pending_overlap(const TargetTable *t, const WindowPlan *plan)
{
    for (size_t i = 0; i < t->npending; i++)
        if (t->pending[i].lower_us < plan->window.upper_us &&
            plan->window.lower_us < t->pending[i].upper_us)
            return &t->pending[i];
    return NULL;
}

static void
pending_issue(PgConn *c, EnsureResult *res, const TargetTable *t, const WindowPlan *plan,
              const Partition *p)
{
    char label[200];
    char *finalize;
    char *attach;

    window_label(plan, label, sizeof label);
    res->issues++;
    if (res->issue.code != EC_OK)
        return;
    catalog_pending_sql(c, t->schema, t->name, p, &finalize, &attach);
    err_set(&res->issue, EC_CONFIG,
            "window %s of %s.%s is held by partition %s.%s, which is \"detach pending\"", label,
            t->schema, t->name, p->schema, p->name);
    err_detail(&res->issue, "A DETACH ... CONCURRENTLY of it stopped half-way: queries no longer "
                            "see its rows, no row is routed to it, and no partition overlapping "
                            "it can be created until the detach is finalized.  The window was "
                            "not created; windows after it were not looked at.");
    err_hint(&res->issue, "%s; then drop it, or restore its rows: %s;", finalize, attach);
    free(finalize);
    free(attach);
}

/* -------------------------------------------------------- talking to the server */

static bool
count_default_rows(PgConn *c, const TargetTable *t, const WindowPlan *plan, int64_t *rows,
                   Err *err)
{
    const Partition *d = default_partition(t);
    char *qdef;
    char *key;
    char *sql;
    bool ok = true;

    *rows = 0;
    if (d == NULL)
        return true;
    qdef = pg_qualified(c, d->schema, d->name);
    key = pg_ident(c, t->key_column);
    sql = xasprintf("SELECT count(*) FROM ONLY %s WHERE %s >= $1::%s AND %s < $2::%s", qdef, key,
                    catalog_key_sql_type(t->key_kind), key, catalog_key_sql_type(t->key_kind));
    for (size_t i = 0; i < plan->npieces && ok; i++)
    {
        const char *params[2] = {plan->pieces[i].lower_text, plan->pieces[i].upper_text};
        PGresult *r;

        ok = pg_query(c, sql, 2, params, &r, err);
        if (!ok)
        {
            drop_generic_prefix(err);
            err_prefix(err, "could not count the rows of window %s in the DEFAULT partition %s.%s",
                       plan->name, d->schema, d->name);
            if (strcmp(err->sqlstate, "42501") == 0)
                err_hint(err, "v7fill needs SELECT on the DEFAULT partition to check it for rows "
                              "of new windows.");
            break;
        }
        *rows += strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
    }
    free(sql);
    free(key);
    free(qdef);
    return ok;
}

typedef enum NameState
{
    NAME_FREE,
    NAME_PARTITION_OF_TARGET,
    NAME_TAKEN,
} NameState;

static bool
check_name(PgConn *c, const TargetTable *t, const char *name, NameState *state, Err *err)
{
    const char *params[2] = {t->schema, name};
    PGresult *r;

    *state = NAME_FREE;
    if (!pg_query(c, q_relation_by_name, 2, params, &r, err))
        return false;
    if (PQntuples(r) == 0)
    {
        PQclear(r);
        return true;
    }
    if (PQgetvalue(r, 0, 1)[0] == 't' &&
        strtoul(PQgetvalue(r, 0, 2), NULL, 10) == (unsigned long) t->oid)
    {
        *state = NAME_PARTITION_OF_TARGET;
        PQclear(r);
        return true;
    }
    *state = NAME_TAKEN;
    if (PQgetvalue(r, 0, 1)[0] == 't')
    {
        err_set(err, EC_CONFIG, "%s.%s already exists as a partition of %s, not of %s.%s",
                t->schema, name, PQgetvalue(r, 0, 3), t->schema, t->name);
    }
    else
    {
        char kind = PQgetvalue(r, 0, 0)[0];
        err_set(err, EC_CONFIG, "a %s named %s.%s already exists and is not a partition of %s.%s",
                kind == 'r'   ? "table"
                : kind == 'v' ? "view"
                : kind == 'i' ? "index"
                : kind == 'S' ? "sequence"
                : kind == 'p' ? "partitioned table"
                              : "relation",
                t->schema, name, t->schema, t->name);
    }
    err_detail(err, "v7fill wanted that name for a new partition.  Nothing was created for this "
                    "window.");
    err_hint(err, "Rename or drop it, or pick other names with --name-pattern.");
    PQclear(r);
    return true;
}

/* Whole-window names that belong to something else are an error before any
 * window is created.  A partition of the target with the name may be a
 * concurrent v7fill's work: that is settled under the lock. */
static bool
preflight_names(PgConn *c, const TargetTable *t, const WindowPlan *plans, size_t n, Err *err)
{
    for (size_t i = 0; i < n; i++)
    {
        NameState st;

        if (plans[i].npieces == 0 || plans[i].partial)
            continue;
        if (!check_name(c, t, plans[i].name, &st, err))
            return false;
        if (st == NAME_TAKEN)
            return false;
    }
    return true;
}

static void
add_hint(Err *err, StmtKind kind, const TargetTable *t)
{
    bool denied = strcmp(err->sqlstate, "42501") == 0;

    if (strcmp(err->sqlstate, "55P03") == 0)
    {
        err_hint(err, "Another session holds a lock that conflicts with creating a partition "
                      "of %s.%s: an ALTER TABLE, VACUUM FULL or CREATE INDEX on it, a "
                      "transaction using its DEFAULT partition, or one writing a table that "
                      "references it or that its foreign keys reference.  Retry later or "
                      "raise --lock-timeout.",
                 t->schema, t->name);
        return;
    }
    if (!denied && strcmp(err->sqlstate, "42P07") == 0)
    {
        err_hint(err, "A relation with that name appeared meanwhile; run again.");
        return;
    }
    if (!denied && t->distributed)
    {
        err_hint(err, "Citus refused this step on the distributed table %s.%s; nothing of the "
                      "partition was kept (its transaction rolled back).  Check that every worker "
                      "is up (SELECT * FROM citus_check_cluster_node_health()), see "
                      "docs/scaling.md, and run again.",
                 t->schema, t->name);
        return;
    }
    if (!denied)
        return;
    switch (kind)
    {
        case STMT_CREATE:
            err_hint(err, "The role needs CREATE on schema %s%s%s (GRANT CREATE ON SCHEMA ... TO "
                          "role).",
                     t->schema, t->tablespace ? " and on tablespace " : "",
                     t->tablespace ? t->tablespace : "");
            break;
        case STMT_OWNER:
            err_hint(err, "New partitions are given to the owner of %s.%s (%s): run v7fill as that "
                          "role or as a member of it.",
                     t->schema, t->name, t->owner);
            break;
        case STMT_GRANT:
            err_hint(err, "The parent's privileges are copied to new partitions; the role must be "
                          "allowed to grant them (be %s or a member of it).",
                     t->owner);
            break;
        case STMT_MOVE:
            err_hint(err, "Moving rows out of the DEFAULT partition needs SELECT and DELETE on it "
                          "and INSERT on the new partition.");
            break;
        case STMT_TEMPLATE:
            err_hint(err, "pg_partman's inherit_template_properties() copies its template table's "
                          "properties; the role needs what pg_partman's maintenance has.");
            break;
        case STMT_ATTACH:
        case STMT_CHECK:
        case STMT_DROP_CHECK:
            err_hint(err, "ATTACH PARTITION needs ownership of %s.%s: run v7fill as %s or as a "
                          "member of that role.",
                     t->schema, t->name, t->owner);
            break;
    }
}

/* Re-read the partition list if anything changed since we last read it. */
static bool
recheck_partitions(PgConn *c, TargetTable *t, Err *err)
{
    CatalogStamp now;

    if (t->stamp_valid)
    {
        if (!catalog_read_stamp(c, t, &now, err))
            return false;
        if (now.count == t->stamp.count && now.oid_sum == t->stamp.oid_sum &&
            now.xmin_sum == t->stamp.xmin_sum)
            return true;
    }
    return catalog_refresh_partitions(c, t, err);
}

/* Is this error worth another attempt of the whole window transaction? */
static bool
retryable(const Err *err, bool has_default)
{
    return strcmp(err->sqlstate, "55P03") == 0 || strcmp(err->sqlstate, "40P01") == 0 ||
           strcmp(err->sqlstate, "40001") == 0 ||
           /* the name was taken meanwhile by someone not using the advisory lock:
            * the next attempt's re-check says by what */
           strcmp(err->sqlstate, "42P07") == 0 ||
           /* a row for the window arrived in the DEFAULT partition between our
            * count and ATTACH's scan: the next attempt counts it */
           (has_default && strcmp(err->sqlstate, "23514") == 0);
}

typedef enum Outcome
{
    OUT_DONE,    /* created (or found covered) */
    OUT_ISSUE,   /* DEFAULT rows, stop */
    OUT_FAILED,  /* err set */
    OUT_RETRY,   /* err set, worth retrying */
} Outcome;

static Outcome
try_window(PgConn *c, TargetTable *t, const Planner *pl, const Window *w,
           const EnsureOptions *o, EnsureResult *res, Err *err)
{
    StrList begin = {0};
    WindowPlan plan;
    bool have_plan = false;
    int64_t default_rows = 0;
    Outcome outcome = OUT_FAILED;
    bool in_tx = false;
    CatalogStamp expected;
    Partition *added = NULL;
    size_t nadded = 0;

    begin_statements(o, t, &begin);
    for (size_t i = 0; i < begin.n; i++)
    {
        ddl_append(o, begin.v[i]);
        if (!pg_exec(c, begin.v[i], err))
        {
            drop_generic_prefix(err);
            err_prefix(err, "could not start the transaction for %s.%s", t->schema, t->name);
            goto out;
        }
        in_tx = true;
    }
    if (!recheck_partitions(c, t, err))
        goto out;
    if (!plan_window(pl, w, &plan, err))
        goto out;
    have_plan = true;
    if (plan.npieces == 0)
    {
        /* Someone (another v7fill, a person) was faster. */
        ddl_append(o, "COMMIT");
        if (!pg_exec(c, "COMMIT", err))
            goto out;
        in_tx = false;
        res->skipped++;
        report(o, WINDOW_SKIPPED, &plan, 0);
        outcome = OUT_DONE;
        goto out;
    }
    if (pending_overlap(t, &plan) != NULL)
    {
        ddl_append(o, "ROLLBACK");
        pg_rollback_quietly(c);
        in_tx = false;
        pending_issue(c, res, t, &plan, pending_overlap(t, &plan));
        report_held(o, WINDOW_ISSUE, &plan, 0, pending_overlap(t, &plan)->name);
        outcome = OUT_ISSUE;
        goto out;
    }
    for (size_t i = 0; i < plan.npieces; i++)
    {
        NameState st;
        int suffix = 0;

        for (;;)
        {
            if (!check_name(c, t, plan.pieces[i].name, &st, err))
                goto out;
            if (st == NAME_FREE)
                break;
            if (!plan.partial)
            {
                if (st == NAME_PARTITION_OF_TARGET)
                {
                    err_set(err, EC_CONFIG, "partition %s.%s of %s.%s has the name of window %s "
                                            "but other bounds",
                            t->schema, plan.name, t->schema, t->name, plan.name);
                    err_hint(err, "Rename that partition, or pick other names with "
                                  "--name-pattern.");
                }
                goto out;
            }
            /* A gap piece whose name a non-partition holds: a number past every
             * name the plan can have used. */
            if (++suffix > MAX_PIECE_SUFFIX ||
                !piece_suffix_name(plan.name, (int) (plan.npieces + t->npartitions) + suffix,
                                   plan.pieces[i].name, sizeof plan.pieces[i].name, err))
                goto out;
        }
    }
    if (t->has_default)
    {
        if (o->move_from_default)
        {
            /* Writers of the DEFAULT partition wait from here on, so exactly the
             * rows counted are moved; ATTACH needs ACCESS EXCLUSIVE on it anyway. */
            const Partition *d = default_partition(t);
            char *qdef = pg_qualified(c, d->schema, d->name);
            char *sql = xasprintf("LOCK TABLE ONLY %s IN SHARE ROW EXCLUSIVE MODE", qdef);

            free(qdef);
            ddl_append(o, sql);
            if (!pg_exec(c, sql, err))
            {
                free(sql);
                drop_generic_prefix(err);
                err_prefix(err, "could not lock the DEFAULT partition of %s.%s", t->schema,
                           t->name);
                add_hint(err, STMT_MOVE, t);
                goto out;
            }
            free(sql);
        }
        if (!count_default_rows(c, t, &plan, &default_rows, err))
            goto out;
        if (default_rows > 0 && !o->move_from_default)
        {
            ddl_append(o, "ROLLBACK");
            pg_rollback_quietly(c);
            in_tx = false;
            default_issue(res, t, &plan, default_rows);
            report(o, WINDOW_ISSUE, &plan, default_rows);
            outcome = OUT_ISSUE;
            goto out;
        }
    }
    expected = t->stamp;
    added = xcalloc(plan.npieces, sizeof *added);
    for (size_t i = 0; i < plan.npieces; i++)
    {
        WindowPiece *pc = &plan.pieces[i];
        PieceSql ps;
        char *qnew;
        const char *params[1];
        PGresult *r;

        piece_statements(c, t, pc, default_rows > 0, o, &ps);
        for (size_t k = 0; k < ps.sql.n; k++)
        {
            ddl_append(o, ps.sql.v[k]);
            if (!pg_exec(c, ps.sql.v[k], err))
            {
                char a[48], b[48];
                StmtKind kind = ps.kinds[k < 64 ? k : 63];

                civil_format_instant(pc->lower_us, a, sizeof a);
                civil_format_instant(pc->upper_us, b, sizeof b);
                drop_generic_prefix(err);
                err_prefix(err, "could not create partition %s.%s for [%s, %s)", t->schema,
                           pc->name, a, b);
                add_hint(err, kind, t);
                strlist_free(&ps.sql);
                goto out;
            }
        }
        strlist_free(&ps.sql);

        qnew = pg_qualified(c, t->schema, pc->name);
        params[0] = qnew;
        if (!pg_query(c, q_new_partition, 1, params, &r, err))
        {
            free(qnew);
            goto out;
        }
        free(qnew);
        added[nadded].oid = (unsigned int) strtoul(PQgetvalue(r, 0, 0), NULL, 10);
        expected.count++;
        expected.oid_sum += (int64_t) added[nadded].oid;
        expected.xmin_sum += strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        PQclear(r);
        added[nadded].schema = xstrdup(t->schema);
        added[nadded].name = xstrdup(pc->name);
        added[nadded].lower_us = pc->lower_us;
        added[nadded].upper_us = pc->upper_us;
        added[nadded].lower_text = xstrdup(pc->lower_text);
        added[nadded].upper_text = xstrdup(pc->upper_text);
        added[nadded].bound_expr = NULL;
        added[nadded].reltuples = 0;
        nadded++;
    }
    {
        CatalogStamp now;
        bool same;

        if (!catalog_read_stamp(c, t, &now, err))
            goto out;
        same = t->stamp_valid && now.count == expected.count &&
               now.oid_sum == expected.oid_sum && now.xmin_sum == expected.xmin_sum;
        ddl_append(o, "COMMIT");
        if (!pg_exec(c, "COMMIT", err))
        {
            err_prefix(err, "could not commit partition %s.%s", t->schema, plan.pieces[0].name);
            goto out;
        }
        in_tx = false;
        for (size_t i = 0; i < nadded; i++)
        {
            char *lo = added[i].lower_text ? pg_literal(c, added[i].lower_text) : NULL;
            char *hi = added[i].upper_text ? pg_literal(c, added[i].upper_text) : NULL;

            added[i].bound_expr = xasprintf("FOR VALUES FROM (%s) TO (%s)", lo, hi);
            free(lo);
            free(hi);
            catalog_add_partition(t, &added[i]);
        }
        /* Our own additions are in the list now; anything else that changed
         * makes the next window re-read it. */
        t->stamp = now;
        t->stamp_valid = same;
    }
    count_done(res, &plan);
    report(o, plan.partial ? WINDOW_GAPS_FILLED : WINDOW_CREATED, &plan, default_rows);
    outcome = OUT_DONE;

out:
    if (outcome == OUT_FAILED && in_tx)
    {
        ddl_append(o, "ROLLBACK");
        pg_rollback_quietly(c);
        if (retryable(err, t->has_default))
            outcome = OUT_RETRY;
    }
    else if (outcome == OUT_FAILED && retryable(err, t->has_default))
        outcome = OUT_RETRY;
    if (added)
    {
        for (size_t i = 0; i < plan.npieces; i++)
        {
            free(added[i].schema);
            free(added[i].name);
            free(added[i].lower_text);
            free(added[i].upper_text);
            free(added[i].bound_expr);
        }
        free(added);
    }
    if (have_plan)
    {
        for (size_t i = 0; i < plan.npieces; i++)
            piece_clear(&plan.pieces[i]);
        free(plan.pieces);
    }
    strlist_free(&begin);
    return outcome;
}

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The 55P03 hint when other tables reference the parent: ATTACH takes SHARE
 * ROW EXCLUSIVE on each of them, so a transaction writing one holds it up,
 * and their writers queue behind the waiting ATTACH.  Otherwise add_hint's
 * stays.  Run after the window's transaction is rolled back. */
static void
referencing_lock_hint(PgConn *c, const TargetTable *t, Err *err)
{
    IncomingFk *fks = NULL;
    size_t n = 0;
    char refs[320];
    Err ignored = {0};

    if (catalog_incoming_fks(c, t->oid, &fks, &n, &ignored) && n > 0)
    {
        catalog_incoming_fks_describe(fks, n, refs, sizeof refs);
        err_hint(err, "ATTACH PARTITION takes SHARE ROW EXCLUSIVE on the tables that reference "
                      "%s.%s, %s: a transaction writing one holds it up, and their writers wait "
                      "behind it meanwhile (DDL on the parent would too).  Retry when they are "
                      "quiet, or use a short --lock-timeout with more --lock-retries.",
                 t->schema, t->name, refs);
    }
    catalog_incoming_fks_free(fks, n);
}

/* One window, retried on lock timeouts; false = error in err. */
static bool
ensure_window(PgConn *c, TargetTable *t, const Planner *pl, const Window *w,
              const EnsureOptions *o, EnsureResult *res, bool *stop, Err *err)
{
    for (int attempt = 0;; attempt++)
    {
        Outcome out = try_window(c, t, pl, w, o, res, err);
        long wait;

        if (out == OUT_DONE)
            return true;
        if (out == OUT_ISSUE)
        {
            *stop = true;
            return true;
        }
        if (out == OUT_FAILED || attempt >= o->lock_retries || pg_is_broken(c))
        {
            if (out == OUT_RETRY && strcmp(err->sqlstate, "55P03") == 0)
            {
                char msg[sizeof err->msg];

                memcpy(msg, err->msg, sizeof msg);
                err_detail(err, "%s", msg);
                (void) snprintf(err->msg, sizeof err->msg,
                                "could not get the locks to create a partition of %s.%s within "
                                "%d ms, %d attempt%s",
                                t->schema, t->name, o->lock_timeout_ms, attempt + 1,
                                attempt == 0 ? "" : "s");
                referencing_lock_hint(c, t, err);
            }
            return false;
        }
        /* Back off with a little jitter so that two waiting processes do not
         * collide again in lock step. */
        wait = 100L << (attempt < 5 ? attempt : 5);
        if (wait > 2000)
            wait = 2000;
        wait += (long) (getpid() % 50);
        log_detail("%s (SQLSTATE %s); retrying in %ld ms", err->msg, err->sqlstate, wait);
        sleep_ms(wait);
    }
}

/* A dry run: the statements ensure would run, against the list as read. */
static bool
dry_window(PgConn *c, TargetTable *t, WindowPlan *plan, const EnsureOptions *o, EnsureResult *res,
           bool *stop, Err *err)
{
    int64_t default_rows = 0;
    StrList begin = {0};
    char label[200];

    if (plan->npieces == 0)
    {
        res->skipped++;
        report(o, WINDOW_SKIPPED, plan, 0);
        return true;
    }
    window_label(plan, label, sizeof label);
    if (pending_overlap(t, plan) != NULL)
    {
        char *note = xasprintf("window %s: not created, a detach-pending partition holds it",
                               label);
        ddl_comment(o, note);
        free(note);
        pending_issue(c, res, t, plan, pending_overlap(t, plan));
        report_held(o, WINDOW_ISSUE, plan, 0, pending_overlap(t, plan)->name);
        *stop = true;
        return true;
    }
    if (t->has_default)
    {
        /* Reading the DEFAULT partition queues behind ACCESS EXCLUSIVE holders:
         * bound the wait as a real run would. */
        char *set = xasprintf("SET LOCAL lock_timeout = '%dms'", o->lock_timeout_ms);
        bool ok = pg_exec(c, "BEGIN", err) && pg_exec(c, set, err) &&
                  count_default_rows(c, t, plan, &default_rows, err);

        free(set);
        pg_rollback_quietly(c);
        if (!ok)
            return false;
    }
    if (default_rows > 0 && !o->move_from_default)
    {
        char *note = xasprintf("window %s: not created, the DEFAULT partition holds %" PRId64
                               " of its rows (--move-from-default)",
                               label, default_rows);
        ddl_comment(o, note);
        free(note);
        default_issue(res, t, plan, default_rows);
        report(o, WINDOW_ISSUE, plan, default_rows);
        *stop = true;
        return true;
    }
    {
        char *note = xasprintf("window %s: %s", label,
                               plan->partial ? "fill the gaps" : "create");
        ddl_comment(o, note);
        free(note);
    }
    begin_statements(o, t, &begin);
    for (size_t i = 0; i < begin.n; i++)
        ddl_append(o, begin.v[i]);
    strlist_free(&begin);
    if (t->has_default && default_rows > 0)
    {
        const Partition *d = default_partition(t);
        char *qdef = pg_qualified(c, d->schema, d->name);
        char *sql = xasprintf("LOCK TABLE ONLY %s IN SHARE ROW EXCLUSIVE MODE", qdef);
        ddl_append(o, sql);
        free(sql);
        free(qdef);
    }
    for (size_t i = 0; i < plan->npieces; i++)
    {
        PieceSql ps;
        Partition p;

        piece_statements(c, t, &plan->pieces[i], default_rows > 0, o, &ps);
        for (size_t k = 0; k < ps.sql.n; k++)
            ddl_append(o, ps.sql.v[k]);
        strlist_free(&ps.sql);

        /* Planned partitions join the list so that later calls plan them once. */
        memset(&p, 0, sizeof p);
        p.schema = xstrdup(t->schema);
        p.name = xstrdup(plan->pieces[i].name);
        p.lower_us = plan->pieces[i].lower_us;
        p.upper_us = plan->pieces[i].upper_us;
        p.lower_text = xstrdup(plan->pieces[i].lower_text);
        p.upper_text = xstrdup(plan->pieces[i].upper_text);
        p.bound_expr = xstrdup("(planned)");
        p.reltuples = 0;
        p.planned = true;
        catalog_add_partition(t, &p);
    }
    ddl_append(o, "COMMIT");
    t->stamp_valid = false;
    count_done(res, plan);
    report(o, plan->partial ? WINDOW_GAPS_FILLED : WINDOW_CREATED, plan, default_rows);
    return true;
}

/*
 * pg_partman creates the partitions of the tables in its part_config itself,
 * named <table>_p<date>; a partition of another name or other bounds in its
 * way makes run_maintenance() fail for every partition set it manages.  So
 * for such a table v7fill creates what pg_partman would: its granularity,
 * names, zone and template (partman.c).  A configuration v7fill cannot
 * follow is refused, but only when a window needs creating: reading and
 * covered ranges stay fine.
 */
typedef struct Follow
{
    PartmanFollow pf;
    Err refusal; /* EC_OK, or why v7fill creates nothing for this table */
} Follow;

static bool
follow_partman(PgConn *c, const TargetTable *t, EnsureOptions *o, Follow *f, Err *err)
{
    memset(f, 0, sizeof *f);
    if (!partman_follow_read(c, t, o->window_tz ? o->window_tz : o->window_tz_given ? "UTC" : NULL,
                             &f->pf, &f->refusal))
    {
        if (f->refusal.code == EC_CONFIG)
            return true;
        *err = f->refusal;
        return false;
    }
    if (!f->pf.follows)
        return true;
    if (o->name_pattern && strcmp(o->name_pattern, f->pf.pattern) != 0)
    {
        err_set(err, EC_USAGE, "pg_partman manages %s.%s: its partitions are named as pg_partman "
                               "names them, not by --name-pattern",
                t->schema, t->name);
        err_hint(err, "Leave out --name-pattern.");
        return false;
    }
    if (o->granularity != GRAN_AUTO && o->granularity != f->pf.g)
    {
        err_set(err, EC_USAGE, "pg_partman manages %s.%s with %s windows, not %s", t->schema,
                t->name, granularity_name(f->pf.g), granularity_name(o->granularity));
        err_hint(err, "Leave out --granularity, or give --granularity %s.",
                 granularity_name(f->pf.g));
        return false;
    }
    o->granularity = f->pf.g;
    o->name_pattern = f->pf.pattern;
    o->window_tz = f->pf.zone[0] ? f->pf.zone : NULL;
    o->window_tz_given = true;
    o->partman_schema = f->pf.schema;
    o->partman_parent = f->pf.parent;
    o->partman_template = f->pf.has_template;
    return true;
}

static bool
refuse_partman(const Follow *f, const WindowPlan *plans, size_t n, Err *err)
{
    size_t i;

    if (f->refusal.code == EC_OK)
        return true;
    for (i = 0; i < n && plans[i].npieces == 0; i++)
        ;
    if (i == n)
        return true;
    *err = f->refusal;
    return false;
}

/* Planning failed: a window is missing (covered ones plan fine), and for a
 * pg_partman set v7fill cannot follow that refusal is the one to give, not
 * what planning by v7fill's own rules ran into.  Returns false. */
static bool
refuse_instead(const Follow *f, Err *err)
{
    if (f->refusal.code != EC_OK)
        *err = f->refusal;
    return false;
}

static bool
run_plans(PgConn *c, TargetTable *t, const Planner *pl, const Follow *f, WindowPlan *plans,
          size_t n, const EnsureOptions *o, EnsureResult *res, Err *err)
{
    bool stop = false;

    if (!refuse_partman(f, plans, n, err) || !preflight_names(c, t, plans, n, err))
        return false;
    for (size_t i = 0; i < n && !stop; i++)
    {
        if (o->dry_run)
        {
            if (!dry_window(c, t, &plans[i], o, res, &stop, err))
                return false;
            continue;
        }
        if (plans[i].npieces == 0)
        {
            res->skipped++;
            report(o, WINDOW_SKIPPED, &plans[i], 0);
            continue;
        }
        if (!ensure_window(c, t, pl, &plans[i].window, o, res, &stop, err))
            return false;
    }
    return true;
}

/* Each window commits on its own; a caller's open transaction would be
 * committed (or rolled back) along with it. */
static bool
check_no_transaction(PgConn *c, Err *err)
{
    if (PQtransactionStatus(pg_raw(c)) == PQTRANS_IDLE)
        return true;
    return err_set(err, EC_INTERNAL, "partitions can only be created outside a transaction");
}

static void
options_normalise(const EnsureOptions *in, EnsureOptions *out)
{
    *out = *in;
    if (out->lock_timeout_ms <= 0)
        out->lock_timeout_ms = 5000;
    if (out->lock_retries < 0)
        out->lock_retries = 0;
}

bool
partitions_ensure_range(PgConn *c, TargetTable *t, int64_t from_us, int64_t to_us,
                        const EnsureOptions *opts, EnsureResult *res, Err *err)
{
    EnsureOptions o;
    Planner pl;
    Follow f;
    WindowPlan *plans = NULL;
    size_t n = 0;
    bool ok;

    options_normalise(opts, &o);
    if (!check_no_transaction(c, err) || !catalog_refresh_partitions(c, t, err) ||
        !follow_partman(c, t, &o, &f, err))
        return false;
    if (!planner_init(&pl, t, &o, err))
        return false;
    ok = (plan_range(&pl, from_us, to_us, &plans, &n, err) || refuse_instead(&f, err)) &&
         run_plans(c, t, &pl, &f, plans, n, &o, res, err);
    window_plans_free(plans, n);
    planner_free(&pl);
    return ok;
}

bool
partitions_ensure_times(PgConn *c, TargetTable *t, const int64_t *times, size_t n,
                        const EnsureOptions *opts, EnsureResult *res, Err *err)
{
    EnsureOptions o;
    Planner pl;
    Follow f;
    WindowPlan *plans = NULL;
    size_t np = 0;
    size_t i;
    bool ok;

    /* A list that may hold a dry run's planned partitions (or that changed
     * under us) is read again before a real run trusts it. */
    if (!opts->dry_run && !t->stamp_valid &&
        (!check_no_transaction(c, err) || !catalog_refresh_partitions(c, t, err)))
        return false;
    /* The common case, once per batch: everything is covered.  Times come in
     * runs: the partition of the time before is tried first. */
    {
        const Partition *last = NULL;

        for (i = 0; i < n; i++)
        {
            if (last && times[i] >= last->lower_us && times[i] < last->upper_us)
                continue;
            if ((last = catalog_partition_for(t, times[i])) == NULL)
                break;
        }
    }
    if (i == n)
        return true;

    options_normalise(opts, &o);
    if (!check_no_transaction(c, err) || !follow_partman(c, t, &o, &f, err))
        return false;
    if (!planner_init(&pl, t, &o, err))
        return false;
    ok = (plan_times(&pl, times + i, n - i, &plans, &np, err) || refuse_instead(&f, err)) &&
         run_plans(c, t, &pl, &f, plans, np, &o, res, err);
    window_plans_free(plans, np);
    planner_free(&pl);
    return ok;
}
