/*
 * The replication connection to the source of `v7fill stream` and the checks
 * run before it (shared docs pgoutput.md §1-§3, §5).  A logical walsender
 * speaks the simple query protocol only: every command is one PQexec (or
 * PQsendQuery), identifiers go through PQescapeIdentifier and values through
 * PQescapeLiteral.
 */
#include "v7fill/replconn.h"

#include "v7fill/pgoutput.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/monotime.h"

/* µs between 1970-01-01 and 2000-01-01, the epoch of the protocol's clock. */
/* CREATE_REPLICATION_SLOT taking longer than this is waiting for transactions. */
#define REPL_SLOT_WAIT_LOG_MS 2000

/* replconn_recv: when the messages of a read of the socket came to fewer
 * bytes than this, the socket held no more (libpq reads at least 8 KB when
 * that much is there), and a pause of REPL_GATHER_US comes before the next
 * wait. */
#define REPL_THIN_READ 4096
#define REPL_GATHER_US 500

struct ReplConn
{
    PGconn *conn;
    bool in_copy; /* START_REPLICATION succeeded and the copy has not ended */
    size_t handed; /* bytes of the messages handed out since the socket was last read */
};

/* ------------------------------------------------------------ pure helpers */

/* Slot names as the server accepts them: lower case letters, digits and
 * underscores, 1 to 63 bytes (ReplicationSlotValidateName). */
static bool
slot_name_check(const char *slot, Err *err)
{
    size_t n = slot ? strlen(slot) : 0;
    char shown[128];

    if (n == 0 || n > 63)
        return err_set(err, EC_USAGE, "replication slot name must be 1 to 63 bytes long");
    for (size_t i = 0; i < n; i++)
        if (!((slot[i] >= 'a' && slot[i] <= 'z') || (slot[i] >= '0' && slot[i] <= '9') ||
              slot[i] == '_'))
        {
            err_set(err, EC_USAGE, "replication slot name \"%s\" is invalid",
                    err_printable(slot, shown, sizeof shown));
            err_hint(err, "Slot names may contain only lower case letters, digits and "
                          "underscores.");
            return false;
        }
    return true;
}

