/*
 * The gate of migrate_childswitch.c with stand-in captures (threads, no
 * server): the order in which a parent's and its children's captures reach
 * their stops, the lock, and the final position.  Switching back depends on
 * it: a child's way back must apply nothing its parent has not.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "v7fill/migrate_childswitch.h"

#define FINAL UINT64_C(0x5000)

/* What happened, in order, from every thread. */
typedef struct Log
{
    pthread_mutex_t mu;
    char ev[32][24];
    size_t n;
} Log;

static void
log_ev(Log *l, const char *ev)
{
    pthread_mutex_lock(&l->mu);
    assert_true(l->n < 32);
    (void) snprintf(l->ev[l->n++], sizeof l->ev[0], "%s", ev);
    pthread_mutex_unlock(&l->mu);
}

/* The position of ev in the log (-1: absent). */
static int
at(Log *l, const char *ev)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->ev[i], ev) == 0)
            return (int) i;
    return -1;
}

typedef struct Cap
{
    Log *log;
    const char *name;        /* "p", "c1", "c2" */
    bool child;
    bool fail_early;         /* a child whose capture fails before its stop */
    uint64_t final;          /* where its lock call moved its stop */
} Cap;

typedef struct Locker
{
    Log *log;
    bool refuse;
} Locker;

static bool
take_lock(void *ctx, uint64_t *final_lsn, Err *err)
{
    Locker *l = ctx;

    if (l->refuse)
        return err_set(err, EC_PG_QUERY, "lock timeout");
    log_ev(l->log, "locked");
    *final_lsn = FINAL;
    return true;
}

/* MigrateCatchUp: a child waits for its parent's stop before it reads. */
static bool
capture(void *ctx, MigrateSwitchLock lock, void *lock_ctx, Err *err)
{
    Cap *c = ctx;
    char ev[24];
    uint64_t stop = 0x100;

    if (c->fail_early)
        return err_set(err, EC_PG_CONNECT, "%s: connection lost", c->name);
    if (c->child && !migrate_catch_up_parent_caught_up(lock_ctx, err))
        return false;
    if (!c->child)
        (void) usleep(30000); /* the parent's stretch up to its stop takes a while */
    (void) snprintf(ev, sizeof ev, "%s at stop", c->name);
    log_ev(c->log, ev);
    if (!lock(lock_ctx, &stop, err))
        return false;
    c->final = stop;
    (void) snprintf(ev, sizeof ev, "%s at final", c->name);
    log_ev(c->log, ev);
    return true;
}

static void
test_children_read_after_the_parent_and_finish_after_it(void **state)
{
    Log log = {.n = 0};
    Cap p = {&log, "p", false, false, 0};
    Cap c1 = {&log, "c1", true, false, 0};
    Cap c2 = {&log, "c2", true, false, 0};
    void *kids[2] = {&c1, &c2};
    Locker lk = {&log, false};
    Err err = {0};

    (void) state;
    pthread_mutex_init(&log.mu, NULL);
    assert_true(migrate_catch_up_together(capture, &p, kids, 2, take_lock, &lk, &err));
    assert_int_equal(log.n, 7);
    /* no child reached its stop (read anything) before the parent had */
    assert_true(at(&log, "p at stop") < at(&log, "c1 at stop"));
    assert_true(at(&log, "p at stop") < at(&log, "c2 at stop"));
    /* the lock once every child waited at its stop */
    assert_true(at(&log, "c1 at stop") < at(&log, "locked"));
    assert_true(at(&log, "c2 at stop") < at(&log, "locked"));
    /* the parent up to the final position first, then the children */
    assert_true(at(&log, "locked") < at(&log, "p at final"));
    assert_true(at(&log, "p at final") < at(&log, "c1 at final"));
    assert_true(at(&log, "p at final") < at(&log, "c2 at final"));
    assert_true(p.final == FINAL && c1.final == FINAL && c2.final == FINAL);
    pthread_mutex_destroy(&log.mu);
}

/* The lock refused (a timeout, retried by the switch): its error is the
 * one given, and no capture goes past its stop. */
static void
test_a_refused_lock_ends_every_capture_at_its_stop(void **state)
{
    Log log = {.n = 0};
    Cap p = {&log, "p", false, false, 0};
    Cap c1 = {&log, "c1", true, false, 0};
    void *kids[1] = {&c1};
    Locker lk = {&log, true};
    Err err = {0};

    (void) state;
    pthread_mutex_init(&log.mu, NULL);
    assert_false(migrate_catch_up_together(capture, &p, kids, 1, take_lock, &lk, &err));
    assert_string_equal(err.msg, "lock timeout");
    assert_int_equal(at(&log, "p at final"), -1);
    assert_int_equal(at(&log, "c1 at final"), -1);
    pthread_mutex_destroy(&log.mu);
}

/* A child's capture that fails before its stop: no lock, its error given,
 * the parent's capture stops at its own stop. */
static void
test_a_child_failing_first_gives_its_error_and_no_lock(void **state)
{
    Log log = {.n = 0};
    Cap p = {&log, "p", false, false, 0};
    Cap c1 = {&log, "c1", true, true, 0};
    void *kids[1] = {&c1};
    Locker lk = {&log, false};
    Err err = {0};

    (void) state;
    pthread_mutex_init(&log.mu, NULL);
    assert_false(migrate_catch_up_together(capture, &p, kids, 1, take_lock, &lk, &err));
    assert_string_equal(err.msg, "c1: connection lost");
    assert_int_equal(at(&log, "locked"), -1);
    assert_int_equal(at(&log, "p at final"), -1);
    pthread_mutex_destroy(&log.mu);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_children_read_after_the_parent_and_finish_after_it),
        cmocka_unit_test(test_a_refused_lock_ends_every_capture_at_its_stop),
        cmocka_unit_test(test_a_child_failing_first_gives_its_error_and_no_lock),
    };
    return cmocka_run_group_tests_name("migrate_childswitch", tests, NULL, NULL);
}
