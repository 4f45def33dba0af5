/*
 * v7fill's own tables in the target database:
 *
 *   v7fill.id_key      the secret HMAC key of each target (ids are
 *                      reproducible per target, unpredictable without it)
 *   v7fill.checkpoint  per target and input file: position after the last
 *                      committed batch, running counts, rejects file length
 *   v7fill.run         rows per run (every --record-every, and at its end): counts,
 *                      elapsed time, statistics (JSON) of the rows since the last
 *   <table>_source_ref the lookup of imported source references (in the
 *                      target's schema, name overridable)
 *   <table>_id_map     or, with --key-map, the typed key map legacy_id -> id
 *
 * All created on first use under an advisory lock, so concurrent first runs
 * do not race.
 */
#ifndef V7FILL_STATE_H
#define V7FILL_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/sink.h"

#define ID_KEY_LEN 32

/* Create the v7fill schema and its tables if missing. */
V7FILL_MUST_CHECK bool state_setup(PgConn *c, Err *err);

/* Run `create_sql` unless `exists_sql` (one boolean) says the objects are there
 * already; under the advisory lock all of v7fill's own DDL takes, so
 * concurrent first runs do not race.  `what` names the objects in errors.
 * Modules with tables of their own (retention, maintenance) use it. */
V7FILL_MUST_CHECK bool state_create_once(PgConn *c, const char *exists_sql,
                                         const char *create_sql, const char *what, Err *err);

/* Fetch the target's key, creating it (random) on first use. */
V7FILL_MUST_CHECK bool state_id_key(PgConn *c, const char *schema, const char *table,
                                    uint8_t key[ID_KEY_LEN], Err *err);

/* Default lookup table name: <table>_source_ref (error if over 63 bytes). */
V7FILL_MUST_CHECK bool state_lookup_name(const char *table, const char *override, char **out,
                                         Err *err);
/* Create the lookup table if missing, in shape `create_as`: LOOKUP_REF_KEY
 * (ref_key uuid PRIMARY KEY, id uuid, ref text) or LOOKUP_REF_HASH_UUID
 * (ref_hash uuid ..., keys never ordered).  Lookups made by earlier versions
 * have ref_hash uuid, or bytea before that; all three work: *shape says which
 * this one has. */
V7FILL_MUST_CHECK bool state_lookup_create(PgConn *c, const char *schema, const char *lookup,
                                           LookupShape create_as, LookupShape *shape, Err *err);
/* The lookup q (quoted, for the message) of this shape is the kind asked for:
 * a key map (want_map) or a source-reference lookup; else an EC_CONFIG error
 * saying which it is. */
V7FILL_MUST_CHECK bool state_lookup_kind_check(const char *q, bool want_map, LookupShape shape,
                                               int map_bits, Err *err);
/* Create the typed key map if missing: legacy_id map_type (smallint, integer
 * or bigint; NULL = bigint) PRIMARY KEY, id uuid NOT NULL [UNIQUE] (id_unique:
 * false for Citus, which cannot enforce a unique id on a map distributed by
 * legacy_id).  *map_bits: the width of the existing (or created) legacy_id.
 * An existing source-reference lookup of that name is an EC_CONFIG error
 * (and the reverse, in state_lookup_create). */
V7FILL_MUST_CHECK bool state_lookup_create_map(PgConn *c, const char *schema, const char *lookup,
                                               const char *map_type, bool id_unique,
                                               LookupShape *shape, int *map_bits, Err *err);
/* state_lookup_exists, with the width of a key map's legacy_id (16, 32, 64;
 * 0 for other shapes) in *map_bits (may be NULL).  A legacy_id of another
 * type is an EC_CONFIG error. */
V7FILL_MUST_CHECK bool state_lookup_inspect(PgConn *c, const char *schema, const char *lookup,
                                            bool *exists, LookupShape *shape, int *map_bits,
                                            Err *err);
