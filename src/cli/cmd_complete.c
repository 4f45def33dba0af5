/*
 * v7fill __complete-tables: the tables a command can take as TABLE, one a
 * line, for the bash completion (contrib/v7fill.bash-completion), which then
 * needs no psql.  Hidden from --help; connects as every command does (-d).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "v7fill/catalog.h"

int
cmd_complete_tables(int argc, char **argv, GlobalOpts *g, Err *err)
{
    PgConn *conn = NULL;
    char **names = NULL;
    size_t n = 0;
    int status = 0;

    (void) argv;
    if (argc != 1)
        return cli_usage_error(err, NULL, "\"__complete-tables\" takes no arguments");
    if (!pg_connect(g->conninfo, &conn, err))
        return 1;
    if (!catalog_list_targets(conn, &names, &n, err))
        status = 1;
    for (size_t i = 0; i < n; i++)
    {
        printf("%s\n", names[i]);
        free(names[i]);
    }
    free(names);
    pg_close(conn);
    return status;
}
