/*
 * `v7fill migrate --switch` and `--reverse`: the cut-over of a migration
 * (migrate.h) and its way back.
 *
 * Switch (same database): one short transaction on the source with SET
 * LOCAL lock_timeout, retried with backoff on 55P03/40P01: the parent (and
 * its children) locked IN SHARE ROW EXCLUSIVE MODE (writers wait, readers go
 * on) by the capture once it runs caught up (the caller's catch_up, on its
 * own connection), the final LSN read and handed to the running capture as
 * its stop position, then ACCESS EXCLUSIVE on both tables for
 * the renames only: <from> -> <from>_legacy, <into> -> <from>; the new
 * table's legacy_id gets DEFAULT nextval(<the old key's sequence>).  The
 * reverse publication and slot (on the new table) are made before the lock,
 * and the reverse position (the switch's own WAL position) is stored in
 * v7fill.migrate_reverse inside the switch transaction: the way back misses
 * no write made after the switch.  Two databases: the source table is renamed
 * <from>_legacy (writes to the old name fail instead of being lost), nothing
 * is renamed on the target; its legacy_id gets a sequence of its own, set
 * under the lock to go on from the source key's; the way back's slot is made
 * on the target and its start stored there before the source's commit.
 *
 * Reverse: the new table's changes (pgoutput, publish_via_partition_root)
 * applied into the legacy table by legacy key, translated through the map,
 * one target transaction per group of source transactions with the position
 * in the same transaction; the slot is acknowledged only after the commit.
 * `--switch` in phase reverse switches back (the same lock dance, the legacy
 * table caught up under the lock, child rows written after the switch with
 * only <fk>_uuid given their <fk> from the map, names restored).  Two
 * databases: read on the target, written into the source's legacy table,
 * the position stored with the legacy rows (migrate_reverse.c); switching
 * back locks the target's table, catches up, renames on the source.
 *
 * Children in mode migrate (same database only): catch_up runs every capture
 * (migrate_childswitch.h) and the lock covers the children's source tables;
 * in the switch transaction each child's <fk>_uuid missed by the side-by-side
 * apply is filled from the map, then <child> -> <child>_legacy and
 * <into schema>.<child into> -> <child>; each child gets its own way-back
 * slot and start position like the parent's, and the trigger on the
 * parent's map is dropped (migrate_childtable_unhook).  Their way back:
 * migrate_childreverse.h.  Switching back takes them along: the way back's
 * rounds (parent first, children up to the same position) before the lock
 * and under it, then in the same transaction each child's names restored, the
 * legacy_id default dropped and the map's trigger made again
 * (migrate_childtable_rehook).
 *
 * Children in mode expand: before the lock, a pass over their rows still
 * NULL (migrate_child_settle, no lock of ours; two databases: once more
 * after the commit, for the rows written meanwhile, which no trigger
 * reaches).  Under it,
 * once the capture applied its last changes: the children of the keys the
 * map's trigger recorded (it does not wait for the switch's lock on the
 * child) are set from the map (migrate_child_set_late: index look-ups, as
 * many as keys recorded; no scan of the child), then, before the renames,
 * the trigger is dropped (migrate_child_unhook: the way back writes the map).
 *
 * Both functions update *spec (phase, switch_lsn, legacy_table); the caller
 * stores it in v7fill.migration.  A rerun finds the state from the catalog
 * (which table holds which name), so a kill between the commit and the
 * caller's store is harmless.
 */
#ifndef V7FILL_MIGRATE_SWITCH_H
#define V7FILL_MIGRATE_SWITCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/migrate.h"
#include "v7fill/pg.h"
#include "v7fill/source.h"

/* The switch refuses when the capture's slot is further behind the source's
 * WAL than this (the caller catches up first: the lock is held while
 * catch_up applies the rest). */
#define MIGRATE_SWITCH_MAX_LAG ((uint64_t) 16 << 20)

