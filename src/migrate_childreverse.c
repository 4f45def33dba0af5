/*
 * The way back of a migration with migrate-mode children, in rounds: the
 * parent's way back up to one stop position, then each child's up to the
 * same one (migrate_childreverse.h).
 */
#include "v7fill/migrate_childreverse.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/migrate_childswitch.h"
#include "v7fill/migrate_childtable.h"
#include "v7fill/migrate_state.h"
#include "v7fill/pgoutput.h"

static void
stats_add(ReverseStats *sum, const ReverseStats *one)
{
    sum->transactions += one->transactions;
    sum->inserted += one->inserted;
    sum->updated += one->updated;
    sum->deleted += one->deleted;
    sum->missing += one->missing;
}

/* Each child's own migration, switched with its parent; and the table
 * keeping the parent's deleted map rows for them (made by the switch, or
 * here for a migration switched by an earlier version). */
static bool
load_children(PgConn *db, const MigrateSpec *spec, MigrateSpec *kids, Err *err)
{
    if (!migrate_reverse_kept_setup(db, err))
        return false;
    for (size_t i = 0; i < spec->nchildren; i++)
    {
        bool found = false;

        if (!migrate_state_get(db, spec->into_schema, spec->children[i].into_table, &kids[i],
                               &found, err))
            return false;
        if (!found)
            return err_set(err, EC_CONFIG, "child %s.%s: no migration into %s.%s",
                           spec->children[i].schema, spec->children[i].table, spec->into_schema,
                           spec->children[i].into_table);
        if (kids[i].legacy_table[0] == '\0')
            migrate_legacy_name(kids[i].from_table, kids[i].legacy_table);
    }
    return true;
}

/* One round: the parent up to stop, then each child up to stop.  *all: every
 * table reached stop (not interrupted).  The parent's whole round comes
 * first, so a parent row inserted and deleted within it is gone from its map
 * before a child row naming it arrives: the parent's way back keeps those map
 * rows (v7fill.migrate_reverse_kept), and they go once every child reached
 * stop.  An interrupted round keeps them for the next one, which starts each
 * child where it stopped. */
static bool
round_once(PgConn *db, PgConn *legacy, const MigrateSpec *spec, const MigrateSpec *kids,
           uint64_t stop, ReverseStats *st, bool *all, Err *err)
{
    ReverseStats one;

    memset(&one, 0, sizeof one);
    *all = false;
    if (!migrate_reverse_apply(db, legacy, spec, NULL, stop, false, &one, err))
    {
        err_prefix(err, "the way back into %s.%s", spec->from_schema, spec->legacy_table);
        return false;
    }
    stats_add(st, &one);
    if (!one.caught_up)
        return true; /* interrupted: no child goes past the parent */
    for (size_t i = 0; i < spec->nchildren; i++)
    {
        ReverseParentRef ref = {spec->into_schema, spec->map_table, spec->children[i].fk_column};

        memset(&one, 0, sizeof one);
        if (!migrate_reverse_apply(db, legacy, &kids[i], &ref, stop, false, &one, err))
        {
            err_prefix(err, "the way back into %s.%s", kids[i].from_schema,
                       kids[i].legacy_table);
            return false;
        }
        stats_add(st, &one);
        if (one.inserted + one.updated + one.deleted > 0)
            log_info("child %s.%s: %" PRIu64 " inserted, %" PRIu64 " updated, %" PRIu64
                     " deleted, %" PRIu64 " missing in %s.%s",
                     kids[i].from_schema, kids[i].from_table, one.inserted, one.updated,
                     one.deleted, one.missing, kids[i].from_schema, kids[i].legacy_table);
        if (!one.caught_up)
            return true;
    }
    if (!migrate_reverse_kept_clear(db, spec, err))
        return false;
    *all = true;
    return true;
}

bool
migrate_childreverse_upto(PgConn *apply, PgConn *legacy, const MigrateSpec *spec,
                          uint64_t stop, ReverseStats *st, Err *err)
{
    MigrateSpec *kids = xcalloc(spec->nchildren ? spec->nchildren : 1, sizeof *kids);
    bool all = false;
    bool ok = load_children(apply, spec, kids, err) &&
              round_once(apply, legacy, spec, kids, stop, st, &all, err);

    st->caught_up = ok && all;
    if (st->caught_up)
        st->applied_lsn = stop;
    for (size_t i = 0; i < spec->nchildren; i++)
        migrate_spec_free(&kids[i]);
    free(kids);
    return ok;
}

