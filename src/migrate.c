/*
 * migrate.c: `v7fill migrate`, the setup and the copy + capture of a
 * migration, and its status (see migrate.h).
 *
 *   describe the source (migrate_ddl.c); a stored migration of the same
 *     --into must be of the same table, key and time column
 *   --dry-run: the target's and the map's DDL, the publication and slot, the
 *     rows and their time range, the rows that would be rejected; nothing made
 *   the target: created in one transaction (or an existing one checked)
 *   the publication v7fill_<into> FOR TABLE the source (checked when there:
 *     it must hold the source and, in the same database, not the target or
 *     its map)
 *   the state row in v7fill.migration (phase copy)
 *   stream_run: the slot with its exported snapshot, the copy under it, the
 *     changes since, keyed through the map; phase follow once the stream's
 *     copy is finished; --follow: the changes until interrupted
 * Each step finds what an earlier (killed) run made and goes on from there.
 */
#include "v7fill/migrate.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "v7fill/citus.h"
#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/state.h"
#include "v7fill/migrate_child.h"
#include "v7fill/migrate_childkeeper.h"
#include "v7fill/migrate_childtable.h"
#include "v7fill/migrate_childswitch.h"
#include "v7fill/migrate_ddl.h"
#include "v7fill/migrate_state.h"
#include "v7fill/migrate_switch.h"
#include "v7fill/migrate_verify.h"
#include "v7fill/stream_state.h"
#include "v7fill/timeparse.h"

void
migrate_result_free(MigrateResult *r)
{
    if (r == NULL)
        return;
    migrate_spec_free(&r->spec);
    import_stats_free(&r->copy.rows);
    import_stats_free(&r->follow.rows);
    buf_free(&r->rejects);
    buf_free(&r->notes);
    buf_free(&r->plan);
    free(r->children);
    r->children = NULL;
}

int
migrate_name_cut(const char *name, int max)
{
    int n = (int) strnlen(name, (size_t) max + 1);

    if (n <= max)
        return n;
    n = max;
    while (n > 0 && ((unsigned char) name[n] & 0xC0) == 0x80)
        n--; /* name[n] continues a character: cut before its first byte */
    return n;
}

void
migrate_legacy_name(const char *table, char out[64])
{
    (void) snprintf(out, 64, "%.*s_legacy", migrate_name_cut(table, 56), table);
}

void
migrate_object_name(const char *into_schema, const char *into_table, char out[64])
{
    char name[256];
    size_t n = 0;
    bool changed = false;

    n = (size_t) snprintf(name, sizeof name, "v7fill_");
    for (const char *p = into_table; *p && n < sizeof name - 1; p++)
    {
        unsigned char ch = (unsigned char) *p;

        if (isalnum(ch) && ch < 128)
            name[n++] = (char) tolower(ch);
        else
            name[n++] = '_';
        changed = changed || name[n - 1] != (char) ch;
    }
    name[n] = '\0';
    if (changed || n > 63)
    {
        char full[160];
        int len = snprintf(full, sizeof full, "%s.%s", into_schema, into_table);

        (void) snprintf(name + (n > 54 ? 54 : n), sizeof name - 54, "_%08x",
                        (unsigned) XXH3_64bits(full, (size_t) len));
    }
    (void) snprintf(out, 64, "%s", name);
}

/* "[SCHEMA.]TABLE" into its parts; an unqualified name takes dflt ("" when none). */
static bool
split_name(const char *opt, const char *text, const char *dflt, char schema[64], char table[64],
           Err *err)
{
    const char *dot = strchr(text, '.');
    const char *name = dot ? dot + 1 : text;
    size_t slen = dot ? (size_t) (dot - text) : strlen(dflt);

    if ((dot && slen == 0) || *name == '\0' || strchr(name, '.') || slen > 63 ||
        strlen(name) > 63)
        return err_set(err, EC_USAGE, "%s takes [SCHEMA.]TABLE, got \"%s\"", opt, text);
    (void) snprintf(schema, 64, "%.*s", (int) slen, dot ? text : dflt);
    (void) snprintf(table, 64, "%s", name);
    return true;
}

/* The spec this run stands for, from the options and the source's description. */
static bool
spec_from_options(const MigrateOptions *o, MigrateSpec *s, Err *err)
{
    memset(s, 0, sizeof *s);
    if (!split_name("--from", o->from, "public", s->from_schema, s->from_table, err) ||
        !split_name("--into", o->into, s->from_schema, s->into_schema, s->into_table, err))
        return false;
    if (strlen(o->key) > 63 || strlen(o->time_column) > 63)
        return err_set(err, EC_USAGE, "--key and --time-column take a column name");
    (void) snprintf(s->source_conninfo, sizeof s->source_conninfo, "%s",
                    o->source_conninfo ? o->source_conninfo : "");
    (void) snprintf(s->key, sizeof s->key, "%s", o->key);
    (void) snprintf(s->time_column, sizeof s->time_column, "%s", o->time_column);
    if (strlen(s->into_table) > 63 - strlen("_id_map"))
        return err_set(err, EC_USAGE, "--into %s: the name is too long for its map (%s_id_map)",
                       o->into, s->into_table);
    (void) snprintf(s->map_table, sizeof s->map_table, "%s_id_map", s->into_table);
    migrate_object_name(s->into_schema, s->into_table, s->publication);
    (void) snprintf(s->slot, sizeof s->slot, "%s", s->publication);
    s->child_mode = o->child_mode;
    s->phase = MIGRATE_PHASE_COPY;
    if (o->common.window_tz && strcmp(o->common.window_tz, "UTC") != 0)
    {
        TimeParser *zone = NULL;

        /* A zone the system does not know is refused before it is stored. */
        if (strlen(o->common.window_tz) >= sizeof s->window_tz)
            return err_set(err, EC_USAGE, "--window-tz: a zone name of %zu bytes is too long",
                           strlen(o->common.window_tz));
        if (!time_parser_new_window(o->common.window_tz, &zone, err))
        {
            err_prefix(err, "--window-tz");
            return false;
        }
        time_parser_free(zone);
        (void) snprintf(s->window_tz, sizeof s->window_tz, "%s", o->common.window_tz);
    }
    if (o->nchildren)
    {
        s->children = xcalloc(o->nchildren, sizeof *s->children);
        memcpy(s->children, o->children, o->nchildren * sizeof *s->children);
        s->nchildren = o->nchildren;
    }
    return true;
}

/* A stored migration into the same table must be of the same source. */
static bool
same_migration(const MigrateSpec *stored, const MigrateSpec *now, Err *err)
{
    if (strcmp(stored->from_schema, now->from_schema) == 0 &&
        strcmp(stored->from_table, now->from_table) == 0 && strcmp(stored->key, now->key) == 0 &&
        strcmp(stored->time_column, now->time_column) == 0)
        return true;
    err_set(err, EC_CONFIG,
            "%s.%s is the target of another migration: from %s.%s (key %s, time column %s)",
            now->into_schema, now->into_table, stored->from_schema, stored->from_table,
            stored->key, stored->time_column);
    err_hint(err, "Choose another --into, or run this migration's later steps with "
                  "`v7fill migrate --into %s.%s --status`.",
             now->into_schema, now->into_table);
    return false;
}

/* The windows' zone is the first run's: a rerun without --window-tz keeps it.
 * One naming another zone changes it while the copy has not finished (a first
 * run that stopped because the target's windows are another zone's is run
 * again with that zone), and is refused after: the windows made since would
 * not meet the others. */
