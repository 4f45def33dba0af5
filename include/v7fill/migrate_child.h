/*
 * `v7fill migrate`, children in expand mode: the child keeps its table and
 * gains <fk>_uuid, the parent's new id, filled from the map
 * (<into>_id_map: legacy_id -> id) and then tied to <into>(id) by a
 * foreign key.  Three steps, each rerunnable:
 *
 *   prepare    <fk>_uuid added; in the same database a BEFORE INSERT OR
 *              UPDATE OF <fk> trigger (function v7fill."child_uuid_<oid>_<attnum>")
 *              keeps it current for rows the application writes meanwhile
 *              (NULL while the parent has no map row yet: the next fill
 *              pass sets it, or the map's trigger: migrate_child_hook).  Two
 *              databases: the map is out of reach, so fill passes keep it
 *              current; a BEFORE UPDATE OF <fk> trigger (the same names) makes
 *              it NULL when a write changes a non-NULL <fk> and leaves the
 *              uuid, so it never names the old parent (the next pass over
 *              the rows still NULL sets it).
 *   fill       batches along the child's primary key, each write its own
 *              short transaction under SET LOCAL lock_timeout (retried on
 *              55P03 / 40P01), then passes over the rows still NULL until a
 *              pass changes nothing; orphans and NULL keys counted apart
 *   constrain  FOREIGN KEY (<fk>_uuid) REFERENCES <into>(id) NOT VALID, then
 *              VALIDATE in its own transaction (same database only)
 *
 * Whether the child and the map share a database: spec->source_conninfo is
 * "" (migrate_child_same_database).
 */
#ifndef V7FILL_MIGRATE_CHILD_H
#define V7FILL_MIGRATE_CHILD_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/migrate.h"
#include "v7fill/pg.h"

/* Rows per fill batch (one read, one write transaction): the first batch's, then at most
 * the second; halved while a write takes over a quarter of the lock timeout, doubled
 * while it takes under an eighth. */
#define MIGRATE_CHILD_FIRST_BATCH_ROWS 1000
#define MIGRATE_CHILD_BATCH_ROWS 5000

/* Switched, expand mode: the uuids a child row was moved to by <fk>_uuid
 * alone whose NOT NULL <fk> the way back's rule could not set (between two
 * databases always; in one, when the map or the legacy table lacked the key
 * then), by the child's oid; on the child's database.  Switching back sets
 * those rows' <fk> from the map (migrate_childkeys.h). */
#define MIGRATE_CHILD_MOVED_TABLE "v7fill.child_moved"
/* lock_timeout of prepare's DDL (ADD COLUMN, CREATE TRIGGER): a writer queued
 * behind it waits at most this long per attempt. */
#define MIGRATE_CHILD_DDL_LOCK_TIMEOUT_MS 500
/* Attempts of one batch or DDL step that meets lock_timeout or a deadlock. */
#define MIGRATE_CHILD_ATTEMPTS 50
/* Passes over the rows still NULL after the first full pass. */
#define MIGRATE_CHILD_MAX_PASSES 10

typedef struct ChildStats
{
    uint64_t rows;          /* rows of the child seen by the first (full) pass */
    uint64_t filled;        /* rows whose <fk>_uuid this call set or corrected */
    uint64_t null_keys;     /* rows with <fk> NULL (first pass) */
    uint64_t orphans;       /* rows with <fk> not NULL and no map row (last pass) */
    uint64_t batches;       /* write transactions committed */
    int64_t longest_wait_ms; /* longest write transaction of ours (BEGIN .. COMMIT, failed
                              * attempts included): bounds both our lock waits and how long
                              * a writer could wait on our row locks */
    char orphan_examples[256]; /* the first orphan keys, comma-separated */
    bool fk_added;          /* constrain: the foreign key exists (added now or before) */
    bool fk_validated;      /* constrain: it is validated */
    /* extensions */
    uint64_t passes;        /* passes made by fill (1 = the full pass only) */
    bool full_pass;         /* fill read every row (else: only the rows still NULL, and
                             * rows, null_keys counted by one read-only statement) */
    uint64_t lock_retries;  /* attempts that met lock_timeout or a deadlock */
} ChildStats;

