/*
 * CSV source (libcsv), plain or zstd-compressed (by the .zst suffix or the
 * zstd magic number), a file or standard input ("-").  Memory is bounded by
 * the longest record, not the file.
 */
#ifndef V7FILL_SOURCE_CSV_H
#define V7FILL_SOURCE_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/source.h"

typedef struct CsvOptions
{
    bool header;          /* first record names the columns (default true) */
    char delimiter;       /* default ',' */
    char quote;           /* default '"' */
    char escape;          /* 0 = doubled quote (RFC 4180); else e.g. '\\' */
    const char *null_string; /* an unquoted field equal to this is NULL; an unquoted
                                empty field is always NULL (as PostgreSQL's COPY CSV) */
    bool check_utf8;      /* reject records with invalid UTF-8 (default true) */
    size_t max_record_bytes; /* a longer record is an error (default 256 MiB) */
    bool libcsv_only;     /* no fast path: every line through libcsv (tests compare) */
    const char *const *repeat_ok; /* header names that may repeat (the caller drops every
                                     copy, as --ignore-column does); others must be unique */
    size_t nrepeat_ok;
} CsvOptions;

void csv_options_default(CsvOptions *o);
/* A dialect that cannot work (delimiter equal to the quote, a CR or LF as
 * either, ...) is EC_USAGE: the options are the user's flags. */
V7FILL_MUST_CHECK bool csv_options_check(const CsvOptions *o, Err *err);

/* Does the header end in a delimiter ("a,b,")?  Its last column, unnamed
 * there, is then named cN (N = its position), as without a header. */
bool source_csv_unnamed_last(const Source *src);

/* Open `path` ("-" = stdin).  With header=false, columns are named c1..cN
 * after the first record.  A UTF-8 BOM at the start is skipped. */
V7FILL_MUST_CHECK bool source_csv_open(const char *path, const CsvOptions *opts, Source **out,
                                       Err *err);

/* The identity (SourcePosition.identity) of a regular file is
 * "PATH|SIZE|HASH": PATH its canonical path (only its tail when too long for
 * the field), SIZE its size in bytes (of a zstd file: compressed), HASH a
 * digest of its first bytes.  source_csv_identity_path gives the canonical
 * path of `path` (realpath, or `path` itself when that fails; free() it);
 * source_csv_identity_split finds PATH's length and SIZE in an identity of
 * that form, false for any other (standard input's, an earlier version's). */
char *source_csv_identity_path(const char *path);
V7FILL_MUST_CHECK bool source_csv_identity_split(const char *identity, size_t *path_len,
                                                 uint64_t *size);

/* Reads up to cap bytes into dst; *got = 0 at the end of the input.  False
 * with err filled on failure (the source fails with that error). */
typedef bool (*CsvReadFn)(void *ctx, void *dst, size_t cap, size_t *got, Err *err);

/* The same CSV source over bytes from `read` (COPY OUT data, ...) instead of a
 * file: `name` is what messages and source_name() say, and its identity.  Not
 * zstd, not seekable backwards (as stdin).  `ctx` stays the caller's: it must
 * outlive the source. */
V7FILL_MUST_CHECK bool source_csv_open_reader(const char *name, CsvReadFn read, void *ctx,
                                              const CsvOptions *opts, Source **out, Err *err);

#endif /* V7FILL_SOURCE_CSV_H */