static bool
same_window_tz(const MigrateOptions *o, const MigrateSpec *stored, MigrateSpec *now, Err *err)
{
    const char *was = stored->window_tz[0] ? stored->window_tz : "UTC";

    if (o->common.window_tz == NULL || strcmp(stored->window_tz, now->window_tz) == 0)
    {
        (void) snprintf(now->window_tz, sizeof now->window_tz, "%s", stored->window_tz);
        return true;
    }
    if (stored->phase <= MIGRATE_PHASE_COPY)
    {
        log_info("the windows of %s.%s start at midnight in %s from now on, not in %s (the copy "
                 "has not finished)",
                 now->into_schema, now->into_table, o->common.window_tz, was);
        return true;
    }
    err_set(err, EC_USAGE,
            "--window-tz %s: the migration into %s.%s makes its windows at midnight in %s",
            o->common.window_tz, now->into_schema, now->into_table, was);
    err_detail(err, "Its copy has finished: windows of another zone would not meet its own.");
    err_hint(err, "Leave --window-tz out: later runs use the zone of the first.");
    return false;
}

static bool
table_exists(PgConn *c, const char *schema, const char *table, bool *out, Err *err)
{
    const char *params[2] = {schema, table};
    PGresult *res;

    if (!pg_query(c,
                  "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = "
                  "c.relnamespace WHERE n.nspname = $1 AND c.relname = $2)",
                  2, params, &res, err))
        return false;
    *out = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return true;
}

/* 'schema.table' quoted as a regclass literal (caller frees). */
static char *
regclass_literal(PgConn *c, const char *schema, const char *table)
{
    char *q = pg_qualified(c, schema, table);
    char *lit = pg_literal(c, q);

    free(q);
    return lit;
}

static bool same_database(PgConn *a, PgConn *b, bool *out, Err *err);

/* The target on a Citus coordinator (docs/scaling.md). */
typedef struct CitusTarget
{
    bool citus;       /* the citus extension is installed in the target's database */
    bool distributed; /* --into exists and is hash-distributed on id */
} CitusTarget;

/*
 * A Citus target: one hash-distributed on id works as it is (its map is
 * distributed on legacy_id by the copy, without UNIQUE on id); one migrate
 * creates is left local, as import and stream leave a local target.  What
 * Citus cannot do with a distributed one is refused here, before anything is
 * made: another distribution, and the children's triggers on the map and
 * foreign keys to the target (a local table cannot reference a distributed
 * one, and Citus runs no triggers on distributed tables).
 */
static bool
citus_target(PgConn *target, PgConn *src, const MigrateSpec *s, CitusTarget *out, Err *err)
{
    TargetTable t;
    bool same_db = false, src_dist;
    const char *why = NULL;

    memset(out, 0, sizeof *out);
    if (!citus_is_distributed(src, s->from_schema, s->from_table, &src_dist, err))
        return false;
    if (src_dist)
    {
        err_set(err, EC_CONFIG,
                "the source %s.%s is a Citus table: its rows are written on the workers, so "
                "the slot on the coordinator would capture none of its changes",
                s->from_schema, s->from_table);
        err_hint(err, "migrate reads a local (or plain PostgreSQL) source; see "
                      "docs/scaling.md.");
        return false;
    }
    if (!citus_installed(target, &out->citus, err))
        return false;
    if (!out->citus)
        return true;
    if (!citus_table_of(target, s->into_schema, s->into_table, &t, err))
        return false;
    if (t.distributed && !(t.dist_method == 'h' && t.dist_column &&
                           strcmp(t.dist_column, "id") == 0))
    {
        if (t.dist_method == 'h' && t.dist_column)
            err_set(err, EC_CONFIG,
                    "--into %s.%s is hash-distributed on %s: migrate needs a local target or "
                    "one hash-distributed on id (Citus)",
                    s->into_schema, s->into_table, t.dist_column);
        else
            err_set(err, EC_CONFIG,
                    "--into %s.%s is a Citus table that is not hash-distributed (method '%c'): "
                    "migrate needs a local target or one hash-distributed on id",
                    s->into_schema, s->into_table, t.dist_method);
        err_hint(err, "Distribute it on id (as docs/scaling.md) or leave it local.");
        citus_table_clear(&t);
        return false;
    }
    out->distributed = t.distributed;
    citus_table_clear(&t);
    if (!out->distributed || s->nchildren == 0)
        return true;
    if (s->child_mode == MIGRATE_CHILD_MIGRATE)
        why = "--child-mode migrate makes each child's target reference the parent's (a "
              "foreign key to a distributed table from a local one, which Citus refuses) and "
              "a trigger on the parent's map, a distributed table (Citus runs no triggers on "
              "distributed tables)";
    else if (!same_database(target, src, &same_db, err))
        return false;
    else if (same_db)
        why = "in one database each child gets a trigger on the map, a distributed table "
              "(Citus runs no triggers on distributed tables), and a foreign key from the "
              "local child to the distributed target (which Citus refuses)";
    if (why == NULL)
        return true;
    err_set(err, EC_CONFIG, "--into %s.%s is a Citus distributed table, and %s", s->into_schema,
            s->into_table, why);
    err_hint(err, "With a distributed target migrate children in --child-mode expand from "
                  "another database (--source); or leave the target local. See docs/scaling.md.");
    return false;
}

/* Rows, time range, rows the pipeline will reject (NULL or pre-1970 time). */
static bool
plan_rows(PgConn *src, const MigrateSpec *s, Buf *out, Err *err)
{
    char *t = pg_qualified(src, s->from_schema, s->from_table);
    char *tc = pg_ident(src, s->time_column);
    char *sql = xasprintf("SELECT count(*), min(%s)::text, max(%s)::text, count(*) FILTER (WHERE "
                          "%s IS NULL), count(*) FILTER (WHERE %s < '1970-01-01'::date) FROM %s",
                          tc, tc, tc, tc, t);
    PGresult *res;
    bool ok = pg_query(src, sql, 0, NULL, &res, err);

    free(sql);
    free(tc);
    free(t);
    if (!ok)
        return false;
    buf_printf(out,
               "-- rows: %s, %s from %s to %s\n"
               "-- rows that would be rejected (kept in v7fill.stream_quarantine with the "
               "reason): %s with a NULL %s, %s before 1970-01-01\n",
               PQgetvalue(res, 0, 0), s->time_column,
               PQgetisnull(res, 0, 1) ? "-" : PQgetvalue(res, 0, 1),
               PQgetisnull(res, 0, 2) ? "-" : PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3),
               s->time_column, PQgetvalue(res, 0, 4));
    PQclear(res);
    return true;
}

