/*
 * migrate_childswitch.c: the parent's and the children's captures caught up
 * together for the switch (see migrate_childswitch.h).
 */
#include "v7fill/migrate_childswitch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/log.h"

typedef struct Gate
{
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t n;          /* children */
    size_t ready;      /* children caught up and waiting for the lock */
    size_t ended;      /* children whose capture ended before being caught up */
    bool parent_ready; /* the parent's capture is caught up (at its first stop) */
    bool locked;       /* the lock is held: final_lsn is set */
    bool parent_done;  /* ... and the parent applied up to it: the children's turn */
    bool aborted;      /* no lock will come */
    bool child_ended;  /* ... because a child's capture ended first */
    uint64_t final_lsn;
    MigrateSwitchLock lock;
    void *lock_ctx;
} Gate;

typedef struct Child
{
    Gate *g;
    MigrateCatchUp catch_up;
    void *ctx;
    bool called;       /* its capture reached child_caught_up */
    bool ok;
    Err err;
    pthread_t th;
} Child;

/* A child's capture is caught up: wait for the lock and for the parent's
 * capture to have applied up to the final position, then apply up to it.
 * One after the other under the lock: side by side, the parent's deletes
 * (their foreign key's ON DELETE SET NULL on the child target's rows) and the
 * child's deletes and updates of those rows waited on each other's row locks
 * (a child's group holds them until it commits), up to a deadlock and its
 * deadlock_timeout.  With the captures' final group wait and their question
 * to the walsender (source_pgoutput.c, final_apply), which were the other
 * part of it, the lock was held 450 ms to 1.1 s instead of 50-70 ms. */
static bool
child_caught_up(void *ctx, uint64_t *stop_lsn, Err *err)
{
    Child *c = ctx;
    Gate *g = c->g;
    bool ok;

    pthread_mutex_lock(&g->mu);
    c->called = true;
    g->ready++;
    pthread_cond_broadcast(&g->cv);
    while (!(g->locked && g->parent_done) && !g->aborted)
        pthread_cond_wait(&g->cv, &g->mu);
    ok = g->locked && g->parent_done;
    if (ok && g->final_lsn > *stop_lsn)
        *stop_lsn = g->final_lsn;
    pthread_mutex_unlock(&g->mu);
    return ok ? true
              : err_set(err, EC_INTERRUPTED,
                        "the switch's lock was not taken, or the parent's capture stopped");
}

/* The parent's capture is caught up: wait for every child's, then lock. */
static bool
parent_caught_up(void *ctx, uint64_t *final_lsn, Err *err)
{
    Gate *g = ctx;
    bool ok;

    pthread_mutex_lock(&g->mu);
    g->parent_ready = true;
    pthread_cond_broadcast(&g->cv);
    while (g->ready + g->ended < g->n)
        pthread_cond_wait(&g->cv, &g->mu);
    if (g->ended > 0)
    {
        g->aborted = true;
        g->child_ended = true;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        return err_set(err, EC_INTERNAL, "a child's capture ended before it was caught up");
    }
    pthread_mutex_unlock(&g->mu);
    ok = g->lock(g->lock_ctx, final_lsn, err);
    pthread_mutex_lock(&g->mu);
    if (ok)
    {
        g->locked = true;
        g->final_lsn = *final_lsn;
    }
    else
        g->aborted = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return ok;
}

bool
migrate_catch_up_parent_caught_up(void *lock_ctx, Err *err)
{
    Child *c = lock_ctx;
    Gate *g = c->g;
    bool ok;

    pthread_mutex_lock(&g->mu);
    while (!g->parent_ready && !g->aborted)
        pthread_cond_wait(&g->cv, &g->mu);
    ok = !g->aborted;
    pthread_mutex_unlock(&g->mu);
    return ok ? true : err_set(err, EC_INTERRUPTED, "the parent's capture stopped");
}

static void *
child_main(void *arg)
{
    Child *c = arg;
    Gate *g = c->g;

    c->ok = c->catch_up(c->ctx, child_caught_up, c, &c->err);
    if (c->ok && !c->called)
        c->ok = err_set(&c->err, EC_INTERNAL, "the capture ended without reaching the switch");
    pthread_mutex_lock(&g->mu);
    if (!c->called)
    {
        g->ended++;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

bool
migrate_catch_up_together(MigrateCatchUp catch_up, void *parent_ctx, void *const *child_ctx,
                          size_t n, MigrateSwitchLock lock, void *lock_ctx, Err *err)
{
    Gate g;
    Child *kids;
    size_t started = 0;
    bool ok;

    if (lock == NULL)
    {
        ok = catch_up(parent_ctx, NULL, NULL, err);
        for (size_t i = 0; ok && i < n; i++)
            ok = catch_up(child_ctx[i], NULL, NULL, err);
        return ok;
    }
    memset(&g, 0, sizeof g);
    g.n = n;
    g.lock = lock;
    g.lock_ctx = lock_ctx;
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    kids = calloc(n ? n : 1, sizeof *kids);
    if (kids == NULL)
        return err_set(err, EC_INTERNAL, "out of memory");
    for (; started < n; started++)
    {
        kids[started].g = &g;
        kids[started].catch_up = catch_up;
        kids[started].ctx = child_ctx[started];
        if (pthread_create(&kids[started].th, NULL, child_main, &kids[started]) != 0)
            break;
    }
    if (started < n)
    {
        pthread_mutex_lock(&g.mu);
        g.ended += n - started; /* never started: the parent does not wait for them */
        pthread_mutex_unlock(&g.mu);
    }
    ok = catch_up(parent_ctx, parent_caught_up, &g, err);
    pthread_mutex_lock(&g.mu);
    if (ok && g.locked)
        g.parent_done = true;
    else
        g.aborted = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    for (size_t i = 0; i < started; i++)
    {
        (void) pthread_join(kids[i].th, NULL);
        /* The parent stopped because a child's capture ended: the first
         * such child's reason is the one to give. */
        if (!kids[i].ok && (ok || (g.child_ended && !kids[i].called)))
        {
            if (!ok)
                log_debug("the parent's capture: %s", err->msg);
            *err = kids[i].err;
            ok = false;
            g.child_ended = false;
        }
        else if (!kids[i].ok && kids[i].err.code != EC_INTERRUPTED)
            log_warn("a child's capture: %s", kids[i].err.msg);
    }
    if (ok && started < n)
        ok = err_set(err, EC_INTERNAL, "could not start a child's capture");
    free(kids);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    return ok;
}