/* True when the child and the map are in one database (spec->source_conninfo ""). */
bool migrate_child_same_database(const MigrateSpec *spec);

/* <fk>_uuid uuid added (lock_timeout MIGRATE_CHILD_DDL_LOCK_TIMEOUT_MS, retried)
 * and its trigger (same database: keeping it current; two: making it NULL on
 * a key change).  Nothing is locked when
 * both are present already.  A trigger made again on a column that exists
 * (key changes went unseen meanwhile): a validated foreign key on <fk>_uuid is
 * dropped and added again NOT VALID in the same transaction, so that the next
 * fill reads every row (migrate_child_can_catch_up) and constrain validates. */
V7FILL_MUST_CHECK bool migrate_child_prepare(PgConn *conn, const MigrateSpec *spec,
                                             const MigrateChild *ch, Err *err);

/* Whether a rerun's fill may skip the full pass (migrate_child_catch_up):
 * same database, the migration never switched (spec->switch_lsn 0), the
 * child's trigger on <fk> present and enabled, and a validated foreign key
 * from <fk>_uuid to <into>.  *why: the first condition not met (a static
 * string), "" when all are. */
V7FILL_MUST_CHECK bool migrate_child_can_catch_up(PgConn *conn, const MigrateSpec *spec,
                                                  const MigrateChild *ch, bool *can,
                                                  const char **why, Err *err);

/* Same database: the trigger on the parent's map (migrate_maptrig.h,
 * MAPTRIG_NULL_ONLY) giving child rows with <fk> = the map row's legacy_id
 * and <fk>_uuid NULL their uuid when the capture writes the map row (a child
 * inserted in its new parent's transaction), in that transaction; when the
 * child is locked (the switch) it records the key in MAPTRIG_LATE_TABLE
 * instead.  Made once the parent's copy is done (the copy writes the map in
 * bulk), before the fill; nothing is locked when it exists.  The child's
 * index on <fk> (the look-up of the trigger and of migrate_child_set_late)
 * is built CONCURRENTLY when missing (a partitioned child: a warning).  Two
 * databases: nothing. */
V7FILL_MUST_CHECK bool migrate_child_hook(PgConn *conn, const MigrateSpec *spec,
                                          const MigrateChild *ch, Err *err);

/* In the caller's transaction (the switch): the map's trigger dropped (its
 * pending events run first), so that later writes of the map (the way back)
 * never set <fk>_uuid on live rows by their old <fk>. */
V7FILL_MUST_CHECK bool migrate_child_unhook(PgConn *conn, const MigrateSpec *spec,
                                            const MigrateChild *ch, Err *err);

/* The way back's rule on the child (a BEFORE UPDATE OF <fk>_uuid trigger that
 * prepare makes, `v7fill_<fk>_uuid_back`, function
 * v7fill."child_back_<oid>_<attnum>"()), switched in the caller's
 * transaction without a lock on the child (its function replaced).
 * legacy_q NULL (before the switch, and switched back): it does nothing.
 * Otherwise (the switch, legacy_q the legacy table under its name after it):
 * a write that moves a row to another parent by <fk>_uuid alone, or clears
 * it, makes <fk> the map's legacy key of the new uuid where the legacy table
 * has it, else NULL (same database), or NULL (two databases; switching back
 * fills it from the map).  A NOT NULL <fk> it cannot set keeps its value and
 * the new uuid is recorded in MIGRATE_CHILD_MOVED_TABLE (made here when
 * missing).  A child prepared by an earlier version has no such trigger: a
 * warning, nothing done. */
V7FILL_MUST_CHECK bool migrate_child_back_rule(PgConn *conn, const MigrateSpec *spec,
                                               const MigrateChild *ch, const char *legacy_q,
                                               Err *err);