static bool
dry_run(PgConn *target, PgConn *src, const MigrateSpec *s, const MigrateSource *d,
        bool target_exists, const CitusTarget *ct, Buf *out, Err *err)
{
    char *from = pg_qualified(src, s->from_schema, s->from_table);
    char *pub = pg_ident(src, s->publication);

    buf_printf(out, "-- migrate %s.%s (key %s %s, time column %s) into %s.%s\n", s->from_schema,
               s->from_table, s->key, d->key_type, s->time_column, s->into_schema, s->into_table);
    if (target_exists)
        buf_printf(out, "-- the target exists and has the columns it needs: used as it is%s\n",
                   ct->distributed ? " (a Citus table hash-distributed on id)" : "");
    else
        migrate_ddl_target(target, d, s->into_schema, s->into_table, out);
    if (!target_exists && ct->citus)
    {
        char *lit = regclass_literal(target, s->into_schema, s->into_table);

        buf_printf(out, "-- Citus: migrate creates the target as a local table on the "
                        "coordinator, as import and stream leave a local target; to distribute "
                        "it, run the DDL above, then, before the first run:\n-- SELECT "
                        "create_distributed_table(%s, 'id');\n",
                   lit);
        free(lit);
    }
    buf_printf(out, "-- windows: made as rows need them, each starting at midnight in %s%s\n",
               s->window_tz[0] ? s->window_tz : "UTC",
               s->window_tz[0] ? " (--window-tz)" : "");
    buf_puts(out, "-- the map (created at setup; never dropped by v7fill):\n");
    migrate_ddl_map(target, d, s->into_schema, s->map_table, !ct->distributed, out);
    if (ct->distributed)
    {
        char *lit = regclass_literal(target, s->into_schema, s->map_table);

        buf_printf(out, "SELECT create_distributed_table(%s, 'legacy_id', colocate_with => "
                        "'none');  -- Citus: distributed on its key, without UNIQUE on id "
                        "(Citus enforces uniqueness only with the distribution column)\n",
                   lit);
        free(lit);
    }
    buf_printf(out, "-- on the source:\nCREATE PUBLICATION %s FOR TABLE %s;\n", pub, from);
    buf_printf(out, "SELECT pg_create_logical_replication_slot('%s', 'pgoutput');  -- with an "
                    "exported snapshot: the copy runs under it\n",
               s->slot);
    free(pub);
    free(from);
    if (d->notes.len)
    {
        buf_puts(out, "-- not kept as on the source:\n");
        for (const char *p = d->notes.data; *p;)
        {
            const char *nl = strchr(p, '\n');

            buf_printf(out, "--   %.*s\n", (int) (nl - p), p);
            p = nl + 1;
        }
    }
    if (d->nchildren_fk)
        buf_printf(out, "-- tables referencing %s.%s (give them as --child):\n--   %s",
                   s->from_schema, s->from_table, d->children_fk.data);
    return plan_rows(src, s, out, err);
}

static bool
create_target(PgConn *target, const MigrateSpec *s, const MigrateSource *d, Err *err)
{
    Buf ddl;
    bool ok;

    buf_init(&ddl);
    buf_puts(&ddl, "BEGIN;\n");
    migrate_ddl_target(target, d, s->into_schema, s->into_table, &ddl);
    buf_puts(&ddl, "COMMIT;\n");
    ok = pg_exec(target, ddl.data, err);
    if (!ok)
    {
        Err rb = {0};

        if (!pg_exec(target, "ROLLBACK", &rb))
            log_debug("rollback: %s", rb.msg);
        err_prefix(err, "could not create the target %s.%s", s->into_schema, s->into_table);
    }
    else
        log_info("created the target %s.%s (partitioned by RANGE (id))", s->into_schema,
                 s->into_table);
    buf_free(&ddl);
    return ok;
}

/* Same server and database? Then the target and the map must stay out of the publication. */
static bool
same_database(PgConn *a, PgConn *b, bool *out, Err *err)
{
    const char *sql = "SELECT system_identifier::text || '/' || current_database() FROM "
                      "pg_control_system()";
    PGresult *ra, *rb;

    if (!pg_query(a, sql, 0, NULL, &ra, err))
        return false;
    if (!pg_query(b, sql, 0, NULL, &rb, err))
    {
        PQclear(ra);
        return false;
    }
    *out = strcmp(PQgetvalue(ra, 0, 0), PQgetvalue(rb, 0, 0)) == 0;
    PQclear(ra);
    PQclear(rb);
    return true;
}

static bool
ensure_publication(PgConn *src, const MigrateSpec *s, bool same_db, bool *created, Err *err)
{
    const char *params[6] = {s->publication, s->from_schema, s->from_table, s->into_schema,
                             s->into_table, s->map_table};
    char *pub = pg_ident(src, s->publication);
    char *from = pg_qualified(src, s->from_schema, s->from_table);
    PGresult *res;
    bool ok = true;
    char *sql = NULL;

    *created = false;
    if (!pg_query(src,
                  "SELECT (SELECT puballtables FROM pg_publication WHERE pubname = $1),"
                  "  EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND "
                  "schemaname = $2 AND tablename = $3),"
                  "  EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND "
                  "schemaname = $4 AND tablename IN ($5, $6))",
                  6, params, &res, err))
        goto out;
    if (PQgetisnull(res, 0, 0))
    {
        sql = xasprintf("CREATE PUBLICATION %s FOR TABLE %s", pub, from);
        ok = pg_exec(src, sql, err);
        *created = ok;
        if (ok)
            log_info("created publication %s on the source", s->publication);
    }
    else if (same_db && (PQgetvalue(res, 0, 0)[0] == 't' || PQgetvalue(res, 0, 2)[0] == 't'))
    {
        ok = err_set(err, EC_CONFIG,
                     "publication %s holds the target %s.%s or its map: in the same database "
                     "the migration would apply its own writes again",
                     s->publication, s->into_schema, s->into_table);
        err_hint(err, "Publish only the source: ALTER PUBLICATION %s SET TABLE %s;", pub, from);
    }
    else if (PQgetvalue(res, 0, 1)[0] != 't')
    {
        sql = xasprintf("ALTER PUBLICATION %s ADD TABLE %s", pub, from);
        ok = pg_exec(src, sql, err);
    }
    PQclear(res);
    if (!ok)
        err_prefix(err, "the source's publication %s", s->publication);
out:
    free(sql);
    free(from);
    free(pub);
    return ok && err->code == EC_OK;
}

static void
stream_options_for(const MigrateSpec *s, const MigrateOptions *o, const char *source,
                   const char *table, const ColumnMap *map, char *from, size_t fromsize,
                   StreamOptions *so)
{
    stream_options_default(so);
    so->common = o->common;
    so->common.table = table;
    so->common.time_column = s->time_column;
    so->common.maps = map;
    so->common.nmaps = 1;
    so->common.key_map_column = s->key;
    so->common.key_map_type = s->key_type;
    so->common.lookup_table = s->map_table;
    so->common.window_tz = s->window_tz[0] ? s->window_tz : NULL;
    (void) snprintf(from, fromsize, "%s.%s", s->from_schema, s->from_table);
    so->source_conninfo = source;
    so->from = from;
    so->publication = s->publication;
    so->slot = s->slot;
    so->until_caught_up = !o->follow;
}

/* The rows this migration's stream quarantined, by reason. */
static bool
collect_rejects(PgConn *target, const MigrateSpec *s, uint64_t *count, Buf *out, Err *err)
{
    const char *params[1] = {s->slot};
    PGresult *res;

    *count = 0;
    if (!pg_query(target,
                  "SELECT count(*), split_part(reason, ':', 1), (array_agg(reason || ': ' || "
                  "row::text ORDER BY id))[1] FROM v7fill.stream_quarantine WHERE slot = $1 "
                  "GROUP BY 2 ORDER BY 1 DESC, 2",
                  1, params, &res, err))
        return false;
    for (int i = 0; i < PQntuples(res); i++)
    {
        *count += strtoull(PQgetvalue(res, i, 0), NULL, 10);
        buf_printf(out, "%s  %s  (first: %s)\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
                   PQgetvalue(res, i, 2));
    }
    PQclear(res);
    return true;
}

