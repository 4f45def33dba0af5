/*
 * v7fill import / v7fill plan: option parsing over the pipeline, and the
 * final report.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "v7fill/import.h"
#include "v7fill/import_report.h"
#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/source_csv.h"
#include "v7fill/timeparse.h"

static void
import_usage(FILE *out, const char *cmd)
{
    fprintf(out,
            "Usage:\n"
            "  v7fill %s TABLE FILE... [OPTION]...\n"
            "\n"
            "%s\n"
            "FILE may be '-' (standard input); zstd input (*.zst or the zstd magic number) is\n"
            "checked whole first (frame checksums; stdin via a temporary file in $TMPDIR),\n"
            "then decompressed on the fly: a corrupt one imports nothing.\n"
            "\n"
            "Input:\n"
            "      --time-column=COL      event time column (default: created_at)\n"
            "      --time-format=FMT      iso (default), epoch-s, epoch-ms, epoch-us, or a\n"
            "                             strptime pattern such as '%%d/%%m/%%Y %%H:%%M:%%S'\n"
            "      --input-timezone=TZ    zone of times without an offset (default UTC)\n"
            "      --id-column=COL        the input carries ids: keep valid UUIDv7s, reject others\n"
            "      --source-ref=TEMPLATE  what names a row in its origin, e.g. 'legacy.orders:{id}'\n"
            "                             (default: all of the record's values; ending in a\n"
            "                             serial key keeps the lookup in its order: faster)\n"
            "      --new-source-ref       import a file again under a --source-ref other than\n"
            "                             the one it was imported with (every row once more)\n"
            "      --map=CSVCOL=TARGETCOL write CSVCOL into TARGETCOL (repeatable)\n"
            "      --ignore-column=COL    skip an input column the file has (repeatable; every\n"
            "                             copy of a name the header repeats)\n"
            "      --header / --no-header first line names the columns (default: --header)\n"
            "      --delimiter=C          field delimiter (default ','; tab: a tab)\n"
            "      --quote=C              quote character (default '\"')\n"
            "      --escape=C             escape character inside quotes (default: doubled quote)\n"
            "      --null=STRING          unquoted STRING is NULL (an unquoted empty field always is)\n"
            "      --encoding=UTF8        input encoding (only UTF8; invalid bytes are rejected)\n"
            "\n"
            "Writing:\n"
            "      --batch-rows=N         rows per transaction (default 10000; two in memory;\n"
            "                             larger is faster for big imports, e.g. 50000)\n"
            "      --batch-bytes=SIZE     end a batch early at SIZE of row data, for wide rows\n"
            "                             (default 64MB, at most 1GB)\n"
            "  -j, --jobs=N               N writer connections (default 1): batches are\n"
            "                             written in parallel and committed in reading order;\n"
            "                             N + 1 batches in memory (import; plan ignores it)\n"
            "      --rejects=FILE         rejected rows with reasons (default TABLE.rejects.csv;\n"
            "                             a file, not '-')\n"
            "      --max-rejects=N|P%%     stop when more rows than this are rejected\n"
            "      --max-future=DURATION  reject rows this far ahead of now as \"clock ahead\"\n"
            "                             (default 5min)\n"
            "      --lookup-table=NAME    source-reference lookup (default TABLE_source_ref)\n"
            "      --keep-ref-text        store the reference text in the lookup table\n"
            "      --lookup-keys=K        a new lookup's keys: ordered (default; led by the\n"
            "                             integer a reference ends in, kept in the clear) or\n"
            "                             hashed (the keyed hash alone)\n"
            "      --key-map=COL          the lookup is a typed key map TABLE_id_map (legacy_id\n"
            "                             bigint PRIMARY KEY, id uuid UNIQUE): COL (its name in\n"
            "                             the file) holds each row's integer key; a row whose\n"
            "                             key is in the map is a duplicate (not with\n"
            "                             --source-ref)\n"
            "      --granularity=G        window size for new partitions: day, week, month,\n"
            "                             quarter, year (default: as the existing partitions)\n"
            "      --window-tz=TZ         new windows start at local midnight of TZ, as made\n"
            "                             by `v7fill partitions --window-tz` (default UTC)\n"
            "      --lock-timeout=MS      lock_timeout while attaching partitions (default 5000)\n"
            "      --no-analyze           do not ANALYZE the target (and its partitions) nor\n"
            "                             VACUUM the lookup table afterwards\n"
            "      --skip-finished        skip files an earlier run imported completely (same\n"
            "                             path, size and start) instead of reading them again\n"
            "\n"
            "Retention (late rows):\n"
            "      --retention=DURATION   the table's retention (default: as stored with\n"
            "                             `v7fill retention`, else pg_partman's, else none)\n"
            "      --near-cutoff=DURATION rows whose window retires within this are reported\n"
            "                             (default 10%% of the retention, at least one window)\n"
            "      --keep-expired         insert rows whose window is already retired (warned)\n"
            "      --late-rows=FILE       expired and near-cutoff rows (default TABLE.late.csv)\n"
            "\n"
            "Output:\n"
            "      --report-json=FILE     the final report as JSON ('-' = stdout, the table\n"
            "                             then goes to stderr)\n"
            "      --json                 print the report as JSON instead of the table\n"
            "      --no-progress          no progress display\n"
            "      --record-every=S       record the rows imported since the last record as a\n"
            "                             run in v7fill.run every S seconds, for v7fill report\n"
            "                             (default 60; 0: only when the import ends; plan\n"
            "                             records nothing)\n"
            "  -h, --help                 this help\n"
            "\n"
            "Exit status: 0 done (rejected rows, if any, are in the rejects file); 1 a file\n"
            "could not be opened, read or written; 2 usage; 3 configuration; 4 unreadable\n"
            "input; 5 database error; 6 --max-rejects reached; 70 internal error (the\n"
            "counts do not balance); 130 interrupted.\n",
            cmd,
            strcmp(cmd, "plan") == 0
                ? "Show what an import would do: windows touched, partitions that would be\n"
                  "created (DDL), rows that would be rejected and why.  Writes nothing."
                : "Import CSV dumps into TABLE, partitioned on a UUIDv7 key: mint an id from\n"
                  "each row's event time, create missing partitions lock-light, skip rows\n"
                  "already imported, COPY in batches (one transaction each).  Rerunning the\n"
                  "same command resumes an interrupted import and inserts nothing twice.");
}

enum
{
    OPT_INPUT_TZ = 256,
    OPT_ID_COLUMN,
    OPT_MAP,
    OPT_IGNORE,
    OPT_HEADER,
    OPT_NO_HEADER,
    OPT_DELIMITER,
    OPT_QUOTE,
    OPT_ESCAPE,
    OPT_NULL,
    OPT_ENCODING,
    OPT_BATCH_BYTES,
    OPT_REJECTS,
    OPT_MAX_REJECTS,
    OPT_KEEP_REF,
    OPT_LOOKUP_KEYS,
    OPT_GRANULARITY,
    OPT_WINDOW_TZ,
    OPT_LOCK_TIMEOUT,
    OPT_SKIP_FINISHED,
    OPT_REPORT_JSON,
    OPT_JSON,
    OPT_NO_PROGRESS,
    OPT_NEAR_CUTOFF,
    OPT_KEEP_EXPIRED,
    OPT_LATE_ROWS,
    OPT_NEW_SOURCE_REF,
    OPT_RECORD_EVERY,
};

static bool
single_char(const char *cmd, const char *opt, const char *value, char *out, Err *err)
{
    if (strcmp(value, "\\t") == 0 || strcmp(value, "tab") == 0)
    {
        *out = '\t';
        return true;
    }
    if (strlen(value) != 1)
    {
        cli_usage_error(err, cmd, "%s takes a single character, got \"%s\"", opt, value);
        return false;
    }
    *out = value[0];
    return true;
}

static bool
parse_max_rejects(const char *cmd, const char *value, ImportOptions *o, Err *err)
{
    size_t len = strlen(value);
    char *end = NULL;

    if (len > 1 && value[len - 1] == '%')
    {
        double pct = strtod(value, &end);
        if (end != value + len - 1 || pct < 0 || pct > 100)
        {
            cli_usage_error(err, cmd, "invalid --max-rejects \"%s\": expected N or P%%", value);
            return false;
        }
        o->common.max_rejects_pct = pct;
        return true;
    }
    {
        long n;
        if (!cli_parse_long(cmd, "--max-rejects", value, 0, 2000000000L, &n, err))
            return false;
        o->common.max_rejects = (uint64_t) n;
    }
    return true;
}

/* An ignored column's name may repeat in the header (every copy is skipped)
 * unless the name also picks one column: the event time, the ids, or a
 * placeholder of the --source-ref template. */
