/*
 * load_analyze.c: the closing ANALYZE of a load (load_analyze.h).
 */
#include "v7fill/load_analyze.h"

#include <stdio.h>
#include <stdlib.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/monotime.h"

static bool
interrupted(void)
{
    return interrupt_signal() != 0;
}

/* "VERB relation", cancelled by a signal (*cancelled then): on a large table
 * these statements can take minutes. */
static bool
exec_cancellable(PgConn *conn, const char *verb, const char *rel, bool *cancelled, Err *err)
{
    char *sql = xasprintf("%s %s", verb, rel);
    bool ok = pg_exec_cancellable(conn, sql, interrupted, cancelled, err);

    free(sql);
    return ok;
}

static bool
analyze_once(Pipeline *pl, PgConn *conn, const char *done, const char *skip_hint, Err *err)
{
    const char *target_q = pipeline_target_q(pl);
    const char *lookup_q = pipeline_lookup_q(pl);
    double t0 = monotime_s();
    bool cancelled;

    log_info("ANALYZE %s and its partitions (%s skips this)", target_q, skip_hint);
    if (!exec_cancellable(conn, "ANALYZE", target_q, &cancelled, err))
        return false;
    if (cancelled)
    {
        log_warn("interrupted: the closing ANALYZE cancelled after %.1f s and VACUUM "
                 "(ANALYZE) %s skipped; %s (ANALYZE %s gives the parent its statistics)",
                 monotime_s() - t0, lookup_q, done, target_q);
        return true;
    }
    if (interrupted())
    {
        log_warn("interrupted: VACUUM (ANALYZE) %s skipped; %s", lookup_q, done);
        return true;
    }
    log_info("ANALYZE done in %.1f s; VACUUM (ANALYZE) %s", monotime_s() - t0, lookup_q);
    t0 = monotime_s();
    /* measured: 10,000 duplicate probes 55 ms -> 37 ms once vacuumed */
    if (!exec_cancellable(conn, "VACUUM (ANALYZE)", lookup_q, &cancelled, err))
        return false;
    if (cancelled)
    {
        log_warn("interrupted: VACUUM (ANALYZE) %s cancelled; %s", lookup_q, done);
        return true;
    }
    log_info("VACUUM done in %.1f s", monotime_s() - t0);
    return true;
}

bool
load_analyze(Pipeline *pl, PgConn *conn, const char *done, const char *skip_hint, double *secs,
             Err *err)
{
    double t0 = monotime_s();

    for (int attempts = 0;; attempts++)
    {
        if (analyze_once(pl, conn, done, skip_hint, err))
        {
            *secs = monotime_s() - t0;
            return true;
        }
        if (!pg_err_is_connection(err) || attempts >= 5 || !pipeline_reconnect(pl, err))
        {
            err_prefix(err, "%s, but the closing ANALYZE and VACUUM did not complete", done);
            return false;
        }
    }
}
