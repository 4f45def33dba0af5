/*
 * `v7fill migrate --switch` of a migration with --child-mode migrate
 * children: the parent's capture and every child's (each its own slot) run
 * together, each on its own thread and connection.  Only once ALL of them
 * are caught up is the switch's lock taken (lock, once: the parent and the
 * children's source tables); the parent's capture then applies up to the one
 * final LSN (source and children are one database) and ends, and then the
 * children's, side by side with each other.  No lock covers a capture's
 * start.  Switching back runs the ways back through the same gate
 * (migrate_childreverse_switch), each child's reading only once the
 * parent's is caught up (migrate_catch_up_parent_caught_up).
 */
#ifndef V7FILL_MIGRATE_CHILDSWITCH_H
#define V7FILL_MIGRATE_CHILDSWITCH_H

#include <stdbool.h>
#include <stddef.h>

#include "v7fill/err.h"
#include "v7fill/migrate_switch.h"

/* catch_up(parent_ctx, ...) for the parent and catch_up(child_ctx[i], ...)
 * for each of the n children.  lock NULL: each caught up in turn, no lock.
 * Otherwise as MigrateCatchUp: lock(lock_ctx) is called once, when every
 * capture is caught up; a failed lock (its err, e.g. 55P03) or a failed
 * capture ends all of them; the parent's error comes first. */
V7FILL_MUST_CHECK bool migrate_catch_up_together(MigrateCatchUp catch_up, void *parent_ctx,
                                                 void *const *child_ctx, size_t n,
                                                 MigrateSwitchLock lock, void *lock_ctx,
                                                 Err *err);

/* For captures that must apply nothing their parent has not (switching
 * back: a child's way back translates its parent through the map rows the
 * parent's writes): called by a child's catch_up once its stream is open,
 * before it reads anything, with the lock_ctx it was given; waits until the
 * parent's capture is caught up (at its first stop).  False when no lock
 * will come. */
V7FILL_MUST_CHECK bool migrate_catch_up_parent_caught_up(void *lock_ctx, Err *err);

#endif /* V7FILL_MIGRATE_CHILDSWITCH_H */