/* Same database, in the caller's transaction (the switch, under its lock,
 * once the capture's last changes are committed, before the renames): the
 * children of the keys the map's trigger recorded (it met the lock) get
 * <fk>_uuid from the map where the parent's new row exists, and the keys are
 * deleted.  Its cost is an index look-up per key recorded, not a scan of
 * the child.  *rows: the rows set.  Two databases: nothing. */
V7FILL_MUST_CHECK bool migrate_child_set_late(PgConn *conn, const MigrateSpec *spec,
                                              const MigrateChild *ch, uint64_t *rows, Err *err);

/* Before the switch's lock, in short transactions of its own: in the same
 * database the keys recorded (as migrate_child_set_late), then one pass over
 * the rows whose <fk>_uuid is still NULL, as the fill's (a read along the
 * primary key, writes in short batches): what the triggers could not reach
 * (a fill cut short by a kill).  Two databases (map: the map's; NULL: conn):
 * that pass, the keys looked up in the map there: the rows written since the
 * last fill, which no trigger reaches (also once more after the switch).
 * stop (may be NULL), asked between batches as SIGINT/SIGTERM are: true ends
 * the pass with EC_INTERRUPTED (a caller that stops it from another thread
 * also cancels the statement under way). */
/* The child's partial index <child>_<fk>_unset, on <fk>_uuid of the rows
 * whose <fk> is NULL and <fk>_uuid is not (the rows switching back must give
 * a key), built CONCURRENTLY when missing; also made by the first fill.  Not
 * on a partitioned child; a failed build only warns. */
V7FILL_MUST_CHECK bool migrate_child_back_index(PgConn *conn, const MigrateSpec *spec,
                                                const MigrateChild *ch, Err *err);

V7FILL_MUST_CHECK bool migrate_child_settle(PgConn *conn, PgConn *map, const MigrateSpec *spec,
                                            const MigrateChild *ch, int lock_timeout_ms,
                                            bool (*stop)(void *), void *stop_arg,
                                            ChildStats *st, Err *err);

/* conn: the database holding the child; map: a connection to the map's
 * database (may be the same PgConn).  Fills <fk>_uuid = map.id where it
 * differs (first, same database, the keys the map's trigger recorded);
 * statistics in *st (zeroed first). */
V7FILL_MUST_CHECK bool migrate_child_fill(PgConn *conn, PgConn *map, const MigrateSpec *spec,
                                          const MigrateChild *ch, int lock_timeout_ms,
                                          ChildStats *st, Err *err);

/* A rerun's fill: when migrate_child_can_catch_up (and not full), the keys
 * the map's trigger recorded and one pass over the rows still NULL (<fk>
 * set, <fk>_uuid NULL: orphans and rows the triggers could not reach), then
 * rows and null_keys by one count of the child (a sequential scan, no
 * join); st->full_pass false.  Otherwise migrate_child_fill. */
V7FILL_MUST_CHECK bool migrate_child_catch_up(PgConn *conn, PgConn *map, const MigrateSpec *spec,
                                              const MigrateChild *ch, int lock_timeout_ms,
                                              bool full, ChildStats *st, Err *err);

/* The foreign key <child>_<fk>_uuid_fkey added NOT VALID, then validated in
 * a separate transaction; an existing one (any name, same column and
 * referenced table) is used.  Rows with <fk>_uuid NULL (orphans, NULL keys)
 * do not violate it.  Sets st->fk_added, st->fk_validated and (the ADD's
 * transaction) st->longest_wait_ms; the rest of *st is left as fill set it.
 * A failed validation (23503) names the first offending key and leaves the key
 * NOT VALID.  Run it once the parent is copied: a set <fk>_uuid must find its
 * row in <into>.  Two databases, or a partitioned child (PostgreSQL 15 has no
 * NOT VALID foreign key on it): EC_CONFIG, with the reason. */
V7FILL_MUST_CHECK bool migrate_child_constrain(PgConn *conn, const MigrateSpec *spec,
                                               const MigrateChild *ch, int lock_timeout_ms,
                                               ChildStats *st, Err *err);

#endif /* V7FILL_MIGRATE_CHILD_H */
