/*
 * run_history.c: folding a table's periodic run rows, an hour at a time
 * (run_history.h).
 */
#include "v7fill/run_history.h"

#include <inttypes.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/tracker.h"

/* The rows that may be folded ($1 schema, $2 table, $3 oid): periodic ones
 * (or folded before) carrying a tracker document, finished in an hour that
 * ended more than an hour ago.  Rows recorded before v7fill kept the table's
 * oid are left alone (they may be an earlier table's). */
#define FOLDABLE                                                                                 \
    " FROM v7fill.run WHERE target_schema = $1 AND target_table = $2 AND target_oid = $3::oid " \
    "  AND status IN ('importing', 'copying', 'streaming', 'folded') "                           \
    "  AND stats ->> 'format' LIKE 'v7fill-tracker/%' "                                           \
    "  AND finished_at < date_trunc('hour', now()) - interval '1 hour' "
/* One group: the same hour, command and retention settings ($4..$7). */
#define GROUP_KEYS                                                                               \
    "date_trunc('hour', finished_at), command, coalesce(stats ->> 'retention_us', ''), "         \
    "coalesce(stats ->> 'near_cutoff_us', '')"

/* Folds one group in a transaction: its rows deleted, their merge inserted.
 * A row whose document cannot be merged (edited by hand, a later format)
 * leaves its group as it is (the report skips that row, saying so); the
 * other groups are folded. */
static bool
fold_group(PgConn *c, const TargetTable *t, const char *const key[7], RunFold *out, Err *err)
{
    Err bad = {0};
    PGresult *res = NULL;
    Tracker *merged = NULL;
    uint64_t sum[5] = {0};
    int64_t first = INT64_MAX, last = INT64_MIN;
    char nums[5][24], elapsed[32], finished[32], oid[16];
    const char *ins[13];
    char *json = NULL;
    bool ok;
    Err ignored;

    if (!pg_exec(c, "BEGIN", err))
        return false;
    ok = pg_query(c,
                  "DELETE" FOLDABLE
                  "  AND finished_at >= $4::timestamptz "
                  "  AND finished_at < $4::timestamptz + interval '1 hour' "
                  "  AND date_trunc('hour', finished_at) = $4::timestamptz AND command = $5 "
                  "  AND coalesce(stats ->> 'retention_us', '') = $6 "
                  "  AND coalesce(stats ->> 'near_cutoff_us', '') = $7 "
                  "RETURNING stats::text, (extract(epoch FROM finished_at) * 1000000)::int8, "
                  "  (extract(epoch FROM finished_at) * 1000000 - elapsed_s * 1000000)::int8, "
                  "  rows_read, inserted, duplicates, rejected, partitions_created",
                  7, key, &res, err);
    for (int i = 0; ok && i < PQntuples(res); i++)
    {
        int64_t fin = strtoll(PQgetvalue(res, i, 1), NULL, 10);
        int64_t began = strtoll(PQgetvalue(res, i, 2), NULL, 10);

        if (merged == NULL)
        {
            int64_t ret = key[5][0] ? strtoll(key[5], NULL, 10) : 0;
            int64_t near = key[6][0] ? strtoll(key[6], NULL, 10) : 0;

            merged = tracker_new(ret, near);
        }
        if (!tracker_merge_json(merged, PQgetvalue(res, i, 0), &bad))
            break;
        for (int k = 0; k < 5; k++)
            sum[k] += strtoull(PQgetvalue(res, i, 3 + k), NULL, 10);
        if (fin > last)
            last = fin;
        if (began < first)
            first = began;
    }
    if (ok && bad.msg[0])
    {
        log_debug("%s.%s: the run rows of the hour %s are not folded: %s", t->schema, t->name,
                  key[3], bad.msg);
        PQclear(res);
        tracker_free(merged);
        if (!pg_exec(c, "ROLLBACK", &ignored))
            log_debug("rollback: %s", ignored.msg);
        return true;
    }
    if (ok && merged != NULL)
    {
        json = tracker_to_json(merged);
        for (int k = 0; k < 5; k++)
            (void) snprintf(nums[k], sizeof nums[k], "%" PRIu64, sum[k]);
        (void) snprintf(elapsed, sizeof elapsed, "%.6f", (double) (last - first) / 1e6);
        (void) snprintf(finished, sizeof finished, "%" PRId64, last);
        (void) snprintf(oid, sizeof oid, "%u", t->oid);
        ins[0] = t->schema;
        ins[1] = t->name;
        ins[2] = key[4];
        ins[3] = elapsed;
        for (int k = 0; k < 5; k++)
            ins[4 + k] = nums[k];
        ins[9] = json;
        ins[10] = oid;
        ins[11] = finished;
        ok = json != NULL &&
             pg_exec_params(c,
                            "INSERT INTO v7fill.run (target_schema, target_table, command, status, "
                            "elapsed_s, rows_read, inserted, duplicates, rejected, "
                            "partitions_created, stats, target_oid, finished_at) "
                            "VALUES ($1, $2, $3, 'folded', $4, $5, $6, $7, $8, $9, $10::jsonb, "
                            "$11, to_timestamp($12::int8 / 1000000.0))",
                            12, ins, err);
        if (ok)
        {
            out->rows += (uint64_t) PQntuples(res);
            out->into++;
        }
    }
    PQclear(res);
    tracker_free(merged);
    free(json);
    if (ok)
        return pg_exec(c, "COMMIT", err);
    if (!pg_exec(c, "ROLLBACK", &ignored))
        log_debug("rollback: %s", ignored.msg);
    return false;
}

