/*
 * v7fill report TABLE: windows against the retention, the delay
 * distribution of the rows v7fill wrote, and the verdict.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "v7fill/log.h"
#include "v7fill/report.h"
#include "v7fill/timeparse.h"

static void
report_usage(FILE *out)
{
    fprintf(out,
            "Usage:\n"
            "  v7fill report TABLE [OPTION]...\n"
            "\n"
            "How TABLE's windows stand against its retention, and how late rows arrive:\n"
            "windows with row counts and retirement dates, windows near the cutoff, the\n"
            "delay distribution (id time to insert) merged from the statistics of v7fill's\n"
            "runs, the largest delays named by origin (file:line), source reference\n"
            "and id, partitions left \"detach pending\" (not windows: shown apart, with\n"
            "the SQL that finalizes them), and a verdict:\n"
            "  retention R exceeds the largest observed delay D by X\n"
            "or a warning that it does not (retention must exceed the longest delivery\n"
            "delay).  The retention is --retention, else the one stored with \"v7fill\n"
            "retention TABLE set\", else pg_partman's part_config.retention; else none.\n"
            "\n"
            "Options:\n"
            "      --since=T           only runs finished at or after T (a time, or a duration\n"
            "                          back from now such as 30d)\n"
            "      --retention=R       retention to judge against (e.g. 90d), instead of the\n"
            "                          stored or pg_partman's\n"
            "      --near-cutoff=D     a window retiring within D is near the cutoff (default:\n"
            "                          10%% of the retention, at least the window's length)\n"
            "      --exact             count the rows of every partition (default: planner\n"
            "                          estimates, cheap)\n"
            "      --json              the report as JSON\n"
            "      --html=FILE         also write the report as one self-contained HTML page\n"
            "                          (inline SVG charts, no external assets)\n"
            "  -h, --help              this help\n"
            "\n"
            "A window [from, to) retires once now > to + retention (pg_partman's rule).\n"
            "Row classes (on time, near cutoff, expired) are judged under the retention\n"
            "shown: runs that judged them under another are judged again from their\n"
            "windows and insert times, and the report says so.\n"
            "\n"
            "Exit status: 0 report written (whatever the verdict: see \"verdict.ok\" in\n"
            "--json); 1 the HTML file could not be written; 2 usage; 3 unsupported table or\n"
            "an unreadable pg_partman retention; 5 database error.\n");
}

enum
{
    OPT_SINCE = 256,
    OPT_RETENTION,
    OPT_NEAR,
    OPT_EXACT,
    OPT_JSON,
    OPT_HTML,
};

/* --since: a time, or a duration back from now. */
static bool
parse_since(const char *text, int64_t *out, Err *err)
{
    int64_t d;
    Err ignored = {0};

    if (time_parse_iso(text, out, &ignored))
        return true;
    if (duration_parse(text, &d, &ignored))
    {
        *out = (int64_t) time(NULL) * 1000000 - d;
        return true;
    }
    cli_usage_error(err, "report",
                    "invalid --since \"%s\": expected a time (2026-07-01, RFC 3339) or a "
                    "duration back from now (30d)",
                    text);
    return false;
}

int
cmd_report(int argc, char **argv, GlobalOpts *g, Err *err)
{
    static const struct option longopts[] = {
        {"since", required_argument, NULL, OPT_SINCE},
        {"retention", required_argument, NULL, OPT_RETENTION},
        {"near-cutoff", required_argument, NULL, OPT_NEAR},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"json", no_argument, NULL, OPT_JSON},
        {"html", required_argument, NULL, OPT_HTML},
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ReportOptions o;
    Report *r = NULL;
    PgConn *conn = NULL;
    const char *html = NULL;
    bool json = false;
    int status = 0;
    int c;

    memset(&o, 0, sizeof o);
    while ((c = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "h", longopts, NULL)) != -1)
    {
        switch (c)
        {
            case OPT_SINCE:
                if (!parse_since(optarg, &o.since_us, err))
                    return 2;
                o.since_set = true;
                break;
            case OPT_RETENTION:
            {
                Retention check;

                if (!retention_parse(optarg, &check, err))
                {
                    err_hint(err, "Try \"v7fill report --help\".");
                    return 2;
                }
                o.retention = optarg;
                break;
            }
            case OPT_NEAR:
                if (!duration_parse(optarg, &o.near_cutoff_us, err) || o.near_cutoff_us <= 0)
                    return cli_usage_error(err, "report",
                                           "invalid --near-cutoff \"%s\": expected a duration "
                                           "longer than zero, e.g. 7d",
                                           optarg);
                break;
            case OPT_EXACT:
                o.exact = true;
                break;
            case OPT_JSON:
                json = true;
                break;
            case OPT_HTML:
                html = optarg;
                break;
            CLI_GLOBAL_CASES(c, g, return 0);
            case 'h':
                report_usage(stdout);
                return 0;
            default:
                return cli_usage_error(err, "report", "unknown or incomplete option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(err, "report", "\"report\" takes exactly one TABLE");
    o.table = argv[optind];

    if (!pg_connect(g->conninfo, &conn, err))
        return 1;
    if (!report_build(conn, &o, &r, err))
    {
        pg_close(conn);
        return 1;
    }
    pg_close(conn);
    if (json)
    {
        char *text = report_json(r);

        if (text == NULL)
        {
            err_set(err, EC_INTERNAL, "could not build the JSON report");
            status = 1;
        }
        else
            printf("%s\n", text);
        free(text);
    }
    else
        report_print(stdout, r);
    if (status == 0 && html)
    {
        if (!report_write_html(r, html, err))
            status = 1;
        else
            log_info("wrote %s", html);
    }
    report_free(r);
    return status;
}
