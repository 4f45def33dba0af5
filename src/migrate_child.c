/*
 * Children of a migration in expand mode (migrate_child.h): <fk>_uuid added,
 * kept current by a trigger, filled from the map in short batches, then
 * constrained to <into>(id).
 *
 * One batch is a read (no row locks: the child's rows along its primary key,
 * with the map's id joined in the same database or looked up with = ANY in
 * the map's database) and, when rows need it, one write transaction:
 *
 *   BEGIN; SET LOCAL lock_timeout = 'Nms';
 *   UPDATE child c SET fk_uuid = u.id FROM unnest($pk..., $fk, $id) u
 *    WHERE c.pk = u.pk AND c.fk = u.fk AND c.fk_uuid IS DISTINCT FROM u.id;
 *   COMMIT;
 *
 * `c.fk = u.fk` is rechecked on the row's newest version when a concurrent
 * writer changed it meanwhile: a row whose key moved is left to the trigger
 * (which set its uuid for the new key), never given the old parent's id.
 */
#include "v7fill/migrate_child.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/migrate_maptrig.h"
#include "v7fill/monotime.h"

/* What the catalog says about one child. */
typedef struct Child
{
    char oid[16];
    char relkind;
    char fk_attnum[8];
    char fk_type[128];
    bool fk_not_null;       /* <fk> is NOT NULL */
    char uuid_col[64];      /* <fk>_uuid */
    char uuid_type[128];    /* its type, "" when it is missing */
    char uuid_attnum[8];
    int npk;
    char **pk_names;
    char **pk_types;
    /* quoted */
    char *qchild;
    char *qfk;
    char *quuid;
    char *qmap;
    char **qpk;
} Child;

static void
child_free(Child *c)
{
    for (int i = 0; i < c->npk; i++)
    {
        free(c->pk_names[i]);
        free(c->pk_types[i]);
        free(c->qpk[i]);
    }
    free(c->pk_names);
    free(c->pk_types);
    free(c->qpk);
    free(c->qchild);
    free(c->qfk);
    free(c->quuid);
    free(c->qmap);
    memset(c, 0, sizeof *c);
}

static bool find_fk(PgConn *conn, const MigrateSpec *spec, const Child *c, char *name, size_t size,
                    bool *validated, bool *into_exists, Err *err);

bool
migrate_child_same_database(const MigrateSpec *spec)
{
    return spec->source_conninfo[0] == '\0';
}

static void
sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* The child's oid, kind, key column, <fk>_uuid and primary key. */
static bool
child_describe(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch, Child *c, Err *err)
{
    PGresult *res;
    const char *params[4];

    memset(c, 0, sizeof *c);
    if (strlen(ch->fk_column) + 5 > 63)
        return err_set(err, EC_CONFIG,
                       "child %s.%s: the column \"%s_uuid\" would be longer than 63 bytes",
                       ch->schema, ch->table, ch->fk_column);
    (void) snprintf(c->uuid_col, sizeof c->uuid_col, "%s_uuid", ch->fk_column);
    params[0] = ch->schema;
    params[1] = ch->table;
    params[2] = ch->fk_column;
    params[3] = c->uuid_col;
    if (!pg_query(conn,
                  "SELECT c.oid::text, c.relkind::text, fk.attnum::text, "
                  "       format_type(fk.atttypid, fk.atttypmod), "
                  "       coalesce(format_type(u.atttypid, u.atttypmod), ''), "
                  "       coalesce(u.attnum::text, ''), fk.attnotnull::text "
                  "  FROM pg_catalog.pg_class c "
                  "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                  "  LEFT JOIN pg_catalog.pg_attribute fk ON fk.attrelid = c.oid "
                  "       AND fk.attname = $3 AND fk.attnum > 0 AND NOT fk.attisdropped "
                  "  LEFT JOIN pg_catalog.pg_attribute u ON u.attrelid = c.oid "
                  "       AND u.attname = $4 AND u.attnum > 0 AND NOT u.attisdropped "
                  " WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
                  4, params, &res, err))
        return false;
    if (PQntuples(res) == 0)
    {
        PQclear(res);
        return err_set(err, EC_CONFIG, "child table %s.%s does not exist", ch->schema, ch->table);
    }
    if (PQgetisnull(res, 0, 2))
    {
        PQclear(res);
        return err_set(err, EC_CONFIG, "child table %s.%s has no column \"%s\"", ch->schema,
                       ch->table, ch->fk_column);
    }
    (void) snprintf(c->oid, sizeof c->oid, "%s", PQgetvalue(res, 0, 0));
    c->relkind = PQgetvalue(res, 0, 1)[0];
    (void) snprintf(c->fk_attnum, sizeof c->fk_attnum, "%s", PQgetvalue(res, 0, 2));
    (void) snprintf(c->fk_type, sizeof c->fk_type, "%s", PQgetvalue(res, 0, 3));
    (void) snprintf(c->uuid_type, sizeof c->uuid_type, "%s", PQgetvalue(res, 0, 4));
    (void) snprintf(c->uuid_attnum, sizeof c->uuid_attnum, "%s", PQgetvalue(res, 0, 5));
    c->fk_not_null = strcmp(PQgetvalue(res, 0, 6), "true") == 0;
    PQclear(res);
    if (c->uuid_type[0] && strcmp(c->uuid_type, "uuid") != 0)
        return err_set(err, EC_CONFIG, "child table %s.%s has a column \"%s\" of type %s, not uuid",
                       ch->schema, ch->table, c->uuid_col, c->uuid_type);

    params[0] = c->oid;
    if (!pg_query(conn,
                  "SELECT a.attname, format_type(a.atttypid, a.atttypmod) "
                  "  FROM pg_catalog.pg_index i, unnest(i.indkey) WITH ORDINALITY k(attnum, ord), "
                  "       pg_catalog.pg_attribute a "
                  " WHERE i.indrelid = $1::oid AND i.indisprimary "
                  "   AND a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.ord",
                  1, params, &res, err))
        return false;
    c->npk = PQntuples(res);
    if (c->npk == 0)
    {
        PQclear(res);
        err_set(err, EC_CONFIG, "child table %s.%s has no primary key", ch->schema, ch->table);
        err_detail(err, "The fill walks the child in batches along its primary key.");
        return false;
    }
    c->pk_names = xcalloc((size_t) c->npk, sizeof(char *));
    c->pk_types = xcalloc((size_t) c->npk, sizeof(char *));
    c->qpk = xcalloc((size_t) c->npk, sizeof(char *));
    for (int i = 0; i < c->npk; i++)
    {
        c->pk_names[i] = xstrdup(PQgetvalue(res, i, 0));
        c->pk_types[i] = xstrdup(PQgetvalue(res, i, 1));
        c->qpk[i] = pg_ident(conn, c->pk_names[i]);
    }
    PQclear(res);
    c->qchild = pg_qualified(conn, ch->schema, ch->table);
    c->qfk = pg_ident(conn, ch->fk_column);
    c->quuid = pg_ident(conn, c->uuid_col);
    c->qmap = pg_qualified(conn, spec->into_schema, spec->map_table);
    return true;
}

static bool
retryable(const Err *e)
{
    return strcmp(e->sqlstate, "55P03") == 0 || strcmp(e->sqlstate, "40P01") == 0;
}

/* One transaction under SET LOCAL lock_timeout: `sql` with parameters (or,
 * without, possibly several statements); *affected its row count. */
static bool
tx_once(PgConn *conn, int lock_ms, const char *sql, int np, const char *const *pv,
        uint64_t *affected, Err *err)
{
    char begin[96];
    Err ignored;
    PGresult *res = NULL;
    bool ok;

    (void) snprintf(begin, sizeof begin, "BEGIN; SET LOCAL lock_timeout = '%dms'", lock_ms);
    if (!pg_exec(conn, begin, err))
        return false;
    if (np == 0)
        ok = pg_exec(conn, sql, err);
    else
    {
        ok = pg_query(conn, sql, np, pv, &res, err);
        if (ok && affected)
            *affected = strtoull(PQcmdTuples(res), NULL, 10);
        PQclear(res);
    }
    if (ok && pg_exec(conn, "COMMIT", err))
        return true;
    err_clear(&ignored);
    if (!pg_exec(conn, "ROLLBACK", &ignored))
        log_debug("rollback: %s", ignored.msg);
    return false;
}

/* tx_once, retried on lock_timeout and deadlock; `what` names it in errors.
 * `timed`: its duration counts into st->longest_wait_ms. */
static bool
tx_retry(PgConn *conn, int lock_ms, const char *what, const char *sql, int np,
         const char *const *pv, bool timed, ChildStats *st, uint64_t *affected, Err *err)
{
    for (int attempt = 1;; attempt++)
    {
        int64_t t0 = monotime_ms();
        bool ok = tx_once(conn, lock_ms, sql, np, pv, affected, err);
        int64_t took = monotime_ms() - t0;

        if (timed && took > st->longest_wait_ms)
            st->longest_wait_ms = took;
        if (ok)
            return true;
        if (!retryable(err) || attempt >= MIGRATE_CHILD_ATTEMPTS)
        {
            err_prefix(err, "%s", what);
            if (retryable(err))
                err_hint(err, "Each of %d attempts waited %d ms for its lock; "
                              "retry when the table is less busy.",
                         attempt, lock_ms);
            return false;
        }
        st->lock_retries++;
        log_debug("%s: %s (attempt %d, retrying)", what, err->msg, attempt);
        sleep_ms(attempt * 20 < 1000 ? attempt * 20 : 1000);
        if (interrupt_signal() != 0)
            return err_set(err, EC_INTERRUPTED, "%s: interrupted by %s", what, interrupt_name());
    }
}