void
migrate_stream_stats_add(StreamStats *a, const StreamStats *b)
{
    import_stats_add_counts(&a->rows, &b->rows);
    a->rows.elapsed_s += b->rows.elapsed_s; /* one after the other */
    a->transactions += b->transactions;
    a->skipped_transactions += b->skipped_transactions;
    a->quarantined += b->quarantined;
    a->applied_lsn = b->applied_lsn;
}

/* The stream's copy finished: v7fill.stream says phase "stream". */
static bool
copy_finished(PgConn *target, const MigrateSpec *s, bool *out, Err *err)
{
    StreamState st;

    if (!stream_state_get(target, s->slot, NULL, &st, err))
        return false;
    *out = st.found && strcmp(st.phase, "stream") == 0;
    return true;
}

/* Expand mode: each child's <fk>_uuid and (same database) its trigger, before
 * the copy, so that child rows written during it are kept current. */
static bool
children_prepare(PgConn *src, const MigrateSpec *s, Err *err)
{
    for (size_t i = 0; i < s->nchildren; i++)
        if (!migrate_child_prepare(src, s, &s->children[i], err))
        {
            err_prefix(err, "child %s.%s", s->children[i].schema, s->children[i].table);
            return false;
        }
    return true;
}

/* The parent's stream until caught up once more, its counts added to *into
 * (the copy's or the follow's). */
static bool
catch_up_again(PgConn *target, const StreamOptions *so, StreamStats *into, Err *err)
{
    StreamStats more;
    bool ok;

    memset(&more, 0, sizeof more);
    ok = stream_run(target, so, &more, err);
    migrate_stream_stats_add(into, &more);
    import_stats_free(&more.rows);
    return ok;
}

/* Once the parent is copied: (same database) the trigger on the map for
 * children of parents the capture inserts, each child filled from the map,
 * then (same database) its foreign key to the target added NOT VALID and
 * validated. */
static bool
children_fill(PgConn *src, PgConn *target, const MigrateSpec *s, const MigrateOptions *o,
              MigrateResult *r, Err *err)
{
    if (s->nchildren == 0)
        return true;
    r->children = xcalloc(s->nchildren, sizeof *r->children);
    r->nchildren = s->nchildren;
    for (size_t i = 0; i < s->nchildren; i++)
    {
        const MigrateChild *ch = &s->children[i];

        /* The map's trigger before the fill: a map row written meanwhile sets
         * its children itself, the fill the rest. */
        if (!migrate_child_hook(src, s, ch, err) ||
            !migrate_child_catch_up(src, target, s, ch, o->lock_timeout_ms,
                                    o->full_fill, &r->children[i], err) ||
            (migrate_child_same_database(s) &&
             !migrate_child_constrain(src, s, ch, o->lock_timeout_ms, &r->children[i], err)))
        {
            err_prefix(err, "child %s.%s", ch->schema, ch->table);
            return false;
        }
        log_info("child %s.%s: %s_uuid filled (%" PRIu64 " rows, %" PRIu64 " orphans, %" PRIu64
                 " NULL keys)",
                 ch->schema, ch->table, ch->fk_column, r->children[i].rows,
                 r->children[i].orphans, r->children[i].null_keys);
    }
    return true;
}

/* Migrate mode: each child's target, <fk>_uuid and triggers, before the
 * parent's copy (the map's trigger fills child rows that came first). */
static bool
childtables_prepare(PgConn *src, PgConn *target, const MigrateSpec *s, Err *err)
{
    for (size_t i = 0; i < s->nchildren; i++)
        if (!migrate_childtable_prepare(src, target, s, &s->children[i], err))
        {
            err_prefix(err, "child %s.%s", s->children[i].schema, s->children[i].table);
            return false;
        }
    return true;
}

/* Migrate mode, the children copied: the parent caught up once more; with
 * --follow, rounds (the parent, then each child, each until caught up) until
 * interrupted: one slot per table, applied one after the other. */
static bool
childtables_follow(PgConn *target, const MigrateOptions *o, const MigrateSpec *s,
                   StreamOptions *so, MigrateResult *r, Err *err)
{
    bool ok = true;

    so->until_caught_up = true;
    do
    {
        ok = catch_up_again(target, so, o->follow ? &r->follow : &r->copy, err);
        for (size_t i = 0; ok && o->follow && i < s->nchildren && interrupt_signal() == 0; i++)
            ok = migrate_childtable_sync(target, o, s, &s->children[i], &r->follow, err);
        if (ok && o->follow && interrupt_signal() == 0)
        {
            struct timespec ts = {0, MIGRATE_FOLLOW_ROUND_MS * 1000000L};

            (void) nanosleep(&ts, NULL);
        }
    } while (ok && o->follow && interrupt_signal() == 0);
    return ok;
}

static bool
setup(PgConn *target, PgConn *src, const MigrateOptions *o, MigrateSpec *s,
      const MigrateSource *d, const CitusTarget *ct, MigrateResult *r, Err *err)
{
    bool exists, same_db;
    LookupShape shape;
    int map_bits;

    (void) o;
    if (!table_exists(target, s->into_schema, s->into_table, &exists, err))
        return false;
    if (exists && !migrate_ddl_check_target(target, d, s->into_schema, s->into_table, err))
        return false;
    if (!same_database(target, src, &same_db, err) ||
        !ensure_publication(src, s, same_db, &r->publication_created, err))
        return false;
    if (!exists && !create_target(target, s, d, err))
        return false;
    if (!exists && ct->citus)
        log_info("Citus: %s.%s is a local table on the coordinator (as import and stream leave "
                 "a local target); to distribute it, create it and run create_distributed_table "
                 "on it before the first run (docs/scaling.md)",
                 s->into_schema, s->into_table);
    r->target_created = !exists;
    /* The map now (not first at the copy's start): a child's trigger reads it.  On a
     * distributed target without UNIQUE on id (the copy distributes it on legacy_id). */
    return state_lookup_create_map(target, s->into_schema, s->map_table, s->key_type,
                                   !ct->distributed, &shape, &map_bits, err) &&
           migrate_state_setup(target, err) && migrate_state_put(target, s, err) &&
           migrate_state_put_window_tz(target, s, err);
}

