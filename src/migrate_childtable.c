/*
 * migrate_childtable.c: children of a migration in mode migrate, each its
 * own UUIDv7 table (see migrate_childtable.h).
 */
#include "v7fill/migrate_childtable.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/migrate_ddl.h"
#include "v7fill/migrate_maptrig.h"
#include "v7fill/migrate_state.h"
#include "v7fill/migrate_verify.h"

/* A dollar-quote tag that the quoted names in a body cannot hold unnoticed. */
#define CT_TAG "$v7fill_ct$"

bool
migrate_childtable_name(MigrateChild *ch, Err *err)
{
    if (ch->into_table[0])
        return true;
    if (strlen(ch->table) + strlen("_v7_id_map") > 63)
        return err_set(err, EC_USAGE,
                       "child %s.%s: the name is too long for its target's map (%s_v7_id_map)",
                       ch->schema, ch->table, ch->table);
    (void) snprintf(ch->into_table, sizeof ch->into_table, "%s_v7", ch->table);
    return true;
}

void
migrate_childtable_options(const MigrateOptions *parent, const MigrateSpec *ps,
                           const MigrateChild *ch, const char *key, char from[160],
                           char into[160], MigrateOptions *out)
{
    *out = *parent;
    (void) snprintf(from, 160, "%s.%s", ch->schema, ch->table);
    (void) snprintf(into, 160, "%s.%s", ps->into_schema, ch->into_table);
    out->source_conninfo = ps->source_conninfo[0] ? ps->source_conninfo : NULL;
    out->from = from;
    out->into = into;
    out->key = key;
    out->time_column = ch->time_column[0] ? ch->time_column : ps->time_column;
    out->common.window_tz = ps->window_tz[0] ? ps->window_tz : NULL; /* the parent's */
    out->children = NULL;
    out->nchildren = 0;
    out->child_mode = MIGRATE_CHILD_EXPAND;
    out->follow = false;
    out->verify = false;
    out->dry_run = false;
}

bool
migrate_childtable_key(PgConn *src, const MigrateSpec *ps, const MigrateChild *ch, char key[64],
                       char time_column[64], Err *err)
{
    const char *tc = ch->time_column[0] ? ch->time_column : ps->time_column;
    const char *params[4] = {ch->schema, ch->table, tc, ch->fk_column};
    PGresult *res;

    if (!pg_query(src,
                  "WITH t AS (SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
                  "  ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2)"
                  " SELECT (SELECT count(*) FROM t),"
                  "  (SELECT a.attname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a"
                  "    ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
                  "   WHERE i.indrelid = (SELECT oid FROM t) AND i.indisprimary AND i.indnatts = 1"
                  "     AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)),"
                  "  EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = (SELECT oid"
                  "   FROM t) AND a.attname = $3 AND a.attnum > 0 AND NOT a.attisdropped),"
                  "  EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = (SELECT oid"
                  "   FROM t) AND a.attname = $4 AND a.attnum > 0 AND NOT a.attisdropped)",
                  4, params, &res, err))
        return false;
    if (strcmp(PQgetvalue(res, 0, 0), "1") != 0)
        err_set(err, EC_CONFIG, "child %s.%s does not exist on the source", ch->schema,
                ch->table);
    else if (PQgetisnull(res, 0, 1))
        err_set(err, EC_CONFIG,
                "child %s.%s: --child-mode migrate needs a single-column smallint, integer or "
                "bigint primary key (its legacy_id); it has none",
                ch->schema, ch->table);
    else if (PQgetvalue(res, 0, 2)[0] != 't')
    {
        err_set(err, EC_CONFIG,
                "child %s.%s has no column %s to mint its ids from (--child-mode migrate)",
                ch->schema, ch->table, tc);
        err_hint(err, "Name the child's time column: --child '%s.%s(%s):COLUMN'", ch->schema,
                 ch->table, ch->fk_column);
    }
    else if (PQgetvalue(res, 0, 3)[0] != 't')
        err_set(err, EC_CONFIG, "child %s.%s has no column %s", ch->schema, ch->table,
                ch->fk_column);
    else
    {
        (void) snprintf(key, 64, "%s", PQgetvalue(res, 0, 1));
        (void) snprintf(time_column, 64, "%s", tc);
    }
    PQclear(res);
    return err->code == EC_OK;
}

