/*
 * The command-line shell: global options, the command table and shared
 * helpers for argument handling.  Commands print results to stdout and leave
 * error printing and the exit status to main (cli_fail).
 */
#ifndef V7FILL_CLI_H
#define V7FILL_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pipeline.h"

typedef struct GlobalOpts
{
    const char *conninfo; /* -d/--dbname; NULL = libpq environment */
    int verbose;          /* -v/--verbose, counted */
    bool quiet;           /* -q/--quiet (wins over -v) */
} GlobalOpts;

/* A command: returns an exit status; fills err (and returns non-zero) on failure.
 * The global options may follow the command too, as in "v7fill import -v ..."
 * (as pg_dump and psql take them): each command's getopt table lists them with
 * CLI_GLOBAL_SHORTOPTS / CLI_GLOBAL_LONGOPTS and hands them to
 * cli_global_option through CLI_GLOBAL_CASES (done: how the command ends
 * after --version), so that a command's own option
 * values are never mistaken for them.  No command has a short option of the
 * same letter (d, v, q, V). */
typedef int (*CommandFn)(int argc, char **argv, GlobalOpts *g, Err *err);

#define CLI_GLOBAL_SHORTOPTS "d:vq"
#define CLI_GLOBAL_LONGOPTS                                                                        \
    {"dbname", required_argument, NULL, 'd'}, {"verbose", no_argument, NULL, 'v'},                 \
        {"quiet", no_argument, NULL, 'q'}, {"version", no_argument, NULL, 'V'}
#define CLI_GLOBAL_CASES(opt, g, done)                                                             \
    case 'd':                                                                                      \
    case 'v':                                                                                      \
    case 'q':                                                                                      \
    case 'V':                                                                                      \
        if (cli_global_option((opt), optarg, (g)))                                                 \
            done;                                                                                  \
        break

/* Apply a global option (getopt's c and optarg) to g and to the log level.
 * True when the command is done (--version printed). */
bool cli_global_option(int c, const char *arg, GlobalOpts *g);

int cmd_uuid(int argc, char **argv, GlobalOpts *g, Err *err);
int cmd_partitions(int argc, char **argv, GlobalOpts *g, Err *err);
int cmd_import(int argc, char **argv, GlobalOpts *g, Err *err);
int cmd_plan(int argc, char **argv, GlobalOpts *g, Err *err);
int cmd_report(int argc, char **argv, GlobalOpts *g, Err *err);
int cmd_retention(int argc, char **argv, GlobalOpts *g, Err *err);
int cmd_maintain(int argc, char **argv, GlobalOpts *g, Err *err);
int cmd_stream(int argc, char **argv, GlobalOpts *g, Err *err);
int cmd_migrate(int argc, char **argv, GlobalOpts *g, Err *err);
/* Hidden: the tables TABLE may name, one a line, for shell completion. */
int cmd_complete_tables(int argc, char **argv, GlobalOpts *g, Err *err);

/* Usage error: sets EC_USAGE with the message plus a hint to use --help; returns 2. */
int cli_usage_error(Err *err, const char *command, const char *fmt, ...) V7FILL_PRINTF(3, 4);
/* Returns the exit status of `err`. */
int cli_fail(const Err *err);
/* Parse a positive integer option value; false + usage error otherwise. */
/* A size: bytes, or a number followed by kB, MB or GB (1024-based, as in
 * PostgreSQL; case and the B are optional). */
bool cli_parse_size(const char *command, const char *opt, const char *value, uint64_t min,
                    uint64_t max, uint64_t *out, Err *err);
/* --map SRC=TARGET: appended to *maps (the value is split in place). */
bool cli_parse_map(const char *command, char *value, ColumnMap **maps, size_t *n, Err *err);
/* A duration option (timeparse's syntax): false + EC_USAGE naming the option. */
bool cli_parse_duration(const char *opt, const char *value, int64_t *out_us, Err *err);
bool cli_parse_long(const char *command, const char *opt, const char *value, long min, long max,
                    long *out, Err *err);

/* The shared pipeline's options (PipelineOptions) that import, plan, stream and
 * migrate take: a command's getopt table gives them these values, and
 * cli_pipeline_option parses each, so that every command takes the same values
 * (the same range for --batch-rows, say).  Above any command's own values. */
enum
{
    CLI_OPT_BATCH_ROWS = 0x1000,
    CLI_OPT_JOBS,
    CLI_OPT_NO_ANALYZE,
    CLI_OPT_MAX_FUTURE,
    CLI_OPT_TIME_COLUMN,
    CLI_OPT_TIME_FORMAT,
    CLI_OPT_SOURCE_REF,
    CLI_OPT_LOOKUP_TABLE,
    CLI_OPT_KEY_MAP,
    CLI_OPT_RETENTION,
};
/* getopt's c and optarg: 1 when c is one of CLI_OPT_* (its value in *common),
 * -1 when its value is not valid (a usage error in err), 0 when c is not one
 * of them. */
int cli_pipeline_option(const char *command, int c, const char *arg, PipelineOptions *common,
                        Err *err);

#endif /* V7FILL_CLI_H */
