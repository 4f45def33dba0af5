/*
 * `v7fill migrate --switch` (migrate_switch.h): the cut-over from the legacy
 * table to the UUIDv7 one, and back, in one short transaction whose locks
 * are bounded by lock_timeout and retried.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "v7fill/monotime.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/migrate_child.h"
#include "v7fill/migrate_childkeys.h"
#include "v7fill/migrate_childreverse.h"
#include "v7fill/migrate_childtable.h"
#include "v7fill/migrate_switch.h"
#include "v7fill/citus.h"
#include "v7fill/pgoutput.h"

/* Two databases: a new table's legacy_id numbered on the target by a
 * sequence of its own, started under the switch's lock where the source
 * key's stands (legacy_id_sequence, tseq_start). */
typedef struct LegacySeq
{
    char *tseq_q;      /* the target's sequence, quoted (NULL: none) */
    char src_seq[256]; /* the source key's sequence ("": none) */
    char tseq[160];    /* the target's sequence as printed */
} LegacySeq;

typedef struct Names
{
    char *old_q;      /* the table holding <from> before this switch */
    char *new_q;      /* the table getting <from> (forward) or <into> (back) */
    char *legacy_q;   /* "<from_schema>"."<legacy_table>" */
    char *into_q;     /* "<into_schema>"."<into_table>" */
    char *from_q;     /* "<from_schema>"."<from_table>" */
    char into_key[160];
    char rev[64];
    bool one_way;     /* the new table is Citus-distributed: no way back is prepared */
    PgConn *rev_db;   /* two databases: the target, where the way back starts (NULL: one) */
    PgConn *tdb;      /* two databases: the target (NULL: one) */
    PgConn *lapply;   /* two databases, switching back: the way back's writer on the source */
    LegacySeq seq;    /* two databases: the parent's legacy_id sequence on the target */
    LegacySeq *kid_seq; /* ... and each migrate-mode child's (NULL: none made) */
    size_t nkids;
    char *kids_q;     /* two databases: ", <child target>"... of the migrate-mode children */
    ReverseIds *back_ids; /* switching back, migrate-mode children: the ids of the rows
                           * each child's way back wrote under the lock, in every attempt
                           * (nchildren of them; NULL: none collected) */
    size_t nback_ids;
} Names;

static void
names_init(PgConn *c, const MigrateSpec *sp, Names *n)
{
    Buf b;

    memset(n, 0, sizeof *n);
    buf_init(&b);
    for (size_t i = 0; sp->child_mode == MIGRATE_CHILD_MIGRATE && i < sp->nchildren; i++)
    {
        char *q = pg_qualified(c, sp->into_schema, sp->children[i].into_table);

        buf_printf(&b, ", %s", q);
        free(q);
    }
    n->kids_q = b.data;
    n->legacy_q = pg_qualified(c, sp->from_schema, sp->legacy_table);
    n->into_q = pg_qualified(c, sp->into_schema, sp->into_table);
    n->from_q = pg_qualified(c, sp->from_schema, sp->from_table);
    (void) snprintf(n->into_key, sizeof n->into_key, "%s.%s", sp->into_schema, sp->into_table);
    migrate_reverse_name(sp, n->rev, sizeof n->rev);
}

static void
names_free(Names *n)
{
    free(n->legacy_q);
    free(n->into_q);
    free(n->from_q);
    free(n->seq.tseq_q);
    for (size_t i = 0; n->kid_seq && i < n->nkids; i++)
        free(n->kid_seq[i].tseq_q);
    free(n->kid_seq);
    free(n->kids_q);
    for (size_t i = 0; i < n->nback_ids; i++)
        reverse_ids_free(&n->back_ids[i]);
    free(n->back_ids);
}

static bool
lock_failed(const Err *e)
{
    return strcmp(e->sqlstate, "55P03") == 0 || strcmp(e->sqlstate, "40P01") == 0;
}

static void
rollback(PgConn *c)
{
    Err e = {0};

    if (!pg_exec(c, "ROLLBACK", &e))
        log_debug("rollback: %s", e.msg);
}

