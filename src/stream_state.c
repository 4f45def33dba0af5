/*
 * stream_state.c: a stream's position, counts and quarantine in the target.
 */
#include "v7fill/stream_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"
#include "v7fill/pgoutput.h"
#include "v7fill/state.h"

static const char *const create_sql =
    "CREATE SCHEMA IF NOT EXISTS v7fill;"
    "CREATE TABLE IF NOT EXISTS v7fill.stream ("
    "  slot text PRIMARY KEY, target text NOT NULL, source_table text NOT NULL,"
    "  publication text NOT NULL, system_id text NOT NULL, phase text NOT NULL,"
    "  end_lsn pg_lsn NOT NULL, txn_lsn pg_lsn NOT NULL DEFAULT '0/0',"
    "  txn_changes bigint NOT NULL DEFAULT 0, batches bigint NOT NULL DEFAULT 0,"
    "  read bigint NOT NULL DEFAULT 0, inserted bigint NOT NULL DEFAULT 0,"
    "  duplicates bigint NOT NULL DEFAULT 0, rejected bigint NOT NULL DEFAULT 0,"
    "  expired bigint NOT NULL DEFAULT 0, updated bigint NOT NULL DEFAULT 0,"
    "  deleted bigint NOT NULL DEFAULT 0, missing bigint NOT NULL DEFAULT 0,"
    "  missing_deletes bigint NOT NULL DEFAULT 0, time_changed bigint NOT NULL DEFAULT 0,"
    "  truncates bigint NOT NULL DEFAULT 0,"
    "  created_at timestamptz NOT NULL DEFAULT now(),"
    "  updated_at timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE IF NOT EXISTS v7fill.stream_quarantine ("
    "  id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(),"
    "  slot text NOT NULL, target text NOT NULL, source_lsn pg_lsn, relation text NOT NULL,"
    "  reason text NOT NULL, sqlstate text, row jsonb);"
    "CREATE INDEX IF NOT EXISTS stream_quarantine_slot ON v7fill.stream_quarantine (slot, id);";

bool
stream_state_setup(PgConn *c, Err *err)
{
    return state_create_once(c,
                             "SELECT to_regclass('v7fill.stream') IS NOT NULL AND "
                             "to_regclass('v7fill.stream_quarantine') IS NOT NULL",
                             create_sql, "the stream's tables (v7fill.stream)", err) &&
           /* Added after the first streams: the applied commit's source time. */
           state_create_once(c,
                             "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
                             "'v7fill.stream'::regclass AND attname = 'commit_time' AND NOT "
                             "attisdropped)",
                             "ALTER TABLE v7fill.stream ADD COLUMN IF NOT EXISTS commit_time "
                             "timestamptz",
                             "the applied commit's time (v7fill.stream.commit_time)", err) &&
           /* Added later: the source columns the stream last ran with
            * (stream_columns.h). */
           state_create_once(c,
                             "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
                             "'v7fill.stream'::regclass AND attname = 'columns' AND NOT "
                             "attisdropped)",
                             "ALTER TABLE v7fill.stream ADD COLUMN IF NOT EXISTS columns jsonb",
                             "the source's columns (v7fill.stream.columns)", err) &&
           /* Added with several tables per slot: one row per (slot, target). */
           state_create_once(c,
                             "SELECT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = "
                             "'v7fill.stream'::regclass AND indisprimary AND indnatts = 2)",
                             "ALTER TABLE v7fill.stream DROP CONSTRAINT IF EXISTS stream_pkey;"
                             "ALTER TABLE v7fill.stream ADD CONSTRAINT stream_pkey "
                             "PRIMARY KEY (slot, target)",
                             "one stream row per target (v7fill.stream primary key)", err) &&
           /* Added later: the view of an initial copy redone (StreamState). */
           state_create_once(c,
                             "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
                             "'v7fill.stream'::regclass AND attname = 'copy_view_xid' AND NOT "
                             "attisdropped)",
                             "ALTER TABLE v7fill.stream ADD COLUMN IF NOT EXISTS copy_view_lsn "
                             "pg_lsn NOT NULL DEFAULT '0/0', ADD COLUMN IF NOT EXISTS "
                             "copy_view_xid bigint NOT NULL DEFAULT 0",
                             "the redone copy's view (v7fill.stream.copy_view_lsn)", err);
}

