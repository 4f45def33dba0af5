/*
 * The rejects output: one CSV row per rejected input row, with where it came
 * from, why, the server's SQLSTATE when it gave one, and the raw record:
 *
 *   source,line,reason,sqlstate,record
 *
 * Rows are appended; rejects_sync makes them durable and is called before the
 * batch that produced them commits, so a crash never loses a reject.  After a
 * resume the file is truncated to the length recorded with the checkpoint, so
 * no reject is written twice.
 */
#ifndef V7FILL_REJECTS_H
#define V7FILL_REJECTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"

typedef struct Rejects Rejects;

/* Open `path` for appending (created if missing, header written when empty).
 * path NULL → rejects are counted but not written (plan). */
V7FILL_MUST_CHECK bool rejects_open(const char *path, Rejects **out, Err *err);
/* The same writer for another durable CSV output with its own header line
 * (the late-rows output uses it). */
V7FILL_MUST_CHECK bool rejects_open_csv(const char *path, const char *header, Rejects **out,
                                        Err *err);
/* Append one CSV row of `n` fields (each quoted). */
V7FILL_MUST_CHECK bool rejects_write_row(Rejects *r, const char *const *fields, size_t n,
                                         Err *err);
V7FILL_MUST_CHECK bool rejects_write(Rejects *r, const char *source, uint64_t line,
                                     const char *reason, const char *sqlstate, const char *raw,
                                     size_t raw_len, Err *err);
/* Flush and fsync. */
V7FILL_MUST_CHECK bool rejects_sync(Rejects *r, Err *err);
/* Current length in bytes (what a checkpoint records). */
uint64_t rejects_size(const Rejects *r);
/* Truncate to `size` bytes (resume); error if the file is shorter. */
V7FILL_MUST_CHECK bool rejects_truncate(Rejects *r, uint64_t size, Err *err);
const char *rejects_path(const Rejects *r);
void rejects_close(Rejects *r);

#endif /* V7FILL_REJECTS_H */
