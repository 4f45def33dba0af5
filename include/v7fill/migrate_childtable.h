/*
 * `v7fill migrate --child-mode migrate`: each child becomes its own UUIDv7
 * table, migrated like the parent (its own target <child>_v7 in the parent's
 * into schema, map <child>_v7_id_map, publication and slot, stored as its own
 * v7fill.migration row), with its foreign key column kept under its name
 * (legacy values) and <fk>_uuid translated through the parent's map:
 *
 *   prepare    the child target created (the child's single integer primary
 *              key as legacy_id, its time column minting id), <fk>_uuid uuid,
 *              an index on <fk> and one on <fk>_uuid; a BEFORE INSERT OR
 *              UPDATE OF <fk> trigger on the child target setting <fk>_uuid
 *              from the parent's map (an insert keeps the uuid it gives when
 *              the map has none), and an AFTER INSERT OR UPDATE trigger on
 *              the parent's map setting it on child rows that arrived first
 *              (two slots have no common order).  Both SECURITY DEFINER with
 *              search_path pinned.
 *   sync       the child's own copy + capture (migrate_run on the child) until
 *              caught up
 *   constrain  FOREIGN KEY (<fk>_uuid) REFERENCES <parent into>(id) ON DELETE
 *              SET NULL DEFERRABLE INITIALLY DEFERRED (the parent's and the
 *              child's slots apply in no common order: a parent delete may be
 *              applied before its children's); NULL keys and orphans counted.
 */
#ifndef V7FILL_MIGRATE_CHILDTABLE_H
#define V7FILL_MIGRATE_CHILDTABLE_H

#include <stdbool.h>

#include "v7fill/err.h"
#include "v7fill/migrate.h"
#include "v7fill/migrate_child.h"
#include "v7fill/pg.h"

/* --follow with migrate-mode children: the pause between rounds (the parent's
 * slot, then each child's, each applied until caught up). */
#define MIGRATE_FOLLOW_ROUND_MS 500

/* ch->into_table when empty: <table>_v7 (EC_USAGE when too long for its map's name). */
V7FILL_MUST_CHECK bool migrate_childtable_name(MigrateChild *ch, Err *err);

/* The name of the foreign key constrain adds to the child target
 * <into_schema>.<child_into> (the parent's into schema, ch->into_table). */
void migrate_childtable_fkey_name(const char *into_schema, const char *child_into, char out[64]);

/* The spec of the child's own migration (as migrate_run stores it), from the
 * parent's: into <parent into schema>.<ch->into_table>.  key: the child's key
 * column (migrate_childtable_key). */
void migrate_childtable_options(const MigrateOptions *parent, const MigrateSpec *ps,
                                const MigrateChild *ch, const char *key, char from[160],
                                char into[160], MigrateOptions *out);

/* The child's single-column integer primary key on the source (EC_CONFIG with
 * the reason when it has none) and its time column (ch->time_column, else the
 * parent's name when the child has that column; EC_CONFIG otherwise). */
V7FILL_MUST_CHECK bool migrate_childtable_key(PgConn *src, const MigrateSpec *ps,
                                              const MigrateChild *ch, char key[64],
                                              char time_column[64], Err *err);

/* --dry-run: the child's key and time column checked, its plan appended to out. */
V7FILL_MUST_CHECK bool migrate_childtable_plan(PgConn *src, const MigrateSpec *ps,
                                               const MigrateChild *ch, Buf *out, Err *err);

/* The child's target, <fk>_uuid, its indexes and both triggers (idempotent). */
V7FILL_MUST_CHECK bool migrate_childtable_prepare(PgConn *src, PgConn *target,
                                                  const MigrateSpec *ps, const MigrateChild *ch,
                                                  Err *err);

/* The child's copy + capture until caught up (its own migrate_run); the
 * child's run is summed into *copy when not NULL. */
V7FILL_MUST_CHECK bool migrate_childtable_sync(PgConn *target, const MigrateOptions *o,
                                               const MigrateSpec *ps, const MigrateChild *ch,
                                               StreamStats *copy, Err *err);

/* Counts (rows, NULL keys, orphans: <fk> set, <fk>_uuid NULL) into *st
 * (zeroed first) and the foreign key added when missing. */
V7FILL_MUST_CHECK bool migrate_childtable_constrain(PgConn *target, const MigrateSpec *ps,
                                                    const MigrateChild *ch, ChildStats *st,
                                                    Err *err);

/* All of it for every child of ps (child_mode migrate): prepare, sync,
 * constrain; per-child counts in r->children. */
V7FILL_MUST_CHECK bool migrate_childtable_run_all(PgConn *src, PgConn *target,
                                                  const MigrateOptions *o, const MigrateSpec *ps,
                                                  MigrateResult *r, Err *err);

struct VerifyReport;

/* --verify of one child: its own migration's checks (rows with rejects, values
 * row by row through its own map, map, id time) appended to *out, then on the
 * child target "child keys" (every non-NULL <fk> has <fk>_uuid = the parent
 * map's id; a key without a map row must have it NULL), "orphans" (listed),
 * "NULL keys", "rejected parents" (child rows whose parent has a NULL or pre-1970 time:
 * listed, not a mismatch) and "join pairs" (legacy child ⋈ parent on <fk> against
 * <child_v7> ⋈ <parent_v7> on <fk>_uuid, as (child key, parent key) pairs, the children of
 * rejected parents and the child's own rows rejected for their time left out). */
V7FILL_MUST_CHECK bool migrate_childtable_verify(PgConn *src, PgConn *target,
                                                 const MigrateSpec *ps, const MigrateChild *ch,
                                                 struct VerifyReport *out, Err *err);

/* At the switch (under its lock): the trigger on the parent's map dropped.
 * It made up for the two forward slots' lack of order; after the switch the
 * way back writes the map, and the trigger would set <fk>_uuid on live child
 * rows by their stale legacy <fk>. */
V7FILL_MUST_CHECK bool migrate_childtable_unhook(PgConn *c, const MigrateSpec *ps,
                                                 const MigrateChild *ch, Err *err);
/* Switching back (under its lock, after the way back's last writes to the
 * map): the trigger on the parent's map made again, as before the switch (the
 * function is kept), for the capture that resumes. */
V7FILL_MUST_CHECK bool migrate_childtable_rehook(PgConn *c, const MigrateSpec *ps,
                                                 const MigrateChild *ch, Err *err);

/* The child target's links to its parent, as migrate_childtable_verify checks them ("child
 * keys", "orphans", "NULL keys", "rejected parents", "join pairs"), appended to *out; cs: the
 * child's own stored migration. */
V7FILL_MUST_CHECK bool migrate_childtable_verify_links(PgConn *src, PgConn *target,
                                                       const MigrateSpec *ps,
                                                       const MigrateChild *ch,
                                                       const MigrateSpec *cs,
                                                       struct VerifyReport *out, Err *err);

#endif /* V7FILL_MIGRATE_CHILDTABLE_H */