/* The index each hour's DELETE goes through.  Without it every DELETE reads
 * every run row of every table, and its filter opens their documents: folding
 * a month of one stream (43,200 rows) took 273 s, quadratic in the rows.
 * v7fill's schema has it from creation (state.c); a schema made by an earlier
 * version gets it here when this role owns v7fill.run, with a short lock
 * wait (the INSERTs of running imports and streams queue behind the build).
 * Otherwise the folding goes on without it, and says what to run (*why, when
 * there is something to fold). */
static void
ensure_run_index(PgConn *c, Err *why)
{
    PGresult *res;
    Err e = {0}, ignored;
    bool have, owner;

    if (!pg_query(c,
                  "SELECT to_regclass('v7fill." RUN_INDEX "') IS NOT NULL, "
                  "pg_has_role(relowner, 'USAGE') FROM pg_catalog.pg_class "
                  "WHERE oid = 'v7fill.run'::regclass",
                  0, NULL, &res, &e))
    {
        log_debug("v7fill.run's index: %s", e.msg);
        return;
    }
    have = PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    owner = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    PQclear(res);
    if (have)
        return;
    if (owner && pg_exec(c, "BEGIN", &e) && pg_exec(c, "SET LOCAL lock_timeout = '2s'", &e) &&
        pg_exec(c, RUN_INDEX_SQL, &e) && pg_exec(c, "COMMIT", &e))
    {
        log_info("created the index v7fill." RUN_INDEX " on v7fill.run (folding the run "
                 "history reads only the hours it folds)");
        return;
    }
    if (owner && !pg_exec(c, "ROLLBACK", &ignored))
        log_debug("rollback: %s", ignored.msg);
    err_set(why, EC_CONFIG,
            "v7fill.run has no index for folding, so folding reads the whole run history once "
            "per hour it folds%s%s; as the owner of v7fill.run: %s",
            owner ? ": " : "", owner ? e.msg : "", RUN_INDEX_SQL);
}

bool
run_row_key(char key[33])
{
    unsigned char raw[16];

    key[0] = '\0';
    if (RAND_bytes(raw, sizeof raw) != 1)
        return false;
    for (size_t i = 0; i < sizeof raw; i++)
        (void) snprintf(key + 2 * i, 3, "%02x", raw[i]);
    return true;
}

void
run_row_failed(RunRowPending *p, Pipeline *pl, PgConn *c, const char *key, PipelineSegment *seg)
{
    if (!pg_is_broken(c) || p->set || key[0] == '\0')
    {
        /* refused: nothing landed (or one is kept already, or no key to look
         * it up by: carried) */
        pipeline_return_segment(pl, seg);
        return;
    }
    p->set = true;
    (void) snprintf(p->key, sizeof p->key, "%s", key);
    p->seg = *seg;
    memset(seg, 0, sizeof *seg);
}

