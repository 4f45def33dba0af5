/*
 * Statements sent one after another on a connection without waiting for
 * each (libpq's pipeline mode), each text prepared once, their results read
 * a chunk behind: for a run of writes whose results are only their row
 * counts, such as the way back's changes (migrate_reverse.c).  A round trip
 * and a parse per statement were most of what each change cost there.
 *
 * Use: pg_pipe_begin, then pg_pipe_send for each statement (BEGIN and COMMIT
 * included, when the run is one transaction), then pg_pipe_end, which reads
 * every result and leaves the connection as it was (usable by pg_exec
 * again).  While the pipe is open nothing else may use the connection.
 *
 * A statement the server refuses fails the run: the error is the first
 * refused statement's, prefixed with the description its note gave
 * (the statements after it were skipped by the server), and it is returned
 * by whichever call read it (a later pg_pipe_send, or pg_pipe_end).  After a
 * failure, pg_pipe_abandon reads what is left and closes the pipe; the
 * transaction the run opened, if any, is then still open and failed, for
 * the caller's ROLLBACK.
 */
#ifndef V7FILL_PG_PIPE_H
#define V7FILL_PG_PIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"

typedef struct PgPipe PgPipe;

/* What the caller needs back of a statement, kept until its result is read. */
typedef struct PgPipeNote
{
    int kind;         /* the caller's: 0 for a statement whose count it does not need */
    uint64_t at;      /* the caller's: where the statement came from (a change's LSN) */
    char id[64];      /* the caller's: which row ("" when none) */
} PgPipeNote;

/* Called once per statement of a kind other than 0, in the order sent,
 * with the rows it affected (returned, for a SELECT). */
typedef void (*PgPipeCounted)(void *ctx, const PgPipeNote *note, uint64_t rows);
/* Writes into buf what a failed statement was, for its error's prefix. */
typedef void (*PgPipeDescribe)(void *ctx, const PgPipeNote *note, char *buf, size_t size);

PgPipe *pg_pipe_new(PgConn *c, PgPipeCounted counted, PgPipeDescribe describe, void *ctx);
/* Deallocates the statements it prepared when the connection is idle (else
 * they go with the session); NULL-safe. */
void pg_pipe_free(PgPipe *p);

V7FILL_MUST_CHECK bool pg_pipe_begin(PgPipe *p, Err *err);
/* note may be NULL (kind 0).  NULL params are SQL NULL. */
V7FILL_MUST_CHECK bool pg_pipe_send(PgPipe *p, const char *sql, int nparams,
                                    const char *const *params, const PgPipeNote *note,
                                    Err *err);
/* A statement whose rows the caller needs now: sent, then every result up
 * to its own read (a round trip, as without the pipe); *res is its result
 * (the caller PQclears). */
V7FILL_MUST_CHECK bool pg_pipe_query(PgPipe *p, const char *sql, int nparams,
                                     const char *const *params, PGresult **res, Err *err);
V7FILL_MUST_CHECK bool pg_pipe_end(PgPipe *p, Err *err);
void pg_pipe_abandon(PgPipe *p);
bool pg_pipe_open(const PgPipe *p);

#endif /* V7FILL_PG_PIPE_H */
