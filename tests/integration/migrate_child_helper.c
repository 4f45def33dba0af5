/*
 * Drives migrate_child.h for t_migrate_child.sh until `v7fill migrate` calls it.
 * The child's database is the libpq environment (PG* variables).
 *
 *   STEP SCHEMA TABLE FK INTO_SCHEMA INTO_TABLE MAP_TABLE KEY_TYPE [MAP_CONNINFO]
 *
 * STEP: prepare | fill | constrain | all (the three in turn) | keysback (the
 * switch back's <fk> from the map: migrate_childkeys.h; the legacy table is
 * $LEGACY_TABLE, quoted, keyed by $LEGACY_KEY) | settle (one pass over the
 * rows still NULL, as --follow's passes; with $STOP_AFTER_BATCHES=N its stop
 * callback says stop once N batches have run) | keep (--follow's passes,
 * migrate_childkeeper.h, started, stopped after $KEEP_MS ms; prints stop_ms,
 * how long the stop took).  With MAP_CONNINFO the map is in that other
 * database (the migration's two-database form).
 * Prints the statistics as name=value lines; on failure error=, detail=, hint=
 * and sqlstate= lines and the exit status v7fill would use.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "v7fill/migrate_child.h"
#include "v7fill/migrate_childkeeper.h"
#include "v7fill/migrate_childkeys.h"
#include "v7fill/monotime.h"

static PgConn *C, *M;
static int stop_after = -1; /* settle: batches before the stop callback says stop */

static bool
stop_after_batches(void *arg)
{
    int *asked = arg;

    return stop_after >= 0 && (*asked)++ >= stop_after;
}

static int
failed(const Err *err)
{
    if (M != C)
        pg_close(M);
    pg_close(C);
    /* name=value lines, as the statistics */
    printf("error=%s\ndetail=%s\nhint=%s\nsqlstate=%s\n", err->msg, err->detail, err->hint,
           err->sqlstate);
    return err_exit_status(err->code);
}

static void
print_stats(const ChildStats *st)
{
    printf("rows=%llu\nfilled=%llu\nnull_keys=%llu\norphans=%llu\nbatches=%llu\npasses=%llu\n"
           "lock_retries=%llu\nlongest_wait_ms=%lld\norphan_examples=%s\nfk_added=%d\n"
           "fk_validated=%d\n",
           (unsigned long long) st->rows, (unsigned long long) st->filled,
           (unsigned long long) st->null_keys, (unsigned long long) st->orphans,
           (unsigned long long) st->batches, (unsigned long long) st->passes,
           (unsigned long long) st->lock_retries, (long long) st->longest_wait_ms,
           st->orphan_examples, st->fk_added, st->fk_validated);
}

int
main(int argc, char **argv)
{
    MigrateSpec spec;
    MigrateChild ch;
    ChildStats st = {0};
    Err err = {0};
    const char *step;
    int lock_ms = 1000;

    if (argc < 9 || argc > 10)
    {
        fprintf(stderr, "usage: %s prepare|fill|constrain|all|keysback|settle|keep SCHEMA TABLE FK INTO_SCHEMA "
                        "INTO_TABLE MAP_TABLE KEY_TYPE [MAP_CONNINFO]\n",
                argv[0]);
        return 2;
    }
    if (getenv("LOCK_TIMEOUT_MS"))
        lock_ms = atoi(getenv("LOCK_TIMEOUT_MS"));
    memset(&spec, 0, sizeof spec);
    memset(&ch, 0, sizeof ch);
    step = argv[1];
    (void) snprintf(ch.schema, sizeof ch.schema, "%s", argv[2]);
    (void) snprintf(ch.table, sizeof ch.table, "%s", argv[3]);
    (void) snprintf(ch.fk_column, sizeof ch.fk_column, "%s", argv[4]);
    (void) snprintf(spec.into_schema, sizeof spec.into_schema, "%s", argv[5]);
    (void) snprintf(spec.into_table, sizeof spec.into_table, "%s", argv[6]);
    (void) snprintf(spec.map_table, sizeof spec.map_table, "%s", argv[7]);
    (void) snprintf(spec.key_type, sizeof spec.key_type, "%s", argv[8]);
    spec.children = &ch;
    spec.nchildren = 1;

    if (!pg_connect("", &C, &err))
        return failed(&err);
    M = C;
    if (argc == 10)
    {
        /* The child is in the "source" database, the map in the target's. */
        (void) snprintf(spec.source_conninfo, sizeof spec.source_conninfo, "%s", "(PG environment)");
        if (!pg_connect(argv[9], &M, &err))
            return failed(&err);
    }
    if ((strcmp(step, "prepare") == 0 || strcmp(step, "all") == 0) &&
        !migrate_child_prepare(C, &spec, &ch, &err))
        return failed(&err);
    if (strcmp(step, "fill") == 0 || strcmp(step, "all") == 0)
    {
        if (!migrate_child_fill(C, M, &spec, &ch, lock_ms, &st, &err))
            return failed(&err);
    }
    if (strcmp(step, "settle") == 0)
    {
        int asked = 0;

        if (getenv("STOP_AFTER_BATCHES"))
            stop_after = atoi(getenv("STOP_AFTER_BATCHES"));
        if (!migrate_child_settle(C, M == C ? NULL : M, &spec, &ch, lock_ms, stop_after_batches,
                                  &asked, &st, &err))
            return failed(&err);
    }
    if (strcmp(step, "keep") == 0)
    {
        ChildKeeper *k = NULL;
        ChildKeeperStats ks;
        int ms = getenv("KEEP_MS") ? atoi(getenv("KEEP_MS")) : 3000;
        int64_t t0;

        if (!migrate_child_keeper_start(C, M, &spec, lock_ms, &k, &err))
            return failed(&err);
        (void) usleep((useconds_t) ms * 1000);
        t0 = monotime_ms();
        migrate_child_keeper_stop(k, &ks);
        printf("stop_ms=%lld\nkeeper_passes=%llu\nkeeper_filled=%llu\n",
               (long long) (monotime_ms() - t0), (unsigned long long) ks.passes,
               (unsigned long long) ks.filled);
    }
    if (strcmp(step, "keysback") == 0)
    {
        uint64_t rows = 0;
        const char *lk = getenv("LEGACY_KEY");

        (void) snprintf(spec.key, sizeof spec.key, "%s", lk ? lk : "id");
        if (!migrate_child_keys_back(C, M == C ? NULL : M, &spec, &ch,
                                     getenv("LEGACY_TABLE") ? getenv("LEGACY_TABLE") : "", &rows,
                                     &err))
            return failed(&err);
        printf("keys_set=%llu\n", (unsigned long long) rows);
    }
    if ((strcmp(step, "constrain") == 0 || strcmp(step, "all") == 0) &&
        !migrate_child_constrain(C, &spec, &ch, lock_ms, &st, &err))
        return failed(&err);
    print_stats(&st);
    if (M != C)
        pg_close(M);
    pg_close(C);
    return 0;
}