static uint64_t
u64(const PGresult *res, int row, int col)
{
    return strtoull(PQgetvalue(res, row, col), NULL, 10);
}

static uint64_t
lsn_at(const PGresult *res, int row, int col)
{
    uint64_t v = 0;

    (void) pgo_lsn_parse(PQgetvalue(res, row, col), &v);
    return v;
}

static void
copy_text(char *dst, size_t size, const char *src)
{
    (void) snprintf(dst, size, "%s", src);
}

static const char *const select_sql =
    "SELECT target, source_table, publication, system_id, phase, end_lsn::text, "
    "txn_lsn::text, txn_changes, batches, read, inserted, duplicates, rejected, "
    "expired, updated, deleted, missing, missing_deletes, time_changed, truncates, "
    "(extract(epoch FROM (to_jsonb(s) ->> 'commit_time')::timestamptz) * 1e6)::int8, "
    "coalesce(to_jsonb(s) ->> 'copy_view_lsn', '0/0'), "
    "coalesce(to_jsonb(s) ->> 'copy_view_xid', '0') "
    "FROM v7fill.stream s WHERE slot = $1 AND ($2::text IS NULL OR target = $2) "
    "ORDER BY target";

static void
row_read(const PGresult *res, int r, StreamState *out)
{
    memset(out, 0, sizeof *out);
    out->found = true;
    copy_text(out->target, sizeof out->target, PQgetvalue(res, r, 0));
    copy_text(out->source_table, sizeof out->source_table, PQgetvalue(res, r, 1));
    copy_text(out->publication, sizeof out->publication, PQgetvalue(res, r, 2));
    copy_text(out->system_id, sizeof out->system_id, PQgetvalue(res, r, 3));
    copy_text(out->phase, sizeof out->phase, PQgetvalue(res, r, 4));
    out->end_lsn = lsn_at(res, r, 5);
    out->txn_lsn = lsn_at(res, r, 6);
    out->txn_changes = u64(res, r, 7);
    out->batches = u64(res, r, 8);
    out->counts.read = u64(res, r, 9);
    out->counts.inserted = u64(res, r, 10);
    out->counts.duplicates = u64(res, r, 11);
    out->counts.rejected = u64(res, r, 12);
    out->counts.expired = u64(res, r, 13);
    out->counts.updated = u64(res, r, 14);
    out->counts.deleted = u64(res, r, 15);
    out->counts.missing = u64(res, r, 16);
    out->counts.missing_deletes = u64(res, r, 17);
    out->counts.time_changed = u64(res, r, 18);
    out->counts.truncates = u64(res, r, 19);
    out->commit_time_us = PQgetisnull(res, r, 20) ? 0 : strtoll(PQgetvalue(res, r, 20), NULL, 10);
    out->copy_view_lsn = lsn_at(res, r, 21);
    out->copy_view_xid = u64(res, r, 22);
}

bool
stream_state_list(PgConn *c, const char *slot, const char *target, StreamState **out,
                  size_t *n, Err *err)
{
    PGresult *res;
    const char *params[2] = {slot, target};

    *out = NULL;
    *n = 0;
    if (!pg_query(c, select_sql, 2, params, &res, err))
    {
        err_prefix(err, "could not read the stream's position (v7fill.stream)");
        return false;
    }
    *n = (size_t) PQntuples(res);
    *out = xcalloc(*n ? *n : 1, sizeof **out);
    for (size_t i = 0; i < *n; i++)
        row_read(res, (int) i, &(*out)[i]);
    PQclear(res);
    return true;
}

bool
stream_state_get(PgConn *c, const char *slot, const char *target, StreamState *out, Err *err)
{
    StreamState *rows;
    size_t n;

    memset(out, 0, sizeof *out);
    if (!stream_state_list(c, slot, target, &rows, &n, err))
        return false;
    if (n > 0)
        *out = rows[0];
    free(rows);
    return true;
}

