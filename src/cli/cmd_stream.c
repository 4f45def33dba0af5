/*
 * v7fill stream: option parsing over stream_run, and the closing summary.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/pgoutput.h"
#include "v7fill/stream.h"
#include "v7fill/timeparse.h"

enum
{
    OPT_SOURCE = 256,
    OPT_FROM,
    OPT_PUBLICATION,
    OPT_SLOT,
    OPT_TIME_COLUMN,
    OPT_TIME_FORMAT,
    OPT_SOURCE_REF,
    OPT_MAP,
    OPT_IGNORE,
    OPT_ON_DELETE,
    OPT_ON_TRUNCATE,
    OPT_AHEAD,
    OPT_GROUP_ROWS,
    OPT_GROUP_MS,
    OPT_NO_SNAPSHOT,
    OPT_UNTIL_CAUGHT_UP,
    OPT_LOOKUP,
    OPT_RETENTION,
    OPT_MAX_FUTURE,
    OPT_BATCH_ROWS,
};

static void
stream_usage(FILE *out)
{
    fputs("Usage: v7fill [-d TARGET_CONNINFO] stream TABLE --source CONNINFO --from SCHEMA.TABLE\n"
          "                --publication PUB --slot SLOT [OPTION]...\n"
          "\n"
          "Copy a table of a live PostgreSQL database into TABLE (partitioned on a UUIDv7\n"
          "key) and then follow its changes over logical replication (pgoutput), exactly\n"
          "once: each source transaction's rows and the stream's position are committed in\n"
          "one target transaction, and the slot only moves over what the target committed.\n"
          "\n"
          "Source:\n"
          "  --source CONNINFO       the source database (a role with REPLICATION; the password\n"
          "                         from ~/.pgpass or PGPASSWORD is best)\n"
          "  --from SCHEMA.TABLE     the table to stream (in the publication)\n"
          "  --publication PUB      a publication holding it (created before the slot)\n"
          "  --slot SLOT            the replication slot: created with the stream (then the\n"
          "                         table is copied first); found again on later runs\n"
          "  --no-snapshot          no initial copy: only changes from the slot's creation on\n"
          "\n"
          "Rows:\n"
          "  --time-column COL      the event time each id carries (default created_at)\n"
          "  --time-format FMT      iso (default), epoch, epoch_ms, ...\n"
          "  --source-ref TEMPLATE  how a row is named (default SCHEMA.TABLE:{pk}, the same\n"
          "                         template `v7fill import` of a dump of the table takes)\n"
          "  --map SRC=TARGET       source column SRC goes to target column TARGET\n"
          "  --ignore-column COL    do not write source column COL\n"
          "  --lookup-table NAME    the reference lookup (default <table>_source_ref)\n"
          "  --retention DURATION   as for import (default: stored, pg_partman's, none)\n"
          "  --max-future DURATION  clock skew allowed ahead of now (default 5min)\n"
          "\n"
          "Changes:\n"
          "  --on-delete delete|ignore     delete the target row (default), or keep it\n"
          "  --on-truncate stop|apply|ignore\n"
          "                         a TRUNCATE on the source stops the stream (default),\n"
          "                         empties the target and its lookup too, or is ignored\n"
          "  --group-rows N         a target transaction holds up to N rows (default 10000)\n"
          "  --group-ms MS          ... or what arrived within MS ms (default 200); always\n"
          "                         whole source transactions\n"
          "  --batch-rows N         rows per batch of the initial copy (default 10000)\n"
          "  --ahead N              windows ensured after now's at start (default 2)\n"
          "  --until-caught-up      exit 0 once what the source committed before the start\n"
          "                         is applied (else: run until SIGINT/SIGTERM, exit 0)\n"
          "\n"
          "State lives in the target: v7fill.stream (position, counts), and\n"
          "v7fill.stream_quarantine (rows the target refused, with the reason and the row).\n"
          "Stopping for good: drop the slot on the source, or it keeps WAL forever:\n"
          "  SELECT pg_drop_replication_slot('SLOT');\n"
          "See docs/streaming.md.\n",
          out);
}

static bool
parse_choice(const char *opt, const char *value, const char *const *names, int n, int *out,
             Err *err)
{
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0)
        {
            *out = i;
            return true;
        }
    cli_usage_error(err, "stream", "%s: \"%s\" is not one of %s|%s%s%s", opt, value, names[0],
                    names[1], n > 2 ? "|" : "", n > 2 ? names[2] : "");
    return false;
}

static void
print_summary(const StreamStats *st)
{
    const ImportStats *r = &st->rows;
    char at[PGO_LSN_TEXT_SIZE];
    struct rusage ru;

    memset(&ru, 0, sizeof ru);
    (void) getrusage(RUSAGE_SELF, &ru);
    pgo_lsn_format(st->applied_lsn, at);
    printf("stream: read=%" PRIu64 " (initial copy %" PRIu64 ") inserted=%" PRIu64
           " updated=%" PRIu64 " deleted=%" PRIu64 " duplicates=%" PRIu64 " missing=%" PRIu64
           " quarantined=%" PRIu64 " truncates=%" PRIu64 "\n",
           r->read, st->copied, r->inserted, r->updated, r->deleted, r->duplicates, r->missing,
           r->rejected + r->expired, r->truncates);
    printf("        transactions=%" PRIu64 " skipped=%" PRIu64 " time_changed=%" PRIu64
           " deletes_ignored=%" PRIu64 " truncates_ignored=%" PRIu64 " reconnects=%" PRIu64
           " position=%s partitions_created=%" PRIu64 " elapsed=%.1fs peak_rss=%ldMB\n",
           st->transactions, st->skipped_transactions, r->time_changed, st->deletes_ignored,
           st->truncates_ignored, st->reconnects, at, r->partitions_created, r->elapsed_s,
           ru.ru_maxrss / 1024);
}

int
cmd_stream(int argc, char **argv, GlobalOpts *g, Err *err)
{
    static const struct option longopts[] = {
        {"source", required_argument, NULL, OPT_SOURCE},
        {"from", required_argument, NULL, OPT_FROM},
        {"publication", required_argument, NULL, OPT_PUBLICATION},
        {"slot", required_argument, NULL, OPT_SLOT},
        {"time-column", required_argument, NULL, OPT_TIME_COLUMN},
        {"time-format", required_argument, NULL, OPT_TIME_FORMAT},
        {"source-ref", required_argument, NULL, OPT_SOURCE_REF},
        {"map", required_argument, NULL, OPT_MAP},
        {"ignore-column", required_argument, NULL, OPT_IGNORE},
        {"on-delete", required_argument, NULL, OPT_ON_DELETE},
        {"on-truncate", required_argument, NULL, OPT_ON_TRUNCATE},
        {"ahead", required_argument, NULL, OPT_AHEAD},
        {"group-rows", required_argument, NULL, OPT_GROUP_ROWS},
        {"group-ms", required_argument, NULL, OPT_GROUP_MS},
        {"no-snapshot", no_argument, NULL, OPT_NO_SNAPSHOT},
        {"until-caught-up", no_argument, NULL, OPT_UNTIL_CAUGHT_UP},
        {"lookup-table", required_argument, NULL, OPT_LOOKUP},
        {"retention", required_argument, NULL, OPT_RETENTION},
        {"max-future", required_argument, NULL, OPT_MAX_FUTURE},
        {"batch-rows", required_argument, NULL, OPT_BATCH_ROWS},
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const on_delete[] = {"delete", "ignore"};
    static const char *const on_truncate[] = {"stop", "apply", "ignore"};
    StreamOptions o;
    StreamStats st;
    ColumnMap *maps = NULL;
    size_t nmaps = 0;
    const char **ignore = NULL;
    size_t nignore = 0;
    PgConn *conn = NULL;
    int status = 0;
    int c;
    int choice;
    long n;

    stream_options_default(&o);
    memset(&st, 0, sizeof st);
    while ((c = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "h", longopts, NULL)) != -1)
    {
        switch (c)
        {
            case OPT_SOURCE:
                o.source_conninfo = optarg;
                break;
            case OPT_FROM:
                o.from = optarg;
                break;
            case OPT_PUBLICATION:
                o.publication = optarg;
                break;
            case OPT_SLOT:
                o.slot = optarg;
                break;
            case OPT_TIME_COLUMN:
                o.common.time_column = optarg;
                break;
            case OPT_TIME_FORMAT:
                o.common.time_format = optarg;
                break;
            case OPT_SOURCE_REF:
                o.common.source_ref = optarg;
                break;
            case OPT_MAP:
                if (!cli_parse_map("stream", optarg, &maps, &nmaps, err))
                {
                    status = 2;
                    goto out;
                }
                break;
            case OPT_IGNORE:
                ignore = xrealloc(ignore, (nignore + 1) * sizeof *ignore);
                ignore[nignore++] = optarg;
                break;
            case OPT_ON_DELETE:
                if (!parse_choice("--on-delete", optarg, on_delete, 2, &choice, err))
                {
                    status = 2;
                    goto out;
                }
                o.on_delete = (StreamOnDelete) choice;
                break;
            case OPT_ON_TRUNCATE:
                if (!parse_choice("--on-truncate", optarg, on_truncate, 3, &choice, err))
                {
                    status = 2;
                    goto out;
                }
                o.on_truncate = (StreamOnTruncate) choice;
                break;
            case OPT_AHEAD:
                if (!cli_parse_long("stream", "--ahead", optarg, 0, 1000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.ahead = (int) n;
                break;
            case OPT_GROUP_ROWS:
                if (!cli_parse_long("stream", "--group-rows", optarg, 1, 1000000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.group_rows = (size_t) n;
                break;
            case OPT_GROUP_MS:
                if (!cli_parse_long("stream", "--group-ms", optarg, 1, 3600000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.group_ms = (int) n;
                break;
            case OPT_BATCH_ROWS:
                if (!cli_parse_long("stream", "--batch-rows", optarg, 1, 1000000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.common.batch_rows = (size_t) n;
                break;
            case OPT_NO_SNAPSHOT:
                o.no_snapshot = true;
                break;
            case OPT_UNTIL_CAUGHT_UP:
                o.until_caught_up = true;
                break;
            case OPT_LOOKUP:
                o.common.lookup_table = optarg;
                break;
            case OPT_RETENTION:
                o.common.retention = optarg;
                break;
            case OPT_MAX_FUTURE:
                if (!duration_parse(optarg, &o.common.max_future_us, err))
                {
                    err_prefix(err, "--max-future");
                    err->code = EC_USAGE;
                    status = 2;
                    goto out;
                }
                break;
            CLI_GLOBAL_CASES(c, g, goto out);
            case 'h':
                stream_usage(stdout);
                goto out;
            default:
                status = cli_usage_error(err, "stream", "unknown or incomplete option");
                goto out;
        }
    }
    if (argc - optind != 1)
    {
        status = cli_usage_error(err, "stream", "\"stream\" needs one TABLE (the target)");
        goto out;
    }
    if (!o.source_conninfo || !o.from || !o.publication || !o.slot)
    {
        status = cli_usage_error(err, "stream",
                                 "\"stream\" needs --source, --from, --publication and --slot");
        goto out;
    }
    o.common.table = argv[optind];
    o.common.progress = log_current_level >= LOG_LEVEL_INFO;
    o.common.maps = maps;
    o.common.nmaps = nmaps;
    o.common.ignore = ignore;
    o.common.nignore = nignore;
    if (!pg_connect(g->conninfo, &conn, err))
    {
        status = 1;
        goto out;
    }
    interrupt_install();
    if (!stream_run(conn, &o, &st, err))
        status = 1;
    print_summary(&st);
    import_stats_free(&st.rows);
out:
    pg_close(conn);
    free(maps);
    free(ignore);
    return status;
}
