/*
 * The way back (`v7fill migrate --reverse [--follow]`) of a migration with
 * --child-mode migrate children: the legacy parent and each legacy child kept
 * current from the new tables, each from its own reverse slot
 * ("<slot>_rev", recorded by the switch in v7fill.migrate_reverse), in rounds
 * that keep the foreign key's order: a stop position L (what the database had
 * flushed when the round began), the parent's way back applied up to L, then
 * each child's up to the same L.  A child change at or before L references
 * a parent committed before it, so the parent row (and its map row, through
 * which the child's <fk>_uuid is translated to the legacy key) is already in
 * the legacy table when the child row arrives.  Each table's position commits
 * with its rows: a kill leaves every child at or behind the parent's position,
 * and the next round goes on from there.
 *
 * Two databases: db is the target (the slots, the new tables, the maps, the
 * state), legacy the source's connection writing the legacy tables; a
 * child's <fk> is looked up in the parent's map on db.  One database: legacy
 * NULL.
 */
#ifndef V7FILL_MIGRATE_CHILDREVERSE_H
#define V7FILL_MIGRATE_CHILDREVERSE_H

#include <stdbool.h>

#include "v7fill/err.h"
#include "v7fill/migrate.h"
#include "v7fill/migrate_switch.h"
#include "v7fill/pg.h"

/* One round (until caught up with what was flushed when it started), or with
 * follow rounds until SIGINT/SIGTERM, every table's stream kept open from one
 * round to the next (each child's on its own connections, in a thread).  *st sums the parent's and the
 * children's counts; st->applied_lsn is the last round's stop position once
 * every table reached it.  Each child's own migration is stored in phase
 * reverse. */
V7FILL_MUST_CHECK bool migrate_childreverse(PgConn *db, PgConn *legacy, const MigrateSpec *spec,
                                            bool follow, ReverseStats *st, Err *err);

/* Switching back, before the lock: one round up to stop (strictly before
 * it) on apply, the parent's way back first, then each child's;
 * st->caught_up when every table reached stop.  The phases are left to the
 * switch. */
V7FILL_MUST_CHECK bool migrate_childreverse_upto(PgConn *apply, PgConn *legacy,
                                                 const MigrateSpec *spec, uint64_t stop,
                                                 ReverseStats *st, Err *err);

/* Switching back: the parent's way back and (migrate-mode) each child's,
 * each on its own connections (the children's made like apply's and
 * legacy's), up to stop (strictly before it) with their streams left open;
 * then the parent's calls lock(lock_ctx, &final, err) once, which takes the
 * lock and reads the final position, and every table applies up to it, the
 * parent first.  No stream starts under the lock.  *st sums every table's
 * counts (st->caught_up: all reached the final position); *under only what
 * was applied after the lock was taken.  ids: NULL, or spec->nchildren
 * collections, one per child, that get the ids of the rows each child's way
 * back inserted or updated under the lock. */
V7FILL_MUST_CHECK bool migrate_childreverse_switch(PgConn *apply, PgConn *legacy,
                                                   const MigrateSpec *spec, uint64_t stop,
                                                   ReverseIds *ids, MigrateSwitchLock lock,
                                                   void *lock_ctx, ReverseStats *st,
                                                   ReverseStats *under, Err *err);

#endif /* V7FILL_MIGRATE_CHILDREVERSE_H */