/* One text value of a one-row query ("" when NULL or no row). */
static bool
query_text(PgConn *c, const char *sql, int n, const char *const *params, char *out, size_t size,
           Err *err)
{
    PGresult *res;

    if (!pg_query(c, sql, n, params, &res, err))
        return false;
    (void) snprintf(out, size, "%s",
                    PQntuples(res) > 0 && !PQgetisnull(res, 0, 0) ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    return true;
}

static bool
rel_exists(PgConn *c, const char *qualified, bool *exists, Err *err)
{
    char v[8];
    const char *p[1] = {qualified};

    if (!query_text(c, "SELECT pg_catalog.to_regclass($1) IS NOT NULL", 1, p, v, sizeof v, err))
        return false;
    *exists = strcmp(v, "t") == 0;
    return true;
}

static bool
current_lsn(PgConn *c, uint64_t *out, Err *err)
{
    char v[PGO_LSN_TEXT_SIZE + 8];

    if (!query_text(c, "SELECT pg_catalog.pg_current_wal_insert_lsn()::text", 0, NULL, v,
                    sizeof v, err))
        return false;
    return pgo_lsn_parse(v, out) ? true : err_set(err, EC_PG_QUERY, "the WAL position is not an LSN");
}

static void
backoff(int attempt)
{
    int ms = 50 << (attempt < 6 ? attempt : 6);

    if (ms > 2000)
        ms = 2000;
    ms += rand() % 50;
    (void) usleep((useconds_t) ms * 1000);
}

/* LOCK the children IN mode (in the transaction begin_locked opened). */
static bool
lock_children(PgConn *c, const MigrateSpec *sp, const char *mode, Err *err)
{
    Buf b;
    bool ok;

    if (sp->nchildren == 0)
        return true;
    buf_init(&b);
    buf_printf(&b, "LOCK TABLE ");
    for (size_t i = 0; i < sp->nchildren; i++)
    {
        char *q = pg_qualified(c, sp->children[i].schema, sp->children[i].table);

        buf_printf(&b, "%s%s", i ? ", " : "", q);
        free(q);
    }
    buf_printf(&b, " IN %s MODE", mode);
    ok = pg_exec(c, b.data, err);
    buf_free(&b);
    return ok;
}

/* BEGIN; SET LOCAL lock_timeout; LOCK <main> (and the children, unless
 * children_later) IN mode.
 *
 * Expand-mode children in one database are locked only after the last
 * changes are applied (children_later): a delete the capture (or the way
 * back) applies to the parent under the lock runs the children's foreign
 * keys' ON DELETE actions, which write the child and wait for its lock; held
 * by this idle session, that wait is no deadlock the server can see, and it
 * would last for ever, every writer of the table queued behind it.  Nothing
 * of the child is applied from the slot there (its column is kept by
 * triggers), so the later lock misses nothing.  Migrate-mode children are
 * locked at once: their captures stop at the same final position. */
static bool
begin_locked(PgConn *c, const MigrateSpec *sp, const char *main_q, const char *mode,
             int lock_timeout_ms, bool children_later, Err *err)
{
    char *sql = xasprintf("BEGIN; SET LOCAL lock_timeout = '%d ms'; LOCK TABLE %s IN %s MODE",
                          lock_timeout_ms, main_q, mode);
    bool ok = pg_exec(c, sql, err) && (children_later || lock_children(c, sp, mode, err));

    free(sql);
    return ok;
}

static bool
exec_fmt(PgConn *c, Err *err, const char *fmt, ...) V7FILL_PRINTF(3, 4);

static bool
exec_fmt(PgConn *c, Err *err, const char *fmt, ...)
{
    va_list ap;
    char *sql;
    int n;
    bool ok;

    va_start(ap, fmt);
    n = vasprintf(&sql, fmt, ap);
    va_end(ap);
    if (n < 0)
        return err_set(err, EC_INTERNAL, "out of memory");
    ok = pg_exec(c, sql, err);
    free(sql);
    return ok;
}

/* Rename "<schema>"."<name>" (quoted q) to new_name in new_schema. */
static bool
move_table(PgConn *c, const char *q, const char *schema, const char *name, const char *new_schema,
           const char *new_name, Err *err)
{
    char *ns = pg_ident(c, new_schema), *nn = pg_ident(c, new_name);
    char *mid = NULL;
    bool ok = true;

    if (strcmp(schema, new_schema) != 0)
    {
        ok = exec_fmt(c, err, "ALTER TABLE %s SET SCHEMA %s", q, ns);
        mid = pg_qualified(c, new_schema, name);
    }
    ok = ok && (strcmp(name, new_name) == 0 ||
                exec_fmt(c, err, "ALTER TABLE %s RENAME TO %s", mid ? mid : q, nn));
    free(ns);
    free(nn);
    free(mid);
    return ok;
}

/* The capture's slot on the source: there, and not far behind. */
static bool
check_caught_up(PgConn *source, const MigrateSpec *sp, Err *err)
{
    char v[32];
    const char *p[1] = {sp->slot};
    PGresult *res;
    int64_t lag;

    if (!pg_query(source,
                  "SELECT (pg_catalog.pg_current_wal_lsn() - confirmed_flush_lsn)::bigint "
                  "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
                  1, p, &res, err))
        return false;
    if (PQntuples(res) != 1)
    {
        PQclear(res);
        return err_set(err, EC_CONFIG,
                       "the capture's slot \"%s\" does not exist on the source: nothing can "
                       "apply the last changes of %s.%s, so the switch would lose them",
                       sp->slot, sp->from_schema, sp->from_table);
    }
    (void) snprintf(v, sizeof v, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    lag = strtoll(v, NULL, 10);
    if (lag > (int64_t) MIGRATE_SWITCH_MAX_LAG)
    {
        err_set(err, EC_CONFIG,
                "the capture is %" PRId64 " MB behind the source (more than %" PRIu64
                " MB): the switch would hold its lock while catching up",
                lag >> 20, MIGRATE_SWITCH_MAX_LAG >> 20);
        err_hint(err, "Run v7fill migrate --into %s.%s until it is caught up, then switch.",
                 sp->into_schema, sp->into_table);
        return false;
    }
    return true;
}

static bool
has_childtables(const MigrateSpec *sp)
{
    return sp->child_mode == MIGRATE_CHILD_MIGRATE && sp->nchildren > 0;
}

/* Before the lock: the reverse publication and slot rev on the new table
 * into_q, so the way back misses nothing written after the switch. */
static bool
prepare_reverse(PgConn *t, const char *rev, const char *into_q, Err *err)
{
    char v[8];
    const char *p[1] = {rev};
    char *pub = pg_ident(t, rev);
    bool ok = migrate_reverse_setup(t, err) && migrate_reverse_kept_setup(t, err) &&
              query_text(t, "SELECT count(*) FROM pg_catalog.pg_publication WHERE pubname = $1",
                         1, p, v, sizeof v, err);

    if (ok && strcmp(v, "0") == 0)
        ok = exec_fmt(t, err,
                      "CREATE PUBLICATION %s FOR TABLE %s WITH (publish_via_partition_root = "
                      "true)",
                      pub, into_q);
    free(pub);
    if (ok)
        ok = query_text(t,
                        "SELECT count(*) FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
                        1, p, v, sizeof v, err);
    if (ok && strcmp(v, "0") == 0)
    {
        log_info("creating the way back's slot \"%s\" (waits for running transactions)", rev);
        ok = query_text(t, "SELECT pg_catalog.pg_create_logical_replication_slot($1, 'pgoutput')",
                        1, p, v, sizeof v, err);
    }
    if (!ok)
        err_prefix(err, "the way back's publication and slot \"%s\"", rev);
    return ok;
}

/* A Citus-distributed new table: its rows are written on the workers, so a
 * slot on the coordinator would capture none of them; the switch makes no
 * way back (no slot keeping WAL for nothing) and --reverse refuses. */
static bool
one_way_of(PgConn *t, const MigrateSpec *sp, Names *n, Err *err)
{
    if (!citus_is_distributed(t, sp->into_schema, sp->into_table, &n->one_way, err))
        return false;
    if (n->one_way)
        log_info("%s is a Citus distributed table: the switch is one way (no way back's slot)",
                 n->into_key);
    return true;
}

/* A migrate-mode child's own migration: its target, its state key and its
 * way back's slot (migrate_object_name, as migrate_run names it). */
static void
child_rev(const MigrateSpec *sp, const MigrateChild *ch, char key[160], char rev[64])
{
    char slot[64];

    migrate_object_name(sp->into_schema, ch->into_table, slot);
    (void) snprintf(key, 160, "%s.%s", sp->into_schema, ch->into_table);
    (void) snprintf(rev, 64, "%.59s_rev", slot);
}

/* The parent's way back, then each migrate-mode child's. */
static bool
prepare_reverses(PgConn *t, const MigrateSpec *sp, const Names *n, Err *err)
{
    bool ok = prepare_reverse(t, n->rev, n->into_q, err);

    for (size_t i = 0; ok && has_childtables(sp) && i < sp->nchildren; i++)
    {
        char key[160], rev[64];
        char *q = pg_qualified(t, sp->into_schema, sp->children[i].into_table);

        child_rev(sp, &sp->children[i], key, rev);
        ok = prepare_reverse(t, rev, q, err);
        free(q);
    }
    return ok;
}

/* A forward switch that failed after prepare_reverses: its slots stay for
 * the next attempt (making one waits for every running transaction), and
 * keep the target's WAL meanwhile; said with how to drop them. */
static void
warn_reverses_kept(const MigrateSpec *sp, const Names *n)
{
    Buf b = {0};

    buf_printf(&b, "SELECT pg_drop_replication_slot('%s'); DROP PUBLICATION \"%s\";", n->rev,
               n->rev);
    for (size_t i = 0; has_childtables(sp) && i < sp->nchildren; i++)
    {
        char key[160], rev[64];

        child_rev(sp, &sp->children[i], key, rev);
        buf_printf(&b, " SELECT pg_drop_replication_slot('%s'); DROP PUBLICATION \"%s\";", rev,
                   rev);
    }
    log_warn("not switched: the way back's slots made for it stay on the target for the next "
             "--switch and keep the target's WAL until then; if the switch is given up, drop "
             "them there: %s",
             b.data);
    buf_free(&b);
}

/* In the switch transaction: where each way back starts (every later write
 * to the new tables commits after this transaction). */
static bool
record_reverse(PgConn *s, const char *into_key, const char *rev, const char *at, Err *err)
{
    const char *p[3] = {into_key, rev, at};

    return pg_exec_params(s,
                          "INSERT INTO v7fill.migrate_reverse (into_table, slot, publication, "
                          "switch_lsn, end_lsn) VALUES ($1, $2, $2, $3::pg_lsn, "
                          "pg_catalog.pg_current_wal_insert_lsn()) ON CONFLICT (into_table) DO "
                          "UPDATE SET slot = EXCLUDED.slot, publication = EXCLUDED.publication, "
                          "switch_lsn = EXCLUDED.switch_lsn, end_lsn = EXCLUDED.end_lsn, "
                          "applied = 0, updated_at = now()",
                          3, p, err);
}

static bool
record_reverses(PgConn *s, const MigrateSpec *sp, const Names *n, const char *at, Err *err)
{
    bool ok = record_reverse(s, n->into_key, n->rev, at, err);

    for (size_t i = 0; ok && has_childtables(sp) && i < sp->nchildren; i++)
    {
        char key[160], rev[64];

        child_rev(sp, &sp->children[i], key, rev);
        ok = record_reverse(s, key, rev, at, err);
    }
    return ok;
}

/* The switch's notes: each migrate-mode child's way back, and switching
 * back. */
static void
print_child_ways_back(const MigrateSpec *sp, bool same)
{
    for (size_t i = 0; has_childtables(sp) && i < sp->nchildren; i++)
    {
        char key[160], rev[64];

        child_rev(sp, &sp->children[i], key, rev);
        printf("  and %s.%.56s_legacy from %s.%s (after the parent, up to the same position; "
               "%s from the parent's map of %s_uuid), slot \"%s\": SELECT "
               "pg_drop_replication_slot('%s'); DROP PUBLICATION \"%s\";\n",
               sp->children[i].schema, sp->children[i].table,
               same ? sp->children[i].schema : sp->into_schema,
               same ? sp->children[i].table : sp->children[i].into_table,
               sp->children[i].fk_column, sp->children[i].fk_column, rev, rev, rev);
    }
    if (has_childtables(sp))
        printf("  switching back: v7fill migrate --into %s.%s --switch once --reverse is caught "
               "up (the parent and these children %s)\n",
               sp->into_schema, sp->into_table,
               same ? "in one transaction"
                    : "renamed back in one transaction on the source, under a lock on their new "
                      "tables on the target");
}

static void
print_notes(PgConn *t, const MigrateSpec *sp, const Names *n, bool same, const char *seq,
            const SwitchStats *st)
{
    char at[PGO_LSN_TEXT_SIZE];

    pgo_lsn_format(st->final_lsn, at);
    if (!same)
    {
        printf("switched %s.%s: the source table is now %s.%s (renamed so that no write goes "
               "there unnoticed; nothing dropped); the capture applied up to %s\n",
               sp->from_schema, sp->from_table, sp->from_schema, sp->legacy_table, at);
        printf("  lock held %" PRId64 " ms (attempt %d)\n", st->lock_held_ms, st->attempts);
        if (!has_childtables(sp) && sp->nchildren > 0)
            printf("  children's <fk>_uuid: %" PRIu64 " rows set before the lock (%" PRId64
                   " ms, no lock held), %" PRIu64 " after the switch (rows written meanwhile)\n",
                   st->children_settled, st->children_settle_ms, st->children_late);
        for (size_t i = 0; has_childtables(sp) && i < sp->nchildren; i++)
            printf("  child %s.%s: the source table is now %s.%.56s_legacy, its UUIDv7 table "
                   "%s.%s on the target\n",
                   sp->children[i].schema, sp->children[i].table, sp->children[i].schema,
                   sp->children[i].table, sp->into_schema, sp->children[i].into_table);
        printf("the application must change:\n");
        printf("  connect to the target database and use %s.%s: id is uuid (a UUIDv7 the "
               "application mints)\n",
               sp->into_schema, sp->into_table);
        if (n->seq.tseq_q)
            printf("  the old key is legacy_id, filled for new rows by DEFAULT nextval of %s, "
                   "which goes on from %s on the source\n",
                   n->seq.tseq, n->seq.src_seq);
        else if (n->one_way)
            printf("  the old key is legacy_id (may be NULL now: new rows need none)\n");
        else
            printf("  the old key is legacy_id; %s had no sequence: the application gives new "
                   "rows their legacy_id, as it gave %s before (the way back needs it: a row "
                   "given NULL stops the way back, naming the row)\n",
                   sp->key, sp->key);
        for (size_t i = 0; has_childtables(sp) && i < sp->nchildren; i++)
        {
            const LegacySeq *q = n->kid_seq ? &n->kid_seq[i] : NULL;

            printf("  child %s.%s: use %s.%s, id uuid; reference the parent through %s_uuid "
                   "(uuid, FOREIGN KEY to %s.%s(id) ON DELETE SET NULL: change that rule to the "
                   "application's; %s keeps the parent's legacy key, nullable now); its old key "
                   "is legacy_id%s%s%s%s\n",
                   sp->children[i].schema, sp->children[i].table, sp->into_schema,
                   sp->children[i].into_table, sp->children[i].fk_column, sp->into_schema,
                   sp->into_table, sp->children[i].fk_column,
                   q && q->tseq_q ? ", filled for new rows by DEFAULT nextval of " : " (the application gives it: no sequence)",
                   q && q->tseq_q ? q->tseq : "", q && q->tseq_q ? ", which goes on from " : "",
                   q && q->tseq_q ? q->src_seq : "");
        }
        if (n->one_way)
            printf("way back: none; %s is a Citus distributed table, whose changes a slot on "
                   "the coordinator cannot capture; %s.%s is kept as it was at the switch\n",
                   n->into_key, sp->from_schema, sp->legacy_table);
        else
            printf("way back: v7fill migrate --into %s.%s --reverse [--follow] keeps %s.%s on "
                   "the source current (slot \"%s\" on the target keeps the WAL since the "
                   "switch); if no way back is wanted, on the target: SELECT "
                   "pg_drop_replication_slot('%s'); DROP PUBLICATION \"%s\";\n",
                   sp->into_schema, sp->into_table, sp->from_schema, sp->legacy_table, n->rev,
                   n->rev, n->rev);
        if (!n->one_way)
            print_child_ways_back(sp, false);
        (void) fflush(stdout);
        return;
    }
    printf("switched %s.%s: it is the UUIDv7 table now (was %s.%s); the old table is %s.%s "
           "(kept, nothing dropped)\n",
           sp->from_schema, sp->from_table, sp->into_schema, sp->into_table, sp->from_schema,
           sp->legacy_table);
    printf("  lock held %" PRId64 " ms (attempt %d), the capture applied up to %s\n",
           st->lock_held_ms, st->attempts, at);
    if (!has_childtables(sp) && sp->nchildren > 0)
        printf("  children's <fk>_uuid: %" PRIu64 " rows set before the lock (%" PRId64
               " ms, no lock held), %" PRIu64 " under it (children of the parents the capture "
               "applied there)\n",
               st->children_settled, st->children_settle_ms, st->children_late);
    printf("the application must change:\n");
    printf("  %s.%s.id is uuid now (was %s %s): new rows need a UUIDv7 id from the application\n",
           sp->from_schema, sp->from_table, sp->key_type, sp->key);
    if (seq[0])
        printf("  the old key is legacy_id, filled for new rows by DEFAULT nextval('%s'); that "
               "sequence numbers legacy_id only\n",
               seq);
    else
        printf("  the old key is legacy_id (NOT NULL); %s had no sequence: the application "
               "gives new rows their legacy_id, as it gave %s before (the way back needs it; if "
               "no way back is wanted: ALTER TABLE %s.%s ALTER COLUMN legacy_id DROP NOT NULL)\n",
               sp->key, sp->key, sp->from_schema, sp->from_table);
    for (size_t i = 0; has_childtables(sp) && i < sp->nchildren; i++)
        printf("  child %s.%s is its UUIDv7 table now (was %s.%s; the old one is %s.%.56s_legacy): "
               "its id is uuid, its old key legacy_id; reference the parent through %s_uuid "
               "(uuid, FOREIGN KEY to %s.%s(id) ON DELETE SET NULL: change that rule to the "
               "application's, e.g. ON DELETE CASCADE); %s keeps the parent's legacy key, "
               "nullable now (a new row needs only %s_uuid)\n",
               sp->children[i].schema, sp->children[i].table, sp->into_schema,
               sp->children[i].into_table, sp->children[i].schema, sp->children[i].table,
               sp->children[i].fk_column, sp->from_schema, sp->from_table,
               sp->children[i].fk_column, sp->children[i].fk_column);
    for (size_t i = 0; !has_childtables(sp) && i < sp->nchildren; i++)
        printf("  child %s.%s: reference the parent through %s_uuid (uuid); %s keeps the legacy "
               "key\n",
               sp->children[i].schema, sp->children[i].table, sp->children[i].fk_column,
               sp->children[i].fk_column);
    {
        PGresult *res;
        Err e = {0};
        const char *p[1] = {n->legacy_q};

        if (pg_query(t,
                     "SELECT conrelid::regclass::text, conname FROM pg_catalog.pg_constraint "
                     "WHERE contype = 'f' AND confrelid = $1::regclass ORDER BY 1, 2",
                     1, p, &res, &e))
        {
            for (int r = 0; r < PQntuples(res); r++)
                printf("  foreign key %s of %s now references %s.%s: a child row naming a "
                       "parent created after the switch by its legacy key fails it unless the "
                       "way back (--reverse --follow) copied that parent first; drop it when "
                       "you contract\n",
                       PQgetvalue(res, r, 1), PQgetvalue(res, r, 0), sp->from_schema,
                       sp->legacy_table);
            PQclear(res);
        }
    }
    if (n->one_way)
    {
        printf("way back: none; %s is a Citus distributed table, whose changes a slot on the "
               "coordinator cannot capture; %s.%s is kept as it was at the switch\n",
               n->into_key, sp->from_schema, sp->legacy_table);
        (void) fflush(stdout);
        return;
    }
    printf("way back: v7fill migrate --into %s.%s --reverse [--follow] keeps %s.%s current (slot "
           "\"%s\" keeps the WAL since the switch); if no way back is wanted: SELECT "
           "pg_drop_replication_slot('%s'); DROP PUBLICATION \"%s\";\n",
           sp->into_schema, sp->into_table, sp->from_schema, sp->legacy_table, n->rev, n->rev,
           n->rev);
    print_child_ways_back(sp, true);
    (void) fflush(stdout);
}

typedef struct SwitchLock
{
    PgConn *s;
    PgConn *flush;       /* a second connection to s's database: flushes the WAL */
    const MigrateSpec *sp;
    const Names *n;
    int lock_timeout_ms;
    int64_t t0;          /* when the lock was granted (0: not yet) */
    SwitchStats *st;
    bool children_later; /* the children locked after the capture's last change */
    bool back;           /* switching back: the way back is caught up */
    bool two;            /* ... between two databases: s is the target */
} SwitchLock;

/* The WAL up to the final position on disk, at once: the walsender sends only
 * flushed WAL, and what was committed asynchronously (or is not committed)
 * waits for the WAL writer (wal_writer_delay, 200 ms by default) while the
 * switch holds its lock.  pg_flush_wal runs on a second connection (the
 * switch's transaction is not over). */
static bool
flush_wal(PgConn *c, Err *err)
{
    if (pg_flush_wal(c, NULL, err))
        return true;
    err_prefix(err, "flushing the WAL up to the switch's final position");
    return false;
}

/* MigrateSwitchLock: the parent and its children IN SHARE ROW EXCLUSIVE MODE
 * (writers wait, readers go on), then the final position, flushed. */
static bool
take_switch_lock(void *ctx, uint64_t *final_lsn, Err *err)
{
    SwitchLock *l = ctx;
    char at[PGO_LSN_TEXT_SIZE];

    if (l->two ? !exec_fmt(l->s, err, "BEGIN; SET LOCAL lock_timeout = '%d ms'; LOCK TABLE %s%s "
                                      "IN SHARE ROW EXCLUSIVE MODE",
                           l->lock_timeout_ms, l->n->into_q, l->n->kids_q ? l->n->kids_q : "")
               : !begin_locked(l->s, l->sp, l->n->from_q, "SHARE ROW EXCLUSIVE",
                               l->lock_timeout_ms, l->children_later, err))
        return false;
    l->t0 = monotime_ms();
    if (!current_lsn(l->s, &l->st->final_lsn, err) || !flush_wal(l->flush, err))
        return false;
    *final_lsn = l->st->final_lsn;
    pgo_lsn_format(*final_lsn, at);
    log_info("%s is caught up; locked, its final position is %s",
             l->back ? "switch back: the way back" : "switch: the capture", at);
    return true;
}

/* The first column of the primary key of table q ("" when none). */
static bool
pk_column(PgConn *c, const char *q, char *out, size_t size, Err *err)
{
    const char *p[1] = {q};

    return query_text(c,
                      "SELECT a.attname FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute "
                      "a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] WHERE "
                      "i.indrelid = $1::regclass AND i.indisprimary",
                      1, p, out, size, err);
}

/* The parent's and the child's captures applied their last changes side by
 * side: a child row and its parent's map row committed at the same time see
 * neither the other (the child's trigger and the map's).  Under the lock,
 * before the renames: such rows get <fk>_uuid from the map (parents that
 * still exist). */
static bool
fill_late_uuids(PgConn *s, const MigrateSpec *sp, const MigrateChild *ch, const char *child_q,
                const char *parent, Err *err)
{
    char uuidcol[80];
    char *fk = pg_ident(s, ch->fk_column), *fku;
    char *map = pg_qualified(s, sp->into_schema, sp->map_table);
    bool ok;

    (void) snprintf(uuidcol, sizeof uuidcol, "%s_uuid", ch->fk_column);
    fku = pg_ident(s, uuidcol);
    ok = exec_fmt(s, err,
                  "UPDATE %s c SET %s = m.id FROM %s m WHERE c.%s IS NULL AND c.%s = m.legacy_id "
                  "AND EXISTS (SELECT 1 FROM %s p WHERE p.id = m.id)",
                  child_q, fku, map, fku, fk, parent) &&
         /* The deferred foreign key's checks now: a table with pending
          * trigger events cannot be renamed. */
         pg_exec(s, "SET CONSTRAINTS ALL IMMEDIATE", err);
    free(fk);
    free(fku);
    free(map);
    return ok;
}

/* Inside the switch transaction (the children's source tables already locked
 * with the parent): every migrate-mode child <child> -> <child>_legacy,
 * <into schema>.<child>_v7 -> <child>, its legacy_id numbered by the old
 * key's sequence.  Indexes, constraints and the foreign key to the parent
 * follow their tables. */
static bool
switch_childtables(PgConn *s, const MigrateSpec *sp, Err *err)
{
    char *parent = pg_qualified(s, sp->from_schema, sp->from_table); /* renamed already */
    bool ok = true;

    for (size_t i = 0; ok && has_childtables(sp) && i < sp->nchildren; i++)
    {
        const MigrateChild *ch = &sp->children[i];
        char legacy[64], seq[256] = "", key[64] = "";
        char *src_q = pg_qualified(s, ch->schema, ch->table);
        char *new_q = pg_qualified(s, sp->into_schema, ch->into_table);

        migrate_legacy_name(ch->table, legacy);
        ok = pk_column(s, src_q, key, sizeof key, err);
        if (ok && key[0])
        {
            const char *p2[2] = {src_q, key};

            ok = query_text(s,
                            "SELECT pg_catalog.pg_get_serial_sequence($1, $2)::regclass::oid",
                            2, p2, seq, sizeof seq, err);
        }
        ok = ok && exec_fmt(s, err, "LOCK TABLE %s, %s IN ACCESS EXCLUSIVE MODE", new_q, src_q) &&
             fill_late_uuids(s, sp, ch, new_q, parent, err) &&
             migrate_childtable_unhook(s, sp, ch, err) &&
             move_table(s, src_q, ch->schema, ch->table, ch->schema, legacy, err) &&
             move_table(s, new_q, sp->into_schema, ch->into_table, ch->schema, ch->table, err);
        free(new_q);
        new_q = pg_qualified(s, ch->schema, ch->table);
        if (ok && seq[0])
            ok = exec_fmt(s, err,
                          "ALTER TABLE %s ALTER COLUMN legacy_id SET DEFAULT nextval('%s'::regclass)",
                          new_q, seq);
        if (!ok)
            err_prefix(err, "child %s.%s", ch->schema, ch->table);
        free(src_q);
        free(new_q);
    }
    free(parent);
    return ok;
}

/* Inside the switch transaction, expand mode: the trigger on the map that
 * sets children's <fk>_uuid dropped; from here the way back writes the map,
 * and the trigger would set <fk>_uuid on live child rows by their old <fk>. */
static bool
unhook_children(PgConn *s, const MigrateSpec *sp, Err *err)
{
    for (size_t i = 0; !has_childtables(sp) && i < sp->nchildren; i++)
        if (!migrate_child_unhook(s, sp, &sp->children[i], err))
        {
            err_prefix(err, "child %s.%s", sp->children[i].schema, sp->children[i].table);
            return false;
        }
    return true;
}

/* Inside the switch transaction (two databases: the source's), expand mode:
 * each child's way-back rule on (legacy_q: the legacy table under its name
 * after the switch) or, switching back, off (NULL); migrate_child.h. */
static bool
back_rules(PgConn *s, const MigrateSpec *sp, const char *legacy_q, Err *err)
{
    for (size_t i = 0; !has_childtables(sp) && i < sp->nchildren; i++)
        if (!migrate_child_back_rule(s, sp, &sp->children[i], legacy_q, err))
            return false;
    return true;
}

/* Inside the switch transaction, expand mode, once the capture applied its
 * last changes (the children locked, readers going on): the map's trigger
 * recorded the keys of the parents those changes inserted instead of waiting
 * for the lock; their children set from the map (index look-ups per key). */
static bool
late_children(PgConn *s, const MigrateSpec *sp, SwitchStats *st, Err *err)
{
    st->children_late = 0;
    for (size_t i = 0; !has_childtables(sp) && i < sp->nchildren; i++)
    {
        uint64_t rows = 0;

        if (!migrate_child_set_late(s, sp, &sp->children[i], &rows, err))
        {
            err_prefix(err, "child %s.%s", sp->children[i].schema, sp->children[i].table);
            return false;
        }
        st->children_late += rows;
    }
    return true;
}

/* Before the switch's lock, expand mode: each child's rows still NULL set
 * from the map in short transactions of their own (writers go on), so that
 * under the lock only what the capture applies there is left.  Two
 * databases (map: the target): the rows written since the last fill. */
static bool
settle_children(PgConn *c, PgConn *map, const MigrateSpec *sp, int lock_timeout_ms,
                SwitchStats *st, Err *err)
{
    int64_t t0 = monotime_ms();

    for (size_t i = 0; !has_childtables(sp) && i < sp->nchildren; i++)
    {
        ChildStats cs;

        if (!migrate_child_settle(c, map, sp, &sp->children[i], lock_timeout_ms, NULL, NULL, &cs,
                                  err))
        {
            err_prefix(err, "child %s.%s", sp->children[i].schema, sp->children[i].table);
            return false;
        }
        st->children_settled += cs.filled;
    }
    st->children_settle_ms = monotime_ms() - t0;
    return true;
}

static bool legacy_id_nullable(PgConn *target, const char *into_q, int lock_timeout_ms,
                               Err *err);

/* Two databases, before the lock: the target's legacy_id of into_q
 * (<into_schema>.<into_table>) numbered by a sequence of its own
 * (<into_table>_legacy_id_seq, owned by the column), which the switch starts
 * where the sequence of the source key key of src_q stands (tseq_start): the
 * application's new rows get the legacy key the legacy application would have
 * given them, and the way back copies them with it.  None when the source key
 * has no sequence (the application gives legacy_id). */
static bool
legacy_id_sequence(PgConn *source, PgConn *target, const char *src_q, const char *key,
                   const char *into_schema, const char *into_table, const char *into_q,
                   int lock_timeout_ms, LegacySeq *out, Err *err)
{
    const char *p[2] = {src_q, key};
    char name[64], oid[16];
    char *tq;
    Err reset;
    bool ok;

    if (!query_text(source, "SELECT pg_catalog.pg_get_serial_sequence($1, $2)", 2, p,
                    out->src_seq, sizeof out->src_seq, err))
        return false;
    if (out->src_seq[0] == '\0')
        return true;
    if (strlen(into_table) <= 47)
        (void) snprintf(name, sizeof name, "%s_legacy_id_seq", into_table);
    else /* cut: two long names with one prefix must not share a sequence */
        (void) snprintf(name, sizeof name, "%.*s_%08x_legacy_id_seq",
                        migrate_name_cut(into_table, 38), into_table,
                        (unsigned) XXH3_64bits(into_table, strlen(into_table)));
    tq = pg_qualified(target, into_schema, name);
    p[0] = tq;
    ok = exec_fmt(target, err, "SET lock_timeout = %d", lock_timeout_ms) &&
         exec_fmt(target, err, "CREATE SEQUENCE IF NOT EXISTS %s OWNED BY %s.legacy_id", tq,
                  into_q) &&
         query_text(target, "SELECT $1::regclass::oid", 1, p, oid, sizeof oid, err) &&
         exec_fmt(target, err,
                  "ALTER TABLE %s ALTER COLUMN legacy_id SET DEFAULT nextval('%s'::regclass)",
                  into_q, oid);
    if (!pg_exec(target, "RESET lock_timeout", &reset))
        log_debug("RESET lock_timeout: %s", reset.msg);
    if (!ok)
    {
        err_prefix(err, "the target's legacy_id sequence %s", tq);
        free(tq);
        return false;
    }
    out->tseq_q = tq;
    (void) snprintf(out->tseq, sizeof out->tseq, "%s.%s", into_schema, name);
    return true;
}

/* Under the lock (the legacy table takes no insert): the target's legacy_id
 * sequence goes on from the source key's, or from the highest key the map
 * (<map_schema>.<map_table>, on tdb) holds when that is higher. */
static bool
tseq_start(PgConn *s, PgConn *tdb, const LegacySeq *q, const char *map_schema,
           const char *map_table, Err *err)
{
    char last[32];
    const char *p[2] = {q->src_seq, last};
    char *map, *sql;
    bool ok;

    if (q->tseq_q == NULL)
        return true;
    if (!query_text(s,
                    "SELECT coalesce(pg_catalog.pg_sequence_last_value($1::regclass), 0)::text",
                    1, p, last, sizeof last, err))
        return false;
    p[0] = q->tseq_q;
    map = pg_qualified(tdb, map_schema, map_table);
    sql = xasprintf("SELECT pg_catalog.setval($1::regclass, GREATEST(m, 1), m > 0)::text FROM "
                    "(SELECT GREATEST($2::bigint, (SELECT coalesce(max(legacy_id), 0) FROM %s)) "
                    "m) x",
                    map);
    ok = query_text(tdb, sql, 2, p, last, sizeof last, err);
    free(sql);
    free(map);
    if (!ok)
        err_prefix(err, "starting %s", q->tseq_q);
    return ok;
}

/* Before the lock, migrate-mode children: each UUIDv7 child's <fk> (the
 * parent's legacy key) made nullable where it is NOT NULL (kept from the
 * source), as the application writes <fk>_uuid alone after the switch and
 * that NOT NULL refused those rows; the way back and switching back give the
 * legacy child its key from the map.  The legacy child still needs a key:
 * a CHECK that one of the two is set takes the NOT NULL's place (NOT VALID:
 * the rows there have <fk>).  Nothing but v7fill writes these tables before
 * the switch; a column already nullable is left alone (no lock). */
/* The check that takes a migrate-mode child's NOT NULL <fk>'s place on its
 * UUIDv7 table (childtables_fk_nullable). */
/* *not_null: column of table_q (a qualified, quoted name) is NOT NULL. */
static bool
column_not_null(PgConn *c, const char *table_q, const char *column, bool *not_null, Err *err)
{
    char v[8] = "";
    const char *p[2] = {table_q, column};

    if (!query_text(c,
                    "SELECT attnotnull::text FROM pg_catalog.pg_attribute WHERE attrelid = "
                    "$1::regclass AND attname = $2 AND NOT attisdropped",
                    2, p, v, sizeof v, err))
        return false;
    *not_null = strcmp(v, "true") == 0;
    return true;
}

static void
fk_check_name(const char *fk_column, char out[64])
{
    (void) snprintf(out, 64, "v7fill_%.*s_or_uuid", migrate_name_cut(fk_column, 40), fk_column);
}

/* *required: the UUIDv7 child child_q has that check, or its <fk> is NOT
 * NULL still (switched by an earlier version): its legacy <fk> is NOT NULL. */
static bool
fk_required(PgConn *c, const char *child_q, const char *fk_column, bool *required, Err *err)
{
    char con[64], v[8] = "";
    const char *p[2] = {child_q, con};

    fk_check_name(fk_column, con);
    if (!query_text(c,
                    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conrelid = "
                    "$1::regclass AND conname = $2 AND contype = 'c')::text",
                    2, p, v, sizeof v, err))
        return false;
    *required = strcmp(v, "true") == 0;
    return *required || column_not_null(c, child_q, fk_column, required, err);
}

static bool
childtables_fk_nullable(PgConn *target, const MigrateSpec *sp, int lock_timeout_ms, Err *err)
{
    bool ok = true, set = false;
    Err reset;

    for (size_t i = 0; ok && has_childtables(sp) && i < sp->nchildren; i++)
    {
        const MigrateChild *ch = &sp->children[i];
        char uuidcol[80], con[64];
        char *q = pg_qualified(target, sp->into_schema, ch->into_table);
        bool not_null = false;

        ok = column_not_null(target, q, ch->fk_column, &not_null, err);
        if (ok && not_null)
        {
            char *fk = pg_ident(target, ch->fk_column), *fku, *conq;

            (void) snprintf(uuidcol, sizeof uuidcol, "%s_uuid", ch->fk_column);
            fk_check_name(ch->fk_column, con);
            fku = pg_ident(target, uuidcol);
            conq = pg_ident(target, con);
            ok = (set || exec_fmt(target, err, "SET lock_timeout = %d", lock_timeout_ms)) &&
                 exec_fmt(target, err,
                          "ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL, ADD CONSTRAINT %s CHECK "
                          "(%s IS NOT NULL OR %s IS NOT NULL) NOT VALID",
                          q, fk, conq, fk, fku);
            set = true;
            free(fk);
            free(fku);
            free(conq);
        }
        if (!ok)
            err_prefix(err, "child %s.%s: its %s.%s.%s nullable for the application's rows",
                       ch->schema, ch->table, sp->into_schema, ch->into_table, ch->fk_column);
        free(q);
    }
    if (set && !pg_exec(target, "RESET lock_timeout", &reset))
        log_debug("RESET lock_timeout: %s", reset.msg);
    return ok;
}

/* Two databases, before the lock, migrate-mode children: each child
 * target's legacy_id nullable and numbered by a sequence of its own, as the
 * parent's. */
static bool
childtables_sequences(PgConn *source, PgConn *target, const MigrateSpec *sp, Names *n,
                      int lock_timeout_ms, Err *err)
{
    if (!has_childtables(sp))
        return true;
    n->nkids = sp->nchildren;
    n->kid_seq = xcalloc(sp->nchildren, sizeof *n->kid_seq);
    for (size_t i = 0; i < sp->nchildren; i++)
    {
        const MigrateChild *ch = &sp->children[i];
        char key[64] = "";
        char *src_q = pg_qualified(source, ch->schema, ch->table);
        char *into_q = pg_qualified(target, sp->into_schema, ch->into_table);
        bool ok = pk_column(source, src_q, key, sizeof key, err) &&
                  legacy_id_nullable(target, into_q, lock_timeout_ms, err) &&
                  (key[0] == '\0' ||
                   legacy_id_sequence(source, target, src_q, key, sp->into_schema,
                                      ch->into_table, into_q, lock_timeout_ms, &n->kid_seq[i],
                                      err));

        free(src_q);
        free(into_q);
        if (!ok)
        {
            err_prefix(err, "child %s.%s", ch->schema, ch->table);
            return false;
        }
    }
    return true;
}

/* The switch transaction between two databases (s: the source's, its parent
 * and children locked), migrate-mode children: each source child renamed
 * <child>_legacy there, so a write the application still sends there fails;
 * on the target, in a transaction of its own committed just before the
 * source's (each step idempotent: after a failed source commit the rerun of
 * --switch does them again, and a run of the capture makes the map's trigger
 * again): the late uuids set, the
 * map's trigger dropped (the way back writes the map), each child's
 * legacy_id sequence started and its way back recorded at `at`. */
static bool
switch_childtables_two(PgConn *s, const MigrateSpec *sp, const Names *n, const char *at,
                       int lock_timeout_ms, Err *err)
{
    PgConn *t = n->tdb;
    bool ok = true, t_open = false;

    if (!has_childtables(sp))
        return true;
    for (size_t i = 0; ok && i < sp->nchildren; i++)
    {
        const MigrateChild *ch = &sp->children[i];
        char legacy[64];
        char *src_q = pg_qualified(s, ch->schema, ch->table);

        migrate_legacy_name(ch->table, legacy);
        ok = exec_fmt(s, err, "LOCK TABLE %s IN ACCESS EXCLUSIVE MODE", src_q) &&
             move_table(s, src_q, ch->schema, ch->table, ch->schema, legacy, err);
        if (!ok)
            err_prefix(err, "child %s.%s", ch->schema, ch->table);
        free(src_q);
    }
    t_open = ok; /* rolled back on any failure from here, BEGIN's own included */
    ok = ok && exec_fmt(t, err, "BEGIN; SET LOCAL lock_timeout = '%d ms'", lock_timeout_ms);
    for (size_t i = 0; ok && i < sp->nchildren; i++)
    {
        const MigrateChild *ch = &sp->children[i];
        char key[160], rev[64];
        char *new_q = pg_qualified(t, sp->into_schema, ch->into_table);
        char map[80];

        (void) snprintf(map, sizeof map, "%.56s_id_map", ch->into_table);
        child_rev(sp, ch, key, rev);
        ok = fill_late_uuids(t, sp, ch, new_q, n->into_q, err) &&
             migrate_childtable_unhook(t, sp, ch, err) &&
             (n->kid_seq == NULL ||
              tseq_start(s, t, &n->kid_seq[i], sp->into_schema, map, err)) &&
             record_reverse(t, key, rev, at, err);
        if (!ok)
            err_prefix(err, "child %s.%s", ch->schema, ch->table);
        free(new_q);
    }
    if (ok)
    {
        ok = pg_exec(t, "COMMIT", err);
        t_open = !ok;
    }
    if (t_open)
        rollback(t);
    return ok;
}

typedef enum Where
{
    AT_BEFORE, /* <from> is the legacy table, <into> exists */
    AT_SWITCHED,
} Where;

/* Which way the names stand, from the catalog (a kill between the commit
 * and the caller storing the phase is harmless). */
static bool
names_stand(PgConn *c, const Names *n, bool same, Where *w, Err *err)
{
    bool legacy, into;

    if (!rel_exists(c, n->legacy_q, &legacy, err) ||
        (same && !rel_exists(c, n->into_q, &into, err)))
        return false;
    *w = legacy && (!same || !into) ? AT_SWITCHED : AT_BEFORE;
    return true;
}

/* The source's COMMIT of the forward switch failed.  Refused by the server
 * (the connection stands): rolled back.  Lost with the connection: it may
 * have committed before the answer was lost, so the catalog, read on a new
 * connection, tells; *committed when the tables stand switched.  Not
 * committed: err says so, and, between two databases, what the target
 * committed already and what to run.  *unknown: the catalog could not be
 * read either. */
static void
commit_lost(PgConn *s, int old_pid, const Names *n, bool same, bool *committed,
            bool *unknown, Err *err)
{
    Err e = {0};
    Where w;
    char pid[16], v[8];
    const char *p[1] = {pid};

    *committed = false;
    *unknown = false;
    (void) snprintf(pid, sizeof pid, "%d", old_pid);
    if (pg_is_broken(s) || pg_err_is_connection(err))
    {
        /* The old session may still be committing (a synchronous standby's
         * wait) or hold the transaction open, its COMMIT lost on the way:
         * ended first (up to 5 s), so the catalog's answer is final. */
        if (!pg_reconnect(s, &e) ||
            !query_text(s,
                        "SELECT (NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid "
                        "= $1::int) OR pg_catalog.pg_terminate_backend($1::int, 5000))::text",
                        1, p, v, sizeof v, &e) ||
            (strcmp(v, "true") != 0 &&
             !err_set(&e, EC_PG_QUERY, "its session (pid %s) did not end", pid)) ||
            !names_stand(s, n, same, &w, &e))
        {
            *unknown = true;
            err_prefix(err, "the switch's COMMIT got no answer and whether it committed could "
                            "not be read (%s)",
                       e.msg);
            err_hint(err, "Run --switch again: it says \"already switched\" if it did.");
            return;
        }
        if (w == AT_SWITCHED)
        {
            log_warn("the switch's COMMIT got no answer (%s), but the tables stand switched: it "
                     "committed",
                     err->msg);
            err_clear(err);
            *committed = true;
            return;
        }
    }
    err_prefix(err, "the switch's transaction did not commit%s",
               same ? ": nothing is switched" : " on the source: nothing is renamed there");
    if (same)
        err_hint(err, "Run --switch again.");
    else
        err_hint(err,
                 "The target's part committed before it (the late <fk>_uuid of migrate-mode "
                 "children, the map's trigger dropped, the legacy_id sequences started, the way "
                 "back's start recorded); the application goes on writing to the source. Run "
                 "--switch again (each step is done again), or resume the capture with the "
                 "migrate command that started it, which makes the map's trigger again.");
}

/* The switch transaction, forward, one attempt.  *retry: the lock was not
 * granted in time (or a deadlock); rolled back. */
static bool
switch_once(PgConn *s, const MigrateSpec *sp, const Names *n, bool same, int lock_timeout_ms,
            MigrateCatchUp catch_up, void *ctx, SwitchStats *st, char *seq, size_t seqsize,
            bool *retry, Err *err)
{
    int64_t t0 = 0;
    int old_pid;
    char seqoid[16] = "";
    const char *p[2] = {n->from_q, sp->key};
    SwitchLock lk = {s, NULL, sp, n, lock_timeout_ms, 0, st, same && !has_childtables(sp)};

    *retry = false;
    if (!pg_connect_again(s, &lk.flush, err))
    {
        err_prefix(err, "a second connection for the switch");
        goto fail;
    }
    if (!catch_up(ctx, take_switch_lock, &lk, err))
    {
        if (lk.t0 != 0)
            err_prefix(err, "catching up to the switch");
        goto fail;
    }
    if (lk.t0 == 0)
    {
        err_set(err, EC_INTERNAL, "the capture ended without taking the switch's lock");
        goto fail;
    }
    t0 = lk.t0;
    if ((lk.children_later && !lock_children(s, sp, "SHARE ROW EXCLUSIVE", err)) ||
        (same && !late_children(s, sp, st, err)) ||
        !query_text(s, "SELECT pg_catalog.pg_get_serial_sequence($1, $2)", 2, p, seq, seqsize,
                    err) ||
        (seq[0] && !query_text(s, "SELECT pg_catalog.pg_get_serial_sequence($1, $2)::regclass::oid",
                               2, p, seqoid, sizeof seqoid, err)))
        goto fail;
    if (!same)
    {
        char at[PGO_LSN_TEXT_SIZE];

        pgo_lsn_format(st->final_lsn, at);
        /* The way back starts at the target's position now, the capture's
         * last change applied: the application writes there only after this
         * switch.  Recorded before the commit: a switch that commits has it
         * (a later attempt records its own). */
        if (!exec_fmt(s, err, "LOCK TABLE %s IN ACCESS EXCLUSIVE MODE", n->from_q) ||
            !move_table(s, n->from_q, sp->from_schema, sp->from_table, sp->from_schema,
                        sp->legacy_table, err) ||
            !back_rules(s, sp, n->legacy_q, err) ||
            !tseq_start(s, n->tdb, &n->seq, sp->into_schema, sp->map_table, err) ||
            !switch_childtables_two(s, sp, n, at, lock_timeout_ms, err) ||
            (n->rev_db && !record_reverse(n->rev_db, n->into_key, n->rev, at, err)))
            goto fail;
    }
    else
    {
        char at[PGO_LSN_TEXT_SIZE];
        char *newname = pg_qualified(s, sp->from_schema, sp->from_table);
        bool ok;

        pgo_lsn_format(st->final_lsn, at);
        ok = exec_fmt(s, err, "LOCK TABLE %s, %s IN ACCESS EXCLUSIVE MODE", n->into_q,
                      n->from_q) &&
             /* before the renames: its pending events name the new table */
             unhook_children(s, sp, err) && back_rules(s, sp, n->legacy_q, err) &&
             move_table(s, n->from_q, sp->from_schema, sp->from_table, sp->from_schema,
                        sp->legacy_table, err) &&
             move_table(s, n->into_q, sp->into_schema, sp->into_table, sp->from_schema,
                        sp->from_table, err) &&
             (seqoid[0] == '\0' ||
              exec_fmt(s, err, "ALTER TABLE %s ALTER COLUMN legacy_id SET DEFAULT nextval('%s'::regclass)",
                       newname, seqoid)) &&
             switch_childtables(s, sp, err) &&
             /* The way back starts here: every later write to the new tables
              * commits after this transaction. */
             (n->one_way || record_reverses(s, sp, n, at, err));
        free(newname);
        if (!ok)
            goto fail;
    }
    old_pid = PQbackendPID(pg_raw(s));
    if (!pg_exec(s, "COMMIT", err))
    {
        bool committed;

        commit_lost(s, old_pid, n, same, &committed, &st->unknown, err);
        if (!committed)
            goto fail;
    }
    st->lock_held_ms = monotime_ms() - t0;
    pg_close(lk.flush);
    return true;
fail:
    pg_close(lk.flush);
    rollback(s);
    *retry = lock_failed(err);
    return false;
}

/* fill_childtable_keys restricted to the rows the way back wrote ($1, an
 * array of their ids): each row found by its primary key from the unnested
 * ids, each key looked up in the map (or the map and the parent) by a scalar
 * subquery, which the planner runs per row on the map's index and never
 * turns into a join.  (A join let it read the whole map into a hash under
 * the lock: a partitioned child has no statistics of its own, and the join's
 * estimate came out a thousand times too large; 2 s for a map of 5,000,000
 * rows, against 25 ms.  The same ids as a literal "= ANY" array cost the
 * planner 15-37 ms per 1,000, every element estimated.)  The same rows
 * change as in the form reading every row. */
static char *
childtable_keys_of_ids(const char *cq, const char *fk, const char *fku,
                       const char *map, const char *parent, bool required)
{
    char *key = xasprintf("(SELECT m.legacy_id FROM %s m WHERE m.id = c.%s)", map, fku);
    char *sql, *n;

    if (required)
        n = xasprintf("UPDATE %s c SET %s = (SELECT m.id FROM %s m WHERE m.legacy_id = c.%s AND "
                      "EXISTS (SELECT 1 FROM %s p WHERE p.id = m.id)) FROM unnest($1::uuid[]) "
                      "k(id) WHERE c.id = k.id AND c.%s IS NULL AND (SELECT m.id FROM %s m "
                      "WHERE m.legacy_id = c.%s AND EXISTS (SELECT 1 FROM %s p WHERE p.id = "
                      "m.id)) IS NOT NULL RETURNING 1",
                      cq, fku, map, fk, parent, fku, map, fk, parent);
    else
        n = xasprintf("UPDATE %s c SET %s = NULL FROM unnest($1::uuid[]) k(id) WHERE c.id = k.id "
                      "AND c.%s IS NULL AND c.%s IS NOT NULL AND (SELECT m.legacy_id FROM %s m "
                      "WHERE m.legacy_id = c.%s) IS NOT NULL RETURNING 1",
                      cq, fk, fku, fk, map, fk);
    /* <fk> IS DISTINCT FROM COALESCE(key, <fk>): a key, and another one */
    sql = xasprintf("WITH u AS (UPDATE %s c SET %s = %s FROM unnest($1::uuid[]) k(id) WHERE "
                    "c.id = k.id AND c.%s IS DISTINCT FROM COALESCE(%s, c.%s) RETURNING 1), "
                    "n AS (%s) SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM n)",
                    cq, fk, key, fk, key, fk, n);
    free(key);
    free(n);
    return sql;
}

/* Migrate-mode children, switching back: the UUIDv7 child's <fk> made the
 * parent map's legacy key of its <fk>_uuid again where the application wrote
 * (or changed) only <fk>_uuid after the switch, and NULL where it cleared
 * <fk>_uuid of a row whose <fk> names a mapped parent, as it was before the switch
 * (the capture resumes on it, --verify checks it); the legacy child got that
 * key from the way back.  The child's trigger leaves <fk>_uuid as it is. */
static bool
fill_childtable_keys(PgConn *c, const MigrateSpec *sp, bool same, const ReverseIds *ids,
                     uint64_t *rows, Err *err)
{
    char *map = pg_qualified(c, sp->into_schema, sp->map_table);
    /* the UUIDv7 parent: <from>'s name in one database after the switch */
    char *parent = same ? pg_qualified(c, sp->from_schema, sp->from_table)
                        : pg_qualified(c, sp->into_schema, sp->into_table);
    bool ok = true;

    for (size_t i = 0; ok && i < sp->nchildren; i++)
    {
        const MigrateChild *ch = &sp->children[i];
        char uuidcol[80], v[32];
        bool required = false;
        /* after the switch: <from>'s name in one database, its own in two */
        char *cq, *fk, *fku, *sql, *arr = NULL;

        if (ids && ids[i].n == 0)
            continue;
        cq = same ? pg_qualified(c, ch->schema, ch->table)
                  : pg_qualified(c, sp->into_schema, ch->into_table);
        fk = pg_ident(c, ch->fk_column);

        (void) snprintf(uuidcol, sizeof uuidcol, "%s_uuid", ch->fk_column);
        fku = pg_ident(c, uuidcol);
        if (ids)
            arr = pg_array_literal((const char *const *) ids[i].v, (int) ids[i].n);
        /* A child whose legacy <fk> is NOT NULL (its check, v7fill_<fk>_or_uuid,
         * wants one of the two) kept the <fk> of a cleared <fk>_uuid in the
         * legacy child (the way back): its <fk>_uuid is that parent's again,
         * so both sides name the same parent. */
        ok = fk_required(c, cq, ch->fk_column, &required, err);
        /* Its estimate (the join to the ids) being far too large, the
         * planner would compile it (JIT: 430 ms for 1,000 rows measured). */
        ok = ok && (!ids || pg_exec(c, "SET LOCAL jit = off", err));
        if (ids)
            sql = childtable_keys_of_ids(cq, fk, fku, map, parent, required);
        else if (required)
            sql = xasprintf("WITH u AS (UPDATE %s c SET %s = m.legacy_id FROM %s m WHERE c.%s = "
                            "m.id AND c.%s IS DISTINCT FROM m.legacy_id RETURNING 1), "
                            "n AS (UPDATE %s c SET %s = m.id FROM %s m WHERE c.%s IS NULL AND "
                            "c.%s = m.legacy_id AND EXISTS (SELECT 1 FROM %s p WHERE p.id = m.id) "
                            "RETURNING 1) "
                            "SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM n)",
                            cq, fk, map, fku, fk, cq, fku, map, fku, fk, parent);
        else
            sql = xasprintf("WITH u AS (UPDATE %s c SET %s = m.legacy_id FROM %s m WHERE c.%s = "
                            "m.id AND c.%s IS DISTINCT FROM m.legacy_id RETURNING 1), "
                            "n AS (UPDATE %s c SET %s = NULL WHERE c.%s IS NULL AND c.%s IS NOT "
                            "NULL AND EXISTS (SELECT 1 FROM %s m WHERE m.legacy_id = c.%s) "
                            "RETURNING 1) "
                            "SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM n)",
                            cq, fk, map, fku, fk, cq, fk, fku, fk, map, fk);
        ok = ok && query_text(c, sql, arr ? 1 : 0, arr ? (const char *const *) &arr : NULL, v,
                              sizeof v, err);
        if (ok)
            *rows += strtoull(v, NULL, 10);
        else
            err_prefix(err, "the legacy keys of %s.%s", ch->schema, ch->table);
        free(sql);
        free(arr);
        free(cq);
        free(fk);
        free(fku);
    }
    free(map);
    free(parent);
    /* Under the lock: the child's foreign key checks now (a table with
     * pending trigger events cannot be renamed). */
    return ok && (PQtransactionStatus(pg_raw(c)) != PQTRANS_INTRANS ||
                  pg_exec(c, "SET CONSTRAINTS ALL IMMEDIATE", err));
}

/* Child rows the application wrote after the switch with only <fk>_uuid:
 * their legacy key from the map, so the legacy application finds them
 * (expand mode, migrate_childkeys.h; map: the target when the children are
 * in another database, else NULL).  Migrate-mode children:
 * fill_childtable_keys on c, the target (map: the target too when the
 * legacy tables are in another database, else NULL; same: one database). */
static bool
fill_child_keys(PgConn *c, PgConn *map, bool same, const MigrateSpec *sp, const char *legacy_q,
                uint64_t *rows, Err *err)
{
    if (has_childtables(sp))
        return fill_childtable_keys(c, sp, same, NULL, rows, err);
    for (size_t i = 0; i < sp->nchildren; i++)
        if (!migrate_child_keys_back(c, map, sp, &sp->children[i], legacy_q, rows, err))
            return false;
    return true;
}

/* Expand-mode children: each one's index of the rows switching back gives a
 * key (migrate_child_back_index; a migration whose fill was made by an
 * earlier version has none yet), before anything is read through it. */
static bool
back_indexes(PgConn *c, const MigrateSpec *sp, Err *err)
{
    for (size_t i = 0; i < sp->nchildren; i++)
        if (!migrate_child_back_index(c, sp, &sp->children[i], err))
            return false;
    return true;
}

/* The way back up to stop (strictly before it) on apply: the parent's, then
 * each migrate-mode child's up to the same position. */
static bool
reverse_upto(PgConn *apply, PgConn *legacy, const MigrateSpec *sp, uint64_t stop,
             ReverseStats *rst, Err *err)
{
    memset(rst, 0, sizeof *rst);
    if (has_childtables(sp))
        return migrate_childreverse_upto(apply, legacy, sp, stop, rst, err);
    return migrate_reverse_apply(apply, legacy, sp, NULL, stop, false, rst, err);
}

/* In the switch back's transaction, after the parent's names: every
 * migrate-mode child's names restored (<child> -> <into schema>.<child
 * into>, <child>_legacy -> <child>), the default its legacy_id got from the
 * switch dropped, the trigger on the parent's map made again, its way back's
 * state deleted. */
static bool
back_childtables(PgConn *s, const MigrateSpec *sp, Err *err)
{
    bool ok = true;

    for (size_t i = 0; ok && has_childtables(sp) && i < sp->nchildren; i++)
    {
        const MigrateChild *ch = &sp->children[i];
        char legacy[64], key[160], rev[64];
        char *cur_q = pg_qualified(s, ch->schema, ch->table);
        char *mid_q = pg_qualified(s, ch->schema, ch->into_table);
        char *into_q = pg_qualified(s, sp->into_schema, ch->into_table);
        char *legacy_q;
        const char *p[1] = {key};

        migrate_legacy_name(ch->table, legacy);
        legacy_q = pg_qualified(s, ch->schema, legacy);
        child_rev(sp, ch, key, rev);
        ok = exec_fmt(s, err, "LOCK TABLE %s, %s IN ACCESS EXCLUSIVE MODE", legacy_q, cur_q) &&
             move_table(s, cur_q, ch->schema, ch->table, ch->schema, ch->into_table, err) &&
             move_table(s, mid_q, ch->schema, ch->into_table, sp->into_schema, ch->into_table,
                        err) &&
             move_table(s, legacy_q, ch->schema, legacy, ch->schema, ch->table, err) &&
             exec_fmt(s, err, "ALTER TABLE %s ALTER COLUMN legacy_id DROP DEFAULT", into_q) &&
             migrate_childtable_rehook(s, sp, ch, err) &&
             pg_exec_params(s, "DELETE FROM v7fill.migrate_reverse WHERE into_table = $1", 1, p,
                            err);
        if (!ok)
            err_prefix(err, "child %s.%s", ch->schema, ch->table);
        free(cur_q);
        free(mid_q);
        free(into_q);
        free(legacy_q);
    }
    return ok;
}

/* Switching back: the way back caught up (each table's stream left open),
 * then the lock taken on t (the new table(s) against writes) and the legacy
 * tables caught up to its final position on apply's connection and their
 * own (written on legacy's: NULL, apply).  *t0: when the lock was granted (0:
 * not taken).  Two databases: t is the target. */
static bool
back_catch_up(PgConn *t, PgConn *apply, PgConn *legacy, const MigrateSpec *sp, const Names *n,
              int lock_timeout_ms, SwitchStats *st, int64_t *t0, Err *err)
{
    SwitchLock lk = {t, apply, sp, n, lock_timeout_ms, 0, st, !has_childtables(sp), true,
                     legacy != NULL};
    ReverseStats rst, under;
    uint64_t stop = 0;
    bool ok = pg_flush_wal(apply, &stop, err) &&
              migrate_childreverse_switch(apply, legacy, sp, stop, n->back_ids, take_switch_lock,
                                          &lk, &rst, &under, err);

    *t0 = lk.t0;
    if (!ok)
    {
        if (lk.t0 != 0)
            err_prefix(err, "catching the legacy table up");
        return false;
    }
    /* Renaming now would leave writes behind in the new table. */
    if (!rst.caught_up)
        return err_set(err, EC_INTERRUPTED, "interrupted while catching the legacy table up: "
                                            "not switched back");
    st->applied_at_switch = under.inserted + under.updated + under.deleted;
    return true;
}

/*
 * Switching back, under the lock on t, after the way back caught up: the
 * children's legacy keys from the map (fill_child_keys).  Migrate-mode
 * children, when the last fill before the lock found nothing to do: a child
 * row can need its <fk> only if the application wrote it since (the map's
 * rows never change; a deleted parent's ON DELETE SET NULL writes its
 * children), and every such write committed after the way back's last stop
 * before the lock, so the child's way back applied it under the lock: the
 * fill reads the rows it wrote there (every attempt's: a failed attempt's
 * fill is rolled back, its way back's writes are not) by their ids; nothing
 * when it wrote nothing.  (A child row written before its parent, which only
 * a dropped foreign key allows, reached the legacy child without a key; the
 * fill leaves it without one too, so both sides agree.)  Otherwise, or past
 * REVERSE_IDS_MAX ids, it reads every row.  Expand-mode children in one
 * database: keys_same; in two, nothing here (after the commit).
 */
static bool
fill_under_lock(PgConn *t, bool same, const MigrateSpec *sp, const Names *n, SwitchStats *st,
                Err *err)
{
    bool all = !st->children_fill_clean || n->back_ids == NULL;
    size_t k = 0;

    st->children_filled_lock = 0;
    if (!has_childtables(sp))
        return !same ||
               fill_child_keys(t, NULL, true, sp, n->legacy_q, &st->children_filled_lock, err);
    for (size_t i = 0; !all && i < n->nback_ids; i++)
    {
        all = n->back_ids[i].overflow;
        k += n->back_ids[i].n;
    }
    st->children_fill_rows = all ? -1 : (int64_t) k;
    if (!all && k == 0)
        return true;
    return fill_childtable_keys(t, sp, same, all ? NULL : n->back_ids, &st->children_filled_lock,
                                err);
}

/* Switching back (phase reverse, same database): the new tables locked
 * against writes, the legacy ones caught up on a second connection, the
 * names restored. */
static bool
back_once(PgConn *t, PgConn *apply, const MigrateSpec *sp, const Names *n, int lock_timeout_ms,
          SwitchStats *st, bool *retry, Err *err)
{
    int64_t t0 = 0;
    const char *p[1] = {n->into_key};
    char *newq = pg_qualified(t, sp->from_schema, sp->into_table);
    bool ok = false;

    *retry = false;
    if (!back_catch_up(t, apply, NULL, sp, n, lock_timeout_ms, st, &t0, err) ||
        (!has_childtables(sp) && !lock_children(t, sp, "SHARE ROW EXCLUSIVE", err)))
        goto out;
    ok = fill_under_lock(t, true, sp, n, st, err) &&
         exec_fmt(t, err, "LOCK TABLE %s, %s IN ACCESS EXCLUSIVE MODE", n->legacy_q, n->from_q) &&
         move_table(t, n->from_q, sp->from_schema, sp->from_table, sp->from_schema,
                    sp->into_table, err) &&
         move_table(t, newq, sp->from_schema, sp->into_table, sp->into_schema, sp->into_table,
                    err) &&
         move_table(t, n->legacy_q, sp->from_schema, sp->legacy_table, sp->from_schema,
                    sp->from_table, err) &&
         exec_fmt(t, err, "ALTER TABLE %s ALTER COLUMN legacy_id DROP DEFAULT", n->into_q) &&
         pg_exec_params(t, "DELETE FROM v7fill.migrate_reverse WHERE into_table = $1", 1, p,
                        err) &&
         back_childtables(t, sp, err) && back_rules(t, sp, NULL, err) &&
         pg_exec(t, "COMMIT", err);
    if (ok)
        st->lock_held_ms = monotime_ms() - t0;
out:
    free(newq);
    if (!ok)
    {
        rollback(t);
        *retry = lock_failed(err);
    }
    return ok;
}

/* The way back's state rows of the parent and each migrate-mode child
 * deleted on c (in its open transaction). */
static bool
forget_reverses(PgConn *c, const MigrateSpec *sp, const Names *n, Err *err)
{
    const char *p[1] = {n->into_key};
    bool ok = pg_exec_params(c, "DELETE FROM v7fill.migrate_reverse WHERE into_table = $1", 1, p,
                             err);

    for (size_t i = 0; ok && has_childtables(sp) && i < sp->nchildren; i++)
    {
        char key[160], rev[64];

        child_rev(sp, &sp->children[i], key, rev);
        p[0] = key;
        ok = pg_exec_params(c, "DELETE FROM v7fill.migrate_reverse WHERE into_table = $1", 1, p,
                            err);
    }
    return ok;
}

/* Switching back between two databases, in the target's transaction: the
 * trigger on the parent's map made again for each migrate-mode child. */
static bool
rehook_childtables(PgConn *t, const MigrateSpec *sp, Err *err)
{
    for (size_t i = 0; has_childtables(sp) && i < sp->nchildren; i++)
        if (!migrate_childtable_rehook(t, sp, &sp->children[i], err))
        {
            err_prefix(err, "child %s.%s", sp->children[i].schema, sp->children[i].table);
            return false;
        }
    return true;
}

/* Switching back between two databases, in the source's transaction: each
 * migrate-mode child's legacy table gets its name back (<child>_legacy ->
 * <child>). */
static bool
back_childtables_two(PgConn *s, const MigrateSpec *sp, Err *err)
{
    bool ok = true;

    for (size_t i = 0; ok && has_childtables(sp) && i < sp->nchildren; i++)
    {
        const MigrateChild *ch = &sp->children[i];
        char legacy[64];
        char *legacy_q;

        migrate_legacy_name(ch->table, legacy);
        legacy_q = pg_qualified(s, ch->schema, legacy);
        ok = exec_fmt(s, err, "LOCK TABLE %s IN ACCESS EXCLUSIVE MODE", legacy_q) &&
             move_table(s, legacy_q, ch->schema, legacy, ch->schema, ch->table, err);
        if (!ok)
            err_prefix(err, "child %s.%s", ch->schema, ch->table);
        free(legacy_q);
    }
    return ok;
}

/* Switching back between two databases, the source switched back but the
 * target's transaction lost (it failed, or a kill came between the two
 * commits): its migrate-mode children's <fk> from <fk>_uuid and the map's
 * triggers again, each in a statement of its own (both idempotent); a
 * failure only warns. */
static void
back_two_target_again(PgConn *t, const MigrateSpec *sp)
{
    uint64_t rows = 0;
    Err e = {0};

    if (!has_childtables(sp))
        return;
    if (!fill_childtable_keys(t, sp, false, NULL, &rows, &e) || !rehook_childtables(t, sp, &e))
        log_warn("switched back, but the UUIDv7 children's keys or the map's triggers could not "
                 "be set again (%s): run --switch again to retry",
                 e.msg);
    else if (rows > 0)
        log_info("switched back: %" PRIu64 " UUIDv7 child rows got their legacy key from the map "
                 "again", rows);
}

/* Switching back between two databases (phase reverse): the target's new
 * table locked against writes, the source's legacy table caught up under
 * that lock, then renamed <from> again in a short transaction of its own on
 * the source, committed before the target's (the application's writes to
 * the new table wait until then, and find the way back's state gone).  The
 * target's legacy_id keeps its sequence (the capture gives the keys). */
static bool
back_two(PgConn *s, PgConn *apply, PgConn *legacy, const MigrateSpec *sp, const Names *n,
         int lock_timeout_ms, SwitchStats *st, bool *retry, Err *err)
{
    PgConn *t = n->tdb;
    int64_t t0 = 0;
    char v[8];
    bool ok = false, src_open = false;

    *retry = false;
    if (!back_catch_up(t, apply, legacy, sp, n, lock_timeout_ms, st, &t0, err))
        goto out;
    /* Migrate-mode children: the UUIDv7 children's <fk> from <fk>_uuid and the
     * map's triggers made again, in the target's transaction (committed
     * after the source's). */
    if (has_childtables(sp) &&
        (!fill_under_lock(t, false, sp, n, st, err) || !rehook_childtables(t, sp, err)))
        goto out;
    /* Open from here: a LOCK that times out leaves BEGIN's block aborted,
     * which the next attempt's BEGIN would meet (25P02). */
    src_open = true;
    ok = exec_fmt(s, err, "BEGIN; SET LOCAL lock_timeout = '%d ms'; LOCK TABLE %s IN ACCESS "
                          "EXCLUSIVE MODE",
                  lock_timeout_ms, n->legacy_q) &&
         move_table(s, n->legacy_q, sp->from_schema, sp->legacy_table, sp->from_schema,
                    sp->from_table, err) &&
         back_rules(s, sp, NULL, err) && back_childtables_two(s, sp, err) &&
         query_text(s, "SELECT (pg_catalog.to_regclass('v7fill.migrate_reverse') IS NOT NULL)::text",
                    0, NULL, v, sizeof v, err) &&
         (strcmp(v, "true") != 0 || forget_reverses(s, sp, n, err)) &&
         pg_exec(s, "COMMIT", err);
    if (!ok)
        goto out;
    src_open = false;
    st->lock_held_ms = monotime_ms() - t0;
    /* Switched back: the target's state rows and lock go (a failure here is
     * left to the rerun, which finds the names restored). */
    {
        Err e = {0};

        if (!forget_reverses(t, sp, n, &e) || !pg_exec(t, "COMMIT", &e))
        {
            log_warn("switched back, but the target's transaction failed (%s): its way-back "
                     "state of %s stays (the next switch records its own)",
                     e.msg, n->into_key);
            rollback(t);
            back_two_target_again(t, sp);
        }
    }
    return true;
out:
    if (src_open)
        rollback(s);
    rollback(t);
    *retry = lock_failed(err);
    return false;
}

/* After switching back: the reverse slot and publication are not needed
 * (a next switch makes them anew); a failure only warns. */
static void
drop_reverse(PgConn *t, const char *rev)
{
    Err e = {0};
    const char *p[1] = {rev};
    char v[8];
    char *pub = pg_ident(t, rev);

    if (!query_text(t,
                    "SELECT pg_catalog.pg_drop_replication_slot(slot_name) FROM "
                    "pg_catalog.pg_replication_slots WHERE slot_name = $1",
                    1, p, v, sizeof v, &e) ||
        !exec_fmt(t, &e, "DROP PUBLICATION IF EXISTS %s", pub))
        log_warn("could not drop the way back's slot or publication \"%s\" (%s): drop them by "
                 "hand, SELECT pg_drop_replication_slot('%s'); DROP PUBLICATION \"%s\";",
                 rev, e.msg, rev, rev);
    free(pub);
}

/* The parent's and each migrate-mode child's. */
static void
drop_reverses(PgConn *t, const MigrateSpec *sp, const Names *n)
{
    drop_reverse(t, n->rev);
    for (size_t i = 0; has_childtables(sp) && i < sp->nchildren; i++)
    {
        char key[160], rev[64];

        child_rev(sp, &sp->children[i], key, rev);
        drop_reverse(t, rev);
    }
}

/* Switching back: what the application must change for each migrate-mode
 * child. */
static void
print_back_children(const MigrateSpec *sp, bool same)
{
    for (size_t i = 0; has_childtables(sp) && i < sp->nchildren; i++)
    {
        const MigrateChild *ch = &sp->children[i];

        if (!same)
        {
            printf("  child %s.%s on the source has its name again (its %s is the parent's "
                   "legacy key); on the target %s.%s keeps its legacy_id default, its %s "
                   "follows %s_uuid, the trigger on %s.%s is made again\n",
                   ch->schema, ch->table, ch->fk_column, sp->into_schema, ch->into_table,
                   ch->fk_column, ch->fk_column, sp->into_schema, sp->map_table);
            continue;
        }
        printf("  child %s.%s is the legacy table again (its %s is the parent's legacy key); the "
               "UUIDv7 one is %s.%s again, its legacy_id without a default, the trigger on %s.%s "
               "made again; a foreign key of %s.%s dropped or relaxed for the way back can be "
               "added again\n",
               ch->schema, ch->table, ch->fk_column, sp->into_schema, ch->into_table,
               sp->into_schema, sp->map_table, ch->schema, ch->table);
    }
}

static bool
legacy_id_nullable(PgConn *target, const char *into_q, int lock_timeout_ms, Err *err)
{
    Err reset;
    bool ok, not_null = false;

    /* Nullable already (a rerun after the switch): no ACCESS EXCLUSIVE
     * lock queued on the live table. */
    if (!column_not_null(target, into_q, "legacy_id", &not_null, err))
        return false;
    if (!not_null)
        return true;
    ok = exec_fmt(target, err, "SET lock_timeout = %d", lock_timeout_ms) &&
         exec_fmt(target, err, "ALTER TABLE %s ALTER COLUMN legacy_id DROP NOT NULL", into_q);
    if (!pg_exec(target, "RESET lock_timeout", &reset))
        log_debug("RESET lock_timeout: %s", reset.msg);
    if (!ok)
        err_prefix(err, "could not let the target's legacy_id be NULL for new rows");
    return ok;
}

static bool
switch_retried(PgConn *s, PgConn *apply, MigrateSpec *sp, const Names *n, bool same,
               bool back, int lock_timeout_ms, int attempts, MigrateCatchUp catch_up, void *ctx,
               SwitchStats *st, char *seq, size_t seqsize, Err *err)
{
    for (int a = 1; a <= attempts; a++)
    {
        bool retry = false;

        st->attempts = a;
        if (back && !same ? back_two(s, apply, n->lapply, sp, n, lock_timeout_ms, st, &retry, err)
            : back ? back_once(s, apply, sp, n, lock_timeout_ms, st, &retry, err)
                 : switch_once(s, sp, n, same, lock_timeout_ms, catch_up, ctx, st, seq, seqsize,
                               &retry, err))
            return true;
        if (!retry)
            return false;
        log_warn("switch attempt %d of %d: %s; retrying", a, attempts, err->msg);
        if (a < attempts)
            backoff(a);
    }
    err_prefix(err, "the switch could not take its lock in %d attempts of %d ms", attempts,
               lock_timeout_ms);
    err_hint(err, "A long transaction holds %s.%s; retry later or with a larger lock timeout.",
             sp->from_schema, sp->from_table);
    return false;
}

/* Two databases, expand-mode children, after the switch's commit: the child
 * rows written between the pass before the lock and the lock (their parents
 * are in the map now); no trigger reaches them.  Switched already: a failure
 * only warns. */
static void
settle_after_commit(PgConn *source, PgConn *target, const MigrateSpec *sp, int lock_timeout_ms,
                    SwitchStats *st)
{
    SwitchStats after;
    Err e = {0};

    if (sp->nchildren == 0 || has_childtables(sp))
        return;
    memset(&after, 0, sizeof after);
    if (settle_children(source, target, sp, lock_timeout_ms, &after, &e))
        st->children_late = after.children_settled;
    else
        log_warn("switched, but the children's pass after the switch failed (%s): child rows "
                 "written just before the switch may keep <fk>_uuid NULL (--verify names them)",
                 e.msg);
}

bool
migrate_switch(PgConn *source, PgConn *target, MigrateSpec *spec, int lock_timeout_ms,
               int attempts, MigrateCatchUp catch_up, void *ctx, SwitchStats *st, Err *err)
{
    bool same = source == target || spec->source_conninfo[0] == '\0';
    bool back = spec->phase == MIGRATE_PHASE_REVERSE;
    PgConn *c = same ? target : source;
    PgConn *apply = NULL;
    char seq[256] = "";
    Names n;
    Where w;
    bool ok = false, made_reverses = false;

    memset(st, 0, sizeof *st);
    st->back = back;
    if (lock_timeout_ms <= 0)
        lock_timeout_ms = 1000;
    if (attempts <= 0)
        attempts = 10;
    if (spec->legacy_table[0] == '\0')
        migrate_legacy_name(spec->from_table, spec->legacy_table);
    names_init(c, spec, &n);
    /* Two databases: the target's legacy_id has no sequence to fill it for the
     * application's new rows (the old one is the source's), so it may be
     * NULL from the switch on (also on a rerun of an earlier switch). */
    if (!back && !same && !legacy_id_nullable(target, n.into_q, lock_timeout_ms, err))
        goto out;
    if (!names_stand(c, &n, same, &w, err))
        goto out;
    if ((back && w == AT_BEFORE) || (!back && w == AT_SWITCHED))
    {
        st->already = true;
        if (back)
        {
            /* Killed after the commit: the slots may be left (two databases:
             * the target's state rows too, and between the two commits the
             * target's own work). */
            Err e = {0};

            if (!same && !forget_reverses(target, spec, &n, &e))
                log_warn("the target's way-back state of %s: %s", n.into_key, e.msg);
            if (!same)
                back_two_target_again(target, spec);
            drop_reverses(target, spec, &n);
            spec->phase = MIGRATE_PHASE_FOLLOW;
            spec->legacy_table[0] = '\0';
            printf("%s.%s is the legacy table again: already switched back\n", spec->from_schema,
                   spec->from_table);
        }
        else
        {
            const char *p[1] = {n.into_key};
            char v[PGO_LSN_TEXT_SIZE + 8] = "";

            if (same && !query_text(c,
                                    "SELECT switch_lsn::text FROM v7fill.migrate_reverse WHERE "
                                    "into_table = $1",
                                    1, p, v, sizeof v, err))
                goto out;
            if (v[0] && !pgo_lsn_parse(v, &spec->switch_lsn))
                spec->switch_lsn = 0;
            /* Killed after the commit, before the pass after it (and storing
             * the phase): that pass now. */
            if (!same && spec->phase == MIGRATE_PHASE_FOLLOW)
                settle_after_commit(source, target, spec, lock_timeout_ms, st);
            if (spec->phase != MIGRATE_PHASE_REVERSE)
                spec->phase = MIGRATE_PHASE_SWITCHED;
            printf("%s.%s is already switched: the UUIDv7 table has its name, the old one is "
                   "%s.%s\n",
                   spec->from_schema, spec->from_table, spec->from_schema, spec->legacy_table);
        }
        ok = true;
        goto out;
    }
    if (!back && catch_up == NULL)
    {
        err_set(err, EC_INTERNAL, "the switch needs a catch-up function");
        goto out;
    }
    if (back)
    {
        ReverseStats pre;
        uint64_t now_lsn = 0;
        bool replica;

        /* Most of the way back and the child keys before the lock; what was
         * written since, under it; the way back's connection writes as
         * --reverse's (migrate_reverse_session). */
        n.tdb = same ? NULL : target;
        if (has_childtables(spec))
        {
            n.nback_ids = spec->nchildren;
            n.back_ids = xcalloc(n.nback_ids, sizeof *n.back_ids);
        }
        if (!pg_connect_again(target, &apply, err) ||
            (!same && !pg_connect_again(source, &n.lapply, err)) ||
            !migrate_reverse_session(same ? apply : n.lapply, spec, &replica, err) ||
            (!has_childtables(spec) && !back_indexes(same ? target : source, spec, err)))
            goto out;
        /* Again while a pass found much to do: writers go on meanwhile. */
        for (int pass = 0; pass < 5; pass++)
        {
            if (!current_lsn(target, &now_lsn, err) ||
                !reverse_upto(apply, n.lapply, spec, now_lsn, &pre, err))
                goto out;
            if (pre.inserted + pre.updated + pre.deleted < 100)
                break;
        }
        /* Migrate-mode children: the fill's own updates of the UUIDv7
         * children are changes for their way back, applied now rather than
         * under the lock (2,000 of them held it 2-3 s), and the fill again
         * until it finds nothing: then, when nothing is applied under the
         * lock either, the fill (a scan of each child) is skipped there. */
        for (int round = 0; (same || has_childtables(spec)) && round < 3; round++)
        {
            uint64_t filled = 0;

            if (!fill_child_keys(target, same ? NULL : target, same, spec, n.legacy_q, &filled, err))
                goto out;
            st->children_filled += filled;
            st->children_fill_clean = has_childtables(spec) && filled == 0;
            if (!has_childtables(spec) || filled == 0)
                break;
            if (!current_lsn(target, &now_lsn, err) ||
                !reverse_upto(apply, n.lapply, spec, now_lsn, &pre, err))
                goto out;
        }
        /* Two databases, expand mode: the children are on the source, the
         * map on the target.  Its writes are WAL that the way back's slot
         * reads past when both databases share a cluster: read once more
         * now, not under the lock (10,000 recorded moves set here made the
         * lock 360 ms long instead of 50). */
        if (!same && !has_childtables(spec) &&
            (!fill_child_keys(source, target, false, spec, n.legacy_q, &st->children_filled, err) ||
                      !current_lsn(target, &now_lsn, err) ||
                      !reverse_upto(apply, n.lapply, spec, now_lsn, &pre, err)))
            goto out;
    }
    else
    {
        if (!check_caught_up(source, spec, err) || !one_way_of(target, spec, &n, err))
            goto out;
        made_reverses = !n.one_way; /* said if the switch fails from here */
        if ((!n.one_way && !prepare_reverses(target, spec, &n, err)) ||
            !childtables_fk_nullable(target, spec, lock_timeout_ms, err) ||
            !settle_children(same ? target : source, same ? NULL : target, spec,
                             lock_timeout_ms, st, err))
            goto out;
    }
    if (!same && !back)
    {
        /* A Citus-distributed target: one way, its legacy_id left as the
         * application gives it. */
        n.tdb = target;
        if (!n.one_way)
            n.rev_db = target;
        if (!n.one_way &&
            (!legacy_id_sequence(source, target, n.from_q, spec->key, spec->into_schema,
                                 spec->into_table, n.into_q, lock_timeout_ms, &n.seq, err) ||
             !childtables_sequences(source, target, spec, &n, lock_timeout_ms, err)))
            goto out;
    }
    if (!switch_retried(c, apply, spec, &n, same, back, lock_timeout_ms, attempts, catch_up, ctx,
                        st, seq, sizeof seq, err))
    {
        goto out;
    }
    spec->switch_lsn = st->final_lsn;
    if (back && !same && !has_childtables(spec))
    {
        /* Child rows written with only <fk>_uuid since the pass before the
         * lock: their parents came with the catch-up under it.  Not under the
         * lock: the pass reads the child (a scan, without an index on <fk>),
         * and the application's writes to the new table would wait for it.
         * Switched back already: a failure only warns. */
        Err e = {0};

        if (!fill_child_keys(source, target, false, spec, n.from_q, &st->children_filled, &e))
            log_warn("switched back, but the children's pass after it failed (%s): child rows "
                     "written just before may keep <fk> NULL",
                     e.msg);
    }
    if (back)
    {
        char how[112] = "";

        drop_reverses(target, spec, &n);
        spec->phase = MIGRATE_PHASE_FOLLOW;
        spec->legacy_table[0] = '\0';
        if (has_childtables(spec) && st->children_fill_rows < 0)
            (void) snprintf(how, sizeof how, "; the fill under the lock read every child row");
        else if (has_childtables(spec) && st->children_fill_rows > 0)
            (void) snprintf(how, sizeof how,
                            "; the fill under the lock read only the rows of the %" PRId64
                            " ids the way back wrote there",
                            st->children_fill_rows);
        else if (has_childtables(spec))
            (void) snprintf(how, sizeof how, "; no fill under the lock");
        printf("switched back: %s.%s is the legacy table again and %s.%s the UUIDv7 one; lock "
               "held %" PRId64 " ms (attempt %d), %" PRIu64 " changes applied under it; %" PRIu64
               " child rows got their legacy key from the map%s%s\n",
               spec->from_schema, spec->from_table, spec->into_schema, spec->into_table,
               st->lock_held_ms, st->attempts, st->applied_at_switch,
               st->children_filled + st->children_filled_lock,
               has_childtables(spec) ? " (in the UUIDv7 children)" : "", how);
        printf("the application must change: back to %s.%s with its %s %s key; resume the "
               "capture to keep the UUIDv7 table current: v7fill migrate --from %s.%s --key %s "
               "--time-column %s --into %s.%s",
               spec->from_schema, spec->from_table, spec->key_type, spec->key, spec->from_schema,
               spec->from_table, spec->key, spec->time_column, spec->into_schema,
               spec->into_table);
        for (size_t i = 0; i < spec->nchildren; i++)
            printf(" --child '%s.%s(%s)%s%s'", spec->children[i].schema, spec->children[i].table,
                   spec->children[i].fk_column, spec->children[i].time_column[0] ? ":" : "",
                   spec->children[i].time_column);
        printf("%s\n", has_childtables(spec) ? " --child-mode migrate" : "");
        if (!same)
            printf("  the target's %s.%s keeps its name and takes writes: one the application "
                   "still sends there reaches no legacy table (--verify names such rows as not "
                   "in the map); move every writer to the source first\n",
                   spec->into_schema, spec->into_table);
        print_back_children(spec, same);
        (void) fflush(stdout);
    }
    else
    {
        spec->phase = MIGRATE_PHASE_SWITCHED;
        if (!same)
            settle_after_commit(source, target, spec, lock_timeout_ms, st);
        print_notes(target, spec, &n, same, seq, st);
    }
    ok = true;
out:
    if (!ok && made_reverses && !st->unknown)
        warn_reverses_kept(spec, &n);
    pg_close(apply);
    pg_close(n.lapply);
    names_free(&n);
    return ok;
}