bool
migrate_run(PgConn *target, const MigrateOptions *o, MigrateResult *r, Err *err)
{
    MigrateSpec *s = &r->spec;
    MigrateSpec stored;
    MigrateSource d;
    PgConn *src = NULL;
    const char *source = o->source_conninfo ? o->source_conninfo : o->target_conninfo;
    bool found = false, exists = false, ok = false, done = false;
    char *table = NULL;
    char from[160];
    ColumnMap map;
    StreamOptions so;
    CitusTarget ct;

    memset(r, 0, sizeof *r);
    memset(&d, 0, sizeof d);
    buf_init(&r->rejects);
    buf_init(&r->notes);
    buf_init(&r->plan);
    if (!spec_from_options(o, s, err) ||
        !migrate_state_get(target, s->into_schema, s->into_table, &stored, &found, err))
        return false;
    if (found)
    {
        ok = same_migration(&stored, s, err) && same_window_tz(o, &stored, s, err);
        s->phase = stored.phase;
        s->switch_lsn = stored.switch_lsn;
        (void) snprintf(s->legacy_table, sizeof s->legacy_table, "%s", stored.legacy_table);
        /* Without --source a rerun reaches the source the migration was made with. */
        if (!o->source_conninfo && stored.source_conninfo[0])
        {
            (void) snprintf(s->source_conninfo, sizeof s->source_conninfo, "%s",
                            stored.source_conninfo);
            source = s->source_conninfo;
        }
        if (o->nchildren == 0 && stored.nchildren > 0)
        {
            s->children = stored.children; /* taken over */
            s->nchildren = stored.nchildren;
            s->child_mode = stored.child_mode;
            stored.children = NULL;
            stored.nchildren = 0;
        }
        migrate_spec_free(&stored);
        if (!ok)
            return false;
        ok = false;
        if (s->phase >= MIGRATE_PHASE_SWITCHED)
            return err_set(err, EC_CONFIG,
                           "the migration into %s.%s is %s: the copy and capture are over",
                           s->into_schema, s->into_table, migrate_phase_name(s->phase));
    }
    for (size_t i = 0; s->child_mode == MIGRATE_CHILD_MIGRATE && i < s->nchildren; i++)
        if (!migrate_childtable_name(&s->children[i], err))
            return false;
    if (!pg_connect(source, &src, err))
    {
        err_prefix(err, "the source");
        return false;
    }
    if (!migrate_ddl_describe(src, s->from_schema, s->from_table, s->key, s->time_column, &d,
                              err))
        goto out;
    (void) snprintf(s->key_type, sizeof s->key_type, "%s", d.key_type);
    buf_puts(&r->notes, d.notes.data ? d.notes.data : "");
    if (!citus_target(target, src, s, &ct, err))
        goto out;
    if (o->dry_run)
    {
        ok = table_exists(target, s->into_schema, s->into_table, &exists, err) &&
             (!exists || migrate_ddl_check_target(target, &d, s->into_schema, s->into_table,
                                                  err)) &&
             dry_run(target, src, s, &d, exists, &ct, &r->plan, err);
        for (size_t i = 0; ok && s->child_mode == MIGRATE_CHILD_MIGRATE && i < s->nchildren; i++)
            ok = migrate_childtable_plan(src, s, &s->children[i], &r->plan, err);
        goto out;
    }
    if (!setup(target, src, o, s, &d, &ct, r, err) ||
        (s->child_mode == MIGRATE_CHILD_MIGRATE ? !childtables_prepare(src, target, s, err)
                                                : !children_prepare(src, s, err)))
        goto out;
    table = pg_qualified(target, s->into_schema, s->into_table);
    map.from = s->key;
    map.to = "legacy_id";
    stream_options_for(s, o, source, table, &map, from, sizeof from, &so);
    so.until_caught_up = true;
    ok = stream_run(target, &so, &r->copy, err);
    /* A run that copied stopped at what the source had committed before the
     * slot: once more for the changes made during the copy. */
    if (ok && r->copy.copied > 0 && interrupt_signal() == 0)
        ok = catch_up_again(target, &so, &r->copy, err);
    if (ok && !(ok = copy_finished(target, s, &done, err)))
        goto out;
    if (done && s->phase == MIGRATE_PHASE_COPY)
    {
        if (!migrate_state_set_phase(target, s, MIGRATE_PHASE_FOLLOW, err))
        {
            ok = false;
            goto out;
        }
        s->phase = MIGRATE_PHASE_FOLLOW;
        log_info("the copy of %s.%s is done: phase follow", s->from_schema, s->from_table);
    }
    r->copied = done;
    if (ok && done && interrupt_signal() == 0 && s->child_mode == MIGRATE_CHILD_MIGRATE)
        ok = migrate_childtable_run_all(src, target, o, s, r, err) &&
             childtables_follow(target, o, s, &so, r, err);
    else if (ok && done && interrupt_signal() == 0)
    {
        ok = children_fill(src, target, s, o, r, err);
        /* The fill rewrote the children's rows on the source: that WAL, and
         * the changes the application made meanwhile, lie in front of the
         * slot.  Caught up here, so that the run ends as caught up as it says
         * and the next run (or the switch) does not decode it first (at 10M
         * child rows: 4 GB of WAL, 40 s of the walsender's CPU to decode). */
        if (ok && s->nchildren > 0 && !o->follow && interrupt_signal() == 0)
            ok = catch_up_again(target, &so, &r->copy, err);
    }
    if (ok && o->follow && interrupt_signal() == 0 && s->child_mode != MIGRATE_CHILD_MIGRATE)
    {
        ChildKeeper *keeper = NULL;

        /* Two databases: no trigger reaches the child rows written meanwhile. */
        if (s->nchildren > 0 && !migrate_child_same_database(s))
            ok = migrate_child_keeper_start(src, target, s, o->lock_timeout_ms, &keeper, err);
        so.until_caught_up = false;
        ok = ok && stream_run(target, &so, &r->follow, err);
        if (keeper)
        {
            ChildKeeperStats ks;

            migrate_child_keeper_stop(keeper, &ks);
            log_info("children during --follow: %" PRIu64 " rows given their <fk>_uuid in %" PRIu64
                     " passes (%" PRIu64 " failed; %" PRId64 " ms in all, the longest %" PRId64
                     " ms)",
                     ks.filled, ks.passes, ks.failures, ks.busy_ms, ks.longest_ms);
        }
    }
    {
        Err rerr = {0};

        if (!collect_rejects(target, s, &r->rejected, &r->rejects, ok ? err : &rerr))
            ok = false;
    }
out:
    free(table);
    migrate_source_free(&d);
    pg_close(src);
    return ok;
}

bool
migrate_find(PgConn *target, const char *into, MigrateSpec *out, Err *err)
{
    char schema[64], table[64];
    bool found = false;
    PGresult *res;
    const char *params[1];

    memset(out, 0, sizeof *out);
    if (!split_name("--into", into, "", schema, table, err))
        return false;
    if (schema[0] == '\0')
    {
        params[0] = table;
        if (!pg_query(target, "SELECT to_regclass('v7fill.migration') IS NOT NULL", 0, NULL,
                      &res, err))
            return false;
        found = PQgetvalue(res, 0, 0)[0] == 't';
        PQclear(res);
        if (found)
        {
            if (!pg_query(target, "SELECT into_schema FROM v7fill.migration WHERE into_table = $1",
                          1, params, &res, err))
                return false;
            if (PQntuples(res) > 1)
            {
                PQclear(res);
                return err_set(err, EC_USAGE,
                               "--into %s: several migrations into a table of that name; give "
                               "SCHEMA.TABLE",
                               table);
            }
            if (PQntuples(res) == 1)
                (void) snprintf(schema, sizeof schema, "%s", PQgetvalue(res, 0, 0));
            PQclear(res);
        }
        found = false;
    }
    if (!migrate_state_get(target, schema, table, out, &found, err))
        return false;
    if (!found)
        return err_set(err, EC_CONFIG, "no migration into %s%s%s (v7fill.migration)", schema,
                       schema[0] ? "." : "", table);
    return true;
}

static int64_t
count_rows(PgConn *c, const char *schema, const char *table)
{
    char *t = pg_qualified(c, schema, table);
    char *sql = xasprintf("SELECT count(*) FROM %s", t);
    PGresult *res;
    Err e = {0};
    int64_t n = -1;

    if (pg_query(c, sql, 0, NULL, &res, &e))
    {
        n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
    }
    free(sql);
    free(t);
    return n;
}

