/*
 * Drives migrate_switch / migrate_reverse for t_migrate_switch.sh until
 * `v7fill migrate --into X --switch|--reverse` exists (the lead rewires the
 * test to the command).  The migration is fixed: public.orders (key id
 * bigint) into public.orders_v7, child public.order_items(order_id).
 *
 *   helper switch CONNINFO PHASE [LOCK_MS]  PHASE: follow | switched | reverse
 *   helper reverse CONNINFO [follow]
 *   helper hammer CONNINFO SECONDS SQL      the statement in a loop: longest wait
 *
 * MSW_SOURCE=CONNINFO: two databases, the source there (CONNINFO above is the
 * target).
 *
 * The switch's catch_up is trivial: the capture's slot advanced to the final
 * LSN on a second connection (the only write during the test is the
 * writer's row, which the test leaves out of the comparisons until the way
 * back copies it); CATCHUP_MS: it first sleeps that long (a slow capture:
 * writers wait for it, readers must not).  MSW_FLUSHED=1: just before the
 * lock, a transaction commits asynchronously (its commit record waits for the
 * WAL writer); under the lock, the catch_up prints final_flushed=t when the
 * WAL up to the final position is on disk (what a walsender can send), else
 * final_flushed=f.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "v7fill/err.h"
#include "v7fill/interrupt.h"
#include "v7fill/migrate_switch.h"
#include "v7fill/pg.h"
#include "v7fill/pgoutput.h"

static MigrateChild child = {"public", "order_items", "order_id"};

static void
spec_init(MigrateSpec *s, const char *phase)
{
    memset(s, 0, sizeof *s);
    strcpy(s->from_schema, "public");
    strcpy(s->from_table, "orders");
    strcpy(s->key, "id");
    strcpy(s->key_type, "bigint");
    strcpy(s->time_column, "created_at");
    strcpy(s->into_schema, "public");
    strcpy(s->into_table, "orders_v7");
    strcpy(s->map_table, "orders_v7_id_map");
    strcpy(s->publication, "v7fill_orders_v7");
    strcpy(s->slot, "v7fill_orders_v7");
    s->children = &child;
    s->nchildren = 1;
    s->phase = strcmp(phase, "switched") == 0  ? MIGRATE_PHASE_SWITCHED
               : strcmp(phase, "reverse") == 0 ? MIGRATE_PHASE_REVERSE
                                               : MIGRATE_PHASE_FOLLOW;
}

static const char *
phase_text(MigratePhase p)
{
    switch (p)
    {
        case MIGRATE_PHASE_SWITCHED:
            return "switched";
        case MIGRATE_PHASE_REVERSE:
            return "reverse";
        case MIGRATE_PHASE_FOLLOW:
            return "follow";
        default:
            return "other";
    }
}

static bool
catch_up(void *ctx, MigrateSwitchLock lock, void *lock_ctx, Err *err)
{
    PgConn *side = ctx;
    char at[PGO_LSN_TEXT_SIZE];
    const char *p[1] = {at};
    uint64_t final_lsn = 0;
    bool flushed = getenv("MSW_FLUSHED") != NULL;
    PGresult *res;

    if (flushed && !pg_exec(side,
                            "BEGIN; SET LOCAL synchronous_commit = off; "
                            "SELECT pg_catalog.txid_current(); COMMIT",
                            err))
        return false;
    if (!lock(lock_ctx, &final_lsn, err))
        return false;
    pgo_lsn_format(final_lsn, at);
    if (flushed)
    {
        if (!pg_query(side, "SELECT pg_catalog.pg_current_wal_flush_lsn() >= $1::pg_lsn", 1, p,
                      &res, err))
            return false;
        printf("final_flushed=%s\n", PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    if (getenv("CATCHUP_MS"))
        (void) usleep((useconds_t) atoi(getenv("CATCHUP_MS")) * 1000);
    return pg_exec_params(side,
                          "SELECT pg_replication_slot_advance('v7fill_orders_v7', $1::pg_lsn)",
                          1, p, err);
}

static int
fail(const Err *e)
{
    fprintf(stderr, "error: %s%s%s\n", e->msg, e->sqlstate[0] ? " SQLSTATE " : "", e->sqlstate);
    if (e->hint[0])
        fprintf(stderr, "hint: %s\n", e->hint);
    return e->code == EC_CONFIG ? 3 : 5;
}

static double
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static int
hammer(const char *conninfo, double seconds, const char *sql)
{
    PgConn *c;
    Err e = {0};
    double end, worst = 0;
    long n = 0, errors = 0;

    if (!pg_connect(conninfo, &c, &e))
        return fail(&e);
    end = now_ms() + seconds * 1000;
    while (now_ms() < end)
    {
        double t0 = now_ms(), d;

        if (!pg_exec(c, sql, &e))
        {
            errors++;
            fprintf(stderr, "hammer: %s\n", e.msg);
        }
        d = now_ms() - t0;
        if (d > worst)
            worst = d;
        n++;
    }
    printf("max_ms=%.0f statements=%ld errors=%ld\n", worst, n, errors);
    pg_close(c);
    return 0;
}

int
main(int argc, char **argv)
{
    PgConn *c = NULL, *side = NULL, *src = NULL;
    const char *source = getenv("MSW_SOURCE"); /* two databases: the source's conninfo */
    MigrateSpec spec;
    Err e = {0};
    int rc = 0;

    if (argc >= 5 && strcmp(argv[1], "hammer") == 0)
        return hammer(argv[2], atof(argv[3]), argv[4]);
    if (argc < 3)
    {
        fprintf(stderr, "usage: helper switch|reverse|hammer CONNINFO ...\n");
        return 2;
    }
    interrupt_install();
    if (!pg_connect(argv[2], &c, &e))
        return fail(&e);
    if (strcmp(argv[1], "switch") == 0 && argc >= 4)
    {
        SwitchStats st;
        char at[PGO_LSN_TEXT_SIZE];

        spec_init(&spec, argv[3]);
        if (source)
            (void) snprintf(spec.source_conninfo, sizeof spec.source_conninfo, "%s", source);
        if ((source && !pg_connect(source, &src, &e)) ||
            !pg_connect(source ? source : argv[2], &side, &e) ||
            !migrate_switch(src ? src : c, c, &spec, argc >= 5 ? atoi(argv[4]) : 1000, 10, catch_up, side,
                            &st, &e))
            rc = fail(&e);
        else
        {
            pgo_lsn_format(spec.switch_lsn, at);
            printf("attempts=%d lock_held_ms=%" PRId64 " already=%d back=%d applied=%" PRIu64
                   " phase=%s legacy=%s switch_lsn=%s\n",
                   st.attempts, st.lock_held_ms, st.already, st.back, st.applied_at_switch,
                   phase_text(spec.phase), spec.legacy_table, at);
        }
    }
    else if (strcmp(argv[1], "reverse") == 0)
    {
        ReverseStats st;

        spec_init(&spec, "switched");
        if (source)
            (void) snprintf(spec.source_conninfo, sizeof spec.source_conninfo, "%s", source);
        if ((source && !pg_connect(source, &src, &e)) ||
            !migrate_reverse(c, src, &spec, argc >= 4 && strcmp(argv[3], "follow") == 0, &st,
                             &e))
            rc = fail(&e);
        else
            printf("transactions=%" PRIu64 " inserted=%" PRIu64 " updated=%" PRIu64
                   " deleted=%" PRIu64 " missing=%" PRIu64 " phase=%s\n",
                   st.transactions, st.inserted, st.updated, st.deleted, st.missing,
                   phase_text(spec.phase));
    }
    else
        rc = 2;
    pg_close(side);
    pg_close(src);
    pg_close(c);
    return rc;
}
