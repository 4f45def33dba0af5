/*
 * v7fill entry point: global options, dispatch to a command, print the error
 * once and choose the exit status.  Everything else lives in libv7fill.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "v7fill/log.h"
#include "v7fill/timeparse.h"

typedef struct Command
{
    const char *name;
    CommandFn fn;
    const char *summary;
} Command;

static const Command commands[] = {
    {"uuid", cmd_uuid, "UUIDv7 helpers: floor bound of a time, time of an id, new ids"},
    {"partitions", cmd_partitions, "list or create the target's time windows (lock-light)"},
    {"plan", cmd_plan, "show what an import would do; writes nothing"},
    {"import", cmd_import, "import CSV / zstd files into the partitioned target"},
    {"report", cmd_report, "windows against the retention, delay of late rows, verdict"},
    {"retention", cmd_retention, "set, show or clear the retention v7fill keeps for a table"},
    {"stream", cmd_stream, "copy a live table, then follow its changes (logical replication)"},
    {"migrate", cmd_migrate, "move an integer-keyed table onto UUIDv7, online (copy + capture)"},
    {"maintain", cmd_maintain, "create windows ahead, retire windows past the retention"},
    {"__complete-tables", cmd_complete_tables, NULL}, /* hidden: for the bash completion */
};

static void
main_usage(FILE *out)
{
    fprintf(out,
            "v7fill moves rows into PostgreSQL tables partitioned on a UUIDv7 key.\n"
            "\n"
            "Usage:\n"
            "  v7fill [OPTION]... COMMAND [ARG]...\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (commands[i].summary != NULL)
            fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n"
            "Options:\n"
            "  -d, --dbname=CONNINFO  target database: a libpq connection string or URI\n"
            "                         (default: the libpq environment, PGHOST, PGDATABASE, ...)\n"
            "  -v, --verbose          more log output (repeat for debug)\n"
            "  -q, --quiet            only warnings and errors\n"
            "      --version          print the version and exit\n"
            "  -h, --help             this help; `v7fill COMMAND --help` for a command\n"
            "These options may also follow the command (v7fill import -v ...).\n"
            "\n"
            "Exit status: 0 done; 1 I/O error; 2 usage; 3 configuration; 4 bad input;\n"
            "5 database error; 6 a limit was reached (--max-rejects); 70 internal error;\n"
            "130 interrupted.  See v7fill(1).\n");
}

int
cli_fail(const Err *err)
{
    log_err(err);
    return err_exit_status(err->code == EC_OK ? EC_INTERNAL : err->code);
}

int
cli_usage_error(Err *err, const char *command, const char *fmt, ...)
{
    va_list ap;
    char msg[512];

    va_start(ap, fmt);
    (void) vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set(err, EC_USAGE, "%s", msg);
    if (command)
        err_hint(err, "Try \"v7fill %s --help\".", command);
    else
        err_hint(err, "Try \"v7fill --help\".");
    return 2;
}

bool
cli_parse_map(const char *command, char *value, ColumnMap **maps, size_t *n, Err *err)
{
    char *eq = strchr(value, '=');

    if (eq == NULL || eq == value || eq[1] == '\0')
    {
        cli_usage_error(err, command, "--map takes SOURCECOL=TARGETCOL, got \"%s\"", value);
        return false;
    }
    *eq = '\0';
    *maps = xrealloc(*maps, (*n + 1) * sizeof **maps);
    (*maps)[*n].from = value;
    (*maps)[*n].to = eq + 1;
    (*n)++;
    return true;
}

bool
cli_parse_duration(const char *opt, const char *value, int64_t *out_us, Err *err)
{
    if (duration_parse(value, out_us, err))
        return true;
    err_prefix(err, "%s", opt);
    err->code = EC_USAGE;
    return false;
}

bool
cli_parse_long(const char *command, const char *opt, const char *value, long min, long max,
               long *out, Err *err)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || v < min || v > max)
    {
        cli_usage_error(err, command, "invalid value \"%s\" for %s: expected an integer from %ld to %ld",
                        value, opt, min, max);
        return false;
    }
    *out = v;
    return true;
}

