/*
 * The way back of a migration (migrate_switch.h): after the switch, the new
 * table's changes, read from the reverse slot with the stream's pgoutput
 * source, applied into the legacy table by legacy key (the map translates a
 * uuid back), exactly once: a group of source transactions and the position
 * commit together, and the slot is acknowledged only over what committed.
 *
 * Two databases: the slot, the map and the new table are the target's, the
 * legacy table the source's.  The position commits with the legacy rows, in
 * the source's own v7fill.migrate_reverse (the target's row is where it
 * starts, and shows the progress to --status).  A map row the way back adds
 * commits (with the group's others) before the legacy row it names (a replay
 * finds it and reuses its key); one it removes goes after, from a list the legacy rows' transaction
 * writes (v7fill.migrate_reverse_gone, read again by the next run when a
 * kill came between): a replay still finds the row to delete, and no map row
 * outlives its rows.
 *
 * A parent with migrate-mode children moves the map rows it deletes into
 * v7fill.migrate_reverse_kept (on the maps' database, in the statement that
 * deletes them) instead of dropping them: its children's way back of the
 * same round still translates the <fk>_uuid of a child row whose parent was
 * inserted and deleted within the round (the parent's whole round is applied
 * first).  The round clears them once every child reached its stop.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/migrate_childreverse.h"
#include "v7fill/mem.h"
#include "v7fill/migrate_switch.h"
#include "v7fill/pg_pipe.h"
#include "v7fill/pgoutput.h"
#include "v7fill/record_hold.h"
#include "v7fill/replconn.h"
#include "v7fill/source_pgoutput.h"

/* A row the read-ahead inserted, with the legacy key its map row got. */
typedef struct FreshKey
{
    char id[40];
    char key[64];
} FreshKey;

typedef struct Rev
{
    PgConn *c;                   /* the legacy table's database: its rows and the position */
    PgConn *m;                   /* the new table's: its map and its slot (c in one database) */
    bool split;                  /* c and m are two databases */
    bool m_txn;                  /* split: the group's map rows in an open transaction on m */
    const MigrateSpec *spec;
    ReverseStats *st;
    char into_key[160];          /* the state row: "<into_schema>.<into_table>" */
    char *legacy_q, *map_q, *key_q;
    ReplTableInfo newt, oldt;
    int f_legacy_id, f_id;
    /* A migrate-mode child: its <fk> column (a common one) written as the
     * parent map's legacy key of <fk>_uuid, else as put_value says. */
    int fk_common;               /* its index among the common columns (-1: none) */
    int f_fku;                   /* <fk>_uuid's field in the record */
    bool fk_required;            /* the legacy <fk> is NOT NULL: a cleared <fk>_uuid keeps
                                    the key given (the legacy row cannot say "no parent") */
    char *pmap_q;                /* the parent's map */
    char pmap_key[160];          /* its rows' key in v7fill.migrate_reverse_kept */
    char *pmap_type;             /* one database: the type of its legacy_id (a kept key's cast) */
    bool keep;                   /* a parent with migrate-mode children: its deleted map rows
                                    kept for them (the top of this file) */
    char map_key[160];           /* the map's key in v7fill.migrate_reverse_kept */
    size_t ncommon;
    int *common_field;           /* per common column: its field in the record */
    char **common_q;             /* its quoted name */
    bool in_txn;
    uint64_t group_rows;
    Source *src;
    char **vals;                 /* the record's fields as strings (NULL: SQL NULL) */
    Buf sql;
    char new_name[160];          /* the new table, "schema.table" (messages) */
    char *new_q;                 /* the new table, quoted */
    long long top_key;           /* split: the highest legacy key this group inserted (0: none) */
    PgPipe *pipe;                /* c's statements while a group is open (pg_pipe.h) */
    PgPipe *mpipe;               /* split: m's while its transaction is open (NULL: one database) */
    const ReverseGate *gate;     /* switching back: the hand-over at the stop (NULL: none) */
    /* Two databases: the changes read ahead, up to REV_AHEAD of them (or
     * REV_AHEAD_BYTES of their values) within a group, and the legacy keys their ids have, looked up on the target in
     * one query (ahead_lookup) before they are applied; each result's rows
     * (uuid, key) sorted by the uuid's text, bytewise.  The rows inserted
     * meanwhile are remembered with the key their map row got (fresh), so a
     * later change of one in the same read-ahead needs no look-up either; a
     * uuid in neither is looked up on its own. */
    RecordHold ahead;
    PGresult *keys;              /* the map's keys of the update's and delete's ids */
    PGresult *pkeys;             /* a migrate-mode child: the parent map's keys of <fk>_uuid */
    FreshKey *fresh;             /* the read-ahead's inserts so far: uuid and legacy key */
    size_t nfresh, fresh_cap;
    PGresult *seqvals;           /* the sequence's next values, one per insert with legacy_id
                                    NULL read ahead, taken in order (next_seqval) */
    int next_seqval;
} Rev;

#define REV_AHEAD 512
#define REV_AHEAD_BYTES (8u << 20)

/* What a statement sent on the pipe applied (its PgPipeNote's kind). */
enum
{
    NOTE_OTHER = 0,
    NOTE_INSERT,
    NOTE_UPDATE, /* counted: 0 rows is a missing legacy row */
    NOTE_DELETE, /* likewise */
};

void
reverse_ids_add(ReverseIds *ids, const char *id)
{
    if (ids == NULL || id == NULL || ids->overflow)
        return;
    if (ids->n == REVERSE_IDS_MAX)
    {
        ids->overflow = true;
        return;
    }
    if (ids->n == ids->cap)
    {
        ids->cap = ids->cap ? 2 * ids->cap : 64;
        ids->v = xrealloc(ids->v, ids->cap * sizeof *ids->v);
    }
    ids->v[ids->n++] = xstrdup(id);
}

void
reverse_ids_free(ReverseIds *ids)
{
    for (size_t i = 0; i < ids->n; i++)
        free(ids->v[i]);
    free(ids->v);
    memset(ids, 0, sizeof *ids);
}

void
migrate_reverse_name(const MigrateSpec *spec, char *out, size_t size)
{
    (void) snprintf(out, size, "%.59s_rev", spec->slot);
}

bool
migrate_reverse_setup(PgConn *db, Err *err)
{
    if (!pg_exec(db,
                 "CREATE SCHEMA IF NOT EXISTS v7fill; "
                 "CREATE TABLE IF NOT EXISTS v7fill.migrate_reverse ("
                 " into_table text PRIMARY KEY, slot text NOT NULL, publication text NOT NULL,"
                 " switch_lsn pg_lsn, end_lsn pg_lsn NOT NULL, applied bigint NOT NULL DEFAULT 0,"
                 " updated_at timestamptz NOT NULL DEFAULT now()); "
                 "CREATE TABLE IF NOT EXISTS v7fill.migrate_reverse_gone ("
                 " into_table text NOT NULL, legacy_id text NOT NULL)",
                 err))
    {
        err_prefix(err, "could not create v7fill.migrate_reverse");
        return false;
    }
    return true;
}

/* A map's key in v7fill.migrate_reverse_kept: "<schema>.<map table>". */
static void
map_key_of(const char *schema, const char *table, char *out, size_t size)
{
    (void) snprintf(out, size, "%s.%s", schema, table);
}

bool
migrate_reverse_kept_setup(PgConn *db, Err *err)
{
    PGresult *res;
    bool exists;

    /* Looked up first: the role running the way back may write the table the
     * switch made without the right to create one. */
    if (!pg_query(db, "SELECT pg_catalog.to_regclass('v7fill.migrate_reverse_kept') IS NOT NULL",
                  0, NULL, &res, err))
        return false;
    exists = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    if (exists)
        return true;
    if (!pg_exec(db,
                 "CREATE SCHEMA IF NOT EXISTS v7fill; "
                 "CREATE TABLE IF NOT EXISTS v7fill.migrate_reverse_kept ("
                 " map_table text NOT NULL, id uuid NOT NULL, legacy_id text NOT NULL,"
                 " PRIMARY KEY (map_table, id))",
                 err))
    {
        err_prefix(err, "could not create v7fill.migrate_reverse_kept");
        return false;
    }
    return true;
}

