/*
 * The final report of an import or a plan: a human table on a stream, and
 * JSON (jansson) for machines.
 */
#ifndef V7FILL_IMPORT_REPORT_H
#define V7FILL_IMPORT_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "v7fill/err.h"
#include "v7fill/pipeline.h"

void import_report_print(FILE *out, const ImportStats *st, bool plan);
/* JSON text of the report; caller frees. */
char *import_report_json(const ImportStats *st, bool plan);
/* Can the JSON report be written to `path` at the end?  Checked before the
 * import reads anything: its directory exists and is writable, and the
 * file, if there, is a writable regular file.  EC_IO otherwise; "-" is. */
V7FILL_MUST_CHECK bool import_report_check_path(const char *path, Err *err);
/* Write the JSON report to `path` ("-" = stdout). */
V7FILL_MUST_CHECK bool import_report_write_json(const char *path, const ImportStats *st, bool plan,
                                                Err *err);

#endif /* V7FILL_IMPORT_REPORT_H */