/* The trigger's name on the child: v7fill_<fk>_uuid, or by attnum when too long. */
static void
trigger_name(const Child *c, char *out, size_t size)
{
    if (strlen(c->uuid_col) + 7 <= 63)
        (void) snprintf(out, size, "v7fill_%s", c->uuid_col);
    else
        (void) snprintf(out, size, "v7fill_uuid_%s", c->fk_attnum);
}

/* The second trigger's name on the child (the way back's rule):
 * v7fill_<fk>_uuid_back, or by attnum when too long; its function's. */
static void
back_names(const Child *c, char *trg, size_t tsize, char *fn, size_t fsize)
{
    if (strlen(c->uuid_col) + 12 <= 63)
        (void) snprintf(trg, tsize, "v7fill_%s_back", c->uuid_col);
    else
        (void) snprintf(trg, tsize, "v7fill_back_%s", c->fk_attnum);
    (void) snprintf(fn, fsize, "child_back_%s_%s", c->oid, c->fk_attnum);
}

/* Whether the way back's rule records rows in MIGRATE_CHILD_MOVED_TABLE: a
 * NOT NULL <fk> it cannot always set (its body writes that table, so it runs
 * as its owner). */
static bool
back_records(const Child *c)
{
    return c->fk_not_null;
}

/* The body of the way back's rule.  Before the switch (legacy_q NULL) it does
 * nothing: v7fill's fills and the map's trigger write <fk>_uuid then.  From
 * the switch on, the application writes <fk>_uuid: one that moves a row to
 * another parent by <fk>_uuid alone (or clears it) makes <fk> the map's
 * legacy key of the new uuid where the legacy table (legacy_q, under its
 * name after the switch) has it, else NULL (same database), or NULL (two
 * databases: the map is out of reach); switching back fills the NULL keys
 * from the map (migrate_childkeys.h).  A NOT NULL <fk> that cannot be set so
 * (always between two databases) keeps its value, and the new uuid is
 * recorded in MIGRATE_CHILD_MOVED_TABLE: switching back sets the key of the
 * rows holding it from the map. */
static char *
back_body(const Child *c, const MigrateSpec *spec, PgConn *conn, const char *legacy_q)
{
    char *key, *body, *record, *tail;

    if (legacy_q == NULL)
        return xstrdup("BEGIN\n  RETURN NEW;\nEND\n");
    record = xasprintf("INSERT INTO " MIGRATE_CHILD_MOVED_TABLE " (relid, id) VALUES (%s, NEW.%s)"
                       " ON CONFLICT DO NOTHING;",
                       c->oid, c->quuid);
    if (!migrate_child_same_database(spec))
    {
        body = c->fk_not_null
                   ? xasprintf("BEGIN\n  IF NEW.%s IS NOT NULL THEN\n    %s\n  END IF;\n"
                               "  RETURN NEW;\nEND\n",
                               c->quuid, record)
                   : xasprintf("BEGIN\n  NEW.%s := NULL;\n  RETURN NEW;\nEND\n", c->qfk);
        free(record);
        return body;
    }
    /* NOT NULL: a uuid the map or the legacy table lacks (or none) leaves
     * the key as it was rather than fail the application's write, and is
     * recorded. */
    tail = c->fk_not_null ? xasprintf("  IF NEW.%s IS NULL THEN\n"
                                      "    NEW.%s := OLD.%s;\n"
                                      "    IF NEW.%s IS NOT NULL THEN\n"
                                      "      %s\n"
                                      "    END IF;\n"
                                      "  END IF;\n",
                                      c->qfk, c->qfk, c->qfk, c->quuid, record)
                          : xstrdup("");
    key = pg_ident(conn, spec->key);
    body = xasprintf("BEGIN\n"
                     "  NEW.%s := (SELECT m.legacy_id FROM %s m WHERE m.id = NEW.%s\n"
                     "              AND EXISTS (SELECT 1 FROM %s l WHERE l.%s = m.legacy_id));\n"
                     "%s"
                     "  RETURN NEW;\n"
                     "END\n",
                     c->qfk, c->qmap, c->quuid, legacy_q, key, tail);
    free(key);
    free(tail);
    free(record);
    return body;
}

/* A dollar-quote tag that no quoted name contains. */
static const char *
pick_tag(const char *body)
{
    static const char *const tags[] = {"$v7fill$", "$v7fill_1$", "$v7fill_2$", "$v7fill_3$"};

    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        if (strstr(body, tags[i]) == NULL)
            return tags[i];
    return NULL;
}

/* CREATE OR REPLACE FUNCTION v7fill.<fname>() of the way back's rule, ";\n"
 * ended; NULL when every tag is in the body. */
static char *
back_function_sql(PgConn *conn, const Child *c, const MigrateSpec *spec, const char *fname,
                  const char *legacy_q)
{
    char *body = back_body(c, spec, conn, legacy_q);
    const char *tag = pick_tag(body);
    char *qfn = pg_ident(conn, fname), *sql = NULL;

    if (tag)
        sql = xasprintf("CREATE OR REPLACE FUNCTION v7fill.%s() RETURNS trigger LANGUAGE plpgsql\n"
                        "  %sSET search_path = pg_catalog, pg_temp AS %s\n%s%s;\n",
                        qfn,
                        migrate_child_same_database(spec) || back_records(c) ? "SECURITY DEFINER "
                                                                              : "",
                        tag,
                        body, tag);
    free(qfn);
    free(body);
    return sql;
}

/* CREATE OR REPLACE TRIGGER of the way back's rule (qtrig, qfn quoted): it
 * fires only when a non-NULL <fk>_uuid changes and <fk> does not, so the
 * fills (NULL to a value) never call it. */
static char *
back_trigger_sql(const Child *c, const char *qtrig, const char *qfn)
{
    return xasprintf("CREATE OR REPLACE TRIGGER %s BEFORE UPDATE OF %s ON %s\n"
                     "  FOR EACH ROW WHEN (OLD.%s IS NOT NULL AND NEW.%s IS DISTINCT FROM OLD.%s "
                     "AND NEW.%s IS NOT DISTINCT FROM OLD.%s)\n"
                     "  EXECUTE FUNCTION v7fill.%s()",
                     qtrig, c->quuid, c->qchild, c->quuid, c->quuid, c->quuid, c->qfk, c->qfk,
                     qfn);
}

/* *sql: "" or, when a validated foreign key from <fk>_uuid to <into> exists,
 * the statement dropping it and adding it again NOT VALID (same name and
 * definition), ending in ";\n". */
static bool
revalidate(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch, const Child *c,
           char **sql, Err *err)
{
    char name[128];
    bool validated = false, into_exists = false;
    const char *params[2];
    PGresult *res;
    char *qname;

    *sql = NULL;
    if (!find_fk(conn, spec, c, name, sizeof name, &validated, &into_exists, err))
        return false;
    if (!name[0] || !validated)
        return true;
    params[0] = c->oid;
    params[1] = name;
    if (!pg_query(conn,
                  "SELECT pg_catalog.pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint "
                  "WHERE conrelid = $1::oid AND conname = $2",
                  2, params, &res, err))
        return false;
    if (PQntuples(res) != 1)
    {
        PQclear(res);
        return true;
    }
    qname = pg_ident(conn, name);
    *sql = xasprintf("ALTER TABLE %s DROP CONSTRAINT %s, ADD CONSTRAINT %s %s NOT VALID;\n",
                     c->qchild, qname, qname, PQgetvalue(res, 0, 0));
    PQclear(res);
    free(qname);
    log_warn("child %s.%s: the trigger keeping %s_uuid current was missing: changes of %s made "
             "meanwhile were not seen; the foreign key %s is made NOT VALID again, so that the fill reads "
             "every row before it is validated again",
             ch->schema, ch->table, ch->fk_column, ch->fk_column, name);
    return true;
}

