/*
 * v7fill maintain TABLE: windows ahead and retirement of windows past the
 * retention cutoff (src/maintain.c), for cron.  Prints one line per action
 * and ends with "created=N detached=N dropped=N issues=N".
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "v7fill/catalog.h"
#include "v7fill/maintain.h"
#include "v7fill/retention.h"
#include "v7fill/timeparse.h"

static void
maintain_usage(FILE *out)
{
    fprintf(out,
            "Usage:\n"
            "  v7fill maintain TABLE [OPTION]...\n"
            "\n"
            "Make sure now's window and the next N exist, and retire the windows whose\n"
            "upper bound is older than now - retention: DETACH PARTITION ... CONCURRENTLY\n"
            "(plain DETACH when TABLE has a DEFAULT partition or is a Citus distributed\n"
            "table), then DROP TABLE unless --detach-only.  A window that received rows\n"
            "within the quiet period is not retired: a late row is arriving there right\n"
            "now (v7fill records the windows every import batch writes to).  Tables\n"
            "managed by pg_partman are left to it.\n"
            "\n"
            "Options:\n"
            "      --retention=R        retire windows older than R (e.g. 90d); default: the\n"
            "                           retention stored with \"v7fill retention TABLE set\";\n"
            "                           without one nothing is retired\n"
            "      --ahead=N            windows after now's that must exist (default %d)\n"
            "      --drop               drop retired windows after detaching them (default)\n"
            "      --detach-only        detach retired windows and keep them as tables\n"
            "      --quiet-period=D     refuse to retire a window that received rows within D\n"
            "                           (default 1h)\n"
            "  -n, --dry-run            say what would be done; change nothing\n"
            "  -g, --granularity=G      windows created ahead: day, week, month, quarter,\n"
            "                           year (default: as the existing partitions)\n"
            "      --window-tz=TZ       window edges at local midnight of TZ (default UTC)\n"
            "      --name-pattern=P     names of new partitions (see \"v7fill partitions\")\n"
            "      --lock-timeout=MS    lock_timeout of each statement (default 5000)\n"
            "      --now=T              with --dry-run only: preview as if it were T (cutoff and\n"
            "                           windows ahead; the quiet period uses the real clock)\n"
            "  -h, --help               this help\n"
            "\n"
            "Exit status: 0 done; 2 usage; 3 issues (a window refused or left half-done,\n"
            "pg_partman manages TABLE, an unsupported table); 5 database error.\n",
            MAINTAIN_DEFAULT_AHEAD);
}

enum
{
    OPT_RETENTION = 256,
    OPT_AHEAD,
    OPT_DROP,
    OPT_DETACH_ONLY,
    OPT_QUIET,
    OPT_TZ,
    OPT_PATTERN,
    OPT_LOCK_TIMEOUT,
    OPT_NOW,
};

static void
print_event(void *arg, const MaintainEvent *ev)
{
    (void) arg;
    printf("%s%s\n", ev->action == MAINTAIN_REFUSED || ev->action == MAINTAIN_ISSUE ? "ISSUE: " : "",
           ev->message);
    fflush(stdout);
}

int
cmd_maintain(int argc, char **argv, GlobalOpts *g, Err *err)
{
    static const struct option longopts[] = {
        {"retention", required_argument, NULL, OPT_RETENTION},
        {"ahead", required_argument, NULL, OPT_AHEAD},
        {"drop", no_argument, NULL, OPT_DROP},
        {"detach-only", no_argument, NULL, OPT_DETACH_ONLY},
        {"quiet-period", required_argument, NULL, OPT_QUIET},
        {"dry-run", no_argument, NULL, 'n'},
        {"granularity", required_argument, NULL, 'g'},
        {"window-tz", required_argument, NULL, OPT_TZ},
        {"name-pattern", required_argument, NULL, OPT_PATTERN},
        {"lock-timeout", required_argument, NULL, OPT_LOCK_TIMEOUT},
        {"now", required_argument, NULL, OPT_NOW},
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    MaintainOptions o;
    MaintainResult res;
    const char *retention = NULL;
    bool drop = false;
    TargetTable *t = NULL;
    PgConn *conn = NULL;
    Retention ret;
    PartmanInfo pm;
    char summary[128];
    int status = 0;
    long n;
    int c;

    maintain_options_default(&o);
    while ((c = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "ng:h", longopts, NULL)) != -1)
    {
        switch (c)
        {
            case OPT_RETENTION:
                if (!retention_parse(optarg, &ret, err))
                {
                    err_hint(err, "Try \"v7fill maintain --help\".");
                    return 2;
                }
                retention = optarg;
                break;
            case OPT_AHEAD:
                if (!cli_parse_long("maintain", "--ahead", optarg, 0, 1000, &n, err))
                    return 2;
                o.ahead = (int) n;
                break;
            case OPT_DROP:
                drop = true;
                break;
            case OPT_DETACH_ONLY:
                o.detach_only = true;
                break;
            case OPT_QUIET:
                if (!duration_parse(optarg, &o.quiet_period_us, err))
                {
                    err_prefix(err, "--quiet-period");
                    err->code = EC_USAGE;
                    return 2;
                }
                break;
            case 'n':
                o.dry_run = true;
                break;
            case 'g':
                if (!granularity_parse(optarg, &o.granularity, err))
                {
                    err->code = EC_USAGE;
                    return 2;
                }
                break;
            case OPT_TZ:
                o.window_tz = optarg;
                break;
            case OPT_PATTERN:
                o.name_pattern = optarg;
                break;
            case OPT_LOCK_TIMEOUT:
                if (!cli_parse_long("maintain", "--lock-timeout", optarg, 1, 3600000, &n, err))
                    return 2;
                o.lock_timeout_ms = (int) n;
                break;
            case OPT_NOW:
                if (!time_parse_iso(optarg, &o.now_us, err))
                {
                    err_prefix(err, "--now");
                    err->code = EC_USAGE;
                    return 2;
                }
                break;
            CLI_GLOBAL_CASES(c, g, return 0);
            case 'h':
                maintain_usage(stdout);
                return 0;
            default:
                return cli_usage_error(err, "maintain", "unknown or incomplete option");
        }
    }
    if (o.now_us != 0 && !o.dry_run)
        return cli_usage_error(err, "maintain",
                               "--now previews a policy and needs --dry-run: a real run always "
                               "uses the real clock");
    if (drop && o.detach_only)
        return cli_usage_error(err, "maintain", "--drop and --detach-only exclude each other");
    if (argc - optind != 1)
        return cli_usage_error(err, "maintain", "\"maintain\" takes exactly one TABLE");

    if (!pg_connect(g->conninfo, &conn, err))
        return 1;
    if (!catalog_load_target(conn, argv[optind], &t, err) ||
        !retention_partman(conn, t->schema, t->name, &pm, err))
    {
        status = 1;
        goto out;
    }
    if (pm.manages)
    {
        err_set(err, EC_CONFIG, "pg_partman manages %s.%s: its maintenance creates and retires "
                                "the partitions",
                t->schema, t->name);
        err_detail(err, "%s.part_config (pg_partman %s) has a row for the table; two tools "
                        "retiring one table's windows would fight.",
                   pm.schema, pm.version);
        err_hint(err, "Run %s.run_maintenance() (or its background worker); \"v7fill report\" "
                      "reads pg_partman's retention.",
                 pm.schema);
        status = 1;
        goto out;
    }
    if (!retention_resolve(conn, t->schema, t->name, retention, &ret, err))
    {
        status = 1;
        goto out;
    }
    o.retention_us = ret.us;
    if (ret.source == RETENTION_NONE)
        printf("no retention (none given with --retention, none stored): nothing is retired\n");
    else
    {
        char desc[512];

        retention_describe(&ret, desc, sizeof desc);
        printf("retention %s\n", desc);
    }
    o.on_event = print_event;
    if (!maintain_run(conn, t, &o, &res, err))
    {
        maintain_result_format(&res, summary, sizeof summary);
        printf("%s (stopped by an error)\n", summary);
        status = 1;
        goto out;
    }
    maintain_result_format(&res, summary, sizeof summary);
    printf("%s%s\n", summary, o.dry_run ? " (dry run: nothing was changed)" : "");
    if (res.issues > 0)
    {
        *err = res.issue;
        status = 1;
    }
out:
    catalog_target_free(t);
    pg_close(conn);
    return status;
}