bool
migrate_status(PgConn *target, const char *target_conninfo, const char *into,
               const char *source_conninfo, MigrateStatus *out, Err *err)
{
    MigrateSpec *s = &out->spec;
    MigrateLiveNames live;
    const char *source;
    PgConn *src = NULL;
    Err serr = {0};
    bool exists = false, ok;

    memset(out, 0, sizeof *out);
    if (!migrate_find(target, into, s, err))
        return false;
    source = source_conninfo ? source_conninfo : s->source_conninfo;
    if (source[0] == '\0')
        source = target_conninfo ? target_conninfo : "";
    out->stream_ok = stream_admin_status(target, s->slot, source, &out->stream, &serr);
    if (!out->stream_ok)
        (void) snprintf(out->stream_error, sizeof out->stream_error, "%s", serr.msg);
    out->source_rows = -1;
    migrate_live_names(s, &live);
    if (pg_connect(source, &src, &serr))
        out->source_rows = count_rows(src, live.src_schema, live.src_table);
    pg_close(src);
    out->target_rows = count_rows(target, live.new_schema, live.new_table);
    (void) snprintf(out->map_table, sizeof out->map_table, "%s", s->map_table);
    ok = table_exists(target, s->into_schema, s->map_table, &exists, err);
    if (!ok)
    {
        migrate_spec_free(s);
        return false;
    }
    if (!exists)
        (void) snprintf(out->map_table, sizeof out->map_table, "%s_source_ref", s->into_table);
    out->map_rows = count_rows(target, s->into_schema, out->map_table);
    out->rejected = out->stream.quarantined;
    if (s->phase >= MIGRATE_PHASE_SWITCHED)
    {
        char key[160];

        (void) snprintf(key, sizeof key, "%s.%s", s->into_schema, s->into_table);
        if (!migrate_reverse_status(target, key, &out->reverse, &serr))
            log_warn("the way back's state of %s: %s", key, serr.msg);
    }
    return true;
}

const char *
migrate_source_conninfo(const MigrateSpec *spec, const char *override,
                        const char *target_conninfo)
{
    if (override)
        return override;
    if (spec->source_conninfo[0])
        return spec->source_conninfo;
    return target_conninfo;
}

/* The source's connection: the target's own when they are one database. */
static bool
source_conn(PgConn *target, const char *target_conninfo, const MigrateSpec *spec,
            const char *override, PgConn **src, bool *own, Err *err)
{
    *own = false;
    *src = target;
    if (!override && spec->source_conninfo[0] == '\0')
        return true;
    if (!pg_connect(migrate_source_conninfo(spec, override, target_conninfo), src, err))
    {
        err_prefix(err, "the source");
        return false;
    }
    *own = true;
    return true;
}

bool
migrate_verify_spec(PgConn *target, const char *target_conninfo, const MigrateSpec *spec,
                    const char *source_conninfo, VerifyReport *out, Err *err)
{
    PgConn *src;
    bool own, ok;

    memset(out, 0, sizeof *out);
    if (!source_conn(target, target_conninfo, spec, source_conninfo, &src, &own, err))
        return false;
    if (spec->child_mode == MIGRATE_CHILD_MIGRATE && spec->nchildren > 0)
    {
        MigrateSpec parent = *spec;

        parent.nchildren = 0; /* each child is a migration of its own */
        ok = migrate_verify(src, target, &parent, out, err);
        for (size_t i = 0; ok && i < spec->nchildren; i++)
            ok = migrate_childtable_verify(src, target, spec, &spec->children[i], out, err);
        out->ok = ok;
        for (size_t i = 0; i < out->n; i++)
            out->ok = out->ok && out->checks[i].ok;
    }
    else
        ok = migrate_verify(src, target, spec, out, err);
    if (own)
        pg_close(src);
    return ok;
}

/* What this version does not do with migrate-mode children: a child's own
 * migration switched or reversed (it would leave its parent behind). */
static bool
childtables_refuse(PgConn *target, const MigrateSpec *spec, const char *what, Err *err)
{
    const char *params[2] = {spec->into_schema, spec->into_table};
    PGresult *res;

    if (!pg_query(target,
                  "SELECT (SELECT m.into_schema || '.' || m.into_table FROM v7fill.migration m,"
                  " jsonb_array_elements(m.children) c WHERE m.child_mode = 'migrate' AND"
                  " m.into_schema = $1 AND c->>'into_table' = $2 LIMIT 1)",
                  2, params, &res, err))
        return false;
    if (!PQgetisnull(res, 0, 0))
    {
        err_set(err, EC_CONFIG,
                "%s.%s is the target of a --child-mode migrate child of the migration into %s: "
                "%s goes with its parent's migration (%s --into %s)",
                spec->into_schema, spec->into_table, PQgetvalue(res, 0, 0), what, what,
                PQgetvalue(res, 0, 0));
        PQclear(res);
        return false;
    }
    PQclear(res);
    return true;
}

typedef struct CatchUp
{
    PgConn *target;
    const MigrateSpec *spec;
    const MigrateOptions *o;
    const char *source;
    char race_fkey[64]; /* a child's: its foreign key to the parent (StreamOptions.retry_constraint) */
} CatchUp;

/* The switch's catch_up: the stream, on its own connection to the target,
 * until what the source committed when it starts is applied; with lock, it
 * then takes the switch's lock and applies up to the final position.  The
 * captures run on threads: only the capture's own connection is used, its
 * names quoted on it too (PQescapeIdentifier resets the PGconn's error
 * state, so the shared target connection is no place for it). */
static bool
switch_catch_up(void *ctx, MigrateSwitchLock lock, void *lock_ctx, Err *err)
{
    CatchUp *c = ctx;
    PgConn *side = NULL;
    char *table;
    char from[160];
    ColumnMap map = {c->spec->key, "legacy_id"};
    StreamOptions so;
    StreamStats st;
    bool ok;

    memset(&st, 0, sizeof st);
    if (!pg_connect_again(c->target, &side, err))
        return false;
    table = pg_qualified(side, c->spec->into_schema, c->spec->into_table);
    stream_options_for(c->spec, c->o, c->source, table, &map, from, sizeof from, &so);
    so.until_caught_up = true;
    so.status_interval_s = 0;
    so.on_caught_up = lock;
    so.caught_up_ctx = lock_ctx;
    so.retry_constraint = c->race_fkey[0] ? c->race_fkey : NULL;
    ok = stream_run(side, &so, &st, err);
    if (ok)
        log_info("switch: the capture applied %" PRIu64 " rows up to the final position",
                 st.rows.read);
    else
        err_prefix(err, "the capture into %s.%s", c->spec->into_schema, c->spec->into_table);
    import_stats_free(&st.rows);
    pg_close(side);
    free(table);
    return ok;
}

/* The captures of a migration with migrate-mode children: the parent's and
 * each child's (its own stored migration), caught up together. */
typedef struct Together
{
    CatchUp parent;
    CatchUp *kids;
    MigrateSpec *specs;
    void **ctx;
    size_t n;
} Together;

static bool
together_catch_up(void *ctx, MigrateSwitchLock lock, void *lock_ctx, Err *err)
{
    Together *t = ctx;

    return migrate_catch_up_together(switch_catch_up, &t->parent, t->ctx, t->n, lock, lock_ctx,
                                     err);
}

