/*
 * The source side of `v7fill stream`: a logical replication connection
 * (replication=database, simple query protocol only), the commands on it
 * (IDENTIFY_SYSTEM, CREATE/DROP_REPLICATION_SLOT, START_REPLICATION), the
 * CopyBoth loop (one CopyData payload at a time, 'r' status updates), and the
 * checks run first on an ordinary connection to the source (preflight, the
 * columns and replica identity of a table).  See shared docs pgoutput.md §1-§3.
 *
 * Errors fill an Err: the server's message and SQLSTATE where it gave one,
 * plus what to run when the fix is a setting or a statement.  A password in
 * the conninfo never reaches a message.
 */
#ifndef V7FILL_REPLCONN_H
#define V7FILL_REPLCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"

typedef struct ReplConn ReplConn;

typedef struct ReplSystem
{
    char systemid[32];
    uint32_t timeline;
    uint64_t xlogpos;
    char dbname[128];
} ReplSystem;

/* conninfo of the SOURCE (a URI or key=value; NULL or "": libpq environment).
 * Opens with replication=database and the pinned settings (client_encoding
 * UTF8, datestyle ISO, intervalstyle postgres, extra_float_digits 3, TimeZone
 * UTC), then SET statement_timeout=0, idle_in_transaction_session_timeout=0.
 * No REPLICATION role, wal_level not logical, pg_hba: EC_CONFIG with what to
 * run; an unreachable server: EC_PG_CONNECT. */
V7FILL_MUST_CHECK bool replconn_open(const char *conninfo, ReplConn **out, Err *err);
/* Close and free; NULL-safe. */
void replconn_close(ReplConn *r);
V7FILL_MUST_CHECK bool replconn_identify(ReplConn *r, ReplSystem *out, Err *err);

typedef struct ReplSlotInfo
{
    bool exists;
    char plugin[64];
    char database[128];
    bool active;
    int active_pid; /* 0 when not active */
    uint64_t restart_lsn, confirmed_flush_lsn; /* 0 when NULL */
    char wal_status[16]; /* "" when NULL */
    int64_t safe_wal_size; /* -1 = NULL */
    bool temporary;
} ReplSlotInfo;

/* The slot's row of pg_replication_slots (exists = false: none). */
V7FILL_MUST_CHECK bool replconn_slot_info(ReplConn *r, const char *slot, ReplSlotInfo *out,
                                          Err *err);
/* CREATE_REPLICATION_SLOT <slot> LOGICAL pgoutput (SNAPSHOT 'export'); logs
 * "waiting for running transactions" when it takes > 2 s.  The connection must
 * stay idle after this until every copier imported the snapshot. */
V7FILL_MUST_CHECK bool replconn_create_slot(ReplConn *r, const char *slot,
                                            uint64_t *consistent_lsn, char *snapshot,
                                            size_t snapshot_size, Err *err);
/* DROP_REPLICATION_SLOT <slot> WAIT. */
V7FILL_MUST_CHECK bool replconn_drop_slot(ReplConn *r, const char *slot, Err *err);

/* START_REPLICATION SLOT s LOGICAL X/X (proto_version 'N', publication_names
 * '<literal>'[, streaming 'on']).  True once in CopyBoth.  A slot active for
 * another PID: EC_PG_QUERY with the pid in the message; an invalidated slot:
 * EC_CONFIG naming wal_status lost and the stream's --resnapshot, which drops
 * and re-creates it. */
V7FILL_MUST_CHECK bool replconn_start(ReplConn *r, const char *slot, uint64_t start_lsn,
                                      const char *publications, int proto_version,
                                      bool streaming, Err *err);
/* One CopyData payload ('w' or 'k' frame): waits at most timeout_ms (poll on
 * the socket + PQconsumeInput); *len = 0 and *buf = NULL on timeout.  The copy
 * ending or an error: false with the server's message.  Free *buf with
 * replconn_freemem. */
V7FILL_MUST_CHECK bool replconn_recv(ReplConn *r, int timeout_ms, char **buf, int *len, Err *err);
void replconn_freemem(char *buf);
/* A Standby Status Update ('r', 34 bytes), flushed. */
V7FILL_MUST_CHECK bool replconn_send_status(ReplConn *r, uint64_t write, uint64_t flush,
                                            uint64_t apply, bool reply_requested, Err *err);
/* End the CopyBoth: CopyEnd, drain the server's data to the end, results to
 * NULL.  The connection can run commands again. */
V7FILL_MUST_CHECK bool replconn_stop(ReplConn *r, Err *err);
int replconn_socket(ReplConn *r);
/* The server's version (PQserverVersion), e.g. 150018. */
int replconn_server_version(ReplConn *r);

/* LSN text and the status update's bytes: pgoutput.h (pgo_lsn_*, pgo_status_update). */

/* Preflight on an ordinary connection to the source (pg_connect): wal_level
 * = logical; the role has REPLICATION (or superuser); the publication exists;
 * each table is in it (pg_publication_tables); its replica identity is usable
 * (default with a primary key, an index, or FULL).  Else EC_CONFIG with a
 * message that says what to run. */
typedef struct ReplTable
{
    char schema[64];
    char name[64];
} ReplTable;

V7FILL_MUST_CHECK bool replconn_preflight(PgConn *src, const char *publication,
                                          const ReplTable *tables, size_t n, Err *err);

/* Columns of a source table, in attnum order (no dropped or generated ones),
 * and which are the replica identity key (the primary key, or the REPLICA
 * IDENTITY index; FULL and NOTHING: none flagged).  pk flags the primary key
 * whatever the replica identity (the default source reference; none flagged
 * when the table has no primary key).  replident is pg_class.relreplident
 * ('d', 'i', 'f', 'n').  Arrays owned by the struct; replconn_table_free. */
typedef struct ReplTableInfo
{
    size_t ncols;
    char **cols;
    char **types; /* format_type(atttypid, atttypmod) */
    bool *key;
    bool *pk;
    char replident;
} ReplTableInfo;

V7FILL_MUST_CHECK bool replconn_table_info(PgConn *src, const ReplTable *t, ReplTableInfo *out,
                                           Err *err);
void replconn_table_free(ReplTableInfo *t);

#endif /* V7FILL_REPLCONN_H */
