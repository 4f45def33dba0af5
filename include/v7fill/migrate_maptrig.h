/*
 * The trigger on a parent's map (<into>_id_map) that gives child rows their
 * <fk>_uuid when the parent's map row arrives, shared by both child modes.
 *
 * A child row written in the same transaction as its new parent is applied
 * (or written by the application) before the capture writes the parent's map
 * row, so the child's own trigger finds no map row and leaves <fk>_uuid NULL.
 * This trigger on the map, FOR EACH ROW, sets it in the map row's
 * transaction:
 *
 *   expand   (MAPTRIG_NULL_ONLY)  UPDATE child SET <fk>_uuid = NEW.id
 *             WHERE <fk> = NEW.legacy_id AND <fk>_uuid IS NULL, while the map
 *             row and the parent's new row are both there: a CONSTRAINT
 *             trigger DEFERRABLE INITIALLY DEFERRED (it runs at the commit:
 *             the capture writes the map row before the new row, and the
 *             child's foreign key to <into> is not deferred); AFTER INSERT OR
 *             UPDATE (the application's own table: a uuid already there is
 *             kept).  It never waits for the child's lock (LOCK ... NOWAIT):
 *             when the lock is not granted (the switch holds it while the
 *             capture applies its last changes) it records the map row's
 *             legacy_id in MAPTRIG_LATE_TABLE instead, and whoever holds
 *             the lock sets those children (migrate_child_set_late).
 *   migrate  (MAPTRIG_FOLLOW_MAP) the same WHERE <fk>_uuid IS DISTINCT FROM
 *            NEW.id, and a deleted map row sets it back to NULL
 *
 * The function is SECURITY DEFINER with search_path pinned; every name is
 * quoted and qualified by the caller.
 */
#ifndef V7FILL_MIGRATE_MAPTRIG_H
#define V7FILL_MIGRATE_MAPTRIG_H

#include <stdbool.h>

#include "v7fill/err.h"
#include "v7fill/mem.h"
#include "v7fill/pg.h"

/* Expand mode: the keys whose children the trigger could not set (the child
 * was locked), per child (oid, attnum of <fk>); drained by
 * migrate_child_set_late. */
#define MAPTRIG_LATE_TABLE "v7fill.child_late"
#define MAPTRIG_LATE_TABLE_SQL                                                              \
    "CREATE SCHEMA IF NOT EXISTS v7fill;\n"                                                 \
    "CREATE TABLE IF NOT EXISTS " MAPTRIG_LATE_TABLE " (child oid NOT NULL, "               \
    "fk_attnum int2 NOT NULL, legacy_id bigint NOT NULL, "                                  \
    "PRIMARY KEY (child, fk_attnum, legacy_id));\n"

typedef enum MapTrigMode
{
    MAPTRIG_NULL_ONLY,  /* expand mode: only rows whose uuid is NULL; deletes ignored */
    MAPTRIG_FOLLOW_MAP  /* migrate mode: the child's uuid follows the map row, deletes too */
} MapTrigMode;

/* All quoted (pg_ident / pg_qualified). */
typedef struct MapTrig
{
    const char *child;   /* the child table */
    const char *fk;      /* <fk> */
    const char *fku;     /* <fk>_uuid */
    const char *map;     /* the parent's map */
    const char *parent;  /* the parent's new table (<into>) */
    const char *fn;      /* the trigger function, schema-qualified */
    const char *trigger; /* the trigger's name on the map */
    MapTrigMode mode;
    /* MAPTRIG_NULL_ONLY: the child's oid and <fk>'s attnum (digits), its
     * rows' key in MAPTRIG_LATE_TABLE; unused otherwise */
    const char *child_oid;
    const char *fk_attnum;
} MapTrig;

/* Appends CREATE OR REPLACE FUNCTION and the trigger (CREATE OR REPLACE
 * TRIGGER; expand: DROP TRIGGER IF EXISTS, CREATE CONSTRAINT TRIGGER), each
 * statement ending ";\n", to *out, the body dollar-quoted with `tag`.
 * false (nothing appended) when the body holds `tag`: choose another. */
bool migrate_maptrig_sql(const MapTrig *t, const char *tag, Buf *out);

/* DROP TRIGGER IF EXISTS trigger ON map (quoted names), in the caller's transaction. */
V7FILL_MUST_CHECK bool migrate_maptrig_drop(PgConn *c, const char *trigger, const char *map,
                                            Err *err);

#endif /* V7FILL_MIGRATE_MAPTRIG_H */
