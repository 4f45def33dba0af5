/*
 * The rejects output: one CSV row per rejected input row, with where it came
 * from, why, the server's SQLSTATE when it gave one, and the raw record:
 *
 *   source,line,reason,sqlstate,record
 *
 * Rows are appended; rejects_sync makes them durable and is called before the
 * batch that produced them commits, so a crash never loses a reject.  After a
 * resume the file is truncated to the length recorded with the checkpoint, so
 * no reject is written twice -- but only when it is the same file and every
 * row past that length is the resumed input's, after its checkpoint's line
 * (rejects_resume): rows another import appended are never cut.
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
 * (the late-rows output uses it); `what` names it in messages ("late-rows
 * file").  Its rows must start with the source and line fields too. */
V7FILL_MUST_CHECK bool rejects_open_csv(const char *path, const char *header, const char *what,
                                        Rejects **out, Err *err);
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
/* "dev:ino" of the file open ("" for none): what a checkpoint records to know
 * the file again. */
const char *rejects_file_id(const Rejects *r);

/* Are the bytes from `size` to the end only complete rows of `source` with a
 * line after `after_line` (what a resumed import wrote and did not commit)? */
V7FILL_MUST_CHECK bool rejects_tail_is_own(Rejects *r, uint64_t size, const char *source,
                                           uint64_t after_line, bool *own, Err *err);

typedef enum RejectsResume
{
    REJECTS_KEPT,       /* nothing past the checkpoint's length */
    REJECTS_CUT,        /* cut back: the rows past it were the input's own */
    REJECTS_OTHER_FILE, /* not the file the checkpoint recorded (moved, deleted, another
                           path): appended to, nothing cut */
    REJECTS_SHORTER,    /* the same file, shorter than recorded: appended to */
    REJECTS_FOREIGN,    /* rows of another import follow: kept, appended to */
} RejectsResume;

/* Resume the output a checkpoint recorded as `path` ("dev:ino" `file_id`;
 * either "" or NULL when it did not) at `size` bytes, for input `source`
 * committed up to line `after_line`: cut back only what rejects_tail_is_own
 * says is the input's own; *out says what was found.  `others_upto`: how long
 * another input's checkpoint records the file (0: none does).  Beyond `size`,
 * those bytes hold that input's committed rows, whatever their source name
 * (two inputs can share a basename): nothing is cut. */
V7FILL_MUST_CHECK bool rejects_resume(Rejects *r, const char *path, const char *file_id,
                                      uint64_t size, uint64_t others_upto, const char *source,
                                      uint64_t after_line, RejectsResume *out, Err *err);
void rejects_close(Rejects *r);

#endif /* V7FILL_REJECTS_H */