bool
migrate_childreverse(PgConn *db, PgConn *legacy, const MigrateSpec *spec, bool follow,
                     ReverseStats *st, Err *err)
{
    MigrateSpec *kids = xcalloc(spec->nchildren ? spec->nchildren : 1, sizeof *kids);
    bool ok = load_children(db, spec, kids, err);
    bool all = false;
    char at[PGO_LSN_TEXT_SIZE];

    while (ok)
    {
        uint64_t stop = 0;

        ok = pg_flush_wal(db, &stop, err) &&
             round_once(db, legacy, spec, kids, stop, st, &all, err);
        if (ok && all)
        {
            st->applied_lsn = stop;
            st->caught_up = true;
        }
        if (!ok || !all || !follow || interrupt_signal() != 0)
            break;
        (void) usleep(MIGRATE_FOLLOW_ROUND_MS * 1000);
        if (interrupt_signal() != 0)
            break;
    }
    /* Stored also after an interrupted run: the phase each child reached. */
    for (size_t i = 0; i < spec->nchildren; i++)
    {
        Err e2 = {0};

        if (kids[i].phase >= MIGRATE_PHASE_SWITCHED && kids[i].phase != MIGRATE_PHASE_REVERSE)
        {
            kids[i].phase = MIGRATE_PHASE_REVERSE;
            if (!migrate_state_put(db, &kids[i], ok ? err : &e2))
                ok = false;
        }
        migrate_spec_free(&kids[i]);
    }
    free(kids);
    if (ok)
    {
        pgo_lsn_format(st->applied_lsn, at);
        log_info("%s.%s and its %zu child table(s) are current in their legacy tables up to %s: "
                 "%" PRIu64 " inserted, %" PRIu64 " updated, %" PRIu64 " deleted, %" PRIu64
                 " missing",
                 spec->from_schema, spec->legacy_table, spec->nchildren, at, st->inserted,
                 st->updated, st->deleted, st->missing);
    }
    return ok;
}

/*
 * Switching back (migrate_childreverse_switch): every table's way back on
 * its own connections, through migrate_catch_up_together (the children's in
 * threads), each stream open across the lock.  The parent's applies up to
 * the first stop; each child's reads only then (its walsender decoding
 * meanwhile: migrate_catch_up_parent_caught_up) and applies up to the same
 * stop, so no child applies what its parent has not.  Once every child waits
 * there, the parent's takes the lock and applies up to the final position,
 * then the children up to it, side by side (each writes its own legacy
 * table).
 */
typedef struct BackTable
{
    PgConn *apply, *legacy;  /* legacy NULL: one database */
    bool own;                /* the connections are this table's (a child's) */
    const MigrateSpec *spec;
    ReverseParentRef ref;    /* a child: its parent's map */
    ReverseIds *ids;         /* the ids it writes under the lock go here (NULL: none) */
    uint64_t stop;
    MigrateSwitchLock lock;  /* what migrate_catch_up_together gave it */
    void *lock_ctx;
    bool locked;             /* the lock is held: it applies up to the final position */
    bool lock_failed;
    ReverseStats st, at_lock;
} BackTable;

static bool
table_started(void *ctx, Err *err)
{
    BackTable *t = ctx;

    return migrate_catch_up_parent_caught_up(t->lock_ctx, err);
}

static bool
table_caught_up(void *ctx, uint64_t *stop_lsn, Err *err)
{
    BackTable *t = ctx;

    if (!t->lock(t->lock_ctx, stop_lsn, err))
    {
        t->lock_failed = true;
        return false;
    }
    t->locked = true;
    t->at_lock = t->st;
    t->st.ids = t->ids;
    return true;
}

/* MigrateCatchUp: one table's way back. */
static bool
back_table(void *ctx, MigrateSwitchLock lock, void *lock_ctx, Err *err)
{
    BackTable *t = ctx;
    ReverseGate gate = {t->own ? table_started : NULL, table_caught_up, t};

    if (lock == NULL)
        return err_set(err, EC_INTERNAL, "switching back needs the switch's lock");
    t->lock = lock;
    t->lock_ctx = lock_ctx;
    if (migrate_reverse_catch_up(t->apply, t->legacy, t->spec, t->own ? &t->ref : NULL, t->stop,
                                 &gate, &t->st, err))
        return true;
    if (!t->lock_failed)
        err_prefix(err, "the way back into %s.%s", t->spec->from_schema, t->spec->legacy_table);
    return false;
}

