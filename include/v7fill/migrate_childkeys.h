/*
 * Switching back, expand mode: the child rows the application wrote or
 * changed after the switch with only <fk>_uuid get <fk>, the legacy key the
 * parent's map (<into>_id_map) gives that uuid, so that the legacy
 * application finds them.  Only where the legacy table holds that key (the
 * child's foreign key points there): the others come with the way back, and
 * a later pass sets them (one database: under the switch back's lock; two:
 * after its commit).
 *
 * One database (map NULL): one UPDATE joining the child with the map.  Two
 * databases (the child and the legacy table on conn, the map on map): the
 * distinct uuids still without a key are read along the uuid (up to
 * MIGRATE_CHILDKEYS_SCAN per read), looked up in the map in batches of
 * MIGRATE_CHILDKEYS_BATCH, and written back as arrays; each batch is a
 * statement of its own (conn's transaction, if one is open, holds them).
 *
 * Then, in both forms, the rows moved by <fk>_uuid alone whose NOT NULL <fk>
 * kept its value (the uuids recorded in MIGRATE_CHILD_MOVED_TABLE, on conn):
 * each batch of recorded uuids looked up in the map, <fk> set on the rows
 * holding them where it differs, and the uuids the legacy table has a key
 * for struck from the record (one transaction per batch, or conn's).
 */
#ifndef V7FILL_MIGRATE_CHILDKEYS_H
#define V7FILL_MIGRATE_CHILDKEYS_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/migrate.h"
#include "v7fill/pg.h"

/* Two databases: distinct <fk>_uuid values read per scan of the child, and
 * per look-up in the map and write. */
#define MIGRATE_CHILDKEYS_SCAN 100000
#define MIGRATE_CHILDKEYS_BATCH 5000

/* legacy_q: the legacy table, quoted, under its name at the time of the
 * call.  *rows grows by the child rows set.  A child without <fk>_uuid is
 * passed over. */
V7FILL_MUST_CHECK bool migrate_child_keys_back(PgConn *conn, PgConn *map, const MigrateSpec *spec,
                                               const MigrateChild *ch, const char *legacy_q,
                                               uint64_t *rows, Err *err);

#endif /* V7FILL_MIGRATE_CHILDKEYS_H */
