/*
 * stream_admin.c: a stream's status and its removal (see stream_admin.h).
 */
#include "v7fill/stream_admin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/pgoutput.h"
#include "v7fill/state.h"
#include "v7fill/stream_observe.h"

char *
stream_conninfo_without_password(const char *conninfo)
{
    PQconninfoOption *opts;
    char *errmsg = NULL;
    Buf b;

    buf_init(&b);
    if (conninfo && conninfo[0] && (opts = PQconninfoParse(conninfo, &errmsg)) != NULL)
    {
        for (PQconninfoOption *o = opts; o->keyword; o++)
        {
            if (o->val == NULL || o->val[0] == '\0' || strcmp(o->keyword, "password") == 0)
                continue;
            conninfo_put_option(&b, o->keyword, o->val);
        }
        PQconninfoFree(opts);
    }
    PQfreemem(errmsg);
    buf_putc(&b, '\0');
    return b.data;
}

bool
stream_admin_remember_source(PgConn *target, const char *slot, const char *conninfo, Err *err)
{
    char *clean = stream_conninfo_without_password(conninfo);
    const char *params[2] = {slot, clean};
    bool ok;

    ok = state_create_once(target,
                           "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
                           "'v7fill.stream'::regclass AND attname = 'source_conninfo' AND NOT "
                           "attisdropped)",
                           "ALTER TABLE v7fill.stream ADD COLUMN IF NOT EXISTS source_conninfo text",
                           "the stream's source connection (v7fill.stream.source_conninfo)", err) &&
         pg_exec_params(target,
                        "UPDATE v7fill.stream SET source_conninfo = $2 WHERE slot = $1 AND "
                        "source_conninfo IS DISTINCT FROM $2",
                        2, params, err);
    free(clean);
    return ok;
}

/* The target's part: the row's time, the stored source conninfo, the quarantine count. */
static bool
status_target(PgConn *target, const char *slot, StreamStatus *out, char **stored, Err *err)
{
    PGresult *res;
    const char *params[1] = {slot};

    *stored = NULL;
    /* Only reads: no v7fill.stream yet means no stream, not a table to create. */
    if (!pg_query(target, "SELECT to_regclass('v7fill.stream') IS NOT NULL AND "
                          "to_regclass('v7fill.stream_quarantine') IS NOT NULL",
                  0, NULL, &res, err))
        return false;
    if (PQgetvalue(res, 0, 0)[0] != 't')
    {
        PQclear(res);
        return true;
    }
    PQclear(res);
    if (!stream_state_get(target, slot, NULL, &out->state, err))
        return false;
    if (!pg_query(target,
                  /* A slot of several tables has a row per target: the latest. */
                  "SELECT (SELECT to_char(max(updated_at), 'YYYY-MM-DD HH24:MI:SS.MSOF') FROM "
                  "v7fill.stream WHERE slot = $1), (SELECT extract(epoch FROM now() - "
                  "max(updated_at))::float8 FROM v7fill.stream WHERE slot = $1), (SELECT count(*) "
                  "FROM v7fill.stream_quarantine WHERE slot = $1), (SELECT max(to_jsonb(s) ->> "
                  "'source_conninfo') FROM v7fill.stream s WHERE slot = $1)",
                  1, params, &res, err))
        return false;
    (void) snprintf(out->updated_at, sizeof out->updated_at, "%s", PQgetvalue(res, 0, 0));
    out->since_update_s = atof(PQgetvalue(res, 0, 1));
    out->quarantined = strtoull(PQgetvalue(res, 0, 2), NULL, 10);
    if (!PQgetisnull(res, 0, 3))
        *stored = xstrdup(PQgetvalue(res, 0, 3));
    PQclear(res);
    return true;
}

/* The source to use: --source, else the stored one; *src connected or
 * source_error filled. */
static void
status_source(const char *given, const char *stored, const char *slot, StreamStatus *out,
              PgConn **src)
{
    char *clean = stream_conninfo_without_password(given ? given : stored);
    Err serr = {0};

    *src = NULL;
    (void) snprintf(out->source, sizeof out->source, "%s", clean);
    free(clean);
    if (given == NULL && stored == NULL)
    {
        (void) snprintf(out->source_error, sizeof out->source_error,
                        "the target does not hold the source's connection string (a stream "
                        "started before this version): give --source");
        return;
    }
    if (!pg_connect(given ? given : stored, src, &serr) ||
        !stream_slot_wal(*src, slot, &out->slot, &serr) ||
        !stream_clock_offset(*src, &out->source_offset_us, &serr))
    {
        (void) snprintf(out->source_error, sizeof out->source_error, "%s", serr.msg);
        pg_close(*src);
        *src = NULL;
        return;
    }
    out->source_ok = true;
}