bool
stream_state_create(PgConn *c, const char *slot, const StreamState *s, Err *err)
{
    char lsn[PGO_LSN_TEXT_SIZE];
    const char *params[7];

    pgo_lsn_format(s->end_lsn, lsn);
    params[0] = slot;
    params[1] = s->target;
    params[2] = s->source_table;
    params[3] = s->publication;
    params[4] = s->system_id;
    params[5] = s->phase;
    params[6] = lsn;
    return pg_exec_params(c,
                          "INSERT INTO v7fill.stream (slot, target, source_table, publication, "
                          "system_id, phase, end_lsn) VALUES ($1, $2, $3, $4, $5, $6, "
                          "$7::pg_lsn) ON CONFLICT (slot, target) DO UPDATE SET "
                          "source_table = EXCLUDED.source_table, publication = "
                          "EXCLUDED.publication, system_id = EXCLUDED.system_id, phase = "
                          "EXCLUDED.phase, end_lsn = EXCLUDED.end_lsn, txn_lsn = '0/0', "
                          "txn_changes = 0, copy_view_lsn = '0/0', copy_view_xid = 0, "
                          "updated_at = now()",
                          7, params, err);
}

bool
stream_state_put(PgConn *c, const char *slot, const StreamState *s, Err *err)
{
    char lsn[PGO_LSN_TEXT_SIZE], txn[PGO_LSN_TEXT_SIZE], view[PGO_LSN_TEXT_SIZE];
    char nums[14][24];
    char commit[24], xid[24];
    const char *params[21];
    const uint64_t v[14] = {
        s->txn_changes,          s->batches,          s->counts.read,
        s->counts.inserted,      s->counts.duplicates, s->counts.rejected,
        s->counts.expired,       s->counts.updated,   s->counts.deleted,
        s->counts.missing,       s->counts.missing_deletes, s->counts.time_changed,
        s->counts.truncates,     0,
    };

    pgo_lsn_format(s->end_lsn, lsn);
    pgo_lsn_format(s->txn_lsn, txn);
    params[0] = slot;
    params[1] = s->phase;
    params[2] = lsn;
    params[3] = txn;
    for (int i = 0; i < 13; i++)
    {
        (void) snprintf(nums[i], sizeof nums[i], "%" PRIu64, v[i]);
        params[4 + i] = nums[i];
    }
    (void) snprintf(commit, sizeof commit, "%" PRId64, s->commit_time_us);
    params[17] = s->commit_time_us > 0 ? commit : NULL;
    params[18] = s->target;
    pgo_lsn_format(s->copy_view_lsn, view);
    params[19] = view;
    (void) snprintf(xid, sizeof xid, "%" PRIu64, s->copy_view_xid);
    params[20] = xid;
    return pg_exec_params(c,
                          "UPDATE v7fill.stream SET phase = $2, end_lsn = $3::pg_lsn, "
                          "txn_lsn = $4::pg_lsn, txn_changes = $5, batches = $6, read = $7, "
                          "inserted = $8, duplicates = $9, rejected = $10, expired = $11, "
                          "updated = $12, deleted = $13, missing = $14, missing_deletes = $15, "
                          "time_changed = $16, truncates = $17, updated_at = now(), "
                          "commit_time = coalesce(to_timestamp($18::float8 / 1e6), commit_time), "
                          "copy_view_lsn = $20::pg_lsn, copy_view_xid = $21 "
                          "WHERE slot = $1 AND target = $19",
                          21, params, err);
}

bool
stream_state_next_xid(PgConn *c, uint64_t *xid, Err *err)
{
    PGresult *res;

    if (!pg_query(c, "SELECT pg_snapshot_xmax(pg_current_snapshot())::text", 0, NULL, &res, err))
    {
        err_prefix(err, "could not read the target's next transaction id");
        return false;
    }
    *xid = u64(res, 0, 0);
    PQclear(res);
    return true;
}