/* A name for a message, quoted as SQL would need it (for the SQL we suggest). */
static void
sql_name(const char *name, char *buf, size_t size)
{
    bool plain = name[0] != '\0' && !(name[0] >= '0' && name[0] <= '9');
    size_t o = 0;

    for (const char *p = name; *p && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
    if (plain)
    {
        (void) snprintf(buf, size, "%s", name);
        return;
    }
    if (size < 3)
    {
        buf[0] = '\0';
        return;
    }
    buf[o++] = '"';
    for (const char *p = name; *p && o + 3 < size; p++)
    {
        unsigned char c = (unsigned char) *p;
        if (c < 0x20 || c == 0x7f)
            continue;
        if (c == '"')
            buf[o++] = '"';
        buf[o++] = (char) c;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

/* ------------------------------------------------------------- connection */

static void
trim_message(char *msg)
{
    size_t len = strlen(msg);
    while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
        msg[--len] = '\0';
}

/* Err from a failed command on the replication connection. */
static bool
repl_err(ReplConn *r, PGresult *res, const char *what, Err *err)
{
    pg_err_from_result(err, NULL, res, what);
    if (res == NULL || PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) == NULL)
    {
        char msg[sizeof err->msg];

        (void) snprintf(msg, sizeof msg, "%s", PQerrorMessage(r->conn));
        trim_message(msg);
        err_set(err, EC_PG_CONNECT, "%s: %s", what, msg[0] ? msg : "no result");
    }
    if (PQstatus(r->conn) == CONNECTION_BAD)
        err->code = EC_PG_CONNECT;
    return false;
}

/* Run a command; on success *out holds its result (caller PQclears). */
static bool
repl_exec(ReplConn *r, const char *sql, PGresult **out, Err *err)
{
    PGresult *res;
    ExecStatusType st;

    *out = NULL;
    if (r->in_copy)
        return err_set(err, EC_INTERNAL, "replication connection is streaming: stop it first");
    log_debug("[%d] (replication) %s", PQbackendPID(r->conn), sql);
    res = PQexec(r->conn, sql);
    st = PQresultStatus(res);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
    {
        repl_err(r, res, "replication command failed", err);
        PQclear(res);
        return false;
    }
    *out = res;
    return true;
}

static bool
repl_exec_simple(ReplConn *r, const char *sql, Err *err)
{
    PGresult *res;

    if (!repl_exec(r, sql, &res, err))
        return false;
    PQclear(res);
    return true;
}

/* The connection failed: say why, with what to do for the known causes. */
static bool
open_error(PGconn *conn, const char *conninfo, Err *err)
{
    char msg[sizeof err->msg];
    char user[160];

    (void) snprintf(msg, sizeof msg, "%s", PQerrorMessage(conn));
    trim_message(msg);
    pg_redact_message(conninfo, msg);
    sql_name(PQuser(conn) ? PQuser(conn) : "", user, sizeof user);
    if (strstr(msg, "must be superuser or replication role") != NULL)
    {
        err_set(err, EC_CONFIG, "role %s may not open a replication connection to the source; "
                                "run: ALTER ROLE %s REPLICATION;",
                user, user);
        err_detail(err, "The server said: %s", msg);
        return false;
    }
    if (strstr(msg, "no pg_hba.conf entry") != NULL)
    {
        err_set(err, EC_CONFIG, "the source's pg_hba.conf does not let role %s in: %s", user, msg);
        err_hint(err, "A logical replication connection is matched by its database name, not by "
                      "the \"replication\" keyword: add a line for this database and role "
                      "to pg_hba.conf, then run: SELECT pg_reload_conf();");
        return false;
    }
    err_set(err, EC_PG_CONNECT, "could not open a replication connection to the source: %s", msg);
    err_hint(err, "Check --source (the source's connection string).");
    return false;
}

bool
replconn_open(const char *conninfo, ReplConn **out, Err *err)
{
    char *options = pg_options_with(conninfo, "-c datestyle=ISO -c intervalstyle=postgres "
                                              "-c extra_float_digits=3 -c TimeZone=UTC");
    const char *keys[] = {"dbname",          "replication", "fallback_application_name",
                          "client_encoding", "options",     NULL};
    const char *vals[] = {conninfo ? conninfo : "", "database", "v7fill", "UTF8", options, NULL};
    ReplConn *r;
    PGresult *res;
    bool ok;

    *out = NULL;
    r = xcalloc(1, sizeof *r);
    r->conn = PQconnectdbParams(keys, vals, 1);
    free(options);
    if (r->conn == NULL)
    {
        free(r);
        return err_set(err, EC_PG_CONNECT, "could not allocate a connection");
    }
    if (PQstatus(r->conn) != CONNECTION_OK)
    {
        open_error(r->conn, conninfo, err);
        replconn_close(r);
        return false;
    }
    /* No timeout may cut a slot creation that waits for long transactions;
     * and without wal_level logical nothing that follows works: say so now. */
    ok = repl_exec_simple(r, "SET statement_timeout = 0", err) &&
         repl_exec_simple(r, "SET idle_in_transaction_session_timeout = 0", err) &&
         repl_exec(r, "SHOW wal_level", &res, err);
    if (ok)
    {
        const char *level = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "unknown";

        if (strcmp(level, "logical") != 0)
        {
            err_set(err, EC_CONFIG,
                    "wal_level is %s on the source; run: ALTER SYSTEM SET wal_level = logical; "
                    "then restart it",
                    level);
            ok = false;
        }
        PQclear(res);
    }
    if (!ok)
    {
        replconn_close(r);
        return false;
    }
    *out = r;
    return true;
}

void
replconn_close(ReplConn *r)
{
    if (r == NULL)
        return;
    if (r->conn)
        PQfinish(r->conn);
    free(r);
}

int
replconn_socket(ReplConn *r)
{
    return PQsocket(r->conn);
}

int
replconn_server_version(ReplConn *r)
{
    return PQserverVersion(r->conn);
}

bool
replconn_identify(ReplConn *r, ReplSystem *out, Err *err)
{
    PGresult *res;
    unsigned long tli;
    char *end;

    memset(out, 0, sizeof *out);
    if (!repl_exec(r, "IDENTIFY_SYSTEM", &res, err))
        return false;
    if (PQntuples(res) != 1 || PQnfields(res) < 4)
    {
        PQclear(res);
        return err_set(err, EC_PG_QUERY, "IDENTIFY_SYSTEM returned an unexpected result");
    }
    (void) snprintf(out->systemid, sizeof out->systemid, "%s", PQgetvalue(res, 0, 0));
    errno = 0;
    tli = strtoul(PQgetvalue(res, 0, 1), &end, 10);
    if (errno != 0 || *end != '\0' || tli > UINT32_MAX ||
        !pgo_lsn_parse(PQgetvalue(res, 0, 2), &out->xlogpos))
    {
        PQclear(res);
        return err_set(err, EC_PG_QUERY, "IDENTIFY_SYSTEM returned an unexpected result");
    }
    out->timeline = (uint32_t) tli;
    if (!PQgetisnull(res, 0, 3))
        (void) snprintf(out->dbname, sizeof out->dbname, "%s", PQgetvalue(res, 0, 3));
    PQclear(res);
    return true;
}

/* ------------------------------------------------------------------ slots */

bool
replconn_slot_info(ReplConn *r, const char *slot, ReplSlotInfo *out, Err *err)
{
    char *lit;
    char *sql;
    PGresult *res;
    bool ok;

    memset(out, 0, sizeof *out);
    out->safe_wal_size = -1;
    lit = PQescapeLiteral(r->conn, slot, strlen(slot));
    if (lit == NULL)
        return repl_err(r, NULL, "could not quote the slot name", err);
    sql = xasprintf("SELECT plugin, database, active, active_pid, restart_lsn, "
                    "confirmed_flush_lsn, wal_status, safe_wal_size, temporary "
                    "FROM pg_catalog.pg_replication_slots WHERE slot_name = %s",
                    lit);
    PQfreemem(lit);
    ok = repl_exec(r, sql, &res, err);
    free(sql);
    if (!ok)
        return false;
    if (PQntuples(res) == 1)
    {
        out->exists = true;
        (void) snprintf(out->plugin, sizeof out->plugin, "%s", PQgetvalue(res, 0, 0));
        (void) snprintf(out->database, sizeof out->database, "%s", PQgetvalue(res, 0, 1));
        out->active = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
        out->active_pid = PQgetisnull(res, 0, 3) ? 0 : atoi(PQgetvalue(res, 0, 3));
        if (!PQgetisnull(res, 0, 4))
            (void) pgo_lsn_parse(PQgetvalue(res, 0, 4), &out->restart_lsn);
        if (!PQgetisnull(res, 0, 5))
            (void) pgo_lsn_parse(PQgetvalue(res, 0, 5), &out->confirmed_flush_lsn);
        (void) snprintf(out->wal_status, sizeof out->wal_status, "%s", PQgetvalue(res, 0, 6));
        if (!PQgetisnull(res, 0, 7))
            out->safe_wal_size = strtoll(PQgetvalue(res, 0, 7), NULL, 10);
        out->temporary = strcmp(PQgetvalue(res, 0, 8), "t") == 0;
    }
    PQclear(res);
    return true;
}

/* Wait for the result of a command sent with PQsendQuery, logging once when it
 * takes longer than log_after_ms; the last result is returned.  SIGINT or
 * SIGTERM cancels the command (*cancelled: it was asked to). */
static PGresult *
wait_result(ReplConn *r, int64_t log_after_ms, const char *log_line, bool *cancelled)
{
    int64_t start = monotime_ms();
    bool logged = false;
    PGresult *last = NULL;
    PGresult *res;

    *cancelled = false;
    while (PQisBusy(r->conn))
    {
        struct pollfd pfd = {PQsocket(r->conn), POLLIN, 0};
        int rc = poll(&pfd, 1, 250);

        if (rc < 0 && errno != EINTR)
            break;
        if (!logged && monotime_ms() - start > log_after_ms)
        {
            log_info("%s", log_line);
            logged = true;
        }
        if (!*cancelled && interrupt_signal() != 0)
        {
            PGcancel *pc = PQgetCancel(r->conn);
            char msg[256];

            *cancelled = true;
            if (pc == NULL || !PQcancel(pc, msg, sizeof msg))
                log_warn("could not cancel the slot creation: %s", pc ? msg : "no cancel handle");
            PQfreeCancel(pc);
        }
        if (!PQconsumeInput(r->conn))
            break;
    }
    while ((res = PQgetResult(r->conn)) != NULL)
    {
        if (last == NULL || PQresultStatus(last) == PGRES_TUPLES_OK ||
            PQresultStatus(last) == PGRES_COMMAND_OK)
        {
            PQclear(last);
            last = res;
        }
        else
            PQclear(res);
    }
    return last;
}

bool
replconn_create_slot(ReplConn *r, const char *slot, uint64_t *consistent_lsn, char *snapshot,
                     size_t snapshot_size, Err *err)
{
    char *ident;
    char *sql;
    char line[200];
    PGresult *res;
    bool cancelled;

    *consistent_lsn = 0;
    if (snapshot_size)
        snapshot[0] = '\0';
    if (!slot_name_check(slot, err))
        return false;
    if (r->in_copy)
        return err_set(err, EC_INTERNAL, "replication connection is streaming: stop it first");
    ident = PQescapeIdentifier(r->conn, slot, strlen(slot));
    if (ident == NULL)
        return repl_err(r, NULL, "could not quote the slot name", err);
    /* Servers before 15 know only the old syntax. */
    if (PQserverVersion(r->conn) >= 150000)
        sql = xasprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput (SNAPSHOT 'export')", ident);
    else
        sql = xasprintf("CREATE_REPLICATION_SLOT %s LOGICAL pgoutput EXPORT_SNAPSHOT", ident);
    PQfreemem(ident);
    log_debug("[%d] (replication) %s", PQbackendPID(r->conn), sql);
    if (!PQsendQuery(r->conn, sql))
    {
        free(sql);
        return repl_err(r, NULL, "could not create the replication slot", err);
    }
    free(sql);
    (void) snprintf(line, sizeof line,
                    "creating replication slot \"%s\": waiting for running transactions on the "
                    "source to finish",
                    slot);
    res = wait_result(r, REPL_SLOT_WAIT_LOG_MS, line, &cancelled);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) < 3)
    {
        if (cancelled)
            err_set(err, EC_INTERRUPTED, "interrupted by %s while creating replication slot "
                                         "\"%s\"",
                    interrupt_name(), slot);
        else if (PQresultStatus(res) == PGRES_TUPLES_OK)
            err_set(err, EC_PG_QUERY, "CREATE_REPLICATION_SLOT returned an unexpected result");
        else
        {
            repl_err(r, res, "could not create the replication slot", err);
            if (strcmp(err->sqlstate, "42710") == 0)
                err_hint(err, "The slot exists: resume from it, or drop it first (SELECT "
                              "pg_drop_replication_slot('%s');).",
                         slot);
        }
        PQclear(res);
        return false;
    }
    if (!pgo_lsn_parse(PQgetvalue(res, 0, 1), consistent_lsn) || PQgetisnull(res, 0, 2) ||
        strlen(PQgetvalue(res, 0, 2)) >= snapshot_size)
    {
        PQclear(res);
        return err_set(err, EC_PG_QUERY,
                       "CREATE_REPLICATION_SLOT returned no consistent point or snapshot");
    }
    (void) snprintf(snapshot, snapshot_size, "%s", PQgetvalue(res, 0, 2));
    PQclear(res);
    {
        char lsn[PGO_LSN_TEXT_SIZE];
        pgo_lsn_format(*consistent_lsn, lsn);
        log_detail("replication slot \"%s\" created: consistent point %s, snapshot %s", slot,
                   lsn, snapshot);
    }
    return true;
}

