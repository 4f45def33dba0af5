/*
 * The shared pipeline's options (PipelineOptions) that several commands take,
 * parsed in one place so that each command takes the same values (cli.h).
 */
#include "cli.h"

int
cli_pipeline_option(const char *command, int c, const char *arg, PipelineOptions *common,
                    Err *err)
{
    long n;

    switch (c)
    {
        case CLI_OPT_BATCH_ROWS:
            if (!cli_parse_long(command, "--batch-rows", arg, 1, 1000000, &n, err))
                return -1;
            common->batch_rows = (size_t) n;
            return 1;
        case CLI_OPT_JOBS:
            if (!cli_parse_long(command, "--jobs", arg, 1, 1024, &n, err))
                return -1;
            common->jobs = (int) n;
            return 1;
        case CLI_OPT_NO_ANALYZE:
            common->analyze = false;
            return 1;
        case CLI_OPT_MAX_FUTURE:
            return cli_parse_duration("--max-future", arg, &common->max_future_us, err) ? 1 : -1;
        case CLI_OPT_TIME_COLUMN:
            common->time_column = arg;
            return 1;
        case CLI_OPT_TIME_FORMAT:
            common->time_format = arg;
            return 1;
        case CLI_OPT_SOURCE_REF:
            common->source_ref = arg;
            return 1;
        case CLI_OPT_LOOKUP_TABLE:
            common->lookup_table = arg;
            return 1;
        case CLI_OPT_KEY_MAP:
            common->key_map_column = arg;
            return 1;
        case CLI_OPT_RETENTION:
            common->retention = arg;
            return 1;
        default:
            return 0;
    }
}