bool
migrate_childtable_plan(PgConn *src, const MigrateSpec *ps, const MigrateChild *ch, Buf *out,
                        Err *err)
{
    char key[64], tc[64];

    if (!migrate_childtable_key(src, ps, ch, key, tc, err))
        return false;
    buf_printf(out,
               "-- child %s.%s (--child-mode migrate): its own target %s.%s (key %s kept as "
               "legacy_id, ids minted from %s), map %s.%s_id_map, publication and slot; %s "
               "kept, %s_uuid set from %s.%s by triggers; then FOREIGN KEY (%s_uuid) REFERENCES "
               "%s.%s (id)\n",
               ch->schema, ch->table, ps->into_schema, ch->into_table, key, tc, ps->into_schema,
               ch->into_table, ch->fk_column, ch->fk_column, ps->into_schema, ps->map_table,
               ch->fk_column, ps->into_schema, ps->into_table);
    return true;
}

/* Names of one child's objects in the target (all quoted, freed by names_free). */
typedef struct CtNames
{
    char *child;   /* <into schema>.<child into> */
    char *parent;  /* <into schema>.<parent into> */
    char *map;     /* the parent's map */
    char *fk, *fku; /* <fk>, <fk>_uuid */
    char *fn_child, *fn_map; /* v7fill.<...> trigger functions */
    char *trg_map; /* the trigger on the parent's map */
    char *idx_fk, *idx_fku, *fkey;
    char fkey_name[64];
} CtNames;

/* The objects' common stem: migrate_object_name cut to leave room for a suffix. */
static void
names_stem(const char *into_schema, const char *child_into, char obj[64])
{
    migrate_object_name(into_schema, child_into, obj);
    obj[52] = '\0';
}

void
migrate_childtable_fkey_name(const char *into_schema, const char *child_into, char out[64])
{
    char obj[64];

    names_stem(into_schema, child_into, obj);
    (void) snprintf(out, 64, "%s_fkey", obj);
}

static void
names_make(PgConn *c, const MigrateSpec *ps, const MigrateChild *ch, CtNames *n)
{
    char obj[64], buf[128], uuid_col[128];

    names_stem(ps->into_schema, ch->into_table, obj);
    (void) snprintf(uuid_col, sizeof uuid_col, "%s_uuid", ch->fk_column);
    n->child = pg_qualified(c, ps->into_schema, ch->into_table);
    n->parent = pg_qualified(c, ps->into_schema, ps->into_table);
    n->map = pg_qualified(c, ps->into_schema, ps->map_table);
    n->fk = pg_ident(c, ch->fk_column);
    n->fku = pg_ident(c, uuid_col);
    (void) snprintf(buf, sizeof buf, "%s_fk", obj);
    n->fn_child = pg_qualified(c, "v7fill", buf);
    (void) snprintf(buf, sizeof buf, "%s_map", obj);
    n->fn_map = pg_qualified(c, "v7fill", buf);
    n->trg_map = pg_ident(c, obj);
    (void) snprintf(buf, sizeof buf, "%s_k", obj);
    n->idx_fk = pg_ident(c, buf);
    (void) snprintf(buf, sizeof buf, "%s_u", obj);
    n->idx_fku = pg_ident(c, buf);
    migrate_childtable_fkey_name(ps->into_schema, ch->into_table, n->fkey_name);
    n->fkey = pg_ident(c, n->fkey_name);
}

static void
names_free(CtNames *n)
{
    free(n->child);
    free(n->parent);
    free(n->map);
    free(n->fk);
    free(n->fku);
    free(n->fn_child);
    free(n->fn_map);
    free(n->trg_map);
    free(n->idx_fk);
    free(n->idx_fku);
    free(n->fkey);
}