bool
migrate_child_prepare(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch, Err *err)
{
    Child c;
    bool same = migrate_child_same_database(spec);
    bool has_trigger = false;
    char tname[80], fname[64], what[300];
    char *qtrig = NULL, *qfn = NULL, *sql = NULL, *fkfix = NULL, *body = NULL, *fn = NULL;
    char *when = NULL, *back = NULL, *qbtrig = NULL, *qbfn = NULL, *btrig = NULL;
    char btname[80], bfname[64];
    bool has_back = false;
    const char *tag;
    ChildStats st = {0};
    bool ok = false;

    if (!child_describe(conn, spec, ch, &c, err))
        goto out;
    trigger_name(&c, tname, sizeof tname);
    (void) snprintf(fname, sizeof fname, "child_uuid_%s_%s", c.oid, c.fk_attnum);
    back_names(&c, btname, sizeof btname, bfname, sizeof bfname);
    {
        /* Same database: the trigger reads the map; without it every write
         * of the child would fail. */
        const char *params[5] = {c.oid, tname, spec->into_schema, spec->map_table, btname};
        PGresult *res;

        if (!pg_query(conn,
                      "SELECT (SELECT count(*) FROM pg_catalog.pg_trigger "
                      "         WHERE tgrelid = $1::oid AND tgname = $2 AND NOT tgisinternal), "
                      "       (SELECT count(*) FROM pg_catalog.pg_class r "
                      "          JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace "
                      "         WHERE n.nspname = $3 AND r.relname = $4), "
                      "       (SELECT count(*) FROM pg_catalog.pg_trigger "
                      "         WHERE tgrelid = $1::oid AND tgname = $5 AND NOT tgisinternal)",
                      5, params, &res, err))
            goto out;
        has_trigger = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
        has_back = strcmp(PQgetvalue(res, 0, 2), "0") != 0;
        if (same && strcmp(PQgetvalue(res, 0, 1), "0") == 0)
        {
            PQclear(res);
            err_set(err, EC_CONFIG, "the map %s.%s does not exist", spec->into_schema,
                    spec->map_table);
            err_detail(err, "The trigger on %s.%s reads it; the migration's setup creates it "
                            "before the children are prepared.",
                       ch->schema, ch->table);
            goto out;
        }
        PQclear(res);
    }
    qtrig = pg_ident(conn, tname);
    qfn = pg_ident(conn, fname);
    if (same)
        /* An insert that gives the uuid itself and no key (the application
         * after the switch) keeps it; a key set or changed decides it; an
         * update naming the key unchanged (an ORM writes every column) leaves
         * the uuid as written (after the switch, a row moved by its uuid: the
         * way back's rule, back_body, makes the key follow).  FOR
         * KEY SHARE: the capture deletes a parent's map row and its row in
         * one transaction; a key read while that transaction is open would
         * name a parent that is gone by the foreign key's check, and the
         * application's write would fail where the legacy table (no foreign
         * key there) took it.  The lock waits for that transaction and then
         * finds no map row: the key has no uuid, as the parent's delete
         * would have left it. */
        body = xasprintf("BEGIN\n"
                         "  IF TG_OP = 'UPDATE' THEN\n"
                         "    IF NEW.%s IS NOT DISTINCT FROM OLD.%s THEN\n"
                         "      RETURN NEW;\n"
                         "    END IF;\n"
                         "  END IF;\n"
                         "  IF NEW.%s IS NOT NULL THEN\n"
                         "    NEW.%s := coalesce((SELECT m.id FROM %s m WHERE m.legacy_id = NEW.%s\n"
                         "                           FOR KEY SHARE),\n"
                         "                       CASE WHEN TG_OP = 'INSERT' THEN NEW.%s END);\n"
                         "  ELSIF TG_OP = 'UPDATE' THEN\n"
                         "    NEW.%s := NULL;\n"
                         "  END IF;\n"
                         "  RETURN NEW;\n"
                         "END\n",
                         c.qfk, c.qfk, c.qfk, c.quuid, c.qmap, c.qfk, c.quuid, c.quuid);
    else
        /* Two databases: the map is out of reach, so a key the application
         * changes (and the ON DELETE SET NULL of its legacy foreign key)
         * makes the uuid NULL instead of leaving the old parent's: the next
         * pass over the rows still NULL looks the new key up.  A key set
         * where there was none keeps the uuid (the way back fills the key of
         * rows written with only the uuid), and so does a write that sets
         * both. */
        body = xasprintf("BEGIN\n"
                         "  IF OLD.%s IS NOT NULL AND NEW.%s IS DISTINCT FROM OLD.%s\n"
                         "     AND NEW.%s IS NOT DISTINCT FROM OLD.%s THEN\n"
                         "    NEW.%s := NULL;\n"
                         "  END IF;\n"
                         "  RETURN NEW;\n"
                         "END\n",
                         c.qfk, c.qfk, c.qfk, c.quuid, c.quuid, c.quuid);
    tag = pick_tag(body);
    back = back_function_sql(conn, &c, spec, bfname, NULL);
    if (tag == NULL || back == NULL)
    {
        err_set(err, EC_CONFIG, "child %s.%s: its names hold every dollar-quote tag tried",
                ch->schema, ch->table);
        goto out;
    }
    qbtrig = pg_ident(conn, btname);
    qbfn = pg_ident(conn, bfname);
    btrig = back_trigger_sql(&c, qbtrig, qbfn);
    /* Same database: SECURITY DEFINER, the application's role writes the
     * child and need not read the map.  search_path pinned, every name
     * qualified. */
    fn = xasprintf("CREATE SCHEMA IF NOT EXISTS v7fill;\n"
                   "CREATE OR REPLACE FUNCTION v7fill.%s() RETURNS trigger LANGUAGE plpgsql\n"
                   "  %sSET search_path = pg_catalog, pg_temp AS %s\n%s%s;\n",
                   qfn, same ? "SECURITY DEFINER " : "", tag, body, tag);
    if (c.uuid_type[0] && has_trigger && !has_back)
    {
        /* Prepared by a version without the way back's rule: it is made now
         * (its function does nothing until the switch). */
        sql = xasprintf("%s%s%s", fn, back, btrig);
        (void) snprintf(what, sizeof what, "the trigger %s on %s.%s", btname, ch->schema,
                        ch->table);
        ok = tx_retry(conn, MIGRATE_CHILD_DDL_LOCK_TIMEOUT_MS, what, sql, 0, NULL, false, &st,
                      NULL, err);
        if (ok)
            log_info("child %s.%s: trigger %s added (from the switch on, a row moved to another "
                     "parent by %s alone gets that parent's legacy key%s)",
                     ch->schema, ch->table, btname, c.uuid_col,
                     same ? "" : " when switching back");
        goto out;
    }
    if (c.uuid_type[0] && has_trigger)
    {
        /* In place: only the function made again (a body an earlier version
         * wrote), which locks nothing the application uses. */
        (void) snprintf(what, sizeof what, "the trigger function of %s.%s", ch->schema,
                        ch->table);
        ok = tx_retry(conn, MIGRATE_CHILD_DDL_LOCK_TIMEOUT_MS, what, fn, 0, NULL, false, &st,
                      NULL, err);
        if (ok)
            log_debug("child %s.%s: %s and its trigger are in place", ch->schema, ch->table,
                      c.uuid_col);
        goto out;
    }
    /* The column is there and the trigger is not (dropped, a run killed
     * between the two, or two databases prepared by an earlier version): key
     * changes made without it went unseen.  Same database: a validated
     * foreign key on the column is made NOT VALID again in the same
     * transaction, so that the next fill reads every row
     * (migrate_child_can_catch_up) and constrain validates it again.  Two
     * databases: every run's fill reads every row. */
    if (same && c.uuid_type[0] && !revalidate(conn, spec, ch, &c, &fkfix, err))
        goto out;
    /* Two databases: the function's condition also as the trigger's WHEN, so
     * the updates that name <fk> without changing it (an ORM writing every
     * column) do not call it. */
    if (!same)
        when = xasprintf(" WHEN (OLD.%s IS NOT NULL AND NEW.%s IS DISTINCT FROM OLD.%s AND "
                         "NEW.%s IS NOT DISTINCT FROM OLD.%s)",
                         c.qfk, c.qfk, c.qfk, c.quuid, c.quuid);
    /* With the way back's rule: from the switch on the application writes
     * <fk>_uuid, and a row it moves to another parent by <fk>_uuid alone (or
     * clears) gets <fk> from the map (back_body).  v7fill's own writes of
     * <fk>_uuid only fill a NULL one, or come before the switch. */
    sql = xasprintf("%sALTER TABLE %s ADD COLUMN IF NOT EXISTS %s uuid;\n%s"
                    "CREATE OR REPLACE TRIGGER %s BEFORE %s OF %s ON %s\n"
                    "  FOR EACH ROW%s EXECUTE FUNCTION v7fill.%s();\n"
                    "%s%s",
                    fkfix ? fkfix : "", c.qchild, c.quuid, fn, qtrig,
                    same ? "INSERT OR UPDATE" : "UPDATE", c.qfk, c.qchild, when ? when : "",
                    qfn, back, btrig);
    (void) snprintf(what, sizeof what, "adding %s to %s.%s", c.uuid_col, ch->schema, ch->table);
    if (!tx_retry(conn, MIGRATE_CHILD_DDL_LOCK_TIMEOUT_MS, what, sql, 0, NULL, false, &st, NULL,
                  err))
        goto out;
    if (same)
        log_info("child %s.%s: %s added, kept current by trigger %s", ch->schema, ch->table,
                 c.uuid_col, tname);
    else
        log_info("child %s.%s: %s %s; the map is in another database, so fill passes keep it "
                 "current, and trigger %s makes it NULL when the application changes %s",
                 ch->schema, ch->table, c.uuid_col, c.uuid_type[0] ? "in place" : "added", tname,
                 ch->fk_column);
    ok = true;
out:
    free(sql);
    free(fkfix);
    free(fn);
    free(body);
    free(when);
    free(back);
    free(btrig);
    free(qbtrig);
    free(qbfn);
    free(qtrig);
    free(qfn);
    child_free(&c);
    return ok;
}

bool
migrate_child_back_rule(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch,
                        const char *legacy_q, Err *err)
{
    Child c;
    char btname[80], bfname[64], sig[96];
    const char *p[1] = {sig};
    PGresult *res = NULL;
    char *sql = NULL;
    bool ok = false, exists;

    if (!child_describe(conn, spec, ch, &c, err))
        return false;
    back_names(&c, btname, sizeof btname, bfname, sizeof bfname);
    (void) snprintf(sig, sizeof sig, "v7fill.%s()", bfname);
    if (!pg_query(conn, "SELECT pg_catalog.to_regprocedure($1) IS NOT NULL", 1, p, &res, err))
        goto out;
    exists = PQgetvalue(res, 0, 0)[0] == 't';
    if (!exists)
    {
        /* Prepared by an earlier version: no rule, as before. */
        if (legacy_q)
            log_warn("child %s.%s: no trigger %s (prepared by an earlier version): a row the "
                     "application moves to another parent by %s_uuid alone keeps its old %s",
                     ch->schema, ch->table, btname, ch->fk_column, ch->fk_column);
        ok = true;
        goto out;
    }
    /* Turned on with a NOT NULL <fk>: the table its rule records in. */
    if (legacy_q && back_records(&c) &&
        !pg_exec(conn,
                 "CREATE TABLE IF NOT EXISTS " MIGRATE_CHILD_MOVED_TABLE
                 " (relid oid NOT NULL, id uuid NOT NULL, PRIMARY KEY (relid, id))",
                 err))
        goto out;
    sql = back_function_sql(conn, &c, spec, bfname, legacy_q);
    ok = sql ? pg_exec(conn, sql, err)
             : err_set(err, EC_CONFIG, "child %s.%s: its names hold every dollar-quote tag tried",
                       ch->schema, ch->table);
out:
    if (!ok)
        err_prefix(err, "child %s.%s: the way back's rule", ch->schema, ch->table);
    PQclear(res);
    free(sql);
    child_free(&c);
    return ok;
}