bool
replconn_drop_slot(ReplConn *r, const char *slot, Err *err)
{
    char *ident;
    char *sql;
    bool ok;

    if (!slot_name_check(slot, err))
        return false;
    ident = PQescapeIdentifier(r->conn, slot, strlen(slot));
    if (ident == NULL)
        return repl_err(r, NULL, "could not quote the slot name", err);
    sql = xasprintf("DROP_REPLICATION_SLOT %s WAIT", ident);
    PQfreemem(ident);
    ok = repl_exec_simple(r, sql, err);
    free(sql);
    if (!ok)
        err_prefix(err, "could not drop replication slot \"%s\"", slot);
    return ok;
}

/* ------------------------------------------------------------- streaming */

/* The START_REPLICATION failed: name the cause and what to do. */
static bool
start_error(ReplConn *r, PGresult *res, const char *slot, Err *err)
{
    const char *detail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
    const char *pid;

    repl_err(r, res, "could not start streaming", err);
    if (strstr(err->msg, "is active for PID") != NULL &&
        (pid = strstr(err->msg, "PID ")) != NULL)
    {
        err_hint(err, "Another consumer is streaming from slot \"%s\"; retry when it has "
                      "stopped, or end it if it is dead: SELECT pg_terminate_backend(%d);",
                 slot, atoi(pid + 4));
        return false;
    }
    if (strstr(err->msg, "cannot read from logical replication slot") != NULL ||
        (detail && strstr(detail, "invalidated") != NULL))
    {
        char sqlstate[6];

        memcpy(sqlstate, err->sqlstate, sizeof sqlstate);
        err_set(err, EC_CONFIG,
                "replication slot \"%s\" is invalidated (wal_status lost): the source removed "
                "WAL it still needed; run the stream again with --resnapshot to drop it, "
                "create it again and redo the initial copy",
                slot);
        memcpy(err->sqlstate, sqlstate, sizeof sqlstate);
        if (detail)
            err_detail(err, "%s", detail);
        err_hint(err, "Rows already imported are not duplicated: the copy deduplicates. Raise "
                      "max_slot_wal_keep_size on the source to keep this from happening again.");
        return false;
    }
    return false;
}