bool
migrate_childtable_prepare(PgConn *src, PgConn *target, const MigrateSpec *ps,
                           const MigrateChild *ch, Err *err)
{
    char key[64], tc[64];
    MigrateSource d;
    CtNames n;
    Buf ddl;
    bool exists = false, ok = false;
    char *sql = NULL;

    memset(&d, 0, sizeof d);
    memset(&n, 0, sizeof n);
    buf_init(&ddl);
    names_make(target, ps, ch, &n);
    if (!migrate_childtable_key(src, ps, ch, key, tc, err) ||
        !migrate_ddl_describe(src, ch->schema, ch->table, key, tc, &d, err))
        goto out;
    {
        const char *params[1] = {n.child};
        PGresult *res;

        if (!pg_query(target, "SELECT to_regclass($1) IS NOT NULL", 1, params, &res, err))
            goto out;
        exists = PQgetvalue(res, 0, 0)[0] == 't';
        PQclear(res);
    }
    if (exists && !migrate_ddl_check_target(target, &d, ps->into_schema, ch->into_table, err))
        goto out;
    buf_puts(&ddl, "BEGIN;\n");
    if (!exists)
        migrate_ddl_target(target, &d, ps->into_schema, ch->into_table, &ddl);
    /* The child target is written by v7fill alone before the switch: plain
     * DDL, no lock_timeout dance. */
    buf_printf(&ddl,
               "ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s uuid;\n"
               "CREATE INDEX IF NOT EXISTS %s ON %s (%s);\n"
               "CREATE INDEX IF NOT EXISTS %s ON %s (%s);\n"
               "CREATE SCHEMA IF NOT EXISTS v7fill;\n",
               n.child, n.fku, n.idx_fk, n.child, n.fk, n.idx_fku, n.child, n.fku);
    /* SECURITY DEFINER, search_path pinned, every name qualified, the map
     * row read FOR KEY SHARE (a parent being deleted leaves no uuid, not a
     * foreign key error at the commit): as expand's. */
    buf_printf(&ddl,
               "CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql\n"
               "  SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS " CT_TAG "\n"
               "BEGIN\n"
               "  NEW.%s := COALESCE((SELECT m.id FROM %s m WHERE m.legacy_id = NEW.%s\n"
               "                         FOR KEY SHARE),\n"
               "                     CASE WHEN TG_OP = 'INSERT' THEN NEW.%s END);\n"
               "  RETURN NEW;\n"
               "END\n" CT_TAG ";\n"
               "CREATE OR REPLACE TRIGGER v7fill_fk_uuid BEFORE INSERT OR UPDATE OF %s ON %s\n"
               "  FOR EACH ROW EXECUTE FUNCTION %s();\n",
               n.fn_child, n.fku, n.map, n.fk, n.fku, n.fk, n.child, n.fn_child);
    /* A child row applied before its parent's map row (the two slots have no
     * common order) gets its uuid when the map row arrives; a parent's map
     * row deleted (the parent deleted) takes it away again. */
    {
        MapTrig mt = {n.child,   n.fk,      n.fku,           n.map, n.parent,
                      n.fn_map,  n.trg_map, MAPTRIG_FOLLOW_MAP, NULL,  NULL};

        if (!migrate_maptrig_sql(&mt, CT_TAG, &ddl))
        {
            err_set(err, EC_CONFIG, "child %s.%s: its names hold the dollar-quote tag %s",
                    ch->schema, ch->table, CT_TAG);
            goto out;
        }
    }
    buf_puts(&ddl, "COMMIT;\n");
    if (strstr(ddl.data, CT_TAG "\n") != strstr(ddl.data, CT_TAG) ||
        strstr(n.child, CT_TAG) || strstr(n.map, CT_TAG) || strstr(n.fk, CT_TAG) ||
        strstr(n.fku, CT_TAG))
    {
        err_set(err, EC_CONFIG, "child %s.%s: its names hold the dollar-quote tag %s",
                ch->schema, ch->table, CT_TAG);
        goto out;
    }
    if (!pg_exec(target, ddl.data, err))
    {
        Err rb = {0};

        if (!pg_exec(target, "ROLLBACK", &rb))
            log_debug("rollback: %s", rb.msg);
        err_prefix(err, "preparing the child's target %s.%s", ps->into_schema, ch->into_table);
        goto out;
    }
    if (!exists)
        log_info("created the child's target %s.%s (partitioned by RANGE (id))",
                 ps->into_schema, ch->into_table);
    ok = true;
out:
    free(sql);
    buf_free(&ddl);
    names_free(&n);
    migrate_source_free(&d);
    return ok;
}