/* ---- the map's trigger ----------------------------------------------------------------- */

/* A one-row query of two booleans. */
static bool
query_bools(PgConn *conn, const char *sql, int np, const char *const *params, bool *a, bool *b,
            Err *err)
{
    PGresult *res;

    if (!pg_query(conn, sql, np, params, &res, err))
        return false;
    *a = PQgetvalue(res, 0, 0)[0] == 't';
    *b = PQgetvalue(res, 0, 1)[0] == 't';
    PQclear(res);
    return true;
}

static bool
interrupted(void)
{
    return interrupt_signal() != 0;
}

/* CREATE INDEX CONCURRENTLY name `on` ("ON <table> (...) [WHERE ...]") in
 * the child's schema, after dropping the one an interrupted build left
 * invalid under that name (invalid).  It waits for the transactions open on
 * the database, so SIGINT/SIGTERM cancels it (EC_INTERRUPTED; the next run
 * finds the index invalid and builds it again). */
static bool
build_index(PgConn *conn, const MigrateChild *ch, const char *name, bool invalid, const char *on,
            Err *err)
{
    char *sql;
    bool ok = true, cancelled = false;

    log_info("child %s.%s: building index %s CONCURRENTLY (it waits for the transactions open "
             "on the database)",
             ch->schema, ch->table, name);
    if (invalid)
    {
        char *qname = pg_qualified(conn, ch->schema, name);

        sql = xasprintf("DROP INDEX CONCURRENTLY IF EXISTS %s", qname);
        ok = pg_exec_cancellable(conn, sql, interrupted, &cancelled, err);
        free(sql);
        free(qname);
    }
    if (ok && !cancelled)
    {
        char *qbare = pg_ident(conn, name); /* an index is made in its table's schema */

        sql = xasprintf("CREATE INDEX CONCURRENTLY IF NOT EXISTS %s %s", qbare, on);
        ok = pg_exec_cancellable(conn, sql, interrupted, &cancelled, err);
        free(sql);
        free(qbare);
    }
    if (ok && cancelled)
        return err_set(err, EC_INTERRUPTED, "interrupted by %s while building index %s",
                       interrupt_name(), name);
    return ok;
}

/* A valid index of the child beginning with column `col` (attnum, quoted
 * qcol), built CONCURRENTLY when there is none (writers go on); one left
 * invalid by an interrupted build is dropped and built again.  `why`: what
 * uses it, for the log. */
static bool
ensure_index(PgConn *conn, const MigrateChild *ch, const Child *c, const char *attnum,
             const char *col, const char *qcol, const char *why, Err *err)
{
    const char *params[2] = {c->oid, attnum};
    char name[128];
    char *on;
    bool have, invalid, ok;

    if (!query_bools(conn,
                     "SELECT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = $1::oid AND indisvalid "
                     "AND indkey[0] = $2::int2 AND indpred IS NULL), EXISTS (SELECT 1 FROM pg_index "
                     "WHERE indrelid = $1::oid AND NOT indisvalid AND indkey[0] = $2::int2 AND "
                     "indpred IS NULL)",
                     2, params, &have, &invalid, err))
        return false;
    if (have)
        return true;
    (void) snprintf(name, sizeof name, "%s_%s_idx", ch->table, col);
    on = xasprintf("ON %s (%s)", c->qchild, qcol);
    ok = build_index(conn, ch, name, invalid, on, err);
    free(on);
    if (ok)
        log_info("child %s.%s: index %s on %s built (%s)", ch->schema, ch->table, name, col,
                 why);
    else
        err_prefix(err, "could not build the index on %s.%s.%s", ch->schema, ch->table, col);
    return ok;
}

/* A partial index of the child, <child>_<unset>_unset ON (cols) WHERE
 * where, built CONCURRENTLY when missing (one an interrupted build left
 * invalid is dropped and built again): rows whose column `unset` is NULL
 * while the other is set, few once a fill set them, so a statement that
 * looks for them reads them alone, not the whole child.  Not on a partitioned
 * child (no CONCURRENTLY there).  Optional: a failure only warns (`without`:
 * what then reads the whole child), unless interrupted. */
static bool
ensure_partial_index(PgConn *conn, const MigrateChild *ch, const Child *c, const char *unset,
                     const char *cols, const char *where, const char *without, Err *err)
{
    char name[256]; /* the server cuts it to 63 bytes, on a character */
    const char *params[2] = {c->oid, name};
    const char *check = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class "
                        "x ON x.oid = i.indexrelid WHERE i.indrelid = $1::oid AND x.relname = "
                        "$2::name AND i.indisvalid), EXISTS (SELECT 1 FROM pg_catalog.pg_index i "
                        "JOIN pg_catalog.pg_class x ON x.oid = i.indexrelid WHERE i.indrelid = "
                        "$1::oid AND x.relname = $2::name AND NOT i.indisvalid)";
    char *on;
    bool have, invalid, ok;
    Err e = {0};

    if (c->relkind == 'p')
        return true;
    (void) snprintf(name, sizeof name, "%s_%s_unset", ch->table, unset);
    if (!query_bools(conn, check, 2, params, &have, &invalid, err))
    {
        err_prefix(err, "the index of the rows of %s.%s whose %s is NULL", ch->schema, ch->table,
                    unset);
        return false;
    }
    if (have)
        return true;
    on = xasprintf("ON %s (%s) WHERE %s", c->qchild, cols, where);
    ok = build_index(conn, ch, name, invalid, on, &e) &&
         query_bools(conn, check, 2, params, &have, &invalid, &e);
    free(on);
    if (!ok && e.code == EC_INTERRUPTED)
    {
        *err = e;
        return false;
    }
    if (!ok)
        log_warn("child %s.%s: the index of the rows whose %s is NULL could not be built (%s); "
                 "%s reads the whole child, and the next run tries again",
                 ch->schema, ch->table, unset, e.msg, without);
    else if (!have)
        log_warn("child %s.%s: no index %s was made (another relation of the schema has that "
                 "name); %s reads the whole child",
                 ch->schema, ch->table, name, without);
    else
        log_info("child %s.%s: index %s built on the rows whose %s is still NULL (%s reads "
                 "them alone)",
                 ch->schema, ch->table, name, unset, without);
    return true;
}

/* Two databases: the passes read the rows whose <fk>_uuid is still NULL
 * along the primary key: <child>_<fk>_uuid_unset, built once the first fill
 * has made them few, lets a pass read them alone (its time follows the rows
 * written since, not the child's size). */
static bool
ensure_unset_index(PgConn *conn, const MigrateChild *ch, const Child *c, Err *err)
{
    char *cols, *p, *where;
    size_t cap = 1;
    bool ok;

    for (int i = 0; i < c->npk; i++)
        cap += strlen(c->qpk[i]) + 2;
    p = cols = xmalloc(cap);
    *p = '\0';
    for (int i = 0; i < c->npk; i++)
        p += sprintf(p, "%s%s", i ? ", " : "", c->qpk[i]);
    where = xasprintf("%s IS NOT NULL AND %s IS NULL", c->qfk, c->quuid);
    ok = ensure_partial_index(conn, ch, c, c->uuid_col, cols, where, "each pass", err);
    free(where);
    free(cols);
    return ok;
}

/* Switching back: the rows the application wrote after the switch with
 * only <fk>_uuid need their <fk> from the map (migrate_childkeys.c), found
 * by <fk> IS NULL, which also holds every row without a parent: on a child
 * with many NULL keys that read, under the switch back's lock too, was of
 * them all.  <child>_<fk>_unset (on <fk>_uuid, of the rows whose <fk> is
 * NULL and <fk>_uuid is not) holds only the rows it wants. */
static bool
ensure_back_index(PgConn *conn, const MigrateChild *ch, const Child *c, Err *err)
{
    char *where = xasprintf("%s IS NULL AND %s IS NOT NULL", c->qfk, c->quuid);
    bool ok = ensure_partial_index(conn, ch, c, ch->fk_column, c->quuid, where,
                                   "switching back", err);

    free(where);
    return ok;
}

bool
migrate_child_back_index(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch, Err *err)
{
    Child c;
    bool ok = child_describe(conn, spec, ch, &c, err) &&
              (c.uuid_type[0] == '\0' || ensure_back_index(conn, ch, &c, err));

    child_free(&c);
    return ok;
}

/* The map trigger's quoted names for this child: function
 * v7fill."child_map_<oid>_<attnum>", trigger "v7fill_child_<oid>_<attnum>";
 * *found false (and nothing set) when the child is gone. */
