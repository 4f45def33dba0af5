/*
 * v7fill uuid floor|time|new: what an application developer uses to turn a
 * time range into an id range (partition pruning) and back.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "v7fill/civil.h"
#include "v7fill/timeparse.h"
#include "v7fill/uuid7.h"

static void
uuid_usage(FILE *out)
{
    fprintf(out,
            "Usage:\n"
            "  v7fill uuid floor TIME [--bare]   smallest UUIDv7 of TIME's millisecond\n"
            "  v7fill uuid time UUID             the instant a UUIDv7 carries (RFC 3339, UTC)\n"
            "  v7fill uuid floor|time --stdin    one TIME or UUID per input line, one answer per\n"
            "                                    output line (\"ERROR<TAB>message\" for a bad line;\n"
            "                                    exit status 4 if any line was bad)\n"
            "  v7fill uuid new [--at TIME] [--count N]\n"
            "                                    new UUIDv7s (CSPRNG bits), now or at TIME; a batch\n"
            "                                    is strictly increasing (ids of one 1/4096 ms\n"
            "                                    tick count up in their random tail)\n"
            "\n"
            "TIME is RFC 3339 / ISO 8601 or PostgreSQL text output, e.g. 2026-07-01,\n"
            "2026-07-01T12:00:00Z, '2026-07-01 12:00:00.5+02'; without an offset it is UTC.\n"
            "\n"
            "Query a time range [a, b) with pruning:\n"
            "  WHERE id >= '<floor a>' AND id < '<floor b>'\n"
            "\n"
            "Options:\n"
            "      --bare     floor with version and variant bits zero (pg_partman 5.2+ bounds)\n"
            "      --stdin    read the arguments from standard input, one per line\n"
            "      --at=TIME  mint ids at TIME instead of now\n"
            "  -n, --count=N  how many ids (default 1)\n"
            "  -h, --help     this help\n");
}

/* One answer for one argument: floor of a TIME or time of a UUID, into out. */
static bool
uuid_answer(bool floor, bool bare, const char *arg, char *out, size_t size, Err *err)
{
    Uuid u;

    if (floor)
    {
        int64_t us;
        if (!time_parse_iso(arg, &us, err) ||
            !(bare ? uuid7_floor_bare(us, &u, err) : uuid7_floor(us, &u, err)))
            return false;
        uuid_format(&u, out);
        return true;
    }
    if (!uuid_parse(arg, strlen(arg), &u, err) || !uuid7_check(&u, err))
        return false;
    /* µs are shown when rand_a carries a fraction (RFC 9562 6.2 method 3). */
    civil_format_rfc3339(uuid7_us(&u), uuid7_rand_a(&u) != 0, out, size);
    return true;
}

/* --stdin: one argument per line; a bad line answers "ERROR<TAB>message". */
static int
uuid_stdin(bool floor, bool bare, Err *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long bad = 0;
    long lineno = 0;

    while ((len = getline(&line, &cap, stdin)) >= 0)
    {
        char out[64];
        Err lerr = {0};

        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (uuid_answer(floor, bare, line, out, sizeof out, &lerr))
            printf("%s\n", out);
        else
        {
            printf("ERROR\t%s\n", lerr.msg);
            bad++;
        }
    }
    free(line);
    if (bad > 0)
    {
        err_set(err, EC_FORMAT, "%ld of %ld input lines could not be converted", bad, lineno);
        return 4;
    }
    return 0;
}

static int
uuid_floor_or_time(int argc, char **argv, bool floor, GlobalOpts *g, Err *err)
{
    static const struct option longopts[] = {
        {"bare", no_argument, NULL, 'b'},
        {"stdin", no_argument, NULL, 's'},
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *sub = floor ? "uuid floor" : "uuid time";
    bool bare = false;
    bool from_stdin = false;
    char out[64];
    int c;

    while ((c = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "h", longopts, NULL)) != -1)
    {
        if (c == 'b' && floor)
            bare = true;
        else if (c == 's')
            from_stdin = true;
        else if (c == 'h')
        {
            uuid_usage(stdout);
            return 0;
        }
        else if (c == 'd' || c == 'v' || c == 'q' || c == 'V')
        {
            if (cli_global_option(c, optarg, g))
                return 0;
        }
        else
            return cli_usage_error(err, "uuid", "unknown option for \"%s\"", sub);
    }
    if (from_stdin)
    {
        if (optind != argc)
            return cli_usage_error(err, "uuid", "\"%s --stdin\" takes no argument", sub);
        return uuid_stdin(floor, bare, err);
    }
    if (argc - optind != 1)
        return cli_usage_error(err, "uuid", "\"%s\" takes exactly one %s", sub,
                               floor ? "TIME" : "UUID");
    if (!uuid_answer(floor, bare, argv[optind], out, sizeof out, err))
        return 1;
    printf("%s\n", out);
    return 0;
}

static int64_t
now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int
uuid_new_cmd(int argc, char **argv, GlobalOpts *g, Err *err)
{
    static const struct option longopts[] = {
        {"at", required_argument, NULL, 'a'},
        {"count", required_argument, NULL, 'n'},
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *at = NULL;
    long count = 1;
    int64_t at_us = 0;
    IdRandom *rnd;
    Uuid prev;
    int64_t prev_us = 0;
    int c;
    int status = 0;

    while ((c = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "n:h", longopts, NULL)) != -1)
    {
        switch (c)
        {
            case 'a':
                at = optarg;
                break;
            case 'n':
                if (!cli_parse_long("uuid", "--count", optarg, 1, 100000000, &count, err))
                    return 2;
                break;
            CLI_GLOBAL_CASES(c, g, return 0);
            case 'h':
                uuid_usage(stdout);
                return 0;
            default:
                return cli_usage_error(err, "uuid", "unknown option for \"uuid new\"");
        }
    }
    if (optind != argc)
        return cli_usage_error(err, "uuid", "\"uuid new\" takes no arguments besides options");
    if (at && !time_parse_iso(at, &at_us, err))
        return 1;
    rnd = id_random_new();
    for (long i = 0; i < count; i++)
    {
        uint64_t bits;
        Uuid u;
        char text[UUID_TEXT_SIZE];
        /* a clock stepped back must not break the batch's order */
        int64_t us = at ? at_us : now_us();

        if (i > 0 && us < prev_us)
            us = prev_us;
        if (!id_random_bits(rnd, &bits, err) || !uuid7_next(i > 0 ? &prev : NULL, us, bits, &u, err))
        {
            status = 1;
            break;
        }
        prev = u;
        prev_us = us;
        uuid_format(&u, text);
        fputs(text, stdout);
        fputc('\n', stdout);
    }
    id_random_free(rnd);
    return status;
}

int
cmd_uuid(int argc, char **argv, GlobalOpts *g, Err *err)
{
    if (argc < 2)
        return cli_usage_error(err, "uuid", "\"uuid\" needs a subcommand: floor, time or new");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
    {
        uuid_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "floor") == 0)
        return uuid_floor_or_time(argc - 1, argv + 1, true, g, err);
    if (strcmp(argv[1], "time") == 0)
        return uuid_floor_or_time(argc - 1, argv + 1, false, g, err);
    if (strcmp(argv[1], "new") == 0)
        return uuid_new_cmd(argc - 1, argv + 1, g, err);
    return cli_usage_error(err, "uuid", "unknown uuid subcommand \"%s\"", argv[1]);
}