bool
replconn_start(ReplConn *r, const char *slot, uint64_t start_lsn, const char *publications,
               int proto_version, bool streaming, Err *err)
{
    char *ident;
    char *pubs;
    char *sql;
    char lsn[PGO_LSN_TEXT_SIZE];
    PGresult *res;

    if (!slot_name_check(slot, err))
        return false;
    if (proto_version < 1 || proto_version > 4)
        return err_set(err, EC_INTERNAL, "pgoutput protocol version %d is not supported",
                       proto_version);
    if (streaming && proto_version < 2)
        return err_set(err, EC_INTERNAL, "streaming needs pgoutput protocol version 2 or later");
    if (publications == NULL || publications[0] == '\0')
        return err_set(err, EC_USAGE, "no publication given");
    if (r->in_copy)
        return err_set(err, EC_INTERNAL, "replication connection is already streaming");
    ident = PQescapeIdentifier(r->conn, slot, strlen(slot));
    pubs = PQescapeLiteral(r->conn, publications, strlen(publications));
    if (ident == NULL || pubs == NULL)
    {
        PQfreemem(ident);
        PQfreemem(pubs);
        return repl_err(r, NULL, "could not quote the slot or publication name", err);
    }
    pgo_lsn_format(start_lsn, lsn);
    sql = xasprintf("START_REPLICATION SLOT %s LOGICAL %s (\"proto_version\" '%d', "
                    "\"publication_names\" %s%s)",
                    ident, lsn, proto_version, pubs, streaming ? ", \"streaming\" 'on'" : "");
    PQfreemem(ident);
    PQfreemem(pubs);
    log_debug("[%d] (replication) %s", PQbackendPID(r->conn), sql);
    res = PQexec(r->conn, sql);
    free(sql);
    if (PQresultStatus(res) != PGRES_COPY_BOTH)
    {
        start_error(r, res, slot, err);
        PQclear(res);
        return false;
    }
    PQclear(res);
    r->in_copy = true;
    r->handed = 0;
    return true;
}

