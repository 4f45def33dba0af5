/*
 * `v7fill migrate --verify`: is the migrated table (and each expanded child)
 * the source, row by row?  Per parent table:
 *
 *   rows      source rows = target rows + rows rejected with a reason (the
 *             stream's quarantine, v7fill.stream_quarantine WHERE slot =
 *             spec->slot, in the target's database)
 *   rejected  those rows listed (never a mismatch)
 *   values    a hash of every non-key column, row by row through the map
 *             (source.key = map.legacy_id, map.id = target.id, target.legacy_id
 *             = source.key), in ranges of keys: a changed, missing or extra
 *             row is named by its legacy key
 *   map       every target (legacy_id, id) is in the map and every map row
 *             has its target row
 *   id time   every id's UUIDv7 milliseconds equal its time column's
 * Per child (expand mode: <fk>_uuid beside <fk> in the child):
 *   child keys  every non-NULL key resolves through the map to its <fk>_uuid
 *   orphans     keys with no parent, listed (never a mismatch)
 *   NULL keys   counted apart (a NULL key with a <fk>_uuid is a mismatch)
 *   join pairs  (child key, parent key) pairs through the old integer key
 *               and through the new uuid column: counts and a hash equal
 *
 * Source and target may be one database (pass the same connection twice: one
 * join per key range, compared in the server) or two (per key range an
 * aggregate hash of each side first; only a range that differs is fetched and
 * merged in the client).  Nothing is written.
 */
#ifndef V7FILL_MIGRATE_VERIFY_H
#define V7FILL_MIGRATE_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "v7fill/err.h"
#include "v7fill/mem.h"
#include "v7fill/migrate.h"
#include "v7fill/pg.h"

/* Legacy keys a check's detail names at most, per kind of difference. */
#define VERIFY_DETAIL_KEYS 5
/* A re-check (migrate_verify_keys) reads keys this close in one range. */
#define VERIFY_RECHECK_GAP 64
/* ... and in at most this many ranges (keys further apart share one). */
#define VERIFY_RECHECK_RANGES 100
/* Source keys per range of the row-by-row comparison. */
#define VERIFY_RANGE_KEYS 50000

typedef struct VerifyCheck
{
    char table[130];   /* schema.table */
    char check[64];    /* rows, rejected, values, map, id time, child keys, ... */
    uint64_t source, target;
    bool ok;
    char detail[512];  /* the first rows that differ, by legacy key */
} VerifyCheck;

typedef struct VerifyReport
{
    VerifyCheck *checks;
    size_t n;
    bool ok;           /* no check is a mismatch */
    int64_t *diff_keys; /* every legacy key a values or child-keys check found differing
                           (sorted, unique; not only the first VERIFY_DETAIL_KEYS) */
    size_t ndiff_keys;
} VerifyReport;

/* Run every check; *out filled (free with verify_report_free, also after a
 * failure).  false (err filled) only when a check could not run: a server
 * error, a missing table or column; a mismatch is out->ok false. */
V7FILL_MUST_CHECK bool migrate_verify(PgConn *source, PgConn *target, const MigrateSpec *spec,
                                      VerifyReport *out, Err *err);
/* The same with `range_keys` source keys per range (0: VERIFY_RANGE_KEYS). */
V7FILL_MUST_CHECK bool migrate_verify_ex(PgConn *source, PgConn *target,
                                         const MigrateSpec *spec, size_t range_keys,
                                         VerifyReport *out, Err *err);

/* A re-check of the rows of these legacy keys only (sorted): the values and each child's keys;
 * out->diff_keys the keys that still differ (the other checks are not run). */
V7FILL_MUST_CHECK bool migrate_verify_keys(PgConn *source, PgConn *target,
                                           const MigrateSpec *spec, const int64_t *keys,
                                           size_t nkeys, VerifyReport *out, Err *err);

/* The verdict table: one line per check (table, check, source, target,
 * OK/MISMATCH, detail), then "verdict: OK" or "verdict: MISMATCH (N checks)". */
void verify_report_print(FILE *f, const VerifyReport *r);
/* {"ok":..,"checks":[{"table","check","source","target","ok","detail"}..]} */
bool verify_report_json(const VerifyReport *r, Buf *out);
void verify_report_free(VerifyReport *r);

/* Checks a capture that lags behind a writer can fail for a while (rows, values, child keys,
 * join pairs): their differences are the keys in diff_keys. */
bool verify_check_settles(const VerifyCheck *c);
/* Keep in a (sorted, unique) only the keys also in b; the new count. */
size_t verify_keys_intersect(int64_t *a, size_t na, const int64_t *b, size_t nb);
/* The settle verdict on the last round's report r: `still` (sorted) are the keys that differed
 * in every one of `rounds` rounds.  A failing check that settles is OK when no key still
 * differs (its detail says it differed only while the capture lagged); otherwise the still
 * differing keys are named and it stays a mismatch.  Other failing checks stay mismatches.
 * r->ok recomputed. */
void verify_report_settle(VerifyReport *r, const int64_t *still, size_t nstill, int rounds);

#endif /* V7FILL_MIGRATE_VERIFY_H */