bool
migrate_childtable_sync(PgConn *target, const MigrateOptions *o, const MigrateSpec *ps,
                        const MigrateChild *ch, StreamStats *copy, Err *err)
{
    char key[64], tc[64], from[160], into[160];
    MigrateOptions co;
    MigrateResult cr;
    PgConn *src = NULL;
    bool ok;

    if (!pg_connect(ps->source_conninfo[0] ? ps->source_conninfo : o->target_conninfo, &src,
                    err))
    {
        err_prefix(err, "the source");
        return false;
    }
    ok = migrate_childtable_key(src, ps, ch, key, tc, err);
    pg_close(src);
    if (!ok)
        return false;
    migrate_childtable_options(o, ps, ch, key, from, into, &co);
    co.time_column = tc;
    ok = migrate_run(target, &co, &cr, err);
    if (ok && !cr.copied && interrupt_signal() == 0)
        ok = err_set(err, EC_INTERNAL, "child %s.%s: its copy did not finish", ch->schema,
                     ch->table);
    if (ok && copy)
    {
        uint64_t parent_lsn = copy->applied_lsn; /* the summary's position stays the parent's */

        migrate_stream_stats_add(copy, &cr.copy);
        copy->copied += cr.copy.copied;
        copy->applied_lsn = parent_lsn;
    }
    migrate_result_free(&cr);
    return ok;
}

bool
migrate_childtable_constrain(PgConn *target, const MigrateSpec *ps, const MigrateChild *ch,
                             ChildStats *st, Err *err)
{
    CtNames n;
    PGresult *res;
    char *sql;
    const char *params[2];
    bool ok;

    memset(st, 0, sizeof *st);
    names_make(target, ps, ch, &n);
    sql = xasprintf("SELECT count(*), count(*) FILTER (WHERE %s IS NULL),"
                    " count(*) FILTER (WHERE %s IS NOT NULL AND %s IS NULL),"
                    " (SELECT string_agg(k::text, ',') FROM (SELECT DISTINCT %s AS k FROM %s"
                    "   WHERE %s IS NOT NULL AND %s IS NULL ORDER BY 1 LIMIT 10) o)"
                    " FROM %s",
                    n.fk, n.fk, n.fku, n.fk, n.child, n.fk, n.fku, n.child);
    ok = pg_query(target, sql, 0, NULL, &res, err);
    free(sql);
    if (ok)
    {
        st->rows = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
        st->null_keys = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
        st->orphans = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
        (void) snprintf(st->orphan_examples, sizeof st->orphan_examples, "%s",
                        PQgetvalue(res, 0, 3));
        PQclear(res);
        params[0] = n.fkey_name;
        params[1] = ps->into_schema;
        ok = pg_query(target,
                      "SELECT count(*) FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_namespace"
                      " s ON s.oid = k.connamespace WHERE k.conname = $1 AND s.nspname = $2",
                      2, params, &res, err);
    }
    if (ok)
    {
        bool have = strcmp(PQgetvalue(res, 0, 0), "0") != 0;

        PQclear(res);
        if (!have)
        {
            /* ON DELETE SET NULL: the parent's slot may apply a delete before
             * the child's slot applies its children's; DEFERRABLE: within one
             * applied transaction the map may be written before the row. */
            sql = xasprintf("ALTER TABLE %s ADD CONSTRAINT %s FOREIGN KEY (%s) REFERENCES %s (id)"
                            " ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED",
                            n.child, n.fkey, n.fku, n.parent);
            ok = pg_exec(target, sql, err);
            free(sql);
            if (ok)
                log_info("child %s.%s: foreign key %s added", ps->into_schema, ch->into_table,
                         n.fkey_name);
            else
                err_prefix(err, "the foreign key of %s.%s", ps->into_schema, ch->into_table);
        }
        st->fk_added = st->fk_validated = ok;
    }
    names_free(&n);
    return ok;
}