bool
stream_state_put_idle(PgConn *c, const char *slot, const char *target, uint64_t lsn,
                      bool *stored, Err *err)
{
    char text[PGO_LSN_TEXT_SIZE];
    const char *params[3];
    PGresult *res;

    *stored = false;
    pgo_lsn_format(lsn, text);
    params[0] = slot;
    params[1] = text;
    params[2] = target;
    /* The outer SELECT reads the row as it was before the UPDATE. */
    if (!pg_query(c,
                  "WITH u AS (UPDATE v7fill.stream SET end_lsn = $2::pg_lsn, updated_at = now() "
                  "WHERE slot = $1 AND target = $3 AND end_lsn < $2::pg_lsn AND "
                  "txn_lsn = '0/0' RETURNING 1) SELECT (EXISTS (SELECT 1 FROM u) OR EXISTS "
                  "(SELECT 1 FROM v7fill.stream WHERE slot = $1 AND target = $3 AND end_lsn >= "
                  "$2::pg_lsn AND txn_lsn = '0/0'))::text",
                  3, params, &res, err))
        return false;
    *stored = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "true") == 0;
    PQclear(res);
    return true;
}

bool
stream_state_quarantine(PgConn *c, const char *slot, const char *target, const char *relation,
                        const QuarantineRow *rows, size_t n, Err *err)
{
    for (size_t i = 0; i < n; i++)
    {
        char lsn[PGO_LSN_TEXT_SIZE];
        const char *params[7];

        pgo_lsn_format(rows[i].lsn, lsn);
        params[0] = slot;
        params[1] = target;
        params[2] = rows[i].lsn ? lsn : NULL;
        params[3] = relation;
        params[4] = rows[i].reason;
        params[5] = rows[i].sqlstate[0] ? rows[i].sqlstate : NULL;
        params[6] = rows[i].row_json;
        if (!pg_exec_params(c,
                            "INSERT INTO v7fill.stream_quarantine (slot, target, source_lsn, "
                            "relation, reason, sqlstate, row) VALUES ($1, $2, $3::pg_lsn, $4, "
                            "$5, $6, $7::jsonb)",
                            7, params, err))
        {
            err_prefix(err, "could not quarantine a row");
            return false;
        }
    }
    return true;
}

bool
stream_state_quarantine_forget_copy(PgConn *c, const char *slot, const char *target,
                                    const char *relation, uint64_t *rejected, uint64_t *expired,
                                    Err *err)
{
    const char *params[3] = {slot, target, relation};
    PGresult *res;

    *rejected = *expired = 0;
    /* One statement: the rows gone and the stored counts less them.  A row
     * kept although expired ("expired (kept)") is in the target: the copy
     * finds it a duplicate and writes no record again, so its record stays. */
    if (!pg_query(c,
                  "WITH gone AS (DELETE FROM v7fill.stream_quarantine WHERE slot = $1 AND "
                  "target = $2 AND relation = $3 AND source_lsn IS NULL AND reason NOT LIKE "
                  "'expired (kept)%' RETURNING reason LIKE 'expired%' AS x), "
                  "n AS (SELECT count(*) FILTER (WHERE NOT x) AS r, count(*) FILTER (WHERE x) AS "
                  "e FROM gone), "
                  "u AS (UPDATE v7fill.stream s SET read = greatest(s.read - n.r - n.e, 0), "
                  "rejected = greatest(s.rejected - n.r, 0), expired = greatest(s.expired - n.e, "
                  "0) FROM n WHERE s.slot = $1 AND s.target = $2 RETURNING 1) "
                  "SELECT r, e FROM n",
                  3, params, &res, err))
    {
        err_prefix(err, "could not clear the quarantine of an earlier copy");
        return false;
    }
    *rejected = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    *expired = strtoull(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    return true;
}

bool
stream_state_drop(PgConn *c, const char *slot, Err *err)
{
    const char *params[1] = {slot};

    return pg_exec_params(c, "DELETE FROM v7fill.stream WHERE slot = $1", 1, params, err);
}