bool
migrate_reverse_kept_clear(PgConn *db, const MigrateSpec *spec, Err *err)
{
    char key[160];
    const char *p[1] = {key};

    map_key_of(spec->into_schema, spec->map_table, key, sizeof key);
    if (!pg_exec_params(db, "DELETE FROM v7fill.migrate_reverse_kept WHERE map_table = $1", 1, p,
                        err))
    {
        err_prefix(err, "clearing the map rows kept for the children's way back");
        return false;
    }
    return true;
}

/* A conninfo for the replication connection: the ordinary connection's own
 * parameters (its session options are set again by replconn_open). */
static char *
conninfo_of(PgConn *c)
{
    PQconninfoOption *opts = PQconninfo(pg_raw(c));
    Buf b;

    buf_init(&b);
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
    {
        if (o->val == NULL || o->val[0] == '\0' || strcmp(o->keyword, "replication") == 0 ||
            strcmp(o->keyword, "options") == 0)
            continue;
        conninfo_put_option(&b, o->keyword, o->val);
    }
    PQconninfoFree(opts);
    return b.data ? b.data : xstrdup("");
}

static int
column_index(const ReplTableInfo *t, const char *name)
{
    for (size_t i = 0; i < t->ncols; i++)
        if (strcmp(t->cols[i], name) == 0)
            return (int) i;
    return -1;
}

/* One database, a child: its parent map's legacy_id type, which a key kept
 * as text is cast back to in put_value's expression. */
static bool
parent_map_type(Rev *r, Err *err)
{
    PGresult *res;
    const char *p[1] = {r->pmap_q};

    if (!pg_query(r->m,
                  "SELECT pg_catalog.format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute "
                  "WHERE attrelid = $1::regclass AND attname = 'legacy_id' AND NOT attisdropped",
                  1, p, &res, err))
        return false;
    if (PQntuples(res) != 1)
    {
        PQclear(res);
        return err_set(err, EC_CONFIG, "the parent's map %s has no legacy_id column", r->pmap_q);
    }
    r->pmap_type = xstrdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return true;
}

static bool
rev_columns(Rev *r, const ReverseParentRef *ref, Err *err)
{
    const MigrateSpec *sp = r->spec;
    ReplTable nt = {{0}}, ot = {{0}};

    /* After the switch the new table has <from>'s name in one database and
     * keeps its own in two. */
    (void) snprintf(nt.schema, sizeof nt.schema, "%s", r->split ? sp->into_schema : sp->from_schema);
    (void) snprintf(nt.name, sizeof nt.name, "%s", r->split ? sp->into_table : sp->from_table);
    (void) snprintf(ot.schema, sizeof ot.schema, "%s", sp->from_schema);
    (void) snprintf(ot.name, sizeof ot.name, "%s", sp->legacy_table);
    (void) snprintf(r->new_name, sizeof r->new_name, "%s.%s", nt.schema, nt.name);
    if (!replconn_table_info(r->m, &nt, &r->newt, err) ||
        !replconn_table_info(r->c, &ot, &r->oldt, err))
        return false;
    r->f_legacy_id = column_index(&r->newt, "legacy_id");
    r->f_id = column_index(&r->newt, "id");
    if (r->f_legacy_id < 0 || r->f_id < 0)
        return err_set(err, EC_CONFIG,
                       "%s has no legacy_id or no id column: it is not the migrated table",
                       r->new_name);
    if (column_index(&r->oldt, sp->key) < 0)
        return err_set(err, EC_CONFIG, "the legacy table %s.%s has no column %s",
                       sp->from_schema, sp->legacy_table, sp->key);
    r->common_field = xcalloc(r->oldt.ncols + 1, sizeof *r->common_field);
    r->common_q = xcalloc(r->oldt.ncols + 1, sizeof *r->common_q);
    for (size_t i = 0; i < r->oldt.ncols; i++)
    {
        int f;

        if (strcmp(r->oldt.cols[i], sp->key) == 0)
            continue;
        f = column_index(&r->newt, r->oldt.cols[i]);
        if (f < 0)
        {
            log_warn("the legacy table's column %s is not in %s: the way back leaves it to "
                     "its default",
                     r->oldt.cols[i], r->new_name);
            continue;
        }
        if (ref && strcmp(r->oldt.cols[i], ref->fk_column) == 0)
            r->fk_common = (int) r->ncommon;
        r->common_field[r->ncommon] = f;
        r->common_q[r->ncommon++] = pg_ident(r->c, r->oldt.cols[i]);
    }
    if (ref)
    {
        char uuidcol[80];

        (void) snprintf(uuidcol, sizeof uuidcol, "%s_uuid", ref->fk_column);
        r->f_fku = column_index(&r->newt, uuidcol);
        if (r->fk_common < 0 || r->f_fku < 0)
            return err_set(err, EC_CONFIG,
                           "%s.%s and %s.%s do not both have %s (and the new one %s): they are "
                           "not a migrate-mode child's tables",
                           sp->from_schema, sp->from_table, sp->from_schema, sp->legacy_table,
                           ref->fk_column, uuidcol);
        r->pmap_q = pg_qualified(r->c, ref->map_schema, ref->map_table);
        map_key_of(ref->map_schema, ref->map_table, r->pmap_key, sizeof r->pmap_key);
        if (!r->split && !parent_map_type(r, err))
            return false;
    }
    r->vals = xcalloc(r->newt.ncols + 1, sizeof *r->vals);
    r->legacy_q = pg_qualified(r->c, sp->from_schema, sp->legacy_table);
    if (ref)
    {
        PGresult *res;
        const char *p[2] = {r->legacy_q, ref->fk_column};

        if (!pg_query(r->c,
                      "SELECT attnotnull FROM pg_catalog.pg_attribute WHERE attrelid = "
                      "$1::regclass AND attname = $2 AND NOT attisdropped",
                      2, p, &res, err))
            return false;
        r->fk_required = PQntuples(res) == 1 && PQgetvalue(res, 0, 0)[0] == 't';
        PQclear(res);
    }
    r->map_q = pg_qualified(r->m, sp->into_schema, sp->map_table);
    r->new_q = pg_qualified(r->m, nt.schema, nt.name);
    r->key_q = pg_ident(r->c, sp->key);
    return true;
}

/* The read-ahead's changes and what was looked up for them, dropped. */
static void
ahead_forget(Rev *r)
{
    record_hold_clear(&r->ahead);
    if (r->keys)
        PQclear(r->keys);
    if (r->pkeys)
        PQclear(r->pkeys);
    if (r->seqvals)
        PQclear(r->seqvals);
    r->keys = r->pkeys = r->seqvals = NULL;
    r->nfresh = 0;
    r->next_seqval = 0;
}

static void
rev_free(Rev *r)
{
    for (size_t i = 0; i < r->ncommon; i++)
        free(r->common_q[i]);
    free(r->common_q);
    free(r->common_field);
    if (r->vals)
        for (size_t i = 0; i < r->newt.ncols; i++)
            free(r->vals[i]);
    free(r->vals);
    free(r->legacy_q);
    free(r->map_q);
    free(r->new_q);
    free(r->key_q);
    free(r->pmap_q);
    free(r->pmap_type);
    replconn_table_free(&r->newt);
    replconn_table_free(&r->oldt);
    buf_free(&r->sql);
    pg_pipe_free(r->pipe);
    pg_pipe_free(r->mpipe);
    ahead_forget(r);
    record_hold_free(&r->ahead);
    free(r->fresh);
}

/* A change's update or delete, its result read (pg_pipe.h): 0 rows, the
 * legacy row was missing. */
static void
note_counted(void *ctx, const PgPipeNote *note, uint64_t rows)
{
    Rev *r = ctx;
    bool upd = note->kind == NOTE_UPDATE;
    char at[PGO_LSN_TEXT_SIZE];

    if (note->kind != NOTE_UPDATE && note->kind != NOTE_DELETE)
        return;
    if (rows > 0)
    {
        if (upd)
            r->st->updated++;
        else
            r->st->deleted++;
        return;
    }
    r->st->missing++;
    pgo_lsn_format(note->at, at);
    log_warn("%s of %s at %s (id %s) found no row in %s.%s", upd ? "an update" : "a delete",
             r->new_name, at, note->id[0] ? note->id : "NULL", r->spec->from_schema,
             r->spec->legacy_table);
}

