/*
 * v7fill retention TABLE set DURATION | show | clear: the retention v7fill
 * keeps for a table (v7fill.retention), and where the one in force comes
 * from.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "v7fill/catalog.h"
#include "v7fill/retention.h"
#include "v7fill/timeparse.h"

static void
retention_usage(FILE *out)
{
    fprintf(out,
            "Usage:\n"
            "  v7fill retention TABLE set DURATION   store TABLE's retention (e.g. 90d, 1 year)\n"
            "  v7fill retention TABLE show           the retention in force and where it comes from\n"
            "  v7fill retention TABLE clear          forget the stored retention\n"
            "\n"
            "The retention in force is, in this order: --retention given to a command; the\n"
            "one stored here (in the table v7fill.retention of the target database);\n"
            "pg_partman's part_config.retention when pg_partman manages TABLE; else none.\n"
            "A window [from, to) retires once now > to + retention.\n"
            "\n"
            "DURATION: 90d, 36h, 2w, \"3 months\" (30 days each), \"1 year\" (365 days),\n"
            "combinations such as 1d12h, or ISO 8601 (P30D).\n"
            "\n"
            "Exit status: 0 done; 2 usage; 3 unsupported table or an unreadable pg_partman\n"
            "retention; 5 database error.\n");
}

static void
show_line(const char *what, const Retention *r)
{
    char len[48];

    if (r->source == RETENTION_NONE)
    {
        printf("  %-18s none\n", what);
        return;
    }
    duration_format(r->us, len, sizeof len);
    printf("  %-18s %s (%s)\n", what, r->text, len);
}

static int
retention_show(PgConn *c, const TargetTable *t, Err *err)
{
    Retention in_force;
    Retention stored;
    PartmanInfo pm;
    char desc[512];

    if (!retention_stored_get(c, t->schema, t->name, &stored, err) ||
        !retention_partman(c, t->schema, t->name, &pm, err) ||
        !retention_resolve(c, t->schema, t->name, NULL, &in_force, err))
        return 1;
    retention_describe(&in_force, desc, sizeof desc);
    printf("retention of %s.%s: %s\n", t->schema, t->name, desc);
    show_line("stored by v7fill:", &stored);
    if (!pm.installed)
        printf("  %-18s not installed\n", "pg_partman:");
    else if (!pm.manages)
        printf("  %-18s %s installed in schema %s; does not manage this table\n", "pg_partman:",
               pm.version, pm.schema);
    else if (!pm.has_retention)
        printf("  %-18s %s manages this table (%s.part_config), no retention\n", "pg_partman:",
               pm.version, pm.schema);
    else
    {
        char len[48];

        duration_format(pm.retention_us, len, sizeof len);
        printf("  %-18s %s (%s), from %s.part_config (pg_partman %s)\n", "pg_partman:",
               pm.retention, len, pm.schema, pm.version);
    }
    if (in_force.source == RETENTION_NONE)
        printf("Without retention windows are never retired and no row is ever too late.\n");
    return 0;
}

int
cmd_retention(int argc, char **argv, GlobalOpts *g, Err *err)
{
    static const struct option longopts[] = {
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *table;
    const char *action;
    TargetTable *t = NULL;
    PgConn *conn = NULL;
    int status = 0;
    int c;

    while ((c = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "h", longopts, NULL)) != -1)
    {
        switch (c)
        {
            CLI_GLOBAL_CASES(c, g, return 0);
            case 'h':
                retention_usage(stdout);
                return 0;
            default:
                return cli_usage_error(err, "retention", "unknown or incomplete option");
        }
    }
    /* The operands, as argv[1..] (getopt moved them after the options). */
    argc -= optind - 1;
    argv += optind - 1;
    if (argc < 3)
        return cli_usage_error(err, "retention", "\"retention\" needs a TABLE and an action: set, "
                                                 "show or clear");
    table = argv[1];
    action = argv[2];
    if (strcmp(action, "set") == 0)
    {
        Retention check;

        if (argc != 4)
            return cli_usage_error(err, "retention", "\"retention TABLE set\" takes one DURATION");
        if (!retention_parse(argv[3], &check, err))
        {
            err_hint(err, "Try \"v7fill retention --help\".");
            return 2;
        }
    }
    else if (strcmp(action, "show") == 0 || strcmp(action, "clear") == 0)
    {
        if (argc != 3)
            return cli_usage_error(err, "retention", "\"retention TABLE %s\" takes no more "
                                                     "arguments",
                                   action);
    }
    else
        return cli_usage_error(err, "retention", "unknown action \"%s\": expected set, show or "
                                                 "clear",
                               action);

    if (!pg_connect(g->conninfo, &conn, err))
        return 1;
    if (!catalog_load_target(conn, table, &t, err))
    {
        pg_close(conn);
        return 1;
    }
    if (strcmp(action, "set") == 0)
    {
        Retention r;
        PartmanInfo pm;
        Err perr = {0};

        if (!retention_stored_set(conn, t->schema, t->name, argv[3], &r, err))
            status = 1;
        else
        {
            char len[48];

            duration_format(r.us, len, sizeof len);
            printf("retention of %s.%s set to %s (%s)\n", t->schema, t->name, r.text, len);
            /* Said, not refused: v7fill reads pg_partman, it does not drive it. */
            if (retention_partman(conn, t->schema, t->name, &pm, &perr) && pm.manages)
                printf("note: pg_partman manages this table%s%s; v7fill judges with %s, pg_partman "
                       "keeps dropping by its own part_config\n",
                       pm.has_retention ? " with retention " : "",
                       pm.has_retention ? pm.retention : "", r.text);
        }
    }
    else if (strcmp(action, "clear") == 0)
    {
        bool existed = false;

        if (!retention_stored_clear(conn, t->schema, t->name, &existed, err))
            status = 1;
        else
            printf("%s\n", existed ? "stored retention cleared" : "no retention was stored");
    }
    else
        status = retention_show(conn, t, err);
    catalog_target_free(t);
    pg_close(conn);
    return status;
}