static void
together_free(Together *t)
{
    for (size_t i = 0; t->specs && i < t->n; i++)
        migrate_spec_free(&t->specs[i]);
    free(t->kids);
    free(t->specs);
    free(t->ctx);
}

/* Each migrate-mode child's own migration, from v7fill.migration. */
static bool
together_load(PgConn *target, const MigrateSpec *spec, Together *t, Err *err)
{
    t->n = spec->nchildren;
    t->kids = xcalloc(t->n ? t->n : 1, sizeof *t->kids);
    t->specs = xcalloc(t->n ? t->n : 1, sizeof *t->specs);
    t->ctx = xcalloc(t->n ? t->n : 1, sizeof *t->ctx);
    for (size_t i = 0; i < t->n; i++)
    {
        bool found = false;

        if (!migrate_state_get(target, spec->into_schema, spec->children[i].into_table,
                               &t->specs[i], &found, err))
            return false;
        if (!found)
            return err_set(err, EC_CONFIG,
                           "child %s.%s: no migration into %s.%s (run migrate with --from ... "
                           "again)",
                           spec->children[i].schema, spec->children[i].table, spec->into_schema,
                           spec->children[i].into_table);
        t->kids[i] = t->parent;
        t->kids[i].spec = &t->specs[i];
        migrate_childtable_fkey_name(spec->into_schema, spec->children[i].into_table,
                                     t->kids[i].race_fkey);
        t->ctx[i] = &t->kids[i];
    }
    return true;
}

/* After the switch (or finding it done): each child's migration stored as
 * switched, its legacy table named. */
static bool
together_switched(PgConn *target, Together *t, uint64_t final_lsn, Err *err)
{
    for (size_t i = 0; i < t->n; i++)
    {
        MigrateSpec *c = &t->specs[i];

        if (c->phase >= MIGRATE_PHASE_SWITCHED)
            continue;
        c->phase = MIGRATE_PHASE_SWITCHED;
        if (final_lsn)
            c->switch_lsn = final_lsn;
        migrate_legacy_name(c->from_table, c->legacy_table);
        if (!migrate_state_put(target, c, err))
            return false;
    }
    return true;
}

/* After switching back (or finding it done): each child's migration stored
 * in phase follow again, without a legacy table. */
static bool
together_back(PgConn *target, Together *t, uint64_t final_lsn, Err *err)
{
    for (size_t i = 0; i < t->n; i++)
    {
        MigrateSpec *c = &t->specs[i];

        if (c->phase < MIGRATE_PHASE_SWITCHED)
            continue;
        c->phase = MIGRATE_PHASE_FOLLOW;
        if (final_lsn)
            c->switch_lsn = final_lsn;
        c->legacy_table[0] = '\0';
        if (!migrate_state_put(target, c, err))
            return false;
    }
    return true;
}

/* <from>_legacy exists: the switch committed. */
static bool
legacy_exists(PgConn *target, const MigrateSpec *spec, bool *exists, Err *err)
{
    char name[64];
    char *q;
    const char *p[1];
    PGresult *res;
    bool ok;

    migrate_legacy_name(spec->from_table, name);
    q = pg_qualified(target, spec->from_schema, spec->legacy_table[0] ? spec->legacy_table : name);
    p[0] = q;
    ok = pg_query(target, "SELECT pg_catalog.to_regclass($1) IS NOT NULL", 1, p, &res, err);
    free(q);
    if (!ok)
        return false;
    *exists = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return true;
}

bool
migrate_switch_spec(PgConn *target, const char *target_conninfo, MigrateSpec *spec,
                    const MigrateOptions *o, SwitchStats *st, Err *err)
{
    CatchUp cu = {target, spec, o, migrate_source_conninfo(spec, o->source_conninfo,
                                                           target_conninfo)};
    PgConn *src;
    bool own, ok;
    bool kids = spec->child_mode == MIGRATE_CHILD_MIGRATE && spec->nchildren > 0;
    bool back = spec->phase == MIGRATE_PHASE_REVERSE;
    bool renamed = false;
    Together tg;

    memset(st, 0, sizeof *st);
    memset(&tg, 0, sizeof tg);
    if (!childtables_refuse(target, spec, "--switch", err))
        return false;
    if (spec->phase < MIGRATE_PHASE_FOLLOW)
        return err_set(err, EC_CONFIG,
                       "the migration into %s.%s is in phase %s: the copy must finish first "
                       "(run migrate with --from ... again)",
                       spec->into_schema, spec->into_table, migrate_phase_name(spec->phase));
    if (!source_conn(target, target_conninfo, spec, o->source_conninfo, &src, &own, err))
        return false;
    /* Catch up without the lock first (an already switched migration has nothing to
     * apply): under the lock only what was written meanwhile is left.  Twice: in one
     * database the first pass's own writes (rows, map) are WAL past its stop position,
     * which the slot passes over only in a second pass; the switch measures the slot's
     * lag. */
    tg.parent = cu;
    if (kids && !together_load(target, spec, &tg, err))
    {
        ok = false;
        goto out;
    }
    /* Killed between the switch's commit and storing its phase: the names
     * tell (migrate_switch says so); no capture into a renamed table. */
    if (spec->phase == MIGRATE_PHASE_FOLLOW &&
        !legacy_exists(spec->source_conninfo[0] ? src : target, spec, &renamed, err))
    {
        ok = false;
        goto out;
    }
    for (int pass = 0; pass < 2 && spec->phase == MIGRATE_PHASE_FOLLOW && !renamed; pass++)
        if (!(kids ? together_catch_up(&tg, NULL, NULL, err)
                   : switch_catch_up(&cu, NULL, NULL, err)))
        {
            ok = false;
            goto out;
        }
    ok = (kids ? migrate_switch(src, target, spec, o->lock_timeout_ms, o->switch_attempts,
                                together_catch_up, &tg, st, err)
               : migrate_switch(src, target, spec, o->lock_timeout_ms, o->switch_attempts,
                                switch_catch_up, &cu, st, err)) &&
         migrate_state_put(target, spec, err) &&
         (!kids || (back ? together_back(target, &tg, st->final_lsn, err)
                         : together_switched(target, &tg, st->final_lsn, err)));
out:
    together_free(&tg);
    if (own)
        pg_close(src);
    return ok;
}

/* The checks of *sub appended to *out (sub keeps its diff keys). */
static void
report_take(VerifyReport *out, const VerifyReport *sub)
{
    out->checks = xrealloc(out->checks, (out->n + sub->n + 1) * sizeof *out->checks);
    if (sub->n)
        memcpy(out->checks + out->n, sub->checks, sub->n * sizeof *sub->checks);
    out->n += sub->n;
}

/* The join pairs of a child whose other checks agree, read while the application writes:
 * the pairs follow from the child's rows (settled key by key), its keys (equal to the parent
 * map's) and the parent's rows; they differ only by what was written between the two reads. */
static void
pairs_settled(VerifyCheck *c, int rounds)
{
    size_t len = strlen(c->detail);

    c->ok = true;
    (void) snprintf(c->detail + len, sizeof c->detail - len,
                    "%ssettled: the child's rows and keys agree, the pairs differed only while "
                    "the capture lagged (%d rounds)",
                    len ? "; " : "", rounds);
}