static bool
hook_names(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch, char **fn,
           char **trg, char **map, char *trg_plain, size_t trg_size, bool *found, Err *err)
{
    char *qchild = pg_qualified(conn, ch->schema, ch->table);
    const char *params[2] = {qchild, ch->fk_column};
    char buf[64];
    PGresult *res;
    bool ok;

    *found = false;
    ok = pg_query(conn,
                  "SELECT c.oid::text, a.attnum::text FROM pg_catalog.pg_class c "
                  "  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attname = $2 "
                  " WHERE c.oid = to_regclass($1)",
                  2, params, &res, err);
    free(qchild);
    if (!ok)
        return false;
    if (PQntuples(res) == 1)
    {
        *found = true;
        (void) snprintf(buf, sizeof buf, "child_map_%s_%s", PQgetvalue(res, 0, 0),
                        PQgetvalue(res, 0, 1));
        *fn = pg_qualified(conn, "v7fill", buf);
        (void) snprintf(trg_plain, trg_size, "v7fill_child_%s_%s", PQgetvalue(res, 0, 0),
                        PQgetvalue(res, 0, 1));
        *trg = pg_ident(conn, trg_plain);
        *map = pg_qualified(conn, spec->into_schema, spec->map_table);
    }
    PQclear(res);
    return true;
}

bool
migrate_child_hook(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch, Err *err)
{
    static const char *const tags[] = {"$v7fill$", "$v7fill_1$", "$v7fill_2$", "$v7fill_3$"};
    char tname[64], what[300];
    char *fn = NULL, *trg = NULL, *map = NULL, *parent = NULL;
    Child c;
    ChildStats st = {0};
    Buf sql;
    bool found = false, ok = false, made = false;

    memset(&c, 0, sizeof c);
    buf_init(&sql);
    if (!migrate_child_same_database(spec))
        return true; /* the map is in another database: fill passes only */
    if (!child_describe(conn, spec, ch, &c, err) ||
        !hook_names(conn, spec, ch, &fn, &trg, &map, tname, sizeof tname, &found, err))
        goto out;
    if (!found)
    {
        err_set(err, EC_CONFIG, "child table %s.%s does not exist", ch->schema, ch->table);
        goto out;
    }
    {
        const char *params[4] = {map, tname, c.oid, c.fk_attnum};
        bool has, indexed;

        if (!query_bools(conn,
                         "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = "
                         "$1::regclass AND tgname = $2 AND NOT tgisinternal), "
                         "EXISTS (SELECT 1 FROM pg_catalog.pg_index WHERE indrelid = $3::oid "
                         "AND indkey[0] = $4::int2 AND indisvalid)",
                         4, params, &has, &indexed, err))
            goto out;
        /* Each map row the capture writes looks its children up by <fk>, and
         * the switch sets the children of the keys recorded under its lock
         * the same way: without the index, each is a scan of the child. */
        if (!indexed && c.relkind == 'p')
            log_warn("child %s.%s: no index begins with %s: each parent the capture inserts "
                     "makes the map's trigger scan the child, and so does the switch under "
                     "its lock (create one on each partition)",
                     ch->schema, ch->table, ch->fk_column);
        else if (!indexed &&
                 !ensure_index(conn, ch, &c, c.fk_attnum, ch->fk_column, c.qfk,
                               "the map's trigger and the switch find the children by it", err))
            goto out;
        if (has)
        {
            ok = true;
            goto out;
        }
    }
    parent = pg_qualified(conn, spec->into_schema, spec->into_table);
    {
        MapTrig mt = {c.qchild, c.qfk, c.quuid,           map,   parent,
                      fn,       trg,   MAPTRIG_NULL_ONLY, c.oid, c.fk_attnum};

        buf_puts(&sql, MAPTRIG_LATE_TABLE_SQL);
        for (size_t i = 0; !made && i < sizeof tags / sizeof tags[0]; i++)
            made = migrate_maptrig_sql(&mt, tags[i], &sql);
    }
    if (!made)
    {
        err_set(err, EC_CONFIG, "child %s.%s: its names hold every dollar-quote tag tried",
                ch->schema, ch->table);
        goto out;
    }
    (void) snprintf(what, sizeof what, "the trigger %s on %s.%s for %s.%s", tname,
                    spec->into_schema, spec->map_table, ch->schema, ch->table);
    if (!tx_retry(conn, MIGRATE_CHILD_DDL_LOCK_TIMEOUT_MS, what, sql.data, 0, NULL, false, &st,
                  NULL, err))
        goto out;
    log_info("child %s.%s: %s_uuid set by trigger %s when the parent's map row arrives",
             ch->schema, ch->table, ch->fk_column, tname);
    ok = true;
out:
    buf_free(&sql);
    free(fn);
    free(trg);
    free(map);
    free(parent);
    child_free(&c);
    return ok;
}

bool
migrate_child_unhook(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch, Err *err)
{
    char tname[64];
    char *fn = NULL, *trg = NULL, *map = NULL;
    bool found = false, ok;

    ok = hook_names(conn, spec, ch, &fn, &trg, &map, tname, sizeof tname, &found, err);
    /* Its events pending in this transaction first: a trigger with pending
     * events cannot be dropped.  Its function goes with it. */
    if (ok && found)
    {
        char *drop = xasprintf("DROP FUNCTION IF EXISTS %s()", fn);

        ok = pg_exec(conn, "SET CONSTRAINTS ALL IMMEDIATE", err) &&
             migrate_maptrig_drop(conn, trg, map, err) && pg_exec(conn, drop, err);
        free(drop);
    }
    free(fn);
    free(trg);
    free(map);
    return ok;
}

/* ---- fill ------------------------------------------------------------------------------ */

typedef struct KeyId
{
    const char *key;
    const char *id;
} KeyId;

static int
keyid_cmp(const void *a, const void *b)
{
    return strcmp(((const KeyId *) a)->key, ((const KeyId *) b)->key);
}

typedef struct Fill
{
    PgConn *conn;
    PgConn *map;
    const MigrateSpec *spec;
    const MigrateChild *ch;
    Child c;
    bool same;
    int lock_ms;
    ChildStats *st;
    bool (*stop)(void *); /* may be NULL: asked between batches */
    void *stop_arg;
    char *sql_first;    /* the first batch of a pass */
    char *sql_next;     /* the following ones: after the last key ($1..$npk) */
    char *sql_lookup;   /* two databases: the map's ids of $1 */
    char *sql_write;
    char what[300];
    /* this pass */
    bool full;
    uint64_t seen, changed, orphans, nulls;
    size_t examples_len;
    char **last;        /* the last key read (npk values), then the batch size */
    int batch_rows;     /* halved when a write holds its locks long, grown back when quick */
} Fill;

/* The read of one batch: the key, <fk>, <fk>_uuid and the map's id (same
 * database; NULL otherwise) of the next rows along the primary key. */
static char *
read_sql(const Fill *f, bool after, bool only_null)
{
    const Child *c = &f->c;
    size_t cap = 1024 + strlen(c->qchild) + strlen(c->qmap) + 3 * strlen(c->qfk);
    char *sql, *p;

    for (int i = 0; i < c->npk; i++)
        cap += 3 * strlen(c->qpk[i]) + strlen(c->pk_types[i]) + 40;
    sql = xmalloc(cap);
    p = sql;
    p += sprintf(p, "SELECT ");
    for (int i = 0; i < c->npk; i++)
        p += sprintf(p, "c.%s::text, ", c->qpk[i]);
    p += sprintf(p, "c.%s::text, c.%s::text, %s FROM %s c ", c->qfk, c->quuid,
                 f->same ? "m.id::text" : "NULL::text", c->qchild);
    if (f->same)
        p += sprintf(p, "LEFT JOIN %s m ON m.legacy_id = c.%s ", c->qmap, c->qfk);
    p += sprintf(p, "WHERE true");
    if (after)
    {
        p += sprintf(p, " AND (");
        for (int i = 0; i < c->npk; i++)
            p += sprintf(p, "%sc.%s", i ? ", " : "", c->qpk[i]);
        p += sprintf(p, ") > (");
        for (int i = 0; i < c->npk; i++)
            p += sprintf(p, "%s$%d::%s", i ? ", " : "", i + 1, c->pk_types[i]);
        p += sprintf(p, ")");
    }
    if (only_null)
        p += sprintf(p, " AND c.%s IS NOT NULL AND c.%s IS NULL", c->qfk, c->quuid);
    p += sprintf(p, " ORDER BY ");
    for (int i = 0; i < c->npk; i++)
        p += sprintf(p, "%sc.%s", i ? ", " : "", c->qpk[i]);
    (void) sprintf(p, " LIMIT $%d", after ? c->npk + 1 : 1);
    return sql;
}

static char *
write_sql(const Fill *f)
{
    const Child *c = &f->c;
    size_t cap = 1024 + strlen(c->qchild) + 3 * strlen(c->quuid) + 2 * strlen(c->qfk) +
                 strlen(c->fk_type);
    char *sql, *p;

    for (int i = 0; i < c->npk; i++)
        cap += strlen(c->qpk[i]) + strlen(c->pk_types[i]) + 60;
    sql = xmalloc(cap);
    p = sql;
    p += sprintf(p, "UPDATE %s c SET %s = u.id FROM unnest(", c->qchild, c->quuid);
    for (int i = 0; i < c->npk; i++)
        p += sprintf(p, "$%d::%s[], ", i + 1, c->pk_types[i]);
    p += sprintf(p, "$%d::%s[], $%d::uuid[]) AS u(", c->npk + 1, c->fk_type, c->npk + 2);
    for (int i = 0; i < c->npk; i++)
        p += sprintf(p, "k%d, ", i);
    p += sprintf(p, "fk, id) WHERE ");
    for (int i = 0; i < c->npk; i++)
        p += sprintf(p, "c.%s = u.k%d AND ", c->qpk[i], i);
    (void) sprintf(p, "c.%s = u.fk AND c.%s IS DISTINCT FROM u.id", c->qfk, c->quuid);
    return sql;
}