/* Does the lookup table exist, and with which shape?  A missing table counts
 * as LOOKUP_REF_KEY (what would be created); a table of that name without a
 * ref_key uuid or ref_hash column is an EC_CONFIG error.  shape may be NULL. */
V7FILL_MUST_CHECK bool state_lookup_exists(PgConn *c, const char *schema, const char *lookup,
                                           bool *exists, LookupShape *shape, Err *err);

typedef struct Checkpoint
{
    bool found;
    bool stale;    /* one was found, but for an earlier table of the same name */
    bool finished;
    uint64_t offset;
    uint64_t line;
    uint64_t records;
    uint64_t read;
    uint64_t inserted;
    uint64_t duplicates;
    uint64_t rejected;
    uint64_t expired;
    uint64_t rejects_size;
    uint64_t late_size;
    char rejects_path[1024];
    char rejects_file[48]; /* "dev:ino" of that file ("": not recorded) */
    char late_path[1024];  /* the late-rows file late_size is of ("": not recorded) */
    char late_file[48];
    uint64_t content_len;  /* the input's first content_len bytes hash to content_hash */
    uint64_t content_hash; /* (XXH3-64; content_len 0: not recorded) */
    bool has_options;      /* options: what decided the rows (import_options_text) */
    char options[8192];
    bool has_source_ref;   /* source_ref: the --source-ref template ("": the default) */
    char source_ref[1024];
} Checkpoint;

/* The checkpoint of `identity` in table `target_oid` (named schema.table):
 * one written while another table had that name is not found (cp->stale). */
V7FILL_MUST_CHECK bool state_checkpoint_get(PgConn *c, const char *schema, const char *table,
                                            unsigned int target_oid, const char *identity,
                                            Checkpoint *cp, Err *err);
/* Upsert; meant to run inside the batch's transaction. */
V7FILL_MUST_CHECK bool state_checkpoint_put(PgConn *c, const char *schema, const char *table,
                                            unsigned int target_oid, const char *identity,
                                            const char *source_name, const Checkpoint *cp,
                                            Err *err);
/* Forget the checkpoint of `identity` (standard input's, once read to its
 * end: it cannot be resumed). */
V7FILL_MUST_CHECK bool state_checkpoint_delete(PgConn *c, const char *schema, const char *table,
                                               const char *identity, Err *err);
/* The identities of the checkpoints table `target_oid` (named schema.table)
 * has of inputs whose import did not finish, which a run may resume
 * (standard input's left out): *identities, *n of them (NULL, 0: none); the
 * caller frees each and the array. */
V7FILL_MUST_CHECK bool state_checkpoint_unfinished(PgConn *c, const char *schema,
                                                   const char *table, unsigned int target_oid,
                                                   char ***identities, size_t *n, Err *err);
/* The longest the checkpoints of other inputs (any target) record the rejects
 * or late-rows file "dev:ino" `file_id` (0: none names it): up to there that
 * file holds rows they committed, which a resume of `identity` must not cut. */
V7FILL_MUST_CHECK bool state_checkpoint_others_size(PgConn *c, const char *schema,
                                                    const char *table, const char *identity,
                                                    const char *file_id, uint64_t *size,
                                                    Err *err);

/* Record a finished (or failed) run; `stats_json` may be NULL.  row_key (or
 * NULL): stored in the document as "row_key", so that a row whose COMMIT's
 * answer was lost can be looked up (run_history.h).  own_txn: in a
 * transaction of its own; else inside the caller's (a stream's copy records
 * its last rows with its phase switch). */
V7FILL_MUST_CHECK bool state_run_record(PgConn *c, const char *schema, const char *table,
                                        unsigned int target_oid, const char *command,
                                        const char *status,
                                        double elapsed_s, uint64_t read, uint64_t inserted,
                                        uint64_t duplicates, uint64_t rejected,
                                        uint64_t partitions_created, const char *stats_json,
                                        const char *row_key, bool own_txn, Err *err);

#endif /* V7FILL_STATE_H */