static bool
may_repeat(const ImportOptions *o, const char *name)
{
    const char *time_column = o->common.time_column ? o->common.time_column : "created_at";
    size_t len = strlen(name);

    if (strcmp(name, time_column) == 0 ||
        (o->common.id_column && strcmp(name, o->common.id_column) == 0) ||
        (o->common.key_map_column && strcmp(name, o->common.key_map_column) == 0))
        return false;
    for (const char *p = o->common.source_ref; p && (p = strchr(p, '{')) != NULL; p++)
        if (strncmp(p + 1, name, len) == 0 && p[1 + len] == '}')
            return false;
    return true;
}

/* Checks that need no database, before anything is read: a conflict
 * between options, a file that cannot be written at the end. */
static bool
import_check_options(const char *cmd, const ImportOptions *o, const char *report_json, Err *err)
{
    for (size_t i = 0; i < o->common.nignore; i++)
        for (size_t m = 0; m < o->common.nmaps; m++)
            if (strcmp(o->common.ignore[i], o->common.maps[m].from) == 0)
            {
                char pn[256];
                cli_usage_error(err, cmd, "--ignore-column %s conflicts with --map %s=...: "
                                          "a column is either skipped or mapped",
                                err_printable(o->common.ignore[i], pn, sizeof pn), pn);
                return false;
            }
    if (o->rejects_path != NULL && strcmp(o->rejects_path, "-") == 0)
    {
        cli_usage_error(err, cmd, "--rejects must name a file, not '-' (standard output "
                                  "carries the report)");
        return false;
    }
    if (o->late_path != NULL && strcmp(o->late_path, "-") == 0)
    {
        cli_usage_error(err, cmd, "--late-rows must name a file, not '-' (standard output "
                                  "carries the report)");
        return false;
    }
    if (!csv_options_check(&o->csv, err))
    {
        err_hint(err, "Try \"v7fill %s --help\".", cmd);
        return false;
    }
    return report_json == NULL || import_report_check_path(report_json, err);
}