static void
add_example(Fill *f, const char *key)
{
    ChildStats *st = f->st;
    size_t need = strlen(key) + (f->examples_len ? 1 : 0);

    if (f->examples_len + need + 1 > sizeof st->orphan_examples)
        return;
    (void) snprintf(st->orphan_examples + f->examples_len,
                    sizeof st->orphan_examples - f->examples_len, "%s%s",
                    f->examples_len ? "," : "", key);
    f->examples_len += need;
}

/* Two databases: the map's id of every non-NULL key of the batch, into a
 * sorted array of (key, id) pointing into *lookup. */
static bool
map_lookup(Fill *f, PGresult *rows, int kcol, PGresult **lookup, KeyId **out, int *nout,
           Err *err)
{
    int n = PQntuples(rows), nk = 0;
    char **keys = xcalloc((size_t) n + 1, sizeof(char *));
    char *arr;
    const char *params[1];
    bool ok;

    for (int r = 0; r < n; r++)
        if (!PQgetisnull(rows, r, kcol))
            keys[nk++] = PQgetvalue(rows, r, kcol);
    arr = pg_array_literal((const char *const *) keys, nk);
    free(keys);
    params[0] = arr;
    ok = pg_query(f->map, f->sql_lookup, 1, params, lookup, err);
    free(arr);
    if (!ok)
    {
        err_prefix(err, "looking up the keys of %s.%s in the map", f->ch->schema, f->ch->table);
        return false;
    }
    *nout = PQntuples(*lookup);
    *out = xcalloc((size_t) *nout + 1, sizeof(KeyId));
    for (int r = 0; r < *nout; r++)
    {
        (*out)[r].key = PQgetvalue(*lookup, r, 0);
        (*out)[r].id = PQgetvalue(*lookup, r, 1);
    }
    qsort(*out, (size_t) *nout, sizeof(KeyId), keyid_cmp);
    return true;
}

/* One batch; *more: a full batch was read (there may be more rows). */
static bool
fill_batch(Fill *f, bool *more, Err *err)
{
    const Child *c = &f->c;
    int npk = c->npk, kcol = npk, ucol = npk + 1, mcol = npk + 2;
    PGresult *rows = NULL, *lookup = NULL;
    KeyId *ids = NULL;
    int nids = 0, n, nw = 0;
    char ***cols = NULL; /* npk key columns, fk, id: the rows to write */
    char limit[16];
    int lim = f->batch_rows;
    bool ok = false;

    *more = false;
    (void) snprintf(limit, sizeof limit, "%d", lim);
    if (f->last == NULL)
    {
        const char *params[1] = {limit};

        ok = pg_query(f->conn, f->sql_first, 1, params, &rows, err);
    }
    else
    {
        f->last[npk] = limit;
        ok = pg_query(f->conn, f->sql_next, npk + 1, (const char *const *) f->last, &rows, err);
        f->last[npk] = NULL;
    }
    if (!ok)
    {
        err_prefix(err, "reading %s.%s", f->ch->schema, f->ch->table);
        return false;
    }
    ok = false;
    n = PQntuples(rows);
    if (n == 0)
    {
        ok = true;
        goto out;
    }
    if (!f->same && !map_lookup(f, rows, kcol, &lookup, &ids, &nids, err))
        goto out;
    cols = xcalloc((size_t) npk + 2, sizeof(char **));
    for (int i = 0; i < npk + 2; i++)
        cols[i] = xcalloc((size_t) n, sizeof(char *));
    for (int r = 0; r < n; r++)
    {
        const char *id = NULL;

        if (PQgetisnull(rows, r, kcol))
        {
            f->nulls++;
            continue;
        }
        if (f->same)
            id = PQgetisnull(rows, r, mcol) ? NULL : PQgetvalue(rows, r, mcol);
        else
        {
            KeyId probe = {.key = PQgetvalue(rows, r, kcol)};
            KeyId *hit = bsearch(&probe, ids, (size_t) nids, sizeof(KeyId), keyid_cmp);

            id = hit ? hit->id : NULL;
        }
        if (id == NULL)
        {
            f->orphans++;
            add_example(f, PQgetvalue(rows, r, kcol));
            continue;
        }
        if (!PQgetisnull(rows, r, ucol) && strcmp(PQgetvalue(rows, r, ucol), id) == 0)
            continue;
        for (int i = 0; i < npk; i++)
            cols[i][nw] = PQgetvalue(rows, r, i);
        cols[npk][nw] = PQgetvalue(rows, r, kcol);
        cols[npk + 1][nw] = (char *) id;
        nw++;
    }
    if (nw > 0)
    {
        char **params = xcalloc((size_t) npk + 2, sizeof(char *));
        uint64_t affected = 0;
        int64_t t0 = monotime_ms(), took;

        for (int i = 0; i < npk + 2; i++)
            params[i] = pg_array_literal((const char *const *) cols[i], nw);
        ok = tx_retry(f->conn, f->lock_ms, f->what, f->sql_write, npk + 2,
                      (const char *const *) params, true, f->st, &affected, err);
        /* A writer may wait on our row locks for as long as a write takes:
         * keep it well under the lock timeout. */
        took = monotime_ms() - t0;
        if (took > f->lock_ms / 4 && f->batch_rows > 100)
            f->batch_rows /= 2;
        else if (took < f->lock_ms / 8 && f->batch_rows < MIGRATE_CHILD_BATCH_ROWS)
            f->batch_rows = f->batch_rows * 2 < MIGRATE_CHILD_BATCH_ROWS ? f->batch_rows * 2
                                                                         : MIGRATE_CHILD_BATCH_ROWS;
        for (int i = 0; i < npk + 2; i++)
            free(params[i]);
        free(params);
        if (!ok)
            goto out;
        ok = false;
        f->st->batches++;
        f->changed += affected;
    }
    f->seen += (uint64_t) n;
    /* The last key read: where the next batch starts. */
    if (f->last == NULL)
        f->last = xcalloc((size_t) npk + 1, sizeof(char *));
    for (int i = 0; i < npk; i++)
    {
        free(f->last[i]);
        f->last[i] = xstrdup(PQgetvalue(rows, n - 1, i));
    }
    *more = n == lim;
    ok = true;
out:
    if (cols)
        for (int i = 0; i < npk + 2; i++)
            free(cols[i]);
    free(cols);
    free(ids);
    PQclear(lookup);
    PQclear(rows);
    return ok;
}

static void
fill_forget_last(Fill *f)
{
    if (f->last == NULL)
        return;
    for (int i = 0; i < f->c.npk; i++)
        free(f->last[i]);
    free(f->last);
    f->last = NULL;
}

/* One pass along the primary key: every row (full) or those still NULL. */
static bool
fill_pass(Fill *f, bool full, Err *err)
{
    bool more = true;

    free(f->sql_first);
    free(f->sql_next);
    f->sql_first = read_sql(f, false, !full);
    f->sql_next = read_sql(f, true, !full);
    f->full = full;
    f->seen = f->changed = f->orphans = f->nulls = 0;
    f->examples_len = 0;
    f->st->orphan_examples[0] = '\0';
    fill_forget_last(f);
    while (more)
    {
        if (interrupt_signal() != 0)
            return err_set(err, EC_INTERRUPTED, "%s: interrupted by %s", f->what,
                           interrupt_name());
        if (f->stop && f->stop(f->stop_arg))
            return err_set(err, EC_INTERRUPTED, "%s: stopped", f->what);
        if (!fill_batch(f, &more, err))
            return false;
    }
    return true;
}

/* ---- keys the map's trigger recorded under a lock --------------------------------------- */

/* Whether MAPTRIG_LATE_TABLE exists (made with the map's first trigger). */
static bool
late_table_exists(PgConn *conn, bool *exists, Err *err)
{
    PGresult *res;

    if (!pg_query(conn, "SELECT to_regclass('" MAPTRIG_LATE_TABLE "') IS NOT NULL", 0, NULL,
                  &res, err))
        return false;
    *exists = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    return true;
}

/* The children of the keys recorded for this child set from the map (the
 * parent's new row there), the keys deleted, in one statement: per key a
 * look-up of the map and of the child's index on <fk>.  lock_ms > 0: its own
 * short transaction, retried; 0: in the caller's.  *rows: the rows set. */
static bool
late_apply(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch, const Child *c,
           int lock_ms, ChildStats *st, uint64_t *rows, Err *err)
{
    const char *params[2] = {c->oid, c->fk_attnum};
    char what[300];
    char *parent, *sql;
    bool exists = false, ok;

    *rows = 0;
    if (!late_table_exists(conn, &exists, err))
        return false;
    if (!exists)
        return true; /* no trigger made it: nothing recorded */
    parent = pg_qualified(conn, spec->into_schema, spec->into_table);
    sql = xasprintf("WITH l AS (DELETE FROM " MAPTRIG_LATE_TABLE " WHERE child = $1::oid AND "
                    "fk_attnum = $2::int2 RETURNING legacy_id) "
                    "UPDATE %s c SET %s = m.id FROM l JOIN %s m ON m.legacy_id = l.legacy_id "
                    "WHERE c.%s = l.legacy_id AND c.%s IS NULL "
                    "AND EXISTS (SELECT 1 FROM %s p WHERE p.id = m.id)",
                    c->qchild, c->quuid, c->qmap, c->qfk, c->quuid, parent);
    (void) snprintf(what, sizeof what, "setting %s.%s.%s of the keys recorded by the map's trigger",
                    ch->schema, ch->table, c->uuid_col);
    if (lock_ms > 0)
        ok = tx_retry(conn, lock_ms, what, sql, 2, params, true, st, rows, err);
    else
    {
        PGresult *res = NULL;

        ok = pg_query(conn, sql, 2, params, &res, err);
        if (ok)
            *rows = strtoull(PQcmdTuples(res), NULL, 10);
        else
            err_prefix(err, "%s", what);
        PQclear(res);
    }
    free(sql);
    free(parent);
    return ok;
}