/* What was applied since at (a snapshot of one), added to sum. */
static void
stats_since(ReverseStats *sum, const ReverseStats *one, const ReverseStats *at)
{
    ReverseStats d;

    memset(&d, 0, sizeof d);
    d.transactions = one->transactions - at->transactions;
    d.inserted = one->inserted - at->inserted;
    d.updated = one->updated - at->updated;
    d.deleted = one->deleted - at->deleted;
    d.missing = one->missing - at->missing;
    stats_add(sum, &d);
}

/* A child's connections, made like the parent's, writing as
 * migrate_reverse_session says. */
static bool
table_connect(PgConn *apply, PgConn *legacy, const MigrateSpec *spec, BackTable *t, Err *err)
{
    bool replica;

    t->own = true;
    return pg_connect_again(apply, &t->apply, err) &&
           (legacy == NULL || pg_connect_again(legacy, &t->legacy, err)) &&
           migrate_reverse_session(t->legacy ? t->legacy : t->apply, spec, &replica, err);
}

bool
migrate_childreverse_switch(PgConn *apply, PgConn *legacy, const MigrateSpec *spec,
                            uint64_t stop, ReverseIds *ids, MigrateSwitchLock lock,
                            void *lock_ctx, ReverseStats *st, ReverseStats *under, Err *err)
{
    size_t n = spec->child_mode == MIGRATE_CHILD_MIGRATE ? spec->nchildren : 0;
    MigrateSpec *kspec = xcalloc(n ? n : 1, sizeof *kspec);
    BackTable *kids = xcalloc(n ? n : 1, sizeof *kids);
    void **kid_ctx = xcalloc(n ? n : 1, sizeof *kid_ctx);
    BackTable parent;
    bool ok = n == 0 || load_children(apply, spec, kspec, err);

    memset(st, 0, sizeof *st);
    memset(under, 0, sizeof *under);
    memset(&parent, 0, sizeof parent);
    parent.apply = apply;
    parent.legacy = legacy;
    parent.spec = spec;
    parent.stop = stop;
    for (size_t i = 0; ok && i < n; i++)
    {
        BackTable *k = &kids[i];

        k->spec = &kspec[i];
        k->ref.map_schema = spec->into_schema;
        k->ref.map_table = spec->map_table;
        k->ref.fk_column = spec->children[i].fk_column;
        k->ids = ids ? &ids[i] : NULL;
        k->stop = stop;
        kid_ctx[i] = k;
        ok = table_connect(apply, legacy, spec, k, err);
    }
    ok = ok && migrate_catch_up_together(back_table, &parent, kid_ctx, n, lock, lock_ctx, err);
    if (ok && !parent.locked)
        ok = err_set(err, interrupt_signal() ? EC_INTERRUPTED : EC_INTERNAL,
                     "the way back ended before the switch's lock was taken");
    st->caught_up = ok && parent.st.caught_up;
    stats_add(st, &parent.st);
    stats_since(under, &parent.st, &parent.at_lock);
    for (size_t i = 0; i < n; i++)
    {
        BackTable *k = &kids[i];

        if (!k->st.caught_up)
            st->caught_up = false;
        stats_add(st, &k->st);
        if (k->locked)
            stats_since(under, &k->st, &k->at_lock);
        if (ok && k->st.inserted + k->st.updated + k->st.deleted > 0)
            log_info("child %s.%s: %" PRIu64 " inserted, %" PRIu64 " updated, %" PRIu64
                     " deleted, %" PRIu64 " missing in %s.%s",
                     k->spec->from_schema, k->spec->from_table, k->st.inserted, k->st.updated,
                     k->st.deleted, k->st.missing, k->spec->from_schema, k->spec->legacy_table);
        pg_close(k->apply);
        pg_close(k->legacy);
        migrate_spec_free(&kspec[i]);
    }
    if (st->caught_up)
        st->applied_lsn = parent.st.applied_lsn;
    if (ok && st->caught_up && n > 0 && !migrate_reverse_kept_clear(apply, spec, err))
        ok = false;
    free(kid_ctx);
    free(kids);
    free(kspec);
    return ok;
}
