/*
 * A migration's stored spec in the target: one row per --into table in
 * v7fill.migration (source conninfo without its password, the source table,
 * key and its type, time column, map, publication, slot, children, child
 * mode, phase, switch LSN, legacy table, the windows' zone).  `migrate --into X --status |
 * --verify | --switch | --reverse` find the migration here.
 */
#ifndef V7FILL_MIGRATE_STATE_H
#define V7FILL_MIGRATE_STATE_H

#include <stdbool.h>

#include "v7fill/err.h"
#include "v7fill/migrate.h"
#include "v7fill/pg.h"

/* Create v7fill.migration if missing, or add what an older version's lacks
 * (under v7fill's setup lock). */
V7FILL_MUST_CHECK bool migrate_state_setup(PgConn *c, Err *err);
/* The migration into into_schema.into_table: *found false (and *out zeroed)
 * when there is none (or no v7fill.migration at all: nothing is created).
 * out->children is allocated: migrate_spec_free. */
V7FILL_MUST_CHECK bool migrate_state_get(PgConn *target, const char *into_schema,
                                         const char *into_table, MigrateSpec *out, bool *found,
                                         Err *err);
/* Insert or replace the whole row (keyed by into_schema, into_table);
 * source_conninfo is stored without its password whatever it holds. */
V7FILL_MUST_CHECK bool migrate_state_put(PgConn *c, const MigrateSpec *s, Err *err);
/* The windows' zone (s->window_tz), stored by the first run after
 * migrate_state_setup (later forms keep it; an older version's table has no
 * such column until then). */
V7FILL_MUST_CHECK bool migrate_state_put_window_tz(PgConn *c, const MigrateSpec *s, Err *err);
/* Only the phase (and updated_at); the row must exist (else EC_INTERNAL). */
V7FILL_MUST_CHECK bool migrate_state_set_phase(PgConn *c, const MigrateSpec *s, MigratePhase p,
                                               Err *err);

#endif /* V7FILL_MIGRATE_STATE_H */