bool
migrate_child_set_late(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch,
                       uint64_t *rows, Err *err)
{
    Child c;
    ChildStats st = {0};
    bool ok;

    *rows = 0;
    if (!migrate_child_same_database(spec))
        return true;
    ok = child_describe(conn, spec, ch, &c, err) && late_apply(conn, spec, ch, &c, 0, &st, rows, err);
    child_free(&c);
    return ok;
}

/* After a full pass, which set <fk>_uuid on every row with a parent: the
 * column's statistics, until then those of a column just added (none) or of
 * NULLs, and autovacuum analyzes the child only later.  Without them the
 * planner read each batch of a later pass (the rows with <fk> set and
 * <fk>_uuid NULL, along the primary key) through the index on <fk>_uuid,
 * every row still NULL sorted for each batch: the switch's pass before its
 * lock took 26 s for a child of 1,000,000 rows with 300,000 orphans and as
 * many NULL keys, against 0.8 s once analyzed.  One attempt, under a lock
 * timeout of at least 3 s: its lock (SHARE UPDATE EXCLUSIVE) keeps no
 * application statement waiting, and it waits for a VACUUM of the child,
 * which the server cancels when it is autovacuum's, after deadlock_timeout
 * (1 s by default).  A failure only warns, unless interrupted. */
static bool
analyze_uuid(const Fill *f, Err *err)
{
    char *sql = xasprintf("ANALYZE %s (%s)", f->c.qchild, f->c.quuid);
    Err e = {0};
    bool ok = tx_once(f->conn, f->lock_ms > 3000 ? f->lock_ms : 3000, sql, 0, NULL, NULL, &e);

    free(sql);
    if (ok)
        return true;
    if (e.code == EC_INTERRUPTED)
    {
        *err = e;
        return false;
    }
    log_warn("child %s.%s: the statistics of %s were not refreshed after the fill (%s); "
             "until autovacuum analyzes the child, a pass may read it by the wrong index",
             f->ch->schema, f->ch->table, f->c.uuid_col, e.msg);
    return true;
}

/* After the keys recorded by the map's trigger: the fill (full_first: a
 * first pass over every row, then passes over the rows still NULL until one
 * changes nothing) or one pass over the rows still NULL. */
static bool
fill_run(PgConn *conn, PgConn *map, const MigrateSpec *spec, const MigrateChild *ch,
         int lock_timeout_ms, bool full_first, bool (*stop)(void *), void *stop_arg,
         ChildStats *st, Err *err)
{
    Fill f = {.conn = conn, .map = map ? map : conn, .spec = spec, .ch = ch, .st = st,
              .stop = stop, .stop_arg = stop_arg};
    bool ok = false;

    memset(st, 0, sizeof *st);
    f.same = migrate_child_same_database(spec);
    f.lock_ms = lock_timeout_ms > 0 ? lock_timeout_ms : 1000;
    f.batch_rows = MIGRATE_CHILD_FIRST_BATCH_ROWS;
    if (!child_describe(conn, spec, ch, &f.c, err))
        goto out;
    if (!f.c.uuid_type[0])
    {
        err_set(err, EC_CONFIG, "child table %s.%s has no column \"%s\"", ch->schema, ch->table,
                f.c.uuid_col);
        err_hint(err, "Prepare the child first (it adds the column).");
        goto out;
    }
    (void) snprintf(f.what, sizeof f.what, "filling %s.%s.%s", ch->schema, ch->table,
                    f.c.uuid_col);
    if (f.same)
    {
        uint64_t late = 0;

        if (!late_apply(conn, spec, ch, &f.c, f.lock_ms, st, &late, err))
            goto out;
        st->filled += late;
        if (late > 0)
            log_detail("%s: %llu rows of keys the map's trigger recorded", f.what,
                       (unsigned long long) late);
    }
    f.sql_write = write_sql(&f);
    if (!f.same)
    {
        char *qmap = pg_qualified(f.map, spec->into_schema, spec->map_table);

        f.sql_lookup = xasprintf("SELECT legacy_id::text, id::text FROM %s "
                                 "WHERE legacy_id = ANY($1::%s[])",
                                 qmap, spec->key_type);
        free(qmap);
    }
    for (;;)
    {
        bool full = full_first && st->passes == 0;

        if (!fill_pass(&f, full, err))
            goto out;
        st->passes++;
        if (full)
        {
            st->rows = f.seen;
            st->null_keys = f.nulls;
            st->full_pass = true;
        }
        st->orphans = f.orphans;
        st->filled += f.changed;
        log_detail("%s: pass %llu, %llu rows read, %llu set, %llu orphans", f.what,
                   (unsigned long long) st->passes, (unsigned long long) f.seen,
                   (unsigned long long) f.changed, (unsigned long long) f.orphans);
        if (f.changed == 0 || !full_first)
            break; /* settle: one pass; what arrives after it the map's trigger covers */
        if (st->passes > MIGRATE_CHILD_MAX_PASSES)
        {
            log_warn("%s: rows still change after %llu passes (children written before their "
                     "parent); the next fill sets them",
                     f.what, (unsigned long long) st->passes);
            break;
        }
    }
    if (full_first && (!analyze_uuid(&f, err) ||
                       (!f.same && !ensure_unset_index(conn, ch, &f.c, err)) ||
                       !ensure_back_index(conn, ch, &f.c, err)))
        goto out;
    ok = true;
out:
    fill_forget_last(&f);
    free(f.sql_first);
    free(f.sql_next);
    free(f.sql_lookup);
    free(f.sql_write);
    child_free(&f.c);
    return ok;
}

bool
migrate_child_fill(PgConn *conn, PgConn *map, const MigrateSpec *spec, const MigrateChild *ch,
                   int lock_timeout_ms, ChildStats *st, Err *err)
{
    return fill_run(conn, map, spec, ch, lock_timeout_ms, true, NULL, NULL, st, err);
}

bool
migrate_child_settle(PgConn *conn, PgConn *map, const MigrateSpec *spec, const MigrateChild *ch,
                     int lock_timeout_ms, bool (*stop)(void *), void *stop_arg, ChildStats *st,
                     Err *err)
{
    return fill_run(conn, map ? map : conn, spec, ch, lock_timeout_ms, false, stop, stop_arg, st,
                    err);
}

/* ---- a rerun: the rows still NULL only ----------------------------------------------------- */

bool
migrate_child_can_catch_up(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch,
                           bool *can, const char **why, Err *err)
{
    Child c;
    char tname[80], name[128];
    bool validated = false, into_exists = false, ok = false;

    *can = false;
    *why = "";
    if (!migrate_child_same_database(spec))
    {
        *why = "two databases: no trigger, no foreign key";
        return true;
    }
    /* After a switch (and back) the application wrote <fk>_uuid itself,
     * which no trigger reconciles with <fk>. */
    if (spec->switch_lsn != 0)
    {
        *why = "the migration was switched before";
        return true;
    }
    if (!child_describe(conn, spec, ch, &c, err))
        goto out;
    if (!c.uuid_type[0])
    {
        *why = "no uuid column yet";
        ok = true;
        goto out;
    }
    trigger_name(&c, tname, sizeof tname);
    {
        const char *params[2] = {c.oid, tname};
        PGresult *res;
        bool present;

        /* 'O' and 'A' fire for ordinary sessions; 'D' (disabled) and 'R'
         * (replica only) do not. */
        if (!pg_query(conn,
                      "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = $1::oid "
                      "AND tgname = $2 AND NOT tgisinternal AND tgenabled IN ('O', 'A'))",
                      2, params, &res, err))
            goto out;
        present = PQgetvalue(res, 0, 0)[0] == 't';
        PQclear(res);
        if (!present)
        {
            *why = "the child's trigger is missing or disabled";
            ok = true;
            goto out;
        }
    }
    if (!find_fk(conn, spec, &c, name, sizeof name, &validated, &into_exists, err))
        goto out;
    if (!name[0] || !validated)
        *why = name[0] ? "the foreign key is not validated" : "no foreign key yet";
    else
        *can = true;
    ok = true;
out:
    child_free(&c);
    return ok;
}

/* rows and null_keys of the child: one read-only count (a sequential scan). */
static bool
count_child(PgConn *conn, const MigrateChild *ch, ChildStats *st, Err *err)
{
    char *qchild = pg_qualified(conn, ch->schema, ch->table);
    char *qfk = pg_ident(conn, ch->fk_column);
    char *sql = xasprintf("SELECT count(*)::text, count(*) FILTER (WHERE %s IS NULL)::text "
                          "FROM %s",
                          qfk, qchild);
    PGresult *res = NULL;
    bool ok = pg_query(conn, sql, 0, NULL, &res, err);

    if (ok)
    {
        st->rows = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
        st->null_keys = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
    }
    else
        err_prefix(err, "counting the rows of %s.%s", ch->schema, ch->table);
    PQclear(res);
    free(sql);
    free(qfk);
    free(qchild);
    return ok;
}