bool
migrate_childtable_run_all(PgConn *src, PgConn *target, const MigrateOptions *o,
                           const MigrateSpec *ps, MigrateResult *r, Err *err)
{
    if (ps->nchildren == 0 || ps->child_mode != MIGRATE_CHILD_MIGRATE)
        return true;
    if (r->children == NULL)
    {
        r->children = xcalloc(ps->nchildren, sizeof *r->children);
        r->nchildren = ps->nchildren;
    }
    for (size_t i = 0; i < ps->nchildren && interrupt_signal() == 0; i++)
    {
        const MigrateChild *ch = &ps->children[i];

        if (!migrate_childtable_prepare(src, target, ps, ch, err) ||
            !migrate_childtable_sync(target, o, ps, ch, NULL, err) ||
            (interrupt_signal() == 0 &&
             !migrate_childtable_constrain(target, ps, ch, &r->children[i], err)))
        {
            err_prefix(err, "child %s.%s", ch->schema, ch->table);
            return false;
        }
        log_info("child %s.%s -> %s.%s: %" PRIu64 " rows, %" PRIu64 " orphans, %" PRIu64
                 " NULL keys",
                 ch->schema, ch->table, ps->into_schema, ch->into_table, r->children[i].rows,
                 r->children[i].orphans, r->children[i].null_keys);
    }
    return true;
}

/* ---- verify ---------------------------------------------------------------------------- */

/* n checks appended to the report. */
static void
report_append(VerifyReport *out, const VerifyCheck *v, size_t n)
{
    out->checks = xrealloc(out->checks, (out->n + n + 1) * sizeof *out->checks);
    if (n)
        memcpy(out->checks + out->n, v, n * sizeof *v);
    out->n += n;
}

/* A new check (OK until told otherwise) at the report's end. */
static VerifyCheck *
report_add(VerifyReport *out, const char *table, const char *check)
{
    VerifyCheck c = {.ok = true};

    (void) snprintf(c.table, sizeof c.table, "%s", table);
    (void) snprintf(c.check, sizeof c.check, "%s", check);
    report_append(out, &c, 1);
    return &out->checks[out->n - 1];
}

/* <fk> against <fk>_uuid in the child target, through the parent's map. */
static bool
verify_keys(PgConn *target, const CtNames *n, const char *name, VerifyReport *out, Err *err)
{
    char *sql = xasprintf(
        "SELECT count(*) FILTER (WHERE c.%s IS NOT NULL),"
        " count(*) FILTER (WHERE c.%s IS NOT NULL AND c.%s = m.id),"
        " count(*) FILTER (WHERE c.%s IS NOT NULL AND c.%s IS DISTINCT FROM m.id),"
        " (array_agg(c.%s::text ORDER BY c.%s) FILTER (WHERE c.%s IS NOT NULL AND c.%s IS DISTINCT"
        "   FROM m.id))[1:5]::text,"
        " count(*) FILTER (WHERE c.%s IS NOT NULL AND m.id IS NULL),"
        " (array_agg(DISTINCT c.%s::text) FILTER (WHERE c.%s IS NOT NULL AND m.id IS NULL))[1:5]::text,"
        " count(*) FILTER (WHERE c.%s IS NULL),"
        " count(*) FILTER (WHERE c.%s IS NULL AND c.%s IS NOT NULL)"
        " FROM %s c LEFT JOIN %s m ON m.legacy_id = c.%s",
        n->fk, n->fk, n->fku, n->fk, n->fku, n->fk, n->fk, n->fk, n->fku, n->fk, n->fk, n->fk,
        n->fk, n->fk, n->fku, n->child, n->map, n->fk);
    PGresult *res;
    VerifyCheck *c;
    bool ok = pg_query(target, sql, 0, NULL, &res, err);

    free(sql);
    if (!ok)
        return false;
    c = report_add(out, name, "child keys");
    c->source = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    c->target = strtoull(PQgetvalue(res, 0, 1), NULL, 10) +
                strtoull(PQgetvalue(res, 0, 4), NULL, 10);
    c->ok = strcmp(PQgetvalue(res, 0, 2), "0") == 0;
    if (!c->ok)
        (void) snprintf(c->detail, sizeof c->detail, "%s rows whose uuid is not the map's: keys %s",
                        PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3));
    c = report_add(out, name, "orphans");
    c->source = c->target = strtoull(PQgetvalue(res, 0, 4), NULL, 10);
    if (c->source)
        (void) snprintf(c->detail, sizeof c->detail, "keys with no parent: %s",
                        PQgetvalue(res, 0, 5));
    c = report_add(out, name, "NULL keys");
    c->source = c->target = strtoull(PQgetvalue(res, 0, 6), NULL, 10);
    c->ok = strcmp(PQgetvalue(res, 0, 7), "0") == 0;
    if (!c->ok)
        (void) snprintf(c->detail, sizeof c->detail, "%s rows with a NULL key have a uuid",
                        PQgetvalue(res, 0, 7));
    PQclear(res);
    return true;
}