bool
run_row_settle(RunRowPending *p, Pipeline *pl, PgConn *c, const TargetTable *t, bool final,
               Err *err)
{
    const char *params[3];
    PGresult *res;
    bool landed;

    if (!p->set)
        return true;
    params[0] = t->schema;
    params[1] = t->name;
    params[2] = p->key;
    /* Through the index; a row kept aside a day (the target down that long)
     * is looked for no further back. */
    if (!pg_query(c,
                  "SELECT count(*) FROM v7fill.run WHERE target_schema = $1 AND target_table = $2 "
                  "AND finished_at > now() - interval '1 day' AND stats ->> 'row_key' = $3",
                  3, params, &res, err))
    {
        if (final)
        {
            p->set = false;
            pipeline_return_segment(pl, &p->seg);
        }
        return false;
    }
    landed = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
    PQclear(res);
    p->set = false;
    if (landed)
    {
        log_debug("%s.%s: the run row whose answer was lost had landed (%s)", t->schema, t->name,
                  p->key);
        free(p->seg.delay_json);
        memset(&p->seg, 0, sizeof p->seg);
    }
    else
        pipeline_return_segment(pl, &p->seg);
    return true;
}

void
run_row_pending_free(RunRowPending *p)
{
    if (p->set)
        free(p->seg.delay_json);
    memset(p, 0, sizeof *p);
}

bool
run_history_fold(PgConn *c, const TargetTable *t, bool dry_run, int max_hours, RunFold *out,
                 Err *err)
{
    char oid[16], limit[16];
    const char *p[4];
    PGresult *groups = NULL;
    Err noindex = {0};
    bool ok;

    memset(out, 0, sizeof *out);
    (void) snprintf(oid, sizeof oid, "%u", t->oid);
    p[0] = t->schema;
    p[1] = t->name;
    p[2] = oid;
    (void) snprintf(limit, sizeof limit, "%d", max_hours > 0 ? max_hours : 1000);
    p[3] = limit;
    /* Nothing to fold, or not this role's to fold (a stream's role needs
     * only INSERT): said by the caller. */
    if (!pg_query(c,
                  "SELECT CASE WHEN to_regclass('v7fill.run') IS NULL THEN 'none' "
                  "WHEN has_table_privilege('v7fill.run', 'SELECT') AND "
                  "has_table_privilege('v7fill.run', 'INSERT') AND "
                  "has_table_privilege('v7fill.run', 'DELETE') AND "
                  "has_sequence_privilege('v7fill.run_run_id_seq', 'USAGE') THEN 'ok' "
                  "ELSE 'denied' END, to_regclass('v7fill." RUN_INDEX "') IS NOT NULL",
                  0, NULL, &groups, err))
        return false;
    out->denied = strcmp(PQgetvalue(groups, 0, 0), "denied") == 0;
    ok = strcmp(PQgetvalue(groups, 0, 0), "ok") == 0;
    out->no_index = ok && max_hours > 0 && strcmp(PQgetvalue(groups, 0, 1), "t") != 0;
    PQclear(groups);
    if (!ok || out->no_index)
        return true;
    if (!dry_run && max_hours == 0)
        ensure_run_index(c, &noindex);
    /* A bounded number of hours per call: the next call folds the rest.
     * Read from the first hour that has a row not folded yet (through the
     * index, without opening documents): the folded hours before it, a year
     * of them for a stream, are not read again each time.  An hour with a
     * single periodic row is folded too (into a folded row of one): left as
     * it was, it would stay the first hour not folded, and every later call
     * would read all the history after it again. */
    if (!pg_query(c,
                  "SELECT " GROUP_KEYS ", count(*)" FOLDABLE
                  "  AND finished_at >= (SELECT date_trunc('hour', min(finished_at)) "
                  "    FROM v7fill.run WHERE target_schema = $1 AND target_table = $2 "
                  "    AND target_oid = $3::oid "
                  "    AND status IN ('importing', 'copying', 'streaming')) "
                  "GROUP BY 1, 2, 3, 4 HAVING count(*) > 1 OR bool_or(status <> 'folded') "
                  "ORDER BY 1 LIMIT $4::int",
                  4, p, &groups, err))
    {
        err_prefix(err, "could not read the run history (v7fill.run)");
        return false;
    }
    ok = true;
    if (noindex.msg[0] && PQntuples(groups) > 0)
        log_info("%s", noindex.msg);
    for (int i = 0; ok && i < PQntuples(groups); i++)
    {
        const char *key[7] = {p[0], p[1], p[2], PQgetvalue(groups, i, 0),
                              PQgetvalue(groups, i, 1), PQgetvalue(groups, i, 2),
                              PQgetvalue(groups, i, 3)};

        if (dry_run)
        {
            out->into++;
            out->rows += strtoull(PQgetvalue(groups, i, 4), NULL, 10);
        }
        else
            ok = fold_group(c, t, key, out, err);
    }
    PQclear(groups);
    if (!ok)
        err_prefix(err, "could not fold the run history of %s.%s (v7fill.run)", t->schema,
                   t->name);
    return ok;
}
