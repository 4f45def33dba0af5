/*
 * Thin libpq wrapper: connect, run statements with parameters, COPY, and
 * turn server errors into Err (message, SQLSTATE, detail, hint).
 *
 * Not a general-purpose client.  PGresult values returned by pg_query belong
 * to the caller, who frees them with PQclear in the same function.
 */
#ifndef V7FILL_PG_H
#define V7FILL_PG_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/mem.h"

typedef struct PgConn PgConn;

/* Connect; `conninfo` may be NULL or "" (libpq environment, ~/.pgpass), a
 * key=value string or a URI.  Session settings are pinned for stable text
 * output (DateStyle ISO, TimeZone UTC, client_encoding UTF8). */
V7FILL_MUST_CHECK bool pg_connect(const char *conninfo, PgConn **out, Err *err);
/* Close the connection and free it; NULL-safe. */
void pg_close(PgConn *c);
/* A second connection to the same server, with c's connection string (a
 * stream's side connection, parallel writers). */
V7FILL_MUST_CHECK bool pg_connect_again(PgConn *c, PgConn **out, Err *err);
/* Drop the connection and open it again with the same settings. */
V7FILL_MUST_CHECK bool pg_reconnect(PgConn *c, Err *err);
/* The underlying libpq connection (borrowed). */
PGconn *pg_raw(PgConn *c);
/* A name for a statement prepared on c, never given before on c ("v7fill_<n>"). */
void pg_statement_name(PgConn *c, char *out, size_t size);
/* True if the connection is known to be broken (CONNECTION_BAD). */
bool pg_is_broken(PgConn *c);

/* The conninfo with any password removed, for logs; caller frees. */
char *pg_conninfo_redacted(const char *conninfo);

/* The options of a connection: the user's own (from the conninfo, else
 * PGOPTIONS) followed by `ours`, which win.  Caller frees. */
char *pg_options_with(const char *conninfo, const char *ours);
/* Blank any password of `conninfo` in a libpq message (in place). */
void pg_redact_message(const char *conninfo, char *msg);

/* Fill `err` from a failed result (or the connection error when res is NULL). */
bool pg_err_from_result(Err *err, PgConn *c, const PGresult *res, const char *what);

/* Run a statement that returns no rows (or whose rows are ignored). */
V7FILL_MUST_CHECK bool pg_exec(PgConn *c, const char *sql, Err *err);
/* pg_exec for a statement that may run long (the closing ANALYZE): while it
 * runs, stop() is asked every 100 ms, and once it says true the statement is
 * cancelled (PQcancel); *cancelled tells whether it ended so (it may have
 * finished first).  Ending cancelled is not an error; any other failure is,
 * as in pg_exec. */
V7FILL_MUST_CHECK bool pg_exec_cancellable(PgConn *c, const char *sql, bool (*stop)(void),
                                           bool *cancelled, Err *err);
/* Same with text parameters ($1..$n); NULL entries are SQL NULL. */
V7FILL_MUST_CHECK bool pg_exec_params(PgConn *c, const char *sql, int nparams,
                                      const char *const *params, Err *err);
/* Run a query; on success *res holds the tuples (caller PQclears). */
V7FILL_MUST_CHECK bool pg_query(PgConn *c, const char *sql, int nparams, const char *const *params,
                                PGresult **res, Err *err);

/* The general form: parameter types/lengths/formats as PQexecParams, results
 * in text (0) or binary (1). */
V7FILL_MUST_CHECK bool pg_query_ex(PgConn *c, const char *sql, int nparams, const Oid *types,
                                   const char *const *values, const int *lengths,
                                   const int *formats, int result_format, PGresult **res,
                                   Err *err);

/* Send a query without waiting (one at a time); pg_collect waits for its
 * rows (caller PQclears) and leaves the connection idle. */
V7FILL_MUST_CHECK bool pg_send_query_ex(PgConn *c, const char *sql, int nparams, const Oid *types,
                                        const char *const *values, const int *lengths,
                                        const int *formats, int result_format, Err *err);
V7FILL_MUST_CHECK bool pg_collect(PgConn *c, PGresult **res, Err *err);

/* The server's now() (transaction start) in µs since the epoch. */
V7FILL_MUST_CHECK bool pg_server_now_us(PgConn *c, int64_t *out, Err *err);

/* Everything the server committed so far, on disk: commits a transactional
 * logical message with synchronous_commit on (a walsender sends only flushed
 * WAL).  *flushed (may be NULL): the flush position after it. */
V7FILL_MUST_CHECK bool pg_flush_wal(PgConn *c, uint64_t *flushed, Err *err);

/* Quote an identifier through PQescapeIdentifier; caller frees with free(). */
char *pg_ident(PgConn *c, const char *name);
/* "schema"."name", both quoted; caller frees. */
char *pg_qualified(PgConn *c, const char *schema, const char *name);
/* The n values (none NULL) as an array literal, each double-quoted:
 * {"a","b\"c"}, for a $n::type[] parameter; caller frees. */
char *pg_array_literal(const char *const *vals, int n);
/* text quoted as an SQL string literal (PQescapeLiteral; caller frees).  Text
 * in an encoding the connection refuses becomes NULL, which the statement
 * binding it then refuses. */
char *pg_literal(PgConn *c, const char *text);

/* COPY ... FROM STDIN: begin with the full COPY statement, send data, end.
 * pg_copy_end checks the server's verdict (constraint and type errors show up
 * there).  pg_copy_abort ends the COPY with an error reason. */
V7FILL_MUST_CHECK bool pg_copy_begin(PgConn *c, const char *copy_sql, Err *err);
V7FILL_MUST_CHECK bool pg_copy_put(PgConn *c, const char *data, size_t len, Err *err);
V7FILL_MUST_CHECK bool pg_copy_end(PgConn *c, Err *err);
void pg_copy_abort(PgConn *c, const char *reason);

/* ROLLBACK of the transaction open on c, its failure only logged (debug): a
 * failed ROLLBACK leaves nothing to undo, the transaction is gone with the
 * connection.  Nothing is sent on a broken connection. */
void pg_rollback_quietly(PgConn *c);

/* SQLSTATE class 08 (connection exception) or a broken connection: worth a
 * reconnect and retry. */
bool pg_err_is_connection(const Err *err);

/* Append keyword='value' to a conninfo being built (a space first unless it is
 * empty; quotes and backslashes escaped). */
void conninfo_put_option(Buf *b, const char *keyword, const char *val);

#endif /* V7FILL_PG_H */
