/*
 * Citus (distributed PostgreSQL): what v7fill needs to know and do when the
 * target is a distributed table.  Detected by catalog (pg_dist_partition), so
 * a plain server pays one cheap query and nothing else changes.
 *
 * On a distributed target the coordinator's partitions are empty shells; the
 * rows live in the shards on the workers.  Hence: row estimates read from the
 * shards, and the lookup table distributed on its key so that deduplication
 * is spread over the workers instead of funnelled through the coordinator.
 */
#ifndef V7FILL_CITUS_H
#define V7FILL_CITUS_H

#include <stdbool.h>
#include <stddef.h>

#include "v7fill/catalog.h"
#include "v7fill/err.h"
#include "v7fill/pg.h"

/* Whether the citus extension is installed in c's database (*out). */
V7FILL_MUST_CHECK bool citus_installed(PgConn *c, bool *out, Err *err);

/* Fill t->distributed, t->dist_method, t->dist_column and t->dist_type from
 * pg_dist_partition.  Without the citus extension they stay false/NULL (one
 * query).  Called by catalog_load_target. */
V7FILL_MUST_CHECK bool citus_detect(PgConn *c, TargetTable *t, Err *err);

/* citus_detect for schema.table by name, into *out (zeroed first; only oid,
 * distributed, dist_method, dist_column and dist_type are set; all zero when
 * the table does not exist or Citus is not installed).  Free with
 * citus_table_clear. */
V7FILL_MUST_CHECK bool citus_table_of(PgConn *c, const char *schema, const char *table,
                                      TargetTable *out, Err *err);
void citus_table_clear(TargetTable *t);
/* Whether schema.table is a Citus distributed table (*out; false when it does not exist
 * or Citus is not installed). */
V7FILL_MUST_CHECK bool citus_is_distributed(PgConn *c, const char *schema, const char *table,
                                            bool *out, Err *err);

/* Distribute the lookup table schema.lookup on key_col (create_distributed_table),
 * colocated with the target when the target is hash-distributed on a uuid column,
 * unless it is distributed already; nothing when t is not distributed.  A local
 * lookup left by an earlier run has its rows moved to the shards (the coordinator's
 * copy emptied); a key map's UNIQUE (id), made while the target was local, is dropped
 * first (Citus cannot keep it).  Errors Citus raises come back with a hint. */
V7FILL_MUST_CHECK bool citus_distribute_lookup(PgConn *c, const TargetTable *t, const char *lookup,
                                               const char *key_col, Err *err);

/* catalog_estimate_rows for a distributed target: per partition, the sum over
 * its shards of reltuples scaled to each shard's size now (the coordinator's
 * own tables are empty); exact 0 when every shard is empty; -1 when a shard is
 * unknown or could not be asked. */
V7FILL_MUST_CHECK bool citus_estimate_rows(PgConn *c, const TargetTable *t, RowEstimate **out,
                                           size_t *n, Err *err);

#endif /* V7FILL_CITUS_H */