static void
note_describe(void *ctx, const PgPipeNote *note, char *buf, size_t size)
{
    static const char *const what[] = {"a statement", "the insert", "the update", "the delete"};
    Rev *r = ctx;
    char at[PGO_LSN_TEXT_SIZE];

    pgo_lsn_format(note->at, at);
    if (note->kind == NOTE_OTHER)
        (void) snprintf(buf, size, "applying the changes of %s into %s.%s", r->new_name,
                        r->spec->from_schema, r->spec->legacy_table);
    else
        (void) snprintf(buf, size, "applying %s of %s at %s (id %s) into %s.%s",
                        what[note->kind], r->new_name, at,
                        note->id[0] ? note->id : "NULL", r->spec->from_schema,
                        r->spec->legacy_table);
}

static void
note_of(PgPipeNote *note, int kind, uint64_t at, const char *id)
{
    note->kind = kind;
    note->at = at;
    (void) snprintf(note->id, sizeof note->id, "%s", id ? id : "");
}

/* The pipe open on `on` (c's while a group is open, m's while its
 * transaction is), else NULL. */
static PgPipe *
pipe_on(Rev *r, PgConn *on)
{
    PgPipe *p = on == r->c ? r->pipe : on == r->m ? r->mpipe : NULL;

    return p && pg_pipe_open(p) ? p : NULL;
}

/* A statement on `on`: through its pipe while one is open, else at once.  A
 * counted note's count is taken either way. */
static bool
exec_on(Rev *r, PgConn *on, const char *sql, int n, const char *const *params,
        const PgPipeNote *note, Err *err)
{
    PgPipe *pipe = pipe_on(r, on);
    PGresult *res;

    if (pipe)
        return pg_pipe_send(pipe, sql, n, params, note, err);
    if (note == NULL || note->kind == NOTE_OTHER || note->kind == NOTE_INSERT)
        return pg_exec_params(on, sql, n, params, err);
    if (!pg_query(on, sql, n, params, &res, err))
        return false;
    note_counted(r, note, strtoull(PQcmdTuples(res), NULL, 10));
    PQclear(res);
    return true;
}

/* A query whose rows are needed now, on `on`: through its open pipe (what
 * was sent before it is read first), else at once. */
static bool
query_on(Rev *r, PgConn *on, const char *sql, int n, const char *const *params, PGresult **res,
         Err *err)
{
    PgPipe *pipe = pipe_on(r, on);

    return pipe ? pg_pipe_query(pipe, sql, n, params, res, err)
                : pg_query(on, sql, n, params, res, err);
}

static void
take_fields(Rev *r, const Field *fields)
{
    for (size_t i = 0; i < r->newt.ncols; i++)
    {
        free(r->vals[i]);
        r->vals[i] = NULL;
        if (fields && !fields[i].is_null && !fields[i].unchanged && fields[i].data)
            r->vals[i] = xstrndup(fields[i].data, fields[i].len);
    }
}

/* The key the read-ahead's look-up found for uuid (keys: rows (uuid, key)
 * sorted bytewise by the uuid), into out; false: none found there. */
