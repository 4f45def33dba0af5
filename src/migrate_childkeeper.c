/*
 * migrate_childkeeper.c: passes over expand-mode children in another
 * database while the parent is followed (migrate_childkeeper.h).
 */
#include "v7fill/migrate_childkeeper.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/migrate_child.h"
#include "v7fill/monotime.h"

struct ChildKeeper
{
    PgConn *src;
    PgConn *map;
    const MigrateSpec *spec;
    int lock_timeout_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;            /* under mu */
    PGcancel *cancel[2];  /* under mu: of src and map, while a pass runs (else NULL) */
    ChildKeeperStats st;
};

/* Stopped, or about to be: on SIGINT/SIGTERM the fill's own check ends a
 * pass (EC_INTERRUPTED) before the stream has returned and stopped us. */
static bool
stopping(ChildKeeper *k)
{
    bool stop;

    pthread_mutex_lock(&k->mu);
    stop = k->stop;
    pthread_mutex_unlock(&k->mu);
    return stop || interrupt_signal() != 0;
}

/* For migrate_child_settle: asked between its batches. */
static bool
stopping_cb(void *arg)
{
    return stopping(arg);
}

/* One pass over every child; false after the first that failed (logged,
 * unless it failed because the keeper was stopped: its statement cancelled). */
static bool
pass_once(ChildKeeper *k)
{
    for (size_t i = 0; i < k->spec->nchildren && !stopping(k); i++)
    {
        const MigrateChild *ch = &k->spec->children[i];
        ChildStats cs;
        Err e = {0};

        if (!migrate_child_settle(k->src, k->map, k->spec, ch, k->lock_timeout_ms, stopping_cb, k,
                                  &cs, &e))
        {
            if (stopping(k))
                return false;
            log_warn("child %s.%s: the pass over rows written during --follow failed (%s); the "
                     "next pass tries again",
                     ch->schema, ch->table, e.msg);
            return false;
        }
        k->st.filled += cs.filled;
        if (cs.filled > 0)
            log_info("child %s.%s: %" PRIu64 " rows written during --follow given their %s_uuid",
                     ch->schema, ch->table, cs.filled, ch->fk_column);
    }
    return true;
}

/* A connection lost (a restart, a network cut): made again before the next
 * pass; a failure only waits for the one after. */
static void
reconnect_broken(PgConn *c)
{
    Err e = {0};

    if (pg_is_broken(c) && !pg_reconnect(c, &e))
        log_warn("the children's passes during --follow: %s", e.msg);
}

/* Waits ms or until stopped; true: stopped. */
static bool
wait_or_stop(ChildKeeper *k, int64_t ms)
{
    struct timespec until;
    bool stop;

    monotime_deadline(&until, ms);
    pthread_mutex_lock(&k->mu);
    while (!k->stop)
        if (pthread_cond_timedwait(&k->cv, &k->mu, &until) == ETIMEDOUT)
            break;
    stop = k->stop;
    pthread_mutex_unlock(&k->mu);
    return stop;
}

/* The run's own fill has just made a pass: the first of these comes after a
 * pause. */
static void *
keeper_thread(void *arg)
{
    ChildKeeper *k = arg;
    int64_t pause = MIGRATE_CHILD_KEEPER_MIN_MS;

    while (!wait_or_stop(k, pause))
    {
        int64_t t0 = monotime_ms(), took;

        reconnect_broken(k->src);
        reconnect_broken(k->map);
        /* A pass reads the whole child when no row is NULL (a large one for
         * seconds), and looks keys up in the map: stopping cancels the
         * statement under way on either rather than wait, and the pass ends
         * before its next batch. */
        pthread_mutex_lock(&k->mu);
        k->cancel[0] = PQgetCancel(pg_raw(k->src));
        k->cancel[1] = PQgetCancel(pg_raw(k->map));
        pthread_mutex_unlock(&k->mu);
        if (pass_once(k))
            k->st.passes++;
        else if (!stopping(k))
            k->st.failures++;
        pthread_mutex_lock(&k->mu);
        for (int i = 0; i < 2; i++)
        {
            PQfreeCancel(k->cancel[i]);
            k->cancel[i] = NULL;
        }
        pthread_mutex_unlock(&k->mu);
        took = monotime_ms() - t0;
        k->st.busy_ms += took;
        if (took > k->st.longest_ms)
            k->st.longest_ms = took;
        pause = took * MIGRATE_CHILD_KEEPER_PAUSE_FACTOR;
        if (pause < MIGRATE_CHILD_KEEPER_MIN_MS)
            pause = MIGRATE_CHILD_KEEPER_MIN_MS;
    }
    return NULL;
}

bool
migrate_child_keeper_start(PgConn *src, PgConn *map, const MigrateSpec *spec, int lock_timeout_ms,
                           ChildKeeper **out, Err *err)
{
    ChildKeeper *k = xcalloc(1, sizeof *k);

    *out = NULL;
    k->spec = spec;
    k->lock_timeout_ms = lock_timeout_ms;
    if (!pg_connect_again(src, &k->src, err) || !pg_connect_again(map, &k->map, err))
    {
        pg_close(k->src);
        free(k);
        err_prefix(err, "the children's passes during --follow");
        return false;
    }
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    if (pthread_create(&k->thread, NULL, keeper_thread, k) != 0)
    {
        pthread_mutex_destroy(&k->mu);
        pthread_cond_destroy(&k->cv);
        pg_close(k->src);
        pg_close(k->map);
        free(k);
        return err_set(err, EC_INTERNAL, "could not start the children's passes during --follow");
    }
    *out = k;
    return true;
}

void
migrate_child_keeper_stop(ChildKeeper *k, ChildKeeperStats *st)
{
    memset(st, 0, sizeof *st);
    if (k == NULL)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = true;
    for (int i = 0; i < 2; i++)
    {
        char msg[256];

        if (k->cancel[i] && !PQcancel(k->cancel[i], msg, sizeof msg))
            log_debug("the children's pass: could not cancel its statement: %s", msg);
    }
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    (void) pthread_join(k->thread, NULL);
    *st = k->st;
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
    pg_close(k->src);
    pg_close(k->map);
    free(k);
}