/* (child key, parent key) pairs: the legacy tables joined on <fk>, the new ones on <fk>_uuid;
 * counted and hashed (a sum of the server's 64-bit text hash: order free).  Legacy rows no
 * UUIDv7 can carry (a time NULL or before 1970: rejected with their reason) have no pair on the
 * new side: a child's own are left out (its "rejected" check lists them), the children of such
 * a parent are counted and named apart (orphans by rejection, not a mismatch). */
/* The legacy side's table of a migration, under its name now (after the
 * switch: <from>_legacy). */
static char *
live_source(PgConn *c, const MigrateSpec *s)
{
    MigrateLiveNames l;

    migrate_live_names(s, &l);
    return pg_qualified(c, l.src_schema, l.src_table);
}

static bool
verify_pairs(PgConn *src, PgConn *target, const MigrateSpec *ps, const MigrateSpec *cs,
             const MigrateChild *ch, const CtNames *n, const char *name, VerifyReport *out,
             Err *err)
{
    char *lc = live_source(src, cs);
    char *lp = live_source(src, ps);
    char *lk = pg_ident(src, cs->key);
    char *pk = pg_ident(src, ps->key);
    char *ct = pg_ident(src, cs->time_column);
    char *pt = pg_ident(src, ps->time_column);
    char *old_sql = xasprintf(
        "SELECT count(*) FILTER (WHERE p.%s >= 'epoch'), coalesce(sum(hashtextextended(c.%s::text"
        " || ',' || p.%s::text, 0)) FILTER (WHERE p.%s >= 'epoch'), 0)::text,"
        " count(*) FILTER (WHERE p.%s IS NULL OR p.%s < 'epoch'),"
        " array_to_string((array_agg(DISTINCT p.%s ORDER BY p.%s) FILTER (WHERE p.%s IS NULL OR"
        " p.%s < 'epoch'))[1:5], ', ')"
        " FROM %s c JOIN %s p ON p.%s = c.%s WHERE c.%s >= 'epoch'",
        pt, lk, pk, pt, pt, pt, pk, pk, pt, pt, lc, lp, pk, n->fk, ct);
    char *new_sql = xasprintf("SELECT count(*), coalesce(sum(hashtextextended(c.legacy_id::text "
                              "|| ',' || p.legacy_id::text, 0)), 0)::text FROM %s c JOIN %s p "
                              "ON p.id = c.%s",
                              n->child, n->parent, n->fku);
    PGresult *a = NULL, *b = NULL;
    bool ok = pg_query(src, old_sql, 0, NULL, &a, err) &&
              pg_query(target, new_sql, 0, NULL, &b, err);

    if (ok)
    {
        VerifyCheck *c = report_add(out, name, "rejected parents");

        c->source = strtoull(PQgetvalue(a, 0, 2), NULL, 10);
        if (c->source)
            (void) snprintf(c->detail, sizeof c->detail,
                            "child rows of rejected parents: %s (keys %s)", PQgetvalue(a, 0, 2),
                            PQgetvalue(a, 0, 3));
        c = report_add(out, name, "join pairs");
        c->source = strtoull(PQgetvalue(a, 0, 0), NULL, 10);
        c->target = strtoull(PQgetvalue(b, 0, 0), NULL, 10);
        c->ok = c->source == c->target && strcmp(PQgetvalue(a, 0, 1), PQgetvalue(b, 0, 1)) == 0;
        if (!c->ok)
            (void) snprintf(c->detail, sizeof c->detail,
                            "the pairs through %s and through %s_uuid differ", ch->fk_column,
                            ch->fk_column);
    }
    PQclear(a);
    PQclear(b);
    free(old_sql);
    free(new_sql);
    free(lc);
    free(lp);
    free(lk);
    free(pk);
    free(ct);
    free(pt);
    return ok;
}

