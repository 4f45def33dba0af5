/*
 * `v7fill migrate --follow` with expand-mode children in another database
 * than the map: no trigger can reach the child rows the application writes
 * while the parent is followed (a trigger on the source cannot read the map
 * on the target), so a thread of its own, on connections of its own, makes
 * a pass over each child's rows whose <fk>_uuid is still NULL
 * (migrate_child_settle) every few seconds for as long as the parent's
 * stream runs.  The pause after a pass is MIGRATE_CHILD_KEEPER_PAUSE_FACTOR
 * times as long as the pass took, at least MIGRATE_CHILD_KEEPER_MIN_MS: the
 * passes take at most a fifth of one server session's time.  These passes
 * read the rows still NULL only, through a partial index of them that the
 * run's fill builds (migrate_child_fill); a key the application changes is
 * made NULL by the child's trigger, so the next pass reads it too.
 */
#ifndef V7FILL_MIGRATE_CHILDKEEPER_H
#define V7FILL_MIGRATE_CHILDKEEPER_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/migrate.h"
#include "v7fill/pg.h"

#define MIGRATE_CHILD_KEEPER_MIN_MS 1000
#define MIGRATE_CHILD_KEEPER_PAUSE_FACTOR 4

typedef struct ChildKeeper ChildKeeper;

typedef struct ChildKeeperStats
{
    uint64_t passes;   /* passes over every child */
    uint64_t filled;   /* child rows given their <fk>_uuid */
    uint64_t failures; /* passes that failed (each logged; the next one tries again) */
    int64_t longest_ms; /* the longest pass */
    int64_t busy_ms;    /* all passes together */
} ChildKeeperStats;

/* Starts the thread, with connections made like src (the children's
 * database) and map (the map's); spec must outlive migrate_child_keeper_stop. */
V7FILL_MUST_CHECK bool migrate_child_keeper_start(PgConn *src, PgConn *map,
                                                  const MigrateSpec *spec, int lock_timeout_ms,
                                                  ChildKeeper **out, Err *err);

/* Stops the thread (the statement of a pass under way cancelled, on the child's
 * or the map's connection; the pass ends before its next batch), closes its
 * connections. */
void migrate_child_keeper_stop(ChildKeeper *k, ChildKeeperStats *st);

#endif /* V7FILL_MIGRATE_CHILDKEEPER_H */