static int
import_main(int argc, char **argv, GlobalOpts *g, Err *err, bool plan)
{
    const char *cmd = plan ? "plan" : "import";
    static const struct option longopts[] = {
        {"time-column", required_argument, NULL, CLI_OPT_TIME_COLUMN},
        {"time-format", required_argument, NULL, CLI_OPT_TIME_FORMAT},
        {"input-timezone", required_argument, NULL, OPT_INPUT_TZ},
        {"id-column", required_argument, NULL, OPT_ID_COLUMN},
        {"source-ref", required_argument, NULL, CLI_OPT_SOURCE_REF},
        {"map", required_argument, NULL, OPT_MAP},
        {"ignore-column", required_argument, NULL, OPT_IGNORE},
        {"header", no_argument, NULL, OPT_HEADER},
        {"no-header", no_argument, NULL, OPT_NO_HEADER},
        {"delimiter", required_argument, NULL, OPT_DELIMITER},
        {"quote", required_argument, NULL, OPT_QUOTE},
        {"escape", required_argument, NULL, OPT_ESCAPE},
        {"null", required_argument, NULL, OPT_NULL},
        {"encoding", required_argument, NULL, OPT_ENCODING},
        {"batch-rows", required_argument, NULL, CLI_OPT_BATCH_ROWS},
        {"batch-bytes", required_argument, NULL, OPT_BATCH_BYTES},
        {"jobs", required_argument, NULL, CLI_OPT_JOBS},
        {"rejects", required_argument, NULL, OPT_REJECTS},
        {"max-rejects", required_argument, NULL, OPT_MAX_REJECTS},
        {"max-future", required_argument, NULL, CLI_OPT_MAX_FUTURE},
        {"lookup-table", required_argument, NULL, CLI_OPT_LOOKUP_TABLE},
        {"keep-ref-text", no_argument, NULL, OPT_KEEP_REF},
        {"lookup-keys", required_argument, NULL, OPT_LOOKUP_KEYS},
        {"key-map", required_argument, NULL, CLI_OPT_KEY_MAP},
        {"granularity", required_argument, NULL, OPT_GRANULARITY},
        {"window-tz", required_argument, NULL, OPT_WINDOW_TZ},
        {"lock-timeout", required_argument, NULL, OPT_LOCK_TIMEOUT},
        {"no-analyze", no_argument, NULL, CLI_OPT_NO_ANALYZE},
        {"skip-finished", no_argument, NULL, OPT_SKIP_FINISHED},
        {"record-every", required_argument, NULL, OPT_RECORD_EVERY},
        {"report-json", required_argument, NULL, OPT_REPORT_JSON},
        {"json", no_argument, NULL, OPT_JSON},
        {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
        {"retention", required_argument, NULL, CLI_OPT_RETENTION},
        {"near-cutoff", required_argument, NULL, OPT_NEAR_CUTOFF},
        {"keep-expired", no_argument, NULL, OPT_KEEP_EXPIRED},
        {"new-source-ref", no_argument, NULL, OPT_NEW_SOURCE_REF},
        {"late-rows", required_argument, NULL, OPT_LATE_ROWS},
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ImportOptions o;
    ColumnMap *maps = NULL;
    size_t nmaps = 0;
    const char **ignore = NULL;
    size_t nignore = 0;
    const char **repeat_ok = NULL;
    const char *report_json = NULL;
    bool json = false;
    ImportStats st;
    PgConn *conn = NULL;
    int status = 0;
    int c;
    long n;

    import_options_default(&o);
    o.common.plan = plan;
    o.common.progress = log_current_level >= LOG_LEVEL_INFO;
    while ((c = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "hj:", longopts, NULL)) != -1)
    {
        int shared = cli_pipeline_option(cmd, c == 'j' ? CLI_OPT_JOBS : c, optarg, &o.common, err);

        if (shared < 0)
        {
            status = 2;
            goto out;
        }
        if (shared > 0)
            continue;
        switch (c)
        {
            case OPT_INPUT_TZ:
                o.common.input_tz = optarg;
                break;
            case OPT_ID_COLUMN:
                o.common.id_column = optarg;
                break;
            case OPT_MAP:
                if (!cli_parse_map(cmd, optarg, &maps, &nmaps, err))
                {
                    status = 2;
                    goto out;
                }
                break;
            case OPT_IGNORE:
                ignore = xrealloc(ignore, (nignore + 1) * sizeof *ignore);
                ignore[nignore++] = optarg;
                break;
            case OPT_HEADER:
                o.csv.header = true;
                break;
            case OPT_NO_HEADER:
                o.csv.header = false;
                break;
            case OPT_DELIMITER:
                if (!single_char(cmd, "--delimiter", optarg, &o.csv.delimiter, err))
                {
                    status = 2;
                    goto out;
                }
                break;
            case OPT_QUOTE:
                if (!single_char(cmd, "--quote", optarg, &o.csv.quote, err))
                {
                    status = 2;
                    goto out;
                }
                break;
            case OPT_ESCAPE:
                if (!single_char(cmd, "--escape", optarg, &o.csv.escape, err))
                {
                    status = 2;
                    goto out;
                }
                break;
            case OPT_NULL:
                o.csv.null_string = optarg;
                break;
            case OPT_ENCODING:
                if (strcasecmp(optarg, "UTF8") != 0 && strcasecmp(optarg, "UTF-8") != 0)
                {
                    status = cli_usage_error(err, cmd,
                                             "unsupported --encoding \"%s\": only UTF8 input is "
                                             "supported (convert with iconv first)",
                                             optarg);
                    goto out;
                }
                o.csv.check_utf8 = true;
                break;
            case OPT_BATCH_BYTES:
            {
                uint64_t size;

                if (!cli_parse_size(cmd, "--batch-bytes", optarg, 1024, BATCH_MAX_BYTES, &size,
                                    err))
                {
                    status = 2;
                    goto out;
                }
                o.common.batch_bytes = (size_t) size;
                break;
            }
            case OPT_REJECTS:
                o.rejects_path = optarg;
                break;
            case OPT_MAX_REJECTS:
                if (!parse_max_rejects(cmd, optarg, &o, err))
                {
                    status = 2;
                    goto out;
                }
                break;
            case OPT_KEEP_REF:
                o.common.keep_ref_text = true;
                break;
            case OPT_LOOKUP_KEYS:
                if (strcmp(optarg, "ordered") == 0)
                    o.common.lookup_keys = LOOKUP_KEYS_ORDERED;
                else if (strcmp(optarg, "hashed") == 0)
                    o.common.lookup_keys = LOOKUP_KEYS_HASHED;
                else
                {
                    err_set(err, EC_USAGE, "--lookup-keys: \"%s\" is not ordered or hashed", optarg);
                    status = 2;
                    goto out;
                }
                break;
            case OPT_GRANULARITY:
                if (!granularity_parse(optarg, &o.common.granularity, err))
                {
                    err->code = EC_USAGE;
                    status = 2;
                    goto out;
                }
                break;
            case OPT_WINDOW_TZ:
                o.common.window_tz = optarg;
                break;
            case OPT_LOCK_TIMEOUT:
                if (!cli_parse_long(cmd, "--lock-timeout", optarg, 1, 3600000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.common.lock_timeout_ms = (int) n;
                break;
            case OPT_SKIP_FINISHED:
                o.skip_finished = true;
                break;
            case OPT_NEW_SOURCE_REF:
                o.new_source_ref = true;
                break;
            case OPT_RECORD_EVERY:
                if (!cli_parse_long(cmd, "--record-every", optarg, 0, 86400, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.record_every_s = (int) n;
                break;
            case OPT_REPORT_JSON:
                report_json = optarg;
                break;
            case OPT_JSON:
                json = true;
                break;
            case OPT_NO_PROGRESS:
                o.common.progress = false;
                break;
            case OPT_NEAR_CUTOFF:
                if (!cli_parse_duration("--near-cutoff", optarg, &o.common.near_cutoff_us, err))
                {
                    status = 2;
                    goto out;
                }
                break;
            case OPT_KEEP_EXPIRED:
                o.common.keep_expired = true;
                break;
            case OPT_LATE_ROWS:
                o.late_path = optarg;
                break;
            CLI_GLOBAL_CASES(c, g, goto out);
            case 'h':
                import_usage(stdout, cmd);
                goto out;
            default:
                status = cli_usage_error(err, cmd, "unknown or incomplete option");
                goto out;
        }
    }
    if (argc - optind < 2)
    {
        status = cli_usage_error(err, cmd, "\"%s\" needs a TABLE and at least one FILE", cmd);
        goto out;
    }
    o.common.table = argv[optind];
    o.files = (const char *const *) argv + optind + 1;
    o.nfiles = (size_t) (argc - optind - 1);
    o.common.maps = maps;
    o.common.nmaps = nmaps;
    o.common.ignore = ignore;
    o.common.nignore = nignore;
    repeat_ok = xcalloc(nignore ? nignore : 1, sizeof *repeat_ok);
    for (size_t i = 0; i < nignore; i++)
        if (may_repeat(&o, ignore[i]))
            repeat_ok[o.csv.nrepeat_ok++] = ignore[i];
    o.csv.repeat_ok = repeat_ok;
    if (json || log_current_level < LOG_LEVEL_INFO) /* -q may follow the command */
        o.common.progress = false;
    if (!import_check_options(cmd, &o, report_json, err))
    {
        status = err->code == EC_USAGE ? 2 : 1;
        goto out;
    }

    if (!pg_connect(g->conninfo, &conn, err))
    {
        status = 1;
        goto out;
    }
    interrupt_install();
    if (!import_run(conn, &o, &st, err))
        status = 1;
    if (st.read > 0 || status == 0)
    {
        /* With --report-json - stdout carries the JSON alone: the table goes
         * to stderr, and --json prints nothing more. */
        bool json_to_stdout = report_json != NULL && strcmp(report_json, "-") == 0;

        if (json && !json_to_stdout)
        {
            char *text = import_report_json(&st, plan);
            if (text)
                printf("%s\n", text);
            free(text);
        }
        else if (!json)
            import_report_print(json_to_stdout ? stderr : stdout, &st, plan);
    }
    if (report_json)
    {
        Err rerr = {0};
        if (!import_report_write_json(report_json, &st, plan, &rerr))
        {
            if (status == 0)
            {
                *err = rerr;
                status = 1;
            }
            else
                log_warn("%s", rerr.msg);
        }
    }
    import_stats_free(&st);
out:
    pg_close(conn);
    free(maps);
    free(ignore);
    free(repeat_ok);
    return status;
}

int
cmd_import(int argc, char **argv, GlobalOpts *g, Err *err)
{
    return import_main(argc, argv, g, err, false);
}

int
cmd_plan(int argc, char **argv, GlobalOpts *g, Err *err)
{
    return import_main(argc, argv, g, err, true);
}