typedef struct SwitchStats
{
    int attempts;                /* lock attempts made (1 = the first one held) */
    int64_t lock_held_ms;        /* from the lock granted to the commit */
    uint64_t final_lsn;          /* the capture was applied up to here */
    uint64_t applied_at_switch;  /* switching back: rows the reverse applied under the lock */
    uint64_t children_filled;    /* switching back: child rows written with only <fk>_uuid
                                    that got <fk> from the map (outside the lock) */
    uint64_t children_filled_lock; /* ... under the lock, in the last attempt (an attempt
                                    that failed had its fill rolled back) */
    uint64_t children_settled;   /* forward, expand-mode children: rows whose <fk>_uuid the
                                    pass before the lock set */
    int64_t children_settle_ms;  /* how long that took (no lock held) */
    uint64_t children_late;      /* forward, expand-mode children: rows set under the lock
                                    from the keys the map's trigger recorded */
    bool children_fill_clean;    /* switching back, migrate-mode children: the last fill
                                    before the lock found nothing to do (the fill under it
                                    reads only the rows the way back wrote under it) */
    int64_t children_fill_rows;  /* ... how many rows that fill was given to read, by id:
                                    0 none, -1 every row */
    bool already;                /* nothing to do: the names were already switched */
    bool unknown;                /* failed: whether the source's COMMIT committed could not be
                                    read (its answer and the new connection both lost) */
    bool back;                   /* this was a switch back (phase reverse) */
} SwitchStats;

/* Takes the switch's lock and reads the final position (on the switch's
 * connection): called once by the capture when it is caught up. */
typedef bool (*MigrateSwitchLock)(void *lock_ctx, uint64_t *final_lsn, Err *err);
/* Starts the capture (on its own connection) and, once it is caught up and
 * still running, calls lock(lock_ctx, &final_lsn, err) once, applies up to
 * final_lsn and returns: the lock never covers the capture's start.  (The
 * stream's StreamOptions.on_caught_up has lock's shape.) */
typedef bool (*MigrateCatchUp)(void *ctx, MigrateSwitchLock lock, void *lock_ctx, Err *err);

/* lock_timeout_ms <= 0: 1000; attempts <= 0: 10.  Prints what the
 * application must change on stdout.  Phase reverse: switches back. */
V7FILL_MUST_CHECK bool migrate_switch(PgConn *source, PgConn *target, MigrateSpec *spec,
                                      int lock_timeout_ms, int attempts, MigrateCatchUp catch_up,
                                      void *ctx, SwitchStats *st, Err *err);

/* Switching back: the ids (uuid text) of the rows a migrate-mode child's way
 * back inserted or updated, collected while the switch holds its lock, so
 * the UUIDv7 children's key fill under it reads those rows alone, not every
 * row.  Past REVERSE_IDS_MAX ids `overflow` is set and the fill reads every
 * row. */
#define REVERSE_IDS_MAX 100000
typedef struct ReverseIds
{
    char **v;
    size_t n, cap;
    bool overflow;
} ReverseIds;

void reverse_ids_add(ReverseIds *ids, const char *id);
void reverse_ids_free(ReverseIds *ids);

typedef struct ReverseStats
{
    ReverseIds *ids;             /* NULL, or where the ids of the rows inserted or updated
                                    go (the caller's; not counted among the stats) */
    uint64_t transactions;       /* source transactions applied */
    uint64_t inserted, updated, deleted;
    uint64_t missing;            /* an update or delete whose legacy row was not there */
    uint64_t keys_given;         /* two databases: of inserted, rows inserted with legacy_id
                                    NULL, given the next value of its sequence */
    uint64_t start_lsn;          /* where this run started */
    uint64_t applied_lsn;        /* the last position committed in the legacy table */
    bool caught_up;              /* ended at the stop position (not interrupted) */
} ReverseStats;

/* Keep the legacy table current from the new one: until caught up with
 * what was committed when it started, or with follow until SIGINT/SIGTERM
 * (the open group committed, true).  db: the new table's database (its
 * slot, its map); legacy: the legacy table's, the source's when the
 * migration has two (NULL: db).  Sets spec->phase to reverse. */
V7FILL_MUST_CHECK bool migrate_reverse(PgConn *db, PgConn *legacy, MigrateSpec *spec,
                                       bool follow, ReverseStats *st, Err *err);

/* The reverse publication and slot of a migration: "<spec->slot>_rev"
 * (the slot name cut to 59 bytes first). */
void migrate_reverse_name(const MigrateSpec *spec, char *out, size_t size);

/* A migrate-mode child's way back: its <fk> in the legacy child is the
 * parent map's legacy key of the new row's <fk>_uuid (else the <fk> the row
 * carries: NULL keys, orphans, a parent gone). */