bool
cli_parse_size(const char *command, const char *opt, const char *value, uint64_t min,
               uint64_t max, uint64_t *out, Err *err)
{
    char *end = NULL;
    unsigned long long v;
    uint64_t unit = 1;

    errno = 0;
    v = strtoull(value, &end, 10);
    if (end != value && (*end == 'k' || *end == 'K'))
        unit = UINT64_C(1) << 10;
    else if (end != value && (*end == 'm' || *end == 'M'))
        unit = UINT64_C(1) << 20;
    else if (end != value && (*end == 'g' || *end == 'G'))
        unit = UINT64_C(1) << 30;
    if (unit > 1)
    {
        end++;
        if (*end == 'b' || *end == 'B')
            end++;
    }
    if (errno != 0 || end == value || *end != '\0' || value[0] == '-' || v > max / unit ||
        v * unit < min || v * unit > max)
    {
        cli_usage_error(err, command,
                        "invalid value \"%s\" for %s: expected a size from %" PRIu64
                        " bytes to %" PRIu64 " MB (e.g. 64MB)",
                        value, opt, min, max >> 20);
        return false;
    }
    *out = (uint64_t) v * unit;
    return true;
}

bool
cli_global_option(int c, const char *arg, GlobalOpts *g)
{
    switch (c)
    {
        case 'd':
            g->conninfo = arg;
            break;
        case 'v':
            g->verbose++;
            break;
        case 'q':
            g->quiet = true;
            break;
        case 'V':
            printf("v7fill %s\n", V7FILL_VERSION);
            return true;
        default:
            break;
    }
    if (g->quiet)
        log_set_level(LOG_LEVEL_WARN);
    else if (g->verbose == 1)
        log_set_level(LOG_LEVEL_DETAIL);
    else if (g->verbose > 1)
        log_set_level(LOG_LEVEL_DEBUG);
    return false;
}

/*
 * The allocator keeps what it frees.  The writer's probe of every batch
 * (libpq's PGresult of up to 4x the batch's ids: thousands of small blocks
 * and one large array), the sink's per-batch arrays and the like are made and
 * freed again for every batch.  glibc's defaults give the top of a heap back
 * to the kernel as soon as a little of it is free, and map a block above its
 * moving mmap threshold on its own, so each batch paid mmap, munmap, madvise
 * and a page fault per 4 KiB: a tenth of a re-import's client CPU.  Each heap
 * (the main one, and each thread's arena) now keeps up to 32 MiB of freed
 * memory, and blocks up to 8 MiB come from a heap (a larger one, such as a
 * huge record's buffer, is still mapped on its own and returned when freed).
 * A thread's arena heap is at most 64 MiB, so it can still shrink.  The
 * user's own settings of these two (GLIBC_TUNABLES, or glibc's older
 * MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_) win.
 */
static void
malloc_policy(void)
{
#ifdef __GLIBC__
    const char *tunables = getenv("GLIBC_TUNABLES");

    if (getenv("MALLOC_TRIM_THRESHOLD_") != NULL || getenv("MALLOC_MMAP_THRESHOLD_") != NULL ||
        (tunables != NULL && (strstr(tunables, "glibc.malloc.trim_threshold") != NULL ||
                              strstr(tunables, "glibc.malloc.mmap_threshold") != NULL)))
        return;
    (void) mallopt(M_TRIM_THRESHOLD, 32 << 20);
    (void) mallopt(M_MMAP_THRESHOLD, 8 << 20);
#endif
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    GlobalOpts g = {0};
    Err err = {0};
    int c;

    malloc_policy();
    while ((c = getopt_long(argc, argv, "+" CLI_GLOBAL_SHORTOPTS "h", longopts, NULL)) != -1)
    {
        switch (c)
        {
            CLI_GLOBAL_CASES(c, &g, return 0);
            case 'h':
                main_usage(stdout);
                return 0;
            default:
                cli_usage_error(&err, NULL, "unknown or incomplete option");
                return cli_fail(&err);
        }
    }

    if (optind >= argc)
    {
        main_usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    {
        if (strcmp(argv[optind], commands[i].name) == 0)
        {
            int status;
            int sub_argc = argc - optind;
            char **sub_argv = argv + optind;

            optind = 0; /* reset getopt for the command (glibc: 0 re-initialises) */
            status = commands[i].fn(sub_argc, sub_argv, &g, &err);
            if (status != 0 && err.code != EC_OK)
                return cli_fail(&err);
            return status;
        }
    }
    cli_usage_error(&err, NULL, "unknown command \"%s\"", argv[optind]);
    return cli_fail(&err);
}