/* The copy ended (PQgetCopyData returned -1): the server's reason. */
static bool
copy_ended(ReplConn *r, Err *err)
{
    PGresult *res = PQgetResult(r->conn);
    PGresult *more;
    bool had_error = PQresultStatus(res) != PGRES_COMMAND_OK;

    r->in_copy = false;
    if (had_error)
        repl_err(r, res, "replication stream ended", err);
    else
        err_set(err, EC_PG_CONNECT, "replication stream ended by the source");
    PQclear(res);
    while ((more = PQgetResult(r->conn)) != NULL)
        PQclear(more);
    return false;
}

bool
replconn_recv(ReplConn *r, int timeout_ms, char **buf, int *len, Err *err)
{
    int64_t deadline = monotime_ms() + (timeout_ms > 0 ? timeout_ms : 0);

    *buf = NULL;
    *len = 0;
    if (!r->in_copy)
        return err_set(err, EC_INTERNAL, "replication connection is not streaming");
    for (;;)
    {
        char *data = NULL;
        int n = PQgetCopyData(r->conn, &data, 1);
        int64_t left;
        struct pollfd pfd;
        size_t had;
        int rc;

        if (n > 0)
        {
            r->handed += (size_t) n;
            *buf = data;
            *len = n;
            return true;
        }
        if (n == -1)
            return copy_ended(r, err);
        if (n == -2)
        {
            r->in_copy = false;
            return repl_err(r, NULL, "replication stream failed", err);
        }
        had = r->handed;
        r->handed = 0;
        if (had > 0 && had < REPL_THIN_READ)
        {
            /* The last read emptied the socket after a few messages: the
             * walsender writes each one as it is made, and waking for every
             * one costs both processes more than the messages themselves
             * (measured: 2.2 of 3.9 CPU-s per 1M rows in the kernel).  A
             * short pause lets a run of them gather; the socket's buffer
             * holds far more than arrive in it, and an idle stream only
             * pays it once, after the message that woke it.  A read that
             * filled libpq's buffer (wide rows, a backlog) is never
             * followed by one. */
            struct timespec pause = {0, REPL_GATHER_US * 1000L};

            if (nanosleep(&pause, NULL) != 0 && errno == EINTR)
                return true; /* a signal: the caller looks at it */
        }
        left = deadline - monotime_ms();
        if (left < 0)
            left = 0; /* still take what the socket holds */
        pfd.fd = PQsocket(r->conn);
        pfd.events = POLLIN;
        pfd.revents = 0;
        rc = poll(&pfd, 1, (int) left);
        if (rc < 0)
        {
            if (errno == EINTR)
                return true; /* a signal: the caller looks at it */
            return err_errno(err, EC_PG_CONNECT, "could not wait for the replication stream");
        }
        if (rc == 0)
            return true;
        if (!PQconsumeInput(r->conn))
        {
            r->in_copy = false;
            return repl_err(r, NULL, "replication stream failed", err);
        }
    }
}