bool
stream_admin_status(PgConn *target, const char *slot, const char *source_conninfo,
                    StreamStatus *out, Err *err)
{
    char *stored = NULL;
    PgConn *src = NULL;

    memset(out, 0, sizeof *out);
    if (!status_target(target, slot, out, &stored, err))
        return false;
    status_source(source_conninfo, stored, slot, out, &src);
    free(stored);
    pg_close(src);
    if (!out->state.found && (!out->source_ok || !out->slot.exists))
        return err_set(err, EC_CONFIG,
                       "no stream with slot \"%s\": the target has no row for it in "
                       "v7fill.stream%s",
                       slot, out->source_ok ? " and the source has no such slot" : "");
    if (out->source_ok && out->state.found)
    {
        out->lag_bytes = out->slot.current_lsn > out->state.end_lsn
                             ? out->slot.current_lsn - out->state.end_lsn
                             : 0;
        out->lag_s = out->lag_bytes > 0 ? out->since_update_s : 0;
        if (out->lag_bytes > 0 && out->state.commit_time_us > 0)
        {
            struct timespec ts;

            clock_gettime(CLOCK_REALTIME, &ts);
            out->lag_s = stream_lag_seconds((int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000,
                                            out->source_offset_us, 0, out->state.commit_time_us);
            out->lag_s_exact = true;
        }
    }
    return true;
}

/* Terminate the slot's walsender and wait (10 s at most) for the slot to be free. */
static bool
stop_walsender(PgConn *src, const char *slot, int pid, Err *err)
{
    char pidtext[16];
    const char *params[2] = {pidtext, slot};
    PGresult *res;

    (void) snprintf(pidtext, sizeof pidtext, "%d", pid);
    log_info("terminating the walsender (pid %d) of slot \"%s\" on the source", pid, slot);
    if (!pg_exec_params(src, "SELECT pg_terminate_backend($1::int)", 1, params, err))
        return false;
    for (int i = 0; i < 100; i++)
    {
        bool active;

        if (!pg_query(src,
                      "SELECT coalesce((SELECT active FROM pg_replication_slots WHERE slot_name "
                      "= $2 AND active_pid = $1::int), false)",
                      2, params, &res, err))
            return false;
        active = PQgetvalue(res, 0, 0)[0] == 't';
        PQclear(res);
        if (!active)
            return true;
        (void) usleep(100000);
    }
    return err_set(err, EC_PG_QUERY,
                   "the walsender (pid %d) of slot \"%s\" did not stop within 10 s", pid, slot);
}

bool
stream_admin_drop(PgConn *target, const char *slot, const char *source_conninfo,
                  const StreamStatus *st, Err *err)
{
    const char *params[1] = {slot};
    PgConn *src = NULL;
    bool ok = true;

    if (st->source_ok && st->slot.exists)
    {
        if (!pg_connect(source_conninfo, &src, err))
        {
            err_prefix(err, "the source");
            return false;
        }
        if (st->slot.active)
        {
            if (!st->state.found || strcmp(st->slot.plugin, "pgoutput") != 0)
            {
                pg_close(src);
                return err_set(err, EC_CONFIG,
                               "replication slot \"%s\" is in use (pid %d) and is not this "
                               "stream's: not touched",
                               slot, st->slot.active_pid);
            }
            ok = stop_walsender(src, slot, st->slot.active_pid, err);
        }
        ok = ok && pg_exec_params(src, "SELECT pg_drop_replication_slot($1)", 1, params, err);
        pg_close(src);
        if (!ok)
        {
            err_prefix(err, "could not drop replication slot \"%s\" on the source", slot);
            return false;
        }
        log_info("dropped replication slot \"%s\" on the source", slot);
    }
    if (st->state.found)
    {
        if (!stream_state_drop(target, slot, err))
            return false;
        log_info("deleted the stream's row (slot \"%s\") from v7fill.stream", slot);
    }
    return true;
}