static bool
looked_up(const PGresult *keys, const char *uuid, char *out, size_t size)
{
    int lo = 0, hi = keys ? PQntuples(keys) : 0;

    if (uuid == NULL)
        return false;
    while (lo < hi)
    {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(PQgetvalue(keys, mid, 0), uuid);

        if (c == 0)
        {
            (void) snprintf(out, size, "%s", PQgetvalue(keys, mid, 1));
            return true;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* Two databases: the row with this uuid was inserted earlier in the
 * read-ahead; its legacy key into out (the latest such insert's). */
static bool
fresh_key(const Rev *r, const char *uuid, char *out, size_t size)
{
    for (size_t i = r->nfresh; uuid != NULL && i-- > 0;)
        if (strcmp(r->fresh[i].id, uuid) == 0)
        {
            (void) snprintf(out, size, "%s", r->fresh[i].key);
            return true;
        }
    return false;
}

static void
fresh_add(Rev *r, const char *uuid, const char *key)
{
    if (uuid == NULL || strlen(uuid) >= sizeof r->fresh->id || strlen(key) >= sizeof r->fresh->key)
        return; /* not remembered: looked up on its own */
    if (r->nfresh == r->fresh_cap)
    {
        r->fresh_cap = r->fresh_cap ? 2 * r->fresh_cap : 64;
        r->fresh = xrealloc(r->fresh, r->fresh_cap * sizeof *r->fresh);
    }
    (void) snprintf(r->fresh[r->nfresh].id, sizeof r->fresh->id, "%s", uuid);
    (void) snprintf(r->fresh[r->nfresh].key, sizeof r->fresh->key, "%s", key);
    r->nfresh++;
}

/* The legacy key of the row with this uuid, through the map (*found false:
 * no map row).  Two databases: the read-ahead's look-up, then its inserts,
 * answer first (the map holds what they say: the look-up read it, the
 * inserts wrote it in this group's open transaction on it). */
static bool
map_lookup(Rev *r, const char *id, char *out, size_t size, bool *found, Err *err)
{
    PGresult *res;
    char *sql;
    bool ok;

    if (looked_up(r->keys, id, out, size) || fresh_key(r, id, out, size))
    {
        *found = true;
        return true;
    }
    sql = xasprintf("SELECT legacy_id::text FROM %s WHERE id = $1", r->map_q);
    ok = query_on(r, r->m, sql, 1, &id, &res, err);

    free(sql);
    if (!ok)
        return false;
    *found = PQntuples(res) == 1;
    if (*found)
        (void) snprintf(out, size, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return true;
}

/* A child's <fk> from the parent map's legacy key of <fk>_uuid ($uuid_n):
 * the map's, else the one kept for this round (the parent's row was deleted
 * earlier in the round: the child's rows up to the same stop may still name
 * it), else the <fk> given ($n).  The kept rows' map name is the parameter
 * after <fk>_uuid ($uuid_n + 1, r->pmap_key): its callers put it there. */
static void
put_parent_key(Rev *r, int n, int uuid_n)
{
    buf_printf(&r->sql,
               "COALESCE((SELECT legacy_id FROM %s WHERE id = $%d::uuid), (SELECT "
               "CAST(k.legacy_id AS %s) FROM v7fill.migrate_reverse_kept k WHERE k.map_table = "
               "$%d::text AND k.id = $%d::uuid), $%d)",
               r->pmap_q, uuid_n, r->pmap_type, uuid_n + 1, uuid_n, n);
}

/* The value of common column i, its parameter $n: a child's <fk> is the
 * parent map's legacy key of <fk>_uuid ($uuid_n, put_parent_key), else the
 * <fk> given; with no <fk>_uuid, NULL when the <fk> given names a mapped
 * parent (the application cleared the link, or the parent's delete set it
 * NULL), else the <fk> given (a NULL key, an orphan or a rejected parent kept
 * as it was).  A legacy <fk> that is NOT NULL keeps the <fk> given when
 * <fk>_uuid is cleared: NULL there would stop the way back on every run
 * (23502). */
static void
put_value(Rev *r, size_t i, int n, int uuid_n)
{
    if ((int) i != r->fk_common || r->split)
    {
        buf_printf(&r->sql, "$%d", n);
        return;
    }
    buf_printf(&r->sql, "CASE WHEN $%d::uuid IS NOT NULL THEN ", uuid_n);
    put_parent_key(r, n, uuid_n);
    if (r->fk_required)
        buf_printf(&r->sql, " ELSE $%d END", n);
    else
        buf_printf(&r->sql, " WHEN EXISTS (SELECT 1 FROM %s WHERE legacy_id = $%d) THEN NULL ELSE $%d END",
                   r->pmap_q, n, n);
}

/* Two databases, a migrate-mode child: the value put_value's CASE gives
 * <fk> in one database, from the parent's map on the target: the legacy key
 * of uuid when the map has it, or the round kept it (put_parent_key), else
 * given; with no uuid, NULL when given names a mapped parent (unless the
 * legacy <fk> is NOT NULL), else given.  *out points at buf, given or NULL. */
static bool
fk_resolve(Rev *r, const char *uuid, const char *given, char *buf, size_t size,
           const char **out, Err *err)
{
    PGresult *res;
    const char *p[2] = {uuid ? uuid : given, r->pmap_key};
    char *sql;
    bool ok;

    *out = given;
    if (uuid == NULL && (given == NULL || r->fk_required))
        return true;
    if (looked_up(r->pkeys, uuid, buf, size))
    {
        *out = buf;
        return true;
    }
    sql = uuid ? xasprintf("SELECT COALESCE((SELECT legacy_id::text FROM %s WHERE id = $1::uuid), "
                           "(SELECT legacy_id FROM v7fill.migrate_reverse_kept WHERE map_table = "
                           "$2 AND id = $1::uuid))",
                           r->pmap_q)
               : xasprintf("SELECT legacy_id::text FROM %s WHERE legacy_id = $1", r->pmap_q);
    ok = query_on(r, r->m, sql, uuid ? 2 : 1, p, &res, err);
    free(sql);
    if (!ok)
        return false;
    if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
    {
        (void) snprintf(buf, size, "%s", PQgetvalue(res, 0, 0));
        *out = uuid ? buf : NULL;
    }
    PQclear(res);
    return true;
}

/* The map row of legacy key lk goes, or (lk NULL, one database) the one
 * apply_delete's legacy row was found by: through the map by byid[0], else
 * the key byid[1].  A parent with migrate-mode children keeps it for the
 * round (the top of this file), in the same statement. */
static bool
map_delete(Rev *r, const char *lk, const char *const *byid, Err *err)
{
    const char *p[3] = {lk, r->map_key, NULL};
    char *key = lk ? xstrdup("$1")
                   : xasprintf("COALESCE((SELECT legacy_id FROM %s WHERE id = $1), $2)", r->map_q);
    int n = lk ? 1 : 2;
    char *sql;
    bool ok;

    if (lk == NULL)
    {
        p[0] = byid[0];
        p[1] = byid[1];
        p[2] = r->map_key;
    }
    sql = r->keep ? xasprintf("WITH d AS (DELETE FROM %s WHERE legacy_id = %s RETURNING id, "
                              "legacy_id) INSERT INTO v7fill.migrate_reverse_kept "
                              "(map_table, id, legacy_id) SELECT $%d, id, legacy_id::text "
                              "FROM d ON CONFLICT DO NOTHING",
                              r->map_q, key, n + 1)
                  : xasprintf("DELETE FROM %s WHERE legacy_id = %s", r->map_q, key);
    ok = exec_on(r, r->m, sql, r->keep ? n + 1 : n, p, NULL, err);
    free(sql);
    free(key);
    return ok;
}

static bool
map_insert(Rev *r, const char *lk, Err *err)
{
    const char *mp[2] = {lk, r->vals[r->f_id]};
    char *sql;
    bool ok;

    if (r->split && !r->m_txn)
    {
        if (!pg_pipe_begin(r->mpipe, err))
            return false;
        r->m_txn = true;
        if (!exec_on(r, r->m, "BEGIN", 0, NULL, NULL, err))
            return false;
    }
    sql = xasprintf("INSERT INTO %s (legacy_id, id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    r->map_q);
    ok = exec_on(r, r->m, sql, 2, mp, NULL, err);

    free(sql);
    return ok;
}

/* The legacy keys given by the sequence that the log names one by one. */
#define KEYS_GIVEN_LOGGED 10

/* n values of the new table's legacy_id sequence, in order (none: no
 * sequence numbers that column). */
static bool
next_seqvals(Rev *r, int n, PGresult **res, Err *err)
{
    char count[16];
    const char *p[2] = {r->new_q, count};

    (void) snprintf(count, sizeof count, "%d", n);
    return query_on(r, r->m,
                    "SELECT pg_catalog.nextval(s)::text FROM pg_catalog.pg_get_serial_sequence($1, "
                    "'legacy_id') s, pg_catalog.generate_series(1, $2::int) WHERE s IS NOT NULL",
                    2, p, res, err);
}

/* Two databases, a row the application inserted with legacy_id NULL given
 * (the target's own sequence numbers the others, migrate_switch.c; an ORM
 * that writes every column sends NULL for each new row): the key its map
 * row has (a replay), else the next value of that sequence, taken ahead
 * for the read-ahead's such inserts (ahead_lookup).  Applied from the
 * read-ahead only, after its look-up: the map holds no row of a uuid that
 * look-up did not find, unless an insert since wrote it (fresh).  The
 * target's row keeps its NULL, the map pairs them. */
static bool
new_legacy_key(Rev *r, char *out, size_t size, Err *err)
{
    const char *id = r->vals[r->f_id];
    PGresult *res = NULL;
    bool ok = true;
    int row = 0;

    if (id == NULL)
        return err_set(err, EC_FORMAT, "a row inserted into %s without its id", r->new_name);
    if (looked_up(r->keys, id, out, size) || fresh_key(r, id, out, size))
        return true;
    if (r->seqvals && r->next_seqval < PQntuples(r->seqvals))
        row = r->next_seqval++;
    else
        ok = next_seqvals(r, 1, &res, err);
    if (ok && (res == NULL || PQntuples(res) == 1))
    {
        (void) snprintf(out, size, "%s", PQgetvalue(res ? res : r->seqvals, row, 0));
        if (++r->st->keys_given <= KEYS_GIVEN_LOGGED)
            log_warn("a row inserted into %s (id %s) with legacy_id NULL: the way back gives it "
                     "%s in %s.%s and the map; the row keeps its NULL%s",
                     r->new_name, id, out, r->spec->from_schema, r->spec->legacy_table,
                     r->st->keys_given == KEYS_GIVEN_LOGGED
                         ? " (the next ones are counted, not logged: keys_given)"
                         : "");
    }
    else if (ok)
    {
        ok = err_set(err, EC_CONFIG,
                     "a row inserted into %s (id %s) has no legacy_id, and no sequence numbers "
                     "that column: the way back cannot give it a legacy key",
                     r->new_name, id);
        err_hint(err,
                 "Give it one in the map, on the target: INSERT INTO %s.%s (legacy_id, id) "
                 "VALUES (<a key the legacy table does not have>, '%s'); UPDATE %s SET legacy_id "
                 "= <that key> WHERE id = '%s'; then run --reverse again: it goes on from this "
                 "row, keyed through the map.",
                 r->spec->into_schema, r->spec->map_table, id, r->new_name, id);
    }
    if (res)
        PQclear(res);
    return ok;
}

static bool
apply_insert(Rev *r, const Record *rec, Err *err)
{
    const char *lk = r->vals[r->f_legacy_id];
    const char **params = xcalloc(r->ncommon + 3, sizeof *params);
    char given[64], fkbuf[64];
    int np = (int) r->ncommon + 1;
    PgPipeNote note;
    bool ok;

    if (lk == NULL && r->split)
    {
        if (!new_legacy_key(r, given, sizeof given, err))
        {
            free(params);
            return false;
        }
        lk = given;
    }
    if (lk == NULL)
    {
        free(params);
        return err_set(err, EC_CONFIG,
                       "a row inserted into %s (id %s) has no legacy_id: the way back cannot "
                       "give it a legacy key",
                       r->new_name, r->vals[r->f_id] ? r->vals[r->f_id] : "NULL");
    }
    /* Two databases: the map row first (see the top of this file). */
    if (r->split && !map_insert(r, lk, err))
    {
        free(params);
        return false;
    }
    buf_reset(&r->sql);
    buf_printf(&r->sql, "INSERT INTO %s (%s", r->legacy_q, r->key_q);
    for (size_t i = 0; i < r->ncommon; i++)
        buf_printf(&r->sql, ", %s", r->common_q[i]);
    buf_puts(&r->sql, ") VALUES ($1");
    params[0] = lk;
    if (r->fk_common >= 0 && !r->split)
    {
        params[np++] = r->vals[r->f_fku];
        params[np++] = r->pmap_key; /* put_parent_key's $uuid_n + 1 */
    }
    for (size_t i = 0; i < r->ncommon; i++)
    {
        buf_puts(&r->sql, ", ");
        put_value(r, i, (int) i + 2, r->fk_common >= 0 && !r->split ? np - 1 : np);
        params[i + 1] = r->vals[r->common_field[i]];
    }
    if (r->fk_common >= 0 && r->split &&
        !fk_resolve(r, r->vals[r->f_fku], params[r->fk_common + 1], fkbuf, sizeof fkbuf,
                    &params[r->fk_common + 1], err))
    {
        free(params);
        return false;
    }
    buf_printf(&r->sql, ") ON CONFLICT (%s) DO ", r->key_q);
    if (r->ncommon == 0)
        buf_puts(&r->sql, "NOTHING");
    else
    {
        buf_puts(&r->sql, "UPDATE SET ");
        for (size_t i = 0; i < r->ncommon; i++)
            buf_printf(&r->sql, "%s%s = EXCLUDED.%s", i ? ", " : "", r->common_q[i],
                       r->common_q[i]);
    }
    note_of(&note, NOTE_INSERT, rec->line, r->vals[r->f_id]);
    ok = exec_on(r, r->c, r->sql.data, np, params, &note, err);
    free(params);
    if (!ok || (!r->split && !map_insert(r, lk, err)))
        return false;
    if (r->split)
    {
        char *end;
        long long k = strtoll(lk, &end, 10);

        if (*end == '\0' && k > r->top_key)
            r->top_key = k;
    }
    if (r->split)
        fresh_add(r, r->vals[r->f_id], lk);
    reverse_ids_add(r->st->ids, r->vals[r->f_id]);
    r->st->inserted++;
    return true;
}

/* Two databases, in the group's transaction: the legacy key's sequence on
 * the source past the keys the group inserted (numbered by the target's
 * sequence), so the legacy application, switched back, takes none of them. */
static bool
advance_sequence(Rev *r, Err *err)
{
    char top[32];
    const char *p[3] = {r->legacy_q, r->spec->key, top};

    if (r->top_key <= 0)
        return true;
    (void) snprintf(top, sizeof top, "%lld", r->top_key);
    r->top_key = 0;
    return exec_on(r, r->c,
                          "SELECT pg_catalog.setval(s::regclass, $3::bigint) FROM "
                          "pg_catalog.pg_get_serial_sequence($1, $2) s WHERE s IS NOT NULL AND "
                          "coalesce(pg_catalog.pg_sequence_last_value(s::regclass), 0) < "
                          "$3::bigint",
                          3, p, NULL, err);
}

/* The (old) id a change names, a copy (NULL: it carries none). */
static char *
change_id(const Rev *r, const Record *rec)
{
    const Field *idf = rec->old_fields ? &rec->old_fields[r->f_id] : &rec->fields[r->f_id];

    return idf->is_null || idf->data == NULL ? NULL : xstrndup(idf->data, idf->len);
}

static bool
no_id(const Rev *r, Err *err)
{
    return err_set(err, EC_FORMAT, "a change of %s.%s without its id", r->spec->from_schema,
                   r->spec->from_table);
}

/* The legacy key of the row a change names: the map by its (old) id, else
 * the legacy_id it carries. */
static bool
legacy_key(Rev *r, const char *id, char *lk, size_t size, bool *found, Err *err)
{
    *found = false;
    if (id == NULL)
        return no_id(r, err);
    if (!map_lookup(r, id, lk, size, found, err))
        return false;
    if (!*found && r->vals[r->f_legacy_id])
    {
        (void) snprintf(lk, size, "%s", r->vals[r->f_legacy_id]);
        *found = true;
    }
    return true;
}

/* One statement: the legacy row found through the map by the (old) id,
 * else by the legacy_id the change carries; 0 rows: missing. */
static bool
apply_update(Rev *r, const Record *rec, Err *err)
{
    const char **params = xcalloc(r->ncommon + 4, sizeof *params);
    char *id = change_id(r, rec);
    char lk[64], fkbuf[64];
    int n = 2, uuid_n = 0;
    PgPipeNote note;
    bool ok;

    params[0] = id;
    params[1] = r->vals[r->f_legacy_id];
    if (r->split)
    {
        /* The map is in the other database: the legacy key looked up first. */
        bool found;

        if (!legacy_key(r, id, lk, sizeof lk, &found, err))
        {
            free(params);
            free(id);
            return false;
        }
        params[0] = found ? lk : NULL;
    }
    buf_reset(&r->sql);
    buf_printf(&r->sql, "UPDATE %s SET %s = COALESCE($2, %s)", r->legacy_q, r->key_q, r->key_q);
    for (size_t i = 0; i < r->ncommon; i++)
    {
        if (rec->fields[r->common_field[i]].unchanged &&
            ((int) i != r->fk_common || rec->fields[r->f_fku].unchanged))
            continue;
        if ((int) i == r->fk_common && r->split)
        {
            if (!fk_resolve(r, r->vals[r->f_fku], r->vals[r->common_field[i]], fkbuf,
                            sizeof fkbuf, &params[n], err))
            {
                free(params);
                free(id);
                return false;
            }
            n++;
        }
        else
        {
            if ((int) i == r->fk_common)
            {
                params[n++] = r->vals[r->f_fku];
                uuid_n = n;
                params[n++] = r->pmap_key; /* put_parent_key's $uuid_n + 1 */
            }
            params[n++] = r->vals[r->common_field[i]];
        }
        buf_printf(&r->sql, ", %s = ", r->common_q[i]);
        put_value(r, i, n, uuid_n);
    }
    if (r->split)
        buf_printf(&r->sql, " WHERE %s = $1", r->key_q);
    else
        buf_printf(&r->sql, " WHERE %s = COALESCE((SELECT legacy_id FROM %s WHERE id = $1), $2)",
                   r->key_q, r->map_q);
    /* Counted, missing or not, once its result is read (note_counted). */
    note_of(&note, NOTE_UPDATE, rec->line, id);
    ok = exec_on(r, r->c, r->sql.data, n, params, &note, err);
    free(params);
    /* Missing or not: the new row is there, and its keys may need the fill. */
    if (ok)
        reverse_ids_add(r->st->ids, r->vals[r->f_id]);
    free(id);
    return ok;
}

/* One database: two statements, sent without waiting (the pipe), the
 * legacy row then its map row, each found through the map by the (old) id,
 * else by the legacy_id the change carries.  Two databases: the legacy key
 * looked up on the target first (none: missing). */
static bool
apply_delete(Rev *r, const Record *rec, Err *err)
{
    char *id = change_id(r, rec);
    char lk[64];
    bool found = true, ok;
    const char *p[2] = {id, r->vals[r->f_legacy_id]};
    PgPipeNote note;

    if (id == NULL)
        return no_id(r, err);
    note_of(&note, NOTE_DELETE, rec->line, id);
    buf_reset(&r->sql);
    if (r->split)
    {
        ok = legacy_key(r, id, lk, sizeof lk, &found, err);
        p[0] = lk;
        buf_printf(&r->sql, "DELETE FROM %s WHERE %s = $1", r->legacy_q, r->key_q);
    }
    else
    {
        ok = true;
        buf_printf(&r->sql, "DELETE FROM %s WHERE %s = COALESCE((SELECT legacy_id FROM %s WHERE "
                            "id = $1), $2)",
                   r->legacy_q, r->key_q, r->map_q);
    }
    if (ok && !found)
        note_counted(r, &note, 0);
    else if (ok)
        ok = exec_on(r, r->c, r->sql.data, r->split ? 1 : 2, p, &note, err);
    if (ok && found && r->split)
    {
        /* Its map row after the commit (see the top of this file). */
        const char *g[2] = {r->into_key, lk};

        ok = exec_on(r, r->c,
                     "INSERT INTO v7fill.migrate_reverse_gone (into_table, legacy_id) VALUES "
                     "($1, $2)",
                     2, g, NULL, err);
    }
    else if (ok && found)
        ok = map_delete(r, NULL, p, err);
    free(id);
    return ok;
}

/* The position in v7fill.migrate_reverse on `on` (either database). */
static bool
store_position(Rev *r, PgConn *on, uint64_t lsn, uint64_t rows, bool greatest, Err *err)
{
    char at[PGO_LSN_TEXT_SIZE], n[32];
    const char *p[3] = {r->into_key, at, n};

    pgo_lsn_format(lsn, at);
    (void) snprintf(n, sizeof n, "%" PRIu64, rows);
    return exec_on(r, on,
                          greatest ? "UPDATE v7fill.migrate_reverse SET end_lsn = "
                                     "GREATEST(end_lsn, $2::pg_lsn), applied = applied + $3, "
                                     "updated_at = now() WHERE into_table = $1"
                                   : "UPDATE v7fill.migrate_reverse SET end_lsn = $2::pg_lsn, "
                                     "applied = applied + $3, updated_at = now() "
                                     "WHERE into_table = $1",
                          3, p, NULL, err);
}

static bool
persist_idle(void *ctx, uint64_t lsn, bool *stored, Err *err)
{
    Rev *r = ctx;

    *stored = true;
    return store_position(r, r->c, lsn, 0, true, err) &&
           (!r->split || store_position(r, r->m, lsn, 0, true, err));
}

/* Two databases, once legacy rows' deletes committed (also at the start of
 * a run, for a kill that came between): their map rows go, then the list. */
static bool
flush_gone(Rev *r, Err *err)
{
    const char *p[1] = {r->into_key};
    PGresult *res;
    bool ok = pg_query(r->c,
                       "SELECT legacy_id FROM v7fill.migrate_reverse_gone WHERE into_table = $1",
                       1, p, &res, err);

    if (ok)
    {
        for (int i = 0; ok && i < PQntuples(res); i++)
            ok = map_delete(r, PQgetvalue(res, i, 0), NULL, err);
        if (ok && PQntuples(res) > 0)
            ok = pg_exec_params(r->c, "DELETE FROM v7fill.migrate_reverse_gone WHERE "
                                      "into_table = $1",
                                1, p, err);
        PQclear(res);
    }
    if (!ok)
        err_prefix(err, "removing the map rows of legacy rows deleted");
    return ok;
}

/* Two databases, once the legacy rows committed: the map rows of those
 * deleted, and the position shown in the target's row. */
static bool
after_commit(Rev *r, uint64_t lsn, uint64_t rows, Err *err)
{
    return flush_gone(r, err) && store_position(r, r->m, lsn, rows, true, err);
}

static bool
commit_group(Rev *r, Err *err)
{
    SourcePosition pos;

    r->src->ops->position(r->src, &pos);
    /* Two databases: the map rows first (see the top of this file). */
    if (r->m_txn)
    {
        if (!exec_on(r, r->m, "COMMIT", 0, NULL, NULL, err) || !pg_pipe_end(r->mpipe, err))
            return false;
        r->m_txn = false;
    }
    /* The group's statements, sent without waiting, are read here: the
     * first one refused fails the group, named (pg_pipe.h). */
    if (!advance_sequence(r, err) || !store_position(r, r->c, pos.lsn, r->group_rows, false, err) ||
        !exec_on(r, r->c, "COMMIT", 0, NULL, NULL, err) || !pg_pipe_end(r->pipe, err))
        return false;
    r->in_txn = false;
    if (r->split && !after_commit(r, pos.lsn, r->group_rows, err))
        return false;
    r->group_rows = 0;
    source_pgoutput_committed(r->src, pos.lsn);
    r->st->applied_lsn = pos.lsn;
    return true;
}

static bool
apply_change(Rev *r, const Record *rec, Err *err)
{
    if (!r->in_txn)
    {
        if (!pg_pipe_begin(r->pipe, err))
            return false;
        r->in_txn = true;
        if (!exec_on(r, r->c, "BEGIN", 0, NULL, NULL, err))
            return false;
    }
    take_fields(r, rec->fields);
    r->group_rows++;
    switch (rec->op)
    {
        case REC_INSERT:
            return apply_insert(r, rec, err);
        case REC_UPDATE:
            return apply_update(r, rec, err);
        case REC_DELETE:
            return apply_delete(r, rec, err);
        default:
            return err_set(err, EC_INTERNAL, "the way back got a record of kind %d", rec->op);
    }
}

/* uuids: a text[] literal of the uuids; sql: a query of (uuid text, key
 * text) over unnest($1::uuid[]) u, each key by a scalar subquery (one probe
 * of an index per uuid: no estimate of an array's elements, no join to
 * plan); the rows with a key, sorted bytewise by the uuid (looked_up). */
static bool
ahead_query(Rev *r, const char *sql_key, const char *const *uuids, size_t n, bool kept,
            PGresult **out, Err *err)
{
    char *arr, *sql;
    const char *p[2];
    bool ok;

    if (n == 0)
        return true;
    arr = pg_array_literal(uuids, (int) n);
    sql = xasprintf("SELECT u::text, k FROM (SELECT u, %s AS k FROM unnest($1::uuid[]) u) x WHERE "
                    "k IS NOT NULL ORDER BY u::text COLLATE \"C\"",
                    sql_key);
    p[0] = arr;
    p[1] = r->pmap_key;
    ok = query_on(r, r->m, sql, kept ? 2 : 1, p, out, err);
    free(sql);
    free(arr);
    return ok;
}

/* Two databases: the legacy keys the read-ahead changes need, in (at most)
 * two queries on the target instead of one per change: the map's key of each
 * update's and delete's id, and, for a migrate-mode child, the parent map's
 * (or the round's kept) key of each <fk>_uuid written. */
static bool
ahead_lookup(Rev *r, Err *err)
{
    char **ids = xcalloc(r->ahead.n + 1, sizeof *ids);
    char **fks = xcalloc(r->ahead.n + 1, sizeof *fks);
    size_t *unkeyed_at = xcalloc(r->ahead.n + 1, sizeof *unkeyed_at);
    size_t nids = 0, nfks = 0, nunkeyed = 0;
    int nnew = 0;
    char *key = NULL, *pkey = NULL, kbuf[64];
    bool ok;

    for (size_t i = 0; i < r->ahead.n; i++)
    {
        Record rec = record_hold_get(&r->ahead, i);
        const Field *fk = r->fk_common >= 0 ? &rec.fields[r->f_fku] : NULL;

        const Field *lf = &rec.fields[r->f_legacy_id];
        bool unkeyed = rec.op == REC_INSERT && (lf->is_null || lf->data == NULL);

        if (rec.op == REC_UPDATE || rec.op == REC_DELETE || unkeyed)
        {
            char *id = change_id(r, &rec);

            if (id && unkeyed)
                unkeyed_at[nunkeyed++] = nids;
            if (id)
                ids[nids++] = id;
        }
        if (fk && rec.op != REC_DELETE && !fk->is_null && !fk->unchanged && fk->data)
            fks[nfks++] = xstrndup(fk->data, fk->len);
    }
    key = xasprintf("(SELECT m.legacy_id::text FROM %s m WHERE m.id = u)", r->map_q);
    if (r->pmap_q)
        pkey = xasprintf("COALESCE((SELECT m.legacy_id::text FROM %s m WHERE m.id = u), (SELECT "
                         "g.legacy_id FROM v7fill.migrate_reverse_kept g WHERE g.map_table = $2 "
                         "AND g.id = u))",
                         r->pmap_q);
    ok = ahead_query(r, key, (const char **) ids, nids, false, &r->keys, err) &&
         (pkey == NULL || ahead_query(r, pkey, (const char **) fks, nfks, true, &r->pkeys, err));
    /* The inserts with legacy_id NULL that the map does not know (a replay's
     * are there): a value of the sequence each, taken in one query. */
    for (size_t i = 0; ok && i < nunkeyed; i++)
        nnew += !looked_up(r->keys, ids[unkeyed_at[i]], kbuf, sizeof kbuf);
    ok = ok && (nnew == 0 || next_seqvals(r, nnew, &r->seqvals, err));
    free(unkeyed_at);
    free(key);
    free(pkey);
    for (size_t i = 0; i < nids; i++)
        free(ids[i]);
    for (size_t i = 0; i < nfks; i++)
        free(fks[i]);
    free(ids);
    free(fks);
    return ok;
}

/* The read-ahead changes applied, in their order. */
static bool
ahead_apply(Rev *r, Err *err)
{
    bool ok = r->ahead.n == 0 || ahead_lookup(r, err);

    for (size_t i = 0; ok && i < r->ahead.n; i++)
    {
        Record rec = record_hold_get(&r->ahead, i);

        ok = apply_change(r, &rec, err);
    }
    ahead_forget(r);
    return ok;
}

/* One database: each change applied as it comes (no look-up waits for an
 * answer).  Two: read ahead (ahead_lookup), applied at the group's end or
 * every REV_AHEAD changes. */
static bool
apply_record(Rev *r, const Record *rec, Err *err)
{
    if (rec->op == REC_BOUNDARY)
        return ahead_apply(r, err) && (!r->in_txn || commit_group(r, err));
    if (!r->split)
        return apply_change(r, rec, err);
    record_hold_add(&r->ahead, rec);
    return (r->ahead.n < REV_AHEAD && r->ahead.bytes < REV_AHEAD_BYTES) || ahead_apply(r, err);
}

static bool
read_state(Rev *r, char *slot, char *pub, uint64_t *end_lsn, Err *err)
{
    PGresult *res;
    const char *p[1] = {r->into_key};
    bool ok;

    if (!pg_query(r->m,
                  "SELECT slot, publication, end_lsn::text, switch_lsn::text FROM "
                  "v7fill.migrate_reverse WHERE into_table = $1",
                  1, p, &res, err))
        return false;
    if (PQntuples(res) != 1)
    {
        PQclear(res);
        return err_set(err, EC_CONFIG,
                       "%s has no way back recorded (v7fill.migrate_reverse): run --switch first",
                       r->into_key);
    }
    (void) snprintf(slot, 64, "%s", PQgetvalue(res, 0, 0));
    (void) snprintf(pub, 64, "%s", PQgetvalue(res, 0, 1));
    ok = pgo_lsn_parse(PQgetvalue(res, 0, 2), end_lsn);
    if (ok && r->split)
    {
        /* The position commits with the legacy rows: the source's own row,
         * made from the target's at the first run after this switch. */
        const char *q[4] = {r->into_key, slot, PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3)};
        PGresult *res2;

        if (q[3][0] == '\0')
            q[3] = NULL;
        ok = migrate_reverse_setup(r->c, err) &&
             pg_exec_params(r->c,
                            "INSERT INTO v7fill.migrate_reverse AS r (into_table, slot, "
                            "publication, switch_lsn, end_lsn) VALUES ($1, $2, $2, $4::pg_lsn, "
                            "$3::pg_lsn) ON CONFLICT (into_table) DO UPDATE SET slot = "
                            "EXCLUDED.slot, publication = EXCLUDED.publication, switch_lsn = "
                            "EXCLUDED.switch_lsn, end_lsn = EXCLUDED.end_lsn, applied = 0, "
                            "updated_at = now() WHERE r.slot IS DISTINCT FROM EXCLUDED.slot OR "
                            "r.switch_lsn IS DISTINCT FROM EXCLUDED.switch_lsn",
                            4, q, err) &&
             pg_query(r->c,
                      "SELECT end_lsn::text FROM v7fill.migrate_reverse WHERE into_table = $1",
                      1, q, &res2, err);
        PQclear(res);
        if (!ok)
            return false;
        ok = PQntuples(res2) == 1 && pgo_lsn_parse(PQgetvalue(res2, 0, 0), end_lsn);
        PQclear(res2);
    }
    else
        PQclear(res);
    return ok ? true : err_set(err, EC_INTERNAL, "v7fill.migrate_reverse holds a bad LSN");
}

/* source_pgoutput's on_caught_up: the gate's. */
static bool
gate_caught_up(void *ctx, uint64_t *stop_lsn, Err *err)
{
    Rev *r = ctx;

    return r->gate->caught_up(r->gate->ctx, stop_lsn, err);
}

static bool
run_source(Rev *r, ReplConn *repl, uint64_t stop_lsn, uint64_t start, Err *err)
{
    PgoSourceConfig cfg;
    bool ok = true;

    memset(&cfg, 0, sizeof cfg);
    cfg.repl = repl;
    cfg.schema = r->split ? r->spec->into_schema : r->spec->from_schema;
    cfg.table = r->split ? r->spec->into_table : r->spec->from_table;
    cfg.columns = (const char *const *) r->newt.cols;
    cfg.ncolumns = r->newt.ncols;
    cfg.resume_lsn = start;
    cfg.stop_lsn = stop_lsn;
    /* Strictly before it: the parent's and its children's slots, stopped at
     * one position, end on the same commits. */
    cfg.stop_before = true;
    cfg.group_rows = 1000;
    cfg.group_ms = 200;
    cfg.on_truncate = PGO_TRUNCATE_STOP;
    cfg.persist_idle = persist_idle;
    if (r->gate && r->gate->caught_up)
    {
        cfg.on_caught_up = gate_caught_up;
        cfg.caught_up_repeat = r->gate->rounds;
    }
    cfg.ctx = r;
    if (!source_pgoutput_open(&cfg, &r->src, err))
        return false;
    if (r->gate && r->gate->opened)
        r->gate->opened(r->gate->ctx, r->src);
    for (;;)
    {
        Record rec;
        bool eof = false;

        if (!source_next(r->src, &rec, &eof, err) || (!eof && !apply_record(r, &rec, err)))
        {
            ok = false;
            break;
        }
        if (eof)
            break;
    }
    if (ok)
        ok = ahead_apply(r, err);
    ahead_forget(r);
    if (ok && r->in_txn)
        ok = commit_group(r, err);
    if (r->in_txn)
    {
        Err rerr = {0};

        pg_pipe_abandon(r->pipe);
        if (!pg_exec(r->c, "ROLLBACK", &rerr))
            log_debug("rollback: %s", rerr.msg);
        r->in_txn = false;
        r->top_key = 0;
    }
    if (r->m_txn)
    {
        Err rerr = {0};

        pg_pipe_abandon(r->mpipe);
        if (!pg_exec(r->m, "ROLLBACK", &rerr))
            log_debug("rollback: %s", rerr.msg);
        r->m_txn = false;
    }
    if (ok)
    {
        Err ferr = {0};
        PgoSourceStats ps;

        if (!source_pgoutput_feedback(r->src, &ferr) || !replconn_stop(repl, &ferr))
            log_debug("closing the replication connection: %s", ferr.msg);
        source_pgoutput_stats(r->src, &ps);
        r->st->transactions += ps.transactions;
        r->st->caught_up = ps.stopped_at_stop_lsn;
    }
    if (r->gate && r->gate->opened)
        r->gate->opened(r->gate->ctx, NULL);
    source_close(r->src);
    r->src = NULL;
    return ok;
}

static bool
reverse_apply(PgConn *c, PgConn *legacy, const MigrateSpec *spec, const ReverseParentRef *ref,
              uint64_t stop_lsn, bool follow, const ReverseGate *gate, ReverseStats *st,
              Err *err)
{
    Rev r;
    ReplConn *repl = NULL;
    char slot[64], pub[64];
    uint64_t start = 0;
    char *conninfo = NULL;
    bool ok = false;

    if (!follow && stop_lsn == 0)
        return err_set(err, EC_INTERNAL, "the way back without --follow needs a stop position");
    memset(&r, 0, sizeof r);
    buf_init(&r.sql);
    r.m = c;
    r.c = legacy ? legacy : c;
    r.split = r.c != r.m;
    r.spec = spec;
    r.st = st;
    r.fk_common = -1;
    r.f_fku = -1;
    r.gate = gate;
    r.keep = ref == NULL && spec->child_mode == MIGRATE_CHILD_MIGRATE && spec->nchildren > 0;
    r.pipe = pg_pipe_new(r.c, note_counted, note_describe, &r);
    if (r.split)
        r.mpipe = pg_pipe_new(r.m, note_counted, note_describe, &r);
    map_key_of(spec->into_schema, spec->map_table, r.map_key, sizeof r.map_key);
    (void) snprintf(r.into_key, sizeof r.into_key, "%s.%s", spec->into_schema, spec->into_table);
    if (!read_state(&r, slot, pub, &start, err) || !rev_columns(&r, ref, err) ||
        (r.split && !flush_gone(&r, err)))
        goto out;
    st->start_lsn = start;
    st->applied_lsn = start;
    conninfo = conninfo_of(c);
    /* A killed run's walsender may hold the slot a moment longer (55006). */
    for (int attempt = 1;; attempt++)
    {
        if (!replconn_open(conninfo, &repl, err))
            goto out;
        if (replconn_start(repl, slot, start, pub, 1, false, err))
            break;
        replconn_close(repl);
        repl = NULL;
        if (strcmp(err->sqlstate, "55006") != 0 || attempt >= 20 || interrupt_signal() != 0)
            goto out;
        (void) usleep(500000);
    }
    /* Streaming: its walsender decodes from the slot's restart point while
     * the gate waits. */
    if (gate && gate->started && !gate->started(gate->ctx, err))
        goto out;
    ok = run_source(&r, repl, follow ? 0 : stop_lsn, start, err);
out:
    replconn_close(repl);
    free(conninfo);
    rev_free(&r);
    return ok;
}

bool
migrate_reverse_apply(PgConn *c, PgConn *legacy, const MigrateSpec *spec,
                      const ReverseParentRef *ref, uint64_t stop_lsn, bool follow,
                      ReverseStats *st, Err *err)
{
    return reverse_apply(c, legacy, spec, ref, stop_lsn, follow, NULL, st, err);
}

bool
migrate_reverse_catch_up(PgConn *c, PgConn *legacy, const MigrateSpec *spec,
                         const ReverseParentRef *ref, uint64_t stop_lsn, const ReverseGate *gate,
                         ReverseStats *st, Err *err)
{
    return reverse_apply(c, legacy, spec, ref, stop_lsn, false, gate, st, err);
}

/* A migrate-mode child's legacy table with a foreign key to the legacy
 * parent that refuses a delete (NO ACTION or RESTRICT): its name and the
 * key's name (both "" when none). */
static bool
restrictive_child_key(PgConn *c, const MigrateSpec *spec, char *child, size_t csize,
                      char *key, size_t ksize, Err *err)
{
    char *parent_q = pg_qualified(c, spec->from_schema, spec->legacy_table);
    bool ok = true;

    child[0] = key[0] = '\0';
    for (size_t i = 0; ok && !key[0] && spec->child_mode == MIGRATE_CHILD_MIGRATE &&
                       i < spec->nchildren;
         i++)
    {
        char legacy[64];
        char *child_q;
        const char *p[2];
        PGresult *res;

        migrate_legacy_name(spec->children[i].table, legacy);
        child_q = pg_qualified(c, spec->children[i].schema, legacy);
        p[0] = child_q;
        p[1] = parent_q;
        ok = pg_query(c,
                      "SELECT conname FROM pg_catalog.pg_constraint WHERE contype = 'f' AND "
                      "conrelid = pg_catalog.to_regclass($1) AND confrelid = "
                      "pg_catalog.to_regclass($2) AND confdeltype IN ('a', 'r') "
                      "ORDER BY conname LIMIT 1",
                      2, p, &res, err);
        if (ok && PQntuples(res) == 1)
        {
            (void) snprintf(child, csize, "%s.%s", spec->children[i].schema, legacy);
            (void) snprintf(key, ksize, "%s", PQgetvalue(res, 0, 0));
        }
        if (ok)
            PQclear(res);
        free(child_q);
    }
    free(parent_q);
    return ok;
}

bool
migrate_reverse_session(PgConn *c, const MigrateSpec *spec, bool *replica, Err *err)
{
    Err e = {0};
    char child[160], key[64], role[64] = "";
    char *role_q;
    PGresult *res;

    *replica = false;
    if (pg_exec(c, "SET session_replication_role = replica", &e))
    {
        *replica = true;
        log_info("the way back writes with session_replication_role = replica: no trigger "
                 "(foreign keys included) fires on the legacy tables, as under a replication "
                 "apply worker");
        return true;
    }
    if (strcmp(e.sqlstate, "42501") != 0)
    {
        *err = e;
        err_prefix(err, "SET session_replication_role = replica");
        return false;
    }
    if (!restrictive_child_key(c, spec, child, sizeof child, key, sizeof key, err))
        return false;
    if (key[0] == '\0')
    {
        log_debug("the way back writes without session_replication_role = replica (%s): the "
                  "legacy tables' triggers fire",
                  e.msg);
        return true;
    }
    if (!pg_query(c, "SELECT current_user", 0, NULL, &res, err))
        return false;
    (void) snprintf(role, sizeof role, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    role_q = pg_ident(c, role);
    err_set(err, EC_CONFIG,
            "the way back needs SET session_replication_role = replica, which %s may not set "
            "(%s): the legacy child %s has the foreign key %s to %s.%s with ON DELETE NO ACTION "
            "or RESTRICT, and a round applies the parent's deletes before its children's, so "
            "the parent's delete would fail on it",
            role, e.msg, child, key, spec->from_schema, spec->legacy_table);
    err_hint(err,
             "As a superuser: GRANT SET ON PARAMETER session_replication_role TO %s; (or drop "
             "or relax that key while the way back runs, and add it again after switching back)",
             role_q);
    free(role_q);
    return false;
}

/* Back to the session's default (the connection goes on with other work). */
static void
session_reset(PgConn *c, bool replica)
{
    Err e = {0};

    if (replica && !pg_exec(c, "RESET session_replication_role", &e))
        log_debug("RESET session_replication_role: %s", e.msg);
}

/* The way back after migrate_reverse's checks: the parent alone, or with its
 * migrate-mode children in rounds. */
static bool
reverse_run(PgConn *db, PgConn *legacy, MigrateSpec *spec, bool follow, ReverseStats *st,
            Err *err)
{
    uint64_t stop = 0;
    char at[PGO_LSN_TEXT_SIZE];

    if (spec->child_mode == MIGRATE_CHILD_MIGRATE && spec->nchildren > 0)
    {
        if (!migrate_childreverse(db, legacy, spec, follow, st, err))
            return false;
        spec->phase = MIGRATE_PHASE_REVERSE;
        return true;
    }
    if (!follow && !pg_flush_wal(db, &stop, err)) /* the stop: all committed so far */
        return false;
    if (!migrate_reverse_apply(db, legacy, spec, NULL, stop, follow, st, err))
    {
        err_prefix(err, "the way back into %s.%s", spec->from_schema, spec->legacy_table);
        return false;
    }
    spec->phase = MIGRATE_PHASE_REVERSE;
    pgo_lsn_format(st->applied_lsn, at);
    log_info("%s.%s is current with %s.%s up to %s: %" PRIu64 " inserted, %" PRIu64
             " updated, %" PRIu64 " deleted, %" PRIu64 " missing",
             spec->from_schema, spec->legacy_table,
             legacy != db ? spec->into_schema : spec->from_schema,
             legacy != db ? spec->into_table : spec->from_table, at, st->inserted, st->updated,
             st->deleted, st->missing);
    return true;
}

bool
migrate_reverse(PgConn *db, PgConn *legacy, MigrateSpec *spec, bool follow, ReverseStats *st,
                Err *err)
{
    bool replica = false, ok;

    memset(st, 0, sizeof *st);
    if (legacy == NULL)
        legacy = db;
    if (legacy != db && spec->source_conninfo[0] == '\0')
        return err_set(err, EC_CONFIG,
                       "--source names another database, but the migration into %s.%s has the "
                       "legacy table in the target's own: run --reverse without --source",
                       spec->into_schema, spec->into_table);
    if (legacy == db && spec->source_conninfo[0] != '\0')
        return err_set(err, EC_INTERNAL, "the way back of a migration between two databases "
                                         "got no connection to the source");
    if (spec->legacy_table[0] == '\0')
        migrate_legacy_name(spec->from_table, spec->legacy_table);
    if (!migrate_reverse_session(legacy, spec, &replica, err))
        return false;
    ok = reverse_run(db, legacy, spec, follow, st, err);
    session_reset(legacy, replica);
    return ok;
}

bool
migrate_reverse_status(PgConn *db, const char *into_key, ReverseStatus *out, Err *err)
{
    PGresult *res;
    const char *p[1] = {into_key};
    bool exists;

    memset(out, 0, sizeof *out);
    if (!pg_query(db, "SELECT pg_catalog.to_regclass('v7fill.migrate_reverse') IS NOT NULL", 0,
                  NULL, &res, err))
        return false;
    exists = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    if (!exists)
        return true;
    if (!pg_query(db,
                  "SELECT r.slot, r.end_lsn::text, r.applied, (pg_catalog.pg_current_wal_lsn() - "
                  "r.end_lsn)::bigint, EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots s "
                  "WHERE s.slot_name = r.slot) FROM v7fill.migrate_reverse r "
                  "WHERE r.into_table = $1",
                  1, p, &res, err))
        return false;
    out->found = PQntuples(res) == 1;
    if (out->found)
    {
        (void) snprintf(out->slot, sizeof out->slot, "%s", PQgetvalue(res, 0, 0));
        if (!pgo_lsn_parse(PQgetvalue(res, 0, 1), &out->applied_lsn))
            out->applied_lsn = 0;
        out->applied = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
        out->lag_bytes = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
        out->slot_exists = PQgetvalue(res, 0, 4)[0] == 't';
    }
    PQclear(res);
    return true;
}