bool
migrate_child_catch_up(PgConn *conn, PgConn *map, const MigrateSpec *spec, const MigrateChild *ch,
                       int lock_timeout_ms, bool full, ChildStats *st, Err *err)
{
    bool can = false;
    const char *why = "--full-fill";

    if (!full && !migrate_child_can_catch_up(conn, spec, ch, &can, &why, err))
        return false;
    if (!can)
    {
        log_detail("child %s.%s: a full pass (%s)", ch->schema, ch->table, why);
        return migrate_child_fill(conn, map, spec, ch, lock_timeout_ms, st, err);
    }
    log_detail("child %s.%s: filled before and its foreign key validated: only the rows still "
               "NULL are read",
               ch->schema, ch->table);
    return fill_run(conn, map, spec, ch, lock_timeout_ms, false, NULL, NULL, st, err) &&
           count_child(conn, ch, st, err);
}

/* ---- constrain ------------------------------------------------------------------------- */

/* The foreign key from <fk>_uuid to <into>: its name ("" if none) and whether validated. */
static bool
find_fk(PgConn *conn, const MigrateSpec *spec, const Child *c, char *name, size_t size,
        bool *validated, bool *into_exists, Err *err)
{
    const char *params[4] = {c->oid, c->uuid_attnum, spec->into_schema, spec->into_table};
    PGresult *res;

    if (!pg_query(conn,
                  "WITH t AS (SELECT r.oid FROM pg_catalog.pg_class r "
                  "  JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace "
                  " WHERE n.nspname = $3 AND r.relname = $4) "
                  "SELECT (SELECT count(*) FROM t)::text, k.conname, k.convalidated::text "
                  "  FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_constraint k "
                  "    ON k.conrelid = $1::oid AND k.contype = 'f' AND k.conparentid = 0 "
                  "   AND k.conkey = ARRAY[$2::int2] AND k.confrelid = (SELECT oid FROM t) "
                  " ORDER BY k.conname LIMIT 1",
                  4, params, &res, err))
        return false;
    *into_exists = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
    (void) snprintf(name, size, "%s", PQgetisnull(res, 0, 1) ? "" : PQgetvalue(res, 0, 1));
    *validated = strcmp(PQgetvalue(res, 0, 2), "true") == 0;
    PQclear(res);
    return true;
}

/* The ON DELETE rule of the new key: the legacy key's from the child's <fk> to
 * the source table when there is one (its deletes already ran on the source:
 * mirroring them finds nothing left to do), else SET NULL: a child without a
 * key can keep rows of a deleted parent, and the capture's delete of that
 * parent in the new table must not fail on them (they become orphans). */
static bool
delete_rule(PgConn *conn, const MigrateSpec *spec, const Child *c, const char **rule, Err *err)
{
    const char *params[4] = {c->oid, c->fk_attnum, spec->from_schema, spec->from_table};
    PGresult *res;
    char t = '\0';

    if (!pg_query(conn,
                  "SELECT k.confdeltype::text FROM pg_catalog.pg_constraint k "
                  "  JOIN pg_catalog.pg_class r ON r.oid = k.confrelid "
                  "  JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace "
                  " WHERE k.conrelid = $1::oid AND k.contype = 'f' AND k.conparentid = 0 "
                  "   AND k.conkey = ARRAY[$2::int2] AND n.nspname = $3 AND r.relname = $4 "
                  " ORDER BY k.conname LIMIT 1",
                  4, params, &res, err))
        return false;
    if (PQntuples(res) == 1)
        t = PQgetvalue(res, 0, 0)[0];
    PQclear(res);
    *rule = t == 'c' ? "CASCADE" : t == 'a' || t == 'r' ? "NO ACTION" : "SET NULL";
    return true;
}

/* Child rows whose <fk>_uuid names a row the new table does not have (its
 * parent deleted before the key existed, or a uuid written by hand): set
 * from the map again, as the fill would (NULL, an orphan, when the parent is
 * gone), so VALIDATE passes.  The key (NOT VALID) is in place: no new ones. */
static bool
clear_dangling(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch, const Child *c,
               Err *err)
{
    char *qinto = pg_qualified(conn, spec->into_schema, spec->into_table);
    char *sql = xasprintf("UPDATE %s c SET %s = (SELECT m.id FROM %s m WHERE m.legacy_id = c.%s) "
                          "WHERE c.%s IS NOT NULL AND NOT EXISTS "
                          "(SELECT 1 FROM %s p WHERE p.id = c.%s)",
                          c->qchild, c->quuid, c->qmap, c->qfk, c->quuid, qinto, c->quuid);
    PGresult *res = NULL;
    bool ok = pg_query(conn, sql, 0, NULL, &res, err);

    if (ok && strcmp(PQcmdTuples(res), "0") != 0)
        log_info("child %s.%s: %s rows named a missing parent in %s: set from the map again",
                 ch->schema, ch->table, PQcmdTuples(res), c->uuid_col);
    PQclear(res);
    free(sql);
    free(qinto);
    return ok;
}

bool
migrate_child_constrain(PgConn *conn, const MigrateSpec *spec, const MigrateChild *ch,
                        int lock_timeout_ms, ChildStats *st, Err *err)
{
    Child c;
    char name[128], what[300];
    bool validated = false, into_exists = false, ok = false;
    char *sql = NULL, *qname = NULL, *qinto = NULL;
    const char *rule = NULL;
    int lock_ms = lock_timeout_ms > 0 ? lock_timeout_ms : 1000;

    st->fk_added = st->fk_validated = false;
    memset(&c, 0, sizeof c);
    if (!migrate_child_same_database(spec))
    {
        err_set(err, EC_CONFIG, "cannot add a foreign key from %s.%s to %s.%s", ch->schema,
                ch->table, spec->into_schema, spec->into_table);
        err_detail(err, "The child and the new table are in two databases; PostgreSQL's "
                        "foreign keys do not cross databases.  %s_uuid is filled by fill "
                        "passes only.",
                   ch->fk_column);
        return false;
    }
    if (!child_describe(conn, spec, ch, &c, err))
        goto out;
    if (!c.uuid_type[0])
    {
        err_set(err, EC_CONFIG, "child table %s.%s has no column \"%s\"", ch->schema, ch->table,
                c.uuid_col);
        err_hint(err, "Prepare and fill the child first.");
        goto out;
    }
    if (!find_fk(conn, spec, &c, name, sizeof name, &validated, &into_exists, err))
        goto out;
    /* Without it, every delete in the new table (the capture applies the
     * source's) scans the whole child for the foreign key. */
    if (into_exists && c.relkind != 'p' &&
        !ensure_index(conn, ch, &c, c.uuid_attnum, c.uuid_col, c.quuid,
                      "the foreign key's deletes use it", err))
        goto out;
    if (!into_exists)
    {
        err_set(err, EC_CONFIG, "table %s.%s does not exist", spec->into_schema,
                spec->into_table);
        goto out;
    }
    if (!name[0])
    {
        if (c.relkind == 'p')
        {
            err_set(err, EC_CONFIG, "cannot add a NOT VALID foreign key on %s.%s", ch->schema,
                    ch->table);
            err_detail(err, "It is partitioned; PostgreSQL 15 adds NOT VALID foreign keys "
                            "to plain tables only.");
            err_hint(err, "Add the key to each partition of the child.");
            goto out;
        }
        if (!delete_rule(conn, spec, &c, &rule, err))
            goto out;
        (void) snprintf(name, sizeof name, "%s_%s_fkey", ch->table, c.uuid_col);
        qname = pg_ident(conn, name);
        qinto = pg_qualified(conn, spec->into_schema, spec->into_table);
        sql = xasprintf("ALTER TABLE %s ADD CONSTRAINT %s FOREIGN KEY (%s) REFERENCES %s (id) "
                        "ON DELETE %s NOT VALID",
                        c.qchild, qname, c.quuid, qinto, rule);
        (void) snprintf(what, sizeof what, "adding the foreign key of %s.%s.%s", ch->schema,
                        ch->table, c.uuid_col);
        if (!tx_retry(conn, lock_ms, what, sql, 0, NULL, true, st, NULL, err))
            goto out;
        log_info("child %s.%s: foreign key %s added (NOT VALID, ON DELETE %s)", ch->schema,
                 ch->table, name, rule);
        /* The server may have shortened the name: read it back. */
        if (!find_fk(conn, spec, &c, name, sizeof name, &validated, &into_exists, err))
            goto out;
        if (!name[0])
        {
            err_set(err, EC_INTERNAL, "the foreign key of %s.%s.%s is missing after adding it",
                    ch->schema, ch->table, c.uuid_col);
            goto out;
        }
    }
    st->fk_added = true;
    if (!validated)
    {
        if (!clear_dangling(conn, spec, ch, &c, err))
            goto out;
        free(sql);
        free(qname);
        qname = pg_ident(conn, name);
        /* SHARE UPDATE EXCLUSIVE: writers go on while the rows are checked;
         * its duration is a scan, not a wait of ours, so it is not timed. */
        sql = xasprintf("ALTER TABLE %s VALIDATE CONSTRAINT %s", c.qchild, qname);
        (void) snprintf(what, sizeof what, "validating the foreign key %s of %s.%s", name,
                        ch->schema, ch->table);
        if (!tx_retry(conn, lock_ms, what, sql, 0, NULL, false, st, NULL, err))
            goto out;
        log_info("child %s.%s: foreign key %s validated", ch->schema, ch->table, name);
    }
    st->fk_validated = true;
    ok = true;
out:
    free(sql);
    free(qname);
    free(qinto);
    child_free(&c);
    return ok;
}
