/*
 * The way back of a migration with migrate-mode children, in rounds: the
 * parent's way back up to one stop position, then each child's up to the
 * same one (migrate_childreverse.h).
 */
#include "v7fill/migrate_childreverse.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/migrate_childswitch.h"
#include "v7fill/migrate_childtable.h"
#include "v7fill/migrate_state.h"
#include "v7fill/monotime.h"
#include "v7fill/pgoutput.h"
#include "v7fill/source_pgoutput.h"

static void
stats_add(ReverseStats *sum, const ReverseStats *one)
{
    sum->transactions += one->transactions;
    sum->inserted += one->inserted;
    sum->updated += one->updated;
    sum->deleted += one->deleted;
    sum->missing += one->missing;
    sum->keys_given += one->keys_given;
}

/* What a child's way back applied, when anything. */
static void
log_child(const MigrateSpec *kid, const ReverseStats *one)
{
    if (one->inserted + one->updated + one->deleted > 0)
        log_info("child %s.%s: %" PRIu64 " inserted, %" PRIu64 " updated, %" PRIu64
                 " deleted, %" PRIu64 " missing in %s.%s",
                 kid->from_schema, kid->from_table, one->inserted, one->updated, one->deleted,
                 one->missing, kid->from_schema, kid->legacy_table);
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
        log_child(&kids[i], &one);
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

typedef struct Rounds Rounds;

/*
 * One table's way back on a stream held open: switching back
 * (migrate_childreverse_switch) and the --follow rounds (follow_rounds) run
 * one per table, the parent's on the caller's connections, each child's on
 * its own (made like them), the children's in threads.
 */
typedef struct WayTable
{
    PgConn *apply, *legacy;  /* as given to migrate_reverse_catch_up */
    bool own;                /* its connections are its own (a child's) */
    const MigrateSpec *spec;
    ReverseParentRef ref;    /* a child: its parent's map */
    uint64_t stop;           /* the first stop */
    ReverseStats st;
    /* switching back */
    ReverseIds *ids;         /* the ids it writes under the lock go here (NULL: none) */
    MigrateSwitchLock lock;  /* what migrate_catch_up_together gave it */
    void *lock_ctx;
    bool locked;             /* the lock is held: it applies up to the final position */
    bool lock_failed;
    ReverseStats at_lock;
    /* --follow */
    Rounds *r;
    size_t i;                /* a child's index */
    Source *src;             /* its stream, while open */
    bool ok;
    Err err;
    pthread_t th;
} WayTable;

/* A child's connections, made like the parent's (*legacy_out only when
 * legacy is given), writing as migrate_reverse_session says. */
static bool
kid_connect(PgConn *apply, PgConn *legacy, const MigrateSpec *spec, PgConn **apply_out,
            PgConn **legacy_out, Err *err)
{
    bool replica;

    return pg_connect_again(apply, apply_out, err) &&
           (legacy == NULL || pg_connect_again(legacy, legacy_out, err)) &&
           migrate_reverse_session(*legacy_out ? *legacy_out : *apply_out, spec, &replica, err);
}

/* The parent's table (apply, legacy: the caller's) and the n children's
 * (kspec: their migrations; kids zeroed), each child on connections of its
 * own, all from the first stop.  legacy NULL or apply: one database. */
static bool
way_tables(PgConn *apply, PgConn *legacy, const MigrateSpec *spec, const MigrateSpec *kspec,
           size_t n, uint64_t stop, WayTable *parent, WayTable *kids, Err *err)
{
    bool ok = true;

    memset(parent, 0, sizeof *parent);
    parent->apply = apply;
    parent->legacy = legacy;
    parent->spec = spec;
    parent->stop = stop;
    for (size_t i = 0; ok && i < n; i++)
    {
        WayTable *k = &kids[i];

        k->own = true;
        k->spec = &kspec[i];
        k->ref.map_schema = spec->into_schema;
        k->ref.map_table = spec->map_table;
        k->ref.fk_column = spec->children[i].fk_column;
        k->stop = stop;
        k->i = i;
        ok = kid_connect(apply, legacy == apply ? NULL : legacy, spec, &k->apply, &k->legacy,
                         err);
    }
    return ok;
}

/* Each child's counts added to *st (and logged, when ok), its connections
 * closed. */
static void
way_tables_end(WayTable *kids, size_t n, bool ok, ReverseStats *st)
{
    for (size_t i = 0; i < n; i++)
    {
        stats_add(st, &kids[i].st);
        if (ok)
            log_child(kids[i].spec, &kids[i].st);
        pg_close(kids[i].apply);
        pg_close(kids[i].legacy);
    }
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
static bool
table_started(void *ctx, Err *err)
{
    WayTable *t = ctx;

    return migrate_catch_up_parent_caught_up(t->lock_ctx, err);
}

static bool
table_caught_up(void *ctx, uint64_t *stop_lsn, Err *err)
{
    WayTable *t = ctx;

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
    WayTable *t = ctx;
    ReverseGate gate = {.started = t->own ? table_started : NULL,
                        .caught_up = table_caught_up,
                        .ctx = t};

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
    d.keys_given = one->keys_given - at->keys_given;
    stats_add(sum, &d);
}

bool
migrate_childreverse_switch(PgConn *apply, PgConn *legacy, const MigrateSpec *spec,
                            uint64_t stop, ReverseIds *ids, MigrateSwitchLock lock,
                            void *lock_ctx, ReverseStats *st, ReverseStats *under, Err *err)
{
    size_t n = spec->child_mode == MIGRATE_CHILD_MIGRATE ? spec->nchildren : 0;
    MigrateSpec *kspec = xcalloc(n ? n : 1, sizeof *kspec);
    WayTable *kids = xcalloc(n ? n : 1, sizeof *kids);
    void **kid_ctx = xcalloc(n ? n : 1, sizeof *kid_ctx);
    WayTable parent = {0};
    bool ok = n == 0 || load_children(apply, spec, kspec, err);

    memset(st, 0, sizeof *st);
    memset(under, 0, sizeof *under);
    ok = ok && way_tables(apply, legacy, spec, kspec, n, stop, &parent, kids, err);
    for (size_t i = 0; i < n; i++)
    {
        kids[i].ids = ids ? &ids[i] : NULL;
        kid_ctx[i] = &kids[i];
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
        if (!kids[i].st.caught_up)
            st->caught_up = false;
        if (kids[i].locked)
            stats_since(under, &kids[i].st, &kids[i].at_lock);
    }
    way_tables_end(kids, n, ok, st);
    for (size_t i = 0; i < n; i++)
        migrate_spec_free(&kspec[i]);
    if (st->caught_up)
        st->applied_lsn = parent.st.applied_lsn;
    if (ok && st->caught_up && n > 0 && !migrate_reverse_kept_clear(apply, spec, err))
        ok = false;
    free(kid_ctx);
    free(kids);
    free(kspec);
    return ok;
}

/*
 * --reverse --follow: the rounds above, every table's stream open from one
 * round to the next, each child's on its own connections in its own thread.
 * Round k's stop S_k is what the database had flushed when it began: the
 * parent's way back applies up to S_k, then each child's up to it (a child
 * waits for its parent to be there, and opens its stream only once the
 * parent reached the first stop); once every child is there the kept map
 * rows go, and MIGRATE_FOLLOW_ROUND_MS later the next round begins.  Before,
 * each round opened every stream anew, and each walsender decoded again the
 * WAL since its slot's restart point.
 */
struct Rounds
{
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t n;                /* children */
    uint64_t parent_at;      /* the parent applied up to this stop (0: not yet) */
    uint64_t *kid_at;        /* each child's */
    bool stopping;           /* no further round: every way back ends at its stop */
    bool kid_failed;         /* a child's way back failed */
    bool kid_ended;          /* ... or ended before the rounds were stopped */
    uint64_t done;           /* the last stop every table reached (0: none) */
    const MigrateSpec *spec;
};

static void
follow_opened(void *ctx, Source *src)
{
    ((WayTable *) ctx)->src = src;
}

/* Waits on r->cv (r->mu held) at most a second; every 5 s of waiting (*since:
 * when the last status went out) a status keeps t's walsender from its
 * timeout, since nothing reads its stream meanwhile. */
static void
round_wait(WayTable *t, double *since)
{
    struct timespec ts;

    (void) clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    (void) pthread_cond_timedwait(&t->r->cv, &t->r->mu, &ts);
    if (t->src != NULL && monotime_s() - *since >= 5.0)
    {
        Err e = {0};

        pthread_mutex_unlock(&t->r->mu);
        if (!source_pgoutput_feedback(t->src, &e))
            log_debug("a status to the way back's walsender: %s", e.msg);
        *since = monotime_s();
        pthread_mutex_lock(&t->r->mu);
    }
}

/* A child at its stop: on to the parent's next one, once it is there. */
static bool
kid_round(void *ctx, uint64_t *stop_lsn, Err *err)
{
    WayTable *t = ctx;
    Rounds *r = t->r;
    double since = monotime_s();

    (void) err;
    pthread_mutex_lock(&r->mu);
    r->kid_at[t->i] = *stop_lsn;
    pthread_cond_broadcast(&r->cv);
    while (r->parent_at <= *stop_lsn && !r->stopping)
        round_wait(t, &since);
    if (!r->stopping)
        *stop_lsn = r->parent_at;
    pthread_mutex_unlock(&r->mu);
    return true;
}

/* The parent at its stop: every child there too, then the kept map rows
 * cleared and, a round's pause later, the next stop. */
static bool
parent_round(void *ctx, uint64_t *stop_lsn, Err *err)
{
    WayTable *t = ctx;
    Rounds *r = t->r;
    double since = monotime_s();
    uint64_t next = 0;
    bool all = false, failed;

    pthread_mutex_lock(&r->mu);
    r->parent_at = *stop_lsn;
    pthread_cond_broadcast(&r->cv);
    while (!r->kid_failed && !r->kid_ended && interrupt_signal() == 0)
    {
        all = true;
        for (size_t i = 0; i < r->n; i++)
            all = all && r->kid_at[i] >= *stop_lsn;
        if (all)
            break;
        round_wait(t, &since);
    }
    if (all)
        r->done = *stop_lsn;
    failed = r->kid_failed || (r->kid_ended && interrupt_signal() == 0);
    pthread_mutex_unlock(&r->mu);
    if (failed)
        return err_set(err, EC_INTERNAL, "a child's way back stopped");
    if (!all)
        return true; /* interrupted: the parent ends here */
    if (!migrate_reverse_kept_clear(t->apply, r->spec, err))
        return false;
    for (int slept = 0; slept < MIGRATE_FOLLOW_ROUND_MS && interrupt_signal() == 0; slept += 50)
        (void) usleep(50000);
    if (interrupt_signal() == 0)
    {
        if (!pg_flush_wal(t->apply, &next, err))
            return false;
        if (next > *stop_lsn)
            *stop_lsn = next;
    }
    return true;
}

static void *
kid_follow_main(void *arg)
{
    WayTable *t = arg;
    Rounds *r = t->r;
    ReverseGate gate = {.caught_up = kid_round, .rounds = true, .opened = follow_opened, .ctx = t};
    double since = monotime_s();
    bool go;

    /* Its stream opens once the parent is at the first stop: the wait may be
     * long (a backlog), and a stream opened but not read would meet the
     * walsender's timeout. */
    pthread_mutex_lock(&r->mu);
    while (r->parent_at < t->stop && !r->stopping)
        round_wait(t, &since);
    go = !r->stopping;
    pthread_mutex_unlock(&r->mu);
    t->ok = !go || migrate_reverse_catch_up(t->apply, t->legacy, t->spec, &t->ref, t->stop,
                                           &gate, &t->st, &t->err);
    if (!t->ok)
        err_prefix(&t->err, "the way back into %s.%s", t->spec->from_schema,
                   t->spec->legacy_table);
    pthread_mutex_lock(&r->mu);
    if (!t->ok)
        r->kid_failed = true;
    else if (!r->stopping)
        r->kid_ended = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static bool
follow_rounds(PgConn *db, PgConn *legacy, const MigrateSpec *spec, const MigrateSpec *kspec,
              ReverseStats *st, Err *err)
{
    size_t n = spec->nchildren;
    WayTable *kids = xcalloc(n ? n : 1, sizeof *kids);
    WayTable parent = {0};
    ReverseGate gate = {.caught_up = parent_round, .rounds = true, .opened = follow_opened,
                        .ctx = &parent};
    Rounds r;
    uint64_t first = 0;
    size_t started = 0;
    bool ok = pg_flush_wal(db, &first, err);

    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    r.n = n;
    r.kid_at = xcalloc(n ? n : 1, sizeof *r.kid_at);
    r.spec = spec;
    /* legacy db: one database (migrate_reverse) */
    ok = ok && way_tables(db, legacy, spec, kspec, n, first, &parent, kids, err);
    parent.r = &r;
    for (size_t i = 0; i < n; i++)
        kids[i].r = &r;
    for (; ok && started < n; started++)
        if (pthread_create(&kids[started].th, NULL, kid_follow_main, &kids[started]) != 0)
            ok = err_set(err, EC_INTERNAL, "could not start a child's way back");
    if (ok)
        ok = migrate_reverse_catch_up(db, legacy, spec, NULL, first, &gate, &parent.st, err);
    pthread_mutex_lock(&r.mu);
    r.stopping = true;
    pthread_cond_broadcast(&r.cv);
    pthread_mutex_unlock(&r.mu);
    for (size_t i = 0; i < started; i++)
        (void) pthread_join(kids[i].th, NULL);
    if (!ok && !r.kid_failed)
        err_prefix(err, "the way back into %s.%s", spec->from_schema, spec->legacy_table);
    /* A child that failed: the first one's reason is the one given (the
     * parent then stopped for it). */
    for (size_t i = 0; i < started && r.kid_failed; i++)
        if (!kids[i].ok)
        {
            *err = kids[i].err;
            ok = false;
            break;
        }
    stats_add(st, &parent.st);
    way_tables_end(kids, n, ok, st);
    st->caught_up = ok && r.done != 0;
    if (r.done != 0)
        st->applied_lsn = r.done;
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
    free(r.kid_at);
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

    if (ok && follow)
        ok = follow_rounds(db, legacy, spec, kids, st, err);
    else if (ok)
    {
        uint64_t stop = 0;

        ok = pg_flush_wal(db, &stop, err) &&
             round_once(db, legacy, spec, kids, stop, st, &all, err);
        if (ok && all)
        {
            st->applied_lsn = stop;
            st->caught_up = true;
        }
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

