/*
 * Error value carried up the call chain.
 *
 * Every fallible function returns bool (true = success) and fills an Err on
 * failure.  Lower layers never print; the CLI prints once and maps the code to
 * an exit status (see docs/v7fill.1, EXIT STATUS).  Messages follow the
 * PostgreSQL style: primary message lowercase without trailing period, detail
 * and hint full sentences.
 */
#ifndef V7FILL_ERR_H
#define V7FILL_ERR_H

#include <stdbool.h>
#include <stddef.h>

#define V7FILL_MUST_CHECK   __attribute__((warn_unused_result))
#define V7FILL_PRINTF(f, a) __attribute__((format(printf, f, a)))

typedef enum ErrCode
{
    EC_OK = 0,
    EC_USAGE,       /* bad flags or arguments */
    EC_CONFIG,      /* bad setting, unknown time zone, unsupported table */
    EC_IO,          /* file system */
    EC_FORMAT,      /* malformed input: CSV, time, uuid, zstd frame, stream message */
    EC_PG_CONNECT,  /* could not reach the server / connection lost */
    EC_PG_QUERY,    /* the server refused a statement */
    EC_LIMIT,       /* a limit the user set was reached (e.g. --max-rejects) */
    EC_INTERRUPTED, /* SIGINT / SIGTERM */
    EC_INTERNAL,    /* a bug */
} ErrCode;

typedef struct Err
{
    ErrCode code;
    char sqlstate[6]; /* "" unless the server gave one */
    char msg[1024];   /* primary message */
    char detail[1024];
    char hint[512];
    char constraint[64]; /* the constraint the server named (PG_DIAG_CONSTRAINT_NAME), or "" */
} Err;

/* Set code and message; returns false so that `return err_set(...)` reads naturally. */
bool err_set(Err *e, ErrCode code, const char *fmt, ...) V7FILL_PRINTF(3, 4);

/* Like err_set, appending ": strerror(errno)". */
bool err_errno(Err *e, ErrCode code, const char *fmt, ...) V7FILL_PRINTF(3, 4);

/* Prepend context: "ctx: <previous message>". */
void err_prefix(Err *e, const char *fmt, ...) V7FILL_PRINTF(2, 3);

void err_detail(Err *e, const char *fmt, ...) V7FILL_PRINTF(2, 3);
void err_hint(Err *e, const char *fmt, ...) V7FILL_PRINTF(2, 3);

void err_clear(Err *e);

/* A copy of untrusted text (a header name, a path) fit for a message: control
 * bytes and DEL shown as \xNN, at most ~200 bytes.  Returns buf. */
const char *err_printable(const char *text, char *buf, size_t size);

/* Exit status for an error code (documented in the man page). */
int err_exit_status(ErrCode code);

#endif /* V7FILL_ERR_H */