void
replconn_freemem(char *buf)
{
    if (buf)
        PQfreemem(buf);
}

bool
replconn_send_status(ReplConn *r, uint64_t write, uint64_t flush, uint64_t apply,
                     bool reply_requested, Err *err)
{
    uint8_t msg[PGO_STATUS_UPDATE_SIZE];
    struct timeval tv;
    int64_t now_us;

    if (!r->in_copy)
        return err_set(err, EC_INTERNAL, "replication connection is not streaming");
    gettimeofday(&tv, NULL);
    now_us = (int64_t) tv.tv_sec * 1000000 + tv.tv_usec;
    pgo_status_update(msg, write, flush, apply, now_us, reply_requested);
    if (PQputCopyData(r->conn, (const char *) msg, (int) sizeof msg) != 1 ||
        PQflush(r->conn) != 0)
        return repl_err(r, NULL, "could not send a status update to the source", err);
    return true;
}

bool
replconn_stop(ReplConn *r, Err *err)
{
    PGresult *res;
    bool ok = true;

    if (!r->in_copy)
        return true;
    if (PQputCopyEnd(r->conn, NULL) != 1 || PQflush(r->conn) != 0)
    {
        r->in_copy = false;
        return repl_err(r, NULL, "could not end the replication stream", err);
    }
    /* The server sends what it has in flight, then CopyDone. */
    for (;;)
    {
        char *data = NULL;
        int n = PQgetCopyData(r->conn, &data, 0);

        if (n > 0)
        {
            PQfreemem(data);
            continue;
        }
        if (n == -2)
        {
            r->in_copy = false;
            return repl_err(r, NULL, "could not end the replication stream", err);
        }
        break;
    }
    r->in_copy = false;
    while ((res = PQgetResult(r->conn)) != NULL)
    {
        ExecStatusType st = PQresultStatus(res);

        if (ok && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
            ok = repl_err(r, res, "could not end the replication stream", err);
        PQclear(res);
    }
    return ok;
}

/* ------------------------------------------------------------- preflight */

/* "schema.name" for messages and suggested SQL (quoted where SQL needs it). */
static void
table_sql_name(const ReplTable *t, char *buf, size_t size)
{
    char s[160];
    char n[160];

    sql_name(t->schema, s, sizeof s);
    sql_name(t->name, n, sizeof n);
    (void) snprintf(buf, size, "%s.%s", s, n);
}

static bool
preflight_server(PgConn *src, Err *err)
{
    PGresult *res;
    char user[160];
    bool repl;
    bool super;

    if (!pg_query(src,
                  "SELECT current_setting('wal_level'), r.rolreplication, r.rolsuper, "
                  "current_user FROM pg_catalog.pg_roles r WHERE r.rolname = current_user",
                  0, NULL, &res, err))
        return false;
    if (PQntuples(res) != 1)
    {
        PQclear(res);
        return err_set(err, EC_PG_QUERY, "could not read the current role on the source");
    }
    if (strcmp(PQgetvalue(res, 0, 0), "logical") != 0)
    {
        err_set(err, EC_CONFIG,
                "wal_level is %s on the source; run: ALTER SYSTEM SET wal_level = logical; then "
                "restart it",
                PQgetvalue(res, 0, 0));
        PQclear(res);
        return false;
    }
    repl = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    super = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
    sql_name(PQgetvalue(res, 0, 3), user, sizeof user);
    PQclear(res);
    if (!repl && !super)
        return err_set(err, EC_CONFIG,
                       "role %s has no REPLICATION attribute on the source; run: ALTER ROLE %s "
                       "REPLICATION;",
                       user, user);
    return true;
}

/* The publication's flags: does it publish updates or deletes? */
static bool
preflight_publication(PgConn *src, const char *publication, const ReplTable *tables, size_t n,
                      bool *needs_identity, Err *err)
{
    const char *params[1] = {publication};
    PGresult *res;
    char pub[160];

    sql_name(publication, pub, sizeof pub);
    if (!pg_query(src,
                  "SELECT pubupdate OR pubdelete FROM pg_catalog.pg_publication "
                  "WHERE pubname = $1",
                  1, params, &res, err))
        return false;
    if (PQntuples(res) == 0)
    {
        Buf b;

        PQclear(res);
        buf_init(&b);
        for (size_t i = 0; i < n; i++)
        {
            char t[330];
            table_sql_name(&tables[i], t, sizeof t);
            buf_printf(&b, "%s%s", i ? ", " : "", t);
        }
        err_set(err, EC_CONFIG, "publication \"%s\" does not exist on the source; run: CREATE "
                                "PUBLICATION %s FOR TABLE %s;",
                publication, pub, b.data ? b.data : "SCHEMA.TABLE");
        err_hint(err, "Create the publication before the replication slot: a slot created "
                      "first cannot decode the changes made before it.");
        buf_free(&b);
        return false;
    }
    *needs_identity = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return true;
}

/* A row filter or a column list on the table (PG15+): the initial copy reads
 * every row and column, the stream would not. */
static bool
preflight_whole_table(const PGresult *res, const char *publication, const char *name,
                      const char *pub, Err *err)
{
    char what[600];

    if (!PQgetisnull(res, 0, 4))
        (void) snprintf(what, sizeof what, "publishes only the rows of %s where %s", name,
                        PQgetvalue(res, 0, 4));
    else if (!PQgetisnull(res, 0, 5))
        (void) snprintf(what, sizeof what, "leaves columns of %s out (%s)", name,
                        PQgetvalue(res, 0, 5));
    else
        return true;
    return err_set(err, EC_CONFIG,
                   "publication \"%s\" %s, so the stream would not match the initial copy; "
                   "run: ALTER PUBLICATION %s DROP TABLE %s; ALTER PUBLICATION %s ADD TABLE %s;",
                   publication, what, pub, name, pub, name);
}

static bool
preflight_table(PgConn *src, const char *publication, const ReplTable *t, bool needs_identity,
                Err *err)
{
    const char *params[3] = {t->schema, t->name, publication};
    /* Row filters and column lists came with PostgreSQL 15. */
    bool v15 = PQserverVersion(pg_raw(src)) >= 150000;
    PGresult *res;
    char *sql;
    char name[330];
    char pub[160];
    char ident;
    bool in_pub;
    bool has_pk;
    bool has_ri_index;
    bool ok;

    table_sql_name(t, name, sizeof name);
    sql_name(publication, pub, sizeof pub);
    sql = xasprintf(
        "SELECT c.relreplident, p.pubname IS NOT NULL, "
        " EXISTS (SELECT 1 FROM pg_catalog.pg_index i "
        "         WHERE i.indrelid = c.oid AND i.indisprimary), "
        " EXISTS (SELECT 1 FROM pg_catalog.pg_index i "
        "         WHERE i.indrelid = c.oid AND i.indisreplident), %s "
        "FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "LEFT JOIN pg_catalog.pg_publication_tables p "
        " ON p.pubname = $3 AND p.schemaname = $1 AND p.tablename = $2 "
        "WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
        v15 ? "p.rowfilter, (SELECT string_agg(a.attname, ', ' ORDER BY a.attnum) "
              " FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 "
              " AND NOT a.attisdropped AND a.attgenerated = '' "
              " AND NOT (a.attname = ANY (p.attnames)))"
            : "NULL::text, NULL::text");
    ok = pg_query(src, sql, 3, params, &res, err);
    free(sql);
    if (!ok)
        return false;
    if (PQntuples(res) == 0)
    {
        PQclear(res);
        return err_set(err, EC_CONFIG, "table %s does not exist on the source", name);
    }
    ident = PQgetvalue(res, 0, 0)[0];
    in_pub = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    has_pk = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
    has_ri_index = strcmp(PQgetvalue(res, 0, 3), "t") == 0;
    ok = !in_pub || preflight_whole_table(res, publication, name, pub, err);
    PQclear(res);
    if (!in_pub)
        return err_set(err, EC_CONFIG,
                       "table %s is not in publication \"%s\" on the source; run: ALTER "
                       "PUBLICATION %s ADD TABLE %s;",
                       name, publication, pub, name);
    if (!ok)
        return false;
    if (needs_identity &&
        !(ident == 'f' || (ident == 'd' && has_pk) || (ident == 'i' && has_ri_index)))
    {
        err_set(err, EC_CONFIG,
                "table %s has no usable replica identity on the source (%s), so its updates "
                "and deletes cannot be streamed; run: ALTER TABLE %s REPLICA IDENTITY FULL; "
                "or add a primary key",
                name,
                ident == 'n'   ? "REPLICA IDENTITY NOTHING"
                : ident == 'i' ? "its replica identity index is gone"
                               : "no primary key",
                name);
        err_hint(err, "Or publish inserts only: ALTER PUBLICATION %s SET (publish = "
                      "'insert, truncate');",
                 pub);
        return false;
    }
    return true;
}

bool
replconn_preflight(PgConn *src, const char *publication, const ReplTable *tables, size_t n,
                   Err *err)
{
    bool needs_identity = true;

    if (!preflight_server(src, err) ||
        !preflight_publication(src, publication, tables, n, &needs_identity, err))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!preflight_table(src, publication, &tables[i], needs_identity, err))
            return false;
    return true;
}