typedef struct ReverseParentRef
{
    const char *map_schema;      /* the parent's map */
    const char *map_table;
    const char *fk_column;       /* the child's column holding the parent's legacy key */
} ReverseParentRef;

/* Apply spec's way back until stop_lsn: read on apply_conn's database (the
 * new table's), written on legacy's (NULL: apply_conn; the switch back: not
 * the connection holding the lock).  stop_lsn 0 with follow: until
 * interrupted.  ref: spec is a migrate-mode child of that parent (NULL: not;
 * one database only). */
V7FILL_MUST_CHECK bool migrate_reverse_apply(PgConn *apply_conn, PgConn *legacy,
                                             const MigrateSpec *spec,
                                             const ReverseParentRef *ref, uint64_t stop_lsn,
                                             bool follow, ReverseStats *st, Err *err);

/* Switching back: how one table's way back hands over to the switch. */
typedef struct ReverseGate
{
    /* Once its stream has started, before anything is read (NULL: none): may
     * wait (its walsender decodes meanwhile); false ends the way back. */
    bool (*started)(void *ctx, Err *err);
    /* Once caught up at the stop, still streaming (MigrateSwitchLock's shape):
     * may move *stop_lsn on, up to which it then applies. */
    MigrateSwitchLock caught_up;
    /* rounds: caught_up called again at each stop it moved to; one that does
     * not move it ends the way back there */
    bool rounds;
    /* The stream's source once open, NULL before it closes (NULL: not told):
     * caught_up, waiting, may keep the walsender from its timeout with
     * source_pgoutput_feedback (from caught_up's thread only). */
    void (*opened)(void *ctx, Source *src);
    void *ctx;
} ReverseGate;

/* migrate_reverse_apply up to stop_lsn (not following) through gate: the
 * stream stays open across the hand-over, so the lock taken there never
 * covers a stream's start. */
V7FILL_MUST_CHECK bool migrate_reverse_catch_up(PgConn *apply_conn, PgConn *legacy,
                                                const MigrateSpec *spec,
                                                const ReverseParentRef *ref, uint64_t stop_lsn,
                                                const ReverseGate *gate, ReverseStats *st,
                                                Err *err);

/* The way back's writing connection c as PostgreSQL's apply workers write:
 * SET session_replication_role = replica, so no trigger fires on the legacy
 * tables, foreign keys' included (a round applies the parent's changes
 * before its children's: a legacy child's NO ACTION or RESTRICT key would
 * refuse the parent's delete whose children's deletes come next; the
 * children's changes up to the same position follow in the round).
 * *replica: it was set.  Refused (42501: neither a superuser nor GRANT SET
 * ON PARAMETER): without it, unless a migrate-mode child's legacy table has
 * such a key to the legacy parent, then false with the GRANT to run. */
V7FILL_MUST_CHECK bool migrate_reverse_session(PgConn *c, const MigrateSpec *spec, bool *replica,
                                               Err *err);

/* --status: the way back of one table ("<into_schema>.<into_table>"). */
V7FILL_MUST_CHECK bool migrate_reverse_status(PgConn *db, const char *into_key,
                                              ReverseStatus *out, Err *err);

/* The reverse state: v7fill.migrate_reverse (into_table PRIMARY KEY, slot,
 * publication, switch_lsn, end_lsn, applied).  Created when missing. */
V7FILL_MUST_CHECK bool migrate_reverse_setup(PgConn *db, Err *err);

/* v7fill.migrate_reverse_kept on db (the maps' database), created when
 * missing: the map rows a parent's way back deletes in a round, kept for
 * its migrate-mode children's way back of the same round (a child row
 * inserted and deleted with its parent within the round still finds its
 * parent's legacy key), cleared once every child reached the round's stop. */
V7FILL_MUST_CHECK bool migrate_reverse_kept_setup(PgConn *db, Err *err);

/* Every child of spec reached the round's stop: the parent's kept map rows
 * go (none is needed by a later change: a child row committed after the stop
 * names a parent not deleted before it). */
V7FILL_MUST_CHECK bool migrate_reverse_kept_clear(PgConn *db, const MigrateSpec *spec, Err *err);

#endif /* V7FILL_MIGRATE_SWITCH_H */