/* Migrate-mode children, while the application writes: the parent settled alone (the keys
 * re-checked are its own), each child's own migration settled the same way (its keys, after
 * its own slot caught up), then each child's links to the parent ("child keys", "NULL keys":
 * counts within the target) verified again after the parent's and the children's captures
 * caught up together, until they agree or `rounds` verifies: a link mismatch found in every
 * round stays a mismatch (the parent's settling does not excuse it).  Its "join pairs" (the
 * live source against the target) settle once the rest agrees (pairs_settled). */
static bool
childtables_verify_settled(PgConn *target, const char *target_conninfo, const MigrateSpec *spec,
                           const MigrateOptions *o, int rounds, VerifyReport *out, int *done,
                           Err *err)
{
    MigrateSpec parent = *spec;
    Together tg;
    PgConn *src = NULL;
    bool own = false, ok;

    memset(&tg, 0, sizeof tg);
    tg.parent = (CatchUp){target, spec, o,
                          migrate_source_conninfo(spec, o->source_conninfo, target_conninfo)};
    parent.nchildren = 0; /* each child is a migration of its own */
    if (!migrate_verify_settled(target, target_conninfo, &parent, o, rounds, out, done, err))
        return false;
    ok = together_load(target, spec, &tg, err) &&
         source_conn(target, target_conninfo, spec, o->source_conninfo, &src, &own, err);
    for (size_t i = 0; ok && i < tg.n; i++)
    {
        VerifyReport sub;
        int d = 0;

        memset(&sub, 0, sizeof sub);
        ok = migrate_verify_settled(target, target_conninfo, &tg.specs[i], o, rounds, &sub, &d,
                                    err);
        if (ok)
            report_take(out, &sub);
        verify_report_free(&sub);
        *done = d > *done ? d : *done;
        for (int r = 1; ok; r++)
        {
            bool agree = true;

            memset(&sub, 0, sizeof sub);
            ok = migrate_childtable_verify_links(src, target, spec, &spec->children[i],
                                                 &tg.specs[i], &sub, err);
            for (size_t j = 0; j < sub.n; j++)
                agree = agree && (sub.checks[j].ok || strcmp(sub.checks[j].check, "join pairs") == 0);
            if (!ok || agree || r >= rounds || interrupt_signal() != 0)
            {
                for (size_t j = 0; ok && agree && j < sub.n; j++)
                    if (!sub.checks[j].ok)
                        pairs_settled(&sub.checks[j], r);
                if (ok)
                    report_take(out, &sub);
                verify_report_free(&sub);
                *done = r > *done ? r : *done;
                break;
            }
            verify_report_free(&sub);
            log_info("verify: the keys of %s.%s differ from its parent's map (round %d of %d): "
                     "re-checked after a catch-up",
                     spec->into_schema, spec->children[i].into_table, r, rounds);
            ok = together_catch_up(&tg, NULL, NULL, err);
        }
    }
    out->ok = ok;
    for (size_t i = 0; i < out->n; i++)
        out->ok = out->ok && out->checks[i].ok;
    together_free(&tg);
    if (own)
        pg_close(src);
    return ok;
}

bool
migrate_verify_settled(PgConn *target, const char *target_conninfo, const MigrateSpec *spec,
                       const MigrateOptions *o, int rounds, VerifyReport *out, int *done,
                       Err *err)
{
    CatchUp cu = {target, spec, o, migrate_source_conninfo(spec, o->source_conninfo,
                                                           target_conninfo)};
    VerifyReport again;
    PgConn *src = target;
    bool ok = true;

    *done = 1;
    memset(&again, 0, sizeof again);
    if (spec->child_mode == MIGRATE_CHILD_MIGRATE && spec->nchildren > 0)
        return childtables_verify_settled(target, target_conninfo, spec, o, rounds, out, done,
                                          err);
    if (!migrate_verify_spec(target, target_conninfo, spec, o->source_conninfo, out, err))
        return false;
    if (out->ok || rounds <= 1)
        return true;
    if ((o->source_conninfo || spec->source_conninfo[0]) &&
        !pg_connect(cu.source, &src, err))
        return false;
    /* Only the rows that differed, each round after one more catch-up. */
    while (ok && *done < rounds && out->ndiff_keys > 0 && interrupt_signal() == 0)
    {
        log_info("verify: %zu rows differ (round %d of %d): re-checked after a catch-up",
                 out->ndiff_keys, *done, rounds);
        /* Twice: the second pass applies only what was written during the first, so the
         * re-check reads the source soon after the target's position. */
        ok = switch_catch_up(&cu, NULL, NULL, err) && switch_catch_up(&cu, NULL, NULL, err) &&
             migrate_verify_keys(src, target, spec, out->diff_keys, out->ndiff_keys, &again,
                                 err);
        if (ok)
        {
            free(out->diff_keys);
            out->diff_keys = again.diff_keys; /* taken over */
            out->ndiff_keys = again.ndiff_keys;
            again.diff_keys = NULL;
            (*done)++;
        }
        verify_report_free(&again);
    }
    if (ok)
        verify_report_settle(out, out->diff_keys, out->ndiff_keys, *done);
    if (src != target)
        pg_close(src);
    return ok;
}

/* The way back reads the new table's changes from its server's WAL: a Citus table's rows
 * are written on the workers, the coordinator's WAL holds none of them. */
static bool
reverse_not_distributed(PgConn *target, const MigrateSpec *spec, Err *err)
{
    bool dist;
    char rev[64];
    MigrateLiveNames ln;

    migrate_live_names(spec, &ln);
    if (!citus_is_distributed(target, ln.new_schema, ln.new_table, &dist, err))
        return false;
    if (!dist)
        return true;
    migrate_reverse_name(spec, rev, sizeof rev);
    err_set(err, EC_CONFIG,
            "the way back (--reverse) cannot follow %s.%s: it is a Citus distributed table, "
            "whose rows are written on the workers, and the slot on the coordinator captures "
            "none of its changes",
            ln.new_schema, ln.new_table);
    err_hint(err, "The switch of a distributed target is one way and makes no way back "
                  "(docs/scaling.md). A switch by an older version made a slot that keeps WAL: "
                  "drop it if it is there: SELECT pg_drop_replication_slot('%s'); DROP "
                  "PUBLICATION IF EXISTS \"%s\";",
             rev, rev);
    return false;
}

bool
migrate_reverse_spec(PgConn *target, const char *target_conninfo, MigrateSpec *spec,
                     const char *source_conninfo, bool follow, ReverseStats *st, Err *err)
{
    PgConn *src = NULL;
    bool ok, own = false;

    memset(st, 0, sizeof *st);
    if (!childtables_refuse(target, spec, "--reverse", err) ||
        !reverse_not_distributed(target, spec, err))
        return false;
    if (spec->phase < MIGRATE_PHASE_SWITCHED)
        return err_set(err, EC_CONFIG,
                       "the migration into %s.%s is in phase %s: --reverse follows --switch",
                       spec->into_schema, spec->into_table, migrate_phase_name(spec->phase));
    if (!source_conn(target, target_conninfo, spec, source_conninfo, &src, &own, err))
        return false;
    ok = migrate_reverse(target, src, spec, follow, st, err);
    if (own)
        pg_close(src);
    /* Stored also after an interrupted or failed run: the phase it reached. */
    {
        Err e2 = {0};

        if (!migrate_state_put(target, spec, ok ? err : &e2))
            ok = false;
    }
    return ok;
}