bool
replconn_table_info(PgConn *src, const ReplTable *t, ReplTableInfo *out, Err *err)
{
    const char *params[2] = {t->schema, t->name};
    PGresult *res;
    size_t n;

    memset(out, 0, sizeof *out);
    if (!pg_query(src,
                  "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
                  " COALESCE(a.attnum = ANY (ri.indkey::int2[]), false), "
                  " COALESCE(a.attnum = ANY (pk.indkey::int2[]), false), c.relreplident "
                  "FROM pg_catalog.pg_class c "
                  "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                  "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
                  " AND NOT a.attisdropped AND a.attgenerated = '' "
                  "LEFT JOIN pg_catalog.pg_index pk ON pk.indrelid = c.oid AND pk.indisprimary "
                  "LEFT JOIN pg_catalog.pg_index ri ON ri.indrelid = c.oid "
                  " AND ((c.relreplident = 'd' AND ri.indisprimary) "
                  "      OR (c.relreplident = 'i' AND ri.indisreplident)) "
                  "WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p') "
                  "ORDER BY a.attnum",
                  2, params, &res, err))
        return false;
    n = (size_t) PQntuples(res);
    if (n == 0)
    {
        char name[330];

        PQclear(res);
        table_sql_name(t, name, sizeof name);
        return err_set(err, EC_CONFIG, "table %s does not exist on the source (or has no columns)",
                       name);
    }
    out->ncols = n;
    out->cols = xcalloc(n, sizeof *out->cols);
    out->types = xcalloc(n, sizeof *out->types);
    out->key = xcalloc(n, sizeof *out->key);
    out->pk = xcalloc(n, sizeof *out->pk);
    out->replident = PQgetvalue(res, 0, 4)[0];
    for (size_t i = 0; i < n; i++)
    {
        out->cols[i] = xstrdup(PQgetvalue(res, (int) i, 0));
        out->types[i] = xstrdup(PQgetvalue(res, (int) i, 1));
        out->key[i] = strcmp(PQgetvalue(res, (int) i, 2), "t") == 0;
        out->pk[i] = strcmp(PQgetvalue(res, (int) i, 3), "t") == 0;
    }
    PQclear(res);
    return true;
}

void
replconn_table_free(ReplTableInfo *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->ncols; i++)
    {
        free(t->cols[i]);
        free(t->types[i]);
    }
    free(t->cols);
    free(t->types);
    free(t->key);
    free(t->pk);
    memset(t, 0, sizeof *t);
}