bool
migrate_childtable_verify_links(PgConn *src, PgConn *target, const MigrateSpec *ps,
                                const MigrateChild *ch, const MigrateSpec *cs, VerifyReport *out,
                                Err *err)
{
    CtNames n;
    char name[130];
    bool ok;

    MigrateLiveNames cl, pl;

    /* After the switch the two UUIDv7 tables have their new names. */
    migrate_live_names(cs, &cl);
    migrate_live_names(ps, &pl);
    (void) snprintf(name, sizeof name, "%s.%s", cl.new_schema, cl.new_table);
    names_make(target, ps, ch, &n);
    free(n.child);
    free(n.parent);
    n.child = pg_qualified(target, cl.new_schema, cl.new_table);
    n.parent = pg_qualified(target, pl.new_schema, pl.new_table);
    ok = verify_keys(target, &n, name, out, err) &&
         verify_pairs(src, target, ps, cs, ch, &n, name, out, err);
    names_free(&n);
    return ok;
}

bool
migrate_childtable_verify(PgConn *src, PgConn *target, const MigrateSpec *ps,
                          const MigrateChild *ch, VerifyReport *out, Err *err)
{
    MigrateSpec cs;
    VerifyReport sub;
    char name[130];
    bool found = false, ok;

    memset(&sub, 0, sizeof sub);
    (void) snprintf(name, sizeof name, "%s.%s", ps->into_schema, ch->into_table);
    if (!migrate_state_get(target, ps->into_schema, ch->into_table, &cs, &found, err))
        return false;
    if (!found)
    {
        VerifyCheck *c = report_add(out, name, "rows");

        c->ok = false;
        (void) snprintf(c->detail, sizeof c->detail,
                        "the child %s.%s is not migrated yet (no v7fill.migration row)",
                        ch->schema, ch->table);
        return true;
    }
    ok = migrate_verify(src, target, &cs, &sub, err);
    report_append(out, sub.checks, sub.n);
    verify_report_free(&sub);
    ok = ok && migrate_childtable_verify_links(src, target, ps, ch, &cs, out, err);
    migrate_spec_free(&cs);
    return ok;
}

/* The trigger on the parent's map: made again (hook) or dropped. */
static bool
map_hook(PgConn *c, const MigrateSpec *ps, const MigrateChild *ch, bool hook, Err *err)
{
    CtNames n;
    bool ok;

    names_make(c, ps, ch, &n);
    if (hook)
    {
        char *sql = xasprintf("CREATE OR REPLACE TRIGGER %s AFTER INSERT OR UPDATE OR DELETE ON %s "
                              "FOR EACH ROW EXECUTE FUNCTION %s()",
                              n.trg_map, n.map, n.fn_map);

        ok = pg_exec(c, sql, err);
        free(sql);
    }
    else
        ok = migrate_maptrig_drop(c, n.trg_map, n.map, err);
    names_free(&n);
    return ok;
}

bool
migrate_childtable_unhook(PgConn *c, const MigrateSpec *ps, const MigrateChild *ch, Err *err)
{
    return map_hook(c, ps, ch, false, err);
}

bool
migrate_childtable_rehook(PgConn *c, const MigrateSpec *ps, const MigrateChild *ch, Err *err)
{
    return map_hook(c, ps, ch, true, err);
}
