/*
 * The file import: a list of CSV/zstd files, each one Source handed to the
 * pipeline (pipeline.h), with per-file checkpoints (the position, a
 * fingerprint of the content read and of the options, the --source-ref
 * template), --skip-finished, the rejects and late-rows files (cut back on a
 * resume to what the checkpoint recorded), the closing ANALYZE and VACUUM,
 * and the run history row.  It has no loop over batches: that is the
 * pipeline's.
 */
#ifndef V7FILL_IMPORT_H
#define V7FILL_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/pipeline.h"
#include "v7fill/source_csv.h"

typedef struct ImportOptions
{
    PipelineOptions common;   /* what every source shares */
    const char *const *files; /* "-" = stdin */
    size_t nfiles;
    CsvOptions csv;
    bool new_source_ref;      /* allow another template than the one a file was imported with */
    const char *rejects_path; /* NULL → "<table>.rejects.csv" */
    const char *late_path;    /* late-rows output; NULL → "<table>.late.csv" */
    bool skip_finished;       /* skip files an earlier run imported completely */
    int record_every_s;       /* a run row (v7fill.run) for the rows imported since the last,
                                 this often (default 60); 0: one at the end */
} ImportOptions;

void import_options_default(ImportOptions *o);

/* Run an import (or a plan).  Counts are filled even on failure, covering what
 * was committed. */
V7FILL_MUST_CHECK bool import_run(PgConn *c, const ImportOptions *o, ImportStats *st, Err *err);

#endif /* V7FILL_IMPORT_H */
